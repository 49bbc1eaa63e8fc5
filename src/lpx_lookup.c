/* Name lookups in a function body, built on demand and kept up to date
 * incrementally (each register and item is indexed once), so that a
 * ptx.raw call or a placed label costs the same in a kernel of ten
 * registers as in one of ten thousand: registers by their PTX name, and
 * the labels already placed. */
#include "lpx_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_prefix[LPX_RC__COUNT] = {
#define X(id, decl, prefix) prefix,
  LPX_REGCLASSES(X)
#undef X
};

/* Store v at arr[i] (a -1-filled growable array); -1 when out of memory. */
static int slot_put(int32_t **arr, size_t *cap, size_t i, int32_t v)
{
  size_t old = *cap;
  if (i >= old) {
    if (lpx_grow((void **)arr, cap, i + 1, sizeof(int32_t))) return -1;
    memset(*arr + old, 0xff, (*cap - old) * sizeof(int32_t));
  }
  (*arr)[i] = v;
  return 0;
}

/* Index the registers made since the last call: named ones by symbol,
 * class-numbered ones (%r3) by class and number. */
static int regs_sync(lpx_func *f)
{
  lpx_lookup *lk = &f->lookup;
  for (; lk->regs_upto < f->nregs; lk->regs_upto++) {
    size_t r = lk->regs_upto;
    int rc;
    if (r < f->nreg_names && f->reg_name[r] >= 0) {
      rc = slot_put(&lk->named, &lk->named_cap, (size_t)f->reg_name[r], (int32_t)r);
    } else {
      int cls = lpx_types[f->reg_type[r]].regclass;
      rc = slot_put(&lk->numbered[cls], &lk->numbered_cap[cls], (size_t)f->reg_index[r], (int32_t)r);
    }
    if (rc) return -1;
  }
  return 0;
}

/* The register a class-numbered name (%r12, %rd3) denotes, or -1: a class
 * prefix followed by a number from 1 without leading zeros. */
static int32_t numbered_find(const lpx_lookup *lk, const char *s, size_t n)
{
  for (int c = 0; c < LPX_RC__COUNT; c++) {
    size_t p = strlen(class_prefix[c]);
    if (n <= p || n - p > 9 || memcmp(s, class_prefix[c], p) || s[p] < '1' || s[p] > '9') continue;
    size_t idx = 0, i = p;
    while (i < n && s[i] >= '0' && s[i] <= '9') idx = idx * 10 + (size_t)(s[i++] - '0');
    if (i == n) return idx < lk->numbered_cap[c] ? lk->numbered[c][idx] : -1;
  }
  return -1;
}

/* The automatic (class-numbered) register of f that a name denotes, or -1. */
int32_t lpx_lookup_numbered(lpx_module *m, lpx_func *f, const char *s, size_t n)
{
  if (regs_sync(f)) return lpx_fail(m->ctx, "out of memory"), -2;
  return numbered_find(&f->lookup, s, n);
}

/* Does a name of the range prefix0 .. prefix(n-1) name an automatic
 * register f already has? The first such name goes to out. Only a prefix
 * that is a class prefix plus digits (%r, %r1) can: its smallest name is
 * prefix1 (prefix0 has a leading zero) or, after digits, prefix0. */
int lpx_lookup_range_clash(const lpx_func *f, const char *prefix, int32_t n, char *out, size_t cap)
{
  size_t plen = strlen(prefix);
  for (int c = 0; c < LPX_RC__COUNT; c++) {
    size_t cp = strlen(class_prefix[c]);
    if (plen < cp || memcmp(prefix, class_prefix[c], cp) || (plen > cp && prefix[cp] == '0') || plen - cp > 8) continue;
    uint64_t r = 0;
    size_t i = cp;
    while (i < plen && prefix[i] >= '0' && prefix[i] <= '9') r = r * 10 + (uint64_t)(prefix[i++] - '0');
    int32_t first = plen > cp ? 0 : 1;
    if (i < plen || first >= n || (plen > cp ? r * 10 : 1) > (uint64_t)f->class_count[c]) continue;
    snprintf(out, cap, "%s%d", prefix, (int)first);
    return 1;
  }
  return 0;
}

/* The register of function f that the name (symbol sym, text s of n
 * bytes) denotes: the latest one made with that name, as ptx.raw resolves
 * names; -1 when none, -2 when out of memory (message in the context). */
int32_t lpx_lookup_reg(lpx_module *m, lpx_func *f, int32_t sym, const char *s, size_t n)
{
  if (regs_sync(f)) return lpx_fail(m->ctx, "out of memory"), -2;
  const lpx_lookup *lk = &f->lookup;
  int32_t named = sym >= 0 && (size_t)sym < lk->named_cap ? lk->named[sym] : -1;
  int32_t numbered = numbered_find(lk, s, n);
  return named > numbered ? named : numbered;
}

/* Is label sym already placed in function f's body? -1 when out of memory. */
int lpx_lookup_label_placed(lpx_module *m, lpx_func *f, int32_t sym)
{
  lpx_lookup *lk = &f->lookup;
  for (; lk->items_upto < f->nitems; lk->items_upto++) {
    const lpx_item *it = &f->items[lk->items_upto];
    if (it->kind == LPX_ITEM_LABEL && slot_put(&lk->labels, &lk->labels_cap, (size_t)it->form, 1))
      return lpx_fail(m->ctx, "out of memory");
  }
  return (size_t)sym < lk->labels_cap && lk->labels[sym] == 1;
}

/* Free a function's lookup tables. */
void lpx_lookup_free(lpx_func *f)
{
  lpx_lookup *lk = &f->lookup;
  for (int c = 0; c < LPX_RC__COUNT; c++) free(lk->numbered[c]);
  free(lk->named);
  free(lk->labels);
  memset(lk, 0, sizeof *lk);
}
