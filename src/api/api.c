/* Public entry points (the top layer): the default problems, their sizes, and dispatch. Each
   forward and backward function runs the shared validation (src/core/) first, then hands a
   non-empty problem to its backend (src/cpu/, src/cuda/). */
#include <math.h>
#include "api/api.h"
#include "core/internal.h"
#include "cpu/backend.h"
#include "cuda/backend.h"
#include "cuda/kernels.h"

dswa_problem dswa_problem_default(int32_t batch, int32_t seq_len, int32_t heads,
                                  int32_t head_dim, int32_t window) {
    dswa_problem p;
    memset(&p, 0, sizeof p);
    p.batch = batch; p.seq_len = seq_len; p.heads = heads; p.head_dim = head_dim;
    p.window_left = p.window_right = window;
    p.scale = head_dim > 0 ? (float)(1.0 / sqrt((double)head_dim)) : 1.0f;
    p.lambda = 1.0f;
    p.dtype = DSWA_F32;
    p.math = DSWA_MATH_DEFAULT;
    const int64_t hd = (int64_t)heads * head_dim;
    const dswa_layout in = {(int64_t)seq_len * 2 * hd, 2 * hd, hd, head_dim, 1};
    const dswa_layout o = {(int64_t)seq_len * hd, hd, 0, head_dim, 1};
    p.q = p.k = p.v = in;
    p.out = o;
    return p;
}

double dswa_min_bytes(const dswa_problem *p) {
    const double tokens = (double)p->batch * p->seq_len;
    const double hd = (double)p->heads * p->head_dim, es = (double)dswa_dtype_size(p->dtype);
    const double v_heads = p->v.pair == 0 ? 1.0 : 2.0;
    return tokens * hd * es * (2.0 + 2.0 + v_heads + 1.0);
}

double dswa_backward_min_bytes(const dswa_backward_problem *p) {
    const dswa_problem *f = &p->fwd;
    const double units = (double)f->batch * f->seq_len * f->heads * f->head_dim;
    const double v_in = f->v.pair == 0 ? 1.0 : 2.0, dv_out = p->dv.pair == 0 ? 1.0 : 2.0;
    /* read: q, k (2H), v, dout (H); written: dq, dk (2H), dv */
    return units * (double)dswa_dtype_size(f->dtype) * (2.0 + 2.0 + v_in + 1.0 + 2.0 + 2.0 + dv_out);
}

double dswa_useful_flops(const dswa_problem *p) {
    /* Keys seen per query summed over positions: min(N-1, i+R) - max(0, i-L) + 1. */
    const int64_t n = p->seq_len, L = p->window_left, R = p->window_right;
    double keys = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t lo = i - L < 0 ? 0 : i - L, hi = i + R > n - 1 ? n - 1 : i + R;
        keys += (double)(hi - lo + 1);
    }
    /* QK^T and PV: 2 flops per multiply-add, D each, for both pairs of every head. */
    return keys * 4.0 * p->head_dim * 2.0 * p->heads * p->batch;
}

dswa_status dswa_forward_cpu(const dswa_problem *p, const void *q, const void *k,
                             const void *v, void *out) {
    dswa_status s = dswa_validate(p, q, k, v, out);
    if (s != DSWA_OK || p->batch == 0 || p->seq_len == 0) return s;
    return dswa_cpu_run(p, q, k, v, out);
}

dswa_status dswa_forward_cuda(const dswa_problem *p, const void *q, const void *k,
                              const void *v, void *out, void *stream) {
    dswa_status s = dswa_validate(p, q, k, v, out);
    if (s != DSWA_OK) return s;
    if (!dswa_cuda_probe())
        return DSWA_ERR_NO_DEVICE;  /* dswa_cuda_probe recorded why */
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;
    return dswa_cuda_launch(p, q, k, v, out, stream);
}

const char *dswa_kernel_name(const dswa_problem *p) {
    if (!p) {
        (void)dswa_validate(p, NULL, NULL, NULL, NULL);
        return NULL;
    }
    dswa_problem f = *p; /* the fields only: an empty problem's pointers are not read */
    if (f.batch > 0) f.batch = 0;
    if (dswa_validate(&f, NULL, NULL, NULL, NULL)) return NULL;
    if (!dswa_cuda_head_dim_ok(p->head_dim)) return NULL;
    const dswa_kernel *k = dswa_kernel_pick_or_fail(p->dtype, p->math, dswa_window_seen(p->window_left, p->seq_len),
                                                    dswa_window_seen(p->window_right, p->seq_len));
    return k ? k->entry : NULL;
}

dswa_backward_problem dswa_backward_problem_default(const dswa_problem *fwd) {
    dswa_backward_problem p;
    memset(&p, 0, sizeof p);
    if (!fwd) return p;
    p.fwd = *fwd;
    p.dout = fwd->out;
    p.dq = fwd->q;
    p.dk = fwd->k;
    p.dv = fwd->v;
    return p;
}

dswa_status dswa_backward_cpu(const dswa_backward_problem *p, const void *q, const void *k,
                              const void *v, const void *dout, void *dq, void *dk, void *dv,
                              float *dlambda) {
    dswa_status s = dswa_validate_backward(p, q, k, v, dout, dq, dk, dv, dlambda);
    if (s != DSWA_OK) return s;
    if (p->fwd.batch == 0 || p->fwd.seq_len == 0) {
        if (dlambda) *dlambda = 0.0f;  /* the gradient of an empty sum */
        return DSWA_OK;
    }
    return dswa_cpu_backward(p, q, k, v, dout, dq, dk, dv, dlambda);
}

size_t dswa_backward_workspace_bytes(const dswa_backward_problem *p) {
    size_t offset, blocks;
    return p ? dswa_bwd_workspace_layout(p->fwd.batch, p->fwd.seq_len, p->fwd.heads, &offset,
                                         &blocks)
             : 0;
}

dswa_status dswa_check_workspace_room(size_t need, const void *ws, size_t bytes, size_t align,
                                      const char *sizer) {
    if (need == 0) return DSWA_OK;
    if (!ws)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "workspace = NULL: this problem needs %zu "
                         "bytes (%s)", need, sizer);
    if (bytes < need)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "workspace_bytes = %zu: this problem needs "
                         "%zu (%s)", bytes, need, sizer);
    if ((uintptr_t)ws % align)
        return dswa_fail(DSWA_ERR_MISALIGNED, "workspace = %p: must be %zu-byte aligned", ws,
                         align);
    return DSWA_OK;
}

/* The CUDA backward's workspace: there, large enough, aligned, and apart from every tensor
   and dlambda (the bytes the kernels use: [workspace, workspace + need)). */
static dswa_status check_workspace(const dswa_backward_problem *p, const void *const ptr[7],
                                   const float *dlambda, const void *ws, size_t bytes) {
    const size_t need = dswa_backward_workspace_bytes(p);
    if (need == SIZE_MAX)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "batch * seq_len * heads = %d * %d * %d: the "
                         "workspace would not fit a size_t", p->fwd.batch, p->fwd.seq_len,
                         p->fwd.heads);
    dswa_status s = dswa_check_workspace_room(need, ws, bytes, 16, "dswa_backward_workspace_bytes");
    if (s != DSWA_OK || need == 0) return s;
    static const char *const names[8] = {"q", "k", "v", "dout", "dq", "dk", "dv", "dlambda"};
    const dswa_layout *const lay[7] = {&p->fwd.q, &p->fwd.k, &p->fwd.v, &p->dout,
                                       &p->dq, &p->dk, &p->dv};
    const uintptr_t w0 = (uintptr_t)ws, w1 = w0 + need;
    for (int t = 0; t < 8; t++) {
        const uintptr_t a = t < 7 ? (uintptr_t)ptr[t] : (uintptr_t)dlambda;
        if (t == 7 && !dlambda) continue;
        /* validation bounded every span: it fits the address range */
        const uintptr_t len = t < 7 ? (uintptr_t)dswa_view_span(&p->fwd, lay[t], t == 3 ? 1 : 2) *
                                          dswa_dtype_size(p->fwd.dtype)
                                    : sizeof(float);
        if (a < w1 && w0 < a + len)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps %s (it must share "
                             "no byte with any tensor or dlambda)", names[t]);
    }
    return DSWA_OK;
}

dswa_status dswa_backward_cuda(const dswa_backward_problem *p, const void *q, const void *k,
                               const void *v, const void *dout, void *dq, void *dk, void *dv,
                               float *dlambda, void *workspace, size_t workspace_bytes,
                               void *stream) {
    dswa_status s = dswa_validate_backward(p, q, k, v, dout, dq, dk, dv, dlambda);
    if (s != DSWA_OK) return s;
    const void *const ptr[7] = {q, k, v, dout, dq, dk, dv};
    if ((s = check_workspace(p, ptr, dlambda, workspace, workspace_bytes))) return s;
    if (!dswa_cuda_probe())
        return DSWA_ERR_NO_DEVICE;  /* dswa_cuda_probe recorded why */
    return dswa_cuda_backward_launch(p, q, k, v, dout, dq, dk, dv, dlambda, workspace, stream);
}

int dswa_cuda_available(void) {
    char saved[DSWA_ERROR_MAX];
    dswa_error_save(saved);  /* probing must not clobber the caller's message */
    const int ok = dswa_cuda_probe();
    dswa_error_restore(saved);
    return ok;
}
