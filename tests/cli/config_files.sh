# Configuration files end to end: discovery of the nearest file per directory,
# pyproject.toml's [tool.torchleak], --config, --isolated, the command line on
# top, per-file-ignores and exclude, and bad files (exit 2, the file, the key
# and what was expected on stderr, nothing analyzed).
source "$(dirname "$0")/common.bash"

no_problems() {
  expect_rc 0
  expect_out <<TXT
No problems found ($1 analyzed in N s)
TXT
  expect_err </dev/null
}

# `rule path:line` of each TL001 finding of the text report (the rule the fixtures are about).
findings() { sed -nE 's/^([^ :]+):([0-9]+):[0-9]+: [a-z]+: .* \[(TL001) [^]]*\]$/\3 \1:\2/p' <<<"$OUT"; }

write_train proj/train.py
write_train proj/legacy/train.py
write_train proj/legacy/deep/train.py

case_ "no configuration: every file"
tl check proj
expect_rc 1
compare "findings" "$(findings)" <<'TXT'
TL001 proj/legacy/deep/train.py:14
TL001 proj/legacy/train.py:14
TL001 proj/train.py:14
TXT

case_ "the nearest file applies to each directory below it"
printf '[project]\nname = "proj"\n\n[tool.torchleak]\nselect = ["TL001", "TL004"]\n' >proj/pyproject.toml
printf 'ignore = ["accumulate-undetached"]\n' >proj/legacy/torchleak.toml
tl check proj
expect_rc 1
compare "findings" "$(findings)" <<'TXT'
TL001 proj/train.py:14
TXT

case_ "a pyproject.toml without [tool.torchleak] does not count"
printf '[tool.ruff]\nline-length = 100\n' >proj/legacy/deep/pyproject.toml
tl check proj
compare "findings" "$(findings)" <<'TXT'
TL001 proj/train.py:14
TXT

case_ ".torchleak.toml wins over torchleak.toml in one directory"
printf 'ignore = ["TL004"]\n' >proj/legacy/.torchleak.toml
tl check proj
compare "findings" "$(findings)" <<'TXT'
TL001 proj/legacy/deep/train.py:14
TL001 proj/legacy/train.py:14
TL001 proj/train.py:14
TXT
rm proj/legacy/.torchleak.toml

case_ "--config applies one file to every file"
printf 'select = ["TL001"]\n' >strict.toml
tl check proj --config strict.toml
expect_rc 1
compare "findings" "$(findings)" <<'TXT'
TL001 proj/legacy/deep/train.py:14
TL001 proj/legacy/train.py:14
TL001 proj/train.py:14
TXT

case_ "--isolated reads no file"
tl check proj --isolated
compare "findings" "$(findings)" <<'TXT'
TL001 proj/legacy/deep/train.py:14
TL001 proj/legacy/train.py:14
TL001 proj/train.py:14
TXT

case_ "--select on the command line replaces the file's select and ignore"
tl check proj/legacy --select TL001
compare "findings" "$(findings)" <<'TXT'
TL001 proj/legacy/deep/train.py:14
TL001 proj/legacy/train.py:14
TXT

case_ "--ignore on the command line adds to the file's"
tl check proj/train.py --ignore TL001
expect_rc 0
expect_out <<TXT
No problems found (1 file analyzed with 2 other files of the project in N s)
TXT

case_ "per-file-ignores, relative to the configuration's directory"
rm proj/legacy/torchleak.toml
printf '[tool.torchleak]\nselect = ["TL001", "TL004"]\n\n[tool.torchleak.per-file-ignores]\n"legacy/*" = ["TL001"]\n' >proj/pyproject.toml
tl check proj
compare "findings" "$(findings)" <<'TXT'
TL001 proj/train.py:14
TXT

case_ "exclude skips directories and files"
printf '[tool.torchleak]\nexclude = ["legacy/", "train.py"]\n' >proj/pyproject.toml
tl check proj
no_problems "0 files"

case_ "an unknown key: 2, naming the file and the key, nothing analyzed"
printf '[tool.torchleak]\nselct = ["TL001"]\n' >proj/pyproject.toml
tl check proj
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: proj/pyproject.toml:2:1: [tool.torchleak] key 'selct': unknown key (expected one of: extend, select, extend-select, ignore, extend-ignore, exclude, per-file-ignores, target-torch-version, device-memory, oversized-layer-threshold, extra-models, extra-losses, extra-optimizers, extra-data-parallel, models); did you mean 'select'?
TXT

case_ "a wrong type: 2"
printf '[tool.torchleak]\nselect = "TL001"\n' >proj/pyproject.toml
tl check proj/train.py
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: proj/pyproject.toml:2:10: [tool.torchleak] key 'select' must be an array of strings, not a string
TXT

case_ "a rule that does not exist: 2"
printf '[tool.torchleak]\nignore = ["TL999"]\n' >proj/pyproject.toml
tl check proj
expect_rc 2
expect_err <<'TXT'
torchleak: error: proj/pyproject.toml:2:11: [tool.torchleak] key 'ignore' names no rule: 'TL999' (expected rule codes such as "TL001", prefixes such as "TL0", names such as "accumulate-undetached", or "ALL")
TXT

case_ "a bad threshold: 2"
printf '[tool.torchleak]\noversized-layer-threshold = "lots"\n' >proj/pyproject.toml
tl check proj
expect_rc 2
expect_err <<'TXT'
torchleak: error: proj/pyproject.toml:2:29: [tool.torchleak] key 'oversized-layer-threshold' must be a size in bytes: a positive integer or a string such as "1GiB" or "512MiB", not "lots"
TXT

case_ "a TOML syntax error: 2, with line and column"
printf '[tool.torchleak]\nselect = ["TL001"\n' >proj/pyproject.toml
tl check proj
expect_rc 2
expect_err <<'TXT'
torchleak: error: proj/pyproject.toml:2:19: invalid TOML: Error while parsing array: encountered end-of-file
TXT

case_ "a bad file in a subdirectory stops the whole run"
printf '[tool.torchleak]\nselect = ["TL001"]\n' >proj/pyproject.toml
printf 'target-torch-version = "two"\n' >proj/legacy/deep/torchleak.toml
tl check proj
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: proj/legacy/deep/torchleak.toml:1:24: key 'target-torch-version' must be a version "major.minor" such as "2.1", not "two"
TXT
rm proj/legacy/deep/torchleak.toml

case_ "--config naming a missing file: 2"
tl check proj --config missing.toml
expect_rc 2
expect_err <<'TXT'
torchleak: error: missing.toml: cannot read the configuration file: No such file or directory
TXT

case_ "--config naming a pyproject.toml without the table: 2"
printf '[tool.ruff]\n' >other.toml && mkdir -p other && mv other.toml other/pyproject.toml
tl check proj --config other/pyproject.toml
expect_rc 2
expect_err <<'TXT'
torchleak: error: other/pyproject.toml: has no [tool.torchleak] table
TXT

case_ "--config with --isolated is a usage error"
tl check proj --config strict.toml --isolated
expect_rc 2

done_
