# Runs one libFuzzer target for a while on a fresh copy of its seed corpus.
#
#   bash run_fuzzer.sh FUZZ_BINARY {python|config|lsp} SOURCE_DIR SECONDS
#
# The seeds: fixtures/python for the Python path; configuration files and
# suppression comments from fixtures/ for the configuration parser; for the
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
    find "$source/fixtures" "$source/tests" \( -name '*.toml' -o -name 'pyproject.toml' \) | while read -r f; do
      cp "$f" "$work/corpus/$(echo "$f" | md5sum | cut -c1-16)"
    done
    grep -rhoE '#.*(noqa|torchleak:|NOLINT).*' "$source/fixtures" | sort -u | head -n 300 |
      split -l 1 - "$work/corpus/comment_" ;;
  lsp)
    i=0
    find "$source/fixtures/python" -name '*.py' -size -16k | head -n 100 | while read -r f; do
      i=$((i + 1))
      python3 - "$f" >"$work/corpus/session_$i" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
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
    {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
    {"jsonrpc": "2.0", "method": "exit"},
]
out = b""
for m in msgs:
    body = json.dumps(m).encode()
    out += b"Content-Length: %d\r\n\r\n" % len(body) + body
sys.stdout.buffer.write(out)
PY
    done ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac

echo "$target: $(ls "$work/corpus" | wc -l) seeds, $seconds s"
"$binary" -max_total_time="$seconds" -max_len=65536 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix=artifacts/"$target"- "$work/corpus"
