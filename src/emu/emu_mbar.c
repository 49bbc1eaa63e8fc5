/* Hopper's mbarrier objects in shared memory: one lane's mbarrier
 * operation on its word (init, arrive, arrive_drop, their .noComplete
 * forms, expect_tx, complete_tx, test_wait / try_wait with phase tokens or
 * parity, inval), the transactions copies complete on it, tcgen05.commit's
 * arrive, and the deadlock report of a wait nothing can complete. A
 * barrier's phase completes when its pending arrivals and its transaction
 * count both reach zero. A leaf under the handler families (emu_bulk.c,
 * TMA, reductions, tcgen05): it calls memory, the schedule and reports. */
#include "emu.h"
#include "emu_sched.h"

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)

/* ------------------------------------------------------------ the object */

/* The 64-bit object: pending arrivals, expected arrivals, signed
 * transaction count (21 bits each) and the current phase's parity. */
typedef struct mbar { int64_t pending, expected, tx; int phase; } mbar;

#define F21 EMU_MBAR_COUNT

/* Unpack an mbarrier word. */
static mbar unpack(uint64_t v)
{
  mbar b = { (int64_t)(v & F21), (int64_t)((v >> 21) & F21), (int64_t)((v >> 42) & F21), (int)(v >> 63) };
  if (b.tx & 0x100000) b.tx -= 0x200000;
  return b;
}

/* Pack an mbarrier word. */
static uint64_t pack(mbar b)
{
  return ((uint64_t)b.pending & F21) | ((uint64_t)b.expected & F21) << 21 | ((uint64_t)b.tx & F21) << 42 | (uint64_t)b.phase << 63;
}

/* Complete the phase when nothing is pending: flip parity, re-arm. A
 * completed phase orders memory like a barrier, so the race check starts
 * a new epoch. */
static void settle(emu_cta *c, mbar *b)
{
  if (b->pending || b->tx || !b->expected) return;
  b->phase ^= 1;
  b->pending = b->expected;
  c->epoch++;
  if (c->sched) lpx_emu_sched_shuffle(c->sched);   /* the adversarial schedule reshuffles at every completed phase */
}

/* The CTA of the cluster whose shared memory holds the barrier word p. */
emu_cta *lpx_emu_mbar_owner(emu_warp *w, const uint8_t *p)
{
  emu_cta *me = w->cta;
  for (int i = 0; i < me->group_size; i++) {
    emu_cta *c = &me->group[i];
    if (p >= c->shared && p < c->shared + c->shared_size) return c;
  }
  return me;
}

/* ------------------------------------------------------------ addressing */

/* Host pointer of the 8-byte barrier operand k for a lane (shared unless said otherwise). */
uint8_t *lpx_emu_mbar_ptr(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *ao = EMU_OP(w, in, k);
  int sp = lpx_emu_space(in);
  if (ao->reg < 0 && ao->space != EMU_SP_GENERIC) sp = ao->space;
  else if (sp == EMU_SP_GENERIC && in->mod[LPX_GB_SHARED]) sp = EMU_SP_SHARED;
  uint64_t addr = (ao->reg >= 0 ? EMU_R(w, ao->reg)[lane] : 0) + (uint64_t)ao->off;
  return lpx_emu_addr(w, in, lane, sp, addr, 8, 2);
}

/* ------------------------------------------------ held-back transactions */

/* Complete bytes the adversarial schedule held back on the barrier word p
 * of CTA c, when nothing else keeps its phase open (no pending arrivals and
 * exactly that many pending transaction bytes) and a wait for the phase
 * with parity want (-1: not a wait) would fail without them. 1 if the
 * phase completed. */
static int take_tx(emu_cta *c, uint8_t *p, int64_t bytes, int want)
{
  uint64_t word;
  memcpy(&word, p, 8);
  mbar b = unpack(word);
  if (!b.expected || b.pending || b.tx != bytes || (want >= 0 && b.phase != want)) return 0;
  b.tx = 0;
  settle(c, &b);
  c->mbar_gen++;
  word = pack(b);
  memcpy(p, &word, 8);
  return 1;
}

/* Any mbarrier instruction on barrier p of CTA c under the adversarial
 * schedule: when only bytes it held back keep the phase open, complete
 * them now (for a wait for parity want, only when it would fail without
 * them) and tell the schedule they landed. */
static void touch(emu_cta *c, uint8_t *p, int want)
{
  int any = 0;
  int64_t held = lpx_emu_sched_mbar_held(c, p, &any);
  if (any && take_tx(c, p, held, want)) lpx_emu_sched_mbar_landed(c, p);
}

/* ------------------------------------------------------------------ ops */

/* The phase parity a test_wait/try_wait waits for (.parity operand or state token). */
int lpx_emu_mbar_parity(emu_warp *w, const emu_inst *in, int k, int lane)
{
  uint64_t v = D(k + 1)[lane];
  return in->mod[LPX_GB_PARITY] ? (int)(v & 1) : (int)(v >> 63);
}

/* A .noComplete arrival that would complete the phase: undefined in the
 * PTX ISA (a GPU gives no error), so the emulator reports it. */
static int no_complete_fail(emu_warp *w, const emu_inst *in, int lane, int64_t count)
{
  return lpx_emu_fail(w, in, lane, "this .noComplete arrival (count %lld) takes the last pending arrival(s) of the mbarrier's "
                      "phase with no transaction bytes pending, so it would complete the phase; the PTX ISA leaves that "
                      "undefined (a GPU reports nothing): the arrival that completes a phase must not carry .noComplete",
                      (long long)count);
}

/* Apply one lane's operation to its barrier word; *out gets the result. */
int lpx_emu_mbar_apply(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, int k, uint64_t *out)
{
  int kind = in->mod[LPX_GB_MBAR];
  uint64_t word;
  emu_cta *c = lpx_emu_mbar_owner(w, p);
  int waits = kind == LPX_MBAR_TEST_WAIT || kind == LPX_MBAR_TRY_WAIT;
  if (c->sched) touch(c, p, waits ? lpx_emu_mbar_parity(w, in, k, lane) : -1);   /* held-back copy bytes */
  memcpy(&word, p, 8);
  mbar b = unpack(word);
  int64_t arg = in->nops > k + 1 ? (int64_t)(uint32_t)D(k + 1)[lane] : 1;
  if (kind == LPX_MBAR_INIT) {
    if (arg < 1 || arg > 0xfffff) return lpx_emu_fail(w, in, lane, "mbarrier.init count %lld; valid 1..1048575", (long long)arg);
    b = (mbar){ arg, arg, 0, 0 };
  } else if (kind == LPX_MBAR_INVAL) {
    b = (mbar){ 0, 0, 0, 0 };
  } else if (kind == LPX_MBAR_EXPECT_TX || kind == LPX_MBAR_COMPLETE_TX) {
    b.tx += kind == LPX_MBAR_EXPECT_TX ? arg : -arg;
    settle(c, &b);
  } else if (kind == LPX_MBAR_ARRIVE || kind == LPX_MBAR_ARRIVE_DROP) {
    int64_t count = in->mod[LPX_GB_EXPECT] ? 1 : arg;
    if (in->mod[LPX_GB_EXPECT]) b.tx += arg;
    if (!b.expected) return lpx_emu_fail(w, in, lane, "arrive on an mbarrier that is not initialised (mbarrier.init)");
    if (count > b.pending)
      return lpx_emu_fail(w, in, lane, "%lld arrival(s) on an mbarrier with only %lld pending in this phase", (long long)count, (long long)b.pending);
    *out = word;                              /* the state token: the word before this arrival */
    b.pending -= count;
    if (kind == LPX_MBAR_ARRIVE_DROP) b.expected -= count;
    if (in->mod[LPX_GB_NOCOMP] && !b.pending && !b.tx && b.expected) return no_complete_fail(w, in, lane, count);
    settle(c, &b);
  } else if (kind == LPX_MBAR_TEST_WAIT || kind == LPX_MBAR_TRY_WAIT) {
    int want = lpx_emu_mbar_parity(w, in, k, lane);
    *out = b.phase != want;                   /* the phase with that parity has completed */
  }
  uint64_t before = word;
  word = pack(b);
  if (word != before) c->mbar_gen++;
  memcpy(p, &word, 8);
  return 0;
}

/* Whether every running warp of CTA g spins: it failed two mbarrier waits
 * in a row with none of g's mbarriers changed since. */
static int cta_spinning(const emu_cta *g)
{
  for (int k = 0; k < g->nwarps; k++) {
    const emu_warp *o = &g->warps[k];
    if (!(o->live & ~o->blocked)) continue;
    if (o->mbar_wait_gen != g->mbar_gen + 1 || o->mbar_wait_fails < 2) return 0;
  }
  return 1;
}

/* A wait that failed: when every warp of the CTA's cluster (the CTA alone
 * without one) is either exited, blocked at a barrier, or failed an
 * mbarrier wait since the last change of any of its own CTA's mbarriers
 * (a remote arrival changes the owner's), nothing can complete the phase:
 * report a deadlock. */
int lpx_emu_mbar_wait_failed(emu_warp *w, const emu_inst *in, int lane, const uint8_t *p, int want)
{
  emu_cta *c = w->cta;
  w->wait_failed = 1;
  if (w->mbar_wait_gen != c->mbar_gen + 1) w->mbar_wait_fails = 0;
  w->mbar_wait_gen = c->mbar_gen + 1;
  w->mbar_wait_fails++;
  int n = c->group_size > 1 ? c->group_size : 1;
  for (int r = 0; r < n; r++)
    if (!cta_spinning(n > 1 ? &c->group[r] : c)) return 0;
  uint64_t word;
  memcpy(&word, p, 8);
  mbar b = unpack(word);
  return lpx_emu_fail(w, in, lane, "deadlock: this wait for the mbarrier phase with parity %d can never complete: every "
    "warp of the %s is waiting or has exited; the barrier is in phase parity %d with %lld of %lld arrival(s) and "
    "%lld transaction byte(s) pending (wrong parity, a missing arrive, or expect_tx bytes no copy delivers?)",
    want, n > 1 ? "cluster" : "CTA", b.phase, (long long)b.pending, (long long)b.expected, (long long)b.tx);
}

/* ------------------------------------------- copies and tcgen05 arrivals */

/* Complete bytes of transactions on the barrier word p, which lives in CTA c. */
static int complete_on(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, emu_cta *c, int64_t bytes)
{
  uint64_t word;
  memcpy(&word, p, 8);
  mbar b = unpack(word);
  if (!b.expected) return lpx_emu_fail(w, in, lane, "the copy completes on an mbarrier that is not initialised (mbarrier.init)");
  if (c->sched && lpx_emu_sched_defer_tx(c, p, lane, bytes)) return 0;   /* the adversarial schedule completes it late */
  b.tx -= bytes;
  if (!b.pending && !b.tx) { b.phase ^= 1; b.pending = b.expected; c->epoch++; }
  c->mbar_gen++;
  word = pack(b);
  memcpy(p, &word, 8);
  return 0;
}

/* Complete bytes of transactions on the barrier of ADDR operand k for a
 * lane (the .mbarrier::complete_tx::bytes of bulk and tensor copies); the
 * barrier may live in another CTA of the cluster. */
int lpx_emu_mbar_complete(emu_warp *w, const emu_inst *in, int k, int lane, int64_t bytes)
{
  uint8_t *p = lpx_emu_mbar_ptr(w, in, k, lane);
  return p ? complete_on(w, in, lane, p, lpx_emu_mbar_owner(w, p), bytes) : -1;
}

/* The same, on the barrier at CTA-relative shared offset off of cluster rank r (multicast). */
int lpx_emu_mbar_complete_rank(emu_warp *w, const emu_inst *in, int lane, int r, uint64_t off, int64_t bytes)
{
  uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, ((uint64_t)(r + 1) << 24) | (off & 0xffffff), 8, 2);
  return p ? complete_on(w, in, lane, p, &w->cta->group[r], bytes) : -1;
}

/* One arrive on the barrier word p of CTA c, as tcgen05.commit's
 * .mbarrier::arrive::one signals it; *phase gets the parity of the phase
 * the arrive counted in. 0, or -1 with the error set. */
int lpx_emu_mbar_arrive_one(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, emu_cta *c, int *phase)
{
  uint64_t word;
  memcpy(&word, p, 8);
  mbar b = unpack(word);
  if (!b.expected) return lpx_emu_fail(w, in, lane, "tcgen05.commit arrives on an mbarrier that is not initialised (mbarrier.init)");
  if (b.pending < 1) return lpx_emu_fail(w, in, lane, "tcgen05.commit arrives on an mbarrier with no arrival pending in this phase");
  *phase = b.phase;
  b.pending--;
  settle(c, &b);
  c->mbar_gen++;
  word = pack(b);
  memcpy(p, &word, 8);
  return 0;
}
