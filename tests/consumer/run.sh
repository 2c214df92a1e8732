#!/usr/bin/env bash
# Install the build tree into a scratch prefix and build a consumer project
# with it (a copy of tests/consumer, so the test may touch its spec):
#   - consumer: a bundle generated at build time, opened from its file;
#   - consumer_embedded: dsv4c_add_kernels(... EMBED), kernels compiled into
#     the program.  dsv4c reruns when the spec, a layout it includes or the
#     dsv4c binary changes, and not otherwise (deleting the bundle file, a
#     byproduct, reruns nothing); the program runs from another folder with
#     no .dsv4b anywhere in its output folder.
# Exit 77 (skipped) when there is no OpenCL device to run them on.
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/elsewhere"
cp -r "$src" "$work/src"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DDSV4C_SPECS="$work/prefix/share/dsv4c/specs" >/dev/null
cmake --build "$work/build" >/dev/null
gen=$work/build/embedded_gathers
for f in embedded_kernels.c embedded_kernels.h embedded.dsv4b; do
  [ -f "$gen/$f" ] || { echo "FAIL: EMBED wrote no $gen/$f"; exit 1; }
done

# rebuild rules: `what` changed -> dsv4c --emit c runs (yes) or not (no)
rerun() { # rerun yes|no WHAT
  local out; out=$(cmake --build "$work/build" 2>&1) || { echo "$out"; echo "FAIL: rebuild after $2"; exit 1; }
  if grep -q -- "dsv4c --emit c" <<<"$out"; then ran=yes; else ran=no; fi
  [ "$ran" = "$1" ] || { echo "FAIL: after $2, dsv4c ran: $ran (expected $1)"; exit 1; }
  echo "after $2: dsv4c ran: $ran"
}
rerun no "nothing"
touch "$work/src/embedded.lua" && rerun yes "touching the spec"
touch "$work/prefix/share/dsv4c/specs/layouts.lua" && rerun yes "touching layouts.lua (DEPENDS)"
touch "$work/prefix/bin/dsv4c" && rerun yes "touching the dsv4c binary"
rm "$gen/embedded.dsv4b" && rerun no "deleting the bundle file"
[ ! -e "$gen/embedded.dsv4b" ] || { echo "FAIL: the bundle file came back in $gen"; exit 1; }

export LD_LIBRARY_PATH="$work/prefix/lib"
"$work/build/consumer"
(cd "$work/elsewhere" && "$work/build/consumer_embedded")
