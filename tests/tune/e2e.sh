#!/usr/bin/env bash
# dsv4c-tune end to end on a device (ctest tune.quick.opencl: PoCL on the
# CPU in CI; tune.quick.cuda on a GPU): a tiny sweep compiled, tuned with
# --quick, resumed, tuned again in two shards and merged (in both orders:
# the same bytes), a crashing and a hanging variant isolated and recorded,
# a tuned bundle built with dsv4c --lock choosing the winners by its own
# choice records (bundle version 7) and with its lockfile loaded over them,
# one built for another GPU model choosing none (test_choice), and
# test_choice's synthetic lockfiles on the full sweep bundle.  Exit 77
# (skipped) when the backend has no device.
#   usage: e2e.sh DSV4C DSV4C_TUNE TEST_CHOICE TESTS_TUNE_DIR SPECS_DIR WORK_DIR opencl|cuda
set -u
dsv4c=$1 tune=$2 choice=$3 dir=$4 specs=$5 work=$6 be=$7
rm -rf "$work" && mkdir -p "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

"$dsv4c" "$dir/tiny_sweep.lua" -I "$specs" -o "$work/b" 2>"$work/dsv4c.log" || { cat "$work/dsv4c.log"; exit 1; }
B=$work/b/tiny_sweep.dsv4b
export DSV4_SEED=12345
"$tune" "$B" --lock "$work/t.lock" --quick --backend "$be" >"$work/t.log" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then cat "$work/t.log"; echo "SKIPPED: no $be device"; exit 77; fi
[ "$rc" -eq 0 ] && ok || { cat "$work/t.log"; bad "dsv4c-tune exited with $rc"; finish; }
n=$(grep -c '"winner": "[a-z_0-9]' "$work/t.lock")
[ "$n" = 4 ] && ok || bad "4 entries with a winner expected, got $n"
[ "$(grep -c '"gate": "pass"' "$work/t.lock")" = 8 ] && ok || bad "8 variants passing their gate expected"
[ -f "$work/t.md" ] && grep -q '(winner)' "$work/t.md" && ok || bad "no report t.md with winners"
[ "$(ls "$work"/t-*.svg 2>/dev/null | wc -l)" = 4 ] && ok || bad "4 plots expected beside the lockfile"
grep -q '<svg' "$work"/t-sd-T_2*.svg && grep -q 'winner' "$work"/t-sd-T_2*.svg && ok || bad "a plot without its winner"

# resume: nothing left to measure, the same bytes
cp "$work/t.lock" "$work/t0.lock"
"$tune" "$B" --lock "$work/t.lock" --quick --backend "$be" >"$work/r.log" 2>&1 && ok || bad "the resumed run failed"
grep -q "4 (shape, variant) items\|8 (shape, variant) items" "$work/r.log" && grep -q " 0 to measure" "$work/r.log" && ok ||
  bad "the resumed run measured again: $(cat "$work/r.log")"
cmp -s "$work/t.lock" "$work/t0.lock" && ok || bad "the resumed run changed the lockfile"

# shards, merged in either order: the same bytes, every entry
"$tune" "$B" --lock "$work/s0.lock" --quick --backend "$be" --shard 0/2 --devices 0,0 --no-report >"$work/s0.log" 2>&1 && ok || bad "shard 0/2"
"$tune" "$B" --lock "$work/s1.lock" --quick --backend "$be" --shard 1/2 --no-report >"$work/s1.log" 2>&1 && ok || bad "shard 1/2"
"$tune" merge "$work/s0.lock" "$work/s1.lock" -o "$work/m01.lock" && "$tune" merge "$work/s1.lock" "$work/s0.lock" -o "$work/m10.lock" &&
  ok || bad "merge"
cmp -s "$work/m01.lock" "$work/m10.lock" && ok || bad "merging in two orders gives different bytes"
[ "$(grep -c '"gate": "pass"' "$work/m01.lock")" = 8 ] && ok || bad "the merged shards lack variants"
[ "$(grep -c '"name"' "$work/s0.lock")" -lt 8 ] && [ "$(grep -c '"name"' "$work/s1.lock")" -lt 8 ] && ok ||
  bad "a shard measured everything"
"$tune" report "$work/m01.lock" --manifest "$work/b/tiny_sweep.sweep.json" && [ -f "$work/m01.md" ] && ok || bad "report"

# a shapes file: the timing's extra lengths drawn (xlens=drawn, named in
# the entry's shape), and a bad xlens= refused with the line
printf 'sparse_decode T=3,H=64,topk=64,extra=128,xbs=2 xlens=drawn small, C128 drawn\n' >"$work/drawn.txt"
"$tune" "$B" --lock "$work/d.lock" --shapes "$work/drawn.txt" --backend "$be" -k sd --no-report >"$work/d.log" 2>&1 &&
  grep -q '"shape": "T=3,H=64,topk=64,extra=128,xbs=2,xlens=drawn"' "$work/d.lock" &&
  [ "$(grep -c '"gate": "pass"' "$work/d.lock")" -ge 1 ] && ok || bad "xlens=drawn: $(cat "$work/d.log")"
printf 'sparse_decode T=3,H=64,topk=64,extra=128,xbs=2 xlens=sometimes\n' >"$work/bad.txt"
"$tune" "$B" --lock "$work/x.lock" --shapes "$work/bad.txt" --backend "$be" >"$work/x.log" 2>&1
[ $? -ne 0 ] && grep -q 'bad.txt:1: xlens= takes drawn or full' "$work/x.log" && ok || bad "a bad xlens= was not refused: $(cat "$work/x.log")"

# a crashing and a hanging variant: recorded, the others measured
DSV4C_TUNE_FAULT=sd__h2:crash "$tune" "$B" --lock "$work/c.lock" --quick --backend "$be" -k sd --no-report >"$work/c.log" 2>&1 &&
  ok || bad "a crashing variant ended the tuner: $(tail -3 "$work/c.log")"
[ "$(grep -c '"name": "sd__h2", "gate": "crashed"' "$work/c.lock")" = 2 ] && [ "$(grep -c '"winner": "sd__h4"' "$work/c.lock")" = 2 ] &&
  ok || bad "the crash is not recorded: $(cat "$work/c.lock")"
DSV4C_TUNE_FAULT=sd__h4:hang "$tune" "$B" --lock "$work/h.lock" --quick --backend "$be" -k sd --timeout 5 --no-report >"$work/h.log" 2>&1 &&
  ok || bad "a hanging variant ended the tuner"
[ "$(grep -c '"name": "sd__h4", "gate": "timeout"' "$work/h.lock")" = 2 ] && ok || bad "the hang is not recorded as a timeout"
DSV4C_TUNE_FAULT=sd__h4:nondet "$tune" "$B" --lock "$work/n.lock" --quick --backend "$be" -k sd --no-report >"$work/n.log" 2>&1
grep -q '"name": "sd__h4", "gate": "nondeterministic"' "$work/n.lock" && ok || bad "a nondeterministic variant is not caught"
DSV4C_TUNE_FAULT=sd__h2:wrong "$tune" "$B" --lock "$work/w.lock" --quick --backend "$be" -k sd --no-report >"$work/w.log" 2>&1
grep -q '"name": "sd__h2", "gate": "wrong", .*FlashMLA' "$work/w.lock" && ok || bad "a wrong variant is not caught"

# a tuned bundle from the merged lockfile: its own choice records chosen
# by the runtime with no lockfile, then its lockfile loaded over them
"$dsv4c" "$dir/tiny_sweep.lua" -I "$specs" --lock "$work/m01.lock" -o "$work/tuned" 2>"$work/tuned.log" && ok ||
  bad "dsv4c --lock: $(cat "$work/tuned.log")"
# (beyond the one line every writing compile prints)
! grep -qv "^dsv4c: wrote " "$work/tuned.log" && ok || bad "dsv4c --lock reported: $(cat "$work/tuned.log")"
# the tuned bundle carries its choices (bundle version 7): as many choice
# records as the lockfile has winners
[ "$(od -An -tu4 -j20 -N4 "$work/tuned/tiny_sweep.dsv4b" | tr -d ' ')" = 4 ] && ok ||
  bad "the tuned bundle does not hold 4 choice records"
# the same winners recorded for another GPU model: the default rule here
sed 's/"device": "[^"]*"/"device": "Some Other GPU"/' "$work/m01.lock" >"$work/other.lock"
"$dsv4c" "$dir/tiny_sweep.lua" -I "$specs" --lock "$work/other.lock" -o "$work/other" 2>"$work/other.log" && ok ||
  bad "dsv4c --lock (another GPU model): $(cat "$work/other.log")"
"$choice" "$work/b/tiny_sweep.dsv4b" "$be" "$work/tuned/tiny_sweep.dsv4b" "$work/tuned/tiny_sweep.lock" \
  "$work/other/tiny_sweep.dsv4b" >"$work/choice.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok || { cat "$work/choice.log"; bad "test_choice exited with $rc"; }
finish
