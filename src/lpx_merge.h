/* One PTX module from the traced modules of several kernels, as nvcc
 * writes one per .cu file: one header, the union of the .file tables, then
 * each module's declarations and functions, a name defined twice written
 * once when both texts agree and refused when they differ (lpx_merge.c).
 * Plain declarations (also fed to ffi.cdef). */
#ifndef LPX_MERGE_H
#define LPX_MERGE_H
#include "lpx_core.h"

int32_t lpx_merge_emit(lpx_module **mods, const char **labels, const int32_t *line_info, int32_t n, const char **text, size_t *len);

#endif
