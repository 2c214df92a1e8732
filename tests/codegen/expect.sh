#!/usr/bin/env bash
# Codegen expectations: each expect/NAME.expect names a dsv4c command and
# what its output (the emitted PTX / AMDGCN / SPIR-V text, IR or plan) must
# and must not hold.  One directive a line:
#   dsv4c: ARGS        the command, run from the repository root ($SPECS: specs/)
#   find: TEXT         TEXT occurs (fixed string)
#   find-re: ERE       a line matches the extended regular expression
#   absent: TEXT       TEXT occurs nowhere
#   absent-re: ERE     no line matches
#   count N: TEXT      TEXT occurs on exactly N lines
# and '#' comments.  A failed directive prints as NAME.expect:LINE: what
# failed, so the expectation reads like a diff against the output.
#   usage: expect.sh DSV4C ROOT OUT
set -u
dsv4c=$1 root=$2 out=$3
cd "$root" || exit 1
mkdir -p "$out"
pass=0 fail=0
for f in tests/codegen/expect/*.expect; do
  name=$(basename "$f" .expect)
  args=$(sed -n 's/^dsv4c: //p' "$f" | head -1)
  if [ -z "$args" ]; then echo "$f: no 'dsv4c:' line"; fail=$((fail + 1)); continue; fi
  # shellcheck disable=SC2086 # ARGS are words by design
  if ! "$dsv4c" ${args//\$SPECS/specs} >"$out/$name.out" 2>"$out/$name.log"; then
    echo "$f: dsv4c $args failed: $(head -3 "$out/$name.log")"; fail=$((fail + 1)); continue
  fi
  n=0 bad=0
  while IFS= read -r line; do
    n=$((n + 1))
    case $line in
      "find: "*) grep -qF -- "${line#find: }" "$out/$name.out" ;;
      "find-re: "*) grep -qE -- "${line#find-re: }" "$out/$name.out" ;;
      "absent: "*) ! grep -qF -- "${line#absent: }" "$out/$name.out" ;;
      "absent-re: "*) ! grep -qE -- "${line#absent-re: }" "$out/$name.out" ;;
      "count "*)
        want=${line#count }; want=${want%%:*}; text=${line#count *: }
        got=$(grep -cF -- "$text" "$out/$name.out")
        [ "$got" -eq "$want" ] || { echo "$f:$n: $line (found on $got lines)"; bad=1; continue; } ;;
      "dsv4c: "* | "#"* | "") continue ;;
      *) echo "$f:$n: unknown directive: $line"; false ;;
    esac || { echo "$f:$n: $line"; bad=1; }
  done <"$f"
  if [ $bad -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$pass expectation files met, $fail not"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
