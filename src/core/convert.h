/* f16 / bf16 <-> fp32 element conversion for the library's host code (the CPU backend, the
   public dswa_convert_*). Not part of the public contract. */
#ifndef DSWA_CORE_CONVERT_H
#define DSWA_CORE_CONVERT_H

#include <stdint.h>
#include <string.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Round to nearest even; NaN stays NaN, overflow becomes inf. */
static inline float dswa_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t dswa_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float dswa_bf16_to_f32(uint16_t h) { return dswa_bits_to_f32((uint32_t)h << 16); }
static inline uint16_t dswa_f32_to_bf16(float f) {
    uint32_t u = dswa_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float dswa_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return dswa_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {                      /* zero or subnormal: man * 2^-24 */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return dswa_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}
static inline uint16_t dswa_f32_to_f16(float f) {
    uint32_t u = dswa_f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);            /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);           /* rounds to inf */
    if (a < 0x38800000u) {                                             /* subnormal/zero */
        /* value * 2^24 rounded to nearest even is the subnormal mantissa */
        float m = dswa_bits_to_f32(a) * 16777216.0f;
        uint32_t r = (uint32_t)m;
        float frac = m - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

/* Element off of a buffer of dtype dt, as a float; and x (rounded to nearest even) stored there. */
static inline float dswa_load_elem(const void *base, int64_t off, dswa_dtype dt) {
    if (dt == DSWA_F32) return ((const float *)base)[off];
    const uint16_t h = ((const uint16_t *)base)[off];
    return dt == DSWA_F16 ? dswa_f16_to_f32(h) : dswa_bf16_to_f32(h);
}
static inline void dswa_store_elem(void *base, int64_t off, dswa_dtype dt, float x) {
    if (dt == DSWA_F32) ((float *)base)[off] = x;
    else ((uint16_t *)base)[off] = dt == DSWA_F16 ? dswa_f32_to_f16(x) : dswa_f32_to_bf16(x);
}

#ifdef __cplusplus
}
#endif
#endif
