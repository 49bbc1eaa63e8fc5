/* C tests for PTX compilation and the cubin cache (no GPU needed). */
#define _GNU_SOURCE
#include "lpx_compile.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static const char *good =
  ".version 8.0\n.target sm_80\n.address_size 64\n"
  ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
  "\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n"
  "\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

static const char *bad =
  ".version 8.0\n.target sm_80\n.address_size 64\n"
  ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tadd.u32 %r1, %r9, 1;\n\tret;\n}\n";

/* Truncate the cache file of key to half its size. */
static void corrupt(lpx_compiler *c, const char *key)
{
  char path[1200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s.cubin", lpx_compiler_cache_dir(c), key);
  if (stat(path, &st) == 0) CHECK(truncate(path, st.st_size / 2) == 0);
}

int main(void)
{
  char dir[] = "/tmp/luaptx-cache-test-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  lpx_ctx *ctx = lpx_ctx_new();
  lpx_compiler *c = lpx_compiler_open(ctx, dir);
  if (!c) {
    printf("SKIPPED: no PTX compiler on this machine (%s)\n", lpx_ctx_error(ctx));
    return 0;
  }
  printf("compiler: %s, cache: %s\n", lpx_compiler_identity(c), lpx_compiler_cache_dir(c));
  lpx_compile_opts o = { 1, -1, 0, 0, 0 };
  lpx_cubin out;
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0);
  CHECK(out.cache_hit == 0 && out.size > 4 && memcmp(out.data, "\177ELF", 4) == 0);
  uint64_t first_size = out.size;
  char key[33];
  memcpy(key, out.key, 33);
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0);
  CHECK(out.cache_hit == 1 && out.size == first_size && strcmp(out.key, key) == 0);

  corrupt(c, key);
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0);
  CHECK(out.cache_hit == 0 && strstr(lpx_ctx_warning(ctx), "corrupt") != NULL);
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0 && out.cache_hit == 1);

  lpx_compile_opts o2 = { 1, 3, 0, 0, 0 };
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o2, &out) == 0 && out.cache_hit == 0);
  CHECK(strcmp(out.key, key) != 0);

  CHECK(lpx_compile(c, bad, strlen(bad), "sm_80", &o, &out) < 0);
  CHECK(strstr(lpx_ctx_error(ctx), "kept at") != NULL);
  CHECK(strstr(lpx_ctx_error(ctx), "%r9") != NULL);

  lpx_compile_opts viaptxas = { 0, -1, 0, 1, 0 };
  CHECK(lpx_compile(c, good, strlen(good), "sm_90a", &viaptxas, &out) == 0 && out.cache_hit == 0);
  CHECK(lpx_compile(c, good, strlen(good), "sm_90a", &viaptxas, &out) == 0 && out.cache_hit == 1);

  int64_t entries, bytes, hits, misses, removed;
  CHECK(lpx_cache_stats(c, &entries, &bytes, &hits, &misses) == 0);
  CHECK(entries == 3 && bytes > 0 && hits == 3 && misses == 5);
  CHECK(lpx_cache_set_limit(c, 1) == 0);
  CHECK(lpx_cache_stats(c, &entries, &bytes, &hits, &misses) == 0 && entries == 0);
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0);
  CHECK(lpx_cache_set_limit(c, (int64_t)1 << 30) == 0);
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0);
  CHECK(lpx_cache_clear(c, &removed) == 0 && removed == 1);

  /* parallel compile: 6 jobs over 3 threads, one of them broken */
  lpx_compile_job jobs[6];
  char texts[6][1024];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < 6; i++) {
    snprintf(texts[i], sizeof texts[i], "%s// variant %d\n", i == 4 ? bad : good, i);
    jobs[i].ptx = texts[i]; jobs[i].len = strlen(texts[i]); jobs[i].arch = "sm_80";
  }
  CHECK(lpx_compile_many(c, jobs, 6, &o, 3) == 0);
  for (int i = 0; i < 6; i++) CHECK(i == 4 ? jobs[i].status < 0 && strstr(jobs[i].error, "%r9") : jobs[i].status == 0);
  CHECK(lpx_compile(c, texts[0], strlen(texts[0]), "sm_80", &o, &out) == 0 && out.cache_hit == 1);
  lpx_compiler_close(c);
  lpx_ctx_free(ctx);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
