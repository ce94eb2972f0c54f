/* The fused SAME-L block reduced to the op: what its validation (core/samel_validate.c), its CPU
   backend (cpu/samel.c) and the AOT export (aot/export.c) share. Inline, so that the backends
   call nothing in core that calls back into them. Not part of the public contract. */
#ifndef DSWA_CORE_SAMEL_H
#define DSWA_CORE_SAMEL_H

#include <string.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The op the block ends in: p's sizes, windows, scale, lambda, dtype, math and out, with q
   and k as views of the packed input (pair 1 three chunks after pair 0) and v its chunk 2,
   shared (v.pair = 0). The q, k, v pointers that go with it are qkv + 0, 1, 2 chunks. */
static inline dswa_problem dswa_samel_op_problem(const dswa_samel_problem *p) {
    dswa_problem d;
    memset(&d, 0, sizeof d);
    d.batch = p->batch; d.seq_len = p->seq_len; d.heads = p->heads; d.head_dim = p->head_dim;
    d.window_left = p->window_left; d.window_right = p->window_right;
    d.scale = p->scale; d.lambda = p->lambda;
    d.dtype = p->dtype; d.math = p->math;
    const dswa_samel_layout *x = &p->qkv;
    /* pair 1 of q and k is chunk 3 and 4 (q_diff, k_diff): 3 chunks on. */
    const dswa_layout qk = {x->batch, x->seq, 3 * x->chunk, x->head, x->dim};
    const dswa_layout v = {x->batch, x->seq, 0, x->head, x->dim};
    d.q = d.k = qk;
    d.v = v;
    d.out = p->out;
    return d;
}

/* The op's backward as both fused backwards run it: on dense fp32 scratch, q and k
   [b][n][pair][h][d], V, dout and the summed dV [b][n][h][d]. */
static inline dswa_backward_problem dswa_samel_scratch_backward_problem(const dswa_samel_problem *p) {
    dswa_backward_problem ob;
    memset(&ob, 0, sizeof ob);
    ob.fwd = dswa_samel_op_problem(p);
    ob.fwd.dtype = DSWA_F32;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim;
    const dswa_layout qk = {N * 2 * H * D, 2 * H * D, H * D, D, 1};
    const dswa_layout one = {N * H * D, H * D, 0, D, 1};
    ob.fwd.q = ob.fwd.k = ob.dq = ob.dk = qk;
    ob.fwd.v = ob.fwd.out = ob.dout = ob.dv = one;
    return ob;
}

/* RoPE's rot_dims / 2 frequencies of a validated p into freq: p->rope_freq's, or
   dswa_rope_frequencies(rot_dims, rope_base) when it gives none (core/rope.c). */
void dswa_samel_freqs(const dswa_samel_problem *p, float *freq);

#ifdef __cplusplus
}
#endif
#endif
