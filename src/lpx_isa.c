/* The instruction table expanded into data, and opcode-form interning:
 * "ld.global.v4.f32" is split, matched against the table and validated
 * once per context; instructions then refer to the form by id. */
#include "lpx_internal.h"
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
#define X(id, name, sig, groups, req, types, ntypes, ptx, sm, maxsm) \
  { name, sig, (groups), (req), (types), ntypes, ptx, sm, maxsm },
  LPX_ISA(X)
#undef X
};

_Static_assert(LPX_GB__COUNT <= 64, "modifier groups are bits of a uint64_t");

static const char *const group_spellings[LPX_GB__COUNT] = {
#define X(id, spell) spell,
  LPX_MODGROUPS(X)
#undef X
};

typedef struct gate { const char *op, *mod; int ptx, sm; } gate;
static const gate gates[] = {
#define X(op, mod, ptx, sm) { op, mod, ptx, sm },
  LPX_GATES(X)
#undef X
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

/* The newest PTX ISA version (x10) luaptx knows: the newest any target needs. */
int32_t lpx_ptx_version_max(void)
{
  int32_t v = 0;
  for (int i = 0; i < TARGET_COUNT; i++)
    if (targets[i].ptx > v) v = targets[i].ptx;
  return v;
}

/* ------------------------------------------------------- form parsing */

/* 1-based position of tok in a space-separated spelling list, or 0. */
static int list_index(const char *list, const char *tok, size_t n)
{
  int i = 1;
  for (const char *p = list; *p; i++) {
    const char *e = strchr(p, ' ');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, tok, n) == 0) return i;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* The 1-based index of tok in a group's spelling list, or 0. */
int lpx_group_index(int group, const char *tok, size_t n)
{
  return group >= 0 && group < LPX_GB__COUNT ? list_index(group_spellings[group], tok, n) : 0;
}

/* The space-separated spellings of a modifier group. */
const char *lpx_group_spellings(int group)
{
  return group >= 0 && group < LPX_GB__COUNT ? group_spellings[group] : "";
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
static void list_modifiers(const lpx_isa_row *row, char *out, size_t cap)
{
  size_t n = 0;
  out[0] = '\0';
  for (int g = 0; g < LPX_GB__COUNT && n + 1 < cap; g++) {
    if (!(row->groups >> g & 1) || g == LPX_GB_SPACE2) continue;
    for (const char *p = group_spellings[g]; *p && n + 1 < cap;) {
      const char *e = strchr(p, ' ');
      size_t len = e ? (size_t)(e - p) : strlen(p);
      n += (size_t)snprintf(out + n, cap - n, "%s.%.*s", n ? " " : "", (int)len, p);
      p = e ? e + 1 : p + len;
    }
  }
  if (n >= cap) n = cap - 1;
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
  int any = (row->groups & G_ANY) != 0;
  if (!any && !(row->types >> t & 1)) {
    list_types(row->types, valid, sizeof valid);
    return lpx_fail(ctx, "%s: type .%s is not valid here; valid types: %s",
                    f->info.text, lpx_types[t].name, valid[0] ? valid : "(none)");
  }
  if (f->info.type < 0) f->info.type = t;
  else if (f->info.type2 < 0) f->info.type2 = t;
  else if (!any) return lpx_fail(ctx, "%s: too many type modifiers", f->info.text);
  return 0;
}

/* Record one non-type modifier on a form: find its group in the row. */
static int form_modifier(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row,
                         const char *tok, size_t n)
{
  char valid[1024];
  /* A spelling in two groups (mbarrier.expect_tx) goes to a required group first. */
  uint64_t unseen_required = row->required & ~f->groups_seen;
  for (int g = 0; g < LPX_GB__COUNT; g++) {
    int idx = (unseen_required >> g & 1) ? list_index(group_spellings[g], tok, n) : 0;
    if (idx) { unseen_required = (uint64_t)1 << g; break; }
    if (g == LPX_GB__COUNT - 1) unseen_required = 0;
  }
  for (int g = 0; g < LPX_GB__COUNT; g++) {
    int idx = (row->groups >> g & 1) ? list_index(group_spellings[g], tok, n) : 0;
    if (unseen_required && !(unseen_required >> g & 1)) idx = 0;
    if (!idx || (f->groups_seen >> g & 1)) continue;
    f->groups_seen |= (uint64_t)1 << g;
    f->modsel[g] = (uint8_t)idx;
    if (g == LPX_GB_VEC) f->info.vec = tok[1] - '0';
    if (g == LPX_GB_MULMODE && n == 4 && !memcmp(tok, "wide", 4)) f->info.wide = 1;
    return 0;
  }
  if (row->groups & G_ANY) return 0;
  list_modifiers(row, valid, sizeof valid);
  return lpx_fail(ctx, "%s: unknown or repeated modifier .%.*s for %s; valid modifiers: %s",
                  f->info.text, (int)n, tok, row->name, valid[0] ? valid : "(none)");
}

/* Raise a form's minimum PTX/sm by the gates that name its modifiers. */
static void form_gates(lpx_form *f, const lpx_isa_row *row, const char *mods)
{
  for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++) {
    if (strcmp(gates[i].op, row->name)) continue;
    size_t n = strlen(gates[i].mod);
    for (const char *p = mods; (p = strstr(p, gates[i].mod)); p += n) {
      if (p[-1] != '.' || (p[n] != '.' && p[n] != '\0')) continue;
      if (gates[i].ptx > f->info.min_ptx) f->info.min_ptx = gates[i].ptx;
      if (gates[i].sm > f->info.min_sm) f->info.min_sm = gates[i].sm;
      break;
    }
  }
}

/* Check what a form must carry: required groups and its type count. */
static int form_complete(lpx_ctx *ctx, lpx_form *f, const lpx_isa_row *row)
{
  uint64_t missing = row->required & ~f->groups_seen;
  if (missing) {
    for (int g = 0; g < LPX_GB__COUNT; g++) {
      if (!(missing >> g & 1)) continue;
      char want[512] = "";
      size_t n = 0;
      for (const char *p = group_spellings[g]; *p && n + 1 < sizeof want;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        n += (size_t)snprintf(want + n, sizeof want - n, "%s.%.*s", n ? " " : "", (int)len, p);
        p = e ? e + 1 : p + len;
      }
      return lpx_fail(ctx, "%s: %s needs one of %s", f->info.text, row->name, want);
    }
  }
  int have = (f->info.type >= 0) + (f->info.type2 >= 0);
  int most = row->ntypes < 0 ? 1 : row->ntypes;
  if (!(row->groups & G_ANY) && have > most)
    return lpx_fail(ctx, "%s: too many type modifiers; %s takes %d", f->info.text, row->name, most);
  if ((row->groups & G_ANY) || row->ntypes < 0 || have == row->ntypes) return 0;
  char valid[512];
  list_types(row->types, valid, sizeof valid);
  if (row->ntypes == 2)
    return lpx_fail(ctx, "%s: %s needs a destination and a source type (from %s)",
                    f->info.text, row->name, valid);
  return lpx_fail(ctx, "%s: %s needs %s type (one of %s)", f->info.text, row->name,
                  row->ntypes ? "a" : "no", row->ntypes ? valid : "-");
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
    int t = lpx_type_lookup(tok);
    int rc = t >= 0 ? form_type(ctx, f, row, t) : form_modifier(ctx, f, row, tok, n);
    if (rc) return rc;
    p += n;
  }
  return form_complete(ctx, f, row);
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
  list_modifiers(&lpx_isa_rows[row], out, (size_t)cap);
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
  f.info.type = f.info.type2 = -1;
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
    form_gates(&f, r, text + used);
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
