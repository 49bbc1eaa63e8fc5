/* The tcgen05 state the emulator's two Blackwell files share: a CTA's
 * tensor memory (128 lanes x 512 columns of 32-bit cells), its column
 * allocations, the registers a tcgen05.ld left pending, and the
 * asynchronous groups (tcgen05.mma / cp / shift one thread issued until
 * its tcgen05.commit) whose writes a reader must have seen complete.
 * emu_tmem.c owns the memory, allocation, ld/st and the checks;
 * emu_tcgen05.c the MMA, cp, shift and commit. */
#ifndef LPX_EMU_TC_H
#define LPX_EMU_TC_H
#include "emu.h"

#define TM_LANES 128
#define TM_COLS 512
#define TM_POISON 0xffffffffu   /* freshly allocated cells: an f32 NaN, s32 -1 */

/* What lpx_emu_decode_tcgen05 records in an instruction's ext. */
enum { TM_X_NUM, TM_X_CTAGRP, TM_X_MCAST, TM_X_SP };

/* Tags: who last wrote a (lane quadrant, column) without the readers knowing it finished. */
enum { TM_TAG_NONE = 0, TM_TAG_ASYNC = 1u << 30, TM_TAG_ST = 2u << 30, TM_TAG_KIND = 3u << 30 };
#define TM_TAG_INDEX(t) ((t) & ~(uint32_t)TM_TAG_KIND)
#define TM_ST_TAG(warp, inst) (TM_TAG_ST | (uint32_t)(warp) << 20 | (uint32_t)(inst))

/* The asynchronous tcgen05 operations one thread issued since its last
 * tcgen05.commit; kept on the cluster's first CTA (cta_group::2 groups
 * write both CTAs of a pair). */
typedef struct tm_group {
  int32_t inst;            /* the first operation, for messages */
  int32_t commit;          /* the first tcgen05.commit that tracks it, -1 before */
  uint16_t warp;
  uint8_t lane, cta;       /* issuing thread: lane and the CTA's cluster rank */
  uint32_t seen[16];       /* per CTA: warps that know the group completed */
  uint32_t ctick;          /* the tick of that commit (0 before) */
} tm_group;

/* A tcgen05.commit: it tracks every group its thread issued before it
 * (groups[0..upto) of that thread), through one arrive on an mbarrier in
 * each CTA of armed, at the same CTA-relative offset. */
typedef struct tm_commit {
  int32_t inst, upto;
  uint16_t warp, armed;
  uint8_t lane, cta;
  uint32_t mbar_off;
  uint8_t parity[16];      /* per CTA: the phase parity the arrive counted in */
} tm_commit;

/* One column allocation and where it was made. */
typedef struct tm_alloc { uint16_t col, ncols, warp; int32_t inst; uint32_t tick; } tm_alloc;

/* The last tcgen05.ld (or tcgen05.st) of a warp that reached a (lane
 * quadrant, column): another warp's conflicting access must be ordered
 * after it by the fences around a thread synchronization. */
typedef struct tm_acc { uint32_t tick; int32_t inst; uint16_t warp, set; } tm_acc;

/* A register a tcgen05.ld wrote that the warp may not read before tcgen05.wait::ld. */
typedef struct tm_pend { int32_t slot, inst; } tm_pend;

struct emu_tmem {
  uint32_t cell[TM_LANES * TM_COLS];
  uint32_t tag[4][TM_COLS];
  tm_alloc allocs[16];
  int nallocs;
  int32_t relinquished;                 /* 1 + the relinquish_alloc_permit, or 0 */
  tm_pend **pend; int *npend, *pend_cap;   /* per warp */
  int nwarps;
  tm_group *groups; int ngroups, gcap;  /* the cluster's (used on rank 0's only) */
  int settled;                          /* groups before this every warp of every CTA has seen */
  tm_commit *commits; int ncommits, ccap;   /* the cluster's (rank 0's) */
  int csettled;                         /* commits before this track settled groups only */
  tm_acc rd[4][TM_COLS], wr[4][TM_COLS];  /* per quadrant and column: last tcgen05.ld / tcgen05.st */
  uint32_t *afence, *bfence;            /* per warp: tick of its last fence::after / before_thread_sync */
  uint32_t *waited; int32_t *wait_inst; /* per warp: tick and instruction of its last successful mbarrier wait */
  uint32_t tick;                        /* the cluster's clock of tcgen05 events (rank 0's) */
  /* What each warp knows of the others' before-fences (nwarps x nwarps,
   * [reader * nwarps + writer]): hb through a thread synchronization and
   * an after-fence since, hbp through a synchronization not yet fenced;
   * hs: the latest tick of each warp known through a synchronization
   * (fenced or not), to tell a missing fence from a missing synchronization. */
  uint32_t *hb, *hbp, *hs;
  /* Per mbarrier of this CTA (its offset): what the warps that arrived on
   * it published (npubs rows of 2 x nwarps ticks: fences, then clocks). */
  uint32_t *pub_off, *pub; int npubs, pub_cap;
};

/* What lpx_emu_tm_note records for an access. */
enum { TM_NOTE_LD, TM_NOTE_ST, TM_NOTE_ASYNC };

/* What lpx_emu_tm_ready treats as a write in flight. */
enum {
  TM_CHECK_ASYNC = 1,      /* an async group the warp has not seen complete */
  TM_CHECK_OWN_ST = 2      /* a tcgen05.st of the warp itself not yet waited (another warp's always counts) */
};

/* The cell at (lane, column). */
#define TM_CELL(tm, lane, col) ((tm)->cell[(size_t)(lane) * TM_COLS + (col)])

/* emu_tmem.c, used by emu_tcgen05.c */
uint64_t lpx_emu_tm_arg(emu_warp *w, const emu_inst *in, int k, int lane);
int lpx_emu_tm_cols(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t col, uint32_t n, const char *what);
int lpx_emu_tm_ready(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n,
                     int flags, const char *doing);
void lpx_emu_tm_tag(emu_cta *c, uint32_t quads, uint32_t col, uint32_t n, uint32_t tag);
tm_group *lpx_emu_tm_group(emu_cta *c, int32_t index);
int32_t lpx_emu_tm_open(emu_warp *w, const emu_inst *in, int lane);
emu_cta *lpx_emu_tm_peer(emu_warp *w, const emu_inst *in, int lane, int which);
int lpx_emu_tm_uniform(emu_warp *w, const emu_inst *in, uint32_t m, int k, const char *what);
uint32_t lpx_emu_tm_tick(emu_cta *c);
void lpx_emu_tm_acquire(emu_warp *w, const uint8_t *p);
void lpx_emu_tm_merge(emu_cta *c);
int lpx_emu_tm_fenced(emu_warp *w, const emu_inst *in, int lane, const char *what);
int lpx_emu_tm_order(emu_warp *w, const emu_inst *in, int lane, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n,
                     int write, const char *doing);
void lpx_emu_tm_note(emu_warp *w, const emu_inst *in, emu_cta *c, uint32_t quads, uint32_t col, uint32_t n, int kind);

#endif
