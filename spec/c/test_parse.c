/* C tests for the PTX front end: every corpus file round-trips byte for
 * byte through the IR; parse -> canonical -> parse gives the same IR and
 * canonical output is a fixed point; IR edits show in the lossless output;
 * malformed and truncated input gives file:line:col errors, never a crash;
 * deep nesting is refused with its limit or handled without recursion, and
 * nested initializer braces parse in linear time; a streamed print of one
 * long function holds a bounded part of its IR at a time.
 * usage: test_parse <corpus dir>          (searched recursively for *.ptx)
 *        test_parse --replay <dir>        (fuzzer-found inputs, any name) */
#include "lpx_parse.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, file) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed for %s: %s\n", __FILE__, __LINE__, file, #cond); } } while (0)

/* ------------------------------------------------------------------ helpers */

/* Read a whole file into an exact-size buffer (no NUL: the parser must not need it). */
static char *read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(p, 1, (size_t)n, f);
  fclose(f);
  return p;
}

static void show_diff(const char *name, const char *a, size_t na, const char *b, size_t nb);

/* A private directory for the streamed printer's output files. */
static const char *out_dir(void)
{
  static char dir[64];
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/test_parse-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
  }
  return dir;
}

/* The text lpx_fmt_file writes for src (parsed and printed as it goes),
 * read back from its output file; NULL when it fails, with no file left. */
static char *streamed(lpx_ctx *ctx, const char *src, size_t len, const char *name, int canonical, size_t *n)
{
  char path[128];
  snprintf(path, sizeof path, "%s/out.ptx", out_dir());
  remove(path);
  if (lpx_fmt_file(ctx, src, len, name, canonical, path) != 0) {
    struct stat st;
    CHECKF(stat(path, &st) != 0, name);   /* a failed run writes nothing */
    return NULL;
  }
  char *text = read_file(path, n);
  remove(path);
  return text;
}

/* lpx_fmt_file gives what lpx_parse and a printer give: the same text, or
 * the same error. */
static void check_streamed(lpx_ctx *ctx, const char *src, size_t len, const char *name, lpx_module *m)
{
  char err[LPX_MSG_MAX];
  snprintf(err, sizeof err, "%s", lpx_ctx_error(ctx));
  for (int canonical = 0; canonical < 2; canonical++) {
    size_t n = 0, want_n = 0;
    const char *want = NULL;
    char *got = streamed(ctx, src, len, name, canonical, &n);
    if (m) CHECKF((canonical ? lpx_fmt_canonical : lpx_fmt_lossless)(m, &want, &want_n) == 0, name);
    CHECKF(!got == !m, name);
    if (!got && !m) CHECKF(strcmp(lpx_ctx_error(ctx), err) == 0, name);
    if (got && want) {
      CHECKF(n == want_n && memcmp(got, want, n) == 0, name);
      if (n != want_n || memcmp(got, want, n)) show_diff(name, want, want_n, got, n);
    }
    free(got);
  }
}

/* Report the first differing byte of two texts. */
static void show_diff(const char *name, const char *a, size_t na, const char *b, size_t nb)
{
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  size_t from = i > 40 ? i - 40 : 0;
  fprintf(stderr, "%s: differs at byte %zu\n  want: %.*s\n  got:  %.*s\n", name, i,
          (int)((na - from) < 80 ? na - from : 80), a + from, (int)((nb - from) < 80 ? nb - from : 80), b + from);
}

/* Are two operands the same, comparing symbols by name? */
static int same_operand(const lpx_module *ma, const lpx_operand *a, const lpx_module *mb, const lpx_operand *b)
{
  if (a->kind != b->kind || a->type != b->type || a->aux != b->aux || a->ival != b->ival) return 0;
  int named = a->kind == LPX_OPD_SYM || a->kind == LPX_OPD_LABEL || (a->kind == LPX_OPD_ADDR && a->aux == LPX_OPD_SYM);
  if (named) return strcmp(lpx_strtab_get(&ma->syms, a->id), lpx_strtab_get(&mb->syms, b->id)) == 0;
  return a->id == b->id;
}

/* Do two token runs spell the same tokens (trivia aside)? */
static int same_tokens(const lpx_module *ma, const lpx_item *a, const lpx_module *mb, const lpx_item *b)
{
  if (a->nlex != b->nlex) return 0;
  for (uint32_t k = 0; k < a->nlex; k++)
    if (strcmp(lpx_strtab_get(&ma->syms, ma->lex[a->lex + k].spell), lpx_strtab_get(&mb->syms, mb->lex[b->lex + k].spell)))
      return 0;
  return 1;
}

/* Are two body items the same IR? */
static int same_item(const lpx_module *ma, const lpx_func *fa, const lpx_item *a,
                     const lpx_module *mb, const lpx_func *fb, const lpx_item *b)
{
  if (a->kind != b->kind) return 0;
  if (a->kind == LPX_ITEM_DIR) return same_tokens(ma, a, mb, b);
  if (a->kind == LPX_ITEM_LABEL) return strcmp(lpx_strtab_get(&ma->syms, a->form), lpx_strtab_get(&mb->syms, b->form)) == 0;
  if (a->form != b->form || a->guard != b->guard || a->guard_neg != b->guard_neg || a->nops != b->nops) return 0;
  for (uint32_t k = 0; k < a->nops; k++)
    if (!same_operand(ma, &fa->ops[a->ops + k], mb, &fb->ops[b->ops + k])) return 0;
  return 1;
}

/* Are two functions the same IR (params, registers, items)? */
static int same_func(const lpx_module *ma, const lpx_func *a, const lpx_module *mb, const lpx_func *b)
{
  if (strcmp(lpx_strtab_get(&ma->syms, a->sym), lpx_strtab_get(&mb->syms, b->sym)) || a->is_entry != b->is_entry ||
      a->linkage != b->linkage || a->nparams != b->nparams || a->nregs != b->nregs || a->nitems != b->nitems ||
      a->ndirectives != b->ndirectives || a->nvars != b->nvars)
    return 0;
  for (size_t i = 0; i < a->nparams; i++)
    if (a->params[i].type != b->params[i].type || a->params[i].align != b->params[i].align || a->params[i].count != b->params[i].count)
      return 0;
  for (size_t r = 0; r < a->nregs; r++)
    if (a->reg_type[r] != b->reg_type[r] ||
        strcmp(lpx_strtab_get(&ma->syms, a->reg_name[r]), lpx_strtab_get(&mb->syms, b->reg_name[r])))
      return 0;
  for (size_t i = 0; i < a->nitems; i++)
    if (!same_item(ma, a, &a->items[i], mb, b, &b->items[i])) {
      fprintf(stderr, "  item %zu of %s differs\n", i, lpx_strtab_get(&ma->syms, a->sym));
      return 0;
    }
  return 1;
}

/* Are two parsed modules the same IR? */
static int same_module(const lpx_module *a, const lpx_module *b)
{
  if (a->ptx_version != b->ptx_version || strcmp(a->target, b->target) || a->address_size != b->address_size ||
      a->ntop != b->ntop || a->nfuncs != b->nfuncs || a->nvars != b->nvars)
    return 0;
  for (size_t i = 0; i < a->ntop; i++) {
    const lpx_item *x = &a->top[i], *y = &b->top[i];
    if (x->kind != y->kind) return 0;
    if (x->kind == LPX_ITEM_DIR && !same_tokens(a, x, b, y)) return 0;
    if (x->kind == LPX_ITEM_FUNC && !same_func(a, &a->funcs[x->form], b, &b->funcs[y->form])) return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------ corpus */

static int corpus_files;
static size_t corpus_bytes;

/* A NUL-terminated copy of a source for strstr (kept until the next call). */
static const char *canon_banner_probe(const char *src, size_t len)
{
  static char *copy;
  free(copy);
  copy = malloc(len + 1);
  memcpy(copy, src, len);
  copy[len] = '\0';
  return copy;
}

/* Round-trip one corpus file: lossless, canonical re-parse, fixed point, truncations. */
static void check_file(lpx_ctx *ctx, const char *path)
{
  size_t len;
  char *src = read_file(path, &len);
  CHECKF(src != NULL, path);
  if (!src) return;
  corpus_files++;
  corpus_bytes += len;
  lpx_module *m = lpx_parse(ctx, src, len, path);
  CHECKF(m != NULL || !fprintf(stderr, "%s\n", lpx_ctx_error(ctx)), path);
  if (!m) { free(src); return; }
  const char *out;
  size_t n;
  CHECKF(lpx_fmt_lossless(m, &out, &n) == 0, path);
  int same = n == len && memcmp(out, src, len) == 0;
  CHECKF(same, path);
  if (!same) show_diff(path, src, len, out, n);
  check_streamed(ctx, src, len, path, m);
  CHECKF(lpx_fmt_canonical(m, &out, &n) == 0, path);
  const char *banner = strstr(canon_banner_probe(src, len), "Generated by luaptx");
  if (strstr(path, "/examples/") && banner && !strstr(banner + 1, "Generated by luaptx")) {
    /* the tracer's output (one module) is already canonical */
    CHECKF(n == len && memcmp(out, src, len) == 0, path);
    if (n != len || memcmp(out, src, len)) show_diff(path, src, len, out, n);
  }
  char *canon = malloc(n + 1);
  memcpy(canon, out, n);
  size_t ncanon = n;
  lpx_module *m2 = lpx_parse(ctx, canon, ncanon, "canonical");
  CHECKF(m2 != NULL || !fprintf(stderr, "%s\n", lpx_ctx_error(ctx)), path);
  if (m2) {
    CHECKF(same_module(m, m2), path);
    CHECKF(lpx_fmt_canonical(m2, &out, &n) == 0 && n == ncanon && memcmp(out, canon, n) == 0, path);
    lpx_module_free(m2);
  }
  for (size_t cut = 0; cut < len; cut += 1 + len / 53) {   /* truncations fail cleanly or parse */
    char *part = malloc(cut ? cut : 1);
    memcpy(part, src, cut);
    lpx_module *mt = lpx_parse(ctx, part, cut, "cut");
    CHECKF(mt != NULL || strncmp(lpx_ctx_error(ctx), "cut:", 4) == 0, path);
    if (cut % 7 == 0) check_streamed(ctx, part, cut, "cut", mt);
    lpx_module_free(mt);
    free(part);
  }
  free(canon);
  lpx_module_free(m);
  free(src);
}

/* Streamed parse hook for test_long_function: the bytes of IR the parser
 * holds now (lex entries, the open function's items and operands), kept
 * at their peak, and how many body chunks came. */
typedef struct held_ir {
  size_t peak, chunks;
} held_ir;

/* lpx_parse_hook that records what the parser holds when it calls. */
static void note_held(lpx_module *m, const lpx_func *open, void *arg)
{
  held_ir *h = arg;
  size_t bytes = m->lex_cap * sizeof(lpx_lex);
  for (size_t i = 0; i < m->nfuncs; i++) {
    const lpx_func *f = &m->funcs[i];
    bytes += f->items_cap * sizeof(lpx_item) + f->ops_cap * sizeof(lpx_operand) + f->ops_lex_cap * sizeof(lpx_opd_lex);
  }
  if (bytes > h->peak) h->peak = bytes;
  h->chunks += open != NULL;
}

/* One 16 MB function (an unrolled loop, labels and branches in it) is
 * printed as it parses, chunk by chunk: the IR the parser holds at once
 * stays under the text's size (the whole IR is about 9 bytes a byte of
 * text), and what comes out is what a whole parse prints, lossless and
 * canonical. */
static void test_long_function(lpx_ctx *ctx)
{
  lpx_buf b = { 0 };
  lpx_buf_puts(&b, ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry unrolled(\n\t.param .u64 p\n)\n{\n"
                   "\t.reg .pred \t%p<2>;\n\t.reg .f32 \t%f<4096>;\n\t.reg .b32 \t%r<4>;\n\n");
  for (int i = 0; b.n < (16u << 20); i++) {
    if (i % 4096 == 0) lpx_buf_printf(&b, "$L__BB0_%d:\n\tadd.s32 \t%%r1, %%r1, 1;\n", i / 4096);
    lpx_buf_printf(&b, "\tfma.rn.f32 \t%%f%d, %%f%d, %%f%d, %%f%d;\n", i % 4096, (i * 7) % 4096, (i * 13) % 4096, i % 4096);
    if (i % 4096 == 4095) lpx_buf_printf(&b, "\tsetp.ne.s32 \t%%p1, %%r1, 8;\n\t@%%p1 bra \t$L__BB0_%d;\n", i / 4096);
  }
  lpx_buf_puts(&b, "\tret;\n\n}\n");
  held_ir h = { 0, 0 };
  lpx_module *streamed_m = lpx_parse_streamed(ctx, b.p, b.n, "long", note_held, &h);
  CHECK(streamed_m != NULL);
  lpx_module_free(streamed_m);
  CHECK(h.chunks > 20);
  CHECK(h.peak < b.n);
  if (h.peak >= b.n) fprintf(stderr, "long function: %zu bytes of IR held for %zu bytes of text, %zu chunks\n", h.peak, b.n, h.chunks);
  lpx_module *m = lpx_parse(ctx, b.p, b.n, "long");
  CHECK(m != NULL);
  if (m) check_streamed(ctx, b.p, b.n, "long", m);
  lpx_module_free(m);
  lpx_buf_free(&b);
}

/* Replay a fuzzer-found input: it fails with a position or round-trips. */
static void replay_file(lpx_ctx *ctx, const char *path)
{
  size_t len;
  char *src = read_file(path, &len);
  if (!src) return;
  corpus_files++;
  lpx_module *m = lpx_parse(ctx, src, len, "replay");
  CHECKF(m != NULL || strncmp(lpx_ctx_error(ctx), "replay:", 7) == 0, path);
  const char *out;
  size_t n;
  if (m) CHECKF(lpx_fmt_lossless(m, &out, &n) == 0 && n == len && memcmp(out, src, len) == 0, path);
  if (m) CHECKF(lpx_fmt_canonical(m, &out, &n) == 0, path);
  check_streamed(ctx, src, len, "replay", m);
  lpx_module_free(m);
  lpx_module *t = lpx_module_new(ctx, 87, "sm_90a", 64);   /* and as ptx.raw text */
  int fn = lpx_func_begin(t, "k", 1, 1);
  lpx_reg_new(t, fn, lpx_type_lookup("pred"));
  lpx_reg_new(t, fn, lpx_type_lookup("u32"));
  CHECKF(lpx_parse_into(t, fn, src, len, "raw", 0, 1) == 0 || strncmp(lpx_ctx_error(ctx), "raw", 3) == 0, path);
  CHECKF(lpx_emit(t, NULL, &out, &n) == 0, path);
  CHECKF(lpx_parse_module_decls(t, src, len, "raw") == 0 || strncmp(lpx_ctx_error(ctx), "raw", 3) == 0, path);
  CHECKF(lpx_emit(t, NULL, &out, &n) == 0, path);
  lpx_module_free(t);
  free(src);
}

/* Walk a directory tree and check every .ptx file in it (every file when replaying). */
static void walk(lpx_ctx *ctx, const char *dir, int replay)
{
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st)) continue;
    size_t n = strlen(e->d_name);
    if (S_ISDIR(st.st_mode)) walk(ctx, path, replay);
    else if (replay) replay_file(ctx, path);
    else if (n > 4 && strcmp(e->d_name + n - 4, ".ptx") == 0) check_file(ctx, path);
  }
  closedir(d);
}

/* -------------------------------------------------------------- unit tests */

static const char *const edit_src =
  ".version 8.7\n.target sm_90a\n.address_size 64\n\n"
  ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
  "\t.reg .b32 \t%r<4>;  // four\n\t.reg .pred p;\n"
  "\tmov.u32 \t%r1, 0x10;   /* hex */\n"
  "\t@!p add.s32 %r2, %r1, -4;\n"
  "\tld.param.u64 %r3, [k_param_0+8];\n"
  "}\n";

/* Parse a NUL-terminated string. */
static lpx_module *parse_str(lpx_ctx *ctx, const char *s, const char *name)
{
  return lpx_parse(ctx, s, strlen(s), name);
}

/* Editing the IR changes the lossless output, and only where edited. */
static void test_edits(lpx_ctx *ctx)
{
  lpx_module *m = parse_str(ctx, edit_src, "edit.ptx");
  CHECK(m != NULL);
  if (!m) { fprintf(stderr, "%s\n", lpx_ctx_error(ctx)); return; }
  const char *out;
  size_t n;
  CHECK(lpx_fmt_lossless(m, &out, &n) == 0 && n == strlen(edit_src) && memcmp(out, edit_src, n) == 0);
  int32_t r1 = lpx_reg_find(m, 0, "%r1"), p = lpx_reg_find(m, 0, "p");
  CHECK(r1 >= 0 && p >= 0);
  CHECK(lpx_reg_rename(m, 0, r1, "%acc") == 0 && lpx_reg_rename(m, 0, p, "%done") == 0);
  lpx_func *f = &m->funcs[0];
  f->ops[f->items[3].ops + 2].ival = -8;         /* add's immediate: -4 -> -8 */
  f->items[3].guard_neg = 0;                     /* @!p -> @p: reshaped, printed canonically */
  lpx_fmt_lossless(m, &out, &n);
  CHECK(strstr(out, "mov.u32 \t%acc, 0x10;   /* hex */") != NULL || !fputs(out, stderr));
  CHECK(strstr(out, "\t@%done add.s32 \t%r2, %acc, -8;\n") != NULL || !fputs(out, stderr));
  CHECK(strstr(out, "\t.reg .pred %done;\n") != NULL);
  CHECK(strstr(out, "[k_param_0+8]") != NULL);
  f->ops[f->items[4].ops + 1].ival = 16;         /* address offset edit */
  lpx_fmt_lossless(m, &out, &n);
  CHECK(strstr(out, "ld.param.u64 %r3, [k_param_0+16];") != NULL || !fputs(out, stderr));
  CHECK(lpx_fmt_canonical(m, &out, &n) == 0 && strstr(out, "\tmov.u32 \t%acc, 16;\n") && !strstr(out, "hex"));
  lpx_module_free(m);
}

/* The IR a small kernel parses into. */
static void test_ir(lpx_ctx *ctx)
{
  const char *src =
    ".version 9.0\n.target sm_100a\n.address_size 64\n"
    ".global .align 4 .b8 tab[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
    ".func (.param .b32 r) f(.param .b32 a);\n"
    ".visible .entry k(.param .align 8 .b8 desc[128], .param .u32 n) .maxntid 128, 1, 1 .minnctapersm 1\n{\n"
    " .reg .b32 %r<3>; .reg .pred %p<2>; .reg .b64 %rd<2>; .reg .f32 x;\n"
    " { .reg .pred q; setp.ne.b32 q, %r1, 0; }\n"
    " elect.sync %r2|%p1, 0xffffffff;\n"
    " mov.f32 x, 0f3F800000; mov.f32 x, -1.5; mov.b32 %r1, 0b101; mov.b32 %r1, 017;\n"
    " cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r1, %r2}], [%r2];\n"
    " call.uni (%r1), f, (%r2);\n"
    "$L1: @%p1 bra.uni $L1; st.global.v2.f32 [%rd1+-4], {x, x}; mov.u32 %r1, %tid.x; red.add.u32 [tab+4], 1;\n"
    " mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 8;\n"
    " frobnicate.wide.b32 %r1, %r2;\n"
    " ret;\n}\n";
  lpx_module *m = parse_str(ctx, src, "ir.ptx");
  CHECK(m != NULL || !fprintf(stderr, "%s\n", lpx_ctx_error(ctx)));
  if (!m) return;
  CHECK(m->ptx_version == 90 && m->sm == 100 && m->family == 1 && m->address_size == 64);
  CHECK(m->nfuncs == 1 && m->nvars == 1 && m->vars[0].count == 8 && m->vars[0].align == 4);
  lpx_func *f = &m->funcs[0];
  CHECK(f->is_entry && f->linkage == 1 && f->nparams == 2 && f->params[0].count == 128 && f->params[0].align == 8);
  CHECK(f->ndirectives == 2 && strcmp(lpx_strtab_get(&m->syms, f->directives[0]), ".maxntid 128, 1, 1") == 0);
  int kinds[16] = { 0 };
  for (size_t i = 0; i < f->nops; i++) if (f->ops[i].kind < 16) kinds[f->ops[i].kind]++;
  CHECK(kinds[LPX_OPD_PIPE] == 1 && kinds[LPX_OPD_BRACKET] == 1 && kinds[LPX_OPD_VEC] == 2 && kinds[LPX_OPD_PAREN] == 2);
  CHECK(kinds[LPX_OPD_SINK] == 1 && kinds[LPX_OPD_SPECIAL] == 1 && kinds[LPX_OPD_LABEL] == 1 && kinds[LPX_OPD_FIMM] == 2);
  int found_neg = 0, found_bin = 0, found_oct = 0, unknown = 0;
  for (size_t i = 0; i < f->nops; i++) {
    found_neg |= f->ops[i].kind == LPX_OPD_ADDR && f->ops[i].ival == -4 && f->ops[i].aux == LPX_OPD_REG;
    found_bin |= f->ops[i].kind == LPX_OPD_INT && f->ops[i].ival == 5;
    found_oct |= f->ops[i].kind == LPX_OPD_INT && f->ops[i].ival == 15;
  }
  for (size_t i = 0; i < f->nitems; i++)
    if (f->items[i].kind == LPX_ITEM_INST) unknown += lpx_form_get(ctx, f->items[i].form)->op < 0;
  CHECK(found_neg && found_bin && found_oct && unknown >= 1);
  const char *out;
  size_t n;
  CHECK(lpx_fmt_lossless(m, &out, &n) == 0 && n == strlen(src) && memcmp(out, src, n) == 0);
  lpx_module_free(m);
}

/* The register each operand of instruction item i names (-1: not one). */
static int32_t op_reg(const lpx_func *f, size_t i, int j)
{
  const lpx_operand *o = &f->ops[f->items[i].ops + (uint32_t)j];
  return o->kind == LPX_OPD_REG ? o->id : -1;
}

/* Which register a name means: the latest .reg of that name, else the
 * newest range holding it, made on first use and the same one ever after
 * (even once a newer range holds the name too). */
static void test_register_scopes(lpx_ctx *ctx)
{
  const char *src =
    ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
    " .reg .b32 %r<20>;\n .reg .b32 %r1<5>;\n .reg .b16 %q3;\n .reg .b64 %q<5>;\n"
    " mov.b32 %r12, 1;\n"             /* item 4: %r12 from %r1<5> (index 2) */
    " mov.b32 %r12, %r12;\n"          /* 5 */
    " mov.b32 %r3, 1;\n"              /* 6: %r3 from %r<20> */
    " .reg .f32 %r3;\n"               /* 7: a new %r3 */
    " mov.b32 %r3, %r3;\n"            /* 8 */
    " .reg .f64 %r1<8>;\n"            /* 9: a newer range holding %r12 and %r15 */
    " mov.b32 %r12, %r15;\n"          /* 10 */
    " mov.b32 %r12, %r15;\n"          /* 11 */
    " mov.b32 %q3, %q4;\n"            /* 12: %q3 is the .b16 one, %q4 from %q<5> */
    " mov.b32 %r01, %r99;\n"          /* 13: not members: symbols */
    "}\n"
    ".visible .entry k2()\n{\n"         /* plain prefixes: the word-compare path */
    " .reg .b32 %r<4>;\n .reg .f32 %r<2>;\n"
    " mov.b32 %r3, %r1;\n mov.b32 %r3, %r1;\n"               /* items 2, 3 */
    " .reg .b64 %r1;\n mov.b32 %r1, %r2;\n mov.b32 %r1, %r2;\n"   /* 5, 6 */
    "}\n";
  lpx_module *m = parse_str(ctx, src, "regs.ptx");
  CHECK(m != NULL || !fprintf(stderr, "%s\n", lpx_ctx_error(ctx)));
  if (!m) return;
  const lpx_func *f = &m->funcs[0];
  int32_t r12 = op_reg(f, 4, 0), r3 = op_reg(f, 6, 0), r3b = op_reg(f, 8, 0), r15 = op_reg(f, 10, 1);
  CHECK(r12 >= 0 && f->reg_type[r12] == LPX_T_B32 && op_reg(f, 5, 0) == r12 && op_reg(f, 5, 1) == r12);
  CHECK(r3 >= 0 && r3b >= 0 && r3b != r3 && f->reg_type[r3b] == LPX_T_F32 && op_reg(f, 8, 1) == r3b);
  CHECK(op_reg(f, 10, 0) == r12 && op_reg(f, 11, 0) == r12);
  CHECK(r15 >= 0 && f->reg_type[r15] == LPX_T_F64 && op_reg(f, 11, 1) == r15);
  int32_t q3 = op_reg(f, 12, 0), q4 = op_reg(f, 12, 1);
  CHECK(q3 >= 0 && f->reg_type[q3] == LPX_T_B16 && q4 >= 0 && f->reg_type[q4] == LPX_T_B64);
  CHECK(op_reg(f, 13, 0) < 0 && op_reg(f, 13, 1) < 0);
  CHECK(strcmp(lpx_strtab_get(&m->syms, f->reg_name[r15]), "%r15") == 0);
  f = &m->funcs[1];
  int32_t a3 = op_reg(f, 2, 0), a1 = op_reg(f, 2, 1), b1 = op_reg(f, 5, 0), b2 = op_reg(f, 5, 1);
  CHECK(a3 >= 0 && f->reg_type[a3] == LPX_T_B32 && a1 >= 0 && f->reg_type[a1] == LPX_T_F32);
  CHECK(op_reg(f, 3, 0) == a3 && op_reg(f, 3, 1) == a1);
  CHECK(b1 >= 0 && b1 != a1 && f->reg_type[b1] == LPX_T_B64 && b2 >= 0 && f->reg_type[b2] == LPX_T_B32);
  CHECK(op_reg(f, 6, 0) == b1 && op_reg(f, 6, 1) == b2);
  lpx_module_free(m);
}

/* Malformed input: "file:line:col: expected ..." and no module. */
static void test_errors(lpx_ctx *ctx)
{
  static const struct { const char *src, *want; } cases[] = {
    { ".version 8.0\n.entry k()\n{\n\tadd.s32 %r1, %r2\n}\n", "bad.ptx:4:18: expected ',' or ';'" },
    { ".entry k()\n{\n\tld.global.f32 %f1, [%rd1;\n}\n", "expected ']'" },
    { ".entry k() {\n\tmov.b32 %r1, 0f3F80;\n}\n", "malformed float literal" },
    { ".entry k() {\n\t.reg .b32 %r<4>;\n\tmov.b32 %r1, 12abc;\n}\n", "bad.ptx:3:15: malformed integer" },
    { ".entry k() {\n\t@%nope bra L;\n}\n", "undeclared predicate register" },
    { ".entry k() {\n\tret;\n", "expected '}'" },
    { ".entry k() {\n\t/* open\n}\n", "unterminated /* comment" },
    { ".file 1 \"abc\n", "unterminated string" },
    { "mov.b32 %r1, 1;", "bad.ptx:1:1: expected a directive" },
    { ".entry k() {\n\tmov.b32 %r1, 1\n}\n", "expected ',' or ';'" },
    { ".entry k() {\n\t.reg .b32 %r<4>\n}\n", "expected ';'" },
    { ".entry k() { \x01 }", "unexpected character" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lpx_module *m = parse_str(ctx, cases[i].src, "bad.ptx");
    CHECK(m == NULL);
    lpx_module_free(m);
    int ok = strstr(lpx_ctx_error(ctx), cases[i].want) != NULL;
    CHECK(ok);
    if (!ok) fprintf(stderr, "  case %zu: got '%s', want '%s'\n", i, lpx_ctx_error(ctx), cases[i].want);
  }
  lpx_module *empty = lpx_parse(ctx, NULL, 0, NULL);   /* no text: an empty module */
  CHECK(empty != NULL && empty->nfuncs == 0);
  lpx_module_free(empty);
}

/* ptx.raw's C side: statements appended to a traced function, validated. */
static void test_parse_into(lpx_ctx *ctx)
{
  lpx_module *m = lpx_module_new(ctx, 87, "sm_90a", 64);
  int fn = lpx_func_begin(m, "k", 1, 1);
  int u32 = lpx_type_lookup("u32");
  int a = lpx_reg_new(m, fn, u32), b = lpx_reg_new(m, fn, u32);   /* %r1, %r2 */
  CHECK(a >= 0 && b >= 0);
  const char *snippet = "\t.reg .pred p;\n\tadd.u32 %r1, %r2, 0x10;\n\tsetp.eq.u32 p, %r1, 3;\nL1:\n\t@!p bra.uni L1;\n";
  int rc = lpx_parse_into(m, fn, snippet, strlen(snippet), "k.lua:7: ptx.raw", 0, 7);
  CHECK(rc == 0 || !fprintf(stderr, "%s\n", lpx_ctx_error(ctx)));
  CHECK(lpx_func_inst_count(m, fn) == 3 && lpx_func_reg_count(m, fn) == 3);
  const char *text;
  size_t len;
  lpx_emit_opts opts = { 0, 0 };
  CHECK(lpx_emit(m, &opts, &text, &len) == 0);
  CHECK(strstr(text, "\t.reg .pred \tp;\n\tadd.u32 \t%r1, %r2, 16;\n\tsetp.eq.u32 \tp, %r1, 3;\nL1:\n\t@!p bra.uni \tL1;\n") != NULL
        || !fputs(text, stderr));
  CHECK(lpx_parse_into(m, fn, "add.u32 %r1, %r2, 1.5;", 22, "k.lua:9: ptx.raw", 0, 9) < 0 &&
        strstr(lpx_ctx_error(ctx), "k.lua:9: ptx.raw:1:1: add.u32: operand 3") != NULL);
  CHECK(lpx_parse_into(m, fn, "add.u32 %r1, %nope;", 19, "r", 0, 1) < 0 && strstr(lpx_ctx_error(ctx), "r:1:1:"));
  CHECK(lpx_parse_into(m, fn, "ld.glob.u32 %r1, [%r2];", 23, "r", 0, 1) < 0 && strstr(lpx_ctx_error(ctx), ".global"));
  CHECK(lpx_parse_into(m, fn, "add.u32 %r1 %r2;", 16, "r", 0, 1) < 0 && strstr(lpx_ctx_error(ctx), "r:1:12: expected ','"));
  lpx_module_free(m);
}

/* ------------------------------------------------------ deep nesting */

/* pre + open x n + mid + close x n + post, malloc'd and NUL-terminated. */
static char *nest(const char *pre, const char *open, const char *mid, const char *close, int n, const char *post)
{
  size_t lo = strlen(open), lc = strlen(close), len = strlen(pre) + (lo + lc) * (size_t)n + strlen(mid) + strlen(post);
  char *s = malloc(len + 1), *p = s;
  p += sprintf(p, "%s", pre);
  for (int i = 0; i < n; i++) p += sprintf(p, "%s", open);
  p += sprintf(p, "%s", mid);
  for (int i = 0; i < n; i++) p += sprintf(p, "%s", close);
  sprintf(p, "%s", post);
  return s;
}

#define DEEP_HEAD ".version 8.0\n.target sm_80\n.address_size 64\n"
#define DEEP_BODY DEEP_HEAD ".visible .entry k()\n{\n.reg .b32 %r<4>;\n"

/* Parse src (owned, freed): it must fail with an error containing want, or
 * (want NULL) parse, print back byte for byte and show canon canonically;
 * either way as ptx.raw text and through the transpiler, never a crash. */
static void deep_case(lpx_ctx *ctx, char *src, const char *want, const char *canon)
{
  size_t len = strlen(src), n;
  const char *out;
  lpx_module *m = lpx_parse(ctx, src, len, "deep.ptx");
  int ok = want ? !m && strstr(lpx_ctx_error(ctx), want) != NULL : m != NULL;
  CHECK(ok || !fprintf(stderr, "  got '%s', want '%s'\n", m ? "(parsed)" : lpx_ctx_error(ctx), want ? want : "a module"));
  if (m) {
    CHECK(lpx_fmt_lossless(m, &out, &n) == 0 && n == len && memcmp(out, src, len) == 0);
    CHECK(lpx_fmt_canonical(m, &out, &n) == 0 && (!canon || strstr(out, canon)));
    CHECK(lpx_transpile(m, "deep.ptx", &out, &n) == 0 || strstr(lpx_ctx_error(ctx), "transpile:"));
  }
  lpx_module_free(m);
  const char *body = strstr(src, "%r<4>;\n");   /* the body statements as ptx.raw text */
  if (want && !strncmp(want, "deep.ptx:", 9)) want = strstr(want, ": ") + 2;   /* other positions there */
  lpx_module *t = lpx_module_new(ctx, 80, "sm_80", 64);
  int fn = lpx_func_begin(t, "k", 1, 1);
  for (int r = 0; r < 4; r++) lpx_reg_new(t, fn, lpx_type_lookup("b32"));
  if (body) {
    body += 7;
    size_t blen = strlen(body) - 2;   /* without the closing "}\n" */
    int rc = lpx_parse_into(t, fn, body, blen, "raw", 0, 1);
    CHECK((want ? rc < 0 && strstr(lpx_ctx_error(ctx), want) : rc == 0) || !fprintf(stderr, "  %s\n", rc ? lpx_ctx_error(ctx) : "(parsed)"));
  } else {
    int rc = lpx_parse_module_decls(t, src + strlen(DEEP_HEAD), len - strlen(DEEP_HEAD), "raw");
    CHECK((want ? rc < 0 && strstr(lpx_ctx_error(ctx), want) : rc == 0) || !fprintf(stderr, "  %s\n", rc ? lpx_ctx_error(ctx) : "(parsed)"));
  }
  CHECK(lpx_emit(t, NULL, &out, &n) == 0);
  lpx_module_free(t);
  free(src);
}

/* Constant expressions, operand lists and blocks nested thousands deep:
 * a bounded depth gives its limit at the offending token; prefix operators
 * and ?: chains of any length fold without recursion. */
static void test_deep_nesting(lpx_ctx *ctx)
{
  const char *deep = "constant expression nested deeper than 256 levels";
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "(", "1", ")", 5000, ";\nret;\n}\n"), "deep.ptx:7:275: constant expression", NULL);
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "(", "2", ")", 256, ";\nret;\n}\n"), NULL, "%r2, 2;");
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "(", "2", ")", 257, ";\nret;\n}\n"), deep, NULL);
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "1?", "1", ":1", 5000, ";\nret;\n}\n"), deep, NULL);
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "0?1:", "7", "", 100000, ";\nret;\n}\n"), NULL, "%r2, 7;");
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "-", "3", "", 100000, ";\nret;\n}\n"), NULL, "%r2, 3;");
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "~", "3", "", 100001, ";\nret;\n}\n"), NULL, "%r2, -4;");
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "!", "3", "", 100001, ";\nret;\n}\n"), NULL, "%r2, 0;");
  deep_case(ctx, nest(DEEP_BODY "add.s32 %r1, %r2, ", "-(", "3", ")", 200, ";\nret;\n}\n"), NULL, "%r2, 3;");
  deep_case(ctx, nest(DEEP_BODY "mov.b32 %r1, ", "{", "%r2", "}", 5000, ";\nret;\n}\n"), "operands nested more than 64 deep", NULL);
  deep_case(ctx, nest(DEEP_BODY "call.uni ", "(", "%r2", ")", 5000, ", f;\nret;\n}\n"), "operands nested more than 64 deep", NULL);
  deep_case(ctx, nest(DEEP_BODY "", "{\n", "", "}\n", 9000, "ret;\n}\n"), NULL, NULL);
  deep_case(ctx, nest(DEEP_BODY "", "{\n", "", "}\n", 20000, "ret;\n}\n"), "blocks { } nested deeper than 10000 levels", NULL);
  deep_case(ctx, nest(DEEP_HEAD ".global .u32 g[1] = {", "(", "1", ")", 5000, "};\n"), "deep.ptx:4:278: constant expression", NULL);
  deep_case(ctx, nest(DEEP_HEAD ".global .u32 g[1] = {", "1?", "1", ":1", 5000, "};\n"), deep, NULL);
  /* an element already folded before the deep one: its bytes are freed
   * (a leak fuzz_cexpr found; LeakSanitizer builds catch it) */
  deep_case(ctx, nest(DEEP_HEAD ".global .u32 g[2] = {(7), ", "(", "1", ")", 300, "};\n"), deep, NULL);
  deep_case(ctx, nest(DEEP_HEAD ".global .u32 g[1] = {", "-", "1", "", 100000, "};\n"), NULL, NULL);
  deep_case(ctx, nest(DEEP_HEAD ".global .u64 g[1] = {", "(", "g", ")", 100000, "};\n"), NULL, NULL);
}

/* Nested initializer braces cost linear time (each token looked at a
 * bounded number of times): 200,000 levels took 18 s when every brace
 * rescanned the rest of its element; now well under 2 s of CPU. */
static void test_initializer_braces_linear(lpx_ctx *ctx)
{
  char *src = nest(DEEP_HEAD ".global .u32 g[1] = ", "{", "0x2a", "}", 200000, ";\n");
  clock_t t0 = clock();
  lpx_module *m = lpx_parse(ctx, src, strlen(src), "braces.ptx");
  double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
  CHECK(m != NULL && m->nvars == 1 && m->vars[0].init_len == 4 && m->vars[0].init[0] == 0x2a);
  CHECK(cpu < 2.0 || !fprintf(stderr, "  200,000 nested braces took %.2f s of CPU\n", cpu));
  lpx_module_free(m);
  free(src);
}

/* lpx_append (the tracer's and the C API's door) refuses operand lists
 * nested deeper than the printers recurse, instead of overflowing the stack
 * when the module is printed. */
static void test_append_nesting(lpx_ctx *ctx)
{
  enum { N = 65535 };
  lpx_module *m = lpx_module_new(ctx, 80, "sm_80", 64);
  int fn = lpx_func_begin(m, "k", 1, 1);
  int r = lpx_reg_new(m, fn, lpx_type_lookup("u32"));
  lpx_operand *ops = calloc(N, sizeof *ops);
  for (int i = 0; i < N - 1; i++) { ops[i].kind = LPX_OPD_BRACKET; ops[i].aux = 1; ops[i].type = -1; }
  ops[N - 1].kind = LPX_OPD_REG; ops[N - 1].id = r; ops[N - 1].type = lpx_type_lookup("u32");
  int32_t form = lpx_form_intern(ctx, "tex.1d.v4.s32.s32");
  CHECK(lpx_append(m, fn, form, -1, 0, N, ops, 0, 1) < 0 && strstr(lpx_ctx_error(ctx), "operands nested more than 64 deep"));
  const char *out;
  size_t n;
  CHECK(lpx_emit(m, NULL, &out, &n) == 0);
  for (int i = 0; i < 63; i++) ops[i].kind = LPX_OPD_PAREN;   /* 63 levels: allowed */
  ops[63] = ops[N - 1];
  form = lpx_form_intern(ctx, "call.uni");
  CHECK(lpx_append(m, fn, form, -1, 0, 64, ops, 0, 1) >= 0 || !fprintf(stderr, "  %s\n", lpx_ctx_error(ctx)));
  CHECK(lpx_emit(m, NULL, &out, &n) == 0);
  free(ops);
  lpx_module_free(m);
}

int main(int argc, char **argv)
{
  lpx_ctx *ctx = lpx_ctx_new();
  test_edits(ctx);
  test_ir(ctx);
  test_register_scopes(ctx);
  test_errors(ctx);
  test_parse_into(ctx);
  test_deep_nesting(ctx);
  test_initializer_braces_linear(ctx);
  test_append_nesting(ctx);
  test_long_function(ctx);
  int replay = argc > 2 && strcmp(argv[1], "--replay") == 0;
  if (argc > 1) {
    walk(ctx, argv[replay ? 2 : 1], replay);
    CHECK(corpus_files > 0);
    printf("%s: %d files, %zu bytes\n", replay ? "replayed" : "corpus", corpus_files, corpus_bytes);
  }
  lpx_ctx_free(ctx);
  rmdir(out_dir());
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
