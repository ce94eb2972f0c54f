"""Plot a bench/compare.py JSON: % of the copy-bandwidth floor against L, one panel per dtype,
one line per implementation and V layout (solid: full V, dashed: shared V).

    python3 bench/plot.py compare.json perf.png
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py COMPARE.json OUT.png")
    with open(sys.argv[1]) as f:
        plot(json.load(f), sys.argv[2])
    print(f"wrote {sys.argv[2]}")
