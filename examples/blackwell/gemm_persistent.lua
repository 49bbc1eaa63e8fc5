--- Persistent Blackwell GEMM (sm_100a): D = A * B^T, A (M x K) and B
-- (N x K) bf16 K-major, D (M x N) row-major, f32 or (opts.out = "bf16")
-- bf16, on tcgen05.
--
-- The grid is persistent: P CTAs (opts.ctas; default min(tiles, 148), the
-- SM count of a B200) walk the 128 x BN output tiles t = ctaid.x,
-- ctaid.x + P, ... . The tile scheduler is a trace-time formula: CTA c
-- owns ceil((tiles - c) / P) tiles, its j-th is t = c + j*P, and t
-- rasterises grouped (swizzled): the m-blocks fall in bands of G =
-- opts.group (default 8) and t walks band b = t / (G * NT) column-major,
-- m-block b*G + r % g, n-block r / g (r = t mod G*NT, g = min(G, MT - b*G)
-- the band's height, NT = N/BN), so the P tiles in flight at once read G
-- blocks of A and about P/G of B from L2 instead of P of A (G >= M/128:
-- plain column-major).
--
-- Roles in a CTA of 192 threads (6 warps):
--   thread 0 (warp 0)   TMA producer: a STAGES-deep full/empty ring of A
--                       and B k-blocks (128B swizzle) whose position runs
--                       on across tiles (k-block number j*K/64 + kt);
--   thread 32 (warp 1)  MMA issuer; warp 1 also allocates and frees TMEM;
--   warps 2..5          epilogue: warp w reads TMEM lanes 32*(w%4).. (the
--                       quarter its warp id allows), 32 rows of D, with
--                       tcgen05.ld.32x32b.x128 (opts.ld columns a load:
--                       the widest that divides BN unless given).
-- An f32 D is stored from registers (st.global.v4). A bf16 D goes through
-- shared memory and TMA: each epilogue warp converts its 32 rows
-- (cvt.rn.bf16x2), writes them to its own 32 x BN staging tile in the
-- 128B-swizzled layout (16-byte chunk c of row r at c ^ (r % 8): no bank
-- conflicts), fences the async proxy, and its lane 0 stores 32 x 64 boxes
-- with cp.async.bulk.tensor (bulk group) that run on while the warp
-- waits for its next tile; before it overwrites the staging tile lane 0
-- waits (wait_group.read 0) until the previous tile's stores have read it.
-- The f32 accumulator lives in tensor memory, ACC (opts.acc: 1 or 2)
-- buffers of BN columns reused tile after tile: the MMA issuer waits on
-- acc_empty[a] (every epilogue thread arrives after its tcgen05.wait::ld
-- and a tcgen05.fence::before_thread_sync), fences with
-- tcgen05.fence::after_thread_sync, runs the tile's MMAs (tcgen05.commit
-- to empty[s] frees each stage) and commits to acc_full[a]; the epilogue
-- waits on acc_full[a], fences after, reads and stores. With two buffers
-- the epilogue of tile j overlaps the MMAs of tile j+1.
--
-- opts.cta_group = 2: the 2-SM form. Clusters of two CTAs (P even, P/2
-- clusters walking the tiles as above) compute 256 x BN tiles with
-- tcgen05.mma.cta_group::2 (M = 256) issued by the even CTA (the leader):
-- each CTA loads its 128 rows of A and BN/2 rows of B into its own ring,
-- both CTAs' loads complete on the leader's full[s] (mapa,
-- .cta_group::2; the leader expects both halves' bytes), and the
-- leader's tcgen05.commit.multicast::cluster frees stage s and fills
-- acc_full[a] in both CTAs. Each CTA's epilogue reads its own TMEM (its
-- 128 rows of the tile) and stores them; its threads arrive on the
-- leader's acc_empty[a] (256 arrivals: both CTAs') through mapa, so the
-- leader reuses a buffer only when both halves are read. TMEM is
-- allocated and freed with .cta_group::2 around cluster barriers.
--
-- Shape rules: M % 128 == 0 (256 with cta_group 2), N % BN == 0, K % 64
-- == 0, BN in {64, 128, 256} (ACC * BN <= 512 TMEM columns), stages 2, 4
-- or 8, group >= 1,
-- ld 32, 64 or 128 dividing BN; a bf16 D's staging (128 * BN * 2 bytes)
-- fits beside the ring within 224 KiB; with cta_group 2, ctas even and
-- the ring holds BN/2 rows of B a stage.
--
-- opts.mutant plants one bug, for spec/blackwell_gemms_spec.lua to show
-- the emulator catches it: "no_swizzle" (MMA descriptors without the
-- 128B swizzle TMA wrote), "no_acc_wait" (the MMA issuer reuses an
-- accumulator without waiting on acc_empty), "no_acc_commit" (no
-- tcgen05.commit to acc_full), "no_full_wait" (MMAs before the stage's
-- TMA load completed), "no_fence" (no tcgen05.fence::after_thread_sync
-- in the epilogue after its acc_full wait), "raster_tail" (the last,
-- partial band of m-blocks taken as G high), "ld_col" (each TMEM load
-- after the first reads ld/2 columns too early), and with a bf16 D
-- "no_store_wait" (the staging tile rewritten while a TMA store may still
-- read it), "no_store_fence" (no fence.proxy.async before the TMA store);
-- with cta_group 2 "no_peer_release" (acc_empty counts the leader's
-- epilogue only: the peer's half may be overwritten while it is read)
-- and "no_multicast" (acc_full committed to the leader only: the peer's
-- epilogue waits forever).
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
local MUTANTS = { "no_swizzle", "no_acc_wait", "no_acc_commit", "no_full_wait", "no_fence", "raster_tail", "ld_col",
                  "no_store_wait", "no_store_fence", "no_peer_release", "no_multicast" }

--- Why (m, n, k, opts) breaks the shape rules, or nil.
function M.shape_error(m, n, k, opts)
  local err = L.dims_error({ M = m, N = n, K = k }, opts, MUTANTS)
  if err then return err end
  local bn, stages, acc, cg = opts.BN or 128, opts.stages or 4, opts.acc or 2, opts.cta_group or 1
  if bn ~= 64 and bn ~= 128 and bn ~= 256 then return "BN must be 64, 128 or 256" end
  if acc ~= 1 and acc ~= 2 then return "acc must be 1 or 2" end
  if cg ~= 1 and cg ~= 2 then return "cta_group must be 1 or 2" end
  if cg == 2 and m % (2 * BM) ~= 0 then return "M % 256 == 0 with cta_group 2" end
  if cg == 2 and opts.ctas ~= nil and opts.ctas % 2 ~= 0 then return "ctas must be even with cta_group 2" end
  err = L.tile_error(m, n, k, bn) or L.ring_error(stages, bn / cg)
  if err then return err end
  for _, key in ipairs { "ctas", "group" } do
    local v = opts[key]
    if v ~= nil and (type(v) ~= "number" or v < 1 or v ~= math.floor(v)) then return key .. " must be a positive integer" end
  end
  local ld = opts.ld
  if ld ~= nil and ld ~= 32 and ld ~= 64 and ld ~= 128 or bn % (ld or 32) ~= 0 then return "ld must be 32, 64 or 128 and divide BN" end
  local out = opts.out or "f32"
  if out ~= "f32" and out ~= "bf16" then return 'out must be "f32" or "bf16"' end
  local bytes = stages * (BM + bn / cg) * BK * 2 + BM * bn * 2
  if out == "bf16" and bytes > 224 * 1024 then
    return ("stages * (128 + BN/cta_group) * 64 * 2 + 128 * BN * 2 <= 224 KiB with a bf16 D (got %d)"):format(bytes)
  end
  return nil
end

--- a / b rounded down: integer division of u32 registers, or of numbers.
local function idiv(a, b)
  if type(a) == "number" then return math.floor(a / b) end
  return a / b
end

--- The grouped raster: tile t's (m-block, n-block) with mt x nt tiles in
-- bands of g m-blocks (g <= mt). t: a u32 register in the kernel, or a
-- number (the host's view of the same order); mutant as in build.
function M.raster(t, mt, nt, g, mutant)
  local band = idiv(t, g * nt)
  local r, first = t - band * (g * nt), band * g
  local h = g                                   -- the band's height: g, or fewer in a last partial band
  if mt % g ~= 0 and mutant ~= "raster_tail" then
    h = type(first) == "number" and math.min(mt - first, g) or (mt - first):min(g)
  end
  return first + r % h, idiv(r, h)
end

--- bar.warp.sync over the whole warp: orders its lanes' shared-memory
-- accesses (and fences) before the ones after it.
local function warp_sync() ptx.inst("bar.warp.sync", 0xffffffff) end

--- The bf16 epilogue of the epilogue warp with TMEM lane quarter q (lane
-- l of it): its 32 x BN staging tile at sD0 + q*32*BN*2, BN/64 boxes of
-- 32 rows x 128 bytes (4 KiB, 128B-swizzled), stored to D by lane 0.
-- Returns reuse(), fill(acc, release), store(row0, n0) and drain().
local function bf16_epilogue(D, sD0, q, l, BN, LD, mu)
  local E = {}
  local region = sD0 + q * (32 * BN * 2)
  local row, x = region + l * 128, l:band(7):shl(4)
  local at = {}                                  -- chunk ch of row l lands at chunk ch ^ (l % 8)
  for ch = 0, 7 do at[ch] = ch == 0 and row + x or row + x:bxor(ch * 16) end
  local leader = l:eq(0)
  local desc = D:tma_desc { box = { 32, 64 }, swizzle = "128B" }
  local step = mu == "ld_col" and LD / 2 or LD

  --- Before the staging tile is rewritten: lane 0 waits until the last
  -- tile's TMA stores have read it.
  function E.reuse()
    if mu ~= "no_store_wait" then ptx.if_(leader, function() ptx.cp.async.bulk.wait_group_read(0) end) end
    warp_sync()
  end
  --- Read the accumulator at TMEM address acc (release() right after the
  -- last load completes), convert to bf16 and write the staging tile, then
  -- fence the writes to the async proxy for the TMA store.
  function E.fill(acc, release)
    L.read_row(acc, BN, function(v, c0)
      if c0 == BN - LD then release() end
      for g = 0, LD / 8 - 1 do
        local col, r = c0 + 8 * g, reg.array(T.b32, 4)
        for i = 0, 3 do ptx.inst.cvt.rn.bf16x2.f32(r[i], v[8 * g + 2 * i + 2], v[8 * g + 2 * i + 1]) end   -- high half: odd column
        ptx.inst.st.shared.v4.b32(ptx.addr(at[col % 64 / 8], math.floor(col / 64) * 4096), { r[0], r[1], r[2], r[3] })
      end
    end, LD, step)
    if mu ~= "no_store_fence" then ptx.fence.proxy_async("shared::cta") end
    warp_sync()
  end
  --- Lane 0 stores the staging tile to rows row0.. and columns n0.. of D.
  function E.store(row0, n0)
    ptx.if_(leader, function()
      for b = 0, BN / 64 - 1 do
        ptx.cp.async.bulk.tensor_2d { dst = desc, src = ptx.addr(region + b * 4096), coord = { n0 + 64 * b, row0 } }
      end
      ptx.cp.async.bulk.commit_group()
    end)
  end
  --- The last stores complete before the CTA exits.
  function E.drain() ptx.if_(leader, function() ptx.cp.async.bulk.wait_group(0) end) end
  return E
end

--- log2 of a power of two.
local function log2(v) return math.floor(math.log(v) / math.log(2) + 0.5) end

--- build(M, N, K[, opts]): opts.BN (128), opts.stages (4), opts.acc (TMEM
-- accumulator buffers, 2), opts.ctas (the persistent grid, default
-- min(tiles, 148)), opts.group (raster band height in m-blocks, 8),
-- opts.ld (columns a tcgen05.ld), opts.out ("f32" or "bf16"),
-- opts.cta_group (1, or 2: the 2-SM form), opts.arch (sm_100a), opts.name
-- (gemm_persistent[_2sm]_bnBN[_bf16]), opts.mutant (above).
function M.build(m, n, k, opts)
  opts = opts or {}
  local err = M.shape_error(m, n, k, opts)
  if err then error("gemm_persistent: " .. err, 2) end
  local BN, S, ACC, CG = opts.BN or 128, opts.stages or 4, opts.acc or 2, opts.cta_group or 1
  local BNL = BN / CG                           -- rows of B a CTA loads
  local A_BYTES, B_BYTES = BM * BK * 2, BNL * BK * 2
  local KT, MT, NT = k / BK, m / (BM * CG), n / BN
  local TILES = MT * NT
  local G = math.min(opts.group or 8, MT)
  local LD = opts.ld or L.ld_cols(BN)
  local BF16 = opts.out == "bf16"
  local P = math.min(opts.ctas or SMS, TILES * CG)
  local PC = P / CG                             -- clusters (CTAs with cta_group 1)
  local NCOLS = math.max(32, ACC * BN)
  local logS = log2(S)
  local mu = opts.mutant
  return kernel(opts.name or ("gemm_persistent%s_bn%d%s"):format(CG == 2 and "_2sm" or "", BN, BF16 and "_bf16" or "")) {
    arch = opts.arch or "sm_100a",
    in_specs = { Tile(m, k, bf16), Tile(n, k, bf16) },
    out_specs = { Tile(m, n, BF16 and bf16 or T.f32) },
    grid = { P, 1, 1 },
    cluster = CG == 2 and { 2, 1, 1 } or nil,
    block = { 192, 1, 1 },
    maxnreg = 232,                  -- without it ptxas holds to 64 registers; an .x128 load takes 128
    function(A, B, D)
      local tc = ptx.tcgen05
      local sA = smem.alloc(T.b8, S * A_BYTES, { align = 1024 })
      local sB = smem.alloc(T.b8, S * B_BYTES, { align = 1024 })
      local full, empty = smem.mbarrier(S), smem.mbarrier(S)
      local acc_full, acc_empty = smem.mbarrier(ACC), smem.mbarrier(ACC)
      local slot = smem.alloc(T.u32, 1)
      local sD = BF16 and smem.alloc(T.b8, BM * BN * 2, { align = 1024 }) or nil   -- 4 warps x 32 rows x BN bf16

      local tid = reg.from(ptx.special.tid.x(), u32)
      local warp = tid:shr(5)
      local cta = reg.from(ptx.special.ctaid.x(), u32)
      local rank = CG == 2 and reg.from(ptx.special.cluster_ctarank(), u32) or nil
      local leader = CG == 2 and rank:eq(0) or nil
      local cid = CG == 2 and cta:shr(1) or cta    -- this CTA's cluster
      local mine = ((TILES + PC - 1) - cid) / PC   -- ceil((TILES - cid) / PC) tiles for this cluster
      --- The leader's copy of this CTA's shared address addr (cta_group 2).
      local function at_leader(addr)
        local r = reg.scalar(u32)
        ptx.inst("mapa.shared::cluster.u32", r, addr, 0)
        return r
      end

      ptx.if_(tid:eq(0), function()
        for s = 0, S - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", full[s], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", empty[s], 1)
        end
        for a = 0, ACC - 1 do
          ptx.inst("mbarrier.init.shared::cta.b64", acc_full[a], 1)
          ptx.inst("mbarrier.init.shared::cta.b64", acc_empty[a], mu == "no_peer_release" and 128 or 128 * CG)   -- every epilogue thread
        end
        -- the barriers, visible to TMA and tcgen05.commit (and to the peer CTA)
        if CG == 2 then ptx.inst("fence.mbarrier_init.release.cluster") else ptx.inst("fence.proxy.async.shared::cta") end
      end)
      local taddr = L.tmem_alloc(warp, 1, slot, NCOLS, CG)

      local full0, empty0, sA0, sB0 = full:base(), empty:base(), sA:base(), sB:base()
      local accf0, acce0 = acc_full:base(), acc_empty:base()

      --- The j-th tile of this CTA: its first row of A/D and the tile's first column (grouped raster, above).
      local function tile(j)
        local mb, nb = M.raster(cid + j * PC, MT, NT, G, mu)
        if CG == 2 then return rank:fma(BM, mb * (2 * BM)), nb * BN end
        return mb * BM, nb * BN
      end
      --- Accumulator buffer of local tile j and the parity of its use.
      local function acc_of(j)
        if ACC == 1 then return 0, j:band(1) end
        return j:band(1), j:shr(1):band(1)
      end

      -- TMA producer: k-block number it = j*KT + kt walks the ring across tiles
      ptx.if_(tid:eq(0), function()
        local descA, descB = A:tma_desc { box = { BM, BK }, swizzle = "128B" }, B:tma_desc { box = { BNL, BK }, swizzle = "128B" }
        local group = CG == 2 and 2 or nil
        ptx.range(0, mine, 1, function(j)
          local m0, n0 = tile(j)
          if CG == 2 then n0 = rank:fma(BNL, n0) end    -- this CTA's half of B
          ptx.range(0, KT, 1, function(kt)
            local it = j * KT + kt
            local s = it:band(S - 1)
            L.wait(empty0 + s * 8, it:shr(logS):band(1):bxor(1))
            local fb = full0 + s * 8
            if CG == 2 then                             -- both CTAs' loads complete on the leader's barrier
              ptx.at(leader).inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), 2 * (A_BYTES + B_BYTES))
              fb = at_leader(fb)
            else
              ptx.inst("mbarrier.arrive.expect_tx.shared::cta.b64", ptx.sink, ptx.addr(fb), A_BYTES + B_BYTES)
            end
            local kx = kt * BK
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sA0 + s * A_BYTES), src = descA, coord = { kx, m0 }, mbar = ptx.addr(fb),
                                          cta_group = group }
            ptx.cp.async.bulk.tensor_2d { dst = ptx.addr(sB0 + s * B_BYTES), src = descB, coord = { kx, n0 }, mbar = ptx.addr(fb),
                                          cta_group = group }
          end)
        end)
      end)

      -- MMA issuer (the leader CTA's only with cta_group 2)
      ptx.if_(CG == 2 and tid:eq(32):band(leader) or tid:eq(32), function()
        local idesc = reg.scalar(T.b32, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = BM * CG, N = BN,
                                                   cta_group = CG })
        local mask = CG == 2 and reg.scalar(T.b16, 3) or nil   -- both CTAs of the pair
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
                       idesc = idesc, enable_d = kk == 0 and accumulate or always, cta_group = CG }
            end
            tc.commit { mbar = empty0 + s * 8, cta_group = CG, multicast = mask }   -- the stage is free once these MMAs are done
          end)
          if mu ~= "no_acc_commit" then                -- the tile's accumulator is complete
            tc.commit { mbar = accf0 + a * 8, cta_group = CG, multicast = mu ~= "no_multicast" and mask or nil }
          end
        end)
      end)

      -- epilogue: warps 2..5, warp w reads lanes 32*(w%4).. = rows of its quarter
      ptx.if_(warp:ge(2), function()
        local quarter, lane = warp:band(3), tid:band(31)
        local lanes = taddr + quarter * bw.tmem_offset(32, 0)
        local E = BF16 and bf16_epilogue(D, sD:base(), quarter, lane, BN, LD, mu)
        local pd = not BF16 and ptx.global_ptrs(D)
        local acce = CG == 2 and mu ~= "no_peer_release" and at_leader(acce0) or acce0   -- the leader's acc_empty
        local arrive = CG == 2 and mu ~= "no_peer_release" and "mbarrier.arrive.shared::cluster.b64" or "mbarrier.arrive.shared::cta.b64"
        ptx.range(0, mine, 1, function(j)
          local m0, n0 = tile(j)
          local a, phase = acc_of(j)
          local acc = ACC == 1 and lanes or lanes + a * BN
          local function release()
            tc.fence_before_thread_sync()            -- our tcgen05.ld are ordered before the arrive
            if mu == "no_peer_release" then          -- the peer does not arrive: only the leader's 128
              if CG == 2 then ptx.if_(leader, function() L.arrive(acce0 + a * 8) end) else L.arrive(acce0 + a * 8) end
            else
              ptx.inst(arrive, ptx.sink, ptx.addr(acce + a * 8))
            end
          end
          if E then E.reuse() end                    -- the last tile's stores have long read the staging tile
          L.wait(accf0 + a * 8, phase)
          if mu ~= "no_fence" then tc.fence_after_thread_sync() end
          if E then
            E.fill(acc, release)
            E.store(m0 + quarter * 32, n0)
          else
            L.store_row(acc, pd + ((m0 + quarter * 32 + lane) * n + n0):mul_wide(4), BN, LD, mu == "ld_col" and LD / 2 or LD)
            release()
          end
        end)
        if E then E.drain() end
      end)

      L.tmem_dealloc(warp, 1, taddr, NCOLS, CG)
      ptx.ret()
    end,
  }
end

M.inputs, M.reference, M.args, M.tolerance = L.inputs, L.reference, L.args, L.tolerance

--- Build, launch on fresh random inputs, compare every element.
function M.check(m, n, k, opts)
  return L.check(M.build(m, n, k, opts), m, n, k, nil, opts and opts.out)
end

M.kernels = { M.build(4096, 4096, 4096), M.build(8192, 8192, 4096, { BN = 256, stages = 4 }),
              M.build(8192, 8192, 4096, { out = "bf16" }), M.build(8192, 8192, 4096, { cta_group = 2, BN = 256, out = "bf16" }) }

--- `luaptx run examples/blackwell/gemm_persistent.lua [M N K [ctas [BN [stages [acc [out]]]]]]] [--summary]`:
-- by default 512x256x256 on 3 CTAs (8 tiles: 3, 3 and 2 per CTA), checked
-- against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local verify = require "pyptx.tools.verify"
  local m, n, k = tonumber(args[1]) or 512, tonumber(args[2]) or 256, tonumber(args[3]) or 256
  local opts = { ctas = tonumber(args[4]) or 3, BN = tonumber(args[5]), stages = tonumber(args[6]), acc = tonumber(args[7]),
                 out = args[8] }
  local ok, report = M.check(m, n, k, opts)
  return verify.report(("blackwell gemm_persistent(%d, %d, %d, %d CTAs%s)"):format(m, n, k, math.min(opts.ctas, m / BM * n / (opts.BN or 128)),
    opts.out and ", " .. opts.out .. " D" or ""), ok, report)
end

return M
