/* Outputs against the library's float64 reference (dswa_reference_rows, public in dswa.h):
   the reference for a set of rows, and the relative error of an output over them, read
   through the tests' own element decoders (testutil.h). */
#ifndef DSWA_TESTS_COMPARE_H
#define DSWA_TESTS_COMPARE_H

#include <stdint.h>
#include "dswa.h"
#include "testutil.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element offsets of the views: inputs [b, i, p, h, d], output [b, i, h, d]. */
int64_t tu_in_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h, int64_t d);
int64_t tu_out_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t h, int64_t d);

/* dswa_reference_rows for rows [row_begin, row_end) (clamped to [0, N)) into a dense
   [B][row_end - row_begin][H][D] array; a status other than DSWA_OK aborts the test. */
void tu_reference_rows(const dswa_problem *p, const void *q, const void *k, const void *v,
                       int64_t row_begin, int64_t row_end, double *ref_dense);
/* All rows: [B][N][H][D]. */
void tu_reference(const dswa_problem *p, const void *q, const void *k, const void *v,
                  double *ref_dense);

/* Accumulator of a comparison, so that any set of rows can be compared piecewise. */
typedef struct tu_acc {
    double diff2;      /* sum of squared differences over compared (finite-reference) elements */
    double ref2;       /* sum of squared reference values over the same elements              */
    double max_abs;    /* largest absolute difference                                          */
    int64_t compared;  /* elements compared                                                    */
    int64_t nan_ok;    /* elements where the reference and the output are the same non-finite */
    int64_t mismatch;  /* elements where exactly one side is non-finite, or both are but differ */
} tu_acc;

void tu_acc_init(tu_acc *a);
/* Compares out (read through p->out and p->dtype) at rows [row_begin, row_end) of every batch
   and head against ref_dense, a dense [B][row_end - row_begin][H][D] array. */
void tu_acc_rows(tu_acc *a, const dswa_problem *p, const void *out, const double *ref_dense,
                 int64_t row_begin, int64_t row_end);
/* ||out - ref||_F / ||ref||_F over the compared elements; INFINITY if any mismatch (a NaN or
   inf in the output where the reference is finite, or a finite output where the reference is
   NaN); 0 when nothing differs (even if ||ref|| = 0), INFINITY if ||ref|| = 0 and out differs. */
double tu_acc_result(const tu_acc *a);

/* Relative Frobenius error of all of `out` against ref (dense [B][N][H][D]). */
double tu_rel_error(const dswa_problem *p, const void *out, const double *ref);
/* The same over rows [row_begin, row_end) (ref_dense as tu_reference_rows wrote it);
   *max_abs receives the largest absolute difference when not NULL. */
double tu_rel_error_rows(const dswa_problem *p, const void *out, const double *ref_dense,
                         int64_t row_begin, int64_t row_end, double *max_abs);

/* The relative error over a sample of query rows (every batch and head of each), for outputs
   too large to compare whole in a short test: every row of the first and the last 64-query
   tiles (the kernels' edges; with B > 1 the rows on both sides of every batch end), the full
   tile before a partial last one, and min(tiles / 4, 32) random whole tiles (2048 rows)
   drawn from rng. Where that is half of N or more, and when rng is NULL, all rows. *rows
   (when not NULL) receives the number of rows compared. */
double tu_err_sampled(const dswa_problem *p, const void *q, const void *k, const void *v,
                      const void *out, tu_rng *rng, int64_t *rows);

#ifdef __cplusplus
}
#endif
#endif
