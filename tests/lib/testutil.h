/* Helpers for the dswa tests: a seeded RNG, the tests' own f16/bf16 encoders, views and
   buffers filled with fresh random normals, poisoned outputs with guard zones, and CHECK
   macros with a pass/fail summary. Nothing here shares code with src/. */
#ifndef DSWA_TESTS_TESTUTIL_H
#define DSWA_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RNG: splitmix64, Box-Muller normals ---------------------------------------------- */
typedef struct tu_rng { uint64_t state; int has_spare; double spare; } tu_rng;
void tu_rng_init(tu_rng *r, uint64_t seed);
uint64_t tu_rng_u64(tu_rng *r);
double tu_rng_uniform(tu_rng *r);              /* in (0, 1) */
double tu_rng_normal(tu_rng *r);               /* standard normal */
int64_t tu_rng_range(tu_rng *r, int64_t n);    /* in [0, n) */
uint64_t tu_fresh_seed(void);                  /* differs run to run: clock and process id */
/* A test program's seed: DSWA_TEST_SEED when set, else a fresh one; printed as
   "seed N (DSWA_TEST_SEED=N repeats this run)" so that a failure can be repeated. */
uint64_t tu_test_seed(void);

/* ---- element encoding (round to nearest even; the tests' own code) -------------------- */
uint16_t tu_f32_to_f16(float f);
uint16_t tu_f32_to_bf16(float f);
float tu_f16_to_f32(uint16_t h);
float tu_bf16_to_f32(uint16_t h);
size_t tu_dtype_size(dswa_dtype dtype);        /* 4, 2, 2 (0 if unknown) */
/* Stores x, rounded to dtype, as element idx of buf; tu_load reads one back. */
void tu_store(void *buf, int64_t idx, dswa_dtype dtype, double x);
double tu_load(const void *buf, int64_t idx, dswa_dtype dtype);

/* ---- layouts --------------------------------------------------------------------------- */
/* Strides of a view whose dimensions are nested in `order`, outermost first, using the letters
   b (batch), n (seq), p (pair), h (head), d (dim); a letter left out gets stride 0 (e.g. "bnhd"
   for an output, or for a V shared by both pairs). Every stride but the innermost is padded by
   `pad` elements, so pad > 0 leaves gaps everywhere. "bnphd" with pad 0 is contiguous
   (B, N, 2H, D); "bnhd" is a contiguous (B, N, H, D) output. */
dswa_layout tu_layout_order(const dswa_problem *p, const char *order, int64_t pad);
/* Element spans (1 + largest offset) computed by the tests, for cross-checking. */
int64_t tu_span(const dswa_problem *p, const dswa_layout *l, int pairs);

/* ---- buffers --------------------------------------------------------------------------- */
void *tu_alloc(int64_t elems, dswa_dtype dtype);    /* 64-byte aligned, aborts on failure */
void tu_free(void *p);
/* Fills n elements with N(0, sd^2) values rounded to dtype, redrawing any that round to 0. */
void tu_fill_normal(void *buf, int64_t n, dswa_dtype dtype, tu_rng *r, double sd);
/* Allocates an input view of p (span from dswa_view_span(), at least 1 element) and fills all
   of it with fresh normals; *elems receives the element count when not NULL. */
void *tu_new_input(const dswa_problem *p, const dswa_layout *l, tu_rng *r, int64_t *elems);

/* Poison: NaNs with a payload the library never produces (f32 0x7fc0dead, f16 0x7e01,
   bf16 0x7fc1), so "this element was written" can be told from "it was not". */
void tu_poison(void *buf, int64_t n, dswa_dtype dtype);
int tu_is_poison(const void *buf, int64_t idx, dswa_dtype dtype);

/* An output buffer: the view's span plus TU_GUARD poisoned elements on each side. */
#define TU_GUARD 64
typedef struct tu_outbuf {
    void *base;       /* allocation: TU_GUARD + span + TU_GUARD elements, all poisoned */
    void *out;        /* base + TU_GUARD elements: what is passed to the library */
    int64_t span;     /* dswa_view_span(p, &p->out, 1) */
    int64_t total;    /* elements in the allocation */
    dswa_dtype dtype;
} tu_outbuf;
tu_outbuf tu_outbuf_new(const dswa_problem *p);
/* The same for any span (elements) and dtype: what several views may share. */
tu_outbuf tu_outbuf_alloc(int64_t span, dswa_dtype dtype);
void tu_outbuf_free(tu_outbuf *o);
/* After a successful run: counts view elements still poisoned (*unwritten) and elements
   outside the view (gaps and guards) that no longer hold the poison (*clobbered). */
void tu_outbuf_check(const dswa_problem *p, const tu_outbuf *o, int64_t *unwritten,
                     int64_t *clobbered);
/* A view written into an output buffer: its layout, its pairs (1 for an output, 2 for an
   input-shaped gradient) and the offset of its element 0 from o->out, in elements. */
typedef struct tu_view { const dswa_layout *l; int pairs; int64_t origin; } tu_view;
/* tu_outbuf_check for n views sharing one buffer: *unwritten counts the elements of any view
   still poisoned, *clobbered the elements of none that are not. */
void tu_outbuf_check_views(const dswa_problem *p, const tu_outbuf *o, const tu_view *v, int n,
                           int64_t *unwritten, int64_t *clobbered);
/* 1 if every element of the allocation still holds the poison. */
int tu_outbuf_untouched(const tu_outbuf *o);

/* ---- checks ---------------------------------------------------------------------------- */
extern int tu_checks, tu_failures;
void tu_check_(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* CHECK(condition, "printf format", args...): counts, and on failure prints
   file:line, the condition and the message. */
#define CHECK(cond, ...) tu_check_(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)
/* The check of a refused call: status `want` and a message (dswa_last_error()) holding
   `needle`; then prints "  <what, left-aligned in `width` columns> -> <message>". */
void tu_check_refusal(const char *what, int width, dswa_status st, dswa_status want,
                      const char *needle);
/* Prints "skipped: <reason>" and exits 77. */
void tu_skip(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
/* A test's command line: each argument must be one of the flags given as ("--name", &int)
   pairs ending in NULL, which sets that int to 1. 0, or 2 after printing the unknown argument
   (the process status for bad usage). */
int tu_flags(int argc, char **argv, ...);
/* Prints "<name>: N checks, F failed" and returns the process status (0 pass, 1 fail). */
int tu_summary(const char *name);
#define TEST_MAIN_RETURN(name) return tu_summary(name)

#ifdef __cplusplus
}
#endif
#endif
