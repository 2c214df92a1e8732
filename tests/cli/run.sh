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
expect 0 "^dsv4c [0-9].*(commit [0-9a-f]\|(commit unknown" -- --version
expect 0 "^  LLVM 19\.[0-9.]* (PTX" -- --version
expect 0 "Lua 5\.4" -- --version
expect 0 "SPIRV-Tools v" -- --version
expect 2 "no spec file given" --
expect 2 "unknown option '--bogus'" -- --bogus "$specs/decode.lua"
expect 2 "unknown target 'cuda'" -- "$specs/decode.lua" -t cuda
expect 2 "--emit takes plan, llvm, asm or c" -- "$specs/decode.lua" --emit ir
expect 2 "needs an argument" -- "$specs/decode.lua" -o
expect 2 "more than one spec file" -- "$specs/decode.lua" "$specs/layouts.lua"
expect 2 "declares no kernel 'nope'" -- "$specs/decode.lua" -k nope
expect 1 "missing.lua: error: cannot open spec file: No such file or directory" -- "$out/missing.lua"
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
# the headline command: no -o writes into the folder named after the spec,
# in the current folder, and says so in one line; --check writes nothing
mkdir -p "$out/headline/specs" && cp "$specs"/*.lua "$out/headline/specs/"
text=$(cd "$out/headline" && "$dsv4c" specs/decode.lua -t spirv 2>&1) || { echo "FAIL: headline: $text"; fail=$((fail + 1)); }
same "headline: the line that says where" "$(grep -c '^dsv4c: wrote decode/decode.dsv4b (4 artifacts, [0-9]* bytes) and 4 .spv, 4 .spir12.bc beside it$' <<<"$text")" 1
same "headline: files" "$(cd "$out/headline/decode" && ls | tr '\n' ' ')" \
  "decode.dsv4b dequant_gather_v4.spir12.bc dequant_gather_v4.spv kv_insert_v4.spir12.bc kv_insert_v4.spv paged_gather_v4.spir12.bc paged_gather_v4.spv sparse_decode_v4.spir12.bc sparse_decode_v4.spv "
mkdir -p "$out/check"
text=$(cd "$out/check" && "$dsv4c" "$specs/decode.lua" -t spirv --check 2>&1) || { echo "FAIL: --check: $text"; fail=$((fail + 1)); }
same "--check: files written, lines printed" "$(ls "$out/check" | tr '\n' ' ')|$text" "|"
expect 2 "--check writes nothing" -- "$specs/decode.lua" --check -o "$out/x"
# a spec without extension: its folder would be the spec itself
cp "$specs/decode.lua" "$out/check/plain"
(cd "$out/check" && "$dsv4c" plain -t spirv -k dequant_gather_v4 -I "$specs" 2>/dev/null) || { echo "FAIL: spec 'plain'"; fail=$((fail + 1)); }
same "a spec without extension writes <stem>.out" "$(ls "$out/check/plain.out" | tr '\n' ' ')" \
  "dequant_gather_v4.spir12.bc dequant_gather_v4.spv plain.dsv4b "
# a failed compile makes no output folder
kspec broken.lua g
sed -i 's/values_per_thread = 8/values_per_thread = 3/' "$out/specs/broken.lua"
(cd "$out/check" && "$dsv4c" "$out/specs/broken.lua" -I "$specs" 2>/dev/null) && { echo "FAIL: broken.lua compiled"; fail=$((fail + 1)); }
same "a failed compile leaves no folder" "$(ls -d "$out/check/broken" 2>/dev/null)" ""
# --emit plan names each op's own tile fields
expect 0 "op sparse_decode, layout fp8_ds_mla_v4, tile values_per_thread 64 heads_per_cta 64 " -- "$specs/sparse_decode.lua" --emit plan
expect 0 "op paged_mqa_logits, layout indexer_fp8, tile heads_per_thread 64 tokens_per_cta 128 matrix 0$" -- "$specs/indexer.lua" --emit plan
expect 0 "op topk, layout (none), tile threads 512$" -- "$specs/indexer.lua" --emit plan
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
