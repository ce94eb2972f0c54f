/* CPU backend of the fused SAME-L block (dswa.h): DyT and RoPE of q, k, q_diff and k_diff,
 * one (batch, position) at a time, into temporaries of the problem's dtype (storing there is
 * the rounding the header describes), then the op's CPU backend on them, with V read in place
 * from the packed input. The prologue is a pass over memory of its own, which the fused CUDA
 * kernel is to avoid. Here it costs about twice the op (B=1, N=4096, H=24, f32, 2 cores: the
 * block about 90 ms, the op alone 30); with glibc's tanhf, a scalar call per element, it was
 * three times as much.
 */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "core/internal.h"
#include "cpu/backend.h"
#include "core/samel.h"
#include "cpu/samel_cpu.h"

/* x rounded to dt, as a float. */
static float round_to(dswa_dtype dt, float x) {
    if (dt == DSWA_F16) return dswa_f16_to_f32(dswa_f32_to_f16(x));
    if (dt == DSWA_BF16) return dswa_bf16_to_f32(dswa_f32_to_bf16(x));
    return x;
}

/* Stores n floats (already rounded to dt: exact) contiguously. */
static void store_row(void *base, int64_t off, dswa_dtype dt, const float *x, int n) {
    if (dt == DSWA_F32) {
        memcpy((float *)base + off, x, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *o = (uint16_t *)base + off;
    for (int d = 0; d < n; d++)
        o[d] = dt == DSWA_F16 ? dswa_f32_to_f16(x[d]) : dswa_f32_to_bf16(x[d]);
}

typedef struct prologue {
    const dswa_samel_problem *p;
    const void *qkv;
    dswa_dtype store;        /* of qn and kn */
    void *qn, *kn;           /* [b, n, pair, h, d] contiguous, pair 1 = the _diff chunk */
    const float *inv_freq;   /* rot_dims / 2 */
} prologue;

/* DyT then RoPE of one row of D elements: y = round(gamma * tanh(alpha * x) + beta), then the
   rotation of its first rot_dims dims by (cs, sn), rounded again. fp32 throughout. */
static void norm_rope_row(const prologue *P, const dswa_samel_norm *nm, int64_t src,
                          const float *cs, const float *sn, float *y) {
    const dswa_samel_problem *p = P->p;
    const dswa_dtype dt = p->dtype;
    const int D = p->head_dim, c = p->rot_dims / 2;
    for (int d = 0; d < D; d++) y[d] = dswa_load_elem(P->qkv, src + d * p->qkv.dim, dt);
    for (int d = 0; d < D; d++) y[d] = nm->gamma[d] * tanh_f32(nm->alpha * y[d]) + nm->beta[d];
    if (dt != DSWA_F32)
        for (int d = 0; d < D; d++) y[d] = round_to(dt, y[d]);
    for (int j = 0; j < c; j++) {
        const float a = y[j], b = y[j + c];
        y[j] = round_to(dt, a * cs[j] - b * sn[j]);
        y[j + c] = round_to(dt, b * cs[j] + a * sn[j]);
    }
}

/* Every chunk but v of position i of batch b. y: D floats; cs, sn: rot_dims / 2 each. */
static void prologue_token(const prologue *P, int64_t b, int64_t i, float *y, float *cs,
                           float *sn) {
    const dswa_samel_problem *p = P->p;
    const int D = p->head_dim;
    const int64_t H = p->heads, N = p->seq_len;
    dswa_samel_cpu_angles(p, P->inv_freq, i, cs, sn);
    /* chunk -> (destination, pair): q 0, k 1, q_diff 3, k_diff 4 */
    static const int chunks[4] = {0, 1, 3, 4};
    for (int t = 0; t < 4; t++) {
        const int ch = chunks[t], is_k = ch == 1 || ch == 4, pair = ch >= 3;
        const dswa_samel_norm *nm = is_k ? &p->k_norm : &p->q_norm;
        void *dst = is_k ? P->kn : P->qn;
        for (int64_t h = 0; h < H; h++) {
            const int64_t src = b * p->qkv.batch + i * p->qkv.seq + ch * p->qkv.chunk +
                                h * p->qkv.head;
            norm_rope_row(P, nm, src, cs, sn, y);
            store_row(dst, (((b * N + i) * 2 + pair) * H + h) * D, P->store, y, D);
        }
    }
}

void dswa_samel_cpu_angles(const dswa_samel_problem *p, const float *inv, int64_t i, float *cs,
                           float *sn) {
    const float pos = (float)((int64_t)p->pos_offset + i);
    for (int f = 0; f < p->rot_dims / 2; f++) {
        const float ang = pos * inv[f];
        cs[f] = (float)cos((double)ang);
        sn[f] = (float)sin((double)ang);
    }
}

dswa_status dswa_samel_cpu_prologue(const dswa_samel_problem *p, const void *qkv,
                                    dswa_dtype store, void *qn, void *kn) {
    const int64_t B = p->batch, N = p->seq_len, D = p->head_dim;
    const int c = p->rot_dims / 2;
    const int team = omp_get_max_threads();
    const size_t scratch = (size_t)D + 2 * (size_t)c;   /* y, cs, sn per thread */
    const size_t bytes = sizeof(float) * ((size_t)c + scratch * (size_t)team);
    float *inv = malloc(bytes);
    if (!inv)
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "the SAME-L CPU prologue's %zu bytes could not be allocated", bytes);
    dswa_samel_freqs(p, inv);
    const prologue P = {p, qkv, store, qn, kn, inv};
#pragma omp parallel num_threads(team)
    {
        float *y = inv + c + scratch * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t t = 0; t < B * N; t++) prologue_token(&P, t / N, t % N, y, y + D, y + D + c);
    }
    free(inv);
    return DSWA_OK;
}

dswa_status dswa_samel_cpu_run(const dswa_samel_problem *p, const void *qkv, void *out) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const size_t es = dswa_dtype_size(p->dtype);
    int64_t n;
    size_t bytes;
    if (__builtin_mul_overflow(B * N, 2 * H * D, &n) ||
        __builtin_mul_overflow((size_t)n, 2 * es, &bytes))
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "the SAME-L CPU backend's temporaries (4 x %lld x %lld x %lld x %lld "
                         "elements) exceed the address range", (long long)B, (long long)N,
                         (long long)H, (long long)D);
    char *tmp = malloc(bytes);
    if (!tmp)
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "the SAME-L CPU backend's temporaries: %zu bytes could not be allocated",
                         bytes);
    void *qn = tmp, *kn = tmp + bytes / 2;
    dswa_status s = dswa_samel_cpu_prologue(p, qkv, p->dtype, qn, kn);
    if (s == DSWA_OK) {
        dswa_problem d = dswa_samel_op_problem(p);
        const dswa_layout qk = {N * 2 * H * D, 2 * H * D, H * D, D, 1};
        d.q = d.k = qk;
        s = dswa_cpu_run(&d, qn, kn, (const char *)qkv + 2 * p->qkv.chunk * (int64_t)es, out);
    }
    free(tmp);
    return s;
}
