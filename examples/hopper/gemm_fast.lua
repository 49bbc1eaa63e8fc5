--- Fast Hopper GEMM (fast.cu class): C[M, N] (bf16) = A[M, K] (bf16) * B[N, K]^T (bf16), f32 accumulation.
-- Both inputs are K-major (B is stored as N rows of K).
--
-- A persistent grid of P CTAs (132, one per H100 SM, by default) in
-- clusters of CLUSTER = 2 CTAs along M walks the output in cluster tiles of
-- (CLUSTER * 128) x BN. Each CTA is three warpgroups:
--  * warpgroup 0, the producer (setmaxnreg.dec 40): its thread 0 walks the
--    K loop of every tile through a STAGES-deep full/empty mbarrier ring
--    (pyptx.pipeline on examples/lib/tma_pipeline.lua). Per k-block it waits
--    until stage s is empty, arms full[s] with the whole stage's bytes, loads
--    its own A tile (128 x 64, 128B swizzle) and its half of the shared B
--    tile (BN/2 x 64), which it multicasts to both CTAs of the cluster
--    (cp.async.bulk.tensor .multicast::cluster, ctamask 0b11): the two CTAs
--    compute vertically adjacent tiles, so they need the same B;
--  * warpgroups 1 and 2, the consumers (setmaxnreg.inc 232), 64 rows each,
--    in CUTLASS's mainloop (tma_pipeline's Consumer:mainloop): wait for
--    full[s], issue four wgmma m64nBNk16 (descriptors on the swizzled
--    tiles, scale-d off for a tile's first k-block, which is peeled: no
--    zeroing) and commit them; wgmma.wait_group 1 then completes the
--    previous k-block's group, whose stage is released while this one's
--    MMAs run (one group in flight). A stage is released by one thread of
--    the warpgroup per CTA of the cluster (thread r arrives on empty[s] of
--    CTA r, mapa + mbarrier.arrive.shared::cluster, .release.cta: no
--    fence): empty[s] expects 4 arrivals, both consumer warpgroups of
--    both CTAs, since the peer's producer writes into this CTA too.
-- The epilogue of each tile goes through shared memory and TMA stores in
-- 64 x 64 sub-tiles, two staging buffers per warpgroup (so the ring keeps 4
-- stages of 48 KiB): per sub-tile, the warpgroup's store thread waits
-- until the store that last used the buffer has read it
-- (cp.async.bulk.wait_group.read 1) and the warpgroup meets at a named
-- barrier; every thread converts its accumulators to bf16x2 and writes
-- them with stmatrix into the 128B-swizzled 64 x 64 buffer; each thread
-- fences its writes to the async proxy (fence.proxy.async.shared::cta)
-- and the warpgroup meets again; the store thread issues the TMA store
-- (cp.async.bulk.tensor, .bulk_group) and commits it. The stores overlap
-- the next sub-tile and the next tile's K loop, which the producer
-- already prefetches: the ring runs on across tiles.
--
-- Tile schedule: the cluster tiles are ordered along a Hilbert curve over
-- the tile grid (M.schedule, computed at trace time, a .const table in the
-- kernel's module); cluster c takes entries c, c + P/CLUSTER, ... (fast.cu's
-- round-robin over the curve), so the tiles in flight at once are close
-- together and share A and B rows in L2.
--
-- Options: BN (256; 128), STAGES (4), CLUSTER (2; 1), SMS (P, 132),
-- UNROLL (k-blocks per trip of the consumers' k-loop, 1), RELEASE
-- ("warpgroup"; "warp": lane 0 of every consumer warp releases, empty[s]
-- counts warps), PRODUCER_REGS / CONSUMER_REGS (setmaxnreg per role, 40 /
-- 232 as CUTLASS; pyptx uses 24 / 240). opts.mutant (for spec/hopper_gemm_fast_spec.lua only)
-- breaks one thing: "no_load_swizzle" (the TMA loads unswizzled; the wgmma
-- descriptors still say 128B), "no_store_swizzle" (stmatrix addresses
-- without the XOR), "no_fence" (no fence.proxy.async before the TMA
-- store), "no_store_barrier" (the store issued without the warpgroup's
-- barrier after the fence), "no_full_wait" (consumers read a stage without waiting for
-- full[s]), "no_empty_wait" (the producer refills a stage without waiting
-- for empty[s]), "no_store_wait" (the staging tile rewritten before the
-- previous TMA store has read it), "early_release" (a stage released before
-- the wgmma.wait_group that covers its MMAs).
--
-- Shape rules: M % (CLUSTER * 128) == 0, N % BN == 0, K % 64 == 0.
-- `luaptx run examples/hopper/gemm_fast.lua [M N K [STAGES [CLUSTER [SMS]]]]`.
local pyptx = require "pyptx"
local pipeline = require "pyptx.pipeline"
local tp = require "examples.lib.tma_pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local bf16, u32, u64 = T.bf16, T.u32, T.u64
local bit = require "bit"

local M = {}

local MUTANTS = { no_load_swizzle = true, no_store_swizzle = true, no_fence = true, no_store_barrier = true,
  no_full_wait = true, no_empty_wait = true, no_store_wait = true, early_release = true }

--- The (x, y) of point d of the Hilbert curve that fills an n x n grid (n a
-- power of 2): the classic d2xy, two bits of d per level.
function M.hilbert_d2xy(n, d)
  local x, y, t, s = 0, 0, d, 1
  while s < n do
    local rx = bit.band(1, math.floor(t / 2))
    local ry = bit.band(1, bit.bxor(t, rx))
    if ry == 0 then
      if rx == 1 then x, y = s - 1 - x, s - 1 - y end
      x, y = y, x
    end
    x, y = x + s * rx, y + s * ry
    t, s = math.floor(t / 4), s * 2
  end
  return x, y
end

--- The tiles of a TM x TN grid in Hilbert order: a list of { tm, tn }
-- (0-based), the points of the curve over the smallest enclosing
-- power-of-2 square that fall inside the grid.
function M.schedule(TM, TN)
  local n = 1
  while n < TM or n < TN do n = n * 2 end
  local out = {}
  for d = 0, n * n - 1 do
    local x, y = M.hilbert_d2xy(n, d)
    if x < TM and y < TN then out[#out + 1] = { x, y } end
  end
  return out
end

--- The options with their defaults.
local function options(opts)
  opts = opts or {}
  local BN = opts.BN or 256
  return { BM = 128, BN = BN, BK = 64, STAGES = opts.STAGES or 4, CLUSTER = opts.CLUSTER or 2,
    SMS = opts.SMS or 132, PRODUCER_REGS = opts.PRODUCER_REGS, CONSUMER_REGS = opts.CONSUMER_REGS,
    UNROLL = opts.UNROLL or 1, RELEASE = opts.RELEASE or "warpgroup", mutant = opts.mutant }
end

--- Why (M, N, K, o) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, o)
  if o.BN ~= 128 and o.BN ~= 256 then return "BN must be 128 or 256" end
  if o.CLUSTER ~= 1 and o.CLUSTER ~= 2 then return "CLUSTER must be 1 or 2" end
  if Md % (o.CLUSTER * o.BM) ~= 0 or N % o.BN ~= 0 or K % o.BK ~= 0 or Md < 1 or N < 1 or K < 1 then
    return ("M %% (CLUSTER * 128), N %% BN and K %% 64 must be 0; got %dx%dx%d with CLUSTER %d, BN %d"):format(Md, N, K,
      o.CLUSTER, o.BN)
  end
  if o.STAGES < 1 or o.STAGES > 8 then return "STAGES must be 1..8" end
  local smem_bytes = o.STAGES * (o.BM + o.BN) * o.BK * 2 + 4 * 64 * 64 * 2 + 2 * o.STAGES * 8
  if smem_bytes > 227 * 1024 then
    return ("STAGES %d with BN %d needs %d bytes of shared memory, more than the 232448 a Hopper CTA has"):format(o.STAGES,
      o.BN, smem_bytes)
  end
  if o.SMS < 1 or o.SMS % o.CLUSTER ~= 0 then return "SMS must be a positive multiple of CLUSTER" end
  if o.UNROLL < 1 or o.UNROLL % 1 ~= 0 then return "UNROLL must be a positive integer" end
  if o.RELEASE ~= "warpgroup" and o.RELEASE ~= "warp" then return "RELEASE must be \"warpgroup\" or \"warp\"" end
  if (Md / (o.CLUSTER * o.BM)) * (N / o.BN) > 16384 then return "at most 16384 cluster tiles (the schedule table is .const)" end
  if o.mutant ~= nil and not MUTANTS[o.mutant] then
    return "mutant must be no_load_swizzle, no_store_swizzle, no_fence, no_store_barrier, no_full_wait, no_empty_wait, "
      .. "no_store_wait or early_release, got "
      .. tostring(o.mutant)
  end
  return nil
end

--- The GEMM kernel for (M, N, K); opts: BN, STAGES, CLUSTER, SMS, mutant (see the header).
function M.build(Md, N, K, opts)
  local o = options(opts)
  local err = M.shape_error(Md, N, K, o)
  if err then error("hopper gemm_fast: " .. err, 2) end
  local BM, BN, BK, S, CL, mu = o.BM, o.BN, o.BK, o.STAGES, o.CLUSTER, o.mutant
  local KT = K / BK
  local A_STAGE, B_STAGE, BROWS = BM * BK * 2, BN * BK * 2, BN / CL   -- BROWS: rows of B each CTA loads and multicasts
  local C_CHUNK = 64 * 64 * 2                                          -- one 64 x 64 bf16 TMA store box, 128B swizzled
  local TPO = { stages = S, bytes = A_STAGE + B_STAGE, cluster = CL, release = o.RELEASE }
  if mu == "early_release" or mu == "no_full_wait" then TPO.mutant = mu end
  local NC = o.SMS / CL                                                -- clusters in the grid
  local order = M.schedule(Md / (CL * BM), N / BN)
  local words = {}
  for i, t in ipairs(order) do words[i] = tostring(t[1] * 65536 + t[2]) end
  local TBL = "hopper_gemm_fast_tiles"
  local load_swizzle = mu == "no_load_swizzle" and "none" or "128B"
  return kernel "hopper_gemm_fast" {
    arch = "sm_90a",
    in_specs = { Tile(Md, K, bf16), Tile(N, K, bf16) },
    out_specs = { Tile(Md, N, bf16) },
    grid = { o.SMS, 1, 1 }, cluster = { CL, 1, 1 }, block = { 384, 1, 1 }, maxnreg = 168,
    funcs = { (".const .align 4 .u32 %s[%d] = {%s};"):format(TBL, #words, table.concat(words, ", ")) },
    function(A, B, C)
      local sA = smem.wgmma_tile(bf16, { S * BM, BK })     -- stage s: rows s*BM.. (1024-byte atoms)
      local sB = smem.wgmma_tile(bf16, { S * BN, BK })
      local sC = smem.alloc(bf16, 4 * 64 * 64, { align = 1024 })  -- consumer cw: two 64 x 64 boxes at cw * 2 * C_CHUNK
      local tid = reg.from(ptx.special.tid.x(), u32)
      local pipe = tp.new(TPO)
      pipe:init(tid)                                  -- a cluster barrier when CL > 1
      local rank = CL > 1 and ptx.cluster.ctarank() or 0
      local tiles = reg.scalar(u64, ptx.sym(TBL, 0))

      --- body(m0, n0) for each tile of this CTA: entries cluster, cluster + NC, ... of the Hilbert order.
      local function over_tiles(body)
        local cluster = CL > 1 and reg.from(ptx.special.ctaid.x(), u32) / CL or reg.from(ptx.special.ctaid.x(), u32)
        ptx.range(cluster, #order, NC, function(t)
          local w = reg.scalar(u32)
          ptx.ld.const(w, ptx.addr(tiles + t:mul_wide(4)))
          local m0 = w:shr(16) * (CL * BM)
          if CL > 1 then m0 = rank:fma(BM, m0) end
          body(m0, (w % 65536) * BN)
        end)
      end

      local producer = function()
        local a_base, b_base = sA:base(), sB:base()
        local ring = pipeline.ring(S, { phase = 1 })  -- a fresh empty[s] reports phase 1 completed
        local adesc = A:tma_desc { box = { BM, BK }, swizzle = load_swizzle }
        local bdesc = B:tma_desc { box = { BROWS, BK }, swizzle = load_swizzle }
        local mask = CL > 1 and reg.scalar(T.u16, 2 ^ CL - 1) or nil
        over_tiles(function(m0, n0)
          pipeline.kloop(ring, KT, function(i, s, phase)
            if mu ~= "no_empty_wait" then pipe.empty:at(s):wait(phase) end
            local full = pipe.full:at(s)
            full:arrive_expect_tx(A_STAGE + B_STAGE)    -- my A, and all of B: half mine, half the peer's multicast
            local k0 = i * BK
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(tp.stage(a_base, s, A_STAGE)), coord = { k0, m0 }, mbar = full,
              src = adesc }
            local bdst = tp.stage(b_base, s, B_STAGE)
            if CL > 1 then bdst = rank:fma(BROWS * BK * 2, bdst) end
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(bdst), coord = { k0, CL > 1 and rank:fma(BROWS, n0) or n0 },
              mbar = full, multicast = mask, src = bdesc }
          end)
        end)
      end

      local consumer = function(cw)                   -- consumer 0 or 1: rows 64*cw.. of the CTA's tile
        local acc = ptx.wgmma.fragments(BN, false)
        local a_base, b_base = sA:base() + cw * (64 * BK * 2), sB:base()
        local cons = pipe:consumer(tid)
        local lane = tid % 32
        local store_thread = (tid % 128):eq(0)
        local cdesc = C:tma_desc { box = { 64, 64 }, swizzle = "128B" }
        local stage_c = sC:base() + cw * (2 * C_CHUNK)
        -- stmatrix .x4 q stores the 8x8 blocks (h, nb) = (0, 2q), (1, 2q), (0, 2q+1), (1, 2q+1): lane l gives the
        -- address of row l%8 of block l/8, row R = 16*warp + 8*h + l%8 of the staging box; its 16 bytes are
        -- column chunk c = (2q + (l/8)/2) % 8 of box q/4, stored at chunk c ^ (R % 8) (128B swizzle).
        local l8, blk = lane % 8, lane:shr(3)
        local row = ((tid % 128):shr(5) * 16 + (blk % 2) * 8 + l8) * 128 + stage_c
        local u = blk:shr(1)
        if mu ~= "no_store_swizzle" then u = u:bxor(l8) end
        local at = {}
        for qq = 0, 3 do at[qq] = row + (u:shl(4)):bxor(qq * 32) end
        over_tiles(function(m0, n0)
          cons:mainloop(KT, function(k, s)
            tp.mma { d = acc, n = BN, k = BK, a = tp.desc(sA, tp.stage(a_base, s, A_STAGE)), a_tile = sA,
              b = tp.desc(sB, tp.stage(b_base, s, B_STAGE)), b_tile = sB, scale_d = k == 0 and 0 or 1, wait = false }
          end, { unroll = o.UNROLL })
          -- epilogue: registers -> swizzled 64 x 64 staging box (two per warpgroup, alternating) -> TMA store
          for j = 0, BN / 64 - 1 do
            local buf = (j % 2) * C_CHUNK
            if mu ~= "no_store_wait" then ptx.if_(store_thread, function() ptx.cp.async.bulk.wait_group_read(1) end) end
            ptx.bar_sync(1 + cw, 128)
            for q = 4 * j, 4 * j + 3 do
              local r = reg.array(T.b32, 4)
              for jj = 0, 3 do ptx.inst.cvt.rn.bf16x2.f32(r[jj], acc[8 * q + 2 * jj + 1], acc[8 * q + 2 * jj]) end
              ptx.stmatrix { addr = ptx.addr(at[q % 4], buf), s = { r[0], r[1], r[2], r[3] } }
            end
            if mu ~= "no_fence" then ptx.fence.proxy_async("shared::cta") end
            if mu ~= "no_store_barrier" then ptx.bar_sync(1 + cw, 128) end
            ptx.if_(store_thread, function()
              ptx.cp.async.bulk.tensor_2d { dst = cdesc, src = ptx.addr(stage_c + buf), coord = { n0 + 64 * j, m0 + cw * 64 } }
              ptx.cp.async.bulk.commit_group()
            end)
          end
        end)
        ptx.if_(store_thread, function() ptx.cp.async.bulk.wait_group(0) end)   -- the last stores, before exit
      end

      tp.roles(tid, producer, consumer, { producer_regs = o.PRODUCER_REGS, consumer_regs = o.CONSUMER_REGS })
      if CL > 1 then ptx.cluster.sync() end         -- no CTA leaves while a peer may still write into it
      ptx.ret()
    end,
  }
end

-- Random inputs, the reference and the launch arguments: examples/lib/gemm_data.lua.
local data = require "examples.lib.gemm_data"
M.inputs, M.reference, M.args = data.inputs, data.reference, data.args

--- Per-element tolerance, |got - ref| <= atol + rtol * |ref|. The products
-- of bf16 inputs are exact in f32; the f32 sum of K of them (|term| < 1)
-- is within about K * 2^-24 * max|partial sum| of the exact one, far below
-- atol = 1e-5 * K. Rounding that sum to bf16 (8 significant bits, round to
-- nearest) moves it by at most half an ulp, 2^-8 of its magnitude: rtol.
-- So a correct kernel's worst element sits at rtol * |ref| + a small part
-- of atol, while a missing k-block, a stale stage or a misplaced element
-- is off by about the size of an element (~1 for K = 128).
function M.tolerance(K)
  return { atol = 1e-5 * K, rtol = 2 ^ -8 }
end

--- Build, launch on fresh random inputs, compare every element.
function M.check(Md, N, K, opts)
  local check = require "pyptx.tools.verify"
  local k = M.build(Md, N, K, opts)
  local inputs = M.inputs(Md, N, K, check.fresh_seed())
  return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(K) }
end

M.kernels = { M.build(4096, 4096, 4096) }

--- `luaptx run examples/hopper/gemm_fast.lua [M N K [STAGES [CLUSTER [SMS]]]] [--summary]`:
-- run at 256x256x128 on 2 CTAs by default and check against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local Md, N, K = tonumber(args[1]) or 256, tonumber(args[2]) or 256, tonumber(args[3]) or 128
  local opts = { STAGES = tonumber(args[4]), CLUSTER = tonumber(args[5]) or 2, SMS = tonumber(args[6]) }
  opts.SMS = opts.SMS or opts.CLUSTER
  local ok, report = M.check(Md, N, K, opts)
  return require("pyptx.tools.verify").report(("hopper gemm_fast(%d, %d, %d, cluster %d, %d CTAs)"):format(Md, N, K,
    opts.CLUSTER, opts.SMS), ok, report)
end

return M
