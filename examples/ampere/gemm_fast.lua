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
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local T = pyptx.types
local simple = require "examples.ampere.gemm"
local pipelined = require "examples.ampere.gemm_pipelined"
local MUTANTS = { "no_wait", "no_barrier", "serpentine", "double_buffer" }

local M = {}

M.BM, M.BN, M.BK = 128, 128, 32

--- Why (Mdim, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(Md, N, K, opts)
  return simple.check_shape("gemm_fast", Md, N, K, opts, { tile = { 128, 128, 32 }, stages = true, mutants = MUTANTS })
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
      local r = pipelined.ring_setup(A, B, C, N, K, S)
      local lane, rs, a_ld, b_ld, issue, next_stage = r.lane, r.rs, r.a_ld, r.b_ld, r.issue, r.next_stage
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
      pipelined.store_acc(r.pc, N, r.bm, r.bn, r.wm, r.wn, g, t, 128, 64, 4, 8, acc)
      ptx.ret()
    end,
  }
end

M.reference, M.inputs, M.args, M.tolerance = simple.reference, simple.inputs, simple.args, simple.tolerance

M.kernels = { M.build(4096, 4096, 4096) }

-- check(M, N, K, opts) and main for `luaptx run examples/ampere/gemm_fast.lua [M N K] [f16] [--summary]`
require("examples.lib.runner").install_gemm(M, "gemm_fast")

return M
