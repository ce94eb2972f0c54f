/* dswa — differential sliding-window attention (the attention op of SAME-L).
 *
 * For batch b, query i, output head h and pair p in {0, 1}:
 *   J(i)   = { j : max(0, i - window_left) <= j <= min(N - 1, i + window_right) }
 *   s_p(j) = scale * <Q[b,i,p,h,:], K[b,j,p,h,:]>
 *   a_p    = sum_{j in J(i)} softmax_j(s_p)(j) * V[b,j,p,h,:]
 *   out[b,i,h,:] = a_0 - lambda * a_1            (fp32 accumulation and subtraction)
 *
 * Every tensor is described by element strides of a [batch, seq, pair, head, dim] view, so
 * contiguous (B, N, 2H, D) tensors, packed projection outputs and slices are all read in place.
 * Functions return a dswa_status; on failure dswa_last_error() names the field and the value,
 * and nothing has been written to `out`.
 */
#ifndef DSWA_H
#define DSWA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSWA_VERSION_MAJOR 0
#define DSWA_VERSION_MINOR 1
#define DSWA_VERSION_PATCH 0
#define DSWA_VERSION_STRING "0.1.0"

typedef enum dswa_status {
    DSWA_OK = 0,
    DSWA_ERR_INVALID_ARGUMENT = 1,  /* a field or pointer is wrong; nothing was written   */
    DSWA_ERR_UNSUPPORTED = 2,       /* valid, but this backend does not implement it      */
    DSWA_ERR_MISALIGNED = 3,        /* pointer/stride alignment this backend cannot take  */
    DSWA_ERR_NO_DEVICE = 4,         /* no CUDA device, or a build without CUDA            */
    DSWA_ERR_CUDA = 5,              /* a CUDA call failed                                 */
    DSWA_ERR_OUT_OF_MEMORY = 6,
} dswa_status;

typedef enum dswa_dtype { DSWA_F32 = 0, DSWA_F16 = 1, DSWA_BF16 = 2 } dswa_dtype;
typedef enum dswa_math  { DSWA_MATH_DEFAULT = 0, DSWA_MATH_TF32 = 1, DSWA_MATH_FP32 = 2 } dswa_math;

/* Element strides of a [batch, seq, pair, head, dim] view (the output ignores `pair`). */
typedef struct dswa_layout { int64_t batch, seq, pair, head, dim; } dswa_layout;

typedef struct dswa_problem {
    int32_t batch, seq_len, heads, head_dim;   /* B, N, H (output heads; inputs hold 2H), D */
    int32_t window_left, window_right;         /* key j is seen by query i iff i-left <= j <= i+right */
    float scale, lambda;                       /* out = A(pair 0) - lambda * A(pair 1) */
    dswa_dtype dtype;                          /* of Q, K, V and out alike */
    dswa_math math;                            /* f32 matrix math: TF32, or fp32-accurate */
    dswa_layout q, k, v, out;                  /* v.pair == 0: both pairs read the same V */
} dswa_problem;

/* Contiguous (B, N, 2H, D) inputs and (B, N, H, D) output, window_left = window_right =
   window, scale = 1/sqrt(D), lambda = 1, DSWA_F32, DSWA_MATH_DEFAULT. */
dswa_problem dswa_problem_default(int32_t batch, int32_t seq_len, int32_t heads,
                                  int32_t head_dim, int32_t window);

dswa_status dswa_forward_cpu(const dswa_problem *p, const void *q, const void *k,
                             const void *v, void *out);
/* stream is a cudaStream_t (NULL = default stream); pointers are device memory. */
dswa_status dswa_forward_cuda(const dswa_problem *p, const void *q, const void *k,
                              const void *v, void *out, void *stream);

const char *dswa_status_string(dswa_status s);
const char *dswa_last_error(void);   /* this thread's message for its last failure */

/* ---- additions beyond the original contract ---------------------------------------- */

/* Checks a problem and its pointers exactly as both forward functions do, without
   computing anything. DSWA_OK or DSWA_ERR_INVALID_ARGUMENT (with a message). */
dswa_status dswa_validate(const dswa_problem *p, const void *q, const void *k,
                          const void *v, const void *out);

/* Bytes of one element of `dtype` (4 or 2); 0 for an unknown dtype. */
size_t dswa_dtype_size(dswa_dtype dtype);
const char *dswa_dtype_name(dswa_dtype dtype);   /* "f32", "f16", "bf16", or "?" */
const char *dswa_math_name(dswa_math math);      /* "default", "tf32", "fp32", or "?" */

/* Number of elements spanned by a view (1 + the largest offset), for sizing buffers;
   `pairs` is 2 for inputs and 1 for the output. 0 if any extent is 0. */
int64_t dswa_view_span(const dswa_problem *p, const dswa_layout *l, int pairs);

/* Minimum device-memory traffic of one forward call, in bytes: Q and K for 2H heads, V for
   2H heads (H when v.pair == 0), the output for H heads. The bandwidth floor's numerator. */
double dswa_min_bytes(const dswa_problem *p);
/* Useful floating-point operations: 2 matrix products per pair over each query's window. */
double dswa_useful_flops(const dswa_problem *p);

/* 1 when this build contains the CUDA backend and a device is visible, else 0. */
int dswa_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif /* DSWA_H */
