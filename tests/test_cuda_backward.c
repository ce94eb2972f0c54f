/* GPU tests of dswa_backward_cuda: every shared backward case (tests/lib/backward_cases.c: every
   dtype, B > 1, odd N, N < window, N = 1, asymmetric and full windows, shared V and 2H V, packed
   and strided layouts, dlambda) against the float64 reference on fresh random inputs (seed
   printed; DSWA_TEST_SEED=N repeats a run), gradients in poisoned buffers with poisoned guards;
   larger shapes (SAME-L's, a wide window 5/300); bitwise determinism of two runs with
   differently poisoned workspaces; one call captured in a CUDA graph and replayed with fresh
   inputs, equal to the eager results; and the refusals (workspace, head_dim, alignment,
   validation), each writing nothing. Tolerances: the shared ones (f32 1e-5: the backward is
   plain fp32 arithmetic on the GPU too). Without a GPU (or without CUDA in the build) it prints
   "skipped: ..." and exits 77. */
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

static tu_rng rng;

/* The device copy of a host pointer inside one of the regions (NULL stays NULL). */
static void *on_device(const void *h, const tu_region *r, void *const *dev, int n) {
    if (!h) return NULL;
    for (int i = 0; i < n; i++)
        if ((const char *)h >= (const char *)r[i].base && (const char *)h < (const char *)r[i].base + r[i].bytes)
            return (char *)dev[i] + ((const char *)h - (const char *)r[i].base);
    fprintf(stderr, "test_cuda_backward: pointer %p is in no region\n", h);
    exit(1);
}

/* dswa_backward_cuda on host buffers: every region copied to the device and back around the
   call, with a workspace of the size the library asks for, poisoned (it needs no init). */
static dswa_status gpu_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                const void *v, const void *dout, void *dq, void *dk, void *dv,
                                float *dlambda, const tu_region *r, int n) {
    void *dev[16];
    if (n > 16) abort();
    for (int i = 0; i < n; i++) {
        CU(cudaMalloc(&dev[i], r[i].bytes));
        CU(cudaMemcpy(dev[i], r[i].base, r[i].bytes, cudaMemcpyHostToDevice));
    }
    const size_t wsb = dswa_backward_workspace_bytes(p);
    void *ws = NULL;
    if (wsb) {
        CU(cudaMalloc(&ws, wsb));
        CU(cudaMemset(ws, 0xff, wsb));
    }
    const dswa_status s = dswa_backward_cuda(p, on_device(q, r, dev, n), on_device(k, r, dev, n),
                                             on_device(v, r, dev, n), on_device(dout, r, dev, n),
                                             on_device(dq, r, dev, n), on_device(dk, r, dev, n),
                                             on_device(dv, r, dev, n), on_device(dlambda, r, dev, n),
                                             ws, wsb, NULL);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) {
        CU(cudaMemcpy(r[i].base, dev[i], r[i].bytes, cudaMemcpyDeviceToHost));
        CU(cudaFree(dev[i]));
    }
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
    for (int t = 0; t < 3; t++) {
        dswa_backward_problem bp = problem(1, 4352, 24, 17, 17, (dswa_dtype)t, 1);
        bp.fwd.lambda = 1.0f;
        tu_backward_case(gpu_backward, "CUDA", &rng, "SAME-L N=4352 H=24, packed", &bp, 1);
        bp = problem(2, 700, 2, 5, 300, (dswa_dtype)t, 0);
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
        CU(cudaMalloc(&c.in[t], c.in_bytes[t]));
        CU(cudaMemcpy(c.in[t], h, c.in_bytes[t], cudaMemcpyHostToDevice));
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

static dswa_status dev_run(dev_case *c, cudaStream_t s) {
    return dswa_backward_cuda(&c->bp, c->in[0], c->in[1], c->in[2], c->in[3], c->g[0], c->g[1],
                              c->g[2], c->dl, c->ws, c->ws_bytes, s);
}

static dswa_status dev_run_ctx(void *c, cudaStream_t s) { return dev_run(c, s); }

/* dq, dk, dv and dlambda as one host block. */
static char *dev_fetch(const dev_case *c) {
    const size_t total = c->g_bytes[0] + c->g_bytes[1] + c->g_bytes[2] + sizeof(float);
    char *h = malloc(total), *at = h;
    if (!h) abort();
    for (int t = 0; t < 3; t++) {
        CU(cudaMemcpy(at, c->g[t], c->g_bytes[t], cudaMemcpyDeviceToHost));
        at += c->g_bytes[t];
    }
    CU(cudaMemcpy(at, c->dl, sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static size_t dev_out_bytes(const dev_case *c) {
    return c->g_bytes[0] + c->g_bytes[1] + c->g_bytes[2] + sizeof(float);
}

/* Two runs, the workspace poisoned differently before each: bitwise equal results. The
   SAME-L run is timed (one call, after a warm-up). */
static void test_determinism(void) {
    printf("determinism\n");
    for (int t = 0; t < 3; t++) {
        dswa_backward_problem bp = problem(1, 4352, 24, 17, 17, (dswa_dtype)t, 1);
        dev_case c = dev_new(&bp);
        char *first = NULL;
        int same = 1;
        for (int r = 0; r < 2; r++) {
            CU(cudaMemset(c.ws, r ? 0x00 : 0xff, c.ws_bytes));
            CHECK(dev_run(&c, NULL) == DSWA_OK, "run %d: %s", r, dswa_last_error());
            CU(cudaDeviceSynchronize());
            char *h = dev_fetch(&c);
            if (r == 0) first = h;
            else {
                same = memcmp(first, h, dev_out_bytes(&c)) == 0;
                free(h);
            }
        }
        CHECK(same, "%s: two runs differ", dswa_dtype_name(bp.fwd.dtype));
        cudaEvent_t e0, e1;
        CU(cudaEventCreate(&e0));
        CU(cudaEventCreate(&e1));
        CU(cudaEventRecord(e0, NULL));
        CHECK(dev_run(&c, NULL) == DSWA_OK, "timed run: %s", dswa_last_error());
        CU(cudaEventRecord(e1, NULL));
        CU(cudaEventSynchronize(e1));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        printf("  %-4s SAME-L B=1 N=4352 H=24 shared V: two runs %s; one call %.3f ms\n",
               dswa_dtype_name(bp.fwd.dtype), same ? "bitwise equal" : "DIFFER", ms);
        CU(cudaEventDestroy(e0));
        CU(cudaEventDestroy(e1));
        free(first);
        dev_free(&c);
    }
}

/* One call captured in a graph on a non-blocking stream; replays with fresh inputs copied
   into the captured buffers (and the outputs poisoned) equal the eager results bitwise. */
static void test_graph(void) {
    enum { SETS = 3, REPLAYS = 12 };
    printf("CUDA graph\n");
    dswa_backward_problem bp = problem(2, 300, 3, 17, 9, DSWA_BF16, 1);
    dev_case c = dev_new(&bp);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *sets[SETS][4];
    char *expect[SETS];
    for (int i = 0; i < SETS; i++) {
        for (int t = 0; t < 4; t++) {
            void *h = tu_bwd_new_buf(&rng, (int64_t)(c.in_bytes[t] / 2), bp.fwd.dtype);
            CU(cudaMalloc(&sets[i][t], c.in_bytes[t]));
            CU(cudaMemcpy(sets[i][t], h, c.in_bytes[t], cudaMemcpyHostToDevice));
            tu_free(h);
            CU(cudaMemcpyAsync(c.in[t], sets[i][t], c.in_bytes[t], cudaMemcpyDeviceToDevice, s));
        }
        CHECK(dev_run(&c, s) == DSWA_OK, "eager set %d: %s", i, dswa_last_error());
        CU(cudaStreamSynchronize(s));
        expect[i] = dev_fetch(&c);
    }
    cudaGraph_t graph;
    dswa_status st;
    cudaGraphExec_t exec = tu_capture(s, dev_run_ctx, &c, &graph, &st);
    CHECK(st == DSWA_OK, "call during capture: %s", dswa_last_error());
    int bad = 0;
    for (int r = 0; r < REPLAYS; r++) {
        const int i = (r * 2 + 1) % SETS;
        for (int t = 0; t < 4; t++)
            CU(cudaMemcpyAsync(c.in[t], sets[i][t], c.in_bytes[t], cudaMemcpyDeviceToDevice, s));
        for (int t = 0; t < 3; t++) CU(cudaMemsetAsync(c.g[t], 0xff, c.g_bytes[t], s));
        CU(cudaMemsetAsync(c.dl, 0xff, sizeof(float), s));
        CU(cudaGraphLaunch(exec, s));
        CU(cudaStreamSynchronize(s));
        char *h = dev_fetch(&c);
        bad += memcmp(h, expect[i], dev_out_bytes(&c)) != 0;
        free(h);
    }
    CHECK(bad == 0, "%d of %d graph replays differ from the eager results", bad, REPLAYS);
    printf("  %d replays with fresh inputs, %d differ from the eager results\n", REPLAYS, bad);
    for (int i = 0; i < SETS; i++) {
        for (int t = 0; t < 4; t++) CU(cudaFree(sets[i][t]));
        free(expect[i]);
    }
    dev_free(&c);
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    CU(cudaStreamDestroy(s));
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
        CHECK(st == r[i].want && strstr(dswa_last_error(), r[i].needle),
              "%s: status %s, want %s; message \"%s\" (wanted \"%s\")", r[i].what,
              dswa_status_string(st), dswa_status_string(r[i].want), dswa_last_error(), r[i].needle);
        printf("  %-34s -> %s\n", r[i].what, dswa_last_error());
    }
    CU(cudaDeviceSynchronize());
    char *h = dev_fetch(&c);
    size_t touched = 0;
    for (size_t i = 0; i < dev_out_bytes(&c); i++) touched += (unsigned char)h[i] != 0xff;
    CHECK(touched == 0, "refused calls changed %zu bytes of the gradients or dlambda", touched);
    free(h);

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

int main(void) {
    if (!dswa_cuda_available()) {
        dswa_problem f = dswa_problem_default(1, 8, 1, 64, 2);
        dswa_backward_problem bp = dswa_backward_problem_default(&f);
        static float q[1024], k[1024], v[1024], o[512], g[3][1024], ws[1024];
        (void)dswa_backward_cuda(&bp, q, k, v, o, g[0], g[1], g[2], NULL, ws, sizeof ws, NULL);
        tu_skip("no GPU (%s)", dswa_last_error()); /* the library's reason */
    }
    tu_rng_init(&rng, tu_test_seed());
    struct cudaDeviceProp prop;
    int dev = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    test_refusals();
    tu_backward_cases(gpu_backward, "CUDA", &rng);
    test_large();
    test_determinism();
    test_graph();
    TEST_MAIN_RETURN("test_cuda_backward");
}
#endif
