#!/usr/bin/env bash
# The Bazel aspect of integrations/bazel on a workspace with two packages (Debian's
# bazel-bootstrap, offline, native rules only): a training script's target is checked with the facts of the helper
# library it depends on (the helper's zero_grad counts: no TL010), its own leak is reported in the
# aspect's output; an unchanged rebuild runs no action, a build from a clean output base takes the
# results from the disk cache, and an edit of the helper re-checks the script.
set -euo pipefail
binary="$(realpath "$1")"
source_dir="$(realpath "$2")"
if ! command -v bazel >/dev/null; then
  echo "bazel is not installed (scripts/test.sh installs bazel-bootstrap)"
  exit 77
fi

work="$(mktemp -d)"
ws="$work/ws"
output_base="$work/output_base"
disk_cache="$work/disk_cache"
cleanup() {
  (cd "$ws" 2>/dev/null && bazel --output_base="$output_base" shutdown >/dev/null 2>&1) || true
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$ws/tools" "$ws/engine" "$ws/train"
cat > "$ws/WORKSPACE" <<BZL
local_repository(name = "torchleak", path = "$source_dir/integrations/bazel")
BZL
cp "$binary" "$ws/tools/torchleak"
cat > "$ws/tools/BUILD" <<'BZL'
exports_files(["torchleak"])
BZL
cat > "$ws/tools/lint.bzl" <<'BZL'
load("@torchleak//:torchleak.bzl", "torchleak_aspect")

torchleak = torchleak_aspect(binary = "@//tools:torchleak")
BZL
cat > "$ws/engine/BUILD" <<'BZL'
py_library(name = "engine", srcs = ["engine.py"], visibility = ["//visibility:public"])
BZL
cat > "$ws/engine/engine.py" <<'PY'
def begin_step(model, optimizer):
    model.train()
    optimizer.zero_grad()
PY
cat > "$ws/train/BUILD" <<'BZL'
py_library(name = "train", srcs = ["train.py"], deps = ["//engine"])
BZL
cat > "$ws/train/train.py" <<'PY'
from engine.engine import begin_step


def fit(model, optimizer, criterion, loader):
    running = 0.0
    for x, y in loader:
        begin_step(model, optimizer)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running
PY

fail=0
checks=0
expect() {  # expect NAME CONDITION...
  local name="$1"; shift
  checks=$((checks + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=$((fail + 1)); fi
}

cd "$ws"
build() {
  bazel --output_base="$output_base" build //... --aspects=//tools:lint.bzl%torchleak --output_groups=torchleak \
    --disk_cache="$disk_cache" --color=no --curses=no "$@" 2>&1
}
report="bazel-bin/train/train.torchleak.txt"

out="$(build)" || true
expect "the aspect builds" grep -q "Build completed successfully" <<<"$out"
expect "the script's report holds exactly its TL001 finding" \
  test "$(grep -E '^[^ ].*: warning: ' "$report" | sed -E 's/^([^:]+):([0-9]+):[0-9]+: .*\[(TL[0-9]+) .*$/\3 \1:\2/')" = "TL001 train/train.py:11"
expect "the helper's zero_grad counts: no TL010 in the script's report" bash -c "! grep -q TL010 '$report'"
expect "the helper's report is empty" test ! -s bazel-bin/engine/engine.torchleak.txt

out="$(build)" || true
expect "an unchanged rebuild succeeds" grep -q "Build completed successfully" <<<"$out"
expect "... and runs no torchleak action" bash -c "! grep -qE '[1-9][0-9]* (linux-sandbox|processwrapper-sandbox|sandbox|local|worker)' <<<'$out'"

bazel --output_base="$output_base" clean >/dev/null 2>&1
out="$(build)" || true
expect "after a clean, the results come from the disk cache" grep -qE "[1-9][0-9]* (disk|remote) cache hit" <<<"$out"
expect "... and the report is the same" grep -q "TL001" "$report"

cat > engine/engine.py <<'PY'
def begin_step(model, optimizer):
    model.train()
PY
out="$(build)" || true
expect "an edit of the helper re-checks the script: TL010 now" grep -q "TL010" "$report"

echo "$((checks - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
