/* An independent float64 reference for dswa, written for the tests from the math in dswa.h
   (plain loops, its own f16/bf16 decoders; it shares no code with src/).

   For batch b, query i, output head h and pair p in {0, 1}:
     J(i)   = { j : max(0, i - window_left) <= j <= min(N - 1, i + window_right) }
     s_p(j) = scale * <Q[b,i,p,h,:], K[b,j,p,h,:]>
     a_p    = sum_{j in J(i)} softmax_j(s_p)(j) * V[b,j,p,h,:]
     out[b,i,h,:] = a_0 - lambda * a_1

   Inputs are read through the problem's element strides and dtype. Everything is computed in
   double; a NaN anywhere in a query's inputs (its Q row, a K row or V row of its window)
   propagates to its output exactly as the arithmetic carries it. */
#ifndef DSWA_TESTS_REF64_H
#define DSWA_TESTS_REF64_H

#include <stdint.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element decoders (exact: every f16/bf16/f32 value is a double). */
double ref64_f16_to_double(uint16_t h);
double ref64_bf16_to_double(uint16_t h);
/* Element `idx` (in elements, not bytes) of a buffer of `dtype`, as a double. */
double ref64_load(const void *buf, int64_t idx, dswa_dtype dtype);

/* Element offsets of the views: inputs [b, i, p, h, d], output [b, i, h, d]. */
int64_t ref64_in_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h,
                        int64_t d);
int64_t ref64_out_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t h, int64_t d);

/* One output row out[b, i, h, 0..D) into row[0..D). */
void ref64_query(const dswa_problem *p, const void *q, const void *k, const void *v,
                 int64_t b, int64_t i, int64_t h, double *row);

/* Queries [row_begin, row_end) of every batch and head, into a dense
   [B][row_end - row_begin][H][D] array. Rows are clamped to [0, N). */
void ref64_forward_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                        int64_t row_begin, int64_t row_end, double *out_dense);
/* All queries: out_dense is [B][N][H][D]. */
void ref64_forward(const dswa_problem *p, const void *q, const void *k, const void *v,
                   double *out_dense);

/* Accumulator of a comparison, so that any set of rows can be compared piecewise. */
typedef struct ref64_acc {
    double diff2;      /* sum of squared differences over compared (finite-reference) elements */
    double ref2;       /* sum of squared reference values over the same elements              */
    double max_abs;    /* largest absolute difference                                          */
    int64_t compared;  /* elements compared                                                    */
    int64_t nan_ok;    /* elements where the reference and the output are both NaN (skipped)    */
    int64_t mismatch;  /* elements where exactly one side is non-finite, or both are but differ */
} ref64_acc;

void ref64_acc_init(ref64_acc *a);
/* Compares out (read through p->out and p->dtype) at rows [row_begin, row_end) of every batch
   and head against ref_dense, a dense [B][row_end - row_begin][H][D] array. */
void ref64_acc_rows(ref64_acc *a, const dswa_problem *p, const void *out,
                    const double *ref_dense, int64_t row_begin, int64_t row_end);
/* ||out - ref||_F / ||ref||_F over the compared elements; INFINITY if any mismatch (a NaN or
   inf in the output where the reference is finite, or a finite output where the reference is
   NaN); 0 when nothing differs (even if ||ref|| = 0), INFINITY if ||ref|| = 0 and out differs. */
double ref64_acc_result(const ref64_acc *a);

/* Relative Frobenius error of all of `out` against ref (dense [B][N][H][D]). */
double ref64_rel_error(const dswa_problem *p, const void *out, const double *ref);
/* The same over rows [row_begin, row_end) (ref_dense as ref64_forward_rows wrote it);
   *max_abs receives the largest absolute difference when not NULL. */
double ref64_rel_error_rows(const dswa_problem *p, const void *out, const double *ref_dense,
                            int64_t row_begin, int64_t row_end, double *max_abs);

#ifdef __cplusplus
}
#endif
#endif
