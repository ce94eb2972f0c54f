"""GPU: the kernel exactly as dswa.trt's aot_impl hands it to TensorRT (through TensorRT's real
plugin layer from SITE, trt_standin.py for the compiled core) launched the way TensorRT's AOT
runtime launches it: the PTX loaded with cuModuleLoadData, cuLaunchKernel with the input
pointers, then the extras, then the output pointer, grid/block/shared memory from the symbolic
launch evaluated at the run's (B, N), all inside a captured CUDA graph, replayed with fresh
inputs; the output (poisoned with NaN bytes first) against a float64 numpy reference.

    python3 python/tests/trt_gpu_check.py SITE     # exit 0 pass, 1 fail, 77 no GPU (skipped)

Only the CUDA driver (ctypes libcuda.so.1) and numpy: no torch, no CUDA toolkit. Every driver
call is checked. Nothing of the launch comes from the library directly: kernel name, PTX,
grid, block, shared memory and extras are what the plugin layer collected from aot_impl.
"""
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import trt_standin  # noqa: E402

SITE = sys.argv[1]
FAKE = os.environ.get("DSWA_FAKE_CUDA") == "1"     # fake_cuda.py: the same path on the CPU
t0 = time.time()
try:
    if FAKE:
        import fake_cuda
        cuda = fake_cuda.FakeDriver()
    else:
        cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    print("skipped: no GPU (no CUDA driver, libcuda.so.1)")
    sys.exit(77)
n_dev = ctypes.c_int()
if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n_dev)) != 0 or n_dev.value == 0:
    print("skipped: no GPU (cuInit / cuDeviceGetCount found no device)")
    sys.exit(77)


def cu(name, *args):
    r = getattr(cuda, name)(*args)
    if r != 0:
        s = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(s))
        raise RuntimeError(f"{name} failed: {r} {s.value.decode() if s.value else ''}")


P = ctypes.byref
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
cu("cuDeviceGet", P(dev), 0)
cu("cuDevicePrimaryCtxRetain", P(ctx), dev)
cu("cuCtxSetCurrent", ctx)

trt, trtp = trt_standin.load(SITE)
if not hasattr(trtp, "aot_impl"):
    print(f"skipped: TensorRT {trt.__version__} has no aot_impl (10.9+)")
    sys.exit(0)
import dswa.trt as dt  # noqa: E402
from _util import reference  # noqa: E402   (float64, written from the definition)

B_ = trt_standin.Builder(trt, trtp)
D = 64
TRT_DT = {"f32": trt.float32, "f16": trt.float16, "bf16": trt.bfloat16}
TOL = {"f32": 5e-3, "f16": 3e-3, "bf16": 2e-2, "f32-fp32": 1e-5}


def to_dtype(x, dtype):
    """(device bytes as a numpy array, the values they hold as float64)."""
    if dtype == "f32":
        a = x.astype(np.float32)
        return a, a.astype(np.float64)
    if dtype == "f16":
        a = x.astype(np.float16)
        return a, a.astype(np.float64)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)     # round to nearest even
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def from_dtype(a, dtype):
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


class Buf:
    def __init__(self, nbytes):
        self.ptr, self.nbytes = ctypes.c_uint64(), nbytes
        cu("cuMemAlloc_v2", P(self.ptr), ctypes.c_size_t(max(nbytes, 1)))

    def put(self, a):
        assert a.nbytes == self.nbytes
        cu("cuMemcpyHtoD_v2", self.ptr, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes))

    def get(self, dtype, shape):
        a = np.empty(shape, {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dtype])
        cu("cuMemcpyDtoH_v2", a.ctypes.data_as(ctypes.c_void_p), self.ptr, ctypes.c_size_t(a.nbytes))
        return a

    def free(self):
        cu("cuMemFree_v2", self.ptr)


def run_case(pid, dtype, H, shared, sizes, cfg, tol):
    """One engine build (dynamic B, N), then for each (B, N): a graph of the launch, replayed
    with two sets of inputs."""
    t = TRT_DT[dtype]
    ins = [(t, ("B", "N", 2 * H, D)), (t, ("B", "N", 2 * H, D)),
           (t, ("B", "N", H if shared else 2 * H, D))]
    b = B_.build(pid, ins, {"config": dt.attrs(pid)}, {"B": (1, 2, 4), "N": (1, 256, 2048)})
    assert b.aot and b.supported
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cu("cuModuleLoadData", P(mod), ctypes.c_char_p(bytes(b.ptx) + b"\0"))
    cu("cuModuleGetFunction", P(fn), mod, b.kernel_name.encode() if isinstance(b.kernel_name, str)
       else bytes(b.kernel_name))
    worst = 0.0
    scale = D ** -0.5 if cfg.scale is None else cfg.scale
    for B, N in sizes:
        env = {"B": B, "N": N}
        L = {k: v.value(env) for k, v in b.launch.items()}
        extras = [e.value(env) for e in b.extras]
        assert all(-2 ** 31 <= x < 2 ** 31 for x in extras)
        es = 4 if dtype == "f32" else 2
        vh = H if shared else 2 * H
        bufs = [Buf(B * N * 2 * H * D * es), Buf(B * N * 2 * H * D * es), Buf(B * N * vh * D * es),
                Buf(B * N * H * D * es)]
        stream, graph, gexec = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        cu("cuStreamCreate", P(stream), 1)                          # CU_STREAM_NON_BLOCKING
        # TensorRT's order: input pointers, then the extras, then the output pointer
        args = [ctypes.c_uint64(x.ptr.value) for x in bufs[:3]] + \
            [ctypes.c_int32(x) for x in extras] + [ctypes.c_uint64(bufs[3].ptr.value)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(P(a), ctypes.c_void_p) for a in args])
        cu("cuStreamBeginCapture_v2", stream, 1)                    # THREAD_LOCAL
        cu("cuMemsetD8Async", bufs[3].ptr, ctypes.c_ubyte(0xFF), ctypes.c_size_t(bufs[3].nbytes),
           stream)                                                  # NaN poison, each replay
        cu("cuLaunchKernel", fn, L["grid_x"], L["grid_y"], L["grid_z"], L["block_x"],
           L["block_y"], L["block_z"], L["shared_mem"], stream, params, None)
        cu("cuStreamEndCapture", stream, P(graph))
        cu("cuGraphInstantiateWithFlags", P(gexec), graph, ctypes.c_ulonglong(0))
        rng = np.random.default_rng(1000 * B + N)
        for replay in range(2):
            host = [to_dtype(rng.standard_normal((B, N, h, D)), dtype)
                    for h in (2 * H, 2 * H, vh)]
            for buf, (dev_a, _) in zip(bufs, host):
                buf.put(np.ascontiguousarray(dev_a))
            cu("cuGraphLaunch", gexec, stream)
            cu("cuStreamSynchronize", stream)
            out = from_dtype(bufs[3].get(dtype, (B, N, H, D)), dtype)
            ref = reference(*(h64 for _, h64 in host), cfg.window_left, cfg.window_right, scale,
                            cfg.lam)
            assert np.isfinite(out).all(), f"{pid} {dtype} B={B} N={N}: non-finite output " \
                "(poison left: the kernel did not write everything)"
            err = float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))
            assert err < tol, f"{pid} {dtype} H={H} shared={shared} B={B} N={N} replay " \
                f"{replay}: relative error {err:.3e} >= {tol:.1e}"
            worst = max(worst, err)
        cu("cuGraphExecDestroy", gexec)
        cu("cuGraphDestroy", graph)
        cu("cuStreamDestroy_v2", stream)
        for x in bufs:
            x.free()
    cu("cuModuleUnload", mod)
    return b.kernel_name, worst


arch = dt._some_arch() if FAKE else dt.device_arch()
cases = [   # (plugin id, register settings, dtypes, tolerance key)
    ("samel::diff_attn_swa", {}, ("f32", "f16", "bf16"), None),                   # band, SAME-L
    ("dswatest::wide", {"window_left": 5, "window_right": 50, "scale": 0.2, "lam": 0.5},
     ("bf16", "f32"), None),                                                        # wide
    ("dswatest::fp32", {"window": 9, "math": "fp32"}, ("f32",), "f32-fp32"),      # plain fp32
    ("dswatest::sm80", {"window_left": 3, "window_right": 20, "arch": "sm_80"}, ("f16",), None),
]
failed = 0
for pid, kw, dtypes, tolkey in cases:
    kw = dict(kw)
    dt.register(pid, arch=kw.pop("arch", arch), **kw)
    cfg = dt.parse(dt.attrs(pid))
    for dtype in dtypes:
        for H, shared in ((2, True), (3, False)):
            sizes = [(1, 5), (2, 300), (3, 130)] if shared else [(1, 1000), (2, 64)]
            try:
                name, worst = run_case(pid, dtype, H, shared, sizes, cfg, TOL[tolkey or dtype])
                print(f"PASS  {trt.__version__} {pid} {dtype} H={H} shared_v={shared} "
                      f"{name}: worst relative error {worst:.2e}", flush=True)
            except Exception as e:
                failed += 1
                print(f"FAIL  {trt.__version__} {pid} {dtype} H={H} shared_v={shared}: {e}",
                      flush=True)
cu("cuDevicePrimaryCtxRelease_v2", dev)
print(f"TensorRT {trt.__version__} plugin path on the {'CPU (fake_cuda.py)' if FAKE else 'GPU'} "
      f"({arch}): "
      f"{'all passed' if not failed else f'{failed} failed'} in {time.time() - t0:.1f} s")
sys.exit(1 if failed else 0)
