/* The emulator's performance counters (luaptx profile): one row of
 * counters per decoded instruction, counted by the profiled copy of the
 * warp loop only (emu_exec.c picks it per launch; the plain loop has no
 * profiling code). Rows map to Lua lines through the IR item's file:line. */
#ifndef LPX_EMU_PROF_H
#define LPX_EMU_PROF_H
#include "emu.h"

/* Counters: enum suffix, name (JSON, Lua), what it counts. */
#define EMU_PROF_COUNTERS(X) \
  X(WARPS, "warps", "warp-instructions issued") \
  X(LANES, "lanes", "lane-instructions executed (active lanes with a true guard)") \
  X(DIV_BRANCHES, "div_branches", "branches whose guard split the warp's active lanes") \
  X(GLD_REQ, "gld_requests", "global load requests (warp-instructions reading global memory)") \
  X(GLD_SECTORS, "gld_sectors", "32-byte sectors those loads touched") \
  X(GLD_BYTES, "gld_bytes", "bytes the lanes loaded from global memory") \
  X(GST_REQ, "gst_requests", "global store requests") \
  X(GST_SECTORS, "gst_sectors", "32-byte sectors those stores touched") \
  X(GST_BYTES, "gst_bytes", "bytes the lanes stored to global memory") \
  X(LOCAL_BYTES, "local_bytes", "bytes of local memory loaded and stored (spills, stack arrays)") \
  X(SH_REQ, "shared_requests", "shared-memory requests (ld/st/atom/ldmatrix/stmatrix/cp.async)") \
  X(SH_WAVEFRONTS, "shared_wavefronts", "shared-memory wavefronts those requests took") \
  X(SH_IDEAL, "shared_ideal", "wavefronts they would take without bank conflicts") \
  X(SH_MAX_WAYS, "shared_max_ways", "worst n-way bank conflict of one phase (a maximum, not a sum)") \
  X(SH_BYTES, "shared_bytes", "bytes the lanes moved to or from shared memory") \
  X(TMA_BYTES, "tma_bytes", "bytes moved by TMA tensor copies (cp.async.bulk.tensor)") \
  X(BULK_BYTES, "bulk_bytes", "bytes moved by non-tensor bulk copies (cp.async.bulk)") \
  X(BAR_ARRIVALS, "bar_arrivals", "warp arrivals at bar/barrier") \
  X(BAR_WAITS, "bar_waits", "arrivals that had to wait for other warps") \
  X(MBAR_TRIES, "mbar_tries", "mbarrier test_wait/try_wait warp-instructions") \
  X(MBAR_FAILS, "mbar_fails", "of those, the ones whose phase had not completed (a warp waited)") \
  X(TC_OPS, "tc_ops", "tensor-core warp-instructions (mma, wgmma, tcgen05.mma)") \
  X(FLOPS, "flops", "floating-point (or integer) operations of those, 2*M*N*K per matrix product") \
  X(FLOPS_FP8, "flops_fp8", "the part of flops with fp8 (e4m3/e5m2) inputs") \
  X(FP32_FLOPS, "fp32_flops", "f32 operations of the CUDA cores: add/sub/mul/min/max 1 per lane, fma/mad 2") \
  X(ATOM_GLOBAL, "atom_global", "lane atomics and reductions on global memory") \
  X(ATOM_SHARED, "atom_shared", "lane atomics and reductions on shared memory")

enum {
#define X(e, name, help) EMU_PC_##e,
  EMU_PROF_COUNTERS(X)
#undef X
  EMU_PC__COUNT
};

/* Add v to counter c of the instruction running now (handlers' hooks: one
 * test per instruction; w->prow is NULL when the launch is not profiled). */
static inline void lpx_emu_prof_add(emu_warp *w, int c, uint64_t v)
{
  if (w->prow) w->prow[c] += v;
}

/* What the warp looked like before an instruction (to see what it did). */
typedef struct emu_prof_snap { uint32_t blocked, fails; uint64_t gen; } emu_prof_snap;

int lpx_emu_prof_prepare(emu_dev *e);
void lpx_emu_prof_launch(emu_prog *p, const lpx_launch_cfg *cfg);
void lpx_emu_prof_before(emu_warp *w, const emu_inst *in, uint32_t m, emu_prof_snap *s);
void lpx_emu_prof_after(emu_warp *w, const emu_inst *in, uint32_t m, const emu_prof_snap *s);

#endif
