# ruff's command line where the meaning is the same: --output-format and its
# formats, --extend-select/--extend-ignore, --config KEY=VALUE, `extend`,
# -e/-s/-v, --output-file, --show-files/--show-settings, --add-noqa,
# --fix-only/--show-fixes/--exit-non-zero-on-fix, `check -` with
# --stdin-filename, a file-level `# torchleak: noqa: CODE`, the fixable marks,
# TORCHLEAK_OUTPUT_FORMAT, and an unknown command.
source "$(dirname "$0")/common.bash"

write_train proj/train.py
cat >proj/eval.py <<'PY'
import torch


def evaluate(model, loader):
    model.eval()
    outputs = []
    for x, _ in loader:
        outputs.append(model(x))
    return outputs
PY

case_ "--extend-select adds to --select; --extend-ignore takes away; --output-format concise"
tl check --select TL001 --extend-select TL006 --extend-ignore TL001 --output-format concise proj
expect_rc 1
expect_err </dev/null
expect_out <<'TXT'
proj/eval.py:8:24: TL006 `model` runs in an evaluation loop after `model.eval()` with autograd enabled: every forward pass records a graph and keeps its activations alive, and nothing calls backward() to free them
Found 1 problem in 1 file (2 files analyzed in N s); 1 fixable with --fix --unsafe-fixes
TXT

case_ "concise marks the findings --fix fixes with [*]; the summary counts them"
tl check --select TL001 --output-format concise proj
expect_rc 1
expect_out <<'TXT'
proj/train.py:14:13: TL001 [*] `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
Found 1 problem in 1 file (2 files analyzed in N s); 1 fixable with --fix
TXT

case_ "grouped"
tl check --select TL001,TL006 --output-format grouped proj
expect_rc 1
expect_out <<'TXT'
proj/eval.py:
  8:24 TL006 `model` runs in an evaluation loop after `model.eval()` with autograd enabled: every forward pass records a graph and keeps its activations alive, and nothing calls backward() to free them

proj/train.py:
  14:13 TL001 [*] `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive

Found 2 problems in 2 files (2 files analyzed in N s); 1 fixable with --fix; 1 more with --fix --unsafe-fixes
TXT

case_ "pylint, with -e (exit 0) and -q"
tl check -e -q --select TL001,TL006 --output-format pylint proj
expect_rc 0
expect_out <<'TXT'
proj/eval.py:8: [TL006] `model` runs in an evaluation loop after `model.eval()` with autograd enabled: every forward pass records a graph and keeps its activations alive, and nothing calls backward() to free them
proj/train.py:14: [TL001] `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
TXT

case_ "azure, chosen by TORCHLEAK_OUTPUT_FORMAT"
TORCHLEAK_OUTPUT_FORMAT=azure tl check --select TL001 proj
expect_rc 1
expect_out <<'TXT'
##vso[task.logissue type=warning;sourcepath=proj/train.py;linenumber=14;columnnumber=13;code=TL001;]`total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
TXT

case_ "junit, written with --output-file"
tl check --select TL001 --output-format junit --output-file out/report.xml proj
expect_rc 1
expect_out </dev/null
OUT=$(cat out/report.xml)
expect_out <<'TXT'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="torchleak" tests="1" failures="1" errors="0">
  <testsuite name="proj/train.py" tests="1" disabled="0" errors="0" failures="1" package="torchleak">
    <testcase name="torchleak.TL001" classname="proj/train.py" line="14" column="13">
      <failure message="`total_loss` accumulates `loss` with its autograd graph, keeping every iteration&apos;s graph alive">line 14, col 13, `total_loss` accumulates `loss` with its autograd graph, keeping every iteration&apos;s graph alive</failure>
    </testcase>
  </testsuite>
</testsuites>
TXT

case_ "-s: nothing printed, the exit code says"
tl check -s proj
expect_rc 1
expect_out </dev/null
expect_err </dev/null

case_ "--statistics marks the rules --fix fixes"
tl check --select TL001,TL006 --statistics -q proj
expect_rc 1
expect_out <<'TXT'
1  TL001  [*] accumulate-undetached
1  TL006  [ ] eval-without-no-grad
TXT

case_ "--show-files"
tl check --show-files proj
expect_rc 0
expect_out <<'TXT'
proj/eval.py
proj/train.py
TXT

mkdir -p base
cat >base/torchleak.toml <<'TOML'
select = ["TL001"]
ignore = ["TL006"]
target-torch-version = "1.13"
TOML
cat >proj/torchleak.toml <<'TOML'
extend = "../base/torchleak.toml"
extend-select = ["TL002"]
TOML

case_ "extend: the base's settings under the file's; --show-settings prints them"
tl check --show-settings proj/train.py
expect_rc 0
expect_out <<'TXT'
Resolved settings for: "proj/train.py"
Settings path: "proj/torchleak.toml"

enabled rules = [TL001, TL002]
select = ["TL001"]
extend-select = ["TL002"]
ignore = ["TL006"]
exclude = []
per-file-ignores = {}
target-torch-version = "1.13"
device-memory = 17179869184
oversized-layer-threshold = 8589934592
extra-models = []
extra-losses = []
extra-optimizers = []
extra-data-parallel = []
models = []
TXT

case_ "--config KEY=VALUE over the file's settings (its extend-select still adds TL002)"
tl check --config 'select = ["TL006"]' --config 'ignore = []' --output-format concise -q proj
expect_rc 1
expect_out <<'TXT'
proj/eval.py:8:24: TL002 `outputs` stores `model(x)` with its autograd graph, keeping every iteration's graph alive
proj/eval.py:8:24: TL006 `model` runs in an evaluation loop after `model.eval()` with autograd enabled: every forward pass records a graph and keeps its activations alive, and nothing calls backward() to free them
TXT

case_ "--config KEY=VALUE with an unknown key: 2, naming it"
tl check --config 'selct = ["TL006"]' proj
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: --config:1:1: key 'selct': unknown key (expected one of: extend, select, extend-select, ignore, extend-ignore, exclude, per-file-ignores, target-torch-version, device-memory, oversized-layer-threshold, extra-models, extra-losses, extra-optimizers, extra-data-parallel, models); did you mean 'select'?
TXT

cat >loop.toml <<'TOML'
extend = "loop.toml"
TOML
case_ "extend in a circle: 2, naming the file"
tl check --config loop.toml proj
expect_rc 2
expect_err <<'TXT'
torchleak: error: loop.toml: `extend` goes round in a circle back to this file
TXT
rm proj/torchleak.toml

case_ "check - with --stdin-filename: the standard input as that file, named in the report"
tl check --select TL001 --output-format concise - --stdin-filename src/fit.py <proj/train.py
expect_rc 1
expect_out <<'TXT'
src/fit.py:14:13: TL001 [*] `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "check --fix -: the fixed text on standard output, what remains on standard error"
tl check --select TL001 --fix -q - <proj/train.py
expect_rc 0
expect_out < <(sed 's/total_loss += loss$/total_loss += loss.item()/' proj/train.py)
expect_err </dev/null

cp proj/train.py before.py
case_ "--fix --show-fixes --exit-non-zero-on-fix: 1 although nothing remains"
tl check --select TL001 --fix --show-fixes --exit-non-zero-on-fix proj/train.py
expect_rc 1
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
expect_err <<'TXT'
torchleak: fixed 1 problem in 1 file; 0 remain
Fixed 1 problem:
- proj/train.py:
    1 × TL001 (accumulate-undetached)
TXT

cp before.py proj/train.py
case_ "--fix-only: fixes, reports nothing of what remains, exits 0"
tl check --select TL001,TL006 --fix-only proj
expect_rc 0
expect_out </dev/null
expect_err <<'TXT'
torchleak: fixed 1 problem in 1 file; 1 remains (1 fixable with --unsafe-fixes)
TXT
cp before.py proj/train.py

case_ "--add-noqa: a directive on each finding's line, extending a noqa list; a second run adds nothing"
sed -i 's/outputs.append(model(x))/outputs.append(model(x))  # noqa: E501/' proj/eval.py
tl check --select TL001,TL006 --add-noqa proj
expect_rc 0
expect_out </dev/null
expect_err <<'TXT'
torchleak: added 2 noqa directives to 2 files
TXT
OUT=$(grep -h noqa proj/*.py)
expect_out <<'TXT'
        outputs.append(model(x))  # noqa: E501, TL006
            total_loss += loss  # noqa: TL001
TXT
cp -r proj proj_once
tl check --select TL001,TL006 --add-noqa proj
expect_rc 0
expect_err <<'TXT'
torchleak: added 0 noqa directives to 0 files
TXT
diff -r proj_once proj >/dev/null || fail "the second --add-noqa changed a file"
cp before.py proj/train.py

case_ "a file-level # torchleak: noqa: CODE silences that rule in the whole file"
sed -i '1i # torchleak: noqa: TL001' proj/train.py
tl check --select TL001 proj/train.py
expect_rc 0
expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT

case_ "-v: the settings of each file and the run, on standard error"
tl check -v --select TL001 --no-cache proj
expect_rc 0
ERR=$(sed -E 's/in [0-9]+\.[0-9]+ s$/in N s/' <<<"$ERR")
expect_err <<'TXT'
torchleak: verbose: proj/eval.py: settings from the defaults
torchleak: verbose: proj/train.py: settings from the defaults
torchleak: verbose: 2 files checked (0 from the cache), 0 other files of the project read for their facts (0 from the cache: none), in N s
TXT

case_ "an unknown command names the known ones"
tl chek proj
expect_rc 2
expect_err <<'TXT'
torchleak: error: unknown command 'chek' (the commands are check, rule, lsp, facts, merge-sarif, clean); did you mean 'check'?
TXT

done_
