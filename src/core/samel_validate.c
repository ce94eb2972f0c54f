/* The fused SAME-L block's validation. The fields it shares with the op (sizes, windows,
   scale, lambda, dtype, math, out) are checked by the op's own dswa_validate on the problem the
   block reduces to, so both report them alike; this file checks what is the block's own: the
   packed input, the norms, RoPE, and for the backward the packed gradient and the norms'
   gradients. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include "core/internal.h"
#include "core/samel.h"

static int overlaps(const void *a, int64_t abytes, const void *b, int64_t bbytes) {
    const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + (uintptr_t)bbytes && b0 < a0 + (uintptr_t)abytes;
}

static dswa_status check_norm(const char *name, const dswa_samel_norm *n) {
    if ((uintptr_t)n->alpha_at % sizeof(float))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.alpha_at = %p: must be 4-byte aligned "
                         "(a float)", name, (const void *)n->alpha_at);
    if (!n->alpha_at && !isfinite(n->alpha))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.alpha = %g: must be finite", name,
                         (double)n->alpha);
    return DSWA_OK;
}

static dswa_status check_norm_pointers(const char *name, const dswa_samel_norm *n, int32_t D) {
    if (!n->gamma)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "%s.gamma = NULL: must point to head_dim (%d) floats", name, D);
    if (!n->beta)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "%s.beta = NULL: must point to head_dim (%d) floats", name, D);
    return DSWA_OK;
}

/* Strides of a five-dimensional view are >= 0: "view.dim = value" otherwise. */
static dswa_status check_strides5(const char *view, const int64_t *s, const char *const *dim) {
    for (int i = 0; i < 5; i++)
        if (s[i] < 0)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.%s = %lld: strides must be >= 0",
                             view, dim[i], (long long)s[i]);
    return DSWA_OK;
}

static const char *const packed_dims[5] = {"batch", "seq", "chunk", "head", "dim"};

/* A packed view's stride signs, before anything derived from them is checked. */
static dswa_status check_packed_strides(const char *view, const dswa_samel_layout *x) {
    const int64_t s[5] = {x->batch, x->seq, x->chunk, x->head, x->dim};
    dswa_status st = check_strides5(view, s, packed_dims);
    if (st) return st;
    if (x->chunk > INT64_MAX / 4)  /* the op's view of it strides pairs by 3 chunks */
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.chunk = %lld: too large (> 2^61)", view,
                         (long long)x->chunk);
    return DSWA_OK;
}

static dswa_status check_rope(const dswa_samel_problem *p) {
    if (p->rot_dims < 0 || p->rot_dims > p->head_dim || p->rot_dims % 2)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "rot_dims = %d: must be even and in [0, head_dim = %d]", p->rot_dims,
                         p->head_dim);
    if (p->rope_freq) {
        for (int32_t f = 0; f < p->rot_dims / 2; f++)
            if (!isfinite(p->rope_freq[f]))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rope_freq[%d] = %g: must be finite",
                                 f, (double)p->rope_freq[f]);
    } else if (!(p->rope_base > 0.0f) || !isfinite(p->rope_base)) {
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rope_base = %g: must be finite and > 0",
                         (double)p->rope_base);
    }
    if (p->pos_offset < 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "pos_offset = %d: must be >= 0",
                         p->pos_offset);
    if (p->seq_len > 0 && (int64_t)p->pos_offset + p->seq_len - 1 > INT32_MAX)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "pos_offset = %d: the last position pos_offset + seq_len - 1 = %lld "
                         "does not fit int32", p->pos_offset,
                         (long long)p->pos_offset + p->seq_len - 1);
    return DSWA_OK;
}

/* Bytes spanned by a packed view of p, or -1 on overflow (extents already checked >= 0). */
static int64_t packed_bytes(const dswa_samel_problem *p, const dswa_samel_layout *x) {
    const int64_t ext[5] = {p->batch, p->seq_len, 5, p->heads, p->head_dim};
    const int64_t st[5] = {x->batch, x->seq, x->chunk, x->head, x->dim};
    int64_t off = 0, t;
    for (int i = 0; i < 5; i++) {
        if (__builtin_mul_overflow(ext[i] - 1, st[i], &t) || __builtin_add_overflow(off, t, &off))
            return -1;
    }
    if (__builtin_add_overflow(off, 1, &off) ||
        __builtin_mul_overflow(off, (int64_t)dswa_dtype_size(p->dtype), &off))
        return -1;
    return off;
}

/* A packed view's pointer, and its span within the address range: *bytes. */
static dswa_status check_packed_view(const dswa_samel_problem *p, const char *view,
                                     const dswa_samel_layout *x, const void *ptr,
                                     const char *what, int64_t *bytes) {
    if (!ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s = NULL: must point to the %s", view, what);
    *bytes = packed_bytes(p, x);
    if (*bytes < 0 || (uintptr_t)*bytes > UINTPTR_MAX - (uintptr_t)ptr)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "%s: strides (%lld, %lld, %lld, %lld, %lld) overflow the address range "
                         "for this problem's extents", view, (long long)x->batch,
                         (long long)x->seq, (long long)x->chunk, (long long)x->head,
                         (long long)x->dim);
    return DSWA_OK;
}

/* Everything the forward and the backward check before any pointer: the packed input's
   strides, the fields shared with the op (by the op's own dswa_validate, with no pointer looked
   at: it checks every field and stride and stops there when the problem is empty, so it is
   asked about an empty one: batch 0, or the negative batch it must refuse), RoPE and the
   norms' alphas. */
static dswa_status check_fields(const dswa_samel_problem *p) {
    dswa_status s;
    if ((s = check_packed_strides("qkv", &p->qkv))) return s;
    dswa_problem fields = dswa_samel_op_problem(p);
    if (fields.batch > 0) fields.batch = 0;
    if ((s = dswa_validate(&fields, NULL, NULL, NULL, NULL)) || (s = check_rope(p)) ||
        (s = check_norm("q_norm", &p->q_norm)) || (s = check_norm("k_norm", &p->k_norm)))
        return s;
    return DSWA_OK;
}

/* The inputs of a non-empty problem: the packed input (*xb: its bytes) and the norms'
   pointers. */
static dswa_status check_inputs(const dswa_samel_problem *p, const void *qkv, int64_t *xb) {
    dswa_status s;
    if ((s = check_packed_view(p, "qkv", &p->qkv, qkv, "packed input", xb)) ||
        (s = check_norm_pointers("q_norm", &p->q_norm, p->head_dim)) ||
        (s = check_norm_pointers("k_norm", &p->k_norm, p->head_dim)))
        return s;
    return DSWA_OK;
}

/* Spans an output must keep clear of, named for messages: the inputs (qkv, the norms'
   vectors and, for the backward, dout) and, for the backward's norm gradients, dqkv. */
typedef struct span_list { const void *ptr[10]; int64_t bytes[10]; const char *name[10]; int n; } span_list;

static void span_add(span_list *l, const char *name, const void *ptr, int64_t bytes) {
    l->ptr[l->n] = ptr;
    l->bytes[l->n] = bytes;
    l->name[l->n++] = name;
}

static span_list input_spans(const dswa_samel_problem *p, const void *qkv, int64_t xb) {
    span_list l;
    l.n = 0;
    const int64_t nb = (int64_t)p->head_dim * (int64_t)sizeof(float);
    span_add(&l, "qkv", qkv, xb);
    span_add(&l, "q_norm.gamma", p->q_norm.gamma, nb);
    span_add(&l, "q_norm.beta", p->q_norm.beta, nb);
    span_add(&l, "k_norm.gamma", p->k_norm.gamma, nb);
    span_add(&l, "k_norm.beta", p->k_norm.beta, nb);
    if (p->q_norm.alpha_at) span_add(&l, "q_norm.alpha_at", p->q_norm.alpha_at, sizeof(float));
    if (p->k_norm.alpha_at) span_add(&l, "k_norm.alpha_at", p->k_norm.alpha_at, sizeof(float));
    return l;
}

/* `name` (bytes at ptr) shares no byte with anything in l: else "name: overlaps x (why)". */
static dswa_status check_apart(const char *name, const void *ptr, int64_t bytes,
                               const span_list *l, const char *why) {
    for (int i = 0; i < l->n; i++)
        if (overlaps(ptr, bytes, l->ptr[i], l->bytes[i]))
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s: overlaps %s (%s)", name, l->name[i],
                             why);
    return DSWA_OK;
}

dswa_status dswa_samel_validate(const dswa_samel_problem *p, const void *qkv, const void *out) {
    dswa_status s;
    dswa_clear_error();
    if (!p)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "problem = NULL: must point to a dswa_samel_problem");
    if ((s = check_fields(p))) return s;
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;  /* a valid no-op */
    int64_t xb;
    if ((s = check_inputs(p, qkv, &xb))) return s;

    /* Overlaps with the output, named by the block's own inputs (the op would say "q"). Its
       span is known once it is finite; dswa_validate below reports it otherwise. */
    const dswa_problem d = dswa_samel_op_problem(p);
    const int64_t es = (int64_t)dswa_dtype_size(p->dtype), ospan = dswa_view_span(&d, &d.out, 1);
    int64_t ob;
    if (out && ospan > 0 && !__builtin_mul_overflow(ospan, es, &ob) &&
        (uintptr_t)ob <= UINTPTR_MAX - (uintptr_t)out) {
        const span_list in = input_spans(p, qkv, xb);
        if ((s = check_apart("out", out, ob, &in,
                             "output memory must not share bytes with any input")))
            return s;
    }
    /* The output's pointer, span and aliasing, as the op checks them. */
    const char *x = (const char *)qkv;
    return dswa_validate(&d, x, x + p->qkv.chunk * es, x + 2 * p->qkv.chunk * es, out);
}

/* ---- the backward ---------------------------------------------------------------------- */

/* g's six pointers, named, with their bytes. */
static span_list grad_spans(const dswa_samel_norm_grads *g, int32_t D) {
    span_list l;
    l.n = 0;
    const int64_t nb = (int64_t)D * (int64_t)sizeof(float);
    span_add(&l, "q_norm.dalpha", g->q_norm.dalpha, (int64_t)sizeof(float));
    span_add(&l, "q_norm.dgamma", g->q_norm.dgamma, nb);
    span_add(&l, "q_norm.dbeta", g->q_norm.dbeta, nb);
    span_add(&l, "k_norm.dalpha", g->k_norm.dalpha, (int64_t)sizeof(float));
    span_add(&l, "k_norm.dgamma", g->k_norm.dgamma, nb);
    span_add(&l, "k_norm.dbeta", g->k_norm.dbeta, nb);
    return l;
}

static const char *const keep_apart = "gradient memory must not share bytes with any input "
                                      "or other gradient";

/* g's pointers: non-NULL, and apart from each other. */
static dswa_status check_norm_grads(const span_list *gl, int32_t D) {
    dswa_status s;
    for (int i = 0; i < gl->n; i++) {
        if (!gl->ptr[i])
            return i % 3 == 0
                       ? dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s = NULL: must point to a float",
                                   gl->name[i])
                       : dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                                   "%s = NULL: must point to head_dim (%d) floats", gl->name[i], D);
        span_list before = *gl;
        before.n = i;
        if ((s = check_apart(gl->name[i], gl->ptr[i], gl->bytes[i], &before, keep_apart)))
            return s;
    }
    return DSWA_OK;
}

dswa_status dswa_samel_validate_backward(const dswa_samel_backward_problem *bp, const void *qkv,
                                         const void *dout, const void *dqkv,
                                         const dswa_samel_norm_grads *g) {
    static const char *const layout_dims[5] = {"batch", "seq", "pair", "head", "dim"};
    dswa_status s;
    dswa_clear_error();
    if (!bp)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "problem = NULL: must point to a dswa_samel_backward_problem");
    const dswa_samel_problem *p = &bp->fwd;
    const dswa_layout *o = &bp->dout;
    const int64_t ost[5] = {o->batch, o->seq, o->pair, o->head, o->dim};
    if ((s = check_fields(p)) || (s = check_strides5("dout", ost, layout_dims)) ||
        (s = check_packed_strides("dqkv", &bp->dqkv)))
        return s;
    span_list gl;
    gl.n = 0;
    if (g) {
        gl = grad_spans(g, p->head_dim);
        if ((s = check_norm_grads(&gl, p->head_dim))) return s;
    }
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;  /* a valid no-op */

    int64_t xb = 0, gb = 0;
    if ((s = check_inputs(p, qkv, &xb))) return s;
    /* dout as the op's backward checks it (its name and messages) */
    dswa_backward_problem ob;
    memset(&ob, 0, sizeof ob);
    ob.fwd = dswa_samel_op_problem(p);
    ob.dout = *o;
    ob.dq = ob.dk = ob.fwd.q;
    ob.dv = ob.fwd.v;
    const int64_t es = (int64_t)dswa_dtype_size(p->dtype);
    const char *x = (const char *)qkv;
    if ((s = dswa_validate_backward_inputs(&ob, x, x + p->qkv.chunk * es,
                                           x + 2 * p->qkv.chunk * es, dout)))
        return s;
    span_list in = input_spans(p, qkv, xb);
    span_add(&in, "dout", dout, dswa_view_span(&ob.fwd, o, 1) * es);   /* finite: checked */

    const dswa_samel_layout *dx = &bp->dqkv;
    if ((s = check_packed_view(p, "dqkv", dx, dqkv, "packed gradient", &gb))) return s;
    const dswa_vdim dim[5] = {{packed_dims[0], dx->batch, p->batch},
                              {packed_dims[1], dx->seq, p->seq_len},
                              {packed_dims[2], dx->chunk, 5},
                              {packed_dims[3], dx->head, p->heads},
                              {packed_dims[4], dx->dim, p->head_dim}};
    int64_t span;
    const int bad = dswa_find_alias(dim, 5, &span);
    if (bad >= 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "dqkv.%s = %lld: gradient elements would alias (stride must exceed "
                         "%lld, the span of the smaller dimensions)",
                         dim[bad].name, (long long)dim[bad].stride, (long long)span);
    if ((s = check_apart("dqkv", dqkv, gb, &in, keep_apart))) return s;
    span_add(&in, "dqkv", dqkv, gb);
    for (int i = 0; i < gl.n; i++)
        if ((s = check_apart(gl.name[i], gl.ptr[i], gl.bytes[i], &in, keep_apart))) return s;
    return DSWA_OK;
}
