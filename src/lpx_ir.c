/* The IR of a PTX module: functions with params, declarations, registers
 * and a flat item list (instructions, labels, raw lines) whose operands
 * live in one side array. Built by the tracer and the PTX parser. */
#include "lpx_internal.h"
#include "lpx_labels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- module */

/* Create a module for a PTX version (x10), target and address size. */
lpx_module *lpx_module_new(lpx_ctx *ctx, int32_t ptx_version, const char *target, int32_t address_size)
{
  int32_t sm, family;
  if (lpx_arch_parse(target, &sm, &family)) {
    lpx_fail(ctx, "unknown target '%s'; expected sm_XY with an optional a/f suffix, e.g. sm_80, sm_90a, sm_100a", target);
    return NULL;
  }
  if (address_size != 32 && address_size != 64) {
    lpx_fail(ctx, "address size %d; valid: 32, 64", address_size);
    return NULL;
  }
  lpx_module *m = calloc(1, sizeof *m);
  if (!m) { lpx_fail(ctx, "out of memory"); return NULL; }
  m->ctx = ctx;
  m->ptx_version = ptx_version;
  m->address_size = address_size;
  m->sm = sm;
  m->family = family;
  snprintf(m->target, sizeof m->target, "%s", target);
  return m;
}

/* The body sizes the last traced function reached, on this thread: a
 * process that traces one kernel after another (a sweep, a benchmark, the
 * REPL) starts the next body's arrays there rather than growing them by
 * copies again. Capped (at about 10 MB of arrays), since a smaller kernel
 * traced after a big one keeps the reservation as long as its module. */
static _Thread_local size_t hint_items, hint_ops;
#define HINT_MAX_ITEMS ((size_t)1 << 16)
#define HINT_MAX_OPS ((size_t)1 << 18)

/* Remember a traced body's sizes (parsed ones, with operand spellings,
 * reserve from their token count instead). */
static void hint_remember(const lpx_func *f)
{
  if (f->ops_lex || !f->nitems) return;
  hint_items = f->nitems < HINT_MAX_ITEMS ? f->nitems : HINT_MAX_ITEMS;
  hint_ops = f->nops < HINT_MAX_OPS ? f->nops : HINT_MAX_OPS;
}

/* Free one function's arrays. */
static void func_free(lpx_func *f)
{
  hint_remember(f);
  for (size_t i = 0; i < f->nvars; i++) { free(f->vars[i].init); free(f->vars[i].relocs); }
  free(f->params); free(f->rets); free(f->directives); free(f->vars);
  free(f->reg_type); free(f->reg_index);
  free(f->items); free(f->ops);
  free(f->reg_name); free(f->ops_lex);
  lpx_lookup_free(f);
}

/* Free a module and everything it owns. */
void lpx_module_free(lpx_module *m)
{
  if (!m) return;
  for (size_t i = 0; i < m->nfuncs; i++) func_free(&m->funcs[i]);
  for (size_t i = 0; i < m->nvars; i++) { free(m->vars[i].init); free(m->vars[i].relocs); }
  free(m->funcs); free(m->vars); free(m->files);
  free(m->top); free(m->lex); free(m->rules_ok); free(m->vmemo);
  lpx_strtab_free(&m->syms);
  lpx_buf_free(&m->out);
  free(m);
}

/* Intern a name (symbol, label, raw text) in the module; -1 on OOM. */
int32_t lpx_sym(lpx_module *m, const char *name)
{
  int32_t id = lpx_strtab_intern(&m->syms, name, strlen(name));
  if (id < 0) lpx_fail(m->ctx, "out of memory");
  return id;
}

/* Register a source file for .file/.loc; returns its 1-based index. */
int32_t lpx_module_file(lpx_module *m, const char *path)
{
  int32_t sym = lpx_sym(m, path);
  if (sym < 0) return -1;
  for (size_t i = 0; i < m->nfiles; i++)
    if (m->files[i] == sym) return (int32_t)i + 1;
  if (LPX_RESERVE(m->files, m->files_cap, m->nfiles + 1)) return lpx_fail(m->ctx, "out of memory");
  m->files[m->nfiles++] = sym;
  return (int32_t)m->nfiles;
}

/* Function fn of a module, or NULL with the error set. */
lpx_func *lpx_func_at(lpx_module *m, int32_t fn)
{
  if (fn >= 0 && (size_t)fn < m->nfuncs) return &m->funcs[fn];
  lpx_fail(m->ctx, "no function %d in module", fn);
  return NULL;
}

/* Open a new .entry (is_entry) or .func; linkage 0 none, 1 .visible, 2 .extern, 3 .weak. */
int32_t lpx_func_begin(lpx_module *m, const char *name, int32_t is_entry, int32_t linkage)
{
  int32_t sym = lpx_sym(m, name);
  if (sym < 0) return -1;
  for (size_t i = 0; i < m->nfuncs; i++)
    if (m->funcs[i].sym == sym) return lpx_fail(m->ctx, "function '%s' is already defined in this module", name);
  if (LPX_RESERVE(m->funcs, m->funcs_cap, m->nfuncs + 1)) return lpx_fail(m->ctx, "out of memory");
  lpx_func *f = &m->funcs[m->nfuncs];
  memset(f, 0, sizeof *f);
  f->sym = sym;
  f->is_entry = is_entry;
  f->linkage = linkage;
  if (LPX_RESERVE(m->top, m->top_cap, m->ntop + 1)) return lpx_fail(m->ctx, "out of memory");
  memset(&m->top[m->ntop], 0, sizeof m->top[0]);   /* its place among raw_module text */
  m->top[m->ntop].kind = LPX_ITEM_FUNC;
  m->top[m->ntop++].form = (int32_t)m->nfuncs;
  return (int32_t)m->nfuncs++;
}

/* Set what .target names after the arch (e.g. "debug", "texmode_independent";
 * comma-separated). */
int32_t lpx_module_target_modifiers(lpx_module *m, const char *mods)
{
  if (strlen(mods) + 2 >= sizeof m->target_mods) return lpx_fail(m->ctx, "target modifiers '%s' are too long", mods);
  snprintf(m->target_mods, sizeof m->target_mods, "%s%s", *mods ? ", " : "", mods);
  return 0;
}

/* Number of top-level items (functions and raw_module statements). */
int32_t lpx_module_top_count(lpx_module *m) { return (int32_t)m->ntop; }

/* Move the top-level items from index `from` on to just before the last
 * function above them: a raw_module statement written inside a body
 * declares what that function uses, so it prints before it. */
int32_t lpx_module_hoist(lpx_module *m, int32_t from)
{
  if (from < 0 || (size_t)from > m->ntop) return lpx_fail(m->ctx, "no top-level item %d", from);
  size_t at = (size_t)from, n = m->ntop - (size_t)from;
  while (at > 0 && m->top[at - 1].kind != LPX_ITEM_FUNC) at--;
  if (at == 0 || n == 0) return 0;
  at--;
  lpx_item *moved = malloc(n * sizeof *moved);
  if (!moved) return lpx_fail(m->ctx, "out of memory");
  memcpy(moved, m->top + from, n * sizeof *moved);
  memmove(m->top + at + n, m->top + at, ((size_t)from - at) * sizeof *moved);
  memcpy(m->top + at, moved, n * sizeof *moved);
  free(moved);
  return 0;
}

/* Name of a function. */
int32_t lpx_func_name(lpx_module *m, int32_t fn, const char **name)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  *name = lpx_strtab_get(&m->syms, f->sym);
  return 0;
}

/* Whether function fn is an .entry, and how many params it declares. */
int32_t lpx_func_info(lpx_module *m, int32_t fn, int32_t *is_entry, int32_t *nparams)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  *is_entry = f->is_entry != 0;
  *nparams = (int32_t)f->nparams;
  return 0;
}

/* Param idx of function fn: its name, type id, .align (0: none) and array
 * count (0: a scalar), as declared. */
int32_t lpx_func_param_info(lpx_module *m, int32_t fn, int32_t idx, const char **name, int32_t *type, int32_t *align,
                            int32_t *count)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (idx < 0 || (size_t)idx >= f->nparams) return lpx_fail(m->ctx, "no param %d in function %d", idx, fn);
  const lpx_param *p = &f->params[idx];
  *name = lpx_strtab_get(&m->syms, p->sym);
  *type = p->type;
  *align = p->align;
  *count = p->count;
  return 0;
}

/* Where each of f's parameters lies in a launch's packed parameter buffer:
 * declaration order, each at its declared .align (else its element size)
 * from offset 0; offsets (nparams slots, or NULL) get them. Returns the
 * buffer's size. The emulator reads this layout and the CUDA device maps
 * it onto the driver's, which aligns relative to its constant bank. */
uint64_t lpx_param_layout(const lpx_func *f, uint32_t *offsets)
{
  uint64_t off = 0;
  for (size_t i = 0; i < f->nparams; i++) {
    const lpx_param *pa = &f->params[i];
    uint64_t el = (uint64_t)(lpx_types[pa->type].bits + 7) / 8;
    uint64_t a = pa->align ? (uint64_t)pa->align : el;
    if (a > 1) off = (off + a - 1) & ~(a - 1);
    if (offsets) offsets[i] = (uint32_t)off;
    off += pa->count > 0 ? el * (uint64_t)pa->count : el;
  }
  return off;
}

/* Append a parameter record to a list (params or return values). */
static int32_t param_push(lpx_module *m, lpx_param **list, size_t *n, size_t *cap, const char *name,
                          int32_t type, int32_t align, int32_t count)
{
  if (type < 0 || type >= LPX_T__COUNT || type == LPX_T_PRED)
    return lpx_fail(m->ctx, "parameter '%s': invalid type", name);
  if (align && (align & (align - 1))) return lpx_fail(m->ctx, "parameter '%s': alignment %d is not a power of two", name, align);
  int32_t sym = lpx_sym(m, name);
  if (sym < 0) return -1;
  if (lpx_grow((void **)list, cap, *n + 1, sizeof(lpx_param))) return lpx_fail(m->ctx, "out of memory");
  (*list)[(*n)++] = (lpx_param){ sym, type, align, count, 0, -1, 0 };
  return (int32_t)*n - 1;
}

/* Add a parameter (count > 0 makes it a .b8 array, e.g. a TMA descriptor). */
int32_t lpx_func_param(lpx_module *m, int32_t fn, const char *name, int32_t type, int32_t align, int32_t count)
{
  lpx_func *f = lpx_func_at(m, fn);
  return f ? param_push(m, &f->params, &f->nparams, &f->params_cap, name, type, align, count) : -1;
}

/* Add a return value of a .func: (.param .b32 name) before its name. */
int32_t lpx_func_return(lpx_module *m, int32_t fn, const char *name, int32_t type, int32_t align, int32_t count)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (f && f->is_entry) return lpx_fail(m->ctx, "return value '%s': a kernel (.entry) returns nothing", name);
  return f ? param_push(m, &f->rets, &f->nrets, &f->rets_cap, name, type, align, count) : -1;
}

/* Give parameter idx (rets when is_ret) its attributes: a .reg parameter,
 * or a pointer's .ptr [.space] [.align n] (space NULL or "" for none). */
int32_t lpx_param_attr(lpx_module *m, int32_t fn, int32_t is_ret, int32_t idx, int32_t is_reg,
                       const char *ptr_space, int32_t ptr_align)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  size_t n = is_ret ? f->nrets : f->nparams;
  if (idx < 0 || (size_t)idx >= n) return lpx_fail(m->ctx, "no parameter %d", idx);
  lpx_param *p = is_ret ? &f->rets[idx] : &f->params[idx];
  if (is_reg && f->is_entry) return lpx_fail(m->ctx, "parameter '%s': .reg parameters are for .func only", lpx_strtab_get(&m->syms, p->sym));
  if (ptr_align && (ptr_align & (ptr_align - 1))) return lpx_fail(m->ctx, ".ptr alignment %d is not a power of two", ptr_align);
  p->is_reg = is_reg;
  p->ptr_space = ptr_space ? lpx_sym(m, ptr_space) : -1;
  p->ptr_align = ptr_align;
  return 0;
}

/* Add a performance or raw directive line (".maxntid 128, 1, 1"). */
int32_t lpx_func_directive(lpx_module *m, int32_t fn, const char *text)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  int32_t sym = lpx_sym(m, text);
  if (sym < 0) return -1;
  if (LPX_RESERVE(f->directives, f->directives_cap, f->ndirectives + 1)) return lpx_fail(m->ctx, "out of memory");
  f->directives[f->ndirectives++] = sym;
  return 0;
}

/* Declare a variable in a state space; fn < 0 declares it at module scope.
 * count: 0 scalar, n array, -1 unsized array. linkage as lpx_func_begin. */
int32_t lpx_var_decl(lpx_module *m, int32_t fn, const char *space, const char *name,
                     int32_t type, int32_t align, int64_t count, int32_t linkage)
{
  static const char *const spaces[] = { "shared", "global", "const", "local", NULL };
  int ok = 0;
  for (int i = 0; spaces[i]; i++) ok |= strcmp(spaces[i], space) == 0;
  if (!ok) return lpx_fail(m->ctx, "variable '%s': state space .%s; valid: .shared .global .const .local", name, space);
  if (type < 0 || type >= LPX_T__COUNT || type == LPX_T_PRED)
    return lpx_fail(m->ctx, "variable '%s': invalid type", name);
  if (align && (align & (align - 1)))
    return lpx_fail(m->ctx, "variable '%s': alignment %d is not a power of two", name, align);
  lpx_var v = { lpx_sym(m, space), lpx_sym(m, name), type, align, linkage, count, 0, NULL, 0, 0, NULL, 0 };
  if (v.space < 0 || v.sym < 0) return -1;
  lpx_var **arr = fn < 0 ? &m->vars : NULL;
  size_t *n = fn < 0 ? &m->nvars : NULL, *cap = fn < 0 ? &m->vars_cap : NULL;
  if (fn >= 0) {
    lpx_func *f = lpx_func_at(m, fn);
    if (!f) return -1;
    arr = &f->vars; n = &f->nvars; cap = &f->vars_cap;
  }
  if (lpx_grow((void **)arr, cap, *n + 1, sizeof(lpx_var))) return lpx_fail(m->ctx, "out of memory");
  (*arr)[(*n)++] = v;
  return 0;
}

/* ------------------------------------------------------------- registers */

/* Allocate a register of a type; ids are dense per function. */
int32_t lpx_reg_new(lpx_module *m, int32_t fn, int32_t type)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (type < 0 || type >= LPX_T__COUNT || type == LPX_T_B8)
    return lpx_fail(m->ctx, "cannot declare a register of type %s", lpx_type_name(type));
  size_t cap_t = f->regs_cap, cap_i = f->regs_cap;
  int oom = LPX_RESERVE(f->reg_type, cap_t, f->nregs + 1) || LPX_RESERVE(f->reg_index, cap_i, f->nregs + 1);
  f->regs_cap = cap_t < cap_i ? cap_t : cap_i;
  if (oom) return lpx_fail(m->ctx, "out of memory");
  int cls = lpx_types[type].regclass;
  f->reg_type[f->nregs] = type;
  f->reg_index[f->nregs] = ++f->class_count[cls];   /* nvcc numbers from 1 */
  return (int32_t)f->nregs++;
}

/* Append a register of a type printed as the name symbol sym. */
static int32_t reg_named_sym(lpx_module *m, lpx_func *f, int32_t type, int32_t sym)
{
  size_t cap_t = f->regs_cap, cap_i = f->regs_cap;
  int oom = LPX_RESERVE(f->reg_type, cap_t, f->nregs + 1) || LPX_RESERVE(f->reg_index, cap_i, f->nregs + 1) ||
            LPX_RESERVE(f->reg_name, f->reg_names_cap, f->nregs + 1);
  f->regs_cap = cap_t < cap_i ? cap_t : cap_i;
  if (oom) return lpx_fail(m->ctx, "out of memory");
  for (size_t r = f->nreg_names; r < f->nregs; r++) f->reg_name[r] = -1;   /* class-numbered ones */
  f->reg_type[f->nregs] = type;
  f->reg_index[f->nregs] = 0;
  f->reg_name[f->nregs] = sym;
  f->nreg_names = f->nregs + 1;
  return (int32_t)f->nregs++;
}

/* Refuse a type no register can have. */
static int reg_type_check(lpx_module *m, int32_t type)
{
  if (type < 0 || type >= LPX_T__COUNT || type == LPX_T_B8)
    return lpx_fail(m->ctx, "cannot declare a register of type %s", lpx_type_name(type));
  return 0;
}

/* Create a register that prints as name (%f3, acc): declared by the
 * caller's own .reg line or .reg parameter, not by the class ranges. */
int32_t lpx_reg_named(lpx_module *m, int32_t fn, int32_t type, const char *name)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f || reg_type_check(m, type)) return -1;
  int32_t sym = lpx_sym(m, name);
  return sym < 0 ? -1 : reg_named_sym(m, f, type, sym);
}

/* Create the registers of a range, prefix0 .. prefix(n-1), as reg.range
 * declares them (.reg .b32 %f<n>); the first one's id (the others follow
 * it), or -1 when a name is one an automatic register already has. */
int32_t lpx_reg_range(lpx_module *m, int32_t fn, int32_t type, const char *prefix, int32_t n)
{
  lpx_func *f = lpx_func_at(m, fn);
  char name[160];
  size_t plen = strlen(prefix);
  if (!f || reg_type_check(m, type)) return -1;
  if (n < 1 || plen > 128) return lpx_fail(m->ctx, "register range %.40s<%d>: expected a count from 1 and a prefix of at most 128 bytes", prefix, n);
  if (lpx_lookup_range_clash(f, prefix, n, name, sizeof name))
    return lpx_fail(m->ctx, "register %s is already one of the automatic registers of this function", name);
  int32_t first = (int32_t)f->nregs;
  memcpy(name, prefix, plen);
  for (int32_t i = 0; i < n; i++) {
    int len = lpx_digits((uint64_t)i);
    for (int32_t v = i, k = len; k > 0; v /= 10) name[plen + (size_t)--k] = (char)('0' + v % 10);
    int32_t sym = lpx_strtab_intern(&m->syms, name, plen + (size_t)len);
    if (sym < 0) return lpx_fail(m->ctx, "out of memory");
    if (reg_named_sym(m, f, type, sym) < 0) return -1;
  }
  return first;
}

/* The automatic (class-numbered) register named name (%r3), or -1. */
int32_t lpx_reg_auto(lpx_module *m, int32_t fn, const char *name)
{
  lpx_func *f = lpx_func_at(m, fn);
  int32_t reg = f ? lpx_lookup_numbered(m, f, name, strlen(name)) : -1;
  return reg < -1 ? -1 : reg;
}

/* Type a register was declared with. */
int32_t lpx_reg_type(lpx_module *m, int32_t fn, int32_t reg)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f || reg < 0 || (size_t)reg >= f->nregs) return -1;
  return f->reg_type[reg];
}

/* Number of registers a function allocated. */
int32_t lpx_func_reg_count(lpx_module *m, int32_t fn)
{
  lpx_func *f = lpx_func_at(m, fn);
  return f ? (int32_t)f->nregs : -1;
}

/* ----------------------------------------------------------------- items */

/* Give an empty traced body the sizes the last one reached (see hint_items). */
static int body_start(lpx_func *f)
{
  if (f->items_cap) return 0;
  return LPX_RESERVE(f->items, f->items_cap, hint_items + 1) || LPX_RESERVE(f->ops, f->ops_cap, hint_ops + 1);
}

/* Append one body item with no operands. */
static lpx_item *item_new(lpx_module *m, lpx_func *f, int kind)
{
  if (body_start(f)) { lpx_fail(m->ctx, "out of memory"); return NULL; }
  if (LPX_RESERVE(f->items, f->items_cap, f->nitems + 1)) { lpx_fail(m->ctx, "out of memory"); return NULL; }
  lpx_item *it = &f->items[f->nitems++];
  memset(it, 0, sizeof *it);
  it->kind = (uint8_t)kind;
  it->guard = -1;
  it->ops = (uint32_t)f->nops;
  return it;
}

/* Place a label (a symbol) at the current end of the body. */
int32_t lpx_label_place(lpx_module *m, int32_t fn, int32_t sym)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  int placed = lpx_lookup_label_placed(m, f, sym);   /* a { } block may place a name again (inline asm pasted twice) */
  if (placed < 0) return -1;
  if (placed) return lpx_fail(m->ctx, "label '%s' is placed twice in one block", lpx_strtab_get(&m->syms, sym));
  lpx_item *it = item_new(m, f, LPX_ITEM_LABEL);
  if (!it) return -1;
  it->form = sym;
  return 0;
}

/* Append a raw body line (a pragma, a scope brace) emitted verbatim. */
int32_t lpx_append_raw(lpx_module *m, int32_t fn, const char *text)
{
  lpx_func *f = lpx_func_at(m, fn);
  int32_t sym = f ? lpx_sym(m, text) : -1;
  if (sym < 0) return -1;
  lpx_item *it = item_new(m, f, LPX_ITEM_RAW);
  if (!it) return -1;
  it->form = sym;
  return 0;
}

/* Check the module's target and PTX version against a form's needs. */
int lpx_check_arch(lpx_module *m, const lpx_form_info *fi)
{
  if (fi->max_sm && (m->family != 1 || m->sm < fi->min_sm || m->sm > fi->max_sm)) {
    if (fi->min_sm == fi->max_sm)
      return lpx_fail(m->ctx, "%s needs target sm_%da; this kernel targets %s", fi->text, fi->min_sm, m->target);
    return lpx_fail(m->ctx, "%s needs an arch-specific target sm_%da..sm_%da; this kernel targets %s",
                    fi->text, fi->min_sm, fi->max_sm, m->target);
  }
  if (m->sm < fi->min_sm)
    return lpx_fail(m->ctx, "%s needs sm_%d or newer; this kernel targets %s", fi->text, fi->min_sm, m->target);
  if (m->ptx_version < fi->min_ptx)
    return lpx_fail(m->ctx, "%s needs PTX ISA %d.%d; this kernel uses %d.%d (raise the kernel's version)",
                    fi->text, fi->min_ptx / 10, fi->min_ptx % 10, m->ptx_version / 10, m->ptx_version % 10);
  return 0;
}

/* Append an instruction: validate it against the table, copy its operands.
 * guard is a predicate register or -1; file/line locate the Lua source. */
int32_t lpx_append(lpx_module *m, int32_t fn, int32_t form, int32_t guard, int32_t guard_neg,
                   int32_t nops, lpx_operand *ops, int32_t file, int32_t line)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (form < 0 || (size_t)form >= m->ctx->form_names.n) return lpx_fail(m->ctx, "invalid form id %d", form);
  if (nops < 0 || nops > 65535) return lpx_fail(m->ctx, "invalid operand count %d", nops);
  lpx_form_get(m->ctx, form);   /* refreshes the form's text pointer */
  const lpx_form *fo = &m->ctx->forms[form];
  if (fo->info.op >= 0 && lpx_check_arch(m, &fo->info)) return -1;
  if (guard >= 0 && ((size_t)guard >= f->nregs || f->reg_type[guard] != LPX_T_PRED))
    return lpx_fail(m->ctx, "%s: the guard must be a predicate register", fo->info.text);
  if (lpx_validate(m, f, fo, ops, nops, file, line)) return -1;
  if (LPX_RESERVE(f->ops, f->ops_cap, f->nops + (size_t)nops)) return lpx_fail(m->ctx, "out of memory");
  lpx_item *it = item_new(m, f, LPX_ITEM_INST);
  if (!it) return -1;
  if (nops) memcpy(f->ops + f->nops, ops, sizeof(lpx_operand) * (size_t)nops);   /* f->ops may be NULL */
  f->nops += (size_t)nops;
  it->form = form;
  it->guard = guard;
  it->guard_neg = guard_neg != 0;
  it->nops = (uint16_t)nops;
  it->file = file;
  it->line = line;
  f->ninsts++;
  return (int32_t)f->nitems - 1;
}

/* Number of instructions (not labels or raw lines) in a function. */
int32_t lpx_func_inst_count(lpx_module *m, int32_t fn)
{
  lpx_func *f = lpx_func_at(m, fn);
  return f ? (int32_t)f->ninsts : -1;
}

/* A 64-bit digest of every field of an operand. Fields are read one by
 * one, at their own width: the parser has just stored them that way, and a
 * wider load spanning two fresh stores stalls on store forwarding. */
uint64_t lpx_operand_digest(const lpx_operand *o)
{
  uint64_t fbits;
  memcpy(&fbits, &o->fval, 8);
  uint64_t h = (uint64_t)(uint32_t)o->kind * 0xFF51AFD7ED558CCDull ^ (uint64_t)(uint32_t)o->type * 0xC4CEB9FE1A85EC53ull ^
               (uint64_t)(uint32_t)o->id * 0x9FB21C651E98DF25ull ^ (uint64_t)(uint32_t)o->aux * 0xD6E8FEB86659FD93ull ^
               (uint64_t)o->ival * 0x9E3779B97F4A7C15ull ^ fbits * 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);   /* independent products: no serial multiply chain */
}

/* ------------------------------------------------------------- IR editing */

/* Number of functions (with bodies) in a module. */
int32_t lpx_module_func_count(lpx_module *m) { return (int32_t)m->nfuncs; }

/* The register of a function named name ("%r12", "%foo"), or -1. */
int32_t lpx_reg_find(lpx_module *m, int32_t fn, const char *name)
{
  const lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  lpx_buf tmp = { 0 };
  int32_t found = -1;
  for (size_t r = 0; r < f->nregs && found < 0; r++) {
    tmp.n = 0;
    lpx_put_reg(&tmp, m, f, (int32_t)r);
    if (tmp.p && strcmp(tmp.p, name) == 0) found = (int32_t)r;
  }
  lpx_buf_free(&tmp);
  return found;
}

/* Give a register a new name; every use and declaration prints it. */
int32_t lpx_reg_rename(lpx_module *m, int32_t fn, int32_t reg, const char *name)
{
  lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (reg < 0 || (size_t)reg >= f->nregs) return lpx_fail(m->ctx, "no register %d", reg);
  if (LPX_RESERVE(f->reg_name, f->reg_names_cap, f->nregs)) return lpx_fail(m->ctx, "out of memory");
  for (size_t r = f->nreg_names; r < f->nregs; r++) f->reg_name[r] = -1;
  f->nreg_names = f->nregs;
  int32_t sym = lpx_sym(m, name);
  if (sym < 0) return -1;
  f->reg_name[reg] = sym;
  lpx_lookup_free(f);   /* names changed: rebuilt on the next lookup */
  return 0;
}

/* A register's PTX name ("%r3", or its parsed/declared name); the text
 * stays owned by the module until its next emission. */
int32_t lpx_reg_name(lpx_module *m, int32_t fn, int32_t reg, const char **name, size_t *len)
{
  const lpx_func *f = lpx_func_at(m, fn);
  if (!f) return -1;
  if (reg < 0 || (size_t)reg >= f->nregs) return lpx_fail(m->ctx, "no register %d", reg);
  m->out.n = 0;
  lpx_put_reg(&m->out, m, f, reg);
  return lpx_module_out(m, name, len);
}

/* Hand out what was just printed into the module's output buffer (owned
 * by the module until its next print); -1 if printing ran out of memory. */
int32_t lpx_module_out(lpx_module *m, const char **text, size_t *len)
{
  if (!m->out.p) return lpx_fail(m->ctx, "out of memory");
  *text = m->out.p;
  *len = m->out.n;
  return 0;
}
