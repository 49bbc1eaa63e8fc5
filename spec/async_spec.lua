-- pyptx.async: cp.async, cp.async.bulk(.tensor), mbarrier, fences and
-- cluster helpers: the PTX each wrapper appends, ptxas acceptance for
-- sm_90a, TMA tensor maps through X:tma_desc (trace-time validation,
-- launch-time packing), and the emulator's TMA copies (boxes, OOB fill,
-- every swizzle) and mbarrier deadlock report, named at the Lua line.
local bit = require "bit"
local pyptx = require "pyptx"
local toolkit = require "pyptx.toolkit"
local tensor = require "pyptx.tensor"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32, bf16 = T.f32, T.u32, T.bf16

local have_ptxas = toolkit.find("ptxas") ~= nil

--- The current source line (to name planted bugs).
local function here() return debug.getinfo(2, "l").currentline end

--- A kernel with one body, for PTX checks (no tensors unless given).
local function snippet(body, ins, outs)
  return kernel "snip" { arch = "sm_90a", in_specs = ins or {}, out_specs = outs or {}, block = { 128 }, body }
end

--- The body lines of a kernel's PTX without .loc lines or blank lines.
local function body_lines(k)
  local out = {}
  for line in k:ptx():gmatch("[^\n]+") do
    if not line:match("^%s*%.loc") and line:match("^\t") then out[#out + 1] = (line:gsub("^%s+", ""):gsub("%s+", " ")) end
  end
  return table.concat(out, "\n")
end

--- Assert ptxas assembles the kernel for sm_90a (pending without ptxas).
local function assert_ptxas(k)
  if not have_ptxas then pending(toolkit.missing_message("ptxas")) return end
  local ok, _, log = toolkit.ptxas(k:ptx(), "sm_90a", { keep_failed = false })
  assert(ok, log)
end

--- The full-API kernel (also the ptxas case).
local function everything()
  return snippet(function(A, C)
    local s = smem.alloc(bf16, 64 * 64, { align = 1024 })
    local bar = smem.mbarrier(2)
    local x, y = reg.scalar(u32, 0), reg.scalar(u32, 64)
    ptx.mbarrier.init(bar[0], 1)
    ptx.fence.mbarrier_init()
    ptx.fence.proxy_async("shared::cta")
    local d = A:tma_desc { box = { 64, 64 }, swizzle = "128B" }
    ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
    ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { x, y }, mbar = bar[0] }
    ptx.mbarrier.wait(bar[0], 0)
    ptx.mbarrier.test_wait(bar[0], x)
    ptx.mbarrier.expect_tx(bar[1], 128)
    ptx.mbarrier.complete_tx(bar[1], 128)
    ptx.fence.proxy.async()
    ptx.cp.async.bulk.tensor_2d { dst = C:tma_desc { box = { 64, 64 }, swizzle = "128B" }, src = s[0], coord = { x, y } }
    ptx.cp.async.bulk.commit_group()
    ptx.cp.async.bulk.wait_group_read(0)
    ptx.cp.async.bulk.wait_group(0)
    ptx.cp.async.bulk { dst = s[0], src = ptx.param(A), size = 256, mbar = bar[1] }
    ptx.cp.async.bulk.prefetch.tensor_2d { src = d, coord = { x, y } }
    ptx.cp.async.cg(s[0], ptx.param(A), 16)
    ptx.cp.async { dst = s[8], src = ptx.param(A), size = 8, src_size = 4 }
    ptx.cp.async.commit_group()
    ptx.cp.async.wait_group(1)
    ptx.cp.async.wait_all()
    ptx.cluster.sync()
    ptx.cluster.mapa(s:base(), ptx.cluster.ctarank())
    local st = ptx.mbarrier.arrive(bar[1])
    ptx.mbarrier.pending_count(st)
    ptx.mbarrier.arrive_drop(bar[1])
    ptx.mbarrier.inval(bar[0])
    ptx.fence.acq_rel("cluster")
    ptx.ret()
  end, { Tile(128, 128, bf16) }, { Tile(128, 128, bf16) })
end

describe("pyptx.async wrappers", function()
  it("append one instruction each, with the PTX spelling", function()
    local text = body_lines(everything())
    local want = {
      "mbarrier.init.shared::cta.b64 [snip_smem+8192], 1;",
      "fence.mbarrier_init.release.cluster;",
      "fence.proxy.async.shared::cta;",
      "mov.u64 %rd1, snip_param_0_tma;",
      "mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [snip_smem+8192], 8192;",
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [snip_smem], [%rd1, {%r1, %r2}], [snip_smem+8192];",
      "mbarrier.try_wait.parity.shared::cta.b64 %p1, [snip_smem+8192], 0;",
      "@!%p1 bra $L__mbar_wait_1;",
      "mbarrier.test_wait.parity.shared::cta.b64 %p2, [snip_smem+8192], %r1;",
      "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [snip_smem+8200], 128;",
      "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [snip_smem+8200], 128;",
      "fence.proxy.async;",
      "mov.u64 %rd3, snip_param_1_tma;",
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd3, {%r1, %r2}], [snip_smem];",
      "cp.async.bulk.commit_group;",
      "cp.async.bulk.wait_group.read 0;",
      "cp.async.bulk.wait_group 0;",
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [snip_smem], [%rd4], 256, [snip_smem+8200];",
      "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {%r1, %r2}];",
      "cp.async.cg.shared.global [snip_smem], [%rd5], 16;",
      "cp.async.ca.shared.global [snip_smem+16], [%rd6], 8, 4;",
      "cp.async.commit_group;", "cp.async.wait_group 1;", "cp.async.wait_all;",
      "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;",
      "mapa.shared::cluster.u32 %r5, %r3, %r4;",
      "mbarrier.arrive.shared::cta.b64 %rd7, [snip_smem+8200];",
      "mbarrier.pending_count.b64 %r6, %rd7;",
      "mbarrier.arrive_drop.shared::cta.b64 %rd8, [snip_smem+8200];",
      "mbarrier.inval.shared::cta.b64 [snip_smem+8192];",
      "fence.acq_rel.cluster;",
    }
    for _, line in ipairs(want) do assert.truthy(text:find(line, 1, true), line .. "\n---\n" .. text) end
  end)

  it("declare one 128-byte tensor-map param per tensor and options", function()
    local k = everything()
    local s = k:specialize()
    assert.are.equal(2, #s.tma)
    assert.truthy(k:ptx():find(".param .align 64 .b8 snip_param_0_tma[128]", 1, true))
    assert.truthy(k:ptx():find(".param .align 64 .b8 snip_param_1_tma[128]", 1, true))
  end)

  it("assemble with ptxas for sm_90a", function()
    assert_ptxas(everything())
  end)

  it("take tensor copies of every rank 1..5, loads and stores, with multicast and cache hints", function()
    local kk = kernel "ranks" { arch = "sm_90a", block = { 32 }, cluster = { 2, 1, 1 },
      in_specs = { Tile(64, f32), Tile(4, 64, f32), Tile(4, 4, 64, f32), Tile(4, 4, 4, 64, f32), Tile(2, 4, 4, 4, 64, f32) },
      function(...)
        local A = { ... }
        local s = smem.alloc(f32, 1024, { align = 1024 })
        local bar = smem.mbarrier(1)
        local c = reg.scalar(u32, 0)
        local mask = reg.scalar(T.u16, 3)
        local hint = reg.scalar(T.u64, 0)
        local boxes = { { 8 }, { 2, 8 }, { 2, 2, 8 }, { 2, 2, 2, 8 }, { 1, 2, 2, 2, 8 } }
        for r = 1, 5 do
          local coord = {}
          for i = 1, r do coord[i] = c end
          local d = A[r]:tma_desc { box = boxes[r] }
          ptx.cp.async.bulk.tensor["tensor_" .. r .. "d"] { dst = s[0], src = d, coord = coord, mbar = bar[0] }
          ptx.cp.async.bulk["tensor_" .. r .. "d"] { dst = d, src = s[0], coord = coord }
        end
        local d2 = A[2]:tma_desc { box = { 2, 8 } }
        ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d2, coord = { c, c }, mbar = bar[0], multicast = mask }
        ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d2, coord = { c, c }, mbar = bar[0], cache_hint = hint }
        ptx.ret()
      end }
    local text = kk:ptx()
    for r = 1, 5 do
      assert.truthy(text:find(("cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes"):format(r), 1, true))
      assert.truthy(text:find(("cp.async.bulk.tensor.%dd.global.shared::cta.tile.bulk_group"):format(r), 1, true))
    end
    assert.truthy(text:find("complete_tx::bytes.multicast::cluster \t?%[ranks_smem%], %[%%rd%d+, {%%r1, %%r1}%], %[ranks_smem%+4096%], %%rs1;"), text)
    assert.truthy(text:find("complete_tx::bytes.L2::cache_hint", 1, true))
    assert_ptxas(kk)
  end)

  it("reduce into global memory and arrive on a remote barrier", function()
    local k = snippet(function(A)
      local s = smem.alloc(f32, 256, { align = 128 })
      local bar = smem.mbarrier(1)
      local c = reg.scalar(u32, 0)
      ptx.cp.reduce.async.bulk.tensor_2d { dst = A:tma_desc { box = { 8, 32 } }, src = s[0], coord = { c, c } }
      ptx.cp.reduce.async.bulk.tensor_2d { dst = A:tma_desc { box = { 8, 32 } }, src = s[0], coord = { c, c }, op = "max" }
      ptx.cp.reduce.async.bulk { dst = ptx.param(A), src = s[0], size = 256, op = "add", type = f32 }
      ptx.mbarrier.arrive_remote(ptx.cluster.mapa(bar:base(), 1))
      ptx.mbarrier.arrive_remote(ptx.cluster.mapa(bar:base(), 1), 2)
      ptx.ret()
    end, { Tile(64, 64, f32) })
    local text = body_lines(k)
    for _, want in ipairs {
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd1, {%r1, %r1}], [snip_smem];",
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group [%rd2, {%r1, %r1}], [snip_smem];",
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd3], [snip_smem], 256;",
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r3];",
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5], 2;",
    } do
      assert.truthy(text:find(want, 1, true), want .. "\n---\n" .. text)
    end
    assert_ptxas(k)
  end)

  it("report bad arguments at the caller's line", function()
    local line
    local ok, err = pcall(function()
      snippet(function()
        local s = smem.alloc(f32, 16)
        line = here(); ptx.cp.async.cg(s[0], s[0], 8)
      end):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.cg copies 16 bytes", err, 1, true)
    ok, err = pcall(function()
      snippet(function(A)
        line = here(); A:tma_desc { box = { 64, 300 } }
      end, { Tile(128, 512, bf16) }):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": TMA descriptor for snip_param_0: box", err, 1, true)
    ok, err = pcall(function()
      snippet(function(A)
        local s = smem.alloc(f32, 16)
        line = here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = A:tma_desc { box = { 8, 8 } }, coord = { 0 }, mbar = s[8] }
      end, { Tile(64, 64, f32) }):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.tensor.2d: coord must list 2 coordinate", err, 1, true)
  end)
end)

-- ------------------------------------------------------------ emulator

--- The 16-byte-chunk swizzle of a byte offset in a 1024-aligned buffer.
local function swz(o, span)
  if span == 0 then return o end
  local mask = span / 16 - 1
  return bit.bxor(o, bit.lshift(bit.band(bit.rshift(o, 7), mask), 4))
end

--- A kernel that TMA-loads a BR x BC f32 box per CTA (with the swizzle),
-- dumps the raw shared bytes, and TMA-stores the box back to C.
local function roundtrip(R, C, BR, BC, swizzle)
  local GX, GY = math.ceil(C / BC), math.ceil(R / BR)
  return kernel "tma_rt" { arch = "sm_90a", in_specs = { Tile(R, C, f32) },
    out_specs = { Tile(R, C, f32), Tile(GX * GY * BR * BC, f32) }, block = { 128 }, grid = { GX, GY, 1 },
    function(A, Cout, Raw)
      local sA = smem.alloc(f32, BR * BC, { align = 1024 })
      local bar = smem.mbarrier(1)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local bx, by = reg.from(ptx.special.ctaid.x(), u32), reg.from(ptx.special.ctaid.y(), u32)
      local x, y = bx * BC, by * BR
      local leader = tid:eq(0)
      ptx.if_(leader, function() ptx.mbarrier.init(bar[0], 1); ptx.fence.mbarrier_init() end)
      ptx.bar_sync(0)
      ptx.if_(leader, function()
        local d = A:tma_desc { box = { BR, BC }, swizzle = swizzle }
        ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
        ptx.cp.async.bulk.tensor_2d { dst = sA[0], src = d, coord = { x, y }, mbar = bar[0] }
      end)
      ptx.mbarrier.wait(bar[0], 0)
      local praw = ptx.global_ptrs(Raw)
      local cta = by * GX + bx
      local base = sA:base()
      for i = 0, BR * BC / 128 - 1 do
        local e = tid + i * 128
        local v = reg.scalar(f32)
        ptx.inst.ld.shared.f32(v, ptx.addr(base + e * 4))
        ptx.inst.st.global.f32(ptx.addr(praw + (cta * (BR * BC) + e):mul_wide(4)), v)
      end
      ptx.fence.proxy_async("shared::cta")
      ptx.bar_sync(0)
      ptx.if_(leader, function()
        ptx.cp.async.bulk.tensor_2d { dst = Cout:tma_desc { box = { BR, BC }, swizzle = swizzle }, src = sA[0], coord = { x, y } }
        ptx.cp.async.bulk.commit_group()
        ptx.cp.async.bulk.wait_group(0)
      end)
      ptx.ret()
    end }
end

local SPANS = { none = 0, ["32B"] = 32, ["64B"] = 64, ["128B"] = 128 }

describe("the emulator's TMA copies", function()
  for _, case in ipairs { { "none", 32 }, { "32B", 8 }, { "64B", 16 }, { "128B", 32 } } do
    local swizzle, BC = case[1], case[2]
    it("load and store a 2-D f32 box with swizzle " .. swizzle .. ", out-of-bounds boxes zero-filled and clipped", function()
      local R, C, BR = 50, 68, 32
      local k = roundtrip(R, C, BR, BC, swizzle)
      assert_ptxas(k)
      local a = tensor.rand({ R, C }, f32)
      local c, raw = k(a)
      local av, cv, rv = a:values(), c:values(), raw:values()
      for i = 1, R * C do assert.are.equal(av[i], cv[i]) end
      local GX, GY, span = math.ceil(C / BC), math.ceil(R / BR), SPANS[swizzle]
      for cy = 0, GY - 1 do
        for cx = 0, GX - 1 do
          local cta = cy * GX + cx
          for e = 0, BR * BC - 1 do
            local le = swz(e * 4, span) / 4          -- the swizzle is its own inverse
            local r, col = cy * BR + math.floor(le / BC), cx * BC + le % BC
            local want = (r < R and col < C) and av[r * C + col + 1] or 0
            local got = rv[cta * BR * BC + e + 1]
            if got ~= want then
              error(("CTA %d smem element %d: got %s, want %s (row %d col %d)"):format(cta, e, got, want, r, col))
            end
          end
        end
      end
    end)
  end

  it("copies a 3-D box with negative (out-of-bounds) coordinates", function()
    local k = kernel "tma3" { arch = "sm_90a", in_specs = { Tile(3, 5, 8, f32) }, out_specs = { Tile(2 * 4 * 8, f32) },
      block = { 64 },
      function(A, Out)
        local s = smem.alloc(f32, 64, { align = 128 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          local d = A:tma_desc { box = { 2, 4, 8 } }
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          ptx.cp.async.bulk.tensor_3d { dst = s[0], src = d, coord = { reg.scalar(T.s32, 0), reg.scalar(T.s32, -1),
            reg.scalar(T.s32, 2) }, mbar = bar[0] }
        end)
        ptx.bar_sync(0)
        ptx.mbarrier.wait(bar[0], 0)
        local v = reg.scalar(f32)
        ptx.inst.ld.shared.f32(v, ptx.addr(s:base() + tid * 4))
        ptx.inst.st.global.f32(ptx.addr(ptx.global_ptrs(Out) + tid:mul_wide(4)), v)
        ptx.ret()
      end }
    local a = tensor.rand({ 3, 5, 8 }, f32)
    local av, out = a:values(), k(a):values()
    for z = 0, 1 do
      for y = 0, 3 do
        for x = 0, 7 do
          local gz, gy = 2 + z, y - 1
          local want = (gz < 3 and gy >= 0) and av[(gz * 5 + gy) * 8 + x + 1] or 0
          assert.are.equal(want, out[(z * 4 + y) * 8 + x + 1])
        end
      end
    end
  end)

  it("multicasts a box to every CTA of a cluster, completing on each CTA's barrier", function()
    local k = kernel "mcast" { arch = "sm_90a", in_specs = { Tile(32, 32, f32) }, out_specs = { Tile(2, 32 * 32, f32) },
      block = { 128 }, grid = { 2, 1, 1 }, cluster = { 2, 1, 1 },
      function(A, Out)
        local s = smem.alloc(f32, 1024, { align = 1024 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local rank = ptx.cluster.ctarank()
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          ptx.fence.mbarrier_init()
        end)
        ptx.cluster.sync()
        ptx.if_(tid:eq(0), function()
          local d = A:tma_desc { box = { 16, 32 } }
          ptx.mbarrier.arrive_expect_tx(bar[0], 2 * d.bytes)      -- both halves land here
          local mask = reg.scalar(T.u16, 3)
          ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(s:base() + rank * d.bytes), src = d,
            coord = { reg.scalar(u32, 0), rank * 16 }, mbar = bar[0], multicast = mask }
        end)
        ptx.mbarrier.wait(bar[0], 0)
        local po = ptx.global_ptrs(Out) + (rank * 1024):mul_wide(4)
        for i = 0, 7 do
          local e = tid + i * 128
          local v = reg.scalar(f32)
          ptx.inst.ld.shared.f32(v, ptx.addr(s:base() + e * 4))
          ptx.inst.st.global.f32(ptx.addr(po + e:mul_wide(4)), v)
        end
        ptx.cluster.sync()
        ptx.ret()
      end }
    assert_ptxas(k)
    local a = tensor.rand({ 32, 32 }, f32)
    local av, out = a:values(), k(a):values()
    for r = 0, 1 do
      for i = 1, 1024 do assert.are.equal(av[i], out[r * 1024 + i]) end
    end
  end)

  it("reports a wait on the wrong mbarrier parity as a deadlock at its Lua line", function()
    local line
    local k = kernel "parity" { arch = "sm_90a", in_specs = { Tile(32, 32, f32) }, out_specs = {}, block = { 64 },
      function(A)
        local s = smem.alloc(f32, 1024, { align = 1024 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local z = reg.scalar(u32, 0)
        ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
        ptx.bar_sync(0)
        ptx.if_(tid:eq(0), function()
          local d = A:tma_desc { box = { 32, 32 } }
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { z, z }, mbar = bar[0] }
        end)
        ptx.mbarrier.wait(bar[0], 0)
        line = here(); ptx.mbarrier.wait(bar[0], 1)     -- planted: phase 1 never gets its arrival
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 32, 32 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": mbarrier.try_wait.parity", err, 1, true)
    assert.matches("deadlock: this wait for the mbarrier phase with parity 1 can never complete", err, 1, true)
  end)

  --- Threads fill a 32x32 f32 tile with st.shared (value = 1000 + index),
  -- then thread 0 TMA-stores it; fence: whether they fence.proxy.async first.
  local function store_kernel(fence, lines)
    return kernel "st_tma" { arch = "sm_90a", in_specs = {}, out_specs = { Tile(32, 32, f32) }, block = { 128 },
      function(C)
        local s = smem.alloc(f32, 1024, { align = 128 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local base = s:base()
        for i = 0, 7 do
          local e = tid + i * 128
          lines.st = here(); ptx.inst.st.shared.f32(ptx.addr(base + e * 4), reg.from(e, f32) + 1000)
        end
        if fence then ptx.fence.proxy_async("shared::cta") end
        ptx.bar_sync(0)
        local z = reg.scalar(u32, 0)
        ptx.if_(tid:eq(0), function()
          lines.tma = here(); ptx.cp.async.bulk.tensor_2d { dst = C:tma_desc { box = { 32, 32 } }, src = s[0], coord = { z, z } }
          ptx.cp.async.bulk.commit_group()
          ptx.cp.async.bulk.wait_group(0)
        end)
        ptx.ret()
      end }
  end

  it("stores shared memory written by st.shared after fence.proxy.async", function()
    local out = store_kernel(true, {})():values()
    for i = 1, 1024 do assert.are.equal(999 + i, out[i]) end
  end)

  it("reports a TMA store of st.shared data without fence.proxy.async, naming both lines", function()
    local lines = {}
    local ok, err = pcall(store_kernel(false, lines))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. lines.tma .. ": cp.async.bulk.tensor.2d.global.shared::cta", err, 1, true)
    assert.matches("this TMA store reads shared memory at 0x0 through the async proxy, but spec/async_spec.lua:"
      .. lines.st .. ": st.shared.f32", err, 1, true)
    assert.matches("no fence.proxy.async in between", err, 1, true)
  end)

  it("reports expect_tx bytes no copy delivers as a deadlock", function()
    local line
    local k = kernel "short" { arch = "sm_90a", in_specs = { Tile(32, 32, f32) }, out_specs = {}, block = { 32 },
      function(A)
        local s = smem.alloc(f32, 1024, { align = 1024 })
        local bar = smem.mbarrier(1)
        local z = reg.scalar(u32, 0)
        ptx.mbarrier.init(bar[0], 32)
        local d = A:tma_desc { box = { 16, 32 } }
        ptx.mbarrier.arrive_expect_tx(bar[0], 4096)        -- 32 lanes x 4096, but each copy moves 2048
        ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { z, z }, mbar = bar[0] }
        line = here(); ptx.mbarrier.wait(bar[0], 0)
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 32, 32 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("transaction byte%(s%) pending", err)
  end)
end)
