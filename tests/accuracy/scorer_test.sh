#!/usr/bin/env bash
# The scorer's own test, on a small set (tests/accuracy/selftest) and a stand-in binary that reports
# the findings each case's `fake:` comment lists: exact and loop-level matching, misses and false
# positives, a case of two files, C++ loops, the ratchet, the docs block and bad headers.
set -euo pipefail
root="$1"
score=(python3 "$root/tools/accuracy/score.py" --set "$root/tests/accuracy/selftest"
       --binary "$root/tests/accuracy/selftest/fake_torchleak.py" --jobs 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"${score[@]}" --verbose >"$tmp/out" 2>/dev/null || fail "the scorer exited $?"
cat >"$tmp/want" <<'WANT'
4 cases
rule   TP  FP  missed  recall  precision
TL001   1   0       0    100%       100%
TL002   0   1       1      0%         0%
TL006   1   0       0    100%       100%
TL009   0   1       0       -         0%
TL010   1   1       0    100%        50%
total   3   3       1     75%        50%
missed  python/tl001_exact.py: tl001_exact.py:10 TL002
false   python/tl002_two_files: b.py:4 TL002
false   python/tl006_loop_level.py: tl006_loop_level.py:13 TL009
false   cpp/tl010_braces.cpp: tl010_braces.cpp:13 TL010
WANT
diff -u "$tmp/want" "$tmp/out" || fail "the scorer's table"

# The ratchet: today's figures pass; a better figure in the file fails naming the rule.
"${score[@]}" --update-ratchet "$tmp/ratchet.json" >/dev/null 2>&1
jq -e '.TL010 == {"precision": 0.5, "recall": 1.0} and .TL009 == {"precision": 0.0, "recall": null}
       and .total.recall == 0.75' "$tmp/ratchet.json" >/dev/null || fail "ratchet content: $(cat "$tmp/ratchet.json")"
"${score[@]}" --ratchet "$tmp/ratchet.json" >/dev/null 2>&1 || fail "today's figures fail their own ratchet"
jq '.TL010.precision = 0.6' "$tmp/ratchet.json" >"$tmp/higher.json"
status=0
"${score[@]}" --ratchet "$tmp/higher.json" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 1 ] || fail "a drop below the ratchet exited $status"
grep -qx "accuracy: ratchet: TL010 precision 50% is below the ratchet's 60%" "$tmp/err" || fail "ratchet message: $(cat "$tmp/err")"
# Updating never lowers a figure.
"${score[@]}" --update-ratchet "$tmp/higher.json" >/dev/null 2>&1
jq -e '.TL010.precision == 0.6' "$tmp/higher.json" >/dev/null || fail "the update lowered a figure"

# The docs block: written, then current; a stale one fails.
printf 'before\n<!-- accuracy:devset -->\nold\n<!-- /accuracy:devset -->\nafter\n' >"$tmp/doc.md"
"${score[@]}" --write-docs "$tmp/doc.md" >/dev/null 2>&1
grep -q '^| \*\*total\*\* | \*\*3\*\* | \*\*3\*\* | \*\*1\*\* | \*\*75%\*\* | \*\*50%\*\* |$' "$tmp/doc.md" || fail "docs table: $(cat "$tmp/doc.md")"
grep -qx -- '- `python/tl001_exact.py`: missed TL002@10' "$tmp/doc.md" || fail "docs miss list"
head -1 "$tmp/doc.md" | grep -qx before && tail -1 "$tmp/doc.md" | grep -qx after || fail "text around the block"
"${score[@]}" --check-docs "$tmp/doc.md" >/dev/null 2>&1 || fail "a fresh docs block is stale"
sed -i 's/75%/74%/' "$tmp/doc.md"
status=0
"${score[@]}" --check-docs "$tmp/doc.md" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 1 ] && grep -q "doc.md is stale" "$tmp/err" || fail "a stale docs block passed ($status)"

# Bad headers: exit 2, naming the file and the problem.
mkdir -p "$tmp/bad/python"
printf '# rule: TL001\n# source: https://example.org\n# year: 2020\n# note: n\nx = 1\n' >"$tmp/bad/python/tl001_no_label.py"
printf '# rule: TL002\n# source: https://example.org\n# year: 2020\n# expected: TL002@99\n# note: n\n' >"$tmp/bad/python/tl002_past_end.py"
printf '# rule: TL003\n# source: somewhere\n# year: 2020\n# expected: none\n# note: n\n' >"$tmp/bad/python/tl003_not_url.py"
printf '# rule: TL004\n# source: https://example.org\n# year: 2020\n# expected: none\n# note: n\n' >"$tmp/bad/python/tl005_misnamed.py"
status=0
python3 "$root/tools/accuracy/score.py" --set "$tmp/bad" --binary "$root/tests/accuracy/selftest/fake_torchleak.py" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 2 ] || fail "bad headers exited $status"
for want in "tl001_no_label.py: no \`expected:\` line in its header" \
            "tl002_past_end.py: label TL002@99 is past the end of the file (5 lines)" \
            "tl003_not_url.py: \`source:\` is not a URL: somewhere" \
            "tl005_misnamed.py: a case about TL004 is named tl004_..."; do
  grep -qF "$want" "$tmp/err" || fail "no error '$want' in: $(cat "$tmp/err")"
done
echo "scorer: all checks passed"
