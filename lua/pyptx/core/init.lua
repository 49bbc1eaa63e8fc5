--- The FFI binding to luaptx's C core.
-- The host preloads "luaptx.core" with the core's declarations and a table
-- of entry points; this module declares them to LuaJIT's FFI and casts each
-- pointer to its function type, so calls are JIT-compiled C calls.
local ffi = require "ffi"

local M = {}

local host = require "luaptx.core"
ffi.cdef(host.cdef)

-- Each declaration in the cdef is one line: "ret name(args);".
local signatures = {}
for ret, name, args in host.cdef:gmatch("\n([%w_ ]-[%w_]+[%s%*]+)(lpx_[%w_]+)%(([^)]*)%);") do
  signatures[name] = ret .. "(*)(" .. args .. ")"
end

for name, ptr in pairs(host.fn) do
  local sig = signatures[name]
  if not sig then error("luaptx: no declaration for core function " .. name) end
  M[name:sub(5)] = ffi.cast(sig, ptr)
end

M.version = host.version
M.where = host.where
M.where_skip = host.where_skip   -- helper libraries: where() skips them too
-- Which chunks are luaptx's own, by how they were loaded: "module", "cli",
-- "helper" (marked by pyptx.helper) or nil (the user's).
M.own_source = host.own_source
-- The REPL's interrupt handling (src/lpx_lua.c): open, arm, take, close.
M.signals_open, M.signals_arm = host.signals_open, host.signals_arm
M.signals_take, M.signals_close = host.signals_take, host.signals_close
M.ctx = ffi.gc(M.ctx_new(), M.ctx_free)

--- The core's last error message.
function M.error_message()
  return ffi.string(M.ctx_error(M.ctx))
end

--- The core's pending warning (empty string when none).
function M.take_warning()
  return ffi.string(M.ctx_warning(M.ctx))
end

return M
