#!/bin/sh
# test_cli.sh — the dswa command-line tool as a user runs it: every subcommand's help (three
# ways, and into a full disk), the start of each subcommand, and the bad input and failures
# each one must refuse with exit status and one line: -o and --meta naming one file, outputs
# written all or none, a failed write to standard output, repeated options, --math that
# cannot be honoured, non-text and oversized input to ptx-fit, instructions newer than the
# target, a parameter's address taken. Run by `make test` (BUILD= names the build folder).
# Exit 0 pass, 1 fail; parts that need the AOT export (a build with nvcc) say "skipped:".
set -u
dswa=${BUILD:-build}/dswa
case $dswa in /*) ;; *) dswa=$(pwd)/$dswa ;; esac
fixtures=$(cd "$(dirname "$0")/fixtures" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$dswa" ] || { echo "test_cli: no $dswa (run make first)"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dswa-test-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
checks=0; failures=0

fail() { failures=$((failures+1)); echo "FAILED: $*"; }
# run EXPECTED_STATUS CMD...: runs CMD with stdout in out, stderr in err; checks the status.
run() {
    want=$1; shift
    checks=$((checks+1))
    "$@" >out 2>err; got=$?
    [ "$got" -eq "$want" ] || { fail "$* -> exit $got, expected $want; stderr: $(head -c 400 err)"; return 1; }
    return 0
}
# one_line PATTERN: stderr is exactly one line and matches PATTERN (grep -E).
one_line() {
    checks=$((checks+1))
    n=$(wc -l <err)
    [ "$n" -eq 1 ] && grep -Eq -- "$1" err || fail "stderr is not one line matching '$1': $(head -c 400 err)"
}
# full CMD...: CMD with stdout on /dev/full: exit 1 and one line naming standard output.
full() {
    checks=$((checks+1))
    "$@" >/dev/full 2>err; got=$?
    [ "$got" -eq 1 ] || fail "$* >/dev/full -> exit $got, expected 1"
    one_line "cannot write to standard output"
}
# full_last CMD...: the same for commands that also report progress on stderr: the error is
# its last line.
full_last() {
    checks=$((checks+1))
    "$@" >/dev/full 2>err; got=$?
    [ "$got" -eq 1 ] || fail "$* >/dev/full -> exit $got, expected 1"
    tail -n 1 err | grep -q "cannot write to standard output" ||
        fail "$* >/dev/full: last line: $(tail -n 1 err)"
}
absent() { checks=$((checks+1)); for f in "$@"; do [ ! -e "$f" ] || fail "$f exists"; done; }
no_temps() { checks=$((checks+1)); ls | grep -q '\.tmp-' && fail "temporary files left: $(ls | grep '\.tmp-')"; return 0; }

# ---- help: dswa --help, dswa help X, dswa X --help / -h (same text), into /dev/full ----------
run 0 "$dswa" --help && grep -q '^usage: dswa <subcommand>' out || fail "dswa --help"
run 0 "$dswa" help && grep -q '^usage: dswa <subcommand>' out || fail "dswa help"
full "$dswa" --help
run 0 "$dswa" --version && grep -q '^dswa ' out || fail "dswa --version"
full "$dswa" --version
for c in bench check aot ptx-fit help version; do
    run 0 "$dswa" --help && grep -Eq "^  $c +[a-z]" out || fail "dswa --help does not list $c"
    run 0 "$dswa" help "$c" && cp out help1 && grep -q "^usage: dswa $c" help1 || fail "dswa help $c"
    run 0 "$dswa" "$c" --help && cmp -s out help1 || fail "dswa $c --help differs from dswa help $c"
    run 0 "$dswa" "$c" -h && cmp -s out help1 || fail "dswa $c -h differs from dswa help $c"
    full "$dswa" "$c" --help
    full "$dswa" help "$c"
done
run 2 "$dswa" && one_line "missing subcommand"
run 2 "$dswa" nosuch && one_line "unknown subcommand 'nosuch'"
run 2 "$dswa" help nosuch && one_line "unknown subcommand"

# ---- check ----------------------------------------------------------------------------------
run 0 "$dswa" check --backend cpu --window 5 && grep -q 'windows set to 5/5' out &&
    grep -q '^check: [0-9]* passed, 0 failed' out || fail "check --window 5: $(tail -n 3 out)"
run 0 "$dswa" check --backend cpu --window-left 0 --window-right 9 --seed 7 &&
    grep -q 'windows set to 0/9' out || fail "check --window-left/--window-right"
full "$dswa" check --backend cpu --window 2
# without a usable GPU: one line saying why, never "driver version is insufficient" for a
# machine that has no driver at all
checks=$((checks+1))
"$dswa" check --backend cuda --window 0 >out 2>err; got=$?
if [ $got -ne 0 ]; then
    [ $got -eq 1 ] && [ "$(wc -l <err)" -eq 1 ] && ! grep -q insufficient err ||
        fail "check --backend cuda without a GPU -> exit $got: $(cat err)"
fi
run 2 "$dswa" check --window 3 --window-left 2 --window-right 2 && one_line "exclude each other"
run 2 "$dswa" check --window-left 2 && one_line "go together"
run 2 "$dswa" check --seed 1 --seed 2 && one_line "--seed given twice"
run 2 "$dswa" check --window -1 && one_line "--window: '-1' is not an integer from 0 to 2\\^31 - 1"
# an empty value names nothing: refused by the shared option parser, naming the option
run 2 "$dswa" check --seed '' && one_line "option --seed: the value is empty"
run 2 "$dswa" check --window= && one_line "option --window: the value is empty"

# ---- bench: its start, and its JSON into a full disk ------------------------------------------
run 0 "$dswa" bench --backend cpu --L 1 --dtype f32 --v shared --repeats 1 --warmup 0 ||
    fail "bench start"
full_last "$dswa" bench --backend cpu --L 1 --dtype f32 --v shared --repeats 1 --warmup 0 --json
# the JSON records the commit dswa was built from, and bench-table.py shows it
run 0 "$dswa" bench --backend cpu --N 100 --dtype f32 --v shared --repeats 1 --warmup 0 --json &&
    cp out bench.json && grep -Eq '^  "commit": "[^"]+",$' bench.json ||
    fail "bench --json records no commit: $(grep commit bench.json)"
if command -v python3 >/dev/null; then
    commit=$(sed -n 's/^  "commit": "\(.*\)",$/\1/p' bench.json)
    run 0 python3 "$repo/bench/profiling/bench-table.py" bench.json &&
        head -n 1 out | grep -Fq "commit $commit" || fail "bench-table.py: $(head -n 1 out)"
    # readme_table.py (a GPU run's table: the backend relabelled) takes the JSON's commit;
    # --commit overrides it; without either it refuses
    sed 's/^  "backend": "cpu",$/  "backend": "cuda",/' bench.json >gpu.json
    run 0 python3 "$repo/bench/readme_table.py" gpu.json && grep -Fq "commit \`$commit\`" out ||
        fail "readme_table.py: not commit $commit: $(grep -o 'commit [^,]*' out)"
    run 0 python3 "$repo/bench/readme_table.py" gpu.json --commit 0123abc &&
        grep -Fq 'commit `0123abc`' out || fail "readme_table.py --commit: $(grep -o 'commit [^,]*' out)"
    grep -v '^  "commit": ' gpu.json >nocommit.json
    run 1 python3 "$repo/bench/readme_table.py" nocommit.json && one_line "no commit"
fi
# bench's windows are read as check's and aot's (one parser, one message)
run 2 "$dswa" bench --backend cpu --window -1 && one_line "--window: '-1' is not an integer from 0 to 2\\^31 - 1"
run 2 "$dswa" bench --backend cpu --window-left 1 && one_line "go together"
run 2 "$dswa" bench --backend cpu --window 1 --window-right 1 && one_line "exclude each other"
# --math other than default without f32 among the dtypes cannot be honoured (aot's message)
run 2 "$dswa" bench --backend cpu --N 100 --dtype f16 --math fp32 && one_line "--math fp32 applies to f32 only"
run 2 "$dswa" bench --backend cpu --N 100 --dtype f16,bf16 --math tf32 && one_line "--math tf32 applies to f32 only"
run 2 "$dswa" bench --backend cpu --N= && one_line "option --N: the value is empty"

# ---- bench --op samel (the fused SAME-L block): options, refusals, CPU rows, the join ------
run 2 "$dswa" bench --op nosuch && one_line "--op: 'nosuch' is not diff_swa or samel"
run 2 "$dswa" bench --op samel --op samel && one_line "--op given twice"
run 2 "$dswa" bench --op samel --v shared && one_line "--v applies to --op diff_swa only"
run 2 "$dswa" bench --op samel --cold none && one_line "--cold applies to --op diff_swa only"
run 2 "$dswa" bench --op samel --dtype bf16 --math fp32 && one_line "--math fp32 applies to f32 only"
# CPU rows: every dtype, checked against the float64 reference (exit 1 on a failed check);
# each run measures the host's copy bandwidth first (seconds): few runs
samel="bench --op samel --backend cpu --N 40 --repeats 1 --warmup 0"
run 0 "$dswa" $samel && [ "$(grep -Ec '^-  *40  (f32|f16|bf16) .* ok$' out)" -eq 3 ] ||
    fail "bench --op samel rows: $(cat out)"
run 0 "$dswa" $samel --dtype f32 --math fp32 --window-left 3 --window-right 30 &&
    grep -Eq '^-  *40  f32 .* ok$' out || fail "bench --op samel --math fp32, windows 3/30: $(tail -n 2 out)"
run 0 "$dswa" $samel --json && cp out samel.json && grep -q '"op": "samel"' samel.json ||
    fail "bench --op samel --json: $(head -c 600 out)"
if command -v python3 >/dev/null; then
    # bench/readme_table.py --compare: the comparator's JSON (bench/compare.py --op samel)
    # joined to the bench's rows by N and dtype, checked against the bench's problem and device
    compare_file() {   # compare_file FILE DEVICE WINDOW_LEFT TOOL ROWS
        printf '{"tool": "%s", "machine": {"device": "%s", "date": "d", "torch": "t"},\n' "$4" "$2" >"$1"
        printf ' "config": {"B": 1, "H": 24, "D": 64, "window_left": %s, "window_right": 17, "rot_dims": 32,\n' "$3" >>"$1"
        printf '  "math": "default", "graph_calls": 20}, "rows": [%s]}\n' "$5" >>"$1"
    }
    ok_rows='{"N": 40, "dtype": "f32", "prologue_ms": 3.0, "op_ms": 1.0, "both_ms": 4.0, "rel_err": 1e-6, "ok": true, "error": null},
 {"N": 40, "dtype": "bf16", "both_ms": 2.0, "rel_err": 0.5, "ok": false, "error": null},
 {"N": 40, "dtype": "f16", "error": "skipped: time budget spent"}'
    tool="bench/compare.py --op samel"
    compare_file p.json cpu 17 "$tool" "$ok_rows"
    # the ratio is both_ms / time_ms; a failed or missing comparator row gives none, and says why
    checks=$((checks+1))
    python3 - "$repo/bench" samel.json p.json <<'PY' || fail "readme_table.join_samel: the rows' ratios"
import json, sys
sys.path.insert(0, sys.argv[1])
from readme_table import join_samel
bench = json.load(open(sys.argv[2]))
join_samel(bench, json.load(open(sys.argv[3])), "p.json")
assert bench["prologue_op"] == {"file": "p.json", "device": "cpu", "date": "d", "torch": "t"}
rows = {r["dtype"]: r for r in bench["rows"]}
f32, bf16, f16 = rows["f32"], rows["bf16"], rows["f16"]
assert f32["status"] == "ok" and f32["prologue_op_ms"] == 4.0, f32
assert abs(f32["vs_prologue_op"] - 4.0 / f32["time_ms"]) < 1e-4 * f32["vs_prologue_op"], f32
assert bf16["vs_prologue_op"] is None and "failed its check" in bf16["prologue_op_message"], bf16
assert f16["vs_prologue_op"] is None and "time budget" in f16["prologue_op_message"], f16
PY
    # the fused block's README table (a GPU run's: the backend relabelled, the comparator on the
    # bench's device): both ratios per row; without --compare the ratio column says why
    sed 's/^  "backend": "cpu",$/  "backend": "cuda",/' samel.json >samel-gpu.json
    device=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"])' samel.json)
    compare_file g.json "$device" 17 "$tool" "$ok_rows"
    run 0 python3 "$repo/bench/readme_table.py" samel-gpu.json --compare g.json &&
        grep -q '^| dtype | L | fused, ms | copy, ms | % copy (a) | prologue / op / both, ms | x (b) | goals |$' out &&
        grep -Eq '^\| f32 \(TF32\) \| N = 40 \| .* \| 3\.000 / 1\.000 / 4\.000 \| [0-9.]+x \| ' out ||
        fail "readme_table.py, samel: $(cat out)"
    run 0 python3 "$repo/bench/readme_table.py" samel-gpu.json &&
        grep -q '^Prologue + op: no comparator: give --compare FILE' out ||
        fail "readme_table.py, samel without --compare: $(cat out)"
    run 3 python3 "$repo/bench/readme_table.py" samel.json && one_line "ran on the CPU backend"
    printf 'a\n<!-- perf-samel:begin -->\nold\n<!-- perf-samel:end -->\nb\n' >R.md
    run 0 python3 "$repo/bench/readme_table.py" samel-gpu.json --compare g.json --readme R.md &&
        ! grep -q '^old$' R.md && grep -q '^| bf16 | N = 40 |' R.md ||
        fail "readme_table.py --readme, samel: $(cat R.md)"
    # a comparator file that does not fit the bench: refused, naming the file and why
    echo '{"tool": ' >bad.json
    run 1 python3 "$repo/bench/readme_table.py" samel.json --compare bad.json && one_line "^readme_table: bad.json: "
    compare_file q.json cpu 17 "bench/compare.py" "$ok_rows"
    run 1 python3 "$repo/bench/readme_table.py" samel.json --compare q.json &&
        one_line "--compare q.json: \"tool\" is not \"bench/compare.py --op samel\""
    compare_file q.json cpu 5 "$tool" "$ok_rows"
    run 1 python3 "$repo/bench/readme_table.py" samel.json --compare q.json &&
        one_line "config.window_left is 5, the bench's is 17"
    compare_file q.json "NVIDIA H200" 17 "$tool" "$ok_rows"
    run 1 python3 "$repo/bench/readme_table.py" samel-gpu.json --compare q.json &&
        one_line "ran on 'NVIDIA H200', the bench on"
    compare_file q.json cpu 17 "$tool" '{"N": 40, "dtype": "f64", "both_ms": 1}'
    run 1 python3 "$repo/bench/readme_table.py" samel.json --compare q.json && one_line "rows\[0\]: N or dtype"
    run 1 python3 "$repo/bench/readme_table.py" gpu.json --compare p.json &&
        one_line "the fused block's comparator; this bench is the op's"
fi
# ---- end of bench --op samel ----------------------------------------------------------------

# ---- bench --backward (the op's and the fused block's backward): refusals, CPU rows, tables ----
# refused before anything runs: bad usage (2), one line naming the option, nothing on stdout
for bad in "--backward --backward:--backward given twice" \
           "--backward --cold none:--cold applies to the forward's rows only" \
           "--backward --op samel --cold all:--cold applies to --op diff_swa only" \
           "--backward --dtype f64:--dtype: 'f64' is not a list" \
           "--backward --op samel --v full:--v applies to --op diff_swa only" \
           "--backward=1:option --backward" \
           "--backward --dtype bf16 --math fp32:--math fp32 applies to f32 only"; do
    run 2 "$dswa" bench --backend cpu ${bad%%:*} && one_line "${bad#*:}"
    checks=$((checks+1)); [ ! -s out ] || fail "bench ${bad%%:*}: wrote to stdout: $(head -c 200 out)"
done
# CPU rows: every dtype and V layout (the op), every dtype (the fused block); the op's
# gradients checked against the float64 reference (rel_err), every gradient written
bwd="bench --backend cpu --backward --N 40 --repeats 1 --warmup 0"
run 0 "$dswa" $bwd && grep -q '^L  *N  dtype  V  *bwd_ms  spread  floor_ms  %floor  GB/s  fwd+bwd_ms' out &&
    [ "$(grep -Ec '^-  *40  (f32|f16|bf16) +(2H|shared) .* [0-9.]+e-[0-9]+  ok$' out)" -eq 6 ] ||
    fail "bench --backward rows: $(cat out)"
run 0 "$dswa" $bwd --op samel --dtype f32,bf16 &&
    [ "$(grep -Ec '^-  *40  (f32|bf16) .* ok$' out)" -eq 2 ] || fail "bench --op samel --backward rows: $(cat out)"
run 0 "$dswa" $bwd --dtype f32 --v shared --json && cp out bwd.json &&
    grep -q '^  "pass": "backward",$' bwd.json && grep -q '"goals": {"pct_of_copy": 70}' bwd.json &&
    grep -q '"fwd_bwd_ms": [0-9]' bwd.json || fail "bench --backward --json: $(head -c 900 bwd.json)"
# the forward's document is as it was: no "pass"
checks=$((checks+1)); grep -q '"pass"' samel.json bench.json && fail "the forward's JSON has a \"pass\""
run 0 "$dswa" $bwd --op samel --dtype f32,bf16 --json && cp out sbwd.json &&
    grep -q '"vs_flex_fwd_bwd": 10' sbwd.json || fail "bench --op samel --backward --json: $(head -c 900 sbwd.json)"
# on the GPU backend without a GPU: one line saying why (with one: the rows run)
checks=$((checks+1))
"$dswa" bench --backend cuda --backward --N 40 --dtype f32 --repeats 1 --warmup 0 >out 2>err; got=$?
if [ $got -ne 0 ]; then
    [ $got -eq 1 ] && [ "$(wc -l <err)" -eq 1 ] || fail "bench --backward --backend cuda -> exit $got: $(cat err)"
    echo "skipped: bench --backward on the GPU ($(cat err))"
fi
if command -v python3 >/dev/null; then
    # the backward's README tables (GPU runs' JSON: the backend relabelled); a CPU run's: exit 3
    sed 's/^  "backend": "cpu",$/  "backend": "cuda",/' bwd.json >bwd-gpu.json
    sed 's/^  "backend": "cpu",$/  "backend": "cuda",/' sbwd.json >sbwd-gpu.json
    run 0 python3 "$repo/bench/readme_table.py" bwd-gpu.json &&
        grep -q '^| dtype | V | L | bwd, ms | copy, ms | % copy | fwd+bwd, ms | goal |$' out &&
        grep -Eq '^\| f32 \(TF32\) \| shared \| N = 40 \| [0-9.]+ \|' out || fail "readme_table.py, backward: $(cat out)"
    run 3 python3 "$repo/bench/readme_table.py" bwd.json && one_line "ran on the CPU backend"
    run 1 python3 "$repo/bench/readme_table.py" bwd-gpu.json --compare p.json &&
        one_line "the op's backward has no comparator file"
    # the fused block's: the training comparators joined by N and dtype (x = theirs / fwd+bwd)
    train_file() {   # train_file FILE DEVICE TOOL ROWS
        printf '{"tool": "%s", "machine": {"device": "%s", "date": "d", "torch": "t"},\n' "$3" "$2" >"$1"
        printf ' "config": {"B": 1, "H": 24, "D": 64, "window_left": 17, "window_right": 17, "rot_dims": 32,\n' >>"$1"
        printf '  "math": "default", "graph_calls": 20}, "rows": [%s]}\n' "$4" >>"$1"
    }
    train_rows='{"N": 40, "dtype": "f32", "flex": {"fwd_ms": 1.0, "fwd_bwd_ms": 5000.0, "fwd_ok": true, "ok": true},
 "chunked": {"fwd_ms": 4.0, "fwd_bwd_ms": 3000.0, "fwd_ok": true, "ok": true},
 "dswa": {"fwd_ms": 1.0, "fwd_bwd_ms": null, "fwd_ok": true, "ok": false, "error": "RuntimeError: no autograd"}},
 {"N": 40, "dtype": "bf16", "flex": {"error": "skipped: time budget spent"}, "chunked": {}, "dswa": {}}'
    train="bench/compare.py --op samel --backward"
    device=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"])' sbwd.json)
    train_file t.json "$device" "$train" "$train_rows"
    run 0 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare t.json &&
        grep -q '^| dtype | L | bwd, ms | copy, ms | % copy | fwd+bwd, ms | x Flex | x chunked | fwd x chunked | goals |$' out &&
        grep -Eq '^\| f32 \(TF32\) \| N = 40 \| .* \| [0-9.]+x \| [0-9.]+x \| 4\.0x \| ' out &&
        grep -q '^Training comparators: dswa: RuntimeError: no autograd\.$' out &&
        grep -q '^Training comparators: flex: skipped: time budget spent\.$' out ||
        fail "readme_table.py, samel backward: $(cat out)"
    checks=$((checks+1))
    python3 - "$repo/bench" sbwd-gpu.json t.json <<'PY' || fail "readme_table.join_training: the rows' ratios"
import json, sys
sys.path.insert(0, sys.argv[1])
from readme_table import join_training
bench = json.load(open(sys.argv[2]))
join_training(bench, json.load(open(sys.argv[3])), "t.json")
rows = {r["dtype"]: r for r in bench["rows"]}
f32, bf16 = rows["f32"], rows["bf16"]
assert abs(f32["vs_flex"] - 5000.0 / f32["fwd_bwd_ms"]) < 1e-9 * f32["vs_flex"], f32
assert abs(f32["vs_chunked"] - 3000.0 / f32["fwd_bwd_ms"]) < 1e-9 * f32["vs_chunked"], f32
assert f32["fwd_vs_chunked"] == 4.0 and f32["dswa_torch_fwd_bwd_ms"] is None, f32
assert bf16["vs_flex"] is None and bf16["vs_chunked"] is None, bf16
PY
    run 0 python3 "$repo/bench/readme_table.py" sbwd-gpu.json &&
        grep -q '^Training comparators: no comparator: give --compare FILE' out ||
        fail "readme_table.py, samel backward without --compare: $(cat out)"
    printf 'a\n<!-- perf-samel-backward:begin -->\nold\n<!-- perf-samel-backward:end -->\nb\n' >RB.md
    run 0 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare t.json --readme RB.md &&
        ! grep -q '^old$' RB.md && grep -q '^| bf16 | N = 40 |' RB.md || fail "readme_table.py --readme, samel backward: $(cat RB.md)"
    # one file per dtype: each checked, their rows joined; a row in two files is refused
    train_file t1.json "$device" "$train" "${train_rows%%,
 \{\"N\": 40, \"dtype\": \"bf16\"*}"
    train_file t2.json "$device" "$train" '{"N": 40, "dtype": "bf16", "flex": {"error": "skipped: time budget spent"}, "chunked": {}, "dswa": {}}'
    run 0 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare t1.json --compare t2.json &&
        grep -Eq '^\| f32 \(TF32\) \| N = 40 \| .* \| [0-9.]+x \| [0-9.]+x \| 4\.0x \| ' out &&
        grep -q '^Training comparators: flex: skipped: time budget spent\.$' out ||
        fail "readme_table.py, two --compare files: $(cat out)"
    run 1 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare t1.json --compare t.json &&
        one_line "--compare t.json: N = 40 f32 is also in t1.json"
    run 1 python3 "$repo/bench/readme_table.py" gpu.json --compare p.json --compare p.json &&
        one_line "--compare is given once for the op's tables"
    # the forward's comparator with the backward's bench, and the other way round; the wrong
    # device; refused, naming the file and why
    run 1 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare g.json &&
        one_line "--compare g.json: the fused block's forward comparator; this bench is its backward's"
    run 1 python3 "$repo/bench/readme_table.py" samel-gpu.json --compare t.json &&
        one_line "--compare t.json: the fused block's training comparators; this bench is its forward's"
    train_file q.json "NVIDIA H200" "$train" "$train_rows"
    run 1 python3 "$repo/bench/readme_table.py" sbwd-gpu.json --compare q.json &&
        one_line "ran on 'NVIDIA H200', the bench on"
    # bench/compare.py's arguments (checked before torch is imported)
    run 2 python3 "$repo/bench/compare.py" --backward &&
        grep -q 'error: --backward applies to --op samel only' err || fail "compare.py --backward: $(cat err)"
    run 2 python3 "$repo/bench/compare.py" --op block --backward &&
        grep -q 'not --op block' err || fail "compare.py --op block --backward: $(cat err)"
    run 2 python3 "$repo/bench/compare.py" --op samel --backward --L 0 &&
        grep -q 'error: --L: every L must be a positive integer, not 0' err || fail "compare.py --L 0: $(cat err)"
    run 2 python3 "$repo/bench/compare.py" --op samel --backward --budget 0 &&
        grep -q 'error: --budget: 0 is not a positive number' err || fail "compare.py --budget 0: $(cat err)"
    run 1 python3 "$repo/bench/compare.py" --op samel --backward --dtypes f64 &&
        one_line "--dtypes: 'f64' is not one of f32, bf16, f16"
fi
# ---- end of bench --backward -------------------------------------------------------------------

# ---- aot ------------------------------------------------------------------------------------
# an empty -o or --meta names no file: bad usage, before anything is exported
run 2 "$dswa" aot --arch sm_90 --dtype f16 -o '' && one_line "option -o: the value is empty"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --meta= && one_line "option --meta: the value is empty"
if "$dswa" aot --arch sm_90 --dtype f16 >/dev/null 2>err; then
    # the targets in the help (from the library) are exported, each with the listed PTX ISA
    run 0 "$dswa" aot --help && targets=$(sed -n '/^  --arch/{n;n;p;}' out | tr -d ' ') &&
        [ -n "$targets" ] || fail "aot --help lists no targets"
    for t in $(echo "$targets" | tr ',' ' '); do
        arch=${t%%:*} isa=${t#*:}
        run 0 "$dswa" aot --arch "$arch" --dtype f16 --meta - &&
            grep -q "\"target\": \"$arch\"" out && grep -q "\"ptx_isa_min\": \"$isa\"" out ||
            fail "aot --help says $arch: $isa; the export: $(grep -E '"(target|ptx_isa_min)"' out | tr -d '\n')"
    done
    run 2 "$dswa" aot --dtype f16 &&
        one_line "--arch is required \($(echo "$targets" | sed 's/:[0-9.]*//g; s/,/, /g')\)"
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --window 17 && cp out stdout.ptx
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --window 17 -o k.ptx --meta k.json &&
        cmp -s k.ptx stdout.ptx && grep -q '"ptx_file": "k.ptx"' k.json || fail "aot -o --meta"
    # the same file under two names: refused, nothing written
    for m in s.ptx ./s.ptx "$tmp/s.ptx"; do
        run 2 "$dswa" aot --arch sm_90 --dtype f16 -o s.ptx --meta "$m" && one_line "same file"
        absent s.ptx
    done
    echo old >a; ln -s a b; ln a c
    for m in b c; do
        run 2 "$dswa" aot --arch sm_90 --dtype f16 -o a --meta $m && one_line "same file"
        checks=$((checks+1)); [ "$(cat a)" = old ] || fail "a was written"
    done
    run 2 "$dswa" aot --arch sm_90 --dtype f16 -o - --meta - && one_line "same output"
    # all or nothing: a failed --meta leaves no PTX (and an old one as it was)
    run 1 "$dswa" aot --arch sm_90 --dtype f16 -o x.ptx --meta nodir/x.json && one_line "no output written"
    absent x.ptx; no_temps
    echo old >y.ptx
    run 1 "$dswa" aot --arch sm_90 --dtype f16 -o y.ptx --meta /dev/full && one_line "/dev/full"
    checks=$((checks+1)); [ "$(cat y.ptx)" = old ] || fail "y.ptx was replaced"; no_temps
    run 1 "$dswa" aot --arch sm_90 --dtype f16 -o nodir/z.ptx --meta z.json && one_line "no output written"
    absent z.json; no_temps
    full "$dswa" aot --arch sm_90 --dtype f16
    full "$dswa" aot --arch sm_90 --dtype f16 -o w.ptx --meta -
    absent w.ptx; no_temps
    # what cannot be honoured, and repeated options
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --math fp32 && one_line "f32 only"
    run 2 "$dswa" aot --arch sm_90 --dtype bf16 --math tf32 && one_line "f32 only"
    run 0 "$dswa" aot --arch sm_90 --dtype bf16 --math default -o /dev/null
    run 2 "$dswa" aot --arch sm_90 --arch sm_80 --dtype f16 && one_line "--arch given twice"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --window 3 --window 4 && one_line "--window given twice"
    run 2 "$dswa" aot --arch sm_90 --dtype f64 && one_line "--dtype: .*f64.*f32, f16 or bf16"
    run 2 "$dswa" aot --arch sm_90 --dtype f32 --math fast && one_line "--math: .*fast"
else
    echo "skipped: aot (this build has no AOT export: $(head -c 200 err))"
fi

# ---- aot --op samel (the fused SAME-L block's export) ----------------------------------------
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op nosuch && one_line "--op: 'nosuch' is not diff_swa or samel"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --op samel && one_line "--op given twice"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --rot-dims 16 && one_line "need --op samel"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --window 17 --shape 1,64,2 --pos-offset 3 && one_line "need --op samel"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --pos-offset 3 && one_line "need --shape"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --shared-v &&
    one_line "--shared-v: the fused block's V"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --rot-dims x && one_line "--rot-dims: 'x' is not an integer"
run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --q-alpha nan &&
    one_line "--q-alpha nan: must be a number"
if "$dswa" aot --arch sm_90 --dtype f16 --op samel >/dev/null 2>err; then
    # the library's refusals of the fused block's values: bad usage, naming the field
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --rot-dims 7 && one_line "rot_dims = 7"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --rope-base 0 &&
        one_line "rope_base = 0"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --pos-offset 2147483647 &&
        one_line "pos_offset = 2147483647"
    # which kernel: band for SAME-L's window and rot_dims, scalar for any window or other rot_dims
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --meta - -o /dev/null &&
        grep -q '^  "op": "samel",$' out && grep -q '"kernel": "dswa_samel_f16"' out &&
        grep -q '"family": "band"' out && grep -q '"rot_dims": 32,' out && grep -q '"num_extras": 48,' out ||
        fail "aot --op samel --window 17: $(head -c 400 out)"
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --op samel --meta - -o /dev/null &&
        grep -q '"kernel": "dswa_samel_scalar_f16"' out && grep -q '"window_left": null' out ||
        fail "aot --op samel without windows: $(head -c 400 out)"
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --rot-dims 8 --meta - -o /dev/null &&
        grep -q '"kernel": "dswa_samel_scalar_f16"' out && grep -q '"rot_dims": 8,' out ||
        fail "aot --op samel --rot-dims 8: $(head -c 400 out)"
    run 0 "$dswa" aot --arch sm_90 --dtype f16 --window 17 --meta - -o /dev/null &&
        grep -q '^  "op": "diff_swa",$' out && ! grep -q '"rot_dims"' out || fail "aot (the op): $(head -c 200 out)"
    # --shape: the values and the grid; the PTX is the same to stdout and to -o
    run 0 "$dswa" aot --arch sm_90 --dtype bf16 --op samel --window 17 && cp out samel.ptx &&
        grep -q '^\.visible \.entry dswa_samel_bf16(' samel.ptx || fail "aot --op samel to stdout"
    run 0 "$dswa" aot --arch sm_90 --dtype bf16 --op samel --window 17 --shape 2,100,3 --pos-offset 7 \
        --q-alpha 0.5 -o s.ptx --meta s.json && cmp -s s.ptx samel.ptx &&
        grep -q '"name": "pos_offset", "kind": "int32", "expr": "POS", "value": 7,' s.json &&
        grep -q '"name": "q_alpha_bits", "kind": "int32", "expr": "float_bits(q_alpha)", "value": 1056964608,' s.json &&
        grep -q '"name": "x_sn", "kind": "int32", "expr": "5 \* H \* D", "value": 960,' s.json &&
        grep -q '"grid_values": \[2, 3, 2\]' s.json || fail "aot --op samel --shape: $(grep -E 'pos_offset|alpha|x_sn|grid' s.json)"
    # the model's own RoPE frequencies: the extras carry their bits, the problem lists them
    freqs=1,0.5,0.25,0.125,0.0625,0.03125,0.015625,0.0078125,4,3,2,1.5,0.75,0.375,1e-3,0
    run 0 "$dswa" aot --arch sm_90 --dtype bf16 --op samel --window 17 --shape 2,100,3 --rope-freq $freqs \
        --meta - -o /dev/null &&
        grep -q '"name": "freq1", "kind": "int32", "expr": "float_bits(freq1)", "value": 1056964608,' out &&
        grep -q '"name": "freq16", "kind": "int32", "expr": "float_bits(freq16)", "value": 0,' out &&
        grep -q '"rope_freq": \[1, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 4, 3, 2, 1.5, 0.75, 0.375, 0.00100000005, 0\]' out ||
        fail "aot --op samel --rope-freq: $(grep -E 'freq1"|freq16"|rope_freq' out)"
    run 0 "$dswa" aot --arch sm_90 --dtype bf16 --op samel --window 17 --shape 2,100,3 --meta - -o /dev/null &&
        grep -q '"name": "freq1", "kind": "int32", "expr": "float_bits(freq1)", "value": 1058010522,' out ||
        fail "aot --op samel, base 10000's freq1: $(grep -E 'freq1"' out)"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --rope-freq 1,2,3 &&
        one_line "--rope-freq 1,2,3: must be rot_dims / 2 = 16 comma-separated numbers"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --rot-dims 4 --rope-freq 1,x &&
        one_line "--rope-freq: 'x' is not a number"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --window 17 --shape 1,64,2 --rope-base 5 --rope-freq 1 &&
        one_line "give one"
    run 2 "$dswa" aot --arch sm_90 --dtype f16 --op samel --rope-freq 1 && one_line "need --shape"
    # all or nothing, and a full disk
    run 1 "$dswa" aot --arch sm_90 --dtype f16 --op samel -o x2.ptx --meta nodir/x.json && one_line "no output written"
    absent x2.ptx; no_temps
    full "$dswa" aot --arch sm_90 --dtype f16 --op samel
else
    echo "skipped: aot --op samel (this build has no AOT export: $(head -c 200 err))"
fi
# ---- end of aot --op samel --------------------------------------------------------------------

# ---- ptx-fit --------------------------------------------------------------------------------
tri=$fixtures/triton_mma_sm90a.ptx
run 0 "$dswa" ptx-fit "$tri" --keep 5 -o fit.ptx && grep -q '^\.target sm_90$' fit.ptx &&
    grep -q 'removed (never reached by the body)' out || fail "ptx-fit"
run 0 "$dswa" ptx-fit "$tri" --keep 5 && cmp -s out fit.ptx || fail "ptx-fit to stdout"
full_last "$dswa" ptx-fit "$tri" --keep 5
full "$dswa" ptx-fit "$tri" --keep 5 -o lost.ptx   # the report is lost: no file either
absent lost.ptx; no_temps
run 0 "$dswa" ptx-fit - --keep 5 <"$tri" && cmp -s out fit.ptx || fail "ptx-fit from stdin"
# not text, or too big: stops at once
for dev in /dev/zero /dev/urandom; do
    checks=$((checks+1))
    timeout 10 "$dswa" ptx-fit $dev --keep 1 -o dev.ptx >out 2>err; got=$?
    [ $got -eq 2 ] || fail "ptx-fit $dev -> exit $got, expected 2"
    one_line "not text"; absent dev.ptx
done
printf '.version 8.0\n.target sm_80\n\001\n' | run 2 "$dswa" ptx-fit - --keep 0 && one_line "byte 0x01"
# an instruction newer than --arch, with and without --verify
run 1 "$dswa" ptx-fit "$tri" --keep 5 --arch sm_75 -o old.ptx && one_line "needs sm_80 or newer"
absent old.ptx
run 0 "$dswa" ptx-fit "$tri" --keep 5 --arch sm_80 -o old.ptx && grep -q 'lowered' out ||
    fail "ptx-fit --arch sm_80"
# a parameter's address taken: the scratch parameters may be read through it
run 1 "$dswa" ptx-fit "$fixtures/param_address.ptx" --keep 4 -o pa.ptx &&
    one_line "takes the address of parameter 'addr_kernel_param_0'"
absent pa.ptx
run 2 "$dswa" ptx-fit "$tri" --keep 5 --keep 4 && one_line "--keep given twice"
run 2 "$dswa" ptx-fit "$tri" --keep 5 -o a.ptx --output b.ptx && one_line "same option"
run 2 "$dswa" ptx-fit "$tri" && one_line "missing --keep"
run 2 "$dswa" ptx-fit "$tri" --keep 5 -o '' && one_line "option -o: the value is empty"

echo "test_cli: $checks checks, $failures failed"
[ $failures -eq 0 ]
