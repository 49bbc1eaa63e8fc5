-- pyptx.reg: register allocation and the operators, each of which emits
-- exactly one instruction. Every test compares the exact PTX lines.
local pyptx = require "pyptx"
local H = require "spec.helpers"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- The instruction lines of a kernel whose body is fn.
local function lines(fn, arch)
  return pyptx.kernel "t" { arch = arch or "sm_90a", fn }:module().entry.body
end

describe("pyptx.reg", function()
  describe("named registers and ranges", function()
    it("declare their own .reg lines where they are made and print their names", function()
      local text = pyptx.kernel "t" { arch = "sm_80", line_info = false, function()
        local f = reg.range(T.b32, "%f", 3)
        local acc = reg.named(T.b32, "acc")
        local two = reg.named(T.u32, { "%x", "$y" })
        ptx.inst("mov.b32", f[2], acc)
        ptx.inst("add.u32", two[1], two[2], reg.scalar(T.u32))
        ptx.raw("mov.b32 %f0, %f2;")
      end }:ptx()
      assert.matches("\t.reg .b32 \t%f<3>;\n\t.reg .b32 \tacc;\n\t.reg .u32 \t%x, $y;\n\tmov.b32 \t%f2, acc;\n" ..
        "\tadd.u32 \t%x, $y, %r1;\n\tmov.b32 \t%f0, %f2;", text, 1, true)
    end)

    it("refuse names the automatic registers use, either way round", function()
      assert.matches("reg_spec.lua:%d+: reg.range: register %%r1 is already one of the automatic registers of this function",
        H.trace_error(function() reg.scalar(T.u32); reg.range(T.b32, "%r", 3) end))
      assert.matches("reg_spec.lua:%d+: register %%r1 of the u32 class is already declared by reg.range/reg.named",
        H.trace_error(function() reg.range(T.b32, "%r", 3); reg.scalar(T.u32) end))
      assert.matches("reg.named: '1x' is not a PTX register name", H.trace_error(function() reg.named(T.b32, "1x") end), 1, true)
      assert.matches("reg.range: count must be a positive integer, got 0", H.trace_error(function() reg.range(T.b32, "%q", 0) end), 1, true)
      -- a range after digits: %rd1<3> is %rd10 .. %rd12; %r<1> is %r0 alone, which no automatic register takes
      assert.matches("reg.range: register %rd10 is already one of the automatic registers of this function",
        H.trace_error(function() reg.array(T.u64, 10); reg.range(T.b64, "%rd1", 3) end), 1, true)
      assert.matches("register %rd10 of the u64 class is already declared by reg.range/reg.named",
        H.trace_error(function() reg.range(T.b64, "%rd1", 3); reg.array(T.u64, 10) end), 1, true)
      assert.matches("reg.named: register %f2 is already one of the automatic registers of this function",
        H.trace_error(function() reg.array(T.f32, 2); reg.named(T.f32, { "%f02", "%f2" }) end), 1, true)
      local body = lines(function()
        reg.array(T.u64, 9); reg.array(T.u32, 5)
        local a, b = reg.range(T.b64, "%rd1", 3), reg.range(T.b32, "%r", 1)
        local c = reg.range(T.b32, "%r0", 2)   -- %r00, %r01: leading zeros, never automatic names
        reg.array(T.u32, 2)   -- %r6, %r7: past %r<1>
        ptx.inst("mov.b64", a[2], a[0])
        ptx.inst("add.u32", b[0], c[1], reg.scalar(T.u32))
      end)
      assert.same({ ".reg .b64 %rd1<3>;", ".reg .b32 %r<1>;", ".reg .b32 %r0<2>;", "mov.b64 %rd12, %rd10;",
                    "add.u32 %r0, %r01, %r8;" }, body)
    end)
  end)

  describe("allocation", function()
    it("allocates without emitting and initializes with one mov", function()
      assert.same({ "mov.u32 %r2, 7;" }, lines(function()
        reg.scalar(T.u32)
        reg.scalar(T.u32, 7)
      end))
    end)

    it("numbers registers per class the way nvcc does", function()
      assert.same({ "mov.u32 %r1, 1;", "mov.f32 %f1, 0f3F800000;", "mov.u64 %rd1, 2;", "mov.u16 %rs1, 3;", "mov.s32 %r2, 4;" },
        lines(function()
          reg.scalar(T.u32, 1)
          reg.scalar(T.f32, 1.0)
          reg.scalar(T.u64, 2)
          reg.scalar(T.u16, 3)
          reg.scalar(T.s32, 4)
        end))
    end)

    it("moves half and packed floats as bits (PTX has no mov.f16)", function()
      assert.same({ "mov.b16 %rs1, 15360;", "mov.b32 %r1, 0;", "mov.b16 %rs2, %rs1;" }, lines(function()
        local h = reg.scalar(T.f16, 1)
        reg.scalar(T.bf16x2, 0)
        reg.from(h)
      end))
    end)

    it("makes arrays indexed from 0 with a count", function()
      local n, first, last
      lines(function()
        local a = reg.array(T.f32, 4)
        n, first, last = a.n, a[0], a[3]
        ptx.mov(a[3], 1.0)
      end)
      assert.equal(4, n)
      assert.equal("%f1", tostring(first))
      assert.equal("%f4", tostring(last))
      assert.is_true(reg.is(first))
    end)

    it("keeps a register's id, type and trace in one table's slots, read and written by name", function()
      local trace = require "pyptx.trace"
      lines(function()
        local r = reg.scalar(T.u32)
        assert.same({ r.id, T.u32, trace.current() }, { rawget(r, reg.ID), rawget(r, reg.TYPE), rawget(r, reg.TRACE) })
        assert.is_nil(rawget(r, "id"))   -- no hash part: one allocation per register
        assert.is_nil(rawget(r, "type"))
        assert.equal(T.u32, r.type)
        assert.is_function(r.shr)          -- methods still come from the metatable
        assert.is_nil(r.address)
        local s = reg.scalar(T.u32)
        s.type = T.s32                     -- a named write lands in the slot
        assert.equal(T.s32, rawget(s, reg.TYPE))
        s.note = "mine"                    -- other keys are the user's own
        assert.equal("mine", rawget(s, "note"))
      end)
    end)

    it("rejects an array count that is not a positive integer", function()
      assert.matches("reg_spec.lua:%d+: reg.array: count must be a positive integer, got 0",
        H.trace_error(function() reg.array(T.f32, 0) end))
      assert.matches("count must be a positive integer, got 2.5", H.trace_error(function() reg.array(T.f32, 2.5) end))
    end)

    it("zeroes fragments on request", function()
      assert.same({ "mov.f32 %f1, 0f00000000;", "mov.f32 %f2, 0f00000000;" }, lines(function() reg.fragments(T.f32, 2, true) end))
      assert.same({}, lines(function() reg.fragments(T.f32, 2) end))
    end)

    it("makes predicates", function()
      local p
      lines(function() p = reg.pred() end)
      assert.equal(T.pred, p.type)
      assert.is_true(reg.is_pred(p))
    end)

    it("rejects a non-type", function()
      assert.matches("reg_spec.lua:%d+: expected a type %(pyptx.types.u32, ...%), got f32",
        H.trace_error(function() reg.scalar("f32") end))
    end)

    it("refuses to allocate outside a kernel trace", function()
      local ok, err = pcall(reg.scalar, T.u32)
      assert.is_false(ok)
      assert.matches("reg_spec.lua:%d+: reg.scalar called outside a kernel trace", err)
    end)

    it("refuses a register of another kernel", function()
      local foreign
      lines(function() foreign = reg.scalar(T.u32, 1) end)
      assert.matches("reg_spec.lua:%d+: register %%r1 belongs to another kernel trace",
        H.trace_error(function()
          local r = reg.scalar(T.u32)
          ptx.mov(r, foreign)
        end))
    end)
  end)

  describe("reg.from", function()
    it("moves when the bits carry over and converts otherwise", function()
      assert.same({
        "mov.u32 %r1, %tid.x;",
        "mov.s32 %r2, %r1;",
        "cvt.u64.u32 %rd1, %r1;",
        "cvt.rn.f32.u32 %f1, %r1;",
        "cvt.rzi.s32.f32 %r3, %f1;",
        "cvt.rn.f16.f32 %rs1, %f1;",
        "cvt.f32.f16 %f2, %rs1;",
        "mov.b32 %r4, %f1;",
        "cvt.rn.f32.f64 %f3, %fd1;",
        "cvt.f64.f32 %fd2, %f1;",
      }, lines(function()
        local tid = reg.from(ptx.special.tid.x(), T.u32)
        reg.from(tid, T.s32)
        reg.from(tid, T.u64)
        local f = tid:to(T.f32)
        f:to(T.s32)
        local h = f:to(T.f16)
        h:to(T.f32)
        f:to(T.b32)
        reg.scalar(T.f64):to(T.f32)
        f:to(T.f64)
      end))
    end)

    it("converts bit types as unsigned (cvt has no .bN)", function()
      assert.same({ "cvt.rn.f32.u16 %f1, %rs1;", "cvt.u64.u32 %rd1, %r1;" }, lines(function()
        reg.scalar(T.b16):to(T.f32)
        reg.scalar(T.b32):to(T.u64)
      end))
    end)

    it("takes the type of a typed source when none is given", function()
      assert.same({ "mov.u64 %rd1, %clock64;" }, lines(function() reg.from(ptx.special.clock64()) end))
    end)

    it("needs a type for an untyped source", function()
      assert.matches("reg_spec.lua:%d+: reg.from: give a type for an untyped source", H.trace_error(function() reg.from(5) end))
    end)

    it("says when a packed float cannot come from one value", function()
      assert.matches("reg_spec.lua:%d+: cvt.f16x2.f32: cvt to .f16x2 from .f32 takes two sources",
        H.trace_error(function() reg.scalar(T.f32):to(T.f16x2) end))
    end)
  end)

  describe("integer operators", function()
    it("emit one instruction each into a fresh register", function()
      assert.same({
        "add.u32 %r3, %r1, %r2;",
        "sub.u32 %r4, %r1, 1;",
        "mul.lo.u32 %r5, %r1, %r2;",
        "div.u32 %r6, %r1, %r2;",
        "rem.u32 %r7, %r1, %r2;",
        "neg.s32 %r8, %r1;",
      }, lines(function()
        local a, b = reg.scalar(T.u32), reg.scalar(T.u32)
        local _ = a + b
        _ = a - 1
        _ = a * b
        _ = a / b
        _ = a % b
        _ = -a
      end))
    end)

    it("take the number on either side, in order", function()
      assert.same({ "add.s64 %rd2, 8, %rd1;", "mul.lo.s64 %rd3, %rd1, 3;", "sub.s64 %rd4, %rd1, -2;" }, lines(function()
        local a = reg.scalar(T.s64)
        local _ = 8 + a
        _ = a * 3
        _ = a - (-2)
      end))
    end)

    it("mix u, s and b of one width (the non-b type wins)", function()
      assert.same({ "add.s32 %r4, %r1, %r2;", "add.u32 %r5, %r2, %r1;", "add.u32 %r6, %r3, %r2;" }, lines(function()
        local s, u, b = reg.scalar(T.s32), reg.scalar(T.u32), reg.scalar(T.b32)
        local _ = s + u
        _ = u + s
        _ = b + u
      end))
    end)

    it("use .u for b registers in arithmetic", function()
      assert.same({ "add.u64 %rd2, %rd1, 1;", "shr.u64 %rd3, %rd1, 2;" }, lines(function()
        local b = reg.scalar(T.b64)
        local _ = b + 1
        _ = b:shr(2)
      end))
    end)

    it("refuse to mix widths", function()
      assert.matches("reg_spec.lua:%d+: operator %+ mixes u32 and u64; convert one side first with reg.from%(x, u32%)",
        H.trace_error(function()
          local _ = reg.scalar(T.u32) + reg.scalar(T.u64)
        end))
    end)

    it("refuse to mix ints and floats", function()
      assert.matches("reg_spec.lua:%d+: operator %* mixes f32 and s32",
        H.trace_error(function()
          local _ = reg.scalar(T.f32) * reg.scalar(T.s32)
        end))
    end)

    it("refuse an integer immediate that is not an integer", function()
      assert.matches("reg_spec.lua:%d+: add.u32: operand 3 is 1.5, expected an integer for .u32",
        H.trace_error(function()
          local _ = reg.scalar(T.u32) + 1.5
        end))
    end)

    it("refuse an immediate that does not fit", function()
      assert.matches("add.u16: operand 3 is 70000, which does not fit in 16 bits",
        H.trace_error(function()
          local _ = reg.scalar(T.u16) + 70000
        end))
    end)

    it("refuse % on floats", function()
      assert.matches("reg_spec.lua:%d+: operator %% needs integer registers, got f32",
        H.trace_error(function()
          local _ = reg.scalar(T.f32) % reg.scalar(T.f32)
        end))
    end)
  end)

  describe("float operators", function()
    it("write float immediates as exact hex", function()
      assert.same({
        "add.f32 %f2, %f1, 0f3DCCCCCD;",
        "mul.f32 %f3, %f1, 0f40000000;",
        "div.rn.f32 %f4, %f1, %f3;",
        "neg.f32 %f5, %f1;",
        "add.f64 %fd2, %fd1, 0d3FB999999999999A;",
        "div.rn.f64 %fd3, %fd1, 0dC008000000000000;",
      }, lines(function()
        local x = reg.scalar(T.f32)
        local _ = x + 0.1
        local y = x * 2
        _ = x / y
        _ = -x
        local d = reg.scalar(T.f64)
        _ = d + 0.1
        _ = d / -3
      end))
    end)

    it("handle half types with the PTX spelling", function()
      assert.same({ "add.f16 %rs3, %rs1, %rs2;", "mul.bf16x2 %r3, %r1, %r2;", "fma.rn.f16x2 %r5, %r4, %r4, %r4;" },
        lines(function()
          local _ = reg.scalar(T.f16) + reg.scalar(T.f16)
          local a = reg.scalar(T.bf16x2)
          _ = a * reg.scalar(T.bf16x2)
          local c = reg.scalar(T.f16x2)
          _ = c:fma(c, c)
        end))
    end)

    it("refuse a division PTX does not have", function()
      assert.matches("reg_spec.lua:%d+: div.rn.f16: type .f16 is not valid here",
        H.trace_error(function()
          local _ = reg.scalar(T.f16) / reg.scalar(T.f16)
        end))
    end)

    it("refuse a half immediate (PTX has none)", function()
      assert.matches("add.f16: operand 3 is the number 1, but PTX has no .f16 immediates",
        H.trace_error(function()
          local _ = reg.scalar(T.f16) + 1
        end))
    end)

    it("refuse to mix float widths", function()
      assert.matches("operator %+ mixes f32 and f64",
        H.trace_error(function()
          local _ = reg.scalar(T.f32) + reg.scalar(T.f64)
        end))
    end)
  end)

  describe("comparisons and predicates", function()
    it("compare into a fresh predicate with setp", function()
      assert.same({
        "setp.eq.u32 %p1, %r1, %r2;",
        "setp.ne.u32 %p2, %r1, 0;",
        "setp.lt.s32 %p3, %r3, -1;",
        "setp.le.f32 %p4, %f1, 0f00000000;",
        "setp.gt.u64 %p5, %rd1, 4;",
        "setp.ge.u16 %p6, %rs1, 2;",
      }, (H.capture_stderr(function() return lines(function()
        local a, b = reg.scalar(T.u32), reg.scalar(T.u32)
        a:eq(b)
        a:ne(0)
        reg.scalar(T.s32):lt(-1)
        reg.scalar(T.f32):le(0)
        reg.scalar(T.u64):gt(4)
        reg.scalar(T.b16):ge(2)
      end) end)))   -- the predicates go unused: their warnings are captured
    end)

    it("negate a predicate without an instruction and combine predicates", function()
      assert.same({
        "setp.lt.u32 %p1, %r1, 4;",
        "setp.gt.u32 %p2, %r1, 1;",
        "and.pred %p3, %p1, %p2;",
        "or.pred %p4, %p1, !%p2;",
        "xor.pred %p5, %p1, %p2;",
        "not.pred %p6, %p1;",
        "@!%p6 ret;",
      }, (H.capture_stderr(function() return lines(function()
        local a = reg.scalar(T.u32)
        local p, q = a:lt(4), a:gt(1)
        local n = -q
        assert.is_true(reg.is_pred(n))
        assert.equal(q, -n)
        p:band(q)
        p:bor(n)
        p:bxor(q)
        ptx.at(-p:bnot()).ret()
      end) end)))   -- the predicates go unused: their warnings are captured
    end)

    it("refuse to compare a predicate with a number register", function()
      assert.matches("operator lt mixes u32 and pred",
        H.trace_error(function()
          local a = reg.scalar(T.u32)
          a:lt(a:eq(1))
        end))
    end)
  end)

  describe("bitwise methods", function()
    it("use .bN types", function()
      assert.same({
        "and.b32 %r2, %r1, 255;",
        "or.b32 %r3, %r1, %r2;",
        "xor.b32 %r4, %r1, %r3;",
        "not.b32 %r5, %r1;",
        "shl.b32 %r6, %r1, 3;",
        "shr.u32 %r7, %r1, 3;",
        "shr.s32 %r9, %r8, 1;",
        "shl.b64 %rd2, %rd1, %r1;",
      }, lines(function()
        local a = reg.scalar(T.u32)
        local b = a:band(0xff)
        local c = a:bor(b)
        a:bxor(c)
        a:bnot()
        a:shl(3)
        a:shr(3)
        reg.scalar(T.s32):shr(1)
        reg.scalar(T.u64):shl(a)
      end))
    end)

    it("have Lua-safe aliases", function()
      assert.equal(reg.Reg.band, reg.Reg.and_)
      assert.equal(reg.Reg.bor, reg.Reg.or_)
      assert.equal(reg.Reg.bxor, reg.Reg.xor)
      assert.equal(reg.Reg.bnot, reg.Reg.not_)
    end)
  end)

  describe("errors", function()
    --- The error of fn, which must fail on the line after the one calling here().
    local function at_next_line(fn)
      local line
      local function here() line = debug.getinfo(2, "l").currentline + 1 end
      local err = H.trace_error(function() fn(here) end)
      return err, "spec/reg_spec.lua:" .. line .. ": "
    end

    it("name the user's line for operators, also when the metamethod tail-calls", function()
      local err, where = at_next_line(function(here)
        local a, b = reg.scalar(T.u32), reg.scalar(T.u64)
        here()
        local _ = a + b
      end)
      assert.equal(where .. "operator + mixes u32 and u64; convert one side first with reg.from(x, u32)", err)
      err, where = at_next_line(function(here)
        local a = reg.scalar(T.u32)
        here()
        local _ = a + 1.5
      end)
      assert.equal(where .. "add.u32: operand 3 is 1.5, expected an integer for .u32", err)
    end)

    it("name the user's line for a register of another kernel", function()
      local foreign
      lines(function() foreign = reg.scalar(T.u32, 1) end)
      local err, where = at_next_line(function(here)
        local r = reg.scalar(T.u32)
        here()
        ptx.mov(r, foreign)
      end)
      assert.equal(where .. "register %r1 belongs to another kernel trace", err)
    end)

    it("name the user's line for methods and wrappers", function()
      local err, where = at_next_line(function(here)
        here()
        reg.scalar(T.u64):mul_wide(2)
      end)
      assert.equal(where .. ":mul_wide needs a 16- or 32-bit integer register, got u64", err)
      err, where = at_next_line(function(here)
        here()
        ptx.st.global(ptx.addr(reg.scalar(T.u64)), 1)
      end)
      assert.equal(where .. "st.global: cannot infer the type; pass a register", err)
      err, where = at_next_line(function(here)
        here()
        ptx.inst.add.fast.u32(reg.scalar(T.u32), 1, 2)
      end)
      assert.matches("^" .. where:gsub("%p", "%%%0") .. "add%.fast%.u32: unknown or repeated modifier", err)
    end)
  end)

  describe("typed methods", function()
    it("emit min, max, abs, fma and mad", function()
      assert.same({
        "min.s32 %r3, %r1, %r2;",
        "max.f32 %f3, %f1, %f2;",
        "abs.s32 %r4, %r1;",
        "abs.f32 %f4, %f1;",
        "fma.rn.f32 %f5, %f1, %f2, 0f3F800000;",
        "mad.lo.s32 %r5, %r1, %r2, 7;",
      }, lines(function()
        local a, b = reg.scalar(T.s32), reg.scalar(T.s32)
        local x, y = reg.scalar(T.f32), reg.scalar(T.f32)
        a:min(b)
        x:max(y)
        a:abs()
        x:abs()
        x:fma(y, 1.0)
        a:fma(b, 7)
      end))
    end)

    it("refuse abs on unsigned registers (PTX abs is signed or float)", function()
      assert.matches("reg_spec.lua:%d+: abs.u32: type .u32 is not valid here; valid types: .s16 .s32 .s64",
        H.trace_error(function() reg.scalar(T.u32):abs() end))
    end)

    it("widen with mul.wide", function()
      assert.same({ "mul.wide.u32 %rd1, %r1, 4;", "mul.wide.s32 %rd2, %r2, %r1;", "mul.wide.u16 %r3, %rs1, 3;" }, lines(function()
        local u = reg.scalar(T.u32)
        assert.equal(T.u64, u:mul_wide(4).type)
        assert.equal(T.s64, reg.scalar(T.s32):mul_wide(u).type)
        assert.equal(T.u32, reg.scalar(T.u16):mul_wide(3).type)
      end))
    end)

    it("refuse mul.wide on 64-bit or float registers", function()
      assert.matches("reg_spec.lua:%d+: :mul_wide needs a 16%- or 32%-bit integer register, got u64",
        H.trace_error(function() reg.scalar(T.u64):mul_wide(2) end))
      assert.matches(":mul_wide needs a 16%- or 32%-bit integer register, got f32",
        H.trace_error(function() reg.scalar(T.f32):mul_wide(2) end))
    end)

    it("update a register in place with :set", function()
      assert.same({ "mov.u32 %r1, 0;", "add.u32 %r2, %r1, 1;", "mov.u32 %r1, %r2;", "mov.b16 %rs1, 15360;" }, lines(function()
        local i = reg.scalar(T.u32, 0)
        assert.equal(i, i:set(i + 1))
        reg.scalar(T.f16):set(1.0)
      end))
    end)
  end)

  describe("constants and widening", function()
    it("encode numbers into half, bf16 and fp8 registers as their bits, pairs in both halves", function()
      assert.same({
        "mov.b16 %rs1, 15872;", "mov.b16 %rs2, 16320;", "mov.b16 %rs3, 48128;", "mov.b32 %r1, 1006648320;",
        "mov.b32 %r2, 1065369472;", "mov.b16 %rs4, 15420;", "mov.b16 %rs5, 16448;", "mov.b16 %rs6, 31744;",
        "mov.b16 %rs1, 15360;", "mov.b16 %rs7, 15360;",
      }, lines(function()
        local h = reg.scalar(T.f16, 1.5)              -- 0x3e00
        reg.scalar(T.bf16, 1.5)                       -- 0x3fc0
        reg.scalar(T.f16, -1)                         -- 0xbc00
        reg.scalar(T.f16x2, 1)                        -- 0x3c003c00
        reg.scalar(T.bf16x2, 1)                       -- 0x3f803f80
        reg.scalar(T.e4m3x2, 1.5)                     -- 0x3c3c
        reg.scalar(T.e5m2x2, 2)                       -- 0x4040
        reg.scalar(T.f16, 1e9)                        -- overflows to +inf, 0x7c00
        h:set(1)
        reg.scalar(T.f16, ptx.imm(T.b16, 0x3c00))     -- bits stay bits through ptx.imm
      end))
    end)

    it("reach the conversions as pyptx.floats, the same table as pyptx.runtime.floats", function()
      assert.is_table(pyptx.floats)
      assert.equal(require "pyptx.floats", pyptx.floats)
      assert.equal(require "pyptx.runtime.floats", pyptx.floats)
      assert.equal(0x3e00, pyptx.floats.to_f16(1.5))
    end)

    it("refuse a number for a packed type without an encoder, naming the bits form", function()
      assert.matches("reg_spec.lua:%d+: luaptx cannot encode e2m3x2 constants; give the bits: ptx.imm%(pyptx.types.b16, bits%)",
        H.trace_error(function() reg.scalar(T.e2m3x2, 1) end, "sm_100a"))
    end)

    it("widen 16- and 32-bit integers to 64 bits with one visible cvt", function()
      assert.same({ "cvt.u64.u32 %rd1, %r1;", "cvt.s64.s32 %rd2, %r2;", "cvt.u64.u16 %rd3, %rs1;", "cvt.u64.u32 %rd4, %r1;" },
        lines(function()
          local u = reg.scalar(T.u32)
          assert.equal(T.u64, u:widen().type)
          assert.equal(T.s64, reg.scalar(T.s32):widen().type)
          reg.scalar(T.u16):widen()
          reg.widen(u)
        end))
      assert.matches("reg_spec.lua:%d+: :widen needs a 16%- or 32%-bit integer register, got u64 %(already 64%-bit%)",
        H.trace_error(function() reg.scalar(T.u64):widen() end))
      assert.matches(":widen needs a 16%- or 32%-bit integer register, got f32", H.trace_error(function() reg.scalar(T.f32):widen() end))
      assert.matches("reg_spec.lua:%d+: reg.widen: expected a register, got 3", H.trace_error(function() reg.widen(3) end))
    end)
  end)

  describe("traps", function()
    it("warn once per predicate a Lua `if` tested instead of a guard, naming its line", function()
      local here
      local _, err = H.capture_stderr(function()
        return lines(function()
          local tid = reg.from(ptx.special.tid.x(), T.u32)
          here = debug.getinfo(1, "l").currentline + 1
          if tid:lt(16) then ptx.inst.add.u32(tid, tid, 1) end
          local both = tid:gt(1):band(tid:lt(9))
          ptx.at(both).inst.add.u32(tid, tid, 2)
        end)
      end)
      assert.equal(("spec/reg_spec.lua:%d: warning: predicate %%p1 from :lt is never used as a guard, branch or operand "
        .. "(a Lua `if` on it is always true); use ptx.if_(p, fn) or ptx.at(p)\n"):format(here), err)
    end)

    it("stay quiet for predicates used as guards, branches, negated or as operands", function()
      local _, err = H.capture_stderr(function()
        return lines(function()
          local tid = reg.from(ptx.special.tid.x(), T.u32)
          ptx.at(tid:lt(16)).inst.add.u32(tid, tid, 1)
          ptx.at(-tid:gt(3)).inst.add.u32(tid, tid, 1)
          ptx.if_(tid:eq(5), function() ptx.inst.add.u32(tid, tid, 1) end)
          ptx.inst.selp.u32(tid, tid, 0, tid:ne(2))
          local top = ptx.label("top")
          ptx.bra(top, tid:ge(7):bnot())
        end)
      end)
      assert.equal("", err)
    end)

    it("refuse <, <=, >, >= on registers and point to the methods", function()
      local err = H.trace_error(function() local a, b = reg.scalar(T.u32), reg.scalar(T.u32); return a < b end)
      assert.matches("^spec/reg_spec.lua:%d+: <, <=, >, >= on register %%r1 cannot emit PTX", err)
      assert.matches("use a:lt%(b%), a:le%(b%), a:gt%(b%), a:ge%(b%)", err)
      assert.matches("on register %%f2 cannot emit PTX",
        H.trace_error(function() local a, b = reg.scalar(T.f32), reg.scalar(T.f32); return a >= b end))
    end)

    it("print registers by their PTX names", function()
      lines(function()
        assert.equal("%r1", tostring(reg.scalar(T.u32)))
        assert.equal("%rd1", tostring(reg.scalar(T.u64)))
        assert.equal("acc", tostring(reg.named(T.b32, "acc")))
        assert.equal("!%p1", tostring(-reg.pred()))
      end)
    end)
  end)
end)
