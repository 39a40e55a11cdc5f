#!/usr/bin/env bash
# Installs everything the tests use, builds with warnings as errors, runs every test:
#   dev   the whole suite;
#   asan  the whole suite again under AddressSanitizer and UndefinedBehaviorSanitizer
#         (CMakePresets.json's asan test preset says which test it leaves out, and why);
#   fuzz  each libFuzzer target of tests/fuzz for 60 s, seeded from fixtures/ and the tests;
#   packaging  the wheel, pipx, the language: python pre-commit hook, the .deb and the GitHub
#         Action (tests/packaging/packaging_test.sh, docs/install.md).
# TORCHLEAK_TEST_PRESETS picks some of them (default: "dev asan fuzz packaging").
set -euo pipefail
cd "$(dirname "$0")/.."
presets=${TORCHLEAK_TEST_PRESETS:-dev asan fuzz packaging}
# pre-commit: the hook test; neovim: the editor test; bazel-bootstrap: the Bazel aspect test;
# python3-torch: the runtime oracle;
# python3: the accuracy scorer (tools/accuracy/score.py); python3-hatchling, python3-build,
# python3-venv, pipx: the packaging test.
TORCHLEAK_EXTRA_PACKAGES="pre-commit neovim bc bazel-bootstrap python3 python3-torch python3-numpy python3-hatchling python3-build \
python3-venv pipx ${TORCHLEAK_EXTRA_PACKAGES:-}" scripts/setup.sh dev

for preset in $presets; do
  start=$SECONDS
  if [ "$preset" = packaging ]; then
    bash tests/packaging/packaging_test.sh build/dev/torchleak .
    echo "test.sh: packaging: built and tested in $((SECONDS - start)) s"
    continue
  fi
  if [ "$preset" != dev ]; then  # setup.sh built dev
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset"
  fi
  built=$SECONDS
  ctest --preset "$preset"
  echo "test.sh: $preset: built in $((built - start)) s, tested in $((SECONDS - built)) s"
done
