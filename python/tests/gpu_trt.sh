#!/bin/sh
# GPU: dswa.trt's AOT kernels (the op's plugin and the fused SAME-L block's, band and scalar), as
# TensorRT's plugin layer gets them from aot_impl, launched with the
# CUDA driver API inside a CUDA graph and compared with a float64 reference
# (python/tests/trt_gpu_check.py), once per TensorRT bindings wheel carried in .whl/ (no network
# needed). Fetch the wheels on a machine with PyPI, for the GPU machine's Python (3.12 here):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl tensorrt-cu13-bindings==11.4.0.106 tensorrt-cu12-bindings==10.15.1.29
# Needs python3 with numpy and the library (DSWA_LIB, default $BUILD/libdswa.so, BUILD=build).
# Exit 0 when every check passed or was skipped (no GPU, no wheel: said so), 1 otherwise.
cd "$(dirname "$0")/../.." || exit 1
b=${BUILD:-build}; case $b in /*) ;; *) b=$PWD/$b ;; esac
DSWA_LIB=${DSWA_LIB:-$b/libdswa.so}
export DSWA_LIB
rc=0 ran=0
for w in .whl/tensorrt_cu1*_bindings-*.whl; do
    [ -e "$w" ] || continue
    v=$(basename "$w" | cut -d- -f2)
    d=/tmp/trtsite-$v
    if [ ! -d "$d/tensorrt_bindings/plugin" ]; then
        if python3 -m pip --version >/dev/null 2>&1; then
            if ! python3 -m pip install -q --disable-pip-version-check --no-index --no-deps \
                    --target "$d" "$w" 2>/dev/null; then
                echo "skipped $w: not installable for $(python3 -V 2>&1)"   # another Python's
                continue
            fi
        else    # no pip: a wheel is a zip; only its pure-Python plugin layer is used
            python3 -m zipfile -e "$w" "$d" || { echo "FAIL: cannot unpack $w"; rc=1; continue; }
        fi
    fi
    ran=1
    python3 python/tests/trt_gpu_check.py "$d"
    s=$?
    if [ $s -eq 77 ]; then exit 0; fi          # no GPU: said so once
    [ $s -eq 0 ] || rc=1
done
[ $ran -eq 1 ] || echo "skipped: no TensorRT bindings wheel in .whl/ (see the header of $0)"
exit $rc
