/* How a row of `dswa bench` is timed and judged, whichever it is (the op's or the fused
   block's): on the CPU, calls until the median settles; on the GPU, a CUDA graph of GRAPH_CALLS
   back-to-back calls, replayed, beside the fastest same-size copy timed the same way, hot and
   (the op's rows) cold; then the row's figures and its check. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GPU_PLAIN_CALLS 20    /* plain calls, each between two events (call_ms) */
#define CPU_MIN_CALLS 10      /* the CPU median: at least this many calls ... */
#define CPU_MIN_SECONDS 2.0   /* ... and at least this long, */
#define CPU_MAX_CALLS 200     /* ... and at most this many, */
#define CPU_MAX_SECONDS 30.0  /* or past this long once CPU_FEW_CALLS are in (large shapes) */
#define CPU_FEW_CALLS 5
#define MAX_COLD_BUFFERS 64

void bench_progress(const bench_ctx *c, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "[%7.1fs] ", cli_now() - c->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

double bench_tolerance(const bench_ctx *c, dswa_dtype dtype, dswa_math math) {
    if (dtype != DSWA_F32) return 1e-2;
    if (math == DSWA_MATH_FP32) return 1e-5;
    if (math == DSWA_MATH_TF32 || c->cuda) return 3e-3;
    return 1e-5;
}

/* Rows spread evenly over [0, n), both ends included. */
int bench_sample_rows(int64_t n, int want, int32_t *rows) {
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

/* Scans `total` elements of buf (dense: the output, or the gradients, named by `what`) for the
   poison pattern; fills the metrics and judges the row by its error (row->rel_err against
   row->tol, set by the caller; a NaN rel_err passes when `unchecked_ok`: not checked). */
static void finish_row(const bench_ctx *c, bench_row *row, dswa_dtype dtype, int64_t total,
                       const void *buf, const char *what, int unchecked_ok) {
    const double ms = row->time.median;
    int64_t unwritten = 0;
#pragma omp parallel for reduction(+ : unwritten) schedule(static)
    for (int64_t i = 0; i < total; i++) unwritten += cli_is_poison(buf, i, dtype);
    row->unwritten = unwritten;
    row->gbs = row->min_bytes / (ms * 1e-3) / 1e9;
    row->pct_floor = 100.0 * row->floor_ms / ms;
    row->gflops = row->flops / (ms * 1e-3) / 1e9;
    row->gflops_core = row->gflops / c->threads;
    if (unwritten > 0) {
        row->status = ROW_FAIL;
        snprintf(row->msg, sizeof row->msg, "%lld %s elements still hold the poison pattern",
                 (long long)unwritten, what);
    } else if (!(unchecked_ok && isnan(row->rel_err)) && !(row->rel_err <= row->tol)) {
        row->status = ROW_FAIL;
        snprintf(row->msg, sizeof row->msg, "relative error %.3g above the tolerance %.0e",
                 row->rel_err, row->tol);
    } else {
        row->status = ROW_OK;
    }
}

void bench_finish_row(const bench_ctx *c, bench_row *row, dswa_dtype dtype, int64_t total,
                      const void *hout) {
    finish_row(c, row, dtype, total, hout, "output", 0);
}

void bench_init_row(const bench_ctx *c, bench_row *row, int64_t l, int64_t n,
                    dswa_dtype dtype, int shared, const dswa_problem *p) {
    memset(row, 0, sizeof *row);
    row->l = l;
    row->n = n;
    row->dtype = dtype;
    row->shared = shared;
    row->min_bytes = dswa_min_bytes(p);
    row->flops = dswa_useful_flops(p);
    row->floor_ms = row->min_bytes / (c->copy_gbs * 1e9) * 1e3;
    row->time.median = row->time.min = row->time.max = NAN;
    row->copy = row->fwd_bwd = row->time;
    row->cold.time = row->cold.copy = row->time;
    row->call_ms = row->gbs = row->pct_floor = row->pct_copy = NAN;
    row->gflops = row->gflops_core = row->rel_err = row->max_abs = row->tol = NAN;
    row->status = ROW_ERROR;
}

/* The buffer a job's result is judged by: the forward's output, or the backward's gradients. */
static void *result_of(const dswa_job *j) { return j->pass == PASS_FWD ? j->out[0] : j->grad; }

static dswa_status job_cpu(dswa_job *j) {
    dswa_status s = DSWA_OK;
    if (j->pass != PASS_BWD)
        s = j->sp ? dswa_samel_forward_cpu(j->sp, j->x[0], j->out[0])
                  : dswa_forward_cpu(j->p, j->q[0], j->k[0], j->v[0], j->out[0]);
    if (s == DSWA_OK && j->pass != PASS_FWD)
        s = j->sp ? dswa_samel_backward_cpu(j->sbp, j->x[0], j->dout, j->grad, j->g)
                  : dswa_backward_cpu(j->bp, j->q[0], j->k[0], j->v[0], j->dout, j->dq, j->dk,
                                      j->dv, NULL);
    return j->status = s;
}

static dswa_status job_cuda(dswa_job *j, int b, void *stream) {
    dswa_status s = DSWA_OK;
    if (j->pass != PASS_BWD)
        s = j->sp ? dswa_samel_forward_cuda(j->sp, j->x[b], j->out[b], stream)
                  : dswa_forward_cuda(j->p, j->q[b], j->k[b], j->v[b], j->out[b], stream);
    if (s == DSWA_OK && j->pass != PASS_FWD)
        s = j->sp ? dswa_samel_backward_cuda(j->sbp, j->x[0], j->dout, j->grad, j->g, j->ws,
                                             j->ws_bytes, stream)
                  : dswa_backward_cuda(j->bp, j->q[0], j->k[0], j->v[0], j->dout, j->dq, j->dk,
                                       j->dv, NULL, j->ws, j->ws_bytes, stream);
    return j->status = s;
}

static const char *job_name(const dswa_job *j) {
    if (j->pass == PASS_FWD) return j->sp ? "dswa_samel_forward_cuda" : "dswa_forward_cuda";
    if (j->pass == PASS_BWD) return j->sp ? "dswa_samel_backward_cuda" : "dswa_backward_cuda";
    return j->sp ? "dswa_samel_forward_cuda + dswa_samel_backward_cuda"
                 : "dswa_forward_cuda + dswa_backward_cuda";
}

/* The CPU median needs many calls: with 3 the spread between runs reached 37 %. Unless
   --repeats fixes the count, calls continue until CPU_MIN_CALLS and CPU_MIN_SECONDS are both
   reached (at most CPU_MAX_CALLS; a shape too large for that stops after CPU_FEW_CALLS and
   CPU_MAX_SECONDS). 0: timed, the last call's output in job->out[0]; otherwise the row says
   why not (unsupported, or an error). */
int bench_time_cpu_calls(const bench_ctx *c, bench_row *row, dswa_job *job, size_t out_bytes) {
    const int fixed = c->o->repeats > 0;
    const int cap = fixed ? c->o->repeats : CPU_MAX_CALLS;
    double *t = malloc(sizeof(double) * (size_t)cap), spent = 0.0;
    int n = 0;
    if (!t) {
        row->status = ROW_ERROR;
        snprintf(row->msg, sizeof row->msg, "out of host memory");
        return -1;
    }
    memset(result_of(job), 0xff, out_bytes);
    for (int r = -c->warmup; r < cap; r++) {
        if (!fixed && ((n >= CPU_MIN_CALLS && spent >= CPU_MIN_SECONDS) ||
                       (n >= CPU_FEW_CALLS && spent >= CPU_MAX_SECONDS)))
            break;
        const double t0 = cli_now();
        dswa_status s = job_cpu(job);
        const double dt = cli_now() - t0;
        if (s != DSWA_OK) {
            row->status = s == DSWA_ERR_UNSUPPORTED ? ROW_UNSUPPORTED : ROW_ERROR;
            snprintf(row->msg, sizeof row->msg, "%s: %s",
                     s == DSWA_ERR_UNSUPPORTED ? "unsupported" : dswa_status_string(s),
                     dswa_last_error());
            free(t);
            return -1;
        }
        if (r >= 0) {
            t[n++] = dt * 1e3;
            spent += dt;
        }
    }
    row->time.median = cli_median(t, n);   /* sorts t */
    row->time.min = t[0];
    row->time.max = t[n - 1];
    row->time.replays = n;
    free(t);
    return 0;
}

/* ---- GPU ------------------------------------------------------------------------------ */

/* Call i of a graph runs on buffer set i mod nbuf. */
static int dswa_job_enqueue(void *ctx, int i, void *stream) {
    dswa_job *j = ctx;
    return job_cuda(j, i % j->nbuf, stream) == DSWA_OK ? 0 : -1;
}

/* Records a CUDA failure: the remaining rows are not run. Returns -1. */
int bench_cuda_fatal(bench_ctx *c, bench_row *row, const char *what) {
    c->fatal = 1;
    snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s%s", what ? what : "", gpu_error());
    row->status = ROW_ERROR;
    snprintf(row->msg, sizeof row->msg, "CUDA error: %.300s", c->fatal_msg);
    return -1;
}

const char *bench_cuda_lost(bench_ctx *c, char *msg, size_t msg_len) {
    snprintf(msg, msg_len, "CUDA error: %s", gpu_error());
    c->fatal = 1;
    snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gpu_error());
    return msg;
}

/* A library call (`what`) refused the row or failed; DSWA_ERR_CUDA is fatal. Returns 0 or -1. */
static int dswa_refused(bench_ctx *c, bench_row *row, dswa_status s, const char *what) {
    if (s == DSWA_ERR_UNSUPPORTED) {
        row->status = ROW_UNSUPPORTED;
        snprintf(row->msg, sizeof row->msg, "unsupported: %s", dswa_last_error());
        return 0;
    }
    row->status = ROW_ERROR;
    snprintf(row->msg, sizeof row->msg, "%s: %s", dswa_status_string(s), dswa_last_error());
    if (s == DSWA_ERR_CUDA) {
        c->fatal = 1;
        snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s: %s", what, dswa_last_error());
        return -1;
    }
    return 0;
}

/* The copy's share of a row's bytes: min_bytes counts bytes read + written, so a copy of half
   of them (rounded up to whole 16-byte vectors) moves as much. */
static size_t copy_bytes(double min_bytes) {
    const size_t half = (size_t)ceil(min_bytes / 2.0);
    return (half + 15) / 16 * 16;
}

/* Buffer sets to rotate over so that between two uses of one set the others move more than
   COLD_L2_FACTOR x L2 (at least 2 sets). */
static int cold_buffers(const bench_ctx *c, double set_bytes) {
    const double need = (double)COLD_L2_FACTOR * (double)(c->l2_bytes ? c->l2_bytes : 64u << 20);
    int nb = 1 + (int)ceil(need / set_bytes);
    if (nb < 2) nb = 2;
    return nb > MAX_COLD_BUFFERS ? MAX_COLD_BUFFERS : nb;
}

/* The fastest copy of min_bytes' worth over nbuf rotating buffer pairs (memoized by size).
   0; 1 when the buffers could not be allocated (msg says so; not fatal); -1 on a CUDA failure. */
static int fastest_copy(bench_ctx *c, double min_bytes, int nbuf, gpu_stats *st, char *method,
                        size_t method_len, char *msg, size_t msg_len) {
    const size_t bytes = copy_bytes(min_bytes);
    void *src[MAX_COLD_BUFFERS] = {0}, *dst[MAX_COLD_BUFFERS] = {0};
    gpu_copy_cfg cfg;
    int rc = 0;
    for (int i = 0; i < c->nmemo; i++)
        if (c->memo[i].bytes == bytes && c->memo[i].nbuf == nbuf) {
            *st = c->memo[i].st;
            snprintf(method, method_len, "%s", c->memo[i].method);
            return 0;
        }
    for (int b = 0; b < nbuf && rc == 0; b++)
        if (gpu_alloc(&src[b], bytes, "copy source") || gpu_alloc(&dst[b], bytes, "copy destination")) {
            snprintf(msg, msg_len, "copy not timed: %s", gpu_error());
            rc = 1;
        }
    if (rc == 0) {
        for (int b = 0; b < nbuf && rc == 0; b++)   /* defined bytes to copy */
            if (gpu_poison(src[b], bytes) != 0) rc = -1;
        if (rc == 0 && gpu_copy_fastest(dst, src, nbuf, bytes, GRAPH_CALLS, c->warmup, c->repeats,
                                         st, &cfg, NULL) != 0)
            rc = -1;
        if (rc == 0) {
            gpu_copy_describe(&cfg, bytes, method, method_len);
            if (c->nmemo < (int)(sizeof c->memo / sizeof c->memo[0])) {
                copy_memo *m = &c->memo[c->nmemo++];
                m->bytes = bytes;
                m->nbuf = nbuf;
                m->st = *st;
                snprintf(m->method, sizeof m->method, "%s", method);
            }
        }
    }
    for (int b = 0; b < nbuf; b++) {
        gpu_free(src[b]);
        gpu_free(dst[b]);
    }
    return rc;
}

/* Times a job of one buffer set on the GPU: the first call (which decides whether the backend
   takes the row at all), call_ms, then the main number: GRAPH_CALLS calls on the same buffers
   in one graph, replayed; the output (poisoned first) is downloaded into hout. 0: timed; 1:
   refused (the row says why); -1 after a CUDA failure (recorded in c->fatal_msg). */
int bench_time_cuda_calls(bench_ctx *c, bench_row *row, dswa_job *job, void *hout,
                          size_t out_bytes) {
    double t[GPU_PLAIN_CALLS];
    char what[96];
    dswa_status s;
    if (gpu_poison(result_of(job), out_bytes) != 0) return bench_cuda_fatal(c, row, NULL);
    if ((s = job_cuda(job, 0, NULL)) != DSWA_OK)
        return dswa_refused(c, row, s, job_name(job)) < 0 ? -1 : 1;
    snprintf(what, sizeof what, "first %s", job_name(job));
    if (gpu_sync(what) != 0) return bench_cuda_fatal(c, row, NULL);
    /* call_ms: plain calls each between two events, the host's launch included. */
    for (int r = 0; r < GPU_PLAIN_CALLS; r++) {
        if (gpu_timer_start() != 0) return bench_cuda_fatal(c, row, NULL);
        if ((s = job_cuda(job, 0, NULL)) != DSWA_OK)
            return dswa_refused(c, row, s, job_name(job)) < 0 ? -1 : 1;
        if ((t[r] = gpu_timer_stop()) < 0) return bench_cuda_fatal(c, row, NULL);
    }
    row->call_ms = cli_median(t, GPU_PLAIN_CALLS);
    const int g = gpu_graph_time(dswa_job_enqueue, job, GRAPH_CALLS, c->warmup, c->repeats,
                                 &row->time);
    if (g == -2) return dswa_refused(c, row, job->status, job_name(job)) < 0 ? -1 : 1;
    if (g != 0) return bench_cuda_fatal(c, row, "graph: ");
    if (gpu_sync("timed calls") != 0) return bench_cuda_fatal(c, row, NULL);
    if (gpu_download(hout, result_of(job), out_bytes, job->pass == PASS_FWD ? "out" : "gradients")
        != 0)
        return bench_cuda_fatal(c, row, NULL);
    return 0;
}

/* A forward + backward refused after the backward was timed: the row keeps the backward's
   status, and its message says why the pair has no time. */
static void fwd_bwd_refused(bench_row *row, int status) {
    char why[sizeof row->msg];
    snprintf(why, sizeof why, "%s", row->msg);
    row->status = status;
    snprintf(row->msg, sizeof row->msg, "forward + backward not timed: %.280s", why);
}

int bench_time_cuda_fwd_bwd(bench_ctx *c, bench_row *row, dswa_job *job) {
    const int pass = job->pass, status = row->status;
    job->pass = PASS_FWD_BWD;
    const int g = gpu_graph_time(dswa_job_enqueue, job, GRAPH_CALLS, c->warmup, c->repeats,
                                 &row->fwd_bwd);
    const int r = g == -2 ? dswa_refused(c, row, job->status, job_name(job)) : 0;
    job->pass = pass;
    if (g == -2) {
        if (r < 0) return -1;
        fwd_bwd_refused(row, status);
        return 1;
    }
    if (g != 0) return bench_cuda_fatal(c, row, "forward + backward graph: ");
    return gpu_sync("forward + backward") != 0 ? bench_cuda_fatal(c, row, NULL) : 0;
}

int bench_time_cpu_fwd_bwd(const bench_ctx *c, bench_row *row, dswa_job *job, size_t out_bytes) {
    const gpu_stats keep = row->time;
    const int pass = job->pass, status = row->status;
    job->pass = PASS_FWD_BWD;
    const int r = bench_time_cpu_calls(c, row, job, out_bytes);
    job->pass = pass;
    if (r == 0) row->fwd_bwd = row->time;
    else fwd_bwd_refused(row, status);
    row->time = keep;
    return r;
}

double bench_backward_tolerance(const bench_ctx *c, dswa_dtype dtype, dswa_math math) {
    if (dtype != DSWA_F32) return 1e-2;
    return c->cuda && math != DSWA_MATH_FP32 ? 5e-3 : 1e-4;
}

void bench_finish_backward_row(const bench_ctx *c, bench_row *row, dswa_dtype dtype,
                               int64_t total, const void *hgrad) {
    finish_row(c, row, dtype, total, hgrad, "gradient", 1);
}

/* The row's same-size copy (min_bytes read + written) and % of it. -1 after a CUDA failure. */
int bench_time_copy(bench_ctx *c, bench_row *row) {
    char msg[200] = "";
    const int f = fastest_copy(c, row->min_bytes, 1, &row->copy, row->copy_method,
                               sizeof row->copy_method, msg, sizeof msg);
    if (f < 0) return bench_cuda_fatal(c, row, "copy: ");
    if (f == 0) row->pct_copy = 100.0 * row->copy.median / row->time.median;
    else if (row->status == ROW_OK) snprintf(row->msg, sizeof row->msg, "%s", msg);
    return 0;
}

/* The row's cold numbers: the calls rotate over `buffers` sets of q, k, v and out (set 0 the
   row's own, the others copies of its inputs), the copies over their own rotating pairs.
   Returns -1 after a CUDA failure. */
int bench_time_cold(bench_ctx *c, bench_row *row, const dswa_problem *p, const void *dq,
                    const void *dk, const void *dv, void *dout, size_t in_bytes, size_t v_bytes,
                    size_t out_bytes) {
    cold_result *cr = &row->cold;
    const void *q[MAX_COLD_BUFFERS], *k[MAX_COLD_BUFFERS], *v[MAX_COLD_BUFFERS];
    void *out[MAX_COLD_BUFFERS];
    void *mine[MAX_COLD_BUFFERS * 4] = {0};
    int nmine = 0, rc = 0;
    const int nb = cold_buffers(c, row->min_bytes);
    q[0] = dq; k[0] = dk; v[0] = dv; out[0] = dout;
    for (int b = 1; b < nb; b++) {
        void *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
        if (gpu_alloc(&bq, in_bytes, "q (cold set)") || gpu_alloc(&bk, in_bytes, "k (cold set)") ||
            gpu_alloc(&bv, v_bytes, "v (cold set)") || gpu_alloc(&bo, out_bytes, "out (cold set)")) {
            snprintf(cr->msg, sizeof cr->msg, "not timed cold: %s", gpu_error());
            gpu_free(bq); gpu_free(bk); gpu_free(bv); gpu_free(bo);
            goto done;
        }
        mine[nmine++] = bq; mine[nmine++] = bk; mine[nmine++] = bv; mine[nmine++] = bo;
        if (gpu_copy_d2d(bq, dq, in_bytes, "q (cold set)") || gpu_copy_d2d(bk, dk, in_bytes, "k (cold set)") ||
            gpu_copy_d2d(bv, dv, v_bytes, "v (cold set)")) {
            rc = bench_cuda_fatal(c, row, "cold sets: ");
            goto done;
        }
        q[b] = bq; k[b] = bk; v[b] = bv; out[b] = bo;
    }
    {
        dswa_job job = {.p = p, .q = q, .k = k, .v = v, .out = out, .nbuf = nb};
        const int g = gpu_graph_time(dswa_job_enqueue, &job, GRAPH_CALLS, c->warmup, c->repeats,
                                     &cr->time);
        if (g == -2) {
            rc = dswa_refused(c, row, job.status, job_name(&job));
            goto done;
        }
        if (g != 0) {
            rc = bench_cuda_fatal(c, row, "cold graph: ");
            goto done;
        }
    }
    cr->buffers = nb;
    cr->copy_buffers = cold_buffers(c, row->min_bytes);
    for (int i = 0; i < nmine; i++) gpu_free(mine[i]);   /* room for the copy's buffers */
    nmine = 0;
    {
        const int f = fastest_copy(c, row->min_bytes, cr->copy_buffers, &cr->copy, cr->copy_method,
                                   sizeof cr->copy_method, cr->msg, sizeof cr->msg);
        if (f < 0) {
            rc = bench_cuda_fatal(c, row, "cold copy: ");
            goto done;
        }
        cr->done = f == 0;
    }
done:
    for (int i = 0; i < nmine; i++) gpu_free(mine[i]);
    return rc;
}

/* The copy candidates on 2 GiB (or 256 MiB on a small device), in graphs like the rows': the
   best kernel shape against cudaMemcpyAsync, so the table shows the kernel is not the weaker
   copy. Progress only; a failure is fatal to the bench. */
int bench_copy_reference(bench_ctx *c) {
    const gpu_copy_cfg *cfgs;
    gpu_stats each[16], best;
    gpu_copy_cfg cfg;
    void *src = NULL, *dst = NULL;
    size_t bytes = (size_t)2 << 30;   /* as the floor's cudaMemcpy: 2 GiB copied */
    if (gpu_copy_init() != 0) return -1;
    const int n = gpu_copy_candidates(&cfgs);
    if (gpu_alloc(&src, bytes, "copy source") || gpu_alloc(&dst, bytes, "copy destination")) {
        gpu_free(src);
        gpu_free(dst);
        src = dst = NULL;
        bytes = (size_t)256 << 20;
        if (gpu_alloc(&src, bytes, "copy source") || gpu_alloc(&dst, bytes, "copy destination"))
            goto failed;
    }
    if (gpu_poison(src, bytes) != 0 ||
        gpu_copy_fastest(&dst, &src, 1, bytes, GRAPH_CALLS, c->warmup, c->repeats, &best, &cfg,
                         each) != 0)
        goto failed;
    c->memcpy_graph_gbs = c->kernel_graph_gbs = -1.0;
    for (int k = 0; k < n && k < 16; k++) {
        char what[96];
        const double gbs = 2.0 * (double)bytes / (each[k].median * 1e-3) / 1e9;
        gpu_copy_describe(&cfgs[k], bytes, what, sizeof what);
        bench_progress(c, "  %.0f MiB copied: %-58s %7.1f GB/s", (double)bytes / (1 << 20), what,
                       gbs);
        if (cfgs[k].memcpy_async) {
            c->memcpy_graph_gbs = gbs;
        } else if (gbs > c->kernel_graph_gbs) {
            c->kernel_graph_gbs = gbs;
            snprintf(c->kernel_graph_cfg, sizeof c->kernel_graph_cfg, "%s", what);
        }
    }
    gpu_free(src);
    gpu_free(dst);
    return 0;
failed:
    gpu_free(src);
    gpu_free(dst);
    return -1;
}
