/* A float64 reference of the fused SAME-L block (dswa_samel_problem in dswa.h), written from
   the block's description and sharing no code with src/ (nor with the library's own float64
   reference of the op): plain loops, its own element decoders and its own rounding.

   Rounding model (upstream's module run in `dtype`, as torch.compile fuses it; parameters fp32):
     x      the packed input element, decoded exactly;
     y      = gamma * tanh(alpha * x) + beta, in float64, then rounded to dtype (f16, bf16:
              round to nearest even, overflow to inf; f32: not rounded - the float64 value
              stands for the fp32 computation);
     RoPE   on y's first rot_dims dims: pos = fp32(pos_offset + i), inv_freq[f] = rope_freq[f]
              when given, else fp32(1 / base^(2f / rot_dims)), angle = fp32(pos * inv_freq[f]) (upstream builds
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

/* cos and sin of RoPE's angle f at position i, as the model computes it. */
void tu_samel_ref64_angle(const dswa_samel_problem *p, int64_t i, int f, double *co, double *si);
/* One head row after DyT and RoPE: chunk ch (0 q, 1 k, 3 q_diff, 4 k_diff) of position i,
   head h, batch b, into y[0 .. head_dim). */
void tu_samel_ref64_row(const dswa_samel_problem *p, const void *qkv, int64_t b, int64_t i,
                        int ch, int64_t h, double *y);
/* The whole block into out, a dense [B][N][H][D] array of doubles. p must be valid (the
   caller checks with dswa_samel_validate); aborts if it cannot allocate. */
void tu_samel_ref64(const dswa_samel_problem *p, const void *qkv, double *out);

/* The block's backward (dswa.h's math) in float64, written from the math, not from src/: the
   forward's r recomputed by tu_samel_ref64_row, the op's part by the library's float64
   reference of the op's backward (dswa_reference_backward, independent of the backends), then
   RoPE transposed and DyT's derivative in double, every sum serial. r reaches the op's
   reference in the problem's dtype: exactly the model's r for f16 and bf16 (it rounds r to
   them), r rounded to fp32 for f32 (2^-24 relative, far below the f32 tolerance). Out:
   dqkv, dense [B][N][5][H][D]; dnorm, per norm (q_norm, then k_norm) dalpha, dgamma[D],
   dbeta[D] (2 * (1 + 2D) doubles); dnorm_scale (unless NULL), shaped as dnorm, for each the
   square root of the sum of its terms' squares: the scale its rounding errors grow with,
   whatever the sum cancels to (k_norm's dbeta is 0 without RoPE). An empty problem gives
   zeros. p must be valid; aborts if it cannot allocate. */
void tu_samel_ref64_backward(const dswa_samel_backward_problem *p, const void *qkv,
                             const void *dout, double *dqkv, double *dnorm, double *dnorm_scale);

#ifdef __cplusplus
}
#endif
#endif
