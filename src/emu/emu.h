/* The CPU emulator's internal structures: the executable form a function
 * decodes into, the device's memory, and the launch / CTA / warp state the
 * handlers work on. Registers are structure-of-arrays: one register is 32
 * contiguous 64-bit lane slots, so a handler is a tight loop over a mask. */
#ifndef LPX_EMU_H
#define LPX_EMU_H
#include "../lpx_device_impl.h"
#include "../lpx_bounds.h"
#include <pthread.h>
#include <string.h>

/* ------------------------------------------------------------ constants */

enum {                              /* state spaces an address resolves to */
  EMU_SP_GENERIC = 0, EMU_SP_GLOBAL, EMU_SP_SHARED, EMU_SP_LOCAL, EMU_SP_PARAM, EMU_SP_CONST,
  EMU_SP_FRAME                      /* per-thread .param of a call: a .func's params, call-site params */
};
#define EMU_FRAME_SLOT 256          /* bytes per call-site .param symbol */
#define EMU_MAX_CALL_DEPTH 32

/* Generic-address windows: shared and local memory appear here, global
 * allocations above EMU_GLOBAL_BASE. Real addresses never meet host ones. */
#define EMU_SHARED_WINDOW 0x00007e0000000000ull
#define EMU_LOCAL_WINDOW  0x00007d0000000000ull
#define EMU_PARAM_WINDOW  0x00007c0000000000ull   /* cvta.param: a kernel parameter's generic address */
#define EMU_WINDOW_SIZE   0x0000000100000000ull
#define EMU_GLOBAL_BASE   0x00007f0000000000ull
#define EMU_CONST_BASE    0x00007c0000000000ull

enum {                              /* bits of the "checks" option */
  EMU_CHECK_ALIGN = 1, EMU_CHECK_RACE = 2, EMU_CHECK_UNINIT_REG = 4,
  EMU_CHECK_UNINIT_SHARED = 8, EMU_CHECK_ALL = 15
};

#define EMU_FULL 0xffffffffu
/* alloca's stack: local-space offsets below EMU_STACK_TOP, growing down,
 * at most EMU_STACK_MAX bytes per thread. */
#define EMU_STACK_TOP 0x80000000u
#define EMU_STACK_MAX (1u << 20)
#define EMU_CLUSTER_BAR 16             /* bar_of of a lane waiting at barrier.cluster.wait */
#define EMU_WARP_BAR 17                /* bar_of of a lane waiting at bar.warp.sync */
#define EMU_WGMMA_WAIT 18              /* bar_of of a lane whose wgmma.wait_group waits for its warpgroup's other warps */
#define EMU_MSG 1536

/* ------------------------------------------------------- decoded form */

typedef struct emu_warp emu_warp;
typedef struct emu_inst emu_inst;
/* A handler executes one instruction for the lanes in m; 0 or -1 (error set). */
typedef int (*emu_fn)(emu_warp *w, const emu_inst *in, uint32_t m);

enum { EO_REG = 1, EO_ADDR, EO_LABEL, EO_VEC, EO_SYMADDR };

typedef struct emu_op {
  uint8_t kind;
  uint8_t space;       /* ADDR with a symbol base: the symbol's space */
  uint8_t bits;        /* REG: the register's declared width */
  uint8_t neg;         /* REG: negated predicate source */
  int32_t reg;         /* REG: slot; ADDR: base slot or -1; VEC: element count */
  int64_t off;         /* ADDR: offset (a symbol's own offset folded in) */
} emu_op;

/* Flags of a decoded instruction. */
enum { EI_CONTROL = 1, EI_READS_CLOCK = 2, EI_VEC = 4, EI_UNRESOLVED = 8, EI_CALL = 16,
       EI_ASYNC = 32,     /* an asynchronous copy, group, wgmma or mbarrier row (emu_sched.c) */
       EI_WG_WRITE = 64,  /* writes a register a wgmma.mma_async reads (emu_wgmma.c's fence check) */
       EI_EXTERN = 128 }; /* a call to a function with no body (target: its symbol; emu_call.c) */

struct emu_inst {
  emu_fn fn;
  int32_t guard;       /* predicate slot or -1 */
  uint8_t guard_neg, flags, nops, vec;
  int16_t op, type, type2, type3;
  uint8_t mod[LPX_GB__COUNT];   /* modsel copied from the form */
  uint8_t ext[8];      /* row-specific facts parsed from the opcode (ldmatrix, mma) */
  int32_t target;      /* bra: instruction index; call: function index; EI_UNRESOLVED: the symbol */
  uint32_t o;          /* first operand in emu_prog.ops */
  int32_t item;        /* IR item, for file:line and the instruction text */
  int32_t srcs[6];     /* register slots read, for the uninitialised-read check */
  int32_t dsts[8];     /* register slots written */
  uint8_t ndsts;
  uint16_t ndst_vec;   /* a destination vector longer than dsts (wgmma accumulators): */
  uint32_t dst_vec;    /* its element count and its first element in emu_prog.ops */
  uint8_t nsrcs;
};

/* One decoded function of a loaded module. */
typedef struct emu_prog emu_prog;
struct emu_prog {
  lpx_module *m;
  const lpx_func *f;
  int32_t fn_index;
  const char *name;
  emu_inst *insts; size_t ninsts;
  emu_op *ops; size_t nops, ops_cap;
  int32_t nregs;                  /* IR registers are slots 0..nregs-1 */
  int32_t nslots;                 /* + sink, carry, constants, specials */
  int32_t sink_slot, cc_slot;
  uint64_t *cvals; int32_t cfirst, ncvals;       /* constant slots */
  int32_t special_slot[LPX_SR__COUNT];
  uint8_t *slot_bits;
  uint32_t shared_static;         /* bytes of static .shared */
  uint32_t extern_off;            /* where the extern .shared array starts */
  uint32_t local_size;
  uint32_t *param_off; uint32_t param_size;
  uint32_t frame_size;            /* per-thread bytes of FRAME space */
  uint32_t ret_off[4]; int nret;  /* a .func's return .params (func_retvalN) in the frame */
  emu_prog *const *funcs;  /* the module's decoded functions, by function index (calls) */
  uint64_t *prof;                 /* profile counters: ninsts rows of EMU_PC__COUNT (emu_prof.c), or NULL */
  uint8_t *prof_kind;             /* per instruction: what the profiler counts for it */
  uint64_t *prof_flops;           /* per instruction: FLOPs of one warp's matrix instruction << 1 | fp8 inputs */
  uint64_t prof_launches;         /* profiled launches of this entry, and the last one's shape */
  uint32_t prof_grid[3], prof_block[3], prof_dsmem;
  lpx_bounds bounds;       /* its launch directives, read once at load (lpx_bounds_of) */
  int32_t unimpl;          /* the first instruction of a form not emulated, or -1 */
  int runnable;            /* 1 once lpx_emu_runnable passed (its callees cannot change) */
};

/* ----------------------------------------------------------- memory */

typedef struct emu_alloc {
  uint64_t base, size;
  uint8_t *host;
  int is_const;                   /* a module .const variable (isspacep.const) */
} emu_alloc;

typedef struct emu_mod {
  lpx_module *m;
  int32_t first_prog, nprogs;
  emu_prog **by_func;      /* decoded program of each function index */
  uint64_t *global_addr;          /* module .global/.const vars: device addresses */
} emu_mod;

/* The emulator device. */
typedef struct emu_dev {
  lpx_device *d;
  emu_alloc *allocs; size_t nallocs, allocs_cap;   /* sorted by base */
  uint64_t next_addr;
  uint64_t gen;                   /* bumped when the table changes */
  emu_prog **progs; size_t nprogs, progs_cap;
  emu_mod *mods; size_t nmods, mods_cap;
  int64_t budget, threads, checks;
  int32_t cpus;                   /* lpx_cpu_count(), read at the first launch that needs it (0: not yet) */
  int64_t schedule;               /* -1: the default schedule; else the adversarial schedule's seed */
  int64_t profile;                /* 1: count performance counters per instruction (emu_prof.c) */
  int64_t memory;                 /* bytes of host memory device memory and a launch may take */
  uint64_t mem_used;              /* bytes of live device allocations */
  uint64_t warp_insts, lane_insts;
  struct emu_pool *pool;          /* launch state kept between launches (emu_pool.c), or NULL */
  char desc[128];
} emu_dev;

/* --------------------------------------------------------- execution */

typedef struct emu_launch emu_launch;
typedef struct emu_cta emu_cta;
typedef struct emu_tmem emu_tmem;    /* a CTA's tensor memory and tcgen05 state (emu_tmem.c) */
typedef struct emu_sched emu_sched;

struct emu_warp {
  emu_cta *cta;
  const emu_inst *wg_write;       /* the last EI_WG_WRITE row since the warp's last wgmma.fence */
  uint8_t wg_fenced;              /* the warp has executed a wgmma.fence */
  uint32_t wg_commits;            /* wgmma.commit_groups the warp has executed */
  uint32_t wg_need;               /* blocked at wgmma.wait_group: commits every warp of its warpgroup must reach */
  const emu_prog *p;
  uint64_t *r;                    /* nslots * 32 lane values */
  uint32_t *wr;                   /* per slot: lanes written so far */
  uint32_t exists, live, blocked; /* lanes in the block, not exited, at a barrier */
  uint32_t cur;                   /* lanes of the running group (all at cur_pc) */
  int32_t cur_pc;
  int32_t other_min;              /* smallest pc of runnable lanes outside cur */
  int32_t pc[32];
  int32_t bar_of[32];             /* barrier a blocked lane waits at */
  int32_t red_dst[32];            /* bar.red: the slot a blocked lane's result goes to, or -1 */
  uint32_t cl_arr[32];            /* barrier.cluster: 1 + the phase a lane arrived in, 0: not arrived */
  uint32_t wsync[32];             /* bar.warp.sync: the member mask a blocked lane waits with */
  uint32_t id;
  uint64_t steps, lane_steps;
  uint8_t *local;                 /* 32 * local_size bytes */
  uint8_t *frame;                 /* 32 * frame_size bytes */
  int depth;                      /* call depth (0: the entry) */
  uint64_t mbar_wait_gen;         /* 1 + the CTA's mbar_gen at this warp's last failed mbarrier wait */
  uint32_t mbar_wait_fails;       /* failed mbarrier waits in a row at that mbar_gen */
  uint8_t wait_failed;            /* the running instruction is an mbarrier wait that failed: the turn ends after it */
  uint64_t *prow;                 /* profiled launches: the counters of the instruction running now */
  uint8_t *stack;                 /* alloca memory: per lane, the stack_cap bytes below EMU_STACK_TOP */
  uint32_t stack_cap;
  uint32_t sdepth[32];            /* per lane: bytes of stack in use (the stack pointer is EMU_STACK_TOP - sdepth) */
  uint8_t waw;                    /* the running instruction overwrote bytes another warp wrote this epoch (emu_race.c) */
};

/* A byte another warp wrote in this epoch, overwritten by the running
 * instruction: a race only if the value changes (lpx_emu_race_settle). */
typedef struct emu_waw {
  uint32_t off, other_inst;
  uint8_t old, other, lane;
} emu_waw;

/* A decoded wgmma B operand kept for the other warps issuing the same
 * wgmma on the same bytes in the same epoch (emu_wgb.c). */
#define EMU_WGB_SLOTS 8
typedef struct emu_wgb {
  const emu_inst *in;             /* the wgmma row (NULL: empty) */
  uint64_t desc;                  /* its B descriptor */
  uint32_t epoch;                 /* the race check's epoch it was read in */
  uint32_t reader;                /* 1 + the warp that read it; 0xff once a second warp has */
  double *bt; size_t bt_cap;      /* B transposed: K x N */
  uint32_t *chunk; uint32_t nchunk, chunk_cap;   /* shared offsets of its 16-byte chunks */
} emu_wgb;

struct emu_cta {
  emu_launch *L;
  uint32_t ctaid[3];
  emu_warp *warps; int nwarps;
  uint32_t nthreads;
  uint8_t *shared; uint32_t shared_size;
  uint64_t dirty;                 /* pages of shared memory (and shadows) accessed since the CTA's last clearing */
  uint32_t page_shift;            /* log2 of the page size: at most 64 pages */
  uint32_t *race_w, *race_r;      /* per shared byte: epoch<<8 | warp+1 */
  uint32_t *race_wi, *race_ri;    /* per shared byte: instruction of that access */
  uint32_t epoch;
  struct { uint32_t arrived, expected; int used; uint32_t popc, all, any, kind; } bar[16];
  int worker;
  emu_cta *group; int group_size, rank;   /* the CTAs of its cluster (just itself without one) */
  uint32_t cl_arrived, cl_phase;          /* barrier.cluster, kept on group[0] */
  uint64_t mbar_gen;                      /* bumped by every change of an mbarrier of this CTA */
  struct { uint64_t lo, hi; uint32_t span; const emu_inst *in; } tma_rgn[16];  /* shared ranges TMA loads wrote, */
  int ntma_rgn;                           /* with their swizzle (checked against wgmma descriptors) */
  uint8_t *pdirty;                        /* per shared byte: written by the generic proxy, no fence.proxy.async since */
  emu_waw *waw; uint32_t nwaw, waw_cap;   /* overwrites to settle after the running instruction */
  emu_tmem *tm;                           /* tensor memory, when the kernel uses tcgen05 (else NULL) */
  emu_sched *sched;                       /* the adversarial schedule of its cluster, or NULL (emu_sched.c) */
  emu_wgb *wgb;                           /* EMU_WGB_SLOTS kept B operands, or NULL before the first */
  uint8_t *wgb_map;                       /* per 16 shared bytes: the slots holding a chunk there */
  uint32_t wgb_live, wgb_next;            /* the slots in use; the next to evict */
};

/* A host thread of a launch and the cluster of CTAs it runs (emu_exec.c);
 * kept, with its CTAs' buffers, in the device's pool between launches. */
typedef struct emu_worker {
  emu_launch *L;
  int index;
  emu_cta *ctas;                  /* the cluster it runs (cluster_size CTAs) */
  uint64_t warp_insts, lane_insts;
  pthread_t thread;
} emu_worker;

struct emu_launch {
  emu_dev *dev;
  const emu_prog *p;
  lpx_launch_cfg cfg;
  const uint8_t *params;
  uint64_t nctas, next_cta;       /* next_cta: the next cluster, taken atomically */
  int cluster_size;               /* CTAs run together (1 without clusters) */
  uint64_t budget, used;          /* warp instructions, used atomically */
  int64_t checks;
  int64_t schedule;               /* the device's schedule option at launch */
  int prof;                       /* counting (emu_prof.c): the profiled warp loop, one host thread */
  int nworkers;
  int failed;                     /* read and set atomically */
  uint64_t fail_cta;              /* grid index of the CTA whose error is kept */
  pthread_mutex_t lock;
  char msg[EMU_MSG];
};

/* ------------------------------------------------------- register access */

#define EMU_R(w, slot) ((w)->r + (size_t)(slot) * 32)
#define EMU_OP(w, in, k) (&(w)->p->ops[(in)->o + (k)])

/* Run BODY for every lane l in mask m (a plain loop when all 32 are set). */
#define EMU_EACH(m, ...) do { uint32_t m_ = (m); \
  if (m_ == EMU_FULL) { for (int l = 0; l < 32; l++) { __VA_ARGS__; } } \
  else { while (m_) { int l = __builtin_ctz(m_); m_ &= m_ - 1; __VA_ARGS__; } } } while (0)

static inline uint32_t emu_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float emu_u2f(uint64_t u) { uint32_t v = (uint32_t)u; float f; memcpy(&f, &v, 4); return f; }
/* Four doubles, added and multiplied lane by lane, each lane exactly the
 * scalar IEEE operation (the matrix products' rows); the unaligned form
 * loads and stores rows of double arrays. */
typedef double emu_v4d __attribute__((vector_size(32)));
typedef double emu_v4du __attribute__((vector_size(32), aligned(8)));
static inline uint64_t emu_d2u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static inline double emu_u2d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* Have the lanes of m written every register the instruction reads? (The
 * guard, read by every lane of the group, is the last source when present.) */
static inline int emu_srcs_written_impl(const uint32_t *wr, const int32_t *srcs, int n, uint32_t m, uint32_t cur, int guarded)
{
  uint32_t bad = 0;
  for (int k = 0; k < n; k++) bad |= (guarded && k == n - 1 ? cur : m) & ~wr[srcs[k]];
  return bad == 0;
}
#define lpx_emu_srcs_written(w, in, m) \
  emu_srcs_written_impl((w)->wr, (in)->srcs, (in)->nsrcs, (m), (w)->cur, (in)->guard >= 0)

/* ------------------------------------------------------- tensor maps */

/* The emulator's 128-byte tensor-map encoding: what the emu device's
 * tma_encode (lpx_emu_tmap_encode) builds from a validated description, as
 * the driver's cuTensorMapEncode* does on CUDA, and what tensormap.replace
 * edits in place. Arrays are innermost dimension first, as the driver's. */
typedef struct emu_tmap {
  uint32_t magic;                 /* EMU_TMAP_MAGIC */
  uint8_t rank, dtype, swizzle, interleave;   /* CUtensorMap* enum numbering */
  uint8_t oob, esize, elem_strides[5], mode;  /* mode: 0 tiled, 1 im2col */
  uint64_t address;
  uint32_t dims[5];
  uint16_t box[5], channels;      /* channels: im2col channels per pixel */
  uint64_t strides[4];
  uint16_t pixels;                /* im2col pixels per column */
  int16_t lower[3], upper[3];     /* im2col pixel-box corners, W first */
  uint8_t edited;                 /* a tensormap.replace changed it: validated as a whole at each use */
  uint8_t pad[25];
} emu_tmap;
#define EMU_TMAP_MAGIC 0x414d5458u   /* "XTMA" */

/* How lpx_emu_decode_bulk classifies a cp.async.bulk / cp.reduce.async.bulk form (ext[0]). */
enum {
  EMU_BULK_OTHER, EMU_BULK_COPY, EMU_BULK_NOP, EMU_BULK_TLOAD, EMU_BULK_TSTORE,
  EMU_BULK_PREFETCH, EMU_BULK_TPREFETCH, EMU_BULK_REDUCE, EMU_BULK_TREDUCE
};

/* ------------------------------------------------------- matrix descriptors */

/* A shared-memory matrix descriptor of wgmma (sm_90) or tcgen05 (sm_100),
 * decoded: addresses and offsets in bytes, the swizzle span (0: none). */
typedef struct emu_mdesc { uint64_t start, lbo, sbo; uint32_t span, base_off; } emu_mdesc;

/* What lpx_emu_mdesc_read reads: MN- or K-major, the matrix type, K, the
 * M/N rows mn0..mn0+n-1, whose shared memory (0: the lane's CTA; 1 + a
 * cluster rank: that CTA's), and the reader's name for messages. */
typedef struct emu_mdread {
  int mn_major, type;
  uint32_t k, mn0, n, cta;
  const char *reader;
} emu_mdread;

/* ------------------------------------------------------------- functions */

/* decode */
int lpx_emu_decode(emu_dev *e, lpx_module *m, int32_t fn, emu_mod *mod, emu_prog **out);
int lpx_emu_call(emu_warp *w, const emu_inst *in, uint32_t m);
int lpx_emu_call_extern(emu_warp *w, const emu_inst *in, uint32_t m);
void lpx_emu_prog_free(emu_prog *p);
emu_fn lpx_emu_pick(const emu_inst *in);
int lpx_emu_cover(const emu_prog *p);
int lpx_emu_runnable(const emu_prog *p, lpx_ctx *ctx);
int lpx_emu_unsupported(emu_warp *w, const emu_inst *in, uint32_t m);

/* memory */
int lpx_emu_mem_alloc(emu_dev *e, uint64_t bytes, uint64_t *dptr);
int lpx_emu_mem_fits(emu_dev *e, uint64_t bytes);
int lpx_emu_mem_refuse(emu_dev *e, uint64_t bytes, const char *what);
int lpx_emu_mem_free(emu_dev *e, uint64_t dptr);
emu_alloc *lpx_emu_mem_find(emu_dev *e, uint64_t addr, uint64_t n);
void lpx_emu_mem_describe(emu_dev *e, uint64_t addr, uint64_t n, char *out, size_t cap);
uint8_t *lpx_emu_addr(emu_warp *w, const emu_inst *in, int lane, int space, uint64_t addr, uint32_t n, int write);
int lpx_emu_global_range(emu_warp *w, uint64_t addr, uint64_t n, uintptr_t *delta);
const uint8_t *lpx_emu_shared_async16(emu_warp *w, const emu_inst *in, int lane, uint64_t off, const char *reader);
uint8_t *lpx_emu_addr_span(emu_warp *w, const emu_inst *in, int lane, int space, uint64_t addr, uint64_t n, int write);

/* failure reports (emu_report.c, a leaf: every file may call it) */
int lpx_emu_fail(emu_warp *w, const emu_inst *in, int lane, const char *fmt, ...);
int lpx_emu_fail_raw(emu_launch *L, const char *fmt, ...);
void lpx_emu_where(const emu_prog *p, const emu_inst *in, char *out, size_t cap);
void lpx_emu_report_cta(uint64_t cta);
int lpx_emu_stop_for_error(const emu_launch *L);
const char *lpx_emu_spell(const emu_warp *w, const emu_inst *in, const char *dsl, const char *ptx);

/* Lanes of m whose predicate slot holds true (false when neg). */
static inline uint32_t lpx_emu_pred_mask(emu_warp *w, int32_t slot, int neg, uint32_t m)
{
  const uint64_t *r = EMU_R(w, slot);
  uint32_t out = 0, want = neg ? 0u : 1u;
  EMU_EACH(m, out |= (uint32_t)(((uint32_t)r[l] & 1u) == want) << l);
  return out;
}

/* execution */
int lpx_emu_run(emu_dev *e, const emu_prog *p, const lpx_launch_cfg *cfg);
uint64_t lpx_emu_pool_cta_bytes(const emu_prog *p, const lpx_launch_cfg *cfg, int64_t checks);
emu_worker *lpx_emu_pool_take(emu_dev *e, emu_launch *L);
uint64_t lpx_emu_pool_bytes(const emu_dev *e);
void lpx_emu_pool_free(emu_dev *e);
int lpx_emu_bar_arrive(emu_warp *w, const emu_inst *in, uint32_t m, uint32_t id, uint32_t count);
int lpx_emu_warp_run(emu_warp *w, uint64_t *steps);
void lpx_emu_warp_regs(emu_warp *w, emu_cta *c);
int lpx_emu_charge(emu_cta *c, emu_warp *w, uint64_t steps);
int lpx_emu_is_control(emu_fn fn);

/* shared-memory checks (emu_race.c, a leaf under the memory access path) */
int lpx_emu_race(emu_warp *w, const emu_inst *in, int lane, uint32_t off, uint32_t n, int write);
int lpx_emu_race_settle(emu_warp *w, const emu_inst *in);
int lpx_emu_proxy_check(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n, const char *reader);
int lpx_emu_race_async16(emu_warp *w, const emu_inst *in, uint32_t off);
/* register checks (emu_check.c, called by the runner) */
int lpx_emu_check_srcs(emu_warp *w, const emu_inst *in, uint32_t m);

/* handler tables (one file each) */
emu_fn lpx_emu_pick_alu(const emu_inst *in);
emu_fn lpx_emu_pick_float(const emu_inst *in);
emu_fn lpx_emu_pick_cvt(const emu_inst *in);
emu_fn lpx_emu_pick_mem(const emu_inst *in);
emu_fn lpx_emu_pick_warp(const emu_inst *in);
emu_fn lpx_emu_pick_ctl(const emu_inst *in);
emu_fn lpx_emu_pick_mma(const emu_inst *in);
emu_fn lpx_emu_pick_mbar(const emu_inst *in);
void lpx_emu_decode_bulk(emu_inst *in, const lpx_form *fo);
emu_fn lpx_emu_pick_tma(const emu_inst *in);
emu_fn lpx_emu_pick_tmap(const emu_inst *in);
int lpx_emu_tmap_validate(emu_warp *w, const emu_inst *in, int lane, uint64_t at, const emu_tmap *t);
int lpx_emu_tmap_check(emu_warp *w, const emu_inst *in, int lane, uint64_t at, const emu_tmap *t);
struct lpx_tma_desc;
int lpx_emu_tmap_encode(lpx_ctx *ctx, const char *tensor, const struct lpx_tma_desc *d, void *out128);
int lpx_emu_tmap_replace_address(lpx_ctx *ctx, const char *tensor, void *map128, uint64_t address);
int lpx_emu_op_reduce(emu_warp *w, const emu_inst *in, uint32_t m);
int lpx_emu_reduce_type_ok(int op, int type);
int lpx_emu_reduce_elem(int op, int type, uint8_t *dst, const uint8_t *src, int atomic);
uint64_t lpx_emu_atom_apply(int op, int type, uint64_t old, uint64_t b, uint64_t c);
emu_fn lpx_emu_pick_wgmma(const emu_inst *in);
emu_fn lpx_emu_pick_intx(const emu_inst *in);
emu_fn lpx_emu_pick_video(const emu_inst *in);
emu_fn lpx_emu_pick_stack(const emu_inst *in);
emu_fn lpx_emu_pick_hint(const emu_inst *in);
emu_fn lpx_emu_pick_space(const emu_inst *in);
uint8_t *lpx_emu_stack_ptr(emu_warp *w, const emu_inst *in, int lane, uint64_t off, uint32_t n);
emu_mdesc lpx_emu_mdesc(uint64_t v, uint32_t span);
uint64_t lpx_emu_mdesc_chunk(const emu_mdesc *d, int mn_major, uint32_t row, uint32_t cb);
int lpx_emu_mdesc_check(emu_warp *w, const emu_inst *in, int lane, const emu_mdesc *d, const char *which);
const uint8_t *lpx_emu_mdesc_bytes(emu_warp *w, const emu_inst *in, int lane, const emu_mdread *r, uint64_t ea);
int lpx_emu_mdesc_read(emu_warp *w, const emu_inst *in, int lane, const emu_mdesc *d, const emu_mdread *r, double *out);
double lpx_emu_mtype_value(int t, uint32_t bits);
void lpx_emu_decode_wgmma(emu_inst *in, const lpx_form *fo);
int lpx_emu_mbar_complete(emu_warp *w, const emu_inst *in, int k, int lane, int64_t bytes);
emu_cta *lpx_emu_mbar_owner(emu_warp *w, const uint8_t *p);
uint8_t *lpx_emu_mbar_ptr(emu_warp *w, const emu_inst *in, int k, int lane);
int lpx_emu_mbar_parity(emu_warp *w, const emu_inst *in, int k, int lane);
int lpx_emu_mbar_apply(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, int k, uint64_t *out);
void lpx_emu_wgb_drop_range(emu_cta *c, uint64_t off, uint64_t n);
void lpx_emu_wgb_reset(emu_cta *c);
void lpx_emu_wgb_free(emu_cta *c);
const double *lpx_emu_wgb_find(emu_warp *w, const emu_inst *in, uint64_t desc);
int lpx_emu_wgb_take(emu_cta *c, const emu_inst *in, uint64_t desc, size_t kn, double **bt);
void lpx_emu_wgb_keep(emu_warp *w, const emu_inst *in, uint64_t desc, int s, const uint32_t *chunk, uint32_t n);
/* Any access to shared bytes [off, off + n) of CTA c: marks their pages
 * for clearing before the CTA's next run (emu_exec.c) and drops the kept
 * wgmma B operands there (emu_wgb.c). */
static inline void lpx_emu_shared_touch(emu_cta *c, uint64_t off, uint64_t n)
{
  if (off < c->shared_size && n) {
    uint64_t last = n - 1 < c->shared_size - off ? off + n - 1 : c->shared_size - 1;
    uint64_t pages = (2ull << (last >> c->page_shift)) - (1ull << (off >> c->page_shift));
    if ((c->dirty & pages) != pages) c->dirty |= pages;   /* a store only for a page's first access */
  }
  if (c->wgb_live) lpx_emu_wgb_drop_range(c, off, n);
}
void lpx_emu_race_read_many(emu_cta *c, uint32_t off, uint32_t n);
int lpx_emu_race_written_now(const emu_cta *c, uint32_t off, uint32_t n);
int lpx_emu_mbar_wait_failed(emu_warp *w, const emu_inst *in, int lane, const uint8_t *p, int want);
/* An mbarrier word's count fields (pending, expected, tx) are 21 bits each. */
#define EMU_MBAR_COUNT 0x1fffffull
int lpx_emu_mbar_arrive_one(emu_warp *w, const emu_inst *in, int lane, uint8_t *p, emu_cta *c, int *phase);
int lpx_emu_mbar_complete_rank(emu_warp *w, const emu_inst *in, int lane, int r, uint64_t off, int64_t bytes);
emu_fn lpx_emu_pick_proxy_fence(const emu_inst *in);
int lpx_emu_tma_swizzle_at(emu_cta *c, uint64_t addr, uint32_t *span, const emu_inst **by);
int lpx_emu_space(const emu_inst *in);
int lpx_emu_host_rounding(int rnd);
int lpx_emu_space2(const emu_inst *in);
void lpx_emu_decode_mma(emu_inst *in, const lpx_form *fo);

/* tcgen05 (emu_tmem.c, emu_tcgen05.c) */
emu_fn lpx_emu_pick_tmem(const emu_inst *in);
emu_fn lpx_emu_pick_tc_async(const emu_inst *in);
void lpx_emu_decode_tcgen05(emu_inst *in, const lpx_form *fo);
int lpx_emu_tmem_init(emu_cta *c);
void lpx_emu_tmem_reset(emu_cta *c);
void lpx_emu_tmem_free(emu_cta *c);
int lpx_emu_tmem_exit(emu_cta *g, int n);
int lpx_emu_tmem_pending(emu_warp *w, const emu_inst *in, int32_t slot, uint32_t bad);
void lpx_emu_tmem_observe(emu_warp *w, const uint8_t *p, int parity, const emu_inst *in);
int lpx_emu_tmem_publish(emu_warp *w, const uint8_t *p);
void lpx_emu_tmem_sync(emu_cta *c, int cluster);

/* half precision and fp8 */
uint16_t lpx_emu_f32_to_f16(float f, int rnd);
float lpx_emu_f16_to_f32(uint16_t h);
uint16_t lpx_emu_f32_to_bf16(float f, int rnd);
/* bf16 -> f32, exact (a bf16 is the top half of an f32), inline: the
 * matrix instructions decode one per element. The bf16 in the low half of
 * a 32-bit register (a shift drops the high half) and in its high half (a
 * mask): the two of a packed bf16x2, as the matrix fragments hold them. */
static inline float lpx_emu_bf16_lo_to_f32(uint32_t x) { return emu_u2f(x << 16); }
static inline float lpx_emu_bf16_hi_to_f32(uint32_t x) { return emu_u2f(x & 0xffff0000u); }
static inline float lpx_emu_bf16_to_f32(uint16_t h) { return lpx_emu_bf16_lo_to_f32(h); }
uint16_t lpx_emu_f64_to_half(double f, int bf, int rnd);
float lpx_emu_fp8_to_f32(uint8_t v, int e5m2);
uint8_t lpx_emu_f64_to_fp8(double f, int e5m2);
uint64_t lpx_emu_sat_int(double v, int type);

#endif
