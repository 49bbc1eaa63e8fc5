/* C unit tests for the core: forms, validation, registers, emission. */
#include "lpx_core.h"
#include <stdio.h>
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

  lpx_module *m = lpx_module_new(ctx, 80, "sm_80", 64);
  CHECK(m != NULL);
  CHECK(lpx_module_new(ctx, 80, "sm_9x", 64) == NULL);
  CHECK(lpx_module_new(ctx, 80, "sm_999", 64) == NULL);
  char archs[512];
  CHECK(lpx_arch_list(archs, sizeof archs) < (int32_t)sizeof archs && strstr(archs, "sm_90a sm_100 "));
  CHECK(lpx_arch_min_ptx("sm_90a") == 80 && lpx_arch_min_ptx("sm_999") == -1 && lpx_ptx_version_max() >= 90);
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
  lpx_ctx_free(ctx);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
