/* See testutil.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

/* ---- RNG ----------------------------------------------------------------------------- */
void tu_rng_init(tu_rng *r, uint64_t seed) {
    r->state = seed ^ 0x5851f42d4c957f2dULL;
    r->has_spare = 0;
    r->spare = 0.0;
}

uint64_t tu_rng_u64(tu_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tu_rng_uniform(tu_rng *r) {
    /* 53 random bits, shifted off zero: (k + 0.5) / 2^53 */
    return ((double)(tu_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double tu_rng_normal(tu_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    /* Marsaglia's polar method: exact normals, one log and no sin/cos per pair (the tests
       fill 10^8-element inputs with these) */
    double x, y, s;
    do {
        x = 2.0 * tu_rng_uniform(r) - 1.0;
        y = 2.0 * tu_rng_uniform(r) - 1.0;
        s = x * x + y * y;
    } while (s >= 1.0 || s == 0.0);
    const double f = sqrt(-2.0 * log(s) / s);
    r->spare = y * f;
    r->has_spare = 1;
    return x * f;
}

uint64_t tu_fresh_seed(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    tu_rng r;
    tu_rng_init(&r, (uint64_t)t.tv_sec * 1000000007ULL ^ (uint64_t)t.tv_nsec ^ ((uint64_t)getpid() << 32));
    return tu_rng_u64(&r);
}

uint64_t tu_test_seed(void) {
    const char *env = getenv("DSWA_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 0) : tu_fresh_seed();
    printf("seed %llu (DSWA_TEST_SEED=%llu repeats this run)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}

int64_t tu_rng_range(tu_rng *r, int64_t n) {
    return n <= 0 ? 0 : (int64_t)(tu_rng_u64(r) % (uint64_t)n);
}

/* ---- encoding ------------------------------------------------------------------------ */
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t tu_f32_to_bf16(float f) {
    if (isnan(f)) return (uint16_t)(f2u(f) >> 31 ? 0xffc0 : 0x7fc0);
    const uint32_t u = f2u(f);
    const uint32_t lower = u & 0xffffu, upper = u >> 16;
    uint32_t r = upper;
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) r++;   /* may carry into inf */
    return (uint16_t)r;
}

uint16_t tu_f32_to_f16(float f) {
    /* Done in double arithmetic: scale to an integer mantissa, round half to even. */
    const uint16_t sign = (uint16_t)(signbit(f) ? 0x8000u : 0u);
    double a = fabs((double)f);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00u);
    if (isinf(f)) return (uint16_t)(sign | 0x7c00u);
    if (a < ldexp(1.0, -14)) {                         /* subnormal range: units of 2^-24 */
        const double m = nearbyint(a * 16777216.0);     /* default rounding mode: to even */
        return (uint16_t)(sign | (uint16_t)m);           /* m == 1024 becomes the min normal */
    }
    int e;
    (void)frexp(a, &e);                                 /* a = f * 2^e, f in [0.5, 1) */
    int exp = e - 1;                                    /* a in [2^exp, 2^(exp+1)) */
    double m = nearbyint(ldexp(a, 10 - exp));           /* in [1024, 2048] */
    if (m == 2048.0) { m = 1024.0; exp++; }
    if (exp > 15) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((exp + 15) << 10) | (uint16_t)((int)m - 1024));
}

float tu_f16_to_f32(uint16_t h) {
    const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float x;
    if (exp == 0x1f) x = man ? NAN : INFINITY;
    else if (exp == 0) x = ldexpf((float)man, -24);
    else x = ldexpf((float)(man | 0x400), exp - 25);
    return (h & 0x8000u) ? -x : x;
}

float tu_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

size_t tu_dtype_size(dswa_dtype dtype) {
    switch (dtype) {
    case DSWA_F32: return 4;
    case DSWA_F16: case DSWA_BF16: return 2;
    }
    return 0;
}

void tu_store(void *buf, int64_t idx, dswa_dtype dtype, double x) {
    const float f = (float)x;
    uint16_t h;
    switch (dtype) {
    case DSWA_F32: memcpy((char *)buf + idx * 4, &f, 4); return;
    case DSWA_F16: h = tu_f32_to_f16(f); memcpy((char *)buf + idx * 2, &h, 2); return;
    case DSWA_BF16: h = tu_f32_to_bf16(f); memcpy((char *)buf + idx * 2, &h, 2); return;
    }
}

double tu_load(const void *buf, int64_t idx, dswa_dtype dtype) {
    float f;
    uint16_t h;
    switch (dtype) {
    case DSWA_F32: memcpy(&f, (const char *)buf + idx * 4, 4); return f;
    case DSWA_F16: memcpy(&h, (const char *)buf + idx * 2, 2); return tu_f16_to_f32(h);
    case DSWA_BF16: memcpy(&h, (const char *)buf + idx * 2, 2); return tu_bf16_to_f32(h);
    }
    return NAN;
}

/* ---- layouts ------------------------------------------------------------------------- */
static int64_t extent_of(const dswa_problem *p, char c) {
    switch (c) {
    case 'b': return p->batch;
    case 'n': return p->seq_len;
    case 'p': return 2;
    case 'h': return p->heads;
    case 'd': return p->head_dim;
    }
    return 0;
}

dswa_layout tu_layout_order(const dswa_problem *p, const char *order, int64_t pad) {
    dswa_layout l = {0, 0, 0, 0, 0};
    int64_t stride = 1;
    for (int i = (int)strlen(order) - 1; i >= 0; i--) {
        const char c = order[i];
        switch (c) {
        case 'b': l.batch = stride; break;
        case 'n': l.seq = stride; break;
        case 'p': l.pair = stride; break;
        case 'h': l.head = stride; break;
        case 'd': l.dim = stride; break;
        default: fprintf(stderr, "tu_layout_order: bad letter '%c'\n", c); abort();
        }
        int64_t e = extent_of(p, c);
        stride = stride * (e > 0 ? e : 1) + pad;
    }
    return l;
}

int64_t tu_span(const dswa_problem *p, const dswa_layout *l, int pairs) {
    if (p->batch <= 0 || p->seq_len <= 0 || p->heads <= 0 || p->head_dim <= 0) return 0;
    return 1 + (p->batch - 1) * l->batch + (int64_t)(p->seq_len - 1) * l->seq +
           (pairs - 1) * l->pair + (int64_t)(p->heads - 1) * l->head +
           (int64_t)(p->head_dim - 1) * l->dim;
}

/* ---- buffers ------------------------------------------------------------------------- */
void *tu_alloc(int64_t elems, dswa_dtype dtype) {
    size_t bytes = (size_t)(elems > 0 ? elems : 1) * tu_dtype_size(dtype);
    bytes = (bytes + 63) & ~(size_t)63;
    void *ptr = aligned_alloc(64, bytes);
    if (!ptr) {
        fprintf(stderr, "tu_alloc: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return ptr;
}

void tu_free(void *ptr) { free(ptr); }

void tu_fill_normal(void *buf, int64_t n, dswa_dtype dtype, tu_rng *r, double sd) {
    /* Chunks with generators of their own, seeded from r: the same values for any number of
       threads, and production-size inputs (10^8 elements) in a fraction of a second. */
    enum { CHUNK = 1 << 16 };
    const uint64_t base = tu_rng_u64(r);
    const int64_t nch = (n + CHUNK - 1) / CHUNK;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (nch > 1)
#endif
    for (int64_t c = 0; c < nch; c++) {
        tu_rng cr;
        tu_rng_init(&cr, base + (uint64_t)c * 0xd1b54a32d192ed03ULL);
        const int64_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        for (int64_t i = c * CHUNK; i < end; i++) {
            do tu_store(buf, i, dtype, sd * tu_rng_normal(&cr));
            while (tu_load(buf, i, dtype) == 0.0);
        }
    }
}

void *tu_new_input(const dswa_problem *p, const dswa_layout *l, tu_rng *r, int64_t *elems) {
    int64_t n = dswa_view_span(p, l, 2);
    if (n < 1) n = 1;
    void *buf = tu_alloc(n, p->dtype);
    tu_fill_normal(buf, n, p->dtype, r, 1.0);
    if (elems) *elems = n;
    return buf;
}

#define POISON_F32 0x7fc0deadu
#define POISON_F16 0x7e01u
#define POISON_BF16 0x7fc1u

void tu_poison(void *buf, int64_t n, dswa_dtype dtype) {
    const uint32_t p32 = POISON_F32;
    const uint16_t p16 = dtype == DSWA_F16 ? POISON_F16 : POISON_BF16;
    for (int64_t i = 0; i < n; i++) {
        if (dtype == DSWA_F32) memcpy((char *)buf + i * 4, &p32, 4);
        else memcpy((char *)buf + i * 2, &p16, 2);
    }
}

int tu_is_poison(const void *buf, int64_t idx, dswa_dtype dtype) {
    if (dtype == DSWA_F32) {
        uint32_t u;
        memcpy(&u, (const char *)buf + idx * 4, 4);
        return u == POISON_F32;
    }
    uint16_t h;
    memcpy(&h, (const char *)buf + idx * 2, 2);
    return h == (dtype == DSWA_F16 ? POISON_F16 : POISON_BF16);
}

tu_outbuf tu_outbuf_alloc(int64_t span, dswa_dtype dtype) {
    tu_outbuf o;
    o.dtype = dtype;
    o.span = span < 0 ? 0 : span;
    o.total = o.span + 2 * TU_GUARD;
    o.base = tu_alloc(o.total, o.dtype);
    tu_poison(o.base, o.total, o.dtype);
    o.out = (char *)o.base + TU_GUARD * (int64_t)tu_dtype_size(o.dtype);
    return o;
}

tu_outbuf tu_outbuf_new(const dswa_problem *p) {
    return tu_outbuf_alloc(dswa_view_span(p, &p->out, 1), p->dtype);
}

void tu_outbuf_free(tu_outbuf *o) {
    tu_free(o->base);
    o->base = o->out = NULL;
}

void tu_outbuf_check_views(const dswa_problem *p, const tu_outbuf *o, const tu_view *v, int n,
                           int64_t *unwritten, int64_t *clobbered) {
    unsigned char *in_view = calloc((size_t)o->total, 1);
    if (!in_view) abort();
    int64_t un = 0, cl = 0;
    for (int t = 0; t < n; t++) {
        const dswa_layout *l = v[t].l;
        for (int64_t b = 0; b < p->batch; b++)
            for (int64_t i = 0; i < p->seq_len; i++)
                for (int64_t pr = 0; pr < v[t].pairs; pr++)
                    for (int64_t h = 0; h < p->heads; h++)
                        for (int64_t d = 0; d < p->head_dim; d++) {
                            const int64_t off = TU_GUARD + v[t].origin + b * l->batch + i * l->seq +
                                                pr * l->pair + h * l->head + d * l->dim;
                            if (off < 0 || off >= o->total) { un++; continue; }   /* cannot happen */
                            in_view[off] = 1;
                        }
    }
    for (int64_t e = 0; e < o->total; e++) {
        const int poison = tu_is_poison(o->base, e, o->dtype);
        if (in_view[e] && poison) un++;
        if (!in_view[e] && !poison) cl++;
    }
    free(in_view);
    *unwritten = un;
    *clobbered = cl;
}

void tu_outbuf_check(const dswa_problem *p, const tu_outbuf *o, int64_t *unwritten,
                     int64_t *clobbered) {
    const tu_view v = {&p->out, 1, 0};
    tu_outbuf_check_views(p, o, &v, 1, unwritten, clobbered);
}

int tu_outbuf_untouched(const tu_outbuf *o) {
    for (int64_t e = 0; e < o->total; e++)
        if (!tu_is_poison(o->base, e, o->dtype)) return 0;
    return 1;
}

/* ---- checks -------------------------------------------------------------------------- */
int tu_checks = 0, tu_failures = 0;

void tu_check_(int ok, const char *file, int line, const char *expr, const char *fmt, ...) {
    tu_checks++;
    if (ok) return;
    tu_failures++;
    if (tu_failures > 200) {
        if (tu_failures == 201) fprintf(stderr, "(further failures not printed)\n");
        return;
    }
    fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void tu_skip(const char *fmt, ...) {
    va_list ap;
    printf("skipped: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(77);
}

void tu_check_refusal(const char *what, int width, dswa_status st, dswa_status want,
                      const char *needle) {
    CHECK(st == want && strstr(dswa_last_error(), needle),
          "%s: status %s, want %s; message \"%s\" (wanted \"%s\")", what,
          dswa_status_string(st), dswa_status_string(want), dswa_last_error(), needle);
    printf("  %-*s -> %s\n", width, what, dswa_last_error());
}

int tu_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
    fflush(stdout);
    return tu_failures ? 1 : 0;
}

int tu_flags(int argc, char **argv, ...) {
    for (int i = 1; i < argc; i++) {
        va_list ap;
        va_start(ap, argv);
        const char *name;
        int *set = NULL;
        while ((name = va_arg(ap, const char *))) {
            int *flag = va_arg(ap, int *);
            if (!strcmp(argv[i], name)) set = flag;
        }
        va_end(ap);
        if (!set) {
            fprintf(stderr, "%s: unknown argument %s\n", argv[0], argv[i]);
            return 2;
        }
        *set = 1;
    }
    return 0;
}
