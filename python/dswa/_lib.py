"""ctypes binding of libdswa.so: the structs of include/dswa.h, loading, errors, AOT export.

The library is looked for, in order: $DSWA_LIB; libdswa.so next to this package (a copy made
at install time); the repository's build/ folder (../build relative to python/); the system
linker path (`make install`). Nothing is loaded at import: the first call that needs the
library loads it, or raises LibraryNotFound naming every place it looked.
"""
import ctypes
import ctypes.util
import os
import struct

# ctypes mirrors of dswa.h's enums (the header is their home: python/tests/test_layout.py checks
# each value against the library's own dswa_dtype_parse / dswa_math_parse / status strings).
F32, F16, BF16 = 0, 1, 2                                        # dswa_dtype
MATH = {"default": 0, "tf32": 1, "fp32": 2}                     # dswa_math
INVALID_ARGUMENT, UNSUPPORTED, MISALIGNED = 1, 2, 3             # dswa_status codes -> ValueError

_HERE = os.path.dirname(os.path.abspath(__file__))
_c = ctypes


class Layout(_c.Structure):                    # dswa_layout: element strides
    _fields_ = [(n, _c.c_int64) for n in ("batch", "seq", "pair", "head", "dim")]


class Problem(_c.Structure):                   # dswa_problem
    _fields_ = [("batch", _c.c_int32), ("seq_len", _c.c_int32),
                ("heads", _c.c_int32), ("head_dim", _c.c_int32),
                ("window_left", _c.c_int32), ("window_right", _c.c_int32),
                ("scale", _c.c_float), ("lambda_", _c.c_float),
                ("dtype", _c.c_int), ("math", _c.c_int),
                ("q", Layout), ("k", Layout), ("v", Layout), ("out", Layout)]


class BackwardProblem(_c.Structure):          # dswa_backward_problem
    _fields_ = [("fwd", Problem), ("dout", Layout), ("dq", Layout), ("dk", Layout),
                ("dv", Layout)]


class SamelLayout(_c.Structure):               # dswa_samel_layout: [batch, seq, chunk, head, dim]
    _fields_ = [(n, _c.c_int64) for n in ("batch", "seq", "chunk", "head", "dim")]


class SamelNorm(_c.Structure):                 # dswa_samel_norm (gamma, beta: D floats each)
    _fields_ = [("alpha", _c.c_float), ("gamma", _c.c_void_p), ("beta", _c.c_void_p),
                ("alpha_at", _c.c_void_p)]


class SamelProblem(_c.Structure):              # dswa_samel_problem
    _fields_ = [("batch", _c.c_int32), ("seq_len", _c.c_int32),
                ("heads", _c.c_int32), ("head_dim", _c.c_int32),
                ("window_left", _c.c_int32), ("window_right", _c.c_int32),
                ("scale", _c.c_float), ("lambda_", _c.c_float),
                ("dtype", _c.c_int), ("math", _c.c_int),
                ("qkv", SamelLayout), ("out", Layout),
                ("rot_dims", _c.c_int32), ("rope_base", _c.c_float),
                ("rope_freq", _c.c_void_p), ("pos_offset", _c.c_int32),
                ("q_norm", SamelNorm), ("k_norm", SamelNorm)]


class SamelBackwardProblem(_c.Structure):   # dswa_samel_backward_problem
    _fields_ = [("fwd", SamelProblem), ("dout", Layout), ("dqkv", SamelLayout)]


class SamelNormGrad(_c.Structure):            # dswa_samel_norm_grad: 1, D and D floats
    _fields_ = [("dalpha", _c.c_void_p), ("dgamma", _c.c_void_p), ("dbeta", _c.c_void_p)]


class SamelNormGrads(_c.Structure):           # dswa_samel_norm_grads
    _fields_ = [("q_norm", SamelNormGrad), ("k_norm", SamelNormGrad)]


class AotParam(_c.Structure):                  # dswa_aot_param
    _fields_ = [("name", _c.c_char_p), ("kind", _c.c_int), ("meaning", _c.c_char_p),
                ("expr", _c.c_char_p), ("expr_shared_v", _c.c_char_p), ("value", _c.c_int32)]


class AotInfo(_c.Structure):                   # dswa_aot_info
    _fields_ = [("kernel_name", _c.c_char_p), ("family", _c.c_char_p), ("max_span", _c.c_int),
                ("target", _c.c_char_p), ("ptx", _c.c_char_p), ("ptx_size", _c.c_size_t),
                ("ptx_isa_major", _c.c_int), ("ptx_isa_minor", _c.c_int),
                ("ptx_isa_min_major", _c.c_int), ("ptx_isa_min_minor", _c.c_int),
                ("ptx_isa_min_reason", _c.c_char_p),
                ("toolkit_isa_major", _c.c_int), ("toolkit_isa_minor", _c.c_int),
                ("dtype", _c.c_int), ("math", _c.c_int), ("head_dim", _c.c_int),
                ("window_left", _c.c_int32), ("window_right", _c.c_int32),
                ("n_params", _c.c_int), ("n_inputs", _c.c_int), ("n_extras", _c.c_int),
                ("n_outputs", _c.c_int), ("params", AotParam * 54),
                ("block", _c.c_uint * 3), ("shared_bytes", _c.c_uint),
                ("dynamic_shared_bytes", _c.c_uint), ("grid", _c.c_char_p * 3),
                ("has_problem", _c.c_int), ("grid_dims", _c.c_uint * 3),
                ("op", _c.c_char_p), ("rot_dims", _c.c_int32)]


class LibraryNotFound(RuntimeError):
    """libdswa.so was not found (or did not load); the message says where it looked."""


def candidates():
    """Where the library is looked for, in order (the first that exists is loaded)."""
    env = os.environ.get("DSWA_LIB")
    if env:                                    # an explicit choice: nothing else is tried
        return [os.path.abspath(env)]
    found = ctypes.util.find_library("dswa")
    return [os.path.join(_HERE, "libdswa.so"),
            os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libdswa.so"))] + \
        ([found] if found else [])


def library_path():
    """The path that would be loaded, or None when there is none."""
    return next((p for p in candidates() if os.path.sep not in p or os.path.exists(p)), None)


_lib = None
_P, _SP, _vp = _c.POINTER(Problem), _c.POINTER(SamelProblem), _c.c_void_p
_BP = _c.POINTER(BackwardProblem)
_SBP, _SNG = _c.POINTER(SamelBackwardProblem), _c.POINTER(SamelNormGrads)
_SIGNATURES = [
    ("dswa_backward_cpu", _c.c_int, [_BP] + [_vp] * 8),
    ("dswa_backward_cuda", _c.c_int, [_BP] + [_vp] * 9 + [_c.c_size_t, _vp]),
    ("dswa_backward_workspace_bytes", _c.c_size_t, [_BP]),
    ("dswa_backward_problem_default", BackwardProblem, [_P]),
    ("dswa_forward_cuda", _c.c_int, [_P, _vp, _vp, _vp, _vp, _vp]),
    ("dswa_forward_cpu", _c.c_int, [_P, _vp, _vp, _vp, _vp]),
    ("dswa_kernel_name", _c.c_char_p, [_P]),
    ("dswa_validate", _c.c_int, [_P, _vp, _vp, _vp, _vp]),
    ("dswa_last_error", _c.c_char_p, []),
    ("dswa_status_string", _c.c_char_p, [_c.c_int]),
    ("dswa_problem_default", Problem, [_c.c_int32] * 5),
    ("dswa_min_bytes", _c.c_double, [_P]),
    ("dswa_cuda_available", _c.c_int, []),
    ("dswa_cpu_isa", _c.c_char_p, []),
    ("dswa_dtype_parse", _c.c_int, [_c.c_char_p, _c.POINTER(_c.c_int)]),
    ("dswa_math_parse", _c.c_int, [_c.c_char_p, _c.POINTER(_c.c_int)]),
    ("dswa_dtype_name", _c.c_char_p, [_c.c_int]),
    ("dswa_aot_kernel_window", _c.c_int,
     [_c.c_char_p, _c.c_int, _c.c_int, _c.c_int32, _c.c_int32, _c.POINTER(AotInfo)]),
    ("dswa_aot_kernel_for", _c.c_int, [_c.c_char_p, _P, _c.POINTER(AotInfo)]),
    ("dswa_aot_info_free", None, [_c.POINTER(AotInfo)]),
    ("dswa_samel_problem_default", SamelProblem, [_c.c_int32] * 3),
    ("dswa_rope_frequencies", _c.c_int, [_c.c_int32, _c.c_float, _c.POINTER(_c.c_float)]),
    ("dswa_samel_validate", _c.c_int, [_SP, _vp, _vp]),
    ("dswa_samel_forward_cpu", _c.c_int, [_SP, _vp, _vp]),
    ("dswa_samel_forward_cuda", _c.c_int, [_SP, _vp, _vp, _vp]),
    ("dswa_samel_kernel_name", _c.c_char_p, [_SP]),
    ("dswa_samel_min_bytes", _c.c_double, [_SP]),
    ("dswa_aot_samel_kernel", _c.c_int,
     [_c.c_char_p, _c.c_int, _c.c_int, _c.c_int32, _c.c_int32, _c.c_int32, _c.POINTER(AotInfo)]),
    ("dswa_aot_samel_kernel_for", _c.c_int, [_c.c_char_p, _SP, _c.POINTER(AotInfo)]),
    ("dswa_view_span", _c.c_int64, [_P, _c.POINTER(Layout), _c.c_int]),
    ("dswa_samel_backward_problem_default", SamelBackwardProblem, [_SP]),
    ("dswa_samel_validate_backward", _c.c_int, [_SBP, _vp, _vp, _vp, _SNG]),
    ("dswa_samel_backward_cpu", _c.c_int, [_SBP, _vp, _vp, _vp, _SNG]),
    ("dswa_samel_backward_workspace_bytes", _c.c_size_t, [_SBP]),
    ("dswa_samel_backward_cuda", _c.c_int,
     [_SBP, _vp, _vp, _vp, _SNG, _vp, _c.c_size_t, _vp]),
]


def _missing(path, name):
    """Stands in for a function this package binds but the loaded library lacks (a library
    older than the package): calling it raises, everything else keeps working."""
    def f(*args):
        raise LibraryNotFound(f"dswa: {path} has no {name}: the library is older than this "
                              "package; rebuild it (`make`) or point DSWA_LIB at a newer one")
    f.__name__ = name
    return f


def lib():
    """The loaded library, with argument and result types declared."""
    global _lib
    if _lib is None:
        path = library_path()
        if path is None:
            raise LibraryNotFound(
                "dswa: libdswa.so not found; looked in: " + ", ".join(candidates()) +
                ". Build it with `make` in the dswa repository, or set DSWA_LIB to its path.")
        try:
            L = _c.CDLL(path)
        except OSError as e:
            raise LibraryNotFound(f"dswa: could not load {path}: {e}") from None
        for name, res, args in _SIGNATURES:
            try:
                f = getattr(L, name)
            except AttributeError:
                setattr(L, name, _missing(path, name))
                continue
            f.restype, f.argtypes = res, args
        _lib = L
    return _lib


def cpu_isa():
    """The instruction set of the CPU backend on this machine: "avx512", "avx2", "sse2" or
    "generic" (dswa_cpu_isa)."""
    return lib().dswa_cpu_isa().decode()


def check(status):
    """Raise for a failed dswa_status: ValueError for invalid/unsupported/misaligned input,
    RuntimeError otherwise, with dswa_last_error() in the message and the status as .status
    (UNSUPPORTED from a dswa_aot_* function: a build without nvcc, which exports nothing)."""
    if status != 0:
        L = lib()
        msg = (f"dswa: {L.dswa_status_string(status).decode()}: "
               f"{L.dswa_last_error().decode(errors='replace')}")
        e = (ValueError if status in (INVALID_ARGUMENT, UNSUPPORTED, MISALIGNED)
             else RuntimeError)(msg)
        e.status = status
        raise e


def layout(strides, heads, pairs):
    """The [batch, seq, pair, head, dim] layout of a tensor with these element strides:
    (B, N, 2, H, D) as given; (B, N, 2H, D) with pair stride H * stride[2] (pairs = 2); or
    (B, N, H, D) read by both pairs / the output (pairs = 1: pair stride 0)."""
    if len(strides) == 5:
        return Layout(*strides)
    b, n, h, d = strides
    return Layout(b, n, heads * h if pairs == 2 else 0, h, d)


def float_bits(x):
    """The int32 whose bit pattern is the fp32 x (how scale and lambda travel as AOT extras)."""
    return struct.unpack("<i", struct.pack("<f", x))[0]


class KernelParam:
    """One kernel parameter of an export (dswa_aot_param): name, kind ("input", "extra",
    "output"), meaning, expr and expr_shared_v (formulas, see formula()), value (the value for
    the problem of dswa_aot_kernel_for, else None)."""
    __slots__ = ("name", "kind", "meaning", "expr", "expr_shared_v", "value")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

    def __repr__(self):
        return f"<{self.kind} {self.name} = {self.expr}>"


class AotKernel:
    """An exported kernel (dswa_aot_info) copied into Python objects. The launch facts are the
    library's: params (in launch order) with their formulas, grid formulas, block, shared
    memory; nothing here recomputes them."""

    def __init__(self, info):
        s = lambda b: b.decode() if b is not None else None  # noqa: E731
        self.name, self.family, self.target = s(info.kernel_name), s(info.family), s(info.target)
        self.ptx = _c.string_at(info.ptx, info.ptx_size).decode()
        self.ptx_isa = (info.ptx_isa_major, info.ptx_isa_minor)
        self.dtype, self.math, self.head_dim = info.dtype, info.math, info.head_dim
        self.window_left, self.window_right = info.window_left, info.window_right
        self.op, self.rot_dims = s(info.op), info.rot_dims
        has_problem, grid_dims = info.has_problem, tuple(info.grid_dims)
        kinds = ("input", "extra", "output")
        self.params = [KernelParam(name=s(x.name), kind=kinds[x.kind], meaning=s(x.meaning),
                                   expr=s(x.expr), expr_shared_v=s(x.expr_shared_v),
                                   value=x.value if has_problem and x.kind == 1 else None)
                       for x in info.params[:info.n_params]]
        self.extras = [p.name for p in self.params if p.kind == "extra"]
        self.values = [p.value for p in self.params if p.kind == "extra"] \
            if has_problem else None
        self.block = tuple(info.block)
        self.shared_bytes, self.dynamic_shared_bytes = info.shared_bytes, info.dynamic_shared_bytes
        self.grid = tuple(s(g) for g in info.grid)
        self.grid_dims = grid_dims if has_problem else None

    def launch(self, env, shared_v, lift=None, minimum=None):
        """(extras, grid) from the library's formulas with the names in env (B, N, H, D as
        ints or symbolic expressions; see formula()); shared_v: V is (B, N, H, D)."""
        extras = [formula(p.expr_shared_v if shared_v else p.expr, env, lift, minimum)
                  for p in self.params if p.kind == "extra"]
        return extras, tuple(formula(g, env, lift, minimum) for g in self.grid)

    def __repr__(self):
        return f"<dswa AOT kernel {self.name} ({self.family}) for {self.target}>"


def formula(text, env, lift=None, minimum=None):
    """Evaluates one of the library's launch formulas ("N * 2 * H * D", "min(17, N - 1)",
    "(N + 63) // 64", "float_bits(scale)"): integers, the names in env, + - * //, parentheses,
    min(a, b) and float_bits(x) (the int32 with the bits of the fp32 x; `lambda` is looked up
    as "lambda_"). env values are ints or symbolic expressions that support + - * // with an
    int on their right (TensorRT's ShapeExpr); lift(int) makes a symbolic constant for an int
    on the left of - and //, and minimum(a, b) takes the minimum of symbolic values. A formula
    with anything else is an error: the library and this package would not match."""
    import ast

    def fail(why):
        raise RuntimeError(f"dswa: launch formula {text!r}: {why} (libdswa.so and the dswa "
                           "package do not match)")

    def sym(x):
        return not isinstance(x, int)

    def ev(n):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in env:
                fail(f"unknown name {n.id}")
            return env[n.id]
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            op = type(n.op)
            if op in (ast.Add, ast.Mult):
                if sym(b) and not sym(a):
                    a, b = b, a                   # a symbolic value goes on the left
                return a + b if op is ast.Add else a * b
            if op in (ast.Sub, ast.FloorDiv):
                if not sym(a) and sym(b):
                    a = lift(a) if lift else fail("an int left of a symbolic value")
                return a - b if op is ast.Sub else a // b
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            if n.func.id == "float_bits" and len(n.args) == 1:
                x = ev(n.args[0])
                if isinstance(x, float):
                    return float_bits(x)
            if n.func.id == "min" and len(n.args) == 2:
                args = [ev(a) for a in n.args]
                return min(args) if not any(map(sym, args)) else (minimum or fail)(*args)
        fail(f"cannot evaluate {ast.dump(n)}")

    try:
        tree = ast.parse(text.replace("lambda", "lambda_"), mode="eval")
    except SyntaxError:
        fail("not a formula")
    return ev(tree.body)


def validate(problem):
    """dswa_validate of `problem` with stand-in pointers (never dereferenced; apart, so that
    the overlap check passes): raises the library's refusal as ValueError."""
    span = max(lib().dswa_view_span(_c.byref(problem), _c.byref(problem.out), 1), 0) * 4
    o = 4096
    i = o + ((span + 4095) & ~255) + 256
    check(lib().dswa_validate(_c.byref(problem), i, i, i, o))


def _arch(arch):
    return (arch if str(arch).startswith("sm_") else f"sm_{arch}").encode()


def _export(fn, *args):
    L = lib()
    info = AotInfo()
    try:
        check(getattr(L, fn)(*args, _c.byref(info)))
        return AotKernel(info)
    finally:
        L.dswa_aot_info_free(_c.byref(info))


def aot_kernel(arch, dtype, window_left, window_right, math="default"):
    """The kernel the library launches for these windows, for `arch` ("sm_90" or "90") and
    dtype (F32, F16, BF16): dswa_aot_kernel_window."""
    return _export("dswa_aot_kernel_window", _arch(arch), dtype, MATH[math],
                   window_left, window_right)


def aot_kernel_for(arch, problem):
    """Exactly the kernel dswa_forward_cuda launches for `problem`, with every extra's value
    and the grid filled in: dswa_aot_kernel_for."""
    return _export("dswa_aot_kernel_for", _arch(arch), _c.byref(problem))


def aot_samel_kernel(arch, dtype, window_left, window_right, rot_dims, math="default"):
    """The fused SAME-L kernel the library launches for these windows and rot_dims:
    dswa_aot_samel_kernel."""
    return _export("dswa_aot_samel_kernel", _arch(arch), dtype, MATH[math],
                   window_left, window_right, rot_dims)


def aot_samel_kernel_for(arch, problem):
    """Exactly the fused kernel dswa_samel_forward_cuda launches for `problem` (a
    SamelProblem), values and grid filled in: dswa_aot_samel_kernel_for."""
    return _export("dswa_aot_samel_kernel_for", _arch(arch), _c.byref(problem))


def set_rope_freq(p, freq):
    """p.rope_freq (a SamelProblem's) pointing at these floats, held by p while it lives."""
    p.freq = (_c.c_float * max(len(freq), 1))(*freq)
    p.rope_freq = _c.cast(p.freq, _c.c_void_p)


def rope_frequencies(rot_dims, base):
    """RoPE's rot_dims / 2 frequencies for a base, as the library fills them (upstream's float32
    inv_freq, fp32(base^(-2j / rot_dims))): dswa_rope_frequencies, as a tuple of floats."""
    n = max(int(rot_dims), 0) // 2
    out = (_c.c_float * max(n, 1))()
    check(lib().dswa_rope_frequencies(int(rot_dims), float(base), out))
    return tuple(out[:n])
