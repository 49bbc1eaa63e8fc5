--- Cold compile vs warm cache load per kernel, in milliseconds (median).
-- Cold: the compiler with the cache bypassed (nvJitLink's own time plus
-- our call); cached miss: a compile that also writes the entry; warm: a
-- load from the cache; then whole-process `luaptx ptx` against a warm
-- `luaptx compile`. usage: luaptx bench/compile.lua [repeats]
local compile = require "pyptx.runtime.compile"
local sys = require "pyptx.core.sys"
local common = require "bench.common"
local now, median = common.now, common.median
local repeats = tonumber(arg and arg[1]) or 9

local ffi = require "ffi"
ffi.cdef [[ int setenv(const char *, const char *, int); ]]

-- A private cache, so the benchmark neither reads nor pollutes the user's
-- (removed at the end, even when a compile fails).
local dir = sys.temp_dir()
ffi.C.setenv("LUAPTX_CACHE_DIR", dir, 1)

local examples = {
  { "examples.hopper.rms_norm", "sm_90a" }, { "examples.hopper.softmax", "sm_90a" },
  { "examples.ampere.layer_norm", "sm_80" }, { "examples.blackwell.swiglu", "sm_100a" },
}

--- Time every example and print its row.
local function run_all()
  print(("compiler: %s"):format(compile.identity()))
  print(("%-28s %-8s %10s %12s %10s"):format("kernel", "arch", "cold ms", "miss+store", "warm ms"))
  for _, e in ipairs(examples) do
    local ok, mod = pcall(require, e[1])
    if ok then
      local k = mod.kernels[1]
      local s = k:specialize {}
      local cold, miss, warm = {}, {}, {}
      for r = 1, repeats do
        local t0 = now()
        compile.cubin(s.ptx, s.arch, { no_cache = true })
        cold[r] = now() - t0
        local ptx = s.ptx .. ("// variant %d %f\n"):format(r, now())   -- a new key: a real miss
        t0 = now()
        compile.cubin(ptx, s.arch)
        miss[r] = now() - t0
        t0 = now()
        local c = compile.cubin(ptx, s.arch)
        warm[r] = now() - t0
        assert(c.cache_hit, "expected a cache hit")
      end
      print(("%-28s %-8s %10.2f %12.2f %10.3f"):format(k.name, s.arch, median(cold) * 1e3, median(miss) * 1e3, median(warm) * 1e3))
    else
      print(("%-28s (not available: %s)"):format(e[1], tostring(mod):match("[^\n]*")))
    end
  end
  compile.cache_clear()
end

--- Whole process, median of repeats: `luaptx ptx` against a warm
-- `luaptx compile` of the same script (the cache holds every cubin, so
-- the second should cost no more than the first: no compiler is loaded).
local function whole_process()
  local bin = os.getenv("LUAPTX_BIN") or (arg and arg[-1]) or "build/luaptx"
  local script = "examples/hopper/rms_norm.lua"
  local function time(argv)
    local xs = {}
    for r = 1, repeats do
      local t0 = now()
      local res = sys.run(argv, { env = { LUAPTX_CACHE_DIR = dir } })
      xs[r] = now() - t0
      assert(res and res.status == 0, table.concat(argv, " ") .. " failed: " .. (res and res.stderr or ""))
    end
    return median(xs) * 1e3
  end
  sys.run({ bin, "compile", script }, { env = { LUAPTX_CACHE_DIR = dir } })   -- warm the cache
  local ptx_ms = time { bin, "ptx", script, "-o", dir .. "/out.ptx" }
  local warm_ms = time { bin, "compile", script }
  print(("whole process, %s: luaptx ptx %.2f ms, warm luaptx compile %.2f ms (+%.2f)"):format(
    script, ptx_ms, warm_ms, warm_ms - ptx_ms))
end

local ok, err = pcall(function() run_all() whole_process() end)
sys.remove_tree(dir)
if not ok then error(err, 0) end
