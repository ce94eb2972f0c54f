#!/usr/bin/env bash
# The backward's bench on the GPU, each part one device call of a few minutes (issue 28's goals:
# the backward at >= 70 % of a copy of its bytes; the fused block's forward + backward >= 10x the
# compiled prologue + FlexAttention, and ahead of the chunked-halo SDPA path by at least the
# forward's ratio).
#   bench/profiling/gpu-backward.sh OUTDIR bench          build; dswa bench --backward (every
#       dtype; OP_DTYPES=bf16,f16 for fewer) and --op samel --backward (--json, timed), their tables
#                                                                     (about 2-3 minutes)
#   bench/profiling/gpu-backward.sh OUTDIR train DTYPE    build; bench/compare.py --op samel
#       --backward for one dtype (f32, bf16 or f16) at L = 256, 1292, 4096 (L=... in the
#       environment overrides), then dswa bench --op samel --backward for that dtype in the same
#       call and the joined table                                     (about 4-8 minutes)
# Writes OUTDIR/bench-backward.json, bench-samel-backward.json (+ .err), readme-backward.md,
# readme-samel-backward.md; train: train-DTYPE.json, bench-samel-backward-DTYPE.json,
# readme-samel-backward-DTYPE.md. The per-dtype train files join into one table with
# python3 bench/readme_table.py BENCH.json --compare train-f32.json --compare train-bf16.json ...
# (BENCH.json: a run with every dtype, e.g. this script's `bench` part, on the same machine).
# COMMIT=<hash> names the commit when .git is absent; BUDGET=<s> the comparators' time budget.
set -u
out=${1:?usage: gpu-backward.sh OUTDIR bench|train DTYPE}
part=${2:?usage: gpu-backward.sh OUTDIR bench|train DTYPE}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
cd "$(dirname "$0")/../.."
command -v nvidia-smi >/dev/null || { echo "gpu-backward: skipped: no GPU (nvidia-smi not found)"; exit 0; }
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
[ -n "$arch" ] || { echo "gpu-backward: skipped: no GPU"; exit 0; }
commit=${COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
rc=0
step "build for sm_$arch"
make -s -j"$(nproc)" GPU_ARCH="$arch" all > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
# readme_table.py: 0 a table, 3 a CPU run (not here), anything else a refusal
table() {   # table OUT.md BENCH.json [--compare FILE]...
    local md=$1; shift
    python3 bench/readme_table.py "$@" --commit "$commit" > "$md" && cat "$md" || { echo "readme_table.py $* exited $?"; rc=1; }
}
case $part in
bench)
    for op in diff_swa samel; do
        name=bench-backward; [ $op = samel ] && name=bench-samel-backward
        dts=${OP_DTYPES:-all}
        step "dswa bench --op $op --backward --dtype $dts"
        t0=$(date +%s)
        build/dswa bench --op $op --backward --dtype "$dts" --json > "$out/$name.json" 2> "$out/$name.err" ||
            { echo "dswa bench --op $op --backward exited $?"; rc=1; }
        echo "$((($(date +%s) - t0))) s"
        grep -E "copy bandwidth|copied:" "$out/$name.err" | head -n 4
        python3 - "$out/$name.json" <<'PY' || rc=1
import json, sys
b = json.load(open(sys.argv[1]))
goal = (b.get("goals") or {}).get("pct_of_copy")
for r in b["rows"]:
    p, f = r.get("pct_of_copy"), r.get("fwd_bwd_ms")
    print(f"L={r.get('L')} {r['dtype']:<4} V {r['v']:<6} {r['status']:<11} bwd {r.get('time_ms')} ms "
          f"({'-' if p is None else f'{p:.1f} %'} of copy), fwd+bwd {f} ms, rel_err {r.get('rel_err')}"
          + (f"  {r['message']}" if r.get("message") else ""))
bad = [r for r in b["rows"] if r["status"] in ("fail", "error")]
low = [r for r in b["rows"] if r["status"] == "ok" and (r.get("pct_of_copy") or 0) < goal]
print(f"rows: {len(b['rows'])}, failed: {len(bad)}, below {goal} % of copy: {len(low)}")
sys.exit(1 if bad else 0)
PY
    done
    step "tables (commit $commit)"
    table "$out/readme-backward.md" "$out/bench-backward.json"
    table "$out/readme-samel-backward.md" "$out/bench-samel-backward.json"
    ;;
train)
    dt=${3:?usage: gpu-backward.sh OUTDIR train f32|bf16|f16}
    case $dt in f32|bf16|f16) ;; *) echo "gpu-backward: train: '$dt' is not f32, bf16 or f16"; exit 2 ;; esac
    Ls=${L:-256 1292 4096}
    step "bench/compare.py --op samel --backward --dtypes $dt --L $Ls"
    python3 bench/compare.py --op samel --backward --dtypes "$dt" --L $Ls --budget "${BUDGET:-400}" \
        --json "$out/train-$dt.json" || { echo "compare.py exited $?"; rc=1; }
    step "dswa bench --op samel --backward --dtype $dt (the same call)"
    build/dswa bench --op samel --backward --dtype "$dt" --L "$(echo $Ls | tr ' ' ',')" --json \
        > "$out/bench-samel-backward-$dt.json" 2> "$out/bench-samel-backward-$dt.err" ||
        { echo "dswa bench exited $?"; rc=1; }
    step "joined table (commit $commit)"
    [ -s "$out/train-$dt.json" ] &&
        table "$out/readme-samel-backward-$dt.md" "$out/bench-samel-backward-$dt.json" --compare "$out/train-$dt.json"
    ;;
*)
    echo "gpu-backward: '$part' is not bench or train"; exit 2 ;;
esac
step "done: rc=$rc"
exit $rc
