--- Pipelines: the stage/phase ring a multi-stage buffer walks
-- (pipeline.ring, ring:advance, pipeline.kloop, pipeline.stage_of) and
-- arrays of mbarriers, one per stage (pipeline.barriers, bars:at(stage)).
--
--   local full, empty = pipeline.barriers(S, 1), pipeline.barriers(S, 4)
--   ptx.if_(tid:eq(0), function() full:init(); empty:init(); ptx.fence.mbarrier_init() end)
--   local ring = pipeline.ring(S)                  -- stage and phase in u32 registers
--   pipeline.kloop(ring, KT, function(k, stage, phase)
--     full:at(stage):wait(phase)
--     ...
--     empty:at(stage):when(leader):arrive()
--   end)
--
-- Stage and phase are u32 registers that ring:advance updates in place (an
-- emitted loop carries them), or Lua numbers for a ring whose loop is
-- unrolled at trace time (pipeline.ring(S, { unrolled = true })).
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local operands = require "pyptx.operands"
local smem = require "pyptx.smem"
local ptx = require "pyptx.ptx"
local async = require "pyptx.async"
local argcheck = require "pyptx.args"

local M = {}
local u32 = types.u32
local mbarrier = async.mbarrier

--- Fail at the user's line.
local fail = trace.fail

--- Is v an integer register of 32 bits (u32, s32, b32)?
local function is_int32(v)
  return reg.is(v) and types.is_int(v.type) and v.type.bits == 32
end

--- How a message shows a stage or phase argument that did not fit.
local function show(v)
  if reg.is(v) then return "a " .. v.type.name .. " register" end
  if type(v) == "string" then return ("a string (%q)"):format(v) end
  if type(v) == "table" or type(v) == "function" then return "a " .. type(v) end
  return tostring(v)
end

--- Check a phase parity: 0, 1 or a 32-bit integer register.
local function check_phase(what, phase)
  if phase == 0 or phase == 1 or is_int32(phase) then return end
  fail(("%s: the phase must be 0, 1 or a u32 register (ring.phase); got %s"):format(what, show(phase)))
end

-- -------------------------------------------------------------------- rings

local Ring = {}
Ring.__index = Ring
Ring.__tostring = function(r)
  if r.unrolled then return ("pipeline ring (%d stages, unrolled: stage %d, phase %d)"):format(r.stages, r.stage, r.phase) end
  return ("pipeline ring (%d stages, stage in %s, phase in %s)"):format(r.stages, tostring(r.stage), tostring(r.phase))
end

--- Is v a ring (pipeline.ring)?
local function is_ring(v) return getmetatable(v) == Ring end
M.is_ring = is_ring
argcheck.kind("ring", "a pipeline ring (pipeline.ring)", is_ring)

--- A ring over `stages` stages at stage 0 with phase parity opts.phase (0,
-- or 1: the ring of a producer that waits on "empty" barriers, whose
-- phase before the first completes at once). The stage and the phase are
-- u32 registers (two movs), or with opts.unrolled Lua numbers.
function M.ring(stages, opts)
  opts = opts or {}
  argcheck.fields("pipeline.ring", opts, { "phase: integer?", "unrolled: boolean?" })
  if stages < 1 then fail("pipeline.ring: stages must be a positive integer; got " .. stages) end
  local phase = opts.phase or 0
  if phase ~= 0 and phase ~= 1 then fail("pipeline.ring: opts.phase must be 0 or 1; got " .. phase) end
  local r = setmetatable({ stages = stages, unrolled = opts.unrolled or false }, Ring)
  if r.unrolled then
    r.stage, r.phase = 0, phase
  else
    r.stage, r.phase = reg.scalar(u32, 0), reg.scalar(u32, phase)
  end
  return r
end

--- Move to the next stage; past the last, back to stage 0 with the phase
-- flipped. Registers are updated in place: add, setp and two guarded
-- instructions (one xor for a one-stage ring); numbers emit nothing.
function Ring:advance()
  if not is_ring(self) then fail("ring:advance: call it with a colon, ring:advance()") end
  local stages = self.stages
  if self.unrolled then
    self.stage = self.stage + 1
    if self.stage == stages then self.stage, self.phase = 0, 1 - self.phase end
    return self
  end
  local stage, phase = self.stage, self.phase
  if stages == 1 then
    ptx.inst.xor.b32(phase, phase, 1)
    return self
  end
  ptx.inst.add.u32(stage, stage, 1)
  local wrap = stage:eq(stages)
  ptx.at(wrap).inst.mov.u32(stage, 0)
  ptx.at(wrap).inst.xor.b32(phase, phase, 1)
  return self
end

--- The unroll factor of kloop's options, checked.
local function unroll_of(opts)
  if opts == nil then return 1 end
  argcheck.fields("pipeline.kloop", opts, { "unroll: integer?" })
  local u = opts.unroll or 1
  if u < 1 then fail("pipeline.kloop: opts.unroll must be a positive integer; got " .. u) end
  return u
end

--- Iterations 0 .. n-1 of a pipelined loop: body(i, stage, phase) with the
-- ring's stage and phase, the ring advanced after each. An unrolled ring
-- unrolls the loop (n a number; i, stage, phase numbers); a ring in
-- registers gets an emitted loop (ptx.range; n a number or a register).
-- opts.unroll = u (a ring in registers): u iterations per trip of the
-- emitted loop (i, i + 1, ...: one loop counter and branch per u
-- k-blocks), then the n % u left over (inline when n is a number, in a
-- loop of their own when it is a register).
-- The body must not branch out of the loop (the ring would not advance).
function M.kloop(ring, n, body, opts)
  if type(n) == "number" and n < 0 then fail("pipeline.kloop: the iteration count must be >= 0; got " .. n) end
  local u = unroll_of(opts)
  if ring.unrolled then
    if type(n) ~= "number" then
      fail("pipeline.kloop: an unrolled ring needs a number of iterations; got " .. show(n)
        .. " (use a ring in registers, pipeline.ring(stages), for an emitted loop)")
    end
    for i = 0, n - 1 do
      body(i, ring.stage, ring.phase)
      ring:advance()
    end
    return
  end
  if reg.is(n) and not types.is_int(n.type) then
    fail("pipeline.kloop: the iteration count must be an integer register; got " .. show(n))
  end
  local function one(i)
    body(i, ring.stage, ring.phase)
    ring:advance()
  end
  if u == 1 then return ptx.range(0, n, 1, one) end
  local main = type(n) == "number" and n - n % u or (n / u) * u
  if type(main) ~= "number" or main > 0 then
    ptx.range(0, main, u, function(i)
      for j = 0, u - 1 do one(j == 0 and i or i + j) end
    end)
  end
  if type(n) == "number" then
    for i = main, n - 1 do one(i) end
  else
    ptx.range(main, n, 1, one)
  end
end

--- The stage and phase of iteration i of a ring of `stages` stages
-- started at 0: i % stages and (i / stages) & 1. Numbers for a number;
-- for a register, fresh registers (rem, div, and).
function M.stage_of(stages, i)
  if stages < 1 then fail("pipeline.stage_of: stages must be a positive integer; got " .. stages) end
  if type(i) == "number" then
    if i < 0 then fail("pipeline.stage_of: the iteration must be >= 0; got " .. i) end
    return i % stages, math.floor(i / stages) % 2
  end
  if not is_int32(i) then fail("pipeline.stage_of: the iteration must be an integer or a u32 register; got " .. show(i)) end
  return i % stages, (i / stages):band(1)
end

-- ----------------------------------------------------------------- barriers

local Bars, Barrier = {}, {}
Bars.__index, Barrier.__index = Bars, Barrier

--- Is v a barrier array (pipeline.barriers)?
local function is_bars(v) return getmetatable(v) == Bars end
--- Is v one barrier (bars:at(stage))?
local function is_barrier(v) return getmetatable(v) == Barrier end
M.is_barriers, M.is_barrier = is_bars, is_barrier
argcheck.kind("barriers", "a barrier array (pipeline.barriers)", is_bars)
argcheck.kind("barrier", "a barrier (bars:at(stage))", is_barrier)

Bars.__tostring = function(b)
  return ("pipeline barriers (%d x mbarrier, count %d, %s+%d)"):format(b.n, b.count, b.alloc.sym, b.alloc.offset)
end
Barrier.__tostring = function(b)
  return ("pipeline barrier [%s+%d]"):format(tostring(b.base), b.offset)
end

--- n mbarriers in shared memory (8-byte slots, 8-byte aligned) that each
-- expect `count` arrivals per phase (default 1). No instruction: init
-- them with bars:init().
function M.barriers(n, count)
  count = count or 1
  if n < 1 then fail("pipeline.barriers: n must be a positive integer; got " .. n) end
  if count < 1 or count > 0xfffff then
    fail("pipeline.barriers: count must be 1..1048575 (arrivals per phase); got " .. count)
  end
  return setmetatable({ n = n, count = count, alloc = smem.mbarrier(n) }, Bars)
end

--- Check a method's self (a colon call).
local function check_self(v, pred, what)
  if not pred(v) then fail(what .. ": call it with a colon on the object (x:method(...)); got " .. show(v)) end
end

--- mbarrier.init every barrier of the array with its count (n instructions;
-- run it in one thread, then ptx.fence.mbarrier_init() and a barrier).
function Bars:init()
  check_self(self, is_bars, "bars:init")
  for s = 0, self.n - 1 do mbarrier.init(self.alloc[s], self.count) end
  return self
end

--- The barrier of a stage: a number 0..n-1 addresses it as [sym+offset]
-- (no instruction); a u32 register (ring.stage) as a register holding
-- the array's address plus 8 * stage (mov, mad).
function Bars:at(stage)
  check_self(self, is_bars, "bars:at")
  local a = self.alloc
  if type(stage) == "number" then
    if stage < 0 or stage >= self.n or stage % 1 ~= 0 then
      fail(("bars:at: stage %s is outside the array's stages 0..%d"):format(tostring(stage), self.n - 1))
    end
    return setmetatable({ base = a.sym, offset = a.offset + 8 * stage, bars = self }, Barrier)
  end
  if not is_int32(stage) then
    fail(("bars:at: the stage must be an integer 0..%d or a u32 register (ring.stage); got %s"):format(self.n - 1, show(stage)))
  end
  local addr = stage:fma(8, a:base())
  return setmetatable({ base = addr, offset = 0, bars = self }, Barrier)
end

--- The barrier's address ({ base, offset }): ptx.addr(bar) and the mbar =
-- of copies take a barrier directly.
function Barrier:address()
  return { base = self.base, offset = self.offset }
end

--- The barrier's address as an operand.
local function addr_of(b) return operands.addr(b) end

--- The namespace the barrier's last instruction is issued through:
-- ptx.at(guard) for a barrier from bar:when(guard), ptx otherwise.
local function issuer(b)
  if b.guard then return ptx.at(b.guard) end
  return ptx
end

--- A view of the barrier whose single-instruction methods (init, arrive,
-- arrive_expect_tx, expect_tx, arrive_remote) carry the guard p (a
-- predicate or -p): empty:at(s):when(leader):arrive().
function Barrier:when(p)
  check_self(self, is_barrier, "bar:when")
  if not reg.is_pred(p) then fail("bar:when: the guard must be a predicate (or -p); got " .. show(p)) end
  return setmetatable({ base = self.base, offset = self.offset, bars = self.bars, guard = p }, Barrier)
end

--- Fail when a guarded view is used for a method that is a loop.
local function unguarded(b, what)
  if b.guard then fail(what .. ": a wait is a loop and cannot carry a guard; wrap it in ptx.if_(p, ...) instead") end
end

--- mbarrier.init with count (default: the array's count).
function Barrier:init(count)
  check_self(self, is_barrier, "bar:init")
  count = count or self.bars.count
  if type(count) == "number" and (count < 1 or count > 0xfffff or count % 1 ~= 0) then
    fail("bar:init: count must be 1..1048575; got " .. count)
  end
  return issuer(self).inst.mbarrier.init.shared_cta.b64(addr_of(self), count)
end

--- Spin until the phase with this parity completes (label, try_wait.parity,
-- guarded branch back). phase: 0, 1 or a u32 register (ring.phase).
function Barrier:wait(phase)
  check_self(self, is_barrier, "bar:wait")
  unguarded(self, "bar:wait")
  check_phase("bar:wait", phase)
  return mbarrier.wait(addr_of(self), phase)
end

--- One mbarrier.try_wait.parity; returns the predicate (phase done).
function Barrier:try_wait(phase)
  check_self(self, is_barrier, "bar:try_wait")
  unguarded(self, "bar:try_wait")
  check_phase("bar:try_wait", phase)
  return mbarrier.try_wait(addr_of(self), phase)
end

--- Check an optional count of arrivals or bytes.
local function check_count(what, name, v, optional)
  if v == nil and optional then return end
  if type(v) == "number" and v >= 1 and v % 1 == 0 then return end
  if is_int32(v) then return end
  fail(("%s: %s must be a positive integer or a u32 register; got %s"):format(what, name, show(v)))
end

--- mbarrier.arrive.shared::cta.b64 _, [bar]{, count}: one arrival (or count).
function Barrier:arrive(count)
  check_self(self, is_barrier, "bar:arrive")
  check_count("bar:arrive", "count", count, true)
  local P = issuer(self)
  if count ~= nil then return P.inst.mbarrier.arrive.shared_cta.b64(operands.sink, addr_of(self), count) end
  return P.inst.mbarrier.arrive.shared_cta.b64(operands.sink, addr_of(self))
end

--- mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes: arrive and
-- expect `bytes` more transaction bytes (the copies' complete_tx) this phase.
function Barrier:arrive_expect_tx(bytes)
  check_self(self, is_barrier, "bar:arrive_expect_tx")
  check_count("bar:arrive_expect_tx", "bytes", bytes)
  return issuer(self).inst.mbarrier.arrive.expect_tx.shared_cta.b64(operands.sink, addr_of(self), bytes)
end

--- mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], bytes (no arrival).
function Barrier:expect_tx(bytes)
  check_self(self, is_barrier, "bar:expect_tx")
  check_count("bar:expect_tx", "bytes", bytes)
  return issuer(self).mbarrier.expect_tx(addr_of(self), bytes)
end

--- (count, opts) of a remote arrival: opts may stand in count's place.
local function count_opts(count, opts)
  if opts == nil and type(count) == "table" and not reg.is(count) then return nil, count end
  return count, opts
end

--- An arrival on the same barrier in CTA `rank` of the cluster (a number
-- or a u32 register): mapa, then mbarrier.arrive.shared::cluster (the
-- ISA's default .release.cta, as CUTLASS releases a stage; opts = { sem =,
-- scope = } for another, see ptx.mbarrier.arrive_remote) (one mov more when
-- the barrier's stage was a number).
function Barrier:arrive_remote(rank, count, opts)
  check_self(self, is_barrier, "bar:arrive_remote")
  if not ((type(rank) == "number" and rank >= 0 and rank % 1 == 0) or is_int32(rank)) then
    fail("bar:arrive_remote: rank must be a CTA rank in the cluster (an integer >= 0 or a u32 register); got " .. show(rank))
  end
  count, opts = count_opts(count, opts)
  check_count("bar:arrive_remote", "count", count, true)
  async.arrive_order(opts, "bar:arrive_remote")
  local local_addr = self.base
  if type(local_addr) == "string" then local_addr = reg.scalar(u32, operands.sym(self.base, self.offset)) end
  local remote = async.cluster.mapa(local_addr, rank)
  return issuer(self).mbarrier.arrive_remote(operands.addr(remote), count, opts)
end

--- An arrival on the same barrier in every CTA of the cluster that ctas
-- names (a u16 mask, bit r = rank r, or a list of ranks): per rank, mapa
-- then the remote arrive (each arrive carries the view's guard; opts as
-- for bar:arrive_remote).
function Barrier:arrive_multicast(ctas, count, opts)
  check_self(self, is_barrier, "bar:arrive_multicast")
  local ranks = async.multicast_ranks(ctas, "bar:arrive_multicast")
  count, opts = count_opts(count, opts)
  check_count("bar:arrive_multicast", "count", count, true)
  async.arrive_order(opts, "bar:arrive_multicast")
  local local_addr = self.base
  if type(local_addr) == "string" then local_addr = reg.scalar(u32, operands.sym(self.base, self.offset)) end
  for _, r in ipairs(ranks) do
    issuer(self).mbarrier.arrive_remote(operands.addr(async.cluster.mapa(local_addr, r)), count, opts)
  end
  return #ranks
end

argcheck.sign(M, "pipeline", {
  ring = { "stages: integer", "opts: table?" },
  kloop = { "ring: ring", "n: integer|register", "body: function", "opts: table?" },
  stage_of = { "stages: integer", "i: integer|register" },
  barriers = { "n: integer", "count: integer?" },
})

return M
