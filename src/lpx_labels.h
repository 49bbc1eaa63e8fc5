/* Label scopes: PTX labels are local to the { } block that places them, so
 * inline asm pasted twice (nvcc, Triton) places one name in several blocks.
 * A reference resolves to the label of its own block or, failing that, of
 * the nearest enclosing one (lpx_labels.c). */
#ifndef LPX_LABELS_H
#define LPX_LABELS_H
#include "lpx_internal.h"

/* A function's block tree and its labels by name. */
typedef struct lpx_labels {
  int32_t *scope;    /* per item: its block (0: the body itself) */
  int32_t *parent;   /* per block: the enclosing block (-1 for the body) */
  int32_t *first;    /* per symbol: the first label item of that name, -1 */
  int32_t *next;     /* per item: the next label item of the same name, -1 */
  size_t nsyms;
} lpx_labels;

int lpx_labels_brace(const lpx_module *m, const lpx_item *it);
int lpx_labels_build(const lpx_module *m, const lpx_func *f, lpx_labels *l);
int32_t lpx_labels_find(const lpx_labels *l, size_t item, int32_t sym);
void lpx_labels_free(lpx_labels *l);

#endif
