/* Conversions: cvt between every integer and float type PTX defines here
 * (f16/bf16 rounded once in software, nearest-even by default, all four
 * directed modes; 64-bit integers reach them through a round-to-odd
 * double, so no value is rounded twice), integer saturation in integer
 * arithmetic, narrow integer results sign- or zero-extended into the
 * destination register as the type says, float-to-integer clamping (NaN
 * to 0, or to 1 << (bits - 1) from .f64 or into 64 bits, as the ISA
 * says), round-to-integral (.rni/.rzi/.rmi/.rpi), .ftz, .sat and .relu,
 * tf32 in each of its modes, the packed cvt.rn.f16x2.f32 / bf16x2 forms,
 * and fp8: cvt.rn.satfinite .e4m3x2/.e5m2x2 from two f32 or an f16x2 and
 * cvt.rn.f16x2 from them. */
#include "emu.h"
#include <fenv.h>
#include <math.h>

/* The host rounding mode for a RND modifier (an LPX_RND_* value; none: nearest). */
int lpx_emu_host_rounding(int rnd)
{
  switch (rnd) {
  case LPX_RND_RZ: return FE_TOWARDZERO;
  case LPX_RND_RM: return FE_DOWNWARD;
  case LPX_RND_RP: return FE_UPWARD;
  default: return FE_TONEAREST;
  }
}

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)

/* ------------------------------------------------------ small floats */

/* Round a non-negative magnitude q (in ulps) to an integer by a RND mode
 * (LPX_RND_RN ... LPX_RND_RNA); neg: the value's sign (for rm/rp). */
static double round_ulps(double q, int mode, int neg)
{
  double f = floor(q), diff = q - f;
  switch (mode) {
  case LPX_RND_RZ: return f;
  case LPX_RND_RM: return neg ? (diff > 0 ? f + 1 : f) : f;
  case LPX_RND_RP: return neg ? f : (diff > 0 ? f + 1 : f);
  case LPX_RND_RNA: return diff >= 0.5 ? f + 1 : f;
  default: return (diff > 0.5 || (diff == 0.5 && fmod(f, 2.0) != 0)) ? f + 1 : f;
  }
}

/* A binary float format narrower than f32: fraction bits, exponent bias and
 * width, and the magnitudes of its largest finite value and of what overflow
 * gives without .satfinite (e4m3 has no infinity: that is its NaN). */
typedef struct small_fmt { int p, bias, ebits; uint32_t maxf, inf; } small_fmt;
static const small_fmt FMT_F16 = { 10, 15, 5, 0x7bff, 0x7c00 }, FMT_BF16 = { 7, 127, 8, 0x7f7f, 0x7f80 },
                       FMT_E4M3 = { 3, 7, 4, 0x7e, 0x7f }, FMT_E5M2 = { 2, 15, 5, 0x7b, 0x7c };

/* Round f (exactly, from double) to a small format by mode; satfinite clamps
 * to the largest finite value instead of Inf. NaN gives the canonical NaN
 * (every bit but the sign set: 0x7fff, 0x7f). */
static uint32_t to_small(double f, const small_fmt *F, int mode, int satfinite)
{
  int p = F->p, bias = F->bias;
  uint32_t neg = signbit(f) != 0, sign = neg << (p + F->ebits);
  if (f != f) return (1u << (p + F->ebits)) - 1;
  double a = fabs(f);
  if (isinf(a)) return sign | (satfinite ? F->maxf : F->inf);
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
  if (biased >= (1 << F->ebits) || (((uint32_t)biased << p) | ((uint32_t)n - (1u << p))) > F->maxf) {
    int to_inf = !satfinite && (mode == LPX_RND_RN || mode == LPX_RND_RNA || (mode == LPX_RND_RP && !neg) ||
                                (mode == LPX_RND_RM && neg));
    return sign | (to_inf ? F->inf : F->maxf);
  }
  return sign | ((uint32_t)biased << p) | ((uint32_t)n - (1u << p));
}

/* f32 -> f16 with a RND mode (LPX_RND_*). */
uint16_t lpx_emu_f32_to_f16(float f, int rnd) { return (uint16_t)to_small(f, &FMT_F16, rnd, 0); }

/* f64 -> f16 / bf16 with a RND mode, rounded once. */
uint16_t lpx_emu_f64_to_half(double f, int bf, int rnd) { return (uint16_t)to_small(f, bf ? &FMT_BF16 : &FMT_F16, rnd, 0); }

/* f32 -> bf16 with a RND mode. */
uint16_t lpx_emu_f32_to_bf16(float f, int rnd) { return (uint16_t)to_small(f, &FMT_BF16, rnd, 0); }

/* e4m3 / e5m2 -> f32 (exact). e5m2 is the top byte of an f16; e4m3 has no
 * infinity and S.1111.111 is its only NaN. */
float lpx_emu_fp8_to_f32(uint8_t v, int e5m2)
{
  if (e5m2) return lpx_emu_f16_to_f32((uint16_t)(v << 8));
  int e = (v >> 3) & 15, fr = v & 7;
  float x = e == 15 && fr == 7 ? NAN : e == 0 ? ldexpf((float)fr, -9) : ldexpf((float)(fr | 8), e - 10);
  return (v & 0x80) ? -x : x;
}

/* f64 -> e4m3 / e5m2, nearest-even and .satfinite (the only rounding the
 * ISA's fp8 cvts take): beyond the largest finite value clamps to it. */
uint8_t lpx_emu_f64_to_fp8(double f, int e5m2) { return (uint8_t)to_small(f, e5m2 ? &FMT_E5M2 : &FMT_E4M3, LPX_RND_RN, 1); }

/* f16 -> f32 (exact). */
float lpx_emu_f16_to_f32(uint16_t h)
{
  int e = (h >> 10) & 0x1f, fr = h & 0x3ff;
  float v = e == 0 ? ldexpf((float)fr, -24) : e == 31 ? (fr ? NAN : INFINITY) : ldexpf((float)(fr | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}

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

/* Round to an integral value by an IRND modifier (LPX_IRND_*). */
static double round_int(double v, int irnd)
{
  switch (irnd) {
  case LPX_IRND_RZI: return trunc(v);
  case LPX_IRND_RMI: return floor(v);
  case LPX_IRND_RPI: return ceil(v);
  default: return nearbyint(v);
  }
}

/* An integer result of type t cut to its width, then sign-extended (s
 * types) or zero-extended (u and b types) into a register of dbits. */
static uint64_t int_to_reg(uint64_t v, int t, int dbits)
{
  int bits = lpx_types[t].bits;
  uint64_t dm = dbits >= 64 ? ~0ull : (1ull << dbits) - 1;
  if (bits < 64)
    v = lpx_types[t].kind == 'S' ? (uint64_t)((int64_t)(v << (64 - bits)) >> (64 - bits)) : v & ((1ull << bits) - 1);
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

/* A signed (sgn) or unsigned integer value clamped to integer type t's range. */
static uint64_t sat_int_int(__int128 v, int t)
{
  int bits = lpx_types[t].bits;
  __int128 lo = 0, hi = ((__int128)1 << bits) - 1;
  if (lpx_types[t].kind == 'S') { lo = -((__int128)1 << (bits - 1)); hi = ((__int128)1 << (bits - 1)) - 1; }
  return (uint64_t)(v < lo ? lo : v > hi ? hi : v);
}

/* Integer -> integer: truncate or extend, .sat clamps (exactly, in 128 bits). */
static uint64_t cvt_int_int(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  uint64_t u;
  int64_t s = int_in(st, v, &u);
  int sgn = lpx_types[st].kind == 'S';
  if (in->mod[LPX_GB_SAT] == LPX_SAT_SAT) return int_to_reg(sat_int_int(sgn ? (__int128)s : (__int128)u, dt), dt, dbits);
  return int_to_reg(sgn ? (uint64_t)s : u, dt, dbits);
}

/* Float -> integer: round to integral (default .rzi), clamp. NaN gives 0,
 * or 1 << (bits - 1) when the source is .f64 or the destination 64 bits
 * wide (the ISA's cvt notes; ptxas's F2I without .NTZ). */
static uint64_t cvt_float_int(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  double x = float_in(st, v);
  int bits = lpx_types[dt].bits;
  if (x != x) return int_to_reg(st == LPX_T_F64 || bits == 64 ? 1ull << (bits - 1) : 0, dt, dbits);
  if (in->mod[LPX_GB_FTZ] && st == LPX_T_F32 && fpclassify((float)x) == FP_SUBNORMAL) x = 0;
  int irnd = in->mod[LPX_GB_IRND];
  return int_to_reg(lpx_emu_sat_int(round_int(x, irnd ? irnd : LPX_IRND_RZI), dt), dt, dbits);
}

/* A 64-bit magnitude as a double rounded to odd: exact below 2^53, else the
 * truncation with its last bit set when bits were dropped. Rounding that
 * once more to a format of 51 bits or fewer gives the correctly rounded
 * value in every mode (Boldo and Melquiond), with no double rounding. */
static double u64_round_odd(uint64_t u)
{
  if (u < (1ull << 53)) return (double)u;
  int sh = 11 - __builtin_clzll(u);
  uint64_t t = u >> sh;
  if (u & ((1ull << sh) - 1)) t |= 1;
  return ldexp((double)t, sh);
}

/* f32 bits -> tf32 bits (low 13 bits zero) by rnd. .rna is what ptxas
 * emits for it (add half an ulp unless |a| is Inf or NaN, clear the low
 * bits; .satfinite then steps an Inf or NaN result down by one tf32 ulp);
 * .rn and .rz round the fraction, NaN gives 0x7fffe000 (the canonical
 * 0x7fffffff in tf32's bits, as an H100 writes it),
 * .satfinite turns an infinite result into the largest finite tf32 and
 * .relu a negative one into +0. */
static uint32_t to_tf32(uint32_t b, int rnd, int satfinite, int relu)
{
  int special = (b & 0x7f800000u) == 0x7f800000u;
  if (rnd == LPX_RND_RNA) {
    b = ((special ? b : b + 0x1000u) & 0xffffe000u);
    return satfinite && (b & 0x7f800000u) == 0x7f800000u ? b - 0x2000u : b;
  }
  if (special && (b & 0x7fffffu)) return 0x7fffe000u;
  if (!special && rnd != LPX_RND_RZ) b += 0xfffu + ((b >> 13) & 1);
  b &= 0xffffe000u;
  if (satfinite && (b & 0x7fffffffu) == 0x7f800000u) b -= 0x2000u;
  return relu && (b & 0x80000000u) ? 0 : b;
}

/* Fraction bits of a float type (f16, bf16, f32, f64). */
static int frac_bits(int t) { return t == LPX_T_F16 ? 10 : t == LPX_T_BF16 ? 7 : t == LPX_T_F64 ? 52 : 23; }

/* The NaN of type st in v as a NaN of type dt the IEEE way: the sign kept,
 * the payload moved to dt's top fraction bits (widened, or its low bits
 * dropped), the quiet bit set. */
static uint64_t nan_move(uint64_t v, int st, int dt)
{
  int sp = frac_bits(st), dp = frac_bits(dt), sw = st == LPX_T_F64 ? 64 : st == LPX_T_F32 ? 32 : 16;
  int dw = dt == LPX_T_F64 ? 64 : dt == LPX_T_F32 ? 32 : 16;
  uint64_t pay = v & ((1ull << sp) - 1), sign = (v >> (sw - 1)) & 1;
  pay = dp >= sp ? pay << (dp - sp) : pay >> (sp - dp);
  uint64_t exp = ((1ull << (dw - 1 - dp)) - 1) << dp;
  return sign << (dw - 1) | exp | pay | 1ull << (dp - 1);
}

/* The NaN cvt.dt.st gives for the NaN v, as an H100 does: conversions to or
 * from f64 (F2F) move it the IEEE way (nan_move); .ftz f32 -> f64 flushes
 * through f32 arithmetic first, so moves the canonical 0x7fffffff;
 * bf16 -> f32 is a bit move that keeps even a signaling NaN; the rest
 * (the f32 and half pipelines) give the canonical NaN: 0x7fffffff, 0x7fff. */
static uint64_t cvt_nan(int dt, int st, uint64_t v, int ftz)
{
  if (st == LPX_T_BF16 && dt == LPX_T_F32 && !ftz) return (v & 0xffffu) << 16;
  if (st == LPX_T_F32 && dt == LPX_T_F64 && ftz) v = 0x7fffffffu;
  else if (st != LPX_T_F64 && dt != LPX_T_F64) return dt == LPX_T_F32 ? 0x7fffffffu : 0x7fffu;
  return nan_move(v, st, dt);
}

/* A finished value in a float destination type, rounded by rnd. */
static uint64_t float_out(const emu_inst *in, int dt, double x, int rnd)
{
  int satfinite = in->mod[LPX_GB_SAT] == LPX_SAT_SATFINITE, ftz = in->mod[LPX_GB_FTZ] != 0;
  switch (dt) {
  case LPX_T_F32: {
    float f = (float)x;
    if (ftz) f = fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
    return f == f ? emu_f2u(f) : 0x7fffffffu;      /* the GPU's canonical NaN */
  }
  case LPX_T_F64: return x == x ? emu_d2u(x) : 0x7fffffffffffffffull;
  case LPX_T_F16: return to_small(x, &FMT_F16, rnd, satfinite);
  case LPX_T_BF16: return to_small(x, &FMT_BF16, rnd, satfinite);
  default: return 0;
  }
}

/* Anything -> float: integers round in the host's mode (set by the caller);
 * floats take .ftz, .rni..., .sat and .relu, then round once. */
static uint64_t cvt_to_float(const emu_inst *in, int dt, int st, uint64_t v)
{
  char sk = lpx_types[st].kind;
  int rnd = in->mod[LPX_GB_RND] ? in->mod[LPX_GB_RND] : LPX_RND_RN, irnd = in->mod[LPX_GB_IRND];
  double x;
  if (sk != 'F') {
    uint64_t u;
    int64_t s = int_in(st, v, &u);
    if (in->mod[LPX_GB_SAT] == LPX_SAT_SAT) return float_out(in, dt, sk == 'S' ? (s > 0) : (u > 0), rnd);  /* [0, 1] */
    if (dt == LPX_T_F32) { float f = sk == 'S' ? (float)s : (float)u; return emu_f2u(f); }
    if (dt == LPX_T_F64) { double g = sk == 'S' ? (double)s : (double)u; return emu_d2u(g); }
    x = sk == 'S' && s < 0 ? -u64_round_odd(0 - (uint64_t)s) : u64_round_odd(sk == 'S' ? (uint64_t)s : u);
  } else {
    x = float_in(st, v);
  }
  /* .ftz flushes an f32 source, but not toward f16 / bf16: an H100 rounds a
   * subnormal f32 to f16 with or without it (cvt.rp.ftz.f16.f32 of 2^-149: 0x0001) */
  int half_dt = dt == LPX_T_F16 || dt == LPX_T_BF16;
  if (in->mod[LPX_GB_FTZ] && st == LPX_T_F32 && !half_dt && fpclassify((float)x) == FP_SUBNORMAL) x = copysign(0.0, x);
  if (irnd) x = round_int(x, irnd);
  if (in->mod[LPX_GB_SAT] == LPX_SAT_SAT) x = x > 0 ? (x < 1 ? x : 1) : 0;
  if (x != x) return cvt_nan(dt, st, v, in->mod[LPX_GB_FTZ] != 0);
  if (in->mod[LPX_GB_RELU] && !(x > 0) && x == x) x = 0;
  return float_out(in, dt, x, rnd);
}

/* Convert one lane value from type st to type dt. */
static uint64_t convert(const emu_inst *in, int dt, int st, uint64_t v, int dbits)
{
  int sfloat = lpx_types[st].kind == 'F', dfloat = lpx_types[dt].kind == 'F';
  if (dt == LPX_T_TF32 && st == LPX_T_F32)       /* on the bits: a NaN's payload matters to .rna */
    return to_tf32((uint32_t)v, in->mod[LPX_GB_RND], in->mod[LPX_GB_SAT] == LPX_SAT_SATFINITE, in->mod[LPX_GB_RELU] != 0);
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
  int old = fegetround(), mode = lpx_emu_host_rounding(in->mod[LPX_GB_RND]);
  if (mode != old) fesetround(mode);
  EMU_EACH(m, d[l] = convert(in, dt, st, a[l], dbits));
  if (mode != old) fesetround(old);
  return 0;
}

/* x with .relu applied when relu is set: negatives (and -0) to +0, NaN kept. */
static double relu_of(double x, int relu) { return relu && !(x > 0) && x == x ? 0 : x; }

/* cvt.rn.f16x2.f32 d, a, b: d = {a -> upper half, b -> lower half}. */
static int op_cvt_pack(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = D(2);
  const small_fmt *F = in->type == LPX_T_BF16X2 ? &FMT_BF16 : &FMT_F16;
  int rnd = in->mod[LPX_GB_RND] ? in->mod[LPX_GB_RND] : LPX_RND_RN, satf = in->mod[LPX_GB_SAT] == LPX_SAT_SATFINITE, relu = in->mod[LPX_GB_RELU] != 0;
  EMU_EACH(m, {
    double x = relu_of(emu_u2f(a[l]), relu), y = relu_of(emu_u2f(b[l]), relu);
    d[l] = (uint64_t)(to_small(x, F, rnd, satf) << 16 | to_small(y, F, rnd, satf));
  });
  return 0;
}

/* cvt.rn.satfinite{.relu}.e4m3x2/.e5m2x2 from two f32 (a -> high byte) or
 * from an f16x2 (high half -> high byte). */
static int op_cvt_to_fp8(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *b = in->nops == 3 ? D(2) : NULL;
  int e5 = in->type == LPX_T_E5M2X2, relu = in->mod[LPX_GB_RELU] != 0;
  EMU_EACH(m, {
    double hi = b ? emu_u2f(a[l]) : lpx_emu_f16_to_f32((uint16_t)(a[l] >> 16));
    double lo = b ? emu_u2f(b[l]) : lpx_emu_f16_to_f32((uint16_t)a[l]);
    d[l] = (uint64_t)lpx_emu_f64_to_fp8(relu_of(hi, relu), e5) << 8 | lpx_emu_f64_to_fp8(relu_of(lo, relu), e5);
  });
  return 0;
}

/* cvt.rn{.relu}.f16x2.e4m3x2/.e5m2x2: each byte to f16 (exact: f16 holds
 * every fp8 value), the high byte to the high half; NaN is f16's 0x7fff. */
static int op_cvt_from_fp8(emu_warp *w, const emu_inst *in, uint32_t m)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1);
  int e5 = in->type2 == LPX_T_E5M2X2, relu = in->mod[LPX_GB_RELU] != 0;
  EMU_EACH(m, {
    uint32_t r = 0;
    for (int i = 0; i < 2; i++)
      r |= to_small(relu_of(lpx_emu_fp8_to_f32((uint8_t)(a[l] >> (8 * i)), e5), relu), &FMT_F16, LPX_RND_RN, 0) << (16 * i);
    d[l] = r;
  });
  return 0;
}

/* The fp8 cvt handler for in, or NULL: the ISA's forms are .rn (and
 * .satfinite toward fp8), anything else is not run. */
static emu_fn pick_fp8(const emu_inst *in)
{
  int to = in->type == LPX_T_E4M3X2 || in->type == LPX_T_E5M2X2, from = in->type2 == LPX_T_E4M3X2 || in->type2 == LPX_T_E5M2X2;
  if (in->mod[LPX_GB_RND] != LPX_RND_RN) return NULL;
  if (to && in->mod[LPX_GB_SAT] == LPX_SAT_SATFINITE && ((in->type2 == LPX_T_F32 && in->nops == 3) || (in->type2 == LPX_T_F16X2 && in->nops == 2)))
    return op_cvt_to_fp8;
  return from && in->type == LPX_T_F16X2 && in->nops == 2 && !in->mod[LPX_GB_SAT] ? op_cvt_from_fp8 : NULL;
}

/* Handler for cvt forms: scalar types and the packed half pairs. */
emu_fn lpx_emu_pick_cvt(const emu_inst *in)
{
  if ((in->type == LPX_T_F16X2 || in->type == LPX_T_BF16X2) && in->type2 == LPX_T_F32 && in->nops == 3) return op_cvt_pack;
  if (in->type == LPX_T_E4M3X2 || in->type == LPX_T_E5M2X2 || in->type2 == LPX_T_E4M3X2 || in->type2 == LPX_T_E5M2X2)
    return pick_fp8(in);
  int ok = 0;
  static const int scalar[] = { LPX_T_U8, LPX_T_U16, LPX_T_U32, LPX_T_U64, LPX_T_S8, LPX_T_S16, LPX_T_S32, LPX_T_S64,
                                LPX_T_F16, LPX_T_BF16, LPX_T_F32, LPX_T_F64, LPX_T_TF32 };
  for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) ok += (in->type == scalar[i]) + (in->type2 == scalar[i]);
  return ok == 2 && in->nops == 2 ? op_cvt : NULL;
}
