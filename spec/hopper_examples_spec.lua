-- examples/hopper/grouped_gemm.lua (MoE grouped GEMM: TMA + wgmma,
-- mbarrier ring, a persistent scheduler over (group, tile) pairs) and
-- examples/hopper/flash_attention.lua (FlashAttention-2 forward: online
-- softmax, S = Q.K^T and O += P.V with wgmma, P from registers): both
-- assemble with ptxas for sm_90a at their default sizes and match their
-- CPU references on the emulator at two sizes, every element, fresh inputs.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"

--- Trace k for sm_90a now, and return a check to run last: ptxas assembles
-- it without spills (pending without ptxas).
local function traced(k)
  local s = k:specialize()
  assert.are.equal("sm_90a", s.arch)
  return function()
    local report = H.assert_ptxas(s.ptx, "sm_90a")
    local r = report[k.name]
    assert.is_table(r)
    assert.are.equal(0, r.spill_stores + r.spill_loads)
  end
end

local run_main = H.run_main

--- Assert build(...) fails naming `names`, at the caller's line.
local function assert_rejects(build, args, names)
  local ok, err = pcall(function()
    local k = build(unpack(args, 1, 4))
    return k
  end)
  assert.is_false(ok)
  assert.is_truthy(tostring(err):find(names, 1, true), ("expected %q in: %s"):format(names, tostring(err)))
  assert.is_truthy(tostring(err):find("hopper_examples_spec%.lua:%d+: "), "expected the caller's line in: " .. tostring(err))
end

describe("examples/hopper/grouped_gemm.lua", function()
  local gg = dofile "examples/hopper/grouped_gemm.lua"

  it("follows the kernel-script convention", function()
    for _, f in ipairs { "build", "inputs", "reference", "args", "check", "main" } do assert.is_function(gg[f]) end
    assert.is_true(#gg.kernels >= 1 and pyptx.is_kernel(gg.kernels[1]))
    assert.are.equal("sm_90a", gg.kernels[1]:specialize().arch)
  end)

  it("assembles with ptxas for sm_90a at the default size and small ones, no spills", function()
    local checks = { traced(gg.kernels[1]), traced(gg.build({ 64, 128, 192, 128 }, 256, 128, { PERSISTENT = 4 })),
      traced(gg.build({ 37, 200 }, 512, 256, { BN = 256, STAGES = 3 })) }
    for _, check in ipairs(checks) do check() end
  end)

  it("plans (group, tile) pairs: rows and first tiles per group", function()
    local p = gg.plan({ 64, 128, 192, 128 }, 256, 128, 128)
    assert.are.equal(512, p.rows)
    assert.are.equal(10, p.tiles)                      -- m-tiles 1 + 1 + 2 + 1, two n-tiles each
    assert.are.same({ rows = 192, row0 = 192, tile0 = 4, mtiles = 2 }, p.groups[3])
  end)

  it("has a reference that multiplies each group by its own weight", function()
    -- two groups of one row, N = 1, K = 2: c = {a1 . b1, a2 . b2}
    local c = gg.reference { a = { 1, 2, 3, 4 }, b = { 5, 6, 7, 8 }, groups = { 1, 1 }, N = 1, K = 2 }
    assert.are.same({ 17, 53 }, c)
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    assert_rejects(gg.build, { { 64, 0 }, 256, 128 }, "M_g must be a positive integer")
    assert_rejects(gg.build, { { 64 }, 200, 128 }, "N % BN and K % BK must be 0")
    assert_rejects(gg.build, { { 64 }, 256, 100 }, "N % BN and K % BK must be 0")
    assert_rejects(gg.build, { {}, 256, 128 }, "at least one group")
    assert_rejects(gg.build, { { 64 }, 256, 128, { BN = 96 } }, "BN must be 64, 128 or 256")
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("matches the CPU reference for 4 groups {64, 128, 192, 128}, N = 256, K = 128 (every element)", function()
      local ok, report = gg.check({ 64, 128, 192, 128 }, 256, 128, { PERSISTENT = 4 })
      assert(ok, report.message)
      assert.are.equal(512 * 256, report.count)
    end)

    it("matches with ragged groups (a 1-row group), BN = 64 and a 2-stage ring that wraps", function()
      local ok, report = gg.check({ 37, 200, 1, 129 }, 128, 192, { BN = 64, STAGES = 2, PERSISTENT = 3 })
      assert(ok, report.message)
      assert.are.equal(367 * 128, report.count)
    end)

    it("main runs the small size and returns 0", function()
      local rc, out = run_main(gg, {})
      assert.are.equal(0, rc)
      assert.matches("hopper grouped gemm%({64, 128, 192, 128}, 256, 128, persistent 4%): ok", out)
    end)
  end)
end)

describe("examples/hopper/flash_attention.lua", function()
  local fa = dofile "examples/hopper/flash_attention.lua"

  it("follows the kernel-script convention", function()
    for _, f in ipairs { "build", "inputs", "reference", "args", "check", "main" } do assert.is_function(fa[f]) end
    assert.is_true(#fa.kernels >= 1 and pyptx.is_kernel(fa.kernels[1]))
    assert.are.equal("sm_90a", fa.kernels[1]:specialize().arch)
  end)

  it("assembles with ptxas for sm_90a at the default size (16 heads, 4096 tokens, d 64), no spills", function()
    local checks = {}
    for _, k in ipairs(fa.kernels) do checks[#checks + 1] = traced(k) end      -- full and causal
    checks[#checks + 1] = traced(fa.build(2, 256, 64, { STAGES = 3 }))
    for _, check in ipairs(checks) do check() end
  end)

  it("uses wgmma with P from registers for O += P.V", function()
    local text = fa.build(1, 128, 64):ptx()
    -- A from four .b32 registers: the A operand is a { } list right after the accumulators
    assert.is_truthy(text:find("wgmma%.mma_async%.sync%.aligned%.m64n64k16%.f32%.bf16%.bf16%s+{[^}]*}, {%%r%d+, %%r%d+, %%r%d+, %%r%d+}"))
    assert.is_truthy(text:find("cvt.rn.bf16x2.f32", 1, true))
    assert.is_truthy(text:find("ex2.approx", 1, true))
  end)

  it("has a reference that is softmax(Q K^T / sqrt(D)) V", function()
    -- one head, two tokens, D = 1: q = {1, 0}, k = {1, 0}, v = {2, 4}
    local o = fa.reference { q = { 1, 0 }, k = { 1, 0 }, v = { 2, 4 }, H = 1, L = 2, D = 1 }
    local e = math.exp(1)
    assert.is_true(math.abs(o[1] - (2 * e + 4) / (e + 1)) < 1e-12)
    assert.is_true(math.abs(o[2] - 3) < 1e-12)          -- equal scores: the mean of V
    assert.are.same({ 1, 3, 2, 4 }, fa.transpose_v({ 1, 2, 3, 4 }, 1, 2, 2))
    local c = fa.reference { q = { 1, 0 }, k = { 1, 0 }, v = { 2, 4 }, H = 1, L = 2, D = 1, causal = true }
    assert.are.same({ 2, 3 }, c)                          -- token 0 sees only itself
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    assert_rejects(fa.build, { 2, 256, 128 }, "D must be 64")
    assert_rejects(fa.build, { 2, 200, 64 }, "L % 128 == 0")
    assert_rejects(fa.build, { 0, 256, 64 }, "H must be a positive integer")
    assert_rejects(fa.build, { 2, 256, 64, { STAGES = 9 } }, "STAGES must be 1..8")
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("matches the double-precision reference at 2 heads x 256 tokens, d 64 (every element)", function()
      local ok, report = fa.check(2, 256, 64)
      assert(ok, report.message)
      assert.are.equal(2 * 256 * 64, report.count)
    end)

    it("matches at 3 heads x 384 tokens with a 3-stage ring, and with a single stage", function()
      local ok, report = fa.check(3, 384, 64, { STAGES = 3 })
      assert(ok, report.message)
      ok, report = fa.check(1, 128, 64, { STAGES = 1 })
      assert(ok, report.message)
    end)

    it("matches with the causal mask at 2 heads x 256 tokens and at 1 head x 384 tokens, 3 stages", function()
      local ok, report = fa.check(2, 256, 64, { causal = true })
      assert(ok, report.message)
      ok, report = fa.check(1, 384, 64, { causal = true, STAGES = 3 })
      assert(ok, report.message)
    end)

    it("main runs the small size and returns 0", function()
      local rc, out = run_main(fa, {})
      assert.are.equal(0, rc)
      assert.matches("hopper flash attention%(2 heads, 256 tokens, d 64, 2 stages%): ok", out)
    end)
  end)
end)
