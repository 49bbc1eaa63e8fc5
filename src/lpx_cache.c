/* The cubin cache: one file per entry, named by a 128-bit hash of (PTX,
 * arch, compiler identity, options), written to a temporary file and
 * renamed into place so concurrent writers never leave a broken entry;
 * checksummed, so a truncated or corrupt entry is detected and rebuilt;
 * bound to its key, so an entry copied or renamed under another key is
 * refused; trusted only when it is a regular file of ours in a directory
 * of ours that nobody else can write (links, FIFOs, devices and foreign or
 * shared files are refused, never followed or blocked on); capped in size
 * with least-recently-used eviction (mtime = last use). */
#define _GNU_SOURCE
#include "lpx_cache.h"
#include "lpx_compile.h"
#include "lpx_sys.h"
#include "lpx_env.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#define CACHE_MAGIC "LPXC"
#define CACHE_VERSION 2u
#define CACHE_SUFFIX ".cubin"
#define DEFAULT_LIMIT ((int64_t)1 << 30)
#define FILE_MODE 0600

/* Entry header, followed by meta_len bytes of text and the cubin. */
typedef struct entry_header {
  char magic[4];
  uint32_t version;       /* 2: the header carries the key */
  uint64_t payload_size;
  uint64_t checksum;      /* XXH64 of the cubin */
  uint32_t meta_len;
  uint32_t reserved;
  char key[32];           /* the key the entry was stored under */
} entry_header;

/* What reading an entry found. */
enum { ENTRY_OK, ENTRY_CORRUPT, ENTRY_STALE, ENTRY_OTHER_KEY };

/* ------------------------------------------------------------ the place */

/* Choose the directory: given, $LUAPTX_CACHE_DIR, $XDG_CACHE_HOME/luaptx
 * (absolute only, as the XDG spec says), $HOME/.cache/luaptx; 0 when there
 * is none (no world-shared fallback such as /tmp). */
static int choose_dir(char *out, size_t cap, const char *given)
{
  const char *env = getenv("LUAPTX_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = -1;
  if (given && *given) n = snprintf(out, cap, "%s", given);
  else if (env && *env) n = snprintf(out, cap, "%s", env);
  else if (xdg && xdg[0] == '/') n = snprintf(out, cap, "%s/luaptx", xdg);
  else if (home && *home) n = snprintf(out, cap, "%s/.cache/luaptx", home);
  return n > 0 && (size_t)n < cap;
}

/* Turn the cache off for the reason in ctx's error (or given). */
static void cache_off(lpx_cache *c, const char *why)
{
  snprintf(c->off, sizeof c->off, "%s", why);
  c->dir[0] = '\0';
}

/* The root directory of luaptx's caches (the cubin cache, tune results):
 * given, else the environment's choice; created 0700 and checked (ours, not
 * a link, under parents nobody else can write). -1 with the reason when
 * there is none or it is refused. */
int lpx_cache_root(lpx_ctx *ctx, const char *given, char *out, size_t cap)
{
  if (!choose_dir(out, cap, given)) {
    out[0] = '\0';
    return lpx_fail(ctx, "HOME is unset and neither LUAPTX_CACHE_DIR nor XDG_CACHE_HOME names a directory "
                         "(set LUAPTX_CACHE_DIR to cache compiled kernels)");
  }
  if (lpx_fs_private_dir(ctx, out) || lpx_fs_trusted_parents(ctx, out)) return -1;
  return 0;
}

/* Open (and create) the cache directory (lpx_cache_root). When there is
 * none or it is refused, the cache is off (c->off says why; lpx_compile
 * warns once) and every compile still works, uncached. -1 only for a
 * malformed LUAPTX_CACHE_MAX_MB. */
int lpx_cache_open(lpx_cache *c, lpx_ctx *ctx, const char *dir)
{
  double mb = 0;
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  c->limit = DEFAULT_LIMIT;
  if (lpx_env_real(ctx, "LUAPTX_CACHE_MAX_MB", 1.0 / 1024, 1e9, "MiB", &mb)) return -1;
  if (mb > 0) c->limit = (int64_t)(mb * 1048576);
  if (lpx_cache_root(ctx, dir, c->dir, sizeof c->dir)) cache_off(c, lpx_ctx_error(ctx));
  return 0;
}

/* Nothing is held open between calls. */
void lpx_cache_close(lpx_cache *c) { (void)c; }

/* Fail with why the cache is off, for the management calls; 0 when on. */
static int need_on(lpx_cache *c)
{
  return c->dir[0] ? 0 : lpx_fail(c->ctx, "the cubin cache is off: %s", c->off);
}

/* Add a warning to the context's pending one (a compile may have two). */
void lpx_cache_warn(lpx_ctx *ctx, const char *msg)
{
  char prev[LPX_MSG_MAX];
  snprintf(prev, sizeof prev, "%s", lpx_ctx_warning(ctx));
  lpx_warn(ctx, "%s%s%s", prev, prev[0] ? "\n" : "", msg);
}

/* The 32-hex-digit key of a compilation. */
void lpx_cache_key(const char *identity, const char *path, const char *ptx, size_t len,
                   char opts[][48], int nopts, char out[33])
{
  XXH3_state_t *s = XXH3_createState();
  XXH3_128bits_reset(s);
  XXH3_128bits_update(s, identity, strlen(identity) + 1);
  XXH3_128bits_update(s, path, strlen(path) + 1);
  for (int i = 0; i < nopts; i++) XXH3_128bits_update(s, opts[i], strlen(opts[i]) + 1);
  XXH3_128bits_update(s, ptx, len);
  XXH128_hash_t h = XXH3_128bits_digest(s);
  XXH3_freeState(s);
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

/* The 32-hex-digit XXH3-128 of any bytes (tuning keys use it for PTX). */
int32_t lpx_content_hash(const char *data, uint64_t len, char *out33)
{
  XXH128_hash_t h = XXH3_128bits(data, (size_t)len);
  snprintf(out33, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  return 0;
}

/* Path of an entry file. */
static void entry_path(const lpx_cache *c, const char *key, const char *suffix, char *out, size_t cap)
{
  snprintf(out, cap, "%s/%s%s", c->dir, key, suffix);
}

/* Remove whatever is at path inside the (private) cache directory: a
 * file, a link (never followed), a FIFO or a whole directory. */
static void remove_path(lpx_cache *c, const char *path)
{
  if (unlink(path) != 0 && errno == EISDIR) lpx_fs_remove_tree(c->ctx, path);
}

/* ------------------------------------------------------------ load/store */

/* Check and read an open entry of key: ENTRY_OK, or what is wrong with it
 * (the reason in why). */
static int read_entry(FILE *f, const char *key, uint8_t **image, size_t *size, char *why, size_t cap)
{
  entry_header h;
  if (fread(&h, sizeof h, 1, f) != 1) { snprintf(why, cap, "truncated header"); return ENTRY_CORRUPT; }
  if (memcmp(h.magic, CACHE_MAGIC, 4)) { snprintf(why, cap, "bad magic"); return ENTRY_CORRUPT; }
  if (h.version != CACHE_VERSION) return ENTRY_STALE;
  if (memcmp(h.key, key, 32)) { snprintf(why, cap, "%.32s", h.key); return ENTRY_OTHER_KEY; }
  if (h.payload_size > ((uint64_t)1 << 32) || h.meta_len > (1u << 20)) { snprintf(why, cap, "implausible sizes"); return ENTRY_CORRUPT; }
  if (fseek(f, h.meta_len, SEEK_CUR)) { snprintf(why, cap, "truncated metadata"); return ENTRY_CORRUPT; }
  uint8_t *img = malloc(h.payload_size ? h.payload_size : 1);
  const char *bad = !img ? "out of memory"
                  : fread(img, 1, h.payload_size, f) != h.payload_size ? "truncated cubin"
                  : fgetc(f) != EOF ? "trailing bytes"
                  : XXH64(img, h.payload_size, 0) != h.checksum ? "checksum mismatch" : NULL;
  if (bad) { free(img); snprintf(why, cap, "%s", bad); return ENTRY_CORRUPT; }
  free(*image);
  *image = img;
  *size = h.payload_size;
  return ENTRY_OK;
}

/* Count a miss, dropping the entry at path that cannot be used (a warning
 * when msg is given), so the rebuild replaces it. Returns 1 (a miss). */
static int drop_entry(lpx_cache *c, const char *path, const char *msg)
{
  if (msg) lpx_cache_warn(c->ctx, msg);
  remove_path(c, path);
  c->misses++;
  return 1;
}

/* Read the entry of key at path from its open descriptor fd (closed here). */
static int load_open(lpx_cache *c, const char *key, const char *path, int fd, uint8_t **image, size_t *size)
{
  char why[96] = "", msg[1400];
  FILE *f = fdopen(fd, "rb");
  if (!f) { close(fd); c->misses++; return 1; }
  int rc = read_entry(f, key, image, size, why, sizeof why);
  if (rc == ENTRY_OK) futimens(fd, NULL);   /* mark as recently used */
  fclose(f);
  if (rc == ENTRY_OK) { c->hits++; return 0; }
  if (rc == ENTRY_STALE) return drop_entry(c, path, NULL);
  if (rc == ENTRY_OTHER_KEY)
    snprintf(msg, sizeof msg, "cubin cache entry %s holds the entry of key %s, not its own; rebuilding it", path, why);
  else snprintf(msg, sizeof msg, "cubin cache entry %s is corrupt (%s); rebuilding it", path, why);
  return drop_entry(c, path, msg);
}

/* Load an entry: 0 hit, 1 miss. An entry that is corrupt, belongs to
 * another key, or is not a regular file of ours that only we can write is
 * reported once (a warning in the context), removed, and counts as a miss. */
int lpx_cache_load(lpx_cache *c, const char *key, uint8_t **image, size_t *size)
{
  char path[1200], msg[1400];
  if (!c->dir[0]) { c->misses++; return 1; }
  entry_path(c, key, CACHE_SUFFIX, path, sizeof path);
  int fd = lpx_fs_open_regular(c->ctx, path, 1);
  if (fd == -2) { c->misses++; return 1; }
  if (fd >= 0) return load_open(c, key, path, fd, image, size);
  snprintf(msg, sizeof msg, "cubin cache: %s; rebuilding the entry", lpx_ctx_error(c->ctx));
  return drop_entry(c, path, msg);
}

/* Write a file of the cache: atomically, 0600, never through a link. */
static int write_file(lpx_cache *c, const char *path, const void *data, size_t len)
{
  if (lpx_fs_write_file(c->ctx, path, data, len, FILE_MODE) == 0) return 0;
  return lpx_fail(c->ctx, "cubin cache: %s", lpx_ctx_error(c->ctx));
}

/* Can c continue a PTX identifier? */
static int ident_char(char c)
{
  return c == '_' || c == '$' || ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9');
}

/* Entry names of a PTX text (".entry name"), comma-separated, for metadata. */
static void entry_names(const char *ptx, size_t len, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = ptx; (p = memmem(p, len - (size_t)(p - ptx), ".entry ", 7)) && n + 2 < cap; p += 7) {
    const char *q = p + 7;
    size_t k = 0;
    while (q + k < ptx + len && ident_char(q[k])) k++;
    n += (size_t)snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)k, q);
  }
}

/* Store an entry (and the PTX beside it), then enforce the size cap. A
 * cache that is off stores nothing. */
int lpx_cache_store(lpx_cache *c, const char *key, const uint8_t *image, size_t size,
                    const char *ptx, size_t ptx_len, const char *arch)
{
  if (!c->dir[0]) return 0;
  char path[1200], names[512], meta[1024];
  entry_names(ptx, ptx_len, names, sizeof names);
  int mlen = snprintf(meta, sizeof meta, "arch=%s\nentries=%s\nptx_bytes=%zu\ncubin_bytes=%zu\ncreated=%lld\n",
                      arch, names, ptx_len, size, (long long)time(NULL));
  if (mlen < 0 || (size_t)mlen >= sizeof meta) mlen = (int)strlen(meta);
  entry_header h = { CACHE_MAGIC, CACHE_VERSION, size, XXH64(image, size, 0), (uint32_t)mlen, 0, { 0 } };
  memcpy(h.key, key, 32);
  size_t total = sizeof h + (size_t)mlen + size;
  char *buf = malloc(total);
  if (!buf) return lpx_fail(c->ctx, "cubin cache: out of memory");
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, meta, (size_t)mlen);
  memcpy(buf + sizeof h + mlen, image, size);
  entry_path(c, key, ".ptx", path, sizeof path);
  int rc = write_file(c, path, ptx, ptx_len);
  entry_path(c, key, CACHE_SUFFIX, path, sizeof path);
  if (rc == 0) rc = write_file(c, path, buf, total);
  free(buf);
  return rc ? rc : lpx_cache_evict(c);
}

/* ----------------------------------------------------------- management */

typedef struct entry_info { char key[33]; int64_t bytes; time_t used; } entry_info;

/* Collect every entry with its size (cubin + ptx) and last use; links
 * and other non-files under an entry's name are listed (to be removed),
 * never followed. */
static int collect(lpx_cache *c, entry_info **out, size_t *n)
{
  if (need_on(c)) return -1;
  DIR *d = opendir(c->dir);
  if (!d) return lpx_fail(c->ctx, "cubin cache: cannot read %s: %s", c->dir, strerror(errno));
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len != 32 + strlen(CACHE_SUFFIX) || strcmp(e->d_name + 32, CACHE_SUFFIX)) continue;
    char path[1400];
    struct stat st, sp;
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    if (lstat(path, &st) || LPX_RESERVE(*out, cap, *n + 1)) continue;
    entry_info *ei = &(*out)[(*n)++];
    snprintf(ei->key, sizeof ei->key, "%.32s", e->d_name);
    entry_path(c, ei->key, ".ptx", path, sizeof path);
    ei->bytes = (int64_t)st.st_size + (lstat(path, &sp) ? 0 : (int64_t)sp.st_size);
    ei->used = st.st_mtime;
  }
  closedir(d);
  return 0;
}

/* Oldest first. */
static int by_use(const void *a, const void *b)
{
  time_t x = ((const entry_info *)a)->used, y = ((const entry_info *)b)->used;
  return (x > y) - (x < y);
}

/* Remove one entry's files. */
static void remove_entry(lpx_cache *c, const char *key)
{
  char path[1200];
  entry_path(c, key, CACHE_SUFFIX, path, sizeof path);
  remove_path(c, path);
  entry_path(c, key, ".ptx", path, sizeof path);
  remove_path(c, path);
}

/* Delete least recently used entries until the cache fits its limit. */
int lpx_cache_evict(lpx_cache *c)
{
  entry_info *all;
  size_t n;
  if (collect(c, &all, &n)) return -1;
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) total += all[i].bytes;
  if (n > 1) qsort(all, n, sizeof *all, by_use);
  for (size_t i = 0; i < n && total > c->limit; i++) {
    remove_entry(c, all[i].key);
    total -= all[i].bytes;
  }
  free(all);
  return 0;
}

/* Number of entries and bytes used. */
int lpx_cache_usage(lpx_cache *c, int64_t *entries, int64_t *bytes)
{
  entry_info *all;
  size_t n;
  if (collect(c, &all, &n)) return -1;
  *entries = (int64_t)n;
  *bytes = 0;
  for (size_t i = 0; i < n; i++) *bytes += all[i].bytes;
  free(all);
  return 0;
}

/* Read an entry's metadata text into out (one line per entry); an entry
 * that cannot be trusted says why instead. */
static void append_meta(lpx_cache *c, const entry_info *e, lpx_buf *out)
{
  char path[1200], meta[1024] = "";
  entry_header h;
  entry_path(c, e->key, CACHE_SUFFIX, path, sizeof path);
  int fd = lpx_fs_open_regular(c->ctx, path, 1);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fd == -1) snprintf(meta, sizeof meta, "(%s)", lpx_ctx_error(c->ctx));
  if (f && fread(&h, sizeof h, 1, f) == 1 && h.meta_len < sizeof meta) {
    size_t got = fread(meta, 1, h.meta_len, f);
    meta[got] = '\0';
  }
  if (f) fclose(f);
  else if (fd >= 0) close(fd);
  for (char *p = meta; *p; p++) if (*p == '\n') *p = ' ';
  lpx_buf_printf(out, "%s %8lld %s\n", e->key, (long long)e->bytes, meta);
}

/* One line per entry, most recently used first: key, bytes, metadata. */
int lpx_cache_ls(lpx_cache *c, lpx_buf *out)
{
  entry_info *all;
  size_t n;
  if (collect(c, &all, &n)) return -1;
  if (n > 1) qsort(all, n, sizeof *all, by_use);
  for (size_t i = n; i-- > 0;) append_meta(c, &all[i], out);
  free(all);
  return 0;
}

/* ------------------------------------------------------------ memos */

/* Path of the memo of a compiler (its identity text, so that a warm run
 * need not load the compiler to name it): <dir>/<hash of facts>.identity. */
static void memo_path(const lpx_cache *c, const char *facts, char *out, size_t cap)
{
  char h[33];
  lpx_content_hash(facts, strlen(facts), h);
  snprintf(out, cap, "%s/%s.identity", c->dir, h);
}

/* Read the identity memo of facts into out: 0, or 1 when there is none
 * (or it is not a regular file of ours, or it was written for other facts). */
int lpx_cache_memo_get(lpx_cache *c, const char *facts, char *out, size_t cap)
{
  char path[1400], buf[4608];
  if (!c->dir[0]) return 1;
  memo_path(c, facts, path, sizeof path);
  int fd = lpx_fs_open_regular(c->ctx, path, 1);
  if (fd < 0) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = '\0';
  size_t fl = strlen(facts);
  if ((size_t)n < fl + 3 || memcmp(buf, facts, fl) || buf[fl] != '\n') return 1;
  char *id = buf + fl + 1, *end = strchr(id, '\n');
  if (!end || end == id) return 1;
  snprintf(out, cap, "%.*s", (int)(end - id), id);
  return 0;
}

/* Store the identity memo of facts (best effort: a cache that cannot be
 * written only costs a compiler load next time). */
void lpx_cache_memo_put(lpx_cache *c, const char *facts, const char *identity)
{
  char path[1400];
  lpx_buf b = { 0, 0, 0 };
  if (!c->dir[0]) return;
  memo_path(c, facts, path, sizeof path);
  lpx_buf_printf(&b, "%s\n%s\n", facts, identity);
  if (b.p) lpx_fs_write_file(c->ctx, path, b.p, b.n, FILE_MODE);
  lpx_buf_free(&b);
}

/* Remove the temporaries a crashed writer left (".tmp-" files older than
 * ten minutes: younger ones may belong to a writer still running). */
static void sweep_temporaries(lpx_cache *c)
{
  DIR *d = opendir(c->dir);
  time_t now = time(NULL);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[1400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    if (strstr(e->d_name, ".tmp-") && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > 600)
      unlink(path);
  }
  if (d) closedir(d);
}

/* Remove every entry, the kept failing PTX (failed/) and stale temporaries. */
int lpx_cache_wipe(lpx_cache *c, int64_t *removed)
{
  entry_info *all;
  size_t n;
  char failed[1400];
  if (collect(c, &all, &n)) return -1;
  for (size_t i = 0; i < n; i++) remove_entry(c, all[i].key);
  *removed = (int64_t)n;
  free(all);
  sweep_temporaries(c);
  snprintf(failed, sizeof failed, "%s/failed", c->dir);
  return lpx_fs_remove_tree(c->ctx, failed);
}
