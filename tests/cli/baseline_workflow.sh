# The baseline end to end: --write-baseline records the findings (exit 0);
# --baseline reports only new ones, also after lines are added above an old
# one; fixed findings are counted in a note; bad files and options are errors.
source "$(dirname "$0")/common.bash"
# TL001 only: the fixtures are about it (the validation loop below is also TL006's business).

write_train src/train.py

case_ "--write-baseline records the findings and reports none"
tl check src --select TL001 --write-baseline baseline.json
expect_rc 0
expect_out </dev/null
expect_err <<'TXT'
torchleak: recorded 1 finding in baseline.json
TXT
compare "baseline.json" "$(cat baseline.json)" <<'TXT'
{
  "version": 1,
  "tool": "torchleak",
  "findings": [
    {"rule":"TL001","path":"src/train.py","context":"train","fingerprint":"6c2c8286ba728cdb","count":1}
  ]
}
TXT

case_ "--baseline: the recorded finding is not reported"
tl check src --select TL001 --baseline baseline.json
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err </dev/null

case_ "lines added above the finding keep its identity"
sed -i '1i\"""Training loop for the classifier."""\nimport logging\n\nlog = logging.getLogger(__name__)\n' src/train.py
sed -i 's/^    total_loss = 0.0$/    total_loss = 0.0\n    log.info("training for %d epochs", epochs)/' src/train.py
grep -n 'total_loss += loss' src/train.py | grep -q '^20:' || fail "the finding did not move to line 20"
tl check src --select TL001 --baseline baseline.json
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT

case_ "reformatting the statement keeps its identity"
sed -i 's/total_loss += loss$/total_loss  +=  loss   # running total/' src/train.py
tl check src --select TL001 --baseline baseline.json
expect_rc 0

case_ "a new finding is reported"
cat >>src/train.py <<'PY'


def validate(model, loader, criterion):
    val_loss = 0.0
    for inputs, targets in loader:
        batch_loss = criterion(model(inputs), targets)
        val_loss += batch_loss
    return val_loss
PY
tl check src --select TL001 --baseline baseline.json --quiet
expect_rc 1
expect_out <<'TXT'
src/train.py:28:9: warning: @MSG(val_loss,batch_loss)@ [TL001 accumulate-undetached]
   28 |         val_loss += batch_loss
      |         ^^^^^^^^^^^^^^^^^^^^^^
      = help: @HELP(batch_loss)@
TXT

case_ "a second identical finding in the same function is new"
write_train src/train.py
sed -i 's/^            total_loss += loss$/            total_loss += loss\n            total_loss += loss/' src/train.py
tl check src --select TL001 --baseline baseline.json --quiet
expect_rc 1
[ "$(grep -c '^src/train.py:1[45]:13: warning: ' <<<"$OUT")" = 1 ] || fail "expected one new finding: $OUT"

case_ "a fixed finding is counted in a note"
write_train src/train.py
sed -i 's/total_loss += loss$/total_loss += loss.item()/' src/train.py
tl check src --select TL001 --baseline baseline.json
expect_rc 0
expect_err <<'TXT'
torchleak: note: baseline.json: 1 recorded finding no longer occurs; --write-baseline updates it
TXT

case_ "paths are relative to the baseline's directory"
write_train src/train.py
mkdir -p ci
tl check src --select TL001 --write-baseline ci/baseline.json
grep -qF '"path":"../src/train.py"' ci/baseline.json || fail "path not relative to ci/: $(cat ci/baseline.json)"
(cd src && "$TORCHLEAK" check . --select TL001 --baseline ../ci/baseline.json >/dev/null 2>&1) || fail "not matched from another directory"

case_ "a missing baseline: 2"
tl check src --select TL001 --baseline missing.json
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: missing.json: cannot read the baseline: No such file or directory
TXT

case_ "a file that is not a baseline: 2"
echo '{"version": 7, "findings": []}' >bad.json
tl check src --select TL001 --baseline bad.json
expect_rc 2
expect_err <<'TXT'
torchleak: error: bad.json: not a torchleak baseline: version 7 is not supported (this torchleak reads version 1; rewrite it with --write-baseline)
TXT

case_ "--baseline with --write-baseline is a usage error"
tl check src --select TL001 --baseline baseline.json --write-baseline baseline.json
expect_rc 2

done_
