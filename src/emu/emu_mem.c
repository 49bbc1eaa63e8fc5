/* The emulator's memory: global allocations in a sorted table of fake
 * device addresses (with gaps, so an access just past one end is caught),
 * and the per-access translation from a kernel address in a state space
 * to host memory, checked for bounds and alignment every time. A kernel
 * never reaches host memory outside what it was given. */
#include "emu.h"
#include "emu_sched.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------- allocation table */

/* Do bytes more of host memory fit the device's memory budget beside
 * its live allocations and the launch pool (emu_pool.c)? The pool, a
 * cache, is let go when it is in the way. (Callers name what needs them,
 * lpx_emu_mem_refuse, only when not.) */
int lpx_emu_mem_fits(emu_dev *e, uint64_t bytes)
{
  uint64_t budget = (uint64_t)e->memory, left = budget > e->mem_used ? budget - e->mem_used : 0, pool = lpx_emu_pool_bytes(e);
  if (bytes <= left && pool <= left - bytes) return 1;
  lpx_emu_pool_free(e);
  return bytes <= left;
}

/* Fail because bytes more of host memory do not fit the device's memory
 * budget (lpx_emu_mem_fits said so), naming what needs them. */
int lpx_emu_mem_refuse(emu_dev *e, uint64_t bytes, const char *what)
{
  uint64_t budget = (uint64_t)e->memory;
  return lpx_fail(e->d->ctx, "%s needs %" PRIu64 " bytes (%.1f GiB) of host memory, but the emulator's memory budget is %" PRIu64
                  " bytes (%.1f GiB) and its live allocations take %" PRIu64 "; raise it with LUAPTX_EMU_MEMORY or the device "
                  "option \"memory\" (default: half the host's memory)", what, bytes, bytes / 1073741824.0, budget,
                  budget / 1073741824.0, e->mem_used);
}

/* Allocate bytes of device memory at a fresh address above the last one. */
int lpx_emu_mem_alloc(emu_dev *e, uint64_t bytes, uint64_t *dptr)
{
  if (!lpx_emu_mem_fits(e, bytes)) {       /* the message formatted only then: every launch allocates */
    char what[64];
    snprintf(what, sizeof what, "alloc of %" PRIu64 " bytes", bytes);
    return lpx_emu_mem_refuse(e, bytes, what);
  }
  uint8_t *host = calloc(1, (size_t)bytes);
  if (!host) return lpx_fail(e->d->ctx, "alloc: out of host memory for %" PRIu64 " bytes", bytes);
  if (LPX_RESERVE(e->allocs, e->allocs_cap, e->nallocs + 1)) { free(host); return lpx_fail(e->d->ctx, "out of memory"); }
  if (!e->next_addr) e->next_addr = EMU_GLOBAL_BASE;
  uint64_t base = e->next_addr;
  e->next_addr = (base + bytes + 256 + 255) & ~(uint64_t)255;   /* >= 256 bytes of gap */
  e->allocs[e->nallocs++] = (emu_alloc){ base, bytes, host, 0 };
  e->mem_used += bytes;
  e->gen++;
  *dptr = base;
  return 0;
}

/* Index of the allocation containing addr, or of the first one above it. */
static size_t lower(const emu_dev *e, uint64_t addr)
{
  size_t lo = 0, hi = e->nallocs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e->allocs[mid].base + e->allocs[mid].size <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Free an allocation by its base address. */
int lpx_emu_mem_free(emu_dev *e, uint64_t dptr)
{
  size_t i = lower(e, dptr);
  if (i >= e->nallocs || e->allocs[i].base != dptr)
    return lpx_fail(e->d->ctx, "free: 0x%" PRIx64 " is not the start of a live allocation", dptr);
  free(e->allocs[i].host);
  e->mem_used -= e->allocs[i].size;
  memmove(&e->allocs[i], &e->allocs[i + 1], (e->nallocs - i - 1) * sizeof *e->allocs);
  e->nallocs--;
  e->gen++;
  return 0;
}

/* The allocation holding [addr, addr+n), or NULL. */
emu_alloc *lpx_emu_mem_find(emu_dev *e, uint64_t addr, uint64_t n)
{
  size_t i = lower(e, addr);
  if (i >= e->nallocs) return NULL;
  emu_alloc *a = &e->allocs[i];
  if (addr < a->base || addr - a->base > a->size || n > a->size - (addr - a->base)) return NULL;
  return a;
}

/* Describe where addr lies relative to the nearest allocation (for errors). */
void lpx_emu_mem_describe(emu_dev *e, uint64_t addr, uint64_t n, char *out, size_t cap)
{
  size_t i = lower(e, addr);
  const emu_alloc *best = NULL;
  uint64_t dist = UINT64_MAX;
  for (size_t k = i > 0 ? i - 1 : 0; k <= i && k < e->nallocs; k++) {
    const emu_alloc *a = &e->allocs[k];
    uint64_t dd = addr < a->base ? a->base - addr : (addr >= a->base + a->size ? addr - (a->base + a->size) : 0);
    if (dd < dist) { dist = dd; best = a; }
  }
  if (!best) { snprintf(out, cap, "no device allocation exists"); return; }
  if (addr < best->base)
    snprintf(out, cap, "%" PRIu64 " bytes before allocation 0x%" PRIx64 " (%" PRIu64 " bytes)", best->base - addr, best->base, best->size);
  else if (addr >= best->base + best->size)
    snprintf(out, cap, "%" PRIu64 " bytes past the end of allocation 0x%" PRIx64 " (%" PRIu64 " bytes)",
             addr - (best->base + best->size), best->base, best->size);
  else
    snprintf(out, cap, "at offset %" PRIu64 " of allocation 0x%" PRIx64 " (%" PRIu64 " bytes), running %" PRIu64 " bytes past its end",
             addr - best->base, best->base, best->size, addr + n - (best->base + best->size));
}

/* ------------------------------------------------------- address translation */

static const char *const space_names[] = { "generic", "global", "shared", "local", "param", "const", "call .param" };

/* Last allocation hit by this host thread, valid while the table's gen matches. */
static __thread struct { uint64_t base, size, gen; uint8_t *host; const emu_dev *e; } hit;

/* The host address of device address 0 as seen from [addr, addr + n) when
 * that range lies in one global allocation (host + (x - base) for every x
 * in it), through the last-hit cache: 1 and *delta; else 0 (global_ptr
 * reports why; the warp-wide callers go lane by lane, through it). */
int lpx_emu_global_range(emu_warp *w, uint64_t addr, uint64_t n, uintptr_t *delta)
{
  emu_dev *e = w->cta->L->dev;
  if (!(hit.e == e && hit.gen == e->gen && addr - hit.base < hit.size && n <= hit.size - (addr - hit.base))) {
    emu_alloc *a = lpx_emu_mem_find(e, addr, n);
    if (!a) return 0;
    hit.base = a->base; hit.size = a->size; hit.host = a->host; hit.gen = e->gen; hit.e = e;
  }
  *delta = (uintptr_t)hit.host - (uintptr_t)hit.base;
  return 1;
}

/* Translate a global address (lpx_emu_global_range), or report it out of bounds. */
static uint8_t *global_ptr(emu_warp *w, const emu_inst *in, int lane, int space, uint64_t addr, uint32_t n)
{
  uintptr_t delta;
  if (lpx_emu_global_range(w, addr, n, &delta)) return (uint8_t *)(delta + (uintptr_t)addr);
  char near[256];
  emu_dev *e = w->cta->L->dev;
  lpx_emu_mem_describe(e, addr, n, near, sizeof near);
  lpx_emu_fail(w, in, lane, "out-of-bounds %s access of %u bytes at 0x%" PRIx64 ": %s", space_names[space], n, addr, near);
  return NULL;
}

/* The 16 bytes at off of the lane's own CTA's shared memory, read through
 * the async proxy (reader: "wgmma.mma_async", ...): in bounds, aligned and
 * on the default schedule, one fused race and proxy check
 * (lpx_emu_race_async16); otherwise, or when that check has something to
 * say, lpx_emu_addr and lpx_emu_proxy_check, which report. */
const uint8_t *lpx_emu_shared_async16(emu_warp *w, const emu_inst *in, int lane, uint64_t off, const char *reader)
{
  emu_cta *c = w->cta;
  lpx_emu_shared_touch(c, off, 16);
  if (off < c->shared_size && c->shared_size - off >= 16 && !(off & 15) && !c->sched && lpx_emu_race_async16(w, in, (uint32_t)off))
    return c->shared + off;
  const uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, off, 16, 0);
  return p && !lpx_emu_proxy_check(w, in, lane, off, 16, reader) ? p : NULL;
}

/* Translate a shared-space address: an offset in the lane's CTA, or with
 * 1 + a CTA's rank in bits 24..31, an offset in that CTA of its cluster. */
static uint8_t *shared_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n, int write)
{
  emu_cta *c = w->cta;
  uint32_t rank = (uint32_t)(off >> 24);
  if (rank) {
    if (rank > (uint32_t)c->group_size) {
      lpx_emu_fail(w, in, lane, "out-of-bounds shared access of %u bytes at shared address 0x%" PRIx64 ": not in this CTA's "
                   "shared memory, and not a shared::cluster address of one of the cluster's %d CTA(s) (mapa makes those)",
                   n, off, c->group_size);
      return NULL;
    }
    c = &c->group[rank - 1];
    off &= 0xffffff;
  }
  if (off > c->shared_size || n > c->shared_size - off) {
    lpx_emu_fail(w, in, lane, "out-of-bounds shared access of %u bytes at shared offset 0x%" PRIx64
                 "; this CTA has %u bytes of shared memory (%u static + %u dynamic)", n, off, c->shared_size,
                 w->p->extern_off, c->shared_size - w->p->extern_off);
    return NULL;
  }
  lpx_emu_shared_touch(c, off, n);   /* to clear for the next run; kept wgmma B operands there no longer hold */
  /* The adversarial schedule's pending copies first (the more precise report). */
  if (w->cta->sched && lpx_emu_sched_access(w, in, lane, c, (uint32_t)off, n, write)) return NULL;
  /* Accesses to another CTA's shared memory are not race-checked. */
  if (c == w->cta && (c->L->checks & (EMU_CHECK_RACE | EMU_CHECK_UNINIT_SHARED)) && write != 2 &&
      lpx_emu_race(w, in, lane, (uint32_t)off, n, write)) return NULL;
  return c->shared + off;
}

/* Translate a local-space offset of one lane (.local variables, or alloca's stack). */
static uint8_t *local_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n)
{
  uint32_t size = w->p->local_size;
  if (off >= EMU_STACK_TOP - EMU_STACK_MAX && off < EMU_STACK_TOP) return lpx_emu_stack_ptr(w, in, lane, off, n);
  if (off > size || n > size - off) {
    lpx_emu_fail(w, in, lane, "out-of-bounds local access of %u bytes at local offset 0x%" PRIx64 "; the thread has %u bytes of .local",
                 n, off, size);
    return NULL;
  }
  return w->local + (size_t)lane * size + off;
}

/* Translate an offset in the thread's call frame (a .func's params, call-site .params). */
static uint8_t *frame_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n)
{
  uint32_t size = w->p->frame_size;
  if (off > size || n > size - off) {
    lpx_emu_fail(w, in, lane, "call .param access of %u bytes at offset %" PRIu64 " is outside the %u bytes of call parameters",
                 n, off, size);
    return NULL;
  }
  return w->frame + (size_t)lane * size + off;
}

/* Translate a param-space offset (read only). */
static uint8_t *param_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n, int write)
{
  emu_launch *L = w->cta->L;
  if (write) { lpx_emu_fail(w, in, lane, "kernel parameters are read-only"); return NULL; }
  if (off > L->cfg.params_size || n > L->cfg.params_size - off) {
    lpx_emu_fail(w, in, lane, "parameter access of %u bytes at param offset %" PRIu64 " is outside the %" PRIu64 " bytes of parameters",
                 n, off, L->cfg.params_size);
    return NULL;
  }
  return (uint8_t *)L->params + off;
}

/* Host pointer for n bytes at addr in a space for one lane, or NULL with the
 * launch's error set. write: 0 read, 1 write, 2 atomic. */
uint8_t *lpx_emu_addr(emu_warp *w, const emu_inst *in, int lane, int space, uint64_t addr, uint32_t n, int write)
{
  if (space == EMU_SP_GENERIC) {
    if (addr - EMU_SHARED_WINDOW < EMU_WINDOW_SIZE) { space = EMU_SP_SHARED; addr -= EMU_SHARED_WINDOW; }
    else if (addr - EMU_LOCAL_WINDOW < EMU_WINDOW_SIZE) { space = EMU_SP_LOCAL; addr -= EMU_LOCAL_WINDOW; }
    else if (addr - EMU_PARAM_WINDOW < EMU_WINDOW_SIZE) { space = EMU_SP_PARAM; addr -= EMU_PARAM_WINDOW; }
    else space = EMU_SP_GLOBAL;
  }
  if ((w->cta->L->checks & EMU_CHECK_ALIGN) && (addr & (n - 1)) && space != EMU_SP_PARAM && space != EMU_SP_FRAME) {
    lpx_emu_fail(w, in, lane, "misaligned %s access: %u bytes at 0x%" PRIx64 " (needs %u-byte alignment)",
                 space_names[space], n, addr, n);
    return NULL;
  }
  switch (space) {
  case EMU_SP_SHARED: return shared_ptr(w, in, lane, addr, n, write);
  case EMU_SP_LOCAL: return local_ptr(w, in, lane, addr, n);
  case EMU_SP_PARAM: return param_ptr(w, in, lane, addr, n, write);
  case EMU_SP_FRAME: return frame_ptr(w, in, lane, addr, n);
  default: return global_ptr(w, in, lane, space, addr, n);
  }
}

/* Host pointer for n bytes at addr that need not be a power of two: checked
 * (bounds, races) in aligned power-of-two pieces, so that a bulk copy's
 * size is not taken for a misaligned access. The pieces are contiguous. */
uint8_t *lpx_emu_addr_span(emu_warp *w, const emu_inst *in, int lane, int space, uint64_t addr, uint64_t n, int write)
{
  uint8_t *first = NULL;
  for (uint64_t done = 0; done < n;) {
    uint64_t a = addr + done, piece = (a & 0xffffff) ? (a & (~a + 1)) : ((uint64_t)1 << 24);
    while (piece > n - done) piece >>= 1;
    uint8_t *p = lpx_emu_addr(w, in, lane, space, a, (uint32_t)piece, write);
    if (!p) return NULL;
    if (!first) first = p;
    done += piece;
  }
  return first;
}
