"""TensorRT quick-deployable plugin (tensorrt.plugin) for the SAME-L attention op.

    import dswa.trt
    dswa.trt.register()                  # "samel::diff_attn_swa", window 17, scale 1/8, lambda 1
    layer = network.add_plugin(dswa.trt.op(q, k, v))    # or trtp.op.samel.diff_attn_swa(
                                                        #    q, k, v, config=dswa.trt.attrs())

Inputs q_bat, k_bat (B, N, 2H, D = 64) and v_bat (B, N, 2H, D), or (B, N, H, D) for one V
read by both pairs; one dtype for all (float32, float16, bfloat16); output (B, N, H, D) of that
dtype. H comes from the shapes (q_bat.shape[2] = 2H must be fixed at build time; B and N may be
dynamic). The layer has one attribute, `config` (a string: windows, scale, lambda, math), which
must equal what the id was registered with (dswa.trt.attrs() gives it); it is what the JIT path
serializes into the engine. An ONNX node for the op carries the same `config` attribute.

Implementations (register(impl=...)):
- "aot" (default; TensorRT 10.9+): the library's own kernel as PTX, with grid, block, shared
  memory and its int32 extras as symbolic expressions of the input shapes, all read from the
  library's export (dswa_aot_kernel_window: each parameter's formula, the grid formulas), none
  computed here. The engine holds the kernel: no Python and no library at run time, and it can
  be captured in a CUDA graph. With only this implementation registered, every builder flag
  (none, PREFER_AOT_PYTHON_PLUGINS, PREFER_JIT_PYTHON_PLUGINS) builds it.
- "jit": dswa_forward_cuda on TensorRT's stream at enqueue (needs libdswa.so and Python at run
  time; TensorRT 10.6+).
- "both": TensorRT then needs NetworkDefinitionCreationFlag.PREFER_AOT_PYTHON_PLUGINS or
  PREFER_JIT_PYTHON_PLUGINS (or network.add_plugin(..., aot=True/False)); without one, building
  fails with TensorRT's "has both AOT and JIT implementations" error, which names the flags.

What is checked at build time, with the library's messages where it has them: the config
(dswa_validate), dtypes (one of three, the same for q, k, v and the output; declared to the
builder through trtp.autotune), ranks and fixed dims (2H, D, V's heads), that q, k, v have the
same B and N ranges in the optimization profile, and, for the profile's smallest and largest
(B, N), everything dswa_aot_kernel_for checks (head_dim 64, every extra fits in int32, a
non-empty problem: B = 0 or N = 0 has no grid to launch). TensorRT cannot check at run time
that dynamic dims of q, k and v agree; the profile check is the limit of what a plugin can do.

Float32 and TF32: a plugin cannot see the builder's TF32 flag. math="default" (and "tf32") runs
float32 inputs with TF32 tensor-core math whatever that flag says; math="fp32" is plain fp32
arithmetic (band windows only: window_left + window_right <= 48).

Architecture: the PTX is for `arch` ("sm_80" ... "sm_120"), default $DSWA_TRT_ARCH, else the
newest exported target not above the build GPU. PTX JIT-compiles forward, so an engine meant for
other or several GPUs (hardware-compatible engines included) must be built with arch= the oldest
GPU's target (e.g. "sm_80"); the default ties the engine's kernel to the build GPU's generation.

This module imports without TensorRT; register() then raises RuntimeError.
"""
import ctypes
import functools
import os
import struct
import sys
from collections import namedtuple
from typing import List, Tuple, Union

from . import _lib

PLUGIN_ID = "samel::diff_attn_swa"
IMPLS = ("aot", "jit", "both")
DTYPES = {"FLOAT": _lib.F32, "HALF": _lib.F16, "BF16": _lib.BF16}   # by trt.DataType name
DTYPE_NAMES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16"}
# All four tensors one dtype ('|': dependent choices), linear layout.
AUTOTUNE_TYPES = ", ".join(["FP32|FP16|BF16"] * 4)
stats = {"aot": 0, "jit": 0}     # aot_impl calls (engine builds) and impl calls (JIT enqueues)
_registered = {}


class Config(namedtuple("Config", "window_left window_right scale lam math")):
    """The op's settings; scale None: 1/sqrt(D) of the inputs. str() is the `config`
    attribute, parse() reads it back exactly (floats are fp32 values, written exactly)."""

    def __str__(self):
        sc = "default" if self.scale is None else _short(self.scale)
        return (f"window_left={self.window_left};window_right={self.window_right};"
                f"scale={sc};lambda={_short(self.lam)};math={self.math}")


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0] if abs(x) < 3.5e38 else float(x)


def _short(x):
    """The shortest decimal that reads back as the same fp32 value (0.2, not 0.200000003)."""
    for digits in range(1, 10):
        s = f"{x:.{digits}g}"
        if _f32(float(s)) == x:
            return s
    return repr(x)


def _check_int(name, x):
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError(f"dswa.trt: {name} = {x!r}: must be an int")
    if not -2 ** 31 <= x < 2 ** 31:
        raise ValueError(f"dswa.trt: {name} = {x}: must fit in int32")
    return x


def _check_number(name, x, none_ok=False):
    """x as the fp32 value it will be (None stays None where none_ok)."""
    if x is None and none_ok:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"dswa.trt: {name} = {x!r}: must be a number")
    return _f32(float(x))


def _check_math(math):
    if math not in _lib.MATH:
        raise ValueError(f"dswa.trt: math = {math!r}: expected one of {', '.join(_lib.MATH)}")
    return math


def _windows(window, window_left, window_right):
    wl = window if window_left is None else window_left
    wr = window if window_right is None else window_right
    return _check_int("window_left", wl), _check_int("window_right", wr)


def config(window=17, *, window_left=None, window_right=None, scale=None, lam=1.0,
           math="default"):
    """The op's settings, checked by the library (dswa_validate: its messages): keys
    i - window_left .. i + window_right (each defaults to window), scale (None: 1/sqrt(D)),
    lam (weight of pair 1), math ("default", "tf32", "fp32")."""
    wl, wr = _windows(window, window_left, window_right)
    c = Config(wl, wr, _check_number("scale", scale, none_ok=True), _check_number("lam", lam),
               _check_math(math))
    p = _lib.lib().dswa_problem_default(1, 1, 1, 64, 0)
    p.window_left, p.window_right = wl, wr
    p.scale, p.lambda_ = 1.0 if c.scale is None else c.scale, c.lam
    p.math = _lib.MATH[math]
    _lib.validate(p)
    return c


def _fields(text, want):
    """{key: value} of a `config` attribute "k1=v1;k2=v2;..." with exactly the keys `want`."""
    fields = dict(kv.split("=", 1) for kv in text.split(";") if "=" in kv)
    if sorted(fields) != sorted(want) or len(text.split(";")) != len(want):
        raise ValueError(f"dswa.trt: config = {text!r}: expected "
                         f"{';'.join(k + '=...' for k in want)} (dswa.trt writes it)")
    return fields


def parse(text):
    """The Config in a `config` attribute (str(Config)); ValueError naming what is wrong."""
    fields = _fields(text, ("window_left", "window_right", "scale", "lambda", "math"))
    try:
        wl, wr = int(fields["window_left"]), int(fields["window_right"])
        sc = None if fields["scale"] == "default" else float(fields["scale"])
        lam = float(fields["lambda"])
    except ValueError as e:
        raise ValueError(f"dswa.trt: config = {text!r}: {e}") from None
    return config(window_left=wl, window_right=wr, scale=sc, lam=lam, math=fields["math"])


def attrs(plugin_id=PLUGIN_ID):
    """The `config` attribute value for layers of `plugin_id` (registered first)."""
    if plugin_id not in _registered:
        raise ValueError(f"dswa.trt: {plugin_id} is not registered (dswa.trt.register first)")
    return str(_registered[plugin_id][0])


def op(q, k, v, plugin_id=PLUGIN_ID):
    """trtp.op.<ns>.<name>(q, k, v, config=attrs(plugin_id)): for network.add_plugin."""
    import tensorrt.plugin as trtp
    ns, name = plugin_id.split("::")
    return getattr(getattr(trtp.op, ns), name)(q, k, v, config=attrs(plugin_id))


# ---- architecture ---------------------------------------------------------------------------
def _capability():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_capability()
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise RuntimeError("dswa.trt: no CUDA driver (libcuda.so.1) to find the GPU to build "
                           "for: pass arch= (or set DSWA_TRT_ARCH)") from None
    dev = ctypes.c_int()
    if cu.cuInit(0) != 0:
        raise RuntimeError("dswa.trt: cuInit failed: no CUDA device to build for (pass arch=)")
    if cu.cuCtxGetDevice(ctypes.byref(dev)) != 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        raise RuntimeError("dswa.trt: no CUDA device to build for (pass arch=)")
    cc = [ctypes.c_int(), ctypes.c_int()]
    for x, attr in zip(cc, (75, 76)):   # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
        r = cu.cuDeviceGetAttribute(ctypes.byref(x), attr, dev)
        if r != 0:
            raise RuntimeError(f"dswa.trt: cuDeviceGetAttribute({attr}) failed with CUresult {r}"
                               " (pass arch=)")
    return cc[0].value, cc[1].value


def device_arch():
    """The target for the current GPU: the newest the library exports not above its compute
    capability (asked of the library, target by target). $DSWA_TRT_ARCH overrides."""
    env = os.environ.get("DSWA_TRT_ARCH")
    if env:
        try:
            _lib.aot_kernel(env, _lib.F16, -1, -1)
        except ValueError as e:
            raise ValueError(f"dswa.trt: DSWA_TRT_ARCH = {env}: {e}") from None
        return env
    major, minor = _capability()
    try:
        return _first_exported(range(10 * major + minor, 69, -1), _lib.aot_kernel)
    except ValueError as e:
        raise RuntimeError(f"dswa.trt: the GPU is sm_{major}{minor}; the library exports no "
                           f"target at or below it ({e})") from None


def _some_arch():
    """A target the library exports (for checks that do not depend on the target). ValueError
    when there is none; its .status is _lib.UNSUPPORTED for a build without nvcc."""
    try:
        return _first_exported(range(80, 200),
                               lambda a, *k: _kernel(a, *k, "default"))
    except ValueError as e:
        err = ValueError(f"dswa.trt: the library exports no kernel ({e})")
        err.status = getattr(e, "status", None)
        raise err from None


def _first_exported(sms, export):
    """The first sm_<sm> in `sms` that export(arch, F16, -1, -1) accepts. Else the first
    target's error (it names the exported targets), or at once the build's own refusal
    (UNSUPPORTED: no nvcc, nothing exported), not the last target tried."""
    first = None
    for sm in sms:
        try:
            export(f"sm_{sm}", _lib.F16, -1, -1)
            return f"sm_{sm}"
        except ValueError as e:
            if getattr(e, "status", None) == _lib.UNSUPPORTED:
                raise
            first = first or e
    raise first or ValueError("dswa: no target to try")


@functools.lru_cache(maxsize=None)
def _kernel(arch, dtype, window_left, window_right, math):
    return _lib.aot_kernel(arch, dtype, window_left, window_right, math)


# ---- TensorRT -------------------------------------------------------------------------------
def _tensorrt(impl):
    """(tensorrt, tensorrt.plugin) after checking that they can register `impl`."""
    try:
        import tensorrt as trt
    except ImportError as e:
        raise RuntimeError(f"dswa.trt: TensorRT's Python package is not installed ({e}); "
                           "pip install tensorrt-cu12 or tensorrt-cu13") from None
    ver = getattr(trt, "__version__", "?")
    try:
        import tensorrt.plugin as trtp
    except ImportError as e:
        raise RuntimeError(f"dswa.trt: TensorRT {ver} is installed but has no tensorrt.plugin "
                           f"({e}); quick plugins need TensorRT 10.6 or newer") from None
    if impl != "jit" and not hasattr(trtp, "aot_impl"):
        raise RuntimeError(f"dswa.trt: TensorRT {ver}'s tensorrt.plugin has no aot_impl (added "
                           f"in 10.9); upgrade TensorRT, or register(impl='jit') to run the "
                           f"kernel through libdswa.so at enqueue")
    return trt, trtp


def _unregister(trtp, plugin_id):
    """Undoes a partial trtp.register (TensorRT has no public call for it)."""
    tl = sys.modules.get("tensorrt.plugin._lib")
    ns, name = plugin_id.split("::")
    if tl is not None:
        tl.QDP_REGISTRY.pop(plugin_id, None)
        tl.QDP_CREATORS.pop(plugin_id, None)
        tl.QDP_CREATORS.pop(f"{name}::{ns}", None)       # 10.9 keys it name first
    registry = sys.modules["tensorrt"].get_plugin_registry()
    creator = registry.get_creator(name, "1", ns)
    if creator is not None:
        registry.deregister_creator(creator)
    space = trtp.op.__dict__.get(ns)
    if space is not None and name in space.__dict__:
        delattr(space, name)


def _already(plugin_id, key):
    """True when plugin_id is registered with exactly `key` (nothing to do); refused when it is
    registered otherwise."""
    if plugin_id not in _registered:
        return False
    if _registered[plugin_id] != key:
        raise ValueError(f"dswa.trt: {plugin_id} is already registered with other settings "
                         f"({_registered[plugin_id]}; now {key})")
    return True


def _probe_arch(arch):
    """The target to check a registration against: arch, $DSWA_TRT_ARCH, else any exported."""
    return arch or os.environ.get("DSWA_TRT_ARCH") and device_arch() or _some_arch()


def _register_all(trtp, plugin_id, impl, key, desc, jit, make_aot, autotune):
    """All of plugin_id's decorators, the JIT `impl` first (TensorRT < 10.9 has no aot_impl,
    checked before), or none of them: a failure undoes what was done."""
    try:
        trtp.register(plugin_id)(desc)
        if impl != "aot":
            trtp.impl(plugin_id)(jit)
        if impl != "jit":
            trtp.aot_impl(plugin_id)(make_aot())
        trtp.autotune(plugin_id)(autotune)
    except BaseException:
        _unregister(trtp, plugin_id)
        raise
    _registered[plugin_id] = key


def _fixed(d):
    return None if d.is_fake or not d.is_constant else d.constant_value()


def _show(x):
    return "dynamic" if x is None else x


def _profile(t):
    """(min, opt, max) dims of a TensorDesc whose shape is known (aot_impl)."""
    s = t.shape
    if s.is_dynamic:
        return tuple(s.min), tuple(s.opt), tuple(s.max)
    return (tuple(s),) * 3


def register(plugin_id=PLUGIN_ID, window=17, *, window_left=None, window_right=None,
             scale=None, lam=1.0, math="default", arch=None, impl="aot"):
    """Register `plugin_id` ("namespace::name") with tensorrt.plugin.

    window / window_left / window_right, scale (default 1/sqrt(D) = 0.125), lam and math are
    the op's settings (SAME-L: window 17, scale 1/8, lam 1); layers carry them as their
    `config` attribute (attrs()). arch: "sm_90" etc. for the PTX (see the module docstring).
    impl: "aot", "jit" or "both". Everything is checked before anything is registered, and a
    failure while registering undoes what was done: the id is then registered completely or
    not at all. Registering the same id again with the same settings does nothing."""
    if impl not in IMPLS:
        raise ValueError(f"dswa.trt: impl = {impl!r}: expected one of {', '.join(IMPLS)}")
    cfg = config(window, window_left=window_left, window_right=window_right, scale=scale,
                 lam=lam, math=math)
    key = (cfg, arch, impl)
    if _already(plugin_id, key):
        return
    trt, trtp = _tensorrt(impl)
    wl, wr = cfg.window_left, cfg.window_right
    if impl != "jit":        # what the library would refuse at build time, refused now
        probe = _probe_arch(arch)
        for dt in DTYPES.values():
            _kernel(probe, dt, wl, wr, math)

    def check_config(text):
        got = parse(text)
        if got != cfg:
            raise ValueError(f"dswa.trt: {plugin_id}: the layer's config {text!r} is not the "
                             f"registered {str(cfg)!r}; build the layer with config="
                             f"dswa.trt.attrs({plugin_id!r}) or register an id with its "
                             "settings")

    def check_types(q, k, v):
        names = [getattr(t.dtype, "name", str(t.dtype)) for t in (q, k, v)]
        if names[0] not in DTYPES or len(set(names)) != 1:
            raise ValueError(f"dswa.trt: {plugin_id}: q_bat, k_bat, v_bat are "
                             f"{', '.join(names)}: all three must be one of float32 (FLOAT), "
                             "float16 (HALF), bfloat16 (BF16)")
        return DTYPES[names[0]]

    def check_shapes(q, k, v):
        for n, t in (("q_bat", q), ("k_bat", k), ("v_bat", v)):
            if len(t.shape_expr) != 4:
                raise ValueError(f"dswa.trt: {plugin_id}: {n} has rank {len(t.shape_expr)}: "
                                 "must be 4, (B, N, heads, D)")
        qs, ks, vs = q.shape_expr, k.shape_expr, v.shape_expr
        if qs[0].is_fake:
            return None
        h2, d = _fixed(qs[2]), _fixed(qs[3])
        if h2 is None or h2 % 2 or h2 <= 0:
            raise ValueError(f"dswa.trt: {plugin_id}: q_bat.shape[2] = {_show(h2)}: must "
                             "be 2H, even and fixed at build time")
        if d is None:
            raise ValueError(f"dswa.trt: {plugin_id}: q_bat.shape[3] (D) is dynamic: it must be "
                             "fixed at build time")
        vh = _fixed(vs[2])
        if vh not in (h2, h2 // 2):
            raise ValueError(f"dswa.trt: {plugin_id}: v_bat.shape[2] = {_show(vh)}: "
                             f"must be 2H = {h2}, or H = {h2 // 2} for one V shared by both pairs")
        for n, s, dims in (("k_bat", ks, (0, 1, 2, 3)), ("v_bat", vs, (0, 1, 3))):
            for j in dims:
                a, b = _fixed(qs[j]), _fixed(s[j])
                if a != b:
                    raise ValueError(
                        f"dswa.trt: {plugin_id}: {n}.shape[{j}] = {_show(b)} but "
                        f"q_bat.shape[{j}] = {_show(a)}: must be equal (and both fixed or "
                        "both dynamic)")
        return h2, d, vh

    def desc(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
             config: str) -> trtp.TensorDesc:
        check_config(config)
        check_types(q_bat, k_bat, v_bat)
        check_shapes(q_bat, k_bat, v_bat)
        s = q_bat.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 2, s[3]), dtype=q_bat.dtype)

    def autotune(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
                 outputs: Tuple[trtp.TensorDesc]) -> List[trtp.AutoTuneCombination]:
        return [trtp.AutoTuneCombination(AUTOTUNE_TYPES, "LINEAR")]

    def jit(q_bat: trtp.Tensor, k_bat: trtp.Tensor, v_bat: trtp.Tensor, config: str,
            outputs: Tuple[trtp.Tensor], stream: int) -> None:
        stats["jit"] += 1
        c = parse(config)           # the engine's settings, whatever this process registered
        q, k, v, o = q_bat, k_bat, v_bat, outputs[0]
        dt = check_types(q, k, v)
        B, N, H2, D = tuple(q.shape)
        H = H2 // 2
        shared = tuple(v.shape)[2] == H
        lay = _lib.layout
        p = _lib.Problem(B, N, H, D, c.window_left, c.window_right,
                         D ** -0.5 if c.scale is None else c.scale, c.lam, dt, _lib.MATH[c.math],
                         lay(tuple(q.strides), H, 2), lay(tuple(k.strides), H, 2),
                         lay(tuple(v.strides), H, 1 if shared else 2),
                         lay(tuple(o.strides), H, 1))
        _lib.check(_lib.lib().dswa_forward_cuda(ctypes.byref(p), q.data_ptr, k.data_ptr,
                                                v.data_ptr, o.data_ptr, stream))

    def make_aot():   # its annotations name classes that only TensorRT 10.9+ has
        def aot(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc, config: str,
                outputs: Tuple[trtp.TensorDesc], tactic: int
                ) -> Tuple[Union[str, bytes], Union[str, bytes], trtp.KernelLaunchParams,
                           trtp.SymIntExprs]:
            stats["aot"] += 1
            check_config(config)
            dt = check_types(q_bat, k_bat, v_bat)
            if outputs[0].dtype != q_bat.dtype:
                raise ValueError(f"dswa.trt: {plugin_id}: the output is {outputs[0].dtype}, the "
                                 f"inputs {q_bat.dtype}: must be the same")
            H2, D, VH = check_shapes(q_bat, k_bat, v_bat)
            H, shared = H2 // 2, VH == H2 // 2
            a = arch or device_arch()
            kernel = _kernel(a, dt, wl, wr, math)
            sc = D ** -0.5 if cfg.scale is None else cfg.scale
            prof = {n: _profile(t) for n, t in (("q_bat", q_bat), ("k_bat", k_bat),
                                                 ("v_bat", v_bat))}
            for n in ("k_bat", "v_bat"):
                for j, what in ((0, "B"), (1, "N")):
                    if [x[j] for x in prof[n]] != [x[j] for x in prof["q_bat"]]:
                        raise ValueError(
                            f"dswa.trt: {plugin_id}: {n}'s {what} (dim {j}) ranges over "
                            f"min/opt/max {[x[j] for x in prof[n]]}, q_bat's over "
                            f"{[x[j] for x in prof['q_bat']]}: the profile must give them the same")
            at = {}
            for which, dims in (("min", prof["q_bat"][0]), ("max", prof["q_bat"][2])):
                B, N = dims[0], dims[1]
                if max(B, N) >= 2 ** 31:
                    raise ValueError(f"dswa.trt: {plugin_id}: the profile's {which} has B = {B}, "
                                     f"N = {N}: the kernels take B and N as int32")
                p = _lib.lib().dswa_problem_default(B, N, H, D, 0)
                p.window_left, p.window_right, p.scale, p.lambda_ = wl, wr, sc, cfg.lam
                p.dtype, p.math = dt, _lib.MATH[math]
                p.v = _lib.layout((N * VH * D, VH * D, D, 1), H, 1 if shared else 2)
                try:       # the library's checks for this size (empty, int32 extras, head_dim ...)
                    at[which] = _lib.aot_kernel_for(a, p)
                except ValueError as e:
                    raise ValueError(f"dswa.trt: {plugin_id}: at the profile's {which} "
                                     f"(B = {B}, N = {N}, H = {H}, D = {D}): {e}") from None
            s = q_bat.shape_expr
            env = {"B": s[0], "N": s[1], "H": H, "D": D, "scale": sc, "lambda_": cfg.lam}
            extras, grid = kernel.launch(env, shared, lift=trtp.ShapeExpr, minimum=trtp.min)
            launch = trtp.KernelLaunchParams()
            launch.grid_x, launch.grid_y, launch.grid_z = grid
            launch.block_x, launch.block_y, launch.block_z = kernel.block
            launch.shared_mem = kernel.dynamic_shared_bytes   # its shared memory is static
            extra = trtp.SymIntExprs(len(extras))
            for i, x in enumerate(extras):
                extra[i] = trtp.SymInt32(x)
            if all(isinstance(x, int) or x.is_constant for x in extras + list(grid)):
                vals = [x if isinstance(x, int) else x.constant_value() for x in extras]
                g = tuple(x if isinstance(x, int) else x.constant_value() for x in grid)
                if vals != at["max"].values or g != at["max"].grid_dims:   # fixed shape: compare
                    raise RuntimeError(f"dswa.trt: {plugin_id}: the launch from the formulas "
                                       f"({vals}, grid {g}) differs from the library's "
                                       f"({at['max'].values}, grid {at['max'].grid_dims})")
            return kernel.name, kernel.ptx, launch, extra
        return aot

    _register_all(trtp, plugin_id, impl, key, desc, jit, make_aot, autotune)
