-- pyptx.pipeline: the stage/phase ring (numbers and registers), kloop,
-- stage_of, mbarrier arrays (addresses, emitted PTX, ptxas), argument
-- errors at the user's line, and a multi-stage cp.async.bulk pipeline with
-- a full/empty mbarrier handshake run on the emulator against the CPU.
local pyptx = require "pyptx"
local H = require "spec.helpers"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local pipeline = require "pyptx.pipeline"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local f32, u32 = T.f32, T.u32

--- Trace a kernel with body fn for sm_90a; returns its specialization.
local function traced(fn, name)
  return kernel(name or "t") { arch = "sm_90a", fn }:specialize()
end

--- The instructions of PTX text, one string each with single spaces.
local function instructions(text)
  local out = {}
  for line in text:gmatch("\n\t([^.\n][^\n]*;)") do out[#out + 1] = (line:gsub("%s+", " ")) end
  return out
end

--- The stage/phase sequence a ring of n stages starting at phase ph0 must walk.
local function expected(n, k, ph0)
  local out = {}
  for i = 0, k - 1 do out[#out + 1] = { i % n, (math.floor(i / n) + ph0) % 2 } end
  return out
end

--- A kernel whose thread 0 records (stage, phase) of a ring of n stages
-- over k iterations of an emitted pipeline.kloop, and stage_of(n, i) of the
-- loop counter: out[4i..4i+3] = stage, phase, stage_of's stage and phase.
-- count_in_reg: the iteration count is a register, not a number.
local function ring_kernel(n, k, ph0, count_in_reg, unroll)
  return kernel("ring" .. n) { arch = "sm_90a", in_specs = {}, out_specs = { Tile(4 * k, u32) }, block = { 32 },
    function(Out)
      local tid = reg.from(ptx.special.tid.x(), u32)
      ptx.if_(tid:eq(0), function()
        local po = ptx.global_ptrs(Out)
        local ring = pipeline.ring(n, { phase = ph0 })
        local count = count_in_reg and reg.scalar(u32, k) or k
        pipeline.kloop(ring, count, function(i, stage, phase)
          if type(i) == "number" then i = reg.scalar(u32, i) end   -- an unrolled remainder's iteration
          local s2, p2 = pipeline.stage_of(n, i)
          local p = po + i:mul_wide(16)
          ptx.st.global(ptx.addr(p), stage)
          ptx.st.global(ptx.addr(p, 4), phase)
          ptx.st.global(ptx.addr(p, 8), s2)
          ptx.st.global(ptx.addr(p, 12), p2)
        end, unroll and { unroll = unroll } or nil)
      end)
      ptx.ret()
    end }
end

describe("pyptx.pipeline rings", function()
  it("walk stage i % n with phase (i / n) & 1 when unrolled, for 1 to 5 stages over 13 iterations", function()
    for n = 1, 5 do
      for _, ph0 in ipairs { 0, 1 } do
        local ring, got = pipeline.ring(n, { unrolled = true, phase = ph0 }), {}
        for _ = 1, 13 do
          got[#got + 1] = { ring.stage, ring.phase }
          assert.are.equal(ring, ring:advance())
        end
        assert.are.same(expected(n, 13, ph0), got)
      end
    end
  end)

  it("give stage_of(n, i) as numbers for a number", function()
    for n = 1, 4 do
      for i = 0, 12 do
        local s, ph = pipeline.stage_of(n, i)
        assert.are.same(expected(n, i + 1, 0)[i + 1], { s, ph })
      end
    end
  end)

  it("unroll kloop over an unrolled ring: numbers in the body, no loop emitted", function()
    local seen = {}
    local s = traced(function()
      local bars = pipeline.barriers(2)
      pipeline.kloop(pipeline.ring(2, { unrolled = true }), 5, function(i, stage, phase)
        seen[#seen + 1] = { i, stage, phase }
        bars:at(stage):wait(phase)
      end)
    end)
    assert.are.same({ { 0, 0, 0 }, { 1, 1, 0 }, { 2, 0, 1 }, { 3, 1, 1 }, { 4, 0, 0 } }, seen)
    assert.is_nil(s.ptx:find("range", 1, true))
    local waits = {}
    for a, ph in s.ptx:gmatch("mbarrier%.try_wait%.parity%.shared::cta%.b64 \t%%p%d+, %[t_smem%+?(%d*)%], (%d);") do
      waits[#waits + 1] = (a == "" and "0" or a) .. "/" .. ph
    end
    assert.are.same({ "0/0", "8/0", "0/1", "8/1", "0/0" }, waits)
  end)

  it("advance in registers with add, setp and two guarded instructions (a one-stage ring: one xor)", function()
    local s = traced(function()
      local r3 = pipeline.ring(3)
      r3:advance()
      local r1 = pipeline.ring(1, { phase = 1 })
      r1:advance()
    end)
    assert.are.same({
      "mov.u32 %r1, 0;", "mov.u32 %r2, 0;",
      "add.u32 %r1, %r1, 1;", "setp.eq.u32 %p1, %r1, 3;", "@%p1 mov.u32 %r1, 0;", "@%p1 xor.b32 %r2, %r2, 1;",
      "mov.u32 %r3, 0;", "mov.u32 %r4, 1;",
      "xor.b32 %r4, %r4, 1;",
    }, instructions(s.ptx))
  end)

  describe("on the emulator", function()
    runtime.use(H.emu())

    it("walk the same stage/phase sequence in registers as stage_of computes, for 1 to 4 stages", function()
      local k = 11
      for n = 1, 4 do
        for _, case in ipairs { { 0, false }, { 1, true } } do
          local out = ring_kernel(n, k, case[1], case[2])():values()
          local want = expected(n, k, case[1])
          for i = 0, k - 1 do
            assert.are.same(want[i + 1], { out[4 * i + 1], out[4 * i + 2] }, ("ring of %d, iteration %d"):format(n, i))
            assert.are.same(expected(n, k, 0)[i + 1], { out[4 * i + 3], out[4 * i + 4] })
          end
        end
      end
    end)

    it("walk it unrolled by 2 and 3 (kloop{unroll}): 11 iterations, the rest inline or in a loop of its own", function()
      local k = 11
      for _, u in ipairs { 2, 3 } do
        for _, count_in_reg in ipairs { false, true } do
          local kern = ring_kernel(3, k, 0, count_in_reg, u)
          local text = kern:ptx()
          local _, stores = text:gsub("st%.global", "")
          assert.are.equal(4 * (u + (count_in_reg and 1 or k % u)), stores)   -- u bodies in the loop, then the rest
          local out = kern():values()
          local want = expected(3, k, 0)
          for i = 0, k - 1 do
            assert.are.same(want[i + 1], { out[4 * i + 1], out[4 * i + 2] }, ("unroll %d, iteration %d"):format(u, i))
            assert.are.same(want[i + 1], { out[4 * i + 3], out[4 * i + 4] })
          end
        end
      end
    end)
  end)

  it("print what they are", function()
    assert.are.equal("pipeline ring (3 stages, unrolled: stage 0, phase 1)",
      tostring(pipeline.ring(3, { unrolled = true, phase = 1 })))
  end)
end)

describe("pyptx.pipeline barrier arrays", function()
  it("lay out n 8-byte slots after earlier allocations and address a number stage as [sym+offset]", function()
    local bars, addr
    local s = traced(function()
      smem.alloc(u32, 3)
      bars = pipeline.barriers(4, 2)
      addr = bars:at(3):address()
      bars:init()
    end)
    assert.are.same({ 4, 2, 16 }, { bars.n, bars.count, bars.alloc.offset })
    assert.are.same({ base = "t_smem", offset = 40 }, addr)
    assert.are.equal("pipeline barriers (4 x mbarrier, count 2, t_smem+16)", tostring(bars))
    for off = 16, 40, 8 do assert.matches(("mbarrier.init.shared::cta.b64 \t[t_smem+%d], 2;"):format(off), s.ptx, 1, true) end
    assert.matches(" t_smem[48];", s.ptx, 1, true)
  end)

  it("address a register stage as the array's address plus 8 * stage (mov, mad)", function()
    local s = traced(function()
      smem.alloc(u32, 2)
      local bars = pipeline.barriers(3)
      local stage = reg.scalar(u32, 2)
      bars:at(stage):wait(1)
    end)
    assert.matches("mov.u32 \t%r2, t_smem+8;\n\tmad.lo.u32 \t%r3, %r1, 8, %r2;", s.ptx, 1, true)
    assert.matches("mbarrier.try_wait.parity.shared::cta.b64 \t%p1, [%r3], 1;", s.ptx, 1, true)
  end)

  it("emit each barrier operation, guarded through bar:when, and ptxas accepts them", function()
    local s = traced(function()
      local tid = reg.from(ptx.special.tid.x(), u32)
      local full, empty = pipeline.barriers(2, 1), pipeline.barriers(2, 4)
      local leader = (tid % 32):eq(0)
      ptx.if_(tid:eq(0), function()
        full:init()
        empty:at(1):init(3)
        ptx.fence.mbarrier_init()
      end)
      ptx.bar_sync(0)
      local ring = pipeline.ring(2)
      local f = full:at(ring.stage)
      f:arrive_expect_tx(256)
      f:expect_tx(16)
      empty:at(0):when(leader):arrive()
      empty:at(1):arrive(2)
      empty:at(1):when(-leader):arrive_remote(0)
      local done = f:try_wait(ring.phase)
      ptx.at(done).inst.mov.u32(tid, 1)
      f:wait(ring.phase)
      ring:advance()
      assert.are.equal("pipeline barrier [ops_smem+8]", tostring(full:at(1)))
      ptx.ret()
    end, "ops")
    for _, line in ipairs {
      "mbarrier.init.shared::cta.b64 \t[ops_smem], 1;",
      "mbarrier.init.shared::cta.b64 \t[ops_smem+24], 3;",
      "mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r6], 256;",
      "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 \t[%r6], 16;",
      "@%p1 mbarrier.arrive.shared::cta.b64 \t_, [ops_smem+16];",
      "mbarrier.arrive.shared::cta.b64 \t_, [ops_smem+24], 2;",
      "mapa.shared::cluster.u32 \t%r8, %r7, 0;",
      "@!%p1 mbarrier.arrive.shared::cluster.b64 \t_, [%r8];",
      "mbarrier.try_wait.parity.shared::cta.b64 \t%p3, [%r6], %r4;",
    } do
      assert.matches(line, s.ptx, 1, true)
    end
    assert.matches("mov.u32 \t%r7, ops_smem+24;", s.ptx, 1, true)
    H.assert_ptxas(s.ptx, "sm_90a")
  end)
end)

describe("pyptx.pipeline argument errors", function()
  --- Assert err names this spec at line and contains text.
  local function names(err, line, text)
    assert.matches("pipeline_spec.lua:" .. line .. ": ", err, 1, true)
    assert.matches(text, err, 1, true)
  end

  it("name the user's line for rings and kloop", function()
    local line
    names(H.trace_error(function() line = H.here(); pipeline.ring(0) end), line,
      "pipeline.ring: stages must be a positive integer; got 0")
    names(H.trace_error(function() line = H.here(); pipeline.ring(2.5) end), line,
      "pipeline.ring: argument 1 (stages) must be an integer; got 2.5")
    names(H.trace_error(function() line = H.here(); pipeline.ring(2, { phase = 2 }) end), line,
      "pipeline.ring: opts.phase must be 0 or 1; got 2")
    names(H.trace_error(function() line = H.here(); pipeline.ring(2, { unrolled = "yes" }) end), line,
      "pipeline.ring: field unrolled must be a boolean (or nil); got a string (\"yes\")")
    names(H.trace_error(function() line = H.here(); pipeline.kloop(pipeline.ring(2), 4, function() end, { unroll = 0 }) end), line,
      "pipeline.kloop: opts.unroll must be a positive integer; got 0")
    names(H.trace_error(function() line = H.here(); pipeline.kloop({}, 4, function() end) end), line,
      "pipeline.kloop: argument 1 (ring) must be a pipeline ring (pipeline.ring); got a table")
    names(H.trace_error(function()
      local ring = pipeline.ring(2, { unrolled = true })
      line = H.here(); pipeline.kloop(ring, reg.scalar(u32, 4), function() end)
    end), line, "pipeline.kloop: an unrolled ring needs a number of iterations; got a u32 register")
    names(H.trace_error(function() line = H.here(); pipeline.kloop(pipeline.ring(2), 4) end), line,
      "pipeline.kloop: argument 3 (body) must be a function; got nil")
    names(H.trace_error(function() line = H.here(); pipeline.kloop(pipeline.ring(2), -1, print) end), line,
      "pipeline.kloop: the iteration count must be >= 0; got -1")
    names(H.trace_error(function() line = H.here(); pipeline.stage_of(2, reg.scalar(f32, 1)) end), line,
      "pipeline.stage_of: the iteration must be an integer or a u32 register; got a f32 register")
    names(H.trace_error(function() local r = pipeline.ring(2); line = H.here(); r.advance() end), line,
      "ring:advance: call it with a colon")
  end)

  it("name the user's line for barrier arrays and barriers", function()
    local line
    names(H.trace_error(function() line = H.here(); pipeline.barriers(0) end), line,
      "pipeline.barriers: n must be a positive integer; got 0")
    names(H.trace_error(function() line = H.here(); pipeline.barriers(2, 0x100000) end), line,
      "pipeline.barriers: count must be 1..1048575 (arrivals per phase); got 1048576")
    names(H.trace_error(function() line = H.here(); pipeline.barriers(2, "one") end), line,
      "pipeline.barriers: argument 2 (count) must be an integer (or nil); got a string (\"one\")")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(3) end), line,
      "bars:at: stage 3 is outside the array's stages 0..2")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(reg.scalar(f32, 0)) end), line,
      "bars:at: the stage must be an integer 0..2 or a u32 register (ring.stage); got a f32 register")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b.at(1) end), line,
      "bars:at: call it with a colon on the object")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):wait(2) end), line,
      "bar:wait: the phase must be 0, 1 or a u32 register (ring.phase); got 2")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):wait() end), line,
      "bar:wait: the phase must be 0, 1 or a u32 register (ring.phase); got nil")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):when(1) end), line,
      "bar:when: the guard must be a predicate (or -p); got 1")
    names(H.trace_error(function()
      local b, p = pipeline.barriers(3), reg.pred()
      line = H.here(); b:at(0):when(p):wait(0)
    end), line, "bar:wait: a wait is a loop and cannot carry a guard; wrap it in ptx.if_(p, ...) instead")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):arrive_expect_tx() end), line,
      "bar:arrive_expect_tx: bytes must be a positive integer or a u32 register; got nil")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):arrive(0) end), line,
      "bar:arrive: count must be a positive integer or a u32 register; got 0")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):arrive_remote(-1) end), line,
      "bar:arrive_remote: rank must be a CTA rank in the cluster")
    names(H.trace_error(function() local b = pipeline.barriers(3); line = H.here(); b:at(0):init(0) end), line,
      "bar:init: count must be 1..1048575; got 0")
  end)

  it("say when called outside a kernel trace", function()
    local ok, err = pcall(pipeline.barriers, 2)
    assert.is_false(ok)
    assert.matches("called outside a kernel trace", tostring(err), 1, true)
    ok, err = pcall(pipeline.ring, 2)
    assert.is_false(ok)
    assert.matches("called outside a kernel trace", tostring(err), 1, true)
  end)
end)

-- A multi-stage pipeline inside one CTA: warp 2's lane 0 is the producer,
-- copying block i (BLK floats) of X into stage i % S with cp.async.bulk
-- completing on full[s]; warps 0 and 1 are consumers: each thread adds its
-- float of the stage to a running sum, writes the sum to Out (so Out holds
-- prefix sums over the blocks, in block order), and lane 0 of each warp
-- releases the stage on empty[s] (count 2).
local BLK = 64

--- The pipeline kernel for nb blocks and s stages; opts.unrolled: unrolled
-- rings (number stages); opts.release = false: the consumers never release
-- (a planted bug); lines.empty and lines.full get the lines of the waits.
local function ring_copy(nb, stages, opts, lines)
  opts = opts or {}
  local bytes = BLK * 4
  return kernel("ring_copy") { arch = "sm_90a", in_specs = { Tile(nb * BLK, f32) }, out_specs = { Tile(nb * BLK, f32) },
    block = { 96 },
    function(X, Out)
      local buf = smem.alloc(f32, stages * BLK, { align = 128 })
      local full, empty = pipeline.barriers(stages, 1), pipeline.barriers(stages, 2)
      local tid = reg.from(ptx.special.tid.x(), u32)
      ptx.if_(tid:eq(0), function()
        full:init()
        empty:init()
        ptx.fence.mbarrier_init()
      end)
      ptx.bar_sync(0)
      --- Stage s of the buffer (a number or register stage), plus extra bytes (a register).
      local function stage_addr(s, extra)
        if type(s) == "number" then
          if extra then return ptx.addr(buf:base() + extra, s * bytes) end
          return buf[s * BLK]
        end
        local base = s:fma(bytes, buf:base())
        return ptx.addr(extra and base + extra or base)
      end
      ptx.if_(tid:eq(64), function()
        local px = ptx.global_ptrs(X)
        local ring = pipeline.ring(stages, { phase = 1, unrolled = opts.unrolled })
        pipeline.kloop(ring, nb, function(i, s, phase)
          if lines then lines.empty = H.here() + 1 end
          empty:at(s):wait(phase)
          local f = full:at(s)
          f:arrive_expect_tx(bytes)
          local src = type(i) == "number" and ptx.addr(px, i * bytes) or ptx.addr(px + i:mul_wide(bytes))
          ptx.cp.async.bulk { dst = stage_addr(s), src = src, size = bytes, mbar = f }
        end)
      end)
      ptx.if_(tid:lt(64), function()
        local po = ptx.global_ptrs(Out) + tid:mul_wide(4)
        local leader = (tid % 32):eq(0)
        local sum = reg.scalar(f32, 0)
        local ring = pipeline.ring(stages, { unrolled = opts.unrolled })
        pipeline.kloop(ring, nb, function(i, s, phase)
          if lines then lines.full = H.here() + 1 end
          full:at(s):wait(phase)
          local v = reg.scalar(f32)
          ptx.inst.ld.shared.f32(v, stage_addr(s, tid * 4))
          ptx.inst.add.f32(sum, sum, v)
          local dst = type(i) == "number" and ptx.addr(po, i * bytes) or ptx.addr(po + i:mul_wide(bytes))
          ptx.st.global(dst, sum)
          if opts.release ~= false then empty:at(s):when(leader):arrive() end
        end)
      end)
      ptx.ret()
    end }
end

--- The CPU reference: running f32 sums over the blocks, per column.
local function prefix_sums(x, nb)
  local out, acc = {}, {}
  for i = 0, nb - 1 do
    for t = 1, BLK do
      acc[t] = H.f32((acc[t] or 0) + x[i * BLK + t])
      out[i * BLK + t] = acc[t]
    end
  end
  return out
end

describe("a multi-stage cp.async.bulk pipeline on pyptx.pipeline", function()
  runtime.use(H.emu())

  it("matches the CPU's running sums on random inputs (1 to 3 stages, rings in registers and unrolled)", function()
    local seed = 1
    for _, case in ipairs { { 7, 1 }, { 7, 2 }, { 8, 3 }, { 2, 3 }, { 9, 2, true }, { 5, 3, true } } do
      local nb, stages, unrolled = case[1], case[2], case[3]
      local x = H.rand_f32(nb * BLK, seed, nil, 4, 4)
      seed = seed + 1
      local out = ring_copy(nb, stages, { unrolled = unrolled })(tensor.from_table(x, f32, { nb * BLK })):values()
      local want = prefix_sums(x, nb)
      for j = 1, nb * BLK do
        if out[j] ~= want[j] then
          error(("%d blocks, %d stages%s: element %d is %s, want %s"):format(nb, stages, unrolled and " (unrolled)" or "",
            j, tostring(out[j]), tostring(want[j])))
        end
      end
    end
  end)

  it("assembles with ptxas for sm_90a", function()
    H.assert_ptxas(ring_copy(8, 3):specialize().ptx, "sm_90a")
    H.assert_ptxas(ring_copy(5, 2, { unrolled = true }):specialize().ptx, "sm_90a")
  end)

  it("deadlocks, named at a wait's line, when the consumers never release a stage", function()
    local lines = {}
    local k = ring_copy(4, 2, { release = false }, lines)
    local ok, err = pcall(k, tensor.from_table(H.rand_f32(4 * BLK, 9, nil, 4, 4), f32, { 4 * BLK }))
    assert.is_false(ok)
    -- the producer waits on empty[s] forever; the consumers on a full[s] it never arms
    local at = tostring(err):match("pipeline_spec%.lua:(%d+): mbarrier%.try_wait%.parity")
    assert.is_truthy(at == tostring(lines.empty) or at == tostring(lines.full), tostring(err))
    assert.matches("deadlock: this wait for the mbarrier phase with parity", tostring(err), 1, true)
  end)
end)
