/* Checks a GPU does not make for you, on shared memory: races between
 * barriers (a shadow word per byte records the last writer and readers in
 * the current barrier epoch), reads of shared memory never written, and
 * async-proxy reads (TMA stores, wgmma, bulk reductions) of generic-proxy
 * writes no fence.proxy.async made visible. A leaf under the memory
 * access path: it calls only the failure reports. */
#include "emu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Four per-byte race words (SSE2 lanes; memcpy loads and stores them unaligned). */
typedef uint32_t emu_v4u __attribute__((vector_size(16)));

/* Would a read of n shared bytes at off by warp me pass every check (no
 * other warp's write this epoch, every byte written when uninitialised
 * reads are checked)? Four bytes a step, no branch; when it says no,
 * lpx_emu_race's byte loop finds and reports the first bad byte. */
static inline __attribute__((always_inline)) int read_clean(const emu_cta *c, uint32_t me, uint32_t off, uint32_t n)
{
  uint32_t now = c->epoch << 8;
  uint32_t races = (c->L->checks & EMU_CHECK_RACE) ? ~0u : 0, uninit = (c->L->checks & EMU_CHECK_UNINIT_SHARED) ? ~0u : 0;
  const uint32_t *wv = c->race_w + off;
  emu_v4u bad = { 0, 0, 0, 0 }, hi = { ~0xffu, ~0xffu, ~0xffu, ~0xffu }, lo = { 0xff, 0xff, 0xff, 0xff };
  emu_v4u vnow = { now, now, now, now }, vme = { me, me, me, me }, zero = { 0, 0, 0, 0 };
  emu_v4u vr = { races, races, races, races }, vu = { uninit, uninit, uninit, uninit };
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    emu_v4u x;
    memcpy(&x, wv + i, sizeof x);
    bad |= (vr & (emu_v4u)((x & hi) == vnow) & (emu_v4u)((x & lo) != vme)) | (vu & (emu_v4u)(x == zero));
  }
  uint32_t b = bad[0] | bad[1] | bad[2] | bad[3];
  for (; i < n; i++) b |= (races & -(uint32_t)((wv[i] & ~0xffu) == now && (wv[i] & 0xff) != me)) | (uninit & -(uint32_t)(wv[i] == 0));
  return !b;
}

/* Record a clean read (read_clean) of n shared bytes at off by warp me at
 * instruction at: a second warp's read this epoch marks the byte 0xff,
 * read by several. Four bytes a step. */
static inline __attribute__((always_inline)) void read_record(emu_cta *c, uint32_t me, uint32_t at, uint32_t off, uint32_t n)
{
  uint32_t now = c->epoch << 8, *rv = c->race_r + off, *ri = c->race_ri + off;
  emu_v4u hi = { ~0xffu, ~0xffu, ~0xffu, ~0xffu }, lo = { 0xff, 0xff, 0xff, 0xff }, vnow = { now, now, now, now };
  emu_v4u vme = { me, me, me, me }, mine = vnow | vme, many = vnow | lo, vat = { at, at, at, at };
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    emu_v4u r, shared;
    memcpy(&r, rv + i, sizeof r);
    shared = (emu_v4u)((r & hi) == vnow) & (emu_v4u)((r & lo) != vme);   /* another warp read it this epoch */
    r = (shared & many) | (~shared & mine);
    memcpy(rv + i, &r, sizeof r);
    memcpy(ri + i, &vat, sizeof vat);
  }
  for (; i < n; i++) {
    uint32_t r = rv[i];
    rv[i] = ((r & ~0xffu) == now && (r & 0xff) != me) ? (now | 0xff) : (now | me);
    ri[i] = at;
  }
}

/* Would a write of n shared bytes at off by warp me meet no other warp's
 * access of this epoch (nothing to report or to settle)? Four bytes a
 * step, no branch; when it says no, lpx_emu_race's byte loop decides. */
static int write_clean(const emu_cta *c, uint32_t me, uint32_t off, uint32_t n)
{
  if (!(c->L->checks & EMU_CHECK_RACE)) return 1;
  uint32_t now = c->epoch << 8;
  const uint32_t *wv = c->race_w + off, *rv = c->race_r + off;
  emu_v4u bad = { 0, 0, 0, 0 }, hi = { ~0xffu, ~0xffu, ~0xffu, ~0xffu }, lo = { 0xff, 0xff, 0xff, 0xff };
  emu_v4u vnow = { now, now, now, now }, vme = { me, me, me, me };
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    emu_v4u x, y;
    memcpy(&x, wv + i, sizeof x);
    memcpy(&y, rv + i, sizeof y);
    bad |= ((emu_v4u)((x & hi) == vnow) & (emu_v4u)((x & lo) != vme)) | ((emu_v4u)((y & hi) == vnow) & (emu_v4u)((y & lo) != vme));
  }
  uint32_t b = bad[0] | bad[1] | bad[2] | bad[3];
  for (; i < n; i++)
    b |= (uint32_t)(((wv[i] & ~0xffu) == now && (wv[i] & 0xff) != me) || ((rv[i] & ~0xffu) == now && (rv[i] & 0xff) != me));
  return !b;
}

/* Set n race words at p to v, four a step. */
static inline __attribute__((always_inline)) void fill_words(uint32_t *p, uint32_t v, uint32_t n)
{
  emu_v4u vv = { v, v, v, v };
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) memcpy(p + i, &vv, sizeof vv);
  for (; i < n; i++) p[i] = v;
}

/* Record a clean write (write_clean) of n shared bytes at off by warp me. */
static void write_record(emu_cta *c, uint32_t me, const emu_inst *in, uint32_t at, uint32_t off, uint32_t n)
{
  fill_words(c->race_w + off, (c->epoch << 8) | me, n);
  fill_words(c->race_wi + off, at, n);
  if (c->pdirty) memset(c->pdirty + off, in->op != LPX_OP_CPBULK && in->op != LPX_OP_CPREDBULK, n);   /* generic-proxy write */
}

/* Check and record one access of n shared bytes at off (write: 0 read, 1
 * write). A write over another warp's write of this epoch is settled after
 * the instruction (lpx_emu_race_settle): a race only if the value changes. */
int lpx_emu_race(emu_warp *w, const emu_inst *in, int lane, uint32_t off, uint32_t n, int write)
{
  emu_cta *c = w->cta;
  if (!write && read_clean(c, w->id + 1, off, n)) {   /* the common read: nothing to report, record it */
    read_record(c, w->id + 1, (uint32_t)(in - w->p->insts), off, n);
    return 0;
  }
  if (write == 1 && write_clean(c, w->id + 1, off, n)) {   /* the common write */
    write_record(c, w->id + 1, in, (uint32_t)(in - w->p->insts), off, n);
    return 0;
  }
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

/* Has the generic proxy written any of shared bytes [off, off + n) with no
 * fence.proxy.async since? Eight flags a step: the common answer is no. */
static inline __attribute__((always_inline)) int proxy_dirty(const emu_cta *c, uint64_t off, uint32_t n)
{
  const uint8_t *p = c->pdirty + off;
  uint64_t any = 0;
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) { uint64_t v; memcpy(&v, p + i, 8); any |= v; }
  for (; i < n; i++) any |= p[i];
  return any != 0;
}

/* Check and record an async-proxy read of the 16 shared bytes at off by
 * warp w (wgmma's descriptor chunks) when it passes everything at once:
 * no other warp's write this epoch, every byte written (when checked),
 * and no generic-proxy write without a fence since. 1 when recorded; 0
 * when not (nothing recorded), and the caller takes lpx_emu_race and
 * lpx_emu_proxy_check, which report. */
int lpx_emu_race_async16(emu_warp *w, const emu_inst *in, uint32_t off)
{
  emu_cta *c = w->cta;
  int64_t checks = c->L->checks;
  if (!(checks & (EMU_CHECK_RACE | EMU_CHECK_UNINIT_SHARED))) return 1;
  if (!read_clean(c, w->id + 1, off, 16)) return 0;
  if (c->pdirty && (checks & EMU_CHECK_RACE) && proxy_dirty(c, off, 16)) return 0;
  read_record(c, w->id + 1, (uint32_t)(in - w->p->insts), off, 16);
  return 1;
}

/* Mark shared bytes [off, off + n) read by several warps in this epoch
 * (a kept wgmma B read again by another warp: emu_wgb.c). */
void lpx_emu_race_read_many(emu_cta *c, uint32_t off, uint32_t n)
{
  fill_words(c->race_r + off, (c->epoch << 8) | 0xff, n);
}

/* Was any of shared bytes [off, off + n) written in this epoch? */
int lpx_emu_race_written_now(const emu_cta *c, uint32_t off, uint32_t n)
{
  uint32_t now = c->epoch << 8, i = 0;
  const uint32_t *wv = c->race_w + off;
  emu_v4u any = { 0, 0, 0, 0 }, hi = { ~0xffu, ~0xffu, ~0xffu, ~0xffu }, vnow = { now, now, now, now };
  for (; i + 4 <= n; i += 4) {
    emu_v4u x;
    memcpy(&x, wv + i, sizeof x);
    any |= (emu_v4u)((x & hi) == vnow);
  }
  uint32_t b = any[0] | any[1] | any[2] | any[3];
  for (; i < n; i++) b |= (wv[i] & ~0xffu) == now;
  return b != 0;
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
  if (!proxy_dirty(c, off, n)) return 0;
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
