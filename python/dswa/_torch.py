"""The torch.library custom ops dswa::diff_swa and dswa::diff_swa_out.

Registered with fake (meta) implementations, so torch.compile traces them without a graph
break; the real implementation launches on torch's current stream, so they can be captured in
a CUDA graph. Forward only (no autograd formula).
"""
import torch

from . import _core

Tensor = torch.Tensor


def _run(q, k, v, out, window_left, window_right, scale, lam, math):
    if q.is_cuda:
        with torch.cuda.device(q.device):
            _core.launcher(q, k, v, out, window_left, window_right, scale, lam, math)()
    else:
        _core.launcher(q, k, v, out, window_left, window_right, scale, lam, math)()


@torch.library.custom_op("dswa::diff_swa", mutates_args=())
def diff_swa(q: Tensor, k: Tensor, v: Tensor, window_left: int, window_right: int,
             scale: float, lam: float, math: int) -> Tensor:
    """out (B, N, H, D), contiguous, = attention over pair 0 - lam * attention over pair 1."""
    out = q.new_empty(_core.out_shape(q))
    _run(q, k, v, out, window_left, window_right, scale, lam, math)
    return out


@diff_swa.register_fake
def _(q, k, v, window_left, window_right, scale, lam, math):
    return q.new_empty(_core.out_shape(q))


@torch.library.custom_op("dswa::diff_swa_out", mutates_args=("out",))
def diff_swa_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, window_left: int,
                 window_right: int, scale: float, lam: float, math: int) -> None:
    """The same, written into `out` (any strides)."""
    _run(q, k, v, out, window_left, window_right, scale, lam, math)


@diff_swa_out.register_fake
def _(q, k, v, out, window_left, window_right, scale, lam, math):
    return None
