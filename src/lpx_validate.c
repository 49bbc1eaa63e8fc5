/* Operand validation against the instruction table's signatures: operand
 * counts, kinds and register types, and typing of untyped Lua numbers. */
#include "lpx_internal.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
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

/* Do the operands ops[0, n) nest at most LPX_OPD_MAX_NESTING lists deep
 * (the printers and operand_span recurse that deep)? Counted in a loop. */
static int nesting_ok(const lpx_operand *ops, uint32_t n)
{
  int64_t left[LPX_OPD_MAX_NESTING];
  int depth = 0;
  for (uint32_t i = 0; i < n; i++) {
    while (depth > 0 && left[depth - 1] == 0) depth--;
    if (depth > 0) left[depth - 1]--;
    int k = ops[i].kind;
    int64_t children = k == LPX_OPD_PIPE ? 2 : k == LPX_OPD_VEC || k == LPX_OPD_PAREN || k == LPX_OPD_BRACKET ? ops[i].aux : 0;
    if (children <= 0) continue;
    if (depth == LPX_OPD_MAX_NESTING) return 0;
    left[depth++] = children;
  }
  return 1;
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
    o->type = want; return 0;   /* stays INT: printed as the literal was written */
  case LPX_OPD_IMM: case LPX_OPD_FIMM:
    if (lpx_types[o->type].bits == lpx_types[want].bits) return 0;
    if (o->kind == LPX_OPD_FIMM && o->type == LPX_T_F64 && want == LPX_T_F32) {
      o->aux = 1;   /* PTX rounds a double literal to the f32 operand; printed as written */
      return 0;
    }
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

/* Is t one of the fp8 pair types (.e4m3x2, .e5m2x2)? */
static int is_fp8x2(int t) { return t == LPX_T_E4M3X2 || t == LPX_T_E5M2X2; }

/* cvt to or from an fp8 pair: the ISA's forms are .rn.satfinite{.relu}
 * .f8x2.f32 d, a, b / .f8x2.f16x2 d, a and .rn{.relu}.f16x2.f8x2 d, a. */
static int cvt_fp8_rule(lpx_module *m, const lpx_form *fo, const char *text, int t, int t2, int count)
{
  if (!has_mod(fo, LPX_GB_RND, "rn")) RULE_FAIL("cvt with .%s takes .rn only", lpx_types[is_fp8x2(t) ? t : t2].name);
  if (is_fp8x2(t)) {
    if (!has_mod(fo, LPX_GB_SAT, "satfinite")) RULE_FAIL("cvt to .%s needs .satfinite (cvt.rn.satfinite.%s)", lpx_types[t].name, lpx_types[t].name);
    if (t2 != LPX_T_F32 && t2 != LPX_T_F16X2) RULE_FAIL(".%s converts from two .f32 or one .f16x2, not .%s", lpx_types[t].name, lpx_types[t2].name);
    if (t2 == LPX_T_F16X2 && count != 2) RULE_FAIL("cvt to .%s from .f16x2 takes one source; got %d operand(s)", lpx_types[t].name, count);
    return 0;
  }
  if (t != LPX_T_F16X2) RULE_FAIL(".%s converts to .f16x2 only, not .%s", lpx_types[t2].name, lpx_types[t].name);
  if (has_group(fo, LPX_GB_SAT)) RULE_FAIL("cvt from .%s to .f16x2 is exact and takes no .satfinite", lpx_types[t2].name);
  return 0;
}

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
      if ((is_fp8x2(t) || is_fp8x2(t2)) && cvt_fp8_rule(m, fo, text, t, t2, count)) return -1;
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

/* ================================================ Blackwell: tcgen05 ===
 * The tcgen05 rows take G_ANY: their modifiers (shapes, kinds, .xN counts,
 * ::-qualified names) are checked here against per-instruction slot lists,
 * and the variable operand lists (mma, ld/st, commit, cp, shift) likewise. */

/* One modifier slot: its spellings, and whether the form must carry one. */
typedef struct tc_slot { const char *spellings; int required; } tc_slot;

/* The modifier slots of one tcgen05 row (PTX order). */
typedef struct tc_rule { int op; tc_slot slots[6]; } tc_rule;

#define TC_CTA { "cta_group::1 cta_group::2", 1 }
#define TC_SYNC { "sync", 1 }, { "aligned", 1 }
#define TC_SHAPES "16x64b 16x128b 16x256b 32x32b 16x32bx2"
#define TC_NUMS "x1 x2 x4 x8 x16 x32 x64 x128"
enum { TC_SLOTS = 6 };

static const tc_rule tc_rules[] = {
  { LPX_OP_TCALLOC, { TC_CTA, TC_SYNC, { "shared::cta", 0 }, { "b32", 1 } } },
  { LPX_OP_TCDEALLOC, { TC_CTA, TC_SYNC, { "b32", 1 } } },
  { LPX_OP_TCRELINQ, { TC_CTA, TC_SYNC } },
  { LPX_OP_TCMMA, { { "sp", 0 }, TC_CTA, { "kind::f16 kind::tf32 kind::f8f6f4 kind::i8", 1 },
                    { "collector::a::fill collector::a::use collector::a::lastuse collector::a::discard", 0 } } },
  { LPX_OP_TCLD, { TC_SYNC, { TC_SHAPES, 1 }, { TC_NUMS, 1 }, { "pack::16b", 0 }, { "b32", 1 } } },
  { LPX_OP_TCST, { TC_SYNC, { TC_SHAPES, 1 }, { TC_NUMS, 1 }, { "unpack::16b", 0 }, { "b32", 1 } } },
  { LPX_OP_TCCOMMIT, { TC_CTA, { "mbarrier::arrive::one", 1 }, { "shared::cluster", 0 },
                       { "multicast::cluster", 0 }, { "b64", 1 } } },
  { LPX_OP_TCCP, { TC_CTA, { "128x256b 4x256b 128x128b 64x128b 32x128b", 1 },
                   { "warpx2::02_13 warpx2::01_23 warpx4", 0 }, { "b8x16", 0 }, { "b6x16_p32 b4x16_p64", 0 } } },
  { LPX_OP_TCSHIFT, { TC_CTA, { "down", 1 } } },
  { LPX_OP_TCFENCEB, { { NULL, 0 } } },
  { LPX_OP_TCFENCEA, { { NULL, 0 } } },
  { LPX_OP_TCWAITLD, { TC_SYNC } },
  { LPX_OP_TCWAITST, { TC_SYNC } },
};

/* 32-bit registers per .x1 of each tcgen05.ld/st shape (TC_SHAPES order). */
static const int tc_shape_regs[] = { 0, 1, 2, 4, 1, 1 };

/* 1-based index of tok (n chars) in a space-separated list, or 0. */
static int tc_index(const char *list, const char *tok, size_t n)
{
  int i = 1;
  for (const char *p = list; p && *p; i++) {
    const char *e = strchr(p, ' ');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, tok, n) == 0) return i;
    p = e ? e + 1 : NULL;
  }
  return 0;
}

/* The rule of a tcgen05 row, or NULL for other rows. */
static const tc_rule *tc_rule_of(int op)
{
  for (size_t i = 0; i < sizeof tc_rules / sizeof tc_rules[0]; i++)
    if (tc_rules[i].op == op) return &tc_rules[i];
  return NULL;
}

/* Write ".a .b ..." for every modifier a rule accepts (for messages). */
static void tc_list(const tc_rule *r, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int s = 0; s < TC_SLOTS && r->slots[s].spellings && n + 1 < cap; s++)
    for (const char *p = r->slots[s].spellings; p && *p && n + 1 < cap;) {
      const char *e = strchr(p, ' ');
      size_t len = e ? (size_t)(e - p) : strlen(p);
      n += (size_t)snprintf(out + n, cap - n, "%s.%.*s", n ? " " : "", (int)len, p);
      p = e ? e + 1 : NULL;
    }
}

/* Parse a tcgen05 form's modifiers into sel[slot] (1-based spelling). */
static int tc_parse_mods(vctx *v, const tc_rule *r, int *sel)
{
  const char *text = v->form->info.text, *p = text + strlen(lpx_isa_rows[r->op].name);
  char valid[512];
  while (*p == '.') {
    const char *tok = ++p, *e = strchr(p, '.');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    int s = 0, idx = 0;
    for (; s < TC_SLOTS && r->slots[s].spellings; s++)
      if ((idx = tc_index(r->slots[s].spellings, tok, n))) break;
    if (!idx || sel[s]) {
      tc_list(r, valid, sizeof valid);
      return lpx_fail(v->m->ctx, "%s: unknown or repeated modifier .%.*s for %s; valid modifiers: %s",
                      text, (int)n, tok, lpx_isa_rows[r->op].name, valid[0] ? valid : "(none)");
    }
    sel[s] = idx;
    p += n;
  }
  for (int s = 0; s < TC_SLOTS && r->slots[s].spellings; s++)
    if (r->slots[s].required && !sel[s])
      return lpx_fail(v->m->ctx, "%s: %s needs one of .%s", text, lpx_isa_rows[r->op].name, r->slots[s].spellings);
  return 0;
}

/* Fail with "<form>: <message>". */
static int tc_fail(vctx *v, const char *msg)
{
  return lpx_fail(v->m->ctx, "%s: %s", v->form->info.text, msg);
}

/* A tensor-memory address [taddr]: a 32-bit register, optionally + offset. */
static int tc_tmem(vctx *v, int pos, const lpx_operand *o)
{
  v->pos = pos;
  if (o->kind != LPX_OPD_ADDR || o->aux != LPX_OPD_REG || o->id < 0 || (size_t)o->id >= v->f->nregs ||
      lpx_types[v->f->reg_type[o->id]].bits != 32)
    return opfail(v, "must be a tensor-memory address: ptx.addr(taddr) with taddr a 32-bit register");
  return 0;
}

/* A typed source operand at a 1-based position. */
static int tc_src(vctx *v, int pos, lpx_operand *o, int want)
{
  v->pos = pos;
  return check_src(v, o, want, 0);
}

/* An integer immediate in lo..hi at a 1-based position. */
static int tc_imm(vctx *v, int pos, lpx_operand *o, int lo, int hi, const char *what)
{
  char msg[160];
  v->pos = pos;
  if (o->kind != LPX_OPD_NUM && o->kind != LPX_OPD_INT && o->kind != LPX_OPD_IMM) {
    snprintf(msg, sizeof msg, "(%s) must be an integer immediate", what);
    return opfail(v, msg);
  }
  int in_range = o->kind != LPX_OPD_NUM || fabs(o->fval) < 9.0e18;   /* no inf/huge to int64 */
  int64_t x = o->kind == LPX_OPD_NUM ? (in_range ? (int64_t)o->fval : INT64_MAX) : o->ival;
  if ((o->kind == LPX_OPD_NUM && o->fval != floor(o->fval)) || x < lo || x > hi) {
    snprintf(msg, sizeof msg, "(%s) must be an integer in %d..%d", what, lo, hi);
    return opfail(v, msg);
  }
  return check_src(v, o, LPX_T_B32, 0);
}

/* A vector {r1, ..., rn} of 32-bit registers (dest) or sources. */
static int tc_regvec(vctx *v, int pos, lpx_operand *ops, uint32_t i, int n, int dest, const char *what)
{
  char msg[200];
  v->pos = pos;
  if (ops[i].kind != LPX_OPD_VEC || ops[i].aux != n) {
    snprintf(msg, sizeof msg, "(%s) must be a vector of %d 32-bit register%s {r1, ...}", what, n, n == 1 ? "" : "s");
    return opfail(v, msg);
  }
  v->sink_ok = 0;   /* every element is moved: no _ */
  for (int e = 1; e <= n; e++) {
    lpx_operand *o = &ops[i + e];
    int rc = dest ? check_dst(v, o, LPX_T_B32)
                  : (o->kind == LPX_OPD_REG ? check_reg(v, o, LPX_T_B32, 0) : check_src(v, o, LPX_T_B32, 0));
    if (rc) return rc;
  }
  return 0;
}

/* tcgen05.mma[.sp] [d], a-desc|[a], b-desc, [meta], idesc, {mask}, enable-d[, scale]. */
static int tc_mma(vctx *v, const int *sel, lpx_operand *ops, uint32_t *starts, int count)
{
  int sp = sel[0] != 0, cta2 = sel[1] == 2, kind = sel[2];  /* f16 tf32 f8f6f4 i8 */
  int k = 0, lanes = cta2 ? 8 : 4;
  char msg[300];
  if (count < 5 + sp) goto bad_count;
  if (tc_tmem(v, 1, &ops[starts[k++]])) return -1;
  lpx_operand *a = &ops[starts[k]];
  if (a->kind == LPX_OPD_ADDR ? tc_tmem(v, k + 1, a) : tc_src(v, k + 1, a, LPX_T_B64)) return -1;
  k++;
  if (tc_src(v, k + 1, &ops[starts[k]], LPX_T_B64)) return -1;
  k++;
  if (sp) {
    if (tc_tmem(v, k + 1, &ops[starts[k]])) return -1;
    k++;
  }
  if (tc_src(v, k + 1, &ops[starts[k]], LPX_T_B32)) return -1;
  k++;
  if (k < count && ops[starts[k]].kind == LPX_OPD_VEC) {
    if (tc_regvec(v, k + 1, ops, starts[k], lanes, 0, cta2 ? "disable-output-lane, 8 for .cta_group::2" : "disable-output-lane, 4 for .cta_group::1")) return -1;
    k++;
  }
  if (k >= count) goto bad_count;
  v->pos = k + 1;
  if (ops[starts[k]].kind != LPX_OPD_REG || check_reg(v, &ops[starts[k]], LPX_T_PRED, 1))
    return opfail(v, "(enable-input-d) must be a predicate register: false overwrites D, true accumulates");
  k++;
  if (k < count) {
    /* PTX ISA: .kind::f16 and .kind::tf32; ptxas 13.0 also takes .kind::i8 */
    if (kind == 3) return tc_fail(v, "scale-input-d is not available with .kind::f8f6f4 (use .kind::f16 or .kind::tf32)");
    if (tc_imm(v, k + 1, &ops[starts[k]], 0, 15, "scale-input-d")) return -1;
    k++;
  }
  if (k == count) return 0;
bad_count:
  snprintf(msg, sizeof msg, "takes [d-tmem], a-desc or [a-tmem], b-desc, %sidesc, an optional {disable-output-lane} "
           "vector, enable-input-d and an optional scale-input-d; got %d operand(s)", sp ? "[sp-meta-tmem], " : "", count);
  return tc_fail(v, msg);
}

/* tcgen05.ld d-vector, [taddr][, split] / tcgen05.st [taddr][, split], s-vector. */
static int tc_ldst(vctx *v, const int *sel, lpx_operand *ops, uint32_t *starts, int count, int st)
{
  int shape = sel[2], num = 1 << (sel[3] - 1), split = shape == 5;
  int n = num * tc_shape_regs[shape];
  char msg[200];
  if (n > 128) {
    snprintf(msg, sizeof msg, "the shape takes at most %d 32-bit registers per thread; .x%d would need %d", 128, num, n);
    return tc_fail(v, msg);
  }
  if (count != 2 + split) {
    snprintf(msg, sizeof msg, "takes %s; got %d operand(s)", st ? (split ? "[taddr], half-split-offset, {values}" : "[taddr], {values}")
             : (split ? "{dests}, [taddr], half-split-offset" : "{dests}, [taddr]"), count);
    return tc_fail(v, msg);
  }
  int vpos = st ? count : 1, apos = st ? 1 : 2;
  if (tc_tmem(v, apos, &ops[starts[apos - 1]])) return -1;
  if (split && tc_imm(v, apos + 1, &ops[starts[apos]], 0, 0x7fffffff, "half-split-offset")) return -1;
  return tc_regvec(v, vpos, ops, starts[vpos - 1], n, !st, st ? "values" : "destinations");
}

/* tcgen05.commit [mbar][, cta-mask (.multicast::cluster)]. */
static int tc_commit(vctx *v, const int *sel, lpx_operand *ops, uint32_t *starts, int count)
{
  int mc = sel[3] != 0;
  if (count != 1 + mc)
    return tc_fail(v, mc ? "takes [mbar] and a 16-bit cta-mask with .multicast::cluster" : "takes [mbar] only (a cta-mask needs .multicast::cluster)");
  v->pos = 1;
  if (check_letter(v, 'm', ops, starts[0])) return -1;
  return mc ? tc_src(v, 2, &ops[starts[1]], LPX_T_B16) : 0;
}

/* tcgen05.cp [taddr], s-desc: shape/multicast/format pairing. */
static int tc_cp(vctx *v, const int *sel, lpx_operand *ops, uint32_t *starts, int count)
{
  static const int need_mc[] = { 0, 0, 0, 0, 1, 2 };  /* per shape: none, warpx2::*, warpx4 */
  int shape = sel[1], mc = sel[2];
  int got = mc == 0 ? 0 : mc == 3 ? 2 : 1;
  if (got != need_mc[shape])
    return tc_fail(v, need_mc[shape] == 1 ? ".64x128b needs .warpx2::02_13 or .warpx2::01_23"
                    : need_mc[shape] == 2 ? ".32x128b needs .warpx4" : "only .64x128b and .32x128b take a .warpx multicast");
  if ((sel[3] != 0) != (sel[4] != 0)) return tc_fail(v, "decompression needs both .b8x16 and a source format (.b6x16_p32 or .b4x16_p64)");
  if (count != 2) return tc_fail(v, "takes [taddr] and a 64-bit s-desc");
  return tc_tmem(v, 1, &ops[starts[0]]) || tc_src(v, 2, &ops[starts[1]], LPX_T_B64) ? -1 : 0;
}

/* alloc/dealloc's column count: a power of 2 from 32 to 512. */
static int tc_ncols(vctx *v, lpx_operand *o)
{
  if (tc_imm(v, 2, o, 32, 512, "nCols, a power of 2 from 32 to 512")) return -1;
  if (o->ival & (o->ival - 1)) return opfail(v, "(nCols) must be a power of 2 from 32 to 512");
  return 0;
}

/* Target rules for tcgen05 beyond the row's sm_100a..sm_103a gate. */
static int tc_target(vctx *v, const tc_rule *r, const int *sel)
{
  char msg[200];
  if (v->m->sm == 102) return tc_fail(v, "tcgen05 needs sm_100a, sm_101a or sm_103a; this kernel targets sm_102a");
  if (v->m->sm == 103 && v->m->ptx_version < 88) {
    snprintf(msg, sizeof msg, "tcgen05 on sm_103a needs PTX ISA 8.8; this kernel uses %d.%d (raise the kernel's version)",
             v->m->ptx_version / 10, v->m->ptx_version % 10);
    return tc_fail(v, msg);
  }
  if (r->op == LPX_OP_TCMMA && sel[2] == 4 && v->m->sm == 103)
    return tc_fail(v, ".kind::i8 is not available on sm_103a");
  return 0;
}

/* Check a tcgen05 instruction: -1 error, 0 done, 1 not tcgen05 or go on
 * with the row's signature (alloc, dealloc, relinquish, fence, wait). */
static int tcgen05_check(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const tc_rule *r = tc_rule_of(v->form->info.op);
  if (!r) return 1;
  int sel[TC_SLOTS] = { 0 };
  if (tc_parse_mods(v, r, sel) || tc_target(v, r, sel)) return -1;
  switch (r->op) {
  case LPX_OP_TCMMA: return tc_mma(v, sel, ops, starts, count);
  case LPX_OP_TCLD: case LPX_OP_TCST: return tc_ldst(v, sel, ops, starts, count, r->op == LPX_OP_TCST);
  case LPX_OP_TCCOMMIT: return tc_commit(v, sel, ops, starts, count);
  case LPX_OP_TCCP: return tc_cp(v, sel, ops, starts, count);
  case LPX_OP_TCSHIFT:
    if (count != 1) return tc_fail(v, "takes one operand, [taddr]");
    return tc_tmem(v, 1, &ops[starts[0]]) ? -1 : 0;
  case LPX_OP_TCALLOC: case LPX_OP_TCDEALLOC:
    if (count == 2 && ops[starts[1]].kind != LPX_OPD_REG && tc_ncols(v, &ops[starts[1]])) return -1;
    return 1;
  default: return 1;
  }
}
#undef TC_CTA
#undef TC_SYNC
#undef TC_SHAPES
#undef TC_NUMS
/* ======================================================== end tcgen05 === */

/* ================================================================
 * Ampere matrix instructions (mma.sync, ldmatrix, stmatrix): operand
 * counts and register widths per shape and type, and the sm each
 * shape/type pair needs. The opcode's modifiers are read from its text.
 * ================================================================ */

/* One mma.sync shape and input family: register counts and minimum sm. */
typedef struct mma_row { const char *shape, *family; uint8_t na, nb, nacc, sm; } mma_row;

static const mma_row mma_rows[] = {
  { "m8n8k4", "f16", 2, 2, 0, 70 },     { "m16n8k8", "f16", 2, 1, 4, 75 },
  { "m16n8k16", "f16", 4, 2, 4, 80 },   { "m16n8k8", "bf16", 2, 1, 4, 80 },
  { "m16n8k16", "bf16", 4, 2, 4, 80 },  { "m16n8k4", "tf32", 2, 1, 4, 80 },
  { "m16n8k8", "tf32", 4, 2, 4, 80 },   { "m8n8k4", "f64", 1, 1, 2, 80 },
  { "m16n8k4", "f64", 2, 1, 4, 90 },    { "m16n8k8", "f64", 4, 2, 4, 90 },
  { "m16n8k16", "f64", 8, 4, 4, 90 },   { "m8n8k16", "s8", 1, 1, 2, 75 },
  { "m16n8k16", "s8", 2, 1, 4, 80 },    { "m16n8k32", "s8", 4, 2, 4, 80 },
  { "m8n8k32", "s4", 1, 1, 2, 75 },     { "m16n8k32", "s4", 2, 1, 4, 80 },
  { "m16n8k64", "s4", 4, 2, 4, 80 },    { "m8n8k128", "b1", 1, 1, 2, 75 },
  { "m16n8k128", "b1", 2, 1, 4, 80 },   { "m16n8k256", "b1", 4, 2, 4, 80 },
  { "m16n8k32", "e4m3", 4, 2, 4, 89 },  { "m16n8k16", "e4m3", 2, 1, 4, 89 },
};

/* Input type spellings and the family (row of mma_rows) each belongs to. */
static const char *const mma_families[][2] = {
  { "f16", "f16" }, { "bf16", "bf16" }, { "tf32", "tf32" }, { "f64", "f64" }, { "s8", "s8" },
  { "u8", "s8" }, { "s4", "s4" }, { "u4", "s4" }, { "b1", "b1" }, { "e4m3", "e4m3" }, { "e5m2", "e4m3" },
};

/* What an mma/ldmatrix opcode spells: shape, up to 4 types, xN, layouts. */
typedef struct mx_form { char shape[16], types[4][8]; int ntypes, num, row_col, layouts; } mx_form;

/* The family of an mma input type spelling, or NULL. */
static const char *mma_family(const char *t)
{
  for (size_t i = 0; i < sizeof mma_families / sizeof mma_families[0]; i++)
    if (!strcmp(mma_families[i][0], t)) return mma_families[i][1];
  return NULL;
}

/* Split an opcode's modifiers into an mx_form. */
static void mx_parse(const char *text, mx_form *f)
{
  memset(f, 0, sizeof *f);
  for (const char *p = strchr(text, '.'); p; p = strchr(p + 1, '.')) {
    char tok[16];
    size_t n = strcspn(p + 1, ".");
    if (n == 0 || n >= sizeof tok) continue;
    memcpy(tok, p + 1, n);
    tok[n] = '\0';
    if (tok[0] == 'm' && isdigit((unsigned char)tok[1])) memcpy(f->shape, tok, n + 1);
    else if (tok[0] == 'x' && isdigit((unsigned char)tok[1])) f->num = atoi(tok + 1);
    else if (!strcmp(tok, "row") || !strcmp(tok, "col")) { f->layouts++; f->row_col = f->row_col * 2 + (tok[0] == 'c'); }
    else if ((mma_family(tok) || !strcmp(tok, "f32") || !strcmp(tok, "s32")) && f->ntypes < 4) memcpy(f->types[f->ntypes++], tok, n + 1);
  }
}

/* Check operand k is a vector of n registers of the given bits (float kind
 * 'F' for f32/f64 accumulators, anything non-predicate otherwise). */
static int mx_vector(vctx *v, lpx_operand *ops, uint32_t *starts, int k, int n, int bits, char kind, const char *what)
{
  char msg[256];
  lpx_operand *o = &ops[starts[k]];
  v->pos = k + 1;
  if (o->kind != LPX_OPD_VEC || o->aux != n) {
    if (o->kind == LPX_OPD_VEC) snprintf(msg, sizeof msg, "(%s) must be a vector of %d registers, got %d", what, n, o->aux);
    else snprintf(msg, sizeof msg, "(%s) must be a vector of %d registers {r1, ...}", what, n);
    return opfail(v, msg);
  }
  for (int e = 1; e <= n; e++) {
    lpx_operand *r = &o[e];
    if (r->kind != LPX_OPD_REG || r->id < 0 || (size_t)r->id >= v->f->nregs) {
      snprintf(msg, sizeof msg, "(%s) element %d must be a register", what, e);
      return opfail(v, msg);
    }
    const lpx_type_desc *t = &lpx_types[v->f->reg_type[r->id]];
    int ok = t->bits == bits && t->kind != 'P' && (kind != 'F' || t->kind == 'F' || t->kind == 'B');
    if (kind == 'I' && (t->kind == 'F' || t->kind == 'H')) ok = 0;
    if (!ok) {
      char name[32];
      snprintf(msg, sizeof msg, "(%s) element %d is a %s register (%s); expected a %d-bit %s register", what, e,
               t->name, reg_name(v->f, r->id, name, sizeof name), bits,
               kind == 'F' ? (bits == 64 ? "f64" : "f32") : kind == 'I' ? "s32/u32/b32" : "b32");
      return opfail(v, msg);
    }
  }
  return 0;
}

/* The mma_rows entry for a shape and family, or NULL. */
static const mma_row *mma_find(const char *shape, const char *family)
{
  for (size_t i = 0; i < sizeof mma_rows / sizeof mma_rows[0]; i++)
    if (!strcmp(mma_rows[i].shape, shape) && !strcmp(mma_rows[i].family, family)) return &mma_rows[i];
  return NULL;
}

/* Register bits and kind of an accumulator type spelling. */
static int acc_bits(const char *t, char *kind)
{
  *kind = !strcmp(t, "s32") ? 'I' : !strcmp(t, "f16") ? 'B' : 'F';
  return !strcmp(t, "f64") ? 64 : 32;
}

/* The PTX ISA version an fp8 mma.sync form needs: 8.4 for m16n8k32 into
 * .f32, 8.7 for the m16n8k16 shape or .f16 accumulators. */
static int mma_fp8_version(const mx_form *f)
{
  return strcmp(f->shape, "m16n8k16") && strcmp(f->types[0], "f16") ? 84 : 87;
}

/* fp8 mma.sync: the PTX version of the form, and D and C of one type. */
static int check_mma_fp8(vctx *v, const char *text, const mx_form *f)
{
  int need = mma_fp8_version(f);
  if (v->m->ptx_version < need)
    return lpx_fail(v->m->ctx, "%s: mma.sync.%s.%s with .e4m3/.e5m2 inputs needs PTX ISA %d.%d; this kernel uses %d.%d", text,
                    f->shape, f->types[0], need / 10, need % 10, v->m->ptx_version / 10, v->m->ptx_version % 10);
  if (strcmp(f->types[0], f->types[3]))
    return lpx_fail(v->m->ctx, "%s: .e4m3/.e5m2 mma.sync takes D and C of one type (.f32.f32 or .f16.f16), not .%s and .%s",
                    text, f->types[0], f->types[3]);
  return 0;
}

/* mma.sync: shape/type pair, layouts, arch, and the four fragment vectors. */
static int check_mma(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const char *text = v->form->info.text;
  mx_form f;
  mx_parse(text, &f);
  if (f.ntypes != 4) return lpx_fail(v->m->ctx, "%s: mma.sync needs four types .dtype.atype.btype.ctype (e.g. .f32.bf16.bf16.f32)", text);
  const char *fa = mma_family(f.types[1]), *fb = mma_family(f.types[2]);
  if (!fa || !fb || strcmp(fa, fb)) return lpx_fail(v->m->ctx, "%s: .%s and .%s are not a valid A/B type pair", text, f.types[1], f.types[2]);
  const mma_row *r = mma_find(f.shape, fa);
  if (!r) return lpx_fail(v->m->ctx, "%s: mma.sync has no shape .%s for .%s inputs", text, f.shape[0] ? f.shape : "(none)", f.types[1]);
  int quad = r->nacc == 0;
  if (f.layouts != 2 || (!quad && f.row_col != 1)) return lpx_fail(v->m->ctx, "%s: mma.sync.%s takes the layouts .row.col", text, f.shape);
  if (v->m->sm < r->sm) return lpx_fail(v->m->ctx, "%s: mma.sync.%s with .%s inputs needs sm_%d; this kernel targets %s", text, f.shape, f.types[1], r->sm, v->m->target);
  const char *want_acc = !strcmp(fa, "f64") ? "f64" : (!strcmp(fa, "s8") || !strcmp(fa, "s4") || !strcmp(fa, "b1")) ? "s32" : "f32";
  int fp8 = !strcmp(fa, "e4m3"), f16ok = !strcmp(fa, "f16") || fp8;
  for (int i = 0; i < 4; i += 3)
    if (strcmp(f.types[i], want_acc) && !(f16ok && !strcmp(f.types[i], "f16")))
      return lpx_fail(v->m->ctx, "%s: .%s inputs accumulate in .%s%s, not .%s", text, f.types[1], want_acc, f16ok ? " or .f16" : "", f.types[i]);
  if (fp8 && check_mma_fp8(v, text, &f)) return -1;
  if (count != 4) return lpx_fail(v->m->ctx, "%s takes 4 operands {d}, {a}, {b}, {c}, got %d", text, count);
  char kd, kc;
  int bd = acc_bits(f.types[0], &kd), bc = acc_bits(f.types[3], &kc);
  int nd = quad ? (kd == 'B' ? 4 : 8) : (kd == 'B' ? r->nacc / 2 : r->nacc);
  int nc = quad ? (kc == 'B' ? 4 : 8) : (kc == 'B' ? r->nacc / 2 : r->nacc);
  int in_bits = !strcmp(fa, "f64") ? 64 : 32;
  char in_kind = !strcmp(fa, "f64") ? 'F' : 'B';
  if (mx_vector(v, ops, starts, 0, nd, bd, kd, "d")) return -1;
  if (mx_vector(v, ops, starts, 1, r->na, in_bits, in_kind, "a")) return -1;
  if (mx_vector(v, ops, starts, 2, r->nb, in_bits, in_kind, "b")) return -1;
  return mx_vector(v, ops, starts, 3, nc, bc, kc, "c");
}

/* ldmatrix / stmatrix m8n8: .x1/.x2/.x4 and a vector of that many b32. */
static int check_ldst_matrix(vctx *v, lpx_operand *ops, uint32_t *starts, int count, int store)
{
  const char *text = v->form->info.text;
  mx_form f;
  mx_parse(text, &f);
  if (f.num != 1 && f.num != 2 && f.num != 4) return lpx_fail(v->m->ctx, "%s: needs one of .x1 .x2 .x4", text);
  if (!f.shape[0]) return lpx_fail(v->m->ctx, "%s: needs a shape (.m8n8)", text);
  if (count != 2) return lpx_fail(v->m->ctx, "%s takes 2 operands (%s), got %d", text, store ? "[addr], {regs}" : "{regs}, [addr]", count);
  int ai = store ? 0 : 1;
  v->pos = ai + 1;
  if (ops[starts[ai]].kind != LPX_OPD_ADDR) return opfail(v, "must be a shared-memory address");
  if (strcmp(f.shape, "m8n8")) return 0;   /* m16n16 / m8n16 (sm_100) forms: counts not checked */
  return mx_vector(v, ops, starts, store ? 1 : 0, f.num, 32, 'B', store ? "sources" : "destinations");
}

/* Dispatch for the matrix rows; 0 for other instructions. */
static int check_matrix(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  switch (v->form->info.op) {
  case LPX_OP_MMA: return check_mma(v, ops, starts, count);
  case LPX_OP_LDMATRIX: return check_ldst_matrix(v, ops, starts, count, 0);
  case LPX_OP_STMATRIX: return check_ldst_matrix(v, ops, starts, count, 1);
  default: return 0;
  }
}

/* ================================================ end of matrix instructions */

/* ============================================ Hopper: TMA copies and wgmma */

/* The integer value of an immediate operand, or 0 with *ok cleared. */
static int64_t hp_imm(const lpx_operand *o, int *ok)
{
  if (o->kind == LPX_OPD_NUM && o->fval == floor(o->fval) && fabs(o->fval) < 9.0e18) return (int64_t)o->fval;
  if (o->kind == LPX_OPD_IMM || o->kind == LPX_OPD_INT) return o->ival;
  *ok = 0;
  return 0;
}

/* cp.async.bulk.tensor.<N>d / prefetch / reduce: the coordinate list inside
 * [tensorMap, {c...}] has exactly N entries. */
static int hp_tensor(vctx *v, const lpx_operand *ops, uint32_t nops)
{
  const char *text = v->form->info.text, *t = strstr(text, ".tensor.");
  if (!t || !isdigit((unsigned char)t[8]) || t[9] != 'd') return 0;
  int rank = t[8] - '0';
  if (rank < 1 || rank > 5) return lpx_fail(v->m->ctx, "%s: TMA tensors have 1 to 5 dimensions", text);
  for (uint32_t i = 0; i + 2 < nops; i++) {
    if (ops[i].kind != LPX_OPD_BRACKET) continue;
    const lpx_operand *list = &ops[i + 2];
    if (list->kind != LPX_OPD_VEC || ops[i].aux != 2)
      return lpx_fail(v->m->ctx, "%s: the tensor operand must be [tensorMap, {coordinates}]", text);
    if (list->aux != rank)
      return lpx_fail(v->m->ctx, "%s: the tensor coordinates list %d value(s); .%dd takes %d", text, list->aux, rank, rank);
    return 0;
  }
  return lpx_fail(v->m->ctx, "%s: needs a [tensorMap, {coordinates}] operand", text);
}

/* im2col loads and prefetches: after the bracket (and the barrier) comes
 * {offsets}, rank - 2 values, each a 16-bit register or an immediate. */
static int hp_im2col(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count, int rank)
{
  const char *text = v->form->info.text;
  int k = 0;
  while (k < count && ops[starts[k]].kind != LPX_OPD_BRACKET) k++;
  uint32_t list = k < count ? starts[k] + 2 : 0;      /* the bracket's coordinate list */
  while (++k < count && (ops[starts[k]].kind != LPX_OPD_VEC || starts[k] == list)) {}
  if (k >= count || ops[starts[k]].aux != rank - 2)
    return lpx_fail(v->m->ctx, "%s: .im2col takes {im2col offsets} with %d value(s) (W first) after the %s", text, rank - 2,
                    strstr(text, ".prefetch") ? "tensor operand" : "mbarrier");
  for (int e = 1; e <= rank - 2; e++) {
    const lpx_operand *o = &ops[starts[k] + (uint32_t)e];
    int reg16 = o->kind == LPX_OPD_REG && o->id >= 0 && (size_t)o->id < v->f->nregs && lpx_types[v->f->reg_type[o->id]].bits == 16;
    v->pos = k + 1;
    if (!reg16 && o->kind != LPX_OPD_NUM && o->kind != LPX_OPD_IMM && o->kind != LPX_OPD_INT)
      return opfail(v, "(the im2col offsets) must hold 16-bit registers or immediates");
  }
  return 0;
}

/* The types cp.reduce.async.bulk takes per operation into each space. */
static const uint64_t red_global[] = { 0,
#define X(op, name, global, cluster) global,
  LPX_BULK_REDOPS(X)
#undef X
};
static const uint64_t red_cluster[] = { 0,
#define X(op, name, global, cluster) cluster,
  LPX_BULK_REDOPS(X)
#undef X
};
static const char *const red_names[] = { "?",
#define X(op, name, global, cluster) name,
  LPX_BULK_REDOPS(X)
#undef X
};

/* Write ".u32 .s32 ..." for a type set (for messages). */
static void type_list(uint64_t set, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int t = 0; t < LPX_T__COUNT && n + 1 < cap; t++)
    if (set >> t & 1) n += (size_t)snprintf(out + n, cap - n, "%s.%s", n ? " " : "", lpx_types[t].name);
}

/* cp.reduce.async.bulk: an operation; the array form takes an element type
 * the ISA's table allows for its destination (f16/bf16 .add with .noftz);
 * the tensor form takes its type from the tensor map. */
static int hp_reduce(vctx *v)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  int op = fo->modsel[LPX_GB_ATOMOP], t = fo->info.type;
  if (op < 1 || op > 8) return lpx_fail(v->m->ctx, "%s: needs one of .add .min .max .inc .dec .and .or .xor", text);
  if (strstr(text, ".tensor.")) {
    if (t >= 0) return lpx_fail(v->m->ctx, "%s: the tensor form takes no type; the element type comes from the tensor map", text);
    return 0;
  }
  int cluster = strstr(text, ".shared::cluster") != NULL;
  uint64_t ok = cluster ? red_cluster[op] : red_global[op];
  if (t < 0 || !(ok >> t & 1)) {
    char want[256];
    type_list(ok, want, sizeof want);
    return lpx_fail(v->m->ctx, "%s: .%s into %s takes %s; got .%s", text, red_names[op], cluster ? ".shared::cluster" : ".global",
                    want, t >= 0 ? lpx_types[t].name : "(no type)");
  }
  int half = t == LPX_T_F16 || t == LPX_T_BF16, noftz = has_group(fo, LPX_GB_NOFTZ);
  if (half && op == 1 && !noftz) return lpx_fail(v->m->ctx, "%s: .add on .%s needs .noftz (.add.noftz.%s)", text, lpx_types[t].name, lpx_types[t].name);
  if (noftz && !(half && op == 1)) return lpx_fail(v->m->ctx, "%s: .noftz goes with .add.f16 / .add.bf16 only", text);
  return 0;
}

/* wgmma.mma_async input families of sm_90a: the A/B types, K, the
 * accumulator types, whether A and B may differ, the ±1 scale and 0/1
 * transpose immediates, integer N steps (8..32, then multiples of 16),
 * .satfinite, the .and.popc operation, and the largest sparsity selector
 * of the .sp form (K doubled; -1: no sparse form). The ISA lets a thread
 * pair (selector 0 or 1) supply the metadata of 16-bit and tf32 inputs,
 * and all four threads of a group (selector 0) that of 8-bit inputs. */
static const struct wg_family {
  const char *types[2]; unsigned k; const char *dts[2]; int mixed, scale, trans, n16, sat, popc, spsel;
} wg_fams[] = {
  { { "f16" }, 16, { "f32", "f16" }, 0, 1, 1, 0, 0, 0, 1 }, { { "bf16" }, 16, { "f32" }, 0, 1, 1, 0, 0, 0, 1 },
  { { "tf32" }, 8, { "f32" }, 0, 1, 0, 0, 0, 0, 1 }, { { "e4m3", "e5m2" }, 32, { "f32", "f16" }, 1, 1, 0, 0, 0, 0, 0 },
  { { "s8", "u8" }, 32, { "s32" }, 1, 0, 0, 1, 1, 0, 0 }, { { "b1" }, 256, { "s32" }, 0, 0, 0, 1, 0, 1, -1 },
};

/* A parsed wgmma.mma_async form. */
typedef struct wg_form {
  unsigned n, k;
  int sp;                       /* the .sp form: K is twice the family's */
  char dt[8], at[8], bt[8];
  int sat, and_popc, other;     /* .satfinite; .and.popc; another modifier (or .xor) */
  const struct wg_family *fam, *bfam;
} wg_form;

/* The family of an input type name, or NULL. */
static const struct wg_family *wg_family_of(const char *t)
{
  for (size_t i = 0; i < sizeof wg_fams / sizeof wg_fams[0]; i++)
    for (int j = 0; j < 2; j++) if (wg_fams[i].types[j] && !strcmp(wg_fams[i].types[j], t)) return &wg_fams[i];
  return NULL;
}

/* Split the words after the shape: .satfinite, three types, .and.popc. */
static void wg_words(const char *p, wg_form *f)
{
  char *slot[3] = { f->dt, f->at, f->bt };
  int nt = 0;
  while (*p == '.') {
    char w[16];
    size_t len = strcspn(p + 1, ".");
    snprintf(w, sizeof w, "%.*s", (int)(len < 15 ? len : 15), p + 1);
    p += 1 + len;
    if (!strcmp(w, "satfinite")) f->sat = 1;
    else if (!strcmp(w, "and") || !strcmp(w, "popc")) f->and_popc++;
    else if (nt < 3 && len < 8) { memcpy(slot[nt], w, len); slot[nt++][len] = '\0'; }
    else f->other = 1;
  }
  if (nt < 3) f->other = 1;
}

/* Parse a wgmma.mma_async form and check its shape, types and modifiers
 * against the ISA's list. */
static int wg_parse(vctx *v, const char *text, wg_form *f)
{
  const char *sh = strstr(text, ".m64n");
  char tail[2];
  memset(f, 0, sizeof *f);
  if (!sh || sscanf(sh, ".m64n%uk%u%1[.]", &f->n, &f->k, tail) != 3 || f->n < 8 || f->n > 256 || f->n % 8)
    return lpx_fail(v->m->ctx, "%s: wgmma.mma_async needs a shape .m64nNk* with N = 8..256, a multiple of 8", text);
  wg_words(strchr(sh + 1, '.'), f);
  f->sp = strstr(text, "mma_async.sp.") != NULL;
  f->fam = wg_family_of(f->at);
  f->bfam = wg_family_of(f->bt);
  if (f->other || !f->fam || f->bfam != f->fam || (!f->fam->mixed && strcmp(f->at, f->bt)))
    return lpx_fail(v->m->ctx, "%s: wgmma.mma_async takes .dtype.atype.btype with A/B .f16 .bf16 .tf32 (equal), "
                    ".e4m3/.e5m2 or .s8/.u8 (any pair), or .s32.b1.b1.and.popc", text);
  if (f->sp && f->fam->spsel < 0) return lpx_fail(v->m->ctx, "%s: .b1 wgmma has no sparse (.sp) form", text);
  unsigned k = f->fam->k << f->sp;
  if (f->k != k) return lpx_fail(v->m->ctx, "%s: .%s%s wgmma is k%u, not k%u", text, f->at, f->sp ? " sparse" : "", k, f->k);
  if (strcmp(f->dt, f->fam->dts[0]) && (!f->fam->dts[1] || strcmp(f->dt, f->fam->dts[1])))
    return lpx_fail(v->m->ctx, "%s: .%s inputs accumulate in .%s%s%s, not .%s", text, f->at, f->fam->dts[0],
                    f->fam->dts[1] ? " or ." : "", f->fam->dts[1] ? f->fam->dts[1] : "", f->dt);
  if (f->fam->n16 && f->n > 32 && f->n % 16)
    return lpx_fail(v->m->ctx, "%s: integer and .b1 wgmma take N = 8, 16, 24, 32, then multiples of 16 up to 256", text);
  if (f->sat && !f->fam->sat) return lpx_fail(v->m->ctx, "%s: .satfinite applies to .s8/.u8 wgmma only", text);
  if ((f->and_popc == 2) != f->fam->popc)
    return lpx_fail(v->m->ctx, "%s: .b1 wgmma takes the operation .and.popc (and only it takes one)", text);
  if (f->sp && v->m->ptx_version < 82)
    return lpx_fail(v->m->ctx, "%s: sparse wgmma (.sp) needs PTX ISA 8.2; this kernel uses %d.%d", text,
                    v->m->ptx_version / 10, v->m->ptx_version % 10);
  if (f->fam->sat && strcmp(f->at, f->bt) && v->m->ptx_version < 84)
    return lpx_fail(v->m->ctx, "%s: mixed integer types (.%s.%s) need PTX ISA 8.4; this kernel uses %d.%d", text, f->at,
                    f->bt, v->m->ptx_version / 10, v->m->ptx_version % 10);
  return 0;
}

/* The .sp form's sp-meta (a 32-bit register) and sp-sel (an immediate
 * 0..the family's largest), operands 4 and 5. */
static int hp_wgmma_sp(vctx *v, const wg_form *f, const lpx_operand *ops, const uint32_t *starts)
{
  const lpx_operand *m = &ops[starts[3]];
  v->pos = 4;
  if (m->kind != LPX_OPD_REG || (m->id >= 0 && (size_t)m->id < v->f->nregs && lpx_types[v->f->reg_type[m->id]].bits != 32))
    return opfail(v, "(sparsity metadata) must be a 32-bit register");
  int ok = 1;
  int64_t sel = hp_imm(&ops[starts[4]], &ok);
  v->pos = 5;
  if (!ok || sel < 0 || sel > f->fam->spsel)
    return opfail(v, f->fam->spsel ? "(sparsity selector) must be the immediate 0 or 1" : "(sparsity selector) must be the immediate 0 for 8-bit inputs");
  return 0;
}

/* wgmma.mma_async{.sp}: a form of the ISA's list, the accumulator vector, A
 * (a 64-bit descriptor or 4 .b32 registers), the B descriptor, for .sp the
 * sparsity metadata and selector, scale-d and the family's immediates
 * (imm-scale-a/-b: 1 or -1; imm-trans-a/-b: 0 or 1, f16/bf16 only, no
 * imm-trans-a with A from registers). */
static int hp_wgmma(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const char *text = v->form->info.text;
  wg_form f;
  if (wg_parse(v, text, &f)) return -1;
  int areg = count > 1 && ops[starts[1]].kind == LPX_OPD_VEC;
  int nscale = f.fam->scale ? 2 : 0, ntrans = f.fam->trans ? (areg ? 1 : 2) : 0, nsp = f.sp ? 2 : 0;
  int want = 4 + nsp + nscale + ntrans;
  if (count != want)
    return lpx_fail(v->m->ctx, "%s takes %d operands: {d}, %s, b-desc%s, scale-d%s%s; got %d", text, want, areg ? "{a}" : "a-desc",
                    nsp ? ", sp-meta, sp-sel" : "", nscale ? ", imm-scale-a, imm-scale-b" : "",
                    !ntrans ? "" : areg ? ", imm-trans-b" : ", imm-trans-a, imm-trans-b", count);
  if (f.sp && hp_wgmma_sp(v, &f, ops, starts)) return -1;
  int f16d = !strcmp(f.dt, "f16");
  if (mx_vector(v, ops, starts, 0, (int)(f16d ? f.n / 4 : f.n / 2), 32, f16d ? 'B' : f.dt[0] == 's' ? 'I' : 'F', "d")) return -1;
  if (areg && mx_vector(v, ops, starts, 1, 4, 32, 'B', "a")) return -1;
  for (int k = areg ? 2 : 1; k <= 2; k++) {
    const lpx_operand *o = &ops[starts[k]];
    v->pos = k + 1;
    if (o->kind == LPX_OPD_REG && o->id >= 0 && (size_t)o->id < v->f->nregs && lpx_types[v->f->reg_type[o->id]].bits != 64)
      return opfail(v, "(a matrix descriptor) must be a 64-bit register");
  }
  for (int k = 4 + nsp; k < count; k++) {
    int ok = 1;
    int64_t x = hp_imm(&ops[starts[k]], &ok);
    int scale = k < 4 + nsp + nscale;
    v->pos = k + 1;
    if (!ok || (scale ? (x != 1 && x != -1) : (x != 0 && x != 1)))
      return opfail(v, scale ? "(imm-scale) must be the immediate 1 or -1" : "(imm-trans) must be the immediate 0 or 1");
  }
  return 0;
}

/* tensormap.replace fields, in TMFIELD order: X(name, class, 64-bit value,
 * largest immediate). Class 1: [addr], new_val; 2: [addr], ord, new_val;
 * 3: [addr], immediate new_val (the ISA's numbering; largest: what this
 * PTX/sm pair takes without the sub-byte types and the 96B swizzle). */
#define TM_FIELDS(X) \
  X("global_address", 1, 1, 0) X("rank", 1, 0, 0) X("box_dim", 2, 0, 0) X("global_dim", 2, 0, 0) \
  X("global_stride", 2, 1, 0) X("element_stride", 2, 0, 0) X("elemtype", 3, 0, 12) X("interleave_layout", 3, 0, 2) \
  X("swizzle_mode", 3, 0, 3) X("swizzle_atomicity", 3, 0, 3) X("fill_mode", 3, 0, 1)

static const struct tm_field { const char *name; int cls, wide, most; } tm_fields[] = {
#define X(name, cls, wide, most) { name, cls, wide, most },
  TM_FIELDS(X)
#undef X
};

/* tensormap.replace: the field's value type (.b64 for global_address and
 * global_stride), operand count, an immediate ordinal 0..4, an immediate
 * in range for the enumerated fields, and .global / .shared::cta only. */
static int hp_tmreplace(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  int fi = fo->modsel[LPX_GB_TMFIELD];
  if (fi < 1) return 0;
  const struct tm_field *f = &tm_fields[fi - 1];
  if (has_group(fo, LPX_GB_SPACE) && !has_mod(fo, LPX_GB_SPACE, "global") && !has_mod(fo, LPX_GB_SPACE, "shared::cta"))
    return lpx_fail(v->m->ctx, "%s: a tensor map is edited in .global or .shared::cta memory (or through a generic address)", text);
  if ((fo->info.type == LPX_T_B64) != f->wide)
    return lpx_fail(v->m->ctx, "%s: .%s takes a %s value", text, f->name, f->wide ? ".b64" : ".b32");
  if (count != (f->cls == 2 ? 3 : 2))
    return lpx_fail(v->m->ctx, "%s takes %s, got %d operand(s)", text, f->cls == 2 ? "[map], ordinal, new_val" : "[map], new_val", count);
  int ok = 1;
  int64_t x = count > 1 ? hp_imm(&ops[starts[1]], &ok) : 0;
  v->pos = 2;
  if (f->cls == 2 && (!ok || x < 0 || x > 4)) return opfail(v, "(the ordinal) must be an immediate 0..4");
  if (f->cls == 3 && (!ok || x < 0 || x > f->most))
    return lpx_fail(v->m->ctx, "%s: .%s takes an immediate 0..%d (the ISA's numbering)", text, f->name, f->most);
  return 0;
}

/* tensormap.cp_fenceproxy: the one form PTX defines (.global.shared::cta,
 * .tensormap::generic, .release, a scope) and [dst], [src], 128. */
static int hp_tmcpfence(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  if (!has_mod(fo, LPX_GB_SPACE, "global") || !has_mod(fo, LPX_GB_SPACE2, "shared::cta"))
    return lpx_fail(v->m->ctx, "%s: tensormap.cp_fenceproxy copies .global.shared::cta (to global from shared::cta, in that order)", text);
  if (!has_mod(fo, LPX_GB_PROXYK, "tensormap::generic") || !has_mod(fo, LPX_GB_SEM, "release"))
    return lpx_fail(v->m->ctx, "%s: tensormap.cp_fenceproxy takes .tensormap::generic.release and a scope", text);
  int ok = 1;
  if (count != 3) return lpx_fail(v->m->ctx, "%s takes [dst], [src], 128, got %d operand(s)", text, count);
  v->pos = 3;
  if (hp_imm(&ops[starts[2]], &ok) != 128 || !ok) return opfail(v, "(size) must be the immediate 128 (a tensor map's bytes)");
  return 0;
}

/* fence.proxy.tensormap::generic: .release (no operands) or .acquire
 * [map], 128, with a scope; other fences take no operands. */
static int hp_fence(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  if (!has_mod(fo, LPX_GB_PROXYK, "tensormap::generic")) {
    if (count) return lpx_fail(v->m->ctx, "%s takes no operands (only fence.proxy.tensormap::generic.acquire does)", text);
    return 0;
  }
  int acquire = has_mod(fo, LPX_GB_SEM, "acquire"), release = has_mod(fo, LPX_GB_SEM, "release");
  if ((!acquire && !release) || !has_group(fo, LPX_GB_SCOPE))
    return lpx_fail(v->m->ctx, "%s needs .release or .acquire and a scope (.cta .cluster .gpu .sys)", text);
  int ok = 1;
  if (release && count) return lpx_fail(v->m->ctx, "%s takes no operands (the .acquire form takes [map], 128)", text);
  if (acquire && (count != 2 || hp_imm(&ops[starts[1]], &ok) != 128 || !ok))
    return lpx_fail(v->m->ctx, "%s takes [map], 128 (the tensor map's address and its size)", text);
  return 0;
}

/* Dispatch for the Hopper rows; 0 for other instructions. */
static int check_hopper(vctx *v, lpx_operand *ops, uint32_t nops, uint32_t *starts, int count)
{
  switch (v->form->info.op) {
  case LPX_OP_CPBULK: case LPX_OP_CPREDBULK: {
    const char *text = v->form->info.text, *t = strstr(text, ".tensor.");
    if (hp_tensor(v, ops, nops) || (v->form->info.op == LPX_OP_CPREDBULK && hp_reduce(v))) return -1;
    if (t && strstr(text, ".im2col") && !strstr(text, ".im2col_no_offs") && !strstr(text, ".im2col::w") &&
        !strstr(text, ".global.shared::cta")) return hp_im2col(v, ops, starts, count, t[8] - '0');
    return 0;
  }
  case LPX_OP_WGMMA: return hp_wgmma(v, ops, starts, count);
  case LPX_OP_TMREPLACE: return hp_tmreplace(v, ops, starts, count);
  case LPX_OP_TMCPFENCE: return hp_tmcpfence(v, ops, starts, count);
  case LPX_OP_FENCE: return hp_fence(v, ops, starts, count);
  default: return 0;
  }
}

/* ======================================= end of Hopper: TMA copies and wgmma */

/* Validate an instruction's operands; untyped numbers get their type here. */
int lpx_validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops)
{
  uint32_t starts[64];
  if (!nesting_ok(ops, (uint32_t)nops))
    return lpx_fail(m->ctx, "%s: operands nested more than %d deep", form->info.text, LPX_OPD_MAX_NESTING);
  int count = top_count(ops, (uint32_t)nops, starts, 64);
  if (count < 0) return lpx_fail(m->ctx, "%s: malformed operand list", form->info.text);
  const char *sig = form->info.op >= 0 ? lpx_isa_rows[form->info.op].sig : "*";
  vctx v = { m, f, form, 0, 0, 0 };
  int op = form->info.op;
  v.sink_ok = op < 0 || sig[0] == '*' || op == LPX_OP_SETP || op == LPX_OP_ATOM || op == LPX_OP_ELECT;
  if (op >= 0 && check_rules(m, form, count)) return -1;
  int tc = count <= 64 ? tcgen05_check(&v, ops, starts, count) : 1;
  if (tc <= 0) return tc;
  v.relaxed = op == LPX_OP_LD || op == LPX_OP_ST || op == LPX_OP_LDU || op == LPX_OP_CVT;
  if (op >= 0 && count <= 64 && check_matrix(&v, ops, starts, count)) return -1;
  if (op >= 0 && count <= 64 && check_hopper(&v, ops, (uint32_t)nops, starts, count)) return -1;
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
