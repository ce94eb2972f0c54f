"""GPU: the kernels exactly as dswa.trt's aot_impl hands them to TensorRT (the op's plugin and the
fused block's, samel::samel_attention: band and scalar kernels; through TensorRT's real plugin
layer from SITE, trt_standin.py for the compiled core) launched the way TensorRT's AOT
runtime launches it: the PTX loaded with cuModuleLoadData, cuLaunchKernel with the input
pointers, then the extras, then the output pointer, grid/block/shared memory from the symbolic
launch evaluated at the run's (B, N), all inside a captured CUDA graph, replayed with fresh
inputs; the output (poisoned with NaN bytes first) against a float64 numpy reference (the
op: _util.reference; the fused block: samel_ref.samel_reference).

    python3 python/tests/trt_gpu_check.py SITE     # exit 0 pass, 1 fail, 77 no GPU (skipped)

Only the CUDA driver (ctypes libcuda.so.1) and numpy: no CUDA toolkit. Every driver
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
from samel_ref import samel_reference  # noqa: E402   (the same, for the fused block)

B_ = trt_standin.Builder(trt, trtp)
D = 64


def fake_samel_launches(fake):
    """fake_cuda.py runs the op's kernels; the fused block's are run here the same way: the
    argument list read by the kernel's parameter list (the library's metadata for the fused
    kernels: x, the four norm weights, the 17 extras by name, out), batch and heads from
    gridDim.z and gridDim.y, and the library's CPU backend on that problem."""
    import struct
    from dswa import _lib as L
    op_launch = fake.cuLaunchKernel

    def launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        name = fake.functions[fn.value]
        if not name.startswith("dswa_samel"):
            return op_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        dtype = L.F32 if "f32" in name else L.BF16 if name.endswith("bf16") else L.F16
        k = L.aot_samel_kernel(dt._some_arch(), dtype, 17, 17, 32)   # the one argument table
        args = {}
        for i, p in enumerate(k.params):
            t = ctypes.c_int32 if p.kind == "extra" else ctypes.c_uint64
            args[p.name] = ctypes.cast(params[i], ctypes.POINTER(t)).contents.value
        if (bx, by, bz) != k.block or shared != k.dynamic_shared_bytes:
            return 1                                   # CUDA_ERROR_INVALID_VALUE
        n = args["n"]
        if gx * 64 < n or (gx - 1) * 64 >= n:          # every 64-query tile, and no more
            return 1

        def run():
            bits = lambda i: struct.unpack("<f", struct.pack("<i", i))[0]  # noqa: E731
            p = L.lib().dswa_samel_problem_default(gz, n, gy)
            p.head_dim, p.dtype = k.head_dim, dtype
            p.math = L.MATH["fp32" if name.endswith("fp32") else "default"]
            p.window_left, p.window_right = args["wl"], args["wr"]
            p.scale, p.lambda_ = bits(args["scale_bits"]), bits(args["lambda_bits"])
            p.qkv = L.SamelLayout(args["x_sb"], args["x_sn"], args["x_sc"], args["x_sh"], 1)
            p.out = L.Layout(args["o_sb"], args["o_sn"], 0, args["o_sh"], 1)
            p.rot_dims = args["rot_dims"]
            freq = (ctypes.c_float * 32)(*(bits(args[f"freq{j}"]) for j in range(32)))
            p.rope_freq = ctypes.cast(freq, ctypes.c_void_p)     # (alive until the launch)
            p.pos_offset = args["pos_offset"]
            p.q_norm.alpha, p.k_norm.alpha = bits(args["q_alpha_bits"]), bits(args["k_alpha_bits"])
            p.q_norm.gamma, p.q_norm.beta = args["q_gamma"], args["q_beta"]
            p.k_norm.gamma, p.k_norm.beta = args["k_gamma"], args["k_beta"]
            fake.launches += 1
            return L.lib().dswa_samel_forward_cpu(ctypes.byref(p), args["x"], args["out"])
        return fake._do(run)
    fake.cuLaunchKernel = launch


if FAKE:
    fake_samel_launches(cuda)
TRT_DT = {"f32": trt.float32, "f16": trt.float16, "bf16": trt.bfloat16}
DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
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


def run_plugin(b, dtype, sizes, make, tol):
    """The build b's kernel, for each (B, N): a graph of the launch (NaN poison of the output,
    then the kernel), replayed with two sets of inputs. make(B, N, rng) -> (the inputs as the
    device holds them, in the plugin's input order; the output's shape; the float64 reference).
    Returns the worst relative error."""
    assert b.aot and b.supported
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cu("cuModuleLoadData", P(mod), ctypes.c_char_p(bytes(b.ptx) + b"\0"))
    cu("cuModuleGetFunction", P(fn), mod, b.kernel_name.encode() if isinstance(b.kernel_name, str)
       else bytes(b.kernel_name))
    worst = 0.0
    for B, N in sizes:
        env = {"B": B, "N": N}
        L = {k: v.value(env) for k, v in b.launch.items()}
        extras = [e.value(env) for e in b.extras]
        assert all(-2 ** 31 <= x < 2 ** 31 for x in extras)
        rng = np.random.default_rng(1000 * B + N)
        first = make(B, N, rng)
        ins = [Buf(a.nbytes) for a in first[0]]
        out_shape = first[1]
        out = Buf(int(np.prod(out_shape)) * (4 if dtype == "f32" else 2))
        stream, graph, gexec = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        cu("cuStreamCreate", P(stream), 1)                          # CU_STREAM_NON_BLOCKING
        # TensorRT's order: input pointers, then the extras, then the output pointer
        args = [ctypes.c_uint64(x.ptr.value) for x in ins] + \
            [ctypes.c_int32(x) for x in extras] + [ctypes.c_uint64(out.ptr.value)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(P(a), ctypes.c_void_p) for a in args])
        cu("cuStreamBeginCapture_v2", stream, 1)                    # THREAD_LOCAL
        cu("cuMemsetD8Async", out.ptr, ctypes.c_ubyte(0xFF), ctypes.c_size_t(out.nbytes),
           stream)                                                  # NaN poison, each replay
        cu("cuLaunchKernel", fn, L["grid_x"], L["grid_y"], L["grid_z"], L["block_x"],
           L["block_y"], L["block_z"], L["shared_mem"], stream, params, None)
        cu("cuStreamEndCapture", stream, P(graph))
        cu("cuGraphInstantiateWithFlags", P(gexec), graph, ctypes.c_ulonglong(0))
        for replay in range(2):
            host, _, ref = first if replay == 0 else make(B, N, rng)
            for buf, a in zip(ins, host):
                buf.put(np.ascontiguousarray(a))
            cu("cuGraphLaunch", gexec, stream)
            cu("cuStreamSynchronize", stream)
            got = from_dtype(out.get(dtype, out_shape), dtype)
            assert np.isfinite(got).all(), f"{dtype} B={B} N={N}: non-finite output " \
                "(poison left: the kernel did not write everything)"
            err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
            assert err < tol, f"{dtype} B={B} N={N} replay {replay}: relative error " \
                f"{err:.3e} >= {tol:.1e}"
            worst = max(worst, err)
        cu("cuGraphExecDestroy", gexec)
        cu("cuGraphDestroy", graph)
        cu("cuStreamDestroy_v2", stream)
        for x in ins + [out]:
            x.free()
    cu("cuModuleUnload", mod)
    return worst


def run_case(pid, dtype, H, shared, sizes, cfg, tol, published=False):
    """The op: one engine build (dynamic B, N) with q, k (B, N, 2H, D) and v (B, N, 2H or H,
    D), against _util.reference. published: the layer from the node as SAME-L's published
    graphs carry it (num_heads only), its attribute handed over as the ONNX parser does;
    else the layer dswa.trt.op makes (config)."""
    t = TRT_DT[dtype]
    vh = H if shared else 2 * H
    ins = [(t, ("B", "N", 2 * H, D)), (t, ("B", "N", 2 * H, D)), (t, ("B", "N", vh, D))]
    fields = trt_standin.onnx_plugin_fields(pid, trt_standin.published_node(H)) if published \
        else {"config": dt.attrs(pid)}
    b = B_.build(pid, ins, fields, {"B": (1, 2, 4), "N": (1, 256, 2048)})
    scale = D ** -0.5 if cfg.scale is None else cfg.scale

    def make(B, N, rng):
        host = [to_dtype(rng.standard_normal((B, N, h, D)), dtype) for h in (2 * H, 2 * H, vh)]
        ref = reference(*(h64 for _, h64 in host), cfg.window_left, cfg.window_right, scale,
                        cfg.lam)
        return [a for a, _ in host], (B, N, H, D), ref
    return b.kernel_name, run_plugin(b, dtype, sizes, make, tol)


# ---- the fused SAME-L block ------------------------------------------------------------------
def run_samel_case(pid, dtype, H, sizes, c, tol):
    """The fused block: x (B, N, 5*H*D) and the four (D,) fp32 norm weights (fresh each
    replay, as x), against samel_ref.samel_reference (float64, written from the block's
    description)."""
    ins = [(TRT_DT[dtype], ("B", "N", 5 * H * D))] + [(trt.float32, (D,))] * 4
    b = B_.build(pid, ins, {"config": str(c)}, {"B": (1, 2, 4), "N": (1, 256, 2048)})

    def make(B, N, rng):
        x, x64 = to_dtype(rng.standard_normal((B, N, 5 * H * D)), dtype)
        w = [1 + 0.2 * rng.standard_normal(D), 0.1 * rng.standard_normal(D),
             1 + 0.2 * rng.standard_normal(D), 0.1 * rng.standard_normal(D)]
        w32 = [a.astype(np.float32) for a in w]
        ref = samel_reference(x64, (c.q_alpha, w32[0], w32[1]), (c.k_alpha, w32[2], w32[3]),
                              H, c.window_left, c.window_right, c.scale, c.lam, c.rot_dims,
                              c.base, c.pos_offset, DTYPE_NAMES[dtype])
        return [x] + w32, (B, N, H * D), ref
    return b.kernel_name, run_plugin(b, dtype, sizes, make, tol)


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
    # SAME-L's id also from the published node: H = 24 with V duplicated, as the graphs run it
    shapes = [(2, True, False), (3, False, False)] + \
        ([(24, False, True)] if pid == dt.PLUGIN_ID else [])
    for dtype in dtypes:
        for H, shared, published in shapes:
            sizes = [(1, 5), (2, 300), (3, 130)] if shared else [(1, 1000), (2, 64)]
            what = f"{pid}{' (published node)' if published else ''} {dtype} H={H} " \
                f"shared_v={shared}"
            try:
                name, worst = run_case(pid, dtype, H, shared, sizes, cfg, TOL[tolkey or dtype],
                                       published)
                print(f"PASS  {trt.__version__} {what} {name}: worst relative error "
                      f"{worst:.2e}", flush=True)
            except Exception as e:
                failed += 1
                print(f"FAIL  {trt.__version__} {what}: {e}", flush=True)
dt.register_samel(arch=arch)
samel_cases = [   # (layer settings, dtypes, tolerance key, arch): band and scalar kernels
    ({"q_alpha": 0.8, "k_alpha": 1.3}, ("f32", "f16", "bf16"), None, None),        # SAME-L
    ({"window_left": 5, "window_right": 50, "scale": 0.2, "lam": 0.5, "pos_offset": 1000},
     ("bf16", "f32"), None, None),                                                  # scalar
    ({"window": 9, "math": "fp32", "q_alpha": 0.6}, ("f32",), "f32-fp32", None),   # fp32
    ({"rot_dims": 64, "base": 500.0, "pos_offset": 100000}, ("f16", "f32"), None, None),
    ({"rot_dims": 8, "k_alpha": -0.7, "lam": 0.75}, ("bf16",), None, None),         # scalar
    ({"window_left": 3, "window_right": 20}, ("f16",), None, "sm_80"),
]
for kw, dtypes, tolkey, case_arch in samel_cases:
    pid = dt.SAMEL_PLUGIN_ID
    if case_arch:
        pid = f"dswatest::samel_{case_arch}"
        dt.register_samel(pid, arch=case_arch)
    c = dt.samel_config(**kw)
    for dtype in dtypes:
        for H, sizes in ((2, [(1, 5), (2, 300), (3, 130)]), (3, [(1, 1000), (2, 64)])):
            try:
                name, worst = run_samel_case(pid, dtype, H, sizes, c, TOL[tolkey or dtype])
                print(f"PASS  {trt.__version__} {pid} {dtype} H={H} {c}: {name}: worst "
                      f"relative error {worst:.2e}", flush=True)
            except Exception as e:
                failed += 1
                print(f"FAIL  {trt.__version__} {pid} {dtype} H={H} {c}: {e}", flush=True)
cu("cuDevicePrimaryCtxRelease_v2", dev)
print(f"TensorRT {trt.__version__} plugin path on the {'CPU (fake_cuda.py)' if FAKE else 'GPU'} "
      f"({arch}): "
      f"{'all passed' if not failed else f'{failed} failed'} in {time.time() - t0:.1f} s")
sys.exit(1 if failed else 0)
