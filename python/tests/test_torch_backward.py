"""torch autograd of dswa::diff_swa (its backward is the custom op dswa::diff_swa_backward):
gradients of q, k, v against a float64 torch reference differentiated by torch.autograd, on the
CPU (every dtype; contiguous, shared (B, N, H, D) V, slices of a packed projection, an expanded
V with pair stride 0; windows inside N, asymmetric and wider than N) and on the GPU (the same
for every dtype; skipped without one); bitwise determinism; opcheck of the backward op and of
the autograd registration; torch.compile(fullgraph=True) of forward + backward; CUDA-graph
capture of forward + backward.

The library computes in float32 (and float16, bfloat16) and takes no float64 tensors, so
torch.autograd.gradcheck runs it between casts (float64 leaves, float32 op) with tolerances that
carry float32's rounding; the float64 reference below is the op written out (an explicit band
softmax), and its gradients are torch's own: the backward against an independent derivation.
"""
import _util
from _util import LONG, dswa, skip, torch

# relative Frobenius error bounds per gradient: float32 is plain fp32 arithmetic on both
# backends; 16-bit gradients are rounded to their dtype (and an expanded V's two pairs are
# summed by autograd in that dtype)
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("contiguous", "shared", "packed", "expanded")


def need_torch():
    _util.need_torch("register_autograd")


def need_cuda():
    _util.need_cuda("register_autograd")


def reference(q, k, v, wl, wr, scale, lam):
    """The op in torch (differentiable; float64 inputs give float64 out): q, k (B, N, 2H, D) or
    (B, N, 2, H, D), v like q or (B, N, H, D); softmax over keys j with i - wl <= j <= i + wr."""
    B, N, D = q.shape[0], q.shape[1], q.shape[-1]
    q5, k5 = q.reshape(B, N, 2, -1, D), k.reshape(B, N, 2, -1, D)
    H = q5.shape[3]
    v5 = torch.stack([v, v], 2) if tuple(v.shape) == (B, N, H, D) else v.reshape(B, N, 2, H, D)
    s = scale * torch.einsum("biphd,bjphd->bphij", q5, k5)
    i = torch.arange(N, device=q.device)
    off = i[None, :] - i[:, None]                              # j - i
    s = s.masked_fill(~((off >= -wl) & (off <= wr)), float("-inf"))
    a = torch.einsum("bphij,bjphd->biphd", torch.softmax(s, -1), v5)
    return a[:, :, 0] - lam * a[:, :, 1]


def leaves(B, N, H, D, dtype, device, layout, seed=0):
    """(leaf tensors, q, k, v built from them): contiguous (v 2H heads); shared (v (B, N, H, D));
    packed (q, k, v slices of one (B, N, 5, H, D) leaf, read in place); expanded (q, k
    (B, N, 2, H, D), v one (B, N, H, D) leaf expanded to both pairs: pair stride 0)."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)

    def rnd(*s):
        return torch.randn(*s, generator=g).to(device=device, dtype=dt).requires_grad_()
    if layout == "packed":
        p = rnd(B, N, 5, H, D)
        return (p,), p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4]
    if layout == "expanded":
        q, k, v = rnd(B, N, 2, H, D), rnd(B, N, 2, H, D), rnd(B, N, H, D)
        return (q, k, v), q, k, v[:, :, None].expand(B, N, 2, H, D)
    q, k, v = rnd(B, N, 2 * H, D), rnd(B, N, 2 * H, D), rnd(B, N, H if layout == "shared" else 2 * H, D)
    return (q, k, v), q, k, v


def rel(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    assert torch.isfinite(a).all(), "non-finite gradient"
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_grads(device, dtype, layout, B, N, H, D, wl, wr, scale=0.3, lam=0.7, seed=0, tol=None):
    """dswa's gradients of every leaf against the float64 reference's (within tol, by default
    TOL's for the dtype); the errors."""
    tol = TOL[dtype] if tol is None else tol
    ls, q, k, v = leaves(B, N, H, D, dtype, device, layout, seed)
    out = dswa.diff_swa(q, k, v, window_left=wl, window_right=wr, scale=scale, lam=lam)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1)).to(out)
    got = torch.autograd.grad(out, ls, dout)
    ls64 = [t.detach().double().requires_grad_() for t in ls]
    _, q64, k64, v64 = leaves_like(ls64, layout, B, N, H, D)
    want = torch.autograd.grad(reference(q64, k64, v64, wl, wr, scale, lam), ls64, dout.double())
    errs = [rel(a, b) for a, b in zip(got, want)]
    assert max(errs) < tol, \
        f"{device} {dtype} {layout} W={wl}/{wr}: gradient errors {errs} >= {tol}"
    return errs


def leaves_like(ls, layout, B, N, H, D):
    """q, k, v built from given leaves the way leaves() builds them."""
    if layout == "packed":
        p, = ls
        return ls, p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4]
    if layout == "expanded":
        q, k, v = ls
        return ls, q, k, v[:, :, None].expand(B, N, 2, H, D)
    return (ls,) + tuple(ls)


def test_cpu_grads():
    need_torch()
    for dtype in DTYPES:
        for layout in LAYOUTS:
            for wl, wr in ((5, 9), (0, 3), (60, 60)):           # 60 > N: every key
                check_grads("cpu", dtype, layout, 2, 37, 2, 16, wl, wr)
    check_grads("cpu", "float32", "contiguous", 1, 1, 3, 8, 17, 17)   # N = 1: dq, dk are 0


def test_cpu_deterministic():
    need_torch()
    ls, q, k, v = leaves(2, 70, 3, 32, "bfloat16", "cpu", "shared")
    out = dswa.diff_swa(q, k, v, window_left=9, window_right=4)
    dout = torch.randn_like(out)
    a = torch.autograd.grad(out, ls, dout, retain_graph=True)
    b = torch.autograd.grad(out, ls, dout)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_opcheck():
    """The backward op's schema, fake implementation and dispatch (opcheck), and the forward's
    autograd registration (opcheck with inputs that require grad)."""
    need_torch()
    if not hasattr(torch.library, "opcheck"):
        skip("skipped: torch has no torch.library.opcheck")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and dswa.cuda_available() else [])
    for dev in devices:
        for layout in ("packed", "shared"):
            _, q, k, v = leaves(2, 20, 2, 64, "float32", dev, layout)
            dout = torch.randn(2, 20, 2, 64, device=dev)
            args = (dout, q.detach(), k.detach(), v.detach(), 4, 3, 0.125, 0.9, 0)
            torch.library.opcheck(torch.ops.dswa.diff_swa_backward.default, args)
            torch.library.opcheck(torch.ops.dswa.diff_swa.default, (q, k, v, 4, 3, 0.125, 0.9, 0))


def compile_case(device, dtype, backend):
    """torch.compile(fullgraph=True) of a block with the op, then backward: the gradients equal
    eager's (aot_eager: bitwise)."""
    B, N, H, D = 2, 60, 2, 64 if device == "cuda" else 16
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(D, 5 * H * D, generator=g) / D ** 0.5).to(device=device, dtype=dt)
    x0 = torch.randn(B, N, D, generator=g).to(device=device, dtype=dt)

    def block(x):
        p = (x @ w).view(B, N, 5, H, D)
        return dswa.diff_swa(p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4],
                             window_left=7, window_right=3, lam=0.8) * 2

    grads = []
    for f in (block, torch.compile(block, fullgraph=True, backend=backend)):
        torch._dynamo.reset()
        x = x0.clone().requires_grad_()
        (f(x).float().square().sum()).backward()
        grads.append(x.grad)
    if backend == "aot_eager":
        assert torch.equal(grads[0], grads[1]), "compiled backward differs from eager"
    else:
        assert rel(grads[1], grads[0]) < TOL[dtype] * 5


def test_cpu_compile():
    """aot_eager traces the op and its backward (fake implementations, the autograd formula);
    inductor's code generation only with DSWA_TEST_LONG=1."""
    need_torch()
    compile_case("cpu", "float32", "inductor" if LONG else "aot_eager")


def test_cuda_grads():
    need_cuda()
    for dtype in DTYPES:
        for layout in LAYOUTS:
            for wl, wr in ((17, 17), (0, 9), (5, 50)):
                check_grads("cuda", dtype, layout, 2, 300, 3, 64, wl, wr, scale=0.125, seed=wr)


def test_cuda_grads_tf32():
    """float32 under torch's "high" matmul precision: the op's math is TF32, forward and backward
    (the tensor-core backward where the band applies: windows up to 48), within TF32's error;
    an error above fp32's shows that the TF32 kernels ran."""
    need_cuda()
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        for layout in LAYOUTS:
            for wl, wr in ((17, 17), (0, 9), (5, 50)):
                errs = check_grads("cuda", "float32", layout, 2, 300, 3, 64, wl, wr, scale=0.125,
                                   seed=wr, tol=5e-3)
                if layout == "contiguous" and wl + wr <= 48:
                    assert max(errs) > 1e-5, f"{layout} W={wl}/{wr}: errors {errs}: not TF32"
    finally:
        torch.set_float32_matmul_precision(old)


def test_cuda_deterministic():
    need_cuda()
    for dtype in ("float32", "bfloat16"):
        ls, q, k, v = leaves(1, 1000, 8, 64, dtype, "cuda", "packed")
        out = dswa.diff_swa(q, k, v)
        dout = torch.randn_like(out)
        a = torch.autograd.grad(out, ls, dout, retain_graph=True)
        b = torch.autograd.grad(out, ls, dout)
        assert all(torch.equal(x, y) for x, y in zip(a, b)), dtype


def test_cuda_compile():
    need_cuda()
    for dtype in DTYPES:
        compile_case("cuda", dtype, "inductor" if LONG or dtype == "bfloat16" else "aot_eager")


def test_cuda_graph():
    """Forward and backward captured in one CUDA graph; replays on fresh inputs copied into the
    captured tensors equal eager gradients bitwise."""
    need_cuda()
    B, N, H, D = 2, 200, 3, 64
    for dtype in DTYPES:
        ls, q, k, v = leaves(B, N, H, D, dtype, "cuda", "shared")
        dout = torch.randn(B, N, H, D, device="cuda", dtype=q.dtype)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):                     # warm-up outside the capture
            torch.autograd.grad(dswa.diff_swa(q, k, v, lam=0.6), ls, dout)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            grads = torch.autograd.grad(dswa.diff_swa(q, k, v, lam=0.6), ls, dout)
        for seed in (1, 2):
            fresh, _, _, _ = leaves(B, N, H, D, dtype, "cuda", "shared", seed)
            with torch.no_grad():
                for t, f in zip(ls, fresh):
                    t.copy_(f)
                dout.copy_(torch.randn_like(dout))
            graph.replay()
            torch.cuda.synchronize()
            want = torch.autograd.grad(dswa.diff_swa(q, k, v, lam=0.6), ls, dout)
            assert all(torch.equal(a, b) for a, b in zip(grads, want)), (dtype, seed)


def test_gradcheck_cpu():
    """torch.autograd.gradcheck on the CPU backend, in float64 as far as the library allows: the
    leaves are float64, the op runs in float32 between two casts (the library takes no float64),
    so the finite differences carry float32's rounding: eps 1e-2 on O(1) inputs leaves about 1e-5
    of rounding noise and 1e-4 of truncation per derivative, hence the tolerances (a gradient off
    by 1 % fails them). Two shapes: V of 2H heads with an
    asymmetric window, and a shared V with N below the window."""
    need_torch()
    g = torch.Generator().manual_seed(11)
    for H, N, D, shared, wl, wr in ((1, 7, 4, False, 1, 3), (2, 4, 3, True, 5, 5)):
        q = torch.randn(1, N, 2 * H, D, generator=g, dtype=torch.float64, requires_grad=True)
        k = torch.randn(1, N, 2 * H, D, generator=g, dtype=torch.float64, requires_grad=True)
        v = torch.randn(1, N, H if shared else 2 * H, D, generator=g, dtype=torch.float64,
                        requires_grad=True)

        def f(q, k, v):
            return dswa.diff_swa(q.float(), k.float(), v.float(), window_left=wl,
                                 window_right=wr, scale=0.4, lam=0.6).double()
        assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-2, atol=3e-4, rtol=2e-3)
