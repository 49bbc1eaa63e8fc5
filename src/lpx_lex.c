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

/* The scanners below walk pointers held in locals (not a struct behind a
 * pointer, whose fields the compiler would reload and store on every
 * byte, as char loads may alias them). */

/* Skip whitespace and comments from p; the end of the trivia, *nl set when
 * it crosses a line break; NULL on an unterminated block comment. */
static const char *lex_trivia(const char *p, const char *end, int *nl)
{
  int crossed = 0;
  for (;;) {
    for (; p < end && (char_class[(uint8_t)*p] & C_SPACE); p++) crossed |= *p == '\n';
    if (end - p < 2 || p[0] != '/' || (p[1] != '/' && p[1] != '*')) break;
    if (p[1] == '/') {
      const char *e = memchr(p, '\n', (size_t)(end - p));
      p = e ? e : end;
      continue;
    }
    for (p += 2; end - p >= 2 && !(p[0] == '*' && p[1] == '/'); p++) crossed |= *p == '\n';
    if (end - p < 2) return NULL;
    p += 2;
  }
  *nl = crossed;
  return p;
}

/* Words are most of the input; classifying eight bytes at once (SWAR)
 * replaces a byte loop whose exit, at a varying length, mispredicts. */
#define ONES (~(uint64_t)0 / 255)
#define HIGHS (ONES * 0x80)

/* High bit of each byte of a (7-bit bytes) in [lo, hi]: no sum carries
 * across a byte. */
static inline uint64_t bytes_in(uint64_t a, unsigned lo, unsigned hi)
{
  return (a + ONES * (0x80 - lo)) & ~(a + ONES * (0x7F - hi)) & HIGHS;
}

/* High bit of each byte of a (7-bit bytes) equal to c. */
static inline uint64_t bytes_eq(uint64_t a, unsigned c)
{
  return ~((a ^ (ONES * c)) + ONES * 0x7F) & HIGHS;
}

/* High bit of each byte of x that is a word byte ([A-Za-z0-9_$.], C_WORD). */
static inline uint64_t word_bytes(uint64_t x)
{
  uint64_t a = x & ~HIGHS;   /* bytes >= 0x80 are not word bytes: masked at the end */
  uint64_t w = bytes_in(a | ONES * 0x20, 'a', 'z') | bytes_in(a, '0', '9') | bytes_eq(a, '_') | bytes_eq(a, '$') | bytes_eq(a, '.');
  return w & ~x;
}

/* The first byte at or after p that is not a word byte (or end). */
static const char *word_run(const char *p, const char *end)
{
  for (; end - p >= 8; p += 8) {
    uint64_t x;
    memcpy(&x, p, 8);
    uint64_t stop = ~word_bytes(x) & HIGHS;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    if (stop) return p + __builtin_clzll(stop) / 8;
#else
    if (stop) return p + __builtin_ctzll(stop) / 8;
#endif
  }
  while (p < end && (char_class[(uint8_t)*p] & C_WORD)) p++;
  return p;
}

/* The end of a word at p: [A-Za-z_$%.][A-Za-z0-9_$.]* with "::" allowed inside. */
static const char *lex_word(const char *p, const char *end)
{
  for (p = word_run(p + 1, end); end - p > 2 && p[0] == ':' && p[1] == ':' && (char_class[(uint8_t)p[2]] & C_WORD);)
    p = word_run(p + 2, end);
  return p;
}

/* The end of a number at p: digits, letters and dots (0x1F, 0f3F800000,
 * 1.5), and a signed exponent when it is a decimal float (1.5e-3). */
static const char *lex_number(const char *p, const char *end)
{
  const char *start = p;
  int hexish = end - p > 1 && p[0] == '0' && p[1] && strchr("xXfFdDbB", p[1]);
  for (; p < end; p++) {
    char c = *p;
    if ((char_class[(uint8_t)c] & C_WORD) && c != '$' && c != '%') continue;
    if ((c == '+' || c == '-') && !hexish && p > start && (p[-1] == 'e' || p[-1] == 'E')) continue;
    break;
  }
  return p;
}

/* The end of a string literal at p (backslash escapes); NULL if unterminated. */
static const char *lex_string(const char *p, const char *end)
{
  for (p++; p < end && *p != '"' && *p != '\n'; p++)
    if (*p == '\\' && p + 1 < end) p++;
  return p < end && *p == '"' ? p + 1 : NULL;
}

/* Scan one token at p (trivia already skipped): its end and *kind, or NULL
 * with *kind -1 (unexpected character) or -2 (unterminated string). */
static const char *lex_token(const char *p, const char *end, int *kind)
{
  uint8_t c = (uint8_t)*p, k = char_class[c];
  if (k & C_WSTART) { *kind = LPX_TK_WORD; return lex_word(p, end); }
  if (c == '@' && end - p > 1 && p[1] == '@') { *kind = LPX_TK_WORD; return lex_word(p + 1, end); }
  if (k & C_DIGIT) { *kind = LPX_TK_NUM; return lex_number(p, end); }
  if (c == '"') { const char *e = lex_string(p, end); *kind = e ? LPX_TK_STR : -2; return e; }
  if (k & C_PUNCT) { *kind = LPX_TK_PUNCT; return p + 1; }
  *kind = -1;
  return NULL;
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
  const char *p = src, *end = src + len;
  out->n = 0;
  if (LPX_RESERVE(out->v, out->cap, len / 4 + 16)) return lpx_fail(ctx, "out of memory");
  for (;;) {
    int nl = 0, kind;
    const char *tok = lex_trivia(p, end, &nl);
    if (!tok) return lex_fail(ctx, src, file, (size_t)(p - src), "unterminated /* comment");
    uint32_t off = (uint32_t)(tok - src);
    if (tok == end) return lex_push(out, off, 0, LPX_TK_EOF, nl) ? lpx_fail(ctx, "out of memory") : 0;
    p = lex_token(tok, end, &kind);
    if (kind == -2) return lex_fail(ctx, src, file, off, "unterminated string literal");
    if (kind < 0) return lex_fail(ctx, src, file, off, "unexpected character");
    if ((size_t)(p - tok) > LPX_TOK_MAXLEN) return lex_fail(ctx, src, file, off, "token longer than 128 MB");
    if (lex_push(out, off, (uint32_t)(p - tok), kind, nl)) return lpx_fail(ctx, "out of memory");
  }
}
