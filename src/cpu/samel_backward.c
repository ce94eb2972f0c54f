/* CPU backward of the fused SAME-L block (the math is in include/dswa.h):
 *  1. the forward's prologue recomputed (cpu/samel.c's own code: the very values the forward
 *     rounded to its dtype) into fp32 scratch r_q, r_k;
 *  2. the op's CPU backward on them in fp32, with V and dout converted to fp32 first, so that a
 *     16-bit problem's gradients are rounded once, when dqkv is stored;
 *  3. per row, RoPE transposed and DyT's derivative into dqkv, and the norms' sums.
 *
 * Scratch: r_q, r_k and their gradients (2 pairs each), V, dout and dV in fp32: 11 B N H D
 * floats, plus the op backward's own. Written for clarity, not speed: a fused pass would not
 * need most of it.
 *
 * Determinism: the op's backward is deterministic by its own rule. Step 3 runs as tasks of
 * (batch, block of BLK positions), a split fixed by the problem alone; each task adds its
 * terms in double in a fixed order (position, chunk, head, dim) into its own partials, and the
 * partials are added in task order afterwards. Every dqkv element is written once.
 */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "core/internal.h"
#include "cpu/backend.h"
#include "core/samel.h"
#include "cpu/samel_cpu.h"

#define BLK 32   /* positions per task of step 3 */

typedef struct sbwd {
    const dswa_samel_problem *p;
    const dswa_samel_backward_problem *bp;
    const void *qkv;
    void *dqkv;
    const float *drq, *drk;   /* [b][n][pair][h][d]: the op's dq and dk */
    const float *dv;          /* [b][n][h][d]: its dv, summed over both pairs */
    const float *inv;         /* RoPE's inv_freq */
    int64_t nblk;
    int64_t nparts;           /* doubles per task: per norm dalpha, dgamma[D], dbeta[D] */
    double *partial;          /* [task][norm][nparts / 2]; NULL when g is */
} sbwd;

/* Chunk ch of row (b, i, h) of dqkv, from the fp32 gradient row gr. */
static void store_grad(const sbwd *S, int64_t b, int64_t i, int ch, int64_t h, const float *gr) {
    const dswa_samel_layout *l = &S->bp->dqkv;
    const int64_t off = b * l->batch + i * l->seq + ch * l->chunk + h * l->head;
    for (int64_t d = 0; d < S->p->head_dim; d++)
        dswa_store_elem(S->dqkv, off + d * l->dim, S->p->dtype, gr[d]);
}

/* Positions of task t; mem: D floats of dy, D of dt, rot_dims / 2 each of cos and sin. */
static void transpose_task(const sbwd *S, int64_t t, float *mem) {
    const dswa_samel_problem *p = S->p;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim, c = p->rot_dims / 2;
    const int64_t b = t / S->nblk, i0 = t % S->nblk * BLK, i1 = i0 + BLK < N ? i0 + BLK : N;
    float *dy = mem, *dt = dy + D, *cs = dt + D, *sn = cs + c;
    static const int chunks[4] = {0, 1, 3, 4};   /* q, k, q_diff, k_diff */
    for (int64_t i = i0; i < i1; i++) {
        dswa_samel_cpu_angles(p, S->inv, i, cs, sn);
        for (int64_t h = 0; h < H; h++) store_grad(S, b, i, 2, h, S->dv + ((b * N + i) * H + h) * D);
        for (int t4 = 0; t4 < 4; t4++) {
            const int ch = chunks[t4], is_k = ch == 1 || ch == 4, pair = ch >= 3;
            const dswa_samel_norm *nm = is_k ? &p->k_norm : &p->q_norm;
            double *part = S->partial ? S->partial + t * S->nparts + is_k * (S->nparts / 2) : NULL;
            for (int64_t h = 0; h < H; h++) {
                const float *dr = (is_k ? S->drk : S->drq) + (((b * N + i) * 2 + pair) * H + h) * D;
                for (int64_t j = 0; j < c; j++) {   /* the rotation by -theta */
                    dy[j] = dr[j] * cs[j] + dr[j + c] * sn[j];
                    dy[j + c] = dr[j + c] * cs[j] - dr[j] * sn[j];
                }
                for (int64_t d = 2 * c; d < D; d++) dy[d] = dr[d];
                const int64_t src = b * p->qkv.batch + i * p->qkv.seq + ch * p->qkv.chunk +
                                    h * p->qkv.head;
                for (int64_t d = 0; d < D; d++) {
                    const float x = dswa_load_elem(S->qkv, src + d * p->qkv.dim, p->dtype);
                    /* u as the forward computes it; 1 - u^2 factored, exact near u = 1 */
                    const float u = tanh_f32(nm->alpha * x), s = (1.0f - u) * (1.0f + u);
                    const float du = dy[d] * nm->gamma[d];
                    dt[d] = du * nm->alpha * s;
                    if (part) {
                        part[0] += (double)du * (double)x * (double)s;
                        part[1 + d] += (double)dy[d] * (double)u;
                        part[1 + D + d] += (double)dy[d];
                    }
                }
                store_grad(S, b, i, ch, h, dt);
            }
        }
    }
}

/* Copies the [b, n, -, h, d] view l of base (dtype dt) into dense fp32 [b][n][h][d]. */
static void to_f32(const dswa_samel_problem *p, const void *base, const dswa_layout *l,
                   float *dst) {
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < (int64_t)p->batch * N * H; r++) {
        const int64_t off = r / (N * H) * l->batch + r / H % N * l->seq + r % H * l->head;
        for (int64_t d = 0; d < D; d++) dst[r * D + d] = dswa_load_elem(base, off + d * l->dim, p->dtype);
    }
}

dswa_status dswa_samel_cpu_backward(const dswa_samel_backward_problem *bp, const void *qkv,
                                    const void *dout, void *dqkv, const dswa_samel_norm_grads *g) {
    const dswa_samel_problem *p = &bp->fwd;
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const int64_t c = p->rot_dims / 2;
    sbwd S;
    S.p = p; S.bp = bp; S.qkv = qkv; S.dqkv = dqkv;
    S.nblk = (N + BLK - 1) / BLK;
    S.nparts = 2 * (1 + 2 * D);
    const int64_t ntask = B * S.nblk;
    const int team = omp_get_max_threads();
    const size_t per = 2 * (size_t)D + 2 * (size_t)c;   /* step 3's rows, per thread */

    /* Everything is allocated before anything is written, so a failure leaves no trace. */
    size_t u, floats, bytes, nparts = 0;
    const int overflow = __builtin_mul_overflow((size_t)(B * N), (size_t)(H * D), &u) ||
                         __builtin_mul_overflow(u, 11, &floats) ||
                         __builtin_add_overflow(floats, per * (size_t)team + (size_t)c, &floats) ||
                         __builtin_mul_overflow(floats, sizeof(float), &bytes) ||
                         (g && __builtin_mul_overflow((size_t)ntask, (size_t)S.nparts, &nparts));
    float *mem = overflow ? NULL : malloc(bytes);
    S.partial = g && !overflow ? calloc(nparts, sizeof(double)) : NULL;
    if (!mem || (g && !S.partial)) {
        free(mem);
        free(S.partial);
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "the SAME-L CPU backward's scratch (11 x %lld x %lld x %lld x %lld "
                         "floats%s) could not be allocated", (long long)B, (long long)N,
                         (long long)H, (long long)D, g ? " and the norms' partial sums" : "");
    }
    float *rq = mem, *rk = rq + 2 * u, *v = rk + 2 * u, *go = v + u;
    float *drq = go + u, *drk = drq + 2 * u, *dv = drk + 2 * u, *inv = dv + u, *rows = inv + c;

    dswa_status s = dswa_samel_cpu_prologue(p, qkv, DSWA_F32, rq, rk);
    if (s != DSWA_OK) goto done;
    const dswa_layout vl = {p->qkv.batch, p->qkv.seq, 0, p->qkv.head, p->qkv.dim};
    to_f32(p, (const char *)qkv + 2 * p->qkv.chunk * (int64_t)dswa_dtype_size(p->dtype), &vl, v);
    to_f32(p, dout, &bp->dout, go);

    /* The op on the scratch, all fp32 and dense */
    const dswa_backward_problem ob = dswa_samel_scratch_backward_problem(p);
    if ((s = dswa_cpu_backward(&ob, rq, rk, v, go, drq, drk, dv, NULL)) != DSWA_OK) goto done;

    S.drq = drq; S.drk = drk; S.dv = dv; S.inv = inv;
    dswa_samel_freqs(p, inv);
#pragma omp parallel num_threads(team)
    {
        float *mine = rows + per * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t t = 0; t < ntask; t++) transpose_task(&S, t, mine);
    }
    if (g) {
        const dswa_samel_norm_grad *out[2] = {&g->q_norm, &g->k_norm};
        const int64_t half = S.nparts / 2;
        for (int n = 0; n < 2; n++)
            for (int64_t e = 0; e < half; e++) {
                double sum = 0.0;
                for (int64_t t = 0; t < ntask; t++) sum += S.partial[t * S.nparts + n * half + e];
                float *dst = e == 0 ? out[n]->dalpha : e <= D ? out[n]->dgamma + e - 1
                                                              : out[n]->dbeta + e - 1 - D;
                *dst = (float)sum;
            }
    }
done:
    free(mem);
    free(S.partial);
    return s;
}
