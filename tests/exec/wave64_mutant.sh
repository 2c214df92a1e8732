#!/usr/bin/env bash
# The wave-64 exec tests see a wrong cross-lane reduction: wave64.lua built
# by dsv4c-spirv-mutant (every sub-group shuffle's mask with bit 0 flipped,
# compiler/CMakeLists.txt) must fail test_decode, test_insert and
# test_indexer with wrong values, while the same tests pass on the real
# build (exec.*.wave64.opencl).  Each must run its kernels (some checks
# pass), fail some (N failed, N > 0) and name wrong values in a FAIL line;
# and the mutant's SPIR-V must differ from the real one's only where it
# should: the same kernels, other shuffle masks.
#   usage: wave64_mutant.sh DSV4C MUTANT_HELPER SPEC SPECS REAL_BUNDLE_DIR TEST_BIN_DIR GOLDEN OUT
set -u
dsv4c=$1 mutant=$2 spec=$3 specs=$4 real=$5 bin=$6 golden=$7 out=$8
rm -rf "$out"; mkdir -p "$out"
if ! DSV4C_SPIRV_HELPER=$mutant "$dsv4c" "$spec" -I "$specs" -o "$out" >"$out/dsv4c.log" 2>&1; then
  echo "FAIL: the mutant build: $(cat "$out/dsv4c.log")"; exit 1
fi
b=$out/wave64.dsv4b
pass=0 fail=0
# the mutation shows in the code: the decode's shuffles take masks 17 9 5 3 0, not 16 8 4 2 1
masks() { spirv-dis "$1" 2>/dev/null | awk '/OpGroupNonUniformShuffleXor/ {print $NF}' | sort -u | tr '\n' ' '; }
if command -v spirv-dis >/dev/null; then
  m=$(masks "$out/sparse_decode_v4.spv") r=$(masks "$real/sparse_decode_v4.spv")
  if [ "$m" = "%uint_0 %uint_17 %uint_3 %uint_5 %uint_9 " ] && [ "$r" = "%uint_1 %uint_16 %uint_2 %uint_4 %uint_8 " ]; then
    pass=$((pass + 1))
  else
    echo "FAIL: shuffle masks: mutant '$m', real '$r'"; fail=$((fail + 1))
  fi
else
  echo "spirv-dis not found: the shuffle masks are not compared (the runs below still are)"
fi
run() { # NAME ARGS...: the test must run, then fail on values
  local name=$1; shift
  "$bin/$name" "$@" >"$out/$name.log" 2>&1
  local rc=$? last
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/$name.log" | tail -1)
  if [ $rc -eq 77 ]; then echo "$name: no OpenCL device: skipped"; exit 77; fi
  if [ $rc -eq 1 ] && [[ $last =~ ^([1-9][0-9]*)\ passed,\ ([1-9][0-9]*)\ failed ]] &&
     grep -E '^FAIL .*(differ|outside|calc_diff)' "$out/$name.log" >/dev/null; then
    echo "$name on the mutant: $last, e.g. $(grep -m1 '^FAIL' "$out/$name.log" | cut -c1-200)"
    pass=$((pass + 1))
  else
    echo "FAIL: $name on the mutant: exit $rc, '$last' (expected exit 1, checks run, some failed on values)"
    tail -5 "$out/$name.log"; fail=$((fail + 1))
  fi
}
run test_decode "$b" "$golden" opencl
run test_insert "$b" "$b" "$golden" opencl
run test_indexer "$b" "$golden" opencl
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
