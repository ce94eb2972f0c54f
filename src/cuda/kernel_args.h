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

/* RoPE's frequencies, one extra each (TensorRT's extras are int32 scalars): freq J is the
   float bits of the layer's frequency J for J < rot_dims / 2 (dswa_samel_problem.rope_freq, or
   dswa_rope_frequencies(rot_dims, base)), 0 beyond: DSWA_AOT_ROPE_FREQS (dswa.h) of them.
   DSWA_ROPE_FREQS(X) lists their indices, for code that gathers them. */
#define DSWA_ROPE_FREQ_ARGS(EXTRA, ctx) \
    EXTRA(ctx, freq0, "float_bits(freq0)", NULL, "float bits of RoPE frequency 0 (0 when 0 >= rot_dims / 2)") \
    EXTRA(ctx, freq1, "float_bits(freq1)", NULL, "float bits of RoPE frequency 1 (0 when 1 >= rot_dims / 2)") \
    EXTRA(ctx, freq2, "float_bits(freq2)", NULL, "float bits of RoPE frequency 2 (0 when 2 >= rot_dims / 2)") \
    EXTRA(ctx, freq3, "float_bits(freq3)", NULL, "float bits of RoPE frequency 3 (0 when 3 >= rot_dims / 2)") \
    EXTRA(ctx, freq4, "float_bits(freq4)", NULL, "float bits of RoPE frequency 4 (0 when 4 >= rot_dims / 2)") \
    EXTRA(ctx, freq5, "float_bits(freq5)", NULL, "float bits of RoPE frequency 5 (0 when 5 >= rot_dims / 2)") \
    EXTRA(ctx, freq6, "float_bits(freq6)", NULL, "float bits of RoPE frequency 6 (0 when 6 >= rot_dims / 2)") \
    EXTRA(ctx, freq7, "float_bits(freq7)", NULL, "float bits of RoPE frequency 7 (0 when 7 >= rot_dims / 2)") \
    EXTRA(ctx, freq8, "float_bits(freq8)", NULL, "float bits of RoPE frequency 8 (0 when 8 >= rot_dims / 2)") \
    EXTRA(ctx, freq9, "float_bits(freq9)", NULL, "float bits of RoPE frequency 9 (0 when 9 >= rot_dims / 2)") \
    EXTRA(ctx, freq10, "float_bits(freq10)", NULL, "float bits of RoPE frequency 10 (0 when 10 >= rot_dims / 2)") \
    EXTRA(ctx, freq11, "float_bits(freq11)", NULL, "float bits of RoPE frequency 11 (0 when 11 >= rot_dims / 2)") \
    EXTRA(ctx, freq12, "float_bits(freq12)", NULL, "float bits of RoPE frequency 12 (0 when 12 >= rot_dims / 2)") \
    EXTRA(ctx, freq13, "float_bits(freq13)", NULL, "float bits of RoPE frequency 13 (0 when 13 >= rot_dims / 2)") \
    EXTRA(ctx, freq14, "float_bits(freq14)", NULL, "float bits of RoPE frequency 14 (0 when 14 >= rot_dims / 2)") \
    EXTRA(ctx, freq15, "float_bits(freq15)", NULL, "float bits of RoPE frequency 15 (0 when 15 >= rot_dims / 2)") \
    EXTRA(ctx, freq16, "float_bits(freq16)", NULL, "float bits of RoPE frequency 16 (0 when 16 >= rot_dims / 2)") \
    EXTRA(ctx, freq17, "float_bits(freq17)", NULL, "float bits of RoPE frequency 17 (0 when 17 >= rot_dims / 2)") \
    EXTRA(ctx, freq18, "float_bits(freq18)", NULL, "float bits of RoPE frequency 18 (0 when 18 >= rot_dims / 2)") \
    EXTRA(ctx, freq19, "float_bits(freq19)", NULL, "float bits of RoPE frequency 19 (0 when 19 >= rot_dims / 2)") \
    EXTRA(ctx, freq20, "float_bits(freq20)", NULL, "float bits of RoPE frequency 20 (0 when 20 >= rot_dims / 2)") \
    EXTRA(ctx, freq21, "float_bits(freq21)", NULL, "float bits of RoPE frequency 21 (0 when 21 >= rot_dims / 2)") \
    EXTRA(ctx, freq22, "float_bits(freq22)", NULL, "float bits of RoPE frequency 22 (0 when 22 >= rot_dims / 2)") \
    EXTRA(ctx, freq23, "float_bits(freq23)", NULL, "float bits of RoPE frequency 23 (0 when 23 >= rot_dims / 2)") \
    EXTRA(ctx, freq24, "float_bits(freq24)", NULL, "float bits of RoPE frequency 24 (0 when 24 >= rot_dims / 2)") \
    EXTRA(ctx, freq25, "float_bits(freq25)", NULL, "float bits of RoPE frequency 25 (0 when 25 >= rot_dims / 2)") \
    EXTRA(ctx, freq26, "float_bits(freq26)", NULL, "float bits of RoPE frequency 26 (0 when 26 >= rot_dims / 2)") \
    EXTRA(ctx, freq27, "float_bits(freq27)", NULL, "float bits of RoPE frequency 27 (0 when 27 >= rot_dims / 2)") \
    EXTRA(ctx, freq28, "float_bits(freq28)", NULL, "float bits of RoPE frequency 28 (0 when 28 >= rot_dims / 2)") \
    EXTRA(ctx, freq29, "float_bits(freq29)", NULL, "float bits of RoPE frequency 29 (0 when 29 >= rot_dims / 2)") \
    EXTRA(ctx, freq30, "float_bits(freq30)", NULL, "float bits of RoPE frequency 30 (0 when 30 >= rot_dims / 2)") \
    EXTRA(ctx, freq31, "float_bits(freq31)", NULL, "float bits of RoPE frequency 31 (0 when 31 >= rot_dims / 2)")
#define DSWA_ROPE_FREQS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)

/* The fused SAME-L kernels' arguments (kernel_band.cu's dswa_samel_* entries and
   kernel_samel_scalar.cu), in the same form: the packed projection X (B, N, 5H*D) read as
   [batch, seq, chunk, head, dim] (chunks q, k, v, q_diff, k_diff), the DyT weights, the
   extras, the output (B, N, H*D). Formulas may name the node's attributes scale, lambda,
   ROT (rot_dims), freq0 ... freq31 (RoPE's frequencies), POS (pos_offset), q_alpha and
   k_alpha. */
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
    DSWA_ROPE_FREQ_ARGS(EXTRA, ctx) \
    EXTRA(ctx, pos_offset, "POS", NULL, \
           "pos_offset: the position of row 0 (chunked decoding), >= 0") \
    EXTRA(ctx, q_alpha_bits, "float_bits(q_alpha)", NULL, \
           "float bits of q_norm.alpha") \
    EXTRA(ctx, k_alpha_bits, "float_bits(k_alpha)", NULL, \
           "float bits of k_norm.alpha") \
    OUTPUT(ctx, out, "(B, N, H * D)", NULL, \
           "out: device pointer (16-byte aligned) to elements of the dtype, written as [batch, seq, head, dim] through the strides above; SAME-L: contiguous (B, N, H*D)")

#define DSWA_SAMEL_KERNEL_ARG_COUNT 54

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
