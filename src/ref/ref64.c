/* The float64 reference, dswa_reference_rows (dswa.h). Deliberately naive and independent of
   the kernels and the CPU backend: its own element decoders (exact: every f16, bf16 and f32
   value is a double), one query row at a time, every score materialised, softmax with the
   maximum subtracted, all in double. For batch b, query i, output head h and pair p:
     J(i)   = { j : max(0, i - window_left) <= j <= min(N - 1, i + window_right) }
     s_p(j) = scale * <Q[b,i,p,h,:], K[b,j,p,h,:]>
     a_p    = sum_{j in J(i)} softmax_j(s_p)(j) * V[b,j,p,h,:]
     out[b,i,h,:] = a_0 - lambda * a_1
   A NaN anywhere in a query's inputs (its Q row, a K or V row of its window) propagates to its
   output exactly as the arithmetic carries it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "ref/ref64.h"

/* 2^e as a double, built from its bits (e in the normal range). */
static double pow2(int e) {
    const uint64_t bits = (uint64_t)(e + 1023) << 52;
    double x;
    memcpy(&x, &bits, 8);
    return x;
}

static double f16_to_double(uint16_t h) {
    const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double x;
    if (exp == 0x1f) x = man ? NAN : INFINITY;
    else if (exp == 0) x = (double)man * pow2(-24);               /* zero / subnormal */
    else x = (double)(1024 + man) * pow2(exp - 25);               /* (1 + man/2^10) 2^(exp-15) */
    return sign ? -x : x;
}

static double bf16_to_double(uint16_t h) {
    /* bf16 is the top half of an IEEE binary32: decode the fields directly. */
    const int sign = (h >> 15) & 1, exp = (h >> 7) & 0xff, man = h & 0x7f;
    double x;
    if (exp == 0xff) x = man ? NAN : INFINITY;
    else if (exp == 0) x = (double)man * pow2(-133);              /* 2^-126 * man / 2^7 */
    else x = (double)(128 + man) * pow2(exp - 134);               /* (1 + man/2^7) 2^(exp-127) */
    return sign ? -x : x;
}

double dswa_ref_load(const void *buf, int64_t idx, dswa_dtype dtype) {
    switch (dtype) {
    case DSWA_F32: {
        float f;
        memcpy(&f, (const char *)buf + idx * 4, 4);
        return (double)f;
    }
    case DSWA_F16: {
        uint16_t h;
        memcpy(&h, (const char *)buf + idx * 2, 2);
        return f16_to_double(h);
    }
    case DSWA_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)buf + idx * 2, 2);
        return bf16_to_double(h);
    }
    }
    return NAN;
}

int64_t dswa_ref_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h, int64_t d) {
    return b * l->batch + i * l->seq + p * l->pair + h * l->head + d * l->dim;
}


/* A[(i - i0) * D + d] = a_pr[d] of queries i in [i0, i1) for batch b, head h, pair pr.
   The K and V rows that these queries see are decoded once, then each query is a plain
   loop over its window. 0, or -1 when memory ran out. */
static int pair_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                     int64_t b, int64_t h, int64_t pr, int64_t i0, int64_t i1, double *A) {
    const int64_t N = p->seq_len, D = p->head_dim;
    const int64_t WL = p->window_left, WR = p->window_right;
    const double scale = (double)p->scale;
    const int64_t jlo = i0 - WL < 0 ? 0 : i0 - WL;
    const int64_t jhi = (i1 - 1) + WR > N - 1 ? N - 1 : (i1 - 1) + WR;
    const int64_t nj = jhi - jlo + 1;
    double *kd = malloc(sizeof(double) * (size_t)(nj * D));
    double *vd = malloc(sizeof(double) * (size_t)(nj * D));
    double *qd = malloc(sizeof(double) * (size_t)D);
    double *s = malloc(sizeof(double) * (size_t)nj);
    if (!kd || !vd || !qd || !s) {
        free(kd); free(vd); free(qd); free(s);
        return -1;
    }
    for (int64_t j = jlo; j <= jhi; j++)
        for (int64_t d = 0; d < D; d++) {
            kd[(j - jlo) * D + d] = dswa_ref_load(k, dswa_ref_offset(&p->k, b, j, pr, h, d), p->dtype);
            vd[(j - jlo) * D + d] = dswa_ref_load(v, dswa_ref_offset(&p->v, b, j, pr, h, d), p->dtype);
        }
    for (int64_t i = i0; i < i1; i++) {
        double *a = A + (i - i0) * D;
        const int64_t lo = i - WL < 0 ? 0 : i - WL;
        const int64_t hi = i + WR > N - 1 ? N - 1 : i + WR;
        for (int64_t d = 0; d < D; d++)
            qd[d] = dswa_ref_load(q, dswa_ref_offset(&p->q, b, i, pr, h, d), p->dtype);
        /* scores, and their maximum; a NaN score makes the whole softmax NaN */
        double m = -INFINITY;
        int any_nan = 0;
        for (int64_t j = lo; j <= hi; j++) {
            double dot = 0.0;
            for (int64_t d = 0; d < D; d++) dot += qd[d] * kd[(j - jlo) * D + d];
            const double sc = scale * dot;
            s[j - lo] = sc;
            if (isnan(sc)) any_nan = 1;
            else if (sc > m) m = sc;
        }
        if (any_nan) m = NAN;
        double sum = 0.0;
        for (int64_t j = lo; j <= hi; j++) {
            s[j - lo] = exp(s[j - lo] - m);
            sum += s[j - lo];
        }
        for (int64_t d = 0; d < D; d++) a[d] = 0.0;
        for (int64_t j = lo; j <= hi; j++) {
            const double w = s[j - lo] / sum;
            for (int64_t d = 0; d < D; d++) a[d] += w * vd[(j - jlo) * D + d];
        }
    }
    free(kd);
    free(vd);
    free(qd);
    free(s);
    return 0;
}

/* Rows [row_begin, row_end) (within [0, N)) into out_dense; 0, or -1 when memory ran out. */
static int forward_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                        int64_t row_begin, int64_t row_end, double *out_dense) {
    const int64_t B = p->batch, H = p->heads, D = p->head_dim;
    const int64_t R = row_end - row_begin;
    if (R <= 0 || B <= 0 || H <= 0 || D <= 0) return 0;
    const double lambda = (double)p->lambda;
    int failed = 0;
    /* Independent tasks (batch, head, chunk of CH rows), spread over threads when built with
       OpenMP; each task's arithmetic is the same serial loop either way. */
    const int64_t CH = 64, nch = (R + CH - 1) / CH, ntask = B * H * nch;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) reduction(|| : failed)
#endif
    for (int64_t t = 0; t < ntask; t++) {
        const int64_t c = t % nch, h = (t / nch) % H, b = t / (nch * H);
        const int64_t r0 = c * CH, r1 = r0 + CH < R ? r0 + CH : R;
        double *a0 = malloc(sizeof(double) * (size_t)((r1 - r0) * D));
        double *a1 = malloc(sizeof(double) * (size_t)((r1 - r0) * D));
        if (!a0 || !a1 || pair_rows(p, q, k, v, b, h, 0, row_begin + r0, row_begin + r1, a0) ||
            pair_rows(p, q, k, v, b, h, 1, row_begin + r0, row_begin + r1, a1)) {
            failed = 1;
        } else {
            for (int64_t r = r0; r < r1; r++)
                for (int64_t d = 0; d < D; d++)
                    out_dense[((b * R + r) * H + h) * D + d] =
                        a0[(r - r0) * D + d] - lambda * a1[(r - r0) * D + d];
        }
        free(a0);
        free(a1);
    }
    return failed ? -1 : 0;
}

dswa_status dswa_reference_rows(const dswa_problem *p, const void *q, const void *k,
                                const void *v, int32_t row_begin, int32_t row_end, double *out) {
    dswa_status s = dswa_validate_inputs(p, q, k, v);
    if (s) return s;
    if (row_begin < 0 || row_begin > row_end || row_end > p->seq_len)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rows [%d, %d): must satisfy 0 <= row_begin <= "
                         "row_end <= seq_len = %d", (int)row_begin, (int)row_end, (int)p->seq_len);
    if (p->batch == 0 || row_begin == row_end) return DSWA_OK;
    if (!out)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "out = NULL: must point to %lld doubles",
                         (long long)p->batch * (row_end - row_begin) * p->heads * p->head_dim);
    if (forward_rows(p, q, k, v, row_begin, row_end, out))
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY, "out of memory for the reference's scratch rows");
    return DSWA_OK;
}
