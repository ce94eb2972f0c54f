#!/usr/bin/env bash
# One device call for the session-6 A/B: GPU tests of each named variant build (test_cuda,
# test_cuda_cases, test_aot_launch), then `dswa bench` of the default build and of each variant,
# the default again last (drift check). Usage: scripts/gpu-ab2.sh OUTDIR "name=flags" ...
set -u
out=$1; shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/.."
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
for v in "$@"; do
    name=${v%%=*}; flags=${v#*=}
    b=build-$name
    make -s -j"$(nproc)" BUILD="$b" GPU_ARCH="$arch" EXTRA_NVFLAGS="$flags" "$b/dswa" "$b/tests/test_cuda" \
        "$b/tests/test_cuda_cases" "$b/tests/test_aot_launch" >> "$out/build.log" 2>&1 || { echo "variant $name: build failed"; continue; }
    if [ -n "${TESTS:-}" ]; then
        for t in test_cuda test_cuda_cases test_aot_launch; do
            timeout 300 "$b/tests/$t" > "$out/$name-$t.log" 2>&1; echo "$name $t: exit $? $(tail -n 1 "$out/$name-$t.log")"
        done
    fi
done
BA=${BENCH_ARGS:---repeats 50}
build/dswa bench $BA --json > "$out/bench-default.json" 2>/dev/null
python3 scripts/bench-table.py "$out/bench-default.json"
for v in "$@"; do
    name=${v%%=*}
    [ -x "build-$name/dswa" ] || continue
    echo "=== variant $name (${v#*=})"
    "build-$name/dswa" bench $BA --json > "$out/bench-$name.json" 2>/dev/null
    python3 scripts/bench-table.py "$out/bench-$name.json" | tail -n +2
done
echo "=== default again"
build/dswa bench $BA --json > "$out/bench-default2.json" 2>/dev/null
python3 scripts/bench-table.py "$out/bench-default2.json" | tail -n +2
exit 0
