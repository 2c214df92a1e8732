#!/usr/bin/env bash
# Run on the device machine from the repository root, after bench/gpu_pack.sh:
#   bash .gpu/gpu_run.sh
# GPU tests first (correctness), then the benchmark table.
set -u
cd .gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== dsv4rt-check (the main job's device run)"
./dsv4rt-check decode.dsv4b
echo "== exec.gather.cuda"
./test_gather decode.dsv4b golden cuda | tail -5
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck (test_gather cuda)"
  compute-sanitizer --tool memcheck --print-limit 5 ./test_gather decode.dsv4b golden cuda 2>&1 | tail -4
fi
echo "== bench_gather (specs/decode.lua)"
./bench_gather decode.dsv4b cuda
echo "== bench_gather (bench/gather_variants.lua)"
./bench_gather variants/gather_variants.dsv4b cuda | tail -22
