-- pyptx.ptx: the instruction builder, guards, labels and control flow, the
-- typed wrappers and the warp helpers. Each test compares exact PTX lines.
local pyptx = require "pyptx"
local H = require "spec.helpers"
local core = require "pyptx.core"
local ffi = require "ffi"
local reg, ptx, smem, T, Tile = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types, pyptx.Tile

--- The instruction lines of a kernel whose body is fn (one f32 tensor param).
local function lines(fn, arch)
  return pyptx.kernel "t" { arch = arch or "sm_90a", in_specs = { Tile(64, T.f32) }, fn }:module().entry.body
end

describe("pyptx.ptx", function()
  describe("the instruction builder", function()
    it("spells Lua-unfriendly names", function()
      assert.equal("and", ptx.spell("and_"))
      assert.equal("local", ptx.spell("local_"))
      assert.equal("ret", ptx.spell("return"))
      assert.equal("shared::cta", ptx.spell("shared_cta"))
      assert.equal("shared::cluster", ptx.spell("shared_cluster"))
      assert.equal("L2::cache_hint", ptx.spell("L2_cache_hint"))
      assert.equal("cta_group::1", ptx.spell("cta_group_1"))
      assert.equal("tensor.2d", ptx.spell("tensor_2d"))
      assert.equal("1d", ptx.spell("_1d"))
      assert.equal("f32", ptx.spell("f32"))
    end)

    it("validates a repeated shape like its first: numbers typed the same, registers kept", function()
      assert.same({
        "add.f32 %f2, %f1, 0f3FC00000;",
        "add.f32 %f3, %f2, 0f3FC00000;",
        "add.u32 %r2, %r1, 24;",
        "add.u32 %r3, %r2, 24;",
        "add.u32 %r3, %r2, 25;",
      }, (function()
        local out = lines(function()
          local x, i = reg.scalar(T.f32), reg.scalar(T.u32)
          local y = x + 1.5
          local _ = y + 1.5
          local j = i + 24
          local k = j + 24
          ptx.inst.add.u32(k, j, 25)
        end)
        return out
      end)())
    end)

    it("still refuses a bad operand in a shape that validated with a good one", function()
      local err = H.trace_error(function()
        local a, b = reg.scalar(T.u32), reg.scalar(T.u32)
        local f = reg.scalar(T.f32)
        ptx.inst.add.u32(a, a, b)
        ptx.inst.add.u32(a, a, b)   -- the same shape again: remembered
        ptx.inst.add.u32(a, a, f)   -- a register of another type there
      end)
      assert.matches("ptx_spec.lua:%d+: add.u32: operand 3 is a f32 register", err)
      err = H.trace_error(function()
        local a = reg.scalar(T.u32)
        ptx.inst.shl.b32(a, a, 3)
        ptx.inst.shl.b32(a, a, 3.5)   -- a number of another kind
      end)
      assert.matches("shl.b32: operand 3 is 3.5, expected an integer", err, 1, true)
    end)

    it("memoizes chain nodes (one table per spelling)", function()
      assert.equal(ptx.inst.ld.global.f32, ptx.inst.ld.global.f32)
      assert.equal("ld.global.f32", ptx.inst.ld.global.f32.opcode)
      assert.equal("and.b32", ptx.inst["and"].b32.opcode)
      assert.equal("and.b32", ptx.inst.and_.b32.opcode)
    end)

    it("emits one instruction per call, with aliases", function()
      assert.same({
        "mov.u32 %r1, %tid.x;",
        "and.b32 %r2, %r1, 7;",
        "or.b32 %r2, %r2, 8;",
        "xor.b32 %r2, %r2, %r1;",
        "not.b32 %r2, %r2;",
        "ld.shared::cta.u32 %r2, [t_smem];",
        "ld.local.u32 %r2, [%r1+4];",
      }, lines(function()
        local a = reg.scalar(T.u32)
        local b = reg.scalar(T.u32)
        ptx.inst.mov.u32(a, ptx.special.tid.x())
        ptx.inst["and"].b32(b, a, 7)
        ptx.inst.or_.b32(b, b, 8)
        ptx.inst.xor_.b32(b, b, a)
        ptx.inst.not_.b32(b, b)
        local s = smem.alloc(T.u32, 4)
        ptx.inst.ld.shared_cta.u32(b, s[0])
        ptx.inst.ld.local_.u32(b, ptx.addr(a, 4))
      end))
    end)

    it("names the unknown modifier and the valid ones at the user's line", function()
      local err = H.trace_error(function() ptx.inst.add.fast.u32(reg.scalar(T.u32), 1, 2) end)
      assert.matches("^spec/ptx_spec.lua:%d+: add.fast.u32: unknown or repeated modifier .fast for add; valid modifiers: .rn .rz", err)
    end)

    it("refuses an unknown opcode through the builder and points at the raw form", function()
      local err = H.trace_error(function() ptx.inst.frobnicate.b32(reg.scalar(T.u32)) end)
      assert.matches("ptx_spec.lua:%d+: frobnicate.b32: opcode not in luaptx's instruction table; emitted unchecked", err)
      assert.matches('use ptx.inst%("frobnicate.b32", ...%) to emit it unchecked', err)
    end)

    it("takes a raw opcode string and still validates it when known", function()
      assert.same({ "ld.global.nc.v2.f32 {%f1, %f2}, [%rd1+8];" }, lines(function()
        local p = reg.scalar(T.u64)
        ptx.inst("ld.global.nc.v2.f32", { reg.scalar(T.f32), reg.scalar(T.f32) }, ptx.addr(p, 8))
      end))
      assert.matches("ptx_spec.lua:%d+: add.u32: operand 2 is a f32 register %(%%f1%); expected a u32/s32/b32 register",
        H.trace_error(function() ptx.inst("add.u32", reg.scalar(T.u32), reg.scalar(T.f32), 1) end))
    end)

    it("warns about an unknown raw opcode and emits it unchecked", function()
      local body, err = H.capture_stderr(function()
        return lines(function() ptx.inst("frobnicate.b32", reg.scalar(T.u32), 1) end)
      end)
      assert.same({ "frobnicate.b32 %r1, 1;" }, body)
      assert.matches("ptx_spec.lua:%d+: warning: frobnicate.b32: opcode not in luaptx's instruction table; emitted unchecked", err)
    end)

    it("needs the opcode as a string in the raw form", function()
      assert.matches("ptx_spec.lua:%d+: ptx.inst%(opcode, ...%) needs the opcode as a string",
        H.trace_error(function() ptx.inst(42) end))
    end)

    it("refuses instructions outside a kernel trace", function()
      local ok, err = pcall(ptx.inst.ret)
      assert.is_false(ok)
      assert.matches("ptx_spec.lua:%d+: ptx instruction called outside a kernel trace", err)
      ok, err = pcall(ptx.ret)
      assert.is_false(ok)
      assert.matches("outside a kernel trace", err)
    end)
  end)

  describe("guards", function()
    it("guard the instruction called through ptx.at, negated with -p", function()
      assert.same({
        "setp.eq.u32 %p1, %r1, 0;",
        "@%p1 st.global.u32 [%rd1], %r1;",
        "@!%p1 ret;",
        "@%p1 bra $L__done;",
        "$L__done:",
      }, lines(function()
        local a, q = reg.scalar(T.u32), reg.scalar(T.u64)
        local p = a:eq(0)
        ptx.at(p).inst.st.global.u32(ptx.addr(q), a)
        ptx.at(-p).ret()
        ptx.at(p).bra("$L__done")
        ptx.label("$L__done")
      end))
    end)

    it("leave instructions emitted by the call's arguments unguarded", function()
      assert.same({
        "setp.ne.u32 %p1, %r1, 0;",
        "add.u32 %r2, %r1, 4;",
        "@%p1 st.shared.u32 [%r2], %r1;",
      }, lines(function()
        local a = reg.scalar(T.u32)
        local p = a:ne(0)
        ptx.at(p).inst.st.shared.u32(ptx.addr(a + 4), a)
      end))
    end)

    it("say when ptx.at guards nothing", function()
      assert.matches("ptx_spec.lua:%d+: ptx.at guards nothing; call the instruction through it",
        H.trace_error(function()
          local p = reg.scalar(T.u32):eq(0)
          ptx.at(p)
        end))
      assert.matches("ptx_spec.lua:%d+: the ptx.at at spec/ptx_spec.lua:%d+ guards nothing",
        H.trace_error(function()
          local p = reg.scalar(T.u32):eq(0)
          ptx.at(p)
          ptx.at(p).ret()
        end))
    end)

    it("need a predicate", function()
      assert.matches("ptx_spec.lua:%d+: ptx.at needs a predicate register %(or %-p%), got %%r1",
        H.trace_error(function() ptx.at(reg.scalar(T.u32)).ret() end))
    end)
  end)

  describe("special registers", function()
    it("are typed operands", function()
      assert.same({
        "mov.u32 %r1, %ctaid.y;",
        "mov.u32 %r1, %nctaid.z;",
        "mov.u32 %r1, %laneid;",
        "mov.u32 %r1, %warpid;",
        "mov.u64 %rd1, %globaltimer;",
        "mov.u32 %r1, %cluster_ctarank;",
      }, lines(function()
        local u, d = reg.scalar(T.u32), reg.scalar(T.u64)
        ptx.mov(u, ptx.special.ctaid.y())
        ptx.mov(u, ptx.special.nctaid.z())
        ptx.mov(u, ptx.special.laneid())
        ptx.mov(u, ptx.special.warpid())
        ptx.mov(d, ptx.special.globaltimer())
        ptx.mov(u, ptx.special.cluster_ctarank())
      end))
      assert.equal(T.u64, reg.source_type(ptx.special.clock64()))
      assert.equal(T.pred, reg.source_type(ptx.special.is_explicit_cluster()))
    end)

    it("include every register of the C table, .w components too, and ptxas takes them all", function()
      local names = {}
      local k = pyptx.kernel "all_specials" { arch = "sm_90a", version = "8.7", function()
        for id = 0, core.special_count() - 1 do
          local spelling = ffi.string(core.special_name(id))
          local name, dim = spelling:match("^%%([%w_]+)%.(%a)$")
          local s = name and ptx.special[name][dim]() or ptx.special[spelling:sub(2)]()
          names[#names + 1] = spelling
          ptx.mov(reg.scalar(reg.source_type(s)), s)
        end
        ptx.ret()
      end }
      local text = k:ptx()
      for _, spelling in ipairs(names) do assert.truthy(text:find(spelling .. ";", 1, true), spelling) end
      for _, w in ipairs { "%tid.w", "%clusterid.w", "%nclusterid.w", "%cluster_ctaid.w", "%cluster_nctaid.w" } do
        assert.truthy(text:find(w, 1, true), w)
      end
      H.assert_ptxas(text, "sm_90a")
    end)

    it("are every special register the PTX ISA (9.0) lists", function()
      local isa = { "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%is_explicit_cluster",
        "%cluster_ctarank", "%cluster_nctarank", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge",
        "%lanemask_gt", "%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
        "%reserved_smem_offset_begin", "%reserved_smem_offset_end", "%reserved_smem_offset_cap",
        "%reserved_smem_offset_0", "%reserved_smem_offset_1", "%total_smem_size", "%aggr_smem_size",
        "%dynamic_smem_size", "%current_graph_exec" }
      for _, v in ipairs { "tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid" } do
        for _, c in ipairs { "x", "y", "z", "w" } do isa[#isa + 1] = "%" .. v .. "." .. c end
      end
      for i = 0, 7 do isa[#isa + 1] = "%pm" .. i; isa[#isa + 1] = "%pm" .. i .. "_64" end
      for i = 0, 31 do isa[#isa + 1] = "%envreg" .. i end
      for _, name in ipairs(isa) do assert.is_true(core.special_lookup(name) >= 0, name) end
      assert.equal(#isa, core.special_count())
    end)

    it("are checked against the kernel's arch and PTX version", function()
      assert.matches("ptx_spec.lua:%d+: mov.u32: operand 2 %%clusterid.x needs sm_90 or newer; this kernel targets sm_80",
        H.trace_error(function() ptx.mov(reg.scalar(T.u32), ptx.special.clusterid.x()) end, "sm_80"))
      local k = pyptx.kernel "aggr" { arch = "sm_90a", version = "8.0", function()
        ptx.mov(reg.scalar(T.u32), ptx.special.aggr_smem_size())
      end }
      local ok, err = pcall(k.ptx, k)
      assert.is_false(ok)
      assert.matches("ptx_spec.lua:%d+: mov.u32: operand 2 %%aggr_smem_size needs PTX ISA 8.1; this kernel uses 8.0", err)
      local text = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<2>;\n"
        .. "\tmov.u32 %r1, %aggr_smem_size;\n\tret;\n}\n"
      assert.matches("requires PTX ISA .version 8.1", H.assert_ptxas_refuses(text, "sm_90a"), 1, true)   -- as ptxas says
    end)

    it("are only valid where a mov/cvt source is", function()
      assert.matches("add.u32: operand 2 is the special register %%tid.x, valid only as a mov/cvt source",
        H.trace_error(function() ptx.inst.add.u32(reg.scalar(T.u32), ptx.special.tid.x(), 1) end))
    end)

    it("have their own width", function()
      assert.matches("mov.u64: operand 2 is the special register %%tid.x",
        H.trace_error(function() ptx.mov(reg.scalar(T.u64), ptx.special.tid.x()) end))
    end)
  end)

  describe("labels and branches", function()
    it("place labels and branch to names or references", function()
      assert.same({ "top:", "bra top;", "bra.uni top;", "@%p1 bra top;", "exit;", "ret;" }, lines(function()
        local top = ptx.label("top")
        local p = reg.pred()
        ptx.bra(top)
        ptx.bra_uni("top")
        ptx.bra(top, p)
        ptx.exit()
        ptx.ret()
      end))
    end)

    it("refuse a label placed twice", function()
      assert.matches("ptx_spec.lua:%d+: label 'top' is placed twice", H.trace_error(function()
        ptx.label("top")
        ptx.label("top")
      end))
      -- also one placed by ptx.raw, among many others (checked by lookup, not by scanning the body)
      assert.matches("ptx_spec.lua:%d+: label 'l7' is placed twice", H.trace_error(function()
        for i = 1, 500 do ptx.label("l" .. i) end
        ptx.raw("again: raw7:")
        ptx.label("raw6")
        ptx.label("again2")
        ptx.label("l7")
      end))
      assert.matches("ptx_spec.lua:%d+: label 'again' is placed twice", H.trace_error(function()
        ptx.raw("again:")
        ptx.label("again")
      end))
    end)

    it("refuse a label name that is not an identifier", function()
      assert.matches("ptx_spec.lua:%d+: ptx.label: a label name is letters, digits, _ and %$, got 1x",
        H.trace_error(function() ptx.label("1x") end))
    end)

    it("need a predicate for a conditional branch", function()
      assert.matches("ptx_spec.lua:%d+: ptx.bra: the condition must be a predicate",
        H.trace_error(function() ptx.bra("x", reg.scalar(T.u32)) end))
    end)
  end)

  describe("structured control flow", function()
    it("branches around if_ blocks", function()
      assert.same({
        "setp.eq.u32 %p1, %r1, 0;",
        "@!%p1 bra $L__else_1;",
        "mov.u32 %r1, 1;",
        "$L__else_1:",
        "setp.eq.u32 %p2, %r1, 0;",
        "@!%p2 bra $L__else_3;",
        "mov.u32 %r1, 1;",
        "bra.uni $L__endif_4;",
        "$L__else_3:",
        "mov.u32 %r1, 2;",
        "$L__endif_4:",
      }, lines(function()
        local c = reg.scalar(T.u32)
        ptx.if_(c:eq(0), function() c:set(1) end)
        ptx.if_(c:eq(0), function() c:set(1) end, function() c:set(2) end)
      end))
    end)

    it("loops while the body's predicate holds, with an exit label", function()
      assert.same({
        "$L__loop_1:",
        "add.u32 %r2, %r1, 1;",
        "mov.u32 %r1, %r2;",
        "setp.eq.u32 %p1, %r1, 7;",
        "@%p1 bra $L__loop_exit_2;",
        "setp.lt.u32 %p2, %r1, 10;",
        "@%p2 bra $L__loop_1;",
        "$L__loop_exit_2:",
        "$L__loop_3:",
        "bra.uni $L__loop_3;",
        "$L__loop_exit_4:",
      }, lines(function()
        local c = reg.scalar(T.u32)
        ptx.loop(function(l)
          c:set(c + 1)
          ptx.bra(l.exit, c:eq(7))
          return c:lt(10)
        end)
        ptx.loop(function() end)
      end))
    end)

    it("refuses a loop body that returns something else", function()
      assert.matches("ptx_spec.lua:%d+: ptx.loop: the body must return a predicate", H.trace_error(function()
        ptx.loop(function() return 1 end)
      end))
    end)

    it("counts with ptx.range, checking the bounds first unless they are constant", function()
      assert.same({
        "mov.u32 %r1, 0;",
        "$L__range_1:",
        "add.u32 %r1, %r1, 1;",
        "setp.lt.u32 %p1, %r1, 4;",
        "@%p1 bra $L__range_1;",
        "$L__range_exit_2:",
        "mov.u32 %r3, 0;",
        "setp.ge.u32 %p2, %r3, %r2;",
        "@%p2 bra $L__range_exit_4;",
        "$L__range_3:",
        "add.u32 %r3, %r3, 2;",
        "setp.lt.u32 %p3, %r3, %r2;",
        "@%p3 bra $L__range_3;",
        "$L__range_exit_4:",
      }, lines(function()
        local seen
        local i = ptx.range(0, 4, function(i) seen = i end)
        assert.equal(seen, i)
        local n = reg.scalar(T.u32)
        ptx.range(0, n, 2, function() end)
      end))
    end)

    it("refuses a range step that does not count up", function()
      assert.matches("ptx_spec.lua:%d+: ptx.range counts up: the step must be a positive integer, got %-1",
        H.trace_error(function() ptx.range(10, 0, -1, function() end) end))
    end)

    it("wraps a scope in braces", function()
      assert.same({ "{", "mov.u32 %r1, 3;", "}" }, lines(function()
        local c = reg.scalar(T.u32)
        ptx.scope(function() c:set(3) end)
      end))
    end)
  end)

  describe("typed wrappers", function()
    it("infer ld/st/ldu types and vector widths from the registers", function()
      assert.same({
        "ld.global.f32 %f1, [%rd1];",
        "ld.global.nc.v2.f32 {%f1, %f2}, [%rd1+8];",
        "ldu.global.u32 %r1, [%rd1];",
        "st.global.f32 [%rd1+4], %f1;",
        "st.global.cs.v4.u32 [%rd1], {%r1, %r1, %r1, %r1};",
        "ld.global.b16 %rs1, [%rd1];",
        "st.global.v2.b32 [%rd1], {%r2, %r2};",
        "ld.shared.f32 %f1, [t_smem+8];",
      }, lines(function()
        local p = reg.scalar(T.u64)
        local f, g, u = reg.scalar(T.f32), reg.scalar(T.f32), reg.scalar(T.u32)
        ptx.ld.global(f, ptx.addr(p))
        ptx.ld.global.nc({ f, g }, ptx.addr(p, 8))
        ptx.ldu.global(u, ptx.addr(p))
        ptx.st.global(ptx.addr(p, 4), f)
        ptx.st.global.cs(ptx.addr(p), { u, u, u, u })
        ptx.ld.global(reg.scalar(T.bf16), ptx.addr(p))
        local h2 = reg.scalar(T.f16x2)
        ptx.st.global(ptx.addr(p), { h2, h2 })
        ptx.ld.shared(f, smem.alloc(T.f32, 4)[2])
      end))
    end)

    it("need a register to infer the type from", function()
      assert.matches("ptx_spec.lua:%d+: st.global: cannot infer the type; pass a register",
        H.trace_error(function() ptx.st.global(ptx.addr(reg.scalar(T.u64)), 1) end))
    end)

    it("emit mov, cvt, bar.sync, shfl, vote, redux, atom and red", function()
      assert.same({
        "mov.u32 %r1, %laneid;",
        "cvt.rn.f32.u32 %f1, %r1;",
        "cvt.rzi.u32.f32 %r1, %f1;",
        "bar.sync 0;",
        "bar.sync 1, 64;",
        "shfl.sync.down.b32 %r2, %r2, 1, 31, 4294967295;",
        "shfl.sync.idx.b32 %r2, %r2, %r1, 31, 255;",
        "setp.eq.u32 %p2, %r1, 0;",
        "vote.sync.all.pred %p1, %p2, 4294967295;",
        "vote.sync.ballot.b32 %r2, %p1, 4294967295;",
        "redux.sync.max.u32 %r1, %r1, 4294967295;",
        "redux.sync.or.b32 %r2, %r2, 4294967295;",
        "atom.global.add.u32 %r1, [%rd1], 1;",
        "atom.global.exch.b32 %r2, [%rd1], %r2;",
        "atom.shared.add.u32 %r1, [t_smem], %r1;",
        "red.global.add.f32 [%rd1], %f1;",
        "red.global.max.u32 [%rd1], %r1;",
      }, lines(function()
        local p = reg.scalar(T.u64)
        local f, u, b = reg.scalar(T.f32), reg.scalar(T.u32), reg.scalar(T.b32)
        local pr = reg.pred()
        ptx.mov(u, ptx.special.laneid())
        ptx.cvt(f, u, "rn")
        ptx.cvt(u, f, "rzi")
        ptx.bar_sync()
        ptx.bar_sync(1, 64)
        ptx.shfl_sync("down", b, b, 1, 0x1f)
        ptx.shfl_sync("idx", b, b, u, 0x1f, 0xff)
        ptx.vote_sync("all", pr, u:eq(0))
        ptx.vote_sync("ballot", b, pr)
        ptx.redux_sync("max", u, u)
        ptx.redux_sync("or", b, b)
        ptx.atom("add", u, ptx.addr(p), 1)
        ptx.atom("exch", b, ptx.addr(p), b)
        ptx.atom("add", u, smem.alloc(T.u32, 1)[0], u, "shared")
        ptx.red("add", ptx.addr(p), f)
        ptx.red("max", ptx.addr(p), u)
      end))
    end)

    it("reject operation/type pairs PTX does not have", function()
      assert.matches("ptx_spec.lua:%d+: redux.sync.add.f32: .f32 reduces with .min or .max only",
        H.trace_error(function() local f = reg.scalar(T.f32) ptx.redux_sync("add", f, f) end, "sm_100a"))
      assert.matches("atom.global.and.u32: .and does not take .u32; valid types: .b32 .b64",
        H.trace_error(function() local u = reg.scalar(T.u32) ptx.atom("and", u, ptx.addr(reg.scalar(T.u64)), u) end))
      assert.matches("cvt.f32.u32: integer%-to%-float cvt needs a rounding modifier",
        H.trace_error(function() ptx.cvt(reg.scalar(T.f32), reg.scalar(T.u32)) end))
    end)
  end)

  describe("parameters", function()
    it("load tensor pointers and convert them to global addresses", function()
      local body = pyptx.kernel "t" {
        arch = "sm_80", in_specs = { Tile(4, T.f32), Tile(4, T.f32) }, raw_params = { { "u32", "n" } },
        function(A, B)
          ptx.global_ptrs(A, B)
          ptx.param("n", T.u32)
          ptx.param(A)
        end,
      }:module().entry.body
      assert.same({
        "ld.param.u64 %rd1, [t_param_0];",
        "cvta.to.global.u64 %rd2, %rd1;",
        "ld.param.u64 %rd3, [t_param_1];",
        "cvta.to.global.u64 %rd4, %rd3;",
        "ld.param.u32 %r1, [n];",
        "ld.param.u64 %rd5, [t_param_0];",
      }, body)
    end)
  end)

  describe("warp reductions", function()
    it("butterfly across the warp in log2(width) shuffle + op pairs", function()
      assert.same({
        "shfl.sync.bfly.b32 %f2, %f1, 4, 31, 4294967295;",
        "add.f32 %f1, %f1, %f2;",
        "shfl.sync.bfly.b32 %f2, %f1, 2, 31, 4294967295;",
        "add.f32 %f1, %f1, %f2;",
        "shfl.sync.bfly.b32 %f2, %f1, 1, 31, 4294967295;",
        "add.f32 %f1, %f1, %f2;",
        "shfl.sync.bfly.b32 %r2, %r1, 1, 31, 4294967295;",
        "max.s32 %r1, %r1, %r2;",
        "shfl.sync.bfly.b32 %r4, %r3, 1, 31, 4294967295;",
        "min.u32 %r3, %r3, %r4;",
      }, lines(function()
        local f = reg.scalar(T.f32)
        assert.equal(f, ptx.warp.reduce_sum(f, 8))
        ptx.warp.reduce_max(reg.scalar(T.s32), 2)
        ptx.warp.reduce_min(reg.scalar(T.b32), 2)
      end))
    end)

    it("do all 32 lanes by default", function()
      local n = 0
      for _, l in ipairs(lines(function() ptx.warp.reduce_sum(reg.scalar(T.u32)) end)) do
        if l:match("^shfl") then n = n + 1 end
      end
      assert.equal(5, n)
    end)

    it("need a 32-bit register", function()
      assert.matches("ptx_spec.lua:%d+: ptx.warp.reduce_sum needs a 32%-bit register",
        H.trace_error(function() ptx.warp.reduce_sum(reg.scalar(T.f64)) end))
    end)
  end)
end)
