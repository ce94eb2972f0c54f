#!/usr/bin/env python3
"""The short table of one `dswa bench --json` file: bench/profiling/bench-table.py FILE.json

One line per row: time per call (and its spread over the replays), % of the same-size copy,
% of the floor, the plain call, the error; then the cold rows. Older files (before the bench
timed a graph of 20 calls) have no spread, copy or cold figures: those print as '-'."""
import json
import sys


def f(x, spec):
    """x formatted, or '-' as wide as the format would be."""
    if x is None:
        w = spec.split(".")[0]
        return "-".rjust(int(w)) if w.isdigit() else "-"
    return format(x, spec)


def pct(x, width=6):
    return "-".rjust(width) if x is None else f"{x:{width - 1}.1f}%"


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n")[0], file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as fh:
            b = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"bench-table: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    print(f"# {b.get('device', '?')}  copy {f(b.get('copy_bandwidth_gb_s'), '.0f')} GB/s  "
          f"{b.get('date', '?')}  commit {b.get('commit') or '?'}")
    print(f"{'L':>5} {'dtype':5} {'V':6} {'time_ms':>8} {'spread':>7} {'copy_ms':>8} {'%copy':>6} "
          f"{'%floor':>6} {'call_ms':>8} {'rel_err':>9} status")
    cold = []
    for r in b.get("rows", []):
        t, lo, hi = r.get("time_ms"), r.get("time_ms_min"), r.get("time_ms_max")
        spread = 100 * (hi - lo) / t if t and lo is not None and hi is not None else None
        print(f"{str(r.get('L')):>5} {r['dtype']:5} {r['v']:6} {f(t, '8.4f')} {pct(spread, 7)} "
              f"{f(r.get('copy_ms'), '8.4f')} {pct(r.get('pct_of_copy'))} "
              f"{pct(r.get('pct_of_floor'))} {f(r.get('call_ms'), '8.4f')} "
              f"{f(r.get('rel_err'), '9.2e')} {r['status']} {r.get('message', '')}")
        if r.get("cold"):
            cold.append(r)
    if cold:
        print("cold (buffers rotated beyond the L2):")
        for r in cold:
            c = r["cold"]
            print(f"{str(r.get('L')):>5} {r['dtype']:5} {r['v']:6} {f(c.get('time_ms'), '8.4f')} "
                  f"x{c.get('buffers', '?')}  copy {f(c.get('copy_ms'), '8.4f')}  "
                  f"{pct(c.get('pct_of_copy'))} of copy  {c.get('message', '')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:   # e.g. piped into head
        sys.exit(0)
