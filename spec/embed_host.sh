#!/bin/sh
# Install this build into a prefix, build examples/embed against it with
# find_package(luaptx), and run the host on the emulator; then move the
# prefix and build a tiny host with nothing but pkg-config's flags (the .pc
# file must be relocatable). Args: build src [cflags] (the sanitizer flags
# when the library was built with them).
set -eu
build=$1
src=$2
cflags=${3:-}
prefix=$build/embed-prefix
rm -rf "$prefix" "$build/embed-moved"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/examples/embed" -B "$build/embed-host" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" >/dev/null
cmake --build "$build/embed-host" >/dev/null
"$build/embed-host/embed_host" "$src" emu

moved=$build/embed-moved
cp -a "$prefix" "$moved"
flags=$(PKG_CONFIG_PATH="$moved/lib/pkgconfig" pkg-config --cflags --libs luaptx)
case "$flags" in
  *"$moved"*) ;;
  *) echo "embed_host.sh: pkg-config's flags do not point into the prefix $moved: $flags" >&2; exit 1 ;;
esac
# shellcheck disable=SC2086 # the flags are words
cc $cflags -o "$build/pc_host" "$src/spec/c/pc_host.c" $flags
LD_LIBRARY_PATH="$moved/lib" "$build/pc_host" "$src"
