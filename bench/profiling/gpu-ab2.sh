#!/usr/bin/env bash
# One device call for an A/B of compile-time variants with their correctness checks:
#   builds the default tree and each variant (in parallel), then
#   FULL=1: `make test` of the default build and compute-sanitizer (memcheck, racecheck) on
#           test_cuda --small;
#   TESTS=1: test_cuda, test_cuda_cases and test_aot_launch of each variant build;
#   `dswa bench` of the default build, of each variant, and of the default again (drift);
#   FP32=1: also `dswa bench --dtype f32 --math fp32` of the default build.
# Bench options in BENCH_ARGS (default, all rows) and VARIANT_BENCH_ARGS (variants). Logs and
# JSON are packed into OUTDIR/ab.tgz (the device tool brings back at most 8 files).
# Usage: scripts/gpu-ab2.sh OUTDIR "name=flags" ...
set -u
out=$1; shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
work=/tmp/ab2; rm -rf "$work"; mkdir -p "$work"
cd "$(dirname "$0")/.."
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$work/smi.txt"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
step build
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$work/build-default.log" 2>&1 &
for v in "$@"; do
    name=${v%%=*}; flags=${v#*=}; b=build-$name
    make -s -j"$(nproc)" BUILD="$b" GPU_ARCH="$arch" EXTRA_NVFLAGS="$flags" "$b/dswa" "$b/tests/test_cuda" \
        "$b/tests/test_cuda_cases" "$b/tests/test_aot_launch" > "$work/build-$name.log" 2>&1 &
done
wait
[ -x build/dswa ] || { tail -n 30 "$work/build-default.log"; exit 1; }
if [ -n "${FULL:-}" ]; then
    step "make test (default build)"
    timeout 300 make GPU_ARCH="$arch" test 2>&1 | tee "$work/make-test.log" | tail -n 14
    cp -r build/test-logs "$work/" 2>/dev/null
    step "compute-sanitizer (default build, test_cuda --small)"
    for tool in memcheck racecheck; do
        timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/test_cuda --small > "$work/sanitizer-$tool.txt" 2>&1
        echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$work/sanitizer-$tool.txt" | tail -n 1)"
    done
fi
if [ -n "${TESTS:-}" ]; then
    step "variant tests"
    for v in "$@"; do
        name=${v%%=*}; b=build-$name
        for t in test_cuda test_cuda_cases test_aot_launch; do
            timeout 200 "$b/tests/$t" > "$work/$name-$t.log" 2>&1
            echo "$name $t: exit $? $(tail -n 1 "$work/$name-$t.log")"
        done
    done
fi
step "bench default"
build/dswa bench ${BENCH_ARGS:-} --json > "$work/bench-default.json" 2>"$work/bench-default.err"
python3 bench/profiling/bench-table.py "$work/bench-default.json"
if [ -n "${FP32:-}" ]; then
    step "bench default, --math fp32"
    build/dswa bench --dtype f32 --math fp32 --json > "$work/bench-fp32.json" 2>/dev/null
    python3 bench/profiling/bench-table.py "$work/bench-fp32.json" | tail -n +2
fi
for v in "$@"; do
    name=${v%%=*}
    [ -x "build-$name/dswa" ] || { echo "variant $name: build failed"; tail -n 5 "$work/build-$name.log"; continue; }
    step "bench variant $name (${v#*=})"
    "build-$name/dswa" bench ${VARIANT_BENCH_ARGS:-} --json > "$work/bench-$name.json" 2>/dev/null
    python3 bench/profiling/bench-table.py "$work/bench-$name.json" | tail -n +2
done
if [ $# -gt 0 ]; then
    step "bench default again (drift)"
    build/dswa bench ${VARIANT_BENCH_ARGS:-} --json > "$work/bench-default2.json" 2>/dev/null
    python3 bench/profiling/bench-table.py "$work/bench-default2.json" | tail -n +2
fi
tar czf "$out/ab.tgz" -C "$work" .
step done
exit 0
