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

#ifdef __cplusplus
}
#endif
#endif
