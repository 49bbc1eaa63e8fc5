/* The PTX -> Lua transpiler: prints a script in the pyptx DSL from a
 * parsed module. The module becomes pyptx.module { ... } with its items in
 * order: module-level declarations as PTX text, each .func as
 * `func "name" { params, returns, function(P) ... end }`, each .entry as
 * `kernel "name" { raw_params, directives as options, function() ... end }`.
 * Every .reg line becomes reg.range / reg.named at its place, so registers
 * are Lua values (r[12] is %r12) and instructions are ptx.inst calls. What
 * the DSL cannot say operand by operand ([addr, {x, y}] lists, symbol
 * offsets, vector registers) is kept as ptx.raw text of that one statement;
 * debug information (.loc, .file, DWARF sections) is dropped: it points at
 * the source the PTX came from, not at the script. */
#include "lpx_parse.h"
#include "lpx_rules.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RX_NONE, RX_RANGE, RX_NAMED, RX_PARAM };

/* A .reg line the script declares: a range %f<6> or a list of names. */
typedef struct rdecl {
  int32_t kind, type, prefix, count;   /* prefix: symbol of "%f" (ranges) */
  char var[48];                        /* the Lua expression of a range ("f", R["%x"]) */
} rdecl;

/* How one register is written in Lua. */
typedef struct rexpr {
  int32_t kind, decl, index;
} rexpr;

/* What the printer needs while writing one function. */
typedef struct tx {
  lpx_buf *b;
  lpx_module *m;
  const lpx_func *f;
  rexpr *reg;                /* per register */
  rdecl *decl; size_t ndecl; /* the .reg lines carried, in order */
  int32_t *item_decl;        /* per body item: its rdecl index, or -1 */
  int use_r, use_n;          /* the R / N tables are needed */
  int nlocal;                /* ranges with a local variable of their own */
  int parts;                 /* the body is long: written in parts (BODY_PART items each) */
} tx;

/* A LuaJIT function holds at most 65536 constants and 60 upvalues: a body
 * of more items is written as parts of BODY_PART items, each a closure
 * seeing at most LOCAL_RANGES range variables (more go into the table R). */
#define BODY_PART 1000
#define LOCAL_RANGES 40
/* A module of more top-level items is written in parts of TOP_PART items
 * (a function holds at most 200 locals: one per .func), and its lists are
 * copied in loops (unpack takes at most a few thousand values). */
#define TOP_PART 100

static int tok_is(const lpx_module *m, uint32_t k, const char *w);

/* ------------------------------------------------------------- registers */

/* Lua words a range's variable must not shadow or be. */
static int reserved(const char *s)
{
  static const char *const words[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in", "local",
    "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", "pyptx", "kernel", "func", "reg",
    "ptx", "T", "S", "L", "M", "N", "P", "R", "items", "prelude", "operands", "math", "string", "table", "part", NULL };
  for (int i = 0; words[i]; i++) if (!strcmp(words[i], s)) return 1;
  return 0;
}

/* Name the Lua variable of range d: the prefix without '%' when it is a
 * free identifier, else an entry of the table R. */
static void name_range(tx *x, rdecl *d)
{
  const char *p = lpx_strtab_get(&x->m->syms, d->prefix), *s = p + (p[0] == '%');
  int ok = (s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')) && !reserved(s) && strlen(s) < 32 && x->nlocal < LOCAL_RANGES;
  for (const char *c = s; *c && ok; c++) ok = *c == '_' || ((*c | 32) >= 'a' && (*c | 32) <= 'z') || (*c >= '0' && *c <= '9');
  for (size_t i = 0; i < x->ndecl && ok; i++) ok = x->decl[i].kind != RX_RANGE || strcmp(x->decl[i].var, s);
  if (ok) { snprintf(d->var, sizeof d->var, "%s", s); x->nlocal++; return; }
  snprintf(d->var, sizeof d->var, "R[\"%.40s\"]", p);
  x->use_r = 1;
}

/* Parse a .reg item's tokens: .reg .type entry, entry, ... ; with entries
 * all ranges (one) or all names. 0 when the script cannot declare it. */
static int parse_reg_item(tx *x, const lpx_item *it, rdecl *d)
{
  const lpx_module *m = x->m;
  uint32_t k = it->lex + 1, end = it->lex + it->nlex;
  const char *ty = k < end ? lpx_strtab_get(&m->syms, m->lex[k].spell) : "";
  if (ty[0] != '.' || lpx_type_lookup(ty + 1) < 0) return 0;   /* .v2 .b32, unknown types */
  memset(d, 0, sizeof *d);
  d->type = lpx_type_lookup(ty + 1);
  int names = 0, ranges = 0;
  for (k++; k < end && !tok_is(m, k, ";"); k++) {
    if (tok_is(m, k, ",")) continue;
    if (m->lex[k].role != LPX_LEX_REG && !(k + 1 < end && tok_is(m, k + 1, "<"))) return 0;
    if (k + 3 < end && tok_is(m, k + 1, "<")) {
      ranges++;
      d->prefix = m->lex[k].spell;
      d->count = (int32_t)strtol(lpx_strtab_get(&m->syms, m->lex[k + 2].spell), NULL, 10);
      k += 3;
    } else names++;
  }
  if (ranges == 1 && names == 0 && d->count > 0) { d->kind = RX_RANGE; return 1; }
  if (ranges == 0 && names > 0) { d->kind = RX_NAMED; d->prefix = (int32_t)it->lex; return 1; }
  return 0;
}

/* Decimal index of name after a range prefix, or -1. */
static int32_t range_index(const char *name, const char *prefix, int32_t count)
{
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) || !name[n] || (name[n] == '0' && name[n + 1]) || strlen(name + n) > 10) return -1;
  for (const char *c = name + n; *c; c++) if (*c < '0' || *c > '9') return -1;
  long v = strtol(name + n, NULL, 10);
  return v < count ? (int32_t)v : -1;
}

/* Find how register r is written: a range member or a .reg param (named
 * ones were marked by their declarations). */
static void map_register(tx *x, int32_t r)
{
  const lpx_func *f = x->f;
  rexpr *e = &x->reg[r];
  if ((size_t)r >= f->nreg_names || f->reg_name[r] < 0 || e->kind != RX_NONE) return;
  int32_t sym = f->reg_name[r];
  const char *name = lpx_strtab_get(&x->m->syms, sym);
  for (size_t i = 0; i < f->nparams; i++)
    if (f->params[i].is_reg && f->params[i].sym == sym) { e->kind = RX_PARAM; return; }
  for (size_t i = 0; i < f->nrets; i++)
    if (f->rets[i].is_reg && f->rets[i].sym == sym) { e->kind = RX_PARAM; return; }
  for (size_t i = 0; i < x->ndecl; i++) {
    const rdecl *d = &x->decl[i];
    if (d->kind != RX_RANGE || d->type != f->reg_type[r]) continue;
    int32_t idx = range_index(name, lpx_strtab_get(&x->m->syms, d->prefix), d->count);
    if (idx >= 0) { e->kind = RX_RANGE; e->decl = (int32_t)i; e->index = idx; return; }
  }
}

/* Collect the .reg lines and map every register of the function. */
static int scan_registers(tx *x)
{
  const lpx_func *f = x->f;
  x->reg = calloc(f->nregs + 1, sizeof *x->reg);
  x->decl = calloc(f->nitems + 1, sizeof *x->decl);
  x->item_decl = malloc((f->nitems + 1) * sizeof *x->item_decl);
  if (!x->reg || !x->decl || !x->item_decl) return -1;
  for (size_t i = 0; i < f->nitems; i++) {
    const lpx_item *it = &f->items[i];
    rdecl *d = &x->decl[x->ndecl];
    x->item_decl[i] = -1;
    if (it->kind != LPX_ITEM_DIR || !it->nlex || !tok_is(x->m, it->lex, ".reg") || !parse_reg_item(x, it, d)) continue;
    if (d->kind == RX_RANGE) name_range(x, d);
    for (uint32_t k = it->lex; d->kind == RX_NAMED && k < it->lex + it->nlex; k++)
      if (x->m->lex[k].role == LPX_LEX_REG && x->m->lex[k].ref >= 0 && (size_t)x->m->lex[k].ref < f->nregs) {
        x->reg[x->m->lex[k].ref].kind = RX_NAMED;   /* this declaration's own register (scopes may reuse names) */
        x->use_n = 1;
      }
    x->item_decl[i] = (int32_t)x->ndecl++;
  }
  for (size_t r = 0; r < f->nregs; r++) map_register(x, (int32_t)r);
  return 0;
}

/* Write a register as a Lua expression (r[12], N["acc"], -p[1]). */
static void put_reg(tx *x, int32_t r, int neg)
{
  const rexpr *e = &x->reg[r];
  const char *name = lpx_strtab_get(&x->m->syms, x->f->reg_name[r]);
  if (neg) lpx_buf_putc(x->b, '-');
  if (e->kind == RX_RANGE) lpx_buf_printf(x->b, "%s[%d]", x->decl[e->decl].var, e->index);
  else lpx_buf_printf(x->b, "%s[\"%s\"]", e->kind == RX_PARAM ? "P" : "N", name);
}

/* Write a video operand: ptx.vsel(r, "b0"), ptx.vneg(r) or both. */
static void put_video_reg(tx *x, const lpx_operand *o)
{
  char sel[16];
  if (o->aux == LPX_REG_NEG) lpx_buf_puts(x->b, "ptx.vneg(");
  if (o->ival) lpx_buf_puts(x->b, "ptx.vsel(");
  put_reg(x, o->id, 0);
  if (o->ival) { lpx_rules_sel_text(o->ival, sel, sizeof sel); lpx_buf_printf(x->b, ", \"%s\")", sel + 1); }
  if (o->aux == LPX_REG_NEG) lpx_buf_putc(x->b, ')');
}

/* Write the Lua declaration of carried .reg line d (item it). */
static void put_reg_decl(tx *x, const lpx_item *it, const rdecl *d)
{
  const lpx_module *m = x->m;
  if (d->kind == RX_RANGE) {
    lpx_buf_printf(x->b, "    %s%s = reg.range(T.%s, \"%s\", %d)\n", d->var[0] == 'R' || x->parts ? "" : "local ", d->var,
                   lpx_type_name(d->type), lpx_strtab_get(&m->syms, d->prefix), d->count);
    return;
  }
  lpx_buf_puts(x->b, "    do\n      local v = reg.named(T.");
  lpx_buf_puts(x->b, lpx_type_name(d->type));
  lpx_buf_puts(x->b, ", {");
  int n = 0;
  for (uint32_t k = it->lex; k < it->lex + it->nlex; k++)
    if (m->lex[k].role == LPX_LEX_REG) lpx_buf_printf(x->b, "%s\"%s\"", n++ ? ", " : " ", lpx_strtab_get(&m->syms, m->lex[k].spell));
  lpx_buf_puts(x->b, " })\n");
  n = 0;
  for (uint32_t k = it->lex; k < it->lex + it->nlex; k++)
    if (m->lex[k].role == LPX_LEX_REG) lpx_buf_printf(x->b, "      N[\"%s\"] = v[%d]\n", lpx_strtab_get(&m->syms, m->lex[k].spell), ++n);
  lpx_buf_puts(x->b, "    end\n");
}

/* ------------------------------------------------------------- operands */

/* Can the operand at i (and its children) be written as a Lua value? */
static int operand_ok(const tx *x, const lpx_operand *ops, uint32_t *i)
{
  const lpx_operand *o = &ops[(*i)++];
  int ok = 1;
  switch (o->kind) {
  case LPX_OPD_REG: return x->reg[o->id].kind != RX_NONE;
  case LPX_OPD_SYM: return 1;
  case LPX_OPD_ADDR: return o->aux == LPX_OPD_SYM || o->aux == 0 || (o->aux == LPX_OPD_REG && x->reg[o->id].kind != RX_NONE);
  case LPX_OPD_NUM: return 0;
  case LPX_OPD_VEC: case LPX_OPD_PAREN: case LPX_OPD_BRACKET:
    for (int k = 0; k < o->aux; k++) ok &= operand_ok(x, ops, i);
    return ok;
  case LPX_OPD_PIPE: ok &= operand_ok(x, ops, i); ok &= operand_ok(x, ops, i); return ok;
  default: return 1;
  }
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
  else lpx_buf_printf(x->b, "ptx.imm(T.%s, %.17g)", ty, v);   /* T.f64 in an f32 instruction stays 0d */
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
  const char *name = lpx_opd_names_symbol(o) ? lpx_strtab_get(&x->m->syms, o->id) : NULL;
  switch (o->kind) {
  case LPX_OPD_REG:
    if (o->ival || o->aux == LPX_REG_NEG) put_video_reg(x, o);
    else put_reg(x, o->id, o->aux);
    break;
  case LPX_OPD_INT: case LPX_OPD_IMM:   /* int64 cdata: an exact integer literal, as parsed */
    if (o->kind == LPX_OPD_INT && o->aux) lpx_buf_printf(x->b, "0x%016" PRIx64 "ULL", (uint64_t)o->ival);
    else if (o->ival > -9007199254740992LL && o->ival < 9007199254740992LL) { lpx_buf_puti(x->b, o->ival); lpx_buf_puts(x->b, "LL"); }
    else lpx_buf_printf(x->b, "0x%016" PRIx64 "ULL", (uint64_t)o->ival);
    break;
  case LPX_OPD_FIMM: put_float(x, o); break;
  case LPX_OPD_SPECIAL: lpx_buf_printf(x->b, "S\"%s\"", lpx_special_name(o->id)); break;
  case LPX_OPD_SYM:
    if (o->ival) { lpx_buf_puts(x->b, "ptx.sym("); put_string(x->b, name); lpx_buf_printf(x->b, ", %" PRId64 ")", o->ival); }
    else put_string(x->b, name);
    break;
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
  case LPX_OPD_BRACKET: lpx_buf_puts(x->b, "ptx.bracket("); put_children(x, ops, i, o->aux); lpx_buf_putc(x->b, ')'); break;
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
  int ok = it->guard < 0 || x->reg[it->guard].kind != RX_NONE;
  for (uint32_t i = it->ops; i < it->ops + it->nops && ok;) ok = operand_ok(x, ops, &i);
  if (!ok) { put_item_raw(x, it); return; }
  lpx_buf_puts(x->b, "    ptx.");
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

/* Write body item i. */
static void put_item(tx *x, size_t i)
{
  const lpx_item *it = &x->f->items[i];
  if (it->kind == LPX_ITEM_LABEL) {
    lpx_buf_puts(x->b, "    ptx.label(");
    put_string(x->b, lpx_strtab_get(&x->m->syms, it->form));
    lpx_buf_puts(x->b, ")\n");
  } else if (it->kind == LPX_ITEM_INST) {
    put_inst(x, it);
  } else if (it->kind == LPX_ITEM_DIR && it->nlex) {
    if (tok_is(x->m, it->lex, ".loc") || tok_is(x->m, it->lex, ".file")) return;   /* debug lines point at the source */
    if (x->item_decl[i] >= 0) put_reg_decl(x, it, &x->decl[x->item_decl[i]]);
    else put_item_raw(x, it);
  } else {
    put_item_raw(x, it);
  }
}

/* Open a long body's parts: each range's local is declared up front
 * (its .reg line assigns it where it stands) and part runs each part. */
static void put_parts_head(tx *x)
{
  for (size_t i = 0; i < x->ndecl; i++)
    if (x->decl[i].kind == RX_RANGE && x->decl[i].var[0] != 'R')
      lpx_buf_printf(x->b, "    local %s   -- set at its .reg line\n", x->decl[i].var);
  lpx_buf_printf(x->b, "    local function part(body) body() end   -- parts of %d statements: a LuaJIT function "
                       "holds at most 65536 constants\n", BODY_PART);
}

/* Write the body of a function: the N/R tables, then every item (in
 * parts when there are more than BODY_PART). */
static void put_body(tx *x)
{
  if (x->use_n && x->use_r) lpx_buf_puts(x->b, "    local N, R = {}, {}   -- named registers, ranges by PTX prefix\n");
  else if (x->use_n) lpx_buf_puts(x->b, "    local N = {}   -- named registers by PTX name\n");
  else if (x->use_r) lpx_buf_puts(x->b, "    local R = {}   -- register ranges by PTX prefix\n");
  if (x->parts) put_parts_head(x);
  for (size_t i = 0; i < x->f->nitems; i++) {
    if (x->parts && i % BODY_PART == 0) lpx_buf_puts(x->b, i ? "  end)\n  part(function()\n" : "  part(function()\n");
    put_item(x, i);
  }
  if (x->parts && x->f->nitems) lpx_buf_puts(x->b, "  end)\n");
}

/* ------------------------------------------------------------- functions */

/* Write the entry's directives as raw_directives in their order (so the
 * PTX keeps them as written), with block taken from .maxntid/.reqntid for
 * launching. */
static void put_directives(tx *x)
{
  int a = 1, b = 1, c = 1;
  for (size_t i = 0; i < x->f->ndirectives; i++) {
    const char *d = lpx_strtab_get(&x->m->syms, x->f->directives[i]);
    if (sscanf(d, ".maxntid %d , %d , %d", &a, &b, &c) >= 1 || sscanf(d, ".reqntid %d , %d , %d", &a, &b, &c) >= 1) break;
  }
  lpx_buf_printf(x->b, "  block = { %d, %d, %d }, maxntid = false,   -- the directives below say it\n", a, b, c);
  if (!x->f->ndirectives) return;
  lpx_buf_puts(x->b, "  raw_directives = {\n");
  for (size_t i = 0; i < x->f->ndirectives; i++) {
    const char *d = lpx_strtab_get(&x->m->syms, x->f->directives[i]), *sp = strchr(d, ' ');
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(sp ? sp - d : (long)strlen(d)), d);
    lpx_buf_puts(x->b, "    { ");
    put_string(x->b, word);
    lpx_buf_puts(x->b, ", ");
    put_string(x->b, sp ? sp + 1 : "");
    lpx_buf_puts(x->b, " },\n");
  }
  lpx_buf_puts(x->b, "  },\n");
}

/* Write one parameter entry { "u64", "name", align = 8, ptr = "global", ... }. */
static void put_param(lpx_buf *b, const lpx_module *m, const lpx_param *p)
{
  lpx_buf_printf(b, "    { \"%s\", ", lpx_type_name(p->type));
  put_string(b, lpx_strtab_get(&m->syms, p->sym));
  if (p->align) lpx_buf_printf(b, ", align = %d", p->align);
  if (p->count) lpx_buf_printf(b, ", count = %d", p->count);
  if (p->is_reg) lpx_buf_puts(b, ", reg = true");
  if (p->ptr_space >= 0) lpx_buf_printf(b, ", ptr = \"%s\"", lpx_strtab_get(&m->syms, p->ptr_space));
  else if (p->ptr_align) lpx_buf_puts(b, ", ptr = true");
  if (p->ptr_align > 0) lpx_buf_printf(b, ", ptr_align = %d", p->ptr_align);
  lpx_buf_puts(b, " },\n");
}

/* Write `key = { entries },` for a parameter list (nothing when empty). */
static void put_param_list(lpx_buf *b, const lpx_module *m, const char *key, const lpx_param *ps, size_t n)
{
  if (!n) return;
  lpx_buf_printf(b, "  %s = {\n", key);
  for (size_t i = 0; i < n; i++) put_param(b, m, &ps[i]);
  lpx_buf_puts(b, "  },\n");
}

/* Write a function's body as `function(args) ... end,`; -1 on OOM. */
static int put_function_body(lpx_buf *b, lpx_module *m, const lpx_func *f, const char *args)
{
  tx x = { b, m, f, NULL, NULL, 0, NULL, 0, 0, 0, f->nitems > BODY_PART };
  int rc = scan_registers(&x);
  if (!rc) {
    lpx_buf_printf(b, "  function(%s)\n", args);
    put_body(&x);
    lpx_buf_puts(b, "  end,\n}\n");
  }
  free(x.reg); free(x.decl); free(x.item_decl);
  return rc;
}

/* Linkage words as pyptx.func options, by lpx_func linkage code. */
static const char *const linkage_name[] = { "", "visible", "extern", "weak", "common" };

/* Write `local fN = func "name" { ... }` for a .func definition. */
static int put_device_func(lpx_buf *b, lpx_module *m, const lpx_func *f, int index)
{
  lpx_buf_printf(b, "local f%d = func ", index);
  put_string(b, lpx_strtab_get(&m->syms, f->sym));
  lpx_buf_puts(b, " {\n");
  if (f->linkage > 0 && f->linkage < 5) lpx_buf_printf(b, "  linkage = \"%s\",\n", linkage_name[f->linkage]);
  put_param_list(b, m, "returns", f->rets, f->nrets);
  put_param_list(b, m, "params", f->params, f->nparams);
  if (f->ndirectives) {
    lpx_buf_puts(b, "  directives = {");
    for (size_t i = 0; i < f->ndirectives; i++) { lpx_buf_puts(b, i ? ", " : " "); put_string(b, lpx_strtab_get(&m->syms, f->directives[i])); }
    lpx_buf_puts(b, " },\n");
  }
  return put_function_body(b, m, f, "P");
}

/* Write target_modifiers = { "texmode_independent", ... } when .target
 * names any. "debug" goes with the debug information the script drops
 * (ptxas refuses a debug target without it). */
static void put_target_modifiers(lpx_buf *b, const lpx_module *m)
{
  lpx_buf words = { 0 };
  char word[96];
  for (const char *p = m->target_mods; *p;) {
    while (*p == ',' || *p == ' ') p++;
    size_t n = strcspn(p, ", ");
    snprintf(word, sizeof word, "%.*s", (int)n, p);
    if (n && strcmp(word, "debug")) lpx_buf_printf(&words, " \"%s\",", word);
    p += n;
  }
  if (words.n) { lpx_buf_puts(b, "  target_modifiers = {"); lpx_buf_put(b, words.p, words.n); lpx_buf_puts(b, " },\n"); }
  lpx_buf_free(&words);
}

/* Write `kernel "name" { options, function() body end }` for an .entry
 * (parts: the module is written in parts, its lists copied in loops). */
static int put_kernel(lpx_buf *b, lpx_module *m, const lpx_func *f, int parts)
{
  tx x = { b, m, f, NULL, NULL, 0, NULL, 0, 0, 0, 0 };
  lpx_buf_puts(b, "M.kernels[#M.kernels + 1] = kernel ");
  put_string(b, lpx_strtab_get(&m->syms, f->sym));
  lpx_buf_printf(b, " {\n  arch = \"%s\", version = \"%d.%d\", line_info = false,\n", m->target, m->ptx_version / 10, m->ptx_version % 10);
  if (m->address_size != 64) lpx_buf_printf(b, "  address_size = %d,\n", m->address_size);
  put_target_modifiers(b, m);
  lpx_buf_puts(b, parts ? "  funcs = copy(prelude),\n" : "  funcs = { unpack(prelude) },\n");
  put_directives(&x);
  put_param_list(b, m, "raw_params", f->params, f->nparams);
  return put_function_body(b, m, f, "");
}

/* ---------------------------------------------------------------- modules */

/* How the transpiler carries a top-level item: 0 drop (header, debug),
 * 1 a function, 2 module-level PTX text. */
static int top_kind(lpx_module *m, const lpx_item *it)
{
  static const char *const dropped[] = { ".version", ".target", ".address_size", ".file", ".section", "@@DWARF", NULL };
  if (it->kind == LPX_ITEM_FUNC) return 1;
  if (!it->nlex) return 0;
  for (int i = 0; dropped[i]; i++) if (tok_is(m, it->lex, dropped[i])) return 0;
  return 2;
}

/* Write a module-level declaration as an item of the module. */
static void put_module_decl(lpx_buf *b, lpx_module *m, const lpx_item *it)
{
  lpx_buf tmp = { 0 };
  lpx_print_tokens(&tmp, m, it->lex, it->nlex, NULL);
  lpx_buf_puts(b, "prelude[#prelude + 1] = [==[");
  if (tmp.p) lpx_buf_put(b, tmp.p, tmp.n);
  lpx_buf_puts(b, "]==]\nitems[#items + 1] = prelude[#prelude]\n\n");
  lpx_buf_free(&tmp);
}

/* Write the script's preamble (parts: the helpers of a module in parts). */
static void put_preamble(lpx_buf *b, const char *source, int parts)
{
  lpx_buf_printf(b, "-- Transpiled from %s by `luaptx transpile`. Tracing it re-emits the\n"
                    "-- module (luaptx ptx this.lua); r[12] is the register %%r12.\n", source);
  lpx_buf_puts(b, "local pyptx = require \"pyptx\"\n"
                  "local kernel, func, reg, ptx, T = pyptx.kernel, pyptx.func, pyptx.reg, pyptx.ptx, pyptx.types\n"
                  "local operands = require \"pyptx.operands\"\n"
                  "local S, L = operands.special, operands.label_ref\n\n"
                  "local M = { kernels = {} }\n"
                  "local items, prelude = {}, {}   -- the module in order; what precedes the next kernel\n\n");
  if (!parts) return;
  lpx_buf_printf(b, "local function part(body) body() end   -- parts of %d items: a LuaJIT function holds at most 200 "
                    "locals and 65536 constants\n"
                    "local function copy(t) local c = {} for i = 1, #t do c[i] = t[i] end return c end\n\n", TOP_PART);
}

/* Write the closing module object (parts: its items copied in a loop). */
static void put_postamble(lpx_buf *b, lpx_module *m, int parts)
{
  lpx_buf_printf(b, "%s {\n  arch = \"%s\", version = \"%d.%d\", address_size = %d, line_info = false,\n",
                 parts ? "local spec =" : "M.module = pyptx.module", m->target, m->ptx_version / 10, m->ptx_version % 10,
                 m->address_size);
  put_target_modifiers(b, m);
  if (parts) lpx_buf_puts(b, "}\nfor i = 1, #items do spec[i] = items[i] end\nM.module = pyptx.module(spec)\n\nreturn M\n");
  else lpx_buf_puts(b, "  unpack(items),\n}\n\nreturn M\n");
}

/* Write one function item; -1 on OOM. */
static int put_function(lpx_buf *b, lpx_module *m, const lpx_func *f, int *nfuncs, int parts)
{
  if (f->is_entry) {
    if (put_kernel(b, m, f, parts)) return -1;
    lpx_buf_puts(b, "items[#items + 1] = M.kernels[#M.kernels]\n\n");
    return 0;
  }
  if (put_device_func(b, m, f, ++*nfuncs)) return -1;
  lpx_buf_printf(b, "prelude[#prelude + 1] = f%d\nitems[#items + 1] = f%d\n\n", *nfuncs, *nfuncs);
  return 0;
}

/* Transpile a parsed module into a Lua script (the text stays owned by
 * the module). */
int32_t lpx_transpile(lpx_module *m, const char *source, const char **text, size_t *len)
{
  lpx_buf *b = &m->out;
  int nfuncs = 0;
  if (!m->target[0] || !m->ptx_version)
    return lpx_fail(m->ctx, "%s: not a PTX module: it has no %s directive (a module starts with .version and .target)",
                    source ? source : "<ptx>", m->ptx_version ? ".target" : ".version");
  b->n = 0;
  size_t carried = 0, done = 0;
  for (size_t i = 0; i < m->ntop; i++) carried += top_kind(m, &m->top[i]) != 0;
  int parts = carried > TOP_PART;
  put_preamble(b, source ? source : "PTX", parts);
  for (size_t i = 0; i < m->ntop; i++) {
    int kind = top_kind(m, &m->top[i]);
    if (!kind) continue;
    if (parts && done % TOP_PART == 0) lpx_buf_puts(b, done ? "end)\npart(function()\n\n" : "part(function()\n\n");
    done++;
    if (kind == 2) put_module_decl(b, m, &m->top[i]);
    else if (put_function(b, m, &m->funcs[m->top[i].form], &nfuncs, parts)) return lpx_fail(m->ctx, "out of memory");
  }
  if (parts) lpx_buf_puts(b, "end)\n\n");
  put_postamble(b, m, parts);
  if (!b->p) return lpx_fail(m->ctx, "out of memory");
  *text = b->p;
  *len = b->n;
  return 0;
}
