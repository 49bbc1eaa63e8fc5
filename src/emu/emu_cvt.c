/* Conversions: cvt between every integer and float type PTX defines here
 * (f16/bf16/tf32 rounded in software, nearest-even by default, all four
 * directed modes), integer saturation, float-to-integer clamping (NaN to
 * 0), round-to-integral (.rni/.rzi/.rmi/.rpi), .ftz, .sat and .relu, and
 * the packed cvt.rn.f16x2.f32 / bf16x2 forms. */
#include "emu.h"
#include <fenv.h>
#include <math.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)

/* ------------------------------------------------------ small floats */

/* Round a non-negative magnitude q (in ulps) to an integer by mode
 * (1 rn, 2 rz, 3 rm, 4 rp, 5 rna); neg: the value's sign (for rm/rp). */
static double round_ulps(double q, int mode, int neg)
{
  double f = floor(q), diff = q - f;
  switch (mode) {
  case 2: return f;
  case 3: return neg ? (diff > 0 ? f + 1 : f) : f;
  case 4: return neg ? f : (diff > 0 ? f + 1 : f);
  case 5: return diff >= 0.5 ? f + 1 : f;
  default: return (diff > 0.5 || (diff == 0.5 && fmod(f, 2.0) != 0)) ? f + 1 : f;
  }
}

/* Round f (exactly, from double) to a binary format with p fraction bits, exponent bias, and
 * minimum normal exponent 1-bias; satfinite clamps instead of Inf. */
static uint32_t to_small(double f, int p, int bias, int mode, int satfinite)
{
  int ebits = bias == 127 ? 8 : 5;
  uint32_t neg = signbit(f) != 0, sign = neg << (p + ebits);
  uint32_t inf = ((1u << ebits) - 1) << p, maxf = inf - 1;
  if (f != f) return 0x7fff;                     /* the canonical NaN of both formats */
  double a = fabs(f);
  if (isinf(a)) return sign | (satfinite ? maxf : inf);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);                        /* a = mant * 2^e, mant in [0.5, 1) */
  int ue = e - 1 - p, ue_min = 1 - bias - p;
  if (ue < ue_min) ue = ue_min;
  double n = round_ulps(ldexp(a, -ue), mode, (int)neg);
  while (n >= ldexp(1.0, p + 1)) { n /= 2; ue++; }
  if (n == 0) return sign;
  int biased = ue + p + bias;
  if (n < ldexp(1.0, p)) return sign | (uint32_t)n;            /* subnormal */
  if (biased >= (1 << ebits) - 1) {
    int to_inf = !satfinite && (mode == 1 || mode == 5 || (mode == 4 && !neg) || (mode == 3 && neg));
    return sign | (to_inf ? inf : maxf);
  }
  return sign | ((uint32_t)biased << p) | ((uint32_t)n - (1u << p));
}

/* f32 -> f16 with a RND mode (1 rn, 2 rz, 3 rm, 4 rp). */
uint16_t lpx_emu_f32_to_f16(float f, int rnd) { return (uint16_t)to_small(f, 10, 15, rnd, 0); }

/* f64 -> f16 / bf16 with a RND mode, rounded once. */
uint16_t lpx_emu_f64_to_half(double f, int bf, int rnd) { return (uint16_t)(bf ? to_small(f, 7, 127, rnd, 0) : to_small(f, 10, 15, rnd, 0)); }

/* f32 -> bf16 with a RND mode. */
uint16_t lpx_emu_f32_to_bf16(float f, int rnd) { return (uint16_t)to_small(f, 7, 127, rnd, 0); }

/* f16 -> f32 (exact). */
float lpx_emu_f16_to_f32(uint16_t h)
{
  int e = (h >> 10) & 0x1f, fr = h & 0x3ff;
  float v = e == 0 ? ldexpf((float)fr, -24) : e == 31 ? (fr ? NAN : INFINITY) : ldexpf((float)(fr | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}

/* bf16 -> f32 (exact: the top half of an f32). */
float lpx_emu_bf16_to_f32(uint16_t h) { return emu_u2f((uint32_t)h << 16); }

/* -------------------------------------------------------------- values */

/* A source lane value as a double (floats) for conversion. */
static double float_in(int type, uint64_t v)
{
  switch (type) {
  case LPX_T_F16: return lpx_emu_f16_to_f32((uint16_t)v);
  case LPX_T_BF16: return lpx_emu_bf16_to_f32((uint16_t)v);
  case LPX_T_F32: case LPX_T_TF32: return emu_u2f(v);
  default: return emu_u2d(v);
  }
}

/* Clamp a double to an integer type's range (NaN -> 0) and return its bits. */
uint64_t lpx_emu_sat_int(double v, int type)
{
  int bits = lpx_types[type].bits, s = lpx_types[type].kind == 'S';
  if (v != v) return 0;
  double lo = s ? -ldexp(1.0, bits - 1) : 0.0, hi = s ? ldexp(1.0, bits - 1) - 1 : ldexp(1.0, bits) - 1;
  if (v <= lo) return s ? (uint64_t)(int64_t)lo & (bits >= 64 ? ~0ull : (1ull << bits) - 1) : 0;
  if (v >= hi) return bits >= 64 ? (s ? (uint64_t)INT64_MAX : ~0ull) : (uint64_t)hi;
  uint64_t r = s ? (uint64_t)(int64_t)v : (uint64_t)v;
  return bits >= 64 ? r : r & ((1ull << bits) - 1);
}

/* Round to an integral value by an IRND modifier (1 rni, 2 rzi, 3 rmi, 4 rpi). */
static double round_int(double v, int irnd)
{
  switch (irnd) {
  case 2: return trunc(v);
  case 3: return floor(v);
  case 4: return ceil(v);
  default: return nearbyint(v);
  }
}

/* Sign-extend or zero-extend an integer result of type t into a register of dbits. */
static uint64_t int_to_reg(uint64_t v, int t, int dbits)
{
  int bits = lpx_types[t].bits;
  uint64_t dm = dbits >= 64 ? ~0ull : (1ull << dbits) - 1;
  if (lpx_types[t].kind == 'S' && bits < 64) v = (uint64_t)((int64_t)(v << (64 - bits)) >> (64 - bits));
  return v & dm;
}

/* An integer source as a wide signed or unsigned value, in a double-safe way. */
static int64_t int_in(int type, uint64_t v, uint64_t *u)
{
  int bits = lpx_types[type].bits;
  uint64_t mk = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  *u = v & mk;
  return lpx_types[type].kind == 'S' && bits < 64 ? (int64_t)(*u << (64 - bits)) >> (64 - bits) : (int64_t)*u;
}

/* ------------------------------------------------------------- handlers */

/* Integer -> integer: truncate or extend, .sat clamps (via double: exact below 2^53). */
static uint64_t cvt_int_int(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  uint64_t u;
  int64_t s = int_in(st, v, &u);
  int sgn = lpx_types[st].kind == 'S';
  if (in->mod[LPX_GB_SAT] == 1) return int_to_reg(lpx_emu_sat_int(sgn ? (double)s : (double)u, dt), dt, dbits);
  return int_to_reg(sgn ? (uint64_t)s : u, dt, dbits);
}

/* Float -> integer: round to integral (default .rzi), clamp, NaN -> 0. */
static uint64_t cvt_float_int(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  double x = float_in(st, v);
  if (in->mod[LPX_GB_FTZ] && st == LPX_T_F32 && fpclassify((float)x) == FP_SUBNORMAL) x = 0;
  int irnd = in->mod[LPX_GB_IRND];
  return int_to_reg(lpx_emu_sat_int(round_int(x, irnd ? irnd : 2), dt), dt, dbits);
}

/* A finished value in a float destination type, rounded by rnd. */
static uint64_t float_out(const emu_inst *in, int dt, double x, int rnd)
{
  int satfinite = in->mod[LPX_GB_SAT] == 2, ftz = in->mod[LPX_GB_FTZ] != 0;
  switch (dt) {
  case LPX_T_F32: {
    float f = (float)x;
    if (ftz) f = fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
    return f == f ? emu_f2u(f) : 0x7fffffffu;      /* the GPU's canonical NaN */
  }
  case LPX_T_F64: return x == x ? emu_d2u(x) : 0x7fffffffffffffffull;
  case LPX_T_F16: return to_small(x, 10, 15, rnd, satfinite);
  case LPX_T_BF16: return to_small(x, 7, 127, rnd, satfinite);
  case LPX_T_TF32: { uint32_t b = emu_f2u((float)x); if ((b & 0x7f800000) != 0x7f800000) b = (b + 0x1000) & ~0x1fffu; return b; }
  default: return 0;
  }
}

/* Anything -> float: integers round in the host's mode (set by the caller);
 * floats take .ftz, .rni..., .sat and .relu, then round once. */
static uint64_t cvt_to_float(const emu_inst *in, int dt, int st, uint64_t v)
{
  char sk = lpx_types[st].kind;
  int rnd = in->mod[LPX_GB_RND] ? in->mod[LPX_GB_RND] : 1, irnd = in->mod[LPX_GB_IRND];
  double x;
  if (sk != 'F') {
    uint64_t u;
    int64_t s = int_in(st, v, &u);
    if (dt == LPX_T_F32) { float f = sk == 'S' ? (float)s : (float)u; return emu_f2u(f); }
    if (dt == LPX_T_F64) { double g = sk == 'S' ? (double)s : (double)u; return emu_d2u(g); }
    x = sk == 'S' ? (double)s : (double)u;
  } else {
    x = float_in(st, v);
  }
  if (in->mod[LPX_GB_FTZ] && st == LPX_T_F32 && fpclassify((float)x) == FP_SUBNORMAL) x = copysign(0.0, x);
  if (irnd) x = round_int(x, irnd);
  if (in->mod[LPX_GB_SAT] == 1) x = x > 0 ? (x < 1 ? x : 1) : 0;
  if (in->mod[LPX_GB_RELU] && !(x > 0) && x == x) x = 0;
  return float_out(in, dt, x, rnd);
}

/* Convert one lane value from type st to type dt. */
static uint64_t convert(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  int sfloat = lpx_types[st].kind == 'F', dfloat = lpx_types[dt].kind == 'F';
  if (!sfloat && !dfloat) return cvt_int_int(in, dt, st, v, dbits);
  if (sfloat && !dfloat) return cvt_float_int(in, dt, st, v, dbits);
  return cvt_to_float(in, dt, st, v);
}

/* cvt d, a for scalar types, rounding in the requested mode. */
static int op_cvt(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1);
  int dt = in->type, st = in->type2, dbits = EMU_OP(w, in, 0)->bits;
  static const int modes[] = { FE_TONEAREST, FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD, FE_TONEAREST };
  int old = fegetround(), mode = modes[in->mod[LPX_GB_RND] <= 5 ? in->mod[LPX_GB_RND] : 0];
  if (mode != old) fesetround(mode);
  EMU_EACH(m, d[l] = convert(in, dt, st, a[l], dbits));
  if (mode != old) fesetround(old);
  return 0;
}

/* cvt.rn.f16x2.f32 d, a, b: d = {a -> upper half, b -> lower half}. */
static int op_cvt_pack(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  int p = in->type == LPX_T_BF16X2 ? 7 : 10, bias = in->type == LPX_T_BF16X2 ? 127 : 15;
  int rnd = in->mod[LPX_GB_RND] ? in->mod[LPX_GB_RND] : 1, satf = in->mod[LPX_GB_SAT] == 2, relu = in->mod[LPX_GB_RELU] != 0;
  EMU_EACH(m, {
    float x = emu_u2f(a[l]), y = emu_u2f(b[l]);
    if (relu) { if (!(x > 0) && x == x) x = 0; if (!(y > 0) && y == y) y = 0; }
    d[l] = (uint64_t)(to_small(x, p, bias, rnd, satf) << 16 | to_small(y, p, bias, rnd, satf));
  });
  return 0;
}

/* Handler for cvt forms: scalar types and the packed half pairs. */
emu_fn lpx_emu_pick_cvt(const emu_inst *in)
{
  if ((in->type == LPX_T_F16X2 || in->type == LPX_T_BF16X2) && in->type2 == LPX_T_F32 && in->nops == 3) return op_cvt_pack;
  int ok = 0;
  static const int scalar[] = { LPX_T_U8, LPX_T_U16, LPX_T_U32, LPX_T_U64, LPX_T_S8, LPX_T_S16, LPX_T_S32, LPX_T_S64,
                                LPX_T_F16, LPX_T_BF16, LPX_T_F32, LPX_T_F64, LPX_T_TF32 };
  for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) ok += (in->type == scalar[i]) + (in->type2 == scalar[i]);
  return ok == 2 && in->nops == 2 ? op_cvt : NULL;
}
