/* Merging traced modules into one PTX module (lpx_merge.h). Every module
 * must have the same .version, .target and .address_size (one module has
 * one header). Files are renumbered into one .file table; a variable,
 * function or kernel another module already wrote under its name is
 * dropped when its text is the same and refused when it differs, naming
 * both kernels; other declarations (.extern .func, .pragma) are written
 * once per distinct text. */
#include "lpx_merge.h"
#include "lpx_internal.h"
#include <stdlib.h>
#include <string.h>

/* A named item already written: where its text is kept and whose it was. */
typedef struct seen {
  size_t off, len;
  int32_t owner;
} seen;

/* The merge in progress. */
typedef struct mx {
  lpx_ctx *ctx;
  lpx_buf *out;
  lpx_buf item;              /* the item being written */
  lpx_buf texts;             /* texts of the named items written, for comparison */
  lpx_strtab names;          /* their names; the id indexes seen */
  seen *seen; size_t seen_cap;
  lpx_strtab decls;          /* texts of the unnamed declarations written */
  lpx_strtab files;          /* the merged .file table: path -> number - 1 */
  const char **labels;
  int last_decl;             /* the last item written was a declaration */
} mx;

/* Fail unless module k has module 0's .version, .target and .address_size. */
static int headers_agree(mx *x, lpx_module **mods, int32_t k)
{
  const lpx_module *a = mods[0], *b = mods[k];
  if (a->ptx_version == b->ptx_version && a->address_size == b->address_size && !strcmp(a->target, b->target) &&
      !strcmp(a->target_mods, b->target_mods))
    return 0;
  return lpx_fail(x->ctx, "%s targets %s%s (PTX %d.%d, %d-bit) but %s targets %s%s (PTX %d.%d, %d-bit): one PTX "
                  "module has one .target and .version", x->labels[k], b->target, b->target_mods, b->ptx_version / 10,
                  b->ptx_version % 10, b->address_size, x->labels[0], a->target, a->target_mods, a->ptx_version / 10,
                  a->ptx_version % 10, a->address_size);
}

/* Renumber module m's files into the merged table; *map is malloc'd
 * (NULL when the module has none). -1 on OOM. */
static int map_files(mx *x, const lpx_module *m, int32_t **map)
{
  *map = NULL;
  if (!m->nfiles) return 0;
  *map = malloc(m->nfiles * sizeof **map);
  if (!*map) return -1;
  for (size_t i = 0; i < m->nfiles; i++) {
    const char *path = lpx_strtab_get(&m->syms, m->files[i]);
    int32_t id = lpx_strtab_intern(&x->files, path, strlen(path));
    if (id < 0) return -1;
    (*map)[i] = id + 1;
  }
  return 0;
}

/* The name a top-level declaration defines (.global .u32 x[4] = {...};):
 * the first identifier followed by '[', '=' or ';'; NULL for declarations
 * of functions (.extern .func f(...);) and directives (.pragma "..."). */
static const char *decl_name(const lpx_module *m, const lpx_item *it)
{
  for (uint32_t k = it->lex; k + 1 < it->lex + it->nlex; k++) {
    const char *w = lpx_strtab_get(&m->syms, m->lex[k].spell), *next = lpx_strtab_get(&m->syms, m->lex[k + 1].spell);
    if (!strcmp(w, ".func") || !strcmp(w, ".entry") || !strcmp(w, ".callprototype")) return NULL;
    if (w[0] != '.' && w[0] != '"' && next[0] && strchr("[=;", next[0]) && !next[1]) return w;
  }
  return NULL;
}

/* Append the item to the output (a blank line first when sep). */
static int flush_item(mx *x, int sep)
{
  if ((sep && lpx_buf_putc(x->out, '\n') < 0) || lpx_buf_put(x->out, x->item.p, x->item.n) < 0)
    return lpx_fail(x->ctx, "out of memory");
  return 0;
}

/* Is the item (module k's, defining name) new? 1: remember and write it;
 * 0: the same text was written before; -1: another text was (refused). */
static int fresh_named(mx *x, const char *name, const char *what, int32_t k)
{
  int32_t id = lpx_strtab_find(&x->names, name, strlen(name));
  if (id >= 0) {
    const seen *s = &x->seen[id];
    if (s->len == x->item.n && !memcmp(x->texts.p + s->off, x->item.p, x->item.n)) return 0;
    return lpx_fail(x->ctx, "the %s '%s' of %s differs from the one of %s: one PTX module holds one %s of a name "
                    "(rename one, or write one file per kernel)", what, name, x->labels[k], x->labels[s->owner], what);
  }
  id = lpx_strtab_intern(&x->names, name, strlen(name));
  if (id < 0 || LPX_RESERVE(x->seen, x->seen_cap, (size_t)id + 1)) return lpx_fail(x->ctx, "out of memory");
  x->seen[id] = (seen){ x->texts.n, x->item.n, k };
  if (lpx_buf_put(&x->texts, x->item.p, x->item.n) < 0) return lpx_fail(x->ctx, "out of memory");
  return 1;
}

/* Is an unnamed declaration's text new (1) or written before (0)? */
static int fresh_decl(mx *x)
{
  size_t before = x->decls.n;
  if (lpx_strtab_intern(&x->decls, x->item.p, x->item.n) < 0) return lpx_fail(x->ctx, "out of memory");
  return x->decls.n > before;
}

/* Write a declaration of module k (a variable or a top-level statement). */
static int put_decl(mx *x, const char *name, int32_t k)
{
  int fresh = name ? fresh_named(x, name, "variable", k) : fresh_decl(x);
  if (fresh <= 0) return fresh;
  int rc = flush_item(x, !x->last_decl);
  x->last_decl = 1;
  return rc;
}

/* Write module k's variables, declarations and functions in order. */
static int put_module(mx *x, const lpx_module *m, int32_t k, int line_info, const int32_t *map)
{
  int rc = 0;
  for (size_t i = 0; i < m->nvars && rc >= 0; i++) {
    if (m->vars[i].in_text) continue;
    x->item.n = 0;
    lpx_emit_var(&x->item, m, &m->vars[i], "");
    rc = put_decl(x, lpx_strtab_get(&m->syms, m->vars[i].sym), k);
  }
  for (size_t i = 0; i < m->ntop && rc >= 0; i++) {
    const lpx_item *it = &m->top[i];
    x->item.n = 0;
    if (it->kind == LPX_ITEM_DIR) {
      if (lpx_emit_decl(&x->item, m, it)) rc = put_decl(x, decl_name(m, it), k);
    } else if (it->kind == LPX_ITEM_FUNC && (size_t)it->form < m->nfuncs) {
      const lpx_func *f = &m->funcs[it->form];
      lpx_emit_func(&x->item, m, f, line_info, map);
      rc = fresh_named(x, lpx_strtab_get(&m->syms, f->sym), f->is_entry ? "kernel" : ".func", k);
      if (rc > 0) { rc = flush_item(x, 1); x->last_decl = 0; }
    }
  }
  return rc < 0 ? -1 : 0;
}

/* Write the header and the merged .file table. */
static void put_header(mx *x, const lpx_module *m, int any_lines)
{
  lpx_buf *b = x->out;
  lpx_buf_puts(b, "//\n// Generated by luaptx\n//\n\n");
  lpx_buf_printf(b, ".version %d.%d\n.target %s%s\n.address_size %d\n",
                 m->ptx_version / 10, m->ptx_version % 10, m->target, m->target_mods, m->address_size);
  for (size_t i = 0; any_lines && i < x->files.n; i++)
    lpx_buf_printf(b, "\t.file\t%d \"%s\"\n", (int)i + 1, lpx_strtab_get(&x->files, (int32_t)i));
}

/* Free the merge's own memory (the output stays with the first module). */
static void mx_free(mx *x)
{
  lpx_buf_free(&x->item); lpx_buf_free(&x->texts);
  lpx_strtab_free(&x->names); lpx_strtab_free(&x->decls); lpx_strtab_free(&x->files);
  free(x->seen);
}

/* Merge and emit the n traced modules (labels name their kernels in
 * messages; line_info[k]: write module k's .loc lines) as one PTX module;
 * the text stays owned by mods[0]. */
int32_t lpx_merge_emit(lpx_module **mods, const char **labels, const int32_t *line_info, int32_t n, const char **text, size_t *len)
{
  if (n < 1) return -1;
  mx x = { .ctx = mods[0]->ctx, .out = &mods[0]->out, .labels = labels };
  int32_t **maps = calloc((size_t)n, sizeof *maps);
  int rc = maps ? 0 : lpx_fail(x.ctx, "out of memory"), any_lines = 0;
  for (int32_t k = 1; k < n && !rc; k++) rc = headers_agree(&x, mods, k);
  for (int32_t k = 0; k < n && !rc; k++) {
    any_lines |= line_info[k];
    if (line_info[k] && map_files(&x, mods[k], &maps[k])) rc = lpx_fail(x.ctx, "out of memory");
  }
  if (!rc) {
    x.out->n = 0;
    put_header(&x, mods[0], any_lines);
    for (int32_t k = 0; k < n && !rc; k++) rc = put_module(&x, mods[k], k, line_info[k], maps[k]);
  }
  if (!rc && !x.out->p) rc = lpx_fail(x.ctx, "out of memory");
  for (int32_t k = 0; maps && k < n; k++) free(maps[k]);
  free(maps);
  mx_free(&x);
  if (rc) return -1;
  *text = x.out->p;
  *len = x.out->n;
  return 0;
}
