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
  int sink_ok;          /* may a destination be the sink _ (setp, atom, ...)? */
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
    if (want == LPX_T_F32 && isfinite(x) && isinf((float)x)) {
      snprintf(msg, sizeof msg, "is %.17g, which overflows .f32", x);
      return opfail(v, msg);
    }
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
  if (o->kind == LPX_OPD_SINK) {
    if (v->sink_ok) return 0;
    snprintf(msg, sizeof msg, "is the sink _, which %s does not accept as a destination; give a register", v->form->info.text);
    return opfail(v, msg);
  }
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
  int sink_ok = v->sink_ok;
  v->sink_ok = 1;   /* {a, _, c, _}: vector elements may be discarded */
  for (int e = 1; e <= vec; e++) {
    int rc = dest ? check_dst(v, &ops[i + e], want) : check_src(v, &ops[i + e], want, 0);
    if (rc) { v->sink_ok = sink_ok; return rc; }
  }
  v->sink_ok = sink_ok;
  return 0;
}

/* Check mov's pack/unpack vector {a, b[, c, d]}: only for .bN types, with
 * 2 or 4 elements that are each bits/n wide (registers; sources may also be
 * numbers, destinations the sink _). */
static int check_pack(vctx *v, lpx_operand *ops, uint32_t i, int want, int dest)
{
  char msg[256];
  const lpx_type_desc *w = &lpx_types[want];
  int n = ops[i].kind == LPX_OPD_VEC ? ops[i].aux : 0;
  if (n != 2 && n != 4) return opfail(v, "must be a vector {a, b} or {a, b, c, d} to pack or unpack");
  if (w->kind != 'B') {
    snprintf(msg, sizeof msg, "is a vector, but packing and unpacking need a .b%d type (write mov.b%d)", w->bits, w->bits);
    return opfail(v, msg);
  }
  int eb = w->bits / n;
  for (int e = 1; e <= n; e++) {
    lpx_operand *o = &ops[i + e];
    if (dest && o->kind == LPX_OPD_SINK) continue;
    if (o->kind == LPX_OPD_REG) {
      if (o->id < 0 || (size_t)o->id >= v->f->nregs) return opfail(v, "names a register of another kernel");
      int have = v->f->reg_type[o->id];
      if (lpx_types[have].bits == eb && have != LPX_T_PRED) continue;
      snprintf(msg, sizeof msg, "element %d is a %s register; .b%d with %d elements needs %d-bit registers",
               e, lpx_types[have].name, w->bits, n, eb);
      return opfail(v, msg);
    }
    if (!dest && eb >= 16 && (o->kind == LPX_OPD_NUM || o->kind == LPX_OPD_INT)) {
      int rc = check_src(v, o, eb == 16 ? LPX_T_B16 : eb == 32 ? LPX_T_B32 : LPX_T_B64, 0);
      if (rc) return rc;
      continue;
    }
    snprintf(msg, sizeof msg, "element %d must be a %d-bit register", e, eb);
    return opfail(v, msg);
  }
  return 0;
}

/* Check d|p pipes: first part via want (or any 32-bit for G), second a predicate. */
static int check_pipe(vctx *v, lpx_operand *ops, uint32_t i, int want)
{
  if (ops[i].kind != LPX_OPD_PIPE) return check_dst(v, &ops[i], want);
  if (check_dst(v, &ops[i + 1], want)) return -1;
  if (ops[i + 2].kind == LPX_OPD_SINK) return 0;   /* d|_ discards the predicate */
  return check_dst(v, &ops[i + 2], LPX_T_PRED);
}

/* May a form's address be a 32-bit register? Yes in the windowed spaces
 * (shared, local, param, const); global and generic addresses are 64-bit.
 * SPACE and SPACE2 list global shared local param const generic ...: a
 * space other than none (0), global (1) or generic (6) is windowed. */
static int narrow_space(const lpx_form *fo)
{
  int s1 = fo->modsel[LPX_GB_SPACE], s2 = fo->modsel[LPX_GB_SPACE2];
  return (s1 > 1 && s1 != 6) || (s2 > 1 && s2 != 6) || fo->modsel[LPX_GB_SHARED] != 0;
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
  case 'm':
    if (o->kind != LPX_OPD_ADDR) return opfail(v, "must be an address: ptx.addr(reg, offset) or a shared/param symbol");
    if (o->aux == LPX_OPD_REG && o->id >= 0 && (size_t)o->id < v->f->nregs && v->m->address_size == 64 &&
        lpx_types[v->f->reg_type[o->id]].bits == 32 && !narrow_space(v->form))
      return opfail(v, "is an address in a 32-bit register; global and generic addresses are 64-bit (use a 64-bit register)");
    return 0;
  case 'v': return check_vec(v, ops, i, t, 1);
  case 'V': return check_vec(v, ops, i, t, 0);
  case 'l': return o->kind == LPX_OPD_LABEL || o->kind == LPX_OPD_SYM ? 0 : opfail(v, "must be a label");
  case 's': return o->kind == LPX_OPD_SYM ? 0 : check_src(v, o, t, 1);
  case 'w': return check_pack(v, ops, i, t, 1);
  case 'y': return check_pack(v, ops, i, t, 0);
  case 'c': return check_src(v, o, LPX_T_B64, 0);
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
    /* a vector where the letter wants none (or the reverse) fails this
     * alternative with a weaker message than a real mismatch would */
    int vec = ops[starts[k]].kind == LPX_OPD_VEC;
    int fits = vec ? strchr("vVwyk", alt[i]) != NULL : strchr("wy", alt[i]) == NULL;
    if (check_letter(v, alt[i], ops, starts[k])) return fits ? -1 : -2;
    k++;
  }
  return 0;
}

/* ------------------------------------------------------------ form rules */

/* Does the form carry the modifier spelled mod from group g? */
static int has_mod(const lpx_form *f, int g, const char *mod)
{
  return f->modsel[g] && f->modsel[g] == lpx_group_index(g, mod, strlen(mod));
}

/* Does the form carry any modifier of group g? */
static int has_group(const lpx_form *f, int g) { return (int)(f->groups_seen >> g & 1); }

/* Type kind of a form's type slot: 'U', 'S', 'B', 'F', 'H', 'P' or 0. */
static char kind_of(int t) { return t >= 0 ? lpx_types[t].kind : 0; }

/* Is the type an integer type (u, s or b)? */
static int is_int_kind(char k) { return k == 'U' || k == 'S' || k == 'B'; }

/* Fail with "<form>: <fmt...>" for a modifier/type combination. */
#define RULE_FAIL(...) do { char rule_msg_[400]; snprintf(rule_msg_, sizeof rule_msg_, __VA_ARGS__); \
  return lpx_fail(m->ctx, "%s: %s", text, rule_msg_); } while (0)

/* Modifier and type combinations the table's rows cannot express: rounding
 * on integers, .lo/.hi on floats, cvt's rounding rules, comparison kinds,
 * atomic operation/type pairs, and PTX/sm needs of some combinations. */
static int check_rules(lpx_module *m, const lpx_form *fo, int count)
{
  const lpx_form_info *fi = &fo->info;
  const char *text = fi->text;
  int t = fi->type, t2 = fi->type2;
  char k = kind_of(t);
  int bits = t >= 0 ? lpx_types[t].bits : 0;
  int rnd = has_group(fo, LPX_GB_RND), irnd = has_group(fo, LPX_GB_IRND);
  int approx = has_group(fo, LPX_GB_APPROX), ftz = has_group(fo, LPX_GB_FTZ);
  switch (fi->op) {
  case LPX_OP_ADD: case LPX_OP_SUB: case LPX_OP_MUL: case LPX_OP_MAD: case LPX_OP_DIV:
  case LPX_OP_ABS: case LPX_OP_NEG: case LPX_OP_MIN: case LPX_OP_MAX:
    if (is_int_kind(k)) {
      if (rnd || ftz || approx || has_group(fo, LPX_GB_NAN) || has_group(fo, LPX_GB_XORSIGN) || has_group(fo, LPX_GB_ABSNAN))
        RULE_FAIL("rounding, .ftz, .approx, .NaN and .xorsign apply to floating-point types only, not .%s", lpx_types[t].name);
      if (has_group(fo, LPX_GB_SAT) && t != LPX_T_S32)
        RULE_FAIL(".sat applies to .s32 (and floats) only");
      if (has_group(fo, LPX_GB_CC) && bits < 32) RULE_FAIL(".cc needs a 32- or 64-bit integer type");
    } else {
      if (has_group(fo, LPX_GB_MULMODE)) RULE_FAIL(".lo, .hi and .wide apply to integer types only, not .%s", lpx_types[t].name);
      if (has_group(fo, LPX_GB_CC)) RULE_FAIL(".cc applies to integer types only");
      if (t == LPX_T_F64 && (ftz || has_group(fo, LPX_GB_SAT))) RULE_FAIL(".ftz and .sat do not apply to .f64");
    }
    if (has_group(fo, LPX_GB_RELU) && t != LPX_T_S16 && t != LPX_T_S32 && k != 'H' &&
        t != LPX_T_F16 && t != LPX_T_BF16)
      RULE_FAIL(".relu applies to .s16, .s32, .f16, .f16x2, .bf16 and .bf16x2 only");
    if ((fi->op == LPX_OP_MUL || fi->op == LPX_OP_MAD) && is_int_kind(k)) {
      if (!has_group(fo, LPX_GB_MULMODE)) RULE_FAIL("integer %s needs .lo, .hi or .wide", lpx_isa_rows[fi->op].name);
      if (fi->wide && bits > 32) RULE_FAIL(".wide takes a 16- or 32-bit source type (the result is twice as wide)");
      if (has_group(fo, LPX_GB_SAT) && !has_mod(fo, LPX_GB_MULMODE, "hi"))
        RULE_FAIL(".sat needs .hi (mad.hi.sat.s32)");
    }
    if (fi->op == LPX_OP_MAD && k == 'F' && !rnd) RULE_FAIL("floating-point mad needs a rounding modifier: .rn .rz .rm .rp");
    if (fi->op == LPX_OP_DIV && t == LPX_T_F32 && !rnd && !approx)
      RULE_FAIL("div.f32 needs .rn/.rz/.rm/.rp (IEEE), .approx or .full");
    if (fi->op == LPX_OP_DIV && t == LPX_T_F64 && (!rnd || approx))
      RULE_FAIL("div.f64 needs a rounding modifier (.rn .rz .rm .rp); .approx and .full are f32 only");
    if ((fi->op == LPX_OP_ADD || fi->op == LPX_OP_SUB || fi->op == LPX_OP_MUL) && rnd && (k == 'H' || t == LPX_T_F16 || t == LPX_T_BF16) &&
        !has_mod(fo, LPX_GB_RND, "rn"))
      RULE_FAIL("half-precision %s takes .rn only", lpx_isa_rows[fi->op].name);
    break;
  case LPX_OP_FMA:
    if (has_group(fo, LPX_GB_RELU) && k != 'H' && t != LPX_T_F16 && t != LPX_T_BF16)
      RULE_FAIL(".relu applies to .f16, .f16x2, .bf16 and .bf16x2 only");
    if (t == LPX_T_F64 && (ftz || has_group(fo, LPX_GB_SAT))) RULE_FAIL(".ftz and .sat do not apply to .f64");
    break;
  case LPX_OP_RCP: case LPX_OP_SQRT:
    if (!rnd && !approx) RULE_FAIL("%s needs .rn/.rz/.rm/.rp (IEEE) or .approx", lpx_isa_rows[fi->op].name);
    if (has_mod(fo, LPX_GB_APPROX, "full")) RULE_FAIL(".full applies to div only");
    if (t == LPX_T_F64 && approx && (fi->op == LPX_OP_SQRT || !ftz))
      RULE_FAIL("%s", fi->op == LPX_OP_SQRT ? "sqrt.f64 has no .approx form; use .rn" : "rcp.approx.f64 needs .ftz (rcp.approx.ftz.f64)");
    if (t == LPX_T_F64 && rnd && ftz) RULE_FAIL(".ftz does not apply to IEEE .f64 %s", lpx_isa_rows[fi->op].name);
    break;
  case LPX_OP_SETP: case LPX_OP_SET: {
    int ct = fi->op == LPX_OP_SET ? t2 : t;
    char ck = kind_of(ct);
    int cmp = fo->modsel[LPX_GB_CMP];    /* eq ne lt le gt ge | lo ls hi hs | equ ... nan */
    if (ck == 'B' && cmp > 2) RULE_FAIL(".b%d compares with .eq or .ne only; use .u%d or .s%d to order", lpx_types[ct].bits, lpx_types[ct].bits, lpx_types[ct].bits);
    if (cmp >= 7 && cmp <= 10 && ck != 'U') RULE_FAIL(".lo/.ls/.hi/.hs compare unsigned integers only; use .lt/.le/.gt/.ge");
    if (cmp >= 11 && ck != 'F' && ck != 'H') RULE_FAIL("unordered comparisons (.equ .ltu .num .nan ...) apply to floating-point types only");
    if (ftz && ck != 'F' && ck != 'H') RULE_FAIL(".ftz applies to floating-point comparisons only");
    break;
  }
  case LPX_OP_CVT: {
    char dk = kind_of(t), sk = kind_of(t2);
    int db = bits, sb = t2 >= 0 ? lpx_types[t2].bits : 0;
    if (dk == 'H' || sk == 'H' || t == LPX_T_TF32) {
      /* packed conversions: {f16,bf16}x2 <- two f32; fp8x2 <- two f32 or an f16x2 */
      int fp8 = t == LPX_T_E4M3X2 || t == LPX_T_E5M2X2 || t2 == LPX_T_E4M3X2 || t2 == LPX_T_E5M2X2;
      if (fp8 && m->sm == 89 && m->ptx_version < 81)
        RULE_FAIL(".e4m3x2/.e5m2x2 on sm_89 needs PTX ISA 8.1; this kernel uses %d.%d (raise the kernel's version)",
                  m->ptx_version / 10, m->ptx_version % 10);
      if (t == LPX_T_TF32) {
        if (t2 != LPX_T_F32) RULE_FAIL(".tf32 converts from .f32 only");
        if (!has_mod(fo, LPX_GB_RND, "rna") && !has_mod(fo, LPX_GB_RND, "rn") && !has_mod(fo, LPX_GB_RND, "rz"))
          RULE_FAIL("cvt to .tf32 needs .rna (or .rn/.rz on sm_90+)");
        if (!has_mod(fo, LPX_GB_RND, "rna") && m->sm < 90)
          RULE_FAIL("cvt.rn/.rz to .tf32 needs sm_90 or newer; this kernel targets %s (use .rna)", m->target);
        if (has_group(fo, LPX_GB_SAT)) {
          int rna = has_mod(fo, LPX_GB_RND, "rna");
          if (!rna && m->sm < 100) RULE_FAIL(".satfinite with .rn/.rz to .tf32 needs sm_100 or newer; this kernel targets %s", m->target);
          if (m->ptx_version < (rna ? 81 : 86))
            RULE_FAIL(".satfinite to .tf32 needs PTX ISA %s; this kernel uses %d.%d", rna ? "8.1" : "8.6",
                      m->ptx_version / 10, m->ptx_version % 10);
        }
        break;
      }
      if (sk == 'H' && dk != 'H') RULE_FAIL("cannot convert a packed .%s to a scalar; unpack it first (mov.b32 {lo, hi}, x)", lpx_types[t2].name);
      if (dk == 'H' && t2 == LPX_T_F32 && count != 3)
        RULE_FAIL("cvt to .%s from .f32 takes two sources (d, hi, lo); got %d operand(s)", lpx_types[t].name, count);
      if (dk == 'H' && !rnd) RULE_FAIL("cvt to .%s needs a rounding modifier (.rn)", lpx_types[t].name);
      break;
    }
    if (is_int_kind(dk) && is_int_kind(sk)) {
      if (rnd || irnd) RULE_FAIL("integer-to-integer cvt takes no rounding modifier");
    } else if (dk == 'F' && sk == 'F') {
      if (t == t2) {
        if (rnd) RULE_FAIL("cvt between the same float type takes only integer rounding (.rni .rzi .rmi .rpi)");
      } else if (db < sb || (db == sb)) {
        if (!rnd || irnd) RULE_FAIL("narrowing float cvt needs a rounding modifier: .rn .rz .rm .rp");
      } else if (rnd || irnd) {
        RULE_FAIL("widening float cvt is exact and takes no rounding modifier");
      }
    } else if (dk == 'F' && is_int_kind(sk)) {
      if (!rnd || irnd) RULE_FAIL("integer-to-float cvt needs a rounding modifier: .rn .rz .rm .rp");
    } else if (is_int_kind(dk) && sk == 'F') {
      if (!irnd || rnd) RULE_FAIL("float-to-integer cvt needs an integer rounding modifier: .rni .rzi .rmi .rpi");
    }
    if ((t == LPX_T_BF16 && t2 != LPX_T_F32) || (t2 == LPX_T_BF16 && t != LPX_T_F32 && t != LPX_T_BF16)) {
      if (m->sm < 90) RULE_FAIL("cvt between .%s and .%s needs sm_90 or newer; this kernel targets %s (go through .f32)",
                                lpx_types[t].name, lpx_types[t2].name, m->target);
      if (m->ptx_version < 78) RULE_FAIL("cvt between .%s and .%s needs PTX ISA 7.8", lpx_types[t].name, lpx_types[t2].name);
    }
    break;
  }
  case LPX_OP_VOTE:
    if (has_mod(fo, LPX_GB_VOTE, "ballot") != (t == LPX_T_B32))
      RULE_FAIL("vote.sync.ballot takes .b32; .all, .any and .uni take .pred");
    break;
  case LPX_OP_REDUX: {
    int op = fo->modsel[LPX_GB_ATOMOP];   /* add min max and or xor inc dec exch cas */
    if (op >= 7) RULE_FAIL("redux.sync reduces with .add, .min, .max, .and, .or or .xor");
    if (op >= 4 && t != LPX_T_B32) RULE_FAIL(".and/.or/.xor reduce .b32");
    if (op <= 3 && t == LPX_T_B32) RULE_FAIL(".add/.min/.max reduce .u32 or .s32 (or .f32 min/max)");
    if (t == LPX_T_F32 && op == 1) RULE_FAIL(".f32 reduces with .min or .max only");
    if ((has_group(fo, LPX_GB_ABSNAN) || has_group(fo, LPX_GB_NAN)) && t != LPX_T_F32) RULE_FAIL(".abs and .NaN apply to .f32 only");
    break;
  }
  case LPX_OP_ATOM: case LPX_OP_RED: {
    int op = fo->modsel[LPX_GB_ATOMOP];
    int half = t == LPX_T_F16 || t == LPX_T_BF16 || k == 'H';
    int ok = 1;
    const char *want = "";
    switch (op) {
    case 1: ok = t == LPX_T_U32 || t == LPX_T_S32 || t == LPX_T_U64 || t == LPX_T_F32 || t == LPX_T_F64 || half;
      want = ".u32 .s32 .u64 .f32 .f64 .f16 .f16x2 .bf16 .bf16x2"; break;
    case 2: case 3: ok = t == LPX_T_U32 || t == LPX_T_S32 || t == LPX_T_U64 || t == LPX_T_S64 || half;
      want = ".u32 .s32 .u64 .s64 (.f16/.bf16 on sm_90)"; break;
    case 4: case 5: case 6: ok = t == LPX_T_B32 || t == LPX_T_B64; want = ".b32 .b64"; break;
    case 7: case 8: ok = t == LPX_T_U32; want = ".u32"; break;
    case 9: ok = fi->op == LPX_OP_ATOM && (t == LPX_T_B32 || t == LPX_T_B64 || t == LPX_T_B128); want = ".b32 .b64 .b128 (atom only)"; break;
    case 10: ok = fi->op == LPX_OP_ATOM && (t == LPX_T_B16 || t == LPX_T_B32 || t == LPX_T_B64 || t == LPX_T_B128); want = ".b16 .b32 .b64 .b128 (atom only)"; break;
    default: break;
    }
    static const char *const opnames[] = { "?", "add", "min", "max", "and", "or", "xor", "inc", "dec", "exch", "cas" };
    if (!ok) RULE_FAIL(".%s does not take .%s; valid types: %s", opnames[op <= 10 ? op : 0],
                       t >= 0 ? lpx_types[t].name : "?", want);
    if (half && !has_group(fo, LPX_GB_NOFTZ)) RULE_FAIL(".%s needs .noftz (e.g. %s.global.add.noftz.%s)", lpx_types[t].name, lpx_isa_rows[fi->op].name, lpx_types[t].name);
    if (!half && has_group(fo, LPX_GB_NOFTZ)) RULE_FAIL(".noftz applies to .f16/.bf16 types only");
    if (half && op != 1 && m->sm < 90) RULE_FAIL("half-precision .min/.max needs sm_90 or newer; this kernel targets %s", m->target);
    if (half && op != 1 && fi->vec == 1) RULE_FAIL("half-precision .min/.max needs a vector form (.v2 .v4 .v8)");
    if (fi->op == LPX_OP_ATOM) {
      int hint = has_group(fo, LPX_GB_HINT);
      int need = (op == 10 ? 4 : 3) + hint;
      if (fi->vec == 1 && count != need)
        RULE_FAIL("takes %d operands (d, [addr], %s%s), got %d", need, op == 10 ? "compare, new" : "b",
                  hint ? ", cache-policy" : "", count);
    }
    break;
  }
  case LPX_OP_LD: case LPX_OP_ST: case LPX_OP_LDU: {
    if (fi->op == LPX_OP_LDU && has_group(fo, LPX_GB_SPACE) && !has_mod(fo, LPX_GB_SPACE, "global"))
      RULE_FAIL("ldu reads the global space only");
    int sem = fo->modsel[LPX_GB_SEM];     /* weak relaxed acquire release volatile mmio acq_rel sc */
    if ((sem == 2 || sem == 3 || sem == 4 || sem == 6) && !has_group(fo, LPX_GB_SCOPE))
      RULE_FAIL(".relaxed/.acquire/.release/.mmio need a scope: .cta .cluster .gpu or .sys");
    if (has_group(fo, LPX_GB_SCOPE) && !(sem == 2 || sem == 3 || sem == 4 || sem == 6))
      RULE_FAIL("a scope (.cta .gpu ...) needs .relaxed, .acquire or .release");
    if (fi->vec == 8 && bits != 32) RULE_FAIL(".v8 needs 32-bit elements (.b32 .u32 .s32 .f32)");
    if (has_group(fo, LPX_GB_EVICT2) && fi->vec * bits != 256)
      RULE_FAIL(".L2::evict_* on %s needs a 256-bit access (.v8.b32 or .v4.b64)", lpx_isa_rows[fi->op].name);
    if (fi->vec * bits == 256) {
      if (m->sm < 100) RULE_FAIL("256-bit vector accesses need sm_100 or newer; this kernel targets %s", m->target);
      if (m->ptx_version < 88) RULE_FAIL("256-bit vector accesses need PTX ISA 8.8; this kernel uses %d.%d",
                                         m->ptx_version / 10, m->ptx_version % 10);
    }
    if (fi->vec * bits > 256 || (fi->vec * bits > 128 && fi->vec * bits != 256))
      RULE_FAIL(".v%d of .%s is %d bits; vector accesses are at most 128 bits (256 on sm_100)", fi->vec, lpx_types[t].name, fi->vec * bits);
    break;
  }
  case LPX_OP_CVTA:
    if (has_mod(fo, LPX_GB_SPACE, "generic") || has_mod(fo, LPX_GB_SPACE, "param::entry") || has_mod(fo, LPX_GB_SPACE, "param::func"))
      RULE_FAIL("cvta converts between generic and .global .shared .local .const or .param addresses");
    if (m->address_size == 64 && t == LPX_T_U32) RULE_FAIL("addresses are 64-bit in this module; use .u64");
    break;
  case LPX_OP_FENCE:
    if (has_group(fo, LPX_GB_SEM) && !has_group(fo, LPX_GB_SCOPE) && !has_group(fo, LPX_GB_PROXY))
      RULE_FAIL("fence%s needs a scope: .cta .cluster .gpu or .sys", "");
    break;
  case LPX_OP_BAR: case LPX_OP_BARRIER:
    if (has_mod(fo, LPX_GB_BARMODE, "arrive") && count != 2) RULE_FAIL("bar.arrive takes a barrier and a thread count");
    if (has_mod(fo, LPX_GB_BARMODE, "red") != (has_group(fo, LPX_GB_BARRED) || has_group(fo, LPX_GB_BOOL)))
      RULE_FAIL(".red goes with one of .popc.u32, .and.pred, .or.pred");
    if (has_group(fo, LPX_GB_BARRED) && t != LPX_T_U32) RULE_FAIL(".red.popc gives a .u32");
    if (has_group(fo, LPX_GB_BOOL) && t != LPX_T_PRED) RULE_FAIL(".red.and/.red.or give a .pred");
    break;
  default: break;
  }
  return 0;
}
#undef RULE_FAIL

/* Validate an instruction's operands; untyped numbers get their type here. */
int lpx_validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops)
{
  uint32_t starts[64];
  int count = top_count(ops, (uint32_t)nops, starts, 64);
  if (count < 0) return lpx_fail(m->ctx, "%s: malformed operand list", form->info.text);
  const char *sig = form->info.op >= 0 ? lpx_isa_rows[form->info.op].sig : "*";
  vctx v = { m, f, form, 0, 0, 0 };
  int op = form->info.op;
  v.sink_ok = op < 0 || sig[0] == '*' || op == LPX_OP_SETP || op == LPX_OP_ATOM || op == LPX_OP_ELECT;
  if (op >= 0 && check_rules(m, form, count)) return -1;
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
    if (rc < 0 && (!first_err || (first_err == -2 && rc == -1))) { first_err = rc; memcpy(saved, m->ctx->error, LPX_MSG_MAX); }
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
