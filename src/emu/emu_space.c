/* Address-space queries: isspacep (which window a generic address lies
 * in) and getctarank (the cluster CTA a shared address belongs to). */
#include "emu.h"
#include <inttypes.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* Is the generic address a in the shared window of a CTA of the cluster
 * (own: of the executing CTA only)? */
static int in_shared(const emu_warp *w, uint64_t a, int own)
{
  if (a - EMU_SHARED_WINDOW >= EMU_WINDOW_SIZE) return 0;
  uint32_t rank = (uint32_t)((a - EMU_SHARED_WINDOW) >> 24);
  return own ? rank == 0 || rank == (uint32_t)w->cta->rank + 1 : rank <= (uint32_t)w->cta->group_size;
}

/* Is a inside a module's .const variable? */
static int in_const(emu_warp *w, uint64_t a)
{
  const emu_alloc *al = lpx_emu_mem_find(w->cta->L->dev, a, 1);
  return al && al->is_const;
}

/* isspacep.space p, a: the generic windows of the emulator (docs/emulator.md);
 * .const variables are allocations of the global window marked as such. */
HANDLER(op_isspacep)
{
  uint64_t *p = D(0);
  const uint64_t *a = D(1);
  int sp = in->mod[LPX_GB_SPACE];
  EMU_EACH(m, {
    uint64_t x = a[l];
    int shared = in_shared(w, x, 0), local = x - EMU_LOCAL_WINDOW < EMU_WINDOW_SIZE, cnst = !shared && !local && in_const(w, x);
    int r;
    switch (sp) {
    case LPX_SPACE_GLOBAL: r = !shared && !local && !cnst; break;
    case LPX_SPACE_LOCAL: r = local; break;
    case LPX_SPACE_CONST: r = cnst; break;
    case LPX_SPACE_SHARED_CLUSTER: r = shared; break;
    default: r = in_shared(w, x, 1); break;   /* .shared, .shared::cta */
    }
    p[l] = (uint64_t)r;
  });
  return 0;
}

/* getctarank d, a: the cluster rank of the CTA whose shared memory the
 * generic (or .shared::cluster) address a names. Another address gives an
 * undefined result, which nvcc's code computes and then discards: the
 * executing CTA's rank. */
HANDLER(op_getctarank)
{
  uint64_t *d = D(0);
  const uint64_t *a = D(1);
  int generic = in->mod[LPX_GB_SPACE] == 0;
  EMU_EACH(m, {
    uint64_t off = generic ? a[l] - EMU_SHARED_WINDOW : a[l];
    if (generic && off >= EMU_WINDOW_SIZE) off = 0;
    uint32_t rank = (uint32_t)(off >> 24);
    if (rank > (uint32_t)w->cta->group_size)
      return lpx_emu_fail(w, in, l, "getctarank: 0x%" PRIx64 " names CTA rank %u, but the cluster has %d", a[l], rank - 1, w->cta->group_size);
    d[l] = rank ? rank - 1 : (uint32_t)w->cta->rank;
  });
  return 0;
}

/* Handler for an address-space query; isspacep.param has none (the
 * emulator gives parameters no generic window). */
emu_fn lpx_emu_pick_space(const emu_inst *in)
{
  int sp = in->mod[LPX_GB_SPACE];
  if (in->op == LPX_OP_GETCTARANK) return op_getctarank;
  if (in->op == LPX_OP_ISSPACEP && sp != LPX_SPACE_PARAM && sp != LPX_SPACE_PARAM_ENTRY) return op_isspacep;
  return NULL;
}
