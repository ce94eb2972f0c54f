/* The CUDA launcher: device probing, the checks the kernels need beyond the shared validation
   (head_dim, alignment of 16-byte vector accesses, int32 scalar ranges), the int32 extras, the
   kernel the registry picks (kernels.h) and its launch with the argument array generated from
   kernel_args.h. Nothing here allocates, synchronizes or compiles: a launch is capturable in a
   CUDA graph. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/samel.h"
#include "cuda/backend.h"
#include "cuda/kernels.h"
#include "cuda/launch.h"

/* Compute capability (major) per device, probed once: the launch path then costs one
   cudaGetDevice. 0 = not probed yet. */
static int cc_major[64];

extern "C" int dswa_cuda_probe(void) {
    int dev = -1, count = 0, major = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < 64 &&
        (major = __atomic_load_n(&cc_major[dev], __ATOMIC_RELAXED)) >= 8)
        return 1;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError(); /* do not leave our failed probe as the caller's error */
        /* With no libcuda.so.1 at all the runtime says "driver version is insufficient",
           which sends a user to upgrade a driver they do not have: say what is missing. A
           real, old driver reports its version (> 0) and keeps the runtime's message. */
        int driver = 0;
        if (e == cudaErrorInsufficientDriver &&
            (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0)) {
            (void)cudaGetLastError();
            dswa_fail(DSWA_ERR_NO_DEVICE, "no CUDA driver found (libcuda.so.1 not loadable): "
                      "no GPU on this machine");
            return 0;
        }
        if (e == cudaErrorInsufficientDriver) {
            int runtime = 0;
            (void)cudaRuntimeGetVersion(&runtime);
            (void)cudaGetLastError();
            dswa_fail(DSWA_ERR_NO_DEVICE, "no CUDA device is available (%s: driver %d.%d, "
                      "runtime %d.%d)", cudaGetErrorString(e), driver / 1000, driver % 1000 / 10,
                      runtime / 1000, runtime % 1000 / 10);
            return 0;
        }
        dswa_fail(DSWA_ERR_NO_DEVICE, "no CUDA device is available (%s)",
                  e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return 0;
    }
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        dswa_fail(DSWA_ERR_NO_DEVICE, "could not query the current CUDA device");
        return 0;
    }
    if (major < 8) {
        dswa_fail(DSWA_ERR_NO_DEVICE, "CUDA device %d has compute capability %d.x; dswa needs 8.0 "
                  "or newer (tensor-core mma.sync)", dev, major);
        return 0;
    }
    if (dev >= 0 && dev < 64) __atomic_store_n(&cc_major[dev], major, __ATOMIC_RELAXED);
    return 1;
}

static dswa_status to_int32(const char *field, int64_t x, int *dst) {
    if (x > INT32_MAX)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "%s = %lld: the CUDA kernel takes strides and "
                         "sizes as int32 (TensorRT's scalar type), so they must be below 2^31",
                         field, (long long)x);
    *dst = (int)x;
    return DSWA_OK;
}

/* Checks a view's pointer and strides (s: the five strides, dn: the axes' names, the last
   "dim") and writes its batch, seq, (pair or chunk,) head strides to dst; pairs == 1: the
   third axis is absent (the output). */
static dswa_status check_strides(const char *name, const void *ptr, const int64_t s[5],
                                 const char *const dn[5], int pairs, int vec, int *const dst[4]) {
    char field[32];
    if ((uintptr_t)ptr % 16 != 0)
        return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %p: the CUDA kernel reads and writes rows "
                         "as 16-byte vectors, so the pointer must be 16-byte aligned", name, ptr);
    if (s[4] != 1)
        return dswa_fail(DSWA_ERR_MISALIGNED, "%s.dim = %lld: the CUDA kernel needs the head "
                         "dimension contiguous (dim stride 1)", name, (long long)s[4]);
    for (int i = 0, o = 0; i < 4; i++) {
        if (pairs == 1 && i == 2) continue; /* the output has no pair axis */
        snprintf(field, sizeof field, "%s.%s", name, dn[i]);
        if (s[i] % vec != 0)
            return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %lld: the CUDA kernel reads rows as "
                             "16-byte vectors, so strides must be multiples of %d elements",
                             field, (long long)s[i], vec);
        dswa_status st = to_int32(field, s[i], dst[o++]);
        if (st) return st;
    }
    return DSWA_OK;
}
static dswa_status check_view(const char *name, const void *ptr, const dswa_layout *l, int pairs,
                              int vec, int *const dst[4]) {
    static const char *const dn[5] = {"batch", "seq", "pair", "head", "dim"};
    const int64_t s[5] = {l->batch, l->seq, l->pair, l->head, l->dim};
    return check_strides(name, ptr, s, dn, pairs, vec, dst);
}

/* The grid's and the kernels' size limits, shared by both launchers. */
static dswa_status check_sizes(int32_t head_dim, int32_t seq_len, int32_t heads, int32_t batch) {
    if (!dswa_cuda_head_dim_ok(head_dim)) return DSWA_ERR_UNSUPPORTED;
    if (seq_len > (1 << 30))
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "seq_len = %d: the CUDA kernel takes seq_len up "
                         "to 2^30", seq_len);
    if (heads > 65535 || batch > 65535)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "%s = %d: the CUDA grid takes at most 65535",
                         heads > 65535 ? "heads" : "batch", heads > 65535 ? heads : batch);
    return DSWA_OK;
}

extern "C" dswa_status dswa_cuda_kargs(const dswa_problem *p, const void *q, const void *k,
                                       const void *v, const void *out, dswa_kargs *a,
                                       const dswa_kernel **kern) {
    dswa_status s;
    if ((s = check_sizes(p->head_dim, p->seq_len, p->heads, p->batch))) return s;
    const int vec = 16 / (int)dswa_dtype_size(p->dtype);
    int *const qs[4] = {&a->q_sb, &a->q_sn, &a->q_sp, &a->q_sh};
    int *const ks[4] = {&a->k_sb, &a->k_sn, &a->k_sp, &a->k_sh};
    int *const vs[4] = {&a->v_sb, &a->v_sn, &a->v_sp, &a->v_sh};
    int *const os[4] = {&a->o_sb, &a->o_sn, &a->o_sh, NULL};
    if ((s = check_view("q", q, &p->q, 2, vec, qs)) || (s = check_view("k", k, &p->k, 2, vec, ks)) ||
        (s = check_view("v", v, &p->v, 2, vec, vs)) || (s = check_view("out", out, &p->out, 1, vec, os)))
        return s;
    a->n = p->seq_len;
    a->wl = dswa_window_seen(p->window_left, p->seq_len);
    a->wr = dswa_window_seen(p->window_right, p->seq_len);
    if (!(*kern = dswa_kernel_pick_or_fail(p->dtype, p->math, a->wl, a->wr))) return DSWA_ERR_UNSUPPORTED;
    memcpy(&a->scale_bits, &p->scale, 4);
    memcpy(&a->lambda_bits, &p->lambda, 4);
    return DSWA_OK;
}

/* An axis of size 1 is never stepped, so its stride can be anything (PyTorch gives size-1 axes
   arbitrary strides): it is zeroed here instead of being checked for alignment and int32 range.
   (Only here: the AOT export describes strides as formulas of the shapes, for any size.) */
static void zero_unit_strides(int32_t batch, int32_t seq_len, int32_t heads, int64_t *const l[][5], int nl) {
    for (int i = 0; i < nl; i++) {
        if (batch == 1) *l[i][0] = 0;
        if (seq_len == 1) *l[i][1] = 0;
        if (heads == 1) *l[i][3] = 0;
    }
}

static dswa_status launch(const dswa_kernel *kern, const void *fn, int32_t n, int32_t heads, int32_t batch,
                          void **args, void *stream) {
    const dim3 grid((unsigned)((n + DSWA_TILE - 1) / DSWA_TILE), (unsigned)heads, (unsigned)batch);
    cudaError_t e = cudaLaunchKernel(fn, grid, dim3(DSWA_THREADS), args, 0, (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return dswa_fail(DSWA_ERR_CUDA, "launch of %s failed: %s", kern->entry, cudaGetErrorString(e));
    return DSWA_OK;
}

extern "C" dswa_status dswa_cuda_launch(const dswa_problem *p0, const void *q, const void *k,
                                        const void *v, void *out, void *stream) {
    dswa_kargs a;
    dswa_problem pz = *p0; /* the caller's problem is left as it is */
    int64_t *const l[4][5] = {{&pz.q.batch, &pz.q.seq, &pz.q.pair, &pz.q.head, &pz.q.dim},
                              {&pz.k.batch, &pz.k.seq, &pz.k.pair, &pz.k.head, &pz.k.dim},
                              {&pz.v.batch, &pz.v.seq, &pz.v.pair, &pz.v.head, &pz.v.dim},
                              {&pz.out.batch, &pz.out.seq, &pz.out.pair, &pz.out.head, &pz.out.dim}};
    zero_unit_strides(pz.batch, pz.seq_len, pz.heads, l, 4);
    const dswa_kernel *kern;
    dswa_status s = dswa_cuda_kargs(&pz, q, k, v, out, &a, &kern);
    if (s) return s;
    const int index = (int)(kern - dswa_kernels), n_band = dswa_band_kernel_count;
    const void *fn = index < n_band ? dswa_band_entry_function(index) : dswa_wide_entry_function(index - n_band);
    void *args[DSWA_KERNEL_ARG_COUNT] = {DSWA_LAUNCH_ARGS(&a)};
    return launch(kern, fn, a.n, pz.heads, pz.batch, args, stream);
}

/* ---- the fused SAME-L block ---------------------------------------------------------------- */

extern "C" dswa_status dswa_cuda_samel_kargs(const dswa_samel_problem *p, const void *x, const void *out,
                                             dswa_samel_kargs *a, const dswa_kernel **kern) {
    dswa_status s;
    if ((s = check_sizes(p->head_dim, p->seq_len, p->heads, p->batch))) return s;
    const int vec = 16 / (int)dswa_dtype_size(p->dtype);
    static const char *const xn[5] = {"batch", "seq", "chunk", "head", "dim"};
    const int64_t xs[5] = {p->qkv.batch, p->qkv.seq, p->qkv.chunk, p->qkv.head, p->qkv.dim};
    int *const xd[4] = {&a->x_sb, &a->x_sn, &a->x_sc, &a->x_sh};
    int *const os[4] = {&a->o_sb, &a->o_sn, &a->o_sh, NULL};
    if ((s = check_strides("qkv", x, xs, xn, 2, vec, xd)) || (s = check_view("out", out, &p->out, 1, vec, os)))
        return s;
    /* q_diff and k_diff are read 3 chunks after q and k, as an int32 offset */
    if (p->qkv.chunk > INT32_MAX / 3 || p->qkv.chunk < -(INT32_MAX / 3))
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "qkv.chunk = %lld: the CUDA kernel steps 3 chunks as an "
                         "int32 offset, so |qkv.chunk| must be below 2^31 / 3", (long long)p->qkv.chunk);
    const void *const w[4] = {p->q_norm.gamma, p->q_norm.beta, p->k_norm.gamma, p->k_norm.beta};
    static const char *const wn[4] = {"q_norm.gamma", "q_norm.beta", "k_norm.gamma", "k_norm.beta"};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)w[i] % 4 != 0)
            return dswa_fail(DSWA_ERR_MISALIGNED, "%s = %p: must be 4-byte aligned (floats)", wn[i], w[i]);
    a->n = p->seq_len;
    a->wl = dswa_window_seen(p->window_left, p->seq_len);
    a->wr = dswa_window_seen(p->window_right, p->seq_len);
    if (!(*kern = dswa_samel_kernel_pick(p->dtype, p->math, a->wl, a->wr, p->rot_dims)))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dtype = %d: no kernel", (int)p->dtype);
    memcpy(&a->scale_bits, &p->scale, 4);
    memcpy(&a->lambda_bits, &p->lambda, 4);
    float freq[DSWA_AOT_ROPE_FREQS] = {0};
    dswa_samel_freqs(p, freq);
#define SET_FREQ_(j) memcpy(&a->freq##j, &freq[j], 4);
#define ONE_(j) +1
    static_assert(0 DSWA_ROPE_FREQS(ONE_) == DSWA_AOT_ROPE_FREQS, "one extra per frequency");
    DSWA_ROPE_FREQS(SET_FREQ_)
#undef ONE_
#undef SET_FREQ_
    memcpy(&a->q_alpha_bits, &p->q_norm.alpha, 4);
    memcpy(&a->k_alpha_bits, &p->k_norm.alpha, 4);
    a->rot_dims = p->rot_dims;
    a->pos_offset = p->pos_offset;
    return DSWA_OK;
}

extern "C" dswa_status dswa_cuda_samel_launch(const dswa_samel_problem *p0, const void *x, void *out,
                                              void *stream) {
    dswa_samel_kargs a;
    dswa_samel_problem pz = *p0;
    int64_t *const l[2][5] = {{&pz.qkv.batch, &pz.qkv.seq, &pz.qkv.chunk, &pz.qkv.head, &pz.qkv.dim},
                              {&pz.out.batch, &pz.out.seq, &pz.out.pair, &pz.out.head, &pz.out.dim}};
    zero_unit_strides(pz.batch, pz.seq_len, pz.heads, l, 2);
    const dswa_kernel *kern;
    dswa_status s = dswa_cuda_samel_kargs(&pz, x, out, &a, &kern);
    if (s) return s;
    const int index = (int)(kern - dswa_samel_kernels), n_band = dswa_samel_band_kernel_count;
    /* alphas in device memory: the same kernel's second entry, two more arguments */
    const float *q_alpha_at = pz.q_norm.alpha_at, *k_alpha_at = pz.k_norm.alpha_at;
    const bool at = q_alpha_at || k_alpha_at;
    const void *fn = index < n_band ? (at ? dswa_samel_band_alpha_at_function : dswa_samel_band_entry_function)(index)
                                    : (at ? dswa_samel_scalar_alpha_at_function
                                          : dswa_samel_scalar_entry_function)(index - n_band);
    const float *q_gamma = pz.q_norm.gamma, *q_beta = pz.q_norm.beta;
    const float *k_gamma = pz.k_norm.gamma, *k_beta = pz.k_norm.beta;
    void *args[DSWA_SAMEL_KERNEL_ARG_COUNT + 2] = {DSWA_SAMEL_LAUNCH_ARGS(&a), &q_alpha_at, &k_alpha_at};
    return launch(kern, fn, a.n, pz.heads, pz.batch, args, stream);
}
