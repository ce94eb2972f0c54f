"""TensorRT quick-deployable plugins (tensorrt.plugin): the SAME-L attention op, and the fused
SAME-L attention block (below, "The fused block").

    import dswa.trt
    dswa.trt.register()                  # "samel::diff_attn_swa", window 17, scale 1/8, lambda 1
    # then parse SAME-L's published ONNX graph as it is, or in a network of your own:
    layer = network.add_plugin(dswa.trt.op(q, k, v))

Inputs q_bat, k_bat (B, N, 2H, D = 64) and v_bat (B, N, 2H, D), or (B, N, H, D) for one V
read by both pairs; one dtype for all (float32, float16, bfloat16); output (B, N, H, D) of that
dtype. H comes from the shapes (q_bat.shape[2] = 2H must be fixed at build time; B and N may be
dynamic). The layer's attributes, both optional:
- `num_heads` (H; an int32 array of one element): what SAME-L's published encoder and decoder
  graphs carry, alone. Checked against q_bat.shape[2] = 2 * num_heads.
- `config` (a string: windows, scale, lambda, math; dswa.trt.attrs() gives it): must equal what
  the id was registered with. A node without it means SAME-L's settings (window 17 each side,
  scale 1/8, lambda 1), and the id must be registered with those (math is the registration's).
dswa.trt.op() gives both. num_heads is an array attribute on purpose: TensorRT's plugin layer
(10.x to 11.1) converts an `int` attribute with int(array), which NumPy 2.4 refuses, and an
array attribute with astype on every version; the ONNX parser hands an INT attribute over as
the field type the plugin declares (int32 here).

Implementations (register(impl=...)):
- "aot" (default; TensorRT 10.9+): the library's own kernel as PTX, with grid, block, shared
  memory and its int32 extras as symbolic expressions of the input shapes, all read from the
  library's export (dswa_aot_kernel_window: each parameter's formula, the grid formulas), none
  computed here. The engine holds the kernel: no Python and no library at run time, and it can
  be captured in a CUDA graph. With only this implementation registered, every builder flag
  (none, PREFER_AOT_PYTHON_PLUGINS, PREFER_JIT_PYTHON_PLUGINS) builds it.
- "jit": dswa_forward_cuda on TensorRT's stream at enqueue (needs libdswa.so and Python at run
  time; TensorRT 10.6+). The engine stores no settings: the process that runs it registers the
  id with the settings it was built with (checked against each node at build time).
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

The fused block ("samel::samel_attention", register_samel()): DyT qk-norms, RoPE and the op in
one kernel, from the to_qkv projection to the heads' output (dswa.h: dswa_samel_problem).

    dswa.trt.register_samel()
    cfg = dswa.trt.samel_config(q_alpha=0.83, k_alpha=1.1)     # the layer's own settings
    layer = network.add_plugin(dswa.trt.samel_op(x, q_gamma, q_beta, k_gamma, k_beta, cfg))

Inputs x (B, N, 5*H*D): chunks q, k, v, q_diff, k_diff, of float32, float16 or bfloat16; and
q_gamma, q_beta, k_gamma, k_beta (D,) float32 whatever x is. Output (B, N, H*D) of x's dtype. H
and D come from the shapes (x.shape[2] and D fixed at build time; B and N may be dynamic). Each
layer's `config` attribute (str(samel_config(...)): windows, scale, lambda, math, rot_dims, base,
pos_offset, q_alpha, k_alpha, and RoPE's frequencies where the model gives its own: `freq`, a
comma list, absent for those of `base`) is that layer's, checked by the library at build time: the alphas
are learned per layer, so one registration serves every layer (and one ONNX op type every
node). impl, arch, the AOT default and the checks are as for the op; the AOT kernel is
dswa_aot_samel_kernel's for the layer's windows, rot_dims, dtype and math (band or scalar).
pos_offset is a build-time constant of the layer (TensorRT's extras are shape expressions).

This module imports without TensorRT; register() and register_samel() then raise RuntimeError.
"""
import ctypes
import functools
import inspect
import numbers
import os
import struct
import sys
from collections import namedtuple
from typing import List, Tuple, Union

from . import _core, _lib

PLUGIN_ID = "samel::diff_attn_swa"
# The op's node attributes, both optional: num_heads (H, as SAME-L's published graphs carry it)
# and config (str(Config): the settings; absent, the node means SAMEL_IMPLIED).
ATTRS = ("num_heads", "config")
# What a node without config means: (window_left, window_right, scale, lambda) of SAME-L.
SAMEL_IMPLIED = (17, 17, 0.125, 1.0)
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
            return str(int(x)) if "e+" in s and x == int(x) and abs(x) < 1e16 else s
    return repr(x)


def _check_int(name, x):
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise ValueError(f"dswa.trt: {name} = {x!r}: must be an int")
    if not -2 ** 31 <= x < 2 ** 31:
        raise ValueError(f"dswa.trt: {name} = {x}: must fit in int32")
    return int(x)


def _check_number(name, x, none_ok=False):
    """x as the fp32 value it will be (None stays None where none_ok)."""
    if x is None and none_ok:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
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


def node_config(text=None):
    """The settings a node of the op means: parse(text) of its `config` attribute, or without
    one (text None) SAME-L's (SAMEL_IMPLIED, default math)."""
    if text is not None:
        return parse(text)
    wl, wr, sc, lam = SAMEL_IMPLIED
    return config(window_left=wl, window_right=wr, scale=sc, lam=lam)


def check_num_heads(num_heads, h2, where):
    """num_heads (an int, or the attribute's one-element array) as H for inputs of h2 = 2H
    heads (None: not known yet); ValueError naming both when they differ."""
    import numpy as np
    nh = np.asarray(num_heads).ravel()
    if nh.size != 1 or not np.issubdtype(nh.dtype, np.integer) or nh[0] <= 0:
        raise ValueError(f"dswa.trt: {where}: num_heads = {nh.tolist()}: must be one integer > 0 "
                         "(H, the output's heads)")
    if h2 is not None and h2 != 2 * int(nh[0]):
        raise ValueError(f"dswa.trt: {where}: num_heads = {int(nh[0])} but q_bat.shape[2] = "
                         f"{h2}: the inputs carry both pairs' heads, 2 * num_heads = "
                         f"{2 * int(nh[0])}")


def attrs(plugin_id=PLUGIN_ID):
    """The `config` attribute value for layers of `plugin_id` (registered first)."""
    if plugin_id not in _registered:
        raise ValueError(f"dswa.trt: {plugin_id} is not registered (dswa.trt.register first)")
    if _registered[plugin_id][0] == "samel":
        raise ValueError(f"dswa.trt: {plugin_id} is the fused block's plugin: each layer carries "
                         "its own settings, str(dswa.trt.samel_config(...))")
    return str(_registered[plugin_id][0])


def op(q, k, v, plugin_id=PLUGIN_ID, *, num_heads=None):
    """trtp.op.<ns>.<name>(q, k, v, num_heads=..., config=attrs(plugin_id)): for
    network.add_plugin. num_heads (H, the output's heads) defaults to q.shape[2] // 2, which
    must then be fixed."""
    import numpy as np
    import tensorrt.plugin as trtp
    if num_heads is None:
        h2 = tuple(getattr(q, "shape", ()))[2:3]
        if not h2 or h2[0] <= 0 or h2[0] % 2:
            raise ValueError(f"dswa.trt: q.shape = {tuple(getattr(q, 'shape', ()))}: shape[2] "
                             "must be 2H, fixed and even (or pass num_heads=H)")
        num_heads = h2[0] // 2
    nh = np.array([_check_int("num_heads", num_heads)], dtype=np.int32)
    ns, name = plugin_id.split("::")
    return getattr(getattr(trtp.op, ns), name)(q, k, v, num_heads=nh, config=attrs(plugin_id))


def _int32_array_annotation():
    """numpy.typing.NDArray[numpy.int32] as TensorRT's plugin layer reads it, but a class.
    The layer takes an array attribute's dtype from the annotation's __origin__ (numpy.ndarray)
    and __args__ (shape, numpy.dtype[int32]), as NDArray[int32] has them; TensorRT 10.15's
    register validator also calls issubclass() on every annotation, which Python 3.12 refuses
    for NDArray[int32] (a generic alias, not a class). This class satisfies both."""
    import typing
    import numpy as np

    class Int32Array:
        __origin__ = np.ndarray
        __args__ = (typing.Any, np.dtype[np.int32])
    Int32Array.__qualname__ = Int32Array.__name__ = "NDArray[int32]"
    return Int32Array


def _presented(fn, names, annotations, ret=inspect.Signature.empty):
    """fn with the signature TensorRT's validators read: `names`, each annotated, no default.
    The plugin layer takes no optional attribute (it refuses defaults when registering, and
    hands over only the attributes a node carries), so the functions themselves take the
    attributes as optional or variadic and present the full list."""
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=a)
         for n, a in zip(names, annotations)], return_annotation=ret)
    return fn


# ---- architecture# ---- architecture ---------------------------------------------------------------------------
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


def _aot_result(trtp, plugin_id, kernel, extras, grid, at_max):
    """aot_impl's (name, PTX, launch, extras) for `kernel` with these symbolic extras and grid.
    When every one folds to a constant (fixed shapes), they are compared with the library's
    own values for the profile's maximum, at_max (dswa_aot_*kernel_for): they must agree."""
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
        if vals != at_max.values or g != at_max.grid_dims:
            raise RuntimeError(f"dswa.trt: {plugin_id}: the launch from the formulas "
                               f"({vals}, grid {g}) differs from the library's "
                               f"({at_max.values}, grid {at_max.grid_dims})")
    return kernel.name, kernel.ptx, launch, extra


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
    # num_heads as an int32 array: the plugin layer converts an `int` attribute with
    # int(array), which NumPy 2.4 refuses; an array attribute with astype, on every version.
    ATTR_TYPES = (_int32_array_annotation(), str)
    wl, wr = cfg.window_left, cfg.window_right
    if impl != "jit":        # what the library would refuse at build time, refused now
        probe = _probe_arch(arch)
        for dt in DTYPES.values():
            _kernel(probe, dt, wl, wr, math)

    def check_node(num_heads, config, h2=None, D=None):
        """The node's attributes against the registration. `config` (optional) must equal it;
        without one the node means SAME-L's settings (SAMEL_IMPLIED: windows 17, scale 1/8,
        lambda 1; math stays the registration's choice). num_heads (optional, the published
        graphs' attribute) is H: q_bat.shape[2] must be 2 * num_heads. h2, D: q_bat's dims
        where known (None while TensorRT asks with placeholder shapes)."""
        if config is not None:
            got = parse(config)
            if got != cfg:
                raise ValueError(f"dswa.trt: {plugin_id}: the layer's config {config!r} is not "
                                 f"the registered {str(cfg)!r}; build the layer with config="
                                 f"dswa.trt.attrs({plugin_id!r}) or register an id with its "
                                 "settings")
        elif D is not None:
            have = (wl, wr, D ** -0.5 if cfg.scale is None else cfg.scale, cfg.lam)
            if have != SAMEL_IMPLIED:
                raise ValueError(
                    f"dswa.trt: {plugin_id}: the node has no config attribute, which means "
                    f"SAME-L's settings (window_left=17, window_right=17, scale=0.125, "
                    f"lambda=1), but {plugin_id} is registered with window_left={wl}, "
                    f"window_right={wr}, scale={_short(have[2])}, lambda={_short(cfg.lam)}; "
                    f"give the node config=dswa.trt.attrs({plugin_id!r}) or register "
                    f"{plugin_id} with SAME-L's settings")
        if num_heads is not None:
            check_num_heads(num_heads, h2, plugin_id)

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

    def desc(q_bat, k_bat, v_bat, num_heads=None, config=None):
        check_types(q_bat, k_bat, v_bat)
        dims = check_shapes(q_bat, k_bat, v_bat)
        check_node(num_heads, config, *(dims[:2] if dims else ()))
        s = q_bat.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 2, s[3]), dtype=q_bat.dtype)
    _presented(desc, ("q_bat", "k_bat", "v_bat") + ATTRS, (trtp.TensorDesc,) * 3 + ATTR_TYPES,
               trtp.TensorDesc)

    def autotune(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
                 outputs: Tuple[trtp.TensorDesc]) -> List[trtp.AutoTuneCombination]:
        return [trtp.AutoTuneCombination(AUTOTUNE_TYPES, "LINEAR")]

    # The JIT implementation names no attribute: TensorRT hands an implementation each
    # attribute it names, and fails on one a node does not carry. So a JIT engine stores no
    # settings; it runs with the registration's, which desc() checked against the node when the
    # engine was built (the process that runs the engine registers the id, as it must anyway).
    def jit(q_bat: trtp.Tensor, k_bat: trtp.Tensor, v_bat: trtp.Tensor,
            outputs: Tuple[trtp.Tensor], stream: int) -> None:
        stats["jit"] += 1
        q, k, v, o = q_bat, k_bat, v_bat, outputs[0]
        dt = check_types(q, k, v)
        B, N, H2, D = tuple(q.shape)
        H = H2 // 2
        shared = tuple(v.shape)[2] == H
        lay = _lib.layout
        p = _lib.Problem(B, N, H, D, wl, wr, D ** -0.5 if cfg.scale is None else cfg.scale,
                         cfg.lam, dt, _lib.MATH[math],
                         lay(tuple(q.strides), H, 2), lay(tuple(k.strides), H, 2),
                         lay(tuple(v.strides), H, 1 if shared else 2),
                         lay(tuple(o.strides), H, 1))
        _lib.check(_lib.lib().dswa_forward_cuda(ctypes.byref(p), q.data_ptr, k.data_ptr,
                                                v.data_ptr, o.data_ptr, stream))

    def make_aot():   # its annotations name classes that only TensorRT 10.9+ has
        # TensorRT passes aot_impl every attribute the node carries, in the node's order,
        # then outputs and tactic: read them by type (num_heads an array, config a string).
        def aot(q_bat, k_bat, v_bat, *rest):
            stats["aot"] += 1
            *given, outputs, tactic = rest
            node = {"config": None, "num_heads": None}
            for x in given:
                node["config" if isinstance(x, str) else "num_heads"] = x
            dt = check_types(q_bat, k_bat, v_bat)
            if outputs[0].dtype != q_bat.dtype:
                raise ValueError(f"dswa.trt: {plugin_id}: the output is {outputs[0].dtype}, the "
                                 f"inputs {q_bat.dtype}: must be the same")
            H2, D, VH = check_shapes(q_bat, k_bat, v_bat)
            check_node(node["num_heads"], node["config"], H2, D)
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
            return _aot_result(trtp, plugin_id, kernel, extras, grid, at["max"])
        return _presented(aot, ("q_bat", "k_bat", "v_bat") + ATTRS + ("outputs", "tactic"),
                          (trtp.TensorDesc,) * 3 + ATTR_TYPES +
                          (Tuple[trtp.TensorDesc], int),
                          Tuple[Union[str, bytes], Union[str, bytes], trtp.KernelLaunchParams,
                                trtp.SymIntExprs])

    _register_all(trtp, plugin_id, impl, key, desc, jit, make_aot, autotune)


# ---- the fused SAME-L block: samel::samel_attention -------------------------------------------
SAMEL_PLUGIN_ID = "samel::samel_attention"
SAMEL_INPUTS = ("x", "q_gamma", "q_beta", "k_gamma", "k_beta")
# x and the output one dtype ('|': chosen together), the four norm weights fp32 always.
SAMEL_AUTOTUNE_TYPES = ", ".join(["FP32|FP16|BF16"] + ["FP32"] * 4 + ["FP32|FP16|BF16"])
# Stand-in device addresses of the norm weights for the library's checks of a size (never
# dereferenced; at the top of the address space, clear of the export's own stand-ins).
_WEIGHT_STANDINS = tuple(2 ** 64 - 2 ** 20 + i * 4096 for i in range(4))


class SamelConfig(namedtuple("SamelConfig", "window_left window_right scale lam math rot_dims "
                                            "base pos_offset q_alpha k_alpha freq",
                             defaults=(None,))):
    """The fused block's settings; scale None: 1/sqrt(D); freq None: RoPE's frequencies from
    base, else the rot_dims / 2 the model holds. str() is the `config` attribute (freq only
    when given, so that a config written without it reads as before), samel_parse() reads it
    back exactly (floats are fp32 values, written exactly)."""

    def __str__(self):
        sc = "default" if self.scale is None else _short(self.scale)
        own = "" if self.freq is None else ";freq=" + ",".join(map(_short, self.freq))
        return (f"window_left={self.window_left};window_right={self.window_right};"
                f"scale={sc};lambda={_short(self.lam)};math={self.math};"
                f"rot_dims={self.rot_dims};base={_short(self.base)};"
                f"pos_offset={self.pos_offset};q_alpha={_short(self.q_alpha)};"
                f"k_alpha={_short(self.k_alpha)}{own}")

    def frequencies(self):
        """RoPE's rot_dims / 2 frequencies: freq, or dswa_rope_frequencies(rot_dims, base)."""
        return self.freq if self.freq is not None else \
            _lib.rope_frequencies(self.rot_dims, self.base)


def _samel_problem(c, B, N, H, D, dtype):
    """The dswa_samel_problem of settings c for contiguous x (B, N, 5*H*D) and out (B, N, H*D);
    the norm weights' pointers are left NULL."""
    p = _lib.lib().dswa_samel_problem_default(B, N, H)
    hd = H * D
    p.head_dim = D
    p.qkv = _lib.SamelLayout(N * 5 * hd, 5 * hd, hd, D, 1)
    p.out = _lib.Layout(N * hd, hd, 0, D, 1)
    p.window_left, p.window_right = c.window_left, c.window_right
    p.scale = (D ** -0.5 if D > 0 else 1.0) if c.scale is None else c.scale
    p.lambda_, p.dtype, p.math = c.lam, dtype, _lib.MATH[c.math]
    p.rot_dims, p.rope_base, p.pos_offset = c.rot_dims, c.base, c.pos_offset
    if c.freq is not None:
        _lib.set_rope_freq(p, c.freq)
    p.q_norm.alpha, p.k_norm.alpha = c.q_alpha, c.k_alpha
    return p


def samel_config(window=17, *, window_left=None, window_right=None, scale=None, lam=1.0,
                 math="default", rot_dims=32, base=10000.0, pos_offset=0, q_alpha=1.0,
                 k_alpha=1.0, freq=None):
    """The fused block's settings, checked by the library (dswa_samel_validate: its messages).
    The op's (windows, scale: None is 1/sqrt(D), lam, math), then RoPE's (rot_dims: leading
    dims rotated, base, pos_offset: the position of row 0, freq: the model's own rot_dims / 2
    frequencies, e.g. its rotary inv_freq in the dtype it was cast to; None: from base) and
    the DyT norms' alphas (q_norm's for q and q_diff, k_norm's for k and k_diff). SAME-L: the
    defaults, with the layer's learned alphas."""
    wl, wr = _windows(window, window_left, window_right)
    c = SamelConfig(wl, wr, _check_number("scale", scale, none_ok=True),
                    _check_number("lam", lam), _check_math(math), _check_int("rot_dims", rot_dims),
                    _check_number("base", base), _check_int("pos_offset", pos_offset),
                    _check_number("q_alpha", q_alpha), _check_number("k_alpha", k_alpha))
    if freq is not None:      # rot_dims / 2 numbers, as fp32 values (the library checks them)
        c = c._replace(freq=tuple(map(_f32, _core.rope_freq(c.rot_dims, None, freq))))
    p = _samel_problem(c, 0, 1, 1, 64, _lib.F32)   # empty: the fields only, no pointer
    _lib.check(_lib.lib().dswa_samel_validate(ctypes.byref(p), None, None))
    return c


def samel_parse(text):
    """The SamelConfig in a `config` attribute (str(SamelConfig)); ValueError naming what is
    wrong (the library's message for a value it refuses)."""
    own = ("freq",) if ";freq=" in text else ()
    f = _fields(text, SamelConfig._fields[:3] + ("lambda",) + SamelConfig._fields[4:10] + own)
    try:
        kw = {k: int(f[k]) for k in ("window_left", "window_right", "rot_dims", "pos_offset")}
        kw.update({k: float(f[k]) for k in ("base", "q_alpha", "k_alpha")})
        if own:
            kw["freq"] = [float(v) for v in f["freq"].split(",")] if f["freq"] else []
        kw["scale"] = None if f["scale"] == "default" else float(f["scale"])
        kw["lam"] = float(f["lambda"])
    except ValueError as e:
        raise ValueError(f"dswa.trt: config = {text!r}: {e}") from None
    return samel_config(math=f["math"], **kw)


def samel_op(x, q_gamma, q_beta, k_gamma, k_beta, config=None, plugin_id=SAMEL_PLUGIN_ID):
    """trtp.op.<ns>.<name>(x, q_gamma, q_beta, k_gamma, k_beta, config=...): for
    network.add_plugin. config: a SamelConfig, its string, or None (SAME-L's defaults)."""
    import tensorrt.plugin as trtp
    text = str(samel_parse(str(samel_config() if config is None else config)))   # checked
    ns, name = plugin_id.split("::")
    return getattr(getattr(trtp.op, ns), name)(x, q_gamma, q_beta, k_gamma, k_beta, config=text)


@functools.lru_cache(maxsize=None)
def _samel_kernel(arch, dtype, window_left, window_right, rot_dims, math):
    return _lib.aot_samel_kernel(arch, dtype, window_left, window_right, rot_dims, math)


def register_samel(plugin_id=SAMEL_PLUGIN_ID, *, arch=None, impl="aot"):
    """Register `plugin_id` ("namespace::name") for the fused SAME-L block with tensorrt.plugin.

    Inputs x (B, N, 5*H*D) of float32, float16 or bfloat16 (the to_qkv projection: chunks q, k,
    v, q_diff, k_diff), and q_gamma, q_beta, k_gamma, k_beta (D,) float32; output (B, N, H*D)
    of x's dtype. Each layer carries its settings in its `config` attribute (samel_config(),
    samel_op()): the alphas are per-layer weights, so one registration serves every layer.
    arch and impl as for register(); registration is likewise all or nothing, and registering
    the same id again with the same arguments does nothing."""
    if impl not in IMPLS:
        raise ValueError(f"dswa.trt: impl = {impl!r}: expected one of {', '.join(IMPLS)}")
    key = ("samel", arch, impl)
    if _already(plugin_id, key):
        return
    trt, trtp = _tensorrt(impl)
    if impl != "jit":        # the build exports the fused kernel for this target
        _samel_kernel(_probe_arch(arch), _lib.F16, 17, 17, 32, "default")

    def check_types(*ts):
        names = [getattr(t.dtype, "name", str(t.dtype)) for t in ts]
        if names[0] not in DTYPES:
            raise ValueError(f"dswa.trt: {plugin_id}: x is {names[0]}: must be float32 (FLOAT), "
                             "float16 (HALF) or bfloat16 (BF16)")
        for n, got in zip(SAMEL_INPUTS[1:], names[1:]):
            if got != "FLOAT":
                raise ValueError(f"dswa.trt: {plugin_id}: {n} is {got}: the norm weights must be "
                                 "float32 (FLOAT) whatever x's dtype")
        return DTYPES[names[0]]

    def check_shapes(*ts):
        for n, t, (rank, dims) in zip(SAMEL_INPUTS, ts, [(3, "(B, N, 5 * H * D)")] +
                                      [(1, "(D,)")] * 4):
            if len(t.shape_expr) != rank:
                raise ValueError(f"dswa.trt: {plugin_id}: {n} has rank {len(t.shape_expr)}: "
                                 f"must be {rank}, {dims}")
        if ts[0].shape_expr[0].is_fake:
            return None
        D = _fixed(ts[1].shape_expr[0])
        if D is None or D <= 0:
            raise ValueError(f"dswa.trt: {plugin_id}: q_gamma.shape[0] (D) = {_show(D)}: must be "
                             "> 0 and fixed at build time")
        for n, t in zip(SAMEL_INPUTS[2:], ts[2:]):
            d = _fixed(t.shape_expr[0])
            if d != D:
                raise ValueError(f"dswa.trt: {plugin_id}: {n}.shape[0] = {_show(d)} but "
                                 f"q_gamma.shape[0] = {D}: must be equal (D)")
        c = _fixed(ts[0].shape_expr[2])
        if c is None or c <= 0 or c % (5 * D):
            raise ValueError(f"dswa.trt: {plugin_id}: x.shape[2] = {_show(c)}: must be 5 * H * D "
                             f"(D = {D}), a positive multiple of {5 * D} fixed at build time")
        return c // (5 * D), D

    def desc(x: trtp.TensorDesc, q_gamma: trtp.TensorDesc, q_beta: trtp.TensorDesc,
             k_gamma: trtp.TensorDesc, k_beta: trtp.TensorDesc, config: str) -> trtp.TensorDesc:
        samel_parse(config)
        ts = (x, q_gamma, q_beta, k_gamma, k_beta)
        check_types(*ts)
        check_shapes(*ts)
        s = x.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 5), dtype=x.dtype)

    def autotune(x: trtp.TensorDesc, q_gamma: trtp.TensorDesc, q_beta: trtp.TensorDesc,
                 k_gamma: trtp.TensorDesc, k_beta: trtp.TensorDesc,
                 outputs: Tuple[trtp.TensorDesc]) -> List[trtp.AutoTuneCombination]:
        return [trtp.AutoTuneCombination(SAMEL_AUTOTUNE_TYPES, "LINEAR")]

    def jit(x: trtp.Tensor, q_gamma: trtp.Tensor, q_beta: trtp.Tensor, k_gamma: trtp.Tensor,
            k_beta: trtp.Tensor, config: str, outputs: Tuple[trtp.Tensor], stream: int) -> None:
        stats["jit"] += 1
        c = samel_parse(config)     # the engine's settings, as serialized with it
        ts = (x, q_gamma, q_beta, k_gamma, k_beta)
        dt = check_types(*ts)
        B, N, C = tuple(x.shape)
        D = tuple(q_gamma.shape)[0]
        H = C // (5 * D)
        p = _samel_problem(c, B, N, H, D, dt)
        xs, os_ = tuple(x.strides), tuple(outputs[0].strides)
        p.qkv = _lib.SamelLayout(xs[0], xs[1], H * D * xs[2], D * xs[2], xs[2])
        p.out = _lib.Layout(os_[0], os_[1], 0, D * os_[2], os_[2])
        p.q_norm.gamma, p.q_norm.beta = q_gamma.data_ptr, q_beta.data_ptr
        p.k_norm.gamma, p.k_norm.beta = k_gamma.data_ptr, k_beta.data_ptr
        _lib.check(_lib.lib().dswa_samel_forward_cuda(ctypes.byref(p), x.data_ptr,
                                                      outputs[0].data_ptr, stream))

    def make_aot():   # its annotations name classes that only TensorRT 10.9+ has
        def aot(x: trtp.TensorDesc, q_gamma: trtp.TensorDesc, q_beta: trtp.TensorDesc,
                k_gamma: trtp.TensorDesc, k_beta: trtp.TensorDesc, config: str,
                outputs: Tuple[trtp.TensorDesc], tactic: int
                ) -> Tuple[Union[str, bytes], Union[str, bytes], trtp.KernelLaunchParams,
                           trtp.SymIntExprs]:
            stats["aot"] += 1
            c = samel_parse(config)
            ts = (x, q_gamma, q_beta, k_gamma, k_beta)
            dt = check_types(*ts)
            if outputs[0].dtype != x.dtype:
                raise ValueError(f"dswa.trt: {plugin_id}: the output is {outputs[0].dtype}, x is "
                                 f"{x.dtype}: must be the same")
            H, D = check_shapes(*ts)
            a = arch or device_arch()
            at = {}
            for which, dims in zip(("min", "max"), _profile(x)[::2]):
                B, N = dims[0], dims[1]
                if max(B, N) >= 2 ** 31:
                    raise ValueError(f"dswa.trt: {plugin_id}: the profile's {which} has B = {B}, "
                                     f"N = {N}: the kernels take B and N as int32")
                p = _samel_problem(c, B, N, H, D, dt)
                p.q_norm.gamma, p.q_norm.beta, p.k_norm.gamma, p.k_norm.beta = _WEIGHT_STANDINS
                where = f"at the profile's {which} (B = {B}, N = {N}, H = {H}, D = {D})"
                try:       # the library's checks for this size (empty, int32 extras, head_dim ...)
                    at[which] = _lib.aot_samel_kernel_for(a, p)
                except ValueError as e:
                    raise ValueError(f"dswa.trt: {plugin_id}: {where}: {e}") from None
            kernel = _samel_kernel(a, dt, c.window_left, c.window_right, c.rot_dims, c.math)
            s = x.shape_expr
            # every name the library's formulas may use (dswa.h: dswa_aot_samel_kernel)
            env = {"B": s[0], "N": s[1], "H": H, "D": D, "WL": c.window_left,
                   "WR": c.window_right, "scale": D ** -0.5 if c.scale is None else c.scale,
                   "lambda_": c.lam, "ROT": c.rot_dims, "POS": c.pos_offset,
                   "q_alpha": c.q_alpha, "k_alpha": c.k_alpha}
            freq = c.frequencies()      # the kernel's extras freq0, freq1 ...: 0 past rot / 2
            env.update({n: float(freq[int(n[4:])]) if int(n[4:]) < len(freq) else 0.0
                        for n in kernel.extras if n.startswith("freq")})
            extras, grid = kernel.launch(env, False, lift=trtp.ShapeExpr, minimum=trtp.min)
            return _aot_result(trtp, plugin_id, kernel, extras, grid, at["max"])
        return aot

    _register_all(trtp, plugin_id, impl, key, desc, jit, make_aot, autotune)
