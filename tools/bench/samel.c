/* The fused SAME-L block's rows of `dswa bench --op samel`: per shape, a random normal packed
   input and norms, then per dtype one row, timed (timing.c) and checked against a float64
   reference of the block on sampled rows. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Goal (b)'s ratio for a dtype; NaN where none is set (f16). */
double bench_samel_goal_ratio(dswa_dtype dtype) {
    return dtype == DSWA_F32 ? 3.5 : dtype == DSWA_BF16 ? 4.5 : NAN;
}

/* Element i of a dtype's buffer as a double. */
static double elem(const void *buf, int64_t i, dswa_dtype dtype) {
    float f;
    dswa_convert_to_f32(dtype, (const char *)buf + i * (int64_t)dswa_dtype_size(dtype), &f, 1);
    return f;
}

/* x rounded to dtype (f32 too: the op's reference reads q and k in the dtype). */
static double round_to(double x, dswa_dtype dtype) {
    float f = (float)x;
    unsigned char tmp[4];
    if (dtype == DSWA_F32) return f;
    dswa_convert_from_f32(dtype, &f, tmp, 1);
    dswa_convert_to_f32(dtype, tmp, &f, 1);
    return f;
}

/* The fused block's error on the sampled rows against a float64 reference of it: DyT and
   RoPE of every position in those rows' windows computed here in double and rounded to the
   dtype where dswa.h says the block rounds (after DyT, after RoPE), into q and k laid out as
   the op's (1, N, 2H, D) (other positions stay zero: calloc'd pages never touched are never
   allocated); V read in place from the packed input with pair stride 0; then the op's float64
   reference and error (cli_ref_rel_error) on those rows. NaN when out of host memory. */
static double samel_rel_error(const dswa_samel_problem *sp, const void *hx, const void *hout,
                              const int32_t *rows, int nrows, double *max_abs) {
    const int64_t N = sp->seq_len, H = sp->heads, D = sp->head_dim;
    const dswa_dtype dt = sp->dtype;
    const size_t es = dswa_dtype_size(dt);
    const int half = sp->rot_dims / 2;
    const dswa_samel_layout *L = &sp->qkv;
    void *q = calloc((size_t)(N * 2 * H * D), es), *k = calloc((size_t)(N * 2 * H * D), es);
    unsigned char *need = calloc((size_t)N, 1);
    double err = NAN;
    if (max_abs) *max_abs = NAN;
    float freq[32];   /* RoPE's frequencies: the problem's own, or its base's */
    if (!q || !k || !need || D > SAME_D || half > 32) goto done;
    if (sp->rope_freq) memcpy(freq, sp->rope_freq, (size_t)half * sizeof *freq);
    else if (dswa_rope_frequencies(sp->rot_dims, sp->rope_base, freq) != DSWA_OK) goto done;
    for (int r = 0; r < nrows; r++) {
        const int64_t lo = rows[r] - (int64_t)sp->window_left, hi = rows[r] + (int64_t)sp->window_right;
        for (int64_t j = lo < 0 ? 0 : lo; j <= hi && j < N; j++) need[j] = 1;
    }
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t j = 0; j < N; j++) {
        if (!need[j]) continue;
        static const int chunk[4] = {0, 3, 1, 4};   /* q, q_diff -> q's pairs; k, k_diff -> k's */
        const float pos = (float)((int64_t)sp->pos_offset + j);
        for (int c = 0; c < 4; c++) {
            const dswa_samel_norm *nm = c < 2 ? &sp->q_norm : &sp->k_norm;
            char *dst = (char *)(c < 2 ? q : k);
            const int pair = c % 2;
            for (int64_t h = 0; h < H; h++) {
                double y[SAME_D];   /* the bench's shapes have D = SAME_D */
                float yf[SAME_D];
                for (int64_t d = 0; d < D; d++) {
                    const double x = elem(hx, j * L->seq + chunk[c] * L->chunk + h * L->head +
                                                  d * L->dim, dt);
                    y[d] = round_to((double)nm->gamma[d] * tanh((double)nm->alpha * x) +
                                        (double)nm->beta[d], dt);
                }
                for (int f = 0; f < half; f++) {
                    const double ang = (float)((double)pos * (double)freq[f]);   /* fp32 angle */
                    const double cs = cos(ang), sn = sin(ang), a = y[f], b = y[f + half];
                    y[f] = a * cs - b * sn;
                    y[f + half] = b * cs + a * sn;
                }
                for (int64_t d = 0; d < D; d++) yf[d] = (float)y[d];
                if (half > 0)   /* rotated values are rounded to the dtype; the rest already are */
                    for (int f = 0; f < sp->rot_dims; f++) yf[f] = (float)round_to(y[f], dt);
                dswa_convert_from_f32(dt, yf, dst + ((j * 2 + pair) * H + h) * D * (int64_t)es,
                                      (size_t)D);
            }
        }
    }
    {
        dswa_problem p = dswa_problem_default(1, sp->seq_len, sp->heads, sp->head_dim, 0);
        const dswa_layout v = {L->batch, L->seq, 0, L->head, L->dim};
        p.window_left = sp->window_left;
        p.window_right = sp->window_right;
        p.scale = sp->scale;
        p.lambda = sp->lambda;
        p.dtype = dt;
        p.math = sp->math;
        p.v = v;
        p.out = sp->out;
        err = cli_ref_rel_error(&p, q, k, (const char *)hx + 2 * L->chunk * (int64_t)es, hout,
                                rows, nrows, max_abs);
    }
done:
    free(q);
    free(k);
    free(need);
    return err;
}

/* One fused-block row, on the CUDA backend (dx, dout: device copies of hx and an output) or
   the CPU one. */
static void run_samel_row(bench_ctx *c, bench_row *row, const dswa_samel_problem *hp,
                          const dswa_samel_problem *dp, const void *hx, const void *dx,
                          void *dout, void *hout, size_t out_bytes, const int32_t *rows,
                          int nrows) {
    const dswa_samel_problem *sp = c->cuda ? dp : hp;
    const void *x[1] = {c->cuda ? dx : hx};
    void *out[1] = {c->cuda ? dout : hout};
    dswa_job job = {.sp = sp, .x = x, .out = out, .nbuf = 1};
    int t;
    if (c->cuda) {
        row->kernel = dswa_samel_kernel_name(sp);
        t = bench_time_cuda_calls(c, row, &job, hout, out_bytes);
    } else {
        t = bench_time_cpu_calls(c, row, &job, out_bytes);
    }
    if (t == 0) {
        row->rel_err = samel_rel_error(hp, hx, hout, rows, nrows, &row->max_abs);
        row->tol = bench_tolerance(c, hp->dtype, hp->math);
        bench_finish_row(c, row, hp->dtype,
                         (int64_t)hp->batch * hp->seq_len * hp->heads * hp->head_dim, hout);
        if (c->cuda) (void)bench_time_copy(c, row);   /* a failure is recorded (c->fatal) */
    }
}

dswa_samel_problem bench_samel_problem(const bench_opts *o, int64_t n, dswa_dtype dtype,
                                       const float *norms) {
    dswa_samel_problem p = dswa_samel_problem_default(1, (int32_t)n, SAME_H);
    p.window_left = o->wl;
    p.window_right = o->wr;
    p.dtype = dtype;
    p.math = o->math;
    p.q_norm.alpha = SAMEL_Q_ALPHA;
    p.k_norm.alpha = SAMEL_K_ALPHA;
    p.q_norm.gamma = norms;
    p.q_norm.beta = norms + SAME_D;
    p.k_norm.gamma = norms + 2 * SAME_D;
    p.k_norm.beta = norms + 3 * SAME_D;
    return p;
}

void bench_samel_inputs(const bench_opts *o, int64_t n, float *x, float *norms) {
    const size_t n_x = (size_t)n * 5 * SAME_H * SAME_D;
    /* Streams of their own (the op's shapes use n * 8 + 0..3). */
    cli_fill_normal(x, n_x, o->seed, (uint64_t)n * 8 + 4);
    cli_fill_normal(norms, 4 * SAME_D, o->seed, (uint64_t)n * 8 + 5);
    for (int d = 0; d < SAME_D; d++) {   /* gamma near 1, beta near 0, as trained ones are */
        norms[d] = 1.0f + 0.25f * norms[d];
        norms[SAME_D + d] = 0.25f * norms[SAME_D + d];
        norms[2 * SAME_D + d] = 1.0f + 0.25f * norms[2 * SAME_D + d];
        norms[3 * SAME_D + d] = 0.25f * norms[3 * SAME_D + d];
    }
}

/* Every dtype of one shape of the fused block; appends to rows[*nrow]. */
void bench_run_samel_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows, int *nrow) {
    const bench_opts *o = c->o;
    const int64_t hd = (int64_t)SAME_H * SAME_D;
    const size_t n_x = (size_t)n * 5 * (size_t)hd, n_out = (size_t)n * (size_t)hd;
    float *fx = NULL, norms[4][SAME_D];   /* q gamma, q beta, k gamma, k beta */
    void *hout = NULL, *dnorms = NULL;
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(o->rows < n ? o->rows : n));
    int nrows = 0;
    const char *lost = NULL;
    char lost_msg[320];
    if (c->fatal) {
        free(rows);
        return;
    }
    bench_progress(c, "samel N = %lld: generating random normal inputs (%.0f MB as f32)",
                   (long long)n, (double)n_x * 4 / 1e6);
    fx = cli_malloc(n_x * 4);
    hout = cli_malloc(n_out * 4);
    if (!rows || !fx || !hout) lost = "out of host memory for the inputs";
    if (!lost) {
        nrows = bench_sample_rows(n, o->rows, rows);
        bench_samel_inputs(o, n, fx, norms[0]);
    }
    if (!lost && c->cuda) {
        if (gpu_alloc(&dnorms, sizeof norms, "norms") ||
            gpu_upload(dnorms, norms, sizeof norms, "norms"))
            lost = bench_cuda_lost(c, lost_msg, sizeof lost_msg);
    }
    for (int dt = 0; dt < 3; dt++) {
        if (!o->dtypes[dt]) continue;
        const dswa_dtype dtype = (dswa_dtype)dt;
        const size_t es = dswa_dtype_size(dtype);
        const dswa_samel_problem hp = bench_samel_problem(o, n, dtype, norms[0]);
        const dswa_samel_problem dp = dnorms ? bench_samel_problem(o, n, dtype, dnorms) : hp;
        const dswa_problem op = bench_same_l_problem(o, n, dtype, 1);
        bench_row *row = &out_rows[(*nrow)++];
        bench_init_row(c, row, l, n, dtype, 1, &op);
        row->min_bytes = dswa_samel_min_bytes(&hp);
        row->floor_ms = row->min_bytes / (c->copy_gbs * 1e9) * 1e3;
        void *hx = fx, *dx = NULL, *dout = NULL;
        if (lost || c->fatal) {
            snprintf(row->msg, sizeof row->msg, "%s", lost ? lost : "not run after a CUDA error");
            goto next;
        }
        if (dtype != DSWA_F32) {
            if (!(hx = bench_converted(fx, n_x, dtype))) {
                snprintf(row->msg, sizeof row->msg, "out of host memory for the converted inputs");
                hx = fx;
                goto next;
            }
        }
        if (c->cuda) {
            bench_progress(c, "samel N = %lld %s: copying the input to the device", (long long)n,
                    dswa_dtype_name(dtype));
            if (gpu_alloc(&dx, n_x * es, "x") || gpu_alloc(&dout, n_out * es, "out")) {
                snprintf(row->msg, sizeof row->msg, "CUDA error: %s", gpu_error());
                goto next;   /* out of device memory: the next shape may fit */
            }
            if (gpu_upload(dx, hx, n_x * es, "x")) {
                (void)bench_cuda_fatal(c, row, NULL);
                goto next;
            }
        }
        bench_progress(c, "samel N = %lld %s: running", (long long)n, dswa_dtype_name(dtype));
        run_samel_row(c, row, &hp, &dp, hx, dx, dout, hout, n_out * es, rows, nrows);
    next:
        gpu_free(dx);
        gpu_free(dout);
        if (hx != fx) cli_free(hx);
    }
    gpu_free(dnorms);
    cli_free(fx);
    cli_free(hout);
    free(rows);
}
