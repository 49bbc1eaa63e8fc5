-- The two GEMMs ported from pyptx's Ampere examples (issue 16 item 9):
-- examples/ampere/gemm_2stage.lua (64x64, two cp.async buffers, ld.shared
-- fragments) and examples/ampere/gemm_fast.lua (128x128, ldmatrix,
-- register double-buffering, serpentine mma order). Each assembles with
-- ptxas without spills, matches its CPU reference on the emulator at
-- several sizes, and each of its mutants (opts.mutant: one barrier, the
-- cp.async wait, the serpentine or double-buffer index broken) fails.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local T = pyptx.types

local adversarial = H.adversarial

local check_on = H.check_on

local EXAMPLES = {
  gemm_2stage = { sizes = { { 64, 64, 32 }, { 128, 192, 96 }, { 256, 128, 160 } } },
  gemm_fast = { sizes = { { 128, 128, 32, { stages = 2 } }, { 256, 128, 160 }, { 128, 256, 96, { stages = 4 } } } },
}

describe("Ampere gemm_2stage and gemm_fast", function()
  runtime.use(H.emu())

  for _, name in ipairs { "gemm_2stage", "gemm_fast" } do
    local m = require("examples.ampere." .. name)

    it(name .. " follows the kernel-script convention", function()
      for _, f in ipairs { "build", "main", "reference", "inputs", "args", "check", "tolerance" } do assert.is_function(m[f], f) end
      assert.is_true(#m.kernels >= 1)
    end)

    it(name .. " assembles with ptxas for sm_80 without spills", function()
      H.need_ptxas()
      for _, k in ipairs(m.kernels) do
        local s = k:specialize()
        assert.equal("sm_80", s.arch)
        local r = H.assert_ptxas(s, "sm_80")[k.name]
        assert.equal(0, (r.spill_stores or 0) + (r.spill_loads or 0))
        assert.is_true(r.registers > 0 and r.registers <= 255)
      end
    end)

    it(name .. " matches its CPU reference on every element at three sizes, bf16 and f16", function()
      for i, sz in ipairs(EXAMPLES[name].sizes) do
        local opts = {}
        for key, v in pairs(sz[4] or {}) do opts[key] = v end
        opts.dtype = (i % 2 == 0) and T.f16 or T.bf16
        local ok, report = m.check(sz[1], sz[2], sz[3], opts)
        assert.is_true(ok, report.message)
      end
    end)

    it(name .. " passes under three adversarial schedules", function()
      local sz = EXAMPLES[name].sizes[2]
      for _, seed in ipairs { 1, 2, 3 } do
        local ok, msg = check_on(adversarial(seed), m, sz[1], sz[2], sz[3])
        assert(ok, ("seed %d: %s"):format(seed, msg))
      end
    end)

    it(name .. " rejects shapes and mutants that break its constraints", function()
      local err = select(2, pcall(m.build, 100, 256, 128))
      assert.truthy(tostring(err):find("M %% %d+ == 0 is required"), err)
      err = select(2, pcall(m.build, 256, 256, 8))
      assert.truthy(tostring(err):find("K %% %d+ == 0 is required"), err)
      err = select(2, pcall(m.build, 256, 256, 128, { mutant = "bogus" }))
      assert.truthy(tostring(err):find("mutant must be no_wait, no_barrier", 1, true), err)
    end)
  end

  it("run through `luaptx run` at 256x256x128 and exit 0; --summary reports 0 spills", function()
    for _, name in ipairs { "gemm_2stage", "gemm_fast" } do
      local out, _, rc = H.luaptx({ "run", "examples/ampere/" .. name .. ".lua" }, { env = { LUAPTX_DEVICE = "emu" }, merge = true })
      assert.truthy(out:find(name .. "(256, 256, 128, bf16): ok on emu", 1, true), out)
      assert.equal(0, rc, out)
    end
    H.need_ptxas()
    for _, name in ipairs { "gemm_2stage", "gemm_fast" } do
      local out = H.luaptx({ "run", "examples/ampere/" .. name .. ".lua", "--summary" }, { merge = true })
      assert.truthy(out:find("\n" .. name .. "%s+sm_80 .- 0\n"), out)
    end
  end)

  it("gemm_fast walks the accumulator grid in serpentine order", function()
    local m = require "examples.ampere.gemm_fast"
    local order = {}
    for mi = 0, 3 do for j = 0, 7 do order[#order + 1] = m.serpentine(mi, j) end end
    assert.equal("0123456776543210012345677654321", table.concat(order):sub(1, 31))
    -- consecutive mma.sync across a turn reuse the B fragment
    for mi = 0, 2 do assert.equal(m.serpentine(mi, 7), m.serpentine(mi + 1, 0)) end
  end)
end)

describe("mutants of gemm_2stage and gemm_fast", function()
  runtime.use(H.emu())
  local SIZE = { 128, 128, 128 }

  --- Every schedule's verdict on a mutant: { [sched] = message or false when it passed }.
  local function verdicts(m, mutant)
    local out = {}
    for _, sched in ipairs { "default", 1, 2, 3 } do
      local dev = sched == "default" and H.emu() or adversarial(sched)
      local ok, msg = check_on(dev, m, SIZE[1], SIZE[2], SIZE[3], { mutant = mutant })
      out[sched] = not ok and msg or false
    end
    return out
  end

  local CASES = {
    -- example, mutant, what the report says, caught in the default schedule too
    { "gemm_2stage", "no_wait", "has not finished writing: a cp.async completes", false },
    { "gemm_2stage", "no_barrier", "shared memory", true },
    { "gemm_2stage", "no_trailing_barrier", "shared", true },
    { "gemm_fast", "no_wait", "has not finished writing: a cp.async completes", false },
    { "gemm_fast", "no_barrier", "shared memory", true },
    { "gemm_fast", "serpentine", "elements differ", true },
    { "gemm_fast", "double_buffer", "which this thread never wrote", true },
  }
  for _, c in ipairs(CASES) do
    it(("%s with mutant %s fails under every adversarial seed%s"):format(c[1], c[2], c[4] and " and the default schedule" or ""), function()
      local v = verdicts(require("examples.ampere." .. c[1]), c[2])
      for _, seed in ipairs { 1, 2, 3 } do
        assert.truthy(v[seed], ("seed %d let the %s mutant through"):format(seed, c[2]))
        assert.truthy(v[seed]:find(c[3], 1, true) or (c[3] == "shared" and v[seed]:find("shared")), v[seed])
      end
      if c[4] then assert.truthy(v.default, "the default schedule let the mutant through") end
    end)
  end
end)
