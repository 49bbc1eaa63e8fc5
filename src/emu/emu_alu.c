/* Integer and bit ALU handlers, mov, comparisons and selects. Values sit
 * in 64-bit lane slots zero-extended from their type's width; handlers
 * read with a cast to the instruction's type, so wrap-around, .hi/.lo and
 * sign handling are those of C's fixed-width arithmetic, made explicit
 * where C would be undefined (shifts past the width, INT_MIN / -1; div and
 * rem by zero give all ones, as the code ptxas emits for them does).
 * Float compares (setp, set, slct) flush subnormal inputs under .ftz and
 * compare f16x2/bf16x2 half by half. */
#include "emu.h"
#include <limits.h>
#include <math.h>

#pragma GCC diagnostic ignored "-Wtype-limits"

/* ------------------------------------------------------------- helpers */

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define ARGS3 uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2)
#define ARGS2 uint64_t *d = D(0); const uint64_t *a = D(1)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* Type classes for the integer tables: u16 s16 u32 s32 u64 s64. */
static int int_index(int type)
{
  switch (type) {
  case LPX_T_U16: case LPX_T_B16: return 0;
  case LPX_T_S16: return 1;
  case LPX_T_U32: case LPX_T_B32: return 2;
  case LPX_T_S32: return 3;
  case LPX_T_U64: case LPX_T_B64: return 4;
  case LPX_T_S64: return 5;
  default: return -1;
  }
}

/* Mask of a type's width (all ones for 64 bits and wider). */
static uint64_t width_mask(int type)
{
  int bits = type >= 0 ? lpx_types[type].bits : 64;
  return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

/* Sign-extend the low bits of v. */
static int64_t sext(uint64_t v, int bits)
{
  return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Is a type one the float family computes (scalar or packed halves)? */
static int is_float(int t)
{
  return t == LPX_T_F32 || t == LPX_T_F64 || t == LPX_T_F16 || t == LPX_T_F16X2 || t == LPX_T_BF16 || t == LPX_T_BF16X2;
}

/* ------------------------------------------- binary ops, one per int type */

#define DEF_BIN(name, T, U, expr) \
  HANDLER(name) { typedef T ty; typedef U uty; ARGS3; \
    EMU_EACH(m, { ty x = (ty)a[l], y = (ty)b[l]; d[l] = (uint64_t)(uty)(expr); }); return 0; }
#define INT6(X, op, expr) \
  X(op##_u16, uint16_t, uint16_t, expr) X(op##_s16, int16_t, uint16_t, expr) \
  X(op##_u32, uint32_t, uint32_t, expr) X(op##_s32, int32_t, uint32_t, expr) \
  X(op##_u64, uint64_t, uint64_t, expr) X(op##_s64, int64_t, uint64_t, expr)
#define TABLE6(op) { op##_u16, op##_s16, op##_u32, op##_s32, op##_u64, op##_s64 }

INT6(DEF_BIN, add, (uty)x + (uty)y)
INT6(DEF_BIN, sub, (uty)x - (uty)y)
INT6(DEF_BIN, mullo, (uty)x * (uty)y)
INT6(DEF_BIN, and, x & y)
INT6(DEF_BIN, or, x | y)
INT6(DEF_BIN, xor, x ^ y)
INT6(DEF_BIN, min, x < y ? x : y)
INT6(DEF_BIN, max, x > y ? x : y)
INT6(DEF_BIN, div, y == 0 ? (ty)~(uty)0 : (((ty)-1 < 0) && y == (ty)-1) ? (ty)(0 - (uty)x) : x / y)
INT6(DEF_BIN, rem, y == 0 ? (ty)~(uty)0 : (((ty)-1 < 0) && y == (ty)-1) ? 0 : x % y)

static const emu_fn t_add[6] = TABLE6(add), t_sub[6] = TABLE6(sub), t_mullo[6] = TABLE6(mullo);
static const emu_fn t_and[6] = TABLE6(and), t_or[6] = TABLE6(or), t_xor[6] = TABLE6(xor);
static const emu_fn t_min[6] = TABLE6(min), t_max[6] = TABLE6(max);
static const emu_fn t_div[6] = TABLE6(div), t_rem[6] = TABLE6(rem);

/* mad.lo: d = a * b + c in the type's width. */
#define DEF_MADLO(name, T, U, unused) HANDLER(name) { ARGS3; const uint64_t *c = D(3); \
  EMU_EACH(m, d[l] = (uint64_t)(U)((U)(T)a[l] * (U)(T)b[l] + (U)(T)c[l])); return 0; }
INT6(DEF_MADLO, madlo, 0)
static const emu_fn t_madlo[6] = TABLE6(madlo);

/* --------------------------------------------------- hi / wide / sat / carry */

/* Full product of a and b as signed or unsigned 128 bits. */
static unsigned __int128 product(uint64_t a, uint64_t b, int type)
{
  int bits = lpx_types[type].bits;
  if (lpx_types[type].kind == 'S') return (unsigned __int128)((__int128)sext(a, bits) * (__int128)sext(b, bits));
  uint64_t mk = width_mask(type);
  return (unsigned __int128)(a & mk) * (b & mk);
}

/* Signed saturation of v to 32 bits. */
static uint64_t sat32(__int128 v)
{
  return (uint32_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v);
}

/* mul/mad with .hi, .wide, .sat or .cc: the general integer multiply path. */
HANDLER(mul_general)
{
  ARGS3;
  int type = in->type, bits = lpx_types[type].bits, mode = in->mod[LPX_GB_MULMODE], mad = in->op == LPX_OP_MAD;
  int sat = in->mod[LPX_GB_SAT] != 0, cc = in->mod[LPX_GB_CC] != 0;
  const uint64_t *c = mad ? D(3) : NULL;
  uint64_t *carry = EMU_R(w, w->p->cc_slot);
  int outbits = mode == LPX_MULMODE_WIDE ? 2 * bits : bits;
  uint64_t omask = outbits >= 64 ? ~0ull : (1ull << outbits) - 1;
  EMU_EACH(m, {
    unsigned __int128 p = product(a[l], b[l], type);
    if (mode == LPX_MULMODE_HI) p = lpx_types[type].kind == 'S' ? (unsigned __int128)((__int128)p >> bits) : p >> bits;
    __int128 addend = !mad ? 0 : lpx_types[type].kind == 'S' ? (__int128)sext(c[l], outbits) : (__int128)(c[l] & omask);
    unsigned __int128 r = p + (unsigned __int128)addend;
    if (cc) carry[l] = (uint64_t)(((p & omask) + (unsigned __int128)((uint64_t)addend & omask)) >> outbits) & 1;
    d[l] = sat && bits == 32 ? sat32((__int128)sext((uint64_t)r, 64)) & omask : (uint64_t)r & omask;
  });
  return 0;
}

/* add/sub with .sat (s32) or .cc, and addc/subc reading the carry. */
HANDLER(addsub_general)
{
  ARGS3;
  int type = in->type, bits = lpx_types[type].bits;
  int sub = in->op == LPX_OP_SUB || in->op == LPX_OP_SUBC, use_c = in->op == LPX_OP_ADDC || in->op == LPX_OP_SUBC;
  int sat = in->mod[LPX_GB_SAT] != 0, cc = in->mod[LPX_GB_CC] != 0;
  uint64_t mk = width_mask(type), *carry = EMU_R(w, w->p->cc_slot);
  EMU_EACH(m, {
    unsigned __int128 x = a[l] & mk, y = b[l] & mk, ci = use_c ? (carry[l] & 1) : 0, r;
    /* Subtraction is x + ~y + 1 (borrow-in as carry: subc uses !CC.CF). */
    if (sub) r = x + ((~y) & mk) + (use_c ? 1 - ci : 1); else r = x + y + ci;
    if (cc) carry[l] = sub ? !((r >> bits) & 1) : (uint64_t)(r >> bits) & 1;
    if (sat) r = sat32((__int128)sext(a[l], 32) + (sub ? -(__int128)sext(b[l], 32) : (__int128)sext(b[l], 32)));
    d[l] = (uint64_t)r & mk;
  });
  return 0;
}

/* mul24 / mad24: 24-bit operands, .lo or .hi of the 48-bit product;
 * mad24.hi.sat.s32 clamps the 32-bit signed addition. */
HANDLER(mul24)
{
  ARGS3;
  int s = in->type == LPX_T_S32, hi = in->mod[LPX_GB_MULMODE] == LPX_MULMODE_HI, mad = in->op == LPX_OP_MAD24;
  int sat = mad && in->mod[LPX_GB_SAT] != 0;
  const uint64_t *c = mad ? D(3) : NULL;
  EMU_EACH(m, {
    int64_t x = s ? sext(a[l], 24) : (int64_t)(a[l] & 0xffffff), y = s ? sext(b[l], 24) : (int64_t)(b[l] & 0xffffff);
    int64_t p = x * y;
    uint32_t r = hi ? (uint32_t)((uint64_t)p >> 16) : (uint32_t)p;
    if (sat) d[l] = (uint32_t)sat32((__int128)(int32_t)r + (int32_t)(uint32_t)c[l]);
    else d[l] = (uint32_t)(r + (mad ? (uint32_t)c[l] : 0));
  });
  return 0;
}

/* min.relu / max.relu (s16x2 aside): the signed result clamped at 0. */
HANDLER(minmax_relu)
{
  ARGS3;
  int bits = lpx_types[in->type].bits, mx = in->op == LPX_OP_MAX;
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, { int64_t x = sext(a[l], bits), y = sext(b[l], bits), r = mx ? (x > y ? x : y) : (x < y ? x : y);
                d[l] = (uint64_t)(r < 0 ? 0 : r) & mk; });
  return 0;
}

/* ------------------------------------------------------------ unary ops */

HANDLER(op_abs) { ARGS2; int bits = lpx_types[in->type].bits; uint64_t mk = width_mask(in->type);
  EMU_EACH(m, { int64_t x = sext(a[l], bits); d[l] = (uint64_t)(x < 0 ? -(uint64_t)x : (uint64_t)x) & mk; }); return 0; }
HANDLER(op_neg) { ARGS2; uint64_t mk = width_mask(in->type); EMU_EACH(m, d[l] = (0 - a[l]) & mk); return 0; }
HANDLER(op_not) { ARGS2; uint64_t mk = in->type == LPX_T_PRED ? 1 : width_mask(in->type); EMU_EACH(m, d[l] = ~a[l] & mk); return 0; }
HANDLER(op_cnot) { ARGS2; uint64_t mk = width_mask(in->type); EMU_EACH(m, d[l] = (a[l] & mk) == 0); return 0; }
HANDLER(op_popc) { ARGS2; uint64_t mk = width_mask(in->type); EMU_EACH(m, d[l] = (uint64_t)__builtin_popcountll(a[l] & mk)); return 0; }
HANDLER(op_clz) { ARGS2; int bits = lpx_types[in->type].bits; uint64_t mk = width_mask(in->type);
  EMU_EACH(m, { uint64_t x = a[l] & mk; d[l] = x ? (uint64_t)(__builtin_clzll(x) - (64 - bits)) : (uint64_t)bits; }); return 0; }

/* Bit reversal in the type's width. */
HANDLER(op_brev)
{
  ARGS2;
  int bits = lpx_types[in->type].bits;
  EMU_EACH(m, { uint64_t x = a[l], r = 0; for (int i = 0; i < bits; i++) r |= ((x >> i) & 1) << (bits - 1 - i); d[l] = r; });
  return 0;
}

/* bfind: position of the most significant non-sign bit; .shiftamt counts from the top. */
HANDLER(op_bfind)
{
  ARGS2;
  int bits = lpx_types[in->type].bits, s = lpx_types[in->type].kind == 'S', amt = in->mod[LPX_GB_SHIFTAMT] != 0;
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, {
    uint64_t x = a[l] & mk;
    if (s && (x >> (bits - 1) & 1)) x = ~x & mk;
    uint32_t r = x ? (uint32_t)(63 - __builtin_clzll(x)) : 0xffffffffu;
    if (amt && r != 0xffffffffu) r = (uint32_t)bits - 1 - r;
    d[l] = r;
  });
  return 0;
}

/* ------------------------------------------------------------- shifts */

/* shl: amounts past the width give 0. */
HANDLER(op_shl)
{
  ARGS3;
  int bits = lpx_types[in->type].bits;
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, { uint32_t s = (uint32_t)b[l]; d[l] = s >= (uint32_t)bits ? 0 : (a[l] << s) & mk; });
  return 0;
}

/* shr: logical for u/b types, arithmetic for s types; amounts clamp to the width. */
HANDLER(op_shr)
{
  ARGS3;
  int bits = lpx_types[in->type].bits, s = lpx_types[in->type].kind == 'S';
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, {
    uint32_t n = (uint32_t)b[l];
    if (n > (uint32_t)bits) n = (uint32_t)bits;
    d[l] = s ? (uint64_t)(sext(a[l], bits) >> (n >= 64 ? 63 : n)) & mk : (n >= 64 ? 0 : ((a[l] & mk) >> n));
  });
  return 0;
}

/* Fast shl/shr for 32-bit registers (the common case in address math). */
HANDLER(shl_b32) { ARGS3; EMU_EACH(m, { uint32_t s = (uint32_t)b[l]; d[l] = s > 31 ? 0 : (uint32_t)((uint32_t)a[l] << s); }); return 0; }
HANDLER(shr_u32) { ARGS3; EMU_EACH(m, { uint32_t s = (uint32_t)b[l]; d[l] = s > 31 ? 0 : (uint32_t)a[l] >> s; }); return 0; }

/* shf.l / shf.r with .clamp or .wrap: funnel shift of b:a. */
HANDLER(op_shf)
{
  ARGS3;
  const uint64_t *c = D(3);
  int left = in->mod[LPX_GB_SHFDIR] == LPX_SHFDIR_L, clamp = in->mod[LPX_GB_SHFMODE] == LPX_SHFMODE_CLAMP;
  EMU_EACH(m, {
    uint64_t v = ((uint64_t)(uint32_t)b[l] << 32) | (uint32_t)a[l];
    uint32_t n = (uint32_t)c[l];
    n = clamp ? (n > 32 ? 32 : n) : (n & 31);
    d[l] = left ? (uint32_t)((v << n) >> 32) : (uint32_t)(v >> n);
  });
  return 0;
}

/* ---------------------------------------------------------- bit fields */

/* bfe: extract len bits at pos; s types fill with the field's top bit. */
HANDLER(op_bfe)
{
  ARGS3;
  const uint64_t *c = D(3);
  int bits = lpx_types[in->type].bits, s = lpx_types[in->type].kind == 'S';
  uint64_t mk = width_mask(in->type);
  uint32_t msb = (uint32_t)bits - 1;
  EMU_EACH(m, {
    uint32_t pos = (uint32_t)b[l] & 0xff, len = (uint32_t)c[l] & 0xff;
    uint64_t x = a[l] & mk, r = 0;
    uint32_t top = pos + len - 1 < msb ? pos + len - 1 : msb;
    uint64_t sbit = (s && len) ? (x >> top) & 1 : 0;
    for (uint32_t i = 0; i < (uint32_t)bits; i++)
      r |= ((i < len && pos + i <= msb) ? (x >> (pos + i)) & 1 : sbit) << i;
    d[l] = r;
  });
  return 0;
}

/* bfi: insert the low len bits of a into b at pos. */
HANDLER(op_bfi)
{
  ARGS3;
  const uint64_t *c = D(3), *e = D(4);
  int bits = lpx_types[in->type].bits;
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, {
    uint32_t pos = (uint32_t)c[l] & 0xff, len = (uint32_t)e[l] & 0xff;
    uint64_t r = b[l] & mk;
    if (len && pos < (uint32_t)bits) {
      uint64_t fm = (len >= 64 ? ~0ull : (1ull << len) - 1) << pos;
      r = (r & ~fm) | ((a[l] << pos) & fm);
    }
    d[l] = r & mk;
  });
  return 0;
}

/* prmt: byte permute of {b, a} by selector c, with the mode variants. */
HANDLER(op_prmt)
{
  ARGS3;
  const uint64_t *c = D(3);
  int mode = in->mod[LPX_GB_PRMT];
  EMU_EACH(m, {
    uint64_t v = ((uint64_t)(uint32_t)b[l] << 32) | (uint32_t)a[l];
    uint32_t s = (uint32_t)c[l], r = 0, sel[4];
    for (int k = 0; k < 4; k++) sel[k] = (s >> (4 * k)) & 0xf;
    if (mode) {
      uint32_t n = s & 3;
      static const uint8_t tab[LPX_PRMT__END][4][4] = {
        [LPX_PRMT_F4E] = { {0,1,2,3},{1,2,3,4},{2,3,4,5},{3,4,5,6} },
        [LPX_PRMT_B4E] = { {0,7,6,5},{1,0,7,6},{2,1,0,7},{3,2,1,0} },
        [LPX_PRMT_RC8] = { {0,0,0,0},{1,1,1,1},{2,2,2,2},{3,3,3,3} },
        [LPX_PRMT_ECL] = { {0,1,2,3},{1,1,2,3},{2,2,2,3},{3,3,3,3} },
        [LPX_PRMT_ECR] = { {0,0,0,0},{0,1,1,1},{0,1,2,2},{0,1,2,3} },
        [LPX_PRMT_RC16] = { {0,1,0,1},{2,3,2,3},{0,1,0,1},{2,3,2,3} } };
      for (int k = 0; k < 4; k++) sel[k] = tab[mode][n][k];
    }
    for (int k = 0; k < 4; k++) {
      uint32_t byte = (uint32_t)(v >> (8 * (sel[k] & 7))) & 0xff;
      if (!mode && (sel[k] & 8)) byte = (byte & 0x80) ? 0xff : 0;
      r |= byte << (8 * k);
    }
    d[l] = r;
  });
  return 0;
}

/* lop3: any 3-input boolean function given by its truth table. */
HANDLER(op_lop3)
{
  ARGS3;
  const uint64_t *c = D(3), *t = D(4);
  EMU_EACH(m, {
    uint32_t x = (uint32_t)a[l], y = (uint32_t)b[l], z = (uint32_t)c[l], lut = (uint32_t)t[l] & 0xff, r = 0;
    for (int k = 0; k < 8; k++) {
      if (!(lut >> k & 1)) continue;
      r |= ((k & 4) ? x : ~x) & ((k & 2) ? y : ~y) & ((k & 1) ? z : ~z);
    }
    d[l] = r;
  });
  return 0;
}

/* sad: |a - b| + c. */
HANDLER(op_sad)
{
  ARGS3;
  const uint64_t *c = D(3);
  int bits = lpx_types[in->type].bits, s = lpx_types[in->type].kind == 'S';
  uint64_t mk = width_mask(in->type);
  EMU_EACH(m, {
    uint64_t x = a[l] & mk, y = b[l] & mk, diff;
    if (s) { int64_t p = sext(x, bits), q = sext(y, bits); diff = p > q ? (uint64_t)p - (uint64_t)q : (uint64_t)q - (uint64_t)p; }
    else diff = x > y ? x - y : y - x;
    d[l] = (diff + c[l]) & mk;
  });
  return 0;
}

/* ------------------------------------------------------------------ mov */

/* mov of a scalar: copy masked to the type's width. */
HANDLER(op_mov)
{
  ARGS2;
  uint64_t mk = in->type == LPX_T_PRED ? 1 : width_mask(in->type);
  EMU_EACH(m, d[l] = a[l] & mk);
  return 0;
}
HANDLER(mov_b32) { ARGS2; EMU_EACH(m, d[l] = (uint32_t)a[l]); return 0; }
HANDLER(mov_b64) { ARGS2; EMU_EACH(m, d[l] = a[l]); return 0; }

/* mov d, {a, b, ...}: pack elements of width bits/n; or unpack the reverse. */
HANDLER(mov_vec)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int bits = lpx_types[in->type].bits;
  if (o0->kind == EO_VEC) {                  /* unpack: {a, b} = s */
    int n = o0->reg, eb = bits / n;
    const uint64_t *s = D(n + 1);
    uint64_t em = eb >= 64 ? ~0ull : (1ull << eb) - 1;
    for (int k = 0; k < n; k++) { uint64_t *e = D(1 + k); EMU_EACH(m, e[l] = (s[l] >> (eb * k)) & em); }
    return 0;
  }
  int n = EMU_OP(w, in, 1)->reg, eb = bits / n;
  uint64_t *d = D(0), em = eb >= 64 ? ~0ull : (1ull << eb) - 1;
  EMU_EACH(m, d[l] = 0);
  for (int k = 0; k < n; k++) { const uint64_t *e = D(2 + k); EMU_EACH(m, d[l] |= (e[l] & em) << (eb * k)); }
  return 0;
}

/* ------------------------------------------------------ compare / select */

/* Half k of a float lane value of type as a double; ftz flushes an f32 or
 * f16 subnormal to zero (bf16 and f64 compares take no .ftz). */
static double float_at(int type, uint64_t v, int k, int ftz)
{
  switch (type) {
  case LPX_T_F32: { float f = emu_u2f(v); return ftz && fpclassify(f) == FP_SUBNORMAL ? 0.0 : f; }
  case LPX_T_F64: return emu_u2d(v);
  case LPX_T_F16: case LPX_T_F16X2: {
    uint16_t h = (uint16_t)(v >> (16 * k));
    return lpx_emu_f16_to_f32(ftz && !(h & 0x7c00) ? h & 0x8000 : h);
  }
  case LPX_T_BF16: case LPX_T_BF16X2: return lpx_emu_bf16_to_f32((uint16_t)(v >> (16 * k)));
  default: return 0;
  }
}

/* Evaluate a float comparison (an LPX_CMP_* value) on x, y. */
static int compare_float(int cmp, double x, double y)
{
  int nan = x != x || y != y;
  switch (cmp) {
  case LPX_CMP_EQ: return !nan && x == y; case LPX_CMP_NE: return !nan && x != y; case LPX_CMP_LT: return !nan && x < y;
  case LPX_CMP_LE: return !nan && x <= y; case LPX_CMP_GT: return !nan && x > y; case LPX_CMP_GE: return !nan && x >= y;
  case LPX_CMP_EQU: return nan || x == y; case LPX_CMP_NEU: return nan || x != y; case LPX_CMP_LTU: return nan || x < y;
  case LPX_CMP_LEU: return nan || x <= y; case LPX_CMP_GTU: return nan || x > y; case LPX_CMP_GEU: return nan || x >= y;
  case LPX_CMP_NUM: return !nan; case LPX_CMP_NAN: return nan;
  default: return 0;
  }
}

/* Evaluate a PTX comparison (an LPX_CMP_* value) on a, b (half k of a
 * packed float type; ftz: the row's .ftz). */
static int compare(int cmp, int type, uint64_t a, uint64_t b, int k, int ftz)
{
  if (is_float(type)) return compare_float(cmp, float_at(type, a, k, ftz), float_at(type, b, k, ftz));
  int bits = lpx_types[type].bits, s = lpx_types[type].kind == 'S';
  uint64_t mk = width_mask(type), ux = a & mk, uy = b & mk;
  int64_t sx = sext(a, bits), sy = sext(b, bits);
  switch (cmp) {
  case LPX_CMP_EQ: return ux == uy; case LPX_CMP_NE: return ux != uy;
  case LPX_CMP_LT: return s ? sx < sy : ux < uy; case LPX_CMP_LE: return s ? sx <= sy : ux <= uy;
  case LPX_CMP_GT: return s ? sx > sy : ux > uy; case LPX_CMP_GE: return s ? sx >= sy : ux >= uy;
  case LPX_CMP_LO: return ux < uy; case LPX_CMP_LS: return ux <= uy;
  case LPX_CMP_HI: return ux > uy; case LPX_CMP_HS: return ux >= uy;
  default: return 0;
  }
}

/* Combine with the optional .and/.or/.xor predicate (an LPX_BOOL_* value). */
static int combine(int boolop, int x, int c)
{
  return boolop == LPX_BOOL_AND ? x && c : boolop == LPX_BOOL_OR ? x || c : boolop == LPX_BOOL_XOR ? x ^ c : x;
}

/* setp (any type, .bool, p|q): the general path. For f16x2/bf16x2, p is
 * the low halves' result and q the high halves'; otherwise q = !t. */
HANDLER(setp_general)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int pipe = o0->kind == EO_VEC, base = pipe ? 3 : 1;
  uint64_t *p = D(pipe ? 1 : 0), *q = pipe ? D(2) : NULL;
  const uint64_t *a = D(base), *b = D(base + 1);
  const emu_op *co = in->mod[LPX_GB_BOOL] ? EMU_OP(w, in, base + 2) : NULL;
  const uint64_t *c = co ? EMU_R(w, co->reg) : NULL;
  int cmp = in->mod[LPX_GB_CMP], boolop = in->mod[LPX_GB_BOOL], type = in->type, ftz = in->mod[LPX_GB_FTZ] != 0;
  int x2 = type == LPX_T_F16X2 || type == LPX_T_BF16X2;
  EMU_EACH(m, {
    int x = compare(cmp, type, a[l], b[l], 0, ftz), cv = c ? (int)((c[l] & 1) ^ co->neg) : 0;
    p[l] = (uint64_t)combine(boolop, x, cv);
    if (q) q[l] = (uint64_t)combine(boolop, x2 ? compare(cmp, type, a[l], b[l], 1, ftz) : !x, cv);
  });
  return 0;
}

#define DEF_SETP(name, T, OP) HANDLER(name) { uint64_t *p = D(0); const uint64_t *a = D(1), *b = D(2); \
  EMU_EACH(m, p[l] = (T)a[l] OP (T)b[l]); return 0; }
#define SETP_CMPS(X, t, T) X(setp_lt_##t, T, <) X(setp_le_##t, T, <=) X(setp_gt_##t, T, >) X(setp_ge_##t, T, >=) \
  X(setp_eq_##t, T, ==) X(setp_ne_##t, T, !=)
SETP_CMPS(DEF_SETP, s32, int32_t)
SETP_CMPS(DEF_SETP, u32, uint32_t)
SETP_CMPS(DEF_SETP, s64, int64_t)
SETP_CMPS(DEF_SETP, u64, uint64_t)
/* Rows in int_index order from u32: u32, s32, u64, s64; columns by LPX_CMP_*. */
#define SETP_ROW(t) { [LPX_CMP_EQ] = setp_eq_##t, [LPX_CMP_NE] = setp_ne_##t, [LPX_CMP_LT] = setp_lt_##t, \
  [LPX_CMP_LE] = setp_le_##t, [LPX_CMP_GT] = setp_gt_##t, [LPX_CMP_GE] = setp_ge_##t }
static const emu_fn t_setp[4][LPX_CMP__END] = { SETP_ROW(u32), SETP_ROW(s32), SETP_ROW(u64), SETP_ROW(s64) };
#undef SETP_ROW

/* What set writes for true into a destination of type t (per half for a
 * packed type): 1.0 in a float format, all ones in an integer one. */
static uint64_t set_true(int t)
{
  switch (t) {
  case LPX_T_F32: return 0x3f800000u;
  case LPX_T_F16: case LPX_T_F16X2: return 0x3c00;
  case LPX_T_BF16: case LPX_T_BF16X2: return 0x3f80;
  default: return width_mask(t);
  }
}

/* set: d = cmp ? true : 0 with true from set_true; an f16x2/bf16x2 source
 * compares half by half into 16-bit halves (0xffff for an integer d). */
HANDLER(op_set)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  const emu_op *co = in->mod[LPX_GB_BOOL] ? EMU_OP(w, in, 3) : NULL;
  const uint64_t *c = co ? EMU_R(w, co->reg) : NULL;
  int st = in->type2, cmp = in->mod[LPX_GB_CMP], boolop = in->mod[LPX_GB_BOOL], ftz = in->mod[LPX_GB_FTZ] != 0;
  int x2 = st == LPX_T_F16X2 || st == LPX_T_BF16X2;
  uint64_t one = x2 ? (is_float(in->type) ? set_true(in->type) : 0xffff) : set_true(in->type);
  EMU_EACH(m, {
    int cv = c ? (int)((c[l] & 1) ^ co->neg) : 0;
    uint64_t r = 0;
    for (int k = 0; k <= x2; k++) r |= combine(boolop, compare(cmp, st, a[l], b[l], k, ftz), cv) ? one << (16 * k) : 0;
    d[l] = r;
  });
  return 0;
}

/* selp: d = c ? a : b (the predicate may be negated). */
HANDLER(op_selp)
{
  ARGS3;
  const emu_op *co = EMU_OP(w, in, 3);
  const uint64_t *c = EMU_R(w, co->reg);
  uint64_t mk = width_mask(in->type), neg = co->neg;
  EMU_EACH(m, d[l] = (((c[l] & 1) ^ neg) ? a[l] : b[l]) & mk);
  return 0;
}

/* slct: d = (c >= 0) ? a : b, c s32 or f32 (a NaN selects b; .ftz
 * flushes a subnormal c to a zero, which selects a). */
HANDLER(op_slct)
{
  ARGS3;
  const uint64_t *c = D(3);
  uint64_t mk = width_mask(in->type);
  int f = in->type2 == LPX_T_F32, ftz = in->mod[LPX_GB_FTZ] != 0;
  EMU_EACH(m, { int ge = f ? float_at(LPX_T_F32, c[l], 0, ftz) >= 0.0 : (int32_t)c[l] >= 0; d[l] = (ge ? a[l] : b[l]) & mk; });
  return 0;
}

/* Logic on predicates: and/or/xor of 0/1 values. */
HANDLER(pred_and) { ARGS3; EMU_EACH(m, d[l] = (a[l] ^ EMU_OP(w, in, 1)->neg) & (b[l] ^ EMU_OP(w, in, 2)->neg) & 1); return 0; }
HANDLER(pred_or) { ARGS3; EMU_EACH(m, d[l] = ((a[l] ^ EMU_OP(w, in, 1)->neg) | (b[l] ^ EMU_OP(w, in, 2)->neg)) & 1); return 0; }
HANDLER(pred_xor) { ARGS3; EMU_EACH(m, d[l] = ((a[l] ^ EMU_OP(w, in, 1)->neg) ^ (b[l] ^ EMU_OP(w, in, 2)->neg)) & 1); return 0; }
HANDLER(pred_mov) { ARGS2; uint64_t n = EMU_OP(w, in, 1)->neg; EMU_EACH(m, d[l] = (a[l] ^ n) & 1); return 0; }

/* ---------------------------------------------------------------- picking */

/* Fast setp handler when the form is a plain integer compare. */
static emu_fn pick_setp(const emu_inst *in, int ix)
{
  int cmp = in->mod[LPX_GB_CMP];
  if (in->mod[LPX_GB_BOOL] || ix < 2 || cmp >= LPX_CMP__END || !t_setp[ix - 2][cmp]) return setp_general;
  return in->nops == 3 ? t_setp[ix - 2][cmp] : setp_general;
}

/* Predicate-typed logic and mov. */
static emu_fn pick_pred(const emu_inst *in)
{
  switch (in->op) {
  case LPX_OP_AND: return pred_and;
  case LPX_OP_OR: return pred_or;
  case LPX_OP_XOR: return pred_xor;
  case LPX_OP_NOT: return op_not;
  case LPX_OP_MOV: return pred_mov;
  default: return NULL;
  }
}

/* mov: vector pack/unpack, or a scalar copy. */
static emu_fn pick_mov(const emu_inst *in)
{
  if (in->flags & EI_VEC) return mov_vec;
  if (in->type == LPX_T_PRED) return pred_mov;
  int bits = lpx_types[in->type].bits;
  return bits == 32 ? mov_b32 : bits == 64 ? mov_b64 : op_mov;
}

/* Handler for an integer / bit / move / compare row. */
static emu_fn pick_int(const emu_inst *in, int ix)
{
  int mm = in->mod[LPX_GB_MULMODE], cc = in->mod[LPX_GB_CC] != 0, sat = in->mod[LPX_GB_SAT] != 0;
  switch (in->op) {
  case LPX_OP_ADD: return ix < 0 ? NULL : (cc || sat) ? addsub_general : t_add[ix];
  case LPX_OP_SUB: return ix < 0 ? NULL : (cc || sat) ? addsub_general : t_sub[ix];
  case LPX_OP_ADDC: case LPX_OP_SUBC: return addsub_general;
  case LPX_OP_MUL: return ix < 0 ? NULL : (mm == LPX_MULMODE_HI || mm == LPX_MULMODE_WIDE || sat) ? mul_general : t_mullo[ix];
  case LPX_OP_MAD: return ix < 0 ? NULL : (mm == LPX_MULMODE_HI || mm == LPX_MULMODE_WIDE || sat || cc) ? mul_general : t_madlo[ix];
  case LPX_OP_MUL24: case LPX_OP_MAD24: return mul24;
  case LPX_OP_DIV: return ix < 0 ? NULL : t_div[ix];
  case LPX_OP_REM: return ix < 0 ? NULL : t_rem[ix];
  case LPX_OP_MIN: return ix < 0 ? NULL : in->mod[LPX_GB_RELU] ? minmax_relu : t_min[ix];
  case LPX_OP_MAX: return ix < 0 ? NULL : in->mod[LPX_GB_RELU] ? minmax_relu : t_max[ix];
  case LPX_OP_AND: return ix < 0 ? NULL : t_and[ix];
  case LPX_OP_OR: return ix < 0 ? NULL : t_or[ix];
  case LPX_OP_XOR: return ix < 0 ? NULL : t_xor[ix];
  case LPX_OP_ABS: return op_abs;
  case LPX_OP_NEG: return op_neg;
  case LPX_OP_NOT: return op_not;
  case LPX_OP_CNOT: return op_cnot;
  case LPX_OP_POPC: return op_popc;
  case LPX_OP_CLZ: return op_clz;
  case LPX_OP_BREV: return op_brev;
  case LPX_OP_BFIND: return op_bfind;
  case LPX_OP_SHL: return lpx_types[in->type].bits == 32 ? shl_b32 : op_shl;
  case LPX_OP_SHR: return (in->type == LPX_T_U32 || in->type == LPX_T_B32) ? shr_u32 : op_shr;
  case LPX_OP_SHF: return op_shf;
  case LPX_OP_BFE: return op_bfe;
  case LPX_OP_BFI: return op_bfi;
  case LPX_OP_PRMT: return op_prmt;
  case LPX_OP_LOP3: return op_lop3;
  case LPX_OP_SAD: return op_sad;
  case LPX_OP_SETP: return pick_setp(in, ix);
  case LPX_OP_SET: return op_set;
  case LPX_OP_SELP: return op_selp;
  case LPX_OP_SLCT: return op_slct;
  default: return NULL;
  }
}

/* Rows whose float forms the float family serves. */
static int float_row(int op)
{
  return op == LPX_OP_ADD || op == LPX_OP_SUB || op == LPX_OP_MUL || op == LPX_OP_MAD || op == LPX_OP_DIV ||
         op == LPX_OP_ABS || op == LPX_OP_NEG || op == LPX_OP_MIN || op == LPX_OP_MAX;
}

/* Handler for the integer family (float forms go to the float family). */
emu_fn lpx_emu_pick_alu(const emu_inst *in)
{
  if (is_float(in->type) && float_row(in->op)) return lpx_emu_pick_float(in);
  if (in->op == LPX_OP_SETP && is_float(in->type)) return setp_general;
  if (in->op == LPX_OP_MOV) return pick_mov(in);
  if (in->type == LPX_T_PRED) return pick_pred(in);
  return pick_int(in, in->type >= 0 ? int_index(in->type) : -1);
}
