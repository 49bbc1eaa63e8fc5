/* C unit tests for the device interface and the emulator: kernels built
 * through the core's IR API, run on the "emu" device, checked against
 * CPU references; and each emulator check caught with its message. */
#include "lpx_core.h"
#include "lpx_device.h"
#include "lpx_tma.h"
#include "emu/emu.h"   /* emu_tmap: the record the emu device encodes */
#include <fenv.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;
static lpx_ctx *ctx;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
  fprintf(stderr, "%s:%d: check failed: %s\n  ctx: %s\n", __FILE__, __LINE__, #cond, lpx_ctx_error(ctx)); } } while (0)

/* ------------------------------------------------------------ IR helpers */

static lpx_operand R(int reg) { lpx_operand o = { LPX_OPD_REG, -1, reg, 0, 0, 0 }; return o; }
static lpx_operand NR(int reg) { lpx_operand o = { LPX_OPD_REG, -1, reg, 1, 0, 0 }; return o; }
static lpx_operand N(double v) { lpx_operand o = { LPX_OPD_NUM, -1, 0, 0, 0, v }; return o; }
static lpx_operand SP(const char *name) { lpx_operand o = { LPX_OPD_SPECIAL, -1, lpx_special_lookup(name), 0, 0, 0 }; return o; }
static lpx_operand A(int reg, int64_t off) { lpx_operand o = { LPX_OPD_ADDR, -1, reg, LPX_OPD_REG, off, 0 }; return o; }
static lpx_operand VEC(int n) { lpx_operand o = { LPX_OPD_VEC, -1, 0, n, 0, 0 }; return o; }
static lpx_operand PIPE(void) { lpx_operand o = { LPX_OPD_PIPE, -1, 0, 2, 0, 0 }; return o; }

static lpx_module *M;
static int F, LINE;

/* A symbol-based address [sym+off]. */
static lpx_operand AS(const char *sym, int64_t off)
{
  lpx_operand o = { LPX_OPD_ADDR, -1, lpx_sym(M, sym), LPX_OPD_SYM, off, 0 };
  return o;
}

/* A label operand. */
static lpx_operand L(const char *name) { lpx_operand o = { LPX_OPD_LABEL, -1, lpx_sym(M, name), 0, 0, 0 }; return o; }

/* Append one instruction (optionally guarded) with n operands; line numbers count up. */
static int emitg(int guard, int neg, const char *opcode, int n, ...)
{
  lpx_operand ops[16];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) ops[i] = va_arg(ap, lpx_operand);
  va_end(ap);
  int form = lpx_form_intern(ctx, opcode);
  if (form < 0) { fprintf(stderr, "form %s: %s\n", opcode, lpx_ctx_error(ctx)); failures++; return -1; }
  int rc = lpx_append(M, F, form, guard, neg, n, ops, 1, ++LINE);
  if (rc < 0) { fprintf(stderr, "append %s: %s\n", opcode, lpx_ctx_error(ctx)); failures++; }
  return rc;
}
#define E(op, ...) emitg(-1, 0, op, (int)(sizeof((lpx_operand[]){ __VA_ARGS__ }) / sizeof(lpx_operand)), __VA_ARGS__)
#define E0(op) emitg(-1, 0, op, 0)
#define G(p, op, ...) emitg(p, 0, op, (int)(sizeof((lpx_operand[]){ __VA_ARGS__ }) / sizeof(lpx_operand)), __VA_ARGS__)

static int T(const char *name) { return lpx_type_lookup(name); }
static int reg(const char *type) { return lpx_reg_new(M, F, T(type)); }

/* Start a fresh module with one entry and the given u64 pointer params. */
static void begin(const char *name, int nptr)
{
  M = lpx_module_new(ctx, 80, "sm_90a", 64);
  lpx_module_file(M, "kernels.lua");
  F = lpx_func_begin(M, name, 1, 1);
  LINE = 100;
  for (int i = 0; i < nptr; i++) {
    char p[32];
    snprintf(p, sizeof p, "p%d", i);
    lpx_func_param(M, F, p, T("u64"), 0, 0);
  }
}

/* Load the global pointer of param i into a new u64 register. */
static int ptr(int i)
{
  char p[32];
  snprintf(p, sizeof p, "p%d", i);
  int r = reg("u64");
  E("ld.param.u64", R(r), AS(p, 0));
  return r;
}

/* Global thread index (ctaid.x * ntid.x + tid.x) as u32. */
static int gtid(void)
{
  int t = reg("u32"), c = reg("u32"), n = reg("u32"), i = reg("u32");
  E("mov.u32", R(t), SP("%tid.x"));
  E("mov.u32", R(c), SP("%ctaid.x"));
  E("mov.u32", R(n), SP("%ntid.x"));
  E("mad.lo.u32", R(i), R(c), R(n), R(t));
  return i;
}

/* Address of element i (u32 index) of 4-byte elements at base. */
static int elem(int base, int i, int size)
{
  int w = reg("u64"), a = reg("u64");
  E("mul.wide.u32", R(w), R(i), N(size));
  E("add.s64", R(a), R(base), R(w));
  return a;
}

/* ------------------------------------------------------------ launching */

static lpx_device *dev;

/* Load M, find its entry, launch with pointer params. */
static int launch(const char *name, unsigned grid, unsigned block, unsigned dyn, int nptr, ...)
{
  int32_t mod, fn;
  if (lpx_device_load_ir(dev, M, &mod) || lpx_device_function(dev, mod, name, &fn)) return -1;
  uint64_t params[8];
  va_list ap;
  va_start(ap, nptr);
  for (int i = 0; i < nptr; i++) params[i] = va_arg(ap, uint64_t);
  va_end(ap);
  lpx_launch_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.grid[0] = grid; cfg.grid[1] = cfg.grid[2] = 1;
  cfg.block[0] = block; cfg.block[1] = cfg.block[2] = 1;
  cfg.dynamic_smem = dyn;
  cfg.params = params; cfg.params_size = 8 * (uint64_t)nptr;
  return lpx_device_launch(dev, fn, &cfg);
}

/* Upload n bytes into a fresh allocation. */
static uint64_t upload(const void *src, size_t n)
{
  uint64_t p = 0;
  CHECK(lpx_device_alloc(dev, n, &p) == 0);
  CHECK(lpx_device_upload(dev, p, src, n) == 0);
  return p;
}

static uint32_t rng = 12345;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng; }

/* ----------------------------------------------------------------- tests */

/* out[i] = a[i] * 3 + b[i] (u32) and f[i] = fma(x, y, 0.5) for n threads with a bounds guard. */
static void test_elementwise(void)
{
  enum { NEL = 1000 };
  begin("ew", 4);
  int pa = ptr(0), pb = ptr(1), po = ptr(2), pf = ptr(3), i = gtid(), p = reg("pred");
  E("setp.ge.u32", R(p), R(i), N(NEL));
  G(p, "bra", L("done"));
  int a = reg("u32"), b = reg("u32"), o = reg("u32"), x = reg("f32"), y = reg("f32");
  E("ld.global.u32", R(a), A(elem(pa, i, 4), 0));
  E("ld.global.u32", R(b), A(elem(pb, i, 4), 0));
  E("mad.lo.u32", R(o), R(a), N(3), R(b));
  E("st.global.u32", A(elem(po, i, 4), 0), R(o));
  E("cvt.rn.f32.u32", R(x), R(a));
  E("cvt.rn.f32.u32", R(y), R(b));
  E("fma.rn.f32", R(x), R(x), R(y), N(0.5));
  E("st.global.f32", A(elem(pf, i, 4), 0), R(x));
  lpx_label_place(M, F, lpx_sym(M, "done"));
  E0("ret");
  uint32_t ha[NEL], hb[NEL], ho[NEL];
  float hf[NEL];
  for (int k = 0; k < NEL; k++) { ha[k] = rnd() % 100000; hb[k] = rnd(); }
  uint64_t da = upload(ha, sizeof ha), db = upload(hb, sizeof hb), dout, df;
  CHECK(lpx_device_alloc(dev, sizeof ho, &dout) == 0 && lpx_device_alloc(dev, sizeof hf, &df) == 0);
  CHECK(launch("ew", (NEL + 127) / 128, 128, 0, 4, da, db, dout, df) == 0);
  CHECK(lpx_device_download(dev, ho, dout, sizeof ho) == 0 && lpx_device_download(dev, hf, df, sizeof hf) == 0);
  int bad = 0;
  for (int k = 0; k < NEL; k++) {
    bad += ho[k] != ha[k] * 3 + hb[k];
    bad += hf[k] != fmaf((float)ha[k], (float)hb[k], 0.5f);
  }
  CHECK(bad == 0);
  lpx_module_free(M);
}

/* Block sum through shared memory with bar.sync and a warp shuffle reduction. */
static void test_reduce(void)
{
  begin("red", 2);
  lpx_var_decl(M, F, "shared", "buf", T("u32"), 4, 32, 0);
  int pin = ptr(0), pout = ptr(1), i = gtid(), t = reg("u32"), v = reg("u32"), tmp = reg("u32");
  int lane = reg("u32"), wid = reg("u32"), sa = reg("u32"), p = reg("pred"), q = reg("pred");
  E("mov.u32", R(t), SP("%tid.x"));
  E("ld.global.u32", R(v), A(elem(pin, i, 4), 0));
  for (int off = 16; off >= 1; off /= 2) {
    E("shfl.sync.bfly.b32", R(tmp), R(v), N(off), N(31), N(-1.0));
    E("add.u32", R(v), R(v), R(tmp));
  }
  E("and.b32", R(lane), R(t), N(31));
  E("shr.u32", R(wid), R(t), N(5));
  E("setp.eq.u32", R(p), R(lane), N(0));
  E("shl.b32", R(sa), R(wid), N(2));
  int base = reg("u32");
  lpx_operand sym = { LPX_OPD_SYM, -1, lpx_sym(M, "buf"), 0, 0, 0 };
  E("mov.u32", R(base), sym);
  E("add.u32", R(sa), R(sa), R(base));
  G(p, "st.shared.u32", A(sa, 0), R(v));
  E("bar.sync", N(0));
  E("setp.ne.u32", R(q), R(t), N(0));
  G(q, "bra", L("out"));
  int s = reg("u32"), k = reg("u32"), x = reg("u32"), nw = reg("u32"), pk = reg("pred");
  E("mov.u32", R(s), N(0));
  E("mov.u32", R(k), N(0));
  E("mov.u32", R(nw), SP("%ntid.x"));
  E("shr.u32", R(nw), R(nw), N(5));
  lpx_label_place(M, F, lpx_sym(M, "loop"));
  int ka = reg("u32");
  E("shl.b32", R(ka), R(k), N(2));
  E("add.u32", R(ka), R(ka), R(base));
  E("ld.shared.u32", R(x), A(ka, 0));
  E("add.u32", R(s), R(s), R(x));
  E("add.u32", R(k), R(k), N(1));
  E("setp.lt.u32", R(pk), R(k), R(nw));
  G(pk, "bra", L("loop"));
  int c = reg("u32");
  E("mov.u32", R(c), SP("%ctaid.x"));
  E("st.global.u32", A(elem(pout, c, 4), 0), R(s));
  lpx_label_place(M, F, lpx_sym(M, "out"));
  E0("ret");
  enum { BLK = 256, NB = 8 };
  uint32_t h[BLK * NB], o[NB], ref[NB] = { 0 };
  for (int k2 = 0; k2 < BLK * NB; k2++) { h[k2] = rnd() % 1000 + 1; ref[k2 / BLK] += h[k2]; }
  uint64_t din = upload(h, sizeof h), dout;
  CHECK(lpx_device_alloc(dev, sizeof o, &dout) == 0);
  CHECK(launch("red", NB, BLK, 0, 2, din, dout) == 0);
  CHECK(lpx_device_download(dev, o, dout, sizeof o) == 0);
  CHECK(memcmp(o, ref, sizeof o) == 0);
  lpx_module_free(M);
}

/* Divergent if/else with reconvergence, then a vote.ballot of the branch taken. */
static void test_divergence(void)
{
  begin("div", 1);
  int po = ptr(0), t = reg("u32"), v = reg("u32"), p = reg("pred"), b = reg("u32");
  E("mov.u32", R(t), SP("%tid.x"));
  E("and.b32", R(v), R(t), N(1));
  E("setp.eq.u32", R(p), R(v), N(1));
  G(p, "bra", L("odd"));
  E("mul.lo.u32", R(v), R(t), N(10));
  E("bra.uni", L("join"));
  lpx_label_place(M, F, lpx_sym(M, "odd"));
  E("add.u32", R(v), R(t), N(1000));
  lpx_label_place(M, F, lpx_sym(M, "join"));
  E("vote.sync.ballot.b32", R(b), R(p), N(-1.0));
  E("add.u32", R(v), R(v), R(b));
  E("st.global.u32", A(elem(po, t, 4), 0), R(v));
  E0("exit");
  uint32_t o[64];
  uint64_t dout;
  CHECK(lpx_device_alloc(dev, sizeof o, &dout) == 0);
  CHECK(launch("div", 1, 64, 0, 1, dout) == 0);
  CHECK(lpx_device_download(dev, o, dout, sizeof o) == 0);
  int bad = 0;
  for (uint32_t k = 0; k < 64; k++) bad += o[k] != ((k & 1) ? k + 1000 : k * 10) + 0xaaaaaaaau;
  CHECK(bad == 0);
  lpx_module_free(M);
}

/* Atomics from every thread of several CTAs (run on several host threads). */
static void test_atomics(void)
{
  begin("atom", 1);
  int po = ptr(0), old = reg("u32"), one = reg("u32"), f = reg("f32"), fo = reg("f32"), t = reg("u32");
  E("mov.u32", R(one), N(1));
  E("atom.global.add.u32", R(old), A(po, 0), R(one));
  E("mov.u32", R(t), SP("%tid.x"));
  E("atom.global.max.u32", R(old), A(po, 4), R(t));
  E("mov.f32", R(f), N(0.25));
  E("atom.global.add.f32", R(fo), A(po, 8), R(f));
  E("red.global.xor.b32", A(po, 12), R(t));
  E0("ret");
  uint32_t h[4] = { 0, 0, 0, 0 };
  uint64_t d = upload(h, sizeof h);
  CHECK(launch("atom", 16, 96, 0, 1, d) == 0);
  CHECK(lpx_device_download(dev, h, d, sizeof h) == 0);
  float fsum;
  memcpy(&fsum, &h[2], 4);
  CHECK(h[0] == 16 * 96 && h[1] == 95 && fsum == 16 * 96 * 0.25f && h[3] == 0);
  lpx_module_free(M);
}

/* Integer corner cases: shifts past the width, bfe/bfi, prmt, popc/clz/brev, mul.hi/wide, div by -1. */
static void test_int_corners(void)
{
  begin("ints", 1);
  int po = ptr(0), r[12];
  for (int k = 0; k < 12; k++) r[k] = reg("b32");
  int x = reg("u32"), s = reg("s32"), w64 = reg("s64");
  E("mov.u32", R(x), N(0xF0F01234));
  E("mov.s32", R(s), N(-7));
  E("shl.b32", R(r[0]), R(x), N(40));
  E("shr.s32", R(r[1]), R(s), N(99));
  E("bfe.u32", R(r[2]), R(x), N(4), N(8));
  E("bfe.s32", R(r[3]), R(x), N(28), N(8));
  E("bfi.b32", R(r[4]), R(x), N(0), N(8), N(4));
  E("prmt.b32", R(r[5]), R(x), N(0), N(0x0123));
  E("popc.b32", R(r[6]), R(x));
  E("clz.b32", R(r[7]), R(x));
  E("brev.b32", R(r[8]), R(x));
  E("mul.hi.s32", R(r[9]), R(s), R(x));
  E("div.s32", R(r[10]), N(-2147483648.0), N(-1));
  E("mul.wide.s32", R(w64), R(s), N(1 << 30));
  E("cvt.u32.u64", R(r[11]), R(w64));
  for (int k = 0; k < 12; k++) E("st.global.b32", A(po, 4 * k), R(r[k]));
  E0("ret");
  uint32_t h[12];
  uint64_t d;
  CHECK(lpx_device_alloc(dev, sizeof h, &d) == 0);
  CHECK(launch("ints", 1, 1, 0, 1, d) == 0);
  CHECK(lpx_device_download(dev, h, d, sizeof h) == 0);
  uint32_t X = 0xF0F01234u;
  CHECK(h[0] == 0);
  CHECK(h[1] == 0xffffffffu);
  CHECK(h[2] == ((X >> 4) & 0xff));
  CHECK(h[3] == 0xffffffffu);              /* bits 28..31 = 0xF, sign-extended */
  CHECK(h[4] == ((X & 0xf) << 8));
  CHECK(h[5] == ((X & 0xff) << 24 | ((X >> 8) & 0xff) << 16 | ((X >> 16) & 0xff) << 8 | (X >> 24)));
  CHECK(h[6] == (uint32_t)__builtin_popcount(X));
  CHECK(h[7] == 0);
  uint32_t rev = 0;
  for (int k = 0; k < 32; k++) rev |= ((X >> k) & 1) << (31 - k);
  CHECK(h[8] == rev);
  CHECK(h[9] == (uint32_t)(((int64_t)-7 * (int64_t)(int32_t)X) >> 32));
  CHECK(h[10] == 0x80000000u);
  CHECK(h[11] == (uint32_t)((int64_t)-7 * (1 << 30)));
  lpx_module_free(M);
}

/* f16/bf16 conversions round to nearest even; f32->s32 saturates; NaN -> 0. */
static void test_conversions(void)
{
  begin("cvts", 1);
  int po = ptr(0), f = reg("f32"), h = reg("b16"), hb = reg("b16"), s = reg("s32"), n = reg("s32"), g = reg("f32");
  int h2 = reg("b32"), big = reg("f32"), nan = reg("f32"), back = reg("f32");
  E("mov.b32", R(f), N(0x3f801000));       /* 1 + 2^-11: a tie between two f16 values -> even (1.0) */
  E("cvt.rn.f16.f32", R(h), R(f));
  E("mov.b32", R(g), N(0x3f818000));       /* 1.01171875: bf16 tie -> even */
  E("cvt.rn.bf16.f32", R(hb), R(g));
  E("mov.b32", R(big), N(0x4f800000));     /* 2^32 */
  E("cvt.rzi.s32.f32", R(s), R(big));
  E("mov.b32", R(nan), N(0x7fc00000));
  E("cvt.rzi.s32.f32", R(n), R(nan));
  E("cvt.rn.f16x2.f32", R(h2), R(f), R(g));
  E("cvt.f32.f16", R(back), R(h));
  E("st.global.b16", A(po, 0), R(h));
  E("st.global.b16", A(po, 2), R(hb));
  E("st.global.s32", A(po, 4), R(s));
  E("st.global.s32", A(po, 8), R(n));
  E("st.global.b32", A(po, 12), R(h2));
  E("st.global.f32", A(po, 16), R(back));
  E0("ret");
  uint8_t out[20];
  uint64_t d;
  CHECK(lpx_device_alloc(dev, sizeof out, &d) == 0);
  CHECK(launch("cvts", 1, 1, 0, 1, d) == 0);
  CHECK(lpx_device_download(dev, out, d, sizeof out) == 0);
  uint16_t h16, b16;
  int32_t s32, n32;
  uint32_t pk;
  float bk;
  memcpy(&h16, out, 2); memcpy(&b16, out + 2, 2); memcpy(&s32, out + 4, 4); memcpy(&n32, out + 8, 4);
  memcpy(&pk, out + 12, 4); memcpy(&bk, out + 16, 4);
  CHECK(h16 == 0x3c00);
  CHECK(b16 == 0x3f82);                    /* 0x3f81_8000: tie, 0x81 odd -> rounds up to 0x82 */
  CHECK(s32 == 2147483647);
  CHECK(n32 == 0);
  CHECK(pk == (0x3c00u << 16 | 0x3c0cu));   /* 1.01171875 in f16: exact = 0x3c0c */
  CHECK(bk == 1.0f);
  lpx_module_free(M);
}

/* Every e4m3 / e5m2 code pair through cvt.rn.f16x2.<f8x2> and back through
 * cvt.rn.satfinite.<f8x2>.f16x2: finite codes come back unchanged (the decode
 * is exact), NaN comes back as 0x7f, e5m2 infinity as the largest finite. */
static void test_fp8_roundtrip(void)
{
  begin("fp8rt", 1);
  int po = ptr(0), t = gtid(), p = reg("b32"), lo = reg("b16"), hi = reg("b16"), pk = reg("b16"), x = reg("b32");
  int y4 = reg("b16"), y5 = reg("b16"), z4 = reg("b32"), z5 = reg("b32");
  E("xor.b32", R(p), R(t), N(0x5a));
  E("shl.b32", R(p), R(p), N(8));
  E("or.b32", R(p), R(p), R(t));
  E("mov.b32", R(x), R(p));
  E("mov.b32", VEC(2), R(lo), R(hi), R(x));
  E("mov.b16", R(pk), R(lo));
  E("cvt.rn.f16x2.e4m3x2", R(z4), R(pk));
  E("cvt.rn.satfinite.e4m3x2.f16x2", R(y4), R(z4));
  E("cvt.rn.f16x2.e5m2x2", R(z5), R(pk));
  E("cvt.rn.satfinite.e5m2x2.f16x2", R(y5), R(z5));
  E("st.global.b16", A(elem(po, t, 4), 0), R(y4));
  E("st.global.b16", A(elem(po, t, 4), 2), R(y5));
  E0("ret");
  uint16_t out[2 * 256];
  uint64_t d;
  CHECK(lpx_device_alloc(dev, sizeof out, &d) == 0);
  CHECK(launch("fp8rt", 1, 256, 0, 1, d) == 0);
  CHECK(lpx_device_download(dev, out, d, sizeof out) == 0);
  int bad = 0;
  for (int i = 0; i < 256; i++) {
    uint16_t want4 = 0, want5 = 0;
    for (int h = 0; h < 2; h++) {
      unsigned c = h ? (unsigned)(i ^ 0x5a) : (unsigned)i, mag = c & 0x7f;
      unsigned w4 = mag == 0x7f ? 0x7f : c, w5 = mag > 0x7c ? 0x7f : mag == 0x7c ? (c & 0x80) | 0x7b : c;
      want4 |= (uint16_t)(w4 << (8 * h));
      want5 |= (uint16_t)(w5 << (8 * h));
    }
    bad += out[2 * i] != want4 || out[2 * i + 1] != want5;
  }
  CHECK(bad == 0);
  lpx_module_free(M);
}

/* Special registers of a 2-D block in a 2-D grid, and dynamic shared memory. */
static void test_specials(void)
{
  begin("sp", 1);
  lpx_var_decl(M, -1, "shared", "dyn", T("b8"), 16, -1, 2);
  static const char *const names[] = { "%tid.x", "%tid.y", "%ntid.x", "%ntid.y", "%ctaid.x", "%ctaid.y", "%nctaid.x",
                                       "%laneid", "%warpid", "%nwarpid", "%lanemask_lt", "%dynamic_smem_size" };
  enum { NS = 12 };
  int po = ptr(0), r[NS], lin = reg("u32"), ty = reg("u32"), tx = reg("u32"), nx = reg("u32"), cx = reg("u32");
  for (int k = 0; k < NS; k++) { r[k] = reg("u32"); E("mov.u32", R(r[k]), SP(names[k])); }
  /* linear index = ((ctaid.y * nctaid.x + ctaid.x) * ntid.y + tid.y) * ntid.x + tid.x */
  E("mov.u32", R(cx), SP("%ctaid.y"));
  E("mad.lo.u32", R(cx), R(cx), R(r[6]), R(r[4]));
  E("mov.u32", R(ty), SP("%tid.y"));
  E("mov.u32", R(nx), SP("%ntid.y"));
  E("mad.lo.u32", R(lin), R(cx), R(nx), R(ty));
  E("mov.u32", R(tx), SP("%ntid.x"));
  E("mad.lo.u32", R(lin), R(lin), R(tx), R(r[0]));
  E("mul.lo.u32", R(lin), R(lin), N(NS));
  /* also: a generic store into shared through cvta, read back with ld.shared */
  int sh = reg("u64"), g = reg("u64"), back = reg("u32");
  lpx_operand sym = { LPX_OPD_SYM, -1, lpx_sym(M, "dyn"), 0, 0, 0 };
  E("mov.u64", R(sh), sym);
  E("cvta.shared.u64", R(g), R(sh));
  int lw = reg("u64");
  E("mul.wide.u32", R(lw), R(r[7]), N(4));
  E("add.s64", R(g), R(g), R(lw));
  E("st.u32", A(g, 4), R(r[7]));
  E("cvta.to.shared.u64", R(sh), R(g));
  E("ld.shared.u32", R(back), A(sh, 4));
  E("xor.b32", R(r[7]), R(r[7]), R(back));       /* 0 when the round trip worked */
  for (int k = 0; k < NS; k++) {
    int a = reg("u32");
    E("add.u32", R(a), R(lin), N(k));
    E("st.global.u32", A(elem(po, a, 4), 0), R(r[k]));
  }
  E0("ret");
  int32_t mod, fn;
  CHECK(lpx_device_load_ir(dev, M, &mod) == 0 && lpx_device_function(dev, mod, "sp", &fn) == 0);
  enum { BX = 8, BY = 6, GX = 3, GY = 2, NT = BX * BY * GX * GY };
  uint32_t *h = calloc(NT * NS, 4);
  uint64_t d;
  CHECK(lpx_device_alloc(dev, NT * NS * 4, &d) == 0);
  lpx_launch_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.grid[0] = GX; cfg.grid[1] = GY; cfg.grid[2] = 1;
  cfg.block[0] = BX; cfg.block[1] = BY; cfg.block[2] = 1;
  cfg.dynamic_smem = 256;
  cfg.params = &d; cfg.params_size = 8;
  lpx_device_set_option(dev, "race_check", 0);
  CHECK(lpx_device_launch(dev, fn, &cfg) == 0);
  cfg.grid[0] = 0x80000000u;                    /* above 2^31-1: refused before anything runs */
  CHECK(lpx_device_launch(dev, fn, &cfg) == -1
        && strcmp(lpx_ctx_error(ctx), "launch: grid x = 2147483648; the limit is 2147483647 (2^31-1)") == 0);
  cfg.grid[0] = GX;
  lpx_device_set_option(dev, "race_check", 1);
  CHECK(lpx_device_download(dev, h, d, NT * NS * 4) == 0);
  int bad = 0;
  for (uint32_t cy = 0; cy < GY; cy++) for (uint32_t cxx = 0; cxx < GX; cxx++)
    for (uint32_t y = 0; y < BY; y++) for (uint32_t x = 0; x < BX; x++) {
      uint32_t t = y * BX + x, *o = h + (((cy * GX + cxx) * BY + y) * BX + x) * NS;
      uint32_t want[NS] = { x, y, BX, BY, cxx, cy, GX, 0, t / 32, (BX * BY + 31) / 32, (1u << (t % 32)) - 1, 256 };
      for (int k = 0; k < NS; k++) if (o[k] != want[k] && bad++ < 5) fprintf(stderr, "cta (%u,%u) t (%u,%u) reg %s: %u want %u\n", cxx, cy, x, y, names[k], o[k], want[k]);
    }
  CHECK(bad == 0);
  free(h);
  lpx_module_free(M);
}

/* .local arrays are per thread; a dynamic index past the end is caught. */
static void test_local(void)
{
  begin("loc", 1);
  lpx_var_decl(M, F, "local", "scratch", T("u32"), 4, 8, 0);
  int po = ptr(0), t = reg("u32"), a = reg("u64"), v = reg("u32"), s = reg("u32");
  lpx_operand sym = { LPX_OPD_SYM, -1, lpx_sym(M, "scratch"), 0, 0, 0 };
  E("mov.u32", R(t), SP("%tid.x"));
  E("mov.u64", R(a), sym);
  for (int k = 0; k < 8; k++) {
    int x = reg("u32");
    E("add.u32", R(x), R(t), N(k * 100));
    E("st.local.u32", A(a, 4 * k), R(x));
  }
  E("mov.u32", R(s), N(0));
  for (int k = 0; k < 8; k++) { E("ld.local.u32", R(v), A(a, 4 * k)); E("add.u32", R(s), R(s), R(v)); }
  E("st.global.u32", A(elem(po, t, 4), 0), R(s));
  E("ld.local.u32", R(v), A(a, 32));
  E0("ret");
  uint32_t h[64];
  uint64_t d;
  CHECK(lpx_device_alloc(dev, sizeof h, &d) == 0);
  CHECK(launch("loc", 1, 64, 0, 1, d) < 0 && strstr(lpx_ctx_error(ctx), "out-of-bounds local access of 4 bytes at local offset 0x20"));
  CHECK(lpx_device_download(dev, h, d, sizeof h) == 0);
  int bad = 0;
  for (uint32_t k = 0; k < 32; k++) bad += h[k] != 8 * k + 2800;
  CHECK(bad == 0);
  lpx_module_free(M);
}

/* ------------------------------------------------- single-instruction table */

/* One instruction checked against a C reference on random and edge inputs:
 * types "d a b c e" name the destination and source register types
 * ("pred" destinations are read back through selp). */
typedef uint64_t (*ref_fn)(uint64_t a, uint64_t b, uint64_t c, uint64_t e);
typedef struct optest { const char *op; const char *types; ref_fn ref; int mode; } optest;

#define REF(name, expr) static uint64_t name(uint64_t a, uint64_t b, uint64_t c, uint64_t e) \
  { (void)a; (void)b; (void)c; (void)e; return (uint64_t)(expr); }
#define U32(x) ((uint32_t)(x))
#define S32(x) ((int32_t)(uint32_t)(x))
#define S64(x) ((int64_t)(x))

static float fa(uint64_t v) { float f; uint32_t u = (uint32_t)v; memcpy(&f, &u, 4); return f; }
static double da(uint64_t v) { double d; memcpy(&d, &v, 8); return d; }
static uint64_t fb(float f) { uint32_t u; if (f != f) return 0x7fffffffu; memcpy(&u, &f, 4); return u; }
static uint64_t db(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static uint32_t rev32(uint32_t x) { uint32_t r = 0; for (int i = 0; i < 32; i++) r |= ((x >> i) & 1) << (31 - i); return r; }
static uint32_t bfe32(uint32_t a, uint32_t pos, uint32_t len, int s)
{
  pos &= 0xff; len &= 0xff;
  uint32_t top = pos + len - 1 < 31 ? pos + len - 1 : 31, sb = (s && len) ? (a >> top) & 1 : 0, r = 0;
  for (uint32_t i = 0; i < 32; i++) r |= ((i < len && pos + i <= 31) ? (a >> (pos + i)) & 1 : sb) << i;
  return r;
}
static uint32_t bfi32(uint32_t a, uint32_t b, uint32_t pos, uint32_t len)
{
  pos &= 0xff; len &= 0xff;
  if (!len || pos >= 32) return b;
  uint64_t m = (len >= 64 ? ~0ull : (1ull << len) - 1) << pos;
  return (uint32_t)((b & ~m) | (((uint64_t)a << pos) & m));
}
static uint32_t prmt32(uint32_t a, uint32_t b, uint32_t c)
{
  uint64_t v = (uint64_t)b << 32 | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; k++) {
    uint32_t s = (c >> 4 * k) & 0xf, byte = (uint32_t)(v >> 8 * (s & 7)) & 0xff;
    if (s & 8) byte = byte & 0x80 ? 0xff : 0;
    r |= byte << 8 * k;
  }
  return r;
}
static uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut)
{
  uint32_t r = 0;
  for (int i = 0; i < 32; i++) r |= ((lut >> ((a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1))) & 1) << i;
  return r;
}
static uint32_t bfind(uint32_t a, int s, int amt)
{
  if (s && (a >> 31)) a = ~a;
  if (!a) return 0xffffffffu;
  uint32_t p = 31 - (uint32_t)__builtin_clz(a);
  return amt ? 31 - p : p;
}
static float ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0, x) : x; }
static uint64_t sat_s8(int32_t x) { int v = x > 127 ? 127 : x < -128 ? -128 : x; return (uint16_t)(int16_t)v; }
static uint64_t f2i(double x, double lo, double hi) { return x != x ? 0 : x <= lo ? (uint64_t)(int64_t)lo : x >= hi ? (uint64_t)(int64_t)hi : (uint64_t)(int64_t)x; }
static uint64_t in_mode(int mode, float (*f)(float, float, float), float x, float y, float z)
{
  int old = fegetround();
  fesetround(mode);
  volatile float r = f(x, y, z);
  fesetround(old);
  return fb(r);
}
static float f_add(float x, float y, float z) { volatile float a = x, b = y; (void)z; return a + b; }
static float f_sub(float x, float y, float z) { volatile float a = x, b = y; (void)z; return a - b; }
static float f_mul(float x, float y, float z) { volatile float a = x, b = y; (void)z; return a * b; }
static float f_div(float x, float y, float z) { volatile float a = x, b = y; (void)z; return a / b; }
static float f_fma(float x, float y, float z) { return fmaf(x, y, z); }
static float f_sqrt(float x, float y, float z) { (void)y; (void)z; return sqrtf(x); }
static float f_cvt_s(float x, float y, float z) { (void)y; (void)z; volatile int32_t i; memcpy((void *)&i, &x, 4); return (float)i; }
static float f_cvt_u(float x, float y, float z) { (void)y; (void)z; volatile uint32_t i; memcpy((void *)&i, &x, 4); return (float)i; }
static uint64_t fminmax32(float x, float y, int mx)
{
  if (x != x && y != y) return 0x7fffffffu;
  if (x != x) return fb(y);
  if (y != y) return fb(x);
  if (x == y) return fb(mx ? (signbit(x) ? y : x) : (signbit(x) ? x : y));
  return fb(mx ? (x > y ? x : y) : (x < y ? x : y));
}

REF(r_add_u32, U32(a + b)) REF(r_sub_s32, U32(S32(a) - (uint32_t)S32(b)))
REF(r_mullo_u32, U32(U32(a) * U32(b))) REF(r_mulhi_u32, U32(((uint64_t)U32(a) * U32(b)) >> 32))
REF(r_mulhi_s32, U32((uint64_t)((int64_t)S32(a) * S32(b)) >> 32))
REF(r_mulwide_u32, (uint64_t)U32(a) * U32(b)) REF(r_mulwide_s32, (uint64_t)((int64_t)S32(a) * S32(b)))
REF(r_mullo_u64, a * b) REF(r_mulhi_u64, (uint64_t)(((unsigned __int128)a * b) >> 64))
REF(r_mulhi_s64, (uint64_t)(((__int128)S64(a) * S64(b)) >> 64))
REF(r_madlo_s32, U32((uint32_t)S32(a) * (uint32_t)S32(b) + (uint32_t)S32(c)))
REF(r_madhi_u32, U32((((uint64_t)U32(a) * U32(b)) >> 32) + U32(c)))
REF(r_madwide_s32, (uint64_t)((int64_t)S32(a) * S32(b)) + c)
REF(r_div_u32, U32(b) ? U32(a) / U32(b) : 0xffffffffu)
REF(r_div_s32, S32(b) == 0 ? 0xffffffffu : (S32(b) == -1 ? U32(0u - U32(a)) : U32(S32(a) / S32(b))))
/* rem by zero: all ones, as ptxas's division code selects ~0 for a zero divisor */
REF(r_rem_u32, U32(b) ? U32(a) % U32(b) : 0xffffffffu)
REF(r_rem_s32, S32(b) == 0 ? 0xffffffffu : (S32(b) == -1 ? 0 : U32(S32(a) % S32(b))))
REF(r_min_s32, U32(S32(a) < S32(b) ? S32(a) : S32(b))) REF(r_max_u32, U32(a) > U32(b) ? U32(a) : U32(b))
REF(r_abs_s32, U32(S32(a) < 0 ? 0u - U32(a) : U32(a))) REF(r_neg_s32, U32(0u - U32(a)))
REF(r_and, U32(a & b)) REF(r_or, U32(a | b)) REF(r_xor, U32(a ^ b)) REF(r_not, U32(~a)) REF(r_cnot, U32(a) == 0)
REF(r_shl_b32, U32(b) > 31 ? 0 : U32(U32(a) << U32(b))) REF(r_shr_u32, U32(b) > 31 ? 0 : U32(a) >> U32(b))
REF(r_shr_s32, U32(S32(a) >> (U32(b) > 31 ? 31 : U32(b))))
REF(r_shl_b64, U32(b) > 63 ? 0 : a << U32(b)) REF(r_shr_s64, (uint64_t)(S64(a) >> (U32(b) > 63 ? 63 : U32(b))))
REF(r_popc32, __builtin_popcount(U32(a))) REF(r_popc64, __builtin_popcountll(a))
REF(r_clz32, U32(a) ? __builtin_clz(U32(a)) : 32) REF(r_clz64, a ? __builtin_clzll(a) : 64)
REF(r_brev32, rev32(U32(a)))
REF(r_bfind_u32, bfind(U32(a), 0, 0)) REF(r_bfind_s32, bfind(U32(a), 1, 0)) REF(r_bfind_amt, bfind(U32(a), 0, 1))
REF(r_bfe_u32, bfe32(U32(a), U32(b), U32(c), 0)) REF(r_bfe_s32, bfe32(U32(a), U32(b), U32(c), 1))
REF(r_bfi, bfi32(U32(a), U32(b), U32(c), U32(e)))
REF(r_prmt, prmt32(U32(a), U32(b), U32(c)))
REF(r_lop3, lop3(U32(a), U32(b), U32(c), U32(e) & 0xff))
REF(r_shf_l_wrap, U32(((((uint64_t)U32(b) << 32) | U32(a)) << (U32(c) & 31)) >> 32))
REF(r_shf_r_clamp, U32((((uint64_t)U32(b) << 32) | U32(a)) >> (U32(c) > 32 ? 32 : U32(c))))
REF(r_sad_u32, U32((U32(a) > U32(b) ? U32(a) - U32(b) : U32(b) - U32(a)) + U32(c)))
REF(r_mul24lo_u32, U32((uint64_t)(U32(a) & 0xffffff) * (U32(b) & 0xffffff)))
REF(r_mul24hi_s32, U32((uint64_t)(((int64_t)(S32(a << 8) >> 8) * (S32(b << 8) >> 8))) >> 16))
REF(r_setp_lt_s32, S32(a) < S32(b)) REF(r_setp_hs_u32, U32(a) >= U32(b))
REF(r_setp_gtu_f32, (fa(a) != fa(a) || fa(b) != fa(b)) || fa(a) > fa(b))
REF(r_setp_ne_f32, !(fa(a) != fa(a) || fa(b) != fa(b)) && fa(a) != fa(b))
REF(r_add_rn_f32, in_mode(FE_TONEAREST, f_add, fa(a), fa(b), 0)) REF(r_sub_rz_f32, in_mode(FE_TOWARDZERO, f_sub, fa(a), fa(b), 0))
REF(r_mul_rm_f32, in_mode(FE_DOWNWARD, f_mul, fa(a), fa(b), 0)) REF(r_div_rp_f32, in_mode(FE_UPWARD, f_div, fa(a), fa(b), 0))
REF(r_fma_rn_f32, in_mode(FE_TONEAREST, f_fma, fa(a), fa(b), fa(c))) REF(r_fma_rz_f32, in_mode(FE_TOWARDZERO, f_fma, fa(a), fa(b), fa(c)))
REF(r_sqrt_rn_f32, in_mode(FE_TONEAREST, f_sqrt, fa(a), 0, 0))
REF(r_add_ftz_f32, fb(ftz(ftz(fa(a)) + ftz(fa(b)))))
REF(r_min_f32, fminmax32(fa(a), fa(b), 0)) REF(r_max_f32, fminmax32(fa(a), fa(b), 1))
/* neg/abs.f32 are FADD in ptxas's code: the sign changes, a NaN comes out canonical */
REF(r_abs_f32, fa(a) != fa(a) ? 0x7fffffffu : U32(a) & 0x7fffffffu) REF(r_neg_f32, fa(a) != fa(a) ? 0x7fffffffu : U32(a) ^ 0x80000000u)
REF(r_add_f64, db(da(a) + da(b))) REF(r_fma_f64, db(fma(da(a), da(b), da(c)))) REF(r_div_f64, db(da(a) / da(b)))
REF(r_cvt_rni_s32_f32, U32(f2i(nearbyint(fa(a)), -2147483648.0, 2147483647.0)))
REF(r_cvt_rzi_u32_f32, U32(f2i(trunc(fa(a)), 0, 4294967295.0)))
REF(r_cvt_rn_f32_s32, in_mode(FE_TONEAREST, f_cvt_s, fa(a), 0, 0))
REF(r_cvt_rz_f32_u32, in_mode(FE_TOWARDZERO, f_cvt_u, fa(a), 0, 0))
/* f32 -> f64 keeps a NaN's sign and payload and quiets it (an H100's F2F.F64.F32) */
REF(r_cvt_f64_f32, fa(a) != fa(a) ? ((uint64_t)(U32(a) >> 31) << 63 | 0x7ff8000000000000ull | (uint64_t)(U32(a) & 0x7fffff) << 29)
                                  : db((double)fa(a)))
REF(r_cvt_sat_s8_s32, sat_s8(S32(a))) REF(r_cvt_u16_u32, (uint16_t)a) REF(r_cvt_s32_s16, U32((int32_t)(int16_t)a))
#ifdef __FLT16_MAX__
static uint64_t h16(float f) { _Float16 h = (_Float16)f; uint16_t u; memcpy(&u, &h, 2); return (u & 0x7c00) == 0x7c00 && (u & 0x3ff) ? 0x7fff : u; }
REF(r_cvt_rn_f16_f32, h16(fa(a)))
REF(r_cvt_f32_f16, fb((float)({ _Float16 h; uint16_t u = (uint16_t)a; memcpy(&h, &u, 2); h; })))
static double hd(uint64_t v) { _Float16 h; uint16_t u = (uint16_t)v; memcpy(&h, &u, 2); return (double)h; }
static uint64_t hb(double d) { _Float16 h = (_Float16)d; uint16_t u; memcpy(&u, &h, 2); return (u & 0x7c00) == 0x7c00 && (u & 0x3ff) ? 0x7fff : u; }
REF(r_add_f16, hb(hd(a) + hd(b))) REF(r_mul_f16, hb(hd(a) * hd(b))) REF(r_fma_f16, hb(fma(hd(a), hd(b), hd(c))))
REF(r_fma_f16x2, hb(fma(hd(a), hd(b), hd(c))) | hb(fma(hd(a >> 16), hd(b >> 16), hd(c >> 16))) << 16)
#endif

static const optest optests[] = {
  { "add.u32", "u32 u32 u32", r_add_u32, 0 }, { "sub.s32", "s32 s32 s32", r_sub_s32, 0 },
  { "mul.lo.u32", "u32 u32 u32", r_mullo_u32, 0 }, { "mul.hi.u32", "u32 u32 u32", r_mulhi_u32, 0 },
  { "mul.hi.s32", "s32 s32 s32", r_mulhi_s32, 0 }, { "mul.wide.u32", "u64 u32 u32", r_mulwide_u32, 0 },
  { "mul.wide.s32", "s64 s32 s32", r_mulwide_s32, 0 }, { "mul.lo.u64", "u64 u64 u64", r_mullo_u64, 0 },
  { "mul.hi.u64", "u64 u64 u64", r_mulhi_u64, 0 }, { "mul.hi.s64", "s64 s64 s64", r_mulhi_s64, 0 },
  { "mad.lo.s32", "s32 s32 s32 s32", r_madlo_s32, 0 }, { "mad.hi.u32", "u32 u32 u32 u32", r_madhi_u32, 0 },
  { "mad.wide.s32", "s64 s32 s32 s64", r_madwide_s32, 0 },
  { "div.u32", "u32 u32 u32", r_div_u32, 0 }, { "div.s32", "s32 s32 s32", r_div_s32, 0 },
  { "rem.u32", "u32 u32 u32", r_rem_u32, 0 }, { "rem.s32", "s32 s32 s32", r_rem_s32, 0 },
  { "min.s32", "s32 s32 s32", r_min_s32, 0 }, { "max.u32", "u32 u32 u32", r_max_u32, 0 },
  { "abs.s32", "s32 s32", r_abs_s32, 0 }, { "neg.s32", "s32 s32", r_neg_s32, 0 },
  { "and.b32", "b32 b32 b32", r_and, 0 }, { "or.b32", "b32 b32 b32", r_or, 0 }, { "xor.b32", "b32 b32 b32", r_xor, 0 },
  { "not.b32", "b32 b32", r_not, 0 }, { "cnot.b32", "b32 b32", r_cnot, 0 },
  { "shl.b32", "b32 b32 b32", r_shl_b32, 1 }, { "shr.u32", "u32 u32 u32", r_shr_u32, 1 },
  { "shr.s32", "s32 s32 u32", r_shr_s32, 1 }, { "shl.b64", "b64 b64 b32", r_shl_b64, 1 },
  { "shr.s64", "s64 s64 u32", r_shr_s64, 1 },
  { "popc.b32", "u32 b32", r_popc32, 0 }, { "popc.b64", "u32 b64", r_popc64, 0 },
  { "clz.b32", "u32 b32", r_clz32, 0 }, { "clz.b64", "u32 b64", r_clz64, 0 }, { "brev.b32", "b32 b32", r_brev32, 0 },
  { "bfind.u32", "u32 u32", r_bfind_u32, 0 }, { "bfind.s32", "u32 s32", r_bfind_s32, 0 },
  { "bfind.shiftamt.u32", "u32 u32", r_bfind_amt, 0 },
  { "bfe.u32", "u32 u32 u32 u32", r_bfe_u32, 2 }, { "bfe.s32", "s32 s32 u32 u32", r_bfe_s32, 2 },
  { "bfi.b32", "b32 b32 b32 u32 u32", r_bfi, 2 }, { "prmt.b32", "b32 b32 b32 b32", r_prmt, 0 },
  { "lop3.b32", "b32 b32 b32 b32 b32", r_lop3, 0 },
  { "shf.l.wrap.b32", "b32 b32 b32 u32", r_shf_l_wrap, 2 }, { "shf.r.clamp.b32", "b32 b32 b32 u32", r_shf_r_clamp, 2 },
  { "sad.u32", "u32 u32 u32 u32", r_sad_u32, 0 }, { "mul24.lo.u32", "u32 u32 u32", r_mul24lo_u32, 0 },
  { "mul24.hi.s32", "s32 s32 s32", r_mul24hi_s32, 0 },
  { "setp.lt.s32", "pred s32 s32", r_setp_lt_s32, 0 }, { "setp.hs.u32", "pred u32 u32", r_setp_hs_u32, 0 },
  { "setp.gtu.f32", "pred f32 f32", r_setp_gtu_f32, 3 }, { "setp.ne.f32", "pred f32 f32", r_setp_ne_f32, 3 },
  { "add.rn.f32", "f32 f32 f32", r_add_rn_f32, 3 }, { "sub.rz.f32", "f32 f32 f32", r_sub_rz_f32, 3 },
  { "mul.rm.f32", "f32 f32 f32", r_mul_rm_f32, 3 }, { "div.rp.f32", "f32 f32 f32", r_div_rp_f32, 3 },
  { "fma.rn.f32", "f32 f32 f32 f32", r_fma_rn_f32, 3 }, { "fma.rz.f32", "f32 f32 f32 f32", r_fma_rz_f32, 3 },
  { "sqrt.rn.f32", "f32 f32", r_sqrt_rn_f32, 3 }, { "add.ftz.f32", "f32 f32 f32", r_add_ftz_f32, 3 },
  { "min.f32", "f32 f32 f32", r_min_f32, 3 }, { "max.f32", "f32 f32 f32", r_max_f32, 3 },
  { "abs.f32", "f32 f32", r_abs_f32, 3 }, { "neg.f32", "f32 f32", r_neg_f32, 3 },
  { "add.rn.f64", "f64 f64 f64", r_add_f64, 4 }, { "fma.rn.f64", "f64 f64 f64 f64", r_fma_f64, 4 },
  { "div.rn.f64", "f64 f64 f64", r_div_f64, 4 },
  { "cvt.rni.s32.f32", "s32 f32", r_cvt_rni_s32_f32, 3 }, { "cvt.rzi.u32.f32", "u32 f32", r_cvt_rzi_u32_f32, 3 },
  { "cvt.rn.f32.s32", "f32 s32", r_cvt_rn_f32_s32, 0 }, { "cvt.rz.f32.u32", "f32 u32", r_cvt_rz_f32_u32, 0 },
  { "cvt.f64.f32", "f64 f32", r_cvt_f64_f32, 3 }, { "cvt.sat.s8.s32", "b16 s32", r_cvt_sat_s8_s32, 0 },
  { "cvt.u16.u32", "u16 u32", r_cvt_u16_u32, 0 }, { "cvt.s32.s16", "s32 s16", r_cvt_s32_s16, 0 },
#ifdef __FLT16_MAX__
  { "cvt.rn.f16.f32", "b16 f32", r_cvt_rn_f16_f32, 3 }, { "cvt.f32.f16", "f32 b16", r_cvt_f32_f16, 0 },
  { "add.f16", "b16 b16 b16", r_add_f16, 0 }, { "mul.f16", "b16 b16 b16", r_mul_f16, 0 },
  { "fma.rn.f16", "b16 b16 b16 b16", r_fma_f16, 0 }, { "fma.rn.f16x2", "b32 b32 b32 b32", r_fma_f16x2, 0 },
#endif
};

/* Random operands with edge values mixed in; mode 1 small shift counts,
 * 2 small bit-field positions, 3 f32 values, 4 f64 values. */
static uint64_t operand(int mode, int k, int which)
{
  static const uint64_t edges[] = { 0, 1, 0xffffffffu, 0x80000000u, 0x7fffffffu, 0xffffffffffffffffull, 0x8000000000000000ull, 31, 32, 33, 63, 64 };
  uint64_t r = (uint64_t)rnd() << 32 | rnd();
  if (k < 12 && which == 0) r = edges[k];
  if (k < 144 && which == 1) r = edges[k / 12 % 12];
  if ((mode == 1 || mode == 2) && which > 0 && k % 2) r %= 70;
  if (mode == 3) {
    static const uint32_t fe[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u, 0x807fffffu, 0x3f800000u, 0x4f000000u, 0xcf000000u, 0x4f800000u, 0x3effffffu };
    if (k % 3 == 0) r = (uint32_t)(r & 0x807fffffu) | (uint32_t)((120 + rnd() % 16) << 23);
    if (k >= 144 && k % 7 == 1) r = fe[rnd() % 12];
  }
  if (mode == 4 && k % 2) { double d = ((double)(int32_t)rnd()) / (double)(rnd() | 1); memcpy(&r, &d, 8); }
  return r;
}

/* Run every table entry over 512 threads and compare each lane with its reference. */
static void test_optable(void)
{
  enum { NT = 512, NIN = 4 };
  size_t ntests = sizeof optests / sizeof optests[0];
  uint64_t *in = malloc(sizeof(uint64_t) * NT * NIN * ntests), *out = malloc(sizeof(uint64_t) * NT * ntests);
  begin("optable", 2);
  int pin = ptr(0), pout = ptr(1), i = gtid();
  for (size_t t = 0; t < ntests; t++) {
    char types[5][8];
    int n = sscanf(optests[t].types, "%7s %7s %7s %7s %7s", types[0], types[1], types[2], types[3], types[4]);
    lpx_operand ops[5];
    int dst = reg(types[0]);
    ops[0] = R(dst);
    for (int k = 1; k < n; k++) {
      int r = reg(types[k]), idx = reg("u32");
      E("mad.lo.u32", R(idx), R(i), N(NIN), N((double)(k - 1)));
      char ld[32];
      snprintf(ld, sizeof ld, "ld.global.%s", strcmp(types[k], "pred") ? types[k] : "u8");
      int a = elem(pin, idx, 8), off = reg("u64");
      E("add.s64", R(off), R(a), N((double)(t * NT * NIN * 8)));
      E(ld, R(r), A(off, 0));
      ops[k] = R(r);
    }
    int form = lpx_form_intern(ctx, optests[t].op);
    if (lpx_append(M, F, form, -1, 0, n, ops, 1, ++LINE) < 0) { fprintf(stderr, "%s: %s\n", optests[t].op, lpx_ctx_error(ctx)); failures++; continue; }
    int res = dst;
    if (!strcmp(types[0], "pred")) { res = reg("u32"); E("selp.u32", R(res), N(1), N(0), R(dst)); }
    int o = elem(pout, i, 8), oo = reg("u64");
    E("add.s64", R(oo), R(o), N((double)(t * NT * 8)));
    int wide = reg("u64");
    int bits = lpx_type_bits(lpx_reg_type(M, F, res));
    if (bits == 64) E("mov.b64", R(wide), R(res));
    else { char cv[32]; snprintf(cv, sizeof cv, "cvt.u64.%s", bits == 32 ? "u32" : "u16"); int z = reg(bits == 32 ? "u32" : "u16");
           E(bits == 32 ? "mov.b32" : "mov.b16", R(z), R(res)); E(cv, R(wide), R(z)); }
    E("st.global.u64", A(oo, 0), R(wide));
  }
  E0("ret");
  for (size_t t = 0; t < ntests; t++)
    for (int k = 0; k < NT; k++)
      for (int j = 0; j < NIN; j++) in[(t * NT + k) * NIN + j] = operand(optests[t].mode, k, j);
  uint64_t din = upload(in, sizeof(uint64_t) * NT * NIN * ntests), dout;
  CHECK(lpx_device_alloc(dev, sizeof(uint64_t) * NT * ntests, &dout) == 0);
  CHECK(launch("optable", NT / 128, 128, 0, 2, din, dout) == 0);
  CHECK(lpx_device_download(dev, out, dout, sizeof(uint64_t) * NT * ntests) == 0);
  for (size_t t = 0; t < ntests; t++) {
    int bad = 0;
    char types[5][8];
    sscanf(optests[t].types, "%7s", types[0]);
    int bits = strcmp(types[0], "pred") ? lpx_type_bits(lpx_type_lookup(types[0])) : 32;
    uint64_t mk = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    for (int k = 0; k < NT && bad < 3; k++) {
      const uint64_t *x = &in[(t * NT + k) * NIN];
      uint64_t want = optests[t].ref(x[0], x[1], x[2], x[3]) & mk, got = out[t * NT + k] & mk;
      if (got == want) continue;
      bad++;
      fprintf(stderr, "%s(0x%llx, 0x%llx, 0x%llx, 0x%llx) = 0x%llx, want 0x%llx\n", optests[t].op, (unsigned long long)x[0],
              (unsigned long long)x[1], (unsigned long long)x[2], (unsigned long long)x[3], (unsigned long long)got, (unsigned long long)want);
    }
    checks++;
    failures += bad != 0;
  }
  free(in); free(out);
  lpx_module_free(M);
}

/* ---------------------------------------------------------------- checks */

/* An out-of-bounds store names the instruction, the Lua line, the lane, the CTA and the allocation. */
static void test_oob(void)
{
  begin("oob", 1);
  int po = ptr(0), i = gtid();
  E("st.global.u32", A(elem(po, i, 4), 0), R(i));
  E0("ret");
  uint64_t d;
  CHECK(lpx_device_alloc(dev, 100 * 4, &d) == 0);
  CHECK(launch("oob", 1, 128, 0, 1, d) < 0);
  const char *msg = lpx_ctx_error(ctx);
  CHECK(strstr(msg, "kernels.lua:") && strstr(msg, "out-of-bounds global access of 4 bytes") &&
        strstr(msg, "0 bytes past the end of allocation") && strstr(msg, "lane 4 of warp 3") &&
        strstr(msg, "CTA (0,0,0)") && strstr(msg, "st.global.u32"));
  lpx_module_free(M);
}

/* An f32 with subnormals flushed to a zero of its sign. */
static float flush32(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* cp.reduce.async.bulk from shared memory into global rows: .add.u32,
 * .min.s32 and .add.f32 (subnormal inputs flush) of the same 256 bytes;
 * then a destination that is not 16-byte aligned is reported. */
static void test_bulk_reduce(void)
{
  begin("bred", 2);
  lpx_var_decl(M, F, "shared", "sb", T("b32"), 128, 64, 0);
  int ps = ptr(0), pd = ptr(1), t = reg("u32"), v = reg("u32"), a = reg("u32"), base = reg("u32"), p = reg("pred");
  lpx_operand sym = { LPX_OPD_SYM, -1, lpx_sym(M, "sb"), 0, 0, 0 };
  E("mov.u32", R(t), SP("%tid.x"));
  E("ld.global.u32", R(v), A(elem(ps, t, 4), 0));
  E("mov.u32", R(base), sym);
  E("shl.b32", R(a), R(t), N(2));
  E("add.u32", R(a), R(a), R(base));
  E("st.shared.u32", A(a, 0), R(v));
  E0("fence.proxy.async.shared::cta");
  E("bar.sync", N(0));
  E("setp.ne.u32", R(p), R(t), N(0));
  G(p, "bra", L("out"));
  E("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32", A(pd, 0), AS("sb", 0), N(256));
  E("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.s32", A(pd, 256), AS("sb", 0), N(256));
  E("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32", A(pd, 512), AS("sb", 0), N(256));
  E0("cp.async.bulk.commit_group");
  E("cp.async.bulk.wait_group", N(0));
  lpx_label_place(M, F, lpx_sym(M, "out"));
  E0("ret");
  uint32_t src[64], dst[192], want[192], got[192];
  for (int i = 0; i < 64; i++) {
    float f = 1.0f + (float)(rnd() % 1000) / 1000.0f, g = -2.0f + (float)(rnd() % 1000) / 500.0f;
    if (i == 0) { f = 3e-39f; g = 4e-39f; }        /* both subnormal: flushed, the sum is 0 */
    memcpy(&src[i], &f, 4);
    dst[i] = rnd(); dst[64 + i] = rnd(); memcpy(&dst[128 + i], &g, 4);
    want[i] = dst[i] + src[i];
    want[64 + i] = (int32_t)dst[64 + i] < (int32_t)src[i] ? dst[64 + i] : src[i];
    float r = flush32(flush32(g) + flush32(f));
    memcpy(&want[128 + i], &r, 4);
  }
  uint64_t ds = upload(src, sizeof src), dd = upload(dst, sizeof dst);
  CHECK(launch("bred", 1, 64, 0, 2, ds, dd) == 0);
  CHECK(lpx_device_download(dev, got, dd, sizeof got) == 0);
  CHECK(memcmp(got, want, sizeof got) == 0);
  CHECK(launch("bred", 1, 64, 0, 2, ds, dd + 8) < 0 && strstr(lpx_ctx_error(ctx), "16-byte aligned") &&
        strstr(lpx_ctx_error(ctx), "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32"));
  lpx_module_free(M);
}

/* tensormap.replace edits the emulator's map record in global memory
 * (address at byte 16, box_dim[1] at 46, element size with elemtype);
 * griddepcontrol runs as a no-op; memory that holds no map is reported. */
static void test_tensormap_replace(void)
{
  M = lpx_module_new(ctx, 83, "sm_90a", 64);
  lpx_module_file(M, "kernels.lua");
  F = lpx_func_begin(M, "tmr", 1, 1);
  LINE = 100;
  lpx_func_param(M, F, "p0", T("u64"), 0, 0);
  int pm = ptr(0), a = reg("u64");
  E0("griddepcontrol.wait");
  E("mov.u64", R(a), N(0x7f0000001230));
  E("tensormap.replace.tile.global_address.global.b1024.b64", A(pm, 0), R(a));
  E("tensormap.replace.tile.box_dim.global.b1024.b32", A(pm, 0), N(1), N(96));
  E("tensormap.replace.tile.elemtype.global.b1024.b32", A(pm, 0), N(10));   /* .bf16 in the ISA's numbering */
  E0("griddepcontrol.launch_dependents");
  E0("ret");
  uint8_t map[128], got[128];
  memset(map, 0, sizeof map);
  uint32_t magic = 0x414d5458u;
  memcpy(map, &magic, 4);
  map[4] = 2; map[5] = 7; map[9] = 4;          /* rank 2, f32, 4-byte elements */
  uint64_t dm = upload(map, sizeof map);
  CHECK(launch("tmr", 1, 1, 0, 1, dm) == 0);
  CHECK(lpx_device_download(dev, got, dm, sizeof got) == 0);
  uint64_t addr;
  uint16_t box1;
  memcpy(&addr, got + 16, 8);
  memcpy(&box1, got + 46, 2);
  CHECK(addr == 0x7f0000001230 && box1 == 96 && got[5] == 9 && got[9] == 2);
  memset(map, 0x5a, sizeof map);
  CHECK(lpx_device_upload(dev, dm, map, sizeof map) == 0);
  CHECK(launch("tmr", 1, 1, 0, 1, dm) < 0 && strstr(lpx_ctx_error(ctx), "holds neither a tensor map luaptx built nor 128 zero bytes") &&
        strstr(lpx_ctx_error(ctx), "kernels.lua:104: tensormap.replace.tile.global_address"));
  lpx_module_free(M);
}

/* A tiled 2-D bf16 description of rows x cols at addr (innermost first,
 * as pyptx.tma.describe fills it): box 64 x 64, 128B swizzle. */
static lpx_tma_desc tma_2d(uint64_t addr, uint64_t rows, uint64_t cols)
{
  lpx_tma_desc d;
  memset(&d, 0, sizeof d);
  d.rank = 2; d.dtype = lpx_tma_dtype_lookup("bf16"); d.global_address = addr;
  d.dims[0] = cols; d.dims[1] = rows; d.strides[0] = cols * 2;
  d.box[0] = d.box[1] = 64; d.elem_strides[0] = d.elem_strides[1] = 1; d.swizzle = 3;
  return d;
}

/* Encode d as tensor "A"; the record, or a zeroed one on failure. */
static emu_tmap tma_encode(const lpx_tma_desc *d, int *rc)
{
  uint8_t out[128];
  emu_tmap t;
  memset(out, 0xee, sizeof out);
  *rc = lpx_device_tma_encode(dev, "A", d, out);
  memcpy(&t, out, sizeof t);
  if (*rc) memset(&t, 0, sizeof t);
  return t;
}

/* The emu device encodes a TMA description in C (its tma_encode slot, as
 * the driver's cuTensorMapEncode* on CUDA): every field of the record, an
 * im2col map's corners, the address patch, and each refusal's message. */
static void test_tma_encode(void)
{
  int rc;
  lpx_tma_desc d = tma_2d(0x7f0000010000ull, 128, 512);
  d.elem_strides[1] = 2;
  emu_tmap t = tma_encode(&d, &rc);
  CHECK(rc == 0 && t.magic == EMU_TMAP_MAGIC && t.rank == 2 && t.dtype == 9 && t.esize == 2 && t.swizzle == 3);
  CHECK(t.mode == 0 && t.interleave == 0 && t.oob == 0 && t.address == 0x7f0000010000ull);
  CHECK(t.dims[0] == 512 && t.dims[1] == 128 && t.dims[2] == 0 && t.strides[0] == 1024 && t.strides[1] == 0);
  CHECK(t.box[0] == 64 && t.box[1] == 64 && t.elem_strides[0] == 1 && t.elem_strides[1] == 2 && t.elem_strides[4] == 1);
  uint8_t zero[25] = { 0 };
  CHECK(t.edited == 0 && memcmp(t.pad, zero, sizeof zero) == 0);
  /* im2col, rank 4 (NHWC): pixel-box corners W first, channels and pixels */
  lpx_tma_desc x;
  memset(&x, 0, sizeof x);
  x.rank = 4; x.dtype = lpx_tma_dtype_lookup("f16"); x.mode = 1; x.global_address = 4096;
  uint64_t dims[4] = { 64, 56, 56, 8 };
  for (int i = 0; i < 4; i++) x.dims[i] = dims[i];
  x.strides[0] = 128; x.strides[1] = 128 * 56; x.strides[2] = 128 * 56 * 56;
  x.lower[0] = -1; x.lower[1] = -2; x.upper[0] = 1; x.upper[1] = 2; x.channels = 64; x.pixels = 128;
  t = tma_encode(&x, &rc);
  CHECK(rc == 0 && t.mode == 1 && t.rank == 4 && t.esize == 2 && t.lower[0] == -1 && t.lower[1] == -2 && t.upper[1] == 2);
  CHECK(t.channels == 64 && t.pixels == 128 && t.strides[2] == 128 * 56 * 56 && t.dims[3] == 8);
  /* the address patch (cuTensorMapReplaceAddress) */
  uint8_t map[128];
  CHECK(lpx_device_tma_encode(dev, NULL, &d, map) == 0 && lpx_device_tma_replace_address(dev, "A", map, 0x5000) == 0);
  memcpy(&t, map, sizeof t);
  CHECK(t.address == 0x5000 && t.dims[0] == 512);
  CHECK(lpx_device_tma_replace_address(dev, "A", map, 0x5008) < 0
        && strcmp(lpx_ctx_error(ctx), "TMA descriptor for A: global address 0x5008 is not 16-byte aligned") == 0);
  memset(map, 0, sizeof map);
  CHECK(lpx_device_tma_replace_address(dev, "A", map, 0x5000) < 0
        && strstr(lpx_ctx_error(ctx), "TMA descriptor for A: the 128 bytes hold no tensor map the emulator encoded"));
  /* a 32B interleave wants 32-byte aligned addresses, patched ones too */
  lpx_tma_desc il;
  memset(&il, 0, sizeof il);
  il.rank = 3; il.dtype = lpx_tma_dtype_lookup("bf16"); il.interleave = 2; il.swizzle = 1; il.global_address = 0x4000;
  il.dims[0] = 16; il.dims[1] = 8; il.dims[2] = 4; il.strides[0] = 32; il.strides[1] = 256;
  il.box[0] = 16; il.box[1] = 8; il.box[2] = 4;
  CHECK(lpx_device_tma_encode(dev, "B", &il, map) == 0 && lpx_device_tma_replace_address(dev, "B", map, 0x5020) == 0);
  CHECK(lpx_device_tma_replace_address(dev, "B", map, 0x5010) < 0
        && strcmp(lpx_ctx_error(ctx), "TMA descriptor for B: global address 0x5010 is not 32-byte aligned") == 0);
  /* refusals: validated by lpx_tma_validate first, naming the tensor */
  d.box[0] = 300;
  tma_encode(&d, &rc);
  CHECK(rc < 0 && strcmp(lpx_ctx_error(ctx), "TMA descriptor for A: box [0, innermost first] = 300 must be in 1..256") == 0);
  d = tma_2d(0x7f0000010008ull, 128, 512);
  tma_encode(&d, &rc);
  CHECK(rc < 0 && strcmp(lpx_ctx_error(ctx), "TMA descriptor for A: global address 0x7f0000010008 is not 16-byte aligned") == 0);
  d = tma_2d(4096, 128, 512);
  CHECK(lpx_device_tma_encode(dev, "", &(lpx_tma_desc){ .rank = 6 }, map) < 0
        && strstr(lpx_ctx_error(ctx), "TMA descriptor for tensor: rank = 6; TMA supports ranks 1 to 5"));
  d.dims[1] = 1ull << 32;   /* the driver takes 2^32; the record holds 32-bit dims */
  tma_encode(&d, &rc);
  CHECK(rc < 0 && strcmp(lpx_ctx_error(ctx), "TMA descriptor for A: dims [1, innermost first] = 4294967296; the emulator's "
                         "tensor maps hold dimensions up to 2^32-1") == 0);
}

/* A misaligned load is reported. */
static void test_misaligned(void)
{
  begin("mis", 1);
  int po = ptr(0), v = reg("u32");
  E("ld.global.u32", R(v), A(po, 2));
  E0("ret");
  uint64_t d;
  CHECK(lpx_device_alloc(dev, 64, &d) == 0);
  CHECK(launch("mis", 1, 1, 0, 1, d) < 0 && strstr(lpx_ctx_error(ctx), "misaligned global access"));
  lpx_module_free(M);
}

/* A shared-memory race (warp 1 reads what warp 0 wrote, no barrier). */
static void test_race(void)
{
  begin("race", 0);
  lpx_var_decl(M, F, "shared", "s", T("u32"), 4, 64, 0);
  int t = reg("u32"), a = reg("u32"), v = reg("u32"), base = reg("u32");
  lpx_operand sym = { LPX_OPD_SYM, -1, lpx_sym(M, "s"), 0, 0, 0 };
  E("mov.u32", R(base), sym);
  E("mov.u32", R(t), SP("%tid.x"));
  E("shl.b32", R(a), R(t), N(2));
  E("add.u32", R(a), R(a), R(base));
  E("st.shared.u32", A(a, 0), R(t));
  E("bar.sync", N(0));
  int o = reg("u32");
  E("xor.b32", R(o), R(a), N(128));       /* the other warp's slot: fine after the barrier */
  E("ld.shared.u32", R(v), A(o, 0));
  E("st.shared.u32", A(a, 0), R(v));      /* but this write races with the other warp's read */
  E0("ret");
  CHECK(launch("race", 1, 64, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "shared-memory race") &&
        strstr(lpx_ctx_error(ctx), "kernels.lua:10"));
  lpx_module_free(M);
}

/* An unwritten register read. */
static void test_uninit(void)
{
  begin("uninit", 0);
  int a = reg("u32"), b = reg("u32");
  E("add.u32", R(b), R(a), N(1));
  E0("ret");
  CHECK(launch("uninit", 1, 32, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "reads %r1, which this thread never wrote"));
  lpx_module_free(M);
}

/* Half the threads skip the barrier: a deadlock report, not a hang. */
static void test_deadlock(void)
{
  begin("dead", 0);
  int t = reg("u32"), p = reg("pred");
  E("mov.u32", R(t), SP("%tid.x"));
  E("setp.lt.u32", R(p), R(t), N(32));
  G(p, "bra", L("skip"));
  E("bar.sync", N(0));
  lpx_label_place(M, F, lpx_sym(M, "skip"));
  E0("ret");
  CHECK(launch("dead", 1, 64, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "deadlock") &&
        strstr(lpx_ctx_error(ctx), "32 arrived") && strstr(lpx_ctx_error(ctx), "bar.sync"));
  lpx_module_free(M);
}

/* An endless loop ends at the instruction budget. */
static void test_budget(void)
{
  begin("spin", 0);
  int x = reg("u32");
  E("mov.u32", R(x), N(0));
  lpx_label_place(M, F, lpx_sym(M, "top"));
  E("add.u32", R(x), R(x), N(1));
  E("bra", L("top"));
  E0("ret");
  CHECK(lpx_device_set_option(dev, "budget", 100000) == 0);
  CHECK(launch("spin", 2, 64, 0, 0) < 0 && strstr(lpx_ctx_error(ctx), "instruction budget exhausted") &&
        strstr(lpx_ctx_error(ctx), "kernels.lua:10"));
  CHECK(lpx_device_set_option(dev, "budget", 1000000000) == 0);
  CHECK(lpx_device_set_option(dev, "bogus", 1) < 0 && strstr(lpx_ctx_error(ctx), "budget"));
  lpx_module_free(M);
}

/* The device interface's own errors. */
static void test_device_api(void)
{
  CHECK(lpx_device_open(ctx, "cuda") == NULL || 1);
  CHECK(lpx_device_open(ctx, "tpu") == NULL && strstr(lpx_ctx_error(ctx), "valid"));
  uint64_t d, bad;
  CHECK(lpx_device_alloc(dev, 16, &d) == 0);
  CHECK(lpx_device_upload(dev, d + 8, &bad, 16) < 0 && strstr(lpx_ctx_error(ctx), "past its end"));
  CHECK(lpx_device_free(dev, d) == 0);
  CHECK(lpx_device_free(dev, d) < 0);
  int32_t e0, e1;
  double ms = -1;
  CHECK(lpx_device_event_record(dev, &e0) == 0 && lpx_device_event_record(dev, &e1) == 0);
  CHECK(lpx_device_event_elapsed(dev, e0, e1, &ms) == 0 && ms >= 0);
  CHECK(strstr(lpx_device_describe(dev), "emu") != NULL);
}

int main(void)
{
  ctx = lpx_ctx_new();
  dev = lpx_device_open(ctx, "emu");
  CHECK(dev != NULL);
  if (!dev) return 1;
  test_device_api();
  test_elementwise();
  test_reduce();
  test_divergence();
  test_atomics();
  test_int_corners();
  test_conversions();
  test_fp8_roundtrip();
  test_specials();
  test_optable();
  test_local();
  test_oob();
  test_misaligned();
  test_bulk_reduce();
  test_tensormap_replace();
  test_tma_encode();
  test_race();
  test_uninit();
  test_deadlock();
  test_budget();
  (void)NR; (void)VEC; (void)PIPE;
  lpx_device_close(dev);
  lpx_ctx_free(ctx);
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
