/* A kernel's launch directives (.reqntid, .maxntid, .reqnctapercluster,
 * .explicitcluster, .maxclusterrank, .minnctapersm) read once from its
 * IR, and the launch conditions the driver enforces for them, applied by
 * the device dispatcher (lpx_device_launch) before any device runs. */
#include "lpx_bounds.h"
#include <stdio.h>
#include <string.h>

/* The directives with dims, in the order of lpx_bounds' arrays. */
#define BOUNDS_DIMS(X) X(".reqntid", reqntid) X(".maxntid", maxntid) X(".reqnctapercluster", reqcluster)

/* Read "n[, n[, n]]" after a directive's name into d (missing dims are 1). */
static void read_dims(const char *s, uint32_t d[3])
{
  unsigned a = 0, b = 1, c = 1;
  if (sscanf(s, " %u , %u , %u", &a, &b, &c) < 1) return;
  d[0] = a; d[1] = b; d[2] = c;
}

/* Does directive text d name directive word (followed by a space or its end)? */
static const char *after(const char *d, const char *word)
{
  size_t n = strlen(word);
  return strncmp(d, word, n) == 0 && (d[n] == ' ' || d[n] == '\0') ? d + n : NULL;
}

/* Fill b from function f's directives (0: a directive not given). */
void lpx_bounds_of(const lpx_module *m, const lpx_func *f, lpx_bounds *b)
{
  memset(b, 0, sizeof *b);
  for (size_t i = 0; i < f->ndirectives; i++) {
    const char *d = lpx_strtab_get(&m->syms, f->directives[i]), *rest;
#define X(word, field) if ((rest = after(d, word))) { read_dims(rest, b->field); continue; }
    BOUNDS_DIMS(X)
#undef X
    if ((rest = after(d, ".maxclusterrank"))) { sscanf(rest, " %u", &b->maxclusterrank); continue; }
    if ((rest = after(d, ".minnctapersm"))) { sscanf(rest, " %u", &b->minnctapersm); continue; }
    if (after(d, ".explicitcluster")) b->explicitcluster = 1;
  }
}

/* Entry fn's .reqntid (out[0..2]), .maxntid (out[3..5]) and .minnctapersm
 * (out[6]), 0 where not given, and the module's sm (out[7]; 90 for
 * sm_90a), for the host's checks; 0, or -1 when fn is not a function of m. */
int32_t lpx_func_bounds(lpx_module *m, int32_t fn, uint32_t *out)
{
  if (!m || fn < 0 || (size_t)fn >= m->nfuncs) return -1;
  lpx_bounds b;
  lpx_bounds_of(m, &m->funcs[fn], &b);
  memcpy(out, b.reqntid, sizeof b.reqntid);
  memcpy(out + 3, b.maxntid, sizeof b.maxntid);
  out[6] = b.minnctapersm;
  out[7] = (uint32_t)m->sm;
  return 0;
}

/* The number of threads (or CTAs) of dims d. */
static uint64_t volume(const uint32_t d[3]) { return (uint64_t)d[0] * d[1] * d[2]; }

/* Apply b to launch c of kernel name: refuse what the driver refuses, and
 * give a launch without a cluster the .reqnctapercluster shape (as the
 * driver does). 0, or -1 with the error set naming the directive. */
int lpx_bounds_apply(lpx_ctx *ctx, const lpx_bounds *b, const char *name, lpx_launch_cfg *c)
{
  const uint32_t *t = c->block, *r = b->reqntid, *x = b->maxntid, *q = b->reqcluster;
  if (r[0] && (t[0] != r[0] || t[1] != r[1] || t[2] != r[2]))
    return lpx_fail(ctx, "kernel %s launched with block (%u, %u, %u), but it declares .reqntid %u, %u, %u: a GPU refuses "
                    "any other block", name, t[0], t[1], t[2], r[0], r[1], r[2]);
  if (x[0] && volume(t) > volume(x))
    return lpx_fail(ctx, "kernel %s launched with block (%u, %u, %u) of %llu threads, but it declares .maxntid %u, %u, %u: "
                    "a GPU refuses more than %llu threads", name, t[0], t[1], t[2], (unsigned long long)volume(t),
                    x[0], x[1], x[2], (unsigned long long)volume(x));
  int unclustered = volume(c->cluster) == 1;
  if (q[0] && unclustered) memcpy(c->cluster, q, sizeof c->cluster);
  else if (q[0] && memcmp(c->cluster, q, sizeof c->cluster))
    return lpx_fail(ctx, "kernel %s launched with cluster (%u, %u, %u), but it declares .reqnctapercluster %u, %u, %u: a GPU "
                    "refuses any other cluster (launch it with that cluster, or none to get it)", name, c->cluster[0],
                    c->cluster[1], c->cluster[2], q[0], q[1], q[2]);
  if (b->explicitcluster && unclustered && !q[0])
    return lpx_fail(ctx, "kernel %s launched without a cluster, but it declares .explicitcluster: a GPU refuses the launch "
                    "(give it a cluster shape)", name);
  if (b->maxclusterrank && volume(c->cluster) > b->maxclusterrank)
    return lpx_fail(ctx, "kernel %s launched with cluster (%u, %u, %u) of %llu CTAs, but it declares .maxclusterrank %u: a GPU "
                    "refuses more than %u CTAs per cluster", name, c->cluster[0], c->cluster[1], c->cluster[2],
                    (unsigned long long)volume(c->cluster), b->maxclusterrank, b->maxclusterrank);
  return 0;
}
