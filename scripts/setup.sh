#!/usr/bin/env bash
# The first command: install what is missing, build, and run the main job:
# compile specs/decode.lua for every target and run the kernels on the best
# device present (a CUDA GPU, else the CPU through OpenCL/PoCL), checked
# against the C reference.
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
B=${DSV4C_BUILD:-build}
echo
echo "== dsv4c specs/decode.lua -o $B/kernels   (ptx, amdgcn, spirv)"
"$B"/bin/dsv4c specs/decode.lua -o "$B"/kernels -v
echo
echo "== dsv4rt-check $B/kernels/decode.dsv4b   (best device present)"
"$B"/bin/dsv4rt-check "$B"/kernels/decode.dsv4b
