--- `luaptx transpile in.ptx [--name N] [--sugar] [-o out.lua]`: PTX -> a
-- kernel script in the pyptx DSL that, traced (`luaptx ptx out.lua`),
-- re-emits the module's kernels.
local ffi = require "ffi"
local core = require "pyptx.core"
local ptxparse = require "pyptx.ptxparse"

local M = {}

local USAGE = "usage: luaptx transpile <in.ptx> [--name N] [--sugar] [-o out.lua]"

--- Parse the arguments after "transpile".
local function parse_args(args)
  local o = {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "-o" or a == "--name" then
      o[a == "-o" and "output" or "name"] = args[i + 1] or error("transpile: " .. a .. " needs a value", 0)
      i = i + 1
    elseif a == "--sugar" then
      o.sugar = true
    elseif a:sub(1, 1) == "-" then error("transpile: unknown option " .. a .. "\n" .. USAGE, 0)
    elseif o.input then error("transpile: one input file at a time\n" .. USAGE, 0)
    else o.input = a end
    i = i + 1
  end
  return o
end

--- The Lua script for a PTX text (raises "transpile: ..." when it cannot).
function M.transpile(text, source)
  local m = ptxparse.parse(text, source)
  local out, len = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  if core.transpile(m.ptr, source or "PTX", out, len) ~= 0 then error(core.error_message(), 0) end
  return ffi.string(out[0], len[0])
end

--- Entry point; returns the exit status.
function M.main(args)
  local o = parse_args(args)
  if not o.input then error(USAGE, 0) end
  local script = M.transpile(ptxparse.read_file(o.input), o.input)
  if o.sugar then script = require("pyptx.sugar").sugar(script) end
  if o.name then
    script = script:gsub('kernel "([%w_$]+)"', function() return ('kernel "%s"'):format(o.name) end, 1)
  end
  if o.output then
    local f, err = io.open(o.output, "wb")
    if not f then error("transpile: cannot write " .. o.output .. ": " .. err, 0) end
    f:write(script)
    f:close()
  else
    io.write(script)
  end
  return 0
end

return M
