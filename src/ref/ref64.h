/* Transitional: what tools/ref.c reads of the float64 reference until it moves to the public
   dswa_reference_rows (dswa.h) and compares outputs itself. Nothing else includes this. */
#ifndef DSWA_REF_REF64_H
#define DSWA_REF_REF64_H

#include <stdint.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dswa_reference_rows without its checks (rows clamped to [0, N); aborts when out of memory). */
void ref64_forward_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                        int64_t row_begin, int64_t row_end, double *out_dense);

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
/* ||out - ref||_F / ||ref||_F over the compared elements; INFINITY if any mismatch. */
double ref64_acc_result(const ref64_acc *a);

#ifdef __cplusplus
}
#endif
#endif
