#!/usr/bin/env bash
# The strip-shape skeleton (probe_strip.cu): build for this GPU with ptxas's resource report, run
# its self-check and table, and Nsight Compute's speed of light and occupancy for one L = 1292
# launch of the fused skeleton (bf16, strip 4) and of the op skeleton's producer-warp variant (f16,
# strip 1, bulk copies; sm_90+) when ncu exists and NO_NCU is unset. Everything goes to OUTDIR.
# Usage: bench/profiling/gpu-probe-strip.sh [OUTDIR]   (default $OUT)
set -u
out=${1:-${OUT:?usage: gpu-probe-strip.sh OUTDIR (or set OUT)}}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/../.."
command -v nvidia-smi >/dev/null || { echo "gpu-probe-strip: skipped: no GPU (nvidia-smi not found)"; exit 0; }
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
bin="$out/probe_strip"
nvcc -O3 -std=c++17 -arch="sm_$arch" -Xptxas -v -o "$bin" bench/profiling/probe_strip.cu > "$out/ptxas.txt" 2>&1 \
    || { tail -n 30 "$out/ptxas.txt"; exit 1; }
grep -A2 -E "strip_probe|strip_bulk" "$out/ptxas.txt" | grep -E "Compiling|Used|spill"
command -v cuobjdump >/dev/null && cuobjdump -sass "$bin" > "$out/probe_strip.sass" 2>/dev/null \
    && python3 bench/profiling/sass-count.py "$out/probe_strip.sass" $(grep -oE "_Z1[01]strip_(probe|bulk)I[A-Za-z0-9_]*" "$out/probe_strip.sass" | sort -u) \
    > "$out/sass-count.txt" 2>&1
timeout 200 "$bin" "$out/probe_strip.json" > "$out/table.txt" 2> "$out/stderr.txt"
rc=$?
tail -n 5 "$out/stderr.txt"
cat "$out/table.txt"
echo "probe_strip rc $rc"
if [ -z "${NO_NCU:-}" ] && command -v ncu >/dev/null; then
    timeout 90 ncu --section SpeedOfLight --section Occupancy --kernel-name regex:strip_probe --launch-count 1 \
        "$bin" --one bf16 1292 4 > "$out/ncu-bf16-L1292-strip4.txt" 2>&1
    echo "ncu rc $?"
    grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per" "$out/ncu-bf16-L1292-strip4.txt"
    if [ "$arch" -ge 90 ]; then
        timeout 90 ncu --section SpeedOfLight --section Occupancy --kernel-name regex:strip_bulk --launch-count 1 \
            "$bin" --one f16 1292 1 op bulk > "$out/ncu-f16-L1292-op-strip1-bulk.txt" 2>&1
        echo "ncu (bulk) rc $?"
        grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per" "$out/ncu-f16-L1292-op-strip1-bulk.txt"
    fi
fi
exit $rc
