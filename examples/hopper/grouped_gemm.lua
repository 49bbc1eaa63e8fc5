--- Hopper grouped GEMM for mixture-of-experts shapes: G groups, group g
-- multiplies its own M_g rows of A by its own weight B_g:
--   C[r, N] (f32) = A[r, K] (bf16) * B_g[N, K]^T (bf16)   for r in group g.
-- A and C stack the groups' rows (group g starts at row off_g = M_0 + ... +
-- M_{g-1}, as a token-sorted MoE batch does); B stacks the G weights (G*N
-- rows of K, each K-major as a weight matrix usually is).
--
-- The structure of examples/hopper/gemm.lua: a CTA of three warpgroups,
-- warpgroup 0 a TMA producer (one thread), warpgroups 1 and 2 wgmma
-- consumers of 64 rows each (tma_pipeline's Consumer:mainloop: one wgmma
-- group in flight), around a STAGES-deep full/empty mbarrier ring
-- (examples/lib/tma_pipeline.lua) whose position runs on across tiles. The grid is persistent: P CTAs
-- walk the (group, tile) pairs t = ctaid.x, ctaid.x + P, ... in order
-- (group 0's tiles first, each group's tiles row-major over its
-- ceil(M_g / BM) x N/BN grid). The scheduler finds a tile's group by
-- comparing t with the groups' first tile indices (G - 1 setp + guarded
-- movs, the group sizes being trace-time constants), then its rows and
-- columns inside the group.
--
-- A group's row count need not be a multiple of BM: the last m-tile of a
-- group loads a full BM-row box of A from row off_g + m0 (the rows past the
-- group are the next group's or, past the end of A, TMA's zero fill), and
-- the epilogue stores only the rows inside the group.
--
-- Shape rules: every M_g >= 1, N % BN == 0, K % 64 == 0, BN in {64, 128, 256}.
local pyptx = require "pyptx"
local tp = require "examples.lib.tma_pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local bf16, f32, u32 = T.bf16, T.f32, T.u32

local M = {}

--- Why (groups, N, K, opts) breaks the shape rules, or nil.
function M.shape_error(groups, N, K, o)
  if type(groups) ~= "table" or #groups < 1 then return "groups must list at least one group size" end
  for g, m in ipairs(groups) do
    if type(m) ~= "number" or m < 1 or m ~= math.floor(m) then
      return ("group %d: M_g must be a positive integer, got %s"):format(g, tostring(m))
    end
  end
  if o.BN ~= 64 and o.BN ~= 128 and o.BN ~= 256 then return "BN must be 64, 128 or 256" end
  if N % o.BN ~= 0 or K % o.BK ~= 0 then
    return ("N %% BN and K %% BK must be 0; got N = %d, K = %d with BN = %d, BK = %d"):format(N, K, o.BN, o.BK)
  end
  if o.STAGES < 1 or o.STAGES > 8 then return "STAGES must be 1..8" end
  if o.PERSISTENT ~= nil and o.PERSISTENT < 1 then return "PERSISTENT must be >= 1" end
  return nil
end

--- The tile plan of a grouped GEMM: per group its first row, first tile and
-- m-tile count; the total rows and tiles.
function M.plan(groups, N, BM, BN)
  local p, row, tile = { groups = {} }, 0, 0
  for g, m in ipairs(groups) do
    local mt = math.ceil(m / BM)
    p.groups[g] = { rows = m, row0 = row, tile0 = tile, mtiles = mt }
    row, tile = row + m, tile + mt * (N / BN)
  end
  p.rows, p.tiles = row, tile
  return p
end

--- The grouped GEMM kernel for group sizes `groups` (a list of M_g), N, K;
-- opts: BN (128), STAGES (4), PERSISTENT (CTAs; default min(tiles, 132)).
function M.build(groups, N, K, opts)
  opts = opts or {}
  local o = { BM = 128, BN = opts.BN or 128, BK = 64, STAGES = opts.STAGES or 4, PERSISTENT = opts.PERSISTENT }
  local err = M.shape_error(groups, N, K, o)
  if err then error("hopper grouped gemm: " .. err, 2) end
  local BM, BN, BK, S = o.BM, o.BN, o.BK, o.STAGES
  local G, KT, TN = #groups, K / BK, N / BN
  local plan = M.plan(groups, N, BM, BN)
  local P = math.min(o.PERSISTENT or 132, plan.tiles)
  return kernel "hopper_grouped_gemm" {
    arch = "sm_90a",
    in_specs = { Tile(plan.rows, K, bf16), Tile(G * N, K, bf16) },
    out_specs = { Tile(plan.rows, N, f32) },
    grid = { P, 1, 1 }, block = { 384, 1, 1 }, maxnreg = 168,
    function(A, B, C)
      local sA = smem.wgmma_tile(bf16, { BM, BK }, { stages = S })    -- 128B swizzle, one per ring stage
      local sB = smem.wgmma_tile(bf16, { BN, BK }, { stages = S })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local pipe = tp.new { stages = S, bytes = sA.stage_bytes + sB.stage_bytes }
      pipe:init(tid)

      --- The tile scheduler: tile t -> first row of A/C (m0, in the stacked
      -- rows), the row where its group ends, first row of B_g's tile (b0)
      -- and the column n0.
      local function decode(t)
        local g0 = plan.groups[1]
        local tile0, row0 = reg.scalar(u32, g0.tile0), reg.scalar(u32, g0.row0)
        local rend, brow = reg.scalar(u32, g0.row0 + g0.rows), reg.scalar(u32, 0)
        for g = 2, G do
          local pg = plan.groups[g]
          local here = t:ge(pg.tile0)
          ptx.at(here).inst.mov.u32(tile0, pg.tile0)
          ptx.at(here).inst.mov.u32(row0, pg.row0)
          ptx.at(here).inst.mov.u32(rend, pg.row0 + pg.rows)
          ptx.at(here).inst.mov.u32(brow, (g - 1) * N)
        end
        local lt = t - tile0
        local n0 = (lt % TN) * BN
        return row0 + (lt / TN) * BM, rend, brow + n0, n0
      end

      --- body(m0, rend, b0, n0) for each (group, tile) this CTA owns.
      local function over_tiles(body)
        ptx.range(reg.from(ptx.special.ctaid.x(), u32), plan.tiles, P, function(t)
          body(decode(t))
        end)
      end

      local producer = function()
        local prod = pipe:producer()                -- the ring runs on across tiles
        over_tiles(function(m0, _, b0) prod:loop(KT, function(i, s, full)
          local k0 = i * BK
          ptx.cp.async.bulk.tensor_2d{ dst = sA:stage(s), coord = { k0, m0 }, mbar = full, src = A:tma_desc{ tile = sA } }
          ptx.cp.async.bulk.tensor_2d{ dst = sB:stage(s), coord = { k0, b0 }, mbar = full, src = B:tma_desc{ tile = sB } }
        end) end)
      end

      local consumer = function(cw)                 -- consumer 0 or 1: rows 64*cw..
        local acc = ptx.wgmma.fragments(BN, false)
        local pc = ptx.global_ptrs(C)
        local cons = pipe:consumer(tid)
        over_tiles(function(m0, rend, _, n0)
          cons:mainloop(KT, function(k, s)          -- one group in flight; the first k-block overwrites acc (scale-d off)
            tp.mma { d = acc, n = BN, k = BK, a = sA:stage(s, cw * 64), b = sB:stage(s), scale_d = k == 0 and 0 or 1,
              wait = false }
          end)
          -- epilogue: the rows inside the group only
          tp.store_acc(tid, acc, BN, { ptr = pc, ld = N, row = m0 + cw * 64, col = n0, rows_end = rend })
        end)
      end

      tp.roles(tid, producer, consumer)
      ptx.ret()
    end,
  }
end

local to_bf16 = require("pyptx.floats").round_bf16

--- Random inputs in [-1, 1): { a (rows x K), b (G*N x K), groups, N, K }.
function M.inputs(groups, N, K, seed)
  math.randomseed(seed or 1)
  local rows = 0
  for _, m in ipairs(groups) do rows = rows + m end
  local a, b = {}, {}
  for i = 1, rows * K do a[i] = math.random() * 2 - 1 end
  for i = 1, #groups * N * K do b[i] = math.random() * 2 - 1 end
  return { a = a, b = b, groups = groups, rows = rows, N = N, K = K }
end

--- CPU reference in double: C[r][n] = sum_k bf16(A[r][k]) * bf16(B_g[n][k]), g = r's group.
function M.reference(inputs)
  local N, K = inputs.N, inputs.K
  local a, b, c = {}, {}, {}
  for i = 1, #inputs.a do a[i] = to_bf16(inputs.a[i]) end
  for i = 1, #inputs.b do b[i] = to_bf16(inputs.b[i]) end
  local r = 0
  for g, m in ipairs(inputs.groups) do
    local boff = (g - 1) * N * K
    for _ = 1, m do
      for n = 0, N - 1 do
        local s, ao, bo = 0, r * K, boff + n * K
        for k = 1, K do s = s + a[ao + k] * b[bo + k] end
        c[r * N + n + 1] = s
      end
      r = r + 1
    end
  end
  return c
end

--- The tensors a launch takes.
function M.args(inputs)
  return { { inputs.a, { inputs.rows, inputs.K }, dtype = bf16 },
    { inputs.b, { #inputs.groups * inputs.N, inputs.K }, dtype = bf16 } }
end

--- Per-element tolerance: exact bf16 products, f32 accumulation per k16 step.
function M.tolerance(K)
  return { atol = 1e-5 * K, rtol = 1e-3 }
end

--- Build, launch on fresh random inputs, compare every element.
function M.check(groups, N, K, opts)
  local check = require "pyptx.tools.verify"
  local k = M.build(groups, N, K, opts)
  local inputs = M.inputs(groups, N, K, check.fresh_seed())
  return check.run { kernel = k, args = M.args(inputs), reference = M.reference(inputs), tolerance = M.tolerance(K) }
end

-- The default (realistic) size: 8 experts of uneven token counts, N = 4096, K = 2048, persistent on 132 SMs.
M.DEFAULT_GROUPS = { 512, 1024, 320, 768, 1536, 256, 704, 1000 }
M.kernels = { M.build(M.DEFAULT_GROUPS, 4096, 2048) }

--- `luaptx run examples/hopper/grouped_gemm.lua [N K [P [M_1 M_2 ...]]] [--summary]`:
-- run 4 groups of {64, 128, 192, 128} rows, N = 256, K = 128 on 4 persistent
-- CTAs by default and check against the CPU reference.
function M.main(args)
  args = args or {}
  if args[1] == "--summary" then return require("examples.lib.runner").summary(M.kernels) end
  local N, K, P = tonumber(args[1]) or 256, tonumber(args[2]) or 128, tonumber(args[3]) or 4
  local groups = {}
  for i = 4, #args do groups[#groups + 1] = tonumber(args[i]) end
  if #groups == 0 then groups = { 64, 128, 192, 128 } end
  local ok, report = M.check(groups, N, K, { PERSISTENT = P })
  return require("pyptx.tools.verify").report(("hopper grouped gemm({%s}, %d, %d, persistent %d)"):format(
    table.concat(groups, ", "), N, K, P), ok, report)
end

return M
