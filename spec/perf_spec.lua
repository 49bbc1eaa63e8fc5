-- bench/perf.lua and bench/gpu_check.lua (make gpu-check, the kit of make
-- gpu-kit): the GEMM check on sampled elements catches a wrong element and
-- a wrong layout of B, and the whole run goes through on the emulator at
-- its small shapes (--dry-run), writing the dated table with every row
-- checked.
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local floats = require "pyptx.runtime.floats"
local pyptx = require "pyptx"
local perf = require "bench.perf"
local H = require "spec.helpers"

--- D = A B^T (b: N x K) in double precision from the bf16-rounded values.
local function product(a, b, Md, N, K)
  local d = {}
  for i = 0, Md - 1 do
    for j = 0, N - 1 do
      local s = 0
      for t = 1, K do s = s + floats.round_bf16(a[i * K + t]) * floats.round_bf16(b[j * K + t]) end
      d[i * N + j + 1] = s
    end
  end
  return d
end

describe("bench/perf.lua", function()
  local Md, N, K = 8, 12, 16
  local inp = { M = Md, N = N, K = K, a = {}, b = {} }
  math.randomseed(3)
  for i = 1, Md * K do inp.a[i] = math.random() * 2 - 1 end
  for i = 1, N * K do inp.b[i] = math.random() * 2 - 1 end
  local tol = { atol = 1e-5 * K, rtol = 1e-3 }
  local dev = runtime.open("emu")

  it("accepts the exact product, in either layout of B", function()
    local d = product(inp.a, inp.b, Md, N, K)
    local out = tensor.from_table(d, pyptx.types.f32, { Md, N }, dev)
    assert.is_true((perf.check_gemm_samples(out, inp, tol, 32, "nk")))
    local bt = {}                                       -- the same B stored K x N
    for j = 0, N - 1 do for t = 0, K - 1 do bt[t * N + j + 1] = inp.b[j * K + t + 1] end end
    assert.is_true((perf.check_gemm_samples(out, { M = Md, N = N, K = K, a = inp.a, b = bt }, tol, 32, "kn")))
  end)

  it("catches a wrong corner element and a B read in the wrong layout", function()
    local d = product(inp.a, inp.b, Md, N, K)
    d[Md * N] = d[Md * N] + 0.5                         -- the last corner, always sampled
    local ok, worst = perf.check_gemm_samples(tensor.from_table(d, pyptx.types.f32, { Md, N }, dev), inp, tol, 0, "nk")
    assert.is_false(ok)
    assert.is_true(worst >= 0.5)
    d[Md * N] = d[Md * N] - 0.5
    assert.is_false((perf.check_gemm_samples(tensor.from_table(d, pyptx.types.f32, { Md, N }, dev), inp, tol, 32, "kn")))
  end)

  it("finds the GPU's HBM peak by the device's name, the longest name first", function()
    assert.equal("H100", perf.gpu_of("NVIDIA H100 80GB HBM3").name)
    assert.equal("H100-PCIe", perf.gpu_of("NVIDIA H100 PCIe").name)
    assert.equal(4800, perf.gpu_of("NVIDIA H200").bw)
    assert.is_nil(perf.gpu_of("emu (CPU emulator, 2 threads)"))
  end)
end)

describe("bench/gpu_check.lua --dry-run", function()
  it("runs the table on the emulator, every row checked, and writes it dated", function()
    local out_file = H.temp_dir() .. "/t.md"
    local out, err, status = H.luaptx({ "bench/gpu_check.lua", "--dry-run", "--skip-examples", "--out", out_file },
      { timeout = 600 })
    assert.equal(0, status, out .. err)
    local text = H.read(out_file)
    assert.matches("\n| %d%d%d%d%-%d%d%-%d%d %d%d:%d%d UTC | emu %(CPU emulator[^|]*| %- %(emulator%) | `luaptx bench/gpu_check.lua %-%-dry%-run` |", text)
    for _, k in ipairs { "ampere/gemm_fast", "hopper/gemm", "hopper/gemm_fast" } do
      assert.matches("\n| " .. k:gsub("%p", "%%%0") .. " | 256x256x128 | [%d.]+ | [%d.e+-]+ | %- | %- | ok: 68 sampled", text)
    end
    for _, k in ipairs(perf.ROW_KERNELS) do
      assert.matches("\n| hopper/" .. k .. " | 16 x 1024 | [%d.]+ | [%d.e+-]+ | %- | %- | ok: every element |", text)
    end
    assert.matches("\nflash attention %(hopper/flash_attention%), 1 heads x 128 tokens, d 64: [%d.]+ ms, [%d.e+-]+ TFLOP/s; check ok", text)
    assert.matches("\nlaunch latency %(an empty kernel, launch %+ sync%): [%d.]+ us", text)
    assert.matches("\n0 failed %(steps and checks%)", text)
  end)
end)

describe("bench/perf.lua's GEMM variants", function()
  it("times and checks gemm_fast unrolled and the bf16 and 2-SM Blackwell GEMMs as make gpu-check would", function()
    local dev = H.emu()
    runtime.use(dev)
    local cfg = { gemm = { { 256, 256, 128 } }, reps = 1, samples = 16 }
    local rows = perf.gemm_rows(dev, cfg, 100, " ")     -- the variants only (a space in the label)
    local want = { "hopper/gemm_fast UNROLL=2", "blackwell/gemm_persistent bf16", "blackwell/gemm_persistent 2-SM bf16" }
    assert.are.equal(#want, #rows)
    for i, row in ipairs(rows) do
      assert.are.equal(want[i], row.kernel)
      assert.is_nil(row.note)
      assert.is_true(row.ok, row.kernel .. ": " .. tostring(row.check))
      assert.matches("^20 sampled elements", row.check)
    end
  end)
end)

describe("bench/inflight.lua (Little's law without a GPU)", function()
  it("reads LDG widths: .128 16 bytes, .64 8, .U16 2, .U8 1, else 4, past the guard", function()
    local inflight = require "bench.inflight"
    assert.same({ 16, 16, 8, 2, 1, 4 }, { inflight.ldg_bytes("LDG.E.128 R4, desc[UR4][R2.64] ;"),
      inflight.ldg_bytes("@!P0 LDG.E.128.CONSTANT R8, desc[UR4][R2.64] ;"), inflight.ldg_bytes("LDG.E.64 R4, [R2] ;"),
      inflight.ldg_bytes("LDG.E.U16 R4, [R2] ;"), inflight.ldg_bytes("LDG.E.U8 R4, [R2] ;"), inflight.ldg_bytes("LDG.E R4, [R2] ;") })
  end)

  it("each Hopper memory-bound kernel at B=2048 N=8192 keeps twice what an H200 needs in flight per SM", function()
    local kloops = require "bench.kloops"
    local missing = kloops.missing()
    if missing then H.pending(missing) end
    H.need_ptxas()
    local inflight = require "bench.inflight"
    local g = require("pyptx.tools.gpus").find("H200")
    local need = g.bw * 1e9 * 700e-9 / g.sms                 -- Little's law at an assumed 700 ns
    for _, name in ipairs(perf.ROW_KERNELS) do
      local r = inflight.row(require("examples.hopper." .. name).build(2048, 8192), {})
      assert.is_true(r.sm_bytes >= 2 * need, ("%s: %d bytes in flight per SM (%d CTAs x %d threads x %d bytes), need %d")
        :format(name, r.sm_bytes, r.ctas, r.threads, r.thread_bytes, 2 * need))
    end
  end)
end)
