#!/usr/bin/env bash
# Reproducible output: the same spec and toolchain give byte-identical
# artifacts and bundles, whatever the output folder's name and the folder
# dsv4c runs in (no paths, times or addresses leak into what it writes).
#   usage: reproducible.sh DSV4C SPECS OUT
set -u
dsv4c=$1 specs=$2 out=$3
rm -rf "$out" && mkdir -p "$out/a" "$out/elsewhere/b"
"$dsv4c" "$specs/decode.lua" -o "$out/a/first" || { echo "FAIL: first run"; exit 1; }
(cd "$out/elsewhere" && cp "$specs"/*.lua . && "$dsv4c" decode.lua -o b/second_run_with_a_longer_name) ||
  { echo "FAIL: second run"; exit 1; }
n=0 bad=0
for f in "$out/a/first"/*; do
  g="$out/elsewhere/b/second_run_with_a_longer_name/$(basename "$f")"
  n=$((n + 1))
  cmp -s "$f" "$g" || { echo "FAIL: $(basename "$f") differs between the two runs"; bad=$((bad + 1)); }
done
[ "$(ls "$out/a/first" | wc -l)" -eq "$(ls "$out/elsewhere/b/second_run_with_a_longer_name" | wc -l)" ] ||
  { echo "FAIL: the runs wrote different files"; bad=$((bad + 1)); }
echo "$n files compared, $bad differ"
[ "$bad" -eq 0 ] && [ "$n" -gt 0 ]
