/* Warp collectives: shfl.sync (up/down/bfly/idx with the clamp and
 * segment mask), vote.sync, redux.sync, match.sync, activemask and
 * elect.sync. They read every participating lane before writing any, and
 * check that the lanes the member mask names are converged here. */
#include "emu.h"

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* The member mask (operand k, one value: BY_MASK splits the others) checked
 * against the lanes executing here; -1 (error set) when it names a live
 * lane that is elsewhere or omits an executing one. */
static int member_mask(emu_warp *w, const emu_inst *in, uint32_t m, int k, uint32_t *out)
{
  uint32_t mm = (uint32_t)D(k)[__builtin_ctz(m)];
  uint32_t away = mm & w->live & ~w->cur;
  if (away)
    return lpx_emu_fail(w, in, __builtin_ctz(away), "the member mask 0x%08x names lane(s) 0x%08x that are live but not converged "
                        "at this instruction (diverged); every named lane must execute the same %s", mm, away,
                        lpx_isa_row_name(in->op));
  if (m & ~mm)
    return lpx_emu_fail(w, in, __builtin_ctz(m & ~mm), "lane(s) 0x%08x execute this instruction but are not in its member mask 0x%08x",
                        m & ~mm, mm);
  *out = mm;
  return 0;
}

/* Lanes of m whose member mask (operand k) is the first lane's. */
static uint32_t mask_group(emu_warp *w, const emu_inst *in, uint32_t m, int k)
{
  const uint64_t *mk = D(k);
  uint32_t first = (uint32_t)mk[__builtin_ctz(m)], g = 0;
  EMU_EACH(m, if ((uint32_t)mk[l] == first) g |= 1u << l);
  return g;
}

/* Run a collective once per group of lanes of m that share a member mask:
 * the tiles of cooperative_groups::tiled_partition each run their own. */
static int per_group(emu_warp *w, const emu_inst *in, uint32_t m, int k, emu_fn fn)
{
  while (m) {
    uint32_t g = mask_group(w, in, m, k);
    if (fn(w, in, g)) return -1;
    m &= ~g;
  }
  return 0;
}

/* Split at the top of a collective whose lanes pass different member masks. */
#define BY_MASK(k, fn) do { if (mask_group(w, in, m, (k)) != m) return per_group(w, in, m, (k), (fn)); } while (0)

/* ------------------------------------------------------------- shuffles */

/* shfl.sync.mode.b32 d[|p], a, b, c, membermask. */
HANDLER(op_shfl)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int pipe = o0->kind == EO_VEC, base = pipe ? 3 : 1, mode = in->mod[LPX_GB_SHFL];
  uint32_t mm;
  BY_MASK(base + 3, op_shfl);
  if (member_mask(w, in, m, base + 3, &mm)) return -1;
  uint64_t *d = D(pipe ? 1 : 0), *p = pipe ? D(2) : NULL;
  const uint64_t *a = D(base), *b = D(base + 1), *c = D(base + 2);
  uint32_t src[32], val[32], ok[32];
  EMU_EACH(m, {
    uint32_t bv = (uint32_t)b[l] & 31, cv = (uint32_t)c[l] & 31, seg = ((uint32_t)c[l] >> 8) & 31;
    int32_t maxl = (int32_t)((l & seg) | (cv & ~seg)), minl = (int32_t)(l & seg), j;
    int pv;
    switch (mode) {
    case LPX_SHFL_UP: j = l - (int32_t)bv; pv = j >= maxl; break;
    case LPX_SHFL_DOWN: j = l + (int32_t)bv; pv = j <= maxl; break;
    case LPX_SHFL_BFLY: j = l ^ (int32_t)bv; pv = j <= maxl; break;
    default: j = minl | (int32_t)(bv & ~seg); pv = j <= maxl; break;
    }
    src[l] = (uint32_t)(pv ? j : l);
    ok[l] = (uint32_t)pv;
  });
  EMU_EACH(m, val[l] = (uint32_t)a[src[l]]);
  EMU_EACH(m, { d[l] = val[l]; if (p) p[l] = ok[l]; });
  return 0;
}

/* ---------------------------------------------------------------- votes */

/* vote.sync.{all,any,uni}.pred d, p, mask and vote.sync.ballot.b32. */
HANDLER(op_vote)
{
  uint32_t mm;
  BY_MASK(2, op_vote);
  if (member_mask(w, in, m, 2, &mm)) return -1;
  const emu_op *po = EMU_OP(w, in, 1);
  uint32_t ballot = lpx_emu_pred_mask(w, po->reg, po->neg, m);
  uint64_t *d = D(0), r;
  switch (in->mod[LPX_GB_VOTE]) {
  case LPX_VOTE_ALL: r = ballot == m; break;
  case LPX_VOTE_ANY: r = ballot != 0; break;
  case LPX_VOTE_UNI: r = ballot == 0 || ballot == m; break;
  default: r = ballot; break;
  }
  EMU_EACH(m, d[l] = r);
  return 0;
}

/* redux.sync.op.type d, a, mask: add/min/max (u32/s32), and/or/xor (b32), f32 min/max. */
HANDLER(op_redux)
{
  uint32_t mm;
  BY_MASK(2, op_redux);
  if (member_mask(w, in, m, 2, &mm)) return -1;
  const uint64_t *a = D(1);
  uint64_t *d = D(0);
  int op = in->mod[LPX_GB_ATOMOP], s = in->type == LPX_T_S32, f = in->type == LPX_T_F32;
  int first = __builtin_ctz(m);
  uint32_t acc = (uint32_t)a[first];
  float facc = emu_u2f(a[first]);
  EMU_EACH(m & (m - 1), {
    uint32_t x = (uint32_t)a[l];
    float fx = emu_u2f(x);
    switch (op) {
    case LPX_ATOMOP_ADD: acc += x; break;
    case LPX_ATOMOP_MIN: if (f) facc = fx < facc || facc != facc ? fx : facc; else acc = s ? (uint32_t)((int32_t)x < (int32_t)acc ? x : acc) : (x < acc ? x : acc); break;
    case LPX_ATOMOP_MAX: if (f) facc = fx > facc || facc != facc ? fx : facc; else acc = s ? (uint32_t)((int32_t)x > (int32_t)acc ? x : acc) : (x > acc ? x : acc); break;
    case LPX_ATOMOP_AND: acc &= x; break;
    case LPX_ATOMOP_OR: acc |= x; break;
    case LPX_ATOMOP_XOR: acc ^= x; break;
    }
  });
  uint64_t r = f ? emu_f2u(facc) : acc;
  EMU_EACH(m, d[l] = r);
  return 0;
}

/* match.sync.any / .all: lanes holding the same value. */
HANDLER(op_match)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int pipe = o0->kind == EO_VEC, base = pipe ? 3 : 1;
  uint32_t mm;
  BY_MASK(base + 1, op_match);
  if (member_mask(w, in, m, base + 1, &mm)) return -1;
  uint64_t *d = D(pipe ? 1 : 0), *p = pipe ? D(2) : NULL;
  const uint64_t *a = D(base);
  uint64_t mk = in->type == LPX_T_B64 ? ~0ull : 0xffffffffull;
  uint32_t same[32];
  EMU_EACH(m, { uint32_t s = 0; int me = l; EMU_EACH(m, s |= (uint32_t)((a[l] & mk) == (a[me] & mk)) << l); same[me] = s; });
  int all = in->mod[LPX_GB_MATCH] == LPX_MATCH_ALL;
  EMU_EACH(m, {
    int eq = same[l] == m;
    d[l] = all ? (eq ? m : 0) : same[l];
    if (p) p[l] = (uint64_t)eq;
  });
  return 0;
}

/* activemask.b32 d: the lanes executing together here. */
HANDLER(op_activemask) { uint64_t *d = D(0); uint32_t cur = w->cur; EMU_EACH(m, d[l] = cur); return 0; }

/* elect.sync d|p, mask: the lowest executing lane of the mask is the leader. */
HANDLER(op_elect)
{
  const emu_op *o0 = EMU_OP(w, in, 0);
  int pipe = o0->kind == EO_VEC, base = pipe ? 3 : 1;
  uint32_t mm;
  BY_MASK(base, op_elect);
  if (member_mask(w, in, m, base, &mm)) return -1;
  uint64_t *d = D(pipe ? 1 : 0), *p = pipe ? D(2) : NULL;
  uint32_t leader = (uint32_t)__builtin_ctz(m & mm ? m & mm : m);
  EMU_EACH(m, { d[l] = leader; if (p) p[l] = (uint32_t)l == leader; });
  return 0;
}

/* Handler for a warp-collective row. */
emu_fn lpx_emu_pick_warp(const emu_inst *in)
{
  switch (in->op) {
  case LPX_OP_SHFL: return op_shfl;
  case LPX_OP_VOTE: return op_vote;
  case LPX_OP_REDUX: return op_redux;
  case LPX_OP_MATCH: case LPX_OP_MATCH2: return op_match;
  case LPX_OP_ACTMASK: return op_activemask;
  case LPX_OP_ELECT: return op_elect;
  default: return NULL;
  }
}
