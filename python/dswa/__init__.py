"""dswa: differential sliding-window attention (the attention op of SAME-L), from Python.

    out = dswa.diff_swa(q, k, v)        # q, k: (B, N, 2H, D); v: (B, N, 2H, D) or (B, N, H, D)
    out = dswa.samel_attention(x, q_gamma, q_beta, k_gamma, k_beta, q_alpha=a, k_alpha=b)
                                        # the fused SAME-L block: x (B, N, 5*H*D) -> (B, N, H*D)

For batch b, query i, output head h and pair p in {0, 1} (heads p*H + h of q, k, v):
a_p = softmax_j(scale * <q_i, k_j>) v_j over i - window_left <= j <= i + window_right, and
out[b, i, h] = a_0 - lam * a_1, accumulated in fp32. torch tensors run on the GPU (CUDA
tensors, on the current stream) or the CPU; numpy arrays on the CPU. The computation is in
libdswa.so, loaded with ctypes (see dswa._lib for where it is looked for); `dswa.trt` is the
TensorRT plugin, `dswa.samel` the drop-in for SAME-L's attention module, `dswa.onnx_samel`
the ONNX rewrite to the fused block.
"""
import sys

from . import _core, _lib
from ._lib import LibraryNotFound, library_path

__version__ = "0.1.0"
__all__ = ["diff_swa", "samel_attention", "prepare", "cuda_available", "library_path",
           "LibraryNotFound"]

try:                                     # torch is optional: numpy works without it
    import torch as _torch_module
except Exception:                        # not installed, or broken
    _torch_module = None
_HAVE_OP = _torch_module is not None and hasattr(_torch_module.library, "custom_op")
if _HAVE_OP:                  # registers dswa::diff_swa(_out) and dswa::samel_attention(_out)
    from . import _torch  # noqa: F401


def diff_swa(q, k, v, *, heads=None, window=17, window_left=None, window_right=None,
             scale=None, lam=1.0, math=None, out=None):
    """Differential sliding-window attention; returns out (B, N, H, D).

    q, k: (B, N, 2H, D) (heads 0..H-1 are pair 0, H..2H-1 pair 1) or (B, N, 2, H, D);
    v: the same, or (B, N, H, D) for one V read by both pairs. torch tensors (CPU or CUDA,
    float32/float16/bfloat16) or numpy arrays (float32/float16). Strides are passed through as
    they are (slices of a packed projection are read in place, never copied).
    heads: H, checked against the shapes when given. window: keys i - window .. i + window;
    window_left / window_right override either side. scale: default 1/sqrt(D). lam: the
    weight of pair 1. math: "default", "tf32" or "fp32": the f32 matrix math ("default": TF32;
    "fp32": fp32-accurate, 3xTF32, for window_left + window_right <= 48 on CUDA). None (the
    default): for float32 torch tensors, torch's own setting, torch.get_float32_matmul_precision()
    ("highest", torch's default: "fp32" where the library has it, else "tf32"; "high" or
    "medium": "tf32"); "default" for everything else. out: write here ((B, N, H, D), same dtype and device, any strides) instead of allocating.

    ValueError for bad arguments (before the library is called) and for what the library
    refuses as invalid, unsupported or misaligned (with its message); RuntimeError for other
    library failures (no CUDA device, a CUDA error); LibraryNotFound without libdswa.so.
    """
    B, N, H, D, _ = _core.check_args(q, k, v, out, heads)
    wl, wr, scale, lam, m = _core.options(D, window, window_left, window_right, scale, lam, math,
                                          q, N)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):
        if _HAVE_OP:
            if out is None:
                return torch.ops.dswa.diff_swa(q, k, v, wl, wr, scale, lam, m)
            torch.ops.dswa.diff_swa_out(q, k, v, out, wl, wr, scale, lam, m)
            return out
        if out is None:
            out = q.new_empty((B, N, H, D))
    elif out is None:
        out = sys.modules["numpy"].empty((B, N, H, D), q.dtype)
    return _core.launcher(q, k, v, out, wl, wr, scale, lam, m)()


def prepare(q, k, v, *, out=None, heads=None, window=17, window_left=None, window_right=None,
            scale=None, lam=1.0, math=None, stream=None):
    """A no-argument callable that runs diff_swa on these tensors with the problem, pointers
    and (CUDA) stream fixed now, and returns `out` (allocated here when not given): for timing
    loops, with no per-call argument handling. stream: a cudaStream_t as int; default torch's
    current stream at this call. Not for torch.compile (use diff_swa). math as for diff_swa."""
    B, N, H, D, _ = _core.check_args(q, k, v, out, heads)
    wl, wr, scale, lam, m = _core.options(D, window, window_left, window_right, scale, lam, math,
                                          q, N)
    if out is None:
        torch = sys.modules.get("torch")
        out = (q.new_empty((B, N, H, D)) if torch is not None and isinstance(q, torch.Tensor)
               else sys.modules["numpy"].empty((B, N, H, D), q.dtype))
    return _core.launcher(q, k, v, out, wl, wr, scale, lam, m, stream)


def samel_attention(x, q_gamma, q_beta, k_gamma, k_beta, *, q_alpha, k_alpha, heads=None,
                    window=17, window_left=None, window_right=None, scale=None, lam=1.0,
                    rot_dims=None, base=10000.0, freq=None, pos_offset=0, math=None, out=None):
    """The fused SAME-L attention block (dswa_samel_forward_*); returns out (B, N, H*D).

    x: the packed projection to_qkv(x), (B, N, 5*H*D) with chunks q, k, v, q_diff, k_diff in
    that order (or a (B, N, 5, H, D) view), any strides, read in place. For every position i
    and head: DyT y = gamma * tanh(alpha * x) + beta with (q_alpha, q_gamma, q_beta) for q and
    q_diff and (k_alpha, k_gamma, k_beta) for k and k_diff; RoPE on y's first rot_dims dims
    (default D // 2; non-interleaved rotate_half) at position p = pos_offset + i, dim j < rot/2
    turned by the angle fp32(fp32(p) * freq[j]), as upstream's float32 table; then diff_swa
    over pairs (q, q_diff) and (k, k_diff), both reading v; heads merged. freq: RoPE's
    rot_dims / 2 frequencies as the model holds them (a sequence, or a 1-D array or tensor:
    upstream's rotary inv_freq in whatever dtype the model was cast to); default from base,
    fp32(base^(-2j / rot_dims)) as upstream builds inv_freq in float32.
    q_gamma ... k_beta: float32 (D,) contiguous, on x's device; q_alpha, k_alpha: numbers
    (host floats: pass a cached value, not a tensor's .item(), inside torch.compile or a CUDA
    graph) or, with torch tensors, 1-element tensors (float32 on x's device or the CPU; others
    are cast): then they get gradients too, and the kernels read them where they are (on x's
    device: no host sync, capturable in a CUDA graph). heads: checked against x's shape
    when given. window / window_left / window_right, scale (default 1/sqrt(D)), lam as for
    diff_swa; math as for diff_swa, "fp32" for every window (also computing DyT's tanh to fp32
    accuracy). out: (B, N, H*D) or (B, N, H, D), x's dtype and device, any strides. torch
    tensors (CPU or CUDA: the current stream) or numpy arrays (float32, float16). Errors as
    diff_swa's.

    Autograd (torch, out=None): gradients flow to x, the four norm vectors and tensor alphas
    (dswa::samel_attention_backward, docs/BACKWARD.md).
    """
    norms = (q_gamma, q_beta, k_gamma, k_beta)
    B, N, H, D = _core.samel_check_args(x, norms, out, heads)
    torch = sys.modules.get("torch")
    is_torch = torch is not None and isinstance(x, torch.Tensor)
    alphas = [q_alpha, k_alpha]
    tensor_alpha = is_torch and _HAVE_OP and out is None and \
        any(isinstance(a, torch.Tensor) for a in alphas)
    if tensor_alpha:
        for i, (name, a) in enumerate((("q_alpha", q_alpha), ("k_alpha", k_alpha))):
            if not isinstance(a, torch.Tensor):
                try:
                    a = torch.tensor([float(a)])
                except (TypeError, ValueError):
                    raise ValueError(f"dswa: {name} = {a!r}: must be a number or a tensor") \
                        from None
            if a.numel() != 1 or not a.is_floating_point():
                raise ValueError(f"dswa: {name} has shape {tuple(a.shape)} and dtype {a.dtype}: "
                                 "a tensor alpha has one floating-point element")
            alphas[i] = a.to(torch.float32)      # differentiable; the same tensor when float32
        q_alpha = k_alpha = 1.0                  # checked by the library at the call
    wl, wr, scale, lam, m, rot, freq, pos, qa, ka = _core.samel_options(
        D, window, window_left, window_right, scale, lam, math, rot_dims, base, pos_offset,
        q_alpha, k_alpha, freq, x)
    if is_torch:
        if _HAVE_OP:
            if tensor_alpha:
                return torch.ops.dswa.samel_attention_tensor_alpha(
                    x, *norms, *alphas, H, wl, wr, scale, lam, rot, freq, pos, m)
            if out is None:
                return torch.ops.dswa.samel_attention(x, *norms, qa, ka, H, wl, wr, scale, lam,
                                                      rot, freq, pos, m)
            torch.ops.dswa.samel_attention_out(x, *norms, out, qa, ka, H, wl, wr, scale, lam,
                                               rot, freq, pos, m)
            return out
        if out is None:
            out = x.new_empty((B, N, H * D))
    elif out is None:
        out = sys.modules["numpy"].empty((B, N, H * D), x.dtype)
    return _core.samel_launcher(x, norms, out, qa, ka, wl, wr, scale, lam, m, rot, freq, pos)()


def cuda_available():
    """True when the library has its CUDA backend and a CUDA device is visible."""
    return bool(_lib.lib().dswa_cuda_available())
