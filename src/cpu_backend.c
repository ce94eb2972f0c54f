/* CPU backend: out[b,i,h,:] = A_0 - lambda * A_1, where A_p is softmax attention of query i
 * over its key window J(i) for pair p (the math is in include/dswa.h), in fp32 arithmetic.
 *
 * Shape. OpenMP splits (batch, head, block of QB queries) statically. A task walks the block's
 * key range in tiles of KT rows; for each tile it gathers K (transposed, d-major) and V of both
 * pairs into thread-local contiguous fp32 scratch, so strides, f16 and bf16 are dealt with in
 * one place and the hot loops see dense fp32 rows. Scores come 4 queries x 16 keys at a time
 * (the key axis is the vector axis, so no horizontal sums), softmax is online across tiles
 * (for SAME-L windows a block fits one tile, so that costs nothing), and P.V accumulates over
 * D in registers. Both pairs are kept per query and subtracted at the end.
 *
 * NaN containment: a query reads only the V rows of its own window, and scores computed for
 * a neighbour's keys are discarded, never multiplied by zero, so a NaN in K, V or Q reaches
 * exactly the outputs whose window contains it.
 *
 * The library is built without -march, so the task function is compiled three times
 * (target_clones: AVX-512, AVX2, baseline) and the loader picks one per machine.
 */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "internal.h"

/* Helpers must be inlined into each clone of run_task to get its instruction set. */
#define HOT static inline __attribute__((always_inline))

#define GROUP 4    /* queries per score micro-tile */
#define LANES 16   /* keys per score micro-tile: one AVX-512 register */

typedef struct cpu_plan {
    const dswa_problem *p;
    const void *q, *k, *v;
    void *out;
    int D, Dp;             /* head_dim, and head_dim rounded up to LANES (V and acc rows) */
    int QB, KT;            /* queries per task, key rows per tile */
    size_t ldk;            /* row length of a transposed K tile: KT + LANES of padding */
    int shared_v;
    int64_t nblk, ntask;
    size_t per_thread;     /* floats of scratch per thread, a multiple of 16 */
} cpu_plan;

/* One thread's scratch, carved out of a single allocation made before any output is written. */
typedef struct cpu_scratch {
    float *q[2];    /* QB x Dp     query rows of the block          */
    float *acc[2];  /* QB x Dp     unnormalised sum of exp * V      */
    float *m[2];    /* QB          running max of the scores        */
    float *l[2];    /* QB          running sum of exp               */
    float *kt[2];   /* Dp x ldk    K tile, transposed               */
    float *v[2];    /* KT x Dp     V tile (v[1] == v[0] when shared) */
    float *s[2];    /* GROUP x ldk scores of one micro-tile         */
    float *e;       /* ldk         exp of one query's scores        */
    float *row;     /* Dp          one output row                   */
    float *rows;    /* 16 x Dp     K rows on their way to kt        */
} cpu_scratch;

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

static void carve(cpu_scratch *sc, const cpu_plan *P, float *base) {
    const size_t QB = (size_t)P->QB, KT = (size_t)P->KT, Dp = (size_t)P->Dp;
    float *f = base;
    for (int p = 0; p < 2; p++) {
        sc->q[p] = f;   f += round16(QB * Dp);
        sc->acc[p] = f; f += round16(QB * Dp);
        sc->m[p] = f;   f += round16(QB);
        sc->l[p] = f;   f += round16(QB);
        sc->kt[p] = f;  f += round16(Dp * P->ldk);
        sc->v[p] = f;   f += round16(KT * Dp);
        sc->s[p] = f;   f += round16(GROUP * P->ldk);
    }
    sc->e = f;   f += round16(P->ldk);
    sc->row = f; f += round16(Dp);
    sc->rows = f; f += 16 * Dp;
}

static size_t scratch_floats(const cpu_plan *P) {
    const size_t QB = (size_t)P->QB, KT = (size_t)P->KT, Dp = (size_t)P->Dp;
    return 2 * (round16(QB * Dp) + round16(QB * Dp) + 2 * round16(QB) + round16(Dp * P->ldk) +
                round16(KT * Dp) + round16(GROUP * P->ldk)) +
           round16(P->ldk) + round16(Dp) + 16 * Dp;
}

/* ---- input and output conversion ------------------------------------------------------ */

/* f16 -> f32 without branches, so that row conversion vectorizes; bit-identical to
   dswa_f16_to_f32 for all 65536 inputs (checked exhaustively). The exponent is rebiased by
   112; an all-ones exponent (inf/NaN) gets 112 more; a zero exponent (zero/subnormal) is
   made normal by one more exponent step and then has that step's 2^-14 subtracted. */
HOT float f16_to_f32(uint16_t h) {
    const uint32_t o = (uint32_t)(h & 0x7fffu) << 13, e = o & 0x0f800000u;
    const uint32_t n = o + (112u << 23) + (e == 0x0f800000u ? 112u << 23 : 0u);
    const float sub = dswa_bits_to_f32(n + (1u << 23)) - 6.103515625e-05f;
    const float f = e == 0 ? sub : dswa_bits_to_f32(n);
    return dswa_bits_to_f32(dswa_f32_to_bits(f) | ((uint32_t)(h & 0x8000u) << 16));
}

/* One row of D elements at element stride sd, converted to fp32, zero-padded to Dp. */
HOT void load_row(float *restrict dst, const void *base, int64_t off, int64_t sd, int D,
                  int Dp, dswa_dtype dt) {
    if (dt == DSWA_F32) {
        const float *restrict s = (const float *)base + off;
        if (sd == 1) {
            /* Fixed 64-byte pieces: inlined vector moves, where a plain loop would become a
               call to memcpy, which costs more than the copy at D = 64. */
            int d = 0;
            for (; d + 16 <= D; d += 16) memcpy(dst + d, s + d, 64);
            for (; d < D; d++) dst[d] = s[d];
        } else {
            for (int d = 0; d < D; d++) dst[d] = s[d * sd];
        }
    } else if (dt == DSWA_F16) {
        const uint16_t *restrict s = (const uint16_t *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) dst[d] = f16_to_f32(s[d]);
        else for (int d = 0; d < D; d++) dst[d] = f16_to_f32(s[d * sd]);
    } else {
        const uint16_t *restrict s = (const uint16_t *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) dst[d] = dswa_bf16_to_f32(s[d]);
        else for (int d = 0; d < D; d++) dst[d] = dswa_bf16_to_f32(s[d * sd]);
    }
    for (int d = D; d < Dp; d++) dst[d] = 0.0f;
}

/* dst[c * ldd + r] = src[r * lds + c] for a 16 x 16 block: four rounds of swapping the
   off-diagonal k x k sub-blocks (k = 8, 4, 2, 1), each a two-register shuffle, instead of
   256 scalar stores. Generic vectors, so every clone gets its own instructions. */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

HOT void transpose16(const float *src, size_t lds, float *dst, size_t ldd) {
    v16f a[16];
    for (int r = 0; r < 16; r++) memcpy(&a[r], src + (size_t)r * lds, sizeof(v16f));
#define SWAP_ROUND(k, LO, HI)                                                                 \
    for (int i = 0; i < 16; i++)                                                              \
        if (!(i & (k))) {                                                                     \
            const v16f x = a[i], y = a[i + (k)];                                              \
            a[i] = __builtin_shuffle(x, y, LO);                                               \
            a[i + (k)] = __builtin_shuffle(x, y, HI);                                         \
        }
    /* lo[c] = c&k ? y[c-k] : x[c];  hi[c] = c&k ? y[c] : x[c+k] */
    const v16i lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    const v16i hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    const v16i lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
    const v16i hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
    const v16i lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
    const v16i hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
    const v16i lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
    const v16i hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
    SWAP_ROUND(8, lo8, hi8)
    SWAP_ROUND(4, lo4, hi4)
    SWAP_ROUND(2, lo2, hi2)
    SWAP_ROUND(1, lo1, hi1)
#undef SWAP_ROUND
    for (int c = 0; c < 16; c++) memcpy(dst + (size_t)c * ldd, &a[c], sizeof(v16f));
}

HOT void store_row(void *base, int64_t off, int64_t sd, const float *src, int D,
                             dswa_dtype dt) {
    if (dt == DSWA_F32) {
        float *o = (float *)base + off;
        for (int d = 0; d < D; d++) o[d * sd] = src[d];
    } else if (dt == DSWA_F16) {
        uint16_t *o = (uint16_t *)base + off;
        for (int d = 0; d < D; d++) o[d * sd] = dswa_f32_to_f16(src[d]);
    } else {
        uint16_t *o = (uint16_t *)base + off;
        for (int d = 0; d < D; d++) o[d * sd] = dswa_f32_to_bf16(src[d]);
    }
}

/* ---- arithmetic kernels ---------------------------------------------------------------- */

/* exp(x) for x <= 0 (scores minus their max), written so that loops over it vectorize:
   Cody-Waite reduction to r in [-ln2/2, ln2/2], the Cephes expf polynomial (about 1 ulp),
   and 2^k built from the bits of the rounding shift. NaN stays NaN (it flows through the
   polynomial); below -87 the result is 0, where expf would give a denormal or 0, both
   negligible next to the max term's 1. */
HOT float exp_nonpos(float x) {
    const float xc = x < -87.0f ? -87.0f : x;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float ks = xc * 1.44269504088896341f + shift;
    const float k = ks - shift;
    float r = xc - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    uint32_t kb;
    memcpy(&kb, &ks, 4);
    const uint32_t pb = (kb - 0x4b400000u + 127u) << 23; /* 2^k; k in [-126, 0] */
    float pow2k;
    memcpy(&pow2k, &pb, 4);
    const float e = y * pow2k;
    return x < -87.0f ? 0.0f : e;
}

/* Scores of GROUP consecutive queries against ncol (a multiple of LANES) consecutive keys of a
   transposed tile: s[g][c] = scale * <q_g, k_c>. The key axis is the vector axis; the GROUP
   accumulators stay in registers over the whole D loop. */
HOT void scores_group(const float *q, size_t ldq, const float *kt, size_t ldk,
                                int D, int ncol, float scale, float *s, size_t lds) {
    const float *q0 = q, *q1 = q + ldq, *q2 = q + 2 * ldq, *q3 = q + 3 * ldq;
    for (int c = 0; c < ncol; c += LANES) {
        float a0[LANES], a1[LANES], a2[LANES], a3[LANES];
        for (int l = 0; l < LANES; l++) a0[l] = a1[l] = a2[l] = a3[l] = 0.0f;
        const float *kc = kt + c;
        for (int d = 0; d < D; d++) {
            const float *kr = kc + (size_t)d * ldk;
            const float x0 = q0[d], x1 = q1[d], x2 = q2[d], x3 = q3[d];
            for (int l = 0; l < LANES; l++) {
                const float kv = kr[l];
                a0[l] += x0 * kv;
                a1[l] += x1 * kv;
                a2[l] += x2 * kv;
                a3[l] += x3 * kv;
            }
        }
        for (int l = 0; l < LANES; l++) {
            s[c + l] = a0[l] * scale;
            s[lds + c + l] = a1[l] * scale;
            s[2 * lds + c + l] = a2[l] * scale;
            s[3 * lds + c + l] = a3[l] * scale;
        }
    }
}

/* acc[0:Dp] += sum_j e[j] * V[j, 0:Dp] over n rows. 64 columns at a time keep four
   independent register accumulators in flight; Dp is a multiple of 16. */
HOT void pv_row(float *acc, const float *e, const float *v, size_t ldv, int n,
                          int Dp) {
    int dc = 0;
    for (; dc + 64 <= Dp; dc += 64) {
        float a[64];
        for (int l = 0; l < 64; l++) a[l] = acc[dc + l];
        for (int j = 0; j < n; j++) {
            const float w = e[j];
            const float *vr = v + (size_t)j * ldv + dc;
            for (int l = 0; l < 64; l++) a[l] += w * vr[l];
        }
        for (int l = 0; l < 64; l++) acc[dc + l] = a[l];
    }
    for (; dc < Dp; dc += 16) {
        float a[16];
        for (int l = 0; l < 16; l++) a[l] = acc[dc + l];
        for (int j = 0; j < n; j++) {
            const float w = e[j];
            const float *vr = v + (size_t)j * ldv + dc;
            for (int l = 0; l < 16; l++) a[l] += w * vr[l];
        }
        for (int l = 0; l < 16; l++) acc[dc + l] = a[l];
    }
}

/* Online-softmax update of one query (running max *m, sum *l, accumulator acc) with the
   scores s[lo..hi] of one tile against V rows v (row 0 = key lo). The max and the exps run
   over whole LANES-wide chunks with the columns outside [lo, hi] masked, so the loops have a
   fixed shape and vectorize; the masked columns hold a neighbour's (or stale) scores and
   never reach a result. P.V then reads only the rows lo..hi. */
HOT void softmax_pv(const float *s, int lo, int hi, const float *v, size_t ldv, int Dp,
                    float *e, float *m, float *l, float *acc) {
    const int c0 = lo & ~(LANES - 1);
    const unsigned span = (unsigned)(hi - lo);
    float mv[LANES];
    for (int u = 0; u < LANES; u++) mv[u] = -INFINITY;
    for (int c = c0; c <= hi; c += LANES)
        for (int u = 0; u < LANES; u++) {
            const float x = (unsigned)(c + u - lo) <= span ? s[c + u] : -INFINITY;
            mv[u] = x > mv[u] ? x : mv[u]; /* a NaN score is skipped here... */
        }
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int u = 0; u < w; u++) mv[u] = mv[u + w] > mv[u] ? mv[u + w] : mv[u];
    const float m_old = *m, m_new = mv[0] > m_old ? mv[0] : m_old;

    float sv[LANES];
    for (int u = 0; u < LANES; u++) sv[u] = 0.0f;
    for (int c = c0; c <= hi; c += LANES)
        for (int u = 0; u < LANES; u++) {
            const float x = exp_nonpos(s[c + u] - m_new); /* ...and becomes NaN here */
            const float y = (unsigned)(c + u - lo) <= span ? x : 0.0f;
            e[c + u] = y;
            sv[u] += y;
        }
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int u = 0; u < w; u++) sv[u] += sv[u + w];

    /* Rescale earlier tiles' contribution. With m_old = -inf nothing was added before
       (or it was already NaN, which must stay NaN), so skipping is exact. */
    if (m_new > m_old && m_old != -INFINITY) {
        const float alpha = exp_nonpos(m_old - m_new);
        for (int d = 0; d < Dp; d++) acc[d] *= alpha;
        *l *= alpha;
    }
    *l += sv[0];
    *m = m_new;
    pv_row(acc, e + lo, v, ldv, hi - lo + 1, Dp);
}

/* ---- one task: batch b, head h, queries [i0, i0 + nq) ---------------------------------- */

HOT int64_t win_lo(const dswa_problem *p, int64_t i) {
    const int64_t lo = i - p->window_left;
    return lo < 0 ? 0 : lo;
}
HOT int64_t win_hi(const dswa_problem *p, int64_t i) {
    const int64_t hi = i + p->window_right, last = p->seq_len - 1;
    return hi > last ? last : hi;
}

/* Rows of a task are strided by a token's whole width (12 KiB at SAME-L), which the hardware
   prefetchers do not follow. So each task first prefetches all rows of the next task (the
   next head of the same tokens); their misses then overlap this task's arithmetic. Measured
   at SAME-L: about 1.3x, all of it from memory stalls. Strided dims are left alone. */
HOT void prefetch_rows(const void *base, size_t esz, int64_t off, int64_t seq, int64_t n,
                       int D, int write) {
    const size_t bytes = (size_t)D * esz;
    for (int64_t r = 0; r < n; r++) {
        const char *row = (const char *)base + (size_t)(off + r * seq) * esz;
        if (write) {
            for (size_t c = 0; c < bytes; c += 64) __builtin_prefetch(row + c, 1);
            __builtin_prefetch(row + bytes - 1, 1);
        } else {
            for (size_t c = 0; c < bytes; c += 64) __builtin_prefetch(row + c);
            __builtin_prefetch(row + bytes - 1);
        }
    }
}

HOT void prefetch_task(const cpu_plan *P, int64_t task) {
    const dswa_problem *p = P->p;
    if (task >= P->ntask || p->q.dim != 1 || p->k.dim != 1 || p->v.dim != 1 || p->out.dim != 1)
        return;
    const size_t esz = p->dtype == DSWA_F32 ? 4 : 2;
    const int64_t h = task % p->heads, bb = task / p->heads;
    const int64_t blk = bb % P->nblk, b = bb / P->nblk;
    const int64_t i0 = blk * P->QB;
    const int64_t nq = p->seq_len - i0 < P->QB ? p->seq_len - i0 : P->QB;
    const int64_t klo = win_lo(p, i0), khi = win_hi(p, i0 + nq - 1);
    const int64_t nk = khi - klo + 1 < P->KT ? khi - klo + 1 : P->KT;
    for (int pr = 0; pr < 2; pr++) {
        prefetch_rows(P->q, esz, b * p->q.batch + i0 * p->q.seq + pr * p->q.pair + h * p->q.head,
                      p->q.seq, nq, P->D, 0);
        prefetch_rows(P->k, esz, b * p->k.batch + klo * p->k.seq + pr * p->k.pair + h * p->k.head,
                      p->k.seq, nk, P->D, 0);
        if (pr == 0 || !P->shared_v)
            prefetch_rows(P->v, esz,
                          b * p->v.batch + klo * p->v.seq + pr * p->v.pair + h * p->v.head,
                          p->v.seq, nk, P->D, 0);
    }
    prefetch_rows(P->out, esz, b * p->out.batch + i0 * p->out.seq + h * p->out.head, p->out.seq,
                  nq, P->D, 1);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void run_task(const cpu_plan *P, float *mem, int64_t task) {
    const dswa_problem *p = P->p;
    const dswa_dtype dt = p->dtype;
    const int D = P->D, Dp = P->Dp;
    const size_t ldk = P->ldk, Dpz = (size_t)Dp;
    cpu_scratch sc;
    carve(&sc, P, mem);

    /* Heads vary fastest: consecutive tasks of a thread read neighbouring bytes of the same
       tokens (one token's heads are adjacent in the usual layouts), which keeps TLB entries
       and hardware prefetch useful; a head-major order would jump pages on every row. */
    const int64_t h = task % p->heads, bb = task / p->heads;
    const int64_t blk = bb % P->nblk, b = bb / P->nblk;
    const int64_t i0 = blk * P->QB;
    const int nq = (int)(p->seq_len - i0 < P->QB ? p->seq_len - i0 : P->QB);
    const int npair_v = P->shared_v ? 1 : 2;
    prefetch_task(P, task + 1);

    for (int pr = 0; pr < 2; pr++) {
        const int64_t qoff = b * p->q.batch + pr * p->q.pair + h * p->q.head;
        for (int r = 0; r < nq; r++)
            load_row(sc.q[pr] + (size_t)r * Dpz, P->q, qoff + (i0 + r) * p->q.seq, p->q.dim, D,
                     Dp, dt);
        memset(sc.acc[pr], 0, (size_t)nq * Dpz * sizeof(float));
        for (int r = 0; r < nq; r++) { sc.m[pr][r] = -INFINITY; sc.l[pr][r] = 0.0f; }
    }

    const int64_t klo = win_lo(p, i0), khi = win_hi(p, i0 + nq - 1);
    for (int64_t t0 = klo; t0 <= khi; t0 += P->KT) {
        const int64_t t1 = t0 + P->KT - 1 < khi ? t0 + P->KT - 1 : khi; /* inclusive */
        const int nt = (int)(t1 - t0 + 1);

        /* Gather the tile: K transposed (d-major, so keys are contiguous for the scores),
           V row-major with zero padding up to Dp. */
        for (int pr = 0; pr < 2; pr++) {
            const int64_t koff = b * p->k.batch + pr * p->k.pair + h * p->k.head;
            float *kt = sc.kt[pr];
            for (int r0 = 0; r0 < nt; r0 += 16) {
                /* Rows past nt keep stale data; they land in columns no score reads. */
                const int nr = nt - r0 < 16 ? nt - r0 : 16;
                for (int r = 0; r < nr; r++)
                    load_row(sc.rows + (size_t)r * Dpz, P->k, koff + (t0 + r0 + r) * p->k.seq,
                             p->k.dim, D, Dp, dt);
                for (int d0 = 0; d0 < Dp; d0 += 16)
                    transpose16(sc.rows + d0, Dpz, kt + (size_t)d0 * ldk + (size_t)r0, ldk);
            }
        }
        for (int pr = 0; pr < npair_v; pr++) {
            const int64_t voff = b * p->v.batch + pr * p->v.pair + h * p->v.head;
            for (int r = 0; r < nt; r++) {
                load_row(sc.v[pr] + (size_t)r * Dpz, P->v, voff + (t0 + r) * p->v.seq, p->v.dim,
                         D, Dp, dt);
            }
        }
        const float *vt[2] = {sc.v[0], sc.v[npair_v - 1]};

        for (int g0 = 0; g0 < nq; g0 += GROUP) {
            const int ng = nq - g0 < GROUP ? nq - g0 : GROUP;
            const int64_t ia = i0 + g0;
            int64_t ua = win_lo(p, ia), ub = win_hi(p, ia + ng - 1);
            if (ua < t0) ua = t0;
            if (ub > t1) ub = t1;
            if (ua > ub) continue;                 /* this tile is outside all GROUP windows */
            const int c0 = (int)(ua - t0);
            const int ncol = (int)round16((size_t)(ub - ua + 1));
            /* Rows g >= ng of the Q block hold stale (finite or not) data whose scores are
               never read; the columns past the tile hold stale keys, likewise never read. */
            for (int pr = 0; pr < 2; pr++)
                scores_group(sc.q[pr] + (size_t)g0 * Dpz, Dpz, sc.kt[pr] + c0, ldk, D, ncol,
                             p->scale, sc.s[pr], ldk);
            for (int g = 0; g < ng; g++) {
                const int64_t i = ia + g;
                int64_t a = win_lo(p, i), z = win_hi(p, i);
                if (a < t0) a = t0;
                if (z > t1) z = t1;
                if (a > z) continue;
                const int qi = g0 + g;
                for (int pr = 0; pr < 2; pr++)
                    softmax_pv(sc.s[pr] + (size_t)g * ldk, (int)(a - ua), (int)(z - ua),
                               vt[pr] + (size_t)(a - t0) * Dpz, Dpz, Dp, sc.e,
                               &sc.m[pr][qi], &sc.l[pr][qi], sc.acc[pr] + (size_t)qi * Dpz);
            }
        }
    }

    /* out = A_0 - lambda * A_1, normalised here rather than per tile. */
    const float lambda = p->lambda;
    const int64_t ooff = b * p->out.batch + h * p->out.head;
    for (int r = 0; r < nq; r++) {
        const float inv0 = 1.0f / sc.l[0][r], inv1 = 1.0f / sc.l[1][r];
        const float *a0 = sc.acc[0] + (size_t)r * Dpz, *a1 = sc.acc[1] + (size_t)r * Dpz;
        float *o = sc.row;
        for (int d = 0; d < D; d++) o[d] = a0[d] * inv0 - lambda * (a1[d] * inv1);
        store_row(P->out, ooff + (i0 + r) * p->out.seq, p->out.dim, o, D, dt);
    }
}

/* ---- entry point ------------------------------------------------------------------------ */

dswa_status dswa_cpu_run(const dswa_problem *p, const void *q, const void *k, const void *v,
                         void *out) {
    if (p->batch <= 0 || p->seq_len <= 0 || p->heads <= 0) return DSWA_OK;
    if (p->head_dim > 65536)
        return dswa_fail(DSWA_ERR_UNSUPPORTED,
                         "head_dim = %d: the CPU backend supports head_dim <= 65536",
                         (int)p->head_dim);

    cpu_plan P;
    P.p = p; P.q = q; P.k = k; P.v = v; P.out = out;
    P.D = p->head_dim;
    P.Dp = (int)round16((size_t)P.D);
    P.shared_v = p->v.pair == 0;
    /* Tiles sized so one tile's K and V of both pairs stay in L2 (about 256 KiB): 256 rows
       at D = 64, fewer for wide heads. Blocks of 64 queries amortise the gather of the
       window's extra WL + WR rows; wide heads use smaller blocks to bound scratch. */
    int kt = 65536 / P.Dp;
    kt = kt > 256 ? 256 : kt < LANES ? LANES : kt;
    P.KT = kt & ~(LANES - 1);
    int qb = 16384 / P.Dp;
    qb = qb > 64 ? 64 : qb < GROUP ? GROUP : qb;
    qb &= ~(GROUP - 1);

    const int nthreads = omp_get_max_threads();
    /* Keep every thread busy on small problems: shrink the block, not below 16 queries. */
    while (qb > 16 &&
           (int64_t)p->batch * p->heads * ((p->seq_len + qb - 1) / qb) < 4 * (int64_t)nthreads)
        qb = (qb / 2) & ~(GROUP - 1);
    P.QB = qb;
    P.ldk = (size_t)P.KT + LANES;
    P.nblk = (p->seq_len + P.QB - 1) / P.QB;
    P.ntask = (int64_t)p->batch * p->heads * P.nblk;
    P.per_thread = round16(scratch_floats(&P));

    const int team = P.ntask < nthreads ? (int)P.ntask : nthreads;
    const size_t bytes = P.per_thread * sizeof(float) * (size_t)team;
    /* calloc: the padding columns of the K tiles and the spare Q rows start finite. */
    float *mem = (float *)calloc(1, bytes + 64);
    if (!mem)
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "CPU backend scratch: %zu bytes for %d threads could not be allocated",
                         bytes, team);
    float *aligned = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);

#pragma omp parallel num_threads(team)
    {
        float *mine = aligned + P.per_thread * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t t = 0; t < P.ntask; t++) run_task(&P, mine, t);
    }
    free(mem);
    return DSWA_OK;
}
