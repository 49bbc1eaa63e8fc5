--- Each tcgen05 primitive in isolation, one kernel each, for sm_100a.
--
-- Every kernel that touches tensor memory allocates it first (warp 0:
-- tcgen05.alloc + relinquish_alloc_permit, then the base address is read
-- back from shared memory) and frees it last (tcgen05.dealloc), as PTX
-- requires; between the two sits the one primitive the kernel is about.
-- The emulator does not execute tcgen05: `luaptx run` prints the PTX /
-- ptxas summary. `luaptx check examples/blackwell/tcgen05_suite.lua`
-- assembles every kernel.
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local kernel, reg, ptx, smem = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem
local T = pyptx.types

local M = {}

--- A Lua list of n fresh registers of type ty.
local function regs(ty, n)
  local a, out = reg.array(ty, n), {}
  for i = 0, n - 1 do out[i + 1] = a[i] end
  return out
end

--- Allocate ncols TMEM columns in warp 0, run body(taddr, warp0), free them.
local function with_tmem(ncols, cta, body)
  local tc = ptx.tcgen05
  local slot = smem.alloc(T.u32, 1)
  local tid = reg.from(ptx.special.tid.x(), T.u32)
  local warp0 = tid:lt(32)
  ptx.if_(warp0, function()
    tc.alloc { dst = slot, ncols = ncols, cta_group = cta }
    tc.relinquish_alloc_permit { cta_group = cta }
  end)
  tc.fence_before_thread_sync()
  ptx.bar_sync(0)
  tc.fence_after_thread_sync()
  local taddr = reg.scalar(T.b32)
  ptx.inst.ld.shared.b32(taddr, ptx.addr(slot))
  body(taddr, warp0, tid)
  tc.fence_before_thread_sync()
  ptx.bar_sync(0)
  tc.fence_after_thread_sync()
  ptx.if_(warp0, function() tc.dealloc { taddr = taddr, ncols = ncols, cta_group = cta } end)
end

--- A kernel "name" for sm_100a with 128 threads whose body is fn.
local function k(name, fn, opts)
  local o = { arch = "sm_100a", block = { 128, 1, 1 }, grid = { 1, 1, 1 } }
  for key, v in pairs(opts or {}) do o[key] = v end
  o[1] = function() fn() ptx.ret() end
  return kernel(name)(o)
end

-- An SMEM operand tile (K-major, 128B swizzle: 8-row atoms 1024 bytes apart)
-- and its descriptor; the tile itself stays uninitialized in this suite.
local function tile_desc(bytes)
  local tile = smem.alloc(T.b8, bytes, { align = 1024 })
  return bw.smem_desc_reg(tile, { sbo = 1024, swizzle = "128B" })
end

--- tcgen05.mma of one kind with A and B from SMEM descriptors (M = 128).
local function mma_kernel(name, kind, a, d, N, extra)
  return k(name, function()
    with_tmem(N < 32 and 32 or N, 1, function(taddr, _, tid)
      local ad, bd = tile_desc(128 * 128), tile_desc(N * 128)
      local idesc = reg.scalar(T.b32, bw.idesc { kind = kind, a = a, d = d, M = 128, N = N })
      local first = tid:eq(0)
      ptx.if_(first, function()
        local args = { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = first, kind = kind }
        for key, v in pairs(extra or {}) do args[key] = v end
        ptx.tcgen05.mma(args)
        ptx.tcgen05.commit { mbar = smem.mbarrier(1) }
      end)
    end)
  end)
end

M.kernels = {
  -- allocation: alloc / relinquish_alloc_permit / dealloc
  k("tc_alloc", function() with_tmem(512, 1, function() end) end),
  -- mma kinds (dense, A and B in shared memory)
  mma_kernel("tc_mma_f16", "f16", "bf16", "f32", 256),
  mma_kernel("tc_mma_tf32", "tf32", "tf32", "f32", 128),
  mma_kernel("tc_mma_f8f6f4", "f8f6f4", "e4m3", "f32", 128),
  mma_kernel("tc_mma_i8", "i8", "s8", "s32", 128),
  mma_kernel("tc_mma_scale_d", "f16", "f16", "f16", 64, { scale_d = 3 }),
  -- mma with A from tensor memory (the [a-tmem] form)
  k("tc_mma_tmem_a", function()
    with_tmem(256, 1, function(taddr, _, tid)
      local bd = tile_desc(128 * 128)
      local idesc = reg.scalar(T.b32, bw.idesc { a = "bf16", M = 128, N = 128 })
      local a_tmem = taddr + bw.tmem_offset(0, 128)
      local p = tid:eq(0)
      ptx.if_(p, function() ptx.tcgen05.mma { d = taddr, a = a_tmem, b = bd, idesc = idesc, enable_d = p } end)
    end)
  end),
  -- sparse mma: .sp with the metadata in tensor memory
  k("tc_mma_sp", function()
    with_tmem(256, 1, function(taddr, _, tid)
      local ad, bd = tile_desc(128 * 64), tile_desc(128 * 128)
      local idesc = reg.scalar(T.b32, bw.idesc { a = "f16", M = 128, N = 128, sparse = true })
      local p = tid:eq(0)
      ptx.if_(p, function()
        ptx.tcgen05.mma { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = p, sp_meta = taddr + 128 }
      end)
    end)
  end),
  -- mma with a disable-output-lane mask (4 words for cta_group::1)
  k("tc_mma_lane_mask", function()
    with_tmem(128, 1, function(taddr, _, tid)
      local ad, bd = tile_desc(128 * 128), tile_desc(128 * 128)
      local idesc = reg.scalar(T.b32, bw.idesc { a = "bf16", M = 128, N = 128 })
      local mask = regs(T.b32, 4)
      for i = 1, 4 do ptx.mov(mask[i], 0) end
      local p = tid:eq(0)
      ptx.if_(p, function()
        ptx.tcgen05.mma { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = p, disable_output_lane = mask }
      end)
    end)
  end),
  -- 2-SM mma: cta_group::2 in a cluster of two, M = 256 across the pair
  k("tc_mma_cta2", function()
    with_tmem(256, 2, function(taddr, _, tid)
      local ad, bd = tile_desc(128 * 128), tile_desc(128 * 128)
      local idesc = reg.scalar(T.b32, bw.idesc { a = "bf16", M = 256, N = 256, cta_group = 2 })
      local rank = reg.from(ptx.special.cluster_ctarank(), T.u32)
      local leader = tid:eq(0):band(rank:eq(0))
      local bar = smem.mbarrier(1)
      local mask = reg.scalar(T.b16, 3)
      ptx.if_(leader, function()
        ptx.tcgen05.mma { d = taddr, a = ad, b = bd, idesc = idesc, enable_d = leader, cta_group = 2 }
        ptx.tcgen05.commit { mbar = bar, cta_group = 2, multicast = mask }
      end)
    end)
  end, { cluster = { 2, 1, 1 }, grid = { 2, 1, 1 } }),
  -- tcgen05.ld: every shape, then wait::ld
  k("tc_ld", function()
    with_tmem(128, 1, function(taddr)
      local tc = ptx.tcgen05
      tc.ld { dst = regs(T.b32, 4), taddr = taddr, shape = "32x32b" }
      tc.ld { dst = regs(T.b32, 8), taddr = taddr, shape = "16x64b" }
      tc.ld { dst = regs(T.b32, 8), taddr = taddr, shape = "16x128b" }
      tc.ld { dst = regs(T.b32, 16), taddr = taddr, shape = "16x256b" }
      tc.ld { dst = regs(T.b32, 2), taddr = taddr, shape = "16x32bx2", split = 16 }
      tc.ld { dst = regs(T.b32, 4), taddr = taddr, shape = "32x32b", pack = true }
      tc.wait("ld")
    end)
  end),
  -- tcgen05.st: every shape, then wait::st
  k("tc_st", function()
    with_tmem(128, 1, function(taddr)
      local tc = ptx.tcgen05
      local v = regs(T.b32, 16)
      for i = 1, 16 do ptx.mov(v[i], i) end
      tc.st { taddr = taddr, src = { v[1], v[2], v[3], v[4] }, shape = "32x32b" }
      tc.st { taddr = taddr, src = v, shape = "16x64b" }
      tc.st { taddr = taddr, src = v, shape = "16x128b" }
      tc.st { taddr = taddr, src = v, shape = "16x256b" }
      tc.st { taddr = taddr, src = { v[1], v[2] }, shape = "16x32bx2", split = 16 }
      tc.st { taddr = taddr, src = { v[1], v[2] }, shape = "32x32b", unpack = true }
      tc.wait("st")
    end)
  end),
  -- tcgen05.commit: an mbarrier arrive when earlier async tcgen05 ops finish
  k("tc_commit", function()
    local bar = smem.mbarrier(1)
    ptx.tcgen05.commit { mbar = bar }
  end),
  -- tcgen05.cp: shared memory -> tensor memory, plain, multicast, decompressing
  k("tc_cp", function()
    with_tmem(128, 1, function(taddr, _, tid)
      local sd = tile_desc(128 * 32)
      ptx.if_(tid:eq(0), function()
        local tc = ptx.tcgen05
        tc.cp { taddr = taddr, desc = sd, shape = "128x256b" }
        tc.cp { taddr = taddr, desc = sd, shape = "4x256b" }
        tc.cp { taddr = taddr, desc = sd, shape = "128x128b" }
        tc.cp { taddr = taddr, desc = sd, shape = "64x128b", multicast = "warpx2::02_13" }
        tc.cp { taddr = taddr, desc = sd, shape = "32x128b", multicast = "warpx4" }
        tc.cp { taddr = taddr, desc = sd, shape = "128x256b", src_fmt = "b6x16_p32" }
      end)
    end)
  end),
  -- tcgen05.shift: rows of tensor memory down by one lane
  k("tc_shift", function()
    with_tmem(32, 1, function(taddr, _, tid)
      ptx.if_(tid:eq(0), function() ptx.tcgen05.shift { taddr = taddr } end)
    end)
  end),
  -- fences around a thread synchronization, and both waits
  k("tc_fence_wait", function()
    ptx.tcgen05.fence("before")
    ptx.bar_sync(0)
    ptx.tcgen05.fence("after")
    ptx.tcgen05.wait("ld")
    ptx.tcgen05.wait("st")
  end),
}

--- `luaptx run examples/blackwell/tcgen05_suite.lua`: the PTX/ptxas summary
-- of every kernel (the emulator does not execute tcgen05).
function M.main()
  print("tcgen05 is ptxas-only here: luaptx's emulator does not execute tcgen05 instructions.")
  return require("examples.lib.runner").summary(M.kernels)
end

return M
