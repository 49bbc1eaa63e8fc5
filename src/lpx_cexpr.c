/* Constant expressions of PTX: the C-like arithmetic ptxas folds in
 * instruction operands and variable initializers ((1+2)*4, 1<<4, 0x10|1,
 * -(3*4)>>1, a ? b : c), evaluated over the parser's tokens. Integers are
 * 64-bit, unsigned when a literal carries U or mixes with an unsigned one;
 * a float literal makes the expression a double. Parentheses and ?: middle
 * operands nest at most LPX_CEXPR_MAX_DEPTH deep; prefix operators and ?:
 * chains are loops, binary operators are climbed by precedence, so the C
 * stack stays small whatever the input. */
#include "lpx_cexpr.h"
#include <stdlib.h>
#include <string.h>

typedef struct cx {
  const char *src;
  const lpx_tok *t;
  size_t k, b;
  int err;        /* 0, or LPX_CEXPR_BAD / LPX_CEXPR_DEEP: the first error */
  size_t at;      /* the token the first error was found at */
  int depth;      /* open parentheses and ?: branches */
} cx;

/* Binary operators by precedence level, lowest first (ternary is above). */
static const char *const levels[][5] = {
  { "||" }, { "&&" }, { "|" }, { "^" }, { "&" }, { "==", "!=" },
  { "<=", ">=", "<", ">" }, { "<<", ">>" }, { "+", "-" }, { "*", "/", "%" },
};
enum { NLEVELS = sizeof levels / sizeof levels[0] };

static lpx_cval ternary(cx *c);

/* Record an error (the first one wins) at the current token. */
static void fail(cx *c, int kind)
{
  if (c->err) return;
  c->err = kind;
  c->at = c->k < c->b ? c->k : c->b - 1;
}

/* The operator text at token k ("<<" when two punct tokens touch), or "". */
static void op_at(const cx *c, size_t k, char out[3])
{
  out[0] = out[1] = out[2] = '\0';
  if (k >= c->b) return;
  const lpx_tok *t = &c->t[k];
  if (t->kind == LPX_TK_WORD && t->len == 1 && c->src[t->off] == '%') { out[0] = '%'; return; }
  if (t->kind != LPX_TK_PUNCT) return;
  out[0] = c->src[t->off];
  if (k + 1 < c->b && c->t[k + 1].kind == LPX_TK_PUNCT && c->t[k + 1].off == t->off + 1) {
    char two[3] = { out[0], c->src[t->off + 1], '\0' };
    static const char *const pairs[] = { "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", NULL };
    for (int i = 0; pairs[i]; i++) if (!strcmp(two, pairs[i])) { out[1] = two[1]; return; }
  }
}

/* Digits of s[0, n) in a base into *v; -1 on a bad digit or overflow. */
static int digits(const char *s, size_t n, int base, uint64_t *v)
{
  uint64_t x = 0;
  if (!n) return -1;
  for (size_t i = 0; i < n; i++) {
    int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : 99;
    if (d >= base || x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return -1;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  *v = x;
  return 0;
}

/* A number token as a value. */
static lpx_cval literal(cx *c, const lpx_tok *t)
{
  lpx_cval v = { 0, 0, 0, 0.0 };
  const char *s = c->src + t->off;
  size_t n = t->len;
  uint64_t u = 0;
  if (n > 1 && s[0] == '0' && ((s[1] | 32) == 'f' || (s[1] | 32) == 'd')) {
    int f = (s[1] | 32) == 'f';
    if (n != (f ? 10u : 18u) || digits(s + 2, n - 2, 16, &u)) { fail(c, LPX_CEXPR_BAD); return v; }
    v.is_float = 1;
    if (f) { uint32_t w = (uint32_t)u; float x; memcpy(&x, &w, 4); v.d = x; } else memcpy(&v.d, &u, 8);
    return v;
  }
  if (n && (s[n - 1] == 'U' || s[n - 1] == 'u')) { v.is_unsigned = 1; n--; }
  int hex = n > 2 && s[0] == '0' && (s[1] | 32) == 'x', bin = n > 2 && s[0] == '0' && (s[1] | 32) == 'b';
  if (!hex && (memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n))) {
    char buf[64], *end;
    if (n >= sizeof buf) { fail(c, LPX_CEXPR_BAD); return v; }
    memcpy(buf, s, n); buf[n] = '\0';
    v.is_float = 1; v.d = strtod(buf, &end);
    if (*end) fail(c, LPX_CEXPR_BAD);
    return v;
  }
  int base = hex ? 16 : bin ? 2 : n > 1 && s[0] == '0' ? 8 : 10;
  if (digits(s + (hex || bin ? 2 : 0), n - (hex || bin ? 2 : 0), base, &u)) fail(c, LPX_CEXPR_BAD);
  v.i = (int64_t)u;
  return v;
}

/* A value as a double (for float arithmetic). */
static double as_double(lpx_cval v) { return v.is_float ? v.d : v.is_unsigned ? (double)(uint64_t)v.i : (double)v.i; }

/* Is v non-zero? */
static int truthy(lpx_cval v) { return v.is_float ? v.d != 0 : v.i != 0; }

/* An integer 0/1 result. */
static lpx_cval boolean(int x) { lpx_cval v = { 0, 0, x, 0.0 }; return v; }

/* A primary: a literal or ( e ), which opens a nesting level. */
static lpx_cval primary(cx *c)
{
  lpx_cval v = { 0, 0, 0, 0.0 };
  char op[3];
  if (c->k >= c->b) { fail(c, LPX_CEXPR_BAD); return v; }
  const lpx_tok *t = &c->t[c->k];
  if (t->kind == LPX_TK_NUM) { c->k++; return literal(c, t); }
  op_at(c, c->k, op);
  if (op[0] != '(') { fail(c, LPX_CEXPR_BAD); return v; }
  if (++c->depth > LPX_CEXPR_MAX_DEPTH) { fail(c, LPX_CEXPR_DEEP); return v; }
  c->k++;
  v = ternary(c);
  op_at(c, c->k, op);
  if (op[0] != ')') fail(c, LPX_CEXPR_BAD); else c->k++;
  c->depth--;
  return v;
}

/* Apply the unary operator op (+ - ! ~) to v. */
static lpx_cval apply_unary(cx *c, char op, lpx_cval v)
{
  if (op == '-') { if (v.is_float) v.d = -v.d; else v.i = (int64_t)(0 - (uint64_t)v.i); }
  else if (op == '!') v = boolean(!truthy(v));
  else if (op == '~') { if (v.is_float) fail(c, LPX_CEXPR_BAD); v.i = ~v.i; }
  return v;
}

/* Prefix operators (+ - ! ~, any number of them, without recursion) and
 * the primary they apply to, innermost first. */
static lpx_cval unary(cx *c)
{
  size_t first = c->k;
  char op[3];
  for (op_at(c, c->k, op); op[0] && !op[1] && strchr("+-!~", op[0]); op_at(c, c->k, op)) c->k++;
  size_t last = c->k;
  lpx_cval v = primary(c);
  for (size_t k = last; k-- > first;) v = apply_unary(c, c->src[c->t[k].off], v);
  return v;
}

/* Apply a comparison or arithmetic operator to two floats. */
static lpx_cval float_op(cx *c, const char *op, double a, double b)
{
  lpx_cval v = { 1, 0, 0, 0.0 };
  switch (op[0] * 256 + op[1]) {
  case '+' * 256: v.d = a + b; break;
  case '-' * 256: v.d = a - b; break;
  case '*' * 256: v.d = a * b; break;
  case '/' * 256: v.d = a / b; break;
  case '<' * 256: return boolean(a < b);
  case '>' * 256: return boolean(a > b);
  case '<' * 256 + '=': return boolean(a <= b);
  case '>' * 256 + '=': return boolean(a >= b);
  case '=' * 256 + '=': return boolean(a == b);
  case '!' * 256 + '=': return boolean(a != b);
  case '&' * 256 + '&': return boolean(a != 0 && b != 0);
  case '|' * 256 + '|': return boolean(a != 0 || b != 0);
  default: fail(c, LPX_CEXPR_BAD);   /* % << >> & | ^ take integers */
  }
  return v;
}

/* Apply an integer operator; unsigned when either side is. */
static lpx_cval int_op(cx *c, const char *op, lpx_cval x, lpx_cval y)
{
  int u = x.is_unsigned || y.is_unsigned;
  uint64_t a = (uint64_t)x.i, b = (uint64_t)y.i;
  lpx_cval v = { 0, u, 0, 0.0 };
  int div = op[0] == '/' || op[0] == '%';
  if (div && (b == 0 || (!u && x.i == INT64_MIN && y.i == -1))) { fail(c, LPX_CEXPR_BAD); return v; }
  switch (op[0] * 256 + op[1]) {
  case '+' * 256: v.i = (int64_t)(a + b); break;
  case '-' * 256: v.i = (int64_t)(a - b); break;
  case '*' * 256: v.i = (int64_t)(a * b); break;
  case '/' * 256: v.i = u ? (int64_t)(a / b) : x.i / y.i; break;
  case '%' * 256: v.i = u ? (int64_t)(a % b) : x.i % y.i; break;
  case '<' * 256 + '<': v.i = b > 63 ? 0 : (int64_t)(a << b); break;
  case '>' * 256 + '>': v.i = b > 63 ? (u || x.i >= 0 ? 0 : -1) : u ? (int64_t)(a >> b) : x.i >> b; break;
  case '&' * 256: v.i = (int64_t)(a & b); break;
  case '|' * 256: v.i = (int64_t)(a | b); break;
  case '^' * 256: v.i = (int64_t)(a ^ b); break;
  case '<' * 256: return boolean(u ? a < b : x.i < y.i);
  case '>' * 256: return boolean(u ? a > b : x.i > y.i);
  case '<' * 256 + '=': return boolean(u ? a <= b : x.i <= y.i);
  case '>' * 256 + '=': return boolean(u ? a >= b : x.i >= y.i);
  case '=' * 256 + '=': return boolean(a == b);
  case '!' * 256 + '=': return boolean(a != b);
  case '&' * 256 + '&': return boolean(a && b);
  case '|' * 256 + '|': return boolean(a || b);
  default: fail(c, LPX_CEXPR_BAD);
  }
  return v;
}

/* The precedence level of a binary operator, or -1. */
static int level_of(const char *op)
{
  for (int l = 0; op[0] && l < NLEVELS; l++)
    for (int i = 0; i < 5 && levels[l][i]; i++) if (!strcmp(levels[l][i], op)) return l;
  return -1;
}

/* Binary operators of precedence min and above, left-associative
 * (precedence climbing: it recurses only to a higher level, so at most
 * NLEVELS frames deep between two primaries). */
static lpx_cval binary(cx *c, int min)
{
  lpx_cval v = unary(c);
  char op[3];
  int level;
  for (op_at(c, c->k, op); !c->err && (level = level_of(op)) >= min; op_at(c, c->k, op)) {
    c->k += op[1] ? 2 : 1;
    lpx_cval w = binary(c, level + 1);
    v = v.is_float || w.is_float ? float_op(c, op, as_double(v), as_double(w)) : int_op(c, op, v, w);
  }
  return v;
}

/* Is the operator at the cursor the single character ch? */
static int at_op(cx *c, char ch)
{
  char op[3];
  op_at(c, c->k, op);
  return op[0] == ch && !op[1];
}

/* c1 ? a1 : c2 ? a2 : e, the lowest precedence, right-associative: the
 * chain of conditions is a loop; each middle operand opens a nesting level. */
static lpx_cval ternary(cx *c)
{
  lpx_cval result = { 0, 0, 0, 0.0 };
  int chosen = 0;
  for (;;) {
    lpx_cval v = binary(c, 0);
    if (c->err || !at_op(c, '?')) return chosen ? result : v;
    if (++c->depth > LPX_CEXPR_MAX_DEPTH) { fail(c, LPX_CEXPR_DEEP); return v; }
    c->k++;
    lpx_cval a = ternary(c);
    c->depth--;
    if (c->err) return v;
    if (!at_op(c, ':')) { fail(c, LPX_CEXPR_BAD); return v; }
    c->k++;
    if (!chosen && truthy(v)) { result = a; chosen = 1; }
  }
}

/* Evaluate tokens [a, b) as one constant expression; 0, LPX_CEXPR_BAD when
 * they are not one (a name, a stray operator, division by zero) or
 * LPX_CEXPR_DEEP when parentheses and ?: nest deeper than
 * LPX_CEXPR_MAX_DEPTH; *at is then the token where it went wrong. */
int lpx_cexpr_eval(const char *src, const lpx_tok *t, size_t a, size_t b, lpx_cval *out, size_t *at)
{
  cx c = { src, t, a, b, 0, a, 0 };
  if (a >= b) { *at = a; return LPX_CEXPR_BAD; }
  *out = ternary(&c);
  if (!c.err && c.k != b) fail(&c, LPX_CEXPR_BAD);
  *at = c.at;
  return c.err;
}

/* What token tok is to a constant expression: 2 a number, 1 an operator
 * or parenthesis, 0 neither (a name, a brace, a comma). */
int lpx_cexpr_token(const char *src, const lpx_tok *tok)
{
  if (tok->kind == LPX_TK_NUM) return 2;
  if (tok->kind == LPX_TK_WORD && tok->len == 1 && src[tok->off] == '%') return 1;
  return tok->kind == LPX_TK_PUNCT && strchr("()+-*/<>=!&|^~?:", src[tok->off]) ? 1 : 0;
}

/* Could tokens [a, b) be a constant expression (numbers, operators and
 * parentheses only, at least one number: "()" is an empty call list)? A
 * cheap test before evaluating. */
int lpx_cexpr_tokens(const char *src, const lpx_tok *t, size_t a, size_t b)
{
  int numbers = 0;
  for (size_t k = a; k < b; k++) {
    int what = lpx_cexpr_token(src, &t[k]);
    if (!what) return 0;
    numbers += what == 2;
  }
  return numbers > 0;
}
