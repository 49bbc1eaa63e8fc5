/* Blackwell's asynchronous tensor-core operations on the emulator:
 * tcgen05.mma (dense .kind::f16 with f16/bf16 inputs, .kind::tf32,
 * .kind::f8f6f4 with e4m3/e5m2 inputs, .kind::i8; f32/f16/s32 D in tensor
 * memory; A from shared memory or tensor memory, B from shared memory, both
 * through the matrix descriptors wgmma reads, K- or MN-major, every swizzle;
 * .cta_group::1 with M = 64 or 128 and .cta_group::2 with M = 128 or 256 on
 * a CTA pair; enable-input-d, scale-input-d, disable-output-lane),
 * tcgen05.cp (every shape and warp multicast, no decompression),
 * tcgen05.shift and tcgen05.commit (.multicast::cluster too). Operations
 * run at once, a valid schedule; what a reader may assume is tracked: the
 * operations one thread issued form a group until its next commit, a
 * commit tracks every group its thread issued before it, and a group's
 * writes become readable by a warp that waited on the mbarrier phase such
 * a commit arrived in (or synchronized with one that did). */
#include "emu_tc.h"
#include "emu_prof.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)


/* ------------------------------------------------------------ async groups */

/* The open group (issued, not committed) of a thread, or -1. */
static int32_t find_open(emu_warp *w, int lane)
{
  emu_tmem *s = w->cta->group[0].tm;
  for (int32_t i = s->ngroups - 1; i >= s->settled; i--) {
    const tm_group *g = &s->groups[i];
    if (g->commit < 0 && g->cta == w->cta->rank && g->warp == w->id && g->lane == lane) return i;
  }
  return -1;
}

/* The thread's open group, opened by this instruction if it has none; -1 out of memory. */
int32_t lpx_emu_tm_open(emu_warp *w, const emu_inst *in, int lane)
{
  int32_t i = find_open(w, lane);
  if (i >= 0) return i;
  emu_tmem *s = w->cta->group[0].tm;
  size_t cap = (size_t)s->gcap;
  if (LPX_RESERVE(s->groups, cap, (size_t)s->ngroups + 1)) return lpx_emu_fail(w, in, lane, "out of host memory");
  s->gcap = (int)cap;
  tm_group *g = &s->groups[s->ngroups];
  memset(g, 0, sizeof *g);
  g->inst = (int32_t)(in - w->p->insts);
  g->commit = -1;
  g->warp = (uint16_t)w->id; g->lane = (uint8_t)lane; g->cta = (uint8_t)w->cta->rank;
  return s->ngroups++;
}

/* Warps of a CTA, as a mask. */
static uint32_t all_warps(const emu_cta *c) { return c->nwarps >= 32 ? EMU_FULL : (1u << c->nwarps) - 1; }

/* Has every warp of every CTA of the cluster seen group g complete? */
static int fully_seen(const emu_cta *g0, const tm_group *g)
{
  if (g->commit < 0) return 0;
  for (int r = 0; r < g0->group_size; r++) if (g->seen[r] != all_warps(&g0[r])) return 0;
  return 1;
}

/* Mark the groups commit t tracks (its thread's, issued before it) seen by warp w. */
static void seen_upto(emu_tmem *s, const tm_commit *t, const emu_warp *w)
{
  for (int i = s->settled; i < t->upto; i++) {
    tm_group *g = &s->groups[i];
    if (g->cta == t->cta && g->warp == t->warp && g->lane == t->lane) g->seen[w->cta->rank] |= 1u << w->id;
  }
}

/* A wait on the mbarrier word p for a phase parity succeeded in warp w:
 * every commit that arrived in that phase completed what it tracks. */
void lpx_emu_tmem_observe(emu_warp *w, const uint8_t *p, int parity, const emu_inst *in)
{
  emu_tmem *s = w->cta->group[0].tm;
  w->cta->tm->waited[w->id] = lpx_emu_tm_tick(w->cta);
  w->cta->tm->wait_inst[w->id] = (int32_t)(in - w->p->insts);
  lpx_emu_tm_acquire(w, p);
  emu_cta *c = lpx_emu_mbar_owner(w, p);
  uint32_t off = (uint32_t)(p - c->shared);
  for (int i = s->csettled; i < s->ncommits; i++) {
    const tm_commit *t = &s->commits[i];
    if ((t->armed >> c->rank & 1) && t->mbar_off == off && t->parity[c->rank] == parity && t->upto > s->settled)
      seen_upto(s, t, w);
  }
}

/* A barrier completed in CTA c (cluster: a cluster barrier): what one of
 * its warps had seen complete, every warp it synchronized has seen. */
void lpx_emu_tmem_sync(emu_cta *c, int cluster)
{
  emu_cta *g0 = c->group;
  emu_tmem *s = g0->tm;
  int lo = cluster ? 0 : c->rank, hi = cluster ? g0->group_size : c->rank + 1;
  for (int r = lo; r < hi; r++) lpx_emu_tm_merge(&g0[r]);
  for (int i = s->settled; i < s->ngroups; i++) {
    tm_group *g = &s->groups[i];
    uint32_t any = 0;
    for (int r = lo; r < hi; r++) any |= g->seen[r];
    if (g->commit >= 0 && any) for (int r = lo; r < hi; r++) g->seen[r] = all_warps(&g0[r]);
  }
  while (s->settled < s->ngroups && fully_seen(g0, &s->groups[s->settled])) s->settled++;
  while (s->csettled < s->ncommits && s->commits[s->csettled].upto <= s->settled) s->csettled++;
}

/* ------------------------------------------------------------ descriptors */

/* Swizzle span of each tcgen05 descriptor swizzle code (bits 61-63); 0
 * with ok 0: a code the emulator does not run (1: 128B with 32-byte
 * atomicity; 3, 5, 7: invalid). */
static const struct { uint16_t span; uint8_t ok; const char *name; } swizzles[8] = {
  { 0, 1, "none" }, { 0, 0, "128B with 32-byte atomicity (not modelled)" }, { 128, 1, "128B" }, { 0, 0, "3 (invalid)" },
  { 64, 1, "64B" }, { 0, 0, "5 (invalid)" }, { 32, 1, "32B" }, { 0, 0, "7 (invalid)" },
};

/* Decode a tcgen05 shared-memory matrix descriptor (the ISA's layout:
 * version 0b001 in bits 46-48, relative LBO, a swizzle code) and check it
 * as wgmma's are checked; which names it in messages. */
static int tc_desc(emu_warp *w, const emu_inst *in, int lane, uint64_t v, const char *which, emu_mdesc *d)
{
  uint32_t version = (uint32_t)(v >> 46) & 7, code = (uint32_t)(v >> 61);
  if (version != 1)
    return lpx_emu_fail(w, in, lane, "the %s descriptor 0x%016llx has %u in bits 46-48; a tcgen05 matrix descriptor holds "
                        "0b001 there (a wgmma descriptor?)", which, (unsigned long long)v, version);
  if (v >> 52 & 1)
    return lpx_emu_fail(w, in, lane, "the %s descriptor sets bit 52 (absolute leading-dimension addressing); the emulator "
                        "models the relative mode only", which);
  if (!swizzles[code].ok)
    return lpx_emu_fail(w, in, lane, "the %s descriptor's swizzle (bits 61-63) is %s; the emulator runs none, 128B, 64B and "
                        "32B", which, swizzles[code].name);
  *d = lpx_emu_mdesc(v, swizzles[code].span);
  return lpx_emu_mdesc_check(w, in, lane, d, which);
}

/* The shared memory of CTA c as a lane of w names it for lpx_emu_mdesc_read (0: its own). */
static uint32_t cta_ref(emu_warp *w, const emu_cta *c) { return c == w->cta ? 0 : (uint32_t)c->rank + 1; }

/* ------------------------------------------------------------ mma: the form */

/* Per kind: matrix type of each idesc A/B code, of each D code, and K. */
typedef struct tc_kind { uint8_t ab[8], d[4], k; const char *name; } tc_kind;
static const tc_kind kinds[LPX_TCKIND__END] = {
  [LPX_TCKIND_KIND_F16] = { { LPX_MT_F16, LPX_MT_BF16 }, { LPX_MT_F16, LPX_MT_F32 }, 16, "f16" },
  [LPX_TCKIND_KIND_TF32] = { { [2] = LPX_MT_TF32 }, { [1] = LPX_MT_F32 }, 8, "tf32" },
  [LPX_TCKIND_KIND_F8F6F4] = { { LPX_MT_E4M3, LPX_MT_E5M2 }, { LPX_MT_F16, LPX_MT_F32 }, 32, "f8f6f4" },
  [LPX_TCKIND_KIND_I8] = { { LPX_MT_U8, LPX_MT_S8 }, { [2] = LPX_MT_S32 }, 32, "i8" },
};

/* Where row r, column j of this CTA's part of D lies (lane, column offset). */
typedef void (*tc_place)(uint32_t lane0, uint32_t n, uint32_t r, uint32_t j, uint32_t *lane, uint32_t *col);
static void place_rows(uint32_t lane0, uint32_t n, uint32_t r, uint32_t j, uint32_t *lane, uint32_t *col)
{
  *lane = lane0 + r; *col = j;
}
static void place_half(uint32_t lane0, uint32_t n, uint32_t r, uint32_t j, uint32_t *lane, uint32_t *col)
{
  *lane = lane0 + 32 * (r / 16) + r % 16; *col = j;
}
static void place_folded(uint32_t lane0, uint32_t n, uint32_t r, uint32_t j, uint32_t *lane, uint32_t *col)
{
  *lane = lane0 + r + 64 * (j / (n / 2)); *col = j % (n / 2);
}

/* The ISA's data-path layouts: M, CTAs, rows per CTA, columns of D (N
 * divisor), lane alignments allowed, N step, the placement, the name. */
typedef struct tc_layout { uint16_t m, ctas, rows, ndiv, lanes, nstep; tc_place place; const char *name; } tc_layout;
static const tc_layout layouts[] = {
  { 64, 1, 64, 1, 16, 8, place_half, "F" }, { 128, 1, 128, 1, 0, 16, place_rows, "D" },
  { 128, 2, 64, 2, 0, 16, place_folded, "B" }, { 256, 2, 128, 1, 0, 16, place_rows, "A" },
};

/* One thread's tcgen05.mma, decoded. */
typedef struct tc_mma {
  const tc_kind *kind;
  const tc_layout *lay;
  int at, bt, dt;                 /* matrix types */
  uint32_t m, n, k, d, a;         /* shape; TMEM addresses of D and (a_tmem) A */
  int ta, tb, sat, a_tmem, enable, scale;
  double sign;
  emu_mdesc da, db;
  uint32_t mask[8];
  emu_cta *cta[2];                /* the CTAs whose part it computes */
} tc_mma;

/* The matrix type an idesc A/B code names for the kind, or a failure. */
static int ab_type(emu_warp *w, const emu_inst *in, int lane, const tc_kind *k, uint32_t code, const char *which, int *t)
{
  *t = code < 8 ? k->ab[code] : 0;
  if (*t) return 0;
  if (k == &kinds[LPX_TCKIND_KIND_F8F6F4] && code >= 3 && code <= 5)
    return lpx_emu_fail(w, in, lane, "the instruction descriptor's %s type is %s; the emulator runs .kind::f8f6f4 with e4m3 "
                        "and e5m2 only", which, code == 3 ? "e2m3" : code == 4 ? "e3m2" : "e2m1");
  return lpx_emu_fail(w, in, lane, "the instruction descriptor's %s type code %u is not a type of .kind::%s", which, code, k->name);
}

/* Reserved and .ws-only idesc bits must be clear; sparsity belongs to .sp. */
static int idesc_bits(emu_warp *w, const emu_inst *in, int lane, uint32_t v, const tc_kind *k)
{
  if (v & (1u << 6 | 1u << 23 | 1u << 29))
    return lpx_emu_fail(w, in, lane, "instruction descriptor 0x%08x sets a reserved bit (6, 23 or 29)", v);
  if (v >> 30)
    return lpx_emu_fail(w, in, lane, "instruction descriptor 0x%08x sets the maximum shift (bits 30-31), which only "
                        "tcgen05.mma.ws takes", v);
  if (v & 4) return lpx_emu_fail(w, in, lane, "instruction descriptor 0x%08x says sparse A (bit 2), but this is the dense "
                                 "tcgen05.mma (the emulator does not run tcgen05.mma.sp yet)", v);
  if ((v & 8) && k != &kinds[LPX_TCKIND_KIND_I8])
    return lpx_emu_fail(w, in, lane, "instruction descriptor 0x%08x sets saturate (bit 3), which only .kind::i8 takes", v);
  if ((v >> 13 & 3) && k == &kinds[LPX_TCKIND_KIND_I8])
    return lpx_emu_fail(w, in, lane, "instruction descriptor 0x%08x negates A or B; .kind::i8 cannot negate", v);
  return 0;
}

/* The layout of (M, cta_group) and N's rule; a failure for any other. */
static int shape_of(emu_warp *w, const emu_inst *in, int lane, tc_mma *o, uint32_t ctas)
{
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
    if (layouts[i].m == o->m && layouts[i].ctas == ctas) o->lay = &layouts[i];
  if (!o->lay)
    return lpx_emu_fail(w, in, lane, "the instruction descriptor gives M = %u; .cta_group::%u takes M = %s", o->m, ctas,
                        ctas == 1 ? "64 or 128" : "128 or 256");
  uint32_t step = o->lay->nstep;
  if (o->n < step || o->n > 256 || o->n % step)
    return lpx_emu_fail(w, in, lane, "the instruction descriptor gives N = %u; M = %u with .cta_group::%u takes N from %u to 256 "
                        "in steps of %u", o->n, o->m, ctas, step, step);
  return 0;
}

/* Decode the instruction descriptor: types, shape, majors, negation, saturation. */
static int idesc_of(emu_warp *w, const emu_inst *in, int lane, uint32_t v, tc_mma *o)
{
  o->kind = &kinds[in->mod[LPX_GB_TCKIND]];
  if (idesc_bits(w, in, lane, v, o->kind) || ab_type(w, in, lane, o->kind, v >> 7 & 7, "A", &o->at) ||
      ab_type(w, in, lane, o->kind, v >> 10 & 7, "B", &o->bt)) return -1;
  o->dt = o->kind->d[v >> 4 & 3];
  if (!o->dt)
    return lpx_emu_fail(w, in, lane, "the instruction descriptor's D type code %u is not a D type of .kind::%s", v >> 4 & 3,
                        o->kind->name);
  if (o->kind == &kinds[LPX_TCKIND_KIND_F16] && o->at != o->bt)
    return lpx_emu_fail(w, in, lane, "the instruction descriptor mixes f16 and bf16 inputs; the emulator runs .kind::f16 with "
                        "one input type");
  o->ta = v >> 15 & 1; o->tb = v >> 16 & 1; o->sat = v >> 3 & 1;
  o->sign = ((v >> 13 & 1) ? -1.0 : 1.0) * ((v >> 14 & 1) ? -1.0 : 1.0);
  o->n = (v >> 17 & 0x3f) << 3; o->m = (v >> 24 & 0x1f) << 4; o->k = o->kind->k;
  if (o->at == LPX_MT_TF32 && (o->ta || o->tb))
    return lpx_emu_fail(w, in, lane, "a transposed (MN-major) tf32 operand needs the 128B swizzle with 32-byte atomicity, "
                        "which the emulator does not model");
  return shape_of(w, in, lane, o, in->ext[TM_X_CTAGRP] == 2 ? 2 : 1);
}

/* Read the operands of one thread's tcgen05.mma: [d], a-desc | [a-tmem],
 * b-desc, idesc, {disable-output-lane}, enable-input-d, scale-input-d. */
static int operands(emu_warp *w, const emu_inst *in, int lane, tc_mma *o)
{
  memset(o, 0, sizeof *o);
  o->d = (uint32_t)lpx_emu_tm_arg(w, in, 0, lane);
  o->a_tmem = EMU_OP(w, in, 1)->kind == EO_ADDR;
  if (idesc_of(w, in, lane, (uint32_t)lpx_emu_tm_arg(w, in, 3, lane), o)) return -1;
  if (o->a_tmem) o->a = (uint32_t)lpx_emu_tm_arg(w, in, 1, lane);
  else if (tc_desc(w, in, lane, lpx_emu_tm_arg(w, in, 1, lane), "A", &o->da)) return -1;
  if (tc_desc(w, in, lane, lpx_emu_tm_arg(w, in, 2, lane), "B", &o->db)) return -1;
  int k = 4;
  const emu_op *mk = EMU_OP(w, in, k);
  if (mk->kind == EO_VEC) {
    for (int i = 0; i < mk->reg && i < 8; i++) o->mask[i] = (uint32_t)EMU_R(w, mk[1 + i].reg)[lane];
    k += 1 + mk->reg;
  }
  o->enable = (int)(lpx_emu_tm_arg(w, in, k, lane) & 1);
  o->scale = k + 1 < in->nops ? (int)lpx_emu_tm_arg(w, in, k + 1, lane) : 0;
  for (int p = 0; p < o->lay->ctas; p++)
    if (!(o->cta[p] = o->lay->ctas == 2 ? lpx_emu_tm_peer(w, in, lane, p) : w->cta)) return -1;
  return 0;
}

/* ------------------------------------------------------------ mma: the checks */

/* Check the tensor memory of one CTA's part: D's lanes and columns
 * allocated, A's too when it comes from tensor memory, and no tcgen05.st
 * still landing in either. */
static int check_part(emu_warp *w, const emu_inst *in, int lane, const tc_mma *o, emu_cta *c)
{
  uint32_t dl = o->d >> 16, dc = o->d & 0xffff, ncol = o->n / o->lay->ndiv;
  if (dl != 0 && dl != o->lay->lanes)
    return lpx_emu_fail(w, in, lane, "D's tensor-memory address 0x%x starts at lane %u; the data-path layout %s (M = %u) "
                        "takes lane 0%s", o->d, dl, o->lay->name, o->m, o->lay->lanes ? " or 16" : "");
  if (lpx_emu_tm_cols(w, in, lane, c, dc, ncol, "tcgen05.mma writes D in") ||
      lpx_emu_tm_ready(w, in, lane, c, 0xf, dc, ncol, TM_CHECK_OWN_ST, "tcgen05.mma accumulates into") ||
      lpx_emu_tm_order(w, in, lane, c, 0xf, dc, ncol, 1, "tcgen05.mma writes")) return -1;
  if (!o->a_tmem) return 0;
  uint32_t acols = o->k * (uint32_t)lpx_mtype_bits(o->at) / 32;
  if (o->lay->ndiv != 1)
    return lpx_emu_fail(w, in, lane, "A from tensor memory with the data-path layout B (M = 128, .cta_group::2) is not "
                        "modelled: the ISA gives that layout as a figure only");
  if (o->a >> 16 != dl)
    return lpx_emu_fail(w, in, lane, "A's tensor-memory address 0x%x starts at lane %u and D's at lane %u; A and D must use "
                        "the same lane alignment", o->a, o->a >> 16, dl);
  return lpx_emu_tm_cols(w, in, lane, c, o->a & 0xffff, acols, "tcgen05.mma reads A in") ||
         lpx_emu_tm_ready(w, in, lane, c, 0xf, o->a & 0xffff, acols, TM_CHECK_OWN_ST, "tcgen05.mma reads A from") ||
         lpx_emu_tm_order(w, in, lane, c, 0xf, o->a & 0xffff, acols, 0, "tcgen05.mma reads A from") ? -1 : 0;
}

/* ------------------------------------------------------------ mma: the arithmetic */

/* Read this part's rows of A (rows x K): from shared memory, or from
 * tensor memory (row r in D's lane for row r, elements packed low first). */
static int read_a(emu_warp *w, const emu_inst *in, int lane, const tc_mma *o, emu_cta *c, double *a)
{
  uint32_t rows = o->lay->rows;
  if (!o->a_tmem) {
    emu_mdread r = { o->ta, o->at, o->k, 0, rows, cta_ref(w, c), "tcgen05.mma" };
    return lpx_emu_mdesc_read(w, in, lane, &o->da, &r, a);
  }
  uint32_t bits = (uint32_t)lpx_mtype_bits(o->at), per = 32 / bits;
  for (uint32_t i = 0; i < rows; i++) {
    uint32_t ln, col;
    o->lay->place(o->a >> 16, o->n, i, 0, &ln, &col);
    for (uint32_t kk = 0; kk < o->k; kk++) {
      uint32_t word = TM_CELL(c->tm, ln, (o->a & 0xffff) + kk / per), sh = (kk % per) * bits;
      a[i * o->k + kk] = lpx_emu_mtype_value(o->at, bits == 32 ? word : (word >> sh) & ((1u << bits) - 1));
    }
  }
  return 0;
}

/* Read all of B (N x K): with two CTAs, N/2 columns from each one's shared memory. */
static int read_b(emu_warp *w, const emu_inst *in, int lane, const tc_mma *o, double *b)
{
  uint32_t parts = o->lay->ctas, n = o->n / parts;
  for (uint32_t p = 0; p < parts; p++) {
    emu_mdread r = { o->tb, o->bt, o->k, 0, n, cta_ref(w, o->cta[p]), "tcgen05.mma" };
    if (lpx_emu_mdesc_read(w, in, lane, &o->db, &r, b + (size_t)p * n * o->k)) return -1;
  }
  return 0;
}

/* A D cell as a number: f32, f16 in the low half (D is never packed), s32. */
static double d_get(int dt, uint32_t x)
{
  if (dt == LPX_MT_F32) return emu_u2f(x);
  if (dt == LPX_MT_F16) return lpx_emu_f16_to_f32((uint16_t)x);
  return (double)(int32_t)x;
}

/* x as a D cell: rounded once to f32 or f16 (nearest even), or an s32 that wraps (clamps with saturate). */
static uint32_t d_put(int dt, double x, int sat)
{
  if (dt == LPX_MT_F32) return emu_f2u((float)x);
  if (dt == LPX_MT_F16) return lpx_emu_f64_to_half(x, 0, LPX_RND_RN);
  if (sat) x = x > 2147483647.0 ? 2147483647.0 : x < -2147483648.0 ? -2147483648.0 : x;
  return (uint32_t)(int64_t)x;
}

/* D (+)= A * B for one CTA's part: rows of a (rows x K) against b (N x K);
 * lanes whose disable-output-lane bit is set keep their cells. */
static void accumulate(const tc_mma *o, emu_cta *c, uint32_t part, const double *a, const double *b)
{
  uint32_t lane0 = o->d >> 16, col0 = o->d & 0xffff;
  double keep = ldexp(1.0, -o->scale);
  for (uint32_t i = 0; i < o->lay->rows; i++)
    for (uint32_t j = 0; j < o->n; j++) {
      uint32_t ln, col;
      o->lay->place(lane0, o->n, i, j, &ln, &col);
      uint32_t bit = part * TM_LANES + ln;
      if (o->mask[bit / 32] >> (bit % 32) & 1) continue;
      double s = 0;
      for (uint32_t kk = 0; kk < o->k; kk++) s += a[i * o->k + kk] * b[j * o->k + kk];
      uint32_t *cell = &TM_CELL(c->tm, ln, col0 + col);
      double old = o->enable ? d_get(o->dt, *cell) * keep : 0.0;
      *cell = d_put(o->dt, old + o->sign * s, o->sat);
    }
}

/* One thread's tcgen05.mma: check, compute each CTA's part, tag D as in flight. */
static int mma_one(emu_warp *w, const emu_inst *in, int lane)
{
  tc_mma o;
  if (lpx_emu_tm_fenced(w, in, lane, "tcgen05.mma") || operands(w, in, lane, &o)) return -1;
  lpx_emu_prof_add(w, EMU_PC_FLOPS, 2ull * o.m * o.n * o.k);
  if (o.at == LPX_MT_E4M3 || o.at == LPX_MT_E5M2) lpx_emu_prof_add(w, EMU_PC_FLOPS_FP8, 2ull * o.m * o.n * o.k);
  for (int p = 0; p < o.lay->ctas; p++) if (check_part(w, in, lane, &o, o.cta[p])) return -1;
  double *b = malloc(sizeof(double) * o.k * (o.n + o.lay->rows)), *a = b + (size_t)o.n * o.k;
  if (!b) return lpx_emu_fail(w, in, lane, "out of host memory");
  int rc = read_b(w, in, lane, &o, b);
  for (int p = 0; !rc && p < o.lay->ctas; p++) {
    rc = read_a(w, in, lane, &o, o.cta[p], a);
    if (!rc) accumulate(&o, o.cta[p], (uint32_t)p, a, b);
  }
  free(b);
  int32_t g = rc ? -1 : lpx_emu_tm_open(w, in, lane);
  if (g < 0) return -1;
  for (int p = 0; p < o.lay->ctas; p++) {
    lpx_emu_tm_tag(o.cta[p], 0xf, o.d & 0xffff, o.n / o.lay->ndiv, TM_TAG_ASYNC | (uint32_t)g);
    lpx_emu_tm_note(w, in, o.cta[p], 0xf, o.d & 0xffff, o.n / o.lay->ndiv, TM_NOTE_ASYNC);
  }
  return 0;
}

/* tcgen05.mma: every executing thread issues its own. */
HANDLER(op_mma)
{
  EMU_EACH(m, if (mma_one(w, in, l)) return -1);
  return 0;
}

/* ------------------------------------------------------------ cp, shift */

/* Where shared row r goes (lanes relative to taddr's), per shape and warp
 * multicast: the ISA's table (replicas 64 or 32 lanes apart). */
typedef struct tc_cp { uint8_t shape, warpx, rows, bytes, copies, apart, fold; } tc_cp;
static const tc_cp cps[] = {
  { LPX_TCCP_128X256B, 0, 128, 32, 1, 0, 0 }, { LPX_TCCP_128X128B, 0, 128, 16, 1, 0, 0 },
  { LPX_TCCP_4X256B, 0, 4, 32, 1, 0, 0 },
  { LPX_TCCP_64X128B, LPX_WARPX_WARPX2_02_13, 64, 16, 2, 64, 0 },
  { LPX_TCCP_64X128B, LPX_WARPX_WARPX2_01_23, 64, 16, 2, 32, 1 },
  { LPX_TCCP_32X128B, LPX_WARPX_WARPX4, 32, 16, 4, 32, 0 },
};

/* Lane (relative) of copy i of row r. */
static uint32_t cp_lane(const tc_cp *s, uint32_t r, uint32_t i)
{
  if (s->shape == LPX_TCCP_4X256B) return 32 * r;
  uint32_t base = s->fold ? 64 * (r / 32) + r % 32 : r;
  return base + i * s->apart;
}

/* The quadrants of tensor memory a copy touches. */
static uint32_t cp_quads(const tc_cp *s, uint32_t lane0)
{
  uint32_t q = 0;
  for (uint32_t r = 0; r < s->rows; r++)
    for (uint32_t i = 0; i < s->copies; i++) q |= 1u << ((lane0 + cp_lane(s, r, i)) / 32 % 4);
  return q;
}

/* Copy one CTA's rows into its tensor memory. */
static int cp_part(emu_warp *w, const emu_inst *in, int lane, const tc_cp *s, emu_cta *c, const emu_mdesc *d, uint32_t taddr)
{
  uint32_t lane0 = taddr >> 16, col0 = taddr & 0xffff;
  for (uint32_t r = 0; r < s->rows; r++)
    for (uint32_t cb = 0; cb < s->bytes; cb += 16) {
      emu_mdread rd = { 0, LPX_MT_U8, 0, 0, 0, cta_ref(w, c), "tcgen05.cp" };
      const uint8_t *p = lpx_emu_mdesc_bytes(w, in, lane, &rd, lpx_emu_mdesc_chunk(d, 0, r, cb));
      if (!p) return -1;
      for (uint32_t i = 0; i < s->copies; i++) memcpy(&TM_CELL(c->tm, lane0 + cp_lane(s, r, i), col0 + cb / 4), p, 16);
    }
  return 0;
}

/* One thread's tcgen05.cp [taddr], s-desc. */
static int cp_one(emu_warp *w, const emu_inst *in, int lane, const tc_cp *s)
{
  uint32_t taddr = (uint32_t)lpx_emu_tm_arg(w, in, 0, lane), lane0 = taddr >> 16, col0 = taddr & 0xffff, cols = s->bytes / 4u;
  uint32_t span = cp_lane(s, s->rows - 1, s->copies - 1) + 1;
  emu_mdesc d;
  if (lpx_emu_tm_fenced(w, in, lane, "tcgen05.cp") || tc_desc(w, in, lane, lpx_emu_tm_arg(w, in, 1, lane), "source", &d))
    return -1;
  if (lane0 + span > TM_LANES)
    return lpx_emu_fail(w, in, lane, "tcgen05.cp at tensor-memory address 0x%x covers lanes %u..%u, beyond lane 127", taddr,
                        lane0, lane0 + span - 1);
  int ctas = in->ext[TM_X_CTAGRP] == 2 ? 2 : 1;
  int32_t g = -1;
  for (int p = 0; p < ctas; p++) {
    emu_cta *c = ctas == 2 ? lpx_emu_tm_peer(w, in, lane, p) : w->cta;
    if (!c || lpx_emu_tm_cols(w, in, lane, c, col0, cols, "tcgen05.cp writes") ||
        lpx_emu_tm_ready(w, in, lane, c, cp_quads(s, lane0), col0, cols, TM_CHECK_OWN_ST, "tcgen05.cp writes") ||
        lpx_emu_tm_order(w, in, lane, c, cp_quads(s, lane0), col0, cols, 1, "tcgen05.cp writes") ||
        cp_part(w, in, lane, s, c, &d, taddr) || (g < 0 && (g = lpx_emu_tm_open(w, in, lane)) < 0)) return -1;
    lpx_emu_tm_tag(c, cp_quads(s, lane0), col0, cols, TM_TAG_ASYNC | (uint32_t)g);
    lpx_emu_tm_note(w, in, c, cp_quads(s, lane0), col0, cols, TM_NOTE_ASYNC);
  }
  return 0;
}

/* The row of cps for an instruction's shape and multicast, or NULL. */
static const tc_cp *cp_shape(const emu_inst *in)
{
  for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++)
    if (cps[i].shape == in->mod[LPX_GB_TCCP] && cps[i].warpx == in->mod[LPX_GB_WARPX]) return &cps[i];
  return NULL;
}

/* tcgen05.cp: every executing thread issues its own copy. */
HANDLER(op_cp)
{
  const tc_cp *s = cp_shape(in);
  EMU_EACH(m, if (cp_one(w, in, l, s)) return -1);
  return 0;
}

/* One thread's tcgen05.shift.down [taddr]: in each CTA, the 32 lanes from
 * taddr's (a multiple of 32) move their 8 columns (32 bytes) down one
 * lane; the last lane's row is dropped, the first keeps its own. */
static int shift_one(emu_warp *w, const emu_inst *in, int lane)
{
  uint32_t taddr = (uint32_t)lpx_emu_tm_arg(w, in, 0, lane), lane0 = taddr >> 16, col0 = taddr & 0xffff;
  if (lane0 % 32 || lane0 >= TM_LANES)
    return lpx_emu_fail(w, in, lane, "tcgen05.shift at tensor-memory address 0x%x: the lane (%u) must be a multiple of 32 "
                        "below 128", taddr, lane0);
  int ctas = in->ext[TM_X_CTAGRP] == 2 ? 2 : 1;
  int32_t g = -1;
  for (int p = 0; p < ctas; p++) {
    emu_cta *c = ctas == 2 ? lpx_emu_tm_peer(w, in, lane, p) : w->cta;
    if (!c || lpx_emu_tm_cols(w, in, lane, c, col0, 8, "tcgen05.shift moves") ||
        lpx_emu_tm_ready(w, in, lane, c, 1u << (lane0 / 32), col0, 8, TM_CHECK_OWN_ST, "tcgen05.shift moves") ||
        lpx_emu_tm_order(w, in, lane, c, 1u << (lane0 / 32), col0, 8, 1, "tcgen05.shift moves") ||
        (g < 0 && (g = lpx_emu_tm_open(w, in, lane)) < 0)) return -1;
    for (uint32_t r = 31; r > 0; r--) memcpy(&TM_CELL(c->tm, lane0 + r, col0), &TM_CELL(c->tm, lane0 + r - 1, col0), 32);
    lpx_emu_tm_tag(c, 1u << (lane0 / 32), col0, 8, TM_TAG_ASYNC | (uint32_t)g);
    lpx_emu_tm_note(w, in, c, 1u << (lane0 / 32), col0, 8, TM_NOTE_ASYNC);
  }
  return 0;
}

/* tcgen05.shift: every executing thread issues its own. */
HANDLER(op_shift)
{
  EMU_EACH(m, if (shift_one(w, in, l)) return -1);
  return 0;
}

/* ------------------------------------------------------------ commit */

/* Arrive once on the mbarrier at host pointer p for commit t. */
static int commit_to(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, tm_commit *t)
{
  emu_cta *c = lpx_emu_mbar_owner(w, p);
  int phase;
  w->cta->tm->bfence[w->id] = lpx_emu_tm_tick(w->cta);     /* a commit fences before_thread_sync implicitly */
  if (lpx_emu_mbar_arrive_one(w, in, lane, p, c, &phase)) return -1;
  if (lpx_emu_tmem_publish(w, p)) return lpx_emu_fail(w, in, lane, "out of host memory");
  t->armed |= (uint16_t)(1u << c->rank);
  t->parity[c->rank] = (uint8_t)phase;
  t->mbar_off = (uint32_t)(p - c->shared);
  return 0;
}

/* A new commit record of the lane's thread, tracking every group issued so far; NULL out of memory. */
static tm_commit *commit_new(emu_warp *w, const emu_inst *in, int lane)
{
  emu_tmem *s = w->cta->group[0].tm;
  size_t cap = (size_t)s->ccap;
  if (LPX_RESERVE(s->commits, cap, (size_t)s->ncommits + 1)) { lpx_emu_fail(w, in, lane, "out of host memory"); return NULL; }
  s->ccap = (int)cap;
  tm_commit *t = &s->commits[s->ncommits++];
  memset(t, 0, sizeof *t);
  t->inst = (int32_t)(in - w->p->insts); t->upto = s->ngroups;
  t->warp = (uint16_t)w->id; t->lane = (uint8_t)lane; t->cta = (uint8_t)w->cta->rank;
  return t;
}

/* The CTA-relative shared offset an mbarrier operand names (generic or shared::cluster). */
static uint64_t mbar_offset(emu_warp *w, const emu_inst *in, int lane)
{
  uint64_t a = lpx_emu_tm_arg(w, in, 0, lane);
  if (a - EMU_SHARED_WINDOW < EMU_WINDOW_SIZE) a -= EMU_SHARED_WINDOW;
  return a & 0xffffff;
}

/* One thread's tcgen05.commit: the mbarrier (or, multicast, the one at the
 * same offset in every CTA of ctaMask) gets one arrive, and every group
 * the thread issued becomes trackable through that phase. */
static int commit_one(emu_warp *w, const emu_inst *in, int lane)
{
  int32_t g = find_open(w, lane);
  tm_commit *t = commit_new(w, in, lane);
  if (!t) return -1;
  if (!in->ext[TM_X_MCAST]) {
    const emu_op *ao = EMU_OP(w, in, 0);
    int sp = lpx_emu_space(in);
    if (ao->reg < 0 && ao->space != EMU_SP_GENERIC) sp = ao->space;
    else if (sp == EMU_SP_GENERIC && in->mod[LPX_GB_SHARED]) sp = EMU_SP_SHARED;
    uint8_t *p = lpx_emu_addr(w, in, lane, sp, lpx_emu_tm_arg(w, in, 0, lane), 8, 2);
    if (!p || commit_to(w, in, lane, p, t)) return -1;
  } else {
    uint32_t mask = (uint32_t)lpx_emu_tm_arg(w, in, 1, lane) & 0xffff;
    uint64_t off = mbar_offset(w, in, lane);
    for (int r = 0; r < 16; r++) {
      if (!(mask >> r & 1)) continue;
      uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, ((uint64_t)(r + 1) << 24) | off, 8, 2);
      if (!p || commit_to(w, in, lane, p, t)) return -1;
    }
  }
  if (g >= 0) {
    tm_group *gr = lpx_emu_tm_group(w->cta, g);
    gr->commit = t->inst;
    gr->ctick = lpx_emu_tm_tick(w->cta);
  }
  return 0;
}

/* tcgen05.commit: every executing thread commits its own operations. */
HANDLER(op_commit)
{
  EMU_EACH(m, if (commit_one(w, in, l)) return -1);
  return 0;
}

/* Handlers of mma, cp, shift and commit by ISA row. */
static const emu_fn async_handlers[LPX_OP__COUNT] = {
  [LPX_OP_TCMMA] = op_mma, [LPX_OP_TCCP] = op_cp, [LPX_OP_TCSHIFT] = op_shift, [LPX_OP_TCCOMMIT] = op_commit,
};

/* Handler of mma, cp, shift and commit (NULL, reported as not
 * implemented: tcgen05.mma.sp, decompressing tcgen05.cp). */
emu_fn lpx_emu_pick_tc_async(const emu_inst *in)
{
  if (in->op == LPX_OP_TCMMA && (in->ext[TM_X_SP] || !in->mod[LPX_GB_TCKIND])) return NULL;
  if (in->op == LPX_OP_TCCP && (in->mod[LPX_GB_B8X16] || in->mod[LPX_GB_SRCFMT] || !cp_shape(in))) return NULL;
  return in->op >= 0 && in->op < LPX_OP__COUNT ? async_handlers[in->op] : NULL;
}
