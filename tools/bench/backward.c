/* The backward's rows of `dswa bench --backward` (the op's, and with --op samel the fused
   block's): per shape, random normal inputs and dout, then per dtype (and, the op, V layout)
   one row: the backward timed as the forward is (timing.c: a graph of back-to-back calls, its
   workspace allocated once outside the graph), beside the same-size copy of its minimum bytes
   (dswa_backward_min_bytes, dswa_samel_backward_min_bytes), and a forward then a backward
   timed the same way. Checked: every gradient element written; up to BWD_CHECK_MAX_N, the op's
   gradients against dswa_reference_backward (float64) and the fused block's (GPU) against
   dswa_samel_backward_cpu. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Relative Frobenius error of n elements of a dtype's buffer against doubles. */
static double rel_error_f64(const void *buf, dswa_dtype dtype, const double *ref, int64_t n) {
    double num = 0.0, den = 0.0;
    const size_t es = dswa_dtype_size(dtype);
#pragma omp parallel for reduction(+ : num, den) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float f;
        dswa_convert_to_f32(dtype, (const char *)buf + i * (int64_t)es, &f, 1);
        const double d = (double)f - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The same against another buffer of the dtype. */
static double rel_error_same(const void *buf, const void *ref, dswa_dtype dtype, int64_t n) {
    double num = 0.0, den = 0.0;
    const size_t es = dswa_dtype_size(dtype);
#pragma omp parallel for reduction(+ : num, den) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float a, b;
        dswa_convert_to_f32(dtype, (const char *)buf + i * (int64_t)es, &a, 1);
        dswa_convert_to_f32(dtype, (const char *)ref + i * (int64_t)es, &b, 1);
        num += ((double)a - b) * ((double)a - b);
        den += (double)b * b;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Sizes of a row as a backward row: its bytes, the floor, and the backward's useful flops (5
   matrix products per pair over each query's window: the scores recomputed, dP, dV, dQ, dK;
   the forward's 2). */
static void backward_sizes(const bench_ctx *c, bench_row *row, double min_bytes,
                           const dswa_problem *op) {
    row->min_bytes = min_bytes;
    row->floor_ms = row->min_bytes / (c->copy_gbs * 1e9) * 1e3;
    row->flops = 2.5 * dswa_useful_flops(op);
}

/* After the row's backward was timed (hgrad: its gradients on the host): the rest of a GPU
   row (the check first, then the copy, then the forward + backward). */
static void finish_cuda(bench_ctx *c, bench_row *row, dswa_job *job, dswa_dtype dtype,
                        int64_t total, const void *hgrad) {
    bench_finish_backward_row(c, row, dtype, total, hgrad);
    if (bench_time_copy(c, row) != 0) return;
    (void)bench_time_cuda_fwd_bwd(c, row, job);   /* a failure is recorded in the row */
}

/* ---- the op ------------------------------------------------------------------------------ */

void bench_run_op_backward_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows,
                                 int *nrow) {
    const bench_opts *o = c->o;
    const int64_t hd = (int64_t)SAME_H * SAME_D;
    const size_t n_in = (size_t)n * 2 * (size_t)hd, n_vs = (size_t)n * (size_t)hd;
    const size_t n_out = (size_t)n * (size_t)hd, n_grad = 3 * n_in;
    const int want_full = o->vmode != V_SHARED, want_shared = o->vmode != V_FULL;
    float *fq = NULL, *fk = NULL, *fvf = NULL, *fvs = NULL, *fgo = NULL;
    void *hgrad = NULL;
    double *ref = NULL;
    const char *lost = NULL;
    if (c->fatal) return;
    bench_progress(c, "backward N = %lld: generating random normal inputs and dout", (long long)n);
    fq = cli_malloc(n_in * 4);
    fk = cli_malloc(n_in * 4);
    if (want_full) fvf = cli_malloc(n_in * 4);
    if (want_shared) fvs = cli_malloc(n_vs * 4);
    fgo = cli_malloc(n_out * 4);
    hgrad = cli_malloc(n_grad * 4);
    if (!fq || !fk || (want_full && !fvf) || (want_shared && !fvs) || !fgo || !hgrad) {
        lost = "out of host memory for the inputs";
    } else {
        bench_op_inputs(o, n, fq, fk, fvf, fvs);   /* the forward's rows' inputs */
        cli_fill_normal(fgo, n_out, o->seed, (uint64_t)n * 8 + 6);   /* dout: a stream of its own */
        if (n <= BWD_CHECK_MAX_N) ref = malloc(sizeof(double) * n_grad);   /* NULL: unchecked */
    }
    for (int dt = 0; dt < 3; dt++) {
        if (!o->dtypes[dt]) continue;
        const dswa_dtype dtype = (dswa_dtype)dt;
        const size_t es = dswa_dtype_size(dtype);
        void *hq = fq, *hk = fk, *hvf = fvf, *hvs = fvs, *hgo = fgo;
        void *dq = NULL, *dk = NULL, *dvf = NULL, *dvs = NULL, *dgo = NULL, *dout = NULL,
             *dgrad = NULL;
        char group_msg[320];
        const char *group_err = lost;
        if (!group_err && dtype != DSWA_F32) {
            hq = bench_converted(fq, n_in, dtype);
            hk = bench_converted(fk, n_in, dtype);
            hvf = bench_converted(fvf, n_in, dtype);
            hvs = bench_converted(fvs, n_vs, dtype);
            hgo = bench_converted(fgo, n_out, dtype);
            if (!hq || !hk || (fvf && !hvf) || (fvs && !hvs) || !hgo)
                group_err = "out of host memory for the converted inputs";
        }
        if (!group_err && c->cuda && !c->fatal) {
            bench_progress(c, "backward N = %lld %s: copying the inputs to the device",
                           (long long)n, dswa_dtype_name(dtype));
            if (gpu_alloc(&dq, n_in * es, "q") || gpu_alloc(&dk, n_in * es, "k") ||
                (hvf && gpu_alloc(&dvf, n_in * es, "v (2H heads)")) ||
                (hvs && gpu_alloc(&dvs, n_vs * es, "v (shared)")) ||
                gpu_alloc(&dgo, n_out * es, "dout") || gpu_alloc(&dout, n_out * es, "out") ||
                gpu_alloc(&dgrad, n_grad * es, "gradients")) {
                snprintf(group_msg, sizeof group_msg, "CUDA error: %s", gpu_error());
                group_err = group_msg;   /* out of device memory: the next shape may fit */
            } else if (gpu_upload(dq, hq, n_in * es, "q") || gpu_upload(dk, hk, n_in * es, "k") ||
                       (hvf && gpu_upload(dvf, hvf, n_in * es, "v (2H heads)")) ||
                       (hvs && gpu_upload(dvs, hvs, n_vs * es, "v (shared)")) ||
                       gpu_upload(dgo, hgo, n_out * es, "dout")) {
                group_err = bench_cuda_lost(c, group_msg, sizeof group_msg);
            }
        }
        for (int sh = 0; sh < 2; sh++) {
            if ((sh == 0 && !want_full) || (sh == 1 && !want_shared)) continue;
            const dswa_problem p = bench_same_l_problem(o, n, dtype, sh);
            const dswa_backward_problem bp = dswa_backward_problem_default(&p);
            /* dq, dk and dv packed in one buffer: (B, N, 2H, D) twice, then dV (2H or H heads) */
            const size_t nv = sh ? n_vs : n_in, grad_elems = 2 * n_in + nv;
            bench_row *row = &out_rows[(*nrow)++];
            void *ws = NULL;
            bench_init_row(c, row, l, n, dtype, sh, &p);
            backward_sizes(c, row, dswa_backward_min_bytes(&bp), &p);
            if (group_err || c->fatal) {
                snprintf(row->msg, sizeof row->msg, "%s",
                         group_err ? group_err : "not run after a CUDA error");
                continue;
            }
            const size_t ws_bytes = c->cuda ? dswa_backward_workspace_bytes(&bp) : 0;
            if (ws_bytes && gpu_alloc(&ws, ws_bytes, "workspace")) {
                snprintf(row->msg, sizeof row->msg, "CUDA error: %s", gpu_error());
                continue;
            }
            char *g = c->cuda ? dgrad : hgrad;
            const void *q[1] = {c->cuda ? dq : hq}, *k[1] = {c->cuda ? dk : hk};
            const void *v[1] = {c->cuda ? (sh ? dvs : dvf) : (sh ? hvs : hvf)};
            void *out[1] = {dout};
            dswa_job job = {.p = &p, .q = q, .k = k, .v = v, .out = out, .nbuf = 1,
                            .pass = PASS_BWD, .bp = &bp, .dout = c->cuda ? dgo : hgo,
                            .grad = g, .dq = g, .dk = g + n_in * es, .dv = g + 2 * n_in * es,
                            .ws = ws, .ws_bytes = ws_bytes};
            void *hout = NULL;
            bench_progress(c, "backward N = %lld %s, V %s: running", (long long)n,
                           dswa_dtype_name(dtype), sh ? "shared" : "2H");
            const int t = c->cuda ? bench_time_cuda_calls(c, row, &job, hgrad, grad_elems * es)
                                  : bench_time_cpu_calls(c, row, &job, grad_elems * es);
            if (t == 0 && ref) {
                double *r = ref;
                if (dswa_reference_backward(&bp, hq, hk, sh ? hvs : hvf, hgo, r, r + n_in,
                                            r + 2 * n_in, NULL) == DSWA_OK) {
                    row->rel_err = rel_error_f64(hgrad, dtype, r, (int64_t)grad_elems);
                    row->tol = bench_backward_tolerance(c, dtype, bp.fwd.math);
                }
            }
            if (t == 0 && c->cuda) {
                finish_cuda(c, row, &job, dtype, (int64_t)grad_elems, hgrad);
            } else if (t == 0) {
                bench_finish_backward_row(c, row, dtype, (int64_t)grad_elems, hgrad);
                if ((hout = cli_malloc(n_out * es)) != NULL) {
                    out[0] = hout;
                    (void)bench_time_cpu_fwd_bwd(c, row, &job, grad_elems * es);
                }
                cli_free(hout);
            }
            gpu_free(ws);
        }
        gpu_free(dq); gpu_free(dk); gpu_free(dvf); gpu_free(dvs); gpu_free(dgo); gpu_free(dout);
        gpu_free(dgrad);
        if (hq != fq) cli_free(hq);
        if (hk != fk) cli_free(hk);
        if (hvf != fvf) cli_free(hvf);
        if (hvs != fvs) cli_free(hvs);
        if (hgo != fgo) cli_free(hgo);
    }
    cli_free(fq); cli_free(fk); cli_free(fvf); cli_free(fvs); cli_free(fgo); cli_free(hgrad);
    free(ref);
}

/* ---- the fused block ------------------------------------------------------------------------ */

/* The norms' gradients at `base`, 2 + 4 * SAME_D floats: q_norm's alpha, gamma, beta, then
   k_norm's. */
static dswa_samel_norm_grads norm_grads(float *base) {
    const dswa_samel_norm_grads g = {
        {base, base + 1, base + 1 + SAME_D},
        {base + 1 + 2 * SAME_D, base + 2 + 2 * SAME_D, base + 2 + 3 * SAME_D}};
    return g;
}

void bench_run_samel_backward_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows,
                                    int *nrow) {
    const bench_opts *o = c->o;
    const int64_t hd = (int64_t)SAME_H * SAME_D;
    const size_t n_x = (size_t)n * 5 * (size_t)hd, n_out = (size_t)n * (size_t)hd;
    float *fx = NULL, *fgo = NULL, norms[4 * SAME_D];   /* q gamma, q beta, k gamma, k beta */
    float hng[2 * (1 + 2 * SAME_D)];                     /* the norms' gradients (CPU) */
    void *hgrad = NULL, *dnorms = NULL, *dng = NULL;
    const char *lost = NULL;
    char lost_msg[320];
    if (c->fatal) return;
    bench_progress(c, "samel backward N = %lld: generating random normal inputs and dout",
                   (long long)n);
    fx = cli_malloc(n_x * 4);
    fgo = cli_malloc(n_out * 4);
    hgrad = cli_malloc(n_x * 4);
    if (!fx || !fgo || !hgrad) {
        lost = "out of host memory for the inputs";
    } else {
        bench_samel_inputs(o, n, fx, norms);   /* the forward's rows' inputs */
        cli_fill_normal(fgo, n_out, o->seed, (uint64_t)n * 8 + 7);
    }
    if (!lost && c->cuda &&
        (gpu_alloc(&dnorms, sizeof norms, "norms") || gpu_alloc(&dng, sizeof hng, "norm grads") ||
         gpu_upload(dnorms, norms, sizeof norms, "norms")))
        lost = bench_cuda_lost(c, lost_msg, sizeof lost_msg);
    for (int dt = 0; dt < 3; dt++) {
        if (!o->dtypes[dt]) continue;
        const dswa_dtype dtype = (dswa_dtype)dt;
        const size_t es = dswa_dtype_size(dtype);
        const dswa_samel_problem hp = bench_samel_problem(o, n, dtype, norms);
        const dswa_samel_problem dp = dnorms ? bench_samel_problem(o, n, dtype, dnorms) : hp;
        const dswa_samel_backward_problem hbp = dswa_samel_backward_problem_default(&hp);
        const dswa_samel_backward_problem dbp = dswa_samel_backward_problem_default(&dp);
        const dswa_problem op = bench_same_l_problem(o, n, dtype, 1);
        bench_row *row = &out_rows[(*nrow)++];
        void *hx = fx, *hgo = fgo, *dx = NULL, *dgo = NULL, *dout = NULL, *dgrad = NULL,
             *ws = NULL, *hout = NULL, *hcheck = NULL;
        size_t ws_bytes = 0;
        bench_init_row(c, row, l, n, dtype, 1, &op);
        backward_sizes(c, row, dswa_samel_backward_min_bytes(&hbp), &op);
        if (lost || c->fatal) {
            if (lost && !strncmp(lost, "unsupported", 11)) row->status = ROW_UNSUPPORTED;
            snprintf(row->msg, sizeof row->msg, "%s", lost ? lost : "not run after a CUDA error");
            continue;
        }
        if (dtype != DSWA_F32) {
            hx = bench_converted(fx, n_x, dtype);
            hgo = bench_converted(fgo, n_out, dtype);
            if (!hx || !hgo) {
                snprintf(row->msg, sizeof row->msg, "out of host memory for the converted inputs");
                goto next;
            }
        }
        const dswa_samel_norm_grads hg = norm_grads(hng), dg = dng ? norm_grads(dng) : hg;
        if (c->cuda) {
            bench_progress(c, "samel backward N = %lld %s: copying the inputs to the device",
                           (long long)n, dswa_dtype_name(dtype));
            ws_bytes = dswa_samel_backward_workspace_bytes(&dbp);
            if (gpu_alloc(&dx, n_x * es, "x") || gpu_alloc(&dgo, n_out * es, "dout") ||
                gpu_alloc(&dout, n_out * es, "out") || gpu_alloc(&dgrad, n_x * es, "dx") ||
                (ws_bytes && gpu_alloc(&ws, ws_bytes, "workspace"))) {
                snprintf(row->msg, sizeof row->msg, "CUDA error: %s", gpu_error());
                goto next;   /* out of device memory: the next shape may fit */
            }
            if (gpu_upload(dx, hx, n_x * es, "x") || gpu_upload(dgo, hgo, n_out * es, "dout")) {
                (void)bench_cuda_fatal(c, row, NULL);
                goto next;
            }
        } else if (!(hout = cli_malloc(n_out * es))) {
            snprintf(row->msg, sizeof row->msg, "out of host memory for the output");
            goto next;
        }
        {
            const void *x[1] = {c->cuda ? dx : hx};
            void *out[1] = {c->cuda ? dout : hout};
            dswa_job job = {.sp = c->cuda ? &dp : &hp, .x = x, .out = out, .nbuf = 1,
                            .pass = PASS_BWD, .sbp = c->cuda ? &dbp : &hbp,
                            .dout = c->cuda ? dgo : hgo, .grad = c->cuda ? dgrad : hgrad,
                            .g = c->cuda ? &dg : &hg, .ws = ws, .ws_bytes = ws_bytes};
            bench_progress(c, "samel backward N = %lld %s: running", (long long)n,
                           dswa_dtype_name(dtype));
            const int t = c->cuda ? bench_time_cuda_calls(c, row, &job, hgrad, n_x * es)
                                  : bench_time_cpu_calls(c, row, &job, n_x * es);
            if (t != 0) goto next;
            /* The GPU's gradient against the CPU backend's, on the same inputs. */
            if (c->cuda && n <= BWD_CHECK_MAX_N && (hcheck = cli_malloc(n_x * es)) != NULL &&
                dswa_samel_backward_cpu(&hbp, hx, hgo, hcheck, &hg) == DSWA_OK) {
                row->rel_err = rel_error_same(hgrad, hcheck, dtype, (int64_t)n_x);
                row->tol = bench_backward_tolerance(c, dtype, hbp.fwd.math);
            }
            if (c->cuda) {
                finish_cuda(c, row, &job, dtype, (int64_t)n_x, hgrad);
            } else {
                bench_finish_backward_row(c, row, dtype, (int64_t)n_x, hgrad);
                (void)bench_time_cpu_fwd_bwd(c, row, &job, n_x * es);
            }
        }
    next:
        gpu_free(dx); gpu_free(dgo); gpu_free(dout); gpu_free(dgrad); gpu_free(ws);
        cli_free(hout);
        cli_free(hcheck);
        if (hx != fx) cli_free(hx);
        if (hgo != fgo) cli_free(hgo);
    }
    gpu_free(dnorms);
    gpu_free(dng);
    cli_free(fx);
    cli_free(fgo);
    cli_free(hgrad);
}
