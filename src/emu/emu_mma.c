/* Warp-wide matrix instructions of Ampere: ldmatrix / stmatrix (m8n8
 * .x1/.x2/.x4, .trans), movmatrix, and mma.sync in the fragment layouts of
 * the PTX ISA: m16n8k16 / m16n8k8 f16 and bf16, m16n8k8 / m16n8k4 tf32
 * (f32 or f16 accumulators), m16n8k32 / m16n8k16 / m8n8k16 s8 and u8 (s32,
 * wrapping or .satfinite), s4/u4 m8n8k32 / m16n8k32 / m16n8k64, b1
 * m8n8k128 / m16n8k128 / m16n8k256 (.xor.popc, .and.popc), m8n8k4 f64 and
 * the sm_90 m16n8k{4,8,16} f64; the sm_89 m16n8k32 / m16n8k16 e4m3 and e5m2
 * (any pair; f32 or f16 accumulators); and the sm_70 m8n8k4 f16 (four
 * quad-pair products, any .row/.col layouts).
 * Products are exact and sums are formed in double, rounded once (f64:
 * each product rounded, summed in order). */
#include "emu.h"
#include <stdio.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

enum { X_NUM, X_TRANS, X_SHAPE, X_DT, X_AT, X_BT, X_CT, X_FLAGS };  /* in->ext slots */
enum { F_SAT = 1, F_AND = 2, F_ACOL = 4, F_BROW = 8 };  /* X_FLAGS bits */

/* --------------------------------------------------------------- decoding */

/* Record what an ldmatrix / mma form needs at run time in in->ext, from
 * its record: X_SHAPE is 1 + the LPX_MMA_SHAPES row of a form the table
 * lists (0: not run), the types are matrix types (LPX_MT_*). */
void lpx_emu_decode_mma(emu_inst *in, const lpx_form *fo)
{
  const lpx_form_info *fi = &fo->info;
  if (in->op == LPX_OP_LDMATRIX || in->op == LPX_OP_STMATRIX) {
    in->ext[X_NUM] = (uint8_t)(fi->num == 1 || fi->num == 2 || fi->num == 4 ? fi->num : 0);
    in->ext[X_TRANS] = (uint8_t)fi->trans;
    in->ext[X_SHAPE] = fi->shape_m == 8 && fi->shape_n == 8 && !fi->shape_k;
    return;
  }
  in->ext[X_SHAPE] = 0;
  if (lpx_mma_form_check(fi, NULL, 0)) return;
  const lpx_mma_shape *r = lpx_mma_shape_find(fi->shape_m, fi->shape_n, fi->shape_k, lpx_mma_family_of(fi->atype)->family);
  for (int i = 0; lpx_mma_shape_at(i); i++) if (lpx_mma_shape_at(i) == r) in->ext[X_SHAPE] = (uint8_t)(i + 1);
  in->ext[X_DT] = (uint8_t)fi->dtype; in->ext[X_AT] = (uint8_t)fi->atype;
  in->ext[X_BT] = (uint8_t)fi->btype; in->ext[X_CT] = (uint8_t)fi->ctype;
  in->ext[X_FLAGS] = (uint8_t)((fi->satfinite ? F_SAT : 0) | (fo->modsel[LPX_GB_BOOL] == LPX_BOOL_AND ? F_AND : 0) |
                               (fi->alayout == LPX_ALAYOUT_COL ? F_ACOL : 0) | (fi->blayout == LPX_BLAYOUT_ROW ? F_BROW : 0));
}

/* --------------------------------------------------------------- ldmatrix */

/* ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: lanes 8i..8i+7 give the
 * row addresses of matrix i; each lane receives two b16 of each matrix. */
HANDLER(op_ldmatrix)
{
  int num = in->ext[X_NUM], trans = in->ext[X_TRANS];
  if (m != w->live || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "ldmatrix needs all 32 lanes of the warp converged (active 0x%08x)", m);
  const emu_op *ao = EMU_OP(w, in, 1 + num);
  uint16_t mat[4][8][8];
  for (int i = 0; i < num; i++)
    for (int r = 0; r < 8; r++) {
      int lane = 8 * i + r;
      uint64_t addr = (ao->reg >= 0 ? EMU_R(w, ao->reg)[lane] : 0) + (uint64_t)ao->off;
      const uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, addr, 16, 0);
      if (!p) return -1;
      memcpy(mat[i][r], p, 16);
    }
  for (int i = 0; i < num; i++) {
    uint64_t *d = EMU_R(w, EMU_OP(w, in, 1 + i)->reg);
    for (int l = 0; l < 32; l++) {
      int row = l / 4, col = 2 * (l % 4);
      uint16_t lo = trans ? mat[i][col][row] : mat[i][row][col], hi = trans ? mat[i][col + 1][row] : mat[i][row][col + 1];
      d[l] = (uint32_t)lo | (uint32_t)hi << 16;
    }
  }
  return 0;
}

/* --------------------------------------------------------------- stmatrix */

/* stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: the inverse of ldmatrix;
 * lanes 8i..8i+7 give the row addresses of matrix i. */
HANDLER(op_stmatrix)
{
  int num = in->ext[X_NUM], trans = in->ext[X_TRANS];
  if (m != w->live || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "stmatrix needs all 32 lanes of the warp converged (active 0x%08x)", m);
  uint16_t mat[4][8][8];
  for (int i = 0; i < num; i++) {
    const uint64_t *s = EMU_R(w, EMU_OP(w, in, 2 + i)->reg);
    for (int l = 0; l < 32; l++) {
      int row = l / 4, col = 2 * (l % 4);
      for (int e = 0; e < 2; e++) {
        uint16_t v = (uint16_t)(s[l] >> (16 * e));
        if (trans) mat[i][col + e][row] = v; else mat[i][row][col + e] = v;
      }
    }
  }
  const emu_op *ao = EMU_OP(w, in, 0);
  for (int i = 0; i < num; i++)
    for (int r = 0; r < 8; r++) {
      int lane = 8 * i + r;
      uint64_t addr = (ao->reg >= 0 ? EMU_R(w, ao->reg)[lane] : 0) + (uint64_t)ao->off;
      uint8_t *p = lpx_emu_addr(w, in, lane, EMU_SP_SHARED, addr, 16, 1);
      if (!p) return -1;
      memcpy(p, mat[i][r], 16);
    }
  return 0;
}

/* movmatrix.sync.aligned.m8n8.trans.b16: transpose the 8x8 b16 matrix held
 * in the ldmatrix layout (lane l: row l/4, columns 2(l%4), +1). */
HANDLER(op_movmatrix)
{
  if (m != EMU_FULL || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "movmatrix needs all 32 lanes of the warp converged (active 0x%08x)", m);
  uint16_t mat[8][8];
  const uint64_t *s = EMU_R(w, EMU_OP(w, in, 1)->reg);
  for (int l = 0; l < 32; l++)
    for (int e = 0; e < 2; e++) mat[l / 4][2 * (l % 4) + e] = (uint16_t)(s[l] >> (16 * e));
  uint64_t *d = EMU_R(w, EMU_OP(w, in, 0)->reg);
  for (int l = 0; l < 32; l++) {
    int row = l / 4, col = 2 * (l % 4);
    d[l] = (uint32_t)mat[col][row] | (uint32_t)mat[col + 1][row] << 16;
  }
  return 0;
}

/* ------------------------------------------------------------------- mma */

/* The geometry of one mma form: shape, elements per register, counts. */
typedef struct mma_geo { int m, k, per, na, nb, nc, nd; } mma_geo;

/* The table row of in's form. */
static const lpx_mma_shape *shape_of(const emu_inst *in) { return lpx_mma_shape_at(in->ext[X_SHAPE] - 1); }

/* Accumulator registers per lane of a row for accumulator type t (f16: pairs). */
static int acc_regs(const lpx_mma_shape *r, int t) { return t == LPX_MT_F16 ? r->acc_regs / 2 : r->acc_regs; }

/* Fill the geometry of in's form from its table row. */
static mma_geo geometry(const emu_inst *in)
{
  mma_geo g;
  const lpx_mma_shape *r = shape_of(in);
  int at = in->ext[X_AT];
  g.m = r->m;
  g.k = r->k;
  g.per = (at == LPX_MT_F64 ? 64 : 32) / lpx_mtype_bits(at);
  g.na = r->a_regs;
  g.nb = r->b_regs;
  g.nc = acc_regs(r, in->ext[X_CT]);
  g.nd = acc_regs(r, in->ext[X_DT]);
  return g;
}

/* Element e of an A/B register of matrix type t as a double. */
static double elem(int t, uint64_t v, int e)
{
  double f;
  switch (t) {
  case LPX_MT_F16: return lpx_emu_f16_to_f32((uint16_t)(v >> (16 * e)));
  case LPX_MT_BF16: return lpx_emu_bf16_to_f32((uint16_t)(v >> (16 * e)));
  case LPX_MT_TF32: return emu_u2f((uint32_t)v & 0xffffe000u);    /* tf32: the top 19 bits */
  case LPX_MT_S8: return (int8_t)(uint8_t)(v >> (8 * e));
  case LPX_MT_U8: return (uint8_t)(v >> (8 * e));
  case LPX_MT_S4: return (double)((int)((v >> (4 * e)) & 15) ^ 8) - 8;
  case LPX_MT_U4: return (double)((v >> (4 * e)) & 15);
  case LPX_MT_B1: return (double)((v >> e) & 1);
  case LPX_MT_E4M3: case LPX_MT_E5M2: return lpx_emu_fp8_to_f32((uint8_t)(v >> (8 * e)), t == LPX_MT_E5M2);
  default: memcpy(&f, &v, 8); return f;
  }
}

/* Element e of a C register of matrix type t as a double. */
static double acc_elem(int t, uint64_t v, int e)
{
  double f;
  switch (t) {
  case LPX_MT_F32: return emu_u2f(v);
  case LPX_MT_F16: return lpx_emu_f16_to_f32((uint16_t)(v >> (16 * e)));
  case LPX_MT_S32: return (int32_t)(uint32_t)v;
  default: memcpy(&f, &v, 8); return f;
  }
}

/* The bits of an accumulator value x of matrix type t (f16: element e's field). */
static uint64_t acc_bits(int t, double x, int sat, int e)
{
  uint64_t u;
  switch (t) {
  case LPX_MT_F32: return emu_f2u((float)x);
  case LPX_MT_F16: return (uint64_t)lpx_emu_f64_to_half(x, 0, LPX_RND_RN) << (16 * e);
  case LPX_MT_S32:
    if (sat) return (uint32_t)(int32_t)(x > 2147483647.0 ? 2147483647.0 : x < -2147483648.0 ? -2147483648.0 : x);
    return (uint32_t)(int64_t)x;
  default: memcpy(&u, &x, 8); return u;
  }
}

/* Register r of operand block base of lane l. */
static uint64_t frag(emu_warp *w, const emu_inst *in, int base, int r, int l)
{
  return EMU_R(w, EMU_OP(w, in, base + r)->reg)[l];
}

/* Most fragment registers of one operand block (A of the f64 m16n8k16: 8). */
#define MMA_MAX_REGS 16

/* The lanes of registers base .. base+n-1, looked up once per instruction. */
static void frag_regs(emu_warp *w, const emu_inst *in, int base, int n, uint64_t **out)
{
  for (int r = 0; r < n; r++) out[r] = EMU_R(w, EMU_OP(w, in, base + r)->reg);
}

/* The p elements of an A/B register of matrix type t as doubles (bf16,
 * the common case, decoded inline). */
static void elems(int t, uint64_t v, int p, double *out)
{
  if (t == LPX_MT_BF16) {
    out[0] = lpx_emu_bf16_lo_to_f32((uint32_t)v);
    out[1] = lpx_emu_bf16_hi_to_f32((uint32_t)v);
    return;
  }
  for (int e = 0; e < p; e++) out[e] = elem(t, v, e);
}

/* Gather A (m x k), B (k x 8) and C (m x 8) from the lanes' fragments:
 * A reg r elem e of lane (g, t) is (g + 8(r % mb), t*per + e + (r / mb)*4per),
 * B reg r elem e is (t*per + e + 4per*r, g), C reg r is (g + 8(r/2), 2t + r%2)
 * (f16 pairs: (g + 8r, 2t + e)). */
static void gather(emu_warp *w, const emu_inst *in, const mma_geo *G, double A[16][256], double B[256][8], double C[16][8])
{
  int at = in->ext[X_AT], bt = in->ext[X_BT], ct = in->ext[X_CT], mb = G->m / 8, p = G->per;
  int a0 = 1 + G->nd + 1, b0 = a0 + G->na + 1, c0 = b0 + G->nb + 1;   /* {d..}, {a..}, {b..}, {c..} */
  uint64_t *ra[MMA_MAX_REGS], *rb[MMA_MAX_REGS], *rc[MMA_MAX_REGS];
  frag_regs(w, in, a0, G->na, ra);
  frag_regs(w, in, b0, G->nb, rb);
  frag_regs(w, in, c0, G->nc, rc);
  double x[64];   /* one register's elements: at most 64 (b1) */
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int r = 0; r < G->na; r++) {
      elems(at, ra[r][l], p, x);
      for (int e = 0; e < p; e++) A[g + 8 * (r % mb)][t * p + e + (r / mb) * 4 * p] = x[e];
    }
    for (int r = 0; r < G->nb; r++) {
      elems(bt, rb[r][l], p, x);
      for (int e = 0; e < p; e++) B[t * p + e + 4 * p * r][g] = x[e];
    }
    for (int r = 0; r < G->nc; r++) {
      uint64_t v = rc[r][l];
      if (ct == LPX_MT_F16) for (int e = 0; e < 2; e++) C[g + 8 * r][2 * t + e] = acc_elem(ct, v, e);
      else C[g + 8 * (r >> 1)][2 * t + (r & 1)] = acc_elem(ct, v, 0);
    }
  }
}

/* Is in an f16/bf16 form with f32 C (m16n8k16, m16n8k8: two elements a
 * register, two row blocks of A), the case gather16 serves? */
static int is_half_f32(const emu_inst *in, const mma_geo *G)
{
  int at = in->ext[X_AT], bt = in->ext[X_BT];
  return G->per == 2 && G->m == 16 && (at == LPX_MT_F16 || at == LPX_MT_BF16) && (bt == LPX_MT_F16 || bt == LPX_MT_BF16) &&
         in->ext[X_CT] == LPX_MT_F32;
}

/* The two halves of each lane's register v as doubles, bf16 or f16: lane
 * l's low half to o[0] and its high half to o[hi_off], o = base + (l >> 2)
 * * row + (l & 3) * col. The type test is outside the lane loop, so the
 * common bf16 loop is straight code. */
static inline __attribute__((always_inline)) void halves(int t, const uint64_t *v, double *base, int row, int col, int hi_off)
{
  if (t == LPX_MT_BF16) {
    for (int g = 0; g < 8; g++)
      for (int q = 0; q < 4; q++) {
        uint32_t x = (uint32_t)v[4 * g + q];
        double *o = base + g * row + q * col;
        o[0] = lpx_emu_bf16_lo_to_f32(x);
        o[hi_off] = lpx_emu_bf16_hi_to_f32(x);
      }
    return;
  }
  for (int g = 0; g < 8; g++)
    for (int q = 0; q < 4; q++) {
      uint32_t x = (uint32_t)v[4 * g + q];
      double *o = base + g * row + q * col;
      o[0] = lpx_emu_f16_to_f32((uint16_t)x);
      o[hi_off] = lpx_emu_f16_to_f32((uint16_t)(x >> 16));
    }
}

/* gather for is_half_f32 forms: the same layout with per = 2, mb = 2.
 * Lane l = 4g + q holds, in A's register r, A[g + 8(r & 1)][2q + 8(r >> 1)
 * + {0, 1}]; in B's register r, B[2q + 8r + {0, 1}][g]; in C's register r,
 * C[g + 8(r >> 1)][2q + (r & 1)]. */
static void gather16(emu_warp *w, const emu_inst *in, const mma_geo *G, double A[16][256], double B[256][8], double C[16][8])
{
  int at = in->ext[X_AT], bt = in->ext[X_BT];
  int a0 = 1 + G->nd + 1, b0 = a0 + G->na + 1, c0 = b0 + G->nb + 1;
  uint64_t *ra[MMA_MAX_REGS], *rb[MMA_MAX_REGS], *rc[MMA_MAX_REGS];
  frag_regs(w, in, a0, G->na, ra);
  frag_regs(w, in, b0, G->nb, rb);
  frag_regs(w, in, c0, G->nc, rc);
  for (int r = 0; r < G->na; r++) halves(at, ra[r], &A[8 * (r & 1)][8 * (r >> 1)], 256, 2, 1);
  for (int r = 0; r < G->nb; r++) halves(bt, rb[r], &B[8 * r][0], 1, 2 * 8, 8);
  for (int r = 0; r < G->nc; r++) {
    const uint64_t *v = rc[r];
    double *c = &C[8 * (r >> 1)][r & 1];
    for (int g = 0; g < 8; g++)
      for (int q = 0; q < 4; q++) c[g * 8 + 2 * q] = emu_u2f(v[4 * g + q]);
  }
}

/* Scatter D (m x 8) into the lanes' destination fragments. */
static void scatter(emu_warp *w, const emu_inst *in, const mma_geo *G, double Dm[16][8])
{
  int dt = in->ext[X_DT], sat = in->ext[X_FLAGS] & F_SAT;
  uint64_t *rd[MMA_MAX_REGS];
  frag_regs(w, in, 1, G->nd, rd);
  if (dt == LPX_MT_F32) {   /* the common case, one conversion a register */
    for (int r = 0; r < G->nd; r++) {
      const double *d = &Dm[8 * (r >> 1)][r & 1];
      uint64_t *o = rd[r];
      for (int g = 0; g < 8; g++)
        for (int q = 0; q < 4; q++) o[4 * g + q] = emu_f2u((float)d[g * 8 + 2 * q]);
    }
    return;
  }
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int r = 0; r < G->nd; r++) {
      if (dt == LPX_MT_F16) rd[r][l] = acc_bits(dt, Dm[g + 8 * r][2 * t], 0, 0) | acc_bits(dt, Dm[g + 8 * r][2 * t + 1], 0, 1);
      else rd[r][l] = acc_bits(dt, Dm[g + 8 * (r >> 1)][2 * t + (r & 1)], sat, 0);
    }
  }
}

/* Dm = A * B + C, each element's sum formed in k order from C (the same
 * operations, in the same order, as one element at a time): a row of D is
 * two vectors of four columns, so each step of k is two vector products
 * (one AVX instruction each where the host has AVX, else two SSE2). */
__attribute__((target_clones("avx", "default")))
static void product(const mma_geo *G, double A[16][256], double B[256][8], double C[16][8], double Dm[16][8])
{
  for (int i = 0; i < G->m; i++) {
    emu_v4d s0 = *(const emu_v4du *)&C[i][0], s1 = *(const emu_v4du *)&C[i][4];
    for (int k = 0; k < G->k; k++) {
      double x = A[i][k];
      emu_v4d a = { x, x, x, x };
      s0 += a * *(const emu_v4du *)&B[k][0];
      s1 += a * *(const emu_v4du *)&B[k][4];
    }
    *(emu_v4du *)&Dm[i][0] = s0;
    *(emu_v4du *)&Dm[i][4] = s1;
  }
}

/* mma.sync.aligned.<shape>.row.col: D = A * B + C for the warp. */
HANDLER(op_mma)
{
  if (m != EMU_FULL || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "mma.sync needs all 32 lanes of the warp converged (active 0x%08x)", m);
  mma_geo G = geometry(in);
  double A[16][256], B[256][8];        /* every element in range is written by gather */
  double C[16][8] = { { 0 } }, Dm[16][8];
  int b1 = in->ext[X_AT] == LPX_MT_B1, and_op = in->ext[X_FLAGS] & F_AND;
  if (is_half_f32(in, &G)) gather16(w, in, &G, A, B, C);
  else gather(w, in, &G, A, B, C);
  if (!b1) { product(&G, A, B, C, Dm); scatter(w, in, &G, Dm); return 0; }
  for (int i = 0; i < G.m; i++)
    for (int j = 0; j < 8; j++) {
      double s = C[i][j];
      for (int k = 0; k < G.k; k++) s += and_op ? A[i][k] * B[k][j] : A[i][k] != B[k][j];   /* popc of and / xor */
      Dm[i][j] = s;
    }
  scatter(w, in, &G, Dm);
  return 0;
}

/* m8n8k4 .f16 (sm_70 quad pairs): quad pair q (lanes 4q..4q+3 and
 * 4q+16..4q+19, logical thread t = lane%4 + 4(lane/16)) computes its own
 * 8x8x4 product. A .row: t holds row t, k 0..3; A .col: k t%4, rows
 * 4(t/4)..+3; B .col: column t, k 0..3; B .row: k t%4, columns 4(t/4)..+3.
 * f16 C/D: row t, columns 0..7; f32 C/D value v: row t%2 + 2(v/2%2) +
 * 4(t/4), column 2(t/2%2) + v%2 + 4(v/4). */
static void quad_cd(int t, int v, int f32, int *row, int *col)
{
  if (!f32) { *row = t; *col = v; return; }
  *row = (t & 1) + 2 * ((v >> 1) & 1) + 4 * ((t >> 2) & 1);
  *col = 2 * ((t >> 1) & 1) + (v & 1) + 4 * ((v >> 2) & 1);
}

/* One quad pair's m8n8k4 .f16 product (q: 0..3). */
static void quad_pair(emu_warp *w, const emu_inst *in, int q)
{
  int fl = in->ext[X_FLAGS], cf = in->ext[X_CT] == LPX_MT_F32, df = in->ext[X_DT] == LPX_MT_F32;
  int nd = df ? 8 : 4, a0 = 1 + nd + 1, b0 = a0 + 3, c0 = b0 + 3;
  double A[8][4], B[4][8], C[8][8];
  for (int t = 0; t < 8; t++) {
    int l = 4 * q + (t & 3) + 16 * (t >> 2);
    for (int v = 0; v < 4; v++) {
      double a = elem(LPX_MT_F16, frag(w, in, a0, v / 2, l), v % 2), b = elem(LPX_MT_F16, frag(w, in, b0, v / 2, l), v % 2);
      if (fl & F_ACOL) A[4 * (t >> 2) + v][t & 3] = a; else A[t][v] = a;
      if (fl & F_BROW) B[t & 3][4 * (t >> 2) + v] = b; else B[v][t] = b;
    }
    for (int v = 0; v < 8; v++) {
      int row, col;
      quad_cd(t, v, cf, &row, &col);
      C[row][col] = cf ? acc_elem(LPX_MT_F32, frag(w, in, c0, v, l), 0) : acc_elem(LPX_MT_F16, frag(w, in, c0, v / 2, l), v % 2);
    }
  }
  for (int t = 0; t < 8; t++) {
    int l = 4 * q + (t & 3) + 16 * (t >> 2);
    if (!df) for (int r = 0; r < 4; r++) EMU_R(w, EMU_OP(w, in, 1 + r)->reg)[l] = 0;
    for (int v = 0; v < 8; v++) {
      int row, col;
      quad_cd(t, v, df, &row, &col);
      double s = C[row][col];
      for (int k = 0; k < 4; k++) s += A[row][k] * B[k][col];
      if (df) EMU_R(w, EMU_OP(w, in, 1 + v)->reg)[l] = acc_bits(LPX_MT_F32, s, 0, 0);
      else EMU_R(w, EMU_OP(w, in, 1 + v / 2)->reg)[l] |= acc_bits(LPX_MT_F16, s, 0, v % 2);
    }
  }
}

/* mma.sync.aligned.m8n8k4.<alayout>.<blayout> with .f16 inputs. */
HANDLER(op_mma_quad)
{
  if (m != EMU_FULL || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "mma.sync needs all 32 lanes of the warp converged (active 0x%08x)", m);
  for (int q = 0; q < 4; q++) quad_pair(w, in, q);
  return 0;
}

/* Handler for the mma row: every form the table lists (the decoder kept
 * only those), with the operand count of its fragments. */
static emu_fn pick_mma(const emu_inst *in)
{
  if (!in->ext[X_SHAPE]) return NULL;
  if (!shape_of(in)->acc_regs)      /* the sm_70 quad-pair form: 8 f32 or 4 f16x2 C and D */
    return in->nops == 4 + 4 + (in->ext[X_DT] == LPX_MT_F32 ? 8 : 4) + (in->ext[X_CT] == LPX_MT_F32 ? 8 : 4) ? op_mma_quad : NULL;
  mma_geo G = geometry(in);
  if (G.na > MMA_MAX_REGS || G.nb > MMA_MAX_REGS || G.nc > MMA_MAX_REGS || G.nd > MMA_MAX_REGS) return NULL;
  return in->nops == 4 + G.na + G.nb + G.nc + G.nd ? op_mma : NULL;
}

/* Handler for the matrix rows, when the form is one the emulator knows. */
emu_fn lpx_emu_pick_mma(const emu_inst *in)
{
  int ldst = in->ext[X_SHAPE] && in->ext[X_NUM] && in->nops == in->ext[X_NUM] + 2;
  if (in->op == LPX_OP_LDMATRIX) return ldst ? op_ldmatrix : NULL;
  if (in->op == LPX_OP_STMATRIX) return ldst ? op_stmatrix : NULL;
  if (in->op == LPX_OP_MOVMATRIX) return in->nops == 2 ? op_movmatrix : NULL;
  return pick_mma(in);
}
