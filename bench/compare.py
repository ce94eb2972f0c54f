"""dswa against its comparators on the SAME-L shapes (SPEC section 5).

For each implementation (dswa through the Python package python/dswa, the block-tiled Triton
kernel, FlexAttention over 2H heads + subtraction), each L (N = 17 L), dtype and V layout (full
2H heads, or shared H heads read with pair stride 0): median time, % of the copy-bandwidth
floor, GB/s of minimum traffic, relative Frobenius error against a float64 reference on 256
sampled rows, and (dswa, Triton) whether every output element was written (the output is
poisoned with NaN first).

Each implementation runs in its own child process, so a crash or a sticky CUDA error in one
cannot take the others down, and each gets a share of --budget seconds; rows are saved as they
come, so a killed run still leaves its JSON.

    python3 bench/compare.py --json out.json            # full run
    python3 bench/compare.py --quick --json out.json    # L=256 only, shorter timing
    python3 bench/compare.py --table out.json           # print the table of a saved run

--op samel runs instead the comparator of the fused SAME-L block (bench/samel_prologue.py: the
compiled PyTorch prologue + dswa's op, in CUDA graphs as `dswa bench` times), whose JSON
bench/readme_table.py --compare joins to `dswa bench --op samel --json`'s:
    python3 bench/compare.py --op samel --json samel-compare.json

--op samel --backward runs instead the training comparators of the fused block (bench/
training_bench.py: forward and forward + backward of the compiled prologue + FlexAttention with a
band block mask, of the compiled prologue + the chunked-halo SDPA path, and of dswa's
torch.ops.dswa.samel_attention with its autograd), whose JSON bench/readme_table.py --compare
joins to `dswa bench --op samel --backward --json`'s:
    python3 bench/compare.py --op samel --backward --json train-compare.json

--op block times one SAME-L transformer block with its attention unswapped and swapped by
dswa.samel (bench/block_bench.py):
    python3 bench/compare.py --op block --json block.json
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback

import block_bench
import samel_prologue
import training_bench

HERE = os.path.dirname(os.path.abspath(__file__))
B, H, D, W, SCALE, LAM = 1, 24, 64, 17, 1 / 8, 1.0
IMPLS = ("dswa", "triton", "flex")
SHARE = {"dswa": 1.0, "triton": 1.0, "flex": 2.0}   # of the time budget
TOL = {"float32": 5e-3, "float16": 5e-3, "bfloat16": 2e-2}   # loose sanity bounds (TF32 f32)


def log(*a):
    print(f"[compare {time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def save(path, obj):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, path)


def commit():
    """$COMMIT (the GPU script's, where the tree has no .git), else git describe."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=HERE,
                              capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def machine_info():
    import torch
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "host": platform.node(), "commit": commit()}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception as e:
        info["triton"] = f"unavailable: {e}"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(device=p.name, capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2**30, 1))
    return info


# ---- one implementation on one configuration (child process) ------------------------------
def run_row(impl, L, dtype_name, shared, bw, args):
    import torch
    import comparators as C
    N = 17 * L
    dt = getattr(torch, dtype_name)
    nbytes = C.min_bytes(B, N, H, D, torch.tensor([], dtype=dt).element_size(), shared)
    row = dict(name=impl, dtype=dtype_name, L=L, N=N, v="shared" if shared else "full",
               time_ms=None, floor_ms=nbytes / bw * 1e3 if bw else None, pct_floor=None,
               gbps=None, rel_err=None, ok=None, written=None, note="", error=None)
    try:
        dev = args.device
        q, k, v = C.make_inputs(B, N, H, D, dt, shared, dev, seed=L)
        rows = C.sample_rows(N, args.rows).to(dev)
        ref = C.ref64(q, k, v, H, W, W, SCALE, LAM, shared, rows=rows)
        out = torch.full((B, N, H, D), float("nan"), device=dev, dtype=dt)
        if impl == "dswa":
            import dswa
            fn = dswa.prepare(q, k, v, out=out, window=W, scale=SCALE, lam=LAM,
                              math=args.dswa_math)
            row["note"] = f"math={args.dswa_math}"
        elif impl == "triton":
            fn = lambda: C.triton_block_tiled(q, k, v, H, W, W, SCALE, LAM, shared, out=out,
                                              num_warps=args.triton_warps)
            row["note"] = ("tf32 " if dt == torch.float32 else "") + f"warps={args.triton_warps}"
        else:
            fn = lambda: C.flex(q, k, v, H, W, W, SCALE, LAM, shared)
            out = None
            row["note"] = "times the copy of V to 2H heads" if shared else ""
        t0 = time.time()
        res = fn()
        if dev == "cuda":
            torch.cuda.synchronize()
        if time.time() - t0 > 2:
            log(f"  first call {time.time() - t0:.1f} s (compile)")
        if out is not None:
            nan = int(torch.isnan(out).sum())
            row["written"] = nan == 0
            if nan:
                row["note"] += f" {nan} unwritten (NaN) outputs"
        row["rel_err"] = C.rel_err(res[:, rows], ref)
        row["ok"] = bool(row["rel_err"] < TOL[dtype_name] and row["written"] is not False)
        ms = C.timeit(fn, warmup=args.warmup, rep=args.rep)
        row.update(time_ms=ms, gbps=nbytes / ms * 1e-6)
        if bw:
            row["pct_floor"] = 100 * row["floor_ms"] / ms
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:800]
        traceback.print_exc()
    finally:
        q = k = v = out = ref = fn = res = None
        torch.cuda.empty_cache()
    return row


def child(args):
    import comparators as C
    C.raise_compile_limits()
    impl = args.impls[0]
    result = {"rows": []}
    for L in args.L:
        for dtype_name in args.dtypes:
            for shared in (False, True):
                if time.time() > args.deadline:
                    result["rows"].append(dict(name=impl, dtype=dtype_name, L=L, N=17 * L,
                                               v="shared" if shared else "full",
                                               error="skipped: time budget spent"))
                    continue
                r = run_row(impl, L, dtype_name, shared, args.bandwidth, args)
                result["rows"].append(r)
                save(args.json, result)
                log(fmt_row(r))
    save(args.json, result)


# ---- driver ---------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", default="diff_swa", choices=["diff_swa", "samel", "block"],
                    help="the op against its comparators (default), the fused SAME-L block "
                         "against the compiled prologue + op, or a SAME-L transformer block "
                         "with its attention swapped (bench/block_bench.py)")
    ap.add_argument("--backward", action="store_true",
                    help="with --op samel: the training comparators, forward + backward "
                         "(bench/training_bench.py)")
    ap.add_argument("--L", type=int, nargs="+", default=[256, 1292, 4096])
    ap.add_argument("--dtypes", nargs="+", default=None,
                    help="default: float32 bfloat16 float16 (--op samel: f32 bf16 f16; either "
                         "spelling)")
    ap.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    ap.add_argument("--quick", action="store_true", help="L=256 only, shorter timing")
    ap.add_argument("--json", help="write every row and the machine info here")
    ap.add_argument("--table", metavar="JSON", nargs="+",
                    help="only print the table of a saved run (several: of their rows, one run "
                         "split over several calls)")
    ap.add_argument("--rows", type=int, default=256, help="query rows checked against ref64")
    ap.add_argument("--warmup", type=float, default=25, help="do_bench warmup, ms")
    ap.add_argument("--rep", type=float, default=200, help="do_bench rep, ms")
    ap.add_argument("--dswa-math", default="default", choices=["default", "tf32", "fp32"])
    ap.add_argument("--triton-warps", type=int, default=4)
    ap.add_argument("--budget", type=float, default=360,
                    help="seconds for all implementations (a child overrunning its share by "
                         "30 s is killed)")
    ap.add_argument("--in-process", action="store_true", help="no child processes")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bandwidth", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=math.inf, help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # "cpu": tests only
    samel_prologue.add_arguments(ap)
    block_bench.add_arguments(ap)
    args = ap.parse_args()
    if args.backward and args.op != "samel":
        ap.error(f"--backward applies to --op samel only (the fused block's training "
                 f"comparators), not --op {args.op}")
    if any(L < 1 for L in args.L):
        ap.error(f"--L: every L must be a positive integer, not {min(args.L)}")
    if args.budget <= 0:
        ap.error(f"--budget: {args.budget:g} is not a positive number of seconds")
    if args.dtypes and args.op in ("samel", "block"):
        for s in args.dtypes:   # the message names the bad value before anything runs
            samel_prologue.dtype_name(s)
    if args.table:
        saved = None
        for path in args.table:      # several: one table of their rows (a run split up)
            with open(path) as f:
                part = json.load(f)
            if saved is None:
                saved = part
                saved["runs"] = [part.get("machine", {})]
            elif part.get("tool") != saved.get("tool"):
                ap.error(f"--table: {path} is a {part.get('tool', 'compare.py')} run, "
                         f"not a {saved.get('tool', 'compare.py')} one like {args.table[0]}")
            else:
                saved["rows"] += part.get("rows", [])
                saved["runs"].append(part.get("machine", {}))
        {samel_prologue.TOOL: samel_prologue.print_table,
         training_bench.TOOL: training_bench.print_table,
         block_bench.TOOL: block_bench.print_table}.get(saved.get("tool"), print_table)(saved)
        return 0
    if args.quick and "--L" not in sys.argv:
        args.L = [256]
    if args.quick:
        args.warmup, args.rep = min(args.warmup, 10), min(args.rep, 50)
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "python")]   # comparators, the dswa package
    if args.op == "block":
        return block_bench.run(args, machine_info)
    if args.op == "samel" and args.backward:
        return training_bench.run(args, machine_info, TOL)
    if args.op == "samel":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            print(f"compare.py --op samel: skipped: the comparator needs torch ({e})",
                  file=sys.stderr)
            return 3
        return samel_prologue.run(args, machine_info, TOL)
    if args.dtypes is None:
        args.dtypes = ["float32", "bfloat16", "float16"]
    if args.child:
        return child(args)

    start = time.time()
    import comparators as C
    import dswa
    result = {"machine": machine_info(), "config": dict(
        B=B, H=H, D=D, window_left=W, window_right=W, scale=SCALE, lam=LAM, L=args.L,
        dtypes=args.dtypes, impls=args.impls, sample_rows=args.rows, warmup_ms=args.warmup,
        rep_ms=args.rep, dswa_math=args.dswa_math, triton_warps=args.triton_warps,
        dswa_lib=dswa.library_path()),
        "rows": []}
    log("machine:", json.dumps(result["machine"]))
    try:
        bw = C.copy_bandwidth(args.device)
        result["machine"]["copy_bandwidth_GBps"] = bw * 1e-9
        result["machine"]["copy_bandwidth_note"] = "2 GiB device-to-device copy, read+written"
        log(f"copy bandwidth {bw * 1e-12:.3f} TB/s")
    except Exception as e:
        bw = None
        result["machine"]["copy_bandwidth_error"] = f"{type(e).__name__}: {e}"
        log("copy bandwidth failed:", e)
    save(args.json, result)

    for n, impl in enumerate(args.impls):
        left = args.budget - (time.time() - start)
        share = SHARE[impl] / sum(SHARE[i] for i in args.impls[n:])
        deadline = time.time() + max(left * share, 0)
        log(f"== {impl} (until +{deadline - start:.0f} s)")
        if args.in_process:
            args.deadline = deadline
            for L in args.L:
                for dtype_name in args.dtypes:
                    for shared in (False, True):
                        result["rows"].append(run_row(impl, L, dtype_name, shared, bw, args))
                        log(fmt_row(result["rows"][-1]))
                        save(args.json, result)
            continue
        part = os.path.join(os.path.dirname(os.path.abspath(args.json)) if args.json else
                            tempfile.gettempdir(), f".compare-{impl}-{os.getpid()}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--impls", impl,
               "--json", part, "--deadline", str(deadline), "--L", *map(str, args.L),
               "--dtypes", *args.dtypes, "--rows", str(args.rows), "--warmup",
               str(args.warmup), "--rep", str(args.rep), "--dswa-math", args.dswa_math,
               "--triton-warps", str(args.triton_warps),
               "--device", args.device]
        if bw:
            cmd += ["--bandwidth", str(bw)]
        try:
            rc = subprocess.run(cmd, timeout=max(deadline - time.time(), 0) + 30).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        rows = []
        if os.path.exists(part):
            with open(part) as f:
                rows = json.load(f)["rows"]
            os.remove(part)
        done = {(r["L"], r["dtype"], r["v"]) for r in rows}
        for L in args.L:
            for dtype_name in args.dtypes:
                for v in ("full", "shared"):
                    if (L, dtype_name, v) not in done:
                        rows.append(dict(name=impl, dtype=dtype_name, L=L, N=17 * L, v=v,
                                         error=f"no result: child process ended with {rc}"))
        result["rows"] += rows
        save(args.json, result)
    result["machine"]["wall_s"] = round(time.time() - start, 1)
    save(args.json, result)
    print_table(result)
    return 0


# ---- output ---------------------------------------------------------------------------------
def _f(x, spec):
    return "-" if x is None else format(x, spec)


def fmt_row(r):
    s = (f"{r['name']:<7}{r['v']:<7}{r['dtype']:<9}L={r['L']:<5}"
         f"{_f(r.get('time_ms'), '9.4f')} ms {_f(r.get('pct_floor'), '5.1f')} % "
         f"{_f(r.get('gbps'), '6.0f')} GB/s err {_f(r.get('rel_err'), '.2e')}")
    if r.get("written") is False or r.get("ok") is False:
        s += "  CHECK FAILED"
    if r.get("error"):
        s += f"  ERROR {r['error'][:200]}"
    return s


def print_table(result):
    m = result.get("machine", {})
    print(f"# {m.get('device', '?')}  torch {m.get('torch', '?')}  triton {m.get('triton', '?')}"
          f"  copy {_f(m.get('copy_bandwidth_GBps'), '.0f')} GB/s  {m.get('date', '')}")
    order = {n: i for i, n in enumerate(IMPLS + tuple(TOL))}
    rows = sorted(result.get("rows", []), key=lambda r: (
        r.get("L", 0), order.get(r.get("dtype"), 9), r.get("v", ""), order.get(r.get("name"), 9)))
    head = ["impl", "V", "dtype", "L", "N", "ms", "floor ms", "% floor", "GB/s", "rel err",
            "check", "note / error"]
    table = [head]
    for r in rows:
        check = "-" if r.get("ok") is None else ("ok" if r["ok"] else "FAIL")
        table.append([r.get("name", "?"), r.get("v", "?"), r.get("dtype", "?"), str(r.get("L")),
                      str(r.get("N")), _f(r.get("time_ms"), ".4f"), _f(r.get("floor_ms"), ".4f"),
                      _f(r.get("pct_floor"), ".1f"), _f(r.get("gbps"), ".0f"),
                      _f(r.get("rel_err"), ".2e"), check,
                      (("ERROR " + r["error"]) if r.get("error") else r.get("note", ""))[:90]])
    widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
    for t in table:
        print("  ".join(c.rjust(w) if 3 <= i <= 10 else c.ljust(w)
                        for i, (c, w) in enumerate(zip(t, widths))) + "  " + t[-1])


if __name__ == "__main__":
    sys.exit(main())
