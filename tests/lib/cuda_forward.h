/* dswa_forward_cuda for host buffers, so the CPU test cases can run through the GPU path:
   each view's span is copied to its own device buffer, the output view's span (gaps included)
   is copied there and back around the call. Without CUDA in the build it returns
   DSWA_ERR_NO_DEVICE. */
#ifndef DSWA_TESTS_CUDA_FORWARD_H
#define DSWA_TESTS_CUDA_FORWARD_H

#include <stdint.h>
#include "dswa.h"

dswa_status tu_forward_cuda_host(const dswa_problem *p, const void *q, const void *k,
                                 const void *v, void *out);
/* Rounds n f32 values to TF32 (10-bit mantissa, nearest even), in place. */
void tu_round_tf32(void *buf, int64_t n);

#endif
