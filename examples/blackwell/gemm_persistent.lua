--- Persistent Blackwell GEMM (sm_100a): D = A * B^T, A (M x K) and B
-- (N x K) bf16 K-major, D (M x N) f32 row-major, on tcgen05.
--
-- The grid is persistent: P CTAs (opts.ctas; default min(tiles, 148), the
-- SM count of a B200) walk the 128 x BN output tiles t = ctaid.x,
-- ctaid.x + P, ... . The tile scheduler is a trace-time formula: CTA c
-- owns ceil((tiles - c) / P) tiles, its j-th is t = c + j*P, and t
-- rasterises column-major (m-block t % (M/128), n-block t / (M/128)), so
-- the P tiles in flight at once share B's n-blocks.
--
-- Roles in a CTA of 192 threads (6 warps):
--   thread 0 (warp 0)   TMA producer: a STAGES-deep full/empty ring of A
--                       and B k-blocks (128B swizzle) whose position runs
--                       on across tiles (k-block number j*K/64 + kt);
--   thread 32 (warp 1)  MMA issuer; warp 1 also allocates and frees TMEM;
--   warps 2..5          epilogue: warp w reads TMEM lanes 32*(w%4).. (the
--                       quarter its warp id allows), 32 rows of D.
-- The f32 accumulator lives in tensor memory, ACC (opts.acc: 1 or 2)
-- buffers of BN columns reused tile after tile: the MMA issuer waits on
-- acc_empty[a] (every epilogue thread arrives after its tcgen05.wait::ld
-- and a tcgen05.fence::before_thread_sync), fences with
-- tcgen05.fence::after_thread_sync, runs the tile's MMAs (tcgen05.commit
-- to empty[s] frees each stage) and commits to acc_full[a]; the epilogue
-- waits on acc_full[a], fences after, reads and stores. With two buffers
-- the epilogue of tile j overlaps the MMAs of tile j+1.
--
-- Shape rules: M % 128 == 0, N % BN == 0, K % 64 == 0, BN in {64, 128,
-- 256} (ACC * BN <= 512 TMEM columns), stages 2, 4 or 8.
--
-- opts.mutant plants one bug, for spec/blackwell_gemms_spec.lua to show
-- the emulator catches it: "no_swizzle" (MMA descriptors without the
-- 128B swizzle TMA wrote), "no_acc_wait" (the MMA issuer reuses an
-- accumulator without waiting on acc_empty), "no_acc_commit" (no
-- tcgen05.commit to acc_full), "no_full_wait" (MMAs before the stage's
-- TMA load completed), "no_fence" (no tcgen05.fence::after_thread_sync
-- in the epilogue after its acc_full wait).
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local L = require "examples.lib.tcgen05_gemm"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local bf16, u32 = T.bf16, T.u32

local BM, BK, UMMA_K = 128, 64, 16
local SMS = 148                 -- streaming multiprocessors of a B200: the default grid

-- opts.mutant values
local MUTANTS = { "no_swizzle", "no_acc_wait", "no_acc_commit", "no_full_wait", "no_fence" }

--- Why (m, n, k, opts) breaks the shape rules, or nil.
function M.shape_error(m, n, k, opts)
  local err = L.dims_error({ M = m, N = n, K = k }, opts, MUTANTS)
  if err then return err end
  local bn, stages, acc = opts.BN or 128, opts.stages or 4, opts.acc or 2
  if bn ~= 64 and bn ~= 128 and bn ~= 256 then return "BN must be 64, 128 or 256" end
  if acc ~= 1 and acc ~= 2 then return "acc must be 1 or 2" end
  err = L.tile_error(m, n, k, bn) or L.ring_error(stages, bn)
  if err then return err end
  if opts.ctas ~= nil and (type(opts.ctas) ~= "number" or opts.ctas < 1 or opts.ctas ~= math.floor(opts.ctas)) then
    return "ctas must be a positive integer"
  end
  return nil
end

--- log2 of a power of two.
local function log2(v) return math.floor(math.log(v) / math.log(2) + 0.5) end

--- build(M, N, K[, opts]): opts.BN (128), opts.stages (4), opts.acc (TMEM
-- accumulator buffers, 2), opts.ctas (the persistent grid, default
-- min(tiles, 148)), opts.arch (sm_100a), opts.name (gemm_persistent_bnBN),
-- opts.mutant (above).
function M.build(m, n, k, opts)
  opts = opts or {}
  local err = M.shape_error(m, n, k, opts)
  if err then error("gemm_persistent: " .. err, 2) end
  local BN, S, ACC = opts.BN or 128, opts.stages or 4, opts.acc or 2
  local A_BYTES, B_BYTES = BM * BK * 2, BN * BK * 2
  local KT, MT = k / BK, m / BM
  local TILES = MT * (n / BN)
  local P = math.min(opts.ctas or SMS, TILES)
  local NCOLS = math.max(32, ACC * BN)
  local logS = log2(S)
  local mu = opts.mutant
  return kernel(opts.name or ("gemm_persistent_bn%d"):format(BN)) {
    arch = opts.arch or "sm_100a",
    in_specs = { Tile(m, k, bf16), Tile(n, k, bf16) },
    out_specs = { Tile(m, n, T.f32) },
    grid = { P, 1, 1 },
    block = { 192, 1, 1 },
    maxnreg = 128,                  -- without it ptxas holds to 64 registers and spills the tile loop's state
    function(A, B, D)
      local tc = ptx.tcgen05
      local pd = ptx.global_ptrs(D)
      local sA = smem.alloc(T.b8, S * A_BYTES, { align = 1024 })
      local sB = smem.alloc(T.b8, S * B_BYTES, { align = 1024 })
      local full, empty = smem.mbarrier(S), smem.mbarrier(S)
      local acc_full, acc_empty = smem.mbarrier(ACC), smem.mbarrier(ACC)
      local slot = smem.alloc(T.u32, 1)

      local tid = reg.from(ptx.special.tid.x(), u32)
      local warp = tid:shr(5)
      local cta = reg.from(ptx.special.ctaid.x(), u32)
      local mine = ((TILES + P - 1) - cta) / P     -- ceil((TILES - cta) / P) tiles for this CTA

      ptx.if_(tid:eq(0), function()
        for s = 0, S - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", full[s], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", empty[s], 1)
        end
        for a = 0, ACC - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", acc_full[a], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", acc_empty[a], 128)   -- every epilogue thread
        end
        ptx.inst("fence.proxy.async.shared::cta")   -- the barriers, visible to TMA and tcgen05.commit
      end)
      local taddr = L.tmem_alloc(warp, 1, slot, NCOLS)

      local full0, empty0, sA0, sB0 = full:base(), empty:base(), sA:base(), sB:base()
      local accf0, acce0 = acc_full:base(), acc_empty:base()

      --- The j-th tile of this CTA: its first row of A/D and of B.
      local function tile(j)
        local t = cta + j * P
        return t % MT * BM, t / MT * BN
      end
      --- Accumulator buffer of local tile j and the parity of its use.
      local function acc_of(j)
        if ACC == 1 then return 0, j:band(1) end
        return j:band(1), j:shr(1):band(1)
      end

      -- TMA producer: k-block number it = j*KT + kt walks the ring across tiles
      ptx.if_(tid:eq(0), function()
        local descA, descB = A:tma_desc { box = { BM, BK }, swizzle = "128B" }, B:tma_desc { box = { BN, BK }, swizzle = "128B" }
        ptx.range(0, mine, 1, function(j)
          local m0, n0 = tile(j)
          ptx.range(0, KT, 1, function(kt)
            local it = j * KT + kt
            local s = it:band(S - 1)
            L.wait(empty0 + s * 8, it:shr(logS):band(1):bxor(1))
            local fb = full0 + s * 8
            ptx.inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), A_BYTES + B_BYTES)
            local kx = kt * BK
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sA0 + s * A_BYTES), src = descA, coord = { kx, m0 }, mbar = ptx.addr(fb) }
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sB0 + s * B_BYTES), src = descB, coord = { kx, n0 }, mbar = ptx.addr(fb) }
          end)
        end)
      end)

      -- MMA issuer
      ptx.if_(tid:eq(32), function()
        local idesc = reg.scalar(T.b32, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = BM, N = BN })
        local layout = { sbo = 1024, swizzle = mu == "no_swizzle" and "none" or "128B" }   -- 8 rows x 128 B a swizzle atom
        local adesc0, bdesc0 = bw.smem_desc_reg(sA0, layout), bw.smem_desc_reg(sB0, layout)
        local always = tid:eq(32)
        ptx.range(0, mine, 1, function(j)
          local a, phase = acc_of(j)
          if mu ~= "no_acc_wait" then L.wait(acce0 + a * 8, phase:bxor(1)) end   -- the epilogue has read this buffer
          tc.fence_after_thread_sync()
          local d = ACC == 1 and taddr or taddr + a * BN
          ptx.range(0, KT, 1, function(kt)
            local it = j * KT + kt
            local s = it:band(S - 1)
            if mu ~= "no_full_wait" then L.wait(full0 + s * 8, it:shr(logS):band(1)) end
            tc.fence_after_thread_sync()
            local s64 = s:to(T.u64)
            local ad, bd = adesc0 + s64 * (A_BYTES / 16), bdesc0 + s64 * (B_BYTES / 16)
            local accumulate = kt:ne(0)
            for kk = 0, BK / UMMA_K - 1 do
              -- +32 bytes along K inside the 128-byte swizzle row: +2 in the address field
              tc.mma { d = d, a = kk == 0 and ad or ad + kk * 2, b = kk == 0 and bd or bd + kk * 2,
                       idesc = idesc, enable_d = kk == 0 and accumulate or always }
            end
            tc.commit { mbar = empty0 + s * 8 }        -- the stage is free once these MMAs are done
          end)
          if mu ~= "no_acc_commit" then tc.commit { mbar = accf0 + a * 8 } end   -- the tile's accumulator is complete
        end)
      end)

      -- epilogue: warps 2..5, warp w reads lanes 32*(w%4).. = rows of its quarter
      ptx.if_(warp:ge(2), function()
        local quarter = warp:band(3)
        local row_in = quarter * 32 + tid:band(31)
        local lanes = taddr + quarter * bw.tmem_offset(32, 0)
        ptx.range(0, mine, 1, function(j)
          local m0, n0 = tile(j)
          local a, phase = acc_of(j)
          L.wait(accf0 + a * 8, phase)
          if mu ~= "no_fence" then tc.fence_after_thread_sync() end
          local prow = pd + ((m0 + row_in) * n + n0):mul_wide(4)
          L.store_row(ACC == 1 and lanes or lanes + a * BN, prow, BN)
          tc.fence_before_thread_sync()              -- our tcgen05.ld are ordered before the arrive
          L.arrive(acce0 + a * 8)
        end)
      end)

      L.tmem_dealloc(warp, 1, taddr, NCOLS)
      ptx.ret()
    end,
  }
end

M.inputs, M.reference, M.args, M.tolerance = L.inputs, L.reference, L.args, L.tolerance

--- Build, launch on fresh random inputs, compare every element.
function M.check(m, n, k, opts)
  return L.check(M.build(m, n, k, opts), m, n, k)
end

M.kernels = { M.build(4096, 4096, 4096), M.build(8192, 8192, 4096, { BN = 256, stages = 4 }) }

--- `luaptx run examples/blackwell/gemm_persistent.lua [M N K [ctas [BN [stages [acc]]]]] [--summary]`:
-- by default 512x256x256 on 3 CTAs (8 tiles: 3, 3 and 2 per CTA), checked
-- against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local verify = require "pyptx.tools.verify"
  local m, n, k = tonumber(args[1]) or 512, tonumber(args[2]) or 256, tonumber(args[3]) or 256
  local opts = { ctas = tonumber(args[4]) or 3, BN = tonumber(args[5]), stages = tonumber(args[6]), acc = tonumber(args[7]) }
  local ok, report = M.check(m, n, k, opts)
  return verify.report(("blackwell gemm_persistent(%d, %d, %d, %d CTAs)"):format(m, n, k, math.min(opts.ctas, m / BM * n / (opts.BN or 128))), ok, report)
end

return M
