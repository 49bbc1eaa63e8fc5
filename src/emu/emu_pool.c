/* The launch pool: a device's host threads' records and their CTAs' state
 * (shared memory and its race and proxy shadows, warps, registers, .local
 * and call frames), kept between launches and handed to the next launch,
 * grown when it needs more. Allocating and freeing them at every launch
 * was a fifth of a small launch's time (glibc's malloc, free and
 * consolidation). What a launch finds is what calloc gave it before:
 * zeroed records, and shared memory and shadows that are all zero while
 * pooled (the launch clears the pages it touched before handing them back,
 * emu_exec.c worker_release); registers, .local and frames are cleared at
 * every CTA's start anyway. The race tables' instruction indices
 * (race_wi, race_ri) are not cleared: they are read only where a race word
 * names the running epoch, as between the CTAs of one launch. The bytes it holds count against the device's
 * memory budget (emu_mem.c), and it is let go when they are in the way.
 * A device is used by one thread at a time (luaptx.h), so the pool needs
 * no lock; a launch's worker threads only use what it handed them. */
#include "emu.h"
#include <stdlib.h>

/* One warp's buffers and their sizes in elements: registers (32 per
 * slot), written masks (one per slot), .local and frame bytes (32 lanes). */
typedef struct pool_warp {
  uint64_t *r; uint32_t *wr; uint8_t *local, *frame;
  uint64_t nr, nwr, nlocal, nframe;
} pool_warp;

/* One CTA's buffers and their sizes in elements: shared memory, its four
 * race shadows and its proxy shadow, warps. */
typedef struct pool_cta {
  uint8_t *shared; uint64_t nshared;
  uint32_t *race[4]; uint64_t nrace[4];
  uint8_t *pdirty; uint64_t npdirty;
  emu_warp *warps; pool_warp *pw; int nwarps;
} pool_cta;

/* A host thread's cluster of CTAs. */
typedef struct pool_slot {
  emu_cta *ctas; pool_cta *mem; int nctas;
} pool_slot;

typedef struct emu_pool emu_pool;
struct emu_pool {
  emu_worker *workers;
  pool_slot *slots; int nslots;
  uint64_t bytes;                 /* host bytes of the buffers held */
};

/* Bytes of shared memory a CTA of the launch has. */
static uint64_t shared_size(const emu_prog *p, const lpx_launch_cfg *cfg)
{
  return cfg->dynamic_smem ? (uint64_t)p->extern_off + cfg->dynamic_smem : p->shared_static;
}

/* Does a launch with these checks keep race and proxy shadows? */
static int wants_shadows(int64_t checks) { return (checks & (EMU_CHECK_RACE | EMU_CHECK_UNINIT_SHARED)) != 0; }

/* Host bytes one CTA's state takes: shared memory and its check shadows,
 * and per warp its registers, .local and call frame for 32 lanes. */
uint64_t lpx_emu_pool_cta_bytes(const emu_prog *p, const lpx_launch_cfg *cfg, int64_t checks)
{
  uint64_t threads = (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2], warps = (threads + 31) / 32;
  uint64_t shared = shared_size(p, cfg);
  uint64_t shadows = wants_shadows(checks) ? (shared + 1) * (4 * sizeof(uint32_t) + 1) : 0;
  uint64_t warp = (uint64_t)p->nslots * (32 * sizeof(uint64_t) + sizeof(uint32_t)) + ((uint64_t)p->local_size + p->frame_size) * 32
                + sizeof(emu_warp) + sizeof(pool_warp);
  return shared + 16 + shadows + warps * warp;
}

/* Make *buf hold at least n elements of size bytes, zeroed when it grows
 * (a grown buffer is a fresh calloc: all zero, as the pool keeps them). */
static int grow(emu_pool *pl, void **buf, uint64_t *have, uint64_t n, size_t size)
{
  if (n <= *have) return 0;
  void *b = calloc((size_t)n, size);
  if (!b) return -1;
  free(*buf);
  pl->bytes += (n - *have) * size;
  *buf = b; *have = n;
  return 0;
}

/* Grow the parallel arrays *a and *b (asize and bsize bytes an element)
 * from *have to n elements, the new ones of b zeroed (a's are laid out
 * at each launch). */
static int grow_pair(emu_pool *pl, void **a, size_t asize, void **b, size_t bsize, int *have, int n)
{
  if (n <= *have) return 0;
  void *x = realloc(*a, (size_t)n * asize);
  if (x) *a = x;
  void *y = realloc(*b, (size_t)n * bsize);
  if (y) *b = y;
  if (!x || !y) return -1;
  memset((char *)y + (size_t)*have * bsize, 0, (size_t)(n - *have) * bsize);
  pl->bytes += (uint64_t)(n - *have) * (asize + bsize);
  *have = n;
  return 0;
}

/* Size one warp's buffers for program p. */
static int warp_take(emu_pool *pl, pool_warp *m, const emu_prog *p)
{
  return grow(pl, (void **)&m->r, &m->nr, (uint64_t)p->nslots * 32, sizeof(uint64_t)) ||
         grow(pl, (void **)&m->wr, &m->nwr, (uint64_t)p->nslots, sizeof(uint32_t)) ||
         grow(pl, (void **)&m->local, &m->nlocal, (uint64_t)p->local_size * 32, 1) ||
         grow(pl, (void **)&m->frame, &m->nframe, (uint64_t)p->frame_size * 32, 1);
}

/* Size one CTA's buffers for launch L and lay out its record: zeroed,
 * its geometry and buffers set (shadows only when L's checks use them). */
static int cta_take(emu_pool *pl, pool_cta *m, emu_cta *c, emu_launch *L)
{
  const emu_prog *p = L->p;
  uint64_t size = shared_size(p, &L->cfg);
  uint32_t threads = L->cfg.block[0] * L->cfg.block[1] * L->cfg.block[2];
  int nwarps = (int)((threads + 31) / 32), shadows = wants_shadows(L->checks);
  if (grow(pl, (void **)&m->shared, &m->nshared, size + 16, 1)) return -1;
  for (int k = 0; shadows && k < 4; k++)
    if (grow(pl, (void **)&m->race[k], &m->nrace[k], size + 1, sizeof(uint32_t))) return -1;
  if (shadows && grow(pl, (void **)&m->pdirty, &m->npdirty, size + 1, 1)) return -1;
  if (grow_pair(pl, (void **)&m->warps, sizeof *m->warps, (void **)&m->pw, sizeof *m->pw, &m->nwarps, nwarps)) return -1;
  memset(c, 0, sizeof *c);
  c->L = L;
  c->nthreads = threads; c->nwarps = nwarps;
  c->shared_size = (uint32_t)size; c->shared = m->shared;
  while ((size + (1ull << c->page_shift) - 1) >> c->page_shift > 64) c->page_shift++;
  if (shadows) { c->race_w = m->race[0]; c->race_r = m->race[1]; c->race_wi = m->race[2]; c->race_ri = m->race[3]; c->pdirty = m->pdirty; }
  c->warps = m->warps;
  memset(c->warps, 0, (size_t)nwarps * sizeof *c->warps);
  for (int k = 0; k < nwarps; k++) {
    if (warp_take(pl, &m->pw[k], p)) return -1;
    emu_warp *w = &c->warps[k];
    w->p = p; w->r = m->pw[k].r; w->wr = m->pw[k].wr;
    w->local = p->local_size ? m->pw[k].local : NULL;
    w->frame = p->frame_size ? m->pw[k].frame : NULL;
  }
  return 0;
}

/* Make room for n host threads' slots of at least cluster CTAs each. */
static int reserve(emu_pool *pl, int n, int cluster)
{
  if (grow_pair(pl, (void **)&pl->workers, sizeof *pl->workers, (void **)&pl->slots, sizeof *pl->slots, &pl->nslots, n)) return -1;
  for (int i = 0; i < n; i++) {
    pool_slot *s = &pl->slots[i];
    if (grow_pair(pl, (void **)&s->ctas, sizeof *s->ctas, (void **)&s->mem, sizeof *s->mem, &s->nctas, cluster)) return -1;
  }
  return 0;
}

/* The workers of launch L (L->nworkers of them, each with its cluster of
 * L->cluster_size CTAs laid out and zeroed as calloc would give them, the
 * CTAs' shared memory and shadows all zero); NULL when host memory ran out
 * (the pool keeps what it has, consistent). Single-threaded: before the
 * launch's threads start. */
emu_worker *lpx_emu_pool_take(emu_dev *e, emu_launch *L)
{
  if (!e->pool && !(e->pool = calloc(1, sizeof *e->pool))) return NULL;
  emu_pool *pl = e->pool;
  if (reserve(pl, L->nworkers, L->cluster_size)) return NULL;
  for (int i = 0; i < L->nworkers; i++) {
    emu_worker *wk = &pl->workers[i];
    memset(wk, 0, sizeof *wk);
    wk->L = L; wk->index = i; wk->ctas = pl->slots[i].ctas;
    for (int r = 0; r < L->cluster_size; r++) {
      emu_cta *c = &wk->ctas[r];
      if (cta_take(pl, &pl->slots[i].mem[r], c, L)) return NULL;
      c->worker = i; c->group = wk->ctas; c->group_size = L->cluster_size; c->rank = r;
    }
  }
  return pl->workers;
}

/* Host bytes the device's pool holds (counted against its memory budget). */
uint64_t lpx_emu_pool_bytes(const emu_dev *e) { return e->pool ? e->pool->bytes : 0; }

/* Free one CTA's buffers. */
static void cta_free(pool_cta *m)
{
  for (int k = 0; k < m->nwarps; k++) { free(m->pw[k].r); free(m->pw[k].wr); free(m->pw[k].local); free(m->pw[k].frame); }
  free(m->warps); free(m->pw); free(m->shared); free(m->pdirty);
  for (int k = 0; k < 4; k++) free(m->race[k]);
}

/* Let the pool go (device close, or its memory needed elsewhere). */
void lpx_emu_pool_free(emu_dev *e)
{
  emu_pool *pl = e->pool;
  if (!pl) return;
  for (int i = 0; i < pl->nslots; i++) {
    for (int r = 0; r < pl->slots[i].nctas; r++) cta_free(&pl->slots[i].mem[r]);
    free(pl->slots[i].ctas); free(pl->slots[i].mem);
  }
  free(pl->slots); free(pl->workers); free(pl);
  e->pool = NULL;
}
