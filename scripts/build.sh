#!/usr/bin/env bash
# Configure and build into build/ (or $DSV4C_BUILD).
set -eu
cd "$(dirname "$0")/.."
B=${DSV4C_BUILD:-build}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B" -j"$(nproc)"
