"""The drop-in dswa.samel.SamelAttention inside an upstream-shaped SAME-L block
(upstream_block.py), called as upstream's TransformerBlock calls its attention: the swapped
block against the unswapped one and a float64 copy of it (the model cast whole to float32,
float16, bfloat16, as upstream casts it, its rotary inv_freq included; windows [17, 17] and
[5, 9]; with and without feat_scale; RoPE tables for positions 0 .. N-1, from an offset,
longer than N, of another base, interpolated); SAME-L's configurations (the windows
TransformerResamplingBlock computes, activation checkpointing, train and eval, torch.compile)
with no fallback; every fallback equal to the unswapped module exactly, with one warning per
reason; positional calls; the state (state_dict keys, one shared state, deepcopy / pickle);
torch.compile (fullgraph, the fused op in the graph); on CUDA also CUDA-graph capture.
Skipped visibly without torch / a CUDA device."""
import copy
import inspect
import pickle
import warnings

from _util import LONG, raises, torch
from test_samel_torch import need_cuda, need_torch

# Relative Frobenius errors against the float64 copy. The attention module's output: the
# fused block's documented error (CPU fp32; CUDA TF32; bfloat16 as the drop-in's own test),
# and for the unswapped module in bfloat16 its eager rounding after every op of DyT and RoPE.
# The block's branches, block(x) - x: float32 the same; bfloat16 dominated by the
# projections' rounding, so the swapped block must be within 1.5x the unswapped one's error.
TOL = {("cpu", "float32"): 2e-5, ("cpu", "float16"): 3e-3, ("cpu", "bfloat16"): 1e-2,
       ("cuda", "float32"): 5e-3, ("cuda", "float16"): 4e-3, ("cuda", "bfloat16"): 2.5e-2}
TOL_UNSWAPPED = {"float16": 6e-3, "bfloat16": 4e-2}
DTYPES = ("float32", "float16", "bfloat16")
DIM, B, N = 128, 2, 50


def blocks(dtype="float32", device="cpu", seed=1, **kw):
    """(swapped, unswapped, float64 unswapped) copies of one random block, cast whole to dtype
    as upstream casts a model (its rotary inv_freq rounded to 16 bits in float16 and
    bfloat16); the float64 copy holds the same frequencies."""
    import dswa.samel
    import upstream_block as U
    ref = U.randomize(U.TransformerBlock(DIM, **kw), seed).eval()
    ref64 = copy.deepcopy(ref).double().to(device)
    ref = ref.to(device=device, dtype=getattr(torch, dtype))
    ref64.rope.inv_freq = ref.rope.inv_freq.double()      # the model's own frequencies
    return dswa.samel.swap_attention(copy.deepcopy(ref)), ref, ref64


def rel(a, b, x):
    """relative Frobenius error of a - x against b - x (float64)."""
    a, b, x = (t.detach().double().cpu() for t in (a, b, x))
    return float((a - b).norm() / (b - x).norm())


def no_warnings():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("error")       # any fallback would raise its RuntimeWarning
    return w


def check_block(device, dtype, window, feat_scale, table):
    """The swapped block and its attention module against the float64 copy, the unswapped
    ones in dtype too; no fallback (no warning); another window is off by far more than the
    bound. table: (first position, rows) of the RoPE table passed, None: the block's own."""
    sw, ref, ref64 = blocks(dtype, device, feat_scale=feat_scale)
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(window[0] + 7 * window[1])
    x = torch.randn(B, N, DIM, generator=g).to(device=device, dtype=dt)
    rope = rope64 = None
    if table is not None:
        t = torch.arange(table[0], table[0] + table[1], device=device)
        rope, rope64 = ref.rope(t), ref64.rope(t)
    else:
        rope, rope64 = ref.rope.forward_from_seq_len(N), ref64.rope.forward_from_seq_len(N)
    case = (device, dtype, window, feat_scale, table)
    tol = TOL[(device, dtype)]
    zero = torch.zeros_like(x)
    with torch.no_grad():
        h = ref.pre_norm(x)
        w = no_warnings()
        try:
            ya = sw.self_attn(h, rotary_pos_emb=rope, flash_attn_sliding_window=window)
            y = sw(x, rotary_pos_emb=None if table is None else rope,
                   self_attention_flash_sliding_window=window)
        finally:
            w.__exit__(None, None, None)
        attn64 = ref64.self_attn
        wa = attn64(h.double(), rotary_pos_emb=rope64, flash_attn_sliding_window=window)
        ua = ref.self_attn(h, rotary_pos_emb=rope, flash_attn_sliding_window=window)
        oa = attn64(h.double(), rotary_pos_emb=rope64,
                    flash_attn_sliding_window=[window[0] // 2, window[1] // 2])
        want = ref64(x.double(), rotary_pos_emb=None if table is None else rope64,
                     self_attention_flash_sliding_window=window)
        up = ref(x, rotary_pos_emb=None if table is None else rope,
                 self_attention_flash_sliding_window=window)
    assert y.dtype == dt and y.shape == x.shape and ya.dtype == dt
    err_a, err_ua, err_oa = rel(ya, wa, zero), rel(ua, wa, zero), rel(oa, wa, zero)
    assert err_a < tol, (case, err_a)
    assert err_ua < (tol if dtype == "float32" else TOL_UNSWAPPED[dtype]), (case, err_ua)
    assert err_oa > 5 * tol, (case, err_oa)        # the comparison tells windows apart
    err, err_up = rel(y, want, x), rel(up, want, x)
    if dtype == "float32":
        assert err < tol and err_up < tol, (case, err, err_up)
    else:
        assert err < 1.5 * err_up and err_up < TOL_UNSWAPPED[dtype], (case, err, err_up)
    return err_a


def run_blocks(device):
    for dtype in DTYPES:
        for window in ([17, 17], [5, 9]):
            for feat_scale in (False, True):
                for table in (None, (0, N), (37, N), (0, N + 7)):
                    if (feat_scale or window != [17, 17]) and table not in (None, (37, N)):
                        continue            # every feature at least once, not every product
                    check_block(device, dtype, window, feat_scale, table)


def test_block_cpu():
    need_torch()
    run_blocks("cpu")


def test_rope_tables_read_once():
    """Upstream's TransformerBlock makes a new RoPE table at every call: the swapped block
    reads (one host sync) the one its own RoPE module makes once per length and inv_freq, not
    per call; a new inv_freq, another length or a table written since is read again, and the
    output follows (against the float64 copy given the same frequencies)."""
    need_torch()
    import dswa.samel
    sw, ref, ref64 = blocks(feat_scale=True)
    assert isinstance(sw.rope, dswa.samel._Rope) and sw.rope._original[0].__dict__ is \
        sw.rope.__dict__
    x = torch.randn(B, N, DIM, generator=torch.Generator().manual_seed(5))
    window = dict(self_attention_flash_sliding_window=[17, 17])
    reads, real = [], dswa.samel._read_table
    dswa.samel._read_table = lambda *a: reads.append(a[0].shape[0]) or real(*a)
    w = no_warnings()
    try:
        with torch.no_grad():
            for n in (N, N, N, N - 7, N - 7, N):
                xn = x[:, :n]
                err = rel(sw(xn, **window), ref64(xn.double(), **window), xn)
                assert err < TOL[("cpu", "float32")], (n, err)
            assert reads == [N, N - 7], reads
            for m in (sw.rope, ref64.rope):          # new frequencies, written in place
                m.inv_freq.mul_(0.75)
            for _ in range(2):
                err = rel(sw(x, **window), ref64(x.double(), **window), x)
                assert err < TOL[("cpu", "float32")], err
            assert reads == [N, N - 7, N], reads
            table = sw.rope.forward_from_seq_len(N)
            table[0].mul_(1.0)                       # same values, written since it was made
            sw.self_attn(x, rotary_pos_emb=table, flash_attn_sliding_window=[17, 17])
            assert reads == [N, N - 7, N, N], reads
    finally:
        w.__exit__(None, None, None)
        dswa.samel._read_table = real


def fallback_cases(x, dtype):
    """(what its warning says, keyword arguments of the attention's call) for every
    fallback: context, masks, score mod, varlen, a window of None or of floats, causal,
    rotary_pos_emb_k, RoPE tables that are not float32 positions times fixed frequencies
    (interpolation by 3, positions by 3, a position skipped), a 16-bit table."""
    import upstream_block as U
    n = x.shape[1]
    rope = U.RotaryEmbedding(32).to(x.device)
    mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    mask[0, -7:] = False
    band = U.allowed_keys(n, [3, 3], False, x.device)
    w = [17, 17]
    return [
        ("context", dict(context=x.flip(1), flash_attn_sliding_window=w)),
        ("padding_mask", dict(padding_mask=mask, flash_attn_sliding_window=w)),
        ("is None (full attention", dict(rotary_pos_emb=rope.forward_from_seq_len(n))),
        ("two integers >= 0", dict(flash_attn_sliding_window=[17.0, 17.0])),
        ("causal", dict(causal=True, flash_attn_sliding_window=w)),
        ("flex_attention_block_mask", dict(flex_attention_block_mask=band,
                                           flash_attn_sliding_window=w)),
        ("flex_attention_score_mod", dict(flex_attention_score_mod=lambda s: s * 0.5,
                                          flash_attn_sliding_window=w)),
        ("varlen_metadata", dict(varlen_metadata={"batch_size": x.shape[0]},
                                 flash_attn_sliding_window=w)),
        ("rotary_pos_emb_k", dict(rotary_pos_emb=rope.forward_from_seq_len(n),
                                  rotary_pos_emb_k=rope.forward_from_seq_len(n),
                                  flash_attn_sliding_window=w)),
        ("not float32 positions", dict(
            rotary_pos_emb=U.RotaryEmbedding(32, interpolation_factor=3.0).to(x.device)
            .forward_from_seq_len(n), flash_attn_sliding_window=w)),
        ("not float32 positions", dict(rotary_pos_emb=rope(torch.arange(0, 3 * n, 3,
                                                                        device=x.device)),
                                       flash_attn_sliding_window=w)),
        ("not float32 positions", dict(rotary_pos_emb=rope(torch.cat([
            torch.arange(5), torch.arange(6, n + 1)]).to(x.device)), flash_attn_sliding_window=w)),
        ("computes float32 angles", dict(rotary_pos_emb=(
            rope.forward_from_seq_len(n)[0].to(torch.bfloat16), 1.0),
            flash_attn_sliding_window=w)),
    ]


def check_fallbacks(device, dtype):
    """Each fallback: output equal to the unswapped module's (torch.equal), one warning naming
    the reason on the first call, none on the second; a grad-enabled call is no fallback: it
    runs fused, and its output and gradients (x's, an alpha's) are the unswapped module's
    within the bound; a float64 model falls back."""
    sw, ref, _ = blocks(dtype, device, feat_scale=True)
    a, r = sw.self_attn, ref.self_attn
    x = torch.randn(B, N, DIM, device=device).to(getattr(torch, dtype))
    for name, kw in fallback_cases(x, dtype):
        a._warned.clear()
        for k in range(2):
            with torch.no_grad(), warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                y = a(x, **kw)
                want = r(x, **kw)
            msgs = [str(m.message) for m in got]
            assert torch.equal(y, want), (name, device, dtype)
            if k == 0:
                assert len(msgs) == 1 and "runs its own forward" in msgs[0] and \
                    name in msgs[0], (name, msgs)
                print(f"  {device} {dtype}: {msgs[0]}")
            else:
                assert msgs == [], (name, msgs)
    # autograd recording the call: the fused block runs (no warning) and trains
    xg, xr = (x.detach().clone().requires_grad_(True) for _ in range(2))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y = a(xg, flash_attn_sliding_window=[17, 17])
    assert not got, [str(m.message) for m in got]
    want = r(xr, flash_attn_sliding_window=[17, 17])
    y.float().square().sum().backward()
    want.float().square().sum().backward()
    zero = torch.zeros_like(x)
    tol = TOL[(device, dtype)] if dtype == "float32" else TOL_UNSWAPPED[dtype]
    errs = [rel(y, want, zero), rel(xg.grad, xr.grad, zero),
            rel(a.q_norm.alpha.grad, r.q_norm.alpha.grad, torch.zeros(1, device=device))]
    assert max(errs) < 2 * tol, (device, dtype, errs)


def test_fallbacks_cpu():
    need_torch()
    for dtype in DTYPES:
        check_fallbacks("cpu", dtype)
    sw, ref, ref64 = blocks()                           # a float64 model runs the original
    sw64 = copy.deepcopy(sw).double()
    x = torch.randn(B, N, DIM, dtype=torch.float64)
    with torch.no_grad(), warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y = sw64(x, self_attention_flash_sliding_window=[17, 17])
    assert any("x.dtype = torch.float64" in str(m.message) for m in got)
    with torch.no_grad():
        assert torch.equal(y, ref64(x, self_attention_flash_sliding_window=[17, 17]))


def test_call_forms_and_state():
    """Upstream's signature; positional and keyword calls agree; state_dict keys unchanged
    and loadable either way; one state with the original (no duplicate parameters; .to(),
    train() and load_state_dict(assign=True) seen by both); deepcopy and pickle keep that."""
    need_torch()
    import dswa.samel
    import upstream_block as U
    sig = inspect.signature(dswa.samel.SamelAttention.forward)
    want = inspect.signature(U.Attention.forward)
    assert [(p.name, p.default) for p in sig.parameters.values()] == \
        [(p.name, p.default) for p in want.parameters.values()]
    sw, ref, _ = blocks(feat_scale=True)
    a = sw.self_attn
    x = torch.randn(B, N, DIM)
    rope = ref.rope.forward_from_seq_len(N)
    with torch.no_grad():
        by_kw = a(x, rotary_pos_emb=rope, flash_attn_sliding_window=[17, 17])
        by_pos = a(x, None, rope, None, None, None, None, [17, 17], None, None)
        by_tuple = a(x, rotary_pos_emb=rope, flash_attn_sliding_window=(17, 17))
    assert torch.equal(by_kw, by_pos) and torch.equal(by_kw, by_tuple)
    assert list(sw.state_dict()) == list(ref.state_dict())
    sw.load_state_dict(ref.state_dict())
    ref.load_state_dict(sw.state_dict())
    assert len(list(sw.parameters())) == len(list(ref.parameters()))
    orig = a._original[0]
    assert orig.__dict__ is a.__dict__ and orig not in list(sw.modules())
    assert sw.rope.__dict__ is sw.rope._original[0].__dict__
    assert sw.rope._original[0] not in list(sw.modules())
    sw.train()
    assert orig.training
    sw.eval()
    sd = {k: v + 1 for k, v in ref.state_dict().items()}
    sw.load_state_dict(sd, assign=True)
    assert orig.lambda_dc is a.lambda_dc and torch.equal(a.lambda_dc, sd["self_attn.lambda_dc"])
    for c in (copy.deepcopy(sw), pickle.loads(pickle.dumps(sw))):
        ca = c.self_attn
        assert ca._original[0].__dict__ is ca.__dict__ and ca._original[0] is not orig
        assert c.rope._original[0].__dict__ is c.rope.__dict__
        with torch.no_grad():
            assert torch.equal(ca(x, rotary_pos_emb=rope, flash_attn_sliding_window=[5, 9]),
                               a(x, rotary_pos_emb=rope, flash_attn_sliding_window=[5, 9]))
    sw16 = copy.deepcopy(sw).to(torch.bfloat16)            # buffers and params, both views
    assert sw16.self_attn._original[0].to_qkv.weight.dtype == torch.bfloat16
    raises(ValueError, "heads = 3 but to_qkv", dswa.samel.SamelAttention, ref.self_attn,
           heads=3)
    raises(ValueError, "base = 'x'", dswa.samel.SamelAttention, ref.self_attn, base="x")


def graph_ops(record):
    """A torch.compile backend that keeps each graph's call targets, then runs it."""
    def backend(gm, example_inputs):
        record.append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        return gm.forward
    return backend


def check_compile(device, dtype):
    """fullgraph compile after an eager call: the fused op in the graph, the result the eager
    one's. Compiled first (no eager call yet): the original runs (a warning says why), with
    no graph break; after an eager call the same compiled module recompiles to the fused op."""
    sw, ref, _ = blocks(dtype, device)
    x = torch.randn(B, N, DIM, device=device).to(getattr(torch, dtype))
    kw = dict(self_attention_flash_sliding_window=[17, 17])
    torch._dynamo.reset()
    first = []
    c = torch.compile(sw, fullgraph=True, backend=graph_ops(first))
    with torch.no_grad(), warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y0 = c(x, **kw)
    assert any("not read inside torch.compile" in str(m.message) for m in got)
    assert not any("dswa.samel_attention" in t for g in first for t in g)
    with torch.no_grad():
        want = ref(x, **kw)
        assert (y0 - want).abs().max() <= 1e-2 * want.abs().max()
        eager = sw(x, **kw)
        y = c(x, **kw)
    assert any("dswa.samel_attention" in t for g in first for t in g), first
    assert torch.allclose(y, eager, rtol=1e-4, atol=1e-5) if dtype == "float32" else \
        (y - eager).abs().max() <= 2e-2 * eager.abs().max()
    if LONG or device == "cuda":
        torch._dynamo.reset()
        with torch.no_grad():
            y = torch.compile(sw, fullgraph=True)(x, **kw)            # inductor
        assert (y.float() - eager.float()).abs().max() <= 2e-2 * eager.float().abs().max()


def test_compile_cpu():
    need_torch()
    check_compile("cpu", "float32")


# ---- CUDA ----------------------------------------------------------------------------------------
def test_cuda_block_fallbacks():
    need_cuda()
    run_blocks("cuda")
    for dtype in DTYPES:
        check_fallbacks("cuda", dtype)


def test_cuda_compile_graph():
    """torch.compile on CUDA, and a CUDA graph capturing the swapped block after one eager
    call (the RoPE pattern verified there): replays on fresh inputs equal eager calls; a
    capture with a changed norm falls back (no host sync), and its replay equals the
    unswapped block."""
    need_cuda()
    for dtype in DTYPES:
        check_compile("cuda", dtype)
        sw, ref, _ = blocks(dtype, "cuda")
        dt = getattr(torch, dtype)
        kw = dict(self_attention_flash_sliding_window=[17, 17])
        x = torch.randn(B, N, DIM, device="cuda", dtype=dt)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            sw(x, **kw)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            y = sw(x, **kw)
        for seed in (1, 2):
            x.copy_(torch.randn(x.shape, device="cuda",
                                generator=torch.Generator(device="cuda").manual_seed(seed)))
            g.replay()
            with torch.no_grad():
                assert torch.equal(y, sw(x, **kw)), (dtype, seed)
        with torch.no_grad():
            sw.self_attn.q_norm.alpha.mul_(1.1)
            ref.self_attn.q_norm.alpha.mul_(1.1)
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s), torch.no_grad():              # the original's warm-up
            ref(x, **kw)
        torch.cuda.current_stream().wait_stream(s)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            with torch.cuda.graph(g2), torch.no_grad():
                y2 = sw(x, **kw)
        assert any("call refresh()" in str(m.message) for m in got)
        g2.replay()
        with torch.no_grad():
            assert torch.equal(y2, ref(x, **kw))


# ---- the model's own frequencies, and SAME-L's configurations ----------------------------------
def own_tables(device):
    """RoPE tables of other frequencies that are still position x frequency: (name, rope
    module) of another base, a power-of-two interpolation, and SAME-L's inv_freq rounded to
    float16 and bfloat16 in a float32 model (each fused, none a fallback)."""
    import upstream_block as U
    rounded = []
    for dt in (torch.float16, torch.bfloat16):
        r = U.RotaryEmbedding(32)
        r.inv_freq = r.inv_freq.to(dt)
        rounded.append((f"inv_freq {dt}", r))
    return [("base 500", U.RotaryEmbedding(32, base=500.0)),
            ("interpolation 2", U.RotaryEmbedding(32, interpolation_factor=2.0))] + rounded


def check_own_tables(device, dtype):
    """Each table of own_tables: the swapped attention runs fused (no warning) and is within
    the bound of the float64 module given the same table."""
    sw, ref, ref64 = blocks(dtype, device)
    dt = getattr(torch, dtype)
    x = torch.randn(B, N, DIM, generator=torch.Generator().manual_seed(3)).to(device, dt)
    zero = torch.zeros_like(x)
    for name, rope in own_tables(device):
        rope = rope.to(device)
        for first in (0, 40):
            t = torch.arange(first, first + N, device=device)
            table = rope(t)
            table64 = (table[0].double(), 1.0)
            with torch.no_grad():
                w = no_warnings()
                try:
                    y = sw.self_attn(x, rotary_pos_emb=table, flash_attn_sliding_window=[17, 17])
                finally:
                    w.__exit__(None, None, None)
                want = ref64.self_attn(x.double(), rotary_pos_emb=table64,
                                       flash_attn_sliding_window=[17, 17])
            err = rel(y, want, zero)
            assert err < TOL[(device, dtype)], (name, first, device, dtype, err)


def test_own_tables_cpu():
    need_torch()
    for dtype in DTYPES:
        check_own_tables("cpu", dtype)


# SAME-L's windows as TransformerResamplingBlock computes them, window * (stride + 1 +
# prepend_length) with sliding_window [1, 1]: stride 16 (SAME-L), 8 and 32 (variable stride),
# and 16 with a prepended condition of 3 tokens. [33, 33] is beyond the band kernel: the scalar
# kernel on CUDA.
SAMEL_WINDOWS = [[17, 17], [9, 9], [33, 33], [20, 20]]


def dswa_warnings(got):
    return [str(m.message) for m in got if "dswa" in str(m.message)]


def check_configurations(device, dtypes=DTYPES, compiled=True):
    """SAME-L's configurations, the model cast whole: every window of SAMEL_WINDOWS, eval and
    train (forward + backward over every parameter, with activation checkpointing as upstream's
    checkpointing=True calls it), torch.compile: no dswa warning (no fallback), the output and
    the gradients within the bound of the unswapped model's."""
    from torch.utils.checkpoint import checkpoint
    for dtype in dtypes:
        dt = getattr(torch, dtype)
        sw, ref, _ = blocks(dtype, device, feat_scale=True)
        x = torch.randn(B, N, DIM, generator=torch.Generator().manual_seed(5)).to(device, dt)
        zero = torch.zeros_like(x)
        tol = TOL[(device, dtype)] if dtype == "float32" else TOL_UNSWAPPED[dtype]
        for window in SAMEL_WINDOWS:
            kw = dict(self_attention_flash_sliding_window=window)
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                sw.eval(), ref.eval()
                with torch.no_grad():
                    y, want = sw(x, **kw), ref(x, **kw)
                assert rel(y, want, x) < 2 * tol, (device, dtype, window)
                sw.train(), ref.train()
                grads = []
                for m in (sw, ref):
                    m.zero_grad()
                    xg = x.detach().clone().requires_grad_(True)
                    out = checkpoint(m, xg, use_reentrant=False, **kw)
                    out.float().square().mean().backward()
                    grads.append([xg.grad] + [p.grad for p in m.parameters()])
                for g, gr in zip(*grads):
                    assert g is not None and gr is not None
                    e = rel(g, gr, torch.zeros_like(g))
                    assert e < 4 * tol, (device, dtype, window, e)
            assert dswa_warnings(got) == [], (device, dtype, window, dswa_warnings(got))
        if compiled:
            sw.eval()
            torch._dynamo.reset()
            c = torch.compile(sw, fullgraph=True, backend="aot_eager")
            with warnings.catch_warnings(record=True) as got, torch.no_grad():
                warnings.simplefilter("always")
                for window in SAMEL_WINDOWS[:2]:
                    kw = dict(self_attention_flash_sliding_window=window)
                    assert rel(c(x, **kw), sw(x, **kw), x) < tol, (device, dtype, window)
            assert dswa_warnings(got) == [], (device, dtype, dswa_warnings(got))


def test_configurations_cpu():
    need_torch()
    check_configurations("cpu")


def test_cuda_own_tables_configurations():
    need_cuda()
    for dtype in DTYPES:
        check_own_tables("cuda", dtype)
    check_configurations("cuda")
