#!/usr/bin/env bash
# The install paths of docs/install.md, end to end, offline:
#   - the wheel builds with Debian's hatchling (no isolation, nothing downloaded),
#     holds only the executable, installs into a fresh virtual environment and
#     with pipx, and finds exactly what the dev build finds in examples/;
#   - the executable needs only glibc and Kerberos' GSSAPI library, and says
#     clearly that a C++ file needs a build with Clang;
#   - the `language: python` pre-commit hook installs from the repository
#     itself (pre-commit try-repo) and refuses a leaking file, passes a clean one;
#   - the .deb (CPack) holds the executable and the docs and depends only on
#     what dpkg-shlibdeps computed; its executable runs;
#   - action.yml (tests/packaging/action_test.py).
# Usage: bash tests/packaging/packaging_test.sh DEV_TORCHLEAK SOURCE_DIR
set -euo pipefail
dev="$(realpath "$1")"
src="$(realpath "$2")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python=/usr/bin/python3  # Debian's, where python3-hatchling and python3-build live
fail=0
expect() {  # expect NAME COMMAND...
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=$((fail + 1)); fi
}
normalise() { sed -E 's/in [0-9.]+ s\)/in N s)/'; }

# --- the wheel -------------------------------------------------------------------------
build="$src/build/wheel"
export TORCHLEAK_WHEEL_CPP=OFF TORCHLEAK_WHEEL_BUILD_DIR="$build" TORCHLEAK_OFFLINE=1
PIP_NO_INDEX=1 "$python" -m build --wheel --no-isolation --skip-dependency-check --outdir "$work/dist" "$src" \
  >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/torchleak-*.whl)"
expect "the wheel is named for any Python 3 on this platform" \
  grep -q "torchleak-0.1.0-py3-none-linux_$(uname -m).whl$" <<<"$wheel"
contents="$("$python" -c 'import sys, zipfile; print("\n".join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))' "$wheel")"
expect "the wheel holds the executable in its scripts and nothing in site-packages" test "$contents" = \
"torchleak-0.1.0.data/scripts/torchleak
torchleak-0.1.0.dist-info/METADATA
torchleak-0.1.0.dist-info/RECORD
torchleak-0.1.0.dist-info/WHEEL"

"$python" -m venv "$work/venv"
PIP_NO_INDEX=1 "$work/venv/bin/pip" install --quiet "$wheel"
tl="$work/venv/bin/torchleak"
expect "pip puts torchleak on the environment's PATH, executable" test -x "$tl"
expect "the installed torchleak is this version" test "$("$tl" --version)" = "torchleak 0.1.0"
(cd "$src" && "$tl" check examples/ >"$work/wheel.txt" 2>&1) || true
(cd "$src" && "$dev" check examples/ >"$work/dev.txt" 2>&1) || true
expect "the wheel's torchleak finds exactly what the dev build finds in examples/" \
  cmp -s <(normalise <"$work/wheel.txt") <(normalise <"$work/dev.txt")
expect "... and that is not nothing" grep -q "Found 5 problems in 2 files" "$work/wheel.txt"

libs="$(ldd "$tl" | awk '{print $1}' | sed -E 's/\.so.*//' | sort | tr '\n' ' ')"
expect "the executable needs only glibc and GSSAPI (Kerberos): $libs" test "$libs" = \
  "/lib64/ld-linux-x86-64 libc libcom_err libgssapi_krb5 libk5crypto libkeyutils libkrb5 libkrb5support libm libresolv linux-vdso "
newest="$(objdump -T "$tl" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1)"
expect "the newest glibc symbol version it needs is the one docs/install.md names ($newest)" \
  grep -q "glibc ${newest#GLIBC_} or later" "$src/docs/install.md"
printf 'int main() { return 0; }\n' >"$work/main.cpp"
status=0
out="$("$tl" check "$work/main.cpp" 2>&1)" || status=$?
expect "a C++ file meets a build without the C++ frontend: exit 2" test "$status" -eq 2
expect "... with a message that says so" grep -qF "$work/main.cpp: a C++ source file, and this build of torchleak has no LibTorch (C++) frontend: it needs a build with Clang's libraries (docs/install.md)" <<<"$out"

export PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx-bin"
if command -v pipx >/dev/null; then
  # Offline, pipx's first install fails to upgrade the pip it shares between
  # environments (it asks the index); the retry uses the one it has.
  PIP_NO_INDEX=1 pipx install "$wheel" >"$work/pipx.log" 2>&1 || PIP_NO_INDEX=1 pipx install "$wheel" >>"$work/pipx.log" 2>&1 ||
    cat "$work/pipx.log"
  expect "pipx installs the wheel" test "$("$PIPX_BIN_DIR/torchleak" --version)" = "torchleak 0.1.0"
else
  echo "FAIL pipx is not installed"; fail=$((fail + 1))
fi

# --- pre-commit, language: python --------------------------------------------------------
# pre-commit installs the hook repository into a virtual environment of its own
# with pip, which builds the wheel. Offline here: no index, no build isolation,
# and the environment sees Debian's hatchling (system site-packages).
hooks="$work/hooks"
mkdir -p "$hooks"
(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$hooks")
mkdir -p "$hooks/node_modules/tree-sitter-python"
cp -r "$src/node_modules/tree-sitter-python/src" "$hooks/node_modules/tree-sitter-python/"
# The grammar's sources are committed in this throwaway copy, so that the
# clone pre-commit makes builds without npm.
git -C "$hooks" init -q
git -C "$hooks" add -A
git -C "$hooks" add -f node_modules/tree-sitter-python/src
git -C "$hooks" -c user.name=test -c user.email=test@example.invalid commit -qm hooks
repo="$work/repo"
mkdir -p "$repo"
git -C "$repo" init -q
cat >"$repo/train.py" <<'PY'
def train(model, loader, optimizer, criterion):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running
PY
git -C "$repo" add train.py
export PRE_COMMIT_HOME="$work/pre-commit" PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0 VIRTUALENV_SYSTEM_SITE_PACKAGES=1
unset TORCHLEAK_WHEEL_BUILD_DIR
status=0
out="$(cd "$repo" && pre-commit try-repo "$hooks" torchleak-python --files train.py 2>&1)" || status=$?
expect "the language: python hook refuses a leaking file" test "$status" -eq 1
expect "... naming the line" grep -q "train.py:8:9: warning: .*\[TL001 accumulate-undetached\]" <<<"$out" || echo "$out" | tail -20
sed -i 's/running += loss$/running += loss.item()/' "$repo/train.py"
status=0
out="$(cd "$repo" && pre-commit try-repo "$hooks" torchleak-python --files train.py 2>&1)" || status=$?
expect "the language: python hook passes a clean file" test "$status" -eq 0
expect "... having run" grep -q "torchleak.*Passed" <<<"$out"
unset PIP_NO_BUILD_ISOLATION VIRTUALENV_SYSTEM_SITE_PACKAGES

# --- the .deb ------------------------------------------------------------------------------
(cd "$build" && cpack -B "$work/deb" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb="$work/deb/torchleak_0.1.0_$(dpkg --print-architecture).deb"
expect "cpack builds the .deb" test -f "$deb"
depends="$(dpkg-deb -f "$deb" Depends)"
expect "its dependencies are the shared libraries, computed: $depends" \
  grep -qE '^libc6 \(>= 2\.[0-9]+\), libgssapi-krb5-2 \(>= [0-9.]+\)$' <<<"$depends"
files="$(dpkg-deb -c "$deb" | awk '{print $6}')"
expect "it installs /usr/bin/torchleak, executable" grep -q '^-rwxr-xr-x' <(dpkg-deb -c "$deb" | grep ' ./usr/bin/torchleak$')
expect "... and the documentation" grep -qx './usr/share/doc/torchleak/docs/install.md' <<<"$files"
dpkg-deb -x "$deb" "$work/root"
expect "the packaged executable runs" test "$("$work/root/usr/bin/torchleak" --version)" = "torchleak 0.1.0"

# --- the GitHub Action -------------------------------------------------------------------------
"$python" "$src/tests/packaging/action_test.py" "$src" "$wheel" || fail=$((fail + 1))

echo "packaging: $fail failed"
[ "$fail" -eq 0 ]
