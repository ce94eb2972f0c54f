#!/usr/bin/env bash
# Nsight Compute source-level warp-stall sampling of the band kernels at L = 1292 (one launch
# each): per SASS instruction, how often warps were sampled stalled there and why. Clocks are
# left alone (--clock-control none). Usage: bench/profiling/gpu-stalls.sh OUTDIR [BUILD_DIR] [RUNS]
# RUNS: dtype:v pairs (default "bf16:full f32:full"). Writes OUTDIR/stalls-<dtype>-<v>.csv and
# a summary by opcode (stall-summary.py).
set -u
out=${1:?usage: gpu-stalls.sh OUTDIR [BUILD_DIR] [RUNS]}; bdir=${2:-build}; runs=${3:-"bf16:full f32:full"}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1   # absolute: the script cds below
cd "$(dirname "$0")/../.."
command -v ncu >/dev/null || { echo "ncu not found"; exit 0; }
for run in $runs; do
    dt=${run%%:*}; vl=${run#*:}
    k=dswa_fwd_f32_tf32; [ "$dt" = bf16 ] && k=dswa_fwd_bf16; [ "$dt" = f16 ] && k=dswa_fwd_f16
    rep=/tmp/stalls-$dt-$vl
    timeout 200 ncu --clock-control none -k "$k" -c 1 -f -o "$rep" \
        --section SourceCounters --section WarpStateStats --section SpeedOfLight \
        "$bdir/dswa" bench --backend cuda --L 1292 --dtype "$dt" --v "$vl" --repeats 1 --warmup 0 --cold none \
        > "$out/ncu-run-$dt-$vl.log" 2>&1 || { echo "ncu failed for $run"; tail -n 5 "$out/ncu-run-$dt-$vl.log"; continue; }
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/stalls-$dt-$vl.csv" 2> "$out/ncu-src-$dt-$vl.err" \
        || { echo "source page export failed for $run"; head -n 5 "$out/ncu-src-$dt-$vl.err"; }
    ncu -i "$rep.ncu-rep" --page details > "$out/ncu-details-$dt-$vl.txt" 2>&1
    echo "=== $k, V $vl"
    grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible" "$out/ncu-details-$dt-$vl.txt" | head -8
    python3 bench/profiling/stall-summary.py "$out/stalls-$dt-$vl.csv" 2>&1 | head -40
done
