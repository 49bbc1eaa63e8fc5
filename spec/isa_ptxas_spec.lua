-- The ISA table against ptxas. Part 1 traces, for each instruction family
-- and each arch, a kernel of representative forms through the DSL: our
-- validator must accept it and ptxas must assemble it. Part 2 takes forms
-- PTX does not allow: our validator must refuse each, and ptxas must refuse
-- the same text emitted unchecked, so that a rule of ours that is wrong
-- (refusing valid PTX or accepting invalid PTX) shows up here.
local pyptx = require "pyptx"
local trace = require "pyptx.trace"
local ampere = require "pyptx.ampere"
local H = require "spec.helpers"
local reg, ptx, smem, T, Tile = pyptx.reg, pyptx.ptx, pyptx.smem, pyptx.types, pyptx.Tile

local ARCHS = { "sm_80", "sm_90a", "sm_100a" }

local function sm_of(arch) return tonumber(arch:match("^sm_(%d+)")) end

-- --------------------------------------------------------------- families

local function u32(v) return reg.scalar(T.u32, v) end
local function s32(v) return reg.scalar(T.s32, v) end
local function f32(v) return reg.scalar(T.f32, v) end
local function f64(v) return reg.scalar(T.f64, v) end
local function b32(v) return reg.scalar(T.b32, v) end
local function b64(v) return reg.scalar(T.b64, v) end
local function r(ty) return reg.scalar(ty) end

local FAMILIES = {}
--- A family of forms: its name, a body that emits them (given env: arch,
-- p, s, l, param), the PTX version per arch (a string or function), and
-- the first sm that has them (its tests run only on archs from there).
local function family(name, body, version, min_sm)
  FAMILIES[#FAMILIES + 1] = { name = name, body = body, version = version, min_sm = min_sm or 0 }
end

family("integer ALU: add sub mul mad div rem min max abs neg", function(env)
  local i = ptx.inst
  local a, b, c = u32(3), u32(5), u32(7)
  local sa, sb = s32(-3), s32(4)
  local d, e = reg.scalar(T.u64, 1), reg.scalar(T.s64, 2)
  local h, g = reg.scalar(T.u16, 1), reg.scalar(T.s16, 2)
  i.add.u32(r(T.u32), a, b); i.add.s64(r(T.s64), e, 9); i.add.u16(r(T.u16), h, h)
  i.add.sat.s32(r(T.s32), sa, sb); i.add.cc.u32(r(T.u32), a, b); i.addc.u32(r(T.u32), a, b)
  i.sub.u32(r(T.u32), a, b); i.sub.s64(r(T.s64), e, e); i.sub.sat.s32(r(T.s32), sa, sb)
  i.mul.lo.u32(r(T.u32), a, b); i.mul.hi.s32(r(T.s32), sa, sb); i.mul.wide.u32(r(T.u64), a, b)
  i.mul.wide.s16(r(T.s32), g, g); i.mul.lo.u64(r(T.u64), d, d); i.mul24.lo.u32(r(T.u32), a, b)
  i.mad.lo.u32(r(T.u32), a, b, c); i.mad.hi.sat.s32(r(T.s32), sa, sb, sa); i.mad.wide.u32(r(T.u64), a, b, d)
  i.mad.lo.cc.u32(r(T.u32), a, b, c)
  i.div.u32(r(T.u32), a, b); i.div.s64(r(T.s64), e, e); i.rem.u32(r(T.u32), a, b); i.rem.s64(r(T.s64), e, 3)
  i.min.u32(r(T.u32), a, b); i.min.s32(r(T.s32), sa, sb); i.max.u64(r(T.u64), d, d); i.max.s16(r(T.s16), g, g)
  i.abs.s32(r(T.s32), sa); i.abs.s64(r(T.s64), e); i.neg.s32(r(T.s32), sa); i.neg.s16(r(T.s16), g)
  i.sad.u32(r(T.u32), a, b, c)
  if sm_of(env.arch) >= 90 then i.min.relu.s32(r(T.s32), sa, sb); i.max.relu.s32(r(T.s32), sa, sb) end
  -- the operators
  local _ = a + b - c * 2 / b % c
  _ = -sa; _ = sa:min(sb); _ = sa:abs(); _ = a:fma(b, c); _ = a:mul_wide(b)
end)

family("float ALU: add sub mul fma mad div min max abs neg (f32, f64)", function()
  local i = ptx.inst
  local x, y, z = f32(1.5), f32(2), f32(-1)
  local dx, dy = f64(0.5), f64(3)
  i.add.f32(r(T.f32), x, y); i.add.rn.ftz.sat.f32(r(T.f32), x, y); i.add.rz.f64(r(T.f64), dx, dy)
  i.sub.rm.f32(r(T.f32), x, y); i.sub.f64(r(T.f64), dx, dy)
  i.mul.f32(r(T.f32), x, 0.25); i.mul.rp.ftz.f32(r(T.f32), x, y); i.mul.rn.f64(r(T.f64), dx, dy)
  i.fma.rn.f32(r(T.f32), x, y, z); i.fma.rz.ftz.sat.f32(r(T.f32), x, y, z); i.fma.rn.f64(r(T.f64), dx, dy, dx)
  i.mad.rn.f32(r(T.f32), x, y, z); i.mad.rn.f64(r(T.f64), dx, dy, dx)
  i.div.rn.f32(r(T.f32), x, y); i.div.approx.f32(r(T.f32), x, y); i.div.full.ftz.f32(r(T.f32), x, y)
  i.div.rn.f64(r(T.f64), dx, dy)
  i.min.f32(r(T.f32), x, y); i.min.ftz.NaN.f32(r(T.f32), x, y); i.max.f64(r(T.f64), dx, dy)
  i.abs.f32(r(T.f32), x); i.abs.ftz.f32(r(T.f32), x); i.abs.f64(r(T.f64), dx)
  i.neg.f32(r(T.f32), x); i.neg.f64(r(T.f64), dx)
  i.copysign.f32(r(T.f32), x, y); i.testp.finite.f32(reg.pred(), x)
  local _ = x + y * 3 - z / y
  _ = -x; _ = x:abs(); _ = x:fma(y, z); _ = x:max(y); _ = dx / dy
end)

family("min/max .xorsign.abs (sm_86+)", function()
  local x, h = f32(1), r(T.f16)
  ptx.inst.max.xorsign.abs.f32(r(T.f32), x, x)
  ptx.inst.min.NaN.xorsign.abs.f32(r(T.f32), x, x)
  ptx.inst.min.xorsign.abs.f16(r(T.f16), h, h)
end, nil, 86)

family("half ALU: f16 f16x2 bf16 bf16x2", function(env)
  local i = ptx.inst
  local h, h2, b, b2 = r(T.f16), r(T.f16x2), r(T.bf16), r(T.bf16x2)
  i.add.f16(r(T.f16), h, h); i.add.rn.f16x2(r(T.f16x2), h2, h2); i.sub.f16(r(T.f16), h, h)
  i.mul.f16x2(r(T.f16x2), h2, h2); i.fma.rn.f16(r(T.f16), h, h, h); i.fma.rn.relu.f16x2(r(T.f16x2), h2, h2, h2)
  i.fma.rn.bf16(r(T.bf16), b, b, b); i.fma.rn.bf16x2(r(T.bf16x2), b2, b2, b2)
  i.min.f16(r(T.f16), h, h); i.max.NaN.f16x2(r(T.f16x2), h2, h2); i.min.bf16x2(r(T.bf16x2), b2, b2)
  i.neg.f16(r(T.f16), h); i.abs.f16x2(r(T.f16x2), h2); i.neg.bf16(r(T.bf16), b); i.abs.bf16x2(r(T.bf16x2), b2)
  i.ex2.approx.f16(r(T.f16), h); i.ex2.approx.f16x2(r(T.f16x2), h2)
  i.tanh.approx.f16(r(T.f16), h); i.tanh.approx.f16x2(r(T.f16x2), h2)
  i.setp.lt.f16(reg.pred(), h, h); i.setp.eq.f16x2(ptx.pipe(reg.pred(), reg.pred()), h2, h2)
  if sm_of(env.arch) >= 90 then
    i.add.bf16(r(T.bf16), b, b); i.mul.rn.bf16x2(r(T.bf16x2), b2, b2); i.sub.bf16x2(r(T.bf16x2), b2, b2)
    i.ex2.approx.ftz.bf16(r(T.bf16), b); i.tanh.approx.bf16x2(r(T.bf16x2), b2)
    i.setp.gt.bf16(reg.pred(), b, b)
  end
  local _ = h + h
  _ = h2 * h2; _ = h:fma(h, h)
end)

family("bits: and or xor not cnot lop3 shl shr shf popc clz brev bfind bfe bfi prmt", function()
  local i = ptx.inst
  local a, b, c, w = b32(0xf0), b32(0x0f), b32(3), b64(1)
  local u, s, d = u32(1), s32(-8), reg.scalar(T.u64, 2)
  i["and"].b32(r(T.b32), a, b); i["or"].b64(r(T.b64), w, w); i.xor.b16(r(T.b16), reg.scalar(T.b16, 1), 3)
  i["not"].b32(r(T.b32), a); i.cnot.b32(r(T.b32), a); i.lop3.b32(r(T.b32), a, b, c, 0x96)
  i["and"].pred(reg.pred(), u:eq(1), u:ne(2))
  i.shl.b32(r(T.b32), a, 3); i.shl.b64(r(T.b64), w, u); i.shr.u32(r(T.u32), u, 2); i.shr.s32(r(T.s32), s, u)
  i.shr.b64(r(T.b64), w, 1); i.shf.l.wrap.b32(r(T.b32), a, b, u); i.shf.r.clamp.b32(r(T.b32), a, b, 5)
  i.popc.b32(r(T.u32), a); i.popc.b64(r(T.u32), w); i.clz.b32(r(T.u32), a); i.clz.b64(r(T.u32), w)
  i.brev.b32(r(T.b32), a); i.brev.b64(r(T.b64), w); i.bfind.u32(r(T.u32), u); i.bfind.shiftamt.s64(r(T.u32), reg.scalar(T.s64, 5))
  i.bfe.u32(r(T.u32), u, 8, 4); i.bfe.s64(r(T.s64), reg.scalar(T.s64, 1), 0, 8); i.bfe.u64(r(T.u64), d, u, u)
  i.bfi.b32(r(T.b32), a, b, 4, 8); i.bfi.b64(r(T.b64), w, w, 0, 8)
  i.prmt.b32(r(T.b32), a, b, 0x3210); i.prmt.b32.f4e(r(T.b32), a, b, c)
  local _ = a:band(b):bor(c):bxor(a):bnot():shl(2)
  _ = u:shr(1); _ = s:shr(1)
end)

family("compare and select: setp selp set slct", function()
  local i = ptx.inst
  local u, v, s = u32(1), u32(2), s32(-1)
  local x, y, d = f32(1), f32(2), f64(1)
  local p, q = reg.pred(), reg.pred()
  i.setp.lt.u32(p, u, v); i.setp.hs.u32(p, u, 5); i.setp.ge.s32(p, s, 0); i.setp.ne.b32(p, b32(1), 2)
  i.setp.eq.u64(p, reg.scalar(T.u64, 1), 1); i.setp.le.u16(p, reg.scalar(T.u16, 1), 2)
  i.setp.lt.and_.s32(q, s, 0, p); i.setp.gt.or_.f32(q, x, y, -p); i.setp.eq.s32(ptx.pipe(p, q), s, 0)
  i.setp.gtu.ftz.f32(p, x, y); i.setp.num.f64(p, d, d); i.setp.nan.f32(p, x, y); i.setp.neu.f64(p, d, d)
  i.selp.b32(r(T.b32), b32(1), 2, p); i.selp.f32(r(T.f32), x, y, -p); i.selp.u64(r(T.u64), reg.scalar(T.u64, 1), 0, p)
  i.selp.s16(r(T.s16), reg.scalar(T.s16, 1), 2, p)
  i.set.lt.u32.s32(r(T.u32), s, s); i.set.lt.f32.f32(r(T.f32), x, y); i.set.eq.and_.u32.f32(r(T.u32), x, y, p)
  i.slct.u32.s32(r(T.u32), u, v, s); i.slct.f32.f32(r(T.f32), x, y, x)
  i.selp.b32(r(T.b32), 1, 0, u:lt(v):band(s:ge(0)))   -- used: an unused predicate warns
  i.selp.b32(r(T.b32), 1, 0, x:le(y):bor(-p))
end)

family("cvt: integer, float, rounding, saturation, f16 bf16 tf32", function()
  local i = ptx.inst
  local u, s, x, d = u32(1), s32(-1), f32(1.5), f64(2.5)
  local h, b, w = r(T.f16), r(T.bf16), reg.scalar(T.u64, 1)
  i.cvt.u32.u16(r(T.u32), reg.scalar(T.u16, 1)); i.cvt.u16.u32(r(T.u16), u); i.cvt.s64.s32(r(T.s64), s)
  i.cvt.u64.u32(r(T.u64), u); i.cvt.sat.u8.s32(r(T.u16), s); i.cvt.u32.s8(r(T.u32), reg.scalar(T.s16, 1))
  i.cvt.sat.s32.u32(r(T.s32), u); i.cvt.u32.u64(r(T.u32), w)
  i.cvt.rn.f32.u32(r(T.f32), u); i.cvt.rz.f32.s32(r(T.f32), s); i.cvt.rn.f64.u64(r(T.f64), w); i.cvt.rn.f32.s8(r(T.f32), reg.scalar(T.s16, 1))
  i.cvt.rzi.s32.f32(r(T.s32), x); i.cvt.rni.u32.f64(r(T.u32), d); i.cvt.rmi.ftz.sat.s32.f32(r(T.s32), x)
  i.cvt.rpi.u64.f32(r(T.u64), x)
  i.cvt.f64.f32(r(T.f64), x); i.cvt.rn.f32.f64(r(T.f32), d); i.cvt.rz.sat.f32.f64(r(T.f32), d)
  i.cvt.rni.f32.f32(r(T.f32), x); i.cvt.rzi.ftz.f32.f32(r(T.f32), x); i.cvt.ftz.f64.f32(r(T.f64), x)
  i.cvt.rn.f16.f32(h, x); i.cvt.f32.f16(r(T.f32), h); i.cvt.rn.f16.f64(r(T.f16), d); i.cvt.f64.f16(r(T.f64), h)
  i.cvt.rn.f16.s32(r(T.f16), s); i.cvt.rzi.s32.f16(r(T.s32), h)
  i.cvt.rn.bf16.f32(b, x); i.cvt.f32.bf16(r(T.f32), b); i.cvt.rn.relu.bf16.f32(r(T.bf16), x)
  i.cvt.rn.f16x2.f32(r(T.f16x2), x, x); i.cvt.rz.relu.bf16x2.f32(r(T.bf16x2), x, x)
  i.cvt.rna.tf32.f32(r(T.b32), x)
  local _ = u:to(T.f32); _ = x:to(T.s32); _ = x:to(T.f16); _ = x:to(T.f64); _ = d:to(T.f32); _ = h:to(T.f32)
  _ = reg.scalar(T.b16, 1):to(T.f32)
end)

family("cvt on sm_90+: bf16 to and from everything, tf32 .rn, fp8 e4m3x2/e5m2x2", function(env)
  local i = ptx.inst
  local x, h, b = f32(1), r(T.f16), r(T.bf16)
  i.cvt.rn.bf16.f16(r(T.bf16), h); i.cvt.rn.f16.bf16(r(T.f16), b); i.cvt.f64.bf16(r(T.f64), b)
  i.cvt.rn.bf16.u32(r(T.bf16), u32(3)); i.cvt.rzi.s32.bf16(r(T.s32), b)
  i.cvt.rn.tf32.f32(r(T.b32), x)
  i.cvt.rn.satfinite.e4m3x2.f32(r(T.b16), x, x); i.cvt.rn.satfinite.e5m2x2.f32(r(T.e5m2x2), x, x)
  i.cvt.rn.f16x2.e4m3x2(r(T.f16x2), r(T.b16)); i.cvt.rn.satfinite.e4m3x2.f16x2(r(T.b16), r(T.f16x2))
  if sm_of(env.arch) >= 100 then
    -- e2m1x2 needs a .b8 destination, which luaptx cannot declare yet
    i.cvt.rz.satfinite.ue8m0x2.f32(r(T.b16), x, x)
    i.cvt.rz.satfinite.tf32.f32(r(T.b32), x)
  end
end, nil, 90)

family("mov: registers, immediates, specials, symbols, pack and unpack", function(env)
  local i = ptx.inst
  local s = smem.alloc(T.b32, 4)
  i.mov.u32(r(T.u32), u32(1)); i.mov.u32(r(T.u32), 0xffffffff); i.mov.s32(r(T.s32), -1); i.mov.u16(r(T.u16), 65535)
  i.mov.u64(r(T.u64), 0xffffffffffffffffULL); i.mov.f32(r(T.f32), 1.5); i.mov.f32(r(T.f32), ptx.imm(T.f32, -0.0))
  i.mov.f64(r(T.f64), 1e300); i.mov.b32(r(T.b32), f32(1)); i.mov.f32(r(T.f32), b32(1)); i.mov.pred(reg.pred(), reg.pred())
  i.mov.b16(r(T.b16), 0x3c00); i.mov.u32(r(T.u32), ptx.special.tid.x()); i.mov.u64(r(T.u64), ptx.special.clock64())
  i.mov.u32(r(T.u32), s); i.mov.u64(r(T.u64), s)
  local lo, hi, q = r(T.b32), r(T.b32), r(T.b16)
  i.mov.b64(b64(), { lo, hi }); i.mov.b64({ lo, hi }, b64(1)); i.mov.b64({ lo, ptx.sink }, b64(1))
  i.mov.b32(r(T.b32), { q, q }); i.mov.b32({ q, r(T.b16) }, b32(1)); i.mov.b64(r(T.b64), { q, q, q, q })
  i.mov.b64(r(T.b64), { f32(1), u32(2) })
  if sm_of(env.arch) >= 90 then
    i.mov.u32(r(T.u32), ptx.special.clusterid.x()); i.mov.pred(reg.pred(), ptx.special.is_explicit_cluster())
  end
  reg.scalar(T.f16, 0x3c00):set(0); reg.scalar(T.bf16x2, 0)
end)

family("ld/st/ldu: every state space, vectors, cache hints", function(env)
  local i = ptx.inst
  local p, s, l = env.p, env.s, env.l
  local x, u, d = r(T.f32), r(T.u32), r(T.u64)
  local v4 = { r(T.f32), r(T.f32), r(T.f32), r(T.f32) }
  local sa = s:base()
  i.ld.global.f32(x, ptx.addr(p)); i.ld.global.u8(r(T.u16), ptx.addr(p, 1)); i.ld.global.s8(r(T.s32), ptx.addr(p, 2))
  i.ld.global.b16(r(T.f16), ptx.addr(p)); i.ld.global.v2.f32({ x, x }, ptx.addr(p, 8)); i.ld.global.v4.f32(v4, ptx.addr(p, 16))
  i.ld.global.v2.f64({ r(T.f64), r(T.f64) }, ptx.addr(p, 16)); i.ld.global.v4.u32({ u, u, u, u }, ptx.addr(p))
  i.ld.global.v4.f32({ x, ptx.sink, x, ptx.sink }, ptx.addr(p))
  i.ld.global.nc.f32(x, ptx.addr(p)); i.ld.global.nc.v4.f32(v4, ptx.addr(p))
  i.ld.global.ca.f32(x, ptx.addr(p)); i.ld.global.cg.f32(x, ptx.addr(p)); i.ld.global.cs.f32(x, ptx.addr(p))
  i.ld.global.lu.f32(x, ptx.addr(p)); i.ld.global.cv.f32(x, ptx.addr(p))
  i.ld.volatile.global.f32(x, ptx.addr(p)); i.ld.relaxed.gpu.global.f32(x, ptx.addr(p))
  i.ld.acquire.sys.global.u32(u, ptx.addr(p)); i.ld.relaxed.cta.shared.u32(u, s[0])
  i.ld.global.L1_evict_last.f32(x, ptx.addr(p)); i.ld.global.L1_no_allocate.f32(x, ptx.addr(p))
  i.ld.global.L2_128B.f32(x, ptx.addr(p)); i.ld.global.nc.L1_no_allocate.L2_256B.v4.f32(v4, ptx.addr(p))
  i.ld.global.L2_cache_hint.f32(x, ptx.addr(p), d)
  i.ld.shared.f32(x, s[1]); i.ld.shared.v4.b32({ u, u, u, u }, s[0]); i.ld.shared.u32(u, ptx.addr(sa, 4))
  i.ld.shared_cta.u32(u, s[2]); i.ld["local"].u32(u, l[0]); i.ld.local_.v2.f32({ x, x }, l[0])
  i.ld.param.u64(d, ptx.addr(env.param)); i.ld.u32(u, ptx.addr(p)); i.ld.const.f32(x, ptx.addr(p))
  i.ldu.global.f32(x, ptx.addr(p)); i.ldu.global.v2.f32({ x, x }, ptx.addr(p)); i.ldu.global.v4.u32({ u, u, u, u }, ptx.addr(p))
  i.st.global.f32(ptx.addr(p), x); i.st.global.f32(ptx.addr(p), 1.0); i.st.global.u32(ptx.addr(p), 7)
  i.st.global.v4.f32(ptx.addr(p), v4); i.st.global.v2.u64(ptx.addr(p), { d, d }); i.st.global.u8(ptx.addr(p), r(T.u16))
  i.st.global.wb.f32(ptx.addr(p), x); i.st.global.cg.f32(ptx.addr(p), x); i.st.global.cs.f32(ptx.addr(p), x)
  i.st.global.wt.f32(ptx.addr(p), x); i.st.global.L1_no_allocate.f32(ptx.addr(p), x)
  i.st.global.L2_cache_hint.f32(ptx.addr(p), x, d); i.st.release.gpu.global.u32(ptx.addr(p), u)
  i.st.volatile.shared.u32(s[0], u); i.st.shared.v2.f32(s[0], { x, x }); i.st.local_.u32(l[0], u); i.st.u32(ptx.addr(p), u)
  ptx.ld.global(x, ptx.addr(p)); ptx.ld.global.nc(v4, ptx.addr(p)); ptx.st.shared(s[3], u); ptx.ldu.global(u, ptx.addr(p))
  ptx.ld.global(r(T.bf16x2), ptx.addr(p)); ptx.st.global(ptx.addr(p), r(T.f16))
  if sm_of(env.arch) >= 90 then
    i.ld.shared_cluster.u32(u, ptx.addr(sa)); i.st.shared_cluster.u32(ptx.addr(sa), u)
    i.ld.relaxed.cluster.global.u32(u, ptx.addr(p))
  end
end)

family("ld/st on sm_100: 256-bit vectors and L2::evict_*", function(env)
  local i, p = ptx.inst, env.p
  local v8 = {}
  for k = 1, 8 do v8[k] = r(T.f32) end
  local w4 = { r(T.b64), r(T.b64), r(T.b64), r(T.b64) }
  i.ld.global.v8.f32(v8, ptx.addr(p)); i.ld.global.v4.b64(w4, ptx.addr(p)); i.ld.global.L2_evict_last.v8.b32(v8, ptx.addr(p))
  i.st.global.v8.f32(ptx.addr(p), v8); i.st.global.L2_evict_first.v4.b64(ptx.addr(p), w4)
end, "8.8", 100)

family("cvta and prefetch", function(env)
  local i, p = ptx.inst, env.p
  local d = r(T.u64)
  i.cvta.to.global.u64(d, p); i.cvta.global.u64(d, d); i.cvta.shared.u64(d, env.s); i.cvta.to.shared.u64(d, d)
  i.cvta["local"].u64(d, d); i.cvta.to.const.u64(d, d); i.cvta.shared_cta.u64(d, d)
  i.prefetch.global.L2(ptx.addr(p)); i.prefetch.global.L1(ptx.addr(p)); i.prefetch.global.L2_evict_last(ptx.addr(p))
  i.prefetchu.L1(ptx.addr(p))
  if sm_of(env.arch) >= 90 then i.cvta.param.u64(d, d); i.cvta.shared_cluster.u64(d, d) end
end)

family("special registers", function(env)
  local u, d = r(T.u32), r(T.u64)
  for _, name in ipairs { "tid", "ntid", "ctaid", "nctaid" } do
    for _, c in ipairs { "x", "y", "z" } do ptx.mov(u, ptx.special[name][c]()) end
  end
  for _, name in ipairs { "laneid", "warpid", "nwarpid", "smid", "nsmid", "lanemask_eq", "lanemask_le", "lanemask_lt",
    "lanemask_ge", "lanemask_gt", "clock", "clock_hi", "dynamic_smem_size", "total_smem_size" } do
    ptx.mov(u, ptx.special[name]())
  end
  ptx.mov(d, ptx.special.clock64()); ptx.mov(d, ptx.special.globaltimer()); ptx.mov(d, ptx.special.gridid())
  if sm_of(env.arch) >= 90 then
    for _, name in ipairs { "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid" } do
      for _, c in ipairs { "x", "y", "z" } do ptx.mov(u, ptx.special[name][c]()) end
    end
    ptx.mov(u, ptx.special.cluster_ctarank()); ptx.mov(u, ptx.special.cluster_nctarank())
    ptx.mov(reg.pred(), ptx.special.is_explicit_cluster())
  end
end)

family("control: bra ret exit call trap nanosleep, if_ loop range", function()
  local c = u32(0)
  local top = ptx.label("top")
  ptx.if_(c:eq(0), function() c:set(1) end, function() c:set(2) end)
  ptx.loop(function(l)
    c:set(c + 1)
    ptx.bra(l.exit, c:eq(100))
    return c:lt(10)
  end)
  ptx.range(0, c, function(k) c:set(c + k) end)
  ptx.at(c:gt(50)).bra(top)
  ptx.at(c:eq(7)).inst.bra.uni("done")
  ptx.inst.nanosleep.u32(100)
  -- an indirect call through a prototype (the DSL has no .func yet)
  local fp = ptx.param("fp", T.u64)
  ptx.scope(function()
    trace.raw_line(".param .b32 param0;")
    trace.raw_line(".param .b32 retval0;")
    ptx.inst.st.param.b32(ptx.addr("param0"), c)
    trace.raw_line("proto: .callprototype (.param .b32 _) _ (.param .b32 _);")
    ptx.inst.call.uni(ptx.paren("retval0"), fp, ptx.paren("param0"), "proto")
    ptx.inst.ld.param.b32(reg.scalar(T.b32), ptx.addr("retval0"))
  end)
  ptx.at(c:eq(9)).inst.trap()
  ptx.at(c:eq(8)).exit()
  ptx.label("done")
  ptx.ret()
end)

family("barriers and fences: bar barrier membar fence", function(env)
  local i = ptx.inst
  local n, p = u32(64), reg.pred()
  i.bar.sync(0); i.bar.sync(1, 64); i.bar.sync(n); i.bar.arrive(1, 64); i.bar.red.popc.u32(r(T.u32), 0, p)
  i.bar.red["and"].pred(reg.pred(), 0, p); i.bar.red["or"].pred(reg.pred(), 0, 64, -p); i.bar.cta.sync(0)
  i.barrier.sync(0); i.barrier.sync.aligned(0); i.barrier.arrive(0, 64); i.barrier.cta.sync.aligned(0)
  i.barrier.red.popc.u32(r(T.u32), 0, p); i.bar.warp.sync(0xffffffff)
  i.membar.cta(); i.membar.gl(); i.membar.sys()
  i.fence.sc.gpu(); i.fence.acq_rel.cta(); i.fence.acq_rel.sys(); i.fence.proxy.alias(); i.fence.acquire.gpu()
  ptx.bar_sync(); ptx.bar_sync(2, 128)
  if sm_of(env.arch) >= 90 then
    i.fence.proxy.async(); i.fence.proxy.async.shared_cta(); i.fence.proxy.async.global(); i.fence.acq_rel.cluster()
    i.fence.mbarrier_init.release.cluster()
    i.barrier.cluster.arrive(); i.barrier.cluster.wait(); i.barrier.cluster.arrive.relaxed.aligned()
    i.barrier.cluster.arrive.release(); i.barrier.cluster.wait.acquire()
  end
end)

family("warp: shfl.sync vote.sync redux.sync match.sync activemask elect", function(env)
  local i = ptx.inst
  local b, u, x, p = b32(1), u32(2), f32(1), reg.pred()
  i.shfl.sync.bfly.b32(r(T.b32), b, 16, 0x1f, 0xffffffff); i.shfl.sync.idx.b32(r(T.u32), u, u, 0x1f, u)
  i.shfl.sync.up.b32(ptx.pipe(r(T.b32), reg.pred()), b, 1, 0, 0xffffffff); i.shfl.sync.down.b32(r(T.f32), x, 1, 0x1f, -1)
  i.shfl.sync.up.b32(ptx.pipe(r(T.b32), ptx.sink), b, 1, 0, 0xffffffff)
  i.vote.sync.all.pred(reg.pred(), p, 0xffffffff); i.vote.sync.any.pred(reg.pred(), -p, 0xffffffff)
  i.vote.sync.uni.pred(reg.pred(), p, u); i.vote.sync.ballot.b32(r(T.b32), p, 0xffffffff)
  i.vote.sync.ballot.b32(r(T.u32), p, 0xffffffff)
  i.redux.sync.add.u32(r(T.u32), u, 0xffffffff); i.redux.sync.add.s32(r(T.s32), s32(1), 0xffffffff)
  i.redux.sync.min.u32(r(T.u32), u, 0xffffffff); i.redux.sync.max.s32(r(T.s32), s32(1), 0xffffffff)
  i.redux.sync["and"].b32(r(T.b32), b, 0xffffffff); i.redux.sync["or"].b32(r(T.b32), b, 0xffffffff)
  i.redux.sync.xor.b32(r(T.b32), b, 0xffffffff); i.redux.sync.add.u32(r(T.u32), 5, 0xffffffff)
  i.match.any.sync.b32(r(T.b32), b, 0xffffffff); i.match.any.sync.b64(r(T.b32), b64(1), 0xffffffff)
  i.match.all.sync.b32(ptx.pipe(r(T.b32), reg.pred()), b, 0xffffffff); i.match.sync.any.b32(r(T.b32), b, 0xffffffff)
  i.activemask.b32(r(T.b32))
  ptx.shfl_sync("bfly", r(T.b32), b, 8, 0x1f); ptx.vote_sync("ballot", r(T.b32), p); ptx.redux_sync("max", r(T.u32), u)
  ptx.warp.reduce_sum(x); ptx.warp.reduce_max(u); ptx.warp.reduce_min(s32(1), 16)
  if sm_of(env.arch) >= 90 then
    i.elect.sync(ptx.pipe(r(T.u32), reg.pred()), 0xffffffff); i.elect.sync(ptx.pipe(ptx.sink, reg.pred()), 0xffffffff)
  end
  if sm_of(env.arch) >= 100 then
    i.redux.sync.min.f32(r(T.f32), x, 0xffffffff); i.redux.sync.max.abs.NaN.f32(r(T.f32), x, 0xffffffff)
  end
end)

family("atomics: atom red", function(env)
  local i, p, s = ptx.inst, env.p, env.s
  local u, x, d, b, w = u32(1), f32(1), f64(1), b32(1), b64(1)
  local q = reg.scalar(T.u64, 1)
  i.atom.global.add.u32(r(T.u32), ptx.addr(p), u); i.atom.global.add.u32(r(T.u32), ptx.addr(p), 1)
  i.atom.global.add.f32(r(T.f32), ptx.addr(p), x); i.atom.global.add.f64(r(T.f64), ptx.addr(p), d)
  i.atom.global.add.u64(r(T.u64), ptx.addr(p), q); i.atom.global.add.noftz.f16(r(T.f16), ptx.addr(p), r(T.f16))
  i.atom.global.add.noftz.f16x2(r(T.f16x2), ptx.addr(p), r(T.f16x2))
  i.atom.global.min.s32(r(T.s32), ptx.addr(p), s32(1)); i.atom.global.max.u64(r(T.u64), ptx.addr(p), q)
  i.atom.global["and"].b32(r(T.b32), ptx.addr(p), b); i.atom.global["or"].b64(r(T.b64), ptx.addr(p), w)
  i.atom.global.inc.u32(r(T.u32), ptx.addr(p), u); i.atom.global.dec.u32(r(T.u32), ptx.addr(p), u)
  i.atom.global.exch.b32(r(T.b32), ptx.addr(p), b); i.atom.global.exch.b64(r(T.b64), ptx.addr(p), w)
  i.atom.global.cas.b32(r(T.b32), ptx.addr(p), b, b); i.atom.global.cas.b64(r(T.b64), ptx.addr(p), w, w)
  i.atom.global.cas.b16(r(T.b16), ptx.addr(p), r(T.b16), r(T.b16))
  i.atom.shared.add.u32(r(T.u32), s[0], u); i.atom.shared_cta.add.u32(r(T.u32), s[0], u); i.atom.add.u32(r(T.u32), ptx.addr(p), u)
  i.atom.relaxed.gpu.global.add.u32(r(T.u32), ptx.addr(p), u); i.atom.acq_rel.sys.global.add.u32(r(T.u32), ptx.addr(p), u)
  i.atom.global.L2_cache_hint.add.u32(r(T.u32), ptx.addr(p), u, q); i.atom.global.add.u32(ptx.sink, ptx.addr(p), 1)
  i.red.global.add.u32(ptx.addr(p), u); i.red.global.add.f32(ptx.addr(p), x); i.red.global.add.f64(ptx.addr(p), d)
  i.red.global.max.s32(ptx.addr(p), s32(1)); i.red.global["and"].b32(ptx.addr(p), b); i.red.global.inc.u32(ptx.addr(p), u)
  i.red.global.min.u64(ptx.addr(p), q); i.red.global.add.noftz.f16x2(ptx.addr(p), r(T.f16x2)); i.red.shared.add.u32(s[0], u)
  i.red.relaxed.gpu.global.add.u32(ptx.addr(p), u); i.red.release.sys.global.add.u32(ptx.addr(p), u)
  ptx.atom("add", r(T.u32), ptx.addr(p), u); ptx.atom("exch", r(T.b32), ptx.addr(p), b); ptx.red("add", ptx.addr(p), x)
  if sm_of(env.arch) >= 90 then
    i.atom.global.add.noftz.bf16(r(T.bf16), ptx.addr(p), r(T.bf16))
    i.atom.global.add.noftz.bf16x2(r(T.bf16x2), ptx.addr(p), r(T.bf16x2))
    i.atom.global.max.noftz.v2.f16({ r(T.f16), r(T.f16) }, ptx.addr(p), { r(T.f16), r(T.f16) })
    i.atom.global.add.v2.f32({ r(T.f32), r(T.f32) }, ptx.addr(p), { x, x })
    i.atom.global.add.v4.f32({ r(T.f32), r(T.f32), r(T.f32), r(T.f32) }, ptx.addr(p), { x, x, x, x })
    i.atom.cluster.global.add.u32(r(T.u32), ptx.addr(p), u); i.red.global.add.v2.f32(ptx.addr(p), { x, x })
    i.red.global.add.noftz.bf16x2(ptx.addr(p), r(T.bf16x2))
  end
end, function(arch) return sm_of(arch) == 90 and "8.1" or nil end)

family("transcendentals: rcp sqrt rsqrt ex2 lg2 sin cos tanh", function()
  local i = ptx.inst
  local x, d = f32(2), f64(2)
  i.rcp.rn.f32(r(T.f32), x); i.rcp.approx.f32(r(T.f32), x); i.rcp.approx.ftz.f32(r(T.f32), x); i.rcp.rz.f64(r(T.f64), d)
  i.rcp.approx.ftz.f64(r(T.f64), d)
  i.sqrt.rn.f32(r(T.f32), x); i.sqrt.approx.f32(r(T.f32), x); i.sqrt.approx.ftz.f32(r(T.f32), x); i.sqrt.rn.f64(r(T.f64), d)
  i.rsqrt.approx.f32(r(T.f32), x); i.rsqrt.approx.ftz.f32(r(T.f32), x); i.rsqrt.approx.f64(r(T.f64), d)
  i.ex2.approx.f32(r(T.f32), x); i.ex2.approx.ftz.f32(r(T.f32), x); i.ex2.approx.f32(r(T.f32), 1.0)
  i.lg2.approx.f32(r(T.f32), x); i.lg2.approx.ftz.f32(r(T.f32), x)
  i.sin.approx.f32(r(T.f32), x); i.cos.approx.ftz.f32(r(T.f32), x); i.tanh.approx.f32(r(T.f32), x)
end)

family("TMA and bulk: tensor tile/im2col copies, prefetches, cp.reduce.async.bulk (sm_90+)", function(env)
  local p, s, bar = env.p, env.s, smem.mbarrier(1)
  local c, h = s32(0), reg.scalar(T.u16, 1)
  ptx.cp.async.bulk.tensor_2d { dst = s[0], src = p, coord = { c, c }, mbar = bar[0] }
  ptx.cp.async.bulk.tensor_4d { dst = s[0], src = p, coord = { c, c, c, c }, mbar = bar[0], offsets = { h, 2 } }
  ptx.cp.async.bulk.tensor_3d { dst = s[0], src = p, coord = { c, c, c }, mbar = bar[0], offsets = { h },
    multicast = reg.scalar(T.u16, 3) }
  ptx.cp.async.bulk.tensor_5d { dst = p, src = s[0], coord = { c, c, c, c, c }, mode = "im2col" }
  ptx.cp.async.bulk.prefetch.tensor_5d { src = p, coord = { c, c, c, c, c }, offsets = { h, h, 1 } }
  ptx.cp.async.bulk.prefetch.tensor_1d { src = p, coord = { c } }
  ptx.cp.async.bulk.prefetch { src = p, size = 256 }
  local global = { add = { "u32", "s32", "u64", "f32", "f64", "f16", "bf16" }, min = { "u32", "s32", "u64", "s64", "f16", "bf16" },
    max = { "u64", "s64", "bf16" }, inc = { "u32" }, dec = { "u32" }, ["and"] = { "b32", "b64" }, ["or"] = { "b64" },
    xor = { "b32" } }
  for op, tys in pairs(global) do
    for _, ty in ipairs(tys) do ptx.cp.reduce.async.bulk { dst = p, src = s[0], size = 256, op = op, type = T[ty] } end
  end
  ptx.cp.reduce.async.bulk { dst = p, src = s[0], size = 256, op = "add", type = T.u64, cache_hint = reg.scalar(T.u64, 0) }
  for op, ty in pairs { add = "s32", min = "u32", max = "s32", inc = "u32", dec = "u32", ["and"] = "b32", xor = "b32" } do
    ptx.cp.reduce.async.bulk { dst = s[0], src = s[0], size = 256, op = op, type = T[ty], mbar = bar[0] }
  end
  for _, op in ipairs { "add", "min", "max", "inc", "dec", "and", "or", "xor" } do
    ptx.cp.reduce.async.bulk.tensor_2d { dst = p, src = s[0], coord = { c, c }, op = op }
  end
  ptx.cp.reduce.async.bulk.tensor_3d { dst = p, src = s[0], coord = { c, c, c }, op = "max", mode = "im2col" }
end, nil, 90)

family("griddepcontrol, tensormap.replace, tensormap.cp_fenceproxy, fence.proxy.tensormap (sm_90+, PTX 8.3)", function(env)
  local p, s = env.p, env.s
  ptx.griddepcontrol.launch_dependents(); ptx.griddepcontrol.wait()
  local tr = ptx.tensormap.replace
  tr.global_address(ptx.addr(p), p); tr.global_address(s[0], p); tr.global_address(ptx.addr(p), 0, "global")
  tr.rank(ptx.addr(p), 2); tr.rank(s[0], u32(1))
  tr.box_dim(ptx.addr(p), 0, u32(64), "global"); tr.global_dim(s[0], 4, 7); tr.element_stride(ptx.addr(p), 2, 2)
  tr.global_stride(ptx.addr(p), 3, b64(256), "global"); tr.global_stride(s[0], 0, 4096)
  tr.elemtype(ptx.addr(p), T.bf16); tr.elemtype(s[0], 12); tr.interleave_layout(ptx.addr(p), "32B")
  tr.swizzle_mode(ptx.addr(p), "128B"); tr.fill_mode(s[0], "nan")
  if sm_of(env.arch) >= 100 then tr.swizzle_atomicity(ptx.addr(p), "32B_flip_8B") end
  ptx.fence.tensormap_release(); ptx.fence.tensormap_release("cta"); ptx.fence.proxy.tensormap.release("sys")
  ptx.fence.tensormap_acquire(ptx.addr(p)); ptx.fence.tensormap_acquire(s[0], "cluster")
  for _, scope in ipairs { "cta", "cluster", "gpu", "sys" } do
    ptx.tensormap.cp_fenceproxy { dst = ptx.addr(p), src = s[0], scope = scope }
  end
  ptx.tensormap.cp_fenceproxy(ptx.addr(p, 128), ptx.addr(s:base(), 128))
end, function(arch) return sm_of(arch) == 90 and "8.3" or nil end, 90)

--- The kernel for a family body on arch: one f32 tensor, a u64 param "fp",
-- shared and local buffers.
local function family_kernel(fam, arch)
  local version = fam.version
  if type(version) == "function" then version = version(arch) end
  return pyptx.kernel "family" {
    arch = arch, version = version, in_specs = { Tile(64, T.f32) }, raw_params = { { "u64", "fp" } },
    block = { 128 },
    function(X)
      local env = { arch = arch, param = X.param }
      env.p = ptx.global_ptrs(X)
      env.s = smem.alloc(T.b32, 64, { align = 16 })
      env.l = { [0] = ptx.addr(reg.scalar(T.u32, 0)) }
      fam.body(env)
      ptx.ret()
    end,
  }
end

-- --------------------------------------------------------- invalid forms

--- Operands of a wgmma.mma_async: nd accumulators made by mk, A and B
-- descriptors, scale-d 1, then the immediates given.
local function wg_ops(mk, nd, ...)
  local imms = { ... }
  return function()
    local d, desc = {}, b64(0)
    for i = 1, nd do d[i] = mk() end
    return d, desc, desc, 1, unpack(imms)
  end
end

--- Operands of a wgmma.mma_async.sp: nd accumulators made by mk, A and B
-- descriptors, the metadata register made by meta, the selector sel (a
-- number, or a register made by it when a function),
-- scale-d 1, then the immediates given.
local function wg_sp_ops(mk, nd, meta, sel, ...)
  local imms = { ... }
  return function()
    local d, desc = {}, b64(0)
    for i = 1, nd do d[i] = mk() end
    return d, desc, desc, meta(), type(sel) == "function" and sel() or sel, 1, unpack(imms)
  end
end

--- Operands of an mma.sync: vectors of nd D, na A, nb B and nc C
-- registers (accumulators made by mk_d / mk_c, inputs b32).
local function mma_ops(mk_d, nd, na, nb, mk_c, nc)
  return function()
    local function vec(mk, n) local v = {} for i = 1, n do v[i] = mk() end return v end
    return vec(mk_d, nd), vec(b32, na), vec(b32, nb), vec(mk_c, nc)
  end
end

--- Operands of a tensormap.cp_fenceproxy: [global], [shared], then size
-- (a number, or a register made by it when a function).
local function tm_cp(size)
  return function(env) return ptx.addr(env.p), env.s[0], type(size) == "function" and size() or size end
end

-- { arch, opcode, operand builder[, PTX version] }: PTX does not allow these.
local INVALID = {
  { "sm_80", "add.b32", function() return b32(), b32(), b32() end },
  { "sm_80", "add.rn.u32", function() return u32(), u32(), u32() end },
  { "sm_80", "add.sat.u32", function() return u32(), u32(), u32() end },
  { "sm_80", "add.bf16", function() local b = r(T.bf16) return b, b, b end },
  { "sm_80", "add.u32", function() return u32(), f32(), u32() end },
  { "sm_80", "mul.u32", function() return u32(), u32(), u32() end },
  { "sm_80", "mul.lo.f32", function() return f32(), f32(), f32() end },
  { "sm_80", "mul.wide.u64", function() local d = reg.scalar(T.u64) return d, d, d end },
  { "sm_80", "mad.f32", function() return f32(), f32(), f32(), f32() end },
  { "sm_80", "mad.lo.sat.s32", function() return s32(), s32(), s32(), s32() end },
  { "sm_80", "fma.f32", function() return f32(), f32(), f32(), f32() end },
  { "sm_80", "fma.rn.relu.f32", function() return f32(), f32(), f32(), f32() end },
  { "sm_80", "div.f32", function() return f32(), f32(), f32() end },
  { "sm_80", "div.approx.f64", function() return f64(), f64(), f64() end },
  { "sm_80", "rem.f32", function() return f32(), f32(), f32() end },
  { "sm_80", "abs.u32", function() return u32(), u32() end },
  { "sm_80", "neg.u32", function() return u32(), u32() end },
  { "sm_80", "min.relu.s32", function() return s32(), s32(), s32() end },
  { "sm_80", "setp.lt.b32", function() return reg.pred(), b32(), b32() end },
  { "sm_80", "setp.lo.s32", function() return reg.pred(), s32(), s32() end },
  { "sm_80", "setp.ltu.u32", function() return reg.pred(), u32(), u32() end },
  { "sm_80", "selp.f16", function() local h = r(T.f16) return h, h, h, reg.pred() end },
  { "sm_80", "mov.f16", function() local h = r(T.f16) return h, h end },
  { "sm_80", "mov.u32", function() return u32(), f32() end },
  { "sm_80", "mov.u32", function() return u32(), { r(T.b16), r(T.b16) } end },
  { "sm_80", "mov.u64", function() return r(T.u64), ptx.special.tid.x() end },
  { "sm_80", "mov.u32", function() return u32(), ptx.special.clusterid.x() end },
  { "sm_80", "cvt.f32.u32", function() return f32(), u32() end },
  { "sm_80", "cvt.rn.u32.f32", function() return u32(), f32() end },
  { "sm_80", "cvt.f32.f64", function() return f32(), f64() end },
  { "sm_80", "cvt.rn.f32.f16", function() return f32(), r(T.f16) end },
  { "sm_80", "cvt.rn.f32.f32", function() return f32(), f32() end },
  { "sm_80", "cvt.rn.tf32.f32", function() return b32(), f32() end },
  { "sm_80", "cvt.rn.bf16.f16", function() return r(T.bf16), r(T.f16) end },
  { "sm_80", "cvt.rn.f16x2.f32", function() return r(T.f16x2), f32() end },
  { "sm_80", "cvt.f32.f16x2", function() return f32(), r(T.f16x2) end },
  { "sm_89", "cvt.rn.satfinite.e4m3x2.f32", function() return r(T.b16), f32(), f32() end },
  { "sm_80", "ld.global.f16", function(env) return r(T.f16), ptx.addr(env.p) end },
  { "sm_80", "ld.global.wb.f32", function(env) return f32(), ptx.addr(env.p) end },
  { "sm_80", "ld.relaxed.global.f32", function(env) return f32(), ptx.addr(env.p) end },
  { "sm_80", "ld.global.L2::evict_last.f32", function(env) return f32(), ptx.addr(env.p) end },
  { "sm_80", "ld.global.f32", function() return f32(), ptx.addr(u32()) end },
  { "sm_80", "ld.global.L2::cache_hint.f32", function(env) return f32(), ptx.addr(env.p), u32() end },
  { "sm_100a", "ld.global.v4.f64", function(env) return { f64(), f64(), f64(), f64() }, ptx.addr(env.p) end },
  { "sm_80", "ldu.shared.f32", function(env) return f32(), env.s[0] end },
  { "sm_80", "st.global.ca.f32", function(env) return ptx.addr(env.p), f32() end },
  { "sm_80", "st.global.lu.f32", function(env) return ptx.addr(env.p), f32() end },
  { "sm_80", "cvta.generic.u64", function() local d = r(T.u64) return d, d end },
  { "sm_80", "prefetch.global.L1::evict_last", function(env) return ptx.addr(env.p) end },
  { "sm_80", "bar.sync.aligned", function() return 0 end },
  { "sm_80", "bar.arrive", function() return 1 end },
  { "sm_80", "barrier.sync", function() end },
  { "sm_80", "fence.sc", function() end },
  { "sm_80", "shfl.sync.down.b32", function() return ptx.sink, f32(), 1, 0x1f, 0xffffffff end },
  { "sm_80", "add.u32", function() return ptx.sink, u32(), 1 end },
  { "sm_80", "vote.sync.all.b32", function() return b32(), reg.pred(), 0xffffffff end },
  { "sm_80", "vote.sync.ballot.pred", function() return reg.pred(), reg.pred(), 0xffffffff end },
  { "sm_80", "redux.sync.add.b32", function() return b32(), b32(), 0xffffffff end },
  { "sm_80", "redux.sync.and.u32", function() return u32(), u32(), 0xffffffff end },
  { "sm_80", "redux.sync.inc.u32", function() return u32(), u32(), 0xffffffff end },
  { "sm_100a", "redux.sync.add.f32", function() return f32(), f32(), 0xffffffff end },
  { "sm_80", "atom.global.add.s64", function(env) local s = r(T.s64) return s, ptx.addr(env.p), s end },
  { "sm_80", "atom.global.add.f16", function(env) local h = r(T.f16) return h, ptx.addr(env.p), h end },
  { "sm_80", "atom.global.min.f32", function(env) return f32(), ptx.addr(env.p), f32() end },
  { "sm_80", "atom.global.and.u32", function(env) return u32(), ptx.addr(env.p), u32() end },
  { "sm_80", "atom.global.inc.u64", function(env) local d = r(T.u64) return d, ptx.addr(env.p), d end },
  { "sm_80", "atom.global.exch.u32", function(env) return u32(), ptx.addr(env.p), u32() end },
  { "sm_80", "atom.global.cas.b32", function(env) return b32(), ptx.addr(env.p), b32() end },
  { "sm_80", "atom.global.add.noftz.f32", function(env) return f32(), ptx.addr(env.p), f32() end },
  { "sm_80", "atom.global.max.noftz.f16", function(env) local h = r(T.f16) return h, ptx.addr(env.p), h end },
  { "sm_90a", "atom.global.max.noftz.f16", function(env) local h = r(T.f16) return h, ptx.addr(env.p), h end },
  { "sm_80", "atom.global.add.noftz.bf16x2", function(env) local h = r(T.bf16x2) return h, ptx.addr(env.p), h end },
  { "sm_80", "red.global.add.noftz.bf16x2", function(env) return ptx.addr(env.p), r(T.bf16x2) end },
  { "sm_90a", "atom.global.add.v2.f32", function(env) return { f32(), f32() }, ptx.addr(env.p), { f32(), f32() } end },
  { "sm_90a", "cvt.rz.satfinite.tf32.f32", function() return b32(), f32() end },
  { "sm_80", "red.global.exch.b32", function(env) return ptx.addr(env.p), b32() end },
  { "sm_80", "red.global.add.s64", function(env) return ptx.addr(env.p), r(T.s64) end },
  { "sm_80", "rcp.f32", function() return f32(), f32() end },
  { "sm_80", "rcp.approx.f64", function() return f64(), f64() end },
  { "sm_80", "sqrt.f32", function() return f32(), f32() end },
  { "sm_80", "sqrt.approx.f64", function() return f64(), f64() end },
  { "sm_80", "sqrt.rn.ftz.f64", function() return f64(), f64() end },
  { "sm_80", "ex2.approx.f64", function() return f64(), f64() end },
  { "sm_80", "wgmma.fence.sync.aligned", function() end },
  { "sm_100a", "wgmma.fence.sync.aligned", function() end },
  { "sm_80", "elect.sync", function() return ptx.pipe(u32(), reg.pred()), 0xffffffff end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f16", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f32", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f32", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.s64", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.inc.s32", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.and.u32", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.global.shared::cta.bulk_group.max.f64", function(env) return ptx.addr(env.p), env.s[0], 256 end },
  { "sm_90a", "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.f32",
    function(env) return env.s[0], env.s[0], 256, env.s[8] end },
  { "sm_90a", "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.min.u64",
    function(env) return env.s[0], env.s[0], 256, env.s[8] end },
  { "sm_90a", "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.xor.b64",
    function(env) return env.s[0], env.s[0], 256, env.s[8] end },
  { "sm_90a", "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes", function(env)
    local c = s32(0)
    return env.s[0], setmetatable({ base = env.p, list = { c, c, c, c } }, require("pyptx.async").Bracket), env.s[8],
      { reg.scalar(T.u16, 1) }
  end },
  { "sm_90a", "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes", function(env)
    local c = s32(0)
    return env.s[0], setmetatable({ base = env.p, list = { c, c, c } }, require("pyptx.async").Bracket), env.s[8], { u32(1) }
  end },
  { "sm_80", "griddepcontrol.wait", function() end },
  { "sm_90", "tensormap.replace.tile.global_address.global.b1024.b64", function(env) return ptx.addr(env.p), env.p end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.global_address.global.b1024.b64", function(env) return ptx.addr(env.p), env.p end, "8.2" },
  { "sm_90a", "tensormap.replace.tile.global_address.global.b1024.b32", function(env) return ptx.addr(env.p), u32() end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.box_dim.global.b1024.b64", function(env) return ptx.addr(env.p), 0, env.p end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.box_dim.global.b1024.b32", function(env) return ptx.addr(env.p), u32(), u32() end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.box_dim.global.b1024.b32", function(env) return ptx.addr(env.p), u32() end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.elemtype.global.b1024.b32", function(env) return ptx.addr(env.p), u32() end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.interleave_layout.global.b1024.b32", function(env) return ptx.addr(env.p), 3 end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.fill_mode.global.b1024.b32", function(env) return ptx.addr(env.p), 2 end, "8.3" },
  { "sm_90a", "tensormap.replace.tile.swizzle_atomicity.global.b1024.b32", function(env) return ptx.addr(env.p), 1 end, "8.6" },
  { "sm_90a", "tensormap.replace.tile.global_address.shared.b1024.b64", function(env) return env.s[0], env.p end, "8.3" },
  { "sm_90a", "fence.proxy.tensormap::generic.release", function() end, "8.3" },
  { "sm_90a", "fence.proxy.tensormap::generic.release.gpu", function(env) return ptx.addr(env.p), 128 end, "8.3" },
  { "sm_90a", "fence.proxy.tensormap::generic.acquire.gpu", function(env) return ptx.addr(env.p), u32() end, "8.3" },
  { "sm_90a", "fence.proxy.tensormap::generic.acquire.gpu", function(env) return ptx.addr(env.p), 64 end, "8.3" },
  { "sm_90a", "fence.proxy.tensormap::generic.release.gpu", function() end, "8.0" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", tm_cp(64), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", tm_cp(u32), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", tm_cp(128), "8.2" },
  { "sm_80", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.acquire.gpu.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.shared::cta.global.tensormap::generic.release.gpu.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared.tensormap::generic.release.gpu.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap.release.gpu.sync.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync", tm_cp(128), "8.3" },
  { "sm_90a", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.aligned", tm_cp(128), "8.3" },
  { "sm_90a", "cvt.rn.e4m3x2.f32", function() return r(T.b16), f32(), f32() end },
  { "sm_90a", "cvt.rz.satfinite.e5m2x2.f32", function() return r(T.b16), f32(), f32() end },
  { "sm_90a", "cvt.f16x2.e4m3x2", function() return b32(), r(T.b16) end },
  { "sm_90a", "cvt.rn.satfinite.f16x2.e5m2x2", function() return b32(), r(T.b16) end },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", wg_ops(f32, 4, 1, 1, 0, 0) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2", wg_ops(f32, 4, 1, 1, 1, 0) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k16.f32.tf32.tf32", wg_ops(f32, 4, 1, 1) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16", wg_ops(b32, 2, 1, 1, 0, 0) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.bf16", wg_ops(f32, 4, 1, 1, 0, 0) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.s8", wg_ops(f32, 4, 1, 1) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", wg_ops(s32, 20) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k256.satfinite.s32.b1.b1.and.popc", wg_ops(s32, 4) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc", wg_ops(s32, 4) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1", wg_ops(s32, 4) },
  { "sm_90a", "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.f32.e4m3.e4m3", wg_ops(f32, 4, 1, 1) },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", wg_sp_ops(f32, 4, b32, 2, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16", wg_sp_ops(f32, 4, b32, -1, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32", wg_sp_ops(f32, 4, b32, 2, 1, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e5m2", wg_sp_ops(f32, 4, b32, 1, 1, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.u8", wg_sp_ops(s32, 4, b32, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.f16.f16", wg_sp_ops(f32, 4, b32, 0, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k8.f32.tf32.tf32", wg_sp_ops(f32, 4, b32, 0, 1, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.e4m3.e4m3", wg_sp_ops(f32, 4, b32, 0, 1, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n40k64.s32.s8.s8", wg_sp_ops(s32, 20, b32, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k256.s32.b1.b1.and.popc", wg_sp_ops(s32, 4, b32, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k512.s32.b1.b1.and.popc", wg_sp_ops(s32, 4, b32, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", wg_sp_ops(f32, 4, b32, b32, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", wg_sp_ops(f32, 4, b64, 0, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16", wg_ops(f32, 4, 1, 1, 0, 0), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.s8", wg_sp_ops(s32, 4, b32, 0, 1), "8.4" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16", wg_sp_ops(f32, 4, b32, 0, 1, 1, 0, 0), "8.1" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.s8", wg_sp_ops(s32, 4, b32, 0), "8.1" },
  { "sm_90a", "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.u8.s8", wg_sp_ops(s32, 4, b32, 0), "8.3" },
  { "sm_89", "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32", mma_ops(f32, 4, 2, 1, f32, 4), "8.4" },
  { "sm_89", "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16", mma_ops(b32, 2, 4, 2, b32, 2), "8.4" },
  { "sm_89", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f16", mma_ops(f32, 4, 4, 2, b32, 2), "8.7" },
  { "sm_90a", "mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f32", mma_ops(b32, 2, 2, 1, f32, 4), "8.7" },
  { "sm_80", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", mma_ops(f32, 4, 4, 2, f32, 4), "8.7" },
  { "sm_89", "mma.sync.aligned.m16n8k8.row.col.f32.e4m3.e4m3.f32", mma_ops(f32, 4, 1, 1, f32, 4), "8.7" },
}

--- Trace one invalid case: validated (expecting an error) or unchecked
-- (the same text emitted through an unknown opcode, then renamed).
local function invalid_kernel(case, unchecked)
  return pyptx.kernel "bad" {
    arch = case[1], version = case[4], in_specs = { Tile(64, T.f32) },
    function(X)
      local env = { p = ptx.global_ptrs(X), s = smem.alloc(T.b32, 16) }
      local args = { case[3](env) }
      local form = trace.form(unchecked and ("zz__." .. case[2]) or case[2], not unchecked)
      trace.emit(form, unpack(args, 1, table.maxn(args)))
      ptx.ret()
    end,
  }
end

--- Run fn with stderr discarded (the unchecked path warns).
local function quietly(fn)
  local saved = io.stderr
  rawset(io, "stderr", { write = function(self) return self end })
  local ok, res = pcall(fn)
  rawset(io, "stderr", saved)
  assert(ok, res)
  return res
end

-- ------------------------------------------------------------------ specs

describe("the ISA table against ptxas", function()
  describe("families", function()
    for _, fam in ipairs(FAMILIES) do
      for _, arch in ipairs(ARCHS) do
        if sm_of(arch) >= fam.min_sm then
          it(fam.name .. " on " .. arch .. ": the validator and ptxas accept them", function()
            local text = family_kernel(fam, arch):ptx()
            assert.is_true(select(2, text:gsub("\n\t[%a@][^\n]*;", "")) > 1, "the family emits no instruction on " .. arch)
            H.assert_ptxas(text, arch)
          end)
        end
      end
    end

    it("fp8 conversions on sm_89 with PTX 8.1: the validator and ptxas accept them", function()
      local text = pyptx.kernel "fp8" { arch = "sm_89", version = "8.1", function()
        local x = f32(1)
        ptx.inst.cvt.rn.satfinite.e4m3x2.f32(r(T.b16), x, x)
        ptx.inst.cvt.rn.satfinite.e5m2x2.f32(r(T.b16), x, x)
        ptx.inst.cvt.rn.f16x2.e5m2x2(r(T.f16x2), r(T.b16))
      end }:ptx()
      H.assert_ptxas(text, "sm_89")
    end)
  end)

  it("sparse wgmma (wgmma.mma_async.sp) on sm_90a: every family, accumulator, selector and A source that the ISA lists", function()
    local n = 0
    local text = pyptx.kernel "wgsp" { arch = "sm_90a", version = "8.4", function()
      local desc, meta = b64(0), b32(0)
      local cases = {
        { "f16", "f16", { "f32", "f16" }, { 0, 1 } }, { "bf16", "bf16", { "f32" }, { 0, 1 } },
        { "tf32", "tf32", { "f32" }, { 0, 1 } }, { "e4m3", "e5m2", { "f32", "f16" }, { 0 } },
        { "e5m2", "e4m3", { "f32" }, { 0 } }, { "s8", "u8", { "s32" }, { 0 } }, { "u8", "u8", { "s32" }, { 0 } },
      }
      for _, c in ipairs(cases) do
        for _, dt in ipairs(c[3]) do
          for _, sel in ipairs(c[4]) do
            for _, nn in ipairs { 8, 24, 64, 256 } do
              for _, areg in ipairs { false, true } do
                local acc = ptx.wgmma.fragments(nn, false, dt)
                local a = areg and { b32(0), b32(0), b32(0), b32(0) } or desc
                ptx.wgmma.mma_async { shape = { 64, nn }, d = acc, a = a, b = desc, atype = c[1], btype = c[2], dtype = dt,
                  sparse = { meta = meta, sel = sel }, satfinite = dt == "s32" and nn == 24 or nil,
                  scale_a = c[1] ~= "s8" and c[1] ~= "u8" and -1 or nil, trans_b = c[1] == "f16" and 1 or nil }
                n = n + 1
              end
            end
          end
        end
      end
    end }:ptx()
    assert.are.equal(2 * 4 * (2 * 2 + 2 + 2 + 2 + 1 + 1 + 1), n)
    assert.truthy(text:find("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", 1, true))
    H.assert_ptxas(text, "sm_90a")
  end)

  it("fp8 mma.sync on sm_89 and sm_90a: every pair, shape and accumulator at PTX 8.7, m16n8k32 .f32 at 8.4", function()
    local texts = {}                                  -- { ptx, arch }, assembled once all have traced
    for _, arch in ipairs { "sm_89", "sm_90a" } do
      for _, version in ipairs { "8.4", "8.7" } do
        local n = 0
        local text = pyptx.kernel "fp8mma" { arch = arch, version = version, function()
          for _, shape in ipairs { "m16n8k32", "m16n8k16" } do
            for _, acc in ipairs { "f32", "f16" } do
              for _, a in ipairs { "e4m3", "e5m2" } do
                for _, b in ipairs { "e4m3", "e5m2" } do
                  if version == "8.7" or (shape == "m16n8k32" and acc == "f32") then
                    local f = ampere.fragments(shape, a, acc)
                    ptx.mma { shape = shape, atype = a, btype = b, ctype = acc, d = f.c, a = f.a, b = f.b, c = f.c }
                    n = n + 1
                  end
                end
              end
            end
          end
        end }:ptx()
        assert.are.equal(version == "8.7" and 16 or 4, n)
        texts[#texts + 1] = { text, arch }
      end
    end
    for _, t in ipairs(texts) do H.assert_ptxas(t[1], t[2]) end
  end)

  describe("invalid forms", function()
    it("are checked through an unchecked emission that ptxas accepts for a valid form", function()
      local valid = { "sm_80", "add.u32", function() return u32(), u32(), 1 end }
      local text = quietly(function() return invalid_kernel(valid, true):ptx() end):gsub("zz__%.", "")
      assert.truthy(text:find("\tadd.u32 \t", 1, true))
      H.assert_ptxas(text, "sm_80")
    end)

    for _, case in ipairs(INVALID) do
      it(case[2] .. " on " .. case[1] .. (case[4] and " (PTX " .. case[4] .. ")" or "") .. ": the validator and ptxas refuse it", function()
        local ok, err = pcall(function() return invalid_kernel(case, false):ptx() end)
        assert.is_false(ok, "the validator accepted " .. case[2])
        assert.matches("^spec/isa_ptxas_spec.lua:%d+: ", err)
        local text = quietly(function() return invalid_kernel(case, true):ptx() end):gsub("zz__%.", "")
        assert.truthy(text:find("\t" .. case[2] .. " \t", 1, true) or text:find("\t" .. case[2] .. ";", 1, true), text)
        local assembled, _, log = H.ptxas(text, case[1])
        assert.is_false(assembled, "ptxas accepts " .. case[2] .. " (our validator said: " .. err .. ")\n" .. (log or ""))
      end)
    end
  end)
end)
