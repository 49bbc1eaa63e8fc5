/* Execution: a launch hands CTAs to host threads; each CTA runs its warps
 * cooperatively (a warp runs until it blocks, exits or uses its quantum);
 * inside a warp, lanes carry their own PCs and the group at the smallest
 * PC runs (min-PC scheduling), so divergent lanes reconverge where their
 * paths meet. Barriers block lanes; when nothing can run and lanes are
 * still blocked the CTA has deadlocked, which is reported, not hung. */
#include "emu.h"
#include "emu_sched.h"
#include "emu_prof.h"
#include "../lpx_sys.h"
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define QUANTUM 1024
#define BUDGET_CHUNK 4096

/* ------------------------------------------------------------- messages */

/* Mark every register of a long destination vector written for lanes m. */
static void mark_vec_written(emu_warp *w, const emu_inst *in, uint32_t m)
{
  const emu_op *v = &w->p->ops[in->dst_vec];
  for (uint32_t k = 0; k < in->ndst_vec; k++)
    if (v[k].kind == EO_REG && v[k].reg >= 0 && v[k].reg < w->p->nregs) w->wr[v[k].reg] |= m;
}

/* ---------------------------------------------------------------- lanes */

/* Write the running group's PC back into its lanes. */
static void flush(emu_warp *w)
{
  EMU_EACH(w->cur, w->pc[l] = w->cur_pc);
  w->cur = 0;
}

/* Pick the runnable lanes at the smallest PC as the new group; 0 if none. */
static int regroup(emu_warp *w)
{
  uint32_t run = w->live & ~w->blocked;
  if (!run) return 0;
  int32_t lo = INT32_MAX, next = INT32_MAX;
  EMU_EACH(run, if (w->pc[l] < lo) lo = w->pc[l]);
  uint32_t cur = 0;
  EMU_EACH(run, if (w->pc[l] == lo) cur |= 1u << l; else if (w->pc[l] < next) next = w->pc[l]);
  w->cur = cur; w->cur_pc = lo; w->other_min = next;
  return 1;
}

/* Continue the group at pc, regrouping when it meets other lanes. */
static void jump(emu_warp *w, int32_t pc)
{
  w->cur_pc = pc;
  if (pc >= w->other_min) flush(w);
}

/* -------------------------------------------------------- control flow */

/* bra: the whole group, none of it, or a divergent split. */
static int op_bra(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (m == w->cur) { jump(w, in->target); return 0; }
  if (!m) { jump(w, w->cur_pc + 1); return 0; }
  int32_t next = w->cur_pc + 1;
  EMU_EACH(w->cur, w->pc[l] = (m >> l & 1) ? in->target : next);
  w->cur = 0;
  return 0;
}

/* Release the lanes waiting at bar.warp.sync whose member masks name no
 * live lane that has not arrived (exited lanes no longer count). */
static void warp_sync_settle(emu_warp *w)
{
  uint32_t b = w->blocked, at = 0, go = 0;
  EMU_EACH(b, if (w->bar_of[l] == EMU_WARP_BAR) at |= 1u << l);
  EMU_EACH(at, if (!(w->wsync[l] & w->live & ~at)) go |= 1u << l);
  EMU_EACH(go, {
    w->blocked &= ~(1u << l);
    if (++w->pc[l] < w->other_min) w->other_min = w->pc[l];
  });
}

/* exit / ret from the entry: the lanes leave; the rest fall through. */
static int op_exit(emu_warp *w, const emu_inst *in, uint32_t m)
{
  w->live &= ~m;
  w->cur &= ~m;
  if (w->blocked) warp_sync_settle(w);
  if (w->cur) jump(w, w->cur_pc + 1);
  return 0;
}

/* bar.warp.sync mask: the lanes wait until every live lane their mask
 * names has reached a bar.warp.sync (in divergent code, another one). */
static int op_barwarp(emu_warp *w, const emu_inst *in, uint32_t m)
{
  int32_t pc = w->cur_pc;
  uint32_t cur = w->cur, need = 0, outside = 0;
  const uint64_t *mask = EMU_R(w, EMU_OP(w, in, 0)->reg);
  EMU_EACH(m, { need |= (uint32_t)mask[l]; outside |= (uint32_t)!(mask[l] >> l & 1) << l; });
  if (outside)
    return lpx_emu_fail(w, in, __builtin_ctz(outside), "lane(s) 0x%08x execute bar.warp.sync but are not in its member mask 0x%08x; "
                        "valid: a mask naming every lane that executes it", outside, (uint32_t)mask[__builtin_ctz(outside)]);
  if (!(need & w->live & ~m) && !w->blocked) { jump(w, pc + 1); return 0; }   /* all here: nothing to wait for */
  w->cur = 0;
  EMU_EACH(cur, w->pc[l] = (m >> l & 1) ? pc : pc + 1);
  w->blocked |= m;
  EMU_EACH(m, { w->bar_of[l] = EMU_WARP_BAR; w->wsync[l] = (uint32_t)mask[l]; });
  warp_sync_settle(w);
  return 0;
}

/* trap: abort the launch when a lane executes it (a guard may leave none). */
static int op_trap(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (!m) { jump(w, w->cur_pc + 1); return 0; }
  return lpx_emu_fail(w, in, __builtin_ctz(m), "trap executed");
}

/* brkpt: without a debugger a GPU stops the launch as at trap (ptxas
 * compiles both to the same BPT.TRAP instruction). */
static int op_brkpt(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (!m) { jump(w, w->cur_pc + 1); return 0; }
  return lpx_emu_fail(w, in, __builtin_ctz(m), "brkpt executed (a GPU stops the launch here, as at trap, unless a debugger is "
                      "attached; ptxas compiles both to BPT.TRAP)");
}

/* The value a bar.red barrier hands its threads: popc, or .and / .or as 0/1. */
static uint64_t bar_result(const emu_cta *c, uint32_t id)
{
  uint32_t kind = c->bar[id].kind;
  return kind == 1 ? c->bar[id].popc : kind == 2 ? (c->bar[id].all != 0) : (c->bar[id].any != 0);
}

/* Release every lane of the CTA blocked at barrier id. */
static void bar_release(emu_cta *c, uint32_t id)
{
  uint64_t red = bar_result(c, id);
  for (int k = 0; k < c->nwarps; k++) {
    emu_warp *o = &c->warps[k];
    uint32_t b = o->blocked;
    EMU_EACH(b, if (o->bar_of[l] == (int32_t)id) {
      o->blocked &= ~(1u << l);
      if (o->red_dst[l] >= 0) { EMU_R(o, o->red_dst[l])[l] = red; o->wr[o->red_dst[l]] |= 1u << l; o->red_dst[l] = -1; }
      if (++o->pc[l] < o->other_min) o->other_min = o->pc[l];   /* lets a running group merge with them */
    });
  }
  c->bar[id].arrived = c->bar[id].used = c->bar[id].popc = c->bar[id].any = c->bar[id].kind = 0;
  c->bar[id].all = 1;
  c->epoch++;
  if (c->tm) lpx_emu_tmem_sync(c, 0);
  if (c->sched) lpx_emu_sched_shuffle(c->sched);
}

/* Lanes m arrive at barrier id expecting count threads (0: the whole CTA). */
int lpx_emu_bar_arrive(emu_warp *w, const emu_inst *in, uint32_t m, uint32_t id, uint32_t count)
{
  emu_cta *c = w->cta;
  if (id >= 16) return lpx_emu_fail(w, in, __builtin_ctz(m), "barrier id %u; valid ids are 0..15", id);
  uint32_t want = count ? count : c->nthreads;
  if (count && (count % 32 || count > c->nthreads))
    return lpx_emu_fail(w, in, __builtin_ctz(m), "barrier %u thread count %u must be a multiple of 32 and at most the CTA's %u threads",
                        id, count, c->nthreads);
  if (c->bar[id].used && c->bar[id].expected != want)
    return lpx_emu_fail(w, in, __builtin_ctz(m), "barrier %u used with thread count %u while %u threads wait for a count of %u",
                        id, want, c->bar[id].arrived, c->bar[id].expected);
  c->bar[id].used = 1;
  c->bar[id].expected = want;
  c->bar[id].arrived += (uint32_t)__builtin_popcount(m);
  return 0;
}

/* bar.red: fold the lanes' predicate into the barrier's reduction. */
static void bar_red_arrive(emu_warp *w, const emu_inst *in, uint32_t m, uint32_t id)
{
  emu_cta *c = w->cta;
  const emu_op *po = EMU_OP(w, in, in->nops - 1);
  uint32_t pm = lpx_emu_pred_mask(w, po->reg, po->neg, m);
  c->bar[id].kind = in->mod[LPX_GB_BARRED] ? 1 : in->mod[LPX_GB_BOOL] == LPX_BOOL_AND ? 2 : 3;
  c->bar[id].popc += (uint32_t)__builtin_popcount(pm);
  c->bar[id].all &= pm == m;
  c->bar[id].any |= pm != 0;
  int32_t dst = EMU_OP(w, in, 0)->reg;
  EMU_EACH(m, w->red_dst[l] = dst);
}

/* bar.sync / barrier.sync / bar.arrive / bar.red: block (or just count) the lanes. */
static int op_bar(emu_warp *w, const emu_inst *in, uint32_t m)
{
  int32_t pc = w->cur_pc;
  uint32_t cur = w->cur;
  if (!m) { jump(w, pc + 1); return 0; }
  int lane = __builtin_ctz(m), red = in->mod[LPX_GB_BARMODE] == LPX_BARMODE_RED, k0 = red ? 1 : 0;
  int nargs = in->nops - (red ? 2 : 0);
  uint32_t id = nargs > 0 ? (uint32_t)EMU_R(w, EMU_OP(w, in, k0)->reg)[lane] : 0;
  uint32_t count = nargs > 1 ? (uint32_t)EMU_R(w, EMU_OP(w, in, k0 + 1)->reg)[lane] : 0;
  if (lpx_emu_bar_arrive(w, in, m, id, count)) return -1;
  if (red) bar_red_arrive(w, in, m, id);
  int arrive_only = in->mod[LPX_GB_BARMODE] == LPX_BARMODE_ARRIVE;
  w->cur = 0;
  EMU_EACH(cur, w->pc[l] = (m >> l & 1) && !arrive_only ? pc : pc + 1);
  if (!arrive_only) {
    w->blocked |= m;
    EMU_EACH(m, w->bar_of[l] = (int32_t)id);
  }
  emu_cta *c = w->cta;
  if (c->bar[id].arrived >= c->bar[id].expected) bar_release(c, id);
  return 0;
}

/* Live threads of a cluster (exited threads no longer count at its barrier). */
static uint32_t cluster_live(const emu_cta *g0)
{
  uint32_t n = 0;
  for (int i = 0; i < g0->group_size; i++)
    for (int k = 0; k < g0->group[i].nwarps; k++) n += (uint32_t)__builtin_popcount(g0->group[i].warps[k].live);
  return n;
}

/* Complete the cluster barrier's phase once every live thread has arrived:
 * release the waiters in every CTA of the cluster; 1 if it completed. */
static int cluster_settle(emu_cta *g0)
{
  if (!g0->cl_arrived || g0->cl_arrived < cluster_live(g0)) return 0;
  g0->cl_phase++;
  g0->cl_arrived = 0;
  if (g0->tm) lpx_emu_tmem_sync(g0, 1);
  if (g0->sched) lpx_emu_sched_shuffle(g0->sched);
  for (int i = 0; i < g0->group_size; i++) {
    emu_cta *c = &g0->group[i];
    c->epoch++;
    for (int k = 0; k < c->nwarps; k++) {
      emu_warp *o = &c->warps[k];
      uint32_t b = o->blocked;
      EMU_EACH(b, if (o->bar_of[l] == EMU_CLUSTER_BAR) {
        o->blocked &= ~(1u << l);
        o->cl_arr[l] = 0;
        if (++o->pc[l] < o->other_min) o->other_min = o->pc[l];
      });
    }
  }
  return 1;
}

/* barrier.cluster.arrive: count the lanes into the cluster's current phase. */
static int cluster_arrive(emu_warp *w, const emu_inst *in, uint32_t m)
{
  emu_cta *g0 = w->cta->group;
  uint32_t twice = 0;
  EMU_EACH(m, twice |= (uint32_t)(w->cl_arr[l] != 0) << l);
  if (twice) return lpx_emu_fail(w, in, __builtin_ctz(twice), "barrier.cluster.arrive twice without a barrier.cluster.wait between");
  EMU_EACH(m, w->cl_arr[l] = g0->cl_phase + 1);
  g0->cl_arrived += (uint32_t)__builtin_popcount(m);
  jump(w, w->cur_pc + 1);
  cluster_settle(g0);
  return 0;
}

/* barrier.cluster.arrive / .wait: wait blocks until the phase the lane
 * arrived in completes (every live thread of the cluster has arrived). */
static int op_cluster_bar(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (in->mod[LPX_GB_CLBAR] == LPX_CLBAR_ARRIVE) return cluster_arrive(w, in, m);
  emu_cta *g0 = w->cta->group;
  int32_t pc = w->cur_pc;
  uint32_t cur = w->cur, block = 0, never = 0;
  EMU_EACH(m, { never |= (uint32_t)(w->cl_arr[l] == 0) << l; block |= (uint32_t)(w->cl_arr[l] && w->cl_arr[l] - 1 >= g0->cl_phase) << l; });
  if (never) return lpx_emu_fail(w, in, __builtin_ctz(never), "barrier.cluster.wait without a barrier.cluster.arrive before it");
  EMU_EACH(m & ~block, w->cl_arr[l] = 0);
  if (!block) { jump(w, pc + 1); return 0; }
  w->cur = 0;
  EMU_EACH(cur, w->pc[l] = (block >> l & 1) ? pc : pc + 1);
  w->blocked |= block;
  EMU_EACH(block, w->bar_of[l] = EMU_CLUSTER_BAR);
  return 0;
}

/* Instructions with no effect on an emulator that runs in program order. */
static int op_nop(emu_warp *w, const emu_inst *in, uint32_t m) { return 0; }

/* Handlers of the control rows (flagged so the loop leaves PCs to them). */
emu_fn lpx_emu_pick_ctl(const emu_inst *in)
{
  switch (in->op) {
  case LPX_OP_BRA: return op_bra;
  case LPX_OP_RET: case LPX_OP_EXIT: return op_exit;
  case LPX_OP_TRAP: return op_trap;
  case LPX_OP_BRKPT: return op_brkpt;
  case LPX_OP_BARWARP: return op_barwarp;
  case LPX_OP_BAR: case LPX_OP_BARRIER: return op_bar;
  case LPX_OP_BARCLUS: return op_cluster_bar;
  default: return op_nop;
  }
}

/* Is a handler one of the control handlers that manage PCs themselves? */
int lpx_emu_is_control(emu_fn fn)
{
  return fn == op_bra || fn == op_exit || fn == op_bar || fn == op_trap || fn == op_cluster_bar || fn == op_barwarp ||
         fn == op_brkpt;
}

/* ------------------------------------------------------------ warps */

/* Host time in nanoseconds (for %globaltimer). */
static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Refresh the clock special registers before an instruction reads them. */
static void refresh_clock(emu_warp *w)
{
  const emu_prog *p = w->p;
  uint64_t ns = now_ns(), v[6] = { w->steps, w->steps >> 32, ns, ns >> 32, w->steps, ns };
  const int ids[6] = { LPX_SR_CLOCK, LPX_SR_CLOCK_HI, LPX_SR_GLOBALTIMER_LO, LPX_SR_GLOBALTIMER_HI, LPX_SR_CLOCK64, LPX_SR_GLOBALTIMER };
  for (int k = 0; k < 6; k++) {
    if (p->special_slot[ids[k]] < 0) continue;
    uint64_t *r = EMU_R(w, p->special_slot[ids[k]]);
    uint64_t x = k < 4 ? (uint32_t)v[k] : v[k];
    for (int l = 0; l < 32; l++) r[l] = x;
  }
}

/* An asynchronous row (EI_ASYNC): run it as any other row, inside the
 * adversarial schedule's bookkeeping when that is on; *yield says whether
 * the warp's turn ends here: the schedule's say, or by default after an
 * mbarrier wait that failed (spinning on would only repeat it until
 * another warp runs). 0, or -1 on an error. */
static int async_step(emu_warp *w, const emu_inst *in, uint32_t m, int *yield)
{
  emu_sched *s = w->cta->sched;
  if (s && m) lpx_emu_sched_begin(w, in);
  w->wait_failed = 0;
  if (m && in->fn(w, in, m)) return -1;
  if (w->waw && lpx_emu_race_settle(w, in)) return -1;
  for (int k = 0; k < in->ndsts; k++) w->wr[in->dsts[k]] |= m;
  if (in->ndst_vec) mark_vec_written(w, in, m);
  *yield = s ? m && lpx_emu_sched_end(w, in, m) : w->wait_failed;
  if (++w->cur_pc >= w->other_min) flush(w);
  return 0;
}

/* Does a control row end the warp's turn under the adversarial schedule (barriers)? */
static int control_yields(const emu_warp *w, const emu_inst *in)
{
  return w->cta->sched && (in->op == LPX_OP_BAR || in->op == LPX_OP_BARRIER || in->op == LPX_OP_BARCLUS);
}

/* The warp loop: run up to QUANTUM instructions; 0, or -1 on an error. Instantiated
 * twice: prof = 0 (the plain loop, no profiling code) and prof = 1 (every
 * instruction counted by emu_prof.c before and after it runs). */
static inline __attribute__((always_inline)) int warp_run(emu_warp *w, uint64_t *steps, const int prof)
{
  const emu_inst *insts = w->p->insts;
  /* tcgen05.ld's pending registers, and the adversarial schedule's pending wgmma accumulators, are reported through this check. */
  int check_uninit = (w->cta->L->checks & EMU_CHECK_UNINIT_REG) != 0 || w->cta->tm || w->cta->sched;
  uint64_t n = 0, lanes = 0;
  int rc = 0;
  emu_prof_snap snap;
  for (int q = 0; q < QUANTUM; q++) {
    if (!w->cur && !regroup(w)) break;
    const emu_inst *in = &insts[w->cur_pc];
    uint32_t m = w->cur;
    if (in->guard >= 0) m = lpx_emu_pred_mask(w, in->guard, in->guard_neg, m);
    n++;
    lanes += m == EMU_FULL ? 32u : (uint64_t)__builtin_popcount(m);
    if (check_uninit && in->nsrcs && !lpx_emu_srcs_written(w, in, m) && (rc = lpx_emu_check_srcs(w, in, m))) break;
    if (in->flags & EI_READS_CLOCK) refresh_clock(w);
    if (prof) lpx_emu_prof_before(w, in, m, &snap);
    if (in->flags & (EI_CONTROL | EI_ASYNC)) {
      int yield = 0;
      if (in->flags & EI_CONTROL) {
        if ((rc = in->fn(w, in, m)) || (w->waw && (rc = lpx_emu_race_settle(w, in)))) break;
        yield = control_yields(w, in);
      }
      else if ((rc = async_step(w, in, m, &yield))) break;
      if (prof) lpx_emu_prof_after(w, in, m, &snap);
      if (yield) break;
      continue;
    }
    if (m && (rc = in->fn(w, in, m))) break;
    if (w->waw && (rc = lpx_emu_race_settle(w, in))) break;
    if (prof) lpx_emu_prof_after(w, in, m, &snap);
    if (m && (in->flags & EI_WG_WRITE)) w->wg_write = in;
    for (int k = 0; k < in->ndsts; k++) w->wr[in->dsts[k]] |= m;
    if (in->ndst_vec) mark_vec_written(w, in, m);
    if (++w->cur_pc >= w->other_min) flush(w);
  }
  if (prof) w->prow = NULL;
  w->steps += n;
  w->lane_steps += lanes;
  *steps += n;
  return rc;
}

/* The plain warp loop. */
static int warp_run_plain(emu_warp *w, uint64_t *steps) { return warp_run(w, steps, 0); }

/* The profiled warp loop. */
static int warp_run_prof(emu_warp *w, uint64_t *steps) { return warp_run(w, steps, 1); }

/* Run a warp for up to one quantum, with the loop its launch chose. */
int lpx_emu_warp_run(emu_warp *w, uint64_t *steps)
{
  return w->cta->L->prof ? warp_run_prof(w, steps) : warp_run_plain(w, steps);
}

/* ------------------------------------------------------------- CTAs */

/* Fill the special-register slots of a warp. */
static void fill_specials(emu_warp *w, const emu_cta *c)
{
  const emu_prog *p = w->p;
  const lpx_launch_cfg *g = &c->L->cfg;
  for (int s = 0; s < LPX_SR__COUNT; s++) {
    if (p->special_slot[s] < 0) continue;
    uint64_t *r = EMU_R(w, p->special_slot[s]);
    for (int l = 0; l < 32; l++) {
      uint32_t t = w->id * 32 + (uint32_t)l, v = 0;
      uint32_t tid[3] = { t % g->block[0], t / g->block[0] % g->block[1], t / (g->block[0] * g->block[1]) };
      int d = (s - LPX_SR_TID_X) % 3;
      switch (s) {
      case LPX_SR_TID_X: case LPX_SR_TID_Y: case LPX_SR_TID_Z: v = tid[s - LPX_SR_TID_X]; break;
      case LPX_SR_NTID_X: case LPX_SR_NTID_Y: case LPX_SR_NTID_Z: v = g->block[s - LPX_SR_NTID_X]; break;
      case LPX_SR_CTAID_X: case LPX_SR_CTAID_Y: case LPX_SR_CTAID_Z: v = c->ctaid[s - LPX_SR_CTAID_X]; break;
      case LPX_SR_NCTAID_X: case LPX_SR_NCTAID_Y: case LPX_SR_NCTAID_Z: v = g->grid[s - LPX_SR_NCTAID_X]; break;
      case LPX_SR_LANEID: v = (uint32_t)l; break;
      case LPX_SR_WARPID: v = w->id; break;
      case LPX_SR_NWARPID: v = (uint32_t)c->nwarps; break;
      case LPX_SR_SMID: v = (uint32_t)c->worker; break;
      case LPX_SR_NSMID: v = (uint32_t)c->L->nworkers; break;
      case LPX_SR_GRIDID: v = 1; break;
      case LPX_SR_LANEMASK_EQ: v = 1u << l; break;
      case LPX_SR_LANEMASK_LE: v = (uint32_t)((2ull << l) - 1); break;
      case LPX_SR_LANEMASK_LT: v = (1u << l) - 1; break;
      case LPX_SR_LANEMASK_GE: v = ~((1u << l) - 1); break;
      case LPX_SR_LANEMASK_GT: v = (uint32_t)~((2ull << l) - 1); break;
      case LPX_SR_DYN_SMEM: v = g->dynamic_smem; break;
      case LPX_SR_TOTAL_SMEM: case LPX_SR_AGGR_SMEM: v = c->shared_size; break;
      case LPX_SR_CLUSTERID_X: case LPX_SR_CLUSTERID_Y: case LPX_SR_CLUSTERID_Z:
        d = s - LPX_SR_CLUSTERID_X; v = c->ctaid[d] / g->cluster[d]; break;
      case LPX_SR_NCLUSTERID_X: case LPX_SR_NCLUSTERID_Y: case LPX_SR_NCLUSTERID_Z:
        d = s - LPX_SR_NCLUSTERID_X; v = g->grid[d] / g->cluster[d]; break;
      case LPX_SR_CLUSTER_CTAID_X: case LPX_SR_CLUSTER_CTAID_Y: case LPX_SR_CLUSTER_CTAID_Z:
        d = s - LPX_SR_CLUSTER_CTAID_X; v = c->ctaid[d] % g->cluster[d]; break;
      case LPX_SR_CLUSTER_NCTAID_X: case LPX_SR_CLUSTER_NCTAID_Y: case LPX_SR_CLUSTER_NCTAID_Z:
        v = g->cluster[s - LPX_SR_CLUSTER_NCTAID_X]; break;
      case LPX_SR_CLUSTER_CTARANK:
        v = c->ctaid[0] % g->cluster[0] + g->cluster[0] * (c->ctaid[1] % g->cluster[1] + g->cluster[1] * (c->ctaid[2] % g->cluster[2]));
        break;
      case LPX_SR_CLUSTER_NCTARANK: v = g->cluster[0] * g->cluster[1] * g->cluster[2]; break;
      case LPX_SR_IS_EXPLICIT_CLUSTER: v = g->cluster[0] * g->cluster[1] * g->cluster[2] > 1; break;
      default: v = 0; break;
      }
      r[l] = v;
    }
  }
}

/* Clear a warp's registers, written masks and memory; fill constants and specials. */
void lpx_emu_warp_regs(emu_warp *w, emu_cta *c)
{
  const emu_prog *p = w->p;
  memset(w->r, 0, (size_t)p->nslots * 32 * sizeof(uint64_t));
  memset(w->wr, 0, (size_t)p->nregs * sizeof(uint32_t));
  for (int32_t s = p->nregs; s < p->nslots; s++) w->wr[s] = EMU_FULL;
  for (int32_t i = 0; i < p->ncvals; i++) {
    uint64_t *r = EMU_R(w, p->cfirst + i);
    for (int l = 0; l < 32; l++) r[l] = p->cvals[i];
  }
  if (w->local) memset(w->local, 0, (size_t)p->local_size * 32);
  if (w->frame) memset(w->frame, 0, (size_t)p->frame_size * 32);
  memset(w->sdepth, 0, sizeof w->sdepth);
  fill_specials(w, c);
}

/* Reset a warp for a new CTA: registers, written masks, lanes, PCs. */
static void warp_reset(emu_warp *w, emu_cta *c, uint32_t id)
{
  const emu_prog *p = w->p;
  w->cta = c; w->id = id;
  uint32_t first = id * 32, n = c->nthreads - first;
  w->exists = n >= 32 ? EMU_FULL : (1u << n) - 1;
  w->live = w->exists; w->blocked = 0; w->cur = 0; w->cur_pc = 0; w->other_min = INT32_MAX; w->waw = 0;
  w->mbar_wait_gen = 0; w->mbar_wait_fails = 0; w->wait_failed = 0;
  w->wg_commits = 0; w->wg_need = 0;
  memset(w->pc, 0, sizeof w->pc);
  for (int l = 0; l < 32; l++) w->red_dst[l] = -1;
  memset(w->cl_arr, 0, sizeof w->cl_arr);
  w->steps = 0;
  w->depth = 0;
  (void)p;
  lpx_emu_warp_regs(w, c);
}

/* Describe a deadlock at bar.warp.sync: a lane of w waits for lanes that wait elsewhere. */
static int warp_sync_deadlock(const emu_warp *w, int lane, const char *where)
{
  uint32_t at = 0, b = w->blocked;
  EMU_EACH(b, if (w->bar_of[l] == EMU_WARP_BAR) at |= 1u << l);
  const emu_cta *c = w->cta;
  return lpx_emu_fail_raw(c->L, "%s: deadlock: bar.warp.sync (member mask 0x%08x) waits for lane(s) 0x%08x of warp %u, which are "
                          "blocked elsewhere (at a CTA barrier) and never reach a bar.warp.sync [CTA (%u,%u,%u)]", where, w->wsync[lane],
                          w->wsync[lane] & w->live & ~at, w->id, c->ctaid[0], c->ctaid[1], c->ctaid[2]);
}

/* Describe a deadlock: which barrier waits, for how many threads, and where. */
static int deadlock(emu_cta *g, int n)
{
  char where[512] = "", more[256] = "";
  uint32_t exited = 0, waiting = 0;
  int id = -1;
  emu_cta *c = &g[0];
  const emu_warp *bw = NULL;
  int bl = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g[i].nwarps; k++) {
      emu_warp *w = &g[i].warps[k];
      exited += (uint32_t)__builtin_popcount(w->exists & ~w->live);
      waiting += (uint32_t)__builtin_popcount(w->blocked & w->live);
      if (id < 0 && (w->blocked & w->live)) {
        bl = __builtin_ctz(w->blocked & w->live);
        id = w->bar_of[bl];
        c = &g[i];
        bw = w;
        lpx_emu_where(w->p, &w->p->insts[w->pc[bl]], where, sizeof where);
      }
    }
  if (id < 0) return lpx_emu_fail_raw(c->L, "emu: CTA (%u,%u,%u) stopped with no runnable threads", c->ctaid[0], c->ctaid[1], c->ctaid[2]);
  if (id == EMU_WARP_BAR) return warp_sync_deadlock(bw, bl, where);
  if (id == EMU_WGMMA_WAIT)
    return lpx_emu_fail_raw(c->L, "%s: deadlock: wgmma.wait_group of warp %u waits for the other warps of its warpgroup to "
                            "commit the wgmma groups it waits for (%u; .aligned: all four warps issue the same wgmmas), but "
                            "they are blocked elsewhere or exited [CTA (%u,%u,%u)]", where, bw->id, bw->wg_need,
                            c->ctaid[0], c->ctaid[1], c->ctaid[2]);
  if (exited) snprintf(more, sizeof more, "; %u threads exited without arriving", exited);
  if (id == EMU_CLUSTER_BAR)
    return lpx_emu_fail_raw(c->L, "%s: deadlock: barrier.cluster.wait waits for the %d CTAs of the cluster but only %u of their "
                            "threads arrived%s [CTA (%u,%u,%u)]", where, n, g[0].cl_arrived, more, c->ctaid[0], c->ctaid[1], c->ctaid[2]);
  return lpx_emu_fail_raw(c->L, "%s: deadlock: barrier %d waits for %u threads but only %u arrived%s; "
                          "%u threads of the CTA are blocked at barriers and none can proceed [CTA (%u,%u,%u)]",
                          where, id, c->bar[id].expected, c->bar[id].arrived, more, waiting,
                          c->ctaid[0], c->ctaid[1], c->ctaid[2]);
}

/* Charge steps to the launch's budget; -1 (with a message) when it is spent. */
int lpx_emu_charge(emu_cta *c, emu_warp *w, uint64_t steps)
{
  emu_launch *L = c->L;
  uint64_t used = __atomic_add_fetch(&L->used, steps, __ATOMIC_RELAXED);
  if (used <= L->budget) return 0;
  char where[512];
  const emu_inst *in = &w->p->insts[w->cur ? w->cur_pc : w->pc[__builtin_ctz(w->live ? w->live : 1)]];
  lpx_emu_where(w->p, in, where, sizeof where);
  return lpx_emu_fail_raw(L, "%s: instruction budget exhausted: the launch ran %" PRIu64 " warp-instructions "
                          "(budget %" PRIu64 "); an endless loop? warp %u of CTA (%u,%u,%u) was here. "
                          "Raise it with the device option \"budget\"", where, used, L->budget, w->id,
                          c->ctaid[0], c->ctaid[1], c->ctaid[2]);
}

/* Is any thread of the cluster still running? */
static int group_live(const emu_cta *g, int n)
{
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g[i].nwarps; k++) if (g[i].warps[k].live) return 1;
  return 0;
}

/* Run a cluster under the adversarial schedule: one turn at a time, the
 * warp the schedule picks, until every thread exited. */
static int group_run_sched(emu_cta *g, int n)
{
  emu_sched *s = g->sched;
  uint64_t pending = 0;
  for (;;) {
    emu_warp *w = lpx_emu_sched_next(s);
    if (!w) {
      if (!group_live(g, n)) break;
      if (!cluster_settle(g)) return deadlock(g, n);   /* threads that exited can complete the cluster barrier */
      continue;
    }
    if (lpx_emu_warp_run(w, &pending)) return -1;
    lpx_emu_sched_turn_end(s, w);
    if (pending >= BUDGET_CHUNK) { if (lpx_emu_charge(w->cta, w, pending)) return -1; pending = 0; }
    if (lpx_emu_stop_for_error(g->L)) return -1;
  }
  return pending ? lpx_emu_charge(&g[0], &g[0].warps[0], pending) : 0;
}

/* Run the CTAs of one cluster (or one CTA) together to completion. */
static int group_run(emu_cta *g, int n)
{
  if (g->sched) return group_run_sched(g, n);
  uint64_t pending = 0;
  for (;;) {
    int progress = 0, live = 0;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < g[i].nwarps; k++) {
        emu_warp *w = &g[i].warps[k];
        live |= w->live != 0;
        if (!(w->live & ~w->blocked)) continue;
        uint64_t before = pending;
        if (lpx_emu_warp_run(w, &pending)) return -1;
        progress |= pending != before;
        if (pending >= BUDGET_CHUNK) { if (lpx_emu_charge(&g[i], w, pending)) return -1; pending = 0; }
        if (lpx_emu_stop_for_error(g[i].L)) return -1;
      }
    if (!live) break;
    /* Threads that exited can complete the cluster barrier's phase. */
    if (!progress && !cluster_settle(g)) return deadlock(g, n);
  }
  if (g[0].tm && lpx_emu_tmem_exit(g, n)) return -1;
  return pending ? lpx_emu_charge(&g[0], &g[0].warps[0], pending) : 0;
}

/* ------------------------------------------------------------- workers */

typedef emu_worker worker;

/* Set up a worker's cluster of CTAs, laid out by the pool: tensor memory
 * and the adversarial schedule, made per launch. */
static int worker_init(worker *wk)
{
  int n = wk->L->cluster_size;
  for (int i = 0; i < n; i++)
    if (lpx_emu_tmem_init(&wk->ctas[i])) return -1;
  if (wk->L->schedule < 0) return 0;
  emu_sched *s = lpx_emu_sched_new(wk->ctas, n, wk->L->schedule);
  for (int i = 0; i < n; i++) wk->ctas[i].sched = s;
  return s ? 0 : -1;
}

/* Zero shared bytes [lo, hi) of a CTA and their race and proxy shadows. */
static void shared_zero(emu_cta *c, uint64_t lo, uint64_t hi)
{
  memset(c->shared + lo, 0, hi - lo);
  if (c->race_w) { memset(c->race_w + lo, 0, (hi - lo) * sizeof(uint32_t)); memset(c->race_r + lo, 0, (hi - lo) * sizeof(uint32_t)); }
  if (c->pdirty) memset(c->pdirty + lo, 0, hi - lo);
}

/* Zero what the last run touched of a CTA's shared memory and shadows:
 * the pages lpx_emu_shared_touch marked, runs of them at a time (every
 * page under the adversarial schedule, which writes shadows itself). */
static void shared_clear(emu_cta *c)
{
  uint64_t pages = c->sched ? ~0ull : c->dirty;
  c->dirty = 0;
  while (pages) {
    uint32_t p = (uint32_t)__builtin_ctzll(pages);
    uint64_t rest = ~(pages >> p);                 /* zero bits from p on: where the run of pages ends */
    uint32_t q = rest ? p + (uint32_t)__builtin_ctzll(rest) : 64;
    uint64_t lo = (uint64_t)p << c->page_shift, hi = (uint64_t)q << c->page_shift;
    if (hi > c->shared_size) hi = c->shared_size;
    if (lo < hi) shared_zero(c, lo, hi);
    pages = q < 64 ? pages & (~0ull << q) : 0;
  }
}

/* Hand a worker's CTAs back to the pool as it lent them: shared memory and
 * shadows zero again (the pages the launch touched, and the 16 bytes and
 * the entry past the end), what the launch made for itself freed. */
static void worker_release(worker *wk)
{
  for (int i = 0; i < wk->L->cluster_size; i++) {
    emu_cta *c = &wk->ctas[i];
    shared_clear(c);
    memset(c->shared + c->shared_size, 0, 16);
    if (c->race_w) { c->race_w[c->shared_size] = c->race_r[c->shared_size] = 0; c->pdirty[c->shared_size] = 0; }
    for (int k = 0; k < c->nwarps; k++) free(c->warps[k].stack);
    free(c->waw);
    lpx_emu_wgb_free(c);
    lpx_emu_tmem_free(c);
  }
  lpx_emu_sched_free(wk->ctas[0].sched);
}

/* Set up a CTA for a new run at grid position ctaid. */
static void cta_reset(emu_cta *c, const uint32_t ctaid[3])
{
  memcpy(c->ctaid, ctaid, sizeof c->ctaid);
  shared_clear(c);
  memset(c->bar, 0, sizeof c->bar);
  for (int i = 0; i < 16; i++) c->bar[i].all = 1;
  c->epoch = 1;
  c->cl_arrived = c->cl_phase = 0;
  c->ntma_rgn = 0;
  c->nwaw = 0;
  lpx_emu_wgb_reset(c);
  if (c->tm) lpx_emu_tmem_reset(c);
  for (int k = 0; k < c->nwarps; k++) warp_reset(&c->warps[k], c, (uint32_t)k);
}

/* Set up cluster number u of the grid: CTA rank r sits at cluster * dims + r's offset. */
static void cluster_reset(worker *wk, uint64_t u)
{
  const uint32_t *g = wk->L->cfg.grid, *cd = wk->L->cfg.cluster;
  uint64_t gx = g[0] / cd[0], gy = g[1] / cd[1];
  uint32_t base[3] = { (uint32_t)(u % gx) * cd[0], (uint32_t)(u / gx % gy) * cd[1], (uint32_t)(u / (gx * gy)) * cd[2] };
  for (int r = 0; r < wk->L->cluster_size; r++) {
    uint32_t id[3] = { base[0] + (uint32_t)r % cd[0], base[1] + (uint32_t)r / cd[0] % cd[1], base[2] + (uint32_t)r / (cd[0] * cd[1]) };
    cta_reset(&wk->ctas[r], id);
  }
  if (wk->ctas[0].sched) lpx_emu_sched_reset(wk->ctas[0].sched, u);
}

/* A host thread: take clusters (or single CTAs) until none are left or the launch failed. */
static void *worker_main(void *arg)
{
  worker *wk = arg;
  emu_launch *L = wk->L;
  uint64_t units = L->nctas / (uint64_t)L->cluster_size;
  lpx_emu_report_cta(0);
  if (worker_init(wk)) { lpx_emu_fail_raw(L, "emu: out of host memory for a CTA"); return NULL; }
  for (;;) {
    uint64_t u = __atomic_fetch_add(&L->next_cta, 1, __ATOMIC_RELAXED);
    if (u >= units || __atomic_load_n(&L->failed, __ATOMIC_ACQUIRE)) break;
    lpx_emu_report_cta(u);
    cluster_reset(wk, u);
    if (group_run(wk->ctas, L->cluster_size)) break;
    for (int i = 0; i < L->cluster_size; i++)
      for (int k = 0; k < wk->ctas[i].nwarps; k++) {
        wk->warp_insts += wk->ctas[i].warps[k].steps;
        wk->lane_insts += wk->ctas[i].warps[k].lane_steps;
        wk->ctas[i].warps[k].lane_steps = 0;
      }
  }
  return NULL;
}

/* ------------------------------------------------------------- launch */

/* Check the launch against the kernel: parameters and shared memory. */
static int check_launch(emu_dev *e, const emu_prog *p, const lpx_launch_cfg *cfg)
{
  lpx_ctx *ctx = e->d->ctx;
  if (cfg->params_size < p->param_size || (p->param_size && !cfg->params))
    return lpx_fail(ctx, "launch %s: the kernel's %zu parameter(s) take %u bytes, but %" PRIu64 " bytes were passed",
                    p->name, p->f->nparams, p->param_size, cfg->params_size);
  uint64_t smem = cfg->dynamic_smem ? (uint64_t)p->extern_off + cfg->dynamic_smem : p->shared_static;
  if (smem > LPX_SHARED_MAX)
    return lpx_fail(ctx, "launch %s: %" PRIu64 " bytes of shared memory per CTA; the limit is 227 KB", p->name, smem);
  if (p->local_size > LPX_LOCAL_MAX)
    return lpx_fail(ctx, "launch %s: its .local variables take %" PRIu64 " bytes per thread; the hardware allows %" PRIu64
                    " (512 KB)", p->name, (uint64_t)p->local_size, LPX_LOCAL_MAX);
  return 0;
}

/* Check that the host memory a launch's CTA state takes on its workers
 * (each runs a cluster of CTAs at a time) fits the memory budget. */
static int check_launch_memory(emu_dev *e, const emu_launch *L)
{
  uint64_t per_cta = lpx_emu_pool_cta_bytes(L->p, &L->cfg, L->checks), ctas = (uint64_t)L->nworkers * (uint64_t)L->cluster_size;
  uint64_t bytes = per_cta > UINT64_MAX / ctas ? UINT64_MAX : per_cta * ctas;
  if (lpx_emu_mem_fits(e, bytes)) return 0;    /* the message formatted only when it does not fit */
  char what[256];
  snprintf(what, sizeof what, "launch %s (%" PRIu64 " CTA%s at a time on %d host thread%s, %" PRIu64 " bytes each with %u "
           "bytes of .local per thread)", L->p->name, ctas, ctas == 1 ? "" : "s", L->nworkers, L->nworkers == 1 ? "" : "s",
           per_cta, (unsigned)L->p->local_size);
  return lpx_emu_mem_refuse(e, bytes, what);
}

/* Number of host threads for a launch of nctas CTAs. The CPUs this
 * process may use are read once per device: reading the affinity mask and
 * the cgroup files took about 30 us, more than a small launch itself. */
static int thread_count(emu_dev *e, uint64_t nctas)
{
  if (nctas <= 1) return 1;
  if (e->threads <= 0 && !e->cpus) e->cpus = lpx_cpu_count();
  long n = e->threads > 0 ? (long)e->threads : (long)e->cpus;
  if (n < 1) n = 1;
  if (n > 256) n = 256;
  if ((uint64_t)n > nctas) n = (long)nctas;
  return (int)n;
}

/* Run a launch to completion on the host's threads. */
int lpx_emu_run(emu_dev *e, const emu_prog *p, const lpx_launch_cfg *cfg)
{
  if (check_launch(e, p, cfg)) return -1;
  emu_launch L;
  memset(&L, 0, sizeof L);
  L.dev = e; L.p = p; L.cfg = *cfg; L.params = cfg->params;
  L.nctas = (uint64_t)cfg->grid[0] * cfg->grid[1] * cfg->grid[2];
  L.budget = (uint64_t)e->budget;
  L.checks = e->checks;
  L.schedule = e->schedule;
  L.cluster_size = (int)(cfg->cluster[0] * cfg->cluster[1] * cfg->cluster[2]);
  if (L.cluster_size < 1) L.cluster_size = 1;
  L.nworkers = thread_count(e, L.nctas / (uint64_t)L.cluster_size);
  L.prof = e->profile != 0;
  if (L.prof && lpx_emu_prof_prepare(e)) return -1;
  if (L.prof) L.nworkers = 1;        /* counters without atomics: the profile is exact and deterministic */
  if (check_launch_memory(e, &L)) return -1;
  worker *wk = lpx_emu_pool_take(e, &L);
  if (!wk) return lpx_fail(e->d->ctx, "emu: out of host memory for launch %s's CTAs", p->name);
  pthread_mutex_init(&L.lock, NULL);
  int started = 1;
  for (int i = 1; i < L.nworkers; i++, started++)
    if (pthread_create(&wk[i].thread, NULL, worker_main, &wk[i])) break;
  worker_main(&wk[0]);
  for (int i = 1; i < started; i++) pthread_join(wk[i].thread, NULL);
  for (int i = 0; i < L.nworkers; i++) {
    e->warp_insts += wk[i].warp_insts;
    e->lane_insts += wk[i].lane_insts;
    worker_release(&wk[i]);
  }
  pthread_mutex_destroy(&L.lock);
  if (L.failed) return lpx_fail(e->d->ctx, "%s", L.msg);
  return 0;
}
