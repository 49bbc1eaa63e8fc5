/* C tests for the cubin cache (no compiler needed: fake images) and for
 * PTX compilation through it (skipped without a PTX compiler). */
#define _GNU_SOURCE
#include "lpx_cache.h"
#include "lpx_compile.h"
#include "lpx_sys.h"
#include <fcntl.h>
#include <signal.h>
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

/* A warp-specialised kernel: setmaxnreg needs the launch's register count
 * to be the .maxnreg, which only a whole-program compile gives. */
static const char *regs_kernel =
  ".version 8.0\n.target sm_90a\n.address_size 64\n"
  ".visible .entry k(.param .u64 p)\n.maxntid 384, 1, 1\n.maxnreg 168\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
  "\tsetmaxnreg.inc.sync.aligned.u32 232;\n"
  "\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n"
  "\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

/* The register count (EIATTR_REGCOUNT) a cubin records for its kernel, or -1. */
static int cubin_regcount(const uint8_t *b, size_t n)
{
  uint64_t shoff; uint16_t shentsize, shnum, shstrndx;
  if (n < 64) return -1;
  memcpy(&shoff, b + 0x28, 8); memcpy(&shentsize, b + 0x3A, 2); memcpy(&shnum, b + 0x3C, 2); memcpy(&shstrndx, b + 0x3E, 2);
  uint64_t stroff;
  memcpy(&stroff, b + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
  for (unsigned i = 0; i < shnum; i++) {
    const uint8_t *sh = b + shoff + (uint64_t)i * shentsize;
    uint32_t name; uint64_t off, size;
    memcpy(&name, sh, 4); memcpy(&off, sh + 0x18, 8); memcpy(&size, sh + 0x20, 8);
    if (strcmp((const char *)b + stroff + name, ".nv.info") != 0) continue;
    for (uint64_t p = off; p + 4 <= off + size;) {
      uint16_t len; memcpy(&len, b + p + 2, 2);
      uint32_t value;
      if (b[p] == 4 && b[p + 1] == 0x2f) { memcpy(&value, b + p + 8, 4); return (int)value; }
      p += b[p] == 4 ? 4u + len : 4u;
    }
  }
  return -1;
}

#define KEY_A "0123456789abcdef0123456789abcdef"
#define KEY_B "fedcba9876543210fedcba9876543210"
static const uint8_t image_a[] = "\177ELF image a";
static const uint8_t image_b[] = "\177ELF image b, longer";

/* The permission bits of path (lstat), or -1. */
static int mode_of(const char *path)
{
  struct stat st;
  return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

/* The whole of a file as a malloc'd string (NULL when missing). */
static char *slurp(const char *path, size_t *n)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = malloc(1 << 20);
  *n = s ? fread(s, 1, (1 << 20) - 1, f) : 0;
  if (s) s[*n] = '\0';
  fclose(f);
  return s;
}

/* Write bytes to a file, replacing it. */
static void spill(const char *path, const char *data, size_t n)
{
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(data, 1, n, f) == n);
  if (f) fclose(f);
}

/* Does the pending warning of ctx contain what (and take it)? */
static int warned(lpx_ctx *ctx, const char *what)
{
  const char *w = lpx_ctx_warning(ctx);
  if (!strstr(w, what)) fprintf(stderr, "  warning was: \"%s\" (expected \"%s\")\n", w, what);
  return strstr(w, what) != NULL;
}

/* Load key from c: 0 hit (image matches want), 1 miss. */
static int load(lpx_cache *c, const char *key, const uint8_t *want, size_t n)
{
  uint8_t *img = NULL;
  size_t size = 0;
  int rc = lpx_cache_load(c, key, &img, &size);
  if (rc == 0) CHECK(size == n && memcmp(img, want, n) == 0);
  free(img);
  return rc;
}

/* Entries and directories are private; a stored entry loads back. */
static void roundtrip_tests(lpx_ctx *ctx, const char *root)
{
  char dir[700], path[800];
  lpx_cache c;
  snprintf(dir, sizeof dir, "%s/new/cache", root);
  lpx_cache_open(&c, ctx, dir);
  CHECK(c.dir[0] && mode_of(dir) == 0700);
  CHECK(lpx_cache_store(&c, KEY_A, image_a, sizeof image_a, good, strlen(good), "sm_80") == 0);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, KEY_A);
  CHECK(mode_of(path) == 0600);
  snprintf(path, sizeof path, "%s/%s.ptx", dir, KEY_A);
  CHECK(mode_of(path) == 0600);
  CHECK(load(&c, KEY_A, image_a, sizeof image_a) == 0);
  CHECK(load(&c, KEY_B, image_b, sizeof image_b) == 1);
  CHECK(lpx_ctx_warning(ctx)[0] == '\0');
}

/* An entry copied under another key's name is refused, said once, removed. */
static void other_key_tests(lpx_ctx *ctx, const char *dir)
{
  char a[800], b[800];
  size_t n;
  lpx_cache c;
  lpx_cache_open(&c, ctx, dir);
  CHECK(lpx_cache_store(&c, KEY_A, image_a, sizeof image_a, good, strlen(good), "sm_80") == 0);
  snprintf(a, sizeof a, "%s/%s.cubin", dir, KEY_A);
  snprintf(b, sizeof b, "%s/%s.cubin", dir, KEY_B);
  char *bytes = slurp(a, &n);
  CHECK(bytes != NULL);
  if (bytes) spill(b, bytes, n);
  free(bytes);
  CHECK(load(&c, KEY_B, image_a, sizeof image_a) == 1);
  CHECK(warned(ctx, "holds the entry of key " KEY_A));
  CHECK(lpx_fs_kind(b) == LPX_FS_MISSING);
  CHECK(load(&c, KEY_B, image_a, sizeof image_a) == 1 && lpx_ctx_warning(ctx)[0] == '\0');
  CHECK(load(&c, KEY_A, image_a, sizeof image_a) == 0);
}

/* Replace the entry of KEY_A in dir by what make() puts at its path, then
 * check the load is a quick miss with a warning naming why, and that a
 * store rebuilds a good entry there. */
static void refused_entry(lpx_ctx *ctx, const char *dir, void (*make)(const char *), const char *why)
{
  char path[800];
  lpx_cache c;
  lpx_cache_open(&c, ctx, dir);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, KEY_A);
  lpx_fs_remove_tree(ctx, path);
  make(path);
  alarm(10);                      /* a blocking open must fail the test, not hang it */
  CHECK(load(&c, KEY_A, image_a, sizeof image_a) == 1);
  alarm(0);
  CHECK(warned(ctx, why));
  CHECK(lpx_cache_store(&c, KEY_A, image_a, sizeof image_a, good, strlen(good), "sm_80") == 0);
  CHECK(lpx_fs_kind(path) == LPX_FS_FILE && load(&c, KEY_A, image_a, sizeof image_a) == 0);
}

static char victim[700];

static void make_fifo(const char *path) { CHECK(mkfifo(path, 0600) == 0); }
static void make_dir(const char *path) { CHECK(mkdir(path, 0700) == 0); }
static void make_link(const char *path) { CHECK(symlink(victim, path) == 0); }

/* A valid entry of KEY_A at path, then changed by chmod/chown. */
static void make_entry(const char *path)
{
  lpx_ctx *ctx = lpx_ctx_new();
  CHECK(lpx_fs_write_file(ctx, path, (const char *)image_a, 1, 0600) == 0);
  lpx_ctx_free(ctx);
}
static void make_shared(const char *path) { make_entry(path); CHECK(chmod(path, 0666) == 0); }
static void make_foreign(const char *path) { make_entry(path); CHECK(chown(path, 65534, 65534) == 0); }

/* FIFOs, directories, links and shared or foreign files in place of an
 * entry: never opened blocking, never followed, never trusted. */
static void untrusted_entry_tests(lpx_ctx *ctx, const char *root, const char *dir)
{
  snprintf(victim, sizeof victim, "%s/victim", root);
  spill(victim, "precious", 8);
  refused_entry(ctx, dir, make_fifo, "it is not a regular file");
  refused_entry(ctx, dir, make_dir, "it is a directory");
  refused_entry(ctx, dir, make_link, "it is a symbolic link");
  refused_entry(ctx, dir, make_shared, "it is writable by group or others");
  if (geteuid() == 0) refused_entry(ctx, dir, make_foreign, "it is owned by another user");
  else printf("not root: the foreign-owned entry test needs chown\n");
  size_t n;
  char *v = slurp(victim, &n);
  CHECK(v && strcmp(v, "precious") == 0);
  free(v);
}

/* Open a cache at dir; expect it off with why, storing nothing. */
static void expect_off(lpx_ctx *ctx, const char *dir, const char *why)
{
  lpx_cache c;
  lpx_buf ls = { 0 };
  char path[800];
  lpx_cache_open(&c, ctx, dir);
  CHECK(c.dir[0] == '\0' && strstr(c.off, why));
  if (!strstr(c.off, why)) fprintf(stderr, "  off: \"%s\" (expected \"%s\")\n", c.off, why);
  CHECK(lpx_cache_store(&c, KEY_A, image_a, sizeof image_a, good, strlen(good), "sm_80") == 0);
  CHECK(load(&c, KEY_A, image_a, sizeof image_a) == 1);
  CHECK(lpx_cache_ls(&c, &ls) < 0 && strstr(lpx_ctx_error(ctx), "the cubin cache is off"));
  lpx_buf_free(&ls);
  snprintf(path, sizeof path, "%s/%s.cubin", dir ? dir : "", KEY_A);
  CHECK(!dir || lpx_fs_kind(path) == LPX_FS_MISSING);
}

/* Directories others can write or own, and no HOME: the cache is off. */
static void untrusted_dir_tests(lpx_ctx *ctx, const char *root)
{
  char d[700];
  snprintf(d, sizeof d, "%s/shared", root);
  CHECK(mkdir(d, 0700) == 0 && chmod(d, 0777) == 0);
  expect_off(ctx, d, "it is writable by group or others");
  snprintf(d, sizeof d, "%s/open/cache", root);
  CHECK(lpx_fs_mkdirs(ctx, d, 0700) == 0);
  snprintf(d, sizeof d, "%s/open", root);
  CHECK(chmod(d, 0777) == 0);
  snprintf(d, sizeof d, "%s/open/cache", root);
  expect_off(ctx, d, "its parent");
  snprintf(d, sizeof d, "%s/open", root);
  CHECK(chmod(d, 01777) == 0);      /* sticky, like /tmp: nobody may rename our entry */
  lpx_cache c;
  snprintf(d, sizeof d, "%s/open/cache", root);
  lpx_cache_open(&c, ctx, d);
  CHECK(c.dir[0] != '\0');
  snprintf(d, sizeof d, "%s/link", root);
  CHECK(symlink(root, d) == 0);
  expect_off(ctx, d, "it is a symbolic link");
  if (geteuid() == 0) {
    snprintf(d, sizeof d, "%s/foreign", root);
    CHECK(mkdir(d, 0700) == 0 && chown(d, 65534, 65534) == 0);
    expect_off(ctx, d, "it is owned by another user");
  } else printf("not root: the foreign-owned directory test needs chown\n");
  const char *names[] = { "LUAPTX_CACHE_DIR", "XDG_CACHE_HOME", "HOME" };
  char *saved[3];
  for (int i = 0; i < 3; i++) { saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL; unsetenv(names[i]); }
  expect_off(ctx, NULL, "HOME is unset");
  setenv("XDG_CACHE_HOME", "relative/dir", 1);   /* the XDG spec: relative paths are ignored */
  expect_off(ctx, NULL, "HOME is unset");
  for (int i = 0; i < 3; i++) { if (saved[i]) setenv(names[i], saved[i], 1); else unsetenv(names[i]); free(saved[i]); }
}

/* An entry of an older format is a quiet miss. */
static void stale_tests(lpx_ctx *ctx, const char *dir)
{
  char path[800];
  lpx_cache c;
  lpx_cache_open(&c, ctx, dir);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, KEY_B);
  char old[96] = "LPXC\001";         /* version 1, before the header carried the key */
  CHECK(lpx_fs_write_file(ctx, path, old, sizeof old, 0600) == 0);
  CHECK(load(&c, KEY_B, image_b, sizeof image_b) == 1 && lpx_ctx_warning(ctx)[0] == '\0');
  CHECK(lpx_fs_kind(path) == LPX_FS_MISSING);
}

/* The cache alone, with fake images: runs with or without a toolkit. */
static void cache_tests(void)
{
  char root[512];
  lpx_ctx *ctx = lpx_ctx_new();
  CHECK(lpx_fs_temp_dir(ctx, root, sizeof root) == 0);
  char dir[700];
  snprintf(dir, sizeof dir, "%s/cache", root);
  roundtrip_tests(ctx, root);
  other_key_tests(ctx, dir);
  untrusted_entry_tests(ctx, root, dir);
  untrusted_dir_tests(ctx, root);
  stale_tests(ctx, dir);
  CHECK(lpx_fs_remove_tree(ctx, root) == 0);
  lpx_ctx_free(ctx);
}

/* Truncate the cache file of key to half its size. */
static void corrupt(lpx_compiler *c, const char *key)
{
  char path[1200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s.cubin", lpx_compiler_cache_dir(c), key);
  if (stat(path, &st) == 0) CHECK(truncate(path, st.st_size / 2) == 0);
}

/* A failing PTX is kept as a fresh private file: a link planted at its
 * name is replaced, never followed. */
static void keep_failed_tests(lpx_compiler *c, lpx_ctx *ctx, const char *dir)
{
  lpx_compile_opts o = { 1, -1, 0, 0, 0 };
  lpx_cubin out;
  char kept[1200], victim_path[700], failed[800];
  snprintf(victim_path, sizeof victim_path, "%s/victim", dir);
  spill(victim_path, "precious", 8);
  CHECK(lpx_compile(c, bad, strlen(bad), "sm_80", &o, &out) < 0);
  snprintf(failed, sizeof failed, "%s/failed", dir);
  CHECK(mode_of(failed) == 0700);
  snprintf(kept, sizeof kept, "%s/failed/%s.ptx", dir, out.key);
  CHECK(unlink(kept) == 0 && symlink(victim_path, kept) == 0);
  CHECK(lpx_compile(c, bad, strlen(bad), "sm_80", &o, &out) < 0 && strstr(lpx_ctx_error(ctx), kept));
  size_t n;
  char *v = slurp(victim_path, &n), *k = slurp(kept, &n);
  CHECK(v && strcmp(v, "precious") == 0);
  CHECK(k && strcmp(k, bad) == 0 && lpx_fs_kind(kept) == LPX_FS_FILE && mode_of(kept) == 0600);
  free(v);
  free(k);
}

/* ptxas's temporaries live in a private directory that is always removed. */
static void temp_tests(lpx_compiler *c, lpx_ctx *ctx)
{
  char tmp[600];
  CHECK(lpx_fs_temp_dir(ctx, tmp, sizeof tmp) == 0);
  const char *saved = getenv("TMPDIR");
  char *keep = saved ? strdup(saved) : NULL;
  setenv("TMPDIR", tmp, 1);
  lpx_compile_opts viaptxas = { 0, -1, 0, 1, 1 };
  lpx_cubin out;
  CHECK(lpx_compile(c, good, strlen(good), "sm_80", &viaptxas, &out) == 0 && out.size > 4);
  CHECK(lpx_compile(c, bad, strlen(bad), "sm_80", &viaptxas, &out) < 0);
  if (keep) setenv("TMPDIR", keep, 1); else unsetenv("TMPDIR");
  free(keep);
  CHECK(rmdir(tmp) == 0);           /* fails when anything was left inside */
}

/* With HOME unset the compiler still compiles, uncached, warning once. */
static void no_home_tests(void)
{
  const char *names[] = { "LUAPTX_CACHE_DIR", "XDG_CACHE_HOME", "HOME" };
  char *saved[3];
  for (int i = 0; i < 3; i++) { saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL; unsetenv(names[i]); }
  lpx_ctx *ctx = lpx_ctx_new();
  lpx_compiler *c = lpx_compiler_open(ctx, NULL);
  lpx_compile_opts o = { 1, -1, 0, 0, 0 };
  lpx_cubin out;
  CHECK(c && lpx_compiler_cache_dir(c)[0] == '\0' && strstr(lpx_compiler_cache_off(c), "HOME is unset"));
  CHECK(c && lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0 && !out.cache_hit);
  CHECK(warned(ctx, "the cubin cache is off: HOME is unset"));
  CHECK(c && lpx_compile(c, good, strlen(good), "sm_80", &o, &out) == 0 && !out.cache_hit);
  CHECK(lpx_ctx_warning(ctx)[0] == '\0');
  lpx_compiler_close(c);
  lpx_ctx_free(ctx);
  for (int i = 0; i < 3; i++) { if (saved[i]) setenv(names[i], saved[i], 1); free(saved[i]); }
}

/* ctest's SKIP_RETURN_CODE: the test could not run here (no PTX compiler). */
enum { SKIPPED = 77 };

/* Set (or, with NULL, unset) an environment variable. */
static void env_set(const char *name, const char *value)
{
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

/* With CUDA_HOME naming an empty directory and PATH empty, no compiler is
 * found: nvJitLink is not taken from the loader path behind the user's back. */
static void hidden_toolkit_tests(void)
{
  const char *names[] = { "CUDA_HOME", "CUDA_PATH", "PATH" };
  char *saved[3], dir[600];
  for (int i = 0; i < 3; i++) saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
  lpx_ctx *ctx = lpx_ctx_new();
  CHECK(lpx_fs_temp_dir(ctx, dir, sizeof dir) == 0);
  env_set("CUDA_HOME", dir);
  env_set("CUDA_PATH", NULL);
  env_set("PATH", dir);
  lpx_compiler *c = lpx_compiler_open(ctx, dir);
  CHECK(c == NULL && strstr(lpx_ctx_error(ctx), "no PTX compiler") != NULL);
  lpx_compiler_close(c);
  for (int i = 0; i < 3; i++) { env_set(names[i], saved[i]); free(saved[i]); }
  CHECK(lpx_fs_remove_tree(ctx, dir) == 0);
  lpx_ctx_free(ctx);
}

/* Compiling through the cache; returns 0 when there is no compiler. */
static int compile_tests(void)
{
  char dir[600];
  lpx_ctx *ctx = lpx_ctx_new();
  CHECK(lpx_fs_temp_dir(ctx, dir, sizeof dir) == 0);
  lpx_compiler *c = lpx_compiler_open(ctx, dir);
  if (!c) {
    printf("compile tests skipped: no PTX compiler on this machine (%s)\n", lpx_ctx_error(ctx));
    lpx_fs_remove_tree(ctx, dir);
    lpx_ctx_free(ctx);
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

  if (lpx_compiler_has_ptxas(c)) {   /* whatever the default compiler, setmaxnreg goes whole-program */
    CHECK(lpx_compile(c, regs_kernel, strlen(regs_kernel), "sm_90a", &o, &out) == 0);
    CHECK(cubin_regcount(out.data, out.size) == 168 || !fprintf(stderr, "  regcount %d\n", cubin_regcount(out.data, out.size)));
  }
  CHECK(lpx_compile_needs_whole_program(regs_kernel, strlen(regs_kernel)) && !lpx_compile_needs_whole_program(good, strlen(good)));

  keep_failed_tests(c, ctx, dir);
  temp_tests(c, ctx);
  lpx_compiler_close(c);
  no_home_tests();
  CHECK(lpx_fs_remove_tree(ctx, dir) == 0);
  lpx_ctx_free(ctx);
  return 1;
}

/* `test_compile cache`: the cache with fake images (runs everywhere);
 * `test_compile compile`: real compiles, skipped (77) without a compiler. */
int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "";
  int ran = 1;
  if (strcmp(part, "cache") == 0) cache_tests();
  else if (strcmp(part, "compile") == 0) { hidden_toolkit_tests(); ran = compile_tests(); }
  else { fprintf(stderr, "usage: test_compile cache|compile\n"); return 2; }
  printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : ran ? 0 : SKIPPED;
}
