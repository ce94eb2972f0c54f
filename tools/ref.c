/* The tool's use of the float64 reference (tests/lib/ref64): relative error over a set of
   query rows, computed run by run of consecutive rows. */
#include <math.h>
#include <stdlib.h>

#include "cli.h"
#include "ref/ref64.h"

double cli_ref_rel_error(const dswa_problem *p, const void *q, const void *k, const void *v,
                         const void *out, const int32_t *rows, int nrows, double *max_abs) {
    ref64_acc acc;
    ref64_acc_init(&acc);
    const size_t row_elems = (size_t)p->batch * (size_t)p->heads * (size_t)p->head_dim;
    int i = 0;
    while (i < nrows) {
        int j = i + 1;   /* rows[i..j) are consecutive */
        while (j < nrows && rows[j] == rows[j - 1] + 1) j++;
        double *ref = malloc(sizeof(double) * row_elems * (size_t)(j - i));
        if (!ref) {
            if (max_abs) *max_abs = NAN;
            return NAN;
        }
        ref64_forward_rows(p, q, k, v, rows[i], (int64_t)rows[j - 1] + 1, ref);
        ref64_acc_rows(&acc, p, out, ref, rows[i], (int64_t)rows[j - 1] + 1);
        free(ref);
        i = j;
    }
    if (max_abs) *max_abs = acc.max_abs;
    return ref64_acc_result(&acc);
}
