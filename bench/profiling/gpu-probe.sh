#!/usr/bin/env bash
# One device call: the memory-pattern probes (bench/profiling/probe_bw.cu: what each kernel shape reaches
# with no arithmetic) at L = 4096, 1292 and 256, then `dswa bench` of the tree and of the
# compile-time variants given, everything under OUTDIR. Usage: scripts/gpu-probe.sh OUTDIR "name=flags" ...
set -u
out=$1; shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/.."
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
mkdir -p build
nvcc -O3 -std=c++17 -arch=sm_"$arch" bench/profiling/probe_bw.cu -o build/probe_bw || exit 1
for L in ${PROBE_L:-4096 256}; do build/probe_bw "$L" | tee -a "$out/probe.txt"; done
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
build/dswa bench --json --repeats 50 > "$out/bench.json" 2> "$out/bench.err"; echo "bench rc $?"
python3 bench/profiling/bench-table.py "$out/bench.json"
[ $# -gt 0 ] && BENCH_ARGS="${BENCH_ARGS:---repeats 50}" scripts/gpu-variants.sh "$out" "$@"
exit 0
