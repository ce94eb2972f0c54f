/* The float64 reference: see ref64.h. Deliberately naive: one query row at a time, every
   score materialised, softmax with the maximum subtracted, all in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ref64.h"

double ref64_f16_to_double(uint16_t h) {
    const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double x;
    if (exp == 0x1f) x = man ? NAN : INFINITY;
    else if (exp == 0) x = ldexp((double)man, -24);              /* zero / subnormal */
    else x = ldexp(1.0 + (double)man / 1024.0, exp - 15);
    return sign ? -x : x;
}

double ref64_bf16_to_double(uint16_t h) {
    /* bf16 is the top half of an IEEE binary32: decode the fields directly. */
    const int sign = (h >> 15) & 1, exp = (h >> 7) & 0xff, man = h & 0x7f;
    double x;
    if (exp == 0xff) x = man ? NAN : INFINITY;
    else if (exp == 0) x = ldexp((double)man, -133);             /* 2^-126 * man / 128 */
    else x = ldexp(1.0 + (double)man / 128.0, exp - 127);
    return sign ? -x : x;
}

double ref64_load(const void *buf, int64_t idx, dswa_dtype dtype) {
    switch (dtype) {
    case DSWA_F32: {
        float f;
        memcpy(&f, (const char *)buf + idx * 4, 4);
        return (double)f;
    }
    case DSWA_F16: {
        uint16_t h;
        memcpy(&h, (const char *)buf + idx * 2, 2);
        return ref64_f16_to_double(h);
    }
    case DSWA_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)buf + idx * 2, 2);
        return ref64_bf16_to_double(h);
    }
    }
    return NAN;
}

int64_t ref64_in_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h,
                        int64_t d) {
    return b * l->batch + i * l->seq + p * l->pair + h * l->head + d * l->dim;
}

int64_t ref64_out_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t h, int64_t d) {
    return b * l->batch + i * l->seq + h * l->head + d * l->dim;
}

/* a[0..D) = attention of pair `pr` for (b, i, h); s is scratch for the window's scores. */
static void attend(const dswa_problem *p, const void *q, const void *k, const void *v,
                   int64_t b, int64_t i, int64_t h, int pr, double *s, double *a) {
    const int64_t N = p->seq_len, D = p->head_dim;
    int64_t lo = i - (int64_t)p->window_left, hi = i + (int64_t)p->window_right;
    if (lo < 0) lo = 0;
    if (hi > N - 1) hi = N - 1;
    const double scale = (double)p->scale;

    double m = -INFINITY;
    int any_nan = 0;
    for (int64_t j = lo; j <= hi; j++) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; d++)
            dot += ref64_load(q, ref64_in_offset(&p->q, b, i, pr, h, d), p->dtype) *
                   ref64_load(k, ref64_in_offset(&p->k, b, j, pr, h, d), p->dtype);
        s[j - lo] = scale * dot;
        if (isnan(s[j - lo])) any_nan = 1;
        else if (s[j - lo] > m) m = s[j - lo];
    }
    if (any_nan) m = NAN;                       /* NaN score: the whole softmax is NaN */
    double sum = 0.0;
    for (int64_t j = lo; j <= hi; j++) {
        s[j - lo] = exp(s[j - lo] - m);
        sum += s[j - lo];
    }
    for (int64_t d = 0; d < D; d++) a[d] = 0.0;
    for (int64_t j = lo; j <= hi; j++) {
        const double w = s[j - lo] / sum;
        for (int64_t d = 0; d < D; d++)
            a[d] += w * ref64_load(v, ref64_in_offset(&p->v, b, j, pr, h, d), p->dtype);
    }
}

void ref64_query(const dswa_problem *p, const void *q, const void *k, const void *v,
                 int64_t b, int64_t i, int64_t h, double *row) {
    const int64_t N = p->seq_len, D = p->head_dim;
    int64_t w = (int64_t)p->window_left + (int64_t)p->window_right + 1;
    if (w > N) w = N;
    double *s = malloc(sizeof(double) * (size_t)(w > 0 ? w : 1));
    double *a1 = malloc(sizeof(double) * (size_t)D);
    if (!s || !a1) abort();
    attend(p, q, k, v, b, i, h, 0, s, row);
    attend(p, q, k, v, b, i, h, 1, s, a1);
    const double lambda = (double)p->lambda;
    for (int64_t d = 0; d < D; d++) row[d] = row[d] - lambda * a1[d];
    free(s);
    free(a1);
}

void ref64_forward_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                        int64_t row_begin, int64_t row_end, double *out_dense) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    if (row_begin < 0) row_begin = 0;
    if (row_end > N) row_end = N;
    const int64_t R = row_end - row_begin;
    if (R <= 0 || B <= 0) return;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = row_begin; i < row_end; i++)
            for (int64_t h = 0; h < H; h++)
                ref64_query(p, q, k, v, b, i, h, out_dense + ((b * R + (i - row_begin)) * H + h) * D);
}

void ref64_forward(const dswa_problem *p, const void *q, const void *k, const void *v,
                   double *out_dense) {
    ref64_forward_rows(p, q, k, v, 0, p->seq_len, out_dense);
}

void ref64_acc_init(ref64_acc *a) { memset(a, 0, sizeof *a); }

void ref64_acc_rows(ref64_acc *a, const dswa_problem *p, const void *out,
                    const double *ref_dense, int64_t row_begin, int64_t row_end) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    if (row_begin < 0) row_begin = 0;
    if (row_end > N) row_end = N;
    const int64_t R = row_end - row_begin;
    if (R <= 0 || B <= 0) return;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = row_begin; i < row_end; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const double r = ref_dense[((b * R + (i - row_begin)) * H + h) * D + d];
                    const double o = ref64_load(out, ref64_out_offset(&p->out, b, i, h, d), p->dtype);
                    if (isfinite(r) && isfinite(o)) {
                        const double e = o - r;
                        a->diff2 += e * e;
                        a->ref2 += r * r;
                        if (fabs(e) > a->max_abs) a->max_abs = fabs(e);
                        a->compared++;
                    } else if (isnan(r) && isnan(o)) {
                        a->nan_ok++;
                    } else if (isinf(r) && r == o) {
                        a->nan_ok++;   /* the same infinity */
                    } else {
                        a->mismatch++;
                        a->max_abs = INFINITY;
                    }
                }
}

double ref64_acc_result(const ref64_acc *a) {
    if (a->mismatch) return INFINITY;
    if (a->diff2 == 0.0) return 0.0;
    if (a->ref2 == 0.0) return INFINITY;
    return sqrt(a->diff2) / sqrt(a->ref2);
}

double ref64_rel_error_rows(const dswa_problem *p, const void *out, const double *ref_dense,
                            int64_t row_begin, int64_t row_end, double *max_abs) {
    ref64_acc a;
    ref64_acc_init(&a);
    ref64_acc_rows(&a, p, out, ref_dense, row_begin, row_end);
    if (max_abs) *max_abs = a.max_abs;
    return ref64_acc_result(&a);
}

double ref64_rel_error(const dswa_problem *p, const void *out, const double *ref) {
    return ref64_rel_error_rows(p, out, ref, 0, p->seq_len, NULL);
}
