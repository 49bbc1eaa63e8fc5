/* Label scopes (lpx_labels.h): the block tree of a function's { } items
 * and the resolution of a label reference through it, as ptxas resolves
 * it. Used by the trace (a name placed twice in one block), the reference
 * check and the emulator's branch targets. */
#include "lpx_labels.h"
#include <stdlib.h>
#include <string.h>

/* +1 when an item opens a { } block, -1 when it closes one, else 0 (parsed
 * and ptx.raw braces are one-token directives; ptx.scope's are raw lines). */
int lpx_labels_brace(const lpx_module *m, const lpx_item *it)
{
  const char *s;
  if (it->kind == LPX_ITEM_RAW) s = lpx_strtab_get(&m->syms, it->form);
  else if (it->kind == LPX_ITEM_DIR && it->nlex == 1) s = lpx_strtab_get(&m->syms, m->lex[it->lex].spell);
  else return 0;
  if (!s || !s[0] || s[1]) return 0;
  return s[0] == '{' ? 1 : s[0] == '}' ? -1 : 0;
}

/* Give every item its block and chain the labels by name; -1 on OOM. An
 * unbalanced '}' (only tolerant parsing lets one through) closes nothing. */
int lpx_labels_build(const lpx_module *m, const lpx_func *f, lpx_labels *l)
{
  size_t n = f->nitems + 1;
  memset(l, 0, sizeof *l);
  l->nsyms = m->syms.n + 1;
  l->scope = malloc(n * sizeof *l->scope); l->parent = malloc(n * sizeof *l->parent);
  l->next = malloc(n * sizeof *l->next); l->first = malloc(l->nsyms * sizeof *l->first);
  if (!l->scope || !l->parent || !l->next || !l->first) { lpx_labels_free(l); return -1; }
  memset(l->first, 0xff, l->nsyms * sizeof *l->first);
  int32_t cur = 0, nblocks = 1;
  l->parent[0] = -1;
  for (size_t i = 0; i < f->nitems; i++) {
    int brace = lpx_labels_brace(m, &f->items[i]);
    if (brace > 0) { l->parent[nblocks] = cur; cur = nblocks++; }
    l->scope[i] = cur;
    if (brace < 0 && cur > 0) cur = l->parent[cur];
    l->next[i] = -1;
  }
  for (size_t i = f->nitems; i-- > 0;) {   /* chain labels in item order: prepend walking back */
    const lpx_item *it = &f->items[i];
    if (it->kind != LPX_ITEM_LABEL || it->form < 0 || (size_t)it->form >= l->nsyms) continue;
    l->next[i] = l->first[it->form];
    l->first[it->form] = (int32_t)i;
  }
  return 0;
}

/* The label item a reference to sym at item resolves to: one placed in the
 * item's block, else in the nearest enclosing block that places it; -1. */
int32_t lpx_labels_find(const lpx_labels *l, size_t item, int32_t sym)
{
  if (sym < 0 || (size_t)sym >= l->nsyms) return -1;
  for (int32_t s = l->scope[item]; s >= 0; s = l->parent[s])
    for (int32_t k = l->first[sym]; k >= 0; k = l->next[k])
      if (l->scope[k] == s) return k;
  return -1;
}

/* Free what lpx_labels_build allocated. */
void lpx_labels_free(lpx_labels *l)
{
  free(l->scope); free(l->parent); free(l->first); free(l->next);
  memset(l, 0, sizeof *l);
}
