# What a repository can hold besides good source, beyond bad_input.sh: old
# Mac line ends, tabs, FIFOs and devices, symlink loops, unreadable and
# vanished files, thousands of files, very large files and lines, Python 2,
# garbage suppression comments, deep nesting of every kind, and signals. Each
# gives the right result or a clear message naming the file; never a crash
# or a hang (every run here is under `timeout`).
source "$(dirname "$0")/common.bash"

# Runs torchleak under a time limit: a hang is a failure, not a stuck test.
tlt() {
  timeout 60 "$TORCHLEAK" "$@" >"$WORK/.stdout" 2>"$WORK/.stderr"
  RC=$?
  OUT=$(normalise <"$WORK/.stdout")
  ERR=$(normalise <"$WORK/.stderr")
  [ "$RC" = 124 ] && fail "timed out: torchleak $*"
}

write_train train.py

case_ "lone CR line ends: the finding at its line and column"
tr '\n' '\r' <train.py >cr.py
tlt check --isolated --select TL001 cr.py
expect_rc 1
expect_out <<'TXT'
cr.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "lone CR: the fix lands on the file's own bytes"
tlt check --isolated --select TL001 --format json cr.py
command -v jq >/dev/null && {
  offset=$(jq '.diagnostics[0].fix.edits[0].start_byte' <<<"$OUT")
  compare "bytes before the fix" "$(head -c "$offset" cr.py | tail -c 18)" <<<"total_loss += loss"
}

case_ "tabs before the finding: a tab is one column"
sed 's/^            total_loss/\t\t\ttotal_loss/' train.py >tabs.py
tlt check --isolated --select TL001 --quiet tabs.py
expect_rc 1
compare "first line" "$(head -n 1 <<<"$OUT")" <<'TXT'
tabs.py:14:4: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
TXT

case_ "mixed CRLF, lone CR and LF in one file"
{ head -n 5 train.py | sed 's/$/\r/'; sed -n 6,10p train.py | tr '\n' '\r'; tail -n +11 train.py; } >mixed.py
tlt check --isolated --select TL001 --quiet mixed.py
expect_rc 1
compare "first line" "$(head -n 1 <<<"$OUT")" <<'TXT'
mixed.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
TXT

case_ "a FIFO named on the command line: an error, not a hang"
mkfifo pipe.py
tlt check --isolated --select TL001 pipe.py train.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: pipe.py: not a regular file
TXT

case_ "a FIFO and a device inside a directory: skipped, the rest analyzed"
mkdir -p tree && mkfifo tree/pipe.py && ln -s /dev/zero tree/zero.py && cp train.py tree/train.py
tlt check --isolated --select TL001 --quiet tree
expect_rc 1
compare "files" "$(cut -d: -f1 <<<"$OUT" | grep '\.py$' | sort -u)" <<<"tree/train.py"
expect_err </dev/null

case_ "a device named on the command line"
tlt check --isolated /dev/null
expect_rc 2
expect_err <<'TXT'
torchleak: error: /dev/null: not a regular file
TXT

case_ "a directory symlink loop: walked once, no error"
mkdir -p loop/sub && cp train.py loop/sub/train.py && ln -s .. loop/sub/up && ln -s ../loop loop/self
tlt check --isolated --select TL001 --quiet loop
expect_rc 1
compare "findings" "$(grep -c 'TL001' <<<"$OUT")" <<<"1"

case_ "a symlink to a file that is gone: named, an error; in a directory, skipped"
ln -s vanished.py dangling.py
tlt check --isolated dangling.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: dangling.py: no such file or directory
TXT
mkdir -p gone && ln -s ../vanished.py gone/dangling.py && cp train.py gone/train.py
tlt check --isolated --select TL001 --quiet gone
expect_rc 1

case_ "an unreadable file: an error naming it, the others analyzed"
if [ "$(id -u)" != 0 ]; then
  cp train.py locked.py && chmod 000 locked.py
  tlt check --isolated --select TL001 --quiet locked.py train.py
  expect_rc 2
  expect_err <<'TXT'
torchleak: error: locked.py: cannot open: Permission denied
TXT
  chmod 644 locked.py
fi

case_ "thousands of files"
mkdir -p many
for i in $(seq 1 3000); do printf 'x_%d = %d\n' "$i" "$i" >"many/m$i.py"; done
cp train.py many/train.py
tlt check --isolated --select TL001 many
expect_rc 1
compare "summary" "$(tail -n 1 <<<"$OUT")" <<'TXT'
Found 1 problem in 1 file (3001 files analyzed in N s); 1 fixable with --fix
TXT

case_ "a 50 MB file: skipped with a note naming it; the others analyzed"
{ for i in $(seq 1 200); do cat train.py; done; } >chunk.txt
: >huge.py
while [ "$(stat -c %s huge.py)" -lt 52428800 ]; do cat chunk.txt chunk.txt chunk.txt chunk.txt >>huge.py; done
tlt check --isolated --select TL001 huge.py train.py
expect_rc 1
expect_err <<'TXT'
torchleak: note: huge.py: skipped: too large (50.2 MiB; --max-file-size is 10.0 MiB)
TXT
compare "summary" "$(tail -n 1 <<<"$OUT")" <<'TXT'
Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "--max-file-size with a unit; 0 is no limit"
tlt check --isolated --select TL001 --max-file-size 400B train.py
expect_rc 0
expect_err <<'TXT'
torchleak: note: train.py: skipped: too large (433 bytes; --max-file-size is 400 bytes)
TXT
tlt check --isolated --select TL001 --quiet --max-file-size 1KiB train.py
expect_rc 1
{ head -c 11000000 /dev/zero | tr '\0' 'a' | fold -w 93 | sed 's/^/x = "/; s/$/"/'; cat train.py; } >eleven.py
tlt check --isolated --select TL001 --quiet --max-file-size 0 eleven.py
expect_rc 1
tlt check --isolated --max-file-size lots train.py
expect_rc 2

case_ "a single line of 5 MB before the finding"
{ printf 'BLOB = "'; head -c 5000000 /dev/zero | tr '\0' 'a'; printf '"\n'; cat train.py; } >long_line.py
tlt check --isolated --select TL001 --quiet long_line.py
expect_rc 1
compare "location" "$(head -n 1 <<<"$OUT" | cut -d: -f1-3)" <<<"long_line.py:15:13"

case_ "a Python 2 file: the grammar knows its statements; nothing found, no note"
cat >py2.py <<'PY'
import sys
print "hello"
exec "x = 1"
print >>sys.stderr, "oops"
raise ValueError, "message"
PY
tlt check --isolated py2.py
expect_rc 0
expect_err </dev/null

case_ "70,000 comment lines in a row: an error naming the file (the parser library fails on them)"
{ for i in $(seq 1 70000); do printf '# %d\n' "$i"; done; cat train.py; } >comments.py
tlt check --isolated --select TL001 comments.py train.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: comments.py: 70000 comment lines in a row, more than the parser handles safely (32768)
TXT

case_ "garbage suppression comments: the finding is kept, no crash"
sed 's/total_loss += loss$/total_loss += loss  # noqa: ,,,;;[[]] \x01 torchleak: ignore[[/' train.py >garbage.py
printf '# torchleak: ignore[\n# noqa:\n# NOLINT((((\n# torchleak: skip-file[TL001]]]\n' >>garbage.py
tlt check --isolated --select TL001 --quiet garbage.py
[ "$RC" = 0 ] || [ "$RC" = 1 ] || fail "exit code $RC: $ERR"

case_ "nesting 10,000 deep, of every kind: no stack overflow"
python3 - <<'PY' || fail "python3 could not write the deep files"
n = 10000
w = lambda name, text: open(name, "w").write(text)
w("d_paren.py", "y = " + "(" * n + "1" + ")" * n + "\n")
w("d_call.py", "y = " + "f(" * n + "1" + ")" * n + "\n")
w("d_method.py", "y = x" + ".f()" * n + "\n")
w("d_attr.py", "y = a" + ".b" * n + "\n")
w("d_subscript.py", "y = a" + "[0]" * n + "\n")
w("d_binop.py", "y = " + " + ".join(["a"] * n) + "\n")
w("d_unary.py", "y = " + "-" * n + "1\n")
w("d_not.py", "y = " + "not " * n + "1\n")
w("d_lambda.py", "y = " + "lambda: " * n + "1\n")
w("d_cond.py", "y = " + "a if b else " * n + "1\n")
w("d_list.py", "y = " + "[" * n + "]" * n + "\n")
w("d_dict.py", "y = " + "{1: " * n + "1" + "}" * n + "\n")
w("d_comprehension.py", "y = " + "[x for x in " * n + "z" + "]" * n + "\n")
w("d_fstring.py", "y = " + 'f"{' * n + "1" + '}"' * n + "\n")
w("d_if.py", "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass\n")
w("d_for.py", "".join(" " * i + "for x in y:\n" for i in range(n)) + " " * n + "total += loss\n")
w("d_def.py", "".join(" " * i + "def f%d():\n" % i for i in range(n)) + " " * n + "pass\n")
w("d_class.py", "".join(" " * i + "class C%d(nn.Module):\n" % i for i in range(n)) + " " * n + "pass\n")
w("d_with.py", "".join(" " * i + "with torch.no_grad():\n" for i in range(n)) + " " * n + "pass\n")
w("d_elif.py", "if a:\n    pass\n" + "".join("elif a%d:\n    pass\n" % i for i in range(n)))
w("d_decorators.py", "".join("@d%d\n" % i for i in range(n)) + "def f():\n    pass\n")
w("d_chain.py", "import torch\nx0 = model(inp)\n" + "".join("x%d = x%d * 2\n" % (i, i - 1) for i in range(1, n)))
PY
for f in d_*.py; do
  tlt check --isolated --quiet -j 1 "$f"
  [ "$RC" = 0 ] || [ "$RC" = 1 ] || fail "$f: exit code $RC: $(tail -n 3 <<<"$ERR")"
done

case_ "20,000 accumulations of one total in one loop: one finding each, answered per total"
{ printf 'total = 0\nfor batch in loader:\n    loss = model(batch)\n'
  seq 1 20000 | sed 's/.*/    total += loss/'; } >many.py
tlt check --isolated --select TL001 --statistics many.py
expect_rc 1
expect_out <<'TXT'
20000  TL001  [*] accumulate-undetached

Found 20000 problems in 1 file (1 file analyzed in N s); 20000 fixable with --fix
TXT

# A file that takes seconds to analyze: half a million accumulations in one
# loop (9 MB, under the default size limit), each one a finding.
write_slow() {
  { printf 'total = 0\nfor batch in loader:\n    loss = model(batch)\n'
    seq 1 500000 | sed 's/.*/    total += loss/'; } >"$1"
}

for sig in TERM INT; do
  case_ "SIG$sig ends the run within seconds; no report, no temporary file"
  write_slow slow.py
  mkdir -p out
  start=$(date +%s)
  "$TORCHLEAK" check --isolated -j 1 --format json -o out/report.json slow.py train.py \
    >"$WORK/.stdout" 2>"$WORK/.stderr" &
  pid=$!
  sleep 2
  kill -0 "$pid" 2>/dev/null || fail "the run ended before the signal: slow.py is no longer slow"
  kill -"$sig" "$pid"
  wait "$pid"
  RC=$?
  elapsed=$(($(date +%s) - start))
  [ "$elapsed" -le 6 ] || fail "took ${elapsed} s to stop"
  if [ "$sig" = TERM ]; then expect_rc 143; else expect_rc 130; fi
  compare "stderr" "$(cat "$WORK/.stderr")" <<<"torchleak: interrupted; no report written"
  compare "out/" "$(ls -A out)" </dev/null
done

done_
