# Exit codes: 0 nothing found, 1 findings, 2 a usage error or a path that
# could not be analyzed (named on stderr; the other files are still analyzed).
source "$(dirname "$0")/common.bash"

write_clean proj/clean.py
write_train proj/train.py

case_ "nothing found: 0"
tl check --select TL001 proj/clean.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err </dev/null

case_ "findings: 1"
tl check --select TL001 proj
expect_rc 1

case_ "--exit-zero: 0 with findings, the report unchanged"
tl check --select TL001 --quiet proj
quiet_report=$OUT
tl check --select TL001 --quiet --exit-zero proj
expect_rc 0
compare "stdout" "$OUT" <<<"$quiet_report"

case_ "a missing path: 2, named on stderr, the other paths still analyzed"
tl check --select TL001 --quiet proj/train.py missing.py proj/clean.py
expect_rc 2
expect_out <<<"$quiet_report"
expect_err <<'TXT'
torchleak: error: missing.py: no such file or directory
TXT

case_ "a missing path with --exit-zero is still 2"
tl check --select TL001 --exit-zero missing_dir
expect_rc 2
expect_out <<'TXT'
No problems found (0 files analyzed in N s); 1 path could not be analyzed
TXT
expect_err <<'TXT'
torchleak: error: missing_dir: no such file or directory
TXT

case_ "an unknown option: 2"
tl check --no-such-option
expect_rc 2
expect_err <<'TXT'
torchleak: error: The following argument was not expected: --no-such-option
Run with --help for more information.
TXT

case_ "an unknown format: 2"
tl check --format xml proj
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: --output-format: xml not in {text,full,concise,grouped,json,sarif,github,gitlab,junit,pylint,azure}
Run with --help for more information.
TXT

case_ "no subcommand: 2"
tl
expect_rc 2

case_ "--help: 0"
tl check --help
expect_rc 0
[[ "$OUT" == *"--exit-zero"* ]] || fail "check --help does not list --exit-zero"

case_ "--version prints the project's version"
version=$(sed -nE 's/^project\(torchleak VERSION ([0-9.]+).*/\1/p' "$SOURCE_DIR/CMakeLists.txt")
[ -n "$version" ] || fail "no version in CMakeLists.txt"
tl --version
expect_rc 0
expect_out <<<"torchleak $version"

done_
