#!/usr/bin/env bash
# The second command: the whole test suite (CTest).  Installs and builds
# first when needed, so it also works on a fresh clone.  Tests that need a
# device this machine lacks (CUDA) report "Skipped", never "Passed".
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
B=${DSV4C_BUILD:-build}
cd "$B"
ctest --output-on-failure -j"$(nproc)" "$@"
