#!/usr/bin/env bash
# The accuracy scoreboard: runs torchleak on the real-world development set (fixtures/realworld/)
# and prints true positives, false positives, misses, recall and precision per rule and in total.
# Options are tools/accuracy/score.py's (--help): --verbose, --case, --ratchet, --write-docs, ...
# The binary is --binary PATH, else $TORCHLEAK, else build/release/torchleak, else build/dev/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tools/accuracy/score.py "$@"
