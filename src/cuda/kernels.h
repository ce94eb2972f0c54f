/* The kernel registry: every CUDA kernel entry, with what it computes and how it is built, and
   the one rule that picks the kernel for a problem (dswa_kernel_pick), read by the launcher
   (src/cuda/launch.cu) and the AOT export (src/aot/export.c) alike. Plain C.

   Two families. The band kernel (src/cuda/kernel_band.cu) holds the block's whole key band in
   shared memory, so it takes windows with window_left + window_right <= DSWA_BAND_MAX_SPAN;
   the wide kernel (src/cuda/kernel_wide.cu) streams keys and takes any window. Each family has
   an entry per element type, and the band family a second f32 entry for DSWA_MATH_FP32. */
#ifndef DSWA_CUDA_KERNELS_H
#define DSWA_CUDA_KERNELS_H

#include <stdint.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSWA_WARPS 4                 /* warps per block, each owning 16 queries */
#define DSWA_TILE (16 * DSWA_WARPS)  /* queries per block: grid (ceil(N / 64), H, B) */
#define DSWA_THREADS (32 * DSWA_WARPS)
#define DSWA_HEAD_DIM 64             /* the only head_dim the kernels take */
#define DSWA_BAND_MAX_SPAN 48        /* the band family's largest window_left + window_right */

/* X(entry, dtype, math, element type, blocks per SM). The blocks per SM are the entry's
   __launch_bounds__ minimum, which caps its registers: 4 blocks (16 warps) keep enough loads in
   flight; the fp32-accurate entry holds low parts too and gets 3 (measurements in
   docs/PERF.md). The wide kernel is not tuned (1). */
#define DSWA_BAND_KERNELS(X)                                                \
    X(dswa_fwd_f32_tf32, DSWA_F32, DSWA_MATH_TF32, float, 4)                \
    X(dswa_fwd_f32_fp32, DSWA_F32, DSWA_MATH_FP32, float, 3)                \
    X(dswa_fwd_f16, DSWA_F16, DSWA_MATH_DEFAULT, __half, 4)                 \
    X(dswa_fwd_bf16, DSWA_BF16, DSWA_MATH_DEFAULT, __nv_bfloat16, 4)
#define DSWA_WIDE_KERNELS(X)                                                \
    X(dswa_fwd_wide_f32_tf32, DSWA_F32, DSWA_MATH_TF32, float, 1)           \
    X(dswa_fwd_wide_f16, DSWA_F16, DSWA_MATH_DEFAULT, __half, 1)            \
    X(dswa_fwd_wide_bf16, DSWA_BF16, DSWA_MATH_DEFAULT, __nv_bfloat16, 1)

/* The fused SAME-L block's kernels (dswa_samel_forward_cuda). Its band entries are the band
   kernel with DyT and RoPE applied to each Q and K phase in shared memory (kernel_band.cu);
   its scalar entries (kernel_samel_scalar.cu) take every valid problem, one warp per 16
   queries, exact in fp32 whatever the math (so one f32 entry serves both). */
#define DSWA_SAMEL_BAND_KERNELS(X)                                          \
    X(dswa_samel_f32_tf32, DSWA_F32, DSWA_MATH_TF32, float, 4)              \
    X(dswa_samel_f32_fp32, DSWA_F32, DSWA_MATH_FP32, float, 3)              \
    X(dswa_samel_f16, DSWA_F16, DSWA_MATH_DEFAULT, __half, 4)               \
    X(dswa_samel_bf16, DSWA_BF16, DSWA_MATH_DEFAULT, __nv_bfloat16, 4)
#define DSWA_SAMEL_SCALAR_KERNELS(X)                                        \
    X(dswa_samel_scalar_f32, DSWA_F32, DSWA_MATH_DEFAULT, float, 1)         \
    X(dswa_samel_scalar_f16, DSWA_F16, DSWA_MATH_DEFAULT, __half, 1)        \
    X(dswa_samel_scalar_bf16, DSWA_BF16, DSWA_MATH_DEFAULT, __nv_bfloat16, 1)

typedef struct dswa_kernel {
    const char *entry;    /* the PTX .entry and C name, e.g. "dswa_fwd_bf16" */
    const char *family;   /* "band" or "wide" */
    dswa_dtype dtype;
    dswa_math math;       /* f32: DSWA_MATH_TF32 or DSWA_MATH_FP32; 16-bit: DSWA_MATH_DEFAULT */
    int blocks_per_sm;
    int max_span;         /* band: DSWA_BAND_MAX_SPAN; wide, scalar: -1 (any) */
} dswa_kernel;

/* In registry order: the band entries, then the wide ones, each in its X-list's order. */
extern const dswa_kernel dswa_kernels[];
extern const int dswa_kernel_count;
extern const int dswa_band_kernel_count; /* the first this many rows are the band family */

/* The kernel for dtype and math (DSWA_MATH_DEFAULT with f32 is TF32; 16-bit ignores math) and
   windows wl, wr (as launched: already clamped to N - 1; both < 0: any window). The band
   family when wl + wr <= DSWA_BAND_MAX_SPAN, else the wide one; NULL when none exists (the
   fp32-accurate math is band-only) or the dtype is unknown. */
const dswa_kernel *dswa_kernel_pick(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr);
/* Whether the CUDA kernels serve head_dim (they implement DSWA_HEAD_DIM only): 0 with
   DSWA_ERR_UNSUPPORTED recorded otherwise. */
int dswa_cuda_head_dim_ok(int32_t head_dim);
/* The same, for windows already clamped to N - 1; when none exists, records why
   (DSWA_ERR_UNSUPPORTED) and returns NULL. */
const dswa_kernel *dswa_kernel_pick_or_fail(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr);

/* The fused block's registry: the band entries, then the scalar ones. */
extern const dswa_kernel dswa_samel_kernels[];
extern const int dswa_samel_kernel_count;
extern const int dswa_samel_band_kernel_count;

/* The fused block's band kernel transforms whole 16-byte chunks of one phase (a 64-dim row of
   16-bit, a 32-dim half row of f32), and RoPE pairs dim j with j + rot_dims/2: so it takes
   rot_dims that are multiples of two chunks, within the first phase for f32. */
int dswa_samel_band_rot_ok(dswa_dtype dtype, int32_t rot_dims);
/* The band entry when wl + wr <= DSWA_BAND_MAX_SPAN (both >= 0; both < 0: any window, so
   never) and dswa_samel_band_rot_ok, else the scalar one; NULL for an unknown dtype. */
const dswa_kernel *dswa_samel_kernel_pick(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr,
                                          int32_t rot_dims);

/* ---- the backward (src/cuda/kernel_backward.cu) ------------------------------------------
   Its kernels have no AOT export and take int64 strides, so they are not in the registry
   above. Each block owns DSWA_BWD_ROWS rows of one (batch, head): grid (ceil(N / 16), H, B) of
   DSWA_THREADS threads, each warp DSWA_BWD_ROWS / DSWA_WARPS consecutive rows. Head dims up to
   DSWA_BWD_MAX_DIM (a lane owns dims lane and lane + 32). */
#define DSWA_BWD_ROWS 16
#define DSWA_BWD_MAX_DIM 64

/* The caller's workspace of the CUDA backward: a table of 6 floats per (batch, head, row)
   (each pair's max score, 1 / sum of exps, delta) at offset 0, then one double per block of
   the query kernel (its share of dlambda) at *partials_offset, a multiple of 256 bytes.
   Returns the total bytes (0 for an empty problem: batch, seq_len or heads <= 0), or SIZE_MAX
   when it does not fit a size_t. Plain C: the public size function (src/core/api.c) and the
   launcher both read it. */
size_t dswa_bwd_workspace_layout(int32_t batch, int32_t seq_len, int32_t heads,
                                 size_t *partials_offset, size_t *blocks);

/* ---- the fused block's backward (src/cuda/kernel_samel_backward.cu) ----------------------
   Its caller's workspace, in pieces at 256-byte offsets (byte offsets below), M = B*N*H*D:
   the recomputed r_q and r_k (2M floats each, [b][n][pair][h][d]), V and dout widened to fp32
   (M each, [b][n][h][d]), the op backward's gradients dr_q, dr_k (2M each) and summed dV (M),
   the op backward's own workspace (dswa_bwd_workspace_layout's bytes), and the epilogue's
   per-block partial sums of the norms' gradients: DSWA_SAMEL_BWD_PARTS doubles for each
   epilogue block of (DSWA_SAMEL_BWD_SHARE_ROWS positions, head, batch). */
#define DSWA_SAMEL_BWD_PARTS(D) (2 * (1 + 2 * (size_t)(D)))   /* per norm: dalpha, dgamma, dbeta */
#define DSWA_SAMEL_BWD_SHARE_ROWS 64                          /* positions per epilogue block */
typedef struct dswa_samel_bwd_ws {
    size_t rq, rk, v, dout, drq, drk, dv, op, partial;   /* offsets */
    size_t blocks;                                       /* of partials */
} dswa_samel_bwd_ws;
/* Fills *w and returns the total bytes: 0 for an empty problem (any size <= 0), SIZE_MAX when
   it does not fit a size_t. Plain C: the public size function (src/core/samel_api.c) and the
   launcher both read it. */
size_t dswa_samel_bwd_workspace_layout(int32_t batch, int32_t seq_len, int32_t heads,
                                       int32_t head_dim, dswa_samel_bwd_ws *w);

#ifdef __cplusplus
}
#endif
#endif
