/* Internal side of the device interface: the table of operations each
 * device kind implements, and the device object the dispatcher owns. */
#ifndef LPX_DEVICE_IMPL_H
#define LPX_DEVICE_IMPL_H
#include "lpx_device.h"
#include "lpx_internal.h"
#include "lpx_bounds.h"

typedef struct lpx_device_vt {
  const char *kind;
  void (*close)(lpx_device *d);
  const char *(*describe)(lpx_device *d);
  int (*set_option)(lpx_device *d, const char *name, int64_t value);
  int (*get_option)(lpx_device *d, const char *name, int64_t *value);
  int (*alloc)(lpx_device *d, uint64_t bytes, uint64_t *dptr);
  int (*free)(lpx_device *d, uint64_t dptr);
  int (*upload)(lpx_device *d, uint64_t dst, const void *src, uint64_t n);
  int (*download)(lpx_device *d, void *dst, uint64_t src, uint64_t n);
  int (*memset)(lpx_device *d, uint64_t dst, int byte, uint64_t n);
  int (*load_ir)(lpx_device *d, lpx_module *m, int32_t *module);
  int (*function)(lpx_device *d, int32_t module, const char *name, int32_t *fn);
  int (*launch)(lpx_device *d, int32_t fn, const lpx_launch_cfg *cfg);
  int (*sync)(lpx_device *d);
  int (*stats)(lpx_device *d, uint64_t *warp_insts, uint64_t *lane_insts);
  /* Optional: device-side events (NULL: host-clock events after a sync). */
  int (*event_record)(lpx_device *d, int32_t *event);
  int (*event_elapsed)(lpx_device *d, int32_t start, int32_t end, double *ms);
  /* Optional: native graph capture (NULL: the dispatcher records launches). */
  int (*graph_begin)(lpx_device *d);
  int (*graph_end)(lpx_device *d, int32_t *graph);
  int (*graph_launch)(lpx_device *d, int32_t graph);
  /* Encode a TMA description (validated by the dispatcher) into the 128
   * launch bytes, and patch an encoded map's address; tensor names it. */
  int (*tma_encode)(lpx_device *d, const char *tensor, const struct lpx_tma_desc *desc, void *out128);
  int (*tma_replace_address)(lpx_device *d, const char *tensor, void *map128, uint64_t address);
  /* The launch directives of function fn and its name (lpx_bounds.c), which
   * the dispatcher applies to every launch. */
  int (*bounds)(lpx_device *d, int32_t fn, lpx_bounds *b, const char **name);
} lpx_device_vt;

/* A launch recorded for replay (its parameters copied). */
typedef struct lpx_recorded_launch {
  int32_t fn;
  lpx_launch_cfg cfg;
  void *params;
} lpx_recorded_launch;

/* A recorded sequence of launches. */
typedef struct lpx_graph {
  lpx_recorded_launch *launches; size_t n, cap;
} lpx_graph;

struct lpx_device {
  const lpx_device_vt *vt;
  lpx_ctx *ctx;
  void *impl;
  double *events; size_t nevents, events_cap;   /* host ms at record time */
  int64_t refs;      /* the opener's reference plus one per live allocation */
  int capturing;     /* between graph_begin and graph_end (recorded graphs) */
  lpx_graph *graphs; size_t ngraphs, graphs_cap;
  int closed;        /* lpx_device_close was called; freed when refs reach 0 */
};

/* Open the CPU emulator on d (fills d->vt and d->impl). */
int lpx_emu_open(lpx_device *d);

/* Open the CUDA driver device on d; -1 without a driver or a GPU. */
int lpx_cuda_open(lpx_device *d);

#endif
