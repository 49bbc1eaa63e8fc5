/* Tests of launch binding (src/lpx_bind.c), the one check of tensors that
 * the C API, k(x, w) and the Python extension share: numpy's layout rule
 * (size-1 dims any stride, empty tensors, broadcast dims refused), dims
 * bound once, and hostile descriptions (NULLs, huge ranks, offsets, sizes,
 * misalignment, read-only outputs) refused with a message. */
#include "lpx_bind.h"
#include <stdio.h>
#include <string.h>

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

/* The kernel "k": in x Tile(M, K, f32), in w Tile(K, 4, f32), out y Tile(M, 4, f32). */
static lpx_bind_kernel kernel(void)
{
  lpx_bind_kernel k;
  memset(&k, 0, sizeof k);
  snprintf(k.name, sizeof k.name, "k");
  k.nin = 2; k.nout = 1; k.nsyms = 2;
  snprintf(k.sym[0], sizeof k.sym[0], "M");
  snprintf(k.sym[1], sizeof k.sym[1], "K");
  lpx_bind_spec x = { 2, 32, 2, { 0, 0 }, { 0, 1 } }, w = { 2, 32, 2, { 0, 4 }, { 1, -1 } }, y = { 2, 32, 2, { 0, 4 }, { 0, -1 } };
  k.spec[0] = x; k.spec[1] = w; k.spec[2] = y;
  return k;
}

static float buf[4096];

/* A CPU f32 tensor over buf with shape (and strides when given). */
static lpx_bind_tensor tensor(int64_t *shape, int ndim, int64_t *strides)
{
  lpx_bind_tensor t = { .data = buf, .device_type = LPX_BIND_CPU, .ndim = ndim, .code = 2, .bits = 32, .lanes = 1,
                        .shape = shape, .strides = strides };
  return t;
}

/* Check ts against "k" (all three tensors); 0 or -1, the message in r. */
static int check(lpx_bind_tensor *ts, lpx_bind_result *r)
{
  lpx_bind_kernel k = kernel();
  lpx_bind_reset(&k, r);
  return lpx_bind_check(&k, ts, 3, LPX_BIND_CPU, r);
}

/* numpy's C-contiguity, and broadcast dims. */
static void test_layout(void)
{
  lpx_bind_result r;
  int64_t xs[2] = { 1, 40 }, ws[2] = { 40, 4 }, ys[2] = { 1, 4 };
  int64_t transposed[2] = { 1, 1 }, any[2] = { 12345, 1 }, ws_st[2] = { 4, 1 };
  lpx_bind_tensor ts[3] = { tensor(xs, 2, transposed), tensor(ws, 2, ws_st), tensor(ys, 2, NULL) };
  /* (1, 40) f32 with strides (1, 1): the transpose of a (40, 1); numpy calls it C-contiguous */
  CHECK(check(ts, &r) == 0 && r.value[0] == 1 && r.value[1] == 40);
  ts[0].strides = any;   /* a size-1 dim may have any stride */
  CHECK(check(ts, &r) == 0);
  int64_t col[2] = { 1, 40 };   /* (40, 4) column-major: refused, naming the strides */
  ts[0].strides = NULL; ts[1].strides = col;
  CHECK(check(ts, &r) == -1 && r.kind == LPX_BIND_EVALUE
        && strcmp(r.message, "kernel \"k\": input 2 is not compact row-major: strides 1x40 (elements), expected 4x1") == 0);
  int64_t bcast[2] = { 0, 1 };  /* a stride-0 dim of size 40: a broadcast view */
  ts[1].strides = bcast;
  CHECK(check(ts, &r) == -1 && strcmp(r.message, "kernel \"k\": input 2 is a broadcast view (dim 1 of size 40 has stride 0); pass a materialised copy") == 0);
  int64_t one_bcast[2] = { 0, 1 }, xs1[2] = { 1, 40 };   /* ... but a stride-0 dim of size 1 is fine */
  ts[1].strides = NULL; ts[0].shape = xs1; ts[0].strides = one_bcast;
  CHECK(check(ts, &r) == 0);
  int64_t neg[2] = { 40, -1 };
  ts[0].strides = NULL; ts[1].strides = neg;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 2 is not compact row-major: strides 40x-1"));
}

/* Zero-size dims: any strides, NULL data; a launch whose outputs are all
 * empty does nothing (lpx_bind_empty). */
static void test_empty(void)
{
  lpx_bind_kernel k = kernel();
  lpx_bind_result r;
  int64_t xs[2] = { 0, 8 }, ws[2] = { 8, 4 }, ys[2] = { 0, 4 }, odd[2] = { 3, 7 };
  lpx_bind_tensor ts[3] = { tensor(xs, 2, odd), tensor(ws, 2, NULL), tensor(ys, 2, NULL) };
  ts[0].data = NULL; ts[2].data = NULL;
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, ts, 3, LPX_BIND_CPU, &r) == 0 && r.value[0] == 0 && lpx_bind_empty(&k, &r) == 1);
  int64_t shape[2];
  CHECK(lpx_bind_out_shape(&k, &r, 0, shape) == 0 && shape[0] == 0 && shape[1] == 4);
  /* (4, 0) inputs: K = 0, the output (4, 4) is not empty: it launches */
  int64_t xs2[2] = { 4, 0 }, ws2[2] = { 0, 4 }, ys2[2] = { 4, 4 };
  lpx_bind_tensor t2[3] = { tensor(xs2, 2, NULL), tensor(ws2, 2, NULL), tensor(ys2, 2, NULL) };
  t2[0].data = t2[1].data = NULL;
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, t2, 3, LPX_BIND_CPU, &r) == 0 && r.value[1] == 0 && lpx_bind_empty(&k, &r) == 0);
  /* only the inputs: output shapes from the bound dims, unbound ones named */
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, t2, 2, LPX_BIND_CPU, &r) == 0 && lpx_bind_out_shape(&k, &r, 0, shape) == 0 && shape[0] == 4);
  k.spec[2].sym[1] = 1;   /* make y Tile(M, K): unbound K with no inputs given... */
  lpx_bind_reset(&k, &r);
  r.value[0] = 4;
  CHECK(lpx_bind_out_shape(&k, &r, 0, shape) == -1 && strstr(r.message, "out_specs[1] dim 2 is K, which no input binds"));
  /* a non-empty tensor needs data */
  ts[2].data = NULL;
  ys[0] = 2; xs[0] = 2; ts[0].data = buf; ts[0].strides = NULL;
  CHECK(check(ts, &r) == -1 && strcmp(r.message, "kernel \"k\": output 1 has NULL data but 8 elements") == 0);
}

/* Hostile descriptions: each refused with a message, nothing read past. */
static void test_hostile(void)
{
  lpx_bind_result r;
  int64_t xs[2] = { 2, 8 }, ws[2] = { 8, 4 }, ys[2] = { 2, 4 };
  lpx_bind_tensor ts[3] = { tensor(xs, 2, NULL), tensor(ws, 2, NULL), tensor(ys, 2, NULL) };
  CHECK(check(ts, &r) == 0 && r.value[0] == 2 && r.value[1] == 8);
  ts[0].ndim = 1000;   /* would read past the shape array */
  CHECK(check(ts, &r) == -1 && strcmp(r.message, "kernel \"k\": input 1 has rank 1000; valid: 0..8") == 0);
  ts[0].ndim = -1;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 1 has rank -1; valid: 0..8"));
  ts[0].ndim = 2; ts[0].shape = NULL;
  CHECK(check(ts, &r) == -1 && strcmp(r.message, "kernel \"k\": input 1 has rank 2 but a NULL shape") == 0);
  ts[0].shape = xs;
  ts[1].byte_offset = (uint64_t)1 << 60;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 2 (data 0x") && strstr(r.message, "byte_offset 1152921504606846976")
        && strstr(r.message, "beyond any process's memory"));
  ts[1].byte_offset = UINT64_MAX - 7;   /* would wrap the address */
  CHECK(check(ts, &r) == -1 && strstr(r.message, "beyond any process's memory"));
  ts[1].byte_offset = 2;   /* misaligned for f32, on every device */
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 2 is at data 0x") && strstr(r.message, "+ byte_offset 2, not a multiple of its element size (4 bytes)"));
  ts[1].byte_offset = 4;
  CHECK(check(ts, &r) == 0);
  int64_t huge[2] = { (int64_t)1 << 40, (int64_t)1 << 40 }, huge_w[2] = { (int64_t)1 << 40, 4 };
  ts[0].shape = huge; ts[1].shape = huge_w;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 1 of shape 1099511627776x1099511627776 holds more than 2^63 bytes"));
  int64_t negative[2] = { -2, 8 };
  ts[0].shape = negative; ts[1].shape = ws;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "input 1 dim 1 is -2; valid: 0 or more"));
  ts[0].shape = xs;
  ts[2].flags = LPX_BIND_READ_ONLY;   /* a read-only output */
  CHECK(check(ts, &r) == -1 && strstr(r.message, "output 1 is read-only (DLPack flag READ_ONLY); outputs must be writable in place"));
  ts[2].flags = 0; ts[0].flags = LPX_BIND_READ_ONLY;   /* read-only inputs are fine */
  CHECK(check(ts, &r) == 0);
  ts[2].device_type = 13;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "output 1 is in DLPack device type 13 memory"));
  ts[2].device_type = LPX_BIND_CUDA;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "output 1 is a CUDA tensor but the launch runs on the emulator"));
  ts[2].device_type = LPX_BIND_CPU; ts[2].device_id = 1;
  CHECK(check(ts, &r) == -1 && strstr(r.message, "output 1 is on another device than input 1 (DLPack device 1:1, not 1:0)"));
  ts[2].device_id = 0; ts[2].lanes = 4;
  CHECK(check(ts, &r) == -1 && r.kind == LPX_BIND_ETYPE
        && strstr(r.message, "output 1 is DLPack dtype (code 2, 32 bits, 4 lanes) but out_specs[1] is Tile(M, 4, f32)"));
  ts[2].lanes = 1;
  lpx_bind_kernel k = kernel();
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, NULL, 3, LPX_BIND_CPU, &r) == -1 && strstr(r.message, "the tensor array is NULL"));
  CHECK(lpx_bind_check(&k, ts, 1, LPX_BIND_CPU, &r) == -1 && strstr(r.message, "takes 3 tensors (2 input(s), then 1 output(s)), got 1"));
  k.nsyms = 1000;
  CHECK(lpx_bind_check(&k, ts, 3, LPX_BIND_CPU, &r) == -1 && strstr(r.message, "luaptx binds at most"));
}

/* Dims bound once: a given value, then the tensors. */
static void test_dims(void)
{
  lpx_bind_kernel k = kernel();
  lpx_bind_result r;
  int64_t xs[2] = { 2, 8 }, ws[2] = { 6, 4 }, ys[2] = { 2, 4 };
  lpx_bind_tensor ts[3] = { tensor(xs, 2, NULL), tensor(ws, 2, NULL), tensor(ys, 2, NULL) };
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, ts, 3, 0, &r) == -1
        && strcmp(r.message, "kernel \"k\": dimension K is 8 from input 1 (shape 2x8) but 6 from input 2 (shape 6x4)") == 0);
  ws[0] = 8;
  lpx_bind_reset(&k, &r);
  r.value[1] = 16;
  CHECK(lpx_bind_check(&k, ts, 3, 0, &r) == -1
        && strcmp(r.message, "kernel \"k\": dimension K is 16 (a given value) but 8 from input 1 (shape 2x8)") == 0);
  uint8_t code, bits;
  CHECK(lpx_bind_dtype("bf16", &code, &bits) == 0 && code == 4 && bits == 16 && lpx_bind_dtype("pred", &code, &bits) == -1);
  CHECK(strcmp(lpx_bind_dtype_name(0, 32, 1), "s32") == 0 && lpx_bind_dtype_name(2, 32, 2) == NULL);
}

/* Tensors named by their index past 9 (input 12, out_specs[10]): the
 * names are written digit by digit, without printf, at every launch. */
static void test_names(void)
{
  lpx_bind_kernel k;
  lpx_bind_result r;
  memset(&k, 0, sizeof k);
  snprintf(k.name, sizeof k.name, "wide");
  k.nin = 12; k.nout = 11;
  lpx_bind_spec v = { 2, 32, 1, { 4 }, { -1 } };
  int64_t shape[1] = { 4 };
  lpx_bind_tensor ts[23];
  for (int i = 0; i < 23; i++) { k.spec[i] = v; ts[i] = tensor(shape, 1, NULL); }
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, ts, 23, LPX_BIND_CPU, &r) == 0);
  ts[11].code = 0;   /* input 12 an s32 */
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, ts, 23, LPX_BIND_CPU, &r) == -1
        && strcmp(r.message, "kernel \"wide\": input 12 is s32 but in_specs[12] is Tile(4, f32)") == 0);
  ts[11].code = 2; ts[21].code = 0;   /* output 10 */
  lpx_bind_reset(&k, &r);
  CHECK(lpx_bind_check(&k, ts, 23, LPX_BIND_CPU, &r) == -1
        && strcmp(r.message, "kernel \"wide\": output 10 is s32 but out_specs[10] is Tile(4, f32)") == 0);
}

int main(void)
{
  test_layout();
  test_empty();
  test_hostile();
  test_dims();
  test_names();
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
