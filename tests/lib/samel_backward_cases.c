/* The fused SAME-L block's backward cases (samel_backward_cases.h): a backend's dqkv and norm
   gradients against the float64 reference (tu_samel_ref64_backward) on fresh random inputs,
   written into poisoned buffers with poisoned guards (every element of dqkv's view written,
   nothing else touched; the norm gradients written exactly when asked for). Shared by
   tests/test_samel_backward.c (CPU) and tests/test_cuda_samel_backward.c (GPU). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "samel_backward_cases.h"
#include "samel_ref64.h"
#include "testutil.h"

/* The backend under test and the inputs' generator, set by the entry points below. */
static tu_samel_backward_fn backward;
static const char *backend_name;
static tu_rng *rng;

/* Tolerances per tensor, the op's (tu_bwd_tol): relative Frobenius error for each chunk of dqkv;
   for the norms' dalpha, dgamma and dbeta, the error against the root sum of squares of each
   sum's terms (norm_err). f32: fp32 arithmetic against float64 (about 2e-7 measured, as the
   op's backward alone; on TF32 about 1e-3, as the op's). 16-bit: dqkv is rounded to the dtype once (half a unit in the last place: 2^-11 f16,
   2^-8 bf16; about 2e-4 and 1.7e-3 measured); and the backend's fp32 DyT and RoPE put a few r
   elements on the other side of a rounding boundary than the reference's float64 ones (as in
   the forward's test), each such element off by a unit, which moves the gradients of its
   whole window: the norms' gradients, fp32 sums of fp32 terms, are otherwise as accurate as
   f32's, but one such element can cost them some 5e-4 (bf16). */

/* ---- layouts and buffers ---------------------------------------------------------------- */

/* The packed view whose dimensions nest in `order` (letters b, n, c (chunk), h, d, outermost
   first), every stride but the innermost padded by pad elements. "bnchd", 0: contiguous. */
dswa_samel_layout tu_sbwd_packed_order(const dswa_samel_problem *p, const char *order, int64_t pad) {
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

int64_t tu_sbwd_packed_elems(const dswa_samel_problem *p, const dswa_samel_layout *l) {
    return packed_at(l, p->batch - 1, p->seq_len - 1, 4, p->heads - 1, p->head_dim - 1) + 1;
}

/* The op's problem with the block's sizes, dtype and dout as its out: what the tests' output
   helpers (tu_span, tu_out_offset) read. */
dswa_problem tu_sbwd_dout_view(const dswa_samel_backward_problem *bp) {
    const dswa_samel_problem *p = &bp->fwd;
    dswa_problem d = dswa_problem_default(p->batch, p->seq_len, p->heads, p->head_dim, 0);
    d.dtype = p->dtype;
    d.out = bp->dout;
    return d;
}

static void *new_buf(int64_t n, dswa_dtype dt) { return tu_bwd_new_buf(rng, n, dt); }

/* Norm weights: gamma around 1.5, beta around 0 (scores spread over a few units: a flat
   softmax would hide errors), in one array [q gamma, q beta, k gamma, k beta]. */
float *tu_sbwd_norms_new(tu_rng *r, dswa_samel_problem *p) {
    const int D = p->head_dim;
    float *w = malloc(sizeof(float) * 4 * (size_t)D);
    if (!w) abort();
    for (int e = 0; e < 4 * D; e++)
        w[e] = (float)((e / D) % 2 ? 0.3 * tu_rng_normal(r) : 1.5 + 0.5 * tu_rng_normal(r));
    p->q_norm.gamma = w; p->q_norm.beta = w + D;
    p->k_norm.gamma = w + 2 * D; p->k_norm.beta = w + 3 * D;
    return w;
}

/* g pointing into a buffer of 2 * (1 + 2D) floats: per norm dalpha, dgamma[D], dbeta[D] (the
   reference's order). */
dswa_samel_norm_grads tu_sbwd_grads_in(float *buf, int D) {
    dswa_samel_norm_grads g;
    g.q_norm = (dswa_samel_norm_grad){buf, buf + 1, buf + 1 + D};
    buf += 1 + 2 * D;
    g.k_norm = (dswa_samel_norm_grad){buf, buf + 1, buf + 1 + D};
    return g;
}

/* ---- against the reference --------------------------------------------------------------- */


static dswa_math pass_math;   /* the pass's math (tu_bwd_pass), for tu_sbwd_make */

tu_sbwd_case tu_sbwd_make(tu_rng *r, const char *name, int B, int N, int H, int D, int wl,
                          int wr, int rot, dswa_dtype dt) {
    tu_sbwd_case c;
    memset(&c, 0, sizeof c);
    dswa_samel_problem p = dswa_samel_problem_default(B, N, H);
    p.head_dim = D;
    p.qkv = tu_sbwd_packed_order(&p, "bnchd", 0);
    p.out = (dswa_layout){(int64_t)N * H * D, (int64_t)H * D, 0, D, 1};
    p.window_left = wl;
    p.window_right = wr;
    p.rot_dims = rot;
    p.pos_offset = 5;
    p.scale = (float)(1.0 / sqrt((double)D));
    p.lambda = 0.6f;
    p.dtype = dt;
    p.math = pass_math;
    p.q_norm.alpha = (float)(0.5 + tu_rng_uniform(r));
    p.k_norm.alpha = -(float)(0.5 + tu_rng_uniform(r));   /* a negative alpha */
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

static void run_case(tu_sbwd_case c) {
    dswa_samel_backward_problem *bp = &c.bp;
    dswa_samel_problem *p = &bp->fwd;
    const dswa_dtype dt = p->dtype;
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim;
    const char *dtn = tu_bwd_label(dt, c.bp.fwd.math);

    int64_t x_origin = 0;
    if (c.x_slice) {
        const dswa_samel_layout l = {N * 7 * H * D, 7 * H * D, H * D, D, 1};
        p->qkv = l;
        x_origin = H * D;
    } else {
        p->qkv = tu_sbwd_packed_order(p, c.x_order, c.x_pad);
    }
    bp->dqkv = tu_sbwd_packed_order(p, c.dx_order, c.dx_pad);
    bp->dout = p->out;
    if (c.dout_pad) {
        bp->dout.seq += 3;
        bp->dout.batch = N * bp->dout.seq;
    }
    void *xbuf = new_buf(x_origin + tu_sbwd_packed_elems(p, &p->qkv), dt);
    const void *x = (const char *)xbuf + x_origin * (int64_t)tu_dtype_size(dt);
    const dswa_problem ov = tu_sbwd_dout_view(bp);
    void *dout = new_buf(tu_span(&ov, &bp->dout, 1), dt);
    float *w = tu_sbwd_norms_new(rng, p);
    tu_outbuf o = tu_outbuf_alloc(tu_sbwd_packed_elems(p, &bp->dqkv), dt);
    tu_outbuf go = tu_outbuf_alloc(2 * (1 + 2 * D), DSWA_F32);
    const dswa_samel_norm_grads g = tu_sbwd_grads_in(go.out, (int)D);

    /* every byte the backend may read or write, for a backend that copies them elsewhere */
    const size_t es = tu_dtype_size(dt);
    const tu_region reg[5] = {
        {xbuf, (size_t)(x_origin + tu_sbwd_packed_elems(p, &p->qkv)) * es},
        {dout, (size_t)tu_span(&ov, &bp->dout, 1) * es},
        {w, 4 * (size_t)D * sizeof(float)},
        {o.base, (size_t)o.total * es},
        {go.base, (size_t)go.total * sizeof(float)},
    };
    const dswa_status s = backward(bp, x, dout, o.out, c.with_g ? &g : NULL, reg, 5);
    CHECK(s == DSWA_OK, "%s (%s, %s): status %d: %s", c.name, backend_name, dtn, (int)s,
          dswa_last_error());
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
        CHECK(err[ch] <= tu_bwd_tol(dt, c.bp.fwd.math), "%s (%s): d%s relative error %.3e > %.0e", c.name, dtn,
              cn[ch], err[ch], tu_bwd_tol(dt, c.bp.fwd.math));
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
            CHECK(e <= tu_bwd_tol(dt, c.bp.fwd.math), "%s (%s): %s.%s error %.3e > %.0e (of its terms' scale)",
                  c.name, dtn, nn_name, part[k], e, tu_bwd_tol(dt, c.bp.fwd.math));
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

void tu_sbwd_run(tu_samel_backward_fn run, const char *name, tu_rng *r, tu_sbwd_case c) {
    backward = run;
    backend_name = name;
    rng = r;
    run_case(c);
}

int tu_samel_backward_cases(tu_samel_backward_fn run, const char *name, tu_rng *r) {
    backward = run;
    backend_name = name;
    rng = r;
    const int failures = tu_failures;
    printf("%s backward against the float64 reference\n", name);
    for (int t = 0; t < tu_bwd_passes(); t++) {
        dswa_dtype dt;
        tu_bwd_pass(t, &dt, &pass_math);
        run_case(tu_sbwd_make(rng, "B=2, odd N=37, windows 5/9, rot 16", 2, 37, 2, 32, 5, 9, 16, dt));
        tu_sbwd_case c = tu_sbwd_make(rng, "the same, g NULL", 2, 37, 2, 32, 5, 9, 16, dt);
        c.with_g = 0;
        run_case(c);
        run_case(tu_sbwd_make(rng, "rot_dims 0 (no RoPE)", 2, 23, 2, 32, 4, 2, 0, dt));
        run_case(tu_sbwd_make(rng, "rot_dims 32 of 64, SAME-L's window 17/17", 1, 60, 2, 64, 17, 17, 32, dt));
        run_case(tu_sbwd_make(rng, "rot_dims 64 of 64", 2, 21, 1, 64, 3, 6, 64, dt));
        run_case(tu_sbwd_make(rng, "N=7 < window 17", 2, 7, 2, 16, 17, 17, 8, dt));
        run_case(tu_sbwd_make(rng, "N=1", 3, 1, 2, 16, 17, 17, 8, dt));
        run_case(tu_sbwd_make(rng, "N=100 (several tasks), windows 0/11", 1, 100, 2, 16, 0, 11, 16, dt));
        c = tu_sbwd_make(rng, "q_norm alpha 0, k_norm alpha -2", 2, 19, 2, 16, 3, 3, 8, dt);
        c.bp.fwd.q_norm.alpha = 0.0f;
        c.bp.fwd.k_norm.alpha = -2.0f;
        run_case(c);
        c = tu_sbwd_make(rng, "pos_offset 100000, base 500", 1, 29, 2, 32, 4, 4, 32, dt);
        c.bp.fwd.pos_offset = 100000;
        c.bp.fwd.rope_base = 500.0f;
        run_case(c);
        /* the model's own frequencies (fresh random ones, any sign): RoPE's transpose uses them */
        static float own[32];
        for (int j = 0; j < 32; j++) own[j] = (float)(tu_rng_normal(rng) * 0.7);
        c = tu_sbwd_make(rng, "rope_freq random, pos_offset 40, base NaN (unread)", 2, 31, 2, 64, 17, 17, 64, dt);
        c.bp.fwd.pos_offset = 40;
        c.bp.fwd.rope_freq = own;
        c.bp.fwd.rope_base = NAN;
        run_case(c);
        c = tu_sbwd_make(rng, "lambda 1, scale 1/8 (SAME-L's)", 2, 25, 3, 64, 17, 17, 32, dt);
        c.bp.fwd.lambda = 1.0f;
        c.bp.fwd.scale = 0.125f;
        run_case(c);
        c = tu_sbwd_make(rng, "x a slice of (B, N, 7HD), dqkv padded", 2, 17, 2, 16, 4, 2, 8, dt);
        c.x_slice = 1;
        c.dx_pad = 3;
        c.dout_pad = 1;
        run_case(c);
        /* the 16-byte-vector passes off the packed layout: strides padded by whole vectors */
        c = tu_sbwd_make(rng, "x head-major, dqkv padded by 8, rot 16 of 64", 2, 45, 2, 64, 17, 17, 16, dt);
        c.x_order = "bhcnd";
        c.x_pad = 8;
        c.dx_pad = 8;
        run_case(c);
        c = tu_sbwd_make(rng, "x head-major padded, dqkv dim-outer", 2, 13, 3, 8, 2, 5, 4, dt);
        c.x_order = "bhcnd";
        c.x_pad = 2;
        c.dx_order = "dbnch";
        c.dx_pad = 1;
        run_case(c);
    }
    pass_math = DSWA_MATH_DEFAULT;
    return tu_failures - failures;
}
