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
#include "samel_backward_cases.h"
#include "samel_ref64.h"
#include "testutil.h"

static tu_rng rng;

static void *new_buf(int64_t n, dswa_dtype dt) { return tu_bwd_new_buf(&rng, n, dt); }

/* Every other call reads the alphas from memory (dswa_samel_norm.alpha_at; the problem's floats
   NaN, so they must not be read): both ways through every case. */
static dswa_status cpu_backward(const dswa_samel_backward_problem *p, const void *qkv,
                                const void *dout, void *dqkv, const dswa_samel_norm_grads *g,
                                const tu_region *r, int n) {
    static int calls;
    if (calls++ % 2 == 0 || !isfinite(p->fwd.q_norm.alpha) || !isfinite(p->fwd.k_norm.alpha))
        return dswa_samel_backward_cpu(p, qkv, dout, dqkv, g);
    const float alphas[2] = {p->fwd.q_norm.alpha, p->fwd.k_norm.alpha};
    dswa_samel_backward_problem a = *p;
    a.fwd.q_norm.alpha = a.fwd.k_norm.alpha = NAN;
    a.fwd.q_norm.alpha_at = &alphas[0];
    a.fwd.k_norm.alpha_at = &alphas[1];
    return dswa_samel_backward_cpu(&a, qkv, dout, dqkv, g);
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
    p.qkv = tu_sbwd_packed_order(&p, "bnchd", 0);
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
    float *w = tu_sbwd_norms_new(&rng, &bp.fwd);
    const int64_t nx = tu_sbwd_packed_elems(&p, &p.qkv), D = p.head_dim;
    float *x = new_buf(nx, DSWA_F32);
    const dswa_problem ov = tu_sbwd_dout_view(&bp);
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
        tu_sbwd_case c = tu_sbwd_make(&rng, "determinism", 2, 100, 3, 64, 17, 11, 32, (dswa_dtype)t);
        dswa_samel_backward_problem *bp = &c.bp;
        dswa_samel_problem *p = &bp->fwd;
        bp->dqkv = p->qkv;
        bp->dout = p->out;
        void *x = new_buf(tu_sbwd_packed_elems(p, &p->qkv), p->dtype);
        const dswa_problem ov = tu_sbwd_dout_view(bp);
        void *dout = new_buf(tu_span(&ov, &bp->dout, 1), p->dtype);
        float *w = tu_sbwd_norms_new(&rng, p);
        const int saved = omp_get_max_threads(), threads[2] = {1, 3};
        tu_outbuf o[2], go[2];
        for (int r = 0; r < 2; r++) {
            o[r] = tu_outbuf_alloc(tu_sbwd_packed_elems(p, &bp->dqkv), p->dtype);
            go[r] = tu_outbuf_alloc(2 * (1 + 2 * p->head_dim), DSWA_F32);
            const dswa_samel_norm_grads g = tu_sbwd_grads_in(go[r].out, p->head_dim);
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
    f.qkv = tu_sbwd_packed_order(&f, "bnchd", 0);
    f.out = (dswa_layout){6 * 2 * 4, 2 * 4, 0, 4, 1};
    f.rot_dims = 2;
    f.window_left = f.window_right = 2;
    const int64_t nx = tu_sbwd_packed_elems(&f, &f.qkv), D = f.head_dim;
    /* the inputs in one arena, each followed by a gap of nx floats, so that a dqkv placed at
       one of them overlaps that one only */
    const dswa_samel_backward_problem fb = dswa_samel_backward_problem_default(&f);
    const dswa_problem ov = tu_sbwd_dout_view(&fb);
    const int64_t nd = tu_span(&ov, &f.out, 1);
    arena = new_buf(4 * nx + nd + 4 * D, DSWA_F32);
    bx = arena;
    bdo = arena + 2 * nx;
    bw = arena + 3 * nx + nd;
    float *w = tu_sbwd_norms_new(&rng, &f);
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
    const dswa_samel_norm_grads g = tu_sbwd_grads_in(dx + nx, (int)D);
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
    const dswa_samel_norm_grads gz = tu_sbwd_grads_in(z.out, (int)D);
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
    tu_samel_backward_cases(cpu_backward, "CPU", &rng);
    test_determinism();
    TEST_MAIN_RETURN("test_samel_backward");
}
