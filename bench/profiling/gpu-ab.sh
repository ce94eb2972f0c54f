#!/usr/bin/env bash
# One device call for the PERF log: build for this GPU, `dswa bench` (all rows), Nsight Compute
# stall sampling (scripts/gpu-stalls.sh, when STALLS is set), then compile-time variants in the
# same run (scripts/gpu-variants.sh), everything packed into OUTDIR/ab.tgz (the device tool
# brings back at most 8 files). Usage: scripts/gpu-ab.sh OUTDIR "name=flags" ...
set -u
out=$1; shift
work=/tmp/ab; rm -rf "$work"; mkdir -p "$work"
cd "$(dirname "$0")/.."
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$work/smi.txt" 2>&1
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
build/dswa bench --json > "$work/bench.json" 2> "$work/bench.err"; echo "bench rc $?"
python3 bench/profiling/bench-table.py "$work/bench.json"
[ -n "${STALLS:-}" ] && scripts/gpu-stalls.sh "$work" build "$STALLS"
[ $# -gt 0 ] && scripts/gpu-variants.sh "$work" "$@"
tar czf "$out/ab.tgz" -C "$work" .
