# --select and --ignore: by code (any case), by name, by code prefix, ALL,
# comma-separated or repeated; an entry that names no rule is a usage error.
source "$(dirname "$0")/common.bash"

write_train train.py
finding="train.py:14:13: warning: $(tl001_message total_loss loss) [TL001 accumulate-undetached]"

for sel in TL001 tl001 accumulate-undetached TL0 TL00 TL001,TL0; do
  case_ "--select $sel selects TL001"
  tl check --select "$sel" --quiet train.py
  expect_rc 1
  [ "$(head -n 1 <<<"$OUT")" = "$finding" ] || fail "TL001 not reported: $OUT"
done

case_ "--select ALL selects TL001"
tl check --select ALL --quiet train.py
expect_rc 1
grep -qxF "$finding" <<<"$OUT" || fail "TL001 not reported: $OUT"

case_ "no --select: every rule, TL001 among them"
tl check --quiet train.py
expect_rc 1
grep -qxF "$finding" <<<"$OUT" || fail "TL001 not reported: $OUT"

for ign in TL001 accumulate-undetached TL0 ALL; do
  case_ "--ignore $ign drops TL001"
  tl check --select TL001 --ignore "$ign" train.py
  expect_rc 0
  expect_out <<'TXT'
No problems found (1 file analyzed in N s)
TXT
done

case_ "--ignore TL001 without --select: TL001 is not reported"
tl check --ignore TL001 --quiet train.py
[[ "$OUT" != *"[TL001 "* ]] || fail "TL001 reported despite --ignore: $OUT"

case_ "repeated --select"
tl check --select TL001 --select TL0 --quiet train.py
expect_rc 1

case_ "an unknown code in --select: 2"
tl check --select TL999 train.py
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: --select names no rule: 'TL999' (see `torchleak rule --all`)
TXT

case_ "an unknown name in --ignore: 2"
tl check --select TL001 --ignore accumulate-detached train.py
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: --ignore names no rule: 'accumulate-detached' (see `torchleak rule --all`)
TXT

case_ "an unknown entry among known ones: 2"
tl check --select TL001,XX1 train.py
expect_rc 2
expect_err <<'TXT'
torchleak: error: --select names no rule: 'XX1' (see `torchleak rule --all`)
TXT

done_
