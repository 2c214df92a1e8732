#!/usr/bin/env bash
# Sweeps in dsv4c, without a device (ctest tune.sweep):
#   - expansion: names and count of tests/tune/sweep_small.lua's variants,
#     in --emit plan, the rejected ones with the constraint's or the
#     checker's own message;
#   - -j: the same bytes (every artifact, bundle and sweep manifest) with
#     -j 1 and -j 2, for the sweep and for specs/decode.lua;
#   - --lock: a lockfile made from the sweep manifest's code hashes builds
#     a bundle of the winners (and the kernels that are no sweep's, and the
#     variants the untuned default rule could run), and
#     stale entries (another spec hash, another toolchain, other code) are
#     reported and left out.
#   usage: sweep.sh DSV4C TESTS_TUNE_DIR SPECS_DIR WORK_DIR
set -u
dsv4c=$1 dir=$2 specs=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# ---- expansion and rejection ----
plan=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --emit plan 2>&1) || bad "sweep_small.lua: --emit plan failed: $plan"
want_exp="sdp__h2_v16 sdp__h2_v32 sdp__h4_v16 sdp__h4_v32 sdp__h8_v32 sdm__h32_pbf16_pair0 sdm__h32_pbf16x2_pair0 sdm__h64_pbf16_pair0 sdm__h64_pbf16_pair1 sdm__h64_pbf16x2_pair0 sdm__h64_pbf16x2_pair1"
got_exp=$(printf '%s\n' "$plan" | awk '$1 == "expanded" {print $2}' | tr '\n' ' ' | sed 's/ $//')
[ "$got_exp" = "$want_exp" ] && ok || bad "expanded variants: got '$got_exp', want '$want_exp'"
[ "$(printf '%s\n' "$plan" | grep -c '^kernel ')" = 11 ] && ok || bad "11 kernels in the plan"
printf '%s\n' "$plan" | grep -q '^sweep sdp (.*sweep_small.lua:5): op sparse_decode, 2 field(s), 1 constraint(s); 9 variants: 5 expanded, 4 rejected$' &&
  ok || bad "sweep sdp's summary line"
printf '%s\n' "$plan" | grep -q "^  rejected sdp__h8_v16: constraint 1 (.*sweep_small.lua:[0-9]*): 256 or more threads a CTA$" && ok ||
  bad "sdp__h8_v16 rejected by the constraint with its reason"
printf '%s\n' "$plan" | grep -q "^  rejected sdp__h2_v8: kernel 'sdp__h2_v8': field 'tile' gives 64 lanes a head (padded to 64); a head's lanes must fit one 32-wide reduction: raise values_per_thread$" &&
  ok || bad "sdp__h2_v8 rejected with the checker's message"
printf '%s\n' "$plan" | grep -q "^  rejected sdm__h32_pbf16_pair1: kernel 'sdm__h32_pbf16_pair1': field 'tile' sets pair = true, which needs the warpgroup form" &&
  ok || bad "sdm__h32_pbf16_pair1 rejected with choose_form's message"
printf '%s\n' "$plan" | grep -q '^  field tile.heads_per_cta (tag h): 2 4 8$' && ok || bad "field line of sdp"

# ---- -j: the same bytes ----
for spec in "$dir/sweep_small.lua" "$specs/decode.lua"; do
  s=$(basename "$spec" .lua)
  "$dsv4c" "$spec" -I "$specs" -j 1 -o "$work/j1_$s" 2>"$work/j1_$s.log" || bad "$s -j 1: $(cat "$work/j1_$s.log")"
  "$dsv4c" "$spec" -I "$specs" -j 2 -o "$work/j2_$s" 2>"$work/j2_$s.log" || bad "$s -j 2: $(cat "$work/j2_$s.log")"
  if diff -r "$work/j1_$s" "$work/j2_$s" >/dev/null; then ok; else bad "$s: -j 1 and -j 2 write different bytes"; fi
done
[ -f "$work/j1_sweep_small/sweep_small.sweep.json" ] && ok || bad "no sweep manifest beside the sweep's bundle"
[ ! -e "$work/j1_decode/decode.sweep.json" ] && ok || bad "a sweep manifest beside a bundle without sweeps"

# ---- --lock: a lockfile made from the manifest's code hashes ----
man="$work/j1_sweep_small/sweep_small.sweep.json"
hash_of() { grep -o "\"name\": \"$1\"[^}]*\"sha256\": \"[0-9a-f]*\"" "$man" | sed 's/.*"sha256": "\([0-9a-f]*\)"/\1/'; }
spec_hash=$(grep -o '"spec_hash": "[0-9a-f]*"' "$man" | sed 's/.*: "\(.*\)"/\1/')
tc_ptx=$(grep -o '"ptx": "[^"]*"' "$man" | head -1 | sed 's/"ptx": "\(.*\)"/\1/')
tc_spv=$(grep -o '"spirv": "[^"]*"' "$man" | head -1 | sed 's/"spirv": "\(.*\)"/\1/')
entry() { # kernel op target arch toolchain spec_hash bucket winner code loser loser_code
  printf '    {"kernel": "%s", "op": "%s", "target": "%s", "arch": "%s", "device": "GPU X", "toolchain": "%s", "spec_hash": "%s", "bucket": "%s", "shape": "%s", "seed": 1, "winner": "%s", "variants": [{"name": "%s", "gate": "pass", "median_us": 1.0000, "min_us": 1.0000, "max_us": 1.0000, "samples": 3, "code": "%s", "reason": ""}, {"name": "%s", "gate": "pass", "median_us": 2.0000, "min_us": 2.0000, "max_us": 2.0000, "samples": 3, "code": "%s", "reason": ""}]}' \
    "$1" sparse_decode "$2" "$3" "$4" "$5" "$6" "$6" "$7" "$7" "$8" "$9" "${10}"
}
write_lock() { { echo '{"format": "dsv4c-tune-lock 1", "entries": ['; paste -sd, -; echo ']}'; } > "$1"; }
h64p1=$(hash_of sdm__h64_pbf16_pair1) h64p0=$(hash_of sdm__h64_pbf16_pair0) h2v16=$(hash_of sdp__h2_v16) h4v32=$(hash_of sdp__h4_v32)
{
  entry sdm ptx sm_90a "$tc_ptx" "$spec_hash" "T=8,H=128,topk=128,extra=1024,xbs=64" sdm__h64_pbf16_pair1 "$h64p1" sdm__h64_pbf16_pair0 "$h64p0"; echo
  entry sdp spirv opencl1.2 "$tc_spv" "$spec_hash" "T=8,H=64,topk=128,extra=0,xbs=0" sdp__h4_v32 "$h4v32" sdp__h2_v16 "$h2v16"; echo
} | write_lock "$work/fresh.lock"
out=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --lock "$work/fresh.lock" -o "$work/tuned" 2>&1) || bad "--lock (fresh): $out"
out=$(grep -v "^dsv4c: wrote " <<<"$out") # the one line every writing compile prints
[ -z "$out" ] && ok || bad "--lock (fresh) said: $out"
got=$(cd "$work/tuned" && ls | tr '\n' ' ')
# the winners, and of each sweep the variants the untuned rule could run (the
# first of each form: sdm's direct h32, warpgroup h64 and pair h64, which
# also wins; sdp's portable h2_v16)
[ "$got" = "sdm__h32_pbf16_pair0.ptx sdm__h64_pbf16_pair0.ptx sdm__h64_pbf16_pair1.ptx sdp__h2_v16.spir12.bc sdp__h2_v16.spv sdp__h4_v32.spir12.bc sdp__h4_v32.spv sweep_small.dsv4b sweep_small.lock " ] && ok ||
  bad "the tuned build wrote '$got'"
grep -q '"winner": "sdm__h64_pbf16_pair1"' "$work/tuned/sweep_small.lock" && ok || bad "the tuned lock lacks its entry"
# the tuned lock is the entries as the lockfile has them: shape and seed kept
grep -q '"bucket": "T=8,H=128,topk=128,extra=1024,xbs=64", "shape": "T=8,H=128,topk=128,extra=1024,xbs=64", "seed": 1,' \
  "$work/tuned/sweep_small.lock" && ok || bad "the tuned lock lost the entry's shape or seed: $(grep -A1 '"bucket"' "$work/tuned/sweep_small.lock")"
# -v names only kernels the bundle holds (each has its artifact file)
out=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --lock "$work/fresh.lock" -o "$work/tuned_v" -v 2>&1) || bad "--lock -v: $out"
said=$(printf '%s\n' "$out" | sed -n 's/^dsv4c: \([a-z0-9_]*\) \[\([a-z]*\) .*/\1.\2/p' | sed 's/\.spirv$/.spv/' | sort | tr '\n' ' ')
have=$(cd "$work/tuned_v" && ls *.ptx *.spv | sort | tr '\n' ' ')
[ -n "$said" ] && [ "$said" = "$have" ] && ok || bad "--lock -v announced '$said', the bundle's artifacts are '$have'"
# -k leaves a winner unbuilt: said so, not called stale code or kept
out=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --lock "$work/fresh.lock" -k sdm -o "$work/tuned_k" 2>&1) || bad "--lock -k: $out"
printf '%s\n' "$out" | grep -q "warning: entry (kernel sdp, .*): its winner 'sdp__h4_v32' is not built (dsv4c -k or -t left it out); not used" &&
  ! printf '%s\n' "$out" | grep -q "compiled code differs\|stays in the bundle" && ok || bad "--lock -k sdm said: $out"
# a bucket the runtime would refuse (T=3: a call's T 3 falls in T=4): an
# error naming the line, no bundle (the bundle reader refused it before)
entry sdm ptx sm_90a "$tc_ptx" "$spec_hash" "T=3,H=128,topk=128,extra=1024,xbs=64" sdm__h64_pbf16_pair1 "$h64p1" sdm__h64_pbf16_pair0 "$h64p0" |
  write_lock "$work/nobucket.lock"
out=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --lock "$work/nobucket.lock" -o "$work/nobucket" 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q "nobucket.lock: line 2: entry 1: bucket 'T=3,.*': bucket dims are not a bucket: T=3 is not a power of two" &&
  [ ! -e "$work/nobucket/sweep_small.dsv4b" ] && ok || bad "a bucket that is no bucket (rc $rc): $out"
# stale: another spec hash, another toolchain, other code
{
  entry sdm ptx sm_90a "$tc_ptx" "0000${spec_hash:4}" "T=8,H=128,topk=128,extra=1024,xbs=64" sdm__h64_pbf16_pair1 "$h64p1" sdm__h64_pbf16_pair0 "$h64p0"; echo
  entry sdm ptx sm_90a "dsv4c 0.0.1, LLVM 3" "$spec_hash" "T=16,H=128,topk=128,extra=1024,xbs=64" sdm__h64_pbf16_pair1 "$h64p1" sdm__h64_pbf16_pair0 "$h64p0"; echo
  entry sdp spirv opencl1.2 "$tc_spv" "$spec_hash" "T=8,H=64,topk=128,extra=0,xbs=0" sdp__h4_v32 "$h2v16" sdp__h2_v16 "$h2v16"; echo
} | write_lock "$work/stale.lock"
out=$("$dsv4c" "$dir/sweep_small.lua" -I "$specs" --lock "$work/stale.lock" -o "$work/stale" 2>&1) || bad "--lock (stale) failed: $out"
printf '%s\n' "$out" | grep -q "stale entry (kernel sdm, ptx sm_90a, GPU X, bucket T=8,H=128,topk=128,extra=1024,xbs=64): the spec (or a file it includes) changed since it was tuned" &&
  ok || bad "a changed spec is not reported: $out"
printf '%s\n' "$out" | grep -q "stale entry (kernel sdm, ptx sm_90a, GPU X, bucket T=16,.*): it was tuned with another toolchain" &&
  ok || bad "another toolchain is not reported: $out"
printf '%s\n' "$out" | grep -q "stale entry (kernel sdp, spirv opencl1.2, GPU X, bucket T=8,.*): sdp__h4_v32's compiled code differs from the code that was measured" &&
  ok || bad "other code is not reported: $out"
grep -q '"entries": \[\]' "$work/stale/sweep_small.lock" && ok || bad "stale entries were written into the tuned lock"
got=$(cd "$work/stale" && ls *.ptx *.spv | tr '\n' ' ')
# each sweep: the untuned rule's picks (sdm: its first direct, warpgroup and
# pair variants; sdp: its first portable one); sdp's winner whose code
# changed, compiled already, stays untuned
[ "$got" = "sdm__h32_pbf16_pair0.ptx sdm__h64_pbf16_pair0.ptx sdm__h64_pbf16_pair1.ptx sdp__h2_v16.spv sdp__h4_v32.spv " ] &&
  ok || bad "without fresh entries each sweep keeps the untuned rule's picks, got '$got'"
printf '%s\n' "$out" | grep -q "warning: sweep sdp: sdp__h4_v32 stays in the bundle untuned" && ok || bad "the untuned winner is not reported: $out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
