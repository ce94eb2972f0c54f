/* The fused SAME-L block's element transform, DyT then RoPE (dswa.h describes the math), and
   its exact scalar path. Shared by the band kernel's shared-memory pass (kernel_band.cu) and
   the scalar kernel (kernel_samel_scalar.cu), whose per-warp body is the band kernel's exact
   path for non-finite results too, so both compute every element with the same functions.

   Why these functions: the band kernel transforms each Q and K element as it arrives, about
   as many instructions as the op spends per element, so the transform must be a handful of
   instructions. tanh and sin/cos run on the special-function unit (MUFU): tanh.approx.f32
   (relative error about 2^-11, as large as TF32's rounding and below a 16-bit ulp), and
   sin/cos of an angle first reduced to [-pi, pi] exactly enough (fp32 Cody-Waite, or double
   for |angle| > 2^16), where __sinf/__cosf are within 2^-21.4 absolute. DSWA_MATH_FP32 takes
   tanhf (fp32-accurate). RoPE's frequencies come as kernel arguments (freq0 ... freq31,
   kernel_args.h: the model's own, or the library's rule from a base), gathered once per warp
   with lane J holding frequency J. */
#ifndef DSWA_CUDA_SAMEL_CUH
#define DSWA_CUDA_SAMEL_CUH

#include "cuda/common.cuh"
#include "cuda/kernel_args.h"

/* The kernel parameters' types (kernel_args.h's DSWA_SAMEL_KERNEL_PARAMS): the packed input is
   of the dtype, the norms' weights fp32. */
constexpr bool dswa_samel_is_x(const char *s) { return s[0] == 'x' && s[1] == '\0'; }
template <typename T, bool IS_X> struct dswa_samel_input { typedef float type; };
template <typename T> struct dswa_samel_input<T, true> { typedef T type; };

template <int ACCURATE> __device__ __forceinline__ float samel_tanh(float x) {
    if (ACCURATE) return tanhf(x);
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* A norm's alpha: from device memory where the caller keeps it there (dswa_samel_norm.alpha_at),
   else the kernel argument's float bits. */
__device__ __forceinline__ float samel_alpha(const float *at, int bits) {
    return at ? __ldg(at) : __int_as_float(bits);
}

/* DyT of one element: gamma * tanh(alpha * x) + beta, in fp32. */
template <int ACCURATE>
__device__ __forceinline__ float samel_dyt(float x, float alpha, float gamma, float beta) {
    return fmaf(gamma, samel_tanh<ACCURATE>(alpha * x), beta);
}

/* sin and cos of an angle (already rounded to fp32, as the reference rounds it) with |a| <=
   2^16: a - k 2pi with 2pi = C1 - 1.7484555e-7 (C1 = 2pi rounded to fp32), the FMA's product
   exact, the result within 2^-23 of the true remainder. For a caller that knows every angle
   of its launch is that small (no per-angle test and branch); the same bits as samel_sincos. */
__device__ __forceinline__ void samel_sincos_small(float a, float *s, float *c) {
    const float k = rintf(a * 0.159154943091895336f);
    const float r = fmaf(k, 1.74845553e-7f, fmaf(-k, 6.28318548202514648f, a));
    *s = __sinf(r);
    *c = __cosf(r);
}
#define SAMEL_SMALL_ANGLE 65536.f

/* sin and cos of any angle: larger ones (large positions, pos_offset) reduced in double,
   exact for |a| < 2^31. */
__device__ __forceinline__ void samel_sincos(float a, float *s, float *c) {
    if (fabsf(a) <= SAMEL_SMALL_ANGLE) return samel_sincos_small(a, s, c);
    const double k = rint((double)a * 0.15915494309189535);
    const float r = (float)(fma(-k, 6.283185307179586, (double)a) - k * 2.4492935982947064e-16);
    *s = __sinf(r);
    *c = __cosf(r);
}

/* RoPE of the pair (a, b) = (y[j], y[j + c]): (a cos - b sin, b cos + a sin). */
__device__ __forceinline__ void samel_rotate(float *a, float *b, float cs, float sn) {
    const float x = *a, y = *b;
    *a = fmaf(x, cs, -y * sn);
    *b = fmaf(y, cs, x * sn);
}

/* This lane's RoPE frequency, lane J holding frequency J: the kernel's arguments freq0 ...
   freq31 (in scope where it is used) picked by compares, not through an indexed array, which
   would go to local memory. */
#define SAMEL_PICK_FREQ_(j) f_ = lane_ == (j) ? __int_as_float(freq##j) : f_;
#define SAMEL_LANE_FREQ(out)                                                                  \
    do {                                                                                      \
        const int lane_ = threadIdx.x & 31;                                                   \
        float f_ = 0.f;                                                                       \
        DSWA_ROPE_FREQS(SAMEL_PICK_FREQ_)                                                     \
        (out) = f_;                                                                           \
    } while (0)

/* x rounded to T and back: where the 16-bit reference rounds q and k. */
template <typename T> __device__ __forceinline__ float samel_round(float x) {
    return dswa_to_f32(dswa_from_f32<T>(x));
}

/* The frequency of the rotation dim d takes part in (0 for a dim RoPE passes through), from
   the warp's lane frequencies (SAMEL_LANE_FREQ). Called by whole warps. */
__device__ __forceinline__ float samel_dim_freq(int d, int rot_dims, float lane_freq) {
    const int c = rot_dims / 2;
    const float f = __shfl_sync(0xffffffffu, lane_freq, (d < c ? d : d - c) & 31);
    return d < 2 * c ? f : 0.f;
}

/* One transformed element of a q or k row: dim d of the row at `row` (the chunk's data at one
   batch, position, head), at position pos, with norm (alpha, gamma, beta); rotated dims read
   their partner d +- c from the row too; invf = samel_dim_freq(d, ...). */
template <typename T, int ACCURATE>
__device__ __forceinline__ float samel_element(const T *row, int d, float pos, float alpha,
                                               const float *gamma, const float *beta,
                                               int rot_dims, float invf) {
    float y = samel_round<T>(samel_dyt<ACCURATE>(dswa_to_f32(row[d]), alpha, __ldg(gamma + d), __ldg(beta + d)));
    const int c = rot_dims / 2;
    if (d >= 2 * c) return y;
    const int e = d < c ? d + c : d - c;
    float w = samel_round<T>(samel_dyt<ACCURATE>(dswa_to_f32(row[e]), alpha, __ldg(gamma + e), __ldg(beta + e)));
    float sn, cs;
    samel_sincos(pos * invf, &sn, &cs);
    if (d < c) samel_rotate(&y, &w, cs, sn);
    else samel_rotate(&w, &y, cs, sn);
    return samel_round<T>(y);
}

/* The exact block for the 16 rows row0 .. row0 + 15 of one warp (batch b, head h): each
   query's q and q_diff, and each key of its window, transformed by samel_element, then the
   op's exact scalar attention (online softmax in fp32, touching only keys inside the window, so
   a NaN elsewhere cannot leak in). Lane owns dims 2 lane and 2 lane + 1. Called by whole
   warps: by the scalar kernel for every row, by the band kernel for a warp whose result was
   not finite. */
template <typename T, int ACCURATE>
__device__ __noinline__ void samel_exact_rows(const T *x, const float *q_gamma, const float *q_beta,
                                              const float *k_gamma, const float *k_beta, T *out,
                                              int n, int wl, int wr, float scale, float lambda,
                                              int x_sb, int x_sn, int x_sc, int x_sh, int o_sb,
                                              int o_sn, int o_sh, int rot_dims, float lane_freq,
                                              int pos_offset, float q_alpha, float k_alpha,
                                              int b, int h, int row0) {
    const int d = 2 * (threadIdx.x & 31);
    const float f0 = samel_dim_freq(d, rot_dims, lane_freq), f1 = samel_dim_freq(d + 1, rot_dims, lane_freq);
    const T *xb = x + (int64_t)b * x_sb + (int64_t)h * x_sh;
    for (int i = row0; i < row0 + 16 && i < n; i++) {
        const int lo = i - wl < 0 ? 0 : i - wl, hi = i + wr > n - 1 ? n - 1 : i + wr;
        const float pi = (float)((int64_t)pos_offset + i);
        float res[2] = {0.f, 0.f};
        for (int p = 0; p < 2; p++) {
            const T *qr = xb + (int64_t)i * x_sn + (int64_t)(3 * p) * x_sc;
            const float q0 = samel_element<T, ACCURATE>(qr, d, pi, q_alpha, q_gamma, q_beta, rot_dims, f0);
            const float q1 = samel_element<T, ACCURATE>(qr, d + 1, pi, q_alpha, q_gamma, q_beta, rot_dims, f1);
            float m = -INFINITY, l = 0.f, o[2] = {0.f, 0.f};
            for (int j = lo; j <= hi; j++) {
                const T *kr = xb + (int64_t)j * x_sn + (int64_t)(1 + 3 * p) * x_sc;
                const T *vr = xb + (int64_t)j * x_sn + (int64_t)2 * x_sc + d;
                const float pj = (float)((int64_t)pos_offset + j);
                const float k0 = samel_element<T, ACCURATE>(kr, d, pj, k_alpha, k_gamma, k_beta, rot_dims, f0);
                const float k1 = samel_element<T, ACCURATE>(kr, d + 1, pj, k_alpha, k_gamma, k_beta, rot_dims, f1);
                const float s = scale * dswa_warp_sum(q0 * k0 + q1 * k1);
                const float mnew = s > m ? s : m;
                const float muse = mnew == -INFINITY ? 0.f : mnew;
                const float corr = expf(m - muse), e = expf(s - muse);
                m = mnew;
                l = l * corr + e;
                o[0] = o[0] * corr + e * dswa_to_f32(vr[0]);
                o[1] = o[1] * corr + e * dswa_to_f32(vr[1]);
            }
            const float f = p ? -lambda / l : 1.f / l;
            res[0] += f * o[0];
            res[1] += f * o[1];
        }
        T *orow = out + (int64_t)b * o_sb + (int64_t)i * o_sn + (int64_t)h * o_sh + d;
        orow[0] = dswa_from_f32<T>(res[0]);
        orow[1] = dswa_from_f32<T>(res[1]);
    }
}

#endif
