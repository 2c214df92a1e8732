#!/usr/bin/env bash
# A consumer through pkg-config, from a relocated install: install the
# build into a scratch prefix, move the prefix elsewhere, then compile
# tests/consumer/main.c with `pkg-config --cflags --libs dsv4rt` and a
# bundle the installed dsv4c writes (its specs from the pc file's specsdir)
# and run it on OpenCL.  The move proves nothing in the install points at
# where it was first put.
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/first" >/dev/null
mv "$work/first" "$work/moved"
pc=$(find "$work/moved" -name dsv4rt.pc -path "*pkgconfig*" | head -1)
[ -n "$pc" ] || { echo "FAIL: no dsv4rt.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
specs=$(pkg-config --variable=specsdir dsv4rt)
dsv4c=$(pkg-config --variable=dsv4c dsv4rt)
[ -f "$specs/decode.lua" ] && [ -x "$dsv4c" ] || { echo "FAIL: specsdir $specs or dsv4c $dsv4c missing"; exit 1; }
"$dsv4c" "$specs/decode.lua" -t spirv,ptx -o "$work/kernels"
# shellcheck disable=SC2046 # pkg-config's flags are words
${CC:-cc} -std=c11 -o "$work/consumer" "$src/main.c" -DBUNDLE="\"$work/kernels/decode.dsv4b\"" \
  $(pkg-config --cflags dsv4rt) $(pkg-config --libs dsv4rt)
LD_LIBRARY_PATH=$(pkg-config --variable=libdir dsv4rt) "$work/consumer"
