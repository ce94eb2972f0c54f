/* The CUDA launcher's host interface to the rest of the library (src/cuda/launch.cu). */
#ifndef DSWA_CUDA_LAUNCH_H
#define DSWA_CUDA_LAUNCH_H

#include "dswa.h"
#include "cuda/kernel_args.h"
#include "cuda/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks what the CUDA kernels need beyond validation (head_dim, alignment, int32 ranges, the
   fp32-accurate math's window limit), fills the int32 extras as a launch passes them
   (windows clamped to N - 1) and sets *kern to the kernel dswa_kernel_pick chooses for them;
   a status with a message otherwise. */
dswa_status dswa_cuda_kargs(const dswa_problem *p, const void *q, const void *k, const void *v,
                            const void *out, dswa_kargs *a, const dswa_kernel **kern);

/* The same for the fused SAME-L block: its extras as the launch passes them and the kernel
   dswa_samel_kernel_pick chooses (x: the packed input). p is already validated. */
dswa_status dswa_cuda_samel_kargs(const dswa_samel_problem *p, const void *x, const void *out,
                                  dswa_samel_kargs *a, const dswa_kernel **kern);

/* The entry functions of each family, in the order of its X-list in kernels.h (defined beside
   the kernels: kernel_band.cu, kernel_wide.cu, kernel_samel_scalar.cu). */
const void *dswa_band_entry_function(int index);
const void *dswa_wide_entry_function(int index);
const void *dswa_samel_band_entry_function(int index);
const void *dswa_samel_scalar_entry_function(int index);
/* The fused block's second entries, with the alphas' device pointers as two more arguments
   (kernel_args.h's DSWA_SAMEL_ALPHA_AT_PARAMS), in the same order. */
const void *dswa_samel_band_alpha_at_function(int index);
const void *dswa_samel_scalar_alpha_at_function(int index);

#ifdef __cplusplus
}
#endif
#endif
