#!/usr/bin/env bash
# Spec files that are not plain files, and sweeps whose constraints write
# into the swept lists: cases a fixed .lua / .err pair cannot hold (a FIFO
# is made here; a plan is compared, not an error).  Usage: files.sh DSV4C SPECS OUT
set -u
dsv4c=$1 specs=$2 out=$3
pass=0 fail=0
rm -rf "$out"; mkdir -p "$out"
cd "$out" || exit 1
expect() { # expect STATUS PATTERN -- ARGS...: within 20 s (a FIFO used to block forever)
  local want=$1 pat=$2; shift 3
  local text; text=$(timeout 20 "$dsv4c" "$@" 2>&1); local rc=$?
  if [ $rc -ne "$want" ]; then echo "FAIL: dsv4c $*: exit $rc, expected $want: $text"; fail=$((fail + 1)); return; fi
  if ! grep -q -- "$pat" <<<"$text"; then echo "FAIL: dsv4c $*: output lacks '$pat': $text"; fail=$((fail + 1)); return; fi
  pass=$((pass + 1))
}
mkfifo fifo.lua || { echo "cannot make a FIFO here: skipped"; exit 77; }
echo 'local x = include "fifo.lua"' >inc_fifo.lua
expect 1 "inc_fifo.lua:1: error: include: 'fifo.lua' is a FIFO, not a regular file" -- inc_fifo.lua
expect 1 "fifo.lua: error: the spec file is a FIFO, not a regular file" -- fifo.lua
mkdir folder.lua
echo 'local x = include "folder.lua"' >inc_folder.lua
expect 1 "inc_folder.lua:1: error: include: 'folder.lua' is a folder, not a regular file" -- inc_folder.lua
expect 1 "the spec file is a folder, not a regular file" -- folder.lua
expect 1 "error: the spec file is a character device, not a regular file" -- /dev/zero

# a constraint assigning into the list it sweeps (HL[2] = 8): variant
# g__c4 is still built with tokens_per_cta 4, as its name says
cat >assign.lua <<'LUA'
local L = include "layouts.lua"
local HL = { 16, 4 }
local T = { values_per_thread = 8, tokens_per_cta = 2 }
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.bf16,
  tile = T,
  targets = { spirv = true },
  sweep = {
    tile = { tokens_per_cta = HL },
    constraints = { function(v) HL[2] = 8; HL[1] = 2; T.values_per_thread = 16; return true end },
  },
}
LUA
plan=$("$dsv4c" assign.lua -I "$specs" --emit plan 2>&1)
for want in "kernel g__c16 (assign.lua:4): op dequant_gather, layout bf16, tile values_per_thread 8 tokens_per_cta 16 " \
            "kernel g__c4 (assign.lua:4): op dequant_gather, layout bf16, tile values_per_thread 8 tokens_per_cta 4 "; do
  if grep -qF -- "$want" <<<"$plan"; then pass=$((pass + 1)); else echo "FAIL: assign.lua: the plan lacks '$want': $plan"; fail=$((fail + 1)); fi
done
# a constraint writing into a layout through an upvalue: neither the
# sweep's variants nor a kernel declared after it see the change
cat >layout_write.lua <<'LUA'
local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.bf16,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = { spirv = true },
  sweep = {
    tile = { tokens_per_cta = { 2, 4 } },
    constraints = { function(v) L.bf16.row_bytes = 2048; L.bf16.segments[1].dims[2] = 256; return true end },
  },
}
kernel { name = "after", op = "dequant_gather", layout = L.bf16, tile = { values_per_thread = 8, tokens_per_cta = 2 },
         targets = { spirv = true } }
LUA
plan=$("$dsv4c" layout_write.lua -I "$specs" --emit plan 2>&1)
for want in "layout bf16: dim 512, row_bytes 1024," "segment 1: dims [0, 512) bf16 at byte 0" "kernel after (layout_write.lua:13)"; do
  if grep -qF -- "$want" <<<"$plan"; then pass=$((pass + 1)); else echo "FAIL: layout_write.lua: the plan lacks '$want': $plan"; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
