/* The adversarial schedule: asynchronous work completes as late as the
 * memory model allows, and warps run in seeded, hostile orders.
 *
 * Late completion is modelled by fencing bytes off rather than by moving
 * them later: a copy still moves its data when it is issued (and a wgmma
 * still writes its accumulators), but until its completion point
 *  - the shared bytes it writes are pending: reading or writing them is
 *    reported (cp.async: until a cp.async.wait_group / wait_all of the
 *    issuing thread covers its group; bulk and TMA loads: until the
 *    mbarrier phase they signal completes);
 *  - the shared bytes it reads are in flight: writing them is reported
 *    (TMA stores, bulk copies and reductions: until cp.async.bulk.wait_group
 *    (.read) covers their bulk group; wgmma: until wgmma.wait_group covers
 *    its group);
 *  - a wgmma's accumulator registers are pending: reading them is reported.
 * Any program that runs without a report therefore computes what it would
 * with the data landing at the last moment. The transaction bytes of bulk
 * and TMA loads are held back from their mbarrier until an mbarrier
 * instruction touches it with nothing else pending (a wait only when it
 * would fail without them), so a phase completes only when some thread
 * needs it.
 *
 * Hostile order: the warps of a cluster run from one queue. A warp's turn
 * ends where it would hand work to others: an mbarrier arrive (without
 * expect_tx), a failed test_wait / try_wait (a successful one on a coin),
 * a commit_group, a bar / barrier instruction. It then goes to the back of
 * the queue, so every other warp runs before it resumes; after an arrive,
 * the warps spinning on that barrier move to the front; after a CTA or
 * cluster barrier or an mbarrier phase completes, the rest of the queue is
 * shuffled; one pick in four passes over the first warp for the next. The
 * choices draw from a generator seeded by the seed and the cluster's
 * index, so a seed reproduces a run whatever the number of host threads. */
#include "emu_sched.h"
#include <stdio.h>
#include <stdlib.h>

/* Record kinds; the first three count their groups per thread. */
enum { SK_CPASYNC, SK_BULK, SK_WGMMA, SK_MBAR };

/* A shared range an asynchronous operation writes or reads. */
typedef struct sched_rng { uint32_t off, n, group; uint8_t rank, write, lane, live; } sched_rng;

/* Transaction bytes held back from the barrier at off of CTA rank. */
typedef struct sched_tx { uint32_t off; uint8_t rank, lane, done; int64_t bytes; } sched_tx;

/* One execution of an asynchronous instruction by a warp. */
typedef struct sched_rec {
  uint8_t kind, rank, live;
  uint32_t warp, group, lanes;    /* wgmma: its group and the lanes whose accumulators are pending */
  const emu_prog *p;
  const emu_inst *in;
  sched_rng *rng; size_t nrng, rng_cap;
  sched_tx *tx; size_t ntx, tx_cap;
} sched_rec;

/* Per warp: commit_groups executed per group kind and lane, the barrier
 * its last failed wait was on (rank -1: none), whether an arrive on
 * that barrier just moved it to the front of the queue, and the wgmma
 * groups its wgmma.wait_groups have completed (0 .. waited-1). */
typedef struct sched_warp { uint32_t commit[3][32]; int32_t wait_rank; uint32_t wait_off; int woken; uint32_t waited; } sched_warp;

struct emu_sched {
  int64_t seed;
  uint64_t rand;
  emu_cta *g;
  int ncta, nwarps;                       /* CTAs, warps per CTA */
  uint32_t size;                          /* shared bytes per CTA */
  uint32_t **pw, **rd;                    /* per CTA and shared byte: 1 + the record writing it / last reading it */
  uint16_t **nrd;                         /* per CTA and shared byte: in-flight reads */
  sched_rec *recs; size_t nrecs, recs_cap;
  uint32_t *active; size_t nactive, active_cap;
  int32_t cur;                            /* record of the instruction being issued, or -1 */
  sched_warp *warps;                      /* rank * nwarps + warp id */
  emu_warp **queue, **spare; int nq, turn;   /* spare: room to reorder the queue */
  int32_t bar_rank; uint32_t bar_off;     /* the barrier the last mbarrier instruction touched */
  int released, shuffle;                  /* this turn: an arrive on bar_rank/off; a barrier completed */
};

/* ------------------------------------------------------------- set-up */

/* The next number of the schedule's generator (splitmix64). */
static uint64_t next_rand(emu_sched *s)
{
  uint64_t z = (s->rand += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Shuffle queue[0..n) (Fisher-Yates). */
static void shuffle(emu_sched *s, emu_warp **q, int n)
{
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(next_rand(s) % (uint64_t)(i + 1));
    emu_warp *t = q[i]; q[i] = q[j]; q[j] = t;
  }
}

/* A schedule for the n CTAs of a cluster (their shapes are equal). */
emu_sched *lpx_emu_sched_new(emu_cta *g, int n, int64_t seed)
{
  emu_sched *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->seed = seed; s->g = g; s->ncta = n; s->nwarps = g[0].nwarps; s->size = g[0].shared_size + 16;
  s->pw = calloc((size_t)n, sizeof *s->pw); s->rd = calloc((size_t)n, sizeof *s->rd); s->nrd = calloc((size_t)n, sizeof *s->nrd);
  s->warps = calloc((size_t)(n * s->nwarps), sizeof *s->warps);
  s->queue = calloc((size_t)(n * s->nwarps), sizeof *s->queue);
  s->spare = calloc((size_t)(n * s->nwarps), sizeof *s->spare);
  if (!s->pw || !s->rd || !s->nrd || !s->warps || !s->queue || !s->spare) { lpx_emu_sched_free(s); return NULL; }
  for (int i = 0; i < n; i++) {
    s->pw[i] = calloc(s->size, sizeof(uint32_t)); s->rd[i] = calloc(s->size, sizeof(uint32_t));
    s->nrd[i] = calloc(s->size, sizeof(uint16_t));
    if (!s->pw[i] || !s->rd[i] || !s->nrd[i]) { lpx_emu_sched_free(s); return NULL; }
  }
  return s;
}

/* Free a schedule. */
void lpx_emu_sched_free(emu_sched *s)
{
  if (!s) return;
  for (int i = 0; i < s->ncta; i++) {
    if (s->pw) free(s->pw[i]);
    if (s->rd) free(s->rd[i]);
    if (s->nrd) free(s->nrd[i]);
  }
  for (size_t i = 0; i < s->recs_cap; i++) { free(s->recs[i].rng); free(s->recs[i].tx); }
  free(s->pw); free(s->rd); free(s->nrd); free(s->recs); free(s->active); free(s->warps); free(s->queue); free(s->spare);
  free(s);
}

/* Start cluster number unit: nothing pending, a fresh shuffled queue. */
void lpx_emu_sched_reset(emu_sched *s, uint64_t unit)
{
  s->rand = (uint64_t)s->seed ^ (unit * 0xd1b54a32d192ed03ull);
  next_rand(s);
  for (int i = 0; i < s->ncta; i++) {
    memset(s->pw[i], 0, s->size * sizeof(uint32_t)); memset(s->rd[i], 0, s->size * sizeof(uint32_t));
    memset(s->nrd[i], 0, s->size * sizeof(uint16_t));
  }
  s->nrecs = s->nactive = 0;
  s->cur = -1; s->released = s->shuffle = 0; s->bar_rank = -1;
  memset(s->warps, 0, (size_t)(s->ncta * s->nwarps) * sizeof *s->warps);
  s->nq = 0;
  for (int i = 0; i < s->ncta; i++)
    for (int k = 0; k < s->nwarps; k++) { s->warps[i * s->nwarps + k].wait_rank = -1; s->queue[s->nq++] = &s->g[i].warps[k]; }
  shuffle(s, s->queue, s->nq);
}

/* ------------------------------------------------------------- records */

/* Per-warp state of w (by its CTA's rank and its id). */
static sched_warp *warp_of(emu_sched *s, const emu_warp *w)
{
  return &s->warps[w->cta->rank * s->nwarps + (int)w->id];
}

/* The rows the schedule tracks: what closing one does (lpx_emu_sched_end). */
enum { R_NONE, R_CPASYNC, R_BULK, R_WGMMA, R_CPA_COMMIT, R_CPA_WAIT, R_CPA_WAITALL, R_WG_COMMIT, R_WG_WAIT, R_MBAR, R__COUNT };
static const uint8_t rows[LPX_OP__COUNT] = {
  [LPX_OP_CPASYNC] = R_CPASYNC, [LPX_OP_CPBULK] = R_BULK, [LPX_OP_CPREDBULK] = R_BULK, [LPX_OP_WGMMA] = R_WGMMA,
  [LPX_OP_CPACOMMIT] = R_CPA_COMMIT, [LPX_OP_CPAWAIT] = R_CPA_WAIT, [LPX_OP_CPAWAITALL] = R_CPA_WAITALL,
  [LPX_OP_WGCOMMIT] = R_WG_COMMIT, [LPX_OP_WGWAIT] = R_WG_WAIT, [LPX_OP_MBARRIER] = R_MBAR,
};

/* Does the schedule track this ISA row? */
int lpx_emu_sched_row(int op)
{
  return op >= 0 && op < LPX_OP__COUNT && rows[op] != R_NONE;
}

/* Does the instruction move data asynchronously (a record per execution)? */
static int moves_data(const emu_inst *in)
{
  if (in->op == LPX_OP_CPBULK || in->op == LPX_OP_CPREDBULK) return in->mod[LPX_GB_BULKGRP] == 0;
  return in->op == LPX_OP_CPASYNC || in->op == LPX_OP_WGMMA;
}

/* Open a record for this execution of an asynchronous copy or wgmma. */
void lpx_emu_sched_begin(emu_warp *w, const emu_inst *in)
{
  emu_sched *s = w->cta->sched;
  s->cur = -1;
  if (!moves_data(in)) return;
  size_t cap = s->recs_cap;
  if (LPX_RESERVE(s->recs, s->recs_cap, s->nrecs + 1)) return;   /* out of memory: this one goes untracked */
  memset(s->recs + cap, 0, (s->recs_cap - cap) * sizeof *s->recs);
  sched_rec *r = &s->recs[s->nrecs];
  r->rank = (uint8_t)w->cta->rank; r->warp = w->id; r->p = w->p; r->in = in;
  r->nrng = r->ntx = 0; r->live = 0; r->lanes = 0;
  s->cur = (int32_t)s->nrecs++;
}

/* Add a range to the open record (merged with the last one when adjacent). */
static int add_range(sched_rec *r, int rank, uint32_t off, uint32_t n, int write, int lane)
{
  sched_rng *last = r->nrng ? &r->rng[r->nrng - 1] : NULL;
  if (last && last->rank == rank && last->write == write && last->lane == lane && last->off + last->n == off) {
    last->n += n;
    return 0;
  }
  if (LPX_RESERVE(r->rng, r->rng_cap, r->nrng + 1)) return -1;
  r->rng[r->nrng++] = (sched_rng){ off, n, 0, (uint8_t)rank, (uint8_t)(write != 0), (uint8_t)lane, 1 };
  return 0;
}

/* Release a range's bytes: no longer pending (writes) or in flight (reads). */
static void clear_range(emu_sched *s, uint32_t id, sched_rng *g)
{
  uint32_t *pw = s->pw[g->rank], *rd = s->rd[g->rank];
  uint16_t *nrd = s->nrd[g->rank];
  for (uint32_t i = g->off; i < g->off + g->n; i++) {
    if (g->write) { if (pw[i] == id + 1) pw[i] = 0; }
    else if (nrd[i] && --nrd[i] == 0) rd[i] = 0;
  }
  g->live = 0;
}

/* Does a wgmma record's instruction write register slot? */
static int writes_reg(const emu_warp *w, const sched_rec *r, int32_t slot)
{
  for (int k = 0; k < r->in->ndsts; k++) if (r->in->dsts[k] == slot) return 1;
  const emu_op *v = &w->p->ops[r->in->dst_vec];
  for (uint32_t k = 0; k < r->in->ndst_vec; k++) if (v[k].kind == EO_REG && v[k].reg == slot) return 1;
  return 0;
}

/* A live wgmma record of warp w that leaves slot pending for some lane of m, or -1. */
static int32_t pending_wgmma(emu_sched *s, const emu_warp *w, int32_t slot, uint32_t m, int32_t except)
{
  for (size_t a = 0; a < s->nactive; a++) {
    const sched_rec *r = &s->recs[s->active[a]];
    if ((int32_t)s->active[a] != except && r->live && r->kind == SK_WGMMA && r->rank == w->cta->rank && r->warp == w->id &&
        (r->lanes & m) && writes_reg(w, r, slot)) return (int32_t)s->active[a];
  }
  return -1;
}

/* Set (pending 1) or restore (0) the written bits of a wgmma record's
 * accumulators; a register another pending wgmma writes stays pending. */
static void mark_regs(emu_sched *s, uint32_t id, int pending)
{
  sched_rec *r = &s->recs[id];
  emu_warp *w = &s->g[r->rank].warps[r->warp];
  const emu_op *v = &w->p->ops[r->in->dst_vec];
  for (uint32_t k = 0; k < (uint32_t)r->in->ndsts + r->in->ndst_vec; k++) {
    int32_t slot = k < r->in->ndsts ? r->in->dsts[k] : (v[k - r->in->ndsts].kind == EO_REG ? v[k - r->in->ndsts].reg : -1);
    if (slot < 0 || slot >= w->p->nregs) continue;
    if (pending) w->wr[slot] &= ~r->lanes;
    else if (pending_wgmma(s, w, slot, r->lanes, (int32_t)id) < 0) w->wr[slot] |= r->lanes;
  }
}

/* A record with nothing left pending: its lists go (messages still name
 * its instruction, so the record itself stays until the CTA ends). */
static void drop(sched_rec *r)
{
  r->live = 0;
  free(r->rng); free(r->tx);
  r->rng = NULL; r->tx = NULL;
  r->nrng = r->rng_cap = r->ntx = r->tx_cap = 0;
}

/* Retire a record: every range released, accumulators readable. */
static void retire(emu_sched *s, uint32_t id)
{
  sched_rec *r = &s->recs[id];
  for (size_t k = 0; k < r->nrng; k++) if (r->rng[k].live) clear_range(s, id, &r->rng[k]);
  r->live = 0;
  if (r->kind == SK_WGMMA && r->lanes) mark_regs(s, id, 0);
  drop(r);
}

/* The wgmma groups 0 .. upto-1 of warp id of CTA rank completed for the
 * whole warpgroup (another warp of it waited for them): their shared
 * reads end; their accumulators stay pending until the warp's own wait. */
static void retire_reads(emu_sched *s, int rank, uint32_t id, uint32_t upto)
{
  for (size_t a = 0; a < s->nactive; a++) {
    uint32_t k = s->active[a];
    sched_rec *r = &s->recs[k];
    if (!r->live || r->kind != SK_WGMMA || r->rank != rank || r->warp != id || r->group >= upto) continue;
    for (size_t j = 0; j < r->nrng; j++) if (r->rng[j].live) clear_range(s, k, &r->rng[j]);
    if (!r->lanes) drop(r);
  }
}

/* Drop retired records from the active list. */
static void compact(emu_sched *s)
{
  size_t n = 0;
  for (size_t a = 0; a < s->nactive; a++) if (s->recs[s->active[a]].live) s->active[n++] = s->active[a];
  s->nactive = n;
}

/* Close the open record of kind (bulk kinds with held-back bytes become
 * mbarrier records): its ranges join the lanes' open groups. */
static void finish(emu_sched *s, emu_warp *w, int kind, uint32_t m)
{
  if (s->cur < 0) return;
  uint32_t id = (uint32_t)s->cur;
  sched_rec *r = &s->recs[id];
  s->cur = -1;
  if (kind != SK_WGMMA && !r->nrng && !r->ntx) { if (id + 1 == s->nrecs) s->nrecs--; return; }
  if (LPX_RESERVE(s->active, s->active_cap, s->nactive + 1)) return;
  sched_warp *sw = warp_of(s, w);
  r->kind = (uint8_t)(r->ntx ? SK_MBAR : kind);
  for (size_t k = 0; k < r->nrng; k++) r->rng[k].group = kind < SK_MBAR ? sw->commit[kind][r->rng[k].lane] : 0;
  r->live = 1;
  s->active[s->nactive++] = id;
  if (kind != SK_WGMMA) return;
  r->group = sw->commit[SK_WGMMA][__builtin_ctz(m)];
  r->lanes = w->depth ? 0 : m;                /* a callee's registers are its own frame's: not tracked */
  if (r->lanes) mark_regs(s, id, 1);
}

/* ------------------------------------------------------------- groups */

/* commit_group of a group kind by lanes m. */
static void commit(emu_sched *s, emu_warp *w, int kind, uint32_t m)
{
  sched_warp *sw = warp_of(s, w);
  EMU_EACH(m, sw->commit[kind][l]++);
}

/* The warps of w's warpgroup: the first and one past the last. */
static void warpgroup(const emu_sched *s, const emu_warp *w, uint32_t *lo, uint32_t *hi)
{
  *lo = w->id / 4 * 4;
  *hi = *lo + 4 < (uint32_t)s->nwarps ? *lo + 4 : (uint32_t)s->nwarps;
}

/* A wgmma.wait_group of w completed groups 0 .. upto-1 for its warpgroup:
 * the other warps' reads of those groups end (emu_wgmma.c: the wait went
 * on only once they had issued them). */
static void warpgroup_waited(emu_sched *s, emu_warp *w, uint32_t upto)
{
  sched_warp *sw = warp_of(s, w);
  if (upto <= sw->waited) return;
  sw->waited = upto;
  uint32_t lo, hi;
  warpgroup(s, w, &lo, &hi);
  for (uint32_t q = lo; q < hi; q++) if (q != w->id) retire_reads(s, w->cta->rank, q, upto);
  compact(s);
}

/* w committed a wgmma group: when another warp of its warpgroup already
 * waited past it (that wait was blocked until now), its reads end. */
static void warpgroup_commit(emu_sched *s, emu_warp *w, uint32_t m)
{
  uint32_t lo, hi, upto = 0, group = warp_of(s, w)->commit[SK_WGMMA][__builtin_ctz(m)];
  warpgroup(s, w, &lo, &hi);
  for (uint32_t q = lo; q < hi; q++) {
    uint32_t v = s->warps[w->cta->rank * s->nwarps + (int)q].waited;
    if (q != w->id && v > upto) upto = v;
  }
  if (upto > group) upto = group;
  if (upto) { retire_reads(s, w->cta->rank, w->id, upto); compact(s); }
}

/* A cp.async's bytes land at its wait: for the race check they are written
 * by the issuing warp now, so another warp reading them before the next
 * barrier is a race (cp.async.wait_group makes them visible to the issuing
 * thread only). */
static void land_cpasync(emu_sched *s, const sched_rec *r, const sched_rng *g)
{
  emu_cta *c = &s->g[g->rank];
  if (!c->race_w || r->p != c->warps[0].p) return;
  for (uint32_t i = g->off; i < g->off + g->n; i++) {
    c->race_w[i] = (c->epoch << 8) | (r->warp + 1);
    c->race_wi[i] = (uint32_t)(r->in - r->p->insts);
  }
}

/* Complete the groups of kind that lanes m wait for: all but the newest
 * keep committed ones (keep < 0: every group, the open one too). */
static void wait_groups(emu_sched *s, emu_warp *w, int kind, uint32_t m, int64_t keep)
{
  sched_warp *sw = warp_of(s, w);
  for (size_t a = 0; a < s->nactive; a++) {
    uint32_t id = s->active[a];
    sched_rec *r = &s->recs[id];
    if (!r->live || r->kind != kind || r->rank != w->cta->rank || r->warp != w->id) continue;
    if (kind == SK_WGMMA) {
      if (keep < 0 || (int64_t)r->group + keep < (int64_t)sw->commit[kind][__builtin_ctz(m)]) retire(s, id);
      continue;
    }
    int left = 0;
    for (size_t k = 0; k < r->nrng; k++) {
      sched_rng *g = &r->rng[k];
      if (g->live && (m >> g->lane & 1) && (keep < 0 || (int64_t)g->group + keep < (int64_t)sw->commit[kind][g->lane])) {
        if (kind == SK_CPASYNC && g->write) land_cpasync(s, r, g);
        clear_range(s, id, g);
      }
      left |= g->live;
    }
    if (!left) drop(r);
  }
  compact(s);
}

/* The immediate count of a wait_group (operand 0) for the first lane of m. */
static int64_t wait_count(emu_warp *w, const emu_inst *in, uint32_t m)
{
  return (int64_t)(uint32_t)EMU_R(w, EMU_OP(w, in, 0)->reg)[__builtin_ctz(m)];
}

/* ------------------------------------------------------------ mbarriers */

/* Hold back a copy's transaction bytes on barrier p of CTA c until the
 * phase can complete; 0 when no copy is being issued (apply them now). */
int lpx_emu_sched_defer_tx(emu_cta *c, const uint8_t *p, int lane, int64_t bytes)
{
  emu_sched *s = c->sched;
  if (s->cur < 0) return 0;
  sched_rec *r = &s->recs[s->cur];
  if (LPX_RESERVE(r->tx, r->tx_cap, r->ntx + 1)) return 0;
  r->tx[r->ntx++] = (sched_tx){ (uint32_t)(p - c->shared), (uint8_t)c->rank, (uint8_t)lane, 0, bytes };
  return 1;
}

/* Held-back bytes of live records on the barrier at off of CTA rank. */
static int64_t held_bytes(emu_sched *s, int rank, uint32_t off, int *any)
{
  int64_t sum = 0;
  for (size_t a = 0; a < s->nactive; a++) {
    const sched_rec *r = &s->recs[s->active[a]];
    for (size_t k = 0; r->live && r->kind == SK_MBAR && k < r->ntx; k++)
      if (!r->tx[k].done && r->tx[k].rank == rank && r->tx[k].off == off) { sum += r->tx[k].bytes; *any = 1; }
  }
  return sum;
}

/* The barrier at off of CTA rank completed its held-back bytes: the
 * copies' writes into that CTA land; a record with nothing left retires. */
static void landed(emu_sched *s, int rank, uint32_t off)
{
  for (size_t a = 0; a < s->nactive; a++) {
    uint32_t id = s->active[a];
    sched_rec *r = &s->recs[id];
    if (!r->live || r->kind != SK_MBAR) continue;
    int left = 0;
    for (size_t k = 0; k < r->ntx; k++) {
      sched_tx *t = &r->tx[k];
      if (!t->done && t->rank == rank && t->off == off) {
        t->done = 1;
        for (size_t j = 0; j < r->nrng; j++)
          if (r->rng[j].live && r->rng[j].write && r->rng[j].rank == rank && r->rng[j].lane == t->lane) clear_range(s, id, &r->rng[j]);
      }
      left |= !t->done;
    }
    if (!left) retire(s, id);
  }
  compact(s);
}

/* Any mbarrier instruction on barrier p of CTA c: remember it; the bytes
 * held back on it (*any: some are), which emu_mbar.c completes when only
 * they keep its phase open. */
int64_t lpx_emu_sched_mbar_held(emu_cta *c, uint8_t *p, int *any)
{
  emu_sched *s = c->sched;
  uint32_t off = (uint32_t)(p - c->shared);
  s->bar_rank = c->rank; s->bar_off = off;
  return held_bytes(s, c->rank, off, any);
}

/* The held-back bytes on barrier p of CTA c were completed. */
void lpx_emu_sched_mbar_landed(emu_cta *c, uint8_t *p) { landed(c->sched, c->rank, (uint32_t)(p - c->shared)); }

/* After an mbarrier instruction: an arrive without expect_tx releases (the
 * spinning warps of that barrier go first); a failed wait spins; after a
 * wait that succeeds, a coin decides whether the warp lets others run
 * first, unless an arrive just woke it (it goes on). 1: yield. */
static int mbar_after(emu_sched *s, emu_warp *w, const emu_inst *in, uint32_t m)
{
  int kind = in->mod[LPX_GB_MBAR];
  sched_warp *sw = warp_of(s, w);
  if ((kind == LPX_MBAR_ARRIVE || kind == LPX_MBAR_ARRIVE_DROP) && !in->mod[LPX_GB_EXPECT]) {
    s->released = 1;
    return 1;
  }
  if (kind != LPX_MBAR_TEST_WAIT && kind != LPX_MBAR_TRY_WAIT) return 0;
  const uint64_t *ok = EMU_R(w, EMU_OP(w, in, 0)->reg);
  uint32_t failed = 0;
  EMU_EACH(m, failed |= (uint32_t)!(ok[l] & 1) << l);
  sw->wait_rank = failed ? s->bar_rank : -1;
  sw->wait_off = s->bar_off;
  if (failed) return 1;
  return !sw->woken && (next_rand(s) & 1);
}

typedef int (*sched_after)(emu_sched *s, emu_warp *w, const emu_inst *in, uint32_t m);
#define AFTER(name) static int name(emu_sched *s, emu_warp *w, const emu_inst *in, uint32_t m)

/* cp.async / wgmma issued: close their records. */
AFTER(after_cpasync) { (void)in; finish(s, w, SK_CPASYNC, m); return 0; }
AFTER(after_wgmma) { (void)in; finish(s, w, SK_WGMMA, m); return 0; }

/* A bulk row: a copy or reduction (its record), or the bulk group's commit or wait. */
AFTER(after_bulk)
{
  int grp = in->mod[LPX_GB_BULKGRP];
  if (grp == LPX_BULKGRP_COMMIT_GROUP) { commit(s, w, SK_BULK, m); return 1; }
  if (grp == LPX_BULKGRP_WAIT_GROUP) wait_groups(s, w, SK_BULK, m, wait_count(w, in, m));
  else finish(s, w, SK_BULK, m);
  return 0;
}

/* commit_group of cp.async and wgmma: the warp hands its work off and yields. */
AFTER(after_cpa_commit) { (void)in; commit(s, w, SK_CPASYNC, m); return 1; }
AFTER(after_wg_commit) { (void)in; commit(s, w, SK_WGMMA, m); warpgroup_commit(s, w, m); return 1; }

/* wait_group n of cp.async and wgmma; cp.async.wait_all commits and waits for everything. */
AFTER(after_cpa_wait) { wait_groups(s, w, SK_CPASYNC, m, wait_count(w, in, m)); return 0; }
AFTER(after_wg_wait)
{
  int64_t keep = wait_count(w, in, m), done = (int64_t)warp_of(s, w)->commit[SK_WGMMA][__builtin_ctz(m)] - keep;
  wait_groups(s, w, SK_WGMMA, m, keep);
  if (done > 0) warpgroup_waited(s, w, (uint32_t)done);
  return 0;
}
AFTER(after_cpa_waitall) { (void)in; commit(s, w, SK_CPASYNC, m); wait_groups(s, w, SK_CPASYNC, m, -1); return 0; }

static const sched_after afters[R__COUNT] = {
  [R_CPASYNC] = after_cpasync, [R_BULK] = after_bulk, [R_WGMMA] = after_wgmma, [R_CPA_COMMIT] = after_cpa_commit,
  [R_CPA_WAIT] = after_cpa_wait, [R_CPA_WAITALL] = after_cpa_waitall, [R_WG_COMMIT] = after_wg_commit,
  [R_WG_WAIT] = after_wg_wait, [R_MBAR] = mbar_after,
};

/* Close an EI_ASYNC instruction: records, groups, events. 1: the warp yields. */
int lpx_emu_sched_end(emu_warp *w, const emu_inst *in, uint32_t m)
{
  sched_after fn = afters[rows[in->op]];
  return fn ? fn(w->cta->sched, w, in, m) : 0;
}

/* ------------------------------------------------------------- reports */

/* What completes a record of each kind (for messages). */
static const char *const until[] = {
  [SK_CPASYNC] = "a cp.async completes only at a cp.async.wait_group / wait_all of the issuing thread that covers its group "
                 "(other threads need a barrier after that wait)",
  [SK_BULK] = "a TMA store, bulk copy or bulk reduction reads its source until a cp.async.bulk.wait_group(.read) of the "
              "issuing thread covers its bulk group",
  [SK_WGMMA] = "wgmma.mma_async reads its shared-memory operands until a wgmma.wait_group covers its group; release the "
               "buffer after that wait",
  [SK_MBAR] = "a bulk or TMA copy completes with the mbarrier phase it signals: wait for that phase (mbarrier.try_wait) "
              "first, and refill a buffer only after its readers released it",
};

/* Report an access to byte at of CTA c that conflicts with record id. */
static int conflict(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t at, uint32_t id, int how)
{
  emu_sched *s = w->cta->sched;
  const sched_rec *r = &s->recs[id];
  char there[512], cta[48] = "";
  static const char *const verbs[] = { "reads", "writes", "writes" };
  static const char *const states[] = { "has not finished writing", "is still writing", "still reads" };
  lpx_emu_where(r->p, r->in, there, sizeof there);
  if (c != w->cta) snprintf(cta, sizeof cta, " of cluster CTA rank %d", c->rank);
  return lpx_emu_fail(w, in, lane, "%s shared memory at offset 0x%x%s that %s %s: %s (adversarial schedule, seed %lld)",
                      verbs[how], at, cta, there, states[how], until[r->kind], (long long)s->seed);
}

/* A shared access in sched mode: conflicts with pending copies are
 * reported; an asynchronous instruction's own accesses are recorded. */
int lpx_emu_sched_access(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t off, uint32_t n, int write)
{
  emu_sched *s = w->cta->sched;
  if (in->op == LPX_OP_MBARRIER || (write == 2 && lpx_emu_sched_row(in->op))) return 0;   /* barrier words */
  uint32_t *pw = s->pw[c->rank], *rd = s->rd[c->rank];
  uint16_t *nrd = s->nrd[c->rank];
  int32_t cur = s->cur >= 0 && s->recs[s->cur].in == in ? s->cur : -1;
  int reduce = in->op == LPX_OP_CPREDBULK;
  for (uint32_t i = off; i < off + n; i++) {
    uint32_t p = pw[i];
    if (p && (int32_t)p - 1 != cur && !(reduce && s->recs[p - 1].in->op == LPX_OP_CPREDBULK))   /* reductions may overlap */
      return conflict(w, in, lane, c, i, p - 1, write ? 1 : 0);
    if (write && nrd[i] && !(nrd[i] == 1 && (int32_t)rd[i] - 1 == cur)) return conflict(w, in, lane, c, i, rd[i] - 1, 2);
  }
  if (cur < 0) return 0;
  if (add_range(&s->recs[cur], c->rank, off, n, write, lane))
    return lpx_emu_fail(w, in, lane, "out of host memory for the adversarial schedule");
  for (uint32_t i = off; i < off + n; i++) {
    if (write) pw[i] = (uint32_t)cur + 1;
    else if (nrd[i] < UINT16_MAX) { nrd[i]++; rd[i] = (uint32_t)cur + 1; }
  }
  return 0;
}

/* A read of register slot that lanes bad never wrote: reported when a
 * pending wgmma writes it; 0 otherwise. */
int lpx_emu_sched_reg(emu_warp *w, const emu_inst *in, int32_t slot, uint32_t bad)
{
  emu_sched *s = w->cta->sched;
  int32_t id = pending_wgmma(s, w, slot, bad, -1);
  if (id < 0) return 0;
  char name[128], there[512];
  lpx_reg_text(w->p->m, w->p->f, slot, name, sizeof name);
  lpx_emu_where(s->recs[id].p, s->recs[id].in, there, sizeof there);
  return lpx_emu_fail(w, in, __builtin_ctz(bad), "reads %s, an accumulator of %s, before a wgmma.wait_group covers its group: "
                      "the result is not there yet (adversarial schedule, seed %lld)", name, there, (long long)s->seed);
}

/* ---------------------------------------------------------------- order */

/* Can warp q run? */
static int runnable(const emu_warp *q) { return (q->live & ~q->blocked) != 0; }

/* The first warp of the queue that can run (NULL: none); one time in four
 * it is passed over for the next one that can, unless an arrive woke it,
 * so warps also run at uneven rates. */
emu_warp *lpx_emu_sched_next(emu_sched *s)
{
  int first = -1;
  for (int i = 0; i < s->nq && first < 0; i++) if (runnable(s->queue[i])) first = i;
  if (first < 0) return NULL;
  s->turn = first;
  if (warp_of(s, s->queue[first])->woken || next_rand(s) % 4) return s->queue[first];
  for (int i = first + 1; i < s->nq; i++) if (runnable(s->queue[i])) { s->turn = i; break; }
  return s->queue[s->turn];
}

/* A CTA or cluster barrier completed: shuffle at the end of this turn. */
void lpx_emu_sched_shuffle(emu_sched *s) { s->shuffle = 1; }

/* Is warp q spinning on the barrier the last arrive released? */
static int waits_on_release(emu_sched *s, const emu_warp *q)
{
  const sched_warp *sw = warp_of(s, q);
  return sw->wait_rank == s->bar_rank && sw->wait_off == s->bar_off;
}

/* Move the warps spinning on the released barrier to the front of
 * queue[0..n), in random order; the others keep theirs. */
static void waiters_first(emu_sched *s, int n)
{
  emu_warp **tmp = s->spare;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (waits_on_release(s, s->queue[i])) { warp_of(s, s->queue[i])->woken = 1; tmp[k++] = s->queue[i]; }
  shuffle(s, tmp, k);
  for (int i = 0; i < n; i++) if (!waits_on_release(s, s->queue[i])) tmp[k++] = s->queue[i];
  memcpy(s->queue, tmp, (size_t)n * sizeof *tmp);
}

/* The end of w's turn: w goes to the back; the events of the turn reorder
 * the others (a barrier: shuffled; an arrive: its spinning warps first). */
void lpx_emu_sched_turn_end(emu_sched *s, emu_warp *w)
{
  warp_of(s, w)->woken = 0;
  memmove(&s->queue[s->turn], &s->queue[s->turn + 1], (size_t)(s->nq - s->turn - 1) * sizeof *s->queue);
  s->queue[s->nq - 1] = w;
  if (s->shuffle) shuffle(s, s->queue, s->nq - 1);
  if (s->released) waiters_first(s, s->nq - 1);
  s->shuffle = s->released = 0;
}
