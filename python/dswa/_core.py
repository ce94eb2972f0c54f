"""Argument checks and the launcher shared by the numpy path, the torch op and dswa.prepare.

`check_args` looks at types, shapes, dtypes and devices only, so it also runs on the fake
tensors of torch.compile; `launcher` reads strides and data pointers of real arrays.
"""
import ctypes
import sys

from . import _lib

DTYPES = {"float32": _lib.F32, "float16": _lib.F16, "bfloat16": _lib.BF16}


def _dtype_name(x):
    return str(x.dtype).rpartition(".")[2]      # torch.float32 / numpy float32 -> "float32"


def check_args(q, k, v, out, heads):
    """ValueError unless q, k (B, N, 2H, D) or (B, N, 2, H, D), v the same or (B, N, H, D),
    and out (if given) (B, N, H, D) agree in kind, dtype and device. (B, N, H, D, shared_v)."""
    torch = sys.modules.get("torch")
    is_torch = torch is not None and isinstance(q, torch.Tensor)
    if is_torch:
        kind = torch.Tensor
    else:
        try:
            import numpy
        except ImportError:
            numpy = None
        kind = numpy.ndarray if numpy else None
        if kind is None or not isinstance(q, kind):
            raise TypeError(f"dswa: q is a {type(q).__module__}.{type(q).__name__}: expected a "
                            "torch.Tensor or a numpy.ndarray")
    named = [("k", k), ("v", v)] + ([("out", out)] if out is not None else [])
    for name, t in named:
        if not isinstance(t, kind):
            raise ValueError(f"dswa: q is a {kind.__module__}.{kind.__name__} but {name} is a "
                             f"{type(t).__module__}.{type(t).__name__}")
        if t.dtype != q.dtype:
            raise ValueError(f"dswa: {name}.dtype = {t.dtype} but q.dtype = {q.dtype}: "
                             "they must be the same")
        if is_torch and t.device != q.device:
            raise ValueError(f"dswa: {name} is on {t.device} but q on {q.device}")
    if _dtype_name(q) not in DTYPES:
        raise ValueError(f"dswa: dtype {q.dtype} is not supported: float32, float16 or bfloat16"
                         + ("" if is_torch else " (numpy: float32 or float16)"))
    if is_torch and q.device.type not in ("cpu", "cuda"):
        raise ValueError(f"dswa: tensors on {q.device} are not supported (cpu or cuda)")
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if len(qs) == 4:
        B, N, H2, D = qs
        if H2 % 2:
            raise ValueError(f"dswa: q.shape[2] = {H2} must be even: 2H, the two pairs of "
                             "H heads (pair 0 first)")
        H = H2 // 2
    elif len(qs) == 5 and qs[2] == 2:
        B, N, _, H, D = qs
    else:
        raise ValueError(f"dswa: q has shape {qs}: expected (B, N, 2H, D) or (B, N, 2, H, D)")
    if ks != qs:
        raise ValueError(f"dswa: k has shape {ks} but q {qs}: they must be the same")
    if vs != qs and vs != (B, N, H, D):
        raise ValueError(f"dswa: v has shape {vs}: expected {qs} like q, or {(B, N, H, D)} "
                         "(B, N, H, D) for one V shared by both pairs")
    if heads is not None and heads != H:
        raise ValueError(f"dswa: heads = {heads} but q of shape {qs} has {H} output heads")
    if out is not None and tuple(out.shape) != (B, N, H, D):
        raise ValueError(f"dswa: out has shape {tuple(out.shape)}: expected (B, N, H, D) = "
                         f"{(B, N, H, D)}")
    return B, N, H, D, vs != qs


def options(D, window, window_left, window_right, scale, lam, math):
    """(window_left, window_right, scale, lam, math code) with the defaults filled in."""
    if math not in _lib.MATH:
        raise ValueError(f"dswa: math = {math!r}: expected one of {', '.join(_lib.MATH)}")
    wl = window if window_left is None else window_left
    wr = window if window_right is None else window_right
    for name, w in (("window_left", wl), ("window_right", wr)):
        _int32(name, w)
    if scale is None:
        scale = D ** -0.5 if D > 0 else 1.0
    return int(wl), int(wr), float(scale), float(lam), _lib.MATH[math]


def _int32(name, x):
    """The library's sizes and windows are int32: refuse what ctypes would silently wrap."""
    if isinstance(x, bool) or not isinstance(x, int) and not (hasattr(x, "__index__")):
        raise ValueError(f"dswa: {name} = {x!r}: must be an integer")
    if not -2**31 <= int(x) < 2**31:
        raise ValueError(f"dswa: {name} = {x}: must fit in int32")
    return int(x)


def out_shape(q):
    s = tuple(q.shape)
    return s[:2] + (s[2] // 2, s[3]) if len(s) == 4 else s[:2] + s[3:]


def _numpy_strides(a):
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(f"dswa: strides {a.strides} (bytes) are not multiples of the element "
                         f"size {a.itemsize}")
    return tuple(s // a.itemsize for s in a.strides)


def launcher(q, k, v, out, wl, wr, scale, lam, math, stream=None):
    """A no-argument callable running the op on these arrays (numpy) or tensors (torch, CPU or
    CUDA) with the problem and pointers built once; it returns `out`. CUDA: on `stream` (a
    cudaStream_t as int), by default torch's current stream of q's device at this call."""
    B, N, H, D, shared = check_args(q, k, v, out, None)
    for name, x in (("batch", B), ("seq_len", N), ("heads", H), ("head_dim", D)):
        _int32(name, x)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):
        strides, ptr, cuda = (lambda t: t.stride()), (lambda t: t.data_ptr()), q.is_cuda
    else:
        if not out.flags.writeable:
            raise ValueError("dswa: out is read-only")
        strides, ptr, cuda = _numpy_strides, (lambda a: a.ctypes.data), False
    lay = _lib.layout
    p = _lib.Problem(B, N, H, D, wl, wr, scale, lam, DTYPES[_dtype_name(q)], math,
                     lay(strides(q), H, 2), lay(strides(k), H, 2),
                     lay(strides(v), H, 1 if shared else 2), lay(strides(out), H, 1))
    L = _lib.lib()
    args = (ctypes.byref(p), ptr(q), ptr(k), ptr(v), ptr(out))
    if cuda:
        fwd = L.dswa_forward_cuda
        args += (torch.cuda.current_stream(q.device).cuda_stream if stream is None else stream,)
    else:
        fwd = L.dswa_forward_cpu

    def run():
        _lib.check(fwd(*args))
        return out
    run.problem = p  # keeps the struct alive with the closure
    return run
