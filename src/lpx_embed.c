/* The embedding API of luaptx.h: a luaptx_state owns a LuaJIT state with
 * luaptx installed, and each call runs a function of lua/pyptx/runtime/embed.lua
 * under pcall, keeping its error message on the state. */
#include "luaptx.h"
#include "lpx_bind.h"
#include "lpx_embed.h"
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PLAN_TENSORS = LPX_PLAN_TENSORS, PLAN_NAME = LPX_PLAN_NAME, PLAN_DIMS = LPX_BIND_DIMS, PLANS_PER_KERNEL = 8,
       PLAN_SCALARS = LPX_PLAN_SCALARS };
_Static_assert((int)LPX_PLAN_SCALARS == (int)LPX_BIND_SCALARS, "a plan holds every runtime scalar lpx_bind knows");

/* What a plan was made for, per tensor: device, dtype and shape (layouts
 * are checked by lpx_bind_check before a plan is looked up). */
typedef struct plan_key {
  int32_t device_type, device_id, ndim;
  DLDataType dtype;
  int64_t shape[PLAN_DIMS];
} plan_key;

/* A prepared launch: a later launch of the same shapes runs in C alone. */
typedef struct plan {
  lpx_embed_plan p;
  plan_key key[PLAN_TENSORS];
  uint8_t *params;         /* the packed parameters, addresses and scalars patched per launch */
  uint8_t scalar_default[PLAN_SCALARS][8];   /* each runtime scalar's packed template value (or placeholder) */
} plan;

/* A launch's runtime scalars, encoded: bytes per scalar, and which were given. */
typedef struct scalar_args {
  uint8_t bytes[PLAN_SCALARS][8];
  int32_t given[PLAN_SCALARS];
} scalar_args;

struct luaptx_kernel {
  luaptx_state *S;
  int ref;                 /* registry reference to the Lua kernel entry */
  char *ptx, *cubin, *specs, *check, *tune;
  size_t ptx_len, cubin_len;
  char name[PLAN_NAME];    /* for the plans' error messages */
  lpx_bind_kernel bind;    /* its boundary, for lpx_bind_check */
  char *unbindable;        /* why its boundary is beyond lpx_bind (launches refused), or NULL */
  int64_t given[LPX_BIND_SYMS];   /* symbols given as template values (-1: none) */
  int32_t scalar_given[LPX_BIND_SCALARS];   /* runtime scalars with a template value (1) */
  plan *plans[PLANS_PER_KERNEL];
  int nplans, next_plan;   /* plans kept; the slot a new one replaces when full */
};

struct luaptx_state {
  lua_State *L;
  int embed;               /* registry reference to the pyptx.runtime.embed module */
  int ctx;                 /* registry reference to its context table */
  int32_t device_type;     /* the launches' DLPack device type, once known (0: not yet) */
  char error[4096];
  char device[256];
  char *names;             /* luaptx_kernel_names's text */
  luaptx_kernel **kernels;
  size_t nkernels, kernels_cap;
};

/* ------------------------------------------------------------- plumbing */

/* Record an error message on the state; returns -1. */
static int set_error(luaptx_state *S, const char *msg)
{
  snprintf(S->error, sizeof S->error, "%s", msg ? msg : "unknown error");
  return -1;
}

/* Push embed[name] and the context table; returns the stack base. */
static void push_call(luaptx_state *S, const char *name)
{
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, S->embed);
  lua_getfield(S->L, -1, name);
  lua_remove(S->L, -2);
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, S->ctx);
}

/* pcall with nargs (after function and context) and nres results. */
static int call(luaptx_state *S, int nargs, int nres)
{
  S->error[0] = '\0';
  if (lua_pcall(S->L, nargs + 1, nres, 0) == 0) return 0;
  set_error(S, lua_tostring(S->L, -1));
  lua_pop(S->L, 1);
  return -1;
}

/* --------------------------------------------------------------- states */

/* Build the Lua state, load pyptx.runtime.embed and open its context. */
static int setup(luaptx_state *S, const luaptx_options *o)
{
  luaL_openlibs(S->L);
  if (luaptx_install(S->L)) return set_error(S, lua_tostring(S->L, -1));
  lua_getglobal(S->L, "require");
  lua_pushstring(S->L, "pyptx.runtime.embed");
  if (lua_pcall(S->L, 1, 1, 0)) return set_error(S, lua_tostring(S->L, -1));
  S->embed = luaL_ref(S->L, LUA_REGISTRYINDEX);
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, S->embed);
  lua_getfield(S->L, -1, "open");
  lua_remove(S->L, -2);
  lua_pushstring(S->L, o && o->device ? o->device : "auto");
  lua_pushstring(S->L, o && o->cache_dir ? o->cache_dir : "");
  lua_pushstring(S->L, o && o->lua_path ? o->lua_path : "");
  lua_pushboolean(S->L, o && o->quiet);
  if (lua_pcall(S->L, 4, 1, 0)) return set_error(S, lua_tostring(S->L, -1));
  S->ctx = luaL_ref(S->L, LUA_REGISTRYINDEX);
  return 0;
}

/* Open a state; an error during set-up is kept for luaptx_error. */
luaptx_state *luaptx_open(const luaptx_options *opts)
{
  luaptx_state *S = calloc(1, sizeof *S);
  if (!S) return NULL;
  S->L = luaL_newstate();
  if (!S->L) { free(S); return NULL; }
  S->embed = S->ctx = LUA_NOREF;
  setup(S, opts);
  return S;
}

/* Close a state, its kernels and its Lua state. */
void luaptx_close(luaptx_state *S)
{
  if (!S) return;
  for (size_t i = 0; i < S->nkernels; i++) {
    for (int j = 0; j < S->kernels[i]->nplans; j++) {
      free(S->kernels[i]->plans[j]->params);
      free(S->kernels[i]->plans[j]);
    }
    free(S->kernels[i]->ptx);
    free(S->kernels[i]->cubin);
    free(S->kernels[i]->specs);
    free(S->kernels[i]->check);
    free(S->kernels[i]->tune);
    free(S->kernels[i]->unbindable);
    free(S->kernels[i]);
  }
  free(S->kernels);
  free(S->names);
  lua_close(S->L);
  free(S);
}

/* The last error ("" when none). */
const char *luaptx_error(const luaptx_state *S) { return S ? S->error : "no state"; }

/* Is the state usable? (given, and its set-up did not fail). */
static int ready(luaptx_state *S)
{
  return S && S->ctx != LUA_NOREF ? 0 : -1;
}

/* Refuse a NULL argument of a call: -1 with the message on the state. */
static int null_arg(luaptx_state *S, const char *call, const char *arg)
{
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s is NULL", call, arg);
  return set_error(S, msg);
}

/* The device description. */
const char *luaptx_device(luaptx_state *S)
{
  if (ready(S)) return "";
  push_call(S, "device_name");
  if (call(S, 0, 1)) return "";
  snprintf(S->device, sizeof S->device, "%s", lua_tostring(S->L, -1));
  lua_pop(S->L, 1);
  return S->device;
}

/* -------------------------------------------------------------- scripts */

/* Load a kernel script file. */
int luaptx_load_file(luaptx_state *S, const char *path)
{
  if (ready(S)) return -1;
  if (!path) return null_arg(S, "luaptx_load_file", "path");
  push_call(S, "load_file");
  lua_pushstring(S->L, path);
  return call(S, 1, 0);
}

/* Load a kernel script from a string. */
int luaptx_load_string(luaptx_state *S, const char *chunk, const char *chunkname)
{
  if (ready(S)) return -1;
  if (!chunk) return null_arg(S, "luaptx_load_string", "chunk");
  push_call(S, "load_string");
  lua_pushstring(S->L, chunk);
  lua_pushstring(S->L, chunkname ? chunkname : "=(string)");
  return call(S, 2, 0);
}

/* -------------------------------------------------------------- kernels */

/* The loaded kernels' names, comma-separated (kept on the state). */
const char *luaptx_kernel_names(luaptx_state *S)
{
  if (ready(S)) return NULL;
  push_call(S, "kernel_names");
  if (call(S, 0, 1)) return NULL;
  size_t n;
  const char *s = lua_tolstring(S->L, -1, &n);
  free(S->names);
  S->names = malloc(n + 1);
  if (S->names) memcpy(S->names, s, n + 1);
  lua_pop(S->L, 1);
  if (!S->names) set_error(S, "out of memory");
  return S->names;
}

/* Find and specialize a kernel; the handle is owned by the state. */
luaptx_kernel *luaptx_kernel_get(luaptx_state *S, const char *name, const char *params)
{
  if (ready(S)) return NULL;
  if (!name) { null_arg(S, "luaptx_kernel_get", "name"); return NULL; }
  push_call(S, "kernel_get");
  lua_pushstring(S->L, name ? name : "");
  lua_pushstring(S->L, params ? params : "");
  if (call(S, 2, 1)) return NULL;
  luaptx_kernel *K = calloc(1, sizeof *K);
  void *grown = K ? realloc(S->kernels, (S->nkernels + 1) * sizeof *S->kernels) : NULL;
  if (!grown) { free(K); lua_pop(S->L, 1); set_error(S, "out of memory"); return NULL; }
  S->kernels = grown;
  S->kernels[S->nkernels++] = K;
  K->S = S;
  K->ref = luaL_ref(S->L, LUA_REGISTRYINDEX);
  snprintf(K->name, sizeof K->name, "%s", name);
  push_call(S, "kernel_bind");     /* its boundary, for the checks of every launch */
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  lua_pushlightuserdata(S->L, &K->bind);
  lua_pushlightuserdata(S->L, K->given);
  lua_pushlightuserdata(S->L, K->scalar_given);
  if (call(S, 4, 0)) {   /* its PTX and cubin are still there; launches say why not */
    K->unbindable = strdup(S->error);
    S->error[0] = '\0';
    if (!K->unbindable) { set_error(S, "out of memory"); return NULL; }
  }
  return K;
}

/* Call embed[name](ctx, kernel) returning a string; copy it into *out. */
static const char *kernel_string(luaptx_kernel *K, const char *name, char **out, size_t *len)
{
  if (!K || ready(K->S)) return NULL;
  luaptx_state *S = K->S;
  push_call(S, name);
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  if (call(S, 1, 1)) return NULL;
  size_t n;
  const char *s = lua_tolstring(S->L, -1, &n);
  free(*out);
  *out = malloc(n + 1);
  if (*out) { memcpy(*out, s, n); (*out)[n] = '\0'; }
  lua_pop(S->L, 1);
  if (!*out) { set_error(S, "out of memory"); return NULL; }
  if (len) *len = n;
  return *out;
}

/* PTX of the specialization. */
const char *luaptx_kernel_ptx(luaptx_kernel *K, size_t *len)
{
  return K ? kernel_string(K, "kernel_ptx", &K->ptx, len) : NULL;   /* &K->x of NULL is undefined */
}

/* Cubin of the specialization. */
const void *luaptx_kernel_cubin(luaptx_kernel *K, size_t *len)
{
  return K ? kernel_string(K, "kernel_cubin", &K->cubin, len) : NULL;   /* &K->x of NULL is undefined */
}

/* The kernel's tensor boundary as text. */
const char *luaptx_kernel_specs(luaptx_kernel *K, size_t *len)
{
  return K ? kernel_string(K, "kernel_specs", &K->specs, len) : NULL;   /* &K->x of NULL is undefined */
}

/* ptxas's resource report of the specialization. */
const char *luaptx_kernel_check(luaptx_kernel *K, size_t *len)
{
  return K ? kernel_string(K, "kernel_check", &K->check, len) : NULL;   /* &K->x of NULL is undefined */
}

/* Autotune the kernel over a request (JSON, see luaptx.h); the result's
 * JSON is kept on the kernel. */
const char *luaptx_kernel_tune(luaptx_kernel *K, const char *request, size_t *len)
{
  if (!K || ready(K->S)) return NULL;
  if (!request) { null_arg(K->S, "luaptx_kernel_tune", "request"); return NULL; }
  luaptx_state *S = K->S;
  push_call(S, "kernel_target");           /* the kernel, its values, the device */
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  if (call(S, 1, 3)) return NULL;
  lua_getglobal(S->L, "require");
  lua_pushstring(S->L, "pyptx.tools.tune");
  if (lua_pcall(S->L, 1, 1, 0)) { set_error(S, lua_tostring(S->L, -1)); lua_pop(S->L, 4); return NULL; }
  lua_getfield(S->L, -1, "run_request");
  lua_remove(S->L, -2);
  lua_insert(S->L, -4);                    /* run_request, kernel, values, device */
  lua_pushstring(S->L, request);
  if (lua_pcall(S->L, 4, 1, 0)) { set_error(S, lua_tostring(S->L, -1)); lua_pop(S->L, 1); return NULL; }
  size_t n;
  const char *s = lua_tolstring(S->L, -1, &n);
  free(K->tune);
  K->tune = malloc(n + 1);
  if (K->tune) { memcpy(K->tune, s, n); K->tune[n] = '\0'; }
  lua_pop(S->L, 1);
  if (!K->tune) { set_error(S, "out of memory"); return NULL; }
  if (len) *len = n;
  return K->tune;
}

/* Shared Lua launch path: embed[name](ctx, kernel, array, n, stream). */
static int launch(luaptx_kernel *K, const char *name, const void *array, int n, void *stream)
{
  if (!K || ready(K->S)) return -1;
  luaptx_state *S = K->S;
  if (n < 0 || (n > 0 && !array)) return set_error(S, "launch: no tensors given");
  push_call(S, name);
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  lua_pushlightuserdata(S->L, (void *)array);
  lua_pushinteger(S->L, n);
  lua_pushlightuserdata(S->L, stream);
  return call(S, 4, 0);
}

/* ---------------------------------------------------------------- plans */

/* Does tensor t (checked by lpx_bind_check) fit the plan key k? */
static int key_fits(const plan_key *k, const DLTensor *t)
{
  if (k->device_type != (int32_t)t->device.device_type || k->device_id != t->device.device_id || k->ndim != t->ndim
      || k->dtype.code != t->dtype.code || k->dtype.bits != t->dtype.bits || k->dtype.lanes != t->dtype.lanes)
    return 0;
  for (int d = 0; d < t->ndim; d++) if (k->shape[d] != t->shape[d]) return 0;
  return 1;
}

/* The kernel's plan for these tensors, or NULL. */
static plan *plan_find(luaptx_kernel *K, DLTensor *const *ts, int n)
{
  for (int j = 0; j < K->nplans; j++) {
    plan *P = K->plans[j];
    int fits = P->p.ntensors == n;
    for (int i = 0; fits && i < n; i++) fits = key_fits(&P->key[i], ts[i]);
    if (fits) return P;
  }
  return NULL;
}

/* Record the tensors' key in P (their ranks checked by lpx_bind_check). */
static void plan_keys(plan *P, DLTensor *const *ts, int n)
{
  for (int i = 0; i < n; i++) {
    plan_key *k = &P->key[i];
    k->device_type = (int32_t)ts[i]->device.device_type;
    k->device_id = ts[i]->device.device_id;
    k->ndim = ts[i]->ndim;
    k->dtype = ts[i]->dtype;
    for (int d = 0; d < k->ndim; d++) k->shape[d] = ts[i]->shape[d];
  }
}

/* Keep P on the kernel, replacing the oldest plan when all slots are taken. */
static void plan_keep(luaptx_kernel *K, plan *P)
{
  if (K->nplans < PLANS_PER_KERNEL) { K->plans[K->nplans++] = P; return; }
  plan *old = K->plans[K->next_plan];
  free(old->params);
  free(old);
  K->plans[K->next_plan] = P;
  K->next_plan = (K->next_plan + 1) % PLANS_PER_KERNEL;
}

/* Make a plan for these tensors (checked, their dims bound in values)
 * through embed.plan_dlpack; NULL with the error on the state. The
 * kernel keeps it. */
static plan *plan_make(luaptx_kernel *K, DLTensor *const *ts, int n, const int64_t *values)
{
  luaptx_state *S = K->S;
  plan *P = calloc(1, sizeof *P);
  if (!P) { set_error(S, "out of memory"); return NULL; }
  push_call(S, "plan_dlpack");
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  lua_pushlightuserdata(S->L, (void *)values);
  lua_pushinteger(S->L, n);
  lua_pushlightuserdata(S->L, &P->p);
  lua_pushinteger(S->L, (lua_Integer)sizeof P->p);
  if (call(S, 5, 1)) { free(P); return NULL; }
  P->params = malloc(P->p.params_size ? P->p.params_size : 1);    /* the buffer is on the stack until popped */
  if (P->params) memcpy(P->params, P->p.params, P->p.params_size);
  P->p.params = NULL;
  lua_pop(S->L, 1);
  if (!P->params) { free(P); set_error(S, "out of memory"); return NULL; }
  for (int j = 0; j < P->p.nscalars && j < PLAN_SCALARS; j++)
    memcpy(P->scalar_default[j], P->params + P->p.scalar_offset[j], K->bind.scalar[j].bits / 8);
  plan_keys(P, ts, n);
  plan_keep(K, P);
  return P;
}

/* Fail a plan's launch with the device's message, as Lua words it. */
static int plan_fail(luaptx_kernel *K, const plan *P, const char *what)
{
  char msg[sizeof K->S->error];
  snprintf(msg, sizeof msg, what, K->name, lpx_ctx_error(P->p.ctx));
  return set_error(K->S, msg);
}

/* Bytes of a checked tensor's elements. */
static uint64_t tensor_bytes(const DLTensor *t)
{
  lpx_bind_tensor b = { .ndim = t->ndim, .bits = t->dtype.bits, .lanes = t->dtype.lanes, .shape = t->shape };
  return lpx_bind_bytes(&b);
}

/* A checked tensor's first byte on the host (NULL when it is empty). */
static uint8_t *host_of(const DLTensor *t, uint64_t bytes)
{
  return bytes ? (uint8_t *)t->data + t->byte_offset : NULL;
}

/* Stage CPU tensors into fresh device memory (the emulator): addrs[i]. */
static int plan_stage(luaptx_kernel *K, const plan *P, DLTensor *const *ts, int n, uint64_t *addrs)
{
  for (int i = 0; i < n; i++) {
    uint64_t bytes = tensor_bytes(ts[i]);
    const uint8_t *host = host_of(ts[i], bytes);
    if (lpx_device_alloc(P->p.device, bytes ? bytes : 1, &addrs[i]) < 0) {     /* an empty input: a placeholder byte */
      for (int j = 0; j < i; j++) lpx_device_free(P->p.device, addrs[j]);
      return plan_fail(K, P, "kernel \"%s\": device alloc: %s");
    }
    if (bytes && lpx_device_upload(P->p.device, addrs[i], host, bytes) < 0) {
      for (int j = 0; j <= i; j++) lpx_device_free(P->p.device, addrs[j]);
      return plan_fail(K, P, "kernel \"%s\": upload: %s");
    }
  }
  return 0;
}

/* Copy staged tensors back to the host and free them (rc: the launch's). */
static int plan_unstage(luaptx_kernel *K, const plan *P, DLTensor *const *ts, int n, const uint64_t *addrs, int rc)
{
  for (int i = 0; i < n; i++) {
    uint64_t bytes = tensor_bytes(ts[i]);
    uint8_t *host = host_of(ts[i], bytes);
    if (rc == 0 && bytes && lpx_device_download(P->p.device, host, addrs[i], bytes) < 0)
      rc = plan_fail(K, P, "kernel \"%s\": download: %s");
    lpx_device_free(P->p.device, addrs[i]);
  }
  return rc;
}

/* Patch the addresses and the runtime scalars (given ones, else the
 * template values) into the packed parameters (TMA maps re-pointed). */
static int plan_patch(luaptx_kernel *K, plan *P, const uint64_t *addrs, const scalar_args *sa)
{
  for (int i = 0; i < P->p.ntensors; i++) memcpy(P->params + P->p.tensor_offset[i], &addrs[i], 8);
  for (int j = 0; j < P->p.nscalars && j < PLAN_SCALARS; j++)
    memcpy(P->params + P->p.scalar_offset[j], sa->given[j] ? sa->bytes[j] : P->scalar_default[j], K->bind.scalar[j].bits / 8);
  for (int j = 0; j < P->p.nmaps; j++)
    if (lpx_device_tma_replace_address(P->p.device, P->p.map_name[j], P->params + P->p.map_offset[j],
                                       addrs[P->p.map_tensor[j]]) < 0)
      return plan_fail(K, P, "kernel \"%s\": %s");
  return 0;
}

/* Launch the plan's function with its patched parameters; a CUDA launch
 * goes on stream and is not waited for, the emulator's is synchronised. */
static int plan_launch(luaptx_kernel *K, const plan *P, void *stream)
{
  lpx_launch_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  memcpy(cfg.grid, P->p.grid, sizeof cfg.grid);
  memcpy(cfg.block, P->p.block, sizeof cfg.block);
  memcpy(cfg.cluster, P->p.cluster, sizeof cfg.cluster);
  cfg.dynamic_smem = P->p.dynamic_smem;
  cfg.params = P->params;
  cfg.params_size = P->p.params_size;
  if (!P->p.staged && lpx_device_set_option(P->p.device, "stream", (int64_t)(intptr_t)stream) < 0)
    return plan_fail(K, P, "kernel \"%s\": stream: %s");
  if (lpx_device_launch(P->p.device, P->p.fn, &cfg) < 0) return plan_fail(K, P, "launching kernel \"%s\": %s");
  if (P->p.staged && lpx_device_sync(P->p.device) < 0) return plan_fail(K, P, "kernel \"%s\": sync: %s");
  return 0;
}

/* Run a plan on tensors that fit it: no Lua. */
static int plan_run(luaptx_kernel *K, plan *P, DLTensor *const *ts, int n, const scalar_args *sa, void *stream)
{
  uint64_t addrs[PLAN_TENSORS];
  if (P->p.staged) {
    if (plan_stage(K, P, ts, n, addrs)) return -1;
  } else {
    for (int i = 0; i < n; i++) addrs[i] = (uint64_t)(uintptr_t)ts[i]->data + ts[i]->byte_offset;
  }
  int rc = plan_patch(K, P, addrs, sa);
  if (rc == 0) rc = plan_launch(K, P, stream);
  return P->p.staged ? plan_unstage(K, P, ts, n, addrs, rc) : rc;
}

/* The launches' DLPack device type: the state's device, opened now. */
static int32_t state_device_type(luaptx_state *S)
{
  if (S->device_type) return S->device_type;
  push_call(S, "device_kind");
  if (call(S, 0, 1)) return 0;
  S->device_type = strcmp(lua_tostring(S->L, -1), "cuda") == 0 ? LPX_BIND_CUDA : LPX_BIND_CPU;
  lua_pop(S->L, 1);
  return S->device_type;
}

/* Read DLTensor i (NULL refused) into what lpx_bind_check reads. */
static int bind_view(luaptx_kernel *K, DLTensor *const *ts, int i, uint64_t flags, lpx_bind_tensor *b)
{
  const DLTensor *t = ts[i];
  if (!t) {
    char msg[160];
    snprintf(msg, sizeof msg, "kernel \"%s\": %s %d is a NULL pointer", K->name, i < K->bind.nin ? "input" : "output",
             i < K->bind.nin ? i + 1 : i - K->bind.nin + 1);
    return set_error(K->S, msg);
  }
  *b = (lpx_bind_tensor){ .data = t->data, .device_type = (int32_t)t->device.device_type, .device_id = t->device.device_id,
                          .ndim = t->ndim, .code = t->dtype.code, .bits = t->dtype.bits, .lanes = t->dtype.lanes,
                          .shape = t->shape, .strides = t->strides, .byte_offset = t->byte_offset, .flags = flags };
  return 0;
}

/* Check the tensors with lpx_bind_check, binding the kernel's dims into
 * r: all of them, or (inputs_only) the inputs alone; flags: each tensor's
 * DLPack flags (NULL: none), LPX_BIND_SHAPE_ONLY honoured only when
 * shape_ok (luaptx_kernel_bind: a launch never takes a tensor without
 * memory). -1 (-2: a dtype) with the error on the state. */
static int check_tensors(luaptx_kernel *K, DLTensor *const *ts, int n, const uint64_t *flags, lpx_bind_result *r, int inputs_only,
                         int shape_ok)
{
  uint64_t keep = shape_ok ? ~0ull : ~LPX_BIND_SHAPE_ONLY;
  lpx_bind_tensor bs[PLAN_TENSORS];
  if (K->unbindable) return set_error(K->S, K->unbindable);
  if (lpx_bind_count(&K->bind, n, !inputs_only, r)) return set_error(K->S, r->message);
  if (n > 0 && !ts) return null_arg(K->S, "launch", "the tensor array");
  for (int i = 0; i < n; i++) if (bind_view(K, ts, i, flags ? flags[i] & keep : 0, &bs[i])) return -1;
  int32_t device_type = state_device_type(K->S);
  if (!device_type) return -1;
  lpx_bind_reset(&K->bind, r);
  memcpy(r->value, K->given, sizeof K->given);
  if (lpx_bind_check(&K->bind, bs, n, device_type, r)) return set_error(K->S, r->message) - (r->kind == LPX_BIND_ETYPE);
  return 0;
}

/* Check and encode the runtime scalars (lpx_bind_scalar): none given, or
 * one per runtime scalar (kind LUAPTX_SCALAR_NONE: its template value);
 * one without a value is refused. -1 (-2: a type) with the error. */
static int check_scalars(luaptx_kernel *K, const luaptx_scalar *scalars, int nscalars, scalar_args *sa)
{
  lpx_bind_result r;
  char msg[sizeof r.message + 160];
  if (nscalars != 0 && nscalars != K->bind.nscalars) {
    snprintf(msg, sizeof msg, "kernel \"%s\" takes %d runtime scalar(s) (its raw_params), got %d", K->name, (int)K->bind.nscalars, nscalars);
    return set_error(K->S, msg);
  }
  if (nscalars > 0 && !scalars) return null_arg(K->S, "launch", "the scalar array");
  for (int j = 0; j < K->bind.nscalars && j < PLAN_SCALARS; j++) {
    const luaptx_scalar *v = nscalars ? &scalars[j] : NULL;
    sa->given[j] = v && v->kind != LUAPTX_SCALAR_NONE;
    if (!sa->given[j] && !K->scalar_given[j]) {
      snprintf(msg, sizeof msg, "kernel \"%s\": scalar %s (raw_params[%d]) has no value; pass it per launch "
               "(luaptx_launch_dlpack_scalars) or as a template value (\"%s=...\")", K->name, K->bind.scalar[j].name,
               (int)K->bind.scalar[j].index, K->bind.scalar[j].name);
      return set_error(K->S, msg);
    }
    if (!sa->given[j]) continue;
    lpx_bind_value bv = { v->kind, v->i, v->f };
    if (lpx_bind_scalar(&K->bind, j, &bv, sa->bytes[j], &r)) return set_error(K->S, r.message) - (r.kind == LPX_BIND_ETYPE);
  }
  return 0;
}

/* Launch through the kernel's plan for these shapes, made on first use;
 * a launch whose outputs are all empty checks and returns at once. */
static int launch_planned(luaptx_kernel *K, DLTensor *const *ts, int n, const uint64_t *flags, const luaptx_scalar *scalars,
                          int nscalars, void *stream)
{
  if (!K || ready(K->S)) return -1;
  K->S->error[0] = '\0';
  lpx_bind_result r;
  scalar_args sa;
  if (check_tensors(K, ts, n, flags, &r, 0, 0)) return -1;
  int rc = K->unbindable ? 0 : check_scalars(K, scalars, nscalars, &sa);
  if (rc) return rc;
  if (lpx_bind_empty(&K->bind, &r)) return 0;
  plan *P = plan_find(K, ts, n);
  if (!P && !(P = plan_make(K, ts, n, r.value))) return -1;
  return plan_run(K, P, ts, n, &sa, stream);
}

/* Check tensors as a launch does and bind the kernel's dims, without
 * launching; out_shapes receives the outputs' shapes. */
int luaptx_kernel_bind(luaptx_kernel *K, DLTensor *const *tensors, const uint64_t *flags, int n, int64_t *out_shapes)
{
  if (!K || ready(K->S)) return -1;
  K->S->error[0] = '\0';
  lpx_bind_result r;
  int rc = check_tensors(K, tensors, n, flags, &r, n == K->bind.nin, 1);
  if (rc) return rc;
  for (int j = 0; out_shapes && j < K->bind.nout; j++) {
    int64_t *shape = out_shapes + (size_t)j * LUAPTX_MAX_DIMS;
    for (int d = 0; d < LUAPTX_MAX_DIMS; d++) shape[d] = -1;
    if (lpx_bind_out_shape(&K->bind, &r, j, shape)) return set_error(K->S, r.message);
  }
  return 0;
}

/* Launch with DLTensors. */
int luaptx_launch_dlpack(luaptx_kernel *K, DLTensor *const *tensors, int n, void *stream)
{
  return launch_planned(K, tensors, n, NULL, NULL, 0, stream);
}

/* Check runtime scalars as a launch does, without launching. */
int luaptx_kernel_scalars(luaptx_kernel *K, const luaptx_scalar *scalars, int nscalars)
{
  if (!K || ready(K->S)) return -1;
  K->S->error[0] = '\0';
  if (K->unbindable) return set_error(K->S, K->unbindable);
  scalar_args sa;
  return check_scalars(K, scalars, nscalars, &sa);
}

/* Launch with DLTensors and the kernel's runtime scalars. */
int luaptx_launch_dlpack_scalars(luaptx_kernel *K, DLTensor *const *tensors, int n, const luaptx_scalar *scalars, int nscalars, void *stream)
{
  return launch_planned(K, tensors, n, NULL, scalars, nscalars, stream);
}

/* Launch with DLPack 1.0 managed tensors (version 1.x and their flags
 * checked here: a read-only or copied output is refused). */
int luaptx_launch_dlpack_versioned(luaptx_kernel *K, DLManagedTensorVersioned *const *tensors, int n, void *stream)
{
  DLTensor *ts[PLAN_TENSORS];
  uint64_t flags[PLAN_TENSORS];
  if (!K || ready(K->S)) return -1;
  if (n > 0 && !tensors) return null_arg(K->S, "luaptx_launch_dlpack_versioned", "tensors");
  lpx_bind_result r;
  if (n < 0 || n > PLAN_TENSORS) return check_tensors(K, NULL, n, NULL, &r, 0, 0) ? -1 : -1;   /* the count's message */
  for (int i = 0; i < n; i++) {
    if (!tensors[i]) { ts[i] = NULL; flags[i] = 0; continue; }
    if (tensors[i]->version.major != 1) {
      char msg[128];
      snprintf(msg, sizeof msg, "tensor %d is DLPack version %u.%u; luaptx reads DLPack 1.x", i + 1,
               (unsigned)tensors[i]->version.major, (unsigned)tensors[i]->version.minor);
      return set_error(K->S, msg);
    }
    ts[i] = &tensors[i]->dl_tensor;
    flags[i] = tensors[i]->flags;
  }
  return launch_planned(K, ts, n, flags, NULL, 0, stream);
}

/* Launch with raw device addresses. */
int luaptx_launch_ptrs(luaptx_kernel *K, const uint64_t *ptrs, int n, void *stream)
{
  return launch(K, "launch_ptrs", ptrs, n, stream);
}
