-- The emulator runs what we emit: for every example kernel the emulator
-- can execute, the PTX text the emitter writes is parsed back, loaded and
-- run on the same inputs, and its outputs must be bit-identical to those of
-- the traced IR. An emitter bug that still yields valid PTX shows up here.
local ffi = require "ffi"
local pyptx = require "pyptx"
local core = require "pyptx.core"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local verify = require "pyptx.tools.verify"

local T = pyptx.types

--- Load PTX text with pyptx.load_ptx and return entry name's device function on dev.
local function function_from_text(dev, text, name)
  return pyptx.load_ptx(text, name .. ".ptx"):get(name):function_on(dev)
end

--- The bytes of a tensor.
local function bytes(t)
  return ffi.string(t:to_host(), t.nbytes)
end

--- Run kernel k on an example's args twice: from the traced IR and from its
-- emitted text parsed back; assert every output byte agrees.
local function assert_roundtrip(k, arg_specs)
  local dev = runtime.device()
  local inputs = {}
  for i, a in ipairs(arg_specs) do inputs[i] = tensor.from_table(a[1], a.dtype or T.f32, a[2], dev) end
  local launcher = runtime.prepare(k, unpack(inputs))
  for _, t in ipairs(launcher.outputs) do t:fill_bytes(0xa5) end
  launcher()
  dev:sync()
  local s = launcher.specialization
  local fn = function_from_text(dev, s.ptx, k.name)
  local outs, all = {}, {}
  for i, t in ipairs(inputs) do all[i] = t end
  for i, t in ipairs(launcher.outputs) do
    outs[i] = tensor.empty(t.shape, t.dtype, dev):fill_bytes(0xa5)
    all[#all + 1] = outs[i]
  end
  local buf, size = runtime.pack_params(s, all, s.values)
  assert(core.device_launch(dev.handle, fn, runtime.make_cfg(s, buf, size)) == 0, core.error_message())
  dev:sync()
  assert.is_true(#outs > 0)
  for i, t in ipairs(launcher.outputs) do
    local a, b = bytes(t), bytes(outs[i])
    if a ~= b then
      local first
      for j = 1, #a do if a:byte(j) ~= b:byte(j) then first = j - 1 break end end
      error(("%s: output %d differs between the traced IR and its emitted text (first at byte %d of %d)")
        :format(k.name, i, first, #a))
    end
    assert.are_not.equal(string.rep("\165", #a), a)   -- the kernel wrote its output
  end
end

-- Each example: its module path, the sizes to build and feed (small: the
-- emulator runs them), and build options.
local ROWWISE = { "rms_norm", "layer_norm", "softmax", "swiglu" }
local CASES = {}
for _, dir in ipairs { "hopper", "ampere", "blackwell" } do
  for _, name in ipairs(ROWWISE) do
    CASES[#CASES + 1] = { mod = ("examples.%s.%s"):format(dir, name), size = { 4, 512 } }
  end
  CASES[#CASES + 1] = { mod = ("examples.%s.swiglu"):format(dir), size = { 4, 512 }, opts = { fused = true } }
end
for _, name in ipairs { "gemm", "gemm_pipelined", "gemm_2stage", "gemm_fast" } do
  CASES[#CASES + 1] = { mod = "examples.ampere." .. name, size = { 128, 128, 64 } }
end
CASES[#CASES + 1] = { mod = "examples.hopper.gemm", size = { 128, 128, 64 } }
CASES[#CASES + 1] = { mod = "examples.hopper.gemm_fast", size = { 256, 256, 128 }, opts = { SMS = 2 } }
CASES[#CASES + 1] = { mod = "examples.hopper.grouped_gemm", size = { { 64, 128 }, 128, 64 } }
CASES[#CASES + 1] = { mod = "examples.hopper.flash_attention", size = { 1, 128, 64 } }
CASES[#CASES + 1] = { mod = "examples.hopper.flash_attention", size = { 1, 128, 64 }, opts = { causal = true } }
CASES[#CASES + 1] = { mod = "examples.hopper.flash_attention", size = { 1, 256, 64 }, opts = { SPLITS = 2, causal = true } }
CASES[#CASES + 1] = { mod = "examples.hopper.grouped_gemm_uniform", size = { 2, 128, 128, 64 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.gemm", size = { 128, 256, 128 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.gemm", size = { 256, 256, 128 }, opts = { cta_group = 2 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.tcgen05_probes", size = { 32, 3 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.gemm_persistent", size = { 384, 256, 128 }, opts = { ctas = 2 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.gemm_no_tma", size = { 128, 128, 192 } }
CASES[#CASES + 1] = { mod = "examples.blackwell.gemm_no_tma", size = { 128, 128, 128 }, opts = { copy = "ld_st" } }
CASES[#CASES + 1] = { mod = "examples.blackwell.grouped_gemm", size = { 2, 128, 128, 128 } }

--- A case's title: module(sizes) and its options.
local function label(c)
  local t = {}
  for i, v in ipairs(c.size) do t[i] = type(v) == "table" and "{" .. table.concat(v, ",") .. "}" or tostring(v) end
  for key in pairs(c.opts or {}) do t[#t + 1] = key end
  return ("%s(%s)"):format(c.mod, table.concat(t, ", "))
end

describe("emitted PTX text", function()
  for _, c in ipairs(CASES) do
    it("runs bit-identically to the traced IR: " .. label(c), function()
      local m = require(c.mod)
      local sz = c.size
      local k, inputs
      if #sz == 4 then
        k = m.build(sz[1], sz[2], sz[3], sz[4], c.opts)
        inputs = m.inputs(sz[1], sz[2], sz[3], sz[4], verify.fresh_seed())
      elseif #sz == 3 then
        k = m.build(sz[1], sz[2], sz[3], c.opts)
        inputs = m.inputs(sz[1], sz[2], sz[3], verify.fresh_seed())
      else
        k = m.build(sz[1], sz[2], c.opts)
        inputs = m.inputs(sz[1], sz[2], verify.fresh_seed(), c.opts and c.opts.fused)
      end
      assert_roundtrip(k, m.args(inputs))
    end)
  end
end)
