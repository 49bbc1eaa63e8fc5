#!/bin/sh
# Install this build into a prefix, build examples/embed against it with
# find_package(luaptx), and run the host on the emulator. Args: build src
# [cflags] (the sanitizer flags when the library was built with them).
set -eu
build=$1
src=$2
cflags=${3:-}
prefix=$build/embed-prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/examples/embed" -B "$build/embed-host" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" >/dev/null
cmake --build "$build/embed-host" >/dev/null
"$build/embed-host/embed_host" "$src" emu
