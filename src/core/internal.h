/* What every layer shares behind the public API: the error helpers (core/error.h), element
   conversion (core/convert.h), the validation the references reuse and the aliasing rule.
   The bottom layer: it calls nothing above it. Not part of the public contract. */
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

/* A window as the kernels see it: one wider than the sequence sees the same keys as one of
   seq_len - 1 (0 for an empty sequence, which dswa_kernel_name may be asked about). */
static inline int32_t dswa_window_seen(int32_t window, int32_t seq_len) {
    return window < seq_len ? window : seq_len > 0 ? seq_len - 1 : 0;
}

#ifdef __cplusplus
}
#endif
#endif
