/* The emulator's performance counters, per instruction (luaptx profile).
 * Turn them on with the emu device's "profile" option; each launch then
 * adds to one row of counters per instruction of every loaded program.
 * Fed to LuaJIT's ffi.cdef: plain one-line declarations only. */
#ifndef LPX_PROFILE_H
#define LPX_PROFILE_H
#include "lpx_device.h"

/* Where a row's instruction is: its function, Lua (or PTX) file and line, index, PTX text, its module
 * (for lpx_emit and ptxas), and the function's profiled launches with the last one's grid, block and dynamic smem. */
typedef struct lpx_prof_loc { const char *func; const char *file; int32_t line; int32_t pc; char text[240]; lpx_module *module; uint64_t launches; uint32_t grid[3], block[3], dynamic_smem; } lpx_prof_loc;

int32_t lpx_prof_ncounters(void);
const char *lpx_prof_counter_name(int32_t i);
const char *lpx_prof_counter_help(int32_t i);
int32_t lpx_device_profile_count(lpx_device *d, int32_t *nrows);
int32_t lpx_device_profile_row(lpx_device *d, int32_t r, lpx_prof_loc *loc, uint64_t *counters, int32_t ncounters);
int32_t lpx_device_profile_reset(lpx_device *d);

#endif
