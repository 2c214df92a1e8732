#!/usr/bin/env bash
# The README's CMake and pkg-config recipes, exactly as written: the blocks
# of README.md whose fence says file=NAME (kernels.lua, app.c,
# CMakeLists.txt, cmake.sh, pkgconfig.sh) are written to two fresh folders
# outside the repository, and the shell ones run there against an
# installed prefix, with no LD_LIBRARY_PATH and no -I: each must build and
# its ./app must gather token 0's value 1.0 (bf16 0x3f80).  77 (skipped):
# no OpenCL or CUDA device to run the program on.
#   usage: readme.sh BUILD_DIR README
set -eu
build=$1 readme=$2
work=$(mktemp -d /tmp/dsv4c-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PREFIX=$work/prefix
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CPATH LIBRARY_PATH
# extract every file= block into DIR
extract() {
  awk -v dir="$1" '
    /^```[a-z]* file=/ { match($0, /file=[^ ]+/); f = dir "/" substr($0, RSTART + 5, RLENGTH - 5); printf "" > f; next }
    /^```/ && f { close(f); f = ""; next }
    f { print >> f }' "$readme"
}
for how in cmake pkgconfig; do
  mkdir -p "$work/$how"
  extract "$work/$how"
  for f in kernels.lua app.c CMakeLists.txt cmake.sh pkgconfig.sh; do
    [ -s "$work/$how/$f" ] || { echo "FAIL: README.md has no file=$f block"; exit 1; }
  done
  # the compiler that built the prefix builds the recipe (CC as the user's)
  out=$(cd "$work/$how" && bash "$how.sh" 2>&1) && rc=0 || rc=$?
  echo "--- $how recipe (exit $rc)"; echo "$out" | tail -5
  if grep -q "NO_BACKEND" <<<"$out"; then echo "skipped: no device to run the app on"; exit 77; fi
  [ $rc -eq 0 ] || { echo "FAIL: the README's $how recipe"; exit 1; }
  grep -q "^out\[0\]\[0\] = bf16 0x3f80 on " <<<"$out" || { echo "FAIL: $how: ./app printed no 0x3f80"; exit 1; }
done
echo "both README recipes build and run as written"
