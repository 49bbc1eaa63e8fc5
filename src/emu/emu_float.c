/* Floating-point handlers: f32/f64 arithmetic with the four IEEE rounding
 * modes (the host's rounding mode is set around the lane loop; the file is
 * built with -frounding-math so the compiler keeps the operations where
 * they are), .ftz and .sat; f16/bf16 (scalar and x2) computed exactly or
 * rounded to odd in a double and rounded once to the format, with .ftz
 * flushing their subnormals; min/max with .NaN and .xorsign.abs; the
 * special functions, computed to within their documented ulp or better.
 * neg/abs are arithmetic as ptxas compiles them (FADD/HADD2: a NaN comes
 * out canonical; f64 quiets a NaN and keeps its sign); f64 arithmetic
 * propagates an operand's NaN in the order an H100 does (docs/emulator.md,
 * "Checked against an H100"); copysign is the bit select ptxas emits. */
#include "emu.h"
#include <fenv.h>
#include <math.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* The GPU's f32 NaN: arithmetic never propagates payloads. */
#define CANON32 0x7fffffffu
static inline uint64_t out32(float r) { return r == r ? emu_f2u(r) : CANON32; }

enum { F_ADD, F_SUB, F_MUL, F_FMA, F_DIV, F_MIN, F_MAX, F_ABS, F_NEG, F_RCP, F_SQRT, F_RSQRT,
       F_EX2, F_LG2, F_SIN, F_COS, F_TANH, F_COPYSIGN };

/* ------------------------------------------------------------- helpers */

/* Flush an f32 subnormal to a zero of the same sign. */
static float ftz32(float x)
{
  return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

/* x / y in the host's rounding mode; with ftz, a quotient whose exact
 * magnitude is below 2^-126 is a signed zero even where a directed rounding
 * would carry it up to 2^-126 (an H100 runs div.{rz,rm,rp}.ftz.f32 as a
 * subroutine that flushes before it rounds). The double quotient lies on
 * the same side of 2^-126 as the exact one: a quotient of two 24-bit
 * numbers other than 2^-126 is at least 2^-48 away from it, relatively. */
static float div_ftz_tiny(float x, float y, int ftz)
{
  double q = (double)x / (double)y;
  if (ftz && q != 0 && fabs(q) < 0x1p-126) return copysignf(0.0f, (float)q);
  return x / y;
}

/* Clamp to [0, 1]; NaN becomes 0 (.sat). */
static double sat01(double x) { return x > 0.0 ? (x < 1.0 ? x : 1.0) : 0.0; }

/* PTX min/max: a NaN operand yields the other; -0 orders below +0. */
static double fminmax(double x, double y, int max, int nan_prop)
{
  if (x != x || y != y) return nan_prop || (x != x && y != y) ? NAN : (x != x ? y : x);
  if (x == y) return max ? (signbit(x) ? y : x) : (signbit(x) ? x : y);
  return max ? (x > y ? x : y) : (x < y ? x : y);
}

/* min/max with the row's .NaN, .abs and .xorsign: with .xorsign.abs the
 * magnitudes are compared and a non-NaN result takes the XOR of the signs. */
static double fminmax_row(double x, double y, int max, const emu_inst *in)
{
  int xs = in->mod[LPX_GB_XORSIGN] != 0, neg = xs && (signbit(x) != 0) != (signbit(y) != 0);
  if (in->mod[LPX_GB_ABSNAN]) { x = fabs(x); y = fabs(y); }
  double r = fminmax(x, y, max, in->mod[LPX_GB_NAN] == LPX_NAN_NAN);
  return xs && r == r ? copysign(r, neg ? -1.0 : 1.0) : r;
}

/* One float operation on doubles (the wide type every format computes in). */
static double fop(int op, double x, double y, double z, const emu_inst *in)
{
  switch (op) {
  case F_ADD: return x + y;
  case F_SUB: return x - y;
  case F_MUL: return x * y;
  case F_FMA: return fma(x, y, z);
  case F_DIV: return x / y;
  case F_MIN: return fminmax_row(x, y, 0, in);
  case F_MAX: return fminmax_row(x, y, 1, in);
  case F_ABS: return fabs(x);
  case F_NEG: return -x;
  case F_RCP: return 1.0 / x;
  case F_SQRT: return sqrt(x);
  case F_RSQRT: return 1.0 / sqrt(x);
  case F_EX2: return exp2(x);
  case F_LG2: return log2(x);
  case F_SIN: return sin(x);
  case F_COS: return cos(x);
  case F_TANH: return tanh(x);
  case F_COPYSIGN: return copysign(y, x);
  default: return NAN;
  }
}

/* The operation a row performs. */
static int row_op(int op)
{
  switch (op) {
  case LPX_OP_ADD: return F_ADD; case LPX_OP_SUB: return F_SUB; case LPX_OP_MUL: return F_MUL;
  case LPX_OP_MAD: case LPX_OP_FMA: return F_FMA; case LPX_OP_DIV: return F_DIV;
  case LPX_OP_MIN: return F_MIN; case LPX_OP_MAX: return F_MAX; case LPX_OP_ABS: return F_ABS;
  case LPX_OP_NEG: return F_NEG; case LPX_OP_RCP: return F_RCP; case LPX_OP_SQRT: return F_SQRT;
  case LPX_OP_RSQRT: return F_RSQRT; case LPX_OP_EX2: return F_EX2; case LPX_OP_LG2: return F_LG2;
  case LPX_OP_SIN: return F_SIN; case LPX_OP_COS: return F_COS; case LPX_OP_TANH: return F_TANH;
  case LPX_OP_COPYSIGN: return F_COPYSIGN;
  default: return -1;
  }
}

/* ------------------------------------------------------------ f32 / f64 */

/* f32 in float arithmetic: every op of the row, with rnd / ftz / sat. */
HANDLER(f32_general)
{
  int op = row_op(in->op), ftz = in->mod[LPX_GB_FTZ] != 0, sat = in->mod[LPX_GB_SAT] == LPX_SAT_SAT;
  int relu = in->mod[LPX_GB_RELU] != 0, n = in->nops - 1;
  /* div.approx is a * (1/b) with 1/b flushed: 0 (NaN for an infinite a) when 2^126 < |b| < 2^128 */
  int approx_div = op == F_DIV && in->mod[LPX_GB_APPROX] == LPX_APPROX_APPROX;
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = n > 1 ? D(2) : a, *c = n > 2 ? D(3) : a;
  int old = fegetround(), mode = lpx_emu_host_rounding(in->mod[LPX_GB_RND]);
  if (mode != old) fesetround(mode);
  EMU_EACH(m, {
    float x = emu_u2f(a[l]), y = emu_u2f(b[l]), z = emu_u2f(c[l]), r;
    if (ftz) { x = ftz32(x); y = ftz32(y); z = ftz32(z); }
    switch (op) {
    case F_ADD: r = x + y; break;
    case F_SUB: r = x - y; break;
    case F_MUL: r = x * y; break;
    case F_FMA: r = fmaf(x, y, z); break;
    case F_DIV: r = approx_div && fabsf(y) > 0x1p126f && !isinf(y) ? x * copysignf(0.0f, y) : div_ftz_tiny(x, y, ftz); break;
    case F_SQRT: r = sqrtf(x); break;
    case F_RCP: r = 1.0f / x; break;
    default: r = (float)fop(op, x, y, z, in); break;
    }
    if (ftz) r = ftz32(r);
    if (sat) r = (float)sat01(r);
    if (relu && !(r > 0.0f) && r == r) r = 0.0f;
    d[l] = out32(r);
  });
  if (mode != old) fesetround(old);
  return 0;
}

/* Flush an f64 subnormal to a zero of the same sign (rcp/rsqrt.approx.ftz.f64). */
static double ftz64(double x) { return fpclassify(x) == FP_SUBNORMAL ? copysign(0.0, x) : x; }

/* Is v an f64 NaN? */
static inline int nan64(uint64_t v) { return (v & ~(1ull << 63)) > 0x7ff0000000000000ull; }

/* The f64 NaN v quieted (sign and payload kept), as DADD/DMUL/DFMA return it. */
static inline uint64_t quiet64(uint64_t v) { return v | (1ull << 51); }

/* The NaN an f64 operation with a NaN operand returns on an H100, or 0
 * when the host's result stands: the NaN operand quieted, and of two the
 * second source (b) wins for add/sub/mul/min/max, a for div, and fma
 * takes b, then c, then a; min/max with one NaN give the other operand. */
static uint64_t nan64_pick(int op, uint64_t a, uint64_t b, uint64_t c)
{
  static const char order[][4] = { [F_ADD] = "ba", [F_SUB] = "ba", [F_MUL] = "ba", [F_FMA] = "bca",
                                   [F_DIV] = "ab", [F_MIN] = "ba", [F_MAX] = "ba" };
  if (op < 0 || op > F_MAX || !order[op][0]) return 0;
  if ((op == F_MIN || op == F_MAX) && !(nan64(a) && nan64(b))) return 0;
  for (const char *k = order[op]; *k; k++) {
    uint64_t v = *k == 'a' ? a : *k == 'b' ? b : c;
    if (nan64(v)) return quiet64(v);
  }
  return 0;
}

/* f64 arithmetic with rnd (and .ftz where an approximate f64 row takes it). */
HANDLER(f64_general)
{
  int op = row_op(in->op), n = in->nops - 1, ftz = in->mod[LPX_GB_FTZ] != 0;
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = n > 1 ? D(2) : a, *c = n > 2 ? D(3) : a;
  int old = fegetround(), mode = lpx_emu_host_rounding(in->mod[LPX_GB_RND]);
  if (mode != old) fesetround(mode);
  EMU_EACH(m, {
    double x = emu_u2d(a[l]), y = emu_u2d(b[l]), z = emu_u2d(c[l]);
    if (ftz) { x = ftz64(x); y = ftz64(y); z = ftz64(z); }
    uint64_t nan = nan64_pick(op, a[l], b[l], c[l]);
    double r = nan ? emu_u2d(nan) : fop(op, x, y, z, in);
    if (ftz) r = ftz64(r);
    if (in->mod[LPX_GB_SAT] == LPX_SAT_SAT) r = sat01(r);
    d[l] = nan && r != r ? nan : emu_d2u(r);
  });
  if (mode != old) fesetround(old);
  return 0;
}

/* Fast paths: add/sub/mul/fma.rn.f32 with no other modifiers. */
HANDLER(add_f32) { uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2);
  EMU_EACH(m, d[l] = out32(emu_u2f(a[l]) + emu_u2f(b[l]))); return 0; }
HANDLER(sub_f32) { uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2);
  EMU_EACH(m, d[l] = out32(emu_u2f(a[l]) - emu_u2f(b[l]))); return 0; }
HANDLER(mul_f32) { uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2);
  EMU_EACH(m, d[l] = out32(emu_u2f(a[l]) * emu_u2f(b[l]))); return 0; }
HANDLER(fma_f32) { uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2), *c = D(3);
  EMU_EACH(m, d[l] = out32(fmaf(emu_u2f(a[l]), emu_u2f(b[l]), emu_u2f(c[l])))); return 0; }

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_FMA_HW() __builtin_cpu_supports("fma")
/* fma.rn.f32 with the host's FMA instruction inline (picked when the CPU has one). */
__attribute__((target("fma"))) static int fma_f32_hw(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2), *c = D(3);
  EMU_EACH(m, d[l] = out32(__builtin_fmaf(emu_u2f(a[l]), emu_u2f(b[l]), emu_u2f(c[l]))));
  return 0;
}
#else
#define HAVE_FMA_HW() 0
#define fma_f32_hw fma_f32
#endif

/* Is the f32 in the low bits of v a NaN? */
static inline int nan32(uint64_t v) { return ((uint32_t)v & 0x7fffffffu) > 0x7f800000u; }

/* neg.f32 / abs.f32 without .ftz: ptxas makes them FADD -a + -0 and
 * |a| + -0, so the sign changes and a NaN comes out canonical. */
HANDLER(neg_f32) { uint64_t *d = D(0); const uint64_t *a = D(1);
  EMU_EACH(m, d[l] = nan32(a[l]) ? CANON32 : (uint32_t)a[l] ^ 0x80000000u); return 0; }
HANDLER(abs_f32) { uint64_t *d = D(0); const uint64_t *a = D(1);
  EMU_EACH(m, d[l] = nan32(a[l]) ? CANON32 : (uint32_t)a[l] & 0x7fffffffu); return 0; }

/* copysign.f32 d, a, b: the sign of a on the bits of b (a LOP3 bit select:
 * NaN payloads and signs are kept). */
HANDLER(copysign_f32) { uint64_t *d = D(0); const uint64_t *a = D(1), *b = D(2);
  EMU_EACH(m, d[l] = ((uint32_t)a[l] & 0x80000000u) | ((uint32_t)b[l] & 0x7fffffffu)); return 0; }

/* neg.f64 / abs.f64: sign-bit operations, but a NaN comes back as DADD
 * returns it on an H100: quieted, its sign and payload kept. */
HANDLER(neg_f64) { uint64_t *d = D(0); const uint64_t *a = D(1);
  EMU_EACH(m, d[l] = nan64(a[l]) ? quiet64(a[l]) : a[l] ^ (1ull << 63)); return 0; }
HANDLER(abs_f64) { uint64_t *d = D(0); const uint64_t *a = D(1);
  EMU_EACH(m, d[l] = nan64(a[l]) ? quiet64(a[l]) : a[l] & ~(1ull << 63)); return 0; }

/* ------------------------------------------------------- f16 / bf16 */

/* The 16-bit half k of a lane value, flushed to a signed zero when ftz and
 * it is subnormal in its format (bf: bf16, else f16). */
static uint16_t half_bits(int bf, uint64_t v, int k, int ftz)
{
  uint16_t h = (uint16_t)(v >> (16 * k));
  int e = bf ? (h >> 7) & 0xff : (h >> 10) & 0x1f;
  return ftz && e == 0 ? h & 0x8000 : h;
}

/* The value of a half-format pattern (exact in a double). */
static double half_val(int bf, uint16_t h) { return bf ? lpx_emu_bf16_to_f32(h) : lpx_emu_f16_to_f32(h); }

/* x + y rounded to odd in a double: exact when the sum is, else the
 * neighbour of the nearest double whose last bit is 1 on the side of the
 * error (TwoSum). Rounding that once to f16/bf16 is correctly rounded:
 * a sum of halves (and a product plus a half) can need far more than 53
 * bits, and a plain double would round twice. */
static double sum_odd(double x, double y)
{
  double s = x + y;
  if (!isfinite(s)) return s;
  double bb = s - x, e = (x - (s - bb)) + (y - bb);
  if (e == 0 || (emu_d2u(s) & 1)) return s;
  return nextafter(s, e > 0 ? INFINITY : -INFINITY);
}

/* One f16/bf16 operation on exact double operands, ready for one rounding. */
static double half_op(int op, double x, double y, double z, const emu_inst *in)
{
  switch (op) {
  case F_ADD: return sum_odd(x, y);
  case F_SUB: return sum_odd(x, -y);
  case F_MUL: return x * y;                       /* 22 bits at most: exact */
  case F_FMA: return sum_odd(x * y, z);
  default: return fop(op, x, y, z, in);
  }
}

/* f16, f16x2, bf16, bf16x2: each half computed by half_op and rounded once;
 * .ftz flushes subnormal inputs and results; neg/abs are arithmetic (HADD2
 * / HFMA2 in ptxas's code), so a NaN comes out as the canonical 0x7fff. */
HANDLER(half_general)
{
  int op = row_op(in->op), n = in->nops - 1, rnd = in->mod[LPX_GB_RND] ? in->mod[LPX_GB_RND] : LPX_RND_RN;
  int bf = in->type == LPX_T_BF16 || in->type == LPX_T_BF16X2;
  int lanes2 = in->type == LPX_T_F16X2 || in->type == LPX_T_BF16X2, ftz = in->mod[LPX_GB_FTZ] != 0;
  int sat = in->mod[LPX_GB_SAT] == LPX_SAT_SAT, relu = in->mod[LPX_GB_RELU] != 0;
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = n > 1 ? D(2) : a, *c = n > 2 ? D(3) : a;
  EMU_EACH(m, {
    uint64_t out = 0;
    for (int k = 0; k <= lanes2; k++) {
      double x = half_val(bf, half_bits(bf, a[l], k, ftz)), y = half_val(bf, half_bits(bf, b[l], k, ftz));
      double r = half_op(op, x, y, half_val(bf, half_bits(bf, c[l], k, ftz)), in);
      if (sat) r = sat01(r);
      if (relu && !(r > 0.0) && r == r) r = 0.0;
      uint16_t h = lpx_emu_f64_to_half(r, bf, rnd);
      out |= (uint64_t)half_bits(bf, h, 0, ftz) << (16 * k);
    }
    d[l] = out;
  });
  return 0;
}

/* --------------------------------------------------------------- misc */

/* testp: classify an f32/f64 into a predicate. */
HANDLER(op_testp)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1);
  int which = in->mod[LPX_GB_TESTP], f64 = in->type == LPX_T_F64;
  EMU_EACH(m, {
    double x = f64 ? emu_u2d(a[l]) : emu_u2f(a[l]);
    int c = f64 ? fpclassify(x) : fpclassify((float)x), r = 0;
    switch (which) {
    case LPX_TESTP_FINITE: r = c != FP_INFINITE && c != FP_NAN; break;
    case LPX_TESTP_INFINITE: r = c == FP_INFINITE; break;
    case LPX_TESTP_NUMBER: r = c != FP_NAN; break;
    case LPX_TESTP_NOTANUMBER: r = c == FP_NAN; break;
    case LPX_TESTP_NORMAL: r = c == FP_NORMAL || c == FP_ZERO; break;   /* the ISA: zeros are normal */
    case LPX_TESTP_SUBNORMAL: r = c == FP_SUBNORMAL; break;
    }
    d[l] = (uint64_t)r;
  });
  return 0;
}

/* Handler for a float row (and the float forms of the arithmetic rows). */
emu_fn lpx_emu_pick_float(const emu_inst *in)
{
  if (in->op == LPX_OP_TESTP) return op_testp;
  if (row_op(in->op) < 0) return NULL;
  int t = in->type;
  if (t == LPX_T_F16 || t == LPX_T_F16X2 || t == LPX_T_BF16 || t == LPX_T_BF16X2) return half_general;
  if (t == LPX_T_F64) return in->op == LPX_OP_NEG ? neg_f64 : in->op == LPX_OP_ABS ? abs_f64 : f64_general;
  if (t != LPX_T_F32) return NULL;
  if (in->op == LPX_OP_COPYSIGN) return copysign_f32;
  int plain = (!in->mod[LPX_GB_RND] || in->mod[LPX_GB_RND] == LPX_RND_RN) && !in->mod[LPX_GB_FTZ] && !in->mod[LPX_GB_SAT] && !in->mod[LPX_GB_RELU];
  if (plain && in->op == LPX_OP_NEG) return neg_f32;
  if (plain && in->op == LPX_OP_ABS) return abs_f32;
  if (plain && in->op == LPX_OP_ADD) return add_f32;
  if (plain && in->op == LPX_OP_SUB) return sub_f32;
  if (plain && in->op == LPX_OP_MUL) return mul_f32;
  if (plain && (in->op == LPX_OP_FMA || in->op == LPX_OP_MAD)) return HAVE_FMA_HW() ? fma_f32_hw : fma_f32;
  return f32_general;
}
