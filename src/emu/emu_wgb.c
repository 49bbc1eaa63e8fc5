/* The warpgroup's B operand, decoded once: the four warps of a warpgroup
 * (and the other warpgroups of the CTA running the same code) each issue
 * the same wgmma.mma_async on the same B tile, and each reads and decodes
 * all of B. After one warp's full read (every check made, every access
 * recorded) the decoded, transposed B is kept in a slot keyed by the
 * wgmma row, its B descriptor and the race check's epoch, when no byte of
 * it was written in the epoch. While no access touches its chunks (every
 * shared access calls lpx_emu_shared_touch, which drops the slots it meets),
 * another warp's read of the same B would find what the first one found:
 * no report (a read after no write, of written bytes, with nothing the
 * generic proxy left unfenced) and, in the race tables, the bytes marked
 * read by that warp or by several, at that row. So a warp that finds the
 * slot takes B from it and records its read as the race check would: the
 * bytes become read by several warps once a second warp reads them. Not
 * used under the adversarial schedule. A leaf under emu_wgmma.c and the
 * memory path: it calls only the race tables. */
#include "emu.h"
#include <stdlib.h>

/* Clear slot s's cells in the chunk map and mark it empty. */
static void drop(emu_cta *c, int s)
{
  emu_wgb *g = &c->wgb[s];
  uint8_t bit = (uint8_t)(1u << s);
  for (uint32_t i = 0; i < g->nchunk; i++) {
    c->wgb_map[g->chunk[i] >> 4] &= (uint8_t)~bit;
    c->wgb_map[(g->chunk[i] + 15) >> 4] &= (uint8_t)~bit;
  }
  c->wgb_live &= ~(uint32_t)bit;
  g->in = NULL;
}

/* Drop the slots holding any chunk in shared bytes [off, off + n). */
void lpx_emu_wgb_drop_range(emu_cta *c, uint64_t off, uint64_t n)
{
  if (off >= c->shared_size || !n) return;
  uint64_t end = n > c->shared_size - off ? c->shared_size : off + n;
  uint32_t hit = 0;
  for (uint64_t k = off >> 4; k <= (end - 1) >> 4; k++) hit |= c->wgb_map[k];
  hit &= c->wgb_live;
  while (hit) {
    int s = __builtin_ctz(hit);
    hit &= hit - 1;
    drop(c, s);
  }
}

/* Empty every slot (a CTA's new run). */
void lpx_emu_wgb_reset(emu_cta *c)
{
  for (int s = 0; c->wgb_live && s < EMU_WGB_SLOTS; s++)
    if (c->wgb_live >> s & 1) drop(c, s);
}

/* Free the slots and the chunk map. */
void lpx_emu_wgb_free(emu_cta *c)
{
  for (int s = 0; c->wgb && s < EMU_WGB_SLOTS; s++) { free(c->wgb[s].bt); free(c->wgb[s].chunk); }
  free(c->wgb);
  free(c->wgb_map);
  c->wgb = NULL; c->wgb_map = NULL; c->wgb_live = 0;
}

/* B transposed for warp w's wgmma row in with B descriptor desc, when a
 * slot holds it for this epoch; its read recorded (the bytes read by
 * several warps when w is not the slot's reader). NULL: read it. */
const double *lpx_emu_wgb_find(emu_warp *w, const emu_inst *in, uint64_t desc)
{
  emu_cta *c = w->cta;
  uint32_t me = w->id + 1;
  for (int s = 0; c->wgb_live && s < EMU_WGB_SLOTS; s++) {
    emu_wgb *g = &c->wgb[s];
    if (!(c->wgb_live >> s & 1) || g->in != in || g->desc != desc || g->epoch != c->epoch) continue;
    if (g->reader != 0xff && g->reader != me) {
      if (c->race_r)
        for (uint32_t i = 0; i < g->nchunk; i++) lpx_emu_race_read_many(c, g->chunk[i], 16);
      g->reader = 0xff;
    }
    return g->bt;
  }
  return NULL;
}

/* A slot to fill with wgmma row in's B (descriptor desc, kn doubles
 * transposed): emptied, its buffer grown to kn; -1 when there is none
 * (the adversarial schedule, or no memory): the caller keeps no copy. */
int lpx_emu_wgb_take(emu_cta *c, const emu_inst *in, uint64_t desc, size_t kn, double **bt)
{
  if (c->sched) return -1;
  if (!c->wgb) {
    c->wgb = calloc(EMU_WGB_SLOTS, sizeof *c->wgb);
    c->wgb_map = calloc(c->shared_size / 16 + 2, 1);
    if (!c->wgb || !c->wgb_map) { lpx_emu_wgb_free(c); return -1; }
  }
  int s = -1;
  for (int k = 0; k < EMU_WGB_SLOTS && s < 0; k++)
    if ((c->wgb_live >> k & 1) && c->wgb[k].in == in && c->wgb[k].desc == desc) s = k;
  for (int k = 0; k < EMU_WGB_SLOTS && s < 0; k++)
    if (!(c->wgb_live >> k & 1)) s = k;
  if (s < 0) s = (int)(c->wgb_next++ % EMU_WGB_SLOTS);
  if (c->wgb_live >> s & 1) drop(c, s);
  emu_wgb *g = &c->wgb[s];
  if (g->bt_cap < kn) {
    double *nb = realloc(g->bt, kn * sizeof *nb);
    if (!nb) return -1;
    g->bt = nb; g->bt_cap = kn;
  }
  *bt = g->bt;
  return s;
}

/* Keep slot s (lpx_emu_wgb_take) for warp w's read, just made and
 * passed, of the n 16-byte chunks at shared offsets chunk[]: unless a
 * byte of them was written in this epoch (then another warp's read races,
 * and must take the path that reports it). */
void lpx_emu_wgb_keep(emu_warp *w, const emu_inst *in, uint64_t desc, int s, const uint32_t *chunk, uint32_t n)
{
  emu_cta *c = w->cta;
  emu_wgb *g = &c->wgb[s];
  for (uint32_t i = 0; c->race_w && i < n; i++)
    if (lpx_emu_race_written_now(c, chunk[i], 16)) return;
  if (g->chunk_cap < n) {
    uint32_t *nc = realloc(g->chunk, n * sizeof *nc);
    if (!nc) return;
    g->chunk = nc; g->chunk_cap = n;
  }
  memcpy(g->chunk, chunk, n * sizeof *chunk);
  g->nchunk = n;
  g->in = in; g->desc = desc; g->epoch = c->epoch; g->reader = w->id + 1;
  uint8_t bit = (uint8_t)(1u << s);
  for (uint32_t i = 0; i < n; i++) { c->wgb_map[chunk[i] >> 4] |= bit; c->wgb_map[(chunk[i] + 15) >> 4] |= bit; }
  c->wgb_live |= bit;
}
