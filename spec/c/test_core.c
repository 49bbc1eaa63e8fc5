/* C unit tests for the core: forms, validation, registers, emission. */
#include "lpx_core.h"
#include <stdio.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

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
  lpx_ctx_free(ctx);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
