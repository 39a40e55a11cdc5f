# Shared by the tests/cli/*.sh scripts (sourced, not run: its name does not
# end in .sh, so ctest does not pick it up).
#
#   bash SCRIPT.sh TORCHLEAK_BINARY SOURCE_DIR
#
# Each script works in a fresh temporary directory, removed on exit, runs the
# binary with `tl ARGS...` and compares exit codes and exact output. Only the
# elapsed time of the text summary ("in 0.01 s") is normalised, to "in N s".
set -u

if [ $# -lt 2 ]; then
  echo "usage: bash $0 TORCHLEAK_BINARY SOURCE_DIR" >&2
  exit 2
fi
TORCHLEAK=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SOURCE_DIR=$(cd "$2" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 2
# Keep the user's git configuration (a global excludes file) out of the tests.
export HOME="$WORK/.home" GIT_CONFIG_NOSYSTEM=1 XDG_CONFIG_HOME="$WORK/.home/.config"
mkdir -p "$HOME"
unset NO_COLOR
export LC_ALL=C  # sort and ls order bytes, whatever the machine's locale
FAILURES=0
CASE="(none)"

# Names the case that the following checks belong to.
case_() { CASE=$*; }

# Runs torchleak; its stdout, stderr and exit code land in OUT, ERR and RC.
tl() {
  "$TORCHLEAK" "$@" >"$WORK/.stdout" 2>"$WORK/.stderr"
  RC=$?
  OUT=$(normalise <"$WORK/.stdout")
  ERR=$(normalise <"$WORK/.stderr")
}

normalise() { sed -E 's/ in [0-9]+\.[0-9]{2} s\)/ in N s)/'; }

fail() {
  echo "FAIL [$CASE]: $*" >&2
  FAILURES=$((FAILURES + 1))
}

expect_rc() {
  [ "$RC" = "$1" ] || fail "exit code $RC, expected $1${OUT:+
--- stdout:
$OUT}${ERR:+
--- stderr:
$ERR}"
}

# expect_out <<'EOF' ... EOF: stdout equals the here-document exactly.
expect_out() { compare "stdout" "$OUT"; }
expect_err() { compare "stderr" "$ERR"; }

# TL001's wording, in one place: expected texts write @MSG(total,loss)@ for
# the message about accumulator `total` and value `loss` and @HELP(loss)@ for
# its hint. (The fix's title depends on the code: tests spell it out.)
tl001_message() { printf '`%s` accumulates `%s` with its autograd graph, keeping every iteration'"'"'s graph alive' "$1" "$2"; }
tl001_help() { printf 'accumulate `%s.item()` (a Python number) or `%s.detach()`' "$1" "$1"; }

expand() {
  local text
  text=$(cat)
  while [[ $text =~ @MSG\(([^,\)]+),([^\)]+)\)@ ]]; do
    text=${text//"${BASH_REMATCH[0]}"/"$(tl001_message "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")"}
  done
  while [[ $text =~ @HELP\(([^\)]+)\)@ ]]; do
    text=${text//"${BASH_REMATCH[0]}"/"$(tl001_help "${BASH_REMATCH[1]}")"}
  done
  printf '%s\n' "$text"
}

compare() {
  local expected
  expected=$(expand)
  if [ "$2" != "$expected" ]; then
    fail "$1 differs (expected, actual):
$(diff <(printf '%s\n' "$expected") <(printf '%s\n' "$2"))"
  fi
}

# The fixture most cases use: a training loop whose running total keeps
# every iteration's graph alive (TL001 at 14:13), and a clean file.
write_train() {
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<'PY'
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
}

write_clean() {
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<'PY'
def mean(values):
    return sum(values) / len(values)
PY
}

done_() {
  if [ "$FAILURES" -gt 0 ]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}
