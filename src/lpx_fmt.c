/* Printing parsed modules: the lossless emitter rebuilds the source byte
 * for byte by walking the IR (items, operands, registers) and printing each
 * token's trivia and spelling, re-deriving from the IR what the IR owns
 * (register names, opcodes, guards, labels, edited operands); the canonical
 * emitter prints the same IR in the tracer's normalized layout. */
#include "lpx_parse.h"
#include "lpx_sys.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* What a token is printed against: the module, function and item; where
 * the text goes when it is written as it is printed; and, printing a
 * whole module, how far it has come. */
typedef struct fmtx {
  lpx_buf *b;
  const lpx_module *m;
  const lpx_func *f;
  const lpx_item *it;
  lpx_fs_out *out;   /* NULL: the whole text stays in b */
  int canonical;     /* the module is printed in the canonical layout */
  int sep;           /* canonical: the top item before was a function or a header line */
  size_t next;       /* the module's next top item to print */
  size_t open;       /* printing as it parses: the function (index + 1) whose header is out; 0: none */
  int in_decls;      /* canonical: the open function's declarations are still being printed */
  int failed;        /* out of memory (reported) while printing as it parses */
} fmtx;

/* Bytes a writing printer holds before it writes them out: the text never
 * exists whole, so a big file's output costs no fresh pages. */
#define FMT_CHUNK ((size_t)1 << 20)

/* Write out what the buffer holds once it passes at_least bytes (when
 * writing as it prints). */
static void fmt_flush(fmtx *x, size_t at_least)
{
  if (!x->out || x->b->n < at_least) return;
  lpx_fs_out_write(x->out, x->b->p, x->b->n);
  x->b->n = 0;
}

/* ------------------------------------------------------------------ tokens */

/* Text of a module symbol. */
static const char *sym_text(const lpx_module *m, int32_t sym) { return lpx_strtab_get(&m->syms, sym); }

/* Write a token's text against the item being printed (lpx_print.c). */
static void put_text(fmtx *x, const lpx_lex *l) { lpx_print_token(x->b, x->m, x->f, x->it, l); }

/* Write tokens [a, b) with their leading trivia. */
static void put_range(fmtx *x, uint32_t a, uint32_t b)
{
  for (uint32_t k = a; k < b; k++) {
    const lpx_lex *l = &x->m->lex[k];
    if (l->pre >= 0) lpx_buf_putsym(x->b, &x->m->syms, l->pre);
    put_text(x, l);
  }
}

/* Write only the leading trivia of token k. */
static void put_pre(fmtx *x, uint32_t k)
{
  if (x->m->lex[k].pre >= 0) lpx_buf_putsym(x->b, &x->m->syms, x->m->lex[k].pre);
}

/* --------------------------------------------------------------- operands */

/* Does an operand kind have children? */
static int is_compound(int kind)
{
  return kind == LPX_OPD_VEC || kind == LPX_OPD_PAREN || kind == LPX_OPD_PIPE || kind == LPX_OPD_BRACKET;
}

/* Write the operand at *i and the gap tokens before it; advance *i and *t.
 * An operand that still equals its parsed self prints its own tokens; an
 * edited one prints canonically after the original leading trivia. */
static void lossless_operand(fmtx *x, uint32_t *i, uint32_t *t)
{
  const lpx_opd_lex *rec = &x->f->ops_lex[*i];
  const lpx_operand *o = &x->f->ops[*i];
  uint32_t end = rec->first + rec->count;
  put_range(x, *t, rec->first);
  int intact = lpx_operand_digest(o) == rec->digest;
  if (is_compound(o->kind) && intact) {
    int n = o->kind == LPX_OPD_PIPE ? 2 : o->aux;
    *t = rec->first;
    (*i)++;
    for (int c = 0; c < n; c++) lossless_operand(x, i, t);
    put_range(x, *t, end);
  } else if (!is_compound(o->kind) && intact) {
    put_range(x, rec->first, end);
    (*i)++;
  } else {
    put_pre(x, rec->first);
    lpx_emit_operand(x->b, x->m, x->f, x->f->ops, i);
  }
  *t = end;
}

/* ------------------------------------------------------------------ items */

/* Is a parsed instruction's shape (operand count, guard) still as parsed? */
static int inst_intact(const lpx_module *m, const lpx_func *f, const lpx_item *it)
{
  if (!it->nlex || it->nops != it->lex_nops || (size_t)it->ops + it->nops > f->nops_lex) return 0;
  const lpx_lex *l = &m->lex[it->lex];
  int had_guard = l[0].role == LPX_LEX_LIT && strcmp(sym_text(m, l[0].spell), "@") == 0;
  int had_neg = had_guard && it->nlex > 1 && strcmp(sym_text(m, l[1].spell), "!") == 0;
  return had_guard == (it->guard >= 0) && had_neg == (it->guard_neg != 0);
}

/* Write an item canonically in place of its tokens (keeping the first
 * token's trivia), for items the IR has reshaped or that were never parsed. */
static void item_fallback(fmtx *x, const lpx_item *it)
{
  if (!it->nlex) { lpx_emit_item(x->b, x->m, x->f, it); return; }
  lpx_buf tmp = { 0 };
  lpx_emit_item(&tmp, x->m, x->f, it);
  put_pre(x, it->lex);
  size_t a = tmp.n && tmp.p[0] == '\t' ? 1 : 0, n = tmp.n;
  if (n > a && tmp.p[n - 1] == '\n') n--;
  if (n > a) lpx_buf_put(x->b, tmp.p + a, n - a);
  lpx_buf_free(&tmp);
}

/* Write one body item losslessly. */
static void lossless_item(fmtx *x, const lpx_item *it)
{
  x->it = it;
  if (it->kind == LPX_ITEM_INST && !inst_intact(x->m, x->f, it)) item_fallback(x, it);
  else if (!it->nlex) item_fallback(x, it);
  else if (it->kind != LPX_ITEM_INST) put_range(x, it->lex, it->lex + it->nlex);
  else {
    uint32_t t = it->lex, i = it->ops, end = it->ops + it->nops;
    while (i < end) lossless_operand(x, &i, &t);
    put_range(x, t, it->lex + it->nlex);
  }
  x->it = NULL;
}

/* Has the header of function f been printed already (by a body chunk)? */
static int head_out(const fmtx *x, const lpx_func *f)
{
  return x->open == (size_t)(f - x->m->funcs) + 1;
}

/* Write body items [0, n) of f losslessly, writing out full chunks. */
static void lossless_items(fmtx *x, const lpx_func *f, size_t n)
{
  x->f = f;
  for (size_t i = 0; i < n; i++) {
    lossless_item(x, &f->items[i]);
    fmt_flush(x, FMT_CHUNK);
  }
}

/* Write a function: header tokens (unless out already), body items,
 * closing brace. */
static void lossless_func(fmtx *x, const lpx_func *f)
{
  if (!head_out(x, f)) put_range(x, f->head_lex, f->head_lex + f->head_nlex);
  lossless_items(x, f, f->nitems);
  put_range(x, f->tail_lex, f->tail_lex + 1);
  x->f = NULL;
  x->open = 0;
}

/* -------------------------------------------------------------- canonical */

/* Canonical function header: one parameter per line, as the tracer writes. */
static void canonical_head(lpx_buf *b, const lpx_module *m, const lpx_func *f)
{
  fmtx x = { .b = b, .m = m, .f = f };
  int depth = 0, params = 0, after = 0;   /* after: past the parameter list */
  uint32_t end = f->head_lex + f->head_nlex - 1;   /* the '{' is written apart */
  for (uint32_t k = f->head_lex; k < end; k++) {
    const lpx_lex *l = &m->lex[k], *prev = k > f->head_lex ? l - 1 : NULL;
    int open = lpx_token_is(m, l, '('), close = lpx_token_is(m, l, ')');
    if (open && depth == 0) params = prev && l[-1].spell == f->sym;
    if (params && close && depth == 1) lpx_buf_puts(b, "\n");
    else if (params && depth == 1 && prev && (lpx_token_is(m, prev, ',') || lpx_token_is(m, prev, '('))) lpx_buf_puts(b, "\n\t");
    else if (depth == 0 && after && sym_text(m, l->spell)[0] == '.') lpx_buf_puts(b, "\n");
    else if (prev && !(open && prev->spell == f->sym)) lpx_buf_puts(b, lpx_print_gap(m, k > f->head_lex + 1 ? l - 2 : NULL, prev, l));
    depth += open - close;
    after |= params && close && depth == 0;
    put_text(&x, l);
  }
  lpx_buf_puts(b, "\n{\n");
}

/* Directives that open a declaration the tracer writes before the body. */
static const char *const decl_words[] = { ".reg", ".shared", ".local", ".const", ".global", ".param", NULL };

/* Is a body item a declaration (a DIR starting with .reg, .shared, ...)? */
static int is_decl(const lpx_module *m, const lpx_item *it)
{
  if (it->kind != LPX_ITEM_DIR || !it->nlex) return 0;
  for (int i = 0; decl_words[i]; i++)
    if (lpx_token_word(m, it->lex, decl_words[i])) return 1;
  return 0;
}

/* The start of a function the way the tracer writes it: the blank line
 * before it, its .globl comment and header; its declarations come next. */
static void canonical_open(fmtx *x, const lpx_func *f)
{
  lpx_buf_putc(x->b, '\n');
  if (f->is_entry && f->linkage == 1) lpx_buf_printf(x->b, "\t// .globl\t%s\n", sym_text(x->m, f->sym));
  canonical_head(x->b, x->m, f);
  x->in_decls = 1;
}

/* Body items [0, n) of f the tracer's way: declarations, a blank line
 * before the first item that is not one, the rest; full chunks written out. */
static void canonical_items(fmtx *x, const lpx_func *f, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (x->in_decls && !is_decl(x->m, &f->items[i])) {
      lpx_buf_putc(x->b, '\n');
      x->in_decls = 0;
    }
    lpx_emit_item(x->b, x->m, f, &f->items[i]);
    fmt_flush(x, FMT_CHUNK);
  }
}

/* A function the way the tracer writes it: header, declarations, a blank
 * line, the body, a blank line, the closing brace (the header and items
 * before the last ones may be out already). */
static void canonical_func(fmtx *x, const lpx_func *f)
{
  if (!head_out(x, f)) canonical_open(x, f);
  canonical_items(x, f, f->nitems);
  if (x->in_decls) lpx_buf_putc(x->b, '\n');
  lpx_buf_puts(x->b, "\n}\n");
  x->open = 0;
}

/* Is a top item one of the module header lines (.version ... .file)? */
static int is_header_line(const lpx_module *m, const lpx_item *it)
{
  static const char *const words[] = { ".version", ".target", ".address_size", ".file", NULL };
  if (it->kind != LPX_ITEM_DIR || !it->nlex) return 0;
  for (int i = 0; words[i]; i++)
    if (lpx_token_word(m, it->lex, words[i])) return 1;
  return 0;
}

/* Write a top item canonically: a blank line before each function and
 * before a declaration that follows a function or a header line. */
static void canonical_top(fmtx *x, const lpx_item *it)
{
  lpx_buf *b = x->b;
  const lpx_module *m = x->m;
  if (it->kind == LPX_ITEM_FUNC) {
    canonical_func(x, &m->funcs[it->form]);
    x->sep = 1;
    return;
  }
  int header = is_header_line(m, it);
  if (x->sep && !header) lpx_buf_putc(b, '\n');
  if (header && lpx_token_word(m, it->lex, ".file")) lpx_buf_putc(b, '\t');
  lpx_print_tokens(b, m, it->lex, it->nlex, NULL);
  lpx_buf_putc(b, '\n');
  x->sep = header;
}

/* ----------------------------------------------------------- whole modules */

/* Start printing module m into m->out: the canonical banner; room for
 * the whole lossless text at once when it is not written as it goes (nvcc
 * output runs about 5 bytes a token: growing by doubling would copy it and
 * fault fresh pages for every copy; reserved pages left unused are never
 * touched), else for a few chunks. */
static int fmt_begin(fmtx *x, lpx_module *m)
{
  x->m = m;
  x->b = &m->out;
  m->out.n = 0;
  size_t room = x->out ? 2 * FMT_CHUNK : x->canonical ? 0 : m->nlex * 8 + 64;
  if (m->out.cap < room && lpx_buf_grow(&m->out, room)) return lpx_fail(m->ctx, "out of memory");
  if (x->canonical) lpx_buf_puts(&m->out, "//\n// Generated by luaptx\n//\n\n");
  else lpx_buf_put(&m->out, "", 0);
  return 0;
}

/* Print the module's top items not printed yet, writing out full chunks. */
static void fmt_top_items(fmtx *x)
{
  for (; x->next < x->m->ntop; x->next++) {
    const lpx_item *it = &x->m->top[x->next];
    if (x->canonical) canonical_top(x, it);
    else if (it->kind == LPX_ITEM_FUNC) lossless_func(x, &x->m->funcs[it->form]);
    else put_range(x, it->lex, it->lex + it->nlex);
    fmt_flush(x, FMT_CHUNK);
  }
}

/* Finish printing: the trivia before the end of the input (lossless), the
 * last chunk written out. */
static int fmt_end(fmtx *x)
{
  const lpx_module *m = x->m;
  if (!x->canonical && m->eof_pre >= 0) lpx_buf_putsym(x->b, &m->syms, m->eof_pre);
  if (!x->b->p) return lpx_fail(m->ctx, "out of memory");
  fmt_flush(x, 0);
  return 0;
}

/* Print a parsed module (canonical or lossless) into m->out, or through
 * it to x->out. A traced module's text is the emitter's. */
static int32_t fmt_module(fmtx *x, lpx_module *m, const char **text, size_t *len)
{
  if (!m->ntop && m->nfuncs) {   /* traced: its text is the emitter's (and already canonical) */
    if (lpx_emit(m, NULL, text, len)) return -1;
    x->b = &m->out;
    fmt_flush(x, 0);
    return 0;
  }
  if (fmt_begin(x, m)) return -1;
  fmt_top_items(x);
  if (fmt_end(x)) return -1;
  *text = m->out.p;
  *len = m->out.n;
  return 0;
}

/* Emit a parsed module exactly as written (modulo edits made to its IR). */
int32_t lpx_fmt_lossless(lpx_module *m, const char **text, size_t *len)
{
  fmtx x = { .canonical = 0 };
  return fmt_module(&x, m, text, len);
}

/* Emit a parsed module in the tracer's layout: its banner, header lines,
 * a blank line before each group of declarations and each function; no
 * comments. Tracer output comes back unchanged. */
int32_t lpx_fmt_canonical(lpx_module *m, const char **text, size_t *len)
{
  fmtx x = { .canonical = 1 };
  return fmt_module(&x, m, text, len);
}

/* Write a module's text (canonical != 0: the canonical layout) to the file
 * path (standard output when NULL) while printing it, so a big module's
 * text never exists whole in memory; the file is created as
 * lpx_fs_out_open says (atomic when complete, FIFOs in place, no link followed). */
int32_t lpx_fmt_write(lpx_module *m, int32_t canonical, const char *path)
{
  lpx_fs_out *out = lpx_fs_out_open(m->ctx, path);
  if (!out) return -1;
  fmtx x = { .out = out, .canonical = canonical != 0 };
  const char *text;
  size_t len;
  int rc = fmt_module(&x, m, &text, &len);
  m->out.n = 0;
  if (lpx_fs_out_close(m->ctx, out, rc == 0)) return -1;
  return rc;
}

/* Print the body items parsed so far of the function being parsed (its
 * header first, once); the parser then drops them. */
static void fmt_body_part(fmtx *x, const lpx_func *f)
{
  if (!head_out(x, f)) {
    if (x->canonical) canonical_open(x, f);
    else put_range(x, f->head_lex, f->head_lex + f->head_nlex);
    x->open = (size_t)(f - x->m->funcs) + 1;
  }
  if (x->canonical) canonical_items(x, f, f->nitems);
  else lossless_items(x, f, f->nitems);
  x->f = NULL;
}

/* lpx_parse_streamed's hook: print the statement just parsed, or the part
 * of the open function's body parsed so far (the parser then drops it, and
 * the module's top items or the body start again). */
static void fmt_stream_hook(lpx_module *m, const lpx_func *open, void *arg)
{
  fmtx *x = arg;
  if (!x->m && fmt_begin(x, m)) x->failed = 1;
  if (x->failed) return;
  if (open) { fmt_body_part(x, open); return; }
  x->next = 0;
  fmt_top_items(x);
}

/* Parse PTX text (errors named filename) and write it back, lossless or
 * canonical, to path (standard output when NULL) as it is parsed: neither
 * the input's whole IR nor its whole text is ever held, so a big file
 * costs memory for its largest function only. On a parse error nothing
 * is written (the file at path is left as it was). */
int32_t lpx_fmt_file(lpx_ctx *ctx, const char *text, size_t len, const char *filename, int32_t canonical, const char *path)
{
  lpx_fs_out *out = lpx_fs_out_open(ctx, path);
  if (!out) return -1;
  fmtx x = { .out = out, .canonical = canonical != 0 };
  lpx_module *m = lpx_parse_streamed(ctx, text, len, filename, fmt_stream_hook, &x);
  int rc = !m || x.failed ? -1 : (!x.m && fmt_begin(&x, m)) ? -1 : 0;
  if (rc == 0) {
    fmt_top_items(&x);
    rc = fmt_end(&x);
  }
  lpx_module_free(m);
  if (lpx_fs_out_close(ctx, out, rc == 0)) return -1;
  return rc;
}
