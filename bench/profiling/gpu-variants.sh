#!/usr/bin/env bash
# Builds compile-time variants of the kernels (EXTRA_NVFLAGS) for this GPU and times each with
# `dswa bench`, for the prediction/measurement log in docs/PERF.md.
# Usage: scripts/gpu-variants.sh OUTDIR "name=flags" ... ; bench options in BENCH_ARGS.
set -u
out=$1; shift
cd "$(dirname "$0")/.."
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
for v in "$@"; do
    name=${v%%=*}; flags=${v#*=}
    make -s -j"$(nproc)" BUILD="build-$name" GPU_ARCH="$arch" EXTRA_NVFLAGS="$flags" "build-$name/dswa" >/dev/null 2>&1 \
        || { echo "variant $name: build failed"; continue; }
    echo "=== variant $name ($flags)"
    "build-$name/dswa" bench ${BENCH_ARGS:---dtype f32,bf16 --v full --L 1292,4096 --repeats 30} --json > "$out/variant-$name.json" 2>/dev/null
    python3 bench/profiling/bench-table.py "$out/variant-$name.json" | tail -n +2
done
