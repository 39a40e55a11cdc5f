# --output FILE: the report goes to the file (written whole through a
# temporary file and a rename, missing directories created), nothing to
# stdout; when it cannot be written: exit 2, the reason, and no file left.
source "$(dirname "$0")/common.bash"
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

write_train train.py

case_ "--output: the same report as on stdout, nothing printed"
tl check --select TL001 --format json train.py
stdout_report=$OUT
tl check --select TL001 --format json --output report.json train.py
expect_rc 1
expect_out </dev/null
expect_err </dev/null
compare "report.json" "$(cat report.json)" <<<"$stdout_report"

case_ "-o, text: no colour in a file, the summary included"
tl check --select TL001 -o report.txt train.py
expect_rc 1
expect_out </dev/null
grep -q $'\033' report.txt && fail "escape codes in report.txt"
compare "last line" "$(tail -n 1 report.txt | normalise)" <<'TXT'
Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "an existing report is replaced"
printf 'old content that is longer than the new report will be, surely, and then some more\n%.0s' {1..100} >report.json
tl check --select TL001 --format json --output report.json train.py
compare "report.json" "$(cat report.json)" <<<"$stdout_report"

case_ "missing directories are created"
tl check --select TL001 --format sarif --output out/deep/report.sarif train.py
expect_rc 1
[ -s out/deep/report.sarif ] || fail "out/deep/report.sarif not written"

case_ "a parent that is a file: 2, the reason, nothing left behind"
printf 'x\n' >blocker
tl check --select TL001 --output blocker/report.txt train.py
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: blocker/report.txt: cannot write the report: cannot create directory blocker: Not a directory
TXT
compare "blocker" "$(cat blocker)" <<<"x"

case_ "the path is a directory: 2, the reason, no temporary file left"
mkdir existing_dir
tl check --select TL001 --output existing_dir train.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: existing_dir: cannot write the report: Is a directory
TXT
compare "files left" "$(ls -A | sort)" <<'TXT'
.home
.stderr
.stdout
blocker
existing_dir
out
report.json
report.txt
train.py
TXT

case_ "a read-only directory: 2, the old report untouched"
if [ "$(id -u)" != 0 ]; then
  mkdir ro && printf 'previous\n' >ro/report.txt && chmod 555 ro
  tl check --select TL001 --output ro/report.txt train.py
  expect_rc 2
  compare "ro/report.txt" "$(cat ro/report.txt)" <<<"previous"
  chmod 755 ro
fi

case_ "a path that could not be analyzed: the report is still written, exit 2"
tl check --select TL001 --format json --output partial.json train.py missing.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: missing.py: no such file or directory
TXT
compare "errors in partial.json" "$(jq -c '.errors' partial.json)" <<<'[{"path":"missing.py","message":"no such file or directory"}]'

case_ "standard output that cannot be written: 2"
if [ -w /dev/full ]; then
  "$TORCHLEAK" check --select TL001 train.py >/dev/full 2>"$WORK/.stderr"
  RC=$?
  expect_rc 2
  compare "stderr" "$(cat "$WORK/.stderr")" <<'TXT'
torchleak: error: cannot write the report to standard output: No space left on device
TXT
fi

done_
