-- pyptx.operands: special registers, addresses, labels, typed immediates,
-- the sink, d|p pipes and parenthesised lists, as they print in PTX.
local pyptx = require "pyptx"
local H = require "spec.helpers"
local operands = require "pyptx.operands"
local reg, ptx, smem, T = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types

--- The instruction lines of a kernel whose body is fn (raw_params optional).
local function lines(fn, arch, raw_params)
  return pyptx.kernel "t" { arch = arch or "sm_90a", raw_params = raw_params, fn }:module().entry.body
end

describe("pyptx.operands", function()
  describe("special registers", function()
    it("are looked up by PTX spelling, with their type", function()
      local s = operands.special("%tid.x")
      assert.equal("%tid.x", tostring(s))
      assert.equal(T.u32, s.type)
      assert.equal(T.u64, operands.special("%clock64").type)
      assert.is_nil(operands.special("%tid.q"))
      assert.equal(T.u32, operands.special("%nclusterid.w").type)
      assert.is_nil(operands.special("tid.x"))
    end)
  end)

  describe("addresses", function()
    it("print [base+offset] for registers and symbols, offsets added at trace time", function()
      assert.same({
        "ld.global.f32 %f1, [%rd1];",
        "ld.global.f32 %f1, [%rd1+-8];",
        "ld.global.f32 %f1, [%rd1+12];",
        "ld.global.f32 %f1, [%rd1+8];",
        "ld.shared.f32 %f1, [t_smem+4];",
        "ld.shared.f32 %f1, [t_smem+8];",
        "ld.shared.f32 %f1, [%r1+16];",
        "ld.param.u32 %r1, [n];",
      }, lines(function()
        local p, f = reg.scalar(T.u64), reg.scalar(T.f32)
        ptx.ld.global(f, ptx.addr(p))
        ptx.ld.global(f, ptx.addr(p, -8))
        ptx.ld.global(f, ptx.addr(p) + 12)
        ptx.ld.global(f, 4 + ptx.addr(p, 4))
        local s = smem.alloc(T.f32, 8)
        ptx.ld.shared(f, ptx.addr(s, 4))
        ptx.ld.shared(f, s[1] + 4)
        local sb = reg.scalar(T.u32)
        ptx.ld.shared(f, ptx.addr(sb, 16))
        ptx.ld.param(sb, ptx.addr("n"))
      end, nil, { { "u32", "n" } }))
    end)

    it("print as [base+offset] in messages", function()
      lines(function()
        local p = reg.scalar(T.u64)
        assert.equal("[%rd1+8]", tostring(ptx.addr(p, 8)))
        assert.equal("[sym+0]", tostring(ptx.addr("sym")))
      end)
    end)

    it("need an integer offset", function()
      assert.matches("operands_spec.lua:%d+: ptx.addr: the offset must be an integer number of bytes, got 1.5",
        H.trace_error(function() ptx.addr(reg.scalar(T.u64), 1.5) end))
      assert.matches("operands_spec.lua:%d+: an address offset must be a number",
        H.trace_error(function() local _ = ptx.addr(reg.scalar(T.u64)) + "x" end))
    end)

    it("need a register or symbol base of 32 or 64 bits", function()
      assert.matches("operands_spec.lua:%d+: ptx.addr: the base must be a register or a symbol name, got true",
        H.trace_error(function() ptx.addr(true) end))
      assert.matches("operands_spec.lua:%d+: ptx.addr: an absolute address must be an integer, got 4.5",
        H.trace_error(function() ptx.addr(4.5) end))
      assert.matches("operands_spec.lua:%d+: ptx.addr: the base register must be 32 or 64 bits, got u16",
        H.trace_error(function() ptx.addr(reg.scalar(T.u16)) end))
    end)

    it("may be 32-bit only in shared memory", function()
      assert.matches("operands_spec.lua:%d+: ld.global.f32: operand 2 is an address in a 32%-bit register; global and generic addresses are 64%-bit",
        H.trace_error(function() ptx.ld.global(reg.scalar(T.f32), ptx.addr(reg.scalar(T.u32))) end))
    end)

    it("are required where the instruction reads memory", function()
      assert.matches("ld.global.f32: operand 2 must be an address: ptx.addr%(reg, offset%)",
        H.trace_error(function() ptx.ld.global(reg.scalar(T.f32), reg.scalar(T.u64)) end))
    end)
  end)

  describe("typed immediates", function()
    it("print floats as exact hex bits and integers in their type", function()
      assert.same({
        "mov.f32 %f1, 0f3FC00000;",
        "mov.f32 %f1, 0f7F800000;",
        "mov.f32 %f1, 0f80000000;",
        "mov.f64 %fd1, 0d3FF8000000000000;",
        "mov.u32 %r1, 4294967295;",
        "mov.s32 %r2, -5;",
        "mov.u32 %r1, 1065353216;",
      }, lines(function()
        local f, u = reg.scalar(T.f32), reg.scalar(T.u32)
        ptx.mov(f, ptx.imm(T.f32, 1.5))
        ptx.mov(f, ptx.imm(T.f32, 1 / 0))
        ptx.mov(f, ptx.imm(T.f32, -0.0))
        ptx.mov(reg.scalar(T.f64), ptx.imm(T.f64, 1.5))
        ptx.mov(u, ptx.imm(T.u32, 4294967295))
        ptx.mov(reg.scalar(T.s32), ptx.imm(T.s32, -5))
        ptx.mov(u, ptx.imm(T.b32, 0x3f800000))
      end))
    end)

    it("carry their type for inference", function()
      lines(function() assert.equal(T.f64, reg.source_type(ptx.imm(T.f64, 1))) end)
    end)

    it("must be integers for integer types", function()
      assert.matches("operands_spec.lua:%d+: ptx.imm: 1.5 is not an integer",
        H.trace_error(function() ptx.imm(T.u32, 1.5) end))
    end)

    it("do not exist for half types", function()
      assert.matches("operands_spec.lua:%d+: ptx.imm: PTX has no .f16 immediates; use ptx.imm%(b16, bits%)",
        H.trace_error(function() ptx.imm(T.f16, 1) end))
    end)

    it("must match the width the instruction wants", function()
      assert.matches("add.u32: operand 3 is a .f64 immediate; expected a u32/s32/b32 register or an integer",
        H.trace_error(function() ptx.inst.add.u32(reg.scalar(T.u32), reg.scalar(T.u32), ptx.imm(T.f64, 1)) end))
    end)

    it("take bracket lists and symbol offsets", function()
      assert.same({ "mov.u64 %rd1, tbl+8;", "tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0, {%r1, %r2}];" }, lines(function()
        ptx.raw_module(".global .align 4 .u32 tbl[4];\n.global .texref tex0;")
        ptx.inst("mov.u64", reg.scalar(T.u64), ptx.sym("tbl", 8))
        local f = reg.array(T.f32, 4)
        ptx.inst("tex.2d.v4.f32.s32", { f[0], f[1], f[2], f[3] }, ptx.bracket("tex0", { reg.scalar(T.s32), reg.scalar(T.s32) }))
      end, "sm_80"))
      assert.matches("ptx.sym: the offset must be an integer number of bytes, got 1.5",
        H.trace_error(function() ptx.sym("tbl", 1.5) end), 1, true)
    end)

    it("are absolute with an integer base", function()
      assert.same({ "ld.global.u32 %r1, [4104];" }, lines(function()
        ptx.inst.ld.global.u32(reg.scalar(T.u32), ptx.addr(4096, 8))
      end))
    end)

    it("take exact 64-bit integers from LuaJIT cdata", function()
      assert.same({ "mov.u64 %rd1, 18446744073709551615;", "mov.s64 %rd2, -9007199254740993;" }, lines(function()
        ptx.mov(reg.scalar(T.u64), 0xffffffffffffffffULL)
        ptx.mov(reg.scalar(T.s64), -9007199254740993LL)
      end))
    end)

    it("refuse a Lua number that overflows f32", function()
      assert.matches("mov.f32: operand 2 is 9.9999999999999994e%+38, which overflows .f32",
        H.trace_error(function() ptx.mov(reg.scalar(T.f32), 1e39) end))
    end)
  end)

  describe("sink, pipes and lists", function()
    it("print _ , d|p and (a, b)", function()
      assert.equal("_", tostring(ptx.sink))
      assert.equal(ptx.sink, ptx["_"])
      assert.same({
        "setp.eq.u32 %p1|%p2, %r1, 1;",
        "atom.global.add.u32 _, [%rd1], 1;",
        "shfl.sync.up.b32 %r2|_, %r1, 1, 0, 4294967295;",
        "elect.sync _|%p3, 4294967295;",
        "call.uni (%r1), f, (%r3);",
      }, lines(function()
        local u, p = reg.scalar(T.u32), reg.scalar(T.u64)
        ptx.inst.setp.eq.u32(ptx.pipe(reg.pred(), reg.pred()), u, 1)
        ptx.inst.atom.global.add.u32(ptx.sink, ptx.addr(p), 1)
        ptx.inst.shfl.sync.up.b32(ptx.pipe(reg.scalar(T.b32), ptx.sink), u, 1, 0, 0xffffffff)
        ptx.inst.elect.sync(ptx.pipe(ptx.sink, reg.pred()), 0xffffffff)
        ptx.inst.call.uni(ptx.paren(u), "f", ptx.paren(reg.scalar(T.u32)))
      end))
    end)

    it("refuse the sink where PTX discards no result", function()
      assert.matches("operands_spec.lua:%d+: add.u32: operand 1 is the sink _, which add.u32 does not accept as a destination",
        H.trace_error(function() ptx.inst.add.u32(ptx.sink, reg.scalar(T.u32), 1) end))
      assert.matches("shfl.sync.down.b32: operand 1 is the sink _",
        H.trace_error(function() ptx.inst.shfl.sync.down.b32(ptx.sink, reg.scalar(T.b32), 1, 31, 0xffffffff) end))
    end)

    it("refuse a Lua value that is no operand", function()
      assert.matches("operands_spec.lua:%d+: cannot use a boolean %(true%) as an operand",
        H.trace_error(function() ptx.inst.mov.u32(reg.scalar(T.u32), true) end))
    end)
  end)
end)
