-- The emulator's adversarial schedule (LUAPTX_EMU_SCHEDULE=adversarial:<seed>,
-- the device option "schedule"): asynchronous copies and wgmma results
-- complete as late as the memory model allows and warps interleave in
-- seeded orders. A planted timing bug of each kind is reported at its Lua
-- line under it (each test says whether the default schedule misses it),
-- every example that runs on the emulator passes under three seeds, and
-- the variable and the option are parsed strictly.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local core = require "pyptx.core"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types
local u32 = T.u32

local SEEDS = { 1, 2, 3 }

local adversarial = H.adversarial

--- fn(...) with dev as the current device (the file's default emulator after).
local function on(dev, fn, ...)
  runtime.use(dev)
  local res = { pcall(fn, ...) }
  runtime.use(H.emu())
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

--- The error fn(...) raises on dev, as text (nil when it runs through).
local function error_on(dev, fn, ...)
  local ok, err = pcall(on, dev, fn, ...)
  return not ok and tostring(err) or nil
end

local PIPE, PIPE_MODULE = "examples/lib/tma_pipeline.lua", "examples.lib.tma_pipeline"

--- An example loaded afresh on the shared TMA pipeline (examples/lib) with
-- a planted bug: old becomes new there. Returns the example and the
-- sources of the example and of the pipeline.
local function on_planted_pipeline(path, old, new) return H.planted_on(path, nil, PIPE_MODULE, PIPE, { old, new }) end

--- A TMA store of a 32 x 32 u32 tile written by st.shared. opts.fence: a
-- fence.proxy.async before the barrier; opts.overwrite: thread 0 stores to
-- the tile again before cp.async.bulk.wait_group.read. Returns the kernel
-- and the lines of the store and of the overwrite.
local function tma_store(opts)
  local lines = {}
  local k = kernel "sched_tma_store" { arch = "sm_90a", out_specs = { Tile(32, 32, u32) }, block = { 128 },
    function(C)
      local s = smem.alloc(u32, 32 * 32, { align = 1024 })
      local tid = reg.from(ptx.special.tid.x(), u32)
      local zero = reg.scalar(u32, 0)
      for i = 0, 7 do
        local e = tid + i * 128
        lines.write = lines.write or H.here(); ptx.inst.st.shared.u32(ptx.addr(s:base() + e * 4), e)
      end
      if opts.fence then ptx.fence.proxy_async("shared::cta") end
      ptx.bar_sync(0)
      ptx.if_(tid:eq(0), function()
        lines.store = H.here(); ptx.cp.async.bulk.tensor_2d { dst = C:tma_desc { box = { 32, 32 } }, src = s[0], coord = { zero, zero } }
        ptx.cp.async.bulk.commit_group()
        if opts.overwrite then lines.overwrite = H.here(); ptx.inst.st.shared.u32(ptx.addr(s:base()), 7) end
        ptx.cp.async.bulk.wait_group_read(0)
      end)
      ptx.ret()
    end,
  }
  k:specialize()
  return k, lines
end

describe("the adversarial schedule", function()
  runtime.use(H.emu())

  it("reports a cp.async.wait_group that waits for too few groups at the reading line (default misses it)", function()
    local path = "examples/ampere/gemm_pipelined.lua"
    local m, src = H.planted(path, "ptx.inst.cp.async.wait_group(S - 2)", "ptx.inst.cp.async.wait_group(S - 1)")
    assert.is_true((on(H.emu(), m.check, 128, 128, 128)))          -- the default schedule misses it
    local want = ("^[^\n]*%s:%d: ldmatrix[^\n]*: reads shared memory at offset 0x%%x+ that %s:%d: cp%%.async%%.cg%%.shared%%.global "
      .. "[^\n]* has not finished writing: a cp%%.async completes only at a cp%%.async%%.wait_group / wait_all of the issuing "
      .. "thread that covers its group"):format(H.lit(path), H.line_of(src, "ptx.ldmatrix { d = fa[mi]"), H.lit(path),
      H.line_of(src, "ptx.inst.cp.async.cg.shared.global(ptx.addr(da"))
    for _, seed in ipairs(SEEDS) do
      local err = error_on(adversarial(seed), m.check, 128, 128, 128)
      assert.matches(want .. ".*%(adversarial schedule, seed " .. seed .. "%)", err)
    end
  end)

  it("reports a barrier placed before cp.async.wait_group instead of after it (default misses it)", function()
    local lines = {}
    local k = kernel "sched_cpa_barrier" { arch = "sm_80", in_specs = { Tile(64, u32) }, out_specs = { Tile(64, u32) }, block = { 64 },
      function(X, Y)
        local px, py = ptx.global_ptrs(X, Y)
        local s = smem.alloc(u32, 64)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local v = reg.scalar(u32)
        lines.copy = H.here(); ptx.inst.cp.async.ca.shared.global(ptx.addr(s:base() + tid * 4), ptx.addr(px + tid:mul_wide(4)), 4)
        ptx.inst.cp.async.commit_group()
        ptx.bar_sync(0)                                              -- the bug: the barrier belongs after the wait
        ptx.inst.cp.async.wait_group(0)
        lines.read = H.here(); ptx.inst.ld.shared.u32(v, ptx.addr(s:base() + ((tid + 32) % 64) * 4))
        ptx.st.global(ptx.addr(py + tid:mul_wide(4)), v)
        ptx.ret()
      end,
    }
    local function run() return k(tensor.arange(64, u32)) end
    local y = on(H.emu(), run):values()                               -- the default schedule misses it
    for i = 1, 64 do assert.equal((i + 31) % 64, y[i]) end
    local want = ("schedule_spec%%.lua:%d: ld%%.shared%%.u32 [^\n]*: reads shared memory at offset 0x%%x+ that [^\n]*schedule_spec"
      .. "%%.lua:%d: cp%%.async%%.ca%%.shared%%.global [^\n]* has not finished writing"):format(lines.read, lines.copy)
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), run)) end
  end)

  it("lands cp.async data at the wait: a read by another warp before the next barrier is a race (default misses it)", function()
    local lines = {}
    local k = kernel "sched_cpa_flag" { arch = "sm_80", in_specs = { Tile(32, u32) }, out_specs = { Tile(33, u32) }, block = { 64 },
      function(X, Y)
        local px, py = ptx.global_ptrs(X, Y)
        local s = smem.alloc(u32, 32)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local flag = ptx.addr(py + 32 * 4)
        ptx.if_(tid:eq(0), function() ptx.st.global(flag, reg.scalar(u32, 0)) end)
        ptx.if_(tid:lt(32), function()
          lines.copy = H.here(); ptx.inst.cp.async.ca.shared.global(ptx.addr(s:base() + tid * 4), ptx.addr(px + tid:mul_wide(4)), 4)
          ptx.inst.cp.async.commit_group()
        end)
        ptx.bar_sync(0)
        ptx.if_(tid:lt(32), function()
          ptx.inst.cp.async.wait_group(0)
          ptx.if_(tid:eq(0), function() ptx.st.global(flag, reg.scalar(u32, 1)) end)   -- a flag, not a barrier
        end, function()
          local f, v = reg.scalar(u32), reg.scalar(u32)
          ptx.loop(function()
            ptx.inst.ld.volatile.global.u32(f, flag)
            return f:ne(1)
          end)
          lines.read = H.here(); ptx.inst.ld.shared.u32(v, ptx.addr(s:base() + (tid - 32) * 4))
          ptx.st.global(ptx.addr(py + (tid - 32):mul_wide(4)), v)
        end)
        ptx.ret()
      end,
    }
    local function run() return k(tensor.arange(32, u32)) end
    local y = on(H.emu(), run):values()                               -- the default schedule misses it
    for i = 1, 32 do assert.equal(i - 1, y[i]) end
    local want = ("schedule_spec%%.lua:%d: ld%%.shared%%.u32 [^\n]*: shared%%-memory race %%(read after write%%): 4 bytes at "
      .. "shared offset 0x0, which warp 0 wrote since the last barrier %%(at [^\n]*schedule_spec%%.lua:%d: cp%%.async%%.ca"):format(
      lines.read, lines.copy)
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), run)) end
  end)

  it("reports a TMA store of shared memory written without fence.proxy.async (the default schedule reports it too)", function()
    local k, lines = tma_store { fence = false }
    local want = ("schedule_spec%%.lua:%d: cp%%.async%%.bulk%%.tensor[^\n]*: this TMA store reads shared memory at 0x%%x+ through "
      .. "the async proxy, but [^\n]*schedule_spec%%.lua:%d: st%%.shared%%.u32 [^\n]* wrote it through the generic proxy with "
      .. "no fence%%.proxy%%.async in between"):format(lines.store, lines.write)
    assert.matches(want, error_on(H.emu(), k))
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), k)) end
    local good = tma_store { fence = true }
    for _, seed in ipairs(SEEDS) do
      local c = on(adversarial(seed), good)
      local v = c:values()
      for i = 1, 32 * 32 do assert.equal(i - 1, v[i]) end
    end
  end)

  it("reports a TMA store's source overwritten before cp.async.bulk.wait_group.read (default misses it)", function()
    local k, lines = tma_store { fence = true, overwrite = true }
    local c = on(H.emu(), k)                                      -- the default schedule misses it
    assert.equal(0, c:values()[1])
    local want = ("schedule_spec%%.lua:%d: st%%.shared%%.u32 [^\n]*: writes shared memory at offset 0x0 that [^\n]*schedule_spec"
      .. "%%.lua:%d: cp%%.async%%.bulk%%.tensor[^\n]* still reads: a TMA store, bulk copy or bulk reduction reads its source "
      .. "until a cp%%.async%%.bulk%%.wait_group%%(%%.read%%) of the issuing thread covers its bulk group"):format(lines.overwrite,
      lines.store)
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), k)) end
  end)

  it("reports a ring stage refilled by TMA while a consumer's wgmma still reads it", function()
    -- The consumer releases each stage right after committing its wgmma
    -- group, before the wgmma.wait_group that covers it (Consumer:mainloop's
    -- early_release).
    local path = "examples/hopper/gemm.lua"
    local m, src = on_planted_pipeline(path, 'pipe.mutant == "early_release"', "true")
    local want = ("^[^\n]*%s:%d: cp%%.async%%.bulk%%.tensor%%.2d[^\n]*: writes shared memory at offset 0x%%x+ that %s:%d: "
      .. "wgmma%%.mma_async[^\n]* still reads: wgmma%%.mma_async reads its shared%%-memory operands until a wgmma%%.wait_group "
      .. "covers its group; release the buffer after that wait"):format(H.lit(path),
      H.line_of(src, "ptx.cp.async.bulk.tensor_2d{ dst = sA:stage(s), coord = { k0, m0 }"), H.lit(path),
      H.line_of(src, "tp.mma { d = acc, n = BN"))   -- the pipeline is a pyptx.helper(): its wgmma names the calling line
    for _, seed in ipairs(SEEDS) do
      assert.matches(want, error_on(adversarial(seed), m.check, 128, 128, 256, { STAGES = 2 }))
    end
  end)

  it("reports wgmma accumulators read before wgmma.wait_group (default misses it)", function()
    local path = "examples/hopper/flash_attention.lua"
    local m, src = on_planted_pipeline(path, "ptx.wgmma.wait_group(0)", "-- no wgmma.wait_group")
    assert.is_true((on(H.emu(), m.check, 1, 128, 64)))
    local want = ("^[^\n]*%s:%d: max%%.f32 [^\n]*: reads %%%%f%%d+, an accumulator of %s:%d: wgmma%%.mma_async[^\n]*, before a "
      .. "wgmma%%.wait_group covers its group: the result is not there yet"):format(H.lit(path),
      H.line_of(src, "local mx = sacc[2 * h]:max"), H.lit(path), H.line_of(src, "tp.mma { d = sacc"))
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), m.check, 1, 128, 64)) end
  end)

  it("reports a TMA load's destination read before the mbarrier wait (default misses it)", function()
    local lines = {}
    local k = kernel "sched_early_read" { arch = "sm_90a", in_specs = { Tile(32, 32, u32) }, out_specs = { Tile(32, u32) },
      block = { 32 },
      function(A, O)
        local s = smem.alloc(u32, 32 * 32, { align = 1024 })
        local bar = smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), u32)
        local zero, v = reg.scalar(u32, 0), reg.scalar(u32)
        ptx.if_(tid:eq(0), function()
          ptx.mbarrier.init(bar[0], 1)
          ptx.fence.mbarrier_init()
          local d = A:tma_desc { box = { 32, 32 } }
          ptx.mbarrier.arrive_expect_tx(bar[0], d.bytes)
          lines.load = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { zero, zero }, mbar = bar[0] }
        end)
        lines.read = H.here(); ptx.inst.ld.shared.u32(v, ptx.addr(s:base() + tid * 4))     -- before the wait
        ptx.mbarrier.wait(bar[0], 0)
        ptx.st.global(ptx.addr(ptx.global_ptrs(O) + tid:mul_wide(4)), v)
        ptx.ret()
      end,
    }
    local vals = {}
    for i = 1, 32 * 32 do vals[i] = i end
    local function run() return k(tensor.from_table(vals, u32, { 32, 32 })) end
    local o = on(H.emu(), run):values()                                -- the default schedule misses it
    for i = 1, 32 do assert.equal(i, o[i]) end
    local want = ("schedule_spec%%.lua:%d: ld%%.shared%%.u32 [^\n]*: reads shared memory at offset 0x0 that [^\n]*schedule_spec"
      .. "%%.lua:%d: cp%%.async%%.bulk%%.tensor%%.2d[^\n]* has not finished writing: a bulk or TMA copy completes with the "
      .. "mbarrier phase it signals: wait for that phase %%(mbarrier%%.try_wait%%) first"):format(lines.read, lines.load)
    for _, seed in ipairs(SEEDS) do assert.matches(want, error_on(adversarial(seed), run)) end
  end)

  it("interleaves warps in an order the seed alone decides", function()
    -- Each warp's lane 0 takes a ticket at a barrier-separated point; the
    -- ticket order is the schedule's order of the warps.
    local k = kernel "sched_order" { arch = "sm_80", out_specs = { Tile(16, u32) }, block = { 256 },
      function(O)
        local po = ptx.global_ptrs(O)
        local tid = reg.from(ptx.special.tid.x(), u32)
        ptx.if_(tid:eq(0), function() ptx.st.global(ptx.addr(po + 60), reg.scalar(u32, 0)) end)
        ptx.bar_sync(0)
        ptx.if_((tid % 32):eq(0), function()
          local t = reg.scalar(u32)
          ptx.inst.atom.global.add.u32(t, ptx.addr(po + 60), 1)
          ptx.st.global(ptx.addr(po + t:mul_wide(4)), tid:shr(5))
        end)
        ptx.ret()
      end,
    }
    local function order(dev)
      local o = on(dev, k):values()
      return table.concat(o, ",", 1, 8)
    end
    assert.equal(order(H.emu()), order(H.emu()))
    local seen = {}
    for _, seed in ipairs(SEEDS) do
      local o = order(adversarial(seed))
      assert.equal(o, order(adversarial(seed)))                     -- the same seed, the same order
      seen[o] = true
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.is_true(n >= 2, "three seeds gave one order")
  end)
end)

describe("every example that runs on the emulator, under three adversarial seeds", function()
  runtime.use(H.emu())

  --- Check a module's example at each seed; every element against its reference.
  local function under_seeds(m, ...)
    for _, seed in ipairs(SEEDS) do
      local ok, report = on(adversarial(seed), m.check, ...)
      assert(ok, ("seed %d: %s"):format(seed, report.message))
    end
  end

  local ROWWISE = { rms_norm = { 3, 512 }, layer_norm = { 3, 512 }, softmax = { 4, 256 }, swiglu = { 2, 512, { fused = true } } }
  for _, arch in ipairs { "hopper", "ampere", "blackwell" } do
    it(("passes rms_norm, layer_norm, softmax and swiglu for %s"):format(arch), function()
      for name, sz in pairs(ROWWISE) do
        local opts = {}
        for key, v in pairs(sz[3] or {}) do opts[key] = v end
        opts.arch = ({ ampere = "sm_80", blackwell = "sm_100a" })[arch]
        under_seeds(require("examples.hopper." .. name), sz[1], sz[2], opts)
      end
    end)
  end

  it("passes the Ampere gemm and gemm_pipelined (2 and 3 stages)", function()
    under_seeds(require "examples.ampere.gemm", 128, 128, 64)
    under_seeds(require "examples.ampere.gemm_pipelined", 128, 128, 128)
    under_seeds(require "examples.ampere.gemm_pipelined", 128, 128, 96, { stages = 2 })
  end)

  it("passes the Hopper gemm: a wrapping ring, a persistent grid, clusters of 2 with multicast", function()
    local gemm = require "examples.hopper.gemm"
    under_seeds(gemm, 128, 128, 256, { STAGES = 2 })
    under_seeds(gemm, 256, 128, 192, { STAGES = 2, PERSISTENT = 2, BN = 64 })
    under_seeds(gemm, 128, 256, 192, { STAGES = 2, CLUSTER = 2, BN = 64 })
  end)

  it("passes the Hopper grouped_gemm (ragged groups, persistent)", function()
    under_seeds(require "examples.hopper.grouped_gemm", { 37, 1, 64 }, 64, 192, { BN = 64, STAGES = 2, PERSISTENT = 2 })
  end)

  it("passes the Hopper flash_attention (2 stages, causal, 1 stage)", function()
    local fa = require "examples.hopper.flash_attention"
    under_seeds(fa, 1, 256, 64, { STAGES = 2 })
    under_seeds(fa, 1, 256, 64, { causal = true })
    under_seeds(fa, 1, 128, 64, { STAGES = 1 })
  end)
end)

describe("LUAPTX_EMU_SCHEDULE and the schedule option", function()
  it("selects the adversarial schedule and its seed, and names it in the device's description", function()
    H.with_env({ LUAPTX_EMU_SCHEDULE = "adversarial:42" }, function()
      local dev = runtime.open("emu")
      assert.equal(42, dev:option("schedule"))
      assert.matches("adversarial schedule seed 42%)$", dev.name)
    end)
    H.with_env({ LUAPTX_EMU_SCHEDULE = "default" }, function() assert.equal(-1, runtime.open("emu"):option("schedule")) end)
    H.with_env({ LUAPTX_EMU_SCHEDULE = false }, function() assert.equal(-1, runtime.open("emu"):option("schedule")) end)
  end)

  it("refuses a value that is not default or adversarial:<seed>, naming what is valid", function()
    for _, bad in ipairs { "adversarial", "adversarial:", "adversarial:x", "adversarial:-1", "adversarial:1.5", "chaos:1", "Default" } do
      H.with_env({ LUAPTX_EMU_SCHEDULE = bad }, function()
        local ok, err = pcall(runtime.open, "emu")
        assert.is_false(ok)
        assert.equal(("LUAPTX_EMU_SCHEDULE=%s: valid: default, or adversarial:<n> with n an integer in 0..9223372036854775807 "
          .. "(the emulator's schedule: default, or adversarial with a seed)"):format(bad), err)
      end)
    end
  end)

  it("refuses a schedule option below -1 through the device", function()
    local dev = runtime.open("emu")
    local line
    local ok, err = pcall(function()
      line = H.here(); dev:set_option("schedule", -2)
    end)
    assert.is_false(ok)
    assert.matches("^[^\n]*schedule_spec%.lua:" .. line .. ": device option schedule: emu option schedule = %-2: valid "
      .. "%-1%.%.9223372036854775807 %(%-1 for the default schedule", err)
    assert.equal(-1, core.device_set_option(dev.handle, "schedule", -5))
    assert.equal(-1, dev:option("schedule"))
  end)
end)
