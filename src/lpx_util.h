/* Small shared helpers of the core: growable arrays, byte buffers, string
 * interning. Internal; not part of the FFI surface. */
#ifndef LPX_UTIL_H
#define LPX_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>

/* Ensure *p (elements of size elem) holds at least need elements. */
int lpx_grow(void **p, size_t *cap, size_t need, size_t elem);
/* The common case (room already) costs a compare, not a call. */
#define LPX_RESERVE(arr, cap, need) \
  ((size_t)(need) <= (cap) ? 0 : lpx_grow((void **)&(arr), &(cap), (need), sizeof(*(arr))))

typedef struct lpx_buf {
  char *p;
  size_t n, cap;
} lpx_buf;

int lpx_buf_grow(lpx_buf *b, size_t n);
int lpx_buf_printf(lpx_buf *b, const char *fmt, ...);
void lpx_buf_free(lpx_buf *b);

/* The writers below run for every token the emitter and the formatters
 * print, so they are inline: a compare and a copy while there is room. */

/* Append n raw bytes; the buffer stays NUL-terminated. */
static inline int lpx_buf_put(lpx_buf *b, const char *s, size_t n)
{
  if (b->n + n >= b->cap && lpx_buf_grow(b, n)) return -1;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

/* Append a NUL-terminated string. */
static inline int lpx_buf_puts(lpx_buf *b, const char *s) { return lpx_buf_put(b, s, strlen(s)); }

/* Append one character. */
static inline int lpx_buf_putc(lpx_buf *b, char c)
{
  if (b->n + 1 >= b->cap && lpx_buf_grow(b, 1)) return -1;
  b->p[b->n++] = c;
  b->p[b->n] = '\0';
  return 0;
}

/* Number of decimal digits of v. */
static inline int lpx_digits(uint64_t v)
{
  int d = 1;
  for (; v >= 10000; v /= 10000) d += 4;
  return d + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* "00" .. "99": the decimal writer below puts two digits per division. */
extern const char lpx_digit_pairs[201];

/* Append an unsigned decimal without going through printf: the digits
 * are written in place, last first, two at a time. */
static inline int lpx_buf_putu(lpx_buf *b, uint64_t v)
{
  int d = lpx_digits(v);
  if (b->n + (size_t)d >= b->cap && lpx_buf_grow(b, (size_t)d)) return -1;
  char *p = b->p + b->n + d;
  *p = '\0';
  for (; v >= 100; v /= 100) { p -= 2; memcpy(p, &lpx_digit_pairs[2 * (v % 100)], 2); }
  if (v >= 10) memcpy(p - 2, &lpx_digit_pairs[2 * v], 2);
  else p[-1] = (char)('0' + v);
  b->n += (size_t)d;
  return 0;
}

/* Append a signed decimal. */
static inline int lpx_buf_puti(lpx_buf *b, int64_t v)
{
  if (v >= 0) return lpx_buf_putu(b, (uint64_t)v);
  if (lpx_buf_putc(b, '-')) return -1;
  return lpx_buf_putu(b, (uint64_t)0 - (uint64_t)v);
}

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
/* The string behind an id. */
static inline const char *lpx_strtab_get(const lpx_strtab *t, int32_t id)
{
  return t->arena.p + t->offs[id];
}

/* Length of the string behind an id: the next string starts one NUL later. */
static inline size_t lpx_strtab_len(const lpx_strtab *t, int32_t id)
{
  size_t end = (size_t)id + 1 < t->n ? t->offs[id + 1] : t->arena.n;
  return end - t->offs[id] - 1;
}

/* Append the string behind an id (its length known: no strlen). */
static inline int lpx_buf_putsym(lpx_buf *b, const lpx_strtab *t, int32_t id)
{
  return lpx_buf_put(b, lpx_strtab_get(t, id), lpx_strtab_len(t, id));
}
void lpx_strtab_free(lpx_strtab *t);
uint32_t lpx_hash(const char *s, size_t len);

#endif
