--- Multi-stage GEMM on Ampere tensor cores: C = A * B, A (M x K) and
-- B (K x N) row-major bf16 (or f16), C (M x N) row-major f32.
--
-- The classic sm_80 structure:
--  * a 128x128x32 CTA tile, 4 warps in a 2x2 grid, each owning a 64x64
--    tile of C as 4 x 8 m16n8k16 accumulators (128 f32 registers per lane);
--  * a ring of `stages` (default 3) shared-memory buffers filled with
--    cp.async.cg 16-byte copies: stage s holds the 128x32 A tile (64-byte
--    rows) and the 32x128 B tile (256-byte rows); tile kt+stages-1 is in
--    flight while tile kt is multiplied (cp.async.wait_group stages-2);
--  * fragments come from shared memory with ldmatrix: A with .x4 (one
--    m16k16 fragment per instruction), B with .x4.trans (two n8k16
--    fragments per instruction, transposed on the way out of the row-major
--    K x N tile);
--  * both tiles are stored XOR-swizzled so that the 8 row addresses of each
--    ldmatrix phase hit 8 different 16-byte bank groups: A (64-byte rows)
--    flips offset bits 4..6 with bits 7..9 (smem.swizzle's 128-byte
--    pattern), B (256-byte rows) flips bits 4..6 with bits 8..10. The
--    cp.async writes use the same function, so the layout is consistent.
--
-- Shape constraints (build() raises an error naming the violated one):
--  * M % 128 == 0, N % 128 == 0      whole CTA tiles;
--  * K % 32 == 0                     whole k-tiles;
--  * K / 32 >= stages - 1            the prologue fills stages-1 buffers;
--  * stages in [2, 6].
local pyptx = require "pyptx"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local simple = require "examples.ampere.gemm"

local M = {}

M.BM, M.BN, M.BK = 128, 128, 32
local A_BYTES, B_BYTES = 128 * 32 * 2, 32 * 128 * 2
local STAGE = A_BYTES + B_BYTES

--- Why (Mdim, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, opts)
  return simple.check_shape("gemm_pipelined", Md, N, K, opts, { tile = { 128, 128, 32 }, stages = true })
end

--- x ^ ((x >> shift) & 0x70): the XOR swizzle of a tile's byte offset (emits 3).
local function swizzle(x, shift)
  return x:bxor(x:shr(shift):band(0x70))
end
M.swizzle_shift = { a = 3, b = 4 }

--- Trace-time version of the same swizzle, for specs and the docs.
function M.swizzle(offset, shift)
  return bit.bxor(offset, bit.band(bit.rshift(offset, shift), 0x70))
end

--- What the 128x128 cp.async ring kernels (this one, gemm_fast) set up
-- before their k-loop, for tensors A, B, C of (Md, N, K) and S stages: the
-- pointers, thread and warp indices, the swizzled ring, the write/read
-- stage offsets ws/rs with issue() (copy the next k-tile into stage ws)
-- and next_stage(off), and the ldmatrix row addresses a_ld/b_ld.
function M.ring_setup(A, B, C, N, K, S)
  local pa, pb, pc = ptx.global_ptrs(A, B, C)
  local ring = smem.alloc(T.b8, S * STAGE, { align = 1024 })
  local sbase = ring:base()
  local tid = reg.from(ptx.special.tid.x(), T.u32)
  local bm = reg.from(ptx.special.ctaid.y(), T.u32)
  local bn = reg.from(ptx.special.ctaid.x(), T.u32)
  local lane, warp = tid:band(31), tid:shr(5)
  local wm, wn = warp:shr(1), warp:band(1)

  -- cp.async sources and destinations. A: thread copies rows tid/4 + 32j,
  -- 16-byte chunk tid%4; B: rows tid/16 + 8j, chunk tid%16 (j = 0..3).
  -- Row steps of 32 (A) and 8 (B) move by 2048 bytes, which leaves the
  -- swizzle bits alone, so one register each plus immediates covers j.
  local arow, ac = tid:shr(2), tid:band(3)
  local brow, bc = tid:shr(4), tid:band(15)
  local a_src = pa + ((bm * 128 + arow) * K + ac:shl(3)):mul_wide(2)
  local b_src = pb + (brow * N + bn * 128 + bc:shl(3)):mul_wide(2)
  local a_dst = sbase + swizzle(arow:shl(6) + ac:shl(4), 3)
  local b_dst = sbase + A_BYTES + swizzle(brow:shl(8) + bc:shl(4), 4)
  local ws, rs = reg.scalar(T.u32, 0), reg.scalar(T.u32, 0)  -- write / read stage offsets

  --- Advance a stage offset around the ring (add, setp, selp).
  local function next_stage(off)
    ptx.inst.add.u32(off, off, STAGE)
    ptx.inst.selp.b32(off, 0, off, off:eq(S * STAGE))
  end

  --- Issue the copies of the next k-tile into stage ws and advance.
  local function issue()
    local da, db = a_dst + ws, b_dst + ws
    for j = 0, 3 do
      ptx.inst.cp.async.cg.shared.global(ptx.addr(da, j * 2048), ptx.addr(a_src, j * 32 * K * 2), 16)
    end
    for j = 0, 3 do
      ptx.inst.cp.async.cg.shared.global(ptx.addr(db, j * 2048), ptx.addr(b_src, j * 8 * N * 2), 16)
    end
    ptx.inst.add.u64(a_src, a_src, 32 * 2)
    ptx.inst.add.u64(b_src, b_src, 32 * N * 2)
    next_stage(ws)
  end

  -- ldmatrix row addresses. A (.x4): matrix i = lane/8 gives rows
  -- (lane%8) + 8(i%2) at k-chunk i/2 (+2 per k-step: two registers,
  -- since the XOR does not distribute over the add). B (.x4.trans): k-row
  -- (lane%8) + 8(i%2), n-chunk wn*8 + 2np + i/2; k-steps move 16 rows
  -- (4096 bytes, an immediate).
  local i8 = lane:shr(3)
  local lr = lane:band(7) + i8:band(1):shl(3)
  local a_ld, b_ld = {}, {}
  for ks = 0, 1 do
    a_ld[ks] = sbase + wm:shl(12) + swizzle(lr:shl(6) + (i8:shr(1) + 2 * ks):shl(4), 3)
  end
  for np = 0, 3 do
    local chunk = wn:shl(3) + i8:shr(1) + 2 * np
    b_ld[np] = sbase + A_BYTES + swizzle(lr:shl(8) + chunk:shl(4), 4)
  end
  return { pc = pc, sbase = sbase, bm = bm, bn = bn, lane = lane, wm = wm, wn = wn, ws = ws, rs = rs,
           issue = issue, next_stage = next_stage, a_ld = a_ld, b_ld = b_ld }
end

--- Store the f32 accumulators of a warp tile: acc[mi * nj_n + nj] holds
-- rows 16mi + g + 8(r/2), columns 8nj + 2t + {0, 1} of the warp's tile at
-- (bm * cta + wm * warp, bn * cta + wn * warp); one st.global.v2.f32 per pair.
function M.store_acc(pc, N, bm, bn, wm, wn, g, t, cta, warp, mi_n, nj_n, acc)
  local row = bm * cta + wm:shl(math.log(warp, 2)) + g
  local col = bn * cta + wn:shl(math.log(warp, 2)) + t:shl(1)
  local c_ptr = pc + (row * N + col):mul_wide(4)
  for mi = 0, mi_n - 1 do
    for nj = 0, nj_n - 1 do
      local c = acc[mi * nj_n + nj]
      for h = 0, 1 do
        ptx.st.global(ptx.addr(c_ptr, ((16 * mi + 8 * h) * N + 8 * nj) * 4), { c[2 * h], c[2 * h + 1] })
      end
    end
  end
end

--- A pipelined 128x128x32 cp.async + ldmatrix + mma.sync GEMM for (M, N, K).
-- opts: dtype (bf16 default, or f16), stages (3), arch ("sm_80"), name.
function M.build(Md, N, K, opts)
  opts = opts or {}
  local err = M.shape_error(Md, N, K, opts)
  if err then error(err, 2) end
  local dt = opts.dtype or T.bf16
  local S = opts.stages or 3
  local KT = K / 32
  return kernel(opts.name or "gemm_pipelined") {
    arch = opts.arch or "sm_80",
    in_specs = { Tile(Md, K, dt), Tile(K, N, dt) },
    out_specs = { Tile(Md, N, T.f32) },
    grid = { N / M.BN, Md / M.BM, 1 }, block = { 128, 1, 1 },
    function(A, B, C)
      local r = M.ring_setup(A, B, C, N, K, S)
      local lane, rs, a_ld, b_ld, issue, next_stage = r.lane, r.rs, r.a_ld, r.b_ld, r.issue, r.next_stage
      local acc = {}
      for i = 0, 31 do acc[i] = reg.fragments(T.f32, 4, true) end
      local fa, fb = {}, {}
      for mi = 0, 3 do fa[mi] = reg.array(T.b32, 4) end
      for nj = 0, 7 do fb[nj] = reg.array(T.b32, 2) end
      local ra, rb = reg.array(T.u32, 2), reg.array(T.u32, 4)

      --- One k-tile from stage rs: 2 k-steps of 4 + 4 ldmatrix and 32 mma.
      local function compute()
        for ks = 0, 1 do ptx.inst.add.u32(ra[ks], a_ld[ks], rs) end
        for np = 0, 3 do ptx.inst.add.u32(rb[np], b_ld[np], rs) end
        for ks = 0, 1 do
          for mi = 0, 3 do ptx.ldmatrix { d = fa[mi], addr = ptx.addr(ra[ks], mi * 1024) } end
          for np = 0, 3 do
            local d = { fb[2 * np][0], fb[2 * np][1], fb[2 * np + 1][0], fb[2 * np + 1][1] }
            ptx.ldmatrix { d = d, addr = ptx.addr(rb[np], ks * 4096), trans = true }
          end
          for mi = 0, 3 do
            for nj = 0, 7 do
              local c = acc[mi * 8 + nj]
              ptx.mma { shape = "m16n8k16", atype = dt, d = c, a = fa[mi], b = fb[nj], c = c }
            end
          end
        end
        next_stage(rs)
      end

      for _ = 1, S - 1 do
        issue()
        ptx.inst.cp.async.commit_group()
      end
      ptx.range(0, KT, 1, function(kt)
        ptx.inst.cp.async.wait_group(S - 2)
        ptx.bar_sync(0)
        -- Stage (kt-1)%S was read in the previous iteration; the barrier
        -- above means every warp is done with it, so refill it now.
        if KT > S - 1 then ptx.if_(kt:lt(KT - (S - 1)), issue) end
        ptx.inst.cp.async.commit_group()
        compute()
      end)

      -- D register r of (mi, nj): row wm*64 + 16mi + g + 8(r/2), columns
      -- wn*64 + 8nj + 2t + {0, 1}: one st.global.v2.f32 per pair.
      local g, t = lane:shr(2), lane:band(3)
      M.store_acc(r.pc, N, r.bm, r.bn, r.wm, r.wn, g, t, 128, 64, 4, 8, acc)
      ptx.ret()
    end,
  }
end

M.reference, M.inputs, M.args, M.tolerance = simple.reference, simple.inputs, simple.args, simple.tolerance

M.kernels = { M.build(4096, 4096, 4096) }

-- check(M, N, K, opts) and main for `luaptx run examples/ampere/gemm_pipelined.lua [M N K] [f16] [--summary]`
require("examples.lib.runner").install_gemm(M, "gemm_pipelined")

return M
