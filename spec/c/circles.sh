#!/bin/sh
# The calls between the files of src/ run one way: spec/c/circles.lua on
# `nm` of the static library (one member per source file), after making
# sure it finds a circle and an up-call planted in listings of two files.
# usage: circles.sh LIBLUAPTX.a LUAJIT
set -eu
lib=$1 luajit=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'a.c.o:\n0000 T fa\n                 U fb\n\nb.c.o:\n0000 T fb\n                 U fa\n' > "$tmp/planted"
if "$luajit" "$here/circles.lua" < "$tmp/planted" > "$tmp/out"; then
  echo "circles.sh: circles.lua missed the circle planted between a.c and b.c:"
  cat "$tmp/out"
  exit 1
fi
grep -q 'circle of 2 files: a.c b.c' "$tmp/out" || { echo "circles.sh: planted circle not named:"; cat "$tmp/out"; exit 1; }
printf 'emu_ldst.c.o:\n                 U lpx_emu_fail\n\nemu_exec.c.o:\n0000 T lpx_emu_fail\n' > "$tmp/upcall"
if "$luajit" "$here/circles.lua" < "$tmp/upcall" > "$tmp/out"; then
  echo "circles.sh: circles.lua missed a handler calling up into the runner:"
  cat "$tmp/out"
  exit 1
fi
grep -q 'emu_ldst.c calls emu_exec.c' "$tmp/out" || { echo "circles.sh: the up-call not named:"; cat "$tmp/out"; exit 1; }
nm "$lib" > "$tmp/nm"
"$luajit" "$here/circles.lua" < "$tmp/nm"
