"""torch autograd of the fused SAME-L block (dswa::samel_attention and
dswa::samel_attention_tensor_alpha; their backward is the custom op
dswa::samel_attention_backward) and the trainable drop-in dswa.samel.SamelAttention.

Gradients of x, the norms' gamma and beta and the alphas against a float64 torch
implementation of the block (DyT, RoPE, the band softmax of both pairs, out = A0 - lam * A1,
written out with torch ops and differentiated by torch; the forward's roundings to a 16-bit
dtype modelled as the identity in the backward, as the library has them) on the CPU for
float32, bfloat16 and float16, B > 1, odd N, N below the window, asymmetric windows, x a slice
of a wider projection; the float-alpha op's gradients equal the tensor-alpha op's; opcheck of
the backward op and of both autograd registrations; torch.compile(fullgraph=True) of forward
+ backward; activation checkpointing; bitwise determinism; a short training run of an
upstream-shaped block (upstream_block.py) with the drop-in swapped in against the unswapped
block, loss by loss; the Training snippet of docs/PYTHON.md. On the GPU (skipped without one):
the same gradients, compile, CUDA-graph capture of forward + backward, the training run in
float32 and bfloat16.
"""
import copy
import os
import re
import warnings

import _util
from _util import LONG, dswa, skip, torch
from test_torch_backward import reference as op_reference

# relative Frobenius error bounds per gradient against the float64 reference. CPU float32:
# fp32 arithmetic (tests/test_samel_backward.c measures about 3e-7); 16-bit: dx rounded to its
# dtype once, the norms' sums over 16-bit inputs. CUDA: DyT's tanh and RoPE's sin and cos on
# the special-function unit (docs: within about 2^-11), math="fp32" tighter.
TOL_CPU = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 5e-3}
TOL_CUDA = {"float32": 5e-3, "float16": 5e-3, "bfloat16": 2.5e-2}
TOL_CUDA_FP32 = 2e-4
DTYPES = ("float32", "bfloat16", "float16")
NAMES = ("x", "q_gamma", "q_beta", "k_gamma", "k_beta", "q_alpha", "k_alpha")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def need_torch():
    _util.need_torch("register_autograd")


def need_cuda():
    _util.need_cuda("register_autograd")


# ---- the float64 reference -----------------------------------------------------------------
def ste_round(y, dtype):
    """y rounded to dtype in value, the identity for autograd (as the library's backward
    counts the forward's roundings)."""
    if dtype == "float32":
        return y
    return y + (y.to(getattr(torch, dtype)).to(y.dtype) - y).detach()


def block_reference(x, qg, qb, kg, kb, qa, ka, H, wl=17, wr=17, scale=None, lam=1.0,
                    rot_dims=None, base=10000.0, pos_offset=0, dtype="float32"):
    """The fused block in float64 torch ops, differentiable in every input: x (B, N, 5*H*D);
    the norms' gamma, beta (D,) and alpha (1 element). (B, N, H*D)."""
    B, N = x.shape[:2]
    D = qg.shape[0]
    rot = D // 2 if rot_dims is None else rot_dims
    c = rot // 2
    scale = D ** -0.5 if scale is None else scale
    x5 = x.reshape(B, N, 5, H, D)
    # fp32 angles as the library computes them (float32 positions times float32 inv_freq)
    pos = torch.arange(N, dtype=torch.float32) + float(pos_offset)
    inv = (1.0 / base ** (2.0 * torch.arange(c, dtype=torch.float64) / rot)).float()
    ang = (pos[:, None] * inv[None, :]).double().to(x.device)[None, :, None, :]
    cos, sin = ang.cos(), ang.sin()

    def prologue(t, a, g, b):
        y = ste_round(g * torch.tanh(a.reshape(()) * t) + b, dtype)
        y1, y2 = y[..., :c], y[..., c:rot]
        y = torch.cat((y1 * cos - y2 * sin, y2 * cos + y1 * sin, y[..., rot:]), -1)
        return ste_round(y, dtype)

    q = torch.stack([prologue(x5[:, :, 0], qa, qg, qb), prologue(x5[:, :, 3], qa, qg, qb)], 2)
    k = torch.stack([prologue(x5[:, :, 1], ka, kg, kb), prologue(x5[:, :, 4], ka, kg, kb)], 2)
    out = op_reference(q, k, x5[:, :, 2], wl, wr, scale, lam)
    return out.reshape(B, N, H * D)


def leaves(B, N, H, D, dtype, device, seed=0, pad=0):
    """(x's leaf, x, the four norm vectors, the two alphas): x a slice of a wider (B, N,
    pad + 5*H*D) leaf when pad > 0; the norms float32 leaves away from their init, the alphas
    float32 (1,) and () leaves."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    big = torch.randn(B, N, pad + 5 * H * D, generator=g).to(device=device, dtype=dt)
    big.requires_grad_()
    x = big[:, :, pad:] if pad else big
    norms = [(1 + 0.3 * torch.randn(D, generator=g)) if i % 2 == 0 else
             0.2 * torch.randn(D, generator=g) for i in range(4)]
    alphas = [0.3 + torch.rand(1, generator=g), (0.3 + torch.rand(1, generator=g)).reshape(())]
    ts = [t.to(device).requires_grad_() for t in norms + alphas]
    return big, x, ts[:4], ts[4:]


def rel(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    assert torch.isfinite(a).all(), "non-finite gradient"
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_grads(device, dtype, B, N, H, D, tol, seed=0, pad=0, **kw):
    """The gradients of x's leaf, the norms and the alphas (tensor alphas) against the float64
    reference's; the float-alpha op's gradients of x and the norms equal them bitwise. The
    errors by name. The alphas' error is relative to their norm's whole gradient (alpha,
    gamma, beta): a single sum may cancel to near 0."""
    big, x, norms, alphas = leaves(B, N, H, D, dtype, device, seed, pad)
    settings = dict(window_left=kw.get("wl", 17), window_right=kw.get("wr", 17),
                    **{k: v for k, v in kw.items() if k not in ("wl", "wr")})
    out = dswa.samel_attention(x, *norms, q_alpha=alphas[0], k_alpha=alphas[1], **settings)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1)).to(out)
    got = torch.autograd.grad(out, [big] + norms + alphas, dout)
    qa, ka = (float(a.detach()) for a in alphas)
    out_f = dswa.samel_attention(x, *norms, q_alpha=qa, k_alpha=ka, **settings)
    assert torch.equal(out_f, out)
    got_f = torch.autograd.grad(out_f, [big] + norms, dout)
    assert all(torch.equal(a, b) for a, b in zip(got_f, got)), "float alphas' gradients differ"

    ls64 = [t.detach().double().requires_grad_() for t in [big] + norms + alphas]
    x64 = ls64[0][:, :, pad:] if pad else ls64[0]
    ref_kw = {k: v for k, v in kw.items() if k not in ("math",)}
    want = torch.autograd.grad(block_reference(x64, *ls64[1:], H, dtype=dtype, **ref_kw),
                               ls64, dout.double())
    errs = {n: rel(a, b) for n, a, b in zip(NAMES, got[:5], want[:5])}
    for i, (n, a, b) in enumerate(zip(NAMES[5:], got[5:], want[5:])):
        whole = torch.cat([want[5 + i].reshape(1), want[1 + 2 * i], want[2 + 2 * i]]).norm()
        errs[n] = float((a.double().to(b.device) - b).abs().max() / whole.clamp_min(1e-30))
        assert a.shape == b.shape and a.dtype == torch.float32
    if pad:
        assert not got[0][:, :, :pad].any(), "gradient outside x's slice"
    bad = {n: e for n, e in errs.items() if not e < tol}
    assert not bad, f"{device} {dtype} B={B} N={N} {kw}: gradient errors {bad} >= {tol}"
    print(f"  {device} {dtype} B={B} N={N} {kw}: max error {max(errs.values()):.2e} "
          f"({max(errs, key=errs.get)})")
    return errs


def test_cpu_grads():
    need_torch()
    for dtype in DTYPES:
        tol = TOL_CPU[dtype]
        check_grads("cpu", dtype, 2, 37, 2, 16, tol, wl=5, wr=9, rot_dims=8, pos_offset=3,
                    lam=0.7, scale=0.3)
        check_grads("cpu", dtype, 3, 9, 1, 32, tol, seed=1, pad=8)         # N < the window
        check_grads("cpu", dtype, 1, 21, 2, 64, tol, seed=2, wl=0, wr=4, rot_dims=64)
    check_grads("cpu", "float32", 2, 1, 2, 16, TOL_CPU["float32"], seed=3, rot_dims=0)  # N = 1


def test_cpu_deterministic_checkpoint():
    """Two backward passes are bitwise equal, and so are the gradients through
    torch.utils.checkpoint (the forward recomputed in the backward)."""
    need_torch()
    import torch.utils.checkpoint as cp
    for dtype in ("float32", "bfloat16"):
        big, x, norms, alphas = leaves(2, 70, 3, 32, dtype, "cpu", seed=4)
        W = torch.randn(5 * 3 * 32, 5 * 3 * 32, generator=torch.Generator().manual_seed(5))
        W = (W / W.shape[0] ** 0.5).to(x.dtype)

        def f(x):
            return dswa.samel_attention(x @ W, *norms, q_alpha=alphas[0], k_alpha=alphas[1],
                                        window_left=9, window_right=4)
        ls = [big] + norms + alphas
        a = torch.autograd.grad(f(x).float().square().sum(), ls)
        b = torch.autograd.grad(f(x).float().square().sum(), ls)
        c = torch.autograd.grad(cp.checkpoint(f, x, use_reentrant=False).float().square().sum(),
                                ls)
        assert all(torch.equal(u, v) for u, v in zip(a, b)), dtype
        assert all(torch.equal(u, v) for u, v in zip(a, c)), dtype


def opcheck_args(device):
    B, N, H, D = 2, 20, 2, 64
    _, x, norms, alphas = leaves(B, N, H, D, "float32", device, seed=6)
    settings = (H, 4, 3, 0.125, 0.9, 32, list(dswa._lib.rope_frequencies(32, 10000.0)), 5, 0)
    return x.detach(), norms, alphas, settings


def test_opcheck():
    """The backward op's schema, fake implementation and dispatch; both forward ops'
    autograd registrations (opcheck with inputs that require grad)."""
    need_torch()
    if not hasattr(torch.library, "opcheck"):
        skip("skipped: torch has no torch.library.opcheck")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and dswa.cuda_available() else [])
    for dev in devices:
        x, norms, alphas, settings = opcheck_args(dev)
        dout = torch.randn(x.shape[0], x.shape[1], x.shape[2] // 5, device=dev)
        detached = [t.detach() for t in norms + alphas]
        torch.library.opcheck(torch.ops.dswa.samel_attention_backward.default,
                              (dout, x, *detached, *settings))
        # alphas as CPU tensors with device tensors (how the float-alpha op's backward runs)
        torch.library.opcheck(torch.ops.dswa.samel_attention_backward.default,
                              (dout, x, *detached[:4], *(a.cpu() for a in detached[4:]),
                               *settings))
        xg = x.clone().requires_grad_()
        torch.library.opcheck(torch.ops.dswa.samel_attention_tensor_alpha.default,
                              (xg, *norms, *alphas, *settings))
        torch.library.opcheck(torch.ops.dswa.samel_attention.default,
                              (xg, *norms, 0.6, 1.3, *settings))


def compile_case(device, dtype, backend, tensor_alpha):
    """torch.compile(fullgraph=True) of projection + fused block + loss, then backward: the
    gradients of every parameter equal eager's (aot_eager: bitwise)."""
    B, N, H, D = 2, 60, 2, 64
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(7)
    W = (torch.randn(H * D, 5 * H * D, generator=g) / (H * D) ** 0.5).to(device=device, dtype=dt)
    W.requires_grad_()
    _, _, norms, alphas = leaves(B, N, H, D, dtype, device, seed=8)
    x = torch.randn(B, N, H * D, generator=g).to(device=device, dtype=dt)
    qa, ka = (alphas if tensor_alpha else (0.7, 1.1))

    def f(x):
        y = dswa.samel_attention(x @ W, *norms, q_alpha=qa, k_alpha=ka, window_left=7,
                                 window_right=3)
        return y.float().square().mean()

    params = [W] + norms + (alphas if tensor_alpha else [])
    grads = []
    for fn in (f, torch.compile(f, fullgraph=True, backend=backend)):
        torch._dynamo.reset()
        grads.append(torch.autograd.grad(fn(x), params))
    for a, b in zip(*grads):
        if backend == "aot_eager":
            assert torch.equal(a, b), "compiled backward differs from eager"
        else:
            assert rel(b, a) < 5 * TOL_CPU[dtype]


def test_cpu_compile():
    """aot_eager traces both ops, their fake implementations and the autograd formulas;
    inductor's code generation only with DSWA_TEST_LONG=1."""
    need_torch()
    for tensor_alpha in (True, False):
        compile_case("cpu", "float32", "inductor" if LONG else "aot_eager", tensor_alpha)


# ---- the drop-in, trained ----------------------------------------------------------------------
def train(model, x, target, steps, opt, window):
    losses = []
    for _ in range(steps):
        loss = (model(x, self_attention_flash_sliding_window=window).float() - target).square()
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_training(device, dtype, optimizer, tol, steps=10, N=40, window=(17, 17)):
    """An upstream-shaped block (pre-norm DyT, the attention called by keyword, SwiGLU,
    residuals) trained from one seed twice: the drop-in swapped in, and unswapped. The losses
    agree step by step within tol (relative), the fused path ran (no fallback warning), and
    the alphas moved alike (float32): their gradients reached the optimizer."""
    import dswa.samel
    import upstream_block as U
    dt = getattr(torch, dtype)
    ref = U.randomize(U.TransformerBlock(128), 11)
    inv_freq = ref.rope.inv_freq.clone()
    ref = ref.to(device=device, dtype=dt).train()
    ref.rope.inv_freq = inv_freq.to(device)              # a float32 table, as upstream's
    sw = dswa.samel.swap_attention(copy.deepcopy(ref))
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, N, 128, generator=g).to(device=device, dtype=dt)
    target = torch.randn(2, N, 128, generator=g).to(device)
    a0 = float(ref.self_attn.q_norm.alpha.detach())
    runs = []
    for m in (sw, ref):
        opt = (torch.optim.Adam(m.parameters(), lr=1e-3) if optimizer == "adam" else
               torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9))
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # a fallback's RuntimeWarning would raise
            runs.append(train(m, x, target, steps, opt, list(window)))
    errs = [abs(a - b) / abs(b) for a, b in zip(*runs)]
    assert max(errs) < tol, (device, dtype, optimizer, runs, errs)
    for name in ("q_norm", "k_norm") if dtype == "float32" else ():   # 16-bit: steps round away
        a_sw = float(getattr(sw.self_attn, name).alpha.detach())
        a_ref = float(getattr(ref.self_attn, name).alpha.detach())
        assert a_ref != a0 and abs(a_sw - a_ref) <= 0.1 * abs(a_ref - a0) + 1e-6, \
            (name, a0, a_sw, a_ref)
    return errs


def test_training_cpu():
    need_torch()
    check_training("cpu", "float32", "adam", 1e-5)
    check_training("cpu", "float32", "sgd", 1e-5, N=23, window=(5, 9))


def test_dropin_grads_cpu():
    """The drop-in's gradients of every parameter and of x against the unswapped module's
    (float32: within the fused block's error), with feat_scale; frozen alphas use the
    float-alpha op (no .item()), and still give the other gradients."""
    need_torch()
    import dswa.samel
    import upstream_block as U
    ref = U.randomize(U.Attention(128, feat_scale=True), 13)
    sw = dswa.samel.SamelAttention(copy.deepcopy(ref))
    rope = U.RotaryEmbedding(32).forward_from_seq_len(30)
    x = torch.randn(2, 30, 128)
    for frozen in (False, True):
        for m in (sw, ref):
            for n in ("q_norm", "k_norm"):
                getattr(m, n).alpha.requires_grad_(not frozen)
        got, want = [], []
        for m, res in ((sw, got), (ref, want)):
            xg = x.clone().requires_grad_()
            y = m(xg, rotary_pos_emb=rope, flash_attn_sliding_window=[17, 17])
            ps = [p for p in m.parameters() if p.requires_grad]
            res.extend(torch.autograd.grad(y.square().sum(), [xg] + ps))
        assert len(got) == len(want) == len(list(ref.parameters())) + 1 - 2 * frozen
        errs = [rel(a, b) for a, b in zip(got, want)]
        assert max(errs) < 1e-4, (frozen, errs)
    # frozen alphas: an optimizer step on gamma and beta does not make the drop-in read the
    # alphas again (refresh(): a host sync) when autograd records the call; a changed alpha does
    reads = []
    refresh = sw.refresh
    sw.refresh = lambda: (reads.append(1), refresh())[1]
    try:
        for change, want_reads in (("gamma", 0), ("alpha", 1)):
            with torch.no_grad():
                sw.q_norm.gamma.add_(0.01) if change == "gamma" else sw.k_norm.alpha.mul_(1.1)
            sw(x.clone().requires_grad_(), rotary_pos_emb=rope,
               flash_attn_sliding_window=[17, 17]).sum().backward()
            assert len(reads) == want_reads, (change, reads)
    finally:
        del sw.refresh


def doc_snippet():
    """The first python code block of docs/PYTHON.md's "Training" section."""
    path = os.path.join(ROOT, "docs", "PYTHON.md")
    if not os.path.exists(path):
        skip(f"skipped: {path} not found (the tests run outside the repository)")
    text = open(path).read()
    sec = text[text.index("\n## Training"):]
    return re.search(r"```python\n(.*?)```", sec, re.S).group(1)


def test_doc_snippet():
    """docs/PYTHON.md's training example runs (on the GPU when there is one) and its loss
    goes down."""
    need_torch()
    env = {}
    exec(compile(doc_snippet(), "docs/PYTHON.md (Training)", "exec"), env)
    assert env["losses"][-1] < env["losses"][0], env["losses"]
    assert env["q_alpha"].grad is not None


# ---- CUDA ----------------------------------------------------------------------------------------
def test_cuda_grads():
    need_cuda()
    for dtype in DTYPES:
        tol = TOL_CUDA[dtype]
        check_grads("cuda", dtype, 2, 301, 3, 64, tol, wl=17, wr=17, seed=20)
        check_grads("cuda", dtype, 2, 9, 2, 64, tol, seed=21, pad=64)      # N < the window
        check_grads("cuda", dtype, 1, 130, 2, 64, tol, seed=22, wl=0, wr=9, rot_dims=64,
                    pos_offset=1000, lam=0.5)
        check_grads("cuda", dtype, 2, 77, 1, 64, tol, seed=23, wl=40, wr=40)   # scalar kernel
    check_grads("cuda", "float32", 2, 200, 2, 64, TOL_CUDA_FP32, seed=24, math="fp32")


def test_cuda_deterministic_compile():
    need_cuda()
    for dtype in ("float32", "bfloat16"):
        big, x, norms, alphas = leaves(1, 1000, 8, 64, dtype, "cuda", seed=25)
        ls = [big] + norms + alphas
        out = dswa.samel_attention(x, *norms, q_alpha=alphas[0], k_alpha=alphas[1])
        dout = torch.randn_like(out)
        a = torch.autograd.grad(out, ls, dout, retain_graph=True)
        b = torch.autograd.grad(out, ls, dout)
        assert all(torch.equal(u, v) for u, v in zip(a, b)), dtype
        for tensor_alpha in (True, False):
            compile_case("cuda", dtype, "inductor" if LONG else "aot_eager", tensor_alpha)


def test_cuda_graph():
    """Forward and backward captured in one CUDA graph, the alphas host floats (the float-alpha
    op) or CUDA tensors with gradients (read by the kernels in device memory: no host sync,
    which torch's sync debug mode would raise on); replays on fresh inputs, the tensor alphas
    included, copied into the captured tensors equal eager gradients bitwise."""
    need_cuda()
    B, N, H, D = 2, 200, 3, 64
    for dtype, tensor_alpha in [(d, False) for d in DTYPES] + [(d, True) for d in DTYPES]:
        big, x, norms, alphas = leaves(B, N, H, D, dtype, "cuda", seed=30)
        qa, ka = alphas if tensor_alpha else (float(a.detach()) for a in alphas)
        ls = [big] + norms + (alphas if tensor_alpha else [])
        dout = torch.randn(B, N, H * D, device="cuda", dtype=x.dtype)

        def step():
            out = dswa.samel_attention(x, *norms, q_alpha=qa, k_alpha=ka, lam=0.6)
            return torch.autograd.grad(out, ls, dout)
        torch.cuda.set_sync_debug_mode("error")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):                     # warm-up outside the capture
            step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            grads = step()
        for seed in (1, 2):
            fresh = leaves(B, N, H, D, dtype, "cuda", seed=30 + seed)
            with torch.no_grad():
                for t, f in zip(ls, [fresh[0]] + fresh[2] + fresh[3]):
                    t.copy_(f)
                dout.copy_(torch.randn_like(dout))
            graph.replay()
            torch.cuda.synchronize()
            want = step()
            assert all(torch.equal(a, b) for a, b in zip(grads, want)), (dtype, seed)


def test_cuda_training():
    """The training run on the GPU: float32 (the fused forward in TF32 against upstream's
    float32 attention) and bfloat16; and the drop-in's training step captured in a CUDA graph
    (no warning: nothing falls back), with the alphas frozen and with the alphas trained (read
    by the kernels in device memory: a replay after the alphas changed in place matches the
    eager step, the alphas' gradients included)."""
    need_cuda()
    check_training("cuda", "float32", "adam", 5e-3)
    check_training("cuda", "bfloat16", "adam", 3e-2)
    import dswa.samel
    import upstream_block as U
    for trained in (False, True):
        m = dswa.samel.swap_attention(U.randomize(U.TransformerBlock(128), 14).cuda())
        alphas = [getattr(m.self_attn, n).alpha for n in ("q_norm", "k_norm")]
        for a in alphas:
            a.requires_grad_(trained)
        x = torch.randn(2, 64, 128, device="cuda")
        params = [p for p in m.parameters() if p.requires_grad]
        assert any(p is alphas[0] for p in params) == trained
        kw = dict(self_attention_flash_sliding_window=[17, 17])

        def step():
            return torch.autograd.grad(m(x, **kw).square().mean(), params)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), warnings.catch_warnings():
            warnings.simplefilter("error")
            step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.cuda.graph(graph):
                grads = step()
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            if trained:                 # as an optimizer step changes them
                alphas[0].mul_(1.3)
                alphas[1].mul_(0.8)
        graph.replay()
        torch.cuda.synchronize()
        errs = [rel(a, b) for a, b in zip(grads, step())]     # cuBLAS's projections: not bitwise
        assert max(errs) < 1e-5, (trained, errs)


def test_gradcheck_cpu():
    """torch.autograd.gradcheck of the fused block on the CPU backend: x, the norms' gamma, beta
    and the (tensor) alphas as float64 leaves, the block run in float32 between casts (the
    library takes no float64), so the tolerances carry float32's rounding of the finite
    differences (eps 1e-2)."""
    need_torch()
    big, x, norms, alphas = leaves(1, 6, 1, 8, "float32", "cpu", seed=5)
    ls = [t.detach().double().requires_grad_() for t in [big] + norms + alphas]

    def f(x, qg, qb, kg, kb, qa, ka):
        return dswa.samel_attention(x.float(), qg.float(), qb.float(), kg.float(), kb.float(),
                                    q_alpha=qa.float(), k_alpha=ka.float(), window_left=2,
                                    window_right=3, rot_dims=4, pos_offset=2, lam=0.7,
                                    scale=0.5).double()
    assert torch.autograd.gradcheck(f, tuple(ls), eps=1e-2, atol=3e-4, rtol=2e-3)
