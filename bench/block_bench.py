"""compare.py --op block: one upstream-shaped SAME-L transformer block (python/tests/
upstream_block.py: dim 1536 = 24 heads of 64, DyT pre-norm and qk-norm, differential
attention with RoPE on 32 dims, window [17, 17], SwiGLU feed-forward of mult 3, residuals),
built as a user builds it: created in float32, then cast whole to the dtype (`.to(dtype)`, the
rotary inv_freq buffer included, as upstream's half-precision paths cast the model), called
as upstream's TransformerBlock is, unswapped and with dswa.samel.swap_attention.

Unswapped, the attention runs what upstream runs on a GPU without flash-attn: FlexAttention
with a band block mask, compiled with mode "max-autotune-no-cudagraphs" as upstream's
transformer.py compiles it (--block-attn flex, the default; the first call autotunes, about a
minute per dtype and phase), or upstream's fallback where that fails, the chunked-halo SDPA
(queries in chunks of 1024 with the window's halo of keys; --block-attn chunked). Rows: each dtype (float32 under torch's float32
matmul precision "highest" and "high"; float16; bfloat16), each L, inference (the block's
forward, no grad) and a training step (forward + backward over every parameter), eager and
torch.compile'd (dynamic=False; the swapped model was called once eagerly first, so its RoPE
table is verified and the compiled graph holds the fused op). B = 1, N = 17 L.

Timing as an engine runs: a CUDA graph of back-to-back calls on the same input (as many as
fill about 150 ms, 2 to 20), replayed (samel_prologue.graph_time: median ms per call); where
capture fails (the row says "events"), CUDA events around the same eager calls. Before
timing, the swapped model is checked against the unswapped one: the relative Frobenius error
of block(x) - x (inference) or of every parameter's gradient, concatenated (training), within
TOL; a dswa warning (the drop-in falling back to upstream's forward) fails the row. The shares
of dswa's kernels and of the GEMMs in the swapped step's GPU kernel time (torch.profiler) say
how much of the rest is left to win.

    python3 bench/compare.py --op block --json block.json [--block-attn chunked] [--quick]
"""
import contextlib
import copy
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import samel_prologue as SP

TOOL = "bench/compare.py --op block"
DIM, HEADS, HEAD_DIM, FF_MULT, WINDOW = 1536, 24, 64, 3, [17, 17]
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
PRECISIONS = {"float32": ("highest", "high")}   # torch.set_float32_matmul_precision per row
# swapped against unswapped, both in the dtype: float32 the fused block's TF32 error (or the
# projections' TF32 under "high"); 16-bit both sides' roundings of every projection (the tests'
# bounds, against float64, are tighter). Gradients: the same roundings through the backward.
TOL = {"inference": {"float32": 5e-3, "float16": 1e-2, "bfloat16": 4e-2},
       "training": {"float32": 1e-2, "float16": 3e-2, "bfloat16": 8e-2}}
TARGET_MS = 150.0   # a graph's replay


def log(*a):
    print(f"[block {time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def event_time(fn, calls, warm, repeats):
    """(median, min, max) ms per call: CUDA events around `calls` eager calls."""
    import torch
    for _ in range(max(warm, 1)):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(calls):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / calls)
    return statistics.median(times), min(times), max(times)


def timed(fn, args, calls=None):
    """(ms per call, how it was timed, calls per graph); calls None: as many as fill about
    TARGET_MS, 2 to SP.GRAPH_CALLS."""
    import torch
    if calls is None:
        one = event_time(fn, 1, 2, 3)[0] if args.device == "cuda" else 1.0
        calls = max(2, min(SP.GRAPH_CALLS, round(TARGET_MS / max(one, 1e-3))))
    try:
        return SP.graph_time(fn, calls, args.graph_warmup, args.graph_repeats,
                             args.device)[0], ("cuda-graph" if args.device == "cuda"
                                               else "wall"), calls
    except Exception as e:          # capture refused: time the calls as they run
        log(f"CUDA-graph capture failed ({type(e).__name__}: {str(e)[:120]}); events instead")
        torch.cuda.synchronize()
        return event_time(fn, calls, args.graph_warmup, args.graph_repeats)[0], "events", calls


GEMM_KERNELS = ("gemm", "nvjet", "xmma", "cutlass")   # cuBLAS's and CUTLASS's kernel names


def kernel_profile(fn, calls=3, ranges=()):
    """GPU time of `calls` fn() calls (torch.profiler), per call: "kernel_ms" (every kernel,
    copy and memset), "dswa_ms" (dswa's kernels), "gemm_ms", "host_syncs" (cudaStreamSynchronize
    and synchronous copies the calls made: each one stalls the launch queue in eager mode), and
    for each name in `ranges` (torch.profiler.record_function ranges inside fn) "<name>_ms", the
    GPU time of the kernels launched inside it."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = dict(kernel_ms=0.0, dswa_ms=0.0, gemm_ms=0.0, host_syncs=0)
    out.update({r + "_ms": 0.0 for r in ranges})
    for e in prof.key_averages():
        if e.device_type == DeviceType.CUDA:
            t = getattr(e, "self_device_time_total", None)
            t = (getattr(e, "self_cuda_time_total", 0.0) if t is None else t) / 1e3 / calls
            name = e.key.lower()
            out["kernel_ms"] += t
            out["dswa_ms"] += t if "dswa" in name else 0.0
            out["gemm_ms"] += t if any(k in name for k in GEMM_KERNELS) else 0.0
        elif e.key in ("cudaStreamSynchronize", "cudaMemcpy"):
            out["host_syncs"] += e.count
        elif e.key in ranges:
            t = getattr(e, "device_time_total", None)
            t = getattr(e, "cuda_time_total", 0.0) if t is None else t
            out[e.key + "_ms"] += t / 1e3 / calls
    out["host_syncs"] /= calls
    return out


def kernel_shares(fn):
    """(dswa's kernels, the GEMMs) as shares of the GPU kernel time of three fn() calls."""
    p = kernel_profile(fn)
    k = p["kernel_ms"]
    return (p["dswa_ms"] / k, p["gemm_ms"] / k) if k else (None, None)


def rel(a, b, base):
    a, b, base = (t.detach().double() for t in (a, b, base))
    return float((a - b).norm() / (b - base).norm())


def grads(m, step):
    """Every parameter's gradient after one step from zero, concatenated."""
    import torch
    m.zero_grad(set_to_none=True)
    step()
    g = torch.cat([p.grad.detach().double().flatten() for p in m.parameters()])
    m.zero_grad(set_to_none=True)
    return g


@contextlib.contextmanager
def matmul_precision(precision):
    import torch
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def run_row(L, dtype, precision, phase, mode, args):
    import torch
    import dswa.samel
    import upstream_block as U
    row = dict(dtype=dtype, precision=precision, L=L, N=17 * L, phase=phase, mode=mode,
               attn=args.block_attn)
    train = phase == "training"
    try:
        dt, dev = getattr(torch, dtype), args.device
        torch.manual_seed(0)
        ref = U.randomize(U.TransformerBlock(DIM, HEAD_DIM, FF_MULT, core=args.block_attn))
        ref = ref.to(device=dev, dtype=dt).train(train)      # cast whole, nothing restored
        row["inv_freq_dtype"] = str(ref.rope.inv_freq.dtype).replace("torch.", "")
        sw = dswa.samel.swap_attention(copy.deepcopy(ref))
        x = torch.randn(1, 17 * L, DIM, device=dev, dtype=dt)
        g = torch.randn_like(x)
        with matmul_precision(precision), warnings.catch_warnings():
            warnings.filterwarnings("error", message="dswa")   # a fallback fails the row
            models = {"unswapped": ref, "swapped": sw}
            if mode == "compiled":
                torch._dynamo.reset()
                with torch.no_grad():
                    sw(x, self_attention_flash_sliding_window=WINDOW)   # verify RoPE eagerly
                models = {n: torch.compile(m, dynamic=False) for n, m in models.items()}

            def call(m):
                if train:
                    return lambda: m(x, self_attention_flash_sliding_window=WINDOW).backward(g)
                return lambda: m(x, self_attention_flash_sliding_window=WINDOW)

            ctx = contextlib.nullcontext if train else torch.no_grad
            with ctx():
                if train:
                    gu, gs = grads(ref, call(models["unswapped"])), grads(sw, call(models["swapped"]))
                    row["rel_err"] = rel(gs, gu, torch.zeros_like(gu))
                else:
                    u, s = call(models["unswapped"])(), call(models["swapped"])()
                    row["rel_err"] = rel(s, u, x)
                row["ok"] = row["rel_err"] < TOL[phase][dtype]
                if not row["ok"]:
                    row["error"] = (f"swapped off the unswapped by {row['rel_err']:.1e} "
                                    f"(tolerance {TOL[phase][dtype]:.0e})")
                for n, m in models.items():
                    row[f"{n}_ms"], row["timing"], row["calls"] = timed(call(m), args)
                if dev == "cuda":
                    row["dswa_share"], row["gemm_share"] = kernel_shares(call(models["swapped"]))
        row["speedup"] = row["unswapped_ms"] / row["swapped_ms"]
    except Exception as e:
        row["ok"] = False
        row["error"] = f"{type(e).__name__}: {e}"[:400]
        traceback.print_exc()
    finally:
        try:
            import torch
            torch.cuda.empty_cache()
        except Exception:
            pass
    return row


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(result):
    """The README's block table (markdown): one row per dtype, precision, L, phase and mode."""
    m = result.get("machine", {})
    c = result.get("config", {})
    print(f"{m.get('device', '?')}, torch {m.get('torch', '?')}, {m.get('date', '')}, commit "
          f"{m.get('commit', '?')}: one SAME-L transformer block (dim {DIM}, {HEADS} x "
          f"{HEAD_DIM}, window {WINDOW}, FF mult {FF_MULT}) cast whole to the dtype, B = 1, "
          f"N = 17 L; unswapped attention: upstream's "
          f"{'chunked-halo SDPA' if c.get('block_attn') == 'chunked' else 'compiled FlexAttention'}"
          f" path; swapped: dswa.samel.swap_attention. ms per call, {TOOL}.")
    runs = result.get("runs", [])
    if len(runs) > 1:
        print()
        print(f"The rows come from {len(runs)} runs on "
              f"{', '.join(sorted({r.get('device', '?') for r in runs}))}, commit "
              f"{', '.join(sorted({r.get('commit', '?') for r in runs}))}: "
              f"{', '.join(r.get('date', '?') for r in runs)}.")
    print()
    head = ["dtype", "fp32 matmul", "L", "step", "mode", "unswapped ms", "swapped ms",
            "speed-up", "dswa / GEMM share", "rel. err", "timing"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    order = {"float32": 0, "float16": 1, "bfloat16": 2}
    for r in sorted(result.get("rows", []), key=lambda r: (
            order.get(r["dtype"], 9), r.get("precision") or "", r["L"],
            r.get("phase", ""), r["mode"] != "eager")):
        share, gemm = r.get("dswa_share"), r.get("gemm_share")
        cells = [r["dtype"], r.get("precision", "-") if r["dtype"] == "float32" else "-",
                 str(r["L"]), r.get("phase", "-"), r["mode"],
                 _f(r.get("unswapped_ms"), ".3f"), _f(r.get("swapped_ms"), ".3f"),
                 _f(r.get("speedup"), ".2f") + ("x" if r.get("speedup") else ""),
                 " / ".join("-" if v is None else f"{100 * v:.1f} %" for v in (share, gemm)),
                 _f(r.get("rel_err"), ".1e"),
                 (r.get("timing", "-") + (f" x{r['calls']}" if r.get("calls") else ""))
                 if not r.get("error") else r["error"][:80]]
        print("| " + " | ".join(cells) + " |")


def add_arguments(ap):
    """The options only --op block reads."""
    ap.add_argument("--block-attn", default="flex", choices=["flex", "chunked"],
                    help="--op block: the unswapped attention's path without flash-attn "
                         "(upstream's compiled FlexAttention, or its chunked-halo SDPA fallback)")
    ap.add_argument("--phases", nargs="+", default=["inference", "training"],
                    choices=["inference", "training"],
                    help="--op block: the block's forward, and/or a training step")


def run(args, machine_info):
    """compare.py --op block. 0 when every row checked out (or the run was skipped: no torch,
    no CUDA device), 1 otherwise."""
    torch = SP.torch_or_skip("compare.py --op block", args.device)
    if torch is None:
        return 0
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "python", "tests"))
    import dswa
    if args.device == "cuda" and not dswa.cuda_available():
        print("compare.py --op block: skipped: libdswa.so has no CUDA backend or sees no device")
        return 0
    SP.torch = torch          # graph_time's module global (set by samel_prologue.run there)
    import comparators as C
    C.raise_compile_limits()
    dtypes = [DTYPES[SP.dtype_name(s)] for s in (args.dtypes or ["f32", "f16", "bf16"])]
    if "--L" not in sys.argv:
        args.L = [1292]                      # SAME-L's decoder at its bars' size
    phases = args.phases
    start = time.time()
    machine = machine_info()
    if args.device == "cpu":
        machine["device"] = "cpu"
    result = {"tool": TOOL, "machine": machine, "config": dict(
        B=1, dim=DIM, heads=HEADS, head_dim=HEAD_DIM, ff_mult=FF_MULT, window=WINDOW,
        L=args.L, dtypes=dtypes, phases=phases, block_attn=args.block_attn,
        max_graph_calls=SP.GRAPH_CALLS, target_ms=TARGET_MS, warmup=args.graph_warmup,
        repeats=args.graph_repeats, dswa_lib=dswa.library_path()),
        "rows": []}
    log("machine:", json.dumps(machine))
    # eager rows first: the compiled ones spend most of the budget compiling
    todo = [(m, d, p, ph, L) for m in ("eager", "compiled") for d in dtypes
            for p in PRECISIONS.get(d, ("highest",)) for ph in phases for L in args.L]
    for mode, dtype, precision, phase, L in todo:
        if time.time() - start > args.budget:
            row = dict(dtype=dtype, precision=precision, L=L, N=17 * L, phase=phase, mode=mode,
                       ok=False, error="skipped: time budget spent")
        else:
            row = run_row(L, dtype, precision, phase, mode, args)
        result["rows"].append(row)
        log(json.dumps(row))
        SP.save(args.json, result)
    result["machine"]["wall_s"] = round(time.time() - start, 1)
    SP.save(args.json, result)
    print_table(result)
    return 0 if all(r.get("ok") for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit("block_bench.py: run it through bench/compare.py --op block")
