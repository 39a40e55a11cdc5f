# GitLab's code quality report: one issue per finding, paths relative to the
# repository root, columns in code points, fingerprints that survive moved lines.
source "$(dirname "$0")/common.bash"
command -v git >/dev/null || { echo "git is not installed"; exit 77; }
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

git init -q repo
write_train repo/src/train.py
cat >repo/src/unicode.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        tag = "🔥é"; total += loss
    return total
PY
cd repo/src || exit 2

case_ "the code quality report"
tl check --select TL001 --format gitlab .
expect_rc 1
expect_err </dev/null
# Everything but the fingerprints, which are checked below.
OUT=$(jq -c 'map(del(.fingerprint)) | .[]' <<<"$OUT")
expect_out <<'JSON'
{"type":"issue","check_name":"TL001 accumulate-undetached","description":"@MSG(total_loss,loss)@","categories":["Performance"],"severity":"major","location":{"path":"src/train.py","positions":{"begin":{"line":14,"column":13},"end":{"line":14,"column":31}}}}
{"type":"issue","check_name":"TL001 accumulate-undetached","description":"@MSG(total,loss)@","categories":["Performance"],"severity":"major","location":{"path":"src/unicode.py","positions":{"begin":{"line":7,"column":21},"end":{"line":7,"column":34}}}}
JSON

case_ "fingerprints: distinct, and unchanged when lines are added above"
tl check --select TL001 --format gitlab .
before=$(jq -r '.[].fingerprint' <<<"$OUT")
[ "$(sort -u <<<"$before" | wc -l)" = 2 ] || fail "fingerprints are not distinct: $before"
grep -Eqx '[0-9a-f]{24}' <<<"$(head -n1 <<<"$before")" || fail "fingerprint format: $before"
{ printf '# a comment\n\n\n'; cat train.py; } >train.tmp && mv train.tmp train.py
tl check --select TL001 --format gitlab .
after=$(jq -r '.[].fingerprint' <<<"$OUT")
[ "$after" = "$before" ] || fail "fingerprints changed when lines moved: $before -> $after"
[ "$(jq -r '.[0].location.positions.begin.line' <<<"$OUT")" = 17 ] || fail "the moved finding's line: $OUT"

case_ "an empty report is an empty array"
mkdir -p clean && printf 'x = 1\n' >clean/ok.py
tl check --format gitlab clean
expect_rc 0
expect_out <<<"[]"

done_
