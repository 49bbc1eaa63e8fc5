/* The luaptx executable: everything happens in luaptx_main. */
#include "luaptx.h"

int main(int argc, char **argv) { return luaptx_main(argc, argv); }
