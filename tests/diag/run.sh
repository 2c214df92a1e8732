#!/usr/bin/env bash
# Diagnostics tests: each NAME.lua here must make dsv4c exit 1 and print
# exactly NAME.err on stderr (cproc-style expected files, diffed).
set -u
dsv4c=$1 dir=$2
cd "$dir" || exit 1
pass=0 fail=0
for spec in *.lua; do
  name=${spec%.lua}
  out=$("$dsv4c" "$spec" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $spec: exit status $rc, expected 1"; fail=$((fail + 1)); continue
  fi
  if ! diff -u "$name.err" <(printf '%s\n' "$out"); then
    echo "FAIL $spec: diagnostics differ from $name.err"; fail=$((fail + 1)); continue
  fi
  pass=$((pass + 1))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
