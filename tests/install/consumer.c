/* A program that uses an installed dswa the way a C user would: tests/install/test_install.sh
 * builds it against the installed tree (pkg-config, CMake find_package) and runs it. It runs
 * dswa_forward_cpu on a small problem with fresh random inputs and compares every output with
 * the header's formula computed here in double. Exit 0 only when every output matches. */
#include <dswa.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { B = 2, N = 13, H = 2, D = 8, WL = 3, WR = 2 };

/* (B, N, 2H, D) contiguous, pair-major inside the 2H heads; the output is (B, N, H, D). */
static size_t in_at(int b, int i, int pair, int h, int d) {
    return ((((size_t)b * N + i) * 2 * H + (size_t)pair * H + h) * D) + d;
}

int main(void) {
    const size_t n_in = (size_t)B * N * 2 * H * D, n_out = (size_t)B * N * H * D;
    float *q = malloc(n_in * sizeof *q), *k = malloc(n_in * sizeof *k);
    float *v = malloc(n_in * sizeof *v), *out = malloc(n_out * sizeof *out);
    if (!q || !k || !v || !out) { fprintf(stderr, "consumer: out of memory\n"); return 1; }
    const unsigned seed = (unsigned)time(NULL);
    srand(seed);
    for (size_t x = 0; x < n_in; x++) {
        q[x] = 2.0f * rand() / RAND_MAX - 1.0f;
        k[x] = 2.0f * rand() / RAND_MAX - 1.0f;
        v[x] = 2.0f * rand() / RAND_MAX - 1.0f;
    }
    for (size_t x = 0; x < n_out; x++) out[x] = NAN;  /* poison: every output must be written */

    dswa_problem p = dswa_problem_default(B, N, H, D, WL);
    p.window_right = WR;
    p.lambda = 0.75f;
    const dswa_status s = dswa_forward_cpu(&p, q, k, v, out);
    if (s != DSWA_OK) {
        fprintf(stderr, "consumer: dswa_forward_cpu: %s: %s\n", dswa_status_string(s), dswa_last_error());
        return 1;
    }

    const double scale = 1.0 / sqrt((double)D);
    double worst = 0.0;
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int h = 0; h < H; h++) {
                const int j0 = i - WL < 0 ? 0 : i - WL, j1 = i + WR > N - 1 ? N - 1 : i + WR;
                double a[2][D];
                for (int pair = 0; pair < 2; pair++) {
                    double sc[WL + WR + 1], mx = -INFINITY, sum = 0.0;
                    for (int j = j0; j <= j1; j++) {
                        double dot = 0.0;
                        for (int d = 0; d < D; d++)
                            dot += (double)q[in_at(b, i, pair, h, d)] * k[in_at(b, j, pair, h, d)];
                        sc[j - j0] = scale * dot;
                        if (sc[j - j0] > mx) mx = sc[j - j0];
                    }
                    for (int j = j0; j <= j1; j++) sum += sc[j - j0] = exp(sc[j - j0] - mx);
                    for (int d = 0; d < D; d++) {
                        double acc = 0.0;
                        for (int j = j0; j <= j1; j++) acc += sc[j - j0] * v[in_at(b, j, pair, h, d)];
                        a[pair][d] = acc / sum;
                    }
                }
                for (int d = 0; d < D; d++) {
                    const double want = a[0][d] - 0.75 * a[1][d];
                    const double got = out[(((size_t)b * N + i) * H + h) * D + d];
                    const double err = fabs(got - want);
                    if (!(err <= 1e-5 + 1e-4 * fabs(want))) {  /* also catches NaN */
                        if (bad++ < 5)
                            fprintf(stderr, "consumer: out[%d,%d,%d,%d] = %.7g, want %.7g\n",
                                    b, i, h, d, got, want);
                    }
                    if (err > worst) worst = err;
                }
            }
    free(q); free(k); free(v); free(out);
    printf("consumer: dswa %s, %d outputs, max abs error %.2e, %d wrong (seed %u)\n",
           DSWA_VERSION_STRING, (int)n_out, worst, bad, seed);
    return bad ? 1 : 0;
}
