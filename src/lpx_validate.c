/* Operand validation against the instruction table's signatures: operand
 * counts, kinds and register types, and typing of untyped Lua numbers. */
#include "lpx_internal.h"
#include "lpx_env.h"
#include "lpx_rules.h"
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
  int32_t file, line;   /* where the instruction is appended (lpx_append) */
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

/* What a message suggests: the DSL call for a traced instruction (it has
 * a Lua file, or its module was never parsed), the PTX syntax for parsed
 * (foreign) PTX. */
static const char *spell(const vctx *v, const char *dsl, const char *ptx)
{
  return v->file > 0 || !v->m->nlex ? dsl : ptx;
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
  double lo = w->bits >= 64 ? -9223372036854775808.0 : -(double)((uint64_t)1 << (w->bits - 1));
  double hi = w->bits >= 64 ? 18446744073709551615.0 : (double)(((uint64_t)1 << w->bits) - 1);
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
  if (o->aux == LPX_REG_NOT && !allow_neg) return opfail(v, "is a negated predicate; negation is only valid on predicate sources");
  if (type_compat(have, want, v->relaxed)) return 0;
  snprintf(msg, sizeof msg, "is a %s register (%s); expected %s", lpx_types[have].name,
           lpx_reg_text(v->m, v->f, o->id, name, sizeof name), want_words(want, words, sizeof words));
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
      if (v->m->ptx_version < ptx) {
        snprintf(msg, sizeof msg, "%s needs PTX ISA %d.%d; this kernel uses %d.%d (raise the kernel's version)",
                 lpx_special_name(o->id), ptx / 10, ptx % 10, v->m->ptx_version / 10, v->m->ptx_version % 10);
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

/* Check a vector operand {a, b, ...} of width vec, or a scalar when vec == 1
 * (also braced, {a}, as Triton writes it and ptxas takes it). */
static int check_vec(vctx *v, lpx_operand *ops, uint32_t i, int want, int dest)
{
  int vec = v->form->info.vec;
  if (vec == 1 && ops[i].kind == LPX_OPD_VEC && ops[i].aux == 1) i++;
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

/* Does the form carry modifier V of group G (IS(fo, CMP, LT))? */
#define IS(fo, G, V) ((fo)->modsel[LPX_GB_##G] == LPX_##G##_##V)

/* May a form's address be a 32-bit register? Yes in the windowed spaces
 * (shared, local, param, const); global and generic addresses are 64-bit. */
static int narrow_space(const lpx_form *fo)
{
  int s1 = fo->modsel[LPX_GB_SPACE], s2 = fo->modsel[LPX_GB_SPACE2];
  return (s1 && !IS(fo, SPACE, GLOBAL) && !IS(fo, SPACE, GENERIC)) ||
         (s2 && !IS(fo, SPACE2, GLOBAL) && !IS(fo, SPACE2, GENERIC)) || fo->modsel[LPX_GB_SHARED] != 0;
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
    if (o->kind != LPX_OPD_ADDR)
      return lpx_fail(v->m->ctx, "%s: operand %d must be an address: %s or a shared/param symbol", v->form->info.text, v->pos,
                      spell(v, "ptx.addr(reg, offset)", "[reg+offset]"));
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
    if (check_letter(v, alt[i], ops, starts[k])) {
      /* a vector where the letter wants none (or the reverse) fails this
       * alternative with a weaker message than a real mismatch would */
      int vec = ops[starts[k]].kind == LPX_OPD_VEC;
      int fits = vec ? strchr("vVwyk", alt[i]) != NULL : strchr("wy", alt[i]) == NULL;
      return fits ? -1 : -2;
    }
    k++;
  }
  return 0;
}

/* ------------------------------------------------------------ form rules */

/* Does the form carry any modifier of group g? */
static int has_group(const lpx_form *f, int g) { return f->modsel[g] != 0; }

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
  if (!IS(fo, RND, RN)) RULE_FAIL("cvt with .%s takes .rn only", lpx_types[is_fp8x2(t) ? t : t2].name);
  if (is_fp8x2(t)) {
    if (!IS(fo, SAT, SATFINITE)) RULE_FAIL("cvt to .%s needs .satfinite (cvt.rn.satfinite.%s)", lpx_types[t].name, lpx_types[t].name);
    if (t2 != LPX_T_F32 && t2 != LPX_T_F16X2) RULE_FAIL(".%s converts from two .f32 or one .f16x2, not .%s", lpx_types[t].name, lpx_types[t2].name);
    if (t2 == LPX_T_F16X2 && count != 2) RULE_FAIL("cvt to .%s from .f16x2 takes one source; got %d operand(s)", lpx_types[t].name, count);
    return 0;
  }
  if (t != LPX_T_F16X2) RULE_FAIL(".%s converts to .f16x2 only, not .%s", lpx_types[t2].name, lpx_types[t].name);
  if (has_group(fo, LPX_GB_SAT)) RULE_FAIL("cvt from .%s to .f16x2 is exact and takes no .satfinite", lpx_types[t2].name);
  return 0;
}

/* Is a comparison one of the unsigned orderings .lo .ls .hi .hs? */
static int cmp_unsigned(int c)
{
  return c == LPX_CMP_LO || c == LPX_CMP_LS || c == LPX_CMP_HI || c == LPX_CMP_HS;
}

/* Is a comparison one of the unordered float ones (.equ .neu ... .num .nan)? */
static int cmp_unordered(int c)
{
  static const uint8_t unordered[LPX_CMP__END] = {
    [LPX_CMP_EQU] = 1, [LPX_CMP_NEU] = 1, [LPX_CMP_LTU] = 1, [LPX_CMP_LEU] = 1,
    [LPX_CMP_GTU] = 1, [LPX_CMP_GEU] = 1, [LPX_CMP_NUM] = 1, [LPX_CMP_NAN] = 1,
  };
  return c > 0 && c < LPX_CMP__END && unordered[c];
}

/* Is an atomic/reduction operation a bitwise one (.and .or .xor)? */
static int op_bitwise(int op) { return op == LPX_ATOMOP_AND || op == LPX_ATOMOP_OR || op == LPX_ATOMOP_XOR; }

/* Is an atomic/reduction operation arithmetic (.add .min .max)? */
static int op_arith(int op) { return op == LPX_ATOMOP_ADD || op == LPX_ATOMOP_MIN || op == LPX_ATOMOP_MAX; }

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
    if (has_group(fo, LPX_GB_RELU) && t != LPX_T_S16 && t != LPX_T_S32 && t != LPX_T_S16X2 && k != 'H' &&
        t != LPX_T_F16 && t != LPX_T_BF16)
      RULE_FAIL(".relu applies to .s16, .s32, .s16x2, .f16, .f16x2, .bf16 and .bf16x2 only");
    if ((fi->op == LPX_OP_MUL || fi->op == LPX_OP_MAD) && is_int_kind(k)) {
      if (!has_group(fo, LPX_GB_MULMODE)) RULE_FAIL("integer %s needs .lo, .hi or .wide", lpx_isa_rows[fi->op].name);
      if (fi->wide && bits > 32) RULE_FAIL(".wide takes a 16- or 32-bit source type (the result is twice as wide)");
      if (has_group(fo, LPX_GB_SAT) && !IS(fo, MULMODE, HI))
        RULE_FAIL(".sat needs .hi (mad.hi.sat.s32)");
    }
    if (fi->op == LPX_OP_MAD && k == 'F' && !rnd) RULE_FAIL("floating-point mad needs a rounding modifier: .rn .rz .rm .rp");
    if (fi->op == LPX_OP_DIV && t == LPX_T_F32 && !rnd && !approx)
      RULE_FAIL("div.f32 needs .rn/.rz/.rm/.rp (IEEE), .approx or .full");
    if (fi->op == LPX_OP_DIV && t == LPX_T_F64 && (!rnd || approx))
      RULE_FAIL("div.f64 needs a rounding modifier (.rn .rz .rm .rp); .approx and .full are f32 only");
    if ((fi->op == LPX_OP_ADD || fi->op == LPX_OP_SUB || fi->op == LPX_OP_MUL) && rnd && (k == 'H' || t == LPX_T_F16 || t == LPX_T_BF16) &&
        !IS(fo, RND, RN))
      RULE_FAIL("half-precision %s takes .rn only", lpx_isa_rows[fi->op].name);
    break;
  case LPX_OP_FMA:
    if (has_group(fo, LPX_GB_RELU) && k != 'H' && t != LPX_T_F16 && t != LPX_T_BF16)
      RULE_FAIL(".relu applies to .f16, .f16x2, .bf16 and .bf16x2 only");
    if (t == LPX_T_F64 && (ftz || has_group(fo, LPX_GB_SAT))) RULE_FAIL(".ftz and .sat do not apply to .f64");
    break;
  case LPX_OP_RCP: case LPX_OP_SQRT:
    if (!rnd && !approx) RULE_FAIL("%s needs .rn/.rz/.rm/.rp (IEEE) or .approx", lpx_isa_rows[fi->op].name);
    if (IS(fo, APPROX, FULL)) RULE_FAIL(".full applies to div only");
    if (t == LPX_T_F64 && approx && (fi->op == LPX_OP_SQRT || !ftz))
      RULE_FAIL("%s", fi->op == LPX_OP_SQRT ? "sqrt.f64 has no .approx form; use .rn" : "rcp.approx.f64 needs .ftz (rcp.approx.ftz.f64)");
    if (t == LPX_T_F64 && rnd && ftz) RULE_FAIL(".ftz does not apply to IEEE .f64 %s", lpx_isa_rows[fi->op].name);
    break;
  case LPX_OP_SETP: case LPX_OP_SET: {
    int ct = fi->op == LPX_OP_SET ? t2 : t;
    char ck = kind_of(ct);
    int cmp = fo->modsel[LPX_GB_CMP];
    if (ck == 'B' && !IS(fo, CMP, EQ) && !IS(fo, CMP, NE)) RULE_FAIL(".b%d compares with .eq or .ne only; use .u%d or .s%d to order", lpx_types[ct].bits, lpx_types[ct].bits, lpx_types[ct].bits);
    if (cmp_unsigned(cmp) && ck != 'U') RULE_FAIL(".lo/.ls/.hi/.hs compare unsigned integers only; use .lt/.le/.gt/.ge");
    if (cmp_unordered(cmp) && ck != 'F' && ck != 'H') RULE_FAIL("unordered comparisons (.equ .ltu .num .nan ...) apply to floating-point types only");
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
        if (!IS(fo, RND, RNA) && !IS(fo, RND, RN) && !IS(fo, RND, RZ))
          RULE_FAIL("cvt to .tf32 needs .rna (or .rn/.rz on sm_90+)");
        if (!IS(fo, RND, RNA) && m->sm < 90)
          RULE_FAIL("cvt.rn/.rz to .tf32 needs sm_90 or newer; this kernel targets %s (use .rna)", m->target);
        if (has_group(fo, LPX_GB_SAT)) {
          int rna = IS(fo, RND, RNA);
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
    if (IS(fo, VOTE, BALLOT) != (t == LPX_T_B32))
      RULE_FAIL("vote.sync.ballot takes .b32; .all, .any and .uni take .pred");
    break;
  case LPX_OP_REDUX: {
    int op = fo->modsel[LPX_GB_ATOMOP];
    if (!op_bitwise(op) && !op_arith(op)) RULE_FAIL("redux.sync reduces with .add, .min, .max, .and, .or or .xor");
    if (op_bitwise(op) && t != LPX_T_B32) RULE_FAIL(".and/.or/.xor reduce .b32");
    if (op_arith(op) && t == LPX_T_B32) RULE_FAIL(".add/.min/.max reduce .u32 or .s32 (or .f32 min/max)");
    if (t == LPX_T_F32 && op == LPX_ATOMOP_ADD) RULE_FAIL(".f32 reduces with .min or .max only");
    if ((has_group(fo, LPX_GB_ABSNAN) || has_group(fo, LPX_GB_NAN)) && t != LPX_T_F32) RULE_FAIL(".abs and .NaN apply to .f32 only");
    break;
  }
  case LPX_OP_ATOM: case LPX_OP_RED: {
    int op = fo->modsel[LPX_GB_ATOMOP];
    int half = t == LPX_T_F16 || t == LPX_T_BF16 || k == 'H';
    int ok = 1;
    const char *want = "";
    switch (op) {
    case LPX_ATOMOP_ADD: ok = t == LPX_T_U32 || t == LPX_T_S32 || t == LPX_T_U64 || t == LPX_T_F32 || t == LPX_T_F64 || half;
      want = ".u32 .s32 .u64 .f32 .f64 .f16 .f16x2 .bf16 .bf16x2"; break;
    case LPX_ATOMOP_MIN: case LPX_ATOMOP_MAX: ok = t == LPX_T_U32 || t == LPX_T_S32 || t == LPX_T_U64 || t == LPX_T_S64 || half;
      want = ".u32 .s32 .u64 .s64 (.f16/.bf16 on sm_90)"; break;
    case LPX_ATOMOP_AND: case LPX_ATOMOP_OR: case LPX_ATOMOP_XOR: ok = t == LPX_T_B32 || t == LPX_T_B64; want = ".b32 .b64"; break;
    case LPX_ATOMOP_INC: case LPX_ATOMOP_DEC: ok = t == LPX_T_U32; want = ".u32"; break;
    case LPX_ATOMOP_EXCH: ok = fi->op == LPX_OP_ATOM && (t == LPX_T_B32 || t == LPX_T_B64 || t == LPX_T_B128); want = ".b32 .b64 .b128 (atom only)"; break;
    case LPX_ATOMOP_CAS: ok = fi->op == LPX_OP_ATOM && (t == LPX_T_B16 || t == LPX_T_B32 || t == LPX_T_B64 || t == LPX_T_B128); want = ".b16 .b32 .b64 .b128 (atom only)"; break;
    default: break;
    }
    const char *opname = lpx_modifier_name(LPX_GB_ATOMOP, op);
    if (!ok) RULE_FAIL(".%s does not take .%s; valid types: %s", opname ? opname : "?",
                       t >= 0 ? lpx_types[t].name : "?", want);
    if (half && !has_group(fo, LPX_GB_NOFTZ)) RULE_FAIL(".%s needs .noftz (e.g. %s.global.add.noftz.%s)", lpx_types[t].name, lpx_isa_rows[fi->op].name, lpx_types[t].name);
    if (!half && has_group(fo, LPX_GB_NOFTZ)) RULE_FAIL(".noftz applies to .f16/.bf16 types only");
    if (half && op != LPX_ATOMOP_ADD && m->sm < 90) RULE_FAIL("half-precision .min/.max needs sm_90 or newer; this kernel targets %s", m->target);
    if (half && op != LPX_ATOMOP_ADD && fi->vec == 1) RULE_FAIL("half-precision .min/.max needs a vector form (.v2 .v4 .v8)");
    if (fi->op == LPX_OP_ATOM) {
      int hint = has_group(fo, LPX_GB_HINT);
      int need = (op == LPX_ATOMOP_CAS ? 4 : 3) + hint;
      if (fi->vec == 1 && count != need)
        RULE_FAIL("takes %d operands (d, [addr], %s%s), got %d", need, op == LPX_ATOMOP_CAS ? "compare, new" : "b",
                  hint ? ", cache-policy" : "", count);
    }
    break;
  }
  case LPX_OP_LD: case LPX_OP_ST: case LPX_OP_LDU: {
    if (fi->op == LPX_OP_LDU && has_group(fo, LPX_GB_SPACE) && !IS(fo, SPACE, GLOBAL))
      RULE_FAIL("ldu reads the global space only");
    int scoped = IS(fo, SEM, RELAXED) || IS(fo, SEM, ACQUIRE) || IS(fo, SEM, RELEASE) || IS(fo, SEM, MMIO);
    if (scoped && !has_group(fo, LPX_GB_SCOPE))
      RULE_FAIL(".relaxed/.acquire/.release/.mmio need a scope: .cta .cluster .gpu or .sys");
    if (has_group(fo, LPX_GB_SCOPE) && !scoped)
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
    if (IS(fo, SPACE, GENERIC) || IS(fo, SPACE, PARAM_ENTRY) || IS(fo, SPACE, PARAM_FUNC))
      RULE_FAIL("cvta converts between generic and .global .shared .local .const or .param addresses");
    if (m->address_size == 64 && t == LPX_T_U32) RULE_FAIL("addresses are 64-bit in this module; use .u64");
    break;
  case LPX_OP_FENCE:
    if (has_group(fo, LPX_GB_SEM) && !has_group(fo, LPX_GB_SCOPE) && !has_group(fo, LPX_GB_PROXY))
      RULE_FAIL("fence%s needs a scope: .cta .cluster .gpu or .sys", "");
    break;
  case LPX_OP_BAR: case LPX_OP_BARRIER:
    if (IS(fo, BARMODE, ARRIVE) && count != 2) RULE_FAIL("bar.arrive takes a barrier and a thread count");
    if (IS(fo, BARMODE, RED) != (has_group(fo, LPX_GB_BARRED) || has_group(fo, LPX_GB_BOOL)))
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
 * The tcgen05 rows' modifiers (shapes, kinds, .xN counts, ::-qualified
 * names) are family groups of lpx_isa.def, parsed when the form interns;
 * here: the variable operand lists (mma, ld/st, commit, cp, shift), the
 * spellings a row's shared group does not allow, and target rules. */

/* Is row op one of the tcgen05 family ("tcgen05.mma", ...)? (The first
 * byte settles it for nearly every row: this runs for every instruction.) */
static int is_tcgen05(int op)
{
  const char *name = lpx_isa_rows[op].name;
  return name[0] == 't' && strncmp(name, "tcgen05.", 8) == 0;
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
    return lpx_fail(v->m->ctx, "%s: operand %d must be a tensor-memory address: %s with taddr a 32-bit register",
                    v->form->info.text, v->pos, spell(v, "ptx.addr(taddr)", "[taddr]"));
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
static int tc_mma(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  int sp = fo->info.sparse, cta2 = fo->info.cta_group == 2;
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
    if (IS(fo, TCKIND, KIND_F8F6F4)) return tc_fail(v, "scale-input-d is not available with .kind::f8f6f4 (use .kind::f16 or .kind::tf32)");
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
static int tc_ldst(vctx *v, lpx_operand *ops, uint32_t *starts, int count, int st)
{
  int num = v->form->info.num, split = IS(v->form, TCSHAPE, 16X32BX2);
  int n = num * lpx_tc_shape_regs(v->form->modsel[LPX_GB_TCSHAPE]);
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

/* tcgen05.commit [mbar][, cta-mask (.multicast::cluster)]: the barrier is
 * in .shared::cluster when a space is named. */
static int tc_commit(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  int mc = v->form->info.multicast;
  if (IS(v->form, SHARED, SHARED_CTA)) return tc_fail(v, "the mbarrier is named in .shared::cluster (or by a generic address), not .shared::cta");
  if (count != 1 + mc)
    return tc_fail(v, mc ? "takes [mbar] and a 16-bit cta-mask with .multicast::cluster" : "takes [mbar] only (a cta-mask needs .multicast::cluster)");
  v->pos = 1;
  if (check_letter(v, 'm', ops, starts[0])) return -1;
  return mc ? tc_src(v, 2, &ops[starts[1]], LPX_T_B16) : 0;
}

/* tcgen05.cp [taddr], s-desc: shape/multicast/format pairing. */
static int tc_cp(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  int need = IS(fo, TCCP, 64X128B) ? 1 : IS(fo, TCCP, 32X128B) ? 2 : 0;   /* none, .warpx2::*, .warpx4 */
  int got = !fo->modsel[LPX_GB_WARPX] ? 0 : IS(fo, WARPX, WARPX4) ? 2 : 1;
  if (got != need)
    return tc_fail(v, need == 1 ? ".64x128b needs .warpx2::02_13 or .warpx2::01_23"
                    : need == 2 ? ".32x128b needs .warpx4" : "only .64x128b and .32x128b take a .warpx multicast");
  if ((fo->modsel[LPX_GB_B8X16] != 0) != (fo->modsel[LPX_GB_SRCFMT] != 0)) return tc_fail(v, "decompression needs both .b8x16 and a source format (.b6x16_p32 or .b4x16_p64)");
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

/* A kernel uses one CTA-group size for its tcgen05 instructions (ptxas
 * refuses a mix): one that differs from the first the function took. */
static int tc_cta_group(vctx *v)
{
  const lpx_func *f = v->f;
  int g = v->form->info.cta_group;
  if (!g || !f->tc_cta_group || f->tc_cta_group == g) return 0;
  char msg[700], where[560] = "an earlier tcgen05 instruction";
  if (f->tc_cta_file > 0 && (size_t)f->tc_cta_file <= v->m->nfiles)
    snprintf(where, sizeof where, "%s:%d", lpx_strtab_get(&v->m->syms, v->m->files[f->tc_cta_file - 1]), f->tc_cta_line);
  snprintf(msg, sizeof msg, "cta_group::%d here, but %s used cta_group::%d; a kernel uses one CTA-group size",
           g, where, f->tc_cta_group);
  return tc_fail(v, msg);
}

/* Target rules for tcgen05 beyond the row's sm_100a..sm_103a gate. */
static int tc_target(vctx *v)
{
  char msg[200];
  if (v->m->sm == 102) return tc_fail(v, "tcgen05 needs sm_100a, sm_101a or sm_103a; this kernel targets sm_102a");
  if (v->m->sm == 103 && v->m->ptx_version < 88) {
    snprintf(msg, sizeof msg, "tcgen05 on sm_103a needs PTX ISA 8.8; this kernel uses %d.%d (raise the kernel's version)",
             v->m->ptx_version / 10, v->m->ptx_version % 10);
    return tc_fail(v, msg);
  }
  if (IS(v->form, TCKIND, KIND_I8) && v->m->sm == 103)
    return tc_fail(v, ".kind::i8 is not available on sm_103a");
  return 0;
}

/* Check a tcgen05 instruction: -1 error, 0 done, 1 not tcgen05 or go on
 * with the row's signature (alloc, dealloc, relinquish, fence, wait). */
static int tcgen05_check(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  int op = v->form->info.op;
  if (op < 0 || !is_tcgen05(op)) return 1;
  if (tc_target(v) || tc_cta_group(v)) return -1;
  switch (op) {
  case LPX_OP_TCMMA: return tc_mma(v, ops, starts, count);
  case LPX_OP_TCLD: case LPX_OP_TCST: return tc_ldst(v, ops, starts, count, op == LPX_OP_TCST);
  case LPX_OP_TCCOMMIT: return tc_commit(v, ops, starts, count);
  case LPX_OP_TCCP: return tc_cp(v, ops, starts, count);
  case LPX_OP_TCSHIFT:
    if (count != 1) return tc_fail(v, "takes one operand, [taddr]");
    return tc_tmem(v, 1, &ops[starts[0]]) ? -1 : 0;
  case LPX_OP_TCALLOC: case LPX_OP_TCDEALLOC:
    if (IS(v->form, SHARED, SHARED_CLUSTER)) return tc_fail(v, "tcgen05.alloc writes the address to .shared::cta (or through a generic address)");
    if (count == 2 && ops[starts[1]].kind != LPX_OPD_REG && tc_ncols(v, &ops[starts[1]])) return -1;
    return 1;
  default: return 1;
  }
}
/* ======================================================== end tcgen05 === */

/* ================================================================
 * Ampere matrix instructions (mma.sync, ldmatrix, stmatrix): operand
 * counts and register widths per shape and type, and the sm each
 * shape/type pair needs. The opcode's modifiers are read from its text.
 * ================================================================ */

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
               t->name, lpx_reg_text(v->m, v->f, r->id, name, sizeof name), bits,
               kind == 'F' ? (bits == 64 ? "f64" : "f32") : kind == 'I' ? "s32/u32/b32" : "b32");
      return opfail(v, msg);
    }
  }
  return 0;
}

/* Register bits and kind of an accumulator matrix type. */
static int acc_bits(int mt, char *kind)
{
  *kind = mt == LPX_MT_S32 ? 'I' : mt == LPX_MT_F16 ? 'B' : 'F';
  return mt == LPX_MT_F64 ? 64 : 32;
}

/* mma.sync's target: the shape's sm and PTX version (fp8: 8.4 for
 * m16n8k32 into .f32, 8.7 for m16n8k16 or .f16 accumulators). */
static int check_mma_target(vctx *v, const char *text, const lpx_mma_shape *r)
{
  const lpx_form_info *fi = &v->form->info;
  const char *at = lpx_mtype_name(fi->atype), *dt = lpx_mtype_name(fi->dtype);
  int m = r->m, n = r->n, k = r->k, fp8 = r->family == LPX_MT_E4M3;
  int need = fp8 && fi->dtype == LPX_MT_F16 ? 87 : r->ptx;
  if (v->m->sm < r->sm)
    return lpx_fail(v->m->ctx, "%s: mma.sync.m%dn%dk%d with .%s inputs needs sm_%d; this kernel targets %s", text, m, n, k, at,
                    r->sm, v->m->target);
  if (v->m->ptx_version >= need) return 0;
  if (fp8)
    return lpx_fail(v->m->ctx, "%s: mma.sync.m%dn%dk%d.%s with .e4m3/.e5m2 inputs needs PTX ISA %d.%d; this kernel uses %d.%d",
                    text, m, n, k, dt, need / 10, need % 10, v->m->ptx_version / 10, v->m->ptx_version % 10);
  return lpx_fail(v->m->ctx, "%s: mma.sync.m%dn%dk%d with .%s inputs needs PTX ISA %d.%d; this kernel uses %d.%d", text, m, n, k,
                  at, need / 10, need % 10, v->m->ptx_version / 10, v->m->ptx_version % 10);
}

/* mma.sync: a form of the table (lpx_mma_form_check), its target, and the
 * four fragment vectors. */
static int check_mma(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const lpx_form_info *fi = &v->form->info;
  const char *text = fi->text;
  char why[256];
  if (lpx_mma_form_check(fi, why, sizeof why)) return lpx_fail(v->m->ctx, "%s: %s", text, why);
  const lpx_mma_shape *r = lpx_mma_shape_find(fi->shape_m, fi->shape_n, fi->shape_k, lpx_mma_family_of(fi->atype)->family);
  if (check_mma_target(v, text, r)) return -1;
  if (count != 4) return lpx_fail(v->m->ctx, "%s takes 4 operands {d}, {a}, {b}, {c}, got %d", text, count);
  int quad = r->acc_regs == 0;
  char kd, kc;
  int bd = acc_bits(fi->dtype, &kd), bc = acc_bits(fi->ctype, &kc);
  int nd = quad ? (kd == 'B' ? 4 : 8) : (kd == 'B' ? r->acc_regs / 2 : r->acc_regs);
  int nc = quad ? (kc == 'B' ? 4 : 8) : (kc == 'B' ? r->acc_regs / 2 : r->acc_regs);
  int in_bits = r->family == LPX_MT_F64 ? 64 : 32;
  char in_kind = r->family == LPX_MT_F64 ? 'F' : 'B';
  if (mx_vector(v, ops, starts, 0, nd, bd, kd, "d")) return -1;
  if (mx_vector(v, ops, starts, 1, r->a_regs, in_bits, in_kind, "a")) return -1;
  if (mx_vector(v, ops, starts, 2, r->b_regs, in_bits, in_kind, "b")) return -1;
  return mx_vector(v, ops, starts, 3, nc, bc, kc, "c");
}

/* ldmatrix / stmatrix m8n8: .x1/.x2/.x4 and a vector of that many b32. */
static int check_ldst_matrix(vctx *v, lpx_operand *ops, uint32_t *starts, int count, int store)
{
  const lpx_form_info *fi = &v->form->info;
  const char *text = fi->text;
  if (fi->num != 1 && fi->num != 2 && fi->num != 4) return lpx_fail(v->m->ctx, "%s: needs one of .x1 .x2 .x4", text);
  if (!fi->shape_m || fi->shape_k) return lpx_fail(v->m->ctx, "%s: needs a shape (.m8n8)", text);
  if (count != 2) return lpx_fail(v->m->ctx, "%s takes 2 operands (%s), got %d", text, store ? "[addr], {regs}" : "{regs}, [addr]", count);
  int ai = store ? 0 : 1;
  v->pos = ai + 1;
  if (ops[starts[ai]].kind != LPX_OPD_ADDR) return opfail(v, "must be a shared-memory address");
  if (fi->shape_m != 8 || fi->shape_n != 8) return 0;   /* m16n16 / m8n16 (sm_100) forms: counts not checked */
  return mx_vector(v, ops, starts, store ? 1 : 0, fi->num, 32, 'B', store ? "sources" : "destinations");
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

/* Tensor modes with their own rank, coordinate count and direction. */
static const struct tensor_mode { int rank, coords, dir; } tensor_modes[LPX_LOADMODE__END] = {
#define X(mode, rank, coords, dir) [LPX_LOADMODE_##mode] = { rank, coords, dir },
  LPX_TENSOR_MODES(X)
#undef X
};

/* A tensor form's mode: its rank and direction (LPX_TENSOR_MODES); the
 * number of coordinates it takes into *coords. */
static int hp_tensor_mode(vctx *v, int *coords)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  int mode = fo->modsel[LPX_GB_LOADMODE], rank = fo->info.rank;
  const struct tensor_mode *tm = &tensor_modes[mode];
  *coords = tm->coords ? tm->coords : rank;
  if (!tm->rank) return 0;
  const char *name = lpx_modifier_name(LPX_GB_LOADMODE, mode);
  if (rank != tm->rank) return lpx_fail(v->m->ctx, "%s: .%s takes .%dd tensors only, not .%dd", text, name, tm->rank, rank);
  int writes = IS(fo, SPACE, GLOBAL) && has_group(fo, LPX_GB_SPACE2);
  if (tm->dir != (writes ? 2 : 1))
    return lpx_fail(v->m->ctx, "%s: .%s %s", text, name, tm->dir == 1 ? "reads a tensor: loads (.shared::cluster.global or "
                    ".shared::cta.global) and prefetches only" : "writes a tensor: stores and reductions (.global.shared::cta) only");
  return 0;
}

/* cp.async.bulk.tensor.<N>d / prefetch / reduce: the coordinate list inside
 * [tensorMap, {c...}] has N entries (or what the mode takes). */
static int hp_tensor(vctx *v, const lpx_operand *ops, uint32_t nops)
{
  const char *text = v->form->info.text;
  int rank = v->form->info.rank, coords;
  if (!v->form->info.tensor) return 0;
  if (!rank) return lpx_fail(v->m->ctx, "%s: needs a rank: one of .1d .2d .3d .4d .5d (TMA tensors have 1 to 5 dimensions)", text);
  if (hp_tensor_mode(v, &coords)) return -1;
  for (uint32_t i = 0; i + 2 < nops; i++) {
    if (ops[i].kind != LPX_OPD_BRACKET) continue;
    const lpx_operand *list = &ops[i + 2];
    if (list->kind != LPX_OPD_VEC || ops[i].aux != 2)
      return lpx_fail(v->m->ctx, "%s: the tensor operand must be [tensorMap, {coordinates}]", text);
    if (list->aux != coords && coords != rank)
      return lpx_fail(v->m->ctx, "%s: the tensor coordinates list %d value(s); .%s takes %d", text, list->aux,
                      lpx_modifier_name(LPX_GB_LOADMODE, v->form->modsel[LPX_GB_LOADMODE]), coords);
    if (list->aux != coords)
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
                    v->form->info.prefetch ? "tensor operand" : "mbarrier");
  for (int e = 1; e <= rank - 2; e++) {
    const lpx_operand *o = &ops[starts[k] + (uint32_t)e];
    int reg16 = o->kind == LPX_OPD_REG && o->id >= 0 && (size_t)o->id < v->f->nregs && lpx_types[v->f->reg_type[o->id]].bits == 16;
    v->pos = k + 1;
    if (!reg16 && o->kind != LPX_OPD_NUM && o->kind != LPX_OPD_IMM && o->kind != LPX_OPD_INT)
      return opfail(v, "(the im2col offsets) must hold 16-bit registers or immediates");
  }
  return 0;
}

/* The types cp.reduce.async.bulk takes per operation into each space
 * (0 in both: not a bulk reduction). */
static const uint64_t red_global[LPX_ATOMOP__END] = {
#define X(op, global, cluster) [LPX_ATOMOP_##op] = global,
  LPX_BULK_REDOPS(X)
#undef X
};
static const uint64_t red_cluster[LPX_ATOMOP__END] = {
#define X(op, global, cluster) [LPX_ATOMOP_##op] = cluster,
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
  if (op <= 0 || op >= LPX_ATOMOP__END || !red_global[op]) return lpx_fail(v->m->ctx, "%s: needs one of .add .min .max .inc .dec .and .or .xor", text);
  if (fo->info.tensor) {
    if (t >= 0) return lpx_fail(v->m->ctx, "%s: the tensor form takes no type; the element type comes from the tensor map", text);
    return 0;
  }
  int cluster = IS(fo, SPACE, SHARED_CLUSTER);
  uint64_t ok = cluster ? red_cluster[op] : red_global[op];
  if (t < 0 || !(ok >> t & 1)) {
    char want[256];
    type_list(ok, want, sizeof want);
    return lpx_fail(v->m->ctx, "%s: .%s into %s takes %s; got .%s", text, lpx_modifier_name(LPX_GB_ATOMOP, op), cluster ? ".shared::cluster" : ".global",
                    want, t >= 0 ? lpx_types[t].name : "(no type)");
  }
  int half = t == LPX_T_F16 || t == LPX_T_BF16, noftz = has_group(fo, LPX_GB_NOFTZ);
  if (half && op == LPX_ATOMOP_ADD && !noftz) return lpx_fail(v->m->ctx, "%s: .add on .%s needs .noftz (.add.noftz.%s)", text, lpx_types[t].name, lpx_types[t].name);
  if (noftz && !(half && op == LPX_ATOMOP_ADD)) return lpx_fail(v->m->ctx, "%s: .noftz goes with .add.f16 / .add.bf16 only", text);
  return 0;
}

/* Fail for a form that needs PTX ISA need (x10), naming the version the
 * kernel asks for and the spelling that raises it (verb: "need(s)"). */
static int ptx_need(vctx *v, const char *what, const char *verb, int need)
{
  int have = v->m->ptx_version;
  return lpx_fail(v->m->ctx, "%s %s PTX ISA %d.%d; this kernel uses %d.%d (version = \"%d.%d\")", what, verb, need / 10, need % 10,
                  have / 10, have % 10, need / 10, need % 10);
}

/* wgmma.mma_async: a form of the ISA's list (lpx_wgmma_form_check) and
 * the PTX versions the sparse and mixed-integer forms need. */
static int wg_form(vctx *v, const char *text, const lpx_wgmma_family **fam)
{
  const lpx_form_info *fi = &v->form->info;
  char why[320];
  if (lpx_wgmma_form_check(v->form, why, sizeof why)) return lpx_fail(v->m->ctx, "%s: %s", text, why);
  *fam = lpx_wgmma_family_of(fi->atype);
  if (fi->sparse && v->m->ptx_version < 82) {
    snprintf(why, sizeof why, "%s: sparse wgmma (.sp)", text);
    return ptx_need(v, why, "needs", 82);
  }
  if ((*fam)->mixed_ptx && fi->atype != fi->btype && v->m->ptx_version < (*fam)->mixed_ptx) {
    snprintf(why, sizeof why, "%s: mixed integer inputs (.%s.%s)", text, lpx_mtype_name(fi->atype), lpx_mtype_name(fi->btype));
    return ptx_need(v, why, "need", (*fam)->mixed_ptx);
  }
  return 0;
}

/* The .sp form's sp-meta (a 32-bit register) and sp-sel (an immediate
 * 0..the family's largest), operands 4 and 5. */
static int hp_wgmma_sp(vctx *v, const lpx_wgmma_family *fam, const lpx_operand *ops, const uint32_t *starts)
{
  const lpx_operand *m = &ops[starts[3]];
  const char *an = lpx_mtype_name(v->form->info.atype);
  char msg[160];
  v->pos = 4;
  if (m->kind != LPX_OPD_REG || (m->id >= 0 && (size_t)m->id < v->f->nregs && lpx_types[v->f->reg_type[m->id]].bits != 32))
    return opfail(v, "(sparsity metadata) must be a 32-bit register");
  int ok = 1;
  int64_t sel = hp_imm(&ops[starts[4]], &ok);
  v->pos = 5;
  if (ok && sel >= 0 && sel <= fam->sparse_sel) return 0;
  if (fam->sparse_sel) snprintf(msg, sizeof msg, "(sparsity selector) must be the immediate 0 or 1 for .%s inputs "
                                "(the thread pair of each group of four that holds the metadata)", an);
  else snprintf(msg, sizeof msg, "(sparsity selector) must be the immediate 0 for .%s inputs "
                "(8-bit inputs: all four threads of a group hold the metadata)", an);
  return opfail(v, msg);
}

/* The operand list a wgmma form takes, for messages. */
static void wg_operands(char *out, size_t cap, int areg, int nsp, int nscale, int ntrans)
{
  snprintf(out, cap, "{d}, %s, b-desc%s, scale-d%s%s", areg ? "{a}" : "a-desc", nsp ? ", sp-meta, sp-sel" : "",
           nscale ? ", imm-scale-a, imm-scale-b" : "", !ntrans ? "" : ntrans == 1 ? ", imm-trans-b" : ", imm-trans-a, imm-trans-b");
}

/* A wgmma operand count that is not the form's: the operands it takes,
 * and why when the extra ones are transposes the family (or A from
 * registers) does not take. */
static int wg_count_fail(vctx *v, const lpx_wgmma_family *fam, int areg, int want, int count)
{
  const lpx_form_info *fi = &v->form->info;
  int nsp = fi->sparse ? 2 : 0, nscale = fam->scale ? 2 : 0, ntrans = fam->trans ? (areg ? 1 : 2) : 0;
  char list[160], hint[160] = "";
  wg_operands(list, sizeof list, areg, nsp, nscale, ntrans);
  if (!fam->trans && count > want)
    snprintf(hint, sizeof hint, "; imm-trans-a/imm-trans-b (MN-major operands) are for .f16 and .bf16 only, not .%s",
             lpx_mtype_name(fi->atype));
  else if (fam->trans && areg && count == want + 1)
    snprintf(hint, sizeof hint, "; A from registers cannot be transposed (no imm-trans-a)");
  return lpx_fail(v->m->ctx, "%s takes %d operands: %s; got %d%s", fi->text, want, list, count, hint);
}

/* wgmma.mma_async{.sp}: a form of the ISA's list, the accumulator vector, A
 * (a 64-bit descriptor or 4 .b32 registers), the B descriptor, for .sp the
 * sparsity metadata and selector, scale-d and the family's immediates
 * (imm-scale-a/-b: 1 or -1; imm-trans-a/-b: 0 or 1, f16/bf16 only, no
 * imm-trans-a with A from registers). */
static int hp_wgmma(vctx *v, lpx_operand *ops, uint32_t *starts, int count)
{
  const lpx_form_info *fi = &v->form->info;
  const char *text = fi->text;
  const lpx_wgmma_family *fam = NULL;
  if (wg_form(v, text, &fam)) return -1;
  int areg = count > 1 && ops[starts[1]].kind == LPX_OPD_VEC;
  int nscale = fam->scale ? 2 : 0, ntrans = fam->trans ? (areg ? 1 : 2) : 0, nsp = fi->sparse ? 2 : 0;
  int want = 4 + nsp + nscale + ntrans;
  if (count != want) return wg_count_fail(v, fam, areg, want, count);
  if (fi->sparse && hp_wgmma_sp(v, fam, ops, starts)) return -1;
  int f16d = fi->dtype == LPX_MT_F16, n = fi->shape_n;
  if (mx_vector(v, ops, starts, 0, f16d ? n / 4 : n / 2, 32, f16d ? 'B' : fi->dtype == LPX_MT_S32 ? 'I' : 'F', "d")) return -1;
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

/* tensormap.replace fields: X(TMFIELD name, class, 64-bit value, largest
 * immediate). Class 1: [addr], new_val; 2: [addr], ord, new_val;
 * 3: [addr], immediate new_val (the ISA's numbering; largest: what this
 * PTX/sm pair takes without the sub-byte types and the 96B swizzle). */
#define TM_FIELDS(X) \
  X(GLOBAL_ADDRESS, 1, 1, 0) X(RANK, 1, 0, 0) X(BOX_DIM, 2, 0, 0) X(GLOBAL_DIM, 2, 0, 0) \
  X(GLOBAL_STRIDE, 2, 1, 0) X(ELEMENT_STRIDE, 2, 0, 0) X(ELEMTYPE, 3, 0, 12) X(INTERLEAVE_LAYOUT, 3, 0, 2) \
  X(SWIZZLE_MODE, 3, 0, 3) X(SWIZZLE_ATOMICITY, 3, 0, 3) X(FILL_MODE, 3, 0, 1)

static const struct tm_field { int cls, wide, most; } tm_fields[LPX_TMFIELD__END] = {
#define X(name, cls, wide, most) [LPX_TMFIELD_##name] = { cls, wide, most },
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
  if (!fi) return 0;
  const struct tm_field *f = &tm_fields[fi];
  const char *fname = lpx_modifier_name(LPX_GB_TMFIELD, fi);
  if (has_group(fo, LPX_GB_SPACE) && !IS(fo, SPACE, GLOBAL) && !IS(fo, SPACE, SHARED_CTA))
    return lpx_fail(v->m->ctx, "%s: a tensor map is edited in .global or .shared::cta memory (or through a generic address)", text);
  if ((fo->info.type == LPX_T_B64) != f->wide)
    return lpx_fail(v->m->ctx, "%s: .%s takes a %s value", text, fname, f->wide ? ".b64" : ".b32");
  if (count != (f->cls == 2 ? 3 : 2))
    return lpx_fail(v->m->ctx, "%s takes %s, got %d operand(s)", text, f->cls == 2 ? "[map], ordinal, new_val" : "[map], new_val", count);
  int ok = 1;
  int64_t x = count > 1 ? hp_imm(&ops[starts[1]], &ok) : 0;
  v->pos = 2;
  if (f->cls == 2 && (!ok || x < 0 || x > 4)) return opfail(v, "(the ordinal) must be an immediate 0..4");
  if (f->cls == 3 && (!ok || x < 0 || x > f->most))
    return lpx_fail(v->m->ctx, "%s: .%s takes an immediate 0..%d (the ISA's numbering)", text, fname, f->most);
  return 0;
}

/* tensormap.cp_fenceproxy: the one form PTX defines (.global.shared::cta,
 * .tensormap::generic, .release, a scope) and [dst], [src], 128. */
static int hp_tmcpfence(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text;
  if (!IS(fo, SPACE, GLOBAL) || !IS(fo, SPACE2, SHARED_CTA))
    return lpx_fail(v->m->ctx, "%s: tensormap.cp_fenceproxy copies .global.shared::cta (to global from shared::cta, in that order)", text);
  if (!IS(fo, PROXYK, TENSORMAP_GENERIC) || !IS(fo, SEM, RELEASE))
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
  if (!IS(fo, PROXYK, TENSORMAP_GENERIC)) {
    if (count) return lpx_fail(v->m->ctx, "%s takes no operands (only fence.proxy.tensormap::generic.acquire does)", text);
    return 0;
  }
  int acquire = IS(fo, SEM, ACQUIRE), release = IS(fo, SEM, RELEASE);
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
    const lpx_form *fo = v->form;
    int store = IS(fo, SPACE, GLOBAL) && IS(fo, SPACE2, SHARED_CTA);
    if (hp_tensor(v, ops, nops) || (fo->info.op == LPX_OP_CPREDBULK && hp_reduce(v))) return -1;
    if (fo->info.tensor && IS(fo, LOADMODE, IM2COL) && !store) return hp_im2col(v, ops, starts, count, fo->info.rank);
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

/* ======================================================== mbarrier spaces */

/* Per mbarrier operation: the SPACE values it takes, those with
 * .noComplete, and whether its .shared::cluster form returns no state. */
static const struct mbar_rule { uint32_t spaces, nocomplete; int cluster_sink; } mbar_rules[LPX_MBAR__END] = {
#define X(op, spaces, nocomplete, sink) [LPX_MBAR_##op] = { spaces, nocomplete, sink },
  LPX_MBAR_SPACES(X)
#undef X
};

/* Write ".shared, .shared::cta or .shared::cluster" for a set of SPACE values. */
static void space_list(uint32_t set, char *out, size_t cap)
{
  size_t n = 0;
  int left = 0;
  out[0] = '\0';
  for (uint32_t s = set; s; s &= s - 1) left++;
  for (int sp = 1; sp < LPX_SPACE__END && n + 1 < cap; sp++) {
    if (!(set >> sp & 1)) continue;
    n += (size_t)snprintf(out + n, cap - n, "%s.%s", n ? (left == 1 ? " or " : ", ") : "", lpx_modifier_name(LPX_GB_SPACE, sp));
    left--;
  }
}

/* mbarrier: the state space the operation takes (LPX_MBAR_SPACES), the
 * operations and operands .noComplete goes with, and the sink destination
 * of an arrival on a .shared::cluster barrier. */
static int check_mbarrier(vctx *v, const lpx_operand *ops, const uint32_t *starts, int count)
{
  const lpx_form *fo = v->form;
  const char *text = fo->info.text, *name = lpx_modifier_name(LPX_GB_MBAR, fo->modsel[LPX_GB_MBAR]);
  const struct mbar_rule *r = &mbar_rules[fo->modsel[LPX_GB_MBAR]];
  int nocomp = has_group(fo, LPX_GB_NOCOMP), sp = fo->modsel[LPX_GB_SPACE];
  uint32_t ok = nocomp ? r->nocomplete : r->spaces;
  char want[128];
  if (nocomp && !r->nocomplete) return lpx_fail(v->m->ctx, "%s: .noComplete goes with mbarrier.arrive and mbarrier.arrive_drop only", text);
  if (nocomp && has_group(fo, LPX_GB_EXPECT)) return lpx_fail(v->m->ctx, "%s: .noComplete does not combine with .expect_tx", text);
  if (sp && !ok) return lpx_fail(v->m->ctx, "%s: mbarrier.%s takes no state space (it reads a state token, not a barrier)", text, name);
  if (sp && !(ok >> sp & 1)) {
    space_list(ok, want, sizeof want);
    return lpx_fail(v->m->ctx, "%s: mbarrier.%s%s takes %s (or no space: a generic address), not .%s", text, name,
                    nocomp ? ".noComplete" : "", want, lpx_modifier_name(LPX_GB_SPACE, sp));
  }
  if (nocomp && count < 3) return lpx_fail(v->m->ctx, "%s: .noComplete needs the count operand (state, [addr], count)", text);
  if (r->cluster_sink && IS(fo, SPACE, SHARED_CLUSTER) && count > 0 && ops[starts[0]].kind != LPX_OPD_SINK)
    return lpx_fail(v->m->ctx, "%s: an arrival on a .shared::cluster barrier returns no state; its destination is the sink _", text);
  return 0;
}

/* ================================================== end of mbarrier spaces */

/* What the form rules read of a module: its target and PTX version. */
static int64_t rules_key(const lpx_module *m)
{
  return ((int64_t)m->ptx_version << 32) | ((int64_t)m->sm << 8) | (int64_t)(m->family & 0xff);
}

/* Did the form's rules (check_rules) already pass in this module with
 * count operands? They read only the form, the count and the module's
 * target and PTX version, so each form is checked once per count. */
static int rules_passed(const lpx_module *m, const lpx_form *form, int count)
{
  size_t id = (size_t)(form - m->ctx->forms);
  return count < 255 && id < m->rules_cap && m->rules_ok[id] == count + 1 && m->rules_key == rules_key(m);
}

/* Remember that the form's rules passed with count operands (best effort:
 * without memory they are simply checked again next time). */
static void rules_remember(lpx_module *m, const lpx_form *form, int count)
{
  size_t id = (size_t)(form - m->ctx->forms), old = m->rules_cap;
  if (m->rules_key != rules_key(m)) {   /* a parsed .target or .version changed the module */
    if (m->rules_cap) memset(m->rules_ok, 0, m->rules_cap);
    m->rules_key = rules_key(m);
  }
  if (count >= 255 || LPX_RESERVE(m->rules_ok, m->rules_cap, id + 1)) return;
  if (m->rules_cap > old) memset(m->rules_ok + old, 0, m->rules_cap - old);
  m->rules_ok[id] = (uint8_t)(count + 1);
}

/* Validate an instruction's operands; untyped numbers get their type here. */
static int validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops, int32_t file, int32_t line)
{
  uint32_t starts[64];
  if (!nesting_ok(ops, (uint32_t)nops))
    return lpx_fail(m->ctx, "%s: operands nested more than %d deep", form->info.text, LPX_OPD_MAX_NESTING);
  int count = top_count(ops, (uint32_t)nops, starts, 64);
  if (count < 0) return lpx_fail(m->ctx, "%s: malformed operand list", form->info.text);
  const char *sig = form->info.op >= 0 ? lpx_isa_rows[form->info.op].sig : "*";
  vctx v = { m, f, form, 0, 0, 0, file, line };
  int op = form->info.op;
  v.sink_ok = op < 0 || sig[0] == '*' || op == LPX_OP_SETP || op == LPX_OP_ATOM || op == LPX_OP_ELECT || op == LPX_OP_LOP3;
  if (op >= 0 && !rules_passed(m, form, count)) {
    if (check_rules(m, form, count)) return -1;
    rules_remember(m, form, count);
  }
  int tc = count <= 64 ? tcgen05_check(&v, ops, starts, count) : 1;
  if (tc <= 0) return tc;
  v.relaxed = op == LPX_OP_LD || op == LPX_OP_ST || op == LPX_OP_LDU || op == LPX_OP_CVT;
  if (op >= 0 && count <= 64 && check_matrix(&v, ops, starts, count)) return -1;
  if (op >= 0 && count <= 64 && check_hopper(&v, ops, (uint32_t)nops, starts, count)) return -1;
  if (op == LPX_OP_MBARRIER && count <= 64 && check_mbarrier(&v, ops, starts, count)) return -1;
  if (sig[0] == '*') {
    for (int k = 0; k < count && k < 64; k++) {
      lpx_operand *o = &ops[starts[k]];
      v.pos = k + 1;
      if (o->kind == LPX_OPD_NUM && check_src(&v, o, o->fval == floor(o->fval) ? LPX_T_S64 : LPX_T_F32, 0)) return -1;
    }
    return 0;
  }
  int first_err = 0;
  char saved[LPX_MSG_MAX];   /* not zero-filled: this runs for every instruction */
  saved[0] = '\0';
  for (const char *alt = sig;;) {
    const char *end = strchr(alt, ';');
    size_t len = end ? (size_t)(end - alt) : strlen(alt);
    int rc = check_alt(&v, alt, len, ops, starts, count);
    if (rc == 0) return count <= 64 ? lpx_rules_check(m, f, form, ops, nops, starts, count) : 0;
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

/* ======================================================= validated shapes
 * A kernel's instructions take few shapes: an unrolled loop appends the
 * same few hundred thousands of times, and validating one costs as much
 * as the rest of appending it. A shape that validated is remembered per
 * module: the form, what validate() reads of the module and function
 * (target, version, address size, the function's CTA group), and each
 * operand with a register replaced by its type and a symbol or label by
 * its kind (validity reads nothing else of them). A hit copies back the
 * operands as validation left them (numbers typed), keeping the ids. */

#define VMEMO_SLOTS 256   /* direct-mapped by hash */
#define VMEMO_OPS 10      /* longer operand lists are validated each time */

typedef struct vmemo_entry {
  uint64_t hash;
  int32_t form, nops;
  int64_t module_key;
  uint64_t in[VMEMO_OPS * 3];      /* each operand's key: three words */
  lpx_operand out[VMEMO_OPS];
} vmemo_entry;

struct lpx_vmemo { vmemo_entry slot[VMEMO_SLOTS]; };

/* What validate() reads of the module and function, as one number. */
static int64_t vmemo_module_key(const lpx_module *m, const lpx_func *f)
{
  return (rules_key(m) << 12) ^ ((int64_t)m->address_size << 4) ^ (int64_t)f->tc_cta_group;
}

/* An operand's key in three words: kind, type, aux and what stands for
 * its id (a register's type, nothing for a symbol or label, else the
 * id), then ival and fval's bits; 0 when it names a register outside the
 * function (validate() reports that). */
static int vmemo_word(const lpx_func *f, const lpx_operand *o, uint64_t *w)
{
  int32_t id = o->id;
  if (o->kind == LPX_OPD_REG || (o->kind == LPX_OPD_ADDR && o->aux == LPX_OPD_REG)) {
    if (id < 0 || (size_t)id >= f->nregs) return 0;
    id = f->reg_type[id];
  } else if (lpx_opd_names_symbol(o)) {
    id = 0;
  }
  w[0] = ((uint64_t)(uint8_t)o->kind << 56) | ((uint64_t)(uint8_t)o->type << 48) | ((uint64_t)(uint16_t)o->aux << 32) |
         (uint32_t)id;
  w[1] = (uint64_t)o->ival;
  memcpy(&w[2], &o->fval, sizeof w[2]);
  return (uint32_t)o->kind < 256 && (uint32_t)(o->type + 1) < 256 && (uint32_t)o->aux < 65536;
}

/* The operands' key words and their hash with the form; 0 when the
 * instruction is not memoized. */
static int vmemo_key(const lpx_func *f, int32_t form, const lpx_operand *ops, int nops, uint64_t *key, uint64_t *hash)
{
  if (nops > VMEMO_OPS) return 0;
  uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(form + 1) + (uint64_t)nops;
  for (int i = 0; i < nops; i++) {
    uint64_t *w = key + 3 * i;
    if (!vmemo_word(f, &ops[i], w)) return 0;
    h = (h ^ w[0] ^ (w[1] * 0xff51afd7ed558ccdull) ^ (w[2] >> 7)) * 0xc4ceb9fe1a85ec53ull;
  }
  h ^= h >> 33;   /* mix the high bits down: slots are picked by the low ones */
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  *hash = h;
  return 1;
}

/* The entry that remembers this shape as valid, or NULL. */
static const vmemo_entry *vmemo_find(const lpx_module *m, const lpx_func *f, int32_t form, const uint64_t *key, int nops,
                                     uint64_t hash)
{
  if (!m->vmemo) return NULL;
  const vmemo_entry *e = &m->vmemo->slot[hash % VMEMO_SLOTS];
  if (e->hash != hash || e->form != form || e->nops != nops || e->module_key != vmemo_module_key(m, f)) return NULL;
  return memcmp(e->in, key, sizeof(uint64_t) * 3 * (size_t)nops) == 0 ? e : NULL;
}

/* Remember a shape that validated, with its operands as validation left
 * them (best effort: without memory it is validated again next time). */
static void vmemo_store(lpx_module *m, const lpx_func *f, int32_t form, const uint64_t *key, const lpx_operand *ops,
                        int nops, uint64_t hash)
{
  if (!m->vmemo && !(m->vmemo = calloc(1, sizeof *m->vmemo))) return;
  vmemo_entry *e = &m->vmemo->slot[hash % VMEMO_SLOTS];
  e->hash = hash;
  e->form = form;
  e->nops = nops;
  e->module_key = vmemo_module_key(m, f);
  if (nops) {   /* ops may be NULL when there are none */
    memcpy(e->in, key, sizeof(uint64_t) * 3 * (size_t)nops);
    memcpy(e->out, ops, sizeof(lpx_operand) * (size_t)nops);
  }
}

/* Whether the memo is on: $LUAPTX_VALIDATE_MEMO (0 or 1, default 1; 0 for
 * spec/validate_memo_spec.lua, which compares every verdict with and
 * without it), read while the module has no memo yet, so a module made
 * after the variable changes follows it. -1 when the value is not 0 or 1. */
static int vmemo_on(lpx_module *m)
{
  int on = 1;
  if (m->vmemo) return 1;
  return lpx_env_flag(m->ctx, "LUAPTX_VALIDATE_MEMO", &on) ? -1 : on;
}

/* Validate through the memo: a remembered shape gets its validated
 * operands back (ids kept); a new one is validated and remembered. */
static int validate_memo(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops, int32_t file,
                         int32_t line)
{
  uint64_t key[VMEMO_OPS * 3], hash;
  int32_t id = (int32_t)(form - m->ctx->forms);
  int on = vmemo_on(m);
  if (on < 0) return -1;
  if (!on || !vmemo_key(f, id, ops, nops, key, &hash)) return validate(m, f, form, ops, nops, file, line);
  const vmemo_entry *e = vmemo_find(m, f, id, key, nops, hash);
  if (e) {
    for (int i = 0; i < nops; i++) {
      int32_t keep = ops[i].id;
      ops[i] = e->out[i];
      ops[i].id = keep;
    }
    return 0;
  }
  if (validate(m, f, form, ops, nops, file, line)) return -1;
  vmemo_store(m, f, id, key, ops, nops, hash);
  return 0;
}

/* ================================================= end of validated shapes */

/* Validate an instruction appended at file:line; a valid tcgen05 one that
 * is the function's first with a CTA group fixes the function's size. */
int lpx_validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops, int32_t file, int32_t line)
{
  if (validate_memo(m, f, form, ops, nops, file, line)) return -1;
  if (form->info.op >= 0 && form->info.cta_group && !f->tc_cta_group && is_tcgen05(form->info.op)) {
    f->tc_cta_group = form->info.cta_group;
    f->tc_cta_file = file;
    f->tc_cta_line = line;
  }
  return 0;
}
