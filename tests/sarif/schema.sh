# Validates torchleak's SARIF logs (findings, multi-line and non-ASCII
# regions, files that could not be analyzed, syntax notes, no results)
# against the SARIF 2.1.0 JSON schema.
#   bash schema.sh TORCHLEAK_BINARY SOURCE_DIR
set -u
TORCHLEAK=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SOURCE_DIR=$(cd "$2" && pwd)
VALIDATE="$SOURCE_DIR/tests/sarif/validate.js"
command -v node >/dev/null || { echo "node is not installed"; exit 77; }
[ -d "$SOURCE_DIR/node_modules/ajv" ] && [ -d "$SOURCE_DIR/node_modules/ajv-formats" ] ||
  { echo "ajv is not installed: run \`npm ci --ignore-scripts\` in the source tree"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 2
failures=0

mkdir -p repo/src/pkg
git init -q repo 2>/dev/null || true
cat >repo/src/train.py <<'PY'
import torch
from torch import nn


def train(model: nn.Module, loader, optimizer, epochs: int = 1):
    criterion = nn.CrossEntropyLoss()
    total_loss = 0.0
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total_loss += loss
    return total_loss / epochs
PY
cat >repo/src/pkg/unicode.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        tag = "🔥é"; total += loss
        total += (
            loss)
    return total
PY
printf 'x = "\xff"\n' >repo/src/latin1.py
printf 'import torch\n\000\n' >repo/src/binary.py
printf 'def broken(:\n' >repo/src/syntax.py
printf 'x = 1\n' >repo/src/clean.py

cd repo || exit 2
"$TORCHLEAK" check --format sarif --output "$WORK/all.sarif" src missing.py 2>/dev/null
[ $? = 2 ] || { echo "FAIL: expected exit 2 for a scan with unreadable files"; failures=$((failures + 1)); }
"$TORCHLEAK" check --select TL001 --format sarif --output "$WORK/findings.sarif" src/train.py src/pkg
[ $? = 1 ] || { echo "FAIL: expected exit 1 for a scan with findings"; failures=$((failures + 1)); }
"$TORCHLEAK" check --format sarif --output "$WORK/empty.sarif" src/clean.py
[ $? = 0 ] || { echo "FAIL: expected exit 0 for a clean scan"; failures=$((failures + 1)); }

node "$VALIDATE" "$WORK/all.sarif" "$WORK/findings.sarif" "$WORK/empty.sarif"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || failures=$((failures + 1))

# The validator must reject what the schema forbids, or this test proves nothing.
sed 's/"version": "2.1.0"/"version": "2.0.0"/; s/"startLine": 14/"startLine": 0/' "$WORK/findings.sarif" >"$WORK/broken.sarif"
if node "$VALIDATE" "$WORK/broken.sarif" >"$WORK/broken.out"; then
  echo "FAIL: a log with version 2.0.0 and startLine 0 passed the schema"
  failures=$((failures + 1))
elif [ "$(grep -c '^' "$WORK/broken.out")" -lt 2 ]; then
  echo "FAIL: the broken log was rejected for fewer reasons than expected:"
  cat "$WORK/broken.out"
  failures=$((failures + 1))
fi

[ $failures = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all SARIF logs are valid"
