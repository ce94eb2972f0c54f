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

typedef dswa_vdim vdim;

/* Sorts the dimensions by stride and requires each stride to step past everything the smaller
   ones span (dimensions of extent 1 take no part). */
int dswa_find_alias(const vdim *dim, int n, int64_t *span) {
    int idx[6];
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++)  /* insertion sort by stride */
        for (int j = i; j > 0 && dim[idx[j]].stride < dim[idx[j - 1]].stride; j--) {
            int t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t;
        }
    *span = 0;  /* largest offset reachable with the dimensions seen so far */
    for (int i = 0; i < n; i++) {
        const vdim *d = &dim[idx[i]];
        int64_t t;
        if (d->extent <= 1) continue;
        if (d->stride <= *span) return idx[i];
        if (__builtin_mul_overflow(d->extent - 1, d->stride, &t) ||
            __builtin_add_overflow(*span, t, span))
            return idx[i];
    }
    return -1;
}

/* The dimensions of view `l` with `pairs` pairs (1: the pair dimension is left out). */
static int view_dims(const dswa_problem *p, const dswa_layout *l, int pairs, vdim *dim) {
    int n = 0;
    dim[n++] = (vdim){dims[0], l->batch, p->batch};
    dim[n++] = (vdim){dims[1], l->seq, p->seq_len};
    if (pairs > 1) dim[n++] = (vdim){dims[2], l->pair, pairs};
    dim[n++] = (vdim){dims[3], l->head, p->heads};
    dim[n++] = (vdim){dims[4], l->dim, p->head_dim};
    return n;
}

/* Distinct elements of an output view must not share an address. */
static dswa_status check_out_aliasing(const dswa_problem *p, const char *name,
                                      const dswa_layout *l, int pairs) {
    vdim dim[5];
    int64_t span;
    const int bad = dswa_find_alias(dim, view_dims(p, l, pairs, dim), &span);
    if (bad < 0) return DSWA_OK;
    return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                     "%s.%s = %lld: output elements would alias (stride must exceed %lld, the "
                     "span of the smaller dimensions)",
                     name, dim[bad].name, (long long)dim[bad].stride, (long long)span);
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

/* A view has a pointer and a span whose bytes fit the address range: *bytes. */
static dswa_status check_view_of(const dswa_problem *p, const char *name, const dswa_layout *l,
                                 int pairs, const void *ptr, int64_t *bytes) {
    const int64_t es = (int64_t)dswa_dtype_size(p->dtype);
    if (!ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s = NULL: must point to the tensor's data",
                         name);
    int64_t span = dswa_view_span(p, l, pairs);
    if (span < 0 || __builtin_mul_overflow(span, es, bytes) ||
        (uintptr_t)*bytes > UINTPTR_MAX - (uintptr_t)ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "%s: strides (%lld, %lld, %lld, %lld, %lld) overflow the address range "
                         "for this problem's extents", name, (long long)l->batch,
                         (long long)l->seq, (long long)l->pair, (long long)l->head, (long long)l->dim);
    return DSWA_OK;
}

/* View i of the forward (q, k, v, out). */
static dswa_status check_view(const dswa_problem *p, int i, const void *ptr, int64_t *bytes) {
    const dswa_layout *const lay[4] = {&p->q, &p->k, &p->v, &p->out};
    return check_view_of(p, view_names[i], lay[i], i == 3 ? 1 : 2, ptr, bytes);
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
    return check_out_aliasing(p, "out", &p->out, 1);
}

/* ---- the backward ---------------------------------------------------------------------- */

/* The gradients' views: dq, dk, dv; dv without its pair dimension when dv.pair == 0 (both
   pairs' contributions summed into one element, on purpose). */
static int grad_dims(const dswa_backward_problem *p, int g, vdim *dim) {
    const dswa_layout *const lay[3] = {&p->dq, &p->dk, &p->dv};
    return view_dims(&p->fwd, lay[g], g == 2 && p->dv.pair == 0 ? 1 : 2, dim);
}

/* 1 when delta = sum_k c_k * stride_k with |c_k| <= extent_k - 1 over dims[0..k] (sorted by
   stride, each stride above the span of the smaller ones): delta is a difference of two of the
   view's offsets. Each stride exceeds what the smaller dimensions can make up, so at most two
   values of c_k remain at each level. */
static int is_difference(const vdim *d, int k, int64_t delta) {
    if (k < 0) return delta == 0;
    const int64_t s = d[k].stride, lo = delta / s - 1, hi = delta / s + 1;
    for (int64_t c = lo; c <= hi; c++) {
        int64_t cs;
        if (c > -d[k].extent && c < d[k].extent && !__builtin_mul_overflow(c, s, &cs) &&
            is_difference(d, k - 1, delta - cs))
            return 1;
    }
    return 0;
}

/* The offsets of the dimensions of v not marked in `shared`, into r (at most 64); their count,
   or -1 when there are more. */
static int residual_offsets(const vdim *v, int n, const int *shared, int64_t *r) {
    int count = 1;
    r[0] = 0;
    for (int i = 0; i < n; i++) {
        if (shared[i] || v[i].extent <= 1) continue;
        if (count * v[i].extent > 64) return -1;
        for (int c = 1; c < v[i].extent; c++)
            for (int j = 0; j < count; j++) r[c * count + j] = r[j] + c * v[i].stride;
        count *= (int)v[i].extent;
    }
    return count;
}

/* 1 when views a (at pa) and b (at pb), each free of aliasing, share no element. The
   dimensions both have (same stride and extent) form a view C; the rest of each is a few
   offsets (a pair, a chunk). a's element c + r (c in C) meets b's c' + r' iff c - c' =
   (pb - pa) + r' - r, a difference of two offsets of C: tested for every r, r'. Exact for
   chunks of one packed buffer; views with more than 64 offsets outside C count as sharing. */
static int views_apart(const vdim *a, int na, const char *pa, const vdim *b, int nb,
                       const char *pb, int64_t es) {
    int sa[6] = {0}, sb[6] = {0}, nc = 0;
    vdim c[6];
    for (int i = 0; i < na; i++) {
        if (a[i].extent <= 1) continue;
        for (int j = 0; j < nb && !sa[i]; j++)
            if (!sb[j] && b[j].stride == a[i].stride && b[j].extent == a[i].extent) {
                sa[i] = sb[j] = 1;
                c[nc++] = a[i];
            }
    }
    for (int i = 1; i < nc; i++)   /* sort C by stride */
        for (int j = i; j > 0 && c[j].stride < c[j - 1].stride; j--) {
            const vdim t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
        }
    int64_t ra[64], rb[64];
    const int ka = residual_offsets(a, na, sa, ra), kb = residual_offsets(b, nb, sb, rb);
    const intptr_t gap = (intptr_t)((uintptr_t)pb - (uintptr_t)pa);  /* within one span */
    if (ka < 0 || kb < 0 || gap % es != 0) return 0;
    for (int i = 0; i < ka; i++)
        for (int j = 0; j < kb; j++)
            if (is_difference(c, nc - 1, (int64_t)(gap / es) + rb[j] - ra[i])) return 0;
    return 1;
}

/* The backward's own layouts' strides, and its inputs: what the backends and the reference
   all check before reading anything. */
static dswa_status check_backward_inputs(const dswa_backward_problem *p, const void *q,
                                         const void *k, const void *v, const void *dout,
                                         int64_t *in_bytes) {
    dswa_status s;
    if (!p)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "problem = NULL: must point to a dswa_backward_problem");
    const dswa_problem *f = &p->fwd;
    if ((s = check_problem(f)) || (s = check_strides("dout", &p->dout)) ||
        (s = check_strides("dq", &p->dq)) || (s = check_strides("dk", &p->dk)) ||
        (s = check_strides("dv", &p->dv)))
        return s;
    if (f->batch == 0 || f->seq_len == 0) return DSWA_OK;  /* a valid no-op */
    const void *ptr[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if ((s = check_view(f, i, ptr[i], &in_bytes[i]))) return s;
    return check_view_of(f, "dout", &p->dout, 1, dout, &in_bytes[3]);
}

dswa_status dswa_validate_backward_inputs(const dswa_backward_problem *p, const void *q,
                                          const void *k, const void *v, const void *dout) {
    int64_t in_bytes[4];
    dswa_clear_error();
    return check_backward_inputs(p, q, k, v, dout, in_bytes);
}

dswa_status dswa_validate_backward(const dswa_backward_problem *p, const void *q, const void *k,
                                   const void *v, const void *dout, const void *dq,
                                   const void *dk, const void *dv, const float *dlambda) {
    static const char *const in_names[4] = {"q", "k", "v", "dout"};
    static const char *const grad_names[3] = {"dq", "dk", "dv"};
    dswa_status s;
    int64_t in_bytes[4], grad_bytes[3];
    dswa_clear_error();
    if ((s = check_backward_inputs(p, q, k, v, dout, in_bytes))) return s;
    const dswa_problem *f = &p->fwd;
    if (f->batch == 0 || f->seq_len == 0) return DSWA_OK;
    const dswa_layout *const grad_lay[3] = {&p->dq, &p->dk, &p->dv};
    const void *const in[4] = {q, k, v, dout}, *const grad[3] = {dq, dk, dv};
    vdim gdims[3][5];
    int ndims[3];
    for (int g = 0; g < 3; g++) {
        if ((s = check_view_of(f, grad_names[g], grad_lay[g], 2, grad[g], &grad_bytes[g])))
            return s;
        ndims[g] = grad_dims(p, g, gdims[g]);
        int64_t span;
        const int bad = dswa_find_alias(gdims[g], ndims[g], &span);
        if (bad >= 0)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                             "%s.%s = %lld: gradient elements would alias (stride must exceed "
                             "%lld, the span of the smaller dimensions)",
                             grad_names[g], gdims[g][bad].name, (long long)gdims[g][bad].stride,
                             (long long)span);
    }
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < 4; i++)
            if (ranges_overlap(grad[g], grad_bytes[g], in[i], in_bytes[i]))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                                 "%s: overlaps %s (gradient memory must not share bytes with "
                                 "any input)", grad_names[g], in_names[i]);
    const int64_t es = (int64_t)dswa_dtype_size(f->dtype);
    for (int g = 1; g < 3; g++)
        for (int o = 0; o < g; o++)
            if (ranges_overlap(grad[g], grad_bytes[g], grad[o], grad_bytes[o]) &&
                !views_apart(gdims[g], ndims[g], (const char *)grad[g], gdims[o], ndims[o],
                              (const char *)grad[o], es))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                                 "%s: overlaps %s (gradients must not share elements; chunks "
                                 "of one packed buffer with the same strides are fine)",
                                 grad_names[g], grad_names[o]);
    if (dlambda) {
        for (int i = 0; i < 4; i++)
            if (ranges_overlap(dlambda, sizeof *dlambda, in[i], in_bytes[i]))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dlambda: overlaps %s (it must "
                                 "share no byte with any input or gradient)", in_names[i]);
        for (int g = 0; g < 3; g++)
            if (ranges_overlap(dlambda, sizeof *dlambda, grad[g], grad_bytes[g]))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dlambda: overlaps %s (it must "
                                 "share no byte with any input or gradient)", grad_names[g]);
    }
    return DSWA_OK;
}
