/* Blackwell tensor memory on the emulator: each CTA of a kernel that uses
 * tcgen05 gets 128 lanes x 512 columns of 32-bit cells. tcgen05.alloc /
 * dealloc / relinquish_alloc_permit manage its columns (a power of 2 from
 * 32 to 512, first fit at a multiple of the size, the address written to
 * shared memory; fresh columns hold 0xffffffff, a NaN, so accumulating onto
 * a D never cleared shows); tcgen05.ld / st move registers in the ISA's
 * fragment layouts (32x32b, 16x64b, 16x128b, 16x256b, 16x32bx2, .xN,
 * .pack::16b / .unpack::16b), each warp within its quarter of the lanes.
 * The checks a GPU does not make: a register a tcgen05.ld fills is
 * unreadable until tcgen05.wait::ld; every access names allocated columns;
 * dealloc names an allocation and waits for no write in flight; the
 * writes of tcgen05.mma / cp / shift are readable only by a warp that
 * observed their commit's mbarrier phase (or synchronized with one that
 * did); a CTA exits with nothing allocated. */
#include "emu_tc.h"
#include <stdio.h>
#include <stdlib.h>

#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)


/* The rows this file and emu_tcgen05.c run. */
static const uint8_t tc_rows[LPX_OP__COUNT] = {
  [LPX_OP_TCALLOC] = 1, [LPX_OP_TCDEALLOC] = 1, [LPX_OP_TCRELINQ] = 1, [LPX_OP_TCMMA] = 1, [LPX_OP_TCLD] = 1,
  [LPX_OP_TCST] = 1, [LPX_OP_TCCOMMIT] = 1, [LPX_OP_TCCP] = 1, [LPX_OP_TCSHIFT] = 1, [LPX_OP_TCFENCEB] = 1,
  [LPX_OP_TCFENCEA] = 1, [LPX_OP_TCWAITLD] = 1, [LPX_OP_TCWAITST] = 1,
};

/* Is an ISA row a tcgen05 row? */
static int is_tc(int op) { return op >= 0 && op < LPX_OP__COUNT && tc_rows[op]; }

/* ------------------------------------------------------------ state */

/* Does any function of p's module use tcgen05? */
static int uses_tmem(const emu_prog *p)
{
  for (size_t i = 0; i < p->ninsts; i++) if (is_tc(p->insts[i].op)) return 1;
  for (size_t f = 0; p->funcs && f < p->m->nfuncs; f++)
    if (p->funcs[f] && p->funcs[f] != p)
      for (size_t i = 0; i < p->funcs[f]->ninsts; i++) if (is_tc(p->funcs[f]->insts[i].op)) return 1;
  return 0;
}

/* Give a CTA tensor memory when its kernel uses tcgen05; -1 out of memory. */
int lpx_emu_tmem_init(emu_cta *c)
{
  if (!uses_tmem(c->L->p)) return 0;
  emu_tmem *tm = c->tm = calloc(1, sizeof *tm);
  if (!tm) return -1;
  tm->nwarps = c->nwarps;
  tm->pend = calloc((size_t)c->nwarps, sizeof *tm->pend);
  tm->npend = calloc((size_t)c->nwarps, sizeof *tm->npend);
  tm->pend_cap = calloc((size_t)c->nwarps, sizeof *tm->pend_cap);
  tm->afence = calloc((size_t)c->nwarps, sizeof *tm->afence);
  tm->bfence = calloc((size_t)c->nwarps, sizeof *tm->bfence);
  tm->waited = calloc((size_t)c->nwarps, sizeof *tm->waited);
  tm->wait_inst = calloc((size_t)c->nwarps, sizeof *tm->wait_inst);
  tm->hb = calloc((size_t)c->nwarps * (size_t)c->nwarps, sizeof *tm->hb);
  tm->hbp = calloc((size_t)c->nwarps * (size_t)c->nwarps, sizeof *tm->hbp);
  tm->hs = calloc((size_t)c->nwarps * (size_t)c->nwarps, sizeof *tm->hs);
  return tm->pend && tm->npend && tm->pend_cap && tm->afence && tm->bfence && tm->waited && tm->wait_inst && tm->hb &&
         tm->hbp && tm->hs ? 0 : -1;
}

/* Free a CTA's tensor memory. */
void lpx_emu_tmem_free(emu_cta *c)
{
  emu_tmem *tm = c->tm;
  if (!tm) return;
  for (int k = 0; tm->pend && k < tm->nwarps; k++) free(tm->pend[k]);
  free(tm->pend); free(tm->npend); free(tm->pend_cap); free(tm->groups); free(tm->commits);
  free(tm->afence); free(tm->bfence); free(tm->waited); free(tm->wait_inst);
  free(tm->hb); free(tm->hbp); free(tm->hs); free(tm->pub_off); free(tm->pub);
  free(tm);
  c->tm = NULL;
}

/* Start a CTA's run: every cell poisoned, nothing allocated, pending,
 * in flight or fenced, the clock at 0. */
void lpx_emu_tmem_reset(emu_cta *c)
{
  emu_tmem *tm = c->tm;
  memset(tm->cell, 0xff, sizeof tm->cell);
  memset(tm->tag, 0, sizeof tm->tag);
  memset(tm->rd, 0, sizeof tm->rd);
  memset(tm->wr, 0, sizeof tm->wr);
  memset(tm->afence, 0, (size_t)tm->nwarps * sizeof *tm->afence);
  memset(tm->bfence, 0, (size_t)tm->nwarps * sizeof *tm->bfence);
  memset(tm->waited, 0, (size_t)tm->nwarps * sizeof *tm->waited);
  memset(tm->hb, 0, (size_t)tm->nwarps * (size_t)tm->nwarps * sizeof *tm->hb);
  memset(tm->hbp, 0, (size_t)tm->nwarps * (size_t)tm->nwarps * sizeof *tm->hbp);
  memset(tm->hs, 0, (size_t)tm->nwarps * (size_t)tm->nwarps * sizeof *tm->hs);
  tm->npubs = 0;
  tm->tick = 0;
  tm->nallocs = 0; tm->relinquished = 0; tm->ngroups = 0; tm->settled = 0; tm->ncommits = 0; tm->csettled = 0;
  memset(tm->npend, 0, (size_t)tm->nwarps * sizeof *tm->npend);
}

/* ------------------------------------------------------------ operands */

/* The value of operand k for a lane: a register or an immediate (a
 * predicate's negation applied), or an address operand's base + offset. */
uint64_t lpx_emu_tm_arg(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *o = EMU_OP(w, in, k);
  if (o->kind == EO_ADDR) return (o->reg >= 0 ? EMU_R(w, o->reg)[lane] : 0) + (uint64_t)o->off;
  uint64_t v = EMU_R(w, o->reg)[lane];
  return o->neg ? !(v & 1) : v;
}

/* Fail unless operand k has one value across the lanes of m (.sync.aligned). */
int lpx_emu_tm_uniform(emu_warp *w, const emu_inst *in, uint32_t m, int k, const char *what)
{
  int l0 = __builtin_ctz(m);
  uint64_t v = lpx_emu_tm_arg(w, in, k, l0);
  EMU_EACH(m, if (lpx_emu_tm_arg(w, in, k, l) != v)
    return lpx_emu_fail(w, in, l, "%s differs between the threads of the warp (0x%llx here, 0x%llx in lane %d); this "
                        ".sync.aligned instruction takes one value for the whole warp", what,
                        (unsigned long long)lpx_emu_tm_arg(w, in, k, l), (unsigned long long)v, l0));
  return 0;
}

/* Fail unless every thread of the warp executes the instruction, converged, none exited. */
static int whole_warp(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (m && m == w->exists && w->live == w->exists) return 0;
  return lpx_emu_fail(w, in, -1, "this .sync.aligned instruction needs every thread of the warp, converged and none "
                      "exited; %d of the warp's %d threads execute it here", __builtin_popcount(m), __builtin_popcount(w->exists));
}

/* Host pointer of the shared-memory word (n bytes) operand k names for a
 * lane: .shared::cta / .shared::cluster, or a generic address. */
static uint8_t *shared_word(emu_warp *w, const emu_inst *in, int k, int lane, uint32_t n, int write)
{
  const emu_op *ao = EMU_OP(w, in, k);
  int sp = lpx_emu_space(in);
  if (ao->reg < 0 && ao->space != EMU_SP_GENERIC) sp = ao->space;
  else if (sp == EMU_SP_GENERIC && in->mod[LPX_GB_SHARED]) sp = EMU_SP_SHARED;
  return lpx_emu_addr(w, in, lane, sp, lpx_emu_tm_arg(w, in, k, lane), n, write);
}

/* The CTA of the lane's CTA pair with the given parity (0 even, 1 odd):
 * cta_group::2 operations touch both; NULL (error set) outside a pair. */
emu_cta *lpx_emu_tm_peer(emu_warp *w, const emu_inst *in, int lane, int which)
{
  emu_cta *c = w->cta;
  int r = (c->rank & ~1) + which;
  if (r < c->group_size) return &c->group[r];
  lpx_emu_fail(w, in, lane, ".cta_group::2 works on a CTA pair (cluster ranks 2k and 2k+1), but this CTA is rank %d of a "
               "cluster of %d; launch with a cluster of an even size", c->rank, c->group_size);
  return NULL;
}

/* ------------------------------------------------------------ allocation */

/* "columns a..b (tcgen05.alloc at file:line); ..." for the CTA's allocations. */
static void describe_allocs(emu_warp *w, const emu_tmem *tm, char *out, size_t cap)
{
  size_t n = (size_t)snprintf(out, cap, "%s", tm->nallocs ? "" : "nothing is allocated");
  for (int i = 0; i < tm->nallocs && n < cap; i++) {
    char where[512];
    lpx_emu_where(w->p, &w->p->insts[tm->allocs[i].inst], where, sizeof where);
    n += (size_t)snprintf(out + n, cap - n, "%scolumns %u..%u by %s", i ? "; " : "", tm->allocs[i].col,
                          tm->allocs[i].col + tm->allocs[i].ncols - 1, where);
  }
}

/* The allocation covering column col, or NULL. */
static tm_alloc *alloc_at(emu_tmem *tm, uint32_t col)
{
  for (int i = 0; i < tm->nallocs; i++)
    if (col >= tm->allocs[i].col && col < (uint32_t)tm->allocs[i].col + tm->allocs[i].ncols) return &tm->allocs[i];
  return NULL;
}

static int ordered(emu_warp *w, emu_cta *c, int a, uint32_t t);
static const char *unordered_text(int why);

/* Fail unless allocation a (of CTA c), made by another warp, is ordered
 * before warp w's access: its warp's tcgen05.fence::before_thread_sync
 * after the tcgen05.alloc and w's tcgen05.fence::after_thread_sync since. */
static int alloc_ordered(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, const tm_alloc *a, const char *what)
{
  char where[512];
  if (c == w->cta && a->warp == w->id) return 0;
  int why = ordered(w, c, a->warp, a->tick);
  if (!why) return 0;
  lpx_emu_where(w->p, &w->p->insts[a->inst], where, sizeof where);
  return lpx_emu_fail(w, in, lane, "%s columns that %s (warp %u) allocated, and %s", what, where, a->warp, unordered_text(why));
}

/* Fail unless columns [col, col + n) of CTA c are allocated ("what" says who accesses them). */
int lpx_emu_tm_cols(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t col, uint32_t n, const char *what)
{
  char have[1024];
  if (col + n > TM_COLS)
    return lpx_emu_fail(w, in, lane, "%s columns %u..%u, beyond the 512 columns of tensor memory", what, col, col + n - 1);
  for (uint32_t x = col; x < col + n;) {
    const tm_alloc *a = alloc_at(c->tm, x);
    if (a && alloc_ordered(w, in, lane, c, a, what)) return -1;
    if (a) { x = (uint32_t)a->col + a->ncols; continue; }
    describe_allocs(w, c->tm, have, sizeof have);
    return lpx_emu_fail(w, in, lane, "%s columns %u..%u of tensor memory, but column %u is not allocated in CTA (%u,%u,%u) "
                        "(%s); tcgen05.alloc the columns first", what, col, col + n - 1, x, c->ctaid[0], c->ctaid[1],
                        c->ctaid[2], have);
  }
  return 0;
}

/* The first free run of n columns at a multiple of n, or -1. */
static int find_free(emu_tmem *tm, uint32_t n)
{
  for (uint32_t col = 0; col + n <= TM_COLS; col += n) {
    int clash = 0;
    for (int i = 0; i < tm->nallocs; i++)
      clash |= col < (uint32_t)tm->allocs[i].col + tm->allocs[i].ncols && tm->allocs[i].col < col + n;
    if (!clash) return (int)col;
  }
  return -1;
}

/* The column count operand k of alloc/dealloc for the warp: a power of 2 in 32..512. */
static int ncols_of(emu_warp *w, const emu_inst *in, uint32_t m, uint32_t *n)
{
  if (lpx_emu_tm_uniform(w, in, m, 1, "nCols")) return -1;
  *n = (uint32_t)lpx_emu_tm_arg(w, in, 1, __builtin_ctz(m));
  if (*n >= 32 && *n <= 512 && !(*n & (*n - 1))) return 0;
  return lpx_emu_fail(w, in, -1, "nCols is %u; the number of columns must be a power of 2 from 32 to 512", *n);
}

/* Poison columns [col, col + n) in every lane and forget their writers. */
static void fresh_columns(emu_tmem *tm, uint32_t col, uint32_t n)
{
  for (uint32_t lane = 0; lane < TM_LANES; lane++)
    for (uint32_t x = col; x < col + n; x++) TM_CELL(tm, lane, x) = TM_POISON;
  for (int q = 0; q < 4; q++) {
    memset(&tm->tag[q][col], 0, n * sizeof(uint32_t));
    memset(&tm->rd[q][col], 0, n * sizeof(tm_acc));
    memset(&tm->wr[q][col], 0, n * sizeof(tm_acc));
  }
}

/* tcgen05.alloc [dst], nCols: allocate columns, write their address to shared memory. */
HANDLER(op_alloc)
{
  uint32_t n;
  if (whole_warp(w, in, m) || lpx_emu_tm_uniform(w, in, m, 0, "the address operand") || ncols_of(w, in, m, &n)) return -1;
  emu_tmem *tm = w->cta->tm;
  char where[512], have[1024];
  if (tm->relinquished) {
    lpx_emu_where(w->p, &w->p->insts[tm->relinquished - 1], where, sizeof where);
    return lpx_emu_fail(w, in, -1, "tcgen05.alloc after %s: a CTA that relinquished its allocation permit may not allocate "
                        "again", where);
  }
  int col = find_free(tm, n);
  if (col < 0) {
    describe_allocs(w, tm, have, sizeof have);
    return lpx_emu_fail(w, in, -1, "tcgen05.alloc of %u columns: no %u free columns at a multiple of %u (%s); on a GPU the "
                        "warp would block until they are freed, and nothing in this CTA frees them first", n, n, n, have);
  }
  tm->allocs[tm->nallocs++] = (tm_alloc){ (uint16_t)col, (uint16_t)n, (uint16_t)w->id, (int32_t)(in - w->p->insts),
                                          lpx_emu_tm_tick(w->cta) };
  fresh_columns(tm, (uint32_t)col, n);
  uint8_t *p = shared_word(w, in, 0, __builtin_ctz(m), 4, 1);
  if (!p) return -1;
  uint32_t addr = (uint32_t)col;             /* lane 0, the first column */
  memcpy(p, &addr, 4);
  return 0;
}

/* tcgen05.dealloc taddr, nCols: free an allocation no write is still landing in. */
HANDLER(op_dealloc)
{
  uint32_t n;
  if (whole_warp(w, in, m) || lpx_emu_tm_uniform(w, in, m, 0, "taddr") || ncols_of(w, in, m, &n)) return -1;
  emu_tmem *tm = w->cta->tm;
  uint32_t taddr = (uint32_t)lpx_emu_tm_arg(w, in, 0, __builtin_ctz(m)), col = taddr & 0xffff;
  tm_alloc *a = (taddr >> 16) ? NULL : alloc_at(tm, col);
  char have[1024], where[512];
  if (!a || a->col != col) {
    describe_allocs(w, tm, have, sizeof have);
    return lpx_emu_fail(w, in, -1, "tcgen05.dealloc of %u columns at tensor-memory address 0x%x, where no allocation of this "
                        "CTA starts (%s); pass the address tcgen05.alloc wrote", n, taddr, have);
  }
  if (a->ncols != n) {
    lpx_emu_where(w->p, &w->p->insts[a->inst], where, sizeof where);
    return lpx_emu_fail(w, in, -1, "tcgen05.dealloc of %u columns at column %u, but %s allocated %u there", n, col, where, a->ncols);
  }
  if (lpx_emu_tm_ready(w, in, -1, w->cta, 0xf, col, n, TM_CHECK_ASYNC | TM_CHECK_OWN_ST, "deallocates") ||
      lpx_emu_tm_order(w, in, -1, w->cta, 0xf, col, n, 1, "tcgen05.dealloc frees")) return -1;
  fresh_columns(tm, col, n);
  *a = tm->allocs[--tm->nallocs];
  return 0;
}

/* tcgen05.relinquish_alloc_permit: no tcgen05.alloc in this CTA from now on. */
HANDLER(op_relinquish)
{
  if (whole_warp(w, in, m)) return -1;
  if (!w->cta->tm->relinquished) w->cta->tm->relinquished = (int32_t)(in - w->p->insts) + 1;
  return 0;
}

/* The CTAs of a cluster that finished: report columns still allocated, at their tcgen05.alloc. */
int lpx_emu_tmem_exit(emu_cta *g, int n)
{
  for (int i = 0; i < n; i++) {
    emu_tmem *tm = g[i].tm;
    if (!tm || !tm->nallocs) continue;
    uint32_t cols = 0;
    for (int k = 0; k < tm->nallocs; k++) cols += tm->allocs[k].ncols;
    emu_warp *w = &g[i].warps[tm->allocs[0].warp];
    return lpx_emu_fail(w, &w->p->insts[tm->allocs[0].inst], -1, "the CTA exited with %u column(s) of tensor memory still "
                        "allocated, %u of them (columns %u..%u) by this tcgen05.alloc; every allocation needs a "
                        "tcgen05.dealloc before the kernel exits", cols, tm->allocs[0].ncols, tm->allocs[0].col,
                        tm->allocs[0].col + tm->allocs[0].ncols - 1);
  }
  return 0;
}

/* ------------------------------------------------------------ writers in flight */

/* Set the tag of columns [col, col + n) in the lane quadrants of the mask. */
void lpx_emu_tm_tag(emu_cta *c, uint32_t quads, uint32_t col, uint32_t n, uint32_t tag)
{
  for (int q = 0; q < 4; q++)
    if (quads >> q & 1)
      for (uint32_t x = col; x < col + n && x < TM_COLS; x++) c->tm->tag[q][x] = tag;
}

/* The cluster's async group number index. */
tm_group *lpx_emu_tm_group(emu_cta *c, int32_t index)
{
  return &c->group[0].tm->groups[index];
}

/* What the issuer of an async group still owes a reader, for messages. */
static void group_state(emu_warp *w, const tm_group *g, char *out, size_t cap)
{
  char where[512];
  if (g->commit < 0) {
    snprintf(out, cap, "no tcgen05.commit by its issuing thread (lane %u of warp %u) has followed it: commit it to an mbarrier, "
             "wait on that mbarrier, then tcgen05.fence::after_thread_sync", g->lane, g->warp);
    return;
  }
  lpx_emu_where(w->p, &w->p->insts[g->commit], where, sizeof where);
  snprintf(out, cap, "%s (or a later commit of its thread) signals an mbarrier when it completes, but this warp has not "
           "waited on that mbarrier phase (nor synchronized with a warp that did): wait with mbarrier.try_wait / test_wait, "
           "then tcgen05.fence::after_thread_sync", where);
}

/* Fail if a (quadrant, column) tag says a write to it is still in flight for warp w:
 * an async group w has not seen complete, or a tcgen05.st not waited. */
static int tag_ready(emu_warp *w, const emu_inst *in, int lane, uint32_t tag, uint32_t col, int flags, const char *doing)
{
  char where[512], why[1024];
  uint32_t kind = tag & TM_TAG_KIND, idx = TM_TAG_INDEX(tag);
  if (kind == TM_TAG_ST) {
    uint32_t warp = idx >> 20;
    if (warp == w->id && !(flags & TM_CHECK_OWN_ST)) return 0;
    lpx_emu_where(w->p, &w->p->insts[idx & 0xfffff], where, sizeof where);
    return lpx_emu_fail(w, in, lane, "%s tensor-memory column %u, which %s (warp %u) stores asynchronously with no "
                        "tcgen05.wait::st by that warp since", doing, col, where, warp);
  }
  if (kind != TM_TAG_ASYNC || !(flags & TM_CHECK_ASYNC)) return 0;
  const tm_group *g = lpx_emu_tm_group(w->cta, (int32_t)idx);
  lpx_emu_where(w->p, &w->p->insts[g->inst], where, sizeof where);
  if ((g->seen[w->cta->rank] >> w->id & 1) && w->cta->tm->afence[w->id] > g->ctick) return 0;
  if (g->seen[w->cta->rank] >> w->id & 1)
    return lpx_emu_fail(w, in, lane, "%s tensor-memory column %u, which %s wrote; this warp knows it completed (an "
                        "mbarrier wait, or a barrier with a warp that waited) but executed no "
                        "tcgen05.fence::after_thread_sync since: put one between the wait and this instruction",
                        doing, col, where);
  group_state(w, g, why, sizeof why);
  return lpx_emu_fail(w, in, lane, "%s tensor-memory column %u while %s may still be writing it: %s", doing, col, where, why);
}

/* Fail if any of columns [col, col + n) of CTA c, in the quadrants of the
 * mask, has a write in flight that warp w must not overlap. */
int lpx_emu_tm_ready(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n,
                     int flags, const char *doing)
{
  for (int q = 0; q < 4; q++)
    if (quads >> q & 1)
      for (uint32_t x = col; x < col + n && x < TM_COLS; x++)
        if (c->tm->tag[q][x] && tag_ready(w, in, lane, c->tm->tag[q][x], x, flags, doing)) return -1;
  return 0;
}

/* ------------------------------------------------------------ ordering between warps */

/* What warp b of tm knows of warp a's before-fences (its own: its last). */
static uint32_t known(const emu_tmem *tm, int b, int a)
{
  return a == b ? tm->bfence[a] : tm->hb[b * tm->nwarps + a];
}

/* What warp b of tm knows of warp a's clock (its own: now). */
static uint32_t known_clock(const emu_tmem *tm, int b, int a, uint32_t now)
{
  return a == b ? now : tm->hs[b * tm->nwarps + a];
}

/* x = max(x, y). */
static void raise_to(uint32_t *x, uint32_t y) { if (y > *x) *x = y; }

/* The published row of the mbarrier at offset off of tm, added when add; NULL if none (or out of memory). */
static uint32_t *pub_row(emu_tmem *tm, uint32_t off, int add)
{
  size_t w2 = 2 * (size_t)tm->nwarps;
  for (int i = 0; i < tm->npubs; i++) if (tm->pub_off[i] == off) return &tm->pub[(size_t)i * w2];
  if (!add) return NULL;
  size_t cap = (size_t)tm->pub_cap, cap2 = cap * w2;
  if (LPX_RESERVE(tm->pub_off, cap, (size_t)tm->npubs + 1)) return NULL;
  if (LPX_RESERVE(tm->pub, cap2, cap * w2)) return NULL;
  tm->pub_cap = (int)cap;
  tm->pub_off[tm->npubs] = off;
  uint32_t *row = &tm->pub[(size_t)tm->npubs++ * w2];
  memset(row, 0, w2 * sizeof *row);
  return row;
}

/* An arrive of warp w on the mbarrier at p: what it knows of every warp's
 * before-fences (its own last included) goes with the barrier to the
 * warps that wait on it. Barriers of other CTAs are not tracked. -1 out of memory. */
int lpx_emu_tmem_publish(emu_warp *w, const uint8_t *p)
{
  emu_cta *c = lpx_emu_mbar_owner(w, p);
  if (c != w->cta) return 0;
  emu_tmem *tm = c->tm;
  uint32_t *row = pub_row(tm, (uint32_t)(p - c->shared), 1), now = lpx_emu_tm_tick(c);
  if (!row) return -1;
  for (int a = 0; a < tm->nwarps; a++) {
    raise_to(&row[a], known(tm, w->id, a));
    raise_to(&row[tm->nwarps + a], known_clock(tm, w->id, a, now));
  }
  return 0;
}

/* A successful wait of warp w on the mbarrier at p: it learns what the
 * arrivals published (in force after its next after-fence). */
void lpx_emu_tm_acquire(emu_warp *w, const uint8_t *p)
{
  emu_cta *c = lpx_emu_mbar_owner(w, p);
  if (c != w->cta) return;
  emu_tmem *tm = c->tm;
  const uint32_t *row = pub_row(tm, (uint32_t)(p - c->shared), 0);
  for (int a = 0; row && a < tm->nwarps; a++) {
    raise_to(&tm->hbp[w->id * tm->nwarps + a], row[a]);
    raise_to(&tm->hs[w->id * tm->nwarps + a], row[tm->nwarps + a]);
  }
}

/* A barrier completed in CTA c: every warp learns what any of them knew. */
void lpx_emu_tm_merge(emu_cta *c)
{
  emu_tmem *tm = c->tm;
  int n = tm->nwarps;
  uint32_t now = lpx_emu_tm_tick(c);
  for (int a = 0; a < n; a++) {
    uint32_t k = 0, t = 0;
    for (int b = 0; b < n; b++) { raise_to(&k, known(tm, b, a)); raise_to(&t, known_clock(tm, b, a, now)); }
    for (int b = 0; b < n; b++) { raise_to(&tm->hbp[b * n + a], k); raise_to(&tm->hs[b * n + a], t); }
  }
}

/* The next tick of the cluster's tcgen05 clock (CTA c's cluster). */
uint32_t lpx_emu_tm_tick(emu_cta *c)
{
  return ++c->group[0].tm->tick;
}

/* Fail if warp w issues an asynchronous tcgen05 operation (what) after a
 * successful mbarrier wait with no tcgen05.fence::after_thread_sync since:
 * the operation may then start before what the wait ordered. */
int lpx_emu_tm_fenced(emu_warp *w, const emu_inst *in, int lane, const char *what)
{
  emu_tmem *tm = w->cta->tm;
  char where[512];
  if (tm->waited[w->id] <= tm->afence[w->id]) return 0;
  lpx_emu_where(w->p, &w->p->insts[tm->wait_inst[w->id]], where, sizeof where);
  return lpx_emu_fail(w, in, lane, "%s issued after %s with no tcgen05.fence::after_thread_sync by this warp in between: "
                      "without it the operation may start before what the wait orders (the shared-memory operands a "
                      "TMA load filled, tensor memory another warp released); put the fence right after the wait",
                      what, where);
}

/* Why a tcgen05 event of warp a at tick t is not ordered before warp w's
 * access to CTA c's tensor memory (0: it is; see unordered). In one CTA:
 * a before-fence of a after t that reached w through a barrier or an
 * mbarrier, and an after-fence of w since (missing that: w synchronized
 * with a after t but a did not fence first, 1, or w did not fence after,
 * 2; or no synchronization, 3). Across CTAs: a's before-fence after t and
 * w's after-fence after that. */
static int ordered(emu_warp *w, emu_cta *c, int a, uint32_t t)
{
  const emu_tmem *tm = w->cta->tm;
  int n = tm->nwarps;
  if (c != w->cta) return c->tm->bfence[a] <= t ? 1 : tm->afence[w->id] > c->tm->bfence[a] ? 0 : 2;
  if (tm->hb[w->id * n + a] > t) return 0;
  if (tm->hbp[w->id * n + a] > t) return 2;
  return tm->hs[w->id * n + a] > t ? 1 : 3;
}

/* What ordered's answers mean, for messages. */
static const char *const unordered[4] = {
  "",
  "that warp executed no tcgen05.fence::before_thread_sync after it: fence it before the thread synchronization that "
  "orders the two",
  "this warp executed no tcgen05.fence::after_thread_sync since the thread synchronization that orders the two: put "
  "one right after it",
  "no thread synchronization orders the two: a barrier both warps take part in, or an mbarrier that warp arrives on "
  "and this one waits for (tcgen05.fence::before_thread_sync before it, after_thread_sync after it)",
};

/* The text of one of ordered's answers. */
static const char *unordered_text(int why) { return unordered[why]; }

/* Fail unless warp w's access to a cell of CTA c that another warp's
 * tcgen05.ld/st r reached is ordered after it (see ordered). */
static int acc_ordered(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, const tm_acc *r, uint32_t col,
                       const char *doing, const char *verb)
{
  char where[512];
  if (!r->set || (c == w->cta && r->warp == w->id)) return 0;
  int why = ordered(w, c, r->warp, r->tick);
  if (!why) return 0;
  lpx_emu_where(w->p, &w->p->insts[r->inst], where, sizeof where);
  return lpx_emu_fail(w, in, lane, "%s tensor-memory column %u, which %s (warp %u) %s, and %s", doing, col, where, r->warp,
                      verb, unordered_text(why));
}

/* Fail unless an access by warp w to columns [col, col + n) of CTA c in
 * the quadrants of the mask is ordered after other warps' tcgen05.st
 * there (and, when it writes, their tcgen05.ld). */
int lpx_emu_tm_order(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n,
                     int write, const char *doing)
{
  emu_tmem *tm = c->tm;
  for (int q = 0; q < 4; q++)
    for (uint32_t x = col; (quads >> q & 1) && x < col + n && x < TM_COLS; x++)
      if ((write && acc_ordered(w, in, lane, c, &tm->rd[q][x], x, doing, "reads")) ||
          acc_ordered(w, in, lane, c, &tm->wr[q][x], x, doing, "stores to")) return -1;
  return 0;
}

/* Record warp w's access to columns [col, col + n) of CTA c: a tcgen05.ld
 * (TM_NOTE_LD), a tcgen05.st (replaces the readers), or an asynchronous
 * write (mma, cp, shift: ordered by its commit, forgets both). */
void lpx_emu_tm_note(emu_warp *w, const emu_inst *in, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n, int kind)
{
  tm_acc a = { lpx_emu_tm_tick(w->cta), (int32_t)(in - w->p->insts), (uint16_t)w->id, 1 }, none = { 0, 0, 0, 0 };
  if (c != w->cta) a = none;              /* another CTA's warps: ordered by the pair's own barriers */
  for (int q = 0; q < 4; q++)
    for (uint32_t x = col; (quads >> q & 1) && x < col + n && x < TM_COLS; x++) {
      if (kind == TM_NOTE_LD) c->tm->rd[q][x] = a;
      else c->tm->rd[q][x] = none;
      if (kind == TM_NOTE_ST) c->tm->wr[q][x] = a;
      else if (kind == TM_NOTE_ASYNC) c->tm->wr[q][x] = none;
    }
}

/* ------------------------------------------------------------ ld / st */

/* Lanes a warp's access covers and 32-bit columns per lane per .x1, by shape. */
typedef struct tm_geom { uint8_t lanes, cols; } tm_geom;
static const tm_geom geoms[LPX_TCSHAPE__END] = {
  [LPX_TCSHAPE_32X32B] = { 32, 1 }, [LPX_TCSHAPE_16X64B] = { 16, 2 }, [LPX_TCSHAPE_16X128B] = { 16, 4 },
  [LPX_TCSHAPE_16X256B] = { 16, 8 }, [LPX_TCSHAPE_16X32BX2] = { 16, 1 },
};

/* Register j of thread l: its lane (in the 16 or 32) and 32-bit column
 * (in its half), the ISA's fragment figures for each shape. */
static void at_32x32b(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c) { *ln = l; *c = j; }
static void at_16x64b(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c) { *ln = l / 4 + 8 * (l % 2); *c = l / 2 % 2 + 2 * j; }
static void at_16x128b(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c) { *ln = l / 4 + 8 * (j % 2); *c = l % 4 + 4 * (j / 2); }
static void at_16x256b(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c)
{
  *ln = l / 4 + 8 * (j / 2 % 2);
  *c = j % 2 + 2 * (l % 4) + 8 * (j / 4);
}
static void at_16x32bx2(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c) { *ln = l % 16; *c = j; }

typedef void (*tm_place)(uint32_t l, uint32_t j, uint32_t *ln, uint32_t *c);
static const tm_place places[LPX_TCSHAPE__END] = {
  [LPX_TCSHAPE_32X32B] = at_32x32b, [LPX_TCSHAPE_16X64B] = at_16x64b, [LPX_TCSHAPE_16X128B] = at_16x128b,
  [LPX_TCSHAPE_16X256B] = at_16x256b, [LPX_TCSHAPE_16X32BX2] = at_16x32bx2,
};

/* One warp's tcgen05.ld/st: where it starts and what it covers. */
typedef struct tm_access {
  int shape;
  uint32_t lane0, col0, split;   /* split: the second half's column offset (16x32bx2) */
  uint32_t nregs, wide, span;    /* wide: 2 with pack/unpack::16b; span: physical columns per half */
  uint32_t quad;
} tm_access;

/* Check a warp's access (converged warp, one address, its lane quadrant,
 * allocated columns) and fill a; kaddr/ksplit are the operand indices. */
static int access_setup(emu_warp *w, const emu_inst *in, uint32_t m, int kaddr, int ksplit, int wide, tm_access *a)
{
  if (whole_warp(w, in, m) || lpx_emu_tm_uniform(w, in, m, kaddr, "taddr") ||
      (ksplit >= 0 && lpx_emu_tm_uniform(w, in, m, ksplit, "immHalfSplitoff"))) return -1;
  int l0 = __builtin_ctz(m);
  uint32_t taddr = (uint32_t)lpx_emu_tm_arg(w, in, kaddr, l0);
  tm_geom g = geoms[in->mod[LPX_GB_TCSHAPE]];
  *a = (tm_access){ in->mod[LPX_GB_TCSHAPE], taddr >> 16, taddr & 0xffff, ksplit >= 0 ? (uint32_t)lpx_emu_tm_arg(w, in, ksplit, l0) : 0,
                    (uint32_t)in->ext[TM_X_NUM] * (uint32_t)lpx_tc_shape_regs(in->mod[LPX_GB_TCSHAPE]), wide ? 2u : 1u, 0, w->id % 4 };
  a->span = (uint32_t)g.cols * in->ext[TM_X_NUM] * a->wide;
  if (a->lane0 < 32 * a->quad || a->lane0 + g.lanes > 32 * a->quad + 32)
    return lpx_emu_fail(w, in, -1, "warp %u (warp %u of its warpgroup) may access tensor-memory lanes %u..%u only; this "
                        "access covers lanes %u..%u (taddr 0x%x)", w->id, a->quad, 32 * a->quad, 32 * a->quad + 31, a->lane0,
                        a->lane0 + g.lanes - 1, taddr);
  const char *what = in->op == LPX_OP_TCLD ? "tcgen05.ld reads" : "tcgen05.st writes";
  if (lpx_emu_tm_cols(w, in, -1, w->cta, a->col0, a->span, what)) return -1;
  return ksplit >= 0 ? lpx_emu_tm_cols(w, in, -1, w->cta, a->col0 + a->split, a->span, what) : 0;
}

/* The cell and physical column of register j of thread l (k: which 16-bit half with pack/unpack). */
static uint32_t *cell_of(emu_tmem *tm, const tm_access *a, uint32_t l, uint32_t j, uint32_t k)
{
  uint32_t ln, c;
  places[a->shape](l, j, &ln, &c);
  uint32_t half = a->shape == LPX_TCSHAPE_16X32BX2 ? l / 16 : 0;
  return &TM_CELL(tm, a->lane0 + ln, a->col0 + half * a->split + c * a->wide + k);
}

/* Remember that a tcgen05.ld left slot unreadable for warp w until wait::ld. */
static int pend_add(emu_warp *w, const emu_inst *in, int32_t slot)
{
  emu_tmem *tm = w->cta->tm;
  size_t cap = (size_t)tm->pend_cap[w->id];
  if (LPX_RESERVE(tm->pend[w->id], cap, (size_t)tm->npend[w->id] + 1))
    return lpx_emu_fail(w, in, -1, "out of host memory");
  tm->pend_cap[w->id] = (int)cap;
  tm->pend[w->id][tm->npend[w->id]++] = (tm_pend){ slot, (int32_t)(in - w->p->insts) };
  return 0;
}

/* tcgen05.ld {r...}, [taddr][, split]: fill the registers; they stay unreadable until wait::ld. */
HANDLER(op_ld)
{
  const emu_op *v = EMU_OP(w, in, 0);
  int n = v->reg, split = in->mod[LPX_GB_TCSHAPE] == LPX_TCSHAPE_16X32BX2;
  tm_access a;
  int chk = TM_CHECK_ASYNC | TM_CHECK_OWN_ST;
  if (access_setup(w, in, m, 1 + n, split ? 2 + n : -1, in->mod[LPX_GB_PACK] != 0, &a)) return -1;
  for (uint32_t h = 0; h <= (uint32_t)split; h++) {
    uint32_t col = a.col0 + h * a.split;
    if (lpx_emu_tm_ready(w, in, -1, w->cta, 1u << a.quad, col, a.span, chk, "tcgen05.ld reads") ||
        lpx_emu_tm_order(w, in, -1, w->cta, 1u << a.quad, col, a.span, 0, "tcgen05.ld reads")) return -1;
    lpx_emu_tm_note(w, in, w->cta, 1u << a.quad, col, a.span, TM_NOTE_LD);
  }
  emu_tmem *tm = w->cta->tm;
  for (uint32_t j = 0; j < a.nregs && (int)j < n; j++) {
    int32_t slot = v[1 + j].reg;
    uint64_t *r = EMU_R(w, slot);
    for (uint32_t l = 0; l < 32; l++) {
      uint32_t x = *cell_of(tm, &a, l, j, 0);
      if (a.wide == 2) x = (x & 0xffff) | (*cell_of(tm, &a, l, j, 1) & 0xffff) << 16;
      r[l] = x;
    }
    if (slot < w->p->nregs) {
      w->wr[slot] &= ~m;
      if (pend_add(w, in, slot)) return -1;
    }
  }
  return 0;
}

/* tcgen05.st [taddr][, split], {r...}: write the cells; tagged until the warp's wait::st. */
HANDLER(op_st)
{
  int split = in->mod[LPX_GB_TCSHAPE] == LPX_TCSHAPE_16X32BX2, kv = split ? 2 : 1;
  const emu_op *v = EMU_OP(w, in, kv);
  tm_access a;
  if (access_setup(w, in, m, 0, split ? 1 : -1, in->mod[LPX_GB_UNPACK] != 0, &a)) return -1;
  for (uint32_t h = 0; h <= (uint32_t)split; h++) {
    uint32_t col = a.col0 + h * a.split;
    if (lpx_emu_tm_ready(w, in, -1, w->cta, 1u << a.quad, col, a.span, TM_CHECK_ASYNC, "tcgen05.st writes") ||
        lpx_emu_tm_order(w, in, -1, w->cta, 1u << a.quad, col, a.span, 1, "tcgen05.st writes")) return -1;
    lpx_emu_tm_note(w, in, w->cta, 1u << a.quad, col, a.span, TM_NOTE_ST);
  }
  emu_tmem *tm = w->cta->tm;
  for (uint32_t j = 0; j < a.nregs && (int)j < v->reg; j++) {
    const uint64_t *r = EMU_R(w, v[1 + j].reg);
    for (uint32_t l = 0; l < 32; l++) {
      uint32_t x = (uint32_t)r[l];
      *cell_of(tm, &a, l, j, 0) = a.wide == 2 ? (x & 0xffff) : x;
      if (a.wide == 2) *cell_of(tm, &a, l, j, 1) = x >> 16;
    }
  }
  uint32_t tag = TM_ST_TAG(w->id, in - w->p->insts);
  lpx_emu_tm_tag(w->cta, 1u << a.quad, a.col0, a.span, tag);
  if (split) lpx_emu_tm_tag(w->cta, 1u << a.quad, a.col0 + a.split, a.span, tag);
  return 0;
}

/* tcgen05.wait::ld: the warp's loaded registers become readable. */
HANDLER(op_wait_ld)
{
  if (whole_warp(w, in, m)) return -1;
  emu_tmem *tm = w->cta->tm;
  for (int i = 0; i < tm->npend[w->id]; i++) w->wr[tm->pend[w->id][i].slot] |= w->exists;
  tm->npend[w->id] = 0;
  return 0;
}

/* tcgen05.wait::st: the warp's stores are complete. */
HANDLER(op_wait_st)
{
  if (whole_warp(w, in, m)) return -1;
  emu_tmem *tm = w->cta->tm;
  for (int q = 0; q < 4; q++)
    for (int x = 0; x < TM_COLS; x++)
      if ((tm->tag[q][x] & TM_TAG_KIND) == TM_TAG_ST && TM_TAG_INDEX(tm->tag[q][x]) >> 20 == w->id) tm->tag[q][x] = 0;
  return 0;
}

/* Report a read of a register a tcgen05.ld filled before the warp's
 * tcgen05.wait::ld (called for a register the lanes bad never wrote). */
int lpx_emu_tmem_pending(emu_warp *w, const emu_inst *in, int32_t slot, uint32_t bad)
{
  emu_tmem *tm = w->cta->tm;
  for (int i = 0; i < tm->npend[w->id]; i++) {
    if (tm->pend[w->id][i].slot != slot) continue;
    char name[128], where[512];
    lpx_reg_text(w->p->m, w->p->f, slot, name, sizeof name);
    lpx_emu_where(w->p, &w->p->insts[tm->pend[w->id][i].inst], where, sizeof where);
    return lpx_emu_fail(w, in, __builtin_ctz(bad), "reads %s before tcgen05.wait::ld: %s fills it asynchronously; execute "
                        "%s before using the loaded registers", name, where,
                        lpx_emu_spell(w, in, "tcgen05.wait::ld (ptx.tcgen05.wait(\"ld\"))", "tcgen05.wait::ld.sync.aligned"));
  }
  return 0;
}

/* tcgen05.fence::before_thread_sync: the warp's tcgen05 operations so far
 * are ordered before its next thread synchronization. */
HANDLER(op_fence_before)
{
  (void)in; (void)m;
  w->cta->tm->bfence[w->id] = lpx_emu_tm_tick(w->cta);
  return 0;
}

/* tcgen05.fence::after_thread_sync: the warp's later tcgen05 operations
 * are ordered after the thread synchronizations it took part in so far. */
HANDLER(op_fence_after)
{
  (void)in; (void)m;
  emu_tmem *tm = w->cta->tm;
  tm->afence[w->id] = lpx_emu_tm_tick(w->cta);
  for (int a = 0; a < tm->nwarps; a++) raise_to(&tm->hb[w->id * tm->nwarps + a], tm->hbp[w->id * tm->nwarps + a]);
  return 0;
}

/* ------------------------------------------------------------ decoding */

/* Record a tcgen05 form's facts in ext (.xN count, cta_group, multicast,
 * .sp); a tcgen05.ld's destinations are left unwritten for the loop: the
 * handler writes them and they become readable at tcgen05.wait::ld. */
void lpx_emu_decode_tcgen05(emu_inst *in, const lpx_form *fo)
{
  if (!is_tc(in->op)) return;
  in->ext[TM_X_NUM] = (uint8_t)(fo->info.num ? fo->info.num : 1);
  in->ext[TM_X_CTAGRP] = (uint8_t)fo->info.cta_group;
  in->ext[TM_X_MCAST] = (uint8_t)fo->info.multicast;
  in->ext[TM_X_SP] = (uint8_t)fo->info.sparse;
  if (in->op == LPX_OP_TCLD) { in->ndsts = 0; in->ndst_vec = 0; }
}

/* Handlers of the tcgen05 rows this file runs. */
static const emu_fn tm_handlers[LPX_OP__COUNT] = {
  [LPX_OP_TCALLOC] = op_alloc, [LPX_OP_TCDEALLOC] = op_dealloc, [LPX_OP_TCRELINQ] = op_relinquish,
  [LPX_OP_TCLD] = op_ld, [LPX_OP_TCST] = op_st, [LPX_OP_TCWAITLD] = op_wait_ld, [LPX_OP_TCWAITST] = op_wait_st,
  [LPX_OP_TCFENCEB] = op_fence_before, [LPX_OP_TCFENCEA] = op_fence_after,
};

/* Handler of a tensor-memory row: alloc, dealloc, relinquish, ld, st,
 * their waits and the thread-sync fences (mma, cp, shift and commit are
 * emu_tcgen05.c's). */
emu_fn lpx_emu_pick_tmem(const emu_inst *in)
{
  if (!is_tc(in->op)) return NULL;
  if (in->op == LPX_OP_TCLD || in->op == LPX_OP_TCST)
    if (!in->mod[LPX_GB_TCSHAPE] || in->mod[LPX_GB_TCSHAPE] >= LPX_TCSHAPE__END) return NULL;
  return tm_handlers[in->op];
}
