# Runs one libFuzzer target for a while on a fresh copy of its seed corpus.
#
#   bash run_fuzzer.sh FUZZ_BINARY {python|config|lsp} SOURCE_DIR SECONDS
#
# The seeds: fixtures/python for the Python path; for the configuration
# parser, the repository's TOML files, the configurations in docs/ and
# tests/cli/, and suppression comments from fixtures/, tests/ and docs/; for the
# language server, LSP sessions (framed messages) built from the fixtures.
# A crash, a leak, undefined behaviour or a timeout ends the run with a
# non-zero exit code and leaves the input in artifacts/ of the working
# directory; a crash found becomes a regression test (tests/fuzz/regressions).
set -u
binary=$1 target=$2 source=$3 seconds=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" artifacts

case $target in
  python)
    find "$source/fixtures/python" -name '*.py' -size -64k | while read -r f; do
      cp "$f" "$work/corpus/$(echo "$f" | md5sum | cut -c1-16)"
    done ;;
  config)
    # TOML: the repository's own TOML files (the rule catalogue), every
    # configuration the docs show (```toml blocks) and every one the
    # command-line tests write (printf '...' >NAME.toml).
    find "$source" -name node_modules -prune -o -name build -prune -o -name '*.toml' -print | while read -r f; do
      cp "$f" "$work/corpus/toml_$(echo "$f" | md5sum | cut -c1-16)"
    done
    for f in "$source"/docs/*.md "$source/README.md"; do
      awk -v out="$work/corpus/doc_$(basename "$f" .md)_" '
        /^```toml/ { n++; inside = 1; next }
        /^```/ { inside = 0; next }
        inside { print > (out n) }' "$f"
    done
    i=0
    sed -nE "s/.*printf '([^']*)' *>+ *[^ ]*\.toml.*/\1/p" "$source"/tests/cli/*.sh | while IFS= read -r format; do
      i=$((i + 1))
      # shellcheck disable=SC2059 # the tests' own printf formats
      printf -- "$format" >"$work/corpus/test_$i"
    done
    # Suppression comments, as written in the fixtures, tests and docs.
    grep -rhoE "(#|//) *(noqa|torchleak:|NOLINT)[^'\"\\]*" "$source/fixtures" "$source/tests" "$source/docs" |
      sort -u | head -n 300 | split -l 1 - "$work/corpus/comment_"
    # Each kind must be there: a fuzz run without seeds proves little.
    for kind in toml_ doc_ test_ comment_; do
      ls "$work/corpus" | grep -q "^$kind" || { echo "config: no $kind seeds" >&2; exit 1; }
    done ;;
  lsp)
    i=0
    find "$source/fixtures/python" -name '*.py' -size -16k | head -n 100 | while read -r f; do
      i=$((i + 1))
      python3 - "$f" "$i" >"$work/corpus/session_$i" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
# The target runs the pending analysis after the last message, unless the
# session has exited: only one seed in ten ends with shutdown and exit.
ends = int(sys.argv[2]) % 10 == 0
uri = "file:///fuzz/train.py"
msgs = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
    {"jsonrpc": "2.0", "method": "initialized", "params": {}},
    {"jsonrpc": "2.0", "method": "textDocument/didOpen",
     "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}},
    {"jsonrpc": "2.0", "method": "textDocument/didChange",
     "params": {"textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                              "end": {"line": 0, "character": 0}}, "text": "# \n"}]}},
    {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction",
     "params": {"textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}},
                "context": {"diagnostics": []}}},
]
if ends:
    msgs += [{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}]
out = b""
for m in msgs:
    body = json.dumps(m).encode()
    out += b"Content-Length: %d\r\n\r\n" % len(body) + body
sys.stdout.buffer.write(out)
PY
    done ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac

seeds=$(ls "$work/corpus" | wc -l)
[ "$seeds" -gt 0 ] || { echo "$target: no seeds" >&2; exit 1; }
echo "$target: $seeds seeds, $seconds s"
# The progress lines (a new input, a smaller one, a pulse, newly covered
# functions) and the language server's notes on the malformed messages it
# ignores are left out of the log; the start, the end, the statistics and any
# report stay.
"$binary" -max_total_time="$seconds" -max_len=65536 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix=artifacts/"$target"- "$work/corpus" 2>&1 |
  grep -vE '^(#[0-9]+[[:space:]]+(NEW|REDUCE|pulse) |[[:space:]]+NEW_FUNC|torchleak lsp: ignored )'
exit "${PIPESTATUS[0]}"
