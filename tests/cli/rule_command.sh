# `torchleak rule CODE|NAME`, `rule --all` and `rule --all --output-dir DIR`:
# the documentation pages from the catalogue.
source "$(dirname "$0")/common.bash"

page="$SOURCE_DIR/docs/rules/TL001-accumulate-undetached.md"
codes=$(cd "$SOURCE_DIR/rules" && ls -- *.toml | sed -E 's/^(TL[0-9]+)-.*/\1/' | sort)

case_ "rule TL001"
tl rule TL001
expect_rc 0
expect_err </dev/null
compare "first line" "$(head -n 1 <<<"$OUT")" <<<"# TL001 accumulate-undetached"
for heading in "## What it does" "## Why is this bad?" "## Example (Python)" "## Use instead (Python)" "## Fix"; do
  grep -qxF "$heading" <<<"$OUT" || fail "no '$heading' heading"
done
tl001=$OUT

case_ "rule TL001 prints docs/rules/TL001-accumulate-undetached.md"
[ -f "$page" ] || fail "$page is missing"
compare "stdout" "$tl001" <"$page"

case_ "rule by name, and by code in any case"
for name in accumulate-undetached tl001; do
  tl rule "$name"
  expect_rc 0
  compare "rule $name" "$OUT" <<<"$tl001"
done

case_ "rule TL999: 2"
tl rule TL999
expect_rc 2
expect_out </dev/null
expect_err <<'TXT'
torchleak: error: no rule named 'TL999' (see `torchleak rule --all`)
TXT

case_ "rule without a name: 2"
tl rule
expect_rc 2
expect_err <<'TXT'
torchleak: error: name a rule (a code such as TL001, or a name), or pass --all
TXT

case_ "rule TL001 --all: 2"
tl rule TL001 --all
expect_rc 2

case_ "--output-dir without --all: 2"
tl rule TL001 --output-dir pages
expect_rc 2
[ ! -e pages ] || fail "pages written without --all"

case_ "rule --all: every rule in code order, pages separated by a blank line"
expected=""
for code in $codes; do
  "$TORCHLEAK" rule "$code" >"$WORK/.page" || fail "rule $code failed"
  [ -z "$expected" ] || expected+=$'\n\n'
  expected+=$(cat "$WORK/.page")
done
tl rule --all
expect_rc 0
compare "stdout" "$OUT" <<<"$expected"

case_ "rule --all --output-dir: one page per rule, stale pages removed, other files kept"
mkdir pages
printf 'stale\n' >pages/TL998-renamed-rule.md
printf 'keep\n' >pages/README.md
printf 'keep\n' >pages/TLDR-notes.md
tl rule --all --output-dir pages
expect_rc 0
expect_out </dev/null
compare "pages" "$(cd pages && ls | sed -E 's/^(TL[0-9]+)-.*/\1/')" <<<"README.md
$codes
TLDR-notes.md"
compare "TL001 page" "$(cat pages/TL001-*.md)" <<<"$tl001"

case_ "rule --lang zh: the page in Chinese (headings, summary, why, fix), the examples shared"
tl rule TL009 --lang zh
expect_rc 0
compare "head" "$(head -n 7 <<<"$OUT")" <<'TXT'
# TL009 empty-cache-in-loop

严重程度：警告；语言：Python, C++ (LibTorch)；修复：无。

## 检查什么

`torch.cuda.empty_cache()` 在训练循环或评估循环的每次迭代中都会被调用。
TXT
compare "sections" "$(grep '^## ' <<<"$OUT")" <<'TXT'
## 检查什么
## 为什么有问题？
## 示例 (Python)
## 改为 (Python)
## 示例 (C++ (LibTorch))
## 改为 (C++ (LibTorch))
## 修复方法
## 参考资料
TXT
TORCHLEAK_LANG=zh tl rule TL009
expect_rc 0
compare "TORCHLEAK_LANG" "$(head -n 1 <<<"$OUT"; sed -n 5p <<<"$OUT")" <<'TXT'
# TL009 empty-cache-in-loop
## 检查什么
TXT

case_ "rule --all --lang zh: every rule has its Chinese page, none falls back to English"
tl rule --all --lang zh
expect_rc 0
[ "$(grep -c '^## 为什么有问题？$' <<<"$OUT")" = "$(wc -w <<<"$codes")" ] || fail "a rule has no Chinese page"
grep -q '^## Why is this bad?$' <<<"$OUT" && fail "an English page in --lang zh"
tl rule --all --lang zh --output-dir zh
expect_rc 0
compare "zh pages" "$(cd zh && ls | sed -E 's/^(TL[0-9]+)-.*/\1/')" <<<"README.md
$codes"

case_ "rule --lang fr: 2, naming the languages there are"
tl rule TL001 --lang fr
expect_rc 2
expect_err <<'TXT'
torchleak: error: --lang: fr not in {en,zh}
Run with --help for more information.
TXT

case_ "rule --all --output-dir into a path that is a file: 2"
printf 'x\n' >afile
tl rule --all --output-dir afile/pages
expect_rc 2

done_
