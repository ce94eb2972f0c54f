/* What the op's backward kernels share: their argument struct (every kernel of both families
   reads one, passed by value) and the tensor-core family's entry points, which the launcher in
   kernel_backward.cu picks with dswa_bwd_band_ok. Device and host code of the .cu files only. */
#ifndef DSWA_CUDA_BACKWARD_CUH
#define DSWA_CUDA_BACKWARD_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "core/internal.h"

/* The fused SAME-L block's epilogue at the tensor-core family's gradient stores (dx NULL: the
   op's own stores). q and k are then the block's r (DyT then RoPE, in the dtype), and dq, dk
   its dr: each is turned at its store into the packed gradient's chunk (dq's pairs: q,
   q_diff; dk's: k, k_diff) by RoPE transposed and DyT's derivative with the packed input's
   element, and each block sums its rows' terms of the norms' gradients (the query kernel
   q_norm's, the key kernel k_norm's); dv, summed, is the packed gradient's chunk 2 (the
   caller points dv there). */
struct bwd_fused {
    const void *x;                      /* the packed input, the dtype */
    void *dx;                           /* the packed gradient */
    dswa_samel_layout lx, ldx;
    const float *gamma[2];              /* q_norm's, k_norm's: D floats */
    float alpha[2];
    const float *alpha_at[2];           /* read instead of alpha where not NULL */
    double *partial;                    /* [B][H][ceil(N / 64)][norm][1 + 2D]: each block's sums
                                           (dalpha, dgamma, dbeta), the order fixed; NULL: none */
    int rot_dims, pos_offset;           /* rot_dims a multiple of 16: RoPE's partners in-thread */
    float base;
};

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
    bwd_fused fused;   /* the tensor-core family only */
};

/* Whether the tensor-core family (kernel_backward_band.cu) takes the problem: 16-bit, head_dim
   64, window_left + window_right <= DSWA_BAND_MAX_SPAN (as clamped in *a), every row of every
   tensor 16-byte aligned with unit dim stride. Everything else goes to the general kernels. */
bool dswa_bwd_band_ok(const bwd_args &a, dswa_dtype dtype);
/* Launches the family's query and key kernels for a (dswa_bwd_band_ok); grid (ceil(N / 64), H, B). */
cudaError_t dswa_bwd_band_launch(const bwd_args &a, dswa_dtype dtype, cudaStream_t s);

/* Whether the tensor-core family takes *p with these buffers (dswa_bwd_band_ok). */
bool dswa_cuda_backward_band_takes(const dswa_backward_problem *p, const void *q, const void *k,
                                   const void *v, const void *dout, const void *dq, const void *dk,
                                   const void *dv);
/* The fused block's backward on the tensor-core family with its epilogue at the stores (f):
   q, k the block's r, v and dout read in place, dv the packed gradient's chunk 2 (the problem's
   dq and dk layouts: the packed gradient's, as dswa_cuda_backward_band_takes was asked about).
   Only for problems it accepts with f->rot_dims a multiple of 16; the caller has checked
   everything else. */
dswa_status dswa_cuda_backward_fused(const dswa_backward_problem *p, const void *q, const void *k,
                                     const void *v, const void *dout, void *dv, const bwd_fused *f,
                                     void *workspace, cudaStream_t s);

#endif
