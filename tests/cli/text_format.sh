# The text report: compiler-style first line, the source line with a caret,
# the hint of the fix, the closing summary; --quiet, --statistics, --color.
source "$(dirname "$0")/common.bash"

write_train proj/train.py
write_clean proj/clean.py
mkdir -p proj/pkg
cat >proj/pkg/metrics.py <<'PY'
import torch


def evaluate(model, batches):
    seen = 0
    for batch in batches:
        seen += 1
    return seen


def fit(model, batches, optimizer):
    running = torch.zeros(())
    steps = 0
    for x, y in batches:
        optimizer.zero_grad()
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        running = running + loss
        steps += 1
    return running / steps
PY
# A tab before the finding: the caret line copies it.
cat >proj/pkg/tabs.py <<'PY'
def fit(model, batches, optimizer, criterion):
	total = 0
	for x, y in batches:
		loss = criterion(model(x), y)
		loss.backward()
		optimizer.step()
		total += loss
	return total
PY

case_ "text report"
tl check --select TL001 proj
expect_rc 1
expect_out <<'TXT'
proj/pkg/metrics.py:20:9: warning: @MSG(running,loss)@ [TL001 accumulate-undetached]
   20 |         running = running + loss
      |         ^^^^^^^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@

proj/pkg/tabs.py:7:3: warning: @MSG(total,loss)@ [TL001 accumulate-undetached]
    7 | 		total += loss
      | 		^^^^^^^^^^^^^
      = help: @HELP(loss)@

proj/train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@

Found 3 problems in 3 files (4 files analyzed in N s); 3 fixable with --fix
TXT
expect_err </dev/null

case_ "one finding, singular words"
tl check --select TL001 proj/train.py
expect_out <<'TXT'
proj/train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "paths are reported as given: ./proj and an absolute path"
(cd proj && "$TORCHLEAK" check --select TL001 --quiet ./train.py) >"$WORK/.q" 2>&1
grep -q '^train.py:14:13: warning: ' "$WORK/.q" || fail "./train.py not reported as train.py: $(cat "$WORK/.q")"
tl check --select TL001 --quiet "$WORK/proj/train.py"
[[ "$OUT" == "$WORK/proj/train.py:14:13: warning: "* ]] || fail "absolute path not kept: $OUT"

case_ "--quiet: the findings, no summary"
tl check --select TL001 --quiet proj/train.py proj/clean.py
expect_rc 1
expect_out <<'TXT'
proj/train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@
TXT

case_ "--quiet with nothing found prints nothing"
tl check --select TL001 --quiet proj/clean.py
expect_rc 0
expect_out </dev/null
expect_err </dev/null

case_ "--statistics: counts per rule instead of the findings"
tl check --select TL001 --statistics proj
expect_rc 1
expect_out <<'TXT'
3  TL001  [*] accumulate-undetached

Found 3 problems in 3 files (4 files analyzed in N s); 3 fixable with --fix
TXT

case_ "--statistics --quiet: the counts only"
tl check --select TL001 --statistics --quiet proj
expect_rc 1
expect_out <<'TXT'
3  TL001  [*] accumulate-undetached
TXT

case_ "--statistics with nothing found"
tl check --select TL001 --statistics proj/clean.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT

case_ "--statistics with sarif: a usage error"
tl check --statistics --format sarif proj
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: --statistics goes with --format text (json always has them)
TXT

E=$'\033'
case_ "--color always"
tl check --select TL001 --color always proj/train.py
expect_rc 1
expect_out <<TXT
${E}[1mproj/train.py:14:13${E}[0m: ${E}[1;33mwarning:${E}[0m @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
${E}[1;34m   14 |${E}[0m             total_loss += loss
${E}[1;34m      |${E}[0m             ${E}[1;33m^^^^^^^^^^^^^^^^^^${E}[0m
      = ${E}[1;36mhelp:${E}[0m @HELP(loss)@

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "--color always wins over NO_COLOR"
NO_COLOR=1 tl check --select TL001 --color always --quiet proj/train.py
[[ "$OUT" == *"${E}["* ]] || fail "no colour with --color always and NO_COLOR"

case_ "--color never, and auto when not on a terminal: no escape codes"
for mode in never auto; do
  tl check --select TL001 --color "$mode" proj/train.py
  [[ "$OUT" != *"${E}"* ]] || fail "escape codes with --color $mode into a pipe"
done

case_ "--color auto on a terminal colours; NO_COLOR turns it off"
if command -v script >/dev/null; then
  script -qec "\"$TORCHLEAK\" check --select TL001 --quiet proj/train.py" /dev/null >"$WORK/.tty" 2>&1
  grep -q "${E}\[1;33mwarning:" "$WORK/.tty" || fail "no colour on a terminal: $(cat -v "$WORK/.tty")"
  NO_COLOR=1 script -qec "\"$TORCHLEAK\" check --select TL001 --quiet proj/train.py" /dev/null >"$WORK/.tty" 2>&1
  ! grep -q "${E}\[" "$WORK/.tty" || fail "colour on a terminal despite NO_COLOR: $(cat -v "$WORK/.tty")"
fi

case_ "--color with a bad value: 2"
tl check --color sometimes proj
expect_rc 2

done_
