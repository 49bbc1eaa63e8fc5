/* The "cuda" device: the CUDA Driver API loaded with dlopen (never linked),
 * primary context, modules compiled through the cubin cache, launches with
 * cuLaunchKernelEx when a cluster is set, dynamic shared memory above
 * 48 KB, and every CUresult turned into its name, its text and the call. */
#include "lpx_device_impl.h"
#include "lpx_compile.h"
#include "lpx_tma.h"
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

/* Driver entry points: X(field, exported name, return, parameters). The
 * exported names carry the _v2 suffixes cuda.h maps the plain names to. */
#define LPX_CUDA_FUNCS(X) \
  X(Init, "cuInit", CUresult, (unsigned)) \
  X(DeviceGetCount, "cuDeviceGetCount", CUresult, (int *)) \
  X(DeviceGet, "cuDeviceGet", CUresult, (int *, int)) \
  X(DeviceGetName, "cuDeviceGetName", CUresult, (char *, int, int)) \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int *, int, int)) \
  X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (void **, int)) \
  X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (int)) \
  X(CtxSetCurrent, "cuCtxSetCurrent", CUresult, (void *)) \
  X(CtxSynchronize, "cuCtxSynchronize", CUresult, (void)) \
  X(MemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t)) \
  X(MemFree, "cuMemFree_v2", CUresult, (CUdeviceptr)) \
  X(MemcpyHtoD, "cuMemcpyHtoD_v2", CUresult, (CUdeviceptr, const void *, size_t)) \
  X(MemcpyDtoH, "cuMemcpyDtoH_v2", CUresult, (void *, CUdeviceptr, size_t)) \
  X(MemsetD8, "cuMemsetD8_v2", CUresult, (CUdeviceptr, unsigned char, size_t)) \
  X(ModuleLoadData, "cuModuleLoadData", CUresult, (void **, const void *)) \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", CUresult, (void **, const void *, unsigned, int *, void **)) \
  X(ModuleUnload, "cuModuleUnload", CUresult, (void *)) \
  X(ModuleGetFunction, "cuModuleGetFunction", CUresult, (void **, void *, const char *)) \
  X(FuncSetAttribute, "cuFuncSetAttribute", CUresult, (void *, int, int)) \
  X(FuncGetAttribute, "cuFuncGetAttribute", CUresult, (int *, int, void *)) \
  X(LaunchKernel, "cuLaunchKernel", CUresult, (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **)) \
  X(LaunchKernelEx, "cuLaunchKernelEx", CUresult, (const launch_config *, void *, void **, void **)) \
  X(StreamSynchronize, "cuStreamSynchronize", CUresult, (void *)) \
  X(EventCreate, "cuEventCreate", CUresult, (void **, unsigned)) \
  X(EventRecord, "cuEventRecord", CUresult, (void *, void *)) \
  X(EventSynchronize, "cuEventSynchronize", CUresult, (void *)) \
  X(EventElapsedTime, "cuEventElapsedTime", CUresult, (float *, void *, void *)) \
  X(EventDestroy, "cuEventDestroy_v2", CUresult, (void *)) \
  X(GetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **)) \
  X(GetErrorString, "cuGetErrorString", CUresult, (CUresult, const char **)) \
  X(StreamCreate, "cuStreamCreate", CUresult, (void **, unsigned)) \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", CUresult, (void *, int)) \
  X(StreamEndCapture, "cuStreamEndCapture", CUresult, (void *, void **)) \
  X(GraphInstantiate, "cuGraphInstantiateWithFlags", CUresult, (void **, void *, unsigned long long)) \
  X(GraphLaunch, "cuGraphLaunch", CUresult, (void *, void *)) \
  X(GraphDestroy, "cuGraphDestroy", CUresult, (void *))

/* CUlaunchAttribute and CUlaunchConfig, laid out as cuda.h does. */
typedef struct launch_attr { int id; char pad[4]; union { char raw[64]; struct { unsigned x, y, z; } dim; } value; } launch_attr;
typedef struct launch_config {
  unsigned grid[3], block[3], smem;
  void *stream;
  launch_attr *attrs;
  unsigned nattrs;
} launch_config;

enum {
  ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76, ATTR_REGS_PER_BLOCK = 12, ATTR_SMEM_OPTIN = 97,
  FUNC_MAX_THREADS = 0, FUNC_STATIC_SMEM = 1, FUNC_LOCAL_BYTES = 3, FUNC_NUM_REGS = 4,
  FUNC_MAX_DYN_SMEM = 8, FUNC_NON_PORTABLE_CLUSTER = 14, CU_INVALID_VALUE = 1, CU_OUT_OF_RESOURCES = 701,
  LAUNCH_ATTR_CLUSTER_DIM = 4, JIT_ERROR_LOG = 5, JIT_ERROR_LOG_SIZE = 6,
};
#define LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define LAUNCH_PARAM_END ((void *)0x00)

typedef struct cuda_api {
#define X(field, name, ret, params) ret (*field) params;
  LPX_CUDA_FUNCS(X)
#undef X
  CUresult (*FuncGetParamInfo)(void *, size_t, size_t *, size_t *);   /* CUDA 12.4+; optional */
} cuda_api;

/* A loaded kernel's parameters as luaptx packs them (lpx_param_layout). */
typedef struct cuda_entry {
  int32_t module; char name[128]; uint32_t nparams; uint32_t *offsets; uint64_t size;
  lpx_bounds bounds;             /* its launch directives (lpx_bounds.c) */
} cuda_entry;

typedef struct cuda_fn {
  void *handle; char name[128]; int smem_raised; int nonportable;
  int32_t packed;                /* index into entries; -1: launch the packed buffer as it is */
  int32_t entry;                 /* index into entries; -1: not found (no launch directives known) */
  void **param_ptrs;             /* one per parameter, pointed into the launch's buffer */
} cuda_fn;

typedef struct cuda_dev {
  void *lib;
  cuda_api api;
  int ordinal;
  void *context, *stream;
  char name[256], describe[320], arch[16];
  lpx_compiler *compiler;
  void **modules; size_t nmodules, modules_cap;
  cuda_fn *fns; size_t nfns, fns_cap;
  void **events; size_t nevents, events_cap;
  void **graphs; size_t ngraphs, graphs_cap;   /* instantiated CUgraphExec */
  cuda_entry *entries; size_t nentries, entries_cap;   /* the loaded kernels' packed layouts */
  void *saved_stream;                          /* the stream before a capture */
} cuda_dev;

#define DEV(d) ((cuda_dev *)(d)->impl)

/* ---------------------------------------------------------------- errors */

/* Fail with the failed call, the CUresult's name and its text. */
static int cu_fail(lpx_device *d, const char *call, CUresult rc, const char *what)
{
  const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
  cuda_dev *c = DEV(d);
  if (c && c->api.GetErrorName) c->api.GetErrorName(rc, &name);
  if (c && c->api.GetErrorString) c->api.GetErrorString(rc, &text);
  int call_len = (int)strcspn(call, "(");   /* "cuLaunchKernel", not its argument list */
  return lpx_fail(d->ctx, "%s%s%.*s failed: %s (%d: %s)", what ? what : "", what ? ": " : "", call_len, call, name, rc,
                  text);
}

#define CU(d, call, what) do { CUresult rc_ = DEV(d)->api.call; \
  if (rc_) return cu_fail(d, "cu" #call, rc_, what); } while (0)

/* ------------------------------------------------------------- loading */

/* dlopen libcuda.so.1 and resolve every entry point; 0 on success. */
static int load_driver(lpx_device *d, cuda_dev *c)
{
  c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!c->lib)
    return lpx_fail(d->ctx, "no CUDA driver: libcuda.so.1 could not be loaded (%s); "
                            "use the CPU emulator (LUAPTX_DEVICE=emu) or install the NVIDIA driver", dlerror());
#define X(field, name, ret, params) c->api.field = (ret(*) params)dlsym(c->lib, name); \
  if (!c->api.field) return lpx_fail(d->ctx, "the CUDA driver lacks %s (driver too old for luaptx)", name);
  LPX_CUDA_FUNCS(X)
#undef X
  c->api.FuncGetParamInfo = (CUresult(*)(void *, size_t, size_t *, size_t *))dlsym(c->lib, "cuFuncGetParamInfo");
  return 0;
}

/* Initialise the driver, pick device 0 and make its primary context current. */
static int open_context(lpx_device *d, cuda_dev *c)
{
  int count = 0, major = 0, minor = 0;
  CU(d, Init(0), "starting the CUDA driver");
  CU(d, DeviceGetCount(&count), NULL);
  if (count < 1) return lpx_fail(d->ctx, "the CUDA driver found no GPU; use the CPU emulator (LUAPTX_DEVICE=emu)");
  CU(d, DeviceGet(&c->ordinal, 0), NULL);
  CU(d, DeviceGetName(c->name, (int)sizeof c->name, c->ordinal), NULL);
  CU(d, DeviceGetAttribute(&major, ATTR_CC_MAJOR, c->ordinal), NULL);
  CU(d, DeviceGetAttribute(&minor, ATTR_CC_MINOR, c->ordinal), NULL);
  snprintf(c->arch, sizeof c->arch, "sm_%d%d%s", major, minor, major >= 9 ? "a" : "");
  CU(d, PrimaryCtxRetain(&c->context, c->ordinal), NULL);
  CU(d, CtxSetCurrent(c->context), NULL);
  snprintf(c->describe, sizeof c->describe, "cuda (%s, %s)", c->name, c->arch);
  return 0;
}

/* ------------------------------------------------------------ operations */

/* Release modules, the context and the library. */
static void cuda_close(lpx_device *d)
{
  cuda_dev *c = DEV(d);
  if (!c) return;
  for (size_t i = 0; i < c->nmodules; i++) if (c->modules[i]) c->api.ModuleUnload(c->modules[i]);
  for (size_t i = 0; i < c->nevents; i++) if (c->events[i]) c->api.EventDestroy(c->events[i]);
  free(c->events);
  if (c->context) c->api.PrimaryCtxRelease(c->ordinal);
  if (c->compiler) lpx_compiler_close(c->compiler);
  if (c->lib) dlclose(c->lib);
  free(c->modules);
  for (size_t i = 0; i < c->nfns; i++) free(c->fns[i].param_ptrs);
  for (size_t i = 0; i < c->nentries; i++) free(c->entries[i].offsets);
  free(c->entries);
  free(c->fns);
  free(c);
  d->impl = NULL;
}

/* "cuda (NVIDIA H100 80GB HBM3, sm_90a)". */
static const char *cuda_describe(lpx_device *d) { return DEV(d)->describe; }

/* Options: "stream" (a CUstream as an integer; 0 = the default stream). */
static int cuda_set_option(lpx_device *d, const char *name, int64_t value)
{
  if (strcmp(name, "stream") == 0) { DEV(d)->stream = (void *)(intptr_t)value; return 0; }
  return lpx_fail(d->ctx, "cuda device: unknown option '%s'; valid: stream", name);
}

/* Read an option ("stream", "cc" as major*10+minor). */
static int cuda_get_option(lpx_device *d, const char *name, int64_t *value)
{
  if (strcmp(name, "stream") == 0) { *value = (int64_t)(intptr_t)DEV(d)->stream; return 0; }
  if (strcmp(name, "cc") == 0) { *value = atoi(DEV(d)->arch + 3); return 0; }
  return lpx_fail(d->ctx, "cuda device: unknown option '%s'; valid: stream, cc", name);
}

static int cuda_alloc(lpx_device *d, uint64_t n, uint64_t *p) { CU(d, MemAlloc(p, n), "alloc"); return 0; }
static int cuda_free(lpx_device *d, uint64_t p) { CU(d, MemFree(p), "free"); return 0; }
static int cuda_upload(lpx_device *d, uint64_t dst, const void *src, uint64_t n) { CU(d, MemcpyHtoD(dst, src, n), "upload"); return 0; }
static int cuda_download(lpx_device *d, void *dst, uint64_t src, uint64_t n) { CU(d, MemcpyDtoH(dst, src, n), "download"); return 0; }
static int cuda_memset(lpx_device *d, uint64_t dst, int b, uint64_t n) { CU(d, MemsetD8(dst, (unsigned char)b, n), "memset"); return 0; }

/* Pass a kernel's parameters one by one (kernelParams) when the driver can
 * count them: it lays them out aligned to its constant bank, not from
 * offset 0 as the packed buffer does, so a buffer holding a 64-byte
 * aligned tensor map would not match and is refused. */
static int param_layout(lpx_device *d, cuda_fn *f, int32_t module)
{
  cuda_dev *c = DEV(d);
  size_t off, size, n = 0;
  const cuda_entry *e = NULL;
  f->packed = f->entry = -1;
  for (size_t i = 0; i < c->nentries && !e; i++)
    if (c->entries[i].module == module && strcmp(c->entries[i].name, f->name) == 0) e = &c->entries[i];
  if (e) f->entry = (int32_t)(e - c->entries);
  if (!e || !c->api.FuncGetParamInfo) return 0;
  CUresult rc;
  while ((rc = c->api.FuncGetParamInfo(f->handle, n, &off, &size)) == 0) n++;
  if (n == 0 && rc != CU_INVALID_VALUE) return 0;   /* the driver cannot say: launch the packed buffer */
  if (n != e->nparams)
    return lpx_fail(d->ctx, "kernel %s: the driver sees %zu parameters, the PTX declares %u", f->name, n, e->nparams);
  f->param_ptrs = malloc((n ? n : 1) * sizeof *f->param_ptrs);
  if (!f->param_ptrs) return lpx_fail(d->ctx, "out of memory");
  f->packed = (int32_t)(e - c->entries);
  return 0;
}

/* Record the packed parameter layout of each kernel of a loaded module. */
static int keep_entries(lpx_device *d, lpx_module *m, int32_t module)
{
  cuda_dev *c = DEV(d);
  for (size_t i = 0; i < m->nfuncs; i++) {
    const lpx_func *fn = &m->funcs[i];
    if (!fn->is_entry) continue;
    if (LPX_RESERVE(c->entries, c->entries_cap, c->nentries + 1)) return lpx_fail(d->ctx, "out of memory");
    cuda_entry *e = &c->entries[c->nentries];
    memset(e, 0, sizeof *e);
    e->offsets = malloc((fn->nparams ? fn->nparams : 1) * sizeof *e->offsets);
    if (!e->offsets) return lpx_fail(d->ctx, "out of memory");
    e->module = module;
    snprintf(e->name, sizeof e->name, "%.*s", (int)lpx_strtab_len(&m->syms, fn->sym), lpx_strtab_get(&m->syms, fn->sym));
    e->nparams = (uint32_t)fn->nparams;
    e->size = lpx_param_layout(fn, e->offsets);
    lpx_bounds_of(m, fn, &e->bounds);
    c->nentries++;
  }
  return 0;
}

/* Load PTX through the driver JIT (the last resort), keeping its log. */
static int load_ptx_jit(lpx_device *d, const char *ptx, void **mod)
{
  char log[8192] = "";
  int opts[2] = { JIT_ERROR_LOG, JIT_ERROR_LOG_SIZE };
  void *vals[2] = { log, (void *)(uintptr_t)sizeof log };
  CUresult rc = DEV(d)->api.ModuleLoadDataEx(mod, ptx, 2, opts, vals);
  if (rc) return cu_fail(d, "cuModuleLoadDataEx", rc, log[0] ? log : "driver JIT of the PTX");
  return 0;
}

/* Emit the module's PTX, compile it through the cache, load the cubin. */
static int cuda_load_ir(lpx_device *d, lpx_module *m, int32_t *module)
{
  cuda_dev *c = DEV(d);
  lpx_emit_opts eo = { 1, 1 };
  const char *ptx;
  size_t len;
  if (lpx_emit(m, &eo, &ptx, &len)) return -1;
  if (!c->compiler) c->compiler = lpx_compiler_open(d->ctx, NULL);
  void *mod = NULL;
  lpx_cubin out;
  lpx_compile_opts co = { 1, -1, 0, 0, 0 };
  char arch[16];
  if (lpx_arch_for_device(d->ctx, m->target, c->arch, arch, (int32_t)sizeof arch)) return -1;
  /* nvJitLink alone cannot compile a setmaxnreg kernel launchably: the driver JIT can */
  int driver_jit = c->compiler && !lpx_compiler_has_ptxas(c->compiler) && lpx_compile_needs_whole_program(ptx, len);
  if (driver_jit) {
    if (load_ptx_jit(d, ptx, &mod)) return -1;
  } else if (c->compiler && lpx_compile(c->compiler, ptx, len, arch, &co, &out) == 0) {
    CU(d, ModuleLoadData(&mod, out.data), "loading the compiled cubin");
  } else if (!c->compiler) {
    if (load_ptx_jit(d, ptx, &mod)) return -1;
  } else {
    return -1;
  }
  if (LPX_RESERVE(c->modules, c->modules_cap, c->nmodules + 1)) return lpx_fail(d->ctx, "out of memory");
  c->modules[c->nmodules] = mod;
  if (keep_entries(d, m, (int32_t)c->nmodules)) return -1;
  *module = (int32_t)c->nmodules++;
  return 0;
}

/* Find a kernel by name in a loaded module. */
static int cuda_function(lpx_device *d, int32_t module, const char *name, int32_t *fn)
{
  cuda_dev *c = DEV(d);
  if (module < 0 || (size_t)module >= c->nmodules) return lpx_fail(d->ctx, "function: no module %d", module);
  if (LPX_RESERVE(c->fns, c->fns_cap, c->nfns + 1)) return lpx_fail(d->ctx, "out of memory");
  cuda_fn *f = &c->fns[c->nfns];
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  CU(d, ModuleGetFunction(&f->handle, c->modules[module], name), name);
  if (param_layout(d, f, module)) return -1;
  *fn = (int32_t)c->nfns++;
  return 0;
}

/* Raise the function's attributes a launch needs (once each). */
static int prepare_fn(lpx_device *d, cuda_fn *f, const lpx_launch_cfg *cfg)
{
  if (cfg->dynamic_smem > 48 * 1024 && (int)cfg->dynamic_smem > f->smem_raised) {
    CU(d, FuncSetAttribute(f->handle, FUNC_MAX_DYN_SMEM, (int)cfg->dynamic_smem), f->name);
    f->smem_raised = (int)cfg->dynamic_smem;
  }
  unsigned cluster = cfg->cluster[0] * cfg->cluster[1] * cfg->cluster[2];
  if (cluster > 8 && !f->nonportable) {
    CU(d, FuncSetAttribute(f->handle, FUNC_NON_PORTABLE_CLUSTER, 1), f->name);
    f->nonportable = 1;
  }
  return 0;
}

/* An attribute of a function or of the device, or -1 when the driver will not say. */
static int fn_attr(cuda_dev *c, void *fn, int attr)
{
  int v = -1;
  if (fn ? c->api.FuncGetAttribute(&v, attr, fn) : c->api.DeviceGetAttribute(&v, attr, c->ordinal)) return -1;
  return v;
}

/* Fail a refused launch with what the compiled kernel asks for beside what
 * this GPU has, so "too many resources" says which resource. */
static int launch_fail(lpx_device *d, cuda_fn *f, const lpx_launch_cfg *cfg, CUresult rc)
{
  cuda_dev *c = DEV(d);
  const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
  c->api.GetErrorName(rc, &name);
  c->api.GetErrorString(rc, &text);
  unsigned threads = cfg->block[0] * cfg->block[1] * cfg->block[2];
  int regs = fn_attr(c, f->handle, FUNC_NUM_REGS);
  if ((rc != CU_OUT_OF_RESOURCES && rc != CU_INVALID_VALUE) || regs < 0)
    return lpx_fail(d->ctx, "launching kernel %s (grid %ux%ux%u, block %ux%ux%u): the GPU refused it: %s (%s)%s",
                    f->name, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0], cfg->block[1], cfg->block[2], text,
                    name, regs < 0 ? "; the driver cannot describe the kernel now (an earlier kernel may have faulted, "
                                     "which leaves the CUDA context unusable until the process ends)" : "");
  return lpx_fail(d->ctx,
    "launching kernel %s (grid %ux%ux%u, block %ux%ux%u, %u bytes of dynamic shared memory): the GPU refused it: "
    "%s (%s). The compiled kernel uses %d registers per thread (%ld for %u threads; this GPU has %d per block), "
    "%d bytes of static shared memory (dynamic + static may be at most %d), %d bytes of local memory per thread, "
    "and may run at most %d threads per block",
    f->name, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0], cfg->block[1], cfg->block[2],
    cfg->dynamic_smem, text, name, regs, (long)regs * threads, threads, fn_attr(c, NULL, ATTR_REGS_PER_BLOCK),
    fn_attr(c, f->handle, FUNC_STATIC_SMEM), fn_attr(c, NULL, ATTR_SMEM_OPTIN), fn_attr(c, f->handle, FUNC_LOCAL_BYTES),
    fn_attr(c, f->handle, FUNC_MAX_THREADS));
}

/* Launch with the packed parameter buffer; cuLaunchKernelEx for clusters. */
static int cuda_launch(lpx_device *d, int32_t fn, const lpx_launch_cfg *cfg)
{
  cuda_dev *c = DEV(d);
  if (fn < 0 || (size_t)fn >= c->nfns) return lpx_fail(d->ctx, "launch: no function %d", fn);
  cuda_fn *f = &c->fns[fn];
  if (prepare_fn(d, f, cfg)) return -1;
  size_t size = (size_t)cfg->params_size;
  void *extra_[] = { LAUNCH_PARAM_BUFFER_POINTER, (void *)cfg->params, LAUNCH_PARAM_BUFFER_SIZE, &size, LAUNCH_PARAM_END };
  void **extra = extra_, **kparams = NULL;
  if (f->packed >= 0) {
    const cuda_entry *e = &c->entries[f->packed];
    if (size != e->size)
      return lpx_fail(d->ctx, "launching kernel %s: its parameters take %" PRIu64 " bytes, the launch packed %zu",
                      f->name, e->size, size);
    for (uint32_t i = 0; i < e->nparams; i++) f->param_ptrs[i] = (char *)cfg->params + e->offsets[i];
    kparams = f->param_ptrs;
    extra = NULL;
  }
  CUresult rc;
  if (cfg->cluster[0] * cfg->cluster[1] * cfg->cluster[2] <= 1) {
    rc = c->api.LaunchKernel(f->handle, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0], cfg->block[1],
                             cfg->block[2], cfg->dynamic_smem, c->stream, kparams, extra);
    return rc ? launch_fail(d, f, cfg, rc) : 0;
  }
  launch_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.id = LAUNCH_ATTR_CLUSTER_DIM;
  attr.value.dim.x = cfg->cluster[0]; attr.value.dim.y = cfg->cluster[1]; attr.value.dim.z = cfg->cluster[2];
  launch_config lc = { { cfg->grid[0], cfg->grid[1], cfg->grid[2] }, { cfg->block[0], cfg->block[1], cfg->block[2] },
                       cfg->dynamic_smem, c->stream, &attr, 1 };
  rc = c->api.LaunchKernelEx(&lc, f->handle, kparams, extra);
  return rc ? launch_fail(d, f, cfg, rc) : 0;
}

/* Wait for the stream (or the whole context on the default stream). */
static int cuda_sync(lpx_device *d)
{
  if (DEV(d)->stream) CU(d, StreamSynchronize(DEV(d)->stream), "sync");
  else CU(d, CtxSynchronize(), "sync");
  return 0;
}

/* Record a CUDA event on the device's stream. */
static int cuda_event_record(lpx_device *d, int32_t *event)
{
  cuda_dev *c = DEV(d);
  void *ev = NULL;
  if (LPX_RESERVE(c->events, c->events_cap, c->nevents + 1)) return lpx_fail(d->ctx, "out of memory");
  CU(d, EventCreate(&ev, 0), "event");
  c->events[c->nevents] = ev;
  *event = (int32_t)c->nevents++;
  CU(d, EventRecord(ev, c->stream), "event");
  return 0;
}

/* Milliseconds between two recorded events (waits for the second). */
static int cuda_event_elapsed(lpx_device *d, int32_t start, int32_t end, double *ms)
{
  cuda_dev *c = DEV(d);
  if (start < 0 || end < 0 || (size_t)start >= c->nevents || (size_t)end >= c->nevents)
    return lpx_fail(d->ctx, "event_elapsed: unknown event %d or %d", start, end);
  float f = 0;
  CU(d, EventSynchronize(c->events[end]), "event");
  CU(d, EventElapsedTime(&f, c->events[start], c->events[end]), "event");
  *ms = f;
  return 0;
}

/* Begin capturing on a stream of our own (the legacy default stream
 * cannot be captured); launches until graph_end go into the graph. */
static int cuda_graph_begin(lpx_device *d)
{
  cuda_dev *c = DEV(d);
  c->saved_stream = c->stream;
  if (!c->stream) CU(d, StreamCreate(&c->stream, 1 /* non-blocking */), "graph capture");
  CU(d, StreamBeginCapture(c->stream, 0 /* global mode */), "graph capture");
  return 0;
}

/* End the capture and instantiate the graph. */
static int cuda_graph_end(lpx_device *d, int32_t *graph)
{
  cuda_dev *c = DEV(d);
  void *g = NULL, *exec = NULL;
  CU(d, StreamEndCapture(c->stream, &g), "graph capture");
  CUresult rc = c->api.GraphInstantiate(&exec, g, 0);
  c->api.GraphDestroy(g);
  if (rc) return cu_fail(d, "cuGraphInstantiateWithFlags", rc, "graph capture");
  if (LPX_RESERVE(c->graphs, c->graphs_cap, c->ngraphs + 1)) return lpx_fail(d->ctx, "out of memory");
  c->graphs[c->ngraphs] = exec;
  *graph = (int32_t)c->ngraphs++;
  return 0;
}

/* Replay an instantiated graph on the device's stream. */
static int cuda_graph_launch(lpx_device *d, int32_t graph)
{
  cuda_dev *c = DEV(d);
  if (graph < 0 || (size_t)graph >= c->ngraphs) return lpx_fail(d->ctx, "graph_launch: no graph %d", graph);
  CU(d, GraphLaunch(c->graphs[graph], c->stream), "graph launch");
  return 0;
}

/* --- TMA (untested here: no GPU in CI) ---------------------------------- */

typedef CUresult (*encode_tiled_fn)(void *, int, unsigned, void *, const uint64_t *, const uint64_t *,
                                    const unsigned *, const unsigned *, int, int, int, int);

typedef CUresult (*encode_im2col_fn)(void *, int, unsigned, void *, const uint64_t *, const uint64_t *, const int *,
                                     const int *, unsigned, unsigned, const unsigned *, int, int, int, int);

/* Fail a tensor-map call, naming the tensor as lpx_tma_validate does. */
static int tma_fail(lpx_device *d, const char *call, CUresult rc, const char *tensor)
{
  char what[256];
  snprintf(what, sizeof what, "TMA descriptor for %s", tensor);
  return cu_fail(d, call, rc, what);
}

/* cuTensorMapEncodeIm2col of a validated im2col description (corners W first). */
static int cuda_tma_encode_im2col(lpx_device *d, const char *tensor, const struct lpx_tma_desc *t, const unsigned *es,
                                  void *out128)
{
  encode_im2col_fn enc = (encode_im2col_fn)dlsym(DEV(d)->lib, "cuTensorMapEncodeIm2col");
  if (!enc) return lpx_fail(d->ctx, "the CUDA driver lacks cuTensorMapEncodeIm2col (CUDA 12 or newer is needed for TMA)");
  CUresult rc = enc(out128, t->dtype, (unsigned)t->rank, (void *)(uintptr_t)t->global_address, t->dims, t->strides,
                    t->lower, t->upper, t->channels, t->pixels, es, t->interleave, t->swizzle, t->l2_promotion, t->oob_fill);
  return rc ? tma_fail(d, "cuTensorMapEncodeIm2col", rc, tensor) : 0;
}

/* cuTensorMapEncodeTiled (or ...Im2col) of a validated description
 * (resolved on first use, so drivers before CUDA 12 still open). Enum
 * fields use the driver's numbering. */
static int cuda_tma_encode(lpx_device *d, const char *tensor, const struct lpx_tma_desc *t, void *out128)
{
  unsigned es[5];
  for (int i = 0; i < 5; i++) es[i] = t->elem_strides[i] ? t->elem_strides[i] : 1;
  if (t->mode == 1) return cuda_tma_encode_im2col(d, tensor, t, es, out128);
  encode_tiled_fn enc = (encode_tiled_fn)dlsym(DEV(d)->lib, "cuTensorMapEncodeTiled");
  if (!enc) return lpx_fail(d->ctx, "the CUDA driver lacks cuTensorMapEncodeTiled (CUDA 12 or newer is needed for TMA)");
  CUresult rc = enc(out128, t->dtype, (unsigned)t->rank, (void *)(uintptr_t)t->global_address, t->dims, t->strides,
                    t->box, es, t->interleave, t->swizzle, t->l2_promotion, t->oob_fill);
  return rc ? tma_fail(d, "cuTensorMapEncodeTiled", rc, tensor) : 0;
}

typedef int (*replace_address_fn)(void *, void *);

/* Patch the global address of an encoded tensor map in place. */
static int cuda_tma_replace_address(lpx_device *d, const char *tensor, void *map128, uint64_t address)
{
  replace_address_fn fn = (replace_address_fn)dlsym(DEV(d)->lib, "cuTensorMapReplaceAddress");
  if (!fn) return lpx_fail(d->ctx, "the CUDA driver lacks cuTensorMapReplaceAddress (CUDA 12 or newer is needed for TMA)");
  CUresult rc = fn(map128, (void *)(uintptr_t)address);
  return rc ? tma_fail(d, "cuTensorMapReplaceAddress", rc, tensor) : 0;
}

/* The launch directives of kernel fn, checked before the driver sees the
 * launch (lpx_bounds.c); -1 when unknown. */
static int cuda_bounds(lpx_device *d, int32_t fn, lpx_bounds *b, const char **name)
{
  cuda_dev *c = DEV(d);
  if (fn < 0 || (size_t)fn >= c->nfns || c->fns[fn].entry < 0) return -1;
  *b = c->entries[c->fns[fn].entry].bounds;
  *name = c->fns[fn].name;
  return 0;
}

static const lpx_device_vt cuda_vt = {
  "cuda", cuda_close, cuda_describe, cuda_set_option, cuda_get_option, cuda_alloc, cuda_free,
  cuda_upload, cuda_download, cuda_memset, cuda_load_ir, cuda_function, cuda_launch, cuda_sync, NULL,
  cuda_event_record, cuda_event_elapsed, cuda_graph_begin, cuda_graph_end, cuda_graph_launch, cuda_tma_encode,
  cuda_tma_replace_address, cuda_bounds,
};

/* Open the CUDA device on d; -1 (reason in the context) without a driver or GPU. */
int lpx_cuda_open(lpx_device *d)
{
  cuda_dev *c = calloc(1, sizeof *c);
  if (!c) return lpx_fail(d->ctx, "out of memory");
  d->impl = c;
  d->vt = &cuda_vt;
  if (load_driver(d, c) || open_context(d, c)) {
    cuda_close(d);
    d->vt = NULL;
    return -1;
  }
  return 0;
}

