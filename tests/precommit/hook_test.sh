#!/usr/bin/env bash
# The real pre-commit (Debian's package) installs this repository's hook in a
# throwaway git repository: a commit with a leaking file is refused and the
# output names the line; a commit of a clean file passes; nothing is modified.
set -euo pipefail
binary="$(realpath "$1")"
source_dir="$2"
if ! command -v pre-commit >/dev/null; then
  echo "pre-commit is not installed (scripts/test.sh installs it)"
  exit 77
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PRE_COMMIT_HOME="$work/cache"
export PATH="$(dirname "$binary"):$PATH"
export GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.invalid
export GIT_COMMITTER_NAME=test GIT_COMMITTER_EMAIL=test@example.invalid

# The hook repository: this checkout's .pre-commit-hooks.yaml at a commit of
# its own, so the test also works on a work tree with uncommitted changes.
hooks="$work/hooks"
mkdir -p "$hooks"
cp "$source_dir/.pre-commit-hooks.yaml" "$hooks/"
git -C "$hooks" init -q
git -C "$hooks" add .pre-commit-hooks.yaml
git -C "$hooks" commit -qm hooks
rev="$(git -C "$hooks" rev-parse HEAD)"

repo="$work/repo"
mkdir -p "$repo"
cd "$repo"
git init -q
cat > .pre-commit-config.yaml <<YAML
repos:
  - repo: $hooks
    rev: $rev
    hooks:
      - id: torchleak
YAML
git add .pre-commit-config.yaml
git commit -qm "pre-commit config" --no-verify
pre-commit install >/dev/null

fail=0
expect() {  # expect NAME CONDITION...
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=$((fail + 1)); fi
}

cat > train.py <<'PY'
import torch


def train(model, loader, optimizer, criterion):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running
PY
cp train.py "$work/train.py.orig"
git add train.py
status=0
out="$(git commit -m "leaky training loop" 2>&1)" || status=$?
expect "a commit with a leaking file is refused" test "$status" -ne 0
expect "the hook output names the file, line and column" grep -q "train.py:11:9: warning: .*\[TL001 accumulate-undetached\]" <<<"$out"
expect "the refused commit did not happen" test "$(git rev-list --count HEAD)" -eq 1
expect "the hook did not modify the file" cmp -s train.py "$work/train.py.orig"

sed -i 's/running += loss$/running += loss.item()/' train.py
git add train.py
status=0
out="$(git commit -m "fixed training loop" 2>&1)" || status=$?
expect "a commit of a clean file passes" test "$status" -eq 0
expect "the clean commit happened" test "$(git rev-list --count HEAD)" -eq 2
expect "the hook ran and passed" grep -q "torchleak.*Passed" <<<"$out"

passed=$((7 - fail))
echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
