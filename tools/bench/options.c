/* `dswa bench`: its help and its options. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <string.h>

#include "internal.h"

static const char bench_help_text[] =
    "usage: dswa bench [options]\n"
    "\n"
    "The main job: times the forward pass at SAME-L shapes (B=1, H=24, D=64, WL=WR=17 unless\n"
    "--window says otherwise, scale=1/8, lambda=1, N = 17*L) for each dtype and V layout.\n"
    "On the GPU each row is timed as an engine runs it: a CUDA graph of 20 back-to-back calls\n"
    "on the same buffers, replayed (median, min and max over the replays, per call); beside it\n"
    "the fastest same-size copy, the same bytes read + written (dswa_min_bytes), the better of\n"
    "cudaMemcpyAsync and a copy kernel of the tool's own over several shapes, in the same kind\n"
    "of graph. Columns:\n"
    "  time_ms  median per call over the graph replays (GPU) or the calls (CPU)\n"
    "  spread   (slowest - fastest) / median of those; a GPU row above 10 % is flagged\n"
    "           erratic (rerun it)\n"
    "  copy_ms  (GPU) the fastest same-size copy, per copy\n"
    "  %copy    copy_ms / time_ms: 100 % is a copy's speed\n"
    "  floor_ms dswa_min_bytes / copy bandwidth (a 2 GiB copy), the bandwidth floor\n"
    "  %floor   floor_ms / time_ms, i.e. GB/s as a percentage of the copy bandwidth\n"
    "  GB/s     dswa_min_bytes / time (Q, K for 2H heads; V for 2H heads or H when shared; out)\n"
    "  call_ms  (GPU) median of plain calls each between two events: includes the host's launch\n"
    "  GFLOP/s  (CPU) dswa_useful_flops / time, and per core\n"
    "  rel_err  relative Frobenius error against the float64 reference (same inputs, in the\n"
    "           benchmark's dtype) on sampled query rows, all heads\n"
    "  check    ok, or FAIL when rel_err is above the tolerance or an output was left unwritten\n"
    "A second table (GPU) gives the cold rows: the calls, and the copies, rotate over enough\n"
    "buffer sets that the data of one use has left the L2 before the next (more than 2 x L2 in\n"
    "between).\n"
    "\n"
    "--op samel times the fused SAME-L block instead (dswa_samel_forward_*: DyT, RoPE on 32\n"
    "dims and the op with V shared, from the packed projection (B, N, 5*H*D) to (B, N, H*D)),\n"
    "one row per shape and dtype, in the same kind of graph, beside the same-size copy of its\n"
    "bytes (dswa_samel_min_bytes: the input read once, the output written once); its check is\n"
    "the float64 reference of the block on the sampled rows (DyT and RoPE in double, rounded to\n"
    "the dtype as dswa.h says, then the op's reference). On the GPU the block's goal (a), its\n"
    "%copy, heads the table; a row below it says so. Goal (b), x faster than the compiled\n"
    "PyTorch prologue + op, is judged by bench/readme_table.py BENCH.json --compare FILE from\n"
    "this --json and bench/compare.py --op samel's FILE.\n"
    "\n"
    "--backward times the backward instead (dswa_backward_*, or with --op samel\n"
    "dswa_samel_backward_*), for the same shapes, dtypes and V layouts: a graph of back-to-back\n"
    "backward calls (random dout; the workspace allocated once, outside the graph) beside the\n"
    "same-size copy of the backward's minimum bytes (dswa_backward_min_bytes: q, k, v and dout\n"
    "read, dq, dk and dv written; dswa_samel_backward_min_bytes: the packed input and dout\n"
    "read, its gradient written), and a forward then a backward in the same kind of graph\n"
    "(fwd+bwd_ms). Checked: every gradient element written and, up to N = 32768, the op's\n"
    "gradients against dswa_reference_backward and the fused block's (GPU) against\n"
    "dswa_samel_backward_cpu. Goals on the GPU: %copy >= 70 %; the fused block's fwd+bwd\n"
    "against the training comparators: bench/readme_table.py BENCH.json --compare FILE with\n"
    "bench/compare.py --op samel --backward's FILE.\n"
    "\n"
    "options:\n"
    "  --op diff_swa|samel  the op (default diff_swa), or the fused SAME-L block\n"
    "  --backend auto|cuda|cpu  auto (default): cuda when a device is usable, else cpu\n"
    "  --L LIST        latent frames, comma-separated (default 256,1292,4096; the CPU\n"
    "                  backend's --backward rows: 256); N = 17*L;\n"
    "                  may be repeated (the lists add up)\n"
    "  --N LIST        sequence lengths instead of (or besides) --L; may be repeated\n"
    "  --dtype LIST    f32,f16,bf16 or all (default all)\n"
    "  --math M        default|tf32|fp32 for f32 (default: default, i.e. TF32 on the GPU)\n"
    "  --v both|full|shared  V as 2H heads (full), shared (pair stride 0, H heads), or both\n"
    "                  (default both); not with --op samel (its V is shared)\n"
    "  --window W      window of W positions each side (default 17)\n"
    "  --window-left L, --window-right R   windows of each side (together, instead of\n"
    "                  --window)\n"
    "  --cold auto|all|none  rows also timed cold (GPU); auto (default): L <= 256, or rows\n"
    "                  whose bytes are under 8 x L2; not with --op samel or --backward (no\n"
    "                  cold rows)\n"
    "  --backward      the backward's rows instead of the forward's (above)\n"
    "  --repeats R     GPU: timed graph replays per row (default 10); CPU: calls per row\n"
    "                  (default: at least 10 calls and 2 s; at most 200, or 5 once 30 s\n"
    "                  have passed)\n"
    "  --warmup W      untimed graph replays (GPU, default 2) or calls (CPU, default 1) first\n"
    "  --rows S        query rows sampled for the error check (default 64)\n"
    "  --seed S        seed of the random normal inputs (default 1)\n"
    "  --json          print one JSON document (machine, settings, every row) instead of the\n"
    "                  table\n"
    "  -h, --help      this text\n"
    "\n"
    "An option other than --L and --N given twice is an error. Rows the backend does not\n"
    "implement print as 'unsupported: <reason>'. Progress goes to stderr. Exit status: 0, or 1\n"
    "when a row failed its check, a CUDA call failed or the output could not be written, 2 for\n"
    "bad usage.\n";

/* The help of `dswa bench` (its one home; declared in cli.h). */
void bench_print_help(FILE *f) { fputs(bench_help_text, f); }

/* Appends the list `v` of option `name` to out[*n]; `total` shapes are already given. */
static int add_shapes(const char *cmd, const char *name, const char *v, int64_t hi,
                      int64_t *out, int *n, int total) {
    int64_t tmp[MAX_SHAPES];
    const int k = cli_parse_i64_list(v, 1, hi, tmp, MAX_SHAPES);
    if (k < 0) {
        cli_usage_error(cmd, "%s: '%s' is not a list of up to %d positive integers up to %lld",
                        name, v, MAX_SHAPES, (long long)hi);
        return -1;
    }
    if (total + k > MAX_SHAPES) {
        cli_usage_error(cmd, "at most %d shapes in all", MAX_SHAPES);
        return -1;
    }
    memcpy(out + *n, tmp, sizeof(int64_t) * (size_t)k);
    *n += k;
    return 0;
}

static int parse_count(const char *cmd, const char *name, const char *v, int64_t lo,
                       int64_t hi, int *out) {
    int64_t x;
    if (cli_parse_i64(v, lo, hi, &x)) {
        cli_usage_error(cmd, "%s: '%s' is not an integer in [%lld, %lld]", name, v,
                        (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* Options with one value may be given once (cli_opt_once); --L and --N add up. */
int bench_parse(int argc, char **argv, bench_opts *o) {
    const char *cmd = "bench", *v = NULL;
    const char *backend = NULL, *dtype = NULL, *math = NULL, *vlay = NULL, *w = NULL,
               *wl = NULL, *wr = NULL, *cold = NULL, *repeats = NULL, *warmup = NULL,
               *rows = NULL, *seed = NULL, *op = NULL;
    int64_t ls[MAX_SHAPES], ns[MAX_SHAPES];
    int nl = 0, nn = 0, r, json_seen = 0, backward_seen = 0;
    memset(o, 0, sizeof *o);
    o->backend = CLI_BACKEND_AUTO;
    o->dtypes[0] = o->dtypes[1] = o->dtypes[2] = 1;
    o->math = DSWA_MATH_DEFAULT;
    o->vmode = V_BOTH;
    o->wl = o->wr = SAME_W;
    o->cold = COLD_AUTO;
    o->repeats = o->warmup = -1;
    o->rows = 64;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_print_help(stdout);
            return 1;
        }
        if ((r = cli_opt(cmd, argc, argv, &i, "--L", 1, &v))) {
            if (r < 0 || add_shapes(cmd, "--L", v, INT32_MAX / 17, ls, &nl, nl + nn)) return 2;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--N", 1, &v))) {
            if (r < 0 || add_shapes(cmd, "--N", v, INT32_MAX, ns, &nn, nl + nn)) return 2;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--json", 0, &v))) {
            if (r < 0) return 2;
            if (json_seen++) return cli_usage_error(cmd, "--json given twice: give it once");
            o->json = 1;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--backward", 0, &v))) {
            if (r < 0) return 2;
            if (backward_seen++)
                return cli_usage_error(cmd, "--backward given twice: give it once");
            o->backward = 1;
        } else if ((r = cli_opt_once(cmd, argc, argv, &i, "--op", &op)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--backend", &backend)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--dtype", &dtype)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--math", &math)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--v", &vlay)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--window-left", &wl)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--window-right", &wr)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--window", &w)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--cold", &cold)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--repeats", &repeats)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--warmup", &warmup)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--rows", &rows)) ||
                   (r = cli_opt_once(cmd, argc, argv, &i, "--seed", &seed))) {
            if (r < 0) return 2;
        } else if (a[0] == '-') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (op) {
        if (!strcmp(op, "diff_swa")) o->op = OP_DIFF_SWA;
        else if (!strcmp(op, "samel")) o->op = OP_SAMEL;
        else return cli_usage_error(cmd, "--op: '%s' is not diff_swa or samel", op);
    }
    /* What applies to one op only is refused for the other, not silently ignored. */
    if (o->op == OP_SAMEL && vlay)
        return cli_usage_error(cmd, "--v applies to --op diff_swa only (the fused block's V is "
                               "shared)");
    if (o->op == OP_SAMEL && cold)
        return cli_usage_error(cmd, "--cold applies to --op diff_swa only (--op samel has no "
                               "cold rows)");
    if (o->backward && cold)
        return cli_usage_error(cmd, "--cold applies to the forward's rows only (--backward has "
                               "no cold rows)");
    if (backend && cli_parse_backend(backend, &o->backend))
        return cli_usage_error(cmd, "--backend: '%s' is not auto, cuda or cpu", backend);
    if (dtype && cli_parse_dtypes(dtype, o->dtypes))
        return cli_usage_error(cmd, "--dtype: '%s' is not a list of f32, f16, bf16 (or all)", dtype);
    if (math && cli_parse_math(math, &o->math))
        return cli_usage_error(cmd, "--math: %s", cli_parse_message());
    if (math && cli_math_for_dtypes(cmd, math, o->math, dtype, o->dtypes[DSWA_F32])) return 2;
    if (vlay) {
        if (!strcmp(vlay, "both")) o->vmode = V_BOTH;
        else if (!strcmp(vlay, "full") || !strcmp(vlay, "2h")) o->vmode = V_FULL;
        else if (!strcmp(vlay, "shared")) o->vmode = V_SHARED;
        else return cli_usage_error(cmd, "--v: '%s' is not both, full or shared", vlay);
    }
    if (cli_parse_windows(cmd, w, wl, wr, &o->wl, &o->wr)) return 2;
    if (cold) {
        if (!strcmp(cold, "auto")) o->cold = COLD_AUTO;
        else if (!strcmp(cold, "all")) o->cold = COLD_ALL;
        else if (!strcmp(cold, "none")) o->cold = COLD_NONE;
        else return cli_usage_error(cmd, "--cold: '%s' is not auto, all or none", cold);
    }
    if ((repeats && parse_count(cmd, "--repeats", repeats, 1, 100000, &o->repeats)) ||
        (warmup && parse_count(cmd, "--warmup", warmup, 0, 100000, &o->warmup)) ||
        (rows && parse_count(cmd, "--rows", rows, 1, 1000000, &o->rows)))
        return 2;
    if (seed && cli_parse_u64(seed, &o->seed))
        return cli_usage_error(cmd, "--seed: '%s' is not a non-negative integer", seed);
    o->shapes_default = nl == 0 && nn == 0;
    if (nl == 0 && nn == 0) {
        static const int64_t def[3] = {256, 1292, 4096};
        nl = 3;
        memcpy(ls, def, sizeof def);
    }
    for (int i = 0; i < nl; i++) {
        o->l[o->nshapes] = ls[i];
        o->n[o->nshapes++] = 17 * ls[i];
    }
    for (int i = 0; i < nn; i++) {
        o->l[o->nshapes] = ns[i] % 17 == 0 ? ns[i] / 17 : -1;
        o->n[o->nshapes++] = ns[i];
    }
    return 0;
}
