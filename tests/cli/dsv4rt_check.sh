#!/usr/bin/env bash
# dsv4rt-check: runs a bundle's kernels against the reference (the main
# job), answers --choose, and refuses bad usage with status 2.
#   usage: dsv4rt_check.sh DSV4RT_CHECK BUNDLE    (77: no device)
set -u
chk=$1 bundle=$2
fail=0
out=$("$chk" "$bundle" 2>&1); rc=$?
if grep -q "NO_BACKEND\|no OpenCL\|no CUDA" <<<"$out" && [ $rc -ne 0 ]; then echo "skipped: $out"; exit 77; fi
[ $rc -eq 0 ] && grep -q "all match the reference" <<<"$out" || { echo "FAIL: run: $out"; fail=1; }
out=$("$chk" "$bundle" --choose sparse_decode=8,64,128,512,64 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^sparse_decode=8,64,128,512,64: no tuning entry .* the runtime's default rule chooses" <<<"$out" ||
  { echo "FAIL: --choose on an untuned bundle (exit $rc): $out"; fail=1; }
for bad in "--choose x" "--choose sparse_decode=8,a" "--bogus" ""; do
  # shellcheck disable=SC2086 # words
  out=$("$chk" $( [ -n "$bad" ] && echo "$bundle") $bad 2>&1); rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: dsv4rt-check $bad: exit $rc, expected 2: $out"; fail=1; }
done
out=$("$chk" /nonexistent.dsv4b 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent" <<<"$out" || { echo "FAIL: a missing bundle (exit $rc): $out"; fail=1; }
[ $fail -eq 0 ] && echo "dsv4rt-check: run, --choose and usage as expected"
exit $fail
