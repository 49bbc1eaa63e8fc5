/* Device-function calls: a call runs the callee for the calling lanes to
 * completion in a warp of its own (its registers, its frame), nested in
 * the caller's step; .param arguments and return values are copied
 * between the caller's and the callee's per-thread frames. Calls to the
 * extern functions CUDA's runtime provides (vprintf, __assertfail) run
 * here too. */
#include "emu.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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


/* ------------------------------------------------------ extern functions */

#define EMU_STR_MAX 4096   /* the longest format or %s string read */
#define EMU_LINE_MAX 8192  /* the longest vprintf line kept */

/* Lane l's argument j of an extern call: the low n bytes (4 or 8) of its .param. */
static int extern_arg(emu_warp *w, const emu_inst *in, int l, const call_ops *c, int j, uint32_t n, uint64_t *v)
{
  const emu_op *o = &c->args[j];
  if (o->space != EMU_SP_FRAME) return lpx_emu_fail(w, in, l, "call operand %d is not a call-site .param", j + 1);
  uint64_t slot = EMU_R(w, o->reg)[l];
  *v = 0;
  memcpy(v, w->frame + (size_t)l * w->p->frame_size + slot, n);
  return 0;
}

/* Read a NUL-terminated string at generic address a for lane l into out
 * (cut at cap - 1 bytes); 0, or -1 when its bytes are not readable. */
static int read_string(emu_warp *w, const emu_inst *in, int l, uint64_t a, char *out, size_t cap)
{
  size_t n = 0;
  for (; n + 1 < cap; n++) {
    const uint8_t *p = lpx_emu_addr(w, in, l, EMU_SP_GENERIC, a + n, 1, 0);
    if (!p) return -1;
    if (!*p) break;
    out[n] = (char)*p;
  }
  out[n] = '\0';
  return 0;
}

/* One conversion of a printf format: flags, width, precision, length, letter. */
typedef struct fmt_spec { char text[32]; int len; char conv; } fmt_spec;

/* Parse the conversion at s (just after '%'); returns its length, or 0 if malformed. */
static size_t parse_spec(const char *s, fmt_spec *sp)
{
  size_t i = 0, t = 0;
  sp->text[t++] = '%';
  while (s[i] && strchr("-+ #0", s[i]) && t < 20) sp->text[t++] = s[i++];
  while (s[i] >= '0' && s[i] <= '9' && t < 20) sp->text[t++] = s[i++];
  if (s[i] == '.') { sp->text[t++] = s[i++]; while (s[i] >= '0' && s[i] <= '9' && t < 24) sp->text[t++] = s[i++]; }
  sp->len = 0;   /* 1 h, 2 hh, 3 l, 4 ll */
  if (s[i] == 'h') { i++; sp->len = 1; if (s[i] == 'h') { i++; sp->len = 2; } }
  else if (s[i] == 'l') { i++; sp->len = 3; if (s[i] == 'l') { i++; sp->len = 4; } }
  else if (s[i] == 'L' || s[i] == 'z' || s[i] == 'j' || s[i] == 't') { i++; sp->len = 4; }
  if (!s[i] || !strchr("diuxXocspfFeEgGaA%", s[i])) return 0;
  sp->conv = s[i++];
  sp->text[t] = '\0';
  return i;
}

/* The bytes a conversion takes from vprintf's argument buffer: doubles,
 * pointers and l/ll integers 8 (each at its own alignment), the rest 4. */
static uint32_t spec_size(const fmt_spec *sp)
{
  if (strchr("spfFeEgGaA", sp->conv)) return 8;
  return strchr("diuxXo", sp->conv) && sp->len >= 3 ? 8 : 4;
}

/* Append what one conversion prints for value v to out (at *n, cap). */
static int format_one(emu_warp *w, const emu_inst *in, int l, const fmt_spec *sp, uint64_t v, char *out, size_t *n, size_t cap)
{
  char f[40], s[EMU_STR_MAX];
  int k = 0;
  size_t room = cap - *n;
  if (strchr("fFeEgGaA", sp->conv)) { snprintf(f, sizeof f, "%s%c", sp->text, sp->conv); k = snprintf(out + *n, room, f, emu_u2d(v)); }
  else if (sp->conv == 's') {
    if (v && read_string(w, in, l, v, s, sizeof s)) return -1;
    snprintf(f, sizeof f, "%ss", sp->text);
    k = snprintf(out + *n, room, f, v ? s : "(null)");
  } else if (sp->conv == 'p') { snprintf(f, sizeof f, "%sp", sp->text); k = snprintf(out + *n, room, f, (void *)(uintptr_t)v); }
  else if (sp->conv == 'c') { snprintf(f, sizeof f, "%sc", sp->text); k = snprintf(out + *n, room, f, (int)(unsigned char)v); }
  else {
    int sgn = sp->conv == 'd' || sp->conv == 'i';
    int64_t sv = sp->len >= 3 ? (int64_t)v : sp->len == 2 ? (int8_t)v : sp->len == 1 ? (int16_t)v : (int32_t)v;
    uint64_t uv = sp->len >= 3 ? v : sp->len == 2 ? (uint8_t)v : sp->len == 1 ? (uint16_t)v : (uint32_t)v;
    snprintf(f, sizeof f, "%sll%c", sp->text, sp->conv);
    k = sgn ? snprintf(out + *n, room, f, (long long)sv) : snprintf(out + *n, room, f, (unsigned long long)uv);
  }
  if (k > 0) *n += (size_t)k < room ? (size_t)k : room - 1;
  return 0;
}

/* Format vprintf's fmt with the argument buffer at generic address buf, as
 * CUDA's printf does, into out; the number of arguments taken, or -1. */
static int vprintf_format(emu_warp *w, const emu_inst *in, int l, const char *fmt, uint64_t buf, char *out, size_t cap)
{
  size_t n = 0;
  uint32_t off = 0;
  int args = 0;
  out[0] = '\0';
  for (const char *s = fmt; *s && n + 1 < cap;) {
    fmt_spec sp;
    size_t used = *s == '%' ? parse_spec(s + 1, &sp) : 0;
    if (!used || sp.conv == '%') { out[n++] = *s == '%' && used ? '%' : *s; s += used ? 1 + used : 1; continue; }
    s += 1 + used;
    uint32_t size = spec_size(&sp);
    off = (off + size - 1) & ~(size - 1);
    const uint8_t *p = buf ? lpx_emu_addr(w, in, l, EMU_SP_GENERIC, buf + off, size, 0) : NULL;
    if (!p) {
      if (!buf) lpx_emu_fail(w, in, l, "vprintf: the format takes argument %d but the call passes no argument buffer", args + 1);
      return -1;
    }
    uint64_t v = 0;
    memcpy(&v, p, size);
    off += size;
    args++;
    if (format_one(w, in, l, &sp, v, out, &n, cap)) return -1;
  }
  out[n] = '\0';
  return args;
}

/* Where a printed line comes from: "file:line: " for a traced instruction
 * (its Lua line), else nothing; then the thread and its CTA. */
static void line_prefix(const emu_warp *w, const emu_inst *in, int l, char *out, size_t cap)
{
  const lpx_item *it = in->item >= 0 ? &w->p->f->items[in->item] : NULL;
  const lpx_module *m = w->p->m;
  const emu_cta *c = w->cta;
  const uint32_t *bd = c->L->cfg.block;
  uint32_t t = w->id * 32 + (uint32_t)l;
  int k = 0;
  if (it && it->file > 0 && (size_t)it->file <= m->nfiles)
    k = snprintf(out, cap, "%s:%d: ", lpx_strtab_get(&m->syms, m->files[it->file - 1]), it->line);
  snprintf(out + k, cap - (size_t)k, "[thread (%u,%u,%u), CTA (%u,%u,%u)] ", t % bd[0], t / bd[0] % bd[1], t / (bd[0] * bd[1]),
           c->ctaid[0], c->ctaid[1], c->ctaid[2]);
}

/* Store lanes' 32-bit result in the call's return .param, if it has one. */
static void extern_return(emu_warp *w, int l, const call_ops *c, int32_t v)
{
  if (c->nret < 1 || c->rets[0].space != EMU_SP_FRAME) return;
  memcpy(w->frame + (size_t)l * w->p->frame_size + EMU_R(w, c->rets[0].reg)[l], &v, 4);
}

/* vprintf(fmt, args): each calling thread's line, formatted as CUDA's
 * printf formats it, written whole to stdout (lanes in order), after the
 * thread and (for a traced kernel) the Lua line; returns the number of
 * arguments taken, -1 for a null format. */
static int call_vprintf(emu_warp *w, const emu_inst *in, uint32_t m, const call_ops *c)
{
  static char line[EMU_LINE_MAX + 512];
  char fmt[EMU_STR_MAX], text[EMU_LINE_MAX], pre[512];
  EMU_EACH(m, {
    uint64_t f, buf;
    if (extern_arg(w, in, l, c, 0, 8, &f) || extern_arg(w, in, l, c, 1, 8, &buf)) return -1;
    int args = -1;
    if (f) {
      if (read_string(w, in, l, f, fmt, sizeof fmt)) return -1;
      if ((args = vprintf_format(w, in, l, fmt, buf, text, sizeof text)) < 0) return -1;
      size_t n = strlen(text);
      line_prefix(w, in, l, pre, sizeof pre);
      flockfile(stdout);
      int k = snprintf(line, sizeof line, "%s%s%s", pre, text, n && text[n - 1] == '\n' ? "" : "\n");
      fwrite(line, 1, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1, stdout);
      funlockfile(stdout);
    }
    extern_return(w, l, c, args);
  });
  return 0;
}

/* __assertfail(message, file, line, function, char size): stop the launch
 * with what CUDA's runtime prints for a failed device-side assert. */
static int call_assertfail(emu_warp *w, const emu_inst *in, uint32_t m, const call_ops *c)
{
  int l = __builtin_ctz(m);
  uint64_t msg, file, line, fn;
  char smsg[1024], sfile[1024], sfn[1024];
  if (extern_arg(w, in, l, c, 0, 8, &msg) || extern_arg(w, in, l, c, 1, 8, &file) || extern_arg(w, in, l, c, 2, 4, &line) ||
      extern_arg(w, in, l, c, 3, 8, &fn)) return -1;
  if (read_string(w, in, l, msg, smsg, sizeof smsg) || read_string(w, in, l, file, sfile, sizeof sfile) ||
      read_string(w, in, l, fn, sfn, sizeof sfn)) return -1;
  const emu_cta *cta = w->cta;
  const uint32_t *bd = cta->L->cfg.block;
  uint32_t t = w->id * 32 + (uint32_t)l;
  return lpx_emu_fail(w, in, l, "device-side assert triggered: %s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.",
                      sfile, (unsigned)line, sfn, cta->ctaid[0], cta->ctaid[1], cta->ctaid[2], t % bd[0], t / bd[0] % bd[1],
                      t / (bd[0] * bd[1]), smsg);
}

/* The extern functions the emulator provides: name, handler, argument count. */
#define EMU_EXTERNS(X) X("vprintf", call_vprintf, 2) X("__assertfail", call_assertfail, 5)

/* call to an extern function (a .func with no body in the module): the
 * ones CUDA's runtime provides run here; any other stops the launch when
 * reached, naming it. */
int lpx_emu_call_extern(emu_warp *w, const emu_inst *in, uint32_t m)
{
  const char *name = lpx_strtab_get(&w->p->m->syms, in->target);
  call_ops c = call_operands(w, in);
#define X(n, fn, count) \
  if (strcmp(name, n) == 0) { \
    if (c.nargs != count) return lpx_emu_fail(w, in, -1, "passes %d argument(s); %s takes %d", c.nargs, n, count); \
    return fn(w, in, m, &c); \
  }
  EMU_EXTERNS(X)
#undef X
  return lpx_emu_fail(w, in, -1, "calls the extern function %s, which has no body in this module; the emulator provides only "
                      "vprintf (printf) and __assertfail (assert), and a GPU would need it linked in", name);
}
