#!/usr/bin/env bash
# Pack what a GPU run needs into .gpu/ (ignored by git, carried to the
# device machine, which has no LLVM, Lua or SPIRV-Tools): the test and
# benchmark programs built here (statically linked to the runtime), the
# bundles, and the golden fixtures.
set -eu
build=${1:-build}
shared=${2:-../shared}
rm -rf .gpu && mkdir -p .gpu/golden
cp "$build"/tests/test_gather "$build"/tests/test_insert "$build"/tests/test_decode "$build"/tests/test_indexer \
   "$build"/bench/bench_gather "$build"/bench/bench_insert "$build"/bench/bench_decode "$build"/bench/bench_indexer \
   "$build"/tests/test_validate "$build"/tests/test_faults "$build"/tests/libfake_libcuda.so "$build"/bin/dsv4rt-check .gpu/
cp "$build"/kernels/decode.dsv4b "$build"/kernels/gather_layouts.dsv4b "$build"/kernels/insert.dsv4b \
   "$build"/kernels/sparse_decode.dsv4b "$build"/kernels/indexer.dsv4b "$build"/kernels/indexer_shapes.dsv4b .gpu/
cp -r "$build"/kernels_amdgcn .gpu/
"$build"/bin/dsv4c bench/gather_variants.lua -I specs -t ptx -o .gpu/variants
"$build"/bin/dsv4c bench/logits_variants.lua -I specs -t ptx -o .gpu/variants
for g in v4_dequant_gather v4_paged_gather v4_quant v32_quant v4_sparse_decode_c128_h64 v4_sparse_decode_c4_h128 \
         v4_sparse_decode_c4_h64 v4_sparse_decode_swa_only_h64 indexer_logits_n1 indexer_logits_n2 \
         fm_sparse_decode_c128_h128 fm_sparse_decode_c4_h128 fm_sparse_decode_c4_h64 fm_sparse_decode_odd_blocks_h64 \
         fm_sparse_decode_swa_only_h128; do cp -r "$shared/golden/$g" .gpu/golden/; done
cp bench/gpu_run.sh bench/peer_flashmla.py bench/peer_deepgemm.py bench/indexer_compare.py .gpu/
# the tuner and the sweeps it measures (gzip: the decode sweep's PTX is 43 MB; gpu_run.sh tune unpacks it)
cp "$build"/bin/dsv4c-tune bench/tune_shapes_decode.txt .gpu/
if [ "${DSV4_PACK_SWEEPS:-1}" = 1 ]; then
  tmp=$(mktemp -d) && mkdir "$tmp/sweep"
  for s in decode_sweep logits_sweep; do "$build"/bin/dsv4c bench/$s.lua -I specs -t ptx -o "$tmp/sweep" --no-ptxas >/dev/null; done
  tar -C "$tmp" -czf .gpu/sweep.tar.gz sweep/decode_sweep.dsv4b sweep/decode_sweep.sweep.json \
    sweep/logits_sweep.dsv4b sweep/logits_sweep.sweep.json && rm -rf "$tmp"
fi
# the Python package (and the shared runtime it links), its torch tests, the overhead benchmark
if [ -f "$build"/python/dsv4c/_dsv4c.abi3.so ]; then # (built where Python's development files were found)
  mkdir -p .gpu/python/dsv4c .gpu/lib
  cp python/dsv4c/*.py "$build"/python/dsv4c/_dsv4c.abi3.so .gpu/python/dsv4c/
  cp -P "$build"/runtime/libdsv4rt.so* .gpu/lib/
  cp tests/python/test_torch.py tests/python/flashmla_matrix.py bench/bench_python_overhead.py bench/peer_flashmla_graph.py bench/peer_flashmla_tp.py bench/decode_step_graph.py bench/graph_timing.py bench/topk_torch.py \
    python/examples/decode_step.py .gpu/
fi
# the peers, built and timed on the device in the same command as ours (gpu_run.sh decode: FlashMLA;
# gpu_run.sh indexer: DeepGEMM)
for p in flashmla deepgemm; do
  if [ -d "$shared/peers/$p" ]; then mkdir -p .gpu/peers && cp -r "$shared/peers/$p" .gpu/peers/ && chmod -R u+w .gpu/peers/$p; fi
done
d=$(git rev-parse --git-common-dir); mkdir -p "$d/info"; grep -qx "/.gpu/" "$d/info/exclude" 2>/dev/null || echo "/.gpu/" >> "$d/info/exclude"
du -sh .gpu
