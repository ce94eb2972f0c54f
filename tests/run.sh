#!/bin/sh
# Runs each test binary; exit 0 = pass, 77 = skipped (prints why), anything else = fail.
# Full output of each test goes to $BUILD/test-logs/NAME.log (default build/); failures print their failed
# checks and the end of the output.
pass=0; fail=0; skip=0; failed=""
logs=${BUILD:-build}/test-logs; mkdir -p "$logs"
for t in "$@"; do
    name=$(basename "$t")
    "$t" >"$logs/$name.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then
        pass=$((pass+1)); echo "PASS  $name"
        # a passing program may still skip parts (e.g. the torch/TensorRT Python tests): say so.
        # The Python tests' count is their runner's summary ("18 passed, 15 skipped ..."; one
        # "skipped:" line there may stand for several tests); elsewhere one line is one part.
        n=$(grep -E '^[0-9]+ passed,.* [0-9]+ skipped' "$logs/$name.log" | tail -n 1 |
            sed -E 's/.* ([0-9]+) skipped.*/\1/')
        [ -n "$n" ] || n=$(grep -c 'skipped:' "$logs/$name.log")
        [ "$n" -eq 1 ] && parts=part || parts=parts
        [ "$n" -gt 0 ] && echo "      ($n $parts skipped, e.g. $(grep -m 1 -o 'skipped: .*' "$logs/$name.log"))"
    elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(grep -i 'skipped' "$logs/$name.log" | head -n 1)"
    else
        fail=$((fail+1)); failed="$failed $name"; echo "FAIL  $name (exit $rc; log $logs/$name.log)"
        grep -E 'CHECK\(|failed|error' "$logs/$name.log" | head -n 40 | sed 's/^/      /'
        echo "      ..."; tail -n 8 "$logs/$name.log" | sed 's/^/      /'
    fi
done
echo "----"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
