#!/usr/bin/env bash
# Code generation for every target: what dsv4c writes is checked here again,
# independently of its own validators (file formats, ptxas, ELF notes,
# spirv-val), a failing validator must leave nothing behind, and the
# programmatic-dependent-launch order holds.  What the emitted text must
# hold is in expect/*.expect (expect.sh).
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
        f=$d/$k.ptx # its text: expect/ptx_$k.expect
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

# what the emitted text holds (dumps, instructions, counts): expect/*.expect,
# checked by expect.sh (its own CTest, codegen.expect)

# golden: the checked plan of specs/decode.lua
(cd "$specs" && "$dsv4c" decode.lua --emit plan) | diff -u "$golden/plan/decode.plan" - && ok || bad "--emit plan differs from golden/plan/decode.plan"

# the other archs: sm_80 (generic conversions, no fp8 cvt instruction) and gfx90a
d=$out/archs
if (cd "$here" && "$dsv4c" archs.lua -I "$specs" -o "$d") 2>"$d.log"; then ok; else bad "archs.lua: $(cat "$d.log")"; fi
[ -s "$d/dequant_gather_sm80.ptx" ] && ok || bad "sm_80 PTX not written" # its text: expect/ptx_sm80.expect
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
