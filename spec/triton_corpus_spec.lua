-- Triton's PTX on the emulator: the corpus of spec/fixtures/triton (PTX that
-- Triton 3.9 compiled from kernels.py, inputs and numpy's references;
-- generate.py regenerates it) run with every check on, under the default
-- schedule and the adversarial one, against numpy; and the emulator bugs
-- that corpus found, each with its planted mutant still caught.
local ffi = require "ffi"
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"

local DIR = "spec/fixtures/triton/"
local CASES = dofile(DIR .. "cases.lua")
local SEEDS = { 1, 7 }

--- A tensor on dev holding the bytes of a fixture file.
local function from_file(spec, dev)
  local bytes = assert(H.read(DIR .. spec.file))
  local buf = ffi.new("uint8_t[?]", #bytes)
  ffi.copy(buf, bytes, #bytes)
  return tensor.from_ffi(buf, spec.shape, pyptx.types[spec.dtype], dev)
end

--- The launch arguments of case c on dev, and its output tensors.
local function arguments(c, dev)
  local args, outs = {}, {}
  for i, a in ipairs(c.args) do
    if a.kind == "tensor" then args[i] = from_file(a, dev)
    elseif a.kind == "out" then
      local o = c.outputs[a.index]
      local t = tensor.empty(o.shape, pyptx.types[o.dtype], dev)
      if a.fill then t:fill(a.fill) else t:poison() end
      outs[a.index], args[i] = t, t
    else args[i] = a.value end
  end
  -- Triton's two trailing pointers: global scratch (global_scratch_size
  -- bytes per program) and the profiler's scratch (unused: null).
  local programs = c.grid[1] * (c.grid[2] or 1) * (c.grid[3] or 1)
  args[#args + 1] = c.scratch > 0 and tensor.empty({ c.scratch * programs }, pyptx.types.u8, dev)
    or ffi.new("uint64_t", 0)
  args[#args + 1] = ffi.new("uint64_t", 0)
  return args, outs
end

--- Run case c on dev with every check on; compare each output with numpy's.
local function run_case(c, dev)
  local mod = pyptx.load_ptx(DIR .. c.ptx)
  local args, outs = arguments(c, dev)
  mod:get(c.entry) { grid = c.grid, block = c.block, smem = c.smem, args = args, device = dev }
  for i, o in ipairs(c.outputs) do
    local want = from_file(o, dev):values()
    local ok, report = tensor.compare(outs[i], want, { atol = c.tol, rtol = c.tol, output = i })
    assert(ok, c.name .. ": " .. report.message)
  end
end

-- Cases the emulator cannot run yet, and why (issue 26).
local NOT_YET = {
  print_sm_80 = "vprintf (issue 26 item 6)",
  assert_sm_80 = "__assertfail (issue 26 item 6)",
  desc_copy_sm_90a = "tensor maps built on the device (issue 26 item 5)",
}

describe("the Triton corpus on the emulator with every check on", function()
  for _, c in ipairs(CASES) do
    if NOT_YET[c.name] then pending(c.name .. ": " .. NOT_YET[c.name]) goto continue end
    it(c.name .. " (default schedule)", function() run_case(c, H.emu()) end)
    for _, seed in ipairs(SEEDS) do
      it(c.name .. " (adversarial schedule, seed " .. seed .. ")", function() run_case(c, H.adversarial(seed)) end)
    end
    ::continue::
  end
end)

--- Case name of the corpus.
local function case(name)
  for _, c in ipairs(CASES) do if c.name == name then return c end end
  error("no case " .. name)
end

--- Case c with its PTX text edited: old (found exactly once) becomes new.
local function mutant(c, old, new)
  local text = assert(H.read(DIR .. c.ptx))
  local at = assert(text:find(old, 1, true), "no " .. old .. " in " .. c.ptx)
  assert(not text:find(old, at + #old, true), "more than one " .. old .. " in " .. c.ptx)
  local m = {}
  for k, v in pairs(c) do m[k] = v end
  m.text = text:sub(1, at - 1) .. new .. text:sub(at + #old)
  return m
end

--- The error running case c (mutated: c.text) raises on dev, or nil.
local function error_of(c, dev)
  local ok, err = pcall(function()
    local mod = pyptx.load_ptx(c.text or assert(H.read(DIR .. c.ptx)), c.ptx)
    local args = arguments(c, dev)
    mod:get(c.entry) { grid = c.grid, block = c.block, smem = c.smem, args = args, device = dev }
  end)
  return not ok and tostring(err) or nil
end

--- A fresh emulator with the given options.
local function emu_with(opts)
  local dev = require("pyptx.runtime").open("emu")
  for k, v in pairs(opts) do dev:set_option(k, v) end
  return dev
end

local NO_FENCE = "no fence.proxy.async in between %(put fence%.proxy%.async%.shared::cta after the stores, or after the barrier"

describe("fence.proxy.async on the causality path (issue 26 item 1)", function()
  local mm = case("matmul_f16_sm_90a")

  it("accepts Triton's fence executed by every thread after the barrier, in both schedules", function()
    assert.is_nil(error_of(mm, H.emu()))
    assert.is_nil(error_of(mm, H.adversarial(3)))
  end)

  it("still reports the mutant with no proxy fence anywhere, naming the PTX to add (foreign PTX)", function()
    local m = mutant(mm, "fence.proxy.async.shared::cta;", "")
    for _, dev in ipairs({ H.emu(), H.adversarial(3) }) do
      local err = error_of(m, dev)
      assert.matches("wgmma%.mma_async reads shared memory at 0x%x+ through the async proxy, but matmul_kernel, PTX line %d+: "
        .. "cp%.async%.cg%.shared%.global [^\n]* wrote it through the generic proxy with " .. NO_FENCE, err)
      assert.not_matches("ptx%.fence", err)
    end
  end)

  it("is the race check's alone: off with race_check, on without uninit_check", function()
    local m = mutant(mm, "fence.proxy.async.shared::cta;", "")
    assert.is_nil(error_of(m, emu_with { race_check = false }))
    assert.matches(NO_FENCE, error_of(m, emu_with { uninit_check = false }))
  end)
end)

describe("write-after-write of the same value (issue 26 item 2)", function()
  local hist = case("histogram_sm_80")

  it("runs tl.histogram, whose warps all zero the same shared words", function()
    assert.is_nil(error_of(hist, H.emu()))
  end)

  it("still reports two warps writing different values", function()
    local err = error_of(mutant(hist, "st.shared.b32 \t[%r3], 0;", "st.shared.b32 \t[%r3], %r1;"), H.emu())
    assert.matches("PTX line 51: st%.shared%.b32%s+%[%%r3%], %%r1: shared%-memory race %(write after write of a different "
      .. "value%): 1 bytes at shared offset 0x0, which warp 0 wrote since the last barrier %(at histogram_kernel, PTX line 51", err)
  end)

  it("still reports a real missing barrier (softmax without its first bar.sync)", function()
    local sm = case("softmax_sm_80")
    local err = error_of(mutant(sm, "st.shared.b32 \t[%r24], %r20;\n\tbar.sync \t0;", "st.shared.b32 \t[%r24], %r20;"),
      emu_with { uninit_check = false })
    assert.matches("PTX line %d+: [^\n]*: shared%-memory race %(write after read%)", err)
  end)
end)
