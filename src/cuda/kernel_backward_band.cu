/* The op's backward on tensor cores, for the problems the forward's band kernel takes in
 * 16-bit (SAME-L's among them): head_dim 64, window_left + window_right <= 48, rows 16-byte
 * aligned with unit dim stride (dswa_bwd_band_ok). The math is in include/dswa.h, the plan and
 * the determinism rule in docs/BACKWARD.md; everything else goes to kernel_backward.cu's
 * general kernels, which the launcher there picks between.
 *
 * Entries, each a template over the 16-bit type T (__half, __nv_bfloat16) and FUSED (0: the
 * op's stores of dq, dk, dv; 1: the fused SAME-L block's backward, its epilogue done at the
 * stores: bwd_fused in backward.cuh, bb_store_fused below):
 *   dswa_bwd_band_queries  per 64 query rows of one (batch, head): for each pair, the scores S
 *                          against the rows' key band, the exact softmax P (max and sum over the
 *                          whole band, which is in registers), dP = dA V^T, delta = sum P dP,
 *                          dS = P (dP - delta) and dq = scale dS K. Writes each row's (max,
 *                          1/sum, delta) per pair to the workspace's table and, with dlambda,
 *                          each 16 rows' share of -sum dout . A_1 (as sum P_1 (dout . V_1)).
 *   dswa_bwd_band_keys     per 64 key rows: the transposed products against the rows' query
 *                          band, P recomputed from the table, dv = sum P dA (pair 0's terms,
 *                          then pair 1's, in one accumulator when dv is summed) and
 *                          dk = scale dS^T Q.
 * The dlambda kernel of kernel_backward.cu then sums the shares in a fixed order (the fused
 * block's norm sums: kernel_samel_backward.cu's reduction).
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
 *  - The weights P and dS enter the tensor core as two 16-bit terms (hi + lo, the low part
 *    the rounding error of the high one), so they carry about 16 significant bits instead of
 *    8 or 11: the gradients' error stays that of the fp32 arithmetic and the one rounding at
 *    the store, as for the general kernel (tests/lib/backward_cases.h's tolerances).
 *    The mma accumulates in fp32.
 *  - The table holds the max in log2 units (scale log2 e folded in) so that both kernels
 *    compute p = 2^(s scale log2 e - max) with the same expression. The two kernels of this
 *    family write and read it; the general family has its own units.
 *  - Loads are cp.async of 16-byte chunks into rows of 8 chunks swizzled by row (chunk
 *    u ^ (row & 7)), so that ldmatrix's 8 rows at one chunk hit 8 different bank groups.
 *  - Shared V (v.pair == 0) is read once and dA V^T computed once: pair 1's is -lambda times
 *    pair 0's.
 * Rows past N are loaded as zeros and masked; a key outside the sequence or the window weighs
 * 0. Nothing here allocates or synchronizes the host: a call is capturable in a CUDA graph.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/backward.cuh"
#include "cuda/mma.cuh"
#include "cuda/samel.cuh"

#define BB_ROWS (DSWA_TILE + DSWA_BAND_MAX_SPAN) /* band rows of a block: 112 */
#define BB_DIM 64                                /* head_dim: rows of 8 16-byte chunks */

/* ---- tiles in shared memory ------------------------------------------------------------- */

/* Chunk u (8 elements) of row r of a tile of 64-element rows, swizzled (see the top). */
template <typename P> __device__ __forceinline__ P *bb_at(P *tile, int r, int u) {
    return tile + r * BB_DIM + ((u ^ (r & 7)) << 3);
}

/* A tensor's slice at batch b, head h (int64 strides: dswa_at_head takes int ones). */
template <typename P>
__device__ __forceinline__ P *bb_slice(const void *base, const dswa_layout &l, int b, int h) {
    return (P *)base + (int64_t)b * l.batch + (int64_t)h * l.head;
}

/* Rows row0 .. row0 + rows - 1 of a slice with row stride sn into tile, asynchronously; rows
   outside [0, n) as zeros. */
template <typename T>
__device__ __forceinline__ void bb_load(T *tile, const T *base, int64_t sn, int row0, int rows, int n) {
    for (int x = threadIdx.x; x < rows * 8; x += DSWA_THREADS) {
        const int r = x >> 3, u = x & 7, src = row0 + r;
        const bool ok = src >= 0 && src < n;
        dswa_cp_async16(bb_at(tile, r, u), ok ? base + (int64_t)src * sn + u * 8 : base, ok);
    }
}

/* ---- the two products --------------------------------------------------------------------- */

/* x[t] = the dot products of the warp's 16 rows of a (from row ra) with band rows rb + 8t ..
   rb + 8t + 7 of b, over the 64 dims: mma C fragments (x[t][e] is row g + 8 (e >> 1), band
   column 8t + 2c + (e & 1), g = lane / 4, c = lane % 4). */
template <typename T>
__device__ __forceinline__ void bb_dots(float x[8][4], const T *a, int ra, const T *b, int rb) {
    const int lane = threadIdx.x & 31;
    uint32_t af[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ks++) ldmatrix_x4(af[ks], bb_at(a, ra + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
    for (int t = 0; t < 8; t++) {
        x[t][0] = x[t][1] = x[t][2] = x[t][3] = 0.f;
#pragma unroll
        for (int hk = 0; hk < 2; hk++) {
            uint32_t bf[4];
            ldmatrix_x4(bf, bb_at(b, rb + 8 * t + (lane & 7), 4 * hk + (lane >> 3)));
            mma16<T>(x[t], af[2 * hk], bf[0], bf[1]);
            mma16<T>(x[t], af[2 * hk + 1], bf[2], bf[3]);
        }
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
   row stride sn, two elements a store. */
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
            *(uint32_t *)(row + 8 * j) = pack2<T>(scale * acc[j][2 * rr], scale * acc[j][2 * rr + 1]);
    }
}

/* ---- the fused block's epilogue at the stores (bwd_fused) --------------------------------- */

/* What a fused kernel keeps in shared memory: its norm's gamma, RoPE's inv_freq, and each
   warp's sums of the norm's gradient terms over its rows (dalpha, dgamma[64], dbeta[64]). */
struct bb_fused_smem {
    float gamma[BB_DIM], inv_freq[BB_DIM / 2];
    float sums[DSWA_WARPS][1 + 2 * BB_DIM];
};
#define BB_SUMS (1 + 2 * BB_DIM)
/* The op's kernels keep none of it. */
template <int FUSED> struct bb_fused_smem_of { typedef bb_fused_smem type; };
template <> struct bb_fused_smem_of<0> { struct type {}; };

/* The block's bb_fused_smem (norm nm's weights), after a barrier the caller has. */
__device__ __forceinline__ void bb_fused_begin(bb_fused_smem &fs, const bwd_fused &f, int nm) {
    const int t = threadIdx.x;
    if (t < BB_DIM) fs.gamma[t] = __ldg(f.gamma[nm] + t);
    else if (t - BB_DIM < f.rot_dims / 2) fs.inv_freq[t - BB_DIM] = samel_inv_freq(t - BB_DIM, f.rot_dims, f.base);
}

/* acc[jp][el] for a jp known only at run time, as a select over the unrolled j (no indexing
   into registers, which would put acc in local memory). */
__device__ __forceinline__ float bb_pick(const float acc[8][4], int jp, int el) {
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < 8; q++) v = q == jp ? acc[q][el] : v;
    return v;
}

/* The store of dr = scale * acc as the packed gradient's chunk ch (of norm nm): per element,
   RoPE transposed (the partner dim d +- c is in this thread, c / 8 j-steps away, c a multiple
   of 8), then DyT's derivative with the packed input's element t:
     dy = dr_d cos + dr_d+c sin (d < c), dr_d cos - dr_d-c sin (c <= d < 2c), dr_d (beyond)
     u = tanh(alpha t), du = dy gamma, dt = du alpha (1 - u^2)
   and the warp's rows' terms of dgamma (dy u), dbeta (dy), dalpha (du t (1 - u^2)) summed over
   its 16 rows (rows, then lanes by a butterfly: a fixed order) into its sums, written by the
   first store of the norm (first) and added to by the second. tanh is tanhf, as the
   unfused epilogue computes it. */
template <typename T>
__device__ __forceinline__ void bb_store_fused(const bwd_args &a, bb_fused_smem &fs, float alpha, bool first,
                                               int b, int h, int ch, int row0, const float acc[8][4]) {
    const bwd_fused &f = a.fused;
    const int lane = threadIdx.x & 31, c4 = lane & 3, cj = f.rot_dims >> 4, c = f.rot_dims >> 1;
    const T *x = (const T *)f.x + (int64_t)b * f.lx.batch + (int64_t)h * f.lx.head + (int64_t)ch * f.lx.chunk;
    T *dx = (T *)f.dx + (int64_t)b * f.ldx.batch + (int64_t)h * f.ldx.head + (int64_t)ch * f.ldx.chunk;
    float *sums = fs.sums[threadIdx.x >> 5];
    float asum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float gs[2] = {0.f, 0.f}, bs[2] = {0.f, 0.f};
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const int i = row0 + (lane >> 2) + 8 * rr, d0 = 8 * j + 2 * c4;
            if (i >= a.n) continue;
            const float2 t = unpack2<T>(*(const uint32_t *)(x + (int64_t)i * f.lx.seq + d0));
            const float pos = (float)((int64_t)f.pos_offset + i);
            float o[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int el = 2 * rr + e, d = d0 + e;
                float dy = a.scale * acc[j][el];
                if (j < 2 * cj) {
                    const float p = a.scale * bb_pick(acc, j < cj ? j + cj : j - cj, el);
                    float sn, cs;
                    samel_sincos(pos * fs.inv_freq[d < c ? d : d - c], &sn, &cs);
                    dy = j < cj ? fmaf(dy, cs, p * sn) : fmaf(dy, cs, -(p * sn));
                }
                const float te = e ? t.y : t.x;
                const float u = samel_tanh<1>(alpha * te), s = (1.0f - u) * (1.0f + u);
                const float du = dy * fs.gamma[d];
                o[e] = du * alpha * s;
                gs[e] += dy * u;
                bs[e] += dy;
                asum += du * te * s;
            }
            *(uint32_t *)(dx + (int64_t)i * f.ldx.seq + d0) = pack2<T>(o[0], o[1]);
        }
        if (!f.partial) continue;
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) {
                gs[e] += __shfl_xor_sync(0xffffffffu, gs[e], o);
                bs[e] += __shfl_xor_sync(0xffffffffu, bs[e], o);
            }
            if (lane < 4) {
                const int d = 8 * j + 2 * lane + e;
                sums[1 + d] = first ? gs[e] : sums[1 + d] + gs[e];
                sums[1 + BB_DIM + d] = first ? bs[e] : sums[1 + BB_DIM + d] + bs[e];
            }
        }
    }
    if (!f.partial) return;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) asum += __shfl_xor_sync(0xffffffffu, asum, o);
    if (lane == 0) sums[0] = first ? asum : sums[0] + asum;
}

/* The block's share of norm nm's sums: the warps' in warp order, in double. */
__device__ __forceinline__ void bb_fused_end(const bwd_args &a, const bb_fused_smem &fs, int nm, int b, int h,
                                             int tile) {
    if (!a.fused.partial) return;
    __syncthreads();
    double *out = a.fused.partial + (((int64_t)b * a.heads + h) * gridDim.x + tile) * (2 * BB_SUMS) + nm * BB_SUMS;
    for (int e = threadIdx.x; e < BB_SUMS; e += DSWA_THREADS) {
        double s = 0.0;
#pragma unroll
        for (int w = 0; w < DSWA_WARPS; w++) s += (double)fs.sums[w][e];
        out[e] = s;
    }
}

/* A norm's alpha, from device memory where the caller keeps it there. */
__device__ __forceinline__ float bb_alpha(const bwd_fused &f, int nm) {
    return f.alpha_at[nm] ? __ldg(f.alpha_at[nm]) : f.alpha[nm];
}

#define BB_LOG2E 1.4426950408889634f

/* ---- the query kernel --------------------------------------------------------------------- */

template <typename T, int FUSED> __global__ void __launch_bounds__(DSWA_THREADS, 3) dswa_bwd_band_queries(const bwd_args a) {
    __shared__ __align__(128) T kb[BB_ROWS * BB_DIM], vb[BB_ROWS * BB_DIM];
    __shared__ __align__(128) T qt[DSWA_TILE * BB_DIM], gt[DSWA_TILE * BB_DIM];
    __shared__ typename bb_fused_smem_of<FUSED>::type fs;
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31, c = lane & 3;
    const int i0 = tile * DSWA_TILE, k0 = i0 - a.wl;   /* the tile's first query, first band key */
    const int wrow = 16 * warp;                          /* the warp's rows and band, in the tiles */
    const int clo = -(k0 + wrow), chi = a.n - (k0 + wrow);
    const T *q = bb_slice<const T>(a.q, a.lq, b, h), *k = bb_slice<const T>(a.k, a.lk, b, h);
    const T *v = bb_slice<const T>(a.v, a.lv, b, h), *g = bb_slice<const T>(a.dout, a.ldout, b, h);
    T *dq = FUSED ? NULL : bb_slice<T>(a.dq, a.ldq, b, h);
    float *table = a.table + ((int64_t)b * a.heads + h) * a.n * 6;
    const float sl2 = a.scale * BB_LOG2E;
    const int span = a.wl + a.wr;

    bb_load(gt, g, a.ldout.seq, i0, DSWA_TILE, a.n);
    if constexpr (FUSED) bb_fused_begin(fs, a.fused, 0);   /* read after the pair's barrier */
    float dpu[8][4];            /* dout . V_p over the band: dP_p = c_p dpu */
    float share[2] = {0.f, 0.f}; /* rows g, g + 8: sum P_1 dpu (dlambda) */
#pragma unroll
    for (int p = 0; p < 2; p++) {
        const bool new_v = p == 0 || a.lv.pair != 0;
        if (p) __syncthreads();   /* every warp is done with pair 0's tiles */
        bb_load(qt, q + (int64_t)p * a.lq.pair, a.lq.seq, i0, DSWA_TILE, a.n);
        bb_load(kb, k + (int64_t)p * a.lk.pair, a.lk.seq, k0, BB_ROWS, a.n);
        if (new_v) bb_load(vb, v + (int64_t)p * a.lv.pair, a.lv.seq, k0, BB_ROWS, a.n);
        dswa_cp_async_commit();
        dswa_cp_async_wait<0>();
        __syncthreads();

        float s[8][4];
        bb_dots(s, qt, wrow, kb, wrow);
        if (new_v) bb_dots(dpu, gt, wrow, vb, wrow);
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
        bb_mix(acc, s, 1.f, kb, wrow);
        if constexpr (FUSED) bb_store_fused<T>(a, fs, bb_alpha(a.fused, 0), p == 0, b, h, p ? 3 : 0, i0 + wrow, acc);
        else bb_store(dq + (int64_t)p * a.ldq.pair, a.ldq.seq, i0 + wrow, a.n, acc, a.scale);
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
    if constexpr (FUSED) bb_fused_end(a, fs, 0, b, h, tile);
    if (!a.partial) return;
    /* this warp's 16 rows' share of dlambda, summed in a fixed order */
    double x = 0.0;
    if (c == 0)
#pragma unroll
        for (int r = 0; r < 2; r++)
            if (i0 + wrow + (lane >> 2) + 8 * r < a.n) x += (double)share[r];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    const int slot = tile * (DSWA_TILE / DSWA_BWD_ROWS) + warp;   /* DSWA_BWD_ROWS == 16 rows */
    if (lane == 0 && slot < a.tiles) a.partial[((int64_t)b * a.heads + h) * a.tiles + slot] = -x;
}

/* ---- the key kernel ----------------------------------------------------------------------- */

/* 3 blocks per SM (168 registers, a few bytes spilled): 2-3 % faster than the compiler's 174
   registers and 2 blocks (docs/PERF.md section 7). */
template <typename T, int FUSED> __global__ void __launch_bounds__(DSWA_THREADS, 3) dswa_bwd_band_keys(const bwd_args a) {
    __shared__ __align__(128) T qb[BB_ROWS * BB_DIM], gb[BB_ROWS * BB_DIM];
    __shared__ __align__(128) T kt[DSWA_TILE * BB_DIM], vt[DSWA_TILE * BB_DIM];
    __shared__ float st[BB_ROWS][3];
    __shared__ typename bb_fused_smem_of<FUSED>::type fs;
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int j0 = tile * DSWA_TILE, q0 = j0 - a.wr;   /* the tile's first key, first band query */
    const int wrow = 16 * warp;
    const int clo = -(q0 + wrow), chi = a.n - (q0 + wrow);
    const T *q = bb_slice<const T>(a.q, a.lq, b, h), *k = bb_slice<const T>(a.k, a.lk, b, h);
    const T *v = bb_slice<const T>(a.v, a.lv, b, h), *g = bb_slice<const T>(a.dout, a.ldout, b, h);
    T *dk = FUSED ? NULL : bb_slice<T>(a.dk, a.ldk, b, h), *dv = bb_slice<T>(a.dv, a.ldv, b, h);
    /* the query kernel's table: written by the previous launch on this stream */
    const float *table = a.table + ((int64_t)b * a.heads + h) * a.n * 6;
    const float sl2 = a.scale * BB_LOG2E;
    const int span = a.wl + a.wr;

    bb_load(gb, g, a.ldout.seq, q0, BB_ROWS, a.n);
    if constexpr (FUSED) bb_fused_begin(fs, a.fused, 1);   /* read after the pair's barrier */
    float dpu[8][4];              /* V_p . dout over the band */
    float gv[8][4] = {};          /* dv: pair 0's terms, then pair 1's when summed */
#pragma unroll
    for (int p = 0; p < 2; p++) {
        const bool new_v = p == 0 || a.lv.pair != 0;
        if (p) __syncthreads();
        bb_load(qb, q + (int64_t)p * a.lq.pair, a.lq.seq, q0, BB_ROWS, a.n);
        bb_load(kt, k + (int64_t)p * a.lk.pair, a.lk.seq, j0, DSWA_TILE, a.n);
        if (new_v) bb_load(vt, v + (int64_t)p * a.lv.pair, a.lv.seq, j0, DSWA_TILE, a.n);
        dswa_cp_async_commit();
        for (int x = threadIdx.x; x < BB_ROWS; x += DSWA_THREADS) {
            const int i = q0 + x;
            const bool ok = i >= 0 && i < a.n;
#pragma unroll
            for (int t = 0; t < 3; t++) st[x][t] = ok ? table[(int64_t)i * 6 + 3 * p + t] : 0.f;
        }
        dswa_cp_async_wait<0>();
        __syncthreads();

        float s[8][4];
        bb_dots(s, kt, wrow, qb, wrow);
        if (new_v) bb_dots(dpu, vt, wrow, gb, wrow);
        const float cp = p ? -a.lambda : 1.f;
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float *sc = st[wrow + 8 * t + 2 * (lane & 3) + (e & 1)];
                s[t][e] = bb_valid(t, e, span, clo, chi) ? dswa_exp2(s[t][e] * sl2 - sc[0]) * sc[1] : 0.f;
            }
        if (!a.sum_dv && p) {
#pragma unroll
            for (int t = 0; t < 8; t++) gv[t][0] = gv[t][1] = gv[t][2] = gv[t][3] = 0.f;
        }
        bb_mix(gv, s, cp, gb, wrow);
        if (!a.sum_dv || p) bb_store(dv + (int64_t)p * a.ldv.pair, a.ldv.seq, j0 + wrow, a.n, gv, 1.f);
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float *sc = st[wrow + 8 * t + 2 * (lane & 3) + (e & 1)];
                s[t][e] *= fmaf(cp, dpu[t][e], -sc[2]);
            }
        float acc[8][4] = {};
        bb_mix(acc, s, 1.f, qb, wrow);
        if constexpr (FUSED) bb_store_fused<T>(a, fs, bb_alpha(a.fused, 1), p == 0, b, h, p ? 4 : 1, j0 + wrow, acc);
        else bb_store(dk + (int64_t)p * a.ldk.pair, a.ldk.seq, j0 + wrow, a.n, acc, a.scale);
    }
    if constexpr (FUSED) bb_fused_end(a, fs, 1, b, h, tile);
}

/* ---- the pick and the launch -------------------------------------------------------------- */

static bool rows_aligned(const void *p, const dswa_layout &l, bool with_pair) {
    return (uintptr_t)p % 16 == 0 && l.dim == 1 && l.seq % 8 == 0 && l.head % 8 == 0 &&
           l.batch % 8 == 0 && (!with_pair || l.pair % 8 == 0);
}

bool dswa_bwd_band_ok(const bwd_args &a, dswa_dtype dtype) {
    return (dtype == DSWA_F16 || dtype == DSWA_BF16) && a.dim == BB_DIM &&
           a.wl + a.wr <= DSWA_BAND_MAX_SPAN && rows_aligned(a.q, a.lq, true) &&
           rows_aligned(a.k, a.lk, true) && rows_aligned(a.v, a.lv, true) &&
           rows_aligned(a.dout, a.ldout, false) && rows_aligned(a.dq, a.ldq, true) &&
           rows_aligned(a.dk, a.ldk, true) && rows_aligned(a.dv, a.ldv, true);
}

template <typename T, int FUSED> static cudaError_t launch(const bwd_args &a, cudaStream_t s) {
    const dim3 grid((unsigned)((a.n + DSWA_TILE - 1) / DSWA_TILE), (unsigned)a.heads, (unsigned)a.batch);
    dswa_bwd_band_queries<T, FUSED><<<grid, DSWA_THREADS, 0, s>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    dswa_bwd_band_keys<T, FUSED><<<grid, DSWA_THREADS, 0, s>>>(a);
    return cudaGetLastError();
}

/* Entries: each 16-bit type, the op's stores or the fused block's (a.fused.dx). */
cudaError_t dswa_bwd_band_launch(const bwd_args &a, dswa_dtype dtype, cudaStream_t s) {
    const bool fused = a.fused.dx != NULL;
    if (dtype == DSWA_F16) return fused ? launch<__half, 1>(a, s) : launch<__half, 0>(a, s);
    return fused ? launch<__nv_bfloat16, 1>(a, s) : launch<__nv_bfloat16, 0>(a, s);
}
