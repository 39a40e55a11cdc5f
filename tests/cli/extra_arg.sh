# --extra-arg and --extra-arg-before take exactly one value per flag, as clang-tidy's: the path
# after `--extra-arg=-DX` is a path to analyze, not a second compiler argument.
source "$(dirname "$0")/common.bash"

write_train proj/train.py
write_clean proj/other/clean.py

case_ "--extra-arg=VALUE then a path: only that path is analyzed"
tl check --select TL001 --quiet --extra-arg=-DUSE_CUDA=0 proj/other/clean.py
expect_rc 0
expect_out </dev/null
expect_err </dev/null

case_ "--extra-arg VALUE then a path: the same"
tl check --select TL001 --quiet --extra-arg -DUSE_CUDA=0 --extra-arg-before -Iinclude proj/train.py
expect_rc 1
expect_out <<'TXT'
proj/train.py:14:13: warning: `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive [TL001 accumulate-undetached]
   14 |             total_loss += loss
      |             ^^^^^^^^^^^^^^^^^^
      = help: accumulate `loss.item()` (a Python number) or `loss.detach()`
TXT

done_
