/* The cubin cache: one file per entry, named by a 128-bit hash of (PTX,
 * arch, compiler identity, options), written to a temporary file and
 * renamed into place so concurrent writers never leave a broken entry;
 * checksummed, so a truncated or corrupt entry is detected and rebuilt;
 * capped in size with least-recently-used eviction (mtime = last use). */
#define _GNU_SOURCE
#include "lpx_cache.h"
#include "lpx_compile.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#define CACHE_MAGIC "LPXC"
#define CACHE_VERSION 1u
#define CACHE_SUFFIX ".cubin"
#define DEFAULT_LIMIT ((int64_t)1 << 30)

/* Entry header, followed by meta_len bytes of text and the cubin. */
typedef struct entry_header {
  char magic[4];
  uint32_t version;
  uint64_t payload_size;
  uint64_t checksum;      /* XXH64 of the cubin */
  uint32_t meta_len;
  uint32_t reserved;
} entry_header;

/* ------------------------------------------------------------ the place */

/* mkdir -p. */
static int make_dirs(const char *path)
{
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  return (mkdir(tmp, 0755) && errno != EEXIST) ? -1 : 0;
}

/* Choose the directory: given, $LUAPTX_CACHE_DIR, $XDG_CACHE_HOME/luaptx, ~/.cache/luaptx. */
static void choose_dir(char *out, size_t cap, const char *given)
{
  const char *env = getenv("LUAPTX_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (given && *given) snprintf(out, cap, "%s", given);
  else if (env && *env) snprintf(out, cap, "%s", env);
  else if (xdg && *xdg) snprintf(out, cap, "%s/luaptx", xdg);
  else snprintf(out, cap, "%s/.cache/luaptx", home && *home ? home : "/tmp");
}

/* Open (and create) the cache directory. */
int lpx_cache_open(lpx_cache *c, lpx_ctx *ctx, const char *dir)
{
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  c->limit = DEFAULT_LIMIT;
  const char *mb = getenv("LUAPTX_CACHE_MAX_MB");
  if (mb && atoll(mb) > 0) c->limit = atoll(mb) << 20;
  choose_dir(c->dir, sizeof c->dir, dir);
  if (make_dirs(c->dir)) return lpx_fail(ctx, "cannot create the cache directory %s: %s", c->dir, strerror(errno));
  return 0;
}

/* Nothing is held open between calls. */
void lpx_cache_close(lpx_cache *c) { (void)c; }

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

/* ------------------------------------------------------------ load/store */

/* Check and read an open entry; 0 ok, 1 corrupt (reason in why). */
static int read_entry(FILE *f, uint8_t **image, size_t *size, const char **why)
{
  entry_header h;
  if (fread(&h, sizeof h, 1, f) != 1) { *why = "truncated header"; return 1; }
  if (memcmp(h.magic, CACHE_MAGIC, 4) || h.version != CACHE_VERSION) { *why = "bad magic or version"; return 1; }
  if (h.payload_size > ((uint64_t)1 << 32) || h.meta_len > (1u << 20)) { *why = "implausible sizes"; return 1; }
  if (fseek(f, h.meta_len, SEEK_CUR)) { *why = "truncated metadata"; return 1; }
  uint8_t *img = malloc(h.payload_size ? h.payload_size : 1);
  if (!img || fread(img, 1, h.payload_size, f) != h.payload_size) { free(img); *why = "truncated cubin"; return 1; }
  if (fgetc(f) != EOF) { free(img); *why = "trailing bytes"; return 1; }
  if (XXH64(img, h.payload_size, 0) != h.checksum) { free(img); *why = "checksum mismatch"; return 1; }
  free(*image);
  *image = img;
  *size = h.payload_size;
  return 0;
}

/* Load an entry: 0 hit, 1 miss. A corrupt entry is reported once (a
 * warning in the context), removed, and counts as a miss. */
int lpx_cache_load(lpx_cache *c, const char *key, uint8_t **image, size_t *size)
{
  char path[1200];
  entry_path(c, key, CACHE_SUFFIX, path, sizeof path);
  FILE *f = fopen(path, "rb");
  if (!f) { c->misses++; return 1; }
  const char *why = NULL;
  int rc = read_entry(f, image, size, &why);
  fclose(f);
  if (rc) {
    lpx_warn(c->ctx, "cubin cache entry %s is corrupt (%s); rebuilding it", path, why);
    remove(path);
    c->misses++;
    return 1;
  }
  utimes(path, NULL);   /* mark as recently used */
  c->hits++;
  return 0;
}

/* Write data to path atomically: a unique temporary file, then rename. */
static int write_atomic(lpx_cache *c, const char *path, const void *a, size_t na,
                        const void *b, size_t nb, const void *d, size_t nd)
{
  char tmp[1300];
  snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) return lpx_fail(c->ctx, "cache: cannot create %s: %s", tmp, strerror(errno));
  FILE *f = fdopen(fd, "wb");
  int ok = f && fwrite(a, 1, na, f) == na && (!nb || fwrite(b, 1, nb, f) == nb) && (!nd || fwrite(d, 1, nd, f) == nd);
  ok = (f && fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path)) {
    remove(tmp);
    return lpx_fail(c->ctx, "cache: cannot write %s: %s", path, strerror(errno));
  }
  return 0;
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

/* Store an entry (and the PTX beside it), then enforce the size cap. */
int lpx_cache_store(lpx_cache *c, const char *key, const uint8_t *image, size_t size,
                    const char *ptx, size_t ptx_len, const char *arch)
{
  char path[1200], names[512], meta[1024];
  entry_names(ptx, ptx_len, names, sizeof names);
  int mlen = snprintf(meta, sizeof meta, "arch=%s\nentries=%s\nptx_bytes=%zu\ncubin_bytes=%zu\ncreated=%lld\n",
                      arch, names, ptx_len, size, (long long)time(NULL));
  entry_header h = { CACHE_MAGIC, CACHE_VERSION, size, XXH64(image, size, 0), (uint32_t)mlen, 0 };
  entry_path(c, key, ".ptx", path, sizeof path);
  if (write_atomic(c, path, ptx, ptx_len, NULL, 0, NULL, 0)) return -1;
  entry_path(c, key, CACHE_SUFFIX, path, sizeof path);
  if (write_atomic(c, path, &h, sizeof h, meta, (size_t)mlen, image, size)) return -1;
  return lpx_cache_evict(c);
}

/* ----------------------------------------------------------- management */

typedef struct entry_info { char key[33]; int64_t bytes; time_t used; } entry_info;

/* Collect every entry with its size (cubin + ptx) and last use. */
static int collect(lpx_cache *c, entry_info **out, size_t *n)
{
  DIR *d = opendir(c->dir);
  if (!d) return lpx_fail(c->ctx, "cache: cannot read %s: %s", c->dir, strerror(errno));
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len != 32 + strlen(CACHE_SUFFIX) || strcmp(e->d_name + 32, CACHE_SUFFIX)) continue;
    char path[1400];
    struct stat st, sp;
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    if (stat(path, &st) || LPX_RESERVE(*out, cap, *n + 1)) continue;
    entry_info *ei = &(*out)[(*n)++];
    snprintf(ei->key, sizeof ei->key, "%.32s", e->d_name);
    entry_path(c, ei->key, ".ptx", path, sizeof path);
    ei->bytes = (int64_t)st.st_size + (stat(path, &sp) ? 0 : (int64_t)sp.st_size);
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
  remove(path);
  entry_path(c, key, ".ptx", path, sizeof path);
  remove(path);
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

/* Read an entry's metadata text into out (one line per entry). */
static void append_meta(lpx_cache *c, const entry_info *e, lpx_buf *out)
{
  char path[1200], meta[1024] = "";
  entry_header h;
  entry_path(c, e->key, CACHE_SUFFIX, path, sizeof path);
  FILE *f = fopen(path, "rb");
  if (f && fread(&h, sizeof h, 1, f) == 1 && h.meta_len < sizeof meta) {
    size_t got = fread(meta, 1, h.meta_len, f);
    meta[got] = '\0';
  }
  if (f) fclose(f);
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

/* Remove every entry. */
int lpx_cache_wipe(lpx_cache *c, int64_t *removed)
{
  entry_info *all;
  size_t n;
  if (collect(c, &all, &n)) return -1;
  for (size_t i = 0; i < n; i++) remove_entry(c, all[i].key);
  *removed = (int64_t)n;
  free(all);
  return 0;
}
