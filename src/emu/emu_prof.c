/* Performance counters of the emulator (luaptx profile): what the profiled
 * warp loop counts before and after each instruction (issue, divergence,
 * global sectors, shared wavefronts and bank conflicts, barrier and
 * mbarrier waits, tensor-core FLOPs, atomics), and the rows the device
 * interface hands out. The plain warp loop never calls into this file. */
#include "emu_prof.h"
#include "../lpx_profile.h"
#include <stdlib.h>
#include <stdio.h>

/* What kind of work an instruction is, decided once per program. */
enum { PK_NONE, PK_LD, PK_ST, PK_ATOM, PK_LDMATRIX, PK_STMATRIX, PK_CPASYNC, PK_BRA, PK_BAR, PK_MBAR_WAIT,
       PK_MMA, PK_WGMMA, PK_TCMMA, PK_FP32_1, PK_FP32_2, PK__COUNT };

static const char *const counter_names[] = {
#define X(e, name, help) name,
  EMU_PROF_COUNTERS(X)
#undef X
};
static const char *const counter_help[] = {
#define X(e, name, help) help,
  EMU_PROF_COUNTERS(X)
#undef X
};

/* ------------------------------------------------------------- setup */

/* The kind of instruction in of program p, from its ISA row and form. */
static uint8_t kind_of(const emu_inst *in)
{
  static const uint8_t by_op[LPX_OP__COUNT] = {
    [LPX_OP_LD] = PK_LD, [LPX_OP_LDU] = PK_LD, [LPX_OP_ST] = PK_ST, [LPX_OP_ATOM] = PK_ATOM, [LPX_OP_RED] = PK_ATOM,
    [LPX_OP_LDMATRIX] = PK_LDMATRIX, [LPX_OP_STMATRIX] = PK_STMATRIX, [LPX_OP_CPASYNC] = PK_CPASYNC,
    [LPX_OP_BRA] = PK_BRA, [LPX_OP_BAR] = PK_BAR, [LPX_OP_BARRIER] = PK_BAR, [LPX_OP_MMA] = PK_MMA,
    [LPX_OP_WGMMA] = PK_WGMMA, [LPX_OP_TCMMA] = PK_TCMMA,
  };
  static const uint8_t fp32[LPX_OP__COUNT] = {
    [LPX_OP_ADD] = PK_FP32_1, [LPX_OP_SUB] = PK_FP32_1, [LPX_OP_MUL] = PK_FP32_1, [LPX_OP_MIN] = PK_FP32_1,
    [LPX_OP_MAX] = PK_FP32_1, [LPX_OP_FMA] = PK_FP32_2, [LPX_OP_MAD] = PK_FP32_2,
  };
  if (in->type == LPX_T_F32 && in->op >= 0 && in->op < LPX_OP__COUNT && fp32[in->op]) return fp32[in->op];
  if (in->op == LPX_OP_MBARRIER)
    return in->mod[LPX_GB_MBAR] == LPX_MBAR_TEST_WAIT || in->mod[LPX_GB_MBAR] == LPX_MBAR_TRY_WAIT ? PK_MBAR_WAIT : PK_NONE;
  return in->op >= 0 && in->op < LPX_OP__COUNT ? by_op[in->op] : PK_NONE;
}

/* FLOPs of one warp's matrix instruction from its form: 2*M*N*K for
 * mma.sync, a quarter of the warpgroup's for each warp of a wgmma. */
static uint64_t flops_of(const emu_prog *p, const emu_inst *in, uint8_t kind)
{
  if ((kind != PK_MMA && kind != PK_WGMMA) || in->item < 0) return 0;
  const lpx_form_info *fi = &p->m->ctx->forms[p->f->items[in->item].form].info;
  uint64_t f = 2ull * (uint64_t)fi->shape_m * (uint64_t)fi->shape_n * (uint64_t)fi->shape_k;
  f = kind == PK_WGMMA ? f / 4 : f;
  int fp8 = fi->atype == LPX_MT_E4M3 || fi->atype == LPX_MT_E5M2;
  return f << 1 | (uint64_t)fp8;      /* the low bit: fp8 inputs */
}

/* Give program p its counter rows (zeroed) and instruction kinds. */
static int prog_prepare(emu_prog *p)
{
  if (p->prof) return 0;
  p->prof = calloc(p->ninsts * EMU_PC__COUNT + 1, sizeof *p->prof);
  p->prof_kind = calloc(p->ninsts + 1, 1);
  p->prof_flops = calloc(p->ninsts + 1, sizeof *p->prof_flops);
  if (!p->prof || !p->prof_kind || !p->prof_flops) return -1;
  for (size_t i = 0; i < p->ninsts; i++) {
    p->prof_kind[i] = kind_of(&p->insts[i]);
    p->prof_flops[i] = flops_of(p, &p->insts[i], p->prof_kind[i]);
  }
  return 0;
}

/* Before a profiled launch: counter rows for every loaded program. */
int lpx_emu_prof_prepare(emu_dev *e)
{
  for (size_t i = 0; i < e->nprogs; i++)
    if (prog_prepare(e->progs[i])) return lpx_fail(e->d->ctx, "profile: out of memory for the counters");
  return 0;
}

/* Count a profiled launch of entry p and keep its shape. */
void lpx_emu_prof_launch(emu_prog *p, const lpx_launch_cfg *cfg)
{
  p->prof_launches++;
  memcpy(p->prof_grid, cfg->grid, sizeof p->prof_grid);
  memcpy(p->prof_block, cfg->block, sizeof p->prof_block);
  p->prof_dsmem = cfg->dynamic_smem;
}

/* ------------------------------------------------------------ memory */

/* The lanes' accesses of one instruction, sorted into spaces. */
typedef struct acc {
  uint64_t ga[32]; int ng;        /* global addresses */
  uint64_t sa[32]; int ns;        /* shared offsets (or shared-window addresses) */
  int nl;                         /* local lanes */
} acc;

/* Sort lane l's address a of space sp (generic: by its window) into x. */
static void acc_add(acc *x, int sp, uint64_t a)
{
  if (sp == EMU_SP_GENERIC) {
    if (a - EMU_SHARED_WINDOW < EMU_WINDOW_SIZE) sp = EMU_SP_SHARED;
    else if (a - EMU_LOCAL_WINDOW < EMU_WINDOW_SIZE) sp = EMU_SP_LOCAL;
    else sp = EMU_SP_GLOBAL;
  }
  if (sp == EMU_SP_GLOBAL) x->ga[x->ng++] = a;
  else if (sp == EMU_SP_SHARED) x->sa[x->ns++] = a;
  else if (sp == EMU_SP_LOCAL) x->nl++;
}

/* Collect the addresses operand ao names for the lanes of m. */
static void acc_collect(emu_warp *w, const emu_op *ao, int sp, uint32_t m, acc *x)
{
  x->ng = x->ns = x->nl = 0;
  if (sp == EMU_SP_GENERIC && ao->reg < 0 && ao->space == EMU_SP_SHARED) sp = EMU_SP_SHARED;
  if (sp == EMU_SP_GENERIC && ao->reg < 0 && ao->space == EMU_SP_GLOBAL) sp = EMU_SP_GLOBAL;
  if (sp == EMU_SP_PARAM || sp == EMU_SP_CONST || sp == EMU_SP_FRAME || ao->space == EMU_SP_FRAME) return;
  const uint64_t *r = ao->reg >= 0 ? EMU_R(w, ao->reg) : NULL;
  EMU_EACH(m, acc_add(x, sp, (r ? r[l] : 0) + (uint64_t)ao->off));
}

/* Compare two addresses (qsort). */
static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct 32-byte sectors n accesses of size bytes at a[] touch. */
static uint64_t sectors(const uint64_t *a, int n, uint32_t size)
{
  uint64_t s[64];
  int k = 0;
  for (int i = 0; i < n; i++) {
    uint64_t lo = a[i] >> 5, hi = (a[i] + (size ? size : 1) - 1) >> 5;
    s[k++] = lo;
    if (hi != lo) s[k++] = hi;          /* an access never spans more than two sectors (at most 16 bytes) */
  }
  qsort(s, (size_t)k, sizeof s[0], cmp_u64);
  uint64_t d = 0;
  for (int i = 0; i < k; i++) d += i == 0 || s[i] != s[i - 1];
  return d;
}

/* Wavefronts of one phase: the most distinct 4-byte words any of the 32
 * banks must deliver (the same word to many lanes is one broadcast). */
static uint32_t phase_wavefronts(const uint64_t *a, int n, uint32_t size)
{
  uint64_t words[32][32];
  uint32_t cnt[32] = { 0 }, worst = 0;
  uint32_t nw = size >= 4 ? size / 4 : 1;
  for (int i = 0; i < n; i++)
    for (uint32_t k = 0; k < nw; k++) {
      uint64_t wd = (a[i] >> 2) + k;
      uint32_t b = (uint32_t)(wd & 31), j = 0;
      while (j < cnt[b] && words[b][j] != wd) j++;
      if (j == cnt[b] && cnt[b] < 32) words[b][cnt[b]++] = wd;
      if (cnt[b] > worst) worst = cnt[b];
    }
  return worst;
}

/* Shared wavefronts of accesses of size bytes: the warp is served in
 * phases of 128 bytes (32 lanes of 4 bytes, 16 of 8, 8 of 16), the
 * addresses grouped in lane order as the hardware splits the warp. */
static void shared_count(emu_warp *w, const uint64_t *a, int n, uint32_t size, uint32_t per_phase)
{
  uint64_t *row = w->prow;
  uint32_t waves = 0, ideal = 0;
  for (int i = 0; i < n; i += (int)per_phase) {
    int k = n - i < (int)per_phase ? n - i : (int)per_phase;
    uint32_t f = phase_wavefronts(a + i, k, size);
    waves += f; ideal++;
    if (f > row[EMU_PC_SH_MAX_WAYS]) row[EMU_PC_SH_MAX_WAYS] = f;
  }
  row[EMU_PC_SH_REQ]++;
  row[EMU_PC_SH_WAVEFRONTS] += waves;
  row[EMU_PC_SH_IDEAL] += ideal;
  row[EMU_PC_SH_BYTES] += (uint64_t)n * size;
}

/* The first address operand of an instruction at or after operand k, or NULL. */
static const emu_op *addr_op(emu_warp *w, const emu_inst *in, int k)
{
  for (; k < in->nops; k++)
    if (EMU_OP(w, in, k)->kind == EO_ADDR) return EMU_OP(w, in, k);
  return NULL;
}

/* Lanes per phase of a shared access of size bytes. */
static uint32_t lanes_per_phase(uint32_t size) { return size >= 16 ? 8 : size == 8 ? 16 : 32; }

/* ld / st / atom / red: global sectors, shared wavefronts, local bytes, atomics. */
static void count_ldst(emu_warp *w, const emu_inst *in, uint32_t m, int kind)
{
  const emu_op *ao = addr_op(w, in, 0);
  if (!ao || !m) return;
  acc x;
  acc_collect(w, ao, lpx_emu_space(in), m, &x);
  uint32_t size = (uint32_t)(lpx_types[in->type].bits + 7) / 8 * (in->vec ? in->vec : 1);
  uint64_t *row = w->prow;
  row[EMU_PC_LOCAL_BYTES] += (uint64_t)x.nl * size;
  if (kind == PK_ATOM) { row[EMU_PC_ATOM_GLOBAL] += (uint64_t)x.ng; row[EMU_PC_ATOM_SHARED] += (uint64_t)x.ns; return; }
  if (x.ng) {
    int st = kind == PK_ST;
    row[st ? EMU_PC_GST_REQ : EMU_PC_GLD_REQ]++;
    row[st ? EMU_PC_GST_SECTORS : EMU_PC_GLD_SECTORS] += sectors(x.ga, x.ng, size);
    row[st ? EMU_PC_GST_BYTES : EMU_PC_GLD_BYTES] += (uint64_t)x.ng * size;
  }
  if (x.ns) shared_count(w, x.sa, x.ns, size, lanes_per_phase(size));
}

/* ldmatrix / stmatrix: each 8x8 matrix is one phase of eight 16-byte rows
 * (lanes 8i..8i+7 give matrix i's row addresses). */
static void count_matrix(emu_warp *w, const emu_inst *in, int kind)
{
  int num = in->ext[0];
  const emu_op *ao = EMU_OP(w, in, kind == PK_LDMATRIX ? 1 + num : 0);
  if (num < 1 || num > 4 || ao->kind != EO_ADDR) return;
  uint64_t a[32];
  const uint64_t *r = ao->reg >= 0 ? EMU_R(w, ao->reg) : NULL;
  for (int l = 0; l < 8 * num; l++) a[l] = (r ? r[l] : 0) + (uint64_t)ao->off;
  shared_count(w, a, 8 * num, 16, 8);
}

/* cp.async [shared], [global], size: a global read and a shared write per lane. */
static void count_cpasync(emu_warp *w, const emu_inst *in, uint32_t m)
{
  const emu_op *dop = EMU_OP(w, in, 0), *sop = EMU_OP(w, in, 1), *zop = EMU_OP(w, in, 2);
  if (!m || dop->kind != EO_ADDR || sop->kind != EO_ADDR || zop->kind != EO_REG) return;
  uint32_t size = (uint32_t)EMU_R(w, zop->reg)[__builtin_ctz(m)];
  if (size != 4 && size != 8 && size != 16) return;
  acc x;
  acc_collect(w, sop, EMU_SP_GLOBAL, m, &x);
  uint64_t *row = w->prow;
  row[EMU_PC_GLD_REQ]++;
  row[EMU_PC_GLD_SECTORS] += sectors(x.ga, x.ng, size);
  row[EMU_PC_GLD_BYTES] += (uint64_t)x.ng * size;
  acc_collect(w, dop, EMU_SP_SHARED, m, &x);
  if (x.ns) shared_count(w, x.sa, x.ns, size, lanes_per_phase(size));
}

/* ------------------------------------------------------------ the hooks */

/* ld / st / atom / red. */
static void pre_ldst(emu_warp *w, const emu_inst *in, uint32_t m, int kind) { count_ldst(w, in, m, kind); }

/* ldmatrix / stmatrix. */
static void pre_matrix(emu_warp *w, const emu_inst *in, uint32_t m, int kind) { if (m) count_matrix(w, in, kind); }

/* cp.async. */
static void pre_cpasync(emu_warp *w, const emu_inst *in, uint32_t m, int kind) { (void)kind; count_cpasync(w, in, m); }

/* bra: does the guard split the running group? */
static void pre_bra(emu_warp *w, const emu_inst *in, uint32_t m, int kind)
{
  (void)in; (void)kind;
  w->prow[EMU_PC_DIV_BRANCHES] += m && m != w->cur;
}

/* mma.sync / wgmma: one tensor-core operation and its FLOPs (from the form). */
static void pre_mma(emu_warp *w, const emu_inst *in, uint32_t m, int kind)
{
  (void)kind;
  uint64_t f = w->p->prof_flops[in - w->p->insts];
  if (!m) return;
  w->prow[EMU_PC_TC_OPS]++;
  w->prow[EMU_PC_FLOPS] += f >> 1;
  if (f & 1) w->prow[EMU_PC_FLOPS_FP8] += f >> 1;
}

/* tcgen05.mma: the operation (its FLOPs come from the descriptor, in the handler). */
static void pre_tcmma(emu_warp *w, const emu_inst *in, uint32_t m, int kind)
{
  (void)in; (void)kind;
  if (m) w->prow[EMU_PC_TC_OPS]++;
}

/* f32 add/sub/mul/min/max (1 per lane) and fma/mad (2). */
static void pre_fp32(emu_warp *w, const emu_inst *in, uint32_t m, int kind)
{
  (void)in;
  w->prow[EMU_PC_FP32_FLOPS] += (uint64_t)__builtin_popcount(m) * (uint64_t)(kind - PK_FP32_1 + 1);
}

typedef void (*pre_fn)(emu_warp *w, const emu_inst *in, uint32_t m, int kind);

/* What to count before an instruction, by its kind (NULL: issue only). */
static const pre_fn pre_by_kind[] = {
  [PK_LD] = pre_ldst, [PK_ST] = pre_ldst, [PK_ATOM] = pre_ldst, [PK_LDMATRIX] = pre_matrix, [PK_STMATRIX] = pre_matrix,
  [PK_CPASYNC] = pre_cpasync, [PK_BRA] = pre_bra, [PK_MMA] = pre_mma, [PK_WGMMA] = pre_mma, [PK_TCMMA] = pre_tcmma,
  [PK_FP32_1] = pre_fp32, [PK_FP32_2] = pre_fp32, [PK__COUNT] = NULL,
};

/* Count what instruction in does for the lanes of m, before it runs
 * (addresses are read before a load can overwrite its base register). */
void lpx_emu_prof_before(emu_warp *w, const emu_inst *in, uint32_t m, emu_prof_snap *s)
{
  const emu_prog *p = w->p;
  size_t pc = (size_t)(in - p->insts);
  uint64_t *row = w->prow = p->prof + pc * EMU_PC__COUNT;
  int kind = p->prof_kind[pc];
  row[EMU_PC_WARPS]++;
  row[EMU_PC_LANES] += (uint64_t)__builtin_popcount(m);
  s->blocked = w->blocked; s->fails = w->mbar_wait_fails; s->gen = w->mbar_wait_gen;
  if (pre_by_kind[kind]) pre_by_kind[kind](w, in, m, kind);
}

/* Count what instruction in did: barrier arrivals that blocked, mbarrier waits that failed. */
void lpx_emu_prof_after(emu_warp *w, const emu_inst *in, uint32_t m, const emu_prof_snap *s)
{
  const emu_prog *p = w->p;
  uint64_t *row = w->prow;
  int kind = p->prof_kind[in - p->insts];
  if (kind == PK_BAR && m) {
    row[EMU_PC_BAR_ARRIVALS]++;
    row[EMU_PC_BAR_WAITS] += (w->blocked & ~s->blocked & m) != 0;
  } else if (kind == PK_MBAR_WAIT && m) {
    row[EMU_PC_MBAR_TRIES]++;
    row[EMU_PC_MBAR_FAILS] += w->mbar_wait_fails != s->fails || w->mbar_wait_gen != s->gen;
  }
  w->prow = NULL;
}

/* ----------------------------------------------------- device interface */

/* The emulator behind d, or NULL with the error set. */
static emu_dev *emu_of(lpx_device *d)
{
  if (!strcmp(d->vt->kind, "emu")) return d->impl;
  lpx_fail(d->ctx, "profile: the counters come from the emulator; this device is %s (open the emu device)", d->vt->kind);
  return NULL;
}

/* The number of counters in a row. */
int32_t lpx_prof_ncounters(void) { return EMU_PC__COUNT; }

/* Counter i's name, or NULL. */
const char *lpx_prof_counter_name(int32_t i) { return i >= 0 && i < EMU_PC__COUNT ? counter_names[i] : NULL; }

/* What counter i counts, or NULL. */
const char *lpx_prof_counter_help(int32_t i) { return i >= 0 && i < EMU_PC__COUNT ? counter_help[i] : NULL; }

/* Rows of the device's profile: one per instruction of each program that has counters. */
int32_t lpx_device_profile_count(lpx_device *d, int32_t *nrows)
{
  emu_dev *e = emu_of(d);
  if (!e) return -1;
  size_t n = 0;
  for (size_t i = 0; i < e->nprogs; i++) n += e->progs[i]->prof ? e->progs[i]->ninsts : 0;
  *nrows = (int32_t)n;
  return 0;
}

/* Where row r's instruction is, and its counters (ncounters of them). */
static void row_fill(const emu_prog *p, size_t pc, lpx_prof_loc *loc, uint64_t *c, int32_t ncounters)
{
  const emu_inst *in = &p->insts[pc];
  memset(loc, 0, sizeof *loc);
  loc->func = p->name; loc->pc = (int32_t)pc; loc->file = ""; loc->line = 0;
  loc->module = p->m; loc->launches = p->prof_launches; loc->dynamic_smem = p->prof_dsmem;
  memcpy(loc->grid, p->prof_grid, sizeof loc->grid);
  memcpy(loc->block, p->prof_block, sizeof loc->block);
  if (in->item >= 0) {
    const lpx_item *it = &p->f->items[in->item];
    if (it->file > 0 && (size_t)it->file <= p->m->nfiles) loc->file = lpx_strtab_get(&p->m->syms, p->m->files[it->file - 1]);
    loc->line = it->line;
  }
  char where[512];
  lpx_emu_where(p, in, where, sizeof where);
  const char *t = strstr(where, ": ");
  snprintf(loc->text, sizeof loc->text, "%.239s", t ? t + 2 : where);
  for (int32_t k = 0; k < ncounters && k < EMU_PC__COUNT; k++) c[k] = p->prof[pc * EMU_PC__COUNT + (size_t)k];
}

/* Row r of the profile: its location and counters. */
int32_t lpx_device_profile_row(lpx_device *d, int32_t r, lpx_prof_loc *loc, uint64_t *counters, int32_t ncounters)
{
  emu_dev *e = emu_of(d);
  if (!e) return -1;
  for (size_t i = 0; i < e->nprogs && r >= 0; i++) {
    const emu_prog *p = e->progs[i];
    if (!p->prof) continue;
    if ((size_t)r < p->ninsts) { row_fill(p, (size_t)r, loc, counters, ncounters); return 0; }
    r -= (int32_t)p->ninsts;
  }
  return lpx_fail(d->ctx, "profile row %d: no such row (see lpx_device_profile_count)", r);
}

/* Zero every counter (the programs keep their rows). */
int32_t lpx_device_profile_reset(lpx_device *d)
{
  emu_dev *e = emu_of(d);
  if (!e) return -1;
  for (size_t i = 0; i < e->nprogs; i++)
    if (e->progs[i]->prof) {
      memset(e->progs[i]->prof, 0, e->progs[i]->ninsts * EMU_PC__COUNT * sizeof(uint64_t));
      e->progs[i]->prof_launches = 0;
    }
  return 0;
}
