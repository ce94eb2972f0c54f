/* The strip shape of the fused SAME-L block, probed as a skeleton (docs/PERF.md section 6, "The
 * strip shape: probe"): its loads, its transform's instruction mix and its stores, no softmax and
 * no mma, timed against a same-size copy the way an engine runs it. Not part of the library.
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 -o probe_strip bench/profiling/probe_strip.cu
 *   ./probe_strip OUT.json                 self-check, then the table, JSON to OUT.json
 *   ./probe_strip --one DTYPE L STRIP [op] [bulk [5/SM|6/SM]]
 *                                          one launch of the fused (or op) skeleton (for ncu);
 *                                          bulk: the producer-warp variant (sm_90+, below)
 *
 * Problem: SAME-L, B = 1, H = 24, D = 64, window 17 each side, N = 17 L; x (N, 5 H 64) packed
 * q, k, v, q_diff, k_diff; out (N, H 64).
 *
 * Shape. A block owns a strip of `strip` consecutive 64-query tiles of one head (grid
 * (ceil(tiles / strip), H)) and streams, per tile, the phases Q0 K0 Q1 K1 V (f32: each as two
 * 32-dim halves, "units"), each phase's 64 new rows in two 32-row stages of 128-byte rows through
 * a cp.async ring (16 bytes per copy, swizzled as mma.cuh swizzles). A K-like phase's new rows are
 * the 64 keys [i0 + 17, i0 + 81) that the previous tile did not have; the 34 rows the next tile
 * shares (its halo) are copied, transformed, from the ring into a halo area, so every row is read
 * from DRAM once per block and transformed once. Only the strip's first tile loads its halo.
 * Q and K stages are transformed in place (DyT, then RoPE on dims 0-31 pairing j with j + 16),
 * which is the layout the mma would read. 16-bit: packed math (two elements per instruction,
 * tanh.approx.{f16x2,bf16x2}), sin/cos once per position per block in an angle table (positions
 * mod 128, packed cos/sin pairs) shared by q, k, q_diff and k_diff; f32: fp32 math, sin/cos per
 * rotated pair of each row (no table: f32's halos leave no room for one under 48 KB).
 * The "use" of a phase stands in for the mma: each thread adds one 16-byte chunk of a Q row, or
 * of two window rows of a K-like phase, to a per-row sum that the tile's store writes out.
 * The op skeleton is the same kernel with the transform off, reading q, k (N, 2H, 64) and one
 * shared v (N, H, 64).
 *
 * Second pipeline (sm_90+, strip_bulk): the same stages, ring and use, fed by a producer warp
 * with one 128-byte cp.async.bulk per row and full/empty mbarriers per ring slot, so the four
 * compute warps never wait on a block-wide barrier per stage (the rows named "producer warp,
 * bulk"; skipped with a printed line on sm_80-89).
 *
 * Self-check (every variant, two small sizes): the kernel can dump each phase as it used it
 * (transformed Q rows, whole K/V windows); the dump is compared element by element with a
 * float64 transform of the input, and every output element with the dump's sums in the kernel's
 * order. Every CUDA call is checked. Exit status 1 when any check failed.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)

enum {
    H = 24,
    HD = 64,
    TILE = 64,
    WL = 17,
    HALO = 2 * WL,       /* 34 key rows a tile shares with the next */
    WROWS = TILE + HALO, /* 98 window rows */
    SROWS = 32,          /* rows per stage */
    ROWB = 128,          /* bytes per stage row: one unit (16-bit: a head row, f32: a half) */
    THREADS = 128,
    TABPOS = 128, /* angle table slots: positions mod 128 */
    SMEM_MAX = 48 * 1024
};

struct probe_args {
    const char *src[5]; /* Q0 K0 Q1 K1 V at head 0, bytes */
    long long sn[5];    /* row strides, bytes */
    char *out;
    long long on;
    int n, ntiles, strip, nstage, transform;
    float qa, ka; /* DyT alphas */
    const float *qg, *qb, *kg, *kb, *invf;
    char *dump; /* NULL when timed */
};

/* ---- device helpers ------------------------------------------------------------------------ */
__device__ __forceinline__ void cp16(void *s, const void *g, bool ok) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* wait_group takes an immediate; the ring depth is a run-time variant */
__device__ __forceinline__ void cp_wait(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    }
}

/* mma.cuh's swizzles: 16-byte chunk c of a row with key k sits at c ^ swz(k) */
template <typename T> __device__ __forceinline__ int swz(int k) { return ((k & 1) << 2) | ((k >> 1) & 3); }
template <> __device__ __forceinline__ int swz<float>(int k) { return (k & 6) ^ ((k & 1) << 2); }

__device__ __forceinline__ float f_lo(uint32_t w, __half) { return __half2float(__ushort_as_half((unsigned short)w)); }
__device__ __forceinline__ float f_hi(uint32_t w, __half) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }
__device__ __forceinline__ float f_lo(uint32_t w, __nv_bfloat16) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float f_hi(uint32_t w, __nv_bfloat16) { return __uint_as_float(w & 0xffff0000u); }

template <typename T> __device__ __forceinline__ uint32_t pk2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pk2<float>(float lo, float) { return __float_as_uint(lo); } /* unused: f32 has no table */
template <> __device__ __forceinline__ uint32_t pk2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}
template <> __device__ __forceinline__ uint32_t pk2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&h;
}

/* packed 16-bit arithmetic on 32-bit words */
template <typename T> struct p2;
template <> struct p2<__half> {
    typedef __half2 v;
};
template <> struct p2<__nv_bfloat16> {
    typedef __nv_bfloat162 v;
};
template <typename T> __device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
    typedef typename p2<T>::v V;
    V r = __hmul2(*(V *)&a, *(V *)&b);
    return *(uint32_t *)&r;
}
template <typename T> __device__ __forceinline__ uint32_t fma2(uint32_t a, uint32_t b, uint32_t c) {
    typedef typename p2<T>::v V;
    V r = __hfma2(*(V *)&a, *(V *)&b, *(V *)&c);
    return *(uint32_t *)&r;
}
template <typename T> __device__ __forceinline__ uint32_t neg2(uint32_t a) { return a ^ 0x80008000u; }
template <typename T> __device__ __forceinline__ uint32_t tanh2(uint32_t a);
template <> __device__ __forceinline__ uint32_t tanh2<__half>(uint32_t a) { /* sm_75+ */
    uint32_t r;
    asm("tanh.approx.f16x2 %0, %1;" : "=r"(r) : "r"(a));
    return r;
}
template <> __device__ __forceinline__ uint32_t tanh2<__nv_bfloat16>(uint32_t a) {
#if __CUDA_ARCH__ >= 900 /* the bf16x2 form needs sm_90 (ptxas rejects it for sm_80) */
    uint32_t r;
    asm("tanh.approx.bf16x2 %0, %1;" : "=r"(r) : "r"(a));
    return r;
#else
    float lo, hi;
    asm("tanh.approx.f32 %0, %1;" : "=f"(lo) : "f"(__uint_as_float(a << 16)));
    asm("tanh.approx.f32 %0, %1;" : "=f"(hi) : "f"(__uint_as_float(a & 0xffff0000u)));
    return pk2<__nv_bfloat16>(lo, hi);
#endif
}
__device__ __forceinline__ float tanh1(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
/* sin and cos of a fp32 angle, reduced to [-pi, pi] first (samel.cuh's fast branch; exact enough
   for |angle| < 2^17, which covers every position here) */
__device__ __forceinline__ void sincos_acc(float a, float *s, float *c) {
    const float k = rintf(a * 0.159154943091895336f);
    const float r = fmaf(k, 1.74845553e-7f, fmaf(-k, 6.28318548202514648f, a));
    *s = __sinf(r);
    *c = __cosf(r);
}

/* Block-shared parameters (static shared memory, beside the dynamic ring/halo/table). */
struct probe_smem {
    const char *src[5];
    long long sn[5];
    float g[2][HD], b[2][HD];    /* [0] q_norm, [1] k_norm */
    uint32_t g2[2][HD / 2], b2[2][HD / 2]; /* the same packed (16-bit) */
    float invf[16];
};

/* DyT + RoPE of this thread's quarter of one row, 16-bit, packed (two elements per instruction).
   sub picks the quarter: rotated dims 4 sub .. 4 sub + 3 with their partners 16 + 4 sub .., and
   unrotated dims 32 + 8 sub .. + 7, so the four threads of a row do the same work (no divergence).
   tab: this position's 16 table words, cos/sin pairs of frequencies (2m, 2m + 1) at 2m, 2m + 1. */
template <typename T, bool SWZ = true>
__device__ __forceinline__ void xform16(uint4 *row, int key, int sub, int norm, uint32_t alpha2,
                                        const probe_smem &sm, const uint32_t *tab) {
    const int sw = SWZ ? swz<T>(key) : 0; /* SWZ false: the bulk variant's unswizzled rows */
    uint2 *xp = (uint2 *)&row[(sub >> 1) ^ sw] + (sub & 1);
    uint2 *yp = (uint2 *)&row[(2 + (sub >> 1)) ^ sw] + (sub & 1);
    uint4 *zp = &row[(4 + sub) ^ sw];
    uint2 x = *xp, y = *yp;
    uint4 z = *zp;
    const uint2 gx = *(const uint2 *)&sm.g2[norm][2 * sub], bx = *(const uint2 *)&sm.b2[norm][2 * sub];
    const uint2 gy = *(const uint2 *)&sm.g2[norm][8 + 2 * sub], by = *(const uint2 *)&sm.b2[norm][8 + 2 * sub];
    const uint4 gz = *(const uint4 *)&sm.g2[norm][16 + 4 * sub], bz = *(const uint4 *)&sm.b2[norm][16 + 4 * sub];
    const uint4 cs = *(const uint4 *)(tab + 4 * sub); /* cos m0, sin m0, cos m1, sin m1; m0 = 2 sub */
    /* DyT: gamma tanh(alpha x) + beta; the FMA rounds to T as the reference rounds DyT's result */
    x.x = fma2<T>(gx.x, tanh2<T>(mul2<T>(alpha2, x.x)), bx.x);
    x.y = fma2<T>(gx.y, tanh2<T>(mul2<T>(alpha2, x.y)), bx.y);
    y.x = fma2<T>(gy.x, tanh2<T>(mul2<T>(alpha2, y.x)), by.x);
    y.y = fma2<T>(gy.y, tanh2<T>(mul2<T>(alpha2, y.y)), by.y);
    z.x = fma2<T>(gz.x, tanh2<T>(mul2<T>(alpha2, z.x)), bz.x);
    z.y = fma2<T>(gz.y, tanh2<T>(mul2<T>(alpha2, z.y)), bz.y);
    z.z = fma2<T>(gz.z, tanh2<T>(mul2<T>(alpha2, z.z)), bz.z);
    z.w = fma2<T>(gz.w, tanh2<T>(mul2<T>(alpha2, z.w)), bz.w);
    /* RoPE: (x, y) -> (x c - y s, y c + x s) */
    uint32_t nx, ny;
    nx = fma2<T>(x.x, cs.x, neg2<T>(mul2<T>(y.x, cs.y)));
    ny = fma2<T>(y.x, cs.x, mul2<T>(x.x, cs.y));
    x.x = nx;
    y.x = ny;
    nx = fma2<T>(x.y, cs.z, neg2<T>(mul2<T>(y.y, cs.w)));
    ny = fma2<T>(y.y, cs.z, mul2<T>(x.y, cs.w));
    x.y = nx;
    y.y = ny;
    *xp = x;
    *yp = y;
    *zp = z;
}

/* The same for f32, one unit (half row of 32 dims, 8 chunks of 4): unit 0 is dims 0-31, all
   rotated: chunk sub with chunk sub + 4 (dims 4 sub.. with 16 + 4 sub..); unit 1 is dims 32-63,
   DyT only: chunks 2 sub and 2 sub + 1. sin/cos per rotated pair (no table for f32). */
template <bool SWZ = true>
__device__ __forceinline__ void xform32(uint4 *row, int key, int sub, int norm, int unit, float alpha,
                                        float pos, const probe_smem &sm) {
    const int sw = SWZ ? swz<float>(key) : 0;
    if (unit == 0) {
        float4 *xp = (float4 *)&row[sub ^ sw], *yp = (float4 *)&row[(sub + 4) ^ sw];
        float4 x = *xp, y = *yp;
        const float4 gx = *(const float4 *)&sm.g[norm][4 * sub], bx = *(const float4 *)&sm.b[norm][4 * sub];
        const float4 gy = *(const float4 *)&sm.g[norm][16 + 4 * sub], by = *(const float4 *)&sm.b[norm][16 + 4 * sub];
        float xv[4] = {x.x, x.y, x.z, x.w}, yv[4] = {y.x, y.y, y.z, y.w};
        const float gxv[4] = {gx.x, gx.y, gx.z, gx.w}, bxv[4] = {bx.x, bx.y, bx.z, bx.w};
        const float gyv[4] = {gy.x, gy.y, gy.z, gy.w}, byv[4] = {by.x, by.y, by.z, by.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float a = fmaf(gxv[e], tanh1(alpha * xv[e]), bxv[e]);
            const float b = fmaf(gyv[e], tanh1(alpha * yv[e]), byv[e]);
            float s, c;
            sincos_acc(pos * sm.invf[4 * sub + e], &s, &c);
            xv[e] = fmaf(a, c, -b * s);
            yv[e] = fmaf(b, c, a * s);
        }
        *xp = make_float4(xv[0], xv[1], xv[2], xv[3]);
        *yp = make_float4(yv[0], yv[1], yv[2], yv[3]);
    } else {
#pragma unroll
        for (int q = 0; q < 2; q++) {
            const int c = 2 * sub + q, d = 32 + 4 * c;
            float4 *p = (float4 *)&row[c ^ sw];
            float4 v = *p;
            const float4 g = *(const float4 *)&sm.g[norm][d], b = *(const float4 *)&sm.b[norm][d];
            v.x = fmaf(g.x, tanh1(alpha * v.x), b.x);
            v.y = fmaf(g.y, tanh1(alpha * v.y), b.y);
            v.z = fmaf(g.z, tanh1(alpha * v.z), b.z);
            v.w = fmaf(g.w, tanh1(alpha * v.w), b.w);
            *p = v;
        }
    }
}

/* The sum of a chunk's elements, in element order (the host repeats it bit for bit). */
template <typename T> __device__ __forceinline__ float chunk_sum(uint4 u, float acc) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (sizeof(T) == 4) {
            acc += __uint_as_float(w[i]);
        } else {
            acc += f_lo(w[i], T());
            acc += f_hi(w[i], T());
        }
    }
    return acc;
}

/* Unit un of a tile (phase order Q0 K0 Q1 K1 V, units inner): its tensor and half. */
template <int U> struct unit_of {
    int ti, u;
    __device__ __forceinline__ unit_of(int un) : ti(un / U), u(un % U) {}
    __device__ __forceinline__ bool q() const { return ti == 0 || ti == 2; }
    __device__ __forceinline__ bool klike() const { return (ti & 1) || ti == 4; }
    __device__ __forceinline__ int xu() const { return (ti >> 1) * U + u; } /* halo index of K0, K1, V */
};

template <typename T>
__global__ void __launch_bounds__(THREADS, 5) strip_probe(const probe_args a) {
    constexpr int U = sizeof(T) / 2;   /* 128-byte units per head row */
    constexpr int SPT = 5 * U * 2;     /* stages per tile */
    constexpr int DROWS = 2 * U * TILE + 3 * U * WROWS; /* dump rows per tile */
    constexpr bool TAB = sizeof(T) == 2;
    extern __shared__ __align__(128) uint4 dyn[];
    __shared__ __align__(16) probe_smem sm;
    const int ns = a.nstage;
    uint4(*ring)[SROWS][8] = (uint4(*)[SROWS][8])dyn;
    uint4(*halo)[HALO][8] = (uint4(*)[HALO][8])(dyn + ns * SROWS * 8);
    uint32_t *tab = (uint32_t *)(dyn + ns * SROWS * 8 + 3 * U * HALO * 8);
    const int t = threadIdx.x, h = blockIdx.y, n = a.n;
    const int tile0 = blockIdx.x * a.strip;
    const int ntile = min(a.strip, a.ntiles - tile0);
    const int total = ntile * SPT;

    /* parameters into shared memory: constant indices only (a run-time index into the parameter
       struct would copy it to local memory) */
#pragma unroll
    for (int i = 0; i < 5; i++)
        if (t == i) {
            sm.src[i] = a.src[i] + (long long)h * U * ROWB;
            sm.sn[i] = a.sn[i];
        }
    if (t < HD) {
        sm.g[0][t] = a.qg[t];
        sm.b[0][t] = a.qb[t];
        sm.g[1][t] = a.kg[t];
        sm.b[1][t] = a.kb[t];
    }
    if constexpr (TAB)
        if (t < HD / 2) {
        sm.g2[0][t] = pk2<T>(a.qg[2 * t], a.qg[2 * t + 1]);
        sm.b2[0][t] = pk2<T>(a.qb[2 * t], a.qb[2 * t + 1]);
        sm.g2[1][t] = pk2<T>(a.kg[2 * t], a.kg[2 * t + 1]);
        sm.b2[1][t] = pk2<T>(a.kb[2 * t], a.kb[2 * t + 1]);
        }
    if (t < 16) sm.invf[t] = a.invf[t];
    __syncthreads();

    const int i00 = tile0 * TILE;
    /* the strip's first halo: 34 rows of K0, K1 and V before the first tile (one group) */
    for (int idx = t; idx < 3 * U * HALO * 8; idx += THREADS) {
        const int c = idx & 7, w = (idx >> 3) % HALO, xu = (idx >> 3) / HALO;
        const int xi = xu / U, u = xu % U, ti = xi == 2 ? 4 : 2 * xi + 1;
        const int pos = i00 - WL + w;
        const bool ok = pos >= 0 && pos < n;
        cp16(&halo[xu][w][c ^ swz<T>(w)], sm.src[ti] + u * ROWB + (long long)(ok ? pos : 0) * sm.sn[ti] + c * 16, ok);
    }
    cp_commit();
    /* stage G: 32 rows x 8 chunks, two per thread. A K-like stage's row r is window row
       34 + 32 part + r, so its swizzle key is r + 2 (the key is the window row mod 8) */
    auto issue = [&](int tl, int w, int slot) {
        const unit_of<U> un(w >> 1);
        const int part = w & 1, kl = un.klike();
        const int p0 = (tile0 + tl) * TILE + (kl ? WL : 0) + SROWS * part;
        const char *base = sm.src[un.ti] + un.u * ROWB;
        const long long sn = sm.sn[un.ti];
        uint4(*st)[8] = ring[slot];
#pragma unroll
        for (int it = 0; it < 2; it++) {
            const int idx = t + THREADS * it, r = idx >> 3, c = idx & 7, pos = p0 + r;
            const bool ok = pos < n;
            cp16(&st[r][c ^ swz<T>(kl ? r + 2 : r)], base + (long long)(ok ? pos : 0) * sn + c * 16, ok);
        }
    };
    for (int G = 0; G < ns - 3; G++) { /* ns - 3 < SPT: all in the first tile */
        if (G < total) issue(0, G, G);
        cp_commit();
    }
    /* 16-bit: cos/sin of positions [i00 - 17, i00 + 81), packed pairs, slot = position mod 128 */
    auto table_fill = [&](int lo, int hi) {
        for (int idx = t; idx < (hi - lo) * 8; idx += THREADS) {
            const int pos = lo + (idx >> 3), m = idx & 7;
            float s0, c0, s1, c1;
            sincos_acc((float)pos * sm.invf[2 * m], &s0, &c0);
            sincos_acc((float)pos * sm.invf[2 * m + 1], &s1, &c1);
            *(uint2 *)&tab[(pos & (TABPOS - 1)) * 16 + 2 * m] = make_uint2(pk2<T>(c0, c1), pk2<T>(s0, s1));
        }
    };
    if constexpr (TAB)
        if (a.transform) table_fill(i00 - WL, i00 + TILE + WL);

    const int ri = t & (TILE - 1), side = t >> 6; /* this thread's output row and half */
    const int xr = t >> 2, sub = t & 3;           /* this thread's transform row and quarter */
    float acc = 0.f;
    /* step counters kept incrementally (no run-time division per step): slot of stage G and of
       the two before it, G's tile and step in the tile, and the same for the stage issued at G */
    int cur = 0, p1 = ns - 1, p2 = ns - 2, tl = 0, w = 0, itl = 0, iw = ns - 3;
    for (int G = 0; G < total; G++) {
        cp_wait(ns - 4);
        __syncthreads(); /* stage G landed for all; step G - 1 done by all */
        const int part = w & 1;
        const unit_of<U> un(w >> 1);
        const int i0 = (tile0 + tl) * TILE;
        /* the K-like unit used at step G - 1: its new rows 30..63 (stages G - 2 and G - 1) become the
           next tile's halo; same swizzle keys, so chunks copy as they are */
        if (G >= 2) {
            const int wp = w ? w - 1 : SPT - 1, tlp = w ? tl : tl - 1;
            const unit_of<U> up(wp >> 1);
            if ((wp & 1) && up.klike() && tlp + 1 < ntile) {
                for (int idx = t; idx < HALO * 8; idx += THREADS) {
                    const int hw = idx >> 3, c = idx & 7, q = 30 + hw;
                    halo[up.xu()][hw][c] = ring[q >> 5 ? p1 : p2][q & 31][c];
                }
            }
        }
        /* refill the slot of stage G - 3: its last readers (steps G - 3 .. G - 1) are done */
        if (G + ns - 3 < total) issue(itl, iw, cur >= 3 ? cur - 3 : cur + ns - 3);
        cp_commit();
        if constexpr (TAB) /* next tile's new positions, while no transform reads the table */
            if (a.transform && un.ti == 4 && part == 0 && tl + 1 < ntile) table_fill(i0 + TILE + WL, i0 + 2 * TILE + WL);

        if (a.transform && un.ti != 4) {
            const int norm = un.q() ? 0 : 1;
            const int pos = i0 + (un.q() ? 0 : WL) + SROWS * part + xr;
            const int key = un.q() ? xr : xr + 2;
            if constexpr (TAB) {
                const uint32_t alpha2 = pk2<T>(norm ? a.ka : a.qa, norm ? a.ka : a.qa);
                xform16<T>(ring[cur][xr], key, sub, norm, alpha2, sm, tab + (pos & (TABPOS - 1)) * 16);
                if (G == 0) /* the first halo of K0 and K1 */
                    for (int idx = t; idx < 2 * U * HALO * 4; idx += THREADS) {
                        const int hw = (idx >> 2) % HALO, xu = (idx >> 2) / HALO, p = i0 - WL + hw;
                        xform16<T>(halo[xu][hw], hw, idx & 3, 1, pk2<T>(a.ka, a.ka), sm, tab + (p & (TABPOS - 1)) * 16);
                    }
            } else {
                xform32(ring[cur][xr], key, sub, norm, un.u, norm ? a.ka : a.qa, (float)pos, sm);
                if (G == 0)
                    for (int idx = t; idx < 2 * U * HALO * 4; idx += THREADS) {
                        const int hw = (idx >> 2) % HALO, xu = (idx >> 2) / HALO;
                        xform32(halo[xu][hw], hw, idx & 3, 1, xu % U, a.ka, (float)(i0 - WL + hw), sm);
                    }
            }
            __syncthreads(); /* transformed rows visible */
        }

        /* the use, standing in for the mma: one chunk per thread, into its row's sum */
        const int tg = tile0 + tl;
        if (un.q()) {
            if ((ri >> 5) == part) {
                const int c = (ri + side) & 7;
                acc = chunk_sum<T>(ring[cur][ri & 31][c ^ swz<T>(ri & 7)], acc);
            }
            if (a.dump) {
                for (int idx = t; idx < SROWS * 8; idx += THREADS) {
                    const int r = idx >> 3, c = idx & 7, qi = SROWS * part + r;
                    const long long row = (long long)(h * a.ntiles + tg) * DROWS + ((un.ti >> 1) * U + un.u) * TILE + qi;
                    ((uint4 *)(a.dump + row * ROWB))[c] = ring[cur][r][c ^ swz<T>(r)];
                }
            }
        } else if (part == 1) { /* the K-like window is complete: halo + stages G - 1, G */
            const int xu = un.xu();
            auto wrow = [&](int wv) -> const uint4 * {
                if (wv < HALO) return halo[xu][wv];
                const int q = wv - HALO;
                return ring[q >> 5 ? cur : p1][q & 31];
            };
            const int wv = ri + HALO * side, c = (ri + side + 3) & 7;
            acc = chunk_sum<T>(wrow(wv)[c ^ swz<T>(wv & 7)], acc);
            if (a.dump) {
                for (int idx = t; idx < WROWS * 8; idx += THREADS) {
                    const int r = idx >> 3, cc = idx & 7;
                    const long long row = (long long)(h * a.ntiles + tg) * DROWS + 2 * U * TILE + xu * WROWS + r;
                    ((uint4 *)(a.dump + row * ROWB))[cc] = wrow(r)[cc ^ swz<T>(r & 7)];
                }
            }
        }
        if (w == SPT - 1) { /* tile done: this thread's half row of out */
            const int P = i0 + ri;
            if (P < n) {
                uint4 v;
                if constexpr (sizeof(T) == 4) v = make_uint4(__float_as_uint(acc), __float_as_uint(acc), __float_as_uint(acc), __float_as_uint(acc));
                else {
                    const uint32_t x2 = pk2<T>(acc, acc);
                    v = make_uint4(x2, x2, x2, x2);
                }
                uint4 *o = (uint4 *)(a.out + P * a.on + (long long)h * U * ROWB + side * U * 64);
#pragma unroll
                for (int i = 0; i < 4 * U; i++) o[i] = v;
            }
            acc = 0.f;
        }
        p2 = p1;
        p1 = cur;
        cur = cur + 1 == ns ? 0 : cur + 1;
        if (++w == SPT) w = 0, tl++;
        if (++iw == SPT) iw = 0, itl++;
    }
}

/* ---- the second pipeline: a producer warp, bulk copies, mbarriers (sm_90+) ------------------
   Block: 4 consumer warps (threads 0-127, the same roles as strip_probe's 128 threads) and one
   producer warp (threads 128-159). The producer streams the same stages in the same order into
   the same ring, one 128-byte cp.async.bulk per row (lane r copies row r of a 32-row stage; a
   head's rows are strided by the packed row stride, so a stage is 32 separate copies), each
   completing on the slot's `full` mbarrier (32 arrivals, one per lane, plus the bytes). Rows past
   the sequence are zeroed by the lane with st.shared before its plain arrival. Consumers wait on
   `full` with the stage's parity and release a slot with one arrival per warp on `empty` (count
   4) after their last read: a Q stage after its step, a K-like unit's two stages after its part-1
   step (which also copies the next tile's halo from them: slots are held at most one step past
   their own, not two as in strip_probe). The producer waits on `empty` before reusing a slot.
   Consumer warps synchronise among themselves (named barrier 1, 128 threads; never the
   producer) only where data crosses warps: after an in-place transform (fused) and, when a next
   tile exists, between a K-like window's use and the halo copy that overwrites it. The op
   skeleton at strip 1 has no consumer barrier at all.
   Rows are unswizzled (a bulk copy writes 128 contiguous bytes). The use and the halo copy read
   a diagonal (row r, chunk (r + c0) & 7) or whole rows, conflict-free without a swizzle; the
   transform's loads and stores (4 threads a row, the same chunk columns in every row) are 4-way
   (64-bit) and 2-way (128-bit) bank conflicts (docs/PERF.md section 6, "Next probe"). */
enum { BTHREADS = THREADS + 32, MAXST = 12 };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mb_init(uint64_t *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((unsigned)__cvta_generic_to_shared(b)) : "memory");
}
__device__ __forceinline__ void mb_arrive_tx(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_wait(uint64_t *b, unsigned parity) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(b);
    unsigned ok;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok) : "r"(a), "r"(parity) : "memory");
    } while (!ok);
}
/* one 1-D bulk copy global -> shared, completing `bytes` on the mbarrier */
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, unsigned bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(b)) : "memory");
}
__device__ __forceinline__ void fence_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void consumers_sync(void) { asm volatile("bar.sync 1, 128;" ::: "memory"); }
#endif

template <typename T, bool TR, int MINB>
__global__ void __launch_bounds__(BTHREADS, MINB) strip_bulk(const probe_args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int U = sizeof(T) / 2;
    constexpr int SPT = 5 * U * 2;
    constexpr int DROWS = 2 * U * TILE + 3 * U * WROWS;
    constexpr bool TAB = TR && sizeof(T) == 2;
    extern __shared__ __align__(128) uint4 dyn[];
    __shared__ __align__(16) probe_smem sm;
    __shared__ __align__(8) uint64_t full[MAXST], empty[MAXST], halo_bar;
    const int ns = a.nstage;
    uint4(*ring)[SROWS][8] = (uint4(*)[SROWS][8])dyn;
    uint4(*halo)[HALO][8] = (uint4(*)[HALO][8])(dyn + ns * SROWS * 8);
    uint32_t *tab = (uint32_t *)(dyn + ns * SROWS * 8 + 3 * U * HALO * 8);
    const int t = threadIdx.x, h = blockIdx.y, n = a.n;
    const int tile0 = blockIdx.x * a.strip;
    const int ntile = min(a.strip, a.ntiles - tile0);
    const int total = ntile * SPT;
#pragma unroll
    for (int i = 0; i < 5; i++)
        if (t == i) {
            sm.src[i] = a.src[i] + (long long)h * U * ROWB;
            sm.sn[i] = a.sn[i];
        }
    if (t < HD) {
        sm.g[0][t] = a.qg[t];
        sm.b[0][t] = a.qb[t];
        sm.g[1][t] = a.kg[t];
        sm.b[1][t] = a.kb[t];
    }
    if constexpr (TAB)
        if (t < HD / 2) {
            sm.g2[0][t] = pk2<T>(a.qg[2 * t], a.qg[2 * t + 1]);
            sm.b2[0][t] = pk2<T>(a.qb[2 * t], a.qb[2 * t + 1]);
            sm.g2[1][t] = pk2<T>(a.kg[2 * t], a.kg[2 * t + 1]);
            sm.b2[1][t] = pk2<T>(a.kb[2 * t], a.kb[2 * t + 1]);
        }
    if (t < 16) sm.invf[t] = a.invf[t];
    if (t == 0) {
        for (int i = 0; i < ns; i++) {
            mb_init(&full[i], 32);
            mb_init(&empty[i], 4);
        }
        mb_init(&halo_bar, 32);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads(); /* the only block-wide barrier */
    const int i00 = tile0 * TILE;

    if (t >= THREADS) { /* ---- the producer warp ---- */
        const int lane = t & 31;
        /* the strip's first halo: 34 rows of K0, K1 and V */
        unsigned hb = 0;
        for (int r = lane; r < 3 * U * HALO; r += 32) {
            const int w = r % HALO, pos = i00 - WL + w;
            if (pos >= 0 && pos < n) hb += ROWB;
            else
                for (int c = 0; c < 8; c++) halo[r / HALO][w][c] = make_uint4(0, 0, 0, 0);
        }
        if (hb) mb_arrive_tx(&halo_bar, hb);
        else mb_arrive(&halo_bar);
        for (int r = lane; r < 3 * U * HALO; r += 32) {
            const int xu = r / HALO, w = r % HALO, xi = xu / U, u = xu % U, ti = xi == 2 ? 4 : 2 * xi + 1;
            const int pos = i00 - WL + w;
            if (pos >= 0 && pos < n) bulk_g2s(halo[xu][w], sm.src[ti] + u * ROWB + (long long)pos * sm.sn[ti], ROWB, &halo_bar);
        }
        int slot = 0, ph = 0, tl = 0, w = 0;
        for (int S = 0; S < total; S++) {
            if (S >= ns) mb_wait(&empty[slot], ph ^ 1);
            const unit_of<U> un(w >> 1);
            const int pos = (tile0 + tl) * TILE + (un.klike() ? WL : 0) + SROWS * (w & 1) + lane;
            if (pos < n) {
                mb_arrive_tx(&full[slot], ROWB);
                bulk_g2s(ring[slot][lane], sm.src[un.ti] + un.u * ROWB + (long long)pos * sm.sn[un.ti], ROWB, &full[slot]);
            } else {
#pragma unroll
                for (int c = 0; c < 8; c++) ring[slot][lane][c] = make_uint4(0, 0, 0, 0);
                fence_async_smem(); /* before a later bulk copy overwrites these generic stores */
                mb_arrive(&full[slot]);
            }
            if (++slot == ns) slot = 0, ph ^= 1;
            if (++w == SPT) w = 0, tl++;
        }
        return;
    }

    /* ---- the consumer warps ---- */
    auto table_fill = [&](int lo, int hi) {
        for (int idx = t; idx < (hi - lo) * 8; idx += THREADS) {
            const int pos = lo + (idx >> 3), m = idx & 7;
            float s0, c0, s1, c1;
            sincos_acc((float)pos * sm.invf[2 * m], &s0, &c0);
            sincos_acc((float)pos * sm.invf[2 * m + 1], &s1, &c1);
            *(uint2 *)&tab[(pos & (TABPOS - 1)) * 16 + 2 * m] = make_uint2(pk2<T>(c0, c1), pk2<T>(s0, s1));
        }
    };
    if constexpr (TAB) {
        table_fill(i00 - WL, i00 + TILE + WL);
        consumers_sync(); /* the table before the first transform */
    }
    mb_wait(&halo_bar, 0);

    const int ri = t & (TILE - 1), side = t >> 6;
    const int xr = t >> 2, sub = t & 3;
    const int lane = t & 31;
    float acc = 0.f;
    int cur = 0, p1 = ns - 1, cph = 0, tl = 0, w = 0;
    for (int G = 0; G < total; G++) {
        mb_wait(&full[cur], cph);
        const int part = w & 1;
        const unit_of<U> un(w >> 1);
        const int i0 = (tile0 + tl) * TILE;
        if constexpr (TAB) /* next tile's new positions: the last transform that read the table
                              (K1 part 1) is behind its barrier; the V part-1 barrier comes next */
            if (un.ti == 4 && part == 0 && tl + 1 < ntile) table_fill(i0 + TILE + WL, i0 + 2 * TILE + WL);

        if constexpr (TR)
            if (un.ti != 4) {
                const int norm = un.q() ? 0 : 1;
                const int pos = i0 + (un.q() ? 0 : WL) + SROWS * part + xr;
                if constexpr (TAB) {
                    const uint32_t alpha2 = pk2<T>(norm ? a.ka : a.qa, norm ? a.ka : a.qa);
                    xform16<T, false>(ring[cur][xr], 0, sub, norm, alpha2, sm, tab + (pos & (TABPOS - 1)) * 16);
                    if (G == 0)
                        for (int idx = t; idx < 2 * U * HALO * 4; idx += THREADS) {
                            const int hw = (idx >> 2) % HALO, xu = (idx >> 2) / HALO, p = i0 - WL + hw;
                            xform16<T, false>(halo[xu][hw], 0, idx & 3, 1, pk2<T>(a.ka, a.ka), sm, tab + (p & (TABPOS - 1)) * 16);
                        }
                } else {
                    xform32<false>(ring[cur][xr], 0, sub, norm, un.u, norm ? a.ka : a.qa, (float)pos, sm);
                    if (G == 0)
                        for (int idx = t; idx < 2 * U * HALO * 4; idx += THREADS) {
                            const int hw = (idx >> 2) % HALO, xu = (idx >> 2) / HALO;
                            xform32<false>(halo[xu][hw], 0, idx & 3, 1, xu % U, a.ka, (float)(i0 - WL + hw), sm);
                        }
                }
                consumers_sync(); /* transformed rows visible */
            }

        const int tg = tile0 + tl;
        if (un.q()) {
            if ((ri >> 5) == part) acc = chunk_sum<T>(ring[cur][ri & 31][(ri + side) & 7], acc);
            if (a.dump)
                for (int idx = t; idx < SROWS * 8; idx += THREADS) {
                    const int r = idx >> 3, c = idx & 7, qi = SROWS * part + r;
                    const long long row = (long long)(h * a.ntiles + tg) * DROWS + ((un.ti >> 1) * U + un.u) * TILE + qi;
                    ((uint4 *)(a.dump + row * ROWB))[c] = ring[cur][r][c];
                }
            if constexpr (TR) fence_async_smem(); /* the transform's generic stores before the slot's next bulk copy */
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[cur]);
        } else if (part == 1) { /* the K-like window: halo + stages G - 1 (slot p1), G */
            const int xu = un.xu();
            auto wrow = [&](int wv) -> const uint4 * {
                if (wv < HALO) return halo[xu][wv];
                const int q = wv - HALO;
                return ring[q >> 5 ? cur : p1][q & 31];
            };
            const int wv = ri + HALO * side;
            acc = chunk_sum<T>(wrow(wv)[(ri + side + 3) & 7], acc);
            if (a.dump)
                for (int idx = t; idx < WROWS * 8; idx += THREADS) {
                    const int r = idx >> 3, cc = idx & 7;
                    const long long row = (long long)(h * a.ntiles + tg) * DROWS + 2 * U * TILE + xu * WROWS + r;
                    ((uint4 *)(a.dump + row * ROWB))[cc] = wrow(r)[cc];
                }
            if (tl + 1 < ntile) {
                consumers_sync(); /* every read of this halo done */
                for (int idx = t; idx < HALO * 8; idx += THREADS) {
                    const int hw = idx >> 3, c = idx & 7, q = 30 + hw;
                    halo[xu][hw][c] = ring[q >> 5 ? cur : p1][q & 31][c];
                }
                /* visible to the next tile's use of xu behind the next K-like unit's barrier
                   above; the tile's last unit (V) has none after it in the op skeleton when the
                   next tile is the strip's last, so it waits here */
                if (w == SPT - 1) consumers_sync();
            }
            if constexpr (TR) fence_async_smem();
            __syncwarp();
            if (lane == 0) {
                mb_arrive(&empty[p1]);
                mb_arrive(&empty[cur]);
            }
        }
        if (w == SPT - 1) {
            const int P = i0 + ri;
            if (P < n) {
                uint4 v;
                if constexpr (sizeof(T) == 4) v = make_uint4(__float_as_uint(acc), __float_as_uint(acc), __float_as_uint(acc), __float_as_uint(acc));
                else {
                    const uint32_t x2 = pk2<T>(acc, acc);
                    v = make_uint4(x2, x2, x2, x2);
                }
                uint4 *o = (uint4 *)(a.out + P * a.on + (long long)h * U * ROWB + side * U * 64);
#pragma unroll
                for (int i = 0; i < 4 * U; i++) o[i] = v;
            }
            acc = 0.f;
        }
        p1 = cur;
        if (++cur == ns) cur = 0, cph ^= 1;
        if (++w == SPT) w = 0, tl++;
    }
#endif
}

/* ---- copies ---------------------------------------------------------------------------------- */
/* one pass, 4 vectors per thread, loads before stores */
__global__ void copy_pass4(const uint4 *__restrict__ s, uint4 *__restrict__ d, long long n16) {
    const long long i = ((long long)blockIdx.x * blockDim.x) * 4 + threadIdx.x;
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
        if (i + u * blockDim.x < n16) v[u] = s[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < 4; u++)
        if (i + u * blockDim.x < n16) d[i + u * blockDim.x] = v[u];
}
/* one wave striding, 8 vectors in flight per thread */
__global__ void copy_wave8(const uint4 *__restrict__ s, uint4 *__restrict__ d, long long n16) {
    const long long T = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * T < n16; i += 8 * T) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = s[i + u * T];
#pragma unroll
        for (int u = 0; u < 8; u++) d[i + u * T] = v[u];
    }
    for (; i < n16; i += T) d[i] = s[i];
}

template <typename T> __global__ void fill_rand(T *p, long long n, uint32_t seed) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed * 0x9e3779b9u;
        x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
        const float f = (float)(x >> 8) * (4.0f / 16777216.0f) - 2.0f; /* [-2, 2) */
        if constexpr (sizeof(T) == 4) p[i] = f;
        else if constexpr (std::is_same<T, __half>::value) p[i] = __float2half_rn(f);
        else p[i] = __float2bfloat16_rn(f);
    }
}

/* ---- host ------------------------------------------------------------------------------------ */
static int g_sms;

struct bufs {
    char *x, *q, *k, *v, *out, *ca, *cb, *dump;
    float *norm; /* qg qb kg kb (64 each), invf (16) */
    size_t dump_bytes;
};

/* what one timed call runs */
struct job {
    int kind; /* 0 probe kernel, 1 cudaMemcpyAsync, 2 copy_pass4, 3 copy_wave8 */
    int es;
    int bulk, minb; /* kind 0: strip_bulk<T, transform, minb> (sm_90+) instead of strip_probe<T> */
    probe_args a;
    dim3 grid;
    size_t smem;
    const void *src;
    void *dst;
    size_t bytes;
};

/* the bulk kernels: fused and op at 5 blocks/SM of launch bounds; the op also at 6 */
static const void *bulk_fn(int es, int tr, int minb) {
    if (minb == 6) return es == 4 ? (const void *)strip_bulk<float, false, 6> : es == 2 ? (const void *)strip_bulk<__nv_bfloat16, false, 6> : (const void *)strip_bulk<__half, false, 6>;
    if (tr) return es == 4 ? (const void *)strip_bulk<float, true, 5> : es == 2 ? (const void *)strip_bulk<__nv_bfloat16, true, 5> : (const void *)strip_bulk<__half, true, 5>;
    return es == 4 ? (const void *)strip_bulk<float, false, 5> : es == 2 ? (const void *)strip_bulk<__nv_bfloat16, false, 5> : (const void *)strip_bulk<__half, false, 5>;
}

static void launch(const job &j, cudaStream_t s) {
    const long long n16 = (long long)(j.bytes / 16);
    switch (j.kind) {
    case 0:
        if (j.bulk) {
            void *args[] = {(void *)&j.a};
            CK(cudaLaunchKernel(bulk_fn(j.es, j.a.transform, j.minb), j.grid, dim3(BTHREADS), args, j.smem, s));
        } else if (j.es == 4) strip_probe<float><<<j.grid, THREADS, j.smem, s>>>(j.a);
        else if (j.es == 2) strip_probe<__nv_bfloat16><<<j.grid, THREADS, j.smem, s>>>(j.a);
        else strip_probe<__half><<<j.grid, THREADS, j.smem, s>>>(j.a);
        break;
    case 1: CK(cudaMemcpyAsync(j.dst, j.src, j.bytes, cudaMemcpyDeviceToDevice, s)); break;
    case 2: copy_pass4<<<(unsigned)((n16 + 1023) / 1024), 256, 0, s>>>((const uint4 *)j.src, (uint4 *)j.dst, n16); break;
    case 3: copy_wave8<<<g_sms * 4, 512, 0, s>>>((const uint4 *)j.src, (uint4 *)j.dst, n16); break;
    }
    CK(cudaGetLastError());
}

struct stats {
    double med, mn, mx;
};
/* As the bench times a row: a graph of 20 back-to-back calls between two event nodes, 3 warm
   replays, then the median of 10 (time / 20 each), with min and max. */
static stats time_graph(const job &j) {
    enum { CALLS = 20, WARM = 3, REPLAYS = 10 };
    cudaStream_t s;
    cudaEvent_t e0, e1;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CK(cudaEventRecordWithFlags(e0, s, cudaEventRecordExternal));
    for (int i = 0; i < CALLS; i++) launch(j, s);
    CK(cudaEventRecordWithFlags(e1, s, cudaEventRecordExternal));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::vector<double> t;
    for (int r = -WARM; r < REPLAYS; r++) {
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t.push_back(ms / CALLS);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(s));
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t.front(), t.back()};
}

static const char *dname(int es) { return es == 4 ? "f32" : es == 2 ? "bf16" : "f16"; }
static int esize(int es) { return es == 4 ? 4 : 2; } /* es: 4 f32, 2 bf16, 3 f16 */

static size_t static_smem(int es) {
    cudaFuncAttributes fa;
    if (es == 4) CK(cudaFuncGetAttributes(&fa, strip_probe<float>));
    else if (es == 2) CK(cudaFuncGetAttributes(&fa, strip_probe<__nv_bfloat16>));
    else CK(cudaFuncGetAttributes(&fa, strip_probe<__half>));
    return fa.sharedSizeBytes;
}
/* dynamic shared memory of a ring of ns stages: ring, halos, 16-bit angle table */
static size_t dyn_smem(int es, int ns, int transform) {
    const int U = esize(es) / 2;
    return (size_t)ns * SROWS * ROWB + (size_t)3 * U * HALO * ROWB + (esize(es) == 2 && transform ? (size_t)TABPOS * 64 : 0);
}
/* the deepest ring under 48 KB (the AOT plugin's limit), or under `cap` bytes in all */
static int max_stages(int es, int transform, size_t cap) {
    const size_t st = static_smem(es);
    int ns = 4;
    while (ns < 9 && st + dyn_smem(es, ns + 1, transform) <= cap) ns++;
    return ns;
}

static size_t static_smem_bulk(int es, int tr, int minb) {
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, bulk_fn(es, tr, minb)));
    return fa.sharedSizeBytes;
}
/* the bulk kernel's deepest ring (3 stages at least: two held by a K-like unit, one in flight) */
static int max_stages_bulk(int es, int tr, int minb, size_t cap) {
    const size_t st = static_smem_bulk(es, tr, minb);
    int ns = 3;
    while (ns < MAXST && st + dyn_smem(es, ns + 1, tr) <= cap) ns++;
    return ns;
}
static int blocks_per_sm_bulk(int es, int tr, int minb, size_t smem) {
    int nb = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, bulk_fn(es, tr, minb), BTHREADS, smem));
    return nb;
}

/* a probe launch of the fused (transform = 1, x packed) or op (transform = 0) skeleton */
static job probe_job(const bufs &b, int es, int n, int strip, int ns, int transform, char *dump, int bulk = 0, int minb = 5) {
    const int E = esize(es);
    job j;
    memset(&j, 0, sizeof j);
    j.kind = 0;
    j.es = es;
    probe_args &a = j.a;
    const long long hd = (long long)HD * E;
    if (transform) { /* x (N, 5 H 64): chunks q k v q_diff k_diff */
        const int order[5] = {0, 1, 3, 4, 2}; /* Q0 K0 Q1 K1 V */
        for (int i = 0; i < 5; i++) {
            a.src[i] = b.x + order[i] * H * hd;
            a.sn[i] = 5 * H * hd;
        }
    } else { /* q, k (N, 2H, 64), v (N, H, 64) shared by both pairs */
        a.src[0] = b.q; a.src[1] = b.k; a.src[2] = b.q + H * hd; a.src[3] = b.k + H * hd; a.src[4] = b.v;
        for (int i = 0; i < 4; i++) a.sn[i] = 2 * H * hd;
        a.sn[4] = H * hd;
    }
    a.out = b.out;
    a.on = H * hd;
    a.n = n;
    a.ntiles = (n + TILE - 1) / TILE;
    a.strip = strip;
    a.nstage = ns;
    a.transform = transform;
    a.qa = 0.9f;
    a.ka = 1.1f;
    a.qg = b.norm; a.qb = b.norm + 64; a.kg = b.norm + 128; a.kb = b.norm + 192; a.invf = b.norm + 256;
    a.dump = dump;
    j.grid = dim3((a.ntiles + strip - 1) / strip, H, 1);
    j.smem = dyn_smem(es, ns, transform);
    j.bulk = bulk;
    j.minb = minb;
    return j;
}

/* ---- the self-check -------------------------------------------------------------------------- */
static float h_bf16(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }
static float h_f16(uint16_t v) {
    const int s = v >> 15, e = (v >> 10) & 31, m = v & 1023;
    float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return s ? -f : f;
}
static uint16_t h_to_bf16(float f) { /* round to nearest even; inputs finite */
    uint32_t u; memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static uint16_t h_to_f16(float f) { /* round to nearest even, via the exact float grid */
    const float a = fabsf(f);
    uint16_t s = f < 0 ? 0x8000 : 0;
    if (a >= 65520.f) return s | 0x7c00;
    int e; frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
    int ex = e - 1 < -14 ? -14 : e - 1; /* the exponent of the f16 result */
    const float q = ldexpf(1.f, ex - 10);
    float r = nearbyintf(a / q) * q; /* default rounding mode: to nearest even */
    if (r == 0.f) return s;
    int e2; frexpf(r, &e2);
    const int be = e2 - 1;
    if (be < -14) return s | (uint16_t)(r / ldexpf(1.f, -24));
    return s | (uint16_t)(((be + 15) << 10) | ((int)(r / ldexpf(1.f, be - 10)) & 1023));
}
static double h_load(const char *p, int es) {
    if (es == 4) { float f; memcpy(&f, p, 4); return f; }
    uint16_t v; memcpy(&v, p, 2);
    return es == 2 ? h_bf16(v) : h_f16(v);
}
static double h_round(double x, int es) {
    if (es == 4) return (float)x;
    return es == 2 ? h_bf16(h_to_bf16((float)x)) : h_f16(h_to_f16((float)x));
}

/* float64 DyT + RoPE of one 64-element row at pos (raw zero row outside the sequence) */
static void ref_row(const char *raw, int es, int pos, int n, double alpha, const float *g, const float *bt,
                    const float *invf, double *y) {
    const int E = esize(es);
    for (int d = 0; d < HD; d++) {
        const double x = pos >= 0 && pos < n ? h_load(raw + (size_t)d * E, es) : 0.0;
        y[d] = h_round(g[d] * tanh(alpha * x) + bt[d], es);
    }
    for (int j = 0; j < 16; j++) {
        const double ang = (float)((float)pos * invf[j]);
        const double c = cos(ang), s = sin(ang), a = y[j], b = y[j + 16];
        y[j] = h_round(a * c - b * s, es);
        y[j + 16] = h_round(b * c + a * s, es);
    }
}

/* one variant at size n on fresh inputs: dump vs float64, out vs the dump's sums. Returns 0 ok. */
static int check_variant(bufs &b, int es, int n, int strip, int ns, int transform, uint32_t seed, double *worst, int bulk = 0, int minb = 5) {
    const char *bname = bulk ? (minb == 6 ? " bulk(6)" : " bulk") : "";
    const int E = esize(es), U = E / 2, ntiles = (n + TILE - 1) / TILE;
    const size_t drows = (size_t)2 * U * TILE + (size_t)3 * U * WROWS;
    const size_t dump_bytes = (size_t)H * ntiles * drows * ROWB;
    if (dump_bytes > b.dump_bytes) { fprintf(stderr, "check: dump buffer too small\n"); return 1; }
    /* fresh random inputs on the host (the reference needs them) */
    const size_t xrow = (size_t)5 * H * HD * E, qrow = (size_t)2 * H * HD * E, vrow = (size_t)H * HD * E;
    std::vector<char> hx(transform ? xrow * n : 0), hq(transform ? 0 : qrow * n), hk(hq.size()), hv(transform ? 0 : vrow * n);
    uint32_t r = seed * 747796405u + 2891336453u;
    auto rnd = [&]() { r ^= r << 13; r ^= r >> 17; r ^= r << 5; return (double)(r >> 8) / 16777216.0; };
    auto fill = [&](std::vector<char> &v) {
        for (size_t i = 0; i < v.size() / E; i++) {
            const float f = (float)(rnd() * 4.0 - 2.0);
            if (E == 4) memcpy(&v[i * 4], &f, 4);
            else { const uint16_t h = es == 2 ? h_to_bf16(f) : h_to_f16(f); memcpy(&v[i * 2], &h, 2); }
        }
    };
    fill(hx); fill(hq); fill(hk); fill(hv);
    std::vector<float> hn(272);
    for (int d = 0; d < 64; d++) {
        hn[d] = (float)(0.5 + rnd()); hn[64 + d] = (float)(0.4 * rnd() - 0.2);
        hn[128 + d] = (float)(0.5 + rnd()); hn[192 + d] = (float)(0.4 * rnd() - 0.2);
    }
    for (int f = 0; f < 16; f++) hn[256 + f] = (float)(1.0 / pow(10000.0, 2.0 * f / 32));
    if (transform) CK(cudaMemcpy(b.x, hx.data(), hx.size(), cudaMemcpyHostToDevice));
    else {
        CK(cudaMemcpy(b.q, hq.data(), hq.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(b.k, hk.data(), hk.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(b.v, hv.data(), hv.size(), cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(b.norm, hn.data(), hn.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(b.out, 0xff, vrow * n)); /* NaN in every dtype: an unwritten element shows */
    CK(cudaMemset(b.dump, 0xff, dump_bytes));
    job j = probe_job(b, es, n, strip, ns, transform, b.dump, bulk, minb);
    launch(j, 0);
    CK(cudaDeviceSynchronize());
    std::vector<char> hd(dump_bytes), ho(vrow * n);
    CK(cudaMemcpy(hd.data(), b.dump, dump_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho.data(), b.out, ho.size(), cudaMemcpyDeviceToHost));

    /* tolerances of the transform against float64: packed bf16 math rounds up to ~4 times per
       element (alpha x, tanh, the FMA, RoPE's product and FMA, the table), f16 the same with 3
       more bits, f32 only tanh.approx's 2^-11 */
    const double atol = es == 2 ? 0.06 : es == 3 ? 0.01 : 3e-3, rtol = es == 2 ? 1.0 / 64 : es == 3 ? 1.0 / 256 : 1e-3;
    const double alpha[2] = {0.9f, 1.1f};
    const int order[5] = {0, 1, 3, 4, 2}; /* Q0 K0 Q1 K1 V as x chunks */
    double werr = 0.0;
    long long bad = 0;
    std::vector<double> y(HD);
    auto raw_row = [&](int ti, int pos, int h) -> const char * {
        if (transform) return &hx[(size_t)pos * xrow + ((size_t)order[ti] * H + h) * HD * E];
        if (ti == 4) return &hv[(size_t)pos * vrow + (size_t)h * HD * E];
        return &(ti & 1 ? hk : hq)[(size_t)pos * qrow + ((size_t)(ti >> 1) * H + h) * HD * E];
    };
    auto dump_at = [&](int h, int tile, size_t row, int e) {
        return h_load(&hd[((size_t)(h * ntiles + tile) * drows + row) * ROWB + (size_t)e * E], es);
    };
    for (int h = 0; h < H; h++)
        for (int tile = 0; tile < ntiles; tile++)
            for (int ti = 0; ti < 5; ti++) {
                const bool kl = (ti & 1) || ti == 4;
                const int rows = kl ? WROWS : TILE;
                for (int rr = 0; rr < rows; rr++) {
                    const int pos = tile * TILE + rr - (kl ? WL : 0);
                    if (transform && ti != 4) {
                        ref_row(pos >= 0 && pos < n ? raw_row(ti, pos, h) : NULL, es, pos, n, alpha[kl],
                                &hn[kl ? 128 : 0], &hn[kl ? 192 : 64], &hn[256], y.data());
                    } else {
                        for (int d = 0; d < HD; d++) y[d] = pos >= 0 && pos < n ? h_load(raw_row(ti, pos, h) + (size_t)d * E, es) : 0.0;
                    }
                    for (int d = 0; d < HD; d++) {
                        const int u = d / (HD / U), e = d % (HD / U);
                        const size_t row = kl ? 2 * U * TILE + ((size_t)(ti >> 1) * U + u) * WROWS + rr : ((size_t)(ti >> 1) * U + u) * TILE + rr;
                        const double g = dump_at(h, tile, row, e);
                        const double tol = transform && ti != 4 ? atol + rtol * fabs(y[d]) : 0.0;
                        const double err = fabs(g - y[d]);
                        if (!(err <= tol)) {
                            if (bad < 5)
                                fprintf(stderr, "  %s n=%d strip=%d ns=%d %s%s: tile %d head %d tensor %d row %d dim %d: got %g want %g\n", dname(es), n, strip, ns,
                                        transform ? "fused" : "op", bname, tile, h, ti, rr, d, g, y[d]);
                            bad++;
                        }
                        if (tol > 0) werr = std::max(werr, err / tol);
                    }
                }
            }
    /* out: each half row is the sum of the dumped chunks, in the kernel's order */
    long long obad = 0;
    for (int h = 0; h < H; h++)
        for (int P = 0; P < n; P++) {
            const int tile = P / TILE, ri = P % TILE;
            for (int side = 0; side < 2; side++) {
                float acc = 0.f;
                for (int ti = 0; ti < 5; ti++) {
                    const bool kl = (ti & 1) || ti == 4;
                    for (int u = 0; u < U; u++) {
                        size_t row;
                        int c;
                        if (kl) { row = 2 * U * TILE + ((size_t)(ti >> 1) * U + u) * WROWS + ri + HALO * side; c = (ri + side + 3) & 7; }
                        else { row = ((size_t)(ti >> 1) * U + u) * TILE + ri; c = (ri + side) & 7; }
                        for (int e = 0; e < 16 / E; e++) acc += (float)dump_at(h, tile, row, c * (16 / E) + e);
                    }
                }
                const double want = h_round(acc, es);
                for (int e = 0; e < HD / 2; e++) {
                    const double g = h_load(&ho[(size_t)P * vrow + ((size_t)h * HD + side * 32 + e) * E], es);
                    if (!(g == want)) {
                        if (obad < 5) fprintf(stderr, "  %s n=%d strip=%d ns=%d %s%s: out pos %d head %d dim %d: got %g want %g\n", dname(es), n, strip, ns,
                                              transform ? "fused" : "op", bname, P, h, side * 32 + e, g, want);
                        obad++;
                    }
                }
            }
        }
    *worst = werr;
    if (bad || obad) fprintf(stderr, "check FAILED: %s n=%d strip=%d ns=%d %s%s: %lld transform errors, %lld output errors\n", dname(es), n,
                             strip, ns, transform ? "fused" : "op", bname, bad, obad);
    return bad || obad;
}

/* ---- main ------------------------------------------------------------------------------------ */
struct row {
    char name[56];
    int es, L, strip, ns, blocks_per_sm;
    double ms, mn, mx, pct_copy, gbs;
};

static void fill_inputs(bufs &b, int es, int n) {
    const long long xe = (long long)n * 5 * H * HD, qe = (long long)n * 2 * H * HD, ve = (long long)n * H * HD;
    const int grid = g_sms * 8;
    if (es == 4) {
        fill_rand<float><<<grid, 256>>>((float *)b.x, xe, 1); fill_rand<float><<<grid, 256>>>((float *)b.q, qe, 2);
        fill_rand<float><<<grid, 256>>>((float *)b.k, qe, 3); fill_rand<float><<<grid, 256>>>((float *)b.v, ve, 4);
        fill_rand<float><<<grid, 256>>>((float *)b.ca, 3 * ve, 5);
    } else if (es == 2) {
        typedef __nv_bfloat16 B;
        fill_rand<B><<<grid, 256>>>((B *)b.x, xe, 1); fill_rand<B><<<grid, 256>>>((B *)b.q, qe, 2);
        fill_rand<B><<<grid, 256>>>((B *)b.k, qe, 3); fill_rand<B><<<grid, 256>>>((B *)b.v, ve, 4);
        fill_rand<B><<<grid, 256>>>((B *)b.ca, 3 * ve, 5);
    } else {
        fill_rand<__half><<<grid, 256>>>((__half *)b.x, xe, 1); fill_rand<__half><<<grid, 256>>>((__half *)b.q, qe, 2);
        fill_rand<__half><<<grid, 256>>>((__half *)b.k, qe, 3); fill_rand<__half><<<grid, 256>>>((__half *)b.v, ve, 4);
        fill_rand<__half><<<grid, 256>>>((__half *)b.ca, 3 * ve, 5);
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}

static int blocks_per_sm(int es, size_t smem) {
    int nb = 0;
    if (es == 4) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, strip_probe<float>, THREADS, smem));
    else if (es == 2) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, strip_probe<__nv_bfloat16>, THREADS, smem));
    else CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, strip_probe<__half>, THREADS, smem));
    return nb;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.json | --one f32|bf16|f16 L STRIP [op] [bulk [5/SM|6/SM]]\n", argv[0]);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    const bool one = !strcmp(argv[1], "--one");
    if (one && argc < 5) { fprintf(stderr, "--one needs DTYPE L STRIP\n"); return 2; }
    const int one_es = one ? (!strcmp(argv[2], "f32") ? 4 : !strcmp(argv[2], "bf16") ? 2 : 3) : 0;
    const int Lmax = one ? atoi(argv[3]) : 4096, Nmax = 17 * Lmax;
    const size_t E = one ? esize(one_es) : 4, hd = HD * E;
    bufs b;
    memset(&b, 0, sizeof b);
    CK(cudaMalloc(&b.x, (size_t)Nmax * 5 * H * hd));
    CK(cudaMalloc(&b.q, (size_t)Nmax * 2 * H * hd));
    CK(cudaMalloc(&b.k, (size_t)Nmax * 2 * H * hd));
    CK(cudaMalloc(&b.v, (size_t)Nmax * H * hd));
    CK(cudaMalloc(&b.out, (size_t)Nmax * H * hd));
    CK(cudaMalloc(&b.ca, (size_t)Nmax * 3 * H * hd));
    CK(cudaMalloc(&b.cb, (size_t)Nmax * 3 * H * hd));
    CK(cudaMalloc(&b.norm, 272 * sizeof(float)));
    b.dump_bytes = (size_t)H * 10 * (2 * 2 * TILE + 3 * 2 * WROWS) * ROWB; /* n <= 640, f32 */
    CK(cudaMalloc(&b.dump, b.dump_bytes));
    {   /* the norms for timing (values do not change the instruction stream) */
        std::vector<float> hn(272);
        for (int d = 0; d < 64; d++) { hn[d] = hn[128 + d] = 1.0f + 0.01f * d; hn[64 + d] = hn[192 + d] = 0.001f * d - 0.03f; }
        for (int f = 0; f < 16; f++) hn[256 + f] = (float)(1.0 / pow(10000.0, 2.0 * f / 32));
        CK(cudaMemcpy(b.norm, hn.data(), hn.size() * 4, cudaMemcpyHostToDevice));
    }
    for (int es : {4, 2, 3}) /* over 48 KB would need an opt-in the AOT plugin cannot make */
        for (int tr = 0; tr < 2; tr++)
            if (static_smem(es) + dyn_smem(es, 4, tr) > SMEM_MAX) { fprintf(stderr, "%s: 4 stages do not fit 48 KB\n", dname(es)); return 2; }

    const bool bulk_ok = prop.major >= 9; /* the producer-warp variant needs sm_90 */
    if (one) { /* one launch of the fused skeleton (or with "op" the op's; with "bulk" the
                  producer-warp variant, "5/SM" / "6/SM" its ring for 5 / 6 blocks per SM), for a profiler */
        int tr = 1, bulk = 0, cap_blocks = 0;
        for (int i = 5; i < argc; i++) {
            if (!strcmp(argv[i], "op")) tr = 0;
            else if (!strcmp(argv[i], "bulk")) bulk = 1;
            else if (!strcmp(argv[i], "5/SM")) cap_blocks = 5;
            else if (!strcmp(argv[i], "6/SM")) cap_blocks = 6;
            else { fprintf(stderr, "--one: unknown option %s\n", argv[i]); return 2; }
        }
        if (bulk && !bulk_ok) { printf("bulk skipped: needs sm_90 (this GPU is sm_%d%d)\n", prop.major, prop.minor); return 0; }
        const int minb = cap_blocks == 6 ? 6 : 5;
        if (minb == 6 && tr) { fprintf(stderr, "--one: 6/SM is built for the op skeleton only\n"); return 2; }
        const size_t cap = cap_blocks ? (size_t)prop.sharedMemPerMultiprocessor / cap_blocks - 1024 : SMEM_MAX;
        const int n = 17 * Lmax, strip = atoi(argv[4]);
        const int ns = bulk ? max_stages_bulk(one_es, tr, minb, cap) : max_stages(one_es, tr, cap);
        fill_inputs(b, one_es, n);
        job j = probe_job(b, one_es, n, strip, ns, tr, NULL, bulk, minb);
        launch(j, 0);
        CK(cudaDeviceSynchronize());
        printf("one launch: %s %s L=%d strip=%d stages=%d grid %u x %u, %zu B dynamic shared memory%s\n", tr ? "fused" : "op", dname(one_es), Lmax, strip, ns, j.grid.x, j.grid.y, j.smem,
               bulk ? ", producer warp, bulk" : "");
        return 0;
    }

    printf("device: %s, %d SMs, L2 %d MB, CC %d.%d\n", prop.name, g_sms, prop.l2CacheSize >> 20, prop.major, prop.minor);
    FILE *js = fopen(argv[1], "w");
    if (!js) { perror(argv[1]); return 2; }
    fprintf(js, "{\n \"device\": \"%s\", \"sms\": %d, \"l2_bytes\": %d,\n \"resources\": [\n", prop.name, g_sms, prop.l2CacheSize);
    for (int es : {4, 2, 3}) {
        cudaFuncAttributes fa;
        if (es == 4) CK(cudaFuncGetAttributes(&fa, strip_probe<float>));
        else if (es == 2) CK(cudaFuncGetAttributes(&fa, strip_probe<__nv_bfloat16>));
        else CK(cudaFuncGetAttributes(&fa, strip_probe<__half>));
        const int ns = max_stages(es, 1, SMEM_MAX);
        printf("strip_probe<%s>: %d registers, %zu B local, %zu B static shared; fused: %d stages, %zu B dynamic, %d blocks/SM\n", dname(es),
               fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes, ns, dyn_smem(es, ns, 1), blocks_per_sm(es, dyn_smem(es, ns, 1)));
        fprintf(js, "  {\"dtype\": \"%s\", \"registers\": %d, \"local_bytes\": %zu, \"static_shared\": %zu, \"fused_stages\": %d, \"fused_dynamic_shared\": %zu}%s\n",
                dname(es), fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes, ns, dyn_smem(es, ns, 1), es == 3 ? "" : ",");
    }
    fprintf(js, " ],\n");
    if (bulk_ok) {
        fprintf(js, " \"bulk_resources\": [\n");
        for (int es : {4, 2, 3})
            for (int k = 0; k < 3; k++) {
                const int tr = k == 0, minb = k == 2 ? 6 : 5;
                cudaFuncAttributes fa;
                CK(cudaFuncGetAttributes(&fa, bulk_fn(es, tr, minb)));
                const int ns = max_stages_bulk(es, tr, minb, SMEM_MAX);
                const size_t dyn = dyn_smem(es, ns, tr);
                printf("strip_bulk<%s, %s, %d>: %d registers, %zu B local, %zu B static shared; %d stages, %zu B dynamic, %d blocks/SM\n", dname(es),
                       tr ? "fused" : "op", minb, fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes, ns, dyn, blocks_per_sm_bulk(es, tr, minb, dyn));
                fprintf(js, "  {\"dtype\": \"%s\", \"skeleton\": \"%s\", \"min_blocks\": %d, \"registers\": %d, \"local_bytes\": %zu, \"static_shared\": %zu, \"stages\": %d, \"dynamic_shared\": %zu}%s\n",
                        dname(es), tr ? "fused" : "op", minb, fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes, ns, dyn, es == 3 && k == 2 ? "" : ",");
            }
        fprintf(js, " ],\n");
    } else {
        printf("producer warp, bulk: skipped (needs sm_90; this GPU is sm_%d%d)\n", prop.major, prop.minor);
    }

    /* self-check: every variant that is timed, at two small sizes, fresh inputs each */
    /* shared memory per block that lets 5 blocks share an SM (1 KB reserved per block) */
    const size_t cap5 = (size_t)prop.sharedMemPerMultiprocessor / 5 - 1024;
    int failed = 0, checks = 0;
    double worst_all = 0.0;
    uint32_t seed = 11;
    const int strips[4] = {1, 2, 4, 8};
    for (int es : {4, 2, 3})
        for (int tr = 1; tr >= 0; tr--)
            for (int n : {17 * 20, 17 * 37}) {
                std::vector<int> nss = {max_stages(es, tr, SMEM_MAX)};
                if (max_stages(es, tr, cap5) != nss[0]) nss.push_back(max_stages(es, tr, cap5));
                for (int ns : nss)
                    for (int s : strips) {
                        double worst = 0.0;
                        failed |= check_variant(b, es, n, s, ns, tr, seed++, &worst);
                        worst_all = std::max(worst_all, worst);
                        checks++;
                    }
            }
    printf("self-check: %d runs, %s; worst transform error %.2f of its tolerance\n", checks, failed ? "FAILED" : "passed", worst_all);
    /* the producer-warp variant: every ring (stages) and strip that is timed */
    const size_t cap6 = (size_t)prop.sharedMemPerMultiprocessor / 6 - 1024;
    struct bvar { const char *name; int tr, strip, minb; size_t cap; };
    const bvar bvars[] = {
        {"fused strip 1, producer warp, bulk", 1, 1, 5, SMEM_MAX}, {"fused strip 2, producer warp, bulk", 1, 2, 5, SMEM_MAX},
        {"fused strip 4, producer warp, bulk", 1, 4, 5, SMEM_MAX}, {"fused strip 8, producer warp, bulk", 1, 8, 5, SMEM_MAX},
        {"fused strip 4, producer warp, bulk, 5 blocks/SM", 1, 4, 5, cap5},
        {"op strip 1, producer warp, bulk", 0, 1, 5, SMEM_MAX}, {"op strip 2, producer warp, bulk", 0, 2, 5, SMEM_MAX},
        {"op strip 4, producer warp, bulk", 0, 4, 5, SMEM_MAX}, {"op strip 8, producer warp, bulk", 0, 8, 5, SMEM_MAX},
        {"op strip 1, producer warp, bulk, 5 blocks/SM", 0, 1, 5, cap5}, {"op strip 4, producer warp, bulk, 5 blocks/SM", 0, 4, 5, cap5},
        {"op strip 1, producer warp, bulk, 6 blocks/SM", 0, 1, 6, cap6}, {"op strip 4, producer warp, bulk, 6 blocks/SM", 0, 4, 6, cap6},
    };
    int bchecks = 0, bfailed = 0;
    double bworst = 0.0;
    if (bulk_ok) {
        for (int es : {4, 2, 3})
            for (const bvar &v : bvars)
                for (int n : {17 * 20, 17 * 37}) {
                    const int ns = max_stages_bulk(es, v.tr, v.minb, v.cap);
                    double worst = 0.0;
                    bfailed |= check_variant(b, es, n, v.strip, ns, v.tr, seed++, &worst, 1, v.minb);
                    bworst = std::max(bworst, worst);
                    bchecks++;
                }
        printf("self-check, producer warp, bulk: %d runs, %s; worst transform error %.2f of its tolerance\n", bchecks, bfailed ? "FAILED" : "passed", bworst);
    } else {
        printf("self-check, producer warp, bulk: skipped (needs sm_90; this GPU is sm_%d%d)\n", prop.major, prop.minor);
    }
    failed |= bfailed;
    fprintf(js, " \"check_passed\": %s, \"check_worst_over_tolerance\": %.4f,\n", failed ? "false" : "true", worst_all);
    fprintf(js, " \"bulk_check_runs\": %d, \"bulk_check_worst_over_tolerance\": %.4f,\n \"rows\": [\n", bchecks, bworst);

    /* timing */
    std::vector<row> rows;
    for (int es : {4, 2, 3})
        for (int L : {256, 1292, 4096}) {
            const int n = 17 * L, Ee = esize(es);
            fill_inputs(b, es, n);
            const size_t cbytes = (size_t)3 * n * H * HD * Ee; /* half of the 6 units moved */
            const double units6 = 2.0 * cbytes;
            /* the copy: fastest of three, each checked to copy exactly on a prefix */
            double copy_ms = 1e30;
            const char *copy_name = "";
            const char *cnames[3] = {"cudaMemcpyAsync", "copy kernel 4/thread one pass", "copy kernel 8/thread one wave"};
            for (int k = 1; k <= 3; k++) {
                job j;
                memset(&j, 0, sizeof j);
                j.kind = k; j.src = b.ca; j.dst = b.cb; j.bytes = cbytes;
                CK(cudaMemset(b.cb, 0, cbytes));
                launch(j, 0);
                CK(cudaDeviceSynchronize());
                std::vector<char> h1(1 << 20), h2(1 << 20);
                CK(cudaMemcpy(h1.data(), b.ca + cbytes - h1.size(), h1.size(), cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(h2.data(), b.cb + cbytes - h2.size(), h2.size(), cudaMemcpyDeviceToHost));
                if (memcmp(h1.data(), h2.data(), h1.size())) { fprintf(stderr, "%s copied wrong bytes\n", cnames[k - 1]); failed = 1; continue; }
                const stats st = time_graph(j);
                row r;
                snprintf(r.name, sizeof r.name, "copy: %s", cnames[k - 1]);
                r.es = es; r.L = L; r.strip = 0; r.ns = 0; r.blocks_per_sm = 0;
                r.ms = st.med; r.mn = st.mn; r.mx = st.mx; r.pct_copy = 0; r.gbs = units6 / (st.med * 1e-3) / 1e9;
                rows.push_back(r);
                if (st.med < copy_ms) { copy_ms = st.med; copy_name = cnames[k - 1]; }
            }
            for (row &r : rows) if (r.es == es && r.L == L && r.strip == 0) r.pct_copy = 100.0 * copy_ms / r.ms;
            struct var { const char *name; int tr, strip; size_t cap; };
            const var vars[] = {
                {"fused strip 1", 1, 1, SMEM_MAX}, {"fused strip 2", 1, 2, SMEM_MAX}, {"fused strip 4", 1, 4, SMEM_MAX},
                {"fused strip 8", 1, 8, SMEM_MAX}, {"fused strip 2, 5 blocks/SM", 1, 2, cap5}, {"fused strip 4, 5 blocks/SM", 1, 4, cap5},
                {"op strip 1", 0, 1, SMEM_MAX}, {"op strip 2", 0, 2, SMEM_MAX}, {"op strip 4", 0, 4, SMEM_MAX}, {"op strip 8", 0, 8, SMEM_MAX},
                {"op strip 4, 5 blocks/SM", 0, 4, cap5},
            };
            for (const var &v : vars) {
                const int ns = max_stages(es, v.tr, v.cap);
                job j = probe_job(b, es, n, v.strip, ns, v.tr, NULL);
                const stats st = time_graph(j);
                row r;
                snprintf(r.name, sizeof r.name, "%s", v.name);
                r.es = es; r.L = L; r.strip = v.strip; r.ns = ns; r.blocks_per_sm = blocks_per_sm(es, j.smem);
                r.ms = st.med; r.mn = st.mn; r.mx = st.mx; r.pct_copy = 100.0 * copy_ms / st.med; r.gbs = units6 / (st.med * 1e-3) / 1e9;
                rows.push_back(r);
            }
            for (const bvar &v : bvars) {
                if (!bulk_ok) break;
                const int ns = max_stages_bulk(es, v.tr, v.minb, v.cap);
                job j = probe_job(b, es, n, v.strip, ns, v.tr, NULL, 1, v.minb);
                const stats st = time_graph(j);
                row r;
                snprintf(r.name, sizeof r.name, "%s", v.name);
                r.es = es; r.L = L; r.strip = v.strip; r.ns = ns; r.blocks_per_sm = blocks_per_sm_bulk(es, v.tr, v.minb, j.smem);
                r.ms = st.med; r.mn = st.mn; r.mx = st.mx; r.pct_copy = 100.0 * copy_ms / st.med; r.gbs = units6 / (st.med * 1e-3) / 1e9;
                rows.push_back(r);
            }
            printf("%s L=%d: copy %.4f ms (%s)\n", dname(es), L, copy_ms, copy_name);
            fflush(stdout);
        }
    for (size_t i = 0; i < rows.size(); i++) {
        const row &r = rows[i];
        fprintf(js, "  {\"variant\": \"%s\", \"dtype\": \"%s\", \"L\": %d, \"strip\": %d, \"stages\": %d, \"blocks_per_sm\": %d, \"ms\": %.5f, \"min_ms\": %.5f, \"max_ms\": %.5f, \"pct_copy\": %.2f, \"GBps\": %.1f}%s\n",
                r.name, dname(r.es), r.L, r.strip, r.ns, r.blocks_per_sm, r.ms, r.mn, r.mx, r.pct_copy, r.gbs, i + 1 < rows.size() ? "," : "");
    }
    fprintf(js, " ]\n}\n");
    fclose(js);
    printf("\n%-48s %-5s %5s %3s %5s %9s %9s %7s\n", "variant", "dtype", "L", "ns", "blk", "ms", "GB/s", "%copy");
    for (const row &r : rows)
        printf("%-48s %-5s %5d %3d %5d %9.4f %9.1f %6.1f%s\n", r.name, dname(r.es), r.L, r.ns, r.blocks_per_sm, r.ms, r.gbs, r.pct_copy,
               r.mx > 1.1 * r.mn ? "  (spread > 10 %)" : "");
    printf("%s\n", failed ? "SELF-CHECK FAILED: the timings above are not of a correct skeleton" : "self-check passed");
    return failed;
}
