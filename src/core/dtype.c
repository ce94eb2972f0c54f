/* The element types and math modes: their sizes, their names (the one spelling, which the
   parsers read back) and element conversion. */
#include <string.h>
#include "core/convert.h"
#include "core/error.h"

static const char *const dtype_names[] = {"f32", "f16", "bf16"};   /* by dswa_dtype */
static const char *const math_names[] = {"default", "tf32", "fp32"}; /* by dswa_math */
#define N_DTYPES (int)(sizeof dtype_names / sizeof dtype_names[0])
#define N_MATHS (int)(sizeof math_names / sizeof math_names[0])

size_t dswa_dtype_size(dswa_dtype t) {
    switch (t) {
    case DSWA_F32: return 4;
    case DSWA_F16: case DSWA_BF16: return 2;
    }
    return 0;
}

const char *dswa_dtype_name(dswa_dtype t) {
    return (unsigned)t < (unsigned)N_DTYPES ? dtype_names[t] : "?";
}

const char *dswa_math_name(dswa_math m) {
    return (unsigned)m < (unsigned)N_MATHS ? math_names[m] : "?";
}

dswa_status dswa_dtype_parse(const char *name, dswa_dtype *out) {
    for (int i = 0; name && i < N_DTYPES; i++)
        if (!strcmp(name, dtype_names[i])) {
            if (out) *out = (dswa_dtype)i;
            return DSWA_OK;
        }
    return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dtype = %s: must be f32, f16 or bf16",
                     name ? name : "NULL");
}

dswa_status dswa_math_parse(const char *name, dswa_math *out) {
    for (int i = 0; name && i < N_MATHS; i++)
        if (!strcmp(name, math_names[i])) {
            if (out) *out = (dswa_math)i;
            return DSWA_OK;
        }
    return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "math = %s: must be default, tf32 or fp32",
                     name ? name : "NULL");
}

void dswa_convert_from_f32(dswa_dtype dtype, const float *src, void *dst, size_t n) {
    uint16_t *d16 = (uint16_t *)dst;
    switch (dtype) {
    case DSWA_F32: memmove(dst, src, n * sizeof(float)); break;
    case DSWA_F16: for (size_t i = 0; i < n; i++) d16[i] = dswa_f32_to_f16(src[i]); break;
    case DSWA_BF16: for (size_t i = 0; i < n; i++) d16[i] = dswa_f32_to_bf16(src[i]); break;
    }
}

void dswa_convert_to_f32(dswa_dtype dtype, const void *src, float *dst, size_t n) {
    const uint16_t *s16 = (const uint16_t *)src;
    switch (dtype) {
    case DSWA_F32: memmove(dst, src, n * sizeof(float)); break;
    case DSWA_F16: for (size_t i = 0; i < n; i++) dst[i] = dswa_f16_to_f32(s16[i]); break;
    case DSWA_BF16: for (size_t i = 0; i < n; i++) dst[i] = dswa_bf16_to_f32(s16[i]); break;
    }
}
