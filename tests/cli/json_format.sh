# The JSON report (docs/json-format.md): every field, exactly.
source "$(dirname "$0")/common.bash"
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

version=$(sed -nE 's/^project\(torchleak VERSION ([0-9.]+).*/\1/p' "$SOURCE_DIR/CMakeLists.txt")
write_train proj/train.py
write_clean proj/clean.py
# Code points before the finding that take 4 bytes in UTF-8 (2 units in UTF-16).
cat >proj/unicode.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        tag = "🔥é"; total += loss
    return total
PY

case_ "the JSON report"
tl check --select TL001 --format json proj
expect_rc 1
expect_err </dev/null
expect_out < <(sed "s/@VERSION@/$version/" <<'JSON'
{
  "version": 1,
  "tool": {
    "name": "torchleak",
    "version": "@VERSION@"
  },
  "diagnostics": [
    {
      "rule": "TL001",
      "name": "accumulate-undetached",
      "severity": "warning",
      "path": "proj/train.py",
      "start": {
        "line": 14,
        "column": 13
      },
      "end": {
        "line": 14,
        "column": 31
      },
      "message": "@MSG(total_loss,loss)@",
      "help": "@HELP(loss)@",
      "context": "train",
      "fix": {
        "title": "Replace `loss` with `loss.item()`",
        "safety": "safe",
        "edits": [
          {
            "start_byte": 401,
            "end_byte": 401,
            "content": ".item()"
          }
        ]
      }
    },
    {
      "rule": "TL001",
      "name": "accumulate-undetached",
      "severity": "warning",
      "path": "proj/unicode.py",
      "start": {
        "line": 7,
        "column": 21
      },
      "end": {
        "line": 7,
        "column": 34
      },
      "message": "@MSG(total,loss)@",
      "help": "@HELP(loss)@",
      "context": "fit",
      "fix": {
        "title": "Replace `loss` with `loss.item()`",
        "safety": "safe",
        "edits": [
          {
            "start_byte": 208,
            "end_byte": 208,
            "content": ".item()"
          }
        ]
      }
    }
  ],
  "errors": [],
  "notes": [],
  "statistics": [
    {
      "rule": "TL001",
      "name": "accumulate-undetached",
      "count": 2
    }
  ],
  "summary": {
    "problems": 2,
    "files_with_problems": 2,
    "files_analyzed": 3,
    "files_failed": 0
  }
}
JSON
)

case_ "fix offsets are byte offsets into the file"
for f in train unicode; do
  offset=$(jq ".diagnostics[] | select(.path == \"proj/$f.py\") | .fix.edits[0].start_byte" <<<"$OUT")
  compare "$f.py bytes before the fix" "$(head -c "$offset" "proj/$f.py" | tail -c 5)" <<<" loss"
done

case_ "nothing found"
tl check --select TL001 --format json proj/clean.py
expect_rc 0
expect_out < <(sed "s/@VERSION@/$version/" <<'JSON'
{
  "version": 1,
  "tool": {
    "name": "torchleak",
    "version": "@VERSION@"
  },
  "diagnostics": [],
  "errors": [],
  "notes": [],
  "statistics": [],
  "summary": {
    "problems": 0,
    "files_with_problems": 0,
    "files_analyzed": 1,
    "files_failed": 0
  }
}
JSON
)

case_ "a finding that spans lines: the end on its own line, in code points"
cat >proj/multiline.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += (
            "é" and loss)
    return total
PY
tl check --select TL001 --format json proj/multiline.py
compare "range" "$(jq -c '.diagnostics[] | [.start, .end]' <<<"$OUT")" <<'TXT'
[{"line":6,"column":9},{"line":7,"column":26}]
TXT

case_ "--quiet, --statistics and --color do not change the JSON report"
tl check --select TL001 --format json proj
full=$OUT
tl check --select TL001 --format json --quiet --statistics --color always proj
compare "stdout" "$OUT" <<<"$full"

done_
