/* The tool's comparison with the library's float64 reference (dswa_reference_rows): the
   relative Frobenius error over a set of query rows, computed run by run of consecutive rows. */
#include <math.h>
#include <stdlib.h>

#include "cli.h"

double cli_ref_rel_error(const dswa_problem *p, const void *q, const void *k, const void *v,
                         const void *out, const int32_t *rows, int nrows, double *max_abs) {
    const int64_t B = p->batch, H = p->heads, D = p->head_dim;
    const size_t es = dswa_dtype_size(p->dtype);
    double diff2 = 0.0, ref2 = 0.0, worst = 0.0;
    int64_t mismatch = 0;
    int i = 0;
    while (i < nrows) {
        int j = i + 1; /* rows[i..j) are consecutive */
        while (j < nrows && rows[j] == rows[j - 1] + 1) j++;
        const int64_t R = j - i;
        double *ref = malloc(sizeof(double) * (size_t)(B * R * H * D));
        if (!ref || dswa_reference_rows(p, q, k, v, rows[i], rows[j - 1] + 1, ref) != DSWA_OK) {
            free(ref);
            if (max_abs) *max_abs = NAN;
            return NAN;
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t d = 0; d < D; d++) {
                        const double x = ref[((b * R + r) * H + h) * D + d];
                        const int64_t e = b * p->out.batch + (rows[i] + r) * p->out.seq +
                                          h * p->out.head + d * p->out.dim;
                        float of;
                        dswa_convert_to_f32(p->dtype, (const char *)out + e * (int64_t)es, &of, 1);
                        const double o = of;
                        if (isfinite(x) && isfinite(o)) {
                            diff2 += (o - x) * (o - x);
                            ref2 += x * x;
                            if (fabs(o - x) > worst) worst = fabs(o - x);
                        } else if (!(isnan(x) && isnan(o)) && !(isinf(x) && x == o)) {
                            mismatch++; /* non-finite on one side only, or another infinity */
                        }
                    }
        free(ref);
        i = j;
    }
    if (max_abs) *max_abs = mismatch ? INFINITY : worst;
    if (mismatch) return INFINITY;
    if (diff2 == 0.0) return 0.0;
    return ref2 == 0.0 ? INFINITY : sqrt(diff2) / sqrt(ref2);
}
