/* The rules of ISA rows beyond their table columns (lpx_rules.c): the
 * operand selectors of the video instructions (%r1.b0, %r2.h10,
 * %r3.b3210) and vmad's source negation (-%r4), how a register operand
 * carries them and their spelling; and what ptxas checks of cvt.pack,
 * madc, dp2a, lop3 with a predicate, alloca, cache policies, pmevent,
 * isspacep and getctarank. */
#ifndef LPX_RULES_H
#define LPX_RULES_H
#include "lpx_internal.h"

/* A register operand's selector sits in lpx_operand.ival (0: none): bits
 * 0-2 the digit count (1-4), bit 3 set for half-words (.h), digit k of the
 * spelling (left to right) in bits 4+4k .. 7+4k. */
#define LPX_SEL_COUNT(s) ((int)((uint64_t)(s) & 7))
#define LPX_SEL_HALF(s) ((int)((uint64_t)(s) >> 3 & 1))
#define LPX_SEL_DIGIT(s, k) ((int)((uint64_t)(s) >> (4 + 4 * (k)) & 15))

/* Is the row one of the video instructions? */
int lpx_rules_video_row(int op);
/* Elements a video row works on: 1 (scalar), 2 or 4 (SIMD); 0 for other rows. */
int lpx_rules_video_lanes(int op);
/* Write ".b0" / ".h10" for a selector (nothing for 0) into out. */
void lpx_rules_sel_text(int64_t sel, char *out, size_t cap);
/* The rules of a row beyond its table columns; 0 or -1 (message set). */
int lpx_rules_check(lpx_module *m, const lpx_func *f, const lpx_form *fo, lpx_operand *ops, int nops, const uint32_t *starts, int count);

#endif
