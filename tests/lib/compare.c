/* See compare.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compare.h"
#include "testutil.h"

int64_t tu_in_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h, int64_t d) {
    return b * l->batch + i * l->seq + p * l->pair + h * l->head + d * l->dim;
}

int64_t tu_out_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t h, int64_t d) {
    return b * l->batch + i * l->seq + h * l->head + d * l->dim;
}

void tu_reference_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                       int64_t row_begin, int64_t row_end, double *ref_dense) {
    if (row_begin < 0) row_begin = 0;
    if (row_end > p->seq_len) row_end = p->seq_len;
    if (row_end < row_begin) row_end = row_begin;
    const dswa_status s = dswa_reference_rows(p, q, k, v, (int32_t)row_begin, (int32_t)row_end, ref_dense);
    if (s != DSWA_OK) {
        fprintf(stderr, "dswa_reference_rows failed: %s: %s\n", dswa_status_string(s), dswa_last_error());
        abort();
    }
}

void tu_reference(const dswa_problem *p, const void *q, const void *k, const void *v,
                  double *ref_dense) {
    tu_reference_rows(p, q, k, v, 0, p->seq_len, ref_dense);
}

void tu_acc_init(tu_acc *a) { memset(a, 0, sizeof *a); }

void tu_acc_rows(tu_acc *a, const dswa_problem *p, const void *out, const double *ref_dense,
                 int64_t row_begin, int64_t row_end) {
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
                    const double o = tu_load(out, tu_out_offset(&p->out, b, i, h, d), p->dtype);
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

double tu_acc_result(const tu_acc *a) {
    if (a->mismatch) return INFINITY;
    if (a->diff2 == 0.0) return 0.0;
    if (a->ref2 == 0.0) return INFINITY;
    return sqrt(a->diff2) / sqrt(a->ref2);
}

double tu_rel_error_rows(const dswa_problem *p, const void *out, const double *ref_dense,
                         int64_t row_begin, int64_t row_end, double *max_abs) {
    tu_acc a;
    tu_acc_init(&a);
    tu_acc_rows(&a, p, out, ref_dense, row_begin, row_end);
    if (max_abs) *max_abs = a.max_abs;
    return tu_acc_result(&a);
}

double tu_rel_error(const dswa_problem *p, const void *out, const double *ref) {
    return tu_rel_error_rows(p, out, ref, 0, p->seq_len, NULL);
}

double tu_err_sampled(const dswa_problem *p, const void *q, const void *k, const void *v,
                      const void *out, tu_rng *rng, int64_t *rows) {
    const int64_t n = p->seq_len, tiles = (n + 63) / 64;
    char *pick = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!pick) abort();
    int64_t picked = 0;
#define PICK_ROWS(a, b) \
    for (int64_t r_ = (a) < 0 ? 0 : (a); r_ < (b) && r_ < n; r_++) picked += !pick[r_], pick[r_] = 1
    if (rng) {
        PICK_ROWS(0, 64);
        PICK_ROWS((tiles - 1) * 64, n);
        if (n % 64) PICK_ROWS((tiles - 2) * 64, (tiles - 1) * 64);
        /* whole tiles rather than scattered rows: each run of rows is one call of the
           reference, and the kernels work tile by tile */
        const int64_t extra = tiles / 4 < 32 ? tiles / 4 : 32;
        for (int64_t t = 0; t < extra; t++) {
            const int64_t tile = tu_rng_range(rng, tiles);
            PICK_ROWS(tile * 64, tile * 64 + 64);
        }
    }
#undef PICK_ROWS
    if (!rng || 2 * picked >= n) { /* a sample of half the rows or more: all of them */
        memset(pick, 1, (size_t)n);
        picked = n;
    }
    tu_acc acc;
    tu_acc_init(&acc);
    for (int64_t r0 = 0; r0 < n;) { /* each run of picked rows at once */
        if (!pick[r0]) {
            r0++;
            continue;
        }
        int64_t r1 = r0;
        while (r1 < n && pick[r1]) r1++;
        double *ref = malloc(sizeof(double) * (size_t)(p->batch * (r1 - r0) * p->heads * p->head_dim));
        if (!ref) abort();
        tu_reference_rows(p, q, k, v, r0, r1, ref);
        tu_acc_rows(&acc, p, out, ref, r0, r1);
        free(ref);
        r0 = r1;
    }
    free(pick);
    if (rows) *rows = picked;
    /* every picked element was looked at, one way or another */
    if (acc.compared + acc.nan_ok + acc.mismatch != (int64_t)p->batch * picked * p->heads * p->head_dim)
        return INFINITY;
    return tu_acc_result(&acc);
}
