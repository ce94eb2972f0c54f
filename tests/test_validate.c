/* Every bad input of the foundation issue's section 3, through dswa_validate, dswa_forward_cpu
   and dswa_forward_cuda alike: DSWA_ERR_INVALID_ARGUMENT, a message that names the field and
   value ("<field> = <value>: <reason>"), and no byte of any buffer changed. Plus the small
   public helpers: status strings, dtype/math names, dswa_problem_default, dswa_view_span,
   dswa_min_bytes, dswa_backward_min_bytes, dswa_samel_backward_min_bytes, dswa_useful_flops. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dswa.h"
#include "compare.h"
#include "testutil.h"

/* ---- buffers watched for writes -------------------------------------------------------- */
typedef struct watched { const void *ptr; size_t bytes; void *copy; } watched;
static watched watch[8];
static int nwatch = 0;

static void watch_add(const void *ptr, size_t bytes) {
    if (nwatch == 8) abort();
    watch[nwatch].ptr = ptr;
    watch[nwatch].bytes = bytes;
    watch[nwatch].copy = malloc(bytes);
    if (!watch[nwatch].copy) abort();
    memcpy(watch[nwatch].copy, ptr, bytes);
    nwatch++;
}

static void watch_pop(void) {
    nwatch--;
    free(watch[nwatch].copy);
}

static int watched_unchanged(void) {
    for (int i = 0; i < nwatch; i++)
        if (memcmp(watch[i].ptr, watch[i].copy, watch[i].bytes) != 0) return 0;
    return 1;
}

/* `needle` must occur in the message; with a leading '^' it must start it. */
static int message_has(const char *msg, const char *needle) {
    if (!msg) return 0;
    if (needle[0] == '^') return strncmp(msg, needle + 1, strlen(needle + 1)) == 0;
    return strstr(msg, needle) != NULL;
}

static int ncases = 0;

/* The three entry points on one bad input: each must refuse it with INVALID_ARGUMENT, name
   it in dswa_last_error() (every needle), and leave every watched buffer as it was. */
static void expect_invalid(const char *what, const dswa_problem *p, const void *q,
                           const void *k, const void *v, void *out, const char *needle,
                           const char *needle2) {
    ncases++;
    for (int api = 0; api < 3; api++) {
        static const char *const names[3] = {"dswa_validate", "dswa_forward_cpu", "dswa_forward_cuda"};
        dswa_status s;
        switch (api) {
        case 0: s = dswa_validate(p, q, k, v, out); break;
        case 1: s = dswa_forward_cpu(p, q, k, v, out); break;
        default: s = dswa_forward_cuda(p, q, k, v, out, NULL); break;
        }
        const char *msg = dswa_last_error();
        CHECK(s == DSWA_ERR_INVALID_ARGUMENT, "%s: %s returned %d (%s), message \"%s\"", what,
              names[api], (int)s, dswa_status_string(s), msg ? msg : "(null)");
        CHECK(message_has(msg, needle) && (!needle2 || message_has(msg, needle2)),
              "%s: %s's message \"%s\" should contain \"%s\"%s%s", what, names[api],
              msg ? msg : "(null)", needle, needle2 ? " and " : "", needle2 ? needle2 : "");
        CHECK(watched_unchanged(), "%s: %s modified a buffer", what, names[api]);
        if (api == 0 && s == DSWA_ERR_INVALID_ARGUMENT)
            printf("  %-52s -> %s\n", what, msg);
    }
}

static void expect_valid(const char *what, const dswa_problem *p, const void *q, const void *k,
                         const void *v, const void *out) {
    dswa_status s = dswa_validate(p, q, k, v, out);
    CHECK(s == DSWA_OK, "%s: dswa_validate returned %d: %s", what, (int)s, dswa_last_error());
}

/* ---- the base problem and its buffers ---------------------------------------------------- */
#define B_ 2
#define N_ 8
#define H_ 2
#define D_ 4
static dswa_problem base;
static void *bq, *bk, *bv;
static tu_outbuf bo;
static int64_t in_elems;

static void test_bad_inputs(void) {
    printf("bad inputs\n");
    dswa_problem p;
    char what[128], needle[128];

    expect_invalid("problem = NULL", NULL, bq, bk, bv, bo.out, "problem", NULL);

    /* NULL pointers of a non-empty problem */
    expect_invalid("q = NULL", &base, NULL, bk, bv, bo.out, "^q", "NULL");
    expect_invalid("k = NULL", &base, bq, NULL, bv, bo.out, "^k", "NULL");
    expect_invalid("v = NULL", &base, bq, bk, NULL, bo.out, "^v", "NULL");
    expect_invalid("out = NULL", &base, bq, bk, bv, NULL, "^out", "NULL");

    /* extents */
    p = base; p.batch = -1;
    expect_invalid("batch = -1", &p, bq, bk, bv, bo.out, "batch = -1", NULL);
    p = base; p.batch = INT32_MIN;
    expect_invalid("batch = INT32_MIN", &p, bq, bk, bv, bo.out, "batch = -2147483648", NULL);
    p = base; p.seq_len = -3;
    expect_invalid("seq_len = -3", &p, bq, bk, bv, bo.out, "seq_len = -3", NULL);
    p = base; p.heads = 0;
    expect_invalid("heads = 0", &p, bq, bk, bv, bo.out, "heads = 0", NULL);
    p = base; p.heads = -2;
    expect_invalid("heads = -2", &p, bq, bk, bv, bo.out, "heads = -2", NULL);
    p = base; p.head_dim = 0;
    expect_invalid("head_dim = 0", &p, bq, bk, bv, bo.out, "head_dim = 0", NULL);
    p = base; p.head_dim = -64;
    expect_invalid("head_dim = -64", &p, bq, bk, bv, bo.out, "head_dim = -64", NULL);

    /* windows */
    p = base; p.window_left = -2;
    expect_invalid("window_left = -2", &p, bq, bk, bv, bo.out, "window_left = -2", NULL);
    p = base; p.window_right = -1;
    expect_invalid("window_right = -1", &p, bq, bk, bv, bo.out, "window_right = -1", NULL);
    p = base; p.window_left = INT32_MIN;
    expect_invalid("window_left = INT32_MIN", &p, bq, bk, bv, bo.out, "window_left = -2147483648", NULL);

    /* scalars */
    static const struct { float x; const char *txt; } nf[] = {
        {NAN, "nan"}, {INFINITY, "inf"}, {-INFINITY, "-inf"}};
    for (int i = 0; i < 3; i++) {
        p = base; p.scale = nf[i].x;
        snprintf(what, sizeof what, "scale = %s", nf[i].txt);
        snprintf(needle, sizeof needle, "scale = %s", nf[i].txt);
        expect_invalid(what, &p, bq, bk, bv, bo.out, needle, NULL);
        p = base; p.lambda = nf[i].x;
        snprintf(what, sizeof what, "lambda = %s", nf[i].txt);
        snprintf(needle, sizeof needle, "lambda = %s", nf[i].txt);
        expect_invalid(what, &p, bq, bk, bv, bo.out, needle, NULL);
    }

    /* enums */
    p = base; p.dtype = (dswa_dtype)7;
    expect_invalid("dtype = 7", &p, bq, bk, bv, bo.out, "dtype = 7", NULL);
    p = base; p.dtype = (dswa_dtype)-1;
    expect_invalid("dtype = -1", &p, bq, bk, bv, bo.out, "dtype = -1", NULL);
    p = base; p.math = (dswa_math)9;
    expect_invalid("math = 9", &p, bq, bk, bv, bo.out, "math = 9", NULL);
    p = base; p.math = (dswa_math)-1;
    expect_invalid("math = -1", &p, bq, bk, bv, bo.out, "math = -1", NULL);

    /* negative strides: every stride of every tensor */
    static const char *const tn[4] = {"q", "k", "v", "out"};
    static const char *const dn[5] = {"batch", "seq", "pair", "head", "dim"};
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 5; d++) {
            p = base;
            dswa_layout *l = t == 0 ? &p.q : t == 1 ? &p.k : t == 2 ? &p.v : &p.out;
            int64_t *s = d == 0 ? &l->batch : d == 1 ? &l->seq : d == 2 ? &l->pair : d == 3 ? &l->head : &l->dim;
            *s = -5;
            snprintf(what, sizeof what, "%s.%s = -5", tn[t], dn[d]);
            expect_invalid(what, &p, bq, bk, bv, bo.out, what, NULL);
        }
    p = base; p.k.seq = INT64_MIN;
    expect_invalid("k.seq = INT64_MIN", &p, bq, bk, bv, bo.out, "k.seq = -9223372036854775808", NULL);

    /* output overlapping an input */
    expect_invalid("out == q", &base, bq, bk, bv, bq, "out", "overlaps q");
    expect_invalid("out == k", &base, bq, bk, bv, bk, "out", "overlaps k");
    expect_invalid("out == v", &base, bq, bk, bv, bv, "out", "overlaps v");
    expect_invalid("out inside q (q + 17 elements)", &base, bq, bk, bv, (float *)bq + 17, "out", "overlaps q");
    expect_invalid("out inside v, at its last element", &base, bq, bk, bv,
                   (float *)bv + in_elems - 1, "out", "overlaps v");
    {
        /* out ends in q's first element, and q ends in out's first element: one arena */
        const int64_t out_elems = dswa_view_span(&base, &base.out, 1);
        const int64_t arena_elems = out_elems + in_elems;
        float *arena = tu_alloc(arena_elems, DSWA_F32);
        tu_rng rng;
        tu_rng_init(&rng, 77);
        tu_fill_normal(arena, arena_elems, DSWA_F32, &rng, 1.0);
        watch_add(arena, (size_t)arena_elems * 4);
        expect_invalid("out's last element is q's first", &base, arena + out_elems - 1, bk, bv,
                       arena, "out", "overlaps q");
        expect_invalid("k's last element is out's first", &base, bq, arena, bv,
                       arena + in_elems - 1, "out", "overlaps k");
        /* control: adjacent but not overlapping is fine */
        expect_valid("out immediately before q", &base, arena + out_elems, bk, bv, arena);
        expect_valid("out immediately after k", &base, bq, arena, bv, arena + in_elems);
        watch_pop();
        tu_free(arena);
    }
    /* out overlapping the packed buffer that holds q, k and v (chunks 0, 1, 2 of 5) */
    {
        p = base;
        const int64_t HD = (int64_t)H_ * D_;
        const dswa_layout pk = {(int64_t)N_ * 5 * HD, 5 * HD, 3 * HD, D_, 1};
        p.q = p.k = p.v = pk;
        p.v.pair = 0;
        const int64_t total = (int64_t)B_ * N_ * 5 * HD;
        float *packed = tu_alloc(total, DSWA_F32);
        tu_rng rng;
        tu_rng_init(&rng, 78);
        tu_fill_normal(packed, total, DSWA_F32, &rng, 1.0);
        watch_add(packed, (size_t)total * 4);
        expect_valid("packed [B,N,5,H,D] (control)", &p, packed, packed + HD, packed + 2 * HD, bo.out);
        expect_invalid("out in the packed buffer's 5th chunk", &p, packed, packed + HD, packed + 2 * HD,
                       packed + 4 * HD, "out", "overlaps");
        watch_pop();
        tu_free(packed);
    }

    /* output elements aliasing each other */
    p = base; p.out.seq = 0;
    expect_invalid("out.seq = 0 with N > 1", &p, bq, bk, bv, bo.out, "out.seq = 0", NULL);
    p = base; p.out.batch = 0;
    expect_invalid("out.batch = 0 with B > 1", &p, bq, bk, bv, bo.out, "out.batch = 0", NULL);
    p = base; p.out.head = 0;
    expect_invalid("out.head = 0", &p, bq, bk, bv, bo.out, "out.head = 0", NULL);
    p = base; p.out.dim = 0;
    expect_invalid("out.dim = 0", &p, bq, bk, bv, bo.out, "out.dim = 0", NULL);
    p = base; p.out.head = D_ - 1;
    expect_invalid("out.head = D - 1 (rows overlap by one)", &p, bq, bk, bv, bo.out, "^out.", NULL);
    p = base; p.out.seq = (int64_t)H_ * D_ - 1;
    expect_invalid("out.seq = H*D - 1", &p, bq, bk, bv, bo.out, "^out.", NULL);
    p = base; p.out.dim = 2; p.out.head = 1;   /* d*2 + h: h=1,d=0 and h=0,... interleave */
    p.out.seq = 2 * D_;                        /* (h=1, d) and (h=0, d) collide at d*2+1? no: */
    /* offsets h + 2d for h < 2, d < 4 are 0..7, all distinct: a valid interleaving */
    expect_valid("out.dim = 2, out.head = 1 (interleaved heads, no alias)", &p, bq, bk, bv, bo.out);
    p.out.dim = 1; p.out.head = 1;             /* h + d collide */
    expect_invalid("out.dim = out.head = 1", &p, bq, bk, bv, bo.out, "^out.", NULL);

    /* int64 overflow of offsets and byte counts */
    p = base; p.q.seq = INT64_MAX / 2;                     /* (N-1) * seq overflows */
    expect_invalid("q.seq = INT64_MAX/2 (product overflows)", &p, bq, bk, bv, bo.out, "^q", NULL);
    p = base; p.k.batch = INT64_MAX - 10; p.k.seq = 1000;  /* the sum overflows */
    expect_invalid("k.batch = INT64_MAX-10 (sum overflows)", &p, bq, bk, bv, bo.out, "^k", NULL);
    p = base; p.v.seq = (INT64_MAX / 4) / (N_ - 1) + 1;    /* elements fit, bytes (x4) do not */
    expect_invalid("v.seq: span fits int64, bytes do not", &p, bq, bk, bv, bo.out, "^v", NULL);
    p = base; p.out.dim = INT64_MAX / 3;
    expect_invalid("out.dim = INT64_MAX/3 (D-1 = 3)", &p, bq, bk, bv, bo.out, "^out", NULL);
    p = base; p.q.pair = INT64_MAX; p.q.dim = 1;
    expect_invalid("q.pair = INT64_MAX", &p, bq, bk, bv, bo.out, "^q", NULL);
    /* huge extents with strides that are consistent but whose offsets overflow */
    p = base;
    p.batch = p.seq_len = p.heads = p.head_dim = 1 << 30;
    p.window_left = p.window_right = 1;
    {
        const dswa_layout big = {(int64_t)1 << 62, (int64_t)1 << 61, (int64_t)1 << 60, 1 << 30, 1};
        const dswa_layout bigo = {(int64_t)1 << 62, (int64_t)1 << 61, 0, 1 << 30, 1};
        p.q = p.k = p.v = big;
        p.out = bigo;
    }
    expect_invalid("B = N = H = D = 2^30 (offsets overflow)", &p, bq, bk, bv, bo.out, "^q", NULL);

    /* an empty problem is still checked, except for its pointers */
    p = base; p.batch = 0; p.window_left = -1;
    expect_invalid("batch = 0 and window_left = -1", &p, bq, bk, bv, bo.out, "window_left = -1", NULL);
    p = base; p.seq_len = 0; p.dtype = (dswa_dtype)3;
    expect_invalid("seq_len = 0 and dtype = 3", &p, bq, bk, bv, bo.out, "dtype = 3", NULL);
    p = base; p.seq_len = 0; p.q.head = -1;
    expect_invalid("seq_len = 0 and q.head = -1", &p, bq, bk, bv, bo.out, "q.head = -1", NULL);
    p = base; p.batch = 0; p.scale = NAN;
    expect_invalid("batch = 0 and scale = nan", &p, NULL, NULL, NULL, NULL, "scale = nan", NULL);
}

static void test_valid_edges(void) {
    printf("valid edge cases\n");
    dswa_problem p = base;
    expect_valid("base problem", &p, bq, bk, bv, bo.out);
    expect_valid("q == k == v (inputs may alias each other)", &p, bq, bq, bq, bo.out);
    p.v.pair = 0;
    expect_valid("v.pair = 0 (shared V)", &p, bq, bk, bv, bo.out);
    p = base; p.window_left = p.window_right = 0;
    expect_valid("window 0/0", &p, bq, bk, bv, bo.out);
    p = base; p.window_left = p.window_right = INT32_MAX;
    expect_valid("window INT32_MAX", &p, bq, bk, bv, bo.out);
    p = base; p.scale = 0.0f; p.lambda = -3.0f;
    expect_valid("scale 0, lambda -3", &p, bq, bk, bv, bo.out);
    p = base; p.seq_len = 1; p.out.seq = 0;
    expect_valid("out.seq = 0 with N = 1 (no aliasing)", &p, bq, bk, bv, bo.out);
    p = base; p.batch = 1; p.out.batch = 0; p.q.batch = p.k.batch = p.v.batch = 0;
    expect_valid("zero batch strides with B = 1", &p, bq, bk, bv, bo.out);
    p = base; p.q.seq = 0; p.k.head = 0; p.v.dim = 0;
    expect_valid("zero input strides (broadcast inputs)", &p, bq, bk, bv, bo.out);
    for (int m = 0; m < 3; m++) {
        p = base; p.math = (dswa_math)m;
        expect_valid("each math", &p, bq, bk, bv, bo.out);
    }

    /* empty problems: a successful no-op, pointers may be NULL, nothing is written */
    p = base; p.batch = 0;
    expect_valid("batch = 0", &p, bq, bk, bv, bo.out);
    expect_valid("batch = 0 with NULL pointers", &p, NULL, NULL, NULL, NULL);
    CHECK(dswa_forward_cpu(&p, NULL, NULL, NULL, NULL) == DSWA_OK,
          "dswa_forward_cpu(batch = 0, NULL pointers): %s", dswa_last_error());
    dswa_status s = dswa_forward_cuda(&p, NULL, NULL, NULL, NULL, NULL);
    CHECK(s == DSWA_OK || s == DSWA_ERR_NO_DEVICE,
          "dswa_forward_cuda(batch = 0, NULL pointers) returned %d: %s", (int)s, dswa_last_error());
    p = base; p.seq_len = 0;
    expect_valid("seq_len = 0", &p, bq, bk, bv, bo.out);
    CHECK(dswa_forward_cpu(&p, bq, bk, bv, bo.out) == DSWA_OK, "seq_len = 0: %s", dswa_last_error());
    CHECK(watched_unchanged(), "seq_len = 0: a buffer was modified");
    /* an empty problem's output may even overlap an input: nothing is written */
    expect_valid("seq_len = 0, out == q", &p, bq, bk, bv, bq);
}

/* ---- helpers of the public API ----------------------------------------------------------- */
static void test_helpers(void) {
    printf("helpers\n");
    /* status strings: non-null, non-empty, distinct */
    const char *str[7];
    for (int s = 0; s <= 6; s++) {
        str[s] = dswa_status_string((dswa_status)s);
        CHECK(str[s] != NULL && str[s][0] != '\0', "dswa_status_string(%d) is null or empty", s);
        if (str[s]) printf("  status %d: %s\n", s, str[s]);
    }
    for (int a = 0; a <= 6; a++)
        for (int b = a + 1; b <= 6; b++)
            CHECK(str[a] && str[b] && strcmp(str[a], str[b]) != 0,
                  "dswa_status_string(%d) == dswa_status_string(%d)", a, b);
    CHECK(dswa_status_string((dswa_status)99) != NULL, "dswa_status_string(99) is NULL");
    CHECK(dswa_status_string((dswa_status)-1) != NULL, "dswa_status_string(-1) is NULL");

    CHECK(dswa_dtype_size(DSWA_F32) == 4 && dswa_dtype_size(DSWA_F16) == 2 &&
          dswa_dtype_size(DSWA_BF16) == 2 && dswa_dtype_size((dswa_dtype)7) == 0,
          "dswa_dtype_size: %zu %zu %zu %zu", dswa_dtype_size(DSWA_F32), dswa_dtype_size(DSWA_F16),
          dswa_dtype_size(DSWA_BF16), dswa_dtype_size((dswa_dtype)7));
    CHECK(!strcmp(dswa_dtype_name(DSWA_F32), "f32") && !strcmp(dswa_dtype_name(DSWA_F16), "f16") &&
          !strcmp(dswa_dtype_name(DSWA_BF16), "bf16") && !strcmp(dswa_dtype_name((dswa_dtype)7), "?"),
          "dswa_dtype_name");
    CHECK(!strcmp(dswa_math_name(DSWA_MATH_DEFAULT), "default") &&
          !strcmp(dswa_math_name(DSWA_MATH_TF32), "tf32") &&
          !strcmp(dswa_math_name(DSWA_MATH_FP32), "fp32") && !strcmp(dswa_math_name((dswa_math)9), "?"),
          "dswa_math_name");
    CHECK(!strcmp(DSWA_VERSION_STRING, "0.1.0"), "version string %s", DSWA_VERSION_STRING);

    /* dswa_problem_default */
    dswa_problem p = dswa_problem_default(2, 10, 3, 16, 5);
    CHECK(p.batch == 2 && p.seq_len == 10 && p.heads == 3 && p.head_dim == 16, "default: extents");
    CHECK(p.window_left == 5 && p.window_right == 5, "default: windows %d/%d", p.window_left, p.window_right);
    CHECK(p.scale == 0.25f, "default: scale %g != 1/sqrt(16)", (double)p.scale);
    CHECK(p.lambda == 1.0f, "default: lambda %g", (double)p.lambda);
    CHECK(p.dtype == DSWA_F32 && p.math == DSWA_MATH_DEFAULT, "default: dtype %d math %d",
          (int)p.dtype, (int)p.math);
    const int64_t HD = 3 * 16;
    const dswa_layout *in[3] = {&p.q, &p.k, &p.v};
    for (int t = 0; t < 3; t++)
        CHECK(in[t]->batch == 10 * 2 * HD && in[t]->seq == 2 * HD && in[t]->pair == HD &&
              in[t]->head == 16 && in[t]->dim == 1,
              "default: input %d strides (%lld, %lld, %lld, %lld, %lld)", t, (long long)in[t]->batch,
              (long long)in[t]->seq, (long long)in[t]->pair, (long long)in[t]->head, (long long)in[t]->dim);
    CHECK(p.out.batch == 10 * HD && p.out.seq == HD && p.out.head == 16 && p.out.dim == 1,
          "default: out strides (%lld, %lld, -, %lld, %lld)", (long long)p.out.batch,
          (long long)p.out.seq, (long long)p.out.head, (long long)p.out.dim);
    dswa_problem p64 = dswa_problem_default(1, 17, 24, 64, 17);
    CHECK(p64.scale == 0.125f, "default D=64: scale %g", (double)p64.scale);
    dswa_problem p100 = dswa_problem_default(1, 1, 1, 100, 0);
    CHECK(p100.scale == 0.1f, "default D=100: scale %.9g", (double)p100.scale);
    CHECK(dswa_validate(&p, NULL, NULL, NULL, NULL) == DSWA_ERR_INVALID_ARGUMENT,
          "default problem with NULL pointers is not refused");

    /* dswa_view_span */
    CHECK(dswa_view_span(&p, &p.q, 2) == 2 * 10 * 2 * HD, "span q = %lld", (long long)dswa_view_span(&p, &p.q, 2));
    CHECK(dswa_view_span(&p, &p.out, 1) == 2 * 10 * HD, "span out = %lld", (long long)dswa_view_span(&p, &p.out, 1));
    dswa_problem ps = p;
    ps.v.pair = 0;
    CHECK(dswa_view_span(&ps, &ps.v, 2) == 2 * 10 * 2 * HD - HD, "span shared v = %lld",
          (long long)dswa_view_span(&ps, &ps.v, 2));
    CHECK(dswa_view_span(&p, &p.q, 1) == 2 * 10 * 2 * HD - HD, "span q with 1 pair = %lld",
          (long long)dswa_view_span(&p, &p.q, 1));
    static const char *const orders[] = {"bnphd", "hpbnd", "dnbph", "bnhd", "nbd"};
    for (int pad = 0; pad <= 3; pad += 3)
        for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
            dswa_layout l = tu_layout_order(&p, orders[o], pad);
            CHECK(dswa_view_span(&p, &l, 2) == tu_span(&p, &l, 2), "span of %s pad %d: %lld != %lld",
                  orders[o], pad, (long long)dswa_view_span(&p, &l, 2), (long long)tu_span(&p, &l, 2));
            CHECK(dswa_view_span(&p, &l, 1) == tu_span(&p, &l, 1), "span of %s pad %d (1 pair)",
                  orders[o], pad);
        }
    ps = p; ps.batch = 0;
    CHECK(dswa_view_span(&ps, &ps.q, 2) == 0, "span with batch 0 = %lld", (long long)dswa_view_span(&ps, &ps.q, 2));
    ps = p; ps.seq_len = 0;
    CHECK(dswa_view_span(&ps, &ps.out, 1) == 0, "span with seq_len 0");
    ps = p; ps.q.seq = INT64_MAX / 2;
    CHECK(dswa_view_span(&ps, &ps.q, 2) <= 0, "span of an overflowing view = %lld (must not be a "
          "positive, wrapped-around value)", (long long)dswa_view_span(&ps, &ps.q, 2));
    ps = dswa_problem_default(1, 1, 1, 1, 0);
    CHECK(dswa_view_span(&ps, &ps.out, 1) == 1, "span of a single element");

    /* dswa_min_bytes: SAME-L bytes per token */
    static const int64_t Ns[] = {17, 4352, 21964, 69632};
    for (size_t i = 0; i < sizeof Ns / sizeof Ns[0]; i++) {
        dswa_problem s = dswa_problem_default(1, (int32_t)Ns[i], 24, 64, 17);
        const double n = (double)Ns[i];
        CHECK(dswa_min_bytes(&s) == 43008.0 * n, "min_bytes f32 N=%lld: %.0f per token",
              (long long)Ns[i], dswa_min_bytes(&s) / n);
        s.v.pair = 0;
        CHECK(dswa_min_bytes(&s) == 36864.0 * n, "min_bytes f32 shared V: %.0f per token", dswa_min_bytes(&s) / n);
        s.dtype = DSWA_BF16;
        CHECK(dswa_min_bytes(&s) == 18432.0 * n, "min_bytes bf16 shared V: %.0f per token", dswa_min_bytes(&s) / n);
        s.v.pair = 64LL * 24;
        CHECK(dswa_min_bytes(&s) == 21504.0 * n, "min_bytes bf16: %.0f per token", dswa_min_bytes(&s) / n);
        s.dtype = DSWA_F16;
        CHECK(dswa_min_bytes(&s) == 21504.0 * n, "min_bytes f16: %.0f per token", dswa_min_bytes(&s) / n);
    }
    {
        dswa_problem s = dswa_problem_default(3, 100, 2, 32, 5);
        CHECK(dswa_min_bytes(&s) == 3.0 * 100 * 2 * 32 * 4 * 7, "min_bytes B=3: %.0f", dswa_min_bytes(&s));
    }
    {   /* 4352 tokens of SAME-L f32: 187 MB (the op specification's table) */
        dswa_problem s = dswa_problem_default(1, 4352, 24, 64, 17);
        CHECK(fabs(dswa_min_bytes(&s) / 1e6 - 187.17) < 0.01, "min_bytes L=256: %.2f MB", dswa_min_bytes(&s) / 1e6);
    }

    /* dswa_backward_min_bytes: q, k (2H), v (2H or H), dout (H) read; dq, dk (2H), dv (2H, or
       H when summed) written: 13 or 11 units of N H D elements at SAME-L's shape */
    {
        dswa_problem s = dswa_problem_default(1, 4352, 24, 64, 17);
        const double unit = 4352.0 * 24 * 64;
        dswa_backward_problem b = dswa_backward_problem_default(&s);
        CHECK(dswa_backward_min_bytes(&b) == 13 * 4 * unit, "backward_min_bytes f32 2H V: %.0f",
              dswa_backward_min_bytes(&b));
        s.v.pair = 0;   /* V shared: the default's dV is summed, H heads */
        b = dswa_backward_problem_default(&s);
        CHECK(b.dv.pair == 0 && dswa_backward_min_bytes(&b) == 11 * 4 * unit,
              "backward_min_bytes f32 shared V: %.0f", dswa_backward_min_bytes(&b));
        b.fwd.dtype = DSWA_BF16;
        CHECK(dswa_backward_min_bytes(&b) == 11 * 2 * unit, "backward_min_bytes bf16 shared V: %.0f",
              dswa_backward_min_bytes(&b));
        b.dv.pair = 64LL * 24;   /* each pair's own dV from one shared V: 12 units */
        CHECK(dswa_backward_min_bytes(&b) == 12 * 2 * unit, "backward_min_bytes, dV per pair: %.0f",
              dswa_backward_min_bytes(&b));
        dswa_samel_problem sp = dswa_samel_problem_default(2, 4352, 24);
        sp.dtype = DSWA_F16;
        const dswa_samel_backward_problem sb = dswa_samel_backward_problem_default(&sp);
        CHECK(dswa_samel_backward_min_bytes(&sb) == 2 * 11 * 2 * unit,
              "samel_backward_min_bytes f16 B=2: %.0f", dswa_samel_backward_min_bytes(&sb));
    }

    /* dswa_useful_flops: 2 matmuls x 2 flops x D per key, per pair, head and batch */
    {
        dswa_problem s = dswa_problem_default(2, 1, 3, 64, 17);
        CHECK(dswa_useful_flops(&s) == 1.0 * 8 * 64 * 3 * 2, "useful_flops N=1: %.0f", dswa_useful_flops(&s));
        s = dswa_problem_default(1, 100, 24, 64, 17);
        s.window_right = 3;
        double keys = 0;
        for (int i = 0; i < 100; i++) {
            int lo = i - 17 < 0 ? 0 : i - 17, hi = i + 3 > 99 ? 99 : i + 3;
            keys += hi - lo + 1;
        }
        CHECK(dswa_useful_flops(&s) == keys * 8 * 64 * 24, "useful_flops 17/3: %.0f != %.0f",
              dswa_useful_flops(&s), keys * 8 * 64 * 24);
        s = dswa_problem_default(1, 4352, 24, 64, 17);
        const double per = dswa_useful_flops(&s) / 4352.0 / 48.0;  /* per token per input head */
        CHECK(per > 8900 && per <= 8960, "useful_flops SAME-L: %.1f per token per input head", per);
    }
}

/* ---- names, conversion and the reference's own checks ----------------------------------- */
static void test_names_convert_reference(void) {
    printf("names, conversion, reference\n");
    for (int d = 0; d < 3; d++) {
        dswa_dtype got = (dswa_dtype)9;
        CHECK(dswa_dtype_parse(dswa_dtype_name((dswa_dtype)d), &got) == DSWA_OK && got == (dswa_dtype)d,
              "dswa_dtype_parse(%s) gave %d", dswa_dtype_name((dswa_dtype)d), (int)got);
    }
    for (int m = 0; m < 3; m++) {
        dswa_math got = (dswa_math)9;
        CHECK(dswa_math_parse(dswa_math_name((dswa_math)m), &got) == DSWA_OK && got == (dswa_math)m,
              "dswa_math_parse(%s) gave %d", dswa_math_name((dswa_math)m), (int)got);
    }
    static const char *const bad[] = {"F32", "fp16", "", "bf16 ", "?"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dswa_dtype d = DSWA_BF16;
        dswa_math m = DSWA_MATH_FP32;
        CHECK(dswa_dtype_parse(bad[i], &d) == DSWA_ERR_INVALID_ARGUMENT && d == DSWA_BF16 &&
              strstr(dswa_last_error(), "f32, f16 or bf16"), "dswa_dtype_parse('%s'): %s", bad[i], dswa_last_error());
        CHECK(dswa_math_parse(bad[i], &m) == DSWA_ERR_INVALID_ARGUMENT && m == DSWA_MATH_FP32 &&
              strstr(dswa_last_error(), "default, tf32 or fp32"), "dswa_math_parse('%s'): %s", bad[i], dswa_last_error());
    }
    CHECK(dswa_dtype_parse(NULL, NULL) == DSWA_ERR_INVALID_ARGUMENT, "dswa_dtype_parse(NULL) accepted");
    CHECK(dswa_math_parse(NULL, NULL) == DSWA_ERR_INVALID_ARGUMENT, "dswa_math_parse(NULL) accepted");

    /* conversion against the tests' own encoders, on random values and the edges */
    tu_rng rng;
    tu_rng_init(&rng, 99);
    enum { NV = 4096 };
    static float src[NV], back[NV];
    static uint16_t h[NV];
    static const float edges[] = {0.f, -0.f, 65504.f, 65520.f, 1e-8f, 6e-8f, 3.0e-5f, INFINITY, -INFINITY, NAN, 3.4e38f, 1e-40f};
    for (int i = 0; i < NV; i++)
        src[i] = i < (int)(sizeof edges / sizeof edges[0]) ? edges[i] : (float)(tu_rng_normal(&rng) * pow(2.0, (double)tu_rng_range(&rng, 60) - 30));
    for (int d = 1; d < 3; d++) {
        const dswa_dtype dt = (dswa_dtype)d;
        dswa_convert_from_f32(dt, src, h, NV);
        dswa_convert_to_f32(dt, h, back, NV);
        int64_t wrong = 0;
        for (int i = 0; i < NV; i++) {
            const uint16_t want = dt == DSWA_F16 ? tu_f32_to_f16(src[i]) : tu_f32_to_bf16(src[i]);
            const float wantf = dt == DSWA_F16 ? tu_f16_to_f32(h[i]) : tu_bf16_to_f32(h[i]);
            const int nan = isnan(src[i]);
            if (nan ? !isnan(back[i]) : (h[i] != want || memcmp(&back[i], &wantf, 4) != 0)) wrong++;
        }
        CHECK(wrong == 0, "dswa_convert_*(%s): %lld of %d values differ from the tests' encoders",
              dswa_dtype_name(dt), (long long)wrong, NV);
    }
    dswa_convert_from_f32(DSWA_F32, src, back, NV);
    CHECK(memcmp(src, back, sizeof src) == 0, "dswa_convert_from_f32(f32) is not a copy");

    /* dswa_reference_rows: refusals, and a one-key window is exactly V0 - lambda V1 */
    dswa_problem p = dswa_problem_default(2, 9, 3, 8, 0);
    p.lambda = 0.75f;
    void *q = tu_new_input(&p, &p.q, &rng, NULL), *k = tu_new_input(&p, &p.k, &rng, NULL);
    void *v = tu_new_input(&p, &p.v, &rng, NULL);
    double *ref = malloc(sizeof(double) * 2 * 9 * 3 * 8);
    CHECK(dswa_reference_rows(&p, q, k, NULL, 0, 9, ref) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "v = NULL"), "reference with v NULL: %s", dswa_last_error());
    CHECK(dswa_reference_rows(&p, q, k, v, 3, 2, ref) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "rows [3, 2)"), "reference rows [3, 2): %s", dswa_last_error());
    CHECK(dswa_reference_rows(&p, q, k, v, 0, 10, ref) == DSWA_ERR_INVALID_ARGUMENT, "reference rows past N accepted");
    CHECK(dswa_reference_rows(&p, q, k, v, 0, 9, NULL) == DSWA_ERR_INVALID_ARGUMENT, "reference out NULL accepted");
    CHECK(dswa_reference_rows(&p, q, k, v, 4, 4, NULL) == DSWA_OK, "reference of no rows refused: %s", dswa_last_error());
    dswa_problem pb = p;
    pb.heads = 0;
    CHECK(dswa_reference_rows(&pb, q, k, v, 0, 1, ref) == DSWA_ERR_INVALID_ARGUMENT &&
          strstr(dswa_last_error(), "heads = 0"), "reference heads 0: %s", dswa_last_error());
    CHECK(dswa_reference_rows(&p, q, k, v, 2, 9, ref) == DSWA_OK, "reference: %s", dswa_last_error());
    int64_t off = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 2; i < 9; i++)
            for (int hh = 0; hh < 3; hh++)
                for (int d = 0; d < 8; d++) {
                    const double v0 = tu_load(v, tu_in_offset(&p.v, b, i, 0, hh, d), p.dtype);
                    const double v1 = tu_load(v, tu_in_offset(&p.v, b, i, 1, hh, d), p.dtype);
                    off += ref[((b * 7 + (i - 2)) * 3 + hh) * 8 + d] != v0 - 0.75 * v1;
                }
    CHECK(off == 0, "reference, one-key window: %lld of %d values are not V0 - lambda V1", (long long)off, 2 * 7 * 3 * 8);
    free(ref);
    tu_free(q); tu_free(k); tu_free(v);
}

int main(void) {
    base = dswa_problem_default(B_, N_, H_, D_, 3);
    tu_rng rng;
    tu_rng_init(&rng, 4242);
    bq = tu_new_input(&base, &base.q, &rng, &in_elems);
    bk = tu_new_input(&base, &base.k, &rng, NULL);
    bv = tu_new_input(&base, &base.v, &rng, NULL);

    /* control: the base problem is valid and runs (on a separate output) */
    {
        tu_outbuf o = tu_outbuf_new(&base);
        dswa_status s = dswa_forward_cpu(&base, bq, bk, bv, o.out);
        CHECK(s == DSWA_OK, "control: the base problem fails: %d %s", (int)s, dswa_last_error());
        int64_t un = 0, cl = 0;
        tu_outbuf_check(&base, &o, &un, &cl);
        CHECK(un == 0 && cl == 0, "control: %lld unwritten, %lld clobbered", (long long)un, (long long)cl);
        tu_outbuf_free(&o);
    }

    bo = tu_outbuf_new(&base);
    watch_add(bq, (size_t)in_elems * 4);
    watch_add(bk, (size_t)in_elems * 4);
    watch_add(bv, (size_t)in_elems * 4);
    watch_add(bo.base, (size_t)bo.total * 4);

    test_bad_inputs();
    test_valid_edges();
    test_helpers();
    test_names_convert_reference();
    CHECK(tu_outbuf_untouched(&bo), "the poisoned output was written by some call");
    printf("%d bad inputs, each through 3 entry points\n", ncases);

    while (nwatch) watch_pop();
    tu_outbuf_free(&bo);
    tu_free(bq); tu_free(bk); tu_free(bv);
    TEST_MAIN_RETURN("test_validate");
}
