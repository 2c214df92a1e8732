#!/usr/bin/env bash
# Reproducible output: the same spec and toolchain give byte-identical
# artifacts, bundles and generated C (--emit c: <stem>_kernels.c / .h),
# whatever the output folder's name and the folder dsv4c runs in (no paths,
# times or addresses leak into what it writes).  The C array holds exactly
# the bundle's bytes.
#   usage: reproducible.sh DSV4C SPECS OUT
set -u
dsv4c=$1 specs=$2 out=$3
rm -rf "$out" && mkdir -p "$out/a" "$out/elsewhere/b"
"$dsv4c" "$specs/decode.lua" --emit c -o "$out/a/first" || { echo "FAIL: first run"; exit 1; }
(cd "$out/elsewhere" && cp "$specs"/*.lua . && "$dsv4c" decode.lua --emit c -o b/second_run_with_a_longer_name) ||
  { echo "FAIL: second run"; exit 1; }
n=0 bad=0
for f in "$out/a/first"/*; do
  g="$out/elsewhere/b/second_run_with_a_longer_name/$(basename "$f")"
  n=$((n + 1))
  cmp -s "$f" "$g" || { echo "FAIL: $(basename "$f") differs between the two runs"; bad=$((bad + 1)); }
done
[ "$(ls "$out/a/first" | wc -l)" -eq "$(ls "$out/elsewhere/b/second_run_with_a_longer_name" | wc -l)" ] ||
  { echo "FAIL: the runs wrote different files"; bad=$((bad + 1)); }
for f in decode_kernels.c decode_kernels.h decode.dsv4b; do
  [ -f "$out/a/first/$f" ] || { echo "FAIL: --emit c wrote no $f"; bad=$((bad + 1)); }
done
# the array's bytes, in order, are the bundle file's
if [ -f "$out/a/first/decode_kernels.c" ] && [ -f "$out/a/first/decode.dsv4b" ]; then
  grep '^  0x' "$out/a/first/decode_kernels.c" | grep -o '0x[0-9a-f][0-9a-f]' | cut -c3- >"$out/c.hex"
  od -An -v -tx1 "$out/a/first/decode.dsv4b" | tr -s ' ' '\n' | grep -v '^$' >"$out/b.hex"
  cmp -s "$out/c.hex" "$out/b.hex" || { echo "FAIL: decode_kernels.c's array is not decode.dsv4b"; bad=$((bad + 1)); }
fi
echo "$n files compared, $bad differ"
[ "$bad" -eq 0 ] && [ "$n" -gt 0 ]
