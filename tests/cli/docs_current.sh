# docs/rules/*.md must be what the catalogue renders today.
source "$(dirname "$0")/common.bash"

"$TORCHLEAK" rule --all --output-dir "$WORK/rules" || { echo "rule --all --output-dir failed" >&2; exit 1; }
if ! diff -r "$WORK/rules" "$SOURCE_DIR/docs/rules" >"$WORK/docs.diff"; then
  sed -e "s|$WORK/rules|(rendered)|g" -e "s|$SOURCE_DIR/||g" "$WORK/docs.diff" | head -n 60 >&2
  echo "docs/rules/ is stale: run \`./build/dev/torchleak rule --all --output-dir docs/rules\` and commit the result" >&2
  exit 1
fi
echo "docs/rules/ is current"
