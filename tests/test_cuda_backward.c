/* GPU tests of dswa_backward_cuda: every shared backward case (tests/lib/backward_cases.c: every
   dtype, B > 1, odd N, N < window, N = 1, asymmetric and full windows, shared V and 2H V, packed
   and strided layouts, dlambda) against the float64 reference on fresh random inputs (seed
   printed; DSWA_TEST_SEED=N repeats a run), gradients in poisoned buffers with poisoned guards;
   larger shapes (SAME-L's, a wide window 5/300); bitwise determinism of two runs with
   differently poisoned workspaces; one call captured in a CUDA graph and replayed with fresh
   inputs, equal to the eager results; and the refusals (workspace, head_dim, alignment,
   validation), each writing nothing. Tolerances: the shared ones; f32 runs twice
   (tu_bwd_tf32_backend): the default math (TF32 on the tensor-core family: TU_BWD_TOL_TF32)
   and DSWA_MATH_FP32 (three TF32 products, or the general kernel: 1e-5). `--small` runs the shared cases and the refusals only
   (for compute-sanitizer). Without a GPU (or without CUDA in the build) it prints "skipped: ..."
   and exits 77. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "backward_cases.h"
#include "testutil.h"

#ifndef DSWA_HAVE_CUDA
int main(void) { tu_skip("dswa was built without CUDA"); }
#else
#include "cuda_check.h"
#include "cuda_dev.h"

static tu_rng rng;

/* dswa_backward_cuda on host buffers: every region copied to the device and back around the
   call, with a workspace of the size the library asks for, poisoned (it needs no init). */
static dswa_status gpu_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                const void *v, const void *dout, void *dq, void *dk, void *dv,
                                float *dlambda, const tu_region *r, int n) {
    tu_dev_regions d = tu_regions_to_device(r, n);
    const size_t wsb = dswa_backward_workspace_bytes(p);
    void *ws = tu_dev_poisoned(wsb);
    const dswa_status s = dswa_backward_cuda(p, tu_regions_at(&d, q), tu_regions_at(&d, k),
                                             tu_regions_at(&d, v), tu_regions_at(&d, dout),
                                             tu_regions_at(&d, dq), tu_regions_at(&d, dk),
                                             tu_regions_at(&d, dv), tu_regions_at(&d, dlambda),
                                             ws, wsb, NULL);
    tu_regions_back(&d);
    if (ws) CU(cudaFree(ws));
    return s;
}

static dswa_backward_problem problem(int B, int N, int H, int wl, int wr, dswa_dtype dt, int shared_v) {
    dswa_problem f = dswa_problem_default(B, N, H, 64, wl);
    f.window_right = wr;
    f.dtype = dt;
    f.lambda = 0.8f;
    f.scale = 0.125f;
    if (shared_v) f.v = tu_layout_order(&f, "bnhd", 0);
    return dswa_backward_problem_default(&f);
}

/* SAME-L's shape (packed in and out) and a wide window, against the reference. */
static void test_large(void) {
    printf("larger shapes\n");
    for (int t = 0; t < tu_bwd_passes(); t++) {
        dswa_dtype dt;
        dswa_math math;
        tu_bwd_pass(t, &dt, &math);
        dswa_backward_problem bp = problem(1, 4352, 24, 17, 17, dt, 1);
        bp.fwd.lambda = 1.0f;
        bp.fwd.math = math;
        tu_backward_case(gpu_backward, "CUDA", &rng, "SAME-L N=4352 H=24, packed", &bp, 1);
        bp = problem(2, 700, 2, 5, 300, dt, 0);
        bp.fwd.math = math;
        tu_backward_case(gpu_backward, "CUDA", &rng, "wide window 5/300, B=2", &bp, 0);
    }
}

/* Device buffers of one problem, contiguous (gradients laid out like their inputs). */
typedef struct dev_case {
    dswa_backward_problem bp;
    size_t in_bytes[4], g_bytes[3], ws_bytes;
    void *in[4], *g[3], *ws;
    float *dl;
} dev_case;

static dev_case dev_new(const dswa_backward_problem *bp) {
    dev_case c;
    c.bp = *bp;
    const dswa_problem *f = &bp->fwd;
    const size_t es = tu_dtype_size(f->dtype);
    const dswa_layout *const il[4] = {&f->q, &f->k, &f->v, &bp->dout};
    const dswa_layout *const gl[3] = {&bp->dq, &bp->dk, &bp->dv};
    for (int t = 0; t < 4; t++) {
        const int64_t n = dswa_view_span(f, il[t], t == 3 ? 1 : 2);
        c.in_bytes[t] = (size_t)n * es;
        void *h = tu_bwd_new_buf(&rng, n, f->dtype);
        c.in[t] = tu_dev_from_host(h, c.in_bytes[t]);
        tu_free(h);
    }
    for (int t = 0; t < 3; t++) {
        c.g_bytes[t] = (size_t)dswa_view_span(f, gl[t], 2) * es;
        CU(cudaMalloc(&c.g[t], c.g_bytes[t]));
        CU(cudaMemset(c.g[t], 0xff, c.g_bytes[t]));
    }
    c.ws_bytes = dswa_backward_workspace_bytes(bp);
    CU(cudaMalloc(&c.ws, c.ws_bytes));
    CU(cudaMalloc((void **)&c.dl, sizeof(float)));
    CU(cudaMemset(c.dl, 0xff, sizeof(float)));
    return c;
}

static void dev_free(dev_case *c) {
    for (int t = 0; t < 4; t++) CU(cudaFree(c->in[t]));
    for (int t = 0; t < 3; t++) CU(cudaFree(c->g[t]));
    CU(cudaFree(c->ws));
    CU(cudaFree(c->dl));
}

/* The call on a dev_case's buffers, on stream s. */
static dswa_status dev_run(void *ctx, cudaStream_t s) {
    const dev_case *c = ctx;
    return dswa_backward_cuda(&c->bp, c->in[0], c->in[1], c->in[2], c->in[3], c->g[0], c->g[1],
                              c->g[2], c->dl, c->ws, c->ws_bytes, s);
}

/* The call on c's buffers for the shared device checks: q, k, v and dout in; dq, dk, dv and
   dlambda out (fetched as one host block in that order). */
static tu_dev_op dev_op(dev_case *c) {
    tu_dev_op op = {.run = dev_run, .ctx = c, .n_in = 4, .n_out = 4, .ws = {c->ws, c->ws_bytes}};
    for (int t = 0; t < 4; t++) op.in[t] = (tu_dbuf){c->in[t], c->in_bytes[t]};
    for (int t = 0; t < 3; t++) op.out[t] = (tu_dbuf){c->g[t], c->g_bytes[t]};
    op.out[3] = (tu_dbuf){c->dl, sizeof(float)};
    return op;
}

/* Two runs, the workspace poisoned differently before each: bitwise equal results. The
   SAME-L run is timed (one call, after a warm-up). */
static void test_determinism(void) {
    printf("determinism\n");
    for (int t = 0; t < 3; t++) {
        dswa_backward_problem bp = problem(1, 4352, 24, 17, 17, (dswa_dtype)t, 1);
        dev_case c = dev_new(&bp);
        const tu_dev_op op = dev_op(&c);
        const int same = tu_dev_two_runs_equal(&op);
        CHECK(same, "%s: two runs differ", dswa_dtype_name(bp.fwd.dtype));
        const float ms = tu_dev_time_ms(&op, 1);
        printf("  %-4s SAME-L B=1 N=4352 H=24 shared V: two runs %s; one call %.3f ms\n",
               dswa_dtype_name(bp.fwd.dtype), same ? "bitwise equal" : "DIFFER", ms);
        dev_free(&c);
    }
}

/* One call captured in a graph on a non-blocking stream; replays with fresh inputs copied
   into the captured buffers (and the outputs poisoned) equal the eager results bitwise. */
static void test_graph(void) {
    printf("CUDA graph\n");
    dswa_backward_problem bp = problem(2, 300, 3, 17, 9, DSWA_BF16, 1);
    dev_case c = dev_new(&bp);
    const tu_dev_op op = dev_op(&c);
    tu_dev_graph_check(&op, &rng, bp.fwd.dtype, 0);
    dev_free(&c);
}

/* What dswa_backward_cuda refuses, with the status and a message naming the field; no byte of
   the gradients or dlambda changes. */
static void test_refusals(void) {
    printf("refusals\n");
    dswa_backward_problem bp = problem(1, 40, 2, 17, 17, DSWA_F32, 0);
    dev_case c = dev_new(&bp);
    /* head_dim 80 over N = 20: its contiguous views fit the buffers of the N = 40 problem */
    dswa_problem f80 = dswa_problem_default(1, 20, 2, 80, 17);
    const dswa_backward_problem d80 = dswa_backward_problem_default(&f80);
    struct { const char *what; dswa_backward_problem p; int arg; dswa_status want; const char *needle; } r[] = {
        {"workspace NULL", bp, 0, DSWA_ERR_INVALID_ARGUMENT, "workspace = NULL"},
        {"workspace_bytes one short", bp, 1, DSWA_ERR_INVALID_ARGUMENT, "workspace_bytes = "},
        {"workspace misaligned by 8 bytes", bp, 2, DSWA_ERR_MISALIGNED, "workspace = "},
        {"workspace overlapping dk", bp, 3, DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps dk"},
        {"q misaligned by 2 bytes", bp, 4, DSWA_ERR_MISALIGNED, "q = "},
        {"dlambda misaligned by 2 bytes", bp, 5, DSWA_ERR_MISALIGNED, "dlambda = "},
        {"dq == q (validation)", bp, 6, DSWA_ERR_INVALID_ARGUMENT, "dq: overlaps q"},
        {"head_dim 80", d80, 7, DSWA_ERR_UNSUPPORTED, "head_dim = 80"},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        const void *q = c.in[0];
        void *dq = c.g[0], *ws = c.ws;
        float *dl = c.dl;
        size_t wsb = c.ws_bytes;
        switch (r[i].arg) {
        case 0: ws = NULL; break;
        case 1: wsb = c.ws_bytes - 1; break;
        case 2: ws = (char *)c.ws + 8; break;
        case 3: ws = c.g[1]; wsb = c.g_bytes[1] + c.ws_bytes; break;
        case 4: q = (const char *)c.in[0] + 2; break;
        case 5: dl = (float *)((char *)c.dl + 2); break;
        case 6: dq = (void *)c.in[0]; break;
        default: break;
        }
        const dswa_status st = dswa_backward_cuda(&r[i].p, q, c.in[1], c.in[2], c.in[3], dq, c.g[1],
                                                  c.g[2], dl, ws, wsb, NULL);
        tu_check_refusal(r[i].what, 34, st, r[i].want, r[i].needle);
    }
    const tu_dev_op op = dev_op(&c);
    const size_t touched = tu_dev_out_changed(&op);
    CHECK(touched == 0, "refused calls changed %zu bytes of the gradients or dlambda", touched);

    /* an empty problem: valid with NULL pointers, writes dlambda = 0 only */
    dswa_backward_problem e = bp;
    e.fwd.batch = 0;
    CHECK(dswa_backward_workspace_bytes(&e) == 0, "empty problem: workspace %zu bytes",
          dswa_backward_workspace_bytes(&e));
    CHECK(dswa_backward_cuda(&e, NULL, NULL, NULL, NULL, NULL, NULL, NULL, c.dl, NULL, 0, NULL) == DSWA_OK,
          "batch = 0: %s", dswa_last_error());
    float dl = 1;
    CU(cudaMemcpy(&dl, c.dl, sizeof dl, cudaMemcpyDeviceToHost));
    CHECK(dl == 0.0f, "batch = 0: dlambda %g, want 0", (double)dl);
    dev_free(&c);
}

int main(int argc, char **argv) {
    int small_only = 0;   /* --small: the shared cases and the refusals only (compute-sanitizer) */
    if (tu_flags(argc, argv, "--small", &small_only, (char *)NULL)) return 2;
    if (!dswa_cuda_available()) {
        dswa_problem f = dswa_problem_default(1, 8, 1, 64, 2);
        dswa_backward_problem bp = dswa_backward_problem_default(&f);
        static float q[1024], k[1024], v[1024], o[512], g[3][1024], ws[1024];
        (void)dswa_backward_cuda(&bp, q, k, v, o, g[0], g[1], g[2], NULL, ws, sizeof ws, NULL);
        tu_skip("no GPU (%s)", dswa_last_error()); /* the library's reason */
    }
    tu_rng_init(&rng, tu_test_seed());
    tu_print_device();
    test_refusals();
    tu_bwd_tf32_backend = 1;   /* f32 runs on TF32 unless DSWA_MATH_FP32 */
    tu_backward_cases(gpu_backward, "CUDA", &rng);
    if (!small_only) {
        test_large();
        test_determinism();
        test_graph();
    }
    TEST_MAIN_RETURN("test_cuda_backward");
}
#endif
