#!/usr/bin/env bash
# A/B of source trees on one GPU, in one device call: builds each tree for this GPU, then runs
# `dswa bench --json` of each in turn, ROUNDS times (A B A B ...), so that drift shows as a
# difference between the rounds of one tree, not between trees. A tree is a directory holding a
# copy of the repository (e.g. `git worktree add /tmp/base <rev>`, carried to the GPU machine),
# or a revision when the repository's .git is present.
#   bench/profiling/gpu-ab.sh OUTDIR name=TREE ...      e.g.  OUT base=/tmp/base new=.
# Bench options in BENCH_ARGS (default: all rows; several benches: option sets separated by
# ';'), rounds in ROUNDS (default 2). Writes OUTDIR/<name>-<round>-<set>.json (+ .err) and build
# logs, and prints each run's short table.
# Each tree is timed by its own `dswa bench`: compare trees whose bench times a row the same
# way (14f754e or later: a graph of 20 calls), or time_ms means different things.
set -u
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR name=TREE name=TREE ..."; exit 2; }
out=$1; shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v nvidia-smi >/dev/null || { echo "gpu-ab: skipped: no GPU (nvidia-smi not found)"; exit 0; }
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
[ -n "$arch" ] || { echo "gpu-ab: skipped: no GPU"; exit 0; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/smi.txt"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
for v in "$@"; do
    name=${v%%=*}; tree=${v#*=}
    case $name in ''|*[!A-Za-z0-9_.-]*) echo "gpu-ab: '$v': the name must be letters, digits, . _ -"; exit 2 ;; esac
    if [ -d "$tree" ]; then
        src=$(cd "$tree" && pwd)
    elif git -C "$root" rev-parse --verify -q "$tree^{commit}" >/dev/null 2>&1; then
        src=$work/src-$name; mkdir -p "$src"
        git -C "$root" archive "$tree" | tar -x -C "$src" || { echo "gpu-ab: $name: git archive $tree failed"; exit 1; }
    else
        echo "gpu-ab: $name: '$tree' is neither a directory nor a revision of this repository"; exit 2
    fi
    b=$work/build-$name
    make -s -C "$src" -j"$(nproc)" BUILD="$b" GPU_ARCH="$arch" "$b/dswa" > "$out/build-$name.log" 2>&1 \
        || { echo "gpu-ab: $name: build failed"; tail -n 20 "$out/build-$name.log"; exit 1; }
done
rc=0
for r in $(seq 1 "${ROUNDS:-2}"); do
    for v in "$@"; do
        name=${v%%=*}
        echo; echo "=== $name, round $r ($(date -u +%H:%M:%S))"
        j=0
        while IFS= read -r set; do
            j=$((j + 1)); f=$name-$r-$j
            "$work/build-$name/dswa" bench $set --json > "$out/$f.json" 2> "$out/$f.err" \
                || { echo "$f: dswa bench $set exited $? (see $f.err)"; rc=1; }
            python3 "$root/bench/profiling/bench-table.py" "$out/$f.json" || rc=1
        done < <(printf '%s\n' "${BENCH_ARGS:-}" | tr ';' '\n')
    done
done
exit $rc
