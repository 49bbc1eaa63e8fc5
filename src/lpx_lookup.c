/* Name lookups in a function body, built on demand and kept up to date
 * incrementally (each register and item is indexed once), so that a
 * ptx.raw call or a placed label costs the same in a kernel of ten
 * registers as in one of ten thousand: registers by their PTX name, and
 * the labels already placed in each { } block (lpx_labels.c's scopes). */
#include "lpx_internal.h"
#include "lpx_labels.h"
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

/* Index the registers f made since the last call; -1 when out of memory. */
int lpx_lookup_sync(lpx_module *m, lpx_func *f)
{
  return regs_sync(f) ? lpx_fail(m->ctx, "out of memory") : 0;
}

/* The automatic (class-numbered) register of f that a name denotes, or -1
 * (-2 when out of memory). */
int32_t lpx_lookup_numbered(lpx_module *m, lpx_func *f, const char *s, size_t n)
{
  if (lpx_lookup_sync(m, f)) return -2;
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
 * bytes) denotes among those indexed by the last lpx_lookup_sync: the
 * latest one made with that name, as ptx.raw resolves names; -1 if none. */
int32_t lpx_lookup_reg(const lpx_func *f, int32_t sym, const char *s, size_t n)
{
  const lpx_lookup *lk = &f->lookup;
  int32_t named = sym >= 0 && (size_t)sym < lk->named_cap ? lk->named[sym] : -1;
  int32_t numbered = numbered_find(lk, s, n);
  return named > numbered ? named : numbered;
}

/* Push v on a growable int32 stack; -1 when out of memory. */
static int push32(int32_t **arr, size_t *n, size_t *cap, int32_t v)
{
  if (LPX_RESERVE(*arr, *cap, *n + 1)) return -1;
  (*arr)[(*n)++] = v;
  return 0;
}

/* Index one body item for the label lookup: a '{' opens a block, a '}'
 * closes the innermost one (an unbalanced one closes nothing), a label is
 * recorded in its name's list with the block it is placed in. */
static int labels_index(lpx_module *m, lpx_lookup *lk, const lpx_item *it)
{
  int brace = lpx_labels_brace(m, it);
  if (brace > 0) {
    int32_t block = (int32_t)lk->nblocks++;
    return push32(&lk->open, &lk->nopen, &lk->open_cap, block) ||
           slot_put(&lk->block_open, &lk->block_open_cap, (size_t)block, 1) ? -1 : 0;
  }
  if (brace < 0 && lk->nopen) {
    lk->block_open[lk->open[--lk->nopen]] = 0;
    return 0;
  }
  if (it->kind != LPX_ITEM_LABEL || it->form < 0) return 0;
  int32_t block = lk->nopen ? lk->open[lk->nopen - 1] : -1, head = -1;
  if ((size_t)it->form < lk->labels_cap) head = lk->labels[it->form];
  /* the list holds (block, next) pairs: entries 2k and 2k + 1 */
  if (push32(&lk->placed, &lk->nplaced, &lk->placed_cap, block) || push32(&lk->placed, &lk->nplaced, &lk->placed_cap, head))
    return -1;
  return slot_put(&lk->labels, &lk->labels_cap, (size_t)it->form, (int32_t)(lk->nplaced / 2 - 1));
}

/* Is label sym already placed in the { } block the end of function f's
 * body is in (its own placements, not those of blocks closed inside it)?
 * Each name keeps its placements newest first; those of closed blocks are
 * dropped as they come to the front (a block never reopens), so every
 * placement is looked at a bounded number of times. -1 on OOM. */
int lpx_lookup_label_placed(lpx_module *m, lpx_func *f, int32_t sym)
{
  lpx_lookup *lk = &f->lookup;
  for (; lk->items_upto < f->nitems; lk->items_upto++)
    if (labels_index(m, lk, &f->items[lk->items_upto])) return lpx_fail(m->ctx, "out of memory");
  if (sym < 0 || (size_t)sym >= lk->labels_cap) return 0;
  int32_t here = lk->nopen ? lk->open[lk->nopen - 1] : -1, e = lk->labels[sym];
  while (e >= 0 && lk->placed[2 * e] >= 0 && !lk->block_open[lk->placed[2 * e]]) e = lk->placed[2 * e + 1];
  lk->labels[sym] = e;
  return e >= 0 && lk->placed[2 * e] == here;
}

/* Free a function's lookup tables. */
void lpx_lookup_free(lpx_func *f)
{
  lpx_lookup *lk = &f->lookup;
  for (int c = 0; c < LPX_RC__COUNT; c++) free(lk->numbered[c]);
  free(lk->named);
  free(lk->labels); free(lk->placed); free(lk->open); free(lk->block_open);
  memset(lk, 0, sizeof *lk);
}
