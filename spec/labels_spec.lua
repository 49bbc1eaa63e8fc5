--- Label scopes (src/lpx_labels.c): a PTX label is local to the { } block
-- that places it, so inline asm pasted twice (nvcc, Triton) places one name
-- in several blocks. The trace takes that, refuses a name twice in one
-- block and a branch into a block from outside, and the emulator sends each
-- branch to the label its block sees, as ptxas does.
local pyptx = require "pyptx"
local runtime = require "pyptx.runtime"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"
local ptx, reg, T = pyptx.ptx, pyptx.reg, pyptx.types

--- The body: per thread x = inp[tid], out[tid] = a sum whose terms the
-- scoped branches skip: +1 unless x == 1, +10 unless x == 2 (both blocks
-- place L), then x == 3 jumps to the outer L past an inner block that
-- places its own L (+100 unless x == 4) and +1000.
local BODY = [[
	ld.param.u64 	%rd1, [out];
	ld.param.u64 	%rd2, [inp];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u32 	%r2, [%rd4];
	mov.u32 	%r3, 0;
	{
	setp.eq.u32 	%p1, %r2, 1;
	@%p1 bra 	L;
	add.u32 	%r3, %r3, 1;
	L:
	}
	{
	setp.eq.u32 	%p1, %r2, 2;
	@%p1 bra 	L;
	add.u32 	%r3, %r3, 10;
	L:
	}
	setp.eq.u32 	%p2, %r2, 3;
	@%p2 bra 	L;
	{
	setp.eq.u32 	%p1, %r2, 4;
	@%p1 bra 	L;
	add.u32 	%r3, %r3, 100;
	L:
	}
	add.u32 	%r3, %r3, 1000;
	L:
	add.s64 	%rd4, %rd1, %rd3;
	st.global.u32 	[%rd4], %r3;
	ret;
]]

local WANT = { [0] = 1111, 1110, 1101, 11, 1011 }

local MODULE = ".version 8.0\n.target sm_80\n.address_size 64\n\n"
  .. ".visible .entry scoped(\n\t.param .u64 out,\n\t.param .u64 inp\n)\n{\n"
  .. "\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%rd<5>;\n\t.reg .pred \t%p<3>;\n" .. BODY .. "}\n"

--- Run the module's kernel `scoped` on the emulator for x = 0..4.
local function run_on_emu(text)
  local dev = H.emu()
  runtime.use(dev)
  local mod = pyptx.load_ptx(text)
  local inp = tensor.from_table({ 0, 1, 2, 3, 4 }, T.u32, { 5 }, dev)
  local out = tensor.empty({ 5 }, T.u32, dev):fill_bytes(0xff)
  mod.scoped { grid = { 1 }, block = { 5 }, args = { out, inp } }
  local got = out:to_host()
  local t = {}
  for i = 0, 4 do t[i] = tonumber(got[i]) end
  return t
end

describe("label scopes", function()
  it("send each branch to the label its block sees on the emulator", function()
    assert.same(WANT, run_on_emu(MODULE))
  end)

  it("let ptx.raw place one name in separate blocks; the traced kernel assembles and runs the same", function()
    local k = pyptx.kernel "scoped" {
      arch = "sm_80", block = { 5 }, raw_params = { { "u64", "out" }, { "u64", "inp" } },   -- run_on_emu's block (.maxntid)
      function()
        reg.range(T.b32, "%r", 4); reg.range(T.b64, "%rd", 5); reg.range(T.pred, "%p", 3)
        ptx.raw(BODY)
      end,
    }
    local text = k:ptx()
    local _, placed = text:gsub("\nL:", "")
    assert.equal(4, placed)
    assert.same(WANT, run_on_emu(text))
    H.assert_ptxas(text, "sm_80")
  end)

  it("let ptx.label place a name again inside ptx.scope", function()
    assert.is_nil(H.trace_error(function()
      ptx.scope(function() ptx.bra("again"); ptx.label("again") end)
      ptx.scope(function() ptx.bra("again"); ptx.label("again") end)
      ptx.ret()
    end))
  end)

  it("refuse a name placed twice in one block", function()
    assert.matches("labels_spec.lua:%d+: label 'L' is placed twice in one block", H.trace_error(function()
      ptx.scope(function() ptx.label("L"); ptx.label("L") end)
    end))
    assert.matches("label 'L' is placed twice in one block", H.trace_error(function()
      ptx.label("L"); ptx.scope(function() ptx.label("L") end); ptx.label("L")
    end))
  end)

  it("tell blocks apart however many places a name has (the trace's lookup drops closed blocks)", function()
    assert.matches("label 'X' is placed twice in one block", H.trace_error(function()
      ptx.scope(function() ptx.label("X") end)
      ptx.scope(function()
        ptx.label("X")
        ptx.scope(function() ptx.label("X") end)
        ptx.label("X")   -- the block's own X again, after a nested one closed
      end)
    end))
    assert.is_nil(H.trace_error(function()
      for _ = 1, 300 do ptx.scope(function() ptx.bra("X"); ptx.label("X") end) end
      ptx.raw("{ X: }")
      ptx.label("X")
      ptx.ret()
    end))
  end)

  it("refuse a branch to a label placed only inside a block it is outside of", function()
    local err = H.trace_error(function()
      ptx.bra("inner")
      ptx.scope(function() ptx.label("inner") end)
      ptx.ret()
    end)
    assert.matches("labels_spec.lua:%d+: bra: label 'inner' is placed only inside a { } block this branch is outside of", err)
    local log = H.assert_ptxas_refuses((MODULE:gsub("\tL:\n\tadd.s64", "\tadd.s64")), "sm_80")
    assert.matches("Unknown symbol 'L'", log, 1, true)   -- ptxas agrees: the inner L is not visible outside
  end)
end)
