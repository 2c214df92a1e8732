#!/usr/bin/env bash
# Build the libFuzzer harnesses (tests/fuzz, Debian's clang) and run each:
# first every saved finding in tests/fuzz/regress (spec_* through
# fuzz_spec, bundle_* through fuzz_bundle, lock_* through fuzz_lock,
# hsaco_* through fuzz_hsaco), then a bounded run from seeds made of the
# project's own specs, bundles, lockfiles and AMDGPU code objects.  A
# finding fails the run and is left as fuzz-<harness>-crash-* (or
# -timeout-*, -oom-*) in the build folder, to become a file in
# tests/fuzz/regress.
#   DSV4C_FUZZ_SECONDS  seconds a harness (default 30)
#   DSV4C_FUZZ_BUILD    build folder (default build-fuzz)
#   DSV4C_BUILD         the main build, for its bundles (default build)
set -eu
cd "$(dirname "$0")/.."
root=$PWD
B=${DSV4C_FUZZ_BUILD:-build-fuzz}
main=${DSV4C_BUILD:-build}
secs=${DSV4C_FUZZ_SECONDS:-30}
CC=clang cmake -S tests/fuzz -B "$B" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$B" -j"$(nproc)" >/dev/null
export DSV4C_SPECS=$root/specs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
opts=(-timeout=10 -rss_limit_mb=2048 -max_len=300000 -print_final_stats=1)

# seeds: the project's specs (fuzz_spec), and bundles of one kernel and
# target each of specs/decode.lua, written by the build's dsv4c, behind
# fuzz_bundle's mode byte (odd: header made right)
mkdir -p "$work/spec" "$work/bundle" "$work/lock" "$work/hsaco"
cp specs/*.lua tests/diag/*.lua tests/codegen/*.lua tests/exec/*.lua bench/*_variants.lua "$work/spec/"
# lockfiles: a measured one (the logits run), and a small one of every gate
cp bench/tuning/h200-2026-11-26/logits.lock "$work/lock/logits.lock"
cat >"$work/lock/small.lock" <<'EOT'
{
  "format": "dsv4c-tune-lock 1",
  "entries": [
    {"kernel": "sd", "op": "sparse_decode", "target": "spirv", "arch": "opencl1.2", "device": "GPU X",
     "toolchain": "dsv4c 0.1.0, LLVM 15", "spec_hash": "ab", "bucket": "T=8,H=64,topk=64,extra=0,xbs=0",
     "shape": "T=5,H=64,topk=64,extra=0,xbs=0", "seed": 12345, "winner": "sd__h4",
     "variants": [
      {"name": "sd__h2", "gate": "pass", "median_us": 12.5000, "min_us": 12.0000, "max_us": 13.0000, "samples": 3, "code": "c1", "reason": ""},
      {"name": "sd__h4", "gate": "pass", "median_us": 9.2500, "min_us": 9.0000, "max_us": 9.5000, "samples": 3, "code": "c2", "reason": ""},
      {"name": "sd__h8", "gate": "wrong", "code": "c3", "reason": "out: 3 values \"off\"\u00e9"},
      {"name": "sd__x", "gate": "skipped", "median_us": 0, "reason": "does not run here"}]},
    {"kernel": "lg", "op": "paged_mqa_logits", "target": "ptx", "arch": "sm_90a", "device": "GPU X",
     "toolchain": "t", "spec_hash": "ab", "bucket": "B=64,next_n=2,L=4096", "seed": 1, "variants": []},
    {"kernel": "tk", "op": "topk", "target": "ptx", "arch": "sm_90a", "device": "GPU Y",
     "toolchain": "t", "spec_hash": "ab", "bucket": "n=0", "seed": 0, "variants": [
      {"name": "tk__a", "gate": "timeout", "code": "", "reason": "ran past"},
      {"name": "tk__b", "gate": "crashed", "code": "", "reason": "signal 11"}]}
  ]
}
EOT
if [ -x "$main/bin/dsv4c" ]; then
  for k in $("$main/bin/dsv4c" specs/decode.lua --emit plan | awk '/^kernel /{print $2}'); do
    for t in ptx amdgcn spirv; do
      rm -rf "$work/o"
      if "$main/bin/dsv4c" specs/decode.lua -k "$k" -t "$t" -o "$work/o" 2>/dev/null; then
        { printf '\001'; cat "$work/o/decode.dsv4b"; } >"$work/bundle/${k}_$t"
      fi
    done
  done
fi

# code objects: the test fixtures and what the main build's dsv4c wrote
for f in "$main"/tests/hsaco_*.hsaco "$main"/kernels/*.hsaco "$main"/kernels_amdgcn/*.hsaco; do
  if [ -f "$f" ]; then cp "$f" "$work/hsaco/$(basename "$(dirname "$f")")_$(basename "$f")"; fi
done

status=0
for h in spec bundle lock hsaco; do
  exe=$B/fuzz_$h
  [ -x "$exe" ] || { echo "fuzz_$h: not built"; status=1; continue; }
  regress=(tests/fuzz/regress/${h}_*)
  if [ -e "${regress[0]}" ]; then
    if "$exe" "${opts[@]}" "${regress[@]}" >"$work/$h.regress.log" 2>&1; then
      echo "fuzz_$h: ${#regress[@]} saved findings replayed clean"
    else
      echo "fuzz_$h: a saved finding fails again:"; tail -30 "$work/$h.regress.log"; status=1
    fi
  fi
  if [ -z "$(ls -A "$work/$h")" ]; then
    echo "fuzz_$h: no seeds (build the project first): skipped"; continue
  fi
  dict=(); [ -f tests/fuzz/$h.dict ] && dict=(-dict=tests/fuzz/$h.dict)
  if "$exe" "${opts[@]}" "${dict[@]}" -max_total_time="$secs" -artifact_prefix="$B/fuzz-$h-" "$work/$h" \
      >"$work/$h.log" 2>&1; then
    echo "fuzz_$h: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/$h.log" | cut -d' ' -f2) executions in ${secs} s, no finding"
  else
    echo "fuzz_$h: FINDING"; grep -E "ERROR|SUMMARY|Test unit written|deadly signal" "$work/$h.log" | head; tail -40 "$work/$h.log"
    status=1
  fi
done
exit $status
