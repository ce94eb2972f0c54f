/* The fused SAME-L block's scalar kernel: every problem the band kernel does not take (window
 * spans over 48, or rot_dims that do not fall on whole chunks of one phase; kernels.c's
 * dswa_samel_kernel_pick decides). Each warp computes its 16 queries exactly, one at a time, with
 * samel_exact_rows (samel.cuh): DyT and RoPE of every key it reads, fp32 products (so one f32
 * entry serves TF32 and fp32 math), the op's online softmax. Slow by design (no tensor cores,
 * each key transformed once per query that sees it); correct for every valid problem.
 *
 * Entries (kernels.h, DSWA_SAMEL_SCALAR_KERNELS): dswa_samel_scalar_f32, _f16, _bf16.
 * Arguments follow TensorRT's AOT order (kernel_args.h, DSWA_SAMEL_KERNEL_ARGS); grid
 * (ceil(N/64), H, B), 128 threads, no shared memory.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/launch.h"
#include "cuda/samel.cuh"

template <typename T>
__device__ __forceinline__ void dswa_samel_scalar_impl(DSWA_SAMEL_KERNEL_PARAMS(T), DSWA_SAMEL_ALPHA_AT_PARAMS) {
    int tile, h;
    dswa_block_tile_head(&tile, &h);
    float lane_freq;
    SAMEL_LANE_FREQ(lane_freq);
    samel_exact_rows<T, 1>(x, q_gamma, q_beta, k_gamma, k_beta, out, n, wl, wr, __int_as_float(scale_bits),
                           __int_as_float(lambda_bits), x_sb, x_sn, x_sc, x_sh, o_sb, o_sn, o_sh, rot_dims,
                           lane_freq, pos_offset, samel_alpha(q_alpha_at, q_alpha_bits),
                           samel_alpha(k_alpha_at, k_alpha_bits), blockIdx.z, h, tile * DSWA_TILE + 16 * (threadIdx.x >> 5));
}

#define SCALAR_ENTRY(entry, dtype, math, T, blocks_per_sm)                                    \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                \
        entry(DSWA_SAMEL_KERNEL_PARAMS(T)) {                                                 \
        dswa_samel_scalar_impl<T>(DSWA_SAMEL_KERNEL_ARG_NAMES, NULL, NULL);                  \
    }
DSWA_SAMEL_SCALAR_KERNELS(SCALAR_ENTRY)

#define SCALAR_FUNCTION(entry, dtype, math, T, blocks_per_sm) (const void *)entry,
extern "C" const void *dswa_samel_scalar_entry_function(int index) {
    static const void *const functions[] = {DSWA_SAMEL_SCALAR_KERNELS(SCALAR_FUNCTION)};
    return functions[index];
}

#ifndef DSWA_AOT_PTX /* the library's entries with the alphas in device memory (kernel_args.h) */
#define SCALAR_ALPHA_AT_ENTRY(entry, dtype, math, T, blocks_per_sm)                           \
    extern "C" __global__ void __launch_bounds__(DSWA_THREADS, blocks_per_sm)                \
        entry##_alpha_at(DSWA_SAMEL_KERNEL_PARAMS(T), DSWA_SAMEL_ALPHA_AT_PARAMS) {          \
        dswa_samel_scalar_impl<T>(DSWA_SAMEL_KERNEL_ARG_NAMES, q_alpha_at, k_alpha_at);      \
    }
DSWA_SAMEL_SCALAR_KERNELS(SCALAR_ALPHA_AT_ENTRY)

#define SCALAR_ALPHA_AT_FUNCTION(entry, dtype, math, T, blocks_per_sm) (const void *)entry##_alpha_at,
extern "C" const void *dswa_samel_scalar_alpha_at_function(int index) {
    static const void *const functions[] = {DSWA_SAMEL_SCALAR_KERNELS(SCALAR_ALPHA_AT_FUNCTION)};
    return functions[index];
}
#endif
