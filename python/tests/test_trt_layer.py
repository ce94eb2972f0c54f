"""dswa.trt (the op's plugin and the fused block's) through TensorRT's real plugin layer
(trt_layer_check.py), once per TensorRT in $DSWA_TRT_SITES (a colon list of directories, each a
`pip install --no-deps --target` of a tensorrt-cu1x-bindings wheel; python/tests/install_deps.sh
makes them). Each version runs in its own process, so two TensorRT versions never share one.
Skipped (visibly) when it is unset, and for a build without nvcc (no AOT export: every check
needs the library's PTX)."""
import os
import subprocess
import sys

from _util import aot_arch_or_skip, skip

HERE = os.path.dirname(os.path.abspath(__file__))


def sites():
    s = [x for x in os.environ.get("DSWA_TRT_SITES", "").split(":") if x]
    if not s:
        skip("skipped: DSWA_TRT_SITES is not set (sh python/tests/install_deps.sh PREFIX "
             "installs TensorRT's plugin layer and prints it)")
    aot_arch_or_skip()
    return s


def test_trt_plugin_layer():
    failed = []
    for site in sites():
        if not os.path.isdir(os.path.join(site, "tensorrt_bindings", "plugin")):
            failed.append(f"{site}: no tensorrt_bindings/plugin there")
            continue
        r = subprocess.run([sys.executable, os.path.join(HERE, "trt_layer_check.py"), site],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout)
        if r.returncode != 0:
            failed.append(f"{site}: exit {r.returncode}\n{r.stdout[-6000:]}")
    assert not failed, "\n".join(failed)


def test_trt_plugin_launch_gpu():
    """trt_gpu_check.py per site: the plugin path's PTX and launch on the GPU, in a CUDA graph,
    against the float64 reference. Skipped (visibly) without a GPU."""
    failed, skipped = [], None
    for site in sites():
        r = subprocess.run([sys.executable, os.path.join(HERE, "trt_gpu_check.py"), site],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout)
        if r.returncode == 77:
            skipped = r.stdout.strip().splitlines()[-1]
            break
        if r.returncode != 0:
            failed.append(f"{site}: exit {r.returncode}\n{r.stdout[-6000:]}")
    assert not failed, "\n".join(failed)
    if skipped:
        skip(skipped)


def test_trt_plugin_launch_emulated():
    """The same path on the CPU (fake_cuda.py: the launch read back by the kernel's parameter
    list and run by the library's CPU backend), for the first site: the argument list, grid and
    block TensorRT would launch with, checked without a GPU."""
    site = sites()[0]
    r = subprocess.run([sys.executable, os.path.join(HERE, "trt_gpu_check.py"), site],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, DSWA_FAKE_CUDA="1"))
    print(r.stdout)
    assert r.returncode == 0, r.stdout[-6000:]
