/* The emulator's adversarial schedule (LUAPTX_EMU_SCHEDULE=adversarial:<seed>,
 * device option "schedule"): asynchronous work completes as late as the
 * memory model allows and warps interleave in seeded, hostile orders; every
 * access that could see the difference is reported. The hooks below are
 * called only when a CTA's sched is set, so the default schedule pays one
 * pointer test per shared access and per asynchronous instruction. */
#ifndef LPX_EMU_SCHED_H
#define LPX_EMU_SCHED_H
#include "emu.h"

/* Life of a schedule: one per cluster of CTAs a host thread runs. */
emu_sched *lpx_emu_sched_new(emu_cta *g, int n, int64_t seed);
void lpx_emu_sched_free(emu_sched *s);
void lpx_emu_sched_reset(emu_sched *s, uint64_t unit);

/* Decoding: is an ISA row one the schedule tracks (EI_ASYNC)? */
int lpx_emu_sched_row(int op);

/* The warp loop: bracket an EI_ASYNC instruction (end: 1 when the warp yields). */
void lpx_emu_sched_begin(emu_warp *w, const emu_inst *in);
int lpx_emu_sched_end(emu_warp *w, const emu_inst *in, uint32_t m);

/* The CTA loop: the next warp to run (NULL: none can), the end of its turn,
 * and a completed barrier (the order is shuffled at the end of the turn). */
emu_warp *lpx_emu_sched_next(emu_sched *s);
void lpx_emu_sched_turn_end(emu_sched *s, emu_warp *w);
void lpx_emu_sched_shuffle(emu_sched *s);

/* Memory and registers: a shared access of n bytes at off in CTA c (checked
 * against pending copies, recorded for the one being issued), a bulk or TMA
 * copy's transaction bytes on the barrier word p of CTA c (1: deferred to the
 * phase's completion), any mbarrier instruction on p (the bytes held back
 * on it, which emu_mbar.c completes when nothing else keeps the phase
 * open, and that they landed), and a read of a
 * register slot some lanes (bad) never wrote (-1: reported as a pending
 * wgmma accumulator). */
int lpx_emu_sched_access(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t off, uint32_t n, int write);
int lpx_emu_sched_defer_tx(emu_cta *c, const uint8_t *p, int lane, int64_t bytes);
int64_t lpx_emu_sched_mbar_held(emu_cta *c, uint8_t *p, int *any);
void lpx_emu_sched_mbar_landed(emu_cta *c, uint8_t *p);
int lpx_emu_sched_reg(emu_warp *w, const emu_inst *in, int32_t slot, uint32_t bad);

#endif
