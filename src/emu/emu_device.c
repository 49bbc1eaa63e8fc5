/* The "emu" device: the device interface's operations over the emulator's
 * memory table, decoded programs and launcher, and its options. */
#include "emu.h"
#include "emu_prof.h"
#include "../lpx_env.h"
#include "../lpx_sys.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EMU(d) ((emu_dev *)(d)->impl)
#define DEFAULT_BUDGET 1000000000ll   /* warp-instructions: tens of seconds of emulation */

/* ------------------------------------------------------------- options */

typedef struct option { const char *name; size_t off; int64_t lo, hi; const char *help, *env; } option;

static const option options[] = {
  { "budget", offsetof(emu_dev, budget), 1, INT64_MAX, "warp-instructions per launch before it is stopped", "LUAPTX_EMU_BUDGET" },
  { "threads", offsetof(emu_dev, threads), 0, 256, "host threads running CTAs, 0 for one per usable CPU", "LUAPTX_EMU_THREADS" },
  { "checks", offsetof(emu_dev, checks), 0, EMU_CHECK_ALL, "bitmask: 1 alignment, 2 shared races, 4 unwritten registers, 8 unwritten shared", NULL },
  { "schedule", offsetof(emu_dev, schedule), -1, INT64_MAX, "-1 for the default schedule, else the seed of the adversarial one", NULL },
  { "profile", offsetof(emu_dev, profile), 0, 1, "1 counts performance counters per instruction (luaptx profile; one host thread)", "LUAPTX_EMU_PROFILE" },
  { "memory", offsetof(emu_dev, memory), 1, INT64_MAX, "bytes of host memory for device allocations and a launch's state (default: half the host's)", "LUAPTX_EMU_MEMORY" },
};

#define SCHEDULE_HELP "the emulator's schedule: default, or adversarial with a seed"

/* LUAPTX_EMU_SCHEDULE: "default" or "adversarial:<seed>" (the schedule option). */
static int env_schedule(lpx_device *d, emu_dev *e)
{
  return lpx_env_keyed_int(d->ctx, "LUAPTX_EMU_SCHEDULE", "default", "adversarial", 0, INT64_MAX, SCHEDULE_HELP, &e->schedule);
}

/* Set the options that have an environment variable from it (strictly
 * parsed: a bad value is an error naming the variable and the range). */
static int env_options(lpx_device *d, emu_dev *e)
{
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
    const option *o = &options[i];
    if (o->env && lpx_env_int(d->ctx, o->env, o->lo, o->hi, o->help, (int64_t *)((char *)e + o->off))) return -1;
  }
  return env_schedule(d, e);
}

/* Write a description: kind, threads, budget. */
static const char *emu_describe(lpx_device *d)
{
  emu_dev *e = EMU(d);
  long n = e->threads > 0 ? (long)e->threads : (long)lpx_cpu_count();
  if (e->schedule >= 0)
    snprintf(e->desc, sizeof e->desc, "emu (CPU emulator, %ld thread%s, adversarial schedule seed %lld)", n, n == 1 ? "" : "s",
             (long long)e->schedule);
  else
    snprintf(e->desc, sizeof e->desc, "emu (CPU emulator, %ld thread%s)", n, n == 1 ? "" : "s");
  return e->desc;
}

/* The boolean options: each sets or clears bits of the checks mask. */
typedef struct flag_option { const char *name; int64_t bits; } flag_option;

static const flag_option flag_options[] = {
  { "race_check", EMU_CHECK_RACE },
  { "uninit_check", EMU_CHECK_UNINIT_REG | EMU_CHECK_UNINIT_SHARED },
  { "align_check", EMU_CHECK_ALIGN },
};

#define NOPTIONS (sizeof options / sizeof options[0])
#define NFLAGS (sizeof flag_options / sizeof flag_options[0])
#define VALID_OPTIONS "budget, threads, checks, schedule, profile, memory, race_check, uninit_check, align_check"

/* Set an option by name; unknown names and bad values are errors that list the valid ones. */
static int emu_set_option(lpx_device *d, const char *name, int64_t value)
{
  emu_dev *e = EMU(d);
  for (size_t i = 0; i < NFLAGS; i++) {
    if (strcmp(flag_options[i].name, name)) continue;
    if (value != 0 && value != 1) return lpx_fail(d->ctx, "emu option %s = %" PRId64 ": valid 0 or 1 (off or on)", name, value);
    e->checks = value ? (e->checks | flag_options[i].bits) : (e->checks & ~flag_options[i].bits);
    return 0;
  }
  for (size_t i = 0; i < NOPTIONS; i++) {
    if (strcmp(options[i].name, name)) continue;
    if (value < options[i].lo || value > options[i].hi)
      return lpx_fail(d->ctx, "emu option %s = %" PRId64 ": valid %" PRId64 "..%" PRId64 " (%s)", name, value,
                      options[i].lo, options[i].hi, options[i].help);
    *(int64_t *)((char *)e + options[i].off) = value;
    return 0;
  }
  return lpx_fail(d->ctx, "unknown emu option '%s'; valid: " VALID_OPTIONS, name);
}

/* Read an option by name (a boolean option is 1 when all its bits are set). */
static int emu_get_option(lpx_device *d, const char *name, int64_t *value)
{
  emu_dev *e = EMU(d);
  for (size_t i = 0; i < NOPTIONS; i++)
    if (strcmp(options[i].name, name) == 0) { *value = *(int64_t *)((char *)e + options[i].off); return 0; }
  for (size_t i = 0; i < NFLAGS; i++)
    if (strcmp(flag_options[i].name, name) == 0) { *value = (e->checks & flag_options[i].bits) == flag_options[i].bits; return 0; }
  return lpx_fail(d->ctx, "unknown emu option '%s'; valid: " VALID_OPTIONS, name);
}

/* ------------------------------------------------------------- memory */

/* Allocate device memory. */
static int emu_alloc_op(lpx_device *d, uint64_t bytes, uint64_t *dptr) { return lpx_emu_mem_alloc(EMU(d), bytes, dptr); }

/* Free device memory. */
static int emu_free_op(lpx_device *d, uint64_t dptr) { return lpx_emu_mem_free(EMU(d), dptr); }

/* Host pointer of a whole device range, or NULL with a message naming it. */
static uint8_t *range(lpx_device *d, const char *what, uint64_t addr, uint64_t n)
{
  emu_alloc *a = lpx_emu_mem_find(EMU(d), addr, n);
  if (a) return a->host + (addr - a->base);
  char near[256];
  lpx_emu_mem_describe(EMU(d), addr, n, near, sizeof near);
  lpx_fail(d->ctx, "%s of %" PRIu64 " bytes at 0x%" PRIx64 ": not inside one allocation (%s)", what, n, addr, near);
  return NULL;
}

/* Copy host memory to the device. */
static int emu_upload(lpx_device *d, uint64_t dst, const void *src, uint64_t n)
{
  uint8_t *p = range(d, "upload", dst, n);
  if (!p) return -1;
  memcpy(p, src, (size_t)n);
  return 0;
}

/* Copy device memory to the host. */
static int emu_download(lpx_device *d, void *dst, uint64_t src, uint64_t n)
{
  uint8_t *p = range(d, "download", src, n);
  if (!p) return -1;
  memcpy(dst, p, (size_t)n);
  return 0;
}

/* Fill device memory with a byte. */
static int emu_memset_op(lpx_device *d, uint64_t dst, int byte, uint64_t n)
{
  uint8_t *p = range(d, "memset", dst, n);
  if (!p) return -1;
  memset(p, byte, (size_t)n);
  return 0;
}

/* ------------------------------------------------------------- modules */

/* Patch a variable's address-of initializers with the addresses of the
 * module variables they name (other symbols stay 0). */
static int apply_relocs(lpx_device *d, emu_mod *mod, const lpx_var *v, uint64_t base)
{
  const lpx_module *m = mod->m;
  for (uint32_t r = 0; r < v->nrelocs; r++) {
    for (size_t j = 0; j < m->nvars; j++) {
      if (m->vars[j].sym != v->relocs[2 * r + 1] || !mod->global_addr[j]) continue;
      if (emu_upload(d, base + (uint64_t)v->relocs[2 * r], &mod->global_addr[j], 8)) return -1;
    }
  }
  return 0;
}

/* Allocate the module's .global and .const variables. */
static int module_globals(lpx_device *d, emu_mod *mod)
{
  lpx_module *m = mod->m;
  mod->global_addr = calloc(m->nvars + 1, sizeof(uint64_t));
  if (!mod->global_addr) return lpx_fail(d->ctx, "out of memory");
  for (size_t i = 0; i < m->nvars; i++) {
    const lpx_var *v = &m->vars[i];
    const char *space = lpx_strtab_get(&m->syms, v->space);
    if (strcmp(space, "global") && strcmp(space, "const")) continue;
    uint64_t el = (uint64_t)(lpx_types[v->type].bits + 7) / 8, n = v->count > 0 ? el * (uint64_t)v->count : el;
    if (v->init_symbolic)
      return lpx_fail(d->ctx, "module variable '%s': this initializer form is not supported by the emulator yet",
                      lpx_strtab_get(&m->syms, v->sym));
    if (lpx_emu_mem_alloc(EMU(d), n, &mod->global_addr[i])) return -1;
    EMU(d)->allocs[EMU(d)->nallocs - 1].is_const = strcmp(space, "const") == 0;   /* the newest: highest */
    if (v->init && emu_upload(d, mod->global_addr[i], v->init, v->init_len < n ? v->init_len : n)) return -1;
  }
  for (size_t i = 0; i < m->nvars; i++)
    if (m->vars[i].nrelocs && mod->global_addr[i] && apply_relocs(d, mod, &m->vars[i], mod->global_addr[i])) return -1;
  return 0;
}

/* Decode every entry of a module; *module is its handle. */
static int emu_load_ir(lpx_device *d, lpx_module *m, int32_t *module)
{
  emu_dev *e = EMU(d);
  if (LPX_RESERVE(e->mods, e->mods_cap, e->nmods + 1)) return lpx_fail(d->ctx, "out of memory");
  emu_mod *mod = &e->mods[e->nmods];
  memset(mod, 0, sizeof *mod);
  mod->m = m;
  mod->first_prog = (int32_t)e->nprogs;
  if (module_globals(d, mod)) { free(mod->global_addr); return -1; }
  mod->by_func = calloc(m->nfuncs + 1, sizeof *mod->by_func);
  if (!mod->by_func) { free(mod->global_addr); return lpx_fail(d->ctx, "out of memory"); }
  for (size_t i = 0; i < m->nfuncs; i++) {
    emu_prog *p;
    if (LPX_RESERVE(e->progs, e->progs_cap, e->nprogs + 1)) return lpx_fail(d->ctx, "out of memory");
    if (lpx_emu_decode(e, m, (int32_t)i, mod, &p)) {
      if (m->ctx != d->ctx) lpx_fail(d->ctx, "%s", lpx_ctx_error(m->ctx));   /* decode reports in the module's context */
      free(mod->by_func); free(mod->global_addr);
      return -1;
    }
    p->funcs = mod->by_func;
    lpx_bounds_of(m, p->f, &p->bounds);
    mod->by_func[i] = p;
    e->progs[e->nprogs++] = p;
    mod->nprogs++;
  }
  *module = (int32_t)e->nmods++;
  return 0;
}

/* Find an entry of a loaded module by name. */
static int emu_function(lpx_device *d, int32_t module, const char *name, int32_t *fn)
{
  emu_dev *e = EMU(d);
  if (module < 0 || (size_t)module >= e->nmods) return lpx_fail(d->ctx, "function: no loaded module %d", module);
  emu_mod *mod = &e->mods[module];
  char names[512] = "";
  size_t n = 0;
  for (int32_t i = 0; i < mod->nprogs; i++) {
    const emu_prog *p = e->progs[mod->first_prog + i];
    if (!p->f->is_entry) continue;
    if (strcmp(p->name, name) == 0) { *fn = mod->first_prog + i; return 0; }
    if (n < sizeof names) n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", p->name);
  }
  return lpx_fail(d->ctx, "function: module %d has no entry '%s'; its entries: %s", module, name, names[0] ? names : "(none)");
}

/* Launch: run the grid to completion (the emulator is synchronous). */
static int emu_launch_op(lpx_device *d, int32_t fn, const lpx_launch_cfg *cfg)
{
  emu_dev *e = EMU(d);
  if (fn < 0 || (size_t)fn >= e->nprogs || !e->progs[fn]->f->is_entry) return lpx_fail(d->ctx, "launch: no entry %d", fn);
  emu_prog *p = e->progs[fn];
  if (!p->runnable && lpx_emu_runnable(p, d->ctx)) return -1;
  p->runnable = 1;   /* checked once: the walk over it and its callees need not repeat per launch */
  if (e->profile) lpx_emu_prof_launch(e->progs[fn], cfg);
  return lpx_emu_run(e, e->progs[fn], cfg);
}

/* Nothing is ever pending. */
static int emu_sync(lpx_device *d) { return 0; }

/* Instruction counts since the device opened. */
static int emu_stats(lpx_device *d, uint64_t *warp_insts, uint64_t *lane_insts)
{
  if (warp_insts) *warp_insts = EMU(d)->warp_insts;
  if (lane_insts) *lane_insts = EMU(d)->lane_insts;
  return 0;
}

/* Encode a validated TMA description into the emulator's 128-byte record. */
static int emu_tma_encode(lpx_device *d, const char *tensor, const struct lpx_tma_desc *desc, void *out128)
{
  return lpx_emu_tmap_encode(d->ctx, tensor, desc, out128);
}

/* Point an encoded record at a new global address. */
static int emu_tma_replace_address(lpx_device *d, const char *tensor, void *map128, uint64_t address)
{
  return lpx_emu_tmap_replace_address(d->ctx, tensor, map128, address);
}

/* Free everything the emulator holds. */
static void emu_close(lpx_device *d)
{
  emu_dev *e = EMU(d);
  if (!e) return;
  for (size_t i = 0; i < e->nallocs; i++) free(e->allocs[i].host);
  for (size_t i = 0; i < e->nprogs; i++) lpx_emu_prog_free(e->progs[i]);
  for (size_t i = 0; i < e->nmods; i++) { free(e->mods[i].global_addr); free(e->mods[i].by_func); }
  free(e->allocs); free(e->progs); free(e->mods);
  lpx_emu_pool_free(e);
  free(e);
  d->impl = NULL;
}

/* The launch directives of entry fn, read when its module was loaded
 * (not per launch); -1 for no such entry (the launch reports it). */
static int emu_bounds(lpx_device *d, int32_t fn, lpx_bounds *b, const char **name)
{
  emu_dev *e = EMU(d);
  if (fn < 0 || (size_t)fn >= e->nprogs) return -1;
  *b = e->progs[fn]->bounds;
  *name = e->progs[fn]->name;
  return 0;
}

static const lpx_device_vt emu_vt = {
  "emu", emu_close, emu_describe, emu_set_option, emu_get_option, emu_alloc_op, emu_free_op,
  emu_upload, emu_download, emu_memset_op, emu_load_ir, emu_function, emu_launch_op, emu_sync, emu_stats,
  NULL, NULL,         /* host-clock events: launches run to completion */
  NULL, NULL, NULL,   /* graphs: the dispatcher records and replays launches */
  emu_tma_encode, emu_tma_replace_address,   /* TMA: the emulator's emu_tmap record */
  emu_bounds,
};

/* Open the emulator on a device object. */
int lpx_emu_open(lpx_device *d)
{
  emu_dev *e = calloc(1, sizeof *e);
  if (!e) return lpx_fail(d->ctx, "out of memory");
  e->d = d;
  e->budget = DEFAULT_BUDGET;
  e->checks = EMU_CHECK_ALL;
  e->schedule = -1;
  e->memory = lpx_host_memory() / 2;
  if (env_options(d, e)) { free(e); return -1; }
  d->vt = &emu_vt;
  d->impl = e;
  return 0;
}
