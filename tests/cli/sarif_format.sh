# The SARIF report: one run, rule metadata from the catalogue, results with
# repository-relative URIs under %SRCROOT%, UTF-16 columns, full regions,
# stable fingerprints; never an absolute path of this machine. (Validation
# against the SARIF 2.1.0 schema is tests/sarif/.)
source "$(dirname "$0")/common.bash"
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }
command -v git >/dev/null || { echo "git is not installed"; exit 77; }

version=$(sed -nE 's/^project\(torchleak VERSION ([0-9.]+).*/\1/p' "$SOURCE_DIR/CMakeLists.txt")
git init -q repo
write_train repo/src/train.py
write_clean repo/src/clean.py
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
mkdir -p "repo/src/odd dir"
cp repo/src/train.py "repo/src/odd dir/100%:train.py"

# From a subdirectory of the repository: URIs are still relative to its root.
cd repo/src || exit 2
tl check --select TL001 --format sarif .
expect_rc 1
expect_err </dev/null
sarif=$OUT
q() { jq -c "$1" <<<"$sarif"; }

case_ "the log"
compare "log" "$(q '[."$schema", .version, (.runs | length)]')" <<'TXT'
["https://json.schemastore.org/sarif-2.1.0.json","2.1.0",1]
TXT
compare "run keys" "$(q '.runs[0] | keys_unsorted')" <<'TXT'
["tool","invocations","originalUriBaseIds","columnKind","results"]
TXT
compare "driver" "$(q '.runs[0].tool.driver | del(.rules)')" <<TXT
{"name":"torchleak","version":"$version","semanticVersion":"$version","informationUri":"https://github.com/torchleak/torchleak"}
TXT
compare "run" "$(q '.runs[0] | [.invocations, .originalUriBaseIds, .columnKind]')" <<'TXT'
[[{"executionSuccessful":true}],{"%SRCROOT%":{"description":{"text":"The root of the repository analyzed."}}},"utf16CodeUnits"]
TXT

case_ "results"
jq '.runs[0].results' <<<"$sarif" >results.json
compare "results" "$(cat results.json)" <<'JSON'
[
  {
    "ruleId": "TL001",
    "ruleIndex": 0,
    "level": "warning",
    "message": {
      "text": "@MSG(total_loss,loss)@."
    },
    "locations": [
      {
        "physicalLocation": {
          "artifactLocation": {
            "uri": "src/odd%20dir/100%25%3Atrain.py",
            "uriBaseId": "%SRCROOT%"
          },
          "region": {
            "startLine": 14,
            "startColumn": 13,
            "endLine": 14,
            "endColumn": 31
          }
        }
      }
    ],
    "partialFingerprints": {
      "primaryLocationLineHash": "62a776fbedac6455:1"
    }
  },
  {
    "ruleId": "TL001",
    "ruleIndex": 0,
    "level": "warning",
    "message": {
      "text": "@MSG(total_loss,loss)@."
    },
    "locations": [
      {
        "physicalLocation": {
          "artifactLocation": {
            "uri": "src/train.py",
            "uriBaseId": "%SRCROOT%"
          },
          "region": {
            "startLine": 14,
            "startColumn": 13,
            "endLine": 14,
            "endColumn": 31
          }
        }
      }
    ],
    "partialFingerprints": {
      "primaryLocationLineHash": "82c3f7a9e4e1e530:1"
    }
  },
  {
    "ruleId": "TL001",
    "ruleIndex": 0,
    "level": "warning",
    "message": {
      "text": "@MSG(total,loss)@."
    },
    "locations": [
      {
        "physicalLocation": {
          "artifactLocation": {
            "uri": "src/unicode.py",
            "uriBaseId": "%SRCROOT%"
          },
          "region": {
            "startLine": 7,
            "startColumn": 22,
            "endLine": 7,
            "endColumn": 35
          }
        }
      }
    ],
    "partialFingerprints": {
      "primaryLocationLineHash": "fdc929a56c8f19ab:1"
    }
  }
]
JSON

case_ "no absolute path of this machine"
grep -F -e "$WORK" -e "file://" <<<"$sarif" && fail "the SARIF log names a path of this machine"
grep -F "$(cd "$WORK" && pwd -P)" <<<"$sarif" && fail "the SARIF log names a path of this machine"

case_ "the rules: every catalogue entry, in code order, TL001's metadata"
expected_ids=$(cd "$SOURCE_DIR/rules" && ls -- *.toml | sed -E 's/^(TL[0-9]+)-.*/\1/' | sort | jq -R . | jq -sc .)
compare "rule ids" "$(q '[.runs[0].tool.driver.rules[].id]')" <<<"$expected_ids"
compare "TL001" "$(q '.runs[0].tool.driver.rules[0] | {id, name, helpUri, defaultConfiguration, properties}')" <<'TXT'
{"id":"TL001","name":"accumulate-undetached","helpUri":"https://github.com/torchleak/torchleak/blob/main/docs/rules/TL001-accumulate-undetached.md","defaultConfiguration":{"level":"warning"},"properties":{"precision":"high","problem.severity":"warning","tags":["memory-leak","autograd","pytorch"]}}
TXT
"$TORCHLEAK" rule TL001 >rule.md
compare "help.markdown is the rule's page" "$(q '.runs[0].tool.driver.rules[0].help.markdown' | jq -r .)" <"rule.md"
for r in $(q '.runs[0].tool.driver.rules | keys[]'); do
  id=$(q ".runs[0].tool.driver.rules[$r].id")
  q ".runs[0].tool.driver.rules[$r] | .shortDescription.text, .fullDescription.text, .help.text" | jq -e -r . >/dev/null ||
    fail "$id: a description is missing"
  q ".runs[0].tool.driver.rules[$r] | [.shortDescription.text, .fullDescription.text] | map(length <= 1024 and length > 0 and (contains(\"\n\") | not)) | all" |
    grep -qx true || fail "$id: a description is empty, over 1024 characters or has a line break"
done
short=$(q '.runs[0].tool.driver.rules[0].shortDescription.text' | jq -r .)
q '.runs[0].tool.driver.rules[0].help.text' | jq -r . | head -n 1 | grep -qxF "$short" ||
  fail "help.text does not start with the summary"

case_ "fingerprints do not depend on the line number"
cd "$WORK/repo/src" || exit 2
before=$(jq -r '.[] | select(.locations[0].physicalLocation.artifactLocation.uri == "src/train.py") | .partialFingerprints.primaryLocationLineHash' results.json)
{ printf '\n\n# moved down\n'; cat train.py; } >train.tmp && mv train.tmp train.py
tl check --select TL001 --format sarif train.py
after=$(jq -r '.runs[0].results[0] | .partialFingerprints.primaryLocationLineHash, .locations[0].physicalLocation.region.startLine' <<<"$OUT")
compare "moved finding" "$after" <<<"$before
17"

case_ "two identical findings in one function are numbered"
cat >twice.py <<'PY'
def fit(model, loader, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss
        total += loss
    return total
PY
tl check --select TL001 --format sarif twice.py
compare "suffixes" "$(jq -c '[.runs[0].results[].partialFingerprints.primaryLocationLineHash | split(":")[1]]' <<<"$OUT")" <<'TXT'
["1","2"]
TXT

case_ "a finding that spans lines: endColumn on the end line, in UTF-16 units"
cat >multiline.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += (
            "🔥" and loss)
    return total
PY
tl check --select TL001 --format sarif multiline.py
compare "region" "$(jq -c '.runs[0].results[0].locations[0].physicalLocation.region' <<<"$OUT")" <<'TXT'
{"startLine":6,"startColumn":9,"endLine":7,"endColumn":27}
TXT

case_ "files that could not be analyzed: notifications, executionSuccessful false"
printf 'x = "\xff"\n' >bad.py
printf 'def broken(:\n' >syntax.py
tl check --select TL001 --format sarif bad.py syntax.py missing.py
expect_rc 2
compare "invocations" "$(jq -c '.runs[0].invocations' <<<"$OUT")" <<'TXT'
[{"executionSuccessful":false,"toolExecutionNotifications":[{"level":"error","message":{"text":"not valid UTF-8: byte 0xFF at line 1, column 6 (source files are read as UTF-8)."},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"src/bad.py","uriBaseId":"%SRCROOT%"}}}]},{"level":"error","message":{"text":"no such file or directory."},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"src/missing.py","uriBaseId":"%SRCROOT%"}}}]},{"level":"note","message":{"text":"syntax error near line 1; analyzed as far as the parser recovered."},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"src/syntax.py","uriBaseId":"%SRCROOT%"}}}]}]}]
TXT

case_ "outside a git work tree, URIs are relative to the working directory"
cd "$WORK" || exit 2
mkdir -p plain/pkg && cp repo/src/clean.py plain/pkg/ && write_train plain/pkg/train.py
cd plain || exit 2
tl check --select TL001 --format sarif "$WORK/plain/pkg"
compare "uris" "$(jq -c '[.runs[0].results[].locations[0].physicalLocation.artifactLocation.uri]' <<<"$OUT")" <<'TXT'
["pkg/train.py"]
TXT

case_ "nothing found: an empty results array"
tl check --select TL001 --format sarif pkg/clean.py
expect_rc 0
compare "results" "$(jq -c '.runs[0].results' <<<"$OUT")" <<<"[]"

done_
