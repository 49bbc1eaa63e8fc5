/* The PTX lexer: bytes -> tokens with their leading trivia (whitespace and
 * both comment kinds). Input is (ptr, len) and need not be NUL-terminated;
 * every read is bounds-checked against len. */
#include "lpx_parse.h"
#include <string.h>

/* ------------------------------------------------------- character classes */

enum { C_OTHER = 0, C_SPACE = 1, C_WSTART = 2, C_WORD = 4, C_DIGIT = 8, C_PUNCT = 16 };

/* One class byte per input byte; built once from the rules below. */
static uint8_t char_class[256];

/* Fill char_class (idempotent; the table is the same every time). */
static void lex_init_classes(void)
{
  if (char_class['a']) return;
  static const char *const punct = ",;:{}[]()+-|!@<>=*/~&^?#";
  for (int c = 0; c < 256; c++) {
    uint8_t k = 0;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') k |= C_SPACE;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%' || c == '.')
      k |= C_WSTART | C_WORD;
    if (c >= '0' && c <= '9') k |= C_DIGIT | C_WORD;
    if (c && strchr(punct, c)) k |= C_PUNCT;
    char_class[c] = k;
  }
  char_class['%'] &= (uint8_t)~C_WORD;   /* '%' only starts a word */
}

/* ----------------------------------------------------------------- errors */

/* The 1-based line and column of byte offset off in src. */
void lpx_lex_position(const char *src, size_t off, int *line, int *col)
{
  int l = 1;
  size_t start = 0;
  for (size_t i = 0; i < off; i++)
    if (src[i] == '\n') { l++; start = i + 1; }
  *line = l;
  *col = (int)(off - start) + 1;
}

/* Fail with the position of off. */
static int lex_fail(lpx_ctx *ctx, const char *src, const char *file, size_t off, const char *what)
{
  int line, col;
  lpx_lex_position(src, off, &line, &col);
  return lpx_fail(ctx, "%s:%d:%d: %s", file, line, col, what);
}

/* ---------------------------------------------------------------- scanning */

typedef struct lexer {
  const char *s;
  size_t n, i;
} lexer;

/* Skip whitespace and comments; 1 if a line break was crossed, -1 on an
 * unterminated block comment. */
static int lex_trivia(lexer *x)
{
  int nl = 0;
  while (x->i < x->n) {
    char c = x->s[x->i];
    if (char_class[(uint8_t)c] & C_SPACE) { nl |= c == '\n'; x->i++; continue; }
    if (c != '/' || x->i + 1 >= x->n) break;
    char d = x->s[x->i + 1];
    if (d == '/') {
      const char *e = memchr(x->s + x->i, '\n', x->n - x->i);
      x->i = e ? (size_t)(e - x->s) : x->n;
    } else if (d == '*') {
      size_t j = x->i + 2;
      while (j + 1 < x->n && !(x->s[j] == '*' && x->s[j + 1] == '/')) nl |= x->s[j++] == '\n';
      if (j + 1 >= x->n) return -1;
      x->i = j + 2;
    } else {
      break;
    }
  }
  return nl;
}

/* Scan a word: [A-Za-z_$%.][A-Za-z0-9_$.]* with "::" allowed inside. */
static void lex_word(lexer *x)
{
  x->i++;
  while (x->i < x->n) {
    uint8_t c = (uint8_t)x->s[x->i];
    if (char_class[c] & C_WORD) { x->i++; continue; }
    if (c == ':' && x->i + 2 < x->n && x->s[x->i + 1] == ':' && (char_class[(uint8_t)x->s[x->i + 2]] & C_WORD)) {
      x->i += 2;
      continue;
    }
    break;
  }
}

/* Scan a number: digits, letters and dots (0x1F, 0f3F800000, 1.5), and a
 * signed exponent when it is a decimal float (1.5e-3). */
static void lex_number(lexer *x)
{
  size_t start = x->i;
  int hexish = x->i + 1 < x->n && x->s[x->i] == '0' && strchr("xXfFdDbB", x->s[x->i + 1]) && x->s[x->i + 1];
  while (x->i < x->n) {
    char c = x->s[x->i];
    if (char_class[(uint8_t)c] & C_WORD && c != '$' && c != '%') { x->i++; continue; }
    if ((c == '+' || c == '-') && !hexish && x->i > start && (x->s[x->i - 1] == 'e' || x->s[x->i - 1] == 'E')) {
      x->i++;
      continue;
    }
    break;
  }
}

/* Scan a string literal with backslash escapes; -1 if unterminated. */
static int lex_string(lexer *x)
{
  x->i++;
  while (x->i < x->n && x->s[x->i] != '"' && x->s[x->i] != '\n') x->i += x->s[x->i] == '\\' ? 2 : 1;
  if (x->i >= x->n || x->s[x->i] != '"') return -1;
  x->i++;
  return 0;
}

/* Scan one token starting at x->i (trivia already skipped); its kind or -1. */
static int lex_token(lexer *x)
{
  uint8_t c = (uint8_t)x->s[x->i];
  uint8_t k = char_class[c];
  if (c == '@' && x->i + 1 < x->n && x->s[x->i + 1] == '@') { x->i++; lex_word(x); return LPX_TK_WORD; }
  if (k & C_WSTART) { lex_word(x); return LPX_TK_WORD; }
  if (k & C_DIGIT) { lex_number(x); return LPX_TK_NUM; }
  if (c == '"') return lex_string(x) ? -2 : LPX_TK_STR;
  if (k & C_PUNCT) { x->i++; return LPX_TK_PUNCT; }
  return -1;
}

/* Append a token to the list; capacity was reserved for len/4 tokens, so
 * the grow call is rare and the common path is one compare and a store. */
static inline int lex_push(lpx_toks *out, uint32_t off, uint32_t len, int kind, int nl)
{
  if (out->n == out->cap && LPX_RESERVE(out->v, out->cap, out->n + 1)) return -1;
  out->v[out->n++] = (lpx_tok){ off, len, (uint32_t)kind, (uint32_t)nl };
  return 0;
}

/* Split src into tokens; the last one is EOF with the trailing trivia. */
int lpx_lex_all(lpx_ctx *ctx, const char *src, size_t len, const char *file, lpx_toks *out)
{
  lex_init_classes();
  if (len >= 0xFFFFFFF0u) return lpx_fail(ctx, "%s: input of %zu bytes is too large (limit 4 GB)", file, len);
  /* Symbols are C strings, so a NUL byte could not print back: refuse it. */
  const char *nul = memchr(src, '\0', len);
  if (nul) return lex_fail(ctx, src, file, (size_t)(nul - src), "unexpected NUL byte");
  lexer x = { src, len, 0 };
  out->n = 0;
  if (LPX_RESERVE(out->v, out->cap, len / 4 + 16)) return lpx_fail(ctx, "out of memory");
  for (;;) {
    size_t pre = x.i;
    int nl = lex_trivia(&x);
    if (nl < 0) return lex_fail(ctx, src, file, pre, "unterminated /* comment");
    size_t off = x.i;
    if (off >= len) return lex_push(out, (uint32_t)off, 0, LPX_TK_EOF, nl) ? lpx_fail(ctx, "out of memory") : 0;
    int kind = lex_token(&x);
    if (kind == -2) return lex_fail(ctx, src, file, off, "unterminated string literal");
    if (kind < 0) return lex_fail(ctx, src, file, off, "unexpected character");
    if (x.i - off > LPX_TOK_MAXLEN) return lex_fail(ctx, src, file, off, "token longer than 128 MB");
    if (lex_push(out, (uint32_t)off, (uint32_t)(x.i - off), kind, nl)) return lpx_fail(ctx, "out of memory");
  }
}
