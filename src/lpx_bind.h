/* Launch binding: the one check of tensors against a kernel's boundary
 * (count, pointers, sizes, device, dtype, rank, fixed and symbolic dims,
 * strides) and the binding of its symbolic dims. The C API (lpx_embed.c),
 * k(x, w) (pyptx.runtime) and the Python extension all call it. Fed to
 * LuaJIT's ffi.cdef (minus '#' lines): plain one-line declarations only.
 * Messages go into the result (no context: the Python extension calls it
 * from XLA's threads). */
#ifndef LPX_BIND_H
#define LPX_BIND_H
#include <stdint.h>

/* Limits: dims of a tensor, tensors of a launch, symbolic dims of a kernel. */
enum { LPX_BIND_DIMS = 8, LPX_BIND_TENSORS = 32, LPX_BIND_SYMS = 32, LPX_BIND_NAME = 64, LPX_BIND_SCALARS = 16 };
/* A tensor's flags (DLPack 1.0's bits). */
enum { LPX_BIND_READ_ONLY = 1, LPX_BIND_IS_COPIED = 2 };
/* A tensor given as a dtype and a shape only (luaptx.h's LUAPTX_BIND_SHAPE_ONLY). */
#define LPX_BIND_SHAPE_ONLY (1ull << 63)
/* Why a check failed: a value (shape, strides, device...) or a dtype. */
enum { LPX_BIND_OK = 0, LPX_BIND_EVALUE = 1, LPX_BIND_ETYPE = 2 };
/* Device types (DLPack's): CPU memory runs on the emulator, CUDA on cuda. */
enum { LPX_BIND_CPU = 1, LPX_BIND_CUDA = 2 };

/* One tensor as binding reads it: a DLTensor's fields and its flags;
 * strides in elements, outermost first (NULL: compact row-major). */
typedef struct lpx_bind_tensor {
  const void *data; int32_t device_type, device_id; int32_t ndim;
  uint8_t code, bits; uint16_t lanes;
  const int64_t *shape; const int64_t *strides; uint64_t byte_offset; uint64_t flags;
} lpx_bind_tensor;

/* One tensor spec of a kernel: DLPack dtype code and bits, rank, and each
 * dim as a number (sym -1) or the index of a symbol of the kernel. */
typedef struct lpx_bind_spec {
  uint8_t code, bits; int32_t ndim;
  int64_t dim[LPX_BIND_DIMS]; int32_t sym[LPX_BIND_DIMS];
} lpx_bind_spec;

/* A runtime scalar of a kernel (a raw param of one numeric value): its
 * name, DLPack dtype code and bits, and its index in raw_params (1-based). */
typedef struct lpx_bind_param {
  char name[LPX_BIND_NAME]; uint8_t code, bits; int32_t index;
} lpx_bind_param;

/* A kernel's boundary: its name, inputs then outputs, its symbols, its
 * runtime scalars (in raw_params order). */
typedef struct lpx_bind_kernel {
  char name[LPX_BIND_NAME]; int32_t nin, nout, nsyms;
  char sym[LPX_BIND_SYMS][LPX_BIND_NAME];
  lpx_bind_spec spec[LPX_BIND_TENSORS];
  int32_t nscalars; lpx_bind_param scalar[LPX_BIND_SCALARS];
} lpx_bind_kernel;

/* A scalar value as a host gives it: none (the template value), an
 * integer (i), an unsigned integer (i's bits) or a float (f). */
enum { LPX_BIND_NONE = 0, LPX_BIND_INT = 1, LPX_BIND_UINT = 2, LPX_BIND_FLOAT = 3 };
typedef struct lpx_bind_value { int32_t kind; int64_t i; double f; } lpx_bind_value;

/* A binding: each symbol's value (set the given ones before the check,
 * -1 for none; bound ones after), and on failure its kind and message. */
typedef struct lpx_bind_result {
  int64_t value[LPX_BIND_SYMS];
  int32_t kind;
  char message[768];
} lpx_bind_result;

int32_t lpx_bind_dtype(const char *name, uint8_t *code, uint8_t *bits);
const char *lpx_bind_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes);
void lpx_bind_reset(const lpx_bind_kernel *k, lpx_bind_result *r);
int32_t lpx_bind_count(const lpx_bind_kernel *k, int32_t n, int32_t with_outputs, lpx_bind_result *r);
int32_t lpx_bind_check(const lpx_bind_kernel *k, const lpx_bind_tensor *ts, int32_t n, int32_t device_type, lpx_bind_result *r);
int32_t lpx_bind_out_shape(const lpx_bind_kernel *k, lpx_bind_result *r, int32_t j, int64_t *shape);
int32_t lpx_bind_empty(const lpx_bind_kernel *k, const lpx_bind_result *r);
uint64_t lpx_bind_bytes(const lpx_bind_tensor *t);
int32_t lpx_bind_scalar(const lpx_bind_kernel *k, int32_t j, const lpx_bind_value *v, uint8_t *out, lpx_bind_result *r);

#endif
