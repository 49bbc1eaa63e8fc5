/* The mbarrier and bulk-copy instructions: mbarrier.* (lanes in order,
 * each on its own barrier; the word is emu_mbar.c's), the non-tensor bulk
 * copies that complete transactions on barriers (cp.async.bulk, its
 * prefetch and group bookkeeping), and the classification of every
 * cp.async.bulk / cp.reduce.async.bulk form, whose tensor kinds the TMA
 * family runs and whose reductions emu_reduce.c does. Copies happen at
 * once, a valid schedule of an asynchronous copy. */
#include "emu.h"
#include "emu_prof.h"

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* Index of the first ADDR operand (the barrier), or -1. */
static int addr_index(const emu_warp *w, const emu_inst *in)
{
  for (int k = 0; k < in->nops; k++) if (EMU_OP(w, in, k)->kind == EO_ADDR) return k;
  return -1;
}

/* mbarrier.*: lanes in order, each on its own barrier address. */
HANDLER(op_mbarrier)
{
  int kind = in->mod[LPX_GB_MBAR];
  if (kind == LPX_MBAR_PENDING_COUNT) {                   /* pending_count d, state: no memory */
    uint64_t *d = D(0);
    const uint64_t *s = D(1);
    EMU_EACH(m, d[l] = s[l] & EMU_MBAR_COUNT);
    return 0;
  }
  int k = addr_index(w, in);
  if (k < 0) return lpx_emu_fail(w, in, -1, "mbarrier needs a [barrier] address operand");
  uint64_t *d = k > 0 ? D(0) : NULL;
  EMU_EACH(m, {
    uint8_t *p = lpx_emu_mbar_ptr(w, in, k, l);
    uint64_t out = 0;
    if (!p || lpx_emu_mbar_apply(w, in, l, p, k, &out)) return -1;
    if (d) d[l] = out;
    if ((kind == LPX_MBAR_TEST_WAIT || kind == LPX_MBAR_TRY_WAIT) && !out && lpx_emu_mbar_wait_failed(w, in, l, p, lpx_emu_mbar_parity(w, in, k, l))) return -1;
    if ((kind == LPX_MBAR_TEST_WAIT || kind == LPX_MBAR_TRY_WAIT) && out && w->cta->tm) lpx_emu_tmem_observe(w, p, lpx_emu_mbar_parity(w, in, k, l), in);
    if ((kind == LPX_MBAR_ARRIVE || kind == LPX_MBAR_ARRIVE_DROP) && w->cta->tm && lpx_emu_tmem_publish(w, p))
      return lpx_emu_fail(w, in, l, "out of host memory");
  });
  return 0;
}

/* ----------------------------------------------------------- bulk copies */

/* cp.async.bulk [dst], [src], size{, [mbar]}: copy at once, then complete
 * size bytes of transactions on the barrier (.mbarrier::complete_tx::bytes). */
HANDLER(op_cp_bulk)
{
  const emu_op *dop = EMU_OP(w, in, 0), *sop = EMU_OP(w, in, 1);
  int dsp = lpx_emu_space(in), ssp = lpx_emu_space2(in);
  const uint64_t *sz = D(2);
  int with_mbar = in->nops > 3 && EMU_OP(w, in, 3)->kind == EO_ADDR;
  EMU_EACH(m, {
    uint32_t n = (uint32_t)sz[l];
    if (n % 16) return lpx_emu_fail(w, in, l, "cp.async.bulk size %u is not a multiple of 16", n);
    uint8_t *dst = lpx_emu_addr_span(w, in, l, dsp, (dop->reg >= 0 ? EMU_R(w, dop->reg)[l] : 0) + (uint64_t)dop->off, n ? n : 1, 1);
    const uint8_t *src = dst ? lpx_emu_addr_span(w, in, l, ssp, (sop->reg >= 0 ? EMU_R(w, sop->reg)[l] : 0) + (uint64_t)sop->off, n ? n : 1, 0) : NULL;
    if (!dst || !src) return -1;
    memmove(dst, src, n);
    lpx_emu_prof_add(w, EMU_PC_BULK_BYTES, n);
    if (with_mbar && lpx_emu_mbar_complete(w, in, 3, l, n)) return -1;
  });
  return 0;
}

/* cp.async.bulk.prefetch.L2 [src], size: a hint with no effect here. What
 * the ISA leaves undefined is reported (size not a multiple of 16, src not
 * 16-byte aligned); an address outside every allocation is not an error. */
HANDLER(op_prefetch)
{
  const emu_op *sop = EMU_OP(w, in, 0);
  const uint64_t *sz = D(1);
  EMU_EACH(m, {
    uint64_t a = (sop->reg >= 0 ? EMU_R(w, sop->reg)[l] : 0) + (uint64_t)sop->off;
    if (sz[l] % 16 || a % 16)
      return lpx_emu_fail(w, in, l, "cp.async.bulk.prefetch of %llu bytes at 0x%llx: the size must be a multiple of 16 and "
                          "the address 16-byte aligned", (unsigned long long)sz[l], (unsigned long long)a);
  });
  return 0;
}

/* Bulk-group bookkeeping: nothing to wait for. */
HANDLER(op_nop) { return 0; }

/* Handlers of the non-tensor bulk kinds (the tensor kinds are emu_tma.c's). */
static const emu_fn bulk_handlers[] = {
  [EMU_BULK_COPY] = op_cp_bulk, [EMU_BULK_NOP] = op_nop, [EMU_BULK_PREFETCH] = op_prefetch,
  [EMU_BULK_REDUCE] = lpx_emu_op_reduce, [EMU_BULK_TREDUCE] = NULL,
};

/* Handler for mbarrier and the cp.async.bulk / cp.reduce.async.bulk forms. */
emu_fn lpx_emu_pick_mbar(const emu_inst *in)
{
  if (in->op == LPX_OP_MBARRIER) return in->mod[LPX_GB_MBAR] ? op_mbarrier : NULL;
  emu_fn fn = in->ext[0] < sizeof bulk_handlers / sizeof bulk_handlers[0] ? bulk_handlers[in->ext[0]] : NULL;
  return fn ? fn : lpx_emu_pick_tma(in);
}

/* The tensor load modes the emulator runs (1), the four-row ones (2). */
static const uint8_t modes_run[LPX_LOADMODE__END] = {
  [LPX_LOADMODE_TILE] = 1, [LPX_LOADMODE_IM2COL] = 1, [LPX_LOADMODE_IM2COL_NO_OFFS] = 1,
  [LPX_LOADMODE_TILE_GATHER4] = 2, [LPX_LOADMODE_TILE_SCATTER4] = 2,
};

/* The EMU_BULK_* kind of a bulk form from its record: the forms the
 * emulator runs (copies, tensor loads/stores/prefetches/reductions,
 * reductions, group bookkeeping); the rest are EMU_BULK_OTHER. */
static int bulk_kind(const lpx_form *fo)
{
  const lpx_form_info *fi = &fo->info;
  int mode = fi->im2col, store = fo->modsel[LPX_GB_SPACE] == LPX_SPACE_GLOBAL && fo->modsel[LPX_GB_SPACE2] == LPX_SPACE2_SHARED_CTA;
  if ((mode && !modes_run[mode]) || fo->modsel[LPX_GB_CPMASK]) return EMU_BULK_OTHER;
  /* .cta_group::N of a tensor load lets its mbarrier sit in the peer CTA (a shared::cluster address): a load as any. */
  if (fi->cta_group && !(fi->tensor && !store && !fi->prefetch && fi->op == LPX_OP_CPBULK)) return EMU_BULK_OTHER;
  if (fi->op == LPX_OP_CPREDBULK) return fi->tensor ? EMU_BULK_TREDUCE : EMU_BULK_REDUCE;
  if (fi->prefetch) return fi->tensor ? EMU_BULK_TPREFETCH : EMU_BULK_PREFETCH;
  if (fo->modsel[LPX_GB_BULKGRP]) return EMU_BULK_NOP;
  if (fi->tensor) return store ? EMU_BULK_TSTORE : EMU_BULK_TLOAD;
  return fi->multicast ? EMU_BULK_OTHER : EMU_BULK_COPY;
}

/* Classify a bulk form: ext[0] its EMU_BULK_* kind, ext[1] multicast,
 * ext[2] im2col (loads, prefetches) or im2col_no_offs, ext[3]
 * tile::gather4 / tile::scatter4 (one column, four rows). */
void lpx_emu_decode_bulk(emu_inst *in, const lpx_form *fo)
{
  in->ext[1] = (uint8_t)fo->info.multicast;
  in->ext[2] = fo->info.im2col == LPX_LOADMODE_IM2COL || fo->info.im2col == LPX_LOADMODE_IM2COL_NO_OFFS;
  in->ext[3] = modes_run[fo->info.im2col] == 2;
  in->ext[0] = (uint8_t)bulk_kind(fo);
}
