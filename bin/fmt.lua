--- `luaptx fmt <in.ptx|-> [--canonical] [-o out.ptx]`: parse PTX into the IR and
-- print it back, losslessly (byte-identical unless the input is malformed)
-- or in the canonical layout the tracer emits. "-" reads standard input.
local ptxparse = require "pyptx.ptxparse"

local M = {}

--- Entry point with the parsed command line (bin/luaptx.lua's table):
-- o.input (a path or "-"), o.output, o.canonical; returns the exit status.
function M.main(o)
  local input = o.input == "-" and { text = io.read("*a"), name = "<stdin>" } or o.input
  ptxparse.format(input, o.output, o.canonical)
  return 0
end

return M
