/* Checks a GPU does not make for you, on registers: reads of registers a
 * lane never wrote, of a tcgen05.ld's registers before its wait, and of a
 * pending wgmma's accumulators (the races on shared memory are
 * emu_race.c's). The runner calls it before each instruction. */
#include "emu.h"
#include "emu_sched.h"
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------- uninitialised registers */

/* Fail if the instruction reads a register some lane of m never wrote
 * (the guard itself is checked for every lane of the running group), or,
 * under the adversarial schedule, an accumulator of a pending wgmma. */
int lpx_emu_check_srcs(emu_warp *w, const emu_inst *in, uint32_t m)
{
  for (int k = 0; k < in->nsrcs; k++) {
    int32_t s = in->srcs[k];
    uint32_t lanes = (in->guard >= 0 && k == in->nsrcs - 1) ? w->cur : m;
    uint32_t bad = lanes & ~w->wr[s];
    if (!bad) continue;
    if (w->cta->tm && lpx_emu_tmem_pending(w, in, s, bad)) return -1;
    if (w->cta->sched && lpx_emu_sched_reg(w, in, s, bad)) return -1;
    if (!(w->cta->L->checks & EMU_CHECK_UNINIT_REG)) continue;   /* here for tcgen05.ld's and pending wgmma registers only */
    char name[128];
    lpx_reg_text(w->p->m, w->p->f, s, name, sizeof name);
    return lpx_emu_fail(w, in, __builtin_ctz(bad), "reads %s, which this thread never wrote (%d lane(s) of the warp read it unwritten)",
                        name, __builtin_popcount(bad));
  }
  return 0;
}
