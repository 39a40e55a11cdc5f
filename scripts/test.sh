#!/usr/bin/env bash
# Installs everything the tests use, builds with warnings as errors, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# pre-commit: the hook test; neovim: the editor test; python3-torch: the runtime oracle.
TORCHLEAK_EXTRA_PACKAGES="pre-commit neovim python3-torch python3-numpy ${TORCHLEAK_EXTRA_PACKAGES:-}" scripts/setup.sh dev
ctest --preset dev
