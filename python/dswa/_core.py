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


def _array_kind(a, name):
    """(torch.Tensor or numpy.ndarray, whether torch's) for argument `name`; TypeError for
    anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return torch.Tensor, True
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is None or not isinstance(a, numpy.ndarray):
        raise TypeError(f"dswa: {name} is a {type(a).__module__}.{type(a).__name__}: expected a "
                        "torch.Tensor or a numpy.ndarray")
    return numpy.ndarray, False


def check_args(q, k, v, out, heads):
    """ValueError unless q, k (B, N, 2H, D) or (B, N, 2, H, D), v the same or (B, N, H, D),
    and out (if given) (B, N, H, D) agree in kind, dtype and device. (B, N, H, D, shared_v)."""
    kind, is_torch = _array_kind(q, "q")
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


_CONSTANT = {}


def _constant(fn, *args):
    """fn(*args) where torch.compile may be tracing (a host function it cannot trace: a
    library call, a torch setting): a constant of the graph there, computed at trace time.
    fn is one of trace_constants' functions (their wrappers are made before any tracing:
    dynamo cannot trace the making)."""
    wrapped = _CONSTANT.get(fn)
    return fn(*args) if wrapped is None else wrapped(*args)


def trace_constants(torch):
    """Wrap the host functions the torch ops call while traced (torch.compiler's
    assume_constant_result); called once when dswa's torch ops are defined."""
    if hasattr(torch, "compiler") and hasattr(torch.compiler, "assume_constant_result"):
        for fn in (_float32_precision, _fp32_kernel, _lib.rope_frequencies):
            _CONSTANT[fn] = torch.compiler.assume_constant_result(fn)


def _float32_precision():
    return sys.modules["torch"].get_float32_matmul_precision()


def float32_math(math, x, windows=None):
    """The math for these inputs: `math` as given; None: for float32 torch tensors, torch's
    float32 precision (torch.get_float32_matmul_precision(): "highest" gives "fp32", fp32-
    accurate as torch's own float32 matmuls; "high" and "medium" give "tf32"), else "default".
    windows (N, window_left, window_right): the op's, whose fp32-accurate CUDA kernel is the
    band kernel only: where the library has none (dswa_kernel_name), "tf32"."""
    if math is not None:
        return math
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        return "default"
    if _constant(_float32_precision) != "highest":
        return "tf32"
    if windows is not None and x.is_cuda:
        N, wl, wr = windows       # a symbolic N (dynamic shapes): the windows unclamped
        if not _constant(_fp32_kernel, N if isinstance(N, int) else 2**30, wl, wr):
            return "tf32"
    return "fp32"


def _fp32_kernel(N, wl, wr):
    """Whether the library has an fp32-accurate CUDA kernel for the op's windows."""
    p = _lib.lib().dswa_problem_default(1, max(N, 1), 1, 64, 0)
    p.window_left, p.window_right, p.math = wl, wr, _lib.MATH["fp32"]
    return _lib.lib().dswa_kernel_name(ctypes.byref(p)) is not None


def options(D, window, window_left, window_right, scale, lam, math, x=None, N=None):
    """(window_left, window_right, scale, lam, math code) with the defaults filled in; math
    None: float32_math for x (the op's windows when N is given)."""
    if math is not None and math not in _lib.MATH:
        raise ValueError(f"dswa: math = {math!r}: expected one of {', '.join(_lib.MATH)}")
    wl = window if window_left is None else window_left
    wr = window if window_right is None else window_right
    for name, w in (("window_left", wl), ("window_right", wr)):
        _int32(name, w)
    math = float32_math(math, x, None if N is None else (N, int(wl), int(wr)))
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


def backward_run(q, k, v, dout, dq, dk, dv, wl, wr, scale, lam, math):
    """The op's backward into dq, dk, dv (torch tensors of q's, k's and v's shapes, any
    strides; dlambda is not computed): dswa_backward_cpu, or for CUDA tensors
    dswa_backward_cuda on torch's current stream with a workspace from torch's allocator. A v
    of H heads (one V read by both pairs) gets the sum of both pairs' gradients in dv."""
    import torch
    B, N, H, D, shared = check_args(q, k, v, dout, None)
    for name, x in (("batch", B), ("seq_len", N), ("heads", H), ("head_dim", D)):
        _int32(name, x)
    lay = _lib.layout
    fwd = _lib.Problem(B, N, H, D, wl, wr, scale, lam, DTYPES[_dtype_name(q)], math,
                       lay(q.stride(), H, 2), lay(k.stride(), H, 2),
                       lay(v.stride(), H, 1 if shared else 2), lay(dout.stride(), H, 1))
    p = _lib.BackwardProblem(fwd, fwd.out, lay(dq.stride(), H, 2), lay(dk.stride(), H, 2),
                             lay(dv.stride(), H, 1 if shared else 2))
    L = _lib.lib()
    ptrs = [t.data_ptr() for t in (q, k, v, dout, dq, dk, dv)]
    if not q.is_cuda:
        _lib.check(L.dswa_backward_cpu(ctypes.byref(p), *ptrs, None))
        return
    with torch.cuda.device(q.device):
        nbytes = L.dswa_backward_workspace_bytes(ctypes.byref(p))
        ws = torch.empty(nbytes, dtype=torch.uint8, device=q.device)
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _lib.check(L.dswa_backward_cuda(ctypes.byref(p), *ptrs, None, ws.data_ptr() if nbytes else None,
                                        nbytes, stream))


# ---- the fused SAME-L block (dswa_samel_*) ---------------------------------------------------
SAMEL_NORMS = ("q_gamma", "q_beta", "k_gamma", "k_beta")


def samel_check_args(x, norms, out, heads):
    """ValueError unless x is (B, N, 5*H*D) or (B, N, 5, H, D) (chunks q, k, v, q_diff, k_diff),
    the four norm vectors (q_gamma, q_beta, k_gamma, k_beta) float32 (D,) of x's kind and device,
    and out (if given) (B, N, H*D) or (B, N, H, D) of x's dtype and device. D is the norms'
    length; H comes from x's shape (checked against `heads` when given). (B, N, H, D)."""
    kind, is_torch = _array_kind(x, "x")
    if _dtype_name(x) not in DTYPES:
        raise ValueError(f"dswa: x.dtype = {x.dtype} is not supported: float32, float16 or "
                         "bfloat16" + ("" if is_torch else " (numpy: float32 or float16)"))
    if is_torch and x.device.type not in ("cpu", "cuda"):
        raise ValueError(f"dswa: tensors on {x.device} are not supported (cpu or cuda)")
    named = list(zip(SAMEL_NORMS, norms)) + ([("out", out)] if out is not None else [])
    for name, t in named:
        if not isinstance(t, kind):
            raise ValueError(f"dswa: x is a {kind.__module__}.{kind.__name__} but {name} is a "
                             f"{type(t).__module__}.{type(t).__name__}")
        if is_torch and t.device != x.device:
            raise ValueError(f"dswa: {name} is on {t.device} but x on {x.device}")
    for name, t in named[:4]:
        if _dtype_name(t) != "float32":
            raise ValueError(f"dswa: {name}.dtype = {t.dtype}: the norms' weights are float32")
        if len(t.shape) != 1:
            raise ValueError(f"dswa: {name} has shape {tuple(t.shape)}: expected (D,), one "
                             "weight per head dim")
    D = norms[0].shape[0]
    for name, t in named[1:4]:
        if t.shape[0] != D:
            raise ValueError(f"dswa: {name} has shape {tuple(t.shape)} but q_gamma {(D,)}: "
                             "all four norm vectors have D elements")
    xs = tuple(x.shape)
    if len(xs) == 5 and xs[2] == 5 and xs[4] == D:
        B, N, _, H, _ = xs
    elif len(xs) == 3 and D > 0 and xs[2] % (5 * D) == 0:
        B, N, H = xs[0], xs[1], xs[2] // (5 * D)
    else:
        raise ValueError(f"dswa: x has shape {xs}: expected (B, N, 5*H*D) or (B, N, 5, H, D) "
                         f"with D = {D} (the norms' length)")
    if heads is not None and heads != H:
        raise ValueError(f"dswa: heads = {heads} but x of shape {xs} with D = {D} has {H} heads")
    if out is not None:
        os_ = tuple(out.shape)
        if os_ not in ((B, N, H * D), (B, N, H, D)):
            raise ValueError(f"dswa: out has shape {os_}: expected (B, N, H*D) = "
                             f"{(B, N, H * D)} or (B, N, H, D)")
        if out.dtype != x.dtype:
            raise ValueError(f"dswa: out.dtype = {out.dtype} but x.dtype = {x.dtype}: they must "
                             "be the same")
    return B, N, H, D


def samel_check_alpha(t, name):
    """ValueError unless an alpha given as a tensor is float32 with one element."""
    if t.dtype != sys.modules["torch"].float32 or t.numel() != 1:
        raise ValueError(f"dswa: {name} is a {t.dtype} tensor of shape {tuple(t.shape)}: a "
                         "tensor alpha is float32 with one element")


def _samel_norm(alpha, gamma_ptr, beta_ptr, x, name):
    """dswa_samel_norm for a host-float alpha, or for a tensor alpha: on x's device it is
    read there by the call (alpha_at: no host read, capturable); a CPU tensor for CUDA x is read
    here (.item() of host memory, no device sync)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(alpha, torch.Tensor):
        return _lib.SamelNorm(alpha, gamma_ptr, beta_ptr, None)
    samel_check_alpha(alpha, name)
    if alpha.device == x.device:
        return _lib.SamelNorm(0.0, gamma_ptr, beta_ptr, alpha.data_ptr())
    if alpha.is_cuda:
        raise ValueError(f"dswa: {name} is on {alpha.device} but x on {x.device}: a tensor "
                         "alpha is on x's device or the CPU")
    return _lib.SamelNorm(float(alpha.reshape(()).item()), gamma_ptr, beta_ptr, None)


def samel_out_shape(x, q_gamma):
    """The fused block's output shape, (B, N, H*D), for x as samel_check_args takes it."""
    s = tuple(x.shape)
    return s[:2] + ((s[2] // 5,) if len(s) == 3 else (s[3] * s[4],))


def _number(name, a):
    try:
        return float(a)
    except (TypeError, ValueError):
        raise ValueError(f"dswa: {name} = {a!r}: must be a number") from None


def rope_freq(rot, base, freq):
    """RoPE's rot // 2 frequencies as a tuple of floats: `freq` as given (any sequence or
    1-D array / tensor of rot // 2 numbers: the model's own, e.g. its inv_freq), else the
    library's fp32(base^(-2j / rot)) (dswa_rope_frequencies, which refuses a bad base or
    rot_dims)."""
    if freq is None:
        return _constant(_lib.rope_frequencies, rot, _number("base", base))
    if hasattr(freq, "tolist"):
        freq = freq.tolist()
    try:
        freq = tuple(freq)
    except TypeError:
        raise ValueError(f"dswa: freq = {freq!r}: must be a sequence of rot_dims / 2 "
                         "numbers") from None
    if len(freq) != max(rot, 0) // 2:
        raise ValueError(f"dswa: freq has {len(freq)} values: rot_dims = {rot} needs "
                         f"rot_dims / 2 = {max(rot, 0) // 2}")
    return tuple(_number(f"freq[{j}]", f) for j, f in enumerate(freq))


def samel_options(D, window, window_left, window_right, scale, lam, math, rot_dims, base,
                  pos_offset, q_alpha, k_alpha, freq=None, x=None):
    """The block's settings with the defaults filled in (scale 1/sqrt(D), rot_dims D // 2,
    RoPE's frequencies from base unless freq gives them, math None: float32_math for x):
    (wl, wr, scale, lam, math code, rot_dims, freq tuple, pos_offset, q_alpha, k_alpha)."""
    wl, wr, scale, lam, m = options(D, window, window_left, window_right, scale, lam, math, x)
    rot = _int32("rot_dims", D // 2 if rot_dims is None else rot_dims)
    pos = _int32("pos_offset", pos_offset)
    qa, ka = _number("q_alpha", q_alpha), _number("k_alpha", k_alpha)
    return (wl, wr, scale, lam, m, rot, rope_freq(rot, base, freq), pos, qa, ka)


def _samel_problem(x, norms, out, q_alpha, k_alpha, wl, wr, scale, lam, math, rot_dims, freq,
                   pos_offset):
    """(dswa_samel_problem for these arrays or tensors, ptr, whether CUDA, torch or None);
    freq: RoPE's rot_dims / 2 frequencies (samel_options), held by the problem."""
    B, N, H, D = samel_check_args(x, norms, out, None)
    for name, v in (("batch", B), ("seq_len", N), ("heads", H), ("head_dim", D)):
        _int32(name, v)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        strides, ptr, cuda = (lambda t: t.stride()), (lambda t: t.data_ptr()), x.is_cuda
    else:
        if not out.flags.writeable:
            raise ValueError("dswa: out is read-only")
        strides, ptr, cuda = _numpy_strides, (lambda a: a.ctypes.data), False
    for name, t in zip(SAMEL_NORMS, norms):
        if D > 1 and strides(t)[0] != 1:
            raise ValueError(f"dswa: {name} has stride {strides(t)[0]}: the library reads D "
                             "consecutive floats (pass a contiguous vector)")
    qg, qb, kg, kb = (ptr(t) for t in norms)
    p = _lib.SamelProblem(B, N, H, D, wl, wr, scale, lam, DTYPES[_dtype_name(x)], math,
                          _samel_layout(strides(x), H, D), _out_layout(strides(out), D),
                          rot_dims, 10000.0, None, pos_offset,
                          _samel_norm(q_alpha, qg, qb, x, "q_alpha"),
                          _samel_norm(k_alpha, kg, kb, x, "k_alpha"))
    _lib.set_rope_freq(p, freq)
    return p, ptr, cuda, torch


def _samel_layout(xs, H, D):
    """The [batch, seq, chunk, head, dim] layout of x (B, N, 5*H*D) or (B, N, 5, H, D)."""
    if len(xs) == 3:
        xs = (xs[0], xs[1], H * D * xs[2], D * xs[2], xs[2])
    return _lib.SamelLayout(*xs)


def _out_layout(os_, D):
    """The [batch, seq, -, head, dim] layout of out (B, N, H*D) or (B, N, H, D)."""
    return (_lib.Layout(os_[0], os_[1], 0, D * os_[2], os_[2]) if len(os_) == 3
            else _lib.Layout(os_[0], os_[1], 0, os_[2], os_[3]))


def samel_launcher(x, norms, out, q_alpha, k_alpha, wl, wr, scale, lam, math, rot_dims, freq,
                   pos_offset, stream=None):
    """A no-argument callable running the fused block on these arrays (numpy) or tensors
    (torch, CPU or CUDA) with the problem and pointers built once; it returns `out`. CUDA: on
    `stream`, by default torch's current stream of x's device at this call. The library checks
    the settings (dswa_samel_validate) and says what it refuses."""
    p, ptr, cuda, torch = _samel_problem(x, norms, out, q_alpha, k_alpha, wl, wr, scale, lam,
                                         math, rot_dims, freq, pos_offset)
    L = _lib.lib()
    args = (ctypes.byref(p), ptr(x), ptr(out))
    if cuda:
        fwd = L.dswa_samel_forward_cuda
        args += (torch.cuda.current_stream(x.device).cuda_stream if stream is None else stream,)
    else:
        fwd = L.dswa_samel_forward_cpu

    def run():
        _lib.check(fwd(*args))
        return out
    run.problem = p  # keeps the struct alive with the closure ...
    run.alphas = (q_alpha, k_alpha)  # ... and tensor alphas, which it points to
    return run


def samel_backward_run(x, norms, dout, dx, grads, q_alpha, k_alpha, wl, wr, scale, lam, math,
                       rot_dims, freq, pos_offset):
    """The fused block's backward (torch tensors): dx (x's shape, any strides) gets the
    gradient of all five chunks; grads, six float32 tensors on x's device (dq_alpha: 1 element,
    dq_gamma, dq_beta, dk_alpha: 1 element, dk_gamma, dk_beta: D each), the norms'. dout:
    (B, N, H*D) or (B, N, H, D), x's dtype, any strides (0 included). dswa_samel_backward_cpu,
    or for CUDA tensors dswa_samel_backward_cuda on torch's current stream with a workspace
    from torch's allocator. q_alpha, k_alpha: host floats or 1-element float32 tensors
    (_samel_norm)."""
    import torch
    p, ptr, cuda, _ = _samel_problem(x, norms, dout, q_alpha, k_alpha, wl, wr, scale, lam, math,
                                     rot_dims, freq, pos_offset)
    B, N, H, D = p.batch, p.seq_len, p.heads, p.head_dim
    L = _lib.lib()
    bp = L.dswa_samel_backward_problem_default(ctypes.byref(p))
    bp.dout = p.out                                   # dout's own strides (0 allowed) ...
    bp.fwd.out = _lib.Layout(N * H * D, H * D, 0, D, 1)   # ... the forward's out: contiguous
    bp.dqkv = _samel_layout(dx.stride(), H, D)
    for name, t in zip(("dq_alpha", "dq_gamma", "dq_beta", "dk_alpha", "dk_gamma", "dk_beta"),
                       grads):
        if t.dtype != torch.float32 or t.device != x.device or \
                t.numel() != (1 if "alpha" in name else D) or t.numel() > 1 and t.stride(-1) != 1:
            raise ValueError(f"dswa: {name}: a contiguous float32 tensor of "
                             f"{1 if 'alpha' in name else D} elements on {x.device} expected")
    gp = [t.data_ptr() for t in grads]
    g = _lib.SamelNormGrads(_lib.SamelNormGrad(*gp[:3]), _lib.SamelNormGrad(*gp[3:]))
    args = (ctypes.byref(bp), ptr(x), ptr(dout), ptr(dx), ctypes.byref(g))
    if not cuda:
        _lib.check(L.dswa_samel_backward_cpu(*args))
        return
    with torch.cuda.device(x.device):
        nbytes = L.dswa_samel_backward_workspace_bytes(ctypes.byref(bp))
        ws = torch.empty(nbytes, dtype=torch.uint8, device=x.device)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        _lib.check(L.dswa_samel_backward_cuda(*args, ws.data_ptr() if nbytes else None, nbytes,
                                              stream))
