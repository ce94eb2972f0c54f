/* The kernel registry (kernels.h) as data, and the kernel-pick rule. Plain C: the AOT export
   reads it too, and it builds without nvcc. */
#include <string.h>
#include "core/error.h"
#include "cuda/kernels.h"

#define DSWA_BAND_ROW_(entry, dtype, math, T, blocks) {#entry, "band", dtype, math, blocks, DSWA_BAND_MAX_SPAN},
#define DSWA_WIDE_ROW_(entry, dtype, math, T, blocks) {#entry, "wide", dtype, math, blocks, -1},
const dswa_kernel dswa_kernels[] = {DSWA_BAND_KERNELS(DSWA_BAND_ROW_) DSWA_WIDE_KERNELS(DSWA_WIDE_ROW_)};
const int dswa_kernel_count = (int)(sizeof dswa_kernels / sizeof dswa_kernels[0]);
#define DSWA_ONE_(entry, dtype, math, T, blocks) +1
const int dswa_band_kernel_count = 0 DSWA_BAND_KERNELS(DSWA_ONE_);

const dswa_kernel *dswa_kernel_pick(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr) {
    const dswa_math m = dtype != DSWA_F32 ? DSWA_MATH_DEFAULT
                        : math == DSWA_MATH_FP32 ? DSWA_MATH_FP32 : DSWA_MATH_TF32;
    const int band = wl >= 0 && wr >= 0 && (int64_t)wl + wr <= DSWA_BAND_MAX_SPAN;
    for (int i = 0; i < dswa_kernel_count; i++)
        if (dswa_kernels[i].dtype == dtype && dswa_kernels[i].math == m &&
            (dswa_kernels[i].max_span >= 0) == band)
            return &dswa_kernels[i];
    return NULL;
}

int dswa_cuda_head_dim_ok(int32_t head_dim) {
    if (head_dim == DSWA_HEAD_DIM) return 1;
    dswa_fail(DSWA_ERR_UNSUPPORTED, "head_dim = %d: the CUDA kernels implement head_dim %d only",
              head_dim, DSWA_HEAD_DIM);
    return 0;
}

const dswa_kernel *dswa_kernel_pick_or_fail(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr) {
    const dswa_kernel *k = dswa_kernel_pick(dtype, math, wl, wr);
    if (!k)
        dswa_fail(DSWA_ERR_UNSUPPORTED, "math = fp32 with window_left + window_right = %d: the fp32-accurate "
                  "CUDA kernel takes windows up to %d keys in all (DSWA_MATH_TF32 takes any)", wl + wr,
                  DSWA_BAND_MAX_SPAN);
    return k;
}

#define DSWA_SCALAR_ROW_(entry, dtype, math, T, blocks) {#entry, "scalar", dtype, math, blocks, -1},
const dswa_kernel dswa_samel_kernels[] = {DSWA_SAMEL_BAND_KERNELS(DSWA_BAND_ROW_)
                                          DSWA_SAMEL_SCALAR_KERNELS(DSWA_SCALAR_ROW_)};
const int dswa_samel_kernel_count = (int)(sizeof dswa_samel_kernels / sizeof dswa_samel_kernels[0]);
const int dswa_samel_band_kernel_count = 0 DSWA_SAMEL_BAND_KERNELS(DSWA_ONE_);

int dswa_samel_band_rot_ok(dswa_dtype dtype, int32_t rot_dims) {
    const int chunk = 16 / (int)dswa_dtype_size(dtype);      /* elements of a 16-byte chunk */
    const int phase = dtype == DSWA_F32 ? DSWA_HEAD_DIM / 2 : DSWA_HEAD_DIM;
    return rot_dims >= 0 && rot_dims % (2 * chunk) == 0 && rot_dims <= phase;
}

const dswa_kernel *dswa_samel_kernel_pick(dswa_dtype dtype, dswa_math math, int32_t wl, int32_t wr,
                                          int32_t rot_dims) {
    if (dswa_dtype_size(dtype) == 0) return NULL;
    const dswa_math m = dtype != DSWA_F32 ? DSWA_MATH_DEFAULT
                        : math == DSWA_MATH_FP32 ? DSWA_MATH_FP32 : DSWA_MATH_TF32;
    const int band = wl >= 0 && wr >= 0 && (int64_t)wl + wr <= DSWA_BAND_MAX_SPAN &&
                     dswa_samel_band_rot_ok(dtype, rot_dims);
    for (int i = 0; i < dswa_samel_kernel_count; i++) {
        const dswa_kernel *k = &dswa_samel_kernels[i];
        if (k->dtype == dtype && (k->max_span >= 0) == band && (!band || k->math == m)) return k;
    }
    return NULL;
}

size_t dswa_bwd_workspace_layout(int32_t batch, int32_t seq_len, int32_t heads,
                                 size_t *partials_offset, size_t *blocks) {
    *partials_offset = *blocks = 0;
    if (batch <= 0 || seq_len <= 0 || heads <= 0) return 0;
    const size_t tiles = ((size_t)seq_len + DSWA_BWD_ROWS - 1) / DSWA_BWD_ROWS;
    size_t rows, table, nblk, total;
    if (__builtin_mul_overflow((size_t)batch * (size_t)heads, (size_t)seq_len, &rows) ||
        __builtin_mul_overflow(rows, 6 * sizeof(float), &table) ||
        __builtin_add_overflow(table, (size_t)255, &table) ||
        __builtin_mul_overflow((size_t)batch * (size_t)heads, tiles, &nblk) ||
        __builtin_add_overflow(table / 256 * 256, nblk * sizeof(double), &total))
        return SIZE_MAX;
    *partials_offset = table / 256 * 256;
    *blocks = nblk;
    return total;
}

/* Appends a piece of n units of `unit` bytes at the next 256-byte boundary: its offset, or
   SIZE_MAX on overflow (which sticks: *end becomes SIZE_MAX). */
static size_t ws_piece(size_t *end, size_t n, size_t unit) {
    size_t at, bytes;
    if (*end == SIZE_MAX || __builtin_add_overflow(*end, (size_t)255, &at) ||
        __builtin_mul_overflow(n, unit, &bytes) || __builtin_add_overflow(at / 256 * 256, bytes, end)) {
        *end = SIZE_MAX;
        return SIZE_MAX;
    }
    return at / 256 * 256;
}

size_t dswa_samel_bwd_workspace_layout(int32_t batch, int32_t seq_len, int32_t heads,
                                       int32_t head_dim, dswa_samel_bwd_ws *w) {
    memset(w, 0, sizeof *w);
    if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return 0;
    size_t m, op_offset, op_blocks, end = 0;
    const size_t tiles = ((size_t)seq_len + DSWA_SAMEL_BWD_SHARE_ROWS - 1) / DSWA_SAMEL_BWD_SHARE_ROWS;
    const size_t op = dswa_bwd_workspace_layout(batch, seq_len, heads, &op_offset, &op_blocks);
    if (op == SIZE_MAX ||
        __builtin_mul_overflow((size_t)batch * (size_t)heads, (size_t)seq_len, &m) ||
        __builtin_mul_overflow(m, (size_t)head_dim, &m) ||
        __builtin_mul_overflow((size_t)batch * (size_t)heads, tiles, &w->blocks))
        return SIZE_MAX;
    w->rq = ws_piece(&end, 2 * m, sizeof(float));
    w->rk = ws_piece(&end, 2 * m, sizeof(float));
    w->v = ws_piece(&end, m, sizeof(float));
    w->dout = ws_piece(&end, m, sizeof(float));
    w->drq = ws_piece(&end, 2 * m, sizeof(float));
    w->drk = ws_piece(&end, 2 * m, sizeof(float));
    w->dv = ws_piece(&end, m, sizeof(float));
    w->op = ws_piece(&end, op, 1);
    w->partial = ws_piece(&end, w->blocks, DSWA_SAMEL_BWD_PARTS(head_dim) * sizeof(double));
    return end;
}
