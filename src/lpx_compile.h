/* PTX -> cubin compilation (nvJitLink in-process, ptxas as the fallback)
 * and the content-addressed cubin cache. Plain one-line declarations: this
 * header is also handed to LuaJIT's ffi.cdef. */
#ifndef LPX_COMPILE_H
#define LPX_COMPILE_H
#include "lpx_core.h"

typedef struct lpx_compiler lpx_compiler;

/* Options of one compilation; part of the cache key. */
typedef struct lpx_compile_opts {
  int32_t line_info;      /* -lineinfo */
  int32_t opt_level;      /* -O0..-O3; -1 = the compiler's default */
  int32_t max_registers;  /* -maxrregcount; 0 = none */
  int32_t force_ptxas;    /* use the ptxas program even when nvJitLink loads */
  int32_t no_cache;       /* neither read nor write the cache (benchmarks) */
} lpx_compile_opts;

/* A compiled image; owned by the compiler until the next compile or free. */
typedef struct lpx_cubin {
  const uint8_t *data;
  uint64_t size;
  const char *log;        /* the compiler's info/error log */
  int32_t cache_hit;      /* 1 when it came from the cache */
  char key[33];           /* the cache key, 32 hex digits */
} lpx_cubin;

/* One job of a parallel compile: inputs, then what became of it. */
typedef struct lpx_compile_job {
  const char *ptx;
  uint64_t len;
  const char *arch;
  int32_t status;         /* 0 compiled (or cached), -1 failed */
  int32_t cache_hit;
  char key[33];
  char error[4096];       /* the compiler's message when status is -1 */
} lpx_compile_job;

lpx_compiler *lpx_compiler_open(lpx_ctx *ctx, const char *cache_dir);
void lpx_compiler_close(lpx_compiler *c);
const char *lpx_compiler_identity(lpx_compiler *c);
const char *lpx_compiler_cache_dir(lpx_compiler *c);
const char *lpx_compiler_cache_off(lpx_compiler *c);
int lpx_cache_root(lpx_ctx *ctx, const char *given, char *out, size_t cap);
int32_t lpx_compile(lpx_compiler *c, const char *ptx, uint64_t len, const char *arch, const lpx_compile_opts *opts, lpx_cubin *out);
int32_t lpx_compile_many(lpx_compiler *c, lpx_compile_job *jobs, int32_t n, const lpx_compile_opts *opts, int32_t threads);
int lpx_compile_needs_whole_program(const char *ptx, size_t len);
int lpx_compiler_has_ptxas(const lpx_compiler *c);
int32_t lpx_content_hash(const char *data, uint64_t len, char *out33);
int32_t lpx_cache_list(lpx_compiler *c, const char **text);
int32_t lpx_cache_clear(lpx_compiler *c, int64_t *removed);
int32_t lpx_cache_set_limit(lpx_compiler *c, int64_t bytes);
int32_t lpx_cache_stats(lpx_compiler *c, int64_t *entries, int64_t *bytes, int64_t *hits, int64_t *misses);

#endif
