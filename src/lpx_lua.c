/* The Lua binding: the module searcher for bundled (or on-disk) Lua code,
 * and the table of core entry points LuaJIT's FFI calls through. This is
 * the only core-adjacent file that sees lua.h. */
#include "luaptx.h"
#include "lpx_bundle.h"
#include "lpx_core.h"
#include "lpx_device.h"
#include "lpx_compile.h"
#include "lpx_tma.h"
#include "lpx_check.h"
#include "lpx_sys.h"
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Core entry points exposed to Lua as function pointers for ffi.cast. */
#define LPX_FFI_FUNCS(X) \
  X(lpx_ctx_new) X(lpx_ctx_free) X(lpx_ctx_error) X(lpx_ctx_warning) \
  X(lpx_form_intern) X(lpx_form_get) X(lpx_type_lookup) X(lpx_type_name) \
  X(lpx_type_bits) X(lpx_special_lookup) X(lpx_special_type) \
  X(lpx_isa_row_count) X(lpx_isa_modifiers) X(lpx_isa_row_name) X(lpx_arch_parse) \
  X(lpx_module_new) X(lpx_module_free) X(lpx_module_file) X(lpx_sym) \
  X(lpx_func_begin) X(lpx_func_param) X(lpx_func_directive) X(lpx_var_decl) \
  X(lpx_reg_new) X(lpx_reg_named) X(lpx_module_top_count) X(lpx_module_target_modifiers) X(lpx_module_hoist) X(lpx_func_return) X(lpx_param_attr) X(lpx_reg_type) X(lpx_label_place) X(lpx_append) \
  X(lpx_append_raw) X(lpx_func_inst_count) X(lpx_func_reg_count) \
  X(lpx_func_name) X(lpx_func_info) X(lpx_func_param_info) X(lpx_emit) X(lpx_inst_text) \
  X(lpx_parse) X(lpx_parse_into) X(lpx_parse_module_decls) X(lpx_fmt_lossless) X(lpx_fmt_canonical) X(lpx_module_func_count) \
  X(lpx_reg_find) X(lpx_reg_rename) X(lpx_reg_name) X(lpx_transpile) \
  X(lpx_device_open) X(lpx_device_close) X(lpx_device_describe) X(lpx_device_kind) \
  X(lpx_device_set_option) X(lpx_device_get_option) X(lpx_device_alloc) X(lpx_device_free) \
  X(lpx_device_upload) X(lpx_device_download) X(lpx_device_memset) X(lpx_device_load_ir) \
  X(lpx_device_function) X(lpx_device_launch) X(lpx_device_sync) X(lpx_device_event_record) \
  X(lpx_device_event_elapsed) X(lpx_device_stats) \
  X(lpx_device_graph_begin) X(lpx_device_graph_end) X(lpx_device_graph_launch) \
  X(lpx_compiler_open) X(lpx_compiler_close) X(lpx_compiler_identity) \
  X(lpx_compiler_cache_dir) X(lpx_compile) X(lpx_compile_many) X(lpx_content_hash) X(lpx_cache_list) X(lpx_cache_clear) \
  X(lpx_cache_set_limit) X(lpx_cache_stats) \
  X(lpx_func_check_refs) X(lpx_tma_validate) X(lpx_tma_dtype_size) X(lpx_tma_dtype_lookup) X(lpx_tma_box_bytes) \
  X(lpx_device_tma_encode) X(lpx_device_tma_replace_address) \
  X(lpx_proc_run) X(lpx_proc_status) X(lpx_proc_timed_out) X(lpx_proc_output) X(lpx_proc_free) \
  X(lpx_fs_kind) X(lpx_fs_mkdirs) X(lpx_fs_private_dir) X(lpx_fs_write_file) X(lpx_fs_temp_file) \
  X(lpx_fs_temp_dir) X(lpx_fs_remove_tree)

/* Find a bundled module by name. */
static const lpx_bundle_entry *bundle_find(const char *name)
{
  for (const lpx_bundle_entry *e = lpx_bundle; e->name; e++)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

/* The on-disk path of a module under $LUAPTX_LUA_DIR (development mode):
 * pyptx[.x] -> DIR/pyptx/{init,x}.lua, luaptx.cli -> DIR/../bin/luaptx.lua,
 * luaptx.x -> DIR/../bin/x.lua. Returns 0 when the name is not ours. */
static int dev_path(const char *dir, const char *name, char *path, size_t cap)
{
  if (strcmp(name, "pyptx") == 0) return snprintf(path, cap, "%s/pyptx/init.lua", dir) > 0;
  if (strncmp(name, "pyptx.", 6) == 0) return snprintf(path, cap, "%s/pyptx/%s.lua", dir, name + 6) > 0;
  if (strcmp(name, "luaptx.cli") == 0) return snprintf(path, cap, "%s/../bin/luaptx.lua", dir) > 0;
  if (strncmp(name, "luaptx.", 7) == 0 && strcmp(name, "luaptx.core"))
    return snprintf(path, cap, "%s/../bin/%s.lua", dir, name + 7) > 0;
  return 0;
}

/* package.loaders entry: luaptx's modules from disk in development mode
 * ($LUAPTX_LUA_DIR), else from the bytecode bundled into the binary. */
static int searcher(lua_State *L)
{
  const char *name = luaL_checkstring(L, 1);
  const char *dir = getenv("LUAPTX_LUA_DIR");
  char path[4096];
  if (dir && *dir && dev_path(dir, name, path, sizeof path)) {
    FILE *f = fopen(path, "rb");
    if (f) {
      fclose(f);
      if (luaL_loadfile(L, path)) return lua_error(L);
      return 1;
    }
  }
  const lpx_bundle_entry *e = bundle_find(name);
  if (!e) {
    lua_pushfstring(L, "\n\tno module '%s' in luaptx's bundle", name);
    return 1;
  }
  char chunk[512];
  snprintf(chunk, sizeof chunk, "@%s", e->path);
  if (luaL_loadbuffer(L, (const char *)e->bc, e->size, chunk)) return lua_error(L);
  return 1;
}

/* Is a chunk name one of luaptx's own Lua modules? */
static int is_internal_source(const char *src)
{
  if (strncmp(src, "@lua/pyptx/", 11) == 0) return 1;
  const char *p = strstr(src, "/pyptx/");
  return p && !strchr(p + 7, '/') && strstr(p, ".lua") != NULL;
}

/* where(level[, want_name]): the first frame at or above level that is not
 * luaptx's own code, as (chunk key, line[, chunk name]). The key is a
 * lightuserdata naming the chunk, so the hot path builds no string. */
static int where(lua_State *L)
{
  int level = (int)luaL_optinteger(L, 1, 1);
  lua_Debug ar;
  while (lua_getstack(L, level++, &ar)) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    if (is_internal_source(ar.source)) continue;
    lua_pushlightuserdata(L, (void *)ar.source);
    lua_pushinteger(L, ar.currentline);
    if (!lua_toboolean(L, 2)) return 2;
    lua_pushstring(L, ar.source);
    return 3;
  }
  return 0;
}

/* require "luaptx.core": the cdef text and a table of entry points. */
static int open_core(lua_State *L)
{
  lua_newtable(L);
  lua_pushstring(L, lpx_bundle_cdef);
  lua_setfield(L, -2, "cdef");
  lua_newtable(L);
#define X(fn) lua_pushlightuserdata(L, (void *)(fn)); lua_setfield(L, -2, #fn);
  LPX_FFI_FUNCS(X)
#undef X
  lua_setfield(L, -2, "fn");
  lua_pushcfunction(L, where);
  lua_setfield(L, -2, "where");
  lua_pushstring(L, LUAPTX_VERSION);
  lua_setfield(L, -2, "version");
  return 1;
}

/* Insert the searcher right after package.preload's. */
int luaptx_install(lua_State *L)
{
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, open_core);
  lua_setfield(L, -2, "luaptx.core");
  lua_pop(L, 1);
  lua_getfield(L, -1, "loaders");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 2);
    lua_pushstring(L, "luaptx: package.loaders missing (not LuaJIT/Lua 5.1?)");
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
  if (getenv("LUAPTX_TRACEBACK")) {
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
  if (luaptx_install(L)) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); lua_close(L); return 1; }
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
