--- GEMM speed. On a GPU: TFLOP/s of the Hopper GEMMs (examples/hopper/gemm.lua,
-- f32 output, and examples/hopper/gemm_fast.lua, bf16 output, one CTA per SM)
-- at 4096^3 and 8192^3, median of timed launches with device events. Without
-- one: the emulator's time for the small GEMMs (256x256x128) of the Ampere
-- and Hopper examples, checked against their CPU references.
-- usage: luaptx bench/gemm.lua [reps]
local median = require("bench.common").median
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"

local reps = tonumber(arg and arg[1]) or 20
local dev = runtime.device()

if dev.kind ~= "cuda" then
  -- launch: the emulator running the kernel (until it is idle); the
  -- columns after it are what came before each launch: the trace (each
  -- check builds its kernel afresh), decoding for the emulator, binding
  -- shapes and packing parameters
  print(("no GPU: emulator times on %s (each run checked against its CPU reference), median of 3 runs"):format(dev.name))
  print(("%-26s %-12s %10s %8s %8s %8s %12s"):format("kernel", "size", "launch ms", "trace", "decode", "pack", "max abs err"))
  for _, e in ipairs { { "examples.ampere.gemm", "ampere gemm" }, { "examples.ampere.gemm_pipelined", "ampere pipelined" },
                       { "examples.ampere.gemm_2stage", "ampere 2-stage 64x64" }, { "examples.ampere.gemm_fast", "ampere fast 128x128" },
                       { "examples.hopper.gemm", "hopper gemm (TMA+wgmma)" },
                       { "examples.hopper.gemm_fast", "hopper fast (cluster 2)", { SMS = 2 } } } do
    local m = require(e[1])
    local launch, trace, decode, pack, err, ok = {}, {}, {}, {}, 0, true
    for r = 1, 3 do
      local good, report = m.check(256, 256, 128, e[3])
      ok = ok and good
      launch[r], err = report.ms, math.max(err, report.max_abs or 0)
      trace[r], decode[r], pack[r] = report.before.trace, report.before.load, report.before.pack
    end
    print(("%-26s %-12s %10.1f %8.2f %8.2f %8.2f %12.3g%s"):format(e[2], "256x256x128", median(launch), median(trace),
      median(decode), median(pack), err, ok and "" or "  MISMATCH"))
  end
  return
end

--- Median ms of reps launches of examples/hopper/<name>.lua at n^3 (opts: its build options).
local function time_gemm(name, n, opts)
  local gemm = require("examples.hopper." .. name)
  local k = gemm.build(n, n, n, opts)
  local inputs = gemm.inputs(n, n, n, 1)
  local args = {}
  for i, a in ipairs(gemm.args(inputs)) do args[i] = tensor.from_table(a[1], a.dtype, a[2]) end
  return require("bench.perf").time(dev, runtime.prepare(k, unpack(args)), reps)
end

print(("device: %s"):format(dev.name))
print(("%-10s %-10s %12s %12s"):format("kernel", "size", "ms", "TFLOP/s"))
-- gemm_fast at its defaults: 132 CTAs (an H100 SXM's SMs; one CTA per SM at 208 KB of shared memory)
for _, name in ipairs { "gemm", "gemm_fast" } do
  for _, n in ipairs { 4096, 8192 } do
    local t = time_gemm(name, n, {})
    print(("%-10s %-10s %12.3f %12.1f"):format(name, n .. "^3", t, 2 * n * n * n / (t * 1e-3) / 1e12))
  end
end
