-- Blackwell on the emulator: examples/blackwell/tcgen05_suite.lua and
-- examples/blackwell/gemm.lua (1-SM and 2-SM) run and match their CPU
-- references on fresh random inputs, every element; the MMA numerics agree
-- exactly with a matmul written here from the raw inputs; and the checks a
-- GPU does not make (a register read before tcgen05.wait::ld, columns not
-- allocated, dealloc of live or unknown columns, a CTA exiting with columns
-- allocated, MMA results read without a commit or a wait on its mbarrier)
-- each stop the launch with a message at the user's Lua line.
local bit = require "bit"
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local runtime = require "pyptx.runtime"
local check = require "pyptx.tools.verify"
local H = require "spec.helpers"
local reg, ptx, smem, Tile, T = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile, pyptx.types

runtime.use(H.emu())

--- This spec file's name in messages (its Lua lines), as a pattern.
local HERE = "spec/blackwell_emu_spec%.lua:"

--- The line the caller is on.
local function line() return debug.getinfo(2, "l").currentline end

--- Launch kernel k (no inputs) and return the error message (or fail if it runs).
local function failure(k)
  local ok, err = pcall(function() return k() end)
  assert(not ok, "the kernel ran without an error")
  return tostring(err)
end

--- Assert msg reports the problem at this spec's line n and matches pattern.
local function assert_at(msg, n, pattern)
  assert(msg:find(": " .. HERE .. n .. ": "), ("expected the error at line %d of the spec, got: %s"):format(n, msg))
  assert(msg:find(pattern), ("expected %q in: %s"):format(pattern, msg))
end

-- ------------------------------------------------------------------ the examples

describe("examples/blackwell/tcgen05_suite.lua on the emulator", function()
  local suite = dofile "examples/blackwell/tcgen05_suite.lua"

  for _, c in ipairs(suite.cases) do
    it("matches the CPU reference for " .. c.name .. ", every element, fresh inputs", function()
      local ok, report = suite.check(c)
      assert.is_true(ok, c.name .. ": " .. report.message)
      assert.is_true(report.count > 0)
    end)
  end

  it("covers every primitive it names", function()
    local seen = {}
    for _, c in ipairs(suite.cases) do seen[c.name:gsub("^tc_", ""):match("^[a-z]+")] = true end
    for _, what in ipairs { "alloc", "st", "ld", "mma", "cp", "shift" } do assert(seen[what], what) end
    assert.is_true(#suite.MMA_CASES >= 10)
  end)

  it("runs every case from main and returns 0", function()
    local lines, saved = {}, _G.print
    _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
    local ok, rc = pcall(suite.main, { "alloc", "mma_cta2_m256", "shift" })
    _G.print = saved
    assert(ok, rc)
    assert.are.equal(0, rc)
    local out = table.concat(lines, "\n")
    assert.matches("tcgen05 mma_cta2_m256: ok on emu", out)
    assert.are.equal(3, select(2, out:gsub(": ok on emu", "")))
  end)
end)

describe("examples/blackwell/gemm.lua on the emulator", function()
  local gemm = dofile "examples/blackwell/gemm.lua"

  for _, case in ipairs {
    { 256, 256, 128, { cta_group = 1 } }, { 256, 256, 128, { cta_group = 2 } },
    { 128, 256, 512, { cta_group = 1, BN = 128, stages = 2 } }, { 256, 128, 512, { cta_group = 2, BN = 64, stages = 4 } },
  } do
    it(("matches the CPU reference at %dx%dx%d, cta_group %d, every element, fresh inputs"):format(case[1], case[2], case[3],
      case[4].cta_group), function()
      local ok, report = gemm.check(case[1], case[2], case[3], case[4])
      assert.is_true(ok, report.message)
      assert.are.equal(case[1] * case[2], report.count)
    end)
  end

  it("unrolls its k-block loops at trace time (opts.unroll) and still matches, 1-SM and 2-SM", function()
    for _, cta in ipairs { 1, 2 } do
      -- 8 k-blocks through 4 stages: every stage twice, both barrier phases
      local ok, report = gemm.check(256, 256, 512, { cta_group = cta, BN = 128, unroll = true })
      assert.is_true(ok, report.message)
      local rolled = gemm.build(256, 256, 512, { cta_group = cta, BN = 128 }):ptx()
      local unrolled = gemm.build(256, 256, 512, { cta_group = cta, BN = 128, unroll = true }):ptx()
      assert.matches("$L__range_", rolled, 1, true)
      assert.is_nil(unrolled:find("$L__range_", 1, true))   -- no counted loop left
      assert.are.equal(8, select(2, unrolled:gsub("tcgen05%.commit", "")) - 1)   -- one per k-block, one at the end
    end
  end)

  it("runs from main, 1-SM and 2-SM, and returns 0", function()
    local lines, saved = {}, _G.print
    _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
    local ok, rc = pcall(gemm.main, {})
    _G.print = saved
    assert(ok, rc)
    assert.are.equal(0, rc)
    local out = table.concat(lines, "\n")
    assert.matches("gemm%(256, 256, 128, cta_group 1%): ok on emu", out)
    assert.matches("gemm%(256, 256, 128, cta_group 2%): ok on emu", out)
  end)
end)

-- ------------------------------------------------------------------ numerics

--- Integer-valued inputs the types hold exactly, so D is exact in any order of summation.
local EXACT = {
  bf16 = { -4, 4 }, f16 = { -4, 4 }, tf32 = { -4, 4 }, s8 = { -128, 127 }, u8 = { 0, 255 },
  e4m3 = { -2, 2, 0.5 }, e5m2 = { -2, 2, 0.5 },
}
local K_OF = { f16 = 16, tf32 = 8, f8f6f4 = 32, i8 = 32 }   -- the ISA's K of each dense kind

--- n values from an xorshift stream in range r = { lo, hi[, step] }.
local function draw(n, r, seed)
  local rng, out = H.rng(seed), {}
  local step = r[3] or 1
  local count = math.floor((r[2] - r[1]) / step) + 1
  for i = 1, n do out[i] = r[1] + ((rng() % count + count) % count) * step end
  return out
end

--- D = A * B^T of row-major lists, summed exactly.
local function matmul(a, b, m, n, kd)
  local d = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local s = 0
      for t = 1, kd do s = s + a[i * kd + t] * b[j * kd + t] end
      d[i * n + j + 1] = s
    end
  end
  return d
end

describe("tcgen05.mma numerics", function()
  local suite = dofile "examples/blackwell/tcgen05_suite.lua"

  for _, name in ipairs { "bf16_128B", "f16_f16acc_m64", "tf32_64B", "e4m3_e5m2_32B", "s8_u8", "bf16_mn_major",
                          "bf16_mn_none", "bf16_a_tmem", "cta2_m256", "cta2_m128" } do
    it("gives exactly A * B^T of exact inputs for " .. name .. " (a matmul written here from the raw inputs)", function()
      local c = suite.case["mma_" .. name]
      local s = c.spec
      local kd = K_OF[s.kind] * (s.steps or 2)
      local seed = check.fresh_seed()
      local inputs = { a = draw(s.M * kd, EXACT[s.a], seed), b = draw(s.N * kd, EXACT[s.b or s.a], seed + 1) }
      local ok, report = check.run { kernel = c.kernel, args = c.args(inputs), reference = matmul(inputs.a, inputs.b, s.M, s.N, kd),
                                     tolerance = { atol = 0, rtol = 0 } }
      assert.is_true(ok, name .. ": " .. report.message)
    end)
  end

  it("gives exactly A * B^T in the GEMM, 1-SM and 2-SM, from exact inputs", function()
    local gemm = dofile "examples/blackwell/gemm.lua"
    for _, cta in ipairs { 1, 2 } do
      local m, n, kd = 256, 128, 256
      local seed = check.fresh_seed()
      local inputs = { a = draw(m * kd, { -2, 2 }, seed), b = draw(n * kd, { -2, 2 }, seed + 7), M = m, N = n, K = kd }
      local k = gemm.build(m, n, kd, { cta_group = cta, BN = 128 })
      local ok, report = check.run { kernel = k, args = gemm.args(inputs), reference = matmul(inputs.a, inputs.b, m, n, kd),
                                     tolerance = { atol = 0, rtol = 0 } }
      assert.is_true(ok, "cta_group " .. cta .. ": " .. report.message)
    end
  end)

  it("lays operands out as the ISA's canonical layouts say (spot values)", function()
    -- K-major 128B swizzle: row r of 128 bytes, 16-byte chunk c at chunk c ^ (r % 8)
    local L = suite.layout { major = "K", swizzle = "128B", strided = 64, bytes = 128 }
    assert.are.same({ 1024, 16 }, { L.sbo, L.lbo })
    assert.are.equal(3 * 128 + bit.bxor(5, 3) * 16 + 4, L.at(3, 5 * 16 + 4))
    -- K-major, no swizzle: 8x16-byte core matrices, K first (LBO 128), 8-row groups SBO apart
    local N0 = suite.layout { major = "K", swizzle = "none", strided = 16, bytes = 64 }
    assert.are.same({ 128, 512 }, { N0.lbo, N0.sbo })
    assert.are.equal(512 + 2 * 128 + 3 * 16 + 1, N0.at(11, 33))
    -- MN-major, 64B swizzle: 8 K rows of 64 bytes per atom, 64-byte MN blocks K * 64 apart
    local MN = suite.layout { major = "MN", swizzle = "64B", strided = 32, bytes = 128 }
    assert.are.same({ 32 * 64, 512 }, { MN.lbo, MN.sbo })
    assert.are.equal(32 * 64 + 512 + 2 * 64 + bit.bxor(1, 1) * 16, MN.at(10, 64 + 16))
  end)
end)

-- ------------------------------------------------------------------ the checks

--- A small tcgen05 kernel for sm_100a with 128 threads writing a 128 x 32
-- f32 output; body(O, ctx) gets { tid, warp, slot (the TMEM address slot) }.
local function tiny(name, body)
  return pyptx.kernel(name) { arch = "sm_100a", block = { 128, 1, 1 }, out_specs = { Tile(128, 32, T.f32) },
    function(O)
      local tid = reg.from(ptx.special.tid.x(), T.u32)
      body(O, { tid = tid, warp = tid:shr(5), slot = smem.alloc(T.u32, 1) })
      ptx.ret()
    end }
end

--- Warp 0 allocates ncols (line 1 of the block), the CTA synchronizes; returns the TMEM address.
local function alloc(cx, ncols, relinquish)
  local tc = ptx.tcgen05
  ptx.if_(cx.warp:eq(0), function()
    tc.alloc { dst = cx.slot, ncols = ncols }
    if relinquish ~= false then tc.relinquish_alloc_permit {} end
  end)
  tc.fence_before_thread_sync()
  ptx.bar_sync(0)
  tc.fence_after_thread_sync()
  local taddr = reg.scalar(T.b32)
  ptx.inst.ld.shared.b32(taddr, ptx.addr(cx.slot))
  return taddr
end

--- Synchronize, then warp 0 frees ncols at taddr.
local function free(cx, taddr, ncols)
  local tc = ptx.tcgen05
  tc.fence_before_thread_sync()
  ptx.bar_sync(0)
  ptx.if_(cx.warp:eq(0), function()
    tc.fence_after_thread_sync()
    tc.dealloc { taddr = taddr, ncols = ncols }
  end)
end

--- Each warp reads 32 columns of its lanes from col and stores them (wait::ld unless skipped).
local function read_out(O, cx, taddr, col, skip_wait, lines)
  local tc = ptx.tcgen05
  local v = reg.array(T.f32, 32)
  local dst = {}
  for i = 0, 31 do dst[i + 1] = v[i] end
  local at = taddr + cx.warp * bw.tmem_offset(32, 0)
  lines.ld = line(); tc.ld { dst = dst, taddr = col == 0 and at or at + col, shape = "32x32b" }
  if not skip_wait then tc.wait("ld") end
  local p = ptx.global_ptrs(O) + (cx.tid * 32):mul_wide(4)
  lines.st = line(); ptx.inst.st.global.f32(ptx.addr(p), dst[1])
  for i = 2, 32 do ptx.inst.st.global.f32(ptx.addr(p, (i - 1) * 4), dst[i]) end
end

--- One MMA (M = 128, N = 32, bf16 zeros from shared memory, no swizzle)
-- into taddr by thread 0, with the commit to bar unless opts.no_commit.
local function mma(cx, taddr, bar, opts, lines)
  local sA, sB = smem.alloc(T.b8, 128 * 32, { align = 1024 }), smem.alloc(T.b8, 32 * 32, { align = 1024 })
  local zero = reg.scalar(T.u32, 0)
  for i = 0, 7 do
    ptx.inst.st.shared.u32(ptx.addr(sA:base() + cx.tid * 32 + i * 4), zero)
  end
  ptx.inst.st.shared.u32(ptx.addr(sB:base() + cx.tid * 8), zero)
  ptx.inst.st.shared.u32(ptx.addr(sB:base() + cx.tid * 8 + 4), zero)
  ptx.fence.proxy_async("shared::cta")
  ptx.bar_sync(0)
  local first = cx.tid:eq(0)
  ptx.if_(first, function()
    local idesc = reg.scalar(T.b32, bw.idesc { a = "bf16", M = 128, N = 32 })
    local ad = bw.smem_desc_reg(sA:base(), { lbo = 128, sbo = 256 })
    local bd = bw.smem_desc_reg(sB:base(), { lbo = 128, sbo = 256 })
    lines.mma = line(); ptx.tcgen05.mma { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = -first }
    lines.commit = line(); if not opts.no_commit then ptx.tcgen05.commit { mbar = bar[0] } end
  end)
end

describe("the emulator's tcgen05 checks", function()
  it("reports a register read before tcgen05.wait::ld, at the reading line", function()
    local lines = {}
    local k = tiny("no_wait_ld", function(O, cx)
      local taddr = alloc(cx, 32)
      read_out(O, cx, taddr, 0, true, lines)
      free(cx, taddr, 32)
    end)
    local msg = failure(k)
    assert_at(msg, lines.st, "reads %%f1 before tcgen05.wait::ld: .-" .. HERE .. lines.ld .. ": tcgen05.ld.sync.aligned.32x32b.x32")
  end)

  it("reports columns that are not allocated, at the access", function()
    local lines = {}
    local k = tiny("unallocated", function(O, cx)
      local taddr = alloc(cx, 32)
      read_out(O, cx, taddr, 16, false, lines)
      free(cx, taddr, 32)
    end)
    assert_at(failure(k), lines.ld, "tcgen05.ld reads columns 16..47 of tensor memory, but column 32 is not allocated in CTA "
      .. "%(0,0,0%) %(columns 0..31 by " .. HERE)
  end)

  it("reports MMA results read with no tcgen05.commit after the MMA", function()
    local lines = {}
    local k = tiny("no_commit", function(O, cx)
      local bar = smem.mbarrier(1)
      local taddr = alloc(cx, 32)
      mma(cx, taddr, bar, { no_commit = true }, lines)
      ptx.bar_sync(0)
      ptx.tcgen05.fence_after_thread_sync()
      read_out(O, cx, taddr, 0, false, lines)
      free(cx, taddr, 32)
    end)
    assert_at(failure(k), lines.ld, "tcgen05.ld reads tensor%-memory column 0 while " .. HERE .. lines.mma
      .. ": tcgen05.mma.cta_group::1.kind::f16 .- may still be writing it: no tcgen05.commit by its issuing thread %(lane 0 of warp 0%)")
  end)

  it("reports MMA results read by a warp that never waited on the commit's mbarrier", function()
    local lines = {}
    local k = tiny("no_wait", function(O, cx)
      local bar = smem.mbarrier(1)
      ptx.if_(cx.tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
      local taddr = alloc(cx, 32)
      mma(cx, taddr, bar, {}, lines)
      ptx.bar_sync(0)
      ptx.if_(cx.warp:eq(3), function() ptx.mbarrier.wait(bar[0], 0) end)   -- only warp 3 waits
      ptx.tcgen05.fence_after_thread_sync()
      read_out(O, cx, taddr, 0, false, lines)
      free(cx, taddr, 32)
    end)
    assert_at(failure(k), lines.ld, "may still be writing it: " .. HERE .. lines.commit
      .. ": tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 .- but this warp has not waited on that mbarrier phase")
  end)

  it("accepts a warp that synchronized with the one that waited", function()
    local lines = {}
    local k = tiny("synced", function(O, cx)
      local bar = smem.mbarrier(1)
      ptx.if_(cx.tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
      local taddr = alloc(cx, 32)
      mma(cx, taddr, bar, {}, lines)
      ptx.if_(cx.warp:eq(3), function() ptx.mbarrier.wait(bar[0], 0) end)
      ptx.tcgen05.fence_before_thread_sync()
      ptx.bar_sync(0)                                    -- warp 3's knowledge reaches every warp
      ptx.tcgen05.fence_after_thread_sync()
      read_out(O, cx, taddr, 0, false, lines)
      free(cx, taddr, 32)
    end)
    local out = k():values()
    for i = 1, 128 * 32 do assert(out[i] == 0, "element " .. i .. " is " .. tostring(out[i])) end
  end)

  it("reports a dealloc while an MMA may still be writing the columns", function()
    local lines = {}
    local k = tiny("early_dealloc", function(_, cx)
      local bar = smem.mbarrier(1)
      ptx.if_(cx.tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
      local taddr = alloc(cx, 32)
      mma(cx, taddr, bar, {}, lines)
      ptx.bar_sync(0)
      ptx.if_(cx.warp:eq(0), function()
        lines.dealloc = line(); ptx.tcgen05.dealloc { taddr = taddr, ncols = 32 }
      end)
    end)
    assert_at(failure(k), lines.dealloc, "deallocates tensor%-memory column 0 while " .. HERE .. lines.mma
      .. ": tcgen05.mma.-may still be writing it: .-this warp has not waited")
  end)

  it("reports a dealloc of columns that are not an allocation, or of another size", function()
    for _, case in ipairs {
      { col = 32, ncols = 32, pattern = "tcgen05.dealloc of 32 columns at tensor%-memory address 0x20, where no allocation of "
        .. "this CTA starts %(columns 0..63 by " .. HERE },
      { col = 0, ncols = 32, pattern = "tcgen05.dealloc of 32 columns at column 0, but " .. HERE .. "%d+: tcgen05.alloc.- allocated 64 there" },
    } do
      local lines = {}
      local k = tiny("bad_dealloc", function(_, cx)
        local taddr = alloc(cx, 64)
        ptx.bar_sync(0)
        ptx.if_(cx.warp:eq(0), function()
          lines.dealloc = line(); ptx.tcgen05.dealloc { taddr = case.col == 0 and taddr or taddr + case.col, ncols = case.ncols }
        end)
      end)
      assert_at(failure(k), lines.dealloc, case.pattern)
    end
  end)

  it("reports a CTA that exits with columns allocated, at the tcgen05.alloc", function()
    local at
    local k = tiny("leak", function(_, cx)
      ptx.if_(cx.warp:eq(0), function()
        at = line(); ptx.tcgen05.alloc { dst = cx.slot, ncols = 128 }
      end)
    end)
    assert_at(failure(k), at, "the CTA exited with 128 column%(s%) of tensor memory still allocated, 128 of them %(columns 0..127%) "
      .. "by this tcgen05.alloc; every allocation needs a tcgen05.dealloc before the kernel exits")
  end)

  it("reports an allocation after relinquish_alloc_permit, and one that cannot fit", function()
    local at
    local k = tiny("relinquished", function(_, cx)
      ptx.if_(cx.warp:eq(0), function()
        ptx.tcgen05.relinquish_alloc_permit {}
        at = line(); ptx.tcgen05.alloc { dst = cx.slot, ncols = 32 }
      end)
    end)
    assert_at(failure(k), at, "tcgen05.alloc after " .. HERE .. "%d+: tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned: a CTA "
      .. "that relinquished its allocation permit may not allocate again")
    k = tiny("too_much", function(_, cx)
      ptx.if_(cx.warp:eq(0), function()
        ptx.tcgen05.alloc { dst = cx.slot, ncols = 256 }
        at = line(); ptx.tcgen05.alloc { dst = cx.slot, ncols = 512 }
      end)
    end)
    assert_at(failure(k), at, "tcgen05.alloc of 512 columns: no 512 free columns at a multiple of 512 %(columns 0..255 by ")
  end)

  it("reports a warp accessing lanes outside its quarter of tensor memory", function()
    local lines = {}
    local k = tiny("wrong_lanes", function(O, cx)
      local taddr = alloc(cx, 32)
      local v = reg.scalar(T.b32, 1)
      lines.st = line(); ptx.tcgen05.st { taddr = taddr, src = { v }, shape = "32x32b" }   -- every warp at lane 0
      ptx.tcgen05.wait("st")
      free(cx, taddr, 32)
      ptx.inst.st.global.f32(ptx.addr(ptx.global_ptrs(O)), reg.scalar(T.f32, 0))
    end)
    assert_at(failure(k), lines.st, "warp (%d) %(warp %1 of its warpgroup%) may access tensor%-memory lanes %d+%.%.%d+ only; this "
      .. "access covers lanes 0%.%.31 %(taddr 0x0%)")
  end)

  it("reports an MMA reading tensor memory a tcgen05.st has not finished writing", function()
    local lines = {}
    local k = tiny("no_wait_st", function(_, cx)
      local bar = smem.mbarrier(1)
      ptx.if_(cx.tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
      local taddr = alloc(cx, 32)
      local v = reg.scalar(T.b32, 0)
      lines.st = line(); ptx.tcgen05.st { taddr = taddr + cx.warp * bw.tmem_offset(32, 0), src = { v }, shape = "32x32b" }
      ptx.bar_sync(0)                                   -- no tcgen05.wait::st before it
      mma(cx, taddr, bar, {}, lines)
      ptx.mbarrier.wait(bar[0], 0)
      ptx.tcgen05.wait("st")
      free(cx, taddr, 32)
    end)
    assert_at(failure(k), lines.mma, "tcgen05.mma accumulates into tensor%-memory column 0, which " .. HERE .. lines.st
      .. ": tcgen05.st.sync.aligned.32x32b.x1.b32 .- stores asynchronously with no tcgen05.wait::st by that warp since")
  end)

  it("catches a GEMM that reads its accumulators without tcgen05.wait::ld (planted in the example)", function()
    local gemm = dofile "examples/blackwell/gemm.lua"
    local tc = ptx.tcgen05
    local saved = tc.wait
    tc.wait = function(which) if which ~= "ld" then return saved(which) end end
    local ok, err = pcall(function()
      return gemm.check(256, 256, 64, { cta_group = 2 })
    end)
    tc.wait = saved
    assert.is_false(ok)
    assert.matches("gemm%.lua:%d+: st%.global%.v4%.f32 .- reads %%f%d+ before tcgen05%.wait::ld: .-gemm%.lua:%d+: tcgen05%.ld", tostring(err))
  end)

  it("catches a suite MMA whose results are read with no commit and no wait (planted in the example)", function()
    local suite = dofile "examples/blackwell/tcgen05_suite.lua"
    local tc, mb = ptx.tcgen05, ptx.mbarrier
    local commit, wait = tc.commit, mb.wait
    tc.commit, mb.wait = function() end, function() end
    local ok, err = pcall(suite.check, "mma_bf16_128B")
    tc.commit, mb.wait = commit, wait
    assert.is_false(ok)
    -- a warp reads D before the MMA lands, or (first, when the issuer is behind) the MMA overwrites what a warp read
    local msg = tostring(err)
    assert(msg:find("tcgen05_suite%.lua:%d+: tcgen05%.ld.- reads tensor%-memory column 0 while .-tcgen05_suite%.lua:%d+: "
      .. "tcgen05%.mma.- may still be writing it: no tcgen05%.commit by its issuing thread") or
      msg:find("tcgen05_suite%.lua:%d+: tcgen05%.mma.-: tcgen05%.mma writes tensor%-memory column %d+, which "
      .. ".-tcgen05_suite%.lua:%d+: tcgen05%.ld.- reads, and no thread synchronization orders the two"), msg)
  end)
end)
