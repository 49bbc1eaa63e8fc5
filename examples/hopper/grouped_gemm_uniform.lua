--- Hopper uniform grouped (batched) GEMM: G groups of one shape, group g
-- computes
--   C[g] (M x N, f32) = A[g] (M x K, bf16) * B[g] (N x K, bf16)^T
-- with A, B and C 3-D tensors (G x M x K, G x N x K, G x M x N, row-major).
-- Where examples/hopper/grouped_gemm.lua takes groups of different sizes
-- through a persistent scheduler, every group here has the same tile grid,
-- so the grid's z dimension is the group: CTA (x, y, z) computes the BM x
-- BN tile (y, x) of group z.
--
-- The CTA is examples/hopper/gemm.lua's: three warpgroups around a
-- STAGES-deep full/empty mbarrier ring (examples/lib/tma_pipeline.lua on
-- pyptx.pipeline), warpgroup 0's thread 0 the TMA producer, warpgroups 1
-- and 2 the wgmma consumers of 64 rows each (Consumer:mainloop, one wgmma
-- group in flight). The TMA descriptors are 3-D:
-- a box of {1, BM, BK} (A) or {1, BN, BK} (B) at coordinates {k0, m0, g}
-- lands as one 128B-swizzled stage of the wgmma tile (smem.wgmma_tile with
-- stages, read through tile:stage(s)); the epilogue stores the
-- accumulators at row g*M + m0 of C seen as (G*M) x N.
--
-- Shape rules: G >= 1, M % 128 == 0, N % BN == 0, K % 64 == 0,
-- BN in {64, 128, 256}, STAGES 1..8.
local pyptx = require "pyptx"
local tp = require "examples.lib.tma_pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local bf16, f32, u32 = T.bf16, T.f32, T.u32

local M = {}

--- Why (G, M, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(G, Md, N, K, o)
  for _, v in ipairs { { "G", G }, { "M", Md }, { "N", N }, { "K", K } } do
    if type(v[2]) ~= "number" or v[2] < 1 or v[2] % 1 ~= 0 then
      return ("%s must be a positive integer, got %s"):format(v[1], tostring(v[2]))
    end
  end
  if o.BN ~= 64 and o.BN ~= 128 and o.BN ~= 256 then return "BN must be 64, 128 or 256" end
  if Md % o.BM ~= 0 or N % o.BN ~= 0 or K % o.BK ~= 0 then
    return ("M %% BM, N %% BN and K %% BK must be 0; got %dx%dx%d with %dx%dx%d"):format(Md, N, K, o.BM, o.BN, o.BK)
  end
  if o.STAGES < 1 or o.STAGES > 8 then return "STAGES must be 1..8" end
  return nil
end

--- The grouped GEMM kernel for G groups of (M, N, K); opts: BN (128), STAGES (4).
function M.build(G, Md, N, K, opts)
  opts = opts or {}
  local o = { BM = 128, BN = opts.BN or 128, BK = 64, STAGES = opts.STAGES or 4 }
  local err = M.shape_error(G, Md, N, K, o)
  if err then error("hopper uniform grouped gemm: " .. err, 2) end
  local BM, BN, BK, S = o.BM, o.BN, o.BK, o.STAGES
  return kernel "hopper_grouped_gemm_uniform" {
    arch = "sm_90a",
    in_specs = { Tile(G, Md, K, bf16), Tile(G, N, K, bf16) },
    out_specs = { Tile(G, Md, N, f32) },
    grid = { N / BN, Md / BM, G }, block = { 384, 1, 1 }, maxnreg = 168,
    function(A, B, C)
      local sA = smem.wgmma_tile(bf16, { BM, BK }, { stages = S })    -- 128B swizzle, one per ring stage
      local sB = smem.wgmma_tile(bf16, { BN, BK }, { stages = S })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local pipe = tp.new { stages = S, bytes = sA.stage_bytes + sB.stage_bytes }
      pipe:init(tid)
      local g = reg.from(ptx.special.ctaid.z(), u32)                   -- the group
      local m0 = reg.from(ptx.special.ctaid.y(), u32) * BM
      local n0 = reg.from(ptx.special.ctaid.x(), u32) * BN

      local producer = function()
        local da = A:tma_desc { box = { 1, BM, BK }, swizzle = sA.tma_swizzle }   -- one group's BM x BK box
        local db = B:tma_desc { box = { 1, BN, BK }, swizzle = sB.tma_swizzle }
        pipe:producer():loop(K / BK, function(i, s, full)
          ptx.cp.async.bulk.tensor_3d { dst = sA:stage(s), src = da, coord = { i * BK, m0, g }, mbar = full }
          ptx.cp.async.bulk.tensor_3d { dst = sB:stage(s), src = db, coord = { i * BK, n0, g }, mbar = full }
        end)
      end

      local consumer = function(cw)                 -- consumer 0 or 1: rows 64*cw..
        local acc = ptx.wgmma.fragments(BN, false)   -- the first k-block overwrites them (scale-d off)
        pipe:consumer(tid):mainloop(K / BK, function(k, s)   -- one group in flight (CUTLASS's mainloop)
          tp.mma { d = acc, n = BN, k = BK, a = sA:stage(s, cw * 64), b = sB:stage(s), scale_d = k == 0 and 0 or 1,
            wait = false }
        end)
        tp.store_acc(tid, acc, BN, { ptr = ptx.global_ptrs(C), ld = N, row = g * Md + m0 + cw * 64, col = n0 })
      end

      tp.roles(tid, producer, consumer)
      ptx.ret()
    end,
  }
end

-- Random inputs and the double-precision reference are the shared bf16
-- GEMM ones (examples/lib/gemm_data.lua, G groups stacked): C[g][m][n] =
-- sum_k bf16(A[g][m][k]) * bf16(B[g][n][k]), row-major in g, m, n.
local data = require "examples.lib.gemm_data"

--- Random inputs in [-1, 1): { a (G x M x K), b (G x N x K), G, M, N, K }.
function M.inputs(G, Md, N, K, seed)
  return data.inputs(Md, N, K, seed, G)
end

M.reference = data.reference

--- The tensors a launch takes.
function M.args(inputs)
  return { { inputs.a, { inputs.G, inputs.M, inputs.K }, dtype = bf16 },
    { inputs.b, { inputs.G, inputs.N, inputs.K }, dtype = bf16 } }
end

--- Per-element tolerance: exact bf16 products, f32 accumulation per k16 step.
function M.tolerance(K)
  return { atol = 1e-5 * K, rtol = 1e-3 }
end

--- Build, launch on fresh random inputs, compare every element.
function M.check(G, Md, N, K, opts)
  local check = require "pyptx.tools.verify"
  local k = M.build(G, Md, N, K, opts)
  local inputs = M.inputs(G, Md, N, K, check.fresh_seed())
  return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(K) }
end

-- The default (realistic) size: 8 groups of 2048 x 2048 x 2048.
M.kernels = { M.build(8, 2048, 2048, 2048) }

--- `luaptx run examples/hopper/grouped_gemm_uniform.lua [G M N K [STAGES]] [--summary]`:
-- run 3 groups of 128 x 256 x 128 by default and check against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local G, Md, N, K = tonumber(args[1]) or 3, tonumber(args[2]) or 128, tonumber(args[3]) or 256, tonumber(args[4]) or 128
  local S = tonumber(args[5]) or 4
  local ok, report = M.check(G, Md, N, K, { STAGES = S })
  return require("pyptx.tools.verify").report(("hopper uniform grouped gemm(%d x %dx%dx%d, %d stages)"):format(G, Md, N, K, S),
    ok, report)
end

return M
