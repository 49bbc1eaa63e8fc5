--- `luaptx transpile <in.ptx|-> [--name N] [--sugar] [-o out.lua]`: PTX -> a
-- kernel script in the pyptx DSL that, traced (`luaptx ptx out.lua`),
-- re-emits the module's kernels. "-" reads standard input.
local ffi = require "ffi"
local core = require "pyptx.core"
local ptxparse = require "pyptx.ptxparse"

local M = {}

--- The Lua script for a PTX text (raises "transpile: ..." when it cannot).
function M.transpile(text, source)
  local m = ptxparse.parse(text, source)
  local out, len = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  if core.transpile(m.ptr, source or "PTX", out, len) ~= 0 then error(core.error_message(), 0) end
  return ffi.string(out[0], len[0])
end

--- Entry point with the parsed command line (bin/luaptx.lua's table):
-- o.input (a path or "-": standard input), o.output, o.name, o.sugar;
-- returns the exit status.
function M.main(o)
  local stdin = o.input == "-"
  local script = M.transpile(stdin and io.read("*a") or ptxparse.read_file(o.input), stdin and "<stdin>" or o.input)
  if o.sugar then script = require("pyptx.tools.transpile_sugar").sugar(script) end
  if o.name then
    script = script:gsub('kernel "([%w_$]+)"', function() return ('kernel "%s"'):format(o.name) end, 1)
  end
  local ok, err = pcall(require("pyptx.core.sys").write_output, o.output, script)
  if not ok then error("transpile: " .. err, 0) end
  return 0
end

return M
