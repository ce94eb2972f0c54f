#!/usr/bin/env bash
# The Python tests (python/tests) against an installed wheel (scripts/build-wheel.sh's), not the
# source tree:
#   scripts/test-wheel.sh [--deps-from PYTHON] [--require-cuda] WHEEL
# A fresh virtual environment in a temporary folder gets the wheel (pip, no index) and the test
# packages: by default from PyPI through python/tests/install_deps.sh (numpy, pytest, onnx and
# the TensorRT plugin layers, as CI's); --deps-from PYTHON instead adds that interpreter's
# site-packages after the environment's own (a .pth file): numpy, pytest, torch as PYTHON has
# them, nothing downloaded (a machine without network, e.g. the GPU one; the environment is made
# with PYTHON, so its binary packages match). Then, with nvcc hidden (PATH without any folder
# holding nvcc or named cuda*/bin, CUDA_HOME and CUDA_PATH unset) and DSWA_LIB unset, it checks
# that `import dswa` from a copy of python/tests in the temporary folder resolves to the
# installed package and its bundled library, prints dswa.__version__ and the backends, and runs
# the tests there (pytest when installed, else python/tests/run_all.py). Tests that need the
# source tree (include/dswa.h, docs/, setup.py) skip with the reason. --require-cuda fails unless
# the installed library's CUDA backend sees a device (the GPU job). Exit status: the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
die() { echo "test-wheel: FAILED: $*" >&2; exit 1; }
say() { echo "test-wheel: $*"; }
usage() { echo "usage: $0 [--deps-from PYTHON] [--require-cuda] WHEEL" >&2; exit 2; }

deps_from= require_cuda=0 whl=
while [ $# -gt 0 ]; do
    case $1 in
        --deps-from) [ $# -ge 2 ] || usage; deps_from=$2; shift 2 ;;
        --require-cuda) require_cuda=1; shift ;;
        -*) usage ;;
        *) [ -z "$whl" ] || usage; whl=$1; shift ;;
    esac
done
[ -n "$whl" ] || usage
[ -f "$whl" ] || die "$whl: no such file"
case $whl in *.whl) ;; *) die "$whl is not a .whl" ;; esac
whl=$(cd "$(dirname "$whl")" && pwd)/$(basename "$whl")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- the environment ----------------------------------------------------------------------------
if [ -n "$deps_from" ]; then
    py=$(command -v "$deps_from") || die "--deps-from $deps_from: not found"
    "$py" -m venv "$tmp/venv" || die "$py -m venv"
    sites=$("$py" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() + [site.getusersitepackages()] if p))') ||
        die "$py: its site-packages"
    venv_site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') ||
        die "the environment's site-packages"
    printf '%s\n' "$sites" > "$venv_site/zz-test-deps.pth"
    say "a fresh environment with the packages of $py ($(printf '%s\n' "$sites" | tr '\n' ' '))"
else
    say "a fresh environment with the test packages from PyPI (python/tests/install_deps.sh)"
    sh python/tests/install_deps.sh "$tmp" > "$tmp/deps.sh" 2> "$tmp/deps.log" ||
        { cat "$tmp/deps.log" >&2; die "python/tests/install_deps.sh"; }
    # DSWA_TRT_SITES, DSWA_NUMPY_OLD: the test packages beside the environment
    eval "$(grep -v '^export PATH=' "$tmp/deps.sh")"
fi
py=$tmp/venv/bin/python
"$py" -m pip install -q --disable-pip-version-check --no-index --no-deps "$whl" ||
    die "pip install $(basename "$whl")"

# ---- nvcc hidden, the tests outside the source tree ------------------------------------------------
path=
IFS=: read -r -a dirs <<< "$PATH"
for d in "${dirs[@]}"; do
    case $d in ''|*/cuda*/bin|*/cuda*/bin/) continue ;; esac
    [ -x "$d/nvcc" ] && continue
    path=${path:+$path:}$d
done
export PATH="$tmp/venv/bin:$path"
unset CUDA_HOME CUDA_PATH DSWA_LIB VIRTUAL_ENV PYTHONPATH
! command -v nvcc >/dev/null 2>&1 || die "nvcc is still on PATH: $(command -v nvcc)"
mkdir -p "$tmp/run"
cp -R python/tests "$tmp/run/tests" || die "copying python/tests"
rm -rf "$tmp/run/tests/__pycache__"
cd "$tmp/run/tests"

# the package and library the tests import (through _util, as they do): the installed ones
"$py" - "$tmp/venv" "$root" <<'EOF' || die "the installed package is not the one the tests import"
import os, sys
venv, root = (os.path.realpath(p) for p in sys.argv[1:3])
import _util  # noqa: F401  (the tests' own import path)
import dswa
pkg, lib = os.path.realpath(dswa.__file__), dswa.library_path()
lib = os.path.realpath(lib) if lib else None
print(f"test-wheel: dswa {dswa.__version__} from {pkg}")
print(f"test-wheel: library {lib}")
assert "DSWA_LIB" not in os.environ, "DSWA_LIB is set"
assert pkg.startswith(venv + os.sep) and "site-packages" in pkg, f"dswa is {pkg}, not the installed one"
assert not pkg.startswith(root + os.sep), f"dswa is {pkg}, in the source tree"
assert lib == os.path.join(os.path.dirname(pkg), "libdswa.so"), f"the library is {lib}, not the bundled one"
print(f"test-wheel: backends: CPU ({dswa._lib.cpu_isa()}), CUDA "
      f"{'with a device' if dswa.cuda_available() else 'without a device here'}")
EOF
if [ "$require_cuda" = 1 ]; then
    "$py" -c 'import sys, dswa; sys.exit(not dswa.cuda_available())' ||
        die "--require-cuda: the installed library's CUDA backend sees no device"
    "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' ||
        die "--require-cuda: torch is missing or sees no CUDA device (the CUDA Python tests would skip)"
fi

if "$py" -c 'import pytest' >/dev/null 2>&1; then
    say "python -m pytest (in $tmp/run/tests)"
    "$py" -m pytest -q -rs --durations=8 -p no:cacheprovider . || die "the Python tests"
else
    say "pytest not installed: run_all.py"
    "$py" run_all.py || die "the Python tests"
fi
say "passed: the Python tests ran from $(basename "$whl")"
