--- `luaptx fmt in.ptx [--canonical] [-o out.ptx]`: parse PTX into the IR and
-- print it back, losslessly (byte-identical unless the input is malformed)
-- or in the canonical layout the tracer emits. "-" reads standard input.
local ptxparse = require "pyptx.ptxparse"

local M = {}

local USAGE = "usage: luaptx fmt <in.ptx|-> [--canonical] [-o out.ptx]"

--- Parse the arguments after "fmt".
local function parse_args(args)
  local o = {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "--canonical" then o.canonical = true
    elseif a == "-o" then
      o.output = args[i + 1] or error("fmt: -o needs a file name", 0)
      i = i + 1
    elseif a == "-h" or a == "--help" then o.help = true
    elseif a:sub(1, 1) == "-" and a ~= "-" then error("fmt: unknown option " .. a .. "\n" .. USAGE, 0)
    elseif o.input then error("fmt: one input file at a time\n" .. USAGE, 0)
    else o.input = a end
    i = i + 1
  end
  return o
end

--- Entry point; returns the exit status.
function M.main(args)
  local o = parse_args(args)
  if o.help then print(USAGE) return 0 end
  if not o.input then error(USAGE, 0) end
  local text = o.input == "-" and io.read("*a") or ptxparse.read_file(o.input)
  local m = ptxparse.parse(text, o.input == "-" and "<stdin>" or o.input)
  local out = o.canonical and m:canonical() or m:lossless()
  if o.output then
    local f, err = io.open(o.output, "wb")
    if not f then error("fmt: cannot write " .. o.output .. ": " .. err, 0) end
    f:write(out)
    f:close()
  else
    io.write(out)
  end
  return 0
end

return M
