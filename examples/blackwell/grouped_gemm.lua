--- Blackwell grouped GEMM (sm_100a), uniform groups over ctaid.z: G
-- problems of one shape, D_g = A_g * B_g^T for g = 0 .. G-1, with A_g
-- (M x K) and B_g (N x K) bf16 K-major and D_g (M x N) f32 row-major.
-- The groups are stacked: A is (G*M x K), B (G*N x K), D (G*M x N); a
-- batch of MoE experts fed equal token counts, or torch's bmm on
-- K-major weights. This is the form pyptx's
-- examples/blackwell/grouped_gemm.py has (one grid z per group); groups of
-- different sizes are examples/hopper/grouped_gemm.lua's (a persistent
-- scheduler over a list of M_g).
--
-- The grid is (M/128, N/BN, G): CTA (x, y, g) computes rows
-- g*M + 128x .. of D and columns BN*y .. . Its TMA loads take coordinates
-- in the stacked tensors (A's row g*M + 128x, B's row g*N + BN*y; the
-- tensor maps are those of the whole stacked A and B, so a box never
-- crosses into the next group because M % 128 == 0 and N % BN == 0).
--
-- Inside a CTA the structure of examples/blackwell/gemm.lua (1-SM): 128
-- threads; thread 0 the TMA producer over a STAGES-deep full/empty
-- mbarrier ring (128B swizzle), thread 32 the tcgen05.mma issuer (M = 128,
-- N = BN, f32 accumulator in BN TMEM columns that warp 2 allocates), each
-- stage freed by tcgen05.commit to its `empty` barrier, a last commit to
-- `done` releasing the epilogue, where every warp reads its 32 TMEM lanes.
--
-- Shape rules: G >= 1, M % 128 == 0, N % BN == 0, K % 64 == 0, BN a
-- multiple of 32 in [64, 256], stages 2, 4 or 8.
--
-- opts.mutant plants one bug, for spec/blackwell_gemms_spec.lua: "no_swizzle"
-- (MMA descriptors without the swizzle TMA wrote), "no_commit" (no
-- tcgen05.commit freeing a stage), "no_full_wait" (MMAs before the stage's
-- TMA load completed), "no_done_wait" (the epilogue reads TMEM without
-- waiting on `done`), "no_group" (every CTA loads group 0's operands),
-- "no_fence" (no tcgen05.fence::after_thread_sync after the full wait).
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local L = require "examples.lib.tcgen05_gemm"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local bf16, u32 = T.bf16, T.u32

local BM, BK, UMMA_K = 128, 64, 16

-- opts.mutant values
local MUTANTS = { "no_swizzle", "no_commit", "no_full_wait", "no_done_wait", "no_group", "no_fence" }

--- Why (g, m, n, k, opts) breaks the shape rules, or nil.
function M.shape_error(g, m, n, k, opts)
  local err = L.dims_error({ G = g, M = m, N = n, K = k }, opts, MUTANTS)
  if err then return err end
  local bn, stages = opts.BN or 128, opts.stages or 4
  if bn % 32 ~= 0 or bn < 64 or bn > 256 then return "BN must be a multiple of 32 in [64, 256]" end
  err = L.tile_error(m, n, k, bn) or L.ring_error(stages, bn)
  if err then return err end
  if g > 65535 then return "G <= 65535 (grid z)" end
  return nil
end

--- build(G, M, N, K[, opts]): opts.BN (128), opts.stages (4), opts.arch (sm_100a),
-- opts.name (grouped_gemm_bnBN), opts.mutant (above).
function M.build(g, m, n, k, opts)
  opts = opts or {}
  local err = M.shape_error(g, m, n, k, opts)
  if err then error("grouped_gemm: " .. err, 2) end
  local BN, S, mu = opts.BN or 128, opts.stages or 4, opts.mutant
  local A_BYTES, B_BYTES = BM * BK * 2, BN * BK * 2
  local KT = k / BK
  local logS = math.floor(math.log(S) / math.log(2) + 0.5)
  local NCOLS = BN <= 32 and 32 or BN <= 64 and 64 or BN <= 128 and 128 or 256    -- a power of two >= BN
  return kernel(opts.name or ("grouped_gemm_bn%d"):format(BN)) {
    arch = opts.arch or "sm_100a",
    in_specs = { Tile(g * m, k, bf16), Tile(g * n, k, bf16) },
    out_specs = { Tile(g * m, n, T.f32) },
    grid = { m / BM, n / BN, g },
    block = { 128, 1, 1 },
    function(A, B, D)
      local tc = ptx.tcgen05
      local pd = ptx.global_ptrs(D)
      local sA = smem.alloc(T.b8, S * A_BYTES, { align = 1024 })
      local sB = smem.alloc(T.b8, S * B_BYTES, { align = 1024 })
      local full, empty, done = smem.mbarrier(S), smem.mbarrier(S), smem.mbarrier(1)
      local slot = smem.alloc(T.u32, 1)

      local tid = reg.from(ptx.special.tid.x(), u32)
      local warp = tid:shr(5)
      local grp = mu == "no_group" and reg.scalar(u32, 0) or reg.from(ptx.special.ctaid.z(), u32)
      local m_blk = reg.from(ptx.special.ctaid.x(), u32) * BM
      local n_col = reg.from(ptx.special.ctaid.y(), u32) * BN        -- this CTA's first column of D_g
      local a_row = grp * m + m_blk                                  -- rows in the stacked A and D
      local b_row = grp * n + n_col                                  -- and in the stacked B

      ptx.if_(tid:eq(0), function()
        for s = 0, S - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", full[s], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", empty[s], 1)
        end
        ptx.inst("mbarrier.init.shared::cta.b64", done[0], 1)
        ptx.inst("fence.proxy.async.shared::cta")   -- the barriers, visible to TMA and tcgen05.commit
      end)
      local taddr = L.tmem_alloc(warp, 2, slot, NCOLS)
      local full0, empty0, sA0, sB0 = full:base(), empty:base(), sA:base(), sB:base()

      -- TMA producer
      ptx.if_(tid:eq(0), function()
        local descA, descB = A:tma_desc { box = { BM, BK }, swizzle = "128B" }, B:tma_desc { box = { BN, BK }, swizzle = "128B" }
        ptx.range(0, KT, 1, function(kt)
          local s = kt:band(S - 1)
          L.wait(empty0 + s * 8, kt:shr(logS):band(1):bxor(1))
          local fb = full0 + s * 8
          ptx.inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), A_BYTES + B_BYTES)
          local kx = kt * BK
          ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sA0 + s * A_BYTES), src = descA, coord = { kx, a_row }, mbar = ptx.addr(fb) }
          ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sB0 + s * B_BYTES), src = descB, coord = { kx, b_row }, mbar = ptx.addr(fb) }
        end)
      end)

      -- MMA issuer
      local issuer = tid:eq(32)
      ptx.if_(issuer, function()
        local idesc = reg.scalar(T.b32, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = BM, N = BN })
        local layout = { sbo = 1024, swizzle = mu == "no_swizzle" and "none" or "128B" }   -- 8 rows x 128 B a swizzle atom
        local adesc0, bdesc0 = bw.smem_desc_reg(sA0, layout), bw.smem_desc_reg(sB0, layout)
        ptx.range(0, KT, 1, function(kt)
          local s = kt:band(S - 1)
          if mu ~= "no_full_wait" then L.wait(full0 + s * 8, kt:shr(logS):band(1)) end
          if mu ~= "no_fence" then tc.fence_after_thread_sync() end
          local s64 = s:to(T.u64)
          local ad, bd = adesc0 + s64 * (A_BYTES / 16), bdesc0 + s64 * (B_BYTES / 16)
          local accumulate = kt:ne(0)
          for kk = 0, BK / UMMA_K - 1 do
            -- +32 bytes along K inside the 128-byte swizzle row: +2 in the address field
            tc.mma { d = taddr, a = kk == 0 and ad or ad + kk * 2, b = kk == 0 and bd or bd + kk * 2,
                     idesc = idesc, enable_d = kk == 0 and accumulate or issuer }
          end
          if mu ~= "no_commit" then tc.commit { mbar = empty0 + s * 8 } end
        end)
        tc.commit { mbar = done:base() }
      end)

      -- epilogue: every warp reads its 32 TMEM lanes (= 32 rows of D_g)
      if mu ~= "no_done_wait" then L.wait(done:base(), 0) end
      tc.fence_after_thread_sync()
      local prow = pd + ((a_row + tid) * n + n_col):mul_wide(4)
      L.store_row(taddr + warp * bw.tmem_offset(32, 0), prow, BN)

      L.tmem_dealloc(warp, 2, taddr, NCOLS)
      ptx.ret()
    end,
  }
end

--- Random inputs in [-1, 1): { a (G*M x K), b (G*N x K), M, N, K, G }.
function M.inputs(g, m, n, k, seed) return L.inputs(m, n, k, seed, g) end
M.reference, M.args, M.tolerance = L.reference, L.args, L.tolerance

--- Build, launch on fresh random inputs, compare every element of every group.
function M.check(g, m, n, k, opts)
  return L.check(M.build(g, m, n, k, opts), m, n, k, g)
end

-- MoE-scale: 8 experts of 2048 x 128 x 2048 (pyptx's example sizes), and 16 of 512 x 256 x 1024
M.kernels = { M.build(8, 2048, 128, 2048), M.build(16, 512, 256, 1024, { BN = 256, stages = 2 }) }

--- `luaptx run examples/blackwell/grouped_gemm.lua [G M N K [BN [stages]]] [--summary]`:
-- by default 4 groups of 256x128x128, checked against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local verify = require "pyptx.tools.verify"
  local g, m, n, k = tonumber(args[1]) or 4, tonumber(args[2]) or 256, tonumber(args[3]) or 128, tonumber(args[4]) or 128
  local ok, report = M.check(g, m, n, k, { BN = tonumber(args[5]), stages = tonumber(args[6]) })
  return verify.report(("blackwell grouped_gemm(G %d, %d, %d, %d)"):format(g, m, n, k), ok, report)
end

return M
