/* The float64 reference of the backward, dswa_reference_backward (dswa.h). Written from the
   math, plainly and independently of the CPU backward: for each (batch, head, pair) and each
   query i in turn, the softmax row P(i, .) recomputed in double, dP(i,j) = <dA[i], V[j]>,
   dS = P * (dP - sum_j P * dP) (the row sum of P * dP, where the backend uses <dA, A>: the
   same number by a different road), and the gradients accumulated serially, dk and dv
   scattered from each query (the backend gathers them per key). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "ref/ref64.h"

/* One (batch b, head h): rows of the views decoded to doubles, then each pair's queries in
   order. dq, dk, dv are the dense outputs (see dswa.h); returns this (b, h)'s part of
   dlambda, or NAN when memory ran out (*failed set). */
static double grad_one(const dswa_backward_problem *bp, const void *q, const void *k,
                       const void *v, const void *dout, int64_t b, int64_t h, double *dq,
                       double *dk, double *dv, int *failed) {
    const dswa_problem *p = &bp->fwd;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim;
    const int64_t PV = bp->dv.pair == 0 ? 1 : 2;
    const double scale = (double)p->scale;
    double *Q = malloc(sizeof(double) * (size_t)(N * D)), *K = malloc(sizeof(double) * (size_t)(N * D));
    double *V = malloc(sizeof(double) * (size_t)(N * D)), *G = malloc(sizeof(double) * (size_t)(N * D));
    double *P = malloc(sizeof(double) * (size_t)N), *dP = malloc(sizeof(double) * (size_t)N);
    double *dA = malloc(sizeof(double) * (size_t)D), *A = malloc(sizeof(double) * (size_t)D);
    double dlambda = 0.0;
    if (!Q || !K || !V || !G || !P || !dP || !dA || !A) {
        *failed = 1;
        dlambda = NAN;
        goto done;
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t d = 0; d < D; d++)
            G[i * D + d] = dswa_ref_load(dout, dswa_ref_offset(&bp->dout, b, i, 0, h, d), p->dtype);
    for (int64_t pr = 0; pr < 2; pr++) {
        const double c = pr == 0 ? 1.0 : -(double)p->lambda;   /* d out / d A_pr */
        for (int64_t i = 0; i < N; i++)
            for (int64_t d = 0; d < D; d++) {
                Q[i * D + d] = dswa_ref_load(q, dswa_ref_offset(&p->q, b, i, pr, h, d), p->dtype);
                K[i * D + d] = dswa_ref_load(k, dswa_ref_offset(&p->k, b, i, pr, h, d), p->dtype);
                V[i * D + d] = dswa_ref_load(v, dswa_ref_offset(&p->v, b, i, pr, h, d), p->dtype);
            }
        for (int64_t i = 0; i < N; i++) {
            const int64_t lo = i - p->window_left < 0 ? 0 : i - p->window_left;
            const int64_t hi = i + (int64_t)p->window_right > N - 1 ? N - 1 : i + p->window_right;
            double m = -INFINITY, sum = 0.0;
            for (int64_t j = lo; j <= hi; j++) {
                double s = 0.0;
                for (int64_t d = 0; d < D; d++) s += Q[i * D + d] * K[j * D + d];
                P[j - lo] = scale * s;
                if (P[j - lo] > m) m = P[j - lo];
            }
            for (int64_t j = lo; j <= hi; j++) sum += (P[j - lo] = exp(P[j - lo] - m));
            for (int64_t j = lo; j <= hi; j++) P[j - lo] /= sum;
            for (int64_t d = 0; d < D; d++) {
                dA[d] = c * G[i * D + d];
                A[d] = 0.0;
            }
            double rowsum = 0.0;   /* sum_j P(i,j) dP(i,j) */
            for (int64_t j = lo; j <= hi; j++) {
                double s = 0.0;
                for (int64_t d = 0; d < D; d++) {
                    s += dA[d] * V[j * D + d];
                    A[d] += P[j - lo] * V[j * D + d];
                }
                dP[j - lo] = s;
                rowsum += P[j - lo] * s;
            }
            double *gq = dq + (((b * N + i) * 2 + pr) * H + h) * D;
            for (int64_t j = lo; j <= hi; j++) {
                const double ds = P[j - lo] * (dP[j - lo] - rowsum);
                double *gk = dk + (((b * N + j) * 2 + pr) * H + h) * D;
                double *gv = dv + (((b * N + j) * PV + (PV == 2 ? pr : 0)) * H + h) * D;
                for (int64_t d = 0; d < D; d++) {
                    gq[d] += scale * ds * K[j * D + d];
                    gk[d] += scale * ds * Q[i * D + d];
                    gv[d] += P[j - lo] * dA[d];
                }
            }
            if (pr == 1)
                for (int64_t d = 0; d < D; d++) dlambda -= G[i * D + d] * A[d];
        }
    }
done:
    free(Q); free(K); free(V); free(G); free(P); free(dP); free(dA); free(A);
    return dlambda;
}

dswa_status dswa_reference_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                    const void *v, const void *dout, double *dq, double *dk,
                                    double *dv, double *dlambda) {
    dswa_status s = dswa_validate_backward_inputs(p, q, k, v, dout);
    if (s) return s;
    const dswa_problem *f = &p->fwd;
    const int64_t B = f->batch, N = f->seq_len, H = f->heads, D = f->head_dim;
    if (B == 0 || N == 0) {
        if (dlambda) *dlambda = 0.0;
        return DSWA_OK;
    }
    if (!dq || !dk || !dv)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s = NULL: must point to dense doubles "
                         "(dswa.h gives the shapes)", !dq ? "dq" : !dk ? "dk" : "dv");
    const int64_t PV = p->dv.pair == 0 ? 1 : 2;
    memset(dq, 0, sizeof(double) * (size_t)(B * N * 2 * H * D));
    memset(dk, 0, sizeof(double) * (size_t)(B * N * 2 * H * D));
    memset(dv, 0, sizeof(double) * (size_t)(B * N * PV * H * D));
    /* One task per (b, h): each writes only its own head's elements; the parts of dlambda are
       summed afterwards in task order. */
    double *part = malloc(sizeof(double) * (size_t)(B * H));
    if (!part) return dswa_fail(DSWA_ERR_OUT_OF_MEMORY, "out of memory for the reference's rows");
    int failed = 0;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) reduction(|| : failed)
#endif
    for (int64_t t = 0; t < B * H; t++) {
        int f1 = 0;
        part[t] = grad_one(p, q, k, v, dout, t / H, t % H, dq, dk, dv, &f1);
        failed = failed || f1;
    }
    double sum = 0.0;
    for (int64_t t = 0; t < B * H; t++) sum += part[t];
    free(part);
    if (failed) return dswa_fail(DSWA_ERR_OUT_OF_MEMORY, "out of memory for the reference's rows");
    if (dlambda) *dlambda = sum;
    return DSWA_OK;
}
