#!/usr/bin/env python3
"""Per-translation-unit cost of `torchleak check` on LibTorch files, side by
side with `clang++ -fsyntax-only` and clang-tidy on the same files and flags.

    python3 bench/cpp/bench.py --torchleak build/release/torchleak \
        [--tidy-module build/release/src/cpp/libtorchleak-tidy.so] [FILES...]

For each file (default: the positive fixtures of fixtures/cpp/TL001), it runs
  - clang++ -fsyntax-only (the compiler's floor: parsing and semantic analysis)
  - clang-tidy with one cheap built-in check (bugprone-use-after-move)
  - clang-tidy with the torchleak module (-checks='-*,torchleak-*'), if given
  - torchleak check, cold (an empty cache directory: the precompiled header is
    built first) and warm (the cache filled)
each --repeat times, one at a time (-j1), and prints the median seconds and the
median peak resident memory (from wait4's rusage) per translation unit, and
the ratios the targets are stated in. It measures; it does not assert.
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def libtorch_flags():
    for prefix in ("/usr/local", "/usr"):
        api = os.path.join(prefix, "include/torch/csrc/api/include")
        if os.path.exists(os.path.join(api, "torch/torch.h")):
            return ["-std=c++17", "-isystem", api]
    sys.exit("bench: LibTorch's headers were not found (install libtorch-dev)")


def measure(cmd, env=None):
    """(seconds, peak RSS in MiB) of one run; the command must succeed."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # torchleak exits 1 when it finds something
        sys.exit(f"bench: {' '.join(cmd)} failed ({code}):\n{err}")
    return seconds, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torchleak", required=True)
    ap.add_argument("--tidy-module")
    ap.add_argument("--clang", default=shutil.which("clang++-14") or shutil.which("clang++"))
    ap.add_argument("--clang-tidy", default=shutil.which("clang-tidy-14") or shutil.which("clang-tidy"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or sorted(glob.glob(os.path.join(ROOT, "fixtures/cpp/TL001/pos_*.cpp")))
    flags = libtorch_flags()
    rows = {}

    def record(name, cmd, env=None):
        s, m = measure(cmd, env)
        rows.setdefault(name, ([], []))
        rows[name][0].append(s)
        rows[name][1].append(m)

    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeat):
            for f in files:
                record("clang++ -fsyntax-only", [a.clang, "-fsyntax-only", *flags, f])
                if a.clang_tidy:
                    record("clang-tidy, one check",
                           [a.clang_tidy, "-checks=-*,bugprone-use-after-move", f, "--", *flags])
                    if a.tidy_module:
                        record("clang-tidy, torchleak module",
                               [a.clang_tidy, f"--load={a.tidy_module}", "-checks=-*,torchleak-*", f, "--", *flags])
                cold = os.path.join(tmp, f"cold-{rep}-{os.path.basename(f)}")
                record("torchleak check, cold cache",
                       [a.torchleak, "check", "-q", "-j1", "--exit-zero", f], dict(os.environ, TORCHLEAK_CACHE_DIR=cold))
                shutil.rmtree(cold, ignore_errors=True)
                warm = os.path.join(tmp, "warm")
                env = dict(os.environ, TORCHLEAK_CACHE_DIR=warm)
                if rep == 0 and f == files[0]:
                    measure([a.torchleak, "check", "-q", "-j1", "--exit-zero", f], env)  # fill the cache
                record("torchleak check, warm cache", [a.torchleak, "check", "-q", "-j1", "--exit-zero", f], env)

    print(f"{len(files)} translation units x {a.repeat} runs; medians per translation unit")
    print(f"{'':32} {'seconds':>8} {'peak MiB':>9}")
    med = {}
    for name, (secs, mems) in rows.items():
        med[name] = (statistics.median(secs), statistics.median(mems))
        print(f"{name:32} {med[name][0]:8.2f} {med[name][1]:9.0f}")
    warm = med["torchleak check, warm cache"]
    syntax = med["clang++ -fsyntax-only"]
    print(f"warm torchleak / clang++ -fsyntax-only: {warm[0] / syntax[0]:.2f}x (target <= 0.35x)")
    if "clang-tidy, one check" in med:
        tidy = med["clang-tidy, one check"]
        print(f"clang-tidy one check / warm torchleak: {tidy[0] / warm[0]:.1f}x faster (target >= 5x); "
              f"peak memory {warm[1]:.0f} MiB vs {tidy[1]:.0f} MiB")


if __name__ == "__main__":
    main()
