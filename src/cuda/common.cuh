/* Device helpers shared by both kernel families that are not tensor-core code (that is in
   mma.cuh): cp.async wrappers, which block is which, element conversion, and the exact scalar
   path that recomputes a warp's rows when the fast path produced a non-finite value. The launch
   geometry and the kernel list are in kernels.h, the argument list in kernel_args.h. */
#ifndef DSWA_CUDA_COMMON_CUH
#define DSWA_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/kernel_args.h"
#include "cuda/kernels.h"

__device__ __forceinline__ void dswa_cp_async16(void *smem, const void *gmem, bool ok) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void dswa_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void dswa_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Which (64-query tile, head) a block of the grid (tiles, H, B) owns: blocks start in
   x-fastest order, so the blocks resident together cover a stretch of the sequence of a few
   heads (head-fastest was measured: within noise, slower with shared V; docs/PERF.md).
   Read through volatile asm, so that a kernel calling this again at its end recomputes the pair
   there instead of holding it in two registers through the main loop. */
__device__ __forceinline__ void dswa_block_tile_head(int *tile, int *h) {
    unsigned bx, by;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(bx));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(by));
    *tile = (int)bx;
    *h = (int)by;
}

/* A tensor's data at batch b, head h (the kernel's slice of it). */
template <typename P> __device__ __forceinline__ P *dswa_at_head(P *base, int b, int sb, int h, int sh) {
    return base + (int64_t)b * sb + (int64_t)h * sh;
}

__device__ __forceinline__ float dswa_to_f32(float x) { return x; }
__device__ __forceinline__ float dswa_to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float dswa_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T dswa_from_f32(float x);
template <> __device__ __forceinline__ float dswa_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half dswa_from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 dswa_from_f32<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float dswa_warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* Exact scalar recomputation of the 16 rows row0..row0+15 of one warp, touching only keys
   inside each query's window (so NaN and inf in other rows cannot leak in). Lane owns dims
   2*lane and 2*lane+1. Called by whole warps, rarely. */
template <typename T>
__device__ __noinline__ void dswa_exact_rows(const T *q, const T *k, const T *v, T *out, int n,
                                             int wl, int wr, float scale, float lambda, int b,
                                             int h, int row0, int q_sb, int q_sn, int q_sp,
                                             int q_sh, int k_sb, int k_sn, int k_sp, int k_sh,
                                             int v_sb, int v_sn, int v_sp, int v_sh, int o_sb,
                                             int o_sn, int o_sh) {
    const int d = 2 * (threadIdx.x & 31);
    for (int i = row0; i < row0 + 16 && i < n; i++) {
        const int lo = i - wl < 0 ? 0 : i - wl, hi = i + wr > n - 1 ? n - 1 : i + wr;
        float res[2] = {0.f, 0.f};
        for (int p = 0; p < 2; p++) {
            const T *qr = q + (int64_t)b * q_sb + (int64_t)i * q_sn + (int64_t)p * q_sp + (int64_t)h * q_sh + d;
            const float q0 = dswa_to_f32(qr[0]), q1 = dswa_to_f32(qr[1]);
            float m = -INFINITY, l = 0.f, o[2] = {0.f, 0.f};
            for (int j = lo; j <= hi; j++) {
                const T *kr = k + (int64_t)b * k_sb + (int64_t)j * k_sn + (int64_t)p * k_sp + (int64_t)h * k_sh + d;
                const T *vr = v + (int64_t)b * v_sb + (int64_t)j * v_sn + (int64_t)p * v_sp + (int64_t)h * v_sh + d;
                const float s = scale * dswa_warp_sum(q0 * dswa_to_f32(kr[0]) + q1 * dswa_to_f32(kr[1]));
                const float mnew = s > m ? s : m;
                const float muse = mnew == -INFINITY ? 0.f : mnew;
                const float corr = expf(m - muse), e = expf(s - muse);
                m = mnew;
                l = l * corr + e;
                o[0] = o[0] * corr + e * dswa_to_f32(vr[0]);
                o[1] = o[1] * corr + e * dswa_to_f32(vr[1]);
            }
            const float f = p ? -lambda / l : 1.f / l;
            res[0] += f * o[0];
            res[1] += f * o[1];
        }
        T *orow = out + (int64_t)b * o_sb + (int64_t)i * o_sn + (int64_t)h * o_sh + d;
        orow[0] = dswa_from_f32<T>(res[0]);
        orow[1] = dswa_from_f32<T>(res[1]);
    }
}

#endif
