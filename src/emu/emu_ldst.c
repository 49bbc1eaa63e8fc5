/* Memory instructions: ld/ldu/st in every state space with vector widths,
 * atom/red (all ops and types, lanes in order, host atomics so CTAs on
 * other host threads see them), cvta between generic and space addresses.
 * Every address goes through lpx_emu_addr, which checks it. */
#include "emu.h"
#include <math.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* ------------------------------------------------------------- helpers */

/* EMU_SP_* of an instruction's state space (.SPACE; generic when none). */
int lpx_emu_space(const emu_inst *in)
{
  static const uint8_t map[LPX_SPACE__END] = {
    [LPX_SPACE_GLOBAL] = EMU_SP_GLOBAL, [LPX_SPACE_SHARED] = EMU_SP_SHARED, [LPX_SPACE_LOCAL] = EMU_SP_LOCAL,
    [LPX_SPACE_PARAM] = EMU_SP_PARAM, [LPX_SPACE_CONST] = EMU_SP_CONST, [LPX_SPACE_GENERIC] = EMU_SP_GENERIC,
    [LPX_SPACE_SHARED_CTA] = EMU_SP_SHARED, [LPX_SPACE_SHARED_CLUSTER] = EMU_SP_SHARED,
    [LPX_SPACE_PARAM_ENTRY] = EMU_SP_PARAM, [LPX_SPACE_PARAM_FUNC] = EMU_SP_PARAM,
  };
  return in->mod[LPX_GB_SPACE] < LPX_SPACE__END ? map[in->mod[LPX_GB_SPACE]] : EMU_SP_GENERIC;
}

/* EMU_SP_* of an instruction's second state space (.SPACE2: a copy's source). */
int lpx_emu_space2(const emu_inst *in)
{
  static const uint8_t map[LPX_SPACE2__END] = {
    [LPX_SPACE2_GLOBAL] = EMU_SP_GLOBAL, [LPX_SPACE2_SHARED] = EMU_SP_SHARED, [LPX_SPACE2_LOCAL] = EMU_SP_LOCAL,
    [LPX_SPACE2_PARAM] = EMU_SP_PARAM, [LPX_SPACE2_CONST] = EMU_SP_CONST, [LPX_SPACE2_GENERIC] = EMU_SP_GENERIC,
    [LPX_SPACE2_SHARED_CTA] = EMU_SP_SHARED, [LPX_SPACE2_SHARED_CLUSTER] = EMU_SP_SHARED,
  };
  return in->mod[LPX_GB_SPACE2] < LPX_SPACE2__END ? map[in->mod[LPX_GB_SPACE2]] : EMU_SP_GENERIC;
}

/* The space an access uses: the instruction's, else its symbol's. */
static int access_space(const emu_inst *in, const emu_op *ao, uint64_t *bias)
{
  int sp = lpx_emu_space(in);
  *bias = 0;
  if (ao->reg < 0 && ao->space == EMU_SP_FRAME) return EMU_SP_FRAME;   /* ld/st.param of a call's .param */
  if (sp != EMU_SP_GENERIC || ao->reg >= 0 || ao->space == EMU_SP_GENERIC) return sp;
  /* A generic access through a symbol: its generic address is in a window. */
  if (ao->space == EMU_SP_SHARED) *bias = EMU_SHARED_WINDOW;
  else if (ao->space == EMU_SP_LOCAL) *bias = EMU_LOCAL_WINDOW;
  else if (ao->space == EMU_SP_PARAM) return EMU_SP_PARAM;
  return EMU_SP_GENERIC;
}

/* The address an ADDR operand names for lane l. */
static inline uint64_t lane_addr(emu_warp *w, const emu_op *ao, int l, uint64_t bias)
{
  return (ao->reg >= 0 ? EMU_R(w, ao->reg)[l] : 0) + (uint64_t)ao->off + bias;
}

/* Read n little-endian bytes (1, 2, 4 or 8: fixed-size copies the compiler
 * inlines, where a variable-size memcpy is a call per element). */
static inline uint64_t load_n(const uint8_t *p, int n)
{
  uint8_t b; uint16_t h; uint32_t u; uint64_t v;
  switch (n) {
  case 1: memcpy(&b, p, 1); return b;
  case 2: memcpy(&h, p, 2); return h;
  case 4: memcpy(&u, p, 4); return u;
  default: memcpy(&v, p, 8); return v;
  }
}
/* The lanes' host pointers p[l] for a global (or generic) access of n
 * bytes each, when one check covers the warp: every lane aligned (as
 * lpx_emu_addr checks it) and all in one global allocation. Else 0, and
 * the caller translates lane by lane, which reports the first bad lane as
 * before: this path only skips per-lane work for accesses that pass. */
static int warp_global(emu_warp *w, uint32_t m, int space, const emu_op *ao, uint64_t bias, uint32_t n, uint8_t **p)
{
  if ((space != EMU_SP_GLOBAL && space != EMU_SP_GENERIC) || (n & (n - 1)) || !m) return 0;
  const uint64_t *r = ao->reg >= 0 ? EMU_R(w, ao->reg) : NULL;
  uint64_t off = (uint64_t)ao->off + bias, a[32], lo = UINT64_MAX, hi = 0, bits = 0;
  if (r) EMU_EACH(m, { uint64_t x = r[l] + off; a[l] = x; lo = x < lo ? x : lo; hi = x > hi ? x : hi; bits |= x; });
  else EMU_EACH(m, a[l] = lo = hi = bits = off);
  uintptr_t delta;
  if ((bits & (n - 1)) && (w->cta->L->checks & EMU_CHECK_ALIGN)) return 0;
  if (hi - lo > UINT32_MAX || !lpx_emu_global_range(w, lo, hi - lo + n, &delta)) return 0;
  EMU_EACH(m, p[l] = (uint8_t *)(delta + (uintptr_t)a[l]));
  return 1;
}

/* A loaded element extended into a register of rbits (signed types sign-extend). */
static inline uint64_t extend(uint64_t v, int bytes, int is_signed, int rbits)
{
  int bits = bytes * 8;
  if (is_signed && bits < 64) v = (uint64_t)((int64_t)(v << (64 - bits)) >> (64 - bits));
  return rbits >= 64 ? v : v & ((1ull << rbits) - 1);
}

/* ------------------------------------------------------------ ld / st */
/* The loads of a warp whose lanes passed one check (warp_global), for
 * unsigned elements that fit their registers: copied, no extension. */
static void load_warp_plain(uint32_t m, uint8_t *const *hp, int n, int size, uint64_t *const *dst)
{
  for (int k = 0; k < n; k++) {
    uint64_t *d = dst[k];
    switch (size) {
    case 1: EMU_EACH(m, d[l] = hp[l][k]); break;
    case 2: EMU_EACH(m, { uint16_t v; memcpy(&v, hp[l] + 2 * k, 2); d[l] = v; }); break;
    case 4: EMU_EACH(m, { uint32_t v; memcpy(&v, hp[l] + 4 * k, 4); d[l] = v; }); break;
    default: EMU_EACH(m, { uint64_t v; memcpy(&v, hp[l] + 8 * k, 8); d[l] = v; }); break;
    }
  }
}

/* ld / ldu: scalar or {d0, d1, ...} from one checked address per lane. */
HANDLER(op_ld)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int n = o0->kind == EO_VEC ? o0->reg : 1, first = o0->kind == EO_VEC;
  const emu_op *ao = EMU_OP(w, in, first + n);
  int size = (lpx_types[in->type].bits + 7) / 8, sgn = lpx_types[in->type].kind == 'S';
  uint64_t bias, *dst[8];
  int bits[8];
  int space = access_space(in, ao, &bias);
  int fits = !sgn;   /* unsigned elements no register truncates: a plain copy */
  for (int k = 0; k < n && k < 8; k++) {
    dst[k] = EMU_R(w, EMU_OP(w, in, first + k)->reg);
    bits[k] = EMU_OP(w, in, first + k)->bits;
    if (bits[k] < 8 * size) fits = 0;
  }
  /* 32-bit unsigned/bit/float elements need no extension: the common case. */
  int plain32 = size == 4 && !sgn;
  uint8_t *hp[32];
  int warp = warp_global(w, m, space, ao, bias, (uint32_t)(size * n), hp);
  if (warp && fits && n <= 8) { load_warp_plain(m, hp, n, size, dst); return 0; }
  EMU_EACH(m, {
    const uint8_t *p = warp ? hp[l] : lpx_emu_addr(w, in, l, space, lane_addr(w, ao, l, bias), (uint32_t)(size * n), 0);
    if (!p) return -1;
    if (plain32) for (int k = 0; k < n; k++) { uint32_t v; memcpy(&v, p + 4 * k, 4); dst[k][l] = v; }
    else for (int k = 0; k < n; k++) dst[k][l] = extend(load_n(p + k * size, size), size, sgn, bits[k]);
  });
  return 0;
}

/* st: scalar or {s0, s1, ...} to one checked address per lane. */
HANDLER(op_st)
{
  const emu_op *ao = EMU_OP(w, in, 0), *o1 = EMU_OP(w, in, 1);
  int n = o1->kind == EO_VEC ? o1->reg : 1, first = o1->kind == EO_VEC ? 2 : 1;
  int size = (lpx_types[in->type].bits + 7) / 8;
  uint64_t bias;
  const uint64_t *src[8];
  int space = access_space(in, ao, &bias);
  for (int k = 0; k < n && k < 8; k++) src[k] = EMU_R(w, EMU_OP(w, in, first + k)->reg);
  uint8_t *hp[32];
  int warp = warp_global(w, m, space, ao, bias, (uint32_t)(size * n), hp);
  EMU_EACH(m, {
    uint8_t *p = warp ? hp[l] : lpx_emu_addr(w, in, l, space, lane_addr(w, ao, l, bias), (uint32_t)(size * n), 1);
    if (!p) return -1;
    if (size == 4) for (int k = 0; k < n; k++) { uint32_t v = (uint32_t)src[k][l]; memcpy(p + 4 * k, &v, 4); }
    else for (int k = 0; k < n; k++) { uint64_t v = src[k][l]; memcpy(p + k * size, &v, (size_t)size); }
  });
  return 0;
}

/* Fast ld.global.{b,u,s,f}32 into a 32-bit register. */
HANDLER(ld_global_32)
{
  const emu_op *ao = EMU_OP(w, in, 1);
  uint64_t *d = D(0);
  const uint64_t *base = ao->reg >= 0 ? EMU_R(w, ao->reg) : NULL;
  uint8_t *hp[32];
  int warp = warp_global(w, m, EMU_SP_GLOBAL, ao, 0, 4, hp);
  EMU_EACH(m, {
    uint32_t v;
    const uint8_t *p = warp ? hp[l] : lpx_emu_addr(w, in, l, EMU_SP_GLOBAL, (base ? base[l] : 0) + (uint64_t)ao->off, 4, 0);
    if (!p) return -1;
    memcpy(&v, p, 4);
    d[l] = v;
  });
  return 0;
}

/* ------------------------------------------------------------- atomics */

/* atom/red .add.f32 on global memory: RED/ATOMG .ADD.F32.FTZ.RN, which
 * flushes subnormal inputs and results; a NaN sum is canonical. (On shared
 * memory ptxas loops a CAS around a plain FADD: see op_atom.) */
#define ATOM_ADD_F32_FTZ (LPX_ATOMOP__END + 1)

/* Flush an f32 subnormal (bits) to a zero of its sign. */
static uint32_t ftz_bits32(uint32_t v) { return (v & 0x7f800000u) ? v : v & 0x80000000u; }

/* The f32 sum of bits x and y as the GPU's adders give it (NaN canonical). */
static uint64_t fadd32(uint32_t x, uint32_t y)
{
  float r = emu_u2f(x) + emu_u2f(y);
  return r == r ? emu_f2u(r) : 0x7fffffffu;
}

/* The new value an atomic op (an LPX_ATOMOP_* value) stores given the old one. */
uint64_t lpx_emu_atom_apply(int op, int type, uint64_t old, uint64_t b, uint64_t c)
{
  if (op == ATOM_ADD_F32_FTZ) return ftz_bits32((uint32_t)fadd32(ftz_bits32((uint32_t)old), ftz_bits32((uint32_t)b)));
  int bits = lpx_types[type].bits, s = lpx_types[type].kind == 'S', f = lpx_types[type].kind == 'F' || lpx_types[type].kind == 'H';
  uint64_t mk = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  int64_t so = bits >= 64 ? (int64_t)old : (int64_t)(old << (64 - bits)) >> (64 - bits);
  int64_t sb = bits >= 64 ? (int64_t)b : (int64_t)(b << (64 - bits)) >> (64 - bits);
  old &= mk; b &= mk;
  switch (op) {
  case LPX_ATOMOP_ADD:
    if (type == LPX_T_F32) return fadd32((uint32_t)old, (uint32_t)b);
    if (type == LPX_T_F64) return emu_d2u(emu_u2d(old) + emu_u2d(b));
    if (type == LPX_T_F16) return lpx_emu_f32_to_f16(lpx_emu_f16_to_f32((uint16_t)old) + lpx_emu_f16_to_f32((uint16_t)b), LPX_RND_RN);
    if (type == LPX_T_BF16) return lpx_emu_f32_to_bf16(lpx_emu_bf16_to_f32((uint16_t)old) + lpx_emu_bf16_to_f32((uint16_t)b), LPX_RND_RN);
    if (type == LPX_T_F16X2 || type == LPX_T_BF16X2) {
      uint64_t r = 0;
      for (int k = 0; k < 2; k++) {
        uint16_t x = (uint16_t)(old >> 16 * k), y = (uint16_t)(b >> 16 * k);
        r |= (uint64_t)(type == LPX_T_F16X2 ? lpx_emu_f32_to_f16(lpx_emu_f16_to_f32(x) + lpx_emu_f16_to_f32(y), LPX_RND_RN)
                                            : lpx_emu_f32_to_bf16(lpx_emu_bf16_to_f32(x) + lpx_emu_bf16_to_f32(y), LPX_RND_RN)) << 16 * k;
      }
      return r;
    }
    return (old + b) & mk;
  case LPX_ATOMOP_MIN:
    if (f) return type == LPX_T_F32 ? emu_f2u(fminf(emu_u2f(old), emu_u2f(b))) : emu_d2u(fmin(emu_u2d(old), emu_u2d(b)));
    return s ? (uint64_t)(so < sb ? so : sb) & mk : (old < b ? old : b);
  case LPX_ATOMOP_MAX:
    if (f) return type == LPX_T_F32 ? emu_f2u(fmaxf(emu_u2f(old), emu_u2f(b))) : emu_d2u(fmax(emu_u2d(old), emu_u2d(b)));
    return s ? (uint64_t)(so > sb ? so : sb) & mk : (old > b ? old : b);
  case LPX_ATOMOP_AND: return old & b;
  case LPX_ATOMOP_OR: return old | b;
  case LPX_ATOMOP_XOR: return old ^ b;
  case LPX_ATOMOP_INC: return old >= b ? 0 : old + 1;
  case LPX_ATOMOP_DEC: return (old == 0 || old > b) ? b : old - 1;
  case LPX_ATOMOP_EXCH: return b;
  case LPX_ATOMOP_CAS: return old == b ? (c & mk) : old;
  default: return old;
  }
}

/* Atomically apply op at p (size 2, 4 or 8 bytes); returns the old value. */
static uint64_t atomic_rmw(uint8_t *p, int size, int op, int type, uint64_t b, uint64_t c)
{
  if (size == 4) {
    uint32_t old = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), nv;
    do nv = (uint32_t)lpx_emu_atom_apply(op, type, old, b, c);
    while (!__atomic_compare_exchange_n((uint32_t *)p, &old, nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
  }
  if (size == 8) {
    uint64_t old = __atomic_load_n((uint64_t *)p, __ATOMIC_RELAXED), nv;
    do nv = lpx_emu_atom_apply(op, type, old, b, c);
    while (!__atomic_compare_exchange_n((uint64_t *)p, &old, nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
  }
  uint16_t old = __atomic_load_n((uint16_t *)p, __ATOMIC_RELAXED), nv;
  do nv = (uint16_t)lpx_emu_atom_apply(op, type, old, b, c);
  while (!__atomic_compare_exchange_n((uint16_t *)p, &old, nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return old;
}

/* Is an f32 atom/red .add at addr in space one on global memory (which
 * flushes subnormals)? A generic address is global outside the shared
 * and local windows. */
static int add_f32_global(int space, uint64_t addr)
{
  if (space != EMU_SP_GENERIC) return space == EMU_SP_GLOBAL;
  return addr - EMU_SHARED_WINDOW >= EMU_WINDOW_SIZE && addr - EMU_LOCAL_WINDOW >= EMU_WINDOW_SIZE;
}

/* atom d, [a], b (, c) and red [a], b: lanes in order, each atomic. */
HANDLER(op_atom)
{
  int red = in->op == LPX_OP_RED, k = red ? 0 : 1;
  const emu_op *ao = EMU_OP(w, in, k);
  uint64_t *d = red ? NULL : D(0);
  const uint64_t *b = D(k + 1), *c = in->nops > k + 2 ? D(k + 2) : b;
  int size = (lpx_types[in->type].bits + 7) / 8, op = in->mod[LPX_GB_ATOMOP];
  uint64_t bias;
  int space = access_space(in, ao, &bias);
  EMU_EACH(m, {
    uint64_t at = lane_addr(w, ao, l, bias);
    uint8_t *p = lpx_emu_addr(w, in, l, space, at, (uint32_t)size, 2);
    if (!p) return -1;
    int o = op == LPX_ATOMOP_ADD && in->type == LPX_T_F32 && add_f32_global(space, at) ? ATOM_ADD_F32_FTZ : op;
    uint64_t old = atomic_rmw(p, size, o, in->type, b[l], c[l]);
    if (d) d[l] = old;
  });
  return 0;
}

/* ---------------------------------------------------------------- cvta */

/* cvta(.to).space: move an address between a space and the generic one. */
HANDLER(op_cvta)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1);
  int sp = lpx_emu_space(in), to = in->mod[LPX_GB_TO] != 0;
  uint64_t win = sp == EMU_SP_SHARED ? EMU_SHARED_WINDOW : sp == EMU_SP_LOCAL ? EMU_LOCAL_WINDOW
               : sp == EMU_SP_PARAM ? EMU_PARAM_WINDOW : 0;
  uint64_t mk = lpx_types[in->type].bits >= 64 ? ~0ull : 0xffffffffull;
  EMU_EACH(m, d[l] = (to ? a[l] - win : a[l] + win) & mk);
  return 0;
}

/* cp.async [dst], [src], size{, src_size}: the copy happens at once (a valid
 * schedule of an asynchronous copy); bytes past src_size are zero-filled. */
HANDLER(op_cp_async)
{
  const emu_op *dop = EMU_OP(w, in, 0), *sop = EMU_OP(w, in, 1);
  const uint64_t *sz = D(2), *ssz = in->nops > 3 ? D(3) : sz;
  int dsp = lpx_emu_space(in), ssp = lpx_emu_space2(in);
  if (dsp == EMU_SP_GENERIC) dsp = EMU_SP_SHARED;
  if (ssp == EMU_SP_GENERIC) ssp = EMU_SP_GLOBAL;
  EMU_EACH(m, {
    uint32_t n = (uint32_t)sz[l], sn = (uint32_t)ssz[l];
    if (n != 4 && n != 8 && n != 16) return lpx_emu_fail(w, in, l, "cp.async copies 4, 8 or 16 bytes, not %u", n);
    if (sn > n) return lpx_emu_fail(w, in, l, "cp.async source size %u is larger than the copy size %u", sn, n);
    uint8_t *dst = lpx_emu_addr(w, in, l, dsp, lane_addr(w, dop, l, 0), n, 1);
    if (!dst) return -1;
    const uint8_t *src = sn ? lpx_emu_addr(w, in, l, ssp, lane_addr(w, sop, l, 0), sn, 0) : NULL;
    if (sn && !src) return -1;
    if (sn) memcpy(dst, src, sn);
    memset(dst + sn, 0, n - sn);
  });
  return 0;
}

/* mapa: the address of the same shared variable in CTA b of the cluster
 * (shared::cluster: 1 + b in bits 24..31; generic: in the shared window). */
HANDLER(op_mapa)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1), *r = D(2);
  int generic = lpx_emu_space(in) == EMU_SP_GENERIC;
  uint64_t mk = lpx_types[in->type].bits >= 64 ? ~0ull : 0xffffffffull;
  EMU_EACH(m, {
    uint32_t rank = (uint32_t)r[l];
    if (rank >= (uint32_t)w->cta->group_size)
      return lpx_emu_fail(w, in, l, "mapa: CTA rank %u, but the cluster has %d CTA(s)", rank, w->cta->group_size);
    uint64_t off = ((generic ? a[l] - EMU_SHARED_WINDOW : a[l]) & 0xffffff) | (uint64_t)(rank + 1) << 24;
    d[l] = (generic ? EMU_SHARED_WINDOW + off : off) & mk;
  });
  return 0;
}

/* prefetch and friends: no architectural effect. */
HANDLER(op_nop) { return 0; }

/* Handler for a memory row. */
emu_fn lpx_emu_pick_mem(const emu_inst *in)
{
  int bits = in->type >= 0 ? lpx_types[in->type].bits : 0;
  switch (in->op) {
  case LPX_OP_LD: case LPX_OP_LDU:
    if (bits > 64) return NULL;
    if (in->vec == 1 && bits == 32 && in->type != LPX_T_S32 && in->mod[LPX_GB_SPACE] == LPX_SPACE_GLOBAL) return ld_global_32;
    return op_ld;
  case LPX_OP_ST: return bits > 64 ? NULL : op_st;
  case LPX_OP_ATOM: case LPX_OP_RED: return in->vec > 1 || bits > 64 ? NULL : op_atom;
  case LPX_OP_CVTA: return op_cvta;
  case LPX_OP_PREFETCH: case LPX_OP_CPACOMMIT: case LPX_OP_CPAWAIT: case LPX_OP_CPAWAITALL: return op_nop;
  case LPX_OP_CPASYNC: return op_cp_async;
  case LPX_OP_MAPA: return op_mapa;
  default: return NULL;
  }
}
