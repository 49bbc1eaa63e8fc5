/* Hopper warpgroup MMA on the emulator: wgmma.mma_async.sync.aligned
 * m64nNk16 with f16/bf16 A and B read from shared memory through matrix
 * descriptors (K-major canonical layouts: interleave, 32B, 64B, 128B
 * swizzle) and f32 accumulators in the documented fragment layout
 * (register 4*nb + 2*i + j of lane l of warp w holds D[16w + l/4 + 8i]
 * [8nb + 2(l%4) + j]). Each warp computes its own 16 rows, so the four
 * warps of a warpgroup need not run in lockstep. The MMA completes at
 * once (a valid schedule); fence / commit_group / wait_group have nothing
 * to wait for. Products are exact; each output's sum is formed in double
 * and rounded once. */
#include "emu.h"
#include <stdio.h>
#include <stdlib.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

enum { X_NB, X_AT, X_DT };          /* in->ext: N/8, A/B type (1 bf16, 2 f16), D type (1 f32) */

/* Swizzle span in bytes of each descriptor layout code (bits 62-63). */
static const uint32_t span_of[4] = { 0, 128, 64, 32 };

/* A decoded shared-memory matrix descriptor. */
typedef struct mdesc { uint64_t start, lbo, sbo; uint32_t span; } mdesc;

/* Unpack a descriptor: start address, LBO, SBO (all >> 4) and layout. */
static mdesc unpack_desc(uint64_t v)
{
  mdesc d = { (v & 0x3fff) << 4, ((v >> 16) & 0x3fff) << 4, ((v >> 32) & 0x3fff) << 4, span_of[v >> 62] };
  return d;
}

/* Shared byte address of element (r, k) of a K-major operand (esize 2). */
static uint64_t elem_addr(const mdesc *d, uint32_t r, uint32_t k)
{
  uint64_t kb = (uint64_t)k * 2;
  if (!d->span) return d->start + (r / 8) * d->sbo + (kb / 16) * d->lbo + (r % 8) * 16 + kb % 16;
  uint64_t a = d->start + (r / 8) * d->sbo + (r % 8) * d->span + kb;
  uint64_t mask = d->span / 16 - 1;
  return a ^ (((a >> 7) & mask) << 4);
}

/* Layout names of swizzle spans, for messages. */
static const char *span_name(uint32_t span)
{
  return span == 128 ? "128B swizzle" : span == 64 ? "64B swizzle" : span == 32 ? "32B swizzle" : "no swizzle (interleave)";
}

/* A descriptor whose swizzle disagrees with how TMA wrote the tile is reported. */
static int check_swizzle(emu_warp *w, const emu_inst *in, int lane, const mdesc *d, const char *which)
{
  uint32_t span;
  const emu_inst *by;
  if (!lpx_emu_tma_swizzle_at(w->cta, d->start, &span, &by) || span == d->span) return 0;
  char where[512];
  lpx_emu_where(w->p, by, where, sizeof where);
  return lpx_emu_fail(w, in, lane, "the %s descriptor reads shared memory at 0x%llx with %s, but the TMA load at %s "
                      "wrote it with %s", which, (unsigned long long)d->start, span_name(d->span), where, span_name(span));
}

/* Read rows r0..r0+n-1, k 0..15 of an operand into out[n][16] as floats. */
static int read_operand(emu_warp *w, const emu_inst *in, int lane, const mdesc *d, uint32_t r0, uint32_t n,
                        int bf16, double *out)
{
  for (uint32_t r = 0; r < n; r++)
    for (uint32_t k = 0; k < 16; k++) {
      uint64_t ea = elem_addr(d, r0 + r, k);
      const uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, ea, 2, 0);
      if (!p || lpx_emu_proxy_check(w, in, lane, ea, 2, "wgmma.mma_async")) return -1;
      uint16_t h;
      memcpy(&h, p, 2);
      out[r * 16 + k] = bf16 ? lpx_emu_bf16_to_f32(h) : lpx_emu_f16_to_f32(h);
    }
  return 0;
}

/* The value of operand k for a lane (a predicate's negation applied). */
static int64_t arg(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *o = EMU_OP(w, in, k);
  uint64_t v = EMU_R(w, o->reg)[lane];
  return o->neg ? !(v & 1) : (int64_t)v;
}

/* Check the operands that must agree across the warp; returns the first lane. */
static int uniform(emu_warp *w, const emu_inst *in, uint32_t m, int first_k, int nk)
{
  int l0 = __builtin_ctz(m);
  for (int k = first_k; k < first_k + nk; k++)
    EMU_EACH(m, if (arg(w, in, k, l) != arg(w, in, k, l0))
      return lpx_emu_fail(w, in, l, "wgmma operand %d differs between lanes of the warp", k - first_k + 1));
  return l0;
}

/* Gather this warp's 16x16 A from the A fragment registers: half e of
 * register r of lane l holds A[l/4 + 8(r%2)][2(l%4) + e + 8(r/2)]. */
static void gather_a(emu_warp *w, const emu_inst *in, int k, int bf16, double *a)
{
  for (int l = 0; l < 32; l++)
    for (int r = 0; r < 4; r++) {
      uint32_t v = (uint32_t)EMU_R(w, EMU_OP(w, in, k + 1 + r)->reg)[l];
      for (int e = 0; e < 2; e++) {
        uint16_t h = (uint16_t)(v >> (16 * e));
        int row = l / 4 + 8 * (r % 2), kk = 2 * (l % 4) + e + 8 * (r / 2);
        a[row * 16 + kk] = bf16 ? lpx_emu_bf16_to_f32(h) : lpx_emu_f16_to_f32(h);
      }
    }
}

/* Immediate +1/-1 of operand k. */
static double sign_of(emu_warp *w, const emu_inst *in, int k, int l0)
{
  return arg(w, in, k, l0) == (int64_t)-1 || (int32_t)arg(w, in, k, l0) == -1 ? -1 : 1;
}

/* wgmma.mma_async: this warp's 16 rows of D (+)= A * B^T. A from a shared
 * descriptor or from four .b32 registers (then no imm-trans-a). */
HANDLER(op_wgmma)
{
  uint32_t n = (uint32_t)in->ext[X_NB] * 8, nreg = n / 2;
  if (m != w->exists) return lpx_emu_fail(w, in, -1, "wgmma.mma_async needs every thread of the warp converged");
  int k = 1 + (int)nreg, areg = k < in->nops && EMU_OP(w, in, k)->kind == EO_VEC;
  int kb = areg ? k + 5 : k + 1, nimm = areg ? 5 : 6;     /* b-desc, scale-d, scale-a, scale-b, trans(-a), trans-b */
  if (EMU_OP(w, in, 0)->kind != EO_VEC || (uint32_t)EMU_OP(w, in, 0)->reg != nreg || in->nops < kb + nimm ||
      (areg && EMU_OP(w, in, k)->reg != 4))
    return lpx_emu_fail(w, in, -1, "wgmma.mma_async m64n%uk16 takes %u f32 accumulator registers, then A (a descriptor "
                        "or 4 registers) and the B descriptor", n, nreg);
  int l0 = uniform(w, in, m, kb, nimm);
  if (l0 < 0) return -1;
  if (arg(w, in, kb + 4, l0) || (!areg && arg(w, in, kb + 5, l0)))
    return lpx_emu_fail(w, in, l0, "the emulator runs K-major wgmma operands only (imm-trans-a/b = 0)");
  mdesc da = unpack_desc(areg ? 0 : (uint64_t)arg(w, in, k, l0)), db = unpack_desc((uint64_t)arg(w, in, kb, l0));
  int bf16 = in->ext[X_AT] == 1, scale_d = arg(w, in, kb + 1, l0) != 0;
  double sa = sign_of(w, in, kb + 2, l0), sb = sign_of(w, in, kb + 3, l0);
  if ((!areg && check_swizzle(w, in, l0, &da, "A")) || check_swizzle(w, in, l0, &db, "B")) return -1;
  uint32_t wq = w->id % 4;
  double *a = malloc(sizeof(double) * 16 * (16 + n)), *b = a + 16 * 16;
  if (!a) return lpx_emu_fail(w, in, -1, "out of memory");
  if (areg) gather_a(w, in, k, bf16, a);
  if ((!areg && read_operand(w, in, l0, &da, 16 * wq, 16, bf16, a)) || read_operand(w, in, l0, &db, 0, n, bf16, b)) {
    free(a);
    return -1;
  }
  EMU_EACH(m, {
    for (uint32_t i = 0; i < nreg; i++) {
      uint32_t rest = i % 4, row = l / 4 + 8 * (rest / 2), col = 8 * (i / 4) + 2 * (uint32_t)(l % 4) + rest % 2;
      double s = 0;
      for (int kk = 0; kk < 16; kk++) s += a[row * 16 + kk] * b[col * 16 + kk];
      uint64_t *dr = D(1 + (int)i);
      double old = scale_d ? (double)emu_u2f(dr[l]) : 0.0;
      dr[l] = emu_f2u((float)(old + sa * sb * s));
    }
  });
  free(a);
  return 0;
}

/* fence / commit_group / wait_group: the MMAs already completed. */
HANDLER(op_nop) { (void)w; (void)in; (void)m; return 0; }

/* Read N, the A/B type and the D type of a wgmma.mma_async form from its text. */
void lpx_emu_decode_wgmma(emu_inst *in, const char *text)
{
  unsigned mm = 0, nn = 0, kk = 0;
  const char *s = strstr(text, ".m64n");
  if (s && sscanf(s, ".m%un%uk%u", &mm, &nn, &kk) == 3 && mm == 64 && kk == 16 && nn % 8 == 0 && nn <= 256)
    in->ext[X_NB] = (uint8_t)(nn / 8);
  in->ext[X_AT] = strstr(text, ".bf16.bf16") ? 1 : strstr(text, ".f16.f16") ? 2 : 0;
  in->ext[X_DT] = strstr(text, "k16.f32.") ? 1 : 0;
}

/* Handler of the wgmma rows. */
emu_fn lpx_emu_pick_wgmma(const emu_inst *in)
{
  if (in->op == LPX_OP_WGMMA) return in->ext[X_NB] && in->ext[X_AT] && in->ext[X_DT] ? op_wgmma : NULL;
  return op_nop;
}
