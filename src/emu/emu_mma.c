/* Warp-wide matrix instructions of Ampere: ldmatrix (m8n8 .x1/.x2/.x4,
 * .trans) and mma.sync m16n8k16 / m16n8k8 with f16, bf16 and tf32 inputs,
 * f32 (or f16) accumulators, in the fragment layouts of the PTX ISA.
 * Products are exact and sums are formed in double, rounded once. */
#include "emu.h"
#include <stdio.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

enum { X_NUM, X_TRANS, X_SHAPE, X_DT, X_AT, X_BT, X_CT };      /* in->ext slots */
enum { SHAPE_M16N8K16 = 1, SHAPE_M16N8K8 };

/* --------------------------------------------------------------- decoding */

/* Does the dotted opcode text contain the modifier word? */
static int has_mod(const char *text, const char *word)
{
  size_t n = strlen(word);
  for (const char *p = text; (p = strstr(p, word)); p += n)
    if (p > text && p[-1] == '.' && (p[n] == '.' || p[n] == '\0')) return 1;
  return 0;
}

/* The four type modifiers of an mma form in order (d, a, b, c). */
static int mma_types(const char *text, uint8_t *out)
{
  int n = 0;
  for (const char *p = strchr(text, '.'); p && n < 4; p = strchr(p + 1, '.')) {
    char tok[16];
    size_t len = strcspn(p + 1, ".");
    if (len >= sizeof tok) continue;
    memcpy(tok, p + 1, len);
    tok[len] = '\0';
    int t = lpx_type_lookup(tok);
    if (t >= 0) out[n++] = (uint8_t)t;
  }
  return n;
}

/* Record what an ldmatrix / mma form needs at run time in in->ext. */
void lpx_emu_decode_mma(emu_inst *in, const char *text)
{
  if (in->op == LPX_OP_LDMATRIX) {
    in->ext[X_NUM] = has_mod(text, "x4") ? 4 : has_mod(text, "x2") ? 2 : has_mod(text, "x1") ? 1 : 0;
    in->ext[X_TRANS] = (uint8_t)has_mod(text, "trans");
    in->ext[X_SHAPE] = (uint8_t)has_mod(text, "m8n8");
    return;
  }
  uint8_t t[4] = { 0, 0, 0, 0 };
  int ok = mma_types(text, t) == 4 && has_mod(text, "row") && has_mod(text, "col");
  in->ext[X_SHAPE] = !ok ? 0 : has_mod(text, "m16n8k16") ? SHAPE_M16N8K16 : has_mod(text, "m16n8k8") ? SHAPE_M16N8K8 : 0;
  memcpy(&in->ext[X_DT], t, 4);
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

/* ------------------------------------------------------------------- mma */

/* Element k (0 or 1) of a packed 16-bit pair, or a tf32 register, as a double. */
static double elem(int type, uint64_t v, int k)
{
  uint16_t h = (uint16_t)(v >> (16 * k));
  switch (type) {
  case LPX_T_F16: return lpx_emu_f16_to_f32(h);
  case LPX_T_BF16: return lpx_emu_bf16_to_f32(h);
  default: return emu_u2f((uint32_t)v & 0xffffe000u);    /* tf32: the top 19 bits */
  }
}

/* Gather A (16 x K), B (K x 8) and C (16 x 8) from the lanes' fragments. */
static void gather(emu_warp *w, const emu_inst *in, int K, double A[16][16], double B[16][8], double C[16][8])
{
  int at = in->ext[X_AT], ct = in->ext[X_CT], tf = at == LPX_T_TF32;
  int na = K == 16 || tf ? 4 : 2, nb = K == 16 || tf ? 2 : 1, nc = ct == LPX_T_F32 ? 4 : 2;
  int nd = in->ext[X_DT] == LPX_T_F32 ? 4 : 2;
  int a0 = 1 + nd + 1, b0 = a0 + na + 1, c0 = b0 + nb + 1;   /* {d..}, {a..}, {b..}, {c..} */
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int r = 0; r < na; r++) {
      uint64_t v = EMU_R(w, EMU_OP(w, in, a0 + r)->reg)[l];
      if (tf) A[g + 8 * (r & 1)][t + 4 * (r >> 1)] = elem(at, v, 0);
      else for (int k = 0; k < 2; k++) A[g + 8 * (r & 1)][2 * t + k + 8 * (r >> 1)] = elem(at, v, k);
    }
    for (int r = 0; r < nb; r++) {
      uint64_t v = EMU_R(w, EMU_OP(w, in, b0 + r)->reg)[l];
      if (tf) B[t + 4 * r][g] = elem(at, v, 0);
      else for (int k = 0; k < 2; k++) B[2 * t + k + 8 * r][g] = elem(at, v, k);
    }
    for (int r = 0; r < nc; r++) {
      uint64_t v = EMU_R(w, EMU_OP(w, in, c0 + r)->reg)[l];
      if (ct == LPX_T_F32) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = emu_u2f(v);
      else for (int k = 0; k < 2; k++) C[g + 8 * r][2 * t + k] = lpx_emu_f16_to_f32((uint16_t)(v >> (16 * k)));
    }
  }
}

/* Scatter D (16 x 8) into the lanes' destination fragments. */
static void scatter(emu_warp *w, const emu_inst *in, double Dm[16][8])
{
  int dt = in->ext[X_DT], nd = dt == LPX_T_F32 ? 4 : 2;
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int r = 0; r < nd; r++) {
      uint64_t *d = EMU_R(w, EMU_OP(w, in, 1 + r)->reg);
      if (dt == LPX_T_F32) d[l] = emu_f2u((float)Dm[g + 8 * (r >> 1)][2 * t + (r & 1)]);
      else d[l] = (uint64_t)lpx_emu_f64_to_half(Dm[g + 8 * r][2 * t], 0, 1) |
                  (uint64_t)lpx_emu_f64_to_half(Dm[g + 8 * r][2 * t + 1], 0, 1) << 16;
    }
  }
}

/* mma.sync.aligned.{m16n8k16,m16n8k8}.row.col: D = A * B + C for the warp. */
HANDLER(op_mma)
{
  if (m != EMU_FULL || w->live != EMU_FULL)
    return lpx_emu_fail(w, in, -1, "mma.sync needs all 32 lanes of the warp converged (active 0x%08x)", m);
  int K = in->ext[X_SHAPE] == SHAPE_M16N8K16 ? 16 : 8;
  double A[16][16] = { { 0 } }, B[16][8] = { { 0 } }, C[16][8] = { { 0 } }, Dm[16][8];
  gather(w, in, K, A, B, C);
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      double s = C[i][j];
      for (int k = 0; k < K; k++) s += A[i][k] * B[k][j];
      Dm[i][j] = s;
    }
  scatter(w, in, Dm);
  return 0;
}

/* Handler for the matrix rows, when the form is one the emulator knows. */
emu_fn lpx_emu_pick_mma(const emu_inst *in)
{
  if (in->op == LPX_OP_LDMATRIX) return in->ext[X_SHAPE] && in->ext[X_NUM] && in->nops == in->ext[X_NUM] + 2 ? op_ldmatrix : NULL;
  int at = in->ext[X_AT], dt = in->ext[X_DT], ct = in->ext[X_CT];
  int ins = at == LPX_T_F16 || at == LPX_T_BF16 || at == LPX_T_TF32;
  int accs = (dt == LPX_T_F32 || dt == LPX_T_F16) && (ct == LPX_T_F32 || ct == LPX_T_F16) && (dt == LPX_T_F32 || at == LPX_T_F16);
  if (!in->ext[X_SHAPE] || !ins || !accs || in->ext[X_BT] != at) return NULL;
  if (at == LPX_T_TF32 && in->ext[X_SHAPE] != SHAPE_M16N8K8) return NULL;
  int k16 = in->ext[X_SHAPE] == SHAPE_M16N8K16, tf = at == LPX_T_TF32;
  int want = 4 + (dt == LPX_T_F32 ? 4 : 2) + (k16 || tf ? 4 : 2) + (k16 || tf ? 2 : 1) + (ct == LPX_T_F32 ? 4 : 2);
  return in->nops == want ? op_mma : NULL;
}
