#!/usr/bin/env bash
# Installs the .deb in a fresh minimal Debian (debootstrap --variant=minbase)
# and runs it: apt resolves the dependencies that dpkg-shlibdeps computed, and
# the executable analyzes a leaking file there. Not in CI (it downloads a base
# system from Debian's archive, a few minutes); run it as root:
#   bash scripts/test-deb-chroot.sh DEB [SUITE]   (SUITE: bookworm)
set -euo pipefail
deb="$(realpath "$1")"
suite="${2:-bookworm}"
if [ "$(id -u)" -ne 0 ]; then echo "test-deb-chroot: run as root (debootstrap, chroot)" >&2; exit 2; fi
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
root="$(mktemp -d)"
cleanup() {
  for m in proc sys dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
echo "test-deb-chroot: debootstrap $suite (minbase) into $root"
debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian >/dev/null
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/"
cat > "$root/tmp/train.py" <<'PY'
def train(model, loader, optimizer, criterion):
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    return total
PY
chroot "$root" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$deb") >/dev/null"
status=0
out="$(chroot "$root" /usr/bin/torchleak check /tmp/train.py 2>&1)" || status=$?
echo "$out"
if [ "$status" -ne 1 ] || ! grep -q "train.py:8:9: warning: .*\[TL001 accumulate-undetached\]" <<<"$out"; then
  echo "test-deb-chroot: FAIL (exit $status)" >&2
  exit 1
fi
chroot "$root" /usr/bin/torchleak --version
echo "test-deb-chroot: ok: the .deb installs and runs in a minimal $suite"
