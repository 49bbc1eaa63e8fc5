/* The C API's CUDA launches against a stand-in driver (spec/c/fake_cuda.c,
 * found first on LD_LIBRARY_PATH as libcuda.so.1): a launch on a caller's
 * stream goes on that stream and never synchronises (no cuStreamSynchronize,
 * cuCtxSynchronize or cuEventSynchronize), so it is capturable in a CUDA
 * graph; a later launch of the same shapes (the C plan) patches the new
 * addresses into the parameters and runs no Lua (it still runs with Lua's
 * planning broken). Parameters go one by one (kernelParams) where the
 * driver lays them out, else as the packed buffer; a refused launch names
 * the kernel's registers beside the GPU's. Exits 77 (skipped) when the
 * stand-in is not the libcuda.so.1 this process loads. */
#include "fake_cuda.h"
#include "luaptx.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>


static int failures, checks;
#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static const char *SCRIPT =
  "local p = require 'pyptx'\n"
  "return p.kernel 'copy' { arch = 'sm_90a', in_specs = { p.Tile('N', p.types.f32) }, out_specs = { p.Tile('N', p.types.f32) },\n"
  "  function() p.ptx.ret() end }";

/* A float tensor of n elements at a (fake) device address. */
static DLTensor cuda_tensor(uint64_t address, int64_t *shape)
{
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)address;
  t.device.device_type = kDLCUDA;
  t.ndim = 1;
  t.shape = shape;
  t.dtype.code = kDLFloat; t.dtype.bits = 32; t.dtype.lanes = 1;
  return t;
}

/* The i-th 8-byte parameter of the last launch. */
static uint64_t param(const fake_cuda_record *r, int i)
{
  uint64_t v = 0;
  if (r->last_params_size >= (size_t)(i + 1) * 8) memcpy(&v, r->last_params + i * 8, 8);
  return v;
}

int main(void)
{
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  fake_cuda_record *(*get)(void) = lib ? (fake_cuda_record *(*)(void))dlsym(lib, "fake_cuda_record_get") : NULL;
  if (!get) { printf("skipped: libcuda.so.1 is not the stand-in driver (set LD_LIBRARY_PATH)\n"); return 77; }
  fake_cuda_record *r = get();
  void (*set_params)(int) = (void (*)(int))dlsym(lib, "fake_cuda_set_params");
  void (*fail_next)(int) = (void (*)(int))dlsym(lib, "fake_cuda_fail_next_launch");
  if (!set_params || !fail_next) { printf("skipped: the stand-in driver lacks its controls\n"); return 77; }
  set_params(2);   /* the driver lays out two 8-byte params: launches pass them one by one (kernelParams) */
  luaptx_options o = { "cuda", NULL, NULL, 1 };
  luaptx_state *S = luaptx_open(&o);
  CHECK(S && luaptx_load_string(S, SCRIPT, "=copy.lua") == 0);
  luaptx_kernel *k = luaptx_kernel_get(S, "copy", NULL);
  CHECK(k != NULL);
  if (!k) { fprintf(stderr, "%s\n", luaptx_error(S)); return 1; }
  int64_t n = 256;
  DLTensor x = cuda_tensor(0x7000000000ull, &n), y = cuda_tensor(0x7000010000ull, &n), *args[] = { &x, &y };
  void *stream = (void *)(uintptr_t)0x5151;
  int rc = luaptx_launch_dlpack(k, args, 2, stream);
  if (rc) fprintf(stderr, "%s\n", luaptx_error(S));
  CHECK(rc == 0 && r->launches == 1 && r->last_stream == stream);
  CHECK(param(r, 0) == 0x7000000000ull && param(r, 1) == 0x7000010000ull);
  /* the same shapes again: the C plan, new addresses patched, the stream given */
  x.data = (void *)(uintptr_t)0x7100000000ull;
  y.data = (void *)(uintptr_t)0x7100000100ull;
  y.byte_offset = 64;
  void *other = (void *)(uintptr_t)0x6262;
  CHECK(luaptx_launch_dlpack(k, args, 2, other) == 0 && r->launches == 2 && r->last_stream == other);
  CHECK(param(r, 0) == 0x7100000000ull && param(r, 1) == 0x7100000140ull);
  /* a new shape makes a second plan; the versioned entry point and raw addresses too */
  n = 512;
  DLManagedTensorVersioned v[2];
  memset(v, 0, sizeof v);
  v[0].version.major = v[1].version.major = 1;
  v[0].dl_tensor = x; v[1].dl_tensor = y;
  DLManagedTensorVersioned *av[] = { &v[0], &v[1] };
  CHECK(luaptx_launch_dlpack_versioned(k, av, 2, stream) == 0 && r->launches == 3 && r->last_stream == stream);
  uint64_t ptrs[2] = { 0x7200000000ull, 0x7200001000ull };
  luaptx_kernel *k256 = luaptx_kernel_get(S, "copy", "N=256");
  rc = k256 ? luaptx_launch_ptrs(k256, ptrs, 2, stream) : -1;
  if (rc) fprintf(stderr, "%s\n", luaptx_error(S));
  CHECK(rc == 0 && r->launches == 4 && param(r, 1) == 0x7200001000ull);
  /* a CPU tensor is refused by the cuda device, naming it */
  x.device.device_type = kDLCPU;
  CHECK(luaptx_launch_dlpack(k, args, 2, stream) == -1
        && strstr(luaptx_error(S), "input 1 is a CPU tensor but the launch runs on the cuda device"));
  /* planned shapes launch without Lua: with planning broken, they still
   * run, and only a new shape reaches Lua (and its error) */
  CHECK(luaptx_load_string(S, "package.loaded['pyptx.runtime.embed'].plan_dlpack = "
                              "function() error('planned again', 0) end\nreturn {}", "=break.lua") == 0);
  n = 256;
  x.device.device_type = kDLCUDA;
  CHECK(luaptx_launch_dlpack(k, args, 2, stream) == 0 && r->launches == 5);
  n = 1024;
  CHECK(luaptx_launch_dlpack(k, args, 2, stream) == -1 && strcmp(luaptx_error(S), "planned again") == 0 && r->launches == 5);
  /* none of them waited for the GPU */
  CHECK(r->stream_syncs == 0 && r->ctx_syncs == 0 && r->event_syncs == 0);
  /* a refused launch says what the kernel asks for beside what the GPU has */
  n = 256;
  fail_next(701);
  CHECK(luaptx_launch_dlpack(k, args, 2, stream) == -1);
  CHECK(strstr(luaptx_error(S), "launching kernel copy (grid") && strstr(luaptx_error(S), "the GPU refused it")
        && strstr(luaptx_error(S), "uses 168 registers per thread") && strstr(luaptx_error(S), "this GPU has 65536 per block")
        && !strstr(luaptx_error(S), "(f->handle"));
  luaptx_close(S);
  /* a driver that cannot lay out parameters gets the packed buffer */
  set_params(-1);
  luaptx_state *S2 = luaptx_open(&o);
  luaptx_kernel *k2 = S2 && luaptx_load_string(S2, SCRIPT, "=copy.lua") == 0 ? luaptx_kernel_get(S2, "copy", NULL) : NULL;
  x.data = (void *)(uintptr_t)0x7300000000ull;
  y.data = (void *)(uintptr_t)0x7300001000ull;
  y.byte_offset = 0;
  CHECK(k2 && luaptx_launch_dlpack(k2, args, 2, stream) == 0 && r->last_params_size == 16);
  CHECK(param(r, 0) == 0x7300000000ull && param(r, 1) == 0x7300001000ull);
  luaptx_close(S2);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
