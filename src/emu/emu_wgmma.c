/* Hopper warpgroup MMA on the emulator: every wgmma.mma_async form of
 * sm_90a (m64nNkK: f16/bf16 k16, tf32 k8, e4m3/e5m2 k32, s8/u8 k32, b1
 * k256 .and.popc; f32, f16 or s32 accumulators) with A from shared memory
 * or registers and B from shared memory, through matrix descriptors in the
 * canonical layouts of the PTX ISA: K-major for every type, MN-major
 * (imm-trans-a/b = 1) for f16/bf16, each with no swizzle (interleave) or
 * 32B/64B/128B swizzle (the pattern starting where the descriptor's
 * matrix base offset says). Each warp computes its own 16 rows of D, so
 * the four warps of a warpgroup need not run in lockstep. The MMA completes at
 * once (a valid schedule); fence / commit_group / wait_group have nothing
 * to wait for. Products are exact; each output's sum (with the old D) is
 * formed in double and rounded once to the accumulator type. The sparse
 * forms (wgmma.mma_async.sp: K doubled, A stored compressed) expand each
 * warp's 16 rows of A through the metadata register first. */
#include "emu.h"
#include <stdio.h>
#include <stdlib.h>

#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

enum { X_NB, X_DT, X_AT, X_BT, X_FLAGS };      /* in->ext: N/8 (0: not run), D / A / B matrix types, flags */
enum { W_SAT = 1, W_SP = 2 };                  /* X_FLAGS bits: .satfinite, wgmma.mma_async.sp */

/* ------------------------------------------------------------ type tables */

/* Element decoders: the raw bits of one element as an exact double. */
static double dec_f16(uint32_t v) { return lpx_emu_f16_to_f32((uint16_t)v); }
static double dec_bf16(uint32_t v) { return lpx_emu_bf16_to_f32((uint16_t)v); }
static double dec_tf32(uint32_t v) { return emu_u2f(v & 0xffffe000u); }     /* tf32: the top 19 bits */
static double dec_e4m3(uint32_t v) { return lpx_emu_fp8_to_f32((uint8_t)v, 0); }
static double dec_e5m2(uint32_t v) { return lpx_emu_fp8_to_f32((uint8_t)v, 1); }
static double dec_s8(uint32_t v) { return (int8_t)(uint8_t)v; }
static double dec_u8(uint32_t v) { return (uint8_t)v; }
static double dec_b1(uint32_t v) { return v & 1; }    /* .and.popc: a product of bits is their AND */

/* The element decoder of each A/B matrix type (the families, K, widths
 * and accumulators are the ISA table's: lpx_isa.def LPX_WGMMA_FAMILIES). */
typedef double (*wg_dec)(uint32_t);
static const wg_dec decoders[LPX_MT__END] = {
  [LPX_MT_F16] = dec_f16, [LPX_MT_BF16] = dec_bf16, [LPX_MT_TF32] = dec_tf32, [LPX_MT_E4M3] = dec_e4m3,
  [LPX_MT_E5M2] = dec_e5m2, [LPX_MT_S8] = dec_s8, [LPX_MT_U8] = dec_u8, [LPX_MT_B1] = dec_b1,
};

/* The exact value of one element of matrix type t from its raw bits (wgmma and tcgen05.mma). */
double lpx_emu_mtype_value(int t, uint32_t bits)
{
  return decoders[t](bits);
}

/* Does family fam read its sparse metadata from all four threads (8-bit inputs)? */
static int meta_by_four(int fam) { return fam == LPX_MT_E4M3 || fam == LPX_MT_S8; }

/* ------------------------------------------------------------ descriptors */

/* Swizzle span in bytes of each sm_90 descriptor layout code (bits 62-63). */
static const uint32_t span_of[4] = { 0, 128, 64, 32 };

/* Unpack the fields the wgmma (sm_90) and tcgen05 (sm_100) matrix
 * descriptors share: start address, LBO, SBO (all >> 4) and the base
 * offset (bits 49-51); the swizzle span comes from each one's own code. */
emu_mdesc lpx_emu_mdesc(uint64_t v, uint32_t span)
{
  emu_mdesc d = { (v & 0x3fff) << 4, ((v >> 16) & 0x3fff) << 4, ((v >> 32) & 0x3fff) << 4, span, (uint32_t)(v >> 49) & 7 };
  return d;
}

/* Unpack a wgmma descriptor: the shared fields and the layout code. */
static emu_mdesc unpack_desc(uint64_t v)
{
  return lpx_emu_mdesc(v, span_of[v >> 62]);
}

/* Shared address of the 16 contiguous bytes [cb, cb+16) (cb a multiple of
 * 16) of strided row `row` in a canonical layout. The strided dimension is
 * M/N for K-major operands and K for MN-major ones; the contiguous one is
 * the other. Interleave: 8x16-byte core matrices, the 8-row groups and the
 * 16-byte columns LBO/SBO apart (K-major: SBO between row groups, LBO
 * along K; MN-major the reverse). Swizzled: rows of `span` bytes, 8-row
 * atoms SBO apart, span-wide column blocks LBO apart (MN-major only: a
 * K-major operand's 32 bytes never leave the first block), then the
 * hardware's XOR of address bits 4.. with the index of the address's
 * 128-byte line in the swizzle pattern. The pattern repeats every 8 lines
 * of 128B (4 of 64B, 2 of 32B) from where it starts: the ISA's base offset
 * is (pattern start >> 7) & 7, 0 for a pattern starting at a 1024/512/256-
 * byte boundary, so the line index is (address >> 7) - base offset. */
uint64_t lpx_emu_mdesc_chunk(const emu_mdesc *d, int mn_major, uint32_t row, uint32_t cb)
{
  if (!d->span) {
    uint64_t rows = mn_major ? d->lbo : d->sbo, cols = mn_major ? d->sbo : d->lbo;
    return d->start + (row / 8) * rows + (cb / 16) * cols + (row % 8) * 16 + cb % 16;
  }
  uint64_t a = d->start + (row / 8) * d->sbo + (cb / d->span) * d->lbo + (row % 8) * d->span + cb % d->span;
  return a ^ ((((a >> 7) - d->base_off) & (d->span / 16 - 1)) << 4);
}

/* Layout names of swizzle spans, for messages. */
static const char *span_name(uint32_t span)
{
  return span == 128 ? "128B swizzle" : span == 64 ? "64B swizzle" : span == 32 ? "32B swizzle" : "no swizzle (interleave)";
}

/* A base offset without a swizzle (the ISA defines it for the swizzled
 * layouts only) is reported; so is a descriptor reading a tile a TMA load
 * wrote with another swizzle, or with a base offset other than 0: TMA
 * swizzles absolute addresses, so its pattern starts at a boundary. */
int lpx_emu_mdesc_check(emu_warp *w, const emu_inst *in, int lane, const emu_mdesc *d, const char *which)
{
  uint32_t span;
  const emu_inst *by;
  if (d->base_off && !d->span)
    return lpx_emu_fail(w, in, lane, "the %s descriptor has matrix base offset %u (bits 49-51) with no swizzle; the ISA "
                        "defines the base offset for the 32B/64B/128B swizzles only", which, d->base_off);
  if (!lpx_emu_tma_swizzle_at(w->cta, d->start, &span, &by)) return 0;
  int bad_span = span != d->span, bad_off = !bad_span && d->span && (d->base_off & (d->span / 16 - 1));
  if (!bad_span && !bad_off) return 0;
  char where[512];
  lpx_emu_where(w->p, by, where, sizeof where);
  if (bad_span)
    return lpx_emu_fail(w, in, lane, "the %s descriptor reads shared memory at 0x%llx with %s, but the TMA load at %s "
                        "wrote it with %s", which, (unsigned long long)d->start, span_name(d->span), where, span_name(span));
  return lpx_emu_fail(w, in, lane, "the %s descriptor has matrix base offset %u, but the TMA load at %s wrote the tile at "
                      "0x%llx with its %s pattern starting at a %u-byte boundary: the matching base offset is 0 (the ISA: "
                      "(pattern start >> 7) & 7)", which, d->base_off, where, (unsigned long long)d->start,
                      span_name(d->span), d->span * 8);
}

/* ------------------------------------------------------------ operands */

/* The elements of one instruction: form facts and the operand positions. */
typedef struct wg_op {
  int at, bt;                     /* A and B matrix types */
  const lpx_wgmma_family *fam;
  uint32_t n, k, kc, nd;  /* N, K, K of the stored A (K/2 for .sp), accumulator registers per thread */
  int dt, areg, ka, kb;   /* D type; A from registers; operand index of A and of the B descriptor */
  int sp, ks;             /* .sp; operand index of scale-d (after sp-meta, sp-sel for .sp) */
  int ta, tb, scale_d, l0;
  double scale;           /* imm-scale-a * imm-scale-b */
} wg_op;

/* Element j (bits wide) of the little-endian bytes p. */
static uint32_t field(const uint8_t *p, uint32_t j, uint32_t bits)
{
  uint32_t bit = j * bits, v;
  memcpy(&v, p + (bit / 32) * 4, 4);
  return bits == 32 ? v : (v >> (bit % 32)) & ((1u << bits) - 1);
}

/* The 16 bytes at shared address ea of the CTA r->cta names (0: the
 * lane's own, read through the async proxy; 1 + a cluster rank: that
 * CTA's, through its shared::cluster address). */
const uint8_t *lpx_emu_mdesc_bytes(emu_warp *w, const emu_inst *in, int lane, const emu_mdread *r, uint64_t ea)
{
  if (r->cta) return lpx_emu_addr(w, in, lane, EMU_SP_SHARED, ((uint64_t)r->cta << 24) | (ea & 0xffffff), 16, 0);
  return lpx_emu_shared_async16(w, in, lane, ea, r->reader);
}

/* The walk of lpx_emu_mdesc_read: elements per 16-byte chunk, strided
 * rows, chunks per row. */
static void read_shape(const emu_mdread *r, uint32_t *per, uint32_t *rows, uint32_t *chunks)
{
  *per = 128 / (uint32_t)lpx_mtype_bits(r->type);
  *rows = r->mn_major ? r->k : r->n;
  *chunks = r->mn_major ? r->n / *per : r->k / *per;
}

/* Shared address of chunk c of strided row i of what r reads. */
static uint64_t read_chunk(const emu_mdesc *d, const emu_mdread *r, uint32_t per, uint32_t i, uint32_t c)
{
  uint32_t row = r->mn_major ? i : r->mn0 + i, cb = r->mn_major ? (r->mn0 / per + c) * 16 : 16 * c;
  return lpx_emu_mdesc_chunk(d, r->mn_major, row, cb);
}

/* Read M/N rows mn0..mn0+n-1 (all K) of an operand into out[(mn-mn0)*K + k]:
 * K-major rows are K elements (32 bytes; 64 for a sparse form's B); MN-major
 * K rows hold consecutive M/N elements. */
int lpx_emu_mdesc_read(emu_warp *w, const emu_inst *in, int lane, const emu_mdesc *d, const emu_mdread *r, double *out)
{
  uint32_t bits = (uint32_t)lpx_mtype_bits(r->type), per, rows, chunks, K = r->k;
  read_shape(r, &per, &rows, &chunks);
  for (uint32_t i = 0; i < rows; i++)
    for (uint32_t c = 0; c < chunks; c++) {
      const uint8_t *p = lpx_emu_mdesc_bytes(w, in, lane, r, read_chunk(d, r, per, i, c));
      if (!p) return -1;
      if (r->type == LPX_MT_BF16 && !r->mn_major) {   /* the common case: eight bf16 of one row, a shift each */
        double *o = out + i * K + c * 8;
        for (uint32_t j = 0; j < 8; j++) { uint16_t h; memcpy(&h, p + 2 * j, 2); o[j] = lpx_emu_bf16_to_f32(h); }
        continue;
      }
      for (uint32_t j = 0; j < per; j++) {
        double v = decoders[r->type](field(p, j, bits));
        if (r->mn_major) out[(c * per + j) * K + i] = v; else out[i * K + c * per + j] = v;
      }
    }
  return 0;
}

/* Read one wgmma operand (the lane's own CTA). */
static int read_operand(emu_warp *w, const emu_inst *in, int lane, const emu_mdesc *d, int mn_major, int t,
                        uint32_t K, uint32_t mn0, uint32_t n, double *out)
{
  emu_mdread r = { mn_major, t, K, mn0, n, 0, "wgmma.mma_async" };
  return lpx_emu_mdesc_read(w, in, lane, d, &r, out);
}

/* Gather this warp's 16 x K A (the stored 16 x K/2 for .sp: the dense
 * fragment of the compressed matrix) from its four .b32 fragment registers: element
 * e (32/bits per register, low bits first) of register r of lane l holds
 * A[l/4 + 8(r%2)][p(l%4) + e + 4p(r/2)], p = 32/bits (the ISA's figures:
 * f16 pairs, one tf32, four 8-bit values, 32 bits). */
static void gather_a(emu_warp *w, const emu_inst *in, const wg_op *o, double *a)
{
  uint32_t bits = (uint32_t)lpx_mtype_bits(o->at), p = 32 / bits, K = o->kc;
  for (int l = 0; l < 32; l++)
    for (int r = 0; r < 4; r++) {
      uint32_t v = (uint32_t)EMU_R(w, EMU_OP(w, in, o->ka + 1 + r)->reg)[l];
      for (uint32_t e = 0; e < p; e++) {
        uint32_t row = (uint32_t)l / 4 + 8 * (r % 2), k = p * (uint32_t)(l % 4) + e + 4 * p * (r / 2);
        a[row * K + k] = decoders[o->at](field((const uint8_t *)&v, e, bits));
      }
    }
}

/* The value of operand k for a lane (a predicate's negation applied). */
static int64_t arg(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *op = EMU_OP(w, in, k);
  uint64_t v = EMU_R(w, op->reg)[lane];
  return op->neg ? !(v & 1) : (int64_t)v;
}

/* Check the descriptors, scale-d and the immediates agree across the warp;
 * returns the first lane. Messages number operands as PTX does ({d} is 1). */
static int uniform(emu_warp *w, const emu_inst *in, uint32_t m, const wg_op *o, int nimm)
{
  int l0 = __builtin_ctz(m);
  for (int k = o->areg ? o->kb : o->ka; k < o->ks + 1 + nimm; k++)
    if (!o->sp || k != o->kb + 1)                  /* sp-meta differs per thread by design */
      EMU_EACH(m, if (arg(w, in, k, l) != arg(w, in, k, l0))
      return lpx_emu_fail(w, in, l, "wgmma.mma_async operand %d differs between lanes of the warp",
                          k == o->ka ? 2 : 3 + k - o->kb));
  return l0;
}

/* Immediate +1/-1 of operand k (either width of -1). */
static double sign_of(emu_warp *w, const emu_inst *in, int k, int l0)
{
  int64_t v = arg(w, in, k, l0);
  return v == -1 || (int32_t)v == -1 ? -1 : 1;
}

/* Count and check the operands: {d}, a-desc or {a}, b-desc, for .sp sp-meta
 * and sp-sel, scale-d, then the family's immediates; fill o. */
static int operands(emu_warp *w, const emu_inst *in, uint32_t m, wg_op *o)
{
  o->at = in->ext[X_AT]; o->bt = in->ext[X_BT];
  const lpx_wgmma_family *fam = o->fam = lpx_wgmma_family_of(o->at);
  o->sp = (in->ext[X_FLAGS] & W_SP) != 0;
  o->n = (uint32_t)in->ext[X_NB] * 8; o->kc = (uint32_t)fam->k; o->k = (uint32_t)fam->k << o->sp; o->dt = in->ext[X_DT];
  o->nd = o->dt == LPX_MT_F16 ? o->n / 4 : o->n / 2;
  o->ka = 1 + (int)o->nd;
  o->areg = o->ka < in->nops && EMU_OP(w, in, o->ka)->kind == EO_VEC;
  o->kb = o->areg ? o->ka + 5 : o->ka + 1;
  o->ks = o->kb + 1 + 2 * o->sp;
  int nimm = (fam->scale ? 2 : 0) + (fam->trans ? (o->areg ? 1 : 2) : 0);
  if (EMU_OP(w, in, 0)->kind != EO_VEC || (uint32_t)EMU_OP(w, in, 0)->reg != o->nd || in->nops != o->ks + 1 + nimm ||
      (o->areg && EMU_OP(w, in, o->ka)->reg != 4))
    return lpx_emu_fail(w, in, -1, "wgmma.mma_async m64n%uk%u.%s takes %u accumulator registers, A (a descriptor or 4 "
                        "registers), the B descriptor, %sscale-d and %d immediate(s)", o->n, o->k, lpx_mtype_name(o->dt), o->nd,
                        o->sp ? "sp-meta, sp-sel, " : "", nimm);
  int l0 = uniform(w, in, m, o, nimm);
  if (l0 < 0) return -1;
  o->l0 = l0;
  o->scale_d = arg(w, in, o->ks, l0) != 0;
  o->scale = fam->scale ? sign_of(w, in, o->ks + 1, l0) * sign_of(w, in, o->ks + 2, l0) : 1;
  int kt = o->ks + 1 + (fam->scale ? 2 : 0);
  o->ta = fam->trans && !o->areg ? arg(w, in, kt, l0) != 0 : 0;
  o->tb = fam->trans ? arg(w, in, kt + (o->areg ? 0 : 1), l0) != 0 : 0;
  return 0;
}

/* ------------------------------------------------------------ execution */

/* The accumulator element e (0..N/2-1) of lane l as (row, col) of this
 * warp's 16 x N slice: e = 4nb + 2h + j holds D[l/4 + 8h][8nb + 2(l%4) + j]. */
static void coord(int l, uint32_t e, uint32_t *row, uint32_t *col)
{
  uint32_t rest = e % 4;
  *row = (uint32_t)l / 4 + 8 * (rest / 2);
  *col = 8 * (e / 4) + 2 * (uint32_t)(l % 4) + rest % 2;
}

/* D element e of lane l as a double (f16: half e%2 of register e/2). */
static double acc_get(emu_warp *w, const emu_inst *in, int dt, uint32_t e, int l)
{
  uint64_t v = EMU_R(w, EMU_OP(w, in, 1 + (int)(dt == LPX_MT_F16 ? e / 2 : e))->reg)[l];
  if (dt == LPX_MT_F16) return lpx_emu_f16_to_f32((uint16_t)(v >> (16 * (e % 2))));
  return dt == LPX_MT_S32 ? (double)(int32_t)(uint32_t)v : (double)emu_u2f(v);
}

/* Store x as D element e of lane l: rounded once to f32 / f16 (nearest even),
 * or an s32 that wraps (clamps with .satfinite). */
static void acc_put(emu_warp *w, const emu_inst *in, int dt, uint32_t e, int l, double x, int sat)
{
  uint64_t *r = &EMU_R(w, EMU_OP(w, in, 1 + (int)(dt == LPX_MT_F16 ? e / 2 : e))->reg)[l];
  if (dt == LPX_MT_F32) { *r = emu_f2u((float)x); return; }
  if (dt == LPX_MT_S32) {
    if (sat) x = x > 2147483647.0 ? 2147483647.0 : x < -2147483648.0 ? -2147483648.0 : x;
    *r = (uint32_t)(int64_t)x;
    return;
  }
  uint32_t sh = 16 * (e % 2);
  *r = (*r & ~(0xffffull << sh) & 0xffffffffull) | (uint64_t)lpx_emu_f64_to_half(x, 0, LPX_RND_RN) << sh;
}

/* s = A * B^T for the warp's 16 rows (s[row * n + col]) from a (16 x K)
 * and b transposed (bt[k * n + col]), each sum formed from 0 in k order
 * (the same operations as one element at a time), a block of four rows
 * by eight columns at a time, each row of B loaded once for the four
 * (AVX where the host has it). On hosts with FMA (the "fma" clone) the
 * compiler fuses each multiply and add: every product of two elements of
 * the wgmma types is exact in double (at most 11 + 11 significant bits),
 * so the fused sum rounds exactly as the separate one does. */
__attribute__((target_clones("fma", "avx", "default")))
static void wg_product(const double *a, const double *bt, uint32_t K, uint32_t n, double *s)
{
  for (uint32_t row = 0; row < 16; row += 4)
    for (uint32_t c = 0; c < n; c += 8) {
      emu_v4d acc[4][2] = { { { 0, 0, 0, 0 } } };
      const double *ar = a + (size_t)row * K, *bp = bt + c;
      for (size_t kk = 0; kk < K; kk++, bp += n) {
        emu_v4d b0 = *(const emu_v4du *)bp, b1 = *(const emu_v4du *)(bp + 4);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; r++) {
          double x = ar[r * K + kk];
          emu_v4d av = { x, x, x, x };
          acc[r][0] += av * b0;
          acc[r][1] += av * b1;
        }
      }
#pragma GCC unroll 4
      for (uint32_t r = 0; r < 4; r++) {
        *(emu_v4du *)&s[(row + r) * n + c] = acc[r][0];
        *(emu_v4du *)&s[(row + r) * n + c + 4] = acc[r][1];
      }
    }
}

/* Lane l's f32 accumulators d[e] (+)= scale * s, in coord's layout walked
 * directly: e = 4nb + 2h + j is D[l/4 + 8h][8nb + 2(l%4) + j]. keep: add
 * to the old value (scale-d on); else 0.0 + x, the old value not read.
 * Inlined with keep a constant, so each form is a straight loop. */
static inline __attribute__((always_inline)) void acc_f32_lane(uint64_t *const *d, int l, uint32_t ne, uint32_t n, const double *s,
                                                               double scale, int keep)
{
  const double *s0 = s + (uint32_t)(l >> 2) * n + 2 * (uint32_t)(l & 3), *s1 = s0 + 8 * n;
  for (uint32_t e = 0; e < ne; e += 4)
#pragma GCC unroll 4
    for (uint32_t j = 0; j < 4; j++) {
      double old = keep ? (double)emu_u2f(d[e + j][l]) : 0.0;
      d[e + j][l] = emu_f2u((float)(old + scale * (j < 2 ? s0 : s1)[2 * e + (j & 1)]));
    }
}

typedef float wg_v4f __attribute__((vector_size(16)));
typedef uint32_t wg_v4w __attribute__((vector_size(16)));
typedef int64_t wg_v4l __attribute__((vector_size(32)));
typedef uint64_t wg_v4q __attribute__((vector_size(32), aligned(8)));

/* Four lanes' f32 accumulators q[0..3] (+)= scale * x, each as
 * acc_f32_lane does one: the old value (keep) or 0.0, plus scale * x, in
 * double, rounded once to f32. */
static inline __attribute__((always_inline)) void acc_f32_four(uint64_t *q, emu_v4d x, double scale, int keep)
{
  emu_v4d old = { 0, 0, 0, 0 };
  if (keep) old = __builtin_convertvector((wg_v4f)__builtin_convertvector(*(const wg_v4q *)q, wg_v4w), emu_v4d);
  wg_v4f f = __builtin_convertvector(old + scale * x, wg_v4f);
  *(wg_v4q *)q = __builtin_convertvector((wg_v4w)f, wg_v4q);
}

/* Every lane's f32 accumulators (a full warp), four lanes a step: the
 * eight sums s[(g + 8h) * n + 8nb ..] hold, at even and odd places, the
 * elements 4nb + 2h and 4nb + 2h + 1 of lanes 4g..4g+3 (acc_f32_lane's
 * layout). */
static inline __attribute__((always_inline)) void acc_f32_warp(uint64_t *const *d, uint32_t ne, uint32_t n, const double *s,
                                                               double scale, int keep)
{
  for (uint32_t e = 0; e < ne; e += 2)
    for (uint32_t g = 0; g < 8; g++) {
      const double *p = s + (g + 8 * ((e >> 1) & 1)) * n + 8 * (e >> 2);
      emu_v4d lo = *(const emu_v4du *)p, hi = *(const emu_v4du *)(p + 4);
      acc_f32_four(d[e] + 4 * g, __builtin_shuffle(lo, hi, (wg_v4l){ 0, 2, 4, 6 }), scale, keep);
      acc_f32_four(d[e + 1] + 4 * g, __builtin_shuffle(lo, hi, (wg_v4l){ 1, 3, 5, 7 }), scale, keep);
    }
}

/* D (+)= A * B^T for this warp's 16 rows from the decoded a (16 x K) and
 * B transposed (bt, K x N); s holds 16 x N doubles (the sums). */
static void accumulate(emu_warp *w, const emu_inst *in, uint32_t m, const wg_op *o, const double *a, const double *bt,
                       double *s)
{
  uint32_t K = o->k, n = o->n, ne = n / 2;
  int sat = (in->ext[X_FLAGS] & W_SAT) != 0;
  wg_product(a, bt, K, n, s);
  if (o->dt == LPX_MT_F32) {   /* the common case: one f32 register an element, looked up once */
    uint64_t *d[128];
    for (uint32_t e = 0; e < ne; e++) d[e] = EMU_R(w, EMU_OP(w, in, 1 + (int)e)->reg);
    if (m == EMU_FULL) {
      if (o->scale_d) acc_f32_warp(d, ne, n, s, o->scale, 1);
      else acc_f32_warp(d, ne, n, s, o->scale, 0);
      return;
    }
    if (o->scale_d) EMU_EACH(m, acc_f32_lane(d, l, ne, n, s, o->scale, 1));
    else EMU_EACH(m, acc_f32_lane(d, l, ne, n, s, o->scale, 0));
    return;
  }
  EMU_EACH(m, {
    for (uint32_t e = 0; e < ne; e++) {
      uint32_t row, col;
      coord(l, e, &row, &col);
      double old = o->scale_d ? acc_get(w, in, o->dt, e, l) : 0.0;
      acc_put(w, in, o->dt, e, l, old + o->scale * s[row * n + col], sat);
    }
  });
}

/* ------------------------------------------------------------ sparse A */

/* Where the metadata of chunk c of warp row g + 8h lies, per family (the
 * ISA's metadata figures for m64nNk32/k16/k64, which are those of mma.sp
 * m16n8k32 f16, m16n8k16 tf32 and m16n8k64 8-bit): the lane of the group
 * of four holding it and the bit of its 2-bit index pair (tf32: 4-bit
 * field). 16-bit and tf32: the thread pair `sel` supplies it, the pair's
 * first thread chunks 0-3, the second 4-7, row g in bits 0-15 and g + 8
 * in bits 16-31; 8-bit: all four threads, lane % 2 picks the row and
 * lane / 2 % 2 the 32 columns, chunk c % 8 in bits 4(c % 8) up. */
static void meta_at(int fam, uint32_t g, uint32_t h, uint32_t c, uint32_t sel, int *lane, uint32_t *bit)
{
  if (meta_by_four(fam)) { *lane = (int)(4 * g + h + 2 * (c / 8)); *bit = 4 * (c % 8); return; }
  *lane = (int)(4 * g + 2 * sel + c / 4);
  *bit = 16 * h + 4 * (c % 4);
}

/* The dense positions (within its chunk) of the kept elements of one
 * metadata field: two 2-bit indices, the first for the chunk's first
 * stored element; tf32's 4-bit field is 0b0100 (element 0) or 0b1110
 * (element 1). The ISA leaves equal indices (0b0000, 0b0101, 0b1010,
 * 0b1111) and other tf32 values undefined: returns -1 for those. */
static int meta_idx(int fam, uint32_t f, uint32_t idx[2])
{
  if (fam == LPX_MT_TF32) {
    if (f != 0x4 && f != 0xe) return -1;
    idx[0] = f == 0xe;
    return 0;
  }
  idx[0] = f & 3;
  idx[1] = f >> 2 & 3;
  return idx[0] == idx[1] ? -1 : 0;
}

/* Expand this warp's stored A (16 x K/2) into the dense 16 x K through the
 * metadata: chunk c of each row (4 wide, 2 kept; tf32 2 wide, 1 kept)
 * takes its stored elements at the indices the metadata names, zeros
 * elsewhere. */
static int expand_sparse(emu_warp *w, const emu_inst *in, const wg_op *o, const double *comp, double *a)
{
  int fam = o->fam->family, keep = fam == LPX_MT_TF32 ? 1 : 2;
  uint32_t cw = fam == LPX_MT_TF32 ? 2 : 4, nch = o->k / cw;
  uint32_t sel = (uint32_t)arg(w, in, o->kb + 2, o->l0);
  const uint64_t *meta = EMU_R(w, EMU_OP(w, in, o->kb + 1)->reg);
  memset(a, 0, sizeof(double) * 16 * o->k);
  for (uint32_t r = 0; r < 16; r++)
    for (uint32_t c = 0; c < nch; c++) {
      int lane;
      uint32_t bit, idx[2];
      meta_at(fam, r % 8, r / 8, c, sel, &lane, &bit);
      uint32_t f = (uint32_t)(meta[lane] >> bit) & 0xf;
      if (meta_idx(fam, f, idx))
        return lpx_emu_fail(w, in, lane, "sparse wgmma: metadata 0x%x (bits %u-%u of sp-meta) for row %u, columns %u-%u of "
                            "A is undefined in the ISA (%s)", f, bit + 3, bit, 16 * (w->id % 4) + r, c * cw, c * cw + cw - 1,
                            fam == LPX_MT_TF32 ? "tf32 takes 0b0100 or 0b1110" : "the two indices must differ");
      for (int s = 0; s < keep; s++) a[r * o->k + c * cw + idx[s]] = comp[r * o->kc + c * (uint32_t)keep + (uint32_t)s];
    }
  return 0;
}

/* A K-major sparse B spans 64 bytes of K per row; in a 32B swizzle the ISA
 * does not say where the second 32 bytes lie, so that case is reported. */
static int check_sparse_b(emu_warp *w, const emu_inst *in, const wg_op *o, const emu_mdesc *db)
{
  if (!o->sp || o->tb || db->span != 32) return 0;
  return lpx_emu_fail(w, in, o->l0, "sparse wgmma: a K-major B of 64 bytes per row in a 32B swizzle is not modelled "
                      "(the ISA does not say where the second 32-byte half lies); use no swizzle, 64B or 128B");
}

/* B transposed (K x N) for this warp: kept by an earlier warp's read of
 * the same B in this epoch (emu_wgb.c), else read into b (N x K, every
 * check made) and transposed into a slot (kept for the next warps when
 * it may be) or into bt. NULL when the read failed. */
static const double *load_b(emu_warp *w, const emu_inst *in, const wg_op *o, const emu_mdesc *db, uint64_t desc, double *b,
                            double *bt)
{
  const double *kept = lpx_emu_wgb_find(w, in, desc);
  if (kept) return kept;
  uint32_t K = o->k, n = o->n;
  int slot = lpx_emu_wgb_take(w->cta, in, desc, (size_t)K * n, &bt);
  emu_mdread r = { o->tb, o->bt, K, 0, n, 0, "wgmma.mma_async" };
  if (lpx_emu_mdesc_read(w, in, o->l0, db, &r, b)) return NULL;
  for (uint32_t col = 0; col < n; col++)
    for (uint32_t kk = 0; kk < K; kk++) bt[kk * n + col] = b[col * K + kk];
  if (slot < 0) return bt;
  uint32_t per, rows, chunks, nc = 0, *at = malloc(sizeof(uint32_t) * K * n);
  if (!at) return bt;   /* not kept: its slot stays empty */
  read_shape(&r, &per, &rows, &chunks);
  for (uint32_t i = 0; i < rows; i++)
    for (uint32_t c = 0; c < chunks; c++) at[nc++] = (uint32_t)read_chunk(db, &r, per, i, c);
  lpx_emu_wgb_keep(w, in, desc, slot, at, nc);
  free(at);
  return bt;
}

/* Read this warp's A (16 x K, expanded from the stored K/2 for .sp) into a
 * and B (transposed, K x N: *bt, lpx_emu_wgb's or in scratch, b as room). */
static int load_ab(emu_warp *w, const emu_inst *in, const wg_op *o, const emu_mdesc *da, const emu_mdesc *db, uint64_t desc,
                   double *a, double *b, double *scratch, const double **bt)
{
  double *stored = o->sp ? b + o->n * o->k : a;
  if (o->areg) gather_a(w, in, o, stored);
  if (!o->areg && read_operand(w, in, o->l0, da, o->ta, o->at, o->kc, 16 * (w->id % 4), 16, stored)) return -1;
  if (!(*bt = load_b(w, in, o, db, desc, b, scratch))) return -1;
  return o->sp ? expand_sparse(w, in, o, stored, a) : 0;
}

/* wgmma.mma_async{.sp}: this warp's 16 rows of D (+)= A * B. */
/* The ISA's wgmma.fence rule: one before the warp's first wgmma.mma_async,
 * and one between a register write and a wgmma that reads the register
 * (accumulators across wgmmas of one shape are ordered without it). */
static int check_fence(emu_warp *w, const emu_inst *in)
{
  char where[512];
  if (!w->wg_fenced)
    return lpx_emu_fail(w, in, -1, "wgmma.mma_async with no wgmma.fence before it: the warp's first wgmma needs one "
                        "(%s before the first wgmma.mma_async)", lpx_emu_spell(w, in, "ptx.wgmma.fence()", "wgmma.fence.sync.aligned"));
  if (!w->wg_write) return 0;
  lpx_emu_where(w->p, w->wg_write, where, sizeof where);
  return lpx_emu_fail(w, in, -1, "wgmma.mma_async reads registers that %s wrote after the last wgmma.fence: the ISA "
                      "needs a wgmma.fence between a register write and the wgmma that reads it", where);
}

HANDLER(op_wgmma)
{
  if (m != w->exists) return lpx_emu_fail(w, in, -1, "wgmma.mma_async needs every thread of the warp converged");
  if (check_fence(w, in)) return -1;
  wg_op o = { 0 };
  if (operands(w, in, m, &o)) return -1;
  uint64_t bdesc = (uint64_t)arg(w, in, o.kb, o.l0);
  emu_mdesc da = unpack_desc(o.areg ? 0 : (uint64_t)arg(w, in, o.ka, o.l0)), db = unpack_desc(bdesc);
  if ((!o.areg && lpx_emu_mdesc_check(w, in, o.l0, &da, "A")) || lpx_emu_mdesc_check(w, in, o.l0, &db, "B") || check_sparse_b(w, in, &o, &db))
    return -1;
  size_t nab = o.k * (16 + o.n) + 16 * o.kc;   /* then accumulate's scratch */
  double *a = malloc(sizeof(double) * (nab + o.n * (o.k + 16))), *b = a + 16 * o.k;
  if (!a) return lpx_emu_fail(w, in, -1, "out of memory");
  const double *bt = NULL;
  int rc = load_ab(w, in, &o, &da, &db, bdesc, a, b, a + nab, &bt);
  if (!rc) accumulate(w, in, m, &o, a, bt, a + nab + (size_t)o.k * o.n);
  free(a);
  return rc;
}

/* ------------------------------------------------- groups of a warpgroup */

/* One wgmma.mma_async is one MMA of the whole warpgroup (.aligned): it
 * cannot complete before all four warps have issued it. So a warp's
 * wgmma.wait_group waits until every live warp of its warpgroup has
 * committed the groups it waits for; then the MMAs of those groups are
 * complete for the warpgroup (their shared-memory reads too: emu_sched.c
 * retires them), and one thread may release their buffers for all four
 * warps, as CUTLASS's and pyptx's consumers do (docs/emulator.md). */

/* The first warp of w's warpgroup and one past its last. */
static void warpgroup_of(const emu_warp *w, int *lo, int *hi)
{
  *lo = (int)(w->id / 4 * 4);
  *hi = *lo + 4 < w->cta->nwarps ? *lo + 4 : w->cta->nwarps;
}

/* Has every other live warp of w's warpgroup committed `need` groups? */
static int warpgroup_committed(const emu_warp *w, uint32_t need)
{
  int lo, hi;
  warpgroup_of(w, &lo, &hi);
  for (int k = lo; k < hi; k++) {
    const emu_warp *q = &w->cta->warps[k];
    if (q != w && q->live && q->wg_commits < need) return 0;
  }
  return 1;
}

/* Release the lanes of w's warpgroup blocked at a wgmma.wait_group whose
 * groups every warp has now committed. */
static void warpgroup_settle(emu_warp *w)
{
  int lo, hi;
  warpgroup_of(w, &lo, &hi);
  for (int k = lo; k < hi; k++) {
    emu_warp *q = &w->cta->warps[k];
    uint32_t at = 0, b = q->blocked;
    EMU_EACH(b, if (q->bar_of[l] == EMU_WGMMA_WAIT) at |= 1u << l);
    if (!at || !warpgroup_committed(q, q->wg_need)) continue;
    EMU_EACH(at, {
      q->blocked &= ~(1u << l);
      if (++q->pc[l] < q->other_min) q->other_min = q->pc[l];
    });
  }
}

/* wgmma.commit_group: one more group for the warp; a sibling waiting for it may go on. */
HANDLER(op_commit)
{
  (void)in; (void)m;
  w->wg_commits++;
  warpgroup_settle(w);
  return 0;
}

/* wgmma.wait_group N: the MMAs themselves completed when issued; the warp
 * blocks until the other warps of its warpgroup have issued them too. */
HANDLER(op_wait)
{
  uint32_t n = (uint32_t)EMU_R(w, EMU_OP(w, in, 0)->reg)[__builtin_ctz(m ? m : 1)];
  uint32_t need = w->wg_commits > n ? w->wg_commits - n : 0;
  if (!m || warpgroup_committed(w, need)) return 0;
  int32_t pc = w->cur_pc;
  uint32_t cur = w->cur;
  w->cur = 0;
  EMU_EACH(cur, w->pc[l] = (m >> l & 1) ? pc : pc + 1);
  w->blocked |= m;
  w->wg_need = need;
  EMU_EACH(m, w->bar_of[l] = EMU_WGMMA_WAIT);
  return 0;
}

/* wgmma.fence: orders the warp's register writes before its next wgmmas. */
HANDLER(op_fence)
{
  (void)in; (void)m;
  w->wg_fenced = 1;
  w->wg_write = NULL;
  return 0;
}

/* ------------------------------------------------------------ decoding */

/* Record N, the D / A / B types and the flags of a wgmma.mma_async form
 * from its record; a form the ISA's list lacks keeps X_NB 0 (not run). */
void lpx_emu_decode_wgmma(emu_inst *in, const lpx_form *fo)
{
  const lpx_form_info *fi = &fo->info;
  memset(in->ext, 0, sizeof in->ext);
  if (lpx_wgmma_form_check(fo, NULL, 0)) return;
  in->ext[X_NB] = (uint8_t)(fi->shape_n / 8);
  in->ext[X_DT] = (uint8_t)fi->dtype; in->ext[X_AT] = (uint8_t)fi->atype; in->ext[X_BT] = (uint8_t)fi->btype;
  in->ext[X_FLAGS] = (uint8_t)((fi->satfinite ? W_SAT : 0) | (fi->sparse ? W_SP : 0));
}

/* Handler of the wgmma rows (NULL: reported as not implemented). */
emu_fn lpx_emu_pick_wgmma(const emu_inst *in)
{
  if (in->op == LPX_OP_WGMMA) return in->ext[X_NB] ? op_wgmma : NULL;
  if (in->op == LPX_OP_WGCOMMIT) return op_commit;
  return in->op == LPX_OP_WGWAIT ? op_wait : op_fence;
}
