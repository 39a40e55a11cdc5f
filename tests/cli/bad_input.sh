# Input torchleak cannot or need not understand: a binary file, a file that
# is not UTF-8, a byte order mark, CRLF line ends, syntax errors, an empty
# file, deep nesting. A file that cannot be analyzed is an error naming the
# file and the reason (exit 2) while the others are still analyzed; a syntax
# error is a note: the file is analyzed as far as the parser recovered and
# the exit code follows the findings. Never a crash.
source "$(dirname "$0")/common.bash"
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

write_train train.py
printf 'import torch\n\000\001\002\003 binary\n' >binary.py
printf 'name = "caf\xe9"\n' >latin1.py
printf '# r\xc3\xa9sum\xc3\xa9\nx = 1\ny = "\xc3\xa9\xe9"\n' >late_bad_byte.py

case_ "a binary .py file: 2, named, the others analyzed"
tl check --select TL001 --quiet binary.py train.py
expect_rc 2
compare "first line" "$(head -n 1 <<<"$OUT")" <<'TXT'
train.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
TXT
expect_err <<'TXT'
torchleak: error: binary.py: binary file (contains NUL bytes), not source text
TXT

case_ "a file that is not UTF-8: 2, with the place of the first bad byte"
tl check --select TL001 latin1.py late_bad_byte.py train.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: late_bad_byte.py: not valid UTF-8: byte 0xE9 at line 3, column 7 (source files are read as UTF-8)
torchleak: error: latin1.py: not valid UTF-8: byte 0xE9 at line 1, column 12 (source files are read as UTF-8)
TXT
compare "summary" "$(tail -n 1 <<<"$OUT")" <<'TXT'
Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix; 2 paths could not be analyzed
TXT

case_ "unanalyzable files are listed in the JSON report"
tl check --select TL001 --format json binary.py
expect_rc 2
compare "errors" "$(jq -c '.errors, .summary' <<<"$OUT")" <<'TXT'
[{"path":"binary.py","message":"binary file (contains NUL bytes), not source text"}]
{"problems":0,"files_with_problems":0,"files_analyzed":0,"files_failed":1}
TXT

case_ "a UTF-8 byte order mark: same lines and columns, fix offsets past the mark"
{ printf '\xef\xbb\xbf'; cat train.py; } >bom.py
tl check --select TL001 --quiet bom.py
expect_rc 1
compare "first line" "$(head -n 1 <<<"$OUT")" <<'TXT'
bom.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
TXT
tl check --select TL001 --format json train.py
plain_edit=$(jq -c '.diagnostics[0] | [.start, .end, .fix.edits[0].start_byte]' <<<"$OUT")
tl check --select TL001 --format json bom.py
bom_edit=$(jq -c '.diagnostics[0] | [.start, .end, .fix.edits[0].start_byte - 3]' <<<"$OUT")
compare "positions" "$bom_edit" <<<"$plain_edit"
offset=$(jq '.diagnostics[0].fix.edits[0].start_byte' <<<"$OUT")
# The fix inserts `.item()` right after `loss` in the file's own bytes.
compare "bytes before the fix" "$(head -c "$offset" bom.py | tail -c 18)" <<<"total_loss += loss"

case_ "a file that is only a byte order mark"
printf '\xef\xbb\xbf' >only_bom.py
tl check --select TL001 only_bom.py
expect_rc 0

case_ "CRLF line ends: the same finding, no carriage return in the excerpt"
sed 's/$/\r/' train.py >crlf.py
tl check --select TL001 crlf.py
expect_rc 1
expect_out <<'TXT'
crlf.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: @HELP(loss)@

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "a syntax error: a note, the rest of the file analyzed, the exit code from the findings"
{ cat train.py; printf '\n\ndef broken(:\n    return\n'; } >syntax.py
tl check --select TL001 syntax.py
expect_rc 1
compare "first line" "$(head -n 1 <<<"$OUT")" <<'TXT'
syntax.py:14:13: warning: @MSG(total_loss,loss)@ [TL001 accumulate-undetached]
TXT
expect_err <<'TXT'
torchleak: note: syntax.py: syntax error near line 18; analyzed as far as the parser recovered
TXT

case_ "valid Python the pinned grammar cannot parse (a starred element in a bare tuple): no note, the findings after it, fixed with the star kept"
cat >starred.py <<'PY'
def gather(first, rest):
    return first, *(r.detach() for r in rest)


def scale(values):
    out = 1.0, *[v * 2 for v in values]
    return out


def train(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    return total, *(t for t in [total])
PY
tl check --select TL001 --output-format concise starred.py
expect_rc 1
expect_err </dev/null
expect_out <<'TXT'
starred.py:17:9: TL001 [*] `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT
tl check --select TL001 --fix --quiet starred.py
expect_rc 0
expect_err </dev/null
OUT=$(sed -n '2p;6p;17,18p' starred.py)
expect_out <<'TXT'
    return first, *(r.detach() for r in rest)
    out = 1.0, *[v * 2 for v in values]
        total += loss.item()
    return total, *(t for t in [total])
TXT

case_ "a syntax error and nothing found: 0; --quiet hides the note"
printf 'def broken(:\n    return\n' >only_syntax.py
tl check --select TL001 only_syntax.py
expect_rc 0
expect_err <<'TXT'
torchleak: note: only_syntax.py: syntax error near line 1; analyzed as far as the parser recovered
TXT
tl check --select TL001 --quiet only_syntax.py
expect_rc 0
expect_out </dev/null
expect_err </dev/null

case_ "syntax notes are in the JSON report"
tl check --select TL001 --format json only_syntax.py
compare "notes" "$(jq -c '.notes' <<<"$OUT")" <<'TXT'
[{"path":"only_syntax.py","message":"syntax error near line 1; analyzed as far as the parser recovered"}]
TXT

case_ "an empty file"
: >empty.py
tl check --select TL001 empty.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err </dev/null

case_ "deep nesting does not overflow the stack"
{ printf 'x = '; printf '(%.0s' {1..20000}; printf '1'; printf ')%.0s' {1..20000}; printf '\n'; } >deep.py
{ printf 'x = '; printf '[%.0s' {1..20000}; printf '\n'; } >deep_unclosed.py
tl check --select TL001 --quiet deep.py deep_unclosed.py
[ "$RC" = 0 ] || [ "$RC" = 1 ] || fail "exit code $RC on deeply nested input: $ERR"

case_ "a line of 1 MB"
{ printf 'x = "'; head -c 1000000 /dev/zero | tr '\0' 'a'; printf '"\n'; } >long_line.py
tl check --select TL001 long_line.py
expect_rc 0

done_
