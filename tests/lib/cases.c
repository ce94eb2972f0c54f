/* The backend cases: every forward function against the independent float64 reference
   (dswa_reference_rows), on fresh random normal inputs, with poisoned outputs surrounded by
   poisoned guard zones: every output element inside the view must be written, every element
   outside it (gaps, guards) must not. tests/test_cpu.c runs them through dswa_forward_cpu,
   tests/test_cuda_cases.c through dswa_forward_cuda (host buffers copied to the device and
   back by cuda_forward.c). There, a case the CUDA backend declines (DSWA_ERR_UNSUPPORTED or
   DSWA_ERR_MISALIGNED: head_dim != 64, strides not 16-byte multiples, math fp32) is counted as
   not applicable; f32 tolerances are TF32's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "cases.h"
#include "compare.h"
#include "testutil.h"
#include "cuda_forward.h"

/* The backend under test, set by tu_backend_cases. */
static int cuda_backend;
static const char *backend_name = "cpu";
static dswa_status (*forward)(const dswa_problem *p, const void *q, const void *k, const void *v,
                              void *out) = dswa_forward_cpu;
static int not_applicable = 0, ran = 0;

/* Relative Frobenius tolerances. f32 is computed in fp32 (the CPU backend has no TF32); the
   16-bit dtypes are compared with the reference evaluated on the same 16-bit inputs, so the
   error is the output's own rounding (2^-11 f16, 2^-8 bf16) plus fp32 arithmetic. */
#define TOL_F32 (cuda_backend ? 3e-3 : 1e-5) /* TF32 matrix math on the GPU */
#define TOL_F16 5e-3
#define TOL_BF16 1e-2

static double tol_for(dswa_dtype t) {
    return t == DSWA_F32 ? TOL_F32 : t == DSWA_F16 ? TOL_F16 : TOL_BF16;
}

static uint64_t next_seed = 1000;

/* A finished run: the output buffer (guards included) and the reference, for extra checks. */
typedef struct run {
    tu_outbuf o;
    double *ref;     /* dense [B][N][H][D] */
    double err;
    dswa_status status;
} run;

static void run_free(run *r) {
    tu_outbuf_free(&r->o);
    free(r->ref);
    r->ref = NULL;
}

/* 16-bit outputs are the fp32 result rounded to nearest: within half a unit in the last place
   of the 16-bit format of the float64 reference, plus a slack for fp32 arithmetic far below
   that unit. (A truncating conversion, or one that rounds twice, fails this; Frobenius
   tolerances cannot see it.) Not used with saturating scores, whose fp32 error is larger. */
static void check_rounding(const char *name, const dswa_problem *p, const void *out,
                           const double *ref) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const int mant = p->dtype == DSWA_F16 ? 10 : 7;
    const int emin = p->dtype == DSWA_F16 ? -14 : -126;
    double ss = 0;
    for (int64_t e = 0; e < B * N * H * D; e++) ss += ref[e] * ref[e];
    const double rms = sqrt(ss / (double)(B * N * H * D));
    int64_t bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const double rf = ref[((b * N + i) * H + h) * D + d];
                    const double o = tu_load(out, tu_out_offset(&p->out, b, i, h, d), p->dtype);
                    int ex;
                    (void)frexp(fabs(o) > fabs(rf) ? o : rf, &ex);   /* |x| in [2^(ex-1), 2^ex) */
                    int e2 = ex - 1 < emin ? emin : ex - 1;
                    const double ulp = ldexp(1.0, e2 - mant);
                    const double dev = fabs(o - rf) / ulp;
                    if (dev > worst) worst = dev;
                    if (fabs(o - rf) > 0.5 * ulp + 1e-5 * (fabs(rf) + rms)) bad++;
                }
    CHECK(bad == 0, "%s (%s): %lld of %lld outputs are not the reference rounded to nearest "
          "(worst %.3f units in the last place)", name, dswa_dtype_name(p->dtype), (long long)bad,
          (long long)(B * N * H * D), worst);
}

/* Runs p on the given inputs and checks: status OK, every view element written, nothing
   outside the view touched, relative error <= tol (tol < 0: skip the error check), and (when
   expect_finite) every output finite. */
static run run_on(const char *name, const dswa_problem *p, const void *q, const void *k,
                  const void *v, double tol, int expect_finite) {
    run r;
    r.o = tu_outbuf_new(p);
    r.status = forward(p, q, k, v, r.o.out);
    r.err = NAN;
    r.ref = NULL;
    if (cuda_backend && (r.status == DSWA_ERR_UNSUPPORTED || r.status == DSWA_ERR_MISALIGNED)) {
        not_applicable++;
        printf("  %-44s n/a on cuda: %s\n", name, dswa_last_error());
        return r;
    }
    ran++;
    CHECK(r.status == DSWA_OK, "%s: status %d (%s): %s", name, (int)r.status,
          dswa_status_string(r.status), dswa_last_error());
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const int64_t n = B * N * H * D;
    r.ref = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!r.ref) abort();
    if (r.status != DSWA_OK) return r;

    int64_t unwritten = 0, clobbered = 0;
    tu_outbuf_check(p, &r.o, &unwritten, &clobbered);
    CHECK(unwritten == 0, "%s: %lld output elements inside the view were not written", name,
          (long long)unwritten);
    CHECK(clobbered == 0, "%s: %lld elements outside the output view were modified", name,
          (long long)clobbered);

    if (expect_finite) {
        int64_t nonfinite = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t d = 0; d < D; d++)
                        if (!isfinite(tu_load(r.o.out, tu_out_offset(&p->out, b, i, h, d), p->dtype)))
                            nonfinite++;
        CHECK(nonfinite == 0, "%s: %lld output elements are not finite", name, (long long)nonfinite);
    }

    tu_reference(p, q, k, v, r.ref);
    r.err = tu_rel_error(p, r.o.out, r.ref);
    /* (the GPU rounds P to 16 bits before P.V, so only the CPU rounds exactly once) */
    if (!cuda_backend && expect_finite && p->dtype != DSWA_F32 && fabsf(p->scale) <= 2.0f)
        check_rounding(name, p, r.o.out, r.ref);
    if (tol >= 0) {
        CHECK(r.err <= tol, "%s: relative error %.3e > tolerance %.1e", name, r.err, tol);
        printf("  %-44s %-4s B=%d N=%d H=%d D=%d W=%d/%d  rel_err %.2e (tol %.0e)\n", name,
               dswa_dtype_name(p->dtype), p->batch, p->seq_len, p->heads, p->head_dim,
               p->window_left, p->window_right, r.err, tol);
    }
    return r;
}

/* Fresh inputs (one buffer per tensor, each view's own span), run, check, free. */
static double run_case(const char *name, const dswa_problem *p, double tol) {
    tu_rng rng;
    tu_rng_init(&rng, next_seed++);
    void *q = tu_new_input(p, &p->q, &rng, NULL);
    void *k = tu_new_input(p, &p->k, &rng, NULL);
    void *v = tu_new_input(p, &p->v, &rng, NULL);
    if (cuda_backend && p->dtype == DSWA_F32 && fabsf(p->scale) > 2.0f) {
        /* |score| ~ 1e3: TF32's input rounding alone would move scores by ~0.5. Inputs exact
           in TF32 test what the kernel controls (max subtraction, fp32 accumulation). */
        tu_round_tf32(q, dswa_view_span(p, &p->q, 2));
        tu_round_tf32(k, dswa_view_span(p, &p->k, 2));
        tu_round_tf32(v, dswa_view_span(p, &p->v, 2));
    }
    run r = run_on(name, p, q, k, v, tol, 1);
    const double err = r.err;
    run_free(&r);
    tu_free(q);
    tu_free(k);
    tu_free(v);
    return err;
}

static dswa_problem make(int B, int N, int H, int D, int wl, int wr, dswa_dtype t) {
    dswa_problem p = dswa_problem_default(B, N, H, D, wl);
    p.window_right = wr;
    p.dtype = t;
    return p;
}

static const dswa_dtype all_dtypes[3] = {DSWA_F32, DSWA_F16, DSWA_BF16};

/* ---- shapes ------------------------------------------------------------------------------ */
static void test_shapes(void) {
    printf("shapes\n");
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        dswa_problem p = make(1, 100, 24, 64, 17, 17, dt);  /* SAME-L heads, dims, window */
        p.scale = 0.125f;
        run_case("SAME-L H=24 D=64 W=17, N=100", &p, tol_for(dt));
        p.v = tu_layout_order(&p, "bnhd", 0);                 /* SAME-L: one V for both pairs */
        run_case("SAME-L, shared V (own buffer)", &p, tol_for(dt));
    }
    dswa_problem p = make(3, 40, 4, 64, 17, 17, DSWA_F32);
    run_case("B=3", &p, TOL_F32);
    p = make(2, 1, 3, 64, 17, 17, DSWA_F32);
    run_case("N=1", &p, TOL_F32);
    p = make(2, 1, 3, 64, 0, 0, DSWA_F32);
    run_case("N=1, W=0", &p, TOL_F32);
    p = make(2, 10, 3, 64, 17, 17, DSWA_F32);
    run_case("N=10 < W", &p, TOL_F32);
    p = make(1, 18, 3, 64, 17, 17, DSWA_F32);
    run_case("N=18 = W+1", &p, TOL_F32);
    p = make(1, 35, 3, 64, 17, 17, DSWA_F32);
    run_case("N=35 = 2W+1", &p, TOL_F32);
    p = make(2, 257, 4, 64, 17, 17, DSWA_F32);
    run_case("N=257", &p, TOL_F32);
    p = make(1, 1000, 3, 64, 17, 17, DSWA_F32);
    run_case("N=1000", &p, TOL_F32);
    p = make(1, 16, 2, 64, 17, 17, DSWA_BF16);
    run_case("N=16 < W, bf16", &p, TOL_BF16);

    static const int dims[] = {1, 3, 32, 100, 128, 256};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int t = 0; t < 3; t++) {
            char name[64];
            snprintf(name, sizeof name, "head_dim=%d", dims[di]);
            p = make(2, 50, 2, dims[di], 17, 17, all_dtypes[t]);
            run_case(name, &p, tol_for(all_dtypes[t]));
        }
}

/* ---- windows ----------------------------------------------------------------------------- */
static void test_windows(void) {
    printf("windows\n");
    static const struct { int wl, wr; const char *name; } w[] = {
        {5, 20, "asymmetric 5/20"}, {20, 5, "asymmetric 20/5"}, {17, 0, "causal 17/0"},
        {0, 17, "anti-causal 0/17"}, {1, 0, "1/0"}, {0, 1, "0/1"}, {59, 59, "59/59 (N-1: full)"},
        {100, 3, "100/3 (left beyond N)"}, {2147483647, 2147483647, "INT32_MAX/INT32_MAX"},
        {2147483647, 0, "INT32_MAX/0 (causal, full)"},
    };
    for (size_t c = 0; c < sizeof w / sizeof w[0]; c++)
        for (int t = 0; t < 3; t++) {
            dswa_problem p = make(2, 60, 3, 64, w[c].wl, w[c].wr, all_dtypes[t]);
            run_case(w[c].name, &p, tol_for(all_dtypes[t]));
        }

    /* Windows wider than a backend's key tile (hundreds of keys): the online softmax has to
       carry its running maximum and sum across tiles, including with saturating scores. */
    static const struct { int N, D, wl, wr; float scale; const char *name; } lw[] = {
        {700, 64, 300, 300, 0.125f, "long window 300/300, N=700"},
        {600, 64, 2147483647, 0, 0.125f, "causal full, N=600"},
        {600, 64, 2147483647, 2147483647, 125.0f, "full window, N=600, |score| ~ 1e3"},
        {300, 512, 200, 100, 0.05f, "D=512, window 200/100"},
    };
    for (size_t c = 0; c < sizeof lw / sizeof lw[0]; c++)
        for (int t = 0; t < 3; t++) {
            dswa_problem p = make(1, lw[c].N, 2, lw[c].D, lw[c].wl, lw[c].wr, all_dtypes[t]);
            p.scale = lw[c].scale;
            p.lambda = 0.6f;
            const double tol = all_dtypes[t] == DSWA_F32 && fabsf(p.scale) > 1.0f && !cuda_backend ? 1e-4 : tol_for(all_dtypes[t]);
            run_case(lw[c].name, &p, tol);
        }

    /* Zero window: each query sees only itself, so out = V0 - lambda * V1 (weights are 1). */
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        dswa_problem p = make(2, 30, 3, 64, 0, 0, dt);
        p.lambda = 0.37f;
        tu_rng rng;
        tu_rng_init(&rng, next_seed++);
        void *q = tu_new_input(&p, &p.q, &rng, NULL), *k = tu_new_input(&p, &p.k, &rng, NULL);
        void *v = tu_new_input(&p, &p.v, &rng, NULL);
        run r = run_on("zero window 0/0, lambda 0.37", &p, q, k, v, tol_for(dt), 1);
        int64_t bad = 0;
        /* fp32 subtraction (or fma), then rounding to the dtype */
        const double ulp = dt == DSWA_F32 ? (cuda_backend ? 0x1p-10 : 0x1p-23) : dt == DSWA_F16 ? 0x1p-10 : 0x1p-7;
        if (r.status == DSWA_OK)
            for (int64_t b = 0; b < p.batch; b++)
                for (int64_t i = 0; i < p.seq_len; i++)
                    for (int64_t h = 0; h < p.heads; h++)
                        for (int64_t d = 0; d < p.head_dim; d++) {
                            const double v0 = tu_load(v, tu_in_offset(&p.v, b, i, 0, h, d), dt);
                            const double v1 = tu_load(v, tu_in_offset(&p.v, b, i, 1, h, d), dt);
                            const double want = v0 - (double)p.lambda * v1;
                            const double got = tu_load(r.o.out, tu_out_offset(&p.out, b, i, h, d), dt);
                            if (!(fabs(got - want) <= ulp * (fabs(v0) + fabs((double)p.lambda * v1) + fabs(want))))
                                bad++;
                        }
        CHECK(bad == 0, "zero window (%s): %lld elements differ from V0 - lambda*V1",
              dswa_dtype_name(dt), (long long)bad);
        run_free(&r);
        tu_free(q); tu_free(k); tu_free(v);
    }
}

/* ---- scalars ----------------------------------------------------------------------------- */
static void test_scalars(void) {
    printf("lambda, scale, math\n");
    static const struct { float lambda, scale; const char *name; } s[] = {
        {0.37f, 0.125f, "lambda 0.37"}, {-1.5f, 0.125f, "lambda -1.5"}, {0.0f, 0.125f, "lambda 0"},
        {1.0f, 0.05f, "scale 0.05"}, {0.37f, 0.3f, "lambda 0.37, scale 0.3"},
        {-1.5f, -0.3f, "lambda -1.5, scale -0.3"}, {1.0f, 0.0f, "scale 0 (uniform weights)"},
        {2.5f, 1.7f, "lambda 2.5, scale 1.7"},
    };
    for (size_t c = 0; c < sizeof s / sizeof s[0]; c++)
        for (int t = 0; t < 3; t++) {
            dswa_problem p = make(2, 64, 3, 64, 9, 13, all_dtypes[t]);
            p.lambda = s[c].lambda;
            p.scale = s[c].scale;
            run_case(s[c].name, &p, tol_for(all_dtypes[t]));
        }
    dswa_problem p = make(2, 64, 3, 64, 17, 17, DSWA_F32);
    p.math = DSWA_MATH_FP32; /* fp32-accurate on every backend (3xTF32 on the GPU) */
    run_case("math FP32", &p, 1e-5);
    /* TF32 is a request for fast f32 matrix math: a backend may honour it (~1.4e-3). */
    p.math = DSWA_MATH_TF32;
    run_case("math TF32", &p, 2e-3);
    p.dtype = DSWA_BF16;
    run_case("math TF32 with bf16 (math is for f32 only)", &p, TOL_BF16);
}

/* ---- saturating logits ------------------------------------------------------------------- */
static void test_saturating(void) {
    printf("saturating logits\n");
    /* <q, k> of unit normals at D=64 has std 8, so these scales give |score| ~ 1e3 and ~ 1e4:
       a naive exp overflows; the softmax is nearly one-hot. fp32 rounding of a score of 1e3
       is ~1e-4 absolute, which moves near-tied weights by ~1e-4 relative, hence 1e-4. */
    static const float scales[] = {125.0f, -125.0f, 1250.0f};
    for (size_t c = 0; c < sizeof scales / sizeof scales[0]; c++)
        for (int t = 0; t < 3; t++) {
            char name[64];
            snprintf(name, sizeof name, "scale %g (|score| ~ %g)", (double)scales[c],
                     fabs(scales[c]) * 8.0);
            dswa_problem p = make(2, 80, 3, 64, 17, 17, all_dtypes[t]);
            p.scale = scales[c];
            p.lambda = 0.8f;
            run_case(name, &p, all_dtypes[t] == DSWA_F32 && !cuda_backend ? 1e-4 : tol_for(all_dtypes[t]));
        }
}

/* ---- layouts ----------------------------------------------------------------------------- */
static void test_layouts(void) {
    printf("layouts\n");
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        const double tol = tol_for(dt);

        /* Packed projection output [B, N, 5, H, D] = q1, k1, v, q2, k2, read in place. */
        {
            dswa_problem p = make(2, 45, 3, 64, 17, 17, dt);
            const int64_t HD = (int64_t)p.heads * p.head_dim;
            const int64_t total = (int64_t)p.batch * p.seq_len * 5 * HD;
            const dswa_layout pk = {p.seq_len * 5 * HD, 5 * HD, 3 * HD, p.head_dim, 1};
            p.q = p.k = pk;
            p.v = pk;
            p.v.pair = 0;
            const size_t es = tu_dtype_size(dt);
            CHECK(dswa_view_span(&p, &p.q, 2) == total - HD, "packed: span of q = %lld",
                  (long long)dswa_view_span(&p, &p.q, 2));
            CHECK(dswa_view_span(&p, &p.v, 2) == total - 4 * HD, "packed: span of v = %lld",
                  (long long)dswa_view_span(&p, &p.v, 2));
            tu_rng rng;
            tu_rng_init(&rng, next_seed++);
            char *buf = tu_alloc(total, dt);
            tu_fill_normal(buf, total, dt, &rng, 1.0);
            char *snapshot = malloc((size_t)total * es);
            if (!snapshot) abort();
            memcpy(snapshot, buf, (size_t)total * es);
            run r = run_on("packed [B,N,5,H,D]", &p, buf, buf + HD * es, buf + 2 * HD * es, tol, 1);
            CHECK(memcmp(snapshot, buf, (size_t)total * es) == 0, "packed: the input buffer changed");
            run_free(&r);
            free(snapshot);

            /* The same data copied out into contiguous (B, N, 2H, D) tensors gives the same
               result: compare with a run on copies. */
            dswa_problem c = make(2, 45, 3, 64, 17, 17, dt);
            c.v = tu_layout_order(&c, "bnhd", 0);
            void *cq = tu_alloc(dswa_view_span(&c, &c.q, 2), dt);
            void *ck = tu_alloc(dswa_view_span(&c, &c.k, 2), dt);
            void *cv = tu_alloc(dswa_view_span(&c, &c.v, 2), dt);
            for (int64_t b = 0; b < p.batch; b++)
                for (int64_t i = 0; i < p.seq_len; i++)
                    for (int64_t pr = 0; pr < 2; pr++)
                        for (int64_t h = 0; h < p.heads; h++)
                            for (int64_t d = 0; d < p.head_dim; d++) {
                                memcpy((char *)cq + tu_in_offset(&c.q, b, i, pr, h, d) * (int64_t)es,
                                       buf + tu_in_offset(&p.q, b, i, pr, h, d) * (int64_t)es, es);
                                memcpy((char *)ck + tu_in_offset(&c.k, b, i, pr, h, d) * (int64_t)es,
                                       buf + HD * (int64_t)es + tu_in_offset(&p.k, b, i, pr, h, d) * (int64_t)es, es);
                                memcpy((char *)cv + tu_in_offset(&c.v, b, i, pr, h, d) * (int64_t)es,
                                       buf + 2 * HD * (int64_t)es + tu_in_offset(&p.v, b, i, pr, h, d) * (int64_t)es, es);
                            }
            tu_outbuf o1 = tu_outbuf_new(&p), o2 = tu_outbuf_new(&c);
            CHECK(forward(&p, buf, buf + HD * es, buf + 2 * HD * es, o1.out) == DSWA_OK,
                  "packed rerun: %s", dswa_last_error());
            CHECK(forward(&c, cq, ck, cv, o2.out) == DSWA_OK, "unpacked: %s", dswa_last_error());
            /* o2 as doubles in a dense [B][N][H][D] array, then o1 compared with it */
            const int64_t n = (int64_t)c.batch * c.seq_len * c.heads * c.head_dim;
            double *d2 = malloc(sizeof(double) * (size_t)n);
            if (!d2) abort();
            for (int64_t b = 0; b < c.batch; b++)
                for (int64_t i = 0; i < c.seq_len; i++)
                    for (int64_t h = 0; h < c.heads; h++)
                        for (int64_t d = 0; d < c.head_dim; d++)
                            d2[((b * c.seq_len + i) * c.heads + h) * c.head_dim + d] =
                                tu_load(o2.out, tu_out_offset(&c.out, b, i, h, d), dt);
            const double diff = tu_rel_error(&p, o1.out, d2);
            CHECK(diff <= tol, "packed (%s): output differs from the same data in contiguous "
                  "tensors by %.3e", dswa_dtype_name(dt), diff);
            free(d2);
            tu_outbuf_free(&o1);
            tu_outbuf_free(&o2);
            tu_free(cq); tu_free(ck); tu_free(cv);
            tu_free(buf);
        }

        /* Strided output: rows padded (out.seq > H*D), gaps must stay poisoned. */
        {
            dswa_problem p = make(2, 40, 3, 64, 17, 17, dt);
            p.out.seq = (int64_t)p.heads * p.head_dim + 7;
            p.out.batch = p.out.seq * p.seq_len + 5;
            run_case("strided output (out.seq = H*D + 7)", &p, tol);
            p.out = tu_layout_order(&p, "bnhd", 3);
            run_case("strided output (gaps in every dim)", &p, tol);
            p.out = tu_layout_order(&p, "bnhd", 0);
            p.out.dim = 2;
            p.out.head = 2 * p.head_dim;
            p.out.seq = p.out.head * p.heads;
            p.out.batch = p.out.seq * p.seq_len;
            run_case("strided output (out.dim = 2)", &p, tol);
        }

        /* Shared V: pair stride 0 on a (B, N, 2H, D) buffer (pair 1's half is ignored). */
        {
            dswa_problem p = make(2, 40, 3, 64, 17, 17, dt);
            p.v.pair = 0;
            run_case("shared V (v.pair = 0 in a 2H buffer)", &p, tol);
            p.lambda = 0.5f;
            run_case("shared V, lambda 0.5", &p, tol);
        }

        /* Non-contiguous permutations, each tensor its own. */
        {
            static const struct { const char *q, *k, *v, *o; int64_t pad; const char *name; } L[] = {
                {"bphnd", "bphnd", "bphnd", "bhnd", 0, "head-major [B,2,H,N,D]"},
                {"nbphd", "bhpnd", "pbnhd", "nbhd", 0, "mixed: seq-major, head-major, pair-major"},
                {"bnphd", "bhpnd", "nbphd", "hbnd", 3, "mixed with padding"},
                {"bndph", "bdnph", "dbnph", "bdnh", 0, "dim not innermost"},
                {"hpbnd", "dhpbn", "bnhd", "dhbn", 1, "exotic, shared V, padding"},
            };
            for (size_t c = 0; c < sizeof L / sizeof L[0]; c++) {
                dswa_problem p = make(2, 33, 3, 64, 6, 11, dt);
                p.q = tu_layout_order(&p, L[c].q, L[c].pad);
                p.k = tu_layout_order(&p, L[c].k, L[c].pad);
                p.v = tu_layout_order(&p, L[c].v, L[c].pad);
                p.out = tu_layout_order(&p, L[c].o, L[c].pad);
                run_case(L[c].name, &p, tol);
            }
        }
    }
}

/* ---- NaN propagation --------------------------------------------------------------------- */
/* Injects a NaN at one input element; checks that exactly the expected outputs are NaN (the
   reference agrees), and that all others are finite and match the reference. */
static void nan_case(const char *name, dswa_dtype dt, int which /* 0 q, 1 k, 2 v */, int shared_v,
                     int64_t b0, int64_t j0, int64_t p0, int64_t h0, int64_t d0) {
    dswa_problem p = make(2, 50, 3, 64, 4, 7, dt);  /* asymmetric: direction matters */
    if (shared_v) p.v = tu_layout_order(&p, "bnhd", 0);
    tu_rng rng;
    tu_rng_init(&rng, next_seed++);
    void *in[3];
    in[0] = tu_new_input(&p, &p.q, &rng, NULL);
    in[1] = tu_new_input(&p, &p.k, &rng, NULL);
    in[2] = tu_new_input(&p, &p.v, &rng, NULL);
    const dswa_layout *l = which == 0 ? &p.q : which == 1 ? &p.k : &p.v;
    tu_store(in[which], tu_in_offset(l, b0, j0, p0, h0, d0), dt, NAN);

    run r = run_on(name, &p, in[0], in[1], in[2], -1.0, 0);
    int64_t wrong = 0, ref_wrong = 0, nans = 0;
    if (r.status == DSWA_OK) {
        for (int64_t b = 0; b < p.batch; b++)
            for (int64_t i = 0; i < p.seq_len; i++)
                for (int64_t h = 0; h < p.heads; h++)
                    for (int64_t d = 0; d < p.head_dim; d++) {
                        int expect;
                        if (which == 0)   /* a query row: only its own output row */
                            expect = b == b0 && h == h0 && i == j0;
                        else {            /* key/value j0 is in J(i) iff j0-right <= i <= j0+left */
                            expect = b == b0 && h == h0 && i >= j0 - p.window_right &&
                                     i <= j0 + p.window_left;
                            if (which == 2) expect = expect && d == d0;  /* V: only column d0 */
                        }
                        const double o = tu_load(r.o.out, tu_out_offset(&p.out, b, i, h, d), dt);
                        const double rf = r.ref[((b * p.seq_len + i) * p.heads + h) * p.head_dim + d];
                        if (expect != (isnan(o) != 0) || (!expect && !isfinite(o))) {
                            if (wrong < 5)
                                fprintf(stderr, "  %s: out[b=%lld,i=%lld,h=%lld,d=%lld] = %g, expected %s\n",
                                        name, (long long)b, (long long)i, (long long)h, (long long)d,
                                        o, expect ? "NaN" : "finite");
                            wrong++;
                        }
                        if (expect != (isnan(rf) != 0)) ref_wrong++;
                        nans += expect;
                    }
        const double err = tu_rel_error(&p, r.o.out, r.ref);
        CHECK(err <= tol_for(dt), "%s: the finite outputs have relative error %.3e", name, err);
        printf("  %-44s %-4s NaN outputs expected %lld, rel_err of the rest %.2e\n", name,
               dswa_dtype_name(dt), (long long)nans, err);
    }
    if (r.status == DSWA_OK) CHECK(nans > 0, "%s: the test expects some NaN outputs", name);
    CHECK(wrong == 0, "%s: %lld outputs are NaN where they should not be or vice versa", name,
          (long long)wrong);
    CHECK(ref_wrong == 0, "%s: the float64 reference disagrees with the expected NaN set (%lld)",
          name, (long long)ref_wrong);
    run_free(&r);
    for (int i = 0; i < 3; i++) tu_free(in[i]);
}

static void test_nan(void) {
    printf("NaN propagation\n");
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        nan_case("NaN in K (b=1, j=20, pair 1, h=2)", dt, 1, 0, 1, 20, 1, 2, 5);
        nan_case("NaN in K (b=0, j=1, pair 0, h=0)", dt, 1, 0, 0, 1, 0, 0, 0);
        nan_case("NaN in K (b=1, j=N-1, pair 0, h=1)", dt, 1, 0, 1, 49, 0, 1, 15);
        nan_case("NaN in V (b=0, j=30, pair 0, h=1, d=3)", dt, 2, 0, 0, 30, 0, 1, 3);
        nan_case("NaN in V (b=1, j=2, pair 1, h=2, d=9)", dt, 2, 0, 1, 2, 1, 2, 9);
        nan_case("NaN in shared V (b=1, j=44, h=0, d=0)", dt, 2, 1, 1, 44, 0, 0, 0);
        nan_case("NaN in Q (b=0, i=10, pair 1, h=1)", dt, 0, 0, 0, 10, 1, 1, 7);
    }
}

/* ---- empty problems ---------------------------------------------------------------------- */
static void test_empty(void) {
    printf("empty problems\n");
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        dswa_problem full = make(2, 8, 2, 16, 3, 3, dt);
        tu_rng rng;
        tu_rng_init(&rng, next_seed++);
        void *q = tu_new_input(&full, &full.q, &rng, NULL), *k = tu_new_input(&full, &full.k, &rng, NULL);
        void *v = tu_new_input(&full, &full.v, &rng, NULL);
        tu_outbuf o = tu_outbuf_new(&full);
        dswa_problem p = full;
        p.batch = 0;
        dswa_status s = forward(&p, q, k, v, o.out);
        CHECK(s == DSWA_OK, "batch = 0 (%s): status %d: %s", dswa_dtype_name(dt), (int)s, dswa_last_error());
        CHECK(tu_outbuf_untouched(&o), "batch = 0 (%s): the output was written", dswa_dtype_name(dt));
        p = full;
        p.seq_len = 0;
        s = forward(&p, q, k, v, o.out);
        CHECK(s == DSWA_OK, "seq_len = 0 (%s): status %d: %s", dswa_dtype_name(dt), (int)s, dswa_last_error());
        CHECK(tu_outbuf_untouched(&o), "seq_len = 0 (%s): the output was written", dswa_dtype_name(dt));
        p.batch = 0;
        s = forward(&p, q, k, v, o.out);
        CHECK(s == DSWA_OK, "batch = seq_len = 0 (%s): status %d: %s", dswa_dtype_name(dt), (int)s,
              dswa_last_error());
        CHECK(tu_outbuf_untouched(&o), "batch = seq_len = 0: the output was written");
        tu_outbuf_free(&o);
        tu_free(q); tu_free(k); tu_free(v);
    }
}

/* ---- repeatability ----------------------------------------------------------------------- */
static void test_repeat(void) {
    printf("repeatability\n");
    /* Two runs on the same inputs give bit-identical outputs (no uninitialised state). */
    dswa_problem p = make(2, 300, 4, 64, 17, 17, DSWA_F32);
    tu_rng rng;
    tu_rng_init(&rng, next_seed++);
    void *q = tu_new_input(&p, &p.q, &rng, NULL), *k = tu_new_input(&p, &p.k, &rng, NULL);
    void *v = tu_new_input(&p, &p.v, &rng, NULL);
    tu_outbuf a = tu_outbuf_new(&p), b = tu_outbuf_new(&p);
    CHECK(forward(&p, q, k, v, a.out) == DSWA_OK, "run 1: %s", dswa_last_error());
    CHECK(forward(&p, q, k, v, b.out) == DSWA_OK, "run 2: %s", dswa_last_error());
    CHECK(memcmp(a.base, b.base, (size_t)a.total * 4) == 0, "two runs on the same inputs differ");
    tu_outbuf_free(&a);
    tu_outbuf_free(&b);
    tu_free(q); tu_free(k); tu_free(v);
}

int tu_backend_cases(int on_cuda) {
    cuda_backend = on_cuda;
    backend_name = on_cuda ? "cuda" : "cpu";
    forward = on_cuda ? tu_forward_cuda_host : dswa_forward_cpu;
    if (cuda_backend && !dswa_cuda_available()) {
        static float q[1024], k[1024], v[1024], o[512];
        dswa_problem p = dswa_problem_default(1, 8, 1, 64, 2);
        (void)dswa_forward_cuda(&p, q, k, v, o, NULL); /* the library's reason */
        tu_skip("no GPU (%s)", dswa_last_error());
    }
    test_shapes();
    test_windows();
    test_scalars();
    test_saturating();
    test_layouts();
    test_nan();
    test_empty();
    test_repeat();
    printf("%s backend: %d cases run, %d not applicable\n", backend_name, ran, not_applicable);
    /* the CUDA backend must take most cases (it declines head_dim != 64 and unaligned rows) */
    CHECK(ran > 2 * not_applicable, "%d cases ran, %d were declined", ran, not_applicable);
    return tu_summary(cuda_backend ? "test_cuda_cases" : "test_cpu");
}
