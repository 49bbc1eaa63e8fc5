/* Reference checks over a finished function: a branch to a label that is
 * never placed, or an address of a symbol that is neither a parameter, a
 * variable nor a function, is reported at the instruction's source line
 * (ptxas would otherwise reject the module far from the cause). */
#include "lpx_refs.h"
#include "lpx_internal.h"
#include "lpx_labels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Mark symbol ids in a byte set sized for the module's symbol table. */
static void mark(uint8_t *set, int32_t sym)
{
  if (sym >= 0) set[sym] = 1;
}

/* Mark every identifier a raw line (a pasted declaration) mentions. */
static void mark_raw(const lpx_module *m, const char *text, uint8_t *set)
{
  for (const char *p = text; *p;) {
    if (!(*p == '_' || *p == '$' || ((*p | 32) >= 'a' && (*p | 32) <= 'z'))) { p++; continue; }
    const char *q = p;
    while (*q == '_' || *q == '$' || ((*q | 32) >= 'a' && (*q | 32) <= 'z') || (*q >= '0' && *q <= '9')) q++;
    mark(set, lpx_strtab_find(&m->syms, p, (size_t)(q - p)));
    p = q;
  }
}

/* Every symbol a function may name: labels, params, variables, functions,
 * and whatever its raw lines declare. */
static uint8_t *declared(const lpx_module *m, const lpx_func *f, uint8_t **labels)
{
  size_t n = m->syms.n + 1;
  uint8_t *set = calloc(n, 1), *lab = calloc(n, 1);
  if (!set || !lab) { free(set); free(lab); return NULL; }
  for (size_t i = 0; i < f->nitems; i++) {
    if (f->items[i].kind == LPX_ITEM_LABEL) { mark(lab, f->items[i].form); mark(set, f->items[i].form); }
    if (f->items[i].kind == LPX_ITEM_RAW) mark_raw(m, lpx_strtab_get(&m->syms, f->items[i].form), set);
    if (f->items[i].kind == LPX_ITEM_DIR)   /* parsed declarations: .param in a call block, .local, ... */
      for (uint32_t k = f->items[i].lex; k < f->items[i].lex + f->items[i].nlex; k++) mark(set, m->lex[k].spell);
  }
  for (size_t i = 0; i < f->nparams; i++) mark(set, f->params[i].sym);
  for (size_t i = 0; i < f->nrets; i++) mark(set, f->rets[i].sym);
  for (size_t i = 0; i < f->nvars; i++) mark(set, f->vars[i].sym);
  for (size_t i = 0; i < m->nvars; i++) mark(set, m->vars[i].sym);
  for (size_t i = 0; i < m->nfuncs; i++) mark(set, m->funcs[i].sym);
  for (size_t i = 0; i < m->ntop; i++)   /* module-level text: .extern .func, .texref, ... */
    if (m->top[i].kind == LPX_ITEM_DIR)
      for (uint32_t k = m->top[i].lex; k < m->top[i].lex + m->top[i].nlex; k++) mark(set, m->lex[k].spell);
  *labels = lab;
  return set;
}

/* "path:line" of an item, or "" when it has no location. */
static void where(const lpx_module *m, const lpx_item *it, char *out, size_t cap)
{
  out[0] = '\0';
  if (it->file > 0 && (size_t)it->file <= m->nfiles)
    snprintf(out, cap, "%s:%d: ", lpx_strtab_get(&m->syms, m->files[it->file - 1]), it->line);
}

/* Check one operand's references; 0 when fine. `visible`: whether a label
 * operand resolves from the item's { } block (lpx_labels_find). */
static int check_operand(lpx_module *m, const lpx_item *it, const lpx_operand *o, const uint8_t *decl, const uint8_t *labels,
                         int visible)
{
  char at[1100];
  const char *op = lpx_strtab_get(&m->ctx->form_names, it->form);
  if (o->kind == LPX_OPD_LABEL && !labels[o->id]) {
    where(m, it, at, sizeof at);
    return lpx_fail(m->ctx, "%s%s: label '%s' is never placed in this kernel (ptx.label(\"%s\"))", at, op,
                    lpx_strtab_get(&m->syms, o->id), lpx_strtab_get(&m->syms, o->id));
  }
  if (o->kind == LPX_OPD_LABEL && !visible) {
    where(m, it, at, sizeof at);
    return lpx_fail(m->ctx, "%s%s: label '%s' is placed only inside a { } block this branch is outside of "
                    "(a label is local to its block and the blocks inside it)", at, op, lpx_strtab_get(&m->syms, o->id));
  }
  int sym = o->kind == LPX_OPD_SYM ? o->id : (o->kind == LPX_OPD_ADDR && o->aux == LPX_OPD_SYM ? o->id : -1);
  if (sym >= 0 && !decl[sym]) {
    where(m, it, at, sizeof at);
    return lpx_fail(m->ctx, "%s%s: '%s' names no parameter, variable, label or function of this kernel", at, op,
                    lpx_strtab_get(&m->syms, sym));
  }
  return 0;
}

/* Check every instruction of a function; -1 with the first problem found. */
int32_t lpx_func_check_refs(lpx_module *m, int32_t fn)
{
  const lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  uint8_t *labels = NULL, *decl = declared(m, f, &labels);
  lpx_labels lab;
  if (!decl || lpx_labels_build(m, f, &lab)) { free(decl); free(labels); return lpx_fail(m->ctx, "out of memory"); }
  int rc = 0;
  for (size_t i = 0; i < f->nitems && !rc; i++) {
    const lpx_item *it = &f->items[i];
    /* call targets may be .extern functions the DSL cannot declare yet */
    if (it->kind != LPX_ITEM_INST || m->ctx->forms[it->form].info.op == LPX_OP_CALL) continue;
    for (uint32_t k = 0; k < it->nops && !rc; k++) {
      const lpx_operand *o = &f->ops[it->ops + k];
      if (!lpx_opd_names_symbol(o)) continue;   /* registers and immediates have no references */
      rc = check_operand(m, it, o, decl, labels, o->kind != LPX_OPD_LABEL || lpx_labels_find(&lab, i, o->id) >= 0);
    }
  }
  lpx_labels_free(&lab);
  free(decl);
  free(labels);
  return rc;
}
