#!/usr/bin/env bash
# The second command: the whole test suite (CTest), twice.  Installs and
# builds first when needed, so it also works on a fresh clone.  Tests that
# need a device this machine lacks (CUDA) report "Skipped", never "Passed".
#
#   1. the normal build ($DSV4C_BUILD, default build/): ctest as always;
#   2. the same suite from a second build folder ($DSV4C_SANITIZE_BUILD,
#      default <first>-asan) built with -DDSV4C_SANITIZE=ON: AddressSanitizer,
#      UndefinedBehaviorSanitizer and LeakSanitizer on all of our C code, the
#      options and third-party suppressions of tests/sanitizers/ applied by
#      ctest itself.  DSV4C_SANITIZE=0 leaves this run out.
#   3. the libFuzzer harnesses of tests/fuzz (scripts/fuzz.sh): the saved
#      findings replayed, then a bounded run of each.  DSV4C_FUZZ=0 leaves
#      this out.
#   4. ThreadSanitizer: the runtime and tests/unit/test_threads.c (one
#      context per thread) alone, built with -DDSV4C_TSAN=ON in a third
#      folder ($DSV4C_TSAN_BUILD, default <first>-tsan), run on the first
#      build's decode.dsv4b; any race report fails it.  DSV4C_TSAN=0
#      leaves this out.
# Arguments go to both ctest runs; every part runs even when one fails, and
# the exit status is the first failure's.
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
B=${DSV4C_BUILD:-build}
J=$(nproc)
rc=0
(cd "$B" && ctest --output-on-failure -j"$J" "$@") || rc=$?

rc2=0
if [ "${DSV4C_SANITIZE:-1}" = 0 ]; then
  echo "test: sanitizer run left out (DSV4C_SANITIZE=0)"
else
  A=${DSV4C_SANITIZE_BUILD:-$B-asan}
  echo
  echo "test: the same suite again under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer ($A)"
  t0=$(date +%s)
  cmake -S . -B "$A" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSV4C_SANITIZE=ON >/dev/null
  cmake --build "$A" -j"$J"
  t1=$(date +%s)
  (cd "$A" && ctest --output-on-failure -j"$J" "$@") || rc2=$?
  t2=$(date +%s)
  echo "test: sanitizer run: build $((t1 - t0)) s, tests $((t2 - t1)) s ($A)"
fi

rc3=0
if [ "${DSV4C_FUZZ:-1}" = 0 ]; then
  echo "test: fuzzing left out (DSV4C_FUZZ=0)"
else
  echo
  echo "test: the libFuzzer harnesses, ${DSV4C_FUZZ_SECONDS:-30} s each (scripts/fuzz.sh)"
  DSV4C_BUILD=$B bash scripts/fuzz.sh || rc3=$?
fi
rc4=0
if [ "${DSV4C_TSAN:-1}" = 0 ]; then
  echo "test: ThreadSanitizer run left out (DSV4C_TSAN=0)"
else
  T=${DSV4C_TSAN_BUILD:-$B-tsan}
  echo
  echo "test: the threads test under ThreadSanitizer ($T: the runtime and that test only)"
  cmake -S . -B "$T" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSV4C_TSAN=ON -DDSV4C_BUILD_COMPILER=OFF >/dev/null &&
    cmake --build "$T" -j"$J" --target test_threads &&
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$T/tests/test_threads" "$B/kernels/decode.dsv4b" ||
    rc4=$?
fi
[ $rc -ne 0 ] && exit $rc
[ $rc2 -ne 0 ] && exit $rc2
[ $rc3 -ne 0 ] && exit $rc3
exit $rc4
