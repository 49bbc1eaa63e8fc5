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

# planted WHAT LISTING EXPECTED: circles.lua must fail on LISTING and say EXPECTED.
planted() {
  printf "$2" > "$tmp/planted"
  if "$luajit" "$here/circles.lua" < "$tmp/planted" > "$tmp/out" || ! grep -q "$3" "$tmp/out"; then
    echo "circles.sh: circles.lua missed $1 (expected '$3'):"
    cat "$tmp/out"
    exit 1
  fi
}
planted "a circle between a.c and b.c" 'a.c.o:\n0000 T fa\n                 U fb\n\nb.c.o:\n0000 T fb\n                 U fa\n' \
  'circle of 2 files: a.c b.c'
planted "a handler calling up into the runner" 'emu_ldst.c.o:\n                 U lpx_emu_fail\n\nemu_exec.c.o:\n0000 T lpx_emu_fail\n' \
  'emu_ldst.c calls emu_exec.c'
nm "$lib" > "$tmp/nm"
"$luajit" "$here/circles.lua" < "$tmp/nm"
