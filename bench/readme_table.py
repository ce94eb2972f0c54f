#!/usr/bin/env python3
"""README's performance table, generated from one `dswa bench --json` run (and, optionally, the
compare.json of bench/compare.py from the same machine), so no number in it is copied by hand.

    python3 bench/readme_table.py bench.json [--compare compare.json] [--commit HASH]
    python3 bench/readme_table.py bench.json --readme README.md   # rewrite README in place

With --readme, the text between the lines `<!-- perf-table:begin -->` and
`<!-- perf-table:end -->` is replaced (the file is rewritten only when both markers are there
once each); without it the table goes to stdout.

The JSON of `dswa bench --op samel --json` (the fused SAME-L block) gives the block's table
instead, with both of its goals' ratios per row: % of the same-size copy, from the bench; and x
faster than the compiled PyTorch prologue + op, joined here from --compare FILE (bench/compare.py
--op samel --json, the same machine) by N and dtype. Its markers are `<!-- perf-samel:begin -->`
and `<!-- perf-samel:end -->`.

    python3 bench/compare.py --op samel --json samel-compare.json
    build/dswa bench --op samel --json > bench-samel.json
    python3 bench/readme_table.py bench-samel.json --compare samel-compare.json

The JSON of `dswa bench --backward --json` (the op's backward) gives the backward's table:
per dtype, V layout and L, the backward's time, its % of the same-size copy of its bytes (the
goal) and forward + backward; markers `<!-- perf-backward:begin -->`, `<!-- perf-backward:end -->`.
That of `dswa bench --op samel --backward --json` gives the fused block's backward table, with
the training comparators joined from --compare FILE (bench/compare.py --op samel --backward
--json, the same machine) by N and dtype: x = the comparator's forward + backward over the fused
block's, against the compiled prologue + FlexAttention (goal: at least the bench's
vs_flex_fwd_bwd) and the chunked-halo SDPA path (goal: at least the forward's own ratio over that
path, measured in the same comparator run); markers `<!-- perf-samel-backward:begin -->` and
`<!-- perf-samel-backward:end -->`.

    python3 bench/compare.py --op samel --backward --json train-compare.json
    build/dswa bench --op samel --backward --json > bench-samel-backward.json
    python3 bench/readme_table.py bench-samel-backward.json --compare train-compare.json

The commit comes from the JSON (a `dswa` built with DSWA_GIT_COMMIT defined, as `make` builds
it); --commit overrides it. A table without its commit is refused.

Exit status: 0; 3 when the bench ran on the CPU backend (no README table: it is made from a GPU
run; `make bench` reports it and goes on); 1 for any other refusal (a file that is not the
bench's, a comparator file that does not fit it, no commit, a failed write): `make bench` fails.
"""
import argparse
import json
import os
import sys
import tempfile

BEGIN, END = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"
SAMEL_BEGIN, SAMEL_END = "<!-- perf-samel:begin -->", "<!-- perf-samel:end -->"
BWD_BEGIN, BWD_END = "<!-- perf-backward:begin -->", "<!-- perf-backward:end -->"
SAMEL_BWD_BEGIN = "<!-- perf-samel-backward:begin -->"
SAMEL_BWD_END = "<!-- perf-samel-backward:end -->"
SAMEL_TOOL = "bench/compare.py --op samel"   # the fused block's comparator file's "tool"
TRAIN_TOOL = "bench/compare.py --op samel --backward"   # its training comparators' file's
NOT_GPU = 3   # the exit status of a CPU run's refusal (make bench goes on)
DTYPES = (("f32", "float32"), ("bf16", "bfloat16"), ("f16", "float16"))
VS = (("full", "2H heads"), ("shared", "shared"))


def fail(msg, status=1):
    print(f"readme_table: {msg}", file=sys.stderr)
    sys.exit(status)


def need_gpu_run(bench):
    """Refuses what is not `dswa bench --json`'s output (1), and (NOT_GPU) a bench that ran on
    the CPU backend: README tables are the GPU's."""
    if bench.get("tool") != "dswa bench" or "rows" not in bench:
        fail("the first file is not the output of `dswa bench --json`")
    if bench.get("backend") != "cuda":
        fail("the bench ran on the CPU backend: the README table is the GPU's", NOT_GPU)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def pct(x):
    return "-" if x is None else f"{x:.0f} %"


def cell(r, cold=False):
    """'0.0629 ms, 78 % / 70 %' (time, % of the same-size copy, % of the floor)."""
    if r is None:
        return "-"
    if r.get("status") != "ok":
        return f"{r.get('status', '?')}: {r.get('message', '')}"[:60]
    if cold:
        c = r.get("cold") or {}
        if c.get("time_ms") is None:
            return "-"
        floor = r.get("floor_ms")
        pf = 100 * floor / c["time_ms"] if floor else None
        return f"{c['time_ms']:.4f} ms, {pct(c.get('pct_of_copy'))} / {pct(pf)}"
    return f"{r['time_ms']:.4f} ms, {pct(r.get('pct_of_copy'))} / {pct(r.get('pct_of_floor'))}"


def spread(rows):
    s = [100 * (r["time_ms_max"] - r["time_ms_min"]) / r["time_ms"] for r in rows
         if r.get("status") == "ok" and r.get("time_ms") and r.get("time_ms_max") is not None]
    return (min(s), max(s)) if s else None


def triton_ratio(compare, L, torch_dtype, v):
    """Triton's time over dswa's, both from compare.json (the same timing method)."""
    if not compare:
        return None
    t = {r.get("name"): r.get("time_ms") for r in compare.get("rows", [])
         if r.get("L") == L and r.get("dtype") == torch_dtype and r.get("v") == v}
    if t.get("dswa") and t.get("triton"):
        return t["triton"] / t["dswa"]
    return None


def error_note(rows, what):
    """A table's closing note on errors: a blank line, then `what` and each dtype's largest
    rel_err over the rows ("...: f32 1.2e-06, bf16 3.4e-03."); nothing where no row has one."""
    errs = {}
    for r in rows:
        if r.get("rel_err") is not None:
            errs[r["dtype"]] = max(errs.get(r["dtype"], 0.0), r["rel_err"])
    if not errs:
        return []
    return ["", what + ": " + ", ".join(f"{dt} {errs[dt]:.1e}" for dt, _ in DTYPES
                                        if dt in errs) + "."]


def table(bench, compare, commit):
    need_gpu_run(bench)
    rows = bench["rows"]
    shape = bench.get("shape", {})
    Ls = sorted({r["L"] for r in rows if r.get("L") is not None})
    cold_Ls = sorted({r["L"] for r in rows if r.get("L") is not None and r.get("cold")})
    by = {(r.get("L"), r["dtype"], r["v"]): r for r in rows}
    copy2 = bench.get("copy_2gib_graph") or {}
    sp = spread(rows)
    math = bench.get("math", "default")
    out = [
        f"Measured on {bench.get('device', '?')}, {bench.get('date', '?')}, commit `{commit}`, "
        f"`dswa bench --json` (CUDA runtime {bench.get('cuda_runtime', '?')}, driver "
        f"{bench.get('cuda_driver', '?')}). SAME-L shapes: B = {shape.get('batch', 1)}, "
        f"H = {shape.get('heads', '?')}, D = {shape.get('head_dim', '?')}, window "
        f"{shape.get('window_left', '?')} left / {shape.get('window_right', '?')} right, "
        f"N = 17 L; f32 math `{math}`.",
        "",
        f"Each cell: time per call, the median of {bench.get('repeats', '?')} replays of a CUDA "
        f"graph of {bench.get('graph_calls', '?')} back-to-back calls on the same buffers (as an "
        f"engine runs it); then **% copy** = the time of the fastest same-size copy (the same "
        f"bytes read + written, the better of cudaMemcpyAsync and the bench's own copy kernel, "
        f"timed the same way) over that time; then **% floor** = minimum bytes / copy "
        f"bandwidth ({bench.get('copy_bandwidth_gb_s', 0) / 1e3:.2f} TB/s, "
        f"{bench.get('copy_bandwidth_method', '?')}) over that time."
        + (f" Spread over the replays (max - min) / median: {sp[0]:.1f}-{sp[1]:.1f} %." if sp else "")
        + (f" Copying 2 GiB in such graphs: cudaMemcpyAsync {copy2.get('memcpy_gb_s', 0):.0f} "
           f"GB/s, the copy kernel {copy2.get('kernel_gb_s', 0):.0f} GB/s." if copy2 else ""),
        "",
    ]
    head = ["dtype", "V"] + [f"L = {L}" for L in Ls] + [f"L = {L} cold" for L in cold_Ls]
    if compare:
        head.append("Triton / dswa (compare.py)")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for dt, torch_dt in DTYPES:
        for v, vname in VS:
            if not any((L, dt, v) in by for L in Ls):
                continue
            name = f"{dt} ({'TF32' if math == 'default' else math})" if dt == "f32" else dt
            cells = [name, vname] + [cell(by.get((L, dt, v))) for L in Ls]
            cells += [cell(by.get((L, dt, v)), cold=True) for L in cold_Ls]
            if compare:
                rs = [x for x in (triton_ratio(compare, L, torch_dt, v) for L in Ls) if x]
                cells.append(f"{min(rs):.1f}-{max(rs):.1f}x" if rs else "-")
            out.append("| " + " | ".join(cells) + " |")
    out += error_note(rows, "Largest relative error against the float64 reference")
    if cold_Ls:
        out.append("Cold: the calls (and the copies) rotate over enough buffer sets that more "
                   f"than twice the L2 ({bench.get('l2_bytes', 0) / 1e6:.0f} MB) passes between "
                   "two uses of one.")
    if compare:
        m = compare.get("machine", {})
        out.append(f"Triton / dswa: both timed by bench/compare.py on {m.get('device', '?')} "
                   f"({m.get('date', '?')}); above 1 dswa is faster.")
    return "\n".join(out) + "\n"


def num(x, spec, unit=""):
    return "-" if x is None else f"{x:{spec}}{unit}"


def check_comparator(bench, compare, path, tool):
    """The comparator file's rows by (N, dtype), after checking it is `tool`'s output for the
    bench's problem on the bench's device (a ratio across problems or machines means nothing):
    otherwise it fails, naming what differs. Returns (machine, rows by (N, dtype))."""
    where = f"--compare {path}"
    if compare.get("tool") != tool:
        fail(f'{where}: "tool" is not "{tool}": not its output')
    machine, cfg, rows = compare.get("machine"), compare.get("config"), compare.get("rows")
    if not isinstance(machine, dict) or not isinstance(cfg, dict) or not isinstance(rows, list):
        fail(f'{where}: "machine", "config" or "rows" is missing')
    shape = bench.get("shape", {})
    want = dict(B=shape.get("batch"), H=shape.get("heads"), D=shape.get("head_dim"),
                window_left=shape.get("window_left"), window_right=shape.get("window_right"),
                rot_dims=shape.get("rot_dims"), math=bench.get("math"))
    if "graph_calls" in bench:   # a GPU run's: the comparator's graphs must be as long
        want["graph_calls"] = bench["graph_calls"]
    for key, w in want.items():
        if cfg.get(key) != w:
            fail(f"{where}: config.{key} is {cfg.get(key)!r}, the bench's is {w!r}: the "
                 "comparator ran another problem")
    dev, mine = machine.get("device"), bench.get("device", "")
    if not isinstance(dev, str) or not dev:
        fail(f"{where}: machine.device is missing")
    # torch names the GPU as the CUDA runtime does; the bench's device adds to that name
    same = (mine.startswith(dev) and mine[len(dev):len(dev) + 1] in ("", " ")
            if bench.get("backend") == "cuda" else dev == "cpu")
    if not same:
        fail(f"{where}: the comparator ran on '{dev}', the bench on '{mine}': no ratio across "
             "machines")
    by = {}
    for i, c in enumerate(rows):
        c = c if isinstance(c, dict) else {}
        n, dt = c.get("N"), c.get("dtype")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or dt not in dict(DTYPES):
            fail(f"{where}: rows[{i}]: N or dtype is missing or not valid")
        by[(n, dt)] = c
    return machine, by


def comparator_rows(bench, compare, path, tool, source, message, fields):
    """Joins a comparator file (`tool`'s output, at path; None: not given) to the bench's rows
    by N and dtype: first every row's `fields` None and its `message` saying there is no
    comparator, bench[source] None; then, the file checked (check_comparator), each row with
    its comparator row (a row the file lacks is skipped, its `message` saying so), and last
    bench[source] where the times came from: the file, device, date and torch."""
    for r in bench["rows"]:
        r.update(dict.fromkeys(fields), **{message: f"no comparator: give --compare FILE "
                                                    f"({tool}, which needs torch)"})
    bench[source] = None
    if compare is None:
        return
    machine, by = check_comparator(bench, compare, path, tool)
    for r in bench["rows"]:
        c = by.get((r["N"], r["dtype"]))
        if c is None:
            r[message] = f"the comparator file has no row for N = {r['N']} {r['dtype']}"
        else:
            yield r, c
    bench[source] = {"file": path, "device": machine["device"],
                     "date": machine.get("date", "?"), "torch": machine.get("torch", "?")}


def join_samel(bench, compare, path):
    """Sets the comparator's times (bench/compare.py --op samel; None: not run) beside the fused
    block's rows, by N and dtype: prologue_ms, op_ms, prologue_op_ms (its both_ms) and
    vs_prologue_op = prologue_op_ms / time_ms, or prologue_op_message saying why there is no
    ratio. The comparator must have run the bench's problem on the bench's device (a ratio
    across problems or machines means nothing): otherwise it fails, naming what differs."""
    for r, c in comparator_rows(bench, compare, path, SAMEL_TOOL, "prologue_op",
                                "prologue_op_message",
                                ("prologue_ms", "op_ms", "prologue_op_ms", "vs_prologue_op")):
        for key, src in (("prologue_ms", "prologue_ms"), ("op_ms", "op_ms"),
                         ("prologue_op_ms", "both_ms")):
            x = c.get(src)
            r[key] = x if isinstance(x, (int, float)) and x > 0 else None
        err, rel = c.get("error"), c.get("rel_err")
        if err:
            r["prologue_op_message"] = f"comparator: {err}"
        elif c.get("ok") is not True:
            r["prologue_op_message"] = ("comparator: its output was not checked" if rel is None
                                        else f"comparator: its output failed its check (rel_err "
                                             f"{rel:.3g})")
        elif r["prologue_op_ms"] is None:
            r["prologue_op_message"] = "comparator: no both_ms"
        else:
            r["prologue_op_message"] = ""
            if r.get("status") in ("ok", "fail") and r.get("time_ms"):
                r["vs_prologue_op"] = r["prologue_op_ms"] / r["time_ms"]


def samel_goals(r, goals):
    """'(a) met, (b) not met' for a timed row, against the bench's own goals."""
    want_pct = goals.get("pct_of_copy")
    want_x = (goals.get("vs_prologue_op") or {}).get(r["dtype"])
    out = []
    if want_pct is not None:
        p = r.get("pct_of_copy")
        out.append("(a) " + ("-" if p is None else "met" if p >= want_pct else "not met"))
    x = r.get("vs_prologue_op")
    if want_x is None:
        out.append("(b) no goal")
    else:
        out.append("(b) " + ("-" if x is None else "met" if x >= want_x else "not met"))
    return ", ".join(out)


def samel_table(bench, commit):
    """The fused block's table: one row per dtype and L, both ratios and the goals."""
    need_gpu_run(bench)
    rows = bench["rows"]
    shape = bench.get("shape", {})
    goals = bench.get("goals") or {}
    src = bench.get("prologue_op")
    math = bench.get("math", "default")
    gx = goals.get("vs_prologue_op") or {}
    out = [
        f"Measured on {bench.get('device', '?')}, {bench.get('date', '?')}, commit `{commit}`, "
        f"`dswa bench --op samel --json` (CUDA runtime {bench.get('cuda_runtime', '?')}, driver "
        f"{bench.get('cuda_driver', '?')}). The fused SAME-L block: packed input (B, N, 5 H D), "
        f"B = {shape.get('batch', 1)}, H = {shape.get('heads', '?')}, D = "
        f"{shape.get('head_dim', '?')}, DyT, RoPE on {shape.get('rot_dims', '?')} dims, window "
        f"{shape.get('window_left', '?')} left / {shape.get('window_right', '?')} right, V "
        f"shared, N = 17 L; f32 math `{math}`.",
        "",
        f"**fused**: time per call, the median of {bench.get('repeats', '?')} replays of a CUDA "
        f"graph of {bench.get('graph_calls', '?')} back-to-back calls. **copy**: the fastest "
        f"same-size copy (the fused call's bytes: the packed input read once, the output written "
        f"once), timed the same way; **% copy** = copy / fused (goal (a): at least "
        f"{num(goals.get('pct_of_copy'), '.0f', ' %')}). **prologue / op / both**: the "
        f"compiled PyTorch prologue (DyT + RoPE + cat, `torch.compile`), dswa's op on its "
        f"output, and the two, each in the same kind of graph"
        + (f" (bench/compare.py --op samel on {src.get('device', '?')}, {src.get('date', '?')}, "
           f"torch {src.get('torch', '?')})" if src else " (not measured in this run)")
        + "; **x** = both / fused (goal (b): at least "
        + ", ".join(f"{v:g}x {k}" for k, v in gx.items()) + ").",
        "",
        "| dtype | L | fused, ms | copy, ms | % copy (a) | prologue / op / both, ms | x (b) "
        "| goals |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {dt: i for i, (dt, _) in enumerate(DTYPES)}
    for r in sorted(rows, key=lambda r: (order.get(r["dtype"], 9), r.get("L") or 0, r["N"])):
        name = f"{r['dtype']} ({'TF32' if math == 'default' else math})" if r["dtype"] == "f32" \
            else r["dtype"]
        L = str(r["L"]) if r.get("L") is not None else f"N = {r['N']}"
        if r.get("status") != "ok":
            out.append(f"| {name} | {L} | {r.get('status', '?')}: "
                       f"{(r.get('message') or '')[:80]} | | | | | |")
            continue
        cmp_ = " / ".join(num(r.get(k), ".3f") for k in ("prologue_ms", "op_ms", "prologue_op_ms"))
        x = r.get("vs_prologue_op")
        out.append(f"| {name} | {L} | {r['time_ms']:.4f} | {num(r.get('copy_ms'), '.4f')} | "
                   f"{num(r.get('pct_of_copy'), '.0f', ' %')} | {cmp_} | "
                   f"{num(x, '.2f', 'x')} | {samel_goals(r, goals)} |")
    out += error_note(rows, "Largest relative error against the float64 reference of the block")
    notes = sorted({r.get("prologue_op_message") for r in rows if r.get("prologue_op_message")})
    for n in notes:
        out.append(f"Prologue + op: {n}.")
    return "\n".join(out) + "\n"


def _ms(c, key):
    x = (c or {}).get(key)
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None


def join_training(bench, compare, path):
    """Sets the training comparators' times (bench/compare.py --op samel --backward) beside the
    fused block's backward rows, by N and dtype: flex_fwd_bwd_ms, chunked_fwd_bwd_ms,
    dswa_torch_fwd_bwd_ms (the fused block through torch's autograd), vs_flex and vs_chunked
    (the comparator's fwd_bwd_ms over the bench's fwd_bwd_ms), fwd_vs_chunked (the chunked
    path's forward over dswa's, both from the comparator run: goal (c)'s bar), and
    training_message saying what is missing. Checked as join_samel checks its file."""
    for r, c in comparator_rows(bench, compare, path, TRAIN_TOOL, "training", "training_message",
                                ("flex_fwd_bwd_ms", "chunked_fwd_bwd_ms",
                                 "dswa_torch_fwd_bwd_ms", "vs_flex", "vs_chunked",
                                 "fwd_vs_chunked")):
        paths = {p: (c.get(p) if isinstance(c.get(p), dict) else {}) for p in
                 ("flex", "chunked", "dswa")}
        notes = [f"{p}: {x['error']}" for p, x in paths.items() if x.get("error")]
        notes += [f"{p}: its output failed its check" for p, x in paths.items()
                  if x.get("ok") is False and not x.get("error")]
        timed = r.get("status") in ("ok", "fail") and _ms(r, "fwd_bwd_ms")
        for p, key in (("flex", "flex_fwd_bwd_ms"), ("chunked", "chunked_fwd_bwd_ms"),
                       ("dswa", "dswa_torch_fwd_bwd_ms")):
            # a ratio only from a path whose output checked out
            r[key] = _ms(paths[p], "fwd_bwd_ms") if paths[p].get("ok") is True else None
        if timed and r["flex_fwd_bwd_ms"]:
            r["vs_flex"] = r["flex_fwd_bwd_ms"] / r["fwd_bwd_ms"]
        if timed and r["chunked_fwd_bwd_ms"]:
            r["vs_chunked"] = r["chunked_fwd_bwd_ms"] / r["fwd_bwd_ms"]
        cf, df = _ms(paths["chunked"], "fwd_ms"), _ms(paths["dswa"], "fwd_ms")
        if cf and df and paths["chunked"].get("fwd_ok") is True and \
                paths["dswa"].get("fwd_ok") is True:
            r["fwd_vs_chunked"] = cf / df
        r["training_message"] = "; ".join(notes)


def _goal(x, want):
    return "-" if x is None or want is None else "met" if x >= want else "not met"


def backward_table(bench, commit):
    """The backward's table (`dswa bench --backward` or `--op samel --backward`): one row per
    dtype, (the op) V layout and L; the fused block's with its training comparators."""
    need_gpu_run(bench)
    samel = bench.get("op") == "samel"
    rows = bench["rows"]
    shape = bench.get("shape", {})
    goals = bench.get("goals") or {}
    math = bench.get("math", "default")
    src = bench.get("training")
    what = ("the packed input and dout read, its gradient written" if samel else
            "q, k, v and dout read, dq, dk and dv written")
    out = [
        f"Measured on {bench.get('device', '?')}, {bench.get('date', '?')}, commit `{commit}`, "
        f"`dswa bench{' --op samel' if samel else ''} --backward --json` (CUDA runtime "
        f"{bench.get('cuda_runtime', '?')}, driver {bench.get('cuda_driver', '?')}). "
        + ("The fused SAME-L block's backward" if samel else "The op's backward")
        + f": B = {shape.get('batch', 1)}, H = {shape.get('heads', '?')}, D = "
        f"{shape.get('head_dim', '?')}, window {shape.get('window_left', '?')} left / "
        f"{shape.get('window_right', '?')} right, N = 17 L; f32 math `{math}` (the default: "
        "TF32 tensor cores where the band applies; 16-bit: fp32 arithmetic, rounded at the store).",
        "",
        f"**bwd**: time per backward call, the median of {bench.get('repeats', '?')} replays of "
        f"a CUDA graph of {bench.get('graph_calls', '?')} back-to-back calls (random dout, the "
        f"workspace allocated once). **copy**: the fastest same-size copy of the backward's "
        f"minimum bytes ({what}), timed the same way; **% copy** = copy / bwd (goal: at least "
        f"{num(goals.get('pct_of_copy'), '.0f', ' %')}). **fwd+bwd**: a forward then a "
        "backward, per pair, in the same kind of graph.",
    ]
    if samel:
        out[-1] += (
            " **x Flex** and **x chunked**: the training comparators' forward + backward "
            "(the compiled prologue + FlexAttention with a band block mask; the compiled "
            "prologue + the chunked-halo SDPA path) over fwd+bwd"
            + (f" (bench/compare.py --op samel --backward on {src.get('device', '?')}, "
               f"{src.get('date', '?')}, torch {src.get('torch', '?')})" if src else
               " (not measured in this run)")
            + f"; goals: x Flex at least {num(goals.get('vs_flex_fwd_bwd'), 'g', 'x')}, x "
            "chunked at least the forward's own (**fwd x chunked**: the chunked path's forward "
            "over dswa's, the same comparator run).")
    out.append("")
    if samel:
        out += ["| dtype | L | bwd, ms | copy, ms | % copy | fwd+bwd, ms | x Flex | x chunked "
                "| fwd x chunked | goals |", "|---|---|---|---|---|---|---|---|---|---|"]
    else:
        out += ["| dtype | V | L | bwd, ms | copy, ms | % copy | fwd+bwd, ms | goal |",
                "|---|---|---|---|---|---|---|---|"]
    order = {dt: i for i, (dt, _) in enumerate(DTYPES)}
    for r in sorted(rows, key=lambda r: (order.get(r["dtype"], 9), r.get("v", ""),
                                         r.get("L") or 0, r["N"])):
        name = f"{r['dtype']} ({'TF32' if math == 'default' else math})" if r["dtype"] == "f32" \
            else r["dtype"]
        L = str(r["L"]) if r.get("L") is not None else f"N = {r['N']}"
        key = [name, L] if samel else [name, "shared" if r.get("v") == "shared" else "2H heads", L]
        ncells = 10 if samel else 8
        if r.get("status") != "ok":
            cells = key + [f"{r.get('status', '?')}: {(r.get('message') or '')[:80]}"]
            out.append("| " + " | ".join(cells + [""] * (ncells - len(cells))) + " |")
            continue
        cells = key + [f"{r['time_ms']:.4f}", num(r.get("copy_ms"), ".4f"),
                       num(r.get("pct_of_copy"), ".0f", " %"), num(r.get("fwd_bwd_ms"), ".4f")]
        g = [f"% copy {_goal(r.get('pct_of_copy'), goals.get('pct_of_copy'))}"]
        if samel:
            cells += [num(r.get("vs_flex"), ".1f", "x"), num(r.get("vs_chunked"), ".1f", "x"),
                      num(r.get("fwd_vs_chunked"), ".1f", "x")]
            g.append(f"x Flex {_goal(r.get('vs_flex'), goals.get('vs_flex_fwd_bwd'))}")
            g.append(f"x chunked {_goal(r.get('vs_chunked'), r.get('fwd_vs_chunked'))}")
        out.append("| " + " | ".join(cells + [", ".join(g)]) + " |")
    out += error_note(rows, "Largest relative error of the gradients against "
                      + ("the CPU backend" if samel else "the float64 reference")
                      + " (the rows it checks)")
    if samel:
        for n in sorted({r.get("training_message") for r in rows if r.get("training_message")}):
            out.append(f"Training comparators: {n}.")
    return "\n".join(out) + "\n"


def replace_in(path, text, begin=BEGIN, end=END):
    try:
        with open(path) as f:
            old = f.read()
    except OSError as e:
        fail(f"{path}: {e}")
    if old.count(begin) != 1 or old.count(end) != 1 or old.index(begin) > old.index(end):
        fail(f"{path}: needs the lines {begin} and {end}, once each, in that order")
    a = old.index(begin) + len(begin)
    b = old.index(end)
    new = old[:a] + "\n<!-- generated by bench/readme_table.py; do not edit by hand -->\n" + \
        text + old[b:]
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".readme-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        fail(f"{path}: {e}")


def merge_compares(bench, paths):
    """(the comparator document, its name) from --compare's files: None and None without one;
    the file itself for one; for several (the fused block's only), one document of all their
    rows, each file checked first as its join checks it and no (N, dtype) in two files."""
    if not paths:
        return None, None
    docs = [load(p) for p in paths]
    if len(docs) == 1:
        return docs[0], paths[0]
    if bench.get("op") != "samel":
        fail("--compare is given once for the op's tables")
    seen = {}
    for d, p in zip(docs, paths):
        if not isinstance(d, dict):
            fail(f"--compare {p}: not a JSON object")
        tool = TRAIN_TOOL if bench.get("pass") == "backward" else SAMEL_TOOL
        for key in check_comparator(bench, d, p, tool)[1]:
            if key in seen:
                fail(f"--compare {p}: N = {key[0]} {key[1]} is also in {seen[key]}")
            seen[key] = p
    merged = dict(docs[0], rows=[r for d in docs for r in d["rows"]])
    return merged, ", ".join(paths)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="output of `dswa bench --json` or `dswa bench --op samel "
                                  "--json` (CUDA backend)")
    ap.add_argument("--compare", action="append",
                    help="output of bench/compare.py --json (the op's bench), of bench/compare.py "
                         "--op samel --json (the fused block's) or of bench/compare.py --op "
                         "samel --backward --json (the fused block's backward), same machine; "
                         "the fused block's may be given more than once (e.g. one file per "
                         "dtype): each file is checked, their rows joined")
    ap.add_argument("--commit", help="the commit the bench was built from (overrides the JSON's)")
    ap.add_argument("--readme", help="rewrite the marked region of this file instead of printing")
    a = ap.parse_args()
    bench = load(a.bench)
    compare, a.compare = merge_compares(bench, a.compare or [])
    commit = a.commit or bench.get("commit")
    if not commit:
        fail("no commit: the JSON has none (dswa built without DSWA_GIT_COMMIT); give --commit")
    samel = bench.get("op") == "samel"
    backward = bench.get("pass") == "backward"
    tool = compare.get("tool") if isinstance(compare, dict) else None
    if compare is not None and not isinstance(compare, dict):
        fail(f"--compare {a.compare}: not a JSON object")
    if backward and not samel and compare is not None:
        fail(f"--compare {a.compare}: the op's backward has no comparator file (give none)")
    if samel and backward:
        if tool == SAMEL_TOOL:
            fail(f"--compare {a.compare}: the fused block's forward comparator; this bench is "
                 f"its backward's (give {TRAIN_TOOL}'s)")
        join_training(bench, compare, a.compare)
    elif samel:
        if tool == TRAIN_TOOL:
            fail(f"--compare {a.compare}: the fused block's training comparators; this bench "
                 f"is its forward's (give {SAMEL_TOOL}'s)")
        join_samel(bench, compare, a.compare)
    elif compare is not None and tool in (SAMEL_TOOL, TRAIN_TOOL):
        fail(f"--compare {a.compare}: the fused block's comparator; this bench is the op's")
    text = (backward_table(bench, commit) if backward else
            samel_table(bench, commit) if samel else table(bench, compare, commit))
    markers = ((SAMEL_BWD_BEGIN, SAMEL_BWD_END) if samel and backward else
               (BWD_BEGIN, BWD_END) if backward else
               (SAMEL_BEGIN, SAMEL_END) if samel else (BEGIN, END))
    if a.readme:
        replace_in(a.readme, text, *markers)
    else:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError as e:
            fail(f"writing to stdout: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
