# Which files `check` analyzes: .py and .pyi files under the paths given;
# hidden directories, virtual environments (pyvenv.cfg, conda-meta), build
# trees (CMakeCache.txt) and package/cache directories skipped; .gitignore
# respected in a git work tree unless --no-gitignore; --exclude globs.
source "$(dirname "$0")/common.bash"
command -v git >/dev/null || { echo "git is not installed"; exit 77; }

git init -q repo
cd repo || exit 2
for f in src/model.py env/agent.py target/run.py .hidden/secret.py .venv/lib/x.py \
         myenv/lib/site.py condaenv/lib/c.py cmake-out/gen.py node_modules/pkg/x.py __pycache__/c.py \
         build/lib/x.py dist/x.py data/gen/make.py generated/out.py logs/ignored.py sub/keep.py \
         sub/skip_me.py pkg.egg-info/x.py; do
  write_train "$f"
done
write_clean src/stubs.pyi
touch myenv/pyvenv.cfg cmake-out/CMakeCache.txt
mkdir -p condaenv/conda-meta
printf 'not python\n' >notes.txt
printf 'generated/\n*ignored.py\n' >.gitignore
printf 'skip_me.py\n' >sub/.gitignore
ln -s .. src/loop                   # a linked directory is not entered
ln -s ../env/agent.py src/linked.py  # a linked file is analyzed

# The analyzed files, from the quiet report's first lines (every fixture has one finding).
analyzed() { grep -E '^[^ ].*: warning: ' <<<"$OUT" | cut -d: -f1 | sort; }

case_ "the default walk"
tl check --select TL001 --quiet
expect_rc 1
compare "analyzed files" "$(analyzed)" <<'TXT'
data/gen/make.py
env/agent.py
src/linked.py
src/model.py
sub/keep.py
target/run.py
TXT
tl check --select TL001 --statistics
compare "summary" "$(tail -n 1 <<<"$OUT")" <<'TXT'
Found 6 problems in 6 files (7 files analyzed in N s); 6 fixable with --fix
TXT

case_ "--no-gitignore"
tl check --select TL001 --quiet --no-gitignore .
compare "analyzed files" "$(analyzed)" <<'TXT'
data/gen/make.py
env/agent.py
generated/out.py
logs/ignored.py
src/linked.py
src/model.py
sub/keep.py
sub/skip_me.py
target/run.py
TXT

case_ "--exclude by directory name, by path glob, by file name; comma-separated and repeated"
tl check --select TL001 --quiet --exclude data --exclude 'sub/*,run.py' --exclude linked.py
compare "analyzed files" "$(analyzed)" <<'TXT'
env/agent.py
src/model.py
TXT

case_ "--exclude matches paths under the directory given, too"
tl check --select TL001 --quiet --exclude 'gen/*' data
expect_rc 0
expect_out </dev/null

case_ "a subdirectory given as ./src/ is reported as src/..."
tl check --select TL001 --quiet ./src/
compare "analyzed files" "$(analyzed)" <<'TXT'
src/linked.py
src/model.py
TXT

case_ "from a subdirectory, .gitignore rules of the repository still apply"
cd sub || exit 2
tl check --select TL001 --quiet
compare "analyzed files" "$(analyzed)" <<'TXT'
keep.py
TXT
cd .. || exit 2

case_ "a file named explicitly is analyzed even if ignored or hidden"
tl check --select TL001 --quiet generated/out.py .hidden/secret.py myenv/lib/site.py
compare "analyzed files" "$(analyzed)" <<'TXT'
.hidden/secret.py
generated/out.py
myenv/lib/site.py
TXT

case_ "a skipped directory named explicitly is walked"
tl check --select TL001 --quiet .hidden
compare "analyzed files" "$(analyzed)" <<'TXT'
.hidden/secret.py
TXT

case_ "a file named explicitly that --exclude matches is skipped"
tl check --select TL001 --exclude 'gen*' generated/out.py
expect_rc 0
expect_out <<'TXT'
No problems found (0 files analyzed in N s)
TXT

case_ "a file named explicitly that is not Python: 2, the others analyzed"
tl check --select TL001 --quiet notes.txt src/model.py
expect_rc 2
compare "analyzed files" "$(analyzed)" <<'TXT'
src/model.py
TXT
expect_err <<'TXT'
torchleak: error: notes.txt: not a Python or C++ source file
TXT

case_ "a FIFO named explicitly: 2"
mkfifo pipe.py
tl check pipe.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: pipe.py: not a regular file
TXT
rm pipe.py

case_ "outside a git work tree .gitignore is not read"
cd "$WORK" || exit 2
mkdir plain && cp -r repo/generated repo/.gitignore plain/
tl check --select TL001 --quiet plain
compare "analyzed files" "$(analyzed)" <<'TXT'
plain/generated/out.py
TXT

done_
