-- tcgen05 ordering on the emulator (issue 16 item 11): taking a
-- tcgen05.fence::before_thread_sync / after_thread_sync, a tcgen05.wait::ld
-- or wait::st, or the mbarrier wait between an MMA's commit and the read of
-- its results out of examples/blackwell/gemm.lua or the tcgen05 probes
-- stops the launch with a report at the Lua line of the access, under the
-- default schedule and the adversarial one; the kernels as written run
-- clean under both.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local bw = require "pyptx.blackwell"
local H = require "spec.helpers"
local reg, ptx, smem, T = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types

runtime.use(H.emu())

local SEEDS = { 1, 2, 3 }

local adversarial = H.adversarial

--- pcall(fn, ...) with dev as the current device (the default emulator after).
local function on(dev, fn, ...)
  runtime.use(dev)
  local res = { pcall(fn, ...) }
  runtime.use(H.emu())
  return unpack(res, 1, table.maxn(res))
end

--- The schedules a kernel is run under: the default, then each seed's.
local function schedules()
  local devs = { { "the default schedule", H.emu() } }
  for _, s in ipairs(SEEDS) do devs[#devs + 1] = { "adversarial seed " .. s, adversarial(s) } end
  return devs
end

--- The module at path loaded afresh with the nth occurrence of old taken
-- out (the line stays, so every other line keeps its number); its source.
local function without(path, old, nth) return H.planted(path, old, "", nth or 1) end

--- Assert run() (a check returning ok, report) stops under every schedule
-- with one of the reports alts = { { text of the reported line of path, pattern }... }.
local function assert_reported(run, path, src, alts)
  for _, s in ipairs(schedules()) do
    local ok, res, report = on(s[2], run)
    assert.is_false(ok and res, ("%s: it ran: %s"):format(s[1], tostring(report and report.message)))
    local msg, found = tostring(res), false
    for _, alt in ipairs(alts) do
      found = found or (msg:find(H.lit(path) .. ":" .. H.line_of(src, alt[1]) .. ": ") and msg:find(alt[2])) ~= nil
    end
    local wanted = {}
    for _, alt in ipairs(alts) do wanted[#wanted + 1] = ("%q at %q"):format(alt[2], alt[1]) end
    assert(found, ("%s: expected one of %s, got: %s"):format(s[1], table.concat(wanted, "; "), msg))
  end
end

-- The other report a missing wait can give first: the warp that did not
-- wait read cells an asynchronous write (issued later) then overwrites.
local RACED = "writes tensor%-memory column %d+, which .-tcgen05%.ld.- reads, and no thread synchronization orders the two"

local GEMM = "examples/blackwell/gemm.lua"
local FA, FB = "tc.fence_after_thread_sync()", "tc.fence_before_thread_sync()"

describe("examples/blackwell/gemm.lua without a tcgen05 fence or wait", function()
  -- { what, text taken out, its occurrence, { { the line reported (its text), the report }... } }
  local MUTATIONS = {
    { "the fence before the setup barrier (after tcgen05.alloc)", FB, 1, { { "tc.mma { d = taddr",
      "tcgen05%.mma writes D in columns that .-tcgen05%.alloc.- %(warp 2%) allocated, and that warp executed no "
      .. "tcgen05%.fence::before_thread_sync after it" } } },
    { "the fence after the full-stage wait, before the MMAs", FA, 2, { { "tc.mma { d = taddr",
      "tcgen05%.mma issued after .-gemm%.lua:%d+: mbarrier%.try_wait.- with no tcgen05%.fence::after_thread_sync by this "
      .. "warp" } } },
    { "the fence after the accumulator wait, before tcgen05.ld", FA, 3, { { "tc.ld { dst = v",
      "tcgen05%.ld reads tensor%-memory column 0, which .-tcgen05%.mma.- wrote; this warp knows it completed .-but executed "
      .. "no tcgen05%.fence::after_thread_sync since" } } },
    { "the fence before the teardown barrier", FB, 2, { { "tc.dealloc {",
      "tcgen05%.dealloc frees tensor%-memory column 0, which .-tcgen05%.ld.- %(warp %d%) reads, and that warp executed no "
      .. "tcgen05%.fence::before_thread_sync after it" } } },
    { "the fence after the teardown barrier, before tcgen05.dealloc", FA, 4, { { "tc.dealloc {",
      "tcgen05%.dealloc frees tensor%-memory column %d+, which .-tcgen05%.ld.- reads, and this warp executed no "
      .. "tcgen05%.fence::after_thread_sync since the thread synchronization" } } },
    { "tcgen05.wait::ld", 'tc.wait("ld")', 1, { { "ptx.inst.st.global.v4.f32",
      "reads %%f%d+ before tcgen05%.wait::ld: .-tcgen05%.ld.- fills it asynchronously" } } },
    { "the mbarrier wait between the MMAs' commit and tcgen05.ld", "wait(done0, 0)", 1, {
      { "tc.ld { dst = v", "tcgen05%.ld reads tensor%-memory column 0 while .-tcgen05%.mma.- may still be writing it: "
        .. ".-this warp has not waited" },
      { "tc.mma { d = taddr", "tcgen05%.mma " .. RACED } } },
  }
  for _, cta in ipairs { 1, 2 } do
    for _, m in ipairs(MUTATIONS) do
      it(("reports the cta_group %d gemm without %s, at the access, under every schedule"):format(cta, m[1]), function()
        local gemm, src = without(GEMM, m[2], m[3])
        assert_reported(function() return gemm.check(256, 256, 128, { cta_group = cta }) end, GEMM, src, m[4])
      end)
    end

    -- The fence after the setup barrier orders nothing the later fences do
    -- not: every tcgen05 operation of a warp follows one of them (after the
    -- full-stage wait, the accumulator wait, the teardown barrier), and a
    -- fence::after_thread_sync orders what follows it after every thread
    -- synchronization before it, the setup barrier included.
    it(("runs the cta_group %d gemm without the redundant fence after the setup barrier"):format(cta), function()
      local gemm = without(GEMM, FA, 1)
      for _, s in ipairs(schedules()) do
        local ok, res, report = on(s[2], gemm.check, 256, 256, 128, { cta_group = cta })
        assert(ok and res, ("%s: %s"):format(s[1], tostring(ok and report.message or res)))
      end
    end)
  end
end)

local PROBES, SUITE = "examples/blackwell/tcgen05_probes.lua", "examples/blackwell/tcgen05_suite.lua"

describe("the tcgen05 probes without a fence or wait", function()
  -- { what, text taken out, occurrence, probe constructor and its argument, { { line reported, report }... },
  --   the file of those lines when not the probes' (the suite's read_lanes) }
  local MUTATIONS = {
    { "tcgen05.wait::st between tcgen05.st and tcgen05.ld", 'tc.wait("st")', 1, "round_trip", nil, { { "tc.ld { dst = back",
      "tcgen05%.ld reads tensor%-memory column 0, which .-tcgen05%.st.- %(warp %d%) stores asynchronously with no "
      .. "tcgen05%.wait::st by that warp since" } } },
    { "tcgen05.wait::ld before the registers are used", 'tc.wait("ld")', 2, "ld_registers", nil,
      { { "all[#all + 1] = a[i]:bxor(c[i])", "before tcgen05%.wait::ld" } } },
    { "the fence after the tcgen05.cp's mbarrier wait", FA, 3, "ld_phases", nil, { { "tc.ld { dst = v, taddr = h == 0",
      "this warp knows it completed .-but executed no tcgen05%.fence::after_thread_sync" } } },
    { "the mbarrier wait after the tcgen05.cp's commit", "ptx.mbarrier.wait(bar[0], phase)", 1, "ld_phases", nil, {
      { "tc.ld { dst = v, taddr = h == 0", "while .-tcgen05%.cp.- may still be writing it" },
      { "tc.cp { taddr = c == 0", "tcgen05%.cp " .. RACED } } },
    { "the fence after the MMA's mbarrier wait", FA, 1, "epilogue_partition", 64, { { "tc.ld { dst = v, taddr = c == 0",
      "but executed no tcgen05%.fence::after_thread_sync since" } }, SUITE },
  }
  for _, m in ipairs(MUTATIONS) do
    it(("reports the %s probe without %s, under every schedule"):format(m[4], m[1]), function()
      local probes, src = without(PROBES, m[2], m[3])
      local path = m[7] or PROBES
      if m[7] then src = assert(H.read(m[7])) end
      assert_reported(function() return probes.check(probes[m[4]](m[5])) end, path, src, m[6])
    end)
  end

  it("reports a warp of the second warpgroup reading another quadrant's lanes", function()
    local probes = H.planted(PROBES, "wgs == 1 and warp or warp:band(3)", "warp")
    local ok, err = pcall(probes.check, probes.epilogue_partition(64))
    assert.is_false(ok)
    assert.matches("warp 4 %(warp 0 of its warpgroup%) may access tensor%-memory lanes 0%.%.31 only; this access covers "
      .. "lanes 128%.%.159", tostring(err))
  end)
end)

describe("the Blackwell examples under the adversarial schedule", function()
  local function clean(name, run)
    for _, seed in ipairs(SEEDS) do
      local ok, res, report = on(adversarial(seed), run)
      assert(ok and res, ("%s, seed %d: %s"):format(name, seed, tostring(ok and report.message or res)))
    end
  end

  it("runs gemm.lua (1-SM and 2-SM) clean", function()
    local gemm = dofile(GEMM)
    for _, cta in ipairs { 1, 2 } do clean("gemm cta_group " .. cta, function() return gemm.check(256, 256, 128, { cta_group = cta }) end) end
  end)

  it("runs every tcgen05 probe clean", function()
    local probes = dofile(PROBES)
    for _, c in ipairs(probes.cases) do clean(c.name, function() return probes.check(c) end) end
  end)

  it("runs every tcgen05_suite case clean", function()
    local suite = dofile(SUITE)
    for _, c in ipairs(suite.cases) do clean(c.name, function() return suite.check(c) end) end
  end)
end)

--- A 256-thread kernel where warp 1 reads 8 columns of quadrant 1
-- (tcgen05.ld) and warp 5 (the same quadrant, the second warpgroup) then
-- overwrites them (tcgen05.st), handed over by sync = "mbarrier" (warp 1
-- arrives, warp 5 waits) or "barrier" (bar.sync of the CTA) or nil (no
-- hand-over); before / after: warp 1's fence::before_thread_sync and warp
-- 5's fence::after_thread_sync around it. Returns the kernel and the line of the store.
local function handover(o)
  local at = {}
  local k = pyptx.kernel("tc_handover") { arch = "sm_100a", block = { 256, 1, 1 }, function()
    local tc = ptx.tcgen05
    local slot = smem.alloc(T.u32, 1)
    local bar = smem.mbarrier(1)
    local tid = reg.from(ptx.special.tid.x(), T.u32)
    local warp = tid:shr(5)
    ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 32) end)
    ptx.if_(warp:eq(0), function()
      tc.alloc { dst = slot, ncols = 32 }
      tc.relinquish_alloc_permit {}
    end)
    tc.fence_before_thread_sync()
    ptx.bar_sync(0)
    tc.fence_after_thread_sync()
    local taddr = reg.scalar(T.b32)
    ptx.inst.ld.shared.b32(taddr, ptx.addr(slot))
    local quad1 = taddr + bw.tmem_offset(32, 0)
    ptx.if_(warp:eq(1), function()
      local v = {}
      for i = 1, 8 do v[i] = reg.scalar(T.b32) end
      tc.ld { dst = v, taddr = quad1, shape = "32x32b" }
      tc.wait("ld")
      if o.before then tc.fence_before_thread_sync() end
      if o.sync == "mbarrier" then ptx.mbarrier.arrive(bar[0]) end
    end)
    if o.sync == "barrier" then ptx.bar_sync(1) end
    ptx.if_(warp:eq(5), function()
      if o.sync == "mbarrier" then ptx.mbarrier.wait(bar[0], 0) end
      if o.after then tc.fence_after_thread_sync() end
      local v = {}
      for i = 1, 8 do v[i] = reg.scalar(T.b32, i) end
      at.st = debug.getinfo(1, "l").currentline + 1
      tc.st { taddr = quad1, src = v, shape = "32x32b" }
      tc.wait("st")
    end)
    tc.fence_before_thread_sync()
    ptx.bar_sync(0)
    ptx.if_(warp:eq(0), function()
      tc.fence_after_thread_sync()
      tc.dealloc { taddr = taddr, ncols = 32 }
    end)
    ptx.ret()
  end }
  return k, at
end

describe("the emulator's tcgen05 ordering between warps", function()
  for _, sync in ipairs { "mbarrier", "barrier" } do
    it("runs a tcgen05.ld handed over to another warp's tcgen05.st through " .. sync .. " with both fences", function()
      local k = handover { sync = sync, before = true, after = true }
      for _, s in ipairs(schedules()) do
        local ok, err = on(s[2], k)
        assert(ok, ("%s: %s"):format(s[1], tostring(err)))
      end
    end)

    for _, case in ipairs {
      { "the reader's fence::before_thread_sync", { after = true }, "that warp executed no tcgen05%.fence::before_thread_sync after it" },
      { "the writer's fence::after_thread_sync", { before = true },
        "this warp executed no tcgen05%.fence::after_thread_sync since the thread synchronization that orders the two" },
    } do
      it(("reports the hand-over through %s without %s, at the tcgen05.st"):format(sync, case[1]), function()
        case[2].sync = sync
        local k, at = handover(case[2])
        local ok, err = pcall(k)
        assert.is_false(ok)
        assert.matches("tcgen05_fences_spec%.lua:" .. at.st .. ": tcgen05%.st.-: tcgen05%.st writes tensor%-memory column 0, "
          .. "which .-tcgen05_fences_spec%.lua:%d+: tcgen05%.ld.- %(warp 1%) reads, and " .. case[3], tostring(err))
      end)
    end
  end

  it("reports a tcgen05.st over another warp's tcgen05.ld with no thread synchronization between", function()
    local k, at = handover { before = true, after = true }
    local ok, err = pcall(k)
    assert.is_false(ok)
    assert.matches("tcgen05_fences_spec%.lua:" .. at.st .. ": .-%(warp 1%) reads, and no thread synchronization orders "
      .. "the two: a barrier both warps take part in, or an mbarrier that warp arrives on and this one waits for", tostring(err))
  end)
end)
