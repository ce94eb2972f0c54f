/* The backward: dswa_backward_cpu against the float64 reference (dswa_reference_backward)
   through the shared cases of tests/lib/backward_cases.c, on fresh random inputs (the seed is
   printed; DSWA_TEST_SEED=N repeats a run); the reference itself against central differences
   of the forward's float64 reference (dswa_reference_rows), so that both cannot share a sign
   error; bitwise determinism across thread counts; and every refusal of
   dswa_validate_backward, through it and dswa_backward_cpu, with a message naming the field
   and no byte of any buffer changed. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "backward_cases.h"
#include "compare.h"
#include "testutil.h"

static tu_rng rng;

static void *new_buf(int64_t n, dswa_dtype dt) { return tu_bwd_new_buf(&rng, n, dt); }

static dswa_status cpu_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                const void *v, const void *dout, void *dq, void *dk, void *dv,
                                float *dlambda, const tu_region *r, int n) {
    return dswa_backward_cpu(p, q, k, v, dout, dq, dk, dv, dlambda);
}

/* ---- the reference against central differences ---------------------------------------- */

/* L = sum dout . out, out from the forward's float64 reference. */
static double loss(const dswa_problem *p, const void *q, const void *k, const void *v,
                   const void *dout, const dswa_layout *dl, double *scratch) {
    tu_reference(p, q, k, v, scratch);
    double s = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int64_t h = 0; h < p->heads; h++)
                for (int64_t d = 0; d < p->head_dim; d++)
                    s += tu_load(dout, tu_out_offset(dl, b, i, h, d), p->dtype) *
                         scratch[((b * p->seq_len + i) * p->heads + h) * p->head_dim + d];
    return s;
}

/* dL/dx at element e of buf by central differences: x +- 2^-12 rounded to f32, divided by the
   step actually taken. Truncation error ~ step^2 * L''' ~ 1e-7 here; rounding ~ 1e-16 / step. */
static double central(const dswa_backward_problem *bp, void *q, void *k, void *v,
                      const void *dout, void *buf, int64_t e, double *scratch) {
    const dswa_problem *p = &bp->fwd;
    const double x0 = tu_load(buf, e, DSWA_F32);
    const double xp = (float)(x0 + 0x1p-12), xm = (float)(x0 - 0x1p-12);
    tu_store(buf, e, DSWA_F32, xp);
    const double lp = loss(p, q, k, v, dout, &bp->dout, scratch);
    tu_store(buf, e, DSWA_F32, xm);
    const double lm = loss(p, q, k, v, dout, &bp->dout, scratch);
    tu_store(buf, e, DSWA_F32, x0);
    return (lp - lm) / (xp - xm);
}

static void fd_case(const char *name, int shared_v) {
    dswa_problem f = dswa_problem_default(2, 7, 2, 3, 2);
    f.window_right = 1;
    f.scale = 0.9f;     /* far from uniform weights */
    f.lambda = 0.7f;
    if (shared_v) f.v = tu_layout_order(&f, "bnhd", 0);
    dswa_backward_problem bp = dswa_backward_problem_default(&f);
    void *q = new_buf(dswa_view_span(&f, &f.q, 2), DSWA_F32);
    void *k = new_buf(dswa_view_span(&f, &f.k, 2), DSWA_F32);
    void *v = new_buf(dswa_view_span(&f, &f.v, 2), DSWA_F32);
    void *dout = new_buf(dswa_view_span(&f, &bp.dout, 1), DSWA_F32);
    const int64_t n = (int64_t)f.batch * f.seq_len * 2 * f.heads * f.head_dim;
    double *rq = malloc(sizeof(double) * n), *rk = malloc(sizeof(double) * n);
    double *rv = malloc(sizeof(double) * n), *scratch = malloc(sizeof(double) * n);
    double rdl;
    if (!rq || !rk || !rv || !scratch) abort();
    CHECK(dswa_reference_backward(&bp, q, k, v, dout, rq, rk, rv, &rdl) == DSWA_OK, "%s: %s",
          name, dswa_last_error());
    const int P = tu_bwd_dv_pairs(&bp);
    double worst = 0, gmax = 0;
    int64_t compared = 0;
    for (int t = 0; t < 3; t++) {
        void *buf = t == 0 ? q : t == 1 ? k : v;
        const dswa_layout *l = t == 0 ? &f.q : t == 1 ? &f.k : &f.v;
        const double *ref = t == 0 ? rq : t == 1 ? rk : rv;
        const int pairs = t == 2 ? P : 2;   /* a shared V's element is both pairs' */
        for (int64_t b = 0; b < f.batch; b++)
            for (int64_t i = 0; i < f.seq_len; i++)
                for (int64_t pr = 0; pr < pairs; pr++)
                    for (int64_t h = 0; h < f.heads; h++)
                        for (int64_t d = 0; d < f.head_dim; d++) {
                            const double fd = central(&bp, q, k, v, dout, buf,
                                                      tu_in_offset(l, b, i, pr, h, d), scratch);
                            const double g = ref[(((b * f.seq_len + i) * pairs + pr) * f.heads + h) * f.head_dim + d];
                            if (fabs(fd - g) > worst) worst = fabs(fd - g);
                            if (fabs(g) > gmax) gmax = fabs(g);
                            compared++;
                        }
    }
    /* lambda: L is linear in it, so the difference is exact up to rounding */
    dswa_problem fl = f;
    fl.lambda = f.lambda + 0x1p-12f;
    const double lp = loss(&fl, q, k, v, dout, &bp.dout, scratch);
    fl.lambda = f.lambda - 0x1p-12f;
    const double lm = loss(&fl, q, k, v, dout, &bp.dout, scratch);
    const double fdl = (lp - lm) / (2 * 0x1p-12);
    CHECK(compared == 3 * n - (shared_v ? n / 2 : 0), "%s: %lld elements compared", name, (long long)compared);
    CHECK(gmax > 0.1, "%s: gradients too small (max %.3g) for the check to mean anything", name, gmax);
    CHECK(worst <= 1e-6 * gmax, "%s: the reference differs from central differences by %.3e "
          "(largest gradient %.3g)", name, worst, gmax);
    CHECK(fabs(fdl - rdl) <= 1e-9 * (1 + fabs(rdl)), "%s: dlambda %.12g, central difference %.12g",
          name, rdl, fdl);
    printf("  %-40s %lld elements, max |fd - ref| %.2e of max |grad| %.3g; dlambda %.3e off\n",
           name, (long long)compared, worst, gmax, fabs(fdl - rdl));
    free(rq); free(rk); free(rv); free(scratch);
    tu_free(q); tu_free(k); tu_free(v); tu_free(dout);
}

static void test_finite_differences(void) {
    printf("the reference against central differences of the forward reference\n");
    fd_case("2H V, dv per pair", 0);
    fd_case("shared V (H heads), dv summed", 1);
}

/* ---- determinism ------------------------------------------------------------------------ */

static void test_determinism(void) {
    printf("determinism across thread counts\n");
    const int threads[4] = {1, 2, 5, 3};
    for (int t = 0; t < 3; t += 2) {   /* f32 and bf16 */
        dswa_problem f = dswa_problem_default(2, 203, 3, 40, 17);
        f.window_right = 11;
        f.dtype = (dswa_dtype)t;
        f.lambda = 0.6f;
        f.v = tu_layout_order(&f, "bnhd", 0);
        dswa_backward_problem bp = dswa_backward_problem_default(&f);
        void *q = new_buf(dswa_view_span(&f, &f.q, 2), f.dtype);
        void *k = new_buf(dswa_view_span(&f, &f.k, 2), f.dtype);
        void *v = new_buf(dswa_view_span(&f, &f.v, 2), f.dtype);
        void *dout = new_buf(dswa_view_span(&f, &bp.dout, 1), f.dtype);
        tu_outbuf first[3];
        float dl0 = 0;
        const int saved = omp_get_max_threads();
        for (int r = 0; r < 4; r++) {
            tu_outbuf o[3];
            const dswa_layout *gl[3] = {&bp.dq, &bp.dk, &bp.dv};
            for (int g = 0; g < 3; g++) o[g] = tu_outbuf_alloc(dswa_view_span(&f, gl[g], 2), f.dtype);
            float dl;
            omp_set_num_threads(threads[r]);
            CHECK(dswa_backward_cpu(&bp, q, k, v, dout, o[0].out, o[1].out, o[2].out, &dl) == DSWA_OK,
                  "determinism run %d: %s", r, dswa_last_error());
            if (r == 0) {
                for (int g = 0; g < 3; g++) first[g] = o[g];
                dl0 = dl;
                continue;
            }
            int same = memcmp(&dl, &dl0, sizeof dl) == 0;
            for (int g = 0; g < 3; g++) {
                same = same && memcmp(o[g].base, first[g].base, (size_t)o[g].total * tu_dtype_size(f.dtype)) == 0;
                tu_outbuf_free(&o[g]);
            }
            CHECK(same, "%s: %d threads give other bits than 1 thread", dswa_dtype_name(f.dtype), threads[r]);
        }
        omp_set_num_threads(saved);
        printf("  %-4s 1, 2, 5 and 3 threads: %s\n", dswa_dtype_name(f.dtype),
               tu_failures ? "see above" : "bitwise equal");
        for (int g = 0; g < 3; g++) tu_outbuf_free(&first[g]);
        tu_free(q); tu_free(k); tu_free(v); tu_free(dout);
    }
}

/* ---- refusals ---------------------------------------------------------------------------- */

#define B_ 2
#define N_ 6
#define H_ 2
#define D_ 4
static dswa_backward_problem base;
static void *bq, *bk, *bv, *bdo;          /* inputs */
static tu_outbuf bg;                       /* one poisoned buffer for dq, dk, dv, dlambda */
static void *gq, *gk, *gv;
static float *gl;
static void *in_copy[4];
static size_t in_bytes;
static int nrefusals = 0;

static int unchanged(void) {
    const void *in[4] = {bq, bk, bv, bdo};
    for (int i = 0; i < 4; i++)
        if (memcmp(in[i], in_copy[i], in_bytes)) return 0;
    return tu_outbuf_untouched(&bg);
}

/* dswa_validate_backward and dswa_backward_cpu must both refuse, naming `needle` (a leading
   '^': at the start of the message), and change nothing. */
static void refused(const char *what, const dswa_backward_problem *p, const void *q, const void *k,
                    const void *v, const void *dout, void *dq, void *dk, void *dv, float *dl,
                    const char *needle) {
    nrefusals++;
    for (int api = 0; api < 2; api++) {
        const dswa_status s = api == 0 ? dswa_validate_backward(p, q, k, v, dout, dq, dk, dv, dl)
                                       : dswa_backward_cpu(p, q, k, v, dout, dq, dk, dv, dl);
        const char *msg = dswa_last_error();
        const int at_start = needle[0] == '^';
        const int found = at_start ? !strncmp(msg, needle + 1, strlen(needle + 1)) : strstr(msg, needle) != NULL;
        CHECK(s == DSWA_ERR_INVALID_ARGUMENT && found, "%s: %s returned %d, message \"%s\" "
              "(wanted \"%s\")", what, api ? "dswa_backward_cpu" : "dswa_validate_backward", (int)s,
              msg, needle);
        CHECK(unchanged(), "%s: a buffer was modified", what);
        if (api == 0) printf("  %-46s -> %s\n", what, msg);
    }
}

static void accepted(const char *what, const dswa_backward_problem *p, const void *dq,
                     const void *dk, const void *dv, const float *dl) {
    const dswa_status s = dswa_validate_backward(p, bq, bk, bv, bdo, dq, dk, dv, dl);
    CHECK(s == DSWA_OK, "%s: refused: %s", what, dswa_last_error());
}

static void test_refusals(void) {
    printf("refusals\n");
    dswa_problem f = dswa_problem_default(B_, N_, H_, D_, 2);
    base = dswa_backward_problem_default(&f);
    const int64_t span = dswa_view_span(&f, &f.q, 2);
    in_bytes = (size_t)span * 4;
    bq = new_buf(span, DSWA_F32); bk = new_buf(span, DSWA_F32); bv = new_buf(span, DSWA_F32);
    bdo = new_buf(span, DSWA_F32);
    const void *in[4] = {bq, bk, bv, bdo};
    for (int i = 0; i < 4; i++) {
        in_copy[i] = malloc(in_bytes);
        if (!in_copy[i]) abort();
        memcpy(in_copy[i], in[i], in_bytes);
    }
    bg = tu_outbuf_alloc(3 * span + 1, DSWA_F32);
    gq = bg.out;
    gk = (float *)bg.out + span;
    gv = (float *)bg.out + 2 * span;
    gl = (float *)bg.out + 3 * span;
    accepted("the base problem (control)", &base, gq, gk, gv, gl);
    dswa_backward_problem p;
    char what[96];

    refused("problem = NULL", NULL, bq, bk, bv, bdo, gq, gk, gv, gl, "problem = NULL");
    const char *const pn[7] = {"q", "k", "v", "dout", "dq", "dk", "dv"};
    for (int i = 0; i < 7; i++) {
        const void *ptr[7] = {bq, bk, bv, bdo, gq, gk, gv};
        ptr[i] = NULL;
        snprintf(what, sizeof what, "%s = NULL", pn[i]);
        refused(what, &base, ptr[0], ptr[1], ptr[2], ptr[3], (void *)ptr[4], (void *)ptr[5],
                (void *)ptr[6], gl, what);
    }
    /* the forward's own checks, with the forward's messages */
    p = base; p.fwd.batch = -1;
    refused("fwd.batch = -1", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^batch = -1");
    p = base; p.fwd.heads = 0;
    refused("fwd.heads = 0", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^heads = 0");
    p = base; p.fwd.lambda = NAN;
    refused("fwd.lambda = nan", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^lambda = nan");
    p = base; p.fwd.dtype = (dswa_dtype)5;
    refused("fwd.dtype = 5", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dtype = 5");
    p = base; p.fwd.k.seq = -1;
    refused("fwd.k.seq = -1", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^k.seq = -1");
    p = base; p.fwd.q.seq = INT64_MAX / 2;
    refused("fwd.q.seq = INT64_MAX/2 (overflow)", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^q: strides");

    /* negative strides of the backward's own layouts, and overflows */
    static const char *const dn[5] = {"batch", "seq", "pair", "head", "dim"};
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 5; d++) {
            p = base;
            dswa_layout *l = t == 0 ? &p.dout : t == 1 ? &p.dq : t == 2 ? &p.dk : &p.dv;
            int64_t *s = d == 0 ? &l->batch : d == 1 ? &l->seq : d == 2 ? &l->pair : d == 3 ? &l->head : &l->dim;
            *s = -3;
            snprintf(what, sizeof what, "%s.%s = -3", pn[3 + t], dn[d]);
            refused(what, &p, bq, bk, bv, bdo, gq, gk, gv, gl, what);
        }
    p = base; p.dout.seq = INT64_MAX / 2;
    refused("dout.seq = INT64_MAX/2", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dout: strides");
    p = base; p.dk.batch = INT64_MAX - 5;
    refused("dk.batch = INT64_MAX-5", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dk: strides");

    /* gradient elements aliasing each other */
    p = base; p.dq.pair = 0;
    refused("dq.pair = 0 (only dv may sum pairs)", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dq.pair = 0");
    p = base; p.dk.seq = 0;
    refused("dk.seq = 0", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dk.seq = 0");
    p = base; p.dv.head = 1;
    refused("dv.head = 1 (heads overlap)", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dv.");
    p = base; p.dv.pair = 0; p.dv.batch = 0;
    refused("dv.pair = 0 and dv.batch = 0", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dv.batch = 0");
    p = base; p.dv.pair = 0;
    accepted("dv.pair = 0 (summed dV; control)", &p, gq, gk, gv, gl);
    p = base; p.dout.seq = 0; p.dout.head = 0;
    accepted("dout broadcast (zero strides; control)", &p, gq, gk, gv, gl);

    /* gradients overlapping inputs, each other, and dlambda overlapping anything */
    refused("dq == q", &base, bq, bk, bv, bdo, bq, gk, gv, gl, "dq: overlaps q");
    refused("dk inside v", &base, bq, bk, bv, bdo, gq, (float *)bv + 7, gv, gl, "dk: overlaps v");
    refused("dv == dout", &base, bq, bk, bv, bdo, gq, gk, bdo, gl, "dv: overlaps dout");
    refused("dk == dq", &base, bq, bk, bv, bdo, gq, gq, gv, gl, "dk: overlaps dq");
    refused("dv one element into dk", &base, bq, bk, bv, bdo, gq, gk, (float *)gk + 1, gl, "dv: overlaps dk");
    refused("dv's last element is dq's first", &base, bq, bk, bv, bdo, (float *)gv + span - 1, gk, gv,
            gl, "dv: overlaps dq");
    refused("dlambda inside dk", &base, bq, bk, bv, bdo, gq, gk, gv, (float *)gk + 3, "dlambda: overlaps dk");
    refused("dlambda inside q", &base, bq, bk, bv, bdo, gq, gk, gv, (float *)bq + span - 1, "dlambda: overlaps q");
    accepted("dlambda NULL (control)", &base, gq, gk, gv, NULL);
    accepted("dq, dk, dv, dlambda adjacent (control)", &base, gq, gk, gv, gl);

    /* packed gradients: chunks of one [B, N, 5, H, D] buffer are apart; a chunk that meets
       another's pair 1, or misaligned by a byte, is not */
    {
        p = base;
        const int64_t HD = H_ * D_;
        p.dq = p.dk = p.dv = tu_bwd_packed_layout(&p.fwd);
        p.dv.pair = 0;
        float *g = (float *)bg.out;
        accepted("packed dq, dk, dv (control)", &p, g, g + HD, g + 2 * HD, gl);
        refused("packed dv at dq's pair 1", &p, bq, bk, bv, bdo, g, g + HD, g + 3 * HD, gl, "dv: overlaps dq");
        refused("packed dk at dq + HD + 1 byte", &p, bq, bk, bv, bdo, g, (char *)(g + HD) + 1, g + 2 * HD,
                gl, "dk: overlaps dq");
        p.dk.seq += 1;
        refused("packed dk with other strides", &p, bq, bk, bv, bdo, g, g + HD, g + 2 * HD, gl, "dk: overlaps dq");
        p = base;
        p.dq = p.dk = p.dv = tu_bwd_packed_layout(&p.fwd);
        p.dv.pair = 0;
        accepted("packed, dlambda past the buffer (control)", &p, g, g + HD, g + 2 * HD, NULL);
        refused("packed, dlambda in chunk 4", &p, bq, bk, bv, bdo, g, g + HD, g + 2 * HD, g + 4 * HD,
                "dlambda: overlaps");
    }

    /* empty problems: valid, pointers unchecked, dlambda = 0, gradients untouched */
    p = base; p.fwd.batch = 0;
    float dl = 5.0f;
    CHECK(dswa_backward_cpu(&p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &dl) == DSWA_OK && dl == 0.0f,
          "batch = 0 with NULL pointers: %s, dlambda %g", dswa_last_error(), (double)dl);
    p = base; p.fwd.seq_len = 0;
    CHECK(dswa_backward_cpu(&p, bq, bk, bv, bdo, gq, gk, gv, NULL) == DSWA_OK && unchanged(),
          "seq_len = 0: %s", dswa_last_error());
    p = base; p.fwd.seq_len = 0; p.dq.seq = -1;
    refused("seq_len = 0 and dq.seq = -1", &p, bq, bk, bv, bdo, gq, gk, gv, gl, "^dq.seq = -1");

    /* the reference's own refusals */
    double r[8];
    CHECK(dswa_reference_backward(&base, bq, bk, bv, NULL, r, r, r, NULL) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "dout = NULL"), "reference, dout NULL: %s", dswa_last_error());
    CHECK(dswa_reference_backward(&base, bq, bk, bv, bdo, r, NULL, r, NULL) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "dk = NULL"), "reference, dk NULL: %s", dswa_last_error());
    p = base; p.dv.dim = -1;
    CHECK(dswa_reference_backward(&p, bq, bk, bv, bdo, r, r, r, NULL) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "dv.dim = -1"), "reference, dv.dim -1: %s", dswa_last_error());

    /* the default problem */
    CHECK(!memcmp(&base.dq, &f.q, sizeof f.q) && !memcmp(&base.dk, &f.k, sizeof f.k) &&
          !memcmp(&base.dv, &f.v, sizeof f.v) && !memcmp(&base.dout, &f.out, sizeof f.out),
          "dswa_backward_problem_default: gradients not laid out like their inputs");
    printf("  %d refusals, each through 2 entry points\n", nrefusals);
    for (int i = 0; i < 4; i++) free(in_copy[i]);
    tu_free(bq); tu_free(bk); tu_free(bv); tu_free(bdo);
    tu_outbuf_free(&bg);
}

int main(void) {
    tu_rng_init(&rng, tu_test_seed());
    test_refusals();
    test_finite_differences();
    tu_backward_cases(cpu_backward, "CPU", &rng);
    test_determinism();
    TEST_MAIN_RETURN("test_backward");
}
