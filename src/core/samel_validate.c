/* The fused SAME-L block's validation. The fields it shares with the op (sizes, windows,
   scale, lambda, dtype, math, out) are checked by the op's own dswa_validate on the problem the
   block reduces to, so both report them alike; this file checks what is the block's own: the
   packed input, the norms, RoPE. */
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
    if (!isfinite(n->alpha))
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

/* The packed input's stride signs, before anything derived from them is checked. */
static dswa_status check_qkv_strides(const dswa_samel_layout *x) {
    static const char *const nm[5] = {"batch", "seq", "chunk", "head", "dim"};
    const int64_t s[5] = {x->batch, x->seq, x->chunk, x->head, x->dim};
    for (int i = 0; i < 5; i++)
        if (s[i] < 0)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "qkv.%s = %lld: strides must be >= 0",
                             nm[i], (long long)s[i]);
    if (x->chunk > INT64_MAX / 4)  /* the op's view of it strides pairs by 3 chunks */
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "qkv.chunk = %lld: too large (> 2^61)",
                         (long long)x->chunk);
    return DSWA_OK;
}

static dswa_status check_rope(const dswa_samel_problem *p) {
    if (p->rot_dims < 0 || p->rot_dims > p->head_dim || p->rot_dims % 2)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "rot_dims = %d: must be even and in [0, head_dim = %d]", p->rot_dims,
                         p->head_dim);
    if (!(p->rope_base > 0.0f) || !isfinite(p->rope_base))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rope_base = %g: must be finite and > 0",
                         (double)p->rope_base);
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

/* Bytes spanned by the packed input, or -1 on overflow (extents already checked >= 0). */
static int64_t qkv_bytes(const dswa_samel_problem *p) {
    const int64_t ext[5] = {p->batch, p->seq_len, 5, p->heads, p->head_dim};
    const int64_t st[5] = {p->qkv.batch, p->qkv.seq, p->qkv.chunk, p->qkv.head, p->qkv.dim};
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

dswa_status dswa_samel_validate(const dswa_samel_problem *p, const void *qkv, const void *out) {
    dswa_status s;
    dswa_clear_error();
    if (!p)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "problem = NULL: must point to a dswa_samel_problem");
    if ((s = check_qkv_strides(&p->qkv))) return s;
    const dswa_problem d = dswa_samel_op_problem(p);
    /* The shared fields, with no pointer looked at: the op checks every field and stride and
       stops there when the problem is empty, so it is asked about an empty one (batch 0, or
       the negative batch it must refuse). */
    dswa_problem fields = d;
    if (fields.batch > 0) fields.batch = 0;
    if ((s = dswa_validate(&fields, NULL, NULL, NULL, NULL))) return s;
    if ((s = check_rope(p)) || (s = check_norm("q_norm", &p->q_norm)) ||
        (s = check_norm("k_norm", &p->k_norm)))
        return s;
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;  /* a valid no-op */

    if (!qkv)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "qkv = NULL: must point to the packed input");
    const int64_t xb = qkv_bytes(p);
    if (xb < 0 || (uintptr_t)xb > UINTPTR_MAX - (uintptr_t)qkv)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                         "qkv: strides (%lld, %lld, %lld, %lld, %lld) overflow the address range "
                         "for this problem's extents", (long long)p->qkv.batch,
                         (long long)p->qkv.seq, (long long)p->qkv.chunk, (long long)p->qkv.head,
                         (long long)p->qkv.dim);
    if ((s = check_norm_pointers("q_norm", &p->q_norm, p->head_dim)) ||
        (s = check_norm_pointers("k_norm", &p->k_norm, p->head_dim)))
        return s;

    /* Overlaps with the output, named by the block's own inputs (the op would say "q"). Its
       span is known once it is finite; dswa_validate below reports it otherwise. */
    const int64_t es = (int64_t)dswa_dtype_size(p->dtype), ospan = dswa_view_span(&d, &d.out, 1);
    int64_t ob;
    if (out && ospan > 0 && !__builtin_mul_overflow(ospan, es, &ob) &&
        (uintptr_t)ob <= UINTPTR_MAX - (uintptr_t)out) {
        const int64_t nb = (int64_t)p->head_dim * (int64_t)sizeof(float);
        const void *const in[5] = {qkv, p->q_norm.gamma, p->q_norm.beta, p->k_norm.gamma,
                                   p->k_norm.beta};
        const int64_t inb[5] = {xb, nb, nb, nb, nb};
        static const char *const nm[5] = {"qkv", "q_norm.gamma", "q_norm.beta", "k_norm.gamma",
                                          "k_norm.beta"};
        for (int i = 0; i < 5; i++)
            if (overlaps(out, ob, in[i], inb[i]))
                return dswa_fail(DSWA_ERR_INVALID_ARGUMENT,
                                 "out: overlaps %s (output memory must not share bytes with any "
                                 "input)", nm[i]);
    }
    /* The output's pointer, span and aliasing, as the op checks them. */
    const char *x = (const char *)qkv;
    return dswa_validate(&d, x, x + p->qkv.chunk * es, x + 2 * p->qkv.chunk * es, out);
}
