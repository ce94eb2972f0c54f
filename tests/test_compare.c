/* The tests' sampled comparison (tu_err_sampled, tests/lib/compare.c), which the GPU tests use
   for production-size outputs: on a CPU-backend output it passes, and a single wrong element
   in the rows it always compares (first and last tiles, the full tile before a partial last
   one, both sides of a batch end) or a NaN there makes it fail; without an rng it compares
   every row, and a wrong element anywhere fails it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "compare.h"
#include "testutil.h"

int main(void) {
    /* B = 2 (a batch end), N not a multiple of 64 (a partial last tile) */
    dswa_problem p = dswa_problem_default(2, 64 * 68 + 37, 3, 64, 17);
    p.scale = 0.125f;
    p.lambda = 0.7f;
    tu_rng r;
    tu_rng_init(&r, tu_fresh_seed());
    void *q = tu_new_input(&p, &p.q, &r, NULL), *k = tu_new_input(&p, &p.k, &r, NULL);
    void *v = tu_new_input(&p, &p.v, &r, NULL);
    tu_outbuf o = tu_outbuf_new(&p);
    CHECK(dswa_forward_cpu(&p, q, k, v, o.out) == DSWA_OK, "dswa_forward_cpu: %s", dswa_last_error());
    const double tol = 1e-4;
    int64_t rows = 0;
    double e = tu_err_sampled(&p, q, k, v, o.out, &r, &rows);
    CHECK(e <= tol && rows >= 3 * 64 && 2 * rows < p.seq_len, "right output: error %.3e over %lld of %d rows", e,
          (long long)rows, p.seq_len);
    printf("right output: error %.2e over a sample of %lld of %d rows\n", e, (long long)rows, p.seq_len);
    e = tu_err_sampled(&p, q, k, v, o.out, NULL, &rows);
    CHECK(e <= tol && rows == p.seq_len, "all rows: error %.3e over %lld rows", e, (long long)rows);

    /* one wrong element where the sample always looks: (batch, row, head) */
    const int N = p.seq_len;
    const int64_t spots[6][3] = {{0, 0, 0}, {1, 0, 2}, {0, N - 1, 1}, {1, N - 1, 0}, {0, 64 * 68 - 1, 2},
                                 {1, 64 * 67, 1}};
    for (int s = 0; s < 6; s++)
        for (int nan = 0; nan < 2; nan++) {
            const int64_t at = tu_out_offset(&p.out, spots[s][0], spots[s][1], spots[s][2], 33);
            const double keep = tu_load(o.out, at, p.dtype);
            tu_store(o.out, at, p.dtype, nan ? NAN : keep + 0.5);
            e = tu_err_sampled(&p, q, k, v, o.out, &r, NULL);
            CHECK(e > tol, "%s at batch %lld row %lld head %lld: sampled error %.3e passes", nan ? "a NaN" : "+0.5",
                  (long long)spots[s][0], (long long)spots[s][1], (long long)spots[s][2], e);
            tu_store(o.out, at, p.dtype, keep);
        }
    /* anywhere, when every row is compared */
    tu_rng pos;
    tu_rng_init(&pos, tu_fresh_seed());
    const int64_t at = tu_out_offset(&p.out, tu_rng_range(&pos, 2), tu_rng_range(&pos, N), tu_rng_range(&pos, 3), 7);
    const double keep = tu_load(o.out, at, p.dtype);
    tu_store(o.out, at, p.dtype, keep - 0.5);
    e = tu_err_sampled(&p, q, k, v, o.out, NULL, NULL);
    CHECK(e > tol, "all rows: a wrong element at offset %lld passes (error %.3e)", (long long)at, e);
    tu_store(o.out, at, p.dtype, keep);
    CHECK(tu_err_sampled(&p, q, k, v, o.out, NULL, NULL) <= tol, "restored output fails");

    tu_outbuf_free(&o);
    tu_free(q);
    tu_free(k);
    tu_free(v);
    TEST_MAIN_RETURN("test_compare");
}
