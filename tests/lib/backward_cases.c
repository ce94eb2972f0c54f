/* The backward's cases (see backward_cases.h): every backend's gradients against the float64
   reference (dswa_reference_backward) on fresh random inputs, written into poisoned buffers with
   poisoned guards (every element of a gradient's view written, nothing else touched), with
   the reference's dlambda itself checked against -sum dout . A_1 from the forward's
   reference. Shared by tests/test_backward.c (CPU) and tests/test_cuda_backward.c (GPU). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "backward_cases.h"
#include "compare.h"
#include "testutil.h"

/* The backend under test and the inputs' generator, set by tu_backward_cases. */
static tu_backward_fn backward;
static const char *backend_name;
static tu_rng *rng;

/* A view's span in elements, at least 1 (what its buffer holds). */
static int64_t span1(const dswa_problem *p, const dswa_layout *l, int pairs) {
    const int64_t s = dswa_view_span(p, l, pairs);
    return s < 1 ? 1 : s;
}

/* Relative Frobenius tolerances per gradient. f32: plain fp32 arithmetic (errors about 1e-7
   are expected; the bound is the forward's). 16-bit: the gradients are rounded to the dtype
   (half a unit in the last place: 2^-11 f16, 2^-8 bf16, about 0.6 of that as an RMS),
   against a reference evaluated on the same 16-bit inputs. */
double tu_bwd_tol(dswa_dtype t, dswa_math math) {
    if (t == DSWA_F32) return tu_bwd_tf32_backend && math != DSWA_MATH_FP32 ? TU_BWD_TOL_TF32 : 1e-5;
    return t == DSWA_F16 ? 1e-3 : 3e-3;
}

double tu_bwd_tol_dlambda(dswa_dtype t, dswa_math math) {
    return t == DSWA_F32 && tu_bwd_tf32_backend && math != DSWA_MATH_FP32 ? TU_BWD_TOL_TF32 : 1e-6;
}

int tu_bwd_tf32_backend;
int tu_bwd_passes(void) { return tu_bwd_tf32_backend ? 4 : 3; }
void tu_bwd_pass(int t, dswa_dtype *dt, dswa_math *math) {
    *dt = t < 3 ? (dswa_dtype)t : DSWA_F32;
    *math = t < 3 ? DSWA_MATH_DEFAULT : DSWA_MATH_FP32;
}
const char *tu_bwd_label(dswa_dtype dt, dswa_math math) {
    return dt == DSWA_F32 && tu_bwd_tf32_backend && math == DSWA_MATH_FP32 ? "f32 fp32" : dswa_dtype_name(dt);
}
/* dlambda is a float summed in double: its error, against the natural scale of the sum
   (||dout|| * ||A_1||, the Cauchy-Schwarz bound of |dlambda|), is fp32 arithmetic's. */

/* An input buffer of n elements of fresh normals. */
void *tu_bwd_new_buf(tu_rng *r, int64_t n, dswa_dtype dt) {
    void *b = tu_alloc(n < 1 ? 1 : n, dt);
    tu_fill_normal(b, n < 1 ? 1 : n, dt, r, 1.0);
    return b;
}
static void *new_buf(int64_t n, dswa_dtype dt) { return tu_bwd_new_buf(rng, n, dt); }

int tu_bwd_dv_pairs(const dswa_backward_problem *bp) { return bp->dv.pair == 0 ? 1 : 2; }

/* ||view - ref||_F / ||ref||_F over a gradient view ([B][N][P][H][D] dense reference); 0 when
   they are equal (a gradient that is exactly 0, as with one key per window), INFINITY for a
   non-finite output. */
static double grad_err(const dswa_problem *p, const dswa_layout *l, int P, const void *buf,
                       const double *ref, double *ref_norm) {
    double d2 = 0, r2 = 0;
    int64_t bad = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int64_t pr = 0; pr < P; pr++)
                for (int64_t h = 0; h < p->heads; h++)
                    for (int64_t d = 0; d < p->head_dim; d++) {
                        const double o = tu_load(buf, tu_in_offset(l, b, i, pr, h, d), p->dtype);
                        const double r = ref[(((b * p->seq_len + i) * P + pr) * p->heads + h) * p->head_dim + d];
                        if (!isfinite(o)) bad++;
                        d2 += (o - r) * (o - r);
                        r2 += r * r;
                    }
    *ref_norm = sqrt(r2);
    if (bad) return INFINITY;
    return d2 == 0 ? 0 : r2 == 0 ? INFINITY : sqrt(d2 / r2);
}

/* -sum dout . A_1 from the forward's reference, and ||dout|| * ||A_1||: A_1 is the output of
   the problem whose both pairs read pair 1, with lambda 0. */
static void dlambda_from_forward(const dswa_backward_problem *bp, const void *q, const void *k,
                                 const void *v, const void *dout, double *dl, double *bound) {
    dswa_problem p1 = bp->fwd;
    const size_t es = tu_dtype_size(p1.dtype);
    const void *q1 = (const char *)q + p1.q.pair * (int64_t)es;
    const void *k1 = (const char *)k + p1.k.pair * (int64_t)es;
    const void *v1 = (const char *)v + p1.v.pair * (int64_t)es;
    p1.q.pair = p1.k.pair = p1.v.pair = 0;
    p1.lambda = 0.0f;
    const int64_t n = (int64_t)p1.batch * p1.seq_len * p1.heads * p1.head_dim;
    double *a1 = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!a1) abort();
    tu_reference(&p1, q1, k1, v1, a1);
    double s = 0, g2 = 0, a2 = 0;
    for (int64_t b = 0; b < p1.batch; b++)
        for (int64_t i = 0; i < p1.seq_len; i++)
            for (int64_t h = 0; h < p1.heads; h++)
                for (int64_t d = 0; d < p1.head_dim; d++) {
                    const double g = tu_load(dout, tu_out_offset(&bp->dout, b, i, h, d), p1.dtype);
                    const double a = a1[((b * p1.seq_len + i) * p1.heads + h) * p1.head_dim + d];
                    s -= g * a;
                    g2 += g * g;
                    a2 += a * a;
                }
    free(a1);
    *dl = s;
    *bound = sqrt(g2) * sqrt(a2);
}

/* ---- the cases ------------------------------------------------------------------------- */

/* Where the tensors live: each its own buffer, or q, k, v as chunks 0-2 of one packed
   [B, N, 5, H, D] buffer (pairs 3 chunks apart, V shared as SAME-L's), and likewise dq, dk,
   dv in one packed gradient buffer. */
typedef struct bcase {
    const char *name;
    dswa_backward_problem bp;
    int packed_in, packed_grad, want_dlambda;
} bcase;

dswa_layout tu_bwd_packed_layout(const dswa_problem *p) {
    const int64_t HD = (int64_t)p->heads * p->head_dim;
    const dswa_layout l = {(int64_t)p->seq_len * 5 * HD, 5 * HD, 3 * HD, p->head_dim, 1};
    return l;
}

static void run_case(bcase c) {
    dswa_backward_problem *bp = &c.bp;
    dswa_problem *p = &bp->fwd;
    const dswa_dtype dt = p->dtype;
    const char *dtn = tu_bwd_label(dt, p->math);
    const int64_t HD = (int64_t)p->heads * p->head_dim;
    const int64_t packed_span = (int64_t)p->batch * p->seq_len * 5 * HD;
    void *in = NULL, *q, *k, *v;
    if (c.packed_in) {
        p->q = p->k = p->v = tu_bwd_packed_layout(p);
        p->v.pair = 0;
        in = new_buf(packed_span, dt);
        q = in;
        k = (char *)in + HD * (int64_t)tu_dtype_size(dt);
        v = (char *)in + 2 * HD * (int64_t)tu_dtype_size(dt);
    } else {
        q = new_buf(dswa_view_span(p, &p->q, 2), dt);
        k = new_buf(dswa_view_span(p, &p->k, 2), dt);
        v = new_buf(dswa_view_span(p, &p->v, 2), dt);
    }
    void *dout = new_buf(dswa_view_span(p, &bp->dout, 1), dt);

    tu_outbuf o[3];
    int nbuf;
    tu_view views[3];
    void *g[3];
    if (c.packed_grad) {
        bp->dq = bp->dk = bp->dv = tu_bwd_packed_layout(p);
        bp->dv.pair = 0;
        o[0] = tu_outbuf_alloc(packed_span, dt);
        nbuf = 1;
        for (int t = 0; t < 3; t++) {
            g[t] = (char *)o[0].out + t * HD * (int64_t)tu_dtype_size(dt);
            views[t] = (tu_view){t == 0 ? &bp->dq : t == 1 ? &bp->dk : &bp->dv, 2, t * HD};
        }
    } else {
        const dswa_layout *gl[3] = {&bp->dq, &bp->dk, &bp->dv};
        nbuf = 3;
        for (int t = 0; t < 3; t++) {
            o[t] = tu_outbuf_alloc(dswa_view_span(p, gl[t], 2), dt);
            g[t] = o[t].out;
            views[t] = (tu_view){gl[t], 2, 0};
        }
    }
    float dl;
    tu_poison(&dl, 1, DSWA_F32);

    /* every byte the backend may read or write, for a backend that copies them elsewhere */
    tu_region reg[8];
    int nreg = 0;
    if (in) reg[nreg++] = (tu_region){in, (size_t)packed_span * tu_dtype_size(dt)};
    else {
        const void *const iv[3] = {q, k, v};
        const dswa_layout *const il[3] = {&p->q, &p->k, &p->v};
        for (int t = 0; t < 3; t++)
            reg[nreg++] = (tu_region){(void *)iv[t], (size_t)span1(p, il[t], 2) * tu_dtype_size(dt)};
    }
    reg[nreg++] = (tu_region){dout, (size_t)span1(p, &bp->dout, 1) * tu_dtype_size(dt)};
    for (int t = 0; t < nbuf; t++) reg[nreg++] = (tu_region){o[t].base, (size_t)o[t].total * tu_dtype_size(dt)};
    reg[nreg++] = (tu_region){&dl, sizeof dl};
    const dswa_status s = backward(bp, q, k, v, dout, g[0], g[1], g[2], c.want_dlambda ? &dl : NULL,
                                   reg, nreg);
    CHECK(s == DSWA_OK, "%s (%s, %s): status %d: %s", c.name, backend_name, dtn, (int)s,
          dswa_last_error());
    int64_t un = 0, cl = 0;
    for (int t = 0; t < nbuf; t++) {
        int64_t u1, c1;
        tu_outbuf_check_views(p, &o[t], c.packed_grad ? views : &views[t], c.packed_grad ? 3 : 1, &u1, &c1);
        un += u1;
        cl += c1;
    }
    CHECK(un == 0, "%s (%s): %lld gradient elements were not written", c.name, dtn, (long long)un);
    CHECK(cl == 0, "%s (%s): %lld elements outside the gradient views were modified", c.name,
          dtn, (long long)cl);
    CHECK(c.want_dlambda ? !tu_is_poison(&dl, 0, DSWA_F32) && isfinite(dl) : tu_is_poison(&dl, 0, DSWA_F32),
          "%s: dlambda %s", c.name, c.want_dlambda ? "not written" : "written though not asked for");

    const int64_t n = (int64_t)p->batch * p->seq_len * 2 * HD;
    double *ref[3], rdl = NAN;
    for (int t = 0; t < 3; t++) {
        ref[t] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        if (!ref[t]) abort();
    }
    const dswa_status rs = dswa_reference_backward(bp, q, k, v, dout, ref[0], ref[1], ref[2], &rdl);
    CHECK(rs == DSWA_OK, "%s: reference: %s", c.name, dswa_last_error());
    static const char *const gn[3] = {"dq", "dk", "dv"};
    double err[3], norm[3];
    for (int t = 0; t < 3; t++) {
        err[t] = grad_err(p, views[t].l, t == 2 ? tu_bwd_dv_pairs(bp) : 2, g[t], ref[t], &norm[t]);
        CHECK(err[t] <= tu_bwd_tol(dt, p->math), "%s (%s): %s relative error %.3e > %.0e", c.name,
              dtn, gn[t], err[t], tu_bwd_tol(dt, p->math));
    }
    /* dv is never 0 (P > 0); dq and dk are exactly 0 only with one key per window */
    CHECK(norm[2] > 0, "%s: the reference dv is 0: the comparison would be vacuous", c.name);
    double fdl, bound;
    dlambda_from_forward(bp, q, k, v, dout, &fdl, &bound);
    CHECK(fabs(rdl - fdl) <= 1e-12 * bound, "%s: the reference's dlambda %.17g != -sum dout.A_1 "
          "from the forward's reference %.17g", c.name, rdl, fdl);
    const double dl_err = c.want_dlambda ? fabs((double)dl - rdl) / bound : 0;
    if (c.want_dlambda)
        CHECK(dl_err <= tu_bwd_tol_dlambda(dt, p->math), "%s (%s): dlambda %.9g, reference %.9g: error %.2e of the "
              "bound %.3g", c.name, dtn, (double)dl, rdl, dl_err, bound);
    printf("  %-40s %-4s B=%d N=%d H=%d D=%d W=%d/%d  dq %.1e dk %.1e dv %.1e", c.name,
           dtn, p->batch, p->seq_len, p->heads, p->head_dim, p->window_left,
           p->window_right, err[0], err[1], err[2]);
    if (c.want_dlambda) printf(" dlambda %.1e", dl_err);
    printf("\n");

    for (int t = 0; t < 3; t++) free(ref[t]);
    for (int t = 0; t < nbuf; t++) tu_outbuf_free(&o[t]);
    if (in) tu_free(in);
    else { tu_free(q); tu_free(k); tu_free(v); }
    tu_free(dout);
}

static dswa_math pass_math;   /* the pass's math (tu_bwd_pass), for make */

static bcase make(const char *name, int B, int N, int H, int D, int wl, int wr, dswa_dtype dt) {
    dswa_problem f = dswa_problem_default(B, N, H, D, wl);
    f.window_right = wr;
    f.dtype = dt;
    f.math = pass_math;
    f.lambda = 0.6f;
    bcase c = {name, dswa_backward_problem_default(&f), 0, 0, 1};
    return c;
}

void tu_backward_case(tu_backward_fn run, const char *name, tu_rng *r, const char *what,
                      const dswa_backward_problem *bp, int packed) {
    backward = run;
    backend_name = name;
    rng = r;
    bcase c = {what, *bp, packed, packed, 1};
    run_case(c);
}

int tu_backward_cases(tu_backward_fn run, const char *name, tu_rng *r) {
    backward = run;
    backend_name = name;
    rng = r;
    const int failures = tu_failures;
    printf("%s backward against the float64 reference\n", name);
    for (int t = 0; t < tu_bwd_passes(); t++) {
        dswa_dtype dt;
        tu_bwd_pass(t, &dt, &pass_math);
        bcase c = make("B=2, odd N=37, asymmetric 5/9", 2, 37, 3, 32, 5, 9, dt);
        run_case(c);
        c.want_dlambda = 0;
        c.name = "the same, dlambda NULL";
        run_case(c);
        run_case(make("window 9/0", 2, 29, 2, 16, 9, 0, dt));
        run_case(make("window 0/4", 1, 29, 2, 16, 0, 4, dt));
        run_case(make("window 0/0", 2, 11, 2, 16, 0, 0, dt));
        run_case(make("N=7 < window 17", 2, 7, 2, 16, 17, 17, dt));
        run_case(make("N=1", 3, 1, 2, 16, 17, 17, dt));
        run_case(make("full window (INT32_MAX), N=45", 1, 45, 2, 16, INT32_MAX, INT32_MAX, dt));
        run_case(make("head_dim 1", 2, 20, 2, 1, 3, 3, dt));
        run_case(make("head_dim 13", 2, 20, 2, 13, 3, 3, dt));
        run_case(make("N=150 (several row blocks), 17/17", 1, 150, 2, 32, 17, 17, dt));
        /* the tensor-core family's shape on the GPU (head_dim 64, window_left + window_right
           <= 48): block tails, one-sided and asymmetric windows, both V forms */
        run_case(make("band: D=64, B=2, N=77, 30/18", 2, 77, 2, 64, 30, 18, dt));
        c = make("band: D=64, N=45, 0/48, shared V, lambda -1.5", 1, 45, 3, 64, 0, 48, dt);
        c.bp.fwd.lambda = -1.5f;
        c.bp.fwd.v = c.bp.dv = tu_layout_order(&c.bp.fwd, "bnhd", 0);
        run_case(c);
        static const struct { float lambda, scale; const char *name; } sc[] = {
            {1.0f, 0.125f, "lambda 1"}, {0.0f, 0.125f, "lambda 0"}, {-1.5f, 0.3f, "lambda -1.5, scale 0.3"},
            {0.37f, -0.7f, "lambda 0.37, scale -0.7"}, {2.0f, 0.0f, "scale 0 (uniform weights)"},
        };
        for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
            c = make(sc[i].name, 2, 23, 2, 16, 4, 6, dt);
            c.bp.fwd.lambda = sc[i].lambda;
            c.bp.fwd.scale = sc[i].scale;
            run_case(c);
        }
        c = make("math tf32 (CPU: fp32 all the same)", 1, 23, 2, 16, 4, 6, dt);
        c.bp.fwd.math = DSWA_MATH_TF32;
        run_case(c);

        /* V: shared (an H-head buffer; dv summed), shared in a 2H buffer with dv per pair,
           2H with dv summed (the gradient of one V fed to both pairs) */
        c = make("shared V (H heads), dv summed", 2, 31, 3, 16, 5, 5, dt);
        c.bp.fwd.v = c.bp.dv = tu_layout_order(&c.bp.fwd, "bnhd", 0);
        run_case(c);
        c = make("v.pair = 0 in 2H, dv per pair", 2, 31, 3, 16, 5, 5, dt);
        c.bp.fwd.v.pair = 0;
        run_case(c);
        c = make("2H V, dv.pair = 0 (summed)", 2, 31, 3, 16, 5, 5, dt);
        c.bp.dv = tu_layout_order(&c.bp.fwd, "bnhd", 0);
        run_case(c);

        /* SAME-L: packed projection in, packed gradient buffer out */
        c = make("SAME-L packed in and out", 1, 100, 24, 64, 17, 17, dt);
        c.bp.fwd.scale = 0.125f;
        c.bp.fwd.lambda = 1.0f;
        c.packed_in = c.packed_grad = 1;
        run_case(c);
        c = make("packed in and out, B=2", 2, 33, 3, 16, 6, 2, dt);
        c.packed_in = c.packed_grad = 1;
        run_case(c);

        /* strided and permuted layouts, each tensor its own, gaps everywhere */
        static const struct { const char *q, *k, *v, *o, *gq, *gk, *gv; int64_t pad; const char *name; } L[] = {
            {"bphnd", "bphnd", "bphnd", "bhnd", "bnphd", "bnphd", "bnphd", 0, "head-major in, contiguous grads"},
            {"bnphd", "bnphd", "bnphd", "nbhd", "bhpnd", "nbphd", "pbnhd", 3, "padded, mixed grads"},
            {"bndph", "bdnph", "dbnph", "bdnh", "dbnph", "bndph", "bnhd", 1, "dim not innermost, dv summed"},
        };
        for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
            c = make(L[i].name, 2, 19, 3, 8, 4, 3, dt);
            dswa_problem *f = &c.bp.fwd;
            f->q = tu_layout_order(f, L[i].q, L[i].pad);
            f->k = tu_layout_order(f, L[i].k, L[i].pad);
            f->v = tu_layout_order(f, L[i].v, L[i].pad);
            c.bp.dout = tu_layout_order(f, L[i].o, L[i].pad);
            c.bp.dq = tu_layout_order(f, L[i].gq, L[i].pad);
            c.bp.dk = tu_layout_order(f, L[i].gk, L[i].pad);
            c.bp.dv = tu_layout_order(f, L[i].gv, L[i].pad);
            run_case(c);
        }
        c = make("dout broadcast (dout.seq = 0)", 2, 19, 2, 8, 4, 3, dt);
        c.bp.dout.seq = 0;
        run_case(c);
    }
    pass_math = DSWA_MATH_DEFAULT;
    return tu_failures - failures;
}
