/* Decoding a traced function once into the emulator's executable form:
 * operands become register slots (immediates and special registers get
 * slots of their own, filled when a warp starts), labels become
 * instruction indices, symbols become space offsets, and every
 * instruction gets its handler from the family table indexed by ISA row. */
#include "emu.h"
#include "emu_sched.h"
#include "../lpx_labels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct dec {
  emu_dev *e;
  lpx_module *m;
  const lpx_func *f;
  emu_prog *p;
  emu_mod *mod;
  int8_t *sym_space;      /* per module symbol: EMU_SP_* + 1, 0 = not a variable */
  uint64_t *sym_addr;
  int32_t *label_at;      /* per symbol: instruction index of a label of that name, -1 */
  uint8_t *sym_use;       /* per frame symbol: 1 stored by st.param, 2 named by a call */
  int32_t *frame_syms; size_t nframe, frame_cap;   /* frame symbols in order of appearance */
  lpx_labels lab;         /* { } blocks: a branch goes to the label its block sees */
  int32_t *inst_at;       /* per item: the index of the next instruction */
} dec;

/* ------------------------------------------------------------ families */

typedef emu_fn (*emu_picker)(const emu_inst *in);

/* fence.proxy.async is the TMA family's; every other fence the control family's. */
static emu_fn lpx_emu_pick_fence(const emu_inst *in)
{
  emu_fn fn = lpx_emu_pick_proxy_fence(in);
  return fn ? fn : lpx_emu_pick_ctl(in);
}

/* Rows of family none have no handler table (call is the decoder's own). */
#define lpx_emu_pick_none NULL

/* Which handler family serves each ISA row: the emulator-family column of
 * LPX_ISA (src/lpx_isa.def). */
static const emu_picker family[LPX_OP__COUNT] = {
#define X(id, name, sig, groups, req, types, ntypes, ptx, sm, maxsm, emu) [LPX_OP_##id] = lpx_emu_pick_##emu,
  LPX_ISA(X)
#undef X
};

/* The handler of a decoded instruction (the unsupported reporter if none).
 * The extended-integer family serves some forms of shared rows first
 * (add/min/max .u16x2/.s16x2, lop3 with a predicate). */
emu_fn lpx_emu_pick(const emu_inst *in)
{
  emu_fn fn = lpx_emu_pick_intx(in);
  if (!fn && in->op >= 0 && in->op < LPX_OP__COUNT && family[in->op]) fn = family[in->op](in);
  return fn ? fn : lpx_emu_unsupported;
}

/* ------------------------------------------------------------- layout */

/* Bytes of a variable (count 0 is a scalar, -1 an unsized extern array). */
static uint64_t var_bytes(const lpx_var *v)
{
  uint64_t el = (uint64_t)(lpx_types[v->type].bits + 7) / 8;
  return v->count > 0 ? el * (uint64_t)v->count : (v->count == 0 ? el : 0);
}

/* Round x up to a power-of-two alignment. */
static uint64_t align_up(uint64_t x, uint64_t a) { return a > 1 ? (x + a - 1) & ~(a - 1) : x; }

/* a + b, held at 2^31 so sums of many variables (and an alignment after) cannot wrap
 * (the launch refuses sizes that large: LPX_SHARED_MAX, LPX_LOCAL_MAX). */
static uint32_t sum_u32(uint32_t a, uint64_t b)
{
  uint64_t cap = (uint64_t)1 << 31, s = (uint64_t)a + b;
  return (uint32_t)(s > cap ? cap : s);
}

/* Lay out one variable: shared and local get offsets, globals their address. */
static void place_var(dec *d, const lpx_var *v, int module_index, uint32_t *ext_align)
{
  const char *space = lpx_strtab_get(&d->m->syms, v->space);
  uint64_t a = v->align ? (uint64_t)v->align : (uint64_t)(lpx_types[v->type].bits + 7) / 8;
  if (strcmp(space, "shared") == 0) {
    d->sym_space[v->sym] = EMU_SP_SHARED + 1;
    if (v->count < 0) { if (a > *ext_align) *ext_align = (uint32_t)a; d->sym_addr[v->sym] = (uint64_t)-1; return; }
    d->p->shared_static = (uint32_t)align_up(d->p->shared_static, a);
    d->sym_addr[v->sym] = d->p->shared_static;
    d->p->shared_static = sum_u32(d->p->shared_static, var_bytes(v));
  } else if (strcmp(space, "local") == 0) {
    d->sym_space[v->sym] = EMU_SP_LOCAL + 1;
    d->p->local_size = (uint32_t)align_up(d->p->local_size, a);
    d->sym_addr[v->sym] = d->p->local_size;
    d->p->local_size = sum_u32(d->p->local_size, var_bytes(v));
  } else if (module_index >= 0) {
    d->sym_space[v->sym] = (strcmp(space, "const") == 0 ? EMU_SP_CONST : EMU_SP_GLOBAL) + 1;
    d->sym_addr[v->sym] = d->mod->global_addr[module_index];
  }
}

/* Lay out params (lpx_param_layout) and variables. */
static int layout(dec *d)
{
  const lpx_func *f = d->f;
  emu_prog *p = d->p;
  p->param_off = calloc(f->nparams + 1, sizeof *p->param_off);
  if (!p->param_off) return -1;
  uint64_t off = lpx_param_layout(f, p->param_off);
  for (size_t i = 0; i < f->nparams; i++) {
    d->sym_space[f->params[i].sym] = (f->is_entry ? EMU_SP_PARAM : EMU_SP_FRAME) + 1;
    d->sym_addr[f->params[i].sym] = p->param_off[i];
  }
  p->param_size = (uint32_t)off;
  if (!f->is_entry) p->frame_size = (uint32_t)align_up(off, 16);
  uint32_t ext_align = 16;
  for (size_t i = 0; i < d->m->nvars; i++) place_var(d, &d->m->vars[i], (int)i, &ext_align);
  for (size_t i = 0; i < f->nvars; i++) place_var(d, &f->vars[i], -1, &ext_align);
  p->extern_off = (uint32_t)align_up(p->shared_static, ext_align);
  for (size_t s = 0; s < d->m->syms.n; s++)
    if (d->sym_space[s] == EMU_SP_SHARED + 1 && d->sym_addr[s] == (uint64_t)-1) d->sym_addr[s] = p->extern_off;
  return 0;
}

/* ------------------------------------------------------------- slots */

/* A slot holding a constant for every lane (immediates, symbol addresses). */
static int32_t const_slot(dec *d, uint64_t v)
{
  emu_prog *p = d->p;
  for (int32_t i = 0; i < p->ncvals && i < 4096; i++)
    if (p->cvals[i] == v) return p->cfirst + i;
  size_t cap = (size_t)p->ncvals;
  if (lpx_grow((void **)&p->cvals, &cap, (size_t)p->ncvals + 1, sizeof(uint64_t))) return -1;
  p->cvals[p->ncvals] = v;
  return p->cfirst + p->ncvals++;
}

/* Index of the function a symbol names in the module, or -1. */
static int32_t func_of(const dec *d, int32_t sym)
{
  for (size_t i = 0; i < d->m->nfuncs; i++)
    if (d->m->funcs[i].sym == sym) return (int32_t)i;
  return -1;
}

/* Give a symbol no declaration places (a call site's .param, a .func's
 * func_retvalN) a slot in the thread's frame; 0, or -1 if it names a function. */
static int frame_symbol(dec *d, int32_t sym)
{
  if (d->sym_space[sym]) return 0;
  if (func_of(d, sym) >= 0) return -1;
  emu_prog *p = d->p;
  d->sym_space[sym] = EMU_SP_FRAME + 1;
  d->sym_addr[sym] = p->frame_size;
  unsigned k;
  if (sscanf(lpx_strtab_get(&d->m->syms, sym), "func_retval%u", &k) == 1 && k < 4) {
    p->ret_off[k] = p->frame_size;
    if ((int)k + 1 > p->nret) p->nret = (int)k + 1;
  }
  p->frame_size += EMU_FRAME_SLOT;
  if (!LPX_RESERVE(d->frame_syms, d->frame_cap, d->nframe + 1)) d->frame_syms[d->nframe++] = sym;
  return 0;
}

/* A .func's return .params when not named func_retvalN: the frame symbols
 * it stores to that no call of its own names, in order of appearance. */
static void find_returns(dec *d)
{
  emu_prog *p = d->p;
  if (d->f->is_entry || p->nret) return;
  for (size_t i = 0; i < d->nframe && p->nret < 4; i++)
    if (d->sym_use[d->frame_syms[i]] == 1) p->ret_off[p->nret++] = (uint32_t)d->sym_addr[d->frame_syms[i]];
}

/* Append one executable operand. */
static emu_op *op_new(dec *d)
{
  emu_prog *p = d->p;
  if (LPX_RESERVE(p->ops, p->ops_cap, p->nops + 1)) return NULL;
  emu_op *o = &p->ops[p->nops++];
  memset(o, 0, sizeof *o);
  return o;
}

/* A special register: a slot filled when the warp starts (clocks: when read). */
static void special_operand(dec *d, const lpx_operand *src, emu_inst *in, emu_op *o)
{
  if (d->p->special_slot[src->id] < 0) d->p->special_slot[src->id] = d->p->nslots++;
  o->kind = EO_REG; o->bits = 64; o->reg = d->p->special_slot[src->id];
  if (src->id == LPX_SR_CLOCK || src->id == LPX_SR_CLOCK64 || src->id == LPX_SR_CLOCK_HI || src->id == LPX_SR_GLOBALTIMER
      || src->id == LPX_SR_GLOBALTIMER_LO || src->id == LPX_SR_GLOBALTIMER_HI)
    in->flags |= EI_READS_CLOCK;
}

/* A label, or a symbol used as a value: its address in its space, as a constant. */
static int symbol_operand(dec *d, const lpx_operand *src, emu_inst *in, emu_op *o)
{
  if (d->label_at[src->id] >= 0 || src->kind == LPX_OPD_LABEL) {
    o->kind = EO_LABEL; o->reg = src->id;
    return 0;
  }
  if (in->op == LPX_OP_CALL) { frame_symbol(d, src->id); d->sym_use[src->id] |= 2; }
  o->kind = EO_REG; o->bits = 64; o->space = (uint8_t)(d->sym_space[src->id] ? d->sym_space[src->id] - 1 : 0);
  o->reg = const_slot(d, d->sym_addr[src->id] + (uint64_t)src->ival);
  return o->reg < 0 ? -1 : 0;
}

/* [reg+off], [sym+off] or [imm]: a symbol's offset in its space is folded in. */
static void address_operand(dec *d, const lpx_operand *src, emu_inst *in, emu_op *o)
{
  o->kind = EO_ADDR; o->off = src->ival; o->reg = -1;
  if (src->aux == LPX_OPD_REG) { o->reg = src->id; return; }
  if (src->aux != LPX_OPD_SYM) return;
  if (!d->sym_space[src->id] && frame_symbol(d, src->id)) {   /* a function's name: reported if it runs */
    in->flags |= EI_UNRESOLVED;
    in->target = src->id;
    return;
  }
  o->space = (uint8_t)(d->sym_space[src->id] - 1);
  o->off += (int64_t)d->sym_addr[src->id];
  if (o->space == EMU_SP_FRAME && in->op == LPX_OP_ST) d->sym_use[src->id] |= 1;
}

/* Decode one IR operand (children follow as their own operands). */
static int decode_operand(dec *d, const lpx_operand *src, emu_inst *in)
{
  emu_op *o = op_new(d);
  if (!o) return -1;
  switch (src->kind) {
  case LPX_OPD_REG:   /* off: a video selector (lpx_rules.h) */
    o->kind = EO_REG; o->reg = src->id; o->neg = src->aux != 0; o->off = src->ival;
    o->bits = (uint8_t)lpx_types[d->f->reg_type[src->id]].bits;
    return 0;
  case LPX_OPD_IMM: case LPX_OPD_FIMM: case LPX_OPD_INT: case LPX_OPD_NUM: {
    int fits = src->kind == LPX_OPD_NUM && fabs(src->fval) < 9.0e18;   /* inf/huge: no UB conversion */
    uint64_t v = src->kind == LPX_OPD_NUM ? (fits ? (uint64_t)(int64_t)src->fval : 0) : (uint64_t)src->ival;
    int f32_inst = in->type == LPX_T_F32 && (in->type2 < 0 || in->type2 == LPX_T_F32);
    if (src->kind == LPX_OPD_FIMM && src->type == LPX_T_F64 && (src->aux || f32_inst)) {   /* 0d/1.5 in an f32 instruction */
      double dv;
      memcpy(&dv, &src->ival, 8);
      float fv = (float)dv;
      uint32_t u;
      memcpy(&u, &fv, 4);
      v = u;
    }
    o->kind = EO_REG; o->bits = 64; o->reg = const_slot(d, v);
    return o->reg < 0 ? -1 : 0;
  }
  case LPX_OPD_SPECIAL: special_operand(d, src, in, o); return 0;
  case LPX_OPD_SYM: case LPX_OPD_LABEL: return symbol_operand(d, src, in, o);
  case LPX_OPD_ADDR: address_operand(d, src, in, o); return 0;
  case LPX_OPD_VEC: case LPX_OPD_PAREN: o->kind = EO_VEC; o->reg = src->aux; in->flags |= EI_VEC; return 0;
  case LPX_OPD_PIPE: o->kind = EO_VEC; o->reg = 2; return 0;
  case LPX_OPD_SINK: o->kind = EO_REG; o->reg = d->p->sink_slot; o->bits = 64; return 0;
  default:
    /* Lists the emulator has no use for yet ([a, {b, c}] of tex/tensor):
     * keep their shape; such instructions report themselves unsupported. */
    o->kind = EO_VEC; o->reg = src->aux > 0 ? src->aux : 0;
    return 0;
  }
}

/* Rows whose first operand is a source, not a destination. */
static int no_dest(int op)
{
  return op == LPX_OP_ST || op == LPX_OP_RED || op == LPX_OP_BAR || op == LPX_OP_BARRIER ||
         op == LPX_OP_PREFETCH || op == LPX_OP_BRA || op == LPX_OP_BARWARP || op == LPX_OP_CALL || op == LPX_OP_TCDEALLOC ||
         op == LPX_OP_STACKRESTORE || op == LPX_OP_APPLYPRI || op == LPX_OP_DISCARD || op == LPX_OP_PMEVENT;
}

/* Record the register slots an instruction reads (for the uninitialised check). */
static void collect_srcs(dec *d, emu_inst *in)
{
  if (in->nops == 0) return;   /* ops may be NULL: a body of operand-free instructions */
  const emu_op *ops = &d->p->ops[in->o];
  int top = 0;
  for (uint32_t k = 0; k < in->nops; top++) {
    uint32_t n = ops[k].kind == EO_VEC ? 1 + (uint32_t)ops[k].reg : 1;
    int red = (in->op == LPX_OP_BAR || in->op == LPX_OP_BARRIER) && in->mod[LPX_GB_BARMODE] == LPX_BARMODE_RED;
    int is_dest = top == 0 && (red || !no_dest(in->op));
    if (is_dest && ops[k].kind == EO_VEC && n - 1 > 8) {   /* too long for dsts: keep the span */
      in->dst_vec = in->o + k + 1;
      in->ndst_vec = (uint16_t)(n - 1);
      k += n;
      continue;
    }
    for (uint32_t j = ops[k].kind == EO_VEC; j < n && k + j < in->nops; j++) {
      const emu_op *c = &ops[k + j];
      int reads = c->kind == EO_ADDR || (c->kind == EO_REG && !is_dest);
      if (reads && c->reg >= 0 && c->reg < d->p->nregs && in->nsrcs < 5) in->srcs[in->nsrcs++] = c->reg;
      if (is_dest && c->kind == EO_REG && c->reg >= 0 && c->reg < d->p->nregs && in->ndsts < 8) in->dsts[in->ndsts++] = c->reg;
    }
    k += n;
  }
  if (in->guard >= 0 && in->nsrcs < 6) in->srcs[in->nsrcs++] = in->guard;
}

/* Rows whose scalar data operand may be written braced, {a} (Triton's
 * ld.global.b32 { %r1 }, [ %rd1 + 0 ]). */
static int braced_scalar(int op)
{
  return op == LPX_OP_LD || op == LPX_OP_LDU || op == LPX_OP_ST || op == LPX_OP_ATOM || op == LPX_OP_RED;
}

/* A call naming no function of the module calls an extern one: its
 * symbol is the first operand outside the return and argument lists. */
static void extern_callee(const dec *d, const lpx_item *it, emu_inst *in)
{
  for (uint32_t k = 0; k < it->nops; k++) {
    const lpx_operand *o = &d->f->ops[it->ops + k];
    if (o->kind == LPX_OPD_VEC || o->kind == LPX_OPD_PAREN) { k += (uint32_t)o->aux; continue; }
    if (o->kind == LPX_OPD_SYM) { in->flags |= EI_EXTERN; in->target = o->id; return; }
  }
}

/* Decode one instruction item. */
static int decode_inst(dec *d, const lpx_item *it, int32_t item, emu_inst *in)
{
  const lpx_form *fo = &d->m->ctx->forms[it->form];
  memset(in, 0, sizeof *in);
  in->guard = it->guard; in->guard_neg = it->guard_neg;
  in->op = (int16_t)fo->info.op; in->type = (int16_t)fo->info.type; in->type2 = (int16_t)fo->info.type2;
  in->type3 = (int16_t)fo->info.type3;
  in->vec = (uint8_t)fo->info.vec; in->item = item; in->target = -1;
  memcpy(in->mod, fo->modsel, sizeof in->mod);
  if (in->op == LPX_OP_LDMATRIX || in->op == LPX_OP_STMATRIX || in->op == LPX_OP_MMA) lpx_emu_decode_mma(in, fo);
  if (in->op == LPX_OP_CPBULK || in->op == LPX_OP_CPREDBULK) lpx_emu_decode_bulk(in, fo);
  if (in->op == LPX_OP_WGMMA) lpx_emu_decode_wgmma(in, fo);
  in->o = (uint32_t)d->p->nops;
  in->nops = (uint8_t)(it->nops > 255 ? 255 : it->nops);
  int braced = in->vec == 1 && braced_scalar(in->op);
  for (uint32_t k = 0; k < it->nops; k++) {
    const lpx_operand *src = &d->f->ops[it->ops + k];
    if (braced && src->kind == LPX_OPD_VEC && src->aux == 1) { in->nops--; continue; }   /* {a} is a */
    if (decode_operand(d, src, in)) return -1;
  }
  if (in->op == LPX_OP_CALL) {
    for (uint32_t k = 0; k < it->nops && !(in->flags & EI_CALL); k++) {
      const lpx_operand *o = &d->f->ops[it->ops + k];
      int32_t fi = o->kind == LPX_OPD_SYM ? func_of(d, o->id) : -1;
      if (fi >= 0) { in->flags |= EI_CALL; in->target = fi; }
    }
    if (!(in->flags & EI_CALL)) extern_callee(d, it, in);
  }
  collect_srcs(d, in);
  lpx_emu_decode_tcgen05(in, fo);
  return 0;
}

/* Handler of an instruction naming a symbol the emulator cannot place. */
static int unresolved(emu_warp *w, const emu_inst *in, uint32_t m)
{
  return lpx_emu_fail(w, in, -1, "the emulator cannot resolve [%s]: it names no parameter or variable of this function",
                      lpx_strtab_get(&w->p->m->syms, in->target));
}

/* Refuse to launch a program holding a form the emulator does not run,
 * before any instruction runs: a kernel never runs partly and then
 * stops, nor passes because it never reached the form. */
static int not_implemented(const emu_prog *p, lpx_ctx *ctx)
{
  const emu_inst *in = &p->insts[p->unimpl];
  char where[512];
  lpx_emu_where(p, in, where, sizeof where);
  const lpx_form_info *fo = lpx_form_get(p->m->ctx, p->f->items[in->item].form);
  return lpx_fail(ctx, "%s: not implemented: %s (the emulator cannot run this form; ptxas and a GPU can; "
                  "docs/emulator-coverage.md lists what it runs)", where, fo ? fo->text : "?");
}

/* Can p run: every form it and the functions it calls hold is emulated?
 * (0, or -1 naming the first form that is not, at its line.) */
static int runnable(const emu_prog *p, lpx_ctx *ctx, uint8_t *seen)
{
  if (seen[p->fn_index]) return 0;
  seen[p->fn_index] = 1;
  if (p->unimpl >= 0) return not_implemented(p, ctx);
  for (size_t i = 0; i < p->ninsts; i++)
    if ((p->insts[i].flags & EI_CALL) && p->funcs[p->insts[i].target] &&
        runnable(p->funcs[p->insts[i].target], ctx, seen)) return -1;
  return 0;
}

/* Check, before a launch, that the entry p and its callees can run. */
int lpx_emu_runnable(const emu_prog *p, lpx_ctx *ctx)
{
  uint8_t *seen = calloc(p->m->nfuncs + 1, 1);
  if (!seen) return lpx_fail(ctx, "out of memory");
  int rc = runnable(p, ctx, seen);
  free(seen);
  return rc;
}

/* Resolve each branch's label operand to an instruction index. */
static int resolve_labels(dec *d)
{
  emu_prog *p = d->p;
  for (size_t i = 0; i < p->ninsts; i++) {
    emu_inst *in = &p->insts[i];
    for (uint32_t k = 0; k < in->nops && !(in->flags & (EI_CALL | EI_EXTERN)); k++) {
      emu_op *o = &p->ops[in->o + k];
      if (o->kind != EO_LABEL) continue;
      int32_t k = in->item >= 0 ? lpx_labels_find(&d->lab, (size_t)in->item, o->reg) : -1;
      if (k < 0)
        return lpx_fail(d->m->ctx, "emu: %s: label '%s' is never placed where this branch sees it", p->name,
                        lpx_strtab_get(&d->m->syms, o->reg));
      in->target = d->inst_at[k];
    }
    in->fn = (in->flags & EI_UNRESOLVED) ? unresolved : (in->flags & EI_CALL) ? lpx_emu_call
           : (in->flags & EI_EXTERN) ? lpx_emu_call_extern : lpx_emu_pick(in);
    if (in->fn == lpx_emu_unsupported && p->unimpl < 0) p->unimpl = (int32_t)i;
    if (lpx_emu_is_control(in->fn)) in->flags |= EI_CONTROL;
    else if (lpx_emu_sched_row(in->op)) in->flags |= EI_ASYNC;
  }
  return 0;
}

/* Walk the items: place labels, decode instructions. */
static int decode_body(dec *d)
{
  const lpx_func *f = d->f;
  emu_prog *p = d->p;
  p->insts = calloc(f->ninsts + 1, sizeof *p->insts);
  d->inst_at = malloc((f->nitems + 1) * sizeof *d->inst_at);
  if (!p->insts || !d->inst_at || lpx_labels_build(d->m, f, &d->lab)) return -1;
  int32_t at = 0;
  for (size_t i = 0; i < f->nitems; i++) {
    if (f->items[i].kind == LPX_ITEM_LABEL) d->label_at[f->items[i].form] = at;
    d->inst_at[i] = at;
    at += f->items[i].kind == LPX_ITEM_INST;
  }
  for (size_t i = 0; i < f->nitems; i++) {
    if (f->items[i].kind != LPX_ITEM_INST) continue;
    if (decode_inst(d, &f->items[i], (int32_t)i, &p->insts[p->ninsts])) return -1;
    p->ninsts++;
  }
  /* Falling off the end of the body exits, as the final ret would. */
  emu_inst *last = &p->insts[p->ninsts];
  memset(last, 0, sizeof *last);
  last->op = LPX_OP_EXIT; last->guard = -1; last->item = -1; last->target = -1;
  last->o = (uint32_t)p->nops;
  p->ninsts++;
  return resolve_labels(d);
}

/* Reserve the fixed slots and the table of per-slot widths. */
static int slots(dec *d)
{
  emu_prog *p = d->p;
  p->nregs = (int32_t)d->f->nregs;
  p->sink_slot = p->nregs;
  p->cc_slot = p->nregs + 1;
  p->nslots = p->nregs + 2;
  for (int i = 0; i < LPX_SR__COUNT; i++) p->special_slot[i] = -1;
  return 0;
}

/* Move the constant slots behind the specials once both are known. */
static int finish_slots(dec *d)
{
  emu_prog *p = d->p;
  /* Constants were numbered from cfirst = a large base; renumber them. */
  int32_t base = p->nslots;
  for (size_t i = 0; i < p->nops; i++)
    if (p->ops[i].kind == EO_REG && p->ops[i].reg >= p->cfirst) p->ops[i].reg = p->ops[i].reg - p->cfirst + base;
  p->cfirst = base;
  p->nslots = base + p->ncvals;
  p->slot_bits = calloc((size_t)p->nslots, 1);
  if (!p->slot_bits) return -1;
  for (int32_t r = 0; r < p->nregs; r++) p->slot_bits[r] = (uint8_t)lpx_types[d->f->reg_type[r]].bits;
  for (int32_t s = p->nregs; s < p->nslots; s++) p->slot_bits[s] = 64;
  return 0;
}

/* Note in used the registers wgmma row in reads as accumulators or A fragments. */
static void wgmma_regs(const emu_prog *p, const emu_inst *in, uint8_t *used)
{
  const emu_op *o = &p->ops[in->o];
  uint32_t nd = o[0].kind == EO_VEC ? (uint32_t)o[0].reg : 0, ka = 1 + nd;
  for (uint32_t k = 1; k <= nd && k < in->nops; k++) if (o[k].kind == EO_REG && o[k].reg < p->nregs) used[o[k].reg] = 1;
  if (ka < in->nops && o[ka].kind == EO_VEC)
    for (uint32_t k = ka + 1; k <= ka + 4 && k < in->nops; k++) if (o[k].kind == EO_REG && o[k].reg < p->nregs) used[o[k].reg] = 1;
}

/* Flag the rows other than wgmma that write a register a wgmma.mma_async
 * reads: the ISA needs a wgmma.fence between such a write and the wgmma. */
static int mark_wgmma_writes(emu_prog *p)
{
  uint8_t *used = NULL;
  for (size_t i = 0; i < p->ninsts; i++) {
    if (p->insts[i].op != LPX_OP_WGMMA) continue;
    if (!used && !(used = calloc((size_t)p->nregs + 1, 1))) return -1;
    wgmma_regs(p, &p->insts[i], used);
  }
  for (size_t i = 0; used && i < p->ninsts; i++) {
    emu_inst *in = &p->insts[i];
    if (in->op == LPX_OP_WGMMA) continue;
    for (int k = 0; k < in->ndsts; k++) if (in->dsts[k] >= 0 && in->dsts[k] < p->nregs && used[in->dsts[k]]) in->flags |= EI_WG_WRITE;
    const emu_op *v = &p->ops[in->dst_vec];
    for (uint32_t k = 0; k < in->ndst_vec; k++) if (v[k].kind == EO_REG && v[k].reg < p->nregs && used[v[k].reg]) in->flags |= EI_WG_WRITE;
  }
  free(used);
  return 0;
}

/* Decode function fn of module m into an executable program. */
int lpx_emu_decode(emu_dev *e, lpx_module *m, int32_t fn, emu_mod *mod, emu_prog **out)
{
  dec d = { .e = e, .m = m, .f = &m->funcs[fn], .mod = mod };
  emu_prog *p = calloc(1, sizeof *p);
  size_t nsyms = m->syms.n + 1;
  d.sym_space = calloc(nsyms, 1);
  d.sym_addr = calloc(nsyms, sizeof(uint64_t));
  d.label_at = malloc(nsyms * sizeof(int32_t));
  d.sym_use = calloc(nsyms, 1);
  int rc = -1;
  if (!p || !d.sym_space || !d.sym_addr || !d.label_at || !d.sym_use) { lpx_fail(m->ctx, "out of memory"); goto done; }
  for (size_t i = 0; i < nsyms; i++) d.label_at[i] = -1;
  d.p = p;
  p->m = m; p->f = d.f; p->fn_index = fn; p->name = lpx_strtab_get(&m->syms, d.f->sym);
  p->cfirst = 1 << 30;
  p->unimpl = -1;
  if (slots(&d) || layout(&d)) { lpx_fail(m->ctx, "out of memory"); goto done; }
  if (decode_body(&d)) { if (!m->ctx->error[0]) lpx_fail(m->ctx, "out of memory"); goto done; }
  if (finish_slots(&d) || mark_wgmma_writes(p)) { lpx_fail(m->ctx, "out of memory"); goto done; }
  find_returns(&d);
  rc = lpx_emu_cover(p);
done:
  free(d.sym_space); free(d.sym_addr); free(d.label_at); free(d.sym_use); free(d.frame_syms);
  free(d.inst_at); lpx_labels_free(&d.lab);
  if (rc) { lpx_emu_prog_free(p); p = NULL; }
  *out = p;
  return rc;
}

/* Free a decoded program. */
void lpx_emu_prog_free(emu_prog *p)
{
  if (!p) return;
  free(p->insts); free(p->ops); free(p->cvals); free(p->slot_bits); free(p->param_off);
  free(p->prof); free(p->prof_kind); free(p->prof_flops);
  free(p);
}

/* The marker handler of forms the emulator does not run: a launch refuses
 * a program holding one (lpx_emu_runnable), so it is never called. */
int lpx_emu_unsupported(emu_warp *w, const emu_inst *in, uint32_t m)
{
  (void)m;
  return lpx_emu_fail(w, in, -1, "not implemented");
}

/* Does the emulator have a handler family for ISA row op (1) or not (0)? */
int32_t lpx_emu_row_handled(int32_t op)
{
  return op == LPX_OP_CALL || (op >= 0 && op < LPX_OP__COUNT && family[op] != NULL);   /* calls: lpx_emu_call */
}
