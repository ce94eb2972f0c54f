/* The backward's shared cases (backward_cases.c): B > 1, odd N, N < window, N = 1, full and
   asymmetric windows, head_dim 1 to 64, lambda and scale, every V sharing (H-head V, v.pair = 0,
   summed dv), packed SAME-L buffers, strided and permuted layouts and a broadcast dout, each
   for every dtype, through any backend: tests/test_backward.c runs them on the CPU,
   tests/test_cuda_backward.c on the GPU (copying the regions to the device and back). */
#ifndef DSWA_TESTS_BACKWARD_CASES_H
#define DSWA_TESTS_BACKWARD_CASES_H

#include <stddef.h>
#include <stdint.h>
#include "dswa.h"
#include "testutil.h"

/* Set by the test of a backend that runs f32 on TF32 where the problem's math allows it
   (DSWA_MATH_DEFAULT or DSWA_MATH_TF32; the CUDA backend's tensor-core backward): its f32 cases
   then run twice, with the default math (TF32's tolerance) and with DSWA_MATH_FP32 (fp32's).
   The CPU backend computes fp32 whatever the math. */
extern int tu_bwd_tf32_backend;
/* The passes over the cases: pass t < 3 is dtype t with the default math; pass 3 (on a TF32
   backend only) f32 with DSWA_MATH_FP32. */
int tu_bwd_passes(void);
void tu_bwd_pass(int t, dswa_dtype *dt, dswa_math *math);
/* "f32", "f16", "bf16", or "f32 fp32" for f32 asked to be fp32-accurate on a TF32 backend. */
const char *tu_bwd_label(dswa_dtype dt, dswa_math math);
/* Relative Frobenius tolerance per gradient: f32 1e-5 (plain fp32 arithmetic: errors about
   1e-7 to 1e-6 are expected), on TF32 TU_BWD_TOL_TF32 (inputs and weights rounded to 11
   significant bits, as the forward's TF32); f16 1e-3, bf16 3e-3 (the gradients' own
   rounding). */
#define TU_BWD_TOL_TF32 5e-3
double tu_bwd_tol(dswa_dtype t, dswa_math math);
/* dlambda's error against ||dout|| * ||A_1||, the Cauchy-Schwarz bound of |dlambda|: 1e-6
   (fp32 arithmetic), TU_BWD_TOL_TF32 where f32 runs on TF32. */
double tu_bwd_tol_dlambda(dswa_dtype t, dswa_math math);

/* n (at least 1) elements of fresh normals. */
void *tu_bwd_new_buf(tu_rng *r, int64_t n, dswa_dtype dt);
/* The pairs dv holds: 1 when summed (dv.pair == 0), else 2. */
int tu_bwd_dv_pairs(const dswa_backward_problem *bp);
/* [B, N, 5, H, D] chunks viewed as [batch, seq, pair, head, dim], pairs 3 chunks apart: q, k,
   v (shared) of SAME-L's packed projection, or dq, dk, dv of a packed gradient buffer. */
dswa_layout tu_bwd_packed_layout(const dswa_problem *p);

/* A host buffer a backend may read or write: all of one allocation. */
typedef struct tu_region { void *base; size_t bytes; } tu_region;
/* A backward over host pointers, each inside one of the n regions. */
typedef dswa_status (*tu_backward_fn)(const dswa_backward_problem *p, const void *q,
                                      const void *k, const void *v, const void *dout, void *dq,
                                      void *dk, void *dv, float *dlambda, const tu_region *r,
                                      int n);

/* One case through `run`: *bp as given with dlambda asked for; packed: q, k, v and dq, dk, dv
   as chunks of one [B, N, 5, H, D] buffer each (their layouts in *bp are replaced). */
void tu_backward_case(tu_backward_fn run, const char *name, tu_rng *r, const char *what,
                      const dswa_backward_problem *bp, int packed);
/* Runs every case through `run` (printing `name`), inputs drawn from r; the number of failed
   checks. */
int tu_backward_cases(tu_backward_fn run, const char *name, tu_rng *r);

#endif
