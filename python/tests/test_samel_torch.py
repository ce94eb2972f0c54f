"""The fused SAME-L block from Python: dswa.samel_attention on numpy arrays (always), the
torch op dswa::samel_attention(_out) on the CPU (eager, torch.compile, opcheck) and on the GPU
(every dtype, torch.compile, CUDA-graph capture), and the drop-in dswa.samel.SamelAttention
against the upstream-shaped module (samel_ref.Attention), all against the float64 reference
of samel_ref.py. Outputs are poisoned (NaN) before the library writes them. Skipped visibly
without torch / a CUDA device."""
import _util
from _util import LONG, np, raises, rel_err, torch
from samel_ref import samel_reference

import dswa

TOL_CPU = {"float32": 2e-5, "float16": 3e-3, "bfloat16": 2e-2}
TOL_CUDA = {"float32": 5e-3, "float16": 4e-3, "bfloat16": 2.5e-2}
DTYPES = ("float32", "float16", "bfloat16")
RNG = np.random.default_rng(11)
# SAME-L's frequencies as a model cast whole to float16 holds them (upstream's inv_freq,
# rounded): the fused block takes them as they are.
OWN_FREQ = (1.0 / 10000 ** (np.arange(16) / 16)).astype(np.float16).astype(np.float32)
BASE_FREQ = list(dswa._lib.rope_frequencies(32, 10000.0))   # the ops' freq for base 10000


def need_torch():
    _util.need_torch("custom_op")


def need_cuda():
    _util.need_cuda("custom_op")


def norms_np(D, seed=0):
    r = np.random.default_rng(seed)
    f = lambda a: np.asarray(a, np.float32)  # noqa: E731
    return ((f(0.3 + r.random()), f(1 + 0.3 * r.standard_normal(D)), f(0.2 * r.standard_normal(D))),
            (f(0.3 + r.random()), f(1 + 0.3 * r.standard_normal(D)), f(0.2 * r.standard_normal(D))))


def call(x, qn, kn, **kw):
    return dswa.samel_attention(x, qn[1], qn[2], kn[1], kn[2], q_alpha=float(qn[0]),
                                k_alpha=float(kn[0]), **kw)


def check(out, x, qn, kn, H, tol, dtype="float32", **kw):
    ref = samel_reference(x, qn, kn, H, dtype=dtype, **kw)
    err = rel_err(np.asarray(out.reshape(ref.shape) if not hasattr(out, "cpu")
                             else out.reshape(ref.shape).float().cpu()), ref)
    assert err < tol, f"relative error {err:.3e} >= {tol:.1e} ({dtype}, {kw})"
    return err


# ---- numpy ------------------------------------------------------------------------------------
def test_numpy_cases():
    """B > 1, N below the window and not a multiple of 64, windows, scale, lambda, RoPE's
    rotated dims, base and position offset, float16."""
    cases = [dict(B=2, N=70, H=2, D=64), dict(B=3, N=9, H=1, D=64),
             dict(B=1, N=50, H=3, D=16, window_left=3, window_right=11, rot_dims=8),
             dict(B=2, N=33, H=2, D=32, rot_dims=0, scale=0.3, lam=0.5),
             dict(B=1, N=40, H=1, D=64, rot_dims=64, base=500.0, pos_offset=100000),
             dict(B=1, N=40, H=2, D=64, pos_offset=3000, freq=OWN_FREQ),
             dict(B=2, N=30, H=1, D=64, rot_dims=16, freq=RNG.random(8) * 2),
             dict(B=2, N=1, H=2, D=64, window=0)]
    for dtype in ("float32", "float16"):
        for c in cases:
            c = dict(c)
            B, N, H, D = (c.pop(k) for k in "BNHD")
            x = RNG.standard_normal((B, N, 5 * H * D)).astype(dtype)
            qn, kn = norms_np(D, N)
            out = call(x, qn, kn, **c)
            assert out.shape == (B, N, H * D) and out.dtype == x.dtype
            w = c.pop("window", 17)
            check(out, x, qn, kn, H, TOL_CPU[dtype], dtype, window_left=c.pop("window_left", w),
                  window_right=c.pop("window_right", w), **c)


def test_numpy_views_and_out():
    """x a strided view (every other row of a wider array; (B, N, 5, H, D) form); out= in both
    shapes with any strides, poisoned first."""
    B, N, H, D = 2, 45, 2, 64
    qn, kn = norms_np(D)
    big = RNG.standard_normal((B, 2 * N, 5 * H * D + 8)).astype(np.float32)
    x = big[:, ::2, 4:4 + 5 * H * D]
    assert not x.flags.c_contiguous
    check(call(x, qn, kn), x, qn, kn, H, TOL_CPU["float32"])
    x5 = np.lib.stride_tricks.as_strided(x, (B, N, 5, H, D), x.strides[:2] + (H * D * 4, D * 4, 4))
    check(call(x5, qn, kn), x, qn, kn, H, TOL_CPU["float32"])
    out = np.full((B, H, N, D), np.nan, np.float32).transpose(0, 2, 1, 3)
    assert call(x, qn, kn, out=out, pos_offset=3) is out
    check(out, x, qn, kn, H, TOL_CPU["float32"], pos_offset=3)
    wide = np.full((B, N, 2 * H * D), np.nan, np.float32)
    call(x, qn, kn, out=wide[:, :, ::2])
    check(wide[:, :, ::2], x, qn, kn, H, TOL_CPU["float32"])
    assert np.isnan(wide[:, :, 1::2]).all()


def test_numpy_nan_inf():
    """As the op: a NaN in v reaches exactly the outputs whose window holds it; an inf in q or
    k does not spread (DyT's tanh saturates), and the result is the reference's."""
    B, N, H, D = 1, 60, 2, 64
    qn, kn = norms_np(D)
    x = RNG.standard_normal((B, N, 5 * H * D)).astype(np.float32)
    x[0, 30, 2 * H * D + D + 5] = np.nan                      # v, head 1, position 30
    out = call(x, qn, kn, window_left=4, window_right=6).reshape(B, N, H, D)
    bad = np.isnan(out[0]).any(-1)                           # (N, H)
    assert bad[:, 1].tolist() == [24 <= i <= 34 for i in range(N)], bad[:, 1]
    assert not bad[:, 0].any()
    x = RNG.standard_normal((B, N, 5 * H * D)).astype(np.float32)
    x[0, 10, 7] = np.inf                                      # q, head 0
    x[0, 11, 4 * H * D + 3] = -np.inf                         # k_diff, head 0
    out = call(x, qn, kn)
    assert np.isfinite(out).all()
    check(out, x, qn, kn, H, TOL_CPU["float32"])


def test_numpy_refusals():
    B, N, H, D = 1, 20, 2, 64
    x = RNG.standard_normal((B, N, 5 * H * D)).astype(np.float32)
    qn, kn = norms_np(D)
    g = qn[1]
    a = dict(q_alpha=0.5, k_alpha=0.5)
    f = dswa.samel_attention
    raises(ValueError, "q_gamma.dtype = float64", f, x, g.astype(np.float64), g, g, g, **a)
    raises(ValueError, "k_beta has shape (32,)", f, x, g, g, g, g[:32], **a)
    raises(ValueError, "expected (B, N, 5*H*D)", f, x[:, :, :600], g, g, g, g, **a)
    raises(ValueError, "heads = 3 but x", f, x, g, g, g, g, heads=3, **a)
    raises(ValueError, "out has shape", f, x, g, g, g, g, out=np.empty((1, 20, 64), np.float32),
           **a)
    raises(ValueError, "q_beta has stride 2", f, x, g, np.repeat(g, 2)[::2], g, g, **a)
    raises(ValueError, "rot_dims = 3: must be even", f, x, g, g, g, g, rot_dims=3, **a)
    raises(ValueError, "pos_offset = -1", f, x, g, g, g, g, pos_offset=-1, **a)
    raises(ValueError, "q_norm.alpha = nan", f, x, g, g, g, g, q_alpha=float("nan"), k_alpha=1)
    raises(ValueError, "window_left = -2", f, x, g, g, g, g, window_left=-2, **a)
    raises(ValueError, "q_alpha = 'x'", f, x, g, g, g, g, q_alpha="x", k_alpha=1)
    raises(TypeError, "keyword", f, x, g, g, g, g)          # the alphas have no default
    out = x[:, :, :H * D]
    raises(ValueError, "out: overlaps qkv", f, x, g, g, g, g, out=out, **a)


# ---- torch, CPU -------------------------------------------------------------------------------
def t_norms(qn, kn, device="cpu"):
    return [torch.from_numpy(np.asarray(w)).to(device) for w in (qn[1], qn[2], kn[1], kn[2])]


def test_torch_cpu():
    """Eager on the CPU, every dtype, x a slice of a wider projection, out= (both shapes)."""
    need_torch()
    B, N, H, D = 2, 37, 2, 64
    qn, kn = norms_np(D)
    w = t_norms(qn, kn)
    for dtype in DTYPES:
        big = torch.randn(B, N, 5 * H * D + 64, generator=torch.Generator().manual_seed(1))
        x = big.to(getattr(torch, dtype))[:, :, 64:]
        out = dswa.samel_attention(x, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]),
                                   pos_offset=5)
        assert out.shape == (B, N, H * D) and out.dtype == x.dtype and out.is_contiguous()
        check(out, x, qn, kn, H, TOL_CPU[dtype], dtype, pos_offset=5)
        o4 = torch.full((B, H, N, D), float("nan"), dtype=x.dtype).transpose(1, 2)
        torch.ops.dswa.samel_attention_out(x, *w, o4, float(qn[0]), float(kn[0]), H, 17, 17,
                                           0.125, 1.0, 32, BASE_FREQ, 5, 0)
        check(o4, x, qn, kn, H, TOL_CPU[dtype], dtype, pos_offset=5)
    raises(ValueError, "q_gamma is a numpy.ndarray", dswa.samel_attention, x, qn[1], *w[1:],
           q_alpha=1, k_alpha=1)
    raises(ValueError, "q_gamma.dtype = torch.float16", dswa.samel_attention, x,
           w[0].half(), *w[1:], q_alpha=1, k_alpha=1)


def test_torch_cpu_compile_opcheck():
    """torch.compile(fullgraph=True) around projection + fused op (aot_eager: the fake impl;
    inductor with DSWA_TEST_LONG=1), and torch.library.opcheck of both ops."""
    need_torch()
    B, N, H, D = 2, 30, 2, 64
    qn, kn = norms_np(D)
    w = t_norms(qn, kn)
    W = torch.randn(H * D, 5 * H * D) / (H * D) ** 0.5
    qa, ka = float(qn[0]), float(kn[0])     # host floats (float() of an array inside the
                                            # compiled function would be a symbolic value)

    def f(x, out):
        y = dswa.samel_attention(x @ W, *w, q_alpha=qa, k_alpha=ka)
        dswa.samel_attention(x @ W, *w, q_alpha=qa, k_alpha=ka, out=out)
        return y * 2
    x = torch.randn(B, N, H * D)
    torch._dynamo.reset()
    oc, oe = torch.full((B, N, H * D), float("nan")), torch.full((B, N, H * D), float("nan"))
    y = torch.compile(f, fullgraph=True, backend="inductor" if LONG else "aot_eager")(x, oc)
    assert torch.allclose(y, f(x, oe)) and torch.equal(oc, oe)
    check(y / 2, x @ W, qn, kn, H, TOL_CPU["float32"])
    if hasattr(torch.library, "opcheck"):
        args = (x @ W, *w, float(qn[0]), float(kn[0]), H, 17, 17, 0.125, 1.0, 32, BASE_FREQ, 0, 0)
        torch.library.opcheck(torch.ops.dswa.samel_attention.default, args)
        torch.library.opcheck(torch.ops.dswa.samel_attention_out.default,
                              args[:5] + (torch.empty(B, N, H * D),) + args[5:])


# ---- the drop-in --------------------------------------------------------------------------------
def upstream(dim=128, seed=0, device="cpu", dtype=torch.float32 if torch else None):
    """The upstream-shaped module (upstream_block.Attention: upstream's forward arguments) in
    dtype, random weights."""
    from upstream_block import Attention, randomize
    return randomize(Attention(dim), seed).to(device=device, dtype=dtype).eval()


def call_args(n, device="cpu", pos_offset=0):
    """Upstream's keyword arguments for SAME-L's call: the RoPE table (float32, 32 dims, base
    10000) for positions pos_offset .. pos_offset + n - 1 and the window [17, 17]."""
    from upstream_block import RotaryEmbedding
    rope = RotaryEmbedding(32).to(device)
    return dict(rotary_pos_emb=rope(torch.arange(pos_offset, pos_offset + n, device=device)),
                flash_attn_sliding_window=[17, 17])


def block_reference(m, x, dtype="float32", **kw):
    """float64 to_out(core(to_qkv(x))) with the module's weights (to_qkv's output as the
    module computes it in its dtype: the reference starts from the packed projection)."""
    from samel_ref import norms
    with torch.no_grad():
        qkv = m.to_qkv(x)
    qn, kn = norms(m)
    core = samel_reference(qkv, qn, kn, m.to_qkv.out_features // (5 * m.q_norm.gamma.numel()),
                           dtype=dtype, **kw)
    return core @ m.to_out.weight.detach().double().cpu().numpy().T


def test_dropin_cpu():
    """SamelAttention on the CPU: same state_dict keys (loads either way), the upstream
    module's output and the float64 reference; alpha changes seen in eager mode (the norm's
    version), refresh(); what it refuses to build; swap_attention inside a model;
    torch.compile."""
    need_torch()
    import dswa.samel
    torch.manual_seed(0)
    ref = upstream()
    fused = dswa.samel.swap_attention(upstream(seed=5))
    assert isinstance(fused, dswa.samel.SamelAttention)
    assert list(fused.state_dict()) == list(ref.state_dict())
    fused.load_state_dict(ref.state_dict())
    ref.load_state_dict(fused.state_dict())
    x = torch.randn(2, 45, 128)
    kw = call_args(45)
    with torch.no_grad():
        y, want = fused(x, **kw), ref(x, **kw)
    r = block_reference(ref, x)
    assert rel_err(y, r) < TOL_CPU["float32"] and rel_err(want, r) < TOL_CPU["float32"]
    with torch.no_grad():                                  # a changed alpha is seen
        ref.q_norm.alpha.mul_(1.7)
        fused.q_norm.alpha.mul_(1.7)
        ref.k_norm.gamma.add_(0.1)
        fused.k_norm.gamma.add_(0.1)
        y = fused(x, **kw)
    assert fused._q_alpha == float(ref.q_norm.alpha.detach())
    assert rel_err(y, block_reference(ref, x)) < TOL_CPU["float32"]
    with torch.no_grad():
        y = fused(x, **call_args(45, pos_offset=9))
    assert rel_err(y, block_reference(ref, x, pos_offset=9)) < TOL_CPU["float32"]
    raises(ValueError, "heads = 3 but to_qkv", dswa.samel.SamelAttention, upstream(), heads=3)
    raises(ValueError, "is not an upstream-shaped Attention", dswa.samel.SamelAttention,
           torch.nn.Linear(4, 4))
    raises(ValueError, "math = 'x'", dswa.samel.SamelAttention, upstream(), math="x")
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), upstream(), torch.nn.ModuleList(
        [upstream(seed=2)]))
    sd = model.state_dict()
    assert dswa.samel.swap_attention(model) is model
    assert isinstance(model[1], dswa.samel.SamelAttention) and \
        isinstance(model[2][0], dswa.samel.SamelAttention)
    model.load_state_dict(sd)
    raises(ValueError, "no upstream-shaped Attention", dswa.samel.swap_attention,
           torch.nn.Linear(3, 3))
    torch._dynamo.reset()
    c = torch.compile(fused, fullgraph=True, backend="inductor" if LONG else "aot_eager")
    with torch.no_grad():
        assert torch.allclose(c(x, **kw), fused(x, **kw), rtol=1e-5, atol=1e-6)


def test_dropin_cpu_dtypes():
    """A bfloat16 / float16 model: the norms' weights go to float32 buffers (not in the
    state_dict); against the upstream module in that dtype and the reference."""
    need_torch()
    import dswa.samel
    torch.manual_seed(0)
    for dtype in ("float16", "bfloat16"):
        dt = getattr(torch, dtype)
        ref = upstream(dtype=dt)
        fused = dswa.samel.SamelAttention(upstream(dtype=dt))
        fused.load_state_dict(ref.state_dict())
        assert list(fused.state_dict()) == list(ref.state_dict())
        x = torch.randn(2, 40, 128).to(dt)
        kw = call_args(40)
        with torch.no_grad():
            y, want = fused(x, **kw), ref(x, **kw)
        r = block_reference(ref, x, dtype)
        assert y.dtype == dt
        # the fused block rounds as the reference models; the upstream module in eager 16-bit
        # rounds after every op of DyT and RoPE (about 4x the fused block's error)
        assert rel_err(y, r) < {"float16": 1e-3, "bfloat16": 8e-3}[dtype], rel_err(y, r)
        assert rel_err(want, r) < {"float16": 4e-3, "bfloat16": 3e-2}[dtype], rel_err(want, r)


# ---- CUDA ----------------------------------------------------------------------------------------
def test_cuda_eager():
    need_cuda()
    B, N, H, D = 2, 300, 3, 64
    qn, kn = norms_np(D)
    w = t_norms(qn, kn, "cuda")
    for dtype in DTYPES:
        for kw in (dict(), dict(window_left=0, window_right=9, pos_offset=1000),
                   dict(window=40), dict(rot_dims=64, lam=0.5)):
            big = torch.randn(B, N, 5 * H * D + 64, device="cuda").to(getattr(torch, dtype))
            x = big[:, :, 64:]
            out = dswa.samel_attention(x, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]), **kw)
            assert out.device == x.device and out.dtype == x.dtype
            w_ = kw.pop("window", 17)
            kw.setdefault("window_left", w_)
            kw.setdefault("window_right", w_)
            check(out, x, qn, kn, H, TOL_CUDA[dtype], dtype, **kw)
    for n in (1, 9, 64, 65):                                  # N below the window, tile edges
        x = torch.randn(2, n, 5 * H * D, device="cuda", dtype=torch.bfloat16)
        o = torch.full((2, n, H * D), float("nan"), device="cuda", dtype=torch.bfloat16)
        dswa.samel_attention(x, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]), out=o)
        check(o, x, qn, kn, H, TOL_CUDA["bfloat16"], "bfloat16")
    x = torch.randn(2, 100, 5 * H * D, device="cuda")
    check(dswa.samel_attention(x, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]), math="fp32"),
          x, qn, kn, H, 1e-4)
    raises(ValueError, "is on cpu", dswa.samel_attention, x, w[0].cpu(), *w[1:], q_alpha=1,
           k_alpha=1)


def test_cuda_compile_graph():
    """torch.compile(fullgraph=True) of projection + op (aot_eager; inductor with
    DSWA_TEST_LONG=1), and a CUDA graph capturing the op,
    the out= variant and the drop-in; replayed on fresh inputs in the same buffers. A
    capture that sees a changed norm runs the original forward (test_samel_upstream.py)."""
    need_cuda()
    import dswa.samel
    B, N, H, D = 2, 400, 3, 64
    qn, kn = norms_np(D)
    w = t_norms(qn, kn, "cuda")
    for dtype in DTYPES:
        dt = getattr(torch, dtype)
        W = (torch.randn(H * D, 5 * H * D, device="cuda") / (H * D) ** 0.5).to(dt)

        qa, ka = float(qn[0]), float(kn[0])

        def f(x):
            return dswa.samel_attention(x @ W, *w, q_alpha=qa, k_alpha=ka) * 2   # exact
        x = torch.randn(B, N, H * D, device="cuda", dtype=dt)
        torch._dynamo.reset()
        # the op's own test compiles bfloat16 with inductor; here the fake impl's tracing
        # (aot_eager) is what is checked, inductor with DSWA_TEST_LONG=1
        backend = "inductor" if LONG else "aot_eager"
        y = torch.compile(f, fullgraph=True, backend=backend)(x)
        check(y / 2, x @ W, qn, kn, H, 2 * TOL_CUDA[dtype], dtype)

        ref = upstream(H * D, device="cuda", dtype=dt)
        fused = dswa.samel.SamelAttention(upstream(H * D, seed=3, device="cuda", dtype=dt))
        fused.load_state_dict(ref.state_dict())
        xp = torch.randn(B, N, 5 * H * D, device="cuda", dtype=dt)
        xm = torch.randn(B, N, H * D, device="cuda", dtype=dt)
        kw = call_args(N, "cuda")
        out2 = torch.full((B, N, H, D), float("nan"), device="cuda", dtype=dt)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():               # warm-up outside the capture
            dswa.samel_attention(xp, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]))
            fused(xm, **kw)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            out = dswa.samel_attention(xp, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]),
                                       lam=0.75)
            dswa.samel_attention(xp, *w, q_alpha=float(qn[0]), k_alpha=float(kn[0]), out=out2,
                                 pos_offset=77)
            ym = fused(xm, **kw)
        for seed in (1, 2):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            xp.copy_(torch.randn(xp.shape, device="cuda", generator=gen).to(dt))
            xm.copy_(torch.randn(xm.shape, device="cuda", generator=gen).to(dt))
            g.replay()
            torch.cuda.synchronize()
            check(out, xp, qn, kn, H, TOL_CUDA[dtype], dtype, lam=0.75)
            check(out2, xp, qn, kn, H, TOL_CUDA[dtype], dtype, pos_offset=77)
            err = rel_err(ym, block_reference(ref, xm, dtype))
            assert err < 2 * TOL_CUDA[dtype], (dtype, err)
            with torch.no_grad():
                err_up = rel_err(ref(xm, **kw), block_reference(ref, xm, dtype))
            assert err_up < 4 * TOL_CUDA[dtype], (dtype, err_up)
