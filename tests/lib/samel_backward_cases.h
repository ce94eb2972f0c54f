/* The fused SAME-L block's backward cases (samel_backward_cases.c): every dtype, B > 1, odd N,
   N below the window, N = 1, windows asymmetric and one-sided, rot_dims 0, 16, 32 of 64 and 64
   of 64, pos_offset 5 and 100000, alphas negative and 0, x a slice of a wider buffer or
   head-major with gaps, dqkv padded or dim-outermost, dout padded, g NULL, through any backend:
   tests/test_samel_backward.c runs them on the CPU, tests/test_cuda_samel_backward.c on the GPU
   (copying the regions to the device and back). Also the helpers both tests use to build
   problems and buffers. */
#ifndef DSWA_TESTS_SAMEL_BACKWARD_CASES_H
#define DSWA_TESTS_SAMEL_BACKWARD_CASES_H

#include <stdint.h>
#include "dswa.h"
#include "backward_cases.h"   /* tu_region */
#include "testutil.h"

/* Tolerances: the op's (tu_bwd_tol), for the relative Frobenius error per chunk of dqkv and for
   the norms' gradients' error against the root sum of squares of each sum's terms;
   samel_backward_cases.c says why. The cases run in tu_bwd_passes()'s passes, as the op's. */

/* The packed view whose dimensions nest in `order` (letters b, n, c (chunk), h, d, outermost
   first), every stride but the innermost padded by pad elements. "bnchd", 0: contiguous. */
dswa_samel_layout tu_sbwd_packed_order(const dswa_samel_problem *p, const char *order, int64_t pad);
/* Elements spanned by a packed view of p (1 + its largest offset). */
int64_t tu_sbwd_packed_elems(const dswa_samel_problem *p, const dswa_samel_layout *l);
/* The op's problem with the block's sizes, dtype and dout as its out: what the tests' output
   helpers (tu_span, tu_out_offset) read. */
dswa_problem tu_sbwd_dout_view(const dswa_samel_backward_problem *bp);
/* Norm weights drawn from r (gamma around 1.5, beta around 0) in one malloc'ed array [q gamma,
   q beta, k gamma, k beta], pointed to by p's norms. */
float *tu_sbwd_norms_new(tu_rng *r, dswa_samel_problem *p);
/* g pointing into a buffer of 2 * (1 + 2D) floats: per norm dalpha, dgamma[D], dbeta[D] (the
   reference's order). */
dswa_samel_norm_grads tu_sbwd_grads_in(float *buf, int D);

/* One case: the problem and where its tensors live. */
typedef struct tu_sbwd_case {
    const char *name;
    dswa_samel_backward_problem bp;
    const char *x_order, *dx_order;   /* tu_sbwd_packed_order's; x_slice overrides x's */
    int64_t x_pad, dx_pad;
    int x_slice;      /* x: chunks 1-5 of a (B, N, 7*H*D) buffer */
    int dout_pad;     /* dout: seq stride padded by 3 elements */
    int with_g;       /* norm gradients asked for */
} tu_sbwd_case;
/* Contiguous x, dqkv and dout, pos_offset 5, lambda 0.6, scale 1/sqrt(D), alphas drawn from r
   (k_norm's negative), g asked for. */
tu_sbwd_case tu_sbwd_make(tu_rng *r, const char *name, int B, int N, int H, int D, int wl,
                          int wr, int rot, dswa_dtype dt);

/* A fused backward over host pointers (x, dout, dqkv, the norms' weights in p, g's), each
   inside one of the n regions. */
typedef dswa_status (*tu_samel_backward_fn)(const dswa_samel_backward_problem *p, const void *qkv,
                                            const void *dout, void *dqkv,
                                            const dswa_samel_norm_grads *g, const tu_region *r,
                                            int n);
/* One case through `run` (printing a line), inputs drawn from r. */
void tu_sbwd_run(tu_samel_backward_fn run, const char *name, tu_rng *r, tu_sbwd_case c);
/* Every case through `run` (printing `name`); the number of failed checks. */
int tu_samel_backward_cases(tu_samel_backward_fn run, const char *name, tu_rng *r);

#endif
