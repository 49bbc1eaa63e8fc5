--- The performance table of one run (issue 24, docs/performance.md): on the
-- current device, every GEMM at 4096^3, 8192^3 and a skinny shape beside
-- cuBLAS; each memory-bound kernel at B=2048 N=8192 in GB/s and % of the
-- GPU's HBM peak beside a device-to-device copy; flash attention in
-- TFLOP/s; the launch latency. Each kernel is checked against its
-- reference in the same run: GEMMs at the timed shape on sampled elements
-- (exact double-precision dot products of the bf16 inputs), the
-- memory-bound kernels on every element at the timed shape, flash
-- attention on every element at 2 heads of 1024 tokens (its CPU reference
-- at the timed 16 x 4096 would take minutes). On the emulator (no GPU) the
-- shapes are small, so that a dry run of the whole table is quick; the
-- table says which shapes ran. Prints the dated table and writes it to
-- --out (default build/perf.md beside the binary). Exit status 1 when a
-- check fails.
-- usage: luaptx bench/perf.lua [--reps N] [--out FILE] [--helper PATH]
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local floats = require "pyptx.runtime.floats"
local gpus = require "pyptx.tools.gpus"
local core = require "pyptx.core"
local sys = require "pyptx.core.sys"
local ffi = require "ffi"
local common = require "bench.common"
local pyptx = require "pyptx"

local M = {}

--- The shapes of a run: the GPU's (issue 24) or the emulator's small ones.
M.SHAPES = {
  gpu = { gemm = { { 4096, 4096, 4096 }, { 8192, 8192, 8192 }, { 256, 8192, 8192, skinny = true } },
          rows = { 2048, 8192 }, flash = { 16, 4096, 64 }, flash_check = { 2, 1024, 64 }, copy_mib = 512, reps = 20,
          samples = 512 },
  emu = { gemm = { { 256, 256, 128 }, { 256, 512, 256, skinny = true } },
          rows = { 16, 1024 }, flash = { 1, 128, 64 }, flash_check = { 1, 128, 64 }, copy_mib = 0, reps = 2,
          samples = 64 },
}

--- The GEMM examples a device runs by its arch: { label, module, opts, b };
-- opts go to the example's build; b: how the example takes B, "nk" (N x K,
-- D = A B^T: examples/lib/gemm_data) or "kn" (K x N, D = A B: the Ampere
-- examples). Each variant whose k-loop SASS docs/performance.md compares
-- (gemm_fast unrolled, the bf16 and 2-SM Blackwell forms) gets its own row.
function M.gemms(cc)
  local list = {}
  if cc >= 80 then list[#list + 1] = { "ampere/gemm_fast", "examples.ampere.gemm_fast", b = "kn" } end
  if cc >= 90 then
    list[#list + 1] = { "hopper/gemm", "examples.hopper.gemm", b = "nk" }
    list[#list + 1] = { "hopper/gemm_fast", "examples.hopper.gemm_fast", b = "nk" }
    list[#list + 1] = { "hopper/gemm_fast UNROLL=2", "examples.hopper.gemm_fast", { UNROLL = 2 }, b = "nk" }
  end
  if cc >= 100 then
    local bw = "examples.blackwell.gemm_persistent"
    list[#list + 1] = { "blackwell/gemm_persistent", bw, b = "nk" }
    list[#list + 1] = { "blackwell/gemm_persistent bf16", bw, { out = "bf16" }, b = "nk" }
    list[#list + 1] = { "blackwell/gemm_persistent 2-SM bf16", bw, { cta_group = 2, out = "bf16" }, b = "nk" }
  end
  return list
end

M.ROW_KERNELS = { "rms_norm", "layer_norm", "swiglu", "softmax" }

-- ------------------------------------------------------------- timing

--- Median milliseconds of reps calls of launch (after 3 warm-ups): device
-- events on a GPU, the wall clock (after a sync) on the emulator.
function M.time(dev, launch, reps)
  for _ = 1, math.min(3, reps) do launch() end
  dev:sync()
  local times = {}
  if dev.kind == "cuda" then
    local e0, e1, ms = ffi.new("int32_t[1]"), ffi.new("int32_t[1]"), ffi.new("double[1]")
    for r = 1, reps do
      core.device_event_record(dev.handle, e0)
      launch()
      core.device_event_record(dev.handle, e1)
      core.device_event_elapsed(dev.handle, e0[0], e1[0], ms)
      times[r] = ms[0]
    end
  else
    for r = 1, reps do
      local t0 = common.now()
      launch()
      dev:sync()
      times[r] = (common.now() - t0) * 1e3
    end
  end
  return common.median(times)
end

--- The launch latency in microseconds: the wall time of n launches of an
-- empty kernel, each followed by a sync, over n.
function M.launch_latency(dev, n)
  local k = pyptx.kernel "perf_empty" { arch = "sm_80", block = { 32 }, function() pyptx.ptx.ret() end }
  local launch = runtime.prepare(k)
  launch(); dev:sync()
  local t0 = common.now()
  for _ = 1, n do launch(); dev:sync() end
  return (common.now() - t0) / n * 1e6
end

-- --------------------------------------------------------------- GEMMs

--- Element i (0-based) of a host buffer of dtype f32 or bf16.
local function element(buf, dtype, i)
  if dtype.name == "f32" then return floats.from_f32_bits(ffi.cast("uint32_t *", buf)[i]) end
  return floats.from_bf16(buf[i])
end

--- Check a GEMM's output D (M x N) on n sampled elements (and the four
-- corners) against double-precision dot products of the bf16 inputs: a
-- (M x K) and b, N x K (layout "nk") or K x N ("kn"), flat 1-based arrays.
-- Returns ok and the worst |error|.
function M.check_gemm_samples(out, inp, tol, n, layout)
  local Md, N, K = inp.M, inp.N, inp.K
  local buf = out:to_host()
  local picks = { { 0, 0 }, { 0, N - 1 }, { Md - 1, 0 }, { Md - 1, N - 1 } }
  math.randomseed(7)
  for _ = 1, n do picks[#picks + 1] = { math.random(0, Md - 1), math.random(0, N - 1) } end
  local ok, worst = true, 0
  for _, p in ipairs(picks) do
    local s, ai = 0, p[1] * K
    local bj, step = p[2] * K + 1, 1                      -- b[j][t] at bj + (t - 1) * step
    if layout == "kn" then bj, step = p[2] + 1, N end
    for t = 1, K do s = s + floats.round_bf16(inp.a[ai + t]) * floats.round_bf16(inp.b[bj + (t - 1) * step]) end
    local got = element(buf, out.dtype, p[1] * N + p[2])
    local err = math.abs(got - s)
    local allowed = tol.atol + tol.rtol * math.abs(s)
    if err ~= err or err > allowed then ok = false end   -- a NaN fails too
    worst = math.max(worst, err)
  end
  return ok, worst
end

--- One GEMM row: build at the shape, time it, check sampled elements.
local function gemm_row(dev, g, shape, inputs, tensors, cfg)
  local mod = require(g[2])
  local okb, k = pcall(mod.build, shape[1], shape[2], shape[3], g[3])
  if not okb then return { kernel = g[1], shape = shape, note = "not built: " .. tostring(k):gsub("\n.*", "") } end
  local launch = runtime.prepare(k, tensors.a, tensors[g.b])
  local ms = M.time(dev, launch, cfg.reps)
  dev:sync()
  local tol = mod.tolerance and mod.tolerance(shape[3], g[3] and g[3].out) or { atol = 1e-2, rtol = 1e-2 }  -- the example owns it
  local ok, worst = M.check_gemm_samples(launch.outputs[1], inputs, tol, cfg.samples, g.b)
  return { kernel = g[1], shape = shape, ms = ms, tflops = 2 * shape[1] * shape[2] * shape[3] / (ms * 1e-3) / 1e12,
           ok = ok, check = ("%d sampled elements, worst abs error %.2g"):format(cfg.samples + 4, worst) }
end

--- Every GEMM at every shape: rows { kernel, shape, ms, tflops, ok, check };
-- only (a Lua pattern, optional) keeps the GEMMs whose label matches.
function M.gemm_rows(dev, cfg, cc, only)
  local data = require "examples.lib.gemm_data"
  local rows = {}
  for _, shape in ipairs(cfg.gemm) do
    local inputs = data.inputs(shape[1], shape[2], shape[3], 1)
    local bf16 = pyptx.types.bf16
    local tensors = { a = tensor.from_table(inputs.a, bf16, { shape[1], shape[3] }, dev),   -- the same values of B
                      nk = tensor.from_table(inputs.b, bf16, { shape[2], shape[3] }, dev),  -- read N x K or K x N
                      kn = tensor.from_table(inputs.b, bf16, { shape[3], shape[2] }, dev) }
    for _, g in ipairs(M.gemms(cc)) do
      if not only or g[1]:find(only) then rows[#rows + 1] = gemm_row(dev, g, shape, inputs, tensors, cfg) end
    end
  end
  return rows
end

-- ---------------------------------------------------------- row kernels

--- The bytes a launch moves at least: every input read once, every output
-- written once.
local function bytes_moved(launch)
  local n = 0
  for _, t in ipairs(launch.inputs) do if tensor.is(t) then n = n + t.nbytes end end
  for _, t in ipairs(launch.outputs) do n = n + t.nbytes end
  return n
end

--- One memory-bound kernel at (B, N): its full check, then its time.
local function row_kernel(dev, name, arch_dir, cfg)
  local mod = require(("examples.%s.%s"):format(arch_dir, name))
  local B, N = cfg.rows[1], cfg.rows[2]
  local ok = mod.check(B, N)
  local inputs = mod.inputs(B, N, 1)
  local tensors = {}
  for i, a in ipairs(mod.args(inputs)) do tensors[i] = tensor.from_table(a[1], a.dtype or pyptx.types.f32, a[2], dev) end
  local launch = runtime.prepare(mod.build(B, N), unpack(tensors))
  local ms = M.time(dev, launch, cfg.reps)
  local bytes = bytes_moved(launch)
  return { kernel = arch_dir .. "/" .. name, B = B, N = N, ms = ms, bytes = bytes, gbs = bytes / (ms * 1e-3) / 1e9,
           ok = ok, check = "every element" }
end

--- The memory-bound kernels of the device's generation.
function M.row_rows(dev, cfg, cc)
  local dir = cc >= 100 and "blackwell" or cc >= 90 and "hopper" or "ampere"
  local rows = {}
  for _, name in ipairs(M.ROW_KERNELS) do rows[#rows + 1] = row_kernel(dev, name, dir, cfg) end
  return rows
end

-- -------------------------------------------------------------- flash

--- Flash attention: checked on every element at cfg.flash_check, timed at
-- cfg.flash (H, L, D) in TFLOP/s (4 H L^2 D, non-causal).
function M.flash_row(dev, cfg)
  local fa = require "examples.hopper.flash_attention"
  local c = cfg.flash_check
  local ok = fa.check(c[1], c[2], c[3])
  local H, L, D = cfg.flash[1], cfg.flash[2], cfg.flash[3]
  local inputs = fa.inputs(H, L, D, 1)
  local tensors = {}
  for i, a in ipairs(fa.args(inputs)) do tensors[i] = tensor.from_table(a[1], a.dtype, a[2], dev) end
  local launch = runtime.prepare(fa.build(H, L, D), unpack(tensors))
  local ms = M.time(dev, launch, cfg.reps)
  return { kernel = "hopper/flash_attention", H = H, L = L, D = D, ms = ms,
           tflops = 4 * H * L * L * D / (ms * 1e-3) / 1e12, ok = ok,
           check = ("every element at %d heads x %d tokens"):format(c[1], c[2]) }
end

-- ------------------------------------------------------------ cuBLAS

--- Run the helper (bench/cublas_gemm.cu, built) with args; its output line
-- or nil and why.
function M.helper(path, args)
  if not path or sys.kind(path) ~= "file" then return nil, "no cuBLAS helper (bench/cublas_gemm.cu, built with nvcc)" end
  local argv = { path }
  for i, a in ipairs(args) do argv[i + 1] = tostring(a) end
  local res, err = sys.run(argv, { merge = true, timeout = 300 })
  if not res then return nil, err end
  if res.status ~= 0 then return nil, res.stdout:gsub("\n$", "") end
  return res.stdout
end

--- The GPU's entry of pyptx.tools.gpus whose name is in the device's
-- name (the longest that matches: "H100 PCIe" before "H100"), or nil.
function M.gpu_of(name)
  local best
  local key = tostring(name):lower():gsub("[^%w]", "")
  for _, g in ipairs(gpus.GPUS) do
    local gk = g.name:lower():gsub("[^%w]", "")
    if key:find(gk, 1, true) and (not best or #gk > #best.key) then best = { g = g, key = gk } end
  end
  return best and best.g
end

return M
