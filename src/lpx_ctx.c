/* The core's context: where errors and warnings are left for the caller. */
#include "lpx_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Create a context; NULL when out of memory. */
lpx_ctx *lpx_ctx_new(void)
{
  return calloc(1, sizeof(lpx_ctx));
}

/* Free a context, its interned forms and its token buffer. */
void lpx_ctx_free(lpx_ctx *ctx)
{
  if (!ctx) return;
  lpx_strtab_free(&ctx->form_names);
  free(ctx->forms);
  free(ctx->toks);
  free(ctx);
}

/* The message of the last failed call. */
const char *lpx_ctx_error(lpx_ctx *ctx) { return ctx->error; }

/* Take the pending warning (empty when none); reading clears it. */
const char *lpx_ctx_warning(lpx_ctx *ctx)
{
  memcpy(ctx->warning_out, ctx->warning, LPX_MSG_MAX);
  ctx->warning[0] = '\0';
  return ctx->warning_out;
}

/* Record an error message and return -1 so callers can `return lpx_fail(..)`. */
int lpx_fail(lpx_ctx *ctx, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->error, LPX_MSG_MAX, fmt, ap);
  va_end(ap);
  return -1;
}

/* Record a warning for the caller to show. */
void lpx_warn(lpx_ctx *ctx, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->warning, LPX_MSG_MAX, fmt, ap);
  va_end(ap);
}
