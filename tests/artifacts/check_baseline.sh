#!/usr/bin/env bash
# Recompile every spec a baseline lists and compare the loose artifacts'
# SHA-256 (.ptx, .hsaco, .spv, .spir12.bc; bundles carry a format version
# and are left out) with it: the check that a change which must not alter
# generated code did not.  Not a CTest: a change that rightly alters code
# makes a new baseline.
#   usage: check_baseline.sh [DSV4C] [BASELINE]
#          check_baseline.sh --make DSV4C OUT   (write a baseline of the same
#          specs, in the same form, from that dsv4c: a change that rightly
#          alters code makes the next one, e.g. tests/artifacts/*.sha256)
# defaults: build/bin/dsv4c, tests/artifacts/artifacts-2f403c3.sha256 (the
# newest, named after the commit it was taken at: a new baseline moves this
# default; b138c22's, beside it, is from before b111a42 altered every
# dequantizing kernel's code (the producers' loads and bf16 scale product)
# and 61c9157 and 380816b the DSv4 single-CTA decode's (tile.prefetch,
# eight producer warps); 380816b's, from before ef0f749 and 54e2d17 gave the two pair
# decode kernels tile.longest_first (the other 224 artifacts identical);
# 54e2d17's, from before 70645eb gave the seven bf16-P matrix decode
# kernels bf16 split-KV partials (the other 219 identical); 70645eb's, from
# before a50e010 addressed every decode kernel's q, lists, out and lse
# through strides (the 34 decode artifacts; the other 192 identical);
# a50e010's, from before 720c43e read block tables at a row stride (the
# 94 paged_gather and logits artifacts; the other 132 identical); 720c43e's,
# from before a9c1c36 gave AMDGCN a cross-lane hook (the 12 hsaco whose
# kernels reduce across lanes: portable decodes, writers, one logits
# kernel; the other 214 identical); a9c1c36's, from before 282db00 gave
# topk its work and chunk arguments and a merge kernel (the 11 topk
# artifacts; topk_2048's 4 new; the other 215 identical); 282db00's,
# from before 819259e stored the split rows' keys beside their positions
# (the 15 topk artifacts; the other 215 identical); 819259e's, from
# before 5d6e902 added the logits' 256- and 512-position kernels (their 2
# PTX artifacts; the other 230 identical); 5d6e902's, from before d60dd4e
# added the direct decode form's kernels (5 PTX artifacts: the 16- and
# 32-head kernels and their bf16x2 twins, decode.lua's 16-head one; the
# other 232 identical); 60dc9e9's, from before 42e5307 moved the warp
# forms' row exchange into rows.c (the 9 warp and direct decode artifacts
# reordered; the other 228 identical); 42e5307's, from before 2b1fa16
# added paged_mqa_logits_topk (24 new artifacts) and gave topk's select and
# the logits' portable and row forms their shared destinations (24 topk and
# logits artifacts; the other 213 identical); 59423dc's, from before 4bb8972
# bounded the fused op's appends and gave its merge the chunk argument (its
# 24 artifacts; the other 237 identical); 4bb8972's, from before 00709a6
# gave the warp forms one rows' end (the direct form's 5 PTX artifacts move
# one and.b32; the other 256 identical);
# ../shared/baselines/ has 8aee285's, from before the P-format change
# altered the decode's PTX)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --make ]; then
  dsv4c=$2 outfile=$3 out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  for f in "$root"/specs/*.lua "$root"/bench/*_variants.lua "$root"/tests/exec/indexer_shapes.lua; do
    s=$(basename "$f" .lua)
    "$dsv4c" "$f" -I "$root/specs" -o "$out/$s" 2>/dev/null || true
  done
  (cd "$out" && find . -type f \( -name '*.ptx' -o -name '*.hsaco' -o -name '*.spv' -o -name '*.spir12.bc' \) | sort |
     xargs sha256sum) >"$outfile"
  echo "$(wc -l <"$outfile") artifacts hashed into $outfile"
  exit 0
fi
dsv4c=${1:-$root/build/bin/dsv4c}
base=${2:-$root/tests/artifacts/artifacts-2f403c3.sha256}
[ -f "$base" ] || { echo "no baseline at $base: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# the baseline names one folder per spec, after the spec's stem
declare -A src=()
for f in "$root"/specs/*.lua "$root"/bench/*_variants.lua "$root"/tests/exec/indexer_shapes.lua; do
  s=$(basename "$f" .lua); src[$s]=$f
done
pass=0 fail=0
for stem in $(awk '{print $2}' "$base" | cut -d/ -f2 | sort -u); do
  f=${src[$stem]:-}
  if [ -z "$f" ]; then echo "FAIL $stem: no spec of that name"; fail=$((fail + 1)); continue; fi
  if ! "$dsv4c" "$f" -I "$root/specs" -o "$out/$stem" 2>"$out/$stem.log"; then
    # a spec that declares no kernel (the layout library) writes nothing
    grep -q "declares no kernel" "$out/$stem.log" && continue
    echo "FAIL $stem: $(cat "$out/$stem.log")"; fail=$((fail + 1)); continue
  fi
done
while read -r sum path; do
  case $path in *.dsv4b) continue ;; esac
  if [ ! -f "$out/$path" ]; then echo "FAIL $path: not written"; fail=$((fail + 1)); continue; fi
  now=$(sha256sum "$out/$path" | cut -d' ' -f1)
  if [ "$now" = "$sum" ]; then pass=$((pass + 1)); else echo "FAIL $path: differs"; fail=$((fail + 1)); fi
done <"$base"
echo "$pass artifacts identical to $(basename "$base"), $fail differ or missing"
[ "$fail" -eq 0 ]
