"""Shared by the tests: the float64 reference, the error metric, skipping, optional imports,
LONG (DSWA_TEST_LONG=1).

The tests run under pytest or, without it, under run_all.py; a skip is unittest.SkipTest,
which both understand. The package is imported from the folder above the tests: this source
tree (python/), or, for a copy of the tests elsewhere (scripts/test-wheel.sh), the installed one.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

try:
    import torch
except Exception:
    torch = None

import dswa  # noqa: E402,F401

# DSWA_TEST_LONG=1: the slow variants too (every torch.compile with inductor, ...); the default
# keeps every check with the quickest means that still makes it (aim: < 30 s on an H200).
LONG = os.environ.get("DSWA_TEST_LONG") == "1"


def skip(why):
    if "pytest" in sys.modules:
        sys.modules["pytest"].skip(why)
    raise unittest.SkipTest(why)


def need_torch(feature=None):
    """Skips without torch, or (feature: a torch.library attribute) with a torch without it."""
    if torch is None:
        skip("skipped: torch not installed")
    if feature and not hasattr(torch.library, feature):
        skip(f"skipped: torch < 2.4 has no torch.library.{feature}")


def need_cuda(feature=None):
    """need_torch, then skips without a CUDA device for torch or for libdswa.so."""
    need_torch(feature)
    if not torch.cuda.is_available():
        skip("skipped: no CUDA device for torch")
    if not dswa.cuda_available():
        skip("skipped: libdswa.so has no CUDA backend or sees no device")


def aot_arch_or_skip():
    """A target the library exports; skipped (visibly) for a build without nvcc, which exports
    none. Any other refusal (a build with nvcc that exports nothing) is an error, not a skip."""
    from dswa import _lib, trt
    try:
        return trt._some_arch()
    except ValueError as e:
        if getattr(e, "status", None) != _lib.UNSUPPORTED:
            raise
        skip("skipped: this build of libdswa has no AOT export (built without nvcc)")


def to64(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x, np.float64)


def reference(q, k, v, window_left, window_right, scale, lam):
    """float64 out (B, N, H, D) for q, k (B, N, 2H, D) or (B, N, 2, H, D) and v like q or
    (B, N, H, D): softmax over keys j in [i - window_left, i + window_right] per pair, then
    pair 0 - lam * pair 1. Written from the definition, independently of the library; only
    the keys inside the window are visited (one pass per key offset), so the cost is that of
    the band, not N^2."""
    q, k, v = to64(q), to64(k), to64(v)
    B, N, D = q.shape[0], q.shape[1], q.shape[-1]
    q5, k5 = q.reshape(B, N, 2, -1, D), k.reshape(B, N, 2, -1, D)
    H = q5.shape[3]
    v5 = np.stack([v, v], 2) if v.shape == (B, N, H, D) else v.reshape(B, N, 2, H, D)
    offsets = range(-min(window_left, N - 1), min(window_right, N - 1) + 1)
    s = np.full((len(offsets), B, N, 2, H), -np.inf)
    for n, o in enumerate(offsets):             # key j = i + o for every query i it exists for
        i0, i1 = max(0, -o), min(N, N - o)
        s[n, :, i0:i1] = scale * np.einsum("bipht,bipht->biph", q5[:, i0:i1],
                                           k5[:, i0 + o:i1 + o])
    w = np.exp(s - s.max(0, keepdims=True))
    w /= w.sum(0, keepdims=True)
    a = np.zeros((B, N, 2, H, D))
    for n, o in enumerate(offsets):
        i0, i1 = max(0, -o), min(N, N - o)
        a[:, i0:i1] += w[n, :, i0:i1, ..., None] * v5[:, i0 + o:i1 + o]
    return a[:, :, 0] - lam * a[:, :, 1]


def rel_err(out, ref):
    out = to64(out)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert np.isfinite(out).all(), "non-finite output"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def check_close(out, q, k, v, tol, window_left=17, window_right=17, scale=None, lam=1.0):
    D = q.shape[-1]
    ref = reference(q, k, v, window_left, window_right, D ** -0.5 if scale is None else scale,
                    lam)
    err = rel_err(out, ref)
    assert err < tol, f"relative error {err:.3e} >= {tol:.1e}"
    return err


def raises(exc, fragment, fn, *a, **kw):
    """fn(*a, **kw) must raise exc with `fragment` in its message; returns the message."""
    try:
        fn(*a, **kw)
    except exc as e:
        assert fragment in str(e), f"{fragment!r} not in {str(e)!r}"
        return str(e)
    raise AssertionError(f"no {exc.__name__} raised (expected one saying {fragment!r})")
