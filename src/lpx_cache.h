/* The content-addressed cubin cache (internal to the compiler). */
#ifndef LPX_CACHE_H
#define LPX_CACHE_H
#include "lpx_internal.h"

typedef struct lpx_cache {
  lpx_ctx *ctx;
  char dir[1024];         /* "" when the cache is off */
  char off[LPX_MSG_MAX];  /* why it is off: no HOME, or the directory was refused */
  int warned;             /* the "cache is off" warning was given */
  int64_t limit;          /* bytes; least recently used entries go past it */
  int64_t hits, misses;
} lpx_cache;

int lpx_cache_open(lpx_cache *c, lpx_ctx *ctx, const char *dir);
void lpx_cache_close(lpx_cache *c);
void lpx_cache_warn(lpx_ctx *ctx, const char *msg);
int lpx_cache_memo_get(lpx_cache *c, const char *facts, char *out, size_t cap);
void lpx_cache_memo_put(lpx_cache *c, const char *facts, const char *identity);
void lpx_cache_key(const char *identity, const char *path, const char *ptx, size_t len,
                   char opts[][48], int nopts, char out[33]);
int lpx_cache_load(lpx_cache *c, const char *key, uint8_t **image, size_t *size);
int lpx_cache_store(lpx_cache *c, const char *key, const uint8_t *image, size_t size,
                    const char *ptx, size_t ptx_len, const char *arch);
int lpx_cache_ls(lpx_cache *c, lpx_buf *out);
int lpx_cache_wipe(lpx_cache *c, int64_t *removed);
int lpx_cache_evict(lpx_cache *c);
int lpx_cache_usage(lpx_cache *c, int64_t *entries, int64_t *bytes);

#endif
