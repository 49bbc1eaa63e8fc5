/* Small shared helpers of the core: growable arrays, byte buffers, string
 * interning. Internal; not part of the FFI surface. */
#ifndef LPX_UTIL_H
#define LPX_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

/* Ensure *p (elements of size elem) holds at least need elements. */
int lpx_grow(void **p, size_t *cap, size_t need, size_t elem);
#define LPX_RESERVE(arr, cap, need) \
  lpx_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

typedef struct lpx_buf {
  char *p;
  size_t n, cap;
} lpx_buf;

int lpx_buf_put(lpx_buf *b, const char *s, size_t n);
int lpx_buf_puts(lpx_buf *b, const char *s);
int lpx_buf_putc(lpx_buf *b, char c);
int lpx_buf_printf(lpx_buf *b, const char *fmt, ...);
int lpx_buf_putu(lpx_buf *b, uint64_t v);
int lpx_buf_puti(lpx_buf *b, int64_t v);
void lpx_buf_free(lpx_buf *b);

/* One hash slot: the key's hash (most mismatches end there) and id+1. */
typedef struct lpx_strslot {
  uint32_t hash;
  int32_t id;         /* id + 1, 0 = empty */
} lpx_strslot;

/* Interned strings: dense ids, pointers into one NUL-separated arena
 * (valid until the next intern). */
typedef struct lpx_strtab {
  lpx_buf arena;
  uint32_t *offs;     /* id -> offset into arena */
  size_t n, offs_cap;
  lpx_strslot *slots; /* open addressing, linear probing */
  size_t nslots;
} lpx_strtab;

int32_t lpx_strtab_intern(lpx_strtab *t, const char *s, size_t len);
int lpx_strtab_reserve(lpx_strtab *t, size_t n, size_t bytes);
int32_t lpx_strtab_find(const lpx_strtab *t, const char *s, size_t len);
const char *lpx_strtab_get(const lpx_strtab *t, int32_t id);
void lpx_strtab_free(lpx_strtab *t);
uint32_t lpx_hash(const char *s, size_t len);

#endif
