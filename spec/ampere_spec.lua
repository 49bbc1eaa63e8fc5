-- Ampere tensor cores: the pyptx.ampere wrappers (mma.sync, ldmatrix,
-- stmatrix, movmatrix), trace-time validation of their operands, the
-- fragment layout helpers against the PTX ISA's figures, the emulator's
-- mma.sync per shape/type against A*B+C computed here, and the two GEMM
-- examples (ptxas for sm_80, emulator against their CPU references).
local ffi = require "ffi"
local bit = require "bit"
local pyptx = require "pyptx"
local ampere = require "pyptx.ampere"
local floats = require "pyptx.runtime.floats"
local tensor = require "pyptx.runtime.tensor"
local runtime = require "pyptx.runtime"
local H = require "spec.helpers"
local kernel, reg, ptx, smem, Tile = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.Tile
local T = pyptx.types

--- The PTX text of a one-warp kernel whose body is f, for arch.
local function trace(arch, f)
  return kernel "amp" { arch = arch, block = { 32, 1, 1 }, grid = { 1, 1, 1 }, function() f(); ptx.ret() end }:ptx()
end

--- The error message of tracing f, or nil.
local function trace_err(arch, f)
  local ok, err = pcall(trace, arch, f)
  if ok then return nil end
  return tostring(err)
end

local R = reg.array

describe("pyptx.ampere wrappers", function()
  it("emit one mma.sync per call with the opcode built from shape and types", function()
    local text = trace("sm_80", function()
      local f = ampere.fragments("m16n8k16", T.bf16, nil, true)
      ptx.mma { shape = "m16n8k16", atype = T.bf16, d = f.c, a = f.a, b = f.b, c = f.c }
      local i = ampere.fragments("m16n8k32", "s8", nil, true)
      ptx.mma { shape = "m16n8k32", atype = "u8", btype = "s8", satfinite = true, d = i.c, a = i.a, b = i.b, c = i.c }
      local d = ampere.fragments("m8n8k4", "f64", nil, true)
      ptx.mma { shape = "m8n8k4", atype = "f64", d = d.c, a = d.a, b = d.b, c = d.c }
      local h = ampere.fragments("m16n8k8", "f16", "f16", true)
      ptx.mma { shape = "m16n8k8", atype = "f16", ctype = "f16", d = h.c, a = h.a, b = h.b, c = h.c }
    end)
    assert.truthy(text:find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \t{%f1, %f2, %f3, %f4}, " ..
      "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};", 1, true), text)
    assert.truthy(text:find("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", 1, true), text)
    assert.truthy(text:find("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 \t{%fd3, %fd4}, {%fd1}, {%fd2}, {%fd3, %fd4};", 1, true), text)
    assert.truthy(text:find("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 \t{%r", 1, true), text)
  end)

  it("emit ldmatrix with .xN from the register count, stmatrix and movmatrix", function()
    local text = trace("sm_90a", function()
      local s = smem.alloc(T.b16, 512, { align = 128 })
      local base = s:base()
      local d = R(T.b32, 4)
      ptx.ldmatrix { d = d, addr = base }
      ptx.ldmatrix({ d[0], d[1] }, ptx.addr(base, 256), true)
      ptx.ldmatrix { d = { d[0] }, addr = s }
      ptx.stmatrix { addr = base, s = d, trans = true }
      ptx.movmatrix(d[0], d[1])
    end)
    assert.truthy(text:find("ldmatrix.sync.aligned.m8n8.x4.shared.b16 \t{%r2, %r3, %r4, %r5}, [%r1];", 1, true), text)
    assert.truthy(text:find("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 \t{%r2, %r3}, [%r1+256];", 1, true), text)
    assert.truthy(text:find("ldmatrix.sync.aligned.m8n8.x1.shared.b16 \t{%r2}, [amp_smem];", 1, true), text)
    assert.truthy(text:find("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 \t[%r1], {%r2, %r3, %r4, %r5};", 1, true), text)
    assert.truthy(text:find("movmatrix.sync.aligned.m8n8.trans.b16 \t%r2, %r3;", 1, true), text)
  end)

  it("count fragment registers per shape and type", function()
    local c = ampere.counts("m16n8k16", T.bf16)
    assert.same({ 4, 2, 4, 4 }, { c.a, c.b, c.c, c.d })
    c = ampere.counts("m16n8k32", "s8")
    assert.same({ 4, 2, 4 }, { c.a, c.b, c.c })
    c = ampere.counts("m8n8k4", "f64")
    assert.same({ 1, 1, 2 }, { c.a, c.b, c.c })
    c = ampere.counts("m16n8k8", "f16", "f16")
    assert.same({ 2, 1, 2 }, { c.a, c.b, c.c })
    c = ampere.counts("m16n8k256", "b1")
    assert.same({ 4, 2, 4 }, { c.a, c.b, c.c })
  end)
end)

describe("every mma.sync form of the table", function()
  it("assembles with ptxas for its sm (sm_80 forms on sm_80, the rest on sm_90a)", function()
    local FAMS = { f16 = { "f16" }, bf16 = { "bf16" }, tf32 = { "tf32" }, f64 = { "f64" }, s8 = { "s8", "u8" },
                   s4 = { "s4", "u4" }, b1 = { "b1" }, e4m3 = { "e4m3", "e5m2" } }
    local assembly = {}                    -- { ptx, arch }: assembled once every form has traced
    for _, arch in ipairs { "sm_80", "sm_90a" } do
      local want = arch == "sm_80" and 80 or 90
      local n = 0
      local text = trace(arch, function()
        for key, row in pairs(ampere.SHAPES) do
          local shape, fam = key:match("^(.-)%.(.*)$")
          if row.sm <= want and (arch == "sm_90a" or row.sm <= 80) and not row.quad and fam ~= "e4m3" then
            for _, a in ipairs(FAMS[fam]) do
              for _, acc in ipairs { "f32", "f16", "f64", "s32" } do
                if row.acc[acc] then
                  local f = ampere.fragments(shape, a, acc)
                  ptx.mma { shape = shape, atype = a, ctype = acc, d = f.c, a = f.a, b = f.b, c = f.c }
                  n = n + 1
                end
              end
            end
          end
        end
      end)
      if arch == "sm_80" then   -- the sm_70 quad-pair forms in every layout
        local extra = trace(arch, function()
          for _, al in ipairs { "row", "col" } do
            for _, bl in ipairs { "row", "col" } do
              for _, acc in ipairs { "f32", "f16" } do
                local f = ampere.fragments("m8n8k4", "f16", acc)
                ptx.mma { shape = "m8n8k4", atype = "f16", ctype = acc, alayout = al, blayout = bl, d = f.c, a = f.a, b = f.b, c = f.c }
                n = n + 1
              end
            end
          end
        end)
        assembly[#assembly + 1] = { extra, arch }
      end
      assert.is_true(n >= 20)
      assembly[#assembly + 1] = { text, arch }
    end
    for _, a in ipairs(assembly) do H.assert_ptxas(a[1], a[2]) end
  end)
end)

describe("fragment layouts", function()
  it("match the PTX ISA figures for m16n8k16 .bf16 (A, B, C)", function()
    local A, B = ampere.layout("m16n8k16", T.bf16, "a"), ampere.layout("m16n8k16", T.bf16, "b")
    local C = ampere.layout("m16n8k16", T.bf16, "c")
    -- lane 5: groupID 1, threadID_in_group 1. a4,a5 = reg 2: row 1, cols 10, 11; a6 = reg 3 elem 0: row 9, col 10.
    assert.same({ 1, 10 }, { A.coord(5, 2, 0) })
    assert.same({ 9, 10 }, { A.coord(5, 3, 0) })
    -- b2 = reg 1 elem 0: row 2*1 + 8 = 10, col 1
    assert.same({ 10, 1 }, { B.coord(5, 1, 0) })
    -- c3: row 1 + 8 = 9, col 2*1 + 1 = 3
    assert.same({ 9, 3 }, { C.coord(5, 3) })
  end)

  it("match the PTX ISA figures for m16n8k32 .s8, m16n8k8 .tf32, m8n8k4 .f64 and f16 accumulators", function()
    local A = ampere.layout("m16n8k32", "s8", "a")
    -- lane 6 (g 1, t 2): a9 = reg 2 elem 1: row 1, col 2*4 + 1 + 16 = 25; a13 = reg 3 elem 1: row 9, col 25
    assert.same({ 1, 25 }, { A.coord(6, 2, 1) })
    assert.same({ 9, 25 }, { A.coord(6, 3, 1) })
    local B = ampere.layout("m16n8k32", "s8", "b")
    assert.same({ 2 * 4 + 3 + 16, 1 }, { B.coord(6, 1, 3) })
    local tf = ampere.layout("m16n8k8", "tf32", "a")
    assert.same({ 9, 6 }, { tf.coord(6, 3, 0) })   -- a3: row g+8, col t+4
    local f64a, f64b, f64c = ampere.layout("m8n8k4", "f64", "a"), ampere.layout("m8n8k4", "f64", "b"), ampere.layout("m8n8k4", "f64", "c")
    assert.same({ 1, 2 }, { f64a.coord(6, 0, 0) })
    assert.same({ 2, 1 }, { f64b.coord(6, 0, 0) })
    assert.same({ 1, 5 }, { f64c.coord(6, 1) })
    local h = ampere.layout("m16n8k16", "f16", "c", "f16")
    assert.same({ 2, 9, 5 }, { h.regs, h.coord(6, 1, 1) })
  end)

  it("cover every tile element exactly once", function()
    for _, case in ipairs { { "m16n8k16", "bf16" }, { "m16n8k8", "tf32" }, { "m16n8k32", "s8" }, { "m8n8k4", "f64" },
                            { "m16n8k16", "f64" }, { "m16n8k256", "b1" }, { "m16n8k8", "f16" } } do
      for _, which in ipairs { "a", "b", "c" } do
        local L = ampere.layout(case[1], case[2], which)
        local seen, n = {}, 0
        for lane = 0, 31 do
          for r = 0, L.regs - 1 do
            for e = 0, L.elems - 1 do
              local row, col = L.coord(lane, r, e)
              local key = row * 1000 + col
              assert.is_nil(seen[key], table.concat(case, " ") .. " " .. which)
              assert.is_true(row >= 0 and row < L.rows and col >= 0 and col < L.cols)
              seen[key] = true
              n = n + 1
            end
          end
        end
        assert.equal(L.rows * L.cols, n, table.concat(case, " ") .. " " .. which)
      end
    end
  end)
end)

describe("trace-time validation of matrix instructions", function()
  it("rejects wrong fragment counts and register types, naming the operand", function()
    local err = trace_err("sm_80", function()
      local a, b = R(T.b32, 4), R(T.b32, 2)
      local c = R(T.f32, 4)
      ptx.inst.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32({ c[0], c[1], c[2], c[3] }, { a[0], a[1] },
        { b[0], b[1] }, { c[0], c[1], c[2], c[3] })
    end)
    assert.truthy(err and err:find("ampere_spec.lua:%d+: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: " ..
      "operand 2 %(a%) must be a vector of 4 registers, got 2"), err)
    err = trace_err("sm_80", function()
      local a, b, c = R(T.b32, 4), R(T.b32, 2), R(T.f32, 4)
      ptx.inst.mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32({ c[0], c[1], c[2], c[3] }, { a[0], a[1], a[2], a[3] },
        { b[0], b[1] }, { c[0], c[1], c[2], c[3] })
    end)
    assert.truthy(err and err:find("operand 1 %(d%) element 1 is a f32 register %(%%f1%); expected a 32%-bit s32/u32/b32 register"), err)
    err = trace_err("sm_80", function()
      ptx.ldmatrix { d = R(T.b32, 3), addr = reg.scalar(T.u32) }
    end)
    assert.truthy(err and err:find("ampere_spec.lua:%d+: ptx.ldmatrix: d must hold 1, 2 or 4 registers"), err)
    err = trace_err("sm_80", function()
      local d = R(T.b32, 4)
      ptx.inst.ldmatrix.sync.aligned.m8n8.x2.shared.b16({ d[0], d[1], d[2], d[3] }, ptx.addr(reg.scalar(T.u32)))
    end)
    assert.truthy(err and err:find("operand 1 %(destinations%) must be a vector of 2 registers, got 4"), err)
    err = trace_err("sm_80", function() ptx.movmatrix(reg.scalar(T.b32), reg.scalar(T.f64)) end)
    assert.truthy(err and err:find("movmatrix.sync.aligned.m8n8.trans.b16: operand 2 is a f64 register"), err)
  end)

  it("rejects shapes, layouts, accumulators and arches the ISA does not define", function()
    local function mma(arch, opts)
      return trace_err(arch, function()
        local cnt = ampere.counts(opts.shape, opts.atype, opts.ctype)
        local acc = (opts.ctype == "f64" or opts.atype == "f64") and T.f64 or T.f32
        local in_t = opts.atype == "f64" and T.f64 or T.b32
        opts.d, opts.a, opts.b, opts.c = R(acc, cnt.d), R(in_t, cnt.a), R(in_t, cnt.b), R(acc, cnt.c)
        ptx.mma(opts)
      end)
    end
    local err = mma("sm_75", { shape = "m16n8k16", atype = "bf16" })
    assert.truthy(err and err:find("mma.sync.m16n8k16 with .bf16 inputs needs sm_80; this kernel targets sm_75", 1, true), err)
    err = mma("sm_80", { shape = "m16n8k8", atype = "f64" })
    assert.truthy(err and err:find("needs sm_90; this kernel targets sm_80", 1, true), err)
    err = trace_err("sm_80", function()
      ptx.mma { shape = "m16n8k12", atype = "bf16", d = R(T.f32, 4), a = R(T.b32, 4), b = R(T.b32, 2), c = R(T.f32, 4) }
    end)
    assert.truthy(err and err:find("ampere_spec.lua:%d+: mma.sync.aligned.m16n8k12.row.col.f32.bf16.bf16.f32: " ..
      "mma.sync has no shape .m16n8k12 for .bf16 inputs; valid: .m16n8k8 .m16n8k16"), err)
    err = trace_err("sm_80", function()
      local a, b, c = R(T.b32, 4), R(T.b32, 2), R(T.f32, 4)
      ptx.inst.mma.sync.aligned.m16n8k16.col.row.f32.bf16.bf16.f32({ c[0], c[1], c[2], c[3] }, { a[0], a[1], a[2], a[3] },
        { b[0], b[1] }, { c[0], c[1], c[2], c[3] })
    end)
    assert.truthy(err and err:find("takes the layouts .row.col", 1, true), err)
    err = trace_err("sm_80", function()
      local a, b, c, d = R(T.b32, 4), R(T.b32, 2), R(T.f32, 4), R(T.b32, 2)
      ptx.inst.mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f32({ d[0], d[1] }, { a[0], a[1], a[2], a[3] },
        { b[0], b[1] }, { c[0], c[1], c[2], c[3] })
    end)
    assert.truthy(err and err:find(".bf16 inputs accumulate in .f32, not .f16", 1, true), err)
    err = mma("sm_90a", { shape = "m16n8k32", atype = "e4m3" })
    assert.truthy(err and err:find("with .e4m3/.e5m2 inputs needs PTX ISA 8.4; this kernel uses 8.0", 1, true), err)
    err = mma("sm_90a", { shape = "m16n8k16", atype = "e5m2" })
    assert.truthy(err and err:find("mma.sync.m16n8k16.f32 with .e4m3/.e5m2 inputs needs PTX ISA 8.7; this kernel uses 8.0", 1, true), err)
    err = trace_err("sm_90a", function()
      ptx.mma { shape = "m16n8k32", atype = "e4m3", btype = "e5m2", ctype = "f16", dtype = "f32", d = R(T.f32, 4),
                a = R(T.b32, 4), b = R(T.b32, 2), c = R(T.b32, 2) }
    end)
    assert.truthy(err and err:find("ampere_spec.lua:%d+: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f16: .e4m3/.e5m2 " ..
      "mma.sync takes D and C of one type %(.f32.f32 or .f16.f16%), not .f32 and .f16"), err)
    err = trace_err("sm_80", function() ptx.stmatrix { s = R(T.b32, 4), addr = reg.scalar(T.u32) } end)
    assert.truthy(err and err:find("needs sm_90 or newer; this kernel targets sm_80", 1, true), err)
  end)
end)

-- ------------------------------------------------------------ emulator

--- Encoders of one A/B element into its bits, per input type, and a
-- random value generator exact in that type.
local INPUTS = {
  f16 = { bits = 16, gen = function() return floats.from_f16(floats.to_f16(math.random() * 4 - 2)) end, enc = floats.to_f16 },
  bf16 = { bits = 16, gen = function() return floats.from_bf16(floats.to_bf16(math.random() * 4 - 2)) end, enc = floats.to_bf16 },
  tf32 = { bits = 32, gen = function() return (math.random(0, 2047) - 1024) / 256 end,
           enc = function(x) local f = ffi.new("float[1]", x); return ffi.cast("uint32_t *", f)[0] end },
  s8 = { bits = 8, gen = function() return math.random(-128, 127) end, enc = function(x) return x % 256 end },
  u8 = { bits = 8, gen = function() return math.random(0, 255) end, enc = function(x) return x end },
  s4 = { bits = 4, gen = function() return math.random(-8, 7) end, enc = function(x) return x % 16 end },
  u4 = { bits = 4, gen = function() return math.random(0, 15) end, enc = function(x) return x end },
  b1 = { bits = 1, gen = function() return math.random(0, 1) end, enc = function(x) return x end },
  e4m3 = { bits = 8, enc = floats.to_e4m3 }, e5m2 = { bits = 8, enc = floats.to_e5m2 },
  f64 = { bits = 64, gen = function() return math.random() * 4 - 2 end },
}

--- Run one mma form on the emulator with register values built from the
-- layout helpers; return the m x 8 D as a Lua matrix and the reference.
local function run_mma(shape, atype, ctype, opts)
  opts = opts or {}
  local cnt = ampere.counts(shape, atype, ctype, ctype)
  local LA, LB = ampere.layout(shape, atype, "a"), ampere.layout(shape, atype, "b")
  local LC = ampere.layout(shape, atype, "c", ctype)
  local inp, is64 = INPUTS[atype], atype == "f64"
  local inb = INPUTS[opts.btype or atype]
  local Am, Bm, Cm = {}, {}, {}
  for i = 0, cnt.m - 1 do Am[i] = {}; Cm[i] = {} for k = 0, cnt.k - 1 do Am[i][k] = (opts.gen or inp.gen)(atype) end end
  for k = 0, cnt.k - 1 do Bm[k] = {} for j = 0, 7 do Bm[k][j] = (opts.gen or inb.gen)(opts.btype or atype) end end
  for i = 0, cnt.m - 1 do
    for j = 0, 7 do
      Cm[i][j] = (ctype == "s32" and math.random(-1000, 1000)) or (ctype == "f16" and floats.from_f16(floats.to_f16(math.random() - 0.5)))
        or floats.from_f32_bits(floats.f32_bits(math.random() - 0.5))       -- exact in the f32 the kernel reads
    end
  end
  -- registers laid out [reg][lane]: A regs, then B, then C
  local vals = {}
  local function pack(L, Mx, base, enc)
    for r = 0, L.regs - 1 do
      for lane = 0, 31 do
        local v = 0
        for e = 0, L.elems - 1 do
          local row, col = L.coord(lane, r, e)
          if is64 then v = Mx[row][col] else v = v + enc.enc(Mx[row][col]) * 2 ^ (enc.bits * e) end
        end
        vals[base + r * 32 + lane + 1] = v
      end
    end
  end
  pack(LA, Am, 0, inp)
  pack(LB, Bm, cnt.a * 32, inb)
  local cbase = (cnt.a + cnt.b) * 32
  for r = 0, LC.regs - 1 do
    for lane = 0, 31 do
      local v = 0
      if ctype == "f16" then
        for e = 0, 1 do local row, col = LC.coord(lane, r, e); v = v + floats.to_f16(Cm[row][col]) * 2 ^ (16 * e) end
      else
        local row, col = LC.coord(lane, r, 0)
        v = Cm[row][col]
      end
      vals[cbase + r * 32 + lane + 1] = v
    end
  end
  local ct_t = ctype == "f16" and T.u32 or T[ctype]
  local in_t = is64 and T.f64 or T.u32
  local k = kernel "mma_one" {
    arch = opts.arch or "sm_80", version = opts.version,
    in_specs = { Tile(32 * cnt.a, in_t), Tile(32 * cnt.b, in_t), Tile(32 * cnt.c, ct_t) },
    out_specs = { Tile(32 * cnt.d, ct_t) },
    block = { 32, 1, 1 }, grid = { 1, 1, 1 },
    function(IA, IB, IC, OUT)
      local pa, pb, pc, po = ptx.global_ptrs(IA, IB, IC, OUT)
      local lane = reg.from(ptx.special.tid.x(), T.u32)
      local f = ampere.fragments(shape, atype, ctype)
      local ib, cb = is64 and 8 or 4, (ctype == "f64") and 8 or 4
      local ia, ibb, ic, oo = pa + lane:mul_wide(ib), pb + lane:mul_wide(ib), pc + lane:mul_wide(cb), po + lane:mul_wide(cb)
      local ldi = is64 and ptx.inst.ld.global.f64 or ptx.inst.ld.global.b32
      for r = 0, cnt.a - 1 do ldi(f.a[r], ptx.addr(ia, r * 32 * ib)) end
      for r = 0, cnt.b - 1 do ldi(f.b[r], ptx.addr(ibb, r * 32 * ib)) end
      for r = 0, cnt.c - 1 do ptx.ld.global(f.c[r], ptx.addr(ic, r * 32 * cb)) end
      ptx.mma { shape = shape, atype = atype, btype = opts.btype, ctype = ctype, satfinite = opts.satfinite, bop = opts.bop,
                d = f.c, a = f.a, b = f.b, c = f.c }
      for r = 0, cnt.d - 1 do ptx.st.global(ptx.addr(oo, r * 32 * cb), f.c[r]) end
      ptx.ret()
    end,
  }
  local function sub(lo, n) local t = {} for i = 1, n do t[i] = vals[lo + i] end return t end
  local out = k(tensor.from_table(sub(0, cnt.a * 32), in_t), tensor.from_table(sub(cnt.a * 32, cnt.b * 32), in_t),
                tensor.from_table(sub(cbase, cnt.c * 32), ct_t))
  local flat = out:to_host()
  local D = {}
  for i = 0, cnt.m - 1 do D[i] = {} end
  for r = 0, cnt.d - 1 do
    for lane = 0, 31 do
      local v = flat[r * 32 + lane]
      if ctype == "f16" then
        v = tonumber(v)
        for e = 0, 1 do
          local row, col = LC.coord(lane, r, e)
          D[row][col] = floats.from_f16(math.floor(v / 2 ^ (16 * e)) % 65536)
        end
      else
        local row, col = LC.coord(lane, r, 0)
        D[row][col] = tonumber(v)
      end
    end
  end
  local ref = {}
  for i = 0, cnt.m - 1 do
    ref[i] = {}
    for j = 0, 7 do
      local s = Cm[i][j]
      for kk = 0, cnt.k - 1 do
        if atype == "b1" and opts.bop ~= "and" then s = s + ((Am[i][kk] ~= Bm[kk][j]) and 1 or 0)
        else s = s + Am[i][kk] * Bm[kk][j] end
      end
      ref[i][j] = s
    end
  end
  return D, ref, cnt
end

--- Assert D matches ref within a relative tolerance.
local function assert_close(D, ref, m, tol, what)
  for i = 0, m - 1 do
    for j = 0, 7 do
      local err = math.abs(D[i][j] - ref[i][j])
      assert.is_true(err <= tol * math.max(1, math.abs(ref[i][j])),
        ("%s: D[%d][%d] = %s, expected %s"):format(what, i, j, tostring(D[i][j]), tostring(ref[i][j])))
    end
  end
end

describe("emulator mma.sync per shape and type", function()
  local cases = {
    { "m16n8k16", "bf16", "f32", 1e-6 }, { "m16n8k8", "bf16", "f32", 1e-6 },
    { "m16n8k16", "f16", "f32", 1e-6 }, { "m16n8k8", "f16", "f32", 1e-6 },
    { "m16n8k16", "f16", "f16", 2e-3 }, { "m16n8k8", "tf32", "f32", 1e-6 }, { "m16n8k4", "tf32", "f32", 1e-6 },
    { "m16n8k32", "s8", "s32", 0 }, { "m16n8k16", "s8", "s32", 0 }, { "m8n8k16", "s8", "s32", 0 },
    { "m16n8k32", "u8", "s32", 0 }, { "m8n8k4", "f64", "f64", 1e-14 },
    { "m16n8k64", "s4", "s32", 0 }, { "m16n8k32", "u4", "s32", 0 }, { "m8n8k32", "s4", "s32", 0 },
    { "m16n8k256", "b1", "s32", 0 }, { "m16n8k128", "b1", "s32", 0, { bop = "and" } }, { "m8n8k128", "b1", "s32", 0 },
    { "m16n8k16", "f64", "f64", 1e-14, { arch = "sm_90a" } }, { "m16n8k8", "f64", "f64", 1e-14, { arch = "sm_90a" } },
  }
  for _, c in ipairs(cases) do
    it(("runs %s .%s -> .%s in the ISA's fragment layouts"):format(c[1], c[2], c[3]), function()
      math.randomseed(require("pyptx.tools.verify").fresh_seed())
      local D, ref, cnt = run_mma(c[1], c[2], c[3], c[5])
      assert_close(D, ref, cnt.m, c[4], c[1] .. "." .. c[2])
    end)
  end

  it("wraps s32 sums without .satfinite and clamps with it", function()
    -- all-127 A and B with C near INT32_MAX overflow: 32 * 127 * 127 = 516128
    local cnt = ampere.counts("m16n8k32", "s8")
    local function run(sat)
      local k = kernel "mma_sat" {
        arch = "sm_80", out_specs = { Tile(32 * cnt.d, T.s32) }, block = { 32, 1, 1 }, grid = { 1, 1, 1 },
        function(OUT)
          local po = ptx.global_ptrs(OUT)
          local lane = reg.from(ptx.special.tid.x(), T.u32)
          local f = ampere.fragments("m16n8k32", "s8")
          for r = 0, cnt.a - 1 do ptx.inst.mov.b32(f.a[r], 0x7f7f7f7f) end
          for r = 0, cnt.b - 1 do ptx.inst.mov.b32(f.b[r], 0x7f7f7f7f) end
          for r = 0, cnt.c - 1 do ptx.inst.mov.s32(f.c[r], 2147483000) end
          ptx.mma { shape = "m16n8k32", atype = "s8", satfinite = sat, d = f.c, a = f.a, b = f.b, c = f.c }
          ptx.st.global(ptx.addr(po + lane:mul_wide(4)), f.c[0])
          ptx.ret()
        end,
      }
      return k():to_host()[0]
    end
    assert.equal(2147483647, tonumber(run(true)))
    assert.equal(2147483000 + 516128 - 4294967296, tonumber(run(false)))
  end)
end)

--- A random finite non-zero value of fp8 type t ("e4m3"/"e5m2") drawn
-- from random bytes; maxexp caps the exponent field (nil: any finite).
local function fp8_value(t, maxexp)
  local shift, mask = t == "e4m3" and 3 or 2, t == "e4m3" and 15 or 31
  while true do
    local b = math.random(0, 255)
    local v = t == "e4m3" and floats.from_e4m3(b) or floats.from_e5m2(b)
    if v == v and v ~= 0 and math.abs(v) < math.huge and bit.band(bit.rshift(b, shift), mask) <= (maxexp or mask) then
      return v
    end
  end
end

--- x rounded once to the nearest f16 value (ties to even, overflow to
-- Inf): the rounding the emulator applies to a sum formed in double.
local function f16_of(x)
  local a = math.abs(x)
  if a == 0 then return x end
  local _, e = math.frexp(a)
  local ulp = 2 ^ (math.max(e - 1, -14) - 10)
  local q = math.floor(a / ulp)
  local rest = a / ulp - q
  if rest > 0.5 or (rest == 0.5 and q % 2 == 1) then q = q + 1 end
  local v = q * ulp > 65504 and math.huge or q * ulp
  return x < 0 and -v or v
end

--- x rounded once to f32.
local function f32_of(x) return floats.from_f32_bits(floats.f32_bits(x)) end

describe("emulator mma.sync with fp8 inputs (sm_89)", function()
  local PAIRS = { { "e4m3", "e4m3" }, { "e4m3", "e5m2" }, { "e5m2", "e4m3" }, { "e5m2", "e5m2" } }
  for _, shape in ipairs { "m16n8k32", "m16n8k16" } do
    for _, acc in ipairs { "f32", "f16" } do
      for _, p in ipairs(PAIRS) do
        it(("runs %s .%s.%s.%s.%s: every D element is the exact sum rounded once"):format(shape, acc, p[1], p[2], acc), function()
          math.randomseed(require("pyptx.tools.verify").fresh_seed())
          -- f16 sums: values below 8 keep 32 products inside f16's range; f32: any finite byte
          local gen = acc == "f16" and function(t) return fp8_value(t, t == "e4m3" and 9 or 17) end or fp8_value
          local D, ref, cnt = run_mma(shape, p[1], acc, { btype = p[2], arch = "sm_89", version = "8.7", gen = gen })
          for i = 0, cnt.m - 1 do
            for j = 0, 7 do
              local want = acc == "f16" and f16_of(ref[i][j]) or f32_of(ref[i][j])
              assert.are.equal(want, D[i][j], ("D[%d][%d] (sum %.17g)"):format(i, j, ref[i][j]))
            end
          end
        end)
      end
    end
  end

  it("runs m16n8k32 .f32.e4m3.e4m3.f32 under PTX ISA 8.4 on sm_90a", function()
    math.randomseed(require("pyptx.tools.verify").fresh_seed())
    local D, ref = run_mma("m16n8k32", "e4m3", "f32", { arch = "sm_90a", version = "8.4", gen = fp8_value })
    for i = 0, 15 do
      for j = 0, 7 do assert.are.equal(f32_of(ref[i][j]), D[i][j], ("D[%d][%d]"):format(i, j)) end
    end
  end)
end)

describe("emulator mma.sync with f16 and bf16 inputs, bit for bit", function()
  --- A random f16/bf16 value (scaled by 2^e) over a range of exponents.
  local function wide(t, e)
    local x = (math.random() * 2 - 1) * 2 ^ (math.random(-12, 12) + (e or 0))
    return t == "bf16" and floats.from_bf16(floats.to_bf16(x)) or floats.from_f16(floats.to_f16(x))
  end
  --- Inputs in run_mma's order (A row by row, then B) where products k = 0
  -- and k = 2 of every D element are huge and cancel (A[i][2] = -A[i][0],
  -- B[2] = B[0]): the sum keeps C's low bits only when it is formed in k
  -- order from C, so a reordered or wider sum shows in the rounded bits.
  local function cancelling(t, m, K)
    local n, big, b0 = 0, t == "bf16" and 2 ^ 40 or 2 ^ 15, {}
    return function()
      local idx = n
      n = n + 1
      if idx < m * K then
        local k = idx % K
        return k == 0 and big or k == 2 and -big or wide(t)
      end
      local kk, j = math.floor((idx - m * K) / 8), (idx - m * K) % 8
      if kk == 2 then return b0[j] end
      local v = wide(t, kk == 0 and (t == "bf16" and 20 or 3) or 0)
      if kk == 0 then b0[j] = v end
      return v
    end
  end
  for _, c in ipairs { { "m16n8k16", "bf16", 16 }, { "m16n8k8", "bf16", 8 }, { "m16n8k16", "f16", 16 }, { "m16n8k8", "f16", 8 } } do
    it(("runs %s .f32.%s.%s.f32: every D element is C plus the products in k order, in double, rounded once"):format(
      c[1], c[2], c[2]), function()
      math.randomseed(require("pyptx.tools.verify").fresh_seed())
      for _ = 1, 4 do
        local D, ref, cnt = run_mma(c[1], c[2], "f32", { gen = cancelling(c[2], 16, c[3]) })
        for i = 0, cnt.m - 1 do
          for j = 0, 7 do assert.are.equal(f32_of(ref[i][j]), D[i][j], ("D[%d][%d] (sum %.17g)"):format(i, j, ref[i][j])) end
        end
      end
    end)
  end
end)

describe("emulator mma.sync m8n8k4 .f16 (sm_70 quad pairs)", function()
  --- Run the form for (alayout, blayout, acc) with register values built from
  -- ampere.layout; compare each quad pair's D with its own A*B+C.
  local function run_quad(al, bl, acc)
    local LA, LB = ampere.layout("m8n8k4", "f16", "a", acc, al), ampere.layout("m8n8k4", "f16", "b", acc, bl)
    local LC = ampere.layout("m8n8k4", "f16", "c", acc)
    local function gen() return floats.from_f16(floats.to_f16(math.random() * 4 - 2)) end
    local Am, Bm, Cm = {}, {}, {}
    for q = 0, 3 do
      Am[q], Bm[q], Cm[q] = {}, {}, {}
      for i = 0, 7 do Am[q][i], Cm[q][i] = {}, {} for k = 0, 3 do Am[q][i][k] = gen() end end
      for k = 0, 3 do Bm[q][k] = {} for j = 0, 7 do Bm[q][k][j] = gen() end end
      for i = 0, 7 do for j = 0, 7 do Cm[q][i][j] = acc == "f16" and gen() or math.random() - 0.5 end end
    end
    local function pack(L, Mx)
      local out = {}
      for r = 0, L.regs - 1 do
        for lane = 0, 31 do
          local v = 0
          for e = 0, L.elems - 1 do
            local row, col, q = L.coord(lane, r, e)
            if L.elems == 1 then v = Mx[q][row][col] else v = v + floats.to_f16(Mx[q][row][col]) * 2 ^ (16 * e) end
          end
          out[r * 32 + lane + 1] = v
        end
      end
      return out
    end
    local ct = acc == "f32" and T.f32 or T.u32
    local k = kernel "mma_quad" {
      arch = "sm_80", in_specs = { Tile(64, T.u32), Tile(64, T.u32), Tile(32 * LC.regs, ct) },
      out_specs = { Tile(32 * LC.regs, ct) }, block = { 32, 1, 1 }, grid = { 1, 1, 1 },
      function(IA, IB, IC, OUT)
        local pa, pb, pc, po = ptx.global_ptrs(IA, IB, IC, OUT)
        local off = reg.from(ptx.special.tid.x(), T.u32):mul_wide(4)
        local f = ampere.fragments("m8n8k4", "f16", acc)
        local ia, ib, ic, oo = pa + off, pb + off, pc + off, po + off
        for r = 0, 1 do ptx.inst.ld.global.b32(f.a[r], ptx.addr(ia, r * 128)) end
        for r = 0, 1 do ptx.inst.ld.global.b32(f.b[r], ptx.addr(ib, r * 128)) end
        for r = 0, LC.regs - 1 do ptx.ld.global(f.c[r], ptx.addr(ic, r * 128)) end
        ptx.mma { shape = "m8n8k4", atype = "f16", ctype = acc, alayout = al, blayout = bl, d = f.c, a = f.a, b = f.b, c = f.c }
        for r = 0, LC.regs - 1 do ptx.st.global(ptx.addr(oo, r * 128), f.c[r]) end
        ptx.ret()
      end,
    }
    local got = k(tensor.from_table(pack(LA, Am), T.u32), tensor.from_table(pack(LB, Bm), T.u32),
                  tensor.from_table(pack(LC, Cm), ct)):to_host()
    for r = 0, LC.regs - 1 do
      for lane = 0, 31 do
        for e = 0, LC.elems - 1 do
          local row, col, q = LC.coord(lane, r, e)
          local v = tonumber(got[r * 32 + lane])
          if acc == "f16" then v = floats.from_f16(math.floor(v / 2 ^ (16 * e)) % 65536) end
          local s = Cm[q][row][col]
          for kk = 0, 3 do s = s + Am[q][row][kk] * Bm[q][kk][col] end
          assert.is_true(math.abs(v - s) <= (acc == "f16" and 4e-3 or 1e-6) * math.max(1, math.abs(s)),
            ("%s.%s %s: quad pair %d D[%d][%d] = %s, expected %s"):format(al, bl, acc, q, row, col, v, s))
        end
      end
    end
  end

  for _, al in ipairs { "row", "col" } do
    for _, bl in ipairs { "row", "col" } do
      for _, acc in ipairs { "f32", "f16" } do
        it(("runs .%s.%s with .%s accumulators in CUTLASS's SM70 layouts"):format(al, bl, acc), function()
          math.randomseed(require("pyptx.tools.verify").fresh_seed())
          run_quad(al, bl, acc)
        end)
      end
    end
  end
end)

describe("emulator ldmatrix / stmatrix / movmatrix", function()
  it("follow the ISA's m8n8 layouts: ldmatrix (plain, .trans), movmatrix, stmatrix .trans", function()
    -- four 8x8 b16 matrices, element (i, r, c) = 64i + 8r + c; lane l copies
    -- row l%8 of matrix l/8 into shared memory and gives its address.
    local k = kernel "ldst" {
      arch = "sm_90a", in_specs = { Tile(256, T.u16) },
      out_specs = { Tile(256, T.u32), Tile(32, T.u32), Tile(256, T.u16) },
      block = { 32, 1, 1 }, grid = { 1, 1, 1 },
      function(IN, REGS, MOV, ST)
        local pi, pr, pm, ps = ptx.global_ptrs(IN, REGS, MOV, ST)
        local s = smem.alloc(T.b16, 512, { align = 128 })
        local lane = reg.from(ptx.special.tid.x(), T.u32)
        local row = s:base() + lane:shl(4)
        local v = reg.array(T.b32, 4)
        local vv = { v[0], v[1], v[2], v[3] }
        ptx.inst.ld.global.v4.b32(vv, ptx.addr(pi + lane:mul_wide(16)))
        ptx.inst.st.shared.v4.b32(ptx.addr(row), vv)
        ptx.bar_sync(0)
        local d, dt = reg.array(T.b32, 4), reg.array(T.b32, 4)
        ptx.ldmatrix { d = d, addr = row }
        ptx.ldmatrix { d = dt, addr = row, trans = true }
        local out = pr + lane:mul_wide(4)
        for r = 0, 3 do
          ptx.st.global(ptx.addr(out, r * 128), d[r])
          ptx.st.global(ptx.addr(out, 512 + r * 128), dt[r])
        end
        local m = reg.scalar(T.b32)
        ptx.movmatrix(m, d[0])
        ptx.st.global(ptx.addr(pm + lane:mul_wide(4)), m)
        ptx.stmatrix { addr = ptx.addr(row, 512), s = d, trans = true }
        ptx.bar_sync(0)
        ptx.inst.ld.shared.v4.b32(vv, ptx.addr(row, 512))
        ptx.inst.st.global.v4.b32(ptx.addr(ps + lane:mul_wide(16)), vv)
        ptx.ret()
      end,
    }
    local vals = {}
    for i = 0, 255 do vals[i + 1] = i end
    local regs, mov, st = k(tensor.from_table(vals, T.u16))
    local R_, M_, S_ = regs:to_host(), mov:to_host(), st:to_host()
    local function el(i, r, c) return 64 * i + 8 * r + c end
    for lane = 0, 31 do
      local g, t = math.floor(lane / 4), lane % 4
      for i = 0, 3 do
        assert.equal(el(i, g, 2 * t) + 65536 * el(i, g, 2 * t + 1), tonumber(R_[i * 32 + lane]))
        assert.equal(el(i, 2 * t, g) + 65536 * el(i, 2 * t + 1, g), tonumber(R_[128 + i * 32 + lane]))
      end
      assert.equal(el(0, 2 * t, g) + 65536 * el(0, 2 * t + 1, g), tonumber(M_[lane]))
    end
    for i = 0, 3 do
      for r = 0, 7 do
        for c = 0, 7 do assert.equal(el(i, c, r), tonumber(S_[el(i, r, c)])) end
      end
    end
  end)
end)

-- ------------------------------------------------------------- examples

describe("Ampere GEMM examples", function()
  for _, name in ipairs { "gemm", "gemm_pipelined" } do
    local m = dofile(("examples/ampere/%s.lua"):format(name))

    it(name .. " follows the kernel-script convention", function()
      for _, f in ipairs { "build", "main", "reference", "inputs", "args", "check" } do assert.is_function(m[f], f) end
      assert.is_true(#m.kernels >= 1)
    end)

    it(name .. " assembles with ptxas for sm_80", function()
      local specs = {}
      for i, k in ipairs(m.kernels) do
        specs[i] = k:specialize()
        assert.equal("sm_80", specs[i].arch)
      end
      for i, k in ipairs(m.kernels) do
        local report = H.assert_ptxas(specs[i], "sm_80")
        assert.equal(0, (report[k.name].spill_stores or 0) + (report[k.name].spill_loads or 0))
      end
    end)

    it(name .. " matches its CPU reference on the emulator at 256x256x128 (bf16 and f16)", function()
      local ok, report = m.check(256, 256, 128)
      assert.is_true(ok, report.message)
      ok, report = m.check(128, 256, 64, { dtype = T.f16 })
      assert.is_true(ok, report.message)
    end)

    it(name .. " rejects shapes that break its constraints", function()
      local err = select(2, pcall(m.build, 100, 256, 128))
      assert.truthy(tostring(err):find("M %% %d+ == 0 is required"), err)
      err = select(2, pcall(m.build, 256, 256, 8))
      assert.truthy(tostring(err):find("K %% %d+ == 0 is required"), err)
    end)
  end

  it("run through `luaptx run` at 256x256x128 and exit 0", function()
    for _, name in ipairs { "gemm", "gemm_pipelined" } do
      local out, _, rc = H.luaptx({ "run", "examples/ampere/" .. name .. ".lua" }, { env = { LUAPTX_DEVICE = "emu" }, merge = true })
      assert.truthy(out:find(name .. "(256, 256, 128, bf16): ok on emu", 1, true), out)
      assert.equal(0, rc, out)
    end
    H.need_ptxas()                                   -- --summary reports ptxas's registers and spills
    for _, name in ipairs { "gemm", "gemm_pipelined" } do
      local out = H.luaptx({ "run", "examples/ampere/" .. name .. ".lua", "--summary" }, { merge = true })
      assert.truthy(out:find("\n" .. name .. "%s+sm_80 .- 0\n"), out)
    end
  end)

  it("gemm_pipelined runs with 2 and 4 stages", function()
    local m = require "examples.ampere.gemm_pipelined"
    for _, s in ipairs { 2, 4 } do
      local ok, report = m.check(128, 128, 128, { stages = s })
      assert.is_true(ok, report.message)
    end
    local err = select(2, pcall(m.build, 128, 128, 64, { stages = 4 }))
    assert.truthy(tostring(err):find("K / 32 >= stages - 1 is required", 1, true), err)
  end)

  it("gemm_pipelined's swizzles put the 8 rows of every ldmatrix phase in 8 different bank groups", function()
    local m = require "examples.ampere.gemm_pipelined"
    for chunk = 0, 3 do        -- A: 64-byte rows, any 8 consecutive rows from a multiple of 8
      for r0 = 0, 8, 8 do
        local groups = {}
        for r = r0, r0 + 7 do groups[bit.band(bit.rshift(m.swizzle(r * 64 + chunk * 16, 3), 4), 7)] = true end
        local n = 0
        for _ in pairs(groups) do n = n + 1 end
        assert.equal(8, n)
      end
    end
    for chunk = 0, 15 do       -- B: 256-byte rows
      local groups = {}
      for r = 0, 7 do groups[bit.band(bit.rshift(m.swizzle(r * 256 + chunk * 16, 4), 4), 7)] = true end
      local n = 0
      for _ in pairs(groups) do n = n + 1 end
      assert.equal(8, n)
    end
  end)
end)

-- -------------------------------------------------- nvcc differential

describe("nvcc-compiled mma.sync on the emulator", function()
  local emu = H.emu
  local KERNELS = {
    { "mma_bf16_m16n8k16", m = 16, k = 16, dt = T.bf16, acc = T.f32, tol = 1e-6,
      gen = function() return floats.from_bf16(floats.to_bf16(math.random() * 4 - 2)) end },
    { "mma_tf32_m16n8k8", m = 16, k = 8, dt = T.f32, acc = T.f32, tol = 1e-6,
      gen = function() return (math.random(0, 2047) - 1024) / 256 end },
    { "mma_s8_m16n8k32", m = 16, k = 32, dt = T.s8, acc = T.s32, tol = 0, gen = function() return math.random(-128, 127) end },
    { "mma_f64_m8n8k4", m = 8, k = 4, dt = T.f64, acc = T.f64, tol = 1e-14, gen = function() return math.random() * 4 - 2 end },
  }
  for _, arch in ipairs { "sm80", "sm90a" } do
    for _, K in ipairs(KERNELS) do
      it(("%s %s matches A*B+C (fragments gathered by CUDA code, not pyptx.ampere)"):format(arch, K[1]), function()
        math.randomseed(require("pyptx.tools.verify").fresh_seed())
        local mod = pyptx.load_ptx(("spec/fixtures/ptx/nvcc/diff_mma_%s.ptx"):format(arch))
        local A, Bt, C = {}, {}, {}
        for i = 1, K.m * K.k do A[i] = K.gen() end
        for i = 1, 8 * K.k do Bt[i] = K.gen() end
        for i = 1, K.m * 8 do C[i] = K.acc == T.s32 and math.random(-5000, 5000) or math.random() - 0.5 end
        local D = tensor.empty({ K.m * 8 }, K.acc, emu())
        D:fill_bytes(0xff)
        mod[K[1]] { grid = 1, block = 32, device = emu(), args = {
          tensor.from_table(A, K.dt, { #A }, emu()), tensor.from_table(Bt, K.dt, { #Bt }, emu()),
          tensor.from_table(C, K.acc, { #C }, emu()), D } }
        local got = D:to_host()
        for i = 0, K.m - 1 do
          for j = 0, 7 do
            local s = C[i * 8 + j + 1]
            for kk = 0, K.k - 1 do s = s + A[i * K.k + kk + 1] * Bt[j * K.k + kk + 1] end
            local g = tonumber(got[i * 8 + j])
            assert.is_true(math.abs(g - s) <= K.tol * math.max(1, math.abs(s)),
              ("%s D[%d][%d] = %s, expected %s"):format(K[1], i, j, tostring(g), tostring(s)))
          end
        end
      end)
    end
  end
end)

describe("nvcc-compiled fp8 mma.sync on the emulator", function()
  local emu = H.emu
  local ENC = { e4m3 = floats.to_e4m3, e5m2 = floats.to_e5m2 }
  local KERNELS = {
    { "mma_e4m3_e5m2_m16n8k32_f32", k = 32, a = "e4m3", b = "e5m2", acc = "f32" },
    { "mma_e5m2_e5m2_m16n8k16_f32", k = 16, a = "e5m2", b = "e5m2", acc = "f32" },
    { "mma_e5m2_e4m3_m16n8k32_f16", k = 32, a = "e5m2", b = "e4m3", acc = "f16" },
    { "mma_e4m3_e4m3_m16n8k16_f16", k = 16, a = "e4m3", b = "e4m3", acc = "f16" },
  }
  for _, arch in ipairs { "sm89", "sm90a" } do
    for _, K in ipairs(KERNELS) do
      it(("%s %s matches A*B+C (fragments gathered by CUDA code, not pyptx.ampere)"):format(arch, K[1]), function()
        math.randomseed(require("pyptx.tools.verify").fresh_seed())
        local mod = pyptx.load_ptx(("spec/fixtures/ptx/nvcc/diff_mma_fp8_%s.ptx"):format(arch))
        local f16 = K.acc == "f16"
        local function gen(t) return fp8_value(t, f16 and (t == "e4m3" and 9 or 17) or nil) end
        local A, Bt, C, Ab, Bb, Cb = {}, {}, {}, {}, {}, {}
        for i = 1, 16 * K.k do A[i] = gen(K.a); Ab[i] = ENC[K.a](A[i]) end
        for i = 1, 8 * K.k do Bt[i] = gen(K.b); Bb[i] = ENC[K.b](Bt[i]) end
        for i = 1, 128 do
          C[i] = f16 and floats.round_f16(math.random() * 8 - 4) or f32_of(math.random() * 8 - 4)
          Cb[i] = f16 and floats.to_f16(C[i]) or C[i]
        end
        local acc_t = f16 and T.u16 or T.f32
        local D = tensor.empty({ 128 }, acc_t, emu())
        D:fill_bytes(0xff)
        mod[K[1]] { grid = 1, block = 32, device = emu(), args = {
          tensor.from_table(Ab, T.u8, { #Ab }, emu()), tensor.from_table(Bb, T.u8, { #Bb }, emu()),
          tensor.from_table(Cb, acc_t, { #Cb }, emu()), D } }
        local got = D:to_host()
        for i = 0, 15 do
          for j = 0, 7 do
            local s = C[i * 8 + j + 1]
            for kk = 0, K.k - 1 do s = s + A[i * K.k + kk + 1] * Bt[j * K.k + kk + 1] end
            local g = f16 and floats.from_f16(tonumber(got[i * 8 + j])) or tonumber(got[i * 8 + j])
            assert.are.equal(f16 and f16_of(s) or f32_of(s), g, ("%s D[%d][%d] (sum %.17g)"):format(K[1], i, j, s))
          end
        end
      end)
    end
  end
end)

-- ------------------------------------------------------------ checks

describe("emulator checks on matrix instructions", function()
  it("reports an ldmatrix row address that is not 16-byte aligned", function()
    local line
    local k = kernel "ldm_align" {
      arch = "sm_80", out_specs = { Tile(32, T.u32) }, block = { 32, 1, 1 }, grid = { 1, 1, 1 },
      function(OUT)
        local po = ptx.global_ptrs(OUT)
        local s = smem.alloc(T.b32, 256, { align = 128 })
        local lane = reg.from(ptx.special.tid.x(), T.u32)
        local a = s:base() + lane:shl(4)
        for q = 0, 3 do ptx.inst.st.shared.u32(ptx.addr(a, 4 * q), lane) end
        ptx.bar_sync(0)
        local d = reg.array(T.b32, 1)
        line = debug.getinfo(1, "l").currentline + 1
        ptx.ldmatrix { d = d, addr = ptx.addr(a, 8) }
        ptx.st.global(ptx.addr(po + lane:mul_wide(4)), d[0])
        ptx.ret()
      end,
    }
    local ok, err = pcall(k)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("ampere_spec.lua:" .. line .. ": ldmatrix", 1, true), err)
    assert.truthy(tostring(err):find("needs 16-byte alignment", 1, true), err)
  end)

  it("reports an mma.sync in divergent code at the Lua line that emitted it", function()
    local line
    local k = kernel "mma_div" {
      arch = "sm_80", out_specs = { Tile(32, T.f32) }, block = { 32, 1, 1 }, grid = { 1, 1, 1 },
      function(OUT)
        local po = ptx.global_ptrs(OUT)
        local lane = reg.from(ptx.special.tid.x(), T.u32)
        local f = ampere.fragments("m16n8k16", T.bf16, T.f32, true)
        for r = 0, 3 do ptx.inst.mov.b32(f.a[r], 0) end
        for r = 0, 1 do ptx.inst.mov.b32(f.b[r], 0) end
        ptx.if_(lane:lt(16), function()
          line = debug.getinfo(1, "l").currentline + 1
          ptx.mma { shape = "m16n8k16", atype = T.bf16, d = f.c, a = f.a, b = f.b, c = f.c }
        end)
        ptx.st.global(ptx.addr(po + lane:mul_wide(4)), f.c[0])
        ptx.ret()
      end,
    }
    local ok, err = pcall(k)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("ampere_spec.lua:" .. line .. ": mma.sync", 1, true), err)
    assert.truthy(tostring(err):find("needs all 32 lanes of the warp converged", 1, true), err)
  end)
end)

-- ---------------------------------------------------------------- GPU

describe("Ampere GEMMs on a CUDA GPU #gpu", function()
  local dev, why = H.gpu()
  if not dev then pending(why) return end
  ffi.cdef [[ struct amp_ts { long s, ns; }; int clock_gettime(int, struct amp_ts *); ]]
  local ts = ffi.new("struct amp_ts")
  local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end
  for _, name in ipairs { "gemm", "gemm_pipelined" } do
    it(name .. " matches its reference on the GPU and reports TFLOP/s at 4096^3", function()
      local m = require("examples.ampere." .. name)
      runtime.use(dev)
      local passed, report = m.check(512, 512, 256)
      assert.is_true(passed, report.message)
      local n = 4096
      local k = m.build(n, n, n)
      local a = tensor.rand({ n, n }, T.bf16, { seed = 1, lo = -1, hi = 1 })
      local b = tensor.rand({ n, n }, T.bf16, { seed = 2, lo = -1, hi = 1 })
      local launch = runtime.prepare(k, a, b)
      launch()
      dev:sync()
      local reps, t0 = 10, now()
      for _ = 1, reps do launch() end
      dev:sync()
      local s = (now() - t0) / reps
      print(("%s 4096^3 bf16: %.3f ms, %.1f TFLOP/s on %s"):format(name, s * 1e3, 2 * n ^ 3 / s / 1e12, dev.name))
    end)
  end
end)
