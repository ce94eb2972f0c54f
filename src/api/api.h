/* What the public entry points (src/api/) share among themselves: the top layer, which
   validates each call (src/core/) and hands it to a backend (src/cpu/, src/cuda/). */
#ifndef DSWA_API_API_H
#define DSWA_API_API_H

#include <stddef.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What both CUDA backwards check of their workspace first: need bytes (their sizing function,
   named by sizer, gave need; 0: no workspace needed), ws there, bytes >= need, ws align-byte
   aligned. Overlaps are each backward's own check. */
dswa_status dswa_check_workspace_room(size_t need, const void *ws, size_t bytes, size_t align,
                                      const char *sizer);

/* Whether the CUDA kernels serve head_dim (they implement DSWA_HEAD_DIM only): 0 with
   DSWA_ERR_UNSUPPORTED recorded otherwise. */
int dswa_cuda_head_dim_ok(int32_t head_dim);

/* A window as the kernels see it: at most seq_len - 1 keys on a side. */
static inline int32_t dswa_window_seen(int32_t window, int32_t seq_len) {
    const int32_t n1 = seq_len > 0 ? seq_len - 1 : 0;
    return window < n1 ? window : n1;
}

#ifdef __cplusplus
}
#endif
#endif
