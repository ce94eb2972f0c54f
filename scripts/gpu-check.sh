#!/usr/bin/env bash
# On a GPU machine: build for this GPU, run the whole test suite (GPU tests included), run
# compute-sanitizer on the small GPU tests, run the benchmark and the Python comparators, and
# leave logs + JSON in the folder given as $1 (default: $OUT, else ./gpu-out). Ends with a
# short table. Usage: scripts/gpu-check.sh [OUTDIR] [--quick]
set -u
out=${1:-${OUT:-gpu-out}}; shift || true
quick=0; [ "${1:-}" = "--quick" ] && quick=1
mkdir -p "$out"
log="$out/gpu-check.log"
exec > >(tee -a "$log") 2>&1
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.mem --format=csv || true
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
echo "building for sm_$arch"

step "build"
make -j"$(nproc)" GPU_ARCH="$arch" all || { echo "BUILD FAILED"; exit 1; }
make ptxas-report > "$out/ptxas.txt" 2>&1 || true
tail -n 20 "$out/ptxas.txt"

step "tests"
make GPU_ARCH="$arch" test; test_rc=$?
cat build/test-logs/*.log > "$out/test-logs.txt" 2>/dev/null

step "compute-sanitizer (small shapes)"
san_rc=0
if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/test_cuda --small >"$out/sanitizer-$tool.txt" 2>&1
        rc=$?; echo "$tool: exit $rc ($(tail -n 1 "$out/sanitizer-$tool.txt"))"; [ $rc -eq 0 ] || san_rc=$rc
    done
else
    echo "compute-sanitizer not found"; san_rc=1
fi

step "dswa bench"
if [ $quick -eq 1 ]; then bargs="--L 256"; else bargs=""; fi
build/dswa bench $bargs --json > "$out/bench.json"; bench_rc=$?
build/dswa bench $bargs --repeats 20 2>/dev/null | tail -n 20

step "comparators (bench/compare.py)"
cargs=""; [ $quick -eq 1 ] && cargs="--quick"
timeout 420 python3 bench/compare.py $cargs --json "$out/compare.json"; cmp_rc=$?
python3 bench/plot.py "$out/compare.json" "$out/perf.png" || true

step "summary"
echo "tests rc=$test_rc  sanitizer rc=$san_rc  bench rc=$bench_rc  compare rc=$cmp_rc"
python3 bench/compare.py --table "$out/compare.json" 2>/dev/null || true
[ $test_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $bench_rc -eq 0 ]
