--- Hopper GEMM: C[M, N] (f32) = A[M, K] (bf16) * B[N, K]^T (bf16).
-- Both inputs are K-major (B is stored as N rows of K, as a weight matrix
-- usually is), which is what wgmma reads without transposition.
--
-- Warp-specialized: a CTA of three warpgroups computes a BM x BN tile.
--  * warpgroup 0 is the producer: one thread walks the K loop, and for each
--    k-block waits until ring stage s is empty, arms full[s] with the bytes
--    to expect, and issues two TMA tile loads (A: BM x BK, B: BN x BK, 128B
--    swizzle) that complete on full[s];
--  * warpgroups 1 and 2 are consumers, 64 rows each: wait until full[s]
--    has landed, issue BK/16 wgmma.mma_async m64nBNk16 reading both tiles
--    through shared-memory descriptors and commit them; wgmma.wait_group 1
--    then completes the previous k-block's MMAs, whose stage is released
--    while this one's run (tma_pipeline's Consumer:mainloop: one group in
--    flight, the first k-block peeled and issued with scale-d off, so the
--    accumulators need no zeroing). One thread per warpgroup releases a
--    stage (empty[s] expects 2): a warpgroup's wait_group completes the
--    warpgroup's MMAs, all four warps' reads (docs/emulator.md).
-- The ring (examples/lib/tma_pipeline.lua on pyptx.pipeline) has STAGES
-- stages; producer and consumers each walk it with a pipeline.ring whose
-- stage and phase registers advance after every k-block (the producer's
-- starts at phase 1: a fresh empty[s] reports that phase as completed).
-- Accumulators (BN/2 f32 per thread) go to C in wgmma's fragment layout.
--
-- With CLUSTER = 2 (opts.CLUSTER), pairs of CTAs along N form a cluster that
-- shares the A tile: each CTA's producer loads half of A's rows and
-- multicasts them to both CTAs (TMA .multicast::cluster), so full[s] in
-- each CTA still expects the whole A + B stage. A stage can be refilled
-- only when the consumers of both CTAs have released it: thread r of each
-- consumer warpgroup arrives on empty[s] of CTA r (mapa + a remote
-- arrive, .release.cta), which expects 4. The CTAs meet at a cluster
-- barrier after init and before exit.
--
-- With PERSISTENT = P (opts.PERSISTENT), the grid is P CTAs that walk the
-- output tiles t = ctaid.x, ctaid.x + P, ... (row-major over the tile
-- grid); with clusters, the P / CLUSTER clusters walk cluster tiles (CLUSTER
-- tiles side by side along N) the same way, both CTAs of a cluster the same
-- ones, so their multicast loads pair up. The ring's iteration counter runs
-- on across tiles, so the producer prefetches the next tile's k-blocks
-- while the consumers store the previous tile's accumulators.
--
-- Shape rules: M % BM == 0, N % BN == 0, K % BK == 0, BK == 64 (one
-- 128-byte swizzled row per tile row), BM == 128, BN in {64, 128, 256}.
local pyptx = require "pyptx"
local tp = require "examples.lib.tma_pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local bf16, f32, u32 = T.bf16, T.f32, T.u32

local M = {}

--- Why (M, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, o)
  if o.BM ~= 128 then return "BM must be 128 (two consumer warpgroups of 64 rows)" end
  if o.BK ~= 64 then return "BK must be 64 (one 128-byte swizzled row of bf16 per tile row)" end
  if o.BN ~= 64 and o.BN ~= 128 and o.BN ~= 256 then return "BN must be 64, 128 or 256" end
  if Md % o.BM ~= 0 or N % o.BN ~= 0 or K % o.BK ~= 0 then
    return ("M %% BM, N %% BN and K %% BK must be 0; got %dx%dx%d with %dx%dx%d"):format(Md, N, K, o.BM, o.BN, o.BK)
  end
  if o.STAGES < 1 or o.STAGES > 8 then return "STAGES must be 1..8" end
  if o.CLUSTER ~= 1 and o.CLUSTER ~= 2 then return "CLUSTER must be 1 or 2" end
  if (N / o.BN) % o.CLUSTER ~= 0 then return "N / BN must be a multiple of CLUSTER" end
  if o.PERSISTENT and (o.PERSISTENT < 1 or o.PERSISTENT % o.CLUSTER ~= 0) then
    return "PERSISTENT must be a positive multiple of CLUSTER"
  end
  return nil
end

--- The GEMM kernel for (M, N, K); opts: BN (128), STAGES (4), CLUSTER (1),
-- PERSISTENT (nil: one CTA per tile; P: P CTAs looping over the tiles).
function M.build(Md, N, K, opts)
  opts = opts or {}
  local o = { BM = 128, BN = opts.BN or 128, BK = 64, STAGES = opts.STAGES or 4, CLUSTER = opts.CLUSTER or 1,
    PERSISTENT = opts.PERSISTENT }
  local err = M.shape_error(Md, N, K, o)
  if err then error("hopper gemm: " .. err, 2) end
  local BM, BN, BK, S, CL = o.BM, o.BN, o.BK, o.STAGES, o.CLUSTER
  local AROWS = BM / CL                                    -- rows of A each CTA loads (and multicasts)
  local KT = K / BK
  local P, TN, TILES = o.PERSISTENT, N / BN, (Md / BM) * (N / BN)
  return kernel "hopper_gemm" {
    arch = "sm_90a",
    in_specs = { Tile(Md, K, bf16), Tile(N, K, bf16) },
    out_specs = { Tile(Md, N, f32) },
    grid = P and { P, 1, 1 } or { N / BN, Md / BM, 1 }, cluster = { CL, 1, 1 },
    block = { 384, 1, 1 }, maxnreg = 168,
    function(A, B, C)
      local sA = smem.wgmma_tile(bf16, { BM, BK }, { stages = S })    -- 128B swizzle, one per ring stage
      local sB = smem.wgmma_tile(bf16, { BN, BK }, { stages = S })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local pipe = tp.new { stages = S, bytes = sA.stage_bytes + sB.stage_bytes, cluster = CL }
      pipe:init(tid)                                -- a cluster barrier when CL > 1

      --- body(m0, n0) for this CTA's tile, or for each tile it owns when persistent
      -- (with clusters: cluster tile t = CLUSTER tiles along N, this CTA's the one of its rank).
      local function over_tiles(body)
        if not P then
          return body(reg.from(ptx.special.ctaid.y(), u32) * BM, reg.from(ptx.special.ctaid.x(), u32) * BN)
        end
        if CL == 1 then
          return ptx.range(reg.from(ptx.special.ctaid.x(), u32), TILES, P, function(t)
            body((t / TN) * BM, (t % TN) * BN)
          end)
        end
        local rank, TNC = ptx.cluster.ctarank(), TN / CL
        ptx.range(reg.from(ptx.special.ctaid.x(), u32) / CL, TILES / CL, P / CL, function(t)
          body((t / TNC) * BM, ((t % TNC) * CL + rank) * BN)
        end)
      end

      local producer = function()
        local rank = CL > 1 and ptx.cluster.ctarank() or nil
        local prod = pipe:producer()                -- the ring runs on across tiles
        over_tiles(function(m0, n0) prod:loop(KT, function(i, s, full)
          local k0 = i * BK
          if CL > 1 then                            -- my half of A's rows, to every CTA of the cluster
            ptx.cp.async.bulk.tensor_2d{ dst = sA:stage(s, rank * AROWS), coord = { k0, m0 + rank * AROWS }, mbar = full,
              multicast = reg.scalar(T.u16, 2 ^ CL - 1), src = A:tma_desc{ box = { AROWS, BK }, swizzle = sA.tma_swizzle } }
          else
            ptx.cp.async.bulk.tensor_2d{ dst = sA:stage(s), coord = { k0, m0 }, mbar = full, src = A:tma_desc{ tile = sA } }
          end
          ptx.cp.async.bulk.tensor_2d{ dst = sB:stage(s), coord = { k0, n0 }, mbar = full, src = B:tma_desc{ tile = sB } }
        end) end)
      end

      local consumer = function(cw)                 -- consumer 0 or 1: rows 64*cw..
        local acc = ptx.wgmma.fragments(BN, false)   -- the first k-block overwrites them (scale-d off)
        local pc = ptx.global_ptrs(C)
        local cons = pipe:consumer(tid)
        over_tiles(function(m0, n0)
          cons:mainloop(KT, function(k, s)
            tp.mma { d = acc, n = BN, k = BK, a = sA:stage(s, cw * 64), b = sB:stage(s), scale_d = k == 0 and 0 or 1,
              wait = false }
          end)
          tp.store_acc(tid, acc, BN, { ptr = pc, ld = N, row = m0 + cw * 64, col = n0 })
        end)
      end

      tp.roles(tid, producer, consumer)
      if CL > 1 then ptx.cluster.sync() end       -- no CTA leaves while a peer may still write into it
      ptx.ret()
    end,
  }
end

-- Random inputs, the reference and the launch arguments: examples/lib/gemm_data.lua.
local data = require "examples.lib.gemm_data"
M.inputs, M.reference, M.args = data.inputs, data.reference, data.args

--- Per-element tolerance: exact bf16 products, f32 accumulation per k16 step.
function M.tolerance(K)
  return { atol = 1e-5 * K, rtol = 1e-3 }
end

--- Build, launch on fresh random inputs, compare every element.
function M.check(Md, N, K, opts)
  local check = require "pyptx.tools.verify"
  local k = M.build(Md, N, K, opts)
  local inputs = M.inputs(Md, N, K, check.fresh_seed())
  return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(K) }
end

M.kernels = { M.build(4096, 4096, 4096) }

--- `luaptx run examples/hopper/gemm.lua [M N K [STAGES [CLUSTER [PERSISTENT]]]] [--summary]`:
-- run at 256x256x128 by default and check against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local Md, N, K = tonumber(args[1]) or 256, tonumber(args[2]) or 256, tonumber(args[3]) or 128
  local opts = { STAGES = tonumber(args[4]) or 4, CLUSTER = tonumber(args[5]) or 1, PERSISTENT = tonumber(args[6]) }
  local ok, report = M.check(Md, N, K, opts)
  return require("pyptx.tools.verify").report(("hopper gemm(%d, %d, %d, %d stages, cluster %d%s)"):format(Md, N, K, opts.STAGES,
    opts.CLUSTER, opts.PERSISTENT and (", persistent " .. opts.PERSISTENT) or ""), ok, report)
end

return M
