"""A drop-in for SAME-L's attention module: its core runs as one fused call (needs torch).

    import dswa.samel
    model = dswa.samel.swap_attention(model)   # every upstream-shaped Attention inside, or it

An upstream-shaped `Attention` (stable_audio_3's transformer.py with differential=True,
qk_norm='dyt') has `to_qkv` (Linear, no bias, 5*H*D outputs: q, k, v, q_diff, k_diff),
`q_norm` and `k_norm` (DyT: `alpha` a learned scalar, `gamma`, `beta` vectors of D) and
`to_out`, optionally `feat_scale` with `lambda_dc`, `lambda_hf`. Its forward is

    forward(x, context=None, rotary_pos_emb=None, rotary_pos_emb_k=None, causal=None,
            flex_attention_block_mask=None, flex_attention_score_mod=None,
            flash_attn_sliding_window=None, padding_mask=None, varlen_metadata=None)

and SamelAttention.forward takes the same arguments, by keyword or position. When the call is
windowed self-attention (flash_attn_sliding_window = [left, right], no context, masks, score
mod, varlen metadata, rotary_pos_emb_k or causal) with upstream's RoPE table, in
float32/float16/bfloat16 on a device the library runs on, it computes
to_out(torch.ops.dswa.samel_attention(to_qkv(x))) and feat_scale's rescaling, as upstream's
forward computes them. Anything else runs the module's own upstream forward, unchanged, and
warns once per module and reason: a swapped model gives what the original gives.

Training: when autograd records the call, gradients flow through the fused op (its backward
is dswa::samel_attention_backward) to x, to_qkv, to_out, feat_scale's lambdas and the norms'
gamma, beta and alpha. Alphas that require grad go to the op as tensors
(dswa::samel_attention_tensor_alpha), which the kernels read in device memory: no host sync,
and a training step captures in a CUDA graph; with frozen alphas (requires_grad False) the
values read as below are used (read again only when an alpha changes: no sync per step).

The module's state: SamelAttention and the original module share one attribute dictionary
(parameters, buffers, children, training flag, plain attributes such as feat_scale and
causal), so state_dict() has exactly the original keys, `.to()`, `.half()`, `train()` and
load_state_dict(assign=True) act on both, and the fallback runs the original forward on the
same tensors; nothing is copied or registered twice.

RoPE: upstream passes rotary_pos_emb = (freqs, scale), freqs (rows, rot) float32 angles,
fp32(fp32(position) * inv_freq) with the frequencies repeated for both halves; Attention
rotates the first rot dims of q and k with the table's last N rows and ignores scale. The
fused block computes the same angles itself from the first position and the rot / 2
frequencies, which it reads from the table: row 1 of a table counting from position 0 is the
frequencies exactly, whatever they are (float32 inv_freq; a model cast whole to float16 or
bfloat16, whose inv_freq is rounded to 16 bits; another base; a power-of-two interpolation).
In eager mode each new table is read once (one device-to-host copy: its first row, its
frequencies and the largest difference of the whole table from position times frequency,
which must be 0) and the result cached; a table that is not float32 positions
counting up by one times fixed frequencies, exactly (a 16-bit table, interpolation that rounds
otherwise) falls back. Upstream's TransformerBlock makes a new table at every call; so that
this is not a read (a host sync) per call, swap_attention also wraps the RoPE modules it finds
beside the attentions (an `inv_freq` buffer and forward_from_seq_len, as upstream's
RotaryEmbedding; sharing their state as SamelAttention does) to mark each table they make
with where it came from: a marked table is read once per RoPE module, length and version of
its inv_freq, and its result reused while the table itself is unchanged. Inside
torch.compile and CUDA-graph capture no value is read (that would be a host sync): the table
is taken to continue the pattern last verified eagerly for this module (the same rot dims,
first position and frequencies) and, when none was, the module falls back with a warning
saying so; run the model once eagerly first (for a model compiled inside, e.g. with
`torch.compiler.set_stance("force_eager")`).

float32: the math follows torch.get_float32_matmul_precision() at each call ("highest",
torch's default: fp32-accurate, as upstream's own float32 attention; "high" or "medium":
TF32), unless the module is built with math=.

The alphas: the op takes them as host floats (except while training alphas that require
grad: see Training above). SamelAttention reads them (one host sync) when it is built and
again, in eager mode, whenever a norm parameter's version changes (an
optimizer step, load_state_dict, an in-place write). Inside torch.compile it uses the values
last read: after changing alpha, run the module once eagerly or call refresh() before
compiling again; a CUDA-graph capture that sees a norm changed since falls back (warning).
Norm weights that are not float32 contiguous vectors on the module's device (a bfloat16
model's) are copied to float32 buffers at the same moments (not in the state_dict); when
autograd records the call they are cast (differentiably) at each call instead.
"""
import ctypes
import math as _math
import warnings
import weakref

import torch

from . import _core, _lib

_NORM_PARAMS = ("alpha", "gamma", "beta")
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# A table is fused only when the block computes its very angles (exactly: fp32 positions
# times fp32 frequencies, one rounding); anything else runs upstream's own forward.
_ANGLE_TOL = 0.0
_last_table = None     # (weakref to freqs, its _version, shape, base, result): shared by modules


def _capturing():
    if torch.compiler.is_compiling():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


@torch.compiler.assume_constant_result
def _warn(message):
    # Called at trace time under torch.compile (a warnings.warn in the graph would break it).
    warnings.warn(message, RuntimeWarning, stacklevel=4)
    return True


def looks_like_attention(m):
    """Whether m has the upstream differential Attention's parameters: to_qkv (a Linear
    without bias, 5 chunks of D per head), q_norm and k_norm with alpha, gamma, beta (DyT),
    and to_out."""
    qkv = getattr(m, "to_qkv", None)
    if not (isinstance(qkv, torch.nn.Linear) and qkv.bias is None and hasattr(m, "to_out") and
            all(isinstance(getattr(getattr(m, n, None), p, None), torch.Tensor)
                for n in ("q_norm", "k_norm") for p in _NORM_PARAMS)):
        return False
    D = m.q_norm.gamma.numel()
    return (getattr(m, "differential", True) is not False and
            getattr(m, "qk_norm", "dyt") == "dyt" and D > 0 and qkv.out_features % (5 * D) == 0)


def _looks_like_rope(m):
    """Whether m makes RoPE tables as upstream's RotaryEmbedding: an inv_freq tensor and
    forward_from_seq_len(seq_len) -> (table, scale)."""
    return (isinstance(getattr(m, "inv_freq", None), torch.Tensor) and
            callable(getattr(type(m), "forward_from_seq_len", None)))


class _Shared(torch.nn.Module):
    """A module holding its original's very state: one attribute dictionary (parameters,
    buffers, children, plain attributes), so that state_dict() has exactly the original keys,
    `.to()`, `.half()`, `train()` act on both and nothing is registered twice. A plain tuple
    holds the original, so that it is not a registered child."""

    def __init__(self, original):
        super().__init__()
        object.__setattr__(self, "__dict__", original.__dict__)
        self._original = (original,)

    def __setstate__(self, state):
        # copy.deepcopy and pickle rebuild the original with a dictionary of its own (a copy
        # of the entries): share it again, so that the copy keeps one state too.
        super().__setstate__(state)
        object.__setattr__(self._original[0], "__dict__", self.__dict__)


class _Rope(_Shared):
    """A RoPE module (see _looks_like_rope) whose tables carry where they came from: see the
    module docstring (RoPE)."""

    def __init__(self, rope):
        super().__init__(rope)
        self._tables = {}          # (rows, inv_freq's state, base) -> SamelAttention's reading

    def extra_repr(self):
        return f"{type(self._original[0]).__name__}, its tables marked"

    def forward(self, *args, **kwargs):
        return self._original[0].forward(*args, **kwargs)

    def forward_from_seq_len(self, seq_len):
        out = self._original[0].forward_from_seq_len(seq_len)
        table = out[0] if isinstance(out, tuple) and out else None
        if isinstance(table, torch.Tensor) and not _capturing():
            f = self.inv_freq
            key = (seq_len, f._version, f.data_ptr(), f.dtype, f.device,
                   getattr(self, "interpolation_factor", None))
            table._dswa_made = (self._tables, key, table._version)
        return out


def _read_table(freqs, base):
    """(position of the table's row 0, its rot / 2 frequencies) or why the fused block does
    not compute this table, read from the device (one host sync). The first position from
    column 0 (its step from row to row); each frequency from the last row, fp32(row /
    position), and the few float32 values around it, keeping per column the one that gives
    the whole column exactly (from position 0, row 1 is the frequencies themselves); a one-row
    table at position 0 has angles 0 whatever the frequencies (base's are taken)."""
    rows, rot = freqs.shape
    c = rot // 2
    with torch.no_grad():
        f = freqs.detach()
        base_freq = torch.tensor(_core.rope_freq(rot, base, None), device=f.device)
        step = f[1, 0] - f[0, 0] if rows > 1 else base_freq[0]
        p0 = torch.where(step != 0, (f[0, 0] / step).round(), torch.zeros_like(step))
        pos = p0 + torch.arange(rows, device=f.device, dtype=torch.float32)
        last = pos[-1]
        guess = torch.where(last > 0, f[-1, :c] / last, base_freq)
        cands, up, down = [guess], guess, guess
        for _ in range(3):
            up = torch.nextafter(up, torch.full_like(up, float("inf")))
            down = torch.nextafter(down, torch.full_like(down, float("-inf")))
            cands += [up, down]
        C = torch.stack(cands)                                  # (7, c)
        want = pos[None, :, None] * C[:, None, :]               # (7, rows, c), fp32
        scale = want.abs() + 1
        errs = torch.maximum((f[None, :, :c] - want).abs() / scale,
                             (f[None, :, c:] - want).abs() / scale).amax(1)   # (7, c)
        best, k = errs.min(0)
        freq = C[k, torch.arange(c, device=f.device)]
        got = torch.cat([torch.stack([p0, best.max()]), freq]).tolist()   # one host sync
    first, err, freq = got[0], got[1], tuple(got[2:])
    if not err <= _ANGLE_TOL:
        result = (f"rotary_pos_emb is not float32 positions {first:g} + i times fixed "
                  f"frequencies: its angles differ from the nearest such table by up to "
                  f"{err:.2g} (relative; interpolation that rounds otherwise, or positions "
                  "not counting up by one)")
    elif not 0 <= first <= 2**31 - rows:
        result = (f"rotary_pos_emb's first position is {first:g}: the fused block takes "
                  "positions >= 0 that fit int32")
    elif not all(_math.isfinite(x) for x in freq):
        result = "rotary_pos_emb's frequencies are not finite"
    else:
        result = (int(first), freq)
    return result


class SamelAttention(_Shared):
    """attn with its attention core fused where the call allows (see the module docstring).

    attn: the upstream-shaped module; it and this module share one state afterwards. heads:
    default to_qkv.out_features // (5 * D), D = q_norm.gamma's length (checked against
    attn.num_heads / attn.heads when present). base: RoPE's frequencies where a table cannot
    give them (a one-row table; upstream's RotaryEmbedding default): the fused block otherwise
    takes them from the table it is called with. math: as dswa.samel_attention's (None:
    torch's float32 precision at each call)."""

    def __init__(self, attn, *, heads=None, base=10000.0, math=None):
        if not looks_like_attention(attn):
            raise ValueError(f"dswa.samel: {type(attn).__name__} is not an upstream-shaped "
                             "Attention (differential, DyT qk-norm): it needs to_qkv (a Linear "
                             "without bias, 5 * H * D outputs), q_norm and k_norm with alpha, "
                             "gamma and beta, and to_out")
        if isinstance(attn, SamelAttention):
            attn = attn._original[0]
        D = attn.q_norm.gamma.numel()
        out = attn.to_qkv.out_features
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
                k = getattr(getattr(attn, n), p).numel()
                if k != D:
                    raise ValueError(f"dswa.samel: {n}.{p} has {k} elements: expected D = {D} "
                                     "(q_norm.gamma's length)")
        # Settings the call does not give, checked now (the window is checked per call: any
        # pair of int32 >= 0 is one the library runs).
        m = None if math is None else _core.options(D, 0, None, None, None, 1.0, math)[4]
        _core.rope_freq(D - D % 2, base, None)           # refuses a bad base
        base = float(base)
        p = _lib.lib().dswa_samel_problem_default(0, 1, 1)
        p.head_dim, p.math, p.rope_base, p.rot_dims = D, m or 0, base, D - D % 2
        _lib.check(_lib.lib().dswa_samel_validate(ctypes.byref(p), None, None))
        cuda = bool(_lib.lib().dswa_cuda_available())   # a library call: not per forward
        super().__init__(attn)     # one state with the original (see the module docstring)
        self.heads, self.head_dim, self._math, self._base = H, D, m, base
        self._cuda = cuda
        self._rope_seen = None     # (rot dims, table's first position, freq), verified eagerly
        self._warned = set()
        self._seen = None
        self.refresh()

    def extra_repr(self):
        return f"heads={self.heads}, head_dim={self.head_dim}, fused"

    def _norm_tensors(self):
        return [getattr(getattr(self, n), p) for n in ("q_norm", "k_norm") for p in _NORM_PARAMS]

    def _versions(self):
        return tuple((t._version, t.data_ptr(), t.device, t.dtype) for t in self._norm_tensors())

    def _stale(self, grad):
        """Whether what refresh() read is out of date: any norm parameter changed, or when
        autograd records the call (gamma and beta are then passed as they are) an alpha."""
        v = self._versions()
        return (v[0], v[3]) != (self._seen[0], self._seen[3]) if grad else v != self._seen

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

    # ---- what the call asks for ----------------------------------------------------------
    def _unfused(self, x, context, rotary_pos_emb_k, causal, block_mask, score_mod, window,
                 padding_mask, varlen_metadata):
        """(key, reason) when the fused block does not compute this call, else None."""
        for name, v in (("context", context), ("rotary_pos_emb_k", rotary_pos_emb_k),
                        ("flex_attention_block_mask", block_mask),
                        ("flex_attention_score_mod", score_mod),
                        ("padding_mask", padding_mask), ("varlen_metadata", varlen_metadata)):
            if v is not None:
                return name, (f"{name} is given (the fused block is windowed self-attention "
                              "with none)")
        if window is None:
            return "window", ("flash_attn_sliding_window is None (full attention; the fused "
                              "block is windowed)")
        if not (isinstance(window, (list, tuple)) and len(window) == 2 and
                all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w < 2**31
                    for w in window)):
            return "window", (f"flash_attn_sliding_window = {window!r}: the fused block takes "
                              "[left, right], two integers >= 0")
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[1] < 1:
            return "x", (f"x has shape {tuple(getattr(x, 'shape', ()))}: the fused block takes "
                         "(B, N, dim) with N >= 1")
        n = x.shape[1]
        c = getattr(self, "causal", False) if causal is None else causal
        if c and n > 1:
            return "causal", "causal attention (the fused block's window is two-sided)"
        if x.dtype not in _DTYPES:
            return "dtype", (f"x.dtype = {x.dtype}: the fused block runs float32, float16 and "
                             "bfloat16")
        if x.device.type not in ("cpu", "cuda") or x.is_cuda and not self._cuda:
            return "device", f"x is on {x.device}, where this build of libdswa does not run"
        if self.to_qkv.weight.device != x.device or self.q_norm.gamma.device != x.device:
            return "device", (f"x is on {x.device} but the module's weights on "
                              f"{self.to_qkv.weight.device}")
        return None

    def _rotary(self, rotary_pos_emb, n):
        """(rot_dims, pos_offset, freq) of upstream's table for the fused block, or (None,
        (key, reason), None)."""
        if rotary_pos_emb is None:
            return 0, 0, ()                  # upstream rotates nothing
        try:
            freqs, _ = rotary_pos_emb        # upstream ignores the scale
        except (TypeError, ValueError):
            return None, ("rotary", "rotary_pos_emb is not a pair (freqs, scale)"), None
        if not isinstance(freqs, torch.Tensor) or freqs.dim() != 2:
            return None, ("rotary", f"rotary_pos_emb's freqs has shape "
                                    f"{tuple(getattr(freqs, 'shape', ()))}: the fused block "
                                    "takes (positions, rot dims)"), None
        rows, rot = freqs.shape
        if rows < n or rot % 2 or rot > self.head_dim or freqs.dtype != torch.float32:
            return None, ("rotary", f"rotary_pos_emb's freqs is {tuple(freqs.shape)} "
                                    f"{freqs.dtype}: the fused block computes float32 angles "
                                    f"for at least N = {n} rows of an even number of dims <= "
                                    f"{self.head_dim}"), None
        if freqs.device != self.to_qkv.weight.device:
            return None, ("rotary", f"rotary_pos_emb's freqs is on {freqs.device}, not on the "
                                    "module's device"), None
        if rot == 0:
            return 0, 0, ()
        if _capturing():
            seen = self._rope_seen
            if seen is None or seen[0] != rot:
                return None, ("rotary-unverified",
                              "rotary_pos_emb is not read inside torch.compile or CUDA-graph "
                              "capture (a host sync) and no table of "
                              f"{rot} dims was verified in eager mode: run the model once "
                              "eagerly first (torch.compiler.set_stance('force_eager'))"), None
            first, freq = seen[1], seen[2]
        else:
            got = self._verify_table(freqs)
            if isinstance(got, str):
                return None, ("rotary", got), None
            first, freq = got
            self._rope_seen = (rot, first, freq)
        return rot, first + rows - n, freq      # upstream uses the table's last n rows

    def _verify_table(self, freqs):
        """_read_table's answer for this table, read once: the same table object unchanged
        since the last call (any module's), or one its RoPE module made before with the same
        length and inv_freq (a _Rope's mark), reuses the reading."""
        global _last_table
        key = (freqs._version, tuple(freqs.shape), self._base)
        if _last_table is not None and _last_table[0]() is freqs and _last_table[1:4] == key:
            return _last_table[4]
        made = getattr(freqs, "_dswa_made", None)     # (its RoPE module's readings, key, version)
        if made is not None and made[2] == freqs._version:
            readings, k = made[0], (made[1], self._base)
            result = readings.get(k)
            if result is None:
                result = readings[k] = _read_table(freqs, self._base)
        else:
            result = _read_table(freqs, self._base)
        _last_table = (weakref.ref(freqs), *key, result)
        return result

    def forward(self, x, context=None, rotary_pos_emb=None, rotary_pos_emb_k=None, causal=None,
                flex_attention_block_mask=None, flex_attention_score_mod=None,
                flash_attn_sliding_window=None, padding_mask=None, varlen_metadata=None):
        """Upstream Attention's forward (same arguments): fused where the call allows, else
        the original forward (see the module docstring)."""
        why = self._unfused(x, context, rotary_pos_emb_k, causal, flex_attention_block_mask,
                            flex_attention_score_mod, flash_attn_sliding_window, padding_mask,
                            varlen_metadata)
        if why is None:
            rot, pos, freq = self._rotary(rotary_pos_emb, x.shape[1])
            if rot is None:
                why = pos
        # Training (autograd records the call): the op's autograd gives x, gamma and beta their
        # gradients; alphas that require grad go in as tensors (read by the kernels in place).
        grad = why is None and torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in self.parameters()))
        alphas = None
        if grad and any(getattr(self, n).alpha.requires_grad for n in ("q_norm", "k_norm")):
            a = [getattr(self, n).alpha for n in ("q_norm", "k_norm")]
            if any(t.numel() != 1 for t in a):
                why = ("alpha", "a norm's alpha has more than one element (DyT's is a scalar)")
            else:
                alphas = [t.reshape(1).to(torch.float32) for t in a]
        if why is None and alphas is None and not torch.compiler.is_compiling() and \
                self._stale(grad):
            if _capturing():
                why = ("norms", "the norms changed since they were last read, inside a CUDA-graph "
                                "capture: call refresh() (or run once eagerly) before capturing")
            else:
                self.refresh()
        if why is not None:
            if why[0] not in self._warned:
                self._warned.add(why[0])
                _warn(f"dswa.samel: {type(self._original[0]).__name__} runs its own forward: "
                      f"{why[1]}")
            kw = {k: v for k, v in (
                ("context", context), ("rotary_pos_emb", rotary_pos_emb),
                ("rotary_pos_emb_k", rotary_pos_emb_k), ("causal", causal),
                ("flex_attention_block_mask", flex_attention_block_mask),
                ("flex_attention_score_mod", flex_attention_score_mod),
                ("flash_attn_sliding_window", flash_attn_sliding_window),
                ("padding_mask", padding_mask), ("varlen_metadata", varlen_metadata))
                if v is not None}
            return self._original[0].forward(x, **kw)
        wl, wr = flash_attn_sliding_window
        m = self._math if self._math is not None else \
            _lib.MATH[_core.float32_math(None, x)]
        settings = (self.heads, wl, wr, 1 / _math.sqrt(self.head_dim), 1.0, rot, list(freq),
                    pos, m)
        if grad:      # the parameters themselves (float32 views or differentiable casts)
            weights = [getattr(getattr(self, n), p).reshape(-1).to(torch.float32).contiguous()
                       for n in ("q_norm", "k_norm") for p in ("gamma", "beta")]
        else:
            weights = self._weights
        if alphas is not None:
            out = torch.ops.dswa.samel_attention_tensor_alpha(self.to_qkv(x), *weights, *alphas,
                                                              *settings)
        else:
            out = torch.ops.dswa.samel_attention(self.to_qkv(x), *weights, self._q_alpha,
                                                 self._k_alpha, *settings)
        out = self.to_out(out)
        if getattr(self, "feat_scale", False):
            # upstream's rescaling after to_out (without padding mask): mean over positions
            out_dc = out.mean(dim=-2, keepdim=True)
            out_hf = out - out_dc
            out = out + self.lambda_dc * out_dc + self.lambda_hf * out_hf
        return out


def swap_attention(module, **settings):
    """Replaces, in place, every upstream-shaped Attention inside `module` (see
    looks_like_attention) by a SamelAttention built from it with `settings`, and wraps the
    RoPE modules inside it (see the module docstring: RoPE); returns the module, or the new
    SamelAttention when `module` itself is one. ValueError when there is none."""
    if isinstance(module, SamelAttention):
        return module
    if looks_like_attention(module):
        return SamelAttention(module, **settings)
    ropes = []
    if not _swap_inside(module, settings, ropes):
        raise ValueError(f"dswa.samel: no upstream-shaped Attention in {type(module).__name__} "
                         "(to_qkv without bias, 5 * H * D outputs, q_norm/k_norm with alpha, "
                         "gamma, beta, to_out)")
    for parent, name, rope in ropes:
        setattr(parent, name, _Rope(rope))
    return module


def _swap_inside(module, settings, ropes):
    """swap_attention on module's children, recursively: how many attentions it holds; the
    RoPE modules not yet wrapped go to `ropes` as (parent, name, module)."""
    n = 0
    for name, child in list(module.named_children()):
        if isinstance(child, SamelAttention):
            n += 1
        elif looks_like_attention(child):
            setattr(module, name, SamelAttention(child, **settings))
            n += 1
        elif _looks_like_rope(child) and not isinstance(child, _Rope):
            ropes.append((module, name, child))
        else:
            n += _swap_inside(child, settings, ropes)
    return n
