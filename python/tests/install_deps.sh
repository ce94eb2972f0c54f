#!/bin/sh
# What the Python tests need, from PyPI, under PREFIX (nothing system-wide):
#   PREFIX/venv      python3 -m venv with numpy, pytest and onnx (dswa.onnx_samel's tests)
#   PREFIX/trt-cu13  TensorRT's Python plugin layer (tensorrt.plugin) from tensorrt-cu13-bindings
#   PREFIX/trt-10.15 10.15: the TensorRT SAME-L's published engines pin
#   PREFIX/trt-cu12  the same from a 10.x tensorrt-cu12-bindings (the oldest with aot_impl)
#   PREFIX/trt-10.8  10.8: tensorrt.plugin without aot_impl (register() must refuse it cleanly)
#   PREFIX/numpy-old a NumPy below 2.4 (the plugin layer's int() of an attribute still works
#                    there), put ahead on the path for a second run of the plugin-layer checks
# The bindings wheels are installed with --no-deps --target: only their pure-Python plugin layer
# is used (python/tests/trt_standin.py stands in for the compiled core, which needs libnvinfer).
# Prints the two export lines that make `make test` use them.
#   usage: sh python/tests/install_deps.sh PREFIX
set -eu
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
mkdir -p "$1"
P=$(cd "$1" && pwd)
# The versions are pinned so that a new release cannot change what CI checks unnoticed.
TRT13=${DSWA_TRT13_VERSION:-11.4.0.106}
TRT12=${DSWA_TRT12_VERSION:-10.9.0.34}
TRT108=10.8.0.43
TRT1015=10.15.1.29
NUMPY_OLD=2.3.5
ONNX=${DSWA_ONNX_VERSION:-1.23.2}
if ! python3 -m venv "$P/venv" >&2; then
    echo "$0: python3 -m venv failed; on Debian/Ubuntu install python3-venv (apt-get install python3-venv)" >&2
    exit 1
fi
# setuptools >= 70.1 (it makes wheels itself): test_package.py builds the wheel offline
"$P/venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest "setuptools>=70.1" \
    "onnx==$ONNX" >&2
for spec in "trt-cu13 tensorrt-cu13-bindings==$TRT13" "trt-10.15 tensorrt-cu12-bindings==$TRT1015" \
            "trt-cu12 tensorrt-cu12-bindings==$TRT12" "trt-10.8 tensorrt-cu12-bindings==$TRT108"; do
    set -- $spec
    rm -rf "$P/$1"
    "$P/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$P/$1" "$2" >&2
    [ -d "$P/$1/tensorrt_bindings/plugin" ] || { echo "$0: $2 has no tensorrt_bindings/plugin" >&2; exit 1; }
done
rm -rf "$P/numpy-old"
"$P/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$P/numpy-old" "numpy==$NUMPY_OLD" >&2
echo "export PATH=\"$P/venv/bin:\$PATH\""
echo "export DSWA_TRT_SITES=\"$P/trt-cu13:$P/trt-10.15:$P/trt-cu12:$P/trt-10.8\""
echo "export DSWA_NUMPY_OLD=\"$P/numpy-old\""
