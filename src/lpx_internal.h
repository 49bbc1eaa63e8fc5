/* Internal structures of the core: the context, the ISA enums and the IR.
 * Shared by the core's C files; never seen by Lua. */
#ifndef LPX_INTERNAL_H
#define LPX_INTERNAL_H
#include "lpx_core.h"
#include "lpx_util.h"
#include "lpx_types.def"
#include "lpx_isa.def"

/* ------------------------------------------------------------ limits
 * The most bytes of each state space the hardware (or ptxas) allows: one
 * variable is refused above them when PTX is loaded (src/lpx_parse.c),
 * and a launch when its variables together pass them (src/emu). */
#define LPX_SHARED_MAX ((uint64_t)227 << 10)   /* per CTA: sm_90/sm_100's 227 KB, opt-in */
#define LPX_LOCAL_MAX ((uint64_t)512 << 10)    /* per thread */
#define LPX_CONST_MAX ((uint64_t)64 << 10)     /* per module: ptxas's constant bank, 0x10000 */
#define LPX_GLOBAL_MAX ((uint64_t)1 << 48)     /* one variable: 256 TiB, more than any device holds */

/* ------------------------------------------------------------ enums */

enum lpx_type_id {
#define X(id, spell, bits, kind, cls) LPX_T_##id,
  LPX_TYPES(X)
#undef X
  LPX_T__COUNT
};

enum lpx_regclass_id {
#define X(id, decl, prefix) LPX_RC_##id,
  LPX_REGCLASSES(X)
#undef X
  LPX_RC__COUNT
};

/* Modifier groups: the core groups (bits of a row's masks) then the
 * family groups (bits of an LPX_FAMILIES row's masks), one index space. */
enum lpx_group_bit {
#define G(id, rows) LPX_GB_##id,
#define M(group, name, spell)
  LPX_MODGROUPS(G, M)
  LPX_GB__CORE,
  LPX_GB__FAMILY = LPX_GB__CORE - 1,
  LPX_FAMGROUPS(G, M)
#undef G
#undef M
  LPX_GB__COUNT
};

/* Per group, the named values of its spellings: LPX_CMP_LT, LPX_SAT_SATFINITE
 * (1-based; LPX_<group>__NONE = 0 when the form carries none). */
#define G(id, rows) enum lpx_mod_##id { LPX_##id##__NONE, rows LPX_##id##__END };
#define M(group, name, spell) LPX_##group##_##name,
LPX_MODGROUPS(G, M)
LPX_FAMGROUPS(G, M)
#undef G
#undef M

enum lpx_op_id {
#define X(id, name, sig, groups, req, types, ntypes, ptx, sm, maxsm, emu) LPX_OP_##id,
  LPX_ISA(X)
#undef X
  LPX_OP__COUNT
};

enum lpx_special_id {
#define X(id, name, type, ptx, sm) LPX_SR_##id,
  LPX_SPECIALS(X)
#undef X
  LPX_SR__COUNT
};

/* Group and type-set bits; enums wider than int are a GCC/Clang extension. */
enum {
#define G(id, rows) G_##id = (uint64_t)1 << LPX_GB_##id,
#define M(group, name, spell)
  LPX_MODGROUPS(G, M)
#undef G
#define G(id, rows) FG_##id = (uint64_t)1 << (LPX_GB_##id - LPX_GB__CORE),
  LPX_FAMGROUPS(G, M)
#undef G
#undef M
};

/* Matrix element types (LPX_MTYPES): ids from 1 (0: none) and set bits. */
enum lpx_mtype_id {
  LPX_MT__NONE,
#define X(id, spell, bits) LPX_MT_##id,
  LPX_MTYPES(X)
#undef X
  LPX_MT__END
};
enum {
#define X(id, spell, bits) MTS_##id = 1u << LPX_MT_##id,
  LPX_MTYPES(X)
#undef X
};
#define X(id, spell, bits, kind, cls) TS_##id = (uint64_t)1 << LPX_T_##id,
enum { LPX_TYPES(X) };
#undef X


/* Per-type facts expanded from LPX_TYPES. */
typedef struct lpx_type_desc {
  const char *name;
  int bits;
  char kind;   /* 'B','U','S','F','P','H' */
  int regclass;
} lpx_type_desc;
extern const lpx_type_desc lpx_types[LPX_T__COUNT];

/* One row of the instruction table. */
typedef struct lpx_isa_row {
  const char *name;
  const char *sig;
  uint64_t groups, required, types;
  int ntypes, min_ptx, min_sm, max_sm;
} lpx_isa_row;
extern const lpx_isa_row lpx_isa_rows[LPX_OP__COUNT];

/* ------------------------------------------------------------ context */

#define LPX_MSG_MAX 2048

/* How deep operand lists ({ }, ( ), [ ], d|p) may nest: the parser, the
 * checker and the printers recurse that deep. */
#define LPX_OPD_MAX_NESTING 64

/* Interned opcode forms with their parsed facts: the record every
 * consumer reads instead of the opcode text. */
typedef struct lpx_form {
  lpx_form_info info;
  /* Per modifier group, the named value of the chosen spelling (0: none),
   * e.g. modsel[LPX_GB_CMP] == LPX_CMP_LT for setp.lt. */
  uint8_t modsel[LPX_GB__COUNT];
} lpx_form;

/* The named value of spelling tok (n chars) in a group, or 0. */
int lpx_group_index(int group, const char *tok, size_t n);

/* Family rows (LPX_FAMILIES): the family groups a row allows and requires,
 * whether it takes a shape, how many matrix types. */
typedef struct lpx_family_row { uint64_t groups, required; int shape, mtypes; } lpx_family_row;
extern const lpx_family_row lpx_family_rows[LPX_OP__COUNT];
/* The matrix type of a spelling (n chars), or 0. */
int lpx_mtype_find(const char *tok, size_t n);
/* The mma.sync family of an A/B matrix type, or NULL. */
const lpx_mma_family *lpx_mma_family_of(int mtype);
/* The mma.sync shape row of (m, n, k) for a family, or NULL. */
const lpx_mma_shape *lpx_mma_shape_find(int m, int n, int k, int family);
/* The wgmma family of an A/B matrix type, or NULL. */
const lpx_wgmma_family *lpx_wgmma_family_of(int mtype);
/* Is an mma.sync form one of the table's (shape, A/B pair, accumulators,
 * layouts)? 0 if so, else -1 with the reason in why. */
int lpx_mma_form_check(const lpx_form_info *fi, char *why, size_t cap);
/* Is a wgmma.mma_async form one of the table's? 0 or -1 with why. */
int lpx_wgmma_form_check(const lpx_form *fo, char *why, size_t cap);

struct lpx_ctx {
  char error[LPX_MSG_MAX];
  char warning[LPX_MSG_MAX];
  char warning_out[LPX_MSG_MAX];
  lpx_strtab form_names;
  lpx_form *forms;
  size_t forms_cap;
  /* The lexer's token buffer, kept between parses (lpx_parse.c) so that
   * parsing file after file reuses warm memory instead of faulting in
   * fresh pages each time. */
  struct lpx_tok *toks;
  size_t toks_cap;
};

int lpx_fail(lpx_ctx *ctx, const char *fmt, ...);
void lpx_warn(lpx_ctx *ctx, const char *fmt, ...);

/* ------------------------------------------------------------ IR */

enum { LPX_ITEM_INST = 1, LPX_ITEM_LABEL, LPX_ITEM_RAW,
       LPX_ITEM_DIR,    /* parsed directive/declaration: a token run (lex, nlex) */
       LPX_ITEM_FUNC }; /* module top level only: form = function index */

typedef struct lpx_item {
  uint8_t kind;
  uint8_t guard_neg;
  uint16_t nops;
  int32_t form;      /* INST: form id; LABEL: symbol; RAW: symbol of text */
  int32_t guard;     /* predicate register, -1 when unguarded */
  uint32_t ops;      /* first operand in lpx_func.ops */
  int32_t file, line;
  uint32_t lex, nlex; /* parsed: its tokens in lpx_module.lex (nlex 0: traced) */
  uint16_t lex_nops;  /* parsed: operand entries it had when parsed */
} lpx_item;

/* Lossless spelling of one parsed token: leading trivia and text, both
 * symbols (-1: no trivia). role says what in the IR the text comes from,
 * so that an edit of the IR changes what the lossless emitter prints. */
enum { LPX_LEX_LIT = 0,  /* the spelling itself */
       LPX_LEX_REG,      /* ref = register: its current name */
       LPX_LEX_OPCODE,   /* the item's current form */
       LPX_LEX_GUARD,    /* the item's current guard register */
       LPX_LEX_LABEL };  /* the label item's current symbol */
/* 12 bytes: big inputs have millions of tokens, and each byte of this
 * array is memory a parse touches for the first time. */
typedef struct lpx_lex {
  int32_t pre, spell;
  signed int ref : 28;   /* register id, at most LPX_LEX_REF_MAX; -1: none */
  unsigned int role : 4;
} lpx_lex;
#define LPX_LEX_REF_MAX ((1 << 27) - 1)

/* Where a parsed operand's tokens are and a digest of the operand as
 * parsed: while the IR operand still has that digest, its tokens are
 * printed as written (16 bytes, not a 32-byte copy: big inputs have
 * millions of operands). */
typedef struct lpx_opd_lex {
  uint32_t first, count;
  uint64_t digest;
} lpx_opd_lex;

typedef struct lpx_param {
  int32_t sym, type, align, count;
  int32_t is_reg;               /* a .reg parameter (.func only): a named register */
  int32_t ptr_space, ptr_align; /* .ptr .global .align 16: space symbol (-1 none), 0 */
} lpx_param;

typedef struct lpx_var {
  int32_t space, sym, type, align, linkage;
  int64_t count;     /* -1: unsized (extern) array, 0: scalar */
  int32_t in_text;   /* declared by parsed text: its DIR item prints it, not put_var */
  uint8_t *init;     /* parsed "= {...}": the initial bytes (malloc'd), or NULL */
  uint32_t init_len;
  int32_t init_symbolic;   /* an initializer form the decoder does not take */
  int32_t *relocs;   /* address-of initializers: (byte offset, symbol) pairs (malloc'd) */
  uint32_t nrelocs;
} lpx_var;

/* A function's name lookups (src/lpx_lookup.c), built on demand: the
 * registers before regs_upto and the items before items_upto are in. */
typedef struct lpx_lookup {
  int32_t *numbered[LPX_RC__COUNT]; size_t numbered_cap[LPX_RC__COUNT];   /* class number -> register */
  int32_t *named; size_t named_cap;     /* name symbol -> the latest register of that name */
  int32_t *labels; size_t labels_cap;   /* symbol -> its newest placement in placed, -1 */
  int32_t *placed; size_t nplaced, placed_cap;   /* placements: (block, next older) pairs; block -1: the body */
  int32_t *open; size_t nopen, open_cap;         /* the { } blocks open at the end of the body, innermost last */
  int32_t *block_open; size_t block_open_cap;    /* block -> 1 while it is open */
  size_t nblocks, regs_upto, items_upto;
} lpx_lookup;

typedef struct lpx_func {
  int32_t sym, is_entry, linkage;
  lpx_param *params; size_t nparams, params_cap;
  lpx_param *rets; size_t nrets, rets_cap;   /* .func return values */
  int32_t *directives; size_t ndirectives, directives_cap;
  lpx_var *vars; size_t nvars, vars_cap;
  int32_t *reg_type; int32_t *reg_index; size_t nregs, regs_cap;
  int32_t class_count[LPX_RC__COUNT];
  lpx_item *items; size_t nitems, items_cap;
  lpx_operand *ops; size_t nops, ops_cap;
  size_t ninsts;
  /* Parsed functions: register names (symbols), operand spellings and the
   * header ("... name(params) {") and closing "}" token runs. */
  int32_t *reg_name; size_t nreg_names, reg_names_cap;
  lpx_opd_lex *ops_lex; size_t nops_lex, ops_lex_cap;
  uint32_t head_lex, head_nlex, tail_lex;
  /* The CTA-group size of the function's first tcgen05 instruction and
   * where it was appended (a kernel uses one size: lpx_validate.c). */
  int32_t tc_cta_group, tc_cta_file, tc_cta_line;
  lpx_lookup lookup;
} lpx_func;

struct lpx_module {
  lpx_ctx *ctx;
  int32_t ptx_version, address_size, sm, family;
  char target[64];
  char target_mods[96];   /* ", debug, texmode_independent": what follows the first target */
  lpx_strtab syms;
  int32_t *files; size_t nfiles, files_cap;
  lpx_func *funcs; size_t nfuncs, funcs_cap;
  lpx_var *vars; size_t nvars, vars_cap;
  lpx_buf out;
  /* Parsed modules: the top level in source order (DIR and FUNC items),
   * every token's spelling, and the trivia before the end of the file. */
  lpx_item *top; size_t ntop, top_cap;
  lpx_lex *lex; size_t nlex, lex_cap;
  int32_t eof_pre;
  /* Per form id: 1 + the operand count its form rules passed with in
   * this module (0: not yet), so lpx_validate checks them once. */
  uint8_t *rules_ok; size_t rules_cap;
  int64_t rules_key;   /* the target and version they passed under */
  struct lpx_vmemo *vmemo;   /* instruction shapes that validated (lpx_validate.c) */
};

const char *lpx_special_name(int32_t id);
void lpx_special_gate(int32_t id, int *ptx, int *sm);
int lpx_lookup_sync(lpx_module *m, lpx_func *f);
int32_t lpx_lookup_reg(const lpx_func *f, int32_t sym, const char *s, size_t n);
int lpx_lookup_label_placed(lpx_module *m, lpx_func *f, int32_t sym);
int32_t lpx_lookup_numbered(lpx_module *m, lpx_func *f, const char *s, size_t n);
int lpx_lookup_range_clash(const lpx_func *f, const char *prefix, int32_t n, char *out, size_t cap);
void lpx_lookup_free(lpx_func *f);
uint64_t lpx_param_layout(const lpx_func *f, uint32_t *offsets);
int lpx_validate(lpx_module *m, lpx_func *f, const lpx_form *form, lpx_operand *ops, int nops, int32_t file, int32_t line);
int lpx_check_arch(lpx_module *m, const lpx_form_info *fi);
void lpx_emit_operand(lpx_buf *b, const lpx_module *m, const lpx_func *f, const lpx_operand *ops, uint32_t *i);
void lpx_emit_item(lpx_buf *b, const lpx_module *m, const lpx_func *f, const lpx_item *it);
void lpx_emit_var(lpx_buf *b, const lpx_module *m, const lpx_var *v, const char *indent);
void lpx_emit_func(lpx_buf *b, const lpx_module *m, const lpx_func *f, int line_info, const int32_t *file_map);
int lpx_emit_decl(lpx_buf *b, const lpx_module *m, const lpx_item *it);
/* Does an operand name a symbol or label by its id (a symbol, a label, or
 * an address on a symbol), rather than a register or an immediate? */
static inline int lpx_opd_names_symbol(const lpx_operand *o)
{
  return o->kind == LPX_OPD_SYM || o->kind == LPX_OPD_LABEL || (o->kind == LPX_OPD_ADDR && o->aux == LPX_OPD_SYM);
}
lpx_func *lpx_func_at(lpx_module *m, int32_t fn);
int32_t lpx_module_out(lpx_module *m, const char **text, size_t *len);
/* A 64-bit digest of every field of an operand (lpx_ir.c). */
uint64_t lpx_operand_digest(const lpx_operand *o);

/* Printing registers and tokens (lpx_print.c, a leaf of the front end). */
extern const char lpx_class_prefix[LPX_RC__COUNT][4];
void lpx_put_reg(lpx_buf *b, const lpx_module *m, const lpx_func *f, int32_t reg);
const char *lpx_reg_text(const lpx_module *m, const lpx_func *f, int32_t reg, char *buf, size_t cap);
const char *lpx_print_gap(const lpx_module *m, const lpx_lex *prev2, const lpx_lex *prev, const lpx_lex *l);
void lpx_print_tokens(lpx_buf *b, const lpx_module *m, uint32_t first, uint32_t n, const lpx_func *f);
/* Write a register's current name (its spelling if it is out of range). */
static inline void lpx_print_reg_or(lpx_buf *b, const lpx_module *m, const lpx_func *f, int32_t reg, int32_t spell)
{
  if (f && reg >= 0 && (size_t)reg < f->nregs) lpx_put_reg(b, m, f, reg);
  else lpx_buf_putsym(b, &m->syms, spell);
}

/* Write a token's text: its spelling, or what the IR now says in its place
 * (it: the item the token belongs to, NULL for a directive's tokens);
 * inline, as the lossless printer calls it for every token. */
static inline void lpx_print_token(lpx_buf *b, const lpx_module *m, const lpx_func *f, const lpx_item *it, const lpx_lex *l)
{
  switch (l->role) {
  case LPX_LEX_REG: lpx_print_reg_or(b, m, f, l->ref, l->spell); break;
  case LPX_LEX_GUARD: lpx_print_reg_or(b, m, f, it ? it->guard : -1, l->spell); break;
  case LPX_LEX_OPCODE:
    if (it) lpx_buf_putsym(b, &m->ctx->form_names, it->form);
    else lpx_buf_putsym(b, &m->syms, l->spell);
    break;
  case LPX_LEX_LABEL: lpx_buf_putsym(b, &m->syms, it ? it->form : l->spell); break;
  default: lpx_buf_putsym(b, &m->syms, l->spell); break;
  }
}
/* Is a token the one-character punctuation c? */
static inline int lpx_token_is(const lpx_module *m, const lpx_lex *l, char c)
{
  const char *s = lpx_strtab_get(&m->syms, l->spell);
  return s[0] == c && s[1] == '\0';
}
/* Is token k's spelling the word w? */
static inline int lpx_token_word(const lpx_module *m, uint32_t k, const char *w)
{
  return strcmp(lpx_strtab_get(&m->syms, m->lex[k].spell), w) == 0;
}

#endif
