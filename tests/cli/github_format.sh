# GitHub Actions workflow commands: one line per finding, paths relative to
# the repository root, properties and messages escaped as the runner expects.
source "$(dirname "$0")/common.bash"
command -v git >/dev/null || { echo "git is not installed"; exit 77; }

git init -q repo
write_train repo/src/train.py
write_clean repo/src/clean.py
mkdir -p repo/src/odd
cp repo/src/train.py "repo/src/odd/100%,a:b.py"
cat >repo/src/unicode.py <<'PY'
def fit(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        tag = "🔥é"; total += loss
    return total
PY

cd repo/src || exit 2
case_ "workflow commands"
tl check --select TL001 --format github .
expect_rc 1
expect_err </dev/null
expect_out <<'TXT'
::warning file=src/odd/100%25%2Ca%3Ab.py,line=14,col=13,endLine=14,endColumn=31,title=TL001 accumulate-undetached::@MSG(total_loss,loss)@
::warning file=src/train.py,line=14,col=13,endLine=14,endColumn=31,title=TL001 accumulate-undetached::@MSG(total_loss,loss)@
::warning file=src/unicode.py,line=7,col=21,endLine=7,endColumn=34,title=TL001 accumulate-undetached::@MSG(total,loss)@
TXT

case_ "% in a message, % and a line break in a path are escaped"
mkdir -p weird
cat >weird/percent.py <<'PY'
def fit(model, loader, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss % 2
    return total
PY
cp weird/percent.py "weird/new
line.py"
tl check --select TL001 --format github weird
expect_out <<'TXT'
::warning file=src/weird/new%0Aline.py,line=6,col=9,endLine=6,endColumn=26,title=TL001 accumulate-undetached::@MSG(total,loss %25 2)@
::warning file=src/weird/percent.py,line=6,col=9,endLine=6,endColumn=26,title=TL001 accumulate-undetached::@MSG(total,loss %25 2)@
TXT

case_ "files that could not be analyzed and syntax notes"
printf 'x = "\xff"\n' >bad.py
printf 'def broken(:\n' >syntax.py
tl check --select TL001 --format github bad.py syntax.py clean.py
expect_rc 2
expect_out <<'TXT'
::error file=src/bad.py,title=torchleak%3A could not analyze::not valid UTF-8: byte 0xFF at line 1, column 6 (source files are read as UTF-8)
::notice file=src/syntax.py,title=torchleak%3A note::syntax error near line 1; analyzed as far as the parser recovered
TXT
expect_err <<'TXT'
torchleak: error: bad.py: not valid UTF-8: byte 0xFF at line 1, column 6 (source files are read as UTF-8)
torchleak: note: syntax.py: syntax error near line 1; analyzed as far as the parser recovered
TXT

case_ "nothing found: nothing printed"
tl check --select TL001 --format github clean.py
expect_rc 0
expect_out </dev/null

done_
