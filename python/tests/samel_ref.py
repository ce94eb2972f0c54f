"""Shared by the fused SAME-L block's tests: a float64 reference of the block (numpy, written
from its description: DyT, RoPE, the two windowed attentions sharing v, out - lam * out_diff;
the attention itself is _util.reference, independent of the library), and, with torch, an
upstream-shaped `Attention` module (stable_audio_3's with differential=True, qk_norm='dyt')
written from the same description, whose core can be the plain-torch attention or the
`samel::diff_attn_swa` custom node for ONNX export.
"""
import numpy as np

from _util import reference, to64, torch

F16_MAX = 65504.0


def round_to(y, dtype):
    """float64 y rounded as a `dtype` tensor would hold it ("float32": y itself, the float64
    value standing for the fp32 computation, as tests/lib/samel_ref64 does)."""
    if dtype == "float16":
        return y.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":           # to fp32 first (exact enough: 29 spare bits), then RNE
        b = np.asarray(y, np.float32).view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.asarray(y, np.float64)


def rope_angles(N, rot_dims, base, pos_offset, freq=None):
    """fp32 angles (N, rot_dims // 2): positions pos_offset + i times the frequencies freq,
    by default inv_freq = fp32(base^(-2f/rot)) (written here, not the library's)."""
    c = rot_dims // 2
    pos = np.float32(pos_offset) + np.arange(N, dtype=np.float32)
    inv = (1.0 / base ** (2.0 * np.arange(c) / rot_dims)).astype(np.float32) if freq is None \
        else np.asarray(freq, np.float32)
    return (pos[:, None] * inv[None, :]).astype(np.float32).astype(np.float64)


def samel_reference(x, q_norm, k_norm, heads, window_left=17, window_right=17, scale=None,
                    lam=1.0, rot_dims=None, base=10000.0, pos_offset=0, dtype="float32",
                    freq=None):
    """float64 out (B, N, H*D) of the block for the packed x (B, N, 5*H*D); q_norm, k_norm:
    (alpha, gamma, beta). DyT and RoPE results rounded to `dtype` as the module in that dtype
    rounds them."""
    x = to64(x)
    B, N = x.shape[:2]
    H = heads
    D = x.shape[2] // (5 * H)
    rot = D // 2 if rot_dims is None else rot_dims
    x5 = x.reshape(B, N, 5, H, D)
    ang = rope_angles(N, rot, base, pos_offset, freq)[None, :, None, :]   # (1, N, 1, c)
    c = rot // 2

    def prologue(t, norm):
        a, g, b = (to64(z) for z in norm)
        y = round_to(g * np.tanh(a.reshape(()) * t) + b, dtype)
        y1, y2 = y[..., :c].copy(), y[..., c:rot].copy()
        y[..., :c] = y1 * np.cos(ang) - y2 * np.sin(ang)
        y[..., c:rot] = y2 * np.cos(ang) + y1 * np.sin(ang)
        return round_to(y, dtype)

    q = np.stack([prologue(x5[:, :, 0], q_norm), prologue(x5[:, :, 3], q_norm)], 2)
    k = np.stack([prologue(x5[:, :, 1], k_norm), prologue(x5[:, :, 4], k_norm)], 2)
    v = x5[:, :, 2]
    out = reference(q, k, v, window_left, window_right, D ** -0.5 if scale is None else scale, lam)
    return out.reshape(B, N, H * D)


if torch is not None:
    nn = torch.nn

    class DyT(nn.Module):
        """Dynamic tanh: gamma * tanh(alpha * x) + beta; alpha a learned scalar."""

        def __init__(self, dim, alpha_init=0.5):
            super().__init__()
            self.alpha = nn.Parameter(torch.full((1,), alpha_init))
            self.gamma = nn.Parameter(torch.ones(dim))
            self.beta = nn.Parameter(torch.zeros(dim))

        def forward(self, x):
            return self.gamma * torch.tanh(self.alpha * x) + self.beta

    class RotaryEmbedding(nn.Module):
        """Upstream's: inv_freq = 1 / base^(2i/dim), freqs for positions 0 .. N-1, repeated
        twice along the last dim (non-interleaved)."""

        def __init__(self, dim, base=10000):
            super().__init__()
            self.register_buffer("inv_freq",
                                 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

        def forward_from_seq_len(self, n):
            t = torch.arange(n, device=self.inv_freq.device, dtype=torch.float32)
            freqs = t[:, None] * self.inv_freq[None, :]
            return torch.cat((freqs, freqs), dim=-1)

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(t, freqs):
        """RoPE in fp32 on the first freqs.shape[-1] dims of t (b h n d), the rest passed."""
        out_dtype, rot = t.dtype, freqs.shape[-1]
        t = t.to(torch.float32)
        t, t_unrot = t[..., :rot], t[..., rot:]
        t = t * freqs.cos() + rotate_half(t) * freqs.sin()
        return torch.cat((t.to(out_dtype), t_unrot.to(out_dtype)), dim=-1)

    def sliding_window_attention(q, k, v, window, scale):
        """softmax(scale q k^T) v over keys |i - j| <= window; q, k, v (b h n d)."""
        n = q.shape[-2]
        i = torch.arange(n, device=q.device)
        band = (i[:, None] - i[None, :]).abs() <= window
        s = (q.float() @ k.float().transpose(-1, -2)) * scale
        s = s.masked_fill(~band, float("-inf"))
        return (s.softmax(-1) @ v.float()).to(q.dtype)

    class DiffAttnSwa(torch.autograd.Function):
        """The op as ONNX exports it: the custom node samel::diff_attn_swa(q, k, v) with the
        TensorRT plugin's `config` attribute; q, k (B, N, 2H, D), v (B, N, H or 2H, D)."""

        @staticmethod
        def forward(ctx, q, k, v, config):
            import dswa
            return dswa.diff_swa(q, k, v, window=17, scale=0.125, lam=1.0)

        @staticmethod
        def symbolic(g, q, k, v, config):
            return g.op("samel::diff_attn_swa", q, k, v, config_s=config)

    CONFIG = "window_left=17;window_right=17;scale=default;lambda=1;math=default"

    class Attention(nn.Module):
        """Upstream's Attention(dim, dim_heads=64, differential=True, qk_norm='dyt') for
        self-attention over a sliding window: parameter names as upstream's (to_qkv, q_norm,
        k_norm, to_out). core: "torch" (the two attentions in plain torch) or "plugin" (the
        samel::diff_attn_swa node, for ONNX export; layout "bnhd" builds q and k in (b n h d)
        order, "bhnd" transposes at the end; dup_v: v duplicated to 2H heads)."""

        def __init__(self, dim, dim_heads=64, window=17, core="torch", layout="bhnd",
                     dup_v=False):
            super().__init__()
            self.num_heads, self.dim_heads, self.window = dim // dim_heads, dim_heads, window
            self.core, self.layout, self.dup_v = core, layout, dup_v
            self.to_qkv = nn.Linear(dim, dim * 5, bias=False)
            self.q_norm, self.k_norm = DyT(dim_heads), DyT(dim_heads)
            self.rotary = RotaryEmbedding(dim_heads // 2)
            self.to_out = nn.Linear(dim, dim, bias=False)

        def forward(self, x):
            b, n, _ = x.shape
            h, d = self.num_heads, self.dim_heads
            q, k, v, qd, kd = self.to_qkv(x).chunk(5, dim=-1)
            if self.layout == "bnhd":
                q, k, v, qd, kd = (t.reshape(b, n, h, d) for t in (q, k, v, qd, kd))
                freqs = self.rotary.forward_from_seq_len(n)[:, None, :]   # (n, 1, rot)
            else:                                  # 'b n (h d) -> b h n d'
                q, k, v, qd, kd = (t.reshape(b, n, h, d).transpose(1, 2)
                                   for t in (q, k, v, qd, kd))
                freqs = self.rotary.forward_from_seq_len(n)
            q, qd = self.q_norm(q), self.q_norm(qd)
            k, kd = self.k_norm(k), self.k_norm(kd)
            q, qd, k, kd = (apply_rotary_pos_emb(t, freqs) for t in (q, qd, k, kd))
            if self.core == "torch":
                if self.layout == "bnhd":
                    q, k, v, qd, kd = (t.transpose(1, 2) for t in (q, k, v, qd, kd))
                out = (sliding_window_attention(q, k, v, self.window, d ** -0.5)
                       - sliding_window_attention(qd, kd, v, self.window, d ** -0.5))
                out = out.transpose(1, 2).reshape(b, n, h * d)   # 'b h n d -> b n (h d)'
            else:
                hd = 2 if self.layout == "bnhd" else 1
                qc, kc = torch.cat((q, qd), dim=hd), torch.cat((k, kd), dim=hd)
                vc = torch.cat((v, v), dim=hd) if self.dup_v else v
                if self.layout == "bhnd":
                    qc, kc, vc = (t.transpose(1, 2) for t in (qc, kc, vc))
                out = DiffAttnSwa.apply(qc, kc, vc, CONFIG).reshape(b, n, h * d)
            return self.to_out(out)

    def randomize(m, seed=0):
        """Random weights (norms too: alpha, gamma, beta away from their init)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if name.endswith("alpha"):
                    p.copy_(0.3 + torch.rand(p.shape, generator=g))
                elif name.endswith("gamma"):
                    p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
                elif name.endswith("beta"):
                    p.copy_(0.2 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        return m

    def norms(m):
        """((alpha, gamma, beta) of q_norm, of k_norm) as float64 numpy."""
        return tuple(tuple(to64(getattr(n, a)) for a in ("alpha", "gamma", "beta"))
                     for n in (m.q_norm, m.k_norm))
