/* Tensor-core building blocks shared by the kernels: TF32 and 16-bit mma.sync, fragment
   packing, ldmatrix, the shared-memory swizzles, and the epilogue (row sums, stores). */
#ifndef DSWA_CUDA_MMA_CUH
#define DSWA_CUDA_MMA_CUH

#include "cuda/common.cuh"

/* Round K/V to TF32 (1) or let the tensor core truncate their low mantissa bits (0). */
#ifndef DSWA_KV_CVT
#define DSWA_KV_CVT 0
#endif


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

/* 2^x on the special-function unit; ex2.approx.ftz(-inf) = +0, which masking relies on. */
__device__ __forceinline__ float dswa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t tf32kv(float x) {
#if DSWA_KV_CVT
    return tf32(x);
#else
    return __float_as_uint(x);
#endif
}

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

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* Quad-reduce the row sums and return 1/l per row. */
__device__ __forceinline__ void dswa_row_inverse(float l[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = 1.f / l[r];
    }
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

/* The kernel entries: plain C names (so the PTX entry is what TensorRT's loader is told) and
   TensorRT's argument order. */
#define DSWA_KERNEL_PARAMS(T)                                                                  \
    const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, int n, int wl,   \
        int wr, int scale_bits, int lambda_bits, int q_sb, int q_sn, int q_sp, int q_sh,         \
        int k_sb, int k_sn, int k_sp, int k_sh, int v_sb, int v_sn, int v_sp, int v_sh,          \
        int o_sb, int o_sn, int o_sh, T *__restrict__ out
#define DSWA_KERNEL_ARGS                                                                       \
    q, k, v, n, wl, wr, scale_bits, lambda_bits, q_sb, q_sn, q_sp, q_sh, k_sb, k_sn, k_sp, k_sh, \
        v_sb, v_sn, v_sp, v_sh, o_sb, o_sn, o_sh, out
#define DSWA_ENTRY(name, T, body, min_blocks)                                                  \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, min_blocks)                     \
        name(DSWA_KERNEL_PARAMS(T)) {                                                          \
        body<T>(DSWA_KERNEL_ARGS);                                                             \
    }

/* Launches `kernel` with the library's arguments: what the library runs is exactly the entry
   TensorRT would run. */
static inline dswa_status dswa_launch_entry(const void *kernel, const char *name,
                                            const dswa_kargs *a, int strip, int batch, int heads,
                                            const void *q, const void *k, const void *v,
                                            void *out, cudaStream_t stream) {
    const int tiles = (a->n + DSWA_TILE - 1) / DSWA_TILE;
    const dim3 grid((unsigned)((tiles + strip - 1) / strip), (unsigned)heads, (unsigned)batch);
    void *args[24] = {(void *)&q, (void *)&k, (void *)&v, (void *)&a->n, (void *)&a->wl,
                      (void *)&a->wr, (void *)&a->scale_bits, (void *)&a->lambda_bits,
                      (void *)&a->q[0], (void *)&a->q[1], (void *)&a->q[2], (void *)&a->q[3],
                      (void *)&a->k[0], (void *)&a->k[1], (void *)&a->k[2], (void *)&a->k[3],
                      (void *)&a->v[0], (void *)&a->v[1], (void *)&a->v[2], (void *)&a->v[3],
                      (void *)&a->o[0], (void *)&a->o[1], (void *)&a->o[2], (void *)&out};
    cudaError_t e = cudaLaunchKernel(kernel, grid, dim3(DSWA_THREADS), args, 0, stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return dswa_fail(DSWA_ERR_CUDA, "launch of %s failed: %s", name, cudaGetErrorString(e));
    return DSWA_OK;
}

#endif
