/* The Lua binding: the module searcher for bundled (or on-disk) Lua code,
 * and the table of core entry points LuaJIT's FFI calls through (generated
 * from the cdef headers by cmake/bundle.lua). This is the only
 * core-adjacent file that sees lua.h. */
#define _GNU_SOURCE
#include "luaptx.h"
#include "lpx_bundle.h"
#include "lpx_core.h"
#include "lpx_env.h"
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LPX_JIT_MAXTRACE 4000   /* LuaJIT's default: 1000 */
#define LPX_JIT_MAXMCODE 4096   /* KB; LuaJIT's default: 512 */
#define LPX_STR_(x) #x
#define LPX_STR(x) LPX_STR_(x)

/* ------------------------------------------------------------ own chunks
 * Which chunks are luaptx's own is decided by how they were loaded, never
 * by their path text: every chunk the searcher below loads (a bundled
 * module, or its file in development mode) is recorded here, with whether
 * it is a pyptx module or the command line's, and so is each helper
 * library pyptx.helper() marks. A user's file under .../pyptx/ is not ours. */

enum { OWN_NONE, OWN_MODULE, OWN_CLI, OWN_HELPER };
#define OWN_SLOTS 1024                    /* open addressing, at most 3/4 full */

/* The table is the process's: states on other threads load modules too. */
static struct { char *name; int kind; } own[OWN_SLOTS];
static int nown;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a of a chunk name, the slot it starts probing at. */
static size_t own_hash(const char *s)
{
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h & (OWN_SLOTS - 1);
}

/* The slot holding name, or the empty slot where it would go. */
static size_t own_slot(const char *name)
{
  size_t i = own_hash(name);
  while (own[i].name && strcmp(own[i].name, name)) i = (i + 1) & (OWN_SLOTS - 1);
  return i;
}

/* Does a recorded name end with tail (a message's "...tail" shortened name)? */
static int own_suffix(const char *tail)
{
  size_t n = strlen(tail);
  for (size_t i = 0; i < OWN_SLOTS; i++) {
    size_t m = own[i].name ? strlen(own[i].name) : 0;
    if (m >= n && strcmp(own[i].name + m - n, tail) == 0) return own[i].kind;
  }
  return OWN_NONE;
}

/* What a chunk name is: OWN_MODULE, OWN_CLI, OWN_HELPER or OWN_NONE. A
 * name as Lua shortens it in messages ("@...tail") matches a recorded one
 * ending so. */
static int own_kind(const char *src)
{
  pthread_mutex_lock(&own_lock);
  size_t i = strncmp(src, "@...", 4) ? own_slot(src) : 0;
  int kind = strncmp(src, "@...", 4) == 0 ? own_suffix(src + 4) : own[i].name ? own[i].kind : OWN_NONE;
  pthread_mutex_unlock(&own_lock);
  return kind;
}

/* where()'s cache: per slot a chunk name's address with bit 0 set when it
 * is internal, one word so threads never see half an entry. */
static uintptr_t seen[64];

/* Record a chunk name as luaptx's own; -1 when the table is full or memory is out. */
static int own_add(const char *name, int kind)
{
  int rc = 0;
  pthread_mutex_lock(&own_lock);
  size_t i = own_slot(name);
  if (!own[i].name) {
    rc = nown >= OWN_SLOTS * 3 / 4 || !(own[i].name = strdup(name)) ? -1 : 0;
    if (!rc) { own[i].kind = kind; nown++; }
  }
  pthread_mutex_unlock(&own_lock);
  for (size_t s = 0; s < 64; s++) __atomic_store_n(&seen[s], 0, __ATOMIC_RELAXED);   /* one classified may be this */
  return rc;
}

/* Is a chunk a pyptx module or a helper library (where() skips it)? */
static int is_internal_source(const char *src)
{
  int kind = own_kind(src);
  return kind == OWN_MODULE || kind == OWN_HELPER;
}

/* Find a bundled module by name. */
static const lpx_bundle_entry *bundle_find(const char *name)
{
  for (const lpx_bundle_entry *e = lpx_bundle; e->name; e++)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

/* Write the formatted path into path; 1 when it fits and names a regular file. */
static int dev_file(char *path, size_t cap, const char *fmt, const char *dir, const char *rel)
{
  struct stat st;
  int n = snprintf(path, cap, fmt, dir, rel);
  return n > 0 && (size_t)n < cap && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The on-disk file of a module under $LUAPTX_LUA_DIR (development mode):
 * pyptx[.a.b] -> DIR/pyptx/a/b.lua, else DIR/pyptx/a/b/init.lua;
 * luaptx.cli -> DIR/../bin/luaptx.lua, luaptx.x -> DIR/../bin/x.lua.
 * Returns 0 when the name is not ours or has no file there. */
static int dev_path(const char *dir, const char *name, char *path, size_t cap)
{
  if (strchr(name, '/')) return 0;
  if (strcmp(name, "luaptx.cli") == 0) return dev_file(path, cap, "%s/../bin/%s.lua", dir, "luaptx");
  if (strncmp(name, "luaptx.", 7) == 0 && strcmp(name, "luaptx.core"))
    return dev_file(path, cap, "%s/../bin/%s.lua", dir, name + 7);
  if (strcmp(name, "pyptx") && strncmp(name, "pyptx.", 6)) return 0;
  char rel[512];
  if (snprintf(rel, sizeof rel, "%s", name) >= (int)sizeof rel) return 0;
  for (char *c = rel; *c; c++)
    if (*c == '.') *c = '/';
  return dev_file(path, cap, "%s/%s.lua", dir, rel) || dev_file(path, cap, "%s/%s/init.lua", dir, rel);
}

/* package.loaders entry: luaptx's modules from disk in development mode
 * ($LUAPTX_LUA_DIR), else from the bytecode bundled into the binary. */
static int searcher(lua_State *L)
{
  const char *name = luaL_checkstring(L, 1);
  const char *dir = getenv("LUAPTX_LUA_DIR");
  char path[4096];
  int kind = strncmp(name, "luaptx.", 7) == 0 ? OWN_CLI : OWN_MODULE;
  if (dir && *dir && dev_path(dir, name, path, sizeof path)) {
    char chunk[4100];
    snprintf(chunk, sizeof chunk, "@%s", path);
    if (own_add(chunk, kind)) return luaL_error(L, "luaptx: out of memory loading %s", name);
    if (luaL_loadfile(L, path)) return lua_error(L);
    return 1;
  }
  const lpx_bundle_entry *e = bundle_find(name);
  if (!e) {
    lua_pushfstring(L, "\n\tno module '%s' in luaptx's bundle", name);
    return 1;
  }
  char chunk[512];
  snprintf(chunk, sizeof chunk, "@%s", e->path);
  if (own_add(chunk, kind)) return luaL_error(L, "luaptx: out of memory loading %s", name);
  if (luaL_loadbuffer(L, (const char *)e->bc, e->size, chunk)) return lua_error(L);
  return 1;
}

/* is_internal_source, remembered per chunk name (the pointer, which the
 * Lua side already uses as the chunk's key): where() asks it for every
 * frame of every traced instruction. */
static int is_internal_cached(const char *src)
{
  if ((uintptr_t)src & 1) return is_internal_source(src);   /* Lua's names are aligned; bit 0 is the flag */
  size_t slot = ((uintptr_t)src >> 4) & 63;
  uintptr_t v = __atomic_load_n(&seen[slot], __ATOMIC_RELAXED);
  if ((v & ~(uintptr_t)1) == (uintptr_t)src) return (int)(v & 1);
  int internal = is_internal_source(src);
  __atomic_store_n(&seen[slot], (uintptr_t)src | (uintptr_t)internal, __ATOMIC_RELAXED);
  return internal;
}

/* own_source(chunk_name): "module" (a pyptx module), "cli" (the command
 * line's code), "helper" (a library pyptx.helper() marked) or nil. */
static int own_source(lua_State *L)
{
  static const char *const names[] = { NULL, "module", "cli", "helper" };
  int kind = own_kind(luaL_checkstring(L, 1));
  if (kind == OWN_NONE) return 0;
  lua_pushstring(L, names[kind]);
  return 1;
}

/* where_skip(chunk_name): where() skips this chunk from now on (a helper). */
static int where_skip(lua_State *L)
{
  if (own_add(luaL_checkstring(L, 1), OWN_HELPER)) return luaL_error(L, "pyptx.helper: out of room for helper libraries");
  return 0;
}

/* where(level[, want_name]): the first frame at or above level that is not
 * luaptx's own code or a helper library, as (chunk key, line[, chunk name]). The key is a
 * lightuserdata naming the chunk, so the hot path builds no string. */
static int where(lua_State *L)
{
  int level = (int)luaL_optinteger(L, 1, 1);
  int want_name = lua_toboolean(L, 2);   /* read now: index 2 is a result once pushed */
  lua_Debug ar;
  while (lua_getstack(L, level++, &ar)) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    if (is_internal_cached(ar.source)) continue;
    lua_pushlightuserdata(L, (void *)ar.source);
    lua_pushinteger(L, ar.currentline);
    if (!want_name) return 2;
    lua_pushstring(L, ar.source);
    return 3;
  }
  return 0;
}

/* ---------------------------------------------------------------- signals
 * The REPL's interrupts. The handler only records the signal and writes one
 * byte to a self-pipe (so a prompt waiting in poll wakes up). While user
 * code runs, a count hook looks at the record every few hundred
 * instructions and raises "interrupted" at the next line of user code,
 * never inside luaptx's own modules, whose state an error could leave
 * half-updated. (The REPL runs user code interpreted: JIT-compiled loops
 * do not call hooks.) */

static lua_State *sig_L;                  /* the state the hook interrupts */
static volatile sig_atomic_t sig_pending; /* the last signal caught, 0: none */
static volatile sig_atomic_t sig_stop;    /* a signal the running code has not seen */
static int sig_pipe[2] = { -1, -1 };
static const int sig_list[] = { SIGINT, SIGTERM, SIGHUP };
#define SIG_COUNT ((int)(sizeof sig_list / sizeof sig_list[0]))
#define SIG_HOOK_COUNT 256
static struct sigaction sig_saved[SIG_COUNT];

/* Is a chunk luaptx's own code (a pyptx module, the command line) or C? */
static int is_luaptx_source(const char *src)
{
  return src[0] == '=' || own_kind(src) != OWN_NONE;
}

/* Count hook: once a signal came, raise "interrupted" at user code. */
static void sig_hook(lua_State *L, lua_Debug *ar)
{
  if (!sig_stop) return;
  if (!lua_getinfo(L, "Sl", ar) || ar->currentline <= 0 || is_luaptx_source(ar->source)) return;
  sig_stop = 0;
  lua_pushfstring(L, "%s:%d: interrupted", ar->short_src, ar->currentline);
  lua_error(L);
}

/* The handler: async-signal-safe stores and a write. */
static void sig_handler(int sig)
{
  int saved = errno;
  sig_pending = sig;
  sig_stop = 1;
  if (sig_pipe[1] >= 0) {
    char c = (char)sig;
    ssize_t n = write(sig_pipe[1], &c, 1);
    (void)n;
  }
  errno = saved;
}

/* signals_open(): catch SIGINT/SIGTERM/SIGHUP (reads are interrupted, not
 * restarted); returns the self-pipe's read end, or nil and a message. */
static int signals_open(lua_State *L)
{
  if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot create a pipe: %s", strerror(errno));
    return 2;
  }
  lua_pushthread(L);
  sig_L = lua_tothread(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "luaptx.signals");   /* keeps the thread alive */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = sig_handler;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < SIG_COUNT; i++) sigaction(sig_list[i], &sa, &sig_saved[i]);
  lua_pushinteger(L, sig_pipe[0]);
  return 1;
}

/* signals_arm(on): user code starts (the hook watches; a signal already
 * caught and not yet taken stops it at once) or ends (hook off). */
static int signals_arm(lua_State *L)
{
  if (!sig_L) return 0;
  if (lua_toboolean(L, 1)) lua_sethook(sig_L, sig_hook, LUA_MASKCOUNT, SIG_HOOK_COUNT);
  else if (lua_gethook(sig_L) == sig_hook) lua_sethook(sig_L, NULL, 0, 0);
  return 0;
}

/* signals_take(): the signal caught since the last call (0: none); drains
 * the pipe, and a later input is no longer stopped by it. */
static int signals_take(lua_State *L)
{
  char buf[64];
  while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof buf) > 0) {}
  int sig = sig_pending;
  sig_pending = 0;
  sig_stop = 0;
  lua_pushinteger(L, sig);
  return 1;
}

/* signals_close(): restore the previous handlers and close the pipe. */
static int signals_close(lua_State *L)
{
  if (sig_pipe[0] < 0) return 0;
  sig_stop = 0;
  for (int i = 0; i < SIG_COUNT; i++) sigaction(sig_list[i], &sig_saved[i], NULL);
  close(sig_pipe[0]);
  close(sig_pipe[1]);
  sig_pipe[0] = sig_pipe[1] = -1;
  if (sig_L && lua_gethook(sig_L) == sig_hook) lua_sethook(sig_L, NULL, 0, 0);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "luaptx.signals");
  sig_L = NULL;
  return 0;
}

static const luaL_Reg signal_funcs[] = {
  { "signals_open", signals_open }, { "signals_arm", signals_arm },
  { "signals_take", signals_take }, { "signals_close", signals_close }, { NULL, NULL },
};

/* require "luaptx.core": the cdef text and a table of entry points. */
static int open_core(lua_State *L)
{
  lua_newtable(L);
  lua_pushstring(L, lpx_bundle_cdef);
  lua_setfield(L, -2, "cdef");
  lua_newtable(L);
  for (const lpx_ffi_entry *e = lpx_ffi_funcs; e->name; e++) {   /* generated from the cdef headers */
    lua_pushlightuserdata(L, e->fn);
    lua_setfield(L, -2, e->name);
  }
  lua_setfield(L, -2, "fn");
  lua_pushcfunction(L, where);
  lua_setfield(L, -2, "where");
  lua_pushcfunction(L, where_skip);
  lua_setfield(L, -2, "where_skip");
  lua_pushcfunction(L, own_source);
  lua_setfield(L, -2, "own_source");
  for (const luaL_Reg *r = signal_funcs; r->name; r++) {
    lua_pushcfunction(L, r->func);
    lua_setfield(L, -2, r->name);
  }
  lua_pushstring(L, LUAPTX_VERSION);
  lua_setfield(L, -2, "version");
  return 1;
}

/* Check the variables the binding reads (LUAPTX_TRACEBACK, LUAPTX_LUA_DIR);
 * -1 with a message naming the variable and what is valid on L. */
static int check_env(lua_State *L)
{
  lpx_ctx *ctx = lpx_ctx_new();
  int flag = 0;
  if (!ctx) { lua_pushstring(L, "out of memory"); return -1; }
  if (lpx_env_flag(ctx, "LUAPTX_TRACEBACK", &flag)) { lua_pushstring(L, lpx_ctx_error(ctx)); lpx_ctx_free(ctx); return -1; }
  lpx_ctx_free(ctx);
  const char *dir = getenv("LUAPTX_LUA_DIR");
  char path[4096];
  struct stat st;
  if (!dir || !*dir) return 0;
  if (snprintf(path, sizeof path, "%s/pyptx/init.lua", dir) < (int)sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode))
    return 0;
  lua_pushfstring(L, "LUAPTX_LUA_DIR=%s: there is no pyptx/init.lua in it; valid: the lua/ directory of a "
                     "luaptx source tree (e.g. LUAPTX_LUA_DIR=lua), or unset for the bundled modules", dir);
  return -1;
}

/* Room for the compiled code of many kernels' traces. LuaJIT's defaults
 * (1,000 traces, 512 KB of machine code) fill up in a process that traces
 * several big kernels, and a full cache flushes every trace, each to be
 * recorded and compiled again (bench/trace.lua did, at its GEMM). A Lua
 * without jit.opt has nothing to raise. */
static void jit_room(lua_State *L)
{
  lua_getglobal(L, "require");
  lua_pushstring(L, "jit.opt");
  if (lua_pcall(L, 1, 1, 0)) { lua_pop(L, 1); return; }
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "start");
    lua_pushstring(L, "maxtrace=" LPX_STR(LPX_JIT_MAXTRACE));
    lua_pushstring(L, "maxmcode=" LPX_STR(LPX_JIT_MAXMCODE));
    if (lua_pcall(L, 2, 0, 0)) lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Insert the searcher right after package.preload's. */
int luaptx_install(lua_State *L)
{
  if (check_env(L)) return -1;
  jit_room(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, open_core);
  lua_setfield(L, -2, "luaptx.core");
  lua_pop(L, 1);
  lua_getfield(L, -1, "loaders");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 2);
    lua_pushstring(L, "package.loaders missing (not LuaJIT/Lua 5.1?)");
    return -1;
  }
  int n = (int)lua_objlen(L, -1);
  for (int i = n; i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, searcher);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
  return 0;
}

/* Error handler: append a traceback unless the message is a user error. */
static int traceback(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(error object is not a string)";
  const char *tb = getenv("LUAPTX_TRACEBACK");   /* "0" or "1": checked by luaptx_install */
  if (tb && strcmp(tb, "1") == 0) {
    luaL_traceback(L, L, msg, 1);
    return 1;
  }
  lua_pushstring(L, msg);
  return 1;
}

/* Run the CLI: require "luaptx.cli" and call .main(args). */
int luaptx_main(int argc, char **argv)
{
  lua_State *L = luaL_newstate();
  if (!L) { fputs("luaptx: cannot create a Lua state\n", stderr); return 1; }
  luaL_openlibs(L);
  if (luaptx_install(L)) { fprintf(stderr, "luaptx: %s\n", lua_tostring(L, -1)); lua_close(L); return 1; }
  lua_pushcfunction(L, traceback);
  lua_getglobal(L, "require");
  lua_pushstring(L, "luaptx.cli");
  int rc = lua_pcall(L, 1, 1, 1);
  if (!rc) {
    lua_getfield(L, -1, "main");
    lua_createtable(L, argc, 0);
    for (int i = 0; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i); }
    rc = lua_pcall(L, 1, 1, 1);
  }
  int code = 0;
  if (rc) {
    fprintf(stderr, "luaptx: %s\n", lua_tostring(L, -1));
    code = 1;
  } else if (lua_isnumber(L, -1)) {
    code = (int)lua_tointeger(L, -1);
  }
  lua_close(L);
  return code;
}
