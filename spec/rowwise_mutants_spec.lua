-- The memory-bound examples (rms_norm, layer_norm, softmax, swiglu) with a
-- bug planted in them or in their shared reduction (examples/lib/rowwise.lua):
-- each mutant fails on the emulator, at the example's line where the
-- emulator can name one. examples_spec runs the unplanted kernels at
-- several sizes on every arch; schedule_spec runs them under adversarial
-- schedules.
local H = require "spec.helpers"

local ROWWISE, ROWWISE_MODULE = "examples/lib/rowwise.lua", "examples.lib.rowwise"

--- The example examples/hopper/<name>.lua with a bug planted in it (ex) or
-- in the shared reduction (lib): each { old, new } or nil.
local function mutant(name, ex, lib)
  local path = "examples/hopper/" .. name .. ".lua"
  local m, src = H.planted_on(path, ex, ROWWISE_MODULE, ROWWISE, lib)
  return m, src, path
end

--- The message m.check(...) fails with on dev (a raised error or the verdict's).
local function failure(dev, m, ...)
  local ok, msg = H.check_on(dev, m, ...)
  assert.is_false(ok, "the mutant passed")
  return msg
end

describe("memory-bound examples with planted bugs", function()
  it("report the warp partials read before the barrier that publishes them (bar.sync removed)", function()
    local m, src, path = mutant("rms_norm", nil, { "  ptx.bar_sync(0)\n", "" })
    for _, dev in ipairs { H.emu(), H.adversarial(1), H.adversarial(2) } do
      assert.matches(("%s:%d: ld%%.shared%%.v4%%.f32 [^\n]*: reads 16 bytes of shared memory at offset 0x%%x+ that no thread "
        .. "has written"):format(H.lit(path), H.line_of(src, "local total = cta_sum(s, cta)")), failure(dev, m, 3, 512))
    end
  end)

  it("report a second reduction that reuses the first one's buffer (one barrier is then not enough)", function()
    local m, src, path = mutant("layer_norm", nil, { "  local part = smem.alloc(f32, warps, { align = 16 })\n",
      "  cta.part = cta.part or smem.alloc(f32, warps, { align = 16 }); local part = cta.part\n" })
    for _, dev in ipairs { H.emu(), H.adversarial(1), H.adversarial(3) } do
      local err = failure(dev, m, 3, 512)
      assert.matches(("%s:%d: ld%%.shared%%.v4%%.f32 [^\n]*: shared%%-memory race %%(read after write%%): 16 bytes at shared "
        .. "offset 0x%%x+, which warp %%d wrote since the last barrier %%(at %s:%%d+: @%%%%p%%d st%%.shared%%.f32"):format(H.lit(path),
        H.line_of(src, "local mean = cta_sum(s, cta)"), H.lit(path)), err)
    end
  end)

  it("report the elements a store loop that skips its first chunk never wrote (outputs are poisoned)", function()
    local m = mutant("softmax", { "for c = 0, chunks - 1 do ptx.st.global", "for c = 1, chunks - 1 do ptx.st.global" })
    assert.matches("^1024 elements of output 1 were never written %(first at flat index 0%)", failure(H.emu(), m, 4, 256))
  end)

  it("report every element wrong when up is read through gate's pointer", function()
    local m = mutant("swiglu", { "ptx.addr(ua, up_base + c * stride)", "ptx.addr(ga, up_base + c * stride)" })
    assert.matches("^15%d%d of 1536 elements differ; first at flat index %d", failure(H.emu(), m, 3, 512))
  end)
end)
