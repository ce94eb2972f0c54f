/* The CUDA backend's entry points, called by the public API (src/api/) after it validated the
   call. Compiled from src/cuda/ when nvcc is present, otherwise from src/cuda/absent.c. */
#ifndef DSWA_CUDA_BACKEND_H
#define DSWA_CUDA_BACKEND_H

#include <stddef.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA backend, compiled from src/cuda/ when nvcc is present and otherwise from
   src/cuda/absent.c. Called only after dswa_validate succeeded and the problem is non-empty. */
dswa_status dswa_cuda_launch(const dswa_problem *p, const void *q, const void *k,
                             const void *v, void *out, void *stream);
/* The fused SAME-L block's CUDA backend; same precondition (dswa_samel_validate). */
dswa_status dswa_cuda_samel_launch(const dswa_samel_problem *p, const void *qkv, void *out,
                                   void *stream);
/* 1 when a device of compute capability 8.0 or newer is current; else 0 with a message. */
int dswa_cuda_probe(void);

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

#ifdef __cplusplus
}
#endif
#endif
