"""The comparator of `dswa bench --op samel`: SAME-L's attention block as it runs without the
fused kernel, the unfused path the fused block's goal (b) is measured against. The prologue,
written in PyTorch as dswa.h describes the block and torch.compile'd: the packed projection x
(B, N, 5*H*D) split into q, k, v, q_diff, k_diff (`chunk(5)`, heads (h d) -> h, d); DyT qk-norm
gamma * tanh(alpha * x) + beta (q_norm for q and q_diff, k_norm for k and k_diff) in fp32,
rounded to the dtype; RoPE in fp32 on the first rot_dims dims (inv_freq = 1 / base^(2i /
rot_dims), angle = position * inv_freq, non-interleaved rotate_half), rounded to the dtype; the
concatenations that make the op's (B, N, 2H, D) q and k. Then dswa's op on its output
(torch.ops.dswa.diff_swa, V the packed input's chunk read in place and shared by both pairs).

Timed as `dswa bench` times (tools/bench/timing.c): a CUDA graph of `graph_calls` back-to-back
calls on the same inputs, replayed `warmup` times untimed and `repeats` times timed, the median
per call (events around each replay); the prologue alone, the op alone, and both (goal (b)'s
comparator). Each row's output is checked on sampled rows against a float64 reference of the
block (the same prologue in float64, rounded to the dtype where the block rounds, then the
float64 reference of the op: comparators.ref64). The inputs are random normal (the norms' gamma
near 1, beta near 0); their values do not change the timing.

Run through bench/compare.py:
    python3 bench/compare.py --op samel --json samel-compare.json
    build/dswa bench --op samel --json > bench-samel.json
    python3 bench/readme_table.py bench-samel.json --compare samel-compare.json   # the ratios
"""
import json
import math as _math
import os
import statistics
import sys
import time
import traceback

TOOL = "bench/compare.py --op samel"   # what bench/readme_table.py --compare accepts
B, H, D, W, SCALE, LAM = 1, 24, 64, 17, 1 / 8, 1.0
ROT, BASE = 32, 10000.0
Q_ALPHA, K_ALPHA = 0.75, 1.25
GRAPH_CALLS = 20   # dswa bench's GRAPH_CALLS: readme_table.py refuses a file with another count
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}   # dswa's names -> torch's


def log(*a):
    print(f"[samel {time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def finite(x):
    """JSON has no NaN: a non-finite number is written as null."""
    return x if isinstance(x, (int, float)) and _math.isfinite(x) else None


def save(path, obj):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, allow_nan=False)
        os.replace(tmp, path)


def torch_or_skip(what, device):
    """torch, or None after printing why `what` (a compare.py run, e.g. "compare.py --op block")
    is skipped: no torch, or no CUDA device for it where the run wants one."""
    try:
        import torch
    except ImportError as e:
        print(f"{what}: skipped: needs torch ({e})")
        return None
    if device == "cuda" and not torch.cuda.is_available():
        print(f"{what}: skipped: no CUDA device for torch")
        return None
    return torch


# ---- the prologue ------------------------------------------------------------------------------
def prologue(x, q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, inv_freq):
    """(q, k, v) for dswa's op from the packed projection x (B, N, 5*H*D): q and k (B, N, 2H, D)
    (pair 0: q / k, pair 1: q_diff / k_diff), v (B, N, H, D) a view of x's chunk 2."""
    b, n = x.shape[:2]
    dt = x.dtype
    q, k, v, qd, kd = x.view(b, n, 5, H, D).unbind(2)
    rot = inv_freq.shape[0] * 2
    pos = torch.arange(n, device=x.device, dtype=torch.float32)
    ang = pos[:, None] * inv_freq[None, :]                      # (N, rot / 2), fp32
    ang = torch.cat([ang, ang], dim=-1)[:, None, :]             # (N, 1, rot)
    cos, sin = ang.cos(), ang.sin()

    def dyt(t, alpha, gamma, beta):
        return (gamma * torch.tanh(alpha * t.float()) + beta).to(dt)

    def rope(t):
        tf = t.float()
        r, rest = tf[..., :rot], tf[..., rot:]
        half = torch.cat([-r[..., rot // 2:], r[..., :rot // 2]], dim=-1)   # rotate_half
        return torch.cat([(r * cos + half * sin).to(dt), rest.to(dt)], dim=-1)

    qq = torch.cat([rope(dyt(q, q_alpha, q_gamma, q_beta)),
                    rope(dyt(qd, q_alpha, q_gamma, q_beta))], dim=2)
    kk = torch.cat([rope(dyt(k, k_alpha, k_gamma, k_beta)),
                    rope(dyt(kd, k_alpha, k_gamma, k_beta))], dim=2)
    return qq, kk, v


def prologue_ref64(x, q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, inv_freq):
    """The same in float64, rounded to x's dtype after DyT and after RoPE (dswa.h's model of
    the block; the angles in fp32 as upstream builds them)."""
    b, n = x.shape[:2]
    dt = x.dtype
    t = x.view(b, n, 5, H, D).double()
    rot = inv_freq.shape[0] * 2
    pos = torch.arange(n, device=x.device, dtype=torch.float32)
    ang = (pos[:, None] * inv_freq[None, :]).double()[:, None, :]   # fp32 products, (N, 1, rot/2)
    cos, sin = ang.cos(), ang.sin()

    def rnd(y):
        return y.to(dt).double()

    def one(c, alpha, gamma, beta):
        y = rnd(gamma.double() * torch.tanh(float(alpha) * t[:, :, c]) + beta.double())
        a, bb = y[..., :rot // 2], y[..., rot // 2:rot]
        r = torch.cat([a * cos - bb * sin, bb * cos + a * sin], dim=-1)
        return torch.cat([rnd(r), y[..., rot:]], dim=-1)

    qq = torch.cat([one(0, q_alpha, q_gamma, q_beta), one(3, q_alpha, q_gamma, q_beta)], dim=2)
    kk = torch.cat([one(1, k_alpha, k_gamma, k_beta), one(4, k_alpha, k_gamma, k_beta)], dim=2)
    return qq, kk, t[:, :, 2]


# ---- timing ------------------------------------------------------------------------------------
def graph_time(fn, calls, warm, repeats, device):
    """(median, min, max) ms per call of `calls` back-to-back fn() in one CUDA graph, replayed
    (on the CPU, for tests only: plain calls timed by the wall clock)."""
    if device != "cuda":
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / calls)
        return statistics.median(times), min(times), max(times)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # compile, autotune and the allocator's pools, before capture
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / calls)
    del g
    return statistics.median(times), min(times), max(times)


# ---- one row -----------------------------------------------------------------------------------
def run_row(L, dt_name, args, dswa_math, tol):
    import comparators as C
    N = 17 * L
    row = dict(name="prologue+op", L=L, N=N, dtype=dt_name, prologue_ms=None, op_ms=None,
               both_ms=None, rel_err=None, ok=None, error=None, compile_s=None, note="")
    x = ref = out = None
    try:
        dev = args.device
        dt = getattr(torch, DTYPES[dt_name])
        g = torch.Generator(device=dev).manual_seed(L)

        def rnd(*shape):
            return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32)
        x = rnd(B, N, 5 * H * D).to(dt)
        q_gamma, q_beta = 1 + 0.25 * rnd(D), 0.25 * rnd(D)
        k_gamma, k_beta = 1 + 0.25 * rnd(D), 0.25 * rnd(D)
        q_alpha = torch.tensor(Q_ALPHA, device=dev)
        k_alpha = torch.tensor(K_ALPHA, device=dev)
        inv_freq = 1.0 / (BASE ** (torch.arange(0, ROT, 2, device=dev, dtype=torch.float32) / ROT))
        params = (q_gamma, q_beta, k_gamma, k_beta, q_alpha, k_alpha, inv_freq)
        cprol = torch.compile(prologue, dynamic=False, fullgraph=True)
        op = torch.ops.dswa.diff_swa

        def both():
            qq, kk, v = cprol(x, *params)
            return op(qq, kk, v, W, W, SCALE, LAM, dswa_math)

        t0 = time.time()
        out = both()
        if dev == "cuda":
            torch.cuda.synchronize()
        row["compile_s"] = round(time.time() - t0, 1)
        rows = C.sample_rows(N, args.rows).to(dev)
        rq, rk, rv = prologue_ref64(x, *params)
        ref = C.ref64(rq, rk, rv, H, W, W, SCALE, LAM, True, rows=rows)
        rq = rk = rv = None
        row["rel_err"] = C.rel_err(out[:, rows], ref)
        row["ok"] = bool(row["rel_err"] < tol[DTYPES[dt_name]])
        qq, kk, v = cprol(x, *params)
        for key, fn in (("prologue", lambda: cprol(x, *params)),
                        ("op", lambda: op(qq, kk, v, W, W, SCALE, LAM, dswa_math)),
                        ("both", both)):
            med, lo, hi = graph_time(fn, GRAPH_CALLS, args.graph_warmup, args.graph_repeats, dev)
            row.update({f"{key}_ms": med, f"{key}_ms_min": lo, f"{key}_ms_max": hi})
        qq = kk = v = None
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:800]
        traceback.print_exc()
    finally:
        x = ref = out = None
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return {k: finite(v) if isinstance(v, float) else v for k, v in row.items()}


# ---- driver ------------------------------------------------------------------------------------
def dtype_name(s):
    """dswa's name of a dtype given by dswa's or torch's name."""
    for k, v in DTYPES.items():
        if s in (k, v):
            return k
    raise SystemExit(f"compare.py --op samel: --dtypes: '{s}' is not one of "
                     f"{', '.join(DTYPES)} (or {', '.join(DTYPES.values())})")


def run(args, machine_info, tol):
    """compare.py --op samel: args from its parser; machine_info() describes the machine; tol:
    compare.py's error bounds by torch's dtype name."""
    global torch
    import torch   # noqa: F811 (module global: the functions above use it)
    import comparators as C
    import dswa
    C.raise_compile_limits()
    from dswa import _lib
    dtypes = [dtype_name(s) for s in (args.dtypes or list(DTYPES))]
    start = time.time()
    machine = machine_info()
    if args.device == "cpu":
        machine["device"] = "cpu"
    result = {"tool": TOOL, "machine": machine, "config": dict(
        B=B, H=H, D=D, window_left=W, window_right=W, scale=SCALE, lam=LAM, rot_dims=ROT,
        rope_base=BASE, math=args.dswa_math, graph_calls=GRAPH_CALLS,
        warmup=args.graph_warmup, repeats=args.graph_repeats, L=args.L, dtypes=dtypes,
        sample_rows=args.rows, dswa_lib=dswa.library_path(),
        what="prologue: torch.compile(dynamic=False, fullgraph=True) of DyT + RoPE + cat; "
             "op: torch.ops.dswa.diff_swa with V shared (pair stride 0); both: one then the other"),
        "rows": []}
    log("machine:", json.dumps(machine))
    save(args.json, result)
    for dt_name in dtypes:
        for L in args.L:
            if time.time() - start > args.budget:
                result["rows"].append(dict(name="prologue+op", L=L, N=17 * L, dtype=dt_name,
                                           error="skipped: time budget spent"))
            else:
                result["rows"].append(run_row(L, dt_name, args, _lib.MATH[args.dswa_math], tol))
            log(fmt_row(result["rows"][-1]))
            save(args.json, result)
    result["machine"]["wall_s"] = round(time.time() - start, 1)
    save(args.json, result)
    print_table(result)
    return 0 if all(r.get("ok") for r in result["rows"]) else 1


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def fmt_row(r):
    s = (f"{r['dtype']:<5}L={r['L']:<5} prologue {_f(r.get('prologue_ms'), '.4f')} ms, op "
         f"{_f(r.get('op_ms'), '.4f')} ms, both {_f(r.get('both_ms'), '.4f')} ms, err "
         f"{_f(r.get('rel_err'), '.2e')}")
    if r.get("ok") is False:
        s += "  CHECK FAILED"
    if r.get("error"):
        s += f"  ERROR {r['error'][:200]}"
    return s


def print_table(result):
    m = result.get("machine", {})
    print(f"# {TOOL}: compiled prologue + dswa's op, {m.get('device', '?')}  torch "
          f"{m.get('torch', '?')}  {m.get('date', '')}")
    head = ["dtype", "L", "N", "prologue ms", "op ms", "both ms", "rel err", "check", "error"]
    table = [head]
    for r in result.get("rows", []):
        check = "-" if r.get("ok") is None else ("ok" if r["ok"] else "FAIL")
        table.append([r.get("dtype", "?"), str(r.get("L")), str(r.get("N")),
                      _f(r.get("prologue_ms"), ".4f"), _f(r.get("op_ms"), ".4f"),
                      _f(r.get("both_ms"), ".4f"), _f(r.get("rel_err"), ".2e"), check,
                      (r.get("error") or "")[:90]])
    widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
    for t in table:
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(t, widths))) + "  " + t[-1])


def add_arguments(ap):
    """The options only --op samel reads (the others are compare.py's)."""
    ap.add_argument("--graph-warmup", type=int, default=2,
                    help="--op samel: untimed graph replays (dswa bench's default)")
    ap.add_argument("--graph-repeats", type=int, default=10,
                    help="--op samel: timed graph replays (dswa bench's default)")


if __name__ == "__main__":
    sys.exit("samel_prologue.py: run it through bench/compare.py --op samel")
