/* What the library's parts share behind the public API: the error helpers (core/error.h),
   element conversion (core/convert.h) and the two backends' entry points. Not part of the
   public contract. */
#ifndef DSWA_INTERNAL_H
#define DSWA_INTERNAL_H

#include <stdint.h>
#include "dswa.h"
#include "core/convert.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dswa_validate without the output: the problem's fields and strides, and q, k, v (non-NULL,
   spans within the address range). What dswa_reference_rows checks. */
dswa_status dswa_validate_inputs(const dswa_problem *p, const void *q, const void *k,
                                 const void *v);

/* dswa_validate_backward's checks of the problem, its layouts' strides and the inputs q, k,
   v, dout only: what dswa_reference_backward checks. */
dswa_status dswa_validate_backward_inputs(const dswa_backward_problem *p, const void *q,
                                          const void *k, const void *v, const void *dout);

/* One dimension of a view: its name (for messages), stride and extent. */
typedef struct dswa_vdim { const char *name; int64_t stride, extent; } dswa_vdim;
/* Distinct index tuples of the view with these n (at most 6) dimensions reach distinct
   offsets: -1 when they do, else the index of the first dimension, by stride, that does not,
   with *span the span of the smaller ones. The op's aliasing rule (core/validate.c), for the
   fused block's packed gradient too. */
int dswa_find_alias(const dswa_vdim *dim, int n, int64_t *span);

/* The CUDA backend, compiled from src/cuda/ when nvcc is present and otherwise from
   src/cuda/absent.c. Called only after dswa_validate succeeded and the problem is non-empty. */
dswa_status dswa_cuda_launch(const dswa_problem *p, const void *q, const void *k,
                             const void *v, void *out, void *stream);
/* The fused SAME-L block's CUDA backend; same precondition (dswa_samel_validate). */
dswa_status dswa_cuda_samel_launch(const dswa_samel_problem *p, const void *qkv, void *out,
                                   void *stream);
/* 1 when a device of compute capability 8.0 or newer is current; else 0 with a message. */
int dswa_cuda_probe(void);

/* What both CUDA backwards check of their workspace first: need bytes (their sizing function,
   named by sizer, gave need; 0: no workspace needed), ws there, bytes >= need, ws align-byte
   aligned. Overlaps are each backward's own check. */
dswa_status dswa_check_workspace_room(size_t need, const void *ws, size_t bytes, size_t align,
                                      const char *sizer);

/* The CUDA backward (src/cuda/kernel_backward.cu; src/cuda/absent.c without nvcc). Called
   after dswa_validate_backward and the workspace checks succeeded and the device was probed;
   an empty problem only writes dlambda = 0. workspace: dswa_bwd_workspace_layout's bytes. */
dswa_status dswa_cuda_backward_launch(const dswa_backward_problem *p, const void *q,
                                      const void *k, const void *v, const void *dout, void *dq,
                                      void *dk, void *dv, float *dlambda, void *workspace,
                                      void *stream);

/* The fused block's CUDA backward (src/cuda/kernel_samel_backward.cu; src/cuda/absent.c
   without nvcc). Called after dswa_samel_validate_backward and the workspace checks succeeded
   and the device was probed; an empty problem only writes g's gradients as 0. workspace:
   dswa_samel_bwd_workspace_layout's bytes, 256-byte aligned. */
dswa_status dswa_cuda_samel_backward_launch(const dswa_samel_backward_problem *p,
                                            const void *qkv, const void *dout, void *dqkv,
                                            const dswa_samel_norm_grads *g, void *workspace,
                                            void *stream);

/* The CPU backend (src/cpu/cpu_backend.c); same precondition. */
dswa_status dswa_cpu_run(const dswa_problem *p, const void *q, const void *k,
                         const void *v, void *out);
/* The fused SAME-L block's CPU backend (src/cpu/samel.c); same precondition
   (dswa_samel_validate). */
dswa_status dswa_samel_cpu_run(const dswa_samel_problem *p, const void *qkv, void *out);

/* The CPU backward (src/cpu/backward.c); called only after dswa_validate_backward succeeded
   and the problem is non-empty. */
dswa_status dswa_cpu_backward(const dswa_backward_problem *p, const void *q, const void *k,
                              const void *v, const void *dout, void *dq, void *dk, void *dv,
                              float *dlambda);
/* The fused SAME-L block's CPU backward (src/cpu/samel_backward.c); called only after
   dswa_samel_validate_backward succeeded and the problem is non-empty. */
dswa_status dswa_samel_cpu_backward(const dswa_samel_backward_problem *p, const void *qkv,
                                    const void *dout, void *dqkv, const dswa_samel_norm_grads *g);

#ifdef __cplusplus
}
#endif
#endif
