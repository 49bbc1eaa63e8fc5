/* alloca, stacksave and stackrestore: a per-thread stack in the local
 * space, growing down from EMU_STACK_TOP (at most EMU_STACK_MAX bytes).
 * Each lane's stack pointer is EMU_STACK_TOP - sdepth; memory from it up
 * to the top is the thread's, anything below is not allocated and an
 * access there is reported. A device function's allocas end with it (its
 * warp, and so its stack, is freed on return). */
#include "emu.h"
#include <inttypes.h>
#include <stdlib.h>

#define D(k) EMU_R(w, EMU_OP(w, in, k)->reg)
#define HANDLER(name) static int name(emu_warp *w, const emu_inst *in, uint32_t m)

/* Make every lane's stack hold at least need bytes below the top: each
 * lane's bytes move to the end of its larger region. */
static int stack_grow(emu_warp *w, const emu_inst *in, int lane, uint32_t need)
{
  if (need <= w->stack_cap) return 0;
  uint32_t cap = w->stack_cap ? w->stack_cap : 1024;
  while (cap < need) cap *= 2;
  uint8_t *s = malloc((size_t)cap * 32);
  if (!s) return lpx_emu_fail(w, in, lane, "out of host memory for %u bytes of alloca stack per thread", cap);
  for (int l = 0; l < 32 && w->stack; l++)
    memcpy(s + (size_t)l * cap + (cap - w->stack_cap), w->stack + (size_t)l * w->stack_cap, w->stack_cap);
  free(w->stack);
  w->stack = s;
  w->stack_cap = cap;
  return 0;
}

/* Host pointer for n bytes at local offset off of a lane's stack, or NULL
 * (error set) when they are not between its stack pointer and the top. */
uint8_t *lpx_emu_stack_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n)
{
  uint64_t sp = EMU_STACK_TOP - w->sdepth[lane];
  if (off < sp || off + n > EMU_STACK_TOP) {
    lpx_emu_fail(w, in, lane, "local access of %u bytes at 0x%" PRIx64 " is outside the thread's alloca stack "
                 "(stack pointer 0x%" PRIx64 ", top 0x%x): never allocated, or freed by stackrestore", n, off, sp, EMU_STACK_TOP);
    return NULL;
  }
  return w->stack + (size_t)lane * w->stack_cap + (off - (EMU_STACK_TOP - w->stack_cap));
}

/* Set a lane's stack depth, growing the stack; -1 past EMU_STACK_MAX. */
static int set_depth(emu_warp *w, const emu_inst *in, int lane, uint64_t depth, const char *what)
{
  if (depth > EMU_STACK_MAX)
    return lpx_emu_fail(w, in, lane, "%s needs %" PRIu64 " bytes of stack; the emulator gives a thread %u "
                        "(the ISA leaves a stack overflow undefined)", what, depth, EMU_STACK_MAX);
  if (stack_grow(w, in, lane, (uint32_t)depth)) return -1;
  w->sdepth[lane] = (uint32_t)depth;
  return 0;
}

/* alloca.type ptr, size{, align}: lower the stack pointer by size, aligned
 * down to max(align, 8); ptr is the new stack pointer (a local address).
 * The new bytes read as zero (as .local does), whatever ran before. */
HANDLER(op_alloca)
{
  uint64_t *d = D(0);
  const uint64_t *size = D(1), *al = in->nops > 2 ? D(2) : NULL;
  uint64_t mk = lpx_types[in->type].bits == 64 ? ~0ull : 0xffffffffull;
  EMU_EACH(m, {
    uint64_t a = al && al[l] > 8 ? al[l] : 8, n = size[l] & mk;
    uint64_t sp = EMU_STACK_TOP - (uint64_t)w->sdepth[l];
    if (n > EMU_STACK_MAX) return lpx_emu_fail(w, in, l, "alloca of %" PRIu64 " bytes is more than the emulator's %u-byte stack", n, EMU_STACK_MAX);
    uint64_t nsp = (sp - n) & ~(a - 1);
    if (set_depth(w, in, l, EMU_STACK_TOP - nsp, "alloca")) return -1;
    memset(w->stack + (size_t)l * w->stack_cap + (nsp - (EMU_STACK_TOP - w->stack_cap)), 0, (size_t)(sp - nsp));
    d[l] = nsp & mk;
  });
  return 0;
}

/* stacksave.type d: the stack pointer. */
HANDLER(op_stacksave)
{
  uint64_t *d = D(0);
  EMU_EACH(m, d[l] = EMU_STACK_TOP - (uint64_t)w->sdepth[l]);
  return 0;
}

/* stackrestore.type a: set the stack pointer (a value stacksave gave). */
HANDLER(op_stackrestore)
{
  const uint64_t *a = D(0);
  EMU_EACH(m, {
    uint64_t v = a[l];
    if (v > EMU_STACK_TOP || v < EMU_STACK_TOP - EMU_STACK_MAX)
      return lpx_emu_fail(w, in, l, "stackrestore to 0x%" PRIx64 ", which is not a stack pointer stacksave gives "
                          "(the stack runs from 0x%x down)", v, EMU_STACK_TOP);
    if (set_depth(w, in, l, EMU_STACK_TOP - v, "stackrestore")) return -1;
  });
  return 0;
}

/* Handler for a stack row. */
emu_fn lpx_emu_pick_stack(const emu_inst *in)
{
  switch (in->op) {
  case LPX_OP_ALLOCA: return op_alloca;
  case LPX_OP_STACKSAVE: return op_stacksave;
  case LPX_OP_STACKRESTORE: return op_stackrestore;
  default: return NULL;
  }
}
