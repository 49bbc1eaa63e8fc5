/* libFuzzer target for the PTX parser. Any input must either fail with a
 * "file:line:col:" message or parse; a parsed module must print back byte
 * for byte (lossless) and its canonical form must parse again. The same
 * bytes also go through lpx_parse_into (ptx.raw) and lpx_parse_module_decls
 * (ptx.raw_module) on a small traced kernel, and parsed modules through the
 * transpiler.
 * Build: cmake -S . -B build-fuzz -DLUAPTX_FUZZ=ON -DCMAKE_C_COMPILER=clang
 * Run:   ./build-fuzz/fuzz_parse -runs=10000000 corpus-dir spec/fixtures/ptx */
#include "lpx_internal.h"
#include <stdlib.h>
#include <string.h>

static lpx_ctx *ctx;

/* ptx.raw's path: the input as body statements appended to a traced kernel. */
static void fuzz_parse_into(const uint8_t *data, size_t size)
{
  lpx_module *m = lpx_module_new(ctx, 87, "sm_90a", 64);
  int fn = lpx_func_begin(m, "k", 1, 1);
  for (int t = 0; t < 4; t++) lpx_reg_new(m, fn, lpx_type_lookup(t == 0 ? "pred" : t == 1 ? "u32" : t == 2 ? "f32" : "u64"));
  if (lpx_parse_into(m, fn, (const char *)data, size, "raw", 0, 1) && strncmp(lpx_ctx_error(ctx), "raw", 3) != 0) abort();
  const char *out;
  size_t n;
  if (lpx_emit(m, NULL, &out, &n)) abort();
  if (lpx_parse_module_decls(m, (const char *)data, size, "raw") && strncmp(lpx_ctx_error(ctx), "raw", 3) != 0) abort();
  if (lpx_emit(m, NULL, &out, &n)) abort();
  lpx_module_free(m);
}

/* One execution: parse, check the round trips, free. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!ctx) ctx = lpx_ctx_new();
  fuzz_parse_into(data, size);
  lpx_module *m = lpx_parse(ctx, (const char *)data, size, "fuzz");
  if (!m) {
    if (strncmp(lpx_ctx_error(ctx), "fuzz", 4) != 0) abort();
    return 0;
  }
  const char *out;
  size_t n;
  if (lpx_fmt_lossless(m, &out, &n) || n != size || memcmp(out, data, size)) abort();
  if (lpx_fmt_canonical(m, &out, &n)) abort();
  if (lpx_transpile(m, "fuzz", &out, &n) && strncmp(lpx_ctx_error(ctx), "transpile:", 10) != 0) abort();
  if (lpx_fmt_canonical(m, &out, &n)) abort();
  char *canon = malloc(n ? n : 1);
  memcpy(canon, out, n);
  lpx_module *m2 = lpx_parse(ctx, canon, n, "fuzz-canonical");
  if (!m2) abort();
  lpx_module_free(m2);
  free(canon);
  lpx_module_free(m);
  return 0;
}
