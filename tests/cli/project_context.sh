# A file named alone is analyzed in the context of its project: the facts of the project's other
# files count (a zero_grad in a helper file, a DataParallel wrap in another script), the findings
# are the named file's. The project is the directory of the nearest configuration file, else the
# repository's root; --project-root names it; --isolated analyzes the named files alone.
source "$(dirname "$0")/common.bash"
command -v git >/dev/null || { echo "git is not installed"; exit 77; }

git init -q repo
cp "$SOURCE_DIR"/fixtures/python/TL010/neg_cross_file_helper/*.py repo/
mkdir -p repo/tagger
cp "$SOURCE_DIR"/fixtures/python/TL005/cross_file_wrap/*.py repo/tagger/
rm -f repo/tagger/*.fixed
cd repo || exit 2

rules() { sed -nE 's/^([^ :]+):([0-9]+):[0-9]+: [a-z]+: .* \[(TL[0-9]+) [^]]*\]$/\3 \1:\2/p' <<<"$OUT"; }

case_ "the helper file's zero_grad counts when only the training script is named"
tl check --select TL010 train.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed with 3 other files of the project in N s)
TXT

case_ "--isolated: the training script alone; its helper is not analyzed, so it may clear"
tl check --select TL010 --isolated train.py
expect_rc 0

case_ "the wrap in the training script counts when only the model's file is named"
tl check --select TL005 tagger/model.py
expect_rc 1
compare "findings" "$(rules)" <<'TXT'
TL005 tagger/model.py:18
TXT

case_ "--isolated: the model's file alone, the wrap is not seen"
tl check --select TL005 --isolated tagger/model.py
expect_rc 0

case_ "from a subdirectory, the project is still the repository"
cd tagger || exit 2
tl check --select TL005 model.py
expect_rc 1
compare "findings" "$(rules)" <<'TXT'
TL005 model.py:18
TXT
cd .. || exit 2

case_ "the nearest configuration file makes a project of its directory"
printf 'select = ["TL005", "TL010"]\n' >tagger/torchleak.toml
tl check tagger/model.py
expect_rc 1
compare "findings" "$(rules)" <<'TXT'
TL005 tagger/model.py:18
TXT
compare "summary" "$(tail -n 1 <<<"$OUT")" <<'TXT'
Found 1 problem in 1 file (1 file analyzed with 1 other file of the project in N s); 1 fixable with --fix --unsafe-fixes
TXT

case_ "--project-root names the project"
tl check --select TL010 --project-root . train.py
expect_rc 0
tl check --select TL005 --project-root tagger tagger/model.py
expect_rc 1

case_ "--isolated and --project-root do not go together"
tl check --isolated --project-root . train.py
expect_rc 2

# The verbose line of the last run, its cache directory and time replaced.
verbose_line() { grep 'files\? checked' <<<"$ERR" | sed -E 's/ in [^ ]*torchleak_cache\)/ in CACHE)/; s/, in [0-9.]+ s$/, in N s/'; }

case_ "a second run takes the named file's findings and the other files' facts from the cache"
rm -rf .torchleak_cache tagger/torchleak.toml
tl check -v --select TL005 tagger/model.py
expect_rc 1
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (0 from the cache), 3 other files of the project read for their facts (0 from the cache in CACHE), in N s
TXT
tl check -v --select TL005 tagger/model.py
expect_rc 1
compare "findings" "$(rules)" <<'TXT'
TL005 tagger/model.py:18
TXT
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (1 from the cache), 3 other files of the project read for their facts (3 from the cache in CACHE), in N s
TXT
compare "the cache ignores itself" "$(cat .torchleak_cache/.gitignore)" <<'TXT'
# Automatically created by torchleak.
*
TXT

case_ "the same build installed elsewhere uses the entries; another build uses none"
cp "$TORCHLEAK" "$WORK/torchleak-copy"
TORCHLEAK_SAVED=$TORCHLEAK
TORCHLEAK=$WORK/torchleak-copy
tl check -v --select TL005 tagger/model.py
expect_rc 1
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (1 from the cache), 3 other files of the project read for their facts (3 from the cache in CACHE), in N s
TXT
# Another build: the copy with its GNU build ID changed (what a rebuild with other code gets).
if command -v readelf >/dev/null && command -v python3 >/dev/null; then
  id=$(readelf -n "$TORCHLEAK" | sed -n 's/^ *Build ID: *//p')
  [ -n "$id" ] || fail "the executable has no GNU build ID"
  python3 - "$TORCHLEAK" "$id" <<'PY'
import sys
path, build_id = sys.argv[1], bytes.fromhex(sys.argv[2])
data = open(path, "rb").read()
assert data.count(build_id) == 1, "the build ID is not found once in the executable"
other = bytes([build_id[0] ^ 0xFF]) + build_id[1:]
open(path, "wb").write(data.replace(build_id, other))
PY
  tl check -v --select TL005 tagger/model.py
  expect_rc 1
  compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (0 from the cache), 3 other files of the project read for their facts (0 from the cache in CACHE), in N s
TXT
fi
TORCHLEAK=$TORCHLEAK_SAVED
rm -f "$WORK/torchleak-copy"

case_ "a module created where an import looked, shadowing the one it found, is seen through the cache"
mkdir -p scripts
cp train.py scripts/train.py
rm -rf .torchleak_cache
tl check -v --select TL010 scripts/train.py
expect_rc 0
tl check -v --select TL010 scripts/train.py
expect_rc 0
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (1 from the cache), 4 other files of the project read for their facts (4 from the cache in CACHE), in N s
TXT
# scripts/engine.py now comes first on the script's path: its begin_step clears nothing.
printf 'def begin_step(model, optimizer):\n    model.train()\n' >scripts/engine.py
tl check -v --select TL010 scripts/train.py
expect_rc 1
compare "findings" "$(rules)" <<'TXT'
TL010 scripts/train.py:12
TXT
rm scripts/engine.py
tl check -v --select TL010 scripts/train.py
expect_rc 0

case_ "a run's output directory does not invalidate the cache; a package where an import looked does"
tl check -v --select TL010 scripts/train.py
expect_rc 0
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (1 from the cache), 4 other files of the project read for their facts (4 from the cache in CACHE), in N s
TXT
mkdir -p wandb/run-1 scripts/lightning_logs
tl check -v --select TL010 scripts/train.py
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (1 from the cache), 4 other files of the project read for their facts (4 from the cache in CACHE), in N s
TXT
mkdir scripts/engine
: >scripts/engine/__init__.py
tl check -v --select TL010 scripts/train.py
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (0 from the cache), 5 other files of the project read for their facts (4 from the cache in CACHE), in N s
TXT
rm -r scripts wandb

case_ "the helper's file is the same file however the named file is spelled (the cache keeps its facts)"
mkdir -p scripts
cp train.py scripts/train.py
printf 'def begin_step(model, optimizer):\n    model.train()\n' >scripts/engine.py
tl check --select TL010 scripts/train.py
expect_rc 1
tl check --select TL010 "$PWD/scripts/train.py"
expect_rc 1
tl check --select TL010 ./scripts/../scripts/train.py
expect_rc 1
rm -r scripts

case_ "torchleak clean removes the entries"
tl clean
expect_rc 0
tl check -v --select TL005 tagger/model.py
compare "verbose" "$(verbose_line)" <<'TXT'
torchleak: verbose: 1 file checked (0 from the cache), 3 other files of the project read for their facts (0 from the cache in CACHE), in N s
TXT

done_
