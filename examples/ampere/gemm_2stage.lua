--- Two-stage cp.async GEMM on Ampere tensor cores: C = A * B, A (M x K)
-- and B (K x N) row-major bf16 (or f16), C (M x N) row-major f32.
--
-- The textbook double-buffered sm_80 kernel, between gemm.lua (no shared
-- memory) and gemm_pipelined.lua (ldmatrix, swizzles, a deeper ring):
--  * a 64x64x32 CTA tile, 4 warps in a 2x2 grid, each owning a 32x32 tile
--    of C as 2 x 4 m16n8k16 accumulators (32 f32 registers per lane);
--  * two shared-memory buffers filled with cp.async.cg 16-byte copies
--    (A tile 64x32: 64-byte rows; B tile 32x64: 128-byte rows): tile kt+1 is
--    copied into one buffer while tile kt is multiplied from the other;
--  * per k-tile: issue kt+1, commit, cp.async.wait_group 1 (tile kt has
--    landed), bar.sync (every warp's copies of tile kt are visible), compute,
--    bar.sync (nobody still reads the buffer the next issue overwrites);
--  * fragments come from shared memory with plain ld.shared: an A register
--    is two consecutive elements of one row (ld.shared.b32), a B register two
--    consecutive k of one column (two ld.shared.b16 packed with mov.b32).
--
-- opts.mutant (for spec/ampere_gemm_variants_spec.lua only) removes one
-- synchronisation to show the emulator catches it: "no_wait" (the
-- cp.async.wait_group), "no_barrier" (the bar.sync after the wait),
-- "no_trailing_barrier" (the bar.sync after the compute).
--
-- Shape constraints (build() raises an error naming the violated one):
--  * M % 64 == 0, N % 64 == 0   whole CTA tiles;
--  * K % 32 == 0                whole k-tiles.
local pyptx = require "pyptx"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local simple = require "examples.ampere.gemm"
local pipelined = require "examples.ampere.gemm_pipelined"

local M = {}

M.BM, M.BN, M.BK = 64, 64, 32
local A_BYTES, B_BYTES = 64 * 32 * 2, 32 * 64 * 2
local STAGE = A_BYTES + B_BYTES
local MUTANTS = { "no_wait", "no_barrier", "no_trailing_barrier" }

--- Why (Mdim, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, opts)
  return simple.check_shape("gemm_2stage", Md, N, K, opts, { tile = { 64, 64, 32 }, mutants = MUTANTS })
end

--- A two-stage 64x64x32 cp.async + ld.shared + mma.sync GEMM for (M, N, K).
-- opts: dtype (bf16 default, or f16), arch ("sm_80"), name, mutant.
function M.build(Md, N, K, opts)
  opts = opts or {}
  local err = M.shape_error(Md, N, K, opts)
  if err then error(err, 2) end
  local dt = opts.dtype or T.bf16
  local mu = opts.mutant
  local KT = K / 32
  return kernel(opts.name or "gemm_2stage") {
    arch = opts.arch or "sm_80",
    in_specs = { Tile(Md, K, dt), Tile(K, N, dt) },
    out_specs = { Tile(Md, N, T.f32) },
    grid = { N / M.BN, Md / M.BM, 1 }, block = { 128, 1, 1 },
    function(A, B, C)
      local pa, pb, pc = ptx.global_ptrs(A, B, C)
      local buf = smem.alloc(T.b8, 2 * STAGE, { align = 128 })
      local sbase = buf:base()
      local tid = reg.from(ptx.special.tid.x(), T.u32)
      local bm = reg.from(ptx.special.ctaid.y(), T.u32)
      local bn = reg.from(ptx.special.ctaid.x(), T.u32)
      local lane, warp = tid:band(31), tid:shr(5)
      local wm, wn = warp:shr(1), warp:band(1)
      local g, t = lane:shr(2), lane:band(3)

      -- cp.async: A rows tid/4 + 32j, 16-byte chunk tid%4; B rows tid/8 + 16j,
      -- chunk tid%8 (j = 0, 1): 2 + 2 copies per thread per k-tile.
      local arow, ac = tid:shr(2), tid:band(3)
      local brow, bc = tid:shr(3), tid:band(7)
      local a_src = pa + ((bm * 64 + arow) * K + ac:shl(3)):mul_wide(2)
      local b_src = pb + (brow * N + bn * 64 + bc:shl(3)):mul_wide(2)
      local a_dst = sbase + arow:shl(6) + ac:shl(4)
      local b_dst = sbase + A_BYTES + brow:shl(7) + bc:shl(4)
      local ws, rs = reg.scalar(T.u32, 0), reg.scalar(T.u32, 0)   -- write / read buffer offsets

      --- Issue the copies of the next k-tile into buffer ws and flip it.
      local function issue()
        local da, db = a_dst + ws, b_dst + ws
        for j = 0, 1 do
          ptx.inst.cp.async.cg.shared.global(ptx.addr(da, j * 32 * 64), ptx.addr(a_src, j * 32 * K * 2), 16)
          ptx.inst.cp.async.cg.shared.global(ptx.addr(db, j * 16 * 128), ptx.addr(b_src, j * 16 * N * 2), 16)
        end
        ptx.inst.add.u64(a_src, a_src, 32 * 2)
        ptx.inst.add.u64(b_src, b_src, 32 * N * 2)
        ptx.inst.xor.b32(ws, ws, STAGE)
      end

      -- Fragment addresses. A register r of m-tile mi at k-step ks: row
      -- wm*32 + 16mi + g + 8(r%2), k = 16ks + 2t + 8(r/2). B register r,
      -- element e of n-tile nj: k = 16ks + 2t + e + 8r, column wn*32 + 8nj + g.
      local a_frag = sbase + (wm:shl(5) + g):shl(6) + t:shl(2)
      local b_frag = sbase + A_BYTES + t:shl(8) + (wn:shl(5) + g):shl(1)
      local acc = {}
      for i = 0, 7 do acc[i] = reg.fragments(T.f32, 4, true) end
      local fa, fb = {}, {}
      for mi = 0, 1 do fa[mi] = reg.array(T.b32, 4) end
      for nj = 0, 3 do fb[nj] = reg.array(T.b32, 2) end
      local h = reg.array(T.b16, 2)
      local ra, rb = reg.scalar(T.u32), reg.scalar(T.u32)

      --- One k-tile from buffer rs: 2 k-steps of 8 + 16 ld.shared and 8 mma.
      local function compute()
        ptx.inst.add.u32(ra, a_frag, rs)
        ptx.inst.add.u32(rb, b_frag, rs)
        for ks = 0, 1 do
          for mi = 0, 1 do
            for r = 0, 3 do
              local off = (16 * mi + 8 * (r % 2)) * 64 + (16 * ks + 8 * math.floor(r / 2)) * 2
              ptx.inst.ld.shared.b32(fa[mi][r], ptx.addr(ra, off))
            end
          end
          for nj = 0, 3 do
            for r = 0, 1 do
              for e = 0, 1 do
                ptx.inst.ld.shared.b16(h[e], ptx.addr(rb, (16 * ks + e + 8 * r) * 128 + 16 * nj))
              end
              ptx.inst.mov.b32(fb[nj][r], { h[0], h[1] })
            end
          end
          for mi = 0, 1 do
            for nj = 0, 3 do
              local c = acc[mi * 4 + nj]
              ptx.mma { shape = "m16n8k16", atype = dt, d = c, a = fa[mi], b = fb[nj], c = c }
            end
          end
        end
        ptx.inst.xor.b32(rs, rs, STAGE)
      end

      issue()
      ptx.inst.cp.async.commit_group()
      ptx.range(0, KT, 1, function(kt)
        if KT > 1 then ptx.if_(kt:lt(KT - 1), issue) end
        ptx.inst.cp.async.commit_group()            -- possibly empty: keeps the group count regular
        if mu ~= "no_wait" then ptx.inst.cp.async.wait_group(1) end
        if mu ~= "no_barrier" then ptx.bar_sync(0) end
        compute()
        if mu ~= "no_trailing_barrier" then ptx.bar_sync(0) end
      end)

      -- D register r of (mi, nj): row wm*32 + 16mi + g + 8(r/2), columns
      -- wn*32 + 8nj + 2t + {0, 1}: one st.global.v2.f32 per pair.
      pipelined.store_acc(pc, N, bm, bn, wm, wn, g, t, 64, 32, 2, 4, acc)
      ptx.ret()
    end,
  }
end

M.reference, M.inputs, M.args, M.tolerance = simple.reference, simple.inputs, simple.args, simple.tolerance

M.kernels = { M.build(4096, 4096, 4096) }

-- check(M, N, K, opts) and main for `luaptx run examples/ampere/gemm_2stage.lua [M N K] [f16] [--summary]`
require("examples.lib.runner").install_gemm(M, "gemm_2stage")

return M
