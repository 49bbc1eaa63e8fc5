/* Constant expressions of PTX operands and initializers (lpx_cexpr.c). */
#ifndef LPX_CEXPR_H
#define LPX_CEXPR_H
#include "lpx_parse.h"

/* A folded value: a double when is_float, else 64-bit integer bits. */
typedef struct lpx_cval {
  int is_float, is_unsigned;
  int64_t i;
  double d;
} lpx_cval;

/* How deep parentheses and ?: branches may nest in one expression. */
#define LPX_CEXPR_MAX_DEPTH 256

/* lpx_cexpr_eval's results: folded, not a constant expression, too deep. */
enum { LPX_CEXPR_OK = 0, LPX_CEXPR_BAD = -1, LPX_CEXPR_DEEP = -2 };

int lpx_cexpr_eval(const char *src, const lpx_tok *t, size_t a, size_t b, lpx_cval *out, size_t *at);
int lpx_cexpr_token(const char *src, const lpx_tok *tok);
int lpx_cexpr_tokens(const char *src, const lpx_tok *t, size_t a, size_t b);

#endif
