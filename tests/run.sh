#!/bin/sh
# Runs each test binary; exit 0 = pass, 77 = skipped (prints why), anything else = fail.
pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
    name=$(basename "$t")
    out=$("$t" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  $name"
    elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(printf '%s\n' "$out" | grep -i 'skipped' | head -n 1)"
    else fail=$((fail+1)); failed="$failed $name"; echo "FAIL  $name (exit $rc)"; printf '%s\n' "$out" | tail -n 30 | sed 's/^/      /'
    fi
done
echo "----"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
