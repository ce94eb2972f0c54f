"""The torch.library custom ops dswa::diff_swa and dswa::diff_swa_out (the op), and
dswa::samel_attention, dswa::samel_attention_tensor_alpha and dswa::samel_attention_out (the
fused SAME-L block).

Registered with fake (meta) implementations, so torch.compile traces them without a graph
break; the real implementation launches on torch's current stream, so they can be captured in
a CUDA graph. dswa::diff_swa has an autograd formula: its backward is the custom op
dswa::diff_swa_backward (dswa_backward_cpu / dswa_backward_cuda), giving the gradients of q, k
and v (lam is a float argument, so it gets none). dswa::samel_attention and
dswa::samel_attention_tensor_alpha have one too: their backward is the custom op
dswa::samel_attention_backward (dswa_samel_backward_cpu / dswa_samel_backward_cuda), giving
the gradients of x and of the norms' gamma and beta, and, for the op whose alphas are tensors,
of the alphas. The _out variants are forward only. The fused ops take RoPE's rot_dims / 2
frequencies as a list of floats (`freq`: the model's own, or dswa_rope_frequencies of a base).
"""
from typing import List

import torch

from . import _core

Tensor = torch.Tensor
_core.trace_constants(torch)


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


@torch.library.custom_op("dswa::diff_swa_backward", mutates_args=())
def diff_swa_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, window_left: int,
                      window_right: int, scale: float, lam: float,
                      math: int) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of diff_swa for dout = dL/d(out): contiguous, of q's, k's and v's shapes.
    A v of H heads (read by both pairs) gets both pairs' gradients summed; a (B, N, 2, H, D) v
    with pair stride 0 (an expanded view) gets each pair's own, which autograd sums."""
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    _core.backward_run(q, k, v, dout, dq, dk, dv, window_left, window_right, scale, lam, math)
    return dq, dk, dv


@diff_swa_backward.register_fake
def _(dout, q, k, v, window_left, window_right, scale, lam, math):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, window_left, window_right, scale, lam, math = inputs
    ctx.save_for_backward(q, k, v)
    ctx.args = (window_left, window_right, scale, lam, math)


def _backward(ctx, dout):
    q, k, v = ctx.saved_tensors
    dq, dk, dv = torch.ops.dswa.diff_swa_backward(dout, q, k, v, *ctx.args)
    return dq, dk, dv, None, None, None, None, None


diff_swa.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("dswa::diff_swa_out", mutates_args=("out",))
def diff_swa_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, window_left: int,
                 window_right: int, scale: float, lam: float, math: int) -> None:
    """The same, written into `out` (any strides)."""
    _run(q, k, v, out, window_left, window_right, scale, lam, math)


@diff_swa_out.register_fake
def _(q, k, v, out, window_left, window_right, scale, lam, math):
    return None


def _run_samel(x, norms, out, q_alpha, k_alpha, heads, window_left, window_right, scale, lam,
               rot_dims, freq, pos_offset, math):
    _core.samel_check_args(x, norms, out, heads)
    run = _core.samel_launcher(x, norms, out, q_alpha, k_alpha, window_left, window_right, scale,
                               lam, math, rot_dims, freq, pos_offset)
    if x.is_cuda:
        with torch.cuda.device(x.device):
            run()
    else:
        run()


@torch.library.custom_op("dswa::samel_attention", mutates_args=())
def samel_attention(x: Tensor, q_gamma: Tensor, q_beta: Tensor, k_gamma: Tensor, k_beta: Tensor,
                    q_alpha: float, k_alpha: float, heads: int, window_left: int,
                    window_right: int, scale: float, lam: float, rot_dims: int, freq: List[float],
                    pos_offset: int, math: int) -> Tensor:
    """The fused SAME-L block: out (B, N, H*D), contiguous, from the packed projection x
    (B, N, 5*H*D) or (B, N, 5, H, D), any strides; the norms' weights float32 (D,)."""
    norms = (q_gamma, q_beta, k_gamma, k_beta)
    out = x.new_empty(_core.samel_out_shape(x, q_gamma))
    _run_samel(x, norms, out, q_alpha, k_alpha, heads, window_left, window_right, scale, lam,
               rot_dims, freq, pos_offset, math)
    return out


@samel_attention.register_fake
def _(x, q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, heads, window_left, window_right,
      scale, lam, rot_dims, freq, pos_offset, math):
    _core.samel_check_args(x, (q_gamma, q_beta, k_gamma, k_beta), None, heads)
    return x.new_empty(_core.samel_out_shape(x, q_gamma))


@torch.library.custom_op("dswa::samel_attention_tensor_alpha", mutates_args=())
def samel_attention_tensor_alpha(x: Tensor, q_gamma: Tensor, q_beta: Tensor, k_gamma: Tensor,
                                 k_beta: Tensor, q_alpha: Tensor, k_alpha: Tensor, heads: int,
                                 window_left: int, window_right: int, scale: float, lam: float,
                                 rot_dims: int, freq: List[float], pos_offset: int,
                                 math: int) -> Tensor:
    """dswa::samel_attention with the alphas as 1-element float32 tensors (on x's device or
    the CPU), so that autograd gives them gradients. The kernels read an alpha on x's device
    where it is (dswa_samel_norm.alpha_at): no host read, capturable in a CUDA graph; a CPU
    alpha for CUDA x is read on the host (no device sync)."""
    norms = (q_gamma, q_beta, k_gamma, k_beta)
    out = x.new_empty(_core.samel_out_shape(x, q_gamma))
    _run_samel(x, norms, out, q_alpha.detach(), k_alpha.detach(), heads, window_left,
               window_right, scale, lam, rot_dims, freq, pos_offset, math)
    return out


@samel_attention_tensor_alpha.register_fake
def _(x, q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, heads, window_left, window_right,
      scale, lam, rot_dims, freq, pos_offset, math):
    _core.samel_check_args(x, (q_gamma, q_beta, k_gamma, k_beta), None, heads)
    _core.samel_check_alpha(q_alpha, "q_alpha")
    _core.samel_check_alpha(k_alpha, "k_alpha")
    return x.new_empty(_core.samel_out_shape(x, q_gamma))


@torch.library.custom_op("dswa::samel_attention_backward", mutates_args=())
def samel_attention_backward(dout: Tensor, x: Tensor, q_gamma: Tensor, q_beta: Tensor,
                             k_gamma: Tensor, k_beta: Tensor, q_alpha: Tensor, k_alpha: Tensor,
                             heads: int, window_left: int, window_right: int, scale: float,
                             lam: float, rot_dims: int, freq: List[float], pos_offset: int,
                             math: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                 Tensor]:
    """The fused block's gradients for dout = dL/d(out) ((B, N, H*D) or (B, N, H, D), any
    strides): (dx, dq_gamma, dq_beta, dk_gamma, dk_beta, dq_alpha, dk_alpha). dx: x's shape
    and dtype, contiguous, the gradient of all five chunks; the norms' gradients float32 on
    x's device, of the shapes of gamma, beta and alpha. The alphas are 1-element float32
    tensors, read where they are as samel_attention_tensor_alpha reads them."""
    norms = (q_gamma, q_beta, k_gamma, k_beta)
    _core.samel_check_args(x, norms, dout, heads)
    qa, ka = q_alpha.detach(), k_alpha.detach()
    dx = x.new_empty(x.shape)
    f32 = dict(dtype=torch.float32, device=x.device)
    grads = [torch.empty(t.shape, **f32) for t in (q_alpha, q_gamma, q_beta, k_alpha, k_gamma,
                                                   k_beta)]
    if x.is_cuda:
        with torch.cuda.device(x.device):
            _core.samel_backward_run(x, norms, dout, dx, grads, qa, ka, window_left,
                                     window_right, scale, lam, math, rot_dims, freq, pos_offset)
    else:
        _core.samel_backward_run(x, norms, dout, dx, grads, qa, ka, window_left, window_right,
                                 scale, lam, math, rot_dims, freq, pos_offset)
    dqa, dqg, dqb, dka, dkg, dkb = grads
    return dx, dqg, dqb, dkg, dkb, dqa, dka


@samel_attention_backward.register_fake
def _(dout, x, q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, heads, window_left,
      window_right, scale, lam, rot_dims, freq, pos_offset, math):
    _core.samel_check_args(x, (q_gamma, q_beta, k_gamma, k_beta), dout, heads)
    _core.samel_check_alpha(q_alpha, "q_alpha")
    _core.samel_check_alpha(k_alpha, "k_alpha")
    f32 = dict(dtype=torch.float32, device=x.device)
    return (x.new_empty(x.shape),) + tuple(
        torch.empty(t.shape, **f32) for t in (q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha))


def _samel_setup_context(ctx, inputs, output):
    x, qg, qb, kg, kb, qa, ka = inputs[:7]
    ctx.tensor_alpha = isinstance(qa, Tensor)
    if ctx.tensor_alpha:
        ctx.save_for_backward(x, qg, qb, kg, kb, qa, ka)
    else:
        ctx.save_for_backward(x, qg, qb, kg, kb)
        ctx.alphas = (qa, ka)
    ctx.args = inputs[7:]


def _samel_backward(ctx, dout):
    x, qg, qb, kg, kb, *alphas = ctx.saved_tensors
    if not ctx.tensor_alpha:
        # host floats as CPU tensors: read in the backward op without a device sync
        alphas = [torch.tensor([a], dtype=torch.float32) for a in ctx.alphas]
    dx, dqg, dqb, dkg, dkb, dqa, dka = torch.ops.dswa.samel_attention_backward(
        dout, x, qg, qb, kg, kb, *alphas, *ctx.args)
    if not ctx.tensor_alpha:
        return (dx, dqg, dqb, dkg, dkb) + (None,) * 11
    return (dx, dqg, dqb, dkg, dkb, dqa.to(alphas[0].device), dka.to(alphas[1].device)) + \
        (None,) * 9


samel_attention.register_autograd(_samel_backward, setup_context=_samel_setup_context)
samel_attention_tensor_alpha.register_autograd(_samel_backward,
                                               setup_context=_samel_setup_context)


@torch.library.custom_op("dswa::samel_attention_out", mutates_args=("out",))
def samel_attention_out(x: Tensor, q_gamma: Tensor, q_beta: Tensor, k_gamma: Tensor,
                        k_beta: Tensor, out: Tensor, q_alpha: float, k_alpha: float, heads: int,
                        window_left: int, window_right: int, scale: float, lam: float,
                        rot_dims: int, freq: List[float], pos_offset: int, math: int) -> None:
    """The same, written into `out` ((B, N, H*D) or (B, N, H, D), any strides)."""
    _run_samel(x, (q_gamma, q_beta, k_gamma, k_beta), out, q_alpha, k_alpha, heads, window_left,
               window_right, scale, lam, rot_dims, freq, pos_offset, math)


@samel_attention_out.register_fake
def _(x, q_gamma, q_beta, k_gamma, k_beta, out, q_alpha, k_alpha, heads, window_left,
      window_right, scale, lam, rot_dims, freq, pos_offset, math):
    _core.samel_check_args(x, (q_gamma, q_beta, k_gamma, k_beta), out, heads)
    return None
