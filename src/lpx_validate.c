/* Operand validation against the instruction table's signatures: operand
 * counts, kinds and register types, and typing of untyped Lua numbers. */
#include "lpx_internal.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct vctx {
  lpx_module *m;
  lpx_func *f;
  const lpx_form *form;
  int relaxed;          /* ld/st/cvt: registers may be wider than the type */
  int pos;              /* 1-based top-level operand position, for messages */
} vctx;

/* Number of array entries an operand occupies (itself and its children). */
static uint32_t operand_span(const lpx_operand *ops, uint32_t i, uint32_t n)
{
  uint32_t k = ops[i].kind, span = 1;
  if (k != LPX_OPD_VEC && k != LPX_OPD_PIPE && k != LPX_OPD_PAREN) return 1;
  uint32_t children = k == LPX_OPD_PIPE ? 2u : (uint32_t)ops[i].aux;
  for (uint32_t c = 0; c < children && i + span < n; c++) span += operand_span(ops, i + span, n);
  return span;
}

/* Count top-level operands; -1 when a vector's children run past the end. */
static int top_count(const lpx_operand *ops, uint32_t n, uint32_t *starts, int cap)
{
  int count = 0;
  for (uint32_t i = 0; i < n;) {
    uint32_t span = operand_span(ops, i, n);
    if (i + span > n || ops[i].aux < 0) return -1;
    if (count < cap) starts[count] = i;
    count++;
    i += span;
  }
  return count;
}

/* Write a register's PTX name ("%r3") into buf. */
static const char *reg_name(const lpx_func *f, int32_t reg, char *buf, size_t cap)
{
  static const char *const prefixes[LPX_RC__COUNT] = {
#define X(id, decl, prefix) prefix,
    LPX_REGCLASSES(X)
#undef X
  };
  int t = f->reg_type[reg];
  snprintf(buf, cap, "%s%d", prefixes[lpx_types[t].regclass], f->reg_index[reg]);
  return buf;
}

/* May a register of type have be used where the instruction wants want? */
static int type_compat(int have, int want, int relaxed)
{
  const lpx_type_desc *h = &lpx_types[have], *w = &lpx_types[want];
  if (have == want) return 1;
  if (have == LPX_T_PRED || want == LPX_T_PRED) return 0;
  if (h->bits != w->bits) {
    int intish = h->kind == 'B' || h->kind == 'U' || h->kind == 'S';
    return relaxed && h->bits > w->bits && intish && w->kind != 'F';
  }
  if (w->kind == 'B' || h->kind == 'B') return 1;
  if (w->kind == 'U' || w->kind == 'S') return h->kind == 'U' || h->kind == 'S';
  return 0;
}

/* Words describing what a type slot accepts, for messages. */
static const char *want_words(int want, char *buf, size_t cap)
{
  const lpx_type_desc *w = &lpx_types[want];
  if (want == LPX_T_PRED) snprintf(buf, cap, "a predicate");
  else if (w->kind == 'U' || w->kind == 'S')
    snprintf(buf, cap, "a u%d/s%d/b%d register or an integer", w->bits, w->bits, w->bits);
  else if (w->kind == 'B') snprintf(buf, cap, "a %d-bit register or an integer", w->bits);
  else snprintf(buf, cap, "a %s (or b%d) register", w->name, w->bits);
  return buf;
}

/* Fail with "<form>: operand N <what>". */
static int opfail(vctx *v, const char *what)
{
  return lpx_fail(v->m->ctx, "%s: operand %d %s", v->form->info.text, v->pos, what);
}

/* Give an untyped Lua number its type's bits, or fail. */
static int type_number(vctx *v, lpx_operand *o, int want)
{
  const lpx_type_desc *w = &lpx_types[want];
  char msg[256];
  double x = o->fval;
  if (w->kind == 'F' && (want == LPX_T_F32 || want == LPX_T_F64)) {
    o->kind = LPX_OPD_FIMM;
    o->type = want;
    if (want == LPX_T_F32) { float fv = (float)x; uint32_t u; memcpy(&u, &fv, 4); o->ival = u; }
    else memcpy(&o->ival, &x, 8);
    return 0;
  }
  if (w->kind == 'F' || w->kind == 'H' || want == LPX_T_PRED) {
    snprintf(msg, sizeof msg, "is the number %.17g, but PTX has no .%s immediates; put the bits in a register (mov.b%d)", x, w->name, w->bits);
    return opfail(v, msg);
  }
  if (x != floor(x) || !isfinite(x)) {
    snprintf(msg, sizeof msg, "is %.17g, expected an integer for .%s", x, w->name);
    return opfail(v, msg);
  }
  double lo = w->bits >= 64 ? -9223372036854775808.0 : -ldexp(1.0, w->bits - 1);
  double hi = w->bits >= 64 ? 18446744073709551615.0 : ldexp(1.0, w->bits) - 1;
  if (x < lo || x > hi) {
    snprintf(msg, sizeof msg, "is %.17g, which does not fit in %d bits", x, w->bits);
    return opfail(v, msg);
  }
  o->kind = LPX_OPD_IMM;
  o->type = want;
  o->ival = x >= 9223372036854775808.0 ? (int64_t)(uint64_t)x : (int64_t)x;
  return 0;
}

/* Check a register operand against a wanted type. */
static int check_reg(vctx *v, const lpx_operand *o, int want, int allow_neg)
{
  char name[32], words[128], msg[320];
  if (o->id < 0 || (size_t)o->id >= v->f->nregs) return opfail(v, "names a register of another kernel");
  int have = v->f->reg_type[o->id];
  if (o->aux && !allow_neg) return opfail(v, "is a negated predicate; negation is only valid on predicate sources");
  if (type_compat(have, want, v->relaxed)) return 0;
  snprintf(msg, sizeof msg, "is a %s register (%s); expected %s", lpx_types[have].name,
           reg_name(v->f, o->id, name, sizeof name), want_words(want, words, sizeof words));
  return opfail(v, msg);
}

/* Check a source operand: register, typed immediate or number. */
static int check_src(vctx *v, lpx_operand *o, int want, int allow_special)
{
  char words[128], msg[256];
  switch (o->kind) {
  case LPX_OPD_REG: return check_reg(v, o, want, want == LPX_T_PRED);
  case LPX_OPD_NUM: return type_number(v, o, want);
  case LPX_OPD_INT:
    if (lpx_types[want].kind == 'F' || lpx_types[want].kind == 'H') return opfail(v, "is an integer literal where a float is expected");
    o->kind = LPX_OPD_IMM; o->type = want; return 0;
  case LPX_OPD_IMM: case LPX_OPD_FIMM:
    if (lpx_types[o->type].bits == lpx_types[want].bits) return 0;
    snprintf(msg, sizeof msg, "is a .%s immediate; expected %s", lpx_types[o->type].name, want_words(want, words, sizeof words));
    return opfail(v, msg);
  case LPX_OPD_SPECIAL:
    if (allow_special && type_compat(lpx_special_type(o->id), want, 0)) {
      int ptx, sm;
      lpx_special_gate(o->id, &ptx, &sm);
      if (v->m->sm < sm) {
        snprintf(msg, sizeof msg, "%s needs sm_%d or newer; this kernel targets %s", lpx_special_name(o->id), sm, v->m->target);
        return opfail(v, msg);
      }
      return 0;
    }
    snprintf(msg, sizeof msg, "is the special register %s, valid only as a mov/cvt source of type .%s",
             lpx_special_name(o->id), lpx_types[lpx_special_type(o->id)].name);
    return opfail(v, msg);
  default:
    snprintf(msg, sizeof msg, "has the wrong kind; expected %s", want_words(want, words, sizeof words));
    return opfail(v, msg);
  }
}

/* Check a destination: a register of the type, or the sink _. */
static int check_dst(vctx *v, const lpx_operand *o, int want)
{
  char words[128], msg[256];
  if (o->kind == LPX_OPD_SINK) return 0;
  if (o->kind == LPX_OPD_REG) return check_reg(v, o, want, 0);
  snprintf(msg, sizeof msg, "must be a destination register; expected %s", want_words(want, words, sizeof words));
  return opfail(v, msg);
}

/* Check a vector operand {a, b, ...} of width vec, or a scalar when vec == 1. */
static int check_vec(vctx *v, lpx_operand *ops, uint32_t i, int want, int dest)
{
  int vec = v->form->info.vec;
  if (vec == 1) return dest ? check_dst(v, &ops[i], want) : check_src(v, &ops[i], want, 0);
  char msg[128];
  if (ops[i].kind != LPX_OPD_VEC || ops[i].aux != vec) {
    snprintf(msg, sizeof msg, "must be a vector of %d elements ({a, b, ...}) for .v%d", vec, vec);
    return opfail(v, msg);
  }
  for (int e = 1; e <= vec; e++) {
    int rc = dest ? check_dst(v, &ops[i + e], want) : check_src(v, &ops[i + e], want, 0);
    if (rc) return rc;
  }
  return 0;
}

/* Check d|p pipes: first part via want (or any 32-bit for G), second a predicate. */
static int check_pipe(vctx *v, lpx_operand *ops, uint32_t i, int want)
{
  if (ops[i].kind != LPX_OPD_PIPE) return check_dst(v, &ops[i], want);
  if (check_dst(v, &ops[i + 1], want)) return -1;
  return check_dst(v, &ops[i + 2], LPX_T_PRED);
}

/* Check one operand against one signature letter. */
static int check_letter(vctx *v, char c, lpx_operand *ops, uint32_t i)
{
  const lpx_form_info *fi = &v->form->info;
  int t = fi->type >= 0 ? fi->type : LPX_T_B32, t2 = fi->type2 >= 0 ? fi->type2 : t;
  int wide = fi->wide && lpx_types[t].bits <= 32 ? (lpx_types[t].kind == 'S' ? LPX_T_S64 : LPX_T_U64) : t;
  if (fi->wide && lpx_types[t].bits == 16) wide = lpx_types[t].kind == 'S' ? LPX_T_S32 : LPX_T_U32;
  lpx_operand *o = &ops[i];
  switch (c) {
  case 'd': return check_dst(v, o, t);
  case 'D': return check_dst(v, o, wide);
  case 'a': return check_src(v, o, t, 0);
  case 'C': return check_src(v, o, wide, 0);
  case 'x': return check_src(v, o, t2, 1);
  case 'r': return o->kind == LPX_OPD_REG ? check_reg(v, o, t, 0) : opfail(v, "must be a register");
  case 'p': return check_dst(v, o, LPX_T_PRED);
  case 'P': return check_pipe(v, ops, i, LPX_T_PRED);
  case 'q': return o->kind == LPX_OPD_REG ? check_reg(v, o, LPX_T_PRED, 1) : opfail(v, "must be a predicate register");
  case 'u': return check_src(v, o, LPX_T_B32, 0);
  case 'g': return check_dst(v, o, LPX_T_B32);
  case 'G': case 't': return check_pipe(v, ops, i, c == 'G' ? LPX_T_B32 : t);
  case 'm': return o->kind == LPX_OPD_ADDR ? 0 : opfail(v, "must be an address: ptx.addr(reg, offset) or a shared/param symbol");
  case 'v': return check_vec(v, ops, i, t, 1);
  case 'V': return check_vec(v, ops, i, t, 0);
  case 'l': return o->kind == LPX_OPD_LABEL || o->kind == LPX_OPD_SYM ? 0 : opfail(v, "must be a label");
  case 's': return o->kind == LPX_OPD_SYM ? 0 : check_src(v, o, t, 1);
  default: return 0;
  }
}

/* Check operands against one alternative ("d a a"); 1 if the count differs. */
static int check_alt(vctx *v, const char *alt, size_t alen, lpx_operand *ops, uint32_t *starts, int count)
{
  int letters = 0;
  for (size_t i = 0; i < alen; i++) letters += alt[i] != ' ';
  if (letters != count) return 1;
  int k = 0;
  for (size_t i = 0; i < alen; i++) {
    if (alt[i] == ' ') continue;
    v->pos = k + 1;
    if (check_letter(v, alt[i], ops, starts[k])) return -1;
    k++;
  }
  return 0;
}

/* Validate an instruction's operands; untyped numbers get their type here. */
int lpx_validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops)
{
  uint32_t starts[64];
  int count = top_count(ops, (uint32_t)nops, starts, 64);
  if (count < 0) return lpx_fail(m->ctx, "%s: malformed operand list", form->info.text);
  const char *sig = form->info.op >= 0 ? lpx_isa_rows[form->info.op].sig : "*";
  vctx v = { m, f, form, 0, 0 };
  int op = form->info.op;
  v.relaxed = op == LPX_OP_LD || op == LPX_OP_ST || op == LPX_OP_LDU || op == LPX_OP_CVT;
  if (sig[0] == '*') {
    for (int k = 0; k < count && k < 64; k++) {
      lpx_operand *o = &ops[starts[k]];
      v.pos = k + 1;
      if (o->kind == LPX_OPD_NUM && check_src(&v, o, o->fval == floor(o->fval) ? LPX_T_S64 : LPX_T_F32, 0)) return -1;
    }
    return 0;
  }
  int first_err = 0;
  char saved[LPX_MSG_MAX] = "";
  for (const char *alt = sig;;) {
    const char *end = strchr(alt, ';');
    size_t len = end ? (size_t)(end - alt) : strlen(alt);
    int rc = check_alt(&v, alt, len, ops, starts, count);
    if (rc == 0) return 0;
    if (rc < 0 && !first_err) { first_err = 1; memcpy(saved, m->ctx->error, LPX_MSG_MAX); }
    if (!end) break;
    alt = end + 1;
    while (*alt == ' ') alt++;
  }
  if (first_err) { memcpy(m->ctx->error, saved, LPX_MSG_MAX); return -1; }
  char counts[128] = "";
  size_t n = 0;
  for (const char *alt = sig; alt && n + 16 < sizeof counts;) {
    int letters = 0;
    for (; *alt && *alt != ';'; alt++) letters += *alt != ' ';
    n += (size_t)snprintf(counts + n, sizeof counts - n, "%s%d", n ? " or " : "", letters);
    alt = *alt ? alt + 1 : NULL;
  }
  return lpx_fail(m->ctx, "%s takes %s operand(s), got %d", form->info.text, counts, count);
}
