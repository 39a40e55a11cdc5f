#!/usr/bin/env bash
# Regenerates what the catalogue (rules/*.toml) renders: docs/rules/, docs/zh/rules/ and the
# rule table in README.md between its `<!-- rules -->` markers.
# Usage: scripts/update-docs.sh [TORCHLEAK]   (default: build/dev/torchleak)
set -euo pipefail
cd "$(dirname "$0")/.."
tl="${1:-build/dev/torchleak}"
"$tl" rule --all --output-dir docs/rules
"$tl" rule --all --lang zh --output-dir docs/zh/rules
table=$("$tl" rule --table)
tmp=$(mktemp README.md.XXXXXX)
awk -v table="$table" '
  /^<!-- rules -->$/ { print; print table; skip = 1; next }
  /^<!-- \/rules -->$/ { skip = 0 }
  !skip { print }
' README.md >"$tmp"
mv "$tmp" README.md
