/* What the C API's launch plans share between C (src/lpx_embed.c) and Lua
 * (pyptx.runtime.embed): the plan embed.plan_dlpack fills. Fed to LuaJIT's
 * ffi.cdef after lpx_device.h (minus '#' lines): plain declarations only. */
#ifndef LPX_EMBED_H
#define LPX_EMBED_H
#include "lpx_device.h"

/* Limits of a plan: tensors (lpx_bind's), TMA maps, a map's tensor name,
 * runtime scalars (lpx_bind's). */
enum { LPX_PLAN_TENSORS = 32, LPX_PLAN_MAPS = 8, LPX_PLAN_NAME = 64, LPX_PLAN_SCALARS = 16 };

/* A prepared launch: the device and its context, the function, the launch
 * configuration, the packed parameters and where each tensor's address,
 * TMA map and runtime scalar go in them. */
typedef struct lpx_embed_plan {
  lpx_device *device; lpx_ctx *ctx; int32_t fn; int32_t staged;
  uint32_t grid[3], block[3], cluster[3]; uint32_t dynamic_smem;
  const uint8_t *params; uint64_t params_size;
  int32_t ntensors; uint64_t tensor_offset[LPX_PLAN_TENSORS];
  int32_t nmaps; int32_t map_tensor[LPX_PLAN_MAPS]; uint64_t map_offset[LPX_PLAN_MAPS]; char map_name[LPX_PLAN_MAPS][LPX_PLAN_NAME];
  int32_t nscalars; uint64_t scalar_offset[LPX_PLAN_SCALARS];
} lpx_embed_plan;

#endif
