/* CPU backend: out[b,i,h,:] = A_0 - lambda * A_1, where A_p is softmax attention of query i
 * over its key window J(i) for pair p (the math is in include/dswa.h), in fp32 arithmetic.
 *
 * Shape. A task is (batch, block of QB queries, head); OpenMP hands them out heads fastest,
 * in dynamic chunks of consecutive tasks. A task gathers its queries and walks their key
 * range in tiles of KT rows, converting everything into thread-local fp32 scratch, so
 * strides, f16 and bf16 are dealt with in one place and the hot loops see dense rows.
 * Queries go 16 at a time with the query as the vector lane (Q is transposed once per task):
 * the scores of a chunk form a [key][16] block, so the softmax (masked max, exp, sum) runs
 * down columns with no horizontal reductions and no per-query loop overhead. P.V then runs
 * per query over exactly its window, accumulating along D in registers. Softmax is online
 * across tiles; at SAME-L a block's keys fit one tile. Both pairs are kept per query and
 * subtracted at the end.
 *
 * NaN containment: a lane's masked scores are replaced by selection, never multiplied by
 * zero, and a query reads only the V rows of its own window, so a NaN in K, V or Q reaches
 * exactly the outputs whose window contains it.
 *
 * Instruction sets. The library is built without -march, so the task is compiled three times,
 * for AVX-512, AVX2+FMA and the baseline (SSE2 on x86-64, or whatever the target is), and
 * picked at run time. The two matrix kernels use GCC/Clang vector types of exactly the
 * register width of each build (wider ones are split through memory, 10x slower); the rest
 * is left to the auto-vectorizer.
 */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "core/internal.h"
#include "cpu/backend.h"

/* Everything a task calls is inlined into it, so each instruction-set build of the task gets
   its own code. GCC keeps multiply-add contraction off under -std=c11; it is turned back on
   for these functions so that the AVX2/AVX-512 builds fuse them (about 10% at SAME-L, and
   results only get more accurate). Clang contracts within an expression by default. */
#if defined(__GNUC__) && !defined(__clang__)
#define FAST_FP __attribute__((optimize("fp-contract=fast")))
#else
#define FAST_FP
#endif
#define HOT static inline __attribute__((always_inline)) FAST_FP

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86_BUILDS 1
#endif

HOT float as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
HOT uint32_t as_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

#define LANES 16       /* queries per chunk */
#define KSTEP_MAX 8    /* largest keys-per-micro-tile of the kernels below */

typedef float vf4 __attribute__((vector_size(16)));
typedef float vf8 __attribute__((vector_size(32)));
typedef float vf16 __attribute__((vector_size(64)));

typedef struct cpu_plan {
    const dswa_problem *p;
    const void *q, *k, *v;
    void *out;
    int D, Dp;             /* head_dim, and head_dim rounded up to 16 (all scratch rows) */
    int QB, KT;            /* queries per task (a multiple of LANES), key rows per tile */
    int shared_v;
    int64_t nblk, ntask;
    size_t per_thread;     /* floats of scratch per thread, a multiple of 16 */
} cpu_plan;

/* One thread's scratch, carved out of a single allocation made before any output is written. */
typedef struct cpu_scratch {
    float *qt[2];   /* QB x Dp              Q, per chunk of LANES queries as [d][lane] */
    float *acc[2];  /* QB x Dp              unnormalised sum of exp * V, per query     */
    float *m[2];    /* QB                   running max of the scores                  */
    float *l[2];    /* QB                   running sum of exp                         */
    float *k[2];    /* (KT + KSTEP_MAX) x Dp  K tile rows (a micro-tile may overhang)  */
    float *v[2];    /* KT x Dp              V tile rows (v[1] == v[0] when shared)     */
    float *s;       /* (KT + KSTEP_MAX) x LANES  scores, then weights, of one chunk    */
    float *rows;    /* LANES x Dp           Q rows on their way to qt; an output row   */
} cpu_scratch;

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Points sc into base (which may be NULL, to size it) and returns the size in floats. */
static size_t carve(cpu_scratch *sc, const cpu_plan *P, float *base) {
    const size_t QB = (size_t)P->QB, KT = (size_t)P->KT, Dp = (size_t)P->Dp;
    const size_t sizes[14] = {QB * Dp, QB * Dp, QB, QB, (KT + KSTEP_MAX) * Dp, KT * Dp,
                              QB * Dp, QB * Dp, QB, QB, (KT + KSTEP_MAX) * Dp, KT * Dp,
                              (KT + KSTEP_MAX) * LANES, LANES * Dp};
    float **slots[14] = {&sc->qt[0], &sc->acc[0], &sc->m[0], &sc->l[0], &sc->k[0], &sc->v[0],
                         &sc->qt[1], &sc->acc[1], &sc->m[1], &sc->l[1], &sc->k[1], &sc->v[1],
                         &sc->s, &sc->rows};
    size_t off = 0;
    for (int t = 0; t < 14; t++) {
        *slots[t] = base ? base + off : NULL;
        off += round16(sizes[t]);
    }
    return off;
}

/* ---- input and output conversion ------------------------------------------------------ */

/* f16 -> f32, bit-identical to dswa_f16_to_f32 for all 65536 inputs (checked exhaustively,
   both forms). The exponent is rebiased by 112; an all-ones exponent (inf/NaN) gets 112
   more; a zero exponent (zero or subnormal) is made normal by one more exponent step, which
   then has its 2^-14 subtracted. Without AVX-512's masking the selects must be bit masks for
   the row loop to vectorize; with it, the plain selects give full-width vectors (20% faster
   for f16 at SAME-L), so the AVX-512 build (W == 16) uses those. */
HOT float f16_to_f32(int W, uint16_t h) {
    const uint32_t o = (uint32_t)(h & 0x7fffu) << 13, e = o & 0x0f800000u;
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    if (W == 16) {
        const uint32_t n = o + (112u << 23) + (e == 0x0f800000u ? 112u << 23 : 0u);
        const float sub = as_float(n + (1u << 23)) - 6.103515625e-05f;
        const float f = e == 0 ? sub : as_float(n);
        return as_float(as_bits(f) | sign);
    }
    const uint32_t infnan = 0u - (uint32_t)(e == 0x0f800000u);
    const uint32_t low = 0u - (uint32_t)(e == 0);
    const uint32_t n = o + (112u << 23) + ((112u << 23) & infnan);
    const uint32_t sub = as_bits(as_float(n + (1u << 23)) - 6.103515625e-05f);
    return as_float((n & ~low) | (sub & low) | sign);
}

/* One row of D elements at element stride sd, converted to fp32, zero-padded to Dp. */
HOT void load_row(int W, float *restrict dst, const void *base, int64_t off, int64_t sd,
                  int D, int Dp, dswa_dtype dt) {
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
        if (sd == 1) for (int d = 0; d < D; d++) dst[d] = f16_to_f32(W, s[d]);
        else for (int d = 0; d < D; d++) dst[d] = f16_to_f32(W, s[d * sd]);
    } else {
        const uint16_t *restrict s = (const uint16_t *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) dst[d] = as_float((uint32_t)s[d] << 16);
        else for (int d = 0; d < D; d++) dst[d] = as_float((uint32_t)s[d * sd] << 16);
    }
    for (int d = D; d < Dp; d++) dst[d] = 0.0f;
}

/* dst[c * ldd + r] = src[r * lds + c] for a 16 x 16 block. The AVX-512 build does four rounds
   of swapping the off-diagonal k x k sub-blocks (k = 8, 4, 2, 1), each a two-register
   shuffle, instead of 256 scalar stores; narrower builds copy element by element (16-wide
   vectors would be split through memory there). */
#if defined(__clang__)
#define SHUFFLE2(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
typedef int32_t vi16 __attribute__((vector_size(64)));
#define SHUFFLE2(x, y, ...) __builtin_shuffle(x, y, (vi16){__VA_ARGS__})
#endif

HOT void transpose16(int W, const float *src, size_t lds, float *dst, size_t ldd) {
    if (W != 16) {
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 16; c++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
        return;
    }
    vf16 a[16];
    for (int r = 0; r < 16; r++) memcpy(&a[r], src + (size_t)r * lds, sizeof(vf16));
    /* Round k pairs rows i and i + k: lo[c] = c&k ? y[c-k] : x[c], hi[c] = c&k ? y[c] : x[c+k],
       with the indices of y counted from 16. */
#define SWAP_ROUND(k, LO, HI)                                                                 \
    for (int i = 0; i < 16; i++)                                                              \
        if (!(i & (k))) {                                                                     \
            const vf16 x = a[i], y = a[i + (k)];                                              \
            a[i] = SHUFFLE2(x, y, LO);                                                        \
            a[i + (k)] = SHUFFLE2(x, y, HI);                                                  \
        }
#define L8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define H8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define L4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define H4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define L2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define H2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define L1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define H1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
    SWAP_ROUND(8, L8, H8)
    SWAP_ROUND(4, L4, H4)
    SWAP_ROUND(2, L2, H2)
    SWAP_ROUND(1, L1, H1)
#undef SWAP_ROUND
#undef L8
#undef H8
#undef L4
#undef H4
#undef L2
#undef H2
#undef L1
#undef H1
    for (int c = 0; c < 16; c++) memcpy(dst + (size_t)c * ldd, &a[c], sizeof(vf16));
}

/* f32 -> f16 and bf16, round to nearest even, bit-identical to dswa_f32_to_f16 and
   dswa_f32_to_bf16 for all 2^32 inputs (checked exhaustively), with every case computed and
   picked by bit masks so that output rows convert as vectors (selects between computed
   values get split into branches otherwise). f16: normals are rebiased and rounded at bit
   13; from 65520 up the result is inf; below 2^-14, adding 0.5 makes the FPU round a * 2^24
   to the subnormal's integer mantissa; NaN becomes the quiet NaN 0x7e00. */
HOT uint16_t f32_to_f16(float x) {
    const uint32_t u = as_bits(x), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
    const uint32_t nrm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    const uint32_t sub = as_bits(as_float(a) + 0.5f) - 0x3f000000u;
    const uint32_t big = 0u - (uint32_t)(a >= 0x477ff000u);
    const uint32_t tiny = 0u - (uint32_t)(a < 0x38800000u);
    const uint32_t nan = 0u - (uint32_t)(a > 0x7f800000u);
    uint32_t r = (nrm & ~big) | (0x7c00u & big);
    r = (r & ~tiny) | (sub & tiny);
    r = (r & ~nan) | (0x7e00u & nan);
    return (uint16_t)(r | sign);
}
HOT uint16_t f32_to_bf16(float x) {
    const uint32_t u = as_bits(x);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    const uint32_t nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)((r & ~nan) | (quiet & nan));
}

/* One output row of D elements at element stride sd, converted from fp32. */
HOT void store_row(void *base, int64_t off, int64_t sd, const float *restrict src, int D,
                   dswa_dtype dt) {
    if (dt == DSWA_F32) {
        float *restrict o = (float *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) o[d] = src[d];
        else for (int d = 0; d < D; d++) o[d * sd] = src[d];
    } else if (dt == DSWA_F16) {
        uint16_t *restrict o = (uint16_t *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) o[d] = f32_to_f16(src[d]);
        else for (int d = 0; d < D; d++) o[d * sd] = f32_to_f16(src[d]);
    } else {
        uint16_t *restrict o = (uint16_t *)base + off;
        if (sd == 1) for (int d = 0; d < D; d++) o[d] = f32_to_bf16(src[d]);
        else for (int d = 0; d < D; d++) o[d * sd] = f32_to_bf16(src[d]);
    }
}

/* ---- arithmetic kernels ---------------------------------------------------------------- */

/* exp(x) for x <= 0 (scores minus their max), written so that loops over it vectorize on
   every target: Cody-Waite reduction to r in [-ln2/2, ln2/2], the Cephes expf polynomial
   (about 1 ulp), and 2^k built from the bits of the rounding shift. Below -87 (and at -inf)
   the result is 0, where expf would give a denormal or 0, both negligible next to the max
   term's 1. NaN stays NaN (it is not "tiny" and flows through the polynomial). The test is
   on the bits and the selects are bit masks: with a float compare, or a select that GCC can
   split into two paths, the loops calling this do not vectorize on AVX2 (trapping math). */
HOT float exp_nonpos(float x) {
    const uint32_t u = as_bits(x);
    const uint32_t tiny = 0u - (uint32_t)((u > 0xc2ae0000u) & (u <= 0xff800000u)); /* x < -87 */
    const float xc = as_float((u & ~tiny) | (as_bits(-87.0f) & tiny));
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
    const float e = y * as_float((as_bits(ks) - 0x4b400000u + 127u) << 23); /* y * 2^k */
    return as_float(as_bits(e) & ~tiny);
}

/* Float bits mapped to int32 so that integer order is float order (-0 just below +0, NaNs
   at the two ends); the map is its own inverse. Lets the masked max vectorize as an integer
   max, since float compares feeding selects do not vectorize on AVX2 under GCC's defaults. */
HOT int32_t order_key(float f) {
    const uint32_t b = as_bits(f);
    return (int32_t)(b ^ ((0u - (b >> 31)) & 0x7fffffffu));
}
HOT float from_order_key(int32_t k) {
    const uint32_t b = (uint32_t)k;
    return as_float(b ^ ((0u - (b >> 31)) & 0x7fffffffu));
}

/* ---- the two matrix kernels, per vector width W (floats per register) ------------------

   scores_chunk: s[j][u] = scale * <q_u, k_j> for nk (a multiple of KSTEP) keys, where qt is
   the chunk's Q as [d][lane] and k holds key rows at stride ldk. The lanes are the vector
   axis; KSTEP keys share each load of qt[d], and KSTEP * 16 / W = 8 accumulators stay in
   registers (enough independent chains to hide the multiply-add latency).

   pv_row: acc[0:Dp] += sum_j e[j * es] * V[j, 0:Dp] over n rows, 64 columns at a time in
   64 / W register accumulators; Dp is a multiple of 16. */
#define DEFINE_KERNELS(W)                                                                     \
    enum { KSTEP_##W = W / 2 };                                                               \
    HOT void scores_chunk_##W(const float *qt, const float *k, size_t ldk, int D, int nk,     \
                              float scale, float *s) {                                        \
        enum { NV = LANES / W, KS = KSTEP_##W };                                              \
        for (int j = 0; j < nk; j += KS) {                                                    \
            const float *kj = k + (size_t)j * ldk;                                            \
            vf##W a[KS][NV];                                                                  \
            for (int t = 0; t < KS; t++)                                                      \
                for (int c = 0; c < NV; c++) a[t][c] = (vf##W){0};                            \
            for (int d = 0; d < D; d++) {                                                     \
                vf##W qv[NV];                                                                 \
                for (int c = 0; c < NV; c++)                                                  \
                    memcpy(&qv[c], qt + (size_t)d * LANES + c * W, sizeof(vf##W));            \
                for (int t = 0; t < KS; t++) {                                                \
                    const float x = kj[(size_t)t * ldk + (size_t)d];                          \
                    for (int c = 0; c < NV; c++) a[t][c] += x * qv[c];                        \
                }                                                                             \
            }                                                                                 \
            for (int t = 0; t < KS; t++)                                                      \
                for (int c = 0; c < NV; c++) {                                                \
                    const vf##W r = a[t][c] * scale;                                          \
                    memcpy(s + (size_t)(j + t) * LANES + c * W, &r, sizeof r);                \
                }                                                                             \
        }                                                                                     \
    }                                                                                         \
    HOT void pv_row_##W(float *acc, const float *e, size_t es, const float *v, size_t ldv,    \
                        int n, int Dp) {                                                      \
        int dc = 0;                                                                           \
        for (; dc + 64 <= Dp; dc += 64) {                                                     \
            vf##W a[64 / W];                                                                  \
            for (int c = 0; c < 64 / W; c++) memcpy(&a[c], acc + dc + c * W, sizeof(vf##W));  \
            for (int j = 0; j < n; j++) {                                                     \
                const float w = e[(size_t)j * es];                                            \
                const float *vr = v + (size_t)j * ldv + dc;                                   \
                for (int c = 0; c < 64 / W; c++) {                                            \
                    vf##W x;                                                                  \
                    memcpy(&x, vr + c * W, sizeof x);                                         \
                    a[c] += w * x;                                                            \
                }                                                                             \
            }                                                                                 \
            for (int c = 0; c < 64 / W; c++) memcpy(acc + dc + c * W, &a[c], sizeof(vf##W));  \
        }                                                                                     \
        for (; dc < Dp; dc += 16) {                                                           \
            vf##W a[16 / W];                                                                  \
            for (int c = 0; c < 16 / W; c++) memcpy(&a[c], acc + dc + c * W, sizeof(vf##W));  \
            for (int j = 0; j < n; j++) {                                                     \
                const float w = e[(size_t)j * es];                                            \
                const float *vr = v + (size_t)j * ldv + dc;                                   \
                for (int c = 0; c < 16 / W; c++) {                                            \
                    vf##W x;                                                                  \
                    memcpy(&x, vr + c * W, sizeof x);                                         \
                    a[c] += w * x;                                                            \
                }                                                                             \
            }                                                                                 \
            for (int c = 0; c < 16 / W; c++) memcpy(acc + dc + c * W, &a[c], sizeof(vf##W));  \
        }                                                                                     \
    }
DEFINE_KERNELS(4)
DEFINE_KERNELS(8)
DEFINE_KERNELS(16)
#undef DEFINE_KERNELS

/* W is a constant in each build of the task, so these reduce to one direct call. */
HOT int kstep(int W) { return W == 16 ? KSTEP_16 : W == 8 ? KSTEP_8 : KSTEP_4; }
HOT void scores_chunk(int W, const float *qt, const float *k, size_t ldk, int D, int nk,
                      float scale, float *s) {
    if (W == 16) scores_chunk_16(qt, k, ldk, D, nk, scale, s);
    else if (W == 8) scores_chunk_8(qt, k, ldk, D, nk, scale, s);
    else scores_chunk_4(qt, k, ldk, D, nk, scale, s);
}
HOT void pv_row(int W, float *acc, const float *e, size_t es, const float *v, size_t ldv, int n,
                int Dp) {
    if (W == 16) pv_row_16(acc, e, es, v, ldv, n, Dp);
    else if (W == 8) pv_row_8(acc, e, es, v, ldv, n, Dp);
    else pv_row_4(acc, e, es, v, ldv, n, Dp);
}

/* ---- softmax ------------------------------------------------------------------------------ */

/* Online-softmax step of one chunk over nk keys: lane u sees keys lo[u]..hi[u] (empty when
   lo > hi). Turns s into the unnormalised weights exp(s - m_new) (0 outside the window),
   updates the running max m and sum l, and returns in alpha the factor by which the lane's
   earlier accumulator must be rescaled (1 when nothing changes). Masking is by selection,
   so a neighbour's NaN score cannot leak into a lane; a NaN inside the window makes the
   lane's max or its exps NaN, and so its sum and output, as it must. */
HOT void softmax_chunk(float *s, int nk, const int32_t *lo, const int32_t *hi, float *m,
                       float *l, float *alpha) {
    const int32_t key_neg_inf = order_key(-INFINITY);
    int32_t mk[LANES];
    float mn[LANES], sum[LANES];
    for (int u = 0; u < LANES; u++) mk[u] = key_neg_inf;
    for (int j = 0; j < nk; j++)
        for (int u = 0; u < LANES; u++) {
            const int32_t key = order_key(s[(size_t)j * LANES + u]);
            const int32_t x = ((j >= lo[u]) & (j <= hi[u])) ? key : key_neg_inf;
            mk[u] = x > mk[u] ? x : mk[u];
        }
    for (int u = 0; u < LANES; u++) {
        const float mt = from_order_key(mk[u]);
        mn[u] = ((mt > m[u]) | (mt != mt)) ? mt : m[u];
        sum[u] = 0.0f;
    }
    for (int j = 0; j < nk; j++)
        for (int u = 0; u < LANES; u++) {
            const float x = exp_nonpos(s[(size_t)j * LANES + u] - mn[u]);
            const uint32_t in = 0u - (uint32_t)((j >= lo[u]) & (j <= hi[u]));
            const float y = as_float(as_bits(x) & in);     /* x in the window, else 0 */
            s[(size_t)j * LANES + u] = y;
            sum[u] += y;
        }
    /* With m = -inf nothing was accumulated before (or it is NaN already and must stay so),
       so no rescale is needed. */
    for (int u = 0; u < LANES; u++) {
        const int rescale = (mn[u] > m[u]) & (m[u] != -INFINITY);
        alpha[u] = rescale ? exp_nonpos(m[u] - mn[u]) : 1.0f;
        l[u] = l[u] * alpha[u] + sum[u];
        m[u] = mn[u];
    }
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
   at SAME-L: about 1.25x, all of it from memory stalls. Strided dims are left alone. */
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

HOT void run_task(const cpu_plan *P, float *mem, int64_t task, const int W) {
    const dswa_problem *p = P->p;
    const dswa_dtype dt = p->dtype;
    const int D = P->D, Dp = P->Dp;
    const size_t Dpz = (size_t)Dp;
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
        for (int c0 = 0; c0 < nq; c0 += LANES) {
            /* Rows past nq keep stale data: they are lanes whose results are never used. */
            const int nr = nq - c0 < LANES ? nq - c0 : LANES;
            for (int r = 0; r < nr; r++)
                load_row(W, sc.rows + (size_t)r * Dpz, P->q, qoff + (i0 + c0 + r) * p->q.seq,
                         p->q.dim, D, Dp, dt);
            float *qt = sc.qt[pr] + (size_t)c0 * Dpz;
            for (int d0 = 0; d0 < Dp; d0 += 16)
                transpose16(W, sc.rows + d0, Dpz, qt + (size_t)d0 * LANES, LANES);
        }
        memset(sc.acc[pr], 0, (size_t)nq * Dpz * sizeof(float));
        for (int r = 0; r < P->QB; r++) { sc.m[pr][r] = -INFINITY; sc.l[pr][r] = 0.0f; }
    }

    const int64_t klo = win_lo(p, i0), khi = win_hi(p, i0 + nq - 1);
    for (int64_t t0 = klo; t0 <= khi; t0 += P->KT) {
        const int64_t t1 = t0 + P->KT - 1 < khi ? t0 + P->KT - 1 : khi; /* inclusive */
        const int nt = (int)(t1 - t0 + 1);
        for (int pr = 0; pr < 2; pr++) {
            const int64_t koff = b * p->k.batch + pr * p->k.pair + h * p->k.head;
            for (int r = 0; r < nt; r++)
                load_row(W, sc.k[pr] + (size_t)r * Dpz, P->k, koff + (t0 + r) * p->k.seq, p->k.dim,
                         D, Dp, dt);
        }
        for (int pr = 0; pr < npair_v; pr++) {
            const int64_t voff = b * p->v.batch + pr * p->v.pair + h * p->v.head;
            for (int r = 0; r < nt; r++)
                load_row(W, sc.v[pr] + (size_t)r * Dpz, P->v, voff + (t0 + r) * p->v.seq, p->v.dim,
                         D, Dp, dt);
        }
        const float *vt[2] = {sc.v[0], sc.v[npair_v - 1]};

        for (int c0 = 0; c0 < nq; c0 += LANES) {
            const int nv = nq - c0 < LANES ? nq - c0 : LANES;
            const int64_t first = i0 + c0;
            int64_t ua = win_lo(p, first), ub = win_hi(p, first + nv - 1);
            if (ua < t0) ua = t0;
            if (ub > t1) ub = t1;
            if (ua > ub) continue;                /* this tile misses every window here */
            /* Each lane's window, relative to key ua; unused lanes get an empty one. */
            int32_t lo[LANES], hi[LANES];
            for (int u = 0; u < LANES; u++) {
                int64_t a = 1, z = 0;
                if (u < nv) {
                    a = win_lo(p, first + u) - ua;
                    z = win_hi(p, first + u) - ua;
                    if (a < t0 - ua) a = t0 - ua;
                    if (z > ub - ua) z = ub - ua;
                }
                lo[u] = (int32_t)a;
                hi[u] = (int32_t)z;
            }
            const int nk = (int)(ub - ua + 1), nks = (nk + kstep(W) - 1) / kstep(W) * kstep(W);
            for (int pr = 0; pr < 2; pr++) {
                /* Keys past the tile (fewer than KSTEP) are stale rows, scored then masked. */
                scores_chunk(W, sc.qt[pr] + (size_t)c0 * Dpz, sc.k[pr] + (size_t)(ua - t0) * Dpz,
                             Dpz, D, nks, p->scale, sc.s);
                float alpha[LANES];
                softmax_chunk(sc.s, nk, lo, hi, sc.m[pr] + c0, sc.l[pr] + c0, alpha);
                for (int u = 0; u < nv; u++) {
                    if (lo[u] > hi[u]) continue;
                    float *acc = sc.acc[pr] + (size_t)(c0 + u) * Dpz;
                    if (alpha[u] != 1.0f)
                        for (int d = 0; d < Dp; d++) acc[d] *= alpha[u];
                    pv_row(W, acc, sc.s + (size_t)lo[u] * LANES + u, LANES,
                           vt[pr] + (size_t)(ua - t0 + lo[u]) * Dpz, Dpz, hi[u] - lo[u] + 1, Dp);
                }
            }
        }
    }

    /* out = A_0 - lambda * A_1, normalised here rather than per tile. */
    const float lambda = p->lambda;
    const int64_t ooff = b * p->out.batch + h * p->out.head;
    for (int r = 0; r < nq; r++) {
        const float inv0 = 1.0f / sc.l[0][r], inv1 = 1.0f / sc.l[1][r];
        const float *a0 = sc.acc[0] + (size_t)r * Dpz, *a1 = sc.acc[1] + (size_t)r * Dpz;
        float *o = sc.rows;
        for (int d = 0; d < D; d++) o[d] = a0[d] * inv0 - lambda * (a1[d] * inv1);
        store_row(P->out, ooff + (i0 + r) * p->out.seq, p->out.dim, o, D, dt);
    }
}

/* The three builds of a task, and the choice between them. */
typedef void (*task_fn)(const cpu_plan *P, float *mem, int64_t task);

#ifdef HAVE_X86_BUILDS
__attribute__((target("avx512f"))) FAST_FP
static void run_task_avx512(const cpu_plan *P, float *mem, int64_t task) {
    run_task(P, mem, task, 16);
}
__attribute__((target("avx2,fma"))) FAST_FP
static void run_task_avx2(const cpu_plan *P, float *mem, int64_t task) {
    run_task(P, mem, task, 8);
}
#endif
FAST_FP static void run_task_base(const cpu_plan *P, float *mem, int64_t task) {
    run_task(P, mem, task, 4);
}

/* A build and the name dswa_cpu_isa reports for it. */
typedef struct task_build { const char *isa; task_fn run; } task_build;

/* The rule: the widest build this CPU runs. dswa_cpu_run and dswa_cpu_isa both ask here. */
static const task_build *pick_task_build(void) {
#ifdef HAVE_X86_BUILDS
    static const task_build avx512 = {"avx512", run_task_avx512};
    static const task_build avx2 = {"avx2", run_task_avx2};
    __builtin_cpu_init();   /* these check CPUID and that the OS saves the wide registers */
    if (__builtin_cpu_supports("avx512f")) return &avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &avx2;
#endif
#if defined(__SSE2__)
    static const task_build base = {"sse2", run_task_base};
#else
    static const task_build base = {"generic", run_task_base};   /* a target without SSE2 */
#endif
    return &base;
}

const char *dswa_cpu_isa(void) { return pick_task_build()->isa; }

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
    kt = kt > 256 ? 256 : kt < KSTEP_MAX ? KSTEP_MAX : kt;
    P.KT = kt;
    int qb = 16384 / P.Dp;
    qb = qb > 64 ? 64 : qb < LANES ? LANES : qb;
    qb &= ~(LANES - 1);

    const int nthreads = omp_get_max_threads();
    /* Keep every thread busy on small problems: shrink the block, not below one chunk. */
    while (qb > LANES &&
           (int64_t)p->batch * p->heads * ((p->seq_len + qb - 1) / qb) < 4 * (int64_t)nthreads)
        qb = (qb / 2) & ~(LANES - 1);
    P.QB = qb;
    P.nblk = (p->seq_len + P.QB - 1) / P.QB;
    P.ntask = (int64_t)p->batch * p->heads * P.nblk;
    cpu_scratch sizing;
    P.per_thread = carve(&sizing, &P, NULL);

    const task_fn run = pick_task_build()->run;
    const int team = P.ntask < nthreads ? (int)P.ntask : nthreads;
    const size_t bytes = P.per_thread * sizeof(float) * (size_t)team;
    /* calloc: the rows that micro-tiles overhang and the spare Q lanes start finite. */
    float *mem = (float *)calloc(1, bytes + 64);
    if (!mem)
        return dswa_fail(DSWA_ERR_OUT_OF_MEMORY,
                         "CPU backend scratch: %zu bytes (%d threads) could not be allocated",
                         bytes, team);
    float *aligned = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);

    /* Dynamic chunks of up to one block's heads: consecutive tasks stay on one thread (the
       prefetch of task + 1 pays off) while a thread slowed by a busy or smaller core just
       takes fewer chunks; static shares would make every call wait for the slowest. */
    int64_t chunk = P.ntask / (8 * (int64_t)team);
    chunk = chunk > p->heads ? p->heads : chunk < 1 ? 1 : chunk;
#pragma omp parallel num_threads(team)
    {
        float *mine = aligned + P.per_thread * (size_t)omp_get_thread_num();
#pragma omp for schedule(dynamic, chunk)
        for (int64_t t = 0; t < P.ntask; t++) run(&P, mine, t);
    }
    free(mem);
    return DSWA_OK;
}
