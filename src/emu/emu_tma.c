/* TMA tensor copies on the emulator: cp.async.bulk.tensor.{1..5}d in tile
 * and im2col mode and 2d in tile::gather4 / tile::scatter4 mode (four
 * rows of one column range), global -> shared::cluster (multicast too) completing
 * bytes on an mbarrier and shared::cta -> global in a bulk group; tensor
 * reductions into global memory (cp.reduce.async.bulk.tensor) and tensor
 * prefetches. The tensor map is the 128-byte emu_tmap the emu device's
 * tma_encode builds (emu_tmap.c). Elements outside the tensor read as zero (NaN
 * with oob_fill 1) and are not written back. Shared memory holds the box
 * row by row (a row: the elements along dimension 0, or one im2col pixel)
 * with the layouts measured on hardware: an unswizzled row takes its own
 * bytes, a swizzled one the whole swizzle span, and the swizzle permutes
 * address bits. Copies happen at once, a valid schedule of an
 * asynchronous copy. */
#include "emu.h"
#include "emu_prof.h"
#include "../lpx_tma.h"
#include <math.h>
#include <stdio.h>

_Static_assert(sizeof(emu_tmap) == 128, "emu_tmap is 128 bytes");

/* ------------------------------------------------------------- swizzles */

/* Swizzle modes (CUtensorMapSwizzle): X(mode, span bytes, log2 atom bytes,
 * 8-byte flip on odd 128-byte lines). */
#define TMA_SWIZZLES(X) \
  X(0, 0, 4, 0) X(1, 32, 4, 0) X(2, 64, 4, 0) X(3, 128, 4, 0) \
  X(4, 128, 5, 0) X(5, 128, 5, 1) X(6, 128, 6, 0)

typedef struct tma_swz { uint32_t span, atom_shift, flip; } tma_swz;
static const tma_swz swizzles[] = {
#define X(mode, span, shift, flip) { span, shift, flip },
  TMA_SWIZZLES(X)
#undef X
};

/* A shared byte address with a swizzle applied: the atom index inside each
 * 128-byte line XORs with the line number (and odd lines of the flip mode
 * swap the 8-byte halves of each 16 bytes). */
static uint64_t swizzle(uint64_t a, const tma_swz *s)
{
  if (!s->span) return a;
  uint64_t line = a >> 7, mask = (s->span >> s->atom_shift) - 1;
  return a ^ ((line & mask) << s->atom_shift) ^ (s->flip ? (line & 1) << 3 : 0);
}

/* ---------------------------------------------------------- tensor maps */

static const char *const field_names[] = { "rank", "dtype", "swizzle", "interleave", "oob_fill", "mode" };

/* The first field of a map that holds a value no tensor map can have, as
 * "name = value" in out; 0 when every field is usable. */
static int tmap_bad_field(const emu_tmap *t, char *out, size_t cap)
{
  int v[] = { t->rank, t->dtype, t->swizzle, t->interleave, t->oob, t->mode };
  int lo[] = { t->mode ? 3 : 1, 0, 0, 0, 0, 0 }, hi[] = { 5, 12, 6, 2, 1, 1 };
  for (int i = 0; i < 6; i++)
    if (v[i] < lo[i] || v[i] > hi[i]) return snprintf(out, cap, "%s = %d (valid %d..%d)", field_names[i], v[i], lo[i], hi[i]);
  if (t->esize != lpx_tma_dtype_size(t->dtype)) return snprintf(out, cap, "element size %u for dtype %d", t->esize, t->dtype);
  for (int d = 0; d < t->rank; d++) {
    if (!t->mode && (t->box[d] < 1 || t->box[d] > 256)) return snprintf(out, cap, "box_dim[%d] = %u (valid 1..256)", d, t->box[d]);
    if (t->elem_strides[d] < 1 || t->elem_strides[d] > 8)
      return snprintf(out, cap, "element_stride[%d] = %u (valid 1..8)", d, t->elem_strides[d]);
    if (!t->dims[d]) return snprintf(out, cap, "global_dim[%d] = 0", d);
  }
  if (t->mode && (t->channels < 1 || t->channels > 256)) return snprintf(out, cap, "channels per pixel = %u (valid 1..256)", t->channels);
  if (t->mode && (t->pixels < 1 || t->pixels > 1024)) return snprintf(out, cap, "pixels per column = %u (valid 1..1024)", t->pixels);
  return 0;
}

/* Check a map the lane is about to use: one luaptx built, every field usable. */
int lpx_emu_tmap_check(emu_warp *w, const emu_inst *in, int lane, uint64_t at, const emu_tmap *t)
{
  char why[128];
  if (t->magic != EMU_TMAP_MAGIC)
    return lpx_emu_fail(w, in, lane, "the tensor map at 0x%llx is not one luaptx built (pass it %s, or build it with "
                        "tensormap.replace in 128 zeroed bytes)", (unsigned long long)at,
                        lpx_emu_spell(w, in, "with X:tma_desc{...}", "as a parameter encoded by the device (dev:tma_encode)"));
  if (tmap_bad_field(t, why, sizeof why))
    return lpx_emu_fail(w, in, lane, "the tensor map at 0x%llx has %s (a tensormap.replace left it unusable?)",
                        (unsigned long long)at, why);
  return t->edited ? lpx_emu_tmap_validate(w, in, lane, at, t) : 0;
}

/* Read and check the tensor map whose generic address a lane holds (the
 * ISA has TMA read maps from .param, .const or .global through a generic
 * address: a parameter's own .param address faults on a GPU). */
static int load_map(emu_warp *w, const emu_inst *in, int lane, uint64_t a, emu_tmap *out)
{
  int sp = EMU_SP_GENERIC;
  if (a < w->cta->L->cfg.params_size)
    return lpx_emu_fail(w, in, lane, "the tensor map operand 0x%llx is a .param address, not a generic one (a GPU "
                        "faults: misaligned address); convert the parameter's address with cvta.param.u64 first",
                        (unsigned long long)a);
  if (a - EMU_SHARED_WINDOW < EMU_WINDOW_SIZE)
    return lpx_emu_fail(w, in, lane, "the tensor map at 0x%llx is in shared memory; TMA reads maps from .param, .const or "
                        ".global memory (copy it to global memory after tensormap.replace)", (unsigned long long)a);
  const uint8_t *p = lpx_emu_addr(w, in, lane, sp, a, 128, 0);
  if (!p) return -1;
  memcpy(out, p, sizeof *out);
  return lpx_emu_tmap_check(w, in, lane, a, out);
}

/* -------------------------------------------------------------- requests */

/* Operand positions of a tensor instruction: the bracket's map and
 * coordinates, the shared address, the barrier, the im2col offsets (a
 * vector) and the multicast mask; -1 where the form has none. rank: the
 * tensor's, ncoord: the coordinates listed (5 for gather4/scatter4). */
typedef struct tma_ops { int map, coord, smem, mbar, offs, mask, rank, ncoord; } tma_ops;

/* One lane's request: the map, where the box starts, and its shared layout. */
typedef struct tma_req {
  emu_tmap t;
  int64_t c[5];            /* coordinates (im2col: C, the filter base W H D, N; gather4: x, y0..y3) */
  int64_t off[3];          /* im2col offsets, W first */
  uint32_t n[5];           /* tile: elements per dimension */
  uint32_t n0, rows, s0;   /* elements per shared row, shared rows, dimension-0 stride */
  uint32_t pitch;          /* bytes from one shared row to the next */
  const tma_swz *sw;
  uint64_t base;           /* shared address of the box */
  int four;                /* tile::gather4 / tile::scatter4: row r is row c[1 + r] */
} tma_req;

/* Value of a register/constant operand k for a lane. */
static uint64_t val(emu_warp *w, const emu_inst *in, int k, int lane)
{
  return EMU_R(w, EMU_OP(w, in, k)->reg)[lane];
}

/* Address of ADDR operand k for a lane. */
static uint64_t addr_of(emu_warp *w, const emu_inst *in, int k, int lane)
{
  const emu_op *a = EMU_OP(w, in, k);
  return (a->reg >= 0 ? EMU_R(w, a->reg)[lane] : 0) + (uint64_t)a->off;
}

/* Locate the operands: a load ([dst], [map, {c}], [mbar]{, {offs}}{, mask}),
 * a store or reduction ([map, {c}], [src]) or a prefetch ([map, {c}]{, {offs}}). */
static int find_ops(emu_warp *w, const emu_inst *in, tma_ops *o)
{
  int kind = in->ext[0], load = kind == EMU_BULK_TLOAD, b = load ? 1 : 0;
  if (in->nops < b + 3 || EMU_OP(w, in, b)->kind != EO_VEC || EMU_OP(w, in, b + 2)->kind != EO_VEC)
    return lpx_emu_fail(w, in, -1, "TMA: expected a [tensor_map, {coordinates}] operand");
  o->map = b + 1;
  o->ncoord = EMU_OP(w, in, b + 2)->reg;
  o->rank = in->ext[3] ? 2 : o->ncoord;
  o->coord = b + 3;
  if (in->ext[3] && o->ncoord != 5)
    return lpx_emu_fail(w, in, -1, "TMA tile::gather4/scatter4: expected five coordinates {x, y0, y1, y2, y3}, got %d", o->ncoord);
  int next = b + 3 + o->ncoord;
  o->smem = load ? 0 : (kind == EMU_BULK_TPREFETCH ? -1 : next++);
  o->mbar = load ? next++ : -1;
  o->offs = -1;
  if (in->ext[2] && kind != EMU_BULK_TSTORE && kind != EMU_BULK_TREDUCE && next < in->nops) {
    if (EMU_OP(w, in, next)->kind != EO_VEC || EMU_OP(w, in, next)->reg != o->rank - 2)
      return lpx_emu_fail(w, in, -1, "TMA im2col: expected {im2col offsets} with %d value(s)", o->rank - 2);
    o->offs = next + 1;
    next += 1 + o->rank - 2;
  }
  o->mask = in->ext[1] ? next++ : -1;
  if (next > in->nops || (in->ext[2] && o->offs < 0 && (load || kind == EMU_BULK_TPREFETCH)))
    return lpx_emu_fail(w, in, -1, "TMA: missing the shared-memory, mbarrier, im2col-offset or mask operand");
  return 0;
}

/* The im2col offsets of a lane, each in the range the rank allows. */
static int read_offsets(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o, tma_req *q)
{
  static const uint64_t most[6] = { 0, 0, 0, 65535, 255, 31 };
  for (int s = 0; s + 2 < q->t.rank; s++) {
    uint64_t v = o->offs >= 0 ? val(w, in, o->offs + s, lane) : 0;
    if (v > most[q->t.rank])
      return lpx_emu_fail(w, in, lane, "im2col offset %d = %llu is outside 0..%llu for a %dD tensor", s,
                          (unsigned long long)v, (unsigned long long)most[q->t.rank], q->t.rank);
    q->off[s] = (int64_t)v;
  }
  return 0;
}

/* The filter base must lie inside the pixel box [lower, dim + upper) in
 * every spatial dimension (the ISA's rule for im2col coordinates). */
static int check_filter_base(emu_warp *w, const emu_inst *in, int lane, const tma_req *q)
{
  static const char *const dhw = "WHD";
  for (int s = 1; s + 1 < q->t.rank; s++) {
    int64_t lo = q->t.lower[s - 1], hi = (int64_t)q->t.dims[s] + q->t.upper[s - 1];
    if (q->c[s] < lo || q->c[s] >= hi)
      return lpx_emu_fail(w, in, lane, "im2col filter base %c = %lld lies outside the pixel box [%lld, %lld) of that dimension",
                          dhw[s - 1], (long long)q->c[s], (long long)lo, (long long)hi);
  }
  return 0;
}

/* Traversal stride of dimension d (dimension 0 strides only interleaved maps). */
static uint32_t stride_of(const emu_tmap *t, int d)
{
  return d == 0 && !t->interleave ? 1 : t->elem_strides[d];
}

/* The shape of a request in shared memory: rows, elements per row and the
 * row pitch. Layouts the ISA does not pin down fail instead of guessing. */
static int req_shape(emu_warp *w, const emu_inst *in, int lane, tma_req *q)
{
  const emu_tmap *t = &q->t;
  q->sw = &swizzles[t->swizzle];
  q->rows = 1;
  for (int d = 0; d < t->rank; d++) {
    q->n[d] = (t->box[d] + stride_of(t, d) - 1) / stride_of(t, d);
    if (d) q->rows *= q->n[d];
  }
  q->n0 = t->mode ? t->channels : q->n[0];
  q->s0 = t->mode ? 1 : stride_of(t, 0);
  if (t->mode) q->rows = t->pixels;
  if (q->four) q->n[1] = q->rows = 4;            /* four boxes of one row each, stacked like a 4-row box */
  uint32_t row = q->n0 * t->esize, slice = t->interleave == 2 ? 32 : 16;
  q->pitch = q->sw->span && !t->interleave ? q->sw->span : row;
  if (t->interleave && row % slice)
    return lpx_emu_fail(w, in, lane, "an interleaved box row of %u bytes is not a whole number of %u-byte slices; the "
                        "ISA does not give its shared-memory layout, so the emulator does not run it", row, slice);
  if (t->interleave && q->sw->span && row != q->sw->span)
    return lpx_emu_fail(w, in, lane, "an interleaved box row of %u bytes with a %u-byte swizzle: the ISA does not give "
                        "this shared-memory layout, so the emulator does not run it", row, q->sw->span);
  if (!t->interleave && q->sw->span && row > q->sw->span)
    return lpx_emu_fail(w, in, lane, "a box row of %u bytes is wider than the %u-byte swizzle span", row, q->sw->span);
  if (!q->sw->span && row % 16)
    return lpx_emu_fail(w, in, lane, "an unswizzled box row of %u bytes is not a multiple of 16 bytes; the ISA does not "
                        "give its shared-memory layout, so the emulator does not run it", row);
  return 0;
}

/* The map of a tile::gather4 / tile::scatter4 copy: its bounding boxes
 * are single rows (box size 1 in dimension 1) and it is not interleaved. */
static int check_four(emu_warp *w, const emu_inst *in, int lane, const emu_tmap *t)
{
  if (t->box[1] != 1)
    return lpx_emu_fail(w, in, lane, "tile::gather4/scatter4 moves four single rows: the tensor map's box must be 1 row "
                        "high (box = {1, %u}), not %u (PTX ISA: the bounding box size in dimension 1 must be one)",
                        (unsigned)t->box[0], (unsigned)t->box[1]);
  if (t->interleave)
    return lpx_emu_fail(w, in, lane, "tile::gather4/scatter4 does not take an interleaved tensor map (PTX ISA)");
  return 0;
}

/* Build a lane's request: map, coordinates, offsets and layout. For a
 * prefetch only the map and the coordinates are checked. */
static int req_make(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o, tma_req *q)
{
  if (load_map(w, in, lane, val(w, in, o->map, lane), &q->t)) return -1;
  const emu_tmap *t = &q->t;
  if (o->rank != t->rank) return lpx_emu_fail(w, in, lane, "a %dD TMA instruction with a %dD tensor map", o->rank, t->rank);
  if (in->ext[2] != t->mode)
    return lpx_emu_fail(w, in, lane, "%s-mode TMA instruction with a tensor map built for %s mode", in->ext[2] ? "an im2col" : "a tile",
                        t->mode ? "im2col (tma_desc{mode = \"im2col\"})" : "tile");
  q->four = in->ext[3];
  if (q->four && check_four(w, in, lane, t)) return -1;
  for (int d = 0; d < o->ncoord; d++) q->c[d] = (int32_t)val(w, in, o->coord + d, lane);
  memset(q->off, 0, sizeof q->off);
  if (t->mode && read_offsets(w, in, lane, o, q)) return -1;
  if (in->ext[0] == EMU_BULK_TPREFETCH) return 0;
  if (t->mode && check_filter_base(w, in, lane, q)) return -1;
  q->base = o->smem >= 0 ? addr_of(w, in, o->smem, lane) : 0;
  if (q->base % 128)   /* a swizzle follows the address bits: off a 1024-byte boundary it starts mid-pattern (the ISA's base offset) */
    return lpx_emu_fail(w, in, lane, "TMA shared-memory address 0x%llx is not 128-byte aligned", (unsigned long long)q->base);
  if (t->swizzle == 5 && in->ext[0] != EMU_BULK_TLOAD)
    return lpx_emu_fail(w, in, lane, "the 128B_atom_32B_flip_8B swizzle is for global -> shared copies only (PTX ISA)");
  return req_shape(w, in, lane, q);
}

/* ------------------------------------------------------------ traversal */

/* Where the current shared row lies: the coordinates of dimensions 1..4
 * (g) and the walk's position (k: tile indices, or the im2col filter base
 * and image). */
typedef struct tma_cur { int64_t g[5], k[5]; } tma_cur;

/* The coordinates of the cursor's row (gather4/scatter4: row k of dimension 1 is y_k). */
static void cur_place(const tma_req *q, tma_cur *u)
{
  int r = q->t.rank;
  for (int d = 1; d < r; d++)
    u->g[d] = q->t.mode ? u->k[d] + (d < r - 1 ? q->off[d - 1] : 0)
            : q->four ? q->c[1 + u->k[1]] : q->c[d] + u->k[d] * stride_of(&q->t, d);
}

/* The first row: the box corner, or the filter base the instruction names. */
static void cur_first(const tma_req *q, tma_cur *u)
{
  memset(u, 0, sizeof *u);
  for (int d = 1; d < q->t.rank; d++) u->k[d] = q->t.mode ? q->c[d] : 0;
  cur_place(q, u);
}

/* The next row. Tile: an odometer over the box. im2col: the filter base
 * steps by the traversal stride through the pixel box [lower, dim + upper),
 * W fastest; past the box's end it wraps to the lower corner and the next
 * dimension steps, and past D (or H, W) the next image. */
static void cur_next(const tma_req *q, tma_cur *u)
{
  const emu_tmap *t = &q->t;
  for (int d = 1; d < t->rank; d++) {
    if (!t->mode) {
      if (++u->k[d] < (int64_t)q->n[d]) break;
      u->k[d] = 0;
      continue;
    }
    if (d == t->rank - 1) { u->k[d]++; break; }
    u->k[d] += stride_of(t, d);
    if (u->k[d] < (int64_t)t->dims[d] + t->upper[d - 1]) break;
    u->k[d] = t->lower[d - 1];
  }
  cur_place(q, u);
}

/* What an element visit works with. */
typedef struct tma_io { uint8_t *sh; int op, type; uint64_t hi; } tma_io;
typedef int (*tma_fn)(emu_warp *w, const emu_inst *in, int lane, const tma_req *q, uint64_t so, uint64_t ga, int inside, tma_io *io);
/* A whole row r at global address ga (row_in: inside the tensor in
 * dimensions 1..4) in one step: 1 when done, 0 to visit its elements. */
typedef int (*tma_row_fn)(emu_warp *w, const tma_req *q, uint32_t r, uint64_t ga, int row_in, tma_io *io);

/* What a walk does: a row at once where it can (row, may be NULL), else
 * each element. */
typedef struct tma_visit { tma_row_fn row; tma_fn elem; } tma_visit;

/* The bytes a row starting at shared linear offset lin moves as one piece:
 * a swizzle moves whole 16-byte units unless it flips 8-byte halves, so a
 * 16-byte-aligned row goes over in units; else element by element. */
static uint32_t row_unit(const tma_req *q, uint64_t lin)
{
  uint64_t n = (uint64_t)q->n0 * q->t.esize;
  return (!q->sw->span || (!q->sw->flip && q->sw->atom_shift >= 4)) && !(lin & 15) && !(n & 15) ? 16 : q->t.esize;
}

/* How far into shared memory row r reaches (every row is measured whole). */
static int measure_row(emu_warp *w, const tma_req *q, uint32_t r, uint64_t ga, int row_in, tma_io *io)
{
  (void)w; (void)ga; (void)row_in;
  uint64_t lin = q->base + (uint64_t)r * q->pitch, n = (uint64_t)q->n0 * q->t.esize;
  uint32_t unit = row_unit(q, lin);
  for (uint64_t b = 0; b < n; b += unit, lin += unit) {
    uint64_t end = swizzle(lin, q->sw) - q->base + unit;
    if (end > io->hi) io->hi = end;
  }
  return 1;
}

/* Load row r of a request whose n0 elements are consecutive in global
 * memory (stride 1), all inside the tensor, aligned, and in one
 * allocation: one check for the row, then a copy per element to its
 * swizzled place. 0 when it does not apply (walk then visits each element,
 * which reports what is wrong). */
static int load_row(emu_warp *w, const tma_req *q, uint32_t r, uint64_t ga, int row_in, tma_io *io)
{
  const emu_tmap *t = &q->t;
  uint64_t g = ga + (uint64_t)q->c[0] * t->esize, n = (uint64_t)q->n0 * t->esize;
  uintptr_t delta;
  if (!row_in || q->s0 != 1 || q->c[0] < 0 || q->c[0] + (int64_t)q->n0 > (int64_t)t->dims[0] || (g & (t->esize - 1)) ||
      !lpx_emu_global_range(w, g, n, &delta)) return 0;
  const uint8_t *src = (const uint8_t *)(delta + (uintptr_t)g);
  uint64_t lin = q->base + (uint64_t)r * q->pitch;
  uint32_t unit = row_unit(q, lin);
  for (uint64_t b = 0; b < n; b += unit, lin += unit) memcpy(io->sh + (swizzle(lin, q->sw) - q->base), src + b, unit);
  return 1;
}

/* Visit every element of a request in shared order with its shared offset
 * from the box start (swizzled), its global address and whether it lies
 * inside the tensor. */
static int walk(emu_warp *w, const emu_inst *in, int lane, const tma_req *q, const tma_visit *v, tma_io *io)
{
  const emu_tmap *t = &q->t;
  tma_cur u;
  cur_first(q, &u);
  for (uint32_t r = 0; r < q->rows; r++, cur_next(q, &u)) {
    int row_in = 1;
    uint64_t ga = t->address;
    for (int d = 1; d < t->rank; d++) {
      if (u.g[d] < 0 || u.g[d] >= (int64_t)t->dims[d]) row_in = 0;
      ga += (uint64_t)u.g[d] * t->strides[d - 1];
    }
    if (v->row && v->row(w, q, r, ga, row_in, io)) continue;
    for (uint32_t j = 0; j < q->n0; j++) {
      int64_t g0 = q->c[0] + (int64_t)j * q->s0;
      int inside = row_in && g0 >= 0 && g0 < (int64_t)t->dims[0];
      uint64_t lin = q->base + (uint64_t)r * q->pitch + (uint64_t)j * t->esize;
      if (v->elem(w, in, lane, q, swizzle(lin, q->sw) - q->base, ga + (uint64_t)g0 * t->esize, inside, io)) return -1;
    }
  }
  return 0;
}

/* Fill one element with the out-of-bounds value (zero, or NaN for floats). */
static void oob_fill(uint8_t *dst, const emu_tmap *t)
{
  memset(dst, 0, t->esize);
  if (!t->oob) return;
  if (t->esize == 4) { float f = NAN; memcpy(dst, &f, 4); }
  else if (t->esize == 8) { double f = NAN; memcpy(dst, &f, 8); }
  else if (t->esize == 2) { uint16_t h = t->dtype == 9 ? 0x7fc0 : 0x7e00; memcpy(dst, &h, 2); }
}

/* global -> shared: copy one element, or fill it when outside the tensor. */
static int el_load(emu_warp *w, const emu_inst *in, int lane, const tma_req *q, uint64_t so, uint64_t ga, int inside, tma_io *io)
{
  uint8_t *s = io->sh + so;
  if (!inside) { oob_fill(s, &q->t); return 0; }
  const uint8_t *g = lpx_emu_addr(w, in, lane, EMU_SP_GLOBAL, ga, q->t.esize, 0);
  if (!g) return -1;
  memcpy(s, g, q->t.esize);
  return 0;
}

/* shared -> global: write back one element inside the tensor. */
static int el_store(emu_warp *w, const emu_inst *in, int lane, const tma_req *q, uint64_t so, uint64_t ga, int inside, tma_io *io)
{
  if (!inside) return 0;
  uint8_t *g = lpx_emu_addr(w, in, lane, EMU_SP_GLOBAL, ga, q->t.esize, 1);
  if (!g) return -1;
  memcpy(g, io->sh + so, q->t.esize);
  return 0;
}

/* shared -> global reduction of one element inside the tensor (atomically:
 * CTAs on other host threads may reduce into the same element). */
static int el_reduce(emu_warp *w, const emu_inst *in, int lane, const tma_req *q, uint64_t so, uint64_t ga, int inside, tma_io *io)
{
  if (!inside) return 0;
  uint8_t *g = lpx_emu_addr(w, in, lane, EMU_SP_GLOBAL, ga, q->t.esize, 2);
  if (!g) return -1;
  lpx_emu_reduce_elem(io->op, io->type, g, io->sh + so, 1);
  return 0;
}

/* The walks: measuring takes every row whole, loading where it can. */
static const tma_visit MEASURE = { measure_row, NULL }, LOAD = { load_row, el_load },
                       STORE = { NULL, el_store }, REDUCE = { NULL, el_reduce };

/* Bytes of shared memory a request spans from its base (rows may be padded
 * to the swizzle span, and the swizzle moves chunks within a line). */
static uint64_t req_extent(emu_warp *w, const emu_inst *in, int lane, const tma_req *q)
{
  tma_io io = { NULL, 0, 0, 0 };
  walk(w, in, lane, q, &MEASURE, &io);
  return io.hi;
}

/* ----------------------------------------------------------------- copies */

/* Remember that a TMA load wrote [lo, hi) of shared memory with a swizzle
 * span (older overlapping ranges are dropped; the oldest goes when full). */
static void note_region(emu_cta *c, const emu_inst *in, uint64_t lo, uint64_t hi, uint32_t span)
{
  int n = 0;
  for (int i = 0; i < c->ntma_rgn; i++)
    if (c->tma_rgn[i].hi <= lo || c->tma_rgn[i].lo >= hi) c->tma_rgn[n++] = c->tma_rgn[i];
  if (n == 16) { memmove(&c->tma_rgn[0], &c->tma_rgn[1], 15 * sizeof c->tma_rgn[0]); n = 15; }
  c->tma_rgn[n].lo = lo; c->tma_rgn[n].hi = hi; c->tma_rgn[n].span = span; c->tma_rgn[n].in = in;
  c->ntma_rgn = n + 1;
}

/* The swizzle span a TMA load wrote the shared byte addr with: 1 and
 * *span, *by when a recorded range holds it, else 0. */
int lpx_emu_tma_swizzle_at(emu_cta *c, uint64_t addr, uint32_t *span, const emu_inst **by)
{
  for (int i = c->ntma_rgn - 1; i >= 0; i--)
    if (addr >= c->tma_rgn[i].lo && addr < c->tma_rgn[i].hi) { *span = c->tma_rgn[i].span; *by = c->tma_rgn[i].in; return 1; }
  return 0;
}

/* Bytes a request moves: what its mbarrier transaction counts. */
static uint64_t req_bytes(const tma_req *q)
{
  return (uint64_t)q->rows * q->n0 * q->t.esize;
}

/* Load the box into the shared memory of the CTA at cluster rank r (the
 * lane's own with r < 0), at the CTA-relative base. */
static int load_into(emu_warp *w, const emu_inst *in, int lane, tma_req *q, int r, uint64_t extent)
{
  uint64_t at = r < 0 ? q->base : ((uint64_t)(r + 1) << 24) | q->base;
  tma_io io = { lpx_emu_addr_span(w, in, lane, EMU_SP_SHARED, at, extent, 1), 0, 0, 0 };
  if (!io.sh || walk(w, in, lane, q, &LOAD, &io)) return -1;
  emu_cta *dst = r < 0 ? w->cta : &w->cta->group[r];
  if (dst != w->cta && dst->race_w)               /* written before the barrier completes: an older epoch */
    for (uint64_t i = q->base; i < q->base + extent; i++) { dst->race_w[i] = ((dst->epoch - 1) << 8) | 0xff; dst->pdirty[i] = 0; }
  note_region(dst, in, q->base, q->base + extent, q->sw->span);
  return 0;
}

/* A multicast load: the box lands at the same CTA-relative offset in every
 * CTA of the cluster in the 16-bit mask and completes its bytes on the
 * barrier at the same offset in each. */
static int multicast(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o, tma_req *q, uint64_t extent)
{
  emu_cta *me = w->cta;
  uint32_t mask = (uint32_t)val(w, in, o->mask, lane) & 0xffff;
  uint64_t moff = addr_of(w, in, o->mbar, lane);
  q->base &= 0xffffff;
  for (int r = 0; mask; r++, mask >>= 1) {
    if (!(mask & 1)) continue;
    if (r >= me->group_size)
      return lpx_emu_fail(w, in, lane, "multicast mask names CTA rank %d; the cluster has %d CTA(s)", r, me->group_size);
    lpx_emu_prof_add(w, EMU_PC_TMA_BYTES, req_bytes(q));
    if (load_into(w, in, lane, q, r, extent) || lpx_emu_mbar_complete_rank(w, in, lane, r, moff, (int64_t)req_bytes(q))) return -1;
  }
  return 0;
}

/* One lane's tensor load (global -> shared, completing on the barrier). */
static int tensor_load(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o)
{
  tma_req q;
  if (req_make(w, in, lane, o, &q)) return -1;
  uint64_t extent = req_extent(w, in, lane, &q);
  if (in->ext[1]) return multicast(w, in, lane, o, &q, extent);
  if (load_into(w, in, lane, &q, -1, extent)) return -1;
  lpx_emu_prof_add(w, EMU_PC_TMA_BYTES, req_bytes(&q));
  return lpx_emu_mbar_complete(w, in, o->mbar, lane, (int64_t)req_bytes(&q));
}

/* Reduction types of tensor elements by CUtensorMapDataType: the PTX type
 * the ISA's table names for them, or -1 (f64, tf32 and the ftz variants
 * have no tensor reduction). */
static const int16_t reduce_type[13] = {
  LPX_T_U8, LPX_T_U16, LPX_T_U32, LPX_T_S32, LPX_T_U64, LPX_T_S64, LPX_T_F16, LPX_T_F32, -1, LPX_T_BF16, -1, -1, -1
};

/* The PTX type a tensor reduction of op works on, or -1 with the error set. */
static int tensor_reduce_type(emu_warp *w, const emu_inst *in, int lane, const emu_tmap *t, int op)
{
  static const char *const ops[] = { "?", "add", "min", "max", "and", "or", "xor", "inc", "dec" };
  int type = reduce_type[t->dtype];
  if (op >= 4 && op <= 6 && (type == LPX_T_U32 || type == LPX_T_S32)) type = LPX_T_B32;
  if (op >= 4 && op <= 6 && (type == LPX_T_U64 || type == LPX_T_S64)) type = LPX_T_B64;
  if (type >= 0 && op >= 1 && op <= 8 && lpx_emu_reduce_type_ok(op, type)) return type;
  return lpx_emu_fail(w, in, lane, "cp.reduce.async.bulk.tensor .%s does not reduce tensors of dtype %d (%d-byte elements); "
                      "the ISA allows .add on u32 s32 u64 f32 f16 bf16, .min/.max on u32 s32 u64 s64 f16 bf16, "
                      ".inc/.dec on u32, .and/.or/.xor on 32/64-bit integers", op >= 1 && op <= 8 ? ops[op] : "?",
                      t->dtype, t->esize);
}

/* One lane's tensor store or reduction (shared -> global, bulk group). */
static int tensor_store(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o)
{
  tma_req q;
  if (req_make(w, in, lane, o, &q)) return -1;
  int reduce = in->ext[0] == EMU_BULK_TREDUCE, op = in->mod[LPX_GB_ATOMOP];
  tma_io io = { NULL, op, 0, 0 };
  if (reduce && (io.type = tensor_reduce_type(w, in, lane, &q.t, op)) < 0) return -1;
  uint64_t extent = req_extent(w, in, lane, &q);
  if (lpx_emu_proxy_check(w, in, lane, q.base, (uint32_t)extent, reduce ? "this TMA reduction" : "this TMA store")) return -1;
  io.sh = lpx_emu_addr_span(w, in, lane, EMU_SP_SHARED, q.base, extent, 0);
  lpx_emu_prof_add(w, EMU_PC_TMA_BYTES, req_bytes(&q));
  return io.sh ? walk(w, in, lane, &q, reduce ? &REDUCE : &STORE, &io) : -1;
}

/* One lane's tensor prefetch: a hint with no effect here. The map and the
 * coordinates are checked; a box outside the tensor is not an error. */
static int tensor_prefetch(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o)
{
  tma_req q;
  return req_make(w, in, lane, o, &q);
}

/* ------------------------------------------------------ the async proxy */

/* fence.proxy.async: the generic-proxy writes that happen before it
 * become visible to the async proxy: this warp's own, and every warp's
 * made before a barrier that completed since (the memory model asks for
 * the fence on the causality path from the write to the async read, not
 * in the writing thread: Triton fences after its bar.sync). */
static int op_proxy_fence(emu_warp *w, const emu_inst *in, uint32_t m)
{
  (void)in; (void)m;
  emu_cta *c = w->cta;
  if (!c->pdirty) return 0;
  uint32_t me = w->id + 1, epoch = c->epoch;
  for (uint32_t i = 0; i < c->shared_size; i++)
    if (c->pdirty[i] && ((c->race_w[i] & 0xff) == me || (c->race_w[i] >> 8) < epoch)) c->pdirty[i] = 0;
  return 0;
}

/* fence.proxy.async (any space) here; NULL for every other fence (tensormap
 * ones included: maps are read straight from memory), which the decoder
 * hands to the control family. */
emu_fn lpx_emu_pick_proxy_fence(const emu_inst *in)
{
  return in->mod[LPX_GB_PROXYK] == LPX_PROXYK_ASYNC ? op_proxy_fence : NULL;
}

/* ------------------------------------------------------------- handlers */

typedef int (*tma_lane_fn)(emu_warp *w, const emu_inst *in, int lane, const tma_ops *o);

/* Per-lane work of each tensor form, by EMU_BULK_* kind. */
static const tma_lane_fn lane_work[] = {
  [EMU_BULK_TLOAD] = tensor_load, [EMU_BULK_TSTORE] = tensor_store,
  [EMU_BULK_TREDUCE] = tensor_store, [EMU_BULK_TPREFETCH] = tensor_prefetch,
};

/* A tensor instruction: each active lane issues its own request. */
static int op_tensor(emu_warp *w, const emu_inst *in, uint32_t m)
{
  tma_ops o;
  if (find_ops(w, in, &o)) return -1;
  tma_lane_fn fn = lane_work[in->ext[0]];
  EMU_EACH(m, { if (fn(w, in, l, &o)) return -1; });
  return 0;
}

/* Handler for the TMA tensor forms lpx_emu_decode_bulk classified. */
emu_fn lpx_emu_pick_tma(const emu_inst *in)
{
  int k = in->ext[0];
  return k < (int)(sizeof lane_work / sizeof lane_work[0]) && lane_work[k] ? op_tensor : NULL;
}
