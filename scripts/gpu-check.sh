#!/usr/bin/env bash
# On a GPU machine: build for this GPU, run the whole test suite (GPU tests included), run
# compute-sanitizer (memcheck, racecheck) on the small GPU tests, run `dswa bench`, the Python
# comparators and the plot, leaving logs + JSON in OUTDIR (default: $OUT, else ./gpu-out).
# Ends with a short table. The two halves can run as separate calls:
#   scripts/gpu-check.sh OUTDIR [all|tests|compare]
set -u
out=${1:-${OUT:-gpu-out}}
part=${2:-all}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1  # absolute: the script cds below
exec > >(tee -a "$out/gpu-check-$part.log") 2>&1
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
rc=0

step "machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.mem --format=csv || true
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
echo "building for sm_$arch"
step "build"
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; echo "BUILD FAILED"; exit 1; }
grep -v '^ptxas warning' "$out/build.log" | tail -n 5

if [ "$part" = all ] || [ "$part" = tests ]; then
    step "tests"
    make GPU_ARCH="$arch" test || rc=1
    cat build/test-logs/*.log > "$out/test-logs.txt" 2>/dev/null
    step "compute-sanitizer (small shapes)"
    if command -v compute-sanitizer >/dev/null; then
        for tool in memcheck racecheck; do
            timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/test_cuda --small \
                > "$out/sanitizer-$tool.txt" 2>&1
            r=$?; echo "$tool: exit $r: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.txt" | tail -n 1)"
            [ $r -eq 0 ] || rc=1
        done
    else
        echo "compute-sanitizer not found"; rc=1
    fi
    step "dswa bench"
    build/dswa bench --json > "$out/bench.json" || rc=1
    python3 bench/profiling/bench-table.py "$out/bench.json"
fi

if [ "$part" = all ] || [ "$part" = compare ]; then
    step "comparators (bench/compare.py)"
    timeout 400 python3 bench/compare.py --budget "${COMPARE_BUDGET:-330}" --json "$out/compare.json" || rc=1
    python3 bench/plot.py "$out/compare.json" "$out/perf.png" || true
    python3 bench/compare.py --table "$out/compare.json" || true
fi
step "done: rc=$rc"
exit $rc
