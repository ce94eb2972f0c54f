/* What the float64 references (ref64.c, ref64_backward.c) share: reading elements. Not part
   of the public contract. */
#ifndef DSWA_REF_REF64_H
#define DSWA_REF_REF64_H

#include <stdint.h>
#include "dswa.h"

/* Element `idx` (in elements, not bytes) of a buffer of `dtype`, as a double: exact for every
   f32, f16 and bf16 value, decoded by the reference's own code. */
double dswa_ref_load(const void *buf, int64_t idx, dswa_dtype dtype);
/* Element offset of [b, i, p, h, d] in a view (p = 0 for an output's). */
int64_t dswa_ref_offset(const dswa_layout *l, int64_t b, int64_t i, int64_t p, int64_t h,
                        int64_t d);

#endif
