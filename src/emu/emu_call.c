/* Device-function calls: a call runs the callee for the calling lanes to
 * completion in a warp of its own (its registers, its frame), nested in
 * the caller's step; .param arguments and return values are copied
 * between the caller's and the callee's per-thread frames. */
#include "emu.h"
#include <limits.h>
#include <stdlib.h>

#define BUDGET_CHUNK 4096

/* The return-list, function and argument-list operands of a call. */
typedef struct call_ops { const emu_op *rets, *args; int nret, nargs; } call_ops;

/* Split call's operands: [(rets),] func[, (args)]. */
static call_ops call_operands(const emu_warp *w, const emu_inst *in)
{
  const emu_op *ops = &w->p->ops[in->o];
  call_ops c = { NULL, NULL, 0, 0 };
  uint32_t k = 0;
  if (in->nops && ops[0].kind == EO_VEC) { c.nret = ops[0].reg; c.rets = &ops[1]; k = 1 + (uint32_t)c.nret; }
  k++;
  if (k < in->nops && ops[k].kind == EO_VEC) { c.nargs = ops[k].reg; c.args = &ops[k + 1]; }
  return c;
}

/* Copy n bytes per lane of m between two frames (offsets per lane from slots). */
static int frame_copy(emu_warp *w, const emu_inst *in, uint32_t m, uint8_t *dst, uint32_t dsize, uint64_t doff,
                      const uint8_t *src, uint32_t ssize, uint64_t soff, uint32_t n)
{
  if (doff + n > dsize || soff + n > ssize)
    return lpx_emu_fail(w, in, __builtin_ctz(m), "call passes %u bytes of .param, more than the %u the emulator keeps per call-site .param",
                        n, EMU_FRAME_SLOT);
  EMU_EACH(m, memcpy(dst + (size_t)l * dsize + doff, src + (size_t)l * ssize + soff, n));
  return 0;
}

/* Run a callee warp for lanes until they return; -1 on an error or a barrier inside it. */
static int call_run(emu_warp *sub, const emu_inst *in)
{
  uint64_t steps = 0;
  while (sub->live) {
    if (lpx_emu_warp_run(sub, &steps)) return -1;
    if (sub->live && !(sub->live & ~sub->blocked))
      return lpx_emu_fail(sub, &sub->p->insts[sub->pc[__builtin_ctz(sub->live)]], -1,
                          "a barrier inside a device function is not supported by the emulator");
    if (steps >= BUDGET_CHUNK) { if (lpx_emu_charge(sub->cta, sub, steps)) return -1; steps = 0; }
    if (lpx_emu_stop_for_error(sub->cta->L)) return -1;
  }
  return steps ? lpx_emu_charge(sub->cta, sub, steps) : 0;
}

/* Copy the arguments into the callee's frame, then its returns back out. */
static int call_pass(emu_warp *w, emu_warp *sub, const emu_inst *in, uint32_t m, const call_ops *c, int back)
{
  const emu_prog *callee = sub->p;
  for (int j = 0; j < (back ? c->nret : c->nargs); j++) {
    const emu_op *o = back ? &c->rets[j] : &c->args[j];
    uint64_t slot = EMU_R(w, o->reg)[__builtin_ctz(m)];
    if (o->space != EMU_SP_FRAME) return lpx_emu_fail(w, in, -1, "call operand %d is not a call-site .param", j + 1);
    if (back && j >= callee->nret) return lpx_emu_fail(w, in, -1, "%s has no return value %d (func_retval%d)", callee->name, j, j);
    const lpx_param *pa = back ? NULL : &callee->f->params[j];
    uint32_t n = back ? EMU_FRAME_SLOT : (uint32_t)((lpx_types[pa->type].bits + 7) / 8 * (pa->count > 0 ? pa->count : 1));
    int rc = back ? frame_copy(w, in, m, w->frame, w->p->frame_size, slot, sub->frame, callee->frame_size, callee->ret_off[j], n)
                  : frame_copy(w, in, m, sub->frame, callee->frame_size, callee->param_off[j], w->frame, w->p->frame_size, slot, n);
    if (rc) return -1;
  }
  return 0;
}

/* call: run the callee for the calling lanes to completion, with its own
 * registers and frame; .params pass through the frames. */
int lpx_emu_call(emu_warp *w, const emu_inst *in, uint32_t m)
{
  const emu_prog *callee = w->p->funcs ? w->p->funcs[in->target] : NULL;
  if (!callee || callee->ninsts <= 1)
    return lpx_emu_fail(w, in, -1, "calls a function with no body in this module (extern functions such as vprintf are not emulated)");
  if (w->depth >= EMU_MAX_CALL_DEPTH) return lpx_emu_fail(w, in, -1, "calls nest deeper than %d (unbounded recursion?)", EMU_MAX_CALL_DEPTH);
  call_ops c = call_operands(w, in);
  if ((size_t)c.nargs != callee->f->nparams)
    return lpx_emu_fail(w, in, -1, "passes %d argument(s); %s takes %zu", c.nargs, callee->name, callee->f->nparams);
  emu_warp sub;
  memset(&sub, 0, sizeof sub);
  sub.cta = w->cta; sub.p = callee; sub.id = w->id; sub.exists = w->exists; sub.live = m;
  sub.other_min = INT32_MAX; sub.depth = w->depth + 1;
  for (int l = 0; l < 32; l++) sub.red_dst[l] = -1;
  sub.r = malloc((size_t)callee->nslots * 32 * sizeof(uint64_t));
  sub.wr = malloc((size_t)callee->nslots * sizeof(uint32_t));
  sub.local = callee->local_size ? malloc((size_t)callee->local_size * 32) : NULL;
  sub.frame = callee->frame_size ? malloc((size_t)callee->frame_size * 32) : NULL;
  int rc = -1;
  if (!sub.r || !sub.wr || (callee->local_size && !sub.local) || (callee->frame_size && !sub.frame)) {
    lpx_emu_fail(w, in, -1, "out of host memory for a call");
  } else {
    lpx_emu_warp_regs(&sub, w->cta);
    rc = call_pass(w, &sub, in, m, &c, 0) || call_run(&sub, in) || call_pass(w, &sub, in, m, &c, 1) ? -1 : 0;
  }
  w->steps += sub.steps;
  w->lane_steps += sub.lane_steps;
  free(sub.r); free(sub.wr); free(sub.local); free(sub.frame); free(sub.stack);   /* its allocas end with it */
  return rc;
}

