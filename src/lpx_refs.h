/* Whole-function checks the per-instruction validator cannot make: every
 * branch target placed, every named symbol declared. Plain declarations
 * (also fed to ffi.cdef). */
#ifndef LPX_REFS_H
#define LPX_REFS_H
#include "lpx_core.h"

int32_t lpx_func_check_refs(lpx_module *m, int32_t fn);

#endif
