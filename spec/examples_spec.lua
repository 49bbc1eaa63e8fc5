-- The examples under examples/{hopper,ampere,blackwell}: each is a kernel
-- script (build, kernels, main, reference), every kernel assembles with
-- ptxas for the arch its directory targets, traces deterministically, and
-- build() rejects shapes that break the constraints it documents.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"

local FAMILIES = {
  { dir = "hopper", arch = "sm_90a" },
  { dir = "ampere", arch = "sm_80" },
  { dir = "blackwell", arch = "sm_100a" },
}

-- Per example: shapes build() must reject, each with the constraint text
-- its message must name.
local EXAMPLES = {
  rms_norm = {
    { args = { 4, 1000 }, names = "N % 128 == 0" },
    { args = { 4, 512, { threads = 256 } }, names = "N % (4 * threads) == 0" },
    { args = { 4, 65536 }, names = "N / (4 * threads) <= 8" },
    { args = { 0, 4096 }, names = "B must be a positive integer" },
    { args = { 4, 4096, { threads = 100 } }, names = "threads must be a multiple of 32" },
  },
  layer_norm = {
    { args = { 4, 1000 }, names = "N % 128 == 0" },
    { args = { 4, 1536, { threads = 256 } }, names = "N % (4 * threads) == 0" },
    { args = { 4, 65536 }, names = "N / (4 * threads) <= 8" },
    { args = { 2.5, 4096 }, names = "B must be a positive integer" },
  },
  softmax = {
    { args = { 4, 4100 }, names = "N % 128 == 0" },
    { args = { 4, 640, { threads = 128 } }, names = "N % (4 * threads) == 0" },
    { args = { 4, 131072 }, names = "N / (4 * threads) <= 16" },
    { args = { 4, 65536 }, names = "N <= 32768" },
    { args = { 4, "4096" }, names = "N must be a positive integer" },
  },
  swiglu = {
    { args = { 4, 1000 }, names = "N % 128 == 0" },
    { args = { 4, 1024, { threads = 512, unroll = 1 } }, names = "N % (4 * threads * unroll) == 0" },
    { args = { 4, 1024, { fused = true, threads = 256, unroll = 2 } }, names = "N % (4 * threads * unroll) == 0" },
    { args = { -1, 1024 }, names = "B must be a positive integer" },
    { args = { 4, 1024, { unroll = 9 } }, names = "unroll must be an integer in [1, 8]" },
  },
}
local ORDER = { "rms_norm", "layer_norm", "softmax", "swiglu" }

--- Load an example file afresh (not through require's cache).
local function load_example(dir, name)
  return dofile(("examples/%s/%s.lua"):format(dir, name))
end

local run_main = H.run_main

for _, fam in ipairs(FAMILIES) do
  for _, name in ipairs(ORDER) do
    local path = ("examples/%s/%s.lua"):format(fam.dir, name)

    describe(path, function()
      local m = load_example(fam.dir, name)

      it("follows the kernel-script convention", function()
        assert.is_function(m.build)
        assert.is_function(m.main)
        assert.is_function(m.reference)
        assert.is_function(m.inputs)
        assert.is_table(m.kernels)
        assert.is_true(#m.kernels >= 1)
        for _, k in ipairs(m.kernels) do assert.is_true(pyptx.is_kernel(k)) end
      end)

      it("targets " .. fam.arch .. " with every kernel", function()
        for _, k in ipairs(m.kernels) do
          local s = k:specialize()
          assert.are.equal(fam.arch, s.arch)
          assert.is_truthy(s.ptx:find(".target " .. fam.arch, 1, true))
        end
      end)

      it("assembles every kernel with ptxas for " .. fam.arch, function()
        local specs = {}
        for i, k in ipairs(m.kernels) do
          specs[i] = k:specialize()
          assert.are.equal(fam.arch, specs[i].arch)
        end
        for i, k in ipairs(m.kernels) do
          local s = specs[i]
          local ok, report, log = H.ptxas(s.ptx, s.arch)
          assert(ok, ("%s (%s) does not assemble:\n%s"):format(k.name, s.arch, tostring(log)))
          local r = report[k.name]
          assert.is_table(r)
          assert.are.equal(0, r.spill_stores + r.spill_loads)
        end
      end)

      it("traces to byte-identical PTX every time", function()
        local again = load_example(fam.dir, name)
        assert.are.equal(#m.kernels, #again.kernels)
        for i, k in ipairs(m.kernels) do
          local s = k:specialize()
          assert.are.equal(s.ptx, again.kernels[i]:ptx())
          -- Kernel:trace bypasses the per-specialization cache.
          assert.are.equal(s.ptx, k:trace(k:values(), s.arch).ptx)
        end
      end)

      it("rejects shapes that break its constraints, at the caller's line", function()
        for _, case in ipairs(EXAMPLES[name]) do
          -- Not a tail call: the error's level 2 must land on this line.
          local ok, err = pcall(function()
            local k = m.build(unpack(case.args, 1, 3))
            return k
          end)
          assert.is_false(ok)
          assert.is_truthy(tostring(err):find(case.names, 1, true),
            ("expected the message to name %q, got: %s"):format(case.names, tostring(err)))
          assert.is_truthy(tostring(err):find("examples_spec%.lua:%d+: "),
            "expected the error at the caller's line, got: " .. tostring(err))
        end
      end)

      it("prints a PTX summary from main with --summary, returning 0 or nil", function()
        local rc, out = run_main(m, { "--summary" })
        assert.is_true(rc == nil or rc == 0)
        for _, k in ipairs(m.kernels) do
          assert.is_truthy(out:find(k.name, 1, true))
        end
        assert.is_truthy(out:find(fam.arch, 1, true))
      end)
    end)
  end
end

--- Assert two lists of numbers agree to within 1e-12.
local function assert_close(want, got)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(want[i] - got[i]) < 1e-12, ("element %d: want %.17g, got %.17g"):format(i, want[i], got[i]))
  end
end

-- The CPU references (double precision) on rows small enough to work out by hand.
describe("example references", function()
  it("normalizes a row by its RMS in rms_norm", function()
    local m = require "examples.hopper.rms_norm"
    local y = m.reference { x = { 3, 4, 0, 0 }, w = { 1, 2, 1, 1 }, B = 1, N = 4, eps = 0 }
    -- mean(x^2) = 25/4, rstd = 2/5
    assert_close({ 1.2, 3.2, 0, 0 }, y)
  end)

  it("centers and scales a row in layer_norm", function()
    local m = require "examples.hopper.layer_norm"
    local y = m.reference { x = { 1, 3, 1, 3 }, gamma = { 1, 1, 2, 2 }, beta = { 0, 0, 0, 1 }, B = 1, N = 4, eps = 0 }
    assert_close({ -1, 1, -2, 3 }, y)
  end)

  it("sums every softmax row to one", function()
    local m = require "examples.hopper.softmax"
    local inp = m.inputs(3, 8, 5)
    local y = m.reference(inp)
    for r = 0, 2 do
      local s = 0
      for i = 1, 8 do s = s + y[r * 8 + i] end
      assert.is_true(math.abs(s - 1) < 1e-12)
    end
    local two = m.reference { x = { 0, math.log(3) }, B = 1, N = 2 }
    assert.is_true(math.abs(two[1] - 0.25) < 1e-12 and math.abs(two[2] - 0.75) < 1e-12)
  end)

  it("gives the same SwiGLU for split and fused layouts", function()
    local m = require "examples.hopper.swiglu"
    local split = m.inputs(2, 4, 3)
    local gu = {}
    for r = 0, 1 do
      for i = 1, 4 do
        gu[r * 8 + i], gu[r * 8 + 4 + i] = split.gate[r * 4 + i], split.up[r * 4 + i]
      end
    end
    assert.are.same(m.reference(split), m.reference { gate_up = gu, B = 2, N = 4 })
    local one = m.reference { gate = { 0, 2 }, up = { 5, 3 }, B = 1, N = 2 }
    assert.are.equal(0, one[1])
    assert.is_true(math.abs(one[2] - 2 / (1 + math.exp(-2)) * 3) < 1e-15)
  end)

  it("draws inputs with no zeros", function()
    for _, name in ipairs(ORDER) do
      local inp = require("examples.hopper." .. name).inputs(2, 128, 1)
      for key, v in pairs(inp) do
        if type(v) == "table" then
          for i = 1, #v do assert(v[i] ~= 0, name .. "." .. key .. "[" .. i .. "] is zero") end
        end
      end
    end
  end)
end)

describe("examples on the emulator", function()
  runtime.use(H.emu())

  local SIZES = {
    rms_norm = { { 3, 512 }, { 5, 4096, { threads = 128 } } },
    layer_norm = { { 3, 512 }, { 2, 8192 } },
    softmax = { { 4, 256 }, { 3, 2048, { threads = 64 } } },
    swiglu = { { 3, 512 }, { 2, 2048, { fused = true } } },
  }
  for _, arch in ipairs { "hopper", "ampere", "blackwell" } do
    for _, name in ipairs { "rms_norm", "layer_norm", "softmax", "swiglu" } do
      it(("matches the CPU reference for %s/%s at two sizes, every element, fresh inputs"):format(arch, name), function()
        local m = require(("examples.%s.%s"):format(arch, name))
        local base = require("examples.hopper." .. name)
        for _, sz in ipairs(SIZES[name]) do
          local opts = {}
          for k, v in pairs(sz[3] or {}) do opts[k] = v end
          if arch == "ampere" then opts.arch = "sm_80" elseif arch == "blackwell" then opts.arch = "sm_100a" end
          local ok, report = base.check(sz[1], sz[2], opts)
          assert.is_true(ok, ("%s %dx%d: %s"):format(name, sz[1], sz[2], report.message))
          assert.are.equal(sz[1] * sz[2], report.count)
        end
        assert.is_function(m.main)
      end)
    end
  end

  it("catches a kernel that skips part of its output (outputs are poisoned)", function()
    local base = require "examples.hopper.rms_norm"
    local verify = require "pyptx.tools.verify"
    local k = base.build(4, 512)
    k.grid = { 3, 1, 1 }               -- one CTA per row: the last row is never stored
    local inputs = base.inputs(4, 512, 7)
    local ok, report = verify.run { kernel = k, args = base.args(inputs), reference = base.reference(inputs) }
    assert.is_false(ok)
    assert.matches("^512 elements of output 1 were never written %(first at flat index 1536%)", report.message)
  end)

  it("times the launch apart from the trace, the decode and the packing before it", function()
    local base = require "examples.hopper.rms_norm"
    local verify = require "pyptx.tools.verify"
    local inputs = base.inputs(4, 512, 7)
    local ok, report = verify.run { kernel = base.build(4, 512), args = base.args(inputs), reference = base.reference(inputs) }
    assert.is_true(ok, report.message)
    local b = report.before
    for _, key in ipairs { "trace", "load", "pack" } do
      assert.is_number(b[key], key)
      assert.is_true(b[key] >= 0, key)
    end
    -- the launch and what came before it make up the whole call
    assert.near(report.total_ms, report.ms + b.trace + b.load + b.pack, 1e-6)
    local printed = {}
    local saved = _G.print
    _G.print = function(line) printed[#printed + 1] = line end
    verify.report("rms_norm(4, 512)", ok, report)
    _G.print = saved
    assert.matches("^rms_norm%(4, 512%): ok on .-; launch %d+%.%d+ ms %(before it: trace %d+%.%d%d, decode %d+%.%d%d, " ..
      "bind and pack %d+%.%d%d ms%)$", printed[1])
    -- a GPU launch's microseconds are not printed as 0.0 ms
    _G.print = function(line) printed[#printed + 1] = line end
    verify.report("k", true, { device = "cuda", message = "all match", ms = 0.0123, load_name = "compile",
                               before = { trace = 1, load = 2, pack = 3 } })
    _G.print = saved
    assert.matches("; launch 0%.012 ms %(before it:", printed[2])
  end)

  it("reports a refused size under `luaptx run` without the shared runner's position", function()
    local _, err, rc = H.luaptx({ "run", "examples/ampere/rms_norm.lua", "16", "1000" }, { env = { LUAPTX_DEVICE = "emu" } })
    assert.are_not.equal(0, rc)
    assert.matches("luaptx: rms_norm: N %% 128 == 0 is required", err)
    assert.is_nil(err:find("runner.lua", 1, true), err)
  end)

  it("exits non-zero from main on a mismatch and zero on a match", function()
    local out, _, rc = H.luaptx({ "run", "examples/hopper/softmax.lua", "4", "512" }, { merge = true })
    assert.matches("softmax%(4, 512%): ok on emu", out)
    assert.equal(0, rc, out)
  end)
end)
