/* What the op's backward kernels share: their argument struct (every kernel of both families
   reads one, passed by value) and the tensor-core family's entry points, which the launcher in
   kernel_backward.cu picks with dswa_bwd_band_ok. Device and host code of the .cu files only. */
#ifndef DSWA_CUDA_BACKWARD_CUH
#define DSWA_CUDA_BACKWARD_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "core/internal.h"

/* Everything the backward's kernels read; passed by value. */
struct bwd_args {
    const void *q, *k, *v, *dout;
    void *dq, *dk, *dv;
    float *table;      /* [B][H][N][pair][3]: per query row and pair, the softmax's statistics
                          and delta, written by the query kernel, read by the key kernel (the
                          two families write them in their own units) */
    double *partial;   /* [B][H][ceil(N / DSWA_BWD_ROWS)]: the query kernel's shares of
                          dlambda, one per DSWA_BWD_ROWS rows; NULL: none */
    float *dlambda;    /* device float or NULL */
    dswa_layout lq, lk, lv, ldout, ldq, ldk, ldv;
    int batch, n, heads, dim, wl, wr, tiles, sum_dv;
    float scale, lambda;
};

/* Whether the tensor-core family (kernel_backward_band.cu) takes the problem: 16-bit, head_dim
   64, window_left + window_right <= DSWA_BAND_MAX_SPAN (as clamped in *a), every row of every
   tensor 16-byte aligned with unit dim stride. Everything else goes to the general kernels. */
bool dswa_bwd_band_ok(const bwd_args &a, dswa_dtype dtype);
/* Launches the family's query and key kernels for a (dswa_bwd_band_ok); grid (ceil(N / 64), H, B). */
cudaError_t dswa_bwd_band_launch(const bwd_args &a, dswa_dtype dtype, cudaStream_t s);

#endif
