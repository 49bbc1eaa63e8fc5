/* The matrix families' tables expanded into data (matrix types, mma.sync
 * shapes and input families, wgmma families, tcgen05 ld/st shapes) and
 * the form rules the validator and the emulator's decoder share, so a
 * form either consumer takes is one the table lists. */
#include "lpx_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ----------------------------------------------------------- the tables */

typedef struct mtype_desc { const char *name; int bits; } mtype_desc;
static const mtype_desc mtypes[LPX_MT__END] = {
  [LPX_MT__NONE] = { "?", 0 },
#define X(id, spell, bits) [LPX_MT_##id] = { spell, bits },
  LPX_MTYPES(X)
#undef X
};

static const lpx_mma_family mma_families[] = {
#define X(fam, inputs, accs, same) { LPX_MT_##fam, inputs, accs, same },
  LPX_MMA_FAMILIES(X)
#undef X
};

static const lpx_mma_shape mma_shapes[] = {
#define X(m, n, k, fam, na, nb, nacc, sm, ptx) { m, n, k, LPX_MT_##fam, na, nb, nacc, sm, ptx },
  LPX_MMA_SHAPES(X)
#undef X
};

static const lpx_wgmma_family wg_families[] = {
#define X(fam, inputs, k, accs, mixed, scale, trans, n16, sat, popc, spsel, mptx) \
  { LPX_MT_##fam, inputs, k, accs, mixed, scale, trans, n16, sat, popc, spsel, mptx },
  LPX_WGMMA_FAMILIES(X)
#undef X
};

static const uint8_t tc_regs[LPX_TCSHAPE__END] = {
#define X(shape, regs) [LPX_TCSHAPE_##shape] = regs,
  LPX_TC_SHAPES(X)
#undef X
};

#define COUNT(a) ((int32_t)(sizeof (a) / sizeof (a)[0]))

/* ------------------------------------------------------------- lookups */

/* Number of matrix types (ids run from 1). */
int32_t lpx_mtype_count(void) { return LPX_MT__END - 1; }

/* Spelling of a matrix type, or NULL. */
const char *lpx_mtype_name(int32_t mt) { return mt > 0 && mt < LPX_MT__END ? mtypes[mt].name : NULL; }

/* Element width in bits of a matrix type (0 for none). */
int32_t lpx_mtype_bits(int32_t mt) { return mt > 0 && mt < LPX_MT__END ? mtypes[mt].bits : 0; }

/* The matrix type of a spelling (n chars), or 0. */
int lpx_mtype_find(const char *tok, size_t n)
{
  for (int mt = 1; mt < LPX_MT__END; mt++)
    if (strlen(mtypes[mt].name) == n && memcmp(mtypes[mt].name, tok, n) == 0) return mt;
  return 0;
}

/* Row i of the mma.sync shapes, or NULL past the end. */
const lpx_mma_shape *lpx_mma_shape_at(int32_t i) { return i >= 0 && i < COUNT(mma_shapes) ? &mma_shapes[i] : NULL; }

/* Row i of the mma.sync input families, or NULL past the end. */
const lpx_mma_family *lpx_mma_family_at(int32_t i) { return i >= 0 && i < COUNT(mma_families) ? &mma_families[i] : NULL; }

/* Row i of the wgmma input families, or NULL past the end. */
const lpx_wgmma_family *lpx_wgmma_family_at(int32_t i) { return i >= 0 && i < COUNT(wg_families) ? &wg_families[i] : NULL; }

/* 32-bit registers per thread per .x1 of a tcgen05.ld/st shape (a TCSHAPE value), or 0. */
int32_t lpx_tc_shape_regs(int32_t shape) { return shape > 0 && shape < LPX_TCSHAPE__END ? tc_regs[shape] : 0; }

/* The mma.sync family of an A/B matrix type, or NULL. */
const lpx_mma_family *lpx_mma_family_of(int mt)
{
  for (int i = 0; mt > 0 && i < COUNT(mma_families); i++)
    if (mma_families[i].inputs >> mt & 1) return &mma_families[i];
  return NULL;
}

/* The mma.sync shape row of (m, n, k) for a family, or NULL. */
const lpx_mma_shape *lpx_mma_shape_find(int m, int n, int k, int family)
{
  for (int i = 0; i < COUNT(mma_shapes); i++) {
    const lpx_mma_shape *s = &mma_shapes[i];
    if (s->m == m && s->n == n && s->k == k && s->family == family) return s;
  }
  return NULL;
}

/* The wgmma family of an A/B matrix type, or NULL. */
const lpx_wgmma_family *lpx_wgmma_family_of(int mt)
{
  for (int i = 0; mt > 0 && i < COUNT(wg_families); i++)
    if (wg_families[i].inputs >> mt & 1) return &wg_families[i];
  return NULL;
}

/* Write ".f32 or .f16" for a set of matrix types (table order). */
static void mtype_list(uint32_t set, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int mt = 1; mt < LPX_MT__END && n + 1 < cap; mt++)
    if (set >> mt & 1) n += (size_t)snprintf(out + n, cap - n, "%s.%s", n ? " or " : "", mtypes[mt].name);
}

/* ----------------------------------------------------------- form rules */

/* Fail a shared form rule: the reason into why (when given), -1. */
__attribute__((format(printf, 3, 4)))
static int why_fail(char *why, size_t cap, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (why && cap) vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return -1;
}

/* Are the accumulator types of an mma form ones its family takes? */
static int mma_accs(const lpx_form_info *fi, const lpx_mma_family *fa, char *why, size_t cap)
{
  char want[64];
  const char *an = mtypes[fi->atype].name;
  mtype_list(fa->accumulators, want, sizeof want);
  if (!(fa->accumulators >> fi->dtype & 1))
    return why_fail(why, cap, ".%s inputs accumulate in %s, not .%s", an, want, mtypes[fi->dtype].name);
  if (!(fa->accumulators >> fi->ctype & 1))
    return why_fail(why, cap, ".%s inputs accumulate in %s, not .%s", an, want, mtypes[fi->ctype].name);
  if (fa->same_acc && fi->dtype != fi->ctype)
    return why_fail(why, cap, ".e4m3/.e5m2 mma.sync takes D and C of one type (.f32.f32 or .f16.f16), not .%s and .%s",
                    mtypes[fi->dtype].name, mtypes[fi->ctype].name);
  return 0;
}

/* Is an mma.sync form one of the table's (four types, an A/B pair of one
 * family, a shape of that family, .row.col, the family's accumulators)?
 * 0 if so, else -1 with the reason in why. */
int lpx_mma_form_check(const lpx_form_info *fi, char *why, size_t cap)
{
  char shape[48];
  if (fi->nmtypes != 4)
    return why_fail(why, cap, "mma.sync needs four types .dtype.atype.btype.ctype (e.g. .f32.bf16.bf16.f32)");
  const lpx_mma_family *fa = lpx_mma_family_of(fi->atype), *fb = lpx_mma_family_of(fi->btype);
  if (!fa || fa != fb)
    return why_fail(why, cap, ".%s and .%s are not a valid A/B type pair", mtypes[fi->atype].name, mtypes[fi->btype].name);
  const lpx_mma_shape *s = lpx_mma_shape_find(fi->shape_m, fi->shape_n, fi->shape_k, fa->family);
  if (fi->shape_m) snprintf(shape, sizeof shape, "m%dn%dk%d", fi->shape_m, fi->shape_n, fi->shape_k);
  else snprintf(shape, sizeof shape, "(none)");
  if (!s) {
    char valid[160];
    size_t n = 0;
    valid[0] = '\0';
    for (int i = 0; i < COUNT(mma_shapes) && n + 1 < sizeof valid; i++)
      if (mma_shapes[i].family == fa->family)
        n += (size_t)snprintf(valid + n, sizeof valid - n, " .m%dn%dk%d", mma_shapes[i].m, mma_shapes[i].n, mma_shapes[i].k);
    return why_fail(why, cap, "mma.sync has no shape .%s for .%s inputs; valid:%s", shape, mtypes[fi->atype].name, valid);
  }
  int row_col = fi->alayout == LPX_ALAYOUT_ROW && fi->blayout == LPX_BLAYOUT_COL;
  if (!fi->alayout || !fi->blayout || (s->acc_regs && !row_col))
    return why_fail(why, cap, "mma.sync.%s takes the layouts .row.col", shape);
  return mma_accs(fi, fa, why, cap);
}

/* The parts of a wgmma form beyond its family: .satfinite, the .and.popc
 * operation (2 when both words), and anything no wgmma form spells. */
static void wg_words(const lpx_form *fo, int *sat, int *and_popc, int *other)
{
  const uint8_t *s = fo->modsel;
  *sat = s[LPX_GB_SAT] == LPX_SAT_SATFINITE;
  *and_popc = (s[LPX_GB_BOOL] == LPX_BOOL_AND) + (s[LPX_GB_BARRED] == LPX_BARRED_POPC);
  *other = fo->info.nmtypes != 3 || s[LPX_GB_SAT] == LPX_SAT_SAT ||
           (s[LPX_GB_BOOL] && s[LPX_GB_BOOL] != LPX_BOOL_AND);
}

/* Fail for a wgmma shape: the one the family takes and the valid N. */
static int wg_shape_fail(const lpx_form_info *fi, const lpx_wgmma_family *fam, unsigned want_k, char *why, size_t cap)
{
  char got[48];
  if (fi->shape_m) snprintf(got, sizeof got, ".m%dn%dk%d", fi->shape_m, fi->shape_n, fi->shape_k);
  else snprintf(got, sizeof got, "no shape");
  return why_fail(why, cap, ".%s%s wgmma takes the shape .m64nNk%u with N = %s; got %s", mtypes[fi->atype].name,
                  fi->sparse ? " sparse (.sp)" : "", want_k,
                  fam->n16 ? "8, 16, 24, 32, then a multiple of 16 up to 256" : "8..256 in steps of 8", got);
}

/* Is a wgmma.mma_async form one of the ISA's list (family, shape with the
 * family's K and N steps, the family's accumulators, .satfinite,
 * .and.popc, .sp)? 0 or -1 with the reason (and what is valid) in why.
 * The PTX versions some forms need are the validator's (lpx_validate.c). */
int lpx_wgmma_form_check(const lpx_form *fo, char *why, size_t cap)
{
  const lpx_form_info *fi = &fo->info;
  unsigned n = (unsigned)fi->shape_n, k = (unsigned)fi->shape_k;
  char want[64];
  int sat, and_popc, other;
  wg_words(fo, &sat, &and_popc, &other);
  const lpx_wgmma_family *fam = lpx_wgmma_family_of(fi->atype);
  if (other || !fam || lpx_wgmma_family_of(fi->btype) != fam || (!fam->mixed && fi->atype != fi->btype))
    return why_fail(why, cap, "wgmma.mma_async takes .dtype.atype.btype with A/B .f16 .bf16 .tf32 (equal), "
                    ".e4m3/.e5m2 or .s8/.u8 (any pair), or .s32.b1.b1.and.popc; got .%s.%s",
                    fi->atype ? mtypes[fi->atype].name : "?", fi->btype ? mtypes[fi->btype].name : "?");
  const char *an = mtypes[fi->atype].name;
  if (fi->sparse && fam->sparse_sel < 0)
    return why_fail(why, cap, ".%s wgmma has no sparse (.sp) form; sparse wgmma takes .f16 .bf16 .tf32 .e4m3/.e5m2 .s8/.u8", an);
  unsigned want_k = (unsigned)fam->k << (fi->sparse ? 1 : 0);
  if (fi->shape_m != 64 || k != want_k || n < 8 || n > 256 || n % 8 || (fam->n16 && n > 32 && n % 16))
    return wg_shape_fail(fi, fam, want_k, why, cap);
  mtype_list(fam->accumulators, want, sizeof want);
  if (!(fam->accumulators >> fi->dtype & 1))
    return why_fail(why, cap, ".%s inputs accumulate in %s, not .%s", an, want, mtypes[fi->dtype].name);
  if (sat && !fam->satfinite) return why_fail(why, cap, ".satfinite applies to .s8/.u8 wgmma only, not .%s", an);
  if ((and_popc == 2) != fam->popc)
    return why_fail(why, cap, ".b1 wgmma takes the operation .and.popc (and only it takes one)");
  return 0;
}
