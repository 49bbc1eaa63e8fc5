/* Printing the IR's pieces: register names (the emitter's, the
 * formatter's and messages'), and tokens of parsed text with their
 * canonical spacing (the per-token printer, lpx_print_token, is an
 * inline of lpx_internal.h). A leaf of the front end: the validator,
 * emitter, formatter, parser and transpiler call it; it calls only the
 * ISA tables and the buffers of lpx_util.c. */
#include "lpx_internal.h"
#include <stdio.h>
#include <string.h>

/* Register prefixes, four bytes each, NUL-padded: lpx_put_reg copies a
 * fixed size (no call); the emitter's .reg declarations use them too. */
const char lpx_class_prefix[LPX_RC__COUNT][4] = {
#define X(id, decl, prefix) prefix,
  LPX_REGCLASSES(X)
#undef X
};
#define X(id, decl, prefix) _Static_assert(sizeof(prefix) <= 4, "register prefix " prefix " is over 3 characters");
LPX_REGCLASSES(X)
#undef X
static const uint8_t class_prefix_len[LPX_RC__COUNT] = {
#define X(id, decl, prefix) sizeof(prefix) - 1,
  LPX_REGCLASSES(X)
#undef X
};
/* ------------------------------------------------------------ registers */

/* A register's PTX name: its parsed name, else class prefix + index. */
void lpx_put_reg(lpx_buf *b, const lpx_module *m, const lpx_func *f, int32_t reg)
{
  if ((size_t)reg < f->nreg_names && f->reg_name[reg] >= 0) {
    lpx_buf_putsym(b, &m->syms, f->reg_name[reg]);
    return;
  }
  int cls = lpx_types[f->reg_type[reg]].regclass;
  if (b->n + 4 >= b->cap && lpx_buf_grow(b, 4)) return;
  memcpy(b->p + b->n, lpx_class_prefix[cls], 4);
  b->n += class_prefix_len[cls];
  lpx_buf_putu(b, (uint32_t)f->reg_index[reg]);   /* writes the NUL after the prefix's digits */
}

/* The same name into a fixed buffer, for messages (validator, emulator). */
const char *lpx_reg_text(const lpx_module *m, const lpx_func *f, int32_t reg, char *buf, size_t cap)
{
  if ((size_t)reg < f->nreg_names && f->reg_name[reg] >= 0)
    snprintf(buf, cap, "%s", lpx_strtab_get(&m->syms, f->reg_name[reg]));
  else
    snprintf(buf, cap, "%s%d", lpx_class_prefix[lpx_types[f->reg_type[reg]].regclass], f->reg_index[reg]);
  return buf;
}

/* --------------------------------------------------------------- tokens */

/* Text of a module symbol. */
static const char *sym_text(const lpx_module *m, int32_t sym)
{
  return lpx_strtab_get(&m->syms, sym);
}

/* Does a token's original trivia hold a line break? */
static int had_break(const lpx_module *m, const lpx_lex *l)
{
  return l->pre >= 0 && strchr(sym_text(m, l->pre), '\n') != NULL;
}

/* Is a token any one-character punctuation of set? */
static int lex_in(const lpx_module *m, const lpx_lex *l, const char *set)
{
  const char *s = sym_text(m, l->spell);
  return s[0] && s[1] == '\0' && strchr(set, s[0]) != NULL;
}

/* The separator before token l (after prev, which followed prev2). */
const char *lpx_print_gap(const lpx_module *m, const lpx_lex *prev2, const lpx_lex *prev, const lpx_lex *l)
{
  if (had_break(m, l) && !lex_in(m, l, ",;)]>")) return "\n\t";
  if (lex_in(m, l, ",;)]}>:") || lex_in(m, prev, "([<!@{")) return "";
  if (lpx_token_is(m, l, '[') && !lex_in(m, prev, ",=")) return "";
  if (lpx_token_is(m, l, '<')) return "";
  if (lex_in(m, prev, "-+") && (!prev2 || lex_in(m, prev2, ",={(+-"))) return "";
  return " ";
}

/* Canonical text of a parsed directive's token run. The tracer's own
 * spacing where it has one: ".reg .b32 \t%r<4>;", ".loc\t1 2 1". */
void lpx_print_tokens(lpx_buf *b, const lpx_module *m, uint32_t first, uint32_t n, const lpx_func *f)
{
  int reg = n && lpx_token_word(m, first, ".reg"), tabbed = n && (lpx_token_word(m, first, ".loc") || lpx_token_word(m, first, ".file"));
  for (uint32_t k = first; k < first + n; k++) {
    const lpx_lex *l = &m->lex[k];
    if (k == first + 1 && tabbed) lpx_buf_putc(b, '\t');
    else if (reg && k > first && sym_text(m, l->spell)[0] != '.' && sym_text(m, l[-1].spell)[0] == '.') lpx_buf_puts(b, " \t");
    else if (k > first) lpx_buf_puts(b, lpx_print_gap(m, k > first + 1 ? l - 2 : NULL, l - 1, l));
    lpx_print_token(b, m, f, NULL, l);
  }
}
