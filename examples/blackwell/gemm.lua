--- Blackwell GEMM (sm_100a): D = A * B^T with A (M x K) and B (N x K)
-- bf16, both K-major, D (M x N) f32 row-major, on tcgen05.
--
-- Data flow: TMA (cp.async.bulk.tensor.2d, 128B swizzle) fills a ring of
-- STAGES shared-memory stages; one thread issues tcgen05.mma from SMEM
-- descriptors into an f32 accumulator in tensor memory; tcgen05.commit
-- frees a stage (arrive on its `empty` mbarrier) once the MMAs reading it
-- are done, and signals `done` after the last k-block; then all four warps
-- read their 32 TMEM lanes with tcgen05.ld.32x32b.x32 and store D.
--
-- Roles in a CTA of 128 threads: thread 0 is the TMA producer, thread 32
-- the MMA issuer, warp 2 allocates and frees tensor memory.
--
--   cta_group = 1: one CTA computes a 128 x BN tile (tcgen05.mma M = 128).
--   cta_group = 2: a cluster of two CTAs computes a 256 x BN tile with one
--     tcgen05.mma.cta_group::2 (M = 256) issued by the even CTA: each CTA
--     loads 128 rows of A and BN/2 rows of B into its own shared memory;
--     both CTAs' TMA loads complete on the leader's `full` barrier (mapa +
--     .cta_group::2), and tcgen05.commit.multicast::cluster frees the stage
--     in both. Each CTA holds its 128 accumulator rows in its own TMEM.
--
-- The TMA tensor maps are A:tma_desc / B:tma_desc parameters (box 128 x 64
-- for A and BN/cta_group x 64 for B, bf16, 128B swizzle): the runtime
-- encodes them for the device it launches on (cuTensorMapEncodeTiled on a
-- GPU, the emulator's record on the CPU emulator), so `luaptx run` checks
-- the result against a CPU reference on either.
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local L = require "examples.lib.tcgen05_gemm"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

local M = {}
local bf16 = T.bf16

local BM, BK = 128, 64          -- rows of A per CTA, k-block (64 bf16 = one 128-byte swizzle row)
local UMMA_K = 16               -- K of one tcgen05.mma.kind::f16

--- Spin on an mbarrier phase: a label, try_wait.parity and a branch back
-- while it has not completed (ptx.mbarrier.wait: no closure per wait, so
-- the unrolled k-block loop stays JIT-compiled).
local function wait(bar, phase)
  ptx.mbarrier.wait(bar, phase)
end

--- Check the shape constraints; returns an error message or nil.
function M.shape_error(m, n, k, opts)
  local cta = opts.cta_group or 1
  local bn, stages = opts.BN or 256, opts.stages or 4
  for name, v in pairs { M = m, N = n, K = k } do
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then return name .. " must be a positive integer" end
  end
  if cta ~= 1 and cta ~= 2 then return "cta_group must be 1 or 2" end
  if bn % 32 ~= 0 or bn < 64 or bn > 256 then return "BN must be a multiple of 32 in [64, 256]" end
  if m % (BM * cta) ~= 0 then return ("M %% %d == 0 (BM * cta_group)"):format(BM * cta) end
  if n % bn ~= 0 then return ("N %% BN == 0 (BN = %d)"):format(bn) end
  if k % BK ~= 0 then return "K % 64 == 0" end
  if stages < 2 or stages > 8 or bit.band(stages, stages - 1) ~= 0 then return "stages must be 2, 4 or 8" end
  local bytes = stages * (BM + bn / cta) * BK * 2
  if bytes > 200 * 1024 then return ("stages * (BM + BN/cta_group) * BK * 2 <= 200 KiB (got %d)"):format(bytes) end
  return nil
end

--- build(M, N, K[, opts]): opts.cta_group (1 or 2), opts.BN (N per MMA, default
-- 256), opts.stages (pipeline depth, default 4), opts.arch (default sm_100a),
-- opts.unroll (true: the k-block loops unrolled at trace time, stage and
-- phase as immediates, about 30 PTX lines per k-block).
function M.build(m, n, k, opts)
  opts = opts or {}
  local err = M.shape_error(m, n, k, opts)
  if err then error("gemm: " .. err, 2) end
  local cta, BN, S = opts.cta_group or 1, opts.BN or 256, opts.stages or 4
  local unroll = opts.unroll
  local BNL = BN / cta                         -- rows of B each CTA loads
  local A_BYTES, B_BYTES = BM * BK * 2, BNL * BK * 2
  local KT = k / BK
  local log2s = math.floor(math.log(S) / math.log(2) + 0.5)
  return kernel(cta == 1 and "gemm_1sm" or "gemm_2sm") {
    arch = opts.arch or "sm_100a",
    in_specs = { Tile(m, k, bf16), Tile(n, k, bf16) },
    out_specs = { Tile(m, n, T.f32) },
    grid = { m / BM, n / BN, 1 },
    block = { 128, 1, 1 },
    cluster = cta == 2 and { 2, 1, 1 } or nil,
    function(A, B, D)
      local tc = ptx.tcgen05
      local pd = ptx.global_ptrs(D)
      local sA = smem.alloc(T.b8, S * A_BYTES, { align = 1024 })
      local sB = smem.alloc(T.b8, S * B_BYTES, { align = 1024 })
      local full, empty, done = smem.mbarrier(S), smem.mbarrier(S), smem.mbarrier(1)
      local slot = smem.alloc(T.u32, 1)

      local tid = reg.from(ptx.special.tid.x(), T.u32)
      local warp = tid:shr(5)
      local rank = cta == 2 and reg.from(ptx.special.cluster_ctarank(), T.u32) or nil
      local leader = cta == 2 and rank:eq(0) or nil
      local m_cta = reg.from(ptx.special.ctaid.x(), T.u32) * BM      -- this CTA's first row of A and D
      local n_tile = reg.from(ptx.special.ctaid.y(), T.u32) * BN
      local n_load = cta == 2 and n_tile + rank * BNL or n_tile     -- this CTA's first row of B

      -- barriers (thread 0) and tensor memory (warp 2: BN f32 columns)
      ptx.if_(tid:eq(0), function()
        for s = 0, S - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", full[s], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", empty[s], 1)
        end
        ptx.inst("mbarrier.init.shared::cta.b64", done[0], 1)
        -- make the initialized barriers visible to the async proxy (TMA, tcgen05.commit)
        if cta == 2 then ptx.inst("fence.mbarrier_init.release.cluster")
        else ptx.inst("fence.proxy.async.shared::cta") end
      end)
      ptx.if_(warp:eq(2), function()
        tc.alloc { dst = slot, ncols = BN, cta_group = cta }
        tc.relinquish_alloc_permit { cta_group = cta }
      end)
      tc.fence_before_thread_sync()
      L.sync(cta)
      tc.fence_after_thread_sync()
      local taddr = reg.scalar(T.b32)
      ptx.inst.ld.shared.b32(taddr, ptx.addr(slot))

      local full0, empty0, done0 = full:base(), empty:base(), done:base()
      local sA0, sB0 = sA:base(), sB:base()

      -- TMA producer: wait for a free stage, expect its bytes, load A and B
      -- (k-block kt: a register in the ptx.range loop, a Lua number unrolled)
      local function produce(kt)
        local s = unroll and kt % S or kt:band(S - 1)
        local e = empty0 + s * 8
        wait(e, unroll and 1 - bit.band(bit.rshift(kt, log2s), 1) or kt:shr(log2s):band(1):bxor(1))
        local fb = full0 + s * 8
        local kx = unroll and reg.scalar(T.u32, kt * BK) or kt * BK
        if cta == 2 then
          -- both CTAs' loads complete on the leader's barrier
          local lb = reg.scalar(T.u32)
          ptx.inst("mapa.shared::cluster.u32", lb, fb, 0)
          ptx.at(leader).inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), 2 * (A_BYTES + B_BYTES))
          fb = lb
        else
          ptx.inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), A_BYTES + B_BYTES)
        end
        local group = cta == 2 and 2 or nil
        ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sA0 + s * A_BYTES), src = A:tma_desc { box = { BM, BK }, swizzle = "128B" },
                                      coord = { kx, m_cta }, mbar = ptx.addr(fb), cta_group = group }
        ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sB0 + s * B_BYTES), src = B:tma_desc { box = { BNL, BK }, swizzle = "128B" },
                                      coord = { kx, n_load }, mbar = ptx.addr(fb), cta_group = group }
      end
      ptx.if_(tid:eq(0), function()
        if unroll then for kt = 0, KT - 1 do produce(kt) end
        else ptx.range(0, KT, 1, produce) end
      end)

      -- MMA issuer (the leader CTA only with cta_group 2)
      local issuer = tid:eq(32)
      if cta == 2 then issuer = issuer:band(leader) end
      ptx.if_(issuer, function()
        local idesc = reg.scalar(T.b32, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32",
                                                   M = BM * cta, N = BN, cta_group = cta })
        local layout = { sbo = 1024, swizzle = "128B" }     -- 8 rows x 128 B per swizzle atom
        local adesc0, bdesc0 = bw.smem_desc_reg(sA0, layout), bw.smem_desc_reg(sB0, layout)
        local always = tid:eq(32)
        local mask = cta == 2 and reg.scalar(T.b16, 3) or nil
        local never = unroll and always:bnot()   -- accumulate on the first unrolled k-block
        -- one k-block kt (a register in the ptx.range loop, a Lua number unrolled)
        local function consume(kt)
          local s = unroll and kt % S or kt:band(S - 1)
          local f = full0 + s * 8
          wait(f, unroll and bit.band(bit.rshift(kt, log2s), 1) or kt:shr(log2s):band(1))
          tc.fence_after_thread_sync()
          local ad, bd = adesc0, bdesc0
          if not unroll then
            local s64 = s:to(T.u64)
            ad, bd = adesc0 + s64 * (A_BYTES / 16), bdesc0 + s64 * (B_BYTES / 16)
          elseif s > 0 then
            ad, bd = adesc0 + s * (A_BYTES / 16), bdesc0 + s * (B_BYTES / 16)
          end
          local accumulate = unroll and (kt == 0 and never or always) or kt:ne(0)
          for kk = 0, BK / UMMA_K - 1 do
            -- +32 bytes along K inside the 128-byte swizzle row: +2 in the address field
            tc.mma { d = taddr, a = kk == 0 and ad or ad + kk * 2, b = kk == 0 and bd or bd + kk * 2,
                     idesc = idesc, enable_d = kk == 0 and accumulate or always, cta_group = cta }
          end
          tc.commit { mbar = empty0 + s * 8, cta_group = cta, multicast = mask }
        end
        if unroll then for kt = 0, KT - 1 do consume(kt) end
        else ptx.range(0, KT, 1, consume) end
        tc.commit { mbar = done0, cta_group = cta, multicast = mask }
      end)

      -- epilogue: every warp reads its 32 TMEM lanes (= 32 rows of D)
      wait(done0, 0)
      tc.fence_after_thread_sync()
      local row = m_cta + tid
      local prow = pd + (row * n + n_tile):mul_wide(4)
      local lane_base = taddr + warp * bw.tmem_offset(32, 0)
      for c = 0, BN / 32 - 1 do
        local acc, v = reg.array(T.f32, 32), {}
        for i = 0, 31 do v[i + 1] = acc[i] end
        tc.ld { dst = v, taddr = lane_base, shape = "32x32b", num = 32 }
        if c < BN / 32 - 1 then lane_base = lane_base + 32 end
        tc.wait("ld")
        for j = 0, 7 do
          ptx.inst.st.global.v4.f32(ptx.addr(prow, (c * 32 + j * 4) * 4), { v[4 * j + 1], v[4 * j + 2], v[4 * j + 3], v[4 * j + 4] })
        end
      end

      tc.fence_before_thread_sync()
      L.sync(cta)
      ptx.if_(warp:eq(2), function()
        tc.fence_after_thread_sync()
        tc.dealloc { taddr = taddr, ncols = BN, cta_group = cta }
      end)
      ptx.ret()
    end,
  }
end

local to_bf16 = require("pyptx.floats").round_bf16

--- Random inputs in [-1, 1): { a (M x K), b (N x K), M, N, K }.
function M.inputs(m, n, k, seed)
  math.randomseed(seed or 1)
  local a, b = {}, {}
  for i = 1, m * k do a[i] = math.random() * 2 - 1 end
  for i = 1, n * k do b[i] = math.random() * 2 - 1 end
  return { a = a, b = b, M = m, N = n, K = k }
end

--- D = A * B^T in double precision from the bf16 values the kernel reads
-- (A m x k, B n x k, row-major lists).
function M.reference(inp)
  local m, n, k = inp.M, inp.N, inp.K
  local a, b, d = {}, {}, {}
  for i = 1, m * k do a[i] = to_bf16(inp.a[i]) end
  for i = 1, n * k do b[i] = to_bf16(inp.b[i]) end
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local s = 0
      for t = 0, k - 1 do s = s + a[i * k + t + 1] * b[j * k + t + 1] end
      d[i * n + j + 1] = s
    end
  end
  return d
end

--- The tensors a launch takes.
function M.args(inp)
  return { { inp.a, { inp.M, inp.K }, dtype = bf16 }, { inp.b, { inp.N, inp.K }, dtype = bf16 } }
end

--- Per-element tolerance: exact bf16 products, f32 accumulation per k16 MMA.
function M.tolerance(k)
  return { atol = 1e-5 * k, rtol = 1e-3 }
end

--- Build, launch on fresh random inputs, compare every element.
function M.check(m, n, k, opts)
  local check = require "pyptx.tools.verify"
  local kern = M.build(m, n, k, opts)
  local inputs = M.inputs(m, n, k, check.fresh_seed())
  return check.run { kernel = kern, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(k) }
end

M.kernels = { M.build(4096, 4096, 4096), M.build(4096, 4096, 4096, { cta_group = 2 }) }

--- `luaptx run examples/blackwell/gemm.lua [M N K [cta_group [BN [stages]]]] [--summary]`:
-- run at 256x256x128 by default, 1-SM and 2-SM, and check against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local check = require "pyptx.tools.verify"
  local m, n, k = tonumber(args[1]) or 256, tonumber(args[2]) or 256, tonumber(args[3]) or 128
  local groups = args[4] and { tonumber(args[4]) } or { 1, 2 }
  local rc = 0
  for _, cta in ipairs(groups) do
    local opts = { cta_group = cta, BN = tonumber(args[5]), stages = tonumber(args[6]) }
    local ok, report = M.check(m, n, k, opts)
    rc = math.max(rc, check.report(("blackwell gemm(%d, %d, %d, cta_group %d)"):format(m, n, k, cta), ok, report))
  end
  return rc
end

return M
