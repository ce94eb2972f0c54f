/* The fused SAME-L block's backward: dswa_samel_backward_cpu against the tests' own float64
   reference (tu_samel_ref64_backward) on fresh random inputs (the seed is printed;
   DSWA_TEST_SEED=N repeats a run), dqkv and the norms' gradients written into poisoned buffers
   with poisoned guards (every element of dqkv's view written, nothing else touched); the
   reference itself against central differences of the forward's float64 reference
   (tu_samel_ref64), over every element of x and every norm parameter, so that both cannot
   share a sign error; bitwise determinism across thread counts; and every refusal of
   dswa_samel_validate_backward, through it and dswa_samel_backward_cpu, with a message naming
   the field and no byte of any buffer changed. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "compare.h"
#include "samel_ref64.h"
#include "testutil.h"

static tu_rng rng;
static const dswa_dtype all_dtypes[3] = {DSWA_F32, DSWA_F16, DSWA_BF16};

/* Tolerances per tensor: relative Frobenius error for each chunk of dqkv; for the norms'
   dalpha, dgamma and dbeta, the error against the root sum of squares of each sum's terms
   (norm_err). f32: fp32 arithmetic against float64 (about 2e-7 measured, as the op's backward
   alone). 16-bit: dqkv is rounded to the dtype once (half a unit in the last place: 2^-11 f16,
   2^-8 bf16; about 2e-4 and 1.7e-3 measured); and the backend's fp32 DyT and RoPE put a few r
   elements on the other side of a rounding boundary than the reference's float64 ones (as in
   the forward's test), each such element off by a unit, which moves the gradients of its
   whole window: the norms' gradients, fp32 sums of fp32 terms, are otherwise as accurate as
   f32's, but one such element can cost them some 5e-4 (bf16). */
static double tol_dx(dswa_dtype t) { return t == DSWA_F32 ? 1e-5 : t == DSWA_F16 ? 1e-3 : 3e-3; }
static double tol_norm(dswa_dtype t) { return t == DSWA_F32 ? 1e-5 : tol_dx(t); }

/* ---- layouts and buffers ---------------------------------------------------------------- */

/* The packed view whose dimensions nest in `order` (letters b, n, c (chunk), h, d, outermost
   first), every stride but the innermost padded by pad elements. "bnchd", 0: contiguous. */
static dswa_samel_layout packed_order(const dswa_samel_problem *p, const char *order, int64_t pad) {
    dswa_samel_layout l = {0, 0, 0, 0, 0};
    int64_t stride = 1;
    for (int k = 4; k >= 0; k--) {
        const char c = order[k];
        int64_t *s = c == 'b' ? &l.batch : c == 'n' ? &l.seq : c == 'c' ? &l.chunk
                   : c == 'h' ? &l.head : &l.dim;
        const int64_t ext = c == 'b' ? p->batch : c == 'n' ? p->seq_len : c == 'c' ? 5
                          : c == 'h' ? p->heads : p->head_dim;
        *s = stride;
        stride = stride * ext + pad;
    }
    return l;
}

static int64_t packed_at(const dswa_samel_layout *l, int64_t b, int64_t i, int c, int64_t h,
                         int64_t d) {
    return b * l->batch + i * l->seq + c * l->chunk + h * l->head + d * l->dim;
}

static int64_t packed_elems(const dswa_samel_problem *p, const dswa_samel_layout *l) {
    return packed_at(l, p->batch - 1, p->seq_len - 1, 4, p->heads - 1, p->head_dim - 1) + 1;
}

/* The op's problem with the block's sizes, dtype and dout as its out: what the tests' output
   helpers (tu_span, tu_out_offset) read. */
static dswa_problem dout_view(const dswa_samel_backward_problem *bp) {
    const dswa_samel_problem *p = &bp->fwd;
    dswa_problem d = dswa_problem_default(p->batch, p->seq_len, p->heads, p->head_dim, 0);
    d.dtype = p->dtype;
    d.out = bp->dout;
    return d;
}

static void *new_buf(int64_t n, dswa_dtype dt) {
    void *b = tu_alloc(n < 1 ? 1 : n, dt);
    tu_fill_normal(b, n < 1 ? 1 : n, dt, &rng, 1.0);
    return b;
}

/* Norm weights: gamma around 1.5, beta around 0 (scores spread over a few units: a flat
   softmax would hide errors), in one array [q gamma, q beta, k gamma, k beta]. */
static float *norms_new(dswa_samel_problem *p) {
    const int D = p->head_dim;
    float *w = malloc(sizeof(float) * 4 * (size_t)D);
    if (!w) abort();
    for (int e = 0; e < 4 * D; e++)
        w[e] = (float)((e / D) % 2 ? 0.3 * tu_rng_normal(&rng) : 1.5 + 0.5 * tu_rng_normal(&rng));
    p->q_norm.gamma = w; p->q_norm.beta = w + D;
    p->k_norm.gamma = w + 2 * D; p->k_norm.beta = w + 3 * D;
    return w;
}

/* g pointing into a buffer of 2 * (1 + 2D) floats: per norm dalpha, dgamma[D], dbeta[D] (the
   reference's order). */
static dswa_samel_norm_grads grads_in(float *buf, int D) {
    dswa_samel_norm_grads g;
    g.q_norm = (dswa_samel_norm_grad){buf, buf + 1, buf + 1 + D};
    buf += 1 + 2 * D;
    g.k_norm = (dswa_samel_norm_grad){buf, buf + 1, buf + 1 + D};
    return g;
}

/* ---- against the reference --------------------------------------------------------------- */

typedef struct scase {
    const char *name;
    dswa_samel_backward_problem bp;
    const char *x_order, *dx_order;   /* packed_order's; x_slice overrides x's */
    int64_t x_pad, dx_pad;
    int x_slice;      /* x: chunks 1-5 of a (B, N, 7*H*D) buffer */
    int dout_pad;     /* dout: seq stride padded by 3 elements */
    int with_g;       /* norm gradients asked for */
} scase;

static scase make(const char *name, int B, int N, int H, int D, int wl, int wr, int rot,
                  dswa_dtype dt) {
    scase c;
    memset(&c, 0, sizeof c);
    dswa_samel_problem p = dswa_samel_problem_default(B, N, H);
    p.head_dim = D;
    p.qkv = packed_order(&p, "bnchd", 0);
    p.out = (dswa_layout){(int64_t)N * H * D, (int64_t)H * D, 0, D, 1};
    p.window_left = wl;
    p.window_right = wr;
    p.rot_dims = rot;
    p.pos_offset = 5;
    p.scale = (float)(1.0 / sqrt((double)D));
    p.lambda = 0.6f;
    p.dtype = dt;
    p.q_norm.alpha = (float)(0.5 + tu_rng_uniform(&rng));
    p.k_norm.alpha = -(float)(0.5 + tu_rng_uniform(&rng));   /* a negative alpha */
    c.name = name;
    c.bp.fwd = p;
    c.x_order = c.dx_order = "bnchd";
    c.with_g = 1;
    return c;
}

/* ||dqkv's chunk ch - ref||_F / ||ref||_F; 0 when both are exactly 0 (an alpha of 0),
   INFINITY for a non-finite output. */
static double chunk_err(const dswa_samel_backward_problem *bp, const void *dx, const double *ref,
                        int ch, double *ref_norm) {
    const dswa_samel_problem *p = &bp->fwd;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim;
    double d2 = 0, r2 = 0;
    int bad = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const double o = tu_load(dx, packed_at(&bp->dqkv, b, i, ch, h, d), p->dtype);
                    const double r = ref[(((b * N + i) * 5 + ch) * H + h) * D + d];
                    bad |= !isfinite(o);
                    d2 += (o - r) * (o - r);
                    r2 += r * r;
                }
    *ref_norm = sqrt(r2);
    return bad ? INFINITY : d2 == 0 ? 0 : r2 == 0 ? INFINITY : sqrt(d2 / r2);
}

/* ||o - r|| / ||scale|| over n entries of the norms' gradients, scale being the reference's
   root sum of squares of each sum's terms (a sum that cancels to about 0, as k_norm's dbeta
   without RoPE, has no relative error to speak of); 0 when o == r exactly. */
static double norm_err(const float *o, const double *r, const double *scale, int n) {
    double d2 = 0, s2 = 0;
    for (int e = 0; e < n; e++) {
        d2 += ((double)o[e] - r[e]) * ((double)o[e] - r[e]);
        s2 += scale[e] * scale[e];
    }
    return d2 == 0 ? 0 : s2 == 0 ? INFINITY : sqrt(d2 / s2);
}

/* Elements of dqkv's view still poisoned (*unwritten) and elements of the allocation outside
   it no longer poisoned (*clobbered). */
static void check_dx_buffer(const dswa_samel_backward_problem *bp, const tu_outbuf *o,
                            int64_t *unwritten, int64_t *clobbered) {
    const dswa_samel_problem *p = &bp->fwd;
    char *in_view = calloc((size_t)o->total, 1);
    if (!in_view) abort();
    *unwritten = *clobbered = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int c = 0; c < 5; c++)
                for (int64_t h = 0; h < p->heads; h++)
                    for (int64_t d = 0; d < p->head_dim; d++)
                        in_view[TU_GUARD + packed_at(&bp->dqkv, b, i, c, h, d)] = 1;
    for (int64_t e = 0; e < o->total; e++) {
        const int poisoned = tu_is_poison(o->base, e, o->dtype);
        *unwritten += in_view[e] && poisoned;
        *clobbered += !in_view[e] && !poisoned;
    }
    free(in_view);
}

static void run_case(scase c) {
    dswa_samel_backward_problem *bp = &c.bp;
    dswa_samel_problem *p = &bp->fwd;
    const dswa_dtype dt = p->dtype;
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const char *dtn = dswa_dtype_name(dt);

    int64_t x_origin = 0;
    if (c.x_slice) {
        const dswa_samel_layout l = {N * 7 * H * D, 7 * H * D, H * D, D, 1};
        p->qkv = l;
        x_origin = H * D;
    } else {
        p->qkv = packed_order(p, c.x_order, c.x_pad);
    }
    bp->dqkv = packed_order(p, c.dx_order, c.dx_pad);
    bp->dout = p->out;
    if (c.dout_pad) {
        bp->dout.seq += 3;
        bp->dout.batch = N * bp->dout.seq;
    }
    void *xbuf = new_buf(x_origin + packed_elems(p, &p->qkv), dt);
    const void *x = (const char *)xbuf + x_origin * (int64_t)tu_dtype_size(dt);
    const dswa_problem ov = dout_view(bp);
    void *dout = new_buf(tu_span(&ov, &bp->dout, 1), dt);
    float *w = norms_new(p);
    tu_outbuf o = tu_outbuf_alloc(packed_elems(p, &bp->dqkv), dt);
    tu_outbuf go = tu_outbuf_alloc(2 * (1 + 2 * D), DSWA_F32);
    const dswa_samel_norm_grads g = grads_in(go.out, (int)D);

    const dswa_status s = dswa_samel_backward_cpu(bp, x, dout, o.out, c.with_g ? &g : NULL);
    CHECK(s == DSWA_OK, "%s (%s): status %d: %s", c.name, dtn, (int)s, dswa_last_error());
    int64_t un, cl;
    check_dx_buffer(bp, &o, &un, &cl);
    CHECK(un == 0, "%s (%s): %lld dqkv elements were not written", c.name, dtn, (long long)un);
    CHECK(cl == 0, "%s (%s): %lld elements outside dqkv's view were modified", c.name, dtn,
          (long long)cl);
    int64_t g_unwritten = 0;
    for (int64_t e = 0; e < 2 * (1 + 2 * D); e++)
        g_unwritten += tu_is_poison(go.out, e, DSWA_F32);
    CHECK(c.with_g ? g_unwritten == 0 : tu_outbuf_untouched(&go), "%s (%s): norm gradients %s",
          c.name, dtn, c.with_g ? "not all written" : "written though not asked for");

    const int64_t nn = 2 * (1 + 2 * D);
    double *ref = malloc(sizeof(double) * (size_t)(B * N * 5 * H * D));
    double *rn = malloc(sizeof(double) * (size_t)nn), *rs = malloc(sizeof(double) * (size_t)nn);
    if (!ref || !rn || !rs) abort();
    tu_samel_ref64_backward(bp, x, dout, ref, rn, rs);
    /* One key per window: every softmax weight is 1, so q and k (and the norms) get exactly 0. */
    const int one_key = N == 1 || (p->window_left == 0 && p->window_right == 0);
    static const char *const cn[5] = {"q", "k", "v", "q_diff", "k_diff"};
    double err[5], worst_dx = 0;
    for (int ch = 0; ch < 5; ch++) {
        double norm;
        err[ch] = chunk_err(bp, o.out, ref, ch, &norm);
        const float alpha = ch == 2 ? 1.0f : (ch == 1 || ch == 4) ? p->k_norm.alpha : p->q_norm.alpha;
        CHECK(err[ch] <= tol_dx(dt), "%s (%s): d%s relative error %.3e > %.0e", c.name, dtn,
              cn[ch], err[ch], tol_dx(dt));
        /* a chunk's gradient is 0 only with an alpha of 0 or one key per window (then it is
           compared exactly) */
        CHECK((ch != 2 && (alpha == 0.0f || one_key)) || norm > 0,
              "%s: the reference d%s is 0: a vacuous comparison", c.name, cn[ch]);
        if (err[ch] > worst_dx) worst_dx = err[ch];
    }
    double worst_norm = 0;
    for (int n = 0; n < 2 && c.with_g; n++) {
        const char *nn_name = n ? "k_norm" : "q_norm";
        static const char *const part[3] = {"dalpha", "dgamma", "dbeta"};
        const int64_t at3[3] = {0, 1, 1 + D}, len3[3] = {1, D, D};
        for (int k = 0; k < 3; k++) {
            const int64_t e0 = n * (1 + 2 * D) + at3[k];
            const double e = norm_err((const float *)go.out + e0, rn + e0, rs + e0, (int)len3[k]);
            CHECK(e <= tol_norm(dt), "%s (%s): %s.%s error %.3e > %.0e (of its terms' scale)",
                  c.name, dtn, nn_name, part[k], e, tol_norm(dt));
            worst_norm = fmax(worst_norm, e);
        }
        CHECK(one_key || rs[n * (1 + 2 * D)] > 0, "%s: %s's dalpha has no terms: a vacuous "
              "comparison", c.name, nn_name);
    }
    if (p->rot_dims == 0 && c.with_g) {
        /* softmax ignores a shift shared by every key, so k_norm's beta has no gradient */
        double r2 = 0, s2 = 0;
        for (int64_t d = 0; d < D; d++) {
            r2 += rn[2 + 3 * D + d] * rn[2 + 3 * D + d];
            s2 += rs[2 + 3 * D + d] * rs[2 + 3 * D + d];
        }
        CHECK(sqrt(r2) <= 1e-12 * sqrt(s2), "%s: the reference's k_norm.dbeta is %.3g, not 0 "
              "(its terms' scale %.3g)", c.name, sqrt(r2), sqrt(s2));
    }
    printf("  %-44s %-4s B=%lld N=%lld H=%lld D=%lld W=%d/%d rot=%d  dqkv max %.1e (q %.1e v %.1e)",
           c.name, dtn, (long long)B, (long long)N, (long long)H, (long long)D, p->window_left,
           p->window_right, p->rot_dims, worst_dx, err[0], err[2]);
    if (c.with_g) printf(" norms max %.1e", worst_norm);
    printf("\n");
    free(ref); free(rn); free(rs); free(w);
    tu_outbuf_free(&o); tu_outbuf_free(&go);
    tu_free(xbuf); tu_free(dout);
}

static void test_cases(void) {
    printf("against the float64 reference\n");
    for (int t = 0; t < 3; t++) {
        const dswa_dtype dt = all_dtypes[t];
        run_case(make("B=2, odd N=37, windows 5/9, rot 16", 2, 37, 2, 32, 5, 9, 16, dt));
        scase c = make("the same, g NULL", 2, 37, 2, 32, 5, 9, 16, dt);
        c.with_g = 0;
        run_case(c);
        run_case(make("rot_dims 0 (no RoPE)", 2, 23, 2, 32, 4, 2, 0, dt));
        run_case(make("rot_dims 32 of 64, SAME-L's window 17/17", 1, 60, 2, 64, 17, 17, 32, dt));
        run_case(make("rot_dims 64 of 64", 2, 21, 1, 64, 3, 6, 64, dt));
        run_case(make("N=7 < window 17", 2, 7, 2, 16, 17, 17, 8, dt));
        run_case(make("N=1", 3, 1, 2, 16, 17, 17, 8, dt));
        run_case(make("N=100 (several tasks), windows 0/11", 1, 100, 2, 16, 0, 11, 16, dt));
        c = make("q_norm alpha 0, k_norm alpha -2", 2, 19, 2, 16, 3, 3, 8, dt);
        c.bp.fwd.q_norm.alpha = 0.0f;
        c.bp.fwd.k_norm.alpha = -2.0f;
        run_case(c);
        c = make("pos_offset 100000, base 500", 1, 29, 2, 32, 4, 4, 32, dt);
        c.bp.fwd.pos_offset = 100000;
        c.bp.fwd.rope_base = 500.0f;
        run_case(c);
        c = make("lambda 1, scale 1/8 (SAME-L's)", 2, 25, 3, 64, 17, 17, 32, dt);
        c.bp.fwd.lambda = 1.0f;
        c.bp.fwd.scale = 0.125f;
        run_case(c);
        c = make("x a slice of (B, N, 7HD), dqkv padded", 2, 17, 2, 16, 4, 2, 8, dt);
        c.x_slice = 1;
        c.dx_pad = 3;
        c.dout_pad = 1;
        run_case(c);
        c = make("x head-major padded, dqkv dim-outer", 2, 13, 3, 8, 2, 5, 4, dt);
        c.x_order = "bhcnd";
        c.x_pad = 2;
        c.dx_order = "dbnch";
        c.dx_pad = 1;
        run_case(c);
    }
}

/* ---- the reference against central differences ------------------------------------------ */

/* L = sum dout . out, out from the forward's float64 reference. */
static double loss(const dswa_samel_backward_problem *bp, const void *x, const void *dout,
                   double *scratch) {
    const dswa_samel_problem *p = &bp->fwd;
    tu_samel_ref64(p, x, scratch);
    double s = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int64_t h = 0; h < p->heads; h++)
                for (int64_t d = 0; d < p->head_dim; d++)
                    s += tu_load(dout, tu_out_offset(&bp->dout, b, i, h, d), DSWA_F32) *
                         scratch[((b * p->seq_len + i) * p->heads + h) * p->head_dim + d];
    return s;
}

/* dL/dv for the float *v by central differences: v +- 2^-12 rounded to f32, divided by the
   step taken. Truncation error ~ step^2 * L''' ~ 1e-7 here; rounding ~ 1e-16 / step. */
static double central(const dswa_samel_backward_problem *bp, const void *x, const void *dout,
                      float *v, double *scratch) {
    const float v0 = *v, vp = (float)(v0 + 0x1p-12), vm = (float)(v0 - 0x1p-12);
    *v = vp;
    const double lp = loss(bp, x, dout, scratch);
    *v = vm;
    const double lm = loss(bp, x, dout, scratch);
    *v = v0;
    return (lp - lm) / ((double)vp - (double)vm);
}

static void test_finite_differences(void) {
    printf("the reference against central differences of the forward reference\n");
    dswa_samel_problem p = dswa_samel_problem_default(2, 6, 1);
    p.head_dim = 8;
    p.qkv = packed_order(&p, "bnchd", 0);
    p.out = (dswa_layout){6 * 8, 8, 0, 8, 1};
    p.window_left = 2;
    p.window_right = 1;
    p.rot_dims = 4;     /* rotated and passed-through dims both */
    p.pos_offset = 3;
    p.scale = 0.9f;     /* far from uniform weights */
    p.lambda = 0.7f;
    p.q_norm.alpha = 0.7f;
    p.k_norm.alpha = -0.6f;
    dswa_samel_backward_problem bp = dswa_samel_backward_problem_default(&p);
    float *w = norms_new(&bp.fwd);
    const int64_t nx = packed_elems(&p, &p.qkv), D = p.head_dim;
    float *x = new_buf(nx, DSWA_F32);
    const dswa_problem ov = dout_view(&bp);
    void *dout = new_buf(tu_span(&ov, &bp.dout, 1), DSWA_F32);
    double *ref = malloc(sizeof(double) * (size_t)nx), rn[2 * (1 + 2 * 8)];
    double *scratch = malloc(sizeof(double) * (size_t)nx);
    if (!ref || !scratch) abort();
    tu_samel_ref64_backward(&bp, x, dout, ref, rn, NULL);

    /* x: contiguous, so the reference's dense [B][N][5][H][D] is x's own order */
    double worst = 0, gmax = 0;
    for (int64_t e = 0; e < nx; e++) {
        const double fd = central(&bp, x, dout, &x[e], scratch);
        worst = fmax(worst, fabs(fd - ref[e]));
        gmax = fmax(gmax, fabs(ref[e]));
    }
    CHECK(gmax > 0.1, "x: gradients too small (max %.3g) for the check to mean anything", gmax);
    CHECK(worst <= 1e-6 * gmax, "x: the reference differs from central differences by %.3e "
          "(largest gradient %.3g)", worst, gmax);
    printf("  x: %lld elements, max |fd - ref| %.2e of max |grad| %.3g\n", (long long)nx, worst, gmax);

    /* the norms: alpha, each gamma and beta */
    double nworst = 0, nmax = 0;
    for (int n = 0; n < 2; n++) {
        dswa_samel_norm *nm = n ? &bp.fwd.k_norm : &bp.fwd.q_norm;
        const double *r = rn + n * (1 + 2 * D);
        for (int64_t e = 0; e < 1 + 2 * D; e++) {
            float *v = e == 0 ? &nm->alpha : w + 2 * D * n + (e - 1);   /* gamma[D], beta[D] */
            const double fd = central(&bp, x, dout, v, scratch);
            nworst = fmax(nworst, fabs(fd - r[e]));
            nmax = fmax(nmax, fabs(r[e]));
            CHECK(fabs(fd - r[e]) <= 1e-6 * (1 + fabs(r[e])), "%s parameter %lld: reference "
                  "%.12g, central difference %.12g", n ? "k_norm" : "q_norm", (long long)e, r[e], fd);
        }
    }
    CHECK(nmax > 0.1, "norms: gradients too small (max %.3g) for the check to mean anything", nmax);
    printf("  norms: 2 x (alpha, %lld gamma, %lld beta), max |fd - ref| %.2e of max |grad| %.3g\n",
           (long long)D, (long long)D, nworst, nmax);
    free(ref); free(scratch); free(w);
    tu_free(x); tu_free(dout);
}

/* ---- determinism ------------------------------------------------------------------------ */

static void test_determinism(void) {
    printf("determinism across thread counts\n");
    for (int t = 0; t < 3; t += 2) {   /* f32 and bf16 */
        scase c = make("determinism", 2, 100, 3, 64, 17, 11, 32, all_dtypes[t]);
        dswa_samel_backward_problem *bp = &c.bp;
        dswa_samel_problem *p = &bp->fwd;
        bp->dqkv = p->qkv;
        bp->dout = p->out;
        void *x = new_buf(packed_elems(p, &p->qkv), p->dtype);
        const dswa_problem ov = dout_view(bp);
        void *dout = new_buf(tu_span(&ov, &bp->dout, 1), p->dtype);
        float *w = norms_new(p);
        const int saved = omp_get_max_threads(), threads[2] = {1, 3};
        tu_outbuf o[2], go[2];
        for (int r = 0; r < 2; r++) {
            o[r] = tu_outbuf_alloc(packed_elems(p, &bp->dqkv), p->dtype);
            go[r] = tu_outbuf_alloc(2 * (1 + 2 * p->head_dim), DSWA_F32);
            const dswa_samel_norm_grads g = grads_in(go[r].out, p->head_dim);
            omp_set_num_threads(threads[r]);
            CHECK(dswa_samel_backward_cpu(bp, x, dout, o[r].out, &g) == DSWA_OK, "%d threads: %s",
                  threads[r], dswa_last_error());
        }
        omp_set_num_threads(saved);
        const int same = !memcmp(o[0].base, o[1].base, (size_t)o[0].total * tu_dtype_size(p->dtype)) &&
                         !memcmp(go[0].base, go[1].base, (size_t)go[0].total * sizeof(float));
        CHECK(same, "%s: 3 threads give other bits than 1 thread", dswa_dtype_name(p->dtype));
        printf("  %-4s 1 and 3 threads: %s\n", dswa_dtype_name(p->dtype), same ? "bitwise equal" : "DIFFER");
        for (int r = 0; r < 2; r++) { tu_outbuf_free(&o[r]); tu_outbuf_free(&go[r]); }
        free(w);
        tu_free(x); tu_free(dout);
    }
}

/* ---- refusals ---------------------------------------------------------------------------- */

static dswa_samel_backward_problem base;
static float *arena, *bx, *bdo;        /* inputs: qkv and dout */
static float *bw;                      /* the norms' gamma and beta */
static void *in_copy[3];
static size_t in_bytes[3];
static tu_outbuf bg;                   /* one poisoned buffer for dqkv and the norm gradients */
static int nrefusals = 0;

static int unchanged(void) {
    const void *in[3] = {bx, bdo, bw};
    for (int i = 0; i < 3; i++)
        if (memcmp(in[i], in_copy[i], in_bytes[i])) return 0;
    return tu_outbuf_untouched(&bg);
}

/* dswa_samel_validate_backward and dswa_samel_backward_cpu must both refuse, naming `needle`
   (a leading '^': at the start of the message), and change nothing. */
static void refused(const char *what, const dswa_samel_backward_problem *p, const void *x,
                    const void *dout, void *dx, const dswa_samel_norm_grads *g, const char *needle) {
    nrefusals++;
    for (int api = 0; api < 2; api++) {
        const dswa_status s = api == 0 ? dswa_samel_validate_backward(p, x, dout, dx, g)
                                       : dswa_samel_backward_cpu(p, x, dout, dx, g);
        const char *msg = dswa_last_error();
        const int at_start = needle[0] == '^';
        const int found = at_start ? !strncmp(msg, needle + 1, strlen(needle + 1)) : strstr(msg, needle) != NULL;
        CHECK(s == DSWA_ERR_INVALID_ARGUMENT && found, "%s: %s returned %d, message \"%s\" "
              "(wanted \"%s\")", what, api ? "dswa_samel_backward_cpu" : "dswa_samel_validate_backward",
              (int)s, msg, needle);
        CHECK(unchanged(), "%s: a buffer was modified", what);
        if (api == 0) printf("  %-46s -> %s\n", what, msg);
    }
}

static void accepted(const char *what, const dswa_samel_backward_problem *p, const void *dx,
                     const dswa_samel_norm_grads *g) {
    const dswa_status s = dswa_samel_validate_backward(p, bx, bdo, dx, g);
    CHECK(s == DSWA_OK, "%s: refused: %s", what, dswa_last_error());
}

static void test_refusals(void) {
    printf("refusals\n");
    dswa_samel_problem f = dswa_samel_problem_default(2, 6, 2);
    f.head_dim = 4;
    f.qkv = packed_order(&f, "bnchd", 0);
    f.out = (dswa_layout){6 * 2 * 4, 2 * 4, 0, 4, 1};
    f.rot_dims = 2;
    f.window_left = f.window_right = 2;
    const int64_t nx = packed_elems(&f, &f.qkv), D = f.head_dim;
    /* the inputs in one arena, each followed by a gap of nx floats, so that a dqkv placed at
       one of them overlaps that one only */
    const dswa_samel_backward_problem fb = dswa_samel_backward_problem_default(&f);
    const dswa_problem ov = dout_view(&fb);
    const int64_t nd = tu_span(&ov, &f.out, 1);
    arena = new_buf(4 * nx + nd + 4 * D, DSWA_F32);
    bx = arena;
    bdo = arena + 2 * nx;
    bw = arena + 3 * nx + nd;
    float *w = norms_new(&f);
    memcpy(bw, w, sizeof(float) * 4 * (size_t)D);
    free(w);
    f.q_norm.gamma = bw; f.q_norm.beta = bw + D;
    f.k_norm.gamma = bw + 2 * D; f.k_norm.beta = bw + 3 * D;
    base = dswa_samel_backward_problem_default(&f);
    const void *in[3] = {bx, bdo, bw};
    const size_t nb[3] = {(size_t)nx * 4, (size_t)nd * 4, 4 * (size_t)D * 4};
    for (int i = 0; i < 3; i++) {
        in_bytes[i] = nb[i];
        in_copy[i] = malloc(nb[i]);
        if (!in_copy[i]) abort();
        memcpy(in_copy[i], in[i], nb[i]);
    }
    bg = tu_outbuf_alloc(nx + 2 * (1 + 2 * D), DSWA_F32);
    float *dx = bg.out;
    const dswa_samel_norm_grads g = grads_in(dx + nx, (int)D);
    accepted("the base problem (control)", &base, dx, &g);
    accepted("g NULL (control)", &base, dx, NULL);
    dswa_samel_backward_problem p;
    dswa_samel_norm_grads h;
    char what[96];

    refused("problem = NULL", NULL, bx, bdo, dx, &g, "^problem = NULL");
    refused("qkv = NULL", &base, NULL, bdo, dx, &g, "^qkv = NULL");
    refused("dout = NULL", &base, bx, NULL, dx, &g, "^dout = NULL");
    refused("dqkv = NULL", &base, bx, bdo, NULL, &g, "^dqkv = NULL");
    static const char *const gname[6] = {"q_norm.dalpha", "q_norm.dgamma", "q_norm.dbeta",
                                         "k_norm.dalpha", "k_norm.dgamma", "k_norm.dbeta"};
    for (int i = 0; i < 6; i++) {
        h = g;
        float **ptr[6] = {&h.q_norm.dalpha, &h.q_norm.dgamma, &h.q_norm.dbeta,
                          &h.k_norm.dalpha, &h.k_norm.dgamma, &h.k_norm.dbeta};
        *ptr[i] = NULL;
        snprintf(what, sizeof what, "%s = NULL", gname[i]);
        refused(what, &base, bx, bdo, dx, &h, what);
    }

    /* the forward's own checks, with the forward's messages */
    p = base; p.fwd.batch = -1;
    refused("fwd.batch = -1", &p, bx, bdo, dx, &g, "^batch = -1");
    p = base; p.fwd.lambda = NAN;
    refused("fwd.lambda = nan", &p, bx, bdo, dx, &g, "^lambda = nan");
    p = base; p.fwd.rot_dims = 3;
    refused("fwd.rot_dims = 3", &p, bx, bdo, dx, &g, "^rot_dims = 3");
    p = base; p.fwd.rope_base = 0.0f;
    refused("fwd.rope_base = 0", &p, bx, bdo, dx, &g, "^rope_base = 0");
    p = base; p.fwd.k_norm.alpha = INFINITY;
    refused("fwd.k_norm.alpha = inf", &p, bx, bdo, dx, &g, "^k_norm.alpha = inf");
    p = base; p.fwd.q_norm.gamma = NULL;
    refused("fwd.q_norm.gamma = NULL", &p, bx, bdo, dx, &g, "^q_norm.gamma = NULL");
    p = base; p.fwd.qkv.seq = -1;
    refused("fwd.qkv.seq = -1", &p, bx, bdo, dx, &g, "^qkv.seq = -1");
    p = base; p.fwd.qkv.seq = INT64_MAX / 8;
    refused("fwd.qkv.seq = INT64_MAX/8 (overflow)", &p, bx, bdo, dx, &g, "^qkv: strides");

    /* the backward's own layouts */
    p = base; p.dout.seq = -1;
    refused("dout.seq = -1", &p, bx, bdo, dx, &g, "^dout.seq = -1");
    p = base; p.dout.pair = -2;
    refused("dout.pair = -2", &p, bx, bdo, dx, &g, "^dout.pair = -2");
    p = base; p.dout.batch = INT64_MAX / 2;
    refused("dout.batch = INT64_MAX/2", &p, bx, bdo, dx, &g, "^dout: strides");
    p = base; p.dqkv.head = -2;
    refused("dqkv.head = -2", &p, bx, bdo, dx, &g, "^dqkv.head = -2");
    p = base; p.dqkv.chunk = INT64_MAX / 2;
    refused("dqkv.chunk = INT64_MAX/2", &p, bx, bdo, dx, &g, "^dqkv.chunk = ");
    p = base; p.dqkv.batch = INT64_MAX / 2;
    refused("dqkv.batch = INT64_MAX/2", &p, bx, bdo, dx, &g, "^dqkv: strides");
    p = base; p.dqkv.chunk = 0;
    refused("dqkv.chunk = 0 (chunks alias)", &p, bx, bdo, dx, &g, "^dqkv.chunk = 0");
    p = base; p.dqkv.seq = 20;   /* inside the span of chunk, head and dim: 39 */
    refused("dqkv.seq = 20 (positions alias)", &p, bx, bdo, dx, &g, "^dqkv.seq = 20");
    p = base; p.dout.seq = 0; p.dout.head = 0;
    accepted("dout broadcast (zero strides; control)", &p, dx, &g);

    /* gradients overlapping inputs or each other */
    refused("dqkv == qkv", &base, bx, bdo, bx, &g, "^dqkv: overlaps qkv");
    refused("dqkv inside dout", &base, bx, bdo, (float *)bdo + 3, &g, "^dqkv: overlaps dout");
    refused("dqkv from k_norm.beta[1]", &base, bx, bdo, bw + 3 * D + 1, &g, "^dqkv: overlaps k_norm.beta");
    h = g; h.q_norm.dgamma = bw;
    refused("q_norm.dgamma == q_norm.gamma", &base, bx, bdo, dx, &h, "^q_norm.dgamma: overlaps q_norm.gamma");
    h = g; h.k_norm.dalpha = (float *)bx + nx - 1;
    refused("k_norm.dalpha at qkv's last element", &base, bx, bdo, dx, &h, "^k_norm.dalpha: overlaps qkv");
    h = g; h.q_norm.dbeta = (float *)bdo;
    refused("q_norm.dbeta == dout", &base, bx, bdo, dx, &h, "^q_norm.dbeta: overlaps dout");
    h = g; h.k_norm.dalpha = dx + 5;
    refused("k_norm.dalpha inside dqkv", &base, bx, bdo, dx, &h, "^k_norm.dalpha: overlaps dqkv");
    h = g; h.k_norm.dbeta = h.q_norm.dbeta + 1;
    refused("k_norm.dbeta over q_norm.dbeta", &base, bx, bdo, dx, &h, "^k_norm.dbeta: overlaps q_norm.dbeta");
    h = g; h.q_norm.dgamma = h.q_norm.dalpha;
    refused("q_norm.dgamma at q_norm.dalpha", &base, bx, bdo, dx, &h, "^q_norm.dgamma: overlaps q_norm.dalpha");

    /* empty problems: valid, data pointers unchecked, norm gradients 0, dqkv untouched */
    p = base; p.fwd.batch = 0;
    tu_outbuf z = tu_outbuf_alloc(2 * (1 + 2 * D), DSWA_F32);
    const dswa_samel_norm_grads gz = grads_in(z.out, (int)D);
    CHECK(dswa_samel_backward_cpu(&p, NULL, NULL, NULL, &gz) == DSWA_OK, "batch = 0: %s", dswa_last_error());
    int zeros = 1;
    for (int64_t e = 0; e < 2 * (1 + 2 * D); e++) zeros &= ((float *)z.out)[e] == 0.0f;
    CHECK(zeros, "batch = 0: the norm gradients are not all 0");
    tu_outbuf_free(&z);
    p = base; p.fwd.seq_len = 0;
    CHECK(dswa_samel_backward_cpu(&p, bx, bdo, dx, NULL) == DSWA_OK && unchanged(),
          "seq_len = 0: %s", dswa_last_error());
    h = g; h.k_norm.dgamma = NULL;
    refused("seq_len = 0 and k_norm.dgamma = NULL", &p, bx, bdo, dx, &h, "^k_norm.dgamma = NULL");
    p.dqkv.dim = -1;
    refused("seq_len = 0 and dqkv.dim = -1", &p, bx, bdo, dx, &g, "^dqkv.dim = -1");

    /* the default problem */
    CHECK(!memcmp(&base.dqkv, &f.qkv, sizeof f.qkv) && !memcmp(&base.dout, &f.out, sizeof f.out),
          "dswa_samel_backward_problem_default: dqkv not like qkv or dout not like out");
    printf("  %d refusals, each through 2 entry points\n", nrefusals);
    for (int i = 0; i < 3; i++) free(in_copy[i]);
    tu_free(arena);
    tu_outbuf_free(&bg);
}

int main(void) {
    tu_rng_init(&rng, tu_test_seed());
    test_refusals();
    test_finite_differences();
    test_cases();
    test_determinism();
    TEST_MAIN_RETURN("test_samel_backward");
}
