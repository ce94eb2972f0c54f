"""TensorRT: networks with the dswa.trt plugin, built with the AOT implementation preferred (the
library's PTX in the engine) and, once, the JIT one; dynamic batch and sequence length; run under
CUDA-graph capture and replayed with fresh inputs; against the float64 reference. Skipped
(visibly) without tensorrt, or without a CUDA device and torch to drive it."""
from _util import check_close, dswa, skip, torch

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
