/* Extended integer handlers: madc, fns, dp4a, dp2a, bmsk, szext,
 * cvt.pack.sat, lop3 with a predicate result, and add/min/max on
 * .u16x2/.s16x2. Each follows the PTX ISA's pseudo-code; values sit in
 * the lane slots zero-extended from 32 (or 64) bits. */
#include "emu.h"

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* Sign-extend the low bits of v. */
static int64_t sext(uint64_t v, int bits)
{
  return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Is a type signed? */
static int is_signed(int type) { return type >= 0 && lpx_types[type].kind == 'S'; }

/* ----------------------------------------------------------------- madc */

/* madc.lo/.hi{.cc}: the low or high half of a * b, plus c, plus the carry
 * in; .cc writes the carry out of that addition. */
HANDLER(op_madc)
{
  uint64_t *d = D(0), *cf = EMU_R(w, w->p->cc_slot);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  int bits = lpx_types[in->type].bits, s = is_signed(in->type), hi = in->mod[LPX_GB_MULMODE] == LPX_MULMODE_HI;
  int cc = in->mod[LPX_GB_CC] != 0;
  uint64_t mk = bits == 64 ? ~0ull : 0xffffffffull;
  EMU_EACH(m, {
    unsigned __int128 p = s ? (unsigned __int128)((__int128)sext(a[l], bits) * (__int128)sext(b[l], bits))
                            : (unsigned __int128)(a[l] & mk) * (b[l] & mk);
    uint64_t part = (uint64_t)(hi ? p >> bits : p) & mk;
    unsigned __int128 r = (unsigned __int128)part + (c[l] & mk) + (cf[l] & 1);
    if (cc) cf[l] = (uint64_t)(r >> bits) & 1;
    d[l] = (uint64_t)r & mk;
  });
  return 0;
}

/* ------------------------------------------------------------------ fns */

/* fns.b32: the position of the |offset|-th set bit of mask from base
 * (upwards for a positive offset, downwards for a negative one; offset 0:
 * base itself if set), 0xffffffff when there is none. A base above 31 is
 * undefined in the ISA: reported. */
HANDLER(op_fns)
{
  uint64_t *d = D(0);
  const uint64_t *mask = D(1), *base = D(2), *off = D(3);
  EMU_EACH(m, {
    uint32_t mk = (uint32_t)mask[l], pos = (uint32_t)base[l];
    int32_t o = (int32_t)off[l];
    if (pos > 31) return lpx_emu_fail(w, in, l, "fns base %u is above 31, which the ISA leaves undefined", pos);
    uint32_t r = 0xffffffffu;
    if (o == 0) r = (mk >> pos & 1) ? pos : r;
    for (int64_t count = o < 0 ? -(int64_t)o - 1 : (int64_t)o - 1, p = pos; o != 0 && p >= 0 && p < 32; p += o > 0 ? 1 : -1) {
      if (!(mk >> p & 1)) continue;
      if (count-- == 0) { r = (uint32_t)p; break; }
    }
    d[l] = r;
  });
  return 0;
}

/* ------------------------------------------------------ dot products */

/* Element k (bits wide) of a 32-bit value, sign-extended when s. */
static int64_t elem(uint64_t v, int k, int bits, int s)
{
  uint64_t e = (v >> (k * bits)) & ((1ull << bits) - 1);
  return s ? sext(e, bits) : (int64_t)e;
}

/* dp4a.atype.btype: c + the sum of the four byte products. */
HANDLER(op_dp4a)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  int sa = is_signed(in->type), sb = is_signed(in->type2);
  EMU_EACH(m, {
    int64_t acc = (int64_t)(uint32_t)c[l];
    for (int k = 0; k < 4; k++) acc += elem(a[l], k, 8, sa) * elem(b[l], k, 8, sb);
    d[l] = (uint32_t)acc;
  });
  return 0;
}

/* dp2a.lo/.hi.atype.btype: c + a's two halves times bytes 0-1 (.lo) or 2-3 (.hi) of b. */
HANDLER(op_dp2a)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  int sa = is_signed(in->type), sb = is_signed(in->type2), first = in->mod[LPX_GB_MULMODE] == LPX_MULMODE_HI ? 2 : 0;
  EMU_EACH(m, {
    int64_t acc = (int64_t)(uint32_t)c[l];
    for (int k = 0; k < 2; k++) acc += elem(a[l], k, 16, sa) * elem(b[l], first + k, 8, sb);
    d[l] = (uint32_t)acc;
  });
  return 0;
}

/* ------------------------------------------------------- bmsk / szext */

/* bmsk.clamp/.wrap.b32: b bits set from bit a (the ISA's pseudo-code). */
HANDLER(op_bmsk)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  int clamp = in->mod[LPX_GB_SHFMODE] == LPX_SHFMODE_CLAMP;
  EMU_EACH(m, {
    uint32_t pos = (uint32_t)a[l], width = (uint32_t)b[l], a1 = pos & 31, b1 = width & 31;
    uint32_t mask0 = ~0u << a1, mask1 = a1 + b1 >= 32 ? 0 : ~0u << (a1 + b1);
    int over = a1 + b1 >= 32;
    if (clamp && pos >= 32) { mask0 = 0; over = 1; }
    if (clamp && width >= 32) over = 1;
    if (over) mask1 = 0; else if (b1 == 0) mask1 = ~0u;
    d[l] = mask0 & ~mask1;
  });
  return 0;
}

/* szext.clamp/.wrap.u32/.s32: zero- or sign-extend the low b bits of a. */
HANDLER(op_szext)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  int clamp = in->mod[LPX_GB_SHFMODE] == LPX_SHFMODE_CLAMP, s = in->type == LPX_T_S32;
  EMU_EACH(m, {
    uint32_t x = (uint32_t)a[l], n = (uint32_t)b[l], b1 = n & 31;
    int big = clamp && n >= 32;
    uint32_t mask = big ? 0 : ~0u << b1;
    int sign = !big && b1 && s ? (int)(x >> ((b1 - 1) & 31) & 1) : 0;
    d[l] = (x & ~mask) | (sign ? mask : 0);
  });
  return 0;
}

/* ------------------------------------------------------------ cvt.pack */

/* Clamp v to a signed or unsigned field of bits. */
static uint32_t sat_field(int64_t v, int bits, int s)
{
  int64_t lo = s ? -(1ll << (bits - 1)) : 0, hi = s ? (1ll << (bits - 1)) - 1 : (1ll << bits) - 1;
  return (uint32_t)(v < lo ? lo : v > hi ? hi : v) & (uint32_t)((1ull << bits) - 1);
}

/* Bits and signedness of cvt.pack's convert type. */
static void pack_type(const emu_inst *in, int *bits, int *s)
{
  static const uint8_t sub_bits[LPX_PACKT__END] = { [LPX_PACKT_U4] = 4, [LPX_PACKT_S4] = 4, [LPX_PACKT_U2] = 2, [LPX_PACKT_S2] = 2 };
  int pk = in->mod[LPX_GB_PACKT];
  *bits = pk ? sub_bits[pk] : lpx_types[in->type].bits;
  *s = pk ? (pk == LPX_PACKT_S4 || pk == LPX_PACKT_S2) : is_signed(in->type);
}

/* cvt.pack.sat: b saturated into the low field, a into the next, and (for
 * the fields under 16 bits) c shifted in above them. */
HANDLER(op_cvt_pack)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = in->nops > 3 ? D(3) : NULL;
  int bits, s;
  pack_type(in, &bits, &s);
  EMU_EACH(m, {
    uint32_t r = sat_field((int32_t)b[l], bits, s) | sat_field((int32_t)a[l], bits, s) << bits;
    if (c) r |= (uint32_t)((uint64_t)(uint32_t)c[l] << (2 * bits));
    d[l] = r;
  });
  return 0;
}

/* ---------------------------------------------------------------- lop3 */

/* lop3.or/.and.b32 d|p, a, b, c, immLut, q: d as lop3, p = (d != 0) op q. */
HANDLER(op_lop3_pred)
{
  uint64_t *d = D(1), *p = D(2);
  const uint64_t *a = D(3), *b = D(4), *c = D(5), *t = D(6), *q = D(7);
  uint64_t qneg = EMU_OP(w, in, 7)->neg;
  int and_ = in->mod[LPX_GB_BOOL] == LPX_BOOL_AND;
  EMU_EACH(m, {
    uint32_t x = (uint32_t)a[l], y = (uint32_t)b[l], z = (uint32_t)c[l], lut = (uint32_t)t[l] & 0xff, r = 0;
    for (int k = 0; k < 8; k++)
      if (lut >> k & 1) r |= ((k & 4) ? x : ~x) & ((k & 2) ? y : ~y) & ((k & 1) ? z : ~z);
    uint64_t qv = (q[l] ^ qneg) & 1, nz = r != 0;
    d[l] = r;
    p[l] = and_ ? (nz & qv) : (nz | qv);
  });
  return 0;
}

/* ------------------------------------------------------------- 16x2 */

/* add/min/max(.relu) on .u16x2/.s16x2: each half on its own, wrapping. */
HANDLER(op_16x2)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  int s = in->type == LPX_T_S16X2, op = in->op, relu = in->mod[LPX_GB_RELU] != 0;
  EMU_EACH(m, {
    uint32_t r = 0;
    for (int k = 0; k < 2; k++) {
      int64_t x = elem(a[l], k, 16, s), y = elem(b[l], k, 16, s);
      int64_t v = op == LPX_OP_ADD ? x + y : op == LPX_OP_MIN ? (x < y ? x : y) : (x > y ? x : y);
      if (relu && v < 0) v = 0;
      r |= ((uint32_t)v & 0xffff) << (16 * k);
    }
    d[l] = r;
  });
  return 0;
}

/* -------------------------------------------------------------- picking */

/* The handler of this family's rows, and of the forms of shared rows it
 * serves (16x2 add/min/max, lop3 with .or/.and); NULL otherwise. */
emu_fn lpx_emu_pick_intx(const emu_inst *in)
{
  int x2 = in->type == LPX_T_U16X2 || in->type == LPX_T_S16X2;
  switch (in->op) {
  case LPX_OP_MADC: return op_madc;
  case LPX_OP_FNS: return op_fns;
  case LPX_OP_DP4A: return op_dp4a;
  case LPX_OP_DP2A: return op_dp2a;
  case LPX_OP_BMSK: return op_bmsk;
  case LPX_OP_SZEXT: return op_szext;
  case LPX_OP_CVTPACK: return op_cvt_pack;
  case LPX_OP_LOP3: return in->mod[LPX_GB_BOOL] ? op_lop3_pred : NULL;
  case LPX_OP_ADD: case LPX_OP_MIN: case LPX_OP_MAX: return x2 ? op_16x2 : NULL;
  default: return NULL;
  }
}
