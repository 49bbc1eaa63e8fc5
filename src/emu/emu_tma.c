/* TMA tensor copies on the emulator: cp.async.bulk.tensor.{1..5}d in tile
 * mode, global -> shared::cluster completing bytes on an mbarrier, and
 * shared::cta -> global in a bulk group. The tensor map is the 128-byte
 * encoding luaptx's runtime packs for the emulator (pyptx.async,
 * lpx_tma_emu): a validated description. Boxes outside the tensor read as
 * zero (or NaN with oob_fill 1) and are not written back; shared memory is
 * laid out with the description's 32/64/128-byte swizzle. Copies happen at
 * once, a valid schedule of an asynchronous copy. */
#include "emu.h"
#include <math.h>

#define TMA_MAGIC 0x414d5458u   /* "XTMA" */

/* The emulator's tensor-map encoding (must match pyptx.async's cdef). */
typedef struct tma_emu {
  uint32_t magic;
  uint8_t rank, dtype, swizzle, interleave;
  uint8_t oob, esize, elem_strides[5], pad0;
  uint64_t address;
  uint32_t dims[5];
  uint16_t box[5], pad1;
  uint64_t strides[4];
  uint8_t pad2[40];
} tma_emu;

_Static_assert(sizeof(tma_emu) == 128, "tma_emu is 128 bytes");

/* Bytes of one swizzle span (0: none) per swizzle mode. */
static const uint32_t swizzle_span[] = { 0, 32, 64, 128, 128, 128, 128 };

/* A shared byte address with the swizzle of span applied (16-byte chunk
 * bits [4, 4+k) XOR address bits [7, 7+k), k = log2(span/16)). */
static uint64_t swizzle(uint64_t a, uint32_t span)
{
  if (!span) return a;
  uint64_t mask = span / 16 - 1;
  return a ^ (((a >> 7) & mask) << 4);
}

/* Read and check the tensor map whose address a lane holds. */
static int load_map(emu_warp *w, const emu_inst *in, int lane, uint64_t a, tma_emu *out)
{
  int sp = a < w->cta->L->cfg.params_size ? EMU_SP_PARAM : EMU_SP_GENERIC;
  const uint8_t *p = lpx_emu_addr(w, in, lane, sp, a, 128, 0);
  if (!p) return -1;
  memcpy(out, p, sizeof *out);
  if (out->magic != TMA_MAGIC || out->rank < 1 || out->rank > 5 || !out->esize)
    return lpx_emu_fail(w, in, lane, "the tensor map at 0x%llx is not one luaptx built (pass it with X:tma_desc{...})",
                        (unsigned long long)a);
  for (int i = 0; i < out->rank; i++)
    if (out->elem_strides[i] > 1)
      return lpx_emu_fail(w, in, lane, "the emulator does not implement TMA element strides > 1 yet");
  if (out->interleave) return lpx_emu_fail(w, in, lane, "the emulator does not implement interleaved TMA layouts yet");
  return 0;
}

/* Operand layout of a tensor copy: where the bracket, coordinates, shared
 * address and barrier are. */
typedef struct tma_ops { int map, coord, smem, mbar, rank; } tma_ops;

/* Locate the operands of a load ([dst], [map, {c...}], [mbar]) or a store
 * ([map, {c...}], [src]). */
static int find_ops(emu_warp *w, const emu_inst *in, int store, tma_ops *o)
{
  int b = store ? 0 : 1;                       /* the bracket */
  if (in->nops < b + 3 || EMU_OP(w, in, b)->kind != EO_VEC || EMU_OP(w, in, b + 2)->kind != EO_VEC)
    return lpx_emu_fail(w, in, -1, "TMA copy: expected a [tensor_map, {coordinates}] operand");
  o->map = b + 1;
  o->rank = EMU_OP(w, in, b + 2)->reg;
  o->coord = b + 3;
  o->smem = store ? b + 3 + o->rank : 0;
  o->mbar = store ? -1 : b + 3 + o->rank;
  if (o->smem >= in->nops || (o->mbar >= 0 && o->mbar >= in->nops))
    return lpx_emu_fail(w, in, -1, "TMA copy: missing the shared-memory or mbarrier operand");
  return 0;
}

/* Value of a register/constant operand k for a lane. */
static uint64_t val(emu_warp *w, const emu_inst *in, int k, int lane)
{
  return EMU_R(w, EMU_OP(w, in, k)->reg)[lane];
}

/* Shared address of ADDR operand k for a lane. */
static uint64_t shared_addr(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *a = EMU_OP(w, in, k);
  return (a->reg >= 0 ? EMU_R(w, a->reg)[lane] : 0) + (uint64_t)a->off;
}

/* Fill one element with the out-of-bounds value (zero, or NaN for floats). */
static void oob_fill(uint8_t *dst, const tma_emu *t)
{
  memset(dst, 0, t->esize);
  if (!t->oob) return;
  if (t->esize == 4) { float f = NAN; memcpy(dst, &f, 4); }
  else if (t->esize == 8) { double f = NAN; memcpy(dst, &f, 8); }
  else if (t->esize == 2) { uint16_t h = t->dtype == 9 ? 0x7fc0 : 0x7e00; memcpy(dst, &h, 2); }
}

/* Copy the box between global memory and shared bytes sh (laid out from
 * shared address base with the swizzle). store: shared -> global. */
static int copy_box(emu_warp *w, const emu_inst *in, int lane, const tma_emu *t, const int64_t *c,
                    uint8_t *sh, uint64_t base, int store)
{
  uint32_t n[5] = { 1, 1, 1, 1, 1 }, span = swizzle_span[t->swizzle < 7 ? t->swizzle : 0];
  uint64_t total = 1;
  for (int d = 0; d < t->rank; d++) { n[d] = t->box[d]; total *= n[d]; }
  for (uint64_t e = 0; e < total; e++) {
    uint64_t rest = e, ga = t->address;
    int inside = 1;
    for (int d = 0; d < t->rank; d++) {
      int64_t g = c[d] + (int64_t)(rest % n[d]);
      rest /= n[d];
      if (g < 0 || g >= (int64_t)t->dims[d]) inside = 0;
      ga += (uint64_t)g * (d ? t->strides[d - 1] : t->esize);
    }
    uint8_t *s = sh + (swizzle(base + e * t->esize, span) - base);
    if (!inside) { if (!store) oob_fill(s, t); continue; }
    uint8_t *g = lpx_emu_addr(w, in, lane, EMU_SP_GLOBAL, ga, t->esize, store);
    if (!g) return -1;
    if (store) memcpy(g, s, t->esize); else memcpy(s, g, t->esize);
  }
  return 0;
}

/* Remember that a TMA load wrote [lo, hi) of shared memory with a swizzle
 * span (older overlapping ranges are dropped; the oldest goes when full). */
static void note_region(emu_cta *c, const emu_inst *in, uint64_t lo, uint64_t hi, uint32_t span)
{
  int n = 0;
  for (int i = 0; i < c->ntma_rgn; i++)
    if (c->tma_rgn[i].hi <= lo || c->tma_rgn[i].lo >= hi) c->tma_rgn[n++] = c->tma_rgn[i];
  if (n == 16) { memmove(&c->tma_rgn[0], &c->tma_rgn[1], 15 * sizeof c->tma_rgn[0]); n = 15; }
  c->tma_rgn[n].lo = lo; c->tma_rgn[n].hi = hi; c->tma_rgn[n].span = span; c->tma_rgn[n].in = in;
  c->ntma_rgn = n + 1;
}

/* The swizzle span a TMA load wrote the shared byte addr with: 1 and
 * *span, *by when a recorded range holds it, else 0. */
int lpx_emu_tma_swizzle_at(emu_cta *c, uint64_t addr, uint32_t *span, const emu_inst **by)
{
  for (int i = c->ntma_rgn - 1; i >= 0; i--)
    if (addr >= c->tma_rgn[i].lo && addr < c->tma_rgn[i].hi) { *span = c->tma_rgn[i].span; *by = c->tma_rgn[i].in; return 1; }
  return 0;
}

/* A multicast load: the box lands at the same CTA-relative offset in every
 * CTA of the cluster in the 16-bit mask and completes its bytes on the
 * barrier at the same offset in each. */
static int multicast(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o, const tma_emu *t, const int64_t *c,
                     uint64_t base, uint64_t bytes)
{
  emu_cta *me = w->cta;
  uint32_t mask = (uint32_t)val(w, in, o->mbar + 1, lane) & 0xffff;
  const emu_op *mo = EMU_OP(w, in, o->mbar);
  uint64_t moff = (mo->reg >= 0 ? EMU_R(w, mo->reg)[lane] : 0) + (uint64_t)mo->off;
  uint32_t span = swizzle_span[t->swizzle < 7 ? t->swizzle : 0];
  for (int r = 0; mask; r++, mask >>= 1) {
    if (!(mask & 1)) continue;
    if (r >= me->group_size)
      return lpx_emu_fail(w, in, lane, "multicast mask names CTA rank %d; the cluster has %d CTA(s)", r, me->group_size);
    emu_cta *dst = &me->group[r];
    uint8_t *sh = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, ((uint64_t)(r + 1) << 24) | base, (uint32_t)bytes, 1);
    if (!sh || copy_box(w, in, lane, t, c, sh, base, 0)) return -1;
    if (dst != me && dst->race_w)               /* written before the barrier completes: an older epoch */
      for (uint64_t i = base; i < base + bytes; i++) { dst->race_w[i] = ((dst->epoch - 1) << 8) | 0xff; dst->pdirty[i] = 0; }
    note_region(dst, in, base, base + bytes, span);
    if (lpx_emu_mbar_complete_rank(w, in, lane, r, moff, (int64_t)bytes)) return -1;
  }
  return 0;
}

/* One lane's tensor copy. */
static int tensor_copy(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o, int store)
{
  tma_emu t;
  if (load_map(w, in, lane, val(w, in, o->map, lane), &t)) return -1;
  if (o->rank != t.rank)
    return lpx_emu_fail(w, in, lane, "a %dD TMA copy with a %dD tensor map", o->rank, t.rank);
  int64_t c[5] = { 0 };
  for (int d = 0; d < t.rank; d++) c[d] = (int32_t)val(w, in, o->coord + d, lane);
  uint64_t bytes = t.esize;
  for (int d = 0; d < t.rank; d++) bytes *= t.box[d];
  uint64_t base = shared_addr(w, in, o->smem, lane);
  uint32_t need = t.swizzle ? 1024 : 128;
  if (base % need)
    return lpx_emu_fail(w, in, lane, "TMA shared-memory address 0x%llx is not %u-byte aligned (%s swizzle needs it)",
                        (unsigned long long)base, need, t.swizzle ? "a" : "no");
  if (store && lpx_emu_proxy_check(w, in, lane, base, (uint32_t)bytes, "this TMA store")) return -1;
  if (!store && in->ext[1]) return multicast(w, in, lane, o, &t, c, base & 0xffffff, bytes);
  uint8_t *sh = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, base, (uint32_t)bytes, store ? 0 : 1);
  if (!sh || copy_box(w, in, lane, &t, c, sh, base, store)) return -1;
  if (!store) note_region(w->cta, in, base, base + bytes, swizzle_span[t.swizzle < 7 ? t.swizzle : 0]);
  return store ? 0 : lpx_emu_mbar_complete(w, in, o->mbar, lane, (int64_t)bytes);
}

/* ------------------------------------------------------ the async proxy */

/* Shared bytes [off, off+n) read by the async proxy (TMA store, wgmma):
 * report one the generic proxy wrote with no fence.proxy.async since. */
int lpx_emu_proxy_check(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n, const char *reader)
{
  emu_cta *c = w->cta;
  if (!c->pdirty || off >= c->shared_size) return 0;
  if (n > c->shared_size - off) n = (uint32_t)(c->shared_size - off);
  for (uint64_t i = off; i < off + n; i++) {
    if (!c->pdirty[i]) continue;
    char there[512];
    lpx_emu_where(w->p, &w->p->insts[c->race_wi[i]], there, sizeof there);
    return lpx_emu_fail(w, in, lane, "%s reads shared memory at 0x%llx through the async proxy, but %s wrote it through the "
                        "generic proxy with no fence.proxy.async in between (put ptx.fence.proxy_async() after the stores, "
                        "before the barrier)", reader, (unsigned long long)i, there);
  }
  return 0;
}

/* fence.proxy.async: the generic-proxy writes this warp made become visible to the async proxy. */
static int op_proxy_fence(emu_warp *w, const emu_inst *in, uint32_t m)
{
  (void)in; (void)m;
  emu_cta *c = w->cta;
  if (!c->pdirty) return 0;
  for (uint32_t i = 0; i < c->shared_size; i++)
    if (c->pdirty[i] && (c->race_w[i] & 0xff) == w->id + 1) c->pdirty[i] = 0;
  return 0;
}

/* fence.proxy.async (any space) here; every other fence is the control family's. */
emu_fn lpx_emu_pick_fence(const emu_inst *in)
{
  return in->mod[LPX_GB_PROXYK] == 1 ? op_proxy_fence : lpx_emu_pick_ctl(in);
}

/* cp.async.bulk.tensor loads (ext 3) and stores (ext 4): each active lane issues one copy. */
static int op_tensor(emu_warp *w, const emu_inst *in, uint32_t m)
{
  int store = in->ext[0] == 4;
  tma_ops o;
  if (find_ops(w, in, store, &o)) return -1;
  EMU_EACH(m, { if (tensor_copy(w, in, l, &o, store)) return -1; });
  return 0;
}

/* Handler for the TMA tensor forms lpx_emu_decode_bulk classified. */
emu_fn lpx_emu_pick_tma(const emu_inst *in)
{
  return in->ext[0] == 3 || in->ext[0] == 4 ? op_tensor : NULL;
}
