--- What the warp-specialized Hopper examples (GEMM, grouped GEMM, flash
-- attention) share: a CTA of three warpgroups around a full/empty mbarrier
-- ring (pyptx.pipeline), warpgroup 0's thread 0 the TMA producer,
-- warpgroups 1 and 2 the wgmma consumers, and the epilogue that stores
-- wgmma's accumulator fragments. Not a kernel script; the examples
-- require it.
--
--   local pipe = tp.new { stages = S, bytes = A_STAGE + B_STAGE }
--   pipe:init(tid)
--   tp.roles(tid, function()                 -- producer thread
--     local prod = pipe:producer()
--     prod:loop(KT, function(k, s, full) ...TMA loads with mbar = full... end)
--   end, function(cw)                        -- consumer warpgroup cw (0 or 1)
--     local cons = pipe:consumer(tid)
--     cons:loop(KT, function(k, s) ...wgmma on stage s... end)
--     tp.store_acc(tid, acc, BN, { ptr = pc, ld = N, row = m0 + cw * 64, col = n0 })
--   end)
local pyptx = require "pyptx"
pyptx.helper()   -- errors and lines name the example calling in
local pipeline = require "pyptx.pipeline"
local ptx = pyptx.ptx
local T = pyptx.types

local M = {}

local Pipe = {}
Pipe.__index = Pipe

--- A full/empty ring: o.stages stages, o.bytes TMA bytes per stage (what
-- the producer arms full[s] with), o.warps consumer warps per CTA (8: two
-- warpgroups; each releases a stage once), o.cluster CTAs whose consumers
-- all release each stage (1; 2 for a multicast pair).
function M.new(o)
  local warps, cluster = o.warps or 8, o.cluster or 1
  return setmetatable({ stages = o.stages, bytes = o.bytes, cluster = cluster,
    full = pipeline.barriers(o.stages, 1), empty = pipeline.barriers(o.stages, warps * cluster) }, Pipe)
end

--- Thread 0 initializes the ring's barriers (and those of the arrays in
-- extra), fences them; then every thread of the CTA (of the cluster when
-- the ring spans one) meets at a barrier.
function Pipe:init(tid, extra)
  ptx.if_(tid:eq(0), function()
    self.full:init()
    self.empty:init()
    for _, bars in ipairs(extra or {}) do bars:init() end
    ptx.fence.mbarrier_init()
  end)
  if self.cluster > 1 then ptx.cluster.sync() else ptx.bar_sync(0) end
end

local Producer, Consumer = {}, {}
Producer.__index, Consumer.__index = Producer, Consumer

--- The producer's side (call it in the producer thread, before its loops):
-- a ring in registers at phase 1, so the first wait on each empty stage
-- passes at once.
function Pipe:producer()
  return setmetatable({ pipe = self, ring = pipeline.ring(self.stages, { phase = 1 }) }, Producer)
end

--- n k-blocks (a number or register): wait until stage s is empty, arm
-- full[s] with the stage's bytes, then body(k, s, full[s]) issues the loads
-- that complete on full[s]. The ring runs on across calls.
function Producer:loop(n, body)
  local pipe = self.pipe
  pipeline.kloop(self.ring, n, function(k, s, phase)
    pipe.empty:at(s):wait(phase)
    local full = pipe.full:at(s)
    full:arrive_expect_tx(pipe.bytes)
    body(k, s, full)
  end)
end

--- The consumer's side (call it in the consumer warpgroup, before its
-- loops): a ring in registers at phase 0 and each warp's lane 0, which
-- releases stages.
function Pipe:consumer(tid)
  return setmetatable({ pipe = self, ring = pipeline.ring(self.stages), leader = (tid % 32):eq(0) }, Consumer)
end

--- n k-blocks: wait until full[s] has landed, body(k, s) reads stage s, then
-- lane 0 of each warp releases it: an arrival on empty[s], or with a
-- cluster on empty[s] of every CTA of the cluster (mapa + remote arrive).
function Consumer:loop(n, body)
  local pipe, leader = self.pipe, self.leader
  pipeline.kloop(self.ring, n, function(k, s, phase)
    pipe.full:at(s):wait(phase)
    body(k, s)
    local empty = pipe.empty:at(s):when(leader)
    if pipe.cluster == 1 then empty:arrive()
    else
      for rank = 0, pipe.cluster - 1 do empty:arrive_remote(rank) end
    end
  end)
end

--- Warp specialization of a CTA of three warpgroups: warpgroup 0 gives
-- registers back (setmaxnreg.dec 40) and its thread 0 runs producer();
-- warpgroups 1 and 2 take more (setmaxnreg.inc 232) and run consumer(cw),
-- cw = warpgroup - 1 (a register).
function M.roles(tid, producer, consumer)
  local wg = tid:shr(7)
  ptx.if_(wg:eq(0), function()
    ptx.setmaxnreg.dec(40)
    ptx.if_(tid:eq(0), producer)
  end, function()
    ptx.setmaxnreg.inc(232)
    consumer(wg - 1)
  end)
end

--- The address of stage s of a buffer of stages at base (a u32 register):
-- base + s * bytes (one mad for a register stage, none for stage 0); for
-- kernels that place stages by hand (gemm_fast's multicast halves).
function M.stage(base, s, bytes)
  if s == 0 then return base end
  if type(s) == "number" then return base + s * bytes end
  return s:fma(bytes, base)
end

--- A wgmma descriptor for a K-major tile (smem.wgmma_tile) at address addr.
function M.desc(tile, addr)
  return ptx.wgmma.desc(addr, { layout = tile.layout, lbo = tile.lbo, sbo = tile.sbo })
end

--- One K block of o.k columns as o.k/16 wgmma m64nNk16 steps into o.d
-- (N = o.n, bf16 inputs): A a wgmma tile (sA:stage(s, row)) or a
-- function(kk) giving step kk's four A registers, B a wgmma tile. Each
-- tile's descriptor is built once; step kk moves it to K element 16*kk
-- (a_tile/b_tile with k: one add). With o.a_tile (o.b_tile), o.a (o.b) is
-- already that tile's descriptor (M.desc). o.scale_d = 0: the first step
-- overwrites d. Fenced before, committed and waited for after.
function M.mma(o)
  local regs = type(o.a) == "function" and o.a or nil
  local a_tile, b_tile = o.a_tile or (not regs and o.a or nil), o.b_tile or o.b
  local da = not regs and (o.a_tile and o.a or ptx.wgmma.desc(o.a)) or nil
  local db = o.b_tile and o.b or ptx.wgmma.desc(o.b)
  ptx.wgmma.fence()
  for kk = 0, o.k / 16 - 1 do
    ptx.wgmma.mma_async { shape = { 64, o.n, 16 }, d = o.d, atype = T.bf16, k = 16 * kk, a = regs and regs(kk) or da,
      a_tile = a_tile, b = db, b_tile = b_tile, scale_d = (kk == 0 and o.scale_d) or 1 }
  end
  ptx.wgmma.commit_group()
  ptx.wgmma.wait_group(0)
end

--- Store a consumer warpgroup's m64nN f32 accumulators acc (N = n) into a
-- row-major f32 matrix. Register 4*nb + 2*h + j holds row 16*warp + lane/4
-- + 8h, column 8*nb + 2*(lane%4) + j of the warpgroup's 64 rows; each
-- thread stores pairs (st.global.v2). o.ptr: the matrix (u64 pointer);
-- o.ld: elements per row; o.row: the warpgroup's first row (register);
-- o.col: its first column; o.rows_end: store only rows below it; o.scale:
-- { [0] = x, [1] = y } multiplies the rows h = 0 and h = 1.
function M.store_acc(tid, acc, n, o)
  local lane = tid % 32
  local row = o.row + (tid % 128):shr(5) * 16 + lane:shr(2)
  local col = (lane % 4) * 2
  if o.col ~= 0 then col = col + o.col end
  local p = o.ptr + (row * o.ld + col):mul_wide(4)
  local ok = o.rows_end and { [0] = row:lt(o.rows_end), [1] = (row + 8):lt(o.rows_end) } or nil
  for h = 0, 1 do
    for nb = 0, n / 8 - 1 do
      local x, y = acc[4 * nb + 2 * h], acc[4 * nb + 2 * h + 1]
      if o.scale then x, y = x * o.scale[h], y * o.scale[h] end
      local at = ok and ptx.at(ok[h]) or ptx
      at.st.global(ptx.addr(p, (8 * h * o.ld + 8 * nb) * 4), { x, y })
    end
  end
end

return M
