/* Tensor-core device helpers shared by both kernel families: TF32 and 16-bit mma.sync, fragment
   packing, ldmatrix, the shared-memory swizzles, and the epilogue (row sums, stores). Device
   code only: the entries are defined beside their kernels, the launch is in launch.cu. */
#ifndef DSWA_CUDA_MMA_CUH
#define DSWA_CUDA_MMA_CUH

#include "cuda/common.cuh"

/* Where chunk u of a row lives: u ^ swz(row). f32 (16 chunks a row): quads read rows g, g+1 at
   chunks 4k+c, and rows 2c (2c+1) at chunks g, 8+g. 16-bit (8 chunks a row): quads read rows
   g, g+1 at chunks c, 4+c, and ldmatrix reads 8 consecutive rows at one chunk. */
template <typename T> __device__ __forceinline__ int dswa_swz(int row);
template <> __device__ __forceinline__ int dswa_swz<float>(int r) { return (r & 6) ^ ((r & 1) << 2); }
template <> __device__ __forceinline__ int dswa_swz<__half>(int r) { return ((r & 1) << 2) | ((r >> 1) & 3); }
template <> __device__ __forceinline__ int dswa_swz<__nv_bfloat16>(int r) { return dswa_swz<__half>(r); }

__device__ __forceinline__ uint32_t tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

/* fp32-accurate products on TF32 tensor cores (DSWA_MATH_FP32): a*b ~ ah*bh + ah*bl + al*bh
   with ah = a truncated to TF32 and al = a - ah (exact in fp32, then truncated by the tensor
   core): relative error ~2^-21 instead of TF32's 2^-11. */
__device__ __forceinline__ uint32_t split_hi(uint32_t x) { return x & 0xffffe000u; }
__device__ __forceinline__ uint32_t split_lo(uint32_t x) {
    return __float_as_uint(__uint_as_float(x) - __uint_as_float(x & 0xffffe000u));
}

/* The Q words of this thread's rows i and i + 8 (of n; rows past n read as zeros) from `qp`,
   Q of one pair at the kernel's (batch, head) with row stride q_sn: CHUNKS 16-byte chunks
   4 (group + x) + quad for x < CHUNKS, word k of chunk x into w[rr][4x + k], rounded to TF32
   when ROUND_TF32. The mma A fragments of both families are laid out from these words. */
template <int CHUNKS, bool ROUND_TF32, int WORDS, typename T>
__device__ __forceinline__ void dswa_load_q_rows(uint32_t (*w)[WORDS], const T *qp, int q_sn, int n, int i,
                                                 int group) {
    static_assert(WORDS >= 4 * CHUNKS, "w holds every word read");
    const int quad = threadIdx.x & 3;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int ii = i + 8 * rr;
        const T *row = qp + (int64_t)(ii < n ? ii : 0) * q_sn;
#pragma unroll
        for (int x = 0; x < CHUNKS; x++) {
            const int chunk = 4 * (group + x) + quad;
            uint4 u = make_uint4(0, 0, 0, 0);
            if (ii < n) u = __ldg((const uint4 *)(row + chunk * (16 / (int)sizeof(T))));
            if constexpr (ROUND_TF32) {
                w[rr][4 * x + 0] = tf32(__uint_as_float(u.x));
                w[rr][4 * x + 1] = tf32(__uint_as_float(u.y));
                w[rr][4 * x + 2] = tf32(__uint_as_float(u.z));
                w[rr][4 * x + 3] = tf32(__uint_as_float(u.w));
            } else {
                w[rr][4 * x + 0] = u.x; w[rr][4 * x + 1] = u.y; w[rr][4 * x + 2] = u.z; w[rr][4 * x + 3] = u.w;
            }
        }
    }
}

/* 2^x on the special-function unit; ex2.approx.ftz(-inf) = +0, which masking relies on. */
__device__ __forceinline__ float dswa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* d += A B on TF32. K and V go in as raw f32 bits: the tensor core ignores their low 13
   mantissa bits (truncation); rounding them first (cvt.rna) was 8 % slower (docs/PERF.md). */
__device__ __forceinline__ void mma_tf32(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <typename T>
__device__ __forceinline__ void mma16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16<__half>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16<__nv_bfloat16>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two fp32 values as one register of two 16-bit values, the first in the low half. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&h;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* The inverse of pack2: the two values of a register. */
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t x);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t x) {
    return __half22float2(*(__half2 *)&x);
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t x) {
    return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));  /* exact */
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* One 16-key k-step of acc += P V in 16-bit, for both kernel families: a = P's four A registers
   (pack2 of the S accumulator of two 8-key tiles); vrow = the V row this lane supplies to
   ldmatrix, row r = (lane & 7) + 8 (matrix & 1) of the k-step, in a swizzled 64-dim row of 8
   16-byte chunks; the lane's chunk is j + (matrix >> 1) for output dims 8j .. 8j + 15. */
template <typename T>
__device__ __forceinline__ void dswa_pv16_kstep(float acc[8][4], const uint32_t a[4], const T *vrow, int r) {
    const int mtx = (threadIdx.x & 31) >> 3;
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vrow + (((j + (mtx >> 1)) ^ dswa_swz<T>(r)) * 8));
        mma16<T>(acc[j], a, b[0], b[1]);
        mma16<T>(acc[j + 1], a, b[2], b[3]);
    }
}

/* A row of an mma accumulator is spread over the 4 threads of a quad (lanes 4g .. 4g+3):
   its maximum and its sum, known to all four. */
__device__ __forceinline__ float dswa_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float dswa_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* Quad-reduce the row sums and return 1/l per row. */
__device__ __forceinline__ void dswa_row_inverse(float l[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = 1.f / dswa_quad_sum(l[r]);
}

/* Stores this thread's part of rows i and i+8; returns whether every stored value was finite.
   f32: acc[j][e] is row (e < 2 ? i : i+8), dim (j < 4 ? 8c + j : 32 + 8c + j - 4) + 4 (e & 1).
   16-bit: acc[j][e] is dim 8j + 2c + (e & 1). */
template <typename T>
__device__ __forceinline__ bool dswa_store_rows(T *orow0, int o_sn, int i, int n, const float acc[8][4]) {
    const int c = threadIdx.x & 3;
    float nf = 0.f; /* x * 0 is NaN exactly when x is inf or NaN: one FFMA a value */
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        if (i + 8 * rr >= n) continue;
        T *row = orow0 + (int64_t)(i + 8 * rr) * o_sn;
        if constexpr (sizeof(T) == 4) {
#pragma unroll
            for (int half = 0; half < 2; half++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int j0 = 4 * half, ee = 2 * rr + e;
                    const float4 x = make_float4(acc[j0][ee], acc[j0 + 1][ee], acc[j0 + 2][ee], acc[j0 + 3][ee]);
                    nf = fmaf(x.x, 0.f, fmaf(x.y, 0.f, fmaf(x.z, 0.f, fmaf(x.w, 0.f, nf))));
                    *(float4 *)((float *)row + 32 * half + 8 * c + 4 * e) = x;
                }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float x0 = acc[j][2 * rr], x1 = acc[j][2 * rr + 1];
                nf = fmaf(x0, 0.f, fmaf(x1, 0.f, nf));
                *(uint32_t *)(row + 8 * j + 2 * c) = pack2<T>(x0, x1);
            }
        }
    }
    return nf == 0.f;
}

#endif
