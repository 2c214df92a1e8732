#!/usr/bin/env bash
# Spec files that are not plain files: cases a fixed .lua / .err pair
# cannot hold (a FIFO is made here).  Usage: files.sh DSV4C SPECS OUT
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

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
