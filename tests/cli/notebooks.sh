# Jupyter notebooks (nbformat 4): found in directory walks, the code cells
# analyzed as one program with IPython magics and shell escapes masked,
# findings placed by cell (text, JSON) and in the notebook's JSON text (SARIF,
# GitHub annotations), suppressions in cells, fixes written back into the
# cells with every other byte unchanged, malformed notebooks named.
source "$(dirname "$0")/common.bash"
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

mkdir -p nb
cat >nb/train.ipynb <<'NB'
{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 1,
   "metadata": {},
   "outputs": [],
   "source": [
    "%matplotlib inline\n",
    "!pip install -q torch \\\n",
    "    torchvision\n",
    "import torch"
   ]
  },
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": [
    "# Training — the loop"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 2,
   "metadata": {},
   "outputs": [],
   "source": [
    "def fit(model, loader, optimizer, criterion):\n",
    "    total, losses = 0, []\n",
    "    for x, y in loader:\n",
    "        optimizer.zero_grad()\n",
    "        loss = criterion(model(x), y)\n",
    "        loss.backward()\n",
    "        optimizer.step()\n",
    "        total += loss  # \u00e9poque\n",
    "        losses.append(loss)  # noqa: TL002\n",
    "    return total"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": [
    "%%bash\n",
    "for i in 1 2; do echo $i; done"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": "files = !ls\nmodel?\nfit(model, loader, opt, crit)\n"
  }
 ],
 "metadata": {
  "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
NB
cp nb/train.ipynb before.ipynb

case_ "text: the finding by cell, line and column in the cell; magics, a shell escape, help and a bash cell masked; a noqa in a cell"
tl check nb
expect_rc 1
expect_err </dev/null
expect_out <<'TXT'
nb/train.ipynb:cell 3:8:9: warning: `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive [TL001 accumulate-undetached]
    8 |         total += loss  # époque
      |         ^^^^^^^^^^^^^
      = help: accumulate `loss.item()` (a Python number) or `loss.detach()`

Found 1 problem in 1 file (1 file analyzed in N s); 1 fixable with --fix
TXT

case_ "JSON: the cell, positions in the cell, the fix's edits as bytes of the cell's source"
tl check --format json nb/train.ipynb
expect_rc 1
OUT=$(jq -c '.diagnostics[] | {path, cell, start, end: .end, fix}' <<<"$OUT")
expect_out <<'TXT'
{"path":"nb/train.ipynb","cell":3,"start":{"line":8,"column":9},"end":{"line":8,"column":22},"fix":{"title":"Replace `loss` with `loss.detach()`","safety":"safe","edits":[{"start_byte":234,"end_byte":234,"content":".detach()"}]}}
TXT

case_ "SARIF: the region in the notebook's JSON (what code scanning shows), the cell in the message and the properties"
tl check --format sarif nb/train.ipynb
expect_rc 1
OUT=$(jq -c '.runs[0].results[] | {m: .message.text, region: .locations[0].physicalLocation.region, properties}' <<<"$OUT")
expect_out <<'TXT'
{"m":"In cell 3, line 8: `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive.","region":{"startLine":35,"startColumn":14,"endLine":35,"endColumn":27},"properties":{"notebookCell":3,"cellLine":8,"cellColumn":9}}
TXT

case_ "GitHub annotations: on the notebook's line"
tl check --format github nb/train.ipynb
expect_rc 1
expect_out <<'TXT'
::warning file=nb/train.ipynb,line=35,col=14,endLine=35,endColumn=27,title=TL001 accumulate-undetached::cell 3, line 8: `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
TXT

case_ "--fix: the edited source line rewritten, every other byte as it was; a second run fixes nothing"
tl check --fix --quiet nb/train.ipynb
expect_rc 0
diff before.ipynb nb/train.ipynb >changes
OUT=$(cat changes)
expect_out <<'TXT'
35c35
<     "        total += loss  # \u00e9poque\n",
---
>     "        total += loss.detach()  # époque\n",
TXT
cp nb/train.ipynb fixed.ipynb
tl check --fix --quiet nb/train.ipynb
expect_rc 0
cmp -s fixed.ipynb nb/train.ipynb || fail "the second --fix changed the notebook"

cat >nb/one_string.ipynb <<'NB'
{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null,
  "source": "def fit(model, loader, optimizer, criterion):\n    total = 0\n    for x, y in loader:\n        loss = criterion(model(x), y)\n        loss.backward()\n        optimizer.step()\n        total += loss\n    print(total)\n"}],
 "metadata": {}, "nbformat": 4, "nbformat_minor": 2}
NB
cp nb/one_string.ipynb one_before.ipynb

case_ "a source held as one string: the finding on the notebook's line, the fix inside the string"
tl check --select TL001 --format github nb/one_string.ipynb
expect_rc 1
expect_out <<'TXT'
::warning file=nb/one_string.ipynb,line=2,col=199,endLine=2,endColumn=212,title=TL001 accumulate-undetached::cell 1, line 7: `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive
TXT
tl check --select TL001 --fix --quiet nb/one_string.ipynb
expect_rc 0
OUT=$(jq -r '.cells[0].source' nb/one_string.ipynb | sed -n 7p)
expect_out <<'TXT'
        total += loss.item()
TXT
[ "$(sed 2d nb/one_string.ipynb)" = "$(sed 2d one_before.ipynb)" ] || fail "a line other than the source's changed"

case_ "a fact from a notebook is named by its cell: the DataParallel wrap in cell 2 of a notebook"
mkdir -p wrap
cp "$SOURCE_DIR/fixtures/python/TL005/cross_file_wrap/model.py" wrap/model.py
python3 - <<'PY'
import json
cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Multi-GPU run"]},
         {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
          "source": ["import torch\n", "from torch import nn\n", "from model import Tagger\n", "\n",
                     "model = Tagger(1000, 9)\n", "model = nn.DataParallel(model)"]}]
json.dump({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, open("wrap/run.ipynb", "w"), indent=1)
PY
tl check --select TL005 --output-format concise --quiet wrap
expect_rc 1
expect_out <<'TXT'
wrap/model.py:18:21: TL005 `pad_packed_sequence` without `total_length` in `Tagger.forward`, and `Tagger` is replicated by `nn.DataParallel` at wrap/run.ipynb:cell 2:6: each replica pads its slice of the batch to that slice's longest sequence, so the outputs gathered from the replicas disagree in length
TXT

rm nb/one_string.ipynb
printf '{"cells": [\n' >nb/truncated.ipynb
printf '{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}\n' >nb/old.ipynb
printf '{"cells": [{"cell_type": "code", "source": 5}], "metadata": {}, "nbformat": 4, "nbformat_minor": 2}\n' >nb/bad_source.ipynb
printf '{"cells": [], "metadata": {"language_info": {"name": "R"}}, "nbformat": 4, "nbformat_minor": 2}\n' >nb/r.ipynb

case_ "malformed notebooks: an error naming the file and the problem; a notebook in another language skipped with a note"
tl check --select TL001 nb/truncated.ipynb nb/old.ipynb nb/bad_source.ipynb nb/r.ipynb
expect_rc 2
expect_out <<'TXT'
No problems found (0 files analyzed in N s); 3 paths could not be analyzed
TXT
expect_err <<'TXT'
torchleak: error: nb/bad_source.ipynb: not a valid notebook: cell 1: its "source" is not a string or a list of strings
torchleak: error: nb/old.ipynb: not a valid notebook: nbformat 3 is not supported (only 4; `jupyter nbconvert --to notebook` converts it)
torchleak: error: nb/truncated.ipynb: not a valid notebook: not valid JSON at line 2, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal
torchleak: note: nb/r.ipynb: skipped: a notebook in R, not Python
TXT

done_
