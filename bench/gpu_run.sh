#!/usr/bin/env bash
# Run on the device machine from the repository root, after bench/gpu_pack.sh:
#   bash .gpu/gpu_run.sh [tests|bench|all]
# GPU tests first (correctness), then the benchmark tables.
set -u
what=${1:-all}
cd .gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "$what" != bench ]; then
  echo "== dsv4rt-check (the main job's device run)"
  ./dsv4rt-check decode.dsv4b | tail -3
  for b in decode gather_layouts; do
    echo "== test_gather $b.dsv4b cuda"
    ./test_gather $b.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  done
  echo "== test_insert cuda"
  ./test_insert insert.dsv4b gather_layouts.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck"
    compute-sanitizer --tool memcheck --print-limit 5 ./test_gather decode.dsv4b golden cuda 2>&1 | tail -2
    compute-sanitizer --tool memcheck --print-limit 5 ./test_insert insert.dsv4b gather_layouts.dsv4b golden cuda 2>&1 | tail -2
  fi
fi
if [ "$what" != tests ]; then
  echo "== bench_gather (specs/decode.lua)"
  ./bench_gather decode.dsv4b cuda | tail -6
  echo "== bench_insert (specs/insert.lua)"
  ./bench_insert insert.dsv4b cuda | tail -8
fi
