-- The C instruction table (src/lpx_isa.def) through pyptx.core: form
-- interning, modifier groups, type slots, feature gates, arch checks, and
-- the validator's operand and modifier/type rules.
local ffi = require "ffi"
local core = require "pyptx.core"
local pyptx = require "pyptx"
local H = require "spec.helpers"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- Intern a form: its info table, or nil and the core's message.
local function form(text)
  local id = core.form_intern(core.ctx, text)
  if id < 0 then return nil, core.error_message() end
  local i = core.form_get(core.ctx, id)
  core.take_warning()
  return {
    id = id, op = i.op, type = i.type >= 0 and ffi.string(core.type_name(i.type)) or nil,
    type2 = i.type2 >= 0 and ffi.string(core.type_name(i.type2)) or nil, vec = i.vec,
    min_ptx = i.min_ptx, min_sm = i.min_sm, max_sm = i.max_sm, wide = i.wide,
  }
end

--- The message of a form the table refuses.
local function refused(text)
  local f, err = form(text)
  assert(f == nil, text .. " was accepted")
  return err
end

describe("the ISA table", function()
  describe("form interning", function()
    it("gives one id per spelling", function()
      local a, b = form("add.u32"), form("add.u32")
      assert.equal(a.id, b.id)
      assert.are_not.equal(a.id, form("add.s32").id)
    end)

    it("records types, vector width and .wide", function()
      assert.same({ "f32", 4 }, { form("ld.global.v4.f32").type, form("ld.global.v4.f32").vec })
      assert.same({ "f32", "s32" }, { form("cvt.rn.f32.s32").type, form("cvt.rn.f32.s32").type2 })
      assert.equal(1, form("mul.wide.s32").wide)
      assert.equal(0, form("mul.lo.s32").wide)
      assert.equal(1, form("add.u32").vec)
    end)

    it("takes the longest row that prefixes the opcode", function()
      assert.are_not.equal(form("bar.sync").op, form("bar.warp.sync").op)
      assert.are_not.equal(form("barrier.sync").op, form("barrier.cluster.arrive").op)
      assert.are_not.equal(form("cp.async.ca.shared.global").op, form("cp.async.commit_group").op)
    end)

    it("names an unknown modifier and the valid ones", function()
      assert.matches("^ld%.glob%.f32: unknown or repeated modifier %.glob for ld; valid modifiers: %.global %.shared %.local %.param %.const",
        refused("ld.glob.f32"))
    end)

    it("refuses a modifier given twice", function()
      assert.matches("add.rn.rz.f32: unknown or repeated modifier .rz for add", refused("add.rn.rz.f32"))
    end)

    it("says which modifier group is required", function()
      assert.equal("setp.u32: setp needs one of .eq .ne .lt .le .gt .ge .lo .ls .hi .hs .equ .neu .ltu .leu .gtu .geu .num .nan",
        refused("setp.u32"))
      assert.equal("fma.f32: fma needs one of .rn .rz .rm .rp .rna .rs", refused("fma.f32"))
      assert.matches("shfl.sync.b32: shfl.sync needs one of .up .down .bfly .idx", refused("shfl.sync.b32"))
    end)

    it("refuses types a row does not take, listing the valid ones", function()
      assert.equal("add.b32: type .b32 is not valid here; valid types: .u16 .u32 .u64 .s16 .s32 .s64 .f16 .f16x2 .bf16 .bf16x2 .f32 .f64 .u16x2 .s16x2",
        refused("add.b32"))
      assert.matches("^rem.f32: type .f32 is not valid here", refused("rem.f32"))
      assert.matches("^mov.f16: type .f16 is not valid here", refused("mov.f16"))
      assert.matches("^ld.global.f16: type .f16 is not valid here", refused("ld.global.f16"))
      assert.matches("^ex2.approx.f64: type .f64 is not valid here", refused("ex2.approx.f64"))
      assert.matches("^selp.f16: type .f16 is not valid here", refused("selp.f16"))
      assert.matches("^abs.u32: type .u32 is not valid here", refused("abs.u32"))
    end)

    it("counts type slots", function()
      assert.equal("add: add needs a type (one of .u16 .u32 .u64 .s16 .s32 .s64 .f16 .f16x2 .bf16 .bf16x2 .f32 .f64 .u16x2 .s16x2)",
        refused("add"))
      assert.matches("^cvt.rn.f32: cvt needs a destination and a source type", refused("cvt.rn.f32"))
      assert.equal("bra.u32: type .u32 is not valid here; valid types: (none)", refused("bra.u32"))
    end)

    it("says a repeated type is one too many", function()
      assert.matches("^add.u32.u32: too many type modifiers; add takes 1", refused("add.u32.u32"))
    end)

    it("knows modifiers the PTX spec groups separately", function()
      assert.truthy(form("min.xorsign.abs.f16"))
      assert.truthy(form("min.NaN.xorsign.abs.f32"))
      assert.truthy(form("redux.sync.max.abs.NaN.f32"))
      assert.truthy(form("bfind.shiftamt.s64"))
      assert.truthy(form("prefetch.global.L2"))
      assert.truthy(form("prefetchu.L1"))
      assert.truthy(form("prefetch.global.L2::evict_last"))
      assert.truthy(form("bar.cta.sync"))
      assert.truthy(form("barrier.cluster.wait.acquire"))
      assert.truthy(form("fence.proxy.async.shared::cta"))
      assert.truthy(form("fence.mbarrier_init.release.cluster"))
      assert.truthy(form("match.any.sync.b32"))
      assert.truthy(form("match.sync.any.b32"))
      assert.truthy(form("nanosleep.u32"))
      assert.matches("unknown or repeated modifier .wb for ld", refused("ld.global.wb.f32"))
      assert.matches("unknown or repeated modifier .ca for st", refused("st.global.ca.f32"))
      assert.matches("unknown or repeated modifier .aligned for bar", refused("bar.sync.aligned"))
      assert.matches("unknown or repeated modifier .ftz for atom", refused("atom.global.add.ftz.f32"))
      assert.matches("unknown or repeated modifier .L1::evict_last for prefetch", refused("prefetch.global.L1::evict_last"))
    end)

    it("refuses an mbarrier word PTX does not define, listing the valid ones", function()
      assert.matches("^mbarrier%.arrive%.frob%.shared::cta%.b64: unknown or repeated modifier %.frob for mbarrier; valid modifiers: "
        .. "%.global %.shared .* %.init %.inval %.arrive %.arrive_drop %.expect_tx %.complete_tx %.test_wait %.try_wait %.pending_count "
        .. "%.noComplete$",
        refused("mbarrier.arrive.frob.shared::cta.b64"))
      assert.matches("mbarrier.init.shared::cta.b32: type .b32 is not valid here; valid types: .b64",
        refused("mbarrier.init.shared::cta.b32"), 1, true)
      assert.matches("too many type modifiers", refused("mbarrier.init.shared.b64.b64"), 1, true)
      assert.truthy(form("mbarrier.arrive.noComplete.release.cta.shared::cta.b64"))
      assert.truthy(form("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"))
    end)

    it("interns an unknown opcode unchecked, with a warning", function()
      local id = core.form_intern(core.ctx, "frobnicate.zz.b32")
      assert.is_true(id >= 0)
      assert.equal(-1, core.form_get(core.ctx, id).op)
      assert.equal("frobnicate.zz.b32: opcode not in luaptx's instruction table; emitted unchecked", core.take_warning())
      assert.equal("", core.take_warning())
    end)
  end)

  describe("feature gates", function()
    it("raise a form's minimum PTX version and sm", function()
      local function need(text) local f = assert(form(text)) return { f.min_ptx, f.min_sm, f.max_sm } end
      assert.same({ 10, 20, 0 }, need("add.u32"))
      assert.same({ 78, 90, 0 }, need("add.bf16"))
      assert.same({ 42, 53, 0 }, need("add.f16"))
      assert.same({ 70, 80, 0 }, need("cvt.rn.bf16.f32"))
      assert.same({ 88, 100, 0 }, need("ld.global.v8.f32"))
      assert.same({ 80, 90, 0 }, need("fence.proxy.async"))
      assert.same({ 86, 100, 0 }, need("redux.sync.min.f32"))
      assert.same({ 78, 20, 0 }, need("bar.cta.sync"))
      assert.same({ 83, 70, 0 }, need("mov.b128"))
      assert.same({ 80, 90, 0 }, need("min.relu.s32"))
    end)

    it("mark arch-specific rows with a maximum sm", function()
      assert.same({ 90, 90 }, { form("wgmma.fence.sync.aligned").min_sm, form("wgmma.fence.sync.aligned").max_sm })
      assert.same({ 90, 121 }, { form("setmaxnreg.inc.sync.aligned.u32").min_sm, form("setmaxnreg.inc.sync.aligned.u32").max_sm })
      assert.same({ 100, 103 }, { form("tcgen05.fence::before_thread_sync").min_sm, form("tcgen05.fence::before_thread_sync").max_sm })
    end)
  end)

  describe("lookups", function()
    it("parse targets with their family", function()
      local out = ffi.new("int32_t[2]")
      local function parse(a)
        if core.arch_parse(a, out, out + 1) < 0 then return nil end
        return { out[0], out[1] }
      end
      assert.same({ 80, 0 }, parse("sm_80"))
      assert.same({ 90, 1 }, parse("sm_90a"))
      assert.same({ 100, 2 }, parse("sm_100f"))
      assert.is_nil(parse("sm_9x"))
      assert.is_nil(parse("compute_90"))
      assert.is_nil(parse("sm_90b"))
      assert.is_nil(parse("sm_999"))     -- well-formed, but no such target
      assert.is_nil(parse("sm_90f"))
      assert.is_nil(parse("sm_10"))
    end)

    it("list the targets the PTX ISA defines", function()
      local buf = ffi.new("char[1024]")
      local n = core.arch_list(buf, 1024)
      local names = ffi.string(buf, n)
      assert.matches("^sm_50 .* sm_80 .* sm_90a .* sm_100a .* sm_121f$", names)
      for name in names:gmatch("%S+") do
        assert.is_true(core.arch_min_ptx(name) >= 40 and core.arch_min_ptx(name) <= core.ptx_version_max(), name)
      end
      assert.equal(-1, core.arch_min_ptx("sm_999"))
    end)

    it("know every type's name and width", function()
      for _, t in ipairs(T.all) do
        assert.equal(t.name, ffi.string(core.type_name(t.id)))
        assert.equal(t.bits, core.type_bits(t.id))
      end
      assert.equal(-1, core.type_lookup("f33"))
    end)

    it("know the special registers and their types", function()
      assert.equal(T.u64.id, core.special_type(core.special_lookup("%clock64")))
      assert.equal(T.pred.id, core.special_type(core.special_lookup("%is_explicit_cluster")))
      assert.equal(-1, core.special_lookup("%tid.q"))
      assert.equal(T.u32.id, core.special_type(core.special_lookup("%clusterid.w")))
    end)

    it("have a row for every family the DSL covers", function()
      local names = {}
      for i = 0, core.isa_row_count() - 1 do names[ffi.string(core.isa_row_name(i))] = true end
      for _, op in ipairs { "add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "abs", "neg", "and", "or",
        "xor", "not", "shl", "shr", "popc", "clz", "brev", "bfe", "bfi", "prmt", "setp", "selp", "set", "cvt", "mov", "ld",
        "st", "ldu", "cvta", "bra", "ret", "exit", "call", "bar", "barrier", "membar", "fence", "shfl.sync", "vote.sync",
        "redux.sync", "match.sync", "atom", "red", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh" } do
        assert.is_true(names[op] ~= nil, op)
      end
    end)
  end)

  describe("arch and version checks", function()
    it("refuse an arch-specific instruction elsewhere", function()
      local function fence() ptx.inst.wgmma.fence.sync.aligned() end
      assert.matches("isa_spec.lua:%d+: wgmma.fence.sync.aligned needs target sm_90a; this kernel targets sm_80", H.trace_error(fence, "sm_80"))
      assert.matches("needs target sm_90a; this kernel targets sm_90$", H.trace_error(fence, "sm_90"))
      assert.matches("needs target sm_90a; this kernel targets sm_100a", H.trace_error(fence, "sm_100a"))
      assert.is_nil(H.trace_error(fence, "sm_90a"))
      local function tc() ptx.inst.tcgen05["fence::before_thread_sync"]() end
      assert.matches("tcgen05.fence::before_thread_sync needs an arch%-specific target sm_100a..sm_103a; this kernel targets sm_90a",
        H.trace_error(tc, "sm_90a"))
      assert.is_nil(H.trace_error(function() ptx.inst.setmaxnreg.inc.sync.aligned.u32(240) end, "sm_100a"))
    end)

    it("refuse an instruction above the kernel's sm", function()
      assert.matches("isa_spec.lua:%d+: add.bf16 needs sm_90 or newer; this kernel targets sm_80",
        H.trace_error(function() local b = reg.scalar(T.bf16) ptx.inst.add.bf16(b, b, b) end, "sm_80"))
      assert.matches("elect.sync needs sm_90 or newer",
        H.trace_error(function() ptx.inst.elect.sync(ptx.pipe(ptx.sink, reg.pred()), 0xffffffff) end, "sm_80"))
    end)

    it("refuse an instruction above the kernel's PTX version", function()
      local function v8()
        local r = reg.array(T.f32, 8)
        ptx.ld.global({ r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] }, ptx.addr(reg.scalar(T.u64)))
      end
      assert.matches("isa_spec.lua:%d+: ld.global.v8.f32 needs PTX ISA 8.8; this kernel uses 8.6 %(raise the kernel's version%)",
        H.trace_error(v8, "sm_100a"))
      assert.is_nil(H.trace_error(v8, { arch = "sm_100a", version = "8.8" }))
    end)
  end)

  describe("validator rules", function()
    -- { arch, body, expected message } for forms the rows alone cannot refuse
    local function u32() return reg.scalar(T.u32) end
    local function f32() return reg.scalar(T.f32) end
    local function f64() return reg.scalar(T.f64) end
    local function gp() return ptx.addr(reg.scalar(T.u64)) end
    local cases = {
      { "add.rn.u32: rounding, .ftz, .approx, .NaN and .xorsign apply to floating%-point types only",
        function() ptx.inst.add.rn.u32(u32(), u32(), u32()) end },
      { "add.sat.u32: .sat applies to .s32", function() ptx.inst.add.sat.u32(u32(), u32(), u32()) end },
      { "mul.u32: integer mul needs .lo, .hi or .wide", function() ptx.inst.mul.u32(u32(), u32(), u32()) end },
      { "mul.lo.f32: .lo, .hi and .wide apply to integer types only", function() ptx.inst.mul.lo.f32(f32(), f32(), f32()) end },
      { "mul.wide.u64: .wide takes a 16%- or 32%-bit source type",
        function() local d = reg.scalar(T.u64) ptx.inst.mul.wide.u64(d, d, d) end },
      { "mad.f32: floating%-point mad needs a rounding modifier", function() ptx.inst.mad.f32(f32(), f32(), f32(), f32()) end },
      { "div.f32: div.f32 needs .rn/.rz/.rm/.rp %(IEEE%), .approx or .full", function() ptx.inst.div.f32(f32(), f32(), f32()) end },
      { "div.approx.f64: div.f64 needs a rounding modifier", function() ptx.inst.div.approx.f64(f64(), f64(), f64()) end },
      { "rcp.f32: rcp needs .rn/.rz/.rm/.rp %(IEEE%) or .approx", function() ptx.inst.rcp.f32(f32(), f32()) end },
      { "rcp.approx.f64: rcp.approx.f64 needs .ftz", function() ptx.inst.rcp.approx.f64(f64(), f64()) end },
      { "sqrt.approx.f64: sqrt.f64 has no .approx form", function() ptx.inst.sqrt.approx.f64(f64(), f64()) end },
      { "fma.rn.relu.f32: .relu applies to .f16", function() ptx.inst.fma.rn.relu.f32(f32(), f32(), f32(), f32()) end },
      { "setp.lt.b32: .b32 compares with .eq or .ne only", function() local b = reg.scalar(T.b32) ptx.inst.setp.lt.b32(reg.pred(), b, b) end },
      { "setp.lo.s32: .lo/.ls/.hi/.hs compare unsigned integers only",
        function() local s = reg.scalar(T.s32) ptx.inst.setp.lo.s32(reg.pred(), s, s) end },
      { "setp.ltu.u32: unordered comparisons", function() ptx.inst.setp.ltu.u32(reg.pred(), u32(), u32()) end },
      { "cvt.f32.u32: integer%-to%-float cvt needs a rounding modifier", function() ptx.inst.cvt.f32.u32(f32(), u32()) end },
      { "cvt.rn.u32.f32: float%-to%-integer cvt needs an integer rounding modifier", function() ptx.inst.cvt.rn.u32.f32(u32(), f32()) end },
      { "cvt.f32.f64: narrowing float cvt needs a rounding modifier", function() ptx.inst.cvt.f32.f64(f32(), f64()) end },
      { "cvt.rn.f64.f32: widening float cvt is exact", function() ptx.inst.cvt.rn.f64.f32(f64(), f32()) end },
      { "cvt.rn.f32.f32: cvt between the same float type takes only integer rounding", function() ptx.inst.cvt.rn.f32.f32(f32(), f32()) end },
      { "cvt.rn.u32.u16: integer%-to%-integer cvt takes no rounding modifier",
        function() ptx.inst.cvt.rn.u32.u16(u32(), reg.scalar(T.u16)) end },
      { "cvt.rn.tf32.f32: cvt.rn/.rz to .tf32 needs sm_90 or newer",
        function() ptx.inst.cvt.rn.tf32.f32(reg.scalar(T.b32), f32()) end },
      { "cvt.rn.bf16.f16: cvt between .bf16 and .f16 needs sm_90",
        function() ptx.inst.cvt.rn.bf16.f16(reg.scalar(T.bf16), reg.scalar(T.f16)) end },
      { "cvt.rn.satfinite.e4m3x2.f32: .e4m3x2/.e5m2x2 on sm_89 needs PTX ISA 8.1",
        function() ptx.inst.cvt.rn.satfinite.e4m3x2.f32(reg.scalar(T.b16), f32(), f32()) end, "sm_89" },
      { "vote.sync.all.b32: vote.sync.ballot takes .b32", function() ptx.inst.vote.sync.all.b32(reg.scalar(T.b32), reg.pred(), 1) end },
      { "redux.sync.add.b32: .add/.min/.max reduce .u32 or .s32",
        function() local b = reg.scalar(T.b32) ptx.inst.redux.sync.add.b32(b, b, 1) end },
      { "redux.sync.inc.u32: redux.sync reduces with .add", function() ptx.inst.redux.sync.inc.u32(u32(), u32(), 1) end },
      { "atom.global.add.s64: .add does not take .s64",
        function() local s = reg.scalar(T.s64) ptx.inst.atom.global.add.s64(s, gp(), s) end },
      { "atom.global.add.f16: .f16 needs .noftz",
        function() local h = reg.scalar(T.f16) ptx.inst.atom.global.add.f16(h, gp(), h) end },
      { "atom.global.cas.b32: takes 4 operands",
        function() local b = reg.scalar(T.b32) ptx.inst.atom.global.cas.b32(b, gp(), b) end },
      { "red.global.exch.b32: .exch does not take .b32", function() local b = reg.scalar(T.b32) ptx.inst.red.global.exch.b32(gp(), b) end },
      { "ld.relaxed.global.f32: .relaxed/.acquire/.release/.mmio need a scope", function() ptx.inst.ld.relaxed.global.f32(f32(), gp()) end },
      { "ld.global.L2::evict_last.f32: .L2::evict_%* on ld needs a 256%-bit access",
        function() ptx.inst.ld.global["L2::evict_last"].f32(f32(), gp()) end },
      { "ldu.shared.f32: ldu reads the global space only",
        function() ptx.inst.ldu.shared.f32(f32(), ptx.addr(u32())) end },
      { "fence.sc: fence needs a scope", function() ptx.inst.fence.sc() end },
      { "bar.arrive: bar.arrive takes a barrier and a thread count", function() ptx.inst.bar.arrive(1) end },
      { "barrier.sync takes 1 or 2 or 3 or 4 operand%(s%), got 0", function() ptx.inst.barrier.sync() end },
      { "cvta.generic.u64: cvta converts between generic and", function() local d = reg.scalar(T.u64) ptx.inst.cvta.generic.u64(d, d) end },
      { "cvta.to.global.u32: addresses are 64%-bit in this module", function() ptx.inst.cvta.to.global.u32(u32(), u32()) end },
      { "mov.u32: operand 2 is a vector, but packing and unpacking need a .b32 type",
        function() ptx.inst.mov.u32(u32(), { reg.scalar(T.b16), reg.scalar(T.b16) }) end },
      { "mov.b64: operand 2 must be a vector {a, b} or {a, b, c, d}",
        function() local r = reg.scalar(T.b16) ptx.inst.mov.b64(reg.scalar(T.b64), { r, r, r }) end },
      { "mov.b64: operand 2 element 2 is a b16 register; .b64 with 2 elements needs 32%-bit registers",
        function() ptx.inst.mov.b64(reg.scalar(T.b64), { u32(), reg.scalar(T.b16) }) end },
      { "mov.u32: operand 2 is a f32 register", function() ptx.inst.mov.u32(u32(), f32()) end },
      { "mov.u32: operand 2 is the special register %%is_explicit_cluster",
        function() ptx.inst.mov.u32(u32(), ptx.special.is_explicit_cluster()) end, "sm_90a" },
      { "bar.red.popc.u32: operand 1 is a pred register",
        function() ptx.inst.bar.red.popc.u32(reg.pred(), 0, reg.pred()) end },
    }
    for _, c in ipairs(cases) do
      it("refuses " .. c[1]:match("^[^:]+"):gsub("%%", ""), function()
        local err = H.trace_error(c[2], c[3] or "sm_80")
        assert.is_string(err, "traced without error")
        assert.matches("^spec/isa_spec.lua:%d+: " .. c[1], err)
      end)
    end

    it("accept every instruction nvcc emitted in the corpus (spec/fixtures/ptx/nvcc)", function()
      local files, bodies = 0, 0
      for _, path in ipairs(H.list("spec/fixtures/ptx/nvcc", "%.ptx$")) do
        local text = H.read(path)
        local target, version = text:match("\n%.target ([%w_]+)"), text:match("\n%.version (%d+%.%d+)")
        for body in text:gmatch("%.entry[^{]-\n{\n(.-)\n}\n") do
          -- keep instructions, labels and .reg lines; drop what ptx.raw does not take in a body
          local kept = {}
          for line in body:gmatch("[^\n]*") do
            if line:match("^%s*%.loc") or line:match("^%s*//") or line:match("^%s*%.pragma")
              or line:match("^%s*%.local") or line:match("^%s*%.shared") or line:match("^%s*%.param") then line = "" end
            kept[#kept + 1] = line
          end
          -- the dropped declarations leave names undeclared: skip that check
          local err = H.trace_error(function() ptx.raw(table.concat(kept, "\n")) end, { arch = target, version = version, check_refs = false })
          assert.is_nil(err, path)
          bodies = bodies + 1
        end
        files = files + 1
      end
      assert.is_true(files >= 10, "found only " .. files .. " files in the nvcc corpus")
      assert.is_true(bodies >= files, "found " .. bodies .. " entry bodies in " .. files .. " files")
    end)

    it("accepts the forms those rules must not refuse", function()
      assert.is_nil(H.trace_error(function()
        local b64, b32, b16 = reg.scalar(T.b64), reg.scalar(T.b32), reg.scalar(T.b16)
        ptx.inst.mov.b64(b64, { b32, f32() })
        ptx.inst.mov.b64({ b32, ptx.sink }, b64)
        ptx.inst.mov.b64(b64, { b16, b16, b16, b16 })
        ptx.inst.mov.b32(b32, { b16, 0 })
        ptx.inst.cvt.f32.f16(f32(), reg.scalar(T.f16))
        ptx.inst.cvt.rni.f32.f32(f32(), f32())
        ptx.inst.cvt.sat.s32.u32(reg.scalar(T.s32), u32())
        ptx.inst.cvt.rn.bf16x2.f32(reg.scalar(T.bf16x2), f32(), f32())
        ptx.inst.cvt.rna.tf32.f32(b32, f32())
        ptx.inst.mad.hi.sat.s32(reg.scalar(T.s32), reg.scalar(T.s32), reg.scalar(T.s32), reg.scalar(T.s32))
        ptx.inst.div.full.f32(f32(), f32(), f32())
        ptx.inst.rcp.approx.ftz.f64(f64(), f64())
        ptx.inst.setp.lo.u32(reg.pred(), u32(), u32())
        ptx.inst.setp.nan.f32(reg.pred(), f32(), f32())
        ptx.inst.atom.global.cas.b32(b32, gp(), b32, b32)
        ptx.inst.atom.global.add.noftz.f16x2(reg.scalar(T.f16x2), gp(), reg.scalar(T.f16x2))
        ptx.inst.atom.global.L2_cache_hint.add.u32(u32(), gp(), u32(), reg.scalar(T.u64))
        ptx.inst.ld.global.L2_cache_hint.f32(f32(), gp(), reg.scalar(T.b64))
        ptx.inst.ld.relaxed.gpu.global.f32(f32(), gp())
        ptx.inst.ld.global.v4.f32({ f32(), ptx.sink, f32(), ptx.sink }, gp())
        ptx.inst.fence.sc.gpu()
        ptx.inst.fence.proxy.async()
        ptx.inst.bar.arrive(1, 64)
        ptx.inst.bar.red.popc.u32(u32(), 0, reg.pred())
        ptx.inst.bar.red["and"].pred(reg.pred(), 0, reg.pred())
        ptx.inst.redux.sync.add.u32(u32(), 5, 0xffffffff)
        ptx.inst.cvta.to.shared.u64(b64, b64)
      end))
    end)
  end)
end)

describe("pyptx.isa, the C family tables seen from Lua", function()
  local isa = require "pyptx.isa"
  local ampere, hopper, blackwell = require "pyptx.ampere", require "pyptx.hopper", require "pyptx.blackwell"

  --- The rows of a C table read with at(i) until NULL.
  local function c_rows(at)
    local out, i = {}, 0
    while at(i) ~= nil do out[#out + 1] = at(i); i = i + 1 end
    return out
  end

  it("are the views the wrappers spell from, not copies", function()
    assert.are.equal(isa.mma_shapes, ampere.SHAPES)
    assert.are.equal(isa.wgmma_families, hopper.FAMILY)
    assert.are.equal(isa.tc_shape_regs, blackwell.SHAPE_REGS)
  end)

  it("hold every mma.sync shape row and family of the C table, and nothing else", function()
    local rows, n = c_rows(core.mma_shape_at), 0
    for _, r in ipairs(rows) do
      local key = ("m%dn%dk%d.%s"):format(r.m, r.n, r.k, ffi.string(core.mtype_name(r.family)))
      local v = isa.mma_shapes[key]
      assert.is_truthy(v, key)
      assert.are.same({ r.a_regs, r.b_regs, r.acc_regs, r.sm, r.ptx }, { v.a, v.b, v.acc_regs, v.sm, v.ptx })
    end
    for _ in pairs(isa.mma_shapes) do n = n + 1 end
    assert.are.equal(#rows, n)
    for _, f in ipairs(c_rows(core.mma_family_at)) do
      local name = ffi.string(core.mtype_name(f.family))
      for id = 1, core.mtype_count() do
        local t = ffi.string(core.mtype_name(id))
        assert.are.equal(bit.band(f.inputs, bit.lshift(1, id)) ~= 0, isa.mma_family_of[t] == name, t)
        assert.are.equal(bit.band(f.accumulators, bit.lshift(1, id)) ~= 0, isa.mma_families[name].acc[t] == true, t)
      end
    end
  end)

  it("hold every wgmma family and tcgen05 ld/st shape of the C table", function()
    for _, f in ipairs(c_rows(core.wgmma_family_at)) do
      for id = 1, core.mtype_count() do
        local t = ffi.string(core.mtype_name(id))
        local v = isa.wgmma_families[t]
        if bit.band(f.inputs, bit.lshift(1, id)) ~= 0 then
          assert.are.same({ f.k, f.n16 ~= 0, f.satfinite ~= 0, f.sparse_sel >= 0 and f.sparse_sel or nil },
                          { v.k, v.n16, v.satfinite, v.sparse_sel })
        end
      end
    end
    local g, n = core.modgroup_lookup("TCSHAPE"), 0
    for v = 1, core.modgroup_size(g) do
      n = n + 1
      assert.are.equal(core.tc_shape_regs(v), isa.tc_shape_regs[ffi.string(core.modifier_name(g, v))])
    end
    local count = 0
    for _ in pairs(isa.tc_shape_regs) do count = count + 1 end
    assert.are.equal(n, count)
  end)

  it("agree with the validator: every mma.sync row and wgmma family spelled from them validates", function()
    assert.is_nil(H.trace_error(function()
      for key, row in pairs(isa.mma_shapes) do
        local shape, fam = key:match("^(.-)%.(.*)$")
        for a in pairs(isa.mma_families[fam].inputs) do
          for acc in pairs(row.acc) do
            local f = ampere.fragments(shape, a, acc)
            ptx.mma { shape = shape, atype = a, ctype = acc, d = f.c, a = f.a, b = f.b, c = f.c }
          end
        end
      end
      for a, fam in pairs(isa.wgmma_families) do
        for acc in pairs(fam.acc) do
          local d = hopper.wgmma.fragments(64, false, acc)
          hopper.wgmma.mma_async { shape = { 64, 64 }, atype = a, dtype = acc, d = d, a = reg.scalar(T.u64), b = reg.scalar(T.u64) }
        end
      end
    end, { version = "8.7" }))
  end)
end)
