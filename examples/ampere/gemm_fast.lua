--- High-performance GEMM on Ampere tensor cores: C = A * B, A (M x K) and
-- B (K x N) row-major bf16 (or f16), C (M x N) row-major f32.
--
-- gemm_pipelined.lua's structure (128x128x32 CTA tile, 4 warps of 64x64,
-- a cp.async ring of `stages` swizzled buffers, ldmatrix fragments) plus the
-- two register-level tricks of the fast sm_80 kernels:
--  * register double-buffering: the A and B fragments live in two register
--    sets; the ldmatrix of the next k-step (across k-tiles too: k-step 0 of
--    tile kt+1 is loaded while k-step 1 of tile kt multiplies) goes into
--    one set before the 32 mma.sync of the current k-step read the other,
--    so shared-memory latency hides behind tensor-core work;
--  * serpentine MMA order: row mi of the 4 x 8 accumulator grid walks n-tiles
--    0..7 when mi is even and 7..0 when odd, so consecutive mma.sync share
--    an A or a B fragment (operand reuse across the turn).
--
-- opts.mutant (for spec/ampere_gemm_variants_spec.lua only) breaks one thing
-- to show the checks catch it: "no_wait" (the cp.async.wait_group),
-- "no_barrier" (the bar.sync after it), "serpentine" (the reversed n-tile
-- feeds the accumulator of the unreversed one), "double_buffer" (k-step 1
-- is loaded into the register set k-step 0 is about to read).
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
local MUTANTS = { no_wait = true, no_barrier = true, serpentine = true, double_buffer = true }

local M = {}

M.BM, M.BN, M.BK = 128, 128, 32
local A_BYTES, B_BYTES = 128 * 32 * 2, 32 * 128 * 2
local STAGE = A_BYTES + B_BYTES

--- Why (Mdim, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, opts)
  local name = (opts and opts.name) or "gemm_fast"
  for _, p in ipairs { { "M", Md }, { "N", N }, { "K", K } } do
    local v = p[2]
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
      return ("%s: %s must be a positive integer, got %s"):format(name, p[1], tostring(v))
    end
  end
  local stages = (opts and opts.stages) or 3
  if type(stages) ~= "number" or stages < 2 or stages > 6 or stages ~= math.floor(stages) then
    return ("%s: stages must be an integer in [2, 6], got %s"):format(name, tostring(stages))
  end
  if Md % 128 ~= 0 then return ("%s: M %% 128 == 0 is required, got M = %d"):format(name, Md) end
  if N % 128 ~= 0 then return ("%s: N %% 128 == 0 is required, got N = %d"):format(name, N) end
  if K % 32 ~= 0 then return ("%s: K %% 32 == 0 is required, got K = %d"):format(name, K) end
  if K / 32 < stages - 1 then
    return ("%s: K / 32 >= stages - 1 is required, got K = %d, stages = %d"):format(name, K, stages)
  end
  local dt = opts and opts.dtype
  if dt and dt ~= T.bf16 and dt ~= T.f16 then return name .. ": dtype must be bf16 or f16" end
  local mu = opts and opts.mutant
  if mu and not MUTANTS[mu] then
    return name .. ": mutant must be no_wait, no_barrier, serpentine or double_buffer, got " .. tostring(mu)
  end
  return nil
end

--- x ^ ((x >> shift) & 0x70): the XOR swizzle of a tile's byte offset (emits 3).
local function swizzle(x, shift)
  return x:bxor(x:shr(shift):band(0x70))
end

--- The n-tile the j-th mma of accumulator row mi uses: 0..7 forward on even
-- rows, 7..0 backward on odd ones (the serpentine order).
function M.serpentine(mi, j)
  return (mi % 2 == 0) and j or 7 - j
end

--- A 128x128x32 cp.async + double-buffered ldmatrix + serpentine mma.sync GEMM for (M, N, K).
-- opts: dtype (bf16 default, or f16), stages (3), arch ("sm_80"), name, mutant.
function M.build(Md, N, K, opts)
  opts = opts or {}
  local err = M.shape_error(Md, N, K, opts)
  if err then error(err, 2) end
  local dt = opts.dtype or T.bf16
  local S = opts.stages or 3
  local mu = opts.mutant
  local KT = K / 32
  return kernel(opts.name or "gemm_fast") {
    arch = opts.arch or "sm_80",
    in_specs = { Tile(Md, K, dt), Tile(K, N, dt) },
    out_specs = { Tile(Md, N, T.f32) },
    grid = { N / M.BN, Md / M.BM, 1 }, block = { 128, 1, 1 },
    function(A, B, C)
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

      local acc = {}
      for i = 0, 31 do acc[i] = reg.fragments(T.f32, 4, true) end
      -- Two register sets of fragments: set ks%2 holds k-step ks.
      local fa, fb = { [0] = {}, [1] = {} }, { [0] = {}, [1] = {} }
      for set = 0, 1 do
        for mi = 0, 3 do fa[set][mi] = reg.array(T.b32, 4) end
        for nj = 0, 7 do fb[set][nj] = reg.array(T.b32, 2) end
      end
      local ra, rb = reg.array(T.u32, 2), reg.array(T.u32, 4)

      --- ldmatrix the A and B fragments of k-step ks into register set `set`.
      local function load(ks, set)
        for mi = 0, 3 do ptx.ldmatrix { d = fa[set][mi], addr = ptx.addr(ra[ks], mi * 1024) } end
        for np = 0, 3 do
          local b0, b1 = fb[set][2 * np], fb[set][2 * np + 1]
          ptx.ldmatrix { d = { b0[0], b0[1], b1[0], b1[1] }, addr = ptx.addr(rb[np], ks * 4096), trans = true }
        end
      end

      --- The 32 mma.sync of k-step ks from register set `set`, in serpentine order.
      local function mmas(set)
        for mi = 0, 3 do
          for j = 0, 7 do
            local nj = M.serpentine(mi, j)
            local c = acc[mi * 8 + ((mu == "serpentine") and j or nj)]
            ptx.mma { shape = "m16n8k16", atype = dt, d = c, a = fa[set][mi], b = fb[set][nj], c = c }
          end
        end
      end

      --- Point the ldmatrix addresses at stage rs.
      local function point()
        for ks = 0, 1 do ptx.inst.add.u32(ra[ks], a_ld[ks], rs) end
        for np = 0, 3 do ptx.inst.add.u32(rb[np], b_ld[np], rs) end
      end

      --- Wait for the oldest k-tile in flight and make every warp's copies visible.
      local function arrive()
        if mu ~= "no_wait" then ptx.inst.cp.async.wait_group(S - 2) end
        if mu ~= "no_barrier" then ptx.bar_sync(0) end
      end

      for _ = 1, S - 1 do
        issue()
        ptx.inst.cp.async.commit_group()
      end
      arrive()
      point()
      load(0, 0)
      -- Iteration kt: k-step 0 loads k-step 1 into set 1 and multiplies set 0;
      -- k-step 1 waits for tile kt+1, loads its k-step 0 into set 0 and
      -- multiplies set 1. The barrier in between is the last point where
      -- tile kt is read, so the next iteration refills its stage.
      ptx.range(0, KT, 1, function(kt)
        load(1, (mu == "double_buffer") and 0 or 1)
        if KT > S - 1 then ptx.if_(kt:lt(KT - (S - 1)), issue) end
        ptx.inst.cp.async.commit_group()
        mmas(0)
        arrive()
        next_stage(rs)
        point()
        ptx.if_(kt:lt(KT - 1), function() load(0, 0) end)
        mmas(1)
      end)

      -- D register r of (mi, nj): row wm*64 + 16mi + g + 8(r/2), columns
      -- wn*64 + 8nj + 2t + {0, 1}: one st.global.v2.f32 per pair.
      local g, t = lane:shr(2), lane:band(3)
      local row = bm * 128 + wm:shl(6) + g
      local col = bn * 128 + wn:shl(6) + t:shl(1)
      local c_ptr = pc + (row * N + col):mul_wide(4)
      for mi = 0, 3 do
        for nj = 0, 7 do
          local c = acc[mi * 8 + nj]
          for h = 0, 1 do
            ptx.st.global(ptx.addr(c_ptr, ((16 * mi + 8 * h) * N + 8 * nj) * 4), { c[2 * h], c[2 * h + 1] })
          end
        end
      end
      ptx.ret()
    end,
  }
end

M.reference, M.inputs, M.args, M.tolerance = simple.reference, simple.inputs, simple.args, simple.tolerance

M.kernels = { M.build(4096, 4096, 4096) }

-- check(M, N, K, opts) and main for `luaptx run examples/ampere/gemm_fast.lua [M N K] [f16] [--summary]`
require("examples.lib.runner").install_gemm(M, "gemm_fast")

return M
