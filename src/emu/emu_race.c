/* Checks a GPU does not make for you, on shared memory: races between
 * barriers (a shadow word per byte records the last writer and readers in
 * the current barrier epoch), reads of shared memory never written, and
 * async-proxy reads (TMA stores, wgmma, bulk reductions) of generic-proxy
 * writes no fence.proxy.async made visible. A leaf under the memory
 * access path: it calls only the failure reports. */
#include "emu.h"
#include <stdio.h>
#include <stdlib.h>

/* --------------------------------------------------------------- races */

/* Report a race on shared byte off between warp w and another warp. */
static int race_report(emu_warp *w, const emu_inst *in, int lane, uint32_t off, uint32_t n,
                       const char *kind, uint32_t other, const char *other_did, uint32_t other_inst)
{
  char who[32], there[512];
  if (other == 0xff) snprintf(who, sizeof who, "other warps");
  else snprintf(who, sizeof who, "warp %u", other - 1);
  lpx_emu_where(w->p, &w->p->insts[other_inst], there, sizeof there);
  return lpx_emu_fail(w, in, lane, "shared-memory race (%s): %u bytes at shared offset 0x%x, which %s %s since the last barrier "
                      "(at %s); separate the accesses with bar.sync", kind, n, off, who, other_did, there);
}

/* Remember that lane's write of byte off overwrites what another warp
 * wrote in this epoch; 0, or -1 when out of memory. */
static int waw_defer(emu_warp *w, int lane, uint32_t off, uint32_t other)
{
  emu_cta *c = w->cta;
  if (c->nwaw == c->waw_cap) {
    uint32_t cap = c->waw_cap ? c->waw_cap * 2 : 64;
    emu_waw *nw = realloc(c->waw, cap * sizeof *nw);
    if (!nw) return -1;
    c->waw = nw; c->waw_cap = cap;
  }
  c->waw[c->nwaw++] = (emu_waw){ off, c->race_wi[off], c->shared[off], (uint8_t)(other & 0xff), (uint8_t)lane };
  w->waw = 1;
  return 0;
}

/* After the instruction that overwrote bytes other warps wrote in this
 * epoch: a write-after-write race only where the value changed (storing
 * what is already there is deterministic, as tl.histogram's zeroing is). */
int lpx_emu_race_settle(emu_warp *w, const emu_inst *in)
{
  emu_cta *c = w->cta;
  uint32_t n = c->nwaw;
  w->waw = 0;
  c->nwaw = 0;
  for (uint32_t k = 0; k < n; k++) {
    const emu_waw *r = &c->waw[k];
    if (c->shared[r->off] != r->old)
      return race_report(w, in, r->lane, r->off, 1, "write after write of a different value", r->other, "wrote", r->other_inst);
  }
  return 0;
}

/* Check and record one access of n shared bytes at off (write: 0 read, 1
 * write). A write over another warp's write of this epoch is settled after
 * the instruction (lpx_emu_race_settle): a race only if the value changes. */
int lpx_emu_race(emu_warp *w, const emu_inst *in, int lane, uint32_t off, uint32_t n, int write)
{
  emu_cta *c = w->cta;
  uint32_t me = w->id + 1, now = c->epoch << 8;
  int races = (c->L->checks & EMU_CHECK_RACE) != 0, uninit = (c->L->checks & EMU_CHECK_UNINIT_SHARED) != 0;
  uint32_t at = (uint32_t)(in - w->p->insts);
  for (uint32_t i = off; i < off + n; i++) {
    uint32_t wv = c->race_w[i], rv = c->race_r[i];
    if (write == 2) { if (!wv) c->race_w[i] = 0xff; continue; }
    if (races && (wv & ~0xffu) == now && (wv & 0xff) != me) {
      if (!write) return race_report(w, in, lane, i, n, "read after write", wv & 0xff, "wrote", c->race_wi[i]);
      if (waw_defer(w, lane, i, wv)) return lpx_emu_fail(w, in, lane, "out of host memory for the race check");
    }
    if (write) {
      if (races && (rv & ~0xffu) == now && (rv & 0xff) != me)
        return race_report(w, in, lane, i, n, "write after read", rv & 0xff, "read", c->race_ri[i]);
      c->race_w[i] = now | me;
      c->race_wi[i] = at;
      if (c->pdirty) c->pdirty[i] = in->op != LPX_OP_CPBULK && in->op != LPX_OP_CPREDBULK;   /* generic-proxy write (async proxy: bulk copies) */
    } else {
      if (uninit && !wv)
        return lpx_emu_fail(w, in, lane, "reads %u bytes of shared memory at offset 0x%x that no thread has written", n, i);
      c->race_r[i] = ((rv & ~0xffu) == now && (rv & 0xff) != me) ? (now | 0xff) : (now | me);
      c->race_ri[i] = at;
    }
  }
  return 0;
}

/* ------------------------------------------------------ the async proxy */

/* Shared bytes [off, off+n) read by the async proxy (TMA store, wgmma):
 * report one the generic proxy wrote with no fence.proxy.async on the
 * way to this read (a race check: off with race_check). */
int lpx_emu_proxy_check(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n, const char *reader)
{
  emu_cta *c = w->cta;
  if (!c->pdirty || !(c->L->checks & EMU_CHECK_RACE) || off >= c->shared_size) return 0;
  if (n > c->shared_size - off) n = (uint32_t)(c->shared_size - off);
  for (uint64_t i = off; i < off + n; i++) {
    if (!c->pdirty[i]) continue;
    char there[512];
    lpx_emu_where(w->p, &w->p->insts[c->race_wi[i]], there, sizeof there);
    return lpx_emu_fail(w, in, lane, "%s reads shared memory at 0x%llx through the async proxy, but %s wrote it through the "
                        "generic proxy with no fence.proxy.async in between (put %s after the stores, or after the barrier "
                        "that orders them before this read, in the thread that issues it)", reader, (unsigned long long)i, there,
                        lpx_emu_spell(w, in, "ptx.fence.proxy_async()", "fence.proxy.async.shared::cta"));
  }
  return 0;
}
