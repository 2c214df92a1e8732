#!/usr/bin/env bash
# Code generation for every target: what dsv4c writes is checked here again,
# independently of its own validators, and a failing validator must leave
# nothing behind.
set -u
dsv4c=$1 specs=$2 out=$3 golden=$4 here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
rm -rf "$out" && mkdir -p "$out"

for t in ptx amdgcn spirv; do
  d=$out/$t
  if "$dsv4c" "$specs/decode.lua" -t $t -o "$d" 2>"$d.log"; then ok; else bad "$t: dsv4c failed: $(cat "$d.log")"; continue; fi
  for k in dequant_gather_v4 paged_gather_v4; do
    case $t in
      ptx)
        f=$d/$k.ptx
        grep -q "^.target sm_90a" "$f" && grep -q "^.visible .entry $k(" "$f" && ok || bad "$f: no sm_90a target or entry"
        # 16-byte loads and stores: the memory-bound gather must be vectorized
        grep -qE "ld.global.nc(.L1::no_allocate)?.v4" "$f" && grep -qE "st.global(.cs)?.v4" "$f" && ok || bad "$f: loads/stores not 16 bytes wide"
        if command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ]; then
          PATH=$PATH:/usr/local/cuda/bin ptxas -arch=sm_90a -o /dev/null "$f" && ok || bad "$f: ptxas rejects it"
        fi ;;
      amdgcn)
        f=$d/$k.hsaco
        [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && ok || bad "$f: not ELF"
        if command -v llvm-readelf-19 >/dev/null; then
          llvm-readelf-19 --notes "$f" | grep -q "amdhsa.target:.*gfx942" && ok || bad "$f: no gfx942 AMDHSA note"
          llvm-readelf-19 --dyn-symbols "$f" | grep -q " $k.kd" && ok || bad "$f: no $k.kd symbol"
        fi ;;
      spirv)
        f=$d/$k.spv
        [ "$(head -c 4 "$f" | od -An -tx4 | tr -d ' ')" = 07230203 ] && ok || bad "$f: no SPIR-V magic"
        if command -v spirv-val >/dev/null; then
          spirv-val --target-env opencl1.2 "$f" && ok || bad "$f: spirv-val rejects it"
        fi
        [ "$(head -c 4 "$d/$k.spir12.bc" | od -An -tx1 | tr -d ' ')" = 4243c0de ] && ok || bad "$k.spir12.bc: not bitcode" ;;
    esac
  done
  [ -s "$d/decode.dsv4b" ] && [ "$(head -c 8 "$d/decode.dsv4b")" = DSV4BNDL ] && ok || bad "$t: no bundle"
done

# dumps: --emit llvm / asm print each kernel, per target
for t in ptx amdgcn spirv; do
  "$dsv4c" "$specs/decode.lua" -t $t --emit llvm >"$out/$t.ll" && grep -q "define .*@dequant_gather_v4" "$out/$t.ll" && grep -q "define .*@sparse_decode_v4" "$out/$t.ll" \
    && ok || bad "--emit llvm -t $t"
done
"$dsv4c" "$specs/decode.lua" -t ptx --emit asm | grep -q ".entry paged_gather_v4" && ok || bad "--emit asm -t ptx"
"$dsv4c" "$specs/decode.lua" -t amdgcn --emit asm | grep -q "global_load_dwordx4" && ok || bad "--emit asm -t amdgcn"
"$dsv4c" "$specs/decode.lua" -t spirv --emit asm | grep -q "OpEntryPoint Kernel" && ok || bad "--emit asm -t spirv"
"$dsv4c" "$specs/decode.lua" --emit plan | grep -q "kernel dequant_gather_v4 .*threads 128" && ok || bad "--emit plan"

# golden: the checked plan of specs/decode.lua
(cd "$specs" && "$dsv4c" decode.lua --emit plan) | diff -u "$golden/plan/decode.plan" - && ok || bad "--emit plan differs from golden/plan/decode.plan"

# the decode's warpgroup form on sm_90a: the lead's q K^T over a whole tile,
# three register allotments; in CTA pairs, the halves copied between the CTAs
# with bulk copies completing on the other CTA's barrier object (no generic
# remote stores, no cluster-scope proxy fence)
"$dsv4c" "$specs/sparse_decode.lua" -t ptx --emit asm -k sparse_decode_v4_mma >"$out/wg.ptx" 2>"$out/wg.log" && ok || bad "wg: $(cat "$out/wg.log")"
grep -q "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" "$out/wg.ptx" && ok || bad "wg: no m64n64k16 q K^T"
for r in "inc.sync.aligned.u32 208" "dec.sync.aligned.u32 160" "dec.sync.aligned.u32 136"; do
  grep -q "setmaxnreg.$r;" "$out/wg.ptx" && ok || bad "wg: no setmaxnreg.$r"
done
"$dsv4c" "$specs/sparse_decode.lua" -t ptx --emit asm -k sparse_decode_v4_mma_pair >"$out/pair.ptx" 2>"$out/pair.log" && ok || bad "pair: $(cat "$out/pair.log")"
n=$(grep -c "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes" "$out/pair.ptx")
[ "$n" -eq 9 ] && ok || bad "pair: $n bulk copies to the other CTA, want 9 (8 column blocks and the validity words)"
grep -q "mbarrier.arrive.expect_tx.shared::cta.b64" "$out/pair.ptx" && ok || bad "pair: no arrive.expect_tx"
! grep -qE "st.shared::cluster|fence.proxy.async.shared::cluster" "$out/pair.ptx" && ok || bad "pair: generic remote stores or a cluster-scope proxy fence are back"

# the logits' warpgroup form on sm_90a: q K^T for both next_n rows in one
# e4m3 product, relu(S) converted in registers and weighted on the matrix
# unit (bf16, A from registers), no scalar relu-and-fma head sum
"$dsv4c" "$specs/indexer.lua" -t ptx --emit asm -k mqa_logits_v4_mma >"$out/lg.ptx" 2>"$out/lg.log" && ok || bad "lg: $(cat "$out/lg.log")"
grep -q "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" "$out/lg.ptx" && ok || bad "lg: no m64n128k32 e4m3 q K^T"
grep -qE "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 \{[^}]*\}, \{%r" "$out/lg.ptx" && ok || bad "lg: no register-A m64n8k16 head sum"
grep -q "cvt.rn.relu.bf16x2.f32" "$out/lg.ptx" && ! grep -qE "max.f32|fma.rn.f32" "$out/lg.ptx" && ok || bad "lg: scalar relu/fma head sum is back"
# K by TMA (a 3-D box onto a stage's mbarrier, the scales by one bulk copy)
# beside the cp.async path kept for block sizes TMA cannot take
grep -q "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" "$out/lg.ptx" &&
  grep -q "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" "$out/lg.ptx" &&
  grep -q "mbarrier.try_wait.parity" "$out/lg.ptx" && grep -q "cp.async.cg.shared.global" "$out/lg.ptx" && ok ||
  bad "lg: no TMA copies, or no cp.async path beside them"

# the other archs: sm_80 (generic conversions, no fp8 cvt instruction) and gfx90a
d=$out/archs
if (cd "$here" && "$dsv4c" archs.lua -I "$specs" -o "$d") 2>"$d.log"; then ok; else bad "archs.lua: $(cat "$d.log")"; fi
grep -q "^.target sm_80" "$d/dequant_gather_sm80.ptx" && ! grep -q "e4m3x2" "$d/dequant_gather_sm80.ptx" && ok \
  || bad "sm_80 PTX: wrong target or uses sm_89+ conversions"
if command -v llvm-readelf-19 >/dev/null; then
  llvm-readelf-19 --notes "$d/dequant_gather_sm80.hsaco" | grep -q "amdhsa.target:.*gfx90a" && ok || bad "gfx90a note"
fi

# programmatic dependent launch: every entry of the sparse decode's matrix
# kernels for sm_90a (the splits and the combine) waits (griddepcontrol.wait)
# before any memory instruction but its parameters' loads, since the
# bundle lets the runtime start them before the grid before them ends
for k in sparse_decode_v4_mma sparse_decode_v4_mma_pair; do
  f=$out/pdl_$k.ptx
  if "$dsv4c" "$specs/sparse_decode.lua" -t ptx --emit asm -k $k >"$f" 2>"$f.log"; then
    awk '/\.entry /{n++; w=0; next} n && !w && /griddepcontrol\.wait/{w=1; waits++; next}
         n && !w && /^[ \t]*(@%p[0-9]+ )?(ld|st|atom|red|cp|mbarrier|wgmma)\./ && !/ld\.param/{print "memory before the wait: " $0; bad=1}
         END{if (waits != 2 || n != 2) {print waits " waits in " n " entries"; bad=1}; exit bad}' "$f" >"$f.why" &&
      ok || bad "$k: $(head -3 "$f.why")"
  else bad "$k: dsv4c failed: $(cat "$f.log")"; fi
done

# a validator that fails: an error, exit 1, and no file written
d=$out/broken
DSV4C_SPIRV_HELPER=/bin/false "$dsv4c" "$specs/decode.lua" -o "$d" 2>"$d.log"
rc=$?
[ $rc -eq 1 ] && ok || bad "broken SPIR-V helper: exit $rc, expected 1"
grep -q "error: kernel 'dequant_gather_v4': the SPIR-V helper /bin/false failed" "$d.log" && ok || bad "broken helper message: $(cat "$d.log")"
[ -z "$(ls -A "$d" 2>/dev/null)" ] && ok || bad "broken helper: files were written: $(ls "$d")"

# the helper aborting (as the translator can) is a diagnostic, not a crash
cat >"$out/abort.sh" <<'EOS'
#!/bin/sh
kill -ABRT $$
EOS
chmod +x "$out/abort.sh"
DSV4C_SPIRV_HELPER=$out/abort.sh "$dsv4c" "$specs/decode.lua" -t spirv 2>"$out/abort.log"
rc=$?
[ $rc -eq 1 ] && grep -q "status 134" "$out/abort.log" && ok || bad "aborting helper: exit $rc: $(cat "$out/abort.log")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
