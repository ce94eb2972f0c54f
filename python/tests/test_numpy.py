"""numpy path (CPU backend) against the float64 reference; argument and library errors; out=;
the library lookup; the TensorRT launch formulas against the library's own values (no GPU)."""
import os
import subprocess
import sys

from _util import aot_arch_or_skip, check_close, dswa, np, raises, reference, skip

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def qkv(B, N, H, D, dtype=np.float32, shared=False):
    return rand(B, N, 2 * H, D, dtype=dtype), rand(B, N, 2 * H, D, dtype=dtype), \
        rand(B, N, H if shared else 2 * H, D, dtype=dtype)


def test_reference_matches_loops():
    q, k, v = (np.asarray(x, np.float64) for x in qkv(1, 6, 1, 3))
    wl, wr, scale, lam = 2, 1, 0.7, 0.4
    want = np.zeros((1, 6, 1, 3))
    for i in range(6):
        js = [j for j in range(6) if i - wl <= j <= i + wr]
        for p, sign in ((0, 1.0), (1, -lam)):
            s = np.array([scale * q[0, i, p] @ k[0, j, p] for j in js])
            w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            want[0, i, 0] += sign * sum(wj * v[0, j, p] for wj, j in zip(w, js))
    assert np.allclose(reference(q, k, v, wl, wr, scale, lam), want, rtol=1e-12, atol=1e-12)


def test_contiguous():
    for B, N, H, D, w in [(1, 1, 1, 8, 17), (2, 37, 3, 16, 5), (1, 70, 2, 64, 17), (3, 20, 1, 4, 0)]:
        q, k, v = qkv(B, N, H, D)
        out = dswa.diff_swa(q, k, v, window=w)
        assert out.shape == (B, N, H, D) and out.dtype == np.float32 and out.flags.c_contiguous
        check_close(out, q, k, v, 1e-5, w, w)


def test_windows():
    q, k, v = qkv(2, 40, 2, 8)
    for wl, wr in [(0, 0), (0, 7), (9, 0), (3, 11), (100, 100), (39, 39)]:
        check_close(dswa.diff_swa(q, k, v, window_left=wl, window_right=wr), q, k, v, 1e-5,
                    wl, wr)
    check_close(dswa.diff_swa(q, k, v, window=4, window_right=9), q, k, v, 1e-5, 4, 9)


def test_shared_v():
    q, k, v = qkv(2, 33, 3, 16, shared=True)
    assert v.shape == (2, 33, 3, 16)
    check_close(dswa.diff_swa(q, k, v, window=6), q, k, v, 1e-5, 6, 6)


def test_packed_views():
    B, N, H, D = 2, 29, 3, 16
    # (B, N, 5, H, D) holding q1, q2, k1, k2, v: (B, N, 2H, D) views with seq stride 5HD
    packed = rand(B, N, 5, H, D)
    q = packed[:, :, 0:2].reshape(B, N, 2 * H, D)
    k = packed[:, :, 2:4].reshape(B, N, 2 * H, D)
    v = packed[:, :, 4]
    assert np.shares_memory(q, packed) and np.shares_memory(v, packed)
    assert not q.flags.c_contiguous and q.strides[1] == 5 * H * D * 4
    check_close(dswa.diff_swa(q, k, v, window=5), q, k, v, 1e-5, 5, 5)
    # (B, N, 5, H, D) holding q1, k1, v, q2, k2: (B, N, 2, H, D) views with pair stride 3HD
    packed = rand(B, N, 5, H, D)
    q, k, v = packed[:, :, 0::3], packed[:, :, 1::3], packed[:, :, 2]
    assert q.shape == (B, N, 2, H, D) and q.strides[2] == 3 * H * D * 4
    check_close(dswa.diff_swa(q, k, v, window=5), q, k, v, 1e-5, 5, 5)
    # every other position, full V taken from a wider array
    big = rand(B, 2 * N, 2 * H, D + 3)
    q, k, v = big[:, ::2, :, :D], big[:, 1::2, :, 1:D + 1], big[:, ::2, :, 3:]
    check_close(dswa.diff_swa(q, k, v, window=3), q, k, v, 1e-5, 3, 3)


def test_scale_lambda_math():
    q, k, v = qkv(1, 25, 2, 8)
    for scale, lam in [(0.3, 0.5), (1.0, 0.0), (0.05, -1.5)]:
        out = dswa.diff_swa(q, k, v, window=4, scale=scale, lam=lam)
        check_close(out, q, k, v, 1e-5, 4, 4, scale, lam)
    for math in ("default", "tf32", "fp32"):
        check_close(dswa.diff_swa(q, k, v, window=4, math=math), q, k, v, 1e-5, 4, 4)


def test_float16():
    q, k, v = qkv(2, 50, 2, 32, dtype=np.float16)
    out = dswa.diff_swa(q, k, v, window=7)
    assert out.dtype == np.float16
    check_close(out, q, k, v, 2e-3, 7, 7)
    q, k, v = qkv(1, 20, 1, 16, dtype=np.float16, shared=True)
    check_close(dswa.diff_swa(q, k, v, window=2), q, k, v, 2e-3, 2, 2)


def test_out():
    B, N, H, D = 2, 19, 2, 8
    q, k, v = qkv(B, N, H, D)
    out = np.full((B, N, H, D), np.nan, np.float32)
    assert dswa.diff_swa(q, k, v, window=3, out=out) is out
    check_close(out, q, k, v, 1e-5, 3, 3)
    big = np.zeros((B, N, H + 1, D), np.float32)          # a strided slice of a larger array
    res = dswa.diff_swa(q, k, v, window=3, out=big[:, :, 1:])
    assert np.shares_memory(res, big) and (big[:, :, 0] == 0).all()
    check_close(big[:, :, 1:], q, k, v, 1e-5, 3, 3)
    t = np.empty((B, H, N, D), np.float32).transpose(0, 2, 1, 3)   # heads outside positions
    check_close(dswa.diff_swa(q, k, v, window=3, out=t), q, k, v, 1e-5, 3, 3)
    raises(ValueError, "out has shape", dswa.diff_swa, q, k, v, out=np.empty((B, N, 2 * H, D),
                                                                               np.float32))
    raises(ValueError, "out.dtype", dswa.diff_swa, q, k, v, out=np.empty((B, N, H, D)))
    ro = np.empty((B, N, H, D), np.float32)
    ro.flags.writeable = False
    raises(ValueError, "read-only", dswa.diff_swa, q, k, v, out=ro)


def test_argument_errors():
    q, k, v = qkv(1, 10, 2, 8)
    f = dswa.diff_swa
    raises(ValueError, "expected (B, N, 2H, D) or (B, N, 2, H, D)", f, q[0], k[0], v[0])
    raises(ValueError, "q.shape[2] = 3 must be even", f, q[:, :, :3], k[:, :, :3], v[:, :, :3])
    raises(ValueError, "k has shape (1, 9, 4, 8)", f, q, k[:, :9], v)
    raises(ValueError, "v has shape (1, 10, 3, 8)", f, q, k, v[:, :, :3])
    raises(ValueError, "k.dtype = float16", f, q, k.astype(np.float16), v)
    raises(ValueError, "dtype float64 is not supported", f, *(x.astype(np.float64) for x in (q, k, v)))
    raises(ValueError, "heads = 3 but", f, q, k, v, heads=3)
    assert f(q, k, v, heads=2).shape == (1, 10, 2, 8)
    raises(ValueError, "math = 'fast'", f, q, k, v, math="fast")
    raises(TypeError, "expected a torch.Tensor or a numpy.ndarray", f, q.tolist(), k, v)
    raises(ValueError, "but k is a builtins.list", f, q, k.tolist(), v)


def test_library_errors():
    q, k, v = qkv(1, 10, 2, 8)
    msg = raises(ValueError, "window_left = -2: must be >= 0", dswa.diff_swa, q, k, v,
                 window_left=-2)
    assert msg.startswith("dswa: ")
    raises(ValueError, "strides must be >= 0", dswa.diff_swa, q[:, ::-1], k, v)
    raises(ValueError, "overlap", dswa.diff_swa, q, k, v, out=q[:, :, :2])


def test_zero_size():
    q, k, v = qkv(0, 5, 2, 8)
    assert dswa.diff_swa(q, k, v).shape == (0, 5, 2, 8)
    q, k, v = qkv(2, 0, 2, 8)
    assert dswa.diff_swa(q, k, v).shape == (2, 0, 2, 8)


def test_prepare():
    q, k, v = qkv(2, 15, 2, 8, shared=True)
    run = dswa.prepare(q, k, v, window=2, lam=0.5)
    out = run()
    assert run() is out
    check_close(out, q, k, v, 1e-5, 2, 2, lam=0.5)
    q[:] = rand(*q.shape)                        # same buffers, new values
    check_close(run(), q, k, v, 1e-5, 2, 2, lam=0.5)


def test_library_lookup():
    assert dswa.library_path() and os.path.exists(dswa.library_path())
    code = ("import numpy as np, dswa\n"
            "x = np.zeros((1, 2, 2, 4), np.float32)\n"
            "try:\n    dswa.diff_swa(x, x, x)\n"
            "except dswa.LibraryNotFound as e:\n    print(e)\n")
    env = dict(os.environ, DSWA_LIB="/nonexistent/libdswa.so",
               PYTHONPATH=os.path.dirname(os.path.dirname(dswa.__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr                       # import works; the call raises
    assert "libdswa.so not found" in r.stdout and "/nonexistent/libdswa.so" in r.stdout, r.stdout


def _exported(_lib):
    out = []
    for sm in (80, 86, 89, 90, 100, 120):
        try:
            _lib.aot_kernel(f"sm_{sm}", _lib.F16, -1, -1)
            out.append(f"sm_{sm}")
        except ValueError:
            pass
    return out


def test_trt_launch_formulas_match_library():
    """The library's launch formulas (each extra's expr / expr_shared_v, the grid), evaluated
    on ints by dswa._lib.formula, equal what the library computes for the same problem
    (dswa_aot_kernel_for); tests/test_trt_layer.py does the same through TensorRT's symbolic
    shape expressions."""
    from dswa import trt, _lib
    aot_arch_or_skip()
    n = 0
    archs = _exported(_lib)
    for arch in archs:
        for dtype, math in ((_lib.F32, "default"), (_lib.F32, "fp32"), (_lib.F16, "default"),
                            (_lib.BF16, "default")):
            for B, N, H, shared, wl, wr, scale, lam in [
                    (1, 4352, 24, True, 17, 17, 0.125, 1.0), (2, 300, 3, False, 17, 17, 0.2, 0.5),
                    (3, 1000, 2, True, 5, 30, 0.125, -0.25), (2, 77, 1, False, 40, 40, 1.0, 1.0),
                    (2, 10, 2, False, 17, 17, 0.125, 1.0), (1, 12, 2, True, 30, 30, 0.1, 2.0)]:
                p = _lib.lib().dswa_problem_default(B, N, H, 64, 0)
                p.window_left, p.window_right, p.scale, p.lambda_, p.dtype = wl, wr, scale, lam, dtype
                p.math = _lib.MATH[math]
                if shared:
                    p.v.pair, p.v.seq, p.v.batch = 0, H * 64, N * H * 64
                if math == "fp32" and wl + wr > 48:   # fp32-accurate f32: band windows only
                    raises(ValueError, "band kernel only", trt._kernel, arch, dtype, wl, wr, math)
                    continue
                want, kernel = _lib.aot_kernel_for(arch, p), trt._kernel(arch, dtype, wl, wr, math)
                env = {"B": B, "N": N, "H": H, "D": 64, "scale": scale, "lambda_": lam}
                extras, grid = kernel.launch(env, shared)
                assert kernel.extras == want.extras
                assert extras == want.values, (arch, dtype, B, N, H, shared, extras, want.values)
                assert grid == want.grid_dims, (grid, want.grid_dims)
                assert kernel.block == want.block
                if N > max(wl, wr):   # then the kernel for the windows is the one launched
                    assert kernel.name == want.name and kernel.shared_bytes == want.shared_bytes
                assert kernel.target == arch and f".target {arch}" in kernel.ptx
                assert f".entry {kernel.name}(" in kernel.ptx.replace(".visible .entry", ".entry")
                n += 1
    assert n == 22 * len(archs)
    raises(RuntimeError, "unknown name X", _lib.formula, "X + 1", {})
    raises(RuntimeError, "cannot evaluate", _lib.formula, "N ** 2", {"N": 3})
    assert _lib.formula("min(17, N - 1) + float_bits(lambda)", {"N": 5, "lambda_": 1.0}) == \
        4 + 1065353216


def test_trt_device_arch():
    """The newest exported target not above the GPU's compute capability (asked of the
    library); DSWA_TRT_ARCH overrides, checked against the exported targets."""
    from dswa import trt, _lib
    aot_arch_or_skip()
    have = [int(a[3:]) for a in _exported(_lib)]
    saved, env = trt._capability, os.environ.pop("DSWA_TRT_ARCH", None)
    try:
        for cc in [(8, 0), (8, 7), (8, 9), (9, 0), (10, 3), (11, 0), (12, 1)]:
            fit = [a for a in have if a <= 10 * cc[0] + cc[1]]
            if not fit:
                continue
            trt._capability = lambda cc=cc: cc
            assert trt.device_arch() == f"sm_{fit[-1]}", (cc, have)
        trt._capability = lambda: (7, 5)
        raises(RuntimeError, "sm_75", trt.device_arch)
        os.environ["DSWA_TRT_ARCH"] = f"sm_{have[0]}"
        assert trt.device_arch() == f"sm_{have[0]}"
        os.environ["DSWA_TRT_ARCH"] = "sm_91"
        raises(ValueError, "DSWA_TRT_ARCH = sm_91", trt.device_arch)
    finally:
        trt._capability = saved
        os.environ.pop("DSWA_TRT_ARCH", None)
        if env is not None:
            os.environ["DSWA_TRT_ARCH"] = env


def test_trt_no_target_error():
    """When no target is exported the error is the meaningful one: the build's own refusal
    (no nvcc) at once, else the first target's (it lists the exported targets), never the last
    target tried. Checked with stand-in exports, then against this build."""
    from dswa import trt, _lib
    tried = []

    def refuse(status, why):
        def export(arch, *_):
            tried.append(arch)
            e = ValueError(f"{why} {arch}")
            e.status = status
            raise e
        return export
    e = raises(ValueError, "nvcc sm_80", trt._first_exported, range(80, 200),
               refuse(_lib.UNSUPPORTED, "nvcc"))
    assert tried == ["sm_80"], tried
    tried.clear()
    raises(ValueError, "not exported sm_90", trt._first_exported, range(90, 200),
           refuse(_lib.INVALID_ARGUMENT, "not exported"))
    assert len(tried) == 110, len(tried)
    assert trt._first_exported(range(80, 200), lambda a, *_: None) == "sm_80"
    try:
        arch = trt._some_arch()
    except ValueError as e:                   # this build exports nothing: it must say why
        assert e.status == _lib.UNSUPPORTED and "without nvcc" in str(e) and \
            "sm_199" not in str(e), str(e)
    else:                                     # the first exported target from sm_80 up
        _lib.aot_kernel(arch, _lib.F16, -1, -1)
        for sm in range(80, int(arch[3:])):
            raises(ValueError, "not exported", _lib.aot_kernel, f"sm_{sm}", _lib.F16, -1, -1)


def test_trt_register_without_tensorrt():
    try:
        import tensorrt  # noqa: F401
        skip("skipped: tensorrt is installed (test_trt.py covers it)")
    except ImportError:
        pass
    import dswa.trt
    raises(RuntimeError, "TensorRT's Python package is not installed", dswa.trt.register)
