"""torch: the dswa::diff_swa op on the CPU (eager, torch.compile, opcheck) and on the GPU
(eager for every dtype, torch.compile with fullgraph=True, CUDA-graph capture; B = 2; slices of a
packed projection), against the float64 reference. Skipped without torch / a CUDA device."""
from _util import LONG, check_close, dswa, need_cuda, need_torch, raises, skip, torch

# relative Frobenius error bounds: CPU (fp32 arithmetic) and CUDA (f32 is TF32 matrix math)
TOL_CPU = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}
TOL_CUDA = {"float32": 5e-3, "float16": 3e-3, "bfloat16": 2e-2}
DTYPES = ("float32", "float16", "bfloat16")


def inputs(B, N, H, D, dtype, device, layout, seed=0):
    """q, k, v: 'contiguous' (v 2H heads), 'shared' (v (B, N, H, D)), or 'packed': slices of
    one projection output x @ W of shape (B, N, 5, H, D) = q1, q2, k1, k2, v (shared V),
    read in place with seq stride 5HD."""
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=getattr(torch, dtype))  # noqa: E731
    if layout == "packed":
        p = rnd(B, N, 5, H, D)
        return p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4]
    return rnd(B, N, 2 * H, D), rnd(B, N, 2 * H, D), rnd(B, N, H if layout == "shared" else 2 * H, D)


def test_cpu_eager():
    need_torch()
    for dtype in DTYPES:
        for layout in ("contiguous", "shared", "packed"):
            q, k, v = inputs(2, 45, 3, 16, dtype, "cpu", layout)
            if layout == "packed":
                assert not q.is_contiguous() and q.stride(1) == 5 * 3 * 16
            out = dswa.diff_swa(q, k, v, window=6)
            assert out.shape == (2, 45, 3, 16) and out.dtype == q.dtype and out.is_contiguous()
            check_close(out, q, k, v, TOL_CPU[dtype], 6, 6)
    q, k, v = inputs(1, 30, 2, 8, "float32", "cpu", "contiguous")
    out = torch.empty(1, 2, 30, 8).transpose(1, 2)                   # out=, any strides
    assert dswa.diff_swa(q, k, v, window=3, lam=0.5, scale=0.3, out=out) is out
    check_close(out, q, k, v, 1e-5, 3, 3, 0.3, 0.5)
    raises(ValueError, "k.dtype = torch.float16", dswa.diff_swa, q, k.half(), v)
    raises(ValueError, "but k is a numpy.ndarray", dswa.diff_swa, q, k.numpy(), v)
    raises(ValueError, "out has shape", dswa.diff_swa, q, k, v, out=torch.empty(1, 30, 4, 8))


def test_cpu_compile():
    """torch.compile(fullgraph=True) around the op on the CPU: dynamo + AOTAutograd (the op's
    fake implementation, functionalization of out=) with the aot_eager backend; inductor's
    C++ code generation (about 20 s, nothing of dswa's in it) only with DSWA_TEST_LONG=1."""
    need_torch()
    if not hasattr(torch.library, "custom_op"):
        skip("skipped: torch < 2.4 has no torch.library.custom_op")
    B, N, H, D = 2, 40, 2, 16
    w = torch.randn(D, 5 * H * D) / D ** 0.5

    def block(x, out):
        p = (x @ w).view(B, N, 5, H, D)
        y = dswa.diff_swa(p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4],
                          window=5, lam=0.8)
        dswa.diff_swa(p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4],
                      window=5, lam=0.8, out=out)
        return y * 2
    x = torch.randn(B, N, D)
    torch._dynamo.reset()
    out_c, out_e = torch.empty(B, N, H, D), torch.empty(B, N, H, D)
    y = torch.compile(block, fullgraph=True, backend="inductor" if LONG else "aot_eager")(x, out_c)
    assert torch.allclose(y, block(x, out_e)) and torch.equal(out_c, out_e)
    p = (x @ w).view(B, N, 5, H, D)
    check_close(y / 2, p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4],
                1e-5, 5, 5, lam=0.8)


def test_opcheck():
    need_torch()
    if not hasattr(torch.library, "opcheck"):
        skip("skipped: torch has no torch.library.opcheck")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and dswa.cuda_available() else [])
    for dev in devices:
        q, k, v = inputs(2, 20, 2, 64, "float32", dev, "packed")
        torch.library.opcheck(torch.ops.dswa.diff_swa.default, (q, k, v, 4, 4, 0.125, 1.0, 0))
        out = torch.empty(2, 20, 2, 64, device=dev)
        torch.library.opcheck(torch.ops.dswa.diff_swa_out.default,
                              (q, k, v, out, 4, 4, 0.125, 1.0, 0))


def test_cuda_eager():
    need_cuda()
    for dtype in DTYPES:
        for layout in ("contiguous", "shared", "packed"):
            for wl, wr in ((17, 17), (0, 9), (40, 40)):      # band kernel; wide kernel
                q, k, v = inputs(2, 300, 3, 64, dtype, "cuda", layout, seed=wl)
                out = dswa.diff_swa(q, k, v, window_left=wl, window_right=wr)
                assert out.device == q.device and out.dtype == q.dtype
                check_close(out, q, k, v, TOL_CUDA[dtype], wl, wr)
    for layout in ("contiguous", "shared", "packed"):       # fp32-accurate f32 math (band)
        q, k, v = inputs(2, 300, 3, 64, "float32", "cuda", layout)
        check_close(dswa.diff_swa(q, k, v, math="fp32"), q, k, v, 1e-5)
    q, k, v = inputs(2, 100, 2, 64, "bfloat16", "cuda", "contiguous")
    out = torch.full((2, 2, 100, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    dswa.diff_swa(q, k, v, lam=0.5, out=out.transpose(1, 2))
    check_close(out.transpose(1, 2), q, k, v, TOL_CUDA["bfloat16"], lam=0.5)
    raises(ValueError, "is on cpu", dswa.diff_swa, q, k.cpu(), v)


def test_cuda_refusals():
    need_cuda()
    q, k, v = inputs(1, 50, 2, 32, "float16", "cuda", "contiguous")       # head_dim 32
    raises(ValueError, "head_dim", dswa.diff_swa, q, k, v)
    big = torch.randn(1, 50, 4, 72, device="cuda", dtype=torch.float16)    # rows 144 bytes apart
    raises(ValueError, "the CUDA kernel", dswa.diff_swa, big[..., :64], big[..., :64], big[..., 1:65])


def test_cuda_compile():
    """torch.compile(fullgraph=True) on the GPU for every dtype: inductor for bfloat16 (and, with
    DSWA_TEST_LONG=1, for all three), aot_eager (the same tracing of the op) for the others."""
    need_cuda()
    if not hasattr(torch.library, "custom_op"):
        skip("skipped: torch < 2.4 has no torch.library.custom_op")
    B, N, H, D = 2, 500, 4, 64
    for dtype in DTYPES:
        dt = getattr(torch, dtype)
        w = (torch.randn(D, 5 * H * D, device="cuda") / D ** 0.5).to(dt)

        def block(x):
            p = (x @ w).view(B, N, 5, H, D)
            return dswa.diff_swa(p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3),
                                 p[:, :, 4]) + 1
        x = torch.randn(B, N, D, device="cuda", dtype=dt)
        torch._dynamo.reset()
        backend = "inductor" if LONG or dtype == "bfloat16" else "aot_eager"
        y = torch.compile(block, fullgraph=True, backend=backend)(x)
        p = (x @ w).view(B, N, 5, H, D)
        check_close(y - 1, p[:, :, 0:2].flatten(2, 3), p[:, :, 2:4].flatten(2, 3), p[:, :, 4],
                    TOL_CUDA[dtype] * 2)


def test_cuda_graph():
    need_cuda()
    for dtype in DTYPES:
        q, k, v = inputs(2, 400, 3, 64, dtype, "cuda", "packed")
        out2 = torch.empty(2, 400, 3, 64, device="cuda", dtype=q.dtype)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):                        # warm-up outside the capture
            dswa.diff_swa(q, k, v)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = dswa.diff_swa(q, k, v, lam=0.75)
            dswa.diff_swa(q, k, v, window=30, out=out2)
        for seed in (1, 2):                               # fresh inputs, same buffers
            q2, k2, v2 = inputs(2, 400, 3, 64, dtype, "cuda", "packed", seed=seed)
            q.copy_(q2), k.copy_(k2), v.copy_(v2)
            g.replay()
            torch.cuda.synchronize()
            check_close(out, q, k, v, TOL_CUDA[dtype], lam=0.75)
            check_close(out2, q, k, v, TOL_CUDA[dtype], 30, 30)
