/* The band kernel: differential sliding-window attention for windows with WL + WR <= 48
 * (SAME-L has 34), on tensor cores (sm_80+), fp32 accumulation, one rounding at the store.
 * Wider windows go to kernel_wide.cu; the kernel is picked in kernels.c.
 *
 * Entries (kernels.h, DSWA_BAND_KERNELS), each dswa_fwd_band_impl<T, FP32>:
 *   dswa_fwd_f32_tf32   f32, TF32 mma m16n8k8                         4 blocks per SM
 *   dswa_fwd_f32_fp32   f32, every product as three TF32 products     3 blocks per SM
 *   dswa_fwd_f16        f16, mma m16n8k16                              4 blocks per SM
 *   dswa_fwd_bf16       bf16, mma m16n8k16                             4 blocks per SM
 * and in each, two phase schedules picked per launch: V with 2H heads, or V shared by both
 * pairs (v_sp == 0). In this file: the phases, their loads, Q, the window mask, scores, softmax,
 * P.V, the phase loop of a tile, the kernel, its entries and the table the launcher reads.
 *
 * What it computes: for one batch b, one output head h and a tile of 64 queries,
 *   out = softmax(s_0) V_0 - lambda softmax(s_1) V_1
 * over each query's window, for both heads of the pair, in registers.
 *
 * Why it is shaped so. The op moves bytes and does little arithmetic, so everything serves the
 * memory pipe, and the instructions between two loads are what hides their latency:
 *  - The block's whole key band (64 + WL + WR <= 112 rows) fits one shared-memory buffer of
 *    128-byte rows. So a pair's scores are complete before its softmax: the softmax is exact
 *    (no online rescaling), P is normalised before P.V, and pair 1's P is pre-multiplied by
 *    -lambda/l_1, so one fp32 accumulator holds a_0 - lambda a_1 and no second one exists.
 *  - The block streams K and V in phases of 128-byte rows through a ring of three 14 KB buffers
 *    (cp.async.cg, 16 bytes, L2 only): two phases are in flight while one is computed. V with
 *    2H heads: K0 V0 K1 V1. Shared V (v.pair == 0): K0 K1 V with P' = P0/l0 - lambda P1/l1
 *    formed in fp32 and one P.V, so V is read once. f32 splits each into two head-dim halves.
 *    Each row is read from global memory once per block; the 34 halo rows come from L2.
 *  - Few registers (S 32, accumulator 32, Q 16) let 4 blocks share an SM: 16 warps and 8 phases
 *    (~100 KB) in flight per SM, and 172 KB of static shared memory.
 *  - Per score, 2 instructions of masking: which band scores lie inside the window (and the
 *    sequence) is a bit mask computed once per block. Key tiles 0-6 are unconditional, the 8th
 *    exists only for WL + WR > 40. Interior blocks step one cp.async pointer by 16 rows.
 *  - Per-dtype choice (BAND_FFMA; numbers in docs/PERF.md): 16-bit computes
 *    p = 2^(s qscale - max qscale) in one FFMA (Q carries the scale's sign); f32 scales each
 *    score first.
 *  - Fragment layouts, the head-dimension permutation that turns every Q/K/V access into a
 *    16-byte load, and the bank-conflict-free swizzles are those of mma.cuh.
 *  - Q after the tile's first rows arrives through the ring as phases of its own (see the
 *    phases below; measured against register loads in docs/PERF.md).
 *  - Masked scores are replaced by -inf; a non-finite result sends the warp to the exact
 *    scalar path of common.cuh (a NaN in V must not leak through 0 * NaN in the mma).
 *  - DSWA_MATH_FP32 (entry dswa_fwd_f32_fp32) is the same kernel with every f32 product done
 *    as three TF32 products (see split_hi); it needs more registers, so 3 blocks per SM.
 *
 * Arguments follow TensorRT's AOT order (inputs, int32 scalars, output); grid
 * (ceil(N/64), H, B), 128 threads, no dynamic shared memory.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/launch.h"
#include "cuda/mma.cuh"
#include "cuda/samel.cuh"

#define BAND_ROWS (DSWA_TILE + DSWA_BAND_MAX_SPAN) /* 112 key rows */
#define BAND_KEY_TILES ((16 + DSWA_BAND_MAX_SPAN) / 8)    /* 8-key tiles of one warp's band: 8 */
#define BAND_BUFS 3
#define BAND_LOADS (BAND_ROWS * 8 / DSWA_THREADS)  /* 16-byte copies per thread per phase: 7 */
/* The softmax's exponent: 16-bit computes p = 2^(s qscale - max qscale) in one FFMA (Q carries
   the scale's sign); f32 scales each score first (the FFMA lost there: more spills). */
#define BAND_FFMA(T) (sizeof(T) == 2)

/* Phases. f32 splits the head dimension in two 32-float halves (128-byte rows); 16-bit rows
   are 128 bytes whole. V with 2H heads: K0 V0 K1 V1. Shared V: K0 K1 V, one P.V with
   P' = P0/l0 - lambda P1/l1, so V is read once and half the P.V products disappear.
   Q ring: the Q rows after the tile's first (which is loaded into registers
   at the start, beside the first two phases) arrive through the ring as phases of their own
   (64 rows), read into registers at their step, so no Q load waits on DRAM between two phases:
   f32 K0lo Q0hi K0hi V0.. Q1lo K1lo Q1hi K1hi V1.. (shared V: K0lo Q0hi K0hi Q1lo K1lo Q1hi K1hi
   V..); 16-bit K0 V0 Q1 K1 V1 (shared V: K0 Q1 K1 V). Measured in docs/PERF.md. */
template <typename T, int SHARED, int SAMEL = 0> struct band_phases {
    enum { HALVES = sizeof(T) == 4 ? 2 : 1, N = (SHARED ? 3 : 4) * HALVES + 2 * HALVES - 1 + SAMEL };
    /* A phase's code: what it loads (K, V or Q) * 4 + pair * 2 + head-dimension half. */
    enum { K = 0, V = 1, Q = 2 };
    static __device__ constexpr int load(int what, int pair, int half) { return 4 * what + 2 * pair + half; }
    static __device__ constexpr int code(int ph) {
        const int f32[11] = {load(K, 0, 0), load(Q, 0, 1), load(K, 0, 1), load(V, 0, 0), load(V, 0, 1),
                             load(Q, 1, 0), load(K, 1, 0), load(Q, 1, 1), load(K, 1, 1), load(V, 1, 0),
                             load(V, 1, 1)};
        const int f32_shared_v[9] = {load(K, 0, 0), load(Q, 0, 1), load(K, 0, 1), load(Q, 1, 0), load(K, 1, 0),
                                     load(Q, 1, 1), load(K, 1, 1), load(V, 0, 0), load(V, 0, 1)};
        const int b16[5] = {load(K, 0, 0), load(V, 0, 0), load(Q, 1, 0), load(K, 1, 0), load(V, 1, 0)};
        const int b16_shared_v[4] = {load(K, 0, 0), load(Q, 1, 0), load(K, 1, 0), load(V, 0, 0)};
        /* the fused block (shared V): every Q phase through the ring, to be transformed there */
        const int f32_samel[10] = {load(Q, 0, 0), load(K, 0, 0), load(Q, 0, 1), load(K, 0, 1), load(Q, 1, 0),
                                   load(K, 1, 0), load(Q, 1, 1), load(K, 1, 1), load(V, 0, 0), load(V, 0, 1)};
        const int b16_samel[5] = {load(Q, 0, 0), load(K, 0, 0), load(Q, 1, 0), load(K, 1, 0), load(V, 0, 0)};
        if (SAMEL) return HALVES == 2 ? f32_samel[ph] : b16_samel[ph];
        return HALVES == 2 ? (SHARED ? f32_shared_v[ph] : f32[ph]) : (SHARED ? b16_shared_v[ph] : b16[ph]);
    }
    static __device__ constexpr int is_v(int ph) { return code(ph) >> 2 == V; }
    static __device__ constexpr int is_q(int ph) { return code(ph) >> 2 == Q; }
    static __device__ constexpr int pair(int ph) { return (code(ph) >> 1) & 1; }
    static __device__ constexpr int half(int ph) { return code(ph) & 1; }
    static __device__ constexpr int first_v(int ph = 0) { return is_v(ph) ? ph : first_v(ph + 1); }
};

typedef uint4 band_buf[BAND_ROWS][8]; /* 16-byte chunks, swizzled per row */

/* DSWA_MATH_FP32 (template parameter FP32) runs every f32 product as three TF32 products
   (split_hi, split_lo in mma.cuh). */

/* The value, unknown to the compiler: address arithmetic derived from it stays where it is
   written instead of being computed early for every phase and held in registers. */
__device__ __forceinline__ int dswa_opaque(int x) {
    asm volatile("mov.b32 %0, %0;" : "+r"(x));
    return x;
}

template <typename T> struct band_ctx {
    const T *q, *k, *v; /* at (b, h) */
    int n, nkeys, kstart, wl;
    int q_sn, q_sp, k_sn, k_sp, v_sn, v_sp;
    bool interior;  /* rows kstart .. kstart + BAND_ROWS - 1 all inside the sequence */
    bool tile8;        /* the band needs its 8th key tile (span > 40) */
    float scale;
};

/* Copies phase ph's rows [kstart, kstart + nkeys) into buf; rows outside it or outside the
   sequence are zero-filled (a stale NaN must never meet a zero probability). Thread t copies
   chunk t % 8 of rows t / 8 + 16 it: one swizzle, one pointer stepped by 16 rows. */
template <typename T, int SHARED, int SAMEL>
__device__ __forceinline__ void band_load(band_buf &buf, const band_ctx<T> &c, int ph) {
    typedef band_phases<T, SHARED, SAMEL> P;
    const int isv = P::is_v(ph), col = P::half(ph) * 32; /* elements */
    const T *base = isv ? c.v + (int64_t)P::pair(ph) * c.v_sp : c.k + (int64_t)P::pair(ph) * c.k_sp;
    const int sn = isv ? c.v_sn : c.k_sn, r0 = threadIdx.x >> 3, u = threadIdx.x & 7;
    const int sw = dswa_swz<T>(r0), e = u * (16 / (int)sizeof(T)) + col;
    if (P::is_q(ph)) { /* the tile's 64 Q rows of this pair and half; rows past N zero-filled */
        const T *qb = c.q + (int64_t)P::pair(ph) * c.q_sp + e;
#pragma unroll
        for (int it = 0; it < DSWA_TILE / 16; it++) {
            const int r = r0 + 16 * it, i = c.kstart + c.wl + r;
            dswa_cp_async16(&buf[r][u ^ sw], qb + (int64_t)(i < c.n ? i : 0) * c.q_sn, i < c.n);
        }
        return;
    }
    if (c.interior) {
        /* opaque: computed here, not shared with other phases and held in registers throughout */
        const T *src = base + (int64_t)(dswa_opaque(c.kstart + r0)) * sn + e;
        const int64_t step = (int64_t)16 * sn;
#pragma unroll
        for (int it = 0; it < BAND_LOADS; it++, src += step)
            dswa_cp_async16(&buf[r0 + 16 * it][u ^ sw], src, r0 + 16 * it < c.nkeys);
    } else {
#pragma unroll
        for (int it = 0; it < BAND_LOADS; it++) {
            const int r = r0 + 16 * it, j = c.kstart + r;
            const bool ok = r < c.nkeys && (unsigned)j < (unsigned)c.n;
            const int jc = min(max(j, 0), c.n - 1); /* a valid address even when nothing is read */
            dswa_cp_async16(&buf[r][u ^ sw], base + (int64_t)jc * sn + e, ok);
        }
    }
}

/* Q fragments of pair p (f32: half half of the head dimension) for this thread's rows i and
   i+8: f32 holds full-row chunks 4k + c for k = 2*half, 2*half+1 (rounded to TF32); 16-bit holds
   chunks c and 4 + c raw. The scale is applied to the fp32 scores: folding it into Q would
   round Q a second time. band_prep_q lays the loaded words out as mma A fragments. */
template <typename T, int FP32>
__device__ __forceinline__ void band_prep_q(uint32_t q_frag[4][4], uint32_t q_low[4][4], uint32_t w[2][8],
                                            const band_ctx<T> &c) {
    if (BAND_FFMA(T) && !(c.scale > 0.f)) { /* negate or zero Q: the FFMA needs qscale > 0 */
        const uint32_t qand = c.scale == 0.f ? 0u : ~0u;
        const uint32_t qxor = c.scale < 0.f ? (sizeof(T) == 4 ? 0x80000000u : 0x80008000u) : 0u;
#pragma unroll
        for (int rr = 0; rr < 2; rr++)
#pragma unroll
            for (int x = 0; x < 8; x++) w[rr][x] = (w[rr][x] & qand) ^ qxor;
    }
    /* k-step st takes words 2st (columns c) and 2st+1 (columns c+4 / c+8) of both rows; laid
       out here once in mma A order so the mma loop needs no register moves. f32 rounds to TF32. */
#pragma unroll
    for (int st = 0; st < 4; st++) {
        const uint32_t a[4] = {w[0][2 * st], w[1][2 * st], w[0][2 * st + 1], w[1][2 * st + 1]};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if constexpr (FP32) {
                q_frag[st][e] = split_hi(a[e]);
                q_low[st][e] = split_lo(a[e]);
            } else {
                q_frag[st][e] = sizeof(T) == 4 ? tf32(__uint_as_float(a[e])) : a[e];
            }
        }
    }
}
template <typename T, int FP32>
__device__ __forceinline__ void band_load_q(uint32_t q_frag[4][4], uint32_t q_low[4][4],
                                            const band_ctx<T> &c, int p, int half, int i) {
    uint32_t w[2][8];
    dswa_load_q_rows<2, false>(w, c.q + (int64_t)p * c.q_sp, c.q_sn, c.n, i, sizeof(T) == 4 ? 2 * half : 0);
    band_prep_q<T, FP32>(q_frag, q_low, w, c);
}
/* The same from a Q phase in the ring : block rows 16 warp + g (+8), chunks 4x + c of
   the half, through the f32 swizzle (conflict-free for this pattern, see mma.cuh). */
template <typename T, int FP32>
__device__ __forceinline__ void band_smem_q(uint32_t q_frag[4][4], uint32_t q_low[4][4], const band_buf &buf,
                                            const band_ctx<T> &c, int warp) {
    const int lane = threadIdx.x & 31, g = lane >> 2, quad = lane & 3;
    uint32_t w[2][8];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int r = 16 * warp + g + 8 * rr;
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const uint4 u = buf[r][(4 * x + quad) ^ dswa_swz<T>(r)];
            w[rr][4 * x + 0] = u.x; w[rr][4 * x + 1] = u.y; w[rr][4 * x + 2] = u.z; w[rr][4 * x + 3] = u.w;
        }
    }
    band_prep_q<T, FP32>(q_frag, q_low, w, c);
}

/* Which of this thread's band scores are inside the window and the sequence: bit 8e + kt for
   element e of key tile kt. Thread (g, c) holds keys 8 kt + 2c + (e & 1) of the warp band
   against queries g + 8 (e >> 1), so each e is a range of tiles; computed once per block. */
__device__ __forceinline__ uint32_t band_mask(int span, int warp_key0, int n, bool edge) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    uint32_t m = 0;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int d = 2 * c + (e & 1) - g - 8 * (e >> 1); /* key - query = 8 kt + d */
        int lo = max(-(d >> 3), 0), hi = min((span - d) >> 3, BAND_KEY_TILES - 1);
        if (edge) { /* key warp_key0 + 8 kt + dj must lie in [0, n) */
            const int dj = 2 * c + (e & 1);
            lo = max(lo, -((warp_key0 + dj) >> 3));
            hi = (int)min((int64_t)hi, ((int64_t)n - 1 - warp_key0 - dj) >> 3);
        }
        lo = min(lo, BAND_KEY_TILES);
        hi = max(hi, -1);
        m |= (hi + 1 > lo ? (1u << (hi + 1)) - (1u << lo) : 0u) << (8 * e);
    }
    return m;
}

/* s[kt] += Q K^T over this phase's dims, for the warp's band tiles (tile kt = block rows
   16*warp + 8*kt .. +7; the 8th only when tile8). */
template <typename T, int FP32>
__device__ __forceinline__ void band_scores(float s[BAND_KEY_TILES][4], const band_buf &buf,
                                            const uint32_t q_frag[4][4], const uint32_t q_low[4][4],
                                            int warp, bool tile8) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
        if (kt == BAND_KEY_TILES - 1 && !tile8) continue;
        const int row = 16 * warp + 8 * kt + g, sw = dswa_swz<T>(row);
        const uint4 k0 = buf[row][c ^ sw], k1 = buf[row][(4 + c) ^ sw];
        const uint32_t kr[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
        for (int st = 0; st < 4; st++) {
            if constexpr (FP32) { /* small terms first */
                const uint32_t h0 = split_hi(kr[2 * st]), h1 = split_hi(kr[2 * st + 1]);
                mma_tf32(s[kt], q_low[st][0], q_low[st][1], q_low[st][2], q_low[st][3], h0, h1);
                mma_tf32(s[kt], q_frag[st][0], q_frag[st][1], q_frag[st][2], q_frag[st][3], split_lo(kr[2 * st]),
                         split_lo(kr[2 * st + 1]));
                mma_tf32(s[kt], q_frag[st][0], q_frag[st][1], q_frag[st][2], q_frag[st][3], h0, h1);
            } else if constexpr (sizeof(T) == 4)
                mma_tf32(s[kt], q_frag[st][0], q_frag[st][1], q_frag[st][2], q_frag[st][3], kr[2 * st],
                         kr[2 * st + 1]);
            else
                mma16<T>(s[kt], q_frag[st], kr[2 * st], kr[2 * st + 1]);
        }
    }
}

/* Exact softmax of one pair over the warp's band: scale, mask (precomputed bits), row max,
   p = 2^(x - max) (exactly 1 at the maximum: a one-key window gives weight 1, not 1 + ulp),
   row sum, and P = p f / l (+ add: shared V's P0 when this is pair 1) with f = 1 or -lambda.
   P stays in natural fragment order; band_p_to_a makes the mma operand. */
template <int FFMA, int ADD>
__device__ __forceinline__ void band_softmax(float s[BAND_KEY_TILES][4], const float add[BAND_KEY_TILES][4],
                                             uint32_t mask, bool tile8, float qscale, float f) {
    float mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
        if (kt == BAND_KEY_TILES - 1 && !tile8) continue;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[kt][e] = (mask >> (8 * e + kt)) & 1u ? (FFMA ? s[kt][e] : s[kt][e] * qscale) : -INFINITY;
            mx[e >> 1] = fmaxf(mx[e >> 1], s[kt][e]);
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = dswa_quad_max(mx[r]);
        if (mx[r] == -INFINITY) mx[r] = 0.f; /* a row past N: every key masked */
        if (FFMA) mx[r] *= qscale;
    }
#pragma unroll
    for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
        if (kt == BAND_KEY_TILES - 1 && !tile8) continue;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[kt][e] = dswa_exp2(FFMA ? fmaf(s[kt][e], qscale, -mx[e >> 1]) : s[kt][e] - mx[e >> 1]);
            l[e >> 1] += s[kt][e];
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] = dswa_quad_sum(l[r]);
        /* l >= 1. FFMA: the maximum's weight is 2^(rounding error), not exactly 1; a correctly
           rounded 1/l still makes a one-key window's weight exactly f */
        l[r] = FFMA ? f * __frcp_rn(l[r]) : __fdividef(f, l[r]);
    }
#pragma unroll
    for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
        const bool live = kt < BAND_KEY_TILES - 1 || tile8;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            /* product rounded before the sum (no FMA): a one-key window then gives P0 = 1 and
               P1 = -lambda exactly, and P' = 1 - 1 = 0 for lambda = 1, not the FMA's residual */
            if constexpr (ADD) s[kt][e] = live ? __fadd_rn(__fmul_rn(s[kt][e], l[e >> 1]), add[kt][e]) : add[kt][e];
            else s[kt][e] = live ? s[kt][e] * l[e >> 1] : 0.f;
        }
    }
}

/* P as the P.V mma's A operand. f32: A order (column c <-> key 2c, c+4 <-> key 2c+1), rounded
   to TF32 (split: hi and lo parts); 16-bit: packed at use. */
template <typename T, int FP32>
__device__ __forceinline__ void band_p_to_a(float s[BAND_KEY_TILES][4], float p_low[BAND_KEY_TILES][4]) {
    if constexpr (sizeof(T) == 4)
#pragma unroll
        for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
            const float pp[4] = {s[kt][0], s[kt][2], s[kt][1], s[kt][3]};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if constexpr (FP32) {
                    s[kt][e] = __uint_as_float(split_hi(__float_as_uint(pp[e])));
                    p_low[kt][e] = __uint_as_float(split_lo(__float_as_uint(pp[e])));
                } else {
                    s[kt][e] = __uint_as_float(tf32(pp[e]));
                }
            }
        }
}

/* acc += P V over this phase's output dims. f32: one 8-key k-step per tile; the thread reads
   V rows 2c and 2c+1 at chunk g of the half (output dims 4g..4g+3 of n-tiles 4*half..+3).
   16-bit: one 16-key k-step per two tiles, V through ldmatrix.trans (P of an absent 8th tile
   is 0, and its V rows are zero-filled or real rows). */
template <typename T, int FP32>
__device__ __forceinline__ void band_pv(float acc[8][4], const band_buf &buf,
                                        const float s[BAND_KEY_TILES][4], const float p_low[BAND_KEY_TILES][4],
                                        int warp, bool tile8, int half) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    if constexpr (sizeof(T) == 4) {
#pragma unroll
        for (int kt = 0; kt < BAND_KEY_TILES; kt++) {
            if (kt == BAND_KEY_TILES - 1 && !tile8) continue;
            const uint32_t a0 = __float_as_uint(s[kt][0]), a1 = __float_as_uint(s[kt][1]);
            const uint32_t a2 = __float_as_uint(s[kt][2]), a3 = __float_as_uint(s[kt][3]);
            const int r0 = 16 * warp + 8 * kt + 2 * c;
            const uint4 x0 = buf[r0][g ^ dswa_swz<float>(r0)], x1 = buf[r0 + 1][g ^ dswa_swz<float>(r0 + 1)];
            float *o = acc[4 * half];
            if constexpr (FP32) {
                const uint32_t l0 = __float_as_uint(p_low[kt][0]), l1 = __float_as_uint(p_low[kt][1]);
                const uint32_t l2 = __float_as_uint(p_low[kt][2]), l3 = __float_as_uint(p_low[kt][3]);
                const uint32_t v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                for (int j = 0; j < 4; j++) { /* small terms first */
                    const uint32_t h0 = split_hi(v0[j]), h1 = split_hi(v1[j]);
                    mma_tf32(o + 4 * j, l0, l1, l2, l3, h0, h1);
                    mma_tf32(o + 4 * j, a0, a1, a2, a3, split_lo(v0[j]), split_lo(v1[j]));
                    mma_tf32(o + 4 * j, a0, a1, a2, a3, h0, h1);
                }
                continue;
            }
            mma_tf32(o + 0, a0, a1, a2, a3, x0.x, x1.x);
            mma_tf32(o + 4, a0, a1, a2, a3, x0.y, x1.y);
            mma_tf32(o + 8, a0, a1, a2, a3, x0.z, x1.z);
            mma_tf32(o + 12, a0, a1, a2, a3, x0.w, x1.w);
        }
    } else {
        const int mtx = lane >> 3;
#pragma unroll
        for (int kt = 0; kt < BAND_KEY_TILES; kt += 2) {
            const uint32_t a[4] = {pack2<T>(s[kt][0], s[kt][1]), pack2<T>(s[kt][2], s[kt][3]),
                                   pack2<T>(s[kt + 1][0], s[kt + 1][1]), pack2<T>(s[kt + 1][2], s[kt + 1][3])};
            const int r = 16 * warp + 8 * kt + (lane & 7) + 8 * (mtx & 1);
            dswa_pv16_kstep<T>(acc, a, (const T *)&buf[r][0], r);
        }
    }
}

/* ---- The fused SAME-L block: DyT and RoPE of a Q or K phase, in place in the ring ----------
   After a phase's rows have landed (and before anyone reads them), each thread transforms one
   row of it: the row's rotated chunk pairs (chunk a with chunk a + rot_pairs: dim j with
   j + rot_dims/2), then its other chunks, with samel.cuh's element functions; a barrier
   follows. One row per thread keeps a pair's partner in the same thread (no exchange) and every
   lane on the same logical chunk (the swizzle spreads the rows over the banks); a K phase has
   up to 112 rows, a Q phase 64 (half the block idles there). What the pass reads besides the
   ring is in shared memory (1.2 KB), so that none of it is held in registers through the phase
   loop. f32 phases are half rows: RoPE happens in half 0 only (dswa_samel_band_rot_ok). */
struct __align__(16) samel_smem {
    float gamma[2][DSWA_HEAD_DIM], beta[2][DSWA_HEAD_DIM]; /* [0] q_norm, [1] k_norm */
    float inv_freq[DSWA_HEAD_DIM / 2];
    float alpha[2];
    long long pos0; /* the position of a K phase's row 0: pos_offset + kstart */
    int rot_pairs;  /* rotated chunk pairs of a row (of half 0) */
};

/* A 16-byte chunk as CW = 16 / sizeof(T) floats and back. 16-bit values convert in pairs (one
   packed conversion for two: conversions run at a quarter of the FMA rate, and a 16-bit element
   takes up to three). */
template <typename T> __device__ __forceinline__ void samel_unpack(const uint4 &u, float *x) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (sizeof(T) == 4) x[i] = __uint_as_float(w[i]);
        else {
            const float2 f = unpack2<T>(w[i]);
            x[2 * i] = f.x;
            x[2 * i + 1] = f.y;
        }
    }
}
template <typename T> __device__ __forceinline__ uint4 samel_pack(const float *x) {
    if constexpr (sizeof(T) == 4)
        return make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
    else
        return make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]), pack2<T>(x[4], x[5]), pack2<T>(x[6], x[7]));
}
/* x rounded to T in place (the reference's rounding of DyT's result before RoPE). */
template <typename T> __device__ __forceinline__ void samel_round_chunk(float *x) {
    if constexpr (sizeof(T) == 2) samel_unpack<T>(samel_pack<T>(x), x);
}
/* DyT of a chunk whose first dim is d: the weights as 16-byte loads. */
template <typename T, int FP32>
__device__ __forceinline__ void samel_dyt_chunk(float *x, const samel_smem &sm, int norm, int d) {
    constexpr int CW = 16 / sizeof(T);
    const float alpha = sm.alpha[norm];
#pragma unroll
    for (int i = 0; i < CW; i += 4) {
        const float4 g = *(const float4 *)&sm.gamma[norm][d + i], b = *(const float4 *)&sm.beta[norm][d + i];
        x[i + 0] = samel_dyt<FP32>(x[i + 0], alpha, g.x, b.x);
        x[i + 1] = samel_dyt<FP32>(x[i + 1], alpha, g.y, b.y);
        x[i + 2] = samel_dyt<FP32>(x[i + 2], alpha, g.z, b.z);
        x[i + 3] = samel_dyt<FP32>(x[i + 3], alpha, g.w, b.w);
    }
}

/* rows: the phase's rows (64 for Q, nkeys for K); row_pos: the position of row 0 relative to
   sm.pos0 (Q: window_left); norm: 0 q_norm, 1 k_norm; half: the f32 half-row (16-bit: 0).
   A Q phase's 64 rows take two threads each (the rotated pairs, and the other chunks), so the
   whole block works on it. */
template <typename T, int FP32>
__device__ __forceinline__ void samel_pass(band_buf &buf, const samel_smem &sm, int rows, int row_pos,
                                           int norm, int half) {
    constexpr int CW = 16 / sizeof(T); /* elements of a chunk */
    const bool split = rows == DSWA_TILE;
    const int t = threadIdx.x, r = split ? t & (DSWA_TILE - 1) : t;
    if (r >= rows) return;
    const int sw = dswa_swz<T>(r), kp = half ? 0 : sm.rot_pairs, d0 = half * 8 * CW;
    /* this thread's share: rotated pairs [0, pairs), then single chunks [u0, u1) */
    const int second = split && t >= DSWA_TILE;
    const int pairs = second ? 0 : kp;
    const int u0 = !split ? 2 * kp : kp ? (second ? 2 * kp : 8) : (second ? 4 : 0);
    const int u1 = split && !kp && !second ? 4 : 8;
    const float pos = (float)(sm.pos0 + row_pos + r);
    for (int a = 0; a < pairs; a++) {
        float x[CW], y[CW];
        uint4 &ua = buf[r][a ^ sw], &ub = buf[r][(a + kp) ^ sw];
        samel_unpack<T>(ua, x);
        samel_unpack<T>(ub, y);
        samel_dyt_chunk<T, FP32>(x, sm, norm, d0 + a * CW);
        samel_dyt_chunk<T, FP32>(y, sm, norm, d0 + (a + kp) * CW);
        samel_round_chunk<T>(x);
        samel_round_chunk<T>(y);
#pragma unroll
        for (int e = 0; e < CW; e++) {
            float sn, cs;
            samel_sincos(pos * sm.inv_freq[a * CW + e], &sn, &cs);
            samel_rotate(&x[e], &y[e], cs, sn);
        }
        ua = samel_pack<T>(x); /* the pack rounds to T: the reference's second rounding */
        ub = samel_pack<T>(y);
    }
    for (int u = u0; u < u1; u++) {
        float x[CW];
        uint4 &uu = buf[r][u ^ sw];
        samel_unpack<T>(uu, x);
        samel_dyt_chunk<T, FP32>(x, sm, norm, d0 + u * CW);
        uu = samel_pack<T>(x);
    }
}

/* The block's samel_smem (read after band_tile's first barrier). */
template <typename T>
__device__ __forceinline__ void samel_begin(samel_smem &sm, const float *q_gamma, const float *q_beta,
                                            const float *k_gamma, const float *k_beta, int rot_dims,
                                            float lane_freq, int pos_offset, float q_alpha, float k_alpha,
                                            int kstart) {
    const int t = threadIdx.x;
    if (t < DSWA_HEAD_DIM) {
        sm.gamma[0][t] = __ldg(q_gamma + t);
        sm.beta[0][t] = __ldg(q_beta + t);
        sm.gamma[1][t] = __ldg(k_gamma + t);
        sm.beta[1][t] = __ldg(k_beta + t);
    } else if (t - DSWA_HEAD_DIM < rot_dims / 2) { /* warp 2: lane t - 64 holds frequency t - 64 */
        sm.inv_freq[t - DSWA_HEAD_DIM] = lane_freq;
    } else if (t == DSWA_THREADS - 1) {
        sm.alpha[0] = q_alpha;
        sm.alpha[1] = k_alpha;
        sm.pos0 = (long long)pos_offset + kstart;
        sm.rot_pairs = rot_dims / (2 * (16 / (int)sizeof(T)));
    }
}

/* The phase loop of one 64-query tile: K/V phases through the ring, scores, softmax, P.V into
   acc (a_0 - lambda a_1 when it returns). iq: this thread's rows iq and iq + 8. SAMEL: the fused
   block's schedule, each Q and K phase transformed in place first (sm: its weights). */
template <typename T, int FP32, int SHARED, int SAMEL>
__device__ __forceinline__ void band_tile(band_buf (&ring)[BAND_BUFS], const band_ctx<T> &c,
                                          float acc[8][4], int iq, uint32_t mask, float qscale,
                                          float lambda, const samel_smem *sm) {
    typedef band_phases<T, SHARED, SAMEL> P;
    const int warp = threadIdx.x >> 5;
    band_load<T, SHARED, SAMEL>(ring[0], c, 0);
    dswa_cp_async_commit();
    band_load<T, SHARED, SAMEL>(ring[1], c, 1);
    dswa_cp_async_commit();

    uint32_t q_frag[4][4], q_low[4][4]; /* q_low, p_low: the low parts of DSWA_MATH_FP32 only */
    float s[BAND_KEY_TILES][4], p_low[BAND_KEY_TILES][4], p0[BAND_KEY_TILES][4] /* shared V: pair 0's P */;
    if (!SAMEL) band_load_q<T, FP32>(q_frag, q_low, c, 0, 0, iq);
#pragma unroll
    for (int ph = 0; ph < P::N; ph++) {
        dswa_cp_async_wait<1>();
        __syncthreads(); /* phase ph visible to all; everyone is done with phase ph - 1 */
        if (ph + 2 < P::N) band_load<T, SHARED, SAMEL>(ring[(ph + 2) % BAND_BUFS], c, ph + 2);
        dswa_cp_async_commit();
        if (SAMEL && !P::is_v(ph)) {
            samel_pass<T, FP32>(ring[ph % BAND_BUFS], *sm, P::is_q(ph) ? DSWA_TILE : c.nkeys,
                                P::is_q(ph) ? c.wl : 0, P::is_q(ph) ? 0 : 1, P::half(ph));
            __syncthreads();
        }
        const band_buf &buf = ring[ph % BAND_BUFS];
        if (P::is_q(ph)) {
            band_smem_q<T, FP32>(q_frag, q_low, buf, c, warp);
        } else if (!P::is_v(ph)) {
            if (P::half(ph) == 0)
#pragma unroll
                for (int kt = 0; kt < BAND_KEY_TILES; kt++) s[kt][0] = s[kt][1] = s[kt][2] = s[kt][3] = 0.f;
            band_scores<T, FP32>(s, buf, q_frag, q_low, warp, c.tile8);
            if (P::half(ph) == P::HALVES - 1) {
                if (SHARED && P::pair(ph) == 0) {
                    band_softmax<BAND_FFMA(T), 0>(s, s, mask, c.tile8, qscale, 1.f);
#pragma unroll
                    for (int kt = 0; kt < BAND_KEY_TILES; kt++)
#pragma unroll
                        for (int e = 0; e < 4; e++) p0[kt][e] = s[kt][e];
                } else {
                    if (SHARED) band_softmax<BAND_FFMA(T), 1>(s, p0, mask, c.tile8, qscale, -lambda);
                    else band_softmax<BAND_FFMA(T), 0>(s, s, mask, c.tile8, qscale, P::pair(ph) ? -lambda : 1.f);
                    band_p_to_a<T, FP32>(s, p_low);
                }
            }
        } else {
            if (ph == P::first_v()) /* the first V phase */
#pragma unroll
                for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
            band_pv<T, FP32>(acc, buf, s, p_low, warp, c.tile8, P::half(ph));
        }
    }
}

/* What both entries' blocks share: the window fields of c, the mask and the softmax's scale. */
template <typename T>
__device__ __forceinline__ void band_begin(band_ctx<T> &c, uint32_t *mask, float *qscale, int n, int wl,
                                           int wr, float scale, int i0, int warp) {
    const int span = wl + wr;
    c.n = n;
    c.nkeys = DSWA_TILE + span;
    c.kstart = i0 - wl;
    c.wl = wl;
    c.interior = c.kstart >= 0 && c.kstart <= n - BAND_ROWS;
    c.tile8 = span > 8 * (BAND_KEY_TILES - 1) - 16;
    /* exp(x) = exp2(x log2 e); FFMA: |scale| (Q carries the sign, or is zeroed) */
    *qscale = (BAND_FFMA(T) ? (scale == 0.f ? 1.f : fabsf(scale)) : scale) * 1.4426950408889634f;
    c.scale = scale;
    const int warp_key0 = c.kstart + 16 * warp;
    *mask = band_mask(span, warp_key0, n, warp_key0 < 0 || warp_key0 + 16 + span >= n);
}

template <typename T, int FP32>
__device__ __forceinline__ void dswa_fwd_band_impl(DSWA_KERNEL_PARAMS(T)) {
    __shared__ __align__(128) band_buf ring[BAND_BUFS];
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
    int tile, h;
    dswa_block_tile_head(&tile, &h);
    const int b = blockIdx.z;
    const int i0 = tile * DSWA_TILE, iq = i0 + 16 * warp + g; /* rows iq and iq + 8 */
    band_ctx<T> c;
    c.q = dswa_at_head(q, b, q_sb, h, q_sh);
    c.k = dswa_at_head(k, b, k_sb, h, k_sh);
    c.v = dswa_at_head(v, b, v_sb, h, v_sh);
    c.q_sn = q_sn; c.q_sp = q_sp; c.k_sn = k_sn; c.k_sp = k_sp; c.v_sn = v_sn; c.v_sp = v_sp;
    const float scale = __int_as_float(scale_bits), lambda = __int_as_float(lambda_bits);
    float qscale;
    uint32_t mask;
    band_begin(c, &mask, &qscale, n, wl, wr, scale, i0, warp);

    float acc[8][4];
    if (v_sp == 0) band_tile<T, FP32, 1, 0>(ring, c, acc, iq, mask, qscale, lambda, NULL);
    else band_tile<T, FP32, 0, 0>(ring, c, acc, iq, mask, qscale, lambda, NULL);

    dswa_block_tile_head(&tile, &h); /* again: not held through the phases */
    const int r0 = tile * DSWA_TILE + 16 * warp; /* the warp's first row */
    T *orow0 = dswa_at_head(out, b, o_sb, h, o_sh);
    const bool finite = dswa_store_rows<T>(orow0, o_sn, r0 + g, n, acc);
    if (__any_sync(0xffffffffu, !finite))
        dswa_exact_rows<T>(q, k, v, out, n, wl, wr, scale, lambda, b, h, r0, q_sb,
                           q_sn, q_sp, q_sh, k_sb, k_sn, k_sp, k_sh, v_sb, v_sn, v_sp, v_sh,
                           o_sb, o_sn, o_sh);
}

/* The fused block: the packed input read as Q (chunks 0 and 3: pair stride 3 chunks), K (1, 4)
   and V (2, shared by both pairs), the shared-V schedule with every Q and K phase transformed. */
template <typename T, int FP32>
__device__ __forceinline__ void dswa_samel_band_impl(DSWA_SAMEL_KERNEL_PARAMS(T), DSWA_SAMEL_ALPHA_AT_PARAMS) {
    __shared__ __align__(128) band_buf ring[BAND_BUFS];
    __shared__ samel_smem sm;
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
    int tile, h;
    dswa_block_tile_head(&tile, &h);
    const int b = blockIdx.z;
    const int i0 = tile * DSWA_TILE, iq = i0 + 16 * warp + g;
    band_ctx<T> c;
    c.q = dswa_at_head(x, b, x_sb, h, x_sh);
    c.k = c.q + x_sc;
    c.v = c.q + 2 * (int64_t)x_sc;
    c.q_sn = c.k_sn = c.v_sn = x_sn;
    c.q_sp = c.k_sp = 3 * x_sc; /* the launcher checks it fits */
    c.v_sp = 0;
    const float lambda = __int_as_float(lambda_bits);
    float qscale;
    uint32_t mask;
    band_begin(c, &mask, &qscale, n, wl, wr, __int_as_float(scale_bits), i0, warp);
    const float q_alpha = samel_alpha(q_alpha_at, q_alpha_bits), k_alpha = samel_alpha(k_alpha_at, k_alpha_bits);
    float lane_freq;
    SAMEL_LANE_FREQ(lane_freq);
    samel_begin<T>(sm, q_gamma, q_beta, k_gamma, k_beta, rot_dims, lane_freq, pos_offset, q_alpha, k_alpha,
                   c.kstart);

    float acc[8][4];
    band_tile<T, FP32, 1, 1>(ring, c, acc, iq, mask, qscale, lambda, &sm);

    dswa_block_tile_head(&tile, &h);
    const int r0 = tile * DSWA_TILE + 16 * warp;
    T *orow0 = dswa_at_head(out, b, o_sb, h, o_sh);
    const bool finite = dswa_store_rows<T>(orow0, o_sn, r0 + g, n, acc);
    if (__any_sync(0xffffffffu, !finite)) {
        SAMEL_LANE_FREQ(lane_freq);
        samel_exact_rows<T, FP32>(x, q_gamma, q_beta, k_gamma, k_beta, out, n, wl, wr, __int_as_float(scale_bits),
                                  lambda, x_sb, x_sn, x_sc, x_sh, o_sb, o_sn, o_sh, rot_dims, lane_freq,
                                  pos_offset, samel_alpha(q_alpha_at, q_alpha_bits),
                                  samel_alpha(k_alpha_at, k_alpha_bits), b, h, r0);
    }
}

/* The entries (kernels.h's DSWA_BAND_KERNELS): plain C names, so that the PTX entry is what
   TensorRT's loader is told, and TensorRT's argument order. */
#define BAND_ENTRY(entry, dtype, math, T, blocks_per_sm)                                      \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                \
        entry(DSWA_KERNEL_PARAMS(T)) {                                                       \
        dswa_fwd_band_impl<T, (math) == DSWA_MATH_FP32>(DSWA_KERNEL_ARG_NAMES);              \
    }
DSWA_BAND_KERNELS(BAND_ENTRY)

#define SAMEL_ENTRY(entry, dtype, math, T, blocks_per_sm)                                          \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                     \
        entry(DSWA_SAMEL_KERNEL_PARAMS(T)) {                                                      \
        dswa_samel_band_impl<T, (math) == DSWA_MATH_FP32>(DSWA_SAMEL_KERNEL_ARG_NAMES, NULL, NULL); \
    }
DSWA_SAMEL_BAND_KERNELS(SAMEL_ENTRY)
#ifndef DSWA_AOT_PTX /* the library's entries with the alphas in device memory (kernel_args.h) */
#define SAMEL_ALPHA_AT_ENTRY(entry, dtype, math, T, blocks_per_sm)                                \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                     \
        entry##_alpha_at(DSWA_SAMEL_KERNEL_PARAMS(T), DSWA_SAMEL_ALPHA_AT_PARAMS) {               \
        dswa_samel_band_impl<T, (math) == DSWA_MATH_FP32>(DSWA_SAMEL_KERNEL_ARG_NAMES, q_alpha_at, \
                                                          k_alpha_at);                            \
    }
DSWA_SAMEL_BAND_KERNELS(SAMEL_ALPHA_AT_ENTRY)
#endif

/* The entry functions in registry order, for the launcher (launch.h). */
#define BAND_FUNCTION(entry, dtype, math, T, blocks_per_sm) (const void *)entry,
extern "C" const void *dswa_band_entry_function(int index) {
    static const void *const functions[] = {DSWA_BAND_KERNELS(BAND_FUNCTION)};
    return functions[index];
}
extern "C" const void *dswa_samel_band_entry_function(int index) {
    static const void *const functions[] = {DSWA_SAMEL_BAND_KERNELS(BAND_FUNCTION)};
    return functions[index];
}
#ifndef DSWA_AOT_PTX
#define ALPHA_AT_FUNCTION(entry, dtype, math, T, blocks_per_sm) (const void *)entry##_alpha_at,
extern "C" const void *dswa_samel_band_alpha_at_function(int index) {
    static const void *const functions[] = {DSWA_SAMEL_BAND_KERNELS(ALPHA_AT_FUNCTION)};
    return functions[index];
}
#endif
