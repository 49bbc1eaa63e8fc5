/* Bulk reductions on the emulator: cp.reduce.async.bulk from shared::cta
 * into global memory (bulk group) or into the shared memory of a CTA of
 * the cluster (completing bytes on an mbarrier), element by element with
 * the ISA's operations; and the element reduction the tensor form
 * (emu_tma.c) shares. Reductions into global memory are host atomics:
 * CTAs on other host threads may reduce into the same elements. Like the
 * other bulk copies, a reduction happens at once. */
#include "emu.h"
#include <math.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)

/* The element types each operation (an LPX_ATOMOP_* value) takes into .global. */
static const uint64_t global_types[LPX_ATOMOP__END] = {
#define X(op, global, cluster) [LPX_ATOMOP_##op] = global,
  LPX_BULK_REDOPS(X)
#undef X
};

/* Does a reduction into global memory take this (operation, type)? */
int lpx_emu_reduce_type_ok(int op, int type)
{
  return op > 0 && op < LPX_ATOMOP__END && type >= 0 && (global_types[op] >> type & 1);
}

/* ----------------------------------------------------------- elements */

/* An f32 with subnormals flushed to a zero of the same sign. */
static float flush(float x)
{
  return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

/* min or max as PTX computes them: a NaN operand yields the other; -0 < +0. */
static double pick_minmax(double a, double b, int max)
{
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  if (a == b) return (signbit(a) != 0) != max ? a : b;
  return (a < b) != max ? a : b;
}

/* A float element's value (exact in a double). */
static double fval(int type, uint64_t v)
{
  if (type == LPX_T_F16) return lpx_emu_f16_to_f32((uint16_t)v);
  if (type == LPX_T_BF16) return lpx_emu_bf16_to_f32((uint16_t)v);
  return type == LPX_T_F32 ? emu_u2f(v) : emu_u2d(v);
}

/* A double rounded once to a float element type (nearest even). */
static uint64_t fbits(int type, double x)
{
  if (type == LPX_T_F16 || type == LPX_T_BF16) return lpx_emu_f64_to_half(x, type == LPX_T_BF16, LPX_RND_RN);
  return type == LPX_T_F32 ? emu_f2u((float)x) : emu_d2u(x);
}

/* The new value of a float element. .add.f32 flushes subnormal inputs and
 * results (the ISA's note on cp.reduce.async.bulk); f16/bf16 (.noftz) and
 * f64 keep them. A sum of two halves or two floats is exact in a double,
 * so rounding it once gives the correctly rounded result. */
static uint64_t float_apply(int op, int type, uint64_t old, uint64_t b)
{
  if (op == LPX_ATOMOP_ADD && type == LPX_T_F32) return emu_f2u(flush(flush(emu_u2f(old)) + flush(emu_u2f(b))));
  double x = fval(type, old), y = fval(type, b);
  return op == LPX_ATOMOP_ADD ? fbits(type, x + y) : fbits(type, pick_minmax(x, y, op == LPX_ATOMOP_MAX));
}

/* The new value of an element: old reduced with the source value b. */
static uint64_t apply(int op, int type, uint64_t old, uint64_t b)
{
  char k = lpx_types[type].kind;
  return k == 'F' ? float_apply(op, type, old, b) : lpx_emu_atom_apply(op, type, old, b, 0);
}

/* Swap in nv if the element still holds *old (2, 4 or 8 bytes); 1 on success. */
static int cas(uint8_t *p, int size, uint64_t *old, uint64_t nv)
{
  if (size == 8) return __atomic_compare_exchange_n((uint64_t *)p, old, nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
  if (size == 4) {
    uint32_t o = (uint32_t)*old;
    int ok = __atomic_compare_exchange_n((uint32_t *)p, &o, (uint32_t)nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
    *old = o;
    return ok;
  }
  uint16_t o = (uint16_t)*old;
  int ok = __atomic_compare_exchange_n((uint16_t *)p, &o, (uint16_t)nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
  *old = o;
  return ok;
}

/* Reduce the source element src into dst (a PTX element type; atomic: by
 * compare-and-swap). Returns 0. */
int lpx_emu_reduce_elem(int op, int type, uint8_t *dst, const uint8_t *src, int atomic)
{
  int size = lpx_types[type].bits / 8;
  uint64_t old = 0, b = 0, nv;
  memcpy(&old, dst, (size_t)size);
  memcpy(&b, src, (size_t)size);
  if (!atomic) {
    nv = apply(op, type, old, b);
    memcpy(dst, &nv, (size_t)size);
    return 0;
  }
  while (!cas(dst, size, &old, apply(op, type, old, b))) {}
  return 0;
}

/* ------------------------------------------------------- the instruction */

/* One lane's reduction of size bytes at [src] into [dst]. */
static int reduce_lane(emu_warp *w, const emu_inst *in, int lane, int dsp, uint64_t da, uint64_t sa, uint32_t n)
{
  if (n % 16) return lpx_emu_fail(w, in, lane, "cp.reduce.async.bulk size %u is not a multiple of 16", n);
  if (da % 16 || sa % 16)
    return lpx_emu_fail(w, in, lane, "cp.reduce.async.bulk addresses must be 16-byte aligned: [dst] = 0x%llx, [src] = 0x%llx",
                        (unsigned long long)da, (unsigned long long)sa);
  if (!n) return 0;
  if (lpx_emu_proxy_check(w, in, lane, sa, n, "this bulk reduction")) return -1;
  const uint8_t *s = lpx_emu_addr_span(w, in, lane, EMU_SP_SHARED, sa, n, 0);
  uint8_t *d = s ? lpx_emu_addr_span(w, in, lane, dsp, da, n, dsp == EMU_SP_SHARED ? 1 : 2) : NULL;
  if (!d) return -1;
  int type = in->type, op = in->mod[LPX_GB_ATOMOP], size = lpx_types[type].bits / 8;
  for (uint32_t i = 0; i < n; i += (uint32_t)size) lpx_emu_reduce_elem(op, type, d + i, s + i, dsp != EMU_SP_SHARED);
  return 0;
}

/* cp.reduce.async.bulk [dst], [src], size{, [mbar] | , policy}: each lane
 * reduces its array at once; into shared::cluster it then completes size
 * bytes on the barrier. */
int lpx_emu_op_reduce(emu_warp *w, const emu_inst *in, uint32_t m)
{
  int dsp = lpx_emu_space(in);
  if (dsp == EMU_SP_GENERIC) dsp = EMU_SP_GLOBAL;
  int with_mbar = in->nops > 3 && EMU_OP(w, in, 3)->kind == EO_ADDR;
  const emu_op *dop = EMU_OP(w, in, 0), *sop = EMU_OP(w, in, 1);
  const uint64_t *sz = D(2);
  EMU_EACH(m, {
    uint64_t da = (dop->reg >= 0 ? EMU_R(w, dop->reg)[l] : 0) + (uint64_t)dop->off;
    uint64_t sa = (sop->reg >= 0 ? EMU_R(w, sop->reg)[l] : 0) + (uint64_t)sop->off;
    if (reduce_lane(w, in, l, dsp, da, sa, (uint32_t)sz[l])) return -1;
    if (with_mbar && lpx_emu_mbar_complete(w, in, 3, l, (int64_t)(uint32_t)sz[l])) return -1;
  });
  return 0;
}
