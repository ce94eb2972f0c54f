#!/usr/bin/env bash
# The memory-pattern probes (probe_bw.cu: what each forward kernel shape reaches with no
# arithmetic, and what a copy of the same bytes reaches; probe_bwd.cu: the backward's two-pass and
# one-pass skeletons beside a copy of their 11 units) at each L, then `dswa bench` of the tree, all under
# OUTDIR. Usage: bench/profiling/gpu-probe.sh OUTDIR ; L values in PROBE_L (default "4096 256").
set -u
out=${1:?usage: gpu-probe.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/../.."
command -v nvidia-smi >/dev/null || { echo "gpu-probe: skipped: no GPU (nvidia-smi not found)"; exit 0; }
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
make -s -j"$(nproc)" GPU_ARCH="$arch" all build/probe_bw build/probe_bwd > "$out/build.log" 2>&1 \
    || { tail -n 30 "$out/build.log"; exit 1; }
for L in ${PROBE_L:-4096 256}; do build/probe_bw "$L" | tee -a "$out/probe.txt"; done
for L in ${PROBE_L:-4096 256} 1292; do build/probe_bwd "$L" | tee -a "$out/probe-bwd.txt"; done
build/dswa bench --json > "$out/bench.json" 2> "$out/bench.err"; echo "bench rc $?"
python3 bench/profiling/bench-table.py "$out/bench.json"
