/* The rules of ISA rows beyond their table columns, what ptxas accepts
 * and the columns cannot say, checked after the signature so that
 * messages name the operand: the video instructions' operand selectors
 * and negation, cvt.pack, madc/dp2a, lop3 with a predicate, createpolicy,
 * applypriority/discard, alloca, isspacep, getctarank, pmevent, the
 * barrier numbers of bar/barrier and the 16x2 integer forms (lpx_rules.h). */
#include "lpx_rules.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ row classes */

enum { VK_NONE, VK_SCALAR, VK_SIMD2, VK_SIMD4 };

/* The class of each video row (0: not a video row). */
static const uint8_t vkind[LPX_OP__COUNT] = {
  [LPX_OP_VADD] = VK_SCALAR, [LPX_OP_VSUB] = VK_SCALAR, [LPX_OP_VABSDIFF] = VK_SCALAR,
  [LPX_OP_VMIN] = VK_SCALAR, [LPX_OP_VMAX] = VK_SCALAR, [LPX_OP_VSHL] = VK_SCALAR,
  [LPX_OP_VSHR] = VK_SCALAR, [LPX_OP_VMAD] = VK_SCALAR, [LPX_OP_VSET] = VK_SCALAR,
  [LPX_OP_VADD2] = VK_SIMD2, [LPX_OP_VSUB2] = VK_SIMD2, [LPX_OP_VAVRG2] = VK_SIMD2,
  [LPX_OP_VABSDIFF2] = VK_SIMD2, [LPX_OP_VMIN2] = VK_SIMD2, [LPX_OP_VMAX2] = VK_SIMD2,
  [LPX_OP_VSET2] = VK_SIMD2,
  [LPX_OP_VADD4] = VK_SIMD4, [LPX_OP_VSUB4] = VK_SIMD4, [LPX_OP_VAVRG4] = VK_SIMD4,
  [LPX_OP_VABSDIFF4] = VK_SIMD4, [LPX_OP_VMIN4] = VK_SIMD4, [LPX_OP_VMAX4] = VK_SIMD4,
  [LPX_OP_VSET4] = VK_SIMD4,
};

/* Is the row one of the video instructions? */
int lpx_rules_video_row(int op) { return op >= 0 && op < LPX_OP__COUNT && vkind[op] != VK_NONE; }

/* Elements a video row works on: 1 (scalar), 2 or 4 (SIMD); 0 for other rows. */
int lpx_rules_video_lanes(int op)
{
  static const uint8_t lanes[] = { [VK_NONE] = 0, [VK_SCALAR] = 1, [VK_SIMD2] = 2, [VK_SIMD4] = 4 };
  return lpx_rules_video_row(op) ? lanes[vkind[op]] : 0;
}

/* ------------------------------------------------------------- selectors */

/* The selector a spelling names ("b0", ".h10", "b3210"), or 0: a b or h,
 * then 1 to 4 digits 0-7. Which ones an operand may carry is a rule. */
int64_t lpx_rules_selector(const char *text)
{
  if (!text) return 0;
  if (*text == '.') text++;
  size_t n = strlen(text);
  if (n < 2 || n > 5 || (text[0] != 'b' && text[0] != 'h')) return 0;
  int64_t sel = (int64_t)(n - 1) | (text[0] == 'h' ? 8 : 0);
  for (size_t k = 1; k < n; k++) {
    if (text[k] < '0' || text[k] > '7') return 0;
    sel |= (int64_t)(text[k] - '0') << (4 * k);
  }
  return sel;
}

/* Write ".b0" / ".h10" for a selector (nothing for 0) into out. */
void lpx_rules_sel_text(int64_t sel, char *out, size_t cap)
{
  size_t n = 0;
  if (cap == 0) return;
  if (sel && cap > 7) {
    out[n++] = '.';
    out[n++] = LPX_SEL_HALF(sel) ? 'h' : 'b';
    for (int k = 0; k < LPX_SEL_COUNT(sel); k++) out[n++] = (char)('0' + LPX_SEL_DIGIT(sel, k));
  }
  out[n] = '\0';
}

/* Do the digits of a selector fall in 0..hi, strictly descending when desc? */
static int digits_ok(int64_t sel, int hi, int desc)
{
  for (int k = 0; k < LPX_SEL_COUNT(sel); k++) {
    int d = LPX_SEL_DIGIT(sel, k);
    if (d > hi || (desc && k && d >= LPX_SEL_DIGIT(sel, k - 1))) return 0;
  }
  return 1;
}

/* Is sel valid on a scalar video operand: .b0-.b3 or .h0/.h1? */
static int scalar_sel_ok(int64_t sel)
{
  return LPX_SEL_COUNT(sel) == 1 && digits_ok(sel, LPX_SEL_HALF(sel) ? 1 : 3, 0);
}

/* Is sel valid on a SIMD operand: a mask of the destination (.h0 .h1 .h10,
 * .b0 ... .b3210, digits descending) or a source's .hxy / .bxyzw? */
static int simd_sel_ok(int kind, int64_t sel, int dest)
{
  int half = kind == VK_SIMD2, n = LPX_SEL_COUNT(sel);
  if (LPX_SEL_HALF(sel) != half) return 0;
  if (dest) return n <= (half ? 2 : 4) && digits_ok(sel, half ? 1 : 3, 1);
  return n == (half ? 2 : 4) && digits_ok(sel, half ? 3 : 7, 0);
}

/* What an operand of a video row may carry, for messages. */
static const char *sel_help(int kind, int dest)
{
  if (kind == VK_SCALAR) return dest ? ".b0-.b3 or .h0/.h1 (merged into c; with four operands and no .add/.min/.max)"
                                     : ".b0-.b3 or .h0/.h1";
  if (kind == VK_SIMD2) return dest ? "a mask .h0, .h1 or .h10" : ".hxy, x and y in 0-3 (default a .h10, b .h32)";
  return dest ? "a mask of descending byte digits (.b0, .b10, ... .b3210)" : ".bxyzw, digits 0-7 (default a .b3210, b .b7654)";
}

/* --------------------------------------------------------------- messages */

#define FAIL(...) rules_fail(m, fo, __VA_ARGS__)

/* Fail with "<form>: <fmt...>". */
static int rules_fail(lpx_module *m, const lpx_form *fo, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return lpx_fail(m->ctx, "%s: %s", fo->info.text, msg);
}

/* Is a register operand marked with a selector or a '-'? */
static int marked(const lpx_operand *o)
{
  return o->kind == LPX_OPD_REG && (o->ival != 0 || o->aux == LPX_REG_NEG);
}

/* --------------------------------------------------------------- video */

/* The selector and negation rules of one top-level operand k of a video row. */
static int video_operand(lpx_module *m, const lpx_form *fo, const lpx_operand *o, int k, int count)
{
  int op = fo->info.op, kind = vkind[op], dest = k == 0;
  char sel[16];
  if (o->kind == LPX_OPD_REG && o->aux == LPX_REG_NEG) {
    if (op != LPX_OP_VMAD || dest) return FAIL("operand %d: '-' negates the sources of vmad only", k + 1);
    if (fo->modsel[LPX_GB_VPO]) return FAIL("operand %d: .po adds one and takes no negated source", k + 1);
  }
  if (o->kind != LPX_OPD_REG || !o->ival) return 0;
  lpx_rules_sel_text(o->ival, sel, sizeof sel);
  if (k == 3) return FAIL("operand 4 (c) takes no selector; got %s", sel);
  if (dest && kind == VK_SCALAR && (op == LPX_OP_VMAD || count != 4 || fo->modsel[LPX_GB_VSECOP]))
    return FAIL("operand 1: %s merges into c and needs the four-operand form without .add/.min/.max%s", sel,
                op == LPX_OP_VMAD ? " (vmad has none)" : "");
  int ok = kind == VK_SCALAR ? scalar_sel_ok(o->ival) : simd_sel_ok(kind, o->ival, dest);
  if (!ok) return FAIL("operand %d: selector %s is not valid here; %s takes %s", k + 1, sel,
                       dest ? "the destination" : "a source", sel_help(kind, dest));
  return 0;
}

/* Modifier and operand-count rules of the video rows. */
static int video_form(lpx_module *m, const lpx_form *fo, int count)
{
  int op = fo->info.op, kind = vkind[op], sec = fo->modsel[LPX_GB_VSECOP];
  int cmp = fo->modsel[LPX_GB_CMP];
  if (cmp && cmp > LPX_CMP_GE) return FAIL("video comparisons are .eq .ne .lt .le .gt .ge");
  if ((op == LPX_OP_VSHL || op == LPX_OP_VSHR) && fo->info.type3 != LPX_T_U32)
    return FAIL("the shift amount is unsigned: %s.dtype.atype.u32", lpx_isa_rows[op].name);
  if (fo->modsel[LPX_GB_SAT] == LPX_SAT_SATFINITE) return FAIL("video instructions saturate with .sat");
  if (kind != VK_SCALAR) {
    if (sec && sec != LPX_VSECOP_ADD) return FAIL("SIMD video instructions accumulate with .add only");
    if (sec && fo->modsel[LPX_GB_SAT]) return FAIL(".sat and .add do not combine");
    return 0;
  }
  if (op == LPX_OP_VMAD) return 0;
  if (sec && count != 4) return FAIL(".%s takes a third source: d, a, b, c", lpx_modifier_name(LPX_GB_VSECOP, sec));
  return 0;
}

/* Is top-level operand k a register negated with '-'? */
static int negated(const lpx_operand *ops, const uint32_t *starts, int k)
{
  return ops[starts[k]].kind == LPX_OPD_REG && ops[starts[k]].aux == LPX_REG_NEG;
}

/* All rules of a video row. */
static int video_check(lpx_module *m, const lpx_form *fo, const lpx_operand *ops, const uint32_t *starts, int count)
{
  if (video_form(m, fo, count)) return -1;
  if (fo->info.op == LPX_OP_VMAD && negated(ops, starts, 1) != negated(ops, starts, 2) && negated(ops, starts, 3))
    return FAIL("vmad negates the product (a or b) or c, not both");
  for (int k = 0; k < count && k < 4; k++)
    if (video_operand(m, fo, &ops[starts[k]], k, count)) return -1;
  return 0;
}

/* ------------------------------------------------------ the other rows */

/* cvt.pack.sat: .u16/.s16 from two .s32; .u8 .s8 .u4 .s4 .u2 .s2 from two
 * .s32 and a .b32 shifted in above them. */
static int cvt_pack(lpx_module *m, const lpx_form *fo, int count)
{
  const lpx_form_info *fi = &fo->info;
  const char *forms = "cvt.pack.sat.{u16,s16}.s32 d, a, b or cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c";
  if (fo->modsel[LPX_GB_SAT] != LPX_SAT_SAT) return FAIL("cvt.pack needs .sat; forms: %s", forms);
  int sub = fo->modsel[LPX_GB_PACKT] != 0, t = fi->type;
  int wide = !sub && (t == LPX_T_U16 || t == LPX_T_S16), narrow = sub || t == LPX_T_U8 || t == LPX_T_S8;
  int ab = sub ? fi->type : fi->type2, c = sub ? fi->type2 : fi->type3;
  int ok = (wide && ab == LPX_T_S32 && c < 0 && count == 3) || (narrow && ab == LPX_T_S32 && c == LPX_T_B32 && count == 4);
  if (sub && fi->type3 >= 0) ok = 0;
  return ok ? 0 : FAIL("not a form of cvt.pack: %s", forms);
}

/* lop3 with .or/.and: the predicate form d|p, a, b, c, immLut, q. */
static int lop3(lpx_module *m, const lpx_form *fo, const lpx_operand *ops, const uint32_t *starts, int count)
{
  int b = fo->modsel[LPX_GB_BOOL], pipe = ops[starts[0]].kind == LPX_OPD_PIPE;
  if (b == LPX_BOOL_XOR) return FAIL("the predicate form combines with .or or .and");
  if (b && (count != 6 || !pipe)) return FAIL(".%s gives a predicate: lop3.%s.b32 d|p, a, b, c, immLut, q", lpx_modifier_name(LPX_GB_BOOL, b), lpx_modifier_name(LPX_GB_BOOL, b));
  if (!b && (count != 5 || pipe))
    return FAIL("a predicate result (d|p, ..., q) needs .or or .and; without them: lop3.b32 d, a, b, c, immLut");
  if (pipe && ops[starts[0] + 2].kind == LPX_OPD_SINK) return FAIL("the predicate form needs the predicate p of d|p");
  return 0;
}

/* The integer value of an immediate operand; 0 when it is not one. */
static int imm_value(const lpx_operand *o, int64_t *v)
{
  if (o->kind == LPX_OPD_INT || o->kind == LPX_OPD_IMM) { *v = o->ival; return 1; }
  return 0;
}

/* applypriority / discard: [a], 128 in the global (or generic) space. */
static int cache_line_op(lpx_module *m, const lpx_form *fo, const lpx_operand *size)
{
  int64_t v = 0;
  int sp = fo->modsel[LPX_GB_SPACE];
  if (sp && sp != LPX_SPACE_GLOBAL) return FAIL("operates on .global (or generic) addresses only");
  if (fo->info.op == LPX_OP_APPLYPRI && fo->modsel[LPX_GB_EVICT2] != LPX_EVICT2_L2_EVICT_NORMAL)
    return FAIL("applypriority sets .L2::evict_normal only");
  if (fo->info.op == LPX_OP_DISCARD && fo->modsel[LPX_GB_PFLEVEL] != LPX_PFLEVEL_L2) return FAIL("discard works on .L2 only");
  if (!imm_value(size, &v) || v != 128) return FAIL("operand 2 is the size, which must be the immediate 128");
  return 0;
}

/* createpolicy: .fractional{, fraction} / .range [a], primary, total / .cvt.L2 from an access property. */
static int createpolicy(lpx_module *m, const lpx_form *fo, lpx_operand *ops, const uint32_t *starts, int count)
{
  int mode = fo->modsel[LPX_GB_CPMODE], pri = fo->modsel[LPX_GB_CPPRI], sec = fo->modsel[LPX_GB_CPSEC];
  int sp = fo->modsel[LPX_GB_SPACE], lvl = fo->modsel[LPX_GB_PFLEVEL];
  if (mode == LPX_CPMODE_CVT) {
    if (pri || sec || sp || lvl != LPX_PFLEVEL_L2 || count != 2) return FAIL("the conversion form is createpolicy.cvt.L2.b64 policy, access-property");
    return 0;
  }
  if (!pri || lvl) return FAIL("needs a primary priority (.L2::evict_last .L2::evict_normal .L2::evict_first .L2::evict_unchanged) and no .L2 level");
  if (mode == LPX_CPMODE_FRACTIONAL) {
    if (sp) return FAIL(".fractional takes no state space");
    if (count == 1) return 0;
    lpx_operand *f = &ops[starts[1]];
    double x = f->kind == LPX_OPD_NUM ? f->fval : NAN;
    if (f->kind == LPX_OPD_FIMM) {
      if (f->type == LPX_T_F32) { uint32_t u = (uint32_t)f->ival; float fv; memcpy(&fv, &u, 4); x = fv; }
      else memcpy(&x, &f->ival, 8);
    }
    if (f->kind != LPX_OPD_REG && !(x > 0 && x <= 1)) return FAIL("operand 2 is the fraction, a float in (0, 1] (or an .f32 register)");
    if (f->kind == LPX_OPD_NUM) {   /* a Lua number: printed as an f32 literal, as ptxas wants */
      float fv = (float)x;
      uint32_t u;
      memcpy(&u, &fv, 4);
      f->kind = LPX_OPD_FIMM; f->type = LPX_T_F32; f->ival = u;
    }
    return 0;
  }
  if (sp && sp != LPX_SPACE_GLOBAL) return FAIL(".range covers .global addresses only");
  if (count != 4) return FAIL(".range takes policy, [a], primary-size, total-size");
  return 0;
}

/* alloca's optional alignment: an immediate power of two up to 2^23. */
static int alloca_align(lpx_module *m, const lpx_form *fo, const lpx_operand *ops, const uint32_t *starts, int count)
{
  int64_t v = 0;
  if (count < 3) return 0;
  if (!imm_value(&ops[starts[2]], &v) || v <= 0 || v > (1 << 23) || (v & (v - 1)))
    return FAIL("operand 3 is the alignment: an immediate power of two up to 2^23");
  return 0;
}

/* isspacep's space (not .generic or .param::func) and its address: a 32- or
 * 64-bit integer register or an integer. */
static int isspacep(lpx_module *m, const lpx_func *f, const lpx_form *fo, const lpx_operand *a)
{
  int sp = fo->modsel[LPX_GB_SPACE];
  if (sp == LPX_SPACE_GENERIC || sp == LPX_SPACE_PARAM_FUNC)
    return FAIL("asks .const .global .local .shared(::cta, ::cluster) or .param(::entry), not .%s", lpx_modifier_name(LPX_GB_SPACE, sp));
  if (a->kind == LPX_OPD_INT || a->kind == LPX_OPD_IMM || (a->kind == LPX_OPD_NUM && a->fval == floor(a->fval))) return 0;
  if (a->kind == LPX_OPD_REG && !a->aux && a->id >= 0 && (size_t)a->id < f->nregs) {
    const lpx_type_desc *t = &lpx_types[f->reg_type[a->id]];
    if ((t->bits == 32 || t->bits == 64) && (t->kind == 'B' || t->kind == 'U' || t->kind == 'S')) return 0;
  }
  return FAIL("operand 2 is the address: a 32- or 64-bit integer register, or an integer");
}

/* The rules of the non-video rows of this file. */
static int other_check(lpx_module *m, const lpx_func *f, const lpx_form *fo, lpx_operand *ops, const uint32_t *starts, int count)
{
  int op = fo->info.op, t = fo->info.type;
  switch (op) {
  case LPX_OP_ISSPACEP: return isspacep(m, f, fo, &ops[starts[1]]);
  case LPX_OP_GETCTARANK:
    if (fo->modsel[LPX_GB_SPACE] && fo->modsel[LPX_GB_SPACE] != LPX_SPACE_SHARED_CLUSTER)
      return FAIL("takes a generic or .shared::cluster address");
    return 0;
  case LPX_OP_MADC: case LPX_OP_DP2A:
    if (fo->modsel[LPX_GB_MULMODE] == LPX_MULMODE_WIDE) return FAIL("takes .lo or .hi, not .wide");
    return 0;
  case LPX_OP_CVTPACK: return cvt_pack(m, fo, count);
  case LPX_OP_LOP3: return lop3(m, fo, ops, starts, count);
  case LPX_OP_APPLYPRI: case LPX_OP_DISCARD: return cache_line_op(m, fo, &ops[starts[1]]);
  case LPX_OP_CREATEPOL: return createpolicy(m, fo, ops, starts, count);
  case LPX_OP_ALLOCA: return alloca_align(m, fo, ops, starts, count);
  case LPX_OP_BAR: case LPX_OP_BARRIER: {   /* ptxas: "Barrier number '16' out of range, expected to be in range [0..15]" */
    int64_t v = -1;
    const lpx_operand *id = &ops[starts[fo->modsel[LPX_GB_BARMODE] == LPX_BARMODE_RED ? 1 : 0]];
    if (imm_value(id, &v) && (v < 0 || v > 15)) return FAIL("takes barrier number 0..15 (16 named barriers a CTA); got %lld", (long long)v);
    return 0;
  }
  case LPX_OP_PMEVENT: {
    int64_t v = -1, most = fo->modsel[LPX_GB_PMMASK] ? 0xffff : 15;
    if (!imm_value(&ops[starts[0]], &v) || v < 0 || v > most)
      return FAIL("takes an immediate event %s", most == 15 ? "number 0..15" : "mask 0..0xffff");
    return 0;
  }
  case LPX_OP_ADD: case LPX_OP_MIN: case LPX_OP_MAX:
    if ((t == LPX_T_U16X2 || t == LPX_T_S16X2) && (fo->modsel[LPX_GB_CC] || fo->modsel[LPX_GB_SAT]))
      return FAIL(".%s takes neither .sat nor .cc", lpx_types[t].name);
    return 0;
  default: return 0;
  }
}

/* The rules of a row beyond its table columns; 0 or -1 (message
 * set). Selectors and '-' anywhere but on a video row are refused. */
int lpx_rules_check(lpx_module *m, const lpx_func *f, const lpx_form *fo, lpx_operand *ops, int nops, const uint32_t *starts, int count)
{
  int op = fo->info.op;
  if (!lpx_rules_video_row(op)) {
    for (int i = 0; i < nops; i++) {
      if (!marked(&ops[i])) continue;
      return FAIL("%s", ops[i].ival ? "byte/half selectors (.b0 .h1 ...) belong to the video instructions"
                                    : "'-' on a register negates vmad sources only");
    }
    return other_check(m, f, fo, ops, starts, count);
  }
  return video_check(m, fo, ops, starts, count);
}
