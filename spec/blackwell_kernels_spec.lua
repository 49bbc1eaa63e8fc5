-- Blackwell kernels beyond gemm.lua and tcgen05_suite.lua (issue 16 item
-- 11; the tcgen05 probes: accumulate, epilogue partition, ld phases, ld to
-- registers, round trip): each assembles with ptxas for sm_100a without spills, runs on the
-- emulator against its CPU reference at two or more sizes on fresh random
-- inputs (every element), and fails or is reported when a commit, wait,
-- fence or barrier it needs is taken out.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local ptx = pyptx.ptx

runtime.use(H.emu())

--- Run fn with ptx namespace t's field f a no-op when called from
-- tcgen05_probes.lua (elsewhere unchanged); returns pcall's results.
local function without(t, f, fn)
  local saved = t[f]
  t[f] = function(...)
    if debug.getinfo(2, "S").short_src:find("tcgen05_probes%.lua$") then return end
    return saved(...)
  end
  local ok, res, report = pcall(fn)
  t[f] = saved
  return ok, res, report
end

describe("examples/blackwell/tcgen05_probes.lua", function()
  local probes = dofile "examples/blackwell/tcgen05_probes.lua"

  for _, c in ipairs(probes.cases) do
    it("matches the CPU reference for " .. c.name .. ", every element, fresh inputs", function()
      local ok, report = probes.check(c)
      assert.is_true(ok, c.name .. ": " .. report.message)
      assert.is_true(report.count > 0)
    end)

    it("assembles " .. c.name .. " with ptxas for sm_100a without spills", function()
      local report = H.assert_ptxas(c.kernel, "sm_100a")
      local r = report["tc_probe_" .. c.name]
      assert.are.equal(0, r.spill_stores + r.spill_loads)
    end)
  end

  it("runs the epilogue-partition probe at two sizes", function()
    local n = 0
    for _, c in ipairs(probes.cases) do if c.name:match("^epilogue_partition_%d+$") then n = n + 1 end end
    assert.is_true(n >= 2)
  end)

  it("derives the ld layouts from CUTLASS's tables and checks them against the ISA's lanes x bits", function()
    -- 16x64b: thread l, register j -> lane l/4 + 8 (l % 2), column (l/2) % 2 + 2 j (thr (2,2,8):(512N,32,64N))
    local p = probes.placement("16x64b", 2)
    assert.are.same({ 8, 1 }, { p.place(3, 0) })
    assert.are.same({ 9, 2 }, { p.place(5, 1) })
    -- 16x256b.x1: register j of thread l -> lane l/4 + 8 (j/2), column 2 (l%4) + j%2
    local q = probes.placement("16x256b", 1)
    assert.are.same({ 8 + 1, 2 * 3 + 1 }, { q.place(7, 3) })
    assert.are.equal(4, q.regs)
    -- every register of .32x32b.x4 in its own lane, in order
    assert.are.same({ 31, 3 }, { probes.placement("32x32b", 4).place(31, 3) })
  end)

  it("runs the accumulate probe at two sizes and more than one round", function()
    local sizes = {}
    for _, c in ipairs(probes.cases) do
      local n, steps = c.name:match("^accumulate_(%d+)_(%d+)$")
      if n and tonumber(steps) > 1 then sizes[n] = true end
    end
    assert.is_truthy(next(sizes) and next(sizes, next(sizes)), "fewer than two sizes")
  end)

  -- each mutation, on a fresh 3-round probe: the launch stops or the result is wrong.
  -- (Taking out a tcgen05 fence or wait, from this probe, the others and
  -- gemm.lua: spec/tcgen05_fences_spec.lua.)
  local MUTATIONS = {
    { "the mbarrier wait", ptx.mbarrier, "wait", "tcgen05_probes%.lua:%d+: tcgen05%.mma.- may still be writing it" },
    { "the tcgen05.commit", ptx.tcgen05, "commit", "tcgen05_probes%.lua:%d+: mbarrier%.try_wait.- deadlock" },
    { "the CTA barrier between rounds", ptx, "bar_sync", "tcgen05_probes%.lua:%d+: mbarrier%.try_wait.- deadlock" },
  }
  for _, m in ipairs(MUTATIONS) do
    it("fails or reports the accumulate probe without " .. m[1], function()
      local ok, res, report = without(m[2], m[3], function()
        local c = probes.accumulate(32, 3)
        return probes.check(c)
      end)
      assert.is_false(ok, "the probe still ran without " .. m[1] .. ": " .. tostring(report and report.message))
      assert.matches(m[4], tostring(res))
    end)
  end
end)
