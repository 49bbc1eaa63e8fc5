/* The PTX -> Lua transpiler: prints a kernel script (pyptx DSL) from a
 * parsed module. Each .entry becomes `kernel "name" { ... }` with its
 * params as raw_params, its directives as options, nvcc-numbered registers
 * as reg arrays (r[12] is %r12) and one ptx.inst call per instruction.
 * What the DSL cannot say operand by operand (named registers, [addr]
 * lists, symbol offsets) is kept as ptx.raw text of that one statement;
 * debug lines (.loc, .file) are dropped; module-level constructs the DSL
 * has no face for (.func, initialized globals, DWARF sections) are refused
 * with a message naming them; other module-level declarations (globals
 * with initializers, .extern declarations) go through ptx.raw_module. */
#include "lpx_parse.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_prefix[LPX_RC__COUNT] = {
#define X(id, decl, prefix) prefix,
  LPX_REGCLASSES(X)
#undef X
};

/* What the printer needs while writing one kernel. */
typedef struct tx {
  lpx_buf *b;
  lpx_module *m;
  const lpx_func *f;
  int32_t *number;        /* per register: its nvcc number, or 0 when named */
  int32_t count[LPX_RC__COUNT];   /* highest number per register class */
  int32_t type[LPX_RC__COUNT];    /* declared type per class */
  int32_t order[LPX_RC__COUNT], norder;   /* classes in .reg declaration order */
} tx;

static int tok_is(const lpx_module *m, uint32_t k, const char *w);

/* ------------------------------------------------------------- registers */

/* The nvcc number of register r ("%rd12" of class B64 -> 12), or 0. */
static int32_t reg_number(const lpx_module *m, const lpx_func *f, int32_t r)
{
  if ((size_t)r >= f->nreg_names || f->reg_name[r] < 0) return 0;
  const char *name = lpx_strtab_get(&m->syms, f->reg_name[r]);
  const char *prefix = class_prefix[lpx_types[f->reg_type[r]].regclass];
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) || !name[n] || name[n] == '0' || strlen(name + n) > 7) return 0;
  for (const char *p = name + n; *p; p++) if (*p < '0' || *p > '9') return 0;
  return (int32_t)strtol(name + n, NULL, 10);
}

/* Number every register and find each class's array size and type. A
 * class whose registers mix types stays named (raw) as a whole. */
static void number_registers(tx *x)
{
  const lpx_func *f = x->f;
  for (int c = 0; c < LPX_RC__COUNT; c++) x->type[c] = -1;
  for (size_t r = 0; r < f->nregs; r++) {
    int32_t k = reg_number(x->m, f, (int32_t)r), c = lpx_types[f->reg_type[r]].regclass;
    x->number[r] = k;
    if (!k) continue;
    if (x->type[c] >= 0 && x->type[c] != f->reg_type[r]) x->type[c] = -2;
    else if (x->type[c] == -1) x->type[c] = f->reg_type[r];
    if (k > x->count[c]) x->count[c] = k;
  }
  for (size_t r = 0; r < f->nregs; r++)
    if (x->number[r] && x->type[lpx_types[f->reg_type[r]].regclass] == -2) x->number[r] = 0;
}

/* Note a declared range %p<N> of class c: its size and first place. */
static void note_range(tx *x, int c, int32_t n)
{
  int seen = 0;
  for (int k = 0; k < x->norder; k++) seen |= x->order[k] == c;
  if (!seen) x->order[x->norder++] = c;
  if (n - 1 > x->count[c]) x->count[c] = n - 1;
}

/* Take array sizes and their order from the .reg ranges (nvcc declares
 * %p<3> when it uses %p1 and %p2 only; tracing must declare the same). */
static void scan_ranges(tx *x)
{
  const lpx_module *m = x->m;
  for (size_t i = 0; i < x->f->nitems; i++) {
    const lpx_item *it = &x->f->items[i];
    if (it->kind != LPX_ITEM_DIR || it->nlex < 5 || !tok_is(m, it->lex, ".reg")) continue;
    int32_t type = -1;
    for (uint32_t k = it->lex + 1; k + 2 < it->lex + it->nlex; k++) {
      const char *s = lpx_strtab_get(&m->syms, m->lex[k].spell);
      if (s[0] == '.' && lpx_type_lookup(s + 1) >= 0) type = lpx_type_lookup(s + 1);
      if (type < 0 || !tok_is(m, k + 1, "<")) continue;
      int c = lpx_types[type].regclass;
      if (x->type[c] == type && !strcmp(s, class_prefix[c]))
        note_range(x, c, (int32_t)strtol(lpx_strtab_get(&m->syms, m->lex[k + 2].spell), NULL, 10));
    }
  }
}

/* The Lua array name of a register class ("%rd" -> "rd"). */
static const char *class_var(int c) { return class_prefix[c] + 1; }

/* ------------------------------------------------------------- operands */

/* Can the operand at i (and its children) be written as a Lua value? */
static int operand_ok(const tx *x, const lpx_operand *ops, uint32_t *i)
{
  const lpx_operand *o = &ops[(*i)++];
  int ok = 1;
  switch (o->kind) {
  case LPX_OPD_REG: return x->number[o->id] != 0;
  case LPX_OPD_SYM: return o->ival == 0;
  case LPX_OPD_ADDR: return o->aux == LPX_OPD_SYM || o->aux == 0 || (o->aux == LPX_OPD_REG && x->number[o->id]);
  case LPX_OPD_BRACKET: case LPX_OPD_NUM: return 0;
  case LPX_OPD_VEC: case LPX_OPD_PAREN:
    for (int k = 0; k < o->aux; k++) ok &= operand_ok(x, ops, i);
    return ok;
  case LPX_OPD_PIPE: ok &= operand_ok(x, ops, i); ok &= operand_ok(x, ops, i); return ok;
  default: return 1;
  }
}

/* Write a register as a Lua expression (r[12], -p[1] when negated). */
static void put_reg(tx *x, int32_t r, int neg)
{
  lpx_buf_printf(x->b, "%s%s[%d]", neg ? "-" : "", class_var(lpx_types[x->f->reg_type[r]].regclass), x->number[r]);
}

/* Write a float immediate's value so ptx.imm gives back the same bits. */
static void put_float(tx *x, const lpx_operand *o)
{
  double v;
  if (o->type == LPX_T_F32) { uint32_t u = (uint32_t)o->ival; float fv; memcpy(&fv, &u, 4); v = fv; }
  else memcpy(&v, &o->ival, 8);
  const char *ty = o->type == LPX_T_F32 ? "f32" : "f64";
  if (isnan(v)) lpx_buf_printf(x->b, "ptx.imm(T.%s, 0/0)", ty);
  else if (isinf(v)) lpx_buf_printf(x->b, "ptx.imm(T.%s, %smath.huge)", ty, v < 0 ? "-" : "");
  else if (o->type == LPX_T_F64) lpx_buf_printf(x->b, "%.17g", v);   /* a number: typed by the instruction */
  else lpx_buf_printf(x->b, "ptx.imm(T.%s, %.17g)", ty, v);
}

/* Write a Lua string literal. */
static void put_string(lpx_buf *b, const char *s)
{
  lpx_buf_putc(b, '"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') lpx_buf_putc(b, '\\');
    lpx_buf_putc(b, *s);
  }
  lpx_buf_putc(b, '"');
}

static void put_operand(tx *x, const lpx_operand *ops, uint32_t *i);

/* Write n children as a comma-separated list. */
static void put_children(tx *x, const lpx_operand *ops, uint32_t *i, int n)
{
  for (int k = 0; k < n; k++) {
    if (k) lpx_buf_puts(x->b, ", ");
    put_operand(x, ops, i);
  }
}

/* Write the operand at *i as a Lua expression; advance *i past it. */
static void put_operand(tx *x, const lpx_operand *ops, uint32_t *i)
{
  const lpx_operand *o = &ops[(*i)++];
  const char *name = o->kind == LPX_OPD_SYM || o->kind == LPX_OPD_LABEL || (o->kind == LPX_OPD_ADDR && o->aux == LPX_OPD_SYM)
                   ? lpx_strtab_get(&x->m->syms, o->id) : NULL;
  switch (o->kind) {
  case LPX_OPD_REG: put_reg(x, o->id, o->aux); break;
  case LPX_OPD_INT: case LPX_OPD_IMM:   /* int64 cdata: an exact integer literal, as parsed */
    if (o->kind == LPX_OPD_INT && o->aux) lpx_buf_printf(x->b, "0x%016" PRIx64 "ULL", (uint64_t)o->ival);
    else if (o->ival > -9007199254740992LL && o->ival < 9007199254740992LL) { lpx_buf_puti(x->b, o->ival); lpx_buf_puts(x->b, "LL"); }
    else lpx_buf_printf(x->b, "0x%016" PRIx64 "ULL", (uint64_t)o->ival);
    break;
  case LPX_OPD_FIMM: put_float(x, o); break;
  case LPX_OPD_SPECIAL: lpx_buf_printf(x->b, "S\"%s\"", lpx_special_name(o->id)); break;
  case LPX_OPD_SYM: put_string(x->b, name); break;
  case LPX_OPD_LABEL: lpx_buf_puts(x->b, "L"); put_string(x->b, name); break;
  case LPX_OPD_SINK: lpx_buf_puts(x->b, "ptx.sink"); break;
  case LPX_OPD_ADDR:
    lpx_buf_puts(x->b, "ptx.addr(");
    if (o->aux == 0) { lpx_buf_puti(x->b, o->ival); lpx_buf_putc(x->b, ')'); break; }
    if (name) put_string(x->b, name); else put_reg(x, o->id, 0);
    if (o->ival) { lpx_buf_puts(x->b, ", "); lpx_buf_puti(x->b, o->ival); }
    lpx_buf_putc(x->b, ')');
    break;
  case LPX_OPD_VEC: lpx_buf_putc(x->b, '{'); put_children(x, ops, i, o->aux); lpx_buf_putc(x->b, '}'); break;
  case LPX_OPD_PAREN: lpx_buf_puts(x->b, "ptx.paren("); put_children(x, ops, i, o->aux); lpx_buf_putc(x->b, ')'); break;
  case LPX_OPD_PIPE: lpx_buf_puts(x->b, "ptx.pipe("); put_children(x, ops, i, 2); lpx_buf_putc(x->b, ')'); break;
  default: lpx_buf_puts(x->b, "nil"); break;
  }
}

/* ------------------------------------------------------------- statements */

/* Write ptx.raw[[text]] for one statement's canonical text. */
static void put_raw(tx *x, const char *text, size_t n)
{
  while (n && (text[n - 1] == '\n' || text[n - 1] == '\t')) n--;
  while (n && text[0] == '\t') { text++; n--; }
  lpx_buf_puts(x->b, "    ptx.raw[==[");
  lpx_buf_put(x->b, text, n);
  lpx_buf_puts(x->b, "]==]\n");
}

/* Write an item as ptx.raw of its canonical text. */
static void put_item_raw(tx *x, const lpx_item *it)
{
  lpx_buf tmp = { 0 };
  lpx_emit_item(&tmp, x->m, x->f, it);
  if (tmp.p) put_raw(x, tmp.p, tmp.n);
  lpx_buf_free(&tmp);
}

/* Write one instruction: ptx.inst("op", ...) or ptx.raw when needed. */
static void put_inst(tx *x, const lpx_item *it)
{
  const lpx_operand *ops = x->f->ops;
  int ok = it->guard < 0 || x->number[it->guard];
  for (uint32_t i = it->ops; i < it->ops + it->nops && ok;) ok = operand_ok(x, ops, &i);
  if (!ok) { put_item_raw(x, it); return; }
  lpx_buf_puts(x->b, "    ");
  lpx_buf_puts(x->b, "ptx.");
  if (it->guard >= 0) { lpx_buf_puts(x->b, "at("); put_reg(x, it->guard, it->guard_neg); lpx_buf_puts(x->b, ")."); }
  lpx_buf_puts(x->b, "inst(");
  put_string(x->b, lpx_strtab_get(&x->m->ctx->form_names, it->form));
  for (uint32_t i = it->ops; i < it->ops + it->nops;) {
    lpx_buf_puts(x->b, ", ");
    put_operand(x, ops, &i);
  }
  lpx_buf_puts(x->b, ")\n");
}

/* Is token k of the module the word w? */
static int tok_is(const lpx_module *m, uint32_t k, const char *w)
{
  return strcmp(lpx_strtab_get(&m->syms, m->lex[k].spell), w) == 0;
}

/* Does a .reg item declare only ranges the reg arrays cover (%r<N> of a
 * type whose class prefix is %r and whose class has one type)? */
static int reg_decl_covered(const tx *x, const lpx_item *it)
{
  int32_t type = -1;
  for (uint32_t k = it->lex; k < it->lex + it->nlex; k++) {
    const lpx_lex *l = &x->m->lex[k];
    const char *s = lpx_strtab_get(&x->m->syms, l->spell);
    if (l->role == LPX_LEX_REG) return 0;   /* a named register */
    if (s[0] == '.' && lpx_type_lookup(s + 1) >= 0) type = lpx_type_lookup(s + 1);
    if (k + 1 < it->lex + it->nlex && strcmp(lpx_strtab_get(&x->m->syms, x->m->lex[k + 1].spell), "<") == 0) {
      if (type < 0) return 0;
      int c = lpx_types[type].regclass;
      if (strcmp(s, class_prefix[c]) || (x->type[c] >= 0 && x->type[c] != type) || x->type[c] == -2) return 0;
    }
  }
  return 1;
}

/* Write one body item. */
static void put_item(tx *x, const lpx_item *it)
{
  if (it->kind == LPX_ITEM_LABEL) {
    lpx_buf_puts(x->b, "    ptx.label(");
    put_string(x->b, lpx_strtab_get(&x->m->syms, it->form));
    lpx_buf_puts(x->b, ")\n");
  } else if (it->kind == LPX_ITEM_INST) {
    put_inst(x, it);
  } else if (it->kind == LPX_ITEM_DIR && it->nlex) {
    if (tok_is(x->m, it->lex, ".loc") || tok_is(x->m, it->lex, ".file")) return;   /* debug lines point at PTX */
    if (tok_is(x->m, it->lex, ".reg") && reg_decl_covered(x, it)) return;
    put_item_raw(x, it);
  } else {
    put_item_raw(x, it);
  }
}

/* Write a module-level declaration as ptx.raw_module[[...]]. */
static void put_module_decl(tx *x, const lpx_item *it)
{
  lpx_buf tmp = { 0 };
  lpx_fmt_tokens(&tmp, x->m, it->lex, it->nlex, NULL);
  lpx_buf_puts(x->b, "    ptx.raw_module[==[");
  if (tmp.p) lpx_buf_put(x->b, tmp.p, tmp.n);
  lpx_buf_puts(x->b, "]==]\n");
  lpx_buf_free(&tmp);
}

/* ---------------------------------------------------------------- kernels */

/* Write the options taken from the entry's directives (block, cluster, ...). */
static void put_directives(tx *x)
{
  int have_maxntid = 0;
  lpx_buf raw = { 0 };
  for (size_t i = 0; i < x->f->ndirectives; i++) {
    const char *d = lpx_strtab_get(&x->m->syms, x->f->directives[i]);
    int a = 1, b = 1, c = 1;
    if (sscanf(d, ".maxntid %d , %d , %d", &a, &b, &c) >= 1) {
      lpx_buf_printf(x->b, "  block = { %d, %d, %d },\n", a, b, c);
      have_maxntid = 1;
    } else if (sscanf(d, ".reqntid %d , %d , %d", &a, &b, &c) >= 1) {
      lpx_buf_printf(x->b, "  block = { %d, %d, %d }, reqntid = { %d, %d, %d },\n", a, b, c, a, b, c);
      have_maxntid = 1;
    } else {
      char word[64];
      const char *sp = strchr(d, ' ');
      snprintf(word, sizeof word, "%.*s", (int)(sp ? sp - d : (long)strlen(d)), d);
      lpx_buf_puts(&raw, "    { ");
      put_string(&raw, word);
      lpx_buf_puts(&raw, ", ");
      put_string(&raw, sp ? sp + 1 : "");
      lpx_buf_puts(&raw, " },\n");
    }
  }
  if (!have_maxntid) lpx_buf_puts(x->b, "  maxntid = false,   -- the PTX names no .maxntid\n");
  if (raw.n) { lpx_buf_puts(x->b, "  raw_directives = {\n"); lpx_buf_put(x->b, raw.p, raw.n); lpx_buf_puts(x->b, "  },\n"); }
  lpx_buf_free(&raw);
}

/* Write raw_params = { { "u64", "name" }, { "b8", "desc", align = 64, count = 128 } }. */
static void put_params(tx *x)
{
  if (!x->f->nparams) return;
  lpx_buf_puts(x->b, "  raw_params = {\n");
  for (size_t i = 0; i < x->f->nparams; i++) {
    const lpx_param *p = &x->f->params[i];
    lpx_buf_printf(x->b, "    { \"%s\", ", lpx_type_name(p->type));
    put_string(x->b, lpx_strtab_get(&x->m->syms, p->sym));
    if (p->align) lpx_buf_printf(x->b, ", align = %d", p->align);
    if (p->count) lpx_buf_printf(x->b, ", count = %d", p->count);
    lpx_buf_puts(x->b, " },\n");
  }
  lpx_buf_puts(x->b, "  },\n");
}

/* Write one kernel "name" { options, function() body end }. */
static void put_kernel(lpx_buf *b, lpx_module *m, const lpx_func *f, const lpx_item *decls, size_t ndecls)
{
  tx x = { b, m, f, calloc(f->nregs + 1, sizeof(int32_t)), { 0 }, { 0 }, { 0 }, 0 };
  number_registers(&x);
  scan_ranges(&x);
  lpx_buf_puts(b, "M.kernels[#M.kernels + 1] = kernel ");
  put_string(b, lpx_strtab_get(&m->syms, f->sym));
  lpx_buf_printf(b, " {\n  arch = \"%s\", version = \"%d.%d\",\n", m->target, m->ptx_version / 10, m->ptx_version % 10);
  put_directives(&x);
  put_params(&x);
  lpx_buf_puts(b, "  function()\n");
  for (int c = 0; c < LPX_RC__COUNT; c++)   /* used, never declared by a range: last */
    if (x.count[c] && x.type[c] >= 0) note_range(&x, c, 0);
  for (int k = 0; k < x.norder; k++) {
    int c = x.order[k];
    if (x.count[c] && x.type[c] >= 0)
      lpx_buf_printf(b, "    local %s = numbered(T.%s, %d)\n", class_var(c), lpx_type_name(x.type[c]), x.count[c]);
  }
  for (size_t i = 0; i < ndecls; i++) put_module_decl(&x, &decls[i]);
  for (size_t i = 0; i < f->nitems; i++) put_item(&x, &f->items[i]);
  lpx_buf_puts(b, "  end,\n}\n\n");
  free(x.number);
}

/* ---------------------------------------------------------------- modules */

/* How the transpiler carries a top-level item: 0 drop (header, debug),
 * 1 the kernel itself, 2 ptx.raw_module; -1 (with why) it cannot. */
static int top_kind(lpx_module *m, const lpx_item *it, char *why, size_t cap)
{
  static const char *const dropped[] = { ".version", ".target", ".address_size", ".file", ".section", "@@DWARF", NULL };
  if (it->kind == LPX_ITEM_FUNC) {
    if (m->funcs[it->form].is_entry) return 1;
    snprintf(why, cap, ".func %s (device function definitions have no DSL form yet)", lpx_strtab_get(&m->syms, m->funcs[it->form].sym));
    return -1;
  }
  for (int i = 0; dropped[i]; i++) if (tok_is(m, it->lex, dropped[i])) return 0;
  return 2;
}

/* Write the script's preamble: requires and the numbered-register helper. */
static void put_preamble(lpx_buf *b, const char *source)
{
  lpx_buf_printf(b, "-- Transpiled from %s by `luaptx transpile`. Tracing it re-emits the\n"
                    "-- module's kernels (luaptx ptx this.lua); registers r[i] are %%ri.\n", source);
  lpx_buf_puts(b, "local pyptx = require \"pyptx\"\n"
                  "local kernel, reg, ptx, T = pyptx.kernel, pyptx.reg, pyptx.ptx, pyptx.types\n"
                  "local operands = require \"pyptx.operands\"\n"
                  "local S, L = operands.special, operands.label_ref\n\n"
                  "--- n registers of a type numbered like nvcc's: v[i] is the i-th (1-based).\n"
                  "local function numbered(ty, n)\n"
                  "  local a, v = reg.array(ty, n), {}\n"
                  "  for i = 1, n do v[i] = a[i - 1] end\n"
                  "  return v\n"
                  "end\n\n"
                  "local M = { kernels = {} }\n\n");
}

/* Transpile a parsed module into a Lua kernel script (the text stays owned
 * by the module). Fails naming the first construct it cannot carry. */
int32_t lpx_transpile(lpx_module *m, const char *source, const char **text, size_t *len)
{
  char why[256];
  size_t ndecls = 0;
  lpx_item *decls = calloc(m->ntop + 1, sizeof(lpx_item));
  if (!decls) return lpx_fail(m->ctx, "out of memory");
  for (size_t i = 0; i < m->ntop; i++) {
    int kind = top_kind(m, &m->top[i], why, sizeof why);
    if (kind < 0) { free(decls); return lpx_fail(m->ctx, "transpile: cannot carry %s", why); }
    if (kind == 2) decls[ndecls++] = m->top[i];
  }
  if (m->address_size != 64) { free(decls); return lpx_fail(m->ctx, "transpile: .address_size %d (the DSL emits 64)", m->address_size); }
  lpx_buf *b = &m->out;
  b->n = 0;
  put_preamble(b, source ? source : "PTX");
  for (size_t i = 0; i < m->ntop; i++)
    if (m->top[i].kind == LPX_ITEM_FUNC) put_kernel(b, m, &m->funcs[m->top[i].form], decls, ndecls);
  lpx_buf_puts(b, "return M\n");
  free(decls);
  if (!b->p) return lpx_fail(m->ctx, "out of memory");
  *text = b->p;
  *len = b->n;
  return 0;
}
