#!/bin/sh
# Runtime oracle check: runs every rule's leaking and fixed PyTorch program on
# the CPU, in Python and (compiled with g++ against libtorch-dev) in C++, and
# fails when a rule's claimed effect is not measured, or when a program fixed
# by torchleak's safe fixes no longer trains as before (see
# docs/runtime-oracle.md).  Arguments go to oracle.py (ctest passes
# --torchleak with the binary it built).  Needs Debian's python3-torch and
# python3-numpy; exits 77 (the "skipped" code of ctest's SKIP_RETURN_CODE)
# when the interpreter cannot import them.  Without g++ or LibTorch's headers
# the C++ programs are skipped (a SKIP line says why) and the rest still runs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${TORCHLEAK_PYTHON:-/usr/bin/python3}

if ! "$python" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "SKIP: $python cannot import torch and numpy; install python3-torch and python3-numpy to run the runtime oracle"
    exit 77
fi

exec "$python" "$root/tools/runtime/oracle.py" --check "$@"
