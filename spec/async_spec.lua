-- pyptx.async: cp.async, cp.async.bulk(.tensor), mbarrier, fences and
-- cluster helpers: the PTX each wrapper appends, ptxas acceptance for
-- sm_90a, TMA tensor maps through X:tma_desc (trace-time validation,
-- launch-time packing), the emulator's TMA copies (boxes, OOB fill, every
-- swizzle, element strides, interleave, im2col; against CPU references and
-- transcribed layout words, see TRANSCRIBED), bulk prefetches, bulk and tensor reductions,
-- and the mbarrier deadlock report, named at the Lua line.
local bit = require "bit"
local pyptx = require "pyptx"
local H = require "spec.helpers"
local tensor = require "pyptx.runtime.tensor"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32, bf16 = T.f32, T.u32, T.bf16

local assert_ptxas = H.assert_ptxas       -- for sm_90a; pending without ptxas, so last in a test


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

  it("share one tensor map between X:tma_desc calls whose options are equal, in fresh tables or not", function()
    local names = {}
    snippet(function(A)
      local function name_of(d) return d.tma.name end
      names[1] = name_of(A:tma_desc { box = { 64, 64 }, swizzle = "128B" })
      names[2] = name_of(A:tma_desc { swizzle = "128B", box = { 64, 64 } })
      names[3] = name_of(A:tma_desc { box = { 64, 32 }, swizzle = "128B" })
      names[4] = name_of(A:tma_desc { box = { 64, 64 }, swizzle = "128B" })   -- not the last one named
      names[5] = name_of(A:tma_desc { box = { 64, 64 }, swizzle = "128B", l2 = "none" })
      names[6] = name_of(A:tma_desc { box = { 64, 64 } })
      ptx.ret()
    end, { Tile(128, 512, bf16) }):ptx()
    assert.same({ "snip_param_0_tma", "snip_param_0_tma", "snip_param_0_tma_1", "snip_param_0_tma",
      "snip_param_0_tma_2", "snip_param_0_tma_3" }, names)
  end)

  it("refuse an unknown X:tma_desc option wherever it comes in the table", function()
    for _, opts in ipairs {
      { boxx = { 64, 64 } },
      { box = { 64, 64 }, swizzle = "128B", oob = "zero", l2 = "none", swizle = "128B" },
      { box = { 64, 64 }, swizzle = "128B", oob = "zero", l2 = "none", interleave = "none", [1] = 5 },
    } do
      local line
      local ok, err = pcall(function()
        snippet(function(A)
          A:tma_desc { box = { 64, 64 }, swizzle = "128B", oob = "zero", l2 = "none" }
          line = H.here(); A:tma_desc(opts)
        end, { Tile(128, 512, bf16) }):ptx()
      end)
      assert.is_false(ok)
      assert.matches("async_spec.lua:" .. line .. ": X:tma_desc: unknown option ", err, 1, true)
    end
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
      ptx.mbarrier.arrive_remote(ptx.cluster.mapa(bar:base(), 1), { sem = "release", scope = "cluster" })
      ptx.mbarrier.arrive_remote(ptx.cluster.mapa(bar:base(), 1), 3, { scope = "cta" })
      ptx.ret()
    end, { Tile(64, 64, f32) })
    local text = body_lines(k)
    for _, want in ipairs {
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd1, {%r1, %r1}], [snip_smem];",
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group [%rd2, {%r1, %r1}], [snip_smem];",
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd3], [snip_smem], 256;",
      "mbarrier.arrive.shared::cluster.b64 _, [%r3];",           -- the ISA's default .release.cta, as CUTLASS
      "mbarrier.arrive.shared::cluster.b64 _, [%r5], 2;",
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r7];",
      "mbarrier.arrive.release.cta.shared::cluster.b64 _, [%r9], 3;",
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
        line = H.here(); ptx.cp.async.cg(s[0], s[0], 8)
      end):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.cg copies 16 bytes", err, 1, true)
    ok, err = pcall(function()
      snippet(function(A)
        line = H.here(); A:tma_desc { box = { 64, 300 } }
      end, { Tile(128, 512, bf16) }):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": TMA descriptor for snip_param_0: box", err, 1, true)
    ok, err = pcall(function()
      snippet(function(A)
        local s = smem.alloc(f32, 16)
        line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = A:tma_desc { box = { 8, 8 } }, coord = { 0 }, mbar = s[8] }
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
  it("take the map's generic address: a parameter's own .param address is refused as the GPU refuses it", function()
    local k = kernel "param_map" { arch = "sm_90a", in_specs = { Tile(16, 16, f32) }, out_specs = { Tile(1, f32) },
                                   grid = { 1 }, block = { 32 },
      function(A)
        local s, bar = smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1)
        ptx.if_(reg.from(ptx.special.tid.x(), u32):eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          local d = A:tma_desc { box = { 16, 16 } }
          local raw = reg.scalar(T.u64)
          ptx.inst.cvta.to.param.u64(raw, d.base)   -- back to the .param address: what a GPU faults on
          local bad = setmetatable({ base = raw, offset = 0, tma = d.tma, bytes = d.bytes }, getmetatable(d))
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          ptx.cp.async.bulk.tensor_2d { dst = s[0], src = bad, coord = { 0, 0 }, mbar = bar[0] }
        end)
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 16, 16 }, f32))
    assert.is_false(ok)
    assert.matches("is a .param address, not a generic one", tostring(err), 1, true)
    assert.matches("cvta.param", tostring(err), 1, true)
    assert.matches("spec/async_spec.lua:%d+: cp.async.bulk.tensor", tostring(err))
  end)

  for _, case in ipairs { { "none", 32 }, { "32B", 8 }, { "64B", 16 }, { "128B", 32 } } do
    local swizzle, BC = case[1], case[2]
    it("load and store a 2-D f32 box with swizzle " .. swizzle .. ", out-of-bounds boxes zero-filled and clipped", function()
      local R, C, BR = 50, 68, 32
      local k = roundtrip(R, C, BR, BC, swizzle)
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
      assert_ptxas(k)
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
    local a = tensor.rand({ 32, 32 }, f32)
    local av, out = a:values(), k(a):values()
    for r = 0, 1 do
      for i = 1, 1024 do assert.are.equal(av[i], out[r * 1024 + i]) end
    end
    assert_ptxas(k)
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
        line = H.here(); ptx.mbarrier.wait(bar[0], 1)     -- planted: phase 1 never gets its arrival
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 32, 32 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": mbarrier.try_wait.parity", err, 1, true)
    assert.matches("deadlock: this wait for the mbarrier phase with parity 1 can never complete", err, 1, true)
  end)

  --- Threads fill a 32x32 f32 tile with st.shared (value = 1000 + index),
  -- then thread 0 TMA-stores it; fence: whether they fence.proxy.async first
  -- (true: every thread before the barrier; "after": thread 0 after it, before
  -- its store; "warp0": warp 0 alone before the barrier).
  local function store_kernel(fence, lines)
    return kernel "st_tma" { arch = "sm_90a", in_specs = {}, out_specs = { Tile(32, 32, f32) }, block = { 128 },
      function(C)
        local s = smem.alloc(f32, 1024, { align = 128 })
        local tid = reg.from(ptx.special.tid.x(), u32)
        local base = s:base()
        for i = 0, 7 do
          local e = tid + i * 128
          lines.st = H.here(); ptx.inst.st.shared.f32(ptx.addr(base + e * 4), reg.from(e, f32) + 1000)
        end
        if fence == true then ptx.fence.proxy_async("shared::cta") end
        if fence == "warp0" then ptx.if_(tid:lt(32), function() ptx.fence.proxy_async("shared::cta") end) end
        ptx.bar_sync(0)
        local z = reg.scalar(u32, 0)
        ptx.if_(tid:eq(0), function()
          if fence == "after" then ptx.fence.proxy_async("shared::cta") end
          lines.tma = H.here(); ptx.cp.async.bulk.tensor_2d { dst = C:tma_desc { box = { 32, 32 } }, src = s[0], coord = { z, z } }
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
    assert.matches("no fence.proxy.async in between (put ptx.fence.proxy_async() after the stores, or after the barrier", err, 1, true)
  end)

  it("takes the fence on the causality path: the storing thread's, after the barrier (issue 26 item 1)", function()
    local out = store_kernel("after", {})():values()
    for i = 1, 1024 do assert.are.equal(999 + i, out[i]) end
  end)

  it("reports a fence before the barrier by a warp that did not write the bytes", function()
    local lines = {}
    local ok, err = pcall(store_kernel("warp0", lines))
    assert.is_false(ok)
    assert.matches("this TMA store reads shared memory at 0x80 through the async proxy", err, 1, true)
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
        line = H.here(); ptx.mbarrier.wait(bar[0], 0)
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 32, 32 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("transaction byte%(s%) pending", err)
  end)
end)

-- ------------------------------------------- TMA layouts: strides, interleave, im2col

--- The TMA swizzle of a shared byte address: X(span, atom bytes, flip), as
-- the ISA tabulates (atom index inside each 128-byte line XOR the line,
-- odd lines of the flip mode also swap 8-byte halves).
local SWZ = { none = { 0 }, ["32B"] = { 32, 16 }, ["64B"] = { 64, 16 }, ["128B"] = { 128, 16 },
  ["128B_atom_32B"] = { 128, 32 }, ["128B_atom_32B_flip_8B"] = { 128, 32, true }, ["128B_atom_64B"] = { 128, 64 } }
local function swz_addr(a, mode)
  local s = SWZ[mode or "none"]
  if s[1] == 0 then return a end
  local line = bit.rshift(a, 7)
  local r = bit.bxor(a, bit.lshift(bit.band(line, s[1] / s[2] - 1), ({ [16] = 4, [32] = 5, [64] = 6 })[s[2]]))
  if s[3] then r = bit.bxor(r, bit.lshift(bit.band(line, 1), 3)) end
  return r
end

--- Index (1-based) of tensor coordinates g (innermost first) in a row-major
-- Lua array of a tensor with dims (innermost first), or nil outside it.
local function at(dims, g)
  local lin, mul = 0, 1
  for d = 1, #dims do
    if g[d] < 0 or g[d] >= dims[d] then return nil end
    lin = lin + g[d] * mul
    mul = mul * dims[d]
  end
  return lin + 1
end

--- The positions one TMA request touches, in shared order: a list of {row,
-- j, g} (g: tensor coordinates, innermost first). r: dims, coord (innermost
-- first); tile: box, es (innermost first; es[1] counts only with
-- interleave); im2col: lower, upper (W first), channels, pixels, offsets.
local function request_elems(r)
  local rank, out = #r.dims, {}
  local n0, rows, s0 = r.channels, r.pixels, 1
  local n = {}
  if not r.im2col then
    for d = 1, rank do
      local es = (d == 1 and not r.interleave) and 1 or (r.es and r.es[d] or 1)
      n[d] = math.ceil(r.box[d] / es)
    end
    n0, s0, rows = n[1], (r.interleave and r.es and r.es[1] or 1), 1
    for d = 2, rank do rows = rows * n[d] end
  end
  local k = {}
  for d = 2, rank do k[d] = r.im2col and r.coord[d] or 0 end
  for row = 0, rows - 1 do
    local g = {}
    for d = 2, rank do
      if r.im2col then g[d] = k[d] + (d < rank and r.offsets[d - 1] or 0)
      else g[d] = r.coord[d] + k[d] * ((r.es and r.es[d]) or 1) end
    end
    for j = 0, n0 - 1 do
      local gg = { r.coord[1] + j * s0 }
      for d = 2, rank do gg[d] = g[d] end
      out[#out + 1] = { row, j, gg }
    end
    for d = 2, rank do      -- the next row: odometer, or the filter base walking the pixel box
      if not r.im2col then
        k[d] = k[d] + 1
        if k[d] < n[d] then break end
        k[d] = 0
      elseif d == rank then k[d] = k[d] + 1 break
      else
        k[d] = k[d] + ((r.es and r.es[d]) or 1)
        if k[d] < r.dims[d] + r.upper[d - 1] then break end
        k[d] = r.lower[d - 1]
      end
    end
  end
  return out, n0
end

--- CPU reference of a TMA load of 4-byte elements into nw words prefilled
-- with sent, the box at byte offset off of a 1024-aligned buffer: a
-- swizzled row takes the whole span (as TRANSCRIBED's words have it), an
-- unswizzled one its own bytes; outside the tensor: oob.
local function ref_load(vals, r, nw, sent, oob, off)
  local words = {}
  for i = 1, nw do words[i] = sent end
  local elems, n0 = request_elems(r)
  local span = SWZ[r.swizzle or "none"][1]
  local pitch = (span > 0 and not r.interleave) and span or n0 * 4
  for _, e in ipairs(elems) do
    local a = swz_addr((off or 0) + e[1] * pitch + e[2] * 4, r.swizzle)
    local i = at(r.dims, e[3])
    words[a / 4 + 1] = i and vals[i] or oob
  end
  return words
end

local SENT = 0xcdcdcdcd

--- A kernel that fills nw words of 1024-aligned shared memory with SENT,
-- has thread 0 issue one TMA load with issue(A, dst, bar) (dst: the buffer
-- at byte offset off), and dumps the nw words as u32.
local function dump_kernel(in_tile, nw, off, issue)
  return kernel "tma_dump" { arch = "sm_90a", in_specs = { in_tile }, out_specs = { Tile(nw, u32) }, block = { 128 },
    function(A, Out)
      local s = smem.alloc(u32, nw, { align = 1024 })
      local bar = smem.mbarrier(1)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local base, po = s:base(), ptx.global_ptrs(Out)
      for i = 0, nw / 128 - 1 do ptx.inst.st.shared.b32(ptx.addr(base + (tid + i * 128) * 4), reg.scalar(T.b32, SENT)) end
      ptx.fence.proxy_async("shared::cta")
      ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 1) end)
      ptx.bar_sync(0)
      ptx.if_(tid:eq(0), function() issue(A, s[off / 4], bar) end)
      ptx.mbarrier.wait(bar[0], 0)
      for i = 0, nw / 128 - 1 do
        local e, v = tid + i * 128, reg.scalar(T.b32)
        ptx.inst.ld.shared.b32(v, ptx.addr(base + e * 4))
        ptx.inst.st.global.b32(ptx.addr(po + e:mul_wide(4)), v)
      end
      ptx.ret()
    end }
end

--- s32 registers holding the numbers of a list.
local function s32s(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = reg.scalar(T.s32, v) end
  return out
end

--- A Tile of a shape (a list) and dtype.
local function tile_of(shape, dtype)
  local args = { unpack(shape) }
  args[#args + 1] = dtype
  return Tile(unpack(args))
end

--- Reverse a list (shapes are outermost first, TMA arrays innermost first).
local function rev(list)
  local out = {}
  for i = #list, 1, -1 do out[#out + 1] = list[i] end
  return out
end

--- The u32 bit patterns of a 4-byte tensor's elements (1-based).
local function f32_bits(t)
  local out, buf = {}, t:to_host()
  local u = require("ffi").cast("uint32_t *", buf)
  for i = 1, t.numel do out[i] = u[i - 1] end
  return out
end

--- Compare dumped words with the reference, naming the first difference.
local function same_words(got, want, what)
  for i = 1, #want do
    if got[i] ~= want[i] then
      error(("%s: shared word %d (byte 0x%x): got 0x%08x, want 0x%08x"):format(what, i - 1, 4 * (i - 1), got[i], want[i]), 2)
    end
  end
end

--- Load one tiled box with the given options at coordinates coord
-- (innermost first) on the emulator and compare all nw shared words with
-- the reference; returns the map's byte count.
local function check_tile(shape, opts, coord, nw, what)
  local bytes
  local k = dump_kernel(tile_of(shape, f32), nw, 0, function(A, dst, bar)
    local d = A:tma_desc(opts)
    bytes = d.bytes
    ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
    ptx.cp.async.bulk.tensor["tensor_" .. #shape .. "d"] { dst = dst, src = d, coord = s32s(coord), mbar = bar[0] }
  end)
  local a = tensor.rand(shape, f32, { lo = 1, hi = 2 })
  local got = k(a):values()
  local r = { dims = rev(shape), box = rev(opts.box), es = opts.elem_strides and rev(opts.elem_strides), coord = coord,
    swizzle = opts.swizzle, interleave = opts.interleave }
  same_words(got, ref_load(f32_bits(a), r, nw, SENT, 0), what)
  return bytes
end

--- Load one im2col request (opts: the tma_desc options; coord innermost
-- first: C, W, H, D, N; offsets W first) into nw words at byte offset off
-- and compare every word with the reference.
local function check_im2col(shape, opts, coord, offsets, nw, off, what)
  opts.mode = "im2col"
  local k = dump_kernel(tile_of(shape, f32), nw, off, function(A, dst, bar)
    local d = A:tma_desc(opts)
    ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
    local offs = {}
    for i, o in ipairs(offsets) do offs[i] = i % 2 == 1 and reg.scalar(T.u16, o) or o end   -- registers and immediates
    ptx.cp.async.bulk.tensor["tensor_" .. #shape .. "d"] { dst = dst, src = d, coord = s32s(coord), mbar = bar[0], offsets = offs }
  end)
  local a = tensor.rand(shape, f32, { lo = 1, hi = 2 })
  local got = k(a):values()
  local zeros = {}
  for i = 1, #shape - 2 do zeros[i] = 0 end
  local r = { im2col = true, dims = rev(shape), coord = coord, offsets = offsets, channels = opts.channels_per_pixel,
    pixels = opts.pixels_per_column, lower = rev(opts.lower_corner or zeros), upper = rev(opts.upper_corner or zeros),
    es = opts.elem_strides and rev(opts.elem_strides), swizzle = opts.swizzle }
  same_words(got, ref_load(f32_bits(a), r, nw, SENT, 0, off), what)
end

describe("the emulator's TMA layouts", function()
  it("strides a tiled box: ceil(box / stride) elements per dimension, every element against the reference", function()
    -- innermost stride 2 is ignored without interleave (the driver's rule); outer strides 2 and 3
    local bytes = check_tile({ 7, 9, 32 }, { box = { 5, 7, 8 }, elem_strides = { 2, 3, 2 } }, { 4, 1, 0 }, 512, "strided 3-D")
    assert.are.equal(3 * 3 * 8 * 4, bytes)
    for _, c in ipairs { { -4, -2, -1 }, { 28, 7, 5 }, { 0, 8, 6 } } do     -- partly outside: zero fill
      check_tile({ 7, 9, 32 }, { box = { 5, 7, 8 }, elem_strides = { 2, 3, 1 } }, c, 512, "strided 3-D OOB")
    end
    check_tile({ 5, 3, 4, 6, 8 }, { box = { 3, 2, 3, 4, 8 }, elem_strides = { 2, 1, 2, 3, 1 } }, { 0, 1, 0, 2, 1 }, 1024, "5-D")
  end)

  it("pads swizzled rows to the swizzle span, and applies the 128B atom swizzles", function()
    check_tile({ 16, 32 }, { box = { 5, 8 }, elem_strides = { 2, 1 }, swizzle = "128B" }, { 0, 1 }, 1024, "128B, 32-byte rows")
    check_tile({ 16, 32 }, { box = { 8, 8 }, swizzle = "64B" }, { 3, 2 }, 1024, "64B, 32-byte rows")
    for _, m in ipairs { "128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B" } do
      check_tile({ 16, 32 }, { box = { 8, 32 }, swizzle = m }, { 0, 2 }, 1024, m)
    end
  end)

  it("lays interleaved boxes out in whole 16B / 32B slices, dimension-0 stride included", function()
    check_tile({ 6, 10, 4 }, { box = { 3, 8, 4 }, interleave = "16B", elem_strides = { 1, 2, 1 } }, { 0, 1, 2 }, 512, "16B")
    check_tile({ 6, 10, 8 }, { box = { 3, 8, 8 }, interleave = "16B", elem_strides = { 2, 1, 2 } }, { 0, -1, 1 }, 512,
      "16B, dim-0 stride 2")
    check_tile({ 4, 5, 16 }, { box = { 4, 4, 8 }, interleave = "32B", swizzle = "32B" }, { 8, 1, 0 }, 512, "32B")
  end)

  it("walks im2col pixel boxes: filter base + offsets, traversal strides, wrap to the next image, OOB fill", function()
    -- NHWC 2x5x6x8, 3x3 filter with padding 1: the base walks [-1, 5) x [-1, 4), H with stride 2
    check_im2col({ 2, 5, 6, 8 }, { channels_per_pixel = 8, pixels_per_column = 40, lower_corner = { -1, -1 },
      upper_corner = { -1, -1 }, elem_strides = { 1, 2, 1, 1 } }, { 0, -1, -1, 0 }, { 1, 2 }, 2048, 0, "4-D, 40 pixels")
    -- channels starting at 4 of 8: half of each pixel outside the tensor
    check_im2col({ 2, 5, 6, 8 }, { channels_per_pixel = 8, pixels_per_column = 12 }, { 4, 3, 1, 1 }, { 0, 1 }, 512, 0,
      "4-D, channels past C")
    -- NWC with a 128B swizzle: 64-byte pixels padded to the span; W stride 3 in [-2, 8)
    check_im2col({ 3, 7, 16 }, { channels_per_pixel = 16, pixels_per_column = 20, lower_corner = { -2 }, upper_corner = { 1 },
      elem_strides = { 1, 3, 1 }, swizzle = "128B" }, { 0, 1, 0 }, { 4 }, 1024, 0, "3-D swizzled")
    -- NDHWC, the box in a buffer at a 128-byte (not 1024) offset
    check_im2col({ 2, 3, 4, 5, 4 }, { channels_per_pixel = 4, pixels_per_column = 64, lower_corner = { -1, 0, -1 },
      upper_corner = { 0, -1, -1 } }, { 0, -1, 0, 1, 0 }, { 1, 1, 0 }, 512, 128, "5-D")
  end)

  -- Shared-memory words after TMA loads of a u32 tensor holding i + 1 at
  -- element i: {byte, value}. They were transcribed when this spec was
  -- written (8d2c003) as measured on an RTX 5080 (sm_120a, the TMA modes it
  -- shares with sm_90) for an RTL verification suite, but no recording of
  -- that run, nor the command that made it, is in the tree: they are not a
  -- hardware record, and docs/emulator-coverage.md does not count these
  -- tests as checked against an oracle. They pin the emulator's layouts as
  -- regression values until a recording (as spec/fixtures/
  -- diff_scalar_h100.delta is one, with spec/fixtures/cuda/hw_delta.lua)
  -- replaces them.
  local TRANSCRIBED = {
    { "32B swizzle at +128", { 8, 32 }, { box = { 8, 8 }, swizzle = "32B" }, { 0, 0 }, 128,
      { { 128, 5 }, { 144, 1 }, { 160, 37 }, { 176, 33 }, { 256, 129 }, { 272, 133 } } },
    { "element stride 2, 128B swizzle", { 8, 32 }, { box = { 5, 8 }, elem_strides = { 2, 1 }, swizzle = "128B" }, { 0, 0 }, 0,
      { { 0, 1 }, { 28, 8 }, { 32, SENT }, { 128, 69 }, { 144, 65 }, { 288, 129 }, { 304, 133 } } },   -- SENT: padding left alone
    { "128B_atom_32B", { 8, 32 }, { box = { 8, 32 }, swizzle = "128B_atom_32B" }, { 0, 0 }, 0,
      { { 128, 41 }, { 160, 33 }, { 256, 81 }, { 320, 65 }, { 384, 121 }, { 480, 97 } } },
    { "128B_atom_32B_flip_8B", { 8, 32 }, { box = { 8, 32 }, swizzle = "128B_atom_32B_flip_8B" }, { 0, 0 }, 0,
      { { 128, 43 }, { 132, 44 }, { 136, 41 }, { 160, 35 }, { 256, 81 }, { 384, 123 }, { 392, 121 } } },
    { "im2col 3-D", { 8, 5, 16 }, { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 13, lower_corner = { -1 },
      upper_corner = { -1 }, elem_strides = { 1, 2, 1 }, swizzle = "128B" }, { 0, 1, 0 }, 128,
      { { 128, 37 }, { 144, 33 }, { 160, SENT }, { 288, 65 }, { 416, 85 }, { 432, 81 }, { 1728, 357 }, { 1744, 353 } }, { 1 } },
    { "im2col 4-D", { 8, 8, 5, 16 }, { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 13,
      lower_corner = { 0, -1 }, upper_corner = { 0, -1 }, elem_strides = { 1, 1, 2, 1 }, swizzle = "128B" }, { 0, 1, 0, 0 }, 128,
      { { 128, 117 }, { 144, 113 }, { 288, 145 }, { 416, 165 }, { 432, 161 }, { 1728, 437 } }, { 1, 1 } },
    { "im2col 5-D", { 8, 8, 8, 5, 16 }, { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 13,
      lower_corner = { 0, 0, -1 }, upper_corner = { 0, 0, -1 }, elem_strides = { 1, 1, 1, 2, 1 }, swizzle = "128B" },
      { 0, 1, 0, 0, 0 }, 128, { { 128, 757 }, { 144, 753 }, { 288, 785 }, { 416, 805 }, { 1744, 1073 } }, { 1, 1, 1 } },
  }
  for _, case in ipairs(TRANSCRIBED) do
    local what, shape, opts, coord, off, words, offsets = unpack(case)
    it("reproduces the transcribed (unrecorded) layout words: " .. what, function()
      local k = dump_kernel(tile_of(shape, u32), 512, off, function(A, dst, bar)
        local d = A:tma_desc(opts)
        ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
        ptx.cp.async.bulk.tensor["tensor_" .. #shape .. "d"] { dst = dst, src = d, coord = s32s(coord), mbar = bar[0],
          offsets = offsets }
      end)
      local n, vals = 1, {}
      for _, d in ipairs(shape) do n = n * d end
      for i = 1, n do vals[i] = i end
      local got = k(tensor.from_table(vals, u32, shape)):values()
      for _, wv in ipairs(words) do
        assert.are.equal(wv[2], got[wv[1] / 4 + 1], ("byte %d"):format(wv[1]))
      end
    end)
  end

  --- Load a box from A and store it back into a fresh C through maps with
  -- the same options; C keeps its 0xffffffff poison where the box did not reach.
  local function roundtrip_store(shape, opts, coord, offsets)
    local rank = #shape
    local k = kernel "tma_back" { arch = "sm_90a", in_specs = { tile_of(shape, f32) }, out_specs = { tile_of(shape, f32) },
      block = { 32 },
      function(A, Cout)
        local s = smem.alloc(f32, 2048, { align = 1024 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          local d = A:tma_desc(opts)
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          ptx.cp.async.bulk.tensor["tensor_" .. rank .. "d"] { dst = s[0], src = d, coord = s32s(coord), mbar = bar[0],
            offsets = offsets }
          ptx.mbarrier.wait(bar[0], 0)
          ptx.cp.async.bulk.tensor["tensor_" .. rank .. "d"] { dst = Cout:tma_desc(opts), src = s[0], coord = s32s(coord) }
          ptx.cp.async.bulk.commit_group()
          ptx.cp.async.bulk.wait_group(0)
        end)
        ptx.ret()
      end }
    local a = tensor.rand(shape, f32, { lo = 1, hi = 2 })
    local c = k(a)
    local zeros = {}
    for i = 1, rank - 2 do zeros[i] = 0 end
    local r = { dims = rev(shape), coord = coord, swizzle = opts.swizzle, interleave = opts.interleave,
      es = opts.elem_strides and rev(opts.elem_strides) }
    if opts.mode == "im2col" then
      r.im2col, r.channels, r.pixels, r.offsets = true, opts.channels_per_pixel, opts.pixels_per_column, zeros
      r.lower, r.upper = rev(opts.lower_corner or zeros), rev(opts.upper_corner or zeros)
    else
      r.box = rev(opts.box)
    end
    local av, want = f32_bits(a), {}
    for i = 1, #av do want[i] = tensor.POISON.f32[2] end   -- never stored: the poison
    for _, e in ipairs((request_elems(r))) do
      local i = at(r.dims, e[3])
      if i then want[i] = av[i] end
    end
    same_words(f32_bits(c), want, "stored tensor")
  end

  it("stores strided tiled boxes and im2col boxes (.im2col_no_offs) back, only inside the tensor", function()
    roundtrip_store({ 9, 7, 32 }, { box = { 5, 4, 8 }, elem_strides = { 2, 3, 1 } }, { 24, -2, 1 })
    roundtrip_store({ 2, 5, 6, 8 }, { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 50, lower_corner = { -1, -1 },
      upper_corner = { 0, -2 }, elem_strides = { 1, 1, 2, 1 } }, { 0, 1, -1, 0 }, { 0, 0 })
  end)

  --- The error a tma_dump kernel fails with when issue is its copy.
  local function dump_error(shape, issue, dtype)
    local ok, err = pcall(dump_kernel(tile_of(shape, dtype or f32), 512, 0, issue), tensor.rand(shape, dtype or f32, { lo = 1, hi = 2 }))
    assert.is_false(ok)
    return err
  end

  it("reports an im2col filter base outside the pixel box, and offsets out of range, at the copy's line", function()
    local line
    local err = dump_error({ 2, 5, 6, 8 }, function(A, dst, bar)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4, lower_corner = { -1, -1 } }
      line = H.here(); ptx.cp.async.bulk.tensor_4d { dst = dst, src = d, coord = s32s { 0, -2, 0, 0 }, mbar = bar[0], offsets = { 0, 0 } }
    end)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.tensor.4d", err, 1, true)
    assert.matches("im2col filter base W = -2 lies outside the pixel box [-1, 6) of that dimension", err, 1, true)
    err = dump_error({ 2, 5, 6, 8 }, function(A, dst, bar)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4 }
      line = H.here(); ptx.cp.async.bulk.tensor_4d { dst = dst, src = d, coord = s32s { 0, 0, 0, 0 }, mbar = bar[0],
        offsets = { reg.scalar(T.u16, 256), 0 } }
    end)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("im2col offset 0 = 256 is outside 0..255 for a 4D tensor", err, 1, true)
  end)

  it("reports a tile-mode copy of an im2col map, and layouts the ISA leaves open, instead of guessing", function()
    local line
    local err = dump_error({ 2, 5, 6, 8 }, function(A, dst, bar)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4 }
      local z = reg.scalar(T.s32, 0)
      line = H.here(); ptx.inst.cp.async.bulk.tensor._4d.shared_cluster.global.tile["mbarrier::complete_tx::bytes"](dst,
        setmetatable({ base = d.base, list = { z, z, z, z } }, require("pyptx.async").Bracket), bar[0])
    end)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("a tile-mode TMA instruction with a tensor map built for im2col", err, 1, true)
    err = dump_error({ 4, 8, 8 }, function(A, dst, bar)
      local d = A:tma_desc { box = { 2, 4, 2 }, interleave = "16B" }          -- 8-byte rows: half a 16-byte slice
      line = H.here(); ptx.cp.async.bulk.tensor_3d { dst = dst, src = d, coord = s32s { 0, 0, 0 }, mbar = bar[0] }
    end)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("an interleaved box row of 8 bytes is not a whole number of 16-byte slices", err, 1, true)
  end)

  it("checks im2col copies in the DSL: offsets present, 16-bit, and the map's mode", function()
    local function trace_err(body)
      local ok, err = pcall(function() snippet(body, { Tile(2, 5, 6, 8, f32) }):ptx() end)
      assert.is_false(ok)
      return err
    end
    local line
    local err = trace_err(function(A)
      local s, bar = smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4 }
      line = H.here(); ptx.cp.async.bulk.tensor_4d { dst = s[0], src = d, coord = s32s { 0, 0, 0, 0 }, mbar = bar[0] }
    end)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.tensor.4d: im2col needs offsets = {...} with 2 value(s)", err, 1, true)
    err = trace_err(function(A)
      local s, bar = smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4 }
      line = H.here(); ptx.cp.async.bulk.tensor_4d { dst = s[0], src = d, coord = s32s { 0, 0, 0, 0 }, mbar = bar[0],
        offsets = { reg.scalar(u32, 1), 0 } }
    end)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.tensor.4d: im2col offset 1 must be a 16-bit register", err, 1, true)
    err = trace_err(function(A)
      local s, bar = smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1)
      local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 4 }
      line = H.here(); ptx.cp.async.bulk.tensor_4d { dst = s[0], src = d, coord = s32s { 0, 0, 0, 0 }, mbar = bar[0], mode = "tile" }
    end)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.tensor.4d: the tensor map was built for im2col mode", err, 1, true)
    err = trace_err(function(A)
      line = H.here(); A:tma_desc { mode = "im2col", box = { 1, 1, 4, 8 } }
    end)
    assert.matches("async_spec.lua:" .. line .. ": X:tma_desc: an im2col map has no box", err, 1, true)
    err = trace_err(function(A)
      line = H.here(); A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 2000 }
    end)
    assert.matches("async_spec.lua:" .. line .. ": TMA descriptor for snip_param_0: pixels_per_column = 2000 must be in 1..1024",
      err, 1, true)
    err = trace_err(function(A)
      line = H.here(); A:tma_desc { boxx = { 1, 1, 4, 8 } }
    end)
    assert.matches("async_spec.lua:" .. line .. ": X:tma_desc: unknown option boxx", err, 1, true)
  end)

  it("prefetches tensors (tile and im2col) as a hint: a box outside the tensor is no error, a bad map is", function()
    local k = kernel "pf" { arch = "sm_90a", in_specs = { Tile(2, 5, 6, 8, f32), Tile(64, 64, f32) }, out_specs = {}, block = { 32 },
      function(A, B2)
        local tid = reg.from(ptx.special.tid.x(), u32)
        ptx.if_(tid:eq(0), function()
          local d = A:tma_desc { mode = "im2col", channels_per_pixel = 8, pixels_per_column = 64, lower_corner = { -1, -1 } }
          ptx.cp.async.bulk.prefetch.tensor_4d { src = d, coord = s32s { 4, 3, -1, 7 }, offsets = { 5, 2 } }
          ptx.cp.async.bulk.prefetch.tensor_2d { src = B2:tma_desc { box = { 16, 16 } }, coord = s32s { 1000, -50 } }
          ptx.cp.async.bulk.prefetch { src = ptx.global_ptrs(B2), size = 256 }
        end)
        ptx.ret()
      end }
    k(tensor.rand({ 2, 5, 6, 8 }, f32), tensor.rand({ 64, 64 }, f32))
    local line
    local bad = kernel "pf_bad" { arch = "sm_90a", in_specs = { Tile(64, 64, f32) }, out_specs = {}, block = { 32 },
      function(B2)
        local p = ptx.global_ptrs(B2)
        line = H.here(); ptx.cp.async.bulk.prefetch { src = ptx.addr(p, 8), size = 256 }
        ptx.ret()
      end }
    local ok, err = pcall(bad, tensor.rand({ 64, 64 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": cp.async.bulk.prefetch.L2.global", err, 1, true)
    assert.matches("the size must be a multiple of 16 and the address 16-byte aligned", err, 1, true)
    assert_ptxas(k)
  end)
end)


-- ------------------------------------------------------------ bulk reductions

local ffi = require "ffi"

--- A fresh random non-zero value of a reduction type (as a Lua number, or
-- a uint64_t cdata for the 64-bit bit types).
local function red_value(tname, rnd)
  if tname == "b64" then return ffi.new("uint64_t", rnd(1, 0x7fffffff)) * 0x100000000ULL + rnd(1, 0x7fffffff) end
  if tname == "b32" or tname == "u32" then return rnd(1, 0x7fffffff) * 2 + rnd(0, 1) end
  if tname == "s32" or tname == "s64" then return rnd(1, 1000000) * (rnd(0, 1) == 0 and -1 or 1) end
  if tname == "u64" then return rnd(1, 2 ^ 40) end
  return (rnd(1, 1000000) / 1000000 + 0.5) * (rnd(0, 1) == 0 and -1 or 1)   -- floats: magnitudes in (0.5, 1.5]
end

local F32_TINY = 2 ^ -126

--- An f32 with a subnormal flushed to zero of its sign.
local function flush32(x)
  if x ~= 0 and math.abs(x) < F32_TINY then return x < 0 and -0.0 or 0.0 end
  return x
end

--- The value rounded to the reduction type (floats: nearest even).
local function round_to(tname, x)
  if tname == "f32" then return tonumber(ffi.new("float", x)) end
  if tname == "f16" then return tensor.decode(T.f16, tensor.encode(T.f16, x)) end
  if tname == "bf16" then return tensor.decode(bf16, tensor.encode(bf16, x)) end
  return x
end

local BITOPS = { ["and"] = bit.band, ["or"] = bit.bor, xor = bit.bxor }

--- CPU reference of one element of cp.reduce.async.bulk: old reduced with
-- src as the ISA defines (inc/dec as atom.inc/dec with src the bound;
-- .add.f32 flushes subnormal inputs and results).
local function red_ref(op, tname, old, src)
  if BITOPS[op] then
    local r = BITOPS[op](old, src)
    return tname == "b32" and r % 2 ^ 32 or r
  end
  if op == "inc" then return old >= src and 0 or old + 1 end
  if op == "dec" then return (old == 0 or old > src) and src or old - 1 end
  if op == "min" then return math.min(old, src) end
  if op == "max" then return math.max(old, src) end
  if tname == "f32" then return flush32(round_to("f32", flush32(old) + flush32(src))) end
  if tname == "u32" then return (old + src) % 2 ^ 32 end
  return round_to(tname, old + src)
end

-- Every (type, operations) the ISA allows into .global, with the tensor dtype holding it.
local RED_TYPES = {
  { "u32", T.u32, { "add", "min", "max", "inc", "dec" } }, { "s32", T.s32, { "add", "min", "max" } },
  { "u64", T.u64, { "add", "min", "max" } }, { "s64", T.s64, { "min", "max" } },
  { "f32", f32, { "add" } }, { "f64", T.f64, { "add" } }, { "f16", T.f16, { "add", "min", "max" } },
  { "bf16", bf16, { "add", "min", "max" } }, { "b32", T.u32, { "and", "or", "xor" } }, { "b64", T.u64, { "and", "or", "xor" } },
}

--- A tensor (1-D, or of shape) of the values of a reduction type.
local function red_tensor(dtype, vals, shape)
  local buf = ffi.new(tensor.storage(dtype) .. "[?]", #vals)
  for i, v in ipairs(vals) do buf[i - 1] = tensor.encode(dtype, v) end
  return tensor.from_ffi(buf, shape or { #vals }, dtype)
end

--- The value at i (0-based) of a host buffer of a reduction type.
local function red_read(tname, dtype, buf, i)
  if tname == "b64" then return buf[i] end
  return tensor.decode(dtype, buf[i])
end

describe("the emulator's bulk reductions", function()
  local seed = os.time()
  math.randomseed(seed)

  for _, case in ipairs(RED_TYPES) do
    local tname, dtype, ops = case[1], case[2], case[3]
    it(("cp.reduce.async.bulk into global memory: .%s with %s, every element against the reference"):format(tname,
      table.concat(ops, ", ")), function()
      local N, esz = 64, dtype.bytes
      local ty = T[tname]
      local k = kernel "bred" { arch = "sm_90a", in_specs = { Tile(N, dtype), Tile(#ops * N, dtype) }, out_specs = {},
        block = { 64 },
        function(S, D)
          local s = smem.alloc(ty, N, { align = 128 })
          local tid = reg.from(ptx.special.tid.x(), u32)
          local v, bty = reg.scalar(T["b" .. esz * 8]), "b" .. esz * 8
          ptx.inst.ld.global[bty](v, ptx.addr(ptx.global_ptrs(S) + tid:mul_wide(esz)))
          ptx.inst.st.shared[bty](ptx.addr(s:base() + tid * esz), v)
          ptx.fence.proxy_async("shared::cta")
          ptx.bar_sync(0)
          ptx.if_(tid:eq(0), function()
            local pd = ptx.global_ptrs(D)
            for j, op in ipairs(ops) do
              ptx.cp.reduce.async.bulk { dst = ptx.addr(pd, (j - 1) * N * esz), src = s[0], size = N * esz, op = op, type = ty }
            end
            ptx.cp.async.bulk.commit_group()
            ptx.cp.async.bulk.wait_group(0)
          end)
          ptx.ret()
        end }
      local src, dst = {}, {}
      for i = 1, N do src[i] = red_value(tname, math.random) end
      for i = 1, #ops * N do dst[i] = red_value(tname, math.random) end
      if tname == "f32" then src[1], dst[1], src[2], dst[2] = 3e-39, 4e-39, 1.5, -2e-39 end   -- subnormals flush
      if tname == "u32" then src[1], dst[1 + 3 * N], dst[1 + 4 * N] = 5, 5, 0 end             -- inc wraps, dec from 0
      for i = 1, N do src[i] = round_to(tname, src[i]) end                                   -- what memory holds
      for i = 1, #ops * N do dst[i] = round_to(tname, dst[i]) end
      local D = red_tensor(dtype, dst)
      k(red_tensor(dtype, src), D)
      local out = D:to_host()
      for j, op in ipairs(ops) do
        for i = 1, N do
          local at_i = (j - 1) * N + i
          local want = red_ref(op, tname, dst[at_i], src[i])
          local got = red_read(tname, dtype, out, at_i - 1)
          if got ~= want then
            error(("seed %d: .%s.%s element %d: %s reduced with %s gave %s, want %s"):format(seed, op, tname, i - 1,
              tostring(dst[at_i]), tostring(src[i]), tostring(got), tostring(want)))
          end
        end
      end
      assert_ptxas(k)
    end)
  end

  it("cp.reduce.async.bulk into another CTA's shared memory completes its bytes on that CTA's mbarrier", function()
    local N = 64
    local k = kernel "cred" { arch = "sm_90a", in_specs = { Tile(2, 2 * N, u32), Tile(2, 2 * N, u32) },
      out_specs = { Tile(2, 2 * N, u32) }, block = { 64 }, grid = { 2, 1, 1 }, cluster = { 2, 1, 1 },
      function(S, D, Out)
        local buf, src = smem.alloc(u32, 2 * N, { align = 128 }), smem.alloc(u32, 2 * N, { align = 128 })
        local bar = smem.mbarrier(1)
        local tid, rank = reg.from(ptx.special.tid.x(), u32), ptx.cluster.ctarank()
        local ps, pd, po = ptx.global_ptrs(S), ptx.global_ptrs(D), ptx.global_ptrs(Out)
        for j = 0, 1 do
          local e = rank * (2 * N) + j * N + tid
          local v, w = reg.scalar(u32), reg.scalar(u32)
          ptx.inst.ld.global.u32(v, ptx.addr(pd + e:mul_wide(4)))
          ptx.inst.st.shared.u32(ptx.addr(buf:base() + (tid + j * N) * 4), v)
          ptx.inst.ld.global.u32(w, ptx.addr(ps + e:mul_wide(4)))
          ptx.inst.st.shared.u32(ptx.addr(src:base() + (tid + j * N) * 4), w)
        end
        ptx.fence.proxy_async("shared::cta")
        ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 1); ptx.fence.mbarrier_init() end)
        ptx.cluster.sync()
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.arrive_expect_tx(bar[0], 2 * N * 4)            -- the peer's two reductions land here
          local peer = reg.scalar(u32, 1) - rank
          ptx.cp.reduce.async.bulk { dst = ptx.cluster.mapa(buf:base(), peer), src = src[0], size = N * 4, op = "add",
            type = u32, mbar = ptx.cluster.mapa(bar:base(), peer) }
          ptx.cp.reduce.async.bulk { dst = ptx.cluster.mapa(buf:base() + N * 4, peer), src = src[N], size = N * 4,
            op = "xor", type = T.b32, mbar = ptx.cluster.mapa(bar:base(), peer) }
        end)
        ptx.mbarrier.wait(bar[0], 0)
        for j = 0, 1 do
          local v = reg.scalar(u32)
          ptx.inst.ld.shared.u32(v, ptx.addr(buf:base() + (tid + j * N) * 4))
          ptx.inst.st.global.u32(ptx.addr(po + (rank * (2 * N) + j * N + tid):mul_wide(4)), v)
        end
        ptx.cluster.sync()
        ptx.ret()
      end }
    local sv, dv = {}, {}
    for i = 1, 4 * N do sv[i], dv[i] = red_value("u32", math.random), red_value("u32", math.random) end
    local out = k(tensor.from_table(sv, u32, { 2, 2 * N }), tensor.from_table(dv, u32, { 2, 2 * N })):values()
    for r = 0, 1 do
      for j = 0, 1 do
        for i = 1, N do
          local mine, peers = r * 2 * N + j * N + i, (1 - r) * 2 * N + j * N + i
          local want = red_ref(j == 0 and "add" or "xor", j == 0 and "u32" or "b32", dv[mine], sv[peers])
          assert.are.equal(want, out[mine], ("CTA %d, %s element %d"):format(r, j == 0 and "add" or "xor", i - 1))
        end
      end
    end
    assert_ptxas(k)
  end)

  -- The element types the tensor form reduces (from the map's dtype) and their operations.
  local TENSOR_RED = {
    { "u32", T.u32, { "add", "min", "max", "inc", "dec", "and", "or", "xor" } }, { "s32", T.s32, { "add", "min", "max", "xor" } },
    { "u64", T.u64, { "add", "min", "max", "or" } }, { "s64", T.s64, { "min", "max", "and" } }, { "f32", f32, { "add" } },
    { "f16", T.f16, { "add", "min", "max" } }, { "bf16", bf16, { "add", "min", "max" } },
  }

  --- CPU reference of a tensor reduction element (bit operations on the
  -- element's 32- or 64-bit pattern).
  local function tensor_red_ref(op, tname, old, src)
    if BITOPS[op] and (tname == "u64" or tname == "s64") then
      return tonumber(BITOPS[op](ffi.new("int64_t", old), ffi.new("int64_t", src)))
    end
    if BITOPS[op] and tname == "u32" then return BITOPS[op](old, src) % 2 ^ 32 end
    return red_ref(op, BITOPS[op] and "s32" or tname, old, src)
  end

  for _, case in ipairs(TENSOR_RED) do
    local tname, dtype, ops = case[1], case[2], case[3]
    it(("cp.reduce.async.bulk.tensor of %s maps: %s, only the box's elements inside the tensor"):format(tname,
      table.concat(ops, ", ")), function()
      local R, C, esz = 12, 24, dtype.bytes
      local k = kernel "tred" { arch = "sm_90a", in_specs = { Tile(64, dtype), Tile(#ops, R, C, dtype) }, out_specs = {},
        block = { 64 },
        function(S, D)
          local s = smem.alloc(dtype, 64, { align = 128 })
          local tid = reg.from(ptx.special.tid.x(), u32)
          local v, bty = reg.scalar(T["b" .. esz * 8]), "b" .. esz * 8
          ptx.inst.ld.global[bty](v, ptx.addr(ptx.global_ptrs(S) + tid:mul_wide(esz)))
          ptx.inst.st.shared[bty](ptx.addr(s:base() + tid * esz), v)
          ptx.fence.proxy_async("shared::cta")
          ptx.bar_sync(0)
          ptx.if_(tid:eq(0), function()
            local d = D:tma_desc { box = { 1, 8, 8 } }
            for j, op in ipairs(ops) do
              ptx.cp.reduce.async.bulk.tensor_3d { dst = d, src = s[0], coord = s32s { 20, 8, j - 1 }, op = op }
            end
            ptx.cp.async.bulk.commit_group()
            ptx.cp.async.bulk.wait_group(0)
          end)
          ptx.ret()
        end }
      local sv, dv = {}, {}
      for i = 1, 64 do sv[i] = round_to(tname, red_value(tname, math.random)) end
      for i = 1, #ops * R * C do dv[i] = round_to(tname, red_value(tname, math.random)) end
      local D = red_tensor(dtype, dv, { #ops, R, C })
      k(red_tensor(dtype, sv), D)
      local out = D:to_host()
      for j, op in ipairs(ops) do
        for i = 0, R * C - 1 do
          local r, c = math.floor(i / C), i % C
          local at_i = (j - 1) * R * C + i + 1
          local inside = r >= 8 and c >= 20                     -- the box at (8, 20) reaches past both ends
          local want = inside and tensor_red_ref(op, tname, dv[at_i], sv[(r - 8) * 8 + (c - 20) + 1]) or dv[at_i]
          local got = red_read(tname, dtype, out, at_i - 1)
          if got ~= want then
            error(("seed %d: .%s on %s at (%d, %d): got %s, want %s"):format(seed, op, tname, r, c, tostring(got), tostring(want)))
          end
        end
      end
      assert_ptxas(k)
    end)
  end

  it("reduces tensors atomically: CTAs on every host thread add into the same box", function()
    local G = 16
    local k = kernel "tsum" { arch = "sm_90a", in_specs = { Tile(G, 64, u32), Tile(16, 16, u32) }, out_specs = {}, block = { 64 },
      grid = { G, 1, 1 },
      function(S, D)
        local s = smem.alloc(u32, 64, { align = 128 })
        local tid, cta = reg.from(ptx.special.tid.x(), u32), reg.from(ptx.special.ctaid.x(), u32)
        local v = reg.scalar(u32)
        ptx.inst.ld.global.u32(v, ptx.addr(ptx.global_ptrs(S) + (cta * 64 + tid):mul_wide(4)))
        ptx.inst.st.shared.u32(ptx.addr(s:base() + tid * 4), v)
        ptx.fence.proxy_async("shared::cta")
        ptx.bar_sync(0)
        ptx.if_(tid:eq(0), function()
          ptx.cp.reduce.async.bulk.tensor_2d { dst = D:tma_desc { box = { 8, 8 } }, src = s[0], coord = s32s { 4, 4 }, op = "add" }
          ptx.cp.async.bulk.commit_group()
          ptx.cp.async.bulk.wait_group(0)
        end)
        ptx.ret()
      end }
    local sv, dv = {}, {}
    for i = 1, G * 64 do sv[i] = math.random(1, 100000) end
    for i = 1, 256 do dv[i] = math.random(1, 100000) end
    local D = tensor.from_table(dv, u32, { 16, 16 })
    k(tensor.from_table(sv, u32, { G, 64 }), D)
    local out = D:values()
    for i = 0, 255 do
      local r, c = math.floor(i / 16), i % 16
      local want = dv[i + 1]
      if r >= 4 and r < 12 and c >= 4 and c < 12 then
        for g = 0, G - 1 do want = want + sv[g * 64 + (r - 4) * 8 + (c - 4) + 1] end
      end
      assert.are.equal(want % 2 ^ 32, out[i + 1], ("(%d, %d)"):format(r, c))
    end
  end)

  it("reports a reduction the ISA does not define at its Lua line", function()
    local line
    local k = kernel "tbad" { arch = "sm_90a", in_specs = { Tile(16, 16, T.u8) }, out_specs = {}, block = { 32 },
      function(D)
        local s = smem.alloc(T.u8, 256, { align = 128 })
        line = H.here(); ptx.cp.reduce.async.bulk.tensor_2d { dst = D:tma_desc { box = { 4, 16 } }, src = s[0], coord = s32s { 0, 0 } }
        ptx.ret()
      end }
    local ok, err = pcall(k, tensor.rand({ 16, 16 }, T.u8, { lo = 1, hi = 9 }))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group", err, 1, true)
    assert.matches("does not reduce tensors of dtype 0 (1-byte elements)", err, 1, true)
    local bad = kernel "rbad" { arch = "sm_90a", in_specs = { Tile(64, u32) }, out_specs = {}, block = { 32 },
      function(D)
        local s = smem.alloc(u32, 64, { align = 128 })
        line = H.here(); ptx.cp.reduce.async.bulk { dst = ptx.addr(ptx.global_ptrs(D), 4), src = s[0], size = 64, op = "add", type = u32 }
        ptx.ret()
      end }
    ok, err = pcall(bad, tensor.rand({ 64 }, u32, { lo = 1, hi = 9 }))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("cp.reduce.async.bulk addresses must be 16-byte aligned", err, 1, true)
    local function trace_err(body)
      local ok2, err2 = pcall(function() snippet(body, { Tile(64, f32) }):ptx() end)
      assert.is_false(ok2)
      return err2
    end
    err = trace_err(function(A)
      local s = smem.alloc(f32, 64, { align = 128 })
      line = H.here(); ptx.cp.reduce.async.bulk { dst = ptx.param(A), src = s[0], size = 256, op = "min", type = f32 }
    end)
    assert.matches("async_spec.lua:" .. line .. ": cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f32: .min into .global "
      .. "takes .u32 .u64 .s32 .s64 .f16 .bf16; got .f32", err, 1, true)
    err = trace_err(function()
      local s, bar = smem.alloc(f32, 64, { align = 128 }), smem.mbarrier(1)
      line = H.here(); ptx.cp.reduce.async.bulk { dst = s[0], src = s[0], size = 256, op = "add", type = f32, mbar = bar[0] }
    end)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches(".add into .shared::cluster takes .u32 .u64 .s32; got .f32", err, 1, true)
    err = trace_err(function(A)
      local s = smem.alloc(T.f16, 64, { align = 128 })
      line = H.here(); ptx.inst.cp.reduce.async.bulk.global.shared_cta.bulk_group.add.f16(ptx.param(A), s[0], 128)
    end)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches(".add on .f16 needs .noftz (.add.noftz.f16)", err, 1, true)
  end)
end)


-- ------------------------------------------------- tensormap.replace, griddepcontrol

--- A kernel (PTX 8.3) whose thread 0 copies A's tensor map into global
-- memory (W[0..127]) and into shared memory, edits both with edit(map,
-- space) (the shared one then copied to W[128..255]), fences, and loads a
-- box through each into shared memory; dumps nw words of each box.
local function replaced_kernel(edit, nw, coord)
  return kernel "tmr" { arch = "sm_90a", version = "8.3",
    in_specs = { Tile(64, 64, f32), Tile(32, 48, f32), Tile(64, u32) }, out_specs = { Tile(2, nw, f32) }, block = { 32 },
    function(A, B, W, Out)
      local sm = smem.alloc(T.b64, 16, { align = 128 })
      local box = smem.alloc(f32, 2 * 64, { align = 128 })
      local bar = smem.mbarrier(1)
      local tid = reg.from(ptx.special.tid.x(), u32)
      local pw, po = ptx.global_ptrs(W), ptx.global_ptrs(Out)
      ptx.if_(tid:eq(0), function()
        local d = A:tma_desc { box = { 8, 16 } }
        for i = 0, 15 do
          local v = reg.scalar(T.b64)
          ptx.inst.ld.b64(v, ptx.addr(d.base, 8 * i))   -- the map through its generic address
          ptx.inst.st.global.b64(ptx.addr(pw, 8 * i), v)
          ptx.inst.st.shared.b64(sm[i], v)
        end
        edit(ptx.addr(pw), "global", ptx.global_ptrs(B))
        edit(sm[0], nil, ptx.global_ptrs(B))
        for i = 0, 15 do
          local v = reg.scalar(T.b64)
          ptx.inst.ld.shared.b64(v, sm[i])
          ptx.inst.st.global.b64(ptx.addr(pw, 128 + 8 * i), v)
        end
        ptx.fence.tensormap_release("gpu")
        local pw2 = pw + 128
        ptx.fence.tensormap_acquire(ptx.addr(pw), "gpu")
        ptx.fence.proxy.tensormap.acquire(ptx.addr(pw2), "gpu")
        ptx.mbarrier.init(bar[0], 1)
        ptx.mbarrier.arrive_expect_tx(bar[0], 2 * 4 * nw)
        ptx.cp.async.bulk.tensor_2d { dst = box[0], src = pw, coord = s32s(coord), mbar = bar[0] }
        ptx.cp.async.bulk.tensor_2d { dst = box[64], src = pw2, coord = s32s(coord), mbar = bar[0] }
        ptx.mbarrier.wait(bar[0], 0)
        for i = 0, nw - 1 do
          for j = 0, 1 do
            local v = reg.scalar(f32)
            ptx.inst.ld.shared.f32(v, box[64 * j + i])
            ptx.inst.st.global.f32(ptx.addr(po, 4 * (j * nw + i)), v)
          end
        end
      end)
      ptx.ret()
    end }
end

describe("tensormap.replace and griddepcontrol", function()
  it("edit a tensor map in global and in shared memory; TMA copies then follow the new fields (emulator)", function()
    local k = replaced_kernel(function(map, space, pB)
      local r = ptx.tensormap.replace
      r.global_address(map, pB, space)
      r.global_dim(map, 0, 48, space); r.global_dim(map, 1, reg.scalar(u32, 32), space)
      r.global_stride(map, 0, 48 * 4, space)
      r.box_dim(map, 0, 12, space); r.box_dim(map, 1, 4, space)
      r.element_stride(map, 1, 2, space)
      r { map = map, field = "fill_mode", value = "nan", space = space }
      r.elemtype(map, f32, space); r.swizzle_mode(map, "none", space); r.interleave_layout(map, "none", space)
    end, 24, { 40, 30 })
    local text = k:ptx()
    for _, want in ipairs { "tensormap.replace.tile.global_address.global.b1024.b64", "tensormap.replace.tile.box_dim.shared::cta.b1024.b32",
      "fence.proxy.tensormap::generic.release.gpu;" } do
      assert.truthy(text:find(want, 1, true), want)
    end
    assert.truthy(text:find("tensormap%.replace%.tile%.elemtype%.global%.b1024%.b32 \t%[%%rd%d+%], 7;"))
    assert.truthy(text:find("fence%.proxy%.tensormap::generic%.acquire%.gpu \t%[%%rd%d+%], 128;"))
    local b = tensor.rand({ 32, 48 }, f32, { lo = 1, hi = 2 })
    local out = k(tensor.rand({ 64, 64 }, f32), b, tensor.rand({ 64 }, u32, { lo = 1, hi = 9 }))
    local want = ref_load(f32_bits(b), { dims = { 48, 32 }, box = { 12, 4 }, es = { 1, 2 }, coord = { 40, 30 } }, 24, SENT, 0x7fc00000)
    local got = f32_bits(out)
    for j = 0, 1 do
      local part = {}
      for i = 1, 24 do part[i] = got[j * 24 + i] end
      same_words(part, want, j == 0 and "map edited in global memory" or "map edited in shared memory")
    end
    assert_ptxas(k)
  end)

  it("report a map that is no tensor map, a field value out of range, and a TMA through a shared map", function()
    local line
    local k = replaced_kernel(function(map, space, pB)
      if space then line = H.here(); ptx.tensormap.replace.box_dim(map, 0, 0, space) end
      ptx.tensormap.replace.global_address(map, pB, space)
    end, 24, { 0, 0 })
    local ok, err = pcall(k, tensor.rand({ 64, 64 }, f32), tensor.rand({ 32, 48 }, f32), tensor.rand({ 64 }, u32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace.tile.box_dim.global.b1024.b32", err, 1, true)
    assert.matches("tensormap.replace: box_dim 0 must be in 1..256", err, 1, true)
    local bad = kernel "tmr_bad" { arch = "sm_90a", version = "8.3", in_specs = { Tile(64, u32) }, out_specs = {}, block = { 32 },
      function(W)
        line = H.here(); ptx.tensormap.replace.fill_mode(ptx.addr(ptx.global_ptrs(W)), 1, "global")
        ptx.ret()
      end }
    ok, err = pcall(bad, tensor.rand({ 64 }, u32, { lo = 1, hi = 9 }))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("holds neither a tensor map luaptx built nor 128 zero bytes", err, 1, true)
    local shared_map = kernel "tmr_sh" { arch = "sm_90a", in_specs = { Tile(64, 64, f32) }, out_specs = {}, block = { 32 },
      function(A)
        local sm, box, bar = smem.alloc(T.b64, 16, { align = 128 }), smem.alloc(f32, 256, { align = 128 }), smem.mbarrier(1)
        local d = A:tma_desc { box = { 8, 16 } }
        for i = 0, 15 do
          local v = reg.scalar(T.b64)
          ptx.inst.ld.b64(v, ptx.addr(d.base, 8 * i))   -- the map through its generic address
          ptx.inst.st.shared.b64(sm[i], v)
        end
        local g = reg.scalar(T.u64)
        ptx.inst.cvta.shared.u64(g, reg.from(sm:base(), T.u64))
        ptx.mbarrier.init(bar[0], 1)
        line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = box[0], src = g, coord = s32s { 0, 0 }, mbar = bar[0] }
        ptx.ret()
      end }
    ok, err = pcall(shared_map, tensor.rand({ 64, 64 }, f32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("is in shared memory; TMA reads maps from .param, .const or .global memory", err, 1, true)
  end)

  --- A one-warp kernel: thread 0 copies A's X:tma_desc parameter into
  -- shared memory and retargets it there to B (a rows x cols f32 tensor,
  -- box bw x bh, element stride 2 along rows: nw = bw * ceil(bh / 2)
  -- elements); the warp copies the map to
  -- W with tensormap.cp_fenceproxy (cp(pw, sm) emits it); thread 0 acquires
  -- it and TMA-loads the box at coord through it; dumps nw words.
  local function cp_fenceproxy_kernel(dims, bw, bh, coord, nw, cp)
    return kernel "tmcp" { arch = "sm_90a", version = "8.3",
      in_specs = { Tile(64, 64, f32), Tile(dims[2], dims[1], f32), Tile(64, u32) }, out_specs = { Tile(nw, f32) }, block = { 32 },
      function(A, B, W, Out)
        local sm = smem.alloc(T.b64, 16, { align = 128 })
        local box = smem.alloc(f32, 256, { align = 128 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local pw, po = ptx.global_ptrs(W), ptx.global_ptrs(Out)
        ptx.if_(tid:eq(0), function()
          local d = A:tma_desc { box = { 8, 16 } }
          for i = 0, 15 do
            local v = reg.scalar(T.b64)
            ptx.inst.ld.b64(v, ptx.addr(d.base, 8 * i))   -- the map through its generic address
            ptx.inst.st.shared.b64(sm[i], v)
          end
          local r = ptx.tensormap.replace
          r.global_address(sm[0], ptx.global_ptrs(B))
          r.global_dim(sm[0], 0, dims[1]); r.global_dim(sm[0], 1, dims[2])
          r.global_stride(sm[0], 0, dims[1] * 4)
          r.box_dim(sm[0], 0, bw); r.box_dim(sm[0], 1, bh); r.element_stride(sm[0], 1, 2)
        end)
        ptx.bar_sync(0)
        cp(pw, sm)
        ptx.if_(tid:eq(0), function()
          ptx.fence.tensormap_acquire(ptx.addr(pw), "gpu")
          ptx.mbarrier.init(bar[0], 1)
          ptx.mbarrier.arrive_expect_tx(bar[0], 4 * nw)
          ptx.cp.async.bulk.tensor_2d { dst = box[0], src = pw, coord = s32s(coord), mbar = bar[0] }
          ptx.mbarrier.wait(bar[0], 0)
          for i = 0, nw - 1 do
            local v = reg.scalar(f32)
            ptx.inst.ld.shared.f32(v, box[i])
            ptx.inst.st.global.f32(ptx.addr(po, 4 * i), v)
          end
        end)
        ptx.ret()
      end }
  end

  it("tensormap.cp_fenceproxy copies a map edited in shared memory to global memory; TMA loads through it (emulator)", function()
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local dims = { 16 * math.random(2, 4), 8 * math.random(3, 6) }          -- B: dims[2] rows of dims[1] f32
    local bw, bh = 4 * math.random(1, 4), math.random(2, 4)
    local coord = { math.random(0, dims[1] - 1), math.random(0, dims[2] - 1) }   -- the box may run past the edge
    local nw = bw * math.ceil(bh / 2)                                      -- element stride 2 along rows
    local ks = {}
    for _, scope in ipairs { "cta", "cluster", "gpu", "sys" } do
      local k = cp_fenceproxy_kernel(dims, bw, bh, coord, nw, function(pw, sm)
        ptx.tensormap.cp_fenceproxy { dst = ptx.addr(pw), src = sm[0], size = 128, scope = scope }
      end)
      ks[#ks + 1] = k
      assert.truthy(k:ptx():find("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release." .. scope ..
        ".sync.aligned \t[%rd", 1, true))
      local b = tensor.rand({ dims[2], dims[1] }, f32, { lo = 1, hi = 2 })
      local out = k(tensor.rand({ 64, 64 }, f32), b, tensor.rand({ 64 }, u32, { lo = 1, hi = 9 }))
      local want = ref_load(f32_bits(b), { dims = dims, box = { bw, bh }, es = { 1, 2 }, coord = coord }, nw, SENT, 0)
      same_words(f32_bits(out), want, "box through the copied map (" .. scope .. ")")
    end
    for _, k in ipairs(ks) do assert_ptxas(k) end
  end)

  it("tensormap.cp_fenceproxy: the warp must be converged; the DSL checks size and scope, the ISA PTX 8.3 and sm_90", function()
    local line
    local k = cp_fenceproxy_kernel({ 32, 24 }, 4, 2, { 0, 0 }, 4, function(pw, sm)
      ptx.if_(reg.from(ptx.special.tid.x(), u32):lt(16), function()
        line = H.here(); ptx.tensormap.cp_fenceproxy(ptx.addr(pw), sm[0])
      end)
    end)
    local ok, err = pcall(k, tensor.rand({ 64, 64 }, f32), tensor.rand({ 24, 32 }, f32), tensor.rand({ 64 }, u32))
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.cp_fenceproxy", err, 1, true)
    assert.matches("needs every thread of the warp converged (active 0x0000ffff of 0xffffffff)", err, 1, true)
    local function trace_err(arch, version, body)
      local okt, e = pcall(function()
        return kernel "tmcp_bad" { arch = arch, version = version, in_specs = { Tile(64, u32) }, out_specs = {}, block = { 32 },
          function(W)
            body(ptx.addr(ptx.global_ptrs(W)), smem.alloc(T.b64, 16, { align = 128 }))
            ptx.ret()
          end }:ptx()
      end)
      assert.is_false(okt)
      assert.matches("async_spec.lua:" .. line .. ": ", e, 1, true)
      return e
    end
    local cp = function(a) return function(pw, sm) a.dst, a.src = pw, sm[0]; line = H.here(); ptx.tensormap.cp_fenceproxy(a) end end
    assert.matches("tensormap.cp_fenceproxy: size must be 128 (a tensor map's bytes), got 64",
      trace_err("sm_90a", "8.3", cp { size = 64 }), 1, true)
    assert.matches("tensormap.cp_fenceproxy: scope must be cta, cluster, gpu or sys, got block",
      trace_err("sm_90a", "8.3", cp { scope = "block" }), 1, true)
    assert.matches("needs PTX ISA 8.3", trace_err("sm_90a", "8.2", cp {}), 1, true)
    assert.matches("this kernel targets sm_80", trace_err("sm_80", "8.3", cp {}), 1, true)
    assert.is_string(kernel "tmcp_sm90" { arch = "sm_90", version = "8.3", in_specs = { Tile(64, u32) }, out_specs = {}, block = { 32 },
      function(W)
        ptx.tensormap.cp_fenceproxy(ptx.addr(ptx.global_ptrs(W)), smem.alloc(T.b64, 16, { align = 128 })[0], "sys")
        ptx.ret()
      end }:ptx())
  end)

  it("check tensormap.replace in the DSL: fields, ordinals, values, PTX 8.3 and sm_90a", function()
    local function trace_err(arch, version, body)
      local ok, err = pcall(function()
        kernel "tm_dsl" { arch = arch, version = version, in_specs = { Tile(64, u32) }, block = { 32 }, body }:ptx()
      end)
      assert.is_false(ok)
      return err
    end
    local line
    local err = trace_err("sm_90a", "8.3", function(W)
      line = H.here(); ptx.tensormap.replace { map = ptx.addr(ptx.global_ptrs(W)), field = "boxdim", value = 1 }
    end)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace: field must be one of box_dim, element_stride", err, 1, true)
    err = trace_err("sm_90a", "8.3", function(W)
      line = H.here(); ptx.tensormap.replace.box_dim(ptx.addr(ptx.global_ptrs(W)), 16)
    end)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace.box_dim: missing value", err, 1, true)
    err = trace_err("sm_90a", "8.3", function(W)
      line = H.here(); ptx.tensormap.replace.elemtype(ptx.addr(ptx.global_ptrs(W)), "e4m3")
    end)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace.elemtype: e4m3 is not a value of this field", err, 1, true)
    err = trace_err("sm_90a", nil, function(W)
      line = H.here(); ptx.tensormap.replace.global_address(ptx.addr(ptx.global_ptrs(W)), 0)
    end)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace.tile.global_address.b1024.b64", err, 1, true)
    assert.matches("8.3", err, 1, true)
    err = trace_err("sm_90", "8.3", function(W)
      line = H.here(); ptx.tensormap.replace.global_address(ptx.addr(ptx.global_ptrs(W)), 0)
    end)
    assert.matches("async_spec.lua:" .. line .. ": tensormap.replace.tile.global_address.b1024.b64 needs an arch-specific target sm_90a..sm_121a", err, 1, true)
  end)

  it("griddepcontrol: launch_dependents and wait (sm_90+), no-ops on the emulator's single-grid launch", function()
    local k = kernel "pdl" { arch = "sm_90a", in_specs = { Tile(64, f32) }, out_specs = { Tile(64, f32) }, block = { 64 },
      function(X, Y)
        local tid = reg.from(ptx.special.tid.x(), u32)
        ptx.griddepcontrol.wait()
        local v = reg.scalar(f32)
        ptx.inst.ld.global.f32(v, ptx.addr(ptx.global_ptrs(X) + tid:mul_wide(4)))
        ptx.griddepcontrol.launch_dependents()
        ptx.inst.st.global.f32(ptx.addr(ptx.global_ptrs(Y) + tid:mul_wide(4)), v * 2)
        ptx.ret()
      end }
    local text = body_lines(k)
    assert.truthy(text:find("griddepcontrol.wait;", 1, true))
    assert.truthy(text:find("griddepcontrol.launch_dependents;", 1, true))
    local x = tensor.rand({ 64 }, f32, { lo = 1, hi = 2 })
    local xv, yv = x:values(), k(x):values()
    for i = 1, 64 do assert.are.equal(xv[i] * 2, yv[i]) end
    local line
    local ok, err = pcall(function()
      kernel "pdl80" { arch = "sm_80", block = { 32 }, function()
        line = H.here(); ptx.griddepcontrol.wait()
      end }:ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": griddepcontrol.wait needs sm_90 or newer", err, 1, true)
    assert_ptxas(k)
  end)
end)

describe("cluster multicast arrivals, selp and mad", function()
  it("arrive on the same mbarrier in every CTA a mask or rank list names, on the emulator", function()
    local pipeline = pyptx.pipeline
    local runtime = require "pyptx.runtime"
    local k = kernel "mcast" { arch = "sm_90a", out_specs = { Tile(4, u32) }, block = { 32 }, grid = { 4, 1, 1 },
      cluster = { 4, 1, 1 },
      function(Out)
        local bar = smem.mbarrier(1)
        local ring = pipeline.barriers(1, 2)                 -- two arrivals: its own CTA's and the previous one's
        local tid, rank = reg.from(ptx.special.tid.x(), u32), ptx.cluster.ctarank()
        ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 4); ring:init(); ptx.fence.mbarrier_init() end)
        ptx.cluster.sync()
        local leader = tid:eq(0)
        ptx.if_(leader, function()
          assert.equal(4, ptx.cluster.arrive_multicast(bar:base(), 0xf))   -- every CTA, itself included
        end)
        local next_rank = (rank + 1) % 4
        assert.equal(2, ring:at(0):when(leader):arrive_multicast({ rank, next_rank }))
        ptx.mbarrier.wait(bar[0], 0)
        ring:at(0):wait(0)
        ptx.if_(leader, function()
          ptx.inst.st.global.u32(ptx.addr(ptx.global_ptrs(Out) + rank:mul_wide(4)), rank + 100)
        end)
        ptx.cluster.sync()
        ptx.ret()
      end }
    local text = body_lines(k)
    assert.equal(6, select(2, text:gsub("mbarrier.arrive.shared::cluster.b64 _, %[%%r%d+%];", "")))
    assert.equal(2, select(2, text:gsub("@%%p%d+ mbarrier.arrive.shared::cluster", "")))
    local previous, emu = runtime.device(), H.emu()
    local budget = emu:option("budget")
    emu:set_option("budget", 1e6)          -- a missed arrival spins: fail fast instead of after 1e9 steps
    runtime.use(emu)
    local ok, out = pcall(function() return k():values() end)
    runtime.use(previous)
    emu:set_option("budget", budget)
    assert(ok, out)
    assert.same({ 100, 101, 102, 103 }, out)
    assert_ptxas(k)
  end)

  it("refuse a mask or rank list that names no CTA, at the caller's line", function()
    local line
    local ok, err = pcall(function()
      snippet(function() local bar = smem.mbarrier(1); line = H.here(); ptx.cluster.arrive_multicast(bar:base(), 0x10000) end):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": ptx.cluster.arrive_multicast: the CTA mask must be a 16-bit integer", err, 1, true)
    ok, err = pcall(function()
      snippet(function() local b = pyptx.pipeline.barriers(1); line = H.here(); b:at(0):arrive_multicast({ 0, 16 }) end):ptx()
    end)
    assert.is_false(ok)
    assert.matches("async_spec.lua:" .. line .. ": bar:arrive_multicast: rank 2 of the list must be 0..15", err, 1, true)
  end)

  it("type selp and mad from their registers", function()
    local k = snippet(function()
      local a, b = reg.scalar(u32, 1), reg.scalar(u32, 2)
      local p = a:lt(b)
      ptx.selp(a, a, b, p)
      ptx.selp(reg.scalar(T.f16), reg.scalar(T.f16), reg.scalar(T.f16), -p)
      ptx.selp(reg.scalar(f32), 1.0, 2.0, p)
      ptx.mad.lo(a, a, b, 3)
      ptx.mad.hi(reg.scalar(T.s32), reg.scalar(T.s32), -2, reg.scalar(T.s32))
      ptx.mad.wide(reg.scalar(T.u64), a, b, reg.scalar(T.u64))
      ptx.mad(a, a, b, a)
      local f = reg.scalar(f32, 1)
      ptx.mad(f, f, f, 2.0)
      ptx.mad(reg.scalar(T.f64), reg.scalar(T.f64), reg.scalar(T.f64), reg.scalar(T.f64))
    end)
    local text = body_lines(k)
    for _, want in ipairs {
      "selp.u32 %r1, %r1, %r2, %p1;", "selp.b16 %rs1, %rs2, %rs3, !%p1;", "selp.f32 %f1, 0f3F800000, 0f40000000, %p1;",
      "mad.lo.u32 %r1, %r1, %r2, 3;", "mad.hi.s32 %r3, %r4, -2, %r5;", "mad.wide.u32 %rd1, %r1, %r2, %rd2;",
      "mad.lo.u32 %r1, %r1, %r2, %r1;", "mad.rn.f32 %f2, %f2, %f2, 0f40000000;", "mad.rn.f64 %fd1, %fd2, %fd3, %fd4;",
    } do
      assert.truthy(text:find(want, 1, true), want .. "\n---\n" .. text)
    end
    for _, case in ipairs {
      { function() ptx.selp(reg.scalar(u32), 1, 2, reg.scalar(u32)) end, "ptx.selp: the condition (argument 4) must be a predicate" },
      { function() ptx.mad.lo(reg.scalar(f32), reg.scalar(f32), 1.0, 2.0) end, "ptx.mad.lo needs integer registers, got f32" },
      { function() ptx.mad(reg.scalar(T.f16), reg.scalar(T.f16), 1, 2) end, "ptx.mad: no mad for f16; use ptx.inst.fma.rn.f16" },
      { function() ptx.selp(reg.pred(), reg.pred(), reg.pred(), reg.pred()) end, "ptx.selp: predicates have no .selp" },
    } do
      local ok, err = pcall(function() snippet(case[1]):ptx() end)
      assert.is_false(ok)
      assert.matches("^spec/async_spec.lua:%d+: ", err)   -- the line of the case's function
      assert.matches(case[2], err, 1, true)
    end
    assert_ptxas(k)
  end)
end)
