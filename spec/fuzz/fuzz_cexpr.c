/* Structure-aware libFuzzer target for the constant-expression and
 * initializer grammar. The input bytes are not PTX: they steer a generator
 * that writes a module whose instructions carry constant expressions
 * (mov.b64 %rd1, (e);) and whose variables carry nested-brace initializers
 * of them, with what byte-level mutation rarely builds: parentheses
 * hundreds deep, prefix-operator runs, ?: chains and nested middles, long
 * binary chains over every precedence level, nested braces thousands deep,
 * literals in every notation. The generator also computes each value with
 * C's rules (an independent evaluator), so besides the checks of
 * fuzz_common.h the parser must fold every expression to the same value
 * (canonical text and initializer bytes), refuse exactly the expressions
 * nested deeper than LPX_CEXPR_MAX_DEPTH or dividing by zero, and accept
 * the others.
 * Build: cmake --build build-fuzz --target fuzz_cexpr (see fuzz_parse.c)
 * Replay one input and keep the PTX it makes (for spec/fixtures/ptx/fuzz/):
 *   LPX_FUZZ_DUMP=out.ptx ./build-fuzz/fuzz_cexpr crash-file */
#include "fuzz_common.h"
#include "lpx_cexpr.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define MAX_TEXT (64 * 1024)   /* generated text budget per input */
#define MAX_EXPRS 64            /* expressions (instructions or elements) per module */

/* A generated value, as the parser's evaluator must fold it: bad when the
 * expression is not foldable (division by zero, a float where an integer is
 * needed), deep when it nests past the limit. */
typedef struct val {
  int is_float, is_unsigned, bad, deep;
  int64_t i;
  double d;
} val;

/* The generator: the steering bytes and the text being written. */
typedef struct gen {
  const uint8_t *d;
  size_t n, at;
  lpx_buf out;
} gen;

/* The next steering byte modulo m (0 once the input is used up). */
static unsigned pick(gen *g, unsigned m)
{
  if (g->at >= g->n || m == 0) return 0;
  return g->d[g->at++] % m;
}

/* A length up to max from two steering bytes, smaller ones likelier. */
static unsigned length(gen *g, unsigned max)
{
  unsigned a = pick(g, 256), b = pick(g, 256), v = a < 200 ? a % 8 : (a - 200) * 256 + b;
  return v > max ? max : v;
}

/* Is the text over budget (generate leaves only)? */
static int full(const gen *g) { return g->out.n > MAX_TEXT; }

/* Optional whitespace between tokens. */
static void space(gen *g)
{
  static const char *const sp[] = { "", "", " ", "\t", " /* c */ ", "\n" };
  lpx_buf_puts(&g->out, sp[pick(g, 6)]);
}

/* Add the error flags of two operands to v's own. */
static void flags(val *v, const val *a, const val *b)
{
  v->bad |= a->bad || b->bad;
  v->deep |= a->deep || b->deep;
}

/* A value as a double (as the evaluator converts for float arithmetic). */
static double dbl(const val *v) { return v->is_float ? v->d : v->is_unsigned ? (double)(uint64_t)v->i : (double)v->i; }

/* Is v non-zero? */
static int truthy(const val *v) { return v->is_float ? v->d != 0 : v->i != 0; }

/* An integer literal in a random notation (decimal, hex, octal, binary; U). */
static val int_literal(gen *g)
{
  static const uint64_t special[] = { 0, 1, 2, 7, 63, 64, 255, 0x7fffffffffffffffULL, 0x8000000000000000ULL, ~0ULL };
  val v = { 0, 0, 0, 0, 0, 0 };
  uint64_t u = pick(g, 2) ? special[pick(g, 10)] : (pick(g, 256) + 1u) * (pick(g, 2) ? 1u : 0x01000193u);
  char buf[80];
  switch (pick(g, 4)) {
  case 0: snprintf(buf, sizeof buf, "%" PRIu64, u); break;
  case 1: snprintf(buf, sizeof buf, "0x%" PRIx64, u); break;
  case 2: snprintf(buf, sizeof buf, u ? "0%" PRIo64 : "0", u); break;
  default: {
    int k = 0, top = 63;
    while (top > 0 && !(u >> top)) top--;
    k = snprintf(buf, sizeof buf, "0b");
    for (int bit = top; bit >= 0; bit--) buf[k++] = (char)('0' + ((u >> bit) & 1));
    buf[k] = '\0';
  }
  }
  if (pick(g, 4) == 0) { strcat(buf, "U"); v.is_unsigned = 1; }
  v.i = (int64_t)u;
  lpx_buf_puts(&g->out, buf);
  return v;
}

/* A float literal: 0f (f32 bits), 0d (f64 bits) or decimal. */
static val float_literal(gen *g)
{
  static const double samples[] = { 0.5, 1.5, 3.0, 1e-3, 2.5e10, 1e300, 0.1, 4e-320 };
  val v = { 1, 0, 0, 0, 0, 0.0 };
  char buf[64];
  unsigned kind = pick(g, 3);
  if (kind == 0) {
    uint32_t w = (uint32_t)pick(g, 256) << 24 | (uint32_t)pick(g, 256) << 8;
    float f;
    memcpy(&f, &w, 4);
    v.d = f;
    snprintf(buf, sizeof buf, "0f%08" PRIX32, w);
  } else if (kind == 1) {
    uint64_t w = (uint64_t)pick(g, 256) << 56 | (uint64_t)pick(g, 256) << 44 | pick(g, 256);
    memcpy(&v.d, &w, 8);
    snprintf(buf, sizeof buf, "0d%016" PRIX64, w);
  } else {
    snprintf(buf, sizeof buf, "%.*e", (int)pick(g, 17), samples[pick(g, 8)] * (1 + pick(g, 100)));
    v.d = strtod(buf, NULL);
  }
  lpx_buf_puts(&g->out, buf);
  return v;
}

static val ternary(gen *g, int depth);

/* ( e ), or a run of parentheses around one: each opens a level. */
static val parens(gen *g, int depth)
{
  unsigned run = 1 + (pick(g, 4) == 0 ? length(g, 400) : 0);
  for (unsigned k = 0; k < run; k++) { lpx_buf_putc(&g->out, '('); space(g); }
  val v = ternary(g, depth + (int)run);
  if (depth + (int)run > LPX_CEXPR_MAX_DEPTH) v.deep = 1;
  for (unsigned k = 0; k < run; k++) { space(g); lpx_buf_putc(&g->out, ')'); }
  return v;
}

/* A primary: a literal, or a parenthesized expression. */
static val primary(gen *g, int depth)
{
  unsigned c = full(g) || depth > LPX_CEXPR_MAX_DEPTH + 40 ? 0 : pick(g, 8);
  if (c < 4) return int_literal(g);
  if (c < 5) return float_literal(g);
  return parens(g, depth);
}

/* Apply a prefix operator to v as the parser's evaluator must. */
static val apply_prefix(char op, val v)
{
  if (op == '-') { if (v.is_float) v.d = -v.d; else v.i = (int64_t)(0 - (uint64_t)v.i); }
  else if (op == '!') { int t = truthy(&v); v.is_float = v.is_unsigned = 0; v.i = !t; }
  else if (op == '~') { if (v.is_float) v.bad = 1; else v.i = ~v.i; }
  return v;
}

/* Prefix operators (a run of up to thousands) and their primary. */
static val unary(gen *g, int depth)
{
  unsigned run = pick(g, 3) == 0 ? length(g, 1000) : 0;
  if (full(g)) run = 0;
  char *ops = malloc(run + 1);   /* not on the stack: this recurses hundreds deep */
  for (unsigned k = 0; k < run; k++) {
    ops[k] = "+-!~"[pick(g, 4)];
    lpx_buf_putc(&g->out, ops[k]);
    space(g);
  }
  val v = primary(g, depth);
  for (unsigned k = run; k-- > 0;) v = apply_prefix(ops[k], v);
  free(ops);
  return v;
}

/* Binary operators by precedence level, lowest first (as the parser's). */
static const char *const levels[][4] = {
  { "||" }, { "&&" }, { "|" }, { "^" }, { "&" }, { "==", "!=" },
  { "<=", ">=", "<", ">" }, { "<<", ">>" }, { "+", "-" }, { "*", "/", "%" },
};
enum { NLEVELS = sizeof levels / sizeof levels[0] };

/* A comparison's 0/1 result. */
static val boolean(int x) { val v = { 0, 0, 0, 0, x, 0.0 }; return v; }

/* op applied to two doubles (bad for the integer-only operators). */
static val float_op(const char *op, double a, double b)
{
  val v = { 1, 0, 0, 0, 0, 0.0 };
  if (!strcmp(op, "+")) v.d = a + b;
  else if (!strcmp(op, "-")) v.d = a - b;
  else if (!strcmp(op, "*")) v.d = a * b;
  else if (!strcmp(op, "/")) v.d = a / b;
  else if (!strcmp(op, "<")) return boolean(a < b);
  else if (!strcmp(op, ">")) return boolean(a > b);
  else if (!strcmp(op, "<=")) return boolean(a <= b);
  else if (!strcmp(op, ">=")) return boolean(a >= b);
  else if (!strcmp(op, "==")) return boolean(a == b);
  else if (!strcmp(op, "!=")) return boolean(a != b);
  else if (!strcmp(op, "&&")) return boolean(a != 0 && b != 0);
  else if (!strcmp(op, "||")) return boolean(a != 0 || b != 0);
  else v.bad = 1;
  return v;
}

/* op applied to two integers, unsigned when either is. */
static val int_op(const char *op, const val *x, const val *y)
{
  int u = x->is_unsigned || y->is_unsigned;
  uint64_t a = (uint64_t)x->i, b = (uint64_t)y->i;
  val v = { 0, u, 0, 0, 0, 0.0 };
  if ((op[0] == '/' || op[0] == '%') && (b == 0 || (!u && x->i == INT64_MIN && y->i == -1))) { v.bad = 1; return v; }
  if (!strcmp(op, "+")) v.i = (int64_t)(a + b);
  else if (!strcmp(op, "-")) v.i = (int64_t)(a - b);
  else if (!strcmp(op, "*")) v.i = (int64_t)(a * b);
  else if (!strcmp(op, "/")) v.i = u ? (int64_t)(a / b) : x->i / y->i;
  else if (!strcmp(op, "%")) v.i = u ? (int64_t)(a % b) : x->i % y->i;
  else if (!strcmp(op, "<<")) v.i = b > 63 ? 0 : (int64_t)(a << b);
  else if (!strcmp(op, ">>")) v.i = b > 63 ? (u || x->i >= 0 ? 0 : -1) : u ? (int64_t)(a >> b) : x->i >> b;
  else if (!strcmp(op, "&")) v.i = (int64_t)(a & b);
  else if (!strcmp(op, "|")) v.i = (int64_t)(a | b);
  else if (!strcmp(op, "^")) v.i = (int64_t)(a ^ b);
  else if (!strcmp(op, "<")) return boolean(u ? a < b : x->i < y->i);
  else if (!strcmp(op, ">")) return boolean(u ? a > b : x->i > y->i);
  else if (!strcmp(op, "<=")) return boolean(u ? a <= b : x->i <= y->i);
  else if (!strcmp(op, ">=")) return boolean(u ? a >= b : x->i >= y->i);
  else if (!strcmp(op, "==")) return boolean(a == b);
  else if (!strcmp(op, "!=")) return boolean(a != b);
  else if (!strcmp(op, "&&")) return boolean(a && b);
  else return boolean(a || b);
  return v;
}

/* A chain of the operators of one level over operands of the next levels
 * (left-associative), up to hundreds long. */
static val binary(gen *g, int level, int depth)
{
  if (level == NLEVELS) return unary(g, depth);
  val v = binary(g, level + 1, depth);
  unsigned n = full(g) ? 0 : pick(g, 4) == 0 ? (pick(g, 8) == 0 ? length(g, 300) : 1 + pick(g, 3)) : 0;
  for (unsigned k = 0; k < n; k++) {
    int nops = 0;
    while (nops < 4 && levels[level][nops]) nops++;
    const char *op = levels[level][pick(g, (unsigned)nops)];
    space(g);
    lpx_buf_puts(&g->out, op);
    space(g);
    if (op[0] == '%') lpx_buf_putc(&g->out, ' ');   /* "%1" would be a register name */
    val w = binary(g, level + 1, depth);
    val r = v.is_float || w.is_float ? float_op(op, dbl(&v), dbl(&w)) : int_op(op, &v, &w);
    flags(&r, &v, &w);
    v = r;
  }
  return v;
}

/* c1 ? a1 : c2 ? a2 : ... : e, the lowest level: a chain of conditions
 * (each middle operand opens a level, and may itself nest middles). */
static val ternary(gen *g, int depth)
{
  val result = { 0, 0, 0, 0, 0, 0.0 }, v;
  int chosen = 0, bad = 0, deep = 0;
  unsigned chain = full(g) ? 0 : pick(g, 6) == 0 ? length(g, 200) : 0;
  for (unsigned k = 0;; k++) {
    v = binary(g, 0, depth);
    bad |= v.bad; deep |= v.deep;
    if (k == chain) break;
    space(g); lpx_buf_putc(&g->out, '?'); space(g);
    unsigned nest = pick(g, 8) == 0 ? length(g, 300) : 0;   /* c ? c ? ... a : e : e */
    uint8_t *truth = malloc(nest + 1);   /* each condition's truth, innermost last */
    for (unsigned j = 0; j < nest; j++) {
      val c = int_literal(g);
      truth[j] = (uint8_t)truthy(&c);
      space(g); lpx_buf_putc(&g->out, '?'); space(g);
    }
    val a = ternary(g, depth + 1 + (int)nest);
    if (depth + 1 + (int)nest > LPX_CEXPR_MAX_DEPTH) a.deep = 1;
    for (unsigned j = nest; j-- > 0;) {
      space(g); lpx_buf_putc(&g->out, ':'); space(g);
      val e = int_literal(g);
      val pickd = truth[j] ? a : e;
      pickd.bad = a.bad; pickd.deep = a.deep;
      a = pickd;
    }
    free(truth);
    bad |= a.bad; deep |= a.deep;
    space(g); lpx_buf_putc(&g->out, ':'); space(g);
    if (!chosen && truthy(&v)) { result = a; chosen = 1; }
  }
  if (!chosen) result = v;
  result.bad = bad;
  result.deep = deep;
  return result;
}

/* The canonical text of a folded operand value (as lpx_emit prints it). */
static void canon_value(const val *v, char *buf, size_t cap)
{
  uint64_t bits;
  if (v->is_float) { memcpy(&bits, &v->d, 8); snprintf(buf, cap, "0d%016" PRIX64, bits); }
  else if (v->is_unsigned) snprintf(buf, cap, "%" PRIu64, (uint64_t)v->i);
  else snprintf(buf, cap, "%" PRId64, v->i);
}

/* The initializer bytes a u64 variable gets from v (0 when it cannot take it). */
static int init_bytes(const val *v, uint8_t out[8])
{
  if (v->is_float) return 0;
  memcpy(out, &v->i, 8);
  return 1;
}

/* The module under test: expressions as instruction operands, then the
 * same kind of expressions as elements of a nested-brace initializer. */
typedef struct plan {
  val ops[MAX_EXPRS], elems[MAX_EXPRS];
  int nops, nelems;
} plan;

/* Instructions mov.b64 %rd1, (e); one per expression. */
static void gen_body(gen *g, plan *p)
{
  lpx_buf_puts(&g->out, ".visible .entry k()\n{\n.reg .b64 %rd<2>;\n");
  p->nops = 1 + (int)pick(g, MAX_EXPRS);
  for (int k = 0; k < p->nops; k++) {
    lpx_buf_puts(&g->out, "mov.b64 %rd1, (");
    p->ops[k] = ternary(g, 1);
    lpx_buf_puts(&g->out, ");\n");
  }
  lpx_buf_puts(&g->out, "ret;\n}\n");
}

/* .global .u64 g[N] = { {(e), ...}, ... }: elements in nested braces
 * (thousands deep), opened and closed at random between elements. */
static void gen_init(gen *g, plan *p)
{
  lpx_buf_puts(&g->out, ".global .align 8 .u64 g[");
  size_t count_at = g->out.n;
  lpx_buf_puts(&g->out, "00] = {");
  int open = 0;
  p->nelems = 1 + (int)pick(g, MAX_EXPRS);
  for (int k = 0; k < p->nelems; k++) {
    unsigned opens = full(g) ? 0 : pick(g, 3) == 0 ? length(g, 2000) : pick(g, 2);
    if (k > 0) lpx_buf_putc(&g->out, ',');
    for (unsigned j = 0; j < opens; j++) { lpx_buf_putc(&g->out, '{'); space(g); }
    open += (int)opens;
    lpx_buf_putc(&g->out, '(');
    p->elems[k] = ternary(g, 1);
    lpx_buf_putc(&g->out, ')');
    unsigned closes = pick(g, 2) ? (unsigned)open : pick(g, (unsigned)open + 1);
    if (k == p->nelems - 1) closes = (unsigned)open;
    for (unsigned j = 0; j < closes; j++) { space(g); lpx_buf_putc(&g->out, '}'); }
    open -= (int)closes;
  }
  lpx_buf_puts(&g->out, "};\n");
  char cnt[3];
  snprintf(cnt, sizeof cnt, "%02d", p->nelems);
  memcpy(g->out.p + count_at, cnt, 2);
}

/* The operands folded as generated: canonical text shows each value; an
 * expression nested too deep or not foldable makes the module fail. */
static void check_ops(lpx_module *m, const plan *p)
{
  int any_error = 0;
  for (int k = 0; k < p->nops; k++) any_error |= p->ops[k].bad || p->ops[k].deep;
  for (int k = 0; k < p->nelems; k++) any_error |= p->elems[k].deep;
  lpx_ctx *ctx = fuzz_context();
  if (!m) {
    if (!any_error || !strstr(lpx_ctx_error(ctx), "constant expression")) abort();
    return;
  }
  for (int k = 0; k < p->nops; k++) if (p->ops[k].bad || p->ops[k].deep) abort();
  const char *out, *at;
  size_t n;
  if (lpx_fmt_canonical(m, &out, &n)) abort();
  at = out;
  for (int k = 0; k < p->nops; k++) {
    char want[64], val_text[40];
    canon_value(&p->ops[k], val_text, sizeof val_text);
    snprintf(want, sizeof want, "\tmov.b64 \t%%rd1, %s;\n", val_text);
    const char *hit = strstr(at, want);
    if (!hit) abort();
    at = hit + strlen(want);
  }
}

/* The initializer's bytes are the generated values, unless an element is
 * not foldable (then the initializer stays symbolic) or nests too deep. */
static void check_init(lpx_module *m, const plan *p)
{
  if (!m) return;
  int clean = 1;
  for (int k = 0; k < p->nelems; k++) clean &= !p->elems[k].bad && !p->elems[k].deep && !p->elems[k].is_float;
  const lpx_var *v = NULL;
  for (size_t i = 0; i < m->nvars; i++) if (!strcmp(lpx_strtab_get(&m->syms, m->vars[i].sym), "g")) v = &m->vars[i];
  if (!v) abort();
  if (!clean) { if (!v->init_symbolic) abort(); return; }
  if (v->init_symbolic || v->init_len != 8u * (uint32_t)p->nelems) abort();
  for (int k = 0; k < p->nelems; k++) {
    uint8_t want[8];
    if (!init_bytes(&p->elems[k], want) || memcmp(v->init + 8 * k, want, 8)) abort();
  }
}

/* Write the generated text to $LPX_FUZZ_DUMP (to keep a crash as PTX). */
static void dump(const char *text, size_t len)
{
  const char *path = getenv("LPX_FUZZ_DUMP");
  if (!path) return;
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(text, 1, len, f);
  fclose(f);
}

/* One execution: generate, dump if asked, run the common checks and the
 * value oracle. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  gen g = { data, size, 0, { 0 } };
  plan p;
  memset(&p, 0, sizeof p);
  lpx_buf_puts(&g.out, ".version 8.0\n.target sm_80\n.address_size 64\n");
  unsigned order = pick(&g, 2);
  if (order) gen_init(&g, &p);
  gen_body(&g, &p);
  if (!order) gen_init(&g, &p);
  dump(g.out.p, g.out.n);
  fuzz_parse_into(g.out.p, g.out.n);
  lpx_module *m = fuzz_parse_module(g.out.p, g.out.n);
  check_ops(m, &p);
  check_init(m, &p);
  lpx_module_free(m);
  lpx_buf_free(&g.out);
  return 0;
}
