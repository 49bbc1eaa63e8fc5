/* TMA tensor-map descriptions: validated here with readable errors before
 * the driver encodes them (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col)
 * and before the emulator consumes them. Plain one-line declarations (also
 * fed to ffi.cdef). */
#ifndef LPX_TMA_H
#define LPX_TMA_H
#include "lpx_core.h"

/* A tiled or im2col tensor map. Arrays are innermost dimension first, as
 * the driver takes them. Enum fields use the driver's numbering (CUtensorMap*). */
typedef struct lpx_tma_desc {
  int32_t rank;              /* 1..5 */
  int32_t dtype;             /* CUtensorMapDataType: 0 u8 .. 12 tf32_ftz */
  uint64_t global_address;
  uint64_t dims[5];          /* elements per dimension */
  uint64_t strides[5];       /* bytes; strides[i] steps dimension i+1 (rank-1 used) */
  uint32_t box[5];           /* elements per dimension copied per request */
  uint32_t elem_strides[5];  /* 1..8; 0 is read as 1 */
  int32_t interleave;        /* 0 none, 1 16B, 2 32B */
  int32_t swizzle;           /* 0 none, 1 32B, 2 64B, 3 128B, 4 128B_atom_32B, 5 ..._flip_8B, 6 128B_atom_64B */
  int32_t l2_promotion;      /* 0 none, 1 64B, 2 128B, 3 256B */
  int32_t oob_fill;          /* 0 zeros, 1 NaN (request zero FMA) */
  int32_t mode;              /* 0 tiled (box), 1 im2col (the fields below; box unused) */
  int32_t lower[3];          /* im2col pixel-box lower corner, W H D (rank-2 used) */
  int32_t upper[3];          /* im2col pixel-box upper corner, W H D */
  uint32_t channels;         /* im2col channels per pixel, 1..256 */
  uint32_t pixels;           /* im2col pixels per column, 1..1024 */
} lpx_tma_desc;

int32_t lpx_tma_validate(lpx_ctx *ctx, const char *tensor, const lpx_tma_desc *d);
int32_t lpx_tma_check_address(lpx_ctx *ctx, const char *tensor, uint64_t address, int32_t interleave);
int32_t lpx_tma_dtype_size(int32_t dtype);
int32_t lpx_tma_dtype_lookup(const char *name);
int32_t lpx_tma_box_bytes(const lpx_tma_desc *d);

#endif
