/* The embedding API of luaptx.h: a luaptx_state owns a LuaJIT state with
 * luaptx installed, and each call runs a function of lua/pyptx/runtime/embed.lua
 * under pcall, keeping its error message on the state. */
#include "luaptx.h"
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct luaptx_kernel {
  luaptx_state *S;
  int ref;                 /* registry reference to the Lua kernel entry */
  char *ptx, *cubin, *specs, *check;
  size_t ptx_len, cubin_len;
};

struct luaptx_state {
  lua_State *L;
  int embed;               /* registry reference to the pyptx.runtime.embed module */
  int ctx;                 /* registry reference to its context table */
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
    free(S->kernels[i]->ptx);
    free(S->kernels[i]->cubin);
    free(S->kernels[i]->specs);
    free(S->kernels[i]->check);
    free(S->kernels[i]);
  }
  free(S->kernels);
  free(S->names);
  lua_close(S->L);
  free(S);
}

/* The last error ("" when none). */
const char *luaptx_error(const luaptx_state *S) { return S ? S->error : "no state"; }

/* Is the state usable? (set-up may have failed). */
static int ready(luaptx_state *S)
{
  return S->ctx != LUA_NOREF ? 0 : -1;
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
  push_call(S, "load_file");
  lua_pushstring(S->L, path);
  return call(S, 1, 0);
}

/* Load a kernel script from a string. */
int luaptx_load_string(luaptx_state *S, const char *chunk, const char *chunkname)
{
  if (ready(S)) return -1;
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
  return K;
}

/* Call embed[name](ctx, kernel) returning a string; copy it into *out. */
static const char *kernel_string(luaptx_kernel *K, const char *name, char **out, size_t *len)
{
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
  return kernel_string(K, "kernel_ptx", &K->ptx, len);
}

/* Cubin of the specialization. */
const void *luaptx_kernel_cubin(luaptx_kernel *K, size_t *len)
{
  return kernel_string(K, "kernel_cubin", &K->cubin, len);
}

/* The kernel's tensor boundary as text. */
const char *luaptx_kernel_specs(luaptx_kernel *K, size_t *len)
{
  return kernel_string(K, "kernel_specs", &K->specs, len);
}

/* ptxas's resource report of the specialization. */
const char *luaptx_kernel_check(luaptx_kernel *K, size_t *len)
{
  return kernel_string(K, "kernel_check", &K->check, len);
}

/* Shared launch path: embed[name](ctx, kernel, array, n, stream). */
static int launch(luaptx_kernel *K, const char *name, const void *array, int n, void *stream)
{
  luaptx_state *S = K->S;
  if (n < 0 || (n > 0 && !array)) return set_error(S, "launch: no tensors given");
  push_call(S, name);
  lua_rawgeti(S->L, LUA_REGISTRYINDEX, K->ref);
  lua_pushlightuserdata(S->L, (void *)array);
  lua_pushinteger(S->L, n);
  lua_pushlightuserdata(S->L, stream);
  return call(S, 4, 0);
}

/* Launch with DLTensors. */
int luaptx_launch_dlpack(luaptx_kernel *K, DLTensor *const *tensors, int n, void *stream)
{
  return launch(K, "launch_dlpack", tensors, n, stream);
}

/* Launch with DLPack 1.0 managed tensors. */
int luaptx_launch_dlpack_versioned(luaptx_kernel *K, DLManagedTensorVersioned *const *tensors, int n, void *stream)
{
  return launch(K, "launch_dlpack_versioned", tensors, n, stream);
}

/* Launch with raw device addresses. */
int luaptx_launch_ptrs(luaptx_kernel *K, const uint64_t *ptrs, int n, void *stream)
{
  return launch(K, "launch_ptrs", ptrs, n, stream);
}
