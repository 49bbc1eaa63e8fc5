/* libFuzzer target for the C API's tensor descriptions (luaptx.h): the
 * input bytes describe the tensors of a launch field by field (NULL
 * tensors, ranks from -2^31 to 2^31, NULL or short shape and stride
 * arrays, any dims, strides, dtypes, devices, byte offsets and DLPack 1.0
 * versions and flags) and the target calls luaptx_kernel_bind,
 * luaptx_launch_dlpack and luaptx_launch_dlpack_versioned with them on
 * the emulator. Shape and stride arrays are allocated with exactly the
 * elements the description gives (at most the rank), so a read past them
 * is an AddressSanitizer report. Oracle: every call returns 0 or -1 (-2
 * for kernel_bind's dtype errors) and fails with a message; an accepted
 * tensor has a rank of 0..8, the kernel's dtype and dims, data unless
 * empty, an aligned address and numpy's C-contiguous layout (checked here
 * independently of src/lpx_bind.c). A launch is made only when each
 * tensor's data is a live buffer of at least the bytes it claims, so a
 * launch reads memory the caller owns (the API's contract).
 * Build: cmake -S . -B build-fuzz -DLUAPTX_FUZZ=ON -DLUAPTX_TESTS=OFF -DCMAKE_C_COMPILER=clang
 *        cmake --build build-fuzz --target fuzz_capi
 *        ./build-fuzz/fuzz_capi -runs=1000000
 * ctest runs spec/fuzz/fuzz_main.c's driver over it (c_fuzz_capi_smoke). */
#include "luaptx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NT = 3, REAL = 4096 };   /* tensors of the kernel; bytes of a real buffer */

static luaptx_state *S;
static luaptx_kernel *K[3];      /* "k" with M = 2, 1 and 0 (N = 4) */
static float real[NT][REAL / 4];

/* Open the state and the kernels once (M, N given: one plan each). */
static void setup(void)
{
  if (S) return;
  setenv("LUAPTX_EMU_THREADS", "1", 1);
  luaptx_options o = { "emu", NULL, NULL, 1 };
  S = luaptx_open(&o);
  if (!S || luaptx_load_string(S, "local p = require 'pyptx'\n"
      "return p.kernel 'k' { arch = 'sm_80', in_specs = { p.Tile('M', 'N', p.types.f32), p.Tile('N', p.types.f32) },\n"
      "  out_specs = { p.Tile('M', 'N', p.types.f32) }, block = { 32 }, function() p.ptx.ret() end }", "=k.lua")) abort();
  K[0] = luaptx_kernel_get(S, "k", "M=2,N=4");
  K[1] = luaptx_kernel_get(S, "k", "M=1,N=4");
  K[2] = luaptx_kernel_get(S, "k", "M=0,N=4");
  if (!K[0] || !K[1] || !K[2]) abort();
}

/* The input, read a field at a time (zeros past its end). */
typedef struct rd { const uint8_t *d; size_t n, at; } rd;

/* The next n bytes (n <= 8) as an unsigned integer. */
static uint64_t take(rd *r, int n)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)(r->at < r->n ? r->d[r->at++] : 0) << (8 * i);
  return v;
}

/* A dim or stride: mostly the one a valid tensor has (want), else small,
 * sometimes anything. */
static int64_t number(rd *r, int64_t want)
{
  uint8_t how = (uint8_t)take(r, 1);
  if (how < 224) return want;
  if (how < 200) return (int64_t)(how % 6);
  if (how < 230) return (int64_t)(int8_t)take(r, 1);
  return (int64_t)take(r, 8);
}

/* One described tensor and what the fuzzer allocated for it. */
typedef struct desc {
  DLTensor t;
  DLManagedTensorVersioned v;
  int64_t *shape, *strides;
  int honest;                    /* data is a live buffer of the bytes claimed */
} desc;

/* Elements a shape claims (0 when empty; -1 past 2^40 or a negative dim). */
static int64_t claimed(const DLTensor *t)
{
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) return -1;
    if (t->shape[d] == 0) return 0;
    if (t->shape[d] > ((int64_t)1 << 40) / n) return -1;
    n *= t->shape[d];
  }
  return n;
}

/* Is the next field valid? (most are: a launch needs all valid) */
static int valid(rd *r) { return take(r, 1) < 248; }

/* Describe tensor i of a launch of kernel K[m] from the input. */
static void describe(rd *r, desc *x, int i, int m)
{
  memset(x, 0, sizeof *x);
  uint8_t rank = (uint8_t)take(r, 1);
  int32_t want = 2 - (i == 1);
  int32_t ndim = rank < 240 ? want : rank < 240 ? rank % 4 : (int32_t)take(r, 4);
  int given = ndim < 0 ? 0 : ndim > 10 ? (int)(take(r, 1) % 10) : ndim;   /* elements actually allocated */
  x->t.ndim = ndim;
  x->t.device.device_type = valid(r) ? kDLCPU : (DLDeviceType)(take(r, 1) % 4);
  x->t.device.device_id = valid(r) ? 0 : (int32_t)(take(r, 1) % 2);
  x->t.dtype.code = valid(r) ? kDLFloat : (uint8_t)(take(r, 1) % 8);
  x->t.dtype.bits = valid(r) ? 32 : (uint8_t)take(r, 1);
  x->t.dtype.lanes = valid(r) ? 1 : (uint16_t)take(r, 1);
  if (valid(r) || given) {
    x->shape = malloc(sizeof(int64_t) * (size_t)(given ? given : 1));
    for (int d = 0; d < given; d++) x->shape[d] = number(r, d == given - 1 ? 4 : 2 - m);
    x->t.shape = x->shape;
  }
  if (!valid(r)) {
    x->strides = malloc(sizeof(int64_t) * (size_t)(given ? given : 1));
    for (int d = 0; d < given; d++) x->strides[d] = number(r, d == given - 1 ? 1 : 4);
    x->t.strides = x->strides;
  }
  uint8_t where = (uint8_t)take(r, 1);
  x->t.byte_offset = where < 224 ? 0 : where < 244 ? take(r, 1) : take(r, 8);
  x->t.data = where % 16 == 0 ? NULL : where % 16 == 1 ? (void *)(uintptr_t)take(r, 8) : (void *)real[i];
  int64_t n = ndim >= 0 && ndim <= 8 && given == ndim && x->t.shape ? claimed(&x->t) : -1;
  x->honest = x->t.data == (void *)real[i] && n >= 0 && x->t.byte_offset < REAL
              && (uint64_t)n * x->t.dtype.bits / 8 * x->t.dtype.lanes <= REAL - x->t.byte_offset;
  x->v.version.major = (uint32_t)(valid(r) ? 1 : take(r, 1) % 3);
  x->v.flags = valid(r) ? 0 : take(r, 1) % 4;
  x->v.dl_tensor = x->t;
}

/* numpy's C-contiguity, computed here on its own. */
static int contiguous(const DLTensor *t)
{
  if (!t->strides || claimed(t) == 0) return 1;
  int64_t want = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want) return 0;
    want *= t->shape[d];
  }
  return 1;
}

/* What an accepted launch must have had: each tensor usable. */
static void check_accepted(desc *x, int n, int m, int versioned)
{
  for (int i = 0; i < n; i++) {
    const DLTensor *t = &x[i].t;
    if (t->ndim != 2 - (i == 1) || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) abort();
    if (t->shape[t->ndim - 1] != 4 || (t->ndim == 2 && t->shape[0] != 2 - m)) abort();
    if (!contiguous(t) || t->device.device_type != kDLCPU) abort();
    if (claimed(t) > 0 && (!t->data || ((uintptr_t)t->data + t->byte_offset) % 4)) abort();
    if (versioned && i == 2 && x[i].v.flags) abort();
  }
}

static long stats[4];   /* inputs, binds accepted, launches made, launches accepted */

/* Print the counts (LPX_FUZZ_STATS set): how much of the API a run reached. */
static void print_stats(void)
{
  fprintf(stderr, "fuzz_capi: %ld inputs, %ld binds accepted, %ld launches made, %ld accepted\n", stats[0], stats[1], stats[2], stats[3]);
}

/* One input: describe the tensors, then bind, launch and launch versioned. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  setup();
  if (stats[0]++ == 0 && getenv("LPX_FUZZ_STATS")) atexit(print_stats);
  rd r = { data, size, 0 };
  int m = (int)(take(&r, 1) % 3), n = valid(&r) ? NT : (int)(take(&r, 1) % 5);
  int null_at = valid(&r) ? -1 : (int)(take(&r, 1) % 4), null_array = !valid(&r);
  luaptx_kernel *k = K[m];
  desc x[4];
  DLTensor *ts[4];
  DLManagedTensorVersioned *vs[4];
  int honest = 1;
  for (int i = 0; i < 4; i++) {
    describe(&r, &x[i], i % NT, m);
    ts[i] = i == null_at ? NULL : &x[i].t;
    vs[i] = ts[i] ? &x[i].v : NULL;
    honest &= i >= n || (ts[i] && x[i].honest);
  }
  int64_t shapes[LUAPTX_MAX_DIMS];
  int rc = luaptx_kernel_bind(k, null_array ? NULL : ts, NULL, n, shapes);
  if (rc != 0 && rc != -1 && rc != -2) abort();
  if (rc && !*luaptx_error(S)) abort();
  if (!rc && n == NT) check_accepted(x, n, m, 0);
  stats[1] += !rc;
  if (!rc && n == 2 && (shapes[0] != 2 - m || shapes[1] != 4)) abort();
  if (honest && !(null_array)) {
    rc = luaptx_launch_dlpack(k, ts, n, NULL);
    if ((rc != 0 && rc != -1) || (rc && !*luaptx_error(S))) abort();
    if (!rc) check_accepted(x, n, m, 0);
    stats[2]++;
    stats[3] += !rc;
    rc = luaptx_launch_dlpack_versioned(k, vs, n, NULL);
    if ((rc != 0 && rc != -1) || (rc && !*luaptx_error(S))) abort();
    if (!rc) check_accepted(x, n, m, 1);
  }
  for (int i = 0; i < 4; i++) { free(x[i].shape); free(x[i].strides); }
  return 0;
}
