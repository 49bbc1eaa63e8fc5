/* Tests of the embedding API (luaptx.h): two states at once, launches from
 * DLPack tensors on the emulator, and every error path giving a message. */
#include "luaptx.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

enum { B = 4, N = 512 };

/* A float DLTensor on the host. */
static DLTensor tensor(float *data, int64_t *shape, int ndim)
{
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* Open a state on the emulator that finds examples/ under root. */
static luaptx_state *open_state(const char *root)
{
  static char path[4096];
  snprintf(path, sizeof path, "%s/?.lua", root);
  luaptx_options o = { "emu", NULL, path, 1 };
  luaptx_state *S = luaptx_open(&o);
  CHECK(S != NULL);
  CHECK(luaptx_load_string(S, "return require('examples.hopper.rms_norm').build(4, 512)", "=setup") == 0);
  return S;
}

/* Largest error of y against the RMS norm of x, w (scaled by s). */
static double rms_error(const float *x, const float *w, const float *y)
{
  double worst = 0;
  for (int b = 0; b < B; b++) {
    double ss = 0;
    for (int i = 0; i < N; i++) ss += (double)x[b * N + i] * x[b * N + i];
    double r = 1 / sqrt(ss / N + 1e-6);
    for (int i = 0; i < N; i++) {
      double e = fabs(y[b * N + i] - x[b * N + i] * r * w[i]);
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

/* The bf16 bits of a float that bf16 holds exactly (its top half). */
static uint16_t bf16_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* A kernel with TMA tensor maps (the Hopper GEMM: TMA loads, mbarriers,
 * wgmma) launched through the C API on fresh random inputs: D = A * B^T,
 * checked element for element against a double reference. Values are k/8
 * for k in -8..8 without 0, so bf16 holds them and the f32 sums are exact. */
static void test_tma_kernel(const char *root)
{
  enum { M = 128, NN = 128, K = 64 };
  static char path[4096];
  snprintf(path, sizeof path, "%s/?.lua", root);
  luaptx_options o = { "emu", NULL, path, 1 };
  luaptx_state *S = luaptx_open(&o);
  CHECK(S && luaptx_load_string(S, "return require('examples.hopper.gemm').build(128, 128, 64)", "=gemm") == 0);
  luaptx_kernel *k = luaptx_kernel_get(S, "hopper_gemm", NULL);
  CHECK(k != NULL);
  if (!k) { fprintf(stderr, "%s\n", luaptx_error(S)); luaptx_close(S); return; }
  static float a[M * K], b[NN * K], d[M * NN];
  static uint16_t ab[M * K], bb[NN * K];
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  for (int i = 0; i < M * K; i++) { a[i] = (float)((rand() % 8 + 1) * (rand() % 2 ? 1 : -1)) / 8; ab[i] = bf16_bits(a[i]); }
  for (int i = 0; i < NN * K; i++) { b[i] = (float)((rand() % 8 + 1) * (rand() % 2 ? 1 : -1)) / 8; bb[i] = bf16_bits(b[i]); }
  for (int i = 0; i < M * NN; i++) d[i] = NAN;
  int64_t as[2] = { M, K }, bs[2] = { NN, K }, ds[2] = { M, NN };
  DLTensor ta = tensor((float *)ab, as, 2), tb = tensor((float *)bb, bs, 2), td = tensor(d, ds, 2);
  ta.dtype.code = tb.dtype.code = kDLBfloat;
  ta.dtype.bits = tb.dtype.bits = 16;
  DLTensor *args[] = { &ta, &tb, &td };
  int rc = luaptx_launch_dlpack(k, args, 3, NULL);
  CHECK(rc == 0);
  if (rc) fprintf(stderr, "%s\n", luaptx_error(S));
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < NN; j++) {
      double want = 0;
      for (int kk = 0; kk < K; kk++) want += (double)a[i * K + kk] * b[j * K + kk];
      bad += !(d[i * NN + j] == (float)want);
    }
  CHECK(bad == 0);
  /* the maps are validated and encoded in C by the device: a misaligned
   * address is refused before launch, naming the kernel and the tensor */
  uint64_t ptrs[3] = { 0x1008, 0x2000, 0x3000 };
  CHECK(luaptx_launch_ptrs(k, ptrs, 3, NULL) == -1
        && strcmp(luaptx_error(S), "kernel \"hopper_gemm\": TMA descriptor for hopper_gemm_param_0: global address 0x1008 "
                  "is not 16-byte aligned") == 0);
  luaptx_close(S);
}

/* Hostile calls (25.4): NULL states, kernels, tensors, shapes and data,
 * huge ranks and offsets, misaligned offsets, read-only outputs: each a
 * -1 (or NULL) with a message, never a crash or a read past the caller's
 * arrays. x, w, y: rms_norm's B x N, N and B x N tensors on the host. */
static void test_hostile(luaptx_state *S, luaptx_kernel *k, DLTensor *x, DLTensor *w, DLTensor *y)
{
  size_t len = 7;
  CHECK(luaptx_kernel_specs(NULL, &len) == NULL && luaptx_kernel_ptx(NULL, &len) == NULL && len == 7);
  CHECK(luaptx_kernel_cubin(NULL, NULL) == NULL && luaptx_kernel_check(NULL, NULL) == NULL);
  CHECK(luaptx_device(NULL) != NULL && *luaptx_device(NULL) == '\0' && luaptx_kernel_names(NULL) == NULL);
  CHECK(strcmp(luaptx_error(NULL), "no state") == 0);
  CHECK(luaptx_load_file(NULL, "x.lua") == -1 && luaptx_load_string(NULL, "return 1", NULL) == -1);
  CHECK(luaptx_load_file(S, NULL) == -1 && strcmp(luaptx_error(S), "luaptx_load_file: path is NULL") == 0);
  CHECK(luaptx_load_string(S, NULL, NULL) == -1 && strcmp(luaptx_error(S), "luaptx_load_string: chunk is NULL") == 0);
  CHECK(luaptx_kernel_get(NULL, "rms_norm", NULL) == NULL);
  CHECK(luaptx_kernel_get(S, NULL, NULL) == NULL && strcmp(luaptx_error(S), "luaptx_kernel_get: name is NULL") == 0);
  DLTensor *args[] = { x, w, y };
  CHECK(luaptx_launch_dlpack(NULL, args, 3, NULL) == -1 && luaptx_launch_dlpack_versioned(NULL, NULL, 3, NULL) == -1);
  CHECK(luaptx_launch_ptrs(NULL, NULL, 0, NULL) == -1);
  CHECK(luaptx_launch_dlpack(k, NULL, 3, NULL) == -1 && strstr(luaptx_error(S), "the tensor array is NULL"));
  DLTensor *with_null[] = { x, NULL, y };
  CHECK(luaptx_launch_dlpack(k, with_null, 3, NULL) == -1 && strcmp(luaptx_error(S), "kernel \"rms_norm\": input 2 is a NULL pointer") == 0);
  CHECK(luaptx_launch_dlpack(k, args, -1, NULL) == -1 && strstr(luaptx_error(S), "takes 3 tensors (2 input(s), then 1 output(s)), got -1"));
  DLTensor t = *x;
  DLTensor *a[] = { &t, w, y };
  t.shape = NULL;
  CHECK(luaptx_launch_dlpack(k, a, 3, NULL) == -1 && strcmp(luaptx_error(S), "kernel \"rms_norm\": input 1 has rank 2 but a NULL shape") == 0);
  t = *x; t.ndim = 1000;   /* would read 1000 dims from a 2-element array */
  CHECK(luaptx_launch_dlpack(k, a, 3, NULL) == -1 && strcmp(luaptx_error(S), "kernel \"rms_norm\": input 1 has rank 1000; valid: 0..8") == 0);
  t = *x; t.byte_offset = (uint64_t)1 << 60;
  CHECK(luaptx_launch_dlpack(k, a, 3, NULL) == -1 && strstr(luaptx_error(S), "beyond any process's memory"));
  t = *x; t.byte_offset = 2;   /* refused on every device, the emulator too */
  CHECK(luaptx_launch_dlpack(k, a, 3, NULL) == -1 && strstr(luaptx_error(S), "not a multiple of its element size (4 bytes)"));
  t = *x; t.data = NULL;
  CHECK(luaptx_launch_dlpack(k, a, 3, NULL) == -1 && strstr(luaptx_error(S), "input 1 has NULL data but 2048 elements"));
  /* DLPack 1.0: a read-only (or copied) output is refused; NULL entries too */
  DLManagedTensorVersioned v[3];
  memset(v, 0, sizeof v);
  for (int i = 0; i < 3; i++) { v[i].version.major = 1; v[i].dl_tensor = *args[i]; }
  v[2].flags = 1;   /* DLPACK_FLAG_BITMASK_READ_ONLY */
  DLManagedTensorVersioned *av[] = { &v[0], &v[1], &v[2] };
  CHECK(luaptx_launch_dlpack_versioned(k, av, 3, NULL) == -1
        && strcmp(luaptx_error(S), "kernel \"rms_norm\": output 1 is read-only (DLPack flag READ_ONLY); outputs must be writable in place") == 0);
  v[2].flags = 2;   /* DLPACK_FLAG_BITMASK_IS_COPIED */
  CHECK(luaptx_launch_dlpack_versioned(k, av, 3, NULL) == -1 && strstr(luaptx_error(S), "output 1 is a copy of its tensor"));
  v[2].flags = 0; v[0].flags = 1;   /* a read-only input is fine */
  CHECK(luaptx_launch_dlpack_versioned(k, av, 3, NULL) == 0);
  av[1] = NULL;
  CHECK(luaptx_launch_dlpack_versioned(k, av, 3, NULL) == -1 && strstr(luaptx_error(S), "input 2 is a NULL pointer"));
  CHECK(luaptx_launch_dlpack_versioned(k, av, 1000, NULL) == -1 && strstr(luaptx_error(S), "got 1000"));
  CHECK(luaptx_launch_dlpack_versioned(k, NULL, 3, NULL) == -1 && strstr(luaptx_error(S), "tensors is NULL"));
  /* a boundary beyond the binding (rank 9): its PTX is there, launches say why not */
  CHECK(luaptx_load_string(S, "local p = require 'pyptx'\n"
        "return p.kernel 'deep' { arch = 'sm_80', in_specs = { p.Tile(1, 1, 1, 1, 1, 1, 1, 1, 1, p.types.f32) },\n"
        "  out_specs = { p.Tile(1, p.types.f32) }, function() p.ptx.ret() end }", "=deep.lua") == 0);
  luaptx_kernel *deep = luaptx_kernel_get(S, "deep", NULL);
  CHECK(deep && luaptx_kernel_ptx(deep, NULL) && luaptx_launch_dlpack(deep, args, 2, NULL) == -1
        && strstr(luaptx_error(S), "has rank 9; luaptx binds ranks up to 8"));
  CHECK(deep && luaptx_launch_dlpack_versioned(deep, av, 2000, NULL) == -1 && strstr(luaptx_error(S), "has rank 9"));
}

/* A launch over zero elements (28.6) checks, returns 0 and does not run:
 * the kernel's grid is B blocks, which a launch of B = 0 would refuse. */
static void test_empty_launch(luaptx_state *S)
{
  CHECK(luaptx_load_string(S, "local p = require 'pyptx'\n"
        "return p.kernel 'rows' { arch = 'sm_80', in_specs = { p.Tile('B', 'N', p.types.f32) }, out_specs = { p.Tile('B', 'N', p.types.f32) },\n"
        "  grid = function(v) return { v.B } end, function() p.ptx.ret() end }", "=rows.lua") == 0);
  luaptx_kernel *k = luaptx_kernel_get(S, "rows", NULL);
  int64_t s08[2] = { 0, 8 }, s40[2] = { 4, 0 }, odd[2] = { 5, 3 };
  DLTensor x = tensor(NULL, s08, 2), y = tensor(NULL, s08, 2), *a[] = { &x, &y };
  x.strides = odd;   /* an empty tensor's strides do not matter */
  CHECK(k && luaptx_launch_dlpack(k, a, 2, NULL) == 0);
  x.shape = y.shape = s40;
  CHECK(k && luaptx_launch_dlpack(k, a, 2, NULL) == 0);
  static float data[8];
  int64_t s18[2] = { 1, 8 }, any[2] = { 99, 1 };   /* a size-1 dim of any stride: the launch runs */
  x = tensor(data, s18, 2); y = tensor(data, s18, 2);
  x.strides = any;
  CHECK(k && luaptx_launch_dlpack(k, a, 2, NULL) == 0);
}

/* A tracer's abstract values (LUAPTX_BIND_SHAPE_ONLY): dtype and shape
 * checked, the outputs' shapes bound, no data needed; a launch never
 * takes the flag. Uses the "rows" kernel of test_empty_launch. */
static void test_shape_only(luaptx_state *S)
{
  luaptx_kernel *k = luaptx_kernel_get(S, "rows", NULL);
  int64_t s38[2] = { 3, 8 }, s3[1] = { 3 }, out[LUAPTX_MAX_DIMS];
  DLTensor x = tensor(NULL, s38, 2), *a[] = { &x };
  uint64_t shape_only[] = { LUAPTX_BIND_SHAPE_ONLY };
  CHECK(k && luaptx_kernel_bind(k, a, NULL, 1, out) == -1 && strstr(luaptx_error(S), "NULL data"));   /* a real tensor needs data */
  CHECK(k && luaptx_kernel_bind(k, a, shape_only, 1, out) == 0 && out[0] == 3 && out[1] == 8 && out[2] == -1);
  x.dtype.bits = 64;   /* f64 against in_specs' f32: a dtype error (-2) */
  CHECK(k && luaptx_kernel_bind(k, a, shape_only, 1, out) == -2 && strstr(luaptx_error(S), "input 1 is f64"));
  x.dtype.bits = 0;    /* no dtype given: only the shape is checked */
  CHECK(k && luaptx_kernel_bind(k, a, shape_only, 1, out) == 0 && out[0] == 3);
  x = tensor(NULL, s3, 1);
  CHECK(k && luaptx_kernel_bind(k, a, shape_only, 1, out) == -1 && strstr(luaptx_error(S), "input 1 has rank 1"));
  /* a launch ignores the flag: NULL data with elements is refused */
  x = tensor(NULL, s38, 2);
  DLTensor y = tensor(NULL, s38, 2);
  DLManagedTensorVersioned v[2];
  memset(v, 0, sizeof v);
  v[0].version.major = v[1].version.major = 1;
  v[0].dl_tensor = x; v[1].dl_tensor = y;
  v[0].flags = v[1].flags = LUAPTX_BIND_SHAPE_ONLY;
  DLManagedTensorVersioned *av[] = { &v[0], &v[1] };
  CHECK(k && luaptx_launch_dlpack_versioned(k, av, 2, NULL) == -1 && strstr(luaptx_error(S), "NULL data but 24 elements"));
}

/* Runtime scalars: checked in C, patched into one plan per shape. */
static void test_scalars(luaptx_state *S, const char *root)
{
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/python/scale.lua", root);
  CHECK(luaptx_load_file(S, path) == 0);
  luaptx_kernel *k = luaptx_kernel_get(S, "scale", NULL), *k8 = luaptx_kernel_get(S, "scale", "n=8");
  CHECK(k && k8 && strstr(luaptx_kernel_specs(k, NULL), "\nscalars alpha:f32,n:u32"));
  static float x[16], y[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  int64_t s16[1] = { 16 };
  DLTensor tx = tensor(x, s16, 1), ty = tensor(y, s16, 1), *a[] = { &tx, &ty };
  for (int v = 1; v <= 3; v++) {   /* new values: the same plan, each value launched */
    luaptx_scalar sc[2] = { { LUAPTX_SCALAR_FLOAT, 0, v * 0.5 }, { LUAPTX_SCALAR_INT, 16, 0 } };
    CHECK(luaptx_launch_dlpack_scalars(k, a, 2, sc, 2, NULL) == 0 && y[3] == 3 * v * 0.5f && y[15] == 15 * v * 0.5f);
  }
  luaptx_scalar bad[2] = { { LUAPTX_SCALAR_FLOAT, 0, 1.0 }, { LUAPTX_SCALAR_FLOAT, 0, 1.5 } };
  CHECK(luaptx_launch_dlpack_scalars(k, a, 2, bad, 2, NULL) == -2
        && strstr(luaptx_error(S), "scalar n is 1.5, a float, but raw_params[2] is u32; valid: an integer"));
  bad[1] = (luaptx_scalar){ LUAPTX_SCALAR_INT, -1, 0 };
  CHECK(luaptx_kernel_scalars(k, bad, 2) == -1 && strstr(luaptx_error(S), "scalar n is -1 but raw_params[2] is u32; valid: 0..4294967295"));
  CHECK(luaptx_launch_dlpack(k, a, 2, NULL) == -1 && strstr(luaptx_error(S), "scalar alpha (raw_params[1]) has no value"));
  CHECK(luaptx_launch_dlpack_scalars(k, a, 2, bad, 1, NULL) == -1 && strstr(luaptx_error(S), "takes 2 runtime scalar(s)"));
  /* n given as a template value: its default, overridden per launch */
  for (int i = 0; i < 16; i++) y[i] = -1;
  luaptx_scalar half[2] = { { LUAPTX_SCALAR_FLOAT, 0, 2.0 }, { LUAPTX_SCALAR_NONE, 0, 0 } };
  CHECK(luaptx_launch_dlpack_scalars(k8, a, 2, half, 2, NULL) == 0 && y[7] == 14 && y[8] == -1);
  half[1] = (luaptx_scalar){ LUAPTX_SCALAR_UINT, 4, 0 };
  CHECK(luaptx_launch_dlpack_scalars(k8, a, 2, half, 2, NULL) == 0);
  half[1].kind = LUAPTX_SCALAR_NONE;
  for (int i = 0; i < 16; i++) y[i] = -1;
  CHECK(luaptx_launch_dlpack_scalars(k8, a, 2, half, 2, NULL) == 0 && y[7] == 14 && y[8] == -1);   /* the template value again */
}

int main(int argc, char **argv)
{
  const char *root = argc > 1 ? argv[1] : ".";
  luaptx_state *S1 = open_state(root), *S2 = open_state(root);
  luaptx_kernel *k1 = luaptx_kernel_get(S1, "rms_norm", NULL), *k2 = luaptx_kernel_get(S2, "rms_norm", "");
  CHECK(k1 && k2);
  static float x[B * N], w[N], y1[B * N], y2[B * N];
  for (int i = 0; i < B * N; i++) x[i] = (float)sin(i * 0.37) + 0.01f;
  for (int i = 0; i < N; i++) w[i] = 1.0f + (float)cos(i * 0.11) * 0.5f;
  for (int i = 0; i < B * N; i++) y1[i] = y2[i] = NAN;
  int64_t xs[2] = { B, N }, ws[1] = { N };
  DLTensor tx = tensor(x, xs, 2), tw = tensor(w, ws, 1), t1 = tensor(y1, xs, 2), t2 = tensor(y2, xs, 2);
  DLTensor *a1[] = { &tx, &tw, &t1 }, *a2[] = { &tx, &tw, &t2 };
  CHECK(luaptx_launch_dlpack(k1, a1, 3, NULL) == 0);
  CHECK(luaptx_launch_dlpack(k2, a2, 3, NULL) == 0);
  CHECK(rms_error(x, w, y1) < 1e-5 && rms_error(x, w, y2) < 1e-5);
  size_t len = 0;
  const char *ptx = luaptx_kernel_ptx(k1, &len);
  CHECK(ptx && len > 100 && strstr(ptx, ".entry rms_norm("));
  CHECK(strstr(luaptx_device(S1), "emu") != NULL);
  /* what hosts that allocate outputs read: the names, the boundary */
  const char *names = luaptx_kernel_names(S1);
  CHECK(names && strcmp(names, "rms_norm") == 0);
  const char *specs = luaptx_kernel_specs(k1, &len);
  CHECK(specs && strstr(specs, "where ") == specs && strstr(specs, "rms_norm.lua:")
        && strstr(specs, "\nin f32 4,512\nin f32 512\nout f32 4,512") && len == strlen(specs));
  /* the cubin (through the cache): an ELF image, the same bytes again; or
   * NULL and why, without a PTX compiler */
  const unsigned char *cubin = luaptx_kernel_cubin(k1, &len);
  if (cubin) {
    size_t len2 = 0;
    unsigned char *first = malloc(len);
    CHECK(first != NULL && len > 1000 && memcmp(cubin, "\x7f" "ELF", 4) == 0);
    if (first) memcpy(first, cubin, len);
    const unsigned char *again = luaptx_kernel_cubin(k1, &len2);
    CHECK(again && first && len2 == len && memcmp(again, first, len) == 0);
    free(first);
  } else {
    CHECK(strstr(luaptx_error(S1), "ptxas") || strstr(luaptx_error(S1), "nvJitLink")
          || !fprintf(stderr, "  luaptx_kernel_cubin: %s\n", luaptx_error(S1)));
  }
  const char *report = luaptx_kernel_check(k1, &len);   /* ptxas's report, or why there is none */
  CHECK(report ? strstr(report, "arch=sm_90a\n") == report && strstr(report, "\nregisters=")
               : strstr(luaptx_error(S1), "ptxas") != NULL);

  /* error paths: each a message, never a crash */
  CHECK(luaptx_load_string(S1, "return 1 +", "=broken.lua") == -1 && strstr(luaptx_error(S1), "broken.lua:1"));
  CHECK(luaptx_load_file(S1, "/no/such/script.lua") == -1 && strstr(luaptx_error(S1), "/no/such/script.lua"));
  CHECK(luaptx_kernel_get(S1, "nope", NULL) == NULL && strstr(luaptx_error(S1), "no kernel named 'nope'")
        && strstr(luaptx_error(S1), "rms_norm"));
  CHECK(luaptx_kernel_get(S1, "rms_norm", "B") == NULL && strstr(luaptx_error(S1), "'B' is not NAME=value"));
  int64_t bad_shape[2] = { B, N / 2 };
  DLTensor ty_bad = tensor(y1, bad_shape, 2), *a3[] = { &tx, &tw, &ty_bad };
  /* the binding k(x, w) uses (runtime.bind), with its messages: spec/runtime_spec.lua */
  CHECK(luaptx_launch_dlpack(k1, a3, 3, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"rms_norm\": output 1 dim 2 is 256 but out_specs[1] fixes it at 512") == 0);
  DLTensor ty_f64 = tensor(y1, xs, 2), *a4[] = { &tx, &tw, &ty_f64 };
  ty_f64.dtype.bits = 64;
  CHECK(luaptx_launch_dlpack(k1, a4, 3, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"rms_norm\": output 1 is f64 but out_specs[1] is Tile(4, 512, f32)") == 0);
  ty_f64.dtype.bits = 16;
  ty_f64.dtype.lanes = 2;
  CHECK(luaptx_launch_dlpack(k1, a4, 3, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"rms_norm\": output 1 is DLPack dtype (code 2, 16 bits, 2 lanes) but "
                  "out_specs[1] is Tile(4, 512, f32)") == 0);
  int64_t col_major[2] = { 1, B };
  DLTensor tx_col = tensor(x, xs, 2), *a5[] = { &tx_col, &tw, &t1 };
  tx_col.strides = col_major;
  CHECK(luaptx_launch_dlpack(k1, a5, 3, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"rms_norm\": input 1 is not compact row-major: strides 1x4 (elements), "
                  "expected 512x1") == 0);
  CHECK(luaptx_launch_dlpack(k1, a1, 2, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"rms_norm\" takes 3 tensors (2 input(s), then 1 output(s)), got 2") == 0);
  DLManagedTensorVersioned v[3];
  memset(v, 0, sizeof v);
  v[0].version.major = 2; v[0].dl_tensor = tx;
  v[1].version.major = 1; v[1].dl_tensor = tw;
  v[2].version.major = 1; v[2].dl_tensor = t1;
  DLManagedTensorVersioned *av[] = { &v[0], &v[1], &v[2] };
  CHECK(luaptx_launch_dlpack_versioned(k1, av, 3, NULL) == -1 && strstr(luaptx_error(S1), "DLPack version 2.0"));
  v[0].version.major = 1;
  for (int i = 0; i < B * N; i++) y1[i] = NAN;
  CHECK(luaptx_launch_dlpack_versioned(k1, av, 3, NULL) == 0 && rms_error(x, w, y1) < 1e-5);
  /* a grid above 2^31-1 (2^32 would wrap to 0) is refused before launch */
  CHECK(luaptx_load_string(S1, "local p = require 'pyptx'\n"
        "return p.kernel 'big' { arch = 'sm_80', in_specs = { p.Tile(4, p.types.f32) }, out_specs = { p.Tile(4, p.types.f32) },\n"
        "  grid = function(v) return { v.G } end, params = { G = 1 }, function() p.ptx.ret() end }", "=big.lua") == 0);
  luaptx_kernel *big = luaptx_kernel_get(S1, "big", "G=4294967296");
  int64_t s4[1] = { 4 };
  DLTensor tb1 = tensor(x, s4, 1), tb2 = tensor(y1, s4, 1), *ab[] = { &tb1, &tb2 };
  CHECK(big && luaptx_launch_dlpack(big, ab, 2, NULL) == -1
        && strcmp(luaptx_error(S1), "kernel \"big\": grid (4294967296, 1, 1) is out of range; "
                  "valid: x in 1..2147483647 (2^31-1), y and z in 1..65535") == 0);
  big = luaptx_kernel_get(S1, "big", "G=2");
  CHECK(big && luaptx_launch_dlpack(big, ab, 2, NULL) == 0);
  /* the template values a kernel declares, for hosts that check keywords */
  CHECK(strstr(luaptx_kernel_specs(big, NULL), "\nparams G\nin f32 4\n") && strstr(specs, "\nparams -\n"));
  luaptx_options cuda = { "cuda", NULL, NULL, 1 };
  luaptx_state *S3 = luaptx_open(&cuda);
  CHECK(S3 != NULL);
  const char *dev = luaptx_device(S3);   /* without a GPU: "" and a clear error */
  CHECK(*dev ? strstr(dev, "cuda") != NULL : strstr(luaptx_error(S3), "CUDA driver") != NULL);
  luaptx_close(S3);

  /* set-up errors are refused at open: an unknown device, bad variables */
  luaptx_options gpu = { "gpu", NULL, NULL, 1 };
  luaptx_state *S4 = luaptx_open(&gpu);
  CHECK(S4 != NULL && strcmp(luaptx_error(S4), "luaptx_open: unknown device 'gpu'; valid: auto, emu, cuda") == 0);
  CHECK(luaptx_load_string(S4, "return 1", "=x") == -1 && strstr(luaptx_error(S4), "unknown device 'gpu'"));
  CHECK(*luaptx_device(S4) == '\0' && strstr(luaptx_error(S4), "unknown device 'gpu'"));
  luaptx_close(S4);
  luaptx_options emu = { "emu", NULL, NULL, 1 };
  setenv("LUAPTX_TRACEBACK", "yes", 1);
  luaptx_state *S5 = luaptx_open(&emu);
  CHECK(S5 != NULL && strcmp(luaptx_error(S5), "LUAPTX_TRACEBACK=yes: valid: 0 (off) or 1 (on)") == 0);
  luaptx_close(S5);
  unsetenv("LUAPTX_TRACEBACK");
  setenv("LUAPTX_LUA_DIR", "/no/such/dir", 1);
  luaptx_state *S6 = luaptx_open(&emu);
  CHECK(S6 != NULL && strstr(luaptx_error(S6), "LUAPTX_LUA_DIR=/no/such/dir: there is no pyptx/init.lua in it"));
  luaptx_close(S6);
  unsetenv("LUAPTX_LUA_DIR");
  setenv("LUAPTX_EMU_THREADS", "99999999999", 1);
  luaptx_state *S7 = luaptx_open(&emu);
  CHECK(S7 != NULL && *luaptx_device(S7) == '\0'
        && strstr(luaptx_error(S7), "LUAPTX_EMU_THREADS=99999999999: out of range; valid: an integer in 0..256"));
  luaptx_close(S7);
  unsetenv("LUAPTX_EMU_THREADS");
  test_hostile(S1, k1, &tx, &tw, &t1);
  test_empty_launch(S2);
  test_shape_only(S2);
  test_scalars(S2, root);
  luaptx_close(S1);
  luaptx_close(S2);
  test_tma_kernel(root);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
