"""compare.py --op block: one upstream-shaped SAME-L transformer block (python/tests/
upstream_block.py: dim 1536 = 24 heads of 64, DyT pre-norm and qk-norm, differential
attention with RoPE on 32 dims, window [17, 17], SwiGLU feed-forward of mult 3, residuals),
called as upstream's TransformerBlock is, unswapped and with dswa.samel.swap_attention.

Unswapped, the attention runs what upstream runs without flash-attn: the chunked-halo SDPA
fallback (queries in chunks of 1024 with the window's halo of keys; --block-attn chunked, the
default) or FlexAttention with a band block mask, compiled (--block-attn flex; upstream tries
it first when FlexAttention is importable). Each (dtype, L, mode) row: the block and its
attention module alone, unswapped and swapped, eager and torch.compile'd (dynamic=False; the
swapped module was called once eagerly first, so its RoPE table is verified and the compiled
graph holds the fused op), B = 1, N = 17 L.

Timing as an engine runs: a CUDA graph of graph_calls back-to-back calls on the same input,
replayed (samel_prologue.graph_time: median ms per call); where capture fails (the row says
"events"), CUDA events around graph_calls eager calls, repeated. Before timing, the swapped
output is checked against the unswapped one (relative Frobenius error of block(x) - x, and
of the attention's output) within TOL.

    python3 bench/compare.py --op block --json block.json [--block-attn flex] [--quick]
"""
import copy
import json
import os
import statistics
import sys
import time
import traceback

import samel_prologue as SP

TOOL = "bench/compare.py --op block"
DIM, HEADS, HEAD_DIM, FF_MULT, WINDOW = 1536, 24, 64, 3, [17, 17]
DTYPES = {"f32": "float32", "bf16": "bfloat16"}
# swapped against unswapped, both in the dtype: float32 the fused block's TF32 error; bfloat16
# both sides' roundings of every projection (the tests' bounds, against float64, are tighter)
TOL = {"float32": 5e-3, "bfloat16": 4e-2}


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


def timed(fn, args):
    """(ms per call, how it was timed)."""
    try:
        return SP.graph_time(fn, SP.GRAPH_CALLS, args.graph_warmup, args.graph_repeats,
                             args.device)[0], "cuda-graph" if args.device == "cuda" else "wall"
    except Exception as e:          # capture refused: time the calls as they run
        log(f"CUDA-graph capture failed ({type(e).__name__}: {str(e)[:120]}); events instead")
        import torch
        torch.cuda.synchronize()
        return event_time(fn, SP.GRAPH_CALLS, args.graph_warmup, args.graph_repeats)[0], "events"


def rel(a, b, base):
    a, b, base = (t.detach().double() for t in (a, b, base))
    return float((a - b).norm() / (b - base).norm())


def run_row(L, dtype, mode, args):
    import torch
    import dswa.samel
    import upstream_block as U
    row = dict(dtype=dtype, L=L, N=17 * L, mode=mode, attn=args.block_attn)
    try:
        dt, dev = getattr(torch, dtype), args.device
        torch.manual_seed(0)
        ref = U.randomize(U.TransformerBlock(DIM, HEAD_DIM, FF_MULT, core=args.block_attn))
        ref = ref.eval().to(device=dev, dtype=dt)
        ref.rope.inv_freq = U.RotaryEmbedding(HEAD_DIM // 2).inv_freq.to(dev)   # float32
        sw = dswa.samel.swap_attention(copy.deepcopy(ref))
        x = torch.randn(1, 17 * L, DIM, device=dev, dtype=dt)
        rope = ref.rope.forward_from_seq_len(17 * L)
        with torch.no_grad():
            h = ref.pre_norm(x)
        kw = dict(rotary_pos_emb=rope, flash_attn_sliding_window=WINDOW)
        fns = {"block": (lambda m: (lambda: m(x, self_attention_flash_sliding_window=WINDOW))),
               "attn": (lambda m: (lambda: m.self_attn(h, **kw)))}
        with torch.no_grad():
            for m in (ref, sw):                 # eager first: the swapped one verifies RoPE
                for f in fns.values():
                    f(m)()
            if mode == "compiled":
                torch._dynamo.reset()
                mods = {}
                for name, m in (("unswapped", ref), ("swapped", sw)):
                    mods[name] = {"block": torch.compile(m, dynamic=False),
                                  "attn": torch.compile(m.self_attn, dynamic=False)}
                calls = {(n, w): (lambda c=c, w=w: c(x, self_attention_flash_sliding_window=
                                                       WINDOW) if w == "block" else c(h, **kw))
                         for n, d in mods.items() for w, c in d.items()}
            else:
                calls = {(n, w): f(m) for n, m in (("unswapped", ref), ("swapped", sw))
                         for w, f in fns.items()}
            ub, sb = calls[("unswapped", "block")](), calls[("swapped", "block")]()
            ua, sa = calls[("unswapped", "attn")](), calls[("swapped", "attn")]()
            row["rel_err_block"] = rel(sb, ub, x)
            row["rel_err_attn"] = rel(sa, ua, torch.zeros_like(ua))
            row["ok"] = row["rel_err_block"] < TOL[dtype] and row["rel_err_attn"] < TOL[dtype]
            if not row["ok"]:
                row["error"] = "swapped output off the unswapped one: not timed"
                return row
            for (n, w), fn in calls.items():
                row[f"{w}_{n}_ms"], row["timing"] = timed(fn, args)
        for w in ("block", "attn"):
            row[f"{w}_speedup"] = row[f"{w}_unswapped_ms"] / row[f"{w}_swapped_ms"]
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
    """The README's block table (markdown): one row per dtype, L and mode."""
    m = result.get("machine", {})
    c = result.get("config", {})
    print(f"{m.get('device', '?')}, torch {m.get('torch', '?')}, {m.get('date', '')}: one SAME-L "
          f"transformer block (dim {DIM}, {HEADS} x {HEAD_DIM}, window {WINDOW}, FF mult "
          f"{FF_MULT}), B = 1, N = 17 L; unswapped attention: upstream's "
          f"{'chunked-halo SDPA' if c.get('block_attn') == 'chunked' else 'compiled FlexAttention'}"
          f" path; swapped: dswa.samel.swap_attention. ms per call, {TOOL}.")
    print()
    head = ["dtype", "L", "mode", "block ms", "swapped", "speed-up", "attention ms", "swapped",
            "speed-up", "rel. err block / attn", "timing"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    modes = ("eager", "compiled")
    for r in sorted(result.get("rows", []), key=lambda r: (r["dtype"], r["L"], modes.index(r["mode"]))):
        err = (f"{_f(r.get('rel_err_block'), '.1e')} / {_f(r.get('rel_err_attn'), '.1e')}"
               if r.get("rel_err_block") is not None else "-")
        cells = [r["dtype"], str(r["L"]), r["mode"],
                 _f(r.get("block_unswapped_ms"), ".3f"), _f(r.get("block_swapped_ms"), ".3f"),
                 _f(r.get("block_speedup"), ".2f") + ("x" if r.get("block_speedup") else ""),
                 _f(r.get("attn_unswapped_ms"), ".3f"), _f(r.get("attn_swapped_ms"), ".3f"),
                 _f(r.get("attn_speedup"), ".2f") + ("x" if r.get("attn_speedup") else ""),
                 err, r.get("timing", "-") if not r.get("error") else r["error"][:80]]
        print("| " + " | ".join(cells) + " |")


def add_arguments(ap):
    """The options only --op block reads."""
    ap.add_argument("--block-attn", default="chunked", choices=["chunked", "flex"],
                    help="--op block: the unswapped attention's path (upstream's fallbacks "
                         "without flash-attn)")


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
    dtypes = [DTYPES[SP.dtype_name(s)] for s in (args.dtypes or ["f32", "bf16"])]
    start = time.time()
    machine = machine_info()
    if args.device == "cpu":
        machine["device"] = "cpu"
    result = {"tool": TOOL, "machine": machine, "config": dict(
        B=1, dim=DIM, heads=HEADS, head_dim=HEAD_DIM, ff_mult=FF_MULT, window=WINDOW,
        L=args.L, dtypes=dtypes, block_attn=args.block_attn, graph_calls=SP.GRAPH_CALLS,
        warmup=args.graph_warmup, repeats=args.graph_repeats, dswa_lib=dswa.library_path()),
        "rows": []}
    log("machine:", json.dumps(machine))
    # eager rows first: the compiled ones spend most of the budget compiling
    for mode, dtype, L in [(m, d, L) for m in ("eager", "compiled") for d in dtypes for L in args.L]:
        if time.time() - start > args.budget:
            row = dict(dtype=dtype, L=L, N=17 * L, mode=mode, ok=False,
                       error="skipped: time budget spent")
        else:
            row = run_row(L, dtype, mode, args)
        result["rows"].append(row)
        log(json.dumps(row))
        SP.save(args.json, result)
    result["machine"]["wall_s"] = round(time.time() - start, 1)
    SP.save(args.json, result)
    print_table(result)
    return 0 if all(r.get("ok") for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit("block_bench.py: run it through bench/compare.py --op block")
