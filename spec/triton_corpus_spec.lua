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
  matmul_f16_sm_90a = "fence.proxy.async after the barrier (issue 26 item 1)",
  matmul_bf16_sm_90a = "fence.proxy.async after the barrier (issue 26 item 1)",
  histogram_sm_80 = "same-value write-after-write (issue 26 item 2)",
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
