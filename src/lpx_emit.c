/* The PTX text emitter: deterministic, nvcc-style register declarations,
 * one instruction per line, optional .file/.loc pointing at Lua lines. */
#include "lpx_internal.h"
#include "lpx_rules.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const class_decl[LPX_RC__COUNT] = {
#define X(id, decl, prefix) decl,
  LPX_REGCLASSES(X)
#undef X
};
/* nvcc declares register classes in this order. */
static const int class_order[LPX_RC__COUNT] = {
  LPX_RC_PRED, LPX_RC_B16, LPX_RC_B32, LPX_RC_F32, LPX_RC_B64, LPX_RC_F64, LPX_RC_B128
};

/* ------------------------------------------------------------ operands */

/* Write a register's name, e.g. %r12 (a parsed register keeps its own). */
static void put_reg(lpx_buf *b, const lpx_module *m, const lpx_func *f, int32_t reg)
{
  lpx_put_reg(b, m, f, reg);
}

/* Write a symbol with an optional signed offset (sym+8, sym+-8). */
static void put_sym_offset(lpx_buf *b, const lpx_module *m, int32_t sym, int64_t off)
{
  lpx_buf_putsym(b, &m->syms, sym);
  if (off) { lpx_buf_putc(b, '+'); lpx_buf_puti(b, off); }
}

/* Write a typed integer immediate: signed types signed, others unsigned. */
static void put_imm(lpx_buf *b, const lpx_operand *o)
{
  char kind = o->type >= 0 && o->type < LPX_T__COUNT ? lpx_types[o->type].kind : 'S';
  int bits = o->type >= 0 && o->type < LPX_T__COUNT ? lpx_types[o->type].bits : 64;
  if (kind == 'S' || o->ival >= 0) { lpx_buf_puti(b, o->ival); return; }
  uint64_t u = (uint64_t)o->ival;
  if (bits < 64) u &= ((uint64_t)1 << bits) - 1;
  lpx_buf_putu(b, u);
}

/* Write a list of n child operands starting at *i, separated by ", ". */
static void put_list(lpx_buf *b, const lpx_module *m, const lpx_func *f,
                     const lpx_operand *ops, uint32_t *i, int n, const char *sep)
{
  for (int k = 0; k < n; k++) {
    if (k) lpx_buf_puts(b, sep);
    lpx_emit_operand(b, m, f, ops, i);
  }
}

/* Write the operand at ops[*i] and advance *i past it and its children. */
void lpx_emit_operand(lpx_buf *b, const lpx_module *m, const lpx_func *f, const lpx_operand *ops, uint32_t *i)
{
  const lpx_operand *o = &ops[(*i)++];
  char tmp[40];
  switch (o->kind) {
  case LPX_OPD_REG:
    if (o->aux) lpx_buf_putc(b, o->aux == LPX_REG_NEG ? '-' : '!');
    put_reg(b, m, f, o->id);
    if (o->ival) { lpx_rules_sel_text(o->ival, tmp, sizeof tmp); lpx_buf_puts(b, tmp); }
    break;
  case LPX_OPD_IMM: put_imm(b, o); break;
  case LPX_OPD_INT:
    if (o->aux) lpx_buf_printf(b, "%" PRIu64, (uint64_t)o->ival); else lpx_buf_puti(b, o->ival);
    break;
  case LPX_OPD_NUM: snprintf(tmp, sizeof tmp, "%.17g", o->fval); lpx_buf_puts(b, tmp); break;
  case LPX_OPD_FIMM:
    if (o->type == LPX_T_F64) snprintf(tmp, sizeof tmp, "0d%016" PRIX64, (uint64_t)o->ival);
    else snprintf(tmp, sizeof tmp, "0f%08" PRIX32, (uint32_t)o->ival);
    lpx_buf_puts(b, tmp);
    break;
  case LPX_OPD_SPECIAL: lpx_buf_puts(b, lpx_special_name(o->id)); break;
  case LPX_OPD_SYM: put_sym_offset(b, m, o->id, o->ival); break;
  case LPX_OPD_LABEL: lpx_buf_putsym(b, &m->syms, o->id); break;
  case LPX_OPD_SINK: lpx_buf_putc(b, '_'); break;
  case LPX_OPD_ADDR:
    lpx_buf_putc(b, '[');
    if (o->aux == LPX_OPD_REG) {
      put_reg(b, m, f, o->id);
      if (o->ival) { lpx_buf_putc(b, '+'); lpx_buf_puti(b, o->ival); }
    } else if (o->aux == LPX_OPD_SYM) {
      put_sym_offset(b, m, o->id, o->ival);
    } else {   /* an absolute address is unsigned: [4-96] prints as it parses back */
      lpx_buf_printf(b, "%" PRIu64, (uint64_t)o->ival);
    }
    lpx_buf_putc(b, ']');
    break;
  case LPX_OPD_VEC: lpx_buf_putc(b, '{'); put_list(b, m, f, ops, i, o->aux, ", "); lpx_buf_putc(b, '}'); break;
  case LPX_OPD_PAREN: lpx_buf_putc(b, '('); put_list(b, m, f, ops, i, o->aux, ", "); lpx_buf_putc(b, ')'); break;
  case LPX_OPD_PIPE: put_list(b, m, f, ops, i, 2, "|"); break;
  case LPX_OPD_BRACKET: lpx_buf_putc(b, '['); put_list(b, m, f, ops, i, o->aux, ", "); lpx_buf_putc(b, ']'); break;
  default: lpx_buf_puts(b, "/*?*/"); break;
  }
}

/* --------------------------------------------------------------- items */

/* Write one body item (instruction, label or raw line) with its newline. */
void lpx_emit_item(lpx_buf *b, const lpx_module *m, const lpx_func *f, const lpx_item *it)
{
  if (it->kind == LPX_ITEM_LABEL) {
    lpx_buf_putsym(b, &m->syms, it->form);
    lpx_buf_puts(b, ":\n");
    return;
  }
  lpx_buf_putc(b, '\t');
  if (it->kind == LPX_ITEM_DIR) {
    lpx_print_tokens(b, m, it->lex, it->nlex, f);
    lpx_buf_putc(b, '\n');
    return;
  }
  if (it->kind == LPX_ITEM_RAW) {
    lpx_buf_putsym(b, &m->syms, it->form);
    lpx_buf_putc(b, '\n');
    return;
  }
  if (it->guard >= 0) {
    lpx_buf_puts(b, it->guard_neg ? "@!" : "@");
    put_reg(b, m, f, it->guard);
    lpx_buf_putc(b, ' ');
  }
  lpx_buf_putsym(b, &m->ctx->form_names, it->form);
  uint32_t i = it->ops, end = it->ops + it->nops;
  for (int k = 0; i < end; k++) {
    lpx_buf_puts(b, k ? ", " : " \t");
    lpx_emit_operand(b, m, f, f->ops, &i);
  }
  lpx_buf_puts(b, ";\n");
}

/* ------------------------------------------------------- declarations */

/* Write ".visible " / ".extern " / ".weak " for a linkage code. */
static void put_linkage(lpx_buf *b, int linkage)
{
  static const char *const names[] = { "", ".visible ", ".extern ", ".weak ", ".common " };
  if (linkage > 0 && linkage < 5) lpx_buf_puts(b, names[linkage]);
}

/* Write a variable declaration line (module or function scope). */
void lpx_emit_var(lpx_buf *b, const lpx_module *m, const lpx_var *v, const char *indent)
{
  if (v->in_text) return;   /* ptx.raw text: its DIR item prints it */
  lpx_buf_puts(b, indent);
  put_linkage(b, v->linkage);
  lpx_buf_printf(b, ".%s ", lpx_strtab_get(&m->syms, v->space));
  if (v->align) lpx_buf_printf(b, ".align %d ", v->align);
  lpx_buf_printf(b, ".%s %s", lpx_types[v->type].name, lpx_strtab_get(&m->syms, v->sym));
  if (v->count > 0) lpx_buf_printf(b, "[%" PRId64 "]", v->count);
  else if (v->count < 0) lpx_buf_puts(b, "[]");
  lpx_buf_puts(b, ";\n");
}

/* Write one parameter: .param [.align n] .type [.ptr [.space] [.align n]] name[[N]]. */
static void put_param(lpx_buf *b, const lpx_module *m, const lpx_param *p)
{
  lpx_buf_puts(b, p->is_reg ? ".reg " : ".param ");
  if (p->align) lpx_buf_printf(b, ".align %d ", p->align);
  lpx_buf_printf(b, ".%s ", lpx_types[p->type].name);
  if (p->ptr_space >= 0 || p->ptr_align) {
    lpx_buf_puts(b, ".ptr ");
    if (p->ptr_space >= 0) lpx_buf_printf(b, ".%s ", lpx_strtab_get(&m->syms, p->ptr_space));
    if (p->ptr_align > 0) lpx_buf_printf(b, ".align %d ", p->ptr_align);   /* -1: a bare .ptr */
  }
  lpx_buf_puts(b, lpx_strtab_get(&m->syms, p->sym));
  if (p->count > 0) lpx_buf_printf(b, "[%d]", p->count);
}

/* Write a parenthesized parameter list, one per line (inline: on one,
 * as nvcc writes return values). */
static void put_params(lpx_buf *b, const lpx_module *m, const lpx_param *ps, size_t n, int inline_list)
{
  lpx_buf_putc(b, '(');
  for (size_t i = 0; i < n; i++) {
    lpx_buf_puts(b, inline_list ? (i ? ", " : "") : (i ? ",\n\t" : "\n\t"));
    put_param(b, m, &ps[i]);
  }
  lpx_buf_puts(b, n && !inline_list ? "\n)" : ")");
}

/* Write the .reg lines the way nvcc does: one per class, %r<N+1>. */
static void put_regs(lpx_buf *b, const lpx_func *f)
{
  for (int k = 0; k < LPX_RC__COUNT; k++) {
    int c = class_order[k];
    if (!f->class_count[c]) continue;
    lpx_buf_printf(b, "\t.reg .%s \t%s<%d>;\n", class_decl[c], lpx_class_prefix[c], f->class_count[c] + 1);
  }
}

/* Write a function body with .loc lines where the source line changes;
 * file_map (or NULL: as numbered) renumbers the module's files. */
static void put_body(lpx_buf *b, const lpx_module *m, const lpx_func *f, int line_info, const int32_t *file_map)
{
  int32_t last_file = 0, last_line = 0;
  for (size_t i = 0; i < f->nitems; i++) {
    const lpx_item *it = &f->items[i];
    if (line_info && it->kind == LPX_ITEM_INST && it->file > 0 && it->line > 0 &&
        (it->file != last_file || it->line != last_line)) {
      lpx_buf_puts(b, "\t.loc\t");
      lpx_buf_puti(b, file_map ? file_map[it->file - 1] : it->file);
      lpx_buf_putc(b, ' ');
      lpx_buf_puti(b, it->line);
      lpx_buf_puts(b, " 1\n");
      last_file = it->file;
      last_line = it->line;
    }
    lpx_emit_item(b, m, f, it);
  }
}

/* Write one .entry or .func definition (file_map: see put_body). */
void lpx_emit_func(lpx_buf *b, const lpx_module *m, const lpx_func *f, int line_info, const int32_t *file_map)
{
  const char *name = lpx_strtab_get(&m->syms, f->sym);
  if (f->linkage == 1 && f->is_entry) lpx_buf_printf(b, "\t// .globl\t%s\n", name);
  put_linkage(b, f->linkage);
  lpx_buf_puts(b, f->is_entry ? ".entry " : ".func ");
  if (f->nrets) { put_params(b, m, f->rets, f->nrets, 1); lpx_buf_putc(b, ' '); }
  lpx_buf_puts(b, name);
  put_params(b, m, f->params, f->nparams, 0);
  lpx_buf_putc(b, '\n');
  for (size_t i = 0; i < f->ndirectives; i++) lpx_buf_printf(b, "%s\n", lpx_strtab_get(&m->syms, f->directives[i]));
  lpx_buf_puts(b, "{\n");
  put_regs(b, f);
  for (size_t i = 0; i < f->nvars; i++) lpx_emit_var(b, m, &f->vars[i], "\t");
  lpx_buf_putc(b, '\n');
  put_body(b, m, f, line_info, file_map);
  lpx_buf_puts(b, "\n}\n");
}

/* Write one top-level statement added by ptx.raw_module with its newline;
 * 0 (nothing written) for a parsed module's own header lines. */
int lpx_emit_decl(lpx_buf *b, const lpx_module *m, const lpx_item *it)
{
  static const char *const header[] = { ".version", ".target", ".address_size", ".file", NULL };
  if (!it->nlex) return 0;
  for (int k = 0; header[k]; k++)
    if (strcmp(lpx_strtab_get(&m->syms, m->lex[it->lex].spell), header[k]) == 0) return 0;
  lpx_print_tokens(b, m, it->lex, it->nlex, NULL);
  lpx_buf_putc(b, '\n');
  return 1;
}

/* Write top-level statement i, a blank line before the first of a run. */
static void put_top_decl(lpx_buf *b, const lpx_module *m, size_t i)
{
  size_t at = b->n;
  if (i == 0 || m->top[i - 1].kind != LPX_ITEM_DIR) lpx_buf_putc(b, '\n');
  if (!lpx_emit_decl(b, m, &m->top[i])) b->n = at;
}

/* Write the top level in the order it was built: raw_module statements
 * and functions interleaved (a .func must precede the kernels calling it). */
static void put_top(lpx_buf *b, const lpx_module *m, int line_info)
{
  for (size_t i = 0; i < m->ntop; i++) {
    const lpx_item *it = &m->top[i];
    if (it->kind == LPX_ITEM_DIR) put_top_decl(b, m, i);
    else if (it->kind == LPX_ITEM_FUNC && (size_t)it->form < m->nfuncs) {
      lpx_buf_putc(b, '\n');
      lpx_emit_func(b, m, &m->funcs[it->form], line_info, NULL);
    }
  }
}

/* Room for about the whole text (a line per item, a few bytes per operand):
 * the buffer then grows by a copy once at most, not once per doubling. */
static int reserve_text(lpx_buf *b, const lpx_module *m)
{
  size_t bytes = 4096;
  for (size_t i = 0; i < m->nfuncs; i++) bytes += m->funcs[i].nitems * 64 + m->funcs[i].nops * 12;
  return b->cap > bytes ? 0 : lpx_buf_grow(b, bytes);
}

/* Emit the whole module as PTX text; the text stays owned by the module. */
int32_t lpx_emit(lpx_module *m, const lpx_emit_opts *opts, const char **text, size_t *len)
{
  lpx_buf *b = &m->out;
  int line_info = opts ? opts->line_info : 1;
  b->n = 0;
  if (reserve_text(b, m)) return lpx_fail(m->ctx, "out of memory");
  if (!opts || opts->header) lpx_buf_puts(b, "//\n// Generated by luaptx\n//\n\n");
  lpx_buf_printf(b, ".version %d.%d\n.target %s%s\n.address_size %d\n",
                 m->ptx_version / 10, m->ptx_version % 10, m->target, m->target_mods, m->address_size);
  if (line_info)
    for (size_t i = 0; i < m->nfiles; i++)
      lpx_buf_printf(b, "\t.file\t%d \"%s\"\n", (int)i + 1, lpx_strtab_get(&m->syms, m->files[i]));
  size_t shown = 0;
  for (size_t i = 0; i < m->nvars; i++) shown += !m->vars[i].in_text;
  if (shown) lpx_buf_putc(b, '\n');
  for (size_t i = 0; i < m->nvars; i++) lpx_emit_var(b, m, &m->vars[i], "");
  put_top(b, m, line_info);
  if (!b->p) return lpx_fail(m->ctx, "out of memory");
  *text = b->p;
  *len = b->n;
  return 0;
}

/* Emit a single item of a function (for the REPL and inspection). */
int32_t lpx_inst_text(lpx_module *m, int32_t fn, int32_t index, const char **text, size_t *len)
{
  const lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (index < 0 || (size_t)index >= f->nitems) return lpx_fail(m->ctx, "no item %d", index);
  m->out.n = 0;
  lpx_emit_item(&m->out, m, f, &f->items[index]);
  return lpx_module_out(m, text, len);
}
