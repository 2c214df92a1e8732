#!/usr/bin/env bash
# Embedded kernels through pkg-config, from an installed prefix: the
# installed dsv4c (the pc file's dsv4c variable) writes embedded.lua's
# kernels as C (--emit c), the bundle file it also writes is deleted, and
# tests/consumer/embedded_main.c is compiled with the generated source and
# `pkg-config --cflags --libs dsv4rt`, then run from another folder on
# OpenCL and checked against the host (77, skipped: no OpenCL device).
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/elsewhere"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name dsv4rt.pc -path "*pkgconfig*" | head -1)
[ -n "$pc" ] || { echo "FAIL: no dsv4rt.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
specs=$(pkg-config --variable=specsdir dsv4rt)
dsv4c=$(pkg-config --variable=dsv4c dsv4rt)
"$dsv4c" "$src/embedded.lua" -I "$specs" -t spirv --emit c -o "$work/gen"
for f in embedded_kernels.c embedded_kernels.h embedded.dsv4b; do
  [ -f "$work/gen/$f" ] || { echo "FAIL: --emit c wrote no $f"; exit 1; }
done
rm "$work/gen/embedded.dsv4b"
# shellcheck disable=SC2046 # pkg-config's flags are words
${CC:-cc} -std=c11 -Wall -Wextra -Werror -o "$work/app" "$src/embedded_main.c" "$work/gen/embedded_kernels.c" \
  -I "$work/gen" $(pkg-config --cflags dsv4rt) $(pkg-config --libs dsv4rt)
cd "$work/elsewhere" && LD_LIBRARY_PATH=$(pkg-config --variable=libdir dsv4rt) "$work/app"
