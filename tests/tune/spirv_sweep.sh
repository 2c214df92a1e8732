#!/usr/bin/env bash
# The SPIR-V sweep a user tunes without a GPU (ctest tune.spirv.opencl:
# PoCL on the CPU): bench/spirv_sweep.lua compiled and tuned with --quick,
# as docs/tuning.md shows it: every variant passes its gate, every entry
# has a winner, the report is written.  Then a sweep nothing of which runs
# on the device (the PTX-only build of tests/tune/tiny_sweep.lua): one
# line, exit status 3, no lockfile and no report.  Exit 77 (skipped) when
# there is no OpenCL device.
#   usage: spirv_sweep.sh DSV4C DSV4C_TUNE BENCH_DIR TESTS_TUNE_DIR SPECS_DIR WORK_DIR
set -u
dsv4c=$1 tune=$2 bench=$3 dir=$4 specs=$5 work=$6 check=${7:-}
rm -rf "$work" && mkdir -p "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

"$dsv4c" "$bench/spirv_sweep.lua" -I "$specs" -o "$work/b" 2>"$work/dsv4c.log" || { cat "$work/dsv4c.log"; exit 1; }
export DSV4_SEED=7
"$tune" "$work/b/spirv_sweep.dsv4b" --lock "$work/spirv.lock" --quick --backend opencl >"$work/t.log" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then cat "$work/t.log"; echo "SKIPPED: no OpenCL device"; exit 77; fi
[ "$rc" -eq 0 ] && ok || { cat "$work/t.log"; bad "dsv4c-tune exited with $rc"; finish; }
# 5 decode and 3 logits variants, each at the two quick shapes of its op
[ "$(grep -c '"gate": "pass"' "$work/spirv.lock")" = 16 ] && ok || bad "16 passing (shape, variant) items expected: $(grep -c '"gate"' "$work/spirv.lock") gates"
[ "$(grep -c '"winner": "sdp__h[0-9]*_v[0-9]*"' "$work/spirv.lock")" = 2 ] &&
  [ "$(grep -c '"winner": "lgp__c[0-9]*"' "$work/spirv.lock")" = 2 ] && ok || bad "each of the 4 entries needs a winner"
grep -q '"target": "spirv", "arch": "opencl1.2"' "$work/spirv.lock" && ok || bad "entries are not the SPIR-V target's"
[ -f "$work/spirv.md" ] && [ "$(ls "$work"/spirv-*.svg | wc -l)" = 4 ] && ok || bad "no report (spirv.md and 4 plots)"
! grep -q skipped "$work/t.log" && ok || bad "a variant was skipped on the OpenCL device"
# the README's last two steps: the tuned bundle, and which kernel it picks for a tuned shape
"$dsv4c" "$bench/spirv_sweep.lua" -I "$specs" --lock "$work/spirv.lock" -o "$work/tuned" 2>"$work/tuned.log" && ok ||
  bad "dsv4c --lock: $(cat "$work/tuned.log")"
if [ -n "$check" ]; then
  win=$(grep -A3 '"bucket": "T=2,H=64,topk=64,extra=64,xbs=64"' "$work/spirv.lock" | grep -o '"winner": "[^"]*"' | cut -d'"' -f4)
  got=$("$check" "$work/tuned/spirv_sweep.dsv4b" opencl --choose sparse_decode=2,64,64,64,64 2>&1 | head -1)
  [ -n "$win" ] && [ "$got" = "sparse_decode=2,64,64,64,64: $win" ] && ok ||
    bad "dsv4rt-check --choose on the tuned bundle: '$got', the lockfile's winner '$win'"
fi

# nothing of the sweep runs here: one line, status 3, nothing written
"$dsv4c" "$dir/tiny_sweep.lua" -I "$specs" -t ptx --no-ptxas -o "$work/ptx" 2>"$work/ptx.log" || { cat "$work/ptx.log"; bad "dsv4c -t ptx"; finish; }
"$tune" "$work/ptx/tiny_sweep.dsv4b" --lock "$work/none.lock" --quick --backend opencl >"$work/none.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] && ok || bad "a sweep with nothing to run here exited with $rc (want 3): $(tail -3 "$work/none.log")"
grep -q "^dsv4c-tune: nothing to tune: none of the 4 variants in .*tiny_sweep.dsv4b runs on .* (they are built for ptx sm_80); .*none.lock not written$" "$work/none.log" &&
  ok || bad "the nothing-to-tune line: $(cat "$work/none.log")"
[ "$(grep -c . "$work/none.log")" -le 2 ] && ! grep -q skipped "$work/none.log" && ok ||
  bad "more than the device line and the one line: $(wc -l <"$work/none.log") lines"
[ -z "$(ls "$work" | grep '^none')" ] || [ "$(ls "$work" | grep '^none')" = none.log ] && ok ||
  bad "files written: $(ls "$work" | grep '^none' | tr '\n' ' ')"
finish
