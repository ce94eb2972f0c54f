/* The CPU backend's entry points, called by the public API (src/api/) after it validated the
   call. */
#ifndef DSWA_CPU_BACKEND_H
#define DSWA_CPU_BACKEND_H

#include <stddef.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

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
