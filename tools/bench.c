/* `dswa bench` — the main job: SAME-L shapes per dtype and V layout, timed on the CUDA backend
   (or the CPU backend), against the copy bandwidth measured in the same run, with each row's
   output checked against the float64 reference on sampled rows. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define SAME_H 24
#define SAME_D 64
#define SAME_W 17
#define MAX_SHAPES 32

enum { V_BOTH = 0, V_FULL = 1, V_SHARED = 2 };
enum { ROW_OK = 0, ROW_FAIL, ROW_UNSUPPORTED, ROW_ERROR };

typedef struct bench_opts {
    cli_backend backend;
    int64_t n[MAX_SHAPES];      /* sequence lengths */
    int64_t l[MAX_SHAPES];      /* latent frames, or -1 when given as N */
    int nshapes;
    int dtypes[3];
    dswa_math math;
    int vmode;
    int repeats, warmup, rows;  /* -1: the backend's default */
    uint64_t seed;
    int json;
} bench_opts;

typedef struct bench_row {
    int64_t l, n;
    dswa_dtype dtype;
    int shared;
    int status;
    char msg[320];
    double min_bytes, flops, floor_ms;
    double time_ms, mean_ms, best_ms;   /* median, batched mean (GPU), fastest */
    double call_ms;                     /* GPU: median of plain calls between two events */
    double gbs, pct, gflops, gflops_core;
    double rel_err, max_abs, tol;
    int64_t unwritten;
} bench_row;

typedef struct bench_ctx {
    const bench_opts *o;
    int cuda;                   /* 1: CUDA backend, 0: CPU backend */
    int threads;
    double copy_gbs;
    char copy_method[160];      /* how copy_gbs was measured */
    double t0;
    int fatal;                  /* a CUDA call failed: the remaining rows are not run */
    char fatal_msg[320];
} bench_ctx;

static void progress(const bench_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void progress(const bench_ctx *c, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "[%7.1fs] ", cli_now() - c->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static int parse_bench(int argc, char **argv, bench_opts *o) {
    const char *cmd = "bench", *v = NULL;
    int64_t ls[MAX_SHAPES], ns[MAX_SHAPES];
    int nl = -1, nn = -1, r;
    memset(o, 0, sizeof *o);
    o->backend = CLI_BACKEND_AUTO;
    o->dtypes[0] = o->dtypes[1] = o->dtypes[2] = 1;
    o->math = DSWA_MATH_DEFAULT;
    o->vmode = V_BOTH;
    o->repeats = o->warmup = -1;
    o->rows = 64;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_print_help("bench", stdout);
            return 1;
        }
        if ((r = cli_opt(cmd, argc, argv, &i, "--backend", 1, &v))) {
            if (r < 0) return 2;
            if (cli_parse_backend(v, &o->backend))
                return cli_usage_error(cmd, "--backend: '%s' is not auto, cuda or cpu", v);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--L", 1, &v))) {
            if (r < 0) return 2;
            nl = cli_parse_i64_list(v, 1, INT32_MAX / 17, ls, MAX_SHAPES);
            if (nl < 0)
                return cli_usage_error(cmd, "--L: '%s' is not a list of up to %d positive "
                                       "integers below 2^31/17", v, MAX_SHAPES);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--N", 1, &v))) {
            if (r < 0) return 2;
            nn = cli_parse_i64_list(v, 1, INT32_MAX, ns, MAX_SHAPES);
            if (nn < 0)
                return cli_usage_error(cmd, "--N: '%s' is not a list of up to %d positive "
                                       "integers below 2^31", v, MAX_SHAPES);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--dtype", 1, &v))) {
            if (r < 0) return 2;
            if (cli_parse_dtypes(v, o->dtypes))
                return cli_usage_error(cmd, "--dtype: '%s' is not a list of f32, f16, bf16 "
                                       "(or all)", v);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--math", 1, &v))) {
            if (r < 0) return 2;
            if (cli_parse_math(v, &o->math))
                return cli_usage_error(cmd, "--math: '%s' is not default, tf32 or fp32", v);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--v", 1, &v))) {
            if (r < 0) return 2;
            if (!strcmp(v, "both")) o->vmode = V_BOTH;
            else if (!strcmp(v, "full") || !strcmp(v, "2h")) o->vmode = V_FULL;
            else if (!strcmp(v, "shared")) o->vmode = V_SHARED;
            else return cli_usage_error(cmd, "--v: '%s' is not both, full or shared", v);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--repeats", 1, &v))) {
            int64_t x;
            if (r < 0) return 2;
            if (cli_parse_i64(v, 1, 100000, &x))
                return cli_usage_error(cmd, "--repeats: '%s' is not an integer in [1, 100000]", v);
            o->repeats = (int)x;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--warmup", 1, &v))) {
            int64_t x;
            if (r < 0) return 2;
            if (cli_parse_i64(v, 0, 100000, &x))
                return cli_usage_error(cmd, "--warmup: '%s' is not an integer in [0, 100000]", v);
            o->warmup = (int)x;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--rows", 1, &v))) {
            int64_t x;
            if (r < 0) return 2;
            if (cli_parse_i64(v, 1, 1000000, &x))
                return cli_usage_error(cmd, "--rows: '%s' is not an integer in [1, 1000000]", v);
            o->rows = (int)x;
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--seed", 1, &v))) {
            if (r < 0) return 2;
            if (cli_parse_u64(v, &o->seed))
                return cli_usage_error(cmd, "--seed: '%s' is not a non-negative integer", v);
        } else if ((r = cli_opt(cmd, argc, argv, &i, "--json", 0, &v))) {
            if (r < 0) return 2;
            o->json = 1;
        } else if (a[0] == '-') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (nl < 0 && nn < 0) {
        static const int64_t def[3] = {256, 1292, 4096};
        nl = 3;
        memcpy(ls, def, sizeof def);
    }
    if ((nl > 0 ? nl : 0) + (nn > 0 ? nn : 0) > MAX_SHAPES)
        return cli_usage_error(cmd, "at most %d shapes in all", MAX_SHAPES);
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

/* The reason the CUDA backend cannot run, as the library words it. */
static void cuda_unavailable_reason(char *buf, size_t n) {
    float dummy[4][4];
    dswa_problem p = dswa_problem_default(0, 1, 1, 1, 0);   /* batch 0: a no-op */
    dswa_status s = dswa_forward_cuda(&p, dummy[0], dummy[1], dummy[2], dummy[3], NULL);
    if (s == DSWA_OK)
        snprintf(buf, n, "the CUDA backend accepted a no-op but reports no usable device");
    else
        snprintf(buf, n, "%s", dswa_last_error());
}

static dswa_problem same_l_problem(int64_t n, dswa_dtype dtype, dswa_math math, int shared) {
    dswa_problem p = dswa_problem_default(1, (int32_t)n, SAME_H, SAME_D, SAME_W);
    p.scale = 0.125f;
    p.lambda = 1.0f;
    p.dtype = dtype;
    p.math = math;
    if (shared) {
        const int64_t hd = (int64_t)SAME_H * SAME_D;
        const dswa_layout v = {n * hd, hd, 0, SAME_D, 1};
        p.v = v;
    }
    return p;
}

static double tolerance(const bench_ctx *c, dswa_dtype dtype, dswa_math math) {
    if (dtype != DSWA_F32) return 1e-2;
    if (math == DSWA_MATH_FP32) return 1e-5;
    if (math == DSWA_MATH_TF32 || c->cuda) return 3e-3;
    return 1e-5;
}

/* Rows spread evenly over [0, n), both ends included. */
static int sample_rows(int64_t n, int want, int32_t *rows) {
    int k = want < n ? want : (int)n;
    if (k <= 1) {
        rows[0] = 0;
        return 1;
    }
    int m = 0;
    for (int i = 0; i < k; i++) {
        int32_t r = (int32_t)((int64_t)i * (n - 1) / (k - 1));
        if (m == 0 || rows[m - 1] != r) rows[m++] = r;
    }
    return m;
}

/* Scans the output for the poison pattern; fills the metrics and checks the error. */
static void finish_row(const bench_ctx *c, bench_row *row, const dswa_problem *p,
                       const void *hq, const void *hk, const void *hv, const void *hout,
                       const int32_t *rows, int nrows) {
    const int64_t total = (int64_t)p->batch * p->seq_len * p->heads * p->head_dim;
    int64_t unwritten = 0;
#pragma omp parallel for reduction(+ : unwritten) schedule(static)
    for (int64_t i = 0; i < total; i++) unwritten += cli_is_poison(hout, i, p->dtype);
    row->unwritten = unwritten;
    row->rel_err = cli_ref_rel_error(p, hq, hk, hv, hout, rows, nrows, &row->max_abs);
    row->tol = tolerance(c, p->dtype, p->math);
    row->gbs = row->min_bytes / (row->time_ms * 1e-3) / 1e9;
    row->pct = 100.0 * row->floor_ms / row->time_ms;
    row->gflops = row->flops / (row->time_ms * 1e-3) / 1e9;
    row->gflops_core = row->gflops / c->threads;
    if (unwritten > 0) {
        row->status = ROW_FAIL;
        snprintf(row->msg, sizeof row->msg, "%lld output elements still hold the poison "
                 "pattern", (long long)unwritten);
    } else if (!(row->rel_err <= row->tol)) {
        row->status = ROW_FAIL;
        snprintf(row->msg, sizeof row->msg, "relative error %.3g above the tolerance %.0e",
                 row->rel_err, row->tol);
    } else {
        row->status = ROW_OK;
    }
}

static void run_cpu_row(const bench_ctx *c, bench_row *row, const dswa_problem *p,
                        const void *hq, const void *hk, const void *hv, void *hout,
                        size_t out_bytes, const int32_t *rows, int nrows) {
    const int reps = c->o->repeats > 0 ? c->o->repeats : 3;
    const int warm = c->o->warmup >= 0 ? c->o->warmup : 1;
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) {
        row->status = ROW_ERROR;
        snprintf(row->msg, sizeof row->msg, "out of host memory");
        return;
    }
    memset(hout, 0xff, out_bytes);
    for (int r = -warm; r < reps; r++) {
        const double t0 = cli_now();
        dswa_status s = dswa_forward_cpu(p, hq, hk, hv, hout);
        const double dt = cli_now() - t0;
        if (s != DSWA_OK) {
            row->status = s == DSWA_ERR_UNSUPPORTED ? ROW_UNSUPPORTED : ROW_ERROR;
            snprintf(row->msg, sizeof row->msg, "%s: %s",
                     s == DSWA_ERR_UNSUPPORTED ? "unsupported" : dswa_status_string(s),
                     dswa_last_error());
            free(t);
            return;
        }
        if (r >= 0) t[r] = dt * 1e3;
    }
    row->time_ms = cli_median(t, reps);
    row->best_ms = t[0];
    row->mean_ms = row->call_ms = NAN;
    free(t);
    finish_row(c, row, p, hq, hk, hv, hout, rows, nrows);
}

/* One row on the GPU; the device buffers hold the same data as the host ones. Returns -1
   after a CUDA failure (recorded in c->fatal_msg), 0 otherwise. */
static int run_cuda_row(bench_ctx *c, bench_row *row, const dswa_problem *p,
                        const void *hq, const void *hk, const void *hv,
                        const void *dq, const void *dk, const void *dv, void *dout,
                        void *hout, size_t out_bytes, const int32_t *rows, int nrows) {
    const int reps = c->o->repeats > 0 ? c->o->repeats : 100;
    const int warm = c->o->warmup >= 0 ? c->o->warmup : 10;
    double *t = malloc(sizeof(double) * (size_t)reps);
    dswa_status s;
    if (!t) {
        row->status = ROW_ERROR;
        snprintf(row->msg, sizeof row->msg, "out of host memory");
        return 0;
    }
    if (gpu_poison(dout, out_bytes) != 0) goto cuda_failed;
    /* The first call decides whether the backend takes this row at all. */
    s = dswa_forward_cuda(p, dq, dk, dv, dout, NULL);
    if (s != DSWA_OK) goto refused;
    if (gpu_sync("first dswa_forward_cuda") != 0) goto cuda_failed;
    for (int r = 1; r < warm; r++)
        if ((s = dswa_forward_cuda(p, dq, dk, dv, dout, NULL)) != DSWA_OK) goto refused;
    if (gpu_sync("warm-up") != 0) goto cuda_failed;
    for (int r = 0; r < reps; r++) {
        if (gpu_timer_start() != 0) goto cuda_failed;
        if ((s = dswa_forward_cuda(p, dq, dk, dv, dout, NULL)) != DSWA_OK) goto refused;
        t[r] = gpu_timer_stop();
        if (t[r] < 0) goto cuda_failed;
    }
    row->call_ms = cli_median(t, reps);
    /* The main number: the call replayed from a CUDA graph (how TensorRT runs it), events
       inside the graph, so the host's API call is outside the timed span. */
    {
        void *stream = NULL;
        if (gpu_graph_begin(&stream) != 0) goto cuda_failed;
        s = dswa_forward_cuda(p, dq, dk, dv, dout, stream);
        if (gpu_graph_end(s == DSWA_OK) != 0) goto cuda_failed;
        if (s != DSWA_OK) goto refused;
        for (int r = 0; r < reps; r++)
            if ((t[r] = gpu_graph_replay()) < 0) goto cuda_failed;
        gpu_graph_destroy();
    }
    /* The same number of calls back to back between two events: the launch gaps hidden. */
    if (gpu_timer_start() != 0) goto cuda_failed;
    for (int r = 0; r < reps; r++)
        if ((s = dswa_forward_cuda(p, dq, dk, dv, dout, NULL)) != DSWA_OK) goto refused;
    row->mean_ms = gpu_timer_stop() / reps;
    if (row->mean_ms < 0) goto cuda_failed;
    if (gpu_sync("timed calls") != 0) goto cuda_failed;
    row->time_ms = cli_median(t, reps);
    row->best_ms = t[0];
    free(t);
    if (gpu_download(hout, dout, out_bytes, "out") != 0) {
        c->fatal = 1;
        snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gpu_error());
        row->status = ROW_ERROR;
        snprintf(row->msg, sizeof row->msg, "CUDA error: %s", gpu_error());
        return -1;
    }
    finish_row(c, row, p, hq, hk, hv, hout, rows, nrows);
    return 0;

refused:
    free(t);
    if (s == DSWA_ERR_UNSUPPORTED) {
        row->status = ROW_UNSUPPORTED;
        snprintf(row->msg, sizeof row->msg, "unsupported: %s", dswa_last_error());
        return 0;
    }
    row->status = ROW_ERROR;
    snprintf(row->msg, sizeof row->msg, "%s: %s", dswa_status_string(s), dswa_last_error());
    if (s == DSWA_ERR_CUDA) {
        c->fatal = 1;
        snprintf(c->fatal_msg, sizeof c->fatal_msg, "dswa_forward_cuda: %s", dswa_last_error());
        return -1;
    }
    return 0;

cuda_failed:
    free(t);
    c->fatal = 1;
    snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gpu_error());
    row->status = ROW_ERROR;
    snprintf(row->msg, sizeof row->msg, "CUDA error: %s", gpu_error());
    return -1;
}

static void init_row(bench_row *row, int64_t l, int64_t n, dswa_dtype dtype, int shared,
                     const dswa_problem *p, double copy_gbs) {
    memset(row, 0, sizeof *row);
    row->l = l;
    row->n = n;
    row->dtype = dtype;
    row->shared = shared;
    row->min_bytes = dswa_min_bytes(p);
    row->flops = dswa_useful_flops(p);
    row->floor_ms = row->min_bytes / (copy_gbs * 1e9) * 1e3;
    row->time_ms = row->mean_ms = row->best_ms = row->call_ms = row->gbs = row->pct = NAN;
    row->gflops = row->gflops_core = row->rel_err = row->max_abs = row->tol = NAN;
    row->status = ROW_ERROR;
}

/* Runs every dtype and V layout of one shape; appends to rows[*nrow]. */
static void run_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows, int *nrow) {
    const bench_opts *o = c->o;
    const int64_t hd = (int64_t)SAME_H * SAME_D;
    const size_t n_in = (size_t)n * 2 * (size_t)hd, n_vs = (size_t)n * (size_t)hd;
    const size_t n_out = (size_t)n * (size_t)hd;
    const int want_full = o->vmode != V_SHARED, want_shared = o->vmode != V_FULL;
    float *fq = NULL, *fk = NULL, *fvf = NULL, *fvs = NULL;
    void *hq = NULL, *hk = NULL, *hvf = NULL, *hvs = NULL, *hout = NULL;
    if (c->fatal) return;
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(o->rows < n ? o->rows : n));
    int nrows = 0;
    const char *lost = NULL;

    progress(c, "N = %lld: generating random normal inputs (%.0f MB as f32)", (long long)n,
             (double)(2 * n_in + (want_full ? n_in : 0) + (want_shared ? n_vs : 0)) * 4 / 1e6);
    fq = cli_malloc(n_in * 4);
    fk = cli_malloc(n_in * 4);
    if (want_full) fvf = cli_malloc(n_in * 4);
    if (want_shared) fvs = cli_malloc(n_vs * 4);
    hout = cli_malloc(n_out * 4);
    if (!rows || !fq || !fk || (want_full && !fvf) || (want_shared && !fvs) || !hout) {
        lost = "out of host memory for the inputs";
        goto rows_lost;
    }
    nrows = sample_rows(n, o->rows, rows);
    /* Streams per (shape, tensor) so each shape's data is independent of the others. */
    cli_fill_normal(fq, n_in, o->seed, (uint64_t)n * 8 + 0);
    cli_fill_normal(fk, n_in, o->seed, (uint64_t)n * 8 + 1);
    if (fvf) cli_fill_normal(fvf, n_in, o->seed, (uint64_t)n * 8 + 2);
    if (fvs) cli_fill_normal(fvs, n_vs, o->seed, (uint64_t)n * 8 + 3);

    for (int dt = 0; dt < 3 && !c->fatal; dt++) {
        if (!o->dtypes[dt]) continue;
        const dswa_dtype dtype = (dswa_dtype)dt;
        const size_t es = dswa_dtype_size(dtype);
        void *dq = NULL, *dk = NULL, *dvf = NULL, *dvs = NULL, *dout = NULL;
        const char *group_err = NULL;
        char group_msg[320];
        if (dtype == DSWA_F32) {
            hq = fq; hk = fk; hvf = fvf; hvs = fvs;
        } else {
            hq = cli_malloc(n_in * es);
            hk = cli_malloc(n_in * es);
            hvf = fvf ? cli_malloc(n_in * es) : NULL;
            hvs = fvs ? cli_malloc(n_vs * es) : NULL;
            if (!hq || !hk || (fvf && !hvf) || (fvs && !hvs)) {
                group_err = "out of host memory for the converted inputs";
            } else {
                cli_convert_from_f32(hq, fq, n_in, dtype);
                cli_convert_from_f32(hk, fk, n_in, dtype);
                if (fvf) cli_convert_from_f32(hvf, fvf, n_in, dtype);
                if (fvs) cli_convert_from_f32(hvs, fvs, n_vs, dtype);
            }
        }
        if (!group_err && c->cuda) {
            progress(c, "N = %lld %s: copying the inputs to the device", (long long)n,
                     dswa_dtype_name(dtype));
            if (gpu_alloc(&dq, n_in * es, "q") || gpu_alloc(&dk, n_in * es, "k") ||
                (hvf && gpu_alloc(&dvf, n_in * es, "v (2H heads)")) ||
                (hvs && gpu_alloc(&dvs, n_vs * es, "v (shared)")) ||
                gpu_alloc(&dout, n_out * es, "out")) {
                snprintf(group_msg, sizeof group_msg, "CUDA error: %s", gpu_error());
                group_err = group_msg;   /* out of device memory: the next shape may fit */
            } else if (gpu_upload(dq, hq, n_in * es, "q") || gpu_upload(dk, hk, n_in * es, "k") ||
                       (hvf && gpu_upload(dvf, hvf, n_in * es, "v (2H heads)")) ||
                       (hvs && gpu_upload(dvs, hvs, n_vs * es, "v (shared)"))) {
                snprintf(group_msg, sizeof group_msg, "CUDA error: %s", gpu_error());
                group_err = group_msg;
                c->fatal = 1;
                snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gpu_error());
            }
        }
        for (int sh = 0; sh < 2; sh++) {
            if ((sh == 0 && !want_full) || (sh == 1 && !want_shared)) continue;
            const dswa_problem p = same_l_problem(n, dtype, o->math, sh);
            bench_row *row = &out_rows[(*nrow)++];
            init_row(row, l, n, dtype, sh, &p, c->copy_gbs);
            if (group_err) {
                snprintf(row->msg, sizeof row->msg, "%s", group_err);
                continue;
            }
            if (c->fatal) {
                snprintf(row->msg, sizeof row->msg, "not run after a CUDA error");
                continue;
            }
            progress(c, "N = %lld %s, V %s: running", (long long)n, dswa_dtype_name(dtype),
                     sh ? "shared" : "2H");
            if (c->cuda)
                run_cuda_row(c, row, &p, hq, hk, sh ? hvs : hvf, dq, dk, sh ? dvs : dvf, dout,
                             hout, n_out * es, rows, nrows);
            else
                run_cpu_row(c, row, &p, hq, hk, sh ? hvs : hvf, hout, n_out * es, rows, nrows);
        }
        gpu_free(dq); gpu_free(dk); gpu_free(dvf); gpu_free(dvs); gpu_free(dout);
        if (dtype != DSWA_F32) {
            cli_free(hq); cli_free(hk); cli_free(hvf); cli_free(hvs);
        }
        hq = hk = hvf = hvs = NULL;
    }
    goto done;

rows_lost:
    for (int dt = 0; dt < 3; dt++) {
        if (!o->dtypes[dt]) continue;
        for (int sh = 0; sh < 2; sh++) {
            if ((sh == 0 && !want_full) || (sh == 1 && !want_shared)) continue;
            const dswa_problem p = same_l_problem(n, (dswa_dtype)dt, o->math, sh);
            bench_row *row = &out_rows[(*nrow)++];
            init_row(row, l, n, (dswa_dtype)dt, sh, &p, c->copy_gbs);
            snprintf(row->msg, sizeof row->msg, "%s", lost);
        }
    }
done:
    cli_free(fq); cli_free(fk); cli_free(fvf); cli_free(fvs); cli_free(hout);
    free(rows);
}

/* ---- output ------------------------------------------------------------------------- */

static const char *status_name(int s) {
    switch (s) {
    case ROW_OK: return "ok";
    case ROW_FAIL: return "fail";
    case ROW_UNSUPPORTED: return "unsupported";
    default: return "error";
    }
}

static void print_json(const bench_ctx *c, const char *device, const char *date,
                       const bench_row *rows, int nrow) {
    const bench_opts *o = c->o;
    FILE *f = stdout;
    int rt = 0, drv = 0;
    if (c->cuda) gpu_versions(&rt, &drv);
    fprintf(f, "{\n  \"tool\": \"dswa bench\",\n  \"version\": ");
    cli_json_str(f, DSWA_VERSION_STRING);
    fprintf(f, ",\n  \"date\": ");
    cli_json_str(f, date);
    fprintf(f, ",\n  \"backend\": \"%s\",\n  \"device\": ", c->cuda ? "cuda" : "cpu");
    cli_json_str(f, device);
    fprintf(f, ",\n  \"threads\": %d,\n", c->threads);
    if (c->cuda) fprintf(f, "  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n", rt, drv);
    fprintf(f, "  \"copy_bandwidth_gb_s\": ");
    cli_json_num(f, c->copy_gbs);
    fprintf(f, ",\n  \"copy_bandwidth_method\": ");
    cli_json_str(f, c->copy_method);
    fprintf(f, ",\n  \"math\": \"%s\",\n  \"repeats\": %d,\n  \"warmup\": %d,\n  \"seed\": %llu,\n"
               "  \"sample_rows\": %d,\n",
            dswa_math_name(o->math), o->repeats > 0 ? o->repeats : (c->cuda ? 100 : 3),
            o->warmup >= 0 ? o->warmup : (c->cuda ? 10 : 1), (unsigned long long)o->seed,
            o->rows);
    fprintf(f, "  \"shape\": {\"batch\": 1, \"heads\": %d, \"head_dim\": %d, \"window_left\": %d,"
               " \"window_right\": %d, \"scale\": 0.125, \"lambda\": 1},\n",
            SAME_H, SAME_D, SAME_W, SAME_W);
    fprintf(f, "  \"rows\": [");
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        fprintf(f, "%s\n    {", i ? "," : "");
        if (r->l >= 0) fprintf(f, "\"L\": %lld, ", (long long)r->l);
        else fprintf(f, "\"L\": null, ");
        fprintf(f, "\"N\": %lld, \"dtype\": \"%s\", \"v\": \"%s\", \"status\": \"%s\", ",
                (long long)r->n, dswa_dtype_name(r->dtype), r->shared ? "shared" : "full",
                status_name(r->status));
        fprintf(f, "\"message\": ");
        cli_json_str(f, r->msg);
        fprintf(f, ", \"min_bytes\": %.0f, \"useful_flops\": %.0f, \"floor_ms\": ",
                r->min_bytes, r->flops);
        cli_json_num(f, r->floor_ms);
        fprintf(f, ", \"time_ms\": ");
        cli_json_num(f, r->time_ms);
        fprintf(f, ", \"call_ms\": ");
        cli_json_num(f, r->call_ms);
        fprintf(f, ", \"mean_ms_batched\": ");
        cli_json_num(f, r->mean_ms);
        fprintf(f, ", \"gb_s\": ");
        cli_json_num(f, r->gbs);
        fprintf(f, ", \"pct_copy_bw\": ");
        cli_json_num(f, r->pct);
        fprintf(f, ", \"pct_of_floor\": ");
        cli_json_num(f, r->pct);
        fprintf(f, ", \"gflop_s\": ");
        cli_json_num(f, r->gflops);
        fprintf(f, ", \"gflop_s_per_core\": ");
        if (c->cuda) fputs("null", f);
        else cli_json_num(f, r->gflops_core);
        fprintf(f, ", \"rel_err\": ");
        cli_json_num(f, r->rel_err);
        fprintf(f, ", \"max_abs_err\": ");
        cli_json_num(f, r->max_abs);
        fprintf(f, ", \"tolerance\": ");
        cli_json_num(f, r->tol);
        fprintf(f, ", \"unwritten\": %lld}", (long long)r->unwritten);
    }
    fprintf(f, "\n  ]\n}\n");
}

#define NCOL 12

static void print_table(const bench_ctx *c, const bench_row *rows, int nrow) {
    const char *head[NCOL] = {"L", "N", "dtype", "V", "time_ms",
                              c->cuda ? "mean_ms" : "best_ms", "GB/s", "floor_ms", "%floor",
                              "GFLOP/s", c->cuda ? "call_ms" : "GF/s/core", "rel_err"};
    /* Column 12 (check) is printed last, unpadded. */
    static char cell[MAX_SHAPES * 6][NCOL][32];
    int width[NCOL];
    const int left[NCOL] = {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < NCOL; j++) width[j] = (int)strlen(head[j]);
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        char(*s)[32] = cell[i];
        if (r->l >= 0) snprintf(s[0], 32, "%lld", (long long)r->l);
        else snprintf(s[0], 32, "-");
        snprintf(s[1], 32, "%lld", (long long)r->n);
        snprintf(s[2], 32, "%s", dswa_dtype_name(r->dtype));
        snprintf(s[3], 32, "%s", r->shared ? "shared" : "2H");
        const int timed = r->status == ROW_OK || r->status == ROW_FAIL;
        for (int j = 4; j < NCOL; j++) s[j][0] = '\0';
        if (timed) {
            snprintf(s[4], 32, "%.4f", r->time_ms);
            snprintf(s[5], 32, "%.4f", c->cuda ? r->mean_ms : r->best_ms);
            snprintf(s[6], 32, "%.1f", r->gbs);
            snprintf(s[7], 32, "%.4f", r->floor_ms);
            snprintf(s[8], 32, "%.1f%%", r->pct);
            snprintf(s[9], 32, "%.1f", r->gflops);
            if (!c->cuda) snprintf(s[10], 32, "%.2f", r->gflops_core);
            else snprintf(s[10], 32, "%.4f", r->call_ms);
            snprintf(s[11], 32, "%.2e", r->rel_err);
        }
        for (int j = 0; j < NCOL; j++) {
            const int w = (int)strlen(s[j]);
            if ((timed || j < 4) && w > width[j]) width[j] = w;
        }
    }
    printf("\n");
    for (int j = 0; j < NCOL; j++) {
        printf("%s%*s", j ? "  " : "", left[j] ? -width[j] : width[j], head[j]);
    }
    printf("  check\n");
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        const int timed = r->status == ROW_OK || r->status == ROW_FAIL;
        for (int j = 0; j < (timed ? NCOL : 4); j++) {
            printf("%s%*s", j ? "  " : "", left[j] ? -width[j] : width[j], cell[i][j]);
        }
        if (r->status == ROW_OK) printf("  ok\n");
        else if (r->status == ROW_FAIL) printf("  FAIL: %s\n", r->msg);
        else printf("  %s\n", r->msg);
    }
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    bench_ctx c;
    char device[256], date[64], why[512];
    static bench_row rows[MAX_SHAPES * 6];
    int nrow = 0, rc;
    if ((rc = parse_bench(argc, argv, &o)) != 0) return rc == 1 ? 0 : rc;
    memset(&c, 0, sizeof c);
    c.o = &o;
    c.t0 = cli_now();
    c.threads = cli_threads();
    cli_date_utc(date, sizeof date);

    if (o.backend == CLI_BACKEND_CPU) {
        c.cuda = 0;
    } else if (dswa_cuda_available()) {
        c.cuda = 1;
    } else if (o.backend == CLI_BACKEND_CUDA) {
        cuda_unavailable_reason(why, sizeof why);
        fprintf(stderr, "dswa bench: --backend cuda: %s\n", why);
        return 1;
    } else {
        cuda_unavailable_reason(why, sizeof why);
        progress(&c, "CUDA backend unavailable, running on the CPU: %s", why);
    }

    if (c.cuda) {
        if (gpu_init(device, sizeof device) != 0 || gpu_timer_create() != 0) {
            fprintf(stderr, "dswa bench: %s\n", gpu_error());
            return 1;
        }
        progress(&c, "measuring device copy bandwidth (2 GiB device-to-device cudaMemcpy)");
        snprintf(c.copy_method, sizeof c.copy_method,
                 "2 GiB device-to-device cudaMemcpy, median of 10");
        c.copy_gbs = gpu_copy_bandwidth((size_t)2 << 30, 10);
        if (c.copy_gbs <= 0) {   /* a small device: try 256 MiB, still far beyond the L2 */
            progress(&c, "%s; retrying with 256 MiB", gpu_error());
            c.copy_gbs = gpu_copy_bandwidth((size_t)256 << 20, 10);
            snprintf(c.copy_method, sizeof c.copy_method,
                     "256 MiB device-to-device cudaMemcpy, median of 10");
        }
        if (c.copy_gbs <= 0) {
            fprintf(stderr, "dswa bench: copy bandwidth: %s\n", gpu_error());
            return 1;
        }
    } else {
        char cpu[200];
        cli_cpu_name(cpu, sizeof cpu);
        snprintf(device, sizeof device, "%s, %d thread%s", cpu, c.threads,
                 c.threads == 1 ? "" : "s");
        progress(&c, "measuring host copy bandwidth (memcpy of 512 MiB over %d threads)",
                 c.threads);
        c.copy_gbs = cli_cpu_copy_bandwidth((size_t)512 << 20, 5);
        snprintf(c.copy_method, sizeof c.copy_method,
                 "512 MiB memcpy over %d OpenMP threads, median of 5", c.threads);
        if (c.copy_gbs <= 0) {
            fprintf(stderr, "dswa bench: copy bandwidth: out of host memory\n");
            return 1;
        }
    }
    progress(&c, "copy bandwidth %.1f GB/s (read + written)", c.copy_gbs);

    for (int s = 0; s < o.nshapes; s++) run_shape(&c, o.l[s], o.n[s], rows, &nrow);
    if (c.cuda) gpu_timer_destroy();
    progress(&c, "done");

    if (o.json) {
        print_json(&c, device, date, rows, nrow);
    } else {
        printf("dswa %s bench, %s, backend %s: %s\n", DSWA_VERSION_STRING, date,
               c.cuda ? "cuda" : "cpu", device);
        printf("copy bandwidth %.1f GB/s (%s, bytes read + written)\n", c.copy_gbs,
               c.copy_method);
        printf("SAME-L: B=1 H=%d D=%d WL=WR=%d scale=1/8 lambda=1, math %s; median of %d "
               "calls after %d warm-up; error on %d sampled rows x all heads vs float64\n",
               SAME_H, SAME_D, SAME_W, dswa_math_name(o.math),
               o.repeats > 0 ? o.repeats : (c.cuda ? 100 : 3),
               o.warmup >= 0 ? o.warmup : (c.cuda ? 10 : 1), o.rows);
        if (c.cuda)
            printf("time_ms: one call replayed from a CUDA graph (events inside the graph); mean_ms: "
                   "plain calls back to back between two events, per call; call_ms: one plain call "
                   "between two events, host launch included\n");
        else
            printf("best_ms: the fastest call; GF/s/core: GFLOP/s over %d threads\n", c.threads);
        printf("%%floor = floor_ms / time_ms = GB/s / copy bandwidth\n");
        print_table(&c, rows, nrow);
    }
    if (c.fatal) fprintf(stderr, "dswa bench: stopped after a CUDA error: %s\n", c.fatal_msg);
    int bad = c.fatal;
    for (int i = 0; i < nrow; i++)
        if (rows[i].status == ROW_FAIL || rows[i].status == ROW_ERROR) bad = 1;
    return bad ? 1 : 0;
}
