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

/* The extras as the launcher computes them (dswa_cuda_kargs), one int field each. */
#define DSWA_KARG_NONE_(ctx, name, expr, expr_shared_v, meaning)
#define DSWA_KARG_FIELD_(ctx, name, expr, expr_shared_v, meaning) int name;
typedef struct dswa_kargs {
    DSWA_KERNEL_ARGS(DSWA_KARG_NONE_, DSWA_KARG_FIELD_, DSWA_KARG_NONE_, ~)
} dswa_kargs;

/* The kernel's parameter list for element type T, and its names in order (to pass it on). */
#define DSWA_PARAM_INPUT_(T, name, expr, expr_shared_v, meaning) const T *__restrict__ name,
#define DSWA_PARAM_EXTRA_(T, name, expr, expr_shared_v, meaning) int name,
#define DSWA_PARAM_OUTPUT_(T, name, expr, expr_shared_v, meaning) T *__restrict__ name
#define DSWA_KERNEL_PARAMS(T) DSWA_KERNEL_ARGS(DSWA_PARAM_INPUT_, DSWA_PARAM_EXTRA_, DSWA_PARAM_OUTPUT_, T)
#define DSWA_NAME_COMMA_(ctx, name, expr, expr_shared_v, meaning) name,
#define DSWA_NAME_LAST_(ctx, name, expr, expr_shared_v, meaning) name
#define DSWA_KERNEL_ARG_NAMES DSWA_KERNEL_ARGS(DSWA_NAME_COMMA_, DSWA_NAME_COMMA_, DSWA_NAME_LAST_, ~)

/* The launch's argument array: the addresses of local pointers named q, k, v, out and of the
   extras in *kargs. */
#define DSWA_LAUNCH_POINTER_(kargs, name, expr, expr_shared_v, meaning) (void *)&name,
#define DSWA_LAUNCH_EXTRA_(kargs, name, expr, expr_shared_v, meaning) (void *)&(kargs)->name,
#define DSWA_LAUNCH_LAST_(kargs, name, expr, expr_shared_v, meaning) (void *)&name
#define DSWA_LAUNCH_ARGS(kargs) DSWA_KERNEL_ARGS(DSWA_LAUNCH_POINTER_, DSWA_LAUNCH_EXTRA_, DSWA_LAUNCH_LAST_, kargs)

#endif
