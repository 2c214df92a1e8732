#!/usr/bin/env bash
# The command line: exit statuses (0 ok, 1 spec/codegen error, 2 usage),
# --help/--version, target selection.
set -u
dsv4c=$1 specs=$2 out=$3
pass=0 fail=0
expect() { # expect STATUS PATTERN -- ARGS...
  local want=$1 pat=$2; shift 3
  local text; text=$("$dsv4c" "$@" 2>&1); local rc=$?
  if [ $rc -ne "$want" ]; then echo "FAIL: dsv4c $*: exit $rc, expected $want"; fail=$((fail + 1)); return; fi
  if ! grep -q -- "$pat" <<<"$text"; then echo "FAIL: dsv4c $*: output lacks '$pat': $text"; fail=$((fail + 1)); return; fi
  pass=$((pass + 1))
}
rm -rf "$out"; mkdir -p "$out"
expect 0 "usage: dsv4c SPEC" -- --help
expect 0 "^dsv4c [0-9]" -- --version
expect 2 "no spec file given" --
expect 2 "unknown option '--bogus'" -- --bogus "$specs/decode.lua"
expect 2 "unknown target 'cuda'" -- "$specs/decode.lua" -t cuda
expect 2 "--emit takes plan, llvm or asm" -- "$specs/decode.lua" --emit ir
expect 2 "needs an argument" -- "$specs/decode.lua" -o
expect 2 "more than one spec file" -- "$specs/decode.lua" "$specs/layouts.lua"
expect 2 "declares no kernel 'nope'" -- "$specs/decode.lua" -k nope
expect 1 "cannot open spec file" -- "$out/missing.lua"
expect 2 "max-memory takes a positive number, not '0'" -- "$specs/decode.lua" --max-memory 0
expect 2 "max-instructions takes a positive number, not '1x'" -- "$specs/decode.lua" --max-instructions 1x
expect 1 "I /nonexistent/dir: no such folder" -- "$specs/decode.lua" -I /nonexistent/dir
expect 1 "instruction budget of 100 " -- "$specs/decode.lua" --max-instructions 100
expect 1 "declares no kernel" -- "$specs/layouts.lua"
expect 0 "paged_gather_v4 \[amdgcn gfx942\]" -- "$specs/decode.lua" -t amdgcn -k paged_gather_v4 -v -o "$out/one"
files=$(cd "$out/one" && ls | tr '\n' ' ')
if [ "$files" = "decode.dsv4b paged_gather_v4.hsaco " ]; then pass=$((pass + 1)); else echo "FAIL: -t amdgcn -k wrote: $files"; fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
