#!/usr/bin/env bash
# Nsight Compute on the band kernels at L = 1292 (one launch each), for docs/PERF.md: speed of
# light, warp stall reasons, scheduler and occupancy. Clocks are left alone (--clock-control
# none). Usage: bench/profiling/gpu-profile.sh OUTFILE [BUILD_DIR]
set -u
outf=${1:?usage: gpu-profile.sh OUTFILE [BUILD_DIR]}; bdir=${2:-build}
case $outf in /*) ;; *) outf=$PWD/$outf ;; esac   # absolute: the script cds below
cd "$(dirname "$0")/../.."
command -v ncu >/dev/null || { echo "ncu not found" > "$outf"; exit 0; }
for run in f32:full bf16:full bf16:shared; do
    dt=${run%%:*}; vl=${run#*:}
    k=dswa_fwd_f32_tf32; [ "$dt" = bf16 ] && k=dswa_fwd_bf16
    echo "=== $k, V $vl" >> "$outf"
    timeout 120 ncu --clock-control none -k "$k" -c 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
        --section InstructionStats \
        "$bdir/dswa" bench --backend cuda --L 1292 --dtype "$dt" --v "$vl" --repeats 1 --warmup 0 --cold none \
        >> "$outf" 2>&1
done
grep -E "===|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Issued Ipc|Executed Instructions|No Eligible|Achieved Occupancy|Registers Per|Stall|L2 Hit|Eligible Warps" "$outf" | head -60
