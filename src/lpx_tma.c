/* Validation of TMA tensor maps against every constraint the driver
 * documents for cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col, each
 * failure naming the tensor, the field, the value and the rule. */
#include "lpx_tma.h"
#include "lpx_internal.h"
#include <stdio.h>
#include <string.h>

/* Data types the driver accepts: X(code, name, bytes, is_float). */
#define LPX_TMA_DTYPES(X) \
  X(0, "u8", 1, 0) X(1, "u16", 2, 0) X(2, "u32", 4, 0) X(3, "s32", 4, 0) \
  X(4, "u64", 8, 0) X(5, "s64", 8, 0) X(6, "f16", 2, 1) X(7, "f32", 4, 1) \
  X(8, "f64", 8, 1) X(9, "bf16", 2, 1) X(10, "f32_ftz", 4, 1) X(11, "tf32", 4, 1) \
  X(12, "tf32_ftz", 4, 1)

typedef struct dtype_info { int code; const char *name; int bytes, is_float; } dtype_info;
static const dtype_info dtypes[] = {
#define X(code, name, bytes, fl) { code, name, bytes, fl },
  LPX_TMA_DTYPES(X)
#undef X
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static const char *const swizzle_names[] = { "none", "32B", "64B", "128B", "128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B" };
static const int swizzle_span[] = { 0, 32, 64, 128, 128, 128, 128 };

/* Bytes per element of a dtype code, or 0 when unknown. */
int32_t lpx_tma_dtype_size(int32_t dtype)
{
  return dtype >= 0 && dtype < NDTYPES ? dtypes[dtype].bytes : 0;
}

/* The dtype code of a name ("bf16"), or -1. */
int32_t lpx_tma_dtype_lookup(const char *name)
{
  for (int i = 0; i < NDTYPES; i++)
    if (strcmp(dtypes[i].name, name) == 0) return dtypes[i].code;
  return -1;
}

/* Bytes one request copies: ceil(box / element stride) elements per
 * dimension (dimension 0's stride counts only in an interleaved layout;
 * the driver ignores it otherwise), or an im2col map's pixels x channels. */
int32_t lpx_tma_box_bytes(const lpx_tma_desc *d)
{
  int64_t n = lpx_tma_dtype_size(d->dtype);
  if (d->mode == 1) return (int32_t)(n * d->channels * d->pixels);
  for (int i = 0; i < d->rank && i < 5; i++) {
    uint32_t es = d->elem_strides[i] && (i || d->interleave) ? d->elem_strides[i] : 1;
    n *= (d->box[i] + es - 1) / es;
  }
  return (int32_t)n;
}

/* ------------------------------------------------------------ the rules */

typedef struct rule_ctx { lpx_ctx *ctx; const char *tensor; const lpx_tma_desc *d; int esize; } rule_ctx;

/* Fail naming the tensor, the field and the rule. */
static int bad(const rule_ctx *r, const char *field, const char *fmt, ...)
{
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return lpx_fail(r->ctx, "TMA descriptor for %s: %s %s", r->tensor, field, detail);
}

/* rank, dtype and the enum fields are in range. */
static int check_kinds(const rule_ctx *r)
{
  const lpx_tma_desc *d = r->d;
  if (d->dtype < 0 || d->dtype >= NDTYPES) return bad(r, "dtype", "= %d is not a type TMA copies (u8 u16 u32 s32 u64 s64 f16 f32 f64 bf16 tf32)", d->dtype);
  if (d->mode < 0 || d->mode > 1) return bad(r, "mode", "= %d; valid: 0 tiled, 1 im2col", d->mode);
  if (d->rank < 1 || d->rank > 5) return bad(r, "rank", "= %d; TMA supports ranks 1 to 5", d->rank);
  if (d->mode == 1 && d->rank < 3) return bad(r, "rank", "= %d; an im2col map has rank 3, 4 or 5 (NWC, NHWC, NDHWC)", d->rank);
  if (d->interleave < 0 || d->interleave > 2) return bad(r, "interleave", "= %d; valid: 0 none, 1 16B, 2 32B", d->interleave);
  if (d->interleave && d->rank < 3) return bad(r, "rank", "= %d; an interleaved layout needs rank 3 or more", d->rank);
  if (d->swizzle < 0 || d->swizzle > 6) return bad(r, "swizzle", "= %d; valid: 0 none, 1 32B, 2 64B, 3 128B, 4-6 128B atoms", d->swizzle);
  if (d->l2_promotion < 0 || d->l2_promotion > 3) return bad(r, "l2_promotion", "= %d; valid: 0 none, 1 64B, 2 128B, 3 256B", d->l2_promotion);
  if (d->oob_fill < 0 || d->oob_fill > 1) return bad(r, "oob_fill", "= %d; valid: 0 zeros, 1 NaN", d->oob_fill);
  if (d->oob_fill == 1 && !dtypes[d->dtype].is_float) return bad(r, "oob_fill", "= NaN needs a floating-point dtype, not %s", dtypes[d->dtype].name);
  return 0;
}

/* A map's global address: 16-byte aligned, 32 under a 32B interleave
 * (also what an encoded map's address patch checks). */
int32_t lpx_tma_check_address(lpx_ctx *ctx, const char *tensor, uint64_t address, int32_t interleave)
{
  uint64_t align = interleave == 2 ? 32 : 16;
  if (address % align)
    return lpx_fail(ctx, "TMA descriptor for %s: global address 0x%llx is not %llu-byte aligned", tensor && *tensor ? tensor : "tensor",
                    (unsigned long long)address, (unsigned long long)align);
  return 0;
}

/* Dimensions and strides. */
static int check_dims(const rule_ctx *r)
{
  const lpx_tma_desc *d = r->d;
  uint64_t mult = d->interleave == 2 ? 32 : 16;
  for (int i = 0; i < d->rank; i++)
    if (d->dims[i] == 0 || d->dims[i] > ((uint64_t)1 << 32)) return bad(r, "dims", "[%d, innermost first] = %llu must be in 1..2^32", i, (unsigned long long)d->dims[i]);
  uint64_t span = d->dims[0] * (uint64_t)r->esize;
  for (int i = 0; i + 1 < d->rank; i++) {
    uint64_t s = d->strides[i];
    if (s % mult) return bad(r, "strides", "[%d, innermost first] = %llu bytes is not a multiple of %llu", i, (unsigned long long)s, (unsigned long long)mult);
    if (s >= ((uint64_t)1 << 40)) return bad(r, "strides", "[%d, innermost first] = %llu bytes must be below 2^40", i, (unsigned long long)s);
    if (s < span) return bad(r, "strides", "[%d, innermost first] = %llu bytes is smaller than the %llu bytes dimension %d spans", i, (unsigned long long)s, (unsigned long long)span, i);
    span = s * d->dims[i + 1];
  }
  return 0;
}

/* Element strides (both modes) and the 32B interleave's swizzle. */
static int check_strides(const rule_ctx *r)
{
  const lpx_tma_desc *d = r->d;
  for (int i = 0; i < d->rank; i++)
    if (d->elem_strides[i] > 8) return bad(r, "elem_strides", "[%d, innermost first] = %u must be in 1..8", i, d->elem_strides[i]);
  if (d->interleave == 2 && d->swizzle != 1)
    return bad(r, "swizzle", "= %s; a 32B interleave needs swizzle 32B", swizzle_names[d->swizzle]);
  return 0;
}

/* The inner box (what=field name, n elements) within the swizzle span. */
static int check_span(const rule_ctx *r, const char *what, uint32_t n)
{
  uint32_t inner = n * (uint32_t)r->esize;
  if (!r->d->interleave && r->d->swizzle && inner > (uint32_t)swizzle_span[r->d->swizzle])
    return bad(r, what, "= %u elements is %u bytes, wider than the %s swizzle span (%d bytes)", n, inner,
               swizzle_names[r->d->swizzle], swizzle_span[r->d->swizzle]);
  return 0;
}

/* Box sizes and the swizzle span (tiled maps). */
static int check_box(const rule_ctx *r)
{
  const lpx_tma_desc *d = r->d;
  for (int i = 0; i < d->rank; i++)
    if (d->box[i] == 0 || d->box[i] > 256) return bad(r, "box", "[%d, innermost first] = %u must be in 1..256", i, d->box[i]);
  uint32_t inner = d->box[0] * (uint32_t)r->esize;
  if (!d->interleave && inner % 16)
    return bad(r, "box", "[0] = %u elements is %u bytes; the inner box must be a multiple of 16 bytes", d->box[0], inner);
  return check_span(r, "box [0]", d->box[0]);
}

/* The pixel box, channels and pixels (im2col maps): corners within the
 * signed range the rank allows, a box of non-zero size in each of W, H, D. */
static int check_im2col(const rule_ctx *r)
{
  const lpx_tma_desc *d = r->d;
  static const int most[6] = { 0, 0, 0, 32767, 127, 15 };
  static const char *const dhw[3] = { "W", "H", "D" };
  int lim = most[d->rank];
  for (int s = 0; s + 2 < d->rank; s++) {
    if (d->lower[s] < -lim - 1 || d->lower[s] > lim)
      return bad(r, "lower_corner", "[%s] = %d must be in %d..%d for a rank-%d im2col map", dhw[s], d->lower[s], -lim - 1, lim, d->rank);
    if (d->upper[s] < -lim - 1 || d->upper[s] > lim)
      return bad(r, "upper_corner", "[%s] = %d must be in %d..%d for a rank-%d im2col map", dhw[s], d->upper[s], -lim - 1, lim, d->rank);
    int64_t size = (int64_t)d->dims[s + 1] + d->upper[s] - d->lower[s];
    if (size < 1)
      return bad(r, "lower_corner/upper_corner", "[%s] = %d/%d leave a pixel box of %lld positions along %s (dimension %llu); "
                 "it must have non-zero area", dhw[s], d->lower[s], d->upper[s], (long long)size, dhw[s],
                 (unsigned long long)d->dims[s + 1]);
  }
  if (d->channels == 0 || d->channels > 256) return bad(r, "channels_per_pixel", "= %u must be in 1..256", d->channels);
  if (d->pixels == 0 || d->pixels > 1024) return bad(r, "pixels_per_column", "= %u must be in 1..1024", d->pixels);
  return check_span(r, "channels_per_pixel", d->channels);
}

/* Validate a tensor map; the message names tensor, field, value and rule. */
int32_t lpx_tma_validate(lpx_ctx *ctx, const char *tensor, const lpx_tma_desc *d)
{
  rule_ctx r = { ctx, tensor && *tensor ? tensor : "tensor", d, 0 };
  if (check_kinds(&r)) return -1;
  r.esize = dtypes[d->dtype].bytes;
  if (lpx_tma_check_address(ctx, r.tensor, d->global_address, d->interleave) || check_dims(&r) || check_strides(&r)) return -1;
  return d->mode == 1 ? check_im2col(&r) : check_box(&r);
}
