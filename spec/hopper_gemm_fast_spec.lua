-- examples/hopper/gemm_fast.lua (issue 16 item 10): the fast.cu-class
-- Hopper GEMM (warp-specialised, clusters of 2 with B multicast, a
-- Hilbert-ordered persistent schedule, a stmatrix + TMA-store epilogue,
-- bf16 output). It assembles with ptxas for sm_90a without spills, matches
-- its CPU reference on every element at three sizes (and under the
-- adversarial schedule), and each mutant (a swizzle, the proxy fence, the
-- barrier before the TMA store, an mbarrier wait or the store's read wait
-- removed) fails or is reported on the emulator.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"

local gf = require "examples.hopper.gemm_fast"

local adversarial = H.adversarial

--- gemm_fast.check(...) on dev (H.check_on).
local function check_on(dev, ...) return H.check_on(dev, gf, ...) end

--- gemm_fast.main(args) with print captured (H.run_main).
local function run_main(args) return H.run_main(gf, args) end

describe("examples/hopper/gemm_fast.lua", function()
  it("follows the kernel-script convention", function()
    for _, f in ipairs { "build", "inputs", "reference", "args", "check", "main", "tolerance", "schedule" } do
      assert.is_function(gf[f], f)
    end
    assert.is_true(#gf.kernels >= 1 and pyptx.is_kernel(gf.kernels[1]))
    assert.are.equal("sm_90a", gf.kernels[1]:specialize().arch)
  end)

  it("emits the pieces of a fast.cu GEMM: multicast loads, stmatrix, proxy fence, TMA stores, a Hilbert table", function()
    local text = gf.build(512, 512, 128, { SMS = 4 }):ptx()
    assert.is_truthy(text:find(".reqnctapercluster 2, 1, 1", 1, true))
    assert.is_truthy(text:find("cp%.async%.bulk%.tensor%.2d%.shared::cluster%.global%.tile%.mbarrier::complete_tx::bytes"
      .. "%.multicast::cluster[^\n]*%%rs%d+;"))
    assert.is_truthy(text:find("stmatrix.sync.aligned.m8n8.x4.shared.b16", 1, true))
    assert.is_truthy(text:find("fence.proxy.async.shared::cta;", 1, true))
    assert.is_truthy(text:find("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", 1, true))
    assert.is_truthy(text:find("cp%.async%.bulk%.wait_group%.read%s+1;"))   -- two staging boxes per warpgroup
    assert.is_truthy(text:find("setmaxnreg%.inc%.sync%.aligned%.u32%s+232;"))
    -- 2 x 2 cluster tiles in Hilbert order: (0,0) (0,1) (1,1) (1,0), each tm << 16 | tn
    assert.is_truthy(text:find(".const .align 4 .u32 hopper_gemm_fast_tiles[4] = {0, 1, 65537, 65536};", 1, true))
  end)

  it("assembles with ptxas for sm_90a without spills (4096^3: BN 256 and 128, clusters of 2 and 1)", function()
    local ks = { gf.kernels[1], gf.build(4096, 4096, 4096, { BN = 128 }), gf.build(4096, 4096, 4096, { CLUSTER = 1 }),
      gf.build(512, 512, 192, { SMS = 4, STAGES = 2 }) }
    local specs = {}
    for i, k in ipairs(ks) do specs[i] = k:specialize() end
    for i, s in ipairs(specs) do
      local r = H.assert_ptxas(s.ptx, "sm_90a")[ks[i].name]
      assert.is_table(r)
      assert.are.equal(0, r.spill_stores + r.spill_loads)
    end
  end)

  it("orders tiles along a Hilbert curve: every tile once, neighbours adjacent on a square grid", function()
    local order = gf.schedule(8, 8)
    assert.are.equal(64, #order)
    local seen = {}
    for i, t in ipairs(order) do
      local key = t[1] * 8 + t[2]
      assert.is_nil(seen[key])
      seen[key] = true
      if i > 1 then
        local p = order[i - 1]
        assert.are.equal(1, math.abs(t[1] - p[1]) + math.abs(t[2] - p[2]))
      end
    end
    assert.are.same({ 0, 0 }, order[1])
    assert.are.same({ 7, 0 }, order[64])        -- the curve ends at the other corner of the same side
    local ragged = gf.schedule(3, 5)             -- the points of an 8 x 8 curve that fall inside 3 x 5
    assert.are.equal(15, #ragged)
    seen = {}
    for _, t in ipairs(ragged) do
      assert.is_true(t[1] < 3 and t[2] < 5)
      seen[t[1] * 5 + t[2]] = true
    end
    for k = 0, 14 do assert.is_true(seen[k]) end
  end)

  it("has a tolerance that covers bf16 output rounding and nothing much more", function()
    -- rounding an f32 sum to bf16 moves it by at most half an ulp, 2^-8 of its magnitude
    local round = require("pyptx.runtime.floats").round_bf16
    local tol = gf.tolerance(128)
    for _, x in ipairs { 1 + 2 ^ -8, 3.1415926, -7.99, 123.456 } do
      assert.is_true(math.abs(round(x) - x) <= tol.rtol * math.abs(x))
    end
    assert.is_true(tol.rtol <= 2 ^ -8 and tol.atol < 2e-3)
  end)

  it("rejects shapes and options that break its rules, at the caller's line", function()
    local function rejects(names, ...)
      local ok, err = pcall(gf.build, ...)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(names, 1, true), tostring(err))
    end
    rejects("M % (CLUSTER * 128), N % BN and K % 64 must be 0", 128, 256, 128)    -- a cluster of 2 needs 256 rows
    rejects("M % (CLUSTER * 128), N % BN and K % 64 must be 0", 256, 256, 100)
    rejects("BN must be 128 or 256", 256, 256, 128, { BN = 64 })
    rejects("STAGES 5 with BN 256 needs", 256, 256, 128, { STAGES = 5 })
    rejects("SMS must be a positive multiple of CLUSTER", 256, 256, 128, { SMS = 3 })
    rejects("mutant must be no_load_swizzle", 256, 256, 128, { mutant = "bogus" })
    local ok, err = pcall(function()
      local k = gf.build(256, 256, 128, { CLUSTER = 3 })
      return k
    end)
    assert.is_false(ok)
    assert.matches("hopper_gemm_fast_spec%.lua:%d+: hopper gemm_fast: CLUSTER must be 1 or 2", tostring(err))
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("matches the CPU reference at 256x256x128 (one cluster tile, B multicast; every element)", function()
      local ok, report = gf.check(256, 256, 128, { SMS = 2 })
      assert(ok, report.message)
      assert.are.equal(256 * 256, report.count)
    end)

    it("matches at 512x512x192 with 2 clusters walking 2 tiles each through a 2-stage ring", function()
      local ok, report = gf.check(512, 512, 192, { SMS = 4, STAGES = 2 })
      assert(ok, report.message)
      assert.are.equal(512 * 512, report.count)
    end)

    it("matches at 384x384x128 without clusters, BN 128: 9 tiles shared unevenly by 2 CTAs", function()
      local ok, report = gf.check(384, 384, 128, { CLUSTER = 1, BN = 128, SMS = 2 })
      assert(ok, report.message)
      assert.are.equal(384 * 384, report.count)
    end)

    it("matches under the adversarial schedule (seeds 1-3), with a 1-stage ring too", function()
      for _, seed in ipairs { 1, 2, 3 } do
        local ok, msg = check_on(adversarial(seed), 512, 512, 192, { SMS = 4, STAGES = 2 })
        assert(ok, msg)
        ok, msg = check_on(adversarial(seed), 512, 256, 128, { BN = 128, SMS = 2, STAGES = 1 })
        assert(ok, msg)
      end
    end)

    it("releases a stage per warpgroup (default) or per warp; both counts pass every schedule", function()
      -- per warpgroup is the default: the kernel the two tests above run on
      -- the default schedule and on seeds 1-3, so only per warp runs here
      local opts = { SMS = 4, STAGES = 2 }
      assert.equal(gf.build(512, 512, 192, opts):ptx(), gf.build(512, 512, 192, { SMS = 4, STAGES = 2, RELEASE = "warpgroup" }):ptx())
      opts.RELEASE = "warp"
      assert.are_not.equal(gf.build(512, 512, 192, { SMS = 4, STAGES = 2 }):ptx(), gf.build(512, 512, 192, opts):ptx())
      for _, dev in ipairs { H.emu(), adversarial(1), adversarial(2) } do
        local ok, msg = check_on(dev, 512, 512, 192, opts)
        assert(ok, msg)
      end
      local text = gf.build(512, 512, 128, { SMS = 4 }):ptx()
      assert.is_truthy((text:find("mbarrier%.init%.shared::cta%.b64 \t%[[%w_]+%+%d+%], 4;")))   -- 2 warpgroups x 2 CTAs
      assert.is_nil((text:find("arrive.release.cluster", 1, true)))
      assert.is_truthy((text:find("wgmma.wait_group.sync.aligned \t1;", 1, true)))
    end)

    it("main runs the small size and returns 0", function()
      local rc, out = run_main({})
      assert.are.equal(0, rc)
      assert.matches("hopper gemm_fast%(256, 256, 128, cluster 2, 2 CTAs%): ok", out)
    end)
  end)
end)

describe("mutants of examples/hopper/gemm_fast.lua", function()
  runtime.use(H.emu())
  local CASES = {
    -- mutant, what the report says (a pattern), caught in the default schedule too
    { "no_load_swizzle", "with 128B swizzle, but the TMA load at [^\n]*gemm_fast%.lua:%d+: cp%.async%.bulk%.tensor", true },
    { "no_store_swizzle", "elements differ", true },
    { "no_fence", "through the async proxy, but [^\n]*gemm_fast%.lua:%d+: stmatrix", true },
    -- the race check (the box was written since the barrier) or, on a box's first use, the uninitialised-read check
    { "no_store_barrier", "cp%.async%.bulk%.tensor%.2d%.global%.shared::cta[^\n]*: [^\n]*shared[ %-]memory", true },
    { "no_full_wait", "wgmma[^\n]*: reads %d+ bytes of shared memory at offset 0x%x+ that", true },
    { "no_empty_wait", "arrival%(s%) on an mbarrier with only 0 pending", true },
    { "no_store_wait", "still reads: a TMA store, bulk copy or bulk reduction reads its source", false },
    -- a stage released before the wgmma.wait_group that covers its MMAs: the producer's refill meets their reads
    { "early_release", "cp%.async%.bulk%.tensor[^\n]*wgmma%.mma_async", true },
  }
  for _, c in ipairs(CASES) do
    it(("%s fails under every adversarial seed%s"):format(c[1], c[3] and " and the default schedule" or ""), function()
      local opts = { SMS = 4, STAGES = 2, mutant = c[1] }
      for _, seed in ipairs { 1, 2, 3 } do
        local ok, msg = check_on(adversarial(seed), 512, 512, 192, opts)
        assert.is_false(ok, ("seed %d let the %s mutant through"):format(seed, c[1]))
        assert.is_truthy(msg:find(c[2]), msg)
      end
      local ok, msg = check_on(H.emu(), 512, 512, 192, opts)
      if c[3] then
        assert.is_false(ok, "the default schedule let the mutant through")
        assert.is_truthy(msg:find(c[2]), msg)
      else
        assert.is_true(ok, msg)                    -- the friendly schedule misses it: the reason for the adversarial one
      end
    end)
  end
end)

describe("examples/hopper/gemm_fast.lua on a CUDA GPU #gpu", function()
  local dev, why = H.gpu()
  if not dev then pending(why) return end
  it("matches the CPU reference with driver-encoded tensor maps: one cluster tile, and 132 CTAs over 16 tiles", function()
    local previous = runtime.device()
    runtime.use(dev)
    local res = { pcall(gf.check, 256, 256, 128, { SMS = 2 }) }
    local res2 = { pcall(gf.check, 1024, 1024, 512) }
    local res3 = { pcall(gf.check, 384, 640, 256, { CLUSTER = 1, BN = 128, SMS = 4 }) }
    runtime.use(previous)
    for _, r in ipairs { res, res2, res3 } do
      assert(r[1], r[2])
      assert.is_true(r[2], r[3].message)
    end
  end)
end)
