/* Strict parsing of environment variables (see lpx_env.h). */
#include "lpx_env.h"
#include "lpx_internal.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Does s hold only the characters of a decimal number (no hex, inf, nan)? */
static int decimal_chars(const char *s)
{
  return s[strspn(s, "0123456789+-.eE")] == '\0';
}

/* Parse a decimal number; 0, or -1 when s is not one. */
static int parse_real(const char *s, double *v)
{
  char *end;
  if (!decimal_chars(s)) return -1;
  errno = 0;
  *v = strtod(s, &end);
  return end == s || *end || !isfinite(*v) ? -1 : 0;
}

/* Parse an integer written plainly or in exponent notation: 0; -1 when s
 * is not an integer; 1 when it is one too large for 64 bits. */
static int parse_int(const char *s, int64_t *v)
{
  char *end;
  double d;
  if (!decimal_chars(s) || s[0] == '\0') return -1;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (*end == '\0' && end != s) { *v = x; return errno == ERANGE ? 1 : 0; }
  if (parse_real(s, &d) || d != floor(d)) return -1;
  if (fabs(d) >= 9223372036854775808.0) return 1;
  *v = (int64_t)d;
  return 0;
}

/* The variable's value, or NULL when it is unset or empty. */
static const char *value_of(const char *name)
{
  const char *s = getenv(name);
  return s && *s ? s : NULL;
}

/* Read an integer variable in lo..hi into *out. */
int lpx_env_int(lpx_ctx *ctx, const char *name, int64_t lo, int64_t hi, const char *what, int64_t *out)
{
  const char *s = value_of(name);
  int64_t v = 0;
  if (!s) return 0;
  int rc = parse_int(s, &v);
  if (rc != 0 || v < lo || v > hi)
    return lpx_fail(ctx, "%s=%s: %s; valid: an integer in %" PRId64 "..%" PRId64 " (%s)", name, s,
                    rc < 0 ? "not an integer" : "out of range", lo, hi, what);
  *out = v;
  return 0;
}

/* Read a decimal variable in lo..hi into *out. */
int lpx_env_real(lpx_ctx *ctx, const char *name, double lo, double hi, const char *what, double *out)
{
  const char *s = value_of(name);
  double v = 0;
  if (!s) return 0;
  int bad = parse_real(s, &v);
  if (bad || v < lo || v > hi)
    return lpx_fail(ctx, "%s=%s: %s; valid: a number in %g..%g (%s)", name, s, bad ? "not a number" : "out of range",
                    lo, hi, what);
  *out = v;
  return 0;
}

/* Read a 0/1 switch into *out. */
int lpx_env_flag(lpx_ctx *ctx, const char *name, int *out)
{
  const char *s = value_of(name);
  if (!s) return 0;
  if (strcmp(s, "0") && strcmp(s, "1")) return lpx_fail(ctx, "%s=%s: valid: 0 (off) or 1 (on)", name, s);
  *out = s[0] == '1';
  return 0;
}

/* Read a mode word: plain (-1) or key:<integer in lo..hi> into *out. */
int lpx_env_keyed_int(lpx_ctx *ctx, const char *name, const char *plain, const char *key, int64_t lo, int64_t hi,
                      const char *what, int64_t *out)
{
  const char *s = value_of(name);
  size_t k = strlen(key);
  int64_t v = 0;
  if (!s) return 0;
  if (strcmp(s, plain) == 0) { *out = -1; return 0; }
  if (strncmp(s, key, k) == 0 && s[k] == ':' && parse_int(s + k + 1, &v) == 0 && v >= lo && v <= hi) { *out = v; return 0; }
  return lpx_fail(ctx, "%s=%s: valid: %s, or %s:<n> with n an integer in %" PRId64 "..%" PRId64 " (%s)", name, s, plain, key,
                  lo, hi, what);
}
