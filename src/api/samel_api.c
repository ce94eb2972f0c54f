/* Public entry points of the fused SAME-L block, as api/api.c holds the op's: the default
   problem, its sizes, its kernel's name, and dispatch. Each forward and backward function runs
   the block's validation (core/samel_validate.c) first, then hands a non-empty problem to its
   backend. */
#include <math.h>

#include "api/api.h"
#include "core/internal.h"
#include "core/samel.h"
#include "cpu/backend.h"
#include "cuda/backend.h"
#include "cuda/kernels.h"

dswa_samel_problem dswa_samel_problem_default(int32_t batch, int32_t seq_len, int32_t heads) {
    dswa_samel_problem p;
    memset(&p, 0, sizeof p);
    p.batch = batch; p.seq_len = seq_len; p.heads = heads; p.head_dim = 64;
    p.window_left = p.window_right = 17;
    p.scale = 0.125f;
    p.lambda = 1.0f;
    p.dtype = DSWA_F32;
    p.math = DSWA_MATH_DEFAULT;
    const int64_t hd = (int64_t)heads * 64;
    const dswa_samel_layout in = {(int64_t)seq_len * 5 * hd, 5 * hd, hd, 64, 1};
    const dswa_layout o = {(int64_t)seq_len * hd, hd, 0, 64, 1};
    p.qkv = in;
    p.out = o;
    p.rot_dims = 32;
    p.rope_base = 10000.0f;
    p.q_norm.alpha = p.k_norm.alpha = 1.0f;
    return p;
}

double dswa_samel_min_bytes(const dswa_samel_problem *p) {
    const double units = (double)p->batch * p->seq_len * p->heads * p->head_dim;
    return units * (double)dswa_dtype_size(p->dtype) * (5.0 + 1.0);
}

double dswa_samel_backward_min_bytes(const dswa_samel_backward_problem *p) {
    const dswa_samel_problem *f = &p->fwd;
    const double units = (double)f->batch * f->seq_len * f->heads * f->head_dim;
    return units * (double)dswa_dtype_size(f->dtype) * (5.0 + 1.0 + 5.0);   /* x, dout; dx */
}

/* *r = *p with each norm's alpha_at read (host memory, the CPU backend's) into its alpha and
   checked as a host alpha is: the CPU backend works on host floats only. */
static dswa_status host_alphas(const dswa_samel_problem *p, dswa_samel_problem *r) {
    *r = *p;
    dswa_samel_norm *const n[2] = {&r->q_norm, &r->k_norm};
    static const char *const names[2] = {"q_norm", "k_norm"};
    for (int t = 0; t < 2; t++) {
        if (!n[t]->alpha_at) continue;
        n[t]->alpha = *n[t]->alpha_at;
        n[t]->alpha_at = NULL;
        if (!isfinite(n[t]->alpha))
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "%s.alpha_at points to %g: alpha must be "
                             "finite", names[t], (double)n[t]->alpha);
    }
    return DSWA_OK;
}

dswa_status dswa_samel_forward_cpu(const dswa_samel_problem *p, const void *qkv, void *out) {
    dswa_status s = dswa_samel_validate(p, qkv, out);
    if (s != DSWA_OK || p->batch == 0 || p->seq_len == 0) return s;
    dswa_samel_problem r;
    if ((s = host_alphas(p, &r))) return s;
    return dswa_samel_cpu_run(&r, qkv, out);
}

dswa_samel_backward_problem dswa_samel_backward_problem_default(const dswa_samel_problem *fwd) {
    dswa_samel_backward_problem p;
    memset(&p, 0, sizeof p);
    if (!fwd) return p;
    p.fwd = *fwd;
    p.dout = fwd->out;
    p.dqkv = fwd->qkv;
    return p;
}

dswa_status dswa_samel_backward_cpu(const dswa_samel_backward_problem *p, const void *qkv,
                                    const void *dout, void *dqkv, const dswa_samel_norm_grads *g) {
    dswa_status s = dswa_samel_validate_backward(p, qkv, dout, dqkv, g);
    if (s != DSWA_OK) return s;
    if (p->fwd.batch == 0 || p->fwd.seq_len == 0) {
        if (g) {   /* the gradients of empty sums */
            const dswa_samel_norm_grad *n[2] = {&g->q_norm, &g->k_norm};
            for (int t = 0; t < 2; t++) {
                *n[t]->dalpha = 0.0f;
                memset(n[t]->dgamma, 0, sizeof(float) * (size_t)p->fwd.head_dim);
                memset(n[t]->dbeta, 0, sizeof(float) * (size_t)p->fwd.head_dim);
            }
        }
        return DSWA_OK;
    }
    dswa_samel_backward_problem r = *p;
    if ((s = host_alphas(&p->fwd, &r.fwd))) return s;
    return dswa_samel_cpu_backward(&r, qkv, dout, dqkv, g);
}

dswa_status dswa_samel_forward_cuda(const dswa_samel_problem *p, const void *qkv, void *out,
                                    void *stream) {
    dswa_status s = dswa_samel_validate(p, qkv, out);
    if (s != DSWA_OK) return s;
    if (!dswa_cuda_probe()) return DSWA_ERR_NO_DEVICE;  /* dswa_cuda_probe recorded why */
    if (p->batch == 0 || p->seq_len == 0) return DSWA_OK;
    return dswa_cuda_samel_launch(p, qkv, out, stream);
}

const char *dswa_samel_kernel_name(const dswa_samel_problem *p) {
    if (!p) {
        (void)dswa_samel_validate(p, NULL, NULL);
        return NULL;
    }
    dswa_samel_problem f = *p; /* the fields only: an empty problem's pointers are not read */
    if (f.batch > 0) f.batch = 0;
    if (dswa_samel_validate(&f, NULL, NULL)) return NULL;
    if (!dswa_cuda_head_dim_ok(p->head_dim)) return NULL;
    const dswa_kernel *k = dswa_samel_kernel_pick(p->dtype, p->math, dswa_window_seen(p->window_left, p->seq_len),
                                                  dswa_window_seen(p->window_right, p->seq_len), p->rot_dims);
    return k ? k->entry : NULL;
}

size_t dswa_samel_backward_workspace_bytes(const dswa_samel_backward_problem *p) {
    dswa_samel_bwd_ws w;
    return p ? dswa_samel_bwd_workspace_layout(p->fwd.batch, p->fwd.seq_len, p->fwd.heads,
                                               p->fwd.head_dim, &w)
             : 0;
}

/* Bytes spanned by a packed [batch, seq, chunk, head, dim] view of p (validated: it fits). */
static uintptr_t packed_span_bytes(const dswa_samel_problem *p, const dswa_samel_layout *x) {
    const int64_t off = (int64_t)(p->batch - 1) * x->batch + (int64_t)(p->seq_len - 1) * x->seq +
                        4 * x->chunk + (int64_t)(p->heads - 1) * x->head +
                        (int64_t)(p->head_dim - 1) * x->dim;
    return (uintptr_t)(off + 1) * dswa_dtype_size(p->dtype);
}

/* The fused CUDA backward's workspace: there, large enough, 256-byte aligned, and apart from
   every tensor, the norms' weights and g's pointers (the bytes the kernels use: [workspace,
   workspace + need)). */
static dswa_status check_samel_workspace(const dswa_samel_backward_problem *bp, const void *qkv,
                                         const void *dout, const void *dqkv,
                                         const dswa_samel_norm_grads *g, const void *ws,
                                         size_t bytes) {
    const dswa_samel_problem *p = &bp->fwd;
    const size_t need = dswa_samel_backward_workspace_bytes(bp);
    if (need == SIZE_MAX)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "batch * seq_len * heads * head_dim = %d * %d "
                         "* %d * %d: the workspace would not fit a size_t", p->batch, p->seq_len,
                         p->heads, p->head_dim);
    dswa_status s = dswa_check_workspace_room(need, ws, bytes, 256,
                                              "dswa_samel_backward_workspace_bytes");
    if (s != DSWA_OK || need == 0) return s;
    const dswa_problem d = dswa_samel_op_problem(p);
    const uintptr_t nb = (uintptr_t)p->head_dim * sizeof(float);
    struct { const char *name; const void *ptr; uintptr_t len; } t[13] = {
        {"qkv", qkv, packed_span_bytes(p, &p->qkv)},
        {"dout", dout, (uintptr_t)dswa_view_span(&d, &bp->dout, 1) * dswa_dtype_size(p->dtype)},
        {"dqkv", dqkv, packed_span_bytes(p, &bp->dqkv)},
        {"q_norm.gamma", p->q_norm.gamma, nb}, {"q_norm.beta", p->q_norm.beta, nb},
        {"k_norm.gamma", p->k_norm.gamma, nb}, {"k_norm.beta", p->k_norm.beta, nb},
    };
    int n = 7;
    if (g) {
        const dswa_samel_norm_grad *ng[2] = {&g->q_norm, &g->k_norm};
        static const char *const names[2][3] = {{"q_norm.dalpha", "q_norm.dgamma", "q_norm.dbeta"},
                                                {"k_norm.dalpha", "k_norm.dgamma", "k_norm.dbeta"}};
        for (int k = 0; k < 2; k++) {
            t[n].name = names[k][0]; t[n].ptr = ng[k]->dalpha; t[n++].len = sizeof(float);
            t[n].name = names[k][1]; t[n].ptr = ng[k]->dgamma; t[n++].len = nb;
            t[n].name = names[k][2]; t[n].ptr = ng[k]->dbeta; t[n++].len = nb;
        }
    }
    const uintptr_t w0 = (uintptr_t)ws, w1 = w0 + need;
    for (int i = 0; i < n; i++) {
        const uintptr_t a = (uintptr_t)t[i].ptr;
        if (a < w1 && w0 < a + t[i].len)
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "workspace: overlaps %s (it must share "
                             "no byte with any tensor, norm weight or norm gradient)", t[i].name);
    }
    return DSWA_OK;
}

dswa_status dswa_samel_backward_cuda(const dswa_samel_backward_problem *p, const void *qkv,
                                     const void *dout, void *dqkv, const dswa_samel_norm_grads *g,
                                     void *workspace, size_t workspace_bytes, void *stream) {
    dswa_status s = dswa_samel_validate_backward(p, qkv, dout, dqkv, g);
    if (s != DSWA_OK) return s;
    if ((s = check_samel_workspace(p, qkv, dout, dqkv, g, workspace, workspace_bytes))) return s;
    if (!dswa_cuda_probe()) return DSWA_ERR_NO_DEVICE;  /* dswa_cuda_probe recorded why */
    return dswa_cuda_samel_backward_launch(p, qkv, dout, dqkv, g, workspace, stream);
}
