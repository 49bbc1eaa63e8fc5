/* The emulator's tensor maps: encoding a validated description into the
 * 128-byte emu_tmap record (the emu device's tma_encode, what
 * cuTensorMapEncode* is on CUDA) and patching its address; editing maps
 * in kernels: tensormap.replace on a map in global or shared::cta memory,
 * and tensormap.cp_fenceproxy copying one from shared::cta to global
 * memory. A map a kernel copied out of its parameter, or built field by
 * field in 128 zeroed bytes (as Triton's tl.make_tensor_descriptor does),
 * can be edited and then used by TMA instructions; each new value is
 * checked against the range the driver allows for that field, and an
 * edited map as a whole, by cuTensorMapEncodeTiled's rules
 * (lpx_tma_validate), when a copy uses it. */
#include "emu.h"
#include "../lpx_tma.h"
#include <stdio.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)

/* ------------------------------------------------------------ encoding */

/* The record's scalar fields of a description. */
static void encode_scalars(emu_tmap *t, const lpx_tma_desc *d)
{
  t->magic = EMU_TMAP_MAGIC;
  t->rank = (uint8_t)d->rank;
  t->dtype = (uint8_t)d->dtype;
  t->esize = (uint8_t)lpx_tma_dtype_size(d->dtype);
  t->swizzle = (uint8_t)d->swizzle;
  t->interleave = (uint8_t)d->interleave;
  t->oob = (uint8_t)d->oob_fill;
  t->mode = (uint8_t)d->mode;
  t->address = d->global_address;
  t->channels = (uint16_t)d->channels;
  t->pixels = (uint16_t)d->pixels;
}

/* Encode a description into the emulator's record after lpx_tma_validate
 * (the dispatcher's): every field fits it but a dimension of exactly 2^32,
 * which the driver takes and the record's 32-bit dims cannot hold. */
int lpx_emu_tmap_encode(lpx_ctx *ctx, const char *tensor, const lpx_tma_desc *d, void *out128)
{
  emu_tmap t;
  memset(&t, 0, sizeof t);
  encode_scalars(&t, d);
  for (int i = 0; i < 5; i++) {
    if (i < d->rank && d->dims[i] > UINT32_MAX)
      return lpx_fail(ctx, "TMA descriptor for %s: dims [%d, innermost first] = %llu; the emulator's tensor maps hold "
                      "dimensions up to 2^32-1", tensor, i, (unsigned long long)d->dims[i]);
    t.dims[i] = (uint32_t)d->dims[i];
    t.box[i] = (uint16_t)d->box[i];
    t.elem_strides[i] = (uint8_t)(d->elem_strides[i] ? d->elem_strides[i] : 1);
    if (i < 4) t.strides[i] = d->strides[i];
    if (i < 3) { t.lower[i] = (int16_t)d->lower[i]; t.upper[i] = (int16_t)d->upper[i]; }
  }
  memcpy(out128, &t, sizeof t);
  return 0;
}

/* Point a record at a new global address (cuTensorMapReplaceAddress),
 * aligned as lpx_tma_validate wants for the record's interleave. */
int lpx_emu_tmap_replace_address(lpx_ctx *ctx, const char *tensor, void *map128, uint64_t address)
{
  emu_tmap t;
  memcpy(&t, map128, sizeof t);
  if (t.magic != EMU_TMAP_MAGIC)
    return lpx_fail(ctx, "TMA descriptor for %s: the 128 bytes hold no tensor map the emulator encoded", tensor);
  if (lpx_tma_check_address(ctx, tensor, address, t.interleave)) return -1;
  t.address = address;
  memcpy(map128, &t, sizeof t);
  return 0;
}

/* ------------------------------------------------------------- editing */

typedef int (*tmap_set)(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap);

/* CUtensorMapDataType of each .elemtype value (the ISA's numbering differs). */
static const int8_t elemtypes[13] = { 0, 1, 2, 3, 4, 5, 6, 7, 10, 8, 9, 11, 12 };

/* Fail one setter with its reason; -1. */
static int nope(char *why, size_t cap, const char *fmt, uint64_t v)
{
  snprintf(why, cap, fmt, (unsigned long long)v);
  return -1;
}

/* .global_address: 16-byte aligned (32 with a 32B interleave, checked at use). */
static int set_address(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v % 16) return nope(why, cap, "global_address 0x%llx is not 16-byte aligned", v);
  t->address = v;
  return 0;
}

/* .rank: the new value is the rank minus one. */
static int set_rank(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v > 4) return nope(why, cap, "rank new_val %llu (the rank minus one) must be 0..4", v);
  t->rank = (uint8_t)(v + 1);
  return 0;
}

/* .box_dim[ord]: 1..256. */
static int set_box(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  if (v < 1 || v > 256) return nope(why, cap, "box_dim %llu must be in 1..256", v);
  t->box[ord] = (uint16_t)v;
  return 0;
}

/* .global_dim[ord]: non-zero. */
static int set_dim(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  if (v < 1) return nope(why, cap, "global_dim %llu must be non-zero", v);
  t->dims[ord] = (uint32_t)v;
  return 0;
}

/* .global_stride[ord] (bytes, steps dimension ord + 1): a multiple of 16 below 2^40. */
static int set_stride(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  if (ord > 3) return nope(why, cap, "global_stride ordinal %llu: a map has strides 0..3 (dimension 1..4)", ord);
  if (v % 16 || v >= (uint64_t)1 << 40) return nope(why, cap, "global_stride %llu must be a multiple of 16 below 2^40", v);
  t->strides[ord] = v;
  return 0;
}

/* .element_stride[ord]: 1..8. */
static int set_estride(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  if (v < 1 || v > 8) return nope(why, cap, "element_stride %llu must be in 1..8", v);
  t->elem_strides[ord] = (uint8_t)v;
  return 0;
}

/* .elemtype: the ISA's code, stored as the driver's, with its size. */
static int set_elemtype(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v > 12) return nope(why, cap, "elemtype %llu: the emulator takes 0..12 (not the sub-byte types)", v);
  t->dtype = (uint8_t)elemtypes[v];
  t->esize = (uint8_t)lpx_tma_dtype_size(t->dtype);
  return 0;
}

/* .interleave_layout: 0 none, 1 16B, 2 32B. */
static int set_interleave(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v > 2) return nope(why, cap, "interleave_layout %llu must be 0..2", v);
  t->interleave = (uint8_t)v;
  return 0;
}

/* .swizzle_mode: 0 none, 1 32B, 2 64B, 3 128B (16-byte atoms). */
static int set_swizzle(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v > 3) return nope(why, cap, "swizzle_mode %llu: the emulator takes 0..3 (not the sm_103a 96B swizzle)", v);
  t->swizzle = (uint8_t)v;
  return 0;
}

/* .swizzle_atomicity (sm_100a): not modelled apart from the swizzle mode. */
static int set_atomicity(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)t; (void)ord;
  return nope(why, cap, "swizzle_atomicity %llu: the emulator does not implement this field yet", v);
}

/* .fill_mode: 0 zeros, 1 OOB-NaN. */
static int set_fill(emu_tmap *t, uint32_t ord, uint64_t v, char *why, size_t cap)
{
  (void)ord;
  if (v > 1) return nope(why, cap, "fill_mode %llu must be 0 or 1", v);
  t->oob = (uint8_t)v;
  return 0;
}

/* Setters by TMFIELD value, and whether the field takes an ordinal. */
static const struct { tmap_set set; int ordinal; } fields[LPX_TMFIELD__END] = {
  [LPX_TMFIELD_GLOBAL_ADDRESS] = { set_address, 0 }, [LPX_TMFIELD_RANK] = { set_rank, 0 },
  [LPX_TMFIELD_BOX_DIM] = { set_box, 1 }, [LPX_TMFIELD_GLOBAL_DIM] = { set_dim, 1 },
  [LPX_TMFIELD_GLOBAL_STRIDE] = { set_stride, 1 }, [LPX_TMFIELD_ELEMENT_STRIDE] = { set_estride, 1 },
  [LPX_TMFIELD_ELEMTYPE] = { set_elemtype, 0 }, [LPX_TMFIELD_INTERLEAVE_LAYOUT] = { set_interleave, 0 },
  [LPX_TMFIELD_SWIZZLE_MODE] = { set_swizzle, 0 }, [LPX_TMFIELD_SWIZZLE_ATOMICITY] = { set_atomicity, 0 },
  [LPX_TMFIELD_FILL_MODE] = { set_fill, 0 },
};

/* Are the n bytes at p all zero (a map about to be built field by field)? */
static int all_zero(const uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++) if (p[i]) return 0;
  return 1;
}

/* One lane's edit of the map at addr: a map luaptx encoded, or 128 zero
 * bytes, which become a blank map (the hardware's fields start at zero). */
static int replace_lane(emu_warp *w, const emu_inst *in, int lane, int sp, uint64_t addr, uint32_t ord, uint64_t v)
{
  int f = in->mod[LPX_GB_TMFIELD];
  if (addr % 64) return lpx_emu_fail(w, in, lane, "tensormap.replace: the tensor map at 0x%llx is not 64-byte aligned",
                                     (unsigned long long)addr);
  uint8_t *p = lpx_emu_addr_span(w, in, lane, sp, addr, 128, 1);
  if (!p) return -1;
  emu_tmap t;
  memcpy(&t, p, sizeof t);
  if (t.magic != EMU_TMAP_MAGIC && all_zero(p, sizeof t)) t.magic = EMU_TMAP_MAGIC;
  if (t.magic != EMU_TMAP_MAGIC)
    return lpx_emu_fail(w, in, lane, "tensormap.replace: 0x%llx holds neither a tensor map luaptx built nor 128 zero bytes "
                        "(build a map field by field in zeroed memory, or copy one %s there first)", (unsigned long long)addr,
                        lpx_emu_spell(w, in, "from an X:tma_desc parameter", "from a tensor-map parameter"));
  char why[160];
  if (fields[f].set(&t, ord, v, why, sizeof why)) return lpx_emu_fail(w, in, lane, "tensormap.replace: %s", why);
  t.edited = 1;
  memcpy(p, &t, sizeof t);
  return 0;
}

/* tensormap.replace.tile.<field>{.space}.b1024.<type> [map], {ord,} new_val. */
static int op_replace(emu_warp *w, const emu_inst *in, uint32_t m)
{
  const emu_op *ao = EMU_OP(w, in, 0);
  int sp = lpx_emu_space(in), f = in->mod[LPX_GB_TMFIELD];
  if (ao->reg < 0 && ao->space != EMU_SP_GENERIC) sp = ao->space;
  const uint64_t *ord = fields[f].ordinal ? D(1) : NULL, *v = D(fields[f].ordinal ? 2 : 1);
  EMU_EACH(m, {
    uint64_t a = (ao->reg >= 0 ? EMU_R(w, ao->reg)[l] : 0) + (uint64_t)ao->off;
    uint64_t nv = in->type == LPX_T_B32 ? (uint32_t)v[l] : v[l];
    if (replace_lane(w, in, l, sp, a, ord ? (uint32_t)ord[l] : 0, nv)) return -1;
  });
  return 0;
}

/* The description a record holds (the inverse of lpx_emu_tmap_encode). */
static void tmap_desc(const emu_tmap *t, lpx_tma_desc *d)
{
  memset(d, 0, sizeof *d);
  d->rank = t->rank; d->dtype = t->dtype; d->global_address = t->address;
  d->interleave = t->interleave; d->swizzle = t->swizzle; d->oob_fill = t->oob; d->mode = t->mode;
  d->channels = t->channels; d->pixels = t->pixels;
  for (int i = 0; i < 5; i++) {
    d->dims[i] = t->dims[i]; d->box[i] = t->box[i]; d->elem_strides[i] = t->elem_strides[i];
    if (i < 4) d->strides[i] = t->strides[i];
    if (i < 3) { d->lower[i] = t->lower[i]; d->upper[i] = t->upper[i]; }
  }
}

/* Check an edited map about to be used as cuTensorMapEncode* checks a
 * description (every documented rule, lpx_tma_validate); 0 or -1. */
int lpx_emu_tmap_validate(emu_warp *w, const emu_inst *in, int lane, uint64_t at, const emu_tmap *t)
{
  lpx_tma_desc d;
  tmap_desc(t, &d);
  lpx_ctx *ctx = lpx_ctx_new();   /* its own: CTAs run on several host threads */
  if (!ctx) return lpx_emu_fail(w, in, lane, "out of host memory");
  char name[64];
  snprintf(name, sizeof name, "the tensor map at 0x%llx", (unsigned long long)at);
  int rc = lpx_tma_validate(ctx, name, &d) ? lpx_emu_fail(w, in, lane, "%s (a map tensormap.replace edited, checked as "
                                                          "cuTensorMapEncodeTiled would)", lpx_ctx_error(ctx)) : 0;
  lpx_ctx_free(ctx);
  return rc;
}

/* Address operand k of lane l; a symbol operand sets *sp to its own space. */
static uint64_t addr_of(emu_warp *w, const emu_inst *in, int k, int l, int *sp)
{
  const emu_op *o = EMU_OP(w, in, k);
  if (o->reg < 0 && o->space != EMU_SP_GENERIC) *sp = o->space;
  return (o->reg >= 0 ? EMU_R(w, o->reg)[l] : 0) + (uint64_t)o->off;
}

/* tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned
 * [dst], [src], 128: each thread copies the 128-byte map record, so a map
 * edited in shared memory becomes one TMA can read from global memory. The
 * emulator reads maps straight from memory: the release fence orders nothing. */
static int op_cp_fenceproxy(emu_warp *w, const emu_inst *in, uint32_t m)
{
  if (m != w->live)
    return lpx_emu_fail(w, in, -1, "tensormap.cp_fenceproxy (.sync.aligned) needs every thread of the warp converged "
                        "(active 0x%08x of 0x%08x)", m, w->live);
  EMU_EACH(m, {
    int ds = EMU_SP_GLOBAL, ss = EMU_SP_SHARED;
    uint64_t dst = addr_of(w, in, 0, l, &ds), src = addr_of(w, in, 1, l, &ss);
    if (dst % 64 || src % 64)
      return lpx_emu_fail(w, in, l, "tensormap.cp_fenceproxy: a tensor map is 64-byte aligned; dst 0x%llx, src 0x%llx",
                          (unsigned long long)dst, (unsigned long long)src);
    const uint8_t *from = lpx_emu_addr_span(w, in, l, ss, src, 128, 0);
    uint8_t *to = from ? lpx_emu_addr_span(w, in, l, ds, dst, 128, 1) : NULL;
    if (!to) return -1;
    memmove(to, from, 128);
  });
  return 0;
}

/* Handler for tensormap.replace (tile mode, a known field) and tensormap.cp_fenceproxy. */
emu_fn lpx_emu_pick_tmap(const emu_inst *in)
{
  int f = in->mod[LPX_GB_TMFIELD];
  if (in->op == LPX_OP_TMCPFENCE) return in->nops == 3 ? op_cp_fenceproxy : NULL;
  return in->mod[LPX_GB_TMMODE] && f > 0 && f < LPX_TMFIELD__END && fields[f].set ? op_replace : NULL;
}
