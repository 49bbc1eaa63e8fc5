/* Checks a GPU does not make for you: shared-memory races between
 * barriers (a shadow word per byte records the last writer and readers in
 * the current barrier epoch), reads of shared memory never written, and
 * reads of registers a lane never wrote. */
#include "emu.h"
#include "emu_sched.h"
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

/* The fix a message about in names: the DSL call when in was traced
 * (it has a Lua line, or its module was never parsed), the PTX
 * instruction in parsed (foreign) PTX. */
const char *lpx_emu_spell(const emu_warp *w, const emu_inst *in, const char *dsl, const char *ptx)
{
  return (in && in->item >= 0 && w->p->f->items[in->item].file > 0) || !w->p->m->nlex ? dsl : ptx;
}

/* ---------------------------------------------------- uninitialised registers */

/* Fail if the instruction reads a register some lane of m never wrote
 * (the guard itself is checked for every lane of the running group), or,
 * under the adversarial schedule, an accumulator of a pending wgmma. */
int lpx_emu_check_srcs(emu_warp *w, const emu_inst *in, uint32_t m)
{
  for (int k = 0; k < in->nsrcs; k++) {
    int32_t s = in->srcs[k];
    uint32_t lanes = (in->guard >= 0 && k == in->nsrcs - 1) ? w->cur : m;
    uint32_t bad = lanes & ~w->wr[s];
    if (!bad) continue;
    if (w->cta->tm && lpx_emu_tmem_pending(w, in, s, bad)) return -1;
    if (w->cta->sched && lpx_emu_sched_reg(w, in, s, bad)) return -1;
    if (!(w->cta->L->checks & EMU_CHECK_UNINIT_REG)) continue;   /* here for tcgen05.ld's and pending wgmma registers only */
    char name[128];
    lpx_reg_text(w->p->m, w->p->f, s, name, sizeof name);
    return lpx_emu_fail(w, in, __builtin_ctz(bad), "reads %s, which this thread never wrote (%d lane(s) of the warp read it unwritten)",
                        name, __builtin_popcount(bad));
  }
  return 0;
}
