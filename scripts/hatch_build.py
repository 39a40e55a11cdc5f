"""hatchling build hook: builds the torchleak executable with CMake for the wheel.

The executable goes into the wheel's scripts (`<name>.data/scripts/torchleak`),
which installers put on PATH as it is, like ruff's. It is built portable
(TORCHLEAK_PORTABLE: static libstdc++, libgit2, fmt, toml++), see docs/install.md.

Needs the grammar sources that `npm ci --ignore-scripts` fetches (pinned by
package-lock.json); when they are missing and npm is installed, the hook runs
it (set TORCHLEAK_OFFLINE=1 to forbid). With them, the build downloads nothing.

Environment:
  TORCHLEAK_WHEEL_CPP   ON: with the LibTorch (C++) frontend (needs Clang's libraries,
                        at build time and at run time); OFF: Python analysis only
                        (runs wherever glibc does); unset: ON when Clang's CMake
                        package is found.
  TORCHLEAK_WHEEL_BUILD_DIR   the CMake build directory (default: build/wheel).
"""
import os
import shutil
import subprocess
import sysconfig

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class TorchleakExecutable(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        if version == "editable":
            raise RuntimeError("torchleak: an editable install has nothing to edit; install the wheel")
        root = self.root
        grammar = os.path.join(root, "node_modules", "tree-sitter-python", "src", "parser.c")
        if not os.path.exists(grammar):
            # A fresh clone (pre-commit's `language: python` hook installs from
            # one): fetch the pinned sources, unless told to stay offline.
            if shutil.which("npm") is None or os.environ.get("TORCHLEAK_OFFLINE"):
                raise RuntimeError(
                    f"torchleak: the pinned tree-sitter-python sources are missing ({grammar}): "
                    "run `npm ci --ignore-scripts` in the checkout first")
            self.app.display_info("torchleak: fetching the pinned grammar sources (npm ci --ignore-scripts)")
            subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error",
                            "--omit=dev"], cwd=root, check=True)
        for tool in ("cmake", "ninja"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"torchleak: `{tool}` is not installed (Debian: apt-get install cmake ninja-build)")
        build_dir = os.environ.get("TORCHLEAK_WHEEL_BUILD_DIR") or os.path.join(root, "build", "wheel")
        configure = ["cmake", "-S", root, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                     "-DTORCHLEAK_PORTABLE=ON", "-DTORCHLEAK_BUILD_TESTS=OFF"]
        cpp = os.environ.get("TORCHLEAK_WHEEL_CPP", "").upper()
        if cpp in ("ON", "OFF"):
            configure.append(f"-DTORCHLEAK_WITH_CLANG={cpp}")
        elif cpp:
            raise RuntimeError(f"torchleak: TORCHLEAK_WHEEL_CPP must be ON or OFF, not {cpp!r}")
        else:
            configure.append("-UTORCHLEAK_WITH_CLANG")
        subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build_dir, "--target", "torchleak"], check=True)
        executable = os.path.join(build_dir, "torchleak")
        # Not pure Python, and not tied to one Python: any Python 3 on this platform.
        build_data["pure_python"] = False
        platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        build_data["tag"] = f"py3-none-{platform}"
        name = f"torchleak-{self.metadata.version}"
        build_data["force_include"][executable] = f"{name}.data/scripts/torchleak"
