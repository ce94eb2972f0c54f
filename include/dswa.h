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
/* The CUDA kernel entry dswa_forward_cuda launches for *p (after the same checks, with no
   pointer looked at), e.g. "dswa_fwd_bf16"; NULL with a message when p is refused or no
   kernel computes it (DSWA_MATH_FP32 with window_left + window_right above 48 after clamping
   to N - 1: the fp32-accurate kernel is the band kernel only). A static string. */
const char *dswa_kernel_name(const dswa_problem *p);

const char *dswa_status_string(dswa_status s);
const char *dswa_last_error(void);   /* this thread's message for its last failure */

/* ---- checks, sizes and element types ------------------------------------------------- */

/* Checks a problem and its pointers exactly as both forward functions do, without
   computing anything. DSWA_OK or DSWA_ERR_INVALID_ARGUMENT (with a message). */
dswa_status dswa_validate(const dswa_problem *p, const void *q, const void *k,
                          const void *v, const void *out);

/* Bytes of one element of `dtype` (4 or 2); 0 for an unknown dtype. */
size_t dswa_dtype_size(dswa_dtype dtype);
const char *dswa_dtype_name(dswa_dtype dtype);   /* "f32", "f16", "bf16", or "?" */
const char *dswa_math_name(dswa_math math);      /* "default", "tf32", "fp32", or "?" */
/* The names above read back (exactly, lower case): DSWA_OK, or DSWA_ERR_INVALID_ARGUMENT with
   a message listing the names; *out is untouched on failure. */
dswa_status dswa_dtype_parse(const char *name, dswa_dtype *out);
dswa_status dswa_math_parse(const char *name, dswa_math *out);

/* Element conversion between float and a dtype's storage: f16 and bf16 round to nearest even
   (overflow to inf, NaN stays NaN), f32 is copied. n elements; an unknown dtype does nothing. */
void dswa_convert_from_f32(dswa_dtype dtype, const float *src, void *dst, size_t n);
void dswa_convert_to_f32(dswa_dtype dtype, const void *src, float *dst, size_t n);

/* Number of elements spanned by a view (1 + the largest offset), for sizing buffers;
   `pairs` is 2 for inputs and 1 for the output. 0 if any extent is 0, -1 if the span does
   not fit in int64. */
int64_t dswa_view_span(const dswa_problem *p, const dswa_layout *l, int pairs);

/* Minimum device-memory traffic of one forward call, in bytes: Q and K for 2H heads, V for
   2H heads (H when v.pair == 0), the output for H heads. The bandwidth floor's numerator. */
double dswa_min_bytes(const dswa_problem *p);
/* Useful floating-point operations: 2 matrix products per pair over each query's window. */
double dswa_useful_flops(const dswa_problem *p);

/* 1 when this build contains the CUDA backend and a device is visible, else 0. */
int dswa_cuda_available(void);
/* The instruction set dswa_forward_cpu runs with on this machine, chosen at run time as the
   widest the CPU and OS support: "avx512", "avx2" (with FMA) or "sse2" (the x86-64 baseline);
   "generic" on other targets. A static string. */
const char *dswa_cpu_isa(void);

/* ---- float64 reference ------------------------------------------------------------- */
/* The math above in double precision, written plainly (one query at a time, every score
   materialised, the maximum subtracted before exp) and sharing no code with the kernels:
   its own element decoders, exact for every f32, f16 and bf16 value. For checking outputs of
   dswa_forward_* (or of anything else computing the op): query rows [row_begin, row_end) of
   every batch and head into out, a contiguous (B, row_end - row_begin, H, D) array of
   doubles, out[((b * R + (i - row_begin)) * H + h) * D + d]. p's fields and q, k, v are
   checked as dswa_validate checks them (out is this double array: p->out's strides are
   checked but not read); 0 <= row_begin <= row_end <= seq_len. A NaN in a query's window carries to its row as the
   arithmetic carries it. Host memory; runs on the CPU (OpenMP threads where built with it). */
dswa_status dswa_reference_rows(const dswa_problem *p, const void *q, const void *k,
                                const void *v, int32_t row_begin, int32_t row_end, double *out);

/* ---- backward ------------------------------------------------------------------------ */
/* The gradients of the op above (not of the fused block): given dout = dL/d(out), for each
   batch b, head h and pair p, with P_p the softmax weights of the forward, A_p the pair's
   attention output, and c_0 = 1, c_1 = -lambda:
     dA_p[i]   = c_p * dout[b,i,h,:]
     dP_p(i,j) = <dA_p[i], V[b,j,p,h,:]>,  dS_p(i,j) = P_p(i,j) * (dP_p(i,j) - <dA_p[i], A_p[i]>)
     dq[b,i,p,h,:] = scale * sum_{j in J(i)} dS_p(i,j) * K[b,j,p,h,:]
     dk[b,j,p,h,:] = scale * sum_{i : j in J(i)} dS_p(i,j) * Q[b,i,p,h,:]
     dv[b,j,p,h,:] = sum_{i : j in J(i)} P_p(i,j) * dA_p[i]
     dlambda       = -sum_{b,i,h,d} dout[b,i,h,d] * A_1[b,i,h,d]
   Gradients are of the views' elements: dq, dk and dv have the input's [batch, seq, pair,
   head, dim] shape, each with its own strides. dv.pair == 0 asks for one dV for both pairs,
   holding the sum of their contributions: the gradient of a V that both pairs read (SAME-L's
   shared V), whatever v.pair is; otherwise each pair's own is written. Nothing is saved from
   the forward: what the backward needs is recomputed. Results are deterministic: bitwise the
   same on every run and for every number of threads (no atomics; every sum in a fixed order).
   docs/BACKWARD.md has the memory, the order of the sums and what is not built yet. */

typedef struct dswa_backward_problem {
    dswa_problem fwd;          /* the forward's problem: sizes, windows, scalars, dtype, math
                                  and the layouts of q, k, v (fwd.out is not read: dout has
                                  its own; its strides are checked as the forward's are) */
    dswa_layout dout;          /* [batch, seq, -, head, dim] like out (pair ignored); any strides,
                                  0 included: dout is read only */
    dswa_layout dq, dk, dv;    /* [batch, seq, pair, head, dim]; distinct elements must not share
                                  memory, except through dv.pair == 0 (the summed dV) */
} dswa_backward_problem;

/* The backward of *fwd with gradients laid out like their inputs (dq like q, dk like k, dv
   like v: a V shared through v.pair == 0 gets the summed dV) and dout like fwd->out. */
dswa_backward_problem dswa_backward_problem_default(const dswa_problem *fwd);
/* Minimum device-memory traffic of one backward call, in bytes: Q and K for 2H heads, V for
   2H heads (H when fwd.v.pair == 0) and dout (H heads) read; dQ and dK for 2H heads and dV
   for 2H heads (H when dv.pair == 0: the summed dV) written. *dlambda and the workspace are
   not counted. The backward's bandwidth floor's numerator (`dswa bench --backward`). */
double dswa_backward_min_bytes(const dswa_backward_problem *p);

/* Checks a problem and its pointers exactly as the backward functions do, computing nothing:
   the forward's checks on p->fwd and q, k, v (same messages), then dout, dq, dk, dv as views
   (non-NULL, within the address range), the gradients' elements distinct, no gradient sharing
   a byte with an input (q, k, v, dout: compared by spans, as the forward compares out) or an
   element with another gradient (packed gradients, e.g. chunks of one (B, N, 5*H*D) buffer,
   are fine), and *dlambda (when not NULL) sharing no byte with any of them. DSWA_OK or
   DSWA_ERR_INVALID_ARGUMENT with a message naming the field and its value. As for the forward,
   batch or seq_len 0 is a valid no-op whose pointers are not checked. */
dswa_status dswa_validate_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                   const void *v, const void *dout, const void *dq,
                                   const void *dk, const void *dv, const float *dlambda);

/* Host memory. Writes every element of dq, dk and dv (in the problem's dtype) and, when
   dlambda is not NULL, *dlambda (0 for an empty problem). fp32 arithmetic like the forward
   (p->fwd.math is for GPU backends); dlambda is summed in double. Allocates an O(B*N*H)
   table of per-row softmax statistics and per-thread rows, never N x N
   (DSWA_ERR_OUT_OF_MEMORY if it cannot). On any failure nothing has been written. */
dswa_status dswa_backward_cpu(const dswa_backward_problem *p, const void *q, const void *k,
                              const void *v, const void *dout, void *dq, void *dk, void *dv,
                              float *dlambda);

/* Bytes of device workspace dswa_backward_cuda needs for *p: a table of 6 floats per (batch,
   row, head) plus 8 bytes per 16 rows of each batch and head (about 24*B*N*H bytes; 0 for an
   empty problem or p NULL; SIZE_MAX when it does not fit a size_t). It depends on batch,
   seq_len and heads only. */
size_t dswa_backward_workspace_bytes(const dswa_backward_problem *p);

/* The backward on the GPU: device memory, stream a cudaStream_t (NULL = default stream).
   dlambda is a device pointer to one float, or NULL: then dlambda is not computed. workspace:
   device memory of at least dswa_backward_workspace_bytes(p) bytes (workspace_bytes says how
   many there are), 16-byte aligned, sharing no byte with the tensors or *dlambda; its
   contents need no initialisation and are scratch after the call (NULL when 0 bytes are
   needed). The call launches kernels on `stream` and returns: no allocation, no
   synchronisation, so it can be captured in a CUDA graph (with the workspace it was given).
   Checks: dswa_validate_backward's, then the workspace's (DSWA_ERR_INVALID_ARGUMENT,
   DSWA_ERR_MISALIGNED), then head_dim <= 64, seq_len <= 2^30 and batch, heads <= 65535
   (DSWA_ERR_UNSUPPORTED) and element-aligned pointers (DSWA_ERR_MISALIGNED); any layout the
   CPU backward takes otherwise (int64 strides). On any refusal nothing has been written.
   Arithmetic: f32 where the band below applies: tensor cores with fp32 accumulation, on TF32
   for DSWA_MATH_DEFAULT and DSWA_MATH_TF32 (as the forward's TF32: about 1e-3, relative), as
   three TF32 products each for DSWA_MATH_FP32 (fp32-accurate, as the forward's); elsewhere
   fp32 FMA: gradients within about 1e-6 of the exact ones, relative. 16-bit: fp32 arithmetic, rounded once at the store; where
   the forward's band kernel applies (head_dim 64, window_left + window_right <= 48, rows
   16-byte aligned with unit dim stride) the products run on tensor cores with fp32
   accumulation, the softmax weights and dS entering them as two 16-bit terms (about 16
   significant bits), so the error stays that of the rounding at the store. dlambda
   is summed in double. Deterministic: bitwise the same on every run (no atomics; every sum in
   a fixed order; docs/BACKWARD.md). An empty problem writes *dlambda = 0 only. */
dswa_status dswa_backward_cuda(const dswa_backward_problem *p, const void *q, const void *k,
                               const void *v, const void *dout, void *dq, void *dk, void *dv,
                               float *dlambda, void *workspace, size_t workspace_bytes,
                               void *stream);

/* The backward in double precision, written from the math above and sharing no code with the
   backends (nor with dswa_reference_rows beyond the element decoders): for each query, its
   softmax row recomputed, dS with the row sum of P * dP, and every gradient accumulated
   serially (scattered into dk and dv). Dense doubles [B][N][P][H][D], element
   ((((b * N + i) * P + pair) * H + h) * D + d), with P = 2 for dq and dk, and for dv P = 1
   when p->dv.pair == 0 (the summed dV), else 2; *dlambda when dlambda is not NULL.
   Inputs are checked as dswa_validate_backward checks them (the gradient layouts' strides
   too; they are not otherwise read). Host memory; OpenMP threads where built with it. */
dswa_status dswa_reference_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                    const void *v, const void *dout, double *dq, double *dk,
                                    double *dv, double *dlambda);

/* ---- The fused SAME-L attention block ---------------------------------------------- */
/* SAME-L's whole attention block between its to_qkv and to_out projections, from the packed
   projection X (B, N, 5*H*D), read in place as chunks q, k, v, q_diff, k_diff (in that order),
   to the heads' output (B, N, H*D). For batch b, position i, head h:
     1. DyT qk-norm over the D dims: y = gamma * tanh(alpha * x) + beta, with q_norm's
        (alpha, gamma, beta) for q and q_diff and k_norm's for k and k_diff.
     2. RoPE on the first rot_dims dims of y, in fp32: pos = (float)(pos_offset + i), angle =
        pos * freq[f] rounded to fp32 for f < rot_dims / 2, with freq the model's frequencies
        (rope_freq; by default dswa_rope_frequencies': fp32(base^(-2f / rot_dims))), as
        upstream builds its table; with c = rot_dims / 2, dim j < c pairs with j + c
        (non-interleaved rotate_half): y'[j] = y[j] cos - y[j+c] sin, y'[j+c] = y[j+c] cos +
        y[j] sin. Dims from rot_dims on pass through.
     3. The op above (dswa_problem's math, windows, scale, lambda) with pairs (q, q_diff) and
        (k, k_diff), both reading the one v.
   Rounding (as upstream's module in `dtype`, fused the way torch.compile fuses it): DyT in
   fp32, its result rounded to dtype; RoPE in fp32 on that rounded value, rounded to dtype;
   then the op on those 16-bit (or f32) q and k, as dswa_forward_* computes it. For f32 no
   rounding happens beyond fp32 arithmetic. A NaN reaches the outputs whose window it is in,
   as the op's do (DyT maps +-inf to finite values: tanh saturates). */

/* Element strides of the packed projection viewed as [batch, seq, chunk, head, dim], chunk
   0-4 = q, k, v, q_diff, k_diff. Contiguous (B, N, 5*H*D): {5NHD, 5HD, HD, D, 1}. */
typedef struct dswa_samel_layout { int64_t batch, seq, chunk, head, dim; } dswa_samel_layout;

/* One DyT qk-norm: gamma and beta point to head_dim floats each (fp32; host memory for the
   CPU backend, device memory for a CUDA one). alpha is a host float, checked finite; or, when
   alpha_at is not NULL, the one fp32 alpha_at points to (memory of the same kind, 4-byte
   aligned), read by the call when it runs and `alpha` ignored: a learned alpha that a
   training step updates on the device, with no host read (capturable). The CPU backend checks
   that value as it checks alpha; a CUDA call cannot look at it (a non-finite alpha at
   alpha_at gives non-finite results where it reaches them). */
typedef struct dswa_samel_norm {
    float alpha;
    const float *gamma, *beta;
    const float *alpha_at;
} dswa_samel_norm;

typedef struct dswa_samel_problem {
    int32_t batch, seq_len, heads, head_dim;   /* B, N, H, D */
    int32_t window_left, window_right;         /* as in dswa_problem */
    float scale, lambda;                       /* as in dswa_problem */
    dswa_dtype dtype;                          /* of the packed input and out alike */
    dswa_math math;                            /* as in dswa_problem */
    dswa_samel_layout qkv;                     /* the packed input */
    dswa_layout out;                           /* [batch, seq, -, head, dim]; pair ignored */
    int32_t rot_dims;                          /* even, 0 <= rot_dims <= head_dim; 0: no RoPE */
    float rope_base;                           /* finite, > 0; read when rope_freq is NULL */
    const float *rope_freq;                    /* NULL (the frequencies from rope_base), or the
                                                  rot_dims / 2 frequencies the model holds: host
                                                  memory for every backend (finite floats, read
                                                  during the call; a CUDA launch takes them as
                                                  kernel arguments, so a captured graph keeps
                                                  them). Upstream's inv_freq buffer as it is in
                                                  the model: a 16-bit model's, rounded, converted
                                                  to float */
    int32_t pos_offset;                        /* >= 0; pos_offset + seq_len - 1 fits int32 */
    dswa_samel_norm q_norm, k_norm;            /* for q and q_diff; for k and k_diff */
} dswa_samel_problem;

/* RoPE's default frequencies: freq[f] = 1 / base^(2f / rot_dims) rounded once to fp32 (upstream
   builds its float32 inv_freq with torch's float32 pow, which may differ by an ulp: to match
   a model exactly, pass its own inv_freq as rope_freq), for f < rot_dims / 2 (rot_dims even, 0 to 64; base finite, > 0). The
   one rule every backend and the bindings use when a problem gives no rope_freq. DSWA_OK, or
   DSWA_ERR_INVALID_ARGUMENT naming the field (freq untouched). */
dswa_status dswa_rope_frequencies(int32_t rot_dims, float base, float *freq);

/* SAME-L's block: D = 64, window 17 both ways, scale 1/8, lambda 1, rot_dims 32, base 10000,
   pos_offset 0, DSWA_F32, DSWA_MATH_DEFAULT, contiguous (B, N, 5*H*64) input and (B, N, H*64)
   output; both norms alpha 1 with gamma and beta NULL (learned weights: the caller sets them). */
dswa_samel_problem dswa_samel_problem_default(int32_t batch, int32_t seq_len, int32_t heads);

/* Checks a problem and its pointers exactly as both forward functions do: DSWA_OK or
   DSWA_ERR_INVALID_ARGUMENT with a message naming the field and its value. As for the op,
   batch or seq_len 0 is a valid no-op whose pointers are not checked. */
dswa_status dswa_samel_validate(const dswa_samel_problem *p, const void *qkv, const void *out);
/* Host memory. Allocates temporaries of 4*B*N*H*D elements (DSWA_ERR_OUT_OF_MEMORY if it
   cannot; nothing written). */
dswa_status dswa_samel_forward_cpu(const dswa_samel_problem *p, const void *qkv, void *out);
/* Device memory (qkv, out, and the norms' gamma and beta); stream is a cudaStream_t. One
   kernel launch, no allocation, no synchronisation: capturable in a CUDA graph. The kernel
   (dswa_samel_kernel_name names it) is the band kernel with DyT and RoPE applied to each Q
   and K tile in shared memory as it arrives, when window_left + window_right <= 48 and the
   rotated dims fall on whole 16-byte chunks of one phase (rot_dims a multiple of 16 for f16
   and bf16; a multiple of 8 up to 32 for f32: SAME-L's 32 is); otherwise a scalar kernel
   that is exact for every valid problem but slow (about one warp per 16 queries, recomputing
   each key's DyT and RoPE). Accuracy: DyT's tanh and RoPE's sin and cos use the GPU's
   special-function unit (tanh within about 2^-11 relative, sin and cos within 2^-21
   absolute after an exact argument reduction), so a 16-bit q or k may differ from the
   reference's rounding by one unit in the last place; DSWA_MATH_FP32 computes tanh to fp32
   accuracy. */
dswa_status dswa_samel_forward_cuda(const dswa_samel_problem *p, const void *qkv, void *out,
                                    void *stream);
/* The CUDA kernel entry dswa_samel_forward_cuda launches for *p (after the same checks, with
   no pointer looked at: TensorRT's are 256-byte aligned), e.g. "dswa_samel_bf16" or
   "dswa_samel_scalar_bf16" (with a norm's alpha_at set, the library launches that entry's
   twin, the name with "_alpha_at" appended, which takes the two alpha pointers as two more
   arguments and is not exported); NULL with a message when p is refused. A static string. */
const char *dswa_samel_kernel_name(const dswa_samel_problem *p);
/* Minimum device-memory traffic of one fused call, in bytes: the packed input (5 chunks of
   B*N*H*D elements) read once and the output (B*N*H*D) written once (the norms' 4*D floats
   are not counted). The bandwidth floor's numerator. */
double dswa_samel_min_bytes(const dswa_samel_problem *p);

/* The fused block's backward: given dout = dL/d(out), the gradient of the packed projection
   (all five chunks) and of both norms' alpha, gamma and beta. With t an element of chunk q,
   k, q_diff or k_diff, u = tanh(alpha * t), y = gamma * u + beta and r its RoPE (angle
   theta_f(pos) as in step 2), the op's backward above (pairs (q, q_diff) and (k, k_diff), one
   dV summed over both pairs: chunk 2's gradient) gives dr; then, per row of D dims:
     dy[j]   = dr[j] cos + dr[j+c] sin,  dy[j+c] = dr[j+c] cos - dr[j] sin   (j < c: RoPE
               transposed, the rotation by -theta); dy[d] = dr[d] from rot_dims on
     dgamma += dy * u,  dbeta += dy,  du = dy * gamma,
     dt      = du * alpha * (1 - u^2),  dalpha += sum_d du * t * (1 - u^2)
   the norms' sums running over batch, position, head and both chunks each norm serves. The
   forward's roundings to a 16-bit dtype count as the identity (as autograd has them). Nothing
   is saved from the forward: the backward recomputes it. Deterministic: bitwise the same on
   every run and for every number of threads. docs/BACKWARD.md has the memory and the order of
   the sums. */

typedef struct dswa_samel_backward_problem {
    dswa_samel_problem fwd;    /* the forward's problem (fwd.out is not read: dout has its own
                                  layout; its strides are checked as the forward's are) */
    dswa_layout dout;          /* [batch, seq, -, head, dim] like out (pair ignored); any strides,
                                  0 included: dout is read only */
    dswa_samel_layout dqkv;    /* the packed gradient, [batch, seq, chunk, head, dim]: distinct
                                  elements at distinct addresses */
} dswa_samel_backward_problem;

/* The backward of *fwd with dqkv laid out like fwd->qkv and dout like fwd->out. */
dswa_samel_backward_problem dswa_samel_backward_problem_default(const dswa_samel_problem *fwd);
/* Minimum device-memory traffic of one fused backward call, in bytes: the packed input (5
   chunks of B*N*H*D elements) and dout (B*N*H*D) read once, the packed gradient (5 chunks)
   written once; the norms' parameters and gradients (fp32, 2 + 4*D floats) and the workspace
   are not counted. The bandwidth floor's numerator (`dswa bench --op samel --backward`). */
double dswa_samel_backward_min_bytes(const dswa_samel_backward_problem *p);

/* Where one norm's gradients go: 1, head_dim and head_dim floats (fp32 whatever the dtype;
   host memory for the CPU backend). Each is written, not added to. */
typedef struct dswa_samel_norm_grad {
    float *dalpha, *dgamma, *dbeta;
} dswa_samel_norm_grad;
typedef struct dswa_samel_norm_grads {
    dswa_samel_norm_grad q_norm, k_norm;   /* of fwd.q_norm (q, q_diff) and fwd.k_norm (k, k_diff) */
} dswa_samel_norm_grads;

/* Checks a problem and its pointers exactly as the backward functions do, computing nothing:
   the forward's checks on p->fwd and qkv (same messages), dout as a view (non-NULL, within
   the address range), dqkv (non-NULL, within the address range, distinct elements at distinct
   addresses), dqkv sharing no byte with an input (qkv, dout, the norms' gamma and beta) and,
   when g is not NULL, its six pointers non-NULL and sharing no byte with an input, with dqkv
   or with each other. DSWA_OK or DSWA_ERR_INVALID_ARGUMENT with a message naming the field
   and its value. Batch or seq_len 0 is a valid no-op whose qkv, dout, dqkv and norm pointers
   are not checked (g's are: an empty problem's norm gradients are written, as 0). */
dswa_status dswa_samel_validate_backward(const dswa_samel_backward_problem *p, const void *qkv,
                                         const void *dout, const void *dqkv,
                                         const dswa_samel_norm_grads *g);

/* Host memory. Writes every element of dqkv's view (in the problem's dtype) and, when g is
   not NULL, the norms' gradients (fp32; 0 for an empty problem). fp32 arithmetic, the norms'
   sums in double. Allocates about 11*B*N*H*D floats of scratch plus per-thread rows
   (DSWA_ERR_OUT_OF_MEMORY if it cannot). On any failure nothing has been written. */
dswa_status dswa_samel_backward_cpu(const dswa_samel_backward_problem *p, const void *qkv,
                                    const void *dout, void *dqkv, const dswa_samel_norm_grads *g);

/* Bytes of device workspace dswa_samel_backward_cuda needs for *p: fp32 scratch of 11 floats
   per element of one chunk (r_q, r_k, their gradients, V, dout, dV), the op backward's table
   and the norms' per-block partial sums: about B*N*H*(44.5*head_dim + 25) bytes (300 MB at
   SAME-L's B = 1, N = 4352, H = 24); 0 for an empty problem or p NULL; SIZE_MAX when it does
   not fit a size_t. It depends on batch, seq_len, heads and head_dim only. */
size_t dswa_samel_backward_workspace_bytes(const dswa_samel_backward_problem *p);

/* The fused block's backward on the GPU: qkv, dout, dqkv, the norms' gamma and beta and g's
   six pointers in device memory; stream a cudaStream_t (NULL = default stream); workspace:
   device memory of at least dswa_samel_backward_workspace_bytes(p) bytes, 256-byte aligned,
   sharing no byte with anything else. No allocation, no synchronisation: capturable in a CUDA
   graph with the workspace it was given. Checks: dswa_samel_validate_backward's, then the
   workspace's (DSWA_ERR_INVALID_ARGUMENT naming it: NULL, too small, or sharing a byte with
   qkv, dout, dqkv, the norms' gamma and beta or g's pointers; DSWA_ERR_MISALIGNED: not
   256-byte aligned, as dswa_backward_cuda's), then
   head_dim <= 64, seq_len <= 2^30 and batch, heads <= 65535 (DSWA_ERR_UNSUPPORTED) and pointers
   aligned to their elements (DSWA_ERR_MISALIGNED); any layout the CPU backward takes otherwise.
   Arithmetic: fp32 (tanh fp32-accurate, as the forward's fp32 math computes it), 16-bit
   gradients rounded once, when dqkv is stored; the norms' sums in double; the op's products as
   dswa_backward_cuda computes them (f32: on TF32 unless p->fwd.math is DSWA_MATH_FP32). Deterministic as the CPU backward: bitwise the same on every run (no floating-point
   atomics; the norms' sums in a fixed order). An empty problem writes g's gradients as 0 only
   (when g is not NULL). On any refusal nothing has been written. */
dswa_status dswa_samel_backward_cuda(const dswa_samel_backward_problem *p, const void *qkv,
                                     const void *dout, void *dqkv, const dswa_samel_norm_grads *g,
                                     void *workspace, size_t workspace_bytes, void *stream);

/* ---- AOT export for TensorRT ------------------------------------------------------- */
/* The CUDA kernels as TensorRT's AOT plugin path (tensorrt.plugin.aot_impl) wants them: PTX
   text with a plain `.target sm_XX` and the lowest `.version` the target and the instructions
   allow, one entry per module, taking its arguments in TensorRT's order (input pointers q, k,
   v; then 20 int32 extras; then the output pointer), and the launch geometry as formulas of
   B (batch), N (sequence length), H (output heads; inputs hold 2H) and D (= 64). The PTX was
   produced by nvcc when the library was built and is embedded in it: exporting needs no CUDA
   toolkit. It is the code the library itself runs (same source, flags and entry). Exported
   architectures: sm_80, sm_86, sm_89, sm_90, sm_100, sm_120 (PTX JIT-compiles forward, so the
   closest one below a newer GPU also runs there). A build without nvcc has no PTX: every
   function below then returns DSWA_ERR_UNSUPPORTED. */

typedef enum dswa_aot_param_kind {
    DSWA_AOT_INPUT = 0,   /* a device pointer TensorRT passes first (q, k, v)      */
    DSWA_AOT_EXTRA = 1,   /* an int32 scalar: TensorRT's "extra" arguments          */
    DSWA_AOT_OUTPUT = 2,  /* a device pointer TensorRT passes last (out)            */
} dswa_aot_param_kind;

typedef struct dswa_aot_param {
    const char *name;          /* the kernel's parameter name: "q", "n", "wl", "q_sb", ..., "out" */
    dswa_aot_param_kind kind;
    const char *meaning;       /* what it is and what it is computed from */
    /* Extras: the value as a formula of B, N, H, D (and WL, WR for a window-free export) for
       contiguous SAME-L tensors: Q, K, V (B, N, 2H, D), out (B, N, H, D). "float_bits(x)" is
       the int32 whose bits are the fp32 x. Pointers: the tensor's shape. */
    const char *expr;
    const char *expr_shared_v; /* the same when V is (B, N, H, D), shared by both pairs */
    int32_t value;             /* extras of dswa_aot_kernel_for: the value for its problem */
} dswa_aot_param;

#define DSWA_AOT_MAX_PARAMS 54   /* the op has 24 (3 + 20 + 1), the fused block 54 (5 + 48 + 1) */
#define DSWA_AOT_ROPE_FREQS 32   /* the fused block's frequency extras: rot_dims / 2 for a
                                    head_dim of at most 64 */

typedef struct dswa_aot_info {
    const char *kernel_name;   /* the PTX .entry, e.g. "dswa_fwd_bf16" */
    const char *family;        /* "band" (window_left + window_right <= max_span); "wide" (any
                                  window) for the op, "scalar" (any window) for the fused block */
    int max_span;              /* band: the largest window_left + window_right it takes; wide: -1 */
    const char *target;        /* "sm_90": the plain .target written */
    const char *ptx;           /* the module: NUL-terminated PTX text, owned by this info */
    size_t ptx_size;           /* strlen(ptx) */
    int ptx_isa_major, ptx_isa_minor;          /* the .version written */
    int ptx_isa_min_major, ptx_isa_min_minor;  /* the lowest the target and instructions allow */
    const char *ptx_isa_min_reason;            /* why, e.g. "target sm_90 (PTX ISA 7.8 introduced it)" */
    int toolkit_isa_major, toolkit_isa_minor;  /* the .version nvcc stamped at build time */
    dswa_dtype dtype;
    dswa_math math;            /* f32: DSWA_MATH_TF32, or DSWA_MATH_FP32 (dswa_fwd_f32_fp32) */
    int head_dim;              /* 64: the only head_dim the kernels take */
    int32_t window_left, window_right; /* as asked for; -1 when the export is for any window */
    int n_params, n_inputs, n_extras, n_outputs;  /* op 24 = 3 + 20 + 1; samel 54 = 5 + 48 + 1 */
    dswa_aot_param params[DSWA_AOT_MAX_PARAMS];   /* in launch order */
    unsigned block[3];                  /* threads per block: 128, 1, 1 */
    unsigned shared_bytes;              /* static shared memory the PTX declares (<= 48 KB) */
    unsigned dynamic_shared_bytes;      /* 0: the launch passes no dynamic shared memory */
    const char *grid[3];       /* grid x, y, z as formulas of B, N, H ("//" is floor division):
                                  one block per 64 queries of one head and batch */
    int has_problem;           /* 1 after dswa_aot_kernel_for: values and grid_dims are filled */
    unsigned grid_dims[3];     /* the grid for that problem */
    const char *op;            /* "diff_swa" (dswa_aot_kernel*) or "samel" (dswa_aot_samel_*) */
    int32_t rot_dims;          /* samel: as asked for; the op: 0 */
} dswa_aot_info;

/* The kernel for any window (the wide family), for `arch` ("sm_80" ... "sm_120"; "90" also
   reads as sm_90), dtype and math. DSWA_MATH_FP32 with f32 is DSWA_ERR_UNSUPPORTED here (the
   fp32-accurate kernel is a band kernel: ask dswa_aot_kernel_window with windows summing to
   at most 48); an unknown arch, dtype or math is DSWA_ERR_INVALID_ARGUMENT
   with a message listing what exists. On success *out owns memory: release it with
   dswa_aot_info_free (one allocation, at `ptx`, holds the module and the strings that vary:
   a copy of the struct shares them). On failure *out is zeroed (freeing it is harmless). */
dswa_status dswa_aot_kernel(const char *arch, dswa_dtype dtype, dswa_math math, dswa_aot_info *out);
/* The kernel the library launches for these windows whenever N > max(window_left,
   window_right): the band family when window_left + window_right <= 48, else the wide one. */
dswa_status dswa_aot_kernel_window(const char *arch, dswa_dtype dtype, dswa_math math,
                                   int32_t window_left, int32_t window_right, dswa_aot_info *out);
/* Exactly the kernel dswa_forward_cuda launches for *p (windows clamped to N - 1 first), with
   every extra's value and the grid for p filled in. p is checked as dswa_forward_cuda checks
   it (pointers aside: TensorRT's are 256-byte aligned), so the same refusals apply. The family
   is chosen for p's N: when windows wider than N were clamped into the band limit, the export
   is the band kernel, valid only while N stays that small; an engine whose N varies should
   take dswa_aot_kernel_window, which chooses for every N. */
dswa_status dswa_aot_kernel_for(const char *arch, const dswa_problem *p, dswa_aot_info *out);
/* Rewrites the module's .version to `isa` ("X.Y"). Refused (DSWA_ERR_INVALID_ARGUMENT, with
   a message naming the target or the instruction) when it is below the lowest the target and
   the instructions allow, or above the version the kernels were compiled with. */
dswa_status dswa_aot_set_ptx_isa(dswa_aot_info *info, const char *isa);
void dswa_aot_info_free(dswa_aot_info *info);

/* The fused SAME-L kernel (dswa_samel_forward_cuda) for TensorRT's AOT path: inputs qkv
   (B, N, 5*H*D), q_gamma, q_beta, k_gamma, k_beta (D floats each); 48 int32 extras (the
   windows, scale, lambda, the packed input's and the output's strides, rot_dims, the float
   bits of the 32 RoPE frequencies freq0 ... freq31 (rot_dims / 2 used, the rest 0),
   pos_offset, both alphas' float bits); the output (B, N, H*D). Same grid and block as the
   op's kernels. info->op is "samel"; formulas may also name the attributes scale, lambda, ROT
   (rot_dims), freq0 ... freq31 (the layer's frequencies: dswa_rope_frequencies(ROT, base)
   for a layer that gives only a base, 0 from ROT / 2 on), POS (pos_offset), q_alpha and
   k_alpha.
   The kernel depends on the windows and rot_dims (band or scalar, as dswa_samel_kernel_name
   says): dswa_aot_samel_kernel picks it for these windows whenever N > max(window_left,
   window_right); dswa_aot_samel_kernel_for is exactly what dswa_samel_forward_cuda launches
   for *p, with every extra's value and the grid filled in. Errors as dswa_aot_kernel's. */
dswa_status dswa_aot_samel_kernel(const char *arch, dswa_dtype dtype, dswa_math math,
                                  int32_t window_left, int32_t window_right, int32_t rot_dims,
                                  dswa_aot_info *out);
dswa_status dswa_aot_samel_kernel_for(const char *arch, const dswa_samel_problem *p,
                                      dswa_aot_info *out);
/* The PTX ISA version that introduced the plain target sm_<sm> (sm = 90 for sm_90), the
   lowest `.version` a module for it may carry: 0 with *major, *minor set (either may be NULL),
   or -1 for a target not in its table (src/aot/ptx_isa.c: sm_70 to sm_121). Unlike the
   dswa_aot_* functions above, it works in a build without nvcc. */
int dswa_ptx_isa_for_target(int sm, int *major, int *minor);

/* Shared memory one entry of a PTX module declares: its own `.shared` variables and the
   module's, laid out as ptxas 13.0 lays them out (the entry's first, then the module's, each
   in order at the larger of its .align and its element size, .v2/.v4 included). Variables the
   entry never reaches count too (ptxas drops unreferenced module-scope ones: an upper bound). */
typedef struct dswa_ptx_shared {
    uint64_t static_bytes;   /* sized variables, saturated at UINT64_MAX */
    int dynamic_arrays;      /* arrays declared without a size (`.extern .shared .b8 x[]`) */
    size_t dynamic_name, dynamic_name_len;   /* the first of them: offset and length in the text */
} dswa_ptx_shared;
/* Fills *out for the entry named entry[0, entry_len) (NULL: the first .entry with a body) of
   the text ptx[0, n); 0, or -1 when there is no such entry (*out then holds the module's
   variables only). Works in a build without nvcc (src/aot/ptx_shared.c). */
int dswa_ptx_shared_memory(const char *ptx, size_t n, const char *entry, size_t entry_len,
                           dswa_ptx_shared *out);

#ifdef __cplusplus
}
#endif
#endif /* DSWA_H */
