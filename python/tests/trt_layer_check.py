"""dswa.trt (the op's plugin, then the fused block's: samel_* checks) against TensorRT's real
plugin layer (tensorrt.plugin from one bindings wheel, in SITE) with trt_standin.py in place of
the compiled core. One TensorRT version per process:

    python3 python/tests/trt_layer_check.py SITE      # prints PASS/FAIL per check, exit 1 on FAIL

Every registration goes through TensorRT's own decorators and validators; every build through
its plugin classes (creator, get_output_*, autotune combinations, get_launch_params,
get_kernel, fields to serialize), driven in the builder's order by trt_standin.Builder.
"""
import ctypes
import os
import sys
import traceback
import types
from typing import Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import trt_standin  # noqa: E402
from _util import raises as expect  # noqa: E402

SITE = sys.argv[1]
ARCH = os.environ.get("DSWA_TEST_TRT_ARCH", "")     # default: the first target the library has




# ---- before TensorRT is importable: the messages for a missing / too old TensorRT ----------
import dswa.trt as dt  # noqa: E402
from dswa import _lib  # noqa: E402

checks = []


def check(fn):
    checks.append(fn)
    return fn


# docs/AOT.md's examples are checked where the tests sit in the repository (python/tests); a
# copy of the tests run against an installed wheel (scripts/test-wheel.sh) has no docs/.
AOT_DOC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "AOT.md")
AOT_DOC_SKIP = f"skipped: {AOT_DOC} not found (the tests run outside the repository)"


def aot_doc():
    return open(AOT_DOC).read() if os.path.exists(AOT_DOC) else None


@check
def no_tensorrt_messages():
    sys.modules["tensorrt"] = None                    # import tensorrt fails
    expect(RuntimeError, "is not installed", dt.register, "dswatest::x")
    old = types.ModuleType("tensorrt")
    old.__version__ = "10.5.0"
    old.__path__ = []                                 # a package without .plugin
    sys.modules["tensorrt"] = old
    expect(RuntimeError, "TensorRT 10.5.0 is installed but has no tensorrt.plugin",
           dt.register, "dswatest::x")
    del sys.modules["tensorrt"]


for fn in list(checks):
    fn()
checks.clear()
trt, trtp = trt_standin.load(SITE)
VERSION = trt.__version__
HAS_AOT = hasattr(trtp, "aot_impl")
B_ = trt_standin.Builder(trt, trtp)
TRT_DT = {_lib.F32: trt.float32, _lib.F16: trt.float16, _lib.BF16: trt.bfloat16}
if not ARCH:
    ARCH = dt._some_arch()
D = 64
PROFILE = {"B": (1, 2, 4), "N": (1, 300, 5000)}


def registered(pid):
    tl = sys.modules["tensorrt.plugin._lib"]
    ns, name = pid.split("::")
    space = trtp.op.__dict__.get(ns)
    return (pid in tl.QDP_REGISTRY, space is not None and name in space.__dict__,
            trt.get_plugin_registry().get_creator(name, "1", ns) is not None)


def inputs(dtype, H, shared, dims=("B", "N")):
    t = TRT_DT[dtype]
    return [(t, dims + (2 * H, D)), (t, dims + (2 * H, D)), (t, dims + ((H if shared else 2 * H), D))]


def build(pid, dtype, H, shared, request="UNKNOWN", profile=PROFILE, dims=("B", "N"), ins=None):
    return B_.build(pid, ins or inputs(dtype, H, shared, dims), {"config": dt.attrs(pid)},
                    profile, request)


def problem(B, N, H, dtype, shared, cfg):
    p = _lib.lib().dswa_problem_default(B, N, H, D, 0)
    p.window_left, p.window_right = cfg.window_left, cfg.window_right
    p.scale = D ** -0.5 if cfg.scale is None else cfg.scale
    p.lambda_, p.dtype, p.math = cfg.lam, dtype, _lib.MATH[cfg.math]
    if shared:
        p.v = _lib.layout((N * H * D, H * D, D, 1), H, 1)
    return p


# ---- registration ---------------------------------------------------------------------------
@check
def register_signatures_and_capabilities():
    """TensorRT's validators accept register/impl/aot_impl/autotune (they run inside
    trtp.register & co.); without aot_impl (10.6-10.8) nothing is left half-registered."""
    if HAS_AOT:
        dt.register(dt.PLUGIN_ID, arch=ARCH)                          # SAME-L defaults
        dt.register(dt.PLUGIN_ID, arch=ARCH)                          # same again: no-op
        expect(ValueError, "already registered with other settings", dt.register,
               dt.PLUGIN_ID, window=9, arch=ARCH)
        dt.register("dswatest::both", arch=ARCH, impl="both")
        assert registered("dswatest::both") == (True, True, True)
        return
    pid = "dswatest::noaot"
    expect(RuntimeError, "has no aot_impl (added in 10.9)", dt.register, pid)
    assert registered(pid) == (False, False, False), registered(pid)
    dt.register(pid, impl="jit")                  # the retry works: nothing was left behind
    assert registered(pid) == (True, True, True)


@check
def register_is_atomic():
    """A failure inside the decorators (here: autotune's, forced) undoes the registration."""
    pid = "dswatest::atomic"
    real = trtp.autotune

    def broken(plugin_id):
        raise ValueError("forced failure")
    trtp.autotune = broken
    try:
        expect(ValueError, "forced failure", dt.register, pid, impl="aot" if HAS_AOT else "jit",
               arch=ARCH if HAS_AOT else None)
    finally:
        trtp.autotune = real
    assert registered(pid) == (False, False, False), registered(pid)
    dt.register(pid, impl="aot" if HAS_AOT else "jit", arch=ARCH if HAS_AOT else None)
    assert registered(pid) == (True, True, True)


@check
def bad_settings_refused_with_library_messages():
    """register() refuses what the library refuses, with the library's own message."""
    for kw, field in (({"window": -1}, "window_left"), ({"window_right": -3}, "window_right"),
                      ({"scale": float("inf")}, "scale"), ({"lam": float("nan")}, "lambda")):
        cfg = dict(window=17, window_left=None, window_right=None, scale=None, lam=1.0)
        cfg.update(kw)
        p = _lib.lib().dswa_problem_default(1, 1, 1, 64, 0)
        p.window_left = cfg["window"] if cfg["window_left"] is None else cfg["window_left"]
        p.window_right = cfg["window"] if cfg["window_right"] is None else cfg["window_right"]
        p.scale = 1.0 if cfg["scale"] is None else cfg["scale"]
        p.lambda_ = cfg["lam"]
        lib_msg = expect(ValueError, field, _lib.validate, p)       # the library's words
        msg = expect(ValueError, field, dt.register, "dswatest::bad", **kw)
        assert msg == lib_msg, (msg, lib_msg)
        assert registered("dswatest::bad") == (False, False, False)
    expect(ValueError, "math = 'fast'", dt.register, "dswatest::bad", math="fast")
    expect(ValueError, "impl = 'both2'", dt.register, "dswatest::bad", impl="both2")
    expect(ValueError, "window_left = 1.5: must be an int", dt.register, "dswatest::bad",
           window=1.5)
    expect(ValueError, "must fit in int32", dt.register, "dswatest::bad", window=2 ** 31)
    if HAS_AOT:
        expect(ValueError, "fp32-accurate kernel is the band kernel only", dt.register,
               "dswatest::bad", window_left=5, window_right=50, math="fp32", arch=ARCH)
        expect(ValueError, "arch = sm_75: not exported", dt.register, "dswatest::bad",
               arch="sm_75")
        os.environ["DSWA_TRT_ARCH"] = "sm_91"
        try:
            expect(ValueError, "DSWA_TRT_ARCH = sm_91: dswa: invalid argument: arch = sm_91: "
                   "not exported", dt.register, "dswatest::bad")
        finally:
            del os.environ["DSWA_TRT_ARCH"]
        assert registered("dswatest::bad") == (False, False, False)


@check
def config_attribute_round_trips():
    for c in (dt.config(), dt.config(window_left=5, window_right=50, scale=0.2, lam=0.5),
              dt.config(0, math="fp32"), dt.config(3, scale=1e-3, lam=-2.75, math="tf32")):
        assert dt.parse(str(c)) == c, (str(c), dt.parse(str(c)))
    assert str(dt.config()) == "window_left=17;window_right=17;scale=default;lambda=1;" \
        "math=default"
    assert str(dt.config(3, scale=0.2, lam=-0.75)) == \
        "window_left=3;window_right=3;scale=0.2;lambda=-0.75;math=default"
    expect(ValueError, "expected window_left=...", dt.parse, "window=17")
    expect(ValueError, "window_left = -1: must be >= 0", dt.parse,
           "window_left=-1;window_right=17;scale=default;lambda=1.0;math=default")
    expect(ValueError, "could not convert", dt.parse,
           "window_left=1;window_right=17;scale=x;lambda=1.0;math=default")


# ---- launches ---------------------------------------------------------------------------------
WINDOWS = [(17, 17), (0, 0), (5, 50), (48, 0), (3, 40), (100, 2), (1, 300)]
SIZES = [(1, 1), (1, 2), (2, 5), (1, 17), (3, 18), (1, 63), (2, 64), (1, 65), (4, 100),
         (1, 1000), (2, 4097), (1, 5000)]


@check
def launch_matches_library():
    """For every dtype, both V layouts, band/wide/asymmetric windows and H in {1, 3, 24}: one
    build with dynamic (B, N); its symbolic extras, grid, block and shared memory evaluated at
    each (B, N) equal what dswa_aot_kernel_for computes for that problem."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    n = 0
    for wi, (wl, wr) in enumerate(WINDOWS):
        maths = ["default", "fp32"] if wl + wr <= 48 else ["default"]
        for math in maths:
            pid = f"dswatest::w{wi}_{math}"
            dt.register(pid, window_left=wl, window_right=wr, math=math, arch=ARCH,
                        lam=0.75 if wi % 2 else 1.0, scale=None if wi % 3 else 0.3)
            cfg = dt.parse(dt.attrs(pid))
            for dtype in (_lib.F32, _lib.F16, _lib.BF16):
                if math == "fp32" and dtype != _lib.F32:
                    continue
                for H in (1, 3, 24):
                    for shared in (True, False):
                        b = build(pid, dtype, H, shared)
                        assert b.aot and b.supported
                        assert b.output_types == [TRT_DT[dtype]]
                        assert [repr(x) for x in b.output_shapes[0]] == ["B", "N", str(H), "64"]
                        assert all(t == trt.PluginArgDataType.INT32 for t in b.extra_types)
                        for B, N in SIZES:
                            env = {"B": B, "N": N}
                            ref = _lib.aot_kernel_for(ARCH, problem(B, N, H, dtype, shared, cfg))
                            got = [e.value(env) for e in b.extras]
                            assert got == ref.values, (pid, dtype, H, shared, B, N, got,
                                                       ref.values)
                            g = tuple(b.launch[k].value(env) for k in ("grid_x", "grid_y",
                                                                        "grid_z"))
                            assert g == ref.grid_dims, (g, ref.grid_dims)
                            blk = tuple(b.launch[k].value(env) for k in ("block_x", "block_y",
                                                                          "block_z"))
                            assert blk == ref.block, (blk, ref.block)
                            assert b.launch["shared_mem"].value(env) == ref.dynamic_shared_bytes
                            # the kernel: the library's for these windows at every N above
                            # them; below, the library clamps the windows first and may take
                            # the band kernel where the engine keeps the (any-window) wide one
                            if N > max(wl, wr) or ref.family == "wide" or wl + wr <= 48:
                                assert b.kernel_name == ref.name, (b.kernel_name, ref.name, N)
                            ptx = b.ptx.decode()
                            assert f".entry {b.kernel_name}(" in ptx
                            assert f".target {ARCH}\n" in ptx
                            n += 1
    return f"{n} launches compared"


@check
def fixed_shapes_fold_and_match():
    """Static shapes: every expression folds to a constant (aot_impl then compares them with
    the library's itself), equal to dswa_aot_kernel_for's."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    cfg = dt.parse(dt.attrs(dt.PLUGIN_ID))
    for B, N in ((1, 1), (1, 4352), (3, 21964)):
        b = build(dt.PLUGIN_ID, _lib.BF16, 24, True, dims=(B, N), profile={})
        assert all(e.is_constant() for e in b.extras)
        ref = _lib.aot_kernel_for(ARCH, problem(B, N, 24, _lib.BF16, True, cfg))
        assert [e.const for e in b.extras] == ref.values
        assert tuple(b.launch[k].const for k in ("grid_x", "grid_y", "grid_z")) == ref.grid_dims


@check
def creation_defaults():
    """Which implementation the builder gets for each network flag."""
    if not HAS_AOT:
        b = build("dswatest::noaot", _lib.F16, 2, True)
        assert not b.aot
        return "JIT only (no aot_impl)"
    for req in ("UNKNOWN", "PREFER_AOT", "PREFER_JIT", "STRICT_AOT"):
        assert build(dt.PLUGIN_ID, _lib.F16, 2, True, request=req).aot, req
    expect(ValueError, "JIT implementation requested, but not defined", build, dt.PLUGIN_ID,
           _lib.F16, 2, True, request="STRICT_JIT")
    expect(ValueError, "PREFER_AOT_PYTHON_PLUGINS", build, "dswatest::both", _lib.F16, 2, True)
    assert build("dswatest::both", _lib.F16, 2, True, request="PREFER_AOT").aot
    assert not build("dswatest::both", _lib.F16, 2, True, request="PREFER_JIT").aot


# ---- refusals at build time --------------------------------------------------------------------
@check
def bad_layers_refused_at_build():
    pid = dt.PLUGIN_ID if HAS_AOT else "dswatest::noaot"
    t32, t16, tbf = trt.float32, trt.float16, trt.bfloat16
    mixes = [(t32, t16, t32), (tbf, tbf, t16), (t16, t32, t32), (trt.int32,) * 3]
    for mix in mixes:
        ins = [(t, ("B", "N", 4, D)) for t in mix]
        expect(ValueError, "all three must be one of float32", build, pid, 0, 2, False, ins=ins)
        # TensorRT's own negotiation, from the autotune declaration: not offered either
        plugin = trt.get_plugin_registry().get_creator(*pid.split("::")[::-1][:1], "1",
                                                        pid.split("::")[0])
        assert plugin is not None
    b = build(pid, _lib.F16, 2, True)
    assert set(b.combinations) == {(t,) * 4 for t in (t32, t16, tbf)}, b.combinations
    expect(ValueError, "config", B_.build, pid, inputs(_lib.F16, 2, True),
           {"config": str(dt.config(9))}, PROFILE)
    shape_cases = [
        ([(t16, ("B", "N", 4, D)), (t16, ("B", "N", 6, D)), (t16, ("B", "N", 4, D))],
         "k_bat.shape[2] = 6 but q_bat.shape[2] = 4"),
        ([(t16, ("B", "N", 4, D)), (t16, ("B", "N", 4, D)), (t16, ("B", "N", 3, D))],
         "v_bat.shape[2] = 3: must be 2H = 4, or H = 2"),
        ([(t16, ("B", "N", 5, D))] * 3, "q_bat.shape[2] = 5: must be 2H, even"),
        ([(t16, ("B", "N", 4, "D"))] * 3, "q_bat.shape[3] (D) is dynamic"),
        ([(t16, ("B", "N", "H", D))] * 3, "q_bat.shape[2] = dynamic"),
        ([(t16, ("B", "N", 4))] * 3, "q_bat has rank 3: must be 4"),
        ([(t16, ("B", 100, 4, D)), (t16, ("B", "N", 4, D)), (t16, ("B", 100, 4, D))],
         "k_bat.shape[1] = dynamic but q_bat.shape[1] = 100"),
        ([(t16, ("B", "N", 4, D)), (t16, ("B", "N", 4, D)), (t16, ("B", "N", 4, 32))],
         "v_bat.shape[3] = 32 but q_bat.shape[3] = 64"),
    ]
    prof = dict(PROFILE, D=(32, 64, 64), H=(4, 4, 4))
    for ins, msg in shape_cases:
        expect(ValueError, msg, B_.build, pid, ins, {"config": dt.attrs(pid)}, prof)
    if not HAS_AOT:
        return
    # what only the profile shows: caught in aot_impl, with the library's message where it has one
    lib_cases = [
        ({"B": (1, 1, 1), "N": (0, 64, 100)}, "N = 0", "an empty problem launches no kernel"),
        ({"B": (0, 1, 1), "N": (1, 64, 100)}, "B = 0", "an empty problem launches no kernel"),
        ({"B": (1, 1, 8), "N": (1, 64, 2 ** 20)}, "max", "int32"),
    ]
    for prof, where, msg in lib_cases:
        e = expect(ValueError, msg, build, pid, _lib.F16, 24, False, profile=prof)
        assert where in e, e
    big = {"B": (1, 1, 1), "N": (1, 64, 2 ** 31)}
    expect(ValueError, "the kernels take B and N as int32", build, pid, _lib.F16, 2, False,
           profile=big)
    # D other than 64: the library's refusal, with its message
    ins = [(t16, ("B", "N", 4, 32))] * 3
    e = expect(ValueError, "head_dim", B_.build, pid, ins, {"config": dt.attrs(pid)}, PROFILE)
    assert "at the profile's min" in e
    # q and k dynamic with different profile ranges
    ins = [(t16, ("B", "N", 4, D)), (t16, ("B", "M", 4, D)), (t16, ("B", "N", 4, D))]
    expect(ValueError, "k_bat's N (dim 1) ranges over min/opt/max [1, 300, 4000]", B_.build,
           pid, ins, {"config": dt.attrs(pid)}, dict(PROFILE, M=(1, 300, 4000)))


# ---- the JIT path: serialization and the trtp.op call --------------------------------------
def jit_run(pid, fields, request):
    """The run-time side of a JIT engine: creator.create_plugin(RUNTIME) with the engine's
    fields, then enqueue (at run time TensorRT calls no build-phase method), with the library's
    dswa_forward_cuda recording the problem it is handed."""
    ns, name = pid.split("::")
    creator = trt.get_plugin_registry().get_creator(name, "1", ns)
    fc = trt.PluginFieldCollection(fields)
    if HAS_AOT:
        plg = creator.create_plugin(name, ns, fc, trt.TensorRTPhase.RUNTIME,
                                    getattr(trt.QuickPluginCreationRequest, request))
    else:
        plg = creator.create_plugin(name, ns, fc, trt.TensorRTPhase.RUNTIME)
    seen = {}

    class FakeLib:
        def __getattr__(self, attr):
            return getattr(real(), attr)

        def dswa_forward_cuda(self, p, q, k, v, o, stream):
            pr = p._obj
            seen.update(wl=pr.window_left, wr=pr.window_right, scale=pr.scale, lam=pr.lambda_,
                        math=pr.math, H=pr.heads, vpair=pr.v.pair, ptrs=(q, k, v, o),
                        stream=stream)
            return 0
    real = _lib.lib
    _lib.lib = lambda: FakeLib()
    try:
        descs = []
        for h in (4, 4, 2, 2):
            d = trt.PluginTensorDesc()
            d.dims, d.type = trt.Dims([1, 10, h, D]), trt.float16
            descs.append(d)
        plg.enqueue(descs[:3], descs[3:], [1024, 2048, 3072], [4096],
                    [(40 * h * D // 10, h * D, D, 1) for h in (4, 4, 2)], [(10 * 2 * D, 2 * D, D, 1)],
                    77)
    finally:
        _lib.lib = real
    return seen


@check
def jit_settings_are_the_registrations():
    """A JIT implementation names no attribute (TensorRT would fail on a node without it), so a
    JIT engine stores no fields; at run time it runs the settings its id is registered with,
    which were checked against the node when the engine was built. An engine stored with a
    `config` field still loads."""
    pid = "dswatest::jitcfg"
    dt.register(pid, window_left=2, window_right=7, scale=0.25, lam=0.5, math="tf32",
                impl="jit")
    b = build(pid, _lib.F16, 2, True)
    assert not b.aot and b.serialized == {}, b.serialized
    want = {"wl": 2, "wr": 7, "scale": 0.25, "lam": 0.5, "math": _lib.MATH["tf32"], "H": 2,
            "vpair": 0, "ptrs": (1024, 2048, 3072, 4096), "stream": 77}
    request = "STRICT_JIT" if HAS_AOT else "UNKNOWN"
    assert jit_run(pid, [], request) == want
    old = trt.PluginField("config", dt.attrs(pid).encode(), trt.PluginFieldType.CHAR)
    assert jit_run(pid, [old], request) == want
    if HAS_AOT:          # "both", built preferring JIT: the same
        b = build("dswatest::both", _lib.F16, 2, True, request="PREFER_JIT")
        assert not b.aot and b.serialized == {}, b.serialized


@check
def network_call_with_current_numpy():
    """trtp.op.<ns>.<name>(q, k, v, num_heads=..., config=...) -- the network API's path (the
    one an `int` attribute breaks with NumPy >= 2.4 before TensorRT 11.4) -- creates the plugin;
    num_heads comes from q's fixed dims, or is given for dynamic heads."""
    pid = dt.PLUGIN_ID if HAS_AOT else "dswatest::noaot"
    ts = [trt.ITensor((-1, -1, h, D)) for h in (4, 4, 2)]
    for kw in ({}, {"num_heads": 2}):
        make = dt.op(*ts, plugin_id=pid, **kw)
        if callable(make):         # 10.9+: a function of the creation request
            make = make(trt.QuickPluginCreationRequest.UNKNOWN) if HAS_AOT else make()
        ins, _, plg = make
        assert ins == ts and set(plg.attrs) == {"num_heads", "config"}, plg.attrs
        nh = plg.attrs["num_heads"]
        assert nh.dtype == np.int32 and nh.tolist() == [2], nh
        assert plg.attrs["config"] == dt.attrs(pid)
    dyn = [trt.ITensor((-1, -1, -1, D)) for _ in range(3)]
    expect(ValueError, "shape[2] must be 2H, fixed and even (or pass num_heads=H)", dt.op,
           *dyn, plugin_id=pid)
    expect(ValueError, "num_heads = 2.5: must be an int", dt.op, *dyn, plugin_id=pid,
           num_heads=2.5)
    return f"numpy {np.__version__}"


# ---- the node as SAME-L's published graphs carry it --------------------------------------------
def build_node(pid, node, dtype, H, shared, request="UNKNOWN", profile=PROFILE, ins=None):
    """One layer of `node` built as TensorRT builds a parsed ONNX node: its attributes handed to
    pid's creator as the ONNX parser hands them (trt_standin.onnx_plugin_fields)."""
    fields = trt_standin.onnx_plugin_fields(pid, node)
    return B_.build(pid, ins or inputs(dtype, H, shared), fields, profile, request)


@check
def published_node_builds():
    """The published node, unchanged, through register()'s AOT plugin: created, its output
    shape inferred, and for dynamic B and N the launch (extras, grid, block, shared memory,
    kernel) equal to dswa_aot_kernel_for's; V duplicated (2H heads, as the graphs feed it) or
    shared (H). With a config attribute too (both given): the same launch."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    pid = dt.PLUGIN_ID
    cfg = dt.parse(dt.attrs(pid))
    n = 0
    for node in (trt_standin.published_node(24),
                 trt_standin.published_node(24, config=dt.attrs(pid))):
        for dtype in (_lib.F32, _lib.F16, _lib.BF16):
            for shared in (False, True):
                b = build_node(pid, node, dtype, 24, shared)
                assert b.aot and b.supported
                assert b.plugin.attrs["num_heads"].tolist() == [24]
                assert b.plugin.attrs["num_heads"].dtype == np.int32
                assert [repr(x) for x in b.output_shapes[0]] == ["B", "N", "24", "64"]
                assert b.output_types == [TRT_DT[dtype]]
                for B, N in SIZES:
                    env = {"B": B, "N": N}
                    ref = _lib.aot_kernel_for(ARCH, problem(B, N, 24, dtype, shared, cfg))
                    assert [e.value(env) for e in b.extras] == ref.values, (B, N)
                    assert tuple(b.launch[k].value(env) for k in ("grid_x", "grid_y", "grid_z")) \
                        == ref.grid_dims
                    assert tuple(b.launch[k].value(env) for k in ("block_x", "block_y",
                                                                  "block_z")) == ref.block
                    assert b.launch["shared_mem"].value(env) == ref.dynamic_shared_bytes
                    assert b.kernel_name == ref.name
                    n += 1
    return f"numpy {np.__version__}, {n} launches compared"


@check
def published_node_jit():
    """The published node through register(impl="jit") (SAME-L's settings): created and built
    as JIT; at run time, with the engine's (empty) fields, SAME-L's settings."""
    pid = "dswatest::pubjit"
    dt.register(pid, impl="jit")
    b = build_node(pid, trt_standin.published_node(2), _lib.F16, 2, True)
    assert not b.aot and b.supported and b.serialized == {}, b.serialized
    assert [repr(x) for x in b.output_shapes[0]] == ["B", "N", "2", "64"]
    seen = jit_run(pid, [], "STRICT_JIT" if HAS_AOT else "UNKNOWN")
    assert (seen["wl"], seen["wr"], seen["scale"], seen["lam"]) == dt.SAMEL_IMPLIED, seen
    return f"numpy {np.__version__}"


@check
def published_node_refusals():
    """num_heads against the inputs' 2H; a node without config against a registration with other
    settings; a config that disagrees; num_heads that is not one positive integer."""
    pid = dt.PLUGIN_ID if HAS_AOT else "dswatest::pubjit"
    e = expect(ValueError, "num_heads = 12 but q_bat.shape[2] = 48", build_node, pid,
               trt_standin.published_node(12), _lib.F16, 24, False)
    assert "2 * num_heads = 24" in e, e
    expect(ValueError, "num_heads = [0]: must be one integer > 0", build_node, pid,
           trt_standin.published_node(0), _lib.F16, 24, False)
    other = "dswatest::w9node"
    dt.register(other, window=9, arch=ARCH, impl="aot" if HAS_AOT else "jit")
    e = expect(ValueError, "the node has no config attribute, which means SAME-L's settings",
               build_node, other, trt_standin.published_node(2), _lib.F16, 2, False)
    assert "registered with window_left=9, window_right=9" in e, e
    build_node(other, trt_standin.published_node(2, config=dt.attrs(other)), _lib.F16, 2,
               False)
    expect(ValueError, "is not the registered", build_node, other,
           trt_standin.published_node(2, config=dt.attrs(pid)), _lib.F16, 2, False)


@check
def published_node_with_an_int_annotation():
    """What the same node does to a plugin that annotates num_heads as a Python int, as
    upstream's own does: on TensorRT's layer before 11.4 with NumPy >= 2.4 its creation fails
    (int() of a one-element array); dswa's int32-array annotation builds everywhere
    (published_node_builds, published_node_jit). Recorded in the note, asserted as expected."""
    import inspect as _inspect
    pid = "dswatest::intannot"

    def desc(q_bat: trtp.TensorDesc, k_bat: trtp.TensorDesc, v_bat: trtp.TensorDesc,
             num_heads: int) -> trtp.TensorDesc:
        s = q_bat.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 2, s[3]), dtype=q_bat.dtype)

    def impl(q_bat: trtp.Tensor, k_bat: trtp.Tensor, v_bat: trtp.Tensor, num_heads: int,
             outputs: Tuple[trtp.Tensor], stream: int) -> None:
        pass
    trtp.register(pid)(desc)
    trtp.impl(pid)(impl)
    lib_src = _inspect.getsource(sys.modules["tensorrt.plugin._lib"])
    size1_fix = "f.data.size == 1" in lib_src
    numpy_24 = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 4)
    try:
        build_node(pid, trt_standin.published_node(2), _lib.F16, 2, True)
        outcome = None
    except TypeError as e:
        outcome = str(e)
    if numpy_24 and not size1_fix:
        assert outcome and "0-dimensional" in outcome, outcome
        return f"numpy {np.__version__}: an int-annotated plugin fails here ({outcome})"
    assert outcome is None, outcome
    return f"numpy {np.__version__}: an int-annotated plugin builds here"


@check
def docs_aot_example():
    """docs/AOT.md's aot_impl example, registered through TensorRT's plugin layer (its
    validator requires the return annotation), launches what the library computes."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    import re
    import textwrap
    doc = aot_doc()
    if doc is None:
        return AOT_DOC_SKIP
    block = re.search(r"In an `aot_impl`.*?```python\n(.*?)```", doc, re.S).group(1)
    k = _lib.aot_kernel(ARCH, _lib.F16, 17, 17)
    ns = {"meta": {"kernel": k.name}, "ptx": k.ptx, "WL": 17, "WR": 17,
          "SCALE_BITS": _lib.float_bits(0.125), "LAMBDA_BITS": _lib.float_bits(1.0)}
    code = textwrap.dedent(block)
    # without the return annotation (as this example once was) TensorRT refuses it
    bare = re.sub(r"\n\s*\) -> Tuple\[.*?trtp.SymIntExprs\]:", "):", code, flags=re.S)
    bare = bare.replace("dswa::attention", "dswa::bare")
    assert bare != code
    expect(ValueError, "No return annotation found for aot_impl", exec, bare, dict(ns))
    exec(code, ns)
    b = B_.build("dswa::attention", inputs(_lib.F16, 3, False), {}, PROFILE)
    cfg = dt.config()
    for B, N in SIZES:
        ref = _lib.aot_kernel_for(ARCH, problem(B, N, 3, _lib.F16, False, cfg))
        assert [e.value({"B": B, "N": N}) for e in b.extras] == ref.values
        assert tuple(b.launch[x].value({"B": B, "N": N}) for x in ("grid_x", "grid_y", "grid_z")) \
            == ref.grid_dims



# ---- the fused SAME-L block: samel::samel_attention -------------------------------------------
SPID = dt.SAMEL_PLUGIN_ID


def samel_inputs(dtype, H, dims=("B", "N"), d=D):
    return [(TRT_DT[dtype], dims + (5 * H * d,))] + [(trt.float32, (d,))] * 4


def samel_build(pid, dtype, H, cfg, request="UNKNOWN", profile=PROFILE, dims=("B", "N"),
                ins=None):
    return B_.build(pid, ins or samel_inputs(dtype, H, dims), {"config": str(cfg)}, profile,
                    request)


def samel_problem(B, N, H, dtype, c):
    """The dswa_samel_problem for contiguous SAME-L tensors and settings c, from the library's
    default (not from dswa.trt); the norm weights at stand-in addresses (never read)."""
    p = _lib.lib().dswa_samel_problem_default(B, N, H)
    p.window_left, p.window_right = c.window_left, c.window_right
    p.scale = 0.125 if c.scale is None else c.scale
    p.lambda_, p.dtype, p.math = c.lam, dtype, _lib.MATH[c.math]
    p.rot_dims, p.rope_base, p.pos_offset = c.rot_dims, c.base, c.pos_offset
    if c.freq is not None:
        p.own_freq = (ctypes.c_float * 32)(*c.freq)        # alive with p
        p.rope_freq = ctypes.cast(p.own_freq, ctypes.c_void_p)
    p.q_norm.alpha, p.k_norm.alpha = c.q_alpha, c.k_alpha
    top = 2 ** 63
    p.q_norm.gamma, p.q_norm.beta, p.k_norm.gamma, p.k_norm.beta = (top + i * 4096
                                                                     for i in range(4))
    return p


def samel_field_refusal(field, value):
    """The library's own message for one bad field of an otherwise valid empty problem."""
    p = _lib.lib().dswa_samel_problem_default(0, 1, 1)
    if field in ("q_alpha", "k_alpha"):
        setattr(p.q_norm if field == "q_alpha" else p.k_norm, "alpha", value)
    else:
        setattr(p, {"lam": "lambda_", "base": "rope_base"}.get(field, field), value)
    return expect(ValueError, "invalid argument", _lib.check,
                  _lib.lib().dswa_samel_validate(ctypes.byref(p), None, None))


@check
def samel_register_and_capabilities():
    """register_samel through TensorRT's validators; on 10.6-10.8 nothing half-registered."""
    if HAS_AOT:
        dt.register_samel(arch=ARCH)
        dt.register_samel(arch=ARCH)                                  # same again: no-op
        expect(ValueError, "already registered with other settings", dt.register_samel,
               arch=ARCH, impl="both")
        expect(ValueError, "already registered with other settings", dt.register_samel,
               dt.PLUGIN_ID, arch=ARCH)                               # the op's id
        expect(ValueError, "is the fused block's plugin", dt.attrs, SPID)
        dt.register_samel("dswatest::sboth", arch=ARCH, impl="both")
        assert registered("dswatest::sboth") == (True, True, True)
        return
    pid = "dswatest::snoaot"
    expect(RuntimeError, "has no aot_impl (added in 10.9)", dt.register_samel, pid)
    assert registered(pid) == (False, False, False), registered(pid)
    dt.register_samel(pid, impl="jit")
    assert registered(pid) == (True, True, True)


@check
def samel_register_is_atomic():
    pid = "dswatest::satomic"
    real = trtp.autotune

    def broken(plugin_id):
        raise ValueError("forced failure")
    trtp.autotune = broken
    kw = {"impl": "aot", "arch": ARCH} if HAS_AOT else {"impl": "jit"}
    try:
        expect(ValueError, "forced failure", dt.register_samel, pid, **kw)
    finally:
        trtp.autotune = real
    assert registered(pid) == (False, False, False), registered(pid)
    dt.register_samel(pid, **kw)
    assert registered(pid) == (True, True, True)


SAMEL_BAD = [("window_left", -1), ("window_right", -3), ("scale", float("inf")),
             ("lam", float("nan")), ("rot_dims", 3), ("rot_dims", 66), ("rot_dims", -2),
             ("base", 0.0), ("base", float("-inf")), ("pos_offset", -1),
             ("q_alpha", float("nan")), ("k_alpha", float("inf"))]


@check
def samel_bad_settings_refused_with_library_messages():
    """samel_config, and a layer whose config carries a bad value (refused when the builder
    asks for its output), both with the library's own message (dswa_samel_validate)."""
    for field, value in SAMEL_BAD:
        lib_msg = samel_field_refusal(field, value)
        msg = expect(ValueError, "invalid argument", dt.samel_config, **{field: value})
        assert msg == lib_msg, (field, msg, lib_msg)
        good = str(dt.samel_config())
        key = {"lam": "lambda"}.get(field, field)
        text = ";".join(f"{key}={value}" if kv.split("=")[0] == key else kv
                        for kv in good.split(";"))
        if HAS_AOT:
            e = expect(ValueError, lib_msg, B_.build, SPID, samel_inputs(_lib.F16, 2),
                       {"config": text}, PROFILE)
            assert e == lib_msg, (e, lib_msg)
    expect(ValueError, "math = 'fast'", dt.samel_config, math="fast")
    expect(ValueError, "rot_dims = 1.5: must be an int", dt.samel_config, rot_dims=1.5)
    expect(ValueError, "pos_offset = 2147483648: must fit in int32", dt.samel_config,
           pos_offset=2 ** 31)
    expect(ValueError, "base = '1': must be a number", dt.samel_config, base="1")
    expect(ValueError, "impl = 'x'", dt.register_samel, "dswatest::sbad", impl="x")
    if HAS_AOT:
        expect(ValueError, "arch = sm_75: not exported", dt.register_samel, "dswatest::sbad",
               arch="sm_75")
    assert registered("dswatest::sbad") == (False, False, False)


@check
def samel_config_attribute_round_trips():
    for c in (dt.samel_config(),
              dt.samel_config(window_left=5, window_right=50, scale=0.2, lam=0.5, rot_dims=16,
                              base=500.5, pos_offset=1000, q_alpha=0.7834, k_alpha=-1.25,
                              math="fp32"),
              dt.samel_config(0, rot_dims=0, base=1e-3, q_alpha=1e-30, k_alpha=3e38),
              dt.samel_config(pos_offset=2 ** 31 - 1, base=3e20),
              dt.samel_config(rot_dims=8, freq=[1.0, 0.1, 3e-5, 0.0]),
              dt.samel_config(rot_dims=0, freq=[])):
        assert dt.samel_parse(str(c)) == c, (str(c), dt.samel_parse(str(c)))
    c = dt.samel_config(rot_dims=4, freq=np.array([0.1, 2.5], np.float16))   # any sequence
    assert str(c).endswith(";freq=0.099975586,2.5") and c.freq == (np.float32(np.float16(0.1)), 2.5)
    assert c.frequencies() == c.freq and dt.samel_config().frequencies() == \
        _lib.rope_frequencies(32, 10000.0)
    expect(ValueError, "freq has 3 values: rot_dims = 32 needs rot_dims / 2 = 16",
           dt.samel_config, freq=[1, 2, 3])
    expect(ValueError, "rope_freq[1] = inf: must be finite", dt.samel_config, rot_dims=4,
           freq=[1, float("inf")])
    expect(ValueError, "freq[0] = 'x': must be a number", dt.samel_config, rot_dims=2, freq=["x"])
    expect(ValueError, "could not convert", dt.samel_parse,
           str(dt.samel_config(rot_dims=2, freq=[1])).replace("freq=1", "freq=y"))
    assert str(dt.samel_config()) == ("window_left=17;window_right=17;scale=default;lambda=1;"
                                      "math=default;rot_dims=32;base=10000;pos_offset=0;"
                                      "q_alpha=1;k_alpha=1")
    assert dt.samel_config(q_alpha=0.1).q_alpha == np.float32(0.1)      # an fp32 value
    expect(ValueError, "expected window_left=...", dt.samel_parse, str(dt.config()))
    expect(ValueError, "could not convert", dt.samel_parse,
           str(dt.samel_config()).replace("base=10000", "base=x"))
    expect(ValueError, "invalid literal", dt.samel_parse,
           str(dt.samel_config()).replace("rot_dims=32", "rot_dims=3.5"))


# windows, rot_dims, math, and the rest of the settings varied between rows: band and scalar
# kernels (by window, by rot_dims for f32 or for 16-bit), asymmetric windows
SAMEL_CONFIGS = [
    dict(),                                                                 # SAME-L
    dict(math="fp32", q_alpha=0.75, k_alpha=1.5),
    dict(freq=[float(np.float16(10000.0 ** (-j / 16))) for j in range(16)]),   # a cast model's
    dict(window_left=5, window_right=50, rot_dims=8, freq=[3.5, 0.25, 1e-3, 0.0]),  # scalar
    dict(window=0, rot_dims=0, lam=-0.5, scale=0.3),
    dict(window_left=5, window_right=50, pos_offset=12345, base=500.0),    # scalar: window
    dict(window_left=48, window_right=0, rot_dims=16, q_alpha=-2.0),
    dict(window_left=3, window_right=40, rot_dims=64, scale=0.01),          # f32: scalar
    dict(window=17, rot_dims=8, k_alpha=0.001),                             # 16-bit: scalar
    dict(window_left=100, window_right=2, rot_dims=2, math="fp32", pos_offset=2 ** 30),
]


@check
def samel_launch_matches_library():
    """For every dtype, settings across band and scalar kernels, H in {1, 3, 24}: one build
    with dynamic (B, N); its symbolic extras, grid, block and shared memory at each (B, N)
    equal what dswa_aot_samel_kernel_for computes for that problem."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    n, kernels = 0, set()
    for kw in SAMEL_CONFIGS:
        c = dt.samel_config(**kw)
        wl, wr = c.window_left, c.window_right
        for dtype in (_lib.F32, _lib.F16, _lib.BF16):
            if c.math == "fp32" and dtype != _lib.F32:
                continue
            for H in (1, 3, 24):
                b = samel_build(SPID, dtype, H, c)
                assert b.aot and b.supported
                assert b.output_types == [TRT_DT[dtype]]
                assert [repr(x) for x in b.output_shapes[0]] == ["B", "N", str(H * D)]
                assert len(b.extras) == 48
                assert all(t == trt.PluginArgDataType.INT32 for t in b.extra_types)
                ptx = b.ptx.decode()
                assert f".entry {b.kernel_name}(" in ptx and f".target {ARCH}\n" in ptx
                kernels.add(b.kernel_name)
                for B, N in SIZES:
                    env = {"B": B, "N": N}
                    ref = _lib.aot_samel_kernel_for(ARCH, samel_problem(B, N, H, dtype, c))
                    assert ref.op == "samel" and len(ref.values) == 48
                    got = [e.value(env) for e in b.extras]
                    assert got == ref.values, (kw, dtype, H, B, N, got, ref.values)
                    g = tuple(b.launch[k].value(env) for k in ("grid_x", "grid_y", "grid_z"))
                    assert g == ref.grid_dims, (g, ref.grid_dims)
                    blk = tuple(b.launch[k].value(env) for k in ("block_x", "block_y",
                                                                  "block_z"))
                    assert blk == ref.block, (blk, ref.block)
                    assert b.launch["shared_mem"].value(env) == ref.dynamic_shared_bytes
                    # as for the op: below the windows the library may pick by clamped ones
                    if N > max(wl, wr) or ref.family == "scalar" or wl + wr <= 48:
                        assert b.kernel_name == ref.name, (kw, b.kernel_name, ref.name, N)
                    n += 1
    return f"{n} launches compared, kernels {', '.join(sorted(kernels))}"


@check
def samel_fixed_shapes_fold_and_match():
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    c = dt.samel_config(q_alpha=0.5, pos_offset=7)
    for B, N in ((1, 1), (1, 4352), (3, 21964)):
        b = samel_build(SPID, _lib.BF16, 24, c, dims=(B, N), profile={})
        assert all(e.is_constant() for e in b.extras)
        ref = _lib.aot_samel_kernel_for(ARCH, samel_problem(B, N, 24, _lib.BF16, c))
        assert [e.const for e in b.extras] == ref.values
        assert tuple(b.launch[k].const for k in ("grid_x", "grid_y", "grid_z")) == ref.grid_dims


@check
def samel_creation_defaults():
    c = dt.samel_config()
    if not HAS_AOT:
        assert not samel_build("dswatest::snoaot", _lib.F16, 2, c).aot
        return "JIT only (no aot_impl)"
    for req in ("UNKNOWN", "PREFER_AOT", "PREFER_JIT", "STRICT_AOT"):
        assert samel_build(SPID, _lib.F16, 2, c, request=req).aot, req
    expect(ValueError, "JIT implementation requested, but not defined", samel_build, SPID,
           _lib.F16, 2, c, request="STRICT_JIT")
    expect(ValueError, "PREFER_AOT_PYTHON_PLUGINS", samel_build, "dswatest::sboth", _lib.F16, 2,
           c)
    assert samel_build("dswatest::sboth", _lib.F16, 2, c, request="PREFER_AOT").aot
    assert not samel_build("dswatest::sboth", _lib.F16, 2, c, request="PREFER_JIT").aot


@check
def samel_bad_layers_refused_at_build():
    pid = SPID if HAS_AOT else "dswatest::snoaot"
    cfg = {"config": str(dt.samel_config())}
    t32, t16, tbf = trt.float32, trt.float16, trt.bfloat16
    w = (t32, (D,))
    for xt, wt, msg in ((trt.int32, t32, "x is INT32: must be float32"),
                        (t16, t16, "q_gamma is HALF: the norm weights must be float32"),
                        (tbf, tbf, "q_gamma is BF16"), (t32, trt.int32, "q_gamma is INT32")):
        ins = [(xt, ("B", "N", 5 * 2 * D))] + [(wt, (D,))] * 4
        expect(ValueError, msg, B_.build, pid, ins, cfg, PROFILE)
    ins = [(t16, ("B", "N", 5 * 2 * D)), w, w, (t16, (D,)), w]
    expect(ValueError, "k_gamma is HALF", B_.build, pid, ins, cfg, PROFILE)
    b = samel_build(pid, _lib.F16, 2, dt.samel_config())
    assert set(b.combinations) == {(t,) + (t32,) * 4 + (t,) for t in (t32, t16, tbf)}, \
        b.combinations
    b = B_.build(pid, samel_inputs(_lib.F16, 2), cfg, PROFILE, out_types=[t32])
    assert not b.supported                 # an output dtype other than x's is not offered
    X = ("B", "N", 5 * 2 * D)
    shape_cases = [
        ([(t16, ("B", "N")), w, w, w, w], "x has rank 2: must be 3, (B, N, 5 * H * D)"),
        ([(t16, X), (t32, (1, D)), w, w, w], "q_gamma has rank 2: must be 1, (D,)"),
        ([(t16, ("B", "N", "C")), w, w, w, w], "x.shape[2] = dynamic: must be 5 * H * D"),
        ([(t16, ("B", "N", 5 * 2 * D + 64)), w, w, w, w], "x.shape[2] = 704: must be 5 * H"),
        ([(t16, ("B", "N", 0)), w, w, w, w], "x.shape[2] = 0: must be 5 * H * D"),
        ([(t16, X), (t32, ("D",)), w, w, w], "q_gamma.shape[0] (D) = dynamic"),
        ([(t16, X), (t32, (0,))] + [(t32, (0,))] * 3, "q_gamma.shape[0] (D) = 0: must be > 0"),
        ([(t16, X), w, w, w, (t32, (32,))], "k_beta.shape[0] = 32 but q_gamma.shape[0] = 64"),
    ]
    prof = dict(PROFILE, C=(640, 640, 640), D=(64, 64, 64))
    for ins, msg in shape_cases:
        expect(ValueError, msg, B_.build, pid, ins, cfg, prof)
    if not HAS_AOT:
        return
    lib_cases = [
        ({"B": (1, 1, 1), "N": (0, 64, 100)}, "min", "empty problem launches no kernel", {}),
        ({"B": (0, 1, 1), "N": (1, 64, 100)}, "min", "empty problem launches no kernel", {}),
        ({"B": (1, 1, 8), "N": (1, 64, 2 ** 20)}, "max", "int32", {}),
        ({"B": (1, 1, 2), "N": (1, 64, 2000)}, "max", "pos_offset",
         {"pos_offset": 2 ** 31 - 1000}),
    ]
    for prof, where, msg, kw in lib_cases:
        e = expect(ValueError, msg, samel_build, pid, _lib.F16, 24, dt.samel_config(**kw),
                   profile=prof)
        assert f"at the profile's {where}" in e, e
    expect(ValueError, "the kernels take B and N as int32", samel_build, pid, _lib.F16, 2,
           dt.samel_config(), profile={"B": (1, 1, 1), "N": (1, 64, 2 ** 31)})
    # D other than 64: the library's refusal, with its message
    ins = [(t16, ("B", "N", 5 * 2 * 32))] + [(t32, (32,))] * 4
    e = expect(ValueError, "head_dim", B_.build, pid, ins, cfg, PROFILE)
    assert "at the profile's min" in e


@check
def samel_jit_fields_round_trip():
    """The JIT plugin serializes `config`; one created from those fields at run time runs the
    engine's settings, with the strides and pointers TensorRT hands to enqueue."""
    pid = "dswatest::sboth" if HAS_AOT else "dswatest::snoaot"
    c0 = dt.samel_config(q_alpha=0.5)
    b = samel_build(pid, _lib.F16, 2, c0, request="PREFER_JIT" if HAS_AOT else "UNKNOWN")
    assert not b.aot
    f = b.serialized["config"]
    assert f.type == trt.PluginFieldType.CHAR and f.data.tobytes().decode() == str(c0)
    other = str(dt.samel_config(window_left=2, window_right=7, scale=0.25, lam=0.5, math="tf32",
                                rot_dims=16, base=100.0, pos_offset=9, q_alpha=0.75,
                                k_alpha=-1.5))
    ns, name = pid.split("::")
    creator = trt.get_plugin_registry().get_creator(name, "1", ns)
    fields = trt.PluginFieldCollection([trt.PluginField("config", other.encode(),
                                                        trt.PluginFieldType.CHAR)])
    if HAS_AOT:
        plg = creator.create_plugin(name, ns, fields, trt.TensorRTPhase.RUNTIME,
                                    trt.QuickPluginCreationRequest.STRICT_JIT)
    else:
        plg = creator.create_plugin(name, ns, fields, trt.TensorRTPhase.RUNTIME)
    assert plg.attrs == {"config": other}
    seen = {}

    class FakeLib:          # the library, with dswa_samel_forward_cuda recording its problem
        def __getattr__(self, name):
            return getattr(real(), name)

        def dswa_samel_forward_cuda(self, p, x, o, stream):
            pr = p._obj
            seen.update(B=pr.batch, N=pr.seq_len, H=pr.heads, D=pr.head_dim,
                        wl=pr.window_left, wr=pr.window_right, scale=pr.scale, lam=pr.lambda_,
                        math=pr.math, dtype=pr.dtype, rot=pr.rot_dims, base=pr.rope_base,
                        pos=pr.pos_offset, qa=pr.q_norm.alpha, ka=pr.k_norm.alpha,
                        qkv=tuple(getattr(pr.qkv, k) for k in ("batch", "seq", "chunk", "head",
                                                                "dim")),
                        out=tuple(getattr(pr.out, k) for k in ("batch", "seq", "pair", "head",
                                                                "dim")),
                        w=(pr.q_norm.gamma, pr.q_norm.beta, pr.k_norm.gamma, pr.k_norm.beta),
                        ptrs=(x, o), stream=stream)
            return 0
    real = _lib.lib
    _lib.lib = lambda: FakeLib()
    try:
        descs = []
        for dims, t in (((3, 10, 5 * 2 * D), trt.bfloat16),) + (((D,), trt.float32),) * 4 + \
                (((3, 10, 2 * D), trt.bfloat16),):
            d = trt.PluginTensorDesc()
            d.dims, d.type = trt.Dims(list(dims)), t
            descs.append(d)
        plg.enqueue(descs[:5], descs[5:], [1024, 2048, 3072, 4096, 5120], [8192],
                    [(10 * 640, 640, 1), (1,), (1,), (1,), (1,)], [(10 * 128, 128, 1)], 77)
    finally:
        _lib.lib = real
    want = {"B": 3, "N": 10, "H": 2, "D": D, "wl": 2, "wr": 7, "scale": 0.25, "lam": 0.5,
            "math": _lib.MATH["tf32"], "dtype": _lib.BF16, "rot": 16, "base": 100.0, "pos": 9,
            "qa": 0.75, "ka": -1.5, "qkv": (6400, 640, 128, 64, 1), "out": (1280, 128, 0, 64, 1),
            "w": (2048, 3072, 4096, 5120), "ptrs": (1024, 8192), "stream": 77}
    assert seen == want, seen


@check
def samel_network_call():
    """trtp.op.<ns>.<name>(x, q_gamma, q_beta, k_gamma, k_beta, config=...) creates the
    plugin with the layer's own settings."""
    pid = SPID if HAS_AOT else "dswatest::snoaot"
    ts = [trt.ITensor() for _ in range(5)]
    c = dt.samel_config(q_alpha=0.8125, k_alpha=1.25)
    for cfg in (c, str(c), None):
        make = dt.samel_op(*ts, config=cfg, plugin_id=pid)
        if callable(make):
            make = make(trt.QuickPluginCreationRequest.UNKNOWN) if HAS_AOT else make()
        ins, _, plg = make
        assert ins == ts and plg.attrs == {"config": str(c if cfg is not None else
                                                         dt.samel_config())}
    expect(ValueError, "rot_dims = 5", dt.samel_op, *ts, config=str(c).replace("rot_dims=32",
                                                                               "rot_dims=5"))


@check
def samel_docs_aot_example():
    """docs/AOT.md's aot_impl example for the fused kernel, registered through TensorRT's plugin
    layer (under another id, with a desc of its own), launches what the library computes."""
    if not HAS_AOT:
        return "skipped: no aot_impl in this TensorRT"
    import re
    import textwrap
    from typing import Tuple, Union
    doc = aot_doc()
    if doc is None:
        return AOT_DOC_SKIP
    block = re.search(r"## The fused SAME-L kernel.*?In an `aot_impl`.*?```python\n(.*?)```", doc,
                      re.S).group(1)
    pid = "dswadoc::samel"
    code = textwrap.dedent(block).replace(f'"{SPID}"', f'"{pid}"')
    assert pid in code

    @trtp.register(pid)
    def desc(x: trtp.TensorDesc, q_gamma: trtp.TensorDesc, q_beta: trtp.TensorDesc,
             k_gamma: trtp.TensorDesc, k_beta: trtp.TensorDesc) -> trtp.TensorDesc:
        s = x.shape_expr
        return trtp.from_shape_expr((s[0], s[1], s[2] // 5), dtype=x.dtype)
    c = dt.samel_config(q_alpha=0.75, k_alpha=1.25, pos_offset=99, base=500.0)
    k = _lib.aot_samel_kernel(ARCH, _lib.F16, 17, 17, 32)
    fb = _lib.float_bits
    ns = {"trtp": trtp, "Tuple": Tuple, "Union": Union, "meta": {"kernel": k.name},
          "ptx": k.ptx, "WL": 17, "WR": 17, "SCALE_BITS": fb(0.125), "LAMBDA_BITS": fb(1.0),
          "ROT": 32, "FREQ_BITS": [fb(f) for f in c.frequencies()] + [0] * 16,
          "POS": c.pos_offset, "Q_ALPHA_BITS": fb(c.q_alpha),
          "K_ALPHA_BITS": fb(c.k_alpha)}
    exec(code, ns)
    b = B_.build(pid, samel_inputs(_lib.F16, 3), {}, PROFILE)
    assert b.kernel_name == k.name
    for B, N in SIZES:
        ref = _lib.aot_samel_kernel_for(ARCH, samel_problem(B, N, 3, _lib.F16, c))
        assert [e.value({"B": B, "N": N}) for e in b.extras] == ref.values, (B, N)
        assert tuple(b.launch[x].value({"B": B, "N": N}) for x in ("grid_x", "grid_y", "grid_z")) \
            == ref.grid_dims

failed = 0
for fn in checks:
    try:
        note = fn()
        print(f"PASS  {VERSION} {fn.__name__}" + (f" ({note})" if note else ""), flush=True)
    except Exception:
        failed += 1
        print(f"FAIL  {VERSION} {fn.__name__}", flush=True)
        traceback.print_exc()
print(f"TensorRT {VERSION} plugin layer ({SITE}): {len(checks) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
