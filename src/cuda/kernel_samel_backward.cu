/* The CUDA backward of the fused SAME-L block: dqkv (all five chunks) and the norms' alpha,
 * gamma and beta gradients from dout (the math is in include/dswa.h, the plan in
 * docs/BACKWARD.md). The CPU backward's three steps (src/cpu/samel_backward.c), each a pass
 * over fp32 scratch carved from the caller's workspace, then the norms' reduction, all on the
 * caller's stream:
 *  1. dswa_samel_bwd_prologue: the forward's DyT + RoPE of q, k, q_diff and k_diff recomputed
 *     with the forward's device functions (cuda/samel.cuh) and roundings (16-bit: DyT's result
 *     rounded to the dtype, RoPE in fp32, rounded again) into r_q, r_k: in the dtype where the
 *     op's tensor-core backward takes the problem (exact: r is already rounded to it), else
 *     widened to fp32. V and dout are read in place by the op where it can (f32; 16-bit rows
 *     the tensor-core kernels take), else copied beside r (copy_vg).
 *  2. The op's CUDA backward on that scratch: 16-bit, the tensor-core kernels with fp32 dr
 *     (dswa_cuda_backward_f32_grads); else dswa_cuda_backward_launch's pick (f32: the
 *     tensor-core kernels, on TF32 or three TF32 products for DSWA_MATH_FP32, or the general ones);
 *     pairs (q, q_diff) and (k, k_diff), V shared by both with dv.pair == 0 (the summed dV:
 *     chunk 2's gradient, written straight into dqkv where the kernels take that layout), its
 *     own table workspace a piece of ours. A 16-bit problem's gradients are therefore rounded
 *     once, when dqkv is stored.
 *  3. dswa_samel_bwd_epilogue: per row, RoPE transposed (the rotation by -theta) and DyT's
 *     derivative, written into dqkv in its dtype (chunk 2 copied where step 2 did not write it);
 *     each block's share of the norms' sums (double, a fixed order) into the workspace.
 *  Step 1 has a second form on 16-byte vectors for aligned rows (SAME-L's layout; below, after
 *  the scalar one), step 3 a specialisation for unit dim strides.
 *  4. dswa_samel_bwd_reduce (only with g): one block per norm-gradient element sums the
 *     blocks' shares in a fixed order and writes g's float.
 *
 * Why it is shaped so: correct for every layout the CPU backward takes (int64 strides, head_dim
 * up to 64, any rot_dims), deterministic (no atomics, every sum in an order fixed by the
 * problem) and reusing the op backward unchanged. Kernels 1 and 3 run the op backward's
 * geometry: blocks of DSWA_BWD_ROWS rows of one (batch, head), one warp per row at a time (a
 * row's loads in flight together), a lane owning dims lane and lane + 32. Measured and dropped
 * (docs/PERF.md section 7): step 3 at the tensor-core kernels' stores (no fp32 scratch; 1.8x
 * slower: the math runs at those kernels' 12 warps per SM, latency-bound), and 64-row blocks
 * with four rows' loads in flight (11 % slower: more registers, fewer warps). tanh is tanhf
 * (fp32-accurate, as the forward's scalar kernel and its fp32-math band kernel compute it): the
 * derivative needs u to fp32 accuracy, and r must be the function whose gradient this is (the
 * band kernel's tanh.approx in step 1 would move the gradients by up to about 2e-3 in bf16,
 * docs/PERF.md section 7). Nothing here allocates or synchronizes: a call is capturable in a
 * CUDA graph.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/internal.h"
#include "cuda/backend.h"
#include "core/samel.h"
#include "cuda/backward.cuh"
#include "cuda/samel.cuh"

/* Everything kernels 1 and 3 read; passed by value. */
struct sbwd_args {
    const void *qkv, *dout;
    void *dqkv;
    const float *gamma[2], *beta[2];   /* q_norm's, k_norm's */
    float alpha[2];
    const float *alpha_at[2];          /* dswa_samel_norm.alpha_at: read instead of alpha */
    float *rq, *rk, *v, *go;           /* step 1's scratch: [b][n][pair][h][d], [b][n][h][d];
                                          fp32, or the dtype where the op's tensor-core
                                          backward takes the problem (exact: r is rounded to
                                          the dtype, as the forward rounds it) */
    int copy_vg;                       /* V and dout copied to v, go; 0: the op reads them
                                          where they are */
    const float *drq, *drk;            /* step 2's gradients of r_q, r_k, the same shapes */
    const void *dv;                    /* its summed dV, [b][n][h][d]: fp32, or the dtype (dv_t);
                                          NULL where the op wrote it into dqkv's chunk 2 */
    int dv_t;
    double *partial;                   /* [B][H][tiles][DSWA_SAMEL_BWD_PARTS(D)]; NULL: no g */
    dswa_samel_layout x, dx;
    dswa_layout ldout;
    int n, heads, dim, rot_dims, pos_offset;
    int tiles;                         /* epilogue blocks along the sequence */
    int small_angles;                  /* every angle of the call within SAMEL_SMALL_ANGLE */
    float freq[DSWA_AOT_ROPE_FREQS];  /* RoPE's frequencies (dswa_samel_freqs), 0 past rot_dims / 2 */
};

#define ROWS_PER_WARP (DSWA_BWD_ROWS / DSWA_WARPS)

/* q, k, q_diff, k_diff: the chunk, its norm (0 q_norm, 1 k_norm) and its pair. */
__device__ __forceinline__ void chunk_of(int t, int *ch, int *norm, int *pair) {
    *ch = t < 2 ? t : t + 1;
    *norm = t & 1;
    *pair = t >> 1;
}

/* Dense fp32 row (b, i, pair, h) of [b][n][pair][h][d] scratch. */
__device__ __forceinline__ int64_t pair_row(const sbwd_args &a, int b, int i, int pair, int h) {
    return ((((int64_t)b * a.n + i) * 2 + pair) * a.heads + h) * a.dim;
}
/* Dense fp32 row (b, i, h) of [b][n][h][d] scratch. */
__device__ __forceinline__ int64_t one_row(const sbwd_args &a, int b, int i, int h) {
    return (((int64_t)b * a.n + i) * a.heads + h) * a.dim;
}

/* Row (b, i, h) of the packed input, its gradient or dout (a layout with batch, seq, head). */
template <typename T, typename L>
__device__ __forceinline__ T *row_at(T *base, const L &l, int b, int i, int h) {
    return base + (int64_t)b * l.batch + (int64_t)i * l.seq + (int64_t)h * l.head;
}

/* The geometry of kernels 1 and 3: lane holds dims d = lane + 32 k (k = 0, 1) of a row. RoPE's
   partner of dim d is e = d + c (d < c) or d - c (c <= d < 2c), held by lane e & 31 at k = e >> 5:
   fetched by shuffles rather than loaded and transformed again. p[k] is read only where dim k
   rotates. Where rot_dims <= 32 (SAME-L's) those dims and their partners are all at k = 0: one
   shuffle, not four. Called by whole warps. */
__device__ __forceinline__ void lane_partners(const float (&y)[2], const int (&e)[2], int rot_dims, float (&p)[2]) {
    if (rot_dims <= 32) {
        p[0] = __shfl_sync(0xffffffffu, y[0], e[0] & 31);
        p[1] = y[1];
        return;
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const float p0 = __shfl_sync(0xffffffffu, y[0], e[k] & 31), p1 = __shfl_sync(0xffffffffu, y[1], e[k] & 31);
        p[k] = e[k] >> 5 ? p1 : p0;
    }
}

/* What a lane keeps through its rows: inv_freq, the partner e of its dims, both norms' gamma
   and beta at its dims (0 past D), both alphas. */
struct lane_norms {
    float invf[2], gamma[2][2], beta[2][2], alpha[2];
    int e[2];
};
__device__ __forceinline__ lane_norms lane_norms_of(const sbwd_args &a, int lane) {
    lane_norms l;
    const int c = a.rot_dims / 2;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const int d = lane + 32 * k;
        const bool in = d < a.dim;
        l.invf[k] = in && d < 2 * c ? a.freq[d < c ? d : d - c] : 0.f;
        l.e[k] = d < c ? d + c : d < 2 * c ? d - c : d;
#pragma unroll
        for (int nm = 0; nm < 2; nm++) {
            l.gamma[nm][k] = in ? __ldg(a.gamma[nm] + d) : 0.f;
            l.beta[nm][k] = in ? __ldg(a.beta[nm] + d) : 0.f;
        }
    }
    l.alpha[0] = samel_alpha(a.alpha_at[0], __float_as_int(a.alpha[0]));
    l.alpha[1] = samel_alpha(a.alpha_at[1], __float_as_int(a.alpha[1]));
    return l;
}

/* Chunk t's value at dim d of the row (t as chunk_of numbers it), read by kernels 1 and 3 alike;
   each loads it beside its other loads of dim d, the order the measured code has. */
template <typename T>
__device__ __forceinline__ float chunk_at(const sbwd_args &a, const T *xr, int t, int d) {
    int ch, nm, pr;
    chunk_of(t, &ch, &nm, &pr);
    return dswa_to_f32(xr[(int64_t)ch * a.x.chunk + d * a.x.dim]);
}

/* The angles' sin and cos of the lane's dims at pos, read only where a dim rotates (lanes that
   pass through get cos 1, sin 0, or those of angle 0 beside rotating lanes). Both branches are
   the warp's: a half of 32 dims with none rotating, and the call's angles all small (one test
   per call, not per angle: the bits are samel_sincos's). */
__device__ __forceinline__ void lane_angles(const sbwd_args &a, const lane_norms &l, float pos,
                                            float (&cs)[2], float (&sn)[2]) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
        cs[k] = 1.f;
        sn[k] = 0.f;
        if (32 * k >= a.rot_dims) continue;
        if (a.small_angles) samel_sincos_small(pos * l.invf[k], &sn[k], &cs[k]);
        else samel_sincos(pos * l.invf[k], &sn[k], &cs[k]);
    }
}

/* ---- 1: the prologue ---------------------------------------------------------------------- */

/* RoPE at a dim from its value y, its partner's w and the sine signed by the dim's place in its
   pair (-sin for the first, sin for the second): samel_rotate's result, bitwise, with a select
   where the lanes of a warp hold both places, not a branch. */
__device__ __forceinline__ float rope_at(float y, float w, float cs, float ssn) { return fmaf(y, cs, w * ssn); }

/* Per row, every load first (four chunks, V and dout: in flight together), then DyT and RoPE
   with the forward's functions and roundings (samel_element's, the partner's y by shuffle), so
   that r is the forward's r. The row loop has a fixed trip count, rows past n computing zeros, so that
   its shuffles stay in converged code (the epilogue's reason, below). */
template <typename T, typename S> __global__ void __launch_bounds__(DSWA_THREADS) dswa_samel_bwd_prologue(const sbwd_args a) {
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31, i0 = tile * DSWA_BWD_ROWS + warp * ROWS_PER_WARP;
    const int c = a.rot_dims / 2;
    const lane_norms l = lane_norms_of(a, lane);
    const T *__restrict__ x = (const T *)a.qkv, *__restrict__ dout = (const T *)a.dout;
#pragma unroll 1
    for (int q = 0; q < ROWS_PER_WARP; q++) {
        const int i = i0 + q;
        const bool row = i < a.n;   /* else nothing is read or written at row i */
        const T *xr = row_at(x, a.x, b, i, h), *gr = row_at(dout, a.ldout, b, i, h);
        float xv[4][2], vv[2], gv[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int d = lane + 32 * k;
            const bool in = row && d < a.dim;
#pragma unroll
            for (int t = 0; t < 4; t++) xv[t][k] = in ? chunk_at(a, xr, t, d) : 0.f;
            vv[k] = in && a.copy_vg ? dswa_to_f32(xr[2 * a.x.chunk + d * a.x.dim]) : 0.f;
            gv[k] = in && a.copy_vg ? dswa_to_f32(gr[d * a.ldout.dim]) : 0.f;
        }
        float cs[2], sn[2];
        lane_angles(a, l, (float)((int64_t)a.pos_offset + i), cs, sn);
#pragma unroll
        for (int t = 0; t < 4; t++) {
            int ch, nm, pr;
            chunk_of(t, &ch, &nm, &pr);
            float y[2], w[2];
#pragma unroll
            for (int k = 0; k < 2; k++)
                y[k] = samel_round<T>(samel_dyt<1>(xv[t][k], l.alpha[nm], l.gamma[nm][k], l.beta[nm][k]));
            lane_partners(y, l.e, a.rot_dims, w);
            S *dst = (S *)(nm ? a.rk : a.rq) + pair_row(a, b, i, pr, h);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int d = lane + 32 * k;
                const float r = d < 2 * c ? samel_round<T>(rope_at(y[k], w[k], cs[k], d < c ? -sn[k] : sn[k])) : y[k];
                if (row && d < a.dim) dst[d] = dswa_from_f32<S>(r);
            }
        }
        if (!a.copy_vg) continue;
        const int64_t o = one_row(a, b, i, h);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int d = lane + 32 * k;
            if (row && d < a.dim) {
                ((S *)a.v)[o + d] = dswa_from_f32<S>(vv[k]);
                ((S *)a.go)[o + d] = dswa_from_f32<S>(gv[k]);
            }
        }
    }
}

/* ---- 3: the epilogue ---------------------------------------------------------------------- */

/* Per block of DSWA_SAMEL_BWD_SHARE_ROWS positions of one (batch, head), in groups of
   DSWA_BWD_ROWS rows (a warp 4 consecutive rows of each, as kernel 1): each lane adds its
   dims' terms over its warp's rows in order (group, row, chunk) in fp32, then in double: dalpha
   over the lanes (a butterfly: the same order every run), and the block's share of every sum
   is the warps' in warp order. Entry layout per norm: dalpha, dgamma[D], dbeta[D]. A share of
   64 positions, not 16: a quarter of the partial sums to write and reduce (the reduction
   measured 62 us with 16-row shares, 18 with 64-row ones, bf16 at L = 1292). Per row, every
   load first, as in the prologue; dr's partner by shuffle. The row loop has a fixed trip
   count, rows past n computing zeros: a loop exit on i < n is uniform, but the compiler cannot
   know it and guards each shuffle as in divergent code. A lane outside the row or the head
   (in false) has dr = x = 0, so its terms are 0 and only its stores are skipped: no branches
   around the math. */
#define SHARE_GROUPS (DSWA_SAMEL_BWD_SHARE_ROWS / DSWA_BWD_ROWS)
template <typename T, int UNIT> __global__ void __launch_bounds__(DSWA_THREADS, UNIT ? 8 : 6) dswa_samel_bwd_epilogue(const sbwd_args a) {
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31, i0 = tile * DSWA_SAMEL_BWD_SHARE_ROWS + warp * ROWS_PER_WARP;
    const int c = a.rot_dims / 2;
    const lane_norms l = lane_norms_of(a, lane);
    float da[2] = {0.f, 0.f}, dg[2][2] = {{0.f, 0.f}, {0.f, 0.f}}, db[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    const T *__restrict__ x = (const T *)a.qkv;
    T *__restrict__ dx = (T *)a.dqkv;
    /* UNIT: x and dqkv with unit dim stride (SAME-L's), so that a lane's addresses are a row's
       base plus constants */
    const int64_t xs = UNIT ? 1 : a.x.dim, dxs = UNIT ? 1 : a.dx.dim;
#pragma unroll 1
    for (int q = 0; q < SHARE_GROUPS * ROWS_PER_WARP; q++) {
        const int i = i0 + q / ROWS_PER_WARP * DSWA_BWD_ROWS + q % ROWS_PER_WARP;
        const bool row = i < a.n;   /* else nothing is read or written at row i */
        const T *xr = row_at(x, a.x, b, i, h);
        T *dxr = row_at(dx, a.dx, b, i, h);
        const int64_t o = one_row(a, b, i, h);
        float dr[4][2], xv[4][2];
        bool in[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int d = lane + 32 * k;
            in[k] = row && d < a.dim;
#pragma unroll
            for (int t = 0; t < 4; t++) {
                int ch, nm, pr;
                chunk_of(t, &ch, &nm, &pr);
                dr[t][k] = in[k] ? (nm ? a.drk : a.drq)[pair_row(a, b, i, pr, h) + d] : 0.f;
                xv[t][k] = in[k] ? dswa_to_f32(xr[(int64_t)ch * a.x.chunk + d * xs]) : 0.f;
            }
        }
        float cs[2], sn[2];
        lane_angles(a, l, (float)((int64_t)a.pos_offset + i), cs, sn);
#pragma unroll
        for (int k = 0; k < 2; k++) sn[k] = lane + 32 * k < c ? sn[k] : -sn[k];   /* the rotation by -theta */
#pragma unroll
        for (int k = 0; k < 2; k++) {   /* chunk 2: the summed dV as it is */
            const int d = lane + 32 * k;
            if (in[k] && a.dv)
                dxr[2 * a.dx.chunk + d * dxs] = dswa_from_f32<T>(
                    a.dv_t ? dswa_to_f32(((const T *)a.dv)[o + d]) : ((const float *)a.dv)[o + d]);
        }
#pragma unroll
        for (int t = 0; t < 4; t++) {
            int ch, nm, pr;
            chunk_of(t, &ch, &nm, &pr);
            const float alpha = l.alpha[nm];
            float p[2];
            lane_partners(dr[t], l.e, a.rot_dims, p);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int d = lane + 32 * k;
                /* dy_j = dr_j cos + dr_j+c sin, dy_j+c = dr_j+c cos - dr_j sin (sn signed above: one
                   select, not branches) */
                const float dy = d < 2 * c ? fmaf(dr[t][k], cs[k], p[k] * sn[k]) : dr[t][k];
                /* u as the forward computes it with fp32 math; 1 - u^2 factored, exact near u = 1 */
                const float u = samel_tanh<1>(alpha * xv[t][k]), s = (1.0f - u) * (1.0f + u);
                const float du = dy * l.gamma[nm][k];
                if (in[k]) dxr[(int64_t)ch * a.dx.chunk + d * dxs] = dswa_from_f32<T>(du * alpha * s);
                da[nm] = fmaf(du * xv[t][k], s, da[nm]);
                dg[nm][k] = fmaf(dy, u, dg[nm][k]);
                db[nm][k] += dy;
            }
        }
    }
    if (!a.partial) return;
    const int per = 1 + 2 * a.dim;   /* doubles per norm */
    __shared__ double part[DSWA_WARPS][2][1 + 2 * DSWA_BWD_MAX_DIM];
    for (int nm = 0; nm < 2; nm++) {
        double s = (double)da[nm];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part[warp][nm][0] = s;
        for (int k = 0; k < 2; k++) {
            const int d = lane + 32 * k;
            if (d < a.dim) {
                part[warp][nm][1 + d] = (double)dg[nm][k];
                part[warp][nm][1 + a.dim + d] = (double)db[nm][k];
            }
        }
    }
    __syncthreads();
    double *out = a.partial + (((int64_t)b * a.heads + h) * a.tiles + tile) * (2 * per);
    for (int e = threadIdx.x; e < 2 * per; e += DSWA_THREADS) {
        const int nm = e / per, at = e % per;
        double s = 0.0;
        for (int w = 0; w < DSWA_WARPS; w++) s += part[w][nm][at];
        out[e] = s;
    }
}

/* ---- 1 on 16-byte vectors ---------------------------------------------------------------- */

/* The prologue where every row of x is 16-byte aligned with unit dim stride, head_dim a
   multiple of 8 and rot_dims of 16 (SAME-L's layout; the launcher's pv is the rule): a lane
   owns 8 consecutive dims of one row, a warp 4 rows at once (8 lanes a row), so a row's loads
   are a few 16-byte ones all in flight and RoPE's partner vector (dims +- c, c a multiple of 8)
   is another lane of the same row. Every element is computed by the scalar form's expressions,
   so r is bitwise the same. Measured 11 % faster than the scalar form (29 % fewer
   instructions; the math per element is the same). The epilogue's vector form measured 26 %
   slower (its four fp32 arrays of 8 dims a lane: 128 registers, latency-bound) and was
   removed (docs/PERF.md section 7). */
static_assert(ROWS_PER_WARP == 4 && DSWA_BWD_MAX_DIM == 64, "a warp's 32 lanes: 4 rows of 8 vectors of 8 dims");

/* Eight consecutive elements (16-byte aligned) to floats and back: one 16-byte access for a
   16-bit dtype, two for f32. */
template <typename T> __device__ __forceinline__ void load8(const T *p, float (&v)[8]) {
    const uint4 u = *(const uint4 *)p;
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        T two[2];
        memcpy(two, &w[j], 4);
        v[2 * j] = dswa_to_f32(two[0]);
        v[2 * j + 1] = dswa_to_f32(two[1]);
    }
}
template <> __device__ __forceinline__ void load8<float>(const float *p, float (&v)[8]) {
    const float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
template <typename T> __device__ __forceinline__ void store8(T *p, const float (&v)[8]) {
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const T two[2] = {dswa_from_f32<T>(v[2 * j]), dswa_from_f32<T>(v[2 * j + 1])};
        memcpy(&w[j], two, 4);
    }
    *(uint4 *)p = make_uint4(w[0], w[1], w[2], w[3]);
}
template <> __device__ __forceinline__ void store8<float>(float *p, const float (&v)[8]) {
    ((float4 *)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4 *)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

/* What a lane of the vector prologue owns: row i (4 rows a warp), dims d0 .. d0 + 7, RoPE's
   partner vector at dims e0 (d0 itself where RoPE passes through) on lane `src`, and the
   angles' sin and cos of its dims at position i (cos 1, sin 0 where RoPE passes through). */
struct vec_lane {
    int i, d0, e0, src;
    bool on;   /* row and dims exist: loads and stores; other lanes carry zeros */
    float cs[8], sn[8];
};
__device__ __forceinline__ vec_lane vec_lane_of(const sbwd_args &a) {
    vec_lane v;
    const int lane = threadIdx.x & 31, c = a.rot_dims / 2;
    v.i = blockIdx.x * DSWA_BWD_ROWS + (threadIdx.x >> 5) * ROWS_PER_WARP + (lane >> 3);
    v.d0 = 8 * (lane & 7);
    v.e0 = v.d0 < c ? v.d0 + c : v.d0 < 2 * c ? v.d0 - c : v.d0;
    v.src = (lane & ~7) | (v.e0 >> 3);
    v.on = v.i < a.n && v.d0 < a.dim;
    const float pos = (float)((int64_t)a.pos_offset + v.i);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        v.cs[j] = 1.f;
        v.sn[j] = 0.f;
    }
    if (v.d0 < 2 * c) {   /* a lane's 8 dims all rotate, or none do; the angle test once a call */
        const float *f = a.freq + (v.d0 < c ? v.d0 : v.d0 - c);
        if (a.small_angles)
#pragma unroll
            for (int j = 0; j < 8; j++) samel_sincos_small(pos * f[j], &v.sn[j], &v.cs[j]);
        else
#pragma unroll
            for (int j = 0; j < 8; j++) samel_sincos(pos * f[j], &v.sn[j], &v.cs[j]);
    }
    return v;
}

/* The partner lane's eight values (exact in T: sent as T pairs, four shuffles for 16 bits).
   Called by whole warps. */
template <typename T> __device__ __forceinline__ void partner8(const float (&y)[8], int src, float (&w)[8]) {
    if (sizeof(T) == 2) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            T two[2] = {dswa_from_f32<T>(y[2 * j]), dswa_from_f32<T>(y[2 * j + 1])};
            unsigned u;
            memcpy(&u, two, 4);
            u = __shfl_sync(0xffffffffu, u, src);
            memcpy(two, &u, 4);
            w[2 * j] = dswa_to_f32(two[0]);
            w[2 * j + 1] = dswa_to_f32(two[1]);
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) w[j] = __shfl_sync(0xffffffffu, y[j], src);
    }
}

template <typename T, typename S> __global__ void __launch_bounds__(DSWA_THREADS) dswa_samel_bwd_prologue_vec(const sbwd_args a) {
    const int h = blockIdx.y, b = blockIdx.z, c = a.rot_dims / 2;
    const vec_lane v = vec_lane_of(a);
    const T *xr = row_at((const T *)a.qkv, a.x, b, v.on ? v.i : 0, h) + v.d0;
    float xv[4][8];
#pragma unroll
    for (int t = 0; t < 4; t++) {
        int ch, nm, pr;
        chunk_of(t, &ch, &nm, &pr);
        if (v.on) load8(xr + (int64_t)ch * a.x.chunk, xv[t]);
        else
            for (int j = 0; j < 8; j++) xv[t][j] = 0.f;
    }
#pragma unroll
    for (int t = 0; t < 4; t++) {
        int ch, nm, pr;
        chunk_of(t, &ch, &nm, &pr);
        const float alpha = samel_alpha(a.alpha_at[nm], __float_as_int(a.alpha[nm]));
        float y[8], w[8], r[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int d = v.d0 + j < a.dim ? v.d0 + j : 0;
            y[j] = samel_round<T>(samel_dyt<1>(xv[t][j], alpha, __ldg(a.gamma[nm] + d), __ldg(a.beta[nm] + d)));
        }
        partner8<T>(y, v.src, w);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            r[j] = v.d0 < 2 * c ? samel_round<T>(rope_at(y[j], w[j], v.cs[j], v.d0 < c ? -v.sn[j] : v.sn[j])) : y[j];
        }
        if (v.on) store8((S *)(nm ? a.rk : a.rq) + pair_row(a, b, v.i, pr, h) + v.d0, r);
    }
}

/* ---- 4: the norms' gradients -------------------------------------------------------------- */

/* g's six pointers: q_norm's dalpha, dgamma, dbeta, then k_norm's. */
struct sbwd_grads { float *qa, *qg, *qb, *ka, *kg, *kb; };

/* Block e sums entry e over the blocks' shares: thread t takes shares t, t + 256, ... in
   order, then a fixed tree; the float goes to g. */
#define REDUCE_THREADS 256
__global__ void __launch_bounds__(REDUCE_THREADS) dswa_samel_bwd_reduce(const double *partial, int64_t blocks,
                                                                        int dim, sbwd_grads g) {
    __shared__ double s[REDUCE_THREADS];
    const int e = blockIdx.x, per = 1 + 2 * dim;
    double x = 0.0;
    for (int64_t t = threadIdx.x; t < blocks; t += REDUCE_THREADS) x += partial[t * (2 * per) + e];
    s[threadIdx.x] = x;
    __syncthreads();
    for (int w = REDUCE_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const int at = e % per, k = e >= per;
        /* named fields, not an indexed array: an index would copy g to local memory */
        float *dst = at == 0 ? (k ? g.ka : g.qa)
                     : at <= dim ? (k ? g.kg : g.qg) + (at - 1) : (k ? g.kb : g.qb) + (at - 1 - dim);
        *dst = (float)s[0];
    }
}

/* ---- entries per dtype and the launcher --------------------------------------------------- */

#define SBWD_DTYPES(X) X(DSWA_F32, float) X(DSWA_F16, __half) X(DSWA_BF16, __nv_bfloat16)
/* prologue: fp32 scratch; prologue16: scratch in the dtype (16-bit only); [1]: on vectors;
   epilogue[1]: unit dim strides */
struct sbwd_entry { dswa_dtype dtype; const void *prologue[2], *prologue16[2], *epilogue[2]; };
#define SBWD_ENTRY(dt, T)                                                                        \
    {dt,                                                                                         \
     {(const void *)dswa_samel_bwd_prologue<T, float>, (const void *)dswa_samel_bwd_prologue_vec<T, float>}, \
     {sizeof(T) == 2 ? (const void *)dswa_samel_bwd_prologue<T, T> : NULL,                     \
      sizeof(T) == 2 ? (const void *)dswa_samel_bwd_prologue_vec<T, T> : NULL},                 \
     {(const void *)dswa_samel_bwd_epilogue<T, 0>, (const void *)dswa_samel_bwd_epilogue<T, 1>}},
static const sbwd_entry entries[] = {SBWD_DTYPES(SBWD_ENTRY)};

/* Whether the vector prologue takes a packed buffer: every row 16-byte aligned, unit dim stride. */
static bool rows16(const void *base, const dswa_samel_layout &l, size_t es) {
    const int64_t s[4] = {l.batch, l.seq, l.chunk, l.head};
    return dswa_rows16(base, s, 4, l.dim, es);
}

/* Step 2's way: the op's problem, where it reads V and dout and writes the summed dV, and on
   which kernels. */
struct op_way {
    dswa_backward_problem prob;
    const void *v, *dout;
    void *dv;
    bool copied;   /* V and dout copied by the prologue beside r (else read in qkv and dout) */
    bool band16;   /* 16-bit on the tensor-core kernels with fp32 dq, dk (f32_grads) */
};

/* The first way the tensor-core kernels take (16-bit: with fp32 dq and dk, which the epilogue
   rounds once), in the order of the bytes it saves: V and dout read in place, else (16-bit
   only) copied by the prologue in the dtype; dV straight into dqkv's chunk 2, else into the
   scratch (dv_scratch) for the epilogue to copy. Where they take none, the general kernels:
   f32 in place with dV into dqkv (they take any strides), 16-bit on fp32 copies (they compute
   in the problem's dtype, and a 16-bit gradient is rounded once, by the epilogue). r and the
   gradients of r are always the dense scratch (dswa_samel_scratch_backward_problem:
   [b][n][pair][h][d]). */
static op_way op_way_of(const dswa_samel_backward_problem *bp, const sbwd_args &a, const void *qkv,
                        const void *dout, void *dqkv, void *dv_scratch, size_t es) {
    const dswa_samel_problem *p = &bp->fwd;
    const bool f32 = p->dtype == DSWA_F32;
    const dswa_backward_problem ob = dswa_samel_scratch_backward_problem(p);   /* fp32, dense */
    op_way w, first;
    for (int t = 0; t < (f32 ? 2 : 4); t++) {
        const bool in = t < 2, direct = t % 2 == 0;
        w.prob = ob;
        w.prob.fwd.dtype = p->dtype;
        if (in) {
            w.prob.fwd.v = (dswa_layout){p->qkv.batch, p->qkv.seq, 0, p->qkv.head, p->qkv.dim};
            w.prob.dout = bp->dout;
        }
        if (direct) w.prob.dv = (dswa_layout){bp->dqkv.batch, bp->dqkv.seq, 0, bp->dqkv.head, bp->dqkv.dim};
        w.v = in ? (const void *)((const char *)qkv + 2 * p->qkv.chunk * (int64_t)es) : a.v;
        w.dout = in ? dout : a.go;
        w.dv = direct ? (void *)((char *)dqkv + 2 * bp->dqkv.chunk * (int64_t)es) : dv_scratch;
        w.copied = !in;
        w.band16 = !f32;
        if (f32 ? dswa_cuda_backward_band_takes(&w.prob, a.rq, a.rk, w.v, w.dout, a.drq, a.drk, w.dv)
                : dswa_cuda_backward_f32_grads_takes(&w.prob, a.rq, a.rk, w.v, w.dout, a.drq, a.drk, w.dv))
            return w;
        if (t == 0) first = w;
    }
    if (f32) w = first;   /* the general kernels, in place, dV into dqkv */
    else {                /* on fp32 copies */
        w.prob = ob;
        w.v = a.v;
        w.dout = a.go;
        w.dv = dv_scratch;
        w.copied = true;
    }
    w.band16 = false;
    return w;
}

static dswa_status launched(const char *what, cudaError_t e) {
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? DSWA_OK
                            : dswa_fail(DSWA_ERR_CUDA, "%s failed: %s", what, cudaGetErrorString(e));
}

extern "C" dswa_status dswa_cuda_samel_backward_launch(const dswa_samel_backward_problem *bp,
                                                       const void *qkv, const void *dout, void *dqkv,
                                                       const dswa_samel_norm_grads *g, void *workspace,
                                                       void *stream) {
    const dswa_samel_problem *p = &bp->fwd;
    cudaStream_t s = (cudaStream_t)stream;
    const size_t nb = sizeof(float) * (size_t)(p->head_dim > 0 ? p->head_dim : 0);
    float *const gp[6] = {g ? g->q_norm.dalpha : NULL, g ? g->q_norm.dgamma : NULL,
                          g ? g->q_norm.dbeta : NULL, g ? g->k_norm.dalpha : NULL,
                          g ? g->k_norm.dgamma : NULL, g ? g->k_norm.dbeta : NULL};
    static const char *const gnames[6] = {"q_norm.dalpha", "q_norm.dgamma", "q_norm.dbeta",
                                          "k_norm.dalpha", "k_norm.dgamma", "k_norm.dbeta"};
    for (int t = 0; t < 6 && g; t++)
        if ((uintptr_t)gp[t] % sizeof(float))
            return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %p: must be 4-byte aligned (floats)",
                             gnames[t], (void *)gp[t]);
    if (p->batch == 0 || p->seq_len == 0) {   /* the gradients of empty sums */
        dswa_status st = DSWA_OK;
        for (int t = 0; t < 6 && g && !st; t++)
            st = launched("cudaMemsetAsync of a norm gradient",
                          cudaMemsetAsync(gp[t], 0, t % 3 ? nb : sizeof(float), s));
        return st;
    }
    if (p->head_dim > DSWA_BWD_MAX_DIM)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "head_dim = %d: the CUDA backward takes head_dim "
                         "up to %d", p->head_dim, DSWA_BWD_MAX_DIM);
    if (p->seq_len > (1 << 30))   /* row + window stays an int */
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "seq_len = %d: the CUDA backward takes seq_len up "
                         "to 2^30", p->seq_len);
    if (p->heads > 65535 || p->batch > 65535)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "%s = %d: the CUDA grid takes at most 65535",
                         p->heads > 65535 ? "heads" : "batch", p->heads > 65535 ? p->heads : p->batch);
    const size_t es = dswa_dtype_size(p->dtype);
    const void *const ptr[7] = {qkv, dout, dqkv, p->q_norm.gamma, p->q_norm.beta,
                                p->k_norm.gamma, p->k_norm.beta};
    static const char *const names[7] = {"qkv", "dout", "dqkv", "q_norm.gamma", "q_norm.beta",
                                         "k_norm.gamma", "k_norm.beta"};
    for (int t = 0; t < 7; t++) {
        const size_t al = t < 3 ? es : sizeof(float);
        if ((uintptr_t)ptr[t] % al)
            return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %p: must be aligned to its %zu-byte "
                             "elements", names[t], ptr[t], al);
    }
    const sbwd_entry *e = NULL;
    for (size_t t = 0; t < sizeof entries / sizeof entries[0]; t++)
        if (entries[t].dtype == p->dtype) e = &entries[t];
    if (!e) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dtype = %d: no kernel", (int)p->dtype);

    dswa_samel_bwd_ws w;
    dswa_samel_bwd_workspace_layout(p->batch, p->seq_len, p->heads, p->head_dim, &w);
    char *ws = (char *)workspace;
    sbwd_args a;
    a.qkv = qkv; a.dout = dout; a.dqkv = dqkv;
    a.gamma[0] = p->q_norm.gamma; a.beta[0] = p->q_norm.beta; a.alpha[0] = p->q_norm.alpha;
    a.gamma[1] = p->k_norm.gamma; a.beta[1] = p->k_norm.beta; a.alpha[1] = p->k_norm.alpha;
    a.alpha_at[0] = p->q_norm.alpha_at; a.alpha_at[1] = p->k_norm.alpha_at;
    a.rq = (float *)(ws + w.rq); a.rk = (float *)(ws + w.rk);
    a.v = (float *)(ws + w.v); a.go = (float *)(ws + w.dout);
    a.drq = (float *)(ws + w.drq); a.drk = (float *)(ws + w.drk); a.dv = ws + w.dv;
    a.partial = g ? (double *)(ws + w.partial) : NULL;
    a.x = p->qkv; a.dx = bp->dqkv; a.ldout = bp->dout;
    a.n = p->seq_len; a.heads = p->heads; a.dim = p->head_dim;
    a.rot_dims = p->rot_dims; a.pos_offset = p->pos_offset;
    memset(a.freq, 0, sizeof a.freq);
    dswa_samel_freqs(p, a.freq);
    a.tiles = (p->seq_len + DSWA_SAMEL_BWD_SHARE_ROWS - 1) / DSWA_SAMEL_BWD_SHARE_ROWS;
    /* every angle pos * freq within SAMEL_SMALL_ANGLE: the fp32 product of the largest |pos| and
       |freq| is at most 2^-24 relatively above the exact one, which 65535 leaves room for */
    double big = 0.0;
    for (int j = 0; j < p->rot_dims / 2; j++) big = fmax(big, fabs((double)a.freq[j]));
    const double last = fmax(fabs((double)p->pos_offset), fabs((double)p->pos_offset + p->seq_len - 1));
    a.small_angles = (double)(float)last * big <= (double)SAMEL_SMALL_ANGLE - 1.0;

    const op_way ow = op_way_of(bp, a, qkv, dout, dqkv, ws + w.dv, es);
    a.copy_vg = ow.copied;
    a.dv = ow.dv == ws + w.dv ? ow.dv : NULL;   /* else the op wrote it into dqkv's chunk 2 */
    a.dv_t = ow.band16;

    /* the vector prologue: head_dim a multiple of 8, RoPE's partner a whole vector away, V and
       dout not copied, the input's rows 16-byte aligned */
    const int pv = p->head_dim % 8 == 0 && p->rot_dims % 16 == 0 && !a.copy_vg && rows16(qkv, p->qkv, es);

    const dim3 grid((unsigned)((p->seq_len + DSWA_BWD_ROWS - 1) / DSWA_BWD_ROWS), (unsigned)p->heads,
                    (unsigned)p->batch),
        egrid((unsigned)a.tiles, (unsigned)p->heads, (unsigned)p->batch);
    void *args[1] = {&a};
    dswa_status st;
    if ((st = launched("launch of the SAME-L backward's prologue",
                       cudaLaunchKernel(ow.band16 ? e->prologue16[pv] : e->prologue[pv], grid,
                                        dim3(DSWA_THREADS), args, 0, s))) ||
        (st = ow.band16 ? dswa_cuda_backward_f32_grads(&ow.prob, a.rq, a.rk, ow.v, ow.dout, (float *)a.drq,
                                                       (float *)a.drk, ow.dv, ws + w.op, s)
                        : dswa_cuda_backward_launch(&ow.prob, a.rq, a.rk, ow.v, ow.dout, (void *)a.drq,
                                                    (void *)a.drk, ow.dv, NULL, ws + w.op, stream)) ||
        (st = launched("launch of the SAME-L backward's epilogue",
                       cudaLaunchKernel(e->epilogue[p->qkv.dim == 1 && bp->dqkv.dim == 1], egrid,
                                        dim3(DSWA_THREADS), args, 0, s))))
        return st;
    if (!g) return DSWA_OK;
    const double *partial = a.partial;
    int64_t blocks = (int64_t)w.blocks;
    int dim = p->head_dim;
    sbwd_grads gg = {gp[0], gp[1], gp[2], gp[3], gp[4], gp[5]};
    void *rargs[4] = {&partial, &blocks, &dim, &gg};
    return launched("launch of the SAME-L backward's norm reduction",
                    cudaLaunchKernel((const void *)dswa_samel_bwd_reduce,
                                     dim3((unsigned)DSWA_SAMEL_BWD_PARTS(p->head_dim)),
                                     dim3(REDUCE_THREADS), rargs, 0, s));
}
