/* The op's backward on tensor cores, for the problems the forward's band kernel takes (SAME-L's
 * among them): head_dim 64, window_left + window_right <= 48, rows 16-byte aligned with unit
 * dim stride, any dtype (dswa_bwd_band_ok). The math is in include/dswa.h, the plan and the
 * determinism rule in docs/BACKWARD.md; everything else goes to kernel_backward.cu's general
 * kernels, which the launcher there picks between.
 *
 * Entries, each a template over the input type T (__half, __nv_bfloat16; float on TF32) and
 * the type G of dq and dk (T; or float for the fused block's 16-bit backward, whose epilogue
 * transforms them and rounds once; dv is always T: the block's gradient of V as it is):
 *   dswa_bwd_band_queries  per 64 query rows (32 for f32) of one (batch, head): for each
 *                          pair, the scores S against the rows' key band, the exact softmax P
 *                          (max and sum over the whole band, which is in registers), dP =
 *                          dA V^T, delta = sum P dP, dS = P (dP - delta) and dq = scale dS K.
 *                          Writes each row's (max, 1/sum, delta) per pair to the workspace's
 *                          table and, with dlambda, each 16 rows' share of -sum dout . A_1 (as
 *                          sum P_1 (dout . V_1)).
 *   dswa_bwd_band_keys     per 64 key rows (32 for f32): the transposed products against
 *                          the rows' query band, P recomputed from the table, dv = sum P dA
 *                          (pair 0's terms, then pair 1's, in one accumulator when dv is
 *                          summed) and dk = scale dS^T Q.
 * The dlambda kernel of kernel_backward.cu then sums the shares in a fixed order.
 *
 * Why it is shaped so:
 *  - The forward's band geometry: a warp owns 16 rows, and every key its rows see lies in 64
 *    consecutive band rows (16 + 48), so one warp's scores are a 16 x 64 mma product held in
 *    registers and its softmax is exact; the block's band (112 rows) fits shared memory with
 *    the tile's own rows, 44 KB static, and the key kernel is the query kernel with the roles
 *    of Q and K (and of dout and V) exchanged, so both are made of the same two products:
 *    bb_dots (a 16 x 64 block of row . band-row dot products) and bb_mix (16 rows of
 *    sum over the band of weight x band row).
 *  - Gathering instead of scattering: every gradient row is written once by the warp that
 *    owns it, after sums in a fixed order (mma over the band, then the pairs in order); no
 *    atomics, so results are bitwise the same on every run.
 *  - 16-bit: the weights P and dS enter the tensor core as two 16-bit terms (hi + lo, the low
 *    part the rounding error of the high one), so they carry about 16 significant bits instead
 *    of 8 or 11: the gradients' error stays that of the fp32 arithmetic and the one rounding at
 *    the store, as for the general kernel (tests/lib/backward_cases.h's tolerances).
 *    The mma accumulates in fp32.
 *  - f32 runs on TF32 (m16n8k8), the forward's default math and error (about 1e-3 relative):
 *    register operands rounded (cvt.rna), shared-memory operands as raw bits, as the forward
 *    does; DSWA_MATH_FP32 splits every product in three TF32 ones (split_hi, split_lo), as the
 *    forward's fp32 math does (the template parameter FP32). A 64-row f32 block would need 56 KB
 *    of bands; 32 rows (two warps) keep both bands in 41 KB, and the block's own rows, read
 *    once per pair, go from global memory straight into mma fragments instead of through
 *    shared memory. Fragments take the 64 dims in an order of the kernel's choosing (a dot
 *    product does not care): lane quad c holds dims 16x + 4c .. 16x + 4c + 3 of a row, one
 *    16-byte load per x, and reads the band rows at the same chunks (swizzled as the forward's
 *    f32 tiles, dswa_swz<float>: no bank conflicts).
 *  - The table holds the max in log2 units (scale log2 e folded in) so that both kernels
 *    compute p = 2^(s scale log2 e - max) with the same expression. The two kernels of this
 *    family write and read it; the general family has its own units.
 *  - Loads are cp.async of 16-byte chunks into rows of 8 chunks (16 for f32) swizzled by row
 *    (16-bit: chunk u ^ (row & 7), so that ldmatrix's 8 rows at one chunk hit 8 different bank
 *    groups).
 *  - Shared V (v.pair == 0) is read once and dA V^T computed once: pair 1's is -lambda times
 *    pair 0's.
 * Rows past N are loaded as zeros and masked; a key outside the sequence or the window weighs
 * 0. Nothing here allocates or synchronizes the host: a call is capturable in a CUDA graph.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/backward.cuh"
#include "cuda/mma.cuh"

/* A block's shape per input type: ROWS query (or key) rows, a warp per 16, and the band of
   ROWS + 48 rows its rows see. MIN_BLOCKS: 16-bit, 3 blocks per SM (168 registers) measured
   2-3 % faster than the compiler's 174 registers and 2 blocks (docs/PERF.md section 7); f32,
   4 leaves the compiler its registers (206-212, no spills). */
template <typename T> struct bb_cfg {
    static constexpr int ROWS = 64, THREADS = 2 * ROWS, MIN_BLOCKS = 3;
    static constexpr bool OWN_IN_SMEM = true;   /* the block's own rows staged in shared memory */
};
template <> struct bb_cfg<float> {
    static constexpr int ROWS = 32, THREADS = 2 * ROWS, MIN_BLOCKS = 4;
    static constexpr bool OWN_IN_SMEM = false;  /* straight into fragments (see the top) */
};
#define BB_BAND(T) (bb_cfg<T>::ROWS + DSWA_BAND_MAX_SPAN) /* band rows of a block: 112, 80 */
#define BB_OWN(T) (bb_cfg<T>::OWN_IN_SMEM ? bb_cfg<T>::ROWS : 1) /* own rows in shared memory */
#define BB_DIM 64                                          /* head_dim */

/* ---- tiles in shared memory ------------------------------------------------------------- */

/* Chunk u (16 bytes) of row r of a tile of 64-element rows, swizzled (see the top). */
template <typename P> __device__ __forceinline__ P *bb_at(P *tile, int r, int u) {
    constexpr int per = 16 / (int)sizeof(P);
    const int swz = sizeof(P) == 4 ? dswa_swz<float>(r) : (r & 7);
    return tile + r * BB_DIM + (u ^ swz) * per;
}

/* A tensor's slice at batch b, head h (int64 strides: dswa_at_head takes int ones). */
template <typename P>
__device__ __forceinline__ P *bb_slice(const void *base, const dswa_layout &l, int b, int h) {
    return (P *)base + (int64_t)b * l.batch + (int64_t)h * l.head;
}

/* Rows row0 .. row0 + rows - 1 of a slice with row stride sn into tile, asynchronously; rows
   outside [0, n) as zeros. A thread keeps one chunk column u and walks rows in sequences whose
   step is the swizzle's period (8 rows) or a multiple of it, so that along a sequence its shared
   and global addresses advance by constants, as the forward's band loads do (recomputing them
   per chunk was a quarter of the kernels' integer work). 16-bit: one sequence of step 16; f32
   (16 chunks a row, 64 threads): two of step 8. */
template <typename T>
__device__ __forceinline__ void bb_load(T *tile, const T *base, int64_t sn, int row0, int rows, int n) {
    constexpr int per = 16 / (int)sizeof(T), chunks = BB_DIM / per, step = bb_cfg<T>::THREADS / chunks;
    constexpr int seqs = step % 8 == 0 ? 1 : 8 / step, stride = step * seqs;
    static_assert(step % 8 == 0 || 8 % step == 0, "a sequence's rows share the swizzle");
    const int u = threadIdx.x % chunks, r0 = threadIdx.x / chunks;
#pragma unroll
    for (int q = 0; q < seqs; q++) {
        const int rs = r0 + q * step;
        T *dst = bb_at(tile, rs, u);
        const T *src = base + (int64_t)(row0 + rs) * sn + u * per;
#pragma unroll
        for (int r = rs; r < rows; r += stride, dst += stride * BB_DIM, src += stride * sn) {
            const bool ok = row0 + r >= 0 && row0 + r < n;
            dswa_cp_async16(dst, ok ? src : base, ok);
        }
    }
}

/* ---- the two products --------------------------------------------------------------------- */

/* The mma A fragments of a warp's 16 rows over the 64 dims. 16-bit: ldmatrix from a tile in
   shared memory (four k-steps of 16). f32: this lane's rows g, g + 8 read from global memory,
   dims 16x + 4c .. + 3 in f[rr][4x ..], rounded to TF32, or raw for FP32 (three TF32 products,
   split at use); rows outside [0, n) as zeros. */
template <typename T> struct bb_afrag { uint32_t f[4][4]; };
template <> struct bb_afrag<float> { uint32_t f[2][16]; };

template <typename T>
__device__ __forceinline__ void bb_frag_smem(bb_afrag<T> &af, const T *a, int ra) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int ks = 0; ks < 4; ks++) ldmatrix_x4(af.f[ks], bb_at(a, ra + (lane & 15), 2 * ks + (lane >> 4)));
}
template <int FP32>
__device__ __forceinline__ void bb_frag_global(bb_afrag<float> &af, const float *base, int64_t sn, int row0, int n) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int i = row0 + (lane >> 2) + 8 * rr;
        const float *row = base + (int64_t)(i >= 0 && i < n ? i : 0) * sn + 4 * (lane & 3);
#pragma unroll
        for (int x = 0; x < 4; x++) {
            float4 u = make_float4(0.f, 0.f, 0.f, 0.f);
            if (i >= 0 && i < n) u = __ldg((const float4 *)(row + 16 * x));
            const float e[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int w = 0; w < 4; w++) af.f[rr][4 * x + w] = FP32 ? __float_as_uint(e[w]) : tf32(e[w]);
        }
    }
}

/* x[t] = the dot products of the warp's 16 rows (fragments af) with band rows rb + 8t .. rb +
   8t + 7 of b, over the 64 dims: mma C fragments (x[t][e] is row g + 8 (e >> 1), band column
   8t + 2c + (e & 1), g = lane / 4, c = lane % 4). */
template <typename T>
__device__ __forceinline__ void bb_dots(float x[8][4], const bb_afrag<T> &af, const T *b, int rb) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int t = 0; t < 8; t++) {
        x[t][0] = x[t][1] = x[t][2] = x[t][3] = 0.f;
#pragma unroll
        for (int hk = 0; hk < 2; hk++) {
            uint32_t bf[4];
            ldmatrix_x4(bf, bb_at(b, rb + 8 * t + (lane & 7), 4 * hk + (lane >> 3)));
            mma16<T>(x[t], af.f[2 * hk], bf[0], bf[1]);
            mma16<T>(x[t], af.f[2 * hk + 1], bf[2], bf[3]);
        }
    }
}
/* One k-step of a TF32 product into d: A (rows g, g + 8) and B words, split in three TF32
   products when FP32 (the small terms first, as the forward does). */
template <int FP32>
__device__ __forceinline__ void bb_mma_f32(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                           uint32_t b0, uint32_t b1) {
    if constexpr (FP32) {
        mma_tf32(d, split_lo(a0), split_lo(a1), split_lo(a2), split_lo(a3), split_hi(b0), split_hi(b1));
        mma_tf32(d, split_hi(a0), split_hi(a1), split_hi(a2), split_hi(a3), split_lo(b0), split_lo(b1));
        mma_tf32(d, split_hi(a0), split_hi(a1), split_hi(a2), split_hi(a3), split_hi(b0), split_hi(b1));
    } else {
        mma_tf32(d, a0, a1, a2, a3, b0, b1);
    }
}

/* bb_dots for f32: k-step 2x + h takes words 2h, 2h + 1 of chunk 4x + c (a row's dims in the
   order above); chunk x's A words split once for the 8 band tiles. */
template <int FP32>
__device__ __forceinline__ void bb_dots_f32(float x[8][4], const bb_afrag<float> &af, const float *b, int rb) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int t = 0; t < 8; t++) x[t][0] = x[t][1] = x[t][2] = x[t][3] = 0.f;
#pragma unroll
    for (int xx = 0; xx < 4; xx++) {
        const uint32_t *a0 = af.f[0] + 4 * xx, *a1 = af.f[1] + 4 * xx;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const float4 bv = *(const float4 *)bb_at(b, rb + 8 * t + (lane >> 2), 4 * xx + (lane & 3));
            bb_mma_f32<FP32>(x[t], a0[0], a1[0], a0[1], a1[1], __float_as_uint(bv.x), __float_as_uint(bv.y));
            bb_mma_f32<FP32>(x[t], a0[2], a1[2], a0[3], a1[3], __float_as_uint(bv.z), __float_as_uint(bv.w));
        }
    }
}

/* bb_dots with the warp's own 16 rows of a slice as its left side: from their tile in shared
   memory (row wrow), or (f32) from global memory, rows row0 + wrow + ... of base with row
   stride sn. */
template <typename T, int FP32>
__device__ __forceinline__ void bb_dots_own(float x[8][4], const T *tile, const T *base, int64_t sn, int row0,
                                            int wrow, int n, const T *b) {
    bb_afrag<T> af;
    if constexpr (bb_cfg<T>::OWN_IN_SMEM) {
        bb_frag_smem(af, tile, wrow);
        bb_dots(x, af, b, wrow);
    } else {
        bb_frag_global<FP32>(af, base, sn, row0 + wrow, n);
        bb_dots_f32<FP32>(x, af, b, wrow);
    }
}

/* hi + lo = (a, b) to about 16 significant bits, as two registers of 16-bit pairs. */
template <typename T> __device__ __forceinline__ void bb_split(float a, float b, uint32_t &hi, uint32_t &lo) {
    hi = pack2<T>(a, b);
    const float2 h = unpack2<T>(hi);
    lo = pack2<T>(a - h.x, b - h.y);
}

/* acc (16 rows x 64 dims, C fragments: acc[j][e] is dim 8j + 2c + (e & 1)) += sum over the 64
   band columns of f w(row, column) * b[rb + column]: w in the layout bb_dots makes, entering
   the tensor core as hi + lo. */
template <typename T>
__device__ __forceinline__ void bb_mix(float acc[8][4], const float w[8][4], float f, const T *b, int rb) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t hi[4], lo[4];
        bb_split<T>(f * w[2 * kk][0], f * w[2 * kk][1], hi[0], lo[0]);
        bb_split<T>(f * w[2 * kk][2], f * w[2 * kk][3], hi[1], lo[1]);
        bb_split<T>(f * w[2 * kk + 1][0], f * w[2 * kk + 1][1], hi[2], lo[2]);
        bb_split<T>(f * w[2 * kk + 1][2], f * w[2 * kk + 1][3], hi[3], lo[3]);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            uint32_t bf[4];
            ldmatrix_x4_trans(bf, bb_at(b, rb + 16 * kk + (lane & 15), j + (lane >> 4)));
            mma16<T>(acc[j], hi, bf[0], bf[1]);
            mma16<T>(acc[j], lo, bf[0], bf[1]);
            mma16<T>(acc[j + 1], hi, bf[2], bf[3]);
            mma16<T>(acc[j + 1], lo, bf[2], bf[3]);
        }
    }
}
/* bb_mix for f32: one TF32 term (three when FP32); band tile t is a k-step whose positions c,
   c + 4 are band columns 2c, 2c + 1 (w's own layout, so no shuffles); b's rows 8t + 2c (+ 1) at
   dims 8j + g. */
template <int FP32>
__device__ __forceinline__ void bb_mix_f32(float acc[8][4], const float w[8][4], float f, const float *b, int rb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int t = 0; t < 8; t++) {
        uint32_t a[4];
        const float x[4] = {f * w[t][0], f * w[t][2], f * w[t][1], f * w[t][3]};
#pragma unroll
        for (int e = 0; e < 4; e++) a[e] = FP32 ? __float_as_uint(x[e]) : tf32(x[e]);
        const int r = rb + 8 * t + 2 * c;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float b0 = bb_at(b, r, 2 * j + (g >> 2))[g & 3];
            const float b1 = bb_at(b, r + 1, 2 * j + (g >> 2))[g & 3];
            bb_mma_f32<FP32>(acc[j], a[0], a[1], a[2], a[3], __float_as_uint(b0), __float_as_uint(b1));
        }
    }
}
/* Either family's weighted sum. */
template <typename T, int FP32>
__device__ __forceinline__ void bb_mix_any(float acc[8][4], const float w[8][4], float f, const T *b, int rb) {
    if constexpr (sizeof(T) == 4) bb_mix_f32<FP32>(acc, w, f, b, rb);
    else bb_mix(acc, w, f, b, rb);
}

/* Whether element e of band tile t is a weight of the window: row r = g + 8 (e >> 1) sees
   band column col = 8t + 2c + (e & 1) iff col - r is in [0, span] (the same shape for queries
   against keys and keys against queries) and the column's row lies in the sequence
   ([clo, chi) in band columns). */
__device__ __forceinline__ bool bb_valid(int t, int e, int span, int clo, int chi) {
    const int lane = threadIdx.x & 31;
    const int col = 8 * t + 2 * (lane & 3) + (e & 1), r = (lane >> 2) + 8 * (e >> 1);
    return (unsigned)(col - r) <= (unsigned)span && col >= clo && col < chi;
}

/* Stores scale * acc into the warp's rows row0 + g, row0 + g + 8 (those < n) of a slice with
   row stride sn, two elements a store; G: the 16-bit type or float. */
template <typename G> __device__ __forceinline__ void bb_store2(G *at, float x, float y) {
    *(uint32_t *)at = pack2<G>(x, y);
}
template <> __device__ __forceinline__ void bb_store2<float>(float *at, float x, float y) {
    *(float2 *)at = make_float2(x, y);
}
template <typename T>
__device__ __forceinline__ void bb_store(T *base, int64_t sn, int row0, int n, const float acc[8][4], float scale) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int i = row0 + (lane >> 2) + 8 * rr;
        if (i >= n) continue;
        T *row = base + (int64_t)i * sn + 2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < 8; j++)
            bb_store2<T>(row + 8 * j, scale * acc[j][2 * rr], scale * acc[j][2 * rr + 1]);
    }
}

#define BB_LOG2E 1.4426950408889634f

/* ---- the query kernel --------------------------------------------------------------------- */

template <typename T, typename G, int FP32>
__global__ void __launch_bounds__(bb_cfg<T>::THREADS, bb_cfg<T>::MIN_BLOCKS) dswa_bwd_band_queries(const bwd_args a) {
    constexpr int ROWS = bb_cfg<T>::ROWS, BAND = BB_BAND(T);
    __shared__ __align__(128) T kb[BAND * BB_DIM], vb[BAND * BB_DIM];
    __shared__ __align__(128) T qt[BB_OWN(T) * BB_DIM], gt[BB_OWN(T) * BB_DIM];
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31, c = lane & 3;
    const int i0 = tile * ROWS, k0 = i0 - a.wl;   /* the tile's first query, first band key */
    const int wrow = 16 * warp;                          /* the warp's rows and band, in the tiles */
    const int clo = -(k0 + wrow), chi = a.n - (k0 + wrow);
    const T *q = bb_slice<const T>(a.q, a.lq, b, h), *k = bb_slice<const T>(a.k, a.lk, b, h);
    const T *v = bb_slice<const T>(a.v, a.lv, b, h), *g = bb_slice<const T>(a.dout, a.ldout, b, h);
    G *dq = bb_slice<G>(a.dq, a.ldq, b, h);
    float *table = a.table + ((int64_t)b * a.heads + h) * a.n * 6;
    const float sl2 = a.scale * BB_LOG2E;
    const int span = a.wl + a.wr;

    if (bb_cfg<T>::OWN_IN_SMEM) bb_load(gt, g, a.ldout.seq, i0, ROWS, a.n);
    float dpu[8][4];            /* dout . V_p over the band: dP_p = c_p dpu */
    float share[2] = {0.f, 0.f}; /* rows g, g + 8: sum P_1 dpu (dlambda) */
#pragma unroll
    for (int p = 0; p < 2; p++) {
        const bool new_v = p == 0 || a.lv.pair != 0;
        if (p) __syncthreads();   /* every warp is done with pair 0's tiles */
        if (bb_cfg<T>::OWN_IN_SMEM) bb_load(qt, q + (int64_t)p * a.lq.pair, a.lq.seq, i0, ROWS, a.n);
        bb_load(kb, k + (int64_t)p * a.lk.pair, a.lk.seq, k0, BAND, a.n);
        if (new_v) bb_load(vb, v + (int64_t)p * a.lv.pair, a.lv.seq, k0, BAND, a.n);
        dswa_cp_async_commit();
        dswa_cp_async_wait<0>();
        __syncthreads();

        float s[8][4];
        bb_dots_own<T, FP32>(s, qt, q + (int64_t)p * a.lq.pair, a.lq.seq, i0, wrow, a.n, kb);
        if (new_v) bb_dots_own<T, FP32>(dpu, gt, g, a.ldout.seq, i0, wrow, a.n, vb);
        /* the exact softmax over the band, in log2 units */
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[t][e] = bb_valid(t, e, span, clo, chi) ? s[t][e] * sl2 : -INFINITY;
                m[e >> 1] = fmaxf(m[e >> 1], s[t][e]);
            }
#pragma unroll
        for (int r = 0; r < 2; r++) m[r] = dswa_quad_max(m[r]);
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[t][e] = s[t][e] == -INFINITY ? 0.f : dswa_exp2(s[t][e] - m[e >> 1]);
                l[e >> 1] += s[t][e];
            }
        dswa_row_inverse(l);   /* rows past N have no valid key: 1/0, never stored */
        const float cp = p ? -a.lambda : 1.f;
        float pd[2] = {0.f, 0.f};
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[t][e] *= l[e >> 1];
                pd[e >> 1] = fmaf(s[t][e], dpu[t][e], pd[e >> 1]);
            }
        float delta[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            pd[r] = dswa_quad_sum(pd[r]);
            delta[r] = cp * pd[r];
            if (p) share[r] = pd[r];
        }
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[t][e] *= fmaf(cp, dpu[t][e], -delta[e >> 1]);

        float acc[8][4] = {};
        bb_mix_any<T, FP32>(acc, s, 1.f, kb, wrow);
        bb_store(dq + (int64_t)p * a.ldq.pair, a.ldq.seq, i0 + wrow, a.n, acc, a.scale);
        if (c == 0)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = i0 + wrow + (lane >> 2) + 8 * r;
                if (i >= a.n) continue;
                float *st = table + (int64_t)i * 6 + 3 * p;
                st[0] = m[r];
                st[1] = l[r];
                st[2] = delta[r];
            }
    }
    if (!a.partial) return;
    /* this warp's 16 rows' share of dlambda, summed in a fixed order */
    double x = 0.0;
    if (c == 0)
#pragma unroll
        for (int r = 0; r < 2; r++)
            if (i0 + wrow + (lane >> 2) + 8 * r < a.n) x += (double)share[r];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    const int slot = tile * (ROWS / DSWA_BWD_ROWS) + warp;   /* DSWA_BWD_ROWS == 16 rows */
    if (lane == 0 && slot < a.tiles) a.partial[((int64_t)b * a.heads + h) * a.tiles + slot] = -x;
}

/* ---- the key kernel ----------------------------------------------------------------------- */

template <typename T, typename G, int FP32>
__global__ void __launch_bounds__(bb_cfg<T>::THREADS, bb_cfg<T>::MIN_BLOCKS) dswa_bwd_band_keys(const bwd_args a) {
    constexpr int ROWS = bb_cfg<T>::ROWS, BAND = BB_BAND(T);
    __shared__ __align__(128) T qb[BAND * BB_DIM], gb[BAND * BB_DIM];
    __shared__ __align__(128) T kt[BB_OWN(T) * BB_DIM], vt[BB_OWN(T) * BB_DIM];
    __shared__ float4 st[BAND];   /* per band query: (max, 1/sum, delta, -): one 16-byte load */
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int j0 = tile * ROWS, q0 = j0 - a.wr;   /* the tile's first key, first band query */
    const int wrow = 16 * warp;
    const int clo = -(q0 + wrow), chi = a.n - (q0 + wrow);
    const T *q = bb_slice<const T>(a.q, a.lq, b, h), *k = bb_slice<const T>(a.k, a.lk, b, h);
    const T *v = bb_slice<const T>(a.v, a.lv, b, h), *g = bb_slice<const T>(a.dout, a.ldout, b, h);
    G *dk = bb_slice<G>(a.dk, a.ldk, b, h);
    T *dv = bb_slice<T>(a.dv, a.ldv, b, h);
    /* the query kernel's table: written by the previous launch on this stream */
    const float *table = a.table + ((int64_t)b * a.heads + h) * a.n * 6;
    const float sl2 = a.scale * BB_LOG2E;
    const int span = a.wl + a.wr;

    bb_load(gb, g, a.ldout.seq, q0, BAND, a.n);
    float dpu[8][4];              /* V_p . dout over the band */
    float gv[8][4] = {};          /* dv: pair 0's terms, then pair 1's when summed */
#pragma unroll
    for (int p = 0; p < 2; p++) {
        const bool new_v = p == 0 || a.lv.pair != 0;
        if (p) __syncthreads();
        bb_load(qb, q + (int64_t)p * a.lq.pair, a.lq.seq, q0, BAND, a.n);
        if (bb_cfg<T>::OWN_IN_SMEM) {
            bb_load(kt, k + (int64_t)p * a.lk.pair, a.lk.seq, j0, ROWS, a.n);
            if (new_v) bb_load(vt, v + (int64_t)p * a.lv.pair, a.lv.seq, j0, ROWS, a.n);
        }
        dswa_cp_async_commit();
        for (int x = threadIdx.x; x < BAND; x += bb_cfg<T>::THREADS) {
            const int i = q0 + x;
            const bool ok = i >= 0 && i < a.n;
#pragma unroll
            for (int t = 0; t < 3; t++) (&st[x].x)[t] = ok ? table[(int64_t)i * 6 + 3 * p + t] : 0.f;
        }
        dswa_cp_async_wait<0>();
        __syncthreads();

        float s[8][4];
        bb_dots_own<T, FP32>(s, kt, k + (int64_t)p * a.lk.pair, a.lk.seq, j0, wrow, a.n, qb);
        if (new_v) bb_dots_own<T, FP32>(dpu, vt, v + (int64_t)p * a.lv.pair, a.lv.seq, j0, wrow, a.n, gb);
        const float cp = p ? -a.lambda : 1.f;
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float4 sc = st[wrow + 8 * t + 2 * (lane & 3) + (e & 1)];
                s[t][e] = bb_valid(t, e, span, clo, chi) ? dswa_exp2(s[t][e] * sl2 - sc.x) * sc.y : 0.f;
            }
        if (!a.sum_dv && p) {
#pragma unroll
            for (int t = 0; t < 8; t++) gv[t][0] = gv[t][1] = gv[t][2] = gv[t][3] = 0.f;
        }
        bb_mix_any<T, FP32>(gv, s, cp, gb, wrow);
        if (!a.sum_dv || p) bb_store(dv + (int64_t)p * a.ldv.pair, a.ldv.seq, j0 + wrow, a.n, gv, 1.f);
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float4 sc = st[wrow + 8 * t + 2 * (lane & 3) + (e & 1)];
                s[t][e] *= fmaf(cp, dpu[t][e], -sc.z);
            }
        float acc[8][4] = {};
        bb_mix_any<T, FP32>(acc, s, 1.f, qb, wrow);
        bb_store(dk + (int64_t)p * a.ldk.pair, a.ldk.seq, j0 + wrow, a.n, acc, a.scale);
    }
}

/* ---- the pick and the launch -------------------------------------------------------------- */

/* Every row of a tensor 16-byte aligned with unit dim stride (es: bytes per element). */
static bool rows_aligned(const void *p, const dswa_layout &l, bool with_pair, size_t es) {
    const int64_t s[4] = {l.batch, l.seq, l.head, l.pair};
    return dswa_rows16(p, s, with_pair ? 4 : 3, l.dim, es);
}

bool dswa_bwd_band_ok(const bwd_args &a, dswa_dtype dtype) {
    const bool f32 = dtype == DSWA_F32;
    const size_t in = f32 ? 4 : 2, out = f32 || a.f32_grads ? 4 : 2;   /* dv: in */
    return a.dim == BB_DIM &&
           a.wl + a.wr <= DSWA_BAND_MAX_SPAN && rows_aligned(a.q, a.lq, true, in) &&
           rows_aligned(a.k, a.lk, true, in) && rows_aligned(a.v, a.lv, true, in) &&
           rows_aligned(a.dout, a.ldout, false, in) && rows_aligned(a.dq, a.ldq, true, out) &&
           rows_aligned(a.dk, a.ldk, true, out) && rows_aligned(a.dv, a.ldv, true, in);
}

template <typename T, typename G, int FP32 = 0> static cudaError_t launch(const bwd_args &a, cudaStream_t s) {
    constexpr int ROWS = bb_cfg<T>::ROWS, THREADS = bb_cfg<T>::THREADS;
    const dim3 grid((unsigned)((a.n + ROWS - 1) / ROWS), (unsigned)a.heads, (unsigned)a.batch);
    dswa_bwd_band_queries<T, G, FP32><<<grid, THREADS, 0, s>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    dswa_bwd_band_keys<T, G, FP32><<<grid, THREADS, 0, s>>>(a);
    return cudaGetLastError();
}

/* Entries: f32 on TF32, or as three TF32 products for DSWA_MATH_FP32; each 16-bit type with
   gradients in that type, or dq and dk in fp32 (a.f32_grads). */
cudaError_t dswa_bwd_band_launch(const bwd_args &a, dswa_dtype dtype, cudaStream_t s) {
    if (dtype == DSWA_F32)
        return a.math == DSWA_MATH_FP32 ? launch<float, float, 1>(a, s) : launch<float, float, 0>(a, s);
    if (dtype == DSWA_F16) return a.f32_grads ? launch<__half, float>(a, s) : launch<__half, __half>(a, s);
    return a.f32_grads ? launch<__nv_bfloat16, float>(a, s) : launch<__nv_bfloat16, __nv_bfloat16>(a, s);
}
