#!/usr/bin/env bash
# The analysis cache's benchmark (docs/scaling.md): on one project, N times,
# four runs of `torchleak check` back to back, and their medians:
#
#   cold   the whole project, --no-cache
#   fill   the whole project, a new empty cache being filled
#   warm   the whole project again, nothing changed (every finding from the cache)
#   one    one file changed (a line appended), named alone: what pre-commit does
#          on a commit; the rest of the project's facts from the cache
#
# and the ratios to cold that docs/scaling.md states as targets.
#
#   bash bench/cache.sh TORCHLEAK DIR [--runs N] [--copies K] [--file REL]
#
# DIR is copied first (a temporary directory, under a new git repository: the
# project's root; DIR's own .git is left out, its configuration files are
# not: they would make each copy a project), K times side by side (--copies: a larger project of the
# same code, e.g. 5 copies of a 1,000-file repository). --file names the file
# changed, relative to DIR (default: the first Python file of the copy, in
# sorted order). Each run uses its own new cache directory.
set -euo pipefail
usage() { echo "usage: bash bench/cache.sh TORCHLEAK DIR [--runs N] [--copies K] [--file REL]" >&2; exit 2; }
[ $# -ge 2 ] || usage
torchleak=$(realpath "$1") src=$(realpath "$2")
shift 2
runs=5 copies=1 file=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --copies) copies=$2; shift 2 ;;
    --file) file=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ && "$copies" =~ ^[1-9][0-9]*$ ]] || usage

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
project=$work/project
mkdir -p "$project"
# A copy's own repository would make it a project of its own: not copied.
for k in $(seq 1 "$copies"); do cp -r "$src" "$project/copy$k" && rm -rf "$project/copy$k/.git"; done
git -C "$project" init -q .
cd "$project"
if [ -z "$file" ]; then
  file=$(cd copy1 && find . -name '*.py' -not -path '*/.*' | LC_ALL=C sort | sed -n 1p)
  [ -n "$file" ] || { echo "no Python file under $src" >&2; exit 2; }
fi
changed=copy1/${file#./}
[ -f "$changed" ] || { echo "no file $file under $src" >&2; exit 2; }
files=$("$torchleak" check --show-files . | grep -c '\.py$' || true)

# Wall time of one command, in seconds (its output is discarded; findings are not failures).
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || [ $? -eq 1 ]
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f-%.3f", lo, hi}'; }

declare -a cold fill warm one
original=$(cat "$changed")
for r in $(seq 1 "$runs"); do
  cache=$work/cache-$r
  cold+=("$(seconds "$torchleak" check --no-cache --quiet .)")
  fill+=("$(seconds "$torchleak" check --cache-dir "$cache" --quiet .)")
  warm+=("$(seconds "$torchleak" check --cache-dir "$cache" --quiet .)")
  printf '%s\n# changed by the benchmark, run %s\n' "$original" "$r" >"$changed"
  one+=("$(seconds "$torchleak" check --cache-dir "$cache" --quiet "$changed")")
  printf '%s\n' "$original" >"$changed"
done

c=$(printf '%s\n' "${cold[@]}" | median)
f=$(printf '%s\n' "${fill[@]}" | median)
w=$(printf '%s\n' "${warm[@]}" | median)
o=$(printf '%s\n' "${one[@]}" | median)
echo "project: $files Python files ($copies cop$([ "$copies" = 1 ] && echo y || echo ies) of $src); changed file: $changed; $runs runs, medians"
printf '%-6s %9s %9s  %-14s %s\n' run seconds ratio target range
printf '%-6s %9.3f %9s  %-14s %s\n' cold "$c" 1 "" "$(printf '%s\n' "${cold[@]}" | spread)"
printf '%-6s %9.3f %8.3fx  %-14s %s\n' fill "$f" "$(echo "$f / $c" | bc -l)" "at most 1.05x" "$(printf '%s\n' "${fill[@]}" | spread)"
printf '%-6s %9.3f %8.1f%%  %-14s %s\n' warm "$w" "$(echo "100 * $w / $c" | bc -l)" "at most 10%" "$(printf '%s\n' "${warm[@]}" | spread)"
printf '%-6s %9.3f %8.1f%%  %-14s %s\n' one "$o" "$(echo "100 * $o / $c" | bc -l)" "at most 5%" "$(printf '%s\n' "${one[@]}" | spread)"
