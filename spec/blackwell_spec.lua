-- Blackwell tcgen05: the DSL wrappers (one instruction each), the ISA rows
-- and tcgen05_check in the validator (modifiers, operand kinds and counts,
-- arch gates), the descriptor builders, and the examples under
-- examples/blackwell (tcgen05_suite, gemm), which must assemble with
-- ptxas for sm_100a. Forms the validator refuses are also checked against
-- ptxas, emitted as text, so a rule of ours that is wrong shows up here.
local bit = require "bit"
local pyptx = require "pyptx"
local bw = require "pyptx.blackwell"
local H = require "spec.helpers"
local reg, ptx, smem, T = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types

--- Trace body in a kernel for arch; returns ok, the PTX or the error.
local function trace(body, arch, version)
  local k = pyptx.kernel "k" { arch = arch or "sm_100a", version = version, block = { 128, 1, 1 },
    function() body() ptx.ret() end }
  local ok, s = pcall(function() return k:specialize() end)
  if ok then return true, s.ptx end
  return false, tostring(s)
end

--- The body lines of some PTX (no .loc/.file, no declarations).
local function body_lines(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do
    local l = line:gsub("^%s+", "")
    if l:find("^tcgen05") then out[#out + 1] = (l:gsub("%s+", " ")) end
  end
  return out
end

--- Assert that text assembles for arch (default sm_100a); pending without
-- ptxas, so last in a test.
local function assembles(text, arch)
  local ok, _, log = H.ptxas(text, arch or "sm_100a")
  assert(ok, "ptxas refused:\n" .. tostring(log) .. "\n" .. text)
end

--- Assert that ptxas assembles a specialization without spills; pending without ptxas.
local function assembles_unspilled(s, name)
  local ok, report, log = H.ptxas(s.ptx, s.arch)
  assert(ok, name .. ":\n" .. tostring(log))
  assert.are.equal(0, report[name].spill_stores + report[name].spill_loads)
end

local function b32() return reg.scalar(T.b32) end
local function b64() return reg.scalar(T.b64) end

describe("pyptx.blackwell.idesc", function()
  it("packs bf16 x bf16 -> f32, M = 128, N = 256 per the PTX ISA table", function()
    -- D f32 = 1 << 4, A bf16 = 1 << 7, B bf16 = 1 << 10, N >> 3 = 32 << 17, M >> 4 = 8 << 24
    assert.are.equal(0x08400490, bw.idesc { kind = "f16", a = "bf16", b = "bf16", d = "f32", M = 128, N = 256 })
  end)

  it("packs every kind's type codes, majors, negation and sparsity", function()
    assert.are.equal(0 * 16 + 0x08000000 + 8 * 131072, bw.idesc { a = "f16", d = "f16", M = 128, N = 64 })
    assert.are.equal(16 + 2 * 128 + 2 * 1024 + 16 * 131072 + 0x08000000,
      bw.idesc { kind = "tf32", a = "tf32", M = 128, N = 128 })
    assert.are.equal(16 + 1 * 128 + 5 * 1024 + 16 * 131072 + 0x08000000,
      bw.idesc { kind = "f8f6f4", a = "e5m2", b = "e2m1", M = 128, N = 128 })
    assert.are.equal(8 + 32 + 128 + 1024 + 16 * 131072 + 0x08000000,
      bw.idesc { kind = "i8", a = "s8", saturate = true, M = 128, N = 128 })
    local base = bw.idesc { a = "bf16", M = 64, N = 8 }
    assert.are.equal(base + 32768 + 65536, bw.idesc { a = "bf16", M = 64, N = 8, a_major = "MN", b_major = "MN" })
    assert.are.equal(base + 8192 + 16384, bw.idesc { a = "bf16", M = 64, N = 8, negate_a = true, negate_b = true })
    assert.are.equal(base + 4 + 3, bw.idesc { a = "bf16", M = 64, N = 8, sparse = true, sparse_id = 3 })
    assert.are.equal(0x10000000 + 16 + 128 + 1024 + 32 * 131072,
      bw.idesc { a = "bf16", M = 256, N = 256, cta_group = 2 })
    assert.are.equal(base, bw.idesc { a = T.bf16, M = 64, N = 8 })
  end)

  it("rejects types, shapes and options the kind does not allow", function()
    assert.has_error(function() bw.idesc { kind = "f16", a = "e4m3" } end)
    assert.has_error(function() bw.idesc { kind = "tf32", a = "tf32", d = "f16" } end)
    assert.has_error(function() bw.idesc { kind = "f64" } end)
    assert.has_error(function() bw.idesc { a = "bf16", M = 96 } end)
    assert.has_error(function() bw.idesc { a = "bf16", M = 128, N = 136 } end)
    assert.has_error(function() bw.idesc { a = "bf16", M = 64, N = 264 } end)
    assert.has_error(function() bw.idesc { a = "bf16", M = 64, N = 8, cta_group = 2 } end)
    assert.has_error(function() bw.idesc { kind = "i8", a = "s8", negate_a = true } end)
    assert.has_error(function() bw.idesc { kind = "f8f6f4", a = "e2m1", a_major = "MN" } end)
    assert.has_error(function() bw.idesc { a = "bf16", a_major = "row" } end)
  end)
end)

describe("pyptx.blackwell.smem_desc", function()
  it("packs address, LBO, SBO, version, base offset, LBO mode and swizzle", function()
    -- start 1024 >> 4, LBO 16 >> 4 at bit 16, SBO 1024 >> 4 at 32, version 1 at 46, 128B swizzle (2) at 61
    assert.are.equal(0x4000404000010040ULL, bw.smem_desc { addr = 1024, lbo = 16, sbo = 1024, swizzle = "128B" })
    assert.are.equal(0x0000400000010000ULL, bw.smem_desc {})
    local d = bw.smem_desc { addr = 0x3fff0, lbo = 0x3fff0, sbo = 0x3fff0, base_offset = 7, lbo_mode = 1, swizzle = "32B" }
    assert.are.equal(0xC01E7FFF3FFF3FFFULL, d)
    for name, code in pairs(bw.SWIZZLES) do
      assert.are.equal(0ULL + code, bit.rshift(bw.smem_desc { swizzle = name }, 61))
    end
  end)

  it("rejects unaligned or out-of-range fields", function()
    assert.has_error(function() bw.smem_desc { addr = 8 } end)
    assert.has_error(function() bw.smem_desc { addr = 2 ^ 18 } end)
    assert.has_error(function() bw.smem_desc { sbo = 24 } end)
    assert.has_error(function() bw.smem_desc { swizzle = "16B" } end)
    assert.has_error(function() bw.smem_desc { base_offset = 8 } end)
  end)

  it("builds a descriptor from a runtime shared address in four instructions", function()
    local ok, text = trace(function()
      local t = smem.alloc(T.b8, 1024, { align = 1024 })
      local base = t:base()
      bw.smem_desc_reg(base, { sbo = 1024, swizzle = "128B" })
    end)
    assert(ok, text)
    assert.is_truthy(text:find("shr.u32%s+%%r2, %%r1, 4;"))
    assert.is_truthy(text:find("and.b32%s+%%r2, %%r2, 16383;"))
    assert.is_truthy(text:find("cvt.u64.u32%s+%%rd1, %%r2;"))
    assert.is_truthy(text:find("or.b64%s+%%rd1, %%rd1, 4611756662049538048;"))
  end)

  it("gives TMEM lane/column offsets", function()
    assert.are.equal(32 * 65536 + 64, bw.tmem_offset(32, 64))
  end)
end)

-- Each wrapper call and the one line it must emit.
local FORMS = {
  { "alloc (shared slot)", function(e) ptx.tcgen05.alloc { dst = e.slot, ncols = 64 } end,
    "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [k_smem], 64;" },
  { "dealloc", function(e) ptx.tcgen05.dealloc { taddr = e.t, ncols = 64 } end,
    "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 64;" },
  { "relinquish_alloc_permit", function() ptx.tcgen05.relinquish_alloc_permit() end,
    "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" },
  { "mma ss", function(e) ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p } end,
    "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "mma ts + scale", function(e) ptx.tcgen05.mma { d = e.t, a = e.t, b = e.db, idesc = e.i, enable_d = e.p, scale_d = 1 } end,
    "tcgen05.mma.cta_group::1.kind::f16 [%r1], [%r1], %rd2, %r2, %p1, 1;" },
  { "mma tf32", function(e) ptx.tcgen05.mma { kind = "tf32", d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p } end,
    "tcgen05.mma.cta_group::1.kind::tf32 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "mma f8f6f4", function(e) ptx.tcgen05.mma { kind = "f8f6f4", d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p } end,
    "tcgen05.mma.cta_group::1.kind::f8f6f4 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "mma i8", function(e) ptx.tcgen05.mma { kind = "i8", d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p } end,
    "tcgen05.mma.cta_group::1.kind::i8 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "mma sp", function(e) ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, sp_meta = e.t, idesc = e.i, enable_d = e.p } end,
    "tcgen05.mma.sp.cta_group::1.kind::f16 [%r1], %rd1, %rd2, [%r1], %r2, %p1;" },
  { "mma lane mask + collector", function(e)
      ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p, collector = "fill",
                        disable_output_lane = { e.i, e.i, e.i, e.i } }
    end, "tcgen05.mma.cta_group::1.kind::f16.collector::a::fill [%r1], %rd1, %rd2, %r2, {%r2, %r2, %r2, %r2}, %p1;" },
  { "ld 32x32b", function(e) ptx.tcgen05.ld { dst = { e.i, e.i }, taddr = e.t } end,
    "tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r2, %r2}, [%r1];" },
  { "ld 16x256b", function(e) ptx.tcgen05.ld { dst = { e.i, e.i, e.i, e.i }, taddr = e.t, shape = "16x256b", pack = true } end,
    "tcgen05.ld.sync.aligned.16x256b.x1.pack::16b.b32 {%r2, %r2, %r2, %r2}, [%r1];" },
  { "ld 16x32bx2", function(e) ptx.tcgen05.ld { dst = { e.i }, taddr = e.t, shape = "16x32bx2", split = 4 } end,
    "tcgen05.ld.sync.aligned.16x32bx2.x1.b32 {%r2}, [%r1], 4;" },
  { "st 16x128b", function(e) ptx.tcgen05.st { src = { e.i, e.i }, taddr = e.t, shape = "16x128b", unpack = true } end,
    "tcgen05.st.sync.aligned.16x128b.x1.unpack::16b.b32 [%r1], {%r2, %r2};" },
  { "st 16x64b", function(e) ptx.tcgen05.st { src = { e.i }, taddr = e.t, shape = "16x64b" } end,
    "tcgen05.st.sync.aligned.16x64b.x1.b32 [%r1], {%r2};" },
  { "commit", function(e) ptx.tcgen05.commit { mbar = e.bar } end,
    "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [k_smem+8];" },
  { "commit generic", function(e) ptx.tcgen05.commit { mbar = e.da } end,
    "tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [%rd1];" },
  { "cp", function(e) ptx.tcgen05.cp { taddr = e.t, desc = e.da, shape = "128x128b" } end,
    "tcgen05.cp.cta_group::1.128x128b [%r1], %rd1;" },
  { "cp decompress", function(e) ptx.tcgen05.cp { taddr = e.t, desc = e.da, src_fmt = "b4x16_p64" } end,
    "tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64 [%r1], %rd1;" },
  { "cp warpx4", function(e) ptx.tcgen05.cp { taddr = e.t, desc = e.da, shape = "32x128b", multicast = "warpx4" } end,
    "tcgen05.cp.cta_group::1.32x128b.warpx4 [%r1], %rd1;" },
  { "shift", function(e) ptx.tcgen05.shift { taddr = e.t } end, "tcgen05.shift.cta_group::1.down [%r1];" },
  { "fence before", function() ptx.tcgen05.fence("before") end, "tcgen05.fence::before_thread_sync;" },
  { "fence after", function() ptx.tcgen05.fence_after_thread_sync() end, "tcgen05.fence::after_thread_sync;" },
  { "wait ld", function() ptx.tcgen05.wait("ld") end, "tcgen05.wait::ld.sync.aligned;" },
  { "wait st", function() ptx.tcgen05.wait_st() end, "tcgen05.wait::st.sync.aligned;" },
}

--- The operands every FORMS body gets: %r1 taddr, %r2 idesc, %rd1/%rd2 descs, %p1.
local function env()
  local e = { slot = smem.alloc(T.u32, 1), bar = smem.mbarrier(1) }
  e.t, e.i, e.da, e.db, e.p = b32(), b32(), b64(), b64(), reg.pred()
  return e
end

describe("ptx.tcgen05 wrappers", function()
  for _, f in ipairs(FORMS) do
    it(f[1] .. " emits one instruction that assembles for sm_100a", function()
      local ok, text = trace(function() f[2](env()) end)
      assert(ok, text)
      local lines = body_lines(text)
      assert.are.same({ f[3] }, lines)
      assembles(text)
    end)
  end

  it("emits cta_group::2 forms (alloc, mma with an 8-word lane mask, multicast commit) that assemble", function()
    local ok, text = trace(function()
      local e = env()
      local mask = reg.scalar(T.b16, 3)
      ptx.tcgen05.alloc { dst = e.slot, ncols = 256, cta_group = 2 }
      ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p, cta_group = 2,
                        disable_output_lane = { e.i, e.i, e.i, e.i, e.i, e.i, e.i, e.i } }
      ptx.tcgen05.commit { mbar = e.bar, cta_group = 2, multicast = mask }
      ptx.tcgen05.dealloc { taddr = e.t, ncols = 256, cta_group = 2 }
    end)
    assert(ok, text)
    assert.is_truthy(text:find("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64", 1, true))
    assembles(text)
  end)

  it("guards the one instruction through ptx.at", function()
    local ok, text = trace(function()
      local e = env()
      ptx.at(e.p).tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p }
      ptx.at(-e.p).tcgen05.commit { mbar = e.bar }
    end)
    assert(ok, text)
    assert.is_truthy(text:find("@%p1 tcgen05.mma.cta_group::1.kind::f16", 1, true))
    assert.is_truthy(text:find("@!%p1 tcgen05.commit", 1, true))
    assembles(text)
  end)

  it("validates tcgen05 written as PTX text through ptx.raw", function()
    local ok, text = trace(function()
      local e = env()
      ptx.raw("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%{a}, %{a}}, [%{t}];", { a = e.i, t = e.t })
    end)
    assert(ok, text)
    local bad, err = trace(function()
      local e = env()
      ptx.raw("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%{a}}, [%{t}];", { a = e.i, t = e.t })
    end)
    assert.is_false(bad)
    assert.is_truthy(err:find("must be a vector of 2 32-bit registers", 1, true), err)
  end)

  it("assembles every ld/st shape at its largest .num", function()
    local ok, text = trace(function()
      local t = b32()
      for shape, per in pairs(bw.SHAPE_REGS) do
        local v = {}
        for i = 1, 128 do v[i] = reg.scalar(T.b32) end
        assert.are.equal(128, #v)
        local n = 128 / per
        ptx.tcgen05.ld { dst = v, taddr = t, shape = shape, num = n, split = shape == "16x32bx2" and 2 or nil }
        ptx.tcgen05.st { src = v, taddr = t, shape = shape, num = n, split = shape == "16x32bx2" and 2 or nil }
      end
    end)
    assert(ok, text)
    assert.are.equal(10, #body_lines(text))
    assembles(text)
  end)
end)

-- Forms the validator must refuse: the call, and text the message must name.
local BAD = {
  { "tcgen05 on sm_90a", function() ptx.tcgen05.fence("before") end,
    "needs an arch-specific target sm_100a..sm_103a; this kernel targets sm_90a", "sm_90a" },
  { "mma on sm_90a", function(e) ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p } end,
    "this kernel targets sm_90a", "sm_90a" },
  { "tcgen05 on sm_100 (not arch-specific)", function() ptx.tcgen05.wait("ld") end, "this kernel targets sm_100", "sm_100" },
  { "kind::i8 on sm_103a", function(e)
      ptx.tcgen05.mma { kind = "i8", d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = e.p }
    end, ".kind::i8 is not available on sm_103a", "sm_103a" },
  { "a register count that is no .xN", function(e) ptx.tcgen05.ld { dst = { e.i, e.i, e.i }, taddr = e.t } end,
    "3 registers do not make a .32x32b.xN" },
  { "raw ld with the wrong vector", function(e)
      ptx.inst("tcgen05.ld.sync.aligned.16x128b.x2.b32", { e.i, e.i }, ptx.addr(e.t))
    end, "must be a vector of 4 32-bit registers",
    "tcgen05.ld.sync.aligned.16x128b.x2.b32 {%r2, %r2}, [%r1];" },
  { "raw ld past 128 registers", function(e)
      ptx.inst("tcgen05.ld.sync.aligned.16x256b.x64.b32", { e.i }, ptx.addr(e.t))
    end, "at most 128 32-bit registers" },
  { "an unknown modifier", function(e)
      ptx.inst("tcgen05.ld.sync.aligned.32x32b.x1.frob.b32", { e.i }, ptx.addr(e.t))
    end, "unknown or repeated modifier .frob for tcgen05.ld",
    "tcgen05.ld.sync.aligned.32x32b.x1.frob.b32 {%r2}, [%r1];" },
  -- the PTX ISA's grammar requires .sync.aligned; ptxas 13.0 lets .aligned go
  { "a missing .aligned", function(e)
      ptx.inst("tcgen05.st.sync.32x32b.x1.b32", ptx.addr(e.t), { e.i })
    end, "tcgen05.st needs one of .aligned" },
  { "a missing kind", function(e)
      ptx.inst("tcgen05.mma.cta_group::1", ptx.addr(e.t), e.da, e.db, e.i, e.p)
    end, "needs one of .kind::f16", "tcgen05.mma.cta_group::1 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "a 32-bit B descriptor", function(e)
      ptx.inst("tcgen05.mma.cta_group::1.kind::f16", ptx.addr(e.t), e.da, e.i, e.i, e.p)
    end, "operand 3 is a b32 register", "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %r2, %r2, %p1;" },
  { "a 4-word lane mask with cta_group::2", function(e)
      ptx.inst("tcgen05.mma.cta_group::2.kind::f16", ptx.addr(e.t), e.da, e.db, e.i, { e.i, e.i, e.i, e.i }, e.p)
    end, "must be a vector of 8 32-bit registers",
    "tcgen05.mma.cta_group::2.kind::f16 [%r1], %rd1, %rd2, %r2, {%r2, %r2, %r2, %r2}, %p1;" },
  { "scale-input-d with kind::f8f6f4", function(e)
      ptx.inst("tcgen05.mma.cta_group::1.kind::f8f6f4", ptx.addr(e.t), e.da, e.db, e.i, e.p, 1)
    end, "scale-input-d is not available with .kind::f8f6f4",
    "tcgen05.mma.cta_group::1.kind::f8f6f4 [%r1], %rd1, %rd2, %r2, %p1, 1;" },
  { "scale-input-d above 15", function(e)
      ptx.inst("tcgen05.mma.cta_group::1.kind::f16", ptx.addr(e.t), e.da, e.db, e.i, e.p, 16)
    end, "(scale-input-d) must be an integer in 0..15",
    "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1, 16;" },
  { "a scale-input-d register", function(e)
      ptx.inst("tcgen05.mma.cta_group::1.kind::f16", ptx.addr(e.t), e.da, e.db, e.i, e.p, e.i)
    end, "must be an integer immediate", "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1, %r2;" },
  { "a boolean enable_d", function(e)
      ptx.tcgen05.mma { d = e.t, a = e.da, b = e.db, idesc = e.i, enable_d = true }
    end, "enable_d must be a predicate register" },
  { "sp without the metadata operand", function(e)
      ptx.inst("tcgen05.mma.sp.cta_group::1.kind::f16", ptx.addr(e.t), e.da, e.db, e.i, e.p)
    end, "[sp-meta-tmem], idesc", "tcgen05.mma.sp.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;" },
  { "cp 64x128b without warpx2", function(e) ptx.tcgen05.cp { taddr = e.t, desc = e.da, shape = "64x128b" } end,
    ".64x128b needs .warpx2::02_13 or .warpx2::01_23", "tcgen05.cp.cta_group::1.64x128b [%r1], %rd1;" },
  { "cp 128x256b with warpx4", function(e)
      ptx.tcgen05.cp { taddr = e.t, desc = e.da, shape = "128x256b", multicast = "warpx4" }
    end, "only .64x128b and .32x128b take a .warpx multicast", "tcgen05.cp.cta_group::1.128x256b.warpx4 [%r1], %rd1;" },
  { "alloc of 48 columns", function(e) ptx.tcgen05.alloc { dst = e.slot, ncols = 48 } end,
    "(nCols) must be a power of 2 from 32 to 512",
    "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [k_smem], 48;" },
  { "alloc of 1024 columns", function(e) ptx.tcgen05.alloc { dst = e.slot, ncols = 1024 } end,
    "(nCols, a power of 2 from 32 to 512) must be an integer in 32..512",
    "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [k_smem], 1024;" },
  { "a cta-mask without multicast", function(e)
      ptx.inst("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", ptx.addr(e.slot), 3)
    end, "a cta-mask needs .multicast::cluster",
    "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [k_smem], 3;" },
  { "a TMEM address in a 64-bit register", function(e) ptx.tcgen05.shift { taddr = e.da } end,
    "must be a tensor-memory address" },
  { "mixed cta_group sizes in one kernel", function(e)
      ptx.tcgen05.alloc { dst = e.slot, ncols = 32 }
      ptx.tcgen05.dealloc { taddr = e.t, ncols = 32, cta_group = 2 }
    end, "a kernel uses one CTA-group size" },
  { "mixed cta_group sizes through ptx.inst", function(e)
      ptx.tcgen05.alloc { dst = e.slot, ncols = 32 }
      ptx.inst("tcgen05.dealloc.cta_group::2.sync.aligned.b32", e.t, 32)
    end, "cta_group::2 here, but spec/blackwell_spec.lua:" },
  { "mixed cta_group sizes in raw PTX", function(e)
      ptx.raw("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [k_smem], 32;")
      ptx.raw("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %{t}, 32;", { t = e.t })
    end, "used cta_group::2; a kernel uses one CTA-group size" },
}

--- A minimal kernel around one instruction line (the env() registers).
local function unchecked(line, arch)
  return ([[
.version %s
.target %s
.address_size 64
.shared .align 16 .b8 k_smem[16];
.visible .entry k() {
  .reg .pred %%p<2>;
  .reg .b32 %%r<3>;
  .reg .b64 %%rd<3>;
  %s
  ret;
}
]]):format(arch == "sm_103a" and "8.8" or "8.6", arch or "sm_100a", line)
end

--- A BAD entry as { name, fn, msg, arch, line }: the fourth field is a
-- target when it names one, else the instruction text ptxas must refuse.
local function case(b)
  if b[4] and b[4]:find("^tcgen05") then return { b[1], b[2], b[3], nil, b[4] } end
  return b
end

describe("tcgen05 validation", function()
  for _, raw in ipairs(BAD) do
    local b = case(raw)
    it("refuses " .. b[1] .. " at the caller's line", function()
      local ok, err = trace(function() b[2](env()) end, b[4])
      assert.is_false(ok)
      assert.is_truthy(err:find(b[3], 1, true), ("expected %q in: %s"):format(b[3], err))
      assert.is_truthy(err:find("blackwell_spec%.lua:%d+: "), "expected the spec's line in: " .. err)
    end)
  end

  it("is matched by ptxas refusing the same text", function()
    local lines = {}
    for _, raw in ipairs(BAD) do lines[#lines + 1] = case(raw)[5] end
    assert.is_true(#lines >= 5, "only " .. #lines .. " refused forms carry their text")
    H.need_ptxas()
    for _, line in ipairs(lines) do
      assert.is_false((H.ptxas(unchecked(line), "sm_100a")), "ptxas accepted what the validator refuses: " .. line)
    end
    for _, arch in ipairs { "sm_90a", "sm_100" } do
      assert.is_false((H.ptxas(unchecked("tcgen05.fence::before_thread_sync;", arch), arch)))
    end
    local i8 = "tcgen05.mma.cta_group::1.kind::i8 [%r1], %rd1, %rd2, %r2, %p1;"
    assert.is_false((H.ptxas(unchecked(i8, "sm_103a"), "sm_103a")))
    assert.is_true((H.ptxas(unchecked(i8, "sm_100a"), "sm_100a")))
  end)

  it("accepts tcgen05 on sm_103a (PTX 8.8) and parses nvcc's tcgen05 PTX", function()
    local ok, text = trace(function() ptx.tcgen05.fence("before") end, "sm_103a")
    assert(ok, text)
    local m = pyptx.load_ptx(H.read("spec/fixtures/ptx/nvcc/blackwell_sm100a.ptx"), "blackwell_sm100a.ptx")
    assert.is_truthy(m)
    assembles(text, "sm_103a")
  end)
end)

describe("examples/blackwell", function()
  local suite = dofile("examples/blackwell/tcgen05_suite.lua")
  local gemm = dofile("examples/blackwell/gemm.lua")

  it("has one kernel per tcgen05 primitive, each assembling for sm_100a", function()
    assert.is_true(#suite.kernels >= 14)
    local seen, specs = {}, {}
    for i, k in ipairs(suite.kernels) do
      local s = k:specialize()
      specs[i] = s
      assert.are.equal("sm_100a", s.arch)
      for _, l in ipairs(body_lines(s.ptx)) do
        seen[l:match("^(tcgen05%.[%w_:]+)")] = true
        if l:find("^tcgen05%.mma%.sp%.") then seen["tcgen05.mma.sp"] = true end
      end
    end
    for _, op in ipairs { "tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit", "tcgen05.mma",
                          "tcgen05.ld", "tcgen05.st", "tcgen05.commit", "tcgen05.cp", "tcgen05.shift",
                          "tcgen05.fence::before_thread_sync", "tcgen05.fence::after_thread_sync",
                          "tcgen05.wait::ld", "tcgen05.wait::st", "tcgen05.mma.sp" } do
      assert(seen[op], "the suite never emits " .. op)
    end
    for i, k in ipairs(suite.kernels) do assembles_unspilled(specs[i], k.name) end
  end)

  it("builds 1-SM and 2-SM (cta_group::2) GEMMs that assemble for sm_100a without spills", function()
    assert.are.equal(2, #gemm.kernels)
    local one, two = gemm.kernels[1]:specialize(), gemm.kernels[2]:specialize()
    assert.is_truthy(one.ptx:find("tcgen05.mma.cta_group::1.kind::f16", 1, true))
    assert.is_truthy(two.ptx:find("tcgen05.mma.cta_group::2.kind::f16", 1, true))
    assert.is_truthy(two.ptx:find(".reqnctapercluster 2, 1, 1", 1, true))
    assert.is_truthy(one.ptx:find("cp.async.bulk.tensor.2d", 1, true))
    assert.is_truthy(two.ptx:find("mbarrier::complete_tx::bytes.cta_group::2", 1, true))
    -- other shapes and pipeline depths
    local others = {}
    for i, o in ipairs { { BN = 128, stages = 2 }, { BN = 64, stages = 8, cta_group = 2 } } do
      others[i] = gemm.build(512, 512, 256, o):specialize()
      assert.are.equal("sm_100a", others[i].arch)
    end
    assembles_unspilled(one, gemm.kernels[1].name)
    assembles_unspilled(two, gemm.kernels[2].name)
    for _, s in ipairs(others) do assembles(s.ptx, s.arch) end
  end)

  it("rejects GEMM shapes that break its constraints, at the caller's line", function()
    for _, c in ipairs {
      { { 100, 256, 64 }, "M % 128 == 0" },
      { { 128, 256, 64, { cta_group = 2 } }, "M % 256 == 0" },
      { { 128, 100, 64 }, "N % BN == 0" },
      { { 128, 256, 48 }, "K % 64 == 0" },
      { { 128, 256, 64, { stages = 3 } }, "stages must be 2, 4 or 8" },
      { { 128, 256, 64, { BN = 100 } }, "BN must be a multiple of 32" },
    } do
      local ok, err = pcall(function()
        local k = gemm.build(unpack(c[1], 1, 4))
        return k
      end)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(c[2], 1, true), tostring(err))
      assert.is_truthy(tostring(err):find("blackwell_spec%.lua:%d+: "), tostring(err))
    end
  end)

  it("computes D = A * B^T in its reference", function()
    local d = gemm.reference { M = 2, N = 2, K = 2, a = { 1, 2, 3, 4 }, b = { 5, 6, 7, 8 } }
    assert.are.same({ 17, 23, 39, 53 }, d)
  end)

  it("prints the PTX/ptxas summary of every kernel from main with --summary", function()
    for _, m in ipairs { suite, gemm } do
      local lines, saved = {}, _G.print
      _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
      local ok, rc = pcall(m.main, { "--summary" })
      _G.print = saved
      assert(ok, rc)
      assert.are.equal(0, rc)
      local out = table.concat(lines, "\n")
      for _, k in ipairs(m.kernels) do assert.is_truthy(out:find(k.name, 1, true), k.name) end
      assert.is_truthy(out:find("sm_100a", 1, true))
    end
  end)
end)

describe("TMA tile::gather4 / tile::scatter4 (sm_100a)", function()
  local tensor = require "pyptx.runtime.tensor"
  local Tile = pyptx.Tile

  --- A kernel that gathers four rows of A into shared memory with
  -- ptx.cp.async.bulk.tensor_2d (mode = "tile::gather4") and ptx.inst,
  -- then scatters them back with mode = "tile::scatter4" (a store and a
  -- reduction) and prefetches them.
  local function gather_kernel()
    return pyptx.kernel "g4" { arch = "sm_100a", version = "8.6", block = { 128 },
      in_specs = { Tile(64, 64, T.bf16) }, out_specs = {},
      function(A)
        local s, bar = smem.alloc(T.bf16, 4 * 64, { align = 1024 }), smem.mbarrier(1)
        local c, r = reg.scalar(T.u32, 0), reg.scalar(T.u32, 1)
        local d = A:tma_desc { box = { 1, 64 } }
        ptx.mbarrier.init(bar[0], 1)
        ptx.fence.mbarrier_init()
        ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = { c, r, r, r, r }, mbar = bar[0], mode = "tile::gather4" }
        ptx.inst("cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes", s[0],
          setmetatable({ base = d.base, list = { c, r, r, r, r } }, require("pyptx.async").Bracket), bar[0])
        ptx.cp.async.bulk.tensor_2d { dst = d, src = s[0], coord = { c, r, r, r, r }, mode = "tile::scatter4" }
        ptx.cp.reduce.async.bulk.tensor_2d { dst = d, src = s[0], coord = { c, r, r, r, r }, op = "max", mode = "tile::scatter4" }
        ptx.cp.async.bulk.prefetch.tensor_2d { src = d, coord = { c, r, r, r, r }, mode = "tile::gather4" }
        ptx.ret()
      end }
  end

  it("spells the loads, the store, the reduction and the prefetch through the generic wrappers and assembles them", function()
    local k = gather_kernel()
    local text = k:ptx()
    for _, want in ipairs {
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes \t[",
      "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes \t[",
      "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group \t[",
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile::scatter4.bulk_group \t[",
      "cp.async.bulk.prefetch.tensor.2d.L2.global.tile::gather4 \t[",
    } do assert.truthy(text:find(want, 1, true), want .. "\n" .. text) end
    assert.truthy(text:find("%+?%d*, {%%r%d+, %%r%d+, %%r%d+, %%r%d+, %%r%d+}%]"), text)
    H.assert_ptxas(k, "sm_100a")
  end)

  it("are refused where PTX does not define them, at the caller's line", function()
    local function err_of(body, arch, version)
      local ok, err = pcall(function()
        pyptx.kernel "bad" { arch = arch or "sm_100a", version = version or "8.6", block = { 128 },
          in_specs = { Tile(64, 64, T.bf16) }, out_specs = {}, body }:ptx()
      end)
      assert.is_false(ok)
      return err
    end
    local line
    local e = err_of(function(A)
      local s, bar, c = smem.alloc(T.bf16, 256, { align = 128 }), smem.mbarrier(1), reg.scalar(T.u32, 0)
      line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = A:tma_desc { box = { 1, 64 } }, coord = { c, c },
        mbar = bar[0], mode = "tile::gather4" }
    end)
    assert.matches("blackwell_spec.lua:" .. line .. ": cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4."
      .. "mbarrier::complete_tx::bytes: the tensor coordinates list 2 value(s); .tile::gather4 takes 5", e, 1, true)
    e = err_of(function()
      local s, bar, c = smem.alloc(T.bf16, 256, { align = 128 }), smem.mbarrier(1), reg.scalar(T.u32, 0)
      line = H.here(); ptx.inst("cp.async.bulk.tensor.3d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes", s[0],
        setmetatable({ base = reg.scalar(T.u64, 0), list = { c, c, c } }, require("pyptx.async").Bracket), bar[0])
    end)
    assert.matches("blackwell_spec.lua:" .. line .. ": cp.async.bulk.tensor.3d.shared::cluster.global.tile::gather4."
      .. "mbarrier::complete_tx::bytes: .tile::gather4 takes .2d tensors only, not .3d", e, 1, true)
    e = err_of(function(A)
      local s, bar, c = smem.alloc(T.bf16, 256, { align = 128 }), smem.mbarrier(1), reg.scalar(T.u32, 0)
      line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = A:tma_desc { box = { 1, 64 } }, coord = { c, c, c, c, c },
        mbar = bar[0], mode = "tile::scatter4" }
    end)
    assert.matches("blackwell_spec.lua:" .. line .. ": cp.async.bulk.tensor.2d.shared::cluster.global.tile::scatter4."
      .. "mbarrier::complete_tx::bytes: .tile::scatter4 writes a tensor: stores and reductions (.global.shared::cta) only", e, 1, true)
    e = err_of(function(A)
      local s, c = smem.alloc(T.bf16, 256, { align = 128 }), reg.scalar(T.u32, 0)
      line = H.here(); ptx.cp.async.bulk.tensor_2d { dst = A:tma_desc { box = { 1, 64 } }, src = s[0], coord = { c, c, c, c, c },
        mode = "tile::scatter4" }
    end, "sm_90a", "8.6")
    assert.matches("blackwell_spec.lua:" .. line .. ": cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group", e, 1, true)
    assert.matches("sm_100", e, 1, true)
  end)

  --- The 128-byte swizzle of a byte offset in a 1024-aligned buffer (its own inverse).
  local function swz128(o)
    return bit.bxor(o, bit.lshift(bit.band(bit.rshift(o, 7), 7), 4))
  end

  --- R x C u32 random values.
  local function rand_tensor(R, C, seed)
    return tensor.from_table(H.rand_u32(R * C, seed), T.u32, { R, C })
  end

  --- Five s32 coordinates {x, y0, y1, y2, y3} as a tensor (read by the kernel).
  local function coords(list) return tensor.from_table(list, T.s32, { 5 }) end

  --- Load the five coordinates of Cd into s32 registers.
  local function load_coords(Cd)
    local pc, c = ptx.global_ptrs(Cd), {}
    for j = 1, 5 do
      c[j] = reg.scalar(T.s32)
      ptx.inst.ld.global.s32(c[j], ptx.addr(pc, (j - 1) * 4))
    end
    return c
  end

  --- A kernel that gathers four rows of BC u32 of an R x C tensor (box
  -- {box_rows, BC}, the swizzle) at the coordinates in Cd into shared
  -- memory and dumps the shared words to Out; lines.gather: the copy's line.
  local function gather4_kernel(R, C, BC, swizzle, lines, box_rows)
    return pyptx.kernel "g4emu" { arch = "sm_100a", version = "8.6", block = { 4 * BC },
      in_specs = { Tile(R, C, T.u32), Tile(5, T.s32) }, out_specs = { Tile(4 * BC, T.u32) },
      function(A, Cd, Out)
        local s, bar = smem.alloc(T.u32, 4 * BC, { align = 1024 }), smem.mbarrier(1)
        local tid = reg.from(ptx.special.tid.x(), T.u32)
        ptx.if_(tid:eq(0), function() ptx.mbarrier.init(bar[0], 1); ptx.fence.mbarrier_init() end)
        ptx.bar_sync(0)
        ptx.if_(tid:eq(0), function()
          local d = A:tma_desc { box = { box_rows or 1, BC }, swizzle = swizzle }
          ptx.mbarrier.arrive_expect_tx(bar[0], 4 * BC * 4)
          local c = load_coords(Cd)
          lines.gather = H.here(); ptx.cp.async.bulk.tensor_2d { dst = s[0], src = d, coord = c, mbar = bar[0], mode = "tile::gather4" }
          ptx.cp.async.bulk.prefetch.tensor_2d { src = d, coord = c, mode = "tile::gather4" }
        end)
        ptx.mbarrier.wait(bar[0], 0)
        local v = reg.scalar(T.u32)
        ptx.inst.ld.shared.u32(v, ptx.addr(s:base() + tid * 4))
        ptx.inst.st.global.u32(ptx.addr(ptx.global_ptrs(Out) + tid:mul_wide(4)), v)
        ptx.ret()
      end }
  end

  --- A kernel that writes S (4 x BC u32) to shared memory and scatters its
  -- four rows into D at the coordinates in Cd (op: reduce with it instead).
  local function scatter4_kernel(R, C, BC, op)
    return pyptx.kernel "s4emu" { arch = "sm_100a", version = "8.6", block = { 4 * BC },
      in_specs = { Tile(R, C, T.u32), Tile(4 * BC, T.u32), Tile(5, T.s32) }, out_specs = {},
      function(D, S, Cd)
        local s = smem.alloc(T.u32, 4 * BC, { align = 1024 })
        local tid = reg.from(ptx.special.tid.x(), T.u32)
        local v = reg.scalar(T.u32)
        ptx.inst.ld.global.u32(v, ptx.addr(ptx.global_ptrs(S) + tid:mul_wide(4)))
        ptx.inst.st.shared.u32(ptx.addr(s:base() + tid * 4), v)
        ptx.fence.proxy_async("shared::cta")
        ptx.bar_sync(0)
        ptx.if_(tid:eq(0), function()
          local d, c = D:tma_desc { box = { 1, BC } }, load_coords(Cd)
          if op then
            ptx.cp.reduce.async.bulk.tensor_2d { dst = d, src = s[0], coord = c, op = op, mode = "tile::scatter4" }
          else
            ptx.cp.async.bulk.tensor_2d { dst = d, src = s[0], coord = c, mode = "tile::scatter4" }
          end
          ptx.cp.async.bulk.commit_group()
          ptx.cp.async.bulk.wait_group(0)
        end)
        ptx.ret()
      end }
  end

  it("gather four rows into shared memory on the emulator, matching a CPU reference", function()
    local R, C, BC, kernels = 24, 40, 32, {}
    for _, swizzle in ipairs { "none", "128B" } do
      local k = gather4_kernel(R, C, BC, swizzle, {})
      kernels[#kernels + 1] = k
      for trial = 1, 6 do
        math.randomseed(trial)
        local x = trial == 1 and 0 or math.random(-6, C - BC + 6)             -- columns may leave the tensor
        local ys = { math.random(0, R - 1), math.random(-2, R + 1), math.random(0, R - 1), math.random(0, R - 1) }
        local a = rand_tensor(R, C, 100 * trial)
        local av, got = a:values(), k(a, coords { x, ys[1], ys[2], ys[3], ys[4] }):values()
        for e = 0, 4 * BC - 1 do
          local lo = swizzle == "128B" and swz128(e * 4) / 4 or e     -- the element this shared word holds
          local r, j = math.floor(lo / BC), lo % BC
          local y, col = ys[r + 1], x + j
          local want = (y >= 0 and y < R and col >= 0 and col < C) and av[y * C + col + 1] or 0
          if got[e + 1] ~= want then
            error(("swizzle %s, x %d, rows %s: shared word %d (row %d, column %d): got %s, want %s"):format(swizzle, x,
              table.concat(ys, ","), e, r, col, tostring(got[e + 1]), tostring(want)))
          end
        end
      end
    end
    for _, k in ipairs(kernels) do H.assert_ptxas(k, "sm_100a") end
  end)

  it("scatter four rows from shared memory (and reduce them with .add) on the emulator, matching a CPU reference", function()
    local R, C, BC, kernels = 16, 40, 16, {}
    for _, op in ipairs { false, "add" } do
      local k = scatter4_kernel(R, C, BC, op or nil)
      kernels[#kernels + 1] = k
      for trial = 1, 5 do
        math.randomseed(10 + trial)
        local x, ys, taken = math.random(-4, C - BC + 4), {}, {}
        while #ys < 4 do                                          -- distinct rows, one of them outside the tensor at times
          local y = math.random(-1, R)
          if not taken[y] then taken[y] = true; ys[#ys + 1] = y end
        end
        local dv, sv = H.rand_u32(R * C, 7 * trial), H.rand_u32(4 * BC, 9 * trial)
        local D = tensor.from_table(dv, T.u32, { R, C })
        k(D, tensor.from_table(sv, T.u32, { 4 * BC }), coords { x, ys[1], ys[2], ys[3], ys[4] })
        local want = {}
        for i = 1, R * C do want[i] = dv[i] end
        for r = 0, 3 do
          for j = 0, BC - 1 do
            local y, col = ys[r + 1], x + j
            if y >= 0 and y < R and col >= 0 and col < C then
              local i = y * C + col + 1
              want[i] = op and (want[i] + sv[r * BC + j + 1]) % 2 ^ 32 or sv[r * BC + j + 1]
            end
          end
        end
        local got = D:values()
        for i = 1, R * C do
          if got[i] ~= want[i] then
            error(("%s, x %d, rows %s: element (%d, %d): got %s, want %s"):format(op or "store", x, table.concat(ys, ","),
              math.floor((i - 1) / C), (i - 1) % C, tostring(got[i]), tostring(want[i])))
          end
        end
      end
    end
    for _, k in ipairs(kernels) do H.assert_ptxas(k, "sm_100a") end
  end)

  it("are reported by the emulator with a tensor map more than one row high, at the copy's line", function()
    local lines = {}
    local k = gather4_kernel(8, 32, 32, "none", lines, 2)
    local ok, err = pcall(k, rand_tensor(8, 32, 3), coords { 0, 1, 2, 3, 4 })
    assert.is_false(ok)
    assert.matches("blackwell_spec.lua:" .. lines.gather .. ": cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4", err, 1, true)
    assert.matches("the tensor map's box must be 1 row high (box = {1, 32}), not 2", err, 1, true)
  end)
end)
