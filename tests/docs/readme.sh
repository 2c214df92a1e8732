#!/usr/bin/env bash
# The README stays short and true: at most 250 lines; every figure in its
# figures block (a number with x, %, us or TFLOP/s) occurs in the top table
# of bench/RESULTS.md ("Current figures"), so the two cannot drift; every
# repository path it names in backquotes exists; docs/ops.md exists and
# nothing in the tree cites OPS.md by its old place.
#   usage: readme.sh ROOT
set -u
root=$1
cd "$root" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
n=$(wc -l <README.md)
[ "$n" -le 250 ] || bad "README.md has $n lines (at most 250)"
top=$(awk '/^## Current figures/ { on = 1; next } on && /^##/ { exit } on' bench/RESULTS.md)
[ -n "$top" ] || bad "bench/RESULTS.md has no '## Current figures' table"
block=$(awk '/<!-- figures:/ { on = 1; next } /<!-- \/figures -->/ { on = 0 } on' README.md)
[ -n "$block" ] || bad "README.md has no figures block"
figs=$(grep -oE '[0-9]+(\.[0-9]+)?(-[0-9]+(\.[0-9]+)?)?(x|%| us| TFLOP/s)' <<<"$block" | sort -u)
count=0
while IFS= read -r f; do
  [ -n "$f" ] || continue
  count=$((count + 1))
  grep -qF -- "$f" <<<"$top" || bad "README figure '$f' is not in bench/RESULTS.md's top table"
done <<<"$figs"
[ "$count" -ge 5 ] || bad "only $count figures found in the README's figures block"
for p in $(grep -oE '`(compiler|targets|runtime|specs|bench|tools|python|cmake|tests|docs|scripts)/[A-Za-z0-9_./-]*`' README.md | tr -d '`' | sort -u); do
  [ -e "$p" ] || bad "README names $p, which does not exist"
done
[ -f docs/ops.md ] || bad "docs/ops.md is missing"
cites=$(grep -rlE 'OPS\.md' compiler targets runtime python tools specs tests bench docs scripts cmake README.md \
  2>/dev/null | grep -v '^tests/docs/')
[ -z "$cites" ] || bad "OPS.md is still cited (docs/ops.md is the project's copy) in: $(echo $cites)"
echo "README: $n lines, $count figures checked against bench/RESULTS.md"
exit $fail
