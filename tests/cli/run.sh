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
expect 2 "--emit takes plan, llvm, asm or c" -- "$specs/decode.lua" --emit ir
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
# --emit c: the bundle as C beside what -o writes; names checked before anything is written
same() { # same WHAT GOT WANT
  if [ "$2" = "$3" ]; then pass=$((pass + 1)); else echo "FAIL: $1: got '$2', expected '$3'"; fail=$((fail + 1)); fi
}
expect 0 "wrote .*/decode_kernels.c" -- "$specs/decode.lua" -t amdgcn -k paged_gather_v4 --emit c -v -o "$out/c1"
same "--emit c -t amdgcn -k wrote" "$(cd "$out/c1" && ls | tr '\n' ' ')" \
  "decode.dsv4b decode_kernels.c decode_kernels.h paged_gather_v4.hsaco "
same "--emit c -k: the header's kernels" "$(grep -o '^#define DECODE_KERNEL_[A-Z0-9_]*' "$out/c1/decode_kernels.h" | tr '\n' ' ')" \
  "#define DECODE_KERNEL_PAGED_GATHER_V4 "
mkdir -p "$out/cwd"
(cd "$out/cwd" && "$dsv4c" "$specs/decode.lua" -t amdgcn -k dequant_gather_v4 --emit c) ||
  { echo "FAIL: --emit c without -o"; fail=$((fail + 1)); }
same "--emit c without -o (the current folder)" "$(cd "$out/cwd" && ls | tr '\n' ' ')" \
  "decode.dsv4b decode_kernels.c decode_kernels.h dequant_gather_v4.hsaco "
kspec() { # kspec FILE NAME...: a spec of one gather kernel per NAME, in $out/specs
  mkdir -p "$out/specs"
  { echo 'local L = include "layouts.lua"'
    for k in "${@:2}"; do
      echo "kernel { name = \"$k\", op = \"dequant_gather\", layout = L.bf16,"
      echo "  tile = { values_per_thread = 8, tokens_per_cta = 2 }, targets = { amdgcn = true } }"
    done; } >"$out/specs/$1"
}
kspec my-spec.v2.lua g
expect 0 "" -- "$out/specs/my-spec.v2.lua" -I "$specs" --emit c -o "$out/c2"
same "--emit c: a stem made an identifier" "$(cd "$out/c2" && ls *_kernels.* | tr '\n' ' ')" \
  "my_spec_v2_kernels.c my_spec_v2_kernels.h "
kspec 2fast.lua g
expect 1 "does not begin with a letter" -- "$out/specs/2fast.lua" -I "$specs" --emit c -o "$out/c3"
kspec dsv4rt_mine.lua g
expect 1 "belongs to the runtime's headers" -- "$out/specs/dsv4rt_mine.lua" -I "$specs" --emit c -o "$out/c3"
kspec clash.lua g kernels_open
expect 1 "clash.lua:4: error: --emit c: kernel 'kernels_open' gives the C name clash_kernels_open" -- \
  "$out/specs/clash.lua" -I "$specs" --emit c -o "$out/c3"
kspec case.lua fast FAST
expect 1 "kernel 'FAST' gives the C name CASE_KERNEL_FAST, which kernel 'fast' (.*case.lua:2) gives too" -- \
  "$out/specs/case.lua" -I "$specs" --emit c -o "$out/c3"
same "--emit c refused: files written" "$(ls "$out/c3" | tr '\n' ' ')" ""
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
