#!/bin/bash
# one-off device job: the final tree's GPU tests (make test, python CUDA tests), then an A/B of the
# epilogue summing the norms' terms in fp32 per warp (avar) against this tree
set -u
O=$OUT/r; mkdir -p $O
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
fin() { tar czf $OUT/r.tgz -C $OUT r; }
trap fin EXIT
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv | tee $O/gpu.txt
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
make -s -j16 GPU_ARCH=$arch GIT_COMMIT=$COMMIT all > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
el; echo built
( cd avar && make -s -j6 GPU_ARCH=$arch GIT_COMMIT=$COMMIT-f32sums all build/tests/test_cuda_samel_backward > $O/build-var.log 2>&1 ) &
timeout 200 make -s GPU_ARCH=$arch GIT_COMMIT=$COMMIT test > $O/test.log 2>&1; echo "make test rc $?"
grep -E '^(PASS|FAIL|SKIP)|^tests:' $O/test.log; el; tar czf $O/test-logs.tgz -C build test-logs 2>/dev/null
wait
summ() { python3 - "$1" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for r in b["rows"]:
    print(r.get("L"), r["dtype"], r["status"], r.get("time_ms"), r.get("pct_of_copy"), r.get("rel_err"), r.get("message", ""))
PY
}
for t in main var main2 var2; do
  d=.; case $t in var*) d=avar ;; esac
  timeout 40 $d/build/dswa bench --op samel --backward --dtype bf16 --json > $O/bench-$t.json 2> $O/bench-$t.err
  echo "$t rc $?"; summ $O/bench-$t.json
done; el
timeout 60 avar/build/tests/test_cuda_samel_backward > $O/test-var.log 2>&1; echo "var test rc $?"; tail -1 $O/test-var.log; el
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_cuda_samel_backward > $O/memcheck-samel-bwd.txt 2>&1
echo "memcheck rc $?"; grep "ERROR SUMMARY" $O/memcheck-samel-bwd.txt; el
