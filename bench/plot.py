"""Plot a bench/compare.py JSON: % of the copy-bandwidth floor against L, one panel per dtype,
one line per implementation and V layout (solid: full V, dashed: shared V).

    python3 bench/plot.py compare.json perf.png

Given the JSON of `dswa bench --op samel --json` instead (and the comparator's, bench/compare.py
--op samel --json, joined to it as bench/readme_table.py joins them), it plots the fused SAME-L
block against L, one line per dtype: time per call (fused, compiled prologue + op, the same-size
copy), % of the copy (goal (a)) and x faster than prologue + op (goal (b)), the goals drawn from
the bench's JSON.

    python3 bench/plot.py bench-samel.json perf-samel.png [samel-compare.json]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"dswa": "tab:blue", "triton": "tab:orange", "flex": "tab:green"}
DTYPES = ["float32", "bfloat16", "float16"]


def plot(result, path):
    rows = [r for r in result.get("rows", []) if r.get("pct_floor") is not None]
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in rows)]
    dtypes += sorted({r["dtype"] for r in rows} - set(dtypes))
    fig, axes = plt.subplots(1, max(len(dtypes), 1), figsize=(5 * max(len(dtypes), 1), 4.2),
                             squeeze=False, sharey=True)
    top = max([100.0] + [r["pct_floor"] for r in rows]) * 1.08
    Ls = sorted({r["L"] for r in rows})
    for ax, dtype in zip(axes[0], dtypes):
        for name in sorted({r["name"] for r in rows}, key=lambda n: list(COLORS).index(n)
                           if n in COLORS else 9):
            for v, style in (("full", "-"), ("shared", "--")):
                pts = sorted((r["L"], r["pct_floor"]) for r in rows
                             if r["dtype"] == dtype and r["name"] == name and r["v"] == v)
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", color=COLORS.get(name),
                            label=f"{name} ({v} V)")
        ax.set_xscale("log")
        ax.set_xticks(Ls)
        ax.set_xticklabels([str(L) for L in Ls])
        ax.minorticks_off()
        ax.set_ylim(0, top)
        ax.axhline(100, color="grey", lw=0.8, ls=":")
        ax.axhline(90, color="tab:red", lw=0.8, ls="--")  # the target
        ax.grid(alpha=0.3)
        ax.set_title(dtype)
        ax.set_xlabel("L (N = 17 L)")
    axes[0][0].set_ylabel("% of copy-bandwidth floor")
    if rows:
        axes[0][0].legend(fontsize=8)
    else:
        axes[0][0].text(0.5, 0.5, "no timed rows", ha="center", transform=axes[0][0].transAxes)
    m = result.get("machine", {})
    bw = m.get("copy_bandwidth_GBps")
    fig.suptitle(f"dswa vs comparators, {m.get('device', '?')}, {m.get('date', '')}\n"
                 + (f"floor = min bytes / {bw / 1e3:.2f} TB/s copy" if bw else "no floor"),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


DTYPE_COLORS = {"f32": "tab:blue", "bf16": "tab:orange", "f16": "tab:green"}


def plot_samel(bench, path):
    rows = [r for r in bench.get("rows", []) if r.get("status") == "ok" and r.get("L")]
    goals = bench.get("goals") or {}
    dtypes = [d for d in DTYPE_COLORS if any(r["dtype"] == d for r in rows)]
    Ls = sorted({r["L"] for r in rows})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), squeeze=False)
    ax_t, ax_p, ax_x = axes[0]
    for dt in dtypes:
        mine = sorted((r for r in rows if r["dtype"] == dt), key=lambda r: r["L"])
        col = DTYPE_COLORS[dt]

        def line(ax, key, style, label, marker="o"):
            pts = [(r["L"], r[key]) for r in mine if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), style, marker=marker, color=col, label=label)
        line(ax_t, "time_ms", "-", f"{dt} fused")
        line(ax_t, "prologue_op_ms", "--", f"{dt} compiled prologue + op", "s")
        line(ax_t, "copy_ms", ":", f"{dt} copy of the fused bytes", "^")
        line(ax_p, "pct_of_copy", "-", dt)
        line(ax_x, "vs_prologue_op", "-", dt)
        want = (goals.get("vs_prologue_op") or {}).get(dt)
        if want:
            ax_x.axhline(want, color=col, lw=0.8, ls="--", label=f"goal {dt} {want:g}x")
    if goals.get("pct_of_copy"):
        ax_p.axhline(goals["pct_of_copy"], color="tab:red", lw=0.8, ls="--",
                     label=f"goal {goals['pct_of_copy']:g} %")
    ax_p.axhline(100, color="grey", lw=0.8, ls=":")
    ax_t.set_yscale("log")
    ax_t.set_ylabel("ms per call (graph of %s calls)" % bench.get("graph_calls", "?"))
    ax_p.set_ylabel("% of the same-size copy")
    ax_p.set_ylim(0, max([110.0] + [r["pct_of_copy"] * 1.08 for r in rows
                                    if r.get("pct_of_copy") is not None]))
    ax_x.set_ylabel("x faster than compiled prologue + op")
    tops = [r["vs_prologue_op"] for r in rows if r.get("vs_prologue_op") is not None]
    tops += list((goals.get("vs_prologue_op") or {}).values())
    ax_x.set_ylim(0, max(tops + [1.0]) * 1.15)
    for ax, title in ((ax_t, "time per call"), (ax_p, "(a) % of copy"),
                      (ax_x, "(b) vs compiled prologue + op")):
        ax.set_xscale("log")
        if Ls:
            ax.set_xticks(Ls)
            ax.set_xticklabels([str(L) for L in Ls])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.set_title(title)
        ax.set_xlabel("L (N = 17 L)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if not rows:
        ax_t.text(0.5, 0.5, "no timed rows", ha="center", transform=ax_t.transAxes)
    src = bench.get("prologue_op") or {}
    fig.suptitle(f"dswa fused SAME-L block, {bench.get('device', '?')}, {bench.get('date', '')}, "
                 f"commit {bench.get('commit', '?')}"
                 + (f"; prologue + op: torch {src.get('torch', '?')}" if src else
                    "; no prologue + op numbers"), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: plot.py COMPARE.json|BENCH-SAMEL.json OUT.png [SAMEL-COMPARE.json]")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    samel_compare = sys.argv[3] if len(sys.argv) == 4 else None
    if data.get("tool") == "dswa bench" and data.get("op") == "samel":
        from readme_table import join_samel, load
        join_samel(data, load(samel_compare) if samel_compare else None, samel_compare)
        plot_samel(data, sys.argv[2])
    elif samel_compare:
        sys.exit("plot.py: SAMEL-COMPARE.json goes with a `dswa bench --op samel` JSON")
    elif data.get("tool") == "dswa bench":
        sys.exit("plot.py: a `dswa bench` JSON other than --op samel's: plot bench/compare.py's")
    else:
        plot(data, sys.argv[2])
    print(f"wrote {sys.argv[2]}")
