/* CPU backward of the op (the math is in include/dswa.h): dq, dk, dv and, on request,
 * dlambda from dout, recomputing the forward; fp32 arithmetic like the forward, dlambda summed
 * in double.
 *
 * Two passes, each an OpenMP loop over tasks (batch, block of BLK rows, head), heads fastest:
 *  1. query rows i: per pair, the scores over J(i), their max m and 1 / sum (so that
 *     P(i,j) = exp(s - m) * inv_l), A_p[i], delta = <dA_p[i], A_p[i]>, then dS and dq[i]. m,
 *     inv_l and delta go to a table of 6 floats per (b, i, h): all that pass 2 needs from
 *     pass 1 (O(B N H) memory; nothing N x N is ever held).
 *  2. key rows j: dk[j] and dv[j] gather over the queries that see j, i in [j - WR, j + WL],
 *     recomputing P(i,j) from the table with the same expression as pass 1 (so the same bits)
 *     and dP(i,j) from dA_p[i].
 * Gathering instead of scattering is what makes it deterministic: every output row is written
 * once, by the one task that owns it, after serial sums in a fixed order (increasing j for
 * dq, increasing i for dk and dv, pair 0 before pair 1 for a summed dv). The task split
 * depends on the problem only, never on the thread count, and dlambda is summed per task and
 * then over tasks in task order. So the results are bitwise the same for any thread count.
 *
 * A task converts the rows it reads (its block and the window's halo) into fp32 scratch rows
 * padded to a multiple of 8 floats, so strides and 16-bit dtypes are dealt with in one place;
 * dot products keep 8 partial sums in a fixed order (they vectorize without reassociation).
 */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "core/internal.h"
#include "cpu/backend.h"

#define BLK 32   /* rows per task: amortises the halo of WL + WR rows at SAME-L's window */
#define LANES 8  /* partial sums of a dot product; rows are padded to a multiple of this */

typedef struct bwd_plan {
    const dswa_backward_problem *bp;
    const dswa_problem *p;
    const void *q, *k, *v, *dout;
    void *dq, *dk, *dv;
    int64_t D, Dp;          /* head_dim, and head_dim rounded up to LANES */
    int64_t WL, WR;         /* the windows, clamped to N - 1 */
    int64_t nblk, ntask;
    int64_t rows;           /* most rows a task reads: min(N, BLK + WL + WR) */
    size_t per_thread;      /* floats of scratch per thread */
    float *stats;           /* [B][N][H][pair][3]: m, inv_l, delta */
    double *partial;        /* [ntask]: each pass-1 task's share of dlambda */
} bwd_plan;

/* ---- rows --------------------------------------------------------------------------------- */

static void load_row(float *dst, const void *base, int64_t off, int64_t sd, int64_t D,
                     int64_t Dp, dswa_dtype dt) {
    for (int64_t d = 0; d < D; d++) {
        const int64_t e = off + d * sd;
        dst[d] = dt == DSWA_F32 ? ((const float *)base)[e]
                 : dt == DSWA_F16 ? dswa_f16_to_f32(((const uint16_t *)base)[e])
                                  : dswa_bf16_to_f32(((const uint16_t *)base)[e]);
    }
    for (int64_t d = D; d < Dp; d++) dst[d] = 0.0f;
}

static void store_row(void *base, int64_t off, int64_t sd, const float *src, int64_t D,
                      dswa_dtype dt) {
    for (int64_t d = 0; d < D; d++) {
        const int64_t e = off + d * sd;
        if (dt == DSWA_F32) ((float *)base)[e] = src[d];
        else if (dt == DSWA_F16) ((uint16_t *)base)[e] = dswa_f32_to_f16(src[d]);
        else ((uint16_t *)base)[e] = dswa_f32_to_bf16(src[d]);
    }
}

static int64_t off5(const dswa_layout *l, int64_t b, int64_t i, int64_t pr, int64_t h) {
    return b * l->batch + i * l->seq + pr * l->pair + h * l->head;
}

/* <a, b> over Dp (a multiple of LANES) floats: LANES partial sums, then a fixed tree. */
static float dot(const float *restrict a, const float *restrict b, int64_t Dp) {
    float acc[LANES] = {0};
    for (int64_t d = 0; d < Dp; d += LANES)
        for (int u = 0; u < LANES; u++) acc[u] += a[d + u] * b[d + u];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

static void axpy(float *restrict y, float a, const float *restrict x, int64_t Dp) {
    for (int64_t d = 0; d < Dp; d++) y[d] += a * x[d];
}

/* P(i,j) from a score and its row's statistics: one expression for both passes. */
static float weight(float s, const float *st) { return expf(s - st[0]) * st[1]; }

static int64_t win_lo(const bwd_plan *P, int64_t i) { return i - P->WL < 0 ? 0 : i - P->WL; }
static int64_t win_hi(const bwd_plan *P, int64_t i) {
    const int64_t last = P->p->seq_len - 1;
    return i + P->WR > last ? last : i + P->WR;
}

/* The task's batch, head and rows [*r0, *r1). */
static void task_rows(const bwd_plan *P, int64_t t, int64_t *b, int64_t *h, int64_t *r0,
                      int64_t *r1) {
    const int64_t H = P->p->heads;
    *h = t % H;
    *b = t / H / P->nblk;
    *r0 = (t / H % P->nblk) * BLK;
    *r1 = *r0 + BLK < P->p->seq_len ? *r0 + BLK : P->p->seq_len;
}

static float *stats_at(const bwd_plan *P, int64_t b, int64_t i, int64_t h, int64_t pr) {
    return P->stats + (((b * P->p->seq_len + i) * P->p->heads + h) * 2 + pr) * 3;
}

/* ---- pass 1: query rows ------------------------------------------------------------------- */

static void pass_queries(const bwd_plan *P, float *mem, int64_t t) {
    const dswa_problem *p = P->p;
    const dswa_backward_problem *bp = P->bp;
    const dswa_dtype dt = p->dtype;
    const int64_t D = P->D, Dp = P->Dp, R = P->rows;
    float *kr[2] = {mem, mem + R * Dp}, *vr[2] = {mem + 2 * R * Dp, mem + 3 * R * Dp};
    float *qrow = mem + 4 * R * Dp, *g = qrow + Dp, *da = g + Dp, *a = da + Dp, *acc = a + Dp;
    float *s = acc + Dp;
    int64_t b, h, r0, r1;
    task_rows(P, t, &b, &h, &r0, &r1);
    const int64_t klo = win_lo(P, r0), khi = win_hi(P, r1 - 1);
    const int shared_v = p->v.pair == 0;
    for (int pr = 0; pr < 2; pr++)
        for (int64_t j = klo; j <= khi; j++) {
            load_row(kr[pr] + (j - klo) * Dp, P->k, off5(&p->k, b, j, pr, h), p->k.dim, D, Dp, dt);
            if (pr == 0 || !shared_v)
                load_row(vr[pr] + (j - klo) * Dp, P->v, off5(&p->v, b, j, pr, h), p->v.dim, D,
                         Dp, dt);
        }
    if (shared_v) vr[1] = vr[0];

    double part = 0.0;  /* this task's share of dlambda, summed in row order */
    for (int64_t i = r0; i < r1; i++) {
        const int64_t lo = win_lo(P, i), hi = win_hi(P, i);
        load_row(g, P->dout, off5(&bp->dout, b, i, 0, h), bp->dout.dim, D, Dp, dt);
        for (int pr = 0; pr < 2; pr++) {
            load_row(qrow, P->q, off5(&p->q, b, i, pr, h), p->q.dim, D, Dp, dt);
            const float c = pr == 0 ? 1.0f : -p->lambda;
            for (int64_t d = 0; d < Dp; d++) da[d] = c * g[d];
            float *st = stats_at(P, b, i, h, pr);
            /* The max propagates a NaN score (a comparison with NaN never replaces it). */
            float m = -INFINITY;
            for (int64_t j = lo; j <= hi; j++) {
                s[j - lo] = p->scale * dot(qrow, kr[pr] + (j - klo) * Dp, Dp);
                m = (s[j - lo] > m || s[j - lo] != s[j - lo]) && m == m ? s[j - lo] : m;
            }
            float l = 0.0f;
            for (int64_t j = lo; j <= hi; j++) l += expf(s[j - lo] - m);
            st[0] = m;
            st[1] = 1.0f / l;
            for (int64_t d = 0; d < Dp; d++) a[d] = 0.0f;
            for (int64_t j = lo; j <= hi; j++) {
                s[j - lo] = weight(s[j - lo], st);   /* now P(i, j) */
                axpy(a, s[j - lo], vr[pr] + (j - klo) * Dp, Dp);
            }
            st[2] = dot(da, a, Dp);
            for (int64_t d = 0; d < Dp; d++) acc[d] = 0.0f;
            for (int64_t j = lo; j <= hi; j++) {
                const float dp = dot(da, vr[pr] + (j - klo) * Dp, Dp);
                axpy(acc, s[j - lo] * (dp - st[2]), kr[pr] + (j - klo) * Dp, Dp);
            }
            for (int64_t d = 0; d < D; d++) acc[d] *= p->scale;
            store_row(P->dq, off5(&bp->dq, b, i, pr, h), bp->dq.dim, acc, D, dt);
            if (pr == 1 && P->partial) {
                double r = 0.0;
                for (int64_t d = 0; d < D; d++) r += (double)g[d] * (double)a[d];
                part -= r;
            }
        }
    }
    if (P->partial) P->partial[t] = part;
}

/* ---- pass 2: key rows --------------------------------------------------------------------- */

static void pass_keys(const bwd_plan *P, float *mem, int64_t t) {
    const dswa_problem *p = P->p;
    const dswa_backward_problem *bp = P->bp;
    const dswa_dtype dt = p->dtype;
    const int64_t D = P->D, Dp = P->Dp, R = P->rows;
    float *qr[2] = {mem, mem + R * Dp}, *dar[2] = {mem + 2 * R * Dp, mem + 3 * R * Dp};
    float *krow = mem + 4 * R * Dp, *vrow = krow + Dp, *gk = vrow + Dp, *gv = gk + Dp;
    int64_t b, h, r0, r1;
    task_rows(P, t, &b, &h, &r0, &r1);
    /* The queries that see a key of this block. */
    const int64_t ilo = r0 - P->WR < 0 ? 0 : r0 - P->WR;
    const int64_t ihi = r1 - 1 + P->WL > p->seq_len - 1 ? p->seq_len - 1 : r1 - 1 + P->WL;
    for (int pr = 0; pr < 2; pr++) {
        const float c = pr == 0 ? 1.0f : -p->lambda;
        for (int64_t i = ilo; i <= ihi; i++) {
            float *da = dar[pr] + (i - ilo) * Dp;
            load_row(qr[pr] + (i - ilo) * Dp, P->q, off5(&p->q, b, i, pr, h), p->q.dim, D, Dp, dt);
            load_row(da, P->dout, off5(&bp->dout, b, i, 0, h), bp->dout.dim, D, Dp, dt);
            for (int64_t d = 0; d < Dp; d++) da[d] = c * da[d];   /* as pass 1 forms dA */
        }
    }
    const int sum_dv = bp->dv.pair == 0;
    for (int64_t j = r0; j < r1; j++) {
        /* i sees j iff i - WL <= j <= i + WR */
        const int64_t lo = j - P->WR < 0 ? 0 : j - P->WR;
        const int64_t hi = j + P->WL > p->seq_len - 1 ? p->seq_len - 1 : j + P->WL;
        for (int64_t d = 0; d < Dp; d++) gv[d] = 0.0f;
        for (int pr = 0; pr < 2; pr++) {
            load_row(krow, P->k, off5(&p->k, b, j, pr, h), p->k.dim, D, Dp, dt);
            load_row(vrow, P->v, off5(&p->v, b, j, pr, h), p->v.dim, D, Dp, dt);
            for (int64_t d = 0; d < Dp; d++) gk[d] = 0.0f;
            if (!sum_dv)
                for (int64_t d = 0; d < Dp; d++) gv[d] = 0.0f;
            for (int64_t i = lo; i <= hi; i++) {
                const float *qi = qr[pr] + (i - ilo) * Dp, *da = dar[pr] + (i - ilo) * Dp;
                const float *st = stats_at(P, b, i, h, pr);
                const float w = weight(p->scale * dot(qi, krow, Dp), st);
                axpy(gk, w * (dot(da, vrow, Dp) - st[2]), qi, Dp);
                axpy(gv, w, da, Dp);
            }
            for (int64_t d = 0; d < D; d++) gk[d] *= p->scale;
            store_row(P->dk, off5(&bp->dk, b, j, pr, h), bp->dk.dim, gk, D, dt);
            if (!sum_dv || pr == 1)
                store_row(P->dv, off5(&bp->dv, b, j, pr, h), bp->dv.dim, gv, D, dt);
        }
    }
}

/* ---- entry point -------------------------------------------------------------------------- */

dswa_status dswa_cpu_backward(const dswa_backward_problem *bp, const void *q, const void *k,
                              const void *v, const void *dout, void *dq, void *dk, void *dv,
                              float *dlambda) {
    const dswa_problem *p = &bp->fwd;
    bwd_plan P;
    P.bp = bp; P.p = p;
    P.q = q; P.k = k; P.v = v; P.dout = dout;
    P.dq = dq; P.dk = dk; P.dv = dv;
    const int64_t N = p->seq_len;
    P.D = p->head_dim;
    P.Dp = (P.D + LANES - 1) / LANES * LANES;
    P.WL = p->window_left < N - 1 ? p->window_left : N - 1;
    P.WR = p->window_right < N - 1 ? p->window_right : N - 1;
    P.rows = BLK + P.WL + P.WR < N ? BLK + P.WL + P.WR : N;
    P.nblk = (N + BLK - 1) / BLK;
    P.ntask = (int64_t)p->batch * P.nblk * p->heads;

    /* Everything is allocated before anything is written, so a failure leaves no trace. The
       sizes are checked: inputs may broadcast (zero strides), so N * D is bounded only
       through dq's span, in elements, not in these bytes. */
    const int team = P.ntask < omp_get_max_threads() ? (int)P.ntask : omp_get_max_threads();
    size_t per, nstats, scratch, bytes;
    int overflow = __builtin_mul_overflow((size_t)P.rows, 4, &per) ||
                   __builtin_add_overflow(per, 5, &per) ||   /* pass 1's 5 rows of Dp */
                   __builtin_mul_overflow(per, (size_t)P.Dp, &per) ||
                   __builtin_add_overflow(per, (size_t)P.rows, &per) ||   /* and its scores */
                   __builtin_mul_overflow(per, (size_t)team, &scratch) ||
                   __builtin_mul_overflow((size_t)p->batch * (size_t)N, (size_t)p->heads * 6,
                                          &nstats) ||
                   __builtin_add_overflow(scratch, nstats, &bytes) ||
                   __builtin_mul_overflow(bytes, sizeof(float), &bytes);
    P.per_thread = per;
    float *mem = overflow ? NULL : malloc(bytes);
    P.partial = dlambda && !overflow ? malloc(sizeof(double) * (size_t)P.ntask) : NULL;
    if (!mem || (dlambda && !P.partial)) {
        free(mem);
        free(P.partial);
        if (overflow)
            return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                             "CPU backward scratch: more than SIZE_MAX bytes for %d threads", team);
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "CPU backward scratch: %zu bytes (%d threads, and a table of 6 floats "
                         "per row and head) could not be allocated", bytes, team);
    }
    P.stats = mem + scratch;

    /* Pass 2 reads the table pass 1 writes: the implicit barrier between the loops orders them. */
#pragma omp parallel num_threads(team)
    {
        float *mine = mem + P.per_thread * (size_t)omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < P.ntask; t++) pass_queries(&P, mine, t);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < P.ntask; t++) pass_keys(&P, mine, t);
    }
    if (dlambda) {
        double sum = 0.0;
        for (int64_t t = 0; t < P.ntask; t++) sum += P.partial[t];
        *dlambda = (float)sum;
    }
    free(mem);
    free(P.partial);
    return DSWA_OK;
}
