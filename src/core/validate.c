/* One validation path for every backend: dswa_validate() runs before any backend work, so a
   bad problem is refused with the same status and message whichever backend was asked for,
   and nothing is ever written to `out` on failure. Messages name the field and its value. */
#include <math.h>
#include <stdint.h>
#include "core/internal.h"

static const char *const dims[5] = {"batch", "seq", "pair", "head", "dim"};

static dswa_status check_strides(const char *name, const dswa_layout *l) {
    const int64_t s[5] = {l->batch, l->seq, l->pair, l->head, l->dim};
    for (int i = 0; i < 5; i++)
        if (s[i] < 0)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.%s = %lld: strides must be >= 0",
                             name, dims[i], (long long)s[i]);
    return DSWA_OK;
}

/* Largest element offset of a view, or -1 if it overflows int64. */
static int64_t max_offset(const dswa_problem *p, const dswa_layout *l, int pairs) {
    const int64_t ext[5] = {p->batch, p->seq_len, pairs, p->heads, p->head_dim};
    const int64_t s[5] = {l->batch, l->seq, l->pair, l->head, l->dim};
    int64_t off = 0;
    for (int i = 0; i < 5; i++) {
        int64_t t;
        if (ext[i] <= 1) continue;
        if (__builtin_mul_overflow(ext[i] - 1, s[i], &t) || __builtin_add_overflow(off, t, &off))
            return -1;
    }
    return off;
}

int64_t dswa_view_span(const dswa_problem *p, const dswa_layout *l, int pairs) {
    if (!p || !l || p->batch <= 0 || p->seq_len <= 0 || p->heads <= 0 || p->head_dim <= 0)
        return 0;
    int64_t m = max_offset(p, l, pairs);
    return m < 0 || m == INT64_MAX ? -1 : m + 1;
}

/* Distinct output elements must not share an address: sort the output's dimensions by stride
   and require each stride to step past everything the smaller ones span. */
static dswa_status check_out_aliasing(const dswa_problem *p) {
    int64_t ext[4] = {p->batch, p->seq_len, p->heads, p->head_dim};
    int64_t st[4] = {p->out.batch, p->out.seq, p->out.head, p->out.dim};
    const char *nm[4] = {"batch", "seq", "head", "dim"};
    int idx[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++)  /* insertion sort by stride */
        for (int j = i; j > 0 && st[idx[j]] < st[idx[j - 1]]; j--) {
            int t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t;
        }
    int64_t span = 0;  /* largest offset reachable with the dimensions seen so far */
    for (int i = 0; i < 4; i++) {
        int d = idx[i];
        if (ext[d] <= 1) continue;
        if (st[d] <= span)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                             "out.%s = %lld: output elements would alias (stride must exceed "
                             "%lld, the span of the smaller dimensions)",
                             nm[d], (long long)st[d], (long long)span);
        span += (ext[d] - 1) * st[d];  /* cannot overflow: max_offset checked it */
    }
    return DSWA_OK;
}

static int ranges_overlap(const void *a, int64_t abytes, const void *b, int64_t bbytes) {
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + (uintptr_t)bbytes && b0 < a0 + (uintptr_t)abytes;
}

/* The problem's fields and strides. */
static dswa_status check_problem(const dswa_problem *p) {
    dswa_status s;
    if (!p) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "problem = NULL: must point to a dswa_problem");
    if (p->batch < 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "batch = %d: must be >= 0", p->batch);
    if (p->seq_len < 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "seq_len = %d: must be >= 0", p->seq_len);
    if (p->heads <= 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "heads = %d: must be > 0", p->heads);
    if (p->head_dim <= 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "head_dim = %d: must be > 0", p->head_dim);
    if (p->window_left < 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "window_left = %d: must be >= 0", p->window_left);
    if (p->window_right < 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "window_right = %d: must be >= 0", p->window_right);
    if (!isfinite(p->scale))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "scale = %g: must be finite", (double)p->scale);
    if (!isfinite(p->lambda))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "lambda = %g: must be finite", (double)p->lambda);
    if (dswa_dtype_size(p->dtype) == 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "dtype = %d: must be DSWA_F32 (0), DSWA_F16 (1) or DSWA_BF16 (2)", (int)p->dtype);
    if ((unsigned)p->math > (unsigned)DSWA_MATH_FP32)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "math = %d: must be DSWA_MATH_DEFAULT (0), DSWA_MATH_TF32 (1) or DSWA_MATH_FP32 (2)",
                         (int)p->math);
    if ((s = check_strides("q", &p->q)) || (s = check_strides("k", &p->k)) ||
        (s = check_strides("v", &p->v)) || (s = check_strides("out", &p->out)))
        return s;
    return DSWA_OK;
}

static const char *const view_names[4] = {"q", "k", "v", "out"};

/* View i (q, k, v, out) has a pointer and a span whose bytes fit the address range. */
static dswa_status check_view(const dswa_problem *p, int i, const void *ptr, int64_t *bytes) {
    const dswa_layout *const lay[4] = {&p->q, &p->k, &p->v, &p->out};
    const dswa_layout *l = lay[i];
    const int64_t es = (int64_t)dswa_dtype_size(p->dtype);
    if (!ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s = NULL: must point to the tensor's data",
                         view_names[i]);
    int64_t span = dswa_view_span(p, l, i == 3 ? 1 : 2);
    if (span < 0 || __builtin_mul_overflow(span, es, bytes) ||
        (uintptr_t)*bytes > UINTPTR_MAX - (uintptr_t)ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "%s: strides (%lld, %lld, %lld, %lld, %lld) overflow the address range "
                         "for this problem's extents", view_names[i], (long long)l->batch,
                         (long long)l->seq, (long long)l->pair, (long long)l->head, (long long)l->dim);
    return DSWA_OK;
}

dswa_status dswa_validate_inputs(const dswa_problem *p, const void *q, const void *k, const void *v) {
    dswa_status s;
    int64_t bytes;
    dswa_clear_error();
    if ((s = check_problem(p))) return s;
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;  /* a valid no-op */
    if ((s = check_view(p, 0, q, &bytes)) || (s = check_view(p, 1, k, &bytes)) ||
        (s = check_view(p, 2, v, &bytes)))
        return s;
    return DSWA_OK;
}

dswa_status dswa_validate(const dswa_problem *p, const void *q, const void *k, const void *v,
                          const void *out) {
    dswa_status s;
    dswa_clear_error();
    if ((s = check_problem(p))) return s;
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;  /* a valid no-op */
    const void *ptr[4] = {q, k, v, out};
    int64_t bytes[4];
    for (int i = 0; i < 4; i++)
        if ((s = check_view(p, i, ptr[i], &bytes[i]))) return s;
    for (int i = 0; i < 3; i++)
        if (ranges_overlap(out, bytes[3], ptr[i], bytes[i]))
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                             "out: overlaps %s (output memory must not share bytes with any input)",
                             view_names[i]);
    return check_out_aliasing(p);
}
