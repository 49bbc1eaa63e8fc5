-- Initialized module variables in parsed PTX (.global/.const "= {...}") are
-- loaded with their values on the emulator.
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"

local PTX = [[
.version 8.0
.target sm_80
.address_size 64

.global .align 4 .u32 tbl[4] = {7, 0x10, -3, 0b101};
.const .align 4 .f32 cf[2] = {0f40490FDB, 1.5};
.global .align 8 .u64 big = 12345678901;

.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [tbl];
	ld.global.u32 %r2, [tbl+4];
	ld.global.u32 %r3, [tbl+8];
	ld.global.u32 %r4, [tbl+12];
	st.global.u32 [%rd2], %r1;
	st.global.u32 [%rd2+4], %r2;
	st.global.u32 [%rd2+8], %r3;
	st.global.u32 [%rd2+12], %r4;
	ld.const.f32 %f1, [cf];
	ld.const.f32 %f2, [cf+4];
	st.global.f32 [%rd2+16], %f1;
	st.global.f32 [%rd2+20], %f2;
	ld.global.u64 %rd3, [big];
	st.global.u64 [%rd2+24], %rd3;
	ret;
}
]]

describe("initialized module variables", function()
  local dev = H.emu()

  it("are loaded with their values (integers in every notation, 0f floats, decimals, 64-bit)", function()
    runtime.use(dev)
    local mod = pyptx.load_ptx(PTX)
    local out = tensor.empty({ 8 }, pyptx.types.u32, dev):fill_bytes(0xff)
    mod.k { grid = { 1 }, block = { 1 }, args = { out } }
    local w = out:to_host()
    assert.same({ 7, 16, 4294967293, 5 }, { tonumber(w[0]), tonumber(w[1]), tonumber(w[2]), tonumber(w[3]) })
    local f = require("ffi").cast("float *", w)
    assert.is_true(math.abs(f[4] - 3.14159265) < 1e-6)
    assert.equal(1.5, f[5])
    assert.equal(12345678901, tonumber(w[6]) + tonumber(w[7]) * 4294967296)
  end)

  it("point address-of initializers at the variables they name", function()
    local text = PTX:gsub("%.global %.align 8 %.u64 big = 12345678901;", ".global .align 8 .u64 big = generic(tbl);")
      :gsub("ld%.global%.u64 %%rd3, %[big%];", "ld.global.u64 %%rd3, [big];\n\tld.u32 %%r5, [%%rd3+4];\n\tst.global.u32 [%%rd2+24], %%r5;\n\tret;")
    local mod = pyptx.load_ptx(text)
    local out = tensor.empty({ 8 }, pyptx.types.u32, dev):fill_bytes(0xff)
    mod.k { grid = { 1 }, block = { 1 }, args = { out } }
    assert.equal(16, tonumber(out:to_host()[6]))   -- tbl[1], read through the pointer
  end)

  it("fold constant expressions in initializers and operands", function()
    local mod = pyptx.load_ptx([[
.version 8.0
.target sm_80
.address_size 64
.global .u32 arr[6] = {1<<4, (3*4)>>1, -2, 0x10|1, 7 % 3, 2 > 1 ? 5 : 6};
.visible .entry k(.param .u64 o)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<2>;
	ld.param.u64 	%rd1, [o];
	mov.u32 	%r1, (1+2)*4;
	add.u32 	%r2, %r1, 1<<4;
	st.global.u32 	[%rd1], %r2;
	ld.global.u32 	%r3, [arr+4];
	st.global.u32 	[%rd1+4], %r3;
	ld.global.u32 	%r3, [arr+16];
	st.global.u32 	[%rd1+8], %r3;
	ld.global.u32 	%r3, [arr+20];
	st.global.u32 	[%rd1+12], %r3;
	ld.global.u32 	%r3, [arr+8];
	st.global.u32 	[%rd1+16], %r3;
	ret;
}]])
    local out = tensor.empty({ 5 }, pyptx.types.u32, dev):fill_bytes(0xff)
    mod.k { grid = { 1 }, block = { 1 }, args = { out } }
    assert.same({ 28, 6, 1, 5, 4294967294 }, out:totable())
  end)

  it("report an initializer form it cannot decode instead of reading zeros", function()
    local text = PTX:gsub("%.global %.align 4 %.u32 tbl%[4%] = {7,", ".global .align 4 .u32 tbl[4] = {tbl,")
    local mod = pyptx.load_ptx(text)
    local out = tensor.empty({ 8 }, pyptx.types.u32, dev)
    local good, err = pcall(function() mod.k { grid = { 1 }, block = { 1 }, args = { out } } end)
    assert.is_false(good)
    assert.matches("module variable 'tbl': this initializer form is not supported", tostring(err), 1, true)
  end)
end)
