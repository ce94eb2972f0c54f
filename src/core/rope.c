/* RoPE's frequencies: the rule that fills them from a base (upstream's float32 inv_freq), and
   the table every backend reads, the problem's own (rope_freq) or that rule's. */
#include <math.h>

#include "core/internal.h"
#include "core/samel.h"

dswa_status dswa_rope_frequencies(int32_t rot_dims, float base, float *freq) {
    if (rot_dims < 0 || rot_dims % 2)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rot_dims = %d: must be even and >= 0",
                         rot_dims);
    if (!(base > 0.0f) || !isfinite(base))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rope_base = %g: must be finite and > 0",
                         (double)base);
    if (!freq && rot_dims > 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "freq = NULL: needs rot_dims / 2 = %d floats",
                         rot_dims / 2);
    /* 1 / base^(2f / rot_dims) in double, rounded once: the float32 value upstream's
       1.0 / (base ** (arange(0, rot, 2).float() / rot)) holds (within its own rounding) */
    for (int32_t f = 0; f < rot_dims / 2; f++)
        freq[f] = (float)(1.0 / pow((double)base, 2.0 * f / rot_dims));
    return DSWA_OK;
}

void dswa_samel_freqs(const dswa_samel_problem *p, float *freq) {
    const int32_t c = p->rot_dims / 2;
    if (p->rope_freq)
        memcpy(freq, p->rope_freq, (size_t)c * sizeof(float));
    else
        (void)dswa_rope_frequencies(p->rot_dims, p->rope_base, freq);   /* validated */
}
