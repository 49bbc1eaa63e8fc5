/* The device interface: kind selection ("emu", "cuda", "auto"), argument
 * checks common to every kind, dispatch through the kind's operation
 * table, and host-clock events for kinds that run synchronously. */
#include "lpx_device_impl.h"
#include "lpx_tma.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- opening */

/* Open a device of a kind; NULL with the reason in ctx. "auto" takes the
 * GPU when a driver and a device exist, else the emulator. */
lpx_device *lpx_device_open(lpx_ctx *ctx, const char *kind)
{
  if (!kind || !*kind) kind = "auto";
  int want_cuda = strcmp(kind, "cuda") == 0, want_auto = strcmp(kind, "auto") == 0;
  if (!want_cuda && !want_auto && strcmp(kind, "emu")) {
    lpx_fail(ctx, "unknown device kind '%s'; valid: auto, emu, cuda", kind);
    return NULL;
  }
  lpx_device *d = calloc(1, sizeof *d);
  if (!d) { lpx_fail(ctx, "out of memory"); return NULL; }
  d->ctx = ctx;
  d->refs = 1;
  int rc = -1;
  if (want_cuda || want_auto) rc = lpx_cuda_open(d);
  if (rc && !want_cuda) rc = lpx_emu_open(d);
  if (rc) { free(d); return NULL; }
  return d;
}

/* Free the recorded graphs. */
static void free_graphs(lpx_device *d)
{
  for (size_t g = 0; g < d->ngraphs; g++) {
    for (size_t i = 0; i < d->graphs[g].n; i++) free(d->graphs[g].launches[i].params);
    free(d->graphs[g].launches);
  }
  free(d->graphs);
}

/* Drop a reference; the last one closes the device for real. */
static void device_unref(lpx_device *d)
{
  if (--d->refs > 0) return;
  if (d->vt) d->vt->close(d);
  free_graphs(d);
  free(d->events);
  free(d);
}

/* Close a device. Memory still allocated keeps it alive until freed, so
 * finalizers may run in any order (tensors after their device). */
void lpx_device_close(lpx_device *d)
{
  if (!d || d->closed) return;
  d->closed = 1;
  device_unref(d);
}

/* A one-line description of the device. */
const char *lpx_device_describe(lpx_device *d) { return d->vt->describe(d); }

/* The device's kind ("emu", "cuda"). */
const char *lpx_device_kind(lpx_device *d) { return d->vt->kind; }

/* ----------------------------------------------------------- dispatch */

/* Set a named option (budget, threads, checks, race_check, ...). */
int32_t lpx_device_set_option(lpx_device *d, const char *name, int64_t value)
{
  return d->vt->set_option(d, name, value);
}

/* Read a named option. */
int32_t lpx_device_get_option(lpx_device *d, const char *name, int64_t *value)
{
  return d->vt->get_option(d, name, value);
}

/* Allocate device memory. */
int32_t lpx_device_alloc(lpx_device *d, uint64_t bytes, uint64_t *dptr)
{
  if (bytes == 0) return lpx_fail(d->ctx, "alloc: size 0; allocate at least one byte");
  if (d->closed) return lpx_fail(d->ctx, "alloc: the device is closed");
  if (d->vt->alloc(d, bytes, dptr)) return -1;
  d->refs++;
  return 0;
}

/* Free device memory. */
int32_t lpx_device_free(lpx_device *d, uint64_t dptr)
{
  if (d->vt->free(d, dptr)) return -1;
  device_unref(d);
  return 0;
}

/* Copy host memory to the device. */
int32_t lpx_device_upload(lpx_device *d, uint64_t dst, const void *src, uint64_t n)
{
  return n == 0 ? 0 : d->vt->upload(d, dst, src, n);
}

/* Copy device memory to the host. */
int32_t lpx_device_download(lpx_device *d, void *dst, uint64_t src, uint64_t n)
{
  return n == 0 ? 0 : d->vt->download(d, dst, src, n);
}

/* Fill device memory with a byte. */
int32_t lpx_device_memset(lpx_device *d, uint64_t dst, int32_t byte, uint64_t n)
{
  return n == 0 ? 0 : d->vt->memset(d, dst, byte & 0xff, n);
}

/* Fill count elements of width bytes (1, 2, 4 or 8) at dst with the low
 * bytes of pattern (little-endian), through uploads of a repeated chunk. */
int32_t lpx_device_fill(lpx_device *d, uint64_t dst, uint64_t pattern, int32_t width, uint64_t count)
{
  if (width != 1 && width != 2 && width != 4 && width != 8)
    return lpx_fail(d->ctx, "fill: element width %d; valid: 1, 2, 4, 8 bytes", width);
  if (count > UINT64_MAX / (uint64_t)width) return lpx_fail(d->ctx, "fill: %llu elements overflow", (unsigned long long)count);
  uint64_t left = count * (uint64_t)width, cap = left < (1u << 20) ? left : (1u << 20);
  uint8_t *chunk = malloc(cap ? (size_t)cap : 1);
  if (!chunk) return lpx_fail(d->ctx, "out of memory");
  for (uint64_t i = 0; i < cap; i++) chunk[i] = (uint8_t)(pattern >> (8 * (i % (uint64_t)width)));
  int rc = 0;
  for (; left > 0 && rc == 0; dst += cap, left -= cap) {
    if (cap > left) cap = left;
    rc = d->vt->upload(d, dst, chunk, cap);
  }
  free(chunk);
  return rc ? -1 : 0;
}

/* Load a traced module; the caller keeps m alive while the device uses it. */
int32_t lpx_device_load_ir(lpx_device *d, lpx_module *m, int32_t *module)
{
  if (!m) return lpx_fail(d->ctx, "load_ir: no module");
  return d->vt->load_ir(d, m, module);
}

/* Find an entry of a loaded module by name. */
int32_t lpx_device_function(lpx_device *d, int32_t module, const char *name, int32_t *fn)
{
  return d->vt->function(d, module, name, fn);
}

/* Check a launch configuration's shape before any kind sees it. */
static int check_cfg(lpx_device *d, const lpx_launch_cfg *c)
{
  uint64_t threads = (uint64_t)c->block[0] * c->block[1] * c->block[2];
  for (int i = 0; i < 3; i++)
    if (!c->grid[i] || !c->block[i])
      return lpx_fail(d->ctx, "launch: grid (%u, %u, %u) and block (%u, %u, %u) must be at least 1 in every dimension",
                      c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2]);
  if (threads > 1024)
    return lpx_fail(d->ctx, "launch: block (%u, %u, %u) has %llu threads; the limit is 1024",
                    c->block[0], c->block[1], c->block[2], (unsigned long long)threads);
  if (c->block[2] > 64) return lpx_fail(d->ctx, "launch: block z = %u; the limit is 64", c->block[2]);
  if (c->grid[0] > 2147483647u)
    return lpx_fail(d->ctx, "launch: grid x = %u; the limit is 2147483647 (2^31-1)", c->grid[0]);
  if (c->grid[1] > 65535 || c->grid[2] > 65535)
    return lpx_fail(d->ctx, "launch: grid y/z = %u/%u; the limit is 65535", c->grid[1], c->grid[2]);
  for (int i = 0; i < 3; i++)
    if (c->cluster[i] > 1 && c->grid[i] % c->cluster[i])
      return lpx_fail(d->ctx, "launch: grid dim %d (%u) is not a multiple of the cluster dim (%u)", i, c->grid[i], c->cluster[i]);
  return 0;
}

/* Append a launch (with a copy of its parameters) to the graph being captured. */
static int record_launch(lpx_device *d, int32_t fn, const lpx_launch_cfg *c)
{
  lpx_graph *g = &d->graphs[d->ngraphs - 1];
  if (LPX_RESERVE(g->launches, g->cap, g->n + 1)) return lpx_fail(d->ctx, "out of memory");
  lpx_recorded_launch *r = &g->launches[g->n];
  r->fn = fn;
  r->cfg = *c;
  r->params = malloc(c->params_size ? c->params_size : 1);
  if (!r->params) return lpx_fail(d->ctx, "out of memory");
  if (c->params_size) memcpy(r->params, c->params, c->params_size);
  r->cfg.params = r->params;
  g->n++;
  return 0;
}

/* Launch a function with a configuration. */
int32_t lpx_device_launch(lpx_device *d, int32_t fn, const lpx_launch_cfg *cfg)
{
  if (!cfg) return lpx_fail(d->ctx, "launch: no configuration");
  lpx_launch_cfg c = *cfg;
  for (int i = 0; i < 3; i++) if (!c.cluster[i]) c.cluster[i] = 1;
  lpx_bounds b;
  const char *name = NULL;
  if (d->vt->bounds && d->vt->bounds(d, fn, &b, &name) == 0 && lpx_bounds_apply(d->ctx, &b, name, &c)) return -1;
  if (check_cfg(d, &c)) return -1;
  if (d->capturing && !d->vt->graph_begin) return record_launch(d, fn, &c);
  return d->vt->launch(d, fn, &c);
}

/* Wait for all launched work. */
int32_t lpx_device_sync(lpx_device *d) { return d->vt->sync(d); }

/* Executed instruction counts since the device opened (emulator statistics). */
int32_t lpx_device_stats(lpx_device *d, uint64_t *warp_insts, uint64_t *lane_insts)
{
  if (!d->vt->stats) return lpx_fail(d->ctx, "stats: the %s device keeps no instruction counts", d->vt->kind);
  return d->vt->stats(d, warp_insts, lane_insts);
}

/* Validate a TMA description (lpx_tma_validate: errors name the tensor)
 * and encode it into the 128 bytes a kernel takes: the driver's
 * cuTensorMapEncode* on CUDA, the emulator's emu_tmap record on emu. */
int32_t lpx_device_tma_encode(lpx_device *d, const char *tensor, const struct lpx_tma_desc *desc, void *out128)
{
  if (!d->vt->tma_encode) return lpx_fail(d->ctx, "tma_encode: the %s device has no tensor-map encoding", d->vt->kind);
  if (!tensor || !*tensor) tensor = "tensor";
  if (lpx_tma_validate(d->ctx, tensor, desc)) return -1;
  return d->vt->tma_encode(d, tensor, desc, out128);
}

/* Point an encoded tensor map at a new global address without encoding it
 * again (the driver's cuTensorMapReplaceAddress); errors name the tensor
 * as lpx_tma_validate's do. */
int32_t lpx_device_tma_replace_address(lpx_device *d, const char *tensor, void *map128, uint64_t address)
{
  if (!d->vt->tma_replace_address)
    return lpx_fail(d->ctx, "tma_replace_address: the %s device has no tensor maps", d->vt->kind);
  if (!tensor || !*tensor) tensor = "tensor";
  if (lpx_tma_check_address(d->ctx, tensor, address, 0)) return -1;
  return d->vt->tma_replace_address(d, tensor, map128, address);
}

/* ------------------------------------------------------------- events */

/* Host monotonic time in milliseconds. */
static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Record an event: work launched before it is complete (launches are synchronous). */
int32_t lpx_device_event_record(lpx_device *d, int32_t *event)
{
  if (d->vt->event_record) return d->vt->event_record(d, event);
  if (d->vt->sync(d)) return -1;
  if (LPX_RESERVE(d->events, d->events_cap, d->nevents + 1)) return lpx_fail(d->ctx, "out of memory");
  d->events[d->nevents] = now_ms();
  *event = (int32_t)d->nevents++;
  return 0;
}

/* Milliseconds between two recorded events. */
int32_t lpx_device_event_elapsed(lpx_device *d, int32_t start, int32_t end, double *ms)
{
  if (d->vt->event_elapsed) return d->vt->event_elapsed(d, start, end, ms);
  if (start < 0 || end < 0 || (size_t)start >= d->nevents || (size_t)end >= d->nevents)
    return lpx_fail(d->ctx, "event_elapsed: unknown event %d or %d (%zu recorded)", start, end, d->nevents);
  *ms = d->events[end] - d->events[start];
  return 0;
}

/* -------------------------------------------------------------- graphs */

/* Start capturing launches into a graph (replayed by graph_launch). */
int32_t lpx_device_graph_begin(lpx_device *d)
{
  if (d->capturing) return lpx_fail(d->ctx, "graph_begin: a capture is already open; end it with graph_end");
  if (d->vt->graph_begin) { if (d->vt->graph_begin(d)) return -1; d->capturing = 1; return 0; }
  if (LPX_RESERVE(d->graphs, d->graphs_cap, d->ngraphs + 1)) return lpx_fail(d->ctx, "out of memory");
  memset(&d->graphs[d->ngraphs++], 0, sizeof(lpx_graph));
  d->capturing = 1;
  return 0;
}

/* Finish the capture; *graph names it for graph_launch. */
int32_t lpx_device_graph_end(lpx_device *d, int32_t *graph)
{
  if (!d->capturing) return lpx_fail(d->ctx, "graph_end: no capture is open (call graph_begin first)");
  d->capturing = 0;
  if (d->vt->graph_end) return d->vt->graph_end(d, graph);
  *graph = (int32_t)d->ngraphs - 1;
  return 0;
}

/* Replay a captured graph: its launches in order. */
int32_t lpx_device_graph_launch(lpx_device *d, int32_t graph)
{
  if (d->vt->graph_launch) return d->vt->graph_launch(d, graph);
  if (graph < 0 || (size_t)graph >= d->ngraphs) return lpx_fail(d->ctx, "graph_launch: no graph %d", graph);
  const lpx_graph *g = &d->graphs[graph];
  for (size_t i = 0; i < g->n; i++)
    if (d->vt->launch(d, g->launches[i].fn, &g->launches[i].cfg)) return -1;
  return 0;
}
