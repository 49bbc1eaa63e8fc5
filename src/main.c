/* The luaptx executable: everything happens in luaptx_main. */
#include "luaptx.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Keep freed memory mapped for reuse (glibc): a process that traces,
 * parses or formats one kernel after another (a sweep, a benchmark, the
 * REPL) then reuses warm pages instead of faulting fresh ones in for each;
 * left to itself glibc maps every big array anew and gives a large free
 * heap top back to the system. Up to 64 MB of free heap stays mapped. */
static void keep_memory(void)
{
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv)
{
  keep_memory();
  return luaptx_main(argc, argv);
}
