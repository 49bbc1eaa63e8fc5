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

int lpx_cexpr_eval(const char *src, const lpx_tok *t, size_t a, size_t b, lpx_cval *out);
int lpx_cexpr_tokens(const char *src, const lpx_tok *t, size_t a, size_t b);

#endif
