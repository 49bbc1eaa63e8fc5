/* luaptx — a Lua-scripted environment for hand-written PTX kernels.
 *
 * The public C interface. Link libluaptx (static or shared).
 *
 *   luaptx_main     the whole command-line program (what `luaptx` runs)
 *   luaptx_install  make `require "pyptx"` and the CLI modules available
 *                   in a lua_State you own (LuaJIT 2.1)
 */
#ifndef LUAPTX_H
#define LUAPTX_H

#ifdef __cplusplus
extern "C" {
#endif

#define LUAPTX_VERSION "0.1.0"

struct lua_State;

/* Run the luaptx command line with argv; returns the process exit code. */
int luaptx_main(int argc, char **argv);

/* Install luaptx's module loader and core bindings into L (after
 * luaL_openlibs). Returns 0, or -1 with an error message pushed on L. */
int luaptx_install(struct lua_State *L);

#ifdef __cplusplus
}
#endif
#endif
