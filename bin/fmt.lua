--- `luaptx fmt <in.ptx|-> [--canonical] [-o out.ptx]`: parse PTX into the IR and
-- print it back, losslessly (byte-identical unless the input is malformed)
-- or in the canonical layout the tracer emits. "-" reads standard input.
local ptxparse = require "pyptx.ptxparse"

local M = {}

--- Entry point with the parsed command line (bin/luaptx.lua's table):
-- o.input (a path or "-"), o.output, o.canonical; returns the exit status.
function M.main(o)
  local m = o.input == "-" and ptxparse.parse(io.read("*a"), "<stdin>") or ptxparse.parse_file(o.input)
  if o.output then
    local ok, err = pcall(m.write, m, o.output, o.canonical)
    if not ok then error("fmt: " .. err, 0) end
  else
    io.write(o.canonical and m:canonical() or m:lossless())
  end
  return 0
end

return M
