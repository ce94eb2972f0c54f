/* The CUDA backward of the op: dq, dk, dv and, on request, dlambda from dout (the math is in
 * include/dswa.h, the plan and the determinism rule in docs/BACKWARD.md). fp32 arithmetic for
 * every dtype and math (plain fp32 FMA, no tensor cores), dlambda summed in double.
 *
 * What it computes, in three kernels on the caller's stream:
 *  A. dswa_bwd_queries: one warp per query row i of one (batch, head); per pair, over J(i):
 *     the scores' max m and sum l (online, one pass), A_p[i] = sum P V, delta = <dA_p[i], A_p[i]>,
 *     then dq[i] = scale * sum_j P (dP - delta) K[j]. (m, 1 / l, delta) of both pairs go to the
 *     workspace's table, 6 floats per (b, h, i): all that kernel B needs from A. The block's
 *     share of dlambda (-sum dout . A_1 over its rows, in double) goes to the workspace too.
 *  B. dswa_bwd_keys: one warp per key row j; dk[j] and dv[j] gathered over the queries that
 *     see j, i = j - WR ... j + WL in increasing order, P(i, j) recomputed from the table with
 *     the same expression as kernel A. A summed dV (dv.pair == 0) adds pair 0's terms, then
 *     pair 1's, in one accumulator.
 *  C. dswa_bwd_dlambda (only with dlambda): one block sums A's partials in a fixed order.
 *
 * Why it is shaped so: gathering instead of scattering writes every output row once, from one
 * warp, after sums in a fixed order; with no atomics and no split depending on the device the
 * results are bitwise the same on every run. A lane owns dims lane and lane + 32 of a row and
 * reads it with element loads through int64 strides: every layout the CPU backend takes (any
 * strides, any element-aligned pointer, head_dim up to 64) works, and a row with dim stride 1
 * is read by the warp in one coalesced sweep. Neighbouring rows of a block read the same
 * window, so K, V, Q and dout rows are served by L1 after their first read. A dot product is
 * a lane's two products and a butterfly sum, so every lane holds the same bits. This is the
 * general kernel, written for clarity and determinism. The launcher below sends the 16-bit
 * problems of the forward's band (SAME-L's among them) to the tensor-core family instead
 * (kernel_backward_band.cu, picked by dswa_bwd_band_ok). Nothing here allocates or synchronizes: a call is capturable in
 * a CUDA graph. The kernel arguments are one struct of the public layouts (dswa.h is their
 * home, backward.cuh the struct's): these kernels have no TensorRT export, so kernel_args.h's
 * int32 table does not apply.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/backward.cuh"
#include "cuda/common.cuh"

#define ROWS_PER_WARP (DSWA_BWD_ROWS / DSWA_WARPS)

/* ---- rows: a lane's two elements -------------------------------------------------------- */

__device__ __forceinline__ int64_t at(const dswa_layout &l, int b, int i, int pr, int h) {
    return (int64_t)b * l.batch + (int64_t)i * l.seq + (int64_t)pr * l.pair + (int64_t)h * l.head;
}

/* Dims lane and lane + 32 of the row at element `off`; 0 past head_dim. */
template <typename T>
__device__ __forceinline__ void load_row(const void *base, int64_t off, const dswa_layout &l,
                                         int dim, float r[2]) {
    const T *p = (const T *)base + off;
    const int d = threadIdx.x & 31;
    r[0] = d < dim ? dswa_to_f32(p[(int64_t)d * l.dim]) : 0.f;
    r[1] = d + 32 < dim ? dswa_to_f32(p[(int64_t)(d + 32) * l.dim]) : 0.f;
}

template <typename T>
__device__ __forceinline__ void store_row(void *base, int64_t off, const dswa_layout &l, int dim,
                                          const float r[2]) {
    T *p = (T *)base + off;
    const int d = threadIdx.x & 31;
    if (d < dim) p[(int64_t)d * l.dim] = dswa_from_f32<T>(r[0]);
    if (d + 32 < dim) p[(int64_t)(d + 32) * l.dim] = dswa_from_f32<T>(r[1]);
}

/* <a, b> over the row, the same bits in every lane (see the top). */
__device__ __forceinline__ float dot(const float a[2], const float b[2]) {
    return dswa_warp_sum(__fmaf_rn(a[1], b[1], __fmul_rn(a[0], b[0])));
}

/* The score and P(i, j) from it and the row's (m, 1/l): one expression for kernels A and B,
   in intrinsics so that no FMA contraction can make the two kernels' bits differ. */
__device__ __forceinline__ float score(float scale, const float q[2], const float k[2]) {
    return __fmul_rn(scale, dot(q, k));
}
__device__ __forceinline__ float weight(float s, const float *st) {
    return __fmul_rn(expf(__fsub_rn(s, st[0])), st[1]);
}

/* ---- A: query rows ------------------------------------------------------------------------ */

template <typename T> __global__ void __launch_bounds__(DSWA_THREADS) dswa_bwd_queries(const bwd_args a) {
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int i0 = tile * DSWA_BWD_ROWS + warp * ROWS_PER_WARP;
    double part = 0.0;   /* this warp's rows' share of dlambda, in row order */
    for (int i = i0; i < i0 + ROWS_PER_WARP && i < a.n; i++) {
        const int lo = i - a.wl < 0 ? 0 : i - a.wl, hi = i + a.wr > a.n - 1 ? a.n - 1 : i + a.wr;
        float *st = a.table + (((int64_t)b * a.heads + h) * a.n + i) * 6;
        float g[2];
        load_row<T>(a.dout, at(a.ldout, b, i, 0, h), a.ldout, a.dim, g);
        for (int pr = 0; pr < 2; pr++) {
            float q[2], kr[2], vr[2], da[2], acc[2] = {0.f, 0.f}, A[2] = {0.f, 0.f};
            load_row<T>(a.q, at(a.lq, b, i, pr, h), a.lq, a.dim, q);
            const float c = pr == 0 ? 1.f : -a.lambda;
            da[0] = c * g[0];
            da[1] = c * g[1];
            /* max and sum in one pass; a NaN score stays the max, as on the CPU */
            float m = -INFINITY, l = 0.f;
            for (int j = lo; j <= hi; j++) {
                load_row<T>(a.k, at(a.lk, b, j, pr, h), a.lk, a.dim, kr);
                const float s = score(a.scale, q, kr);
                const float mn = (s > m || s != s) && m == m ? s : m;
                const float mu = mn == -INFINITY ? 0.f : mn;   /* exp(-inf - -inf) would be NaN */
                l = l * expf(m - mu) + expf(s - mu);
                m = mn;
            }
            float sti[3] = {m, 1.f / l, 0.f};
            for (int j = lo; j <= hi; j++) {
                load_row<T>(a.k, at(a.lk, b, j, pr, h), a.lk, a.dim, kr);
                load_row<T>(a.v, at(a.lv, b, j, pr, h), a.lv, a.dim, vr);
                const float w = weight(score(a.scale, q, kr), sti);
                A[0] = __fmaf_rn(w, vr[0], A[0]);
                A[1] = __fmaf_rn(w, vr[1], A[1]);
            }
            sti[2] = dot(da, A);
            for (int j = lo; j <= hi; j++) {
                load_row<T>(a.k, at(a.lk, b, j, pr, h), a.lk, a.dim, kr);
                load_row<T>(a.v, at(a.lv, b, j, pr, h), a.lv, a.dim, vr);
                const float w = weight(score(a.scale, q, kr), sti);
                const float ds = w * (dot(da, vr) - sti[2]);
                acc[0] = __fmaf_rn(ds, kr[0], acc[0]);
                acc[1] = __fmaf_rn(ds, kr[1], acc[1]);
            }
            acc[0] *= a.scale;
            acc[1] *= a.scale;
            store_row<T>(a.dq, at(a.ldq, b, i, pr, h), a.ldq, a.dim, acc);
            if ((threadIdx.x & 31) == 0)
                for (int t = 0; t < 3; t++) st[pr * 3 + t] = sti[t];
            if (pr == 1 && a.partial) {
                double r = (double)g[0] * (double)A[0] + (double)g[1] * (double)A[1];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
                part -= r;
            }
        }
    }
    if (!a.partial) return;
    __shared__ double warp_part[DSWA_WARPS];
    if ((threadIdx.x & 31) == 0) warp_part[warp] = part;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int w = 0; w < DSWA_WARPS; w++) s += warp_part[w];
        a.partial[((int64_t)b * a.heads + h) * a.tiles + tile] = s;
    }
}

/* ---- B: key rows -------------------------------------------------------------------------- */

template <typename T> __global__ void __launch_bounds__(DSWA_THREADS) dswa_bwd_keys(const bwd_args a) {
    const int tile = blockIdx.x, h = blockIdx.y, b = blockIdx.z, warp = threadIdx.x >> 5;
    const int j0 = tile * DSWA_BWD_ROWS + warp * ROWS_PER_WARP;
    /* kernel A's table: written by the previous launch on this stream */
    const float *table = a.table + ((int64_t)b * a.heads + h) * a.n * 6;
    for (int j = j0; j < j0 + ROWS_PER_WARP && j < a.n; j++) {
        /* i sees j iff i - WL <= j <= i + WR */
        const int lo = j - a.wr < 0 ? 0 : j - a.wr, hi = j + a.wl > a.n - 1 ? a.n - 1 : j + a.wl;
        float gv[2] = {0.f, 0.f};
        for (int pr = 0; pr < 2; pr++) {
            float kr[2], vr[2], q[2], g[2], gk[2] = {0.f, 0.f};
            load_row<T>(a.k, at(a.lk, b, j, pr, h), a.lk, a.dim, kr);
            load_row<T>(a.v, at(a.lv, b, j, pr, h), a.lv, a.dim, vr);
            if (!a.sum_dv) gv[0] = gv[1] = 0.f;
            const float c = pr == 0 ? 1.f : -a.lambda;
            for (int i = lo; i <= hi; i++) {
                const float *st = table + (int64_t)i * 6 + pr * 3;
                load_row<T>(a.q, at(a.lq, b, i, pr, h), a.lq, a.dim, q);
                load_row<T>(a.dout, at(a.ldout, b, i, 0, h), a.ldout, a.dim, g);
                const float da[2] = {c * g[0], c * g[1]};   /* as kernel A forms dA */
                const float w = weight(score(a.scale, q, kr), st);
                const float ds = w * (dot(da, vr) - st[2]);
                gk[0] = __fmaf_rn(ds, q[0], gk[0]);
                gk[1] = __fmaf_rn(ds, q[1], gk[1]);
                gv[0] = __fmaf_rn(w, da[0], gv[0]);
                gv[1] = __fmaf_rn(w, da[1], gv[1]);
            }
            gk[0] *= a.scale;
            gk[1] *= a.scale;
            store_row<T>(a.dk, at(a.ldk, b, j, pr, h), a.ldk, a.dim, gk);
            if (!a.sum_dv || pr == 1) store_row<T>(a.dv, at(a.ldv, b, j, pr, h), a.ldv, a.dim, gv);
        }
    }
}

/* ---- C: dlambda --------------------------------------------------------------------------- */

/* One block: thread t sums partials t, t + 256, ... in order, then a fixed tree. */
#define DLAMBDA_THREADS 256
__global__ void __launch_bounds__(DLAMBDA_THREADS) dswa_bwd_dlambda(const double *partial, int64_t count,
                                                                    float *dlambda) {
    __shared__ double s[DLAMBDA_THREADS];
    double x = 0.0;
    for (int64_t t = threadIdx.x; t < count; t += DLAMBDA_THREADS) x += partial[t];
    s[threadIdx.x] = x;
    __syncthreads();
    for (int w = DLAMBDA_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *dlambda = (float)s[0];
}

/* ---- entries per dtype and the launcher --------------------------------------------------- */

#define BWD_DTYPES(X) X(DSWA_F32, float) X(DSWA_F16, __half) X(DSWA_BF16, __nv_bfloat16)
struct bwd_entry { dswa_dtype dtype; const void *queries, *keys; };
#define BWD_ENTRY(dt, T) {dt, (const void *)dswa_bwd_queries<T>, (const void *)dswa_bwd_keys<T>},
static const bwd_entry entries[] = {BWD_DTYPES(BWD_ENTRY)};

static dswa_status launched(const char *what, cudaError_t e) {
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? DSWA_OK
                            : dswa_fail(DSWA_ERR_CUDA, "%s failed: %s", what, cudaGetErrorString(e));
}

/* The kernels' arguments for *p (windows clamped, tiles of DSWA_BWD_ROWS rows); *blocks: the
   query kernel's dlambda shares. */
static bwd_args args_of(const dswa_backward_problem *p, const void *q, const void *k, const void *v,
                        const void *dout, void *dq, void *dk, void *dv, float *dlambda,
                        void *workspace, size_t *blocks) {
    const dswa_problem *f = &p->fwd;
    size_t partials_offset;
    dswa_bwd_workspace_layout(f->batch, f->seq_len, f->heads, &partials_offset, blocks);
    bwd_args a;
    a.q = q; a.k = k; a.v = v; a.dout = dout;
    a.dq = dq; a.dk = dk; a.dv = dv;
    a.table = (float *)workspace;
    a.partial = dlambda ? (double *)((char *)workspace + partials_offset) : NULL;
    a.dlambda = dlambda;
    a.lq = f->q; a.lk = f->k; a.lv = f->v;
    a.ldout = p->dout; a.ldq = p->dq; a.ldk = p->dk; a.ldv = p->dv;
    a.batch = f->batch;
    a.n = f->seq_len;
    a.heads = f->heads;
    a.dim = f->head_dim;
    a.wl = dswa_window_seen(f->window_left, f->seq_len);
    a.wr = dswa_window_seen(f->window_right, f->seq_len);
    a.tiles = (f->seq_len + DSWA_BWD_ROWS - 1) / DSWA_BWD_ROWS;
    a.sum_dv = p->dv.pair == 0;
    a.scale = f->scale;
    a.lambda = f->lambda;
    a.f32_grads = 0;
    a.math = f->math;
    return a;
}

extern "C" dswa_status dswa_cuda_backward_launch(const dswa_backward_problem *p, const void *q,
                                                 const void *k, const void *v, const void *dout,
                                                 void *dq, void *dk, void *dv, float *dlambda,
                                                 void *workspace, void *stream) {
    const dswa_problem *f = &p->fwd;
    cudaStream_t s = (cudaStream_t)stream;
    if ((uintptr_t)dlambda % sizeof(float))
        return dswa_fail(DSWA_ERR_MISALIGNED, "dlambda = %p: must be 4-byte aligned (a float)",
                         (void *)dlambda);
    if (f->batch == 0 || f->seq_len == 0)   /* the gradient of an empty sum */
        return dlambda ? launched("cudaMemsetAsync of dlambda", cudaMemsetAsync(dlambda, 0, sizeof(float), s))
                       : DSWA_OK;
    if (f->head_dim > DSWA_BWD_MAX_DIM)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "head_dim = %d: the CUDA backward takes head_dim "
                         "up to %d", f->head_dim, DSWA_BWD_MAX_DIM);
    if (f->seq_len > (1 << 30))   /* row + window stays an int */
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "seq_len = %d: the CUDA backward takes seq_len up "
                         "to 2^30", f->seq_len);
    if (f->heads > 65535 || f->batch > 65535)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "%s = %d: the CUDA grid takes at most 65535",
                         f->heads > 65535 ? "heads" : "batch", f->heads > 65535 ? f->heads : f->batch);
    const size_t es = dswa_dtype_size(f->dtype);
    const void *const ptr[7] = {q, k, v, dout, dq, dk, dv};
    static const char *const names[7] = {"q", "k", "v", "dout", "dq", "dk", "dv"};
    for (int t = 0; t < 7; t++)
        if ((uintptr_t)ptr[t] % es)
            return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %p: must be aligned to its %zu-byte "
                             "elements", names[t], ptr[t], es);
    const bwd_entry *e = NULL;
    for (size_t t = 0; t < sizeof entries / sizeof entries[0]; t++)
        if (entries[t].dtype == f->dtype) e = &entries[t];
    if (!e) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dtype = %d: no kernel", (int)f->dtype);

    size_t blocks;
    bwd_args a = args_of(p, q, k, v, dout, dq, dk, dv, dlambda, workspace, &blocks);

    const dim3 grid((unsigned)a.tiles, (unsigned)f->heads, (unsigned)f->batch);
    void *args[1] = {&a};
    dswa_status st;
    if (dswa_bwd_band_ok(a, f->dtype)) {
        if ((st = launched("launch of the backward's tensor-core kernels", dswa_bwd_band_launch(a, f->dtype, s))))
            return st;
    } else if ((st = launched("launch of the backward's query kernel",
                              cudaLaunchKernel(e->queries, grid, dim3(DSWA_THREADS), args, 0, s))) ||
               (st = launched("launch of the backward's key kernel",
                              cudaLaunchKernel(e->keys, grid, dim3(DSWA_THREADS), args, 0, s))))
        return st;
    if (!dlambda) return DSWA_OK;
    const double *partial = a.partial;
    int64_t count = (int64_t)blocks;
    void *cargs[3] = {&partial, &count, &dlambda};
    return launched("launch of the backward's dlambda kernel",
                    cudaLaunchKernel((const void *)dswa_bwd_dlambda, dim3(1), dim3(DLAMBDA_THREADS),
                                     cargs, 0, s));
}

bool dswa_cuda_backward_band_takes(const dswa_backward_problem *p, const void *q, const void *k,
                                   const void *v, const void *dout, const void *dq, const void *dk,
                                   const void *dv) {
    size_t blocks;
    const bwd_args a = args_of(p, q, k, v, dout, (void *)dq, (void *)dk, (void *)dv, NULL, NULL, &blocks);
    return dswa_bwd_band_ok(a, p->fwd.dtype);
}

bool dswa_cuda_backward_f32_grads_takes(const dswa_backward_problem *p, const void *q, const void *k,
                                        const void *v, const void *dout, const void *dq,
                                        const void *dk, const void *dv) {
    size_t blocks;
    bwd_args a = args_of(p, q, k, v, dout, (void *)dq, (void *)dk, (void *)dv, NULL, NULL, &blocks);
    a.f32_grads = 1;
    return p->fwd.dtype != DSWA_F32 && dswa_bwd_band_ok(a, p->fwd.dtype);
}

dswa_status dswa_cuda_backward_f32_grads(const dswa_backward_problem *p, const void *q, const void *k,
                                         const void *v, const void *dout, float *dq, float *dk,
                                         void *dv, void *workspace, cudaStream_t s) {
    size_t blocks;
    bwd_args a = args_of(p, q, k, v, dout, dq, dk, dv, NULL, workspace, &blocks);
    a.f32_grads = 1;
    return launched("launch of the backward's tensor-core kernels", dswa_bwd_band_launch(a, p->fwd.dtype, s));
}
