#!/usr/bin/env bash
# The benchmark on the bundled examples: one run, 1 and 2 threads. Asserts the
# shape of its table and that full finds what `torchleak check` finds, with
# every rule, with one rule and with none; never a timing.
#   bash smoke_test.sh BENCH_BINARY TORCHLEAK_BINARY SOURCE_DIR
set -uo pipefail
bench=$1 torchleak=$2 src=$3
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cd "$src" || exit 2

# The number of findings `torchleak check` reports on examples/ with these arguments.
count() { "$torchleak" check --isolated --format json "$@" examples | jq ".diagnostics | length"; }
# The "N findings" of the bench's closing summary.
bench_findings() { sed -n 's/^full analysis: .*, \([0-9]*\) findings$/\1/p' <<<"$1"; }

out=$("$bench" examples --runs 1 --threads 1,2 2>&1) || fail "the bench exited with $?: $out"
for row in "floor 1" "full 1" "floor 2" "full 2"; do
  grep -Eq "^${row% *} +${row#* } +[0-9.]+ +[0-9.]+-[0-9.]+ " <<<"$out" || fail "no '$row' row in: $out"
done
grep -Eq '^full +1 .* [0-9]+\.[0-9]{2}x *$' <<<"$out" || fail "no full/floor ratio for 1 thread in: $out"
grep -Eq '^full +2 .* [0-9]+\.[0-9]{2}x +[0-9]+\.[0-9]{2}x *$' <<<"$out" || fail "no speed-up for 2 threads in: $out"
grep -q '^full analysis: 3 files analyzed, 0 not analyzable, 0 with syntax errors, ' <<<"$out" ||
  fail "wrong file counts in: $out"
want=$(count)
[ "$want" -gt 0 ] || fail "torchleak finds nothing in examples/"
[ "$(bench_findings "$out")" = "$want" ] || fail "the bench found $(bench_findings "$out") problems, check found $want"

out=$("$bench" examples --runs 1 --threads 1 --select TL001 2>&1) || fail "--select TL001 exited with $?"
grep -q '^full runs only: TL001$' <<<"$out" || fail "--select TL001 is not announced: $out"
[ "$(bench_findings "$out")" = "$(count --select TL001)" ] || fail "--select TL001 found $(bench_findings "$out")"

out=$("$bench" examples --runs 1 --threads 1 --select none 2>&1) || fail "--select none exited with $?"
[ "$(bench_findings "$out")" = 0 ] || fail "--select none found $(bench_findings "$out") problems"

out=$("$bench" examples --select TL99 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "--select TL99 exited with $rc, not 2"
grep -q '^torchleak_bench: --select: no rule TL99$' <<<"$out" || fail "--select TL99 says: $out"

# The cache benchmark (bench/cache.sh): its table, on two copies of the examples.
if command -v bc >/dev/null; then
  out=$(bash "$src/bench/cache.sh" "$torchleak" examples --runs 1 --copies 2 2>&1) || fail "cache.sh exited with $?: $out"
  grep -q '^project: 6 Python files (2 copies of .*examples); changed file: copy1/' <<<"$out" ||
    fail "cache.sh names the wrong project: $out"
  for row in "cold" "fill .*x  at most 1.05x" "warm .*%  at most 10%" "one .*%  at most 5%"; do
    grep -Eq "^$row" <<<"$out" || fail "no '$row' row in: $out"
  done
fi

[ "$failures" = 0 ] && echo "bench smoke: all passed"
exit $((failures > 0))
