/* Cache hints without a cache: applypriority (checks its line), discard
 * (the line's bytes become indeterminate: the emulator writes 0xff so a
 * read that relies on them shows), and createpolicy (an opaque 64-bit
 * policy; the cache ops that take one, .L2::cache_hint, ignore it, as
 * they may); and pmevent, a performance-monitor trigger nothing counts. */
#include "emu.h"
#include <inttypes.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* The tag of the policies createpolicy makes: "POL" in the top bytes. */
#define POLICY_TAG 0x504f4c0000000000ull

/* The global address of operand 0 for lane l, or a failure: the line must
 * be 128-byte aligned and in the global window. */
static int line_addr(emu_warp *w, const emu_inst *in, int l, uint64_t *addr)
{
  const emu_op *ao = EMU_OP(w, in, 0);
  uint64_t a = (ao->reg >= 0 ? EMU_R(w, ao->reg)[l] : 0) + (uint64_t)ao->off;
  const char *name = lpx_isa_rows[in->op].name;
  if (a & 127) return lpx_emu_fail(w, in, l, "%s: address 0x%" PRIx64 " is not 128-byte aligned", name, a);
  if (a - EMU_SHARED_WINDOW < EMU_WINDOW_SIZE || a - EMU_LOCAL_WINDOW < EMU_WINDOW_SIZE)
    return lpx_emu_fail(w, in, l, "%s: address 0x%" PRIx64 " is not in the global window (the ISA leaves that undefined)", name, a);
  *addr = a;
  return 0;
}

/* applypriority.L2::evict_normal [a], 128: the line must be global memory. */
HANDLER(op_applypriority)
{
  EMU_EACH(m, {
    uint64_t a;
    if (line_addr(w, in, l, &a) || !lpx_emu_addr(w, in, l, EMU_SP_GLOBAL, a, 1, 0)) return -1;
  });
  return 0;
}

/* discard.L2 [a], 128: the line (the part inside its allocation) becomes 0xff. */
HANDLER(op_discard)
{
  emu_dev *e = w->cta->L->dev;
  EMU_EACH(m, {
    uint64_t a;
    if (line_addr(w, in, l, &a) || !lpx_emu_addr(w, in, l, EMU_SP_GLOBAL, a, 1, 1)) return -1;
    emu_alloc *al = lpx_emu_mem_find(e, a, 1);
    uint64_t n = al && al->base + al->size - a < 128 ? al->base + al->size - a : 128;
    uint8_t *p = lpx_emu_addr_span(w, in, l, EMU_SP_GLOBAL, a, n, 1);
    if (!p) return -1;
    memset(p, 0xff, (size_t)n);
  });
  return 0;
}

/* createpolicy: a tagged opaque value (mode and priorities in its low
 * bits); .cvt passes the access property through. */
HANDLER(op_createpolicy)
{
  uint64_t *d = D(0);
  const uint64_t *a = in->nops > 1 ? D(1) : NULL;
  uint64_t v = POLICY_TAG | (uint64_t)in->mod[LPX_GB_CPMODE] << 16 | (uint64_t)in->mod[LPX_GB_CPPRI] << 8 | in->mod[LPX_GB_CPSEC];
  if (in->mod[LPX_GB_CPMODE] == LPX_CPMODE_CVT) EMU_EACH(m, d[l] = a[l]);
  else EMU_EACH(m, d[l] = v);
  return 0;
}

/* pmevent: a performance-monitor event, which nothing counts here. */
HANDLER(op_pmevent) { return 0; }

/* Handler for a cache-hint row (and pmevent). */
emu_fn lpx_emu_pick_hint(const emu_inst *in)
{
  switch (in->op) {
  case LPX_OP_PMEVENT: return op_pmevent;
  case LPX_OP_APPLYPRI: return op_applypriority;
  case LPX_OP_DISCARD: return op_discard;
  case LPX_OP_CREATEPOL: return op_createpolicy;
  default: return NULL;
  }
}
