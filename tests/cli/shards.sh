# Shards: `torchleak facts` writes the cross-file facts of a shard's files, and `check --facts`
# analyzes a shard with the other shards' facts: for every split of a project into two shards,
# the shards' findings together are the whole project's. `merge-sarif` makes one SARIF run of the
# shards' reports, with one category.
source "$(dirname "$0")/common.bash"

# A training loop whose zero_grad is in a helper file, and a tagger wrapped in DataParallel by
# another script (the fixtures of TL010 and TL005).
mkdir -p proj/tagger
cp "$SOURCE_DIR"/fixtures/python/TL010/neg_cross_file_helper/*.py proj/
cp "$SOURCE_DIR"/fixtures/python/TL005/cross_file_wrap/*.py proj/tagger/
cd proj || exit 2
files=(engine.py train.py tagger/model.py tagger/train.py)

rules() { sed -nE 's/^([^ :]+):([0-9]+):[0-9]+: [a-z]+: .* \[(TL[0-9]+) [^]]*\]$/\3 \1:\2/p' <<<"$OUT"; }

case_ "the whole project"
tl check --isolated "${files[@]}"
expect_rc 1
whole="$(rules)"
compare "findings" "$whole" <<'TXT'
TL005 tagger/model.py:18
TXT

case_ "every split into two shards gives the whole project's findings"
for mask in $(seq 1 14); do
  a=() b=()
  for i in 0 1 2 3; do
    if (((mask >> i) & 1)); then a+=("${files[$i]}"); else b+=("${files[$i]}"); fi
  done
  tl facts "${a[@]}" -o a.facts
  expect_rc 0
  tl facts "${b[@]}" -o b.facts
  expect_rc 0
  tl check --facts b.facts "${a[@]}"
  found="$(rules)"
  tl check --facts a.facts "${b[@]}"
  found="$(printf '%s\n%s\n' "$found" "$(rules)" | sed '/^$/d' | sort)"
  compare "findings of split $mask" "$found" <<<"$whole"
  # Every shard's facts, its own included, give the same.
  tl check --facts a.facts --facts b.facts "${a[@]}"
  found="$(rules)"
  tl check --facts a.facts --facts b.facts "${b[@]}"
  found="$(printf '%s\n%s\n' "$found" "$(rules)" | sed '/^$/d' | sort)"
  compare "findings of split $mask with every shard's facts" "$found" <<<"$whole"
done

case_ "merge-sarif: one run, one category"
tl facts engine.py tagger/model.py -o a.facts
tl facts train.py tagger/train.py -o b.facts
tl check --facts b.facts --format sarif -o a.sarif --exit-zero engine.py tagger/model.py
tl check --facts a.facts --format sarif -o b.sarif --exit-zero train.py tagger/train.py
tl merge-sarif --category torchleak -o merged.sarif a.sarif b.sarif
expect_rc 0
compare "merged run" "$(python3 - <<'PY'
import json
log = json.load(open("merged.sarif"))
run = log["runs"][0]
print(len(log["runs"]), run["automationDetails"]["id"], run["invocations"][0]["executionSuccessful"])
for r in run["results"]:
    print(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
PY
)" <<'TXT'
1 torchleak/ True
TL005 tagger/model.py
TXT

case_ "a file that is not a facts file is an error naming it"
printf '{"facts": []}\n' >bad.facts
tl check --facts bad.facts train.py
expect_rc 2
compare "stderr" "$ERR" <<'TXT'
torchleak: error: bad.facts: not a facts file written by `torchleak facts`
TXT
tl merge-sarif a.facts
expect_rc 2

done_
