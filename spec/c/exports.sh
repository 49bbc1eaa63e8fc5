#!/bin/sh
# The shared library exports exactly the functions luaptx.h declares
# (LUAPTX_API): no lpx_* internal, no data. usage: exports.sh LIB HEADER
set -eu
lib=$1 header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^_init$\|^_fini$' | sort > "$tmp/exported"
sed -n 's/^LUAPTX_API .*[ *]\(luaptx_[a-z_]*\)(.*/\1/p' "$header" | sort > "$tmp/declared"
if ! cmp -s "$tmp/exported" "$tmp/declared"; then
  echo "exports.sh: $lib exports other symbols than $header declares (< exported only, > declared only):"
  diff "$tmp/exported" "$tmp/declared" || true
  exit 1
fi
echo "exports.sh: $(wc -l < "$tmp/exported") symbols, all declared in luaptx.h"
