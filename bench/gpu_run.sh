#!/usr/bin/env bash
# Run on the device machine from the repository root, after bench/gpu_pack.sh:
#   bash .gpu/gpu_run.sh [tests|bench|sanitize [TOOL...]|decode [KERNELS [SHAPE]]|indexer [SHAPES]|python|serving [pro|flash]|tp [TOKENS]|step [TOKENS]|topk [--quick]|tune decode|logits [OPTS]|all]
# GPU tests first (correctness), then the benchmark tables; sanitize runs
# every GPU test program under compute-sanitizer's memcheck, racecheck and
# synccheck (each run bounded by DSV4_SANITIZE_TIMEOUT seconds, default 400).
set -u
what=${1:-all}
cd "$(dirname "$0")" || exit 1 # the packed folder (.gpu, or wherever it was carried)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
mm_rate() { # a bf16 8192^3 matrix product's TFLOP/s, this run, this card
  python3 -c "
import torch
a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16);b=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16)
for _ in range(3): a@b
torch.cuda.synchronize();e0=torch.cuda.Event(enable_timing=True);e1=torch.cuda.Event(enable_timing=True)
e0.record()
for _ in range(20): a@b
e1.record();torch.cuda.synchronize();print('%.0f'%(2*8192**3*20/(e0.elapsed_time(e1)*1e-3)/1e12))
" 2>/dev/null | tail -1
}
if [ "$what" = decode ]; then
  # issue 26: FlashMLA (built here, under /tmp) and our decode at the same shapes, same card, same command
  bash peers/flashmla/build.sh "$PWD/peers/flashmla" || exit 1
  mm=$(mm_rate)
  echo "== bf16 matrix product 8192^3: $mm TFLOP/s"
  echo "== FlashMLA 9241ae3 (its own inputs, timing and check)"
  python3 peer_flashmla.py /tmp/FlashMLA "${3:-}" 2>&1 | grep -v -E "Warning|return func|_warn_once"
  # one draw for both bench_decode runs below (fresh each command): the C128 shape's drawn lengths, so that the
  # shipped and the tuned kernels' rows do the same work
  export DSV4_SEED=${DSV4_SEED:-$(date +%s%N)}
  echo "== bench_decode (DSV4_SEED=$DSV4_SEED)"
  DSV4_BENCH_SHAPE=${3:-} DSV4_BENCH_MM_TFLOPS=$mm ./bench_decode sparse_decode.dsv4b cuda ${2:-}
  rc=$?
  if [ -f tuned/decode_sweep.dsv4b ]; then # issue 27: the tuned bundle's choice (dsv4c --lock), same run
    echo "== bench_decode, the tuned bundle (dsv4c bench/decode_sweep.lua --lock decode.lock)"
    DSV4_BENCH_SHAPE=${3:-} DSV4_BENCH_MM_TFLOPS=$mm ./bench_decode tuned/decode_sweep.dsv4b cuda "" | grep -v "^device\|^ceilings"
  fi
  # the peer again, after ours: the card's drift over the command (a speed ratio takes its faster run)
  echo "== FlashMLA again, after"
  python3 peer_flashmla.py /tmp/FlashMLA "${3:-}" 2>&1 | grep -v -E "Warning|return func|_warn_once"
  echo "== bf16 matrix product again, after: $(mm_rate) TFLOP/s"
  exit $rc
fi
if [ "$what" = indexer ]; then
  # issue 41: DeepGEMM's fp8_paged_mqa_logits (54e2261, built here under /tmp) and our logits at the same shapes,
  # lengths drawn the same two ways, same card, same command; each checked by DeepGEMM's calc_diff rule, each as
  # % of the copy its process measured.  SHAPES: "matrix" (the default: B 1, 8, 32, 128 x 8K, 32K, 128K, and 1M
  # at B 1) or "B:CTX,...".
  shapes=${2:-matrix}
  out=${OUT:-/tmp/indexer-out}; mkdir -p "$out"
  # Build the peer's host extension with the system's g++ (the shared libstdc++).  This image's Python names
  # /opt/gcc/bin/g++ as its compiler, a wrapper that links -Bsymbolic and left libstdc++ code inside
  # deep_gemm/_C*.so; its std::regex (the JIT's include parser) then took a locale facet from the process's
  # shared libstdc++ by the extension's own facet id and called a wrong virtual (codecvt::do_unshift): the
  # segfault in get_paged_mqa_logits_metadata (docs/perf-log.md, "The indexer against DeepGEMM").
  gxx=$(command -v /usr/bin/g++ || command -v g++)
  CC=$gxx CXX=$gxx LDSHARED="$gxx -shared" bash peers/deepgemm/build.sh "$PWD/peers/deepgemm" || exit 1
  so=$(ls /tmp/DeepGEMM/deep_gemm/_C*.so | head -1)
  echo "peer extension: $(grep -m1 -o '^[^ ]*g++' /tmp/deepgemm_build.log || echo '?'); libstdc++ definitions inside:" \
       "$(nm -C --defined-only "$so" 2>/dev/null | grep -c 'std::codecvt<char16_t')" "(0: none)"
  export DG_JIT_CACHE_DIR=/tmp/deepgemm_jit_cache PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  # DeepGEMM's JIT compiles the metadata kernel (one per 32 or 128 batch rows) and the logits kernel (one per
  # next_n) at their first calls: compile them now, two processes at a time
  python3 peer_deepgemm.py --shapes 1:4096 --next-n 1 --lens equal --no-check --no-kineto >/tmp/dgwarm1.txt 2>&1 &
  python3 peer_deepgemm.py --shapes 128:1024 --next-n 2 --lens equal --no-check --no-kineto >/tmp/dgwarm2.txt 2>&1
  wait; tail -n 2 /tmp/dgwarm1.txt /tmp/dgwarm2.txt
  echo "== DeepGEMM 54e2261 fp8_paged_mqa_logits (its test's inputs, reference and calc_diff rule), and dsv4c's"
  echo "   mqa_logits_v4_mma on the same tensors through the Python package (OURS lines)"
  # each stage bounded (DSV4_INDEXER_STAGE_S seconds, default 200), so that what was measured comes back in one call
  ts=${DSV4_INDEXER_STAGE_S:-200}
  LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/python \
    timeout "$ts" python3 peer_deepgemm.py --shapes "$shapes" --ours indexer.dsv4b 2>&1 | grep -v -E "Warning|warn\(" | tee "$out/deepgemm_before.txt"
  echo "== bench_indexer (mqa_logits_v4_mma, topk_512, and the fused logits_topk by the runtime's rule)"
  DSV4_BENCH_FUSED=rule DSV4_BENCH_SHAPES=$shapes DSV4_BENCH_LENS=test,equal timeout "$ts" ./bench_indexer indexer.dsv4b cuda mqa_logits_v4_mma \
    | tee "$out/bench_indexer.txt"
  rc=${PIPESTATUS[0]}
  echo "== DeepGEMM again, after (time only)"
  timeout $((ts / 2)) python3 peer_deepgemm.py --shapes "$shapes" --no-check --no-kineto 2>&1 | grep -v -E "Warning|warn\(" \
    | tee "$out/deepgemm_after.txt"
  echo "== the two, side by side"
  python3 indexer_compare.py "$out/deepgemm_before.txt" "$out/bench_indexer.txt" "$out/deepgemm_after.txt" \
    | tee "$out/indexer_compare.md"
  exit $rc
fi
if [ "$what" = serving ]; then
  # issue 39: FlashMLA's op and dsv4c's drop-in on FlashMLA's own strided tensors, called the same way (its
  # lib.run_flash_mla_decode), same process: host time a call, CUDA-graph replay time, kineto kernel time
  bash peers/flashmla/build.sh "$PWD/peers/flashmla" >/tmp/flashmla_build.log 2>&1 || { tail -5 /tmp/flashmla_build.log; exit 1; }
  LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD/python DSV4C_BUNDLES=$PWD/decode.dsv4b \
    python3 peer_flashmla_graph.py /tmp/FlashMLA ${2:+--shapes $2} 2>&1 | grep -v -E "Warning|return func|_warn_once"
  exit "${PIPESTATUS[0]}"
fi
if [ "$what" = tp ]; then
  # issue 40: FlashMLA with its heads padded to 64 (as engines run it) beside dsv4c at 8 and 16 heads, on
  # FlashMLA's own test tensors, both timed by its kineto timer, same process
  bash peers/flashmla/build.sh "$PWD/peers/flashmla" >/tmp/flashmla_build.log 2>&1 || { tail -5 /tmp/flashmla_build.log; exit 1; }
  LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD/python DSV4C_BUNDLES=$PWD/decode.dsv4b \
    python3 peer_flashmla_tp.py /tmp/FlashMLA ${2:+--tokens $2} 2>&1 | grep -v -E "Warning|return func|_warn_once"
  exit "${PIPESTATUS[0]}"
fi
if [ "$what" = step ]; then
  # issue 39 item 5: one V4 attention decode step in a CUDA graph, dsv4c's against FlashMLA + DeepGEMM + torch
  bash peers/flashmla/build.sh "$PWD/peers/flashmla" >/tmp/flashmla_build.log 2>&1 || { tail -5 /tmp/flashmla_build.log; exit 1; }
  gxx=$(command -v /usr/bin/g++ || command -v g++) # the system g++: see the indexer mode above
  CC=$gxx CXX=$gxx LDSHARED="$gxx -shared" bash peers/deepgemm/build.sh "$PWD/peers/deepgemm" >/tmp/dg_build.log 2>&1 ||
    { tail -5 /tmp/dg_build.log; exit 1; }
  export DG_JIT_CACHE_DIR=/tmp/deepgemm_jit_cache CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PYTHONUNBUFFERED=1
  LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD/python:/tmp/FlashMLA:/tmp/DeepGEMM \
    python3 decode_step_graph.py . ${2:+--tokens $2} 2>&1 | grep -v -E "Warning|return func|_warn_once"
  exit "${PIPESTATUS[0]}"
fi
if [ "$what" = python ]; then
  # issue 28: the Python package on torch CUDA tensors, and its host overhead beside the C call
  export LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD/python
  echo "== tests/python/test_torch.py"
  python3 test_torch.py . 2>&1 | grep -v Warning | tail -${DSV4_TAIL:-25}
  echo "== python/examples/decode_step.py (a whole V4 decode step in one CUDA graph)"
  python3 decode_step.py . 2>&1 | grep -v Warning | tail -3
  echo "== bench/bench_python_overhead.py"
  python3 bench_python_overhead.py . --iters ${DSV4_PY_ITERS:-3000}
  exit 0
fi
if [ "$what" = topk ]; then
  # issue 41 item 4: the top-k on its own beside torch.topk, same tensors, same process
  LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD/python python3 topk_torch.py . ${2:-} 2>&1 | grep -v Warning
  exit "${PIPESTATUS[0]}"
fi
if [ "$what" = tune ]; then
  # issue 27: dsv4c-tune over a sweep at its shapes.  The lockfile and the report come back in $OUT
  # (<sweep>.lock, <sweep>.md), the plots and the log in one archive (a call brings back 8 files).
  #   gpu_run.sh tune decode|logits [--more dsv4c-tune options]; resumes from lock/<sweep>.lock if carried
  sw=${2:-decode}; shift 2
  [ -d /tmp/sweep ] || tar -C /tmp -xzf sweep.tar.gz || exit 1
  out=${OUT:-$PWD/out}; work=/tmp/tune-$sw; mkdir -p "$out" "$work"
  [ -f "lock/${sw}.lock" ] && cp "lock/${sw}.lock" "$work/${sw}.lock"
  shapes=v4; [ "$sw" = decode ] && shapes=tune_shapes_decode.txt
  # DSV4_TUNE_SECONDS: stop (SIGINT: the lockfile is written as results come in) so that what was
  # measured still comes back; carry it as .gpu/lock/<sweep>.lock and the next call resumes
  timeout -s INT "${DSV4_TUNE_SECONDS:-100000}" \
    ./dsv4c-tune /tmp/sweep/${sw}_sweep.dsv4b --lock "$work/${sw}.lock" --shapes "$shapes" "$@" >"$work/${sw}.log" 2>&1
  rc=$?
  echo "dsv4c-tune exit $rc"; grep -v -E "^dsv4c-tune: [0-9]+/[0-9]+ " "$work/${sw}.log" | tail -25
  cp "$work/${sw}.lock" "$work/${sw}.md" "$out/" 2>/dev/null
  tar -C /tmp -czf "$out/tune-${sw}.tar.gz" "tune-$sw"
  exit $rc
fi
if [ "$what" = sanitize ]; then
  progs=("test_gather decode.dsv4b golden cuda" "test_gather gather_layouts.dsv4b golden cuda"
         "test_insert insert.dsv4b gather_layouts.dsv4b golden cuda" "test_decode sparse_decode.dsv4b golden cuda"
         "test_indexer indexer.dsv4b golden cuda" "test_indexer indexer_shapes.dsv4b golden cuda"
         "test_validate . kernels_amdgcn cuda")
  shift
  tools=${*:-memcheck synccheck racecheck}
  for tool in $tools; do
    for p in "${progs[@]}"; do
      echo "== compute-sanitizer --tool $tool ./$p"
      timeout "${DSV4_SANITIZE_TIMEOUT:-400}" compute-sanitizer --tool $tool --print-limit 3 ./$p >san.log 2>&1
      echo "exit $?"; grep -E "passed|FAIL" san.log | tail -2; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" san.log | tail -3
      grep -m3 -E "^========= (Error|Race|Barrier|Invalid|Warning)" san.log
    done
  done
  exit 0
fi
if [ "$what" != bench ]; then
  echo "== dsv4rt-check (the main job's device run)"
  ./dsv4rt-check decode.dsv4b | tail -3
  for b in decode gather_layouts; do
    echo "== test_gather $b.dsv4b cuda"
    ./test_gather $b.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  done
  echo "== test_decode cuda"
  ./test_decode sparse_decode.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  echo "== test_indexer cuda"
  ./test_indexer indexer.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  echo "== test_indexer cuda (other shapes)"
  ./test_indexer indexer_shapes.dsv4b golden cuda | grep -E "FAIL|passed"
  echo "== test_insert cuda"
  ./test_insert insert.dsv4b gather_layouts.dsv4b golden cuda | grep -E "FAIL|golden|passed"
  echo "== test_validate cuda (every bad launch refused, nothing written)"
  ./test_validate . kernels_amdgcn cuda | grep -E "FAIL|passed"
  echo "== test_faults (missing or old drivers, failed allocations and loads)"
  ./test_faults decode.dsv4b "$PWD/libfake_libcuda.so" | grep -E "FAIL|skipped|passed"
  if command -v compute-sanitizer >/dev/null && [ "${DSV4_MEMCHECK:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck"
    compute-sanitizer --tool memcheck --print-limit 5 ./test_gather decode.dsv4b golden cuda 2>&1 | tail -2
    compute-sanitizer --tool memcheck --print-limit 5 ./test_insert insert.dsv4b gather_layouts.dsv4b golden cuda 2>&1 | tail -2
    compute-sanitizer --tool memcheck --print-limit 5 ./test_decode sparse_decode.dsv4b golden cuda 2>&1 | tail -2
    compute-sanitizer --tool memcheck --print-limit 5 ./test_indexer indexer.dsv4b golden cuda 2>&1 | tail -2
    compute-sanitizer --tool memcheck --print-limit 5 ./test_indexer indexer_shapes.dsv4b golden cuda 2>&1 | tail -2
  fi
fi
if [ "$what" != tests ]; then
  echo "== bench_gather (specs/decode.lua)"
  ./bench_gather decode.dsv4b cuda | tail -6
  echo "== bench_insert (specs/insert.lua)"
  ./bench_insert insert.dsv4b cuda | tail -8
  echo "== bench_decode (specs/sparse_decode.lua) and a bf16 matrix product in the same run"
  echo "bf16 matmul 8192^3: $(mm_rate) TFLOP/s"
  ./bench_decode sparse_decode.dsv4b cuda | grep -v "^device"
  echo "== bench_indexer (specs/indexer.lua)"
  ./bench_indexer indexer.dsv4b cuda | grep -v "^device"
fi
