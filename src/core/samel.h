/* What the fused SAME-L block's validation (core/samel_validate.c) and its CPU backend
   (cpu/samel.c) share. Not part of the public contract. */
#ifndef DSWA_CORE_SAMEL_H
#define DSWA_CORE_SAMEL_H

#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The op the block ends in: p's sizes, windows, scale, lambda, dtype, math and out, with q
   and k as views of the packed input (pair 1 three chunks after pair 0) and v its chunk 2,
   shared (v.pair = 0). The q, k, v pointers that go with it are qkv + 0, 1, 2 chunks. */
dswa_problem dswa_samel_op_problem(const dswa_samel_problem *p);

/* The CPU backend (cpu/samel.c). Called only after dswa_samel_validate succeeded and the
   problem is non-empty. */
dswa_status dswa_samel_cpu_run(const dswa_samel_problem *p, const void *qkv, void *out);

#ifdef __cplusplus
}
#endif
#endif
