/* GPU tests of dswa_forward_cuda beyond the shared cases (tests/test_cuda_cases.c runs those):
   SAME-L shapes at production sizes against the float64 reference, outputs fully written and
   nothing outside the view touched, bitwise determinism, CUDA-graph capture replayed 1000 times
   with fresh inputs copied in between, two streams at once, and the refusals of the CUDA
   backend (alignment, head_dim, math). Large outputs are compared on a sample of rows drawn
   afresh each run (tu_err_sampled; every row with DSWA_TEST_LONG=1) and checked whole for
   being written and finite. Without a GPU (or without CUDA in the build) it prints
   "skipped: ..." and exits 77. `--small` runs only small shapes (for compute-sanitizer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "compare.h"
#include "testutil.h"

#ifndef DSWA_HAVE_CUDA
int main(void) { tu_skip("dswa was built without CUDA"); }
#else
#include "cuda_check.h"
#include "cuda_dev.h"

static uint64_t seed = 77000;
static int small_only = 0;

static double tol_for(dswa_dtype t) { return t == DSWA_F32 ? 3e-3 : t == DSWA_F16 ? 5e-3 : 1e-2; }

/* A problem's buffers on the host and on the device; the output with poisoned guards. */
typedef struct gpu_case {
    dswa_problem p;
    void *hq, *hk, *hv;
    int64_t nq, nk, nv;
    tu_outbuf ho;
    void *dq, *dk, *dv, *dbase; /* dbase: device copy of ho.base (guards included) */
} gpu_case;

static void *to_device(const void *h, int64_t elems, dswa_dtype t) {
    return tu_dev_from_host(h, (size_t)elems * tu_dtype_size(t));
}

static gpu_case case_new(const dswa_problem *p) {
    gpu_case c;
    tu_rng r;
    tu_rng_init(&r, seed++);
    c.p = *p;
    c.hq = tu_new_input(p, &p->q, &r, &c.nq);
    c.hk = tu_new_input(p, &p->k, &r, &c.nk);
    c.hv = tu_new_input(p, &p->v, &r, &c.nv);
    c.ho = tu_outbuf_new(p);
    c.dq = to_device(c.hq, c.nq, p->dtype);
    c.dk = to_device(c.hk, c.nk, p->dtype);
    c.dv = to_device(c.hv, c.nv, p->dtype);
    c.dbase = to_device(c.ho.base, c.ho.total, p->dtype);
    return c;
}

static void *dout(const gpu_case *c) { return (char *)c->dbase + TU_GUARD * tu_dtype_size(c->p.dtype); }

static void fetch_out(gpu_case *c) {
    CU(cudaMemcpy(c->ho.base, c->dbase, (size_t)c->ho.total * tu_dtype_size(c->p.dtype),
                  cudaMemcpyDeviceToHost));
}

static void case_free(gpu_case *c) {
    CU(cudaFree(c->dq)); CU(cudaFree(c->dk)); CU(cudaFree(c->dv)); CU(cudaFree(c->dbase));
    tu_free(c->hq); tu_free(c->hk); tu_free(c->hv);
    tu_outbuf_free(&c->ho);
}

/* Relative error over rows [r0, r1) of every batch and head. */
static double err_rows(const gpu_case *c, int64_t r0, int64_t r1) {
    const dswa_problem *p = &c->p;
    double *ref = malloc(sizeof(double) * (size_t)(p->batch * (r1 - r0) * p->heads * p->head_dim));
    if (!ref) abort();
    tu_reference_rows(p, c->hq, c->hk, c->hv, r0, r1, ref);
    const double e = tu_rel_error_rows(p, c->ho.out, ref, r0, r1, NULL);
    free(ref);
    return e;
}

/* Which query rows are compared with the float64 reference: tu_err_sampled (compare.h), all
   of them under DSWA_TEST_LONG=1; the sample is drawn afresh each run (seed printed). The
   whole output is still checked for being written and finite (run_checked). */
static int long_mode = 0;
static tu_rng sample_rng;
static int64_t rows_compared, rows_total;

static double err_sampled(const gpu_case *c) {
    int64_t rows = 0;
    const double e = tu_err_sampled(&c->p, c->hq, c->hk, c->hv, c->ho.out, long_mode ? NULL : &sample_rng, &rows);
    rows_compared += rows;
    rows_total += c->p.seq_len;
    return e;
}

/* Output elements (inside the view) that are not finite. */
static int64_t nonfinite(const gpu_case *c) {
    const dswa_problem *p = &c->p;
    int64_t bad = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int64_t h = 0; h < p->heads; h++)
                for (int64_t d = 0; d < p->head_dim; d++)
                    bad += !isfinite(tu_load(c->ho.out, tu_out_offset(&p->out, b, i, h, d), p->dtype));
    return bad;
}

/* Runs a case once on the default stream and checks status, coverage and error. */
static void run_checked(const char *name, gpu_case *c, double tol) {
    const dswa_status st = dswa_forward_cuda(&c->p, c->dq, c->dk, c->dv, dout(c), NULL);
    CHECK(st == DSWA_OK, "%s: status %s: %s", name, dswa_status_string(st), dswa_last_error());
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    if (st != DSWA_OK) return;
    fetch_out(c);
    int64_t unwritten = 0, clobbered = 0;
    tu_outbuf_check(&c->p, &c->ho, &unwritten, &clobbered);
    CHECK(unwritten == 0, "%s: %lld output elements not written", name, (long long)unwritten);
    CHECK(clobbered == 0, "%s: %lld elements outside the output view modified", name, (long long)clobbered);
    const int64_t bad = nonfinite(c); /* finite inputs: every output is finite */
    CHECK(bad == 0, "%s: %lld output elements are not finite", name, (long long)bad);
    const double e = err_sampled(c);
    CHECK(e <= tol, "%s: relative error %.3e > %.1e", name, e, tol);
    printf("  %-34s %-4s B=%d N=%-6d H=%-2d W=%d/%d v.pair=%lld  rel_err %.2e\n", name,
           dswa_dtype_name(c->p.dtype), c->p.batch, c->p.seq_len, c->p.heads, c->p.window_left,
           c->p.window_right, (long long)c->p.v.pair, e);
}

static dswa_problem same_l(int n, dswa_dtype t, int shared_v) {
    dswa_problem p = dswa_problem_default(1, n, 24, 64, 17);
    p.scale = 0.125f;
    p.dtype = t;
    if (shared_v) p.v = tu_layout_order(&p, "bnhd", 0); /* (B, N, H, D), pair stride 0 */
    return p;
}

/* SAME-L at production sizes, every dtype, both V layouts. */
static void test_same_l(void) {
    const int sizes[2] = {4352, 21964};
    for (int si = 0; si < (small_only ? 0 : 2); si++)
        for (int t = 0; t < 3; t++)
            for (int sv = 0; sv < 2; sv++) {
                dswa_problem p = same_l(sizes[si], (dswa_dtype)t, sv);
                gpu_case c = case_new(&p);
                run_checked(sv ? "same-l shared V" : "same-l", &c, tol_for(p.dtype));
                case_free(&c);
            }
}

/* Small shapes that cross every edge: partial tiles, windows wider than N, asymmetric and
   zero windows, B > 1, strided views with gaps, lambda and scale. */
static void test_small(void) {
    const struct { int B, N, H, wl, wr; float lam, scale; const char *order; int64_t pad; } cs[] = {
        {1, 1, 2, 17, 17, 1.f, 0.125f, "bnphd", 0},   {2, 37, 3, 17, 17, 0.37f, 0.2f, "bnphd", 0},
        {3, 130, 2, 5, 20, -1.5f, 0.125f, "bhpnd", 8}, {1, 200, 1, 0, 0, 1.f, 0.125f, "bnphd", 16},
        {1, 70, 2, 64, 0, 1.f, 0.3f, "nbphd", 0},     {2, 300, 2, 100, 90, 0.5f, 0.125f, "bnphd", 0},
        {1, 16, 1, 40, 40, 1.f, 0.125f, "bnphd", 0},
        /* band kernel: interior blocks with its widest spans (48: 8 key tiles a warp; 41; 40:
           7 tiles), and scale <= 0 there (Q negated / zeroed) */
        {2, 500, 2, 24, 24, 0.7f, 0.125f, "bnphd", 0}, {1, 400, 2, 40, 1, 1.f, -0.2f, "bhpnd", 0},
        {1, 333, 3, 3, 37, -0.5f, 0.f, "bnphd", 8},
        /* many (batch, head) rows: grids of thousands of blocks over short sequences, 16-bit
           and f32 rows in one launch wider than the device (B x H up to 600) */
        {2, 520, 100, 17, 17, 1.f, 0.125f, "bnphd", 0}, {1, 300, 600, 24, 24, 0.6f, 0.125f, "bhpnd", 8},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int t = 0; t < 3; t++)
            for (int sv = 0; sv < 2; sv++) {
                dswa_problem p = dswa_problem_default(cs[i].B, cs[i].N, cs[i].H, 64, cs[i].wl);
                p.window_right = cs[i].wr;
                p.lambda = cs[i].lam;
                p.scale = cs[i].scale;
                p.dtype = (dswa_dtype)t;
                p.q = tu_layout_order(&p, cs[i].order, cs[i].pad);
                p.k = tu_layout_order(&p, cs[i].order, cs[i].pad);
                p.v = sv ? tu_layout_order(&p, "bnhd", cs[i].pad) : tu_layout_order(&p, cs[i].order, cs[i].pad);
                p.out = tu_layout_order(&p, "bnhd", cs[i].pad);
                gpu_case c = case_new(&p);
                run_checked("small", &c, tol_for(p.dtype));
                case_free(&c);
            }
}

/* DSWA_MATH_FP32: fp32-level accuracy (<= 1e-5 relative) at SAME-L shapes and on edges. */
static void test_fp32_math(void) {
    const int sizes[3] = {1, 300, 4352};
    for (int si = 0; si < (small_only ? 2 : 3); si++)
        for (int sv = 0; sv < 2; sv++) {
            dswa_problem p = same_l(sizes[si], DSWA_F32, sv);
            p.math = DSWA_MATH_FP32;
            p.lambda = 0.7f;
            gpu_case c = case_new(&p);
            run_checked(sv ? "math fp32, shared V" : "math fp32", &c, 1e-5);
            case_free(&c);
        }
    dswa_problem p = dswa_problem_default(2, 129, 3, 64, 5);
    p.window_right = 40; /* asymmetric, 45 <= 48: the band kernel */
    p.math = DSWA_MATH_FP32;
    p.scale = 0.3f;
    gpu_case c = case_new(&p);
    run_checked("math fp32, window 5/40, B=2", &c, 1e-5);
    case_free(&c);
}

/* 20 runs give bitwise identical output. */
static void test_deterministic(void) {
    dswa_problem p = same_l(small_only ? 500 : 4352, DSWA_F32, 0);
    gpu_case c = case_new(&p);
    const size_t bytes = (size_t)c.ho.total * tu_dtype_size(p.dtype);
    void *first = malloc(bytes);
    if (!first) abort();
    int same = 1;
    for (int r = 0; r < 20; r++) {
        CHECK(dswa_forward_cuda(&p, c.dq, c.dk, c.dv, dout(&c), NULL) == DSWA_OK, "run %d: %s", r, dswa_last_error());
        CU(cudaGetLastError());
        fetch_out(&c);
        if (r == 0) memcpy(first, c.ho.base, bytes);
        else same &= memcmp(first, c.ho.base, bytes) == 0;
    }
    CHECK(same, "20 runs of the same inputs are not bitwise identical");
    printf("  deterministic over 20 runs: %s\n", same ? "yes" : "NO");
    free(first);
    case_free(&c);
}

static dswa_status run_on(void *c, cudaStream_t s) {
    const gpu_case *g = c;
    return dswa_forward_cuda(&g->p, g->dq, g->dk, g->dv, dout(g), s);
}

/* Capture one launch in a graph; replay it many times, copying a different input set into the
   captured buffers before each replay; each replay must equal the eager result for its set. */
static void test_graph(void) {
    enum { SETS = 6 };
    const int replays = small_only ? 20 : 1000;
    dswa_problem p = dswa_problem_default(2, 300, 4, 64, 17);
    p.lambda = 0.8f;
    p.dtype = DSWA_BF16;
    gpu_case c = case_new(&p);
    const size_t in_bytes = (size_t)c.nq * tu_dtype_size(p.dtype); /* q, k, v share a layout */
    const size_t out_bytes = (size_t)c.ho.total * tu_dtype_size(p.dtype);
    void *dsets[SETS][3], *expect[SETS], *got = malloc(out_bytes);
    if (!got) abort();
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < SETS; i++) {
        tu_rng r;
        tu_rng_init(&r, seed++);
        for (int t = 0; t < 3; t++) {
            void *h = tu_new_input(&p, &p.q, &r, NULL);
            dsets[i][t] = to_device(h, c.nq, p.dtype);
            tu_free(h);
        }
        /* eager result for this set, and a check of it against the reference. The copies go
           on s: a device-to-device cudaMemcpy on the legacy stream returns before it is done,
           and a non-blocking stream does not wait for it */
        CU(cudaMemcpyAsync(c.dq, dsets[i][0], in_bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaMemcpyAsync(c.dk, dsets[i][1], in_bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaMemcpyAsync(c.dv, dsets[i][2], in_bytes, cudaMemcpyDeviceToDevice, s));
        CHECK(dswa_forward_cuda(&p, c.dq, c.dk, c.dv, dout(&c), s) == DSWA_OK, "eager: %s", dswa_last_error());
        CU(cudaStreamSynchronize(s));
        expect[i] = malloc(out_bytes);
        if (!expect[i]) abort();
        CU(cudaMemcpy(expect[i], c.dbase, out_bytes, cudaMemcpyDeviceToHost));
        if (i == 0) {
            CU(cudaMemcpy(c.hq, dsets[i][0], in_bytes, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(c.hk, dsets[i][1], in_bytes, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(c.hv, dsets[i][2], in_bytes, cudaMemcpyDeviceToHost));
            memcpy(c.ho.base, expect[i], out_bytes);
            const double e = err_rows(&c, 0, p.seq_len);
            CHECK(e <= tol_for(p.dtype), "graph set 0: eager error %.3e", e);
        }
    }
    cudaGraph_t graph;
    dswa_status st;
    cudaGraphExec_t exec = tu_capture(s, run_on, &c, &graph, &st);
    CHECK(st == DSWA_OK, "launch during capture: %s", dswa_last_error());
    int bad = 0;
    for (int r = 0; r < replays; r++) {
        const int i = (r * 5 + 3) % SETS;
        CU(cudaMemcpyAsync(c.dq, dsets[i][0], in_bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaMemcpyAsync(c.dk, dsets[i][1], in_bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaMemcpyAsync(c.dv, dsets[i][2], in_bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaMemsetAsync(c.dbase, 0xff, out_bytes, s)); /* stale output must not pass */
        CU(cudaGraphLaunch(exec, s));
        CU(cudaMemcpyAsync(got, c.dbase, out_bytes, cudaMemcpyDeviceToHost, s));
        CU(cudaStreamSynchronize(s));
        /* the guards were 0xff-filled too: compare only the view's span */
        bad += memcmp((char *)got + TU_GUARD * 2, (char *)expect[i] + TU_GUARD * 2,
                      (size_t)c.ho.span * 2) != 0;
    }
    CHECK(bad == 0, "%d of %d graph replays differ from the eager result", bad, replays);
    printf("  graph: %d replays with fresh inputs, %d wrong\n", replays, bad);
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    CU(cudaStreamDestroy(s));
    for (int i = 0; i < SETS; i++) {
        for (int t = 0; t < 3; t++) CU(cudaFree(dsets[i][t]));
        free(expect[i]);
    }
    free(got);
    case_free(&c);
}

/* Two different problems launched on two streams at once, both right. */
static void test_two_streams(void) {
    dswa_problem pa = same_l(small_only ? 300 : 4352, DSWA_F32, 0);
    dswa_problem pb = same_l(small_only ? 200 : 3000, DSWA_F16, 1);
    pb.lambda = 0.5f;
    gpu_case a = case_new(&pa), b = case_new(&pb);
    cudaStream_t sa, sb;
    CU(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    for (int r = 0; r < 5; r++) {
        CHECK(dswa_forward_cuda(&pa, a.dq, a.dk, a.dv, dout(&a), sa) == DSWA_OK, "stream a: %s", dswa_last_error());
        CHECK(dswa_forward_cuda(&pb, b.dq, b.dk, b.dv, dout(&b), sb) == DSWA_OK, "stream b: %s", dswa_last_error());
    }
    CU(cudaGetLastError());
    CU(cudaStreamSynchronize(sa));
    CU(cudaStreamSynchronize(sb));
    fetch_out(&a);
    fetch_out(&b);
    const double ea = err_sampled(&a), eb = err_sampled(&b);
    CHECK(ea <= tol_for(pa.dtype) && eb <= tol_for(pb.dtype), "two streams: errors %.2e %.2e", ea, eb);
    printf("  two streams: rel_err %.2e and %.2e\n", ea, eb);
    CU(cudaStreamDestroy(sa));
    CU(cudaStreamDestroy(sb));
    case_free(&a);
    case_free(&b);
}

/* A NaN in one V row reaches exactly the outputs whose window holds it (the kernel's exact
   fallback), and a NaN in one K row likewise. */
static void test_nan(void) {
    /* heads 400 (bf16): the exact path in a grid of 1,600 blocks, most of them finite */
    for (int which = 1; which <= 4; which++) {
        dswa_problem p = dswa_problem_default(1, 200, which <= 2 ? 2 : 400, 64, 17);
        p.dtype = which <= 2 ? DSWA_F32 : DSWA_BF16;
        gpu_case c = case_new(&p);
        const int64_t j = 101, h = 1, pair = 1;
        void *host = which % 2 ? c.hk : c.hv;
        const dswa_layout *l = which % 2 ? &p.k : &p.v;
        tu_store(host, tu_in_offset(l, 0, j, pair, h, 5), p.dtype, NAN);
        CU(cudaMemcpy(which % 2 ? c.dk : c.dv, host, (size_t)c.nk * tu_dtype_size(p.dtype), cudaMemcpyHostToDevice));
        CHECK(dswa_forward_cuda(&p, c.dq, c.dk, c.dv, dout(&c), NULL) == DSWA_OK, "%s", dswa_last_error());
        CU(cudaDeviceSynchronize());
        fetch_out(&c);
        int wrong = 0;
        for (int64_t i = 0; i < p.seq_len; i++)
            for (int64_t hh = 0; hh < p.heads; hh++) {
                const int in_window = hh == h && j >= i - 17 && j <= i + 17;
                int any_nan = 0;
                for (int64_t d = 0; d < 64; d++)
                    any_nan |= isnan(tu_load(c.ho.out, tu_out_offset(&p.out, 0, i, hh, d), p.dtype));
                wrong += any_nan != in_window;
            }
        CHECK(wrong == 0, "NaN in one %s row (H = %d): %d output rows have the wrong NaN-ness",
              which % 2 ? "K" : "V", p.heads, wrong);
        const double e = err_rows(&c, 0, p.seq_len); /* finite rows must still be right */
        CHECK(e <= tol_for(p.dtype), "NaN in %s (H = %d): error of the finite rows %.3e",
              which % 2 ? "K" : "V", p.heads, e);
        printf("  NaN in one %s row, %s H = %d: %d wrong rows, rel_err of the rest %.2e\n",
               which % 2 ? "K" : "V", dswa_dtype_name(p.dtype), p.heads, wrong, e);
        case_free(&c);
    }
}

/* Strides of size-1 axes (batch, head, seq) are never used, so odd or huge ones are taken. */
static void test_unit_strides(void) {
    const struct { int B, N, H; } cs[] = {{1, 100, 1}, {1, 1, 3}, {2, 70, 1}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int t = 0; t < 3; t++) {
            dswa_problem p = dswa_problem_default(cs[i].B, cs[i].N, cs[i].H, 64, 17);
            p.dtype = (dswa_dtype)t;
            gpu_case c = case_new(&p);
            dswa_layout *const l[4] = {&c.p.q, &c.p.k, &c.p.v, &c.p.out};
            for (int j = 0; j < 4; j++) {
                if (c.p.batch == 1) l[j]->batch = 12345 + j;        /* odd: not 16-byte steps */
                if (c.p.heads == 1) l[j]->head = ((int64_t)1 << 40) + 3; /* above int32 too */
                if (c.p.seq_len == 1) l[j]->seq = 7;
            }
            run_checked("size-1 axes with odd strides", &c, tol_for(c.p.dtype));
            case_free(&c);
        }
}

/* What the CUDA backend refuses, with a status and message, writing nothing. */
static void test_refusals(void) {
    dswa_problem p = dswa_problem_default(1, 64, 2, 64, 17);
    gpu_case c = case_new(&p);
    CU(cudaMemset(c.dbase, 0xff, (size_t)c.ho.total * 4));
    struct { const char *what; dswa_problem p; const void *q; dswa_status want; const char *field; } r[5];
    r[0].what = "q misaligned by one element"; r[0].p = p; r[0].q = (const float *)c.dq + 1;
    r[0].want = DSWA_ERR_MISALIGNED; r[0].field = "q = ";
    r[1].what = "seq stride not a multiple of 4"; r[1].p = p; r[1].p.k.seq += 1; r[1].q = c.dq;
    r[1].want = DSWA_ERR_MISALIGNED; r[1].field = "k.seq";
    r[2].what = "dim stride 2"; r[2].p = p; r[2].p.v.dim = 2; r[2].p.v.head = 128; r[2].p.v.pair = 0;
    r[2].p.v.seq = 256; r[2].p.v.batch = 0; /* spans 16383 elements: inside v's buffer */
    r[2].q = c.dq; r[2].want = DSWA_ERR_MISALIGNED; r[2].field = "v.dim";
    r[3].what = "head_dim 32"; r[3].p = p; r[3].p.head_dim = 32; r[3].q = c.dq;
    r[3].want = DSWA_ERR_UNSUPPORTED; r[3].field = "head_dim";
    r[4].what = "math fp32, window 40/40"; r[4].p = p; r[4].p.math = DSWA_MATH_FP32;
    r[4].p.window_left = r[4].p.window_right = 40; r[4].q = c.dq;
    r[4].want = DSWA_ERR_UNSUPPORTED; r[4].field = "math";
    /* (strides above int32 are refused too: tests/test_aot.c checks that without a GPU, where
       a huge view need not fit next to real allocations) */
    for (int i = 0; i < 5; i++) {
        const dswa_status st = dswa_forward_cuda(&r[i].p, r[i].q, c.dk, c.dv, dout(&c), NULL);
        CHECK(st == r[i].want, "%s: status %s, want %s (%s)", r[i].what, dswa_status_string(st),
              dswa_status_string(r[i].want), dswa_last_error());
        CHECK(strstr(dswa_last_error(), r[i].field) != NULL, "%s: message '%s' does not name %s",
              r[i].what, dswa_last_error(), r[i].field);
        printf("  refused: %-32s -> %s\n", r[i].what, dswa_last_error());
    }
    CU(cudaDeviceSynchronize());
    fetch_out(&c);
    int touched = 0;
    for (int64_t i = 0; i < c.ho.total; i++) touched += ((const uint32_t *)c.ho.base)[i] != 0xffffffffu;
    CHECK(touched == 0, "refused calls wrote %d output elements", touched);
    case_free(&c);
}

int main(int argc, char **argv) {
    if (tu_flags(argc, argv, "--small", &small_only, (char *)NULL)) return 2;
    if (!dswa_cuda_available()) {
        static float q[1024], k[1024], v[1024], o[512];
        dswa_problem p = dswa_problem_default(1, 8, 1, 64, 2);
        (void)dswa_forward_cuda(&p, q, k, v, o, NULL); /* the library's reason */
        tu_skip("no GPU (%s)", dswa_last_error());
    }
    long_mode = getenv("DSWA_TEST_LONG") && atoi(getenv("DSWA_TEST_LONG")) > 0;
    const char *seed_env = getenv("DSWA_TEST_SEED");
    const uint64_t sample_seed = seed_env ? strtoull(seed_env, NULL, 0) : tu_fresh_seed();
    tu_rng_init(&sample_rng, sample_seed);
    printf("rows compared with the reference: %s (sample seed %llu: DSWA_TEST_SEED=%llu repeats it)\n",
           long_mode ? "all (DSWA_TEST_LONG)" : "a sample of each large problem", (unsigned long long)sample_seed,
           (unsigned long long)sample_seed);
    tu_print_device();
    test_refusals();
    test_unit_strides();
    test_small();
    test_nan();
    test_fp32_math();
    test_two_streams();
    test_deterministic();
    test_graph();
    test_same_l();
    printf("rows compared with the reference: %lld of %lld\n", (long long)rows_compared, (long long)rows_total);
    TEST_MAIN_RETURN("test_cuda");
}
#endif
