--- PTX -> cubin through the C compiler (nvJitLink, else ptxas) and the
-- content-addressed cache; errors keep the compiler's log with PTX line
-- numbers mapped back to the Lua lines that emitted them.
local ffi = require "ffi"
local core = require "pyptx.core"
local toolkit = require "pyptx.runtime.toolkit"
local argcheck = require "pyptx.args"

local M = {}

local compiler

--- The compiler of this Lua state (opened on first use).
function M.compiler()
  if compiler then return compiler end
  local c = core.compiler_open(core.ctx, nil)
  if c == nil then error(core.error_message(), 0) end
  compiler = ffi.gc(c, core.compiler_close)
  return compiler
end

--- "nvJitLink 13.0" or "ptxas ..." (what the cache keys include).
function M.identity()
  return ffi.string(core.compiler_identity(M.compiler()))
end

--- The cache directory in use; nil and the reason when the cache is off
-- (HOME unset, or a directory refused as not private).
function M.cache_dir()
  local c = M.compiler()
  local dir = ffi.string(core.compiler_cache_dir(c))
  if dir == "" then return nil, ffi.string(core.compiler_cache_off(c)) end
  return dir
end

--- Print the core's pending warnings (e.g. a corrupt cache entry), one a line.
local function flush_warning()
  local w = core.take_warning()
  for line in w:gmatch("[^\n]+") do io.stderr:write("luaptx: warning: ", line, "\n") end
end

--- Compile PTX text for arch. opts: line_info (default true), opt_level,
-- max_registers, force_ptxas, no_cache. Returns { data, size, key,
-- cache_hit, log }; raises with the mapped compiler log on failure.
function M.cubin(ptx, arch, opts)
  opts = opts or {}
  local c = M.compiler()
  local o = ffi.new("lpx_compile_opts", {
    opts.line_info == false and 0 or 1, opts.opt_level or -1, opts.max_registers or 0,
    opts.force_ptxas and 1 or 0, opts.no_cache and 1 or 0 })
  local out = ffi.new("lpx_cubin")
  local rc = core.compile(c, ptx, #ptx, arch, o, out)
  flush_warning()
  if rc < 0 then error(toolkit.map_lines(core.error_message(), ptx), 2) end
  return {
    data = ffi.string(out.data, out.size), size = tonumber(out.size), key = ffi.string(out.key),
    cache_hit = out.cache_hit == 1, log = out.log ~= nil and ffi.string(out.log) or "",
  }
end

--- The cubin of a kernel specialization (cached on the specialization).
function M.kernel_cubin(s, opts)
  if s.cubin and not (opts and opts.no_cache) then return s.cubin end
  s.cubin = M.cubin(s.ptx, s.arch, opts)
  return s.cubin
end

-- The cache calls raise the core's message as it is (it names the cache
-- directory and the reason; no Lua position would help).

--- Cache listing text, one entry per line.
function M.cache_list()
  local text = ffi.new("const char*[1]")
  if core.cache_list(M.compiler(), text) < 0 then error(core.error_message(), 0) end
  return ffi.string(text[0])
end

--- Remove every cache entry; returns how many.
function M.cache_clear()
  local n = ffi.new("int64_t[1]")
  if core.cache_clear(M.compiler(), n) < 0 then error(core.error_message(), 0) end
  return tonumber(n[0])
end

--- Cap the cache at bytes (evicts least recently used entries now).
function M.cache_limit(bytes)
  if core.cache_set_limit(M.compiler(), bytes) < 0 then error(core.error_message(), 0) end
end

--- { entries, bytes, hits, misses } (hits/misses of this process).
function M.cache_stats()
  local v = ffi.new("int64_t[4]")
  if core.cache_stats(M.compiler(), v, v + 1, v + 2, v + 3) < 0 then error(core.error_message(), 0) end
  return { entries = tonumber(v[0]), bytes = tonumber(v[1]), hits = tonumber(v[2]), misses = tonumber(v[3]) }
end

argcheck.sign(M, "compile", {
  cubin = { "ptx: string", "arch: string", "opts: table?" },
  kernel_cubin = { "s: table", "opts: table?" },
  cache_limit = { "bytes: integer" },
})

return M
