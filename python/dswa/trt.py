"""TensorRT quick-deployable plugin (tensorrt.plugin): a drop-in for SAME-L's ONNX op.

    import dswa.trt
    dswa.trt.register()          # "samel::diff_attn_swa": q_bat, k_bat, v_bat; attr num_heads

Inputs q_bat, k_bat (B, N, 2H, D = 64) and v_bat (B, N, 2H, D), or (B, N, H, D) for one V
shared by both pairs; attribute num_heads = H; output (B, N, H, D), same dtype (float32 with
TF32 math, float16, bfloat16). Two implementations are registered:

- aot_impl: the library's own kernel as PTX (dswa_aot_kernel_window) for the GPU the engine is
  built on, with grid, block, shared memory and its 20 int32 extras as symbolic expressions of
  the input shapes (batch and sequence length may be dynamic). The engine then holds the
  kernel: no Python and no library at run time, and it can be captured in a CUDA graph.
- impl (the JIT fallback): calls dswa_forward_cuda on TensorRT's stream.

Make the builder take the AOT one with NetworkDefinitionCreationFlag.PREFER_AOT_PYTHON_PLUGINS
(or network.add_plugin(..., aot=True)). This module imports without TensorRT; register() then
raises RuntimeError.
"""
import ctypes
import functools
import os
import sys
from typing import Tuple, Union

from . import _lib

EXPORTED_ARCHS = (80, 86, 89, 90, 100, 120)
stats = {"aot": 0, "jit": 0}     # aot_impl calls (engine builds) and impl calls (JIT enqueues)
_registered = {}


def launch_values(kernel, B, N, H2, D, VH, window_left, window_right, scale, lam, min_=min):
    """The extras in the kernel's order and the grid (x, y, z) for inputs q, k (B, N, H2 = 2H,
    D) and v (B, N, VH, D), VH = 2H or H (shared V), all contiguous, output (B, N, H, D).
    B, N, H2, D, VH are ints (then the values equal what dswa_aot_kernel_for computes) or
    tensorrt.plugin shape expressions (with min_ = tensorrt.plugin.min): symbolic on the left
    of every operator."""
    H = H2 // 2
    e = {"n": N, "wl": min_(N - 1, window_left), "wr": min_(N - 1, window_right),
         "scale_bits": _lib.float_bits(scale), "lambda_bits": _lib.float_bits(lam),
         "o_sb": N * H * D, "o_sn": H * D, "o_sh": D}
    for t, heads, pair in (("q", H2, H * D), ("k", H2, H * D), ("v", VH, (VH - H) * D)):
        e.update({t + "_sb": N * heads * D, t + "_sn": heads * D, t + "_sp": pair, t + "_sh": D})
    unknown = [x for x in kernel.extras if x not in e]
    if unknown:
        raise RuntimeError(f"dswa.trt: kernel {kernel.name} takes extras {unknown} that this "
                           "binding does not know: the library and the package do not match")
    tiles = (N + (kernel.tile - 1)) // kernel.tile
    return [e[x] for x in kernel.extras], ((tiles + (kernel.strip - 1)) // kernel.strip, H, B)


def _capability():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_capability()
    cu, dev = ctypes.CDLL("libcuda.so.1"), ctypes.c_int()
    if cu.cuInit(0) != 0:
        raise RuntimeError("dswa.trt: cuInit failed: no CUDA device to build for (pass arch=)")
    if cu.cuCtxGetDevice(ctypes.byref(dev)) != 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        raise RuntimeError("dswa.trt: no CUDA device to build for (pass arch=)")
    cc = [ctypes.c_int(), ctypes.c_int()]
    for x, attr in zip(cc, (75, 76)):   # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
        cu.cuDeviceGetAttribute(ctypes.byref(x), attr, dev)
    return cc[0].value, cc[1].value


def device_arch():
    """The exported architecture for the current GPU: the newest of EXPORTED_ARCHS not above
    its compute capability (PTX JIT-compiles forward). $DSWA_TRT_ARCH overrides."""
    if os.environ.get("DSWA_TRT_ARCH"):
        return os.environ["DSWA_TRT_ARCH"]
    major, minor = _capability()
    fit = [a for a in EXPORTED_ARCHS if a <= 10 * major + minor]
    if not fit:
        raise RuntimeError(f"dswa.trt: the GPU is sm_{major}{minor}; the kernels need sm_80+")
    return f"sm_{fit[-1]}"


@functools.lru_cache(maxsize=None)
def _kernel(arch, dtype, window_left, window_right, math):
    return _lib.aot_kernel(arch, dtype, window_left, window_right, math)


def register(plugin_id="samel::diff_attn_swa", window=17, *, window_left=None,
             window_right=None, scale=None, lam=1.0, math="default", arch=None):
    """Register the plugin `plugin_id` ("namespace::name") with tensorrt.plugin.

    window / window_left / window_right, scale (default 1/sqrt(D) = 0.125), lam and math are
    fixed for the op (SAME-L: window 17, scale 1/8, lam 1); they are baked into the engine
    (the AOT extras). arch: "sm_90" etc. for the PTX; default: the current GPU's (see
    device_arch). Registering the same id again with the same settings does nothing."""
    try:
        import tensorrt as trt
        import tensorrt.plugin as trtp
    except ImportError as e:
        raise RuntimeError(f"dswa.trt.register: TensorRT's Python package is not installed "
                           f"({e}); install it (pip install tensorrt)") from None
    wl = window if window_left is None else window_left
    wr = window if window_right is None else window_right
    config = (wl, wr, scale, lam, math, arch)
    if plugin_id in _registered:
        if _registered[plugin_id] != config:
            raise ValueError(f"dswa.trt: {plugin_id} is already registered with other settings "
                             f"{_registered[plugin_id]}")
        return
    if math not in _lib.MATH:
        raise ValueError(f"dswa.trt: math = {math!r}: expected one of {', '.join(_lib.MATH)}")
    dtypes = {trt.DataType.FLOAT: _lib.F32, trt.DataType.HALF: _lib.F16,
              trt.DataType.BF16: _lib.BF16}

    def dtype_of(t):
        if t.dtype not in dtypes:
            raise ValueError(f"dswa.trt: {plugin_id}: dtype {t.dtype} is not supported "
                             "(float32, float16, bfloat16)")
        return dtypes[t.dtype]

    @trtp.register(plugin_id)
    def _desc(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
              num_heads: int) -> trtp.TensorDesc:
        s = q_bat.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 2, s[3]), dtype=q_bat.dtype)

    @trtp.aot_impl(plugin_id)
    def _aot(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
             num_heads: int, outputs: Tuple[trtp.TensorDesc], tactic: int
             ) -> Tuple[Union[str, bytes], Union[str, bytes], trtp.KernelLaunchParams,
                        trtp.SymIntExprs]:
        stats["aot"] += 1
        kernel = _kernel(arch or device_arch(), dtype_of(q_bat), wl, wr, math)
        B, N, H2, D = (q_bat.shape_expr[i] for i in range(4))
        VH = v_bat.shape_expr[2]
        for x, ok, what in ((D, lambda d: d == kernel.head_dim, f"D must be {kernel.head_dim}"),
                            (H2, lambda h: h == 2 * num_heads, "2H = 2 * num_heads"),
                            (VH, lambda h: h in (2 * num_heads, num_heads),
                             "v_bat.shape[2] = 2H, or H for a shared V")):
            if x.is_constant and not ok(x.constant_value()):
                raise ValueError(f"dswa.trt: {plugin_id}: shape {x.constant_value()}: {what} "
                                 f"(num_heads = {num_heads})")
        sc = kernel.head_dim ** -0.5 if scale is None else scale
        extras, grid = launch_values(kernel, B, N, H2, D, VH, wl, wr, sc, lam, trtp.min)
        launch = trtp.KernelLaunchParams()
        launch.grid_x, launch.grid_y, launch.grid_z = grid
        launch.block_x, launch.block_y, launch.block_z = kernel.block
        launch.shared_mem = kernel.dynamic_shared_bytes   # its shared memory is static
        extra = trtp.SymIntExprs(len(extras))
        for i, x in enumerate(extras):
            extra[i] = trtp.SymInt32(x)
        return kernel.name, kernel.ptx, launch, extra

    @trtp.impl(plugin_id)
    def _impl(q_bat, k_bat, v_bat, num_heads, outputs, stream):
        stats["jit"] += 1
        q, k, v, o = q_bat, k_bat, v_bat, outputs[0]
        B, N, H2, D = tuple(q.shape)
        H = H2 // 2
        if H != num_heads:
            raise ValueError(f"dswa.trt: {plugin_id}: q_bat.shape[2] = {H2} but num_heads = "
                             f"{num_heads}")
        shared = tuple(v.shape)[2] == H
        lay = _lib.layout
        p = _lib.Problem(B, N, H, D, wl, wr, D ** -0.5 if scale is None else scale, lam,
                         dtype_of(q), _lib.MATH[math], lay(tuple(q.strides), H, 2),
                         lay(tuple(k.strides), H, 2), lay(tuple(v.strides), H, 1 if shared else 2),
                         lay(tuple(o.strides), H, 1))
        _lib.check(_lib.lib().dswa_forward_cuda(ctypes.byref(p), q.data_ptr, k.data_ptr,
                                                v.data_ptr, o.data_ptr, stream))

    _registered[plugin_id] = config
