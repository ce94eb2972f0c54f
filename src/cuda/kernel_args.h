/* The kernels' argument list: the one table from which the kernel parameter list, the launch
   argument array, the launcher's int32 values (dswa_kargs) and the AOT export's metadata
   (names, kinds, formulas, meanings, values) are all generated. Plain C preprocessor, read by
   the CUDA sources and by src/aot/export.c.

   TensorRT's AOT order: the input pointers, then the int32 "extras", then the output pointer.
   Each row is KIND(ctx, name, formula, formula with a shared V or NULL when the same, meaning):
   the formula gives the value for contiguous SAME-L tensors, Q, K, V (B, N, 2H, D) and out
   (B, N, H, D), as an expression of B, N, H, D (and WL, WR: the export of a given window
   writes its numbers there); for a pointer, the tensor's shape. "float_bits(x)" is the int32
   whose bits are the fp32 x. Strides are in elements; windows are clamped to N - 1 (a window
   wider than the sequence sees the same keys). `ctx` is passed through to each KIND macro. */
#ifndef DSWA_CUDA_KERNEL_ARGS_H
#define DSWA_CUDA_KERNEL_ARGS_H

#define DSWA_KERNEL_ARGS(INPUT, EXTRA, OUTPUT, ctx) \
    INPUT(ctx, q, "(B, N, 2H, D)", NULL, \
           "Q: device pointer (16-byte aligned) to elements of the dtype, read as [batch, seq, pair, head, dim] through the strides below; SAME-L: contiguous (B, N, 2H, D), head p*H + h holding pair p of output head h") \
    INPUT(ctx, k, "(B, N, 2H, D)", NULL, \
           "K: as Q") \
    INPUT(ctx, v, "(B, N, 2H, D)", "(B, N, H, D)", \
           "V: as Q; or (B, N, H, D) read by both pairs (then v_sp = 0)") \
    EXTRA(ctx, n, "N", NULL, \
           "N: the sequence length (q.shape[1])") \
    EXTRA(ctx, wl, "min(WL, N - 1)", NULL, \
           "window_left clamped to N - 1: min(window_left, N - 1)") \
    EXTRA(ctx, wr, "min(WR, N - 1)", NULL, \
           "window_right clamped to N - 1: min(window_right, N - 1)") \
    EXTRA(ctx, scale_bits, "float_bits(scale)", NULL, \
           "float bits of scale: the int32 whose bit pattern is the fp32 scale (1/sqrt(64) = 0.125 -> 1040187392)") \
    EXTRA(ctx, lambda_bits, "float_bits(lambda)", NULL, \
           "float bits of lambda: the int32 whose bit pattern is the fp32 lambda (1.0 -> 1065353216)") \
    EXTRA(ctx, q_sb, "N * 2 * H * D", NULL, \
           "q.batch stride, in elements") \
    EXTRA(ctx, q_sn, "2 * H * D", NULL, \
           "q.seq stride, in elements") \
    EXTRA(ctx, q_sp, "H * D", NULL, \
           "q.pair stride, in elements") \
    EXTRA(ctx, q_sh, "D", NULL, \
           "q.head stride, in elements (the dim stride must be 1)") \
    EXTRA(ctx, k_sb, "N * 2 * H * D", NULL, \
           "k.batch stride, in elements") \
    EXTRA(ctx, k_sn, "2 * H * D", NULL, \
           "k.seq stride, in elements") \
    EXTRA(ctx, k_sp, "H * D", NULL, \
           "k.pair stride, in elements") \
    EXTRA(ctx, k_sh, "D", NULL, \
           "k.head stride, in elements (the dim stride must be 1)") \
    EXTRA(ctx, v_sb, "N * 2 * H * D", "N * H * D", \
           "v.batch stride, in elements") \
    EXTRA(ctx, v_sn, "2 * H * D", "H * D", \
           "v.seq stride, in elements") \
    EXTRA(ctx, v_sp, "H * D", "0", \
           "v.pair stride, in elements; 0 when both pairs read the same V") \
    EXTRA(ctx, v_sh, "D", NULL, \
           "v.head stride, in elements (the dim stride must be 1)") \
    EXTRA(ctx, o_sb, "N * H * D", NULL, \
           "out.batch stride, in elements") \
    EXTRA(ctx, o_sn, "H * D", NULL, \
           "out.seq stride, in elements") \
    EXTRA(ctx, o_sh, "D", NULL, \
           "out.head stride, in elements (the dim stride must be 1)") \
    OUTPUT(ctx, out, "(B, N, H, D)", NULL, \
           "out: device pointer (16-byte aligned) to elements of the dtype, written as [batch, seq, head, dim] through the strides above; SAME-L: contiguous (B, N, H, D)")

#define DSWA_KERNEL_ARG_COUNT 24

/* The fused SAME-L kernels' arguments (kernel_band.cu's dswa_samel_* entries and
   kernel_samel_scalar.cu), in the same form: the packed projection X (B, N, 5H*D) read as
   [batch, seq, chunk, head, dim] (chunks q, k, v, q_diff, k_diff), the DyT weights, the
   extras, the output (B, N, H*D). Formulas may name the node's attributes scale, lambda,
   ROT (rot_dims), base, POS (pos_offset), q_alpha and k_alpha. */
#define DSWA_SAMEL_KERNEL_ARGS(INPUT, EXTRA, OUTPUT, ctx) \
    INPUT(ctx, x, "(B, N, 5 * H * D)", NULL, \
           "X: device pointer (16-byte aligned) to the packed projection, elements of the dtype, read as [batch, seq, chunk, head, dim] through the strides below, chunks q, k, v, q_diff, k_diff") \
    INPUT(ctx, q_gamma, "(D,)", NULL, \
           "q_norm.gamma: device pointer to D floats (fp32), DyT's scale for q and q_diff") \
    INPUT(ctx, q_beta, "(D,)", NULL, \
           "q_norm.beta: device pointer to D floats (fp32), DyT's shift for q and q_diff") \
    INPUT(ctx, k_gamma, "(D,)", NULL, \
           "k_norm.gamma: device pointer to D floats (fp32), for k and k_diff") \
    INPUT(ctx, k_beta, "(D,)", NULL, \
           "k_norm.beta: device pointer to D floats (fp32), for k and k_diff") \
    EXTRA(ctx, n, "N", NULL, \
           "N: the sequence length (x.shape[1])") \
    EXTRA(ctx, wl, "min(WL, N - 1)", NULL, \
           "window_left clamped to N - 1: min(window_left, N - 1)") \
    EXTRA(ctx, wr, "min(WR, N - 1)", NULL, \
           "window_right clamped to N - 1: min(window_right, N - 1)") \
    EXTRA(ctx, scale_bits, "float_bits(scale)", NULL, \
           "float bits of scale: the int32 whose bit pattern is the fp32 scale (0.125 -> 1040187392)") \
    EXTRA(ctx, lambda_bits, "float_bits(lambda)", NULL, \
           "float bits of lambda: the int32 whose bit pattern is the fp32 lambda (1.0 -> 1065353216)") \
    EXTRA(ctx, x_sb, "N * 5 * H * D", NULL, \
           "x.batch stride, in elements") \
    EXTRA(ctx, x_sn, "5 * H * D", NULL, \
           "x.seq stride, in elements") \
    EXTRA(ctx, x_sc, "H * D", NULL, \
           "x.chunk stride, in elements (q, k, v, q_diff, k_diff)") \
    EXTRA(ctx, x_sh, "D", NULL, \
           "x.head stride, in elements (the dim stride must be 1)") \
    EXTRA(ctx, o_sb, "N * H * D", NULL, \
           "out.batch stride, in elements") \
    EXTRA(ctx, o_sn, "H * D", NULL, \
           "out.seq stride, in elements") \
    EXTRA(ctx, o_sh, "D", NULL, \
           "out.head stride, in elements (the dim stride must be 1)") \
    EXTRA(ctx, rot_dims, "ROT", NULL, \
           "rot_dims: how many leading dims RoPE rotates (even, <= D; SAME-L 32)") \
    EXTRA(ctx, base_bits, "float_bits(base)", NULL, \
           "float bits of the RoPE base (10000.0 -> 1176256512)") \
    EXTRA(ctx, pos_offset, "POS", NULL, \
           "pos_offset: the position of row 0 (chunked decoding), >= 0") \
    EXTRA(ctx, q_alpha_bits, "float_bits(q_alpha)", NULL, \
           "float bits of q_norm.alpha") \
    EXTRA(ctx, k_alpha_bits, "float_bits(k_alpha)", NULL, \
           "float bits of k_norm.alpha") \
    OUTPUT(ctx, out, "(B, N, H * D)", NULL, \
           "out: device pointer (16-byte aligned) to elements of the dtype, written as [batch, seq, head, dim] through the strides above; SAME-L: contiguous (B, N, H*D)")

#define DSWA_SAMEL_KERNEL_ARG_COUNT 23

/* The library's second entry of each fused kernel (never exported: TensorRT's node carries the
   alphas as attributes) takes the table's arguments and then these two, device pointers to the
   norms' alphas (dswa_samel_norm.alpha_at), read instead of q_alpha_bits and k_alpha_bits. */
#define DSWA_SAMEL_ALPHA_AT_PARAMS const float *__restrict__ q_alpha_at, const float *__restrict__ k_alpha_at

/* The extras as the launcher computes them (dswa_cuda_kargs), one int field each. */
#define DSWA_KARG_NONE_(ctx, name, expr, expr_shared_v, meaning)
#define DSWA_KARG_FIELD_(ctx, name, expr, expr_shared_v, meaning) int name;
typedef struct dswa_kargs {
    DSWA_KERNEL_ARGS(DSWA_KARG_NONE_, DSWA_KARG_FIELD_, DSWA_KARG_NONE_, ~)
} dswa_kargs;

typedef struct dswa_samel_kargs {
    DSWA_SAMEL_KERNEL_ARGS(DSWA_KARG_NONE_, DSWA_KARG_FIELD_, DSWA_KARG_NONE_, ~)
} dswa_samel_kargs;

/* The kernel's parameter list for element type T, and its names in order (to pass it on). */
#define DSWA_PARAM_INPUT_(T, name, expr, expr_shared_v, meaning) const T *__restrict__ name,
#define DSWA_PARAM_EXTRA_(T, name, expr, expr_shared_v, meaning) int name,
#define DSWA_PARAM_OUTPUT_(T, name, expr, expr_shared_v, meaning) T *__restrict__ name
#define DSWA_KERNEL_PARAMS(T) DSWA_KERNEL_ARGS(DSWA_PARAM_INPUT_, DSWA_PARAM_EXTRA_, DSWA_PARAM_OUTPUT_, T)
#define DSWA_NAME_COMMA_(ctx, name, expr, expr_shared_v, meaning) name,
#define DSWA_NAME_LAST_(ctx, name, expr, expr_shared_v, meaning) name
#define DSWA_KERNEL_ARG_NAMES DSWA_KERNEL_ARGS(DSWA_NAME_COMMA_, DSWA_NAME_COMMA_, DSWA_NAME_LAST_, ~)
/* The same for the fused block; its weights are fp32 whatever T is. */
#define DSWA_SPARAM_INPUT_(T, name, expr, expr_shared_v, meaning) \
    const typename dswa_samel_input<T, dswa_samel_is_x(#name)>::type *__restrict__ name,
#define DSWA_SAMEL_KERNEL_PARAMS(T) DSWA_SAMEL_KERNEL_ARGS(DSWA_SPARAM_INPUT_, DSWA_PARAM_EXTRA_, DSWA_PARAM_OUTPUT_, T)
#define DSWA_SAMEL_KERNEL_ARG_NAMES DSWA_SAMEL_KERNEL_ARGS(DSWA_NAME_COMMA_, DSWA_NAME_COMMA_, DSWA_NAME_LAST_, ~)

/* The launch's argument array: the addresses of local pointers named q, k, v, out and of the
   extras in *kargs. */
#define DSWA_LAUNCH_POINTER_(kargs, name, expr, expr_shared_v, meaning) (void *)&name,
#define DSWA_LAUNCH_EXTRA_(kargs, name, expr, expr_shared_v, meaning) (void *)&(kargs)->name,
#define DSWA_LAUNCH_LAST_(kargs, name, expr, expr_shared_v, meaning) (void *)&name
#define DSWA_LAUNCH_ARGS(kargs) DSWA_KERNEL_ARGS(DSWA_LAUNCH_POINTER_, DSWA_LAUNCH_EXTRA_, DSWA_LAUNCH_LAST_, kargs)
#define DSWA_SAMEL_LAUNCH_ARGS(kargs) DSWA_SAMEL_KERNEL_ARGS(DSWA_LAUNCH_POINTER_, DSWA_LAUNCH_EXTRA_, DSWA_LAUNCH_LAST_, kargs)

#endif
