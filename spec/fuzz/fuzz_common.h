/* What every PTX fuzz target checks on a text (spec/fuzz/fuzz_parse.c,
 * spec/fuzz/fuzz_cexpr.c): it either fails with a "file:line:col:"
 * message or parses; a parsed module prints back byte for byte
 * (lossless), its canonical form parses again, and it transpiles or fails
 * with "transpile:". The same bytes also go through lpx_parse_into
 * (ptx.raw) and lpx_parse_module_decls (ptx.raw_module) on a small traced
 * kernel. Any other outcome aborts, which libFuzzer reports. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H
#include "lpx_internal.h"
#include <stdlib.h>
#include <string.h>

static lpx_ctx *fuzz_ctx;

/* The context shared by every execution (made on first use). */
static lpx_ctx *fuzz_context(void)
{
  if (!fuzz_ctx) fuzz_ctx = lpx_ctx_new();
  return fuzz_ctx;
}

/* ptx.raw's path: the input as body statements appended to a traced kernel. */
static void fuzz_parse_into(const char *data, size_t size)
{
  lpx_ctx *ctx = fuzz_context();
  lpx_module *m = lpx_module_new(ctx, 87, "sm_90a", 64);
  int fn = lpx_func_begin(m, "k", 1, 1);
  for (int t = 0; t < 4; t++) lpx_reg_new(m, fn, lpx_type_lookup(t == 0 ? "pred" : t == 1 ? "u32" : t == 2 ? "f32" : "u64"));
  if (lpx_parse_into(m, fn, data, size, "raw", 0, 1) && strncmp(lpx_ctx_error(ctx), "raw", 3) != 0) abort();
  const char *out;
  size_t n;
  if (lpx_emit(m, NULL, &out, &n)) abort();
  if (lpx_parse_module_decls(m, data, size, "raw") && strncmp(lpx_ctx_error(ctx), "raw", 3) != 0) abort();
  if (lpx_emit(m, NULL, &out, &n)) abort();
  lpx_module_free(m);
}

/* Parse data as a module and check the round trips; the module (the
 * caller frees it), or NULL when it does not parse (error in the context). */
static lpx_module *fuzz_parse_module(const char *data, size_t size)
{
  lpx_ctx *ctx = fuzz_context();
  lpx_module *m = lpx_parse(ctx, data, size, "fuzz");
  if (!m) {
    if (strncmp(lpx_ctx_error(ctx), "fuzz", 4) != 0) abort();
    return NULL;
  }
  const char *out;
  size_t n;
  if (lpx_fmt_lossless(m, &out, &n) || n != size || memcmp(out, data, size)) abort();
  if (lpx_fmt_canonical(m, &out, &n)) abort();
  /* transpile may refuse a module (no .version/.target), naming the source */
  if (lpx_transpile(m, "fuzz", &out, &n) && strncmp(lpx_ctx_error(ctx), "transpile:", 10) != 0 &&
      strncmp(lpx_ctx_error(ctx), "fuzz: not a PTX module", 22) != 0) abort();
  if (lpx_fmt_canonical(m, &out, &n)) abort();
  char *canon = malloc(n ? n : 1);
  memcpy(canon, out, n);
  lpx_module *m2 = lpx_parse(ctx, canon, n, "fuzz-canonical");
  if (!m2) abort();
  lpx_module_free(m2);
  free(canon);
  return m;
}

#endif
