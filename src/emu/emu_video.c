/* Video instruction handlers: the scalar vadd vsub vabsdiff vmin vmax vshl
 * vshr vset (byte/half selectors, .sat, a secondary .add/.min/.max or a
 * merge into c), vmad (negation, .po, .shr7/.shr15), and the SIMD forms
 * vadd2 ... vset2, vadd4 ... vset4 (source selectors, a destination mask,
 * .sat, .add accumulation). GPUs since sm_70 have no video unit: ptxas
 * expands these into integer code, and that code is what a kernel gets.
 * The SIMD forms follow the PTX ISA's pseudo-code exactly; where the
 * scalar forms' code differs from it (saturation of merged parts and of
 * unsigned words, the .h1 merge, vadd/vsub's 32-bit wrap, vmad's signed
 * product), the handlers follow the code (docs/emulator.md lists it).
 * Operand selectors come from the decoded operands (emu_op.off). */
#include "emu.h"
#include "../lpx_rules.h"

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define SEL(k) (EMU_OP(w, in, k)->off)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

typedef __int128 i128;

/* Sign-extend the low bits of v. */
static int64_t sext(uint64_t v, int bits)
{
  return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Is a type signed? */
static int is_signed(int type) { return type >= 0 && lpx_types[type].kind == 'S'; }

/* --------------------------------------------------------------- scalar */

/* The byte or half a scalar selector names (none: the word), extended. */
static int64_t part(uint64_t v, int64_t sel, int s)
{
  uint32_t x = (uint32_t)v;
  if (!sel) return s ? (int64_t)(int32_t)x : (int64_t)x;
  int bits = LPX_SEL_HALF(sel) ? 16 : 8;
  uint64_t e = (x >> (LPX_SEL_DIGIT(sel, 0) * bits)) & ((1u << bits) - 1);
  return s ? sext(e, bits) : (int64_t)e;
}

/* Clamp v to a signed or unsigned field of bits. */
static i128 clamp(i128 v, int bits, int s)
{
  i128 lo = s ? -((i128)1 << (bits - 1)) : 0, hi = s ? ((i128)1 << (bits - 1)) - 1 : ((i128)1 << bits) - 1;
  return v < lo ? lo : v > hi ? hi : v;
}

/* The primary operation of a scalar video row on ta, tb: exact in 64 bits
 * (a shift's result wraps at 64), except that vadd/vsub without .sat wrap
 * to 32 bits and sign-extend, as ptxas's code does. */
static i128 scalar_op(const emu_inst *in, i128 ta, i128 tb)
{
  int clampmode = in->mod[LPX_GB_SHFMODE] == LPX_SHFMODE_CLAMP, sat = in->mod[LPX_GB_SAT] != 0;
  switch (in->op) {
  case LPX_OP_VADD: return sat ? ta + tb : (int32_t)(uint32_t)(ta + tb);
  case LPX_OP_VSUB: return sat ? ta - tb : (int32_t)(uint32_t)(ta - tb);
  case LPX_OP_VABSDIFF: return ta > tb ? ta - tb : tb - ta;
  case LPX_OP_VMIN: return ta < tb ? ta : tb;
  case LPX_OP_VMAX: return ta > tb ? ta : tb;
  case LPX_OP_VSHL: case LPX_OP_VSHR: {
    int n = (int)(clampmode ? (tb > 32 ? 32 : tb) : (tb & 31));
    return in->op == LPX_OP_VSHL ? (int64_t)((uint64_t)(int64_t)ta << n) : ta >> n;
  }
  default: {   /* vset, vset2, vset4 */
    switch (in->mod[LPX_GB_CMP]) {
    case LPX_CMP_EQ: return ta == tb;
    case LPX_CMP_NE: return ta != tb;
    case LPX_CMP_LT: return ta < tb;
    case LPX_CMP_LE: return ta <= tb;
    case LPX_CMP_GT: return ta > tb;
    default: return ta >= tb;
    }
  }
  }
}

/* .sat of a scalar row (ptxas's code): shifts clamp their 34-bit result to
 * the 32-bit range of the destination type; the other rows clamp a merged
 * byte or half to [0, max] (a negative value too becomes max) and a word
 * signed to s32, unsigned only below at 0. vadd/vsub's result wraps back
 * to 32 bits (sign-extended) afterwards, as does an unsigned shift's. */
static i128 scalar_sat(const emu_inst *in, i128 t, int64_t dsel, int sd)
{
  int shift = in->op == LPX_OP_VSHL || in->op == LPX_OP_VSHR, wrap = in->op == LPX_OP_VADD || in->op == LPX_OP_VSUB;
  if (shift) {
    t = sext((uint64_t)t & ((1ull << 34) - 1), 34);
    return sd ? clamp(t, 32, 1) : (i128)(int32_t)(uint32_t)clamp(t, 32, 0);
  }
  if (dsel) {
    int bits = LPX_SEL_HALF(dsel) ? 16 : 8;
    i128 mx = sd ? ((i128)1 << (bits - 1)) - 1 : ((i128)1 << bits) - 1;
    return t >= 0 && t <= mx ? t : mx;
  }
  if (sd) return clamp(t, 32, 1);
  if (t < 0) t = 0;
  return wrap ? (i128)(int32_t)(uint32_t)t : t;
}

/* The secondary operation (min/max compare in 64 bits, c extended by the
 * destination's sign), or the merge of t into c at dsel: the low byte or
 * half goes to its place, except that .h1 takes t's own bits 16-31. */
static uint32_t scalar_finish(const emu_inst *in, i128 t, uint64_t cv, int64_t dsel, int sd)
{
  i128 c = sd ? (i128)(int32_t)cv : (i128)(uint32_t)cv;
  uint64_t ut = (uint64_t)(int64_t)t, uc = (uint64_t)(int64_t)c;
  switch (in->mod[LPX_GB_VSECOP]) {
  case LPX_VSECOP_ADD: return (uint32_t)(t + c);
  case LPX_VSECOP_MIN: return (uint32_t)(sd ? (t < c ? t : c) : (ut < uc ? ut : uc));
  case LPX_VSECOP_MAX: return (uint32_t)(sd ? (t > c ? t : c) : (ut > uc ? ut : uc));
  default: break;
  }
  if (!dsel) return (uint32_t)t;
  int bits = LPX_SEL_HALF(dsel) ? 16 : 8, at = LPX_SEL_DIGIT(dsel, 0) * bits;
  uint32_t fm = (uint32_t)((1ull << bits) - 1) << at;
  uint32_t part = bits == 16 && at == 16 ? (uint32_t)t : (uint32_t)t << at;
  return (part & fm) | ((uint32_t)cv & ~fm);
}

/* vadd vsub vabsdiff vmin vmax vshl vshr vset: select and extend, operate,
 * saturate, then the secondary operation or the merge. vset's result is
 * unsigned and its secondary operation takes c with the sign of .atype. */
HANDLER(op_vscalar)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = in->nops > 3 ? D(3) : NULL;
  int vset = in->op == LPX_OP_VSET, shift = in->op == LPX_OP_VSHL || in->op == LPX_OP_VSHR;
  int sa = is_signed(vset ? in->type : in->type2), sb = !shift && is_signed(vset ? in->type2 : in->type3);
  int sd = is_signed(in->type), sat = in->mod[LPX_GB_SAT] != 0;
  int64_t dsel = SEL(0), asel = SEL(1), bsel = SEL(2);
  EMU_EACH(m, {
    i128 t = scalar_op(in, part(a[l], asel, sa), part(b[l], bsel, sb));
    if (sat) t = scalar_sat(in, t, dsel, sd);
    d[l] = scalar_finish(in, t, c ? c[l] : 0, dsel, sd);
  });
  return 0;
}

/* vmad (ptxas's code): the selected parts as 32-bit values multiply signed
 * (a full .u32 word above 2^31 counts as negative), c sign-extended; the
 * product or c negated, or plus one with .po; .shr7/.shr15 shift the
 * 64-bit sum, arithmetically when any input is signed or negated (then
 * .sat clamps to s32), else logically (then .sat clamps to u32). */
HANDLER(op_vmad)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  int sa = is_signed(in->type2), sb = is_signed(in->type3), sat = in->mod[LPX_GB_SAT] != 0;
  int an = EMU_OP(w, in, 1)->neg, bn = EMU_OP(w, in, 2)->neg, cn = EMU_OP(w, in, 3)->neg, po = in->mod[LPX_GB_VPO] != 0;
  int sfinal = sa || sb || (an ^ bn) || cn;
  int shift = in->mod[LPX_GB_VSCALE] == LPX_VSCALE_SHR7 ? 7 : in->mod[LPX_GB_VSCALE] == LPX_VSCALE_SHR15 ? 15 : 0;
  int64_t asel = SEL(1), bsel = SEL(2);
  EMU_EACH(m, {
    int64_t p = (int64_t)(int32_t)(uint32_t)part(a[l], asel, sa) * (int32_t)(uint32_t)part(b[l], bsel, sb);
    int64_t cv = (int32_t)(uint32_t)c[l];
    uint64_t t = po ? (uint64_t)p + (uint64_t)cv + 1 : (an ^ bn) ? (uint64_t)cv - (uint64_t)p
               : cn ? (uint64_t)p - (uint64_t)cv : (uint64_t)p + (uint64_t)cv;
    int64_t r = sfinal ? (int64_t)t >> shift : (int64_t)(t >> shift);
    if (sat) r = (int64_t)(sfinal ? clamp(r, 32, 1) : clamp(r, 32, 0));
    d[l] = (uint32_t)r;
  });
  return 0;
}

/* ----------------------------------------------------------------- SIMD */

/* The decoded operands of a SIMD row: per element, the source part of a
 * and of b (an index into {b, a}), and whether the mask selects it. */
typedef struct simd { int n, bits, ai[4], bi[4], on[4]; } simd;

/* Element indices of a SIMD selector, or the default (a .h10/.b3210, b .h32/.b7654). */
static void simd_sel(int64_t sel, int n, int base, int *idx)
{
  for (int i = 0; i < n; i++) idx[i] = sel ? LPX_SEL_DIGIT(sel, n - 1 - i) : base + i;
}

/* Decode a SIMD instruction's selectors and mask. */
static simd simd_decode(const emu_warp *w, const emu_inst *in, int n)
{
  simd s = { n, 32 / n, { 0 }, { 0 }, { 0 } };
  int64_t mask = SEL(0);
  simd_sel(SEL(1), n, 0, s.ai);
  simd_sel(SEL(2), n, n, s.bi);
  for (int i = 0; i < n; i++) s.on[i] = !mask;
  for (int k = 0; mask && k < LPX_SEL_COUNT(mask); k++) s.on[LPX_SEL_DIGIT(mask, k)] = 1;
  return s;
}

/* Element idx of the 64-bit {b, a}, extended. */
static int64_t pick_elem(uint64_t ba, int idx, int bits, int sgn)
{
  uint64_t e = (ba >> (idx * bits)) & ((1ull << bits) - 1);
  return sgn ? sext(e, bits) : (int64_t)e;
}

/* The per-element operation of a SIMD row. */
static int64_t simd_op(const emu_inst *in, int64_t x, int64_t y)
{
  switch (in->op) {
  case LPX_OP_VADD2: case LPX_OP_VADD4: return x + y;
  case LPX_OP_VSUB2: case LPX_OP_VSUB4: return x - y;
  case LPX_OP_VAVRG2: case LPX_OP_VAVRG4: return x + y >= 0 ? (x + y + 1) >> 1 : (x + y) >> 1;
  case LPX_OP_VABSDIFF2: case LPX_OP_VABSDIFF4: return x > y ? x - y : y - x;
  case LPX_OP_VMIN2: case LPX_OP_VMIN4: return x < y ? x : y;
  case LPX_OP_VMAX2: case LPX_OP_VMAX4: return x > y ? x : y;
  default: return scalar_op(in, x, y) != 0;   /* vset2 / vset4 */
  }
}

/* vop2 / vop4 / vset2 / vset4: per element of the selected halves or bytes
 * of {b, a}, the operation, .sat to the element's range; then the masked
 * results merged over c's elements, or (.add) summed into c. */
HANDLER(op_vsimd)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  int vset = in->op == LPX_OP_VSET2 || in->op == LPX_OP_VSET4;
  simd s = simd_decode(w, in, lpx_rules_video_lanes(in->op));
  int sa = is_signed(vset ? in->type : in->type2), sb = is_signed(vset ? in->type2 : in->type3);
  int sd = !vset && is_signed(in->type), sat = in->mod[LPX_GB_SAT] != 0, acc = in->mod[LPX_GB_VSECOP] != 0;
  uint32_t em = (uint32_t)((1ull << s.bits) - 1);
  EMU_EACH(m, {
    uint64_t ba = (uint64_t)(uint32_t)b[l] << 32 | (uint32_t)a[l];
    uint32_t r = acc ? (uint32_t)c[l] : 0;
    for (int i = 0; i < s.n; i++) {
      int64_t t = simd_op(in, pick_elem(ba, s.ai[i], s.bits, sa), pick_elem(ba, s.bi[i], s.bits, sb));
      if (sat) t = (int64_t)clamp(t, s.bits, sd);
      if (acc) r += s.on[i] ? (uint32_t)t : 0;
      else r |= ((s.on[i] ? (uint32_t)t : (uint32_t)c[l] >> (i * s.bits)) & em) << (i * s.bits);
    }
    d[l] = r;
  });
  return 0;
}

/* -------------------------------------------------------------- picking */

/* Handler for a video row. */
emu_fn lpx_emu_pick_video(const emu_inst *in)
{
  if (in->op == LPX_OP_VMAD) return op_vmad;
  return lpx_rules_video_lanes(in->op) == 1 ? op_vscalar : op_vsimd;
}
