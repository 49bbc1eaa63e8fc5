/* A kernel's launch directives and the launch conditions they set (lpx_bounds.c). */
#ifndef LPX_BOUNDS_H
#define LPX_BOUNDS_H
#include "lpx_device.h"
#include "lpx_internal.h"

/* What a kernel's directives ask of its launches (0: not given). */
typedef struct lpx_bounds {
  uint32_t reqntid[3], maxntid[3], reqcluster[3];
  uint32_t maxclusterrank, minnctapersm;
  int explicitcluster;
} lpx_bounds;

void lpx_bounds_of(const lpx_module *m, const lpx_func *f, lpx_bounds *b);
int lpx_bounds_apply(lpx_ctx *ctx, const lpx_bounds *b, const char *name, lpx_launch_cfg *c);

#endif
