# C++ input the frontend cannot compile as given: a file with compile errors,
# a file no compilation database lists, and broken compile_commands.json files,
# named with -p or found walking up from the file. Each is analyzed with the
# right flags or is an error naming the file and the problem (exit 2): never a
# crash, never a silent fallback to other flags. No file here includes
# LibTorch: the flags alone decide whether a file compiles, and runs are quick.
source "$(dirname "$0")/../cli/common.bash"

# A LibTorch install of this directory's own, so that the fallback flags (and
# the messages naming them) are the same on every machine.
unset Torch_DIR CMAKE_PREFIX_PATH
mkdir -p libtorch/include/torch/csrc/api/include/torch
touch libtorch/include/torch/csrc/api/include/torch/torch.h
export TORCH_INSTALL_PREFIX=$WORK/libtorch

# Runs torchleak under a time limit (a hang is a failure), with the temporary
# directory written as WORK in its output.
tlc() {
  timeout 120 "$TORCHLEAK" "$@" >"$WORK/.stdout" 2>"$WORK/.stderr"
  RC=$?
  OUT=$(normalise <"$WORK/.stdout" | sed "s|$WORK|WORK|g")
  ERR=$(normalise <"$WORK/.stderr" | sed "s|$WORK|WORK|g")
  [ "$RC" = 124 ] && fail "timed out: torchleak $*"
}

# database DIR FILE FLAGS: a compile_commands.json in DIR that lists FILE.
database() {
  mkdir -p "$1"
  printf '[{"directory": "%s", "command": "clang++ %s -c %s", "file": "%s"}]\n' \
    "$WORK/$1" "$3" "$WORK/$2" "$WORK/$2" >"$1/compile_commands.json"
}

# A file that compiles only with -DFROM_DB: shows which flags it got.
needs_db() {
  mkdir -p "$(dirname "$1")"
  printf '#ifndef FROM_DB\n#error compiled without the database flags\n#endif\nint main() { return FROM_DB; }\n' >"$1"
}

# A clean file under broken/NAME/src and, in broken/NAME, a compile_commands.json read from stdin.
broken() {
  mkdir -p "broken/$1/src"
  printf 'int main() { return 0; }\n' >"broken/$1/src/train.cpp"
  cat >"broken/$1/compile_commands.json"
}

# --- compile errors ---------------------------------------------------------------------

mkdir -p errors
printf 'int twice(int x) {\n  return x * 2;\n}\n\nint broken() { return undeclared_name; }\nint also() { return twice("two"); }\n' >errors/train.cpp

case_ "compile errors with fallback flags: 2, the file, its lines and the compiler's messages"
tlc check --isolated errors/train.cpp
expect_rc 2
expect_out <<'TXT'
No problems found (0 files analyzed in N s); 1 path could not be analyzed
TXT
expect_err <<'TXT'
torchleak: error: errors/train.cpp: does not compile with fallback flags: -std=c++17 and LibTorch from TORCH_INSTALL_PREFIX (WORK/libtorch) (train.cpp:5: use of undeclared identifier 'undeclared_name'; train.cpp:6: no matching function for call to 'twice'); torchleak reports nothing from code whose types are not resolved: pass the project's flags with -p BUILD_DIR or --extra-arg
TXT

case_ "compile errors with a database's flags: the database is named"
database errors errors/train.cpp "-std=c++17"
tlc check --isolated errors/train.cpp
expect_rc 2
expect_err <<'TXT'
torchleak: error: errors/train.cpp: does not compile with compile_commands.json in WORK/errors (train.cpp:5: use of undeclared identifier 'undeclared_name'; train.cpp:6: no matching function for call to 'twice'); torchleak reports nothing from code whose types are not resolved: pass the project's flags with -p BUILD_DIR or --extra-arg
TXT

case_ "compile errors: the other files are still analyzed"
printf 'int main() { return 0; }\n' >errors/fine.cpp
tlc check --isolated errors/train.cpp errors/fine.cpp
expect_rc 2
expect_out <<'TXT'
No problems found (1 file analyzed in N s); 1 path could not be analyzed
TXT

# --- no compilation database entry ------------------------------------------------------

needs_db proj/src/listed.cpp
needs_db proj/src/unlisted.cpp
database proj/build proj/src/listed.cpp "-std=c++17 -DFROM_DB=0"

case_ "a file the database does not list gets the closest listed file's flags (as clangd does)"
tlc check --isolated -p proj/build proj/src/unlisted.cpp
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err <<'TXT'
TXT

case_ "no database anywhere: fallback flags, and the error says so"
needs_db alone/train.cpp
tlc check --isolated alone/train.cpp
expect_rc 2
expect_err <<'TXT'
torchleak: error: alone/train.cpp: does not compile with fallback flags: -std=c++17 and LibTorch from TORCH_INSTALL_PREFIX (WORK/libtorch) (train.cpp:2: compiled without the database flags; train.cpp:4: use of undeclared identifier 'FROM_DB'); torchleak reports nothing from code whose types are not resolved: pass the project's flags with -p BUILD_DIR or --extra-arg
TXT

case_ "a database that lists nothing ([]): fallback flags"
printf '[]\n' | broken empty_list
needs_db broken/empty_list/src/train.cpp
tlc check --isolated broken/empty_list/src/train.cpp
expect_rc 2
expect_err <<'TXT'
torchleak: error: broken/empty_list/src/train.cpp: does not compile with fallback flags: -std=c++17 and LibTorch from TORCH_INSTALL_PREFIX (WORK/libtorch) (train.cpp:2: compiled without the database flags; train.cpp:4: use of undeclared identifier 'FROM_DB'); torchleak reports nothing from code whose types are not resolved: pass the project's flags with -p BUILD_DIR or --extra-arg
TXT

# --- broken compile_commands.json: with -p, and found above the file ------------------------

printf '[{"directory": "/tmp", "file": "a.cpp", "command": "c++ a.cpp"},\n' | broken truncated
printf '[\n' | broken open_bracket
printf '' | broken empty
printf 'not json at all\n' | broken garbage
printf '\xff\xfe[]\n' | broken bad_utf8
printf '{"directory": "/tmp", "file": "a.cpp", "command": "c++ a.cpp"}\n' | broken object
printf '[{"directory": "/tmp", "command": "c++ a.cpp"}]\n' | broken no_file
printf '[{"directory": "/tmp", "file": "a.cpp", "commmand": "c++ a.cpp"}]\n' | broken unknown_key
printf '[{"directory": "/tmp", "file": "a.cpp", "arguments": "c++ a.cpp"}]\n' | broken arguments_string
mkdir -p broken/directory/src broken/directory/compile_commands.json
printf 'int main() { return 0; }\n' >broken/directory/src/train.cpp

# expect_broken NAME REASON: both ways of finding broken/NAME's database give REASON.
expect_broken() {
  case_ "a broken compile_commands.json ($1) named with -p"
  tlc check --isolated -p "broken/$1" "broken/$1/src/train.cpp"
  expect_rc 2
  expect_out <<<"No problems found (0 files analyzed in N s); 1 path could not be analyzed"
  expect_err <<<"torchleak: error: broken/$1/src/train.cpp: -p broken/$1: compile_commands.json: $2"
  case_ "a broken compile_commands.json ($1) found above the file"
  tlc check --isolated "broken/$1/src/train.cpp"
  expect_rc 2
  expect_err <<<"torchleak: error: broken/$1/src/train.cpp: WORK/broken/$1/compile_commands.json: $2 (the compilation database found above the file; fix it, or name another build directory with -p)"
}
expect_broken truncated "not valid JSON at line 2, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"
expect_broken open_bracket "not valid JSON at line 2, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"
expect_broken empty "not valid JSON at line 1, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"
expect_broken garbage "not valid JSON at line 1, column 2: syntax error while parsing value - invalid literal; last read: 'no'"
expect_broken bad_utf8 "not valid JSON at line 1, column 1: syntax error while parsing value - invalid literal; last read: '\\xFF'"
expect_broken object 'Expected array.'
expect_broken no_file 'Missing key: "file".'
expect_broken unknown_key 'Unknown key: "commmand"'
expect_broken arguments_string 'Expected sequence as value.'
expect_broken directory 'not a regular file'

case_ "a broken database is reported once per file, and the others are analyzed"
cp broken/garbage/src/train.cpp broken/garbage/src/other.cpp
tlc check --isolated broken/garbage/src/train.cpp broken/garbage/src/other.cpp errors/fine.cpp
expect_rc 2
expect_out <<'TXT'
No problems found (1 file analyzed in N s); 2 paths could not be analyzed
TXT

if [ "$(id -u)" != 0 ]; then
  case_ "an unreadable compile_commands.json (chmod 000)"
  printf '[]\n' | broken unreadable
  chmod 000 broken/unreadable/compile_commands.json
  tlc check --isolated broken/unreadable/src/train.cpp
  expect_rc 2
  expect_err <<'TXT'
torchleak: error: broken/unreadable/src/train.cpp: WORK/broken/unreadable/compile_commands.json: cannot be read: Permission denied (the compilation database found above the file; fix it, or name another build directory with -p)
TXT
fi

case_ "a C++ file in a project of Python files reads none of them (only Python findings use other files' facts)"
mkdir -p mixed && git -C mixed init -q 2>/dev/null || mkdir -p mixed/.git
printf 'import torch\n\n\ndef helper(model):\n    model.zero_grad()\n' >mixed/helpers.py
printf 'import torch\nx = torch.zeros(1)\n' >mixed/other.py
printf 'int main() { return 0; }\n' >mixed/main.cpp
tlc check mixed/main.cpp
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
tlc check mixed/helpers.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed with 1 other file of the project in N s)
TXT

done_
