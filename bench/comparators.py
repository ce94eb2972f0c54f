"""Comparators for dswa: a float64 reference, a block-tiled Triton kernel, FlexAttention over
2H heads plus the subtraction, the copy-bandwidth floor, and a timer (SPEC sections 2, 3, 5).

Layouts: q and k are (B, N, 2H, D) (pair 0 = heads [0, H), pair 1 = heads [H, 2H)); v is the
same, or (B, N, H, D) when V is shared by both pairs; every output is (B, N, H, D).
Set TRITON_INTERPRET=1 before importing this module to run the Triton kernel on CPU tensors.
"""
import statistics

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the reference, Flex and the floor still work without Triton
    triton = tl = None


def make_inputs(B, N, H, D, dtype, shared_v, device, seed=0):
    """Random normal q, k (B, N, 2H, D) and v (B, N, 2H, D), or (B, N, H, D) when shared_v.
    Shared V reaches each comparator as the flag `shared_v`: the Triton kernel and dswa read
    it with a pair stride of 0, Flex gets it duplicated to 2H heads (a copy, see flex())."""
    g = torch.Generator(device=device).manual_seed(seed)
    def rnd(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    return rnd(B, N, 2 * H, D), rnd(B, N, 2 * H, D), rnd(B, N, H if shared_v else 2 * H, D)


def sample_rows(N, count=256, seed=0, edge=16):
    """Sorted query rows: the first and last `edge` (where the window is clipped) plus random."""
    if N <= count:
        return torch.arange(N)
    edges = torch.cat([torch.arange(edge), torch.arange(N - edge, N)])
    g = torch.Generator().manual_seed(seed)
    mid = edge + torch.randperm(N - 2 * edge, generator=g)[: count - 2 * edge]
    return torch.cat([edges, mid]).sort().values


def ref64(q, k, v, H, WL, WR, scale, lam, shared_v, rows=None, chunk=512):
    """Float64 reference on q's device: (B, R, H, D) for the query rows `rows` (all if None).
    Each chunk of rows gathers its band of WL + WR + 1 keys explicitly."""
    B, N = q.shape[:2]
    dev = q.device
    rows = torch.arange(N, device=dev) if rows is None else torch.as_tensor(rows, device=dev)
    off = torch.arange(-WL, WR + 1, device=dev)
    outs = []
    for r in rows.split(chunk):
        j = r[:, None] + off                                   # (R, W) key positions
        ok = (j >= 0) & (j < N)
        j = j.clamp(0, N - 1)
        qr, kj, vj = q[:, r].double(), k[:, j].double(), v[:, j].double()
        if shared_v:
            vj = torch.cat([vj, vj], dim=3)                    # (B, R, W, 2H, D)
        s = torch.einsum("brhd,brwhd->brhw", qr, kj) * scale
        s = s.masked_fill(~ok[None, :, None, :], float("-inf"))
        a = torch.einsum("brhw,brwhd->brhd", torch.softmax(s, dim=-1), vj)
        outs.append(a[:, :, :H] - lam * a[:, :, H:])
    return torch.cat(outs, dim=1)


def rel_err(out, ref):
    """Relative Frobenius error ||out - ref|| / ||ref|| in float64."""
    out = out.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def min_bytes(B, N, H, D, itemsize, shared_v):
    """SPEC section 3: Q and K for 2H heads, V for 2H heads (H when shared), O for H heads."""
    return B * N * H * D * itemsize * (2 + 2 + (1 if shared_v else 2) + 1)


def v_pair_strides(v, H, shared_v):
    """(pair, head) element strides of v: pair stride 0 when both pairs read the same V."""
    return (0 if shared_v else H * v.stride(2)), v.stride(2)


# ---- Triton block-tiled kernel (SPEC section 5) -------------------------------------------
if triton is not None:
    @triton.jit
    def _pair_attention(Q, K, V, q_off, k_off, v_off, m_ok, n_ok, band, scale,
                        PREC: tl.constexpr):
        """softmax(Q K^T * scale over the band) V for one pair: (BLOCK_M, BLOCK_D), fp32."""
        q = tl.load(Q + q_off, mask=m_ok, other=0.0)
        k = tl.load(K + k_off, mask=n_ok, other=0.0)
        v = tl.load(V + v_off, mask=n_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
        s = tl.where(band, s, float("-inf"))
        p = tl.exp(s - tl.max(s, axis=1)[:, None])
        l = tl.sum(p, axis=1)
        a = tl.dot(p.to(v.dtype), v, input_precision=PREC)
        return a / l[:, None]

    @triton.jit
    def _dswa_block_kernel(Q, K, V, O, N, scale, lam,
                           sqb, sqn, sqp, sqh, sqd, skb, skn, skp, skh, skd,
                           svb, svn, svp, svh, svd, sob, son, soh, sod,
                           D: tl.constexpr, WL: tl.constexpr, WR: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_KV: tl.constexpr,
                           BLOCK_D: tl.constexpr, PREC: tl.constexpr):
        pid_m, h, b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_m * BLOCK_M - WL + tl.arange(0, BLOCK_KV)   # keys start WL before block
        offs_d = tl.arange(0, BLOCK_D)
        d_ok = offs_d[None, :] < D
        m_ok = (offs_m[:, None] < N) & d_ok
        n_ok = (offs_n[:, None] >= 0) & (offs_n[:, None] < N) & d_ok
        band = ((offs_n[None, :] >= offs_m[:, None] - WL)
                & (offs_n[None, :] <= offs_m[:, None] + WR)
                & (offs_n[None, :] >= 0) & (offs_n[None, :] < N))
        q_off = b * sqb + offs_m[:, None] * sqn + h * sqh + offs_d[None, :] * sqd
        k_off = b * skb + offs_n[:, None] * skn + h * skh + offs_d[None, :] * skd
        v_off = b * svb + offs_n[:, None] * svn + h * svh + offs_d[None, :] * svd
        a0 = _pair_attention(Q, K, V, q_off, k_off, v_off, m_ok, n_ok, band, scale, PREC)
        a1 = _pair_attention(Q, K, V, q_off + sqp, k_off + skp, v_off + svp, m_ok, n_ok,
                             band, scale, PREC)
        out = a0 - lam * a1
        o_off = b * sob + offs_m[:, None] * son + h * soh + offs_d[None, :] * sod
        tl.store(O + o_off, out.to(O.dtype.element_ty), mask=m_ok)


def _next_pow2(x):
    return 1 << (max(int(x), 1) - 1).bit_length()


def triton_block_tiled(q, k, v, H, WL, WR, scale, lam, shared_v, out=None, block_m=16,
                       num_warps=4, precision="tf32"):
    """The block-tiled MMA kernel: program (16-query block, output head, batch); both pairs
    per program; TF32 tl.dot for fp32 inputs (precision="ieee" for full fp32). Any strides;
    shared V is read with a pair stride of 0. Returns out (B, N, H, D)."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    B, N, _, D = q.shape
    if out is None:
        out = torch.empty(B, N, H, D, device=q.device, dtype=q.dtype)
    svp, svh = v_pair_strides(v, H, shared_v)
    grid = (triton.cdiv(N, block_m), H, B)
    _dswa_block_kernel[grid](
        q, k, v, out, N, float(scale), float(lam),
        q.stride(0), q.stride(1), H * q.stride(2), q.stride(2), q.stride(3),
        k.stride(0), k.stride(1), H * k.stride(2), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), svp, svh, v.stride(3),
        out.stride(0), out.stride(1), out.stride(2), out.stride(3),
        D=D, WL=WL, WR=WR, BLOCK_M=block_m, BLOCK_KV=max(16, _next_pow2(block_m + WL + WR)),
        BLOCK_D=max(16, _next_pow2(D)), PREC=precision, num_warps=num_warps)
    return out


# ---- FlexAttention over 2H heads, then the subtraction ------------------------------------
_flex_compiled = {}   # dtype -> torch.compile(flex_attention)
_flex_masks = {}      # (N, WL, WR, device) -> BlockMask


def band_block_mask(N, WL, WR, device, block=128):
    """The BlockMask that create_block_mask(mask_mod, None, None, N, N, device, block) gives
    for the band q - WL <= kv <= q + WR, built from block ranges so that no N x N mask is ever
    materialised (that would be 4.8 G elements at N = 69,632). Every touched block is partial
    (the mask_mod is applied inside it)."""
    from torch.nn.attention.flex_attention import BlockMask

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx >= q_idx - WL) & (kv_idx <= q_idx + WR)

    nb = -(-N // block)
    lo = torch.arange(nb, device=device) * block
    hi = torch.clamp(lo + block, max=N) - 1
    touched = (lo[None, :] <= hi[:, None] + WR) & (hi[None, :] >= lo[:, None] - WL)  # [q, kv]
    num = touched.sum(-1, dtype=torch.int32)
    idx = torch.argsort((~touched).int(), dim=-1, stable=True).to(torch.int32)
    return BlockMask.from_kv_blocks(num[None, None], idx[None, None].contiguous(),
                                    BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(N, N))


def flex(q, k, v, H, WL, WR, scale, lam, shared_v, compile=True):
    """FlexAttention over the 2H heads with a band block mask, inputs as (B, 2H, N, D) views,
    then out[:, :H] - lam * out[:, H:] in one kernel (fp32 opmath). Shared V needs a real copy
    to 2H heads (Flex's GQA maps query head g to kv head g // group, not g % H), and that copy
    is part of this call. Returns (B, N, H, D) (a transposed view)."""
    from torch.nn.attention.flex_attention import flex_attention
    N = q.shape[1]
    key = (N, WL, WR, str(q.device))
    if key not in _flex_masks:
        _flex_masks[key] = band_block_mask(N, WL, WR, q.device)
    fa = flex_attention
    if compile:
        if q.dtype not in _flex_compiled:
            _flex_compiled[q.dtype] = torch.compile(flex_attention)
        fa = _flex_compiled[q.dtype]
    if shared_v:
        v = torch.cat([v, v], dim=2)
    o = fa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
           block_mask=_flex_masks[key], scale=scale)
    return torch.sub(o[:, :H], o[:, H:], alpha=lam).transpose(1, 2)


def raise_compile_limits():
    """Flex is compiled for every (dtype, N): lift Dynamo's recompile limit so that it never
    silently falls back to eager (which would materialise N x N scores)."""
    import torch._dynamo
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))


# ---- floor and timing ----------------------------------------------------------------------
def copy_bandwidth(device="cuda", nbytes=2 << 30, reps=10):
    """Device-to-device copy of `nbytes`, in bytes/s counting bytes read plus written;
    median of `reps` CUDA-event timings after two warm-up copies."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        dst.copy_(src)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e-3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / statistics.median(times)


def timeit(fn, warmup=25, rep=200):
    """Median milliseconds of fn(): triton.testing.do_bench (flushes L2 between calls), else
    CUDA events with the same L2 flush, warmup and rep given in ms as do_bench takes them."""
    if triton is not None:
        try:
            return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep,
                                                 return_mode="median"))
        except TypeError:
            pass
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(5):
        fn()
    e1.record()
    e1.synchronize()
    est = max(e0.elapsed_time(e1) / 5, 1e-3)
    for _ in range(max(1, int(warmup / est))):
        fn()
    times = []
    for _ in range(max(5, int(rep / est))):
        flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        times.append((e0, e1))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in times)
