/* GPU tests of dswa_samel_backward_cuda, the fused SAME-L block's backward: every shared case
   (tests/lib/samel_backward_cases.c: every dtype, B > 1, odd N, N below the window, N = 1,
   rot_dims 0, 16, 32 and 64 of 64, pos_offset 5 and 100000, alphas negative and 0, strided,
   sliced and padded x, dqkv and dout, g NULL) against the float64 reference
   (tu_samel_ref64_backward) on fresh random inputs (seed printed; DSWA_TEST_SEED=N repeats a
   run), dqkv and the norms' gradients in poisoned buffers with poisoned guards, with the CPU
   test's tolerances (f32 twice: the default math on TF32's, DSWA_MATH_FP32 on fp32's); SAME-L's shape (B = 1, N = 4352, H = 24, D = 64) and a wide window per
   dtype; bitwise determinism of two runs with differently poisoned workspaces, and the time of
   one call at SAME-L's shape; one call captured in a CUDA graph and replayed with fresh inputs,
   equal to the eager results; and the refusals (workspace, head_dim, alignment, validation),
   each writing nothing (`--small`: the shared cases and the refusals only, for
   compute-sanitizer). The refusals that come before the device is looked at (validation and
   the workspace) also run without a GPU, on host memory, before the test reports "skipped:
   no GPU" (exit 77); a build without CUDA skips likewise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "samel_backward_cases.h"
#include "testutil.h"

static tu_rng rng;

/* The refusal problem: small, f32, contiguous, and where its buffers live. */
typedef struct refusal_bufs {
    dswa_samel_backward_problem bp;
    char *x, *dout, *dx, *w, *gr, *ws;   /* w: the norms' weights; gr: g's floats */
    size_t x_bytes, dout_bytes, dx_bytes, w_bytes, gr_bytes, ws_bytes;
    dswa_samel_norm_grads g;
} refusal_bufs;

static dswa_samel_backward_problem refusal_problem(int D) {
    dswa_samel_problem f = dswa_samel_problem_default(1, 40, 2);
    f.head_dim = D;
    f.qkv = tu_sbwd_packed_order(&f, "bnchd", 0);
    f.out = (dswa_layout){40 * 2 * D, 2 * D, 0, D, 1};
    f.rot_dims = 16;
    return dswa_samel_backward_problem_default(&f);
}

/* The workspace refusals, which dswa_samel_backward_cuda checks before the device: status and
   a message naming the field. `rb` in host or device memory (never dereferenced here). */
static void workspace_refusals(const refusal_bufs *rb) {
    struct { const char *what; int arg; dswa_status want; const char *needle; } r[] = {
        {"workspace NULL", 0, DSWA_ERR_INVALID_ARGUMENT, "workspace = NULL"},
        {"workspace_bytes one short", 1, DSWA_ERR_INVALID_ARGUMENT, "workspace_bytes = "},
        {"workspace misaligned by 128 bytes", 2, DSWA_ERR_MISALIGNED, "256-byte aligned"},
        {"workspace overlapping dqkv", 3, DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps dqkv"},
        {"workspace holding k_norm.dgamma", 4, DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps k_norm.dgamma"},
        {"workspace holding q_norm.beta", 5, DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps q_norm.beta"},
        {"dqkv == qkv (validation)", 6, DSWA_ERR_INVALID_ARGUMENT, "dqkv: overlaps qkv"},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        dswa_samel_backward_problem p = rb->bp;
        dswa_samel_norm_grads h = rb->g;
        void *dx = rb->dx, *ws = rb->ws;
        size_t wsb = rb->ws_bytes;
        switch (r[i].arg) {
        case 0: ws = NULL; break;
        case 1: wsb = rb->ws_bytes - 1; break;
        case 2: ws = rb->ws + 128; break;
        case 3: ws = rb->dx; wsb = rb->dx_bytes + rb->ws_bytes; break;
        case 4: h.k_norm.dgamma = (float *)(rb->ws + 1024); break;
        case 5: p.fwd.q_norm.beta = (const float *)(rb->ws + 2048); break;
        case 6: dx = rb->x; break;
        default: break;
        }
        const dswa_status st = dswa_samel_backward_cuda(&p, rb->x, rb->dout, dx, &h, ws, wsb, NULL);
        tu_check_refusal(r[i].what, 38, st, r[i].want, r[i].needle);
    }
    CHECK(dswa_samel_backward_workspace_bytes(NULL) == 0, "workspace bytes of NULL: not 0");
    dswa_samel_backward_problem e = rb->bp;
    e.fwd.seq_len = 0;
    CHECK(dswa_samel_backward_workspace_bytes(&e) == 0, "empty problem: workspace %zu bytes",
          dswa_samel_backward_workspace_bytes(&e));
}

/* Without a GPU: the workspace refusals on host memory, then a valid call refused with
   DSWA_ERR_NO_DEVICE; nothing written. */
static void host_refusals(void) {
    printf("refusals before the device (host memory)\n");
    refusal_bufs rb;
    rb.bp = refusal_problem(64);
    const dswa_samel_problem *f = &rb.bp.fwd;
    const dswa_problem ov = tu_sbwd_dout_view(&rb.bp);
    rb.x_bytes = (size_t)tu_sbwd_packed_elems(f, &f->qkv) * 4;
    rb.dout_bytes = (size_t)tu_span(&ov, &rb.bp.dout, 1) * 4;
    rb.dx_bytes = rb.x_bytes;
    rb.w_bytes = 4 * 64 * 4;
    rb.gr_bytes = 2 * (1 + 2 * 64) * 4;
    rb.ws_bytes = dswa_samel_backward_workspace_bytes(&rb.bp);
    CHECK(rb.ws_bytes > 0 && rb.ws_bytes != SIZE_MAX, "workspace bytes %zu", rb.ws_bytes);
    /* one arena, every piece 256-byte aligned and apart */
    const size_t sz[6] = {rb.x_bytes, rb.dout_bytes, rb.dx_bytes, rb.w_bytes, rb.gr_bytes, rb.ws_bytes};
    size_t total = 0, at[6];
    for (int i = 0; i < 6; i++) {
        at[i] = total;
        total += (sz[i] + 1023) / 256 * 256;
    }
    char *arena = aligned_alloc(256, total);
    if (!arena) abort();
    memset(arena, 0x5a, total);
    rb.x = arena + at[0]; rb.dout = arena + at[1]; rb.dx = arena + at[2];
    rb.w = arena + at[3]; rb.gr = arena + at[4]; rb.ws = arena + at[5];
    float *w = (float *)rb.w;
    rb.bp.fwd.q_norm.gamma = w; rb.bp.fwd.q_norm.beta = w + 64;
    rb.bp.fwd.k_norm.gamma = w + 128; rb.bp.fwd.k_norm.beta = w + 192;
    rb.g = tu_sbwd_grads_in((float *)rb.gr, 64);
    workspace_refusals(&rb);
    const dswa_status s = dswa_samel_backward_cuda(&rb.bp, rb.x, rb.dout, rb.dx, &rb.g, rb.ws,
                                                   rb.ws_bytes, NULL);
    CHECK(s == DSWA_ERR_NO_DEVICE && dswa_last_error()[0], "a valid call without a device: %s: %s",
          dswa_status_string(s), dswa_last_error());
    printf("  %-38s -> %s\n", "a valid call", dswa_last_error());
    size_t changed = 0;
    for (size_t i = 0; i < total; i++) changed += (unsigned char)arena[i] != 0x5a;
    CHECK(changed == 0, "refused calls changed %zu bytes", changed);
    free(arena);
}

#ifndef DSWA_HAVE_CUDA
int main(void) {
    tu_rng_init(&rng, tu_test_seed());
    host_refusals();
    if (tu_failures) TEST_MAIN_RETURN("test_cuda_samel_backward");
    tu_skip("dswa was built without CUDA");
}
#else
#include "cuda_check.h"
#include "cuda_dev.h"

/* ---- the shared cases through the GPU --------------------------------------------------- */

/* dswa_samel_backward_cuda on host buffers: every region copied to the device and back around
   the call (the norms' weights and g's pointers mapped too), with a workspace of the size the
   library asks for, poisoned (it needs no init). Every other call reads the alphas from device
   memory (dswa_samel_norm.alpha_at; the problem's floats NaN, so they must not be read). */
static dswa_status gpu_backward(const dswa_samel_backward_problem *p, const void *qkv,
                                const void *dout, void *dqkv, const dswa_samel_norm_grads *g,
                                const tu_region *r, int n) {
    tu_dev_regions dev = tu_regions_to_device(r, n);
    dswa_samel_backward_problem d = *p;
    dswa_samel_norm *nm[2] = {&d.fwd.q_norm, &d.fwd.k_norm};
    for (int t = 0; t < 2; t++) {
        nm[t]->gamma = tu_regions_at(&dev, nm[t]->gamma);
        nm[t]->beta = tu_regions_at(&dev, nm[t]->beta);
    }
    dswa_samel_norm_grads dg;
    if (g) {
        const dswa_samel_norm_grad *hs[2] = {&g->q_norm, &g->k_norm};
        dswa_samel_norm_grad *ds[2] = {&dg.q_norm, &dg.k_norm};
        for (int t = 0; t < 2; t++) {
            ds[t]->dalpha = tu_regions_at(&dev, hs[t]->dalpha);
            ds[t]->dgamma = tu_regions_at(&dev, hs[t]->dgamma);
            ds[t]->dbeta = tu_regions_at(&dev, hs[t]->dbeta);
        }
    }
    static int calls;
    float *alpha_at = NULL;
    if (calls++ % 2 && isfinite(d.fwd.q_norm.alpha) && isfinite(d.fwd.k_norm.alpha)) {
        const float alphas[2] = {d.fwd.q_norm.alpha, d.fwd.k_norm.alpha};
        alpha_at = tu_dev_from_host(alphas, sizeof alphas);
        d.fwd.q_norm.alpha = d.fwd.k_norm.alpha = NAN;
        d.fwd.q_norm.alpha_at = alpha_at;
        d.fwd.k_norm.alpha_at = alpha_at + 1;
    }
    const size_t wsb = dswa_samel_backward_workspace_bytes(p);
    void *ws = tu_dev_poisoned(wsb);
    const dswa_status s = dswa_samel_backward_cuda(&d, tu_regions_at(&dev, qkv), tu_regions_at(&dev, dout),
                                                   tu_regions_at(&dev, dqkv), g ? &dg : NULL, ws, wsb, NULL);
    tu_regions_back(&dev);
    if (ws) CU(cudaFree(ws));
    if (alpha_at) CU(cudaFree(alpha_at));
    return s;
}

/* SAME-L's shape and a wide window, against the reference. */
static void test_large(void) {
    printf("larger shapes\n");
    for (int t = 0; t < tu_bwd_passes(); t++) {
        dswa_dtype dt;
        dswa_math math;
        tu_bwd_pass(t, &dt, &math);
        tu_sbwd_case c = tu_sbwd_make(&rng, "SAME-L N=4352 H=24 D=64, rot 32", 1, 4352, 24, 64, 17, 17,
                                      32, dt);
        c.bp.fwd.math = math;
        c.bp.fwd.lambda = 1.0f;
        c.bp.fwd.scale = 0.125f;
        tu_sbwd_run(gpu_backward, "CUDA", &rng, c);
        c = tu_sbwd_make(&rng, "wide window 5/300, B=2", 2, 700, 2, 64, 5, 300, 32, dt);
        c.bp.fwd.math = math;
        tu_sbwd_run(gpu_backward, "CUDA", &rng, c);
        c = tu_sbwd_make(&rng, "head_dim 1, no RoPE", 2, 30, 2, 1, 3, 3, 0, dt);
        c.bp.fwd.math = math;
        tu_sbwd_run(gpu_backward, "CUDA", &rng, c);
        c = tu_sbwd_make(&rng, "head_dim 40, rot 40", 2, 30, 2, 40, 3, 3, 40, dt);
        c.bp.fwd.math = math;
        tu_sbwd_run(gpu_backward, "CUDA", &rng, c);
    }
}

/* ---- device-resident problems ----------------------------------------------------------- */

/* Device buffers of one contiguous problem (dqkv like qkv, dout like out), g asked for. */
typedef struct dev_case {
    dswa_samel_backward_problem bp;   /* its norms' weights point to the device */
    size_t x_bytes, dout_bytes, dx_bytes, ws_bytes, gr_bytes;
    void *x, *dout, *dx, *ws;
    float *w, *gr;                    /* the norms' weights; g's floats */
    dswa_samel_norm_grads g;
} dev_case;

static dev_case dev_new(const dswa_samel_backward_problem *bp) {
    dev_case c;
    c.bp = *bp;
    dswa_samel_problem *f = &c.bp.fwd;
    const size_t es = tu_dtype_size(f->dtype);
    const int D = f->head_dim;
    const dswa_problem ov = tu_sbwd_dout_view(&c.bp);
    const int64_t nx = tu_sbwd_packed_elems(f, &f->qkv), nd = tu_span(&ov, &c.bp.dout, 1);
    c.x_bytes = (size_t)nx * es;
    c.dout_bytes = (size_t)nd * es;
    c.dx_bytes = (size_t)tu_sbwd_packed_elems(f, &c.bp.dqkv) * es;
    c.gr_bytes = sizeof(float) * 2 * (1 + 2 * (size_t)D);
    void *h = tu_bwd_new_buf(&rng, nx, f->dtype);
    c.x = tu_dev_from_host(h, c.x_bytes);
    tu_free(h);
    h = tu_bwd_new_buf(&rng, nd, f->dtype);
    c.dout = tu_dev_from_host(h, c.dout_bytes);
    tu_free(h);
    float *w = tu_sbwd_norms_new(&rng, f);
    c.w = tu_dev_from_host(w, 4 * (size_t)D * sizeof(float));
    free(w);
    f->q_norm.gamma = c.w; f->q_norm.beta = c.w + D;
    f->k_norm.gamma = c.w + 2 * D; f->k_norm.beta = c.w + 3 * D;
    CU(cudaMalloc(&c.dx, c.dx_bytes + 256));   /* room for a view shifted by a few bytes */
    CU(cudaMemset(c.dx, 0xff, c.dx_bytes));
    CU(cudaMalloc((void **)&c.gr, c.gr_bytes));
    CU(cudaMemset(c.gr, 0xff, c.gr_bytes));
    c.g = tu_sbwd_grads_in(c.gr, D);
    c.ws_bytes = dswa_samel_backward_workspace_bytes(&c.bp);
    CU(cudaMalloc(&c.ws, c.ws_bytes));
    return c;
}

static void dev_free(dev_case *c) {
    CU(cudaFree(c->x)); CU(cudaFree(c->dout)); CU(cudaFree(c->dx));
    CU(cudaFree(c->ws)); CU(cudaFree(c->w)); CU(cudaFree(c->gr));
}

/* The call on a dev_case's buffers, on stream s. */
static dswa_status dev_run(void *ctx, cudaStream_t s) {
    const dev_case *c = ctx;
    return dswa_samel_backward_cuda(&c->bp, c->x, c->dout, c->dx, &c->g, c->ws, c->ws_bytes, s);
}

/* The call on c's buffers for the shared device checks: x and dout in (the norms' weights
   stay); dqkv and g's floats out (fetched as one host block in that order). */
static tu_dev_op dev_op(dev_case *c) {
    const tu_dev_op op = {.run = dev_run, .ctx = c,
                          .in = {{c->x, c->x_bytes}, {c->dout, c->dout_bytes}}, .n_in = 2,
                          .out = {{c->dx, c->dx_bytes}, {c->gr, c->gr_bytes}}, .n_out = 2,
                          .ws = {c->ws, c->ws_bytes}};
    return op;
}

static dswa_samel_backward_problem same_l(dswa_dtype dt) {
    dswa_samel_problem f = dswa_samel_problem_default(1, 4352, 24);
    f.dtype = dt;
    f.q_norm.alpha = 0.8f;
    f.k_norm.alpha = 1.2f;
    return dswa_samel_backward_problem_default(&f);
}

/* Two runs, the workspace poisoned differently before each: bitwise equal results. Then the
   time of one call at SAME-L's shape (the mean of 10 after those two). */
static void test_determinism(void) {
    enum { TIMED = 10 };
    printf("determinism and time\n");
    for (int t = 0; t < 3; t++) {
        const dswa_samel_backward_problem bp = same_l((dswa_dtype)t);
        dev_case c = dev_new(&bp);
        const tu_dev_op op = dev_op(&c);
        const int same = tu_dev_two_runs_equal(&op);
        CHECK(same, "%s: two runs differ", dswa_dtype_name(bp.fwd.dtype));
        const float ms = tu_dev_time_ms(&op, TIMED);
        printf("  %-4s SAME-L B=1 N=4352 H=24 D=64 W=17/17 rot=32: two runs %s; one call %.3f ms "
               "(mean of %d); workspace %.1f MB\n", dswa_dtype_name(bp.fwd.dtype),
               same ? "bitwise equal" : "DIFFER", ms / TIMED, TIMED, c.ws_bytes / 1e6);
        dev_free(&c);
    }
}

/* One call captured in a graph on a non-blocking stream; replays with fresh inputs copied into
   the captured buffers (and the outputs poisoned) equal the eager results bitwise. */
static void test_graph(void) {
    printf("CUDA graph\n");
    dswa_samel_problem f = dswa_samel_problem_default(2, 300, 3);
    f.dtype = DSWA_BF16;
    f.window_right = 9;
    f.pos_offset = 7;
    const dswa_samel_backward_problem bp = dswa_samel_backward_problem_default(&f);
    dev_case c = dev_new(&bp);
    const tu_dev_op op = dev_op(&c);
    tu_dev_graph_check(&op, &rng, bp.fwd.dtype, 1);   /* the workspace poisoned too */
    dev_free(&c);
}

/* What dswa_samel_backward_cuda refuses, with the status and a message naming the field; no
   byte of dqkv or the norm gradients changes. */
static void test_refusals(void) {
    printf("refusals\n");
    const dswa_samel_backward_problem bp = refusal_problem(64);
    dev_case c = dev_new(&bp);
    refusal_bufs rb;
    rb.bp = c.bp;
    rb.x = c.x; rb.dout = c.dout; rb.dx = c.dx; rb.ws = c.ws; rb.w = (char *)c.w; rb.gr = (char *)c.gr;
    rb.x_bytes = c.x_bytes; rb.dout_bytes = c.dout_bytes; rb.dx_bytes = c.dx_bytes;
    rb.ws_bytes = c.ws_bytes; rb.gr_bytes = c.gr_bytes; rb.w_bytes = 4 * 64 * sizeof(float);
    rb.g = c.g;
    workspace_refusals(&rb);

    /* head_dim 80 over N = 20: its contiguous views fit the buffers of the D = 64, N = 40 one;
       its norms' weights and gradients (80 floats each) in a buffer of their own */
    dswa_samel_backward_problem d80 = refusal_problem(80);
    d80.fwd.seq_len = 20;
    d80.fwd.qkv = tu_sbwd_packed_order(&d80.fwd, "bnchd", 0);
    d80.fwd.out = (dswa_layout){20 * 2 * 80, 2 * 80, 0, 80, 1};
    d80 = dswa_samel_backward_problem_default(&d80.fwd);
    float *room;
    CU(cudaMalloc((void **)&room, 1024 * sizeof(float)));
    d80.fwd.q_norm.gamma = room; d80.fwd.q_norm.beta = room + 80;
    d80.fwd.k_norm.gamma = room + 160; d80.fwd.k_norm.beta = room + 240;
    const dswa_samel_norm_grads g80 = tu_sbwd_grads_in(room + 320, 80);
    const size_t ws80 = dswa_samel_backward_workspace_bytes(&d80);
    CHECK(ws80 <= c.ws_bytes, "the head_dim 80 problem's workspace (%zu) does not fit", ws80);

    struct { const char *what; int arg; dswa_status want; const char *needle; } r[] = {
        {"qkv misaligned by 2 bytes", 0, DSWA_ERR_MISALIGNED, "qkv = "},
        {"dqkv misaligned by 2 bytes", 1, DSWA_ERR_MISALIGNED, "dqkv = "},
        {"k_norm.dalpha misaligned by 2 bytes", 2, DSWA_ERR_MISALIGNED, "k_norm.dalpha = "},
        {"q_norm.gamma misaligned by 2 bytes", 3, DSWA_ERR_MISALIGNED, "q_norm.gamma = "},
        {"head_dim 80", 4, DSWA_ERR_UNSUPPORTED, "head_dim = 80"},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        dswa_samel_backward_problem p = c.bp;
        dswa_samel_norm_grads h = c.g;
        const void *x = c.x;
        void *dx = c.dx, *ws = c.ws;
        switch (r[i].arg) {
        case 0: x = (const char *)c.x + 2; break;
        case 1: dx = (char *)c.dx + 2; break;
        case 2: h.k_norm.dalpha = (float *)((char *)(room + 1000) + 2); break;  /* apart from the rest */
        case 3: p.fwd.q_norm.gamma = (const float *)((const char *)p.fwd.q_norm.gamma + 2); break;
        case 4: p = d80; h = g80; break;
        default: break;
        }
        const dswa_status st = dswa_samel_backward_cuda(&p, x, c.dout, dx, &h, ws, c.ws_bytes, NULL);
        tu_check_refusal(r[i].what, 38, st, r[i].want, r[i].needle);
    }
    const tu_dev_op op = dev_op(&c);
    const size_t touched = tu_dev_out_changed(&op);
    CHECK(touched == 0, "refused calls changed %zu bytes of dqkv or the norm gradients", touched);

    /* an empty problem: valid with NULL data pointers, writes the norm gradients as 0 only */
    dswa_samel_backward_problem e = c.bp;
    e.fwd.batch = 0;
    CHECK(dswa_samel_backward_cuda(&e, NULL, NULL, NULL, &c.g, NULL, 0, NULL) == DSWA_OK,
          "batch = 0: %s", dswa_last_error());
    CU(cudaDeviceSynchronize());
    char *h = tu_dev_fetch(&op);
    size_t nonzero = 0, dx_touched = 0;
    for (size_t i = 0; i < c.gr_bytes; i++) nonzero += h[c.dx_bytes + i] != 0;
    for (size_t i = 0; i < c.dx_bytes; i++) dx_touched += (unsigned char)h[i] != 0xff;
    CHECK(nonzero == 0 && dx_touched == 0, "batch = 0: %zu norm-gradient bytes not 0, %zu dqkv "
          "bytes changed", nonzero, dx_touched);
    free(h);
    CU(cudaFree(room));
    dev_free(&c);
}

int main(int argc, char **argv) {
    int small_only = 0;   /* --small: the shared cases and the refusals only (compute-sanitizer) */
    if (tu_flags(argc, argv, "--small", &small_only, (char *)NULL)) return 2;
    tu_rng_init(&rng, tu_test_seed());
    if (!dswa_cuda_available()) {
        host_refusals();
        if (tu_failures) TEST_MAIN_RETURN("test_cuda_samel_backward");
        tu_skip("no GPU (%s)", dswa_last_error()); /* the library's reason, from the valid call */
    }
    tu_print_device();
    test_refusals();
    tu_bwd_tf32_backend = 1;   /* f32 runs on TF32 unless DSWA_MATH_FP32 */
    tu_samel_backward_cases(gpu_backward, "CUDA", &rng);
    if (!small_only) {
        test_large();
        test_determinism();
        test_graph();
    }
    TEST_MAIN_RETURN("test_cuda_samel_backward");
}
#endif
