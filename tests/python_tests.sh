#!/bin/sh
# The Python package's tests (python/tests) against this build's library: pytest when it is
# installed, else python/tests/run_all.py (no extra package needed). Exit 77 (skipped) without
# python3 or numpy. GPU and TensorRT tests skip visibly inside without CUDA torch / tensorrt.
# DSWA_TRT_SITES (colon list; python/tests/install_deps.sh prints it): TensorRT plugin layers to
# test dswa.trt against, each in its own process. DSWA_TEST_LONG=1: the slow variants too.
cd "$(dirname "$0")/.." || exit 1
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import numpy" >/dev/null 2>&1; then
    echo "skipped: python3 or numpy not available"
    exit 77
fi
b=${BUILD:-build}; case $b in /*) ;; *) b=$PWD/$b ;; esac
DSWA_LIB=${DSWA_LIB:-$b/libdswa.so}
export DSWA_LIB
if python3 -c "import pytest" >/dev/null 2>&1; then
    exec python3 -m pytest -q -rs --durations=8 -p no:cacheprovider python/tests
fi
exec python3 python/tests/run_all.py
