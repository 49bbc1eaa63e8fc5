--- Blackwell GEMM without TMA (sm_100a): D = A * B^T, A (M x K) and B
-- (N x K) bf16 K-major, D (M x N) f32 row-major, on tcgen05.mma with
-- shared-memory descriptors whose operands the threads copy themselves.
--
-- Each CTA of 128 threads computes a 128 x BN tile over k-blocks of 64
-- (one 128-byte row of bf16 per operand row). The threads copy a k-block
-- of A (128 rows) and B (BN rows) into a stage of shared memory laid out
-- as the canonical K-major UMMA layout with the 128B swizzle, the layout
-- TMA would write: row r at byte r*128, its 16-byte chunk c at chunk
-- c ^ (r % 8), 8-row swizzle atoms 1024 bytes apart (the descriptor's
-- SBO). Thread t copies chunk t % 8 of rows t/8, t/8 + 16, ..., so its
-- swizzled chunk (t % 8) ^ ((t/8) % 8) is computed once.
--
-- opts.copy picks how:
--   "cp.async" (default): cp.async.cg 16-byte copies into a STAGES-deep
--     ring (opts.stages, 2 or 4), one commit group per k-block, STAGES-1
--     k-blocks in flight; per k-block cp.async.wait_group STAGES-1;
--   "ld_st": ld.global.v4 into registers, st.shared.v4 into the stage.
-- Then every thread fences the generic-proxy writes for the async proxy
-- (fence.proxy.async.shared::cta; tcgen05.mma reads shared memory through
-- it), bar.sync, and thread 0 issues the four K = 16 MMAs with
-- tcgen05.fence::after_thread_sync before them and tcgen05.commit to the
-- stage's `empty` mbarrier after; a stage is refilled only after every
-- thread waited on that mbarrier (the MMAs reading it are done). A last
-- commit to `done` releases the epilogue: every warp reads its 32 TMEM
-- lanes (tcgen05.ld.32x32b) and stores its rows of D.
--
-- Shape rules: M % 128 == 0, N % BN == 0, K % 64 == 0, BN in {64, 128,
-- 256}.
--
-- opts.mutant plants one bug, for spec/blackwell_gemms_spec.lua: "no_swizzle"
-- (chunks stored unswizzled, the descriptor still 128B), "no_proxy_fence",
-- "no_commit" (no tcgen05.commit freeing a stage), "no_empty_wait" (a
-- stage refilled while its MMAs may read it), "no_done_wait" (the
-- epilogue reads TMEM without waiting on `done`), "no_fence" (no
-- tcgen05.fence::after_thread_sync before the MMAs).
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local L = require "examples.lib.tcgen05_gemm"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local bf16, u32 = T.bf16, T.u32

local BM, BK, UMMA_K = 128, 64, 16

-- opts.mutant values
local MUTANTS = { "no_swizzle", "no_proxy_fence", "no_commit", "no_empty_wait", "no_done_wait", "no_fence" }

--- Why (m, n, k, opts) breaks the shape rules, or nil.
function M.shape_error(m, n, k, opts)
  local err = L.dims_error({ M = m, N = n, K = k }, opts, MUTANTS)
  if err then return err end
  local bn, stages, copy = opts.BN or 128, opts.stages or 2, opts.copy or "cp.async"
  if bn ~= 64 and bn ~= 128 and bn ~= 256 then return "BN must be 64, 128 or 256" end
  if copy ~= "cp.async" and copy ~= "ld_st" then return 'copy must be "cp.async" or "ld_st"' end
  if stages ~= 2 and stages ~= 4 then return "stages must be 2 or 4" end
  return L.tile_error(m, n, k, bn)
end

--- build(M, N, K[, opts]): opts.BN (128), opts.copy ("cp.async" or
-- "ld_st"), opts.stages (2; cp.async only), opts.arch (sm_100a), opts.name
-- (gemm_no_tma, gemm_no_tma_ldst), opts.mutant (above).
function M.build(m, n, k, opts)
  opts = opts or {}
  local err = M.shape_error(m, n, k, opts)
  if err then error("gemm_no_tma: " .. err, 2) end
  local BN, copy, mu = opts.BN or 128, opts.copy or "cp.async", opts.mutant
  local S = copy == "ld_st" and 1 or (opts.stages or 2)
  local A_BYTES, B_BYTES = BM * BK * 2, BN * BK * 2
  local KT = k / BK
  local logS = S == 1 and 0 or math.floor(math.log(S) / math.log(2) + 0.5)
  return kernel(opts.name or (copy == "ld_st" and "gemm_no_tma_ldst" or "gemm_no_tma")) {
    arch = opts.arch or "sm_100a",
    in_specs = { Tile(m, k, bf16), Tile(n, k, bf16) },
    out_specs = { Tile(m, n, T.f32) },
    grid = { m / BM, n / BN, 1 },
    block = { 128, 1, 1 },
    function(A, B, D)
      local tc = ptx.tcgen05
      local pa, pb, pd = ptx.global_ptrs(A, B, D)
      local sA = smem.alloc(T.b8, S * A_BYTES, { align = 1024 })
      local sB = smem.alloc(T.b8, S * B_BYTES, { align = 1024 })
      local empty, done = smem.mbarrier(S), smem.mbarrier(1)
      local slot = smem.alloc(T.u32, 1)

      local tid = reg.from(ptx.special.tid.x(), u32)
      local warp = tid:shr(5)
      local m0 = reg.from(ptx.special.ctaid.x(), u32) * BM
      local n0 = reg.from(ptx.special.ctaid.y(), u32) * BN

      ptx.if_(tid:eq(0), function()
        for s = 0, S - 1 do ptx.inst("mbarrier.init.shared::cta.b64", empty[s], 1) end
        ptx.inst("mbarrier.init.shared::cta.b64", done[0], 1)
        ptx.inst("fence.mbarrier_init.release.cluster")   -- the barriers, visible to tcgen05.commit
      end)
      local taddr = L.tmem_alloc(warp, 0, slot, BN)
      local empty0, sA0, sB0 = empty:base(), sA:base(), sB:base()

      -- this thread's rows r0 + 16i and 16-byte chunk c, and where the chunk goes
      local r0, c = tid:shr(3), tid:band(7)
      local sc = mu == "no_swizzle" and c or c:bxor(r0:band(7))     -- the 128B swizzle: chunk ^ (row % 8)
      local a_src = pa + ((m0 + r0) * k + c * 8):mul_wide(2)          -- bf16 elements -> bytes
      local b_src = pb + ((n0 + r0) * k + c * 8):mul_wide(2)
      local dst_off = r0 * 128 + sc * 16

      --- Copy k-block kt into stage s (each a register or a number).
      local function load(kt, s)
        local a_dst = s == 0 and sA0 + dst_off or sA0 + dst_off + s * A_BYTES
        local b_dst = s == 0 and sB0 + dst_off or sB0 + dst_off + s * B_BYTES
        local koff = type(kt) == "number" and kt * BK * 2 or (kt * (BK * 2)):to(T.u64)
        local a_k, b_k = a_src + koff, b_src + koff
        for _, op in ipairs { { a_k, a_dst, BM }, { b_k, b_dst, BN } } do
          for i = 0, op[3] / 16 - 1 do
            local src, dst = ptx.addr(op[1], i * 16 * k * 2), ptx.addr(op[2], i * 16 * 128)
            if copy == "cp.async" then
              ptx.inst.cp.async.cg.shared.global(dst, src, 16)
            else
              local v = reg.array(T.b32, 4)
              ptx.inst.ld.global.v4.b32({ v[0], v[1], v[2], v[3] }, src)
              ptx.inst.st.shared.v4.b32(dst, { v[0], v[1], v[2], v[3] })
            end
          end
        end
      end

      --- Wait until the MMAs that read stage s for k-block `next` - S are done
      -- (the first S k-blocks pass at once: parity 1 of a fresh barrier).
      local function free_stage(nxt, s)
        if mu ~= "no_empty_wait" then L.wait(empty0 + s * 8, nxt:shr(logS):band(1):bxor(1)) end
      end

      -- prologue: k-blocks 0 .. S-2 in flight, one group each
      for p = 0, S - 2 do
        if p < KT then load(p, p) end
        ptx.inst.cp.async.commit_group()
      end

      local issuer = tid:eq(0)
      local idesc = reg.scalar(T.b32, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = BM, N = BN })
      local layout = { sbo = 1024, swizzle = "128B" }     -- 8 rows x 128 B per swizzle atom
      local adesc0, bdesc0 = bw.smem_desc_reg(sA0, layout), bw.smem_desc_reg(sB0, layout)
      ptx.range(0, KT, 1, function(kt)
        local s = S == 1 and 0 or kt:band(S - 1)
        if copy == "cp.async" then
          -- refill the stage k-block kt-1 used with k-block kt+S-1
          local nxt = kt + (S - 1)
          ptx.if_(nxt:lt(KT), function()
            local ns = nxt:band(S - 1)
            free_stage(nxt, ns)
            load(nxt, ns)
          end)
          ptx.inst.cp.async.commit_group()                  -- possibly empty: keeps the group count regular
          ptx.inst.cp.async.wait_group(S - 1)               -- k-block kt's copies have landed
        else
          free_stage(kt, 0)
          load(kt, 0)
        end
        if mu ~= "no_proxy_fence" then ptx.inst("fence.proxy.async.shared::cta") end
        ptx.bar_sync(0)
        ptx.if_(issuer, function()
          if mu ~= "no_fence" then tc.fence_after_thread_sync() end
          local ad, bd = adesc0, bdesc0
          if S > 1 then
            local s64 = s:to(T.u64)
            ad, bd = adesc0 + s64 * (A_BYTES / 16), bdesc0 + s64 * (B_BYTES / 16)
          end
          local accumulate = kt:ne(0)
          for kk = 0, BK / UMMA_K - 1 do
            -- +32 bytes along K inside the 128-byte swizzle row: +2 in the address field
            tc.mma { d = taddr, a = kk == 0 and ad or ad + kk * 2, b = kk == 0 and bd or bd + kk * 2,
                     idesc = idesc, enable_d = kk == 0 and accumulate or issuer }
          end
          if mu ~= "no_commit" then tc.commit { mbar = empty0 + s * 8 } end
        end)
      end)
      ptx.if_(issuer, function() tc.commit { mbar = done:base() } end)

      -- epilogue: every warp reads its 32 TMEM lanes (= 32 rows of D)
      if mu ~= "no_done_wait" then L.wait(done:base(), 0) end
      tc.fence_after_thread_sync()
      local prow = pd + ((m0 + tid) * n + n0):mul_wide(4)
      L.store_row(taddr + warp * bw.tmem_offset(32, 0), prow, BN)

      L.tmem_dealloc(warp, 0, taddr, BN)
      ptx.ret()
    end,
  }
end

M.inputs, M.reference, M.args, M.tolerance = L.inputs, L.reference, L.args, L.tolerance

--- Build, launch on fresh random inputs, compare every element.
function M.check(m, n, k, opts)
  return L.check(M.build(m, n, k, opts), m, n, k)
end

M.kernels = { M.build(4096, 4096, 4096), M.build(4096, 4096, 4096, { copy = "ld_st", BN = 256 }) }

--- `luaptx run examples/blackwell/gemm_no_tma.lua [M N K [BN [stages]]] [--summary]`:
-- by default 256x256x256, cp.async and ld_st, checked against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local verify = require "pyptx.tools.verify"
  local m, n, k = tonumber(args[1]) or 256, tonumber(args[2]) or 256, tonumber(args[3]) or 256
  local rc = 0
  for _, copy in ipairs { "cp.async", "ld_st" } do
    local ok, report = M.check(m, n, k, { copy = copy, BN = tonumber(args[4]), stages = tonumber(args[5]) })
    rc = math.max(rc, verify.report(("blackwell gemm_no_tma(%d, %d, %d, %s)"):format(m, n, k, copy), ok, report))
  end
  return rc
end

return M
