/* The float64 reference of the fused SAME-L block's backward: samel_ref64.h says what it
   models. Plain loops, serial sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "samel_ref64.h"
#include "testutil.h"

void tu_samel_ref64_backward(const dswa_samel_backward_problem *bp, const void *qkv,
                             const void *dout, double *dqkv, double *dnorm, double *dnorm_scale) {
    const dswa_samel_problem *p = &bp->fwd;
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const int c = p->rot_dims / 2;
    const dswa_dtype dt = p->dtype;
    const int64_t nn = 2 * (1 + 2 * D);
    double *sq = calloc((size_t)nn, sizeof(double));   /* the terms' squares */
    if (!sq) abort();
    for (int64_t e = 0; e < nn; e++) dnorm[e] = 0;
    if (B <= 0 || N <= 0) {
        if (dnorm_scale) memcpy(dnorm_scale, dnorm, sizeof(double) * (size_t)nn);
        free(sq);
        return;
    }
    /* The forward's r of q and k, both pairs, [b][n][pair][h][d] in the problem's dtype. */
    const size_t n2 = (size_t)(B * N * 2 * H * D), n1 = n2 / 2;
    void *rq = malloc(n2 * tu_dtype_size(dt)), *rk = malloc(n2 * tu_dtype_size(dt));
    double *y = malloc(sizeof(double) * (size_t)D);
    double *drq = calloc(n2, sizeof(double)), *drk = calloc(n2, sizeof(double));
    double *dv = calloc(n1, sizeof(double));
    double *dy = malloc(sizeof(double) * (size_t)D);
    if (!rq || !rk || !y || !drq || !drk || !dv || !dy) abort();
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int pr = 0; pr < 2; pr++)
                for (int64_t h = 0; h < H; h++) {
                    const int64_t at = (((b * N + i) * 2 + pr) * H + h) * D;
                    tu_samel_ref64_row(p, qkv, b, i, pr ? 3 : 0, h, y);
                    for (int64_t d = 0; d < D; d++) tu_store(rq, at + d, dt, y[d]);
                    tu_samel_ref64_row(p, qkv, b, i, pr ? 4 : 1, h, y);
                    for (int64_t d = 0; d < D; d++) tu_store(rk, at + d, dt, y[d]);
                }

    /* The op on (r_q, r_k) with chunk 2 as the one V both pairs read, dV summed. */
    dswa_backward_problem ob;
    memset(&ob, 0, sizeof ob);
    dswa_problem *f = &ob.fwd;
    f->batch = p->batch; f->seq_len = p->seq_len; f->heads = p->heads; f->head_dim = p->head_dim;
    f->window_left = p->window_left; f->window_right = p->window_right;
    f->scale = p->scale; f->lambda = p->lambda; f->dtype = dt; f->math = p->math;
    const dswa_layout qk = {N * 2 * H * D, 2 * H * D, H * D, D, 1};
    const dswa_layout v = {p->qkv.batch, p->qkv.seq, 0, p->qkv.head, p->qkv.dim};
    f->q = f->k = ob.dq = ob.dk = qk;
    f->v = ob.dv = v;
    f->out = ob.dout = bp->dout;
    const void *v0 = (const char *)qkv + 2 * p->qkv.chunk * (int64_t)tu_dtype_size(dt);
    if (dswa_reference_backward(&ob, rq, rk, v0, dout, drq, drk, dv, NULL) != DSWA_OK) abort();

    /* RoPE transposed, then DyT's derivative. */
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int ch = 0; ch < 5; ch++)
                for (int64_t h = 0; h < H; h++) {
                    double *g = dqkv + (((b * N + i) * 5 + ch) * H + h) * D;
                    if (ch == 2) {
                        for (int64_t d = 0; d < D; d++) g[d] = dv[((b * N + i) * H + h) * D + d];
                        continue;
                    }
                    const int is_k = ch == 1 || ch == 4;
                    const double *dr = (is_k ? drk : drq) + (((b * N + i) * 2 + (ch >= 3)) * H + h) * D;
                    for (int64_t d = 0; d < D; d++) dy[d] = dr[d];
                    for (int j = 0; j < c; j++) {
                        double co, si;
                        tu_samel_ref64_angle(p, i, j, &co, &si);
                        /* r = R n with R = [[co, -si], [si, co]] on (n_j, n_j+c): dn = R^T dr */
                        dy[j] = co * dr[j] + si * dr[j + c];
                        dy[j + c] = -si * dr[j] + co * dr[j + c];
                    }
                    const dswa_samel_norm *nm = is_k ? &p->k_norm : &p->q_norm;
                    double *gn = dnorm + is_k * (1 + 2 * D), *g2 = sq + is_k * (1 + 2 * D);
                    const double alpha = nm->alpha;
                    for (int64_t d = 0; d < D; d++) {
                        const double x = tu_load(qkv, b * p->qkv.batch + i * p->qkv.seq +
                                                 ch * p->qkv.chunk + h * p->qkv.head +
                                                 d * p->qkv.dim, dt);
                        const double u = tanh(alpha * x), sech2 = 1 - u * u;
                        const double du = dy[d] * nm->gamma[d];
                        const double ta = du * x * sech2, tg = dy[d] * u, tb = dy[d];
                        g[d] = du * alpha * sech2;
                        gn[0] += ta;
                        gn[1 + d] += tg;
                        gn[1 + D + d] += tb;
                        g2[0] += ta * ta;
                        g2[1 + d] += tg * tg;
                        g2[1 + D + d] += tb * tb;
                    }
                }
    if (dnorm_scale)
        for (int64_t e = 0; e < nn; e++) dnorm_scale[e] = sqrt(sq[e]);
    free(sq);
    free(rq); free(rk); free(y); free(drq); free(drk); free(dv); free(dy);
}
