"""A drop-in for SAME-L's attention module: its core runs as one fused call (needs torch).

    import dswa.samel
    model = dswa.samel.swap_attention(model)   # every upstream-shaped Attention inside, or it

An upstream-shaped `Attention` (stable_audio_3's transformer.py with differential=True,
qk_norm='dyt') has `to_qkv` (Linear, no bias, 5*H*D outputs: q, k, v, q_diff, k_diff),
`q_norm` and `k_norm` (DyT: `alpha` a learned scalar, `gamma`, `beta` vectors of D) and
`to_out`. Between to_qkv and to_out it runs DyT, RoPE on the first D // 2 dims (base 10000,
positions 0 .. N-1), two sliding-window attentions (|i - j| <= 17, scale 1/sqrt(D)) sharing v
and out - out_diff. SamelAttention keeps the module's parameters, buffers and children under
their own names (state_dict() has the same keys and loads either way) and replaces that core
by torch.ops.dswa.samel_attention: to_qkv(x) is read in place, the result goes to to_out.

The alphas: the op takes them as host floats. SamelAttention reads them (one host sync) when
it is built and again, in eager mode, whenever a norm parameter's version changes (an
optimizer step, load_state_dict, an in-place write). Inside torch.compile and CUDA-graph
capture it uses the values last read: after changing alpha, run the module once eagerly or
call refresh() before compiling or capturing again (capturing with an alpha changed since
raises). Norm weights that are not float32 contiguous vectors on the module's device (a
bfloat16 model's) are copied to float32 buffers at the same moments (not in the state_dict).
RoPE's angles are computed in float32 from base and the positions, as upstream computes them
from a float32 inv_freq: a model cast whole to 16 bits (module.to(torch.bfloat16), inv_freq
buffer included) rotates by other angles, further off at later positions. Forward only (no
autograd).
"""
import ctypes

import torch

from . import _core, _lib

_NORM_PARAMS = ("alpha", "gamma", "beta")


def _capturing():
    if torch.compiler.is_compiling():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def looks_like_attention(m):
    """Whether m has the upstream Attention's attention parameters: to_qkv (a Linear without
    bias), q_norm and k_norm with alpha, gamma, beta, and to_out."""
    qkv = getattr(m, "to_qkv", None)
    return (isinstance(qkv, torch.nn.Linear) and qkv.bias is None and
            hasattr(m, "to_out") and
            all(isinstance(getattr(getattr(m, n, None), p, None), torch.Tensor)
                for n in ("q_norm", "k_norm") for p in _NORM_PARAMS))


class SamelAttention(torch.nn.Module):
    """attn's forward with the attention core fused (see the module docstring).

    attn: the upstream-shaped module (its submodules and parameters are taken over, shared,
    not copied). heads: default to_qkv.out_features // (5 * D), D = q_norm.gamma's length
    (checked against attn.num_heads / attn.heads when present). window, window_left,
    window_right, scale (default 1/sqrt(D)), lam (1: out - out_diff), rot_dims (default
    D // 2), base, math: as dswa.samel_attention's."""

    def __init__(self, attn, *, heads=None, window=17, window_left=None, window_right=None,
                 scale=None, lam=1.0, rot_dims=None, base=10000.0, math="default"):
        super().__init__()
        if not looks_like_attention(attn):
            raise ValueError(f"dswa.samel: {type(attn).__name__} is not an upstream-shaped "
                             "Attention: it needs to_qkv (a Linear without bias), q_norm and "
                             "k_norm with alpha, gamma and beta, and to_out")
        for name, m in attn._modules.items():
            self.add_module(name, m)
        for name, p in attn._parameters.items():
            self.register_parameter(name, p)
        for name, b in attn._buffers.items():
            self.register_buffer(name, b, persistent=name not in attn._non_persistent_buffers_set)
        D = self.q_norm.gamma.numel()
        out = self.to_qkv.out_features
        if D <= 0 or out % (5 * D):
            raise ValueError(f"dswa.samel: to_qkv has {out} outputs: expected 5 * H * D with "
                             f"D = {D} (q_norm.gamma's length)")
        H = out // (5 * D)
        for name in ("num_heads", "heads"):
            h = getattr(attn, name, None)
            if isinstance(h, int) and h != H:
                raise ValueError(f"dswa.samel: {type(attn).__name__}.{name} = {h} but to_qkv's "
                                 f"{out} outputs make {H} heads of D = {D}")
        if heads is not None and heads != H:
            raise ValueError(f"dswa.samel: heads = {heads} but to_qkv's {out} outputs make {H} "
                             f"heads of D = {D}")
        for n in ("q_norm", "k_norm"):
            for p in ("gamma", "beta"):
                k = getattr(getattr(self, n), p).numel()
                if k != D:
                    raise ValueError(f"dswa.samel: {n}.{p} has {k} elements: expected D = {D} "
                                     "(q_norm.gamma's length)")
        self.heads, self.head_dim = H, D
        self._settings = _core.samel_options(D, window, window_left, window_right, scale, lam,
                                             math, rot_dims, base, 0, 1.0, 1.0)
        p = _lib.lib().dswa_samel_problem_default(0, 1, 1)    # the settings, checked now
        p.head_dim, p.window_left, p.window_right, p.scale, p.lambda_, p.math = \
            D, *self._settings[:5]
        p.rot_dims, p.rope_base = self._settings[5], self._settings[6]
        _lib.check(_lib.lib().dswa_samel_validate(ctypes.byref(p), None, None))
        self._seen = None
        self.refresh()

    def _norm_tensors(self):
        return [getattr(getattr(self, n), p) for n in ("q_norm", "k_norm") for p in _NORM_PARAMS]

    def _versions(self):
        return tuple((t._version, t.data_ptr(), t.device, t.dtype) for t in self._norm_tensors())

    def refresh(self):
        """Reads the alphas (a host sync) and, where needed, copies gamma and beta to float32:
        call it after changing the norms, before torch.compile or a CUDA-graph capture (eager
        forward does it by itself when a norm parameter changed)."""
        with torch.no_grad():
            t = self._norm_tensors()
            for i, name in ((0, "q_norm.alpha"), (3, "k_norm.alpha")):
                if t[i].numel() != 1:
                    raise ValueError(f"dswa.samel: {name} has {t[i].numel()} elements: DyT's "
                                     "alpha is a scalar")
            self._q_alpha, self._k_alpha = float(t[0].detach()), float(t[3].detach())
            weights = []
            for w, name in zip((t[1], t[2], t[4], t[5]), _core.SAMEL_NORMS):
                w = w.detach().reshape(-1)
                if w.dtype != torch.float32 or w.stride(0) != 1:
                    buf = getattr(self, "_f32_" + name, None)
                    if buf is None or buf.shape != w.shape or buf.device != w.device:
                        buf = torch.empty(w.shape, dtype=torch.float32, device=w.device)
                        self.register_buffer("_f32_" + name, buf, persistent=False)
                    buf.copy_(w)
                    w = buf
                weights.append(w)
            self._weights = weights
        self._seen = self._versions()

    def forward(self, x, context=None, mask=None, context_mask=None, rotary_pos_emb=None,
                causal=None, *, pos_offset=0):
        """to_out(fused core(to_qkv(x))) for x (B, N, dim). RoPE positions are pos_offset + i
        (upstream's rotary_pos_emb for positions 0 .. N-1 is what it computes; a given
        rotary_pos_emb is not read). context, mask, context_mask and causal=True are not
        supported (the fused block is windowed self-attention) and refused."""
        for name, v in (("context", context), ("mask", mask), ("context_mask", context_mask)):
            if v is not None:
                raise ValueError(f"dswa.samel: {name} is not supported: the fused block is "
                                 "self-attention over a sliding window")
        if causal:
            raise ValueError("dswa.samel: causal=True is not supported: the window is "
                             "two-sided (window_left=, window_right= when building)")
        if not torch.compiler.is_compiling():
            if self._versions() != self._seen:
                if _capturing():
                    raise RuntimeError("dswa.samel: the norms changed since they were last read, "
                                       "inside a CUDA-graph capture: call refresh() (or run "
                                       "once eagerly) before capturing")
                self.refresh()
        wl, wr, scale, lam, m, rot, base = self._settings[:7]
        qkv = self.to_qkv(x)
        out = torch.ops.dswa.samel_attention(qkv, *self._weights, self._q_alpha, self._k_alpha,
                                             self.heads, wl, wr, scale, lam, rot, base,
                                             pos_offset, m)
        return self.to_out(out)


def swap_attention(module, **settings):
    """Replaces, in place, every upstream-shaped Attention inside `module` (see
    looks_like_attention) by a SamelAttention built from it with `settings`; returns the
    module, or the new SamelAttention when `module` itself is one. ValueError when there is
    none."""
    if isinstance(module, SamelAttention):
        return module
    if looks_like_attention(module):
        return SamelAttention(module, **settings)
    n = 0
    for name, child in list(module.named_children()):
        if isinstance(child, SamelAttention):
            continue
        if looks_like_attention(child):
            setattr(module, name, SamelAttention(child, **settings))
            n += 1
        else:
            try:
                swap_attention(child, **settings)
                n += 1
            except ValueError as e:
                if "no upstream-shaped Attention" not in str(e):
                    raise
    if n == 0:
        raise ValueError(f"dswa.samel: no upstream-shaped Attention in {type(module).__name__} "
                         "(to_qkv without bias, q_norm/k_norm with alpha, gamma, beta, to_out)")
    return module
