"""Minimal ctypes binding to build/libdswa.so (or $DSWA_LIB) for torch tensors.

Tensors are q, k: (B, N, 2H, D) or (B, N, 2, H, D); v the same, or (B, N, H, D) when V is
shared (pair stride 0); out (B, N, H, D). Any element strides are passed through as given.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
LIB_PATH = os.environ.get("DSWA_LIB") or os.path.join(_HERE, "..", "build", "libdswa.so")

F32, F16, BF16 = 0, 1, 2                           # dswa_dtype
MATH = {"default": 0, "tf32": 1, "fp32": 2}        # dswa_math


class Layout(ctypes.Structure):                    # dswa_layout
    _fields_ = [(n, ctypes.c_int64) for n in ("batch", "seq", "pair", "head", "dim")]


class Problem(ctypes.Structure):                   # dswa_problem (C layout rules apply)
    _fields_ = [("batch", ctypes.c_int32), ("seq_len", ctypes.c_int32),
                ("heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("window_left", ctypes.c_int32), ("window_right", ctypes.c_int32),
                ("scale", ctypes.c_float), ("lambda_", ctypes.c_float),
                ("dtype", ctypes.c_int), ("math", ctypes.c_int),
                ("q", Layout), ("k", Layout), ("v", Layout), ("out", Layout)]


_lib = None


def lib():
    """The loaded library, with argument and result types declared."""
    global _lib
    if _lib is None:
        L = ctypes.CDLL(os.path.abspath(LIB_PATH))
        P, vp = ctypes.POINTER(Problem), ctypes.c_void_p
        for name, res, args in [
                ("dswa_forward_cuda", ctypes.c_int, [P, vp, vp, vp, vp, vp]),
                ("dswa_forward_cpu", ctypes.c_int, [P, vp, vp, vp, vp]),
                ("dswa_validate", ctypes.c_int, [P, vp, vp, vp, vp]),
                ("dswa_last_error", ctypes.c_char_p, []),
                ("dswa_status_string", ctypes.c_char_p, [ctypes.c_int]),
                ("dswa_problem_default", Problem, [ctypes.c_int32] * 5),
                ("dswa_min_bytes", ctypes.c_double, [P]),
                ("dswa_cuda_available", ctypes.c_int, [])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        _lib = L
    return _lib


def _dtype_code(t):
    import torch
    codes = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}
    if t.dtype not in codes:
        raise TypeError(f"dswa: unsupported dtype {t.dtype}")
    return codes[t.dtype]


def layout(t, H, shared=False):
    """[batch, seq, pair, head, dim] element strides of a (B, N, 2H, D), (B, N, 2, H, D) or,
    for shared V and the output, (B, N, H, D) tensor (pair stride 0)."""
    s = t.stride()
    if t.dim() == 5:
        return Layout(*s)
    if shared:
        return Layout(s[0], s[1], 0, s[2], s[3])
    return Layout(s[0], s[1], H * s[2], s[2], s[3])


def problem(q, k, v, out, H, WL, WR, scale, lam, math="default", shared_v=False):
    B, N = q.shape[:2]
    D = q.shape[-1]
    return Problem(B, N, H, D, WL, WR, scale, lam, _dtype_code(q),
                   MATH[math] if isinstance(math, str) else int(math),
                   layout(q, H), layout(k, H), layout(v, H, shared_v), layout(out, H, True))


def _check(status):
    if status != 0:
        L = lib()
        raise RuntimeError(f"dswa: {L.dswa_status_string(status).decode()} ({status}): "
                           f"{L.dswa_last_error().decode(errors='replace')}")


def prepare_cuda(q, k, v, out, H, WL, WR, scale, lam, math="default", shared_v=False,
                 stream=None):
    """A no-argument callable that runs dswa_forward_cuda on these tensors with everything
    (problem struct, pointers, stream) built once, for timing."""
    import torch
    L = lib()
    p = problem(q, k, v, out, H, WL, WR, scale, lam, math, shared_v)
    if stream is None:
        stream = torch.cuda.current_stream(q.device).cuda_stream
    args = (ctypes.byref(p), q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), stream)
    fwd = L.dswa_forward_cuda

    def run():
        _check(fwd(*args))
        return out
    run.problem = p  # keeps the struct alive with the closure
    return run


def forward_cuda(q, k, v, out, H, WL, WR, scale, lam, math="default", shared_v=False,
                 stream=None):
    """out = dswa(q, k, v) on the GPU (torch CUDA tensors), on torch's current stream unless
    `stream` (a cudaStream_t as int) is given. RuntimeError with dswa_last_error() on failure."""
    return prepare_cuda(q, k, v, out, H, WL, WR, scale, lam, math, shared_v, stream)()


def forward_cpu(q, k, v, out, H, WL, WR, scale, lam, math="default", shared_v=False):
    """The same through dswa_forward_cpu (torch CPU tensors)."""
    p = problem(q, k, v, out, H, WL, WR, scale, lam, math, shared_v)
    _check(lib().dswa_forward_cpu(ctypes.byref(p), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                  out.data_ptr()))
    return out
