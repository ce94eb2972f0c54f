"""An upstream-shaped SAME-L transformer block for the drop-in's tests and benchmark (needs
torch), written from SPEC section 6 and the interface of stable_audio_3's transformer.py:
parameter and argument names are upstream's, the code is this repository's.

- DyT(dim): gamma * tanh(alpha * x) + beta, alpha a learned scalar (init 4.0).
- RotaryEmbedding(dim, base, interpolation_factor): inv_freq = 1 / base^(2i / dim) in float32;
  forward(t) gives (freqs, 1.0), freqs = (t / interpolation_factor) * inv_freq repeated for both
  halves (non-interleaved), float32.
- Attention(dim, dim_heads=64, causal=False, feat_scale=False, core="reference"): differential,
  qk_norm 'dyt', forward(x, context, rotary_pos_emb, rotary_pos_emb_k, causal,
  flex_attention_block_mask, flex_attention_score_mod, flash_attn_sliding_window, padding_mask,
  varlen_metadata) as upstream's. RoPE in float32 on the first freqs.shape[-1] dims with the
  table's last N rows (its scale unused, as upstream). The attention without flash-attn:
  core "reference" is an explicit softmax over the allowed keys in the promoted dtype of q and
  float32 (float64 for a float64 model): window [left, right] (None: all keys), causal, the
  block mask (a boolean (N, N) of allowed pairs in this stand-in) and the score mod (a
  callable on the scores (B, H, N, N) in this stand-in), padding by zeroing V (as upstream);
  core "chunked" is upstream's chunked-halo SDPA fallback for a window (queries in chunks of
  1024 with the window's halo of keys, a band mask per chunk; upstream's fallback where
  FlexAttention fails), "flex" is FlexAttention with a band block mask, compiled as upstream
  compiles it (mode "max-autotune-no-cudagraphs"): what upstream runs on a GPU without
  flash-attn. varlen_metadata is used only by flash-attn
  upstream and is not read here. Then heads merged, to_out, feat_scale's rescaling (lambda_dc
  on the mean over positions, lambda_hf on the rest; over the valid positions with a padding
  mask).
- FeedForward(dim, mult=3): SwiGLU, Linear(dim, 2 * mult * dim) -> x * silu(gate) ->
  Linear(mult * dim, dim), with biases.
- TransformerBlock(dim, ...): pre-norm DyT, x + self_attn(pre_norm(x), rotary_pos_emb=...,
  flex_attention_block_mask=..., flex_attention_score_mod=..., flash_attn_sliding_window=...,
  padding_mask=..., varlen_metadata=...) called by keyword as upstream's block calls it (its
  own RoPE table for positions 0 .. N-1 when none is given, as SAME-L's blocks with add_rope),
  then x + ff(ff_norm(x)).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class DyT(nn.Module):
    def __init__(self, dim, init_alpha=4.0):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), init_alpha))
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.gamma * torch.tanh(self.alpha * x) + self.beta


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, interpolation_factor=1.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim))
        self.interpolation_factor = interpolation_factor

    def forward(self, t):
        t = t.to(torch.float32) / self.interpolation_factor
        freqs = t[:, None] * self.inv_freq.float()[None, :]
        return torch.cat((freqs, freqs), dim=-1), 1.0

    def forward_from_seq_len(self, n):
        return self.forward(torch.arange(n, device=self.inv_freq.device))


def rotate(t, freqs):
    """t (..., n, d) rotated in float32 (float64 for float64 t) on its first freqs.shape[-1] dims by freqs' last n rows
    (non-interleaved halves); the other dims pass."""
    rot, ct = freqs.shape[-1], torch.promote_types(t.dtype, torch.float32)
    f = freqs[-t.shape[-2]:].to(ct)
    t = t.to(ct)
    a, rest = t[..., :rot], t[..., rot:]
    a1, a2 = a.chunk(2, dim=-1)
    a = a * f.cos() + torch.cat((-a2, a1), dim=-1) * f.sin()
    return torch.cat((a, rest), dim=-1)


def allowed_keys(n, window, causal, device):
    """(n, n) boolean: key j seen by query i."""
    i = torch.arange(n, device=device)
    d = i[None, :] - i[:, None]                  # j - i
    ok = torch.ones(n, n, dtype=torch.bool, device=device)
    if window is not None:
        ok &= (d >= -int(window[0])) & (d <= int(window[1]))
    if causal:
        ok &= d <= 0
    return ok


def reference_attention(q, k, v, window, causal=False, block_mask=None, score_mod=None):
    """softmax(q k^T / sqrt(D)) v over the allowed keys, in float32 or wider; q, k, v
    (b, h, n, d)."""
    ct = torch.promote_types(q.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    if score_mod is not None:
        s = score_mod(s)
    ok = allowed_keys(q.shape[-2], window, causal, q.device)
    if block_mask is not None:
        ok = ok & block_mask
    s = s.masked_fill(~ok, float("-inf"))
    return (s.softmax(-1) @ v.to(ct)).to(q.dtype)


def chunked_halo_attention(q, k, v, window, chunk=1024):
    """Upstream's sliding-window fallback without flash-attn and FlexAttention: SDPA per chunk
    of queries over the chunk and the window's halo of keys, with the band as an additive
    mask; q, k, v (b, h, n, d)."""
    n, (wl, wr) = q.shape[-2], window
    outs = []
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        ka, kb = max(0, a - wl), min(n, b + wr)
        d = (torch.arange(ka, kb, device=q.device)[None, :]
             - torch.arange(a, b, device=q.device)[:, None])
        mask = torch.zeros(d.shape, dtype=q.dtype, device=q.device).masked_fill(
            (d < -wl) | (d > wr), float("-inf"))
        outs.append(F.scaled_dot_product_attention(q[..., a:b, :], k[..., ka:kb, :],
                                                   v[..., ka:kb, :], attn_mask=mask))
    return torch.cat(outs, dim=-2)


_flex = {}


def flex_band_attention(q, k, v, window):
    """FlexAttention with a band block mask, compiled as upstream's transformer.py compiles it
    (what upstream runs without flash-attn)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    n, (wl, wr) = q.shape[-2], window
    key = (n, wl, wr, str(q.device))
    if key not in _flex:
        def band(b, h, qi, ki):
            return (ki - qi >= -wl) & (ki - qi <= wr)
        _flex[key] = create_block_mask(band, B=None, H=None, Q_LEN=n, KV_LEN=n, device=q.device)
    if "fn" not in _flex:
        _flex["fn"] = torch.compile(flex_attention, dynamic=False, mode="max-autotune-no-cudagraphs")
    return _flex["fn"](q, k, v, block_mask=_flex[key])


class Attention(nn.Module):
    def __init__(self, dim, dim_heads=64, causal=False, feat_scale=False, core="reference"):
        super().__init__()
        if core not in ("reference", "chunked", "flex"):
            raise ValueError(f"core = {core!r}: expected reference, chunked or flex")
        self.dim, self.dim_heads, self.core = dim, dim_heads, core
        self.num_heads = self.kv_heads = dim // dim_heads
        self.differential, self.qk_norm, self.causal = True, "dyt", causal
        self.to_qkv = nn.Linear(dim, 5 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.q_norm, self.k_norm = DyT(dim_heads), DyT(dim_heads)
        self.feat_scale = feat_scale
        if feat_scale:
            self.lambda_dc = nn.Parameter(torch.zeros(dim))
            self.lambda_hf = nn.Parameter(torch.zeros(dim))

    def attend(self, q, k, v, causal, block_mask, score_mod, window):
        if self.core != "reference" and window is not None and not causal and \
                block_mask is None and score_mod is None:
            fn = chunked_halo_attention if self.core == "chunked" else flex_band_attention
            return fn(q, k, v, window)
        return reference_attention(q, k, v, window, causal, block_mask, score_mod)

    def forward(self, x, context=None, rotary_pos_emb=None, rotary_pos_emb_k=None, causal=None,
                flex_attention_block_mask=None, flex_attention_score_mod=None,
                flash_attn_sliding_window=None, padding_mask=None, varlen_metadata=None):
        b, n, _ = x.shape
        h, d = self.num_heads, self.dim_heads
        # a self-attention module projects x alone (upstream's to_qkv path reads no context)
        parts = self.to_qkv(x).chunk(5, dim=-1)
        q, k, v, qd, kd = (t.reshape(b, n, h, d).transpose(1, 2) for t in parts)
        q, qd = (self.q_norm(t).to(t.dtype) for t in (q, qd))
        k, kd = (self.k_norm(t).to(t.dtype) for t in (k, kd))
        if rotary_pos_emb is not None:
            fq = rotary_pos_emb[0]
            fk = fq if rotary_pos_emb_k is None else rotary_pos_emb_k[0]
            q, qd = (rotate(t, fq).to(v.dtype) for t in (q, qd))
            k, kd = (rotate(t, fk).to(v.dtype) for t in (k, kd))
        causal = self.causal if causal is None else causal
        causal = bool(causal) and n > 1
        if padding_mask is not None:
            v = v * padding_mask[:, None, :, None].to(v.dtype)
        args = (causal, flex_attention_block_mask, flex_attention_score_mod,
                flash_attn_sliding_window)
        out = self.attend(q, k, v, *args) - self.attend(qd, kd, v, *args)
        out = self.to_out(out.transpose(1, 2).reshape(b, n, h * d))
        if self.feat_scale:
            if padding_mask is None:
                dc = out.mean(dim=-2, keepdim=True)
                out = out + self.lambda_dc * dc + self.lambda_hf * (out - dc)
            else:
                m = padding_mask[..., None].to(out.dtype)
                dc = (out * m).sum(dim=-2, keepdim=True) / m.sum(dim=-2, keepdim=True).clamp(min=1)
                out = out + (self.lambda_dc * dc + self.lambda_hf * (out - dc)) * m
        return out


class FeedForward(nn.Module):
    def __init__(self, dim, mult=3):
        super().__init__()
        inner = int(dim * mult)
        self.proj_in = nn.Linear(dim, 2 * inner)
        self.proj_out = nn.Linear(inner, dim)

    def forward(self, x):
        a, gate = self.proj_in(x).chunk(2, dim=-1)
        return self.proj_out(a * F.silu(gate))


class TransformerBlock(nn.Module):
    def __init__(self, dim, dim_heads=64, ff_mult=3, feat_scale=False, causal=False,
                 core="reference"):
        super().__init__()
        self.pre_norm = DyT(dim)
        self.self_attn = Attention(dim, dim_heads, causal=causal, feat_scale=feat_scale,
                                   core=core)
        self.ff_norm = DyT(dim)
        self.ff = FeedForward(dim, ff_mult)
        self.rope = RotaryEmbedding(dim_heads // 2)

    def forward(self, x, rotary_pos_emb=None, self_attention_block_mask=None,
                self_attention_score_mod=None, self_attention_flash_sliding_window=None,
                padding_mask=None, varlen_metadata=None):
        if rotary_pos_emb is None:
            rotary_pos_emb = self.rope.forward_from_seq_len(x.shape[-2])
        x = x + self.self_attn(self.pre_norm(x), rotary_pos_emb=rotary_pos_emb,
                               flex_attention_block_mask=self_attention_block_mask,
                               flex_attention_score_mod=self_attention_score_mod,
                               flash_attn_sliding_window=self_attention_flash_sliding_window,
                               padding_mask=padding_mask, varlen_metadata=varlen_metadata)
        return x + self.ff(self.ff_norm(x))


def randomize(m, seed=0):
    """Random weights: the norms' alpha, gamma, beta away from their init, feat_scale's lambdas
    of a size that shows, the projections (upstream zero-inits to_out) scaled by 1/sqrt(fan-in)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "alpha":
                p.copy_(0.3 + torch.rand(p.shape, generator=g))
            elif leaf == "gamma":
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif leaf in ("beta", "bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif leaf in ("lambda_dc", "lambda_hf"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
    return m
