/* What the fused block's CPU forward (cpu/samel.c) and CPU backward (cpu/samel_backward.c)
   share, so that the backward recomputes the very values the forward used: tanh, RoPE's
   angles and the whole prologue (DyT then RoPE). Not part of the public contract. */
#ifndef DSWA_CPU_SAMEL_CPU_H
#define DSWA_CPU_SAMEL_CPU_H

#include <stdint.h>
#include "dswa.h"
#include "core/convert.h"

/* tanh(x) in fp32 within 2.5 units in the last place (every float checked against tanh in
   double; glibc's tanhf is within 2), written so that a loop over it
   vectorizes (glibc's tanhf is a scalar call, and was two thirds of the prologue's time):
   tanh|x| = E / (E + 2) with E = expm1(2|x|) = 2^k (expm1(r) + 1) - 1, r = 2|x| - k ln2 in
   [-ln2/2, ln2/2] (two-part ln2), expm1(r) by its Taylor series to r^9 (error below 2^-30
   there); |x| > 20 is clamped (tanh is 1 in fp32 from 9.01 on). NaN stays NaN (the clamp
   tests the bits, as a float compare feeding a select would not vectorize); the sign is
   copied back, so tanh(-0) = -0. */
static inline float tanh_f32(float x) {
    const uint32_t ux = dswa_f32_to_bits(x), ua = ux & 0x7fffffffu;
    const uint32_t big = 0u - (uint32_t)((ua > 0x41a00000u) & (ua <= 0x7f800000u)); /* 20 < |x| */
    const float y = 2.0f * dswa_bits_to_f32((ua & ~big) | (0x41a00000u & big));
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float ks = y * 1.44269504088896341f + shift;
    const float k = ks - shift;
    const float r = (y - k * 0.693359375f) - k * -2.12194440e-4f;
    float p = 1.0f / 362880;
    p = p * r + 1.0f / 40320;
    p = p * r + 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    const float em = (p * r) * r + r;                                   /* expm1(r) */
    /* 2^k, k <= 58 */
    const float two_k = dswa_bits_to_f32((dswa_f32_to_bits(ks) - 0x4b400000u + 127u) << 23);
    const float e = two_k * em + (two_k - 1.0f);                        /* expm1(y) */
    return dswa_bits_to_f32(dswa_f32_to_bits(e / (e + 2.0f)) | (ux & 0x80000000u));
}

/* cos and sin (rot_dims / 2 each) of position i's angles fp32(pos * inv[f]), pos =
   fp32(pos_offset + i), inv the frequencies (dswa_samel_freqs). */
void dswa_samel_cpu_angles(const dswa_samel_problem *p, const float *inv, int64_t i, float *cs,
                           float *sn);
/* DyT then RoPE of q, k, q_diff and k_diff at every position, as the forward computes them
   (rounded to p->dtype), stored as `store` elements (p->dtype, or DSWA_F32, which holds them
   exactly) into qn and kn, each [b][n][pair][h][d] contiguous, pair 1 the _diff chunk.
   DSWA_ERR_OUT_OF_MEMORY, with nothing written, if its few floats of scratch cannot be had. */
dswa_status dswa_samel_cpu_prologue(const dswa_samel_problem *p, const void *qkv,
                                    dswa_dtype store, void *qn, void *kn);

#endif
