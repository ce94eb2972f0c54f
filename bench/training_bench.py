"""compare.py --op samel --backward: the training comparators of the fused SAME-L block, the
paths the block's forward + backward is measured against (`dswa bench --op samel --backward`).
From the packed projection x (B, N, 5*H*D) and the norms' parameters to the heads' output, and
back (the gradients of x, both norms' gamma and beta, and their alphas where the path has them
as tensors):

- flex: the compiled prologue (bench/samel_prologue.py: DyT + RoPE + cat, torch.compile
  dynamic=False fullgraph) + FlexAttention over the 2H heads with a band block mask, compiled,
  then the subtraction (bench/comparators.py's flex: V copied to 2H heads, as Flex needs);
- chunked: the same compiled prologue + the chunked-halo SDPA path, upstream's fallback where
  FlexAttention fails (python/tests/upstream_block.py's chunked_halo_attention, compare.py --op
  block --block-attn chunked's unswapped attention: queries in chunks of 1024 with the window's
  halo of keys), once per pair, then the subtraction;
- dswa: torch.ops.dswa.samel_attention and its autograd (when the dswa package registers one;
  otherwise the row says so and the others still run).

Each path is timed forward alone (torch.no_grad) and forward + backward (torch.autograd.grad of
the output against a fixed random dout), as `dswa bench` times: a CUDA graph of graph_calls
back-to-back calls, replayed (samel_prologue.graph_time, median ms per call); where capture is
refused, CUDA events around the calls (the row's "timing" says "events", block_bench.timed).
Checks, before timing (fwd_ok: the forward's; ok: both): each path's forward against the float64 reference of the block on
sampled rows (samel_prologue.prologue_ref64, comparators.ref64), and each path's gradient of x
against the chunked path's (relative Frobenius difference, in the dtype).

    python3 bench/compare.py --op samel --backward --json train-compare.json
    build/dswa bench --op samel --backward --json > bench-samel-backward.json
    python3 bench/readme_table.py bench-samel-backward.json --compare train-compare.json
"""
import json
import os
import sys
import time
import traceback

import block_bench
import samel_prologue as SP

TOOL = "bench/compare.py --op samel --backward"   # what readme_table.py --compare accepts
PATHS = ("flex", "chunked", "dswa")
GRAD_TOL = {"float32": 1e-2, "bfloat16": 1e-1, "float16": 5e-2}   # sanity bounds vs chunked


def log(*a):
    print(f"[train {time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def _upstream():
    """python/tests/upstream_block.py (chunked_halo_attention lives there)."""
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import upstream_block
    return upstream_block


def make_paths(torch, dswa_math):
    """{name: f(x, params) -> (B, N, H, D)} for each path (params: the prologue's)."""
    import comparators as C
    U = _upstream()
    H, D, W, SCALE, LAM = SP.H, SP.D, SP.W, SP.SCALE, SP.LAM
    cprol = torch.compile(SP.prologue, dynamic=False, fullgraph=True)

    def flex(x, params):
        qq, kk, v = cprol(x, *params)
        return C.flex(qq, kk, v, H, W, W, SCALE, LAM, True)

    def chunked(x, params):
        qq, kk, v = cprol(x, *params)
        vt = v.transpose(1, 2)
        a = [U.chunked_halo_attention(qq[:, :, p * H:(p + 1) * H].transpose(1, 2),
                                      kk[:, :, p * H:(p + 1) * H].transpose(1, 2), vt, (W, W))
             for p in (0, 1)]
        return torch.sub(a[0], a[1], alpha=LAM).transpose(1, 2)

    import dswa._core
    freq = list(dswa._core.rope_freq(SP.ROT, SP.BASE, None))   # the op takes the frequencies

    def fused(x, params):
        q_gamma, q_beta, k_gamma, k_beta = params[:4]
        op = torch.ops.dswa.samel_attention
        out = op(x, q_gamma, q_beta, k_gamma, k_beta, SP.Q_ALPHA, SP.K_ALPHA, H, W, W, SCALE, LAM,
                 SP.ROT, freq, 0, dswa_math)
        return out.view(x.shape[0], x.shape[1], H, D)

    return {"flex": flex, "chunked": chunked, "dswa": fused}


def run_row(L, dt_name, args, dswa_math, tol):
    import torch
    import comparators as C
    B, H, D = SP.B, SP.H, SP.D
    N = 17 * L
    row = dict(L=L, N=N, dtype=dt_name, timing=None)
    dev = args.device
    dt = getattr(torch, SP.DTYPES[dt_name])
    g = torch.Generator(device=dev).manual_seed(L)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32)
    x = rnd(B, N, 5 * H * D).to(dt).requires_grad_()
    norms = [(1 + 0.25 * rnd(D)), 0.25 * rnd(D), (1 + 0.25 * rnd(D)), 0.25 * rnd(D)]
    norms = [t.requires_grad_() for t in norms]
    alphas = [torch.tensor(a, device=dev).requires_grad_() for a in (SP.Q_ALPHA, SP.K_ALPHA)]
    inv_freq = 1.0 / (SP.BASE ** (torch.arange(0, SP.ROT, 2, device=dev,
                                               dtype=torch.float32) / SP.ROT))
    params = (*norms, *alphas, inv_freq)
    dout = rnd(B, N, H, D).to(dt)
    wrt = [x, *norms, *alphas]
    samples = C.sample_rows(N, args.rows).to(dev)
    with torch.no_grad():
        rq, rk, rv = SP.prologue_ref64(x, *params)
        ref = C.ref64(rq, rk, rv, H, SP.W, SP.W, SP.SCALE, SP.LAM, True, rows=samples)
        rq = rk = rv = None
    grads = {}
    for name, f in make_paths(torch, dswa_math).items():
        r = dict(fwd_ms=None, fwd_bwd_ms=None, rel_err=None, grad_rel_diff=None, fwd_ok=None,
                 ok=None, error=None, compile_s=None)
        row[name] = r
        if time.time() > args.deadline:
            r["error"] = "skipped: time budget spent"
            continue
        try:
            inputs = wrt if name != "dswa" else [x, *norms]   # dswa's alphas are floats

            def fwd(f=f):
                with torch.no_grad():
                    return f(x, params)

            def fwd_bwd(f=f, inputs=inputs):
                return torch.autograd.grad(f(x, params), inputs, dout, allow_unused=True)

            def time_it(key, fn):
                r[f"{key}_ms"], how, _ = block_bench.timed(fn, args, SP.GRAPH_CALLS)
                row["timing"] = how if row["timing"] in (None, how) else "mixed"

            t0 = time.time()
            out = fwd()
            if dev == "cuda":
                torch.cuda.synchronize()
            r["rel_err"] = C.rel_err(out[:, samples], ref)
            r["ok"] = r["fwd_ok"] = bool(r["rel_err"] < tol[SP.DTYPES[dt_name]])
            out = None
            time_it("fwd", fwd)   # before the backward: a path without one keeps this time
            grads[name] = fwd_bwd()[0].detach()
            if dev == "cuda":
                torch.cuda.synchronize()
            r["compile_s"] = round(time.time() - t0, 1)
            time_it("fwd_bwd", fwd_bwd)
        except Exception as e:
            r["ok"] = False
            r["error"] = f"{type(e).__name__}: {e}"[:600]
            traceback.print_exc()
        finally:
            if dev == "cuda":
                torch.cuda.empty_cache()
    base = grads.get("chunked")
    for name, gx in grads.items():
        if base is not None and name != "chunked":
            d = float((gx.double() - base.double()).norm() / base.double().norm())
            row[name]["grad_rel_diff"] = d
            if d >= GRAD_TOL[SP.DTYPES[dt_name]]:
                row[name]["ok"] = False
                row[name]["error"] = (f"its gradient of x is {d:.3g} off the chunked path's "
                                      "(relative)")
    return row


def run(args, machine_info, tol):
    """compare.py --op samel --backward. 0 when every path of every row ran and checked out
    (a path the dswa package lacks, e.g. the fused block's autograd, is a row's error: 1),
    1 otherwise; skipped (0) without torch or a CUDA device."""
    torch = SP.torch_or_skip("compare.py --op samel --backward", args.device)
    if torch is None:
        return 0
    import comparators as C
    import dswa
    from dswa import _lib
    SP.torch = torch          # graph_time's module global
    C.raise_compile_limits()
    dtypes = [SP.dtype_name(s) for s in (args.dtypes or list(SP.DTYPES))]
    start = time.time()
    args.deadline = start + args.budget
    machine = machine_info()
    if args.device == "cpu":
        machine["device"] = "cpu"
    result = {"tool": TOOL, "machine": machine, "config": dict(
        B=SP.B, H=SP.H, D=SP.D, window_left=SP.W, window_right=SP.W, scale=SP.SCALE,
        lam=SP.LAM, rot_dims=SP.ROT, rope_base=SP.BASE, math=args.dswa_math,
        graph_calls=SP.GRAPH_CALLS, warmup=args.graph_warmup, repeats=args.graph_repeats,
        L=args.L, dtypes=dtypes, sample_rows=args.rows, dswa_lib=dswa.library_path(),
        paths=list(PATHS),
        what="fwd: the path's forward under torch.no_grad; fwd_bwd: the forward and "
             "torch.autograd.grad of its output (a fixed random dout) against x, the norms' "
             "gamma and beta (and alpha, where a tensor); flex and chunked: the compiled "
             "prologue (DyT + RoPE + cat) then FlexAttention (band block mask, compiled) or "
             "the chunked-halo SDPA path; dswa: torch.ops.dswa.samel_attention"),
        "rows": []}
    log("machine:", json.dumps(machine))
    SP.save(args.json, result)
    for dt_name in dtypes:
        for L in args.L:
            try:
                row = run_row(L, dt_name, args, _lib.MATH[args.dswa_math], tol)
            except Exception as e:   # the inputs or the reference: every path says so
                traceback.print_exc()
                msg = f"{type(e).__name__}: {e}"[:600]
                row = dict(L=L, N=17 * L, dtype=dt_name, timing=None,
                           **{p: dict(ok=False, error=msg) for p in PATHS})
            finally:
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            result["rows"].append(_finite(row))
            log(fmt_row(result["rows"][-1]))
            SP.save(args.json, result)
    result["machine"]["wall_s"] = round(time.time() - start, 1)
    SP.save(args.json, result)
    print_table(result)
    return 0 if all(r[p].get("ok") for r in result["rows"] for p in PATHS) else 1


def _finite(obj):
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    return SP.finite(obj) if isinstance(obj, float) else obj


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def fmt_row(r):
    parts = [f"{r['dtype']:<5}L={r['L']:<5}"]
    for p in PATHS:
        c = r.get(p) or {}
        parts.append(f"{p} {_f(c.get('fwd_ms'), '.3f')} / {_f(c.get('fwd_bwd_ms'), '.3f')} ms"
                     + (f" ERROR {c['error'][:120]}" if c.get("error") else ""))
    return ", ".join(parts)


def print_table(result):
    m = result.get("machine", {})
    print(f"# {TOOL}: forward / forward + backward, ms per call; {m.get('device', '?')}  torch "
          f"{m.get('torch', '?')}  {m.get('date', '')}")
    head = ["dtype", "L", "N"] + [f"{p} {k}" for p in PATHS for k in ("fwd", "fwd+bwd")] + \
        ["timing", "errors"]
    table = [head]
    for r in result.get("rows", []):
        cells = [r.get("dtype", "?"), str(r.get("L")), str(r.get("N"))]
        errs = []
        for p in PATHS:
            c = r.get(p) or {}
            cells += [_f(c.get("fwd_ms"), ".3f"), _f(c.get("fwd_bwd_ms"), ".3f")]
            if c.get("error"):
                errs.append(f"{p}: {c['error'][:80]}")
        table.append(cells + [r.get("timing") or "-", "; ".join(errs)])
    widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
    for t in table:
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(t, widths))) + "  " + t[-1])


if __name__ == "__main__":
    sys.exit("training_bench.py: run it through bench/compare.py --op samel --backward")
