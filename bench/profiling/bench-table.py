#!/usr/bin/env python3
"""The short table of a `dswa bench --json` file: scripts/bench-table.py FILE.json"""
import json, sys
b = json.load(open(sys.argv[1]))
print(f"# {b['device']}  copy {b['copy_bandwidth_gb_s']:.0f} GB/s  {b['date']}")
print(f"{'L':>5} {'dtype':5} {'V':6} {'graph ms':>8} {'batched':>8} {'call ms':>8} {'%floor':>7} {'rel_err':>9} status")
for r in b['rows']:
    print(f"{r['L']:>5} {r['dtype']:5} {r['v']:6} {r.get('time_ms') or 0:8.4f} {r.get('mean_ms_batched') or 0:8.4f} "
          f"{r.get('call_ms') or 0:8.4f} {r.get('pct_of_floor') or 0:6.1f}% {r.get('rel_err') or 0:9.2e} {r['status']}")
