--- `luaptx fmt <in.ptx|-> [--canonical] [-o out.ptx]`: parse PTX into the IR and
-- print it back, losslessly (byte-identical unless the input is malformed)
-- or in the canonical layout the tracer emits. "-" reads standard input.
local ptxparse = require "pyptx.ptxparse"

local M = {}

--- Entry point with the parsed command line (bin/luaptx.lua's table):
-- o.input (a path or "-"), o.output, o.canonical; returns the exit status.
function M.main(o)
  local text = o.input == "-" and io.read("*a") or ptxparse.read_file(o.input)
  local m = ptxparse.parse(text, o.input == "-" and "<stdin>" or o.input)
  local out = o.canonical and m:canonical() or m:lossless()
  if o.output then
    local f, err = io.open(o.output, "wb")
    if not f then error("fmt: cannot write " .. err, 0) end
    f:write(out)
    f:close()
  else
    io.write(out)
  end
  return 0
end

return M
