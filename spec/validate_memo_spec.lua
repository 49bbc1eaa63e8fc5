-- The validator's memo of validated shapes (src/lpx_validate.c) changes
-- no verdict and no emitted operand: every case is validated with the memo
-- on and with it off ($LUAPTX_VALIDATE_MEMO=0, read when a module is made),
-- and both must agree. The memo keys a shape by its form, the module's
-- target, version and address size, the function's CTA group, and each
-- operand with a register replaced by its type; the cases below put a
-- valid shape first and then one that differs only in one of those parts,
-- so a key that forgot a part would let the invalid one through.
local pyptx = require "pyptx"
local H = require "spec.helpers"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- fn's results with the memo off (fn makes its modules inside).
local function memo_off(fn) return H.with_env({ LUAPTX_VALIDATE_MEMO = "0" }, fn) end

--- load_ptx's verdict on text: "ok", or its error message.
local function verdict(text, name)
  local ok, err = pcall(pyptx.load_ptx, text, name)
  return ok and "ok" or tostring(err)
end

--- Verdicts on text with the memo on and off.
local function both(text, name)
  return verdict(text, name), memo_off(function() return verdict(text, name) end)
end

local HEAD = ".version 8.7\n.target %s\n.address_size 64\n"
local DECLS = "  .reg .pred %p<3>;\n  .reg .b32 %r<5>;\n  .reg .f32 %f<3>;\n  .reg .b64 %rd<3>;\n"

--- A module of one kernel: the declarations, then lines (line 5 on).
local function kernel_of(lines, arch)
  return HEAD:format(arch or "sm_90a") .. ".visible .entry k()\n{\n" .. DECLS .. table.concat(lines, "\n") .. "\n  ret;\n}\n"
end

describe("the validator's memo", function()
  -- { the valid line, the line that differs in one part of the key, the error it must get }
  local pairs_of = {
    { "operand register's type", "  isspacep.global %p1, %rd1;", "  isspacep.global %p1, %f1;", "isspacep" },
    { "immediate's value", "  pmevent 3;", "  pmevent 99;", "pmevent" },
    { "float immediate's bits", "  createpolicy.fractional.L2::evict_last.b64 %rd1, 0f3F000000;",
      "  createpolicy.fractional.L2::evict_last.b64 %rd1, 0f3FC00000;", "createpolicy" },
    { "last operand's value", "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;",
      "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 33;", "tcgen05.alloc", "sm_100a" },
    { "operand's kind", "  mov.u32 %r1, %r2;", "  mov.u32 %r1, %rd1;", "mov.u32" },
  }
  for _, c in ipairs(pairs_of) do
    it("refuses a shape that differs from a valid one only in its " .. c[1] .. ", memo on or off", function()
      local text = kernel_of({ c[2], c[2], c[3] }, c[5])
      local on, off = both(text, "m.ptx")
      assert.matches("^m%.ptx:12:%d+: " .. H.lit(c[4]), off)   -- the third line is refused without the memo
      assert.equal(off, on)
      assert.equal("ok", verdict(kernel_of({ c[2], c[2] }, c[5]), "m.ptx"))   -- and the valid shape alone passes
    end)
  end

  it("keys a shape by its function's CTA group: a second kernel's mix is refused, memo on or off", function()
    local alloc = "  tcgen05.alloc.cta_group::%d.sync.aligned.shared::cta.b32 [%%r1], 32;"
    local dealloc = "  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;"
    local function entry(name, lines)
      return ".visible .entry " .. name .. "()\n{\n" .. DECLS .. table.concat(lines, "\n") .. "\n  ret;\n}\n"
    end
    local text = HEAD:format("sm_100a") .. entry("a", { alloc:format(1), dealloc })
      .. entry("b", { alloc:format(2), dealloc })
    local on, off = both(text, "g.ptx")
    assert.matches("^g%.ptx:%d+:%d+: [^\n]*cta_group::1 here, but an earlier tcgen05 instruction used cta_group::2", off)
    assert.equal(off, on)
  end)

  it("gives every corpus file the same verdict with the memo on and off", function()
    local files = H.find("spec/fixtures/ptx", "%.ptx$")
    assert.is_true(#files >= 50)
    local refused = 0
    for _, path in ipairs(files) do
      local text = H.read(path)
      local on, off = both(text, path)
      assert.equal(off, on, path)
      refused = refused + (on == "ok" and 0 or 1)
    end
    assert.is_true(refused >= 1)
  end)

  it("traces a kernel to the same PTX with the memo on and off (numbers typed alike)", function()
    local function build()
      return pyptx.kernel "typed" { arch = "sm_90a", function()
        local x, u = reg.scalar(T.f32, 1), reg.scalar(T.u32, 2)
        for i = 1, 3 do
          ptx.inst.add.f32(reg.scalar(T.f32), x, i)          -- an integral number on an f32 operand
          ptx.inst.add.f32(reg.scalar(T.f32), x, i + 0.25)   -- the same shape, a fraction
          ptx.inst.add.u32(reg.scalar(T.u32), u, i * 7)
          ptx.inst.mul.f32(reg.scalar(T.f32), x, -i)
        end
      end }:ptx()
    end
    local on, off = build(), memo_off(build)
    assert.equal(off, on)
    assert.matches("add.f32 	%%f%d+, %%f%d+, 0f40100000;", on)   -- 2.25 as an f32 literal
  end)

  it("refuses a $LUAPTX_VALIDATE_MEMO other than 0 or 1, naming it", function()
    local err = H.with_env({ LUAPTX_VALIDATE_MEMO = "off" }, function() return verdict(kernel_of { "  pmevent 3;" }, "v.ptx") end)
    assert.matches("LUAPTX_VALIDATE_MEMO=off: valid: 0 (off) or 1 (on)", err, 1, true)
  end)
end)
