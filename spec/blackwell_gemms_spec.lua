-- The Blackwell GEMMs beside examples/blackwell/gemm.lua (issue 16 item
-- 11): gemm_persistent.lua (persistent grid, TMEM accumulators reused
-- across tiles), gemm_no_tma.lua (operands copied by the threads into the
-- swizzled UMMA layout) and grouped_gemm.lua (uniform groups over
-- ctaid.z). Each matches its CPU reference on the emulator at several
-- sizes (every element, fresh random bf16 inputs), also under adversarial
-- schedules; each of its mutants (opts.mutant: a swizzle, a commit, an
-- mbarrier wait, a proxy fence taken out) fails or is reported at the
-- example's line; each assembles with ptxas for sm_100a without spills;
-- and build() rejects shapes that break its rules, at the caller's line.
local runtime = require "pyptx.runtime"
local sass = require "pyptx.runtime.sass"
local kloops = require "bench.kloops"
local H = require "spec.helpers"

local persistent = dofile "examples/blackwell/gemm_persistent.lua"
local no_tma = dofile "examples/blackwell/gemm_no_tma.lua"
local grouped = dofile "examples/blackwell/grouped_gemm.lua"

local SEEDS = { 1, 2, 3 }

local adversarial = H.adversarial

local check_on = H.check_on

--- Assert m.check(...) passes on the default emulator, every element of count.
local function passes(count, m, ...)
  local ok, msg, report = check_on(H.emu(), m, ...)
  assert(ok, msg)
  assert.are.equal(count, report.count)
end

--- Assert m.check(...) passes under each adversarial seed.
local function passes_adversarial(m, ...)
  for _, seed in ipairs(SEEDS) do
    local ok, msg = check_on(adversarial(seed), m, ...)
    assert(ok, ("seed %d: %s"):format(seed, msg))
  end
end

--- Assert kernel k assembles for sm_100a without spills (pending without ptxas).
local function assembles_unspilled(k)
  local report = H.assert_ptxas(k, "sm_100a")
  local r = report[k.name]
  assert.are.equal(0, r.spill_stores + r.spill_loads, k.name .. " spills")
end

--- Assert a mutant fails (launch error or mismatch) matching pattern on
-- the default emulator (seed nil) or under each adversarial seed.
local function mutant_fails(pattern, seeds, m, ...)
  for _, seed in ipairs(seeds or { false }) do
    local ok, msg = check_on(seed and adversarial(seed) or H.emu(), m, ...)
    local where = seed and (" (seed " .. seed .. ")") or ""
    assert(not ok, "the mutant passed" .. where .. ": " .. tostring(msg))
    assert(msg:find(pattern), ("expected %q%s in: %s"):format(pattern, where, msg))
  end
end

--- The mutant without a tcgen05.fence::after_thread_sync: reported at the
-- example's line (the emulator follows the tcgen05 thread-sync fences).
local function fence_mutant(file, m, ...)
  local ok, msg = check_on(H.emu(), m, ...)
  assert(not ok, "the no_fence mutant ran clean")
  assert.matches(file .. "%.lua:%d+: tcgen05%.[ml][md]a?.- tcgen05%.fence::after_thread_sync", msg)
end

--- Assert build(...) errors naming this spec's line and the constraint text.
local function rejects(m, want, ...)
  local args = { ... }
  local ok, err = pcall(function()
    local k = m.build(unpack(args, 1, table.maxn(args)))   -- not a tail call: build names this line
    return k
  end)
  assert.is_false(ok)
  assert(tostring(err):find(want, 1, true), tostring(err))
  assert.matches("blackwell_gemms_spec%.lua:%d+: ", tostring(err))
end

local run_main = H.run_main

--- The tcgen05.ld of kernel k's PTX: a map "32x32b.xN" -> count.
local function tmem_loads(k)
  local out = {}
  for shape in k:specialize().ptx:gmatch("tcgen05%.ld%.sync%.aligned%.([%w.]-)%.b32") do out[shape] = (out[shape] or 0) + 1 end
  return out
end

--- The LDTM instructions of kernel k's SASS: a map "LDTM.xN" -> count
-- (pending without nvdisasm or a PTX compiler).
local function sass_tmem_loads(k)
  local missing = kloops.missing()
  if missing then H.pending(missing) end   -- not a tail call: pending finds the test's frame
  local _, listing = sass.kernel(k, nil, { summary_only = true })
  local out = {}
  for _, fn in ipairs(listing.functions) do
    for _, it in ipairs(fn.items) do
      if it.opcode == "LDTM" then
        local op = it.text:match("^(%S+)")
        out[op] = (out[op] or 0) + 1
      end
    end
  end
  return out
end

describe("examples/blackwell/gemm_persistent.lua", function()
  runtime.use(H.emu())

  -- (M, N, K, opts): tiles per CTA uneven (8 tiles on 3 CTAs: 3, 3, 2), one
  -- CTA walking every tile, one TMEM buffer, 256-column tiles, a ring of 2
  for _, c in ipairs {
    { 512, 256, 256, { ctas = 3 } }, { 256, 512, 128, { ctas = 1, BN = 64, acc = 1, stages = 2 } },
    { 384, 512, 192, { ctas = 2, BN = 256 } }, { 128, 128, 64, {} },
  } do
    local o = c[4]
    it(("matches the CPU reference at %dx%dx%d, BN %d, %d buffer(s), %s CTAs, every element"):format(c[1], c[2], c[3],
      o.BN or 128, o.acc or 2, tostring(o.ctas or "default")), function()
      passes(c[1] * c[2], persistent, c[1], c[2], c[3], o)
    end)
  end

  it("passes under adversarial schedules, one and two accumulator buffers", function()
    passes_adversarial(persistent, 512, 256, 128, { ctas = 3 })
    passes_adversarial(persistent, 512, 256, 64, { ctas = 1, BN = 64, acc = 1 })
  end)

  it("launches min(tiles, ctas) CTAs, 148 (the SMs of a B200) by default", function()
    local k = persistent.build(512, 256, 256, { ctas = 3 })
    assert.are.same({ 3, 1, 1 }, k:specialize().grid)
    assert.are.same({ 8, 1, 1 }, persistent.build(512, 256, 256):specialize().grid)       -- min(tiles, 148)
    assert.are.same({ 148, 1, 1 }, persistent.kernels[1]:specialize().grid)
  end)

  it("fails with the MMA descriptors unswizzled: reported against the TMA load's 128B swizzle", function()
    mutant_fails("gemm_persistent%.lua:%d+: tcgen05%.mma.- with no swizzle .-gemm_persistent%.lua:%d+: cp%.async%.bulk%.tensor",
      nil, persistent, 512, 256, 256, { ctas = 3, mutant = "no_swizzle" })
  end)

  it("fails when the MMA issuer reuses an accumulator without waiting on acc_empty", function()
    -- one CTA, one k-block a tile: the issuer runs ahead of the epilogue
    -- (the default schedule loses an acc_full phase: the epilogue waits forever)
    local args = { 512, 256, 64, { ctas = 1, BN = 64, mutant = "no_acc_wait" } }
    mutant_fails("gemm_persistent%.lua:%d+: mbarrier%.try_wait.- deadlock", nil, persistent, unpack(args))
    -- the MMA's write to an accumulator the epilogue still reads, unordered by any synchronization
    mutant_fails("gemm_persistent%.lua:%d+: tcgen05%.mma.- writes tensor%-memory column %d+, which "
      .. "examples/blackwell/gemm_persistent%.lua:%d+: tcgen05%.ld.- no thread synchronization orders the two",
      SEEDS, persistent, unpack(args))
  end)

  it("fails without the tcgen05.commit to acc_full: the epilogue's wait never completes", function()
    mutant_fails("gemm_persistent%.lua:%d+: mbarrier%.try_wait.- deadlock", nil, persistent, 512, 256, 128,
      { ctas = 3, mutant = "no_acc_commit" })
  end)

  it("fails when the MMAs do not wait for their stage's TMA load", function()
    mutant_fails("gemm_persistent%.lua:%d+: mbarrier%.try_wait.- deadlock", nil, persistent, 512, 256, 256,
      { ctas = 3, mutant = "no_full_wait" })
    mutant_fails("gemm_persistent%.lua:%d+: tcgen05%.mma.- reads .-shared memory at offset", SEEDS, persistent, 512, 256, 256,
      { ctas = 3, mutant = "no_full_wait" })
  end)

  it("fails without the epilogue's tcgen05.fence::after_thread_sync", function()
    fence_mutant("gemm_persistent", persistent, 512, 256, 128, { ctas = 3, mutant = "no_fence" })
  end)

  -- grouped raster: M/128 = 5 m-blocks in bands of 2 (a last band of 1) or
  -- 3 (of 2), bands of 1 (row-major), one band of every m-block
  for _, c in ipairs {
    { 640, 256, 128, { ctas = 3, group = 2 } }, { 640, 512, 64, { ctas = 4, group = 3, BN = 64 } },
    { 384, 256, 64, { ctas = 2, group = 1 } }, { 640, 256, 64, { ctas = 7, group = 16, acc = 1 } },
  } do
    local o = c[4]
    it(("matches the CPU reference with a grouped raster of %d m-blocks at %dx%dx%d, every element"):format(o.group, c[1], c[2], c[3]),
      function()
        passes(c[1] * c[2], persistent, c[1], c[2], c[3], o)
      end)
  end

  it("rasterises in bands of group m-blocks, column-major in each, a last partial band lower", function()
    local order = {}
    for t = 0, 9 do
      local mb, nb = persistent.raster(t, 5, 2, 2)
      order[#order + 1] = mb .. "," .. nb
    end
    assert.are.same({ "0,0", "1,0", "0,1", "1,1", "2,0", "3,0", "2,1", "3,1", "4,0", "4,1" }, order)
    local seen = {}
    for t = 0, 7 * 3 - 1 do   -- 7 x 3 tiles in bands of 3: each tile once
      local mb, nb = persistent.raster(t, 7, 3, 3)
      local key = mb .. "," .. nb
      assert(mb < 7 and nb < 3 and not seen[key], key)
      seen[key] = true
    end
    local mb, nb = persistent.raster(9, 5, 2, 2, "raster_tail")
    assert.are.same({ 5, 0 }, { mb, nb })        -- the mutant walks past the last m-block
  end)

  it("fails when the raster takes the last, partial band of m-blocks as a whole band", function()
    mutant_fails("gemm_persistent%.lua:%d+: st%.global.- out%-of%-bounds", nil, persistent, 640, 256, 128,
      { ctas = 3, group = 2, mutant = "raster_tail" })
    mutant_fails("never written", nil, persistent, 640, 256, 128, { ctas = 3, group = 2, out = "bf16", mutant = "raster_tail" })
  end)

  it("reads the accumulator with tcgen05.ld.32x32b.x128, BN/128 loads a tile (opts.ld narrows them)", function()
    assert.are.same({ ["32x32b.x128"] = 1 }, tmem_loads(persistent.build(256, 256, 128)))
    assert.are.same({ ["32x32b.x128"] = 1 }, tmem_loads(persistent.build(256, 256, 128, { out = "bf16" })))
    assert.are.same({ ["32x32b.x128"] = 2 }, tmem_loads(persistent.build(256, 512, 128, { BN = 256 })))
    assert.are.same({ ["32x32b.x64"] = 1 }, tmem_loads(persistent.build(256, 256, 128, { BN = 64 })))
    assert.are.same({ ["32x32b.x32"] = 4 }, tmem_loads(persistent.build(256, 256, 128, { ld = 32 })))
    passes(256 * 256, persistent, 256, 256, 128, { ctas = 2, ld = 32 })
    passes(256 * 256, persistent, 256, 256, 128, { ctas = 2, ld = 64, out = "bf16" })
  end)

  it("issues one LDTM.x128 a tile for BN 128 and two for BN 256 in SASS (four and eight LDTM.x32 before)", function()
    assert.are.same({ ["LDTM.x128"] = 1 }, sass_tmem_loads(persistent.kernels[1]))
    assert.are.same({ ["LDTM.x128"] = 2 }, sass_tmem_loads(persistent.kernels[2]))
    assert.are.same({ ["LDTM.x128"] = 1 }, sass_tmem_loads(persistent.kernels[3]))
    assert.are.same({ ["LDTM.x128"] = 2 }, sass_tmem_loads(persistent.kernels[4]))
  end)

  it("fails when a TMEM load after the first reads the wrong columns", function()
    mutant_fails("elements differ", nil, persistent, 256, 512, 128, { ctas = 3, BN = 256, mutant = "ld_col" })
    mutant_fails("elements differ", nil, persistent, 256, 256, 128, { ctas = 3, ld = 64, out = "bf16", mutant = "ld_col" })
  end)

  -- a bf16 D through shared memory and TMA stores
  for _, c in ipairs {
    { 512, 256, 256, { ctas = 3 } }, { 256, 512, 128, { ctas = 1, BN = 64, acc = 1, stages = 2 } },
    { 384, 512, 192, { ctas = 2, BN = 256, stages = 2 } }, { 640, 384, 128, { ctas = 4, group = 2 } },
  } do
    local o = c[4]
    o.out = "bf16"
    it(("matches the CPU reference with a bf16 D through TMA stores at %dx%dx%d, BN %d, every element"):format(c[1], c[2], c[3],
      o.BN or 128), function()
      local k = persistent.build(c[1], c[2], c[3], o)
      assert.matches("cp%.async%.bulk%.tensor%.2d%.global%.shared::cta", k:specialize().ptx)
      passes(c[1] * c[2], persistent, c[1], c[2], c[3], o)
    end)
  end

  it("passes under adversarial schedules with a bf16 D", function()
    assert.matches("cp%.async%.bulk%.tensor%.2d%.global%.shared::cta", persistent.build(512, 256, 128, { out = "bf16" }):specialize().ptx)
    passes_adversarial(persistent, 512, 256, 128, { ctas = 2, out = "bf16" })
  end)

  it("is reported when the staging tile is rewritten while a TMA store may still read it", function()
    mutant_fails("still reads: a TMA store, bulk copy or bulk reduction reads its source", SEEDS, persistent, 512, 256, 128,
      { ctas = 2, out = "bf16", mutant = "no_store_wait" })
  end)

  it("is reported without fence.proxy.async between the staging writes and the TMA store", function()
    mutant_fails("gemm_persistent%.lua:%d+: cp%.async%.bulk%.tensor.- through the async proxy, but .-gemm_persistent%.lua:%d+: "
      .. "st%.shared%.v4", nil, persistent, 512, 256, 128, { ctas = 2, out = "bf16", mutant = "no_store_fence" })
  end)

  -- the 2-SM form: clusters of two CTAs, 256 x BN tiles, tcgen05.mma.cta_group::2
  for _, c in ipairs {
    { 512, 256, 128, { ctas = 2 } }, { 768, 512, 192, { ctas = 4, BN = 256, group = 2 } },
    { 512, 256, 64, { ctas = 2, BN = 64, acc = 1, stages = 2 } }, { 512, 512, 128, { ctas = 4, out = "bf16" } },
    { 768, 256, 64, { ctas = 6, BN = 256, out = "bf16", stages = 2 } },
  } do
    local o = c[4]
    o.cta_group = 2
    it(("matches the CPU reference with cta_group 2 at %dx%dx%d, BN %d, %s D, %d CTAs, every element"):format(c[1], c[2], c[3],
      o.BN or 128, o.out or "f32", o.ctas), function()
      passes(c[1] * c[2], persistent, c[1], c[2], c[3], o)
    end)
  end

  it("with cta_group 2 launches clusters of two CTAs and issues tcgen05.mma.cta_group::2 from the leader", function()
    local s = persistent.build(1024, 256, 128, { cta_group = 2 }):specialize()
    assert.are.same({ 16, 1, 1 }, s.grid)                     -- 8 tiles of 256 x 128, 2 CTAs each
    assert.are.same({ 2, 1, 1 }, s.cluster)
    assert.matches("tcgen05%.mma%.cta_group::2%.kind::f16", s.ptx)
    assert.matches("tcgen05%.commit%.cta_group::2%.mbarrier::arrive::one%.shared::cluster%.multicast::cluster%.b64", s.ptx)
    assert.matches("cp%.async%.bulk%.tensor%.2d%.shared::cluster%.global%.tile%.mbarrier::complete_tx::bytes%.cta_group::2", s.ptx)
  end)

  it("passes under adversarial schedules with cta_group 2", function()
    passes_adversarial(persistent, 512, 512, 128, { ctas = 4, cta_group = 2, out = "bf16" })
    passes_adversarial(persistent, 512, 256, 64, { ctas = 2, cta_group = 2, BN = 64, acc = 1 })
  end)

  it("is reported when the leader reuses an accumulator the peer CTA may still be reading", function()
    mutant_fails("gemm_persistent%.lua:%d+: tcgen05%.ld.- while .-gemm_persistent%.lua:%d+: tcgen05%.mma%.cta_group::2.- may still "
      .. "be writing it", SEEDS, persistent, 512, 512, 64, { ctas = 2, cta_group = 2, BN = 64, mutant = "no_peer_release" })
  end)

  it("fails when acc_full is committed to the leader only: the peer's epilogue waits forever", function()
    mutant_fails("gemm_persistent%.lua:%d+: mbarrier%.try_wait.- deadlock.- every warp of the cluster", nil, persistent, 512, 256, 64,
      { ctas = 2, cta_group = 2, BN = 64, mutant = "no_multicast" })
  end)

  it("assembles for sm_100a without spills", function()
    for _, k in ipairs(persistent.kernels) do assembles_unspilled(k) end
    assembles_unspilled(persistent.build(8192, 8192, 4096, { cta_group = 2, BN = 128, acc = 2 }))
    assembles_unspilled(persistent.build(512, 512, 256, { BN = 64, acc = 1, stages = 8 }))
    assembles_unspilled(persistent.build(8192, 8192, 4096, { BN = 256, stages = 2, out = "bf16", group = 5 }))
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    rejects(persistent, "M % 128 == 0", 100, 256, 64)
    rejects(persistent, "N % BN == 0", 128, 100, 64)
    rejects(persistent, "K % 64 == 0", 128, 128, 48)
    rejects(persistent, "BN must be 64, 128 or 256", 128, 96, 64, { BN = 96 })
    rejects(persistent, "acc must be 1 or 2", 128, 256, 64, { acc = 3 })
    rejects(persistent, "ctas must be a positive integer", 128, 128, 64, { ctas = 0 })
    rejects(persistent, "group must be a positive integer", 128, 128, 64, { group = 1.5 })
    rejects(persistent, "ld must be 32, 64 or 128 and divide BN", 128, 128, 64, { BN = 64, ld = 128 })
    rejects(persistent, 'out must be "f32" or "bf16"', 128, 128, 64, { out = "f16" })
    rejects(persistent, "<= 224 KiB with a bf16 D", 128, 256, 64, { BN = 256, out = "bf16" })
    rejects(persistent, "cta_group must be 1 or 2", 256, 128, 64, { cta_group = 4 })
    rejects(persistent, "M % 256 == 0 with cta_group 2", 384, 128, 64, { cta_group = 2 })
    rejects(persistent, "ctas must be even with cta_group 2", 256, 128, 64, { cta_group = 2, ctas = 3 })
    rejects(persistent, "mutant must be one of", 128, 128, 64, { mutant = "no_such" })
  end)

  it("runs from main and returns 0", function()
    local rc, out = run_main(persistent, {})
    assert.are.equal(0, rc)
    assert.matches("gemm_persistent%(512, 256, 256, 3 CTAs%): ok on emu", out)
  end)
end)

describe("examples/blackwell/gemm_no_tma.lua", function()
  runtime.use(H.emu())

  for _, c in ipairs {
    { 256, 256, 256, {} }, { 128, 512, 512, { stages = 4, BN = 256 } }, { 384, 128, 64, { BN = 64 } },
    { 256, 256, 256, { copy = "ld_st" } }, { 128, 256, 192, { copy = "ld_st", BN = 256 } },
  } do
    local o = c[4]
    it(("matches the CPU reference at %dx%dx%d with %s, BN %d, every element"):format(c[1], c[2], c[3], o.copy or "cp.async",
      o.BN or 128), function()
      passes(c[1] * c[2], no_tma, c[1], c[2], c[3], o)
    end)
  end

  it("passes under adversarial schedules, cp.async and ld/st", function()
    passes_adversarial(no_tma, 256, 128, 256, {})
    passes_adversarial(no_tma, 128, 128, 192, { copy = "ld_st" })
  end)

  it("fails with the operands stored unswizzled under a 128B-swizzle descriptor", function()
    for _, copy in ipairs { "cp.async", "ld_st" } do
      mutant_fails("elements differ", nil, no_tma, 256, 128, 128, { copy = copy, mutant = "no_swizzle" })
    end
  end)

  it("is reported without fence.proxy.async between the copies and the MMA", function()
    mutant_fails("gemm_no_tma%.lua:%d+: tcgen05%.mma.- through the async proxy, but .-gemm_no_tma%.lua:%d+: cp%.async%.cg.- no "
      .. "fence%.proxy%.async", nil, no_tma, 256, 128, 128, { mutant = "no_proxy_fence" })
    mutant_fails("gemm_no_tma%.lua:%d+: tcgen05%.mma.- through the async proxy, but .-gemm_no_tma%.lua:%d+: st%.shared%.v4", nil, no_tma,
      256, 128, 128, { copy = "ld_st", mutant = "no_proxy_fence" })
  end)

  it("fails without the tcgen05.commit that frees a stage", function()
    mutant_fails("gemm_no_tma%.lua:%d+: mbarrier%.try_wait.- deadlock", nil, no_tma, 128, 128, 256, { mutant = "no_commit" })
  end)

  it("is reported when a stage is refilled while its MMAs may read it", function()
    local pattern = "gemm_no_tma%.lua:%d+: tcgen05%.mma.-gemm_no_tma%.lua:%d+: cp%.async%.cg"
    mutant_fails(pattern, nil, no_tma, 256, 128, 256, { mutant = "no_empty_wait" })
    mutant_fails(pattern, SEEDS, no_tma, 256, 128, 256, { mutant = "no_empty_wait" })
  end)

  it("is reported when the epilogue reads TMEM without waiting on the last commit", function()
    mutant_fails("gemm_no_tma%.lua:%d+: tcgen05%.ld.- may still be writing it", nil, no_tma, 128, 128, 128, { mutant = "no_done_wait" })
  end)

  it("fails without tcgen05.fence::after_thread_sync before the MMAs", function()
    fence_mutant("gemm_no_tma", no_tma, 128, 128, 128, { mutant = "no_fence" })
  end)

  it("assembles for sm_100a without spills", function()
    for _, k in ipairs(no_tma.kernels) do assembles_unspilled(k) end
    assembles_unspilled(no_tma.build(256, 256, 256, { stages = 4, BN = 64 }))
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    rejects(no_tma, "M % 128 == 0", 64, 128, 64)
    rejects(no_tma, "N % BN == 0", 128, 64, 64)
    rejects(no_tma, "K % 64 == 0", 128, 128, 32)
    rejects(no_tma, 'copy must be "cp.async" or "ld_st"', 128, 128, 64, { copy = "tma" })
    rejects(no_tma, "stages must be 2 or 4", 128, 128, 64, { stages = 3 })
    rejects(no_tma, "mutant must be one of", 128, 128, 64, { mutant = "no_such" })
  end)

  it("runs from main, cp.async and ld/st, and returns 0", function()
    local rc, out = run_main(no_tma, {})
    assert.are.equal(0, rc)
    assert.matches("gemm_no_tma%(256, 256, 256, cp%.async%): ok on emu", out)
    assert.matches("gemm_no_tma%(256, 256, 256, ld_st%): ok on emu", out)
  end)
end)

describe("examples/blackwell/grouped_gemm.lua", function()
  runtime.use(H.emu())

  for _, c in ipairs {
    { 4, 256, 128, 128, {} }, { 3, 128, 192, 256, { BN = 96, stages = 2 } }, { 2, 384, 256, 512, { BN = 256 } },
    { 1, 128, 64, 64, { BN = 64 } },
  } do
    it(("matches the CPU reference for %d groups of %dx%dx%d, every element of every group"):format(c[1], c[2], c[3], c[4]), function()
      passes(c[1] * c[2] * c[3], grouped, c[1], c[2], c[3], c[4], c[5])
    end)
  end

  it("passes under adversarial schedules", function()
    passes_adversarial(grouped, 3, 128, 128, 256, { stages = 2 })
  end)

  it("fails with the MMA descriptors unswizzled: reported against the TMA load's 128B swizzle", function()
    mutant_fails("grouped_gemm%.lua:%d+: tcgen05%.mma.- with no swizzle .-grouped_gemm%.lua:%d+: cp%.async%.bulk%.tensor", nil,
      grouped, 2, 128, 128, 128, { mutant = "no_swizzle" })
  end)

  it("fails when every CTA loads group 0 (the ctaid.z offsets taken out)", function()
    mutant_fails("elements", nil, grouped, 3, 128, 128, 64, { mutant = "no_group" })
  end)

  it("fails without the tcgen05.commit that frees a stage", function()
    mutant_fails("grouped_gemm%.lua:%d+: mbarrier%.try_wait.- deadlock", nil, grouped, 2, 128, 128, 256, { stages = 2, mutant = "no_commit" })
  end)

  it("is reported when the MMAs do not wait for their stage's TMA load", function()
    mutant_fails("grouped_gemm%.lua:%d+: tcgen05%.mma.- reads .-shared memory at offset", SEEDS, grouped, 2, 128, 128, 256,
      { mutant = "no_full_wait" })
  end)

  it("is reported when the epilogue reads TMEM without waiting on the last commit", function()
    mutant_fails("grouped_gemm%.lua:%d+: tcgen05%.mma.- writes tensor%-memory column %d+, which "
      .. "examples/blackwell/grouped_gemm%.lua:%d+: tcgen05%.ld.- no thread synchronization orders the two",
      nil, grouped, 2, 128, 128, 128, { mutant = "no_done_wait" })
  end)

  it("fails without tcgen05.fence::after_thread_sync after the full wait", function()
    fence_mutant("grouped_gemm", grouped, 2, 128, 128, 128, { mutant = "no_fence" })
  end)

  it("assembles for sm_100a without spills", function()
    for _, k in ipairs(grouped.kernels) do assembles_unspilled(k) end
  end)

  it("rejects shapes that break its rules, at the caller's line", function()
    rejects(grouped, "G must be a positive integer", 0, 128, 128, 64)
    rejects(grouped, "M % 128 == 0", 2, 100, 128, 64)
    rejects(grouped, "N % BN == 0", 2, 128, 100, 64)
    rejects(grouped, "K % 64 == 0", 2, 128, 128, 40)
    rejects(grouped, "BN must be a multiple of 32 in [64, 256]", 2, 128, 128, 64, { BN = 48 })
    rejects(grouped, "stages must be 2, 4 or 8", 2, 128, 128, 64, { stages = 3 })
    rejects(grouped, "mutant must be one of", 2, 128, 128, 64, { mutant = "no_such" })
  end)

  it("runs from main and returns 0", function()
    local rc, out = run_main(grouped, {})
    assert.are.equal(0, rc)
    assert.matches("grouped_gemm%(G 4, 256, 128, 128%): ok on emu", out)
  end)
end)
