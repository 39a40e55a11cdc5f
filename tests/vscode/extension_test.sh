# The VS Code extension: its unit tests (node --test, against a stand-in of
# the vscode API), then its package, built with the @vscode/vsce the lockfile
# pins, holding the extension's code and its one runtime dependency.
set -euo pipefail
ext=$1
if [ ! -d "$ext/node_modules/@vscode/vsce" ]; then
  echo "editors/vscode/node_modules is missing: run scripts/setup.sh (it runs npm ci there)" >&2
  exit 1
fi
cd "$ext"
node --test test/
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npx --no-install vsce package --skip-license --out "$work/torchleak.vsix" >"$work/vsce.log" 2>&1 || {
  cat "$work/vsce.log" >&2
  exit 1
}
python3 - "$work/torchleak.vsix" <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
need = ["extension/package.json", "extension/README.md", "extension/src/extension.js", "extension/src/resolve.js",
        "extension/node_modules/vscode-languageclient/node.js"]
missing = [n for n in need if n not in names]
assert not missing, f"the package lacks {missing}"
assert not any(n.startswith("extension/test/") for n in names), "the package holds the tests"
assert not any(n.startswith("extension/node_modules/@vscode/vsce/") for n in names), "the package holds vsce"
manifest = json.loads(z.read("extension/package.json"))
assert manifest["main"] == "./src/extension.js", manifest["main"]
assert "torchleak.path" in manifest["contributes"]["configuration"]["properties"]
print(f"packaged: {len(names)} files")
PY
