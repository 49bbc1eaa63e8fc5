--- Tensors on the emulator: outputs poisoned with a pattern per dtype, NaNs
-- read back as Lua's own NaN whatever their bits, and compare/check
-- telling an element the kernel never wrote from a wrong one.
local ffi = require "ffi"
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local tensor = require "pyptx.runtime.tensor"
local verify = require "pyptx.tools.verify"
local core = require "pyptx.core"
local kernel, reg, ptx, Tile, T = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types

--- y[i] = x[i] for i < keep; elements keep..n-1 are never stored.
local function copy_some(n, keep, dtype)
  return kernel "copy_some" {
    arch = "sm_80", in_specs = { Tile(n, dtype) }, out_specs = { Tile(n, dtype) }, grid = { 1 }, block = { n },
    function(X, Y)
      local px, py = ptx.global_ptrs(X, Y)
      local tid = reg.from(ptx.special.tid.x(), T.u32)
      local off = tid:mul_wide(dtype.bits / 8)
      local v = reg.scalar(dtype)
      ptx.inst("ld.global." .. dtype.name, v, ptx.addr(px + off))
      local p = reg.pred()
      ptx.inst.setp.lt.u32(p, tid, keep)
      ptx.at(p).inst["st"]["global"][dtype.name](ptx.addr(py + off), v)
      ptx.ret()
    end,
  }
end

--- A kernel storing the given words (NaN bit patterns) into y: 32-bit
-- words into an f32 output, or 64-bit ones into an f64 output.
local function store_bits(words, bits)
  local dtype, b = bits == 64 and T.f64 or T.f32, bits == 64 and T.b64 or T.b32
  return kernel("store_b" .. bits) {
    arch = "sm_80", in_specs = { Tile(1, T.f32) }, out_specs = { Tile(#words, dtype) },
    function(_, Y)
      local py = ptx.global_ptrs(Y)
      local r = reg.scalar(b)
      for i, w in ipairs(words) do
        ptx.inst.mov[b.name](r, w)
        ptx.inst.st.global[b.name](ptx.addr(py, bits / 8 * (i - 1)), r)
      end
      ptx.ret()
    end,
  }
end

describe("pyptx.runtime.tensor", function()
  local dev = H.emu()
  runtime.use(dev)

  it("refuses a non-number value and a shape no device can hold, at the caller's line", function()
    local ok, err = pcall(function() local t = tensor.from_table({ 1, "a", 3 }, T.f32, { 3 }) return t end)
    assert.is_false(ok)
    assert.matches("tensor_spec.lua:%d+: tensor.from_table: element 2 is a string %(a%); expected a number", err)
    ok, err = pcall(function() local t = tensor.empty({ 1e12, 1e12 }, T.f32) return t end)
    assert.is_false(ok)
    assert.matches("tensor_spec.lua:%d+: tensor: shape 1000000000000x1000000000000 holds 1e%+24 elements; no device holds that many", err)
  end)

  it("poisons each dtype with its own pattern: quiet NaNs with a payload for floats", function()
    local want = { f32 = 0x7fc0dead, f16 = 0x7ead, bf16 = 0x7fed, e4m3 = 0x7f, e5m2 = 0x7f, u8 = 0xad,
                   s16 = 0xdead, u32 = 0xdeaddead, s32 = 0xdeaddead }
    for name, bits in pairs(want) do
      local t = tensor.empty({ 5 }, T[name], dev):fill_bytes(0):poison()
      local raw = ffi.cast(({ [1] = "uint8_t *", [2] = "uint16_t *", [4] = "uint32_t *" })[t.elem_size], t:to_host())
      for i = 0, 4 do assert.equal(bits, tonumber(raw[i]), name) end
    end
    local d = tensor.empty({ 3 }, T.f64, dev):poison()
    local w = ffi.cast("uint32_t *", d:to_host())
    assert.same({ 0xdeaddead, 0x7ff80000 }, { tonumber(w[4]), tonumber(w[5]) })
    local q = tensor.empty({ 2 }, T.u64, dev):poison()
    assert.equal(0xdeaddeaddeaddeadULL, ffi.cast("uint64_t *", q:to_host())[1])
    for _, name in ipairs { "f32", "f64", "f16", "bf16" } do
      local v = tensor.empty({ 2 }, T[name], dev):poison():values()
      assert.equal("number", type(v[2]), name)
      assert.is_true(v[2] ~= v[2], name .. " poison reads as NaN")
    end
  end)

  it("reads every NaN bit pattern a kernel stores as Lua's NaN, never nil (f32)", function()
    local words = { 0xffffffff, 0xfff80000, 0xffc00000, 0x7fc00000, 0x7f800001, 0xff800001, 0x3f800000 }
    local y = store_bits(words, 32)(tensor.from_table({ 0 }, T.f32))
    local v = y:values()
    assert.equal(#words, #v)
    for i = 1, #words - 1 do
      assert.equal("number", type(v[i]), ("word 0x%08x"):format(words[i]))
      assert.is_true(v[i] ~= v[i], ("word 0x%08x is NaN"):format(words[i]))
      assert.matches("^%-?nan$", tostring(v[i]))
    end
    assert.equal(1, v[#words])
    local t = y:totable()
    assert.is_true(t[1] ~= t[1] and t[2] ~= t[2])
    local nan = 0 / 0
    local ok, report = tensor.compare(y, { nan, nan, nan, nan, nan, nan, 1 })
    assert.is_true(ok, report.message)
    local bad, r2 = tensor.compare(y, { nan, 0, nan, nan, nan, nan, 1 })
    assert.is_false(bad)
    assert.matches("1 of 7 elements differ; first at flat index 1: got nan, expected 0", r2.message:lower(), 1, true)
  end)

  it("reads every NaN bit pattern a kernel stores as Lua's NaN, never nil (f64)", function()
    local words = { 0xffffffffffffffffULL, 0xfff8000000000000ULL, 0xfff0000000000001ULL, 0x7ff8000000000000ULL,
                    0xffffffff00000000ULL, 0x3ff0000000000000ULL }
    local y = store_bits(words, 64)(tensor.from_table({ 0 }, T.f32))
    local v = y:values()
    for i = 1, #words - 1 do
      assert.equal("number", type(v[i]), tostring(words[i]))
      assert.is_true(v[i] ~= v[i], tostring(words[i]) .. " is NaN")
    end
    assert.equal(1, v[#words])
  end)

  it("reads bf16 and f16 NaNs with the sign bit set as Lua's NaN", function()
    local t = tensor.empty({ 4 }, T.bf16, dev)
    t:upload(ffi.new("uint16_t[4]", { 0xffff, 0xfff8, 0xffc1, 0x3f80 }))
    local v = t:values()
    assert.is_true(v[1] ~= v[1] and v[2] ~= v[2] and v[3] ~= v[3])
    assert.equal(1, v[4])
    local h = tensor.empty({ 2 }, T.f16, dev)
    h:upload(ffi.new("uint16_t[2]", { 0xffff, 0x3c00 }))
    local hv = h:values()
    assert.is_true(hv[1] ~= hv[1])
    assert.equal(1, hv[2])
  end)

  it("reports elements a kernel never stores in their own message (verify.run)", function()
    local x = {}
    for i = 1, 64 do x[i] = i * 0.5 end
    local ok, report = verify.run { kernel = copy_some(64, 60, T.f32), args = { { x, { 64 } } }, reference = x }
    assert.is_false(ok)
    assert.equal("4 elements of output 1 were never written (first at flat index 60); max abs err 0, max rel err 0",
      report.message)
    assert.equal(4, report.unwritten)
    assert.equal(60, report.first_unwritten)
  end)

  it("tells unwritten elements from wrong ones, for f64 and integer outputs too", function()
    local x = {}
    for i = 1, 32 do x[i] = i end
    local want = {}
    for i = 1, 32 do want[i] = x[i] end
    want[3] = 99
    local ok, r = verify.run { kernel = copy_some(32, 31, T.f64), args = { { x, { 32 }, dtype = T.f64 } }, reference = want }
    assert.is_false(ok)
    assert.equal("1 element of output 1 was never written (first at flat index 31); other than those, 1 of 32 elements differ;"
      .. " first at flat index 2: got 3, expected 99; max abs err 96, max rel err 0.97", r.message)
    local ok2, r2 = verify.run { kernel = copy_some(32, 30, T.s32), args = { { x, { 32 }, dtype = T.s32 } }, reference = x }
    assert.is_false(ok2)
    assert.matches("^2 elements of output 1 were never written %(first at flat index 30%)", r2.message)
  end)

  it("counts an integer holding the poison value as written when the reference says so", function()
    local t = tensor.empty({ 2 }, T.s32, dev):poison()
    local ok, r = tensor.compare(t, { -559030611, -559030611 })   -- 0xdeaddead as s32
    assert.is_true(ok, r.message)
    local ok2, r2 = tensor.compare(t, { -559030611, 0 })
    assert.is_false(ok2)
    assert.equal("1 element of the output was never written (first at flat index 1); max abs err 0, max rel err 0", r2.message)
  end)

  it("says, on a size mismatch, the shape and the two table forms (values() flat, totable() nested)", function()
    local t = tensor.empty({ 128, 64 }, T.f32, dev):fill_bytes(0)
    local rows = {}
    for i = 1, 128 do rows[i] = 0 end
    local ok, r = tensor.compare(t, rows)
    assert.is_false(ok)
    assert.equal("size mismatch: got 8192 elements (shape 128x64), expected 128 from a flat table (the values() form); "
      .. "want is a tensor, a flat table of every element (t:values()) or a table nested along the shape (t:totable())",
      r.message)
    ok, r = tensor.compare(t, { { 1, 2 } })
    assert.is_false(ok)
    assert.matches("expected 2 from a nested table (the totable() form), flattened", r.message, 1, true)
    ok, r = tensor.compare(t, tensor.empty({ 4, 2 }, T.f32, dev):fill_bytes(0))
    assert.is_false(ok)
    assert.matches("expected 8 from a tensor of shape 4x2", r.message, 1, true)
    assert.is_true((tensor.compare(t, t:totable())))   -- both forms of the same tensor match
    assert.is_true((tensor.compare(t, t:values())))
  end)

  it("fills device memory with 1, 2, 4 and 8-byte patterns and refuses other widths", function()
    local t = tensor.empty({ 3 }, T.u64, dev):fill_bytes(0)
    dev:fill(t.ptr, 0x1122334455667788ULL, 8, 2)
    local w = ffi.cast("uint64_t *", t:to_host())
    assert.same({ 0x1122334455667788ULL, 0x1122334455667788ULL, 0ULL }, { w[0], w[1], w[2] })
    dev:fill(t.ptr, 0xabcd, 2, 3)                 -- 3 elements: the rest of word 0 stays
    assert.equal(0x1122abcdabcdabcdULL, ffi.cast("uint64_t *", t:to_host())[0])
    assert.equal(-1, core.device_fill(dev.handle, t.ptr, 0, 3, 1))
    assert.matches("fill: element width 3; valid: 1, 2, 4, 8 bytes", core.error_message(), 1, true)
  end)
end)
