/* luaptx devices: one interface (alloc, copy, load, launch, sync, events)
 * over the CPU emulator ("emu") and, later, the CUDA driver ("cuda").
 * Fed to LuaJIT's ffi.cdef after lpx_core.h (minus '#' lines), so it holds
 * plain one-line declarations only. Every call returns 0, or -1 with the
 * message in the context (lpx_ctx_error). */
#ifndef LPX_DEVICE_H
#define LPX_DEVICE_H
#include "lpx_core.h"

typedef struct lpx_device lpx_device;

/* One launch: grid, block and cluster dims, dynamic shared memory and the
 * kernel's .param list packed with natural alignment in declaration order. */
typedef struct lpx_launch_cfg {
  uint32_t grid[3], block[3], cluster[3];
  uint32_t dynamic_smem;
  const void *params; uint64_t params_size;
} lpx_launch_cfg;

lpx_device *lpx_device_open(lpx_ctx *ctx, const char *kind);
struct lpx_tma_desc;
int32_t lpx_device_tma_encode(lpx_device *d, const char *tensor, const struct lpx_tma_desc *desc, void *out128);
int32_t lpx_device_tma_replace_address(lpx_device *d, const char *tensor, void *map128, uint64_t address);
void lpx_device_close(lpx_device *d);
const char *lpx_device_describe(lpx_device *d);
const char *lpx_device_kind(lpx_device *d);
int32_t lpx_device_set_option(lpx_device *d, const char *name, int64_t value);
int32_t lpx_device_get_option(lpx_device *d, const char *name, int64_t *value);
int32_t lpx_device_alloc(lpx_device *d, uint64_t bytes, uint64_t *dptr);
int32_t lpx_device_free(lpx_device *d, uint64_t dptr);
int32_t lpx_device_upload(lpx_device *d, uint64_t dst, const void *src, uint64_t n);
int32_t lpx_device_download(lpx_device *d, void *dst, uint64_t src, uint64_t n);
int32_t lpx_device_memset(lpx_device *d, uint64_t dst, int32_t byte, uint64_t n);
int32_t lpx_device_fill(lpx_device *d, uint64_t dst, uint64_t pattern, int32_t width, uint64_t count);
int32_t lpx_device_load_ir(lpx_device *d, lpx_module *m, int32_t *module);
int32_t lpx_device_function(lpx_device *d, int32_t module, const char *name, int32_t *fn);
int32_t lpx_device_launch(lpx_device *d, int32_t fn, const lpx_launch_cfg *cfg);
int32_t lpx_device_sync(lpx_device *d);
int32_t lpx_device_event_record(lpx_device *d, int32_t *event);
int32_t lpx_device_event_elapsed(lpx_device *d, int32_t start, int32_t end, double *ms);
int32_t lpx_device_stats(lpx_device *d, uint64_t *warp_insts, uint64_t *lane_insts);
int32_t lpx_device_graph_begin(lpx_device *d);
int32_t lpx_device_graph_end(lpx_device *d, int32_t *graph);
int32_t lpx_device_graph_launch(lpx_device *d, int32_t graph);
int32_t lpx_emu_row_handled(int32_t op);

#endif
