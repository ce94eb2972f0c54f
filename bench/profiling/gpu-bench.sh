#!/usr/bin/env bash
# One device call for the bench itself (as the op's goal, 95 % of a copy, is measured): builds for this GPU, runs the
# default `dswa bench --json` (timed: it should take under ~90 s), checks that the bench's copy
# kernel is at least as fast as cudaMemcpyAsync on 2 GiB, runs the wide kernel at windows of
# 64 and 128 each side (L = 256 and 4096), and writes README's performance table from the
# default run.
#   bench/profiling/gpu-bench.sh OUTDIR        (COMMIT=<hash> names the commit when .git is absent)
# Writes OUTDIR/bench.json, bench-window-64.json, bench-window-128.json (+ .err), readme-table.md.
set -u
out=${1:?usage: gpu-bench.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/../.."
command -v nvidia-smi >/dev/null || { echo "gpu-bench: skipped: no GPU (nvidia-smi not found)"; exit 0; }
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
[ -n "$arch" ] || { echo "gpu-bench: skipped: no GPU"; exit 0; }
commit=${COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
rc=0
step "build for sm_$arch"
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
step "dswa bench (default rows)"
t0=$(date +%s)
build/dswa bench --json > "$out/bench.json" 2> "$out/bench.err" || { echo "dswa bench exited $?"; rc=1; }
t1=$(date +%s)
echo "default bench: $((t1 - t0)) s (goal: under ~90 s)"
grep -E "copied:|copy bandwidth|self-test" "$out/bench.err"
python3 bench/profiling/bench-table.py "$out/bench.json" || rc=1
python3 - "$out/bench.json" <<'PY' || rc=1
import json, sys
b = json.load(open(sys.argv[1]))
c = b.get("copy_2gib_graph") or {}
k, m = c.get("kernel_gb_s"), c.get("memcpy_gb_s")
print(f"2 GiB in graphs of {b.get('graph_calls')}: copy kernel {k} GB/s ({c.get('kernel')}), cudaMemcpyAsync {m} GB/s")
bad = [r for r in b["rows"] if r.get("status") != "ok"]
low = [r for r in b["rows"] if (r.get("pct_of_copy") or 0) < 95]
print(f"rows: {len(b['rows'])}, not ok: {len(bad)}, %copy < 95: {len(low)} (the op's goal)")
sys.exit(0 if k and m and k >= m and not bad else 1)
PY
for w in 64 128; do
    step "wide kernel: --window $w"
    build/dswa bench --window "$w" --L 256,4096 --cold none --json > "$out/bench-window-$w.json" 2> "$out/bench-window-$w.err" \
        || { echo "dswa bench --window $w exited $?"; rc=1; }
    python3 bench/profiling/bench-table.py "$out/bench-window-$w.json" || rc=1
done
step "README table (commit $commit)"
python3 bench/readme_table.py "$out/bench.json" --commit "$commit" > "$out/readme-table.md" && cat "$out/readme-table.md" || rc=1
step "done: rc=$rc"
exit $rc
