/* A float64 reference of the fused SAME-L block (dswa_samel_problem in dswa.h), written from
   the block's description and sharing no code with src/ (nor with the library's own float64
   reference of the op): plain loops, its own element decoders and its own rounding.

   Rounding model (upstream's module run in `dtype`, as torch.compile fuses it; parameters fp32):
     x      the packed input element, decoded exactly;
     y      = gamma * tanh(alpha * x) + beta, in float64, then rounded to dtype (f16, bf16:
              round to nearest even, overflow to inf; f32: not rounded - the float64 value
              stands for the fp32 computation);
     RoPE   on y's first rot_dims dims: pos = fp32(pos_offset + i), inv_freq[f] =
              fp32(1 / base^(2f / rot_dims)), angle = fp32(pos * inv_freq[f]) (upstream builds
              its angles in fp32, and at large positions their rounding is larger than the
              f32 tolerance: the reference models it exactly), cos and sin in float64, the
              rotation in float64, then rounded to dtype as y was;
     attention  in float64 on those values: scores, softmax with the max subtracted, both
              pairs reading the one v (chunk 2, decoded exactly), out = a_0 - lambda a_1.
   The output is left in float64 (the library rounds it to dtype: the tolerance's part). */
#ifndef DSWA_TESTS_SAMEL_REF64_H
#define DSWA_TESTS_SAMEL_REF64_H

#include <stdint.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x rounded to dtype as the model rounds it (f32: x itself). */
double tu_samel_round(double x, dswa_dtype dt);

/* One head row after DyT and RoPE: chunk ch (0 q, 1 k, 3 q_diff, 4 k_diff) of position i,
   head h, batch b, into y[0 .. head_dim). */
void tu_samel_ref64_row(const dswa_samel_problem *p, const void *qkv, int64_t b, int64_t i,
                        int ch, int64_t h, double *y);
/* The whole block into out, a dense [B][N][H][D] array of doubles. p must be valid (the
   caller checks with dswa_samel_validate); aborts if it cannot allocate. */
void tu_samel_ref64(const dswa_samel_problem *p, const void *qkv, double *out);

#ifdef __cplusplus
}
#endif
#endif
