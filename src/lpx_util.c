/* Growable arrays, byte buffers and string interning for the core. */
#include "lpx_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* Grow an array geometrically so appends stay amortised O(1): by 4 once
 * it holds 64 KiB, since realloc copies a block that size (a traced
 * kernel's instruction and operand arrays reach megabytes). */
int lpx_grow(void **p, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need) ncap *= ncap * elem >= 65536 ? 4 : 2;
  void *np = realloc(*p, ncap * elem);
  if (!np) return -1;
  *p = np;
  *cap = ncap;
  return 0;
}

/* ---------------------------------------------------------------- buffers */

const char lpx_digit_pairs[201] =
  "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
  "8081828384858687888990919293949596979899";

/* Make room for n more bytes and the NUL (the slow path of the writers
 * in lpx_util.h); -1 when out of memory. */
int lpx_buf_grow(lpx_buf *b, size_t n)
{
  return lpx_grow((void **)&b->p, &b->cap, b->n + n + 1, 1);
}

/* Append printf-formatted text (cold paths only). */
int lpx_buf_printf(lpx_buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || lpx_grow((void **)&b->p, &b->cap, b->n + (size_t)n + 1, 1)) return -1;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
  return 0;
}

/* Release a buffer's memory. */
void lpx_buf_free(lpx_buf *b)
{
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* ------------------------------------------------------------- interning */

/* XXH3 (a few cycles for the short keys interned here: tokens, trivia) of
 * all but the last byte, plus the last byte's low bits: names numbered in
 * a row (%f1230 .. %f1239, as unrolled code makes them) land in
 * neighbouring slots, so inserting them touches few cache lines. */
uint32_t lpx_hash(const char *s, size_t len)
{
  if (!len) return (uint32_t)XXH3_64bits(s, 0);
  return (uint32_t)XXH3_64bits(s, len - 1) + ((uint8_t)s[len - 1] & 15);
}


/* Probe for s (hash h); return its slot index (holding its id or empty).
 * The stored hash and length settle almost every mismatch without
 * touching the arena. */
static size_t strtab_probe(const lpx_strtab *t, const char *s, size_t len, uint32_t h)
{
  size_t mask = t->nslots - 1, i = h & mask;
  for (;; i = (i + 1) & mask) {
    const lpx_strslot *e = &t->slots[i];
    if (!e->id) return i;
    if (e->hash == h && lpx_strtab_len(t, e->id - 1) == len && memcmp(t->arena.p + t->offs[e->id - 1], s, len) == 0) return i;
  }
}

/* Rehash into ns slots (a power of two), reinserting every id by its
 * stored hash. */
static int strtab_resize(lpx_strtab *t, size_t ns)
{
  size_t mask = ns - 1;
  lpx_strslot *slots = calloc(ns, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < t->nslots; i++) {
    if (!t->slots[i].id) continue;
    size_t j = t->slots[i].hash & mask;
    while (slots[j].id) j = (j + 1) & mask;
    slots[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = ns;
  return 0;
}

/* Make room for n strings of bytes in all (NULs included), so a table
 * filled to about that size never rehashes or moves its arena. */
int lpx_strtab_reserve(lpx_strtab *t, size_t n, size_t bytes)
{
  size_t ns = t->nslots ? t->nslots : 64;
  while (ns < 2 * n) ns *= 2;
  if (ns > t->nslots && strtab_resize(t, ns)) return -1;
  if (LPX_RESERVE(t->offs, t->offs_cap, n)) return -1;
  return lpx_grow((void **)&t->arena.p, &t->arena.cap, bytes, 1);
}

/* Return the id of s if interned, else -1. */
int32_t lpx_strtab_find(const lpx_strtab *t, const char *s, size_t len)
{
  if (!t->nslots) return -1;
  int32_t id = t->slots[strtab_probe(t, s, len, lpx_hash(s, len))].id;
  return id ? id - 1 : -1;
}

/* Intern s (len bytes) and return its dense id, or -1 when out of memory. */
int32_t lpx_strtab_intern(lpx_strtab *t, const char *s, size_t len)
{
  if ((t->n + 1) * 2 > t->nslots && strtab_resize(t, t->nslots ? t->nslots * 2 : 64)) return -1;
  uint32_t h = lpx_hash(s, len);
  size_t slot = strtab_probe(t, s, len, h);
  if (t->slots[slot].id) return t->slots[slot].id - 1;
  if (LPX_RESERVE(t->offs, t->offs_cap, t->n + 1)) return -1;
  t->offs[t->n] = (uint32_t)t->arena.n;
  if (lpx_grow((void **)&t->arena.p, &t->arena.cap, t->arena.n + len + 1, 1)) return -1;
  memcpy(t->arena.p + t->arena.n, s, len);
  t->arena.p[t->arena.n + len] = '\0';
  t->arena.n += len + 1;
  t->slots[slot] = (lpx_strslot){ h, (int32_t)++t->n };
  return (int32_t)t->n - 1;
}

/* Release every allocation of a string table. */
void lpx_strtab_free(lpx_strtab *t)
{
  lpx_buf_free(&t->arena);
  free(t->offs);
  free(t->slots);
  memset(t, 0, sizeof *t);
}
