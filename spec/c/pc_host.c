/* The smallest luaptx host: spec/embed_host.sh builds it against an
 * installed (and moved) prefix with nothing but the flags of
 * `pkg-config --cflags --libs luaptx`, then runs it.
 *
 *   usage: pc_host <repo-root>
 */
#include <luaptx.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/?.lua;", argc > 1 ? argv[1] : ".");
  luaptx_options opts = { "emu", NULL, path, 1 };
  luaptx_state *S = luaptx_open(&opts);
  if (!S) { fprintf(stderr, "pc_host: out of memory\n"); return 1; }
  luaptx_kernel *k = NULL;
  size_t n = 0;
  const char *ptx = NULL;
  if (luaptx_load_string(S, "return require('examples.hopper.rms_norm').build(8, 1024)", "=pc_host") == 0
      && (k = luaptx_kernel_get(S, "rms_norm", NULL)) != NULL)
    ptx = luaptx_kernel_ptx(k, &n);
  if (!ptx || !strstr(ptx, ".entry rms_norm")) {
    fprintf(stderr, "pc_host: %s\n", luaptx_error(S));
    luaptx_close(S);
    return 1;
  }
  printf("pc_host: rms_norm traced to %zu bytes of PTX on %s\n", n, luaptx_device(S));
  luaptx_close(S);
  return 0;
}
