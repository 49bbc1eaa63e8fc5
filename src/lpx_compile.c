/* PTX -> cubin: nvJitLink loaded with dlopen (never linked), the ptxas
 * program as the fallback, and the cache in front of both. */
#define _GNU_SOURCE
#include "lpx_compile.h"
#include "lpx_cache.h"
#include "lpx_internal.h"
#include "lpx_sys.h"
#include "lpx_sys.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NVJITLINK_INPUT_PTX 2

/* nvJitLink entry points: X(name, return, parameters). The library exports
 * them versioned (__nvJitLinkCreate_13_0), so names are resolved per major. */
#define LPX_JIT_FUNCS(X) \
  X(Create, int, (void **h, uint32_t n, const char **opts)) \
  X(Destroy, int, (void **h)) \
  X(AddData, int, (void *h, int kind, const void *data, size_t size, const char *name)) \
  X(Complete, int, (void *h)) \
  X(GetLinkedCubinSize, int, (void *h, size_t *size)) \
  X(GetLinkedCubin, int, (void *h, void *cubin)) \
  X(GetErrorLogSize, int, (void *h, size_t *size)) \
  X(GetErrorLog, int, (void *h, char *log)) \
  X(GetInfoLogSize, int, (void *h, size_t *size)) \
  X(GetInfoLog, int, (void *h, char *log))

typedef struct jit_api {
#define X(name, ret, params) ret (*name) params;
  LPX_JIT_FUNCS(X)
#undef X
} jit_api;

struct lpx_compiler {
  lpx_ctx *ctx;
  void *lib;
  jit_api jit;
  char identity[160];     /* for people: "nvJitLink 13.0"; "" until asked for */
  char ptxas[1024];
  char jit_path[1024];     /* the nvJitLink to load at the first miss ("" if none found) */
  int jit_tried;           /* its dlopen was attempted */
  char jit_facts[4200], ptxas_facts[4200];   /* cache-key identities: path, size, mtime */
  lpx_cache cache;
  uint8_t *image;
  size_t image_size;
  lpx_buf log;
  lpx_buf listing;
};

/* ------------------------------------------------------- locating tools */

/* Does path name an existing regular file? */
static int file_exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The one toolkit root: $CUDA_HOME, else $CUDA_PATH, else NULL (the default). */
static const char *toolkit_root_var(void)
{
  const char *home = getenv("CUDA_HOME"), *path = getenv("CUDA_PATH");
  return home && *home ? home : path && *path ? path : NULL;
}

/* Find a toolkit file under the toolkit root (/usr/local/cuda by default). */
static int find_in_toolkit(const char *rel, char *out, size_t cap)
{
  const char *root = toolkit_root_var();
  snprintf(out, cap, "%s/%s", root ? root : "/usr/local/cuda", rel);
  return file_exists(out);
}

/* Find ptxas in the toolkit or on $PATH. */
static int find_ptxas(char *out, size_t cap)
{
  if (find_in_toolkit("bin/ptxas", out, cap)) return 1;
  const char *path = getenv("PATH");
  for (const char *p = path; p && *p;) {
    const char *e = strchr(p, ':');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    snprintf(out, cap, "%.*s/ptxas", (int)n, p);
    if (n && file_exists(out)) return 1;
    p = e ? e + 1 : NULL;
  }
  out[0] = '\0';
  return 0;
}

/* Resolve one nvJitLink entry point: versioned name first, then plain. */
static void *jit_symbol(void *lib, const char *name, unsigned major)
{
  char sym[96];
  snprintf(sym, sizeof sym, "__nvJitLink%s_%u_0", name, major);
  void *p = dlsym(lib, sym);
  if (p) return p;
  snprintf(sym, sizeof sym, "nvJitLink%s", name);
  return dlsym(lib, sym);
}

/* What names a compiler binary in cache keys without loading or running
 * it: "kind|real path|size|mtime". 0, or -1 when path does not resolve. */
static int binary_facts(const char *kind, const char *path, char *out, size_t cap)
{
  char real[4096];
  struct stat st;
  if (!realpath(path, real) || stat(real, &st)) { out[0] = '\0'; return -1; }
  snprintf(out, cap, "%s|%s|%lld|%lld.%09ld", kind, real, (long long)st.st_size,
           (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  return 0;
}

/* dlopen nvJitLink (c->jit_path, else the loader's names when no toolkit
 * root is named) and resolve its table; 0 on success. */
static int jit_load(lpx_compiler *c)
{
  const char *names[] = { c->jit_path, "libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so" };
  size_t first = c->jit_path[0] ? 0 : 1;
  /* a root named by CUDA_HOME/CUDA_PATH is the only place searched: no loader fallback */
  size_t last = toolkit_root_var() ? 1 : sizeof names / sizeof names[0];
  for (size_t i = first; i < last && !c->lib; i++)
    c->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);   /* never unmapped: its leaks stay attributable */
  if (!c->lib) return -1;
  int (*version)(unsigned *, unsigned *) = (int (*)(unsigned *, unsigned *))dlsym(c->lib, "nvJitLinkVersion");
  unsigned major = 12, minor = 0;
  if (version) version(&major, &minor);
#define X(name, ret, params) c->jit.name = (ret(*) params)jit_symbol(c->lib, #name, major); \
  if (!c->jit.name) { dlclose(c->lib); c->lib = NULL; return -1; }
  LPX_JIT_FUNCS(X)
#undef X
  snprintf(c->identity, sizeof c->identity, "nvJitLink %u.%u", major, minor);
  Dl_info info;
  if (!c->jit_facts[0] && dladdr((void *)c->jit.Create, &info) && info.dli_fname)
    binary_facts("nvJitLink", info.dli_fname, c->jit_facts, sizeof c->jit_facts);
  return 0;
}

/* Find nvJitLink in the toolkit without loading it (loaded at the first
 * cache miss); found only through the loader, it is loaded now. */
static void jit_locate(lpx_compiler *c)
{
  if ((find_in_toolkit("lib64/libnvJitLink.so", c->jit_path, sizeof c->jit_path)
       || find_in_toolkit("lib/libnvJitLink.so", c->jit_path, sizeof c->jit_path))
      && binary_facts("nvJitLink", c->jit_path, c->jit_facts, sizeof c->jit_facts) == 0) return;
  c->jit_path[0] = '\0';
  c->jit_tried = 1;
  if (!toolkit_root_var() && jit_load(c) == 0 && !c->jit_facts[0])
    snprintf(c->jit_facts, sizeof c->jit_facts, "%s", c->identity);
}

/* Is nvJitLink loaded, or found and not yet tried? */
static int has_jit(const lpx_compiler *c) { return c->lib || (c->jit_path[0] && !c->jit_tried); }

/* Load the nvJitLink jit_locate found, once; 0 when it is usable. */
static int jit_ready(lpx_compiler *c)
{
  if (c->lib) return 0;
  if (c->jit_tried) return -1;
  c->jit_tried = 1;
  if (jit_load(c)) return -1;
  lpx_cache_memo_put(&c->cache, c->jit_facts, c->identity);
  return 0;
}

/* Identify the ptxas program by the last line of its --version output (for cache keys). */
static void ptxas_identity(lpx_compiler *c)
{
  const char *argv[] = { c->ptxas, "--version", NULL };
  char last[256] = "unknown";
  lpx_proc *p = lpx_proc_run(c->ctx, argv, NULL, NULL, NULL, 0, 0, 30);
  size_t n = 0;
  const char *out = p ? lpx_proc_output(p, 1, &n) : "";
  while (n && (out[n - 1] == '\n' || out[n - 1] == '\r')) n--;
  size_t start = n;
  while (start && out[start - 1] != '\n') start--;
  if (n > start) snprintf(last, sizeof last, "%.*s", (int)(n - start), out + start);
  lpx_proc_free(p);
  snprintf(c->identity, sizeof c->identity, "ptxas %s", last);
}

/* ------------------------------------------------------------ lifecycle */

/* A compiler without its cache: nvJitLink when one is found, else ptxas;
 * NULL when neither. Neither is loaded nor run here: a warm cache needs
 * no compiler (jit_ready, lpx_compiler_identity do it when needed). */
static lpx_compiler *compiler_new(lpx_ctx *ctx)
{
  lpx_compiler *c = calloc(1, sizeof *c);
  if (!c) { lpx_fail(ctx, "out of memory"); return NULL; }
  c->ctx = ctx;
  if (find_ptxas(c->ptxas, sizeof c->ptxas)) binary_facts("ptxas", c->ptxas, c->ptxas_facts, sizeof c->ptxas_facts);
  jit_locate(c);
  if (!has_jit(c) && !c->ptxas[0]) {
    lpx_fail(ctx, "no PTX compiler: neither libnvJitLink nor ptxas was found; install the CUDA toolkit "
                  "or point CUDA_HOME at it (searched $CUDA_HOME, else $CUDA_PATH, else /usr/local/cuda and the loader path; then $PATH)");
    free(c);
    return NULL;
  }
  return c;
}

/* Open a compiler and its cache (a cache that cannot be used is off, with
 * a warning at the first compile: compiling still works); NULL when no
 * compiler is found or LUAPTX_CACHE_MAX_MB is malformed. */
lpx_compiler *lpx_compiler_open(lpx_ctx *ctx, const char *cache_dir)
{
  lpx_compiler *c = compiler_new(ctx);
  if (c && lpx_cache_open(&c->cache, ctx, cache_dir)) {
    lpx_compiler_close(c);
    return NULL;
  }
  return c;
}

/* Release a compiler, its library and its buffers. */
void lpx_compiler_close(lpx_compiler *c)
{
  if (!c) return;
  if (c->lib) dlclose(c->lib);
  lpx_cache_close(&c->cache);
  free(c->image);
  lpx_buf_free(&c->log);
  lpx_buf_free(&c->listing);
  free(c);
}

/* "nvJitLink 13.0" or "ptxas <version>", for people: from the cache's
 * memo when a run before wrote it, else by loading or running the compiler. */
const char *lpx_compiler_identity(lpx_compiler *c)
{
  if (c->identity[0]) return c->identity;
  int jit = has_jit(c);
  if (lpx_cache_memo_get(&c->cache, jit ? c->jit_facts : c->ptxas_facts, c->identity, sizeof c->identity) == 0)
    return c->identity;
  if (jit && jit_ready(c) == 0) return c->identity;
  c->identity[0] = '\0';
  if (!c->ptxas[0]) return "nvJitLink (could not be loaded)";
  ptxas_identity(c);
  lpx_cache_memo_put(&c->cache, c->ptxas_facts, c->identity);
  return c->identity;
}

/* The cache directory in use ("" when the cache is off). */
const char *lpx_compiler_cache_dir(lpx_compiler *c) { return c->cache.dir; }

/* Why the cache is off ("" when it is on). */
const char *lpx_compiler_cache_off(lpx_compiler *c) { return c->cache.dir[0] ? "" : c->cache.off; }

/* ---------------------------------------------------------- compiling */

/* Build the option strings shared by both compilers. */
static int build_options(const char *arch, const lpx_compile_opts *o, char opts[4][48])
{
  int n = 0;
  snprintf(opts[n++], 48, "-arch=%s", arch);
  if (o && o->line_info) snprintf(opts[n++], 48, "-lineinfo");
  if (o && o->opt_level >= 0 && o->opt_level <= 3) snprintf(opts[n++], 48, "-O%d", o->opt_level);
  if (o && o->max_registers > 0) snprintf(opts[n++], 48, "-maxrregcount=%d", o->max_registers);
  return n;
}

/* Append one of nvJitLink's logs to the compiler's log buffer. */
static void jit_log(lpx_compiler *c, void *h, int error_log)
{
  size_t n = 0;
  if ((error_log ? c->jit.GetErrorLogSize(h, &n) : c->jit.GetInfoLogSize(h, &n)) || n <= 1) return;
  char *s = malloc(n);
  if (!s) return;
  if (!(error_log ? c->jit.GetErrorLog(h, s) : c->jit.GetInfoLog(h, s))) lpx_buf_puts(&c->log, s);
  free(s);
}

/* Compile with nvJitLink into c->image. */
static int compile_jit(lpx_compiler *c, const char *ptx, size_t len, char opts[4][48], int nopts)
{
  const char *argv[4];
  for (int i = 0; i < nopts; i++) argv[i] = opts[i];
  void *h = NULL;
  if (c->jit.Create(&h, (uint32_t)nopts, argv)) return lpx_fail(c->ctx, "nvJitLink rejected the options (%s)", opts[0]);
  int rc = c->jit.AddData(h, NVJITLINK_INPUT_PTX, ptx, len, "kernel.ptx");
  if (!rc) rc = c->jit.Complete(h);
  jit_log(c, h, 0);
  jit_log(c, h, 1);
  size_t size = 0;
  if (!rc) rc = c->jit.GetLinkedCubinSize(h, &size);
  uint8_t *img = rc ? NULL : malloc(size ? size : 1);
  if (img && c->jit.GetLinkedCubin(h, img)) { free(img); img = NULL; rc = 1; }
  c->jit.Destroy(&h);
  if (rc || !img) return -1;
  free(c->image);
  c->image = img;
  c->image_size = size;
  return 0;
}

/* Read a whole regular file of ours into c->image. */
static int read_image(lpx_compiler *c, const char *path)
{
  struct stat st;
  int fd = lpx_fs_open_regular(c->ctx, path, 1);
  if (fd < 0) return -1;
  uint8_t *img = fstat(fd, &st) == 0 && st.st_size > 0 ? malloc((size_t)st.st_size) : NULL;
  size_t want = img ? (size_t)st.st_size : 0, got = 0;
  while (got < want) {
    ssize_t r = read(fd, img + got, want - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!img || got != want) { free(img); return lpx_fail(c->ctx, "cannot read the cubin %s", path); }
  free(c->image);
  c->image = img;
  c->image_size = got;
  return 0;
}

/* Run ptxas on in, writing out; its merged output goes to the log. */
static int run_ptxas(lpx_compiler *c, const char *in, const char *out, char opts[4][48], int nopts)
{
  const char *argv[10] = { c->ptxas };
  int n = 1;
  for (int i = 0; i < nopts; i++) argv[n++] = opts[i];
  argv[n++] = "-o"; argv[n++] = out; argv[n++] = in; argv[n] = NULL;
  lpx_proc *p = lpx_proc_run(c->ctx, argv, NULL, NULL, NULL, 0, 1, 0);
  size_t got = 0;
  const char *log = p ? lpx_proc_output(p, 1, &got) : c->ctx->error;
  lpx_buf_put(&c->log, log, p ? got : strlen(log));
  int rc = p && lpx_proc_status(p) == 0 ? 0 : -1;
  lpx_proc_free(p);
  return rc;
}

/* Compile with the ptxas program (fallback) into c->image: the PTX and the
 * cubin live in a fresh 0700 temporary directory (mkdtemp), so no name
 * under /tmp can be predicted or planted, and it is always removed. */
static int compile_ptxas(lpx_compiler *c, const char *ptx, size_t len, char opts[4][48], int nopts)
{
  char dir[4096], in[4200], out[4200];
  if (lpx_fs_temp_dir(c->ctx, dir, sizeof dir)) { lpx_buf_puts(&c->log, lpx_ctx_error(c->ctx)); return -1; }
  snprintf(in, sizeof in, "%s/kernel.ptx", dir);
  snprintf(out, sizeof out, "%s/kernel.cubin", dir);
  int rc = -1;
  if (lpx_fs_write_file(c->ctx, in, ptx, len, 0600)) lpx_buf_puts(&c->log, lpx_ctx_error(c->ctx));
  else if (run_ptxas(c, in, out, opts, nopts) == 0 && (rc = read_image(c, out)) != 0)
    lpx_buf_puts(&c->log, lpx_ctx_error(c->ctx));
  lpx_fs_remove_tree(c->ctx, dir);
  return rc;
}

/* Keep a failing PTX so the error can name it: <cache>/failed/<key>.ptx
 * (a private directory, written atomically, 0600, never through a planted
 * link), else a fresh temporary file when the cache is off or unwritable. */
static void keep_failed(lpx_compiler *c, const char *ptx, size_t len, const char *key, char *path, size_t cap)
{
  char dir[1100];
  if (c->cache.dir[0]) {
    snprintf(dir, sizeof dir, "%s/failed", c->cache.dir);
    snprintf(path, cap, "%s/%s.ptx", dir, key);
    if (lpx_fs_private_dir(c->ctx, dir) == 0 && lpx_fs_write_file(c->ctx, path, ptx, len, 0600) == 0) return;
  }
  if (lpx_fs_temp_file(c->ctx, ".ptx", ptx, len, path, cap) == 0) return;
  snprintf(path, cap, "(nowhere: %s)", lpx_ctx_error(c->ctx));
}

/* Warn, once per compiler, that the cache is off and why. */
static void warn_off(lpx_compiler *c)
{
  char msg[LPX_MSG_MAX + 64];
  if (c->cache.dir[0] || c->cache.warned) return;
  c->cache.warned = 1;
  snprintf(msg, sizeof msg, "the cubin cache is off: %s; compiling without it", c->cache.off);
  lpx_cache_warn(c->ctx, msg);
}

/* Whether the PTX needs a whole-program compile: nvJitLink compiles PTX as
 * relocatable code, which leaves a setmaxnreg kernel with fewer registers
 * than its .maxnreg, and the driver refuses to launch it. */
int lpx_compile_needs_whole_program(const char *ptx, size_t len)
{
  return memmem(ptx, len, "setmaxnreg", 10) != NULL;
}

/* Whether ptxas was found (the whole-program compiler). */
int lpx_compiler_has_ptxas(const lpx_compiler *c) { return c && c->ptxas[0]; }

/* Compile PTX for arch through the cache; out points into the compiler. */
int32_t lpx_compile(lpx_compiler *c, const char *ptx, uint64_t len, const char *arch,
                    const lpx_compile_opts *o, lpx_cubin *out)
{
  char opts[4][48];
  int nopts = build_options(arch, o, opts);
  int use_jit = has_jit(c) && !(o && o->force_ptxas) &&
                !(c->ptxas[0] && lpx_compile_needs_whole_program(ptx, (size_t)len));
  if (!use_jit && !c->ptxas[0]) return lpx_fail(c->ctx, "ptxas was asked for but not found");
  if (use_jit && o && o->opt_level != -1 && o->opt_level != 0 && o->opt_level != 3)
    return lpx_fail(c->ctx, "opt_level %d: nvJitLink accepts 0 or 3 (ptxas, with force_ptxas, takes 0-3)", o->opt_level);
  memset(out, 0, sizeof *out);
  c->log.n = 0;
  lpx_buf_puts(&c->log, "");
  int cached = !(o && o->no_cache);
  if (cached) warn_off(c);
  for (;;) {
    lpx_cache_key(use_jit ? c->jit_facts : c->ptxas_facts, use_jit ? "jit" : "ptxas", ptx, (size_t)len, opts, nopts, out->key);
    if (cached && lpx_cache_load(&c->cache, out->key, &c->image, &c->image_size) == 0) {
      out->data = c->image; out->size = c->image_size; out->log = c->log.p; out->cache_hit = 1;
      return 0;
    }
    if (!use_jit || jit_ready(c) == 0) break;
    if (!c->ptxas[0])   /* nvJitLink was found but does not load, and there is nothing to fall back on */
      return lpx_fail(c->ctx, "no PTX compiler: %s could not be loaded (%s) and ptxas was not found", c->jit_path, dlerror());
    use_jit = 0;        /* fall back to ptxas: its own key, its own name */
    c->identity[0] = '\0';
  }
  int rc = use_jit ? compile_jit(c, ptx, (size_t)len, opts, nopts) : compile_ptxas(c, ptx, (size_t)len, opts, nopts);
  out->log = c->log.p;
  if (rc) {
    char kept[4200];
    keep_failed(c, ptx, (size_t)len, out->key, kept, sizeof kept);
    return lpx_fail(c->ctx, "%s could not compile the PTX for %s (the PTX is kept at %s):\n%s",
                    use_jit ? lpx_compiler_identity(c) : "ptxas", arch, kept, c->log.p ? c->log.p : "");
  }
  if (cached && lpx_cache_store(&c->cache, out->key, c->image, c->image_size, ptx, (size_t)len, arch))
    lpx_cache_warn(c->ctx, lpx_ctx_error(c->ctx));   /* an unwritable cache must not fail the compile */
  out->data = c->image; out->size = c->image_size;
  return 0;
}

/* ------------------------------------------------------ parallel compile */

typedef struct many_state {
  lpx_compiler *parent;
  lpx_compile_job *jobs;
  int32_t n;
  const lpx_compile_opts *opts;
  pthread_mutex_t lock;
  int32_t next;
} many_state;

/* Worker: its own context and compiler over the same cache, taking jobs
 * from a shared counter until none are left. */
static void *many_worker(void *arg)
{
  many_state *st = arg;
  lpx_ctx *ctx = lpx_ctx_new();
  lpx_compiler *c = ctx ? compiler_new(ctx) : NULL;
  if (c) {   /* the parent's cache as it is: same place, limit, and off or not */
    c->cache = st->parent->cache;
    c->cache.ctx = ctx;
    c->cache.warned = 1;
    c->cache.hits = c->cache.misses = 0;
  }
  for (;;) {
    pthread_mutex_lock(&st->lock);
    int32_t i = st->next++;
    pthread_mutex_unlock(&st->lock);
    if (i >= st->n) break;
    lpx_compile_job *j = &st->jobs[i];
    lpx_cubin out;
    j->status = c ? lpx_compile(c, j->ptx, j->len, j->arch, st->opts, &out) : -1;
    j->cache_hit = j->status == 0 && out.cache_hit;
    snprintf(j->key, sizeof j->key, "%s", j->status == 0 ? out.key : "");
    snprintf(j->error, sizeof j->error, "%s", j->status ? (ctx ? lpx_ctx_error(ctx) : "out of memory") : "");
  }
  lpx_compiler_close(c);
  lpx_ctx_free(ctx);
  return NULL;
}

/* Compile n jobs on up to `threads` worker threads (0: one per usable CPU);
 * each job records its own status, so one failure does not stop the rest.
 * The cubins land in the cache: lpx_compile then loads them as hits. */
int32_t lpx_compile_many(lpx_compiler *c, lpx_compile_job *jobs, int32_t n, const lpx_compile_opts *opts, int32_t threads)
{
  if (threads <= 0) threads = lpx_cpu_count();
  if (threads > n) threads = n;
  if (threads < 1) return 0;
  many_state st = { c, jobs, n, opts, PTHREAD_MUTEX_INITIALIZER, 0 };
  pthread_t tids[64];
  if (threads > 64) threads = 64;
  int started = 0;
  for (int i = 0; i < threads; i++) started += pthread_create(&tids[started], NULL, many_worker, &st) == 0;
  if (!started) many_worker(&st);
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
  return 0;
}

/* ------------------------------------------------------------- the cache */

/* A listing of the cache, one entry per line. */
int32_t lpx_cache_list(lpx_compiler *c, const char **text)
{
  c->listing.n = 0;
  if (lpx_cache_ls(&c->cache, &c->listing)) return -1;
  lpx_buf_puts(&c->listing, "");
  *text = c->listing.p;
  return 0;
}

/* Remove every entry; *removed = how many. */
int32_t lpx_cache_clear(lpx_compiler *c, int64_t *removed) { return lpx_cache_wipe(&c->cache, removed); }

/* Set the size cap in bytes (least recently used entries go first). */
int32_t lpx_cache_set_limit(lpx_compiler *c, int64_t bytes)
{
  c->cache.limit = bytes;
  return lpx_cache_evict(&c->cache);
}

/* Entry count, total bytes, and this process's hits and misses. */
int32_t lpx_cache_stats(lpx_compiler *c, int64_t *entries, int64_t *bytes, int64_t *hits, int64_t *misses)
{
  *hits = c->cache.hits;
  *misses = c->cache.misses;
  return lpx_cache_usage(&c->cache, entries, bytes);
}
