/* C unit tests for the core: forms, validation, registers, emission, and
 * the ISA table's named modifier values. */
#include "lpx_core.h"
#include "lpx_env.h"
#include "lpx_internal.h"
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

/* One operand of a kind with an id, an aux value and an immediate. */
static lpx_operand opd(int kind, int id, int aux, int64_t ival)
{
  lpx_operand o;
  memset(&o, 0, sizeof o);
  o.kind = kind; o.id = id; o.aux = aux; o.ival = ival;
  return o;
}

/* The emitter: params, directives, variables, labels, guards, vectors,
 * addresses and .loc lines, and byte-identical output on a second emit. */
static void emit_tests(lpx_ctx *ctx)
{
  lpx_module *m = lpx_module_new(ctx, 80, "sm_90a", 64);
  int file = lpx_module_file(m, "k.lua");
  CHECK(file == 1 && lpx_module_file(m, "k.lua") == 1);
  int fn = lpx_func_begin(m, "k", 1, 1);
  CHECK(lpx_func_begin(m, "k", 1, 1) < 0 && strstr(lpx_ctx_error(ctx), "already defined"));
  CHECK(lpx_func_param(m, fn, "k_param_0", lpx_type_lookup("u64"), 0, 0) == 0);
  CHECK(lpx_func_param(m, fn, "desc", lpx_type_lookup("b8"), 64, 128) == 1);
  CHECK(lpx_func_directive(m, fn, ".maxntid 128, 1, 1") == 0);
  CHECK(lpx_var_decl(m, -1, "shared", "k_smem", lpx_type_lookup("b8"), 16, -1, 2) == 0);
  CHECK(lpx_var_decl(m, fn, "shared", "tile", lpx_type_lookup("f32"), 16, 64, 0) == 0);
  CHECK(lpx_var_decl(m, fn, "texture", "t", lpx_type_lookup("f32"), 0, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), ".texture"));
  CHECK(lpx_var_decl(m, fn, "shared", "bad", lpx_type_lookup("f32"), 12, 1, 0) < 0 && strstr(lpx_ctx_error(ctx), "power of two"));
  int rd = lpx_reg_new(m, fn, lpx_type_lookup("u64")), p = lpx_reg_new(m, fn, lpx_type_lookup("pred"));
  int f[4];
  for (int i = 0; i < 4; i++) f[i] = lpx_reg_new(m, fn, lpx_type_lookup("f32"));
  lpx_operand ld[2] = { opd(LPX_OPD_REG, rd, 0, 0), opd(LPX_OPD_ADDR, lpx_sym(m, "k_param_0"), LPX_OPD_SYM, 0) };
  CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "ld.param.u64"), -1, 0, 2, ld, file, 3) >= 0);
  lpx_operand v4[6] = { opd(LPX_OPD_VEC, 0, 4, 0), opd(LPX_OPD_REG, f[0], 0, 0), opd(LPX_OPD_REG, f[1], 0, 0),
                        opd(LPX_OPD_REG, f[2], 0, 0), opd(LPX_OPD_REG, f[3], 0, 0), opd(LPX_OPD_ADDR, rd, LPX_OPD_REG, -16) };
  CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "ld.global.v4.f32"), p, 1, 6, v4, file, 4) >= 0);
  CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "ld.global.v4.f32"), f[0], 0, 6, v4, file, 4) < 0
        && strstr(lpx_ctx_error(ctx), "guard must be a predicate"));
  CHECK(lpx_label_place(m, fn, lpx_sym(m, "$L_done")) == 0);
  CHECK(lpx_label_place(m, fn, lpx_sym(m, "$L_done")) < 0 && strstr(lpx_ctx_error(ctx), "placed twice"));
  lpx_operand bra = opd(LPX_OPD_LABEL, lpx_sym(m, "$L_done"), 0, 0);
  CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "bra.uni"), -1, 0, 1, &bra, file, 4) >= 0);
  CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "ret"), -1, 0, 0, NULL, file, 9) >= 0);
  const char *text;
  size_t len;
  CHECK(lpx_emit(m, NULL, &text, &len) == 0);
  CHECK(strstr(text, ".target sm_90a\n.address_size 64\n\t.file\t1 \"k.lua\"\n") != NULL);
  CHECK(strstr(text, ".extern .shared .align 16 .b8 k_smem[];") != NULL);
  CHECK(strstr(text, "\t.param .u64 k_param_0,\n\t.param .align 64 .b8 desc[128]\n)\n.maxntid 128, 1, 1\n{") != NULL);
  CHECK(strstr(text, "\t.shared .align 16 .f32 tile[64];") != NULL);
  CHECK(strstr(text, "\t.reg .pred \t%p<2>;\n\t.reg .f32 \t%f<5>;\n\t.reg .b64 \t%rd<2>;") != NULL);
  CHECK(strstr(text, "\t.loc\t1 3 1\n\tld.param.u64 \t%rd1, [k_param_0];\n\t.loc\t1 4 1\n") != NULL);
  CHECK(strstr(text, "\t@!%p1 ld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1+-16];\n$L_done:\n\tbra.uni \t$L_done;") != NULL);
  char first[4096];
  snprintf(first, sizeof first, "%s", text);
  CHECK(lpx_emit(m, NULL, &text, &len) == 0 && strcmp(first, text) == 0);
  lpx_emit_opts no_loc = { 0, 0 };
  CHECK(lpx_emit(m, &no_loc, &text, &len) == 0 && !strstr(text, ".loc") && !strstr(text, ".file") && !strstr(text, "Generated"));
  CHECK(lpx_func_inst_count(m, fn) == 4 && lpx_func_reg_count(m, fn) == 6);
  lpx_module_free(m);
}

/* Strict environment variables: integers (also 1e6), decimals, switches;
 * every bad value an error naming the variable, the value and the range. */
static void env_tests(lpx_ctx *ctx)
{
  int64_t v = 42;
  double r = 7;
  int flag = 5;
  unsetenv("LPX_T");
  CHECK(lpx_env_int(ctx, "LPX_T", 1, 100, "a test", &v) == 0 && v == 42);
  setenv("LPX_T", "", 1);
  CHECK(lpx_env_int(ctx, "LPX_T", 1, 100, "a test", &v) == 0 && v == 42);
  const char *ok[][2] = { { "17", "17" }, { "1e2", "100" }, { "+3", "3" }, { "2.0", "2" } };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    setenv("LPX_T", ok[i][0], 1);
    CHECK(lpx_env_int(ctx, "LPX_T", 1, 100, "a test", &v) == 0 && v == atoll(ok[i][1]));
  }
  setenv("LPX_T", "1e6", 1);
  CHECK(lpx_env_int(ctx, "LPX_T", 1, INT64_MAX, "a test", &v) == 0 && v == 1000000);
  const char *bad[][2] = { { "1.5", "not an integer" }, { "12abc", "not an integer" }, { " 3", "not an integer" },
                           { "0x10", "not an integer" }, { "inf", "not an integer" }, { "101", "out of range" },
                           { "0", "out of range" }, { "99999999999999999999", "out of range" }, { "1e30", "out of range" } };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("LPX_T", bad[i][0], 1);
    char want[128];
    snprintf(want, sizeof want, "LPX_T=%s: %s; valid: an integer in 1..100 (a test)", bad[i][0], bad[i][1]);
    CHECK(lpx_env_int(ctx, "LPX_T", 1, 100, "a test", &v) == -1 && strcmp(lpx_ctx_error(ctx), want) == 0);
    CHECK(v == 1000000);
  }
  setenv("LPX_T", "0.5", 1);
  CHECK(lpx_env_real(ctx, "LPX_T", 0, 1e6, "megabytes", &r) == 0 && r == 0.5);
  setenv("LPX_T", "nan", 1);
  CHECK(lpx_env_real(ctx, "LPX_T", 0, 1e6, "megabytes", &r) == -1 && strstr(lpx_ctx_error(ctx), "LPX_T=nan: not a number"));
  setenv("LPX_T", "-1", 1);
  CHECK(lpx_env_real(ctx, "LPX_T", 0, 1e6, "megabytes", &r) == -1 && strstr(lpx_ctx_error(ctx), "out of range; valid: a number in 0..1e+06"));
  setenv("LPX_T", "1", 1);
  CHECK(lpx_env_flag(ctx, "LPX_T", &flag) == 0 && flag == 1);
  setenv("LPX_T", "yes", 1);
  CHECK(lpx_env_flag(ctx, "LPX_T", &flag) == -1 && strcmp(lpx_ctx_error(ctx), "LPX_T=yes: valid: 0 (off) or 1 (on)") == 0);
  unsetenv("LPX_T");
}

/* The name a modifier spelling must have: upper-cased, each run of other
 * characters written "_" ("shared::cta" -> SHARED_CTA). */
static void name_of(const char *spell, char *out, size_t cap)
{
  size_t n = 0;
  for (const char *p = spell; *p && n + 1 < cap; p++) {
    if (isalnum((unsigned char)*p)) out[n++] = (char)toupper((unsigned char)*p);
    else if (n && out[n - 1] != '_') out[n++] = '_';
  }
  while (n && out[n - 1] == '_') n--;
  out[n] = '\0';
}

/* Every modifier row of lpx_isa.def: its name is its spelling's, its value
 * counts up from 1 in its group, and the group's derived spelling list maps
 * the value and the spelling to each other; a form records the value. */
static void modifier_tests(lpx_ctx *ctx)
{
  static const struct { int group, value; const char *name, *spell; } rows[] = {
#define G(id, rows) rows
#define M(group, name, spell) { LPX_GB_##group, LPX_##group##_##name, #name, spell },
    LPX_MODGROUPS(G, M)
    LPX_FAMGROUPS(G, M)
#undef G
#undef M
  };
  int seen[LPX_GB__COUNT] = { 0 };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    char want[64];
    name_of(rows[i].spell, want, sizeof want);
    CHECK(strcmp(want, rows[i].name) == 0 || !fprintf(stderr, "  %s is named %s\n", rows[i].spell, rows[i].name));
    CHECK(rows[i].value == ++seen[rows[i].group]);
    CHECK(lpx_group_index(rows[i].group, rows[i].spell, strlen(rows[i].spell)) == rows[i].value);
    const char *back = lpx_modifier_name(rows[i].group, rows[i].value);
    CHECK(back && strcmp(back, rows[i].spell) == 0);
  }
  for (int g = 0; g < LPX_GB__COUNT; g++) CHECK(seen[g] == lpx_modgroup_size(g) && !lpx_modifier_name(g, seen[g] + 1));
  int setp = lpx_form_intern(ctx, "setp.lo.and.u32"), ld = lpx_form_intern(ctx, "ld.shared::cta.relaxed.gpu.u32");
  CHECK(setp >= 0 && ctx->forms[setp].modsel[LPX_GB_CMP] == LPX_CMP_LO && ctx->forms[setp].modsel[LPX_GB_BOOL] == LPX_BOOL_AND);
  CHECK(ld >= 0 && ctx->forms[ld].modsel[LPX_GB_SPACE] == LPX_SPACE_SHARED_CTA && ctx->forms[ld].modsel[LPX_GB_SEM] == LPX_SEM_RELAXED);
  CHECK(lpx_form_intern(ctx, "setp.lo.f32") >= 0);   /* the type rule is the validator's */
}

/* The info of an interned form (NULL when it is refused). */
static const lpx_form_info *form_of(lpx_ctx *ctx, const char *text)
{
  int id = lpx_form_intern(ctx, text);
  return id >= 0 ? lpx_form_get(ctx, id) : NULL;
}

/* Is a matrix type the one spelled name? */
static int mt_is(int mt, const char *name) { return lpx_mtype_name(mt) && !strcmp(lpx_mtype_name(mt), name); }

/* The record lpx_form_intern decodes for the matrix, copy and tcgen05
 * families: shapes, matrix types, layouts, counts, flags; and the words
 * those families do not take, refused when the form interns. */
static void family_tests(lpx_ctx *ctx)
{
  const lpx_form_info *f = form_of(ctx, "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.u8.s8.s32");
  CHECK(f && f->shape_m == 16 && f->shape_n == 8 && f->shape_k == 16 && f->nmtypes == 4 && f->satfinite);
  CHECK(f && mt_is(f->dtype, "s32") && mt_is(f->atype, "u8") && mt_is(f->btype, "s8") && mt_is(f->ctype, "s32"));
  CHECK(f && f->alayout == LPX_ALAYOUT_ROW && f->blayout == LPX_BLAYOUT_COL && f->type < 0);
  f = form_of(ctx, "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.e5m2.e4m3");
  CHECK(f && f->sparse && f->shape_m == 64 && f->shape_n == 128 && f->shape_k == 32 && f->nmtypes == 3);
  CHECK(f && mt_is(f->dtype, "f32") && mt_is(f->atype, "e5m2") && mt_is(f->btype, "e4m3") && !f->ctype);
  f = form_of(ctx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16");
  CHECK(f && f->num == 4 && f->trans && f->shape_m == 8 && f->shape_n == 8 && !f->shape_k);
  f = form_of(ctx, "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.multicast::cluster");
  CHECK(f && f->tensor && f->rank == 3 && f->im2col == LPX_LOADMODE_IM2COL && f->multicast && !f->prefetch);
  f = form_of(ctx, "cp.async.bulk.prefetch.tensor.2d.L2.global.tile");
  CHECK(f && f->tensor && f->prefetch && f->rank == 2 && f->im2col == LPX_LOADMODE_TILE);
  f = form_of(ctx, "tcgen05.mma.sp.cta_group::2.kind::f8f6f4");
  CHECK(f && f->cta_group == 2 && f->sparse);
  f = form_of(ctx, "tcgen05.ld.sync.aligned.16x256b.x8.pack::16b.b32");
  CHECK(f && f->num == 8 && lpx_tc_shape_regs(ctx->forms[lpx_form_intern(ctx, f->text)].modsel[LPX_GB_TCSHAPE]) == 4);
  f = form_of(ctx, "ld.relaxed.gpu.global.u32");
  CHECK(f && f->scope == LPX_SCOPE_GPU && f->sem == LPX_SEM_RELAXED);
  static const char *const refused[][2] = {
    { "mma.sync.aligned.m16n8k16.row.col.frob.f32.bf16.bf16.f32", "unknown or repeated modifier .frob for mma.sync" },
    { "mma.sync.aligned.m16n8k16.m16n8k8.row.col.f32.bf16.bf16.f32", "unknown or repeated modifier .m16n8k8" },
    { "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.f32", "too many type modifiers; mma.sync takes 4" },
    { "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16.frob", "unknown or repeated modifier .frob" },
    { "ldmatrix.sync.aligned.m8n8.x4.shared.b16.frob", "unknown or repeated modifier .frob" },
    { "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather5.mbarrier::complete_tx::bytes", ".tile::gather5" },
    { "tcgen05.ld.sync.aligned.16x64b.x1.frob.b32", "unknown or repeated modifier .frob for tcgen05.ld" },
    { "tcgen05.mma.cta_group::1", "tcgen05.mma needs one of .kind::f16 .kind::tf32 .kind::f8f6f4 .kind::i8" },
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    CHECK((lpx_form_intern(ctx, refused[i][0]) < 0 && strstr(lpx_ctx_error(ctx), refused[i][1])) ||
          !fprintf(stderr, "  %s: %s\n", refused[i][0], lpx_ctx_error(ctx)));
}

/* Every mma.sync shape row is a form the shared rule takes, spelled with
 * its family's first types; a shape of another family is refused. */
static void mma_table_tests(lpx_ctx *ctx)
{
  char text[160], why[256];
  int rows = 0;
  for (const lpx_mma_shape *r; (r = lpx_mma_shape_at(rows)); rows++) {
    const lpx_mma_family *fam = lpx_mma_family_of(r->family);
    int acc = 0;
    while (!(fam->accumulators >> acc & 1)) acc++;
    const char *a = lpx_mtype_name(r->family), *c = lpx_mtype_name(acc);
    snprintf(text, sizeof text, "mma.sync.aligned.m%dn%dk%d.row.col.%s.%s.%s.%s", r->m, r->n, r->k, c, a, a, c);
    const lpx_form_info *f = form_of(ctx, text);
    CHECK((f && lpx_mma_form_check(f, why, sizeof why) == 0) || !fprintf(stderr, "  %s: %s\n", text, why));
  }
  CHECK(rows == 22 && !lpx_mma_shape_at(-1));
  const lpx_form_info *f = form_of(ctx, "mma.sync.aligned.m16n8k4.row.col.f32.bf16.bf16.f32");
  CHECK(f && lpx_mma_form_check(f, why, sizeof why) < 0 && strstr(why, "no shape .m16n8k4 for .bf16 inputs"));
}

/* The decimal writers agree with printf on edges and on random values. */
static void decimal_tests(void)
{
  static const int64_t edges[] = { 0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 10001, 99999, 100000,
                                   2147483647, -1, -9, -10, -100, -2147483648LL, INT64_MAX, INT64_MIN };
  lpx_buf b = { 0 };
  char want[64];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; i++) {
    int64_t v = i < (int)(sizeof edges / sizeof edges[0]) ? edges[i] : (int64_t)(x >> (i % 64));
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b.n = 0;
    lpx_buf_puti(&b, v);
    lpx_buf_putc(&b, ' ');
    lpx_buf_putu(&b, (uint64_t)v);
    snprintf(want, sizeof want, "%" PRId64 " %" PRIu64, v, (uint64_t)v);
    CHECK(strcmp(b.p, want) == 0 || !fprintf(stderr, "  wrote %s, printf %s\n", b.p, want));
  }
  lpx_buf_free(&b);
}

/* Trace a body of n adds in a fresh module; returns the module. */
static lpx_module *adds_module(lpx_ctx *ctx, int n)
{
  lpx_module *m = lpx_module_new(ctx, 80, "sm_80", 64);
  int fn = lpx_func_begin(m, "k", 1, 1), u32 = lpx_type_lookup("u32");
  lpx_operand ops[3] = { opd(LPX_OPD_REG, lpx_reg_new(m, fn, u32), 0, 0), opd(LPX_OPD_REG, 0, 0, 0), opd(LPX_OPD_INT, 0, 0, 1) };
  ops[1].id = ops[0].id;
  for (int i = 0; i < n; i++) CHECK(lpx_append(m, fn, lpx_form_intern(ctx, "add.u32"), -1, 0, 3, ops, 0, 0) >= 0);
  return m;
}

/* A traced body starts at the sizes the last one on this thread reached
 * (no growth by copies), and the text buffer is reserved before emitting:
 * neither changes the PTX. */
static void size_hint_tests(lpx_ctx *ctx)
{
  lpx_module *big = adds_module(ctx, 5000);
  const char *text;
  size_t len;
  CHECK(lpx_emit(big, NULL, &text, &len) == 0);
  char *first = malloc(len + 1);
  memcpy(first, text, len + 1);
  lpx_module_free(big);
  lpx_module *next = adds_module(ctx, 1);
  CHECK(next->funcs[0].items_cap >= 5000 && next->funcs[0].ops_cap >= 15000);
  lpx_module_free(next);
  lpx_module *again = adds_module(ctx, 5000);
  CHECK(lpx_emit(again, NULL, &text, &len) == 0 && strcmp(text, first) == 0);
  lpx_module_free(again);
  free(first);
}

/* ------------------------------------------- validator memo vs. none
 * The validator remembers each instruction shape that validated, per
 * module, and on a hit copies back the validated operands (lpx_validate.c,
 * "validated shapes"); its safety rests on the key holding everything
 * validate() reads. The differential: a pseudo-random stream of
 * instructions, valid and not, appended to one module (the memo hits) and
 * each to a fresh module (validated afresh), must get the same verdicts,
 * the same errors and the same operands. */

#define VM_TYPES 9
static const char *const vm_types[VM_TYPES] = { "u32", "s32", "f32", "u64", "b32", "pred", "f64", "b64", "u16" };

/* A module with function "k" and two registers of each vm_types type,
 * ids in the order of vm_types (the same in every such module). */
static lpx_module *vm_module(lpx_ctx *ctx, const char *target, int *fn)
{
  lpx_module *m = lpx_module_new(ctx, 87, target, 64);
  *fn = lpx_func_begin(m, "k", 1, 1);
  for (int i = 0; i < 2 * VM_TYPES; i++) lpx_reg_new(m, *fn, lpx_type_lookup(vm_types[i % VM_TYPES]));
  return m;
}

/* xorshift32: the differential's stream of choices. */
static uint32_t vm_next(uint32_t *s)
{
  *s ^= *s << 13; *s ^= *s >> 17; *s ^= *s << 5;
  return *s;
}

/* A random operand: a register of any type, an integer or a number of a
 * few magnitudes, or an address through a register. */
static lpx_operand vm_operand(uint32_t *s)
{
  static const int64_t ints[] = { 0, 1, -1, 7, 255, 65536, 2147483648LL, -1099511627776LL, 3 };
  static const double nums[] = { 0, 1.5, 7, -2, 1e40, 3, 0.1, 65536 };
  switch (vm_next(s) % 5) {
  case 0: case 1: return opd(LPX_OPD_REG, (int)(vm_next(s) % (2 * VM_TYPES)), 0, 0);
  case 2: return opd(LPX_OPD_INT, 0, 0, ints[vm_next(s) % (sizeof ints / sizeof ints[0])]);
  case 3: { lpx_operand o = opd(LPX_OPD_NUM, 0, 0, 0); o.fval = nums[vm_next(s) % (sizeof nums / sizeof nums[0])]; return o; }
  default: return opd(LPX_OPD_ADDR, (int)(vm_next(s) % (2 * VM_TYPES)), LPX_OPD_REG, (int64_t)(vm_next(s) % 4) * 4);
  }
}

/* Are two operand lists the same field for field? */
static int vm_same(const lpx_operand *a, const lpx_operand *b, int n)
{
  for (int i = 0; i < n; i++)
    if (a[i].kind != b[i].kind || a[i].type != b[i].type || a[i].id != b[i].id || a[i].aux != b[i].aux ||
        a[i].ival != b[i].ival || memcmp(&a[i].fval, &b[i].fval, sizeof a[i].fval) != 0) return 0;
  return 1;
}

/* An operand fitting slot letter c of a signature (a vm_types letter:
 * register of that type, or for a source an immediate; 'a' an address),
 * or a random one one time in five. */
static lpx_operand vm_fitting(uint32_t *s, char c, int source)
{
  static const char letters[] = "usfUbpdBh";
  if (vm_next(s) % 5 == 0) return vm_operand(s);
  if (c == 'a') return opd(LPX_OPD_ADDR, 3 + VM_TYPES * (int)(vm_next(s) % 2), LPX_OPD_REG, (int64_t)(vm_next(s) % 4) * 4);
  int ty = (int)(strchr(letters, c) - letters);
  if (source && vm_next(s) % 3 == 0) {
    lpx_operand o = vm_operand(s);
    if (o.kind == LPX_OPD_INT || o.kind == LPX_OPD_NUM) return o;
  }
  return opd(LPX_OPD_REG, ty + VM_TYPES * (int)(vm_next(s) % 2), 0, 0);
}

static void vmemo_tests(lpx_ctx *ctx)
{
  static const char *const forms[][2] = {
    { "add.u32", "uuu" }, { "add.s32", "sss" }, { "add.f32", "fff" }, { "add.u64", "UUU" }, { "mul.lo.u32", "uuu" },
    { "shl.b32", "bbu" }, { "mov.u32", "uu" }, { "mov.f32", "ff" }, { "mov.b64", "BB" }, { "mov.u16", "hh" },
    { "setp.lt.s32", "pss" }, { "selp.b32", "bbbp" }, { "cvt.rn.f32.s32", "fs" }, { "min.u32", "uuu" },
    { "and.b32", "bbb" }, { "fma.rn.f32", "ffff" }, { "ld.global.u32", "ua" }, { "st.global.u32", "au" },
    { "ld.shared.f32", "fa" }, { "sub.f64", "ddd" }, { "abs.s32", "ss" }, { "neg.f32", "ff" }, { "not.pred", "pp" },
    { "bfe.u32", "uuuu" }, { "cvt.u16.u32", "hu" }, { "mad.wide.u32", "Uuuu" } };
  static const char *const targets[] = { "sm_80", "sm_90a" };
  int nforms = (int)(sizeof forms / sizeof forms[0]), valid = 0, refused = 0;
  for (int t = 0; t < 2; t++) {
    uint32_t s = 0x9e3779b9u + (uint32_t)t;
    int fn, ffn;
    lpx_module *memo = vm_module(ctx, targets[t], &fn);
    for (int i = 0; i < 4000; i++) {
      int pick = (int)(vm_next(&s) % (uint32_t)nforms);
      int form = lpx_form_intern(ctx, forms[pick][0]);
      const char *sig = forms[pick][1];
      int nops = (int)strlen(sig);
      if (vm_next(&s) % 16 == 0) nops = 1 + (int)(vm_next(&s) % 4);   /* now and then a wrong count */
      lpx_operand a[4], b[4];
      for (int k = 0; k < nops; k++) a[k] = b[k] = vm_fitting(&s, k < (int)strlen(sig) ? sig[k] : 'u', k > 0);
      int ra = lpx_append(memo, fn, form, -1, 0, nops, a, 0, i + 1);
      char err_a[512];
      snprintf(err_a, sizeof err_a, "%s", ra < 0 ? lpx_ctx_error(ctx) : "");
      lpx_module *fresh = vm_module(ctx, targets[t], &ffn);
      int rb = lpx_append(fresh, ffn, form, -1, 0, nops, b, 0, i + 1);
      int same = (ra < 0) == (rb < 0) && (ra < 0 ? strcmp(err_a, lpx_ctx_error(ctx)) == 0 : vm_same(a, b, nops));
      CHECK(same || !fprintf(stderr, "  instruction %d (%s, %d operands) on %s: memo %s, afresh %s\n", i,
                             forms[pick][0], nops, targets[t], ra < 0 ? err_a : "valid", rb < 0 ? lpx_ctx_error(ctx) : "valid"));
      if (ra < 0) refused++; else valid++;
      lpx_module_free(fresh);
    }
    lpx_module_free(memo);
  }
  CHECK((valid > 2000 && refused > 1000) || !fprintf(stderr, "  %d valid, %d refused\n", valid, refused));   /* both kinds */
}

int main(void)
{
  lpx_ctx *ctx = lpx_ctx_new();
  CHECK(lpx_form_intern(ctx, "add.u32") >= 0);
  CHECK(lpx_form_intern(ctx, "add.u32") == lpx_form_intern(ctx, "add.u32"));
  CHECK(lpx_form_intern(ctx, "add.u33") < 0);
  CHECK(lpx_form_intern(ctx, "ld.glob.f32") < 0 && strstr(lpx_ctx_error(ctx), ".global"));
  CHECK(lpx_form_intern(ctx, "setp.u32") < 0 && strstr(lpx_ctx_error(ctx), ".eq"));
  int wgf = lpx_form_intern(ctx, "wgmma.fence.sync.aligned");
  CHECK(wgf >= 0 && lpx_form_get(ctx, wgf)->max_sm == 90);
  int ld4 = lpx_form_intern(ctx, "ld.global.v4.f32");
  CHECK(ld4 >= 0 && lpx_form_get(ctx, ld4)->vec == 4);
  int unknown = lpx_form_intern(ctx, "frobnicate.b32");
  CHECK(unknown >= 0 && lpx_form_get(ctx, unknown)->op < 0 && strstr(lpx_ctx_warning(ctx), "frobnicate"));

  modifier_tests(ctx);
  family_tests(ctx);
  mma_table_tests(ctx);

  lpx_module *m = lpx_module_new(ctx, 80, "sm_80", 64);
  CHECK(m != NULL);
  CHECK(lpx_module_new(ctx, 80, "sm_9x", 64) == NULL);
  CHECK(lpx_module_new(ctx, 80, "sm_999", 64) == NULL);
  char archs[512];
  CHECK(lpx_arch_list(archs, sizeof archs) < (int32_t)sizeof archs && strstr(archs, "sm_90a sm_100 "));
  CHECK(lpx_arch_min_ptx("sm_90a") == 80 && lpx_arch_min_ptx("sm_999") == -1 && lpx_ptx_version_max() >= 90);
  char cubin_arch[16];
  CHECK(lpx_arch_for_device(ctx, "sm_80", "sm_90a", cubin_arch, 16) == 0 && strcmp(cubin_arch, "sm_90") == 0);
  CHECK(lpx_arch_for_device(ctx, "sm_90a", "sm_90a", cubin_arch, 16) == 0 && strcmp(cubin_arch, "sm_90a") == 0);
  CHECK(lpx_arch_for_device(ctx, "sm_86", "sm_86", cubin_arch, 16) == 0 && strcmp(cubin_arch, "sm_86") == 0);
  CHECK(lpx_arch_for_device(ctx, "sm_100a", "sm_90a", cubin_arch, 16) < 0 && strstr(lpx_ctx_error(ctx), "newer than this GPU (sm_90a)"));
  CHECK(lpx_arch_for_device(ctx, "sm_90a", "sm_100a", cubin_arch, 16) < 0 && strstr(lpx_ctx_error(ctx), "arch-specific"));
  int fn = lpx_func_begin(m, "k", 1, 1);
  CHECK(fn == 0);
  int f32 = lpx_type_lookup("f32"), u32 = lpx_type_lookup("u32");
  int a = lpx_reg_new(m, fn, u32), b = lpx_reg_new(m, fn, u32), f = lpx_reg_new(m, fn, f32);
  lpx_operand ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].kind = LPX_OPD_REG; ops[0].id = a;
  ops[1].kind = LPX_OPD_REG; ops[1].id = b;
  ops[2].kind = LPX_OPD_NUM; ops[2].fval = 7;
  int add = lpx_form_intern(ctx, "add.u32");
  CHECK(lpx_append(m, fn, add, -1, 0, 3, ops, 0, 0) >= 0);
  ops[1].id = f;
  CHECK(lpx_append(m, fn, add, -1, 0, 3, ops, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "operand 2 is a f32"));
  CHECK(lpx_append(m, fn, add, -1, 0, 2, ops, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "takes 3"));
  ops[1].id = b; ops[2].kind = LPX_OPD_NUM; ops[2].fval = 1.5;
  CHECK(lpx_append(m, fn, add, -1, 0, 3, ops, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "integer"));
  CHECK(lpx_append(m, fn, wgf, -1, 0, 0, ops, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "sm_90a"));

  const char *text;
  size_t len;
  CHECK(lpx_emit(m, NULL, &text, &len) == 0);
  CHECK(strstr(text, "add.u32 \t%r1, %r2, 7;") != NULL || !fputs(text, stderr));
  CHECK(strstr(text, ".reg .b32 \t%r<3>;") != NULL);
  CHECK(strstr(text, ".reg .f32 \t%f<2>;") != NULL);
  lpx_module_free(m);
  emit_tests(ctx);
  size_hint_tests(ctx);
  vmemo_tests(ctx);
  decimal_tests();
  env_tests(ctx);
  lpx_ctx_free(ctx);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
