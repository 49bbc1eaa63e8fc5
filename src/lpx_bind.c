/* Launch binding (lpx_bind.h): every check a launch makes of its tensors,
 * in one place. The layout rule is numpy's C-contiguity: a dim of size 1
 * may have any stride; a tensor with a dim of size 0 holds nothing and
 * any strides (and a NULL data pointer) are fine; a dim of size > 1 with
 * stride 0 (a broadcast view) is refused, as is any other layout. */
#include "lpx_bind.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The tensor dtypes: PTX name, DLPack code and bits. The untyped bN types
 * have no DLPack code; they take kDLOpaqueHandle's (3) so that runtime
 * tensors of them bind. e4m3/e5m2 are DLPack 1.1's float8 e4m3fn/e5m2. */
#define LPX_BIND_DTYPES(X) \
  X(f16, 2, 16) X(f32, 2, 32) X(f64, 2, 64) X(bf16, 4, 16) \
  X(s8, 0, 8) X(s16, 0, 16) X(s32, 0, 32) X(s64, 0, 64) \
  X(u8, 1, 8) X(u16, 1, 16) X(u32, 1, 32) X(u64, 1, 64) \
  X(e4m3, 10, 8) X(e5m2, 12, 8) \
  X(b8, 3, 8) X(b16, 3, 16) X(b32, 3, 32) X(b64, 3, 64)

static const struct { const char *name; uint8_t code, bits; } DTYPES[] = {
#define X(n, c, b) { #n, c, b },
  LPX_BIND_DTYPES(X)
#undef X
};
enum { NDTYPES = sizeof DTYPES / sizeof *DTYPES };

/* The highest address any 64-bit Linux process can map (57-bit virtual
 * addresses): a tensor reaching past it is a bad pointer or offset. */
static const uint64_t ADDRESS_LIMIT = (uint64_t)1 << 57;

/* The DLPack code and bits of a PTX type name; -1 when it has none. */
int32_t lpx_bind_dtype(const char *name, uint8_t *code, uint8_t *bits)
{
  for (int i = 0; name && i < NDTYPES; i++)
    if (strcmp(DTYPES[i].name, name) == 0) { *code = DTYPES[i].code; *bits = DTYPES[i].bits; return 0; }
  return -1;
}

/* The PTX name of a DLPack dtype, or NULL. */
const char *lpx_bind_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes)
{
  for (int i = 0; lanes == 1 && i < NDTYPES; i++)
    if (DTYPES[i].code == code && DTYPES[i].bits == bits) return DTYPES[i].name;
  return NULL;
}

/* Clear a result: no symbol bound, no error. */
void lpx_bind_reset(const lpx_bind_kernel *k, lpx_bind_result *r)
{
  for (int i = 0; i < LPX_BIND_SYMS; i++) r->value[i] = -1;
  r->kind = LPX_BIND_OK;
  r->message[0] = '\0';
  (void)k;
}

/* Fail with kind and a message after `kernel "NAME": `; returns -1. */
static int fail(const lpx_bind_kernel *k, lpx_bind_result *r, int kind, const char *fmt, ...)
{
  int at = snprintf(r->message, sizeof r->message, "kernel \"%s\": ", k->name);
  va_list ap;
  va_start(ap, fmt);
  if (at > 0 && (size_t)at < sizeof r->message) vsnprintf(r->message + at, sizeof r->message - (size_t)at, fmt, ap);
  va_end(ap);
  r->kind = kind;
  return -1;
}

/* Append text to buf at *at (bounded). */
static void put(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
  if (*at >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *at, n - *at, fmt, ap);
  va_end(ap);
  if (w > 0) *at += (size_t)w;
}

/* A list of n numbers joined by 'x' ("scalar" when empty). */
static const char *dims_text(const int64_t *v, int n, char *buf, size_t size)
{
  size_t at = 0;
  buf[0] = '\0';
  if (n == 0) put(buf, size, &at, "scalar");
  for (int d = 0; d < n; d++) put(buf, size, &at, d ? "x%" PRId64 : "%" PRId64, v[d]);
  return buf;
}

/* A spec as Tile(d1, d2, dtype) text. */
static const char *spec_text(const lpx_bind_kernel *k, const lpx_bind_spec *s, char *buf, size_t size)
{
  const char *dt = lpx_bind_dtype_name(s->code, s->bits, 1);
  size_t at = 0;
  put(buf, size, &at, "Tile(");
  for (int d = 0; d < s->ndim && d < LPX_BIND_DIMS; d++) {
    if (s->sym[d] >= 0) put(buf, size, &at, "%s, ", k->sym[s->sym[d]]);
    else put(buf, size, &at, "%" PRId64 ", ", s->dim[d]);
  }
  put(buf, size, &at, "%s)", dt ? dt : "?");
  return buf;
}

/* prefix, n in decimal, then suffix into buf (24 bytes): no printf, as
 * every launch names its tensors this way before it knows of an error. */
static void name_n(char *buf, const char *prefix, int n, const char *suffix)
{
  char digits[12];
  int nd = 0;
  do { digits[nd++] = (char)('0' + n % 10); n /= 10; } while (n > 0 && nd < (int)sizeof digits);
  size_t at = strlen(prefix);
  memcpy(buf, prefix, at);
  while (nd > 0) buf[at++] = digits[--nd];
  strcpy(buf + at, suffix);
}

/* "input 2" or "output 1" for tensor i, and its spec's name. */
static void arg_names(const lpx_bind_kernel *k, int i, char *arg, char *sname)
{
  int out = i >= k->nin, n = out ? i - k->nin + 1 : i + 1;
  name_n(arg, out ? "output " : "input ", n, "");
  name_n(sname, out ? "out_specs[" : "in_specs[", n, "]");
}

/* A tensor's dtype against its spec's. */
static int check_dtype(const lpx_bind_kernel *k, const lpx_bind_spec *s, const lpx_bind_tensor *t, const char *arg,
                       const char *sname, lpx_bind_result *r)
{
  if (t->code == s->code && t->bits == s->bits && t->lanes == 1) return 0;
  const char *have = lpx_bind_dtype_name(t->code, t->bits, t->lanes);
  char text[64], want[320];
  if (!have) snprintf(text, sizeof text, "DLPack dtype (code %d, %d bits, %d lanes)", t->code, t->bits, t->lanes);
  return fail(k, r, LPX_BIND_ETYPE, "%s is %s but %s is %s", arg, have ? have : text, sname, spec_text(k, s, want, sizeof want));
}

/* A tensor's rank and shape pointer, and its dims against the spec's. */
static int check_shape(const lpx_bind_kernel *k, const lpx_bind_spec *s, const lpx_bind_tensor *t, const char *arg,
                       const char *sname, lpx_bind_result *r)
{
  char have[256], want[320];
  if (t->ndim < 0 || t->ndim > LPX_BIND_DIMS)
    return fail(k, r, LPX_BIND_EVALUE, "%s has rank %d; valid: 0..%d", arg, (int)t->ndim, LPX_BIND_DIMS);
  if (t->ndim > 0 && !t->shape) return fail(k, r, LPX_BIND_EVALUE, "%s has rank %d but a NULL shape", arg, (int)t->ndim);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0) return fail(k, r, LPX_BIND_EVALUE, "%s dim %d is %" PRId64 "; valid: 0 or more", arg, d + 1, t->shape[d]);
  if (t->ndim != s->ndim)
    return fail(k, r, LPX_BIND_EVALUE, "%s has rank %d (shape %s) but %s is %s", arg, (int)t->ndim,
                dims_text(t->shape, t->ndim, have, sizeof have), sname, spec_text(k, s, want, sizeof want));
  for (int d = 0; d < s->ndim; d++)
    if (s->sym[d] < 0 && s->dim[d] != t->shape[d])
      return fail(k, r, LPX_BIND_EVALUE, "%s dim %d is %" PRId64 " but %s fixes it at %" PRId64, arg, d + 1, t->shape[d], sname, s->dim[d]);
  return 0;
}

/* Bind the spec's symbols from tensor i; by[sym] records who bound each
 * (-1: a given value, -2: not yet). */
static int bind_syms(const lpx_bind_kernel *k, const lpx_bind_tensor *ts, int i, int32_t *by, lpx_bind_result *r)
{
  const lpx_bind_spec *s = &k->spec[i];
  const lpx_bind_tensor *t = &ts[i];
  for (int d = 0; d < s->ndim; d++) {
    int y = s->sym[d];
    if (y < 0) continue;
    if (by[y] == -2) { r->value[y] = t->shape[d]; by[y] = i; continue; }
    if (r->value[y] == t->shape[d]) continue;
    char arg[24], sname[24], shape[256], prev[320], pshape[256], parg[24];
    arg_names(k, i, arg, sname);
    if (by[y] < 0) snprintf(prev, sizeof prev, "(a given value)");
    else {
      arg_names(k, by[y], parg, sname);
      snprintf(prev, sizeof prev, "from %s (shape %s)", parg, dims_text(ts[by[y]].shape, ts[by[y]].ndim, pshape, sizeof pshape));
    }
    return fail(k, r, LPX_BIND_EVALUE, "dimension %s is %" PRId64 " %s but %" PRId64 " from %s (shape %s)", k->sym[y], r->value[y],
                prev, t->shape[d], arg, dims_text(t->shape, t->ndim, shape, sizeof shape));
  }
  return 0;
}

/* Elements of a tensor whose dims were checked, and whether that count
 * times the element size fits in 63 bits (*fits). */
static uint64_t elements(const lpx_bind_tensor *t, int *fits)
{
  uint64_t n = 1, esize = (uint64_t)(t->bits / 8u) * t->lanes;
  *fits = 1;
  for (int d = 0; d < t->ndim; d++) {
    uint64_t v = (uint64_t)t->shape[d];
    if (v == 0) { *fits = 1; return 0; }
    if (n > (UINT64_MAX >> 1) / v) *fits = 0;
    else n *= v;
  }
  if (*fits && esize && n > (UINT64_MAX >> 1) / esize) *fits = 0;
  return n;
}

/* Bytes of a checked tensor's elements. */
uint64_t lpx_bind_bytes(const lpx_bind_tensor *t)
{
  int fits;
  return elements(t, &fits) * ((uint64_t)(t->bits / 8u) * t->lanes);
}

/* numpy's C-contiguity: size-1 dims any stride; empty tensors any strides. */
static int check_strides(const lpx_bind_kernel *k, const lpx_bind_tensor *t, const char *arg, lpx_bind_result *r)
{
  int fits;
  if (!t->strides || elements(t, &fits) == 0) return 0;
  int64_t expect = 1, rm[LPX_BIND_DIMS];
  for (int d = t->ndim - 1; d >= 0; d--) { rm[d] = expect; expect *= t->shape[d]; }
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1 && t->strides[d] == 0)
      return fail(k, r, LPX_BIND_EVALUE, "%s is a broadcast view (dim %d of size %" PRId64 " has stride 0); pass a materialised copy",
                  arg, d + 1, t->shape[d]);
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1 || t->strides[d] == rm[d]) continue;
    char have[256], want[256];
    return fail(k, r, LPX_BIND_EVALUE, "%s is not compact row-major: strides %s (elements), expected %s", arg,
                dims_text(t->strides, t->ndim, have, sizeof have), dims_text(rm, t->ndim, want, sizeof want));
  }
  return 0;
}

/* The tensor's memory: a size that fits, data present unless empty, an
 * address inside a process's reach and aligned for the dtype. */
static int check_memory(const lpx_bind_kernel *k, const lpx_bind_tensor *t, const char *arg, lpx_bind_result *r)
{
  int fits;
  uint64_t n = elements(t, &fits), esize = (uint64_t)(t->bits / 8u) * t->lanes;
  char shape[256];
  if (!fits) return fail(k, r, LPX_BIND_EVALUE, "%s of shape %s holds more than 2^63 bytes", arg, dims_text(t->shape, t->ndim, shape, sizeof shape));
  if (n == 0) return 0;
  if (!t->data) return fail(k, r, LPX_BIND_EVALUE, "%s has NULL data but %" PRIu64 " elements", arg, n);
  uint64_t base = (uint64_t)(uintptr_t)t->data, bytes = n * esize;
  if (t->byte_offset >= ADDRESS_LIMIT || base >= ADDRESS_LIMIT || base + t->byte_offset >= ADDRESS_LIMIT - bytes || bytes >= ADDRESS_LIMIT)
    return fail(k, r, LPX_BIND_EVALUE, "%s (data 0x%" PRIx64 ", byte_offset %" PRIu64 ", %" PRIu64 " bytes) reaches past 2^57, beyond any process's memory",
                arg, base, t->byte_offset, bytes);
  if (esize && (t->byte_offset % esize || (base + t->byte_offset) % esize))
    return fail(k, r, LPX_BIND_EVALUE, "%s is at data 0x%" PRIx64 " + byte_offset %" PRIu64 ", not a multiple of its element size (%" PRIu64 " bytes)",
                arg, base, t->byte_offset, esize);
  return 0;
}

/* The tensor's device: CPU or CUDA, the launch's, and input 1's. */
static int check_device(const lpx_bind_kernel *k, const lpx_bind_tensor *ts, int i, int32_t device_type, const char *arg, lpx_bind_result *r)
{
  const lpx_bind_tensor *t = &ts[i];
  if (t->device_type != LPX_BIND_CPU && t->device_type != LPX_BIND_CUDA)
    return fail(k, r, LPX_BIND_EVALUE, "%s is in DLPack device type %d memory; valid: CPU (1, the emulator) or CUDA (2, the cuda device)", arg, (int)t->device_type);
  if (device_type && t->device_type != device_type)
    return fail(k, r, LPX_BIND_EVALUE, "%s is a %s tensor but the launch runs on %s (CPU tensors need the emulator, CUDA tensors the cuda device)", arg,
                t->device_type == LPX_BIND_CPU ? "CPU" : "CUDA", device_type == LPX_BIND_CPU ? "the emulator" : "the cuda device");
  if (i > 0 && (t->device_type != ts[0].device_type || t->device_id != ts[0].device_id))
    return fail(k, r, LPX_BIND_EVALUE, "%s is on another device than %s (DLPack device %d:%d, not %d:%d)", arg, k->nin ? "input 1" : "output 1",
                (int)t->device_type, (int)t->device_id, (int)ts[0].device_type, (int)ts[0].device_id);
  return 0;
}

/* Check tensor i (all but the symbols shared with other tensors). */
static int check_one(const lpx_bind_kernel *k, const lpx_bind_tensor *ts, int i, int32_t device_type, lpx_bind_result *r)
{
  char arg[24], sname[24];
  arg_names(k, i, arg, sname);
  const lpx_bind_tensor *t = &ts[i];
  const lpx_bind_spec *s = &k->spec[i];
  int shape_only = (t->flags & LPX_BIND_SHAPE_ONLY) != 0;   /* a tracer's abstract value: no memory yet */
  if ((!shape_only || t->bits) && check_dtype(k, s, t, arg, sname, r)) return -1;
  if (check_shape(k, s, t, arg, sname, r)) return -1;
  if (shape_only) return 0;
  if (check_memory(k, t, arg, r) || check_strides(k, t, arg, r) || check_device(k, ts, i, device_type, arg, r)) return -1;
  if (i >= k->nin && (t->flags & (LPX_BIND_READ_ONLY | LPX_BIND_IS_COPIED)))
    return fail(k, r, LPX_BIND_EVALUE, "%s is %s; outputs must be writable in place", arg,
                t->flags & LPX_BIND_READ_ONLY ? "read-only (DLPack flag READ_ONLY)" : "a copy of its tensor (DLPack flag IS_COPIED)");
  return 0;
}

/* Is n the count of the kernel's inputs (with_outputs: inputs and
 * outputs)? 0, or -1 with the message (no `kernel "NAME":` colon here). */
int32_t lpx_bind_count(const lpx_bind_kernel *k, int32_t n, int32_t with_outputs, lpx_bind_result *r)
{
  int total = k->nin + k->nout;
  if (n == (with_outputs ? total : k->nin)) return 0;
  r->kind = LPX_BIND_ETYPE;
  if (with_outputs)
    snprintf(r->message, sizeof r->message, "kernel \"%s\" takes %d tensors (%d input(s), then %d output(s)), got %d", k->name, total,
             (int)k->nin, (int)k->nout, (int)n);
  else
    snprintf(r->message, sizeof r->message, "kernel \"%s\" takes %d input tensor(s) (its in_specs), got %d", k->name, (int)k->nin, (int)n);
  return -1;
}

/* Check n tensors (the inputs, then none or all of the outputs) against
 * the kernel and bind its symbols into r (given values preset); device_type
 * the launch's (0: either). 0, or -1 with r's kind and message. */
int32_t lpx_bind_check(const lpx_bind_kernel *k, const lpx_bind_tensor *ts, int32_t n, int32_t device_type, lpx_bind_result *r)
{
  int32_t by[LPX_BIND_SYMS];
  int total = k->nin + k->nout;
  r->kind = LPX_BIND_OK;
  r->message[0] = '\0';
  if (total > LPX_BIND_TENSORS || k->nsyms > LPX_BIND_SYMS || k->nin < 0 || k->nout < 0)
    return fail(k, r, LPX_BIND_EVALUE, "takes %d tensors and %d symbolic dims; luaptx binds at most %d and %d", total, (int)k->nsyms,
                LPX_BIND_TENSORS, LPX_BIND_SYMS);
  if (n != k->nin && n != total) return lpx_bind_count(k, n, 1, r);
  if (n > 0 && !ts) return fail(k, r, LPX_BIND_EVALUE, "the tensor array is NULL");
  for (int y = 0; y < LPX_BIND_SYMS; y++) by[y] = r->value[y] >= 0 ? -1 : -2;
  for (int i = 0; i < n; i++)
    if (check_one(k, ts, i, device_type, r) || bind_syms(k, ts, i, by, r)) return -1;
  return 0;
}

/* Output j's shape from the bound symbols; -1 when one is unbound. */
int32_t lpx_bind_out_shape(const lpx_bind_kernel *k, lpx_bind_result *r, int32_t j, int64_t *shape)
{
  const lpx_bind_spec *s = &k->spec[k->nin + j];
  for (int d = 0; d < s->ndim; d++) {
    int y = s->sym[d];
    shape[d] = y < 0 ? s->dim[d] : r->value[y];
    if (shape[d] < 0)
      return fail(k, r, LPX_BIND_EVALUE, "out_specs[%d] dim %d is %s, which no input binds; pass it as a parameter (%s=...) or pass the outputs",
                  j + 1, d + 1, k->sym[y], k->sym[y]);
  }
  return 0;
}

/* Does every output hold zero elements (a launch with nothing to write,
 * which returns without running)? 0 for a kernel without outputs. */
int32_t lpx_bind_empty(const lpx_bind_kernel *k, const lpx_bind_result *r)
{
  if (k->nout == 0) return 0;
  for (int j = 0; j < k->nout; j++) {
    const lpx_bind_spec *s = &k->spec[k->nin + j];
    int empty = 0;
    for (int d = 0; d < s->ndim; d++) empty |= (s->sym[d] < 0 ? s->dim[d] : r->value[s->sym[d]]) == 0;
    if (!empty) return 0;
  }
  return 1;
}

/* The range of an integer dtype of bits as [lo, hi] (hi as unsigned). */
static void int_range(uint8_t code, uint8_t bits, int64_t *lo, uint64_t *hi)
{
  if (code == 0) { *hi = ((uint64_t)1 << (bits - 1)) - 1; *lo = -(int64_t)*hi - 1; }
  else { *lo = 0; *hi = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1; }
}

/* Encode a checked integer v (unsigned: u) into bits/8 little-endian bytes. */
static void put_bits(uint64_t u, uint8_t bits, uint8_t *out)
{
  for (int b = 0; b < bits / 8; b++) out[b] = (uint8_t)(u >> (8 * b));
}

/* An integer value against scalar s's integer dtype; its bytes into out. */
static int scalar_int(const lpx_bind_kernel *k, const lpx_bind_param *s, const lpx_bind_value *v, uint8_t *out, lpx_bind_result *r)
{
  int64_t lo;
  uint64_t hi;
  int_range(s->code, s->bits, &lo, &hi);
  const char *dt = lpx_bind_dtype_name(s->code, s->bits, 1);
  if (v->kind == LPX_BIND_FLOAT)
    return fail(k, r, LPX_BIND_ETYPE, "scalar %s is %.17g, a float, but raw_params[%d] is %s; valid: an integer", s->name, v->f, (int)s->index, dt);
  int neg = v->kind == LPX_BIND_INT && v->i < 0;
  if ((neg && v->i < lo) || (!neg && (uint64_t)v->i > hi)) {
    if (v->kind == LPX_BIND_INT)
      return fail(k, r, LPX_BIND_EVALUE, "scalar %s is %" PRId64 " but raw_params[%d] is %s; valid: %" PRId64 "..%" PRIu64, s->name, v->i, (int)s->index, dt, lo, hi);
    return fail(k, r, LPX_BIND_EVALUE, "scalar %s is %" PRIu64 " but raw_params[%d] is %s; valid: %" PRId64 "..%" PRIu64, s->name, (uint64_t)v->i, (int)s->index, dt, lo, hi);
  }
  put_bits((uint64_t)v->i, s->bits, out);
  return 0;
}

/* Check value v for runtime scalar j of the kernel (its dtype: an integer
 * in range for integer and bit types; any number for f32 and f64) and
 * encode it into out (the parameter's bytes, little-endian). 0, or -1
 * with r's kind and message naming the scalar. */
int32_t lpx_bind_scalar(const lpx_bind_kernel *k, int32_t j, const lpx_bind_value *v, uint8_t *out, lpx_bind_result *r)
{
  r->kind = LPX_BIND_OK;
  r->message[0] = '\0';
  if (j < 0 || j >= k->nscalars || j >= LPX_BIND_SCALARS) return fail(k, r, LPX_BIND_EVALUE, "has no runtime scalar %d", (int)j + 1);
  const lpx_bind_param *s = &k->scalar[j];
  if (v->kind != LPX_BIND_INT && v->kind != LPX_BIND_UINT && v->kind != LPX_BIND_FLOAT)
    return fail(k, r, LPX_BIND_ETYPE, "scalar %s has no value (kind %d); valid: an integer or a float", s->name, (int)v->kind);
  if (s->code != 2) return scalar_int(k, s, v, out, r);
  double f = v->kind == LPX_BIND_FLOAT ? v->f : v->kind == LPX_BIND_INT ? (double)v->i : (double)(uint64_t)v->i;
  if (s->bits == 32) { float g = (float)f; memcpy(out, &g, 4); }
  else if (s->bits == 64) memcpy(out, &f, 8);
  else return fail(k, r, LPX_BIND_ETYPE, "scalar %s is %s; runtime scalars are integers, f32 or f64", s->name, lpx_bind_dtype_name(s->code, s->bits, 1));
  return 0;
}
