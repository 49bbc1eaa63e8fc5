/* The PTX parser: tokens -> the IR the tracer builds (functions, params,
 * registers, instructions with operands, labels), plus what the lossless
 * emitter needs: every token's spelling and leading trivia (lpx_lex), each
 * operand's token range, and directives kept as token runs (LPX_ITEM_DIR).
 * Opcode-agnostic: any opcode parses; the ISA table types it where it can.
 * Errors are "file:line:col: what was expected"; a longjmp unwinds to
 * lpx_parse, which frees the partial module. */
#include "lpx_parse.h"
#include "lpx_rules.h"
#include "lpx_cexpr.h"
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NESTING LPX_OPD_MAX_NESTING
#define MAX_BLOCKS 10000   /* { } scopes in a body (a counter, no recursion) */
/* A streamed parse prints a body whenever its lex entries pass this many
 * (768 KiB of them: the arrays stay in cache and are reused). */
#define BODY_CHUNK_TOKENS ((size_t)1 << 16)

/* A declared register range (%r<100>): names prefix0 .. prefix(count-1). */
typedef struct regrange {
  const char *prefix;
  uint32_t len, count;
  int32_t type;
} regrange;

/* What a name symbol means in the current function: a register, valid
 * when gen is the function's generation (so a new function starts empty
 * without clearing anything). */
typedef struct nameslot {
  int32_t reg;
  uint32_t gen;
} nameslot;

/* A register name a .reg inside a { } block declared: what the name meant
 * before, restored when the block at that depth closes. */
typedef struct shadow {
  int32_t key;
  nameslot prev;
  int depth;
} shadow;

/* A spelling cache entry: a text of up to 16 bytes as two words (bytes
 * past it zero; no text is all zero, as the lexer refuses NUL bytes) and
 * its symbol. Trivia, punctuation and opcodes repeat all through a file. */
typedef struct symcache {
  uint64_t w[2];
  int32_t sym;
} symcache;
#define SYMCACHE_SLOTS 512

/* A register name cache entry: a name of up to 8 bytes (as a word), the
 * register it named, and the cache generation it was true in. */
typedef struct regcache {
  uint64_t name;
  int32_t reg;
  uint32_t gen;
} regcache;

/* The body arrays of a function a streamed parse has printed, handed to
 * the next function: memory already faulted in, where fresh arrays for
 * every function would fault in as much as the whole input's IR. */
typedef struct spare_body {
  lpx_item *items; size_t items_cap;
  lpx_operand *ops; size_t ops_cap;
  lpx_opd_lex *ops_lex; size_t ops_lex_cap;
  int32_t *reg_type, *reg_index, *reg_name; size_t regs_cap, reg_names_cap;
} spare_body;

typedef struct pstate {
  lpx_ctx *ctx;
  lpx_module *m;
  const char *src, *file;
  size_t src_len;
  lpx_tok *t;
  size_t nt, pos, toks_cap;    /* tokens, the cursor, the buffer's capacity */
  jmp_buf fail;
  lpx_func *f;                 /* function being parsed, NULL at top level */
  nameslot *names;             /* register name symbol -> register id, by symbol id */
  size_t names_cap;
  uint32_t names_gen;
  regrange *ranges;
  size_t nranges, ranges_cap;
  shadow *shadows;             /* names declared in { } blocks, innermost last */
  size_t nshadows, shadows_cap;
  int block_depth;             /* { } blocks open in the current body */
  regcache *rc;                /* register names already resolved, by name word */
  uint32_t rc_mask, rc_gen;    /* gen: bumped whenever a name may change meaning */
  int32_t short1[256];         /* symbol + 1 of each 1-byte string (",", " ") */
  symcache sc[SYMCACHE_SLOTS]; /* recent spellings of up to 16 bytes */
  int32_t *form_by_sym;        /* opcode spelling symbol -> form id + 1 */
  size_t form_by_sym_cap;
  size_t line_tok;             /* line counting for item locations: tokens counted */
  int line, nesting;
  uint32_t lex_base;           /* lex index of token 0 (ptx.raw appends to a module) */
  int raw;                     /* parsing into a traced function (lpx_parse_into) */
  int strict;                  /* validate every instruction (lpx_parse_checked) */
  int32_t fn, raw_file, raw_line;
  lpx_parse_hook hook;         /* streamed parse: called after each top-level statement and body chunk */
  void *hook_arg;
  spare_body spare;            /* streamed parse: a printed function's arrays, for the next */
  size_t recycled;             /* streamed parse: functions before this one are printed */
} pstate;

/* ------------------------------------------------------------------ errors */

/* Fail at byte offset off with "file:line:col: message" and unwind. */
static void perr_off(pstate *ps, size_t off, const char *fmt, va_list ap)
{
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  int line, col;
  lpx_lex_position(ps->src, off, &line, &col);
  lpx_fail(ps->ctx, "%s:%d:%d: %s", ps->file, line, col, msg);
  longjmp(ps->fail, 1);
}

/* Fail at token k and unwind to lpx_parse. */
static void perr(pstate *ps, size_t k, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  perr_off(ps, ps->t[k].off, fmt, ap);
  va_end(ap);
}

/* Fail just after token k-1 (where a missing ';' or ',' belongs). */
static void perr_after(pstate *ps, size_t k, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  perr_off(ps, k ? ps->t[k - 1].off + ps->t[k - 1].len : 0, fmt, ap);
  va_end(ap);
}

/* Unwind with "out of memory". */
static void poom(pstate *ps)
{
  lpx_fail(ps->ctx, "%s: out of memory", ps->file);
  longjmp(ps->fail, 1);
}

/* Grow an array or unwind. */
#define GROW(ps, arr, cap, need) do { if ((need) > (cap) && LPX_RESERVE(arr, cap, need)) poom(ps); } while (0)

/* ------------------------------------------------------------------ tokens */

/* The current token. */
static const lpx_tok *cur(pstate *ps) { return &ps->t[ps->pos]; }

/* The token k places ahead (clamped to EOF). */
static const lpx_tok *peek(pstate *ps, size_t k)
{
  return &ps->t[ps->pos + k < ps->nt ? ps->pos + k : ps->nt - 1];
}

/* Is tok the punctuation character c? */
static int is_punct(pstate *ps, const lpx_tok *tok, char c)
{
  return tok->kind == LPX_TK_PUNCT && ps->src[tok->off] == c;
}

/* Is tok the word w? The first byte and the length reject almost every
 * other word before any string call. */
static int is_word(pstate *ps, const lpx_tok *tok, const char *w)
{
  const char *s = ps->src + tok->off;
  return tok->kind == LPX_TK_WORD && s[0] == w[0] && tok->len == strlen(w) && memcmp(s, w, tok->len) == 0;
}

/* Is tok a directive word (".reg")? */
static int is_dotword(pstate *ps, const lpx_tok *tok)
{
  return tok->kind == LPX_TK_WORD && ps->src[tok->off] == '.';
}

/* Is tok a plain identifier (a word that is not a directive)? */
static int is_ident(pstate *ps, const lpx_tok *tok)
{
  return tok->kind == LPX_TK_WORD && ps->src[tok->off] != '.';
}

/* Intern bytes as a module symbol or unwind. 1-byte strings (much of the
 * trivia and all punctuation) come from a direct table. */
static int32_t intern(pstate *ps, const char *s, size_t n)
{
  if (n == 1) {
    int32_t *direct = &ps->short1[(uint8_t)s[0]];
    if (!*direct && (*direct = lpx_strtab_intern(&ps->m->syms, s, n) + 1) <= 0) poom(ps);
    return *direct - 1;
  }
  int32_t id = lpx_strtab_intern(&ps->m->syms, s, n);
  if (id < 0) poom(ps);
  return id;
}

/* The first n (1 to 8) bytes at s as a word, the bytes past them zero; 8
 * bytes at s must be readable. */
static uint64_t load_word(const char *s, uint32_t n)
{
  uint64_t w;
  memcpy(&w, s, 8);
  if (n == 8) return w;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return w >> (8 * (8 - n));
#else
  return w & (((uint64_t)1 << (8 * n)) - 1);
#endif
}

/* Intern the n source bytes at off: short texts through the spelling cache
 * (two word compares instead of hashing the bytes and probing the table),
 * the rest, and a cache miss, through intern. */
static int32_t intern_src(pstate *ps, uint32_t off, uint32_t n)
{
  const char *s = ps->src + off;
  if (n < 2 || n > 16 || off + 16 > ps->src_len) return intern(ps, s, n);
  uint64_t w0 = load_word(s, n < 8 ? n : 8), w1 = n > 8 ? load_word(s + 8, n - 8) : 0;
  symcache *c = &ps->sc[((w0 ^ w1 * 0xC2B2AE3D27D4EB4Full) * 0x9E3779B97F4A7C15ull) >> 55 & (SYMCACHE_SLOTS - 1)];
  if (c->w[0] == w0 && c->w[1] == w1) return c->sym;
  int32_t id = intern(ps, s, n);
  *c = (symcache){ { w0, w1 }, id };
  return id;
}

/* How take_as spells a token it is not given the symbol of. */
enum { SPELL_CACHED = -1,   /* intern its text through the spelling cache */
       SPELL_FRESH = -2 };  /* intern it directly: a text seen once only evicts cache entries */

/* Consume the current token into the module's lex array, spelled by symbol
 * spell (or a SPELL_ mode); its lex index (always equal to its token
 * index). */
static uint32_t take_as(pstate *ps, int32_t spell)
{
  const lpx_tok *tok = cur(ps);
  lpx_module *m = ps->m;
  if (tok->kind == LPX_TK_EOF) perr(ps, ps->pos, "unexpected end of input");
  GROW(ps, m->lex, m->lex_cap, m->nlex + 1);
  lpx_lex *x = &m->lex[m->nlex];
  uint32_t pre = lpx_tok_pre(ps->t, ps->pos);
  x->pre = tok->off > pre ? intern_src(ps, pre, tok->off - pre) : -1;
  if (spell == SPELL_CACHED) spell = intern_src(ps, tok->off, tok->len);
  else if (spell == SPELL_FRESH) spell = intern(ps, ps->src + tok->off, tok->len);
  x->spell = spell;
  x->ref = -1;
  x->role = LPX_LEX_LIT;
  if (ps->pos + 1 < ps->nt) ps->pos++;
  return (uint32_t)m->nlex++;
}

/* Consume the current token; its lex index. */
static uint32_t take(pstate *ps) { return take_as(ps, SPELL_CACHED); }

/* Mark lex entry x (token k) as naming register reg. */
static void lex_set_reg(pstate *ps, uint32_t x, size_t k, int32_t reg)
{
  if (reg > LPX_LEX_REF_MAX) perr(ps, k, "more than %d registers in one function", LPX_LEX_REF_MAX);
  ps->m->lex[x].role = LPX_LEX_REG;
  ps->m->lex[x].ref = reg;
}

/* Consume punctuation c or fail with "expected 'c' what". */
static uint32_t expect(pstate *ps, char c, const char *what)
{
  if (!is_punct(ps, cur(ps), c)) perr(ps, ps->pos, "expected '%c' %s", c, what);
  return take(ps);
}

/* Copy a token's text into buf as a C string (truncated to cap-1). */
static const char *tok_text(pstate *ps, const lpx_tok *tok, char *buf, size_t cap)
{
  size_t n = tok->len < cap - 1 ? tok->len : cap - 1;
  memcpy(buf, ps->src + tok->off, n);
  buf[n] = '\0';
  return buf;
}

/* The source line of token k, counted incrementally (tokens come in
 * order): the line breaks before a token are in its leading trivia (when
 * its nl flag says so) or in a string before it (an escaped break). */
static int line_of(pstate *ps, size_t k)
{
  for (; ps->line_tok <= k && ps->line_tok < ps->nt; ps->line_tok++) {
    size_t j = ps->line_tok;
    int str = j > 0 && ps->t[j - 1].kind == LPX_TK_STR;
    if (!ps->t[j].nl && !str) continue;
    for (size_t i = str ? ps->t[j - 1].off : lpx_tok_pre(ps->t, j); i < ps->t[j].off; i++) ps->line += ps->src[i] == '\n';
  }
  return ps->line;
}

/* ----------------------------------------------------------------- numbers */

/* Value of one digit in base, or -1. */
static int digit_value(char c, int base)
{
  int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
  return v < base ? v : -1;
}

/* Parse n digits of s in base into *out (wrapping); -1 if one is bad. */
static int parse_digits(const char *s, size_t n, int base, uint64_t *out)
{
  uint64_t v = 0;
  if (n == 0) return -1;
  for (size_t i = 0; i < n; i++) {
    int d = digit_value(s[i], base);
    if (d < 0) return -1;
    v = v * (uint64_t)base + (uint64_t)d;
  }
  *out = v;
  return 0;
}

/* Parse an integer literal (hex, octal, binary, decimal, optional U). */
static int parse_int(const char *s, size_t n, uint64_t *out)
{
  if (n > 1 && s[n - 1] == 'U') n--;
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return parse_digits(s + 2, n - 2, 16, out);
  if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) return parse_digits(s + 2, n - 2, 2, out);
  if (n > 1 && s[0] == '0') return parse_digits(s + 1, n - 1, 8, out);
  return parse_digits(s, n, 10, out);
}

/* Parse a number token into an operand: INT, or FIMM (0f, 0d, decimal float). */
static void parse_number(pstate *ps, size_t k, lpx_operand *o)
{
  const lpx_tok *tok = &ps->t[k];
  const char *s = ps->src + tok->off;
  size_t n = tok->len;
  uint64_t v = 0;
  int hexf = n > 1 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F'), hexd = n > 1 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D');
  if (hexf || hexd) {
    if (n != (hexf ? 10u : 18u) || parse_digits(s + 2, n - 2, 16, &v))
      perr(ps, k, "malformed float literal '%.*s'; expected 0f + 8 or 0d + 16 hex digits", (int)n, s);
    o->kind = LPX_OPD_FIMM; o->type = hexf ? LPX_T_F32 : LPX_T_F64; o->ival = (int64_t)v;
    return;
  }
  if (!memchr(s, '.', n) && !((memchr(s, 'e', n) || memchr(s, 'E', n)) && !(n > 1 && (s[1] == 'x' || s[1] == 'X')))) {
    if (parse_int(s, n, &v)) perr(ps, k, "malformed integer literal '%.*s'", (int)n, s);
    o->kind = LPX_OPD_INT; o->type = -1; o->ival = (int64_t)v;
    return;
  }
  char buf[64], *end;
  double d = strtod(tok_text(ps, tok, buf, sizeof buf), &end);
  if (n >= sizeof buf || *end) perr(ps, k, "malformed number '%.*s'", (int)(n < 40 ? n : 40), s);
  o->kind = LPX_OPD_FIMM; o->type = LPX_T_F64;
  memcpy(&o->ival, &d, sizeof d);
  if (ps->raw) { o->kind = LPX_OPD_NUM; o->type = -1; o->ival = 0; o->fval = d; }   /* typed by the validator */
}

/* Negate a parsed number operand (a '-' before it). */
static void negate_number(lpx_operand *o)
{
  if (o->kind == LPX_OPD_NUM) o->fval = -o->fval;
  else if (o->kind == LPX_OPD_INT) o->ival = (int64_t)(0 - (uint64_t)o->ival);
  else o->ival ^= o->type == LPX_T_F32 ? (int64_t)0x80000000 : (int64_t)INT64_MIN;
}

/* ---------------------------------------------------------------- registers */

/* Map a register name symbol to a register id (the latest declaration
 * wins). Symbols are dense ids, so the map is an array: the names of
 * registers made one after another sit side by side in it. */
static void map_put(pstate *ps, int32_t key, int32_t val)
{
  size_t old = ps->names_cap;
  if ((size_t)key >= old) {
    GROW(ps, ps->names, ps->names_cap, (size_t)key + 1);
    memset(ps->names + old, 0, (ps->names_cap - old) * sizeof(nameslot));
  }
  ps->names[key] = (nameslot){ val, ps->names_gen };
}

/* The register a name symbol maps to in the current function, or -1. */
static int32_t map_get(pstate *ps, int32_t key)
{
  return (size_t)key < ps->names_cap && ps->names[key].gen == ps->names_gen ? ps->names[key].reg : -1;
}

/* The register the name sym (text s, n bytes) means in the current
 * function, or -1. ptx.raw: a name this text declared (scoped by its { }
 * blocks), else one the function had before the call, found in the
 * function's own lookup (synced when the call began) at a cost that does
 * not grow with the number of registers. */
static int32_t name_get(pstate *ps, int32_t sym, const char *s, size_t n)
{
  int32_t reg = map_get(ps, sym);
  if (reg >= 0 || !ps->raw) return reg;
  return lpx_lookup_reg(ps->f, sym, s, n);
}

/* Make room for n registers in a function's register arrays. */
static void regs_reserve(pstate *ps, lpx_func *f, size_t n)
{
  size_t c1 = f->regs_cap, c2 = f->regs_cap;
  GROW(ps, f->reg_type, c1, n);
  GROW(ps, f->reg_index, c2, n);
  f->regs_cap = c1 < c2 ? c1 : c2;
  GROW(ps, f->reg_name, f->reg_names_cap, n);
}

/* Create a named register of a type in the current function. */
static int32_t reg_create(pstate *ps, int32_t name, int32_t type)
{
  lpx_func *f = ps->f;
  regs_reserve(ps, f, f->nregs + 1);
  for (size_t r = f->nreg_names; r < f->nregs; r++) f->reg_name[r] = -1;   /* traced registers */
  f->reg_type[f->nregs] = type;
  f->reg_index[f->nregs] = 0;
  f->reg_name[f->nregs] = name;
  f->nreg_names = f->nregs + 1;
  map_put(ps, name, (int32_t)f->nregs);
  return (int32_t)f->nregs++;
}

/* Resolve the name s (n bytes, interned as sym) to a register: a declared
 * name, or a member of a declared %r<N> range (created on first use); -1 if none. */
static int32_t reg_lookup_text(pstate *ps, const char *s, uint32_t n, int32_t sym)
{
  if (!ps->f) return map_get(ps, sym);
  int32_t id = name_get(ps, sym, s, n);
  if (id >= 0) return id;
  for (size_t r = ps->nranges; r-- > 0;) {
    const regrange *g = &ps->ranges[r];
    if (n <= g->len || n - g->len > 10 || memcmp(s, g->prefix, g->len)) continue;   /* counts < 2^31: 10 digits */
    uint64_t idx;
    if ((s[g->len] == '0' && n - g->len > 1) || parse_digits(s + g->len, n - g->len, 10, &idx) || idx >= g->count) continue;
    return reg_create(ps, sym, g->type);
  }
  return -1;
}

/* Resolve token k (already interned as sym) to a register; -1 if none. */
static int32_t reg_lookup(pstate *ps, size_t k, int32_t sym)
{
  return reg_lookup_text(ps, ps->src + ps->t[k].off, ps->t[k].len, sym);
}

/* The cache slot for token k's name and the name as a word (bytes past it
 * zero); NULL when the name is over 8 bytes or too near the end of the
 * input to load 8 bytes. The slot hashes all but the last byte and adds
 * the last digit, so %f1230 .. %f1239 sit side by side: unrolled code uses
 * registers in runs, and neighbours share cache lines. */
static regcache *regcache_slot(pstate *ps, size_t k, uint64_t *name)
{
  const lpx_tok *tok = &ps->t[k];
  if (!ps->rc || tok->len > 8 || tok->off + 8 > ps->src_len) return NULL;
  const char *s = ps->src + tok->off;
  uint64_t head = tok->len > 1 ? load_word(s, tok->len - 1) : 0;
  *name = load_word(s, tok->len);
  return &ps->rc[(((head * 0x9E3779B97F4A7C15ull) >> 40) + ((uint8_t)s[tok->len - 1] & 15)) & ps->rc_mask];
}

/* Size the register cache to the input: a slot per 8 tokens, 256 to 8K (a
 * bigger one falls out of the CPU cache and misses more than it saves).
 * Without memory there is no cache: every lookup takes the slow path. */
static void regcache_alloc(pstate *ps)
{
  size_t n = 256;
  while (n < 8192 && n * 8 < ps->nt) n *= 2;
  ps->rc = calloc(n, sizeof(regcache));
  ps->rc_mask = (uint32_t)n - 1;
  ps->rc_gen = 1;   /* zeroed entries hold generation 0: never current */
}

/* A .reg of a plain name or a new function: names seen so far may mean
 * other registers now, so every cache entry goes stale at once. */
static void regcache_forget(pstate *ps) { ps->rc_gen++; }

/* Consume a word token and resolve it as a register into *reg (-1: it
 * names none); its lex index. A name resolved before (in this function,
 * since the last .reg of a plain name) is found in the register cache by
 * its bytes, without interning it: its spelling is the register's name
 * symbol, which is that text interned. */
static uint32_t take_register(pstate *ps, int32_t *reg)
{
  size_t k = ps->pos;
  uint64_t name = 0;
  regcache *c = ps->f && !ps->raw ? regcache_slot(ps, k, &name) : NULL;
  if (c && c->name == name && c->gen == ps->rc_gen) {
    *reg = c->reg;
    return take_as(ps, ps->f->reg_name[c->reg]);
  }
  uint32_t x = take_as(ps, SPELL_FRESH);   /* most are first uses of a register */
  *reg = reg_lookup(ps, k, ps->m->lex[x].spell);
  if (c && *reg >= 0) *c = (regcache){ name, *reg, ps->rc_gen };
  return x;
}

/* ---------------------------------------------------------------- items */

/* Append an item to the current function body, or to the top level. */
static lpx_item *item_add(pstate *ps, int kind, uint32_t lex)
{
  lpx_item *it;
  if (ps->f) {
    GROW(ps, ps->f->items, ps->f->items_cap, ps->f->nitems + 1);
    it = &ps->f->items[ps->f->nitems++];
  } else {
    GROW(ps, ps->m->top, ps->m->top_cap, ps->m->ntop + 1);
    it = &ps->m->top[ps->m->ntop++];
  }
  memset(it, 0, sizeof *it);
  it->kind = (uint8_t)kind;
  it->guard = -1;
  it->lex = ps->lex_base + lex;
  it->nlex = (uint32_t)(ps->pos - lex);
  it->ops = ps->f ? (uint32_t)ps->f->nops : 0;
  return it;
}

/* Consume the rest of a line directive (.loc, .file, @@DWARF, .version):
 * every token up to the next line break. */
static void take_line(pstate *ps)
{
  take(ps);
  while (cur(ps)->kind != LPX_TK_EOF && !cur(ps)->nl) take(ps);
}

/* Consume a statement through its ';' (braces of initializers nest). */
static void take_statement(pstate *ps)
{
  size_t start = ps->pos;
  int depth = 0;
  for (;;) {
    const lpx_tok *tok = cur(ps);
    if (tok->kind == LPX_TK_EOF) perr(ps, ps->pos, "expected ';' to end the statement started at line %d", line_of(ps, start));
    if (is_punct(ps, tok, '}') && depth == 0) perr_after(ps, ps->pos, "expected ';' before '}'");
    depth += is_punct(ps, tok, '{') - is_punct(ps, tok, '}');
    take(ps);
    if (depth == 0 && is_punct(ps, tok, ';')) return;
  }
}

/* ------------------------------------------------------------ declarations */

/* State-space directives a variable may be declared in. */
static const char *const var_spaces[] = { ".shared", ".global", ".const", ".local", NULL };
/* Linkage directives, numbered as lpx_func_begin's linkage codes. */
static const char *const linkages[] = { "", ".visible", ".extern", ".weak", ".common", NULL };

/* Index of tok's text in a NULL-terminated list, or -1. */
static int word_index(pstate *ps, const lpx_tok *tok, const char *const *list)
{
  for (int i = 0; list[i]; i++)
    if (is_word(ps, tok, list[i])) return i;
  return -1;
}

/* The type named by a directive token (".f32"), or -1. */
static int32_t type_of(pstate *ps, const lpx_tok *tok)
{
  char buf[16];
  if (!is_dotword(ps, tok) || tok->len > 10) return -1;
  return lpx_type_lookup(tok_text(ps, tok, buf, sizeof buf) + 1);
}

/* Append one initializer literal (text) of type ty to v's bytes; 0, or -1
 * when it is not a number (an address-of initializer). */
static int init_literal(lpx_var *v, int ty, const char *text, int negative)
{
  const lpx_type_desc *t = &lpx_types[ty];
  int bytes = t->bits / 8 ? t->bits / 8 : 1;
  uint8_t out[8] = { 0 };
  if ((text[0] == '0') && (text[1] == 'f' || text[1] == 'F' || text[1] == 'd' || text[1] == 'D')) {
    uint64_t bits = strtoull(text + 2, NULL, 16);
    memcpy(out, &bits, 8);
  } else if (t->kind == 'F' && bytes >= 4) {
    double x = strtod(text, NULL) * (negative ? -1 : 1);
    float f = (float)x;
    if (bytes == 4) memcpy(out, &f, 4); else memcpy(out, &x, 8);
  } else if ((text[0] >= '0' && text[0] <= '9')) {
    int base = text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? 16 : text[0] == '0' && (text[1] == 'b' || text[1] == 'B') ? 2 : text[0] == '0' && text[1] ? 8 : 10;
    uint64_t u = strtoull(text + (base == 16 || base == 2 ? 2 : 0), NULL, base);
    if (negative) u = (uint64_t)0 - u;
    memcpy(out, &u, 8);
  } else {
    return -1;
  }
  uint8_t *grown = realloc(v->init, v->init_len + (uint32_t)bytes);
  if (!grown) return -1;
  v->init = grown;
  memcpy(v->init + v->init_len, out, (size_t)bytes);   /* little-endian, as the GPU */
  v->init_len += (uint32_t)bytes;
  return 0;
}

/* An address-of initializer element: 8 zero bytes now, and a relocation
 * (offset, symbol) the loader patches with the symbol's address. */
static int init_reloc(pstate *ps, lpx_var *v, const lpx_tok *tok)
{
  if (lpx_types[v->type].bits != 64) return -1;
  int32_t *r = realloc(v->relocs, (v->nrelocs + 1) * 2 * sizeof(int32_t));
  if (!r) return -1;
  v->relocs = r;
  r[2 * v->nrelocs] = (int32_t)v->init_len;
  r[2 * v->nrelocs + 1] = intern(ps, ps->src + tok->off, tok->len);
  v->nrelocs++;
  return init_literal(v, v->type, "0", 0);
}

/* Append a folded constant expression of v's type to its bytes; -1 if it
 * does not fit the type's kind (a float for an integer variable). */
static int init_folded(lpx_var *v, const lpx_cval *c)
{
  char buf[64];
  if (c->is_float) snprintf(buf, sizeof buf, "%.17g", c->d);
  else if (lpx_types[v->type].kind == 'F') snprintf(buf, sizeof buf, "%.17g", c->is_unsigned ? (double)(uint64_t)c->i : (double)c->i);
  else snprintf(buf, sizeof buf, "%llu", (unsigned long long)(uint64_t)c->i);
  if (c->is_float && lpx_types[v->type].kind != 'F') return -1;
  int neg = buf[0] == '-';
  return init_literal(v, v->type, buf + neg, neg);
}

/* The end of the initializer element starting at k: the next ',' or
 * closing brace outside parentheses. */
static size_t init_element_end(pstate *ps, size_t k, size_t b)
{
  int depth = 0;
  for (; k < b; k++) {
    if (is_punct(ps, &ps->t[k], '(')) depth++;
    else if (is_punct(ps, &ps->t[k], ')')) depth--;
    else if (depth <= 0 && (is_punct(ps, &ps->t[k], ',') || is_punct(ps, &ps->t[k], '}') || is_punct(ps, &ps->t[k], ';'))) break;
  }
  return k;
}

/* One initializer element: where it ends (init_element_end), and one past
 * the last token in it that cannot be part of a constant expression and
 * one past its last number (0: none), so that whether the tokens from any
 * j to the end could be an expression is known without scanning again. */
typedef struct init_elem {
  size_t end, bad1, num1;
} init_elem;

/* Scan the element starting at token k. */
static init_elem init_element(pstate *ps, size_t k, size_t b)
{
  init_elem el = { init_element_end(ps, k, b), 0, 0 };
  for (size_t j = k; j < el.end; j++) {
    int what = lpx_cexpr_token(ps->src, &ps->t[j]);
    if (!what) el.bad1 = j + 1;
    else if (what == 2) el.num1 = j + 1;
  }
  return el;
}

/* Fold the constant expression [k, e) into v's bytes; a malformed one
 * leaves the initializer symbolic. One nested too deep is an error, but
 * v's buffers must be freed before unwinding: 0, or that token + 1. */
static size_t init_expr(pstate *ps, lpx_var *v, size_t k, size_t e)
{
  lpx_cval c;
  size_t at;
  int rc = lpx_cexpr_eval(ps->src, ps->t, k, e, &c, &at);
  if (rc == LPX_CEXPR_DEEP) return at + 1;
  if (rc || init_folded(v, &c)) v->init_symbolic = 1;
  return 0;
}

/* Decode the initializer tokens [k, b) of v (nested braces flattened;
 * generic(sym) and sym become relocations; constant expressions fold).
 * Each token is looked at a bounded number of times: braces nest without
 * cost. 0, or the token + 1 of an expression nested too deep. */
static size_t decl_init(pstate *ps, lpx_var *v, size_t k, size_t b)
{
  char buf[128];
  int negative = 0;
  init_elem el = { k, 0, 0 };
  for (; k < b && !v->init_symbolic; k++) {
    const lpx_tok *tok = &ps->t[k];
    if (k >= el.end) el = init_element(ps, k, b);
    size_t e = el.end;
    if (e - k > 1 && !(e - k == 2 && is_punct(ps, tok, '-')) && el.bad1 <= k && el.num1 > k) {
      size_t deep = init_expr(ps, v, k, e);
      if (deep) return deep;
      k = e - 1;
      continue;
    }
    if (is_punct(ps, tok, '{') || is_punct(ps, tok, '}') || is_punct(ps, tok, ',') || is_punct(ps, tok, ';')) continue;
    if (is_punct(ps, tok, '(') || is_punct(ps, tok, ')') || is_word(ps, tok, "generic")) continue;
    if (is_punct(ps, tok, '-')) { negative = 1; continue; }
    if (is_ident(ps, tok)) { if (init_reloc(ps, v, tok)) v->init_symbolic = 1; continue; }
    if (tok->len >= sizeof buf || init_literal(v, v->type, tok_text(ps, tok, buf, sizeof buf), negative)) v->init_symbolic = 1;
    negative = 0;
  }
  return 0;
}

/* The most bytes one variable of each state space may take (what the
 * hardware or ptxas allows), as (space, limit, what the limit is). */
#define SPACE_LIMITS(X) \
  X(".shared", LPX_SHARED_MAX, "the most shared memory a CTA can have") \
  X(".local", LPX_LOCAL_MAX, "the most local memory a thread can have") \
  X(".const", LPX_CONST_MAX, "the constant bank a module's .const variables share") \
  X(".global", LPX_GLOBAL_MAX, "the largest global variable luaptx accepts (256 TiB)")

#define SPACE_LIMIT_ROW(space, max, what) { space, max, what },
static const struct { const char *space; uint64_t max; const char *what; } space_limits[] = { SPACE_LIMITS(SPACE_LIMIT_ROW) };

/* Refuse count elements of type ty named by token k when their bytes pass
 * max (why: what that limit is; space: where); else their byte size. */
static uint64_t check_bytes(pstate *ps, size_t k, int32_t ty, uint64_t count, const char *space, uint64_t max, const char *why)
{
  uint64_t el = ((uint64_t)lpx_types[ty].bits + 7) / 8;
  if (el == 0) el = 1;
  if (count <= max / el) return count * el;
  char bytes[32];
  if (count > UINT64_MAX / el) snprintf(bytes, sizeof bytes, "more than 2^64");
  else snprintf(bytes, sizeof bytes, "%" PRIu64, count * el);
  perr(ps, k, "%.*s: %" PRIu64 " elements of .%s are %s bytes, over %s: at most %" PRIu64 " bytes in %s", (int)ps->t[k].len,
       ps->src + ps->t[k].off, count, lpx_types[ty].name, bytes, why, max, space);
  return 0;
}

/* Refuse an .align value that is not a power of two (token k holds it). */
static int32_t check_align(pstate *ps, size_t k)
{
  uint64_t v;
  if (k >= ps->nt || ps->t[k].kind != LPX_TK_NUM || parse_int(ps->src + ps->t[k].off, ps->t[k].len, &v))
    perr(ps, k, ".align: expected a power of two");
  if (v == 0 || (v & (v - 1)) || v > ((uint64_t)1 << 30))
    perr(ps, k, ".align %.*s: an alignment must be a power of two from 1 to 2^30", (int)(ps->t[k].len < 40 ? ps->t[k].len : 40),
         ps->src + ps->t[k].off);
  return (int32_t)v;
}

/* Multiply an array's element count by the dimension at token k ([k] is
 * its first token), refusing a count that passes 2^64. */
static uint64_t array_dim(pstate *ps, size_t k, uint64_t count)
{
  uint64_t d;
  if (ps->t[k].kind != LPX_TK_NUM || parse_int(ps->src + ps->t[k].off, ps->t[k].len, &d)) return 0;
  if (d && count > UINT64_MAX / d) perr(ps, k, "array size overflows: more than 2^64 elements");
  return count * d;
}

/* Check the size of a variable of space (".shared") against its limit
 * (token k: its name). */
static void check_var_size(pstate *ps, size_t k, const char *space, int32_t ty, uint64_t count)
{
  for (size_t i = 0; i < sizeof space_limits / sizeof space_limits[0]; i++)
    if (strcmp(space_limits[i].space, space) == 0) check_bytes(ps, k, ty, count, space, space_limits[i].max, space_limits[i].what);
}

/* Record the variable a declaration's tokens [a, b) describe (best effort:
 * space, linkage, alignment, type, name, array size); nothing if partial. */
static void decl_var(pstate *ps, size_t a, size_t b)
{
  lpx_var v = { -1, -1, -1, 0, 0, 0, 1, NULL, 0, 0, NULL, 0 };
  size_t k = a, name = a;
  uint64_t count = 0;
  const char *space = NULL;
  for (; k < b && !is_punct(ps, &ps->t[k], '='); k++) {
    const lpx_tok *tok = &ps->t[k];
    int i;
    if ((i = word_index(ps, tok, var_spaces)) >= 0) {
      v.space = intern(ps, var_spaces[i] + 1, strlen(var_spaces[i]) - 1);
      space = var_spaces[i];
    }
    else if ((i = word_index(ps, tok, linkages)) > 0) v.linkage = i;
    else if (is_word(ps, tok, ".align") && k + 1 < b) v.align = check_align(ps, k + 1);
    else if (type_of(ps, tok) >= 0) v.type = type_of(ps, tok);
    else if (is_ident(ps, tok) && v.sym < 0) { v.sym = intern(ps, ps->src + tok->off, tok->len); name = k; }
    else if (is_punct(ps, tok, '[') && is_punct(ps, &ps->t[k + 1], ']')) v.count = -1;
    else if (is_punct(ps, tok, '[') && v.count >= 0) count = array_dim(ps, k + 1, count ? count : 1);
  }
  if (v.space < 0 || v.sym < 0 || v.type < 0) return;
  if (v.count >= 0) check_var_size(ps, name, space, v.type, count ? count : 1);
  if (v.count >= 0) v.count = (int64_t)count;
  size_t deep = k < b ? decl_init(ps, &v, k + 1, b) : 0;
  if (deep) {   /* v is not the module's yet: free its bytes before unwinding */
    free(v.init);
    free(v.relocs);
    perr(ps, deep - 1, "constant expression nested deeper than %d levels (parentheses and ?: branches)", LPX_CEXPR_MAX_DEPTH);
  }
  lpx_var **arr = ps->f ? &ps->f->vars : &ps->m->vars;
  size_t *n = ps->f ? &ps->f->nvars : &ps->m->nvars, *cap = ps->f ? &ps->f->vars_cap : &ps->m->vars_cap;
  if (lpx_grow((void **)arr, cap, *n + 1, sizeof(lpx_var))) poom(ps);
  (*arr)[(*n)++] = v;
}

/* A directive statement through ';' as a DIR item, recording a variable. */
static void parse_decl(pstate *ps)
{
  size_t start = ps->pos;
  take_statement(ps);
  decl_var(ps, start, ps->pos);
  item_add(ps, LPX_ITEM_DIR, (uint32_t)start);
}

/* A line directive as a DIR item. */
static void parse_line_directive(pstate *ps)
{
  size_t start = ps->pos;
  take_line(ps);
  item_add(ps, LPX_ITEM_DIR, (uint32_t)start);
}

/* ptx.raw: a range is declared for good (later ptx.raw calls use it), so
 * its registers are made now rather than on first use. */
static void raw_range(pstate *ps, size_t k, uint32_t n, int32_t type)
{
  char name[64];
  if (n > 65536 || ps->t[k].len > 40) perr(ps, k, "register range too large for ptx.raw (at most 65536)");
  for (uint32_t i = 0; i < n; i++) {
    int len = snprintf(name, sizeof name, "%.*s%u", (int)ps->t[k].len, ps->src + ps->t[k].off, i);
    int32_t sym = intern(ps, name, (size_t)len);
    if (name_get(ps, sym, name, (size_t)len) < 0) reg_create(ps, sym, type);
  }
}

/* One name in a .reg declaration: name, or name<N> (a range). */
static void parse_reg_name(pstate *ps, int32_t type)
{
  size_t k = ps->pos;
  if (!is_ident(ps, cur(ps))) perr(ps, k, "expected a register name in .reg");
  if (is_punct(ps, peek(ps, 1), '<')) {
    take(ps); take(ps);
    if (cur(ps)->kind != LPX_TK_NUM) perr(ps, ps->pos, "expected a register count after '<'");
    uint64_t n;
    if (parse_int(ps->src + cur(ps)->off, cur(ps)->len, &n)) perr(ps, ps->pos, "malformed register count");
    if (n > 0x7fffffff) perr(ps, ps->pos, "register count %.*s too large: at most 2147483647", (int)(cur(ps)->len < 40 ? cur(ps)->len : 40), ps->src + cur(ps)->off);
    take(ps);
    expect(ps, '>', "to close the register range");
    GROW(ps, ps->ranges, ps->ranges_cap, ps->nranges + 1);
    ps->ranges[ps->nranges++] = (regrange){ ps->src + ps->t[k].off, ps->t[k].len, (uint32_t)n, type };
    if (ps->raw) raw_range(ps, k, (uint32_t)n, type);
    return;
  }
  uint32_t x = take(ps);
  int32_t key = ps->m->lex[x].spell;
  if (ps->block_depth > 0) {   /* shadows the name until the block closes */
    GROW(ps, ps->shadows, ps->shadows_cap, ps->nshadows + 1);
    nameslot prev = (size_t)key < ps->names_cap ? ps->names[key] : (nameslot){ -1, 0 };
    ps->shadows[ps->nshadows++] = (shadow){ key, prev, ps->block_depth };
  }
  lex_set_reg(ps, x, k, reg_create(ps, key, type));
  regcache_forget(ps);
}

/* Is tok a .reg directive: ".reg", or ".reg.b32" with the type glued on
 * (cuda_fp16.h's inline PTX writes "{.reg.b32 f;")? */
static int is_reg_directive(pstate *ps, const lpx_tok *tok)
{
  return is_word(ps, tok, ".reg") || (is_dotword(ps, tok) && tok->len > 5 && memcmp(ps->src + tok->off, ".reg.", 5) == 0);
}

/* The last type among the dotted words of the n bytes at s (".v2.b32"), or -1. */
static int32_t glued_type(const char *s, size_t n)
{
  int32_t type = -1;
  for (size_t a = 0; a < n;) {
    size_t b = a + 1;
    while (b < n && s[b] != '.') b++;
    char buf[16];
    if (b - a - 1 < sizeof buf) {
      memcpy(buf, s + a + 1, b - a - 1);
      buf[b - a - 1] = '\0';
      if (lpx_type_lookup(buf) >= 0) type = lpx_type_lookup(buf);
    }
    a = b;
  }
  return type;
}

/* .reg [.v2] .type name, name<N>, ...; (or .reg.type ...) */
static void parse_reg_decl(pstate *ps)
{
  size_t start = ps->pos;
  int32_t type = glued_type(ps->src + cur(ps)->off + 4, cur(ps)->len - 4);
  take(ps);
  while (is_dotword(ps, cur(ps))) {
    if (type_of(ps, cur(ps)) >= 0) type = type_of(ps, cur(ps));
    take(ps);
  }
  if (type < 0) perr(ps, ps->pos, "expected a register type (.b32, .f32, .pred, ...) in .reg");
  for (;;) {
    parse_reg_name(ps, type);
    if (!is_punct(ps, cur(ps), ',')) break;
    take(ps);
  }
  expect(ps, ';', "to end the .reg declaration");
  item_add(ps, LPX_ITEM_DIR, (uint32_t)start);
}

/* ---------------------------------------------------------------- operands */

static void parse_operand(pstate *ps, int labels);

/* Append an operand slot with its token record; its index. */
static uint32_t opd_begin(pstate *ps, int kind)
{
  lpx_func *f = ps->f;
  GROW(ps, f->ops, f->ops_cap, f->nops + 1);
  GROW(ps, f->ops_lex, f->ops_lex_cap, f->nops + 1);
  memset(&f->ops[f->nops], 0, sizeof(lpx_operand));
  f->ops[f->nops].kind = kind;
  f->ops[f->nops].type = -1;
  f->ops_lex[f->nops].first = ps->lex_base + (uint32_t)ps->pos;
  f->nops_lex = f->nops + 1;
  return (uint32_t)f->nops++;
}

/* Close an operand: record its token count and the operand as parsed. */
static void opd_end(pstate *ps, uint32_t i)
{
  lpx_opd_lex *x = &ps->f->ops_lex[i];
  x->count = ps->lex_base + (uint32_t)ps->pos - x->first;
  x->digest = lpx_operand_digest(&ps->f->ops[i]);
}

/* A comma-separated list of operands up to the closing character; count. */
static int32_t parse_list(pstate *ps, char close, int labels)
{
  int32_t n = 0;
  if (is_punct(ps, cur(ps), close)) { take(ps); return 0; }
  for (;;) {
    parse_operand(ps, labels);
    n++;
    if (is_punct(ps, cur(ps), close)) { take(ps); return n; }
    if (!is_punct(ps, cur(ps), ',')) perr(ps, ps->pos, "expected ',' or '%c' in the operand list", close);
    take(ps);
  }
}

/* Does the bracket at the cursor hold a list ([tex, {x, y}])? */
static int bracket_is_list(pstate *ps)
{
  int depth = 0;
  for (size_t k = ps->pos; k < ps->nt && ps->t[k].kind != LPX_TK_EOF; k++) {
    const lpx_tok *tok = &ps->t[k];
    if (tok->kind != LPX_TK_PUNCT) continue;
    char c = ps->src[tok->off];
    depth += (c == '[' || c == '{' || c == '(') - (c == ']' || c == '}' || c == ')');
    if (depth == 0 || c == ';') return 0;
    if (depth == 1 && c == ',') return 1;
  }
  return 0;
}

static size_t operand_end(pstate *ps, size_t k);

/* Fold tokens [a, b) (a number or a constant expression) into an integer
 * offset; the cursor moves past them. */
static int64_t fold_offset(pstate *ps, size_t a, size_t b)
{
  lpx_operand one;
  lpx_cval v;
  size_t at;
  if (b == a + 1) {
    parse_number(ps, a, &one);
    if (one.kind != LPX_OPD_INT) perr(ps, a, "expected an integer offset");
    v.i = one.ival;
  } else {
    int rc = lpx_cexpr_eval(ps->src, ps->t, a, b, &v, &at);
    if (rc == LPX_CEXPR_DEEP) perr(ps, at, "constant expression nested deeper than %d levels (parentheses and ?: branches)", LPX_CEXPR_MAX_DEPTH);
    if (rc) perr(ps, a, "malformed constant expression (or a division by zero)");
    if (v.is_float) perr(ps, a, "expected an integer offset (the expression folds to a floating-point value)");
  }
  while (ps->pos < b) take(ps);
  return v.i;
}

/* An optional offset after a base, added to *ival: "+expr" (a number or a
 * constant expression up to the operand's end, as in [%r1+288+4] or
 * [%r1+(4*2)]), "-off" or "+-off". */
static void parse_offset(pstate *ps, int64_t *ival)
{
  int plus = is_punct(ps, cur(ps), '+'), minus = is_punct(ps, cur(ps), '-');
  if (!plus && !minus) return;
  size_t a = ps->pos + 1, b = operand_end(ps, a);
  if (!lpx_cexpr_tokens(ps->src, ps->t, a, b)) return;
  if (minus && b != a + 1)
    perr(ps, ps->pos, "after '-' an offset is one number; write an offset expression after '+' ([%%r1+-4+8]), as ptxas does");
  take(ps);
  int64_t off = fold_offset(ps, a, b);
  *ival = (int64_t)((uint64_t)*ival + (minus ? 0 - (uint64_t)off : (uint64_t)off));   /* wraps, no UB */
}

/* An address [base], [base+off], [base+-off], [imm] (an absolute address
 * may be a constant expression: [4*2]): one ADDR operand. */
static void parse_address(pstate *ps, lpx_operand *o)
{
  take(ps);
  const lpx_tok *tok = cur(ps);
  size_t end = operand_end(ps, ps->pos);
  if (lpx_cexpr_tokens(ps->src, ps->t, ps->pos, end)) {
    o->ival = fold_offset(ps, ps->pos, end);
    o->kind = LPX_OPD_ADDR;   /* an absolute address stays an address */
    o->aux = 0;
    o->id = -1;
  } else if (tok->kind == LPX_TK_WORD) {
    int32_t reg;
    uint32_t x = take_register(ps, &reg);
    int32_t sym = ps->m->lex[x].spell;
    o->aux = reg >= 0 ? LPX_OPD_REG : LPX_OPD_SYM;
    o->id = reg >= 0 ? reg : sym;
    if (reg >= 0) lex_set_reg(ps, x, ps->pos - 1, reg);
    o->ival = 0;
    parse_offset(ps, &o->ival);
  } else {
    perr(ps, ps->pos, "expected a register, symbol or integer address after '['");
  }
  expect(ps, ']', "to close the address");
}

/* A register with a video selector (%r1.b0, %r2.h10): the register, or -1;
 * *sel the selector. The token keeps its text (the formatter prints it). */
static int32_t selected_register(pstate *ps, size_t k, int64_t *sel)
{
  const char *s = ps->src + ps->t[k].off;
  uint32_t n = ps->t[k].len, dot = n;
  while (dot > 0 && s[dot - 1] != '.') dot--;
  if (dot < 2 || n - dot > 5) return -1;
  char suffix[8];
  memcpy(suffix, s + dot, n - dot);
  suffix[n - dot] = '\0';
  *sel = lpx_rules_selector(suffix);
  if (!*sel) return -1;
  int32_t sym = intern(ps, s, dot - 1);
  return reg_lookup_text(ps, s, dot - 1, sym);
}

/* A word operand: register (with a video selector), special register,
 * sink, symbol or label. */
static void parse_word_operand(pstate *ps, uint32_t i, int labels)
{
  size_t k = ps->pos;
  int32_t reg;
  int64_t sel = 0;
  uint32_t x = take_register(ps, &reg);
  int32_t sym = ps->m->lex[x].spell;
  lpx_operand *o = &ps->f->ops[i];
  if (reg >= 0) {
    o->kind = LPX_OPD_REG; o->id = reg; o->type = ps->f->reg_type[reg];
    lex_set_reg(ps, x, k, reg);
    return;
  }
  if (ps->f && (reg = selected_register(ps, k, &sel)) >= 0) {
    o->kind = LPX_OPD_REG; o->id = reg; o->type = ps->f->reg_type[reg]; o->ival = sel;
    return;
  }
  if (ps->t[k].len == 1 && ps->src[ps->t[k].off] == '_') { o->kind = LPX_OPD_SINK; return; }
  int32_t sr = ps->src[ps->t[k].off] == '%' ? lpx_special_lookup(lpx_strtab_get(&ps->m->syms, sym)) : -1;
  if (sr >= 0) { o->kind = LPX_OPD_SPECIAL; o->id = sr; o->type = lpx_special_type(sr); return; }
  o->kind = labels ? LPX_OPD_LABEL : LPX_OPD_SYM;
  o->id = sym;
  if (!labels) parse_offset(ps, &ps->f->ops[i].ival);
}

/* Where an operand starting at token k ends: the first ',' ';' or
 * unmatched closer at its own nesting depth. */
static size_t operand_end(pstate *ps, size_t k)
{
  int depth = 0;
  for (; k < ps->nt && ps->t[k].kind != LPX_TK_EOF; k++) {
    const lpx_tok *t = &ps->t[k];
    if (t->kind != LPX_TK_PUNCT) continue;
    char c = ps->src[t->off];
    if (c == '(' || c == '[' || c == '{') depth++;
    else if (c == ')' || c == ']' || c == '}') { if (depth-- == 0) break; }
    else if ((c == ',' || c == ';') && depth == 0) break;
  }
  return k;
}

/* Store a folded constant as an operand: an exact integer, or a double. */
static void const_operand(lpx_operand *o, const lpx_cval *v)
{
  if (v->is_float) { o->kind = LPX_OPD_FIMM; o->type = LPX_T_F64; memcpy(&o->ival, &v->d, 8); }
  else { o->kind = LPX_OPD_INT; o->type = -1; o->ival = v->i; o->aux = v->is_unsigned; }
}

/* A constant expression operand ((1+2)*4, 1<<4): folded, its tokens kept
 * for the lossless printer. 0 when the operand is not one. */
static int parse_const_expr(pstate *ps, lpx_operand *o)
{
  size_t a = ps->pos, b;
  const lpx_tok *t = cur(ps), *next = peek(ps, 1);
  int simple = t->kind == LPX_TK_NUM && next->kind == LPX_TK_PUNCT && strchr(",;)]}", ps->src[next->off]);
  if (simple || !(t->kind == LPX_TK_NUM || (t->kind == LPX_TK_PUNCT && strchr("(-+~!", ps->src[t->off])))) return 0;
  b = operand_end(ps, a);
  if (b - a < 2 || !lpx_cexpr_tokens(ps->src, ps->t, a, b)) return 0;
  if (b - a == 2 && is_punct(ps, t, '-')) return 0;   /* -5: the literal path keeps its notation */
  lpx_cval v;
  size_t at;
  int rc = lpx_cexpr_eval(ps->src, ps->t, a, b, &v, &at);
  if (rc == LPX_CEXPR_DEEP) perr(ps, at, "constant expression nested deeper than %d levels (parentheses and ?: branches)", LPX_CEXPR_MAX_DEPTH);
  if (rc) perr(ps, a, "malformed constant expression (or a division by zero)");
  const_operand(o, &v);
  while (ps->pos < b) take(ps);
  return 1;
}

/* One operand without a trailing '|'. */
static void parse_primary(pstate *ps, uint32_t i, int labels)
{
  const lpx_tok *tok = cur(ps);
  lpx_operand *o = &ps->f->ops[i];
  if (parse_const_expr(ps, o)) return;
  if (tok->kind == LPX_TK_WORD) { parse_word_operand(ps, i, labels); return; }
  if (tok->kind == LPX_TK_NUM) { parse_number(ps, ps->pos, o); take(ps); return; }
  if (is_punct(ps, tok, '-') && peek(ps, 1)->kind == LPX_TK_NUM) {
    take(ps); parse_number(ps, ps->pos, o); take(ps); negate_number(o);
    return;
  }
  if (is_punct(ps, tok, '!') && peek(ps, 1)->kind == LPX_TK_WORD) {
    take(ps);
    parse_word_operand(ps, i, labels);
    if (ps->f->ops[i].kind != LPX_OPD_REG) perr(ps, ps->pos - 1, "expected a predicate register after '!'");
    ps->f->ops[i].aux = 1;
    return;
  }
  if (is_punct(ps, tok, '-') && peek(ps, 1)->kind == LPX_TK_WORD) {   /* vmad's -%r */
    take(ps);
    parse_word_operand(ps, i, labels);
    if (ps->f->ops[i].kind != LPX_OPD_REG) perr(ps, ps->pos - 1, "expected a register after '-'");
    ps->f->ops[i].aux = LPX_REG_NEG;
    return;
  }
  if (is_punct(ps, tok, '[') && !bracket_is_list(ps)) { o->kind = LPX_OPD_ADDR; parse_address(ps, o); return; }
  char close = is_punct(ps, tok, '[') ? ']' : is_punct(ps, tok, '{') ? '}' : is_punct(ps, tok, '(') ? ')' : 0;
  if (!close) perr(ps, ps->pos, "expected an operand (register, number, symbol, [address], {vector})");
  int kind = close == ']' ? LPX_OPD_BRACKET : close == '}' ? LPX_OPD_VEC : LPX_OPD_PAREN;
  take(ps);
  int32_t n = parse_list(ps, close, labels);
  ps->f->ops[i].kind = kind;
  ps->f->ops[i].aux = n;
}

/* One operand, with a '|' second destination (%r2|%p1) wrapped in a PIPE. */
static void parse_operand(pstate *ps, int labels)
{
  if (++ps->nesting > MAX_NESTING) perr(ps, ps->pos, "operands nested more than %d deep", MAX_NESTING);
  uint32_t i = opd_begin(ps, 0);
  parse_primary(ps, i, labels);
  opd_end(ps, i);
  if (is_punct(ps, cur(ps), '|')) {
    lpx_func *f = ps->f;
    uint32_t pipe = opd_begin(ps, LPX_OPD_PIPE);   /* grow, then move it in front */
    memmove(&f->ops[i + 1], &f->ops[i], sizeof(lpx_operand) * (pipe - i));
    memmove(&f->ops_lex[i + 1], &f->ops_lex[i], sizeof(lpx_opd_lex) * (pipe - i));
    memset(&f->ops[i], 0, sizeof(lpx_operand));
    f->ops[i].kind = LPX_OPD_PIPE; f->ops[i].type = -1;
    f->ops_lex[i].first = f->ops_lex[i + 1].first;
    take(ps);
    parse_operand(ps, labels);
    opd_end(ps, i);
  }
  ps->nesting--;
}

/* ------------------------------------------------------------ instructions */

static int32_t form_intern_text(pstate *ps, size_t k);

/* The form of the opcode token k (spelled by symbol sym), cached per symbol. */
static int32_t form_of(pstate *ps, size_t k, int32_t sym)
{
  size_t need = (size_t)sym + 1, cap = ps->form_by_sym_cap;
  if (need > cap) {
    GROW(ps, ps->form_by_sym, ps->form_by_sym_cap, need);
    memset(ps->form_by_sym + cap, 0, (ps->form_by_sym_cap - cap) * sizeof(int32_t));
  }
  if (!ps->form_by_sym[sym]) ps->form_by_sym[sym] = form_intern_text(ps, k) + 1;
  return ps->form_by_sym[sym] - 1;
}

/* Intern an opcode form; one the table rejects still interns, unchecked. */
static int32_t form_intern_text(pstate *ps, size_t k)
{
  char text[256];
  const lpx_tok *tok = &ps->t[k];
  if (tok->len >= sizeof text) perr(ps, k, "opcode longer than %d characters", (int)sizeof text - 1);
  tok_text(ps, tok, text, sizeof text);
  lpx_ctx *ctx = ps->ctx;
  int32_t id = lpx_form_intern(ctx, text);
  if (id >= 0) return id;
  id = lpx_strtab_intern(&ctx->form_names, text, tok->len);
  if (id < 0 || LPX_RESERVE(ctx->forms, ctx->forms_cap, (size_t)id + 1)) poom(ps);
  memset(&ctx->forms[id], 0, sizeof(lpx_form));
  lpx_form_info *fi = &ctx->forms[id].info;
  fi->op = -1; fi->type = fi->type2 = fi->type3 = -1; fi->vec = 1;
  fi->text = lpx_strtab_get(&ctx->form_names, id);
  return id;
}

/* Is the opcode a branch, whose identifiers are labels? */
static int is_branch(pstate *ps, const lpx_tok *tok)
{
  const char *s = ps->src + tok->off;
  return tok->len >= 3 && (memcmp(s, "bra", 3) == 0 || memcmp(s, "brx", 3) == 0) &&
         (tok->len == 3 || s[3] == '.');
}

/* ptx.raw: hand a parsed instruction to lpx_append, which validates it
 * (opcode, operand kinds and types, arch) exactly as for a traced one. */
static void raw_commit(pstate *ps, size_t op, int32_t guard, int32_t neg, size_t first, size_t nops)
{
  char text[256];
  tok_text(ps, &ps->t[op], text, sizeof text);
  int32_t form = lpx_form_intern(ps->ctx, text);
  if (form < 0) perr(ps, op, "%s", ps->ctx->error);
  lpx_func *f = ps->f;
  lpx_operand *copy = malloc(sizeof(lpx_operand) * (nops ? nops : 1));
  if (!copy) poom(ps);
  if (nops) memcpy(copy, f->ops + first, sizeof(lpx_operand) * nops);
  f->nops = f->nops_lex = first;   /* lpx_append stores its own checked copy */
  int32_t rc = lpx_append(ps->m, ps->fn, form, guard, neg, (int32_t)nops, copy, ps->raw_file, ps->raw_line + line_of(ps, op) - 1);
  free(copy);
  if (rc < 0) {
    char msg[LPX_MSG_MAX];
    memcpy(msg, ps->ctx->error, sizeof msg);
    perr(ps, op, "%s", msg);
  }
}

/* lpx_parse_checked: validate a parsed instruction as lpx_append validates
 * a traced one (opcode, arch and PTX version, guard, operand kinds and
 * types), reporting the PTX file:line:col. */
static void strict_check(pstate *ps, size_t op, lpx_item *it, lpx_operand *ops)
{
  char text[256], msg[LPX_MSG_MAX];
  lpx_ctx *ctx = ps->ctx;
  const lpx_form *fo = &ctx->forms[it->form];
  lpx_form_get(ctx, it->form);
  if (fo->info.op < 0) {   /* interned unchecked: ask a fresh context for the table's reason */
    lpx_ctx *fresh = lpx_ctx_new();
    tok_text(ps, &ps->t[op], text, sizeof text);
    if (fresh && lpx_form_intern(fresh, text) < 0) snprintf(msg, sizeof msg, "%s", fresh->error);
    else snprintf(msg, sizeof msg, "%s: opcode not in luaptx's instruction table, so it can be neither checked nor run", text);
    lpx_ctx_free(fresh);
    perr(ps, op, "%s", msg);
  }
  if (it->guard >= 0 && ps->f->reg_type[it->guard] != LPX_T_PRED) perr(ps, op, "%s: the guard must be a predicate register", fo->info.text);
  if (lpx_check_arch(ps->m, &fo->info) == 0 && lpx_validate(ps->m, ps->f, fo, ops, it->nops, 0, it->line) == 0) return;
  memcpy(msg, ctx->error, sizeof msg);
  perr(ps, op, "%s", msg);
}

/* [@[!]p] opcode operand, ...; */
static void parse_instruction(pstate *ps)
{
  size_t start = ps->pos;
  int32_t guard = -1, neg = 0;
  if (is_punct(ps, cur(ps), '@')) {
    take(ps);
    if (is_punct(ps, cur(ps), '!')) { take(ps); neg = 1; }
    if (cur(ps)->kind != LPX_TK_WORD) perr(ps, ps->pos, "expected a predicate register after '@'");
    uint32_t x = take_register(ps, &guard);
    if (guard < 0) perr(ps, ps->pos - 1, "undeclared predicate register '%s'", lpx_strtab_get(&ps->m->syms, ps->m->lex[x].spell));
    ps->m->lex[x].role = LPX_LEX_GUARD;
  }
  if (!is_ident(ps, cur(ps))) perr(ps, ps->pos, "expected an opcode");
  size_t op = ps->pos;
  int labels = is_branch(ps, cur(ps));
  uint32_t x = take(ps);
  int32_t form = ps->raw ? -1 : form_of(ps, op, ps->m->lex[x].spell);   /* raw: strict, in raw_commit */
  ps->m->lex[x].role = LPX_LEX_OPCODE;
  size_t first_op = ps->f->nops;
  while (!is_punct(ps, cur(ps), ';')) {
    parse_operand(ps, labels);
    if (is_punct(ps, cur(ps), ';')) break;
    if (!is_punct(ps, cur(ps), ',')) perr_after(ps, ps->pos, "expected ',' or ';' after an operand of %.*s", (int)ps->t[op].len, ps->src + ps->t[op].off);
    take(ps);
  }
  take(ps);
  size_t nops = ps->f->nops - first_op;
  if (nops > 65535) perr(ps, op, "more than 65535 operands");
  if (ps->raw) { raw_commit(ps, op, guard, neg, first_op, nops); return; }
  lpx_item *it = item_add(ps, LPX_ITEM_INST, (uint32_t)start);
  it->ops = (uint32_t)first_op; it->nops = it->lex_nops = (uint16_t)nops;
  it->form = form; it->guard = guard; it->guard_neg = (uint8_t)neg;
  it->line = line_of(ps, op);
  ps->f->ninsts++;
  if (ps->strict) strict_check(ps, op, it, ps->f->ops + first_op);
}

/* name: */
static void parse_label(pstate *ps)
{
  size_t start = ps->pos;
  uint32_t x = take(ps);
  ps->m->lex[x].role = LPX_LEX_LABEL;
  take(ps);
  if (ps->raw) {
    if (lpx_label_place(ps->m, ps->fn, ps->m->lex[x].spell) < 0) {
      char msg[LPX_MSG_MAX];
      memcpy(msg, ps->ctx->error, sizeof msg);
      perr(ps, start, "%s", msg);
    }
    return;
  }
  item_add(ps, LPX_ITEM_LABEL, (uint32_t)start)->form = ps->m->lex[x].spell;
}

/* ---------------------------------------------------------------- bodies */

/* Directives that end at the line break rather than at ';'. */
static const char *const line_directives[] = { ".loc", ".file", "@@DWARF", ".version", ".target", ".address_size", NULL };

/* One statement of a function body. */
static void parse_body_statement(pstate *ps)
{
  const lpx_tok *tok = cur(ps);
  if (is_punct(ps, tok, '{') || is_punct(ps, tok, '}')) { size_t s = ps->pos; take(ps); item_add(ps, LPX_ITEM_DIR, (uint32_t)s); return; }
  if (is_reg_directive(ps, tok)) { parse_reg_decl(ps); return; }
  if (word_index(ps, tok, line_directives) >= 0) { parse_line_directive(ps); return; }
  if (is_dotword(ps, tok)) { parse_decl(ps); return; }
  if (is_ident(ps, tok) && is_punct(ps, peek(ps, 1), ':')) { parse_label(ps); return; }
  if (is_ident(ps, tok) || is_punct(ps, tok, '@')) { parse_instruction(ps); return; }
  perr(ps, ps->pos, "expected an instruction, label, directive or '}'");
}

/* Reserve a body's arrays from its token count (found by brace matching),
 * so that big kernels do not pay for repeated reallocation copies. */
static void body_reserve(pstate *ps, lpx_func *f)
{
  size_t k = ps->pos;
  for (int depth = 0; k < ps->nt && ps->t[k].kind != LPX_TK_EOF; k++) {
    depth += is_punct(ps, &ps->t[k], '{') - is_punct(ps, &ps->t[k], '}');
    if (depth < 0) break;
  }
  size_t n = k - ps->pos, regs = n / 8 + 16;   /* nvcc output: about a register per 8 tokens */
  if (ps->hook && n > BODY_CHUNK_TOKENS) n = BODY_CHUNK_TOKENS + 64;   /* printed chunk by chunk */
  GROW(ps, f->ops, f->ops_cap, n / 2 + 16);
  GROW(ps, f->ops_lex, f->ops_lex_cap, n / 2 + 16);
  GROW(ps, f->items, f->items_cap, n / 4 + 16);
  regs_reserve(ps, f, regs);
}

/* Count the { } scope the token at the cursor opens or closes (a counter:
 * nothing recurses on scopes, but nothing needs them deeper either). */
static void scope_depth(pstate *ps, int *depth)
{
  if (*depth > MAX_BLOCKS) perr(ps, ps->pos, "blocks { } nested deeper than %d levels", MAX_BLOCKS);
  *depth += is_punct(ps, cur(ps), '{') - is_punct(ps, cur(ps), '}');
  if (*depth >= ps->block_depth) { ps->block_depth = *depth; return; }
  ps->block_depth = *depth;   /* a block closed: its names mean what they meant before it */
  while (ps->nshadows > 0 && ps->shadows[ps->nshadows - 1].depth > *depth) {
    const shadow *sh = &ps->shadows[--ps->nshadows];
    ps->names[sh->key] = sh->prev;
  }
  regcache_forget(ps);
}

/* Streamed parse, inside a body once its lex entries pass a chunk: the
 * hook prints the items so far; then the body's items, operands and the
 * lex array start again (lex indices stay lex_base + token index), so a
 * long function costs memory for one chunk, not for its whole IR. Its
 * registers stay: later items name them. */
static void stream_body_step(pstate *ps, lpx_func *f)
{
  if (!ps->hook || ps->m->nlex < BODY_CHUNK_TOKENS) return;
  ps->hook(ps->m, f, ps->hook_arg);
  f->nitems = f->nops = f->nops_lex = 0;
  ps->m->nlex = 0;
  ps->lex_base = 0u - (uint32_t)ps->pos;
}

/* { statements } of a function; the function's closing brace is its tail. */
static void parse_body(pstate *ps, lpx_func *f, const char *name)
{
  int depth = 0;
  body_reserve(ps, f);
  for (;;) {
    const lpx_tok *tok = cur(ps);
    if (tok->kind == LPX_TK_EOF) perr(ps, ps->pos, "expected '}' to close the body of %s", name);
    if (is_punct(ps, tok, '}') && depth == 0) { f->tail_lex = take(ps); return; }
    scope_depth(ps, &depth);
    parse_body_statement(ps);
    stream_body_step(ps, f);
  }
}

/* --------------------------------------------------------------- functions */

/* State spaces a .ptr parameter attribute may name. */
static const char *const ptr_spaces[] = { ".global", ".shared", ".const", ".local", NULL };

/* The most bytes of parameters a kernel may take: 32764 from PTX ISA 8.1
 * on, 4352 before (ptxas: "uses too much parameter space"). */
static uint64_t param_max(pstate *ps) { return ps->m->ptx_version >= 81 ? 32764 : 4352; }

/* What param_max is, for messages. */
static const char *param_why(pstate *ps)
{
  return ps->m->ptx_version >= 81 ? "a kernel's parameter space" : "a kernel's parameter space before PTX ISA 8.1";
}

/* Refuse an entry whose parameters, laid out with their alignments, pass
 * param_max (token k: the closing parenthesis). */
static void check_param_space(pstate *ps, size_t k)
{
  uint64_t end = 0;
  for (size_t i = 0; i < ps->f->nparams; i++) {
    const lpx_param *p = &ps->f->params[i];
    uint64_t el = ((uint64_t)lpx_types[p->type].bits + 7) / 8, align = p->align > 0 ? (uint64_t)p->align : el ? el : 1;
    end = (end + align - 1) / align * align + el * (uint64_t)(p->count > 0 ? p->count : 1);
  }
  if (end > param_max(ps))
    perr(ps, k, "the kernel's parameters take %" PRIu64 " bytes, over %s: at most %" PRIu64 " bytes", end, param_why(ps), param_max(ps));
}

/* Record a parameter from its tokens [a, b): space, type, alignment,
 * .ptr attributes (.ptr [.space] [.align n]), name, [N]. */
static void param_add(pstate *ps, size_t a, size_t b, int is_ret)
{
  lpx_param p = { -1, -1, 0, 0, 0, -1, 0 };
  int ptr = 0;
  size_t name = a;
  uint64_t count = 0;
  for (size_t k = a; k < b; k++) {
    const lpx_tok *tok = &ps->t[k];
    if (is_word(ps, tok, ".align") && k + 1 < b) *(ptr ? &p.ptr_align : &p.align) = check_align(ps, k + 1);
    else if (is_word(ps, tok, ".reg")) p.is_reg = 1;
    else if (is_word(ps, tok, ".ptr")) ptr = 1;
    else if (ptr && word_index(ps, tok, ptr_spaces) >= 0) p.ptr_space = intern(ps, ps->src + tok->off + 1, tok->len - 1);
    else if (type_of(ps, tok) >= 0) p.type = type_of(ps, tok);
    else if (is_ident(ps, tok) && p.sym < 0) { p.sym = intern(ps, ps->src + tok->off, tok->len); name = k; }
    else if (is_punct(ps, tok, '[') && k + 1 < b && ps->t[k + 1].kind == LPX_TK_NUM) count = array_dim(ps, k + 1, count ? count : 1);
  }
  if (ptr && !p.ptr_align && p.ptr_space < 0) p.ptr_align = -1;   /* a bare .ptr */
  if (p.sym < 0 || p.type < 0) return;
  if (ps->f->is_entry) check_bytes(ps, name, p.type, count ? count : 1, ".param", param_max(ps), param_why(ps));
  else check_bytes(ps, name, p.type, count ? count : 1, ".param", LPX_LOCAL_MAX, "the most local memory a thread can have "
                   "(where a device function's parameters live)");
  p.count = (int32_t)count;
  lpx_func *f = ps->f;
  if (is_ret) { GROW(ps, f->rets, f->rets_cap, f->nrets + 1); f->rets[f->nrets++] = p; }
  else { GROW(ps, f->params, f->params_cap, f->nparams + 1); f->params[f->nparams++] = p; }
}

/* ( .param .type name, ... ): parameters (record 1) or return values (2). */
static void parse_params(pstate *ps, int record)
{
  take(ps);
  if (is_punct(ps, cur(ps), ')')) { take(ps); return; }
  for (;;) {
    size_t a = ps->pos;
    while (!is_punct(ps, cur(ps), ',') && !is_punct(ps, cur(ps), ')')) {
      if (cur(ps)->kind == LPX_TK_EOF || is_punct(ps, cur(ps), '{') || is_punct(ps, cur(ps), ';'))
        perr(ps, ps->pos, "expected ',' or ')' in the parameter list");
      take(ps);
    }
    if (record) param_add(ps, a, ps->pos, record == 2);
    if (is_punct(ps, cur(ps), ')')) {
      if (record == 1 && ps->f->is_entry) check_param_space(ps, ps->pos);
      take(ps);
      return;
    }
    take(ps);
  }
}

/* Performance and attribute directives after the parameters, up to '{' or ';'. */
static void parse_func_directives(pstate *ps, int32_t fn)
{
  while (!is_punct(ps, cur(ps), '{') && !is_punct(ps, cur(ps), ';')) {
    if (!is_dotword(ps, cur(ps))) perr(ps, ps->pos, "expected a directive (.maxntid, .reqntid, ...), '{' or ';'");
    size_t a = ps->pos;
    if (is_word(ps, cur(ps), ".pragma")) take_statement(ps);
    else {
      take(ps);
      while (cur(ps)->kind == LPX_TK_NUM || is_punct(ps, cur(ps), ',')) take(ps);
    }
    lpx_buf b = { 0 };
    lpx_print_tokens(&b, ps->m, ps->lex_base + (uint32_t)a, (uint32_t)(ps->pos - a), NULL);
    int rc = b.p ? lpx_func_directive(ps->m, fn, b.p) : -1;
    lpx_buf_free(&b);
    if (rc) poom(ps);
  }
}

/* Give a new function record the spare body arrays, if any (empty). */
static void func_adopt(pstate *ps, lpx_func *f)
{
  spare_body *sp = &ps->spare;
  f->items = sp->items; f->items_cap = sp->items_cap;
  f->ops = sp->ops; f->ops_cap = sp->ops_cap;
  f->ops_lex = sp->ops_lex; f->ops_lex_cap = sp->ops_lex_cap;
  f->reg_type = sp->reg_type; f->reg_index = sp->reg_index; f->regs_cap = sp->regs_cap;
  f->reg_name = sp->reg_name; f->reg_names_cap = sp->reg_names_cap;
  memset(sp, 0, sizeof *sp);
}

/* Empty a printed function record, keeping its body arrays as the spare
 * ones when there are none (else freeing them). */
static void func_recycle(pstate *ps, lpx_func *f)
{
  spare_body *sp = &ps->spare;
  if (sp->items || sp->ops || sp->ops_lex || sp->reg_type || sp->reg_index || sp->reg_name) {
    free(f->items); free(f->ops); free(f->ops_lex); free(f->reg_type); free(f->reg_index); free(f->reg_name);
  } else {
    *sp = (spare_body){ f->items, f->items_cap, f->ops, f->ops_cap, f->ops_lex, f->ops_lex_cap,
                        f->reg_type, f->reg_index, f->reg_name, f->regs_cap, f->reg_names_cap };
  }
  f->items = NULL; f->ops = NULL; f->ops_lex = NULL; f->reg_type = NULL; f->reg_index = NULL; f->reg_name = NULL;
  f->items_cap = f->ops_cap = f->ops_lex_cap = f->regs_cap = f->reg_names_cap = 0;
  f->nitems = f->nops = f->nops_lex = f->nregs = f->nreg_names = f->ninsts = 0;
}

/* Open a function record (dropped again if this is only a declaration). */
static int32_t func_open(pstate *ps, int is_entry, int linkage)
{
  lpx_module *m = ps->m;
  GROW(ps, m->funcs, m->funcs_cap, m->nfuncs + 1);
  lpx_func *f = &m->funcs[m->nfuncs];
  memset(f, 0, sizeof *f);
  func_adopt(ps, f);
  f->is_entry = is_entry;
  f->linkage = linkage;
  f->sym = -1;
  ps->f = f;
  ps->names_gen++;
  ps->nranges = 0;
  ps->nshadows = 0;
  ps->block_depth = 0;
  regcache_forget(ps);
  return (int32_t)m->nfuncs++;
}

/* Free every array a function record may own. */
static void func_release(lpx_func *f)
{
  free(f->params); free(f->rets); free(f->directives); free(f->vars);
  free(f->reg_type); free(f->reg_index); free(f->reg_name);
  free(f->items); free(f->ops); free(f->ops_lex);
}

/* Forget a function record that turned out to be a declaration. */
static void func_drop(pstate *ps)
{
  func_recycle(ps, ps->f);
  func_release(ps->f);
  ps->m->nfuncs--;
  ps->f = NULL;
}

/* [linkage] .entry|.func [(returns)] name [(params)] [directives] { body } | ; */
static void parse_function(pstate *ps)
{
  size_t start = ps->pos;
  int linkage = 0, is_entry = 0;
  for (; !is_word(ps, cur(ps), ".entry") && !is_word(ps, cur(ps), ".func"); take(ps))
    if (word_index(ps, cur(ps), linkages) > 0) linkage = word_index(ps, cur(ps), linkages);
  is_entry = is_word(ps, cur(ps), ".entry");
  take(ps);
  int32_t fn = func_open(ps, is_entry, linkage);
  if (is_punct(ps, cur(ps), '(')) parse_params(ps, 2);
  if (!is_ident(ps, cur(ps))) perr(ps, ps->pos, "expected a function name");
  char name[128];
  tok_text(ps, cur(ps), name, sizeof name);
  ps->f->sym = ps->m->lex[take(ps)].spell;
  if (is_punct(ps, cur(ps), '(')) parse_params(ps, 1);
  parse_func_directives(ps, fn);
  if (is_punct(ps, cur(ps), ';')) {
    func_drop(ps);
    take(ps);
    item_add(ps, LPX_ITEM_DIR, (uint32_t)start);
    return;
  }
  if (ps->raw) perr(ps, ps->pos, "function definitions cannot be added to a traced module (declarations only)");
  lpx_func *f = ps->f;
  for (size_t i = 0; i < f->nrets; i++)   /* .reg returns and parameters are registers of the body */
    if (ps->f->rets[i].is_reg) reg_create(ps, ps->f->rets[i].sym, ps->f->rets[i].type);
  for (size_t i = 0; i < f->nparams; i++)
    if (ps->f->params[i].is_reg) reg_create(ps, ps->f->params[i].sym, ps->f->params[i].type);
  f = ps->f;
  f->head_lex = ps->lex_base + (uint32_t)start;
  take(ps);
  f->head_nlex = (uint32_t)(ps->pos - start);
  parse_body(ps, f, name);
  ps->f = NULL;
  lpx_item *it = item_add(ps, LPX_ITEM_FUNC, (uint32_t)start);
  it->form = fn;
}

/* ---------------------------------------------------------------- modules */

/* Is the declaration at the cursor a function (.entry/.func after linkage)? */
static int at_function(pstate *ps)
{
  for (size_t k = 0;; k++) {
    const lpx_tok *tok = peek(ps, k);
    if (is_word(ps, tok, ".entry") || is_word(ps, tok, ".func")) return 1;
    if (word_index(ps, tok, linkages) <= 0) return 0;
  }
}

/* Record .target (the directive at token k) in the module's fields, its
 * entries checked by the one .target rule (lpx_target_check). */
static void target_header(pstate *ps, size_t k)
{
  enum { MAX_ENTRIES = 16 };
  lpx_module *m = ps->m;
  char text[MAX_ENTRIES][64];
  const char *entries[MAX_ENTRIES];
  size_t at[MAX_ENTRIES];
  int32_t n = 0;
  at[n] = k + 1 < ps->nt ? k + 1 : k;
  tok_text(ps, &ps->t[at[n]], text[n], sizeof text[n]);
  entries[n] = text[n];
  n++;
  for (size_t j = k + 2; n < MAX_ENTRIES && j + 1 < ps->nt && is_punct(ps, &ps->t[j], ','); j += 2) {
    at[n] = j + 1;
    tok_text(ps, &ps->t[j + 1], text[n], sizeof text[n]);
    entries[n] = text[n];
    n++;
  }
  int32_t bad = lpx_target_check(ps->ctx, m->ptx_version, entries, n);
  if (bad) perr(ps, at[bad - 1], "%s", lpx_ctx_error(ps->ctx));
  snprintf(m->target, sizeof m->target, "%s", entries[0]);
  if (lpx_arch_parse(entries[0], &m->sm, &m->family)) m->sm = m->family = 0;
  m->target_mods[0] = '\0';
  for (int32_t i = 1; i < n; i++) {
    size_t len = strlen(m->target_mods);
    snprintf(m->target_mods + len, sizeof m->target_mods - len, ", %s", entries[i]);
  }
}

/* Record .version/.target/.address_size in the module's fields. */
static void module_header(pstate *ps, size_t k)
{
  lpx_module *m = ps->m;
  const lpx_tok *arg = &ps->t[k + 1 < ps->nt ? k + 1 : k];
  char buf[64];
  tok_text(ps, arg, buf, sizeof buf);
  if (is_word(ps, &ps->t[k], ".version")) {
    int major = 0, minor = 0;   /* bounded: a huge major would overflow major * 10 */
    if (sscanf(buf, "%3d.%1d", &major, &minor) == 2 && major > 0 && major < 100 && minor >= 0)
      m->ptx_version = major * 10 + minor;
    if (m->ptx_version > lpx_ptx_version_max()) {
      lpx_ptx_version_check(ps->ctx, m->ptx_version);
      perr(ps, k + 1, "%s", lpx_ctx_error(ps->ctx));
    }
  } else if (is_word(ps, &ps->t[k], ".target")) {
    target_header(ps, k);
  } else if (is_word(ps, &ps->t[k], ".address_size")) {
    m->address_size = atoi(buf);
  }
}

/* .section name { ... } (DWARF): a DIR item up to the matching brace. */
static void parse_section(pstate *ps)
{
  size_t start = ps->pos;
  int depth = 0;
  while (!is_punct(ps, cur(ps), '{')) {
    if (cur(ps)->kind == LPX_TK_EOF) perr(ps, ps->pos, "expected '{' after .section");
    take(ps);
  }
  do {
    if (cur(ps)->kind == LPX_TK_EOF) perr(ps, ps->pos, "expected '}' to close the .section at line %d", line_of(ps, start));
    depth += is_punct(ps, cur(ps), '{') - is_punct(ps, cur(ps), '}');
    take(ps);
  } while (depth > 0);
  item_add(ps, LPX_ITEM_DIR, (uint32_t)start);
}

/* One top-level statement. */
static void parse_top_statement(pstate *ps)
{
  const lpx_tok *tok = cur(ps);
  if (word_index(ps, tok, line_directives) >= 0) { module_header(ps, ps->pos); parse_line_directive(ps); return; }
  if (is_word(ps, tok, ".section")) { parse_section(ps); return; }
  if (is_dotword(ps, tok) && at_function(ps)) { parse_function(ps); return; }
  if (is_dotword(ps, tok)) { parse_decl(ps); return; }
  perr(ps, ps->pos, "expected a directive (.version, .target, .entry, .func, .global, ...)");
}

/* Token buffers up to this size go back to the context for the next parse;
 * bigger ones (inputs of several MB) are not worth keeping around. */
#define TOKS_KEEP_BYTES ((size_t)16 << 20)

/* Symbols to reserve for n tokens: nvcc output has about one per 8 tokens
 * in a file, but a big input repeats its names (kernel after kernel, %r1
 * again): past 64K the table grows by doubling, so its slots, which every
 * probe touches at random, are not all faulted in for names never made. */
#define STRTAB_RESERVE(n) ((n) / 8 + 64 < 65536 ? (n) / 8 + 64 : 65536)

/* Lex the input into the context's token buffer; 0, or -1 on a lexical
 * error (reported). */
static int lex_input(pstate *ps, size_t len)
{
  lpx_toks toks = { ps->ctx->toks, 0, ps->ctx->toks_cap };
  ps->ctx->toks = NULL;   /* owned by this parse until pstate_free */
  ps->ctx->toks_cap = 0;
  int rc = lpx_lex_all(ps->ctx, ps->src, len, ps->file, &toks);
  ps->t = toks.v; ps->nt = toks.n; ps->toks_cap = toks.cap; ps->src_len = len;
  return rc;
}

/* Start a parse of text (NULL: empty) into m (NULL: a new module, made
 * after lexing) for errors named file. */
static void pstate_init(pstate *ps, lpx_ctx *ctx, lpx_module *m, const char *text, const char *file)
{
  memset(ps, 0, sizeof *ps);
  ps->ctx = ctx; ps->m = m; ps->src = text ? text : ""; ps->file = file; ps->line = 1;
  ps->names_gen = 1;   /* zeroed name slots hold generation 0: never current */
  if (m) ps->lex_base = (uint32_t)m->nlex;
}

/* Release the parser's scratch state (the token buffer back to the context). */
static void pstate_free(pstate *ps)
{
  if (!ps->ctx->toks && ps->toks_cap * sizeof(lpx_tok) <= TOKS_KEEP_BYTES) {
    ps->ctx->toks = ps->t;
    ps->ctx->toks_cap = ps->toks_cap;
  } else {
    free(ps->t);
  }
  free(ps->names); free(ps->ranges); free(ps->shadows); free(ps->form_by_sym); free(ps->rc);
  spare_body *sp = &ps->spare;
  free(sp->items); free(sp->ops); free(sp->ops_lex); free(sp->reg_type); free(sp->reg_index); free(sp->reg_name);
}

/* Streamed parse, after a top-level statement: the hook prints what the
 * module holds; then the top items start again, the printed functions'
 * bodies go to the spare arrays and the lex array starts again (lex indices are lex_base + token
 * index, so new entries land at its start). */
static void stream_step(pstate *ps)
{
  lpx_module *m = ps->m;
  ps->hook(m, NULL, ps->hook_arg);
  for (; ps->recycled < m->nfuncs; ps->recycled++) func_recycle(ps, &m->funcs[ps->recycled]);
  m->ntop = 0;
  m->nlex = 0;
  ps->lex_base = 0u - (uint32_t)ps->pos;
}

/* Parse a whole module (len bytes, no NUL needed); NULL on error with
 * "file:line:col: ..." in the context; strict validates every instruction. */
static lpx_module *parse_module(lpx_ctx *ctx, const char *text, size_t len, const char *filename, int strict,
                                lpx_parse_hook hook, void *arg)
{
  pstate ps;
  pstate_init(&ps, ctx, NULL, text, filename ? filename : "<ptx>");
  ps.strict = strict;
  ps.hook = hook; ps.hook_arg = arg;
  if (lex_input(&ps, text ? len : 0)) { pstate_free(&ps); return NULL; }
  ps.m = calloc(1, sizeof(lpx_module));
  if (!ps.m) { pstate_free(&ps); lpx_fail(ctx, "out of memory"); return NULL; }
  ps.m->ctx = ctx; ps.m->address_size = 64;
  if (setjmp(ps.fail)) { lpx_module_free(ps.m); pstate_free(&ps); return NULL; }
  if (!hook) GROW(&ps, ps.m->lex, ps.m->lex_cap, ps.nt);
  if (lpx_strtab_reserve(&ps.m->syms, STRTAB_RESERVE(ps.nt), ps.src_len / 4 + 256)) poom(&ps);
  regcache_alloc(&ps);
  while (cur(&ps)->kind != LPX_TK_EOF) {
    parse_top_statement(&ps);
    if (hook) stream_step(&ps);
  }
  const lpx_tok *eof = cur(&ps);
  uint32_t pre = lpx_tok_pre(ps.t, ps.pos);
  ps.m->eof_pre = eof->off > pre ? intern(&ps, ps.src + pre, eof->off - pre) : -1;
  pstate_free(&ps);
  return ps.m;
}

/* Parse PTX text into a new module, tolerantly: an instruction is kept as
 * written even when the table would refuse it (fmt formats what it can). */
lpx_module *lpx_parse(lpx_ctx *ctx, const char *text, size_t len, const char *filename)
{
  return parse_module(ctx, text, len, filename, 0, NULL, NULL);
}

/* Parse PTX text as lpx_parse does, calling hook after each top-level
 * statement; what the module held then (every function complete by then,
 * the lex entries so far) is dropped and its memory reused, so a big input
 * is printed as it is parsed without ever holding its whole IR. The module
 * returned holds the rest (the trivia before the end of the input). */
lpx_module *lpx_parse_streamed(lpx_ctx *ctx, const char *text, size_t len, const char *filename, lpx_parse_hook hook,
                               void *arg)
{
  return parse_module(ctx, text, len, filename, 0, hook, arg);
}

/* Parse PTX text and validate every instruction as a traced one is (what
 * load_ptx runs): the first invalid one is an error at its file:line:col. */
lpx_module *lpx_parse_checked(lpx_ctx *ctx, const char *text, size_t len, const char *filename)
{
  return parse_module(ctx, text, len, filename, 1, NULL, NULL);
}

/* ptx.raw: parse body statements (instructions, labels, .reg, { }) from
 * text and append them to function fn of an existing module, each
 * instruction validated as the tracer validates it. file/line locate the
 * Lua call; errors read "<filename>:line:col: ...". The statements before
 * an error stay appended (the trace is abandoned on error anyway). */
int32_t lpx_parse_into(lpx_module *m, int32_t fn, const char *text, size_t len, const char *filename, int32_t file, int32_t line)
{
  if (fn < 0 || (size_t)fn >= m->nfuncs) return lpx_fail(m->ctx, "no function %d in module", fn);
  pstate ps;
  pstate_init(&ps, m->ctx, m, text, filename ? filename : "ptx.raw");
  ps.raw = 1; ps.fn = fn; ps.f = &m->funcs[fn]; ps.raw_file = file; ps.raw_line = line > 0 ? line : 1;
  if (lex_input(&ps, text ? len : 0)) { pstate_free(&ps); return -1; }
  if (setjmp(ps.fail)) { pstate_free(&ps); return -1; }
  GROW(&ps, m->lex, m->lex_cap, m->nlex + ps.nt);
  if (lpx_lookup_sync(m, ps.f)) { pstate_free(&ps); return -1; }   /* the registers so far, by name */
  for (int depth = 0; cur(&ps)->kind != LPX_TK_EOF;) {
    scope_depth(&ps, &depth);
    parse_body_statement(&ps);
  }
  pstate_free(&ps);
  return 0;
}

/* ptx.raw_module: parse module-level statements (variables with
 * initializers, .extern/.func declarations, .pragma, sections) and append
 * them to a traced module's top level, which lpx_emit prints before the
 * kernels. Function definitions are refused. */
int32_t lpx_parse_module_decls(lpx_module *m, const char *text, size_t len, const char *filename)
{
  pstate ps;
  pstate_init(&ps, m->ctx, m, text, filename ? filename : "ptx.raw_module");
  ps.raw = 1; ps.fn = -1;
  if (lex_input(&ps, text ? len : 0)) { pstate_free(&ps); return -1; }
  size_t nfuncs = m->nfuncs;
  if (setjmp(ps.fail)) {   /* drop a function record the error interrupted */
    for (size_t i = nfuncs; i < m->nfuncs; i++) func_release(&m->funcs[i]);
    m->nfuncs = nfuncs;
    pstate_free(&ps);
    return -1;
  }
  GROW(&ps, m->lex, m->lex_cap, m->nlex + ps.nt);
  while (cur(&ps)->kind != LPX_TK_EOF) parse_top_statement(&ps);
  pstate_free(&ps);
  return 0;
}
