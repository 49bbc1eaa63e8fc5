/* A stand-in libcuda.so.1 for spec/c/test_embed_cuda.c: every driver entry
 * point luaptx's cuda device resolves, succeeding without a GPU, counting
 * synchronisations and recording each launch's stream and parameter bytes,
 * so that a test on a machine without a GPU can see what the C API asks of
 * the driver. Not a driver: nothing runs. When lpx_cuda.c's LPX_CUDA_FUNCS
 * gains an entry point, add it here (the test then says which is lacking). */
#include "fake_cuda.h"
#include <stdint.h>
#include <string.h>

typedef int CUresult;

static fake_cuda_record rec;
static uint64_t next_address = 0x100000000ull;
static int nparams = -1;      /* cuFuncGetParamInfo's kernels: this many 8-byte params; -1: not supported */
static CUresult fail_next;    /* the next launch's result */

/* The record of calls so far. */
fake_cuda_record *fake_cuda_record_get(void) { return &rec; }

/* From now on, kernels take n 8-byte parameters (cuFuncGetParamInfo
 * answers for them); -1: the entry point says it is not supported. */
void fake_cuda_set_params(int n) { nparams = n; }

/* Make the next launch fail with rc. */
void fake_cuda_fail_next_launch(CUresult rc) { fail_next = rc; }

/* Succeed, doing nothing (entry points whose effect no test reads). */
#define NOP(name, params) CUresult name params { return 0; }
NOP(cuInit, (unsigned f)) 
NOP(cuDeviceGet, (int *d, int o))
NOP(cuDevicePrimaryCtxRelease_v2, (int d))
NOP(cuCtxSetCurrent, (void *c))
NOP(cuMemFree_v2, (uint64_t p))
NOP(cuMemcpyHtoD_v2, (uint64_t d, const void *s, size_t n))
NOP(cuMemcpyDtoH_v2, (void *d, uint64_t s, size_t n))
NOP(cuMemsetD8_v2, (uint64_t d, unsigned char b, size_t n))
NOP(cuModuleUnload, (void *m))
NOP(cuFuncSetAttribute, (void *f, int a, int v))
NOP(cuEventRecord, (void *e, void *s))
NOP(cuEventDestroy_v2, (void *e))
NOP(cuStreamBeginCapture_v2, (void *s, int m))
NOP(cuGraphLaunch, (void *g, void *s))
NOP(cuGraphDestroy, (void *g))

/* One GPU. */
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }

/* Its name. */
CUresult cuDeviceGetName(char *name, int len, int d) { (void)d; strncpy(name, "fake GPU", (size_t)len); return 0; }

/* Compute capability 9.0 (attributes 75, 76), an H100's registers per
 * block (12) and opt-in shared memory (97); 0 for any other attribute. */
CUresult cuDeviceGetAttribute(int *v, int attr, int d)
{
  (void)d;
  *v = attr == 75 ? 9 : attr == 12 ? 65536 : attr == 97 ? 232448 : 0;
  return 0;
}

/* Function attributes: 168 registers, 384 threads at most; 0 for the rest. */
CUresult cuFuncGetAttribute(int *v, int attr, void *f) { (void)f; *v = attr == 4 ? 168 : attr == 0 ? 384 : 0; return 0; }

/* Parameter i of a kernel: at 8 * i, 8 bytes, while i < nparams. */
CUresult cuFuncGetParamInfo(void *f, size_t i, size_t *offset, size_t *size)
{
  (void)f;
  if (nparams < 0) return 801;   /* CUDA_ERROR_NOT_SUPPORTED */
  if ((int)i >= nparams) return 1;   /* CUDA_ERROR_INVALID_VALUE */
  *offset = 8 * i; *size = 8;
  return 0;
}

/* A context handle. */
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &rec; return 0; }

/* Counted: the test checks a stream launch never calls it. */
CUresult cuCtxSynchronize(void) { rec.ctx_syncs++; return 0; }

/* Counted likewise. */
CUresult cuStreamSynchronize(void *s) { (void)s; rec.stream_syncs++; return 0; }

/* Counted likewise. */
CUresult cuEventSynchronize(void *e) { (void)e; rec.event_syncs++; return 0; }

/* Fresh fake addresses, 256-byte aligned. */
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) { *p = next_address; next_address += (n + 255) / 256 * 256 + 256; return 0; }

/* A module handle for a cubin or PTX. */
CUresult cuModuleLoadData(void **m, const void *image) { (void)image; *m = &next_address; return 0; }

/* The same through the JIT entry point. */
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) { (void)n; (void)o; (void)v; return cuModuleLoadData(m, image); }

/* A function handle. */
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; (void)name; *f = &rec; return 0; }

/* Record the stream and the parameters: the buffer of extra (POINTER,
 * buf, SIZE, &size, END), or kernelParams, one 8-byte value each. */
static CUresult record_launch(void *stream, void **params, void **extra)
{
  CUresult rc = fail_next;
  fail_next = 0;
  if (rc) return rc;
  rec.launches++;
  rec.last_stream = stream;
  size_t n = extra ? *(size_t *)extra[3] : params && nparams > 0 ? 8 * (size_t)nparams : 0;
  rec.last_params_size = n;
  if (extra && n <= sizeof rec.last_params) memcpy(rec.last_params, extra[1], n);
  for (int i = 0; !extra && params && i < nparams && 8 * (i + 1) <= (int)sizeof rec.last_params; i++)
    memcpy(rec.last_params + 8 * i, params[i], 8);
  return 0;
}

/* A launch, recorded. */
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *stream, void **params, void **extra)
{
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem;
  return record_launch(stream, params, extra);
}

/* A cluster launch, recorded (the stream is the config's fifth field). */
typedef struct { unsigned grid[3], block[3], smem; void *stream; void *attrs; unsigned nattrs; } launch_config;
CUresult cuLaunchKernelEx(const launch_config *c, void *f, void **params, void **extra)
{
  (void)f;
  return record_launch(c->stream, params, extra);
}

/* An event handle. */
CUresult cuEventCreate(void **e, unsigned f) { (void)f; *e = &rec; return 0; }

/* No time passes here. */
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 0; return 0; }

/* Names and texts of results. */
CUresult cuGetErrorName(CUresult rc, const char **s) { (void)rc; *s = "FAKE_ERROR"; return 0; }

/* Likewise. */
CUresult cuGetErrorString(CUresult rc, const char **s) { (void)rc; *s = "fake driver error"; return 0; }

/* A stream handle. */
CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = &next_address; return 0; }

/* A graph handle. */
CUresult cuStreamEndCapture(void *s, void **g) { (void)s; *g = &rec; return 0; }

/* An executable graph handle. */
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) { (void)g; (void)f; *e = &rec; return 0; }
