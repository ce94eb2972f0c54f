#!/usr/bin/env bash
# The GPU job, in one command on a machine with an NVIDIA GPU: build for that GPU, every test
# (GPU tests included), compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on the
# small GPU cases (--small) of the op and of the fused block, forward and backward (test_cuda,
# test_cuda_samel, test_cuda_backward, test_cuda_samel_backward; SANITIZER_TESTS picks), the TensorRT
# plugin path launched through the driver in a CUDA graph, then `dswa bench` (with the wide
# kernel and fp32-accurate rows) and the README table from it, and `dswa bench --op samel`.
# Logs and JSON go to OUTDIR (default: $OUT, else ./gpu-out); it ends with a short summary.
#   scripts/gpu-check.sh [OUTDIR] [all|tests|bench|compare|block|wheel|multigpu|upstream]
# `tests` and `bench` are the two halves of `all`; `compare` runs the Python comparators
# (bench/compare.py: Triton block-tiled kernel, FlexAttention) and the plot, then the fused
# block's comparator (compare.py --op samel: compiled prologue + op) and `dswa bench --op samel`,
# joined by bench/readme_table.py: the fused block's README table (both ratios) and plot; `block`
# (not in `all`) times one upstream-shaped SAME-L transformer block unswapped and swapped
# (bench/compare.py --op block; unswapped, upstream's compiled FlexAttention, whose first call
# per dtype and step autotunes for about a minute: split the dtypes over calls with BLOCK_ARGS,
# e.g. "--dtypes bf16"): the README's block tables. `wheel` (not in `all`) installs a
# wheel into a fresh environment with nvcc hidden and runs the Python tests from it with the
# CUDA backend required (scripts/test-wheel.sh --deps-from python3 --require-cuda: numpy,
# pytest, torch as python3 has them): $WHEEL, else the newest build-wheel/dist/dswa-*.whl (made
# by scripts/build-wheel.sh on another machine and carried along: building one needs PyPI for
# its tools), else one scripts/build-wheel.sh builds here. `multigpu` (not in `all`) runs
# scripts/multi_gpu_train.py under torchrun on 2 GPUs (DDP and FSDP2 training, swapped against
# unswapped; its summary in multigpu.json) and says so and skips with fewer. `upstream` (not
# in `all`) runs scripts/upstream_check.py (more options in UPSTREAM_ARGS, e.g. `--model decoder
# --profile`: the whole SAMEDecoder under torch.profiler): upstream's own
# TransformerResamplingBlock at SAME-L's size, cast whole to each dtype (16-bit first; float32's FlexAttention autotuning may not fit the
# call: the JSON keeps the rows done), swapped against unswapped, with UPSTREAM the directory
# holding its stable_audio_3 package (an ignored directory such as build-upstream/, carried
# along: the GPU machine has no network; it comes first on sys.path, so a package put beside
# stable_audio_3 for a machine that lacks it shadows the machine's own). Each part
# keeps within one device call (10 min): the sanitizer runs stop being started once the tests
# part has run SANITIZER_UNTIL seconds (default 480). Without a GPU it says so and exits 1 at
# once.
set -u
out=${1:-${OUT:-gpu-out}}
part=${2:-all}
case $part in all|tests|bench|compare|block|wheel|multigpu|upstream) ;; *) echo "gpu-check: unknown part '$part' (all|tests|bench|compare|block|wheel|multigpu|upstream)"; exit 2 ;; esac
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
if [ -z "$arch" ]; then
    echo "gpu-check: no GPU found (nvidia-smi is missing or lists no device): this job needs an NVIDIA GPU"
    exit 1
fi
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1  # absolute: the script cds below
exec > >(tee -a "$out/gpu-check-$part.log") 2>&1
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
secs() { echo $(( $(date +%s) - $1 )); }
rc=0
summary=""
note() { summary="$summary$*"$'\n'; }

step "machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.mem --format=csv || true
commit=${COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
echo "commit $commit, building for sm_$arch"
if [ "$part" != wheel ]; then     # the wheel's library is built by scripts/build-wheel.sh
    step "build"
    t=$(date +%s)
    make -s -j"$(nproc)" GPU_ARCH="$arch" GIT_COMMIT="$commit" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; echo "BUILD FAILED"; exit 1; }
    grep -v '^ptxas warning' "$out/build.log" | tail -n 5
    note "build: $(secs "$t") s"
fi

if [ "$part" = all ] || [ "$part" = tests ]; then
    part_start=$(date +%s)
    step "make test"
    t=$(date +%s)
    if make -s GPU_ARCH="$arch" GIT_COMMIT="$commit" test > "$out/test.log" 2>&1; then r=ok; else r=FAILED; rc=1; fi
    grep -E '^(PASS|FAIL|SKIP)|^tests:|^      ' "$out/test.log"
    note "make test: $r in $(secs "$t") s ($(grep '^tests:' "$out/test.log"))"
    tar czf "$out/test-logs.tgz" -C build test-logs 2>/dev/null
    step "compute-sanitizer on the GPU tests' --small runs (${SANITIZER_TESTS:-all four})"
    if command -v compute-sanitizer >/dev/null; then
        # test_cuda's logs keep their old names (sanitizer-<tool>.txt); the others' are
        # sanitizer-<name after test_cuda_>-<tool>.txt (samel-, backward-, samel_backward-)
        for test in ${SANITIZER_TESTS:-test_cuda test_cuda_samel test_cuda_backward test_cuda_samel_backward}; do
            [ $test = test_cuda ] && tag="" || tag="${test#test_cuda_}-"
            if [ ! -x build/tests/$test ]; then
                echo "$test: not built: skipped"; note "sanitizers on $test: skipped (not built)"; rc=1
                continue
            fi
            for tool in memcheck racecheck synccheck initcheck; do
                if [ "$(secs "$part_start")" -ge "${SANITIZER_UNTIL:-480}" ]; then
                    echo "$test $tool: skipped: the tests part has run ${SANITIZER_UNTIL:-480} s"
                    note "sanitizer $test $tool: skipped (time)"; rc=1
                    continue
                fi
                t=$(date +%s)
                timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/$test --small \
                    > "$out/sanitizer-$tag$tool.txt" 2>&1
                r=$?
                s=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tag$tool.txt" | tail -n 1)
                echo "$test $tool: exit $r in $(secs "$t") s: $s"
                note "sanitizer $test $tool: exit $r: $s"
                [ $r -eq 0 ] || rc=1
            done
        done
    else
        echo "compute-sanitizer not found"; note "compute-sanitizer: not found"; rc=1
    fi
    step "TensorRT plugin path through the driver (python/tests/gpu_trt.sh)"
    if ls .whl/*.whl >/dev/null 2>&1; then
        t=$(date +%s)
        if DSWA_LIB="$PWD/build/libdswa.so" sh python/tests/gpu_trt.sh > "$out/gpu-trt.log" 2>&1; then r=ok; else r=FAILED; rc=1; fi
        tail -n 15 "$out/gpu-trt.log"
        note "TensorRT plugin path on the GPU: $r in $(secs "$t") s"
    else
        echo "skipped: the TensorRT plugin-layer wheels are not in .whl/ (see python/tests/gpu_trt.sh)"
        note "TensorRT plugin path on the GPU: skipped (no .whl/)"
    fi
fi

if [ "$part" = all ] || [ "$part" = bench ]; then
    step "dswa bench (the default rows, as make bench runs them)"
    t=$(date +%s)
    build/dswa bench --json > "$out/bench.json" 2> "$out/bench.err" || { echo "dswa bench failed"; tail -n 5 "$out/bench.err"; rc=1; }
    python3 bench/profiling/bench-table.py "$out/bench.json" || rc=1
    note "dswa bench: $(secs "$t") s"
    python3 bench/readme_table.py "$out/bench.json" --commit "$commit" > "$out/readme-table.md" || rc=1
    for w in 64 128; do
        step "wide kernel: --window $w"
        build/dswa bench --window "$w" --L 256,4096 --cold none --json > "$out/bench-window-$w.json" \
            2> "$out/bench-window-$w.err" || { echo "failed"; rc=1; }
        python3 bench/profiling/bench-table.py "$out/bench-window-$w.json" | tail -n +2 || rc=1
    done
    step "fp32-accurate math (--math fp32) beside TF32"
    build/dswa bench --dtype f32 --math fp32 --cold none --json > "$out/bench-fp32.json" 2> "$out/bench-fp32.err" || rc=1
    python3 bench/profiling/bench-table.py "$out/bench-fp32.json" | tail -n +2 || rc=1
    step "the fused SAME-L block: dswa bench --op samel (goal (a); goal (b) is the compare part's)"
    t=$(date +%s)
    timeout 240 build/dswa bench --op samel --json > "$out/bench-samel-nocompare.json" 2> "$out/bench-samel-nocompare.err" ||
        { echo "dswa bench --op samel failed"; tail -n 5 "$out/bench-samel-nocompare.err"; rc=1; }
    python3 bench/readme_table.py "$out/bench-samel-nocompare.json" --commit "$commit" | tail -n +5 || rc=1
    note "dswa bench --op samel: $(secs "$t") s"
fi

if [ "$part" = all ] || [ "$part" = compare ]; then
    step "comparators (bench/compare.py)"
    # the budgets keep the whole part within one device call (typical: 60 s, 100-200 s, 30 s)
    timeout 210 python3 bench/compare.py --budget "${COMPARE_BUDGET:-150}" --json "$out/compare.json" || rc=1
    python3 bench/plot.py "$out/compare.json" "$out/perf.png" || true
    python3 bench/compare.py --table "$out/compare.json" || true
    step "the fused block's comparator: compiled prologue + op (bench/compare.py --op samel)"
    t=$(date +%s)
    timeout 260 python3 bench/compare.py --op samel --budget "${SAMEL_COMPARE_BUDGET:-200}" --json "$out/samel-compare.json"
    r=$?
    case $r in
        0) note "samel comparator: ok in $(secs "$t") s" ;;
        3) note "samel comparator: skipped (no torch)" ;;   # compare.py said why
        *) note "samel comparator: exit $r in $(secs "$t") s"; rc=1 ;;
    esac
    step "dswa bench --op samel joined with the comparator's times: the README's fused-block table"
    t=$(date +%s)
    cmp=()
    [ -s "$out/samel-compare.json" ] && cmp=("$out/samel-compare.json")
    if timeout 120 build/dswa bench --op samel --json > "$out/bench-samel.json" 2> "$out/bench-samel.err"; then r=ok; else r=FAILED; rc=1; tail -n 5 "$out/bench-samel.err"; fi
    python3 bench/readme_table.py "$out/bench-samel.json" ${cmp[@]+--compare "${cmp[@]}"} --commit "$commit" > "$out/readme-samel.md" &&
        cat "$out/readme-samel.md" || rc=1
    python3 bench/plot.py "$out/bench-samel.json" "$out/perf-samel.png" ${cmp[@]+"${cmp[@]}"} || true
    note "dswa bench --op samel, joined: $r in $(secs "$t") s"
fi
if [ "$part" = block ]; then
    step "one SAME-L transformer block, unswapped and swapped (bench/compare.py --op block)"
    t=$(date +%s)
    # BLOCK_ARGS: more compare.py options, e.g. "--dtypes f32" to split the table over calls
    COMMIT="$commit" timeout 560 python3 bench/compare.py --op block --budget "${BLOCK_BUDGET:-480}" ${BLOCK_ARGS:-} --json "$out/block-compare.json"
    r=$?
    [ $r -eq 0 ] && r=ok || { r="exit $r"; rc=1; }
    python3 bench/compare.py --table "$out/block-compare.json" > "$out/readme-block.md" || rc=1
    note "block comparator: $r in $(secs "$t") s (README table: readme-block.md)"
fi
if [ "$part" = wheel ]; then
    step "the wheel: the Python tests from it, installed with nvcc hidden (scripts/test-wheel.sh)"
    t=$(date +%s)
    whl=${WHEEL:-}
    if [ -z "$whl" ]; then
        whl=$(ls -t build-wheel/dist/dswa-*.whl 2>/dev/null | head -n 1)
        [ -z "$whl" ] || echo "WHEEL is not set: the newest in build-wheel/dist"
    fi
    if [ -z "$whl" ]; then
        echo "WHEEL is not set and build-wheel/dist has none: scripts/build-wheel.sh builds one (every architecture)"
        rm -rf "$out/wheel"
        if bash scripts/build-wheel.sh "$out/wheel" > "$out/build-wheel.log" 2>&1; then
            whl=$(ls "$out"/wheel/*.whl)
        else
            tail -n 30 "$out/build-wheel.log"; echo "BUILD OF THE WHEEL FAILED"
        fi
        note "build-wheel: $(secs "$t") s"
    fi
    if [ -n "$whl" ]; then
        t=$(date +%s)
        echo "wheel: $whl"
        if bash scripts/test-wheel.sh --deps-from python3 --require-cuda "$whl" > "$out/test-wheel.log" 2>&1; then r=ok; else r=FAILED; rc=1; fi
        grep -E '^test-wheel:|passed|failed|SKIPPED|FAIL' "$out/test-wheel.log" | tail -n 40
        note "Python tests from the wheel $(basename "$whl") (CUDA required): $r in $(secs "$t") s"
    else
        rc=1; note "Python tests from the wheel: no wheel"
    fi
fi
if [ "$part" = multigpu ]; then
    step "training on 2 GPUs: DDP and FSDP2, swapped against unswapped (scripts/multi_gpu_train.py)"
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    if [ "$n" -lt 2 ]; then
        echo "skipped: $n GPU on this machine; scripts/multi_gpu_train.py needs 2 (NCCL)"
        note "multigpu: skipped ($n GPU; needs 2)"
    else
        t=$(date +%s)
        rm -f "$out/multigpu.json"
        if DSWA_LIB="$PWD/build/libdswa.so" timeout 540 python3 -m torch.distributed.run --standalone \
            --nproc_per_node 2 scripts/multi_gpu_train.py --json "$out/multigpu.json" \
            > "$out/multigpu.log" 2>&1; then r=ok; else r=FAILED; rc=1; fi
        grep -E '^multi_gpu_train:' "$out/multigpu.log" || tail -n 30 "$out/multigpu.log"
        note "multigpu (DDP float32, FSDP2 bfloat16, 2 GPUs): $r in $(secs "$t") s"
    fi
fi
if [ "$part" = upstream ]; then
    step "upstream's TransformerResamplingBlock, cast whole, swapped against unswapped"
    if [ -z "${UPSTREAM:-}" ] || [ ! -d "$UPSTREAM/stable_audio_3" ]; then
        echo "UPSTREAM='${UPSTREAM:-}' holds no stable_audio_3/: set it to a checkout of upstream's code"
        note "upstream: no UPSTREAM"; rc=1
    else
        t=$(date +%s)
        # UPSTREAM_ARGS: more options, e.g. "--model decoder --profile --dtypes bfloat16"
        if DSWA_LIB="$PWD/build/libdswa.so" timeout "${UPSTREAM_TIMEOUT:-540}" python3 scripts/upstream_check.py \
            --upstream "$UPSTREAM" ${UPSTREAM_ARGS:-} --json "$out/upstream.json" > "$out/upstream.log" 2>&1; then r=ok; else r=FAILED; rc=1; fi
        grep '^{' "$out/upstream.log" || tail -n 30 "$out/upstream.log"
        note "upstream's model cast whole (scripts/upstream_check.py ${UPSTREAM_ARGS:-}): $r in $(secs "$t") s"
    fi
fi
step "summary (commit $commit)"
printf '%s' "$summary"
echo "gpu-check: rc=$rc"
exit $rc
