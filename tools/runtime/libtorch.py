"""Compiling the runtime oracle's LibTorch programs (fixtures/runtime/cpp/).

Used by oracle.py.  ``find_toolchain`` looks for a C++ compiler and a
LibTorch install (Debian's libtorch-dev puts the headers in /usr/include and
/usr/include/torch/csrc/api/include and the libraries in the default library
path); without one the C++ programs are skipped, with the reason.  A
``Builder`` compiles programs into a temporary directory, several at a time:

    g++ -std=c++17 -O0 -isystem <api include> prog.cpp -ltorch -ltorch_cpu -lc10

When there are enough programs to pay for it, it first precompiles
<torch/torch.h> into the same temporary directory (about 25 s and 550 MB with
g++ 12 and LibTorch 1.13), which halves each later compile (about 11 s to
5 s).  A program whose first include is <torch/torch.h> uses it; a
precompiled header the compiler rejects is skipped with a warning and the
real header is read instead.  Nothing is cached between runs.
"""

import concurrent.futures
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

LIBRARIES = ("torch", "torch_cpu", "c10")
STANDARD_FLAGS = ["-std=c++17", "-O0"]
PCH_MIN_PROGRAMS = 4  # below this, precompiling <torch/torch.h> costs more than it saves


class Toolchain(object):
    def __init__(self, cxx, include_dirs, lib_dir, cxx_version, torch_version):
        self.cxx = cxx
        self.include_dirs = include_dirs  # for -isystem, the C++ API's first
        self.lib_dir = lib_dir  # None: the compiler's default search path
        self.cxx_version = cxx_version
        self.torch_version = torch_version

    @property
    def description(self):
        return "{} {} against LibTorch {}".format(os.path.basename(self.cxx), self.cxx_version,
                                                 self.torch_version)

    def include_flags(self):
        out = []
        for d in self.include_dirs:
            out += ["-isystem", d]
        return out

    def link_flags(self):
        out = []
        if self.lib_dir:
            out += ["-L" + self.lib_dir, "-Wl,-rpath," + self.lib_dir]
        return out + ["-l" + lib for lib in LIBRARIES]


def _prefixes():
    """Install prefixes to look in: the variables CMake users set, then the system's."""
    out = []
    for var in ("TORCH_INSTALL_PREFIX", "LIBTORCH"):
        if os.environ.get(var):
            out.append(os.environ[var])
    torch_dir = os.environ.get("Torch_DIR")
    if torch_dir:  # <prefix>/share/cmake/Torch
        out.append(os.path.normpath(os.path.join(torch_dir, "..", "..", "..")))
    out += ["/usr", "/usr/local"]
    return out


def _output(cmd):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_toolchain(cxx=None):
    """(Toolchain, None), or (None, the reason the C++ programs cannot be built)."""
    cxx = cxx or os.environ.get("TORCHLEAK_CXX") or "g++"
    path = shutil.which(cxx)
    if path is None:
        return None, ("no C++ compiler: `{}` is not on PATH (install g++, or name another with "
                      "--cxx or TORCHLEAK_CXX)".format(cxx))
    for prefix in _prefixes():
        include = os.path.join(prefix, "include")
        api = os.path.join(include, "torch", "csrc", "api", "include")
        if os.path.isfile(os.path.join(api, "torch", "torch.h")):
            break
        if os.path.isfile(os.path.join(include, "torch", "torch.h")):
            # an install that flattened the C++ API into include/
            api = include
            break
    else:
        return None, ("LibTorch's headers were not found (no torch/torch.h under "
                      "<prefix>/include/torch/csrc/api/include or <prefix>/include for prefix in "
                      "$TORCH_INSTALL_PREFIX, $LIBTORCH, $Torch_DIR/../../.., /usr, /usr/local); "
                      "install libtorch-dev")
    if not os.path.isfile(os.path.join(include, "ATen", "ATen.h")):
        return None, "LibTorch's headers in {} lack ATen/ATen.h".format(include)
    include_dirs = [api] + ([include] if include != "/usr/include" else [])

    # The libraries: where the compiler finds them by itself, or in <prefix>/lib.
    lib_dir = None
    missing = []
    for lib in LIBRARIES:
        name = "lib{}.so".format(lib)
        found = _output([path, "-print-file-name=" + name])
        if found and os.path.isabs(found) and os.path.exists(found):
            continue
        candidate = os.path.join(prefix, "lib", name)
        if os.path.exists(candidate):
            lib_dir = os.path.join(prefix, "lib")
            continue
        missing.append(name)
    if missing:
        return None, "LibTorch's libraries were not found: {} (install libtorch-dev)".format(
            ", ".join(missing))

    version = "?"
    try:
        with open(os.path.join(api, "torch", "version.h")) as f:
            m = re.search(r'#define\s+TORCH_VERSION\s+\\?\s*"([^"]+)"', f.read())
        if m:
            version = m.group(1)
    except OSError:
        pass
    cxx_version = _output([path, "-dumpfullversion", "-dumpversion"]) or "?"
    return Toolchain(path, include_dirs, lib_dir, cxx_version, version), None


class Compiled(object):
    """One program compiled: the executable, or the compiler's error."""

    def __init__(self, source, exe, error, seconds):
        self.source = source
        self.exe = exe
        self.error = error
        self.seconds = seconds

    @property
    def ok(self):
        return self.error is None


def first_error(stderr):
    for line in stderr.splitlines():
        if "error" in line:
            return line.strip()
    lines = [l for l in stderr.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "no output"


class Builder(object):
    """Compiles programs into a temporary directory, ``jobs`` at a time."""

    def __init__(self, toolchain, jobs, log):
        self.toolchain = toolchain
        self.jobs = max(1, jobs)
        self.log = log
        self.tmp = tempfile.mkdtemp(prefix="torchleak-oracle-cpp-")
        self.pch_dir = None
        self.pch_tried = False
        self.pch_seconds = 0.0
        self.compiled = {}  # absolute source path -> Compiled
        self.lock = threading.Lock()
        self.seconds = 0.0  # wall-clock time spent in build()
        self.count = 0

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def build_pch(self):
        """Precompile <torch/torch.h> into tmp/pch/torch/torch.h.gch."""
        self.pch_tried = True
        tc = self.toolchain
        pch_dir = os.path.join(self.tmp, "pch")
        os.makedirs(os.path.join(pch_dir, "torch"))
        header = os.path.join(tc.include_dirs[0], "torch", "torch.h")
        # A second `#include <torch/torch.h>` (from _measure.h) looks for the
        # header next to the precompiled one, and the include guard skips it.
        os.symlink(header, os.path.join(pch_dir, "torch", "torch.h"))
        cmd = ([tc.cxx] + STANDARD_FLAGS + tc.include_flags()
               + ["-x", "c++-header", header, "-o", os.path.join(pch_dir, "torch", "torch.h.gch")])
        start = time.time()
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=600)
            ok = proc.returncode == 0
            why = first_error(proc.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, str(exc)
        self.pch_seconds = time.time() - start
        if ok:
            self.pch_dir = pch_dir
            self.log("  C++ precompiled <torch/torch.h> in {:.1f} s".format(self.pch_seconds))
        else:
            shutil.rmtree(pch_dir, ignore_errors=True)
            self.log("  C++ could not precompile <torch/torch.h> ({}); compiling without".format(why))

    def compile_one(self, source):
        tc = self.toolchain
        digest = hashlib.sha1(source.encode("utf-8")).hexdigest()[:10]
        exe = os.path.join(self.tmp, "bin", "{}_{}".format(
            os.path.splitext(os.path.basename(source))[0], digest))
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        cmd = [tc.cxx] + STANDARD_FLAGS
        if self.pch_dir:
            cmd += ["-Winvalid-pch", "-I", self.pch_dir]
        cmd += tc.include_flags() + [source, "-o", exe] + tc.link_flags()
        start = time.time()
        try:
            proc = subprocess.run(cmd, cwd=os.path.dirname(source), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
            error = None if proc.returncode == 0 else first_error(proc.stderr)
            if self.pch_dir and "torch.h.gch" in proc.stderr:
                self.log("  C++ note: the precompiled header was not used for {}".format(source))
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = str(exc)
        return Compiled(source, None if error else exe, error, time.time() - start)

    def build(self, sources, labels=None, expected_total=None):
        """Compile the sources not compiled yet; a dict source -> Compiled for all of them.

        ``labels`` names sources in the log; ``expected_total`` is how many
        programs this run will compile in all (it decides whether to
        precompile <torch/torch.h>)."""
        labels = labels or {}
        todo = [s for s in dict.fromkeys(sources) if s not in self.compiled]
        start = time.time()
        if todo and not self.pch_tried and (expected_total or len(todo)) >= PCH_MIN_PROGRAMS:
            self.build_pch()
        if todo:
            with concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs) as pool:
                for result in pool.map(self.compile_one, todo):
                    with self.lock:
                        self.compiled[result.source] = result
                        self.count += 1
                    self.log("  C++ compiled {} in {:.1f} s{}".format(
                        labels.get(result.source, result.source), result.seconds,
                        "" if result.ok else ": " + result.error[:200]))
        with self.lock:
            self.seconds += time.time() - start
        return {s: self.compiled[s] for s in sources}
