-- Graph capture and replay through the device interface (on the emulator a
-- recorded sequence of launches; on a GPU a CUDA graph).
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"
local kernel, reg, ptx, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile
local f32, u32 = pyptx.types.f32, pyptx.types.u32

--- x[i] = x[i] * 2 + 1 in place (the output is a dummy).
local step = kernel "step" {
  arch = "sm_80", in_specs = { Tile(256, f32) }, out_specs = { Tile(1, f32) }, block = { 256 },
  function(X)
    local px = ptx.global_ptrs(X)
    local off = reg.from(ptx.special.tid.x(), u32):mul_wide(4)
    local a = px + off
    local v = reg.scalar(f32)
    ptx.ld.global(v, ptx.addr(a))
    ptx.st.global(ptx.addr(a), v:fma(2.0, 1.0))
    ptx.ret()
  end,
}

describe("graphs", function()
  local dev = H.emu()

  it("capture launches without running them and replay them in order", function()
    runtime.use(dev)
    local x = tensor.empty({ 256 }, f32):fill(1)
    local launch = runtime.prepare(step, x)
    local replay = dev:capture(function() launch() launch() end)
    assert.same(1, x:values()[1])            -- captured, not run
    replay()
    assert.same(7, x:values()[256])          -- ((1*2+1)*2+1)
    replay()
    assert.same(31, x:values()[17])          -- two more steps: 15, 31
  end)

  it("report a nested capture and an end without a begin", function()
    local core = require "pyptx.core"
    local ffi = require "ffi"
    assert.equal(0, core.device_graph_begin(dev.handle))
    assert.equal(-1, core.device_graph_begin(dev.handle))
    assert.matches("a capture is already open", core.error_message(), 1, true)
    local g = ffi.new("int32_t[1]")
    assert.equal(0, core.device_graph_end(dev.handle, g))
    assert.equal(-1, core.device_graph_end(dev.handle, g))
    assert.matches("no capture is open", core.error_message(), 1, true)
  end)
end)
