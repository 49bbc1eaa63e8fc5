/* The instruction table expanded into data, and opcode-form interning:
 * "ld.global.v4.f32" is split, matched against the table and validated
 * once per context; instructions then refer to the form by id. */
#include "lpx_internal.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- the tables */

const lpx_type_desc lpx_types[LPX_T__COUNT] = {
#define X(id, spell, bits, kind, cls) { spell, bits, (#kind)[0], LPX_RC_##cls },
  LPX_TYPES(X)
#undef X
};

const lpx_isa_row lpx_isa_rows[LPX_OP__COUNT] = {
#define X(id, name, sig, groups, req, types, ntypes, ptx, sm, maxsm, emu) \
  { name, sig, (groups), (req), (types), ntypes, ptx, sm, maxsm },
  LPX_ISA(X)
#undef X
};

_Static_assert(LPX_GB__CORE <= 64, "core modifier groups are bits of a uint64_t");
_Static_assert(LPX_GB__COUNT - LPX_GB__CORE <= 64, "family modifier groups are bits of a uint64_t");

const lpx_family_row lpx_family_rows[LPX_OP__COUNT] = {
#define X(op, groups, required, shape, mtypes) [LPX_OP_##op] = { groups, required, shape, mtypes },
  LPX_FAMILIES(X)
#undef X
};

/* Per group, its spellings in value order (index 0: none), derived from
 * the table's rows, and how many there are. */
#define G(id, rows) static const char *const spell_##id[] = { NULL, rows };
#define M(group, name, spell) spell,
LPX_MODGROUPS(G, M)
LPX_FAMGROUPS(G, M)
#undef G
#undef M

typedef struct group_desc { const char *name; const char *const *spell; int n; } group_desc;
static const group_desc groups[LPX_GB__COUNT] = {
#define G(id, rows) { #id, spell_##id, (int)(sizeof spell_##id / sizeof spell_##id[0]) - 1 },
#define M(group, name, spell)
  LPX_MODGROUPS(G, M)
  LPX_FAMGROUPS(G, M)
#undef G
#undef M
};

/* A gate: a row, a type (group -1) or a group's named value, and the PTX/sm it needs. */
typedef struct gate { int op, group, value, ptx, sm; } gate;
static const gate gates[] = {
#define T(op, type, ptx, sm) { LPX_OP_##op, -1, LPX_T_##type, ptx, sm },
#define M(op, group, name, ptx, sm) { LPX_OP_##op, LPX_GB_##group, LPX_##group##_##name, ptx, sm },
  LPX_GATES(T, M)
#undef T
#undef M
};

typedef struct special { const char *name; int type, ptx, sm; } special;
static const special specials[LPX_SR__COUNT] = {
#define X(id, name, type, ptx, sm) { name, LPX_T_##type, ptx, sm },
  LPX_SPECIALS(X)
#undef X
};

/* ------------------------------------------------------------- lookups */

/* Type id of a spelling ("f32"), or -1. */
int32_t lpx_type_lookup(const char *name)
{
  for (int i = 0; i < LPX_T__COUNT; i++)
    if (strcmp(lpx_types[i].name, name) == 0) return i;
  return -1;
}

/* Spelling of a type id. */
const char *lpx_type_name(int32_t t)
{
  return (t >= 0 && t < LPX_T__COUNT) ? lpx_types[t].name : "?";
}

/* Width in bits of a type id. */
int32_t lpx_type_bits(int32_t t)
{
  return (t >= 0 && t < LPX_T__COUNT) ? lpx_types[t].bits : 0;
}

/* Number of fundamental types (ids run from 0). */
int32_t lpx_type_count(void) { return LPX_T__COUNT; }

/* Kind letter of a type id: 'B' bits, 'U', 'S', 'F' float, 'H' packed float, 'P' predicate. */
int32_t lpx_type_kind(int32_t t)
{
  return (t >= 0 && t < LPX_T__COUNT) ? lpx_types[t].kind : 0;
}

/* Number of special registers (ids run from 0). */
int32_t lpx_special_count(void) { return LPX_SR__COUNT; }

/* Special register id of a spelling ("%tid.x"), or -1. */
int32_t lpx_special_lookup(const char *name)
{
  for (int i = 0; i < LPX_SR__COUNT; i++)
    if (strcmp(specials[i].name, name) == 0) return i;
  return -1;
}

/* Type of a special register. */
int32_t lpx_special_type(int32_t id) { return specials[id].type; }

/* Spelling of a special register (for the emitter). */
const char *lpx_special_name(int32_t id) { return specials[id].name; }

/* Minimum PTX version and sm of a special register. */
void lpx_special_gate(int32_t id, int *ptx, int *sm)
{
  *ptx = specials[id].ptx;
  *sm = specials[id].sm;
}

/* Number of rows in the instruction table. */
int32_t lpx_isa_row_count(void) { return LPX_OP__COUNT; }

/* Opcode name of a row. */
const char *lpx_isa_row_name(int32_t row)
{
  return (row >= 0 && row < LPX_OP__COUNT) ? lpx_isa_rows[row].name : NULL;
}

typedef struct target { const char *name; int ptx; } target;
static const target targets[] = {
#define X(name, ptx) { name, ptx },
  LPX_TARGETS(X)
#undef X
};
#define TARGET_COUNT ((int)(sizeof targets / sizeof targets[0]))

/* The table row of a target name, or NULL. */
static const target *target_find(const char *arch)
{
  for (int i = 0; arch && i < TARGET_COUNT; i++)
    if (strcmp(targets[i].name, arch) == 0) return &targets[i];
  return NULL;
}

/* Parse a known target ("sm_90a") into sm=90, family=1 ('a'; 2: 'f'); 0 on success. */
int32_t lpx_arch_parse(const char *arch, int32_t *sm, int32_t *family)
{
  if (!target_find(arch)) return -1;
  int n = 0, end = 0;
  if (sscanf(arch, "sm_%d%n", &n, &end) != 1) return -1;
  *sm = n;
  *family = arch[end] == 'a' ? 1 : (arch[end] == 'f' ? 2 : 0);
  return 0;
}

/* The arch to compile a module of target for, to run on a GPU of arch
 * device: a plain target is compiled for the GPU itself (a cubin runs only
 * on its own major version, PTX is forward compatible); an 'a' target runs
 * only on its own GPU and an 'f' one on its own family. */
int32_t lpx_arch_for_device(lpx_ctx *ctx, const char *target, const char *device, char *out, int32_t cap)
{
  int32_t tsm, tfam, dsm, dfam;
  if (lpx_arch_parse(target, &tsm, &tfam)) return lpx_fail(ctx, "unknown target %s", target);
  if (lpx_arch_parse(device, &dsm, &dfam)) return lpx_fail(ctx, "unknown GPU arch %s", device);
  if (tsm > dsm)
    return lpx_fail(ctx, "the kernel targets %s, newer than this GPU (%s): build it for %s or older "
                         "(kernel{arch = ...}), or run it on the emulator (LUAPTX_DEVICE=emu)", target, device, device);
  if ((tfam == 1 && tsm != dsm) || (tfam == 2 && tsm / 10 != dsm / 10))
    return lpx_fail(ctx, "the kernel targets %s, whose arch-specific instructions this GPU (%s) lacks: "
                         "build it for %s, or run it on the emulator (LUAPTX_DEVICE=emu)", target, device, device);
  if (tfam) snprintf(out, (size_t)cap, "%s", target);
  else snprintf(out, (size_t)cap, "sm_%d", dsm);
  return 0;
}

/* The known targets, space-separated, into out (cap bytes); the full length. */
int32_t lpx_arch_list(char *out, int32_t cap)
{
  int32_t len = 0;
  for (int i = 0; i < TARGET_COUNT; i++) {
    int n = snprintf(out && len < cap ? out + len : NULL, out && len < cap ? (size_t)(cap - len) : 0, "%s%s",
                     i ? " " : "", targets[i].name);
    len += n;
  }
  return len;
}

/* The oldest PTX ISA version (x10) that knows a target, or -1. */
int32_t lpx_arch_min_ptx(const char *arch)
{
  const target *t = target_find(arch);
  return t ? t->ptx : -1;
}

/* The newest PTX ISA version (x10) luaptx knows (LPX_PTX_VERSIONS). */
int32_t lpx_ptx_version_max(void)
{
  int32_t v = 0;
  for (int i = 0; i < TARGET_COUNT; i++)
    if (targets[i].ptx > v) v = targets[i].ptx;
#define X(n, cuda) if (n > v) v = n;
  LPX_PTX_VERSIONS(X)
#undef X
  return v;
}

/* The one version rule of every command: 0 when PTX ISA version v (x10)
 * is one luaptx knows, else -1 with the error set. */
int32_t lpx_ptx_version_check(lpx_ctx *ctx, int32_t v)
{
  int32_t newest = lpx_ptx_version_max();
  if (v <= newest) return 0;
  return lpx_fail(ctx, "PTX ISA %d.%d is newer than luaptx knows; the newest is %d.%d", v / 10, v % 10, newest / 10, newest % 10);
}

typedef struct target_mod { const char *name; int texmode; const char *refused; } target_mod;
static const target_mod target_mods[] = {
#define X(name, texmode, refused) { name, texmode, refused },
  LPX_TARGET_MODS(X)
#undef X
};
#define TARGET_MOD_COUNT ((int)(sizeof target_mods / sizeof target_mods[0]))

/* The modifier row of a .target entry, or NULL. */
static const target_mod *target_mod_find(const char *name)
{
  for (int i = 0; i < TARGET_MOD_COUNT; i++)
    if (strcmp(target_mods[i].name, name) == 0) return &target_mods[i];
  return NULL;
}

/* One architecture entry of .target: known, and known to PTX ISA v (x10). */
static int32_t target_arch_check(lpx_ctx *ctx, int32_t v, const char *arch)
{
  const target *t = target_find(arch);
  if (!t) {
    char list[512];
    lpx_arch_list(list, sizeof list);
    return lpx_fail(ctx, "unknown target %s; the PTX ISA targets are %s", arch, list);
  }
  if (v > 0 && v < t->ptx)
    return lpx_fail(ctx, "PTX ISA %d.%d does not know .target %s; it needs .version %d.%d or newer",
                    v / 10, v % 10, arch, t->ptx / 10, t->ptx % 10);
  return 0;
}

/* The .target rule of every command: entries[0..n) (the directive's
 * comma-separated list) start with an architecture that PTX ISA version v
 * (x10) knows, then name architectures or modifiers (LPX_TARGET_MODS), at
 * most one texturing mode. 0 when it holds, else 1 + the index of the
 * offending entry, with the error set. */
int32_t lpx_target_check(lpx_ctx *ctx, int32_t v, const char *const *entries, int32_t n)
{
  const char *texmode = NULL;
  if (n > 0 && target_mod_find(entries[0])) {
    lpx_fail(ctx, ".target starts with %s; the first entry must be the target architecture (e.g. .target sm_80, %s)",
             entries[0], entries[0]);
    return 1;
  }
  for (int32_t i = 0; i < n; i++) {
    const target_mod *mod = target_mod_find(entries[i]);
    if (!mod) {
      if (target_arch_check(ctx, v, entries[i])) {
        if (i > 0 && strncmp(entries[i], "sm_", 3) != 0)
          lpx_fail(ctx, "unknown .target entry %s; after the architecture come architectures or "
                        "texmode_unified, texmode_independent, debug", entries[i]);
        return i + 1;
      }
      continue;
    }
    if (mod->refused) { lpx_fail(ctx, "%s", mod->refused); return i + 1; }
    if (mod->texmode && texmode) {
      lpx_fail(ctx, "conflicting .target texturing modes %s and %s: give one", texmode, entries[i]);
      return i + 1;
    }
    if (mod->texmode) texmode = mod->name;
  }
  return 0;
}

/* ------------------------------------------------------- form parsing */

/* The named value of spelling tok (n chars) in a group, or 0. */
int lpx_group_index(int group, const char *tok, size_t n)
{
  if (group < 0 || group >= LPX_GB__COUNT) return 0;
  for (int v = 1; v <= groups[group].n; v++) {
    const char *s = groups[group].spell[v];
    if (strlen(s) == n && memcmp(s, tok, n) == 0) return v;
  }
  return 0;
}

/* The spelling of a group's named value, or NULL. */
const char *lpx_modifier_name(int32_t group, int32_t value)
{
  if (group < 0 || group >= LPX_GB__COUNT || value < 1 || value > groups[group].n) return NULL;
  return groups[group].spell[value];
}

/* The number of spellings of a group (its largest named value). */
int32_t lpx_modgroup_size(int32_t group)
{
  return group >= 0 && group < LPX_GB__COUNT ? groups[group].n : 0;
}

/* The index of a modifier group by its table name ("TCSHAPE"), or -1. */
int32_t lpx_modgroup_lookup(const char *name)
{
  for (int g = 0; g < LPX_GB__COUNT; g++)
    if (strcmp(groups[g].name, name) == 0) return g;
  return -1;
}

/* Does a row allow (or, with req, require) modifier group g? */
static int row_has(int op, int g, int req)
{
  if (g < LPX_GB__CORE) return (int)((req ? lpx_isa_rows[op].required : lpx_isa_rows[op].groups) >> g & 1);
  const lpx_family_row *fr = &lpx_family_rows[op];
  return (int)((req ? fr->required : fr->groups) >> (g - LPX_GB__CORE) & 1);
}

/* Append ".a .b ..." (a group's spellings) to out at *n. */
static void put_spellings(int g, char *out, size_t cap, size_t *n)
{
  for (int v = 1; v <= groups[g].n && *n + 1 < cap; v++)
    *n += (size_t)snprintf(out + *n, cap - *n, "%s.%s", *n ? " " : "", groups[g].spell[v]);
  if (*n >= cap) *n = cap - 1;
}

/* Longest row whose dotted name is a prefix of text; *used = its length. */
static int find_row(const char *text, size_t *used)
{
  int best = -1;
  size_t best_len = 0;
  for (int i = 0; i < LPX_OP__COUNT; i++) {
    size_t n = strlen(lpx_isa_rows[i].name);
    if (n <= best_len || strncmp(text, lpx_isa_rows[i].name, n)) continue;
    if (text[n] != '\0' && text[n] != '.') continue;
    best = i;
    best_len = n;
  }
  *used = best_len;
  return best;
}

/* Write ".a .b .c" for every modifier a row accepts (for messages). */
static void list_modifiers(int op, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int g = 0; g < LPX_GB__COUNT && n + 1 < cap; g++)
    if (row_has(op, g, 0) && g != LPX_GB_SPACE2 && g != LPX_GB_BLAYOUT) put_spellings(g, out, cap, &n);
}

/* Write ".u32 .s32 ..." for the types a row accepts. */
static void list_types(uint64_t types, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int t = 0; t < LPX_T__COUNT && n + 1 < cap; t++)
    if (types >> t & 1)
      n += (size_t)snprintf(out + n, cap - n, "%s.%s", n ? " " : "", lpx_types[t].name);
}

/* Record one type modifier on a form. */
static int form_type(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row, int t)
{
  char valid[512];
  if (!(row->types >> t & 1)) {
    list_types(row->types, valid, sizeof valid);
    return lpx_fail(ctx, "%s: type .%s is not valid here; valid types: %s",
                    f->info.text, lpx_types[t].name, valid[0] ? valid : "(none)");
  }
  if (f->info.type < 0) f->info.type = t;
  else if (f->info.type2 < 0) f->info.type2 = t;
  else if (f->info.type3 < 0 && abs(row->ntypes) >= 3) f->info.type3 = t;
  else return lpx_fail(ctx, "%s: too many type modifiers", f->info.text);
  return 0;
}

/* Record one matrix type (mma .d.a.b.c, wgmma .d.a.b) in opcode order. */
static int form_mtype(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row, int mt)
{
  int32_t *slot[4] = { &f->info.dtype, &f->info.atype, &f->info.btype, &f->info.ctype };
  int most = lpx_family_rows[f->info.op].mtypes;
  if (f->info.nmtypes >= most)
    return lpx_fail(ctx, "%s: too many type modifiers; %s takes %d", f->info.text, row->name, most);
  *slot[f->info.nmtypes++] = mt;
  return 0;
}

/* The first group of the row (a required one when req) that has not been
 * seen and spells tok, or -1. */
static int pick_group(const lpx_form *f, const char *tok, size_t n, int req)
{
  for (int g = 0; g < LPX_GB__COUNT; g++)
    if (!f->modsel[g] && row_has(f->info.op, g, req) && lpx_group_index(g, tok, n)) return g;
  return -1;
}

/* A shape .mMnN[kK] of a family row: 1 taken, 0 not a shape, -1 repeated. */
static int form_shape(lpx_form *f, const char *tok)
{
  int v[3] = { 0, 0, 0 };
  const char *p = tok;
  if (!lpx_family_rows[f->info.op].shape) return 0;
  for (int i = 0; i < 3 && *p == "mnk"[i]; i++) {
    char *e;
    if (!isdigit((unsigned char)p[1])) return 0;
    long x = strtol(p + 1, &e, 10);
    if (x <= 0 || x > 4096) return 0;
    v[i] = (int)x;
    p = e;
  }
  if (*p || !v[1]) return 0;
  if (f->info.shape_m) return -1;
  f->info.shape_m = v[0]; f->info.shape_n = v[1]; f->info.shape_k = v[2];
  return 1;
}

/* Record one non-type modifier on a form: find its group in the row. */
static int form_modifier(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row,
                         const char *tok, size_t n)
{
  char valid[1024];
  /* A spelling in two groups (mbarrier.expect_tx) goes to a required group first. */
  int g = pick_group(f, tok, n, 1);
  if (g < 0) g = pick_group(f, tok, n, 0);
  if (g >= 0 && g < LPX_GB__COUNT) {   /* the bound is pick_group's; GCC cannot see it */
    int idx = lpx_group_index(g, tok, n);
    f->modsel[g] = (uint8_t)idx;
    if (g == LPX_GB_VEC) f->info.vec = idx == LPX_VEC_V2 ? 2 : idx == LPX_VEC_V4 ? 4 : 8;
    if (g == LPX_GB_MULMODE && idx == LPX_MULMODE_WIDE) f->info.wide = 1;
    return 0;
  }
  int shape = form_shape(f, tok);
  if (shape > 0) return 0;
  list_modifiers(f->info.op, valid, sizeof valid);
  return lpx_fail(ctx, "%s: unknown or repeated modifier .%.*s for %s; valid modifiers: %s%s",
                  f->info.text, (int)n, tok, row->name, valid[0] ? valid : "(none)",
                  lpx_family_rows[f->info.op].shape ? " and a shape (.m16n8k16)" : "");
}

/* Does the form carry a gate's type or named modifier value? */
static int form_has(const lpx_form *f, const gate *g)
{
  if (g->group < 0) return f->info.type == g->value || f->info.type2 == g->value || f->info.type3 == g->value;
  return f->modsel[g->group] == g->value;
}

/* Raise a form's minimum PTX/sm by the gates of its row it carries. */
static void form_gates(lpx_form *f)
{
  for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++) {
    if (gates[i].op != f->info.op || !form_has(f, &gates[i])) continue;
    if (gates[i].ptx > f->info.min_ptx) f->info.min_ptx = gates[i].ptx;
    if (gates[i].sm > f->info.min_sm) f->info.min_sm = gates[i].sm;
  }
}

/* Check what a form must carry: required groups and its type count. */
static int form_complete(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row)
{
  for (int g = 0; g < LPX_GB__COUNT; g++) {
    if (f->modsel[g] || !row_has(f->info.op, g, 1)) continue;
    char want[512] = "";
    size_t n = 0;
    put_spellings(g, want, sizeof want, &n);
    return lpx_fail(ctx, "%s: %s needs one of %s", f->info.text, row->name, want);
  }
  int have = (f->info.type >= 0) + (f->info.type2 >= 0) + (f->info.type3 >= 0);
  int most = abs(row->ntypes);
  if (have > most)
    return lpx_fail(ctx, "%s: too many type modifiers; %s takes %d", f->info.text, row->name, most);
  if (lpx_family_rows[f->info.op].mtypes || row->ntypes < 0 || have == row->ntypes) return 0;
  char valid[512];
  list_types(row->types, valid, sizeof valid);
  if (row->ntypes == 2 || row->ntypes == 3)
    return lpx_fail(ctx, "%s: %s needs %s (from %s)", f->info.text, row->name,
                    row->ntypes == 2 ? "a destination and a source type" : "three types (.dtype.atype.btype)", valid);
  return lpx_fail(ctx, "%s: %s needs %s type (one of %s)", f->info.text, row->name,
                  row->ntypes ? "a" : "no", row->ntypes ? valid : "-");
}

/* Fail for a fundamental type a matrix row does not take, listing the matrix types. */
static int not_mtype(lpx_ctx *ctx, const lpx_form *f, const lpx_isa_row *row, const char *tok)
{
  char valid[256];
  size_t n = 0;
  valid[0] = '\0';
  for (int mt = 1; mt <= lpx_mtype_count() && n + 1 < sizeof valid; mt++)
    n += (size_t)snprintf(valid + n, sizeof valid - n, " .%s", lpx_mtype_name(mt));
  return lpx_fail(ctx, "%s: .%s is not a type of %s; its types are%s", f->info.text, tok, row->name, valid);
}

/* Parse the modifiers after the row name into the form. */
static int form_parse(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row, const char *mods)
{
  for (const char *p = mods; *p;) {
    if (*p++ != '.') return lpx_fail(ctx, "%s: malformed opcode", f->info.text);
    const char *e = strchr(p, '.');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char tok[64];
    if (n == 0 || n >= sizeof tok) return lpx_fail(ctx, "%s: empty or overlong modifier", f->info.text);
    memcpy(tok, p, n);
    tok[n] = '\0';
    int mtypes = lpx_family_rows[f->info.op].mtypes, mt = mtypes ? lpx_mtype_find(tok, n) : 0;
    int t = mt ? -1 : lpx_type_lookup(tok), rc;
    if (mtypes && t >= 0) return not_mtype(ctx, f, row, tok);
    if (mt) rc = form_mtype(ctx, f, row, mt);
    else rc = t >= 0 ? form_type(ctx, f, row, t) : form_modifier(ctx, f, row, tok, n);
    if (rc) return rc;
    p += n;
  }
  return form_complete(ctx, f, row);
}

/* The count a .xN modifier spells, and a tensor copy's rank .Nd. */
static const uint8_t xnum_count[LPX_XNUM__END] = {
  [LPX_XNUM_X1] = 1, [LPX_XNUM_X2] = 2, [LPX_XNUM_X4] = 4, [LPX_XNUM_X8] = 8,
  [LPX_XNUM_X16] = 16, [LPX_XNUM_X32] = 32, [LPX_XNUM_X64] = 64, [LPX_XNUM_X128] = 128,
};
static const uint8_t rank_of[LPX_RANK__END] = {
  [LPX_RANK_1D] = 1, [LPX_RANK_2D] = 2, [LPX_RANK_3D] = 3, [LPX_RANK_4D] = 4, [LPX_RANK_5D] = 5,
};

/* Fill the record's family facts from the modifiers the form carries. */
static void form_facts(lpx_form *f)
{
  const uint8_t *s = f->modsel;
  lpx_form_info *fi = &f->info;
  fi->alayout = s[LPX_GB_ALAYOUT];
  fi->blayout = s[LPX_GB_BLAYOUT];
  fi->num = xnum_count[s[LPX_GB_XNUM]];
  fi->rank = rank_of[s[LPX_GB_RANK]];
  fi->cta_group = s[LPX_GB_CTAGRP] == LPX_CTAGRP_CTA_GROUP_2 ? 2 : s[LPX_GB_CTAGRP] ? 1 : 0;
  fi->sparse = s[LPX_GB_SP] != 0;
  fi->trans = s[LPX_GB_TRANS] != 0;
  fi->satfinite = s[LPX_GB_SAT] == LPX_SAT_SATFINITE;
  fi->multicast = s[LPX_GB_MCAST] != 0;
  fi->tensor = s[LPX_GB_TENSOR] != 0;
  fi->prefetch = s[LPX_GB_BULKPF] != 0;
  fi->im2col = s[LPX_GB_LOADMODE];
  fi->scope = s[LPX_GB_SCOPE];
  fi->sem = s[LPX_GB_SEM];
}

/* The modifiers and types the row of an opcode accepts, space-separated
 * without dots, into out (for completion). Returns the row or -1. */
int32_t lpx_isa_modifiers(const char *opcode, char *out, int32_t cap)
{
  size_t used;
  int row = find_row(opcode, &used);
  if (cap > 0) out[0] = '\0';
  if (row < 0 || cap < 2) return -1;
  char types[512];
  list_modifiers(row, out, (size_t)cap);
  list_types(lpx_isa_rows[row].types, types, sizeof types);
  size_t n = strlen(out);
  snprintf(out + n, (size_t)cap - n, "%s%s", n ? " " : "", types);
  for (char *p = out, *q = out;; p++) {
    if (*p != '.') *q++ = *p;     /* drop the leading dots */
    if (!*p) break;
  }
  return row;
}

/* Intern and validate an opcode form; return its id or -1 (message in ctx).
 * An opcode the table does not know still interns (op = -1) with a warning. */
int32_t lpx_form_intern(lpx_ctx *ctx, const char *text)
{
  size_t len = strlen(text);
  int32_t id = lpx_strtab_find(&ctx->form_names, text, len);
  if (id >= 0) return id;
  lpx_form f;
  memset(&f, 0, sizeof f);
  f.info.type = f.info.type2 = f.info.type3 = -1;
  f.info.vec = 1;
  size_t used;
  int row = find_row(text, &used);
  f.info.op = row;
  f.info.text = text;
  if (row < 0) {
    lpx_warn(ctx, "%s: opcode not in luaptx's instruction table; emitted unchecked", text);
  } else {
    const lpx_isa_row *r = &lpx_isa_rows[row];
    f.info.min_ptx = r->min_ptx;
    f.info.min_sm = r->min_sm;
    f.info.max_sm = r->max_sm;
    if (form_parse(ctx, &f, r, text + used)) return -1;
    form_facts(&f);
    form_gates(&f);
  }
  id = lpx_strtab_intern(&ctx->form_names, text, len);
  if (id < 0 || LPX_RESERVE(ctx->forms, ctx->forms_cap, (size_t)id + 1))
    return lpx_fail(ctx, "out of memory");
  f.info.text = lpx_strtab_get(&ctx->form_names, id);
  ctx->forms[id] = f;
  return id;
}

/* Facts about an interned form. */
const lpx_form_info *lpx_form_get(lpx_ctx *ctx, int32_t form)
{
  if (form < 0 || (size_t)form >= ctx->form_names.n) return NULL;
  /* The arena may have moved since interning: refresh the text pointer. */
  ctx->forms[form].info.text = lpx_strtab_get(&ctx->form_names, form);
  return &ctx->forms[form].info;
}
