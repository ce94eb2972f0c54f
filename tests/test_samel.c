/* The fused SAME-L block (dswa_samel_*): dswa_samel_forward_cpu against the tests' own float64
   reference (tests/lib/samel_ref64.c) on fresh random inputs (the seed is printed;
   DSWA_TEST_SEED=N repeats a run), with poisoned outputs in poisoned guard zones; the reference
   itself against values worked out by hand; NaN and inf; every refusal (the field named,
   nothing written); the CUDA entry's answers that need no GPU (the kernel it picks; without a
   device, its refusal). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "compare.h"
#include "samel_ref64.h"
#include "testutil.h"

/* Relative Frobenius tolerances, as tests/lib/cases.c's for the CPU backend: f32 in fp32
   arithmetic; 16-bit q and k rounded at the same points in the reference, so the error is the
   output's rounding plus fp32 arithmetic. */
static double tol_for(dswa_dtype t) { return t == DSWA_F32 ? 1e-5 : t == DSWA_F16 ? 5e-3 : 1e-2; }

static const dswa_dtype all_dtypes[3] = {DSWA_F32, DSWA_F16, DSWA_BF16};
static tu_rng rng;

/* The op's view of the block's output (sizes, dtype, out strides): what the tests' output
   helpers (tu_outbuf_*, tu_acc_*) read. */
static dswa_problem out_view(const dswa_samel_problem *p) {
    dswa_problem d = dswa_problem_default(p->batch, p->seq_len, p->heads, p->head_dim, 0);
    d.dtype = p->dtype;
    d.out = p->out;
    return d;
}

/* Elements spanned by the packed input, computed here. */
static int64_t packed_span(const dswa_samel_problem *p) {
    const int64_t ext[5] = {p->batch, p->seq_len, 5, p->heads, p->head_dim};
    const int64_t st[5] = {p->qkv.batch, p->qkv.seq, p->qkv.chunk, p->qkv.head, p->qkv.dim};
    int64_t span = 1;
    for (int i = 0; i < 5; i++) span += (ext[i] - 1) * st[i];
    return span;
}

/* Norm weights: alpha in [0.5, 1.5], gamma around 1.5, beta around 0, so that scores spread
   over a few units (a flat softmax would hide errors). */
typedef struct weights { float *q_gamma, *q_beta, *k_gamma, *k_beta; } weights;

static weights weights_new(dswa_samel_problem *p) {
    const int D = p->head_dim;
    float *w = malloc(sizeof(float) * 4 * (size_t)D);
    if (!w) abort();
    for (int e = 0; e < 4 * D; e++)
        w[e] = (float)((e / D) % 2 ? 0.3 * tu_rng_normal(&rng) : 1.5 + 0.5 * tu_rng_normal(&rng));
    weights r = {w, w + D, w + 2 * D, w + 3 * D};
    p->q_norm.alpha = (float)(0.5 + tu_rng_uniform(&rng));
    p->k_norm.alpha = (float)(0.5 + tu_rng_uniform(&rng));
    p->q_norm.gamma = r.q_gamma; p->q_norm.beta = r.q_beta;
    p->k_norm.gamma = r.k_gamma; p->k_norm.beta = r.k_beta;
    return r;
}

static void *packed_new(const dswa_samel_problem *p, int64_t *elems) {
    const int64_t n = packed_span(p);
    void *x = tu_alloc(n, p->dtype);
    tu_fill_normal(x, n, p->dtype, &rng, 1.0);
    if (elems) *elems = n;
    return x;
}

/* Element offset of the packed input at [b, i, chunk, h, d]. */
static int64_t at(const dswa_samel_problem *p, int64_t b, int64_t i, int ch, int64_t h, int64_t d) {
    return b * p->qkv.batch + i * p->qkv.seq + ch * p->qkv.chunk + h * p->qkv.head + d * p->qkv.dim;
}

/* 16-bit outputs: the share of elements that are not the reference rounded to nearest (give
   or take a slack for fp32 arithmetic far below a 16-bit unit). With q and k rounded where the
   reference rounds them, nearly all are; the others come from fp32 DyT landing on the other
   side of a 16-bit rounding boundary than the float64 one, each moving outputs of a whole
   window a little: up to 2% of them in f16, less in bf16. Without DyT's rounding before RoPE,
   20-60% are off (Frobenius tolerances cannot see that). */
static double off_rounding_share(const dswa_problem *v, const void *out, const double *ref) {
    const int64_t n = (int64_t)v->batch * v->seq_len * v->heads * v->head_dim;
    double ss = 0;
    for (int64_t e = 0; e < n; e++) ss += isfinite(ref[e]) ? ref[e] * ref[e] : 0;
    const double slack = 1e-5 * sqrt(ss / (double)n);
    int64_t bad = 0;
    for (int64_t e = 0; e < n; e++) {
        const int64_t d = e % v->head_dim, h = e / v->head_dim % v->heads;
        const int64_t i = e / v->head_dim / v->heads % v->seq_len;
        const int64_t b = e / v->head_dim / v->heads / v->seq_len;
        const double o = tu_load(out, tu_out_offset(&v->out, b, i, h, d), v->dtype);
        /* rounding is monotone: o rounds some value within the slack iff it lies here */
        if (isfinite(ref[e]) && !(o >= tu_samel_round(ref[e] - slack, v->dtype) &&
                                  o <= tu_samel_round(ref[e] + slack, v->dtype)))
            bad++;
    }
    return (double)bad / (double)n;
}

/* Runs p on x and compares with the reference: status, every output element written and
   nothing else, relative error over the finite elements <= tol, non-finite outputs exactly
   where the reference has them (their count returned through *nonfinite). */
static double run_on(const char *name, const dswa_samel_problem *p, const void *x, double tol,
                     int64_t *nonfinite) {
    const dswa_problem v = out_view(p);
    tu_outbuf o = tu_outbuf_new(&v);
    const dswa_status s = dswa_samel_forward_cpu(p, x, o.out);
    CHECK(s == DSWA_OK, "%s: status %d (%s): %s", name, (int)s, dswa_status_string(s),
          dswa_last_error());
    double err = INFINITY;
    if (s == DSWA_OK) {
        int64_t unwritten = 0, clobbered = 0;
        tu_outbuf_check(&v, &o, &unwritten, &clobbered);
        CHECK(unwritten == 0, "%s: %lld output elements were not written", name, (long long)unwritten);
        CHECK(clobbered == 0, "%s: %lld elements outside the output view were modified", name,
              (long long)clobbered);
        const int64_t n = (int64_t)p->batch * p->seq_len * p->heads * p->head_dim;
        double *ref = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        if (!ref) abort();
        tu_samel_ref64(p, x, ref);
        tu_acc a;
        tu_acc_init(&a);
        tu_acc_rows(&a, &v, o.out, ref, 0, p->seq_len);
        err = tu_acc_result(&a);
        CHECK(a.mismatch == 0, "%s: %lld elements finite on one side only (or different non-finite)",
              name, (long long)a.mismatch);
        CHECK(err <= tol, "%s: relative error %.3e > tolerance %.1e", name, err, tol);
        const double share = p->dtype == DSWA_F32 ? 0 : off_rounding_share(&v, o.out, ref);
        if (p->dtype != DSWA_F32) {
            CHECK(share <= 0.1, "%s (%s): %.1f%% of outputs are not the reference rounded to "
                  "nearest (a rounding point differs from the reference's?)", name,
                  dswa_dtype_name(p->dtype), 100 * share);
        }
        if (nonfinite) *nonfinite = a.nan_ok;
        else CHECK(a.nan_ok == 0, "%s: %lld outputs not finite", name, (long long)a.nan_ok);
        printf("  %-40s %-4s B=%d N=%d H=%d D=%d W=%d/%d rot=%d pos=%d  rel_err %.2e (tol %.0e) "
               "not-nearest %.2f%%\n", name, dswa_dtype_name(p->dtype), p->batch, p->seq_len,
               p->heads, p->head_dim, p->window_left, p->window_right, p->rot_dims, p->pos_offset,
               err, tol, 100 * share);
        free(ref);
    }
    tu_outbuf_free(&o);
    return err;
}

/* Fresh weights and input for p, one run, freed. */
static double run_case(const char *name, dswa_samel_problem p, double tol) {
    weights w = weights_new(&p);
    void *x = packed_new(&p, NULL);
    const double err = run_on(name, &p, x, tol, NULL);
    tu_free(x);
    free(w.q_gamma);
    return err;
}

/* ---- the reference against hand-worked values ------------------------------------------- */

static void test_reference(void) {
    /* Decoders and the rounding to 16 bits, through one head row with gamma 0 (y = beta). */
    dswa_samel_problem p = dswa_samel_problem_default(1, 1, 1);
    p.head_dim = 4; p.rot_dims = 0;
    p.qkv = (dswa_samel_layout){20, 20, 4, 4, 1};
    float zero[4] = {0, 0, 0, 0}, one[4] = {1, 1, 1, 1};
    float beta[4] = {1.0f + 0x1p-9f, 1.0f + 3 * 0x1p-9f, 1.0f + 0x1p-12f, 65520.0f};
    p.q_norm = (dswa_samel_norm){1.0f, zero, beta, NULL};
    p.k_norm = (dswa_samel_norm){1.0f, one, zero, NULL};
    uint16_t x16[20] = {0};
    double y[4];
    p.dtype = DSWA_BF16;   /* 1 + 2^-9 -> 1; 1 + 3 2^-9 -> 1 + 2^-7 (0.75 of its 2^-7 unit) */
    tu_samel_ref64_row(&p, x16, 0, 0, 0, 0, y);
    CHECK(y[0] == 1.0 && y[1] == 1.0 + 0x1p-7 && y[2] == 1.0 && y[3] == 65536.0,
          "bf16 rounding: %.17g %.17g %.17g %.17g", y[0], y[1], y[2], y[3]);
    p.dtype = DSWA_F16;    /* 1 + 2^-9 is exact; 1 + 2^-12 a quarter unit; 65520 rounds to inf */
    tu_samel_ref64_row(&p, x16, 0, 0, 0, 0, y);
    CHECK(y[0] == 1.0 + 0x1p-9 && y[2] == 1.0 && isinf(y[3]) && y[3] > 0,
          "f16 rounding: %.17g %.17g %.17g", y[0], y[2], y[3]);
    /* k: y = tanh(x) of decoded elements: bf16 0x3f80 = 1, 0xc040 = -3; f16 0x0001 = 2^-24,
       0x3c00 = 1 */
    const uint16_t kb[4] = {0x3f80, 0xc040, 0x0000, 0x7fc0}, kh[4] = {0x0001, 0x3c00, 0x8000, 0x7c00};
    memcpy(x16 + 4, kb, sizeof kb);
    p.dtype = DSWA_BF16;
    tu_samel_ref64_row(&p, x16, 0, 0, 1, 0, y);
    CHECK(y[0] == (double)tu_bf16_to_f32(tu_f32_to_bf16((float)tanh(1.0))) &&
          y[1] == (double)tu_bf16_to_f32(tu_f32_to_bf16((float)tanh(-3.0))) && y[2] == 0 && isnan(y[3]),
          "bf16 decode + tanh: %.9g %.9g %.9g %.9g", y[0], y[1], y[2], y[3]);
    memcpy(x16 + 4, kh, sizeof kh);
    p.dtype = DSWA_F16;
    tu_samel_ref64_row(&p, x16, 0, 0, 1, 0, y);
    CHECK(y[0] == 0x1p-24 && y[1] == (double)tu_f16_to_f32(tu_f32_to_f16((float)tanh(1.0))) &&
          y[2] == 0 && y[3] == 1.0,
          "f16 decode + tanh: %.9g %.9g %.9g %.9g", y[0], y[1], y[2], y[3]);

    /* RoPE, non-interleaved: with D = 4, rot_dims 4 and position 1, dims 0 and 2 turn by
       1 rad, dims 1 and 3 by base^(-1/2) = 0.01 (fp32) rad. */
    p.dtype = DSWA_F32; p.rot_dims = 4; p.pos_offset = 1;
    const float xf[20] = {0, 0, 0, 0, 0.5f, -0.25f, 1.0f, 2.0f};
    tu_samel_ref64_row(&p, xf, 0, 0, 1, 0, y);
    const double t0 = tanh(0.5), t1 = tanh(-0.25), t2 = tanh(1.0), t3 = tanh(2.0);
    const double a1 = (double)0.01f;
    const double want[4] = {t0 * cos(1.0) - t2 * sin(1.0), t1 * cos(a1) - t3 * sin(a1),
                            t2 * cos(1.0) + t0 * sin(1.0), t3 * cos(a1) + t1 * sin(a1)};
    double worst = 0;
    for (int d = 0; d < 4; d++) worst = fmax(worst, fabs(y[d] - want[d]));
    CHECK(worst < 1e-15, "RoPE by hand: off by %.3e", worst);
    p.rot_dims = 2;   /* only dims 0 and 1, by 1 rad; 2 and 3 pass through */
    tu_samel_ref64_row(&p, xf, 0, 0, 1, 0, y);
    CHECK(fabs(y[0] - (t0 * cos(1.0) - t1 * sin(1.0))) < 1e-15 &&
          fabs(y[1] - (t1 * cos(1.0) + t0 * sin(1.0))) < 1e-15 && y[2] == t2 && y[3] == t3,
          "RoPE on 2 of 4 dims by hand: %.17g %.17g %.17g %.17g", y[0], y[1], y[2], y[3]);

    /* Attention: with gamma 0 every score is the same, so each output is (1 - lambda) times
       the mean of v over the window; with window 0 it is (1 - lambda) v_i. */
    dswa_samel_problem a = dswa_samel_problem_default(2, 7, 2);
    a.window_left = 1; a.window_right = 2; a.lambda = 0.37f; a.rot_dims = 0;
    weights w = weights_new(&a);
    memset(w.q_gamma, 0, sizeof(float) * 64);
    memset(w.k_gamma, 0, sizeof(float) * 64);
    void *x = packed_new(&a, NULL);
    double *ref = malloc(sizeof(double) * 2 * 7 * 2 * 64);
    if (!ref) abort();
    for (int win = 0; win < 2; win++) {
        if (win) a.window_left = a.window_right = 0;
        tu_samel_ref64(&a, x, ref);
        worst = 0;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 7; i++)
                for (int h = 0; h < 2; h++)
                    for (int d = 0; d < 64; d++) {
                        const int lo = i - a.window_left < 0 ? 0 : i - a.window_left;
                        const int hi = i + a.window_right > 6 ? 6 : i + a.window_right;
                        double mean = 0;
                        for (int j = lo; j <= hi; j++) mean += tu_load(x, at(&a, b, j, 2, h, d), a.dtype);
                        mean /= hi - lo + 1;
                        const double e = (1.0 - (double)0.37f) * mean;
                        worst = fmax(worst, fabs(ref[((b * 7 + i) * 2 + h) * 64 + d] - e));
                    }
        CHECK(worst < 1e-13, "reference, equal scores, window %d/%d: off by %.3e", a.window_left,
              a.window_right, worst);
    }
    free(ref);
    tu_free(x);
    free(w.q_gamma);
}

/* ---- cases ----------------------------------------------------------------------------- */

static void test_cases(void) {
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        dswa_samel_problem p = dswa_samel_problem_default(1, 100, 24);
        p.dtype = dt;
        run_case("SAME-L H=24, N=100", p, tol_for(dt));
        p = dswa_samel_problem_default(3, 70, 2);
        p.dtype = dt;
        run_case("B=3, N=70 (not a multiple of 64)", p, tol_for(dt));
        p = dswa_samel_problem_default(2, 10, 3);
        p.dtype = dt;
        run_case("N=10 < window", p, tol_for(dt));
        p = dswa_samel_problem_default(2, 1, 3);
        p.dtype = dt;
        run_case("N=1", p, tol_for(dt));
        p = dswa_samel_problem_default(2, 200, 2);
        p.dtype = dt; p.pos_offset = 4000;
        run_case("pos_offset 4000", p, tol_for(dt));
        p.pos_offset = 1 << 20;
        run_case("pos_offset 2^20", p, tol_for(dt));
        p = dswa_samel_problem_default(1, 40, 2);
        p.dtype = dt; p.pos_offset = INT32_MAX - 39;   /* the last position is INT32_MAX */
        run_case("pos_offset INT32_MAX - N + 1", p, tol_for(dt));

        static const struct { const char *name; int wl, wr; } win[] = {
            {"window 0/17", 0, 17}, {"window 17/0", 17, 0}, {"window 5/30", 5, 30},
            {"window 0/0", 0, 0}, {"window 100/3 (> N)", 100, 3}};
        for (size_t c = 0; c < sizeof win / sizeof win[0]; c++) {
            p = dswa_samel_problem_default(2, 77, 2);
            p.dtype = dt; p.window_left = win[c].wl; p.window_right = win[c].wr;
            p.lambda = 0.37f; p.pos_offset = 13;
            run_case(win[c].name, p, tol_for(dt));
        }
        static const int rots[] = {0, 2, 16, 64};
        for (size_t c = 0; c < sizeof rots / sizeof rots[0]; c++) {
            p = dswa_samel_problem_default(1, 50, 2);
            p.dtype = dt; p.rot_dims = rots[c]; p.rope_base = c % 2 ? 500.0f : 10000.0f;
            p.pos_offset = 7;
            char name[64];
            snprintf(name, sizeof name, "rot_dims %d, base %g", rots[c], (double)p.rope_base);
            run_case(name, p, tol_for(dt));
        }
        /* the model's own frequencies: upstream's inv_freq rounded to 16 bits (a model cast
           whole), then fresh random ones of any sign and size */
        static float own[32];
        const dswa_dtype fdt[2] = {DSWA_F16, DSWA_BF16};
        for (int c = 0; c < 3; c++) {
            p = dswa_samel_problem_default(2, 60, 2);
            p.dtype = dt; p.pos_offset = 300 * c; p.rot_dims = c == 2 ? 64 : 32;
            for (int j = 0; j < p.rot_dims / 2; j++) {
                const float f = (float)(1.0 / pow(10000.0, 2.0 * j / p.rot_dims));
                own[j] = c == 2 ? (float)(tu_rng_normal(&rng) * 0.8) : (float)tu_load(
                    (uint16_t[]){fdt[c] == DSWA_F16 ? tu_f32_to_f16(f) : tu_f32_to_bf16(f)}, 0, fdt[c]);
            }
            p.rope_freq = own;
            p.rope_base = NAN;   /* not read when rope_freq is given */
            run_case(c == 2 ? "rope_freq random" : c ? "rope_freq bf16 inv_freq" : "rope_freq f16 inv_freq",
                     p, tol_for(dt));
        }
        p = dswa_samel_problem_default(2, 45, 3);
        p.dtype = dt; p.head_dim = 32; p.rot_dims = 32; p.scale = 0.3f;
        p.qkv = (dswa_samel_layout){45 * 5 * 96, 5 * 96, 96, 32, 1};
        p.out = (dswa_layout){45 * 96, 96, 0, 32, 1};
        run_case("head_dim 32, scale 0.3", p, tol_for(dt));
    }
    /* math is the op's: the CPU backend computes f32 in fp32 under every value */
    dswa_samel_problem p = dswa_samel_problem_default(1, 64, 2);
    p.math = DSWA_MATH_FP32;
    run_case("math fp32", p, tol_for(DSWA_F32));
    p.math = DSWA_MATH_TF32;
    run_case("math tf32", p, tol_for(DSWA_F32));
    p = dswa_samel_problem_default(1, 64, 2);
    p.scale = 1.0f;   /* sharp softmax */
    run_case("scale 1", p, 1e-4);
}

/* Strided inputs and outputs: gaps, chunk-major, head-major, every dim stride but 1. */
static void test_layouts(void) {
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        const int64_t B = 2, N = 67, H = 3, D = 64, HD = H * D;
        dswa_samel_problem p = dswa_samel_problem_default((int32_t)B, (int32_t)N, (int32_t)H);
        p.dtype = dt; p.pos_offset = 5; p.window_left = 9; p.window_right = 21;
        const struct { const char *name; dswa_samel_layout x; dswa_layout o; } L[] = {
            {"padded rows and batches",
             {N * (5 * HD + 37) + 11, 5 * HD + 37, HD, D, 1}, {N * (HD + 5) + 3, HD + 5, 0, D, 1}},
            {"five tensors [chunk, B, N, H, D]",
             {N * HD, HD, B * N * HD, D, 1}, {HD, B * HD, 0, D, 1}},
            {"head-major [B, H, chunk, N, D]",
             {H * 5 * N * D, D, N * D, 5 * N * D, 1}, {H * N * D, D, 0, N * D, 1}},
            {"dim stride 2, heads padded",
             {N * 5 * H * (2 * D + 3) + 1, 5 * H * (2 * D + 3), H * (2 * D + 3), 2 * D + 3, 2},
             {N * H * 2 * D, H * 2 * D, 0, 2 * D, 2}},
        };
        for (size_t c = 0; c < sizeof L / sizeof L[0]; c++) {
            p.qkv = L[c].x;
            p.out = L[c].o;
            run_case(L[c].name, p, tol_for(dt));
        }
    }
}

/* RoPE is what it claims: scores depend on relative positions only, so shifting every
   position changes the output by no more than fp32 angles do; and it does change scores. */
static void test_rope_relative(void) {
    dswa_samel_problem p = dswa_samel_problem_default(1, 96, 2);
    p.rot_dims = 64;
    weights w = weights_new(&p);
    void *x = packed_new(&p, NULL);
    const int64_t n = 96 * 2 * 64;
    float *o[3];
    const int32_t rot[3] = {64, 64, 0}, off[3] = {0, 64, 0};
    for (int r = 0; r < 3; r++) {
        o[r] = malloc(sizeof(float) * (size_t)n);
        if (!o[r]) abort();
        p.rot_dims = rot[r]; p.pos_offset = off[r];
        CHECK(dswa_samel_forward_cpu(&p, x, o[r]) == DSWA_OK, "rope run %d: %s", r, dswa_last_error());
    }
    double d_shift = 0, d_none = 0, ss = 0;
    for (int64_t e = 0; e < n; e++) {
        d_shift += (o[1][e] - o[0][e]) * (double)(o[1][e] - o[0][e]);
        d_none += (o[2][e] - o[0][e]) * (double)(o[2][e] - o[0][e]);
        ss += o[0][e] * (double)o[0][e];
    }
    d_shift = sqrt(d_shift / ss); d_none = sqrt(d_none / ss);
    CHECK(d_shift < 1e-4, "RoPE shifted by 64 positions moved the output by %.3e", d_shift);
    CHECK(d_none > 1e-2, "RoPE on 64 dims vs none: output differs by only %.3e", d_none);
    printf("  RoPE: shift by 64 positions changes the output by %.2e; no RoPE by %.2e\n", d_shift,
           d_none);
    for (int r = 0; r < 3; r++) free(o[r]);
    tu_free(x);
    free(w.q_gamma);
}

/* NaN where the op would carry it, inf where DyT saturates it. */
static void test_nonfinite(void) {
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        dswa_samel_problem p = dswa_samel_problem_default(2, 60, 3);
        p.dtype = dt; p.window_left = 4; p.window_right = 9;
        const int64_t D = 64;
        /* where, and how many outputs must be NaN: rows within the window of key row j */
        const struct { const char *name; int64_t b, i; int ch; int64_t h, d; double val; int64_t expect; } c[] = {
            {"NaN in q (pass-through dim)", 1, 5, 0, 1, 40, NAN, D},
            {"NaN in q_diff (rotated dim)", 0, 59, 3, 2, 3, NAN, D},
            {"NaN in k", 0, 20, 1, 0, 50, NAN, (20 + 4 - (20 - 9) + 1) * D},
            {"NaN in k_diff at row 0", 1, 0, 4, 2, 17, NAN, (0 + 4 + 1) * D},
            {"NaN in v, one dim", 0, 7, 2, 2, 60, NAN, (7 + 4 - 0 + 1)},
            {"+inf in q, -inf in k (DyT saturates)", 1, 30, 0, 0, 1, INFINITY, 0},
        };
        for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
            weights w = weights_new(&p);
            void *x = packed_new(&p, NULL);
            tu_store(x, at(&p, c[k].b, c[k].i, c[k].ch, c[k].h, c[k].d), dt, c[k].val);
            if (isinf(c[k].val)) tu_store(x, at(&p, 0, 31, 1, 1, 2), dt, -INFINITY);
            int64_t nonfinite = -1;
            run_on(c[k].name, &p, x, tol_for(dt), &nonfinite);
            CHECK(nonfinite == c[k].expect, "%s (%s): %lld outputs NaN, expected %lld", c[k].name,
                  dswa_dtype_name(dt), (long long)nonfinite, (long long)c[k].expect);
            tu_free(x);
            free(w.q_gamma);
        }
    }
}

/* ---- refusals ---------------------------------------------------------------------------- */

enum { N_BAD = 43 };

/* Case k of the refusals: makes one thing wrong and returns the text the message must hold. */
static const char *make_bad(int k, dswa_samel_problem *p, const void **x, void **out, void *outbuf) {
    switch (k) {
    case 0: p->batch = -1; return "batch = -1";
    case 1: p->seq_len = -2; return "seq_len = -2";
    case 2: p->heads = 0; return "heads = 0";
    case 3: p->head_dim = 0; return "head_dim = 0";
    case 4: p->window_left = -1; return "window_left = -1";
    case 5: p->window_right = -3; return "window_right = -3";
    case 6: p->scale = NAN; return "scale = nan";
    case 7: p->lambda = INFINITY; return "lambda = inf";
    case 8: p->dtype = (dswa_dtype)7; return "dtype = 7";
    case 9: p->math = (dswa_math)9; return "math = 9";
    case 10: p->qkv.batch = -1; return "qkv.batch = -1";
    case 11: p->qkv.seq = -1; return "qkv.seq = -1";
    case 12: p->qkv.chunk = -5; return "qkv.chunk = -5";
    case 13: p->qkv.head = -1; return "qkv.head = -1";
    case 14: p->qkv.dim = -1; return "qkv.dim = -1";
    case 15: p->qkv.chunk = INT64_MAX / 2; return "qkv.chunk = 4611686018427387903";
    case 16: p->qkv.seq = INT64_MAX / 4; return "qkv: strides";
    case 17: p->out.seq = -7; return "out.seq = -7";
    case 18: p->out.dim = -1; return "out.dim = -1";
    case 19: p->out.seq = 0; return "out.seq = 0: output elements would alias";
    case 20: p->out.batch = INT64_MAX / 2; return "out: strides";
    case 21: p->rot_dims = 3; return "rot_dims = 3";
    case 22: p->rot_dims = 66; return "rot_dims = 66";
    case 23: p->rot_dims = -2; return "rot_dims = -2";
    case 24: p->rope_base = 0.0f; return "rope_base = 0";
    case 25: p->rope_base = NAN; return "rope_base = nan";
    case 26: p->rope_base = -INFINITY; return "rope_base = -inf";
    case 27: p->pos_offset = -1; return "pos_offset = -1";
    case 28: p->pos_offset = INT32_MAX - 10; return "pos_offset = 2147483637";
    case 29: p->q_norm.alpha = NAN; return "q_norm.alpha = nan";
    case 30: p->k_norm.alpha = -INFINITY; return "k_norm.alpha = -inf";
    case 31: p->q_norm.gamma = NULL; return "q_norm.gamma = NULL";
    case 32: p->q_norm.beta = NULL; return "q_norm.beta = NULL";
    case 33: p->k_norm.gamma = NULL; return "k_norm.gamma = NULL";
    case 34: p->k_norm.beta = NULL; return "k_norm.beta = NULL";
    case 35: *x = NULL; return "qkv = NULL";
    case 36: *out = NULL; return "out = NULL";
    case 37: *out = (void *)*x; return "out: overlaps qkv";   /* never written: refused */
    case 38: p->k_norm.beta = (const float *)outbuf + 100; return "out: overlaps k_norm.beta";
    case 39: return NULL;   /* p = NULL, below */
    case 40: p->q_norm.alpha_at = (const float *)((const char *)outbuf + 2); return "q_norm.alpha_at = ";
    case 41: p->k_norm.alpha_at = (const float *)outbuf + 100; return "out: overlaps k_norm.alpha_at";
    case 42: {
        static float freq[16];
        for (int j = 0; j < 16; j++) freq[j] = j == 5 ? NAN : 1.0f / (float)(j + 1);
        p->rope_freq = freq;
        return "rope_freq[5] = nan";
    }
    }
    return NULL;
}

static void test_refusals(void) {
    for (int k = 0; k < N_BAD; k++) {
        dswa_samel_problem p = dswa_samel_problem_default(2, 20, 2);
        weights w = weights_new(&p);
        int64_t nx;
        void *xbuf = packed_new(&p, &nx);
        const dswa_problem v = out_view(&p);
        tu_outbuf o = tu_outbuf_new(&v);
        const size_t xbytes = (size_t)nx * 4, obytes = (size_t)o.total * 4;
        const void *x = xbuf;
        void *out = o.out;
        const char *want = make_bad(k, &p, &x, &out, o.out);
        const dswa_samel_problem *pp = k == 39 ? NULL : &p;
        if (k == 39) want = "problem = NULL";
        void *x0 = malloc(xbytes), *o0 = malloc(obytes);
        if (!x0 || !o0) abort();
        memcpy(x0, xbuf, xbytes);
        memcpy(o0, o.base, obytes);

        char msg[3][512];
        dswa_status st[3];
        st[0] = dswa_samel_validate(pp, x, out);
        snprintf(msg[0], sizeof msg[0], "%s", dswa_last_error());
        st[1] = dswa_samel_forward_cpu(pp, x, out);
        snprintf(msg[1], sizeof msg[1], "%s", dswa_last_error());
        st[2] = dswa_samel_forward_cuda(pp, x, out, NULL);
        snprintf(msg[2], sizeof msg[2], "%s", dswa_last_error());
        for (int f = 0; f < 3; f++) {
            static const char *const fn[3] = {"validate", "forward_cpu", "forward_cuda"};
            CHECK(st[f] == DSWA_ERR_INVALID_ARGUMENT, "refusal %d (%s): %s gave status %d: %s", k,
                  want, fn[f], (int)st[f], msg[f]);
            CHECK(strstr(msg[f], want) != NULL, "refusal %d: %s's message \"%s\" lacks \"%s\"", k,
                  fn[f], msg[f], want);
        }
        CHECK(memcmp(x0, xbuf, xbytes) == 0 && memcmp(o0, o.base, obytes) == 0,
              "refusal %d (%s): memory was written", k, want);
        printf("  refused: %s\n", msg[1]);
        free(x0); free(o0);
        tu_outbuf_free(&o);
        tu_free(xbuf);
        free(w.q_gamma);
    }
}

/* dswa_rope_frequencies: upstream's float32 inv_freq, 1 / base^(2f / rot_dims) rounded once
   (checked against long double), and its refusals. */
static void test_rope_frequencies(void) {
    static const float bases[3] = {10000.0f, 500.0f, 1.5e6f};
    for (int r = 0; r <= 64; r += 2)
        for (int c = 0; c < 3; c++) {
            float f[32];
            for (int j = 0; j < 32; j++) f[j] = -1.0f;
            const dswa_status st = dswa_rope_frequencies(r, bases[c], f);
            CHECK(st == DSWA_OK, "rope_frequencies(%d, %g): %s", r, (double)bases[c], dswa_last_error());
            for (int j = 0; j < 32; j++) {
                const float want = j < r / 2 ? (float)(1.0L / powl((long double)bases[c], 2.0L * j / r)) : -1.0f;
                CHECK(f[j] == want, "rope_frequencies(%d, %g)[%d] = %.9g, want %.9g", r, (double)bases[c], j,
                      (double)f[j], (double)want);
            }
        }
    float f[4];
    CHECK(dswa_rope_frequencies(3, 10000.0f, f) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "rot_dims = 3"), "rope_frequencies odd rot_dims: %s", dswa_last_error());
    CHECK(dswa_rope_frequencies(8, 0.0f, f) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "rope_base = 0"), "rope_frequencies base 0: %s", dswa_last_error());
    CHECK(dswa_rope_frequencies(8, 100.0f, NULL) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "freq = NULL"), "rope_frequencies NULL: %s", dswa_last_error());
}

/* The default, empty problems, and the CUDA entry's answer. */
static void test_api(void) {
    dswa_samel_problem p = dswa_samel_problem_default(2, 300, 24);
    CHECK(p.head_dim == 64 && p.window_left == 17 && p.window_right == 17 && p.scale == 0.125f &&
          p.lambda == 1.0f && p.rot_dims == 32 && p.rope_base == 10000.0f && p.pos_offset == 0 &&
          p.dtype == DSWA_F32 && p.math == DSWA_MATH_DEFAULT,
          "default: scalar fields not SAME-L's");
    CHECK(p.qkv.batch == 300 * 5 * 1536 && p.qkv.seq == 5 * 1536 && p.qkv.chunk == 1536 &&
          p.qkv.head == 64 && p.qkv.dim == 1,
          "default: qkv strides not a contiguous (B, N, 5 H D)");
    CHECK(p.out.batch == 300 * 1536 && p.out.seq == 1536 && p.out.head == 64 && p.out.dim == 1,
          "default: out strides not a contiguous (B, N, H D)");
    CHECK(p.q_norm.gamma == NULL && p.k_norm.beta == NULL, "default: norm weights not NULL");

    /* batch or seq_len 0: a valid no-op, pointers unchecked */
    for (int e = 0; e < 2; e++) {
        p = dswa_samel_problem_default(e ? 2 : 0, e ? 0 : 5, 3);
        CHECK(dswa_samel_validate(&p, NULL, NULL) == DSWA_OK, "empty %d: validate: %s", e, dswa_last_error());
        CHECK(dswa_samel_forward_cpu(&p, NULL, NULL) == DSWA_OK, "empty %d: cpu: %s", e, dswa_last_error());
        const dswa_status want = dswa_cuda_available() ? DSWA_OK : DSWA_ERR_NO_DEVICE;
        CHECK(dswa_samel_forward_cuda(&p, NULL, NULL, NULL) == want,
              "empty %d: cuda should say %d: %s", e, (int)want, dswa_last_error());
    }

    /* The kernel's name needs no device: SAME-L's problem takes the band kernel, a window
       span over 48 or a rot_dims off the chunks the scalar one, a refused problem none. */
    p = dswa_samel_problem_default(1, 300, 24);
    static const char *const band[3] = {"dswa_samel_f32_tf32", "dswa_samel_f16", "dswa_samel_bf16"};
    static const char *const scalar[3] = {"dswa_samel_scalar_f32", "dswa_samel_scalar_f16",
                                          "dswa_samel_scalar_bf16"};
    for (int t = 0; t < 3; t++) {
        dswa_samel_problem q = p;
        q.dtype = all_dtypes[t];
        const char *k = dswa_samel_kernel_name(&q);
        CHECK(k && !strcmp(k, band[t]), "kernel name %s: %s", band[t], k ? k : dswa_last_error());
        q.window_left = 40;
        k = dswa_samel_kernel_name(&q);
        CHECK(k && !strcmp(k, scalar[t]), "kernel name %s: %s", scalar[t], k ? k : dswa_last_error());
        q.window_left = 17;
        q.rot_dims = t == 0 ? 40 : 24;
        k = dswa_samel_kernel_name(&q);
        CHECK(k && !strcmp(k, scalar[t]), "kernel name rot %d: %s", q.rot_dims, k ? k : dswa_last_error());
        q.seq_len = 20; /* windows clamped to N - 1 = 19: span 38, band again */
        q.rot_dims = 32;
        q.window_left = q.window_right = 100;
        k = dswa_samel_kernel_name(&q);
        CHECK(k && !strcmp(k, band[t]), "kernel name clamped: %s", k ? k : dswa_last_error());
    }
    p.math = DSWA_MATH_FP32;
    CHECK(dswa_samel_kernel_name(&p) && !strcmp(dswa_samel_kernel_name(&p), "dswa_samel_f32_fp32"),
          "kernel name fp32");
    p.head_dim = 32;
    p.qkv.head = 32; p.qkv.chunk = 24 * 32; p.qkv.seq = 5 * 24 * 32; p.qkv.batch = 300 * p.qkv.seq;
    p.out.head = 32; p.out.seq = 24 * 32; p.out.batch = 300 * p.out.seq;
    p.rot_dims = 16;
    CHECK(dswa_samel_kernel_name(&p) == NULL && strstr(dswa_last_error(), "head_dim = 32"),
          "kernel name head_dim 32: %s", dswa_last_error());
    p = dswa_samel_problem_default(1, 300, 24);
    p.rot_dims = 3;
    CHECK(dswa_samel_kernel_name(&p) == NULL && strstr(dswa_last_error(), "rot_dims = 3"),
          "kernel name rot_dims 3: %s", dswa_last_error());
    CHECK(dswa_samel_kernel_name(NULL) == NULL && strstr(dswa_last_error(), "problem = NULL"),
          "kernel name NULL: %s", dswa_last_error());

    /* a valid problem without a device: NO_DEVICE and nothing written (with one, test_cuda_samel
       checks the results) */
    for (int t = 0; t < 3 && !dswa_cuda_available(); t++) {
        p = dswa_samel_problem_default(1, 33, 2);
        p.dtype = all_dtypes[t];
        weights w = weights_new(&p);
        void *x = packed_new(&p, NULL);
        const dswa_problem v = out_view(&p);
        tu_outbuf o = tu_outbuf_new(&v);
        CHECK(dswa_samel_validate(&p, x, o.out) == DSWA_OK, "validate: %s", dswa_last_error());
        const dswa_status s = dswa_samel_forward_cuda(&p, x, o.out, NULL);
        CHECK(s == DSWA_ERR_NO_DEVICE, "cuda entry: status %d", (int)s);
        CHECK(tu_outbuf_untouched(&o), "cuda entry wrote its output");
        tu_outbuf_free(&o);
        tu_free(x);
        free(w.q_gamma);
    }
}

/* The alphas read from memory (alpha_at; the problem's floats NaN, so they must not be read):
   the CPU backend's output equals the one with the alphas as floats, bitwise, for each dtype;
   a non-finite value there is refused, naming the field, with nothing written. */
static void test_alpha_at(void) {
    for (int t = 0; t < 3; t++) {
        dswa_samel_problem p = dswa_samel_problem_default(2, 90, 3);
        p.dtype = (dswa_dtype)t;
        weights w = weights_new(&p);
        void *x = packed_new(&p, NULL);
        const dswa_problem v = out_view(&p);
        tu_outbuf o[2] = {tu_outbuf_new(&v), tu_outbuf_new(&v)};
        const float alphas[2] = {p.q_norm.alpha, p.k_norm.alpha}, bad = NAN;
        dswa_samel_problem pa = p;
        pa.q_norm.alpha = pa.k_norm.alpha = NAN;
        pa.q_norm.alpha_at = &alphas[0];
        pa.k_norm.alpha_at = &alphas[1];
        dswa_status st = dswa_samel_forward_cpu(&p, x, o[0].out);
        CHECK(st == DSWA_OK, "alpha_at %s: float alphas: %s", dswa_dtype_name(p.dtype), dswa_last_error());
        st = dswa_samel_forward_cpu(&pa, x, o[1].out);
        CHECK(st == DSWA_OK, "alpha_at %s: %s", dswa_dtype_name(p.dtype), dswa_last_error());
        const size_t ob = (size_t)o[0].total * tu_dtype_size(p.dtype);
        CHECK(memcmp(o[0].base, o[1].base, ob) == 0, "alpha_at %s: output differs from the float "
              "alphas' one", dswa_dtype_name(p.dtype));
        tu_poison(o[1].base, o[1].total, p.dtype);
        pa.k_norm.alpha_at = &bad;
        st = dswa_samel_forward_cpu(&pa, x, o[1].out);
        CHECK(st == DSWA_ERR_INVALID_ARGUMENT && strstr(dswa_last_error(), "k_norm.alpha_at points to nan"),
              "alpha_at -> NaN: status %d: %s", (int)st, dswa_last_error());
        CHECK(tu_outbuf_untouched(&o[1]), "alpha_at -> NaN: output written");
        printf("  alpha_at %-4s: bitwise equal to the float alphas; refused: %s\n",
               dswa_dtype_name(p.dtype), dswa_last_error());
        tu_outbuf_free(&o[0]);
        tu_outbuf_free(&o[1]);
        tu_free(x);
        free(w.q_gamma);
    }
}

int main(void) {
    tu_rng_init(&rng, tu_test_seed());
    test_reference();
    test_api();
    test_rope_frequencies();
    test_alpha_at();
    test_cases();
    test_layouts();
    test_rope_relative();
    test_nonfinite();
    test_refusals();
    TEST_MAIN_RETURN("test_samel");
}
