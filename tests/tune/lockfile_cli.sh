#!/usr/bin/env bash
# dsv4c-tune's lockfile commands without a device (ctest tune.lockfile):
#   - merge takes any number of shards (300 here; it kept the first 256 and
#     exited 0);
#   - report escapes every string a lockfile (or hostile one) gives it: no
#     tag reaches the SVG plots or the Markdown, and each SVG stays XML;
#   - a bad lockfile is refused by merge with the line of the bad field.
#   usage: lockfile_cli.sh DSV4C_TUNE WORK_DIR
set -u
tune=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

head='{"format": "dsv4c-tune-lock 1", "entries": ['
# ---- merge: 300 shards of one entry each ----
mkdir -p "$work/shards"
for i in $(seq 1 300); do
  printf '%s\n{"kernel": "k%03d", "op": "topk", "target": "ptx", "arch": "sm_90a", "device": "GPU X", "toolchain": "t", "spec_hash": "h", "bucket": "n=64", "shape": "n=64", "seed": 7, "variants": [{"name": "k%03d__a", "gate": "pass", "median_us": 1.5, "min_us": 1, "max_us": 2, "samples": 3, "code": "c", "reason": ""}]}]}\n' \
    "$head" "$i" "$i" >"$work/shards/s$i.lock"
done
"$tune" merge "$work"/shards/s*.lock -o "$work/all.lock" >"$work/merge.log" 2>&1 && ok || bad "merge of 300 shards failed: $(cat "$work/merge.log")"
n=$(grep -c '"kernel": "k' "$work/all.lock" 2>/dev/null)
[ "$n" = 300 ] && ok || bad "merge of 300 shards kept $n entries"
[ "$(grep -c '"winner": "k[0-9]*__a"' "$work/all.lock" 2>/dev/null)" = 300 ] && ok || bad "the merged entries lack their winners"

# ---- report: hostile strings escaped ----
evil='</text><script>alert(1)</script><text>'
cat >"$work/evil.lock" <<EOT
$head
{"kernel": "k<b>&", "op": "future_op", "target": "ptx\\"x", "arch": "sm_90a'x", "device": "GPU $evil",
 "toolchain": "t | [link](javascript:x) \`code\`", "spec_hash": "<i>h", "bucket": "$evil", "shape": "$evil\\u0001",
 "seed": 1, "variants": [
  {"name": "$evil", "gate": "pass", "median_us": 2, "min_us": 1, "max_us": 3, "samples": 3, "code": "c", "reason": ""},
  {"name": "b<!--", "gate": "wrong", "code": "c", "reason": "$evil\\n| a | b |"}]}]}
EOT
printf '\xff\xfe' >"$work/badutf8.txt"
"$tune" report "$work/evil.lock" >"$work/report.log" 2>&1 && ok || bad "report: $(cat "$work/report.log")"
svg=$(ls "$work"/evil-*.svg 2>/dev/null | head -1)
[ -n "$svg" ] && [ -f "$work/evil.md" ] && ok || bad "report wrote no plot or no Markdown"
if [ -n "$svg" ]; then
  ! grep -qi '<script\|<b>\|<i>\|<!--' "$svg" && grep -q '&lt;/text&gt;&lt;script&gt;' "$svg" && ok ||
    bad "a lockfile string reached the SVG as markup: $(grep -i 'script' "$svg" | head -3)"
  if command -v python3 >/dev/null; then
    python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$svg" 2>"$work/xml.log" && ok ||
      bad "the SVG is not XML: $(cat "$work/xml.log")"
  else
    echo "note: python3 absent: the SVG's XML check not run"
  fi
fi
if [ -f "$work/evil.md" ]; then
  ! grep -qi '<script\|<b>\|<i>\|<!--' "$work/evil.md" && ok || bad "a lockfile string reached the Markdown as HTML"
  ! grep -q '[^\\]\](javascript' "$work/evil.md" && grep -q '\\\[link\\\]' "$work/evil.md" && ok || bad "a link got through: $(grep -n link "$work/evil.md")"
  # the table keeps its columns: the reason's '|' escaped, its newline a space
  row=$(grep '^| - |' "$work/evil.md")
  [ "$(printf '%s' "$row" | sed 's/\\|//g' | tr -cd '|' | wc -c)" = "$(grep '^|---' "$work/evil.md" | tr -cd '|' | wc -c)" ] && ok ||
    bad "a failed variant's row has other columns than the table: $row"
fi

# ---- a bad field: merge refuses it naming the line ----
{ echo "$head"; echo '{"kernel": "k", "op": "topk", "target": "ptx", "arch": "a", "device": "d", "toolchain": "t", "spec_hash": "h", "bucket": "n=64", "variants": ['
  echo '{"name": "fast", "gate": "pass", "median_us": 5, "min_us": 5, "max_us": 5},'
  echo '{"name": "slow", "gate": "pass", "median_us": "999", "min_us": 1, "max_us": 1}]}]}'; } >"$work/typed.lock"
out=$("$tune" merge "$work/typed.lock" -o "$work/typed_out.lock" 2>&1)
[ $? -eq 1 ] && printf '%s' "$out" | grep -q "typed.lock: line 4: entry 1 variant 2: 'median_us' is a string, not a number" &&
  [ ! -e "$work/typed_out.lock" ] && ok || bad "a string median_us: $out"

# ---- an output that is not a regular file is written, not replaced (the
# atomic rename turned -o /dev/null into a regular file when run as root):
# a FIFO here, read by cat, must still be a FIFO after ----
mkfifo "$work/out.fifo" 2>/dev/null && {
  timeout 20 cat "$work/out.fifo" >"$work/fifo.out" &
  reader=$!
  timeout 20 "$tune" merge "$work/shards/s1.lock" -o "$work/out.fifo" >"$work/fifo.log" 2>&1
  rc=$?
  wait $reader
  [ $rc -eq 0 ] && [ -p "$work/out.fifo" ] && grep -q '"kernel": "k001"' "$work/fifo.out" && ok ||
    bad "merge -o FIFO (rc $rc): the FIFO $( [ -p "$work/out.fifo" ] && echo 'stayed' || echo 'was replaced'): $(cat "$work/fifo.log")"
}

# ---- what is no lockfile to read: a FIFO (opening one waited for a
# writer), /dev/zero (read for ever), a file past the 32 MiB limit ----
mkfifo "$work/fifo.lock" 2>/dev/null
for f in "$work/fifo.lock" /dev/zero; do
  [ -e "$f" ] || continue
  out=$(timeout 20 "$tune" merge "$f" -o "$work/x.lock" 2>&1)
  [ $? -eq 1 ] && printf '%s' "$out" | grep -q "$f: not a regular file" && ok || bad "$f: $out"
done
head -c $((33 << 20)) /dev/zero >"$work/big.lock"
out=$(timeout 20 "$tune" merge "$work/big.lock" -o "$work/x.lock" 2>&1)
[ $? -eq 1 ] && printf '%s' "$out" | grep -q "big.lock: larger than a lockfile may be (32 MiB)" && ok || bad "33 MiB: $out"
rm -f "$work/big.lock"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
