/* Strict reading of environment variables: a value that does not parse,
 * or lies outside its range, is an error naming the variable, the value
 * and what would be valid; never a silent default or a truncated number.
 * Unset or empty variables leave *out unchanged. Internal to the core. */
#ifndef LPX_ENV_H
#define LPX_ENV_H
#include "lpx_core.h"

/* An integer in lo..hi ("1000000", "1e6"; not "1.5", "12abc", " 3"). */
int lpx_env_int(lpx_ctx *ctx, const char *name, int64_t lo, int64_t hi, const char *what, int64_t *out);

/* A decimal number in lo..hi ("0.5", "2e3"; not "inf", "0x10"). */
int lpx_env_real(lpx_ctx *ctx, const char *name, double lo, double hi, const char *what, double *out);

/* A switch: "0" or "1". */
int lpx_env_flag(lpx_ctx *ctx, const char *name, int *out);

/* A mode word: `plain` (*out = -1) or `key:<integer in lo..hi>` (*out = the
 * integer), e.g. "default" or "adversarial:7". */
int lpx_env_keyed_int(lpx_ctx *ctx, const char *name, const char *plain, const char *key, int64_t lo, int64_t hi,
                      const char *what, int64_t *out);

#endif
