# --fix, --unsafe-fixes and --diff: which fixes apply, what is written, what
# is printed, the exit codes, and that the file keeps its mode and endings.
source "$(dirname "$0")/common.bash"
mkdir proj && cd proj || exit 2  # a directory that holds only what the cases write

# TL001 (a safe fix: the total is a number) and TL006 (an unsafe fix: the
# loop is wrapped in no_grad) in one evaluation function.
write_eval() {
  cat >"$1" <<'PY'
import torch


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        total += criterion(out, y)
    return total
PY
}

SAFE=$(cat <<'PY'
import torch


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        total += criterion(out, y).item()
    return total
PY
)

ALL=$(cat <<'PY'
import torch


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            total += criterion(out, y).item()
    return total
PY
)

TL006_TEXT='eval.py:8:15: warning: `model` runs in an evaluation loop after `model.eval()` with autograd enabled: every forward pass records a graph and keeps its activations alive, and nothing calls backward() to free them [TL006 eval-without-no-grad]
    8 |         out = model(x)
      |               ^^^^^^^^
      = help: wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`), or decorate the function with `@torch.no_grad()`

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix --unsafe-fixes'

case_ "--diff prints the safe fixes and writes nothing"
write_eval eval.py
before=$(cat eval.py)
tl check --isolated --diff eval.py
expect_rc 1
expect_out <<'EOF2'
--- a/eval.py
+++ b/eval.py
@@ -6,5 +6,5 @@
     total = 0.0
     for x, y in loader:
         out = model(x)
-        total += criterion(out, y)
+        total += criterion(out, y).item()
     return total
EOF2
expect_err <<<"torchleak: would fix 1 problem in 1 file"
[ "$(cat eval.py)" = "$before" ] || fail "--diff changed the file"

case_ "--diff --unsafe-fixes also shows the unsafe fix"
tl check --isolated --diff --unsafe-fixes eval.py
expect_rc 1
expect_out <<'EOF2'
--- a/eval.py
+++ b/eval.py
@@ -4,7 +4,8 @@
 def evaluate(model, loader, criterion):
     model.eval()
     total = 0.0
-    for x, y in loader:
-        out = model(x)
-        total += criterion(out, y)
+    with torch.no_grad():
+        for x, y in loader:
+            out = model(x)
+            total += criterion(out, y).item()
     return total
EOF2
expect_err <<<"torchleak: would fix 2 problems in 1 file"
[ "$(cat eval.py)" = "$before" ] || fail "--diff changed the file"

case_ "--fix applies the safe fix only and reports what remains"
chmod 640 eval.py
tl check --isolated --fix eval.py
expect_rc 1
expect_out <<<"$TL006_TEXT"
expect_err <<<"torchleak: fixed 1 problem in 1 file; 1 remains (1 fixable with --unsafe-fixes)"
[ "$(cat eval.py)" = "$SAFE" ] || fail "after --fix: $(cat eval.py)"
[ "$(stat -c %a eval.py)" = 640 ] || fail "--fix changed the mode to $(stat -c %a eval.py)"
[ "$(ls -A)" = "eval.py" ] || fail "a temporary file was left: $(ls -A)"

case_ "--fix --unsafe-fixes applies the rest"
tl check --isolated --fix --unsafe-fixes eval.py
expect_rc 0
expect_out <<<"No problems found (1 file analyzed in N s)"
expect_err <<<"torchleak: fixed 1 problem in 1 file; 0 remain"
[ "$(cat eval.py)" = "$ALL" ] || fail "after --fix --unsafe-fixes: $(cat eval.py)"

case_ "a second --fix changes nothing"
tl check --isolated --fix --unsafe-fixes eval.py
expect_rc 0
expect_err <<<"torchleak: fixed 0 problems in 0 files; 0 remain"
[ "$(cat eval.py)" = "$ALL" ] || fail "the second --fix changed the file"
tl check --isolated --diff --unsafe-fixes eval.py
expect_rc 0
expect_out </dev/null
expect_err <<<"torchleak: would fix 0 problems in 0 files"

case_ "CRLF line endings are kept"
write_eval crlf.py
sed -i 's/$/\r/' crlf.py
tl check --isolated --fix --unsafe-fixes -q crlf.py
expect_rc 0
[ "$(tr -d '\r' <crlf.py)" = "$ALL" ] || fail "after --fix on CRLF: $(cat -A crlf.py)"
[ "$(grep -c $'\r$' crlf.py)" = "$(wc -l <crlf.py)" ] || fail "a line lost its CR: $(cat -A crlf.py)"
rm crlf.py

case_ "--unsafe-fixes alone is a usage error"
tl check --isolated --unsafe-fixes eval.py
expect_rc 2
expect_out </dev/null
expect_err <<<"torchleak: error: --unsafe-fixes goes with --fix or --diff"

case_ "--fix and --diff exclude each other"
tl check --isolated --fix --diff eval.py
expect_rc 2
[ -z "$OUT" ] || fail "stdout: $OUT"

case_ "a fix that would break the syntax is dropped"
# The file already has a syntax error elsewhere: no fix is written.
write_eval broken.py
printf 'def oops(:\n' >>broken.py
cp broken.py broken.orig
tl check --isolated --fix broken.py
expect_rc 1
expect_err <<'EOF2'
torchleak: warning: broken.py: a fix would have broken the syntax; no fix applied to this file
torchleak: note: broken.py: syntax error near line 11; analyzed as far as the parser recovered
torchleak: fixed 0 problems in 0 files; 2 remain (1 fixable with --unsafe-fixes)
EOF2
cmp -s broken.py broken.orig || fail "a file with a syntax error was rewritten"
rm broken.py broken.orig

done_
