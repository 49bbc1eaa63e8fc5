-- examples/hopper/grouped_gemm_uniform.lua (G groups of one shape over
-- ctaid.z, 3-D TMA boxes, the warp-specialised wgmma ring) and the
-- split-KV mode of examples/hopper/flash_attention.lua (partial O and
-- (m, l) per split, then a combine kernel): ptxas-clean for sm_90a, every
-- element against the CPU reference on the emulator at two or more sizes,
-- and mutants (a swizzle, an mbarrier wait, the split's block offset, the
-- combine's weights) that fail or that the emulator reports at their line.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"

local UNIFORM, FLASH = "examples/hopper/grouped_gemm_uniform.lua", "examples/hopper/flash_attention.lua"
local PIPE, PIPE_MODULE = "examples/lib/tma_pipeline.lua", "examples.lib.tma_pipeline"

--- Trace k for sm_90a now, and return a check to run last: ptxas assembles
-- it without spills (pending without ptxas).
local function traced(k)
  local s = k:specialize()
  assert.are.equal("sm_90a", s.arch)
  return function()
    local r = H.assert_ptxas(s.ptx, "sm_90a")[k.name]
    assert.is_table(r)
    assert.are.equal(0, r.spill_stores + r.spill_loads)
  end
end

--- The example at path with a bug planted in it (ex) or in the shared TMA
-- pipeline (pipe): each { old, new } or nil. Returns the example and its source.
local function mutant(path, ex, pipe) return H.planted_on(path, ex, PIPE_MODULE, PIPE, pipe) end

local adversarial = H.adversarial

--- m.check(...) on dev: the error it raises as text, or its verdict (ok, report).
local function check_on(dev, m, ...)
  local ok, msg, report = H.check_on(dev, m, ...)
  if not ok and not report then return msg end
  return nil, ok, report
end

local run_main = H.run_main

--- Assert build(...) fails naming `names`, at this spec's line.
local function assert_rejects(build, args, names)
  local ok, err = pcall(function() local k = build(unpack(args, 1, 5)); return k end)
  assert.is_false(ok)
  assert.is_truthy(tostring(err):find(names, 1, true), ("expected %q in: %s"):format(names, tostring(err)))
  assert.is_truthy(tostring(err):find("hopper_kernels_spec%.lua:%d+: "), "expected the caller's line in: " .. tostring(err))
end

describe("examples/hopper/grouped_gemm_uniform.lua", function()
  local gu = dofile(UNIFORM)

  it("follows the kernel-script convention", function()
    for _, f in ipairs { "build", "inputs", "reference", "args", "check", "main" } do assert.is_function(gu[f]) end
    assert.is_true(#gu.kernels >= 1 and pyptx.is_kernel(gu.kernels[1]))
  end)

  it("assembles with ptxas for sm_90a at the default size and small ones, no spills", function()
    local checks = { traced(gu.kernels[1]), traced(gu.build(3, 128, 256, 128)),
      traced(gu.build(2, 256, 512, 192, { BN = 256, STAGES = 3 })) }
    for _, check in ipairs(checks) do check() end
  end)

  it("takes the group from ctaid.z and loads 3-D boxes {1, rows, 64} of 128B-swizzled bf16", function()
    local text = gu.build(4, 128, 128, 64):ptx()
    assert.is_truthy(text:find("%ctaid.z", 1, true))
    local _, loads = text:gsub("cp%.async%.bulk%.tensor%.3d%.shared::cluster%.global", "")
    assert.are.equal(2, loads)
  end)

  it("has a reference that multiplies each group by its own B", function()
    -- two groups of M = N = 1, K = 2: c = {a0 . b0, a1 . b1}
    local c = gu.reference { a = { 1, 2, 3, 4 }, b = { 5, 6, 7, 8 }, G = 2, M = 1, N = 1, K = 2 }
    assert.are.same({ 17, 53 }, c)
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    assert_rejects(gu.build, { 0, 128, 128, 64 }, "G must be a positive integer")
    assert_rejects(gu.build, { 2, 100, 128, 64 }, "M % BM, N % BN and K % BK must be 0")
    assert_rejects(gu.build, { 2, 128, 128, 64, { BN = 96 } }, "BN must be 64, 128 or 256")
    assert_rejects(gu.build, { 2, 128, 128, 64, { STAGES = 0 } }, "STAGES must be 1..8")
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("matches the CPU reference for 3 groups of 128x256x128 (every element)", function()
      local ok, report = gu.check(3, 128, 256, 128)
      assert(ok, report.message)
      assert.are.equal(3 * 128 * 256, report.count)
    end)

    it("matches for 2 groups of 256x128x256 with BN = 64 and a 2-stage ring that wraps", function()
      local ok, report = gu.check(2, 256, 128, 256, { BN = 64, STAGES = 2 })
      assert(ok, report.message)
      assert.are.equal(2 * 256 * 128, report.count)
    end)

    it("main runs the small size and returns 0", function()
      local rc, out = run_main(gu, {})
      assert.are.equal(0, rc)
      assert.matches("hopper uniform grouped gemm%(3 x 128x256x128, 4 stages%): ok", out)
    end)

    it("reports A's TMA box loaded without the swizzle wgmma reads, at both lines", function()
      local m, src = mutant(UNIFORM, { "box = { 1, BM, BK }, swizzle = sA.tma_swizzle", "box = { 1, BM, BK }, swizzle = \"none\"" })
      local err = check_on(H.emu(), m, 2, 128, 128, 128)
      assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: the A descriptor reads shared memory at 0x%%x+ with 128B swizzle, but the "
        .. "TMA load at %s:%d: cp%%.async%%.bulk%%.tensor%%.3d[^\n]* wrote it with no swizzle"):format(H.lit(UNIFORM),
        H.line_of(src, "tp.mma { d = acc"), H.lit(UNIFORM), H.line_of(src, "ptx.cp.async.bulk.tensor_3d { dst = sA:stage(s)")), err)
    end)

    it("reports the wgmmas issued without wgmma.fence (removed from the shared pipeline's mma)", function()
      local m, src = mutant(UNIFORM, nil, { "  ptx.wgmma.fence()\n", "" })
      local err = check_on(H.emu(), m, 2, 128, 128, 128)
      assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: wgmma%%.mma_async with no wgmma%%.fence before it"):format(H.lit(UNIFORM),
        H.line_of(src, "tp.mma { d = acc")), err)
    end)

    it("reports a consumer that does not wait for full[s] after the first k-block (adversarial schedules)", function()
      -- Consumer:mainloop's wait for k >= 1 removed: on the default schedule the producer is far enough
      -- ahead that the data has landed; an adversarial one makes the wgmma read what TMA is still writing.
      local m, src = mutant(UNIFORM, nil, { "    if wait_full then pipe.full:at(s):wait(phase) end\n", "" })
      for seed = 1, 2 do
        local err = check_on(adversarial(seed), m, 2, 128, 128, 128)
        assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: reads shared memory at offset 0x%%x+ that %s:%d: cp%%.async%%.bulk"
          .. "%%.tensor%%.3d[^\n]* has not finished writing"):format(H.lit(UNIFORM), H.line_of(src, "tp.mma { d = acc"),
          H.lit(UNIFORM), H.line_of(src, "ptx.cp.async.bulk.tensor_3d")), err)
      end
    end)

    it("reports a producer that refills a stage without waiting on empty[s] (adversarial schedules)", function()
      local m, src = mutant(UNIFORM, nil, { "    pipe.empty:at(s):wait(phase)\n", "" })
      for seed = 1, 3 do
        local err = check_on(adversarial(seed), m, 2, 128, 128, 256, { STAGES = 2 })
        assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: reads shared memory at offset 0x%%x+ that %s:%d: cp%%.async%%.bulk"
          .. "%%.tensor%%.3d[^\n]* has not finished writing"):format(H.lit(UNIFORM), H.line_of(src, "tp.mma { d = acc"),
          H.lit(UNIFORM), H.line_of(src, "ptx.cp.async.bulk.tensor_3d")), err)
      end
    end)
  end)
end)

describe("examples/hopper/flash_attention.lua split-KV", function()
  local fa = dofile(FLASH)

  it("assembles the split and combine kernels with ptxas for sm_90a (default size and causal), no spills", function()
    local checks = {}
    for _, k in ipairs(fa.kernels) do checks[#checks + 1] = traced(k) end   -- full, causal, split-KV, combine
    checks[#checks + 1] = traced(fa.build(2, 512, 64, { SPLITS = 4, causal = true, STAGES = 3 }))
    assert.are.same({ "hopper_flash_attention_splitkv", "hopper_flash_attention_combine" }, { fa.kernels[3].name, fa.kernels[4].name })
    for _, check in ipairs(checks) do check() end
  end)

  it("gives each split a z slice of the key blocks and writes O and (m, l) per split", function()
    local text = fa.build(1, 256, 64, { SPLITS = 2 }):ptx()
    assert.is_truthy(text:find("%ctaid.z", 1, true))
    assert.is_truthy(text:find("st%.global%.v2%.f32"))
    assert.is_nil(text:find("rcp.rn.f32", 1, true))                 -- the combine normalizes, not the split
  end)

  it("rejects a split count that does not divide the key blocks, at the caller's line", function()
    assert_rejects(fa.build, { 2, 256, 64, { SPLITS = 3 } }, "SPLITS must be a positive integer dividing the 4 key blocks")
    assert_rejects(fa.build, { 2, 256, 64, { SPLITS = 0 } }, "SPLITS must be a positive integer")
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("matches the double-precision reference at 2 heads x 256 tokens in 2 splits and 3 heads x 384 in 3", function()
      local ok, report = fa.check(2, 256, 64, { SPLITS = 2 })
      assert(ok, report.message)
      assert.are.equal(2 * 256 * 64, report.count)
      ok, report = fa.check(3, 384, 64, { SPLITS = 3, STAGES = 3 })
      assert(ok, report.message)
      assert.are.equal(3 * 384 * 64, report.count)
    end)

    it("matches causal with splits that see no key of a row (2 x 256 in 4) and with 1 x 512 in 2", function()
      local ok, report = fa.check(2, 256, 64, { SPLITS = 4, causal = true })
      assert(ok, report.message)
      ok, report = fa.check(1, 512, 64, { SPLITS = 2, causal = true, STAGES = 1 })
      assert(ok, report.message)
    end)

    it("main runs a split-KV size and returns 0", function()
      local rc, out = run_main(fa, { "2", "256", "2", "causal", "2" })
      assert.are.equal(0, rc)
      assert.matches("hopper flash attention%(2 heads, 256 tokens, d 64, 2 stages, causal, split%-KV 2%): ok", out)
    end)

    it("reports K's TMA box loaded without the swizzle wgmma reads", function()
      local m, src = mutant(FLASH, { "src = K:tma_desc{ tile = sK }", "src = K:tma_desc{ box = { BN, D } }" })
      local err = check_on(H.emu(), m, 1, 256, 64, { SPLITS = 2 })
      assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: the B descriptor reads shared memory at 0x%%x+ with 128B swizzle, but the "
        .. "TMA load at %s:%d: [^\n]* wrote it with no swizzle"):format(H.lit(FLASH), H.line_of(src, "tp.mma { d = sacc"), H.lit(FLASH),
        H.line_of(src, "ptx.cp.async.bulk.tensor_2d{ dst = sK:stage(s)")), err)
    end)

    it("reports a consumer that skips the wait for full[s] or for the Q tile (adversarial schedules)", function()
      local m, src = mutant(FLASH, nil, { "    pipe.full:at(s):wait(phase)\n", "" })
      for seed = 1, 3 do
        local err = check_on(adversarial(seed), m, 1, 256, 64, { SPLITS = 2 })   -- before the copy, or during it
        assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: reads [%%w ]*shared memory at offset 0x%%x+ that "):format(H.lit(FLASH),
          H.line_of(src, "tp.mma { d = sacc")), err)
        assert.is_truthy(err:find("no thread has written", 1, true) or err:find("has not finished writing", 1, true), err)
      end
      m, src = mutant(FLASH, { "        qbar:at(0):wait(0)\n", "        -- planted: no wait for the Q tile\n" })
      for seed = 1, 3 do
        local err = check_on(adversarial(seed), m, 1, 256, 64, { SPLITS = 2 })
        assert.matches(("%s:%d: wgmma%%.mma_async[^\n]*: reads shared memory at offset 0x%%x+ that %s:%d: cp%%.async%%.bulk"
          .. "%%.tensor%%.2d[^\n]* has not finished writing"):format(H.lit(FLASH), H.line_of(src, "tp.mma { d = sacc"), H.lit(FLASH),
          H.line_of(src, "ptx.cp.async.bulk.tensor_2d{ dst = sQ")), err)
      end
    end)

    it("fails when every split reads the first key blocks, or when the combine drops the 2^(m_z - max) weights", function()
      local m = mutant(FLASH, { "return split and j0 + i or i", "return i" })
      local err, ok, report = check_on(H.emu(), m, 1, 256, 64, { SPLITS = 2 })
      assert.is_nil(err)
      assert.is_false(ok)
      assert.matches("elements differ", report.message)
      m = mutant(FLASH, { "        ptx.inst.ex2.approx.ftz.f32(w, w)\n", "" })
      err, ok, report = check_on(H.emu(), m, 1, 256, 64, { SPLITS = 2 })
      assert.is_nil(err)
      assert.is_false(ok)
      assert.matches("elements differ", report.message)
    end)
  end)
end)
