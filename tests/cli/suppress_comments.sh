# Suppression comments end to end: each form silences TL001 on its line only;
# garbage is ignored with a note; skip-file at the top skips the file; and
# --report-unused-suppressions reports the ones that silence nothing (TL100).
source "$(dirname "$0")/common.bash"

# train.py with `$1` appended to line 14 (`total_loss += loss`, TL001 at 14:13).
train_with() {
  write_train train.py
  local suffix=$1
  sed -i "14s|\$|${suffix//|/\\|}|" train.py
}

for comment in "  # noqa: TL001" "  # noqa: TL001, TL004" "  # noqa" "  # NOQA:TL001" \
  "  # torchleak: ignore[TL001]" "  # torchleak: ignore[accumulate-undetached]" "  # torchleak: ignore" \
  "  # type: ignore  # noqa: TL001"; do
  case_ "'$comment' silences TL001"
  train_with "$comment"
  tl check train.py --select TL001
  expect_rc 0
  expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
  expect_err </dev/null
done

for comment in "  # noqa: TL004" "  # noqa: E501" "  # torchleak: ignore[missing-worker-init-fn]"; do
  case_ "'$comment' names another rule: TL001 stays"
  train_with "$comment"
  tl check train.py --select TL001 --quiet
  expect_rc 1
  expect_out <<TXT
train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss$comment
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@
TXT
  expect_err </dev/null
done

case_ "a directive on the line above does not reach the finding"
write_train train.py
sed -i '14i\            # noqa: TL001' train.py
tl check train.py --select TL001 --quiet
expect_rc 1
expect_out <<'TXT'
train.py:15:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   15 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@
TXT

case_ "an unclosed ignore[ is ignored with a note; the finding stays"
train_with "  # torchleak: ignore[TL001"
tl check train.py --select TL001
expect_rc 1
[[ "$OUT" == "train.py:14:13: warning: "* ]] || fail "TL001 not reported: $OUT"
expect_err <<'TXT'
torchleak: note: train.py: line 14: invalid `torchleak: ignore` directive: `[` is not closed by `]`; ignored
TXT

case_ "noqa with no code is ignored with a note"
train_with "  # noqa: ???"
tl check train.py --select TL001
expect_rc 1
expect_err <<'TXT'
torchleak: note: train.py: line 14: invalid `# noqa` directive: expected a comma-separated list of codes after `noqa:` (e.g. `# noqa: TL001, TL006`); ignored
TXT

case_ "a code that names no rule is ignored with a note"
train_with "  # noqa: TL999"
tl check train.py --select TL001
expect_rc 1
expect_err <<'TXT'
torchleak: note: train.py: line 14: `noqa` names no torchleak rule: `TL999`; ignored
TXT

case_ "--quiet hides the notes"
tl check train.py --select TL001 --quiet
expect_rc 1
expect_err </dev/null

case_ "skip-file above the first statement skips the file"
write_train train.py
sed -i '1i\# Vendored from upstream; do not edit.\n# torchleak: skip-file\n' train.py
tl check train.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err </dev/null

case_ "skip-file below the first statement is ignored with a note"
write_train train.py
echo "# torchleak: skip-file" >>train.py
tl check train.py --select TL001 --quiet
expect_rc 1
expect_out <<'TXT'
train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@
TXT
tl check train.py --select TL001
expect_err <<'TXT'
torchleak: note: train.py: line 16: `torchleak: skip-file` below the first statement (line 1); ignored: put it at the top of the file
TXT

case_ "an unused suppression is not reported without the option"
train_with ".item()  # noqa: TL001"
tl check train.py --select TL001,TL004
expect_rc 0

case_ "--report-unused-suppressions reports it, with its fix"
tl check train.py --select TL001,TL004 --report-unused-suppressions
expect_rc 1
expect_out <<'TXT'
train.py:14:40: warning: Unused `noqa` directive (unused: `TL001`) [TL100 unused-suppression]
   14 |             total_loss += loss.item()  # noqa: TL001
      |                                        ^^^^^^^^^^^^^
      = help: remove the directive: nothing on the lines it covers needs it

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT
tl check train.py --select TL001,TL004 --report-unused-suppressions --format json
grep -qF '"title": "Remove the unused `noqa` directive"' <<<"$OUT" || fail "no fix in the JSON report: $OUT"

case_ "only the unused code of a list is reported"
train_with "  # noqa: TL001, TL004"
tl check train.py --select TL001,TL004 --report-unused-suppressions --quiet
expect_rc 1
expect_out <<'TXT'
train.py:14:33: warning: Unused `noqa` directive (unused: `TL004`) [TL100 unused-suppression]
   14 |             total_loss += loss  # noqa: TL001, TL004
      |                                 ^^^^^^^^^^^^^^^^^^^^
      = help: remove the codes that silence nothing
TXT

case_ "a suppression for a rule that did not run is not judged"
train_with ".item()  # noqa: TL001"
tl check train.py --report-unused-suppressions --select TL004
expect_rc 0

case_ "a bare noqa may be another tool's: never reported"
train_with ".item()  # noqa"
tl check train.py --select TL001,TL004 --report-unused-suppressions
expect_rc 0

case_ "TL100 can be ignored like any rule"
train_with ".item()  # noqa: TL001"
tl check train.py --select TL001,TL004 --report-unused-suppressions --ignore TL100
expect_rc 0

done_
