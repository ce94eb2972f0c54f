/* The op's rows of `dswa bench`: per shape, random normal inputs, then per dtype and V layout
   one row, timed (timing.c) and checked against the float64 reference on sampled rows. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdlib.h>
#include <string.h>

#include "internal.h"

dswa_problem bench_same_l_problem(const bench_opts *o, int64_t n, dswa_dtype dtype,
                                  int shared) {
    dswa_problem p = dswa_problem_default(1, (int32_t)n, SAME_H, SAME_D, o->wl);
    p.window_left = o->wl;
    p.window_right = o->wr;
    p.scale = 0.125f;
    p.lambda = 1.0f;
    p.dtype = dtype;
    p.math = o->math;
    if (shared) {
        const int64_t hd = (int64_t)SAME_H * SAME_D;
        const dswa_layout v = {n * hd, hd, 0, SAME_D, 1};
        p.v = v;
    }
    return p;
}

void bench_op_inputs(const bench_opts *o, int64_t n, float *q, float *k, float *vf, float *vs) {
    const size_t n_in = (size_t)n * 2 * SAME_H * SAME_D, n_vs = (size_t)n * SAME_H * SAME_D;
    /* Streams per (shape, tensor) so each shape's data is independent of the others. */
    cli_fill_normal(q, n_in, o->seed, (uint64_t)n * 8 + 0);
    cli_fill_normal(k, n_in, o->seed, (uint64_t)n * 8 + 1);
    if (vf) cli_fill_normal(vf, n_in, o->seed, (uint64_t)n * 8 + 2);
    if (vs) cli_fill_normal(vs, n_vs, o->seed, (uint64_t)n * 8 + 3);
}

void *bench_converted(const float *f, size_t n, dswa_dtype dtype) {
    void *h = f ? cli_malloc(n * dswa_dtype_size(dtype)) : NULL;
    if (h) cli_convert_from_f32(h, f, n, dtype);
    return h;
}

/* The op's error on the sampled rows against its float64 reference; then bench_finish_row. */
static void finish_op_row(const bench_ctx *c, bench_row *row, const dswa_problem *p,
                          const void *hq, const void *hk, const void *hv, const void *hout,
                          const int32_t *rows, int nrows) {
    row->rel_err = cli_ref_rel_error(p, hq, hk, hv, hout, rows, nrows, &row->max_abs);
    row->tol = bench_tolerance(c, p->dtype, p->math);
    bench_finish_row(c, row, p->dtype, (int64_t)p->batch * p->seq_len * p->heads * p->head_dim,
                     hout);
}

static void run_cpu_row(const bench_ctx *c, bench_row *row, const dswa_problem *p,
                        const void *hq, const void *hk, const void *hv, void *hout,
                        size_t out_bytes, const int32_t *rows, int nrows) {
    const void *q[1] = {hq}, *k[1] = {hk}, *v[1] = {hv};
    void *out[1] = {hout};
    dswa_job job = {.p = p, .q = q, .k = k, .v = v, .out = out, .nbuf = 1};
    if (bench_time_cpu_calls(c, row, &job, out_bytes) == 0)
        finish_op_row(c, row, p, hq, hk, hv, hout, rows, nrows);
}

/* One row on the GPU; the device buffers hold the same data as the host ones. Returns -1
   after a CUDA failure (recorded in c->fatal_msg), 0 otherwise. */
static int run_cuda_row(bench_ctx *c, bench_row *row, const dswa_problem *p, int cold,
                        const void *hq, const void *hk, const void *hv,
                        const void *dq, const void *dk, const void *dv, void *dout,
                        void *hout, size_t in_bytes, size_t v_bytes, size_t out_bytes,
                        const int32_t *rows, int nrows) {
    const void *q[1] = {dq}, *k[1] = {dk}, *v[1] = {dv};
    void *out[1] = {dout};
    dswa_job job = {.p = p, .q = q, .k = k, .v = v, .out = out, .nbuf = 1};
    const int t = bench_time_cuda_calls(c, row, &job, hout, out_bytes);
    if (t != 0) return t < 0 ? -1 : 0;
    finish_op_row(c, row, p, hq, hk, hv, hout, rows, nrows);
    if (bench_time_copy(c, row) != 0) return -1;
    if (cold && bench_time_cold(c, row, p, dq, dk, dv, dout, in_bytes, v_bytes, out_bytes) != 0)
        return -1;
    return 0;
}

/* Whether a row is also timed cold. */
static int want_cold(const bench_ctx *c, int64_t l, double min_bytes) {
    if (!c->cuda || c->o->cold == COLD_NONE) return 0;
    if (c->o->cold == COLD_ALL) return 1;
    return (l >= 0 && l <= 256) || (c->l2_bytes && min_bytes < 8.0 * (double)c->l2_bytes);
}

/* Runs every dtype and V layout of one shape; appends to rows[*nrow]. */
void bench_run_op_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows, int *nrow) {
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

    bench_progress(c, "N = %lld: generating random normal inputs (%.0f MB as f32)", (long long)n,
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
    nrows = bench_sample_rows(n, o->rows, rows);
    bench_op_inputs(o, n, fq, fk, fvf, fvs);

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
            hq = bench_converted(fq, n_in, dtype);
            hk = bench_converted(fk, n_in, dtype);
            hvf = bench_converted(fvf, n_in, dtype);
            hvs = bench_converted(fvs, n_vs, dtype);
            if (!hq || !hk || (fvf && !hvf) || (fvs && !hvs))
                group_err = "out of host memory for the converted inputs";
        }
        if (!group_err && c->cuda) {
            bench_progress(c, "N = %lld %s: copying the inputs to the device", (long long)n,
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
                group_err = bench_cuda_lost(c, group_msg, sizeof group_msg);
            }
        }
        for (int sh = 0; sh < 2; sh++) {
            if ((sh == 0 && !want_full) || (sh == 1 && !want_shared)) continue;
            const dswa_problem p = bench_same_l_problem(o, n, dtype, sh);
            bench_row *row = &out_rows[(*nrow)++];
            bench_init_row(c, row, l, n, dtype, sh, &p);
            if (group_err) {
                snprintf(row->msg, sizeof row->msg, "%s", group_err);
                continue;
            }
            if (c->fatal) {
                snprintf(row->msg, sizeof row->msg, "not run after a CUDA error");
                continue;
            }
            bench_progress(c, "N = %lld %s, V %s: running", (long long)n, dswa_dtype_name(dtype),
                    sh ? "shared" : "2H");
            if (c->cuda)
                run_cuda_row(c, row, &p, want_cold(c, l, row->min_bytes), hq, hk, sh ? hvs : hvf,
                             dq, dk, sh ? dvs : dvf, dout, hout, n_in * es,
                             (sh ? n_vs : n_in) * es, n_out * es, rows, nrows);
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
            const dswa_problem p = bench_same_l_problem(o, n, (dswa_dtype)dt, sh);
            bench_row *row = &out_rows[(*nrow)++];
            bench_init_row(c, row, l, n, (dswa_dtype)dt, sh, &p);
            snprintf(row->msg, sizeof row->msg, "%s", lost);
        }
    }
done:
    cli_free(fq); cli_free(fk); cli_free(fvf); cli_free(fvs); cli_free(hout);
    free(rows);
}
