#!/usr/bin/env bash
# Installs what torchleak needs on Debian (bookworm) and builds it.
# Usage: scripts/setup.sh [PRESET]   (PRESET: release (default), dev, asan, fuzz, portable)
#        scripts/setup.sh --deps-only   only what building the wheel of the Python
#                                       analysis needs (the GitHub Action, docs/install.md)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"

if [ "$preset" = "--deps-only" ]; then
  # The toolchain and the libraries of the Python analysis, nothing for the tests.
  packages=(
    build-essential cmake ninja-build pkg-config git python3-venv
    libtree-sitter-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libfmt-dev libgit2-dev libxxhash-dev
    libcereal-dev
  )
else
  # Debian packages: the toolchain and every library torchleak links against.
  packages=(
    build-essential cmake ninja-build pkg-config git
    libtree-sitter-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libfmt-dev
    libgit2-dev libxxhash-dev libcereal-dev libgtest-dev libdtl-dev libmimalloc-dev jq
    libclang-14-dev llvm-14-dev clang-14 clang-tools-14 clang-tidy-14 clang-format-14 clangd-14 libtorch-dev
    # libFuzzer's runtime (libclang_rt.fuzzer) for the fuzz preset: clang-14 only recommends it.
    libclang-rt-14-dev
  )
fi
# Node.js and npm only fetch the pinned grammar sources. A machine that already
# has them (from any source) keeps its own: Debian's npm package conflicts with
# a Node.js that bundles npm, and apt then refuses the whole install.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
# Extra packages a caller asks for (the test set-up adds the ones tests use).
if [ -n "${TORCHLEAK_EXTRA_PACKAGES:-}" ]; then
  read -r -a extra <<<"$TORCHLEAK_EXTRA_PACKAGES"
  packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tree-sitter-python grammar's sources, pinned by package-lock.json.
# --ignore-scripts: only the C sources are used, nothing is built or downloaded.
if [ ! -f node_modules/tree-sitter-python/src/parser.c ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
fi

# The VS Code extension's packages (editors/vscode, pinned by its lockfile):
# vscode-languageclient, and @vscode/vsce to package it. --omit=optional and
# --ignore-scripts: no prebuilt binary (keytar, vsce-sign) is fetched or built.
if [ "$preset" = dev ] && { [ ! -d editors/vscode/node_modules/@vscode/vsce ] ||
                            [ editors/vscode/package-lock.json -nt editors/vscode/node_modules/.package-lock.json ]; }; then
  (cd editors/vscode && npm ci --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error)
fi

[ "$preset" = "--deps-only" ] && exit 0
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
