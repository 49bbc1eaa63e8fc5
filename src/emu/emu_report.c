/* Failure reports: where an instruction is ("file:line: text") and the
 * one error of a launch (the lowest-numbered failing CTA's first). A leaf
 * of the emulator: handlers, checks, the scheduler and the runner call it;
 * it calls only the core's emitter and the host's C library. */
#include "emu.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* "file:line: `instruction`" for a decoded instruction. */
void lpx_emu_where(const emu_prog *p, const emu_inst *in, char *out, size_t cap)
{
  if (!in || in->item < 0) { snprintf(out, cap, "%s: end of kernel", p->name); return; }
  const lpx_item *it = &p->f->items[in->item];
  lpx_buf b = { 0, 0, 0 };
  lpx_emit_item(&b, p->m, p->f, it);
  char *text = b.p ? b.p : (char *)"?";
  while (*text == '\t') text++;
  size_t n = strlen(text);
  while (n && (text[n - 1] == '\n' || text[n - 1] == ';')) text[--n] = '\0';
  for (char *c = text; *c; c++) if (*c == '\t') *c = ' ';
  if (it->file > 0 && (size_t)it->file <= p->m->nfiles)
    snprintf(out, cap, "%s:%d: %s", lpx_strtab_get(&p->m->syms, p->m->files[it->file - 1]), it->line, text);
  else if (it->line > 0)   /* parsed PTX without a registered file: its line */
    snprintf(out, cap, "%s, PTX line %d: %s", p->name, it->line, text);
  else
    snprintf(out, cap, "%s: %s", p->name, text);
  lpx_buf_free(&b);
}

/* The grid index of the CTA this host thread runs (for ordering errors). */
static __thread uint64_t running_cta;

/* Name the CTA this host thread runs from now on (the runner calls it). */
void lpx_emu_report_cta(uint64_t cta) { running_cta = cta; }

/* Record an error; the lowest-numbered failing CTA's first error wins, so
 * the report does not depend on how host threads interleave. */
static void set_error(emu_launch *L, const char *msg)
{
  pthread_mutex_lock(&L->lock);
  if (!L->failed || running_cta < L->fail_cta) {
    snprintf(L->msg, sizeof L->msg, "%s", msg);
    __atomic_store_n(&L->fail_cta, running_cta, __ATOMIC_RELAXED);
    __atomic_store_n(&L->failed, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&L->lock);
}

/* Should the CTA this thread runs stop because a lower-numbered one failed? */
int lpx_emu_stop_for_error(const emu_launch *L)
{
  return __atomic_load_n(&L->failed, __ATOMIC_ACQUIRE) && __atomic_load_n(&L->fail_cta, __ATOMIC_RELAXED) <= running_cta;
}

/* Fail the launch with a message that is not about one instruction. */
int lpx_emu_fail_raw(emu_launch *L, const char *fmt, ...)
{
  char msg[EMU_MSG];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_error(L, msg);
  return -1;
}

/* Fail the launch at an instruction: location, text, message, thread, CTA. */
int lpx_emu_fail(emu_warp *w, const emu_inst *in, int lane, const char *fmt, ...)
{
  char where[512], what[768], who[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  lpx_emu_where(w->p, in, where, sizeof where);
  const emu_cta *c = w->cta;
  const uint32_t *bd = c->L->cfg.block;
  if (lane >= 0) {
    uint32_t t = w->id * 32 + (uint32_t)lane;
    snprintf(who, sizeof who, "thread (%u,%u,%u) = lane %d of warp %u, CTA (%u,%u,%u)", t % bd[0], t / bd[0] % bd[1],
             t / (bd[0] * bd[1]), lane, w->id, c->ctaid[0], c->ctaid[1], c->ctaid[2]);
  } else {
    snprintf(who, sizeof who, "warp %u, CTA (%u,%u,%u)", w->id, c->ctaid[0], c->ctaid[1], c->ctaid[2]);
  }
  char msg[EMU_MSG];
  snprintf(msg, sizeof msg, "%s: %s [%s]", where, what, who);
  set_error(c->L, msg);
  return -1;
}

/* The fix a message about in names: the DSL call when in was traced
 * (it has a Lua line, or its module was never parsed), the PTX
 * instruction in parsed (foreign) PTX. */
const char *lpx_emu_spell(const emu_warp *w, const emu_inst *in, const char *dsl, const char *ptx)
{
  return (in && in->item >= 0 && w->p->f->items[in->item].file > 0) || !w->p->m->nlex ? dsl : ptx;
}
