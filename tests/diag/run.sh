#!/usr/bin/env bash
# Diagnostics tests: each NAME.lua here must make dsv4c exit 1, print
# exactly NAME.err on stderr (cproc-style expected files, diffed) and write
# nothing.  NAME.args, where present, holds extra arguments (limits).  The
# layout library is found through -I SPECS.
set -u
dsv4c=$1 dir=$2 specs=$3
cd "$dir" || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pass=0 fail=0
for spec in *.lua; do
  name=${spec%.lua}
  [ -f "$name.err" ] || continue # an included helper, not a test
  args=()
  [ -f "$name.args" ] && read -r -a args <"$name.args"
  rm -rf "$out/o"
  text=$("$dsv4c" "$spec" -I "$specs" -o "$out/o" "${args[@]}" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $spec: exit status $rc, expected 1"; fail=$((fail + 1)); continue
  fi
  if ! diff -u "$name.err" <(printf '%s\n' "$text"); then
    echo "FAIL $spec: diagnostics differ from $name.err"; fail=$((fail + 1)); continue
  fi
  if [ -n "$(ls -A "$out/o" 2>/dev/null)" ]; then
    echo "FAIL $spec: wrote $(ls "$out/o")"; fail=$((fail + 1)); continue
  fi
  pass=$((pass + 1))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
