/* The float64 reference of the fused SAME-L block: samel_ref64.h says what it models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "samel_ref64.h"

/* ---- elements: decoded by their fields, rounded by scaling to the unit in the last place */

static double decode(const void *base, int64_t idx, dswa_dtype dt) {
    if (dt == DSWA_F32) {
        float f;
        memcpy(&f, (const char *)base + idx * 4, 4);
        return (double)f;
    }
    uint16_t u;
    memcpy(&u, (const char *)base + idx * 2, 2);
    const double sign = (u & 0x8000u) ? -1.0 : 1.0;
    if (dt == DSWA_BF16) {   /* 8 exponent bits, 7 mantissa bits */
        const int e = (u >> 7) & 0xff, m = u & 0x7f;
        if (e == 0xff) return m ? NAN : sign * INFINITY;
        return sign * (e ? ldexp(128 + m, e - 127 - 7) : ldexp(m, -126 - 7));
    }
    const int e = (u >> 10) & 0x1f, m = u & 0x3ff;   /* f16: 5 and 10 */
    if (e == 0x1f) return m ? NAN : sign * INFINITY;
    return sign * (e ? ldexp(1024 + m, e - 15 - 10) : ldexp(m, -14 - 10));
}

/* x rounded to nearest even in a binary format with `mant` stored mantissa bits, smallest
   normal exponent emin and largest finite value maxv; beyond maxv after rounding: inf. */
static double round_format(double x, int mant, int emin, double maxv) {
    if (!isfinite(x) || x == 0) return x;
    int ex;
    (void)frexp(x, &ex);                       /* |x| in [2^(ex-1), 2^ex) */
    const int e = ex - 1 < emin ? emin : ex - 1;
    const double r = ldexp(nearbyint(ldexp(x, mant - e)), e - mant);
    return fabs(r) > maxv ? copysign(INFINITY, x) : r;
}

double tu_samel_round(double x, dswa_dtype dt) {
    if (dt == DSWA_F16) return round_format(x, 10, -14, 65504.0);
    if (dt == DSWA_BF16) return round_format(x, 7, -126, ldexp(255.0, 120));
    return x;
}

static double as_fp32(double x) { return (double)(float)x; }

/* ---- the prologue ------------------------------------------------------------------------ */

void tu_samel_ref64_angle(const dswa_samel_problem *p, int64_t i, int f, double *co, double *si) {
    const double pos = as_fp32((double)((int64_t)p->pos_offset + i));
    const double inv = p->rope_freq ? (double)p->rope_freq[f]   /* the model's own */
                                    : as_fp32(1.0 / pow((double)p->rope_base, (2.0 * f) / p->rot_dims));
    const double ang = as_fp32(pos * inv);   /* exact product of two fp32, rounded once */
    *co = cos(ang);
    *si = sin(ang);
}

void tu_samel_ref64_row(const dswa_samel_problem *p, const void *qkv, int64_t b, int64_t i,
                        int ch, int64_t h, double *y) {
    const int D = p->head_dim, c = p->rot_dims / 2;
    const dswa_samel_norm *nm = (ch == 1 || ch == 4) ? &p->k_norm : &p->q_norm;
    const int64_t base = b * p->qkv.batch + i * p->qkv.seq + ch * p->qkv.chunk + h * p->qkv.head;
    for (int d = 0; d < D; d++) {
        const double x = decode(qkv, base + d * p->qkv.dim, p->dtype);
        y[d] = tu_samel_round((double)nm->gamma[d] * tanh((double)nm->alpha * x) + (double)nm->beta[d],
                           p->dtype);
    }
    for (int f = 0; f < c; f++) {
        double co, si;
        tu_samel_ref64_angle(p, i, f, &co, &si);
        const double lo = y[f], hi = y[f + c];
        y[f] = tu_samel_round(lo * co - hi * si, p->dtype);
        y[f + c] = tu_samel_round(hi * co + lo * si, p->dtype);
    }
}

/* ---- attention ----------------------------------------------------------------------------- */

void tu_samel_ref64(const dswa_samel_problem *p, const void *qkv, double *out) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    if (B <= 0 || N <= 0) return;
    /* q and k of both pairs after the prologue: [b][i][pair][h][d] */
    const size_t n = (size_t)(B * N * 2 * H * D);
    double *q = malloc(n * sizeof(double)), *k = malloc(n * sizeof(double));
    double *s = malloc((size_t)N * sizeof(double)), *a = malloc(2 * (size_t)D * sizeof(double));
    if (!q || !k || !s || !a) abort();
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int pr = 0; pr < 2; pr++)
                for (int64_t h = 0; h < H; h++) {
                    const size_t at = (size_t)((((b * N + i) * 2 + pr) * H + h) * D);
                    tu_samel_ref64_row(p, qkv, b, i, pr ? 3 : 0, h, q + at);
                    tu_samel_ref64_row(p, qkv, b, i, pr ? 4 : 1, h, k + at);
                }
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t lo = i - p->window_left < 0 ? 0 : i - p->window_left;
                const int64_t hi = i + p->window_right > N - 1 ? N - 1 : i + p->window_right;
                for (int pr = 0; pr < 2; pr++) {
                    const double *qi = q + (((b * N + i) * 2 + pr) * H + h) * D;
                    double m = -INFINITY, sum = 0;
                    for (int64_t j = lo; j <= hi; j++) {
                        const double *kj = k + (((b * N + j) * 2 + pr) * H + h) * D;
                        double dot = 0;
                        for (int64_t d = 0; d < D; d++) dot += qi[d] * kj[d];
                        s[j] = (double)p->scale * dot;
                        if (isnan(s[j]) || s[j] > m) m = isnan(m) ? m : s[j];
                    }
                    double *ap = a + pr * D;
                    for (int64_t d = 0; d < D; d++) ap[d] = 0;
                    for (int64_t j = lo; j <= hi; j++) {
                        const double w = exp(s[j] - m);
                        sum += w;
                        const int64_t vb = b * p->qkv.batch + j * p->qkv.seq + 2 * p->qkv.chunk +
                                           h * p->qkv.head;
                        for (int64_t d = 0; d < D; d++)
                            ap[d] += w * decode(qkv, vb + d * p->qkv.dim, p->dtype);
                    }
                    for (int64_t d = 0; d < D; d++) ap[d] /= sum;
                }
                double *o = out + ((b * N + i) * H + h) * D;
                for (int64_t d = 0; d < D; d++) o[d] = a[d] - (double)p->lambda * a[D + d];
            }
    free(q);
    free(k);
    free(s);
    free(a);
}
