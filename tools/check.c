/* `dswa check` — a quick self-test: small random problems through the CPU backend and, when a
   device is usable, the CUDA backend, each compared with the float64 reference. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void check_print_help(FILE *f) {
    fputs(
        "usage: dswa check [--backend auto|cuda|cpu] [--seed S]\n"
        "                  [--window W | --window-left L --window-right R]\n"
        "\n"
        "A quick self-test: small random problems (f32, f16, bf16; shared and 2H-head V; asymmetric\n"
        "and wider-than-N windows; B=2; strided and packed layouts; strided output whose gaps must\n"
        "stay untouched) through the CPU backend and, when a device is usable, the CUDA backend,\n"
        "each compared with the float64 reference on the same inputs. Tolerances (relative\n"
        "Frobenius error): f32 1e-5 (CPU, and the math-fp32 case on CUDA), f32 TF32 on CUDA 3e-3,\n"
        "f16/bf16 1e-2. Cases the CUDA backend reports as unsupported are skipped with a note.\n"
        "Prints one line per case.\n"
        "\n"
        "options:\n"
        "  --backend auto|cuda|cpu  auto (default): the CPU, and CUDA when a device is usable\n"
        "  --seed S        seed of the random inputs (default 1)\n"
        "  --window W      every case with window_left = window_right = W (default: each case's\n"
        "                  own windows, from 0 to wider than N)\n"
        "  --window-left L, --window-right R   every case with these windows\n"
        "  -h, --help      this text\n"
        "Each option may be given once.\n"
        "\n"
        "Exit status: 0 when every case passed (skips allowed), 1 otherwise, 2 for bad usage.\n",
        f);
}

enum { LAYOUT_CONTIGUOUS = 0, LAYOUT_STRIDED_OUT, LAYOUT_PACKED };

typedef struct check_case {
    const char *name;
    int batch, n, heads, dim, wl, wr;
    float scale, lambda;   /* scale 0: 1/sqrt(dim) */
    dswa_dtype dtype;
    dswa_math math;
    int shared;            /* V with pair stride 0 */
    int layout;
} check_case;

static const check_case cases[] = {
    {"SAME-L heads, 2H V", 1, 300, 24, 64, 17, 17, 0.125f, 1.0f, DSWA_F32, DSWA_MATH_DEFAULT, 0,
     LAYOUT_CONTIGUOUS},
    {"shared V, B=2, asymmetric window 5/0, lambda 0.7", 2, 129, 4, 64, 5, 0, 0, 0.7f, DSWA_F32,
     DSWA_MATH_DEFAULT, 1, LAYOUT_CONTIGUOUS},
    {"strided output (gaps untouched), B=2, window 17/3", 2, 77, 3, 64, 17, 3, 0, 1.0f, DSWA_F32,
     DSWA_MATH_DEFAULT, 0, LAYOUT_STRIDED_OUT},
    {"packed [B,N,5,H,D] projection, shared V", 1, 100, 8, 64, 17, 17, 0.125f, 1.0f, DSWA_F32,
     DSWA_MATH_DEFAULT, 1, LAYOUT_PACKED},
    {"window wider than N", 1, 10, 2, 64, 17, 17, 0, 1.0f, DSWA_F32, DSWA_MATH_DEFAULT, 0,
     LAYOUT_CONTIGUOUS},
    {"math fp32", 1, 64, 2, 64, 17, 17, 0, 1.0f, DSWA_F32, DSWA_MATH_FP32, 0, LAYOUT_CONTIGUOUS},
    {"head_dim 128, window 4/9", 1, 50, 2, 128, 4, 9, 0, 1.0f, DSWA_F32, DSWA_MATH_DEFAULT, 0,
     LAYOUT_CONTIGUOUS},
    {"2H V, B=2", 2, 150, 4, 64, 17, 17, 0.125f, 1.0f, DSWA_F16, DSWA_MATH_DEFAULT, 0,
     LAYOUT_CONTIGUOUS},
    {"shared V, strided output, window 2/11", 1, 90, 3, 64, 2, 11, 0, 1.0f, DSWA_F16,
     DSWA_MATH_DEFAULT, 1, LAYOUT_STRIDED_OUT},
    {"SAME-L heads, 2H V", 1, 200, 24, 64, 17, 17, 0.125f, 1.0f, DSWA_BF16, DSWA_MATH_DEFAULT, 0,
     LAYOUT_CONTIGUOUS},
    {"shared V, B=2, window 9/4, scale 0.2, lambda 0.5", 2, 70, 2, 64, 9, 4, 0.2f, 0.5f,
     DSWA_BF16, DSWA_MATH_DEFAULT, 1, LAYOUT_CONTIGUOUS},
    {"packed [B,N,5,H,D] projection, shared V, B=2", 2, 60, 4, 64, 17, 17, 0.125f, 1.0f,
     DSWA_BF16, DSWA_MATH_DEFAULT, 1, LAYOUT_PACKED},
};

/* A case made concrete: the problem, one input buffer holding Q, K and V at element offsets,
   and the output's span. */
typedef struct built_case {
    dswa_problem p;
    int64_t in_elems, off_q, off_k, off_v, out_elems;
    void *in;              /* host, in the case's dtype */
    unsigned char *in_view; /* per output element: 1 when it is part of the view */
} built_case;

static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

/* wl, wr: the windows, or -1 for the case's own. */
static int build_case(const check_case *cc, uint64_t seed, uint64_t idx, int32_t wl, int32_t wr,
                      built_case *b) {
    memset(b, 0, sizeof *b);
    dswa_problem p = dswa_problem_default(cc->batch, cc->n, cc->heads, cc->dim,
                                          wl >= 0 ? wl : cc->wl);
    const int64_t hd = (int64_t)cc->heads * cc->dim, n = cc->n;
    p.window_right = wr >= 0 ? wr : cc->wr;
    if (cc->scale > 0) p.scale = cc->scale;
    p.lambda = cc->lambda;
    p.dtype = cc->dtype;
    p.math = cc->math;
    if (cc->layout == LAYOUT_PACKED) {
        const dswa_layout qk = {n * 5 * hd, 5 * hd, 3 * hd, cc->dim, 1};
        dswa_layout v = qk;
        v.pair = 0;   /* the packed projection has one V */
        p.q = p.k = qk;
        p.v = v;
        b->in_elems = (int64_t)cc->batch * n * 5 * hd;
        b->off_q = 0;
        b->off_k = hd;
        b->off_v = 2 * hd;
    } else {
        if (cc->shared) {
            const dswa_layout v = {n * hd, hd, 0, cc->dim, 1};
            p.v = v;
        }
        const int64_t sq = dswa_view_span(&p, &p.q, 2), sk = dswa_view_span(&p, &p.k, 2);
        const int64_t sv = dswa_view_span(&p, &p.v, 2);
        b->off_q = 0;
        b->off_k = round16(sq);
        b->off_v = b->off_k + round16(sk);
        b->in_elems = b->off_v + sv;
    }
    if (cc->layout == LAYOUT_STRIDED_OUT) {
        /* Rows 8 elements apart, batches 16 more: gaps the backends must leave alone. */
        const int64_t seq = hd + 8;
        const dswa_layout o = {n * seq + 16, seq, 0, cc->dim, 1};
        p.out = o;
    }
    b->p = p;
    b->out_elems = dswa_view_span(&p, &p.out, 1);
    float *f = cli_malloc(sizeof(float) * (size_t)b->in_elems);
    b->in = cli_malloc(dswa_dtype_size(p.dtype) * (size_t)b->in_elems);
    b->in_view = calloc((size_t)b->out_elems, 1);
    if (!f || !b->in || !b->in_view) {
        cli_free(f);
        cli_free(b->in);
        free(b->in_view);
        b->in = NULL;
        b->in_view = NULL;
        return -1;
    }
    cli_fill_normal(f, (size_t)b->in_elems, seed, 1000 + idx);
    cli_convert_from_f32(b->in, f, (size_t)b->in_elems, p.dtype);
    cli_free(f);
    for (int64_t bb = 0; bb < p.batch; bb++)
        for (int64_t i = 0; i < p.seq_len; i++)
            for (int64_t h = 0; h < p.heads; h++)
                for (int64_t d = 0; d < p.head_dim; d++)
                    b->in_view[bb * p.out.batch + i * p.out.seq + h * p.out.head + d * p.out.dim] = 1;
    return 0;
}

static void free_case(built_case *b) {
    cli_free(b->in);
    free(b->in_view);
}

static const void *at(const void *base, int64_t off, dswa_dtype t) {
    return (const char *)base + off * (int64_t)dswa_dtype_size(t);
}

static double tolerance(const dswa_problem *p, int cuda) {
    if (p->dtype != DSWA_F32) return 1e-2;
    if (p->math == DSWA_MATH_FP32) return 1e-5;
    if (p->math == DSWA_MATH_TF32 || cuda) return 3e-3;
    return 1e-5;
}

/* Checks a host copy of the output: view elements written, gaps untouched, error in
   tolerance. Writes the verdict's details to msg; returns 1 on pass. */
static int judge(const built_case *b, const void *out, int cuda, char *msg, size_t n) {
    const dswa_problem *p = &b->p;
    int64_t unwritten = 0, touched = 0;
    for (int64_t e = 0; e < b->out_elems; e++) {
        const int poison = cli_is_poison(out, e, p->dtype);
        if (b->in_view[e]) unwritten += poison;
        else touched += !poison;
    }
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)p->seq_len);
    if (!rows) {
        snprintf(msg, n, "out of host memory");
        return 0;
    }
    for (int32_t i = 0; i < p->seq_len; i++) rows[i] = i;
    double max_abs = NAN;
    const double err = cli_ref_rel_error(p, at(b->in, b->off_q, p->dtype),
                                         at(b->in, b->off_k, p->dtype),
                                         at(b->in, b->off_v, p->dtype), out, rows, p->seq_len,
                                         &max_abs);
    free(rows);
    const double tol = tolerance(p, cuda);
    if (unwritten || touched) {
        snprintf(msg, n, "%lld output elements unwritten, %lld gap elements overwritten",
                 (long long)unwritten, (long long)touched);
        return 0;
    }
    snprintf(msg, n, "rel_err %.2e (tol %.0e), max abs %.2e", err, tol, max_abs);
    return err <= tol;
}

static int run_cpu(const built_case *b, char *msg, size_t n) {
    const dswa_problem *p = &b->p;
    const size_t out_bytes = (size_t)b->out_elems * dswa_dtype_size(p->dtype);
    void *out = cli_malloc(out_bytes);
    if (!out) {
        snprintf(msg, n, "out of host memory");
        return 0;
    }
    memset(out, 0xff, out_bytes);
    dswa_status s = dswa_forward_cpu(p, at(b->in, b->off_q, p->dtype),
                                     at(b->in, b->off_k, p->dtype),
                                     at(b->in, b->off_v, p->dtype), out);
    int ok = 0;
    if (s != DSWA_OK)
        snprintf(msg, n, "dswa_forward_cpu: %s: %s", dswa_status_string(s), dswa_last_error());
    else
        ok = judge(b, out, 0, msg, n);
    cli_free(out);
    return ok;
}

/* 1 pass, 0 fail, -1 skipped (unsupported), -2 a CUDA call failed. */
static int run_cuda(const built_case *b, char *msg, size_t n) {
    const dswa_problem *p = &b->p;
    const size_t es = dswa_dtype_size(p->dtype);
    const size_t in_bytes = (size_t)b->in_elems * es, out_bytes = (size_t)b->out_elems * es;
    void *din = NULL, *dout = NULL, *out = cli_malloc(out_bytes);
    int ret = -2;
    dswa_status s;
    if (!out) {
        snprintf(msg, n, "out of host memory");
        return 0;
    }
    if (gpu_alloc(&din, in_bytes, "inputs") || gpu_alloc(&dout, out_bytes, "out") ||
        gpu_upload(din, b->in, in_bytes, "inputs") || gpu_poison(dout, out_bytes)) {
        snprintf(msg, n, "CUDA error: %s", gpu_error());
        goto done;
    }
    s = dswa_forward_cuda(p, at(din, b->off_q, p->dtype), at(din, b->off_k, p->dtype),
                          at(din, b->off_v, p->dtype), dout, NULL);
    if (s == DSWA_ERR_UNSUPPORTED) {
        snprintf(msg, n, "unsupported: %s", dswa_last_error());
        ret = -1;
        goto done;
    }
    if (s != DSWA_OK) {
        snprintf(msg, n, "dswa_forward_cuda: %s: %s", dswa_status_string(s), dswa_last_error());
        ret = s == DSWA_ERR_CUDA ? -2 : 0;
        goto done;
    }
    if (gpu_sync("dswa_forward_cuda") || gpu_download(out, dout, out_bytes, "out")) {
        snprintf(msg, n, "CUDA error: %s", gpu_error());
        goto done;
    }
    ret = judge(b, out, 1, msg, n);
done:
    gpu_free(din);
    gpu_free(dout);
    cli_free(out);
    return ret;
}

int cmd_check(int argc, char **argv) {
    const char *cmd = "check", *backend_s = NULL, *seed_s = NULL, *w_s = NULL, *wl_s = NULL,
               *wr_s = NULL;
    cli_backend backend = CLI_BACKEND_AUTO;
    uint64_t seed = 1;
    int32_t wl = -1, wr = -1; /* -1: each case's own */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            check_print_help(stdout);
            return 0;
        }
        if ((r = cli_opt_once(cmd, argc, argv, &i, "--backend", &backend_s)) ||
            (r = cli_opt_once(cmd, argc, argv, &i, "--seed", &seed_s)) ||
            (r = cli_opt_once(cmd, argc, argv, &i, "--window-left", &wl_s)) ||
            (r = cli_opt_once(cmd, argc, argv, &i, "--window-right", &wr_s)) ||
            (r = cli_opt_once(cmd, argc, argv, &i, "--window", &w_s))) {
            if (r < 0) return 2;
        } else if (a[0] == '-') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (backend_s && cli_parse_backend(backend_s, &backend))
        return cli_usage_error(cmd, "--backend: '%s' is not auto, cuda or cpu", backend_s);
    if (seed_s && cli_parse_u64(seed_s, &seed))
        return cli_usage_error(cmd, "--seed: '%s' is not a non-negative integer", seed_s);
    if (cli_parse_windows(cmd, w_s, wl_s, wr_s, &wl, &wr)) return 2;

    const int do_cpu = backend != CLI_BACKEND_CUDA;
    int do_cuda = backend != CLI_BACKEND_CPU && dswa_cuda_available();
    if (backend != CLI_BACKEND_CPU && !do_cuda) {
        /* Why: no driver, an old one or no GPU (the runtime's view, which tells them apart), or
           a GPU the library does not use (its own reason). */
        char name[256];
        const char *why = gpu_error();
        if (gpu_init(name, sizeof name) == 0) {
            float dummy[4][4];
            dswa_problem p = dswa_problem_default(0, 1, 1, 1, 0);
            (void)dswa_forward_cuda(&p, dummy[0], dummy[1], dummy[2], dummy[3], NULL);
            why = dswa_last_error();
        }
        if (backend == CLI_BACKEND_CUDA) {
            fprintf(stderr, "dswa check: --backend cuda: %s\n", why);
            return 1;
        }
        printf("note  cuda  not checked: %s\n", why);
    }
    if (do_cuda) {
        char name[256];
        if (gpu_init(name, sizeof name) != 0) {
            printf("FAIL  cuda  %s\n", gpu_error());
            return 1;
        }
        printf("note  cuda  device: %s\n", name);
    }

    int pass = 0, fail = 0, skip = 0;
    char msg[512];
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int ci = 0; ci < ncases; ci++) {
        const check_case *cc = &cases[ci];
        built_case b;
        char desc[256];
        if (build_case(cc, seed, (uint64_t)ci, wl, wr, &b) != 0) {
            printf("FAIL  -     %s %s: out of host memory\n", dswa_dtype_name(cc->dtype), cc->name);
            fail++;
            continue;
        }
        if (wl >= 0)
            snprintf(desc, sizeof desc, "%-4s %s, windows set to %d/%d (B=%d N=%d H=%d D=%d)",
                     dswa_dtype_name(cc->dtype), cc->name, b.p.window_left, b.p.window_right,
                     cc->batch, cc->n, cc->heads, cc->dim);
        else
            snprintf(desc, sizeof desc, "%-4s %s (B=%d N=%d H=%d D=%d)", dswa_dtype_name(cc->dtype),
                     cc->name, cc->batch, cc->n, cc->heads, cc->dim);
        if (do_cpu) {
            const int ok = run_cpu(&b, msg, sizeof msg);
            printf("%s  cpu   %s: %s\n", ok ? "PASS" : "FAIL", desc, msg);
            ok ? pass++ : fail++;
        }
        if (do_cuda) {
            const int res = run_cuda(&b, msg, sizeof msg);
            const char *verdict = res == 1 ? "PASS" : res == -1 ? "SKIP" : "FAIL";
            printf("%s  cuda  %s: %s\n", verdict, desc, msg);
            if (res == 1) pass++;
            else if (res == -1) skip++;
            else fail++;
            if (res == -2) {
                printf("FAIL  cuda  stopping the CUDA cases after a CUDA error\n");
                do_cuda = 0;
            }
        }
        fflush(stdout);
        free_case(&b);
    }
    printf("check: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    return fail ? 1 : 0;
}
