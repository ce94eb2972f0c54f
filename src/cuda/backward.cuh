/* What the op's backward kernels share: their argument struct (every kernel of both families
   reads one, passed by value) and the tensor-core family's entry points, which the launcher in
   kernel_backward.cu picks with dswa_bwd_band_ok. Device and host code of the .cu files only. */
#ifndef DSWA_CUDA_BACKWARD_CUH
#define DSWA_CUDA_BACKWARD_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "core/internal.h"
#include "cuda/backend.h"

/* Whether every row a tensor's strides reach from base is 16-byte aligned with unit dim stride:
   base aligned, dim == 1 and each of the n outer strides (elements of es bytes) a multiple of
   16 bytes. The one rule of the 16-byte-row kernels, the tensor-core backward's (dswa_bwd_band_ok)
   and the fused backward's vector prologue. */
static inline bool dswa_rows16(const void *base, const int64_t *strides, int n, int64_t dim, size_t es) {
    bool ok = (uintptr_t)base % 16 == 0 && dim == 1;
    for (int t = 0; t < n; t++) ok = ok && (strides[t] * (int64_t)es) % 16 == 0;
    return ok;
}

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
    int f32_grads;     /* dq and dk are fp32, dv in the dtype (the tensor-core family only; see below) */
    dswa_math math;    /* the problem's: f32 on TF32, or three TF32 products for DSWA_MATH_FP32 */
    float scale, lambda;
};

/* Whether the tensor-core family (kernel_backward_band.cu) takes the problem: any dtype (f32
   on TF32), head_dim 64, window_left + window_right <= DSWA_BAND_MAX_SPAN (as clamped in *a),
   every row of every tensor 16-byte aligned with unit dim stride. Everything else goes to the
   general kernels. */
bool dswa_bwd_band_ok(const bwd_args &a, dswa_dtype dtype);
/* Launches the family's query and key kernels for a (dswa_bwd_band_ok); grid (ceil(N / 64), H,
   B), ceil(N / 32) for f32. */
cudaError_t dswa_bwd_band_launch(const bwd_args &a, dswa_dtype dtype, cudaStream_t s);

/* Whether the tensor-core family takes *p with these buffers (dswa_bwd_band_ok). */
bool dswa_cuda_backward_band_takes(const dswa_backward_problem *p, const void *q, const void *k,
                                   const void *v, const void *dout, const void *dq, const void *dk,
                                   const void *dv);
/* The op's backward from 16-bit inputs to fp32 dq and dk on the tensor-core family, for the
   fused block's backward, whose epilogue transforms them and rounds once at its store; dv in
   the dtype (the block's gradient of V, as it is). dq's and dk's layouts count fp32 elements.
   Only for problems dswa_cuda_backward_f32_grads_takes accepts (the caller asks it first, to
   pick its scratch's type); the caller has checked everything else. */
bool dswa_cuda_backward_f32_grads_takes(const dswa_backward_problem *p, const void *q, const void *k,
                                        const void *v, const void *dout, const void *dq,
                                        const void *dk, const void *dv);
dswa_status dswa_cuda_backward_f32_grads(const dswa_backward_problem *p, const void *q, const void *k,
                                         const void *v, const void *dout, float *dq, float *dk,
                                         void *dv, void *workspace, cudaStream_t s);

#endif
