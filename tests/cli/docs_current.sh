# docs/rules/, docs/zh/rules/ and README.md's rule table must be what the catalogue renders today.
source "$(dirname "$0")/common.bash"

stale() {
  echo "$1 is stale: run \`scripts/update-docs.sh\` and commit the result" >&2
  exit 1
}

"$TORCHLEAK" rule --all --output-dir "$WORK/rules" || { echo "rule --all --output-dir failed" >&2; exit 1; }
if ! diff -r "$WORK/rules" "$SOURCE_DIR/docs/rules" >"$WORK/docs.diff"; then
  sed -e "s|$WORK/rules|(rendered)|g" -e "s|$SOURCE_DIR/||g" "$WORK/docs.diff" | head -n 60 >&2
  stale docs/rules/
fi
"$TORCHLEAK" rule --all --lang zh --output-dir "$WORK/zh" || { echo "rule --all --lang zh --output-dir failed" >&2; exit 1; }
if ! diff -r "$WORK/zh" "$SOURCE_DIR/docs/zh/rules" >"$WORK/zh.diff"; then
  sed -e "s|$WORK/zh|(rendered)|g" -e "s|$SOURCE_DIR/||g" "$WORK/zh.diff" | head -n 60 >&2
  stale docs/zh/rules/
fi
"$TORCHLEAK" rule --table >"$WORK/table.md" || { echo "rule --table failed" >&2; exit 1; }
sed -n '/^<!-- rules -->$/,/^<!-- \/rules -->$/p' "$SOURCE_DIR/README.md" | sed '1d;$d' >"$WORK/readme-table.md"
[ -s "$WORK/readme-table.md" ] || { echo "README.md has no <!-- rules --> ... <!-- /rules --> section" >&2; exit 1; }
if ! diff "$WORK/table.md" "$WORK/readme-table.md" >"$WORK/table.diff"; then
  head -n 60 "$WORK/table.diff" >&2
  stale "README.md's rule table"
fi
echo "docs/rules/ and README.md's rule table are current"
