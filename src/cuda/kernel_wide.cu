/* The wide kernel: differential sliding-window attention for any window (the general path), on
 * tensor cores (sm_80+), fp32 accumulation. The band kernel (kernel_band.cu) is faster and takes
 * WL + WR <= 48; this one takes the rest (the pick is in kernels.c).
 *
 * Entries (kernels.h, DSWA_WIDE_KERNELS), each dswa_fwd_wide<T>:
 *   dswa_fwd_wide_f32_tf32   f32, TF32 mma m16n8k8
 *   dswa_fwd_wide_f16        f16, mma m16n8k16
 *   dswa_fwd_wide_bf16       bf16, mma m16n8k16
 * (no fp32-accurate variant: DSWA_MATH_FP32 is band-only). In this file: the step geometry, the
 * K/V loads, Q, scores, P.V, one pipeline step with the online softmax, the kernel, its entries
 * and the table the launcher reads.
 *
 * What it computes: for one batch b, one output head h and a tile of 64 queries, both heads of
 * the pair over each query's window, out = softmax(s_0) V_0 - lambda softmax(s_1) V_1,
 * accumulated and subtracted in fp32 registers and rounded once at the store.
 *
 * Why it is shaped so: a window of any size does not fit shared memory, so the block's keys
 * [i0 - WL, i0 + 63 + WR] stream through a ring of 16 KB chunks (K and V of one pair: 32 rows in
 * f32, 64 in 16-bit) with an online softmax over chunks; each K/V row the block needs is read
 * once and used by its 4 warps, and a warp skips the 8-key tiles outside its band. Fragment
 * layouts, the head-dimension permutation and the swizzles are those of mma.cuh.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/launch.h"
#include "cuda/mma.cuh"

#define WIDE_CHUNK_BYTES 8192 /* of K (and again of V) per pipeline step */
#define WIDE_STAGES 3          /* pipeline steps in the ring: two in flight while one is computed */

template <typename T> struct wide_geom {
    enum {
        ELEMS_PER_CHUNK = 16 / sizeof(T),              /* elements per 16-byte chunk */
        ROW_CHUNKS = DSWA_HEAD_DIM / ELEMS_PER_CHUNK,  /* 16 (f32) or 8 (16-bit) */
        KEYS_PER_STEP = WIDE_CHUNK_BYTES / (DSWA_HEAD_DIM * sizeof(T)), /* key rows per step: 32 or 64 */
        TILES_PER_STEP = KEYS_PER_STEP / 8,                       /* 8-key tiles per step */
        LOADS = 2 * KEYS_PER_STEP * ROW_CHUNKS / DSWA_THREADS /* cp.async per thread per step */
    };
};

/* Everything a block needs about its (b, h) problem slice. */
template <typename T> struct wide_slice {
    const T *q, *k, *v;
    int n, kstart, nkeys, nchunks;
    int q_sn, q_sp, k_sn, k_sp, v_sn, v_sp;
};

/* Issue the cp.async copies of pipeline step s (pair s / nchunks, key chunk s % nchunks). Rows
   outside the block's range or the sequence are zero-filled, so stale data (possibly NaN)
   never meets a zero probability. */
template <typename T>
__device__ __forceinline__ void load_step(T (*st)[wide_geom<T>::KEYS_PER_STEP][DSWA_HEAD_DIM],
                                          const wide_slice<T> &slice, int s) {
    typedef wide_geom<T> G;
    const int p = s >= slice.nchunks, key_chunk = s - p * slice.nchunks;
    const int tid = threadIdx.x, u = tid % G::ROW_CHUNKS;
#pragma unroll
    for (int it = 0; it < G::LOADS; it++) {
        const int which = it / (G::LOADS / 2); /* 0: K, 1: V */
        const int r = tid / G::ROW_CHUNKS + (DSWA_THREADS / G::ROW_CHUNKS) * (it % (G::LOADS / 2));
        const int t = key_chunk * G::KEYS_PER_STEP + r, j = slice.kstart + t;
        const bool ok = t < slice.nkeys && j >= 0 && j < slice.n;
        const T *src = which ? slice.v + (int64_t)p * slice.v_sp : slice.k + (int64_t)p * slice.k_sp;
        src += ok ? (int64_t)j * (which ? slice.v_sn : slice.k_sn) + G::ELEMS_PER_CHUNK * u : 0;
        dswa_cp_async16(&st[which][r][(u ^ dswa_swz<T>(r)) * G::ELEMS_PER_CHUNK], src, ok);
    }
}

/* Q fragments of this thread's rows i and i+8 for pair p, as raw 16-byte chunks: f32 holds
   chunks 4k + c (k = 0..3), rounded to TF32; 16-bit holds chunks c and 4 + c. The scale is
   applied to the fp32 scores (score_tile): folding it into Q would round Q a second time. */
template <typename T>
__device__ __forceinline__ void load_q(uint32_t q_frag[2][16], const wide_slice<T> &slice, int p,
                                       int i, float qscale) {
    /* 4 chunks (f32, rounded to TF32) or 2 (16-bit) */
    dswa_load_q_rows<16 / wide_geom<T>::ELEMS_PER_CHUNK, sizeof(T) == 4>(q_frag, slice.q + (int64_t)p * slice.q_sp,
                                                                        slice.q_sn, slice.n, i, 0);
}

/* S for one 8-key tile (rows kt*8 .. +7 of the step's K): s[0..3] in mma C layout. */
template <typename T>
__device__ __forceinline__ void score_tile(float s[4], const T (*kst)[DSWA_HEAD_DIM],
                                           const uint32_t q_frag[2][16], int kt, float qscale) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const T *krow = kst[kt * 8 + g];
    const int sw = dswa_swz<T>(g);
    if constexpr (sizeof(T) == 4) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float4 kv = *(const float4 *)((const float *)krow + (((4 * k + c) ^ sw) * 4));
            mma_tf32(s, q_frag[0][4 * k], q_frag[1][4 * k], q_frag[0][4 * k + 1], q_frag[1][4 * k + 1], __float_as_uint(kv.x), __float_as_uint(kv.y));
            mma_tf32(s, q_frag[0][4 * k + 2], q_frag[1][4 * k + 2], q_frag[0][4 * k + 3], q_frag[1][4 * k + 3], __float_as_uint(kv.z), __float_as_uint(kv.w));
        }
    } else {
        const uint4 k0 = *(const uint4 *)(krow + ((c ^ sw) * 8));
        const uint4 k1 = *(const uint4 *)(krow + (((4 + c) ^ sw) * 8));
        const uint32_t kr[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
        for (int st = 0; st < 4; st++) {
            const uint32_t a[4] = {q_frag[0][2 * st], q_frag[1][2 * st], q_frag[0][2 * st + 1], q_frag[1][2 * st + 1]};
            mma16<T>(s, a, kr[2 * st], kr[2 * st + 1]);
        }
    }
#pragma unroll
    for (int e = 0; e < 4; e++) s[e] *= qscale; /* scaled after the product: no second rounding of Q */
}

/* acc += P V for the keys of tiles kt (f32: one 8-key k-step) or kt, kt+1 (16-bit: one
   16-key k-step). P arrives in the S accumulator layout. */
template <typename T>
__device__ __forceinline__ void pv_step(float acc[8][4], const T (*vst)[DSWA_HEAD_DIM],
                                        const float (*pm)[4], int kt) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    if constexpr (sizeof(T) == 4) {
        /* column c <-> key 2c, column c+4 <-> key 2c+1 of the tile */
        const uint32_t a0 = tf32(pm[0][0]), a1 = tf32(pm[0][2]), a2 = tf32(pm[0][1]), a3 = tf32(pm[0][3]);
        const float *v0 = (const float *)vst[kt * 8 + 2 * c], *v1 = (const float *)vst[kt * 8 + 2 * c + 1];
        const int s0 = dswa_swz<float>(2 * c), s1 = dswa_swz<float>(2 * c + 1);
        const float4 x00 = *(const float4 *)(v0 + ((g ^ s0) * 4));
        const float4 x01 = *(const float4 *)(v0 + (((8 + g) ^ s0) * 4));
        const float4 x10 = *(const float4 *)(v1 + ((g ^ s1) * 4));
        const float4 x11 = *(const float4 *)(v1 + (((8 + g) ^ s1) * 4));
        mma_tf32(acc[0], a0, a1, a2, a3, __float_as_uint(x00.x), __float_as_uint(x10.x));
        mma_tf32(acc[1], a0, a1, a2, a3, __float_as_uint(x00.y), __float_as_uint(x10.y));
        mma_tf32(acc[2], a0, a1, a2, a3, __float_as_uint(x00.z), __float_as_uint(x10.z));
        mma_tf32(acc[3], a0, a1, a2, a3, __float_as_uint(x00.w), __float_as_uint(x10.w));
        mma_tf32(acc[4], a0, a1, a2, a3, __float_as_uint(x01.x), __float_as_uint(x11.x));
        mma_tf32(acc[5], a0, a1, a2, a3, __float_as_uint(x01.y), __float_as_uint(x11.y));
        mma_tf32(acc[6], a0, a1, a2, a3, __float_as_uint(x01.z), __float_as_uint(x11.z));
        mma_tf32(acc[7], a0, a1, a2, a3, __float_as_uint(x01.w), __float_as_uint(x11.w));
    } else {
        const uint32_t a[4] = {pack2<T>(pm[0][0], pm[0][1]), pack2<T>(pm[0][2], pm[0][3]),
                               pack2<T>(pm[1][0], pm[1][1]), pack2<T>(pm[1][2], pm[1][3])};
        const int mtx = lane >> 3, r = kt * 8 + (lane & 7) + 8 * (mtx & 1);
        dswa_pv16_kstep<T>(acc, a, vst[r], r);
    }
}

/* One pipeline step for one warp: scores for the step's 8-key tiles inside the warp's band,
   online softmax update of (m, l, acc), and acc += P V. */
template <typename T>
__device__ __forceinline__ void step_compute(T (*st)[wide_geom<T>::KEYS_PER_STEP][DSWA_HEAD_DIM],
                                             const uint32_t q_frag[2][16], float acc[8][4],
                                             float m[2], float l[2], int key_chunk, int qrow0, int span,
                                             const wide_slice<T> &slice, float qscale) {
    typedef wide_geom<T> G;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int band_lo = qrow0, band_hi = qrow0 + 15 + span;
    float s[G::TILES_PER_STEP][4];
    bool act[G::TILES_PER_STEP];
    bool any = false;
#pragma unroll
    for (int kt = 0; kt < G::TILES_PER_STEP; kt++) {
        const int t0 = key_chunk * G::KEYS_PER_STEP + kt * 8, j0 = slice.kstart + t0;
        act[kt] = t0 <= band_hi && t0 + 7 >= band_lo && j0 + 7 >= 0 && j0 < slice.n;
        any |= act[kt];
        s[kt][0] = s[kt][1] = s[kt][2] = s[kt][3] = 0.f;
        if (act[kt]) score_tile<T>(s[kt], st[0], q_frag, kt, qscale);
    }
    if (!any) return; /* warp-uniform */
    /* Mask by replacement (never by addition): out-of-window or out-of-sequence -> -inf. */
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int kt = 0; kt < G::TILES_PER_STEP; kt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int t = key_chunk * G::KEYS_PER_STEP + kt * 8 + 2 * c + (e & 1), j = slice.kstart + t;
            const int qi = qrow0 + g + 8 * (e >> 1);
            const bool ok = act[kt] && t >= qi && t <= qi + span && j >= 0 && j < slice.n;
            s[kt][e] = ok ? s[kt][e] : -INFINITY;
            mx[e >> 1] = fmaxf(mx[e >> 1], s[kt][e]);
        }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = dswa_quad_max(mx[r]);
        const float mnew = fmaxf(m[r], mx[r]);
        const float muse = mnew == -INFINITY ? 0.f : mnew; /* all masked so far */
        const float corr = exp2f(m[r] - muse);
        m[r] = mnew;
        l[r] *= corr;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            acc[j][2 * r] *= corr;
            acc[j][2 * r + 1] *= corr;
        }
        mx[r] = muse;
    }
#pragma unroll
    for (int kt = 0; kt < G::TILES_PER_STEP; kt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[kt][e] = exp2f(s[kt][e] - mx[e >> 1]);
            l[e >> 1] += s[kt][e];
        }
    const int kstep = sizeof(T) == 4 ? 1 : 2; /* tiles per mma k-step */
#pragma unroll
    for (int kt = 0; kt < G::TILES_PER_STEP; kt += kstep) {
        const bool a = sizeof(T) == 4 ? act[kt] : (act[kt] || act[kt + kstep - 1]);
        if (a) pv_step<T>(acc, st[1], &s[kt], kt);
    }
}

template <typename T>
__device__ __forceinline__ void dswa_fwd_wide(const T *__restrict__ q, const T *__restrict__ k,
                                         const T *__restrict__ v, int n, int wl, int wr,
                                         int scale_bits, int lambda_bits, int q_sb, int q_sn,
                                         int q_sp, int q_sh, int k_sb, int k_sn, int k_sp,
                                         int k_sh, int v_sb, int v_sn, int v_sp, int v_sh,
                                         int o_sb, int o_sn, int o_sh, T *__restrict__ out) {
    typedef wide_geom<T> G;
    __shared__ __align__(128) T ring[WIDE_STAGES][2][G::KEYS_PER_STEP][DSWA_HEAD_DIM];
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
    int tile, h;
    dswa_block_tile_head(&tile, &h);
    const int b = blockIdx.z, i0 = tile * DSWA_TILE, span = wl + wr;
    wide_slice<T> slice;
    slice.q = dswa_at_head(q, b, q_sb, h, q_sh);
    slice.k = dswa_at_head(k, b, k_sb, h, k_sh);
    slice.v = dswa_at_head(v, b, v_sb, h, v_sh);
    slice.n = n;
    slice.kstart = i0 - wl;
    slice.nkeys = DSWA_TILE + span;
    slice.nchunks = (slice.nkeys + G::KEYS_PER_STEP - 1) / G::KEYS_PER_STEP;
    slice.q_sn = q_sn; slice.q_sp = q_sp; slice.k_sn = k_sn; slice.k_sp = k_sp; slice.v_sn = v_sn; slice.v_sp = v_sp;
    const int steps = 2 * slice.nchunks, qrow0 = 16 * warp, iq = i0 + qrow0 + g;
    const float scale = __int_as_float(scale_bits), lambda = __int_as_float(lambda_bits);
    const float qscale = scale * 1.4426950408889634f; /* exp(x) = exp2(x log2 e) */

#pragma unroll
    for (int s = 0; s < WIDE_STAGES - 1; s++) {
        if (s < steps) load_step<T>(ring[s], slice, s);
        dswa_cp_async_commit();
    }

    uint32_t q_frag[2][16];
    float o0[8][4], o1[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) o0[j][e] = o1[j][e] = 0.f;

#pragma unroll
    for (int p = 0; p < 2; p++) {
        load_q<T>(q_frag, slice, p, iq, qscale);
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        for (int key_chunk = 0; key_chunk < slice.nchunks; key_chunk++) {
            const int s = p * slice.nchunks + key_chunk, sn = s + WIDE_STAGES - 1;
            dswa_cp_async_wait<WIDE_STAGES - 2>();
            __syncthreads(); /* step s visible to all; everyone is done with step s - 1 */
            if (sn < steps) load_step<T>(ring[sn % WIDE_STAGES], slice, sn);
            dswa_cp_async_commit();
            step_compute<T>(ring[s % WIDE_STAGES], q_frag, p ? o1 : o0, m, l, key_chunk, qrow0, span, slice, qscale);
        }
        dswa_row_inverse(l);
        /* pair 0: o0 = a_0; pair 1: o0 = a_0 - lambda a_1, all in fp32 */
        const float f0 = p ? -lambda * l[0] : l[0], f1 = p ? -lambda * l[1] : l[1];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (p == 0) {
                o0[j][0] *= f0; o0[j][1] *= f0; o0[j][2] *= f1; o0[j][3] *= f1;
            } else {
                o0[j][0] += f0 * o1[j][0]; o0[j][1] += f0 * o1[j][1];
                o0[j][2] += f1 * o1[j][2]; o0[j][3] += f1 * o1[j][3];
            }
        }
    }

    T *orow0 = dswa_at_head(out, b, o_sb, h, o_sh);
    const bool finite = dswa_store_rows<T>(orow0, o_sn, iq, n, o0);
    if (__any_sync(0xffffffffu, !finite))
        dswa_exact_rows<T>(q, k, v, out, n, wl, wr, scale, lambda, b, h, i0 + qrow0, q_sb, q_sn,
                           q_sp, q_sh, k_sb, k_sn, k_sp, k_sh, v_sb, v_sn, v_sp, v_sh, o_sb, o_sn,
                           o_sh);
}

/* The entries (kernels.h's DSWA_WIDE_KERNELS): plain C names and TensorRT's argument order. */
#define WIDE_ENTRY(entry, dtype, math, T, blocks_per_sm)                                      \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                \
        entry(DSWA_KERNEL_PARAMS(T)) {                                                       \
        dswa_fwd_wide<T>(DSWA_KERNEL_ARG_NAMES);                                             \
    }
DSWA_WIDE_KERNELS(WIDE_ENTRY)

/* The entry functions in registry order, for the launcher (launch.h). */
#define WIDE_FUNCTION(entry, dtype, math, T, blocks_per_sm) (const void *)entry,
extern "C" const void *dswa_wide_entry_function(int index) {
    static const void *const functions[] = {DSWA_WIDE_KERNELS(WIDE_FUNCTION)};
    return functions[index];
}
