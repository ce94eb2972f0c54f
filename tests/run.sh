#!/bin/sh
# Runs each test program; exit 0 = pass, 77 = skipped (prints why), anything else = fail.
# The programs are independent (each works in its own temporary files), so they run
# TEST_JOBS at a time (default: the CPUs, at most 4), started in the order given (put the
# longest first); the results print in that order, each with its wall time. Full output of
# each test goes to $BUILD/test-logs/NAME.log (default build/); failures print their failed
# checks and the end of the output.
pass=0; fail=0; skip=0; failed=""
logs=${BUILD:-build}/test-logs; mkdir -p "$logs"
cpus=$(nproc 2>/dev/null || echo 1)
jobs=${TEST_JOBS:-$(( cpus < 4 ? cpus : 4 ))}
[ "$jobs" -ge 1 ] 2>/dev/null || { echo "run.sh: TEST_JOBS = '$jobs': must be a whole number >= 1"; exit 2; }
for t in "$@"; do rm -f "$logs/$(basename "$t").rc"; done
# each test: its log, then "exit-status seconds" in NAME.rc
printf '%s\n' "$@" | xargs -P "$jobs" -I{} sh -c '
    t=$1; logs=$2; name=$(basename "$t"); s=$(date +%s)
    "$t" >"$logs/$name.log" 2>&1; rc=$?
    echo "$rc $(( $(date +%s) - s ))" >"$logs/$name.rc"' sh {} "$logs"
for t in "$@"; do
    name=$(basename "$t")
    rc=1; secs=?
    [ -s "$logs/$name.rc" ] && read -r rc secs < "$logs/$name.rc"
    if [ "$rc" -eq 0 ]; then
        pass=$((pass+1)); echo "PASS  $name ($secs s)"
        # a passing program may still skip parts (e.g. the torch/TensorRT Python tests): say so.
        # The Python tests' count is their runner's summary ("18 passed, 15 skipped ..."; one
        # "skipped:" line there may stand for several tests); elsewhere one line is one part.
        n=$(grep -E '^[0-9]+ passed,.* [0-9]+ skipped' "$logs/$name.log" | tail -n 1 |
            sed -E 's/.* ([0-9]+) skipped.*/\1/')
        [ -n "$n" ] || n=$(grep -c 'skipped:' "$logs/$name.log")
        [ "$n" -eq 1 ] && parts=part || parts=parts
        [ "$n" -gt 0 ] && echo "      ($n $parts skipped, e.g. $(grep -m 1 -o 'skipped: .*' "$logs/$name.log"))"
    elif [ "$rc" -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(grep -i 'skipped' "$logs/$name.log" | head -n 1)"
    else
        fail=$((fail+1)); failed="$failed $name"; echo "FAIL  $name (exit $rc, $secs s; log $logs/$name.log)"
        grep -E 'CHECK\(|failed|error' "$logs/$name.log" | head -n 40 | sed 's/^/      /'
        echo "      ..."; tail -n 8 "$logs/$name.log" | sed 's/^/      /'
    fi
done
echo "----"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
