"""TensorRT: networks with the dswa.trt plugins (the op's; the fused block's with its norm weights
as network constants), built with the AOT implementation preferred (the
library's PTX in the engine) and, once, the JIT one; dynamic batch and sequence length; run under
CUDA-graph capture and replayed with fresh inputs; against the float64 reference. Skipped
(visibly) without tensorrt, or without a CUDA device and torch to drive it."""
from _util import check_close, dswa, rel_err, skip, torch

TOL = {"float32": 5e-3, "float16": 3e-3, "bfloat16": 2e-2}
D = 64


def need_trt():
    try:
        import tensorrt as trt
        import tensorrt.plugin as trtp
    except ImportError:
        skip("skipped: tensorrt not installed")
    if torch is None or not torch.cuda.is_available() or not dswa.cuda_available():
        skip("skipped: tensorrt is installed, but no CUDA device (with torch) to run it on")
    return trt, trtp


def build(trt, trtp, plugin_id, dtype, H, shared, prefer="AOT"):
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    F = trt.NetworkDefinitionCreationFlag
    net = builder.create_network((1 << int(F.STRONGLY_TYPED)) |
                                 (1 << int(getattr(F, f"PREFER_{prefer}_PYTHON_PLUGINS"))))
    tdt = {"float32": trt.float32, "float16": trt.float16, "bfloat16": trt.bfloat16}[dtype]
    heads = {"q": 2 * H, "k": 2 * H, "v": H if shared else 2 * H}
    ins = [net.add_input(n, tdt, (-1, -1, h, D)) for n, h in heads.items()]
    ns, name = plugin_id.split("::")
    layer = net.add_plugin(dswa.trt.op(*ins, plugin_id=plugin_id))
    out = layer.get_output(0)
    out.name = "out"
    net.mark_output(out)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    for n, h in heads.items():
        profile.set_shape(n, (1, 1, h, D), (2, 300, h, D), (3, 1024, h, D))
    config.add_optimization_profile(profile)
    blob = builder.build_serialized_network(net, config)
    assert blob is not None, "engine build failed"
    return trt.Runtime(logger).deserialize_cuda_engine(blob)


def tensors(B, N, H, dtype, shared, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda h: torch.randn(B, N, h, D, device="cuda", generator=g).to(getattr(torch, dtype))  # noqa: E731
    return r(2 * H), r(2 * H), r(H if shared else 2 * H)


def bind(ctx, q, k, v, H):
    out = torch.full(q.shape[:2] + (H, D), float("nan"), device="cuda", dtype=q.dtype)
    for n, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        if n != "out":
            ctx.set_input_shape(n, tuple(t.shape))
        ctx.set_tensor_address(n, t.data_ptr())
    return out


def run_case(trt, trtp, plugin_id, dtype, H, shared, wl, wr, scale, lam):
    engine = build(trt, trtp, plugin_id, dtype, H, shared)
    ctx = engine.create_execution_context()
    q, k, v = tensors(2, 300, H, dtype, shared, seed=0)
    out = bind(ctx, q, k, v, H)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert ctx.execute_async_v3(s.cuda_stream)          # warm-up, outside the capture
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        assert ctx.execute_async_v3(s.cuda_stream)
    for seed in (1, 2):                                     # the graph, with fresh inputs
        for t, t2 in zip((q, k, v), tensors(2, 300, H, dtype, shared, seed)):
            t.copy_(t2)
        g.replay()
        torch.cuda.synchronize()
        check_close(out, q, k, v, TOL[dtype], wl, wr, scale, lam)
    for B, N in ((3, 1000), (1, 5)):                        # other shapes, eagerly
        q, k, v = tensors(B, N, H, dtype, shared, seed=N)
        out = bind(ctx, q, k, v, H)
        assert ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        check_close(out, q, k, v, TOL[dtype], wl, wr, scale, lam)


def test_trt_aot_same_l():
    trt, trtp = need_trt()
    import dswa.trt
    dswa.trt.register()                       # samel::diff_attn_swa: window 17, scale 1/8
    before = dict(dswa.trt.stats)
    for dtype in ("float32", "float16", "bfloat16"):
        for shared in (True, False):
            run_case(trt, trtp, "samel::diff_attn_swa", dtype, 3, shared, 17, 17, 0.125, 1.0)
    assert dswa.trt.stats["aot"] > before["aot"], "the builder never asked for the AOT kernel"
    assert dswa.trt.stats["jit"] == before["jit"], "the engine called the JIT implementation"


def test_trt_aot_options():
    trt, trtp = need_trt()
    import dswa.trt
    dswa.trt.register("dswatest::wide", window_left=5, window_right=50, scale=0.2, lam=0.5)
    before = dict(dswa.trt.stats)
    run_case(trt, trtp, "dswatest::wide", "bfloat16", 2, True, 5, 50, 0.2, 0.5)   # wide kernel
    assert dswa.trt.stats["jit"] == before["jit"]


def test_trt_jit():
    trt, trtp = need_trt()
    import dswa.trt
    dswa.trt.register("dswatest::jit", window=9, lam=0.75, impl="both")
    before = dswa.trt.stats["jit"]
    engine = build(trt, trtp, "dswatest::jit", "float16", 2, True, prefer="JIT")
    ctx = engine.create_execution_context()
    q, k, v = tensors(2, 257, 2, "float16", True, seed=3)
    out = bind(ctx, q, k, v, 2)
    assert ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    check_close(out, q, k, v, TOL["float16"], 9, 9, lam=0.75)
    assert dswa.trt.stats["jit"] > before


# ---- the fused SAME-L block: samel::samel_attention -------------------------------------------
def build_samel(trt, dtype, H, weights, cfg, prefer="AOT"):
    """x (B, N, 5*H*D) a dynamic input; the four norm weights constants of the network, as an
    exported model holds them."""
    import dswa.trt
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    F = trt.NetworkDefinitionCreationFlag
    net = builder.create_network((1 << int(F.STRONGLY_TYPED)) |
                                 (1 << int(getattr(F, f"PREFER_{prefer}_PYTHON_PLUGINS"))))
    tdt = {"float32": trt.float32, "float16": trt.float16, "bfloat16": trt.bfloat16}[dtype]
    x = net.add_input("x", tdt, (-1, -1, 5 * H * D))
    ws = [net.add_constant((D,), trt.Weights(w)).get_output(0) for w in weights]
    layer = net.add_plugin(dswa.trt.samel_op(x, *ws, config=cfg))
    out = layer.get_output(0)
    out.name = "out"
    net.mark_output(out)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 1, 5 * H * D), (2, 300, 5 * H * D), (3, 1024, 5 * H * D))
    config.add_optimization_profile(profile)
    blob = builder.build_serialized_network(net, config)
    assert blob is not None, "engine build failed"
    return trt.Runtime(logger).deserialize_cuda_engine(blob)


def test_trt_samel_aot():
    """The fused block's engine (AOT kernel), dynamic B and N, captured in a CUDA graph and
    replayed with fresh x, against samel_ref's float64 reference; band and scalar kernels."""
    trt, trtp = need_trt()
    import numpy as np
    import dswa.trt
    from samel_ref import samel_reference
    dswa.trt.register_samel()
    before = dict(dswa.trt.stats)
    rng = np.random.default_rng(5)
    for dtype, kw in (("float32", {}), ("float16", {}), ("bfloat16", {"pos_offset": 1000}),
                      ("bfloat16", {"window_left": 5, "window_right": 50, "lam": 0.5})):
        H = 3
        cfg = dswa.trt.samel_config(q_alpha=0.8, k_alpha=1.2, **kw)
        w = [(1 + 0.2 * rng.standard_normal(D)).astype(np.float32),
             (0.1 * rng.standard_normal(D)).astype(np.float32),
             (1 + 0.2 * rng.standard_normal(D)).astype(np.float32),
             (0.1 * rng.standard_normal(D)).astype(np.float32)]
        engine = build_samel(trt, dtype, H, w, cfg)
        ctx = engine.create_execution_context()
        g = torch.Generator(device="cuda").manual_seed(0)

        def run(B, N):
            x = torch.randn(B, N, 5 * H * D, device="cuda", generator=g).to(getattr(torch, dtype))
            out = torch.full((B, N, H * D), float("nan"), device="cuda", dtype=x.dtype)
            ctx.set_input_shape("x", tuple(x.shape))
            ctx.set_tensor_address("x", x.data_ptr())
            ctx.set_tensor_address("out", out.data_ptr())
            return x, out
        x, out = run(2, 300)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            assert ctx.execute_async_v3(s.cuda_stream)
        s.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            assert ctx.execute_async_v3(s.cuda_stream)
        cases = []
        for _ in range(2):                           # the graph, with fresh x
            x.copy_(torch.randn(x.shape, device="cuda", generator=g).to(x.dtype))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            cases.append((x.clone(), out.clone()))
        for B, N in ((3, 1000), (1, 5)):            # other shapes, eagerly
            x2, out2 = run(B, N)
            assert ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            cases.append((x2, out2))
        for xi, oi in cases:
            ref = samel_reference(xi, (cfg.q_alpha, w[0], w[1]), (cfg.k_alpha, w[2], w[3]), H,
                                  cfg.window_left, cfg.window_right, cfg.scale, cfg.lam,
                                  cfg.rot_dims, cfg.base, cfg.pos_offset, dtype)
            err = rel_err(oi, ref)
            assert err < TOL[dtype], f"{dtype} {cfg}: relative error {err:.3e}"
    assert dswa.trt.stats["aot"] > before["aot"], "the builder never asked for the AOT kernel"
    assert dswa.trt.stats["jit"] == before["jit"], "the engine called the JIT implementation"


def test_trt_samel_jit():
    trt, trtp = need_trt()
    import numpy as np
    import dswa.trt
    from samel_ref import samel_reference
    dswa.trt.register_samel("dswatest::samel_jit", impl="both")
    before = dswa.trt.stats["jit"]
    rng = np.random.default_rng(6)
    w = [(1 + 0.2 * rng.standard_normal(D)).astype(np.float32) if i % 2 == 0 else
         (0.1 * rng.standard_normal(D)).astype(np.float32) for i in range(4)]
    cfg = dswa.trt.samel_config(window=9, q_alpha=0.7, lam=0.75)
    H = 2
    engine = build_samel(trt, "float16", H, w, cfg, prefer="JIT")
    ctx = engine.create_execution_context()
    x = torch.randn(2, 257, 5 * H * D, device="cuda").half()
    out = torch.full((2, 257, H * D), float("nan"), device="cuda", dtype=x.dtype)
    ctx.set_input_shape("x", tuple(x.shape))
    ctx.set_tensor_address("x", x.data_ptr())
    ctx.set_tensor_address("out", out.data_ptr())
    assert ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    ref = samel_reference(x, (cfg.q_alpha, w[0], w[1]), (cfg.k_alpha, w[2], w[3]), H, 9, 9,
                          cfg.scale, cfg.lam, cfg.rot_dims, cfg.base, cfg.pos_offset, "float16")
    assert rel_err(out, ref) < TOL["float16"]
    assert dswa.trt.stats["jit"] > before


def test_num_heads_annotation():
    """num_heads' annotation is a class (TensorRT 10.15's register validator calls issubclass on
    every annotation, which Python 3.12 refuses for numpy.typing.NDArray[int32]) that the plugin
    layer reads as an int32 array: __origin__ numpy.ndarray, __args__[1] numpy.dtype[int32]."""
    import inspect
    import typing
    try:
        import numpy as np
    except ImportError:
        skip("skipped: numpy not installed")
    import dswa.trt
    a = dswa.trt._int32_array_annotation()
    assert inspect.isclass(a) and not issubclass(a, (int, str))
    assert a.__origin__ is np.ndarray
    assert typing.get_args(a.__args__[1]) == (np.int32,)
