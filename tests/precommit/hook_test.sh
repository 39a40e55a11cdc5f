#!/usr/bin/env bash
# The real pre-commit (Debian's package) installs this repository's hook in a
# throwaway git repository: a commit with a leaking file is refused and the
# output names the line; a commit of a clean file passes; nothing is modified.
# A staged file is analyzed in the context of its project (a helper file's
# zero_grad, a wrap in another script), also when pre-commit splits a long
# file list into several calls.
set -euo pipefail
binary="$(realpath "$1")"
source_dir="$(realpath "$2")"
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
checks=0
expect() {  # expect NAME CONDITION...
  local name="$1"; shift
  checks=$((checks + 1))
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

# Only the staged file is passed, and it is analyzed in the context of the project: the helper's
# zero_grad (committed before) counts, so the training script is not reported (TL010).
mkdir -p helper_project
cp "$source_dir"/fixtures/python/TL010/neg_cross_file_helper/*.py helper_project/
git add helper_project/engine.py
git commit -qm "helper" >/dev/null 2>&1
git add helper_project/train.py
status=0
out="$(git commit -m "training script only" 2>&1)" || status=$?
expect "a commit of the training script alone passes (its helper clears the gradients)" test "$status" -eq 0

# The wrap in DataParallel is in a committed script; a commit that touches only the model's file
# is refused for TL005.
mkdir -p tagger
cp "$source_dir"/fixtures/python/TL005/cross_file_wrap/*.py tagger/
git add tagger/train.py
git commit -qm "wrap" >/dev/null 2>&1
git add tagger/model.py
status=0
out="$(git commit -m "model only" 2>&1)" || status=$?
expect "a commit of the model's file alone is refused (wrapped in DataParallel elsewhere)" test "$status" -ne 0
expect "the refusal names TL005 in the model's file" grep -q "tagger/model.py:18:.*\[TL005 pad-packed-no-total-length\]" <<<"$out"
git commit -qm "model" --no-verify >/dev/null

# pre-commit splits a long file list into several calls (about 128 KiB of arguments each): with
# enough files between them, model.py and wrap.py land in different calls; each call still sees
# the whole project, so TL005 is reported.
mkdir -p many
for i in $(seq 1 2600); do
  printf 'x = %d\n' "$i" > "many/a_module_with_a_rather_long_name_to_fill_the_argument_list_$i.py"
done
git mv tagger/model.py aa_model.py  # first and last in the sorted file list
git mv tagger/train.py zz_wrap.py
sed -i 's/^from model import Tagger/from aa_model import Tagger/' zz_wrap.py
git add -A
git commit -qm "many files" --no-verify >/dev/null
mkdir -p "$work/counting"
printf '#!/bin/sh\necho call >> "%s"\nexec "%s" "$@"\n' "$work/calls" "$binary" > "$work/counting/torchleak"
chmod +x "$work/counting/torchleak"
status=0
out="$(PATH="$work/counting:$PATH" pre-commit run --all-files 2>&1)" || status=$?
expect "pre-commit split the file list into several calls" test "$(wc -l < "$work/calls")" -gt 1
expect "pre-commit run --all-files reports TL005 across the split calls" grep -q "aa_model.py:18:.*\[TL005 pad-packed-no-total-length\]" <<<"$out"

passed=$((checks - fail))
echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
