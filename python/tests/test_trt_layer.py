"""dswa.trt (the op's plugin and the fused block's) through TensorRT's real plugin layer
(trt_layer_check.py), once per TensorRT in $DSWA_TRT_SITES (a colon list of directories, each a
`pip install --no-deps --target` of a tensorrt-cu1x-bindings wheel; python/tests/install_deps.sh
makes them). Each version runs in its own process, so two TensorRT versions never share one.
Skipped (visibly) when it is unset, and for a build without nvcc (no AOT export: every check
needs the library's PTX)."""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from _util import aot_arch_or_skip, skip

HERE = os.path.dirname(os.path.abspath(__file__))


def sites():
    s = [x for x in os.environ.get("DSWA_TRT_SITES", "").split(":") if x]
    if not s:
        skip("skipped: DSWA_TRT_SITES is not set (sh python/tests/install_deps.sh PREFIX "
             "installs TensorRT's plugin layer and prints it)")
    aot_arch_or_skip()
    return s


def layer_check(site, env=None):
    """trt_layer_check.py on one site; an error text, or None when every check passed."""
    if not os.path.isdir(os.path.join(site, "tensorrt_bindings", "plugin")):
        return f"{site}: no tensorrt_bindings/plugin there"
    r = subprocess.run([sys.executable, os.path.join(HERE, "trt_layer_check.py"), site],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    print(r.stdout)
    return None if r.returncode == 0 else f"{site}: exit {r.returncode}\n{r.stdout[-6000:]}"


def layer_checks(site_list, env=None):
    """layer_check on each site, at once (one process each); the errors."""
    with ThreadPoolExecutor(max_workers=len(site_list) or 1) as pool:
        return [e for e in pool.map(lambda s: layer_check(s, env), site_list) if e]


def test_trt_plugin_layer():
    failed = layer_checks(sites())
    assert not failed, "\n".join(failed)


def test_trt_plugin_layer_older_numpy():
    """The same checks with the NumPy in $DSWA_NUMPY_OLD (a `pip install --target` of a NumPy
    below 2.4, which the plugin layer's int conversion still accepted) ahead on the path: the
    published node must build with either. Skipped (visibly) when it is unset."""
    site_list, old = sites(), os.environ.get("DSWA_NUMPY_OLD")
    if not old:
        skip("skipped: DSWA_NUMPY_OLD is not set (python/tests/install_deps.sh installs one)")
    path = os.pathsep.join([old] + [p for p in sys.path if p])
    env = dict(os.environ, PYTHONPATH=path)
    r = subprocess.run([sys.executable, "-c", "import numpy; print(numpy.__version__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    version = tuple(int(x) for x in r.stdout.strip().split(".")[:2]) if r.returncode == 0 else ()
    assert version and version < (2, 4), f"{old}: numpy {r.stdout.strip()}: expected below 2.4"
    import trt_standin
    # the layers that SAME-L's engines pin (10.15) and newer: what the published node meets
    recent = [s for s in site_list
              if tuple(int(x) for x in trt_standin._wheel_version(s).split(".")[:2]) >= (10, 15)]
    assert recent, f"no TensorRT 10.15 or newer among {site_list}"
    failed = layer_checks(recent, env)
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
