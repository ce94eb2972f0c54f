/* GPU tests of the fused SAME-L block, dswa_samel_forward_cuda, against the tests' own float64
   reference (tests/lib/samel_ref64.c, independent of the library) on fresh random inputs (the
   seed is printed; DSWA_TEST_SEED=N repeats a run): every dtype and math, B > 1, N not a
   multiple of the 64-row tile, N below the window, N = 1, position offsets up to INT32_MAX,
   asymmetric windows of both kernels (band: span <= 48; scalar: wider, or rot_dims off the band
   kernel's chunks; dswa_samel_kernel_name confirms which ran), lambda, scale (negative and 0),
   strided layouts; NaN and inf in the input; every output element written (poisoned first) and
   nothing outside the output view (poisoned guards and gaps); nothing outside the input view
   read (its gaps and guards hold NaN); a CUDA graph of back-to-back calls replayed with fresh
   inputs equal to the eager calls bitwise. A self-check computes the reference of a wrong
   kernel (RoPE off, pairs interleaved, rotation reversed, the norms swapped; at large offsets
   pos_offset ignored or off by one) and asserts the comparison rejects it.
   Large outputs are compared on a sample of 64-row tiles (every one with DSWA_TEST_LONG=1).
   `--small` runs a few small cases (for compute-sanitizer); `--host` runs the same cases
   through dswa_samel_forward_cpu on host memory (no graph): a check of this test itself on a
   machine without a GPU. Without a GPU it prints "skipped: no GPU ..." and exits 77. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dswa.h"
#include "compare.h"
#include "samel_ref64.h"
#include "testutil.h"

#ifndef DSWA_HAVE_CUDA
int main(void) { tu_skip("dswa was built without CUDA"); }
#else
#include "cuda_check.h"

static int small_only = 0, host_mode = 0, long_mode = 0;
static tu_rng rng;

/* ---- tolerances ------------------------------------------------------------------------
   The largest relative Frobenius error of any (batch, 64-row tile) block of the output, all
   heads and dims (a per-block maximum, so that an error confined to one tile, batch or head
   is not diluted by the rest of the output). Per dtype and math, from tests/test_cuda.c's for
   the op (whose H200 runs show about 9e-4 for TF32, 3e-4 f16, 2.3e-3 bf16, 1.6e-6 fp32) plus
   what the prologue adds on the GPU:
   - f32, TF32 math (the default): TF32 rounds q, k, P and v to 2^-11 relative; the
     special-function tanh adds up to 2^-11 relative on q and k (the size of one TF32
     rounding): about 1.3x the op's error; 4e-3 leaves 3x for the noisier per-block maximum.
   - f32, fp32 math: tanh to fp32 accuracy, sin and cos within 2^-21 absolute: about 1e-6
     relative on q and k and on the scores, a few 1e-6 on an output a_0 - lambda a_1 that
     cancels partly; 2e-5 (the op's 1e-5, doubled for sin and cos).
   - f16 and bf16: a q or k element may be one unit off the reference's rounding (tanh's
     error crossing a rounding boundary): f16 units are 2^-10, bf16 2^-8, comparable to the
     16-bit P and output roundings already in the op's error; the op's 5e-3 and 1e-2.
   A wrong kernel's error is over 10x the tolerance (test_self_check measures it). */
static double tol_for(dswa_dtype t, dswa_math m) {
    if (t == DSWA_F32) return m == DSWA_MATH_FP32 ? 2e-5 : 4e-3;
    return t == DSWA_F16 ? 5e-3 : 1e-2;
}

/* ---- memory: device, or host under --host --------------------------------------------- */

static void *dev_alloc(size_t bytes) {
    void *d = NULL;
    if (host_mode) {
        d = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!d) abort();
    } else {
        CU(cudaMalloc(&d, bytes));
    }
    return d;
}
static void dev_free(void *d) {
    if (host_mode) free(d);
    else CU(cudaFree(d));
}
static void dev_put(void *d, const void *h, size_t bytes) {
    if (host_mode) memcpy(d, h, bytes);
    else CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void dev_get(void *h, const void *d, size_t bytes) {
    if (host_mode) memcpy(h, d, bytes);
    else CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double forward_seconds = 0; /* --host: time in the CPU backend (not the test's own) */

/* The call under test; the launch's own error is checked too. */
static dswa_status forward(const dswa_samel_problem *p, const void *x, void *out, cudaStream_t s) {
    if (host_mode) {
        const double t0 = seconds();
        const dswa_status st = dswa_samel_forward_cpu(p, x, out);
        forward_seconds += seconds() - t0;
        return st;
    }
    const dswa_status st = dswa_samel_forward_cuda(p, x, out, s);
    CU(cudaGetLastError());
    return st;
}

/* ---- a case: the problem, its buffers on both sides ----------------------------------- */

#define IN_GUARD 64 /* NaN elements on each side of the packed input's view */

typedef struct scase {
    dswa_samel_problem p;   /* norms in host memory: the reference's */
    dswa_samel_problem pd;  /* the same with the norms in device memory: the call's */
    dswa_problem v;         /* the output's view, as the tests' output helpers read it */
    float *hw, *dw;         /* q_gamma, q_beta, k_gamma, k_beta: 4 * D floats; dw then the two
                               alphas (for alpha_at) */
    void *hxbase, *hx;      /* packed input: IN_GUARD + span + IN_GUARD elements; hx the view */
    void *dxbase, *dx;
    int64_t xspan, xtotal;
    tu_outbuf ho;           /* output with poisoned guards (host) */
    void *dbase;            /* its device copy */
    const char *kernel;     /* dswa_samel_kernel_name */
} scase;

static size_t esize(const scase *c) { return tu_dtype_size(c->p.dtype); }
static void *dout(const scase *c) { return (char *)c->dbase + TU_GUARD * esize(c); }

static int64_t x_at(const dswa_samel_layout *l, int64_t b, int64_t i, int ch, int64_t h, int64_t d) {
    return b * l->batch + i * l->seq + ch * l->chunk + h * l->head + d * l->dim;
}

static int64_t packed_span(const dswa_samel_problem *p) {
    const int64_t ext[5] = {p->batch, p->seq_len, 5, p->heads, p->head_dim};
    const int64_t st[5] = {p->qkv.batch, p->qkv.seq, p->qkv.chunk, p->qkv.head, p->qkv.dim};
    int64_t span = 1;
    for (int i = 0; i < 5; i++) span += (ext[i] - 1) * st[i];
    return span;
}

/* Fresh packed input: normals in the view, NaN in its gaps and guards (a kernel reading
   outside the view makes NaN outputs that the comparison reports). */
static void fill_input(scase *c) {
    const dswa_samel_problem *p = &c->p;
    tu_fill_normal(c->hx, c->xspan, p->dtype, &rng, 1.0);
    for (int64_t e = 0; e < IN_GUARD; e++) {
        tu_store(c->hxbase, e, p->dtype, NAN);
        tu_store(c->hxbase, IN_GUARD + c->xspan + e, p->dtype, NAN);
    }
    if (c->xspan == (int64_t)p->batch * p->seq_len * 5 * p->heads * p->head_dim) return; /* no gaps */
    unsigned char *in_view = calloc((size_t)c->xspan, 1);
    if (!in_view) abort();
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int ch = 0; ch < 5; ch++)
                for (int64_t h = 0; h < p->heads; h++)
                    for (int64_t d = 0; d < p->head_dim; d++) in_view[x_at(&p->qkv, b, i, ch, h, d)] = 1;
    for (int64_t e = 0; e < c->xspan; e++)
        if (!in_view[e]) tu_store(c->hx, e, p->dtype, NAN);
    free(in_view);
}

/* Norm weights as tests/test_samel.c draws them: alpha in [0.5, 1.5], gamma around 1.5, beta
   around 0, so that scores spread over a few units (a flat softmax would hide errors). */
static scase case_new(const dswa_samel_problem *p0) {
    scase c;
    memset(&c, 0, sizeof c);
    c.p = *p0;
    const int D = c.p.head_dim;
    c.hw = malloc(sizeof(float) * 4 * (size_t)D);
    if (!c.hw) abort();
    for (int e = 0; e < 4 * D; e++)
        c.hw[e] = (float)((e / D) % 2 ? 0.3 * tu_rng_normal(&rng) : 1.5 + 0.5 * tu_rng_normal(&rng));
    c.p.q_norm = (dswa_samel_norm){(float)(0.5 + tu_rng_uniform(&rng)), c.hw, c.hw + D, NULL};
    c.p.k_norm = (dswa_samel_norm){(float)(0.5 + tu_rng_uniform(&rng)), c.hw + 2 * D, c.hw + 3 * D, NULL};
    c.dw = dev_alloc(sizeof(float) * (4 * (size_t)D + 2));
    dev_put(c.dw, c.hw, sizeof(float) * 4 * (size_t)D);
    const float alphas[2] = {c.p.q_norm.alpha, c.p.k_norm.alpha};
    dev_put(c.dw + 4 * D, alphas, sizeof alphas);
    c.pd = c.p;
    c.pd.q_norm.gamma = c.dw; c.pd.q_norm.beta = c.dw + D;
    c.pd.k_norm.gamma = c.dw + 2 * D; c.pd.k_norm.beta = c.dw + 3 * D;

    c.xspan = packed_span(&c.p);
    c.xtotal = c.xspan + 2 * IN_GUARD;
    c.hxbase = tu_alloc(c.xtotal, c.p.dtype);
    c.hx = (char *)c.hxbase + IN_GUARD * esize(&c);
    fill_input(&c);
    c.dxbase = dev_alloc((size_t)c.xtotal * esize(&c));
    c.dx = (char *)c.dxbase + IN_GUARD * esize(&c);
    dev_put(c.dxbase, c.hxbase, (size_t)c.xtotal * esize(&c));

    c.v = dswa_problem_default(c.p.batch, c.p.seq_len, c.p.heads, c.p.head_dim, 0);
    c.v.dtype = c.p.dtype;
    c.v.out = c.p.out;
    c.ho = tu_outbuf_new(&c.v);
    c.dbase = dev_alloc((size_t)c.ho.total * esize(&c));
    dev_put(c.dbase, c.ho.base, (size_t)c.ho.total * esize(&c));
    c.kernel = dswa_samel_kernel_name(&c.pd);
    return c;
}

/* The call reads the alphas from memory (dswa_samel_norm.alpha_at, where case_new put them)
   and the problem's floats are NaN: they must not be read. */
static void use_alpha_at(scase *c) {
    const int D = c->p.head_dim;
    c->pd.q_norm.alpha = c->pd.k_norm.alpha = NAN;
    c->pd.q_norm.alpha_at = c->dw + 4 * D;
    c->pd.k_norm.alpha_at = c->dw + 4 * D + 1;
}

/* The host input changed (tu_store into c->hx): copy it over. */
static void input_changed(scase *c) { dev_put(c->dxbase, c->hxbase, (size_t)c->xtotal * esize(c)); }

static void fetch_out(scase *c) { dev_get(c->ho.base, c->dbase, (size_t)c->ho.total * esize(c)); }

static void case_free(scase *c) {
    dev_free(c->dw);
    dev_free(c->dxbase);
    dev_free(c->dbase);
    free(c->hw);
    tu_free(c->hxbase);
    tu_outbuf_free(&c->ho);
}

/* ---- the comparison ------------------------------------------------------------------- */

/* Which 64-row tiles are compared: all of them for small outputs and under DSWA_TEST_LONG,
   else the first and last tiles, the full one before a partial last one, and min(tiles / 4,
   16) random ones (as tu_err_sampled picks rows for the op). pick[t] for t < tiles. */
static char *pick_tiles(int64_t n) {
    const int64_t tiles = (n + 63) / 64;
    char *pick = calloc((size_t)(tiles > 0 ? tiles : 1), 1);
    if (!pick) abort();
    int64_t picked = 0;
    if (!long_mode && tiles > 8) {
        pick[0] = pick[tiles - 1] = 1;
        if (n % 64) pick[tiles - 2] = 1;
        const int64_t extra = tiles / 4 < 16 ? tiles / 4 : 16;
        for (int64_t t = 0; t < extra; t++) pick[tu_rng_range(&rng, tiles)] = 1;
        for (int64_t t = 0; t < tiles; t++) picked += pick[t];
    }
    if (long_mode || tiles <= 8 || 2 * picked >= tiles) memset(pick, 1, (size_t)tiles);
    return pick;
}

/* The reference of rows [r0, r1) of every batch and head into ref, dense [B][r1 - r0][H][D]:
   tu_samel_ref64 on the sub-problem of the key rows those rows see, [k0, k1), with the
   positions of the whole (pos_offset + k0 for its row 0). Its windows clamp at the
   sub-problem's ends only where the whole problem's do, so rows [r0, r1) are exact. */
static void ref_rows(const dswa_samel_problem *p, const void *x, int64_t r0, int64_t r1, double *ref) {
    const int64_t k0 = r0 - p->window_left > 0 ? r0 - p->window_left : 0;
    const int64_t k1 = r1 + (int64_t)p->window_right < p->seq_len ? r1 + p->window_right : p->seq_len;
    dswa_samel_problem sub = *p;
    sub.seq_len = (int32_t)(k1 - k0);
    sub.pos_offset = (int32_t)(p->pos_offset + k0);
    const int64_t B = p->batch, H = p->heads, D = p->head_dim, NS = k1 - k0, R = r1 - r0;
    double *all = malloc(sizeof(double) * (size_t)(B * NS * H * D));
    if (!all) abort();
    tu_samel_ref64(&sub, (const char *)x + k0 * p->qkv.seq * (int64_t)tu_dtype_size(p->dtype), all);
    for (int64_t b = 0; b < B; b++)
        memcpy(ref + b * R * H * D, all + (b * NS + (r0 - k0)) * H * D, sizeof(double) * (size_t)(R * H * D));
    free(all);
}

typedef struct verdict {
    double worst;       /* largest relative Frobenius error of a (batch, tile) block */
    int64_t mismatch;   /* elements finite on one side only, or different non-finite values */
    int64_t nonfinite;  /* elements non-finite on both sides alike */
    int64_t rows;       /* query rows compared (of each batch) */
} verdict;

/* Compares c's fetched output with the reference of problem p on input x (c's own, or a
   perturbed one for the self-check) over the picked tiles. */
static verdict compare(const scase *c, const dswa_samel_problem *p, const void *x, const char *pick) {
    verdict vd = {0, 0, 0, 0};
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim, tiles = (N + 63) / 64;
    for (int64_t t0 = 0; t0 < tiles;) {
        if (!pick[t0]) { t0++; continue; }
        int64_t t1 = t0;
        while (t1 < tiles && pick[t1]) t1++;
        const int64_t r0 = t0 * 64, r1 = t1 * 64 < N ? t1 * 64 : N, R = r1 - r0;
        double *ref = malloc(sizeof(double) * (size_t)(p->batch * R * H * D));
        if (!ref) abort();
        ref_rows(p, x, r0, r1, ref);
        for (int64_t b = 0; b < p->batch; b++)
            for (int64_t t = t0; t < t1; t++) {
                double diff2 = 0, ref2 = 0;
                const int64_t i1 = (t + 1) * 64 < N ? (t + 1) * 64 : N;
                for (int64_t i = t * 64; i < i1; i++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t d = 0; d < D; d++) {
                            const double r = ref[((b * R + i - r0) * H + h) * D + d];
                            const double o = tu_load(c->ho.out, tu_out_offset(&p->out, b, i, h, d), p->dtype);
                            if (isfinite(r) && isfinite(o)) {
                                diff2 += (o - r) * (o - r);
                                ref2 += r * r;
                            } else if ((isnan(r) && isnan(o)) || (isinf(r) && r == o)) {
                                vd.nonfinite++;
                            } else {
                                vd.mismatch++;
                            }
                        }
                const double e = diff2 == 0 ? 0 : ref2 == 0 ? INFINITY : sqrt(diff2 / ref2);
                if (e > vd.worst) vd.worst = e;
            }
        free(ref);
        vd.rows += R;
        t0 = t1;
    }
    if (vd.mismatch) vd.worst = INFINITY;
    return vd;
}

/* ---- the kernels that ran ------------------------------------------------------------- */

static const char *const all_kernels[7] = {
    "dswa_samel_f32_tf32",   "dswa_samel_f32_fp32",   "dswa_samel_f16",        "dswa_samel_bf16",
    "dswa_samel_scalar_f32", "dswa_samel_scalar_f16", "dswa_samel_scalar_bf16"};
static int kernel_runs[7];

/* Checks that c's kernel is of the family the case means to exercise ('b' band, 's' scalar)
   and counts it. */
static void check_kernel(const char *name, const scase *c, char family) {
    CHECK(c->kernel != NULL, "%s: dswa_samel_kernel_name refused the problem: %s", name, dswa_last_error());
    if (!c->kernel) return;
    const int scalar = strstr(c->kernel, "scalar") != NULL;
    CHECK(scalar == (family == 's'), "%s: kernel %s, but the case is meant for the %s kernel", name,
          c->kernel, family == 's' ? "scalar" : "band");
    int known = 0;
    for (int k = 0; k < 7; k++)
        if (!strcmp(c->kernel, all_kernels[k])) kernel_runs[k]++, known = 1;
    CHECK(known, "%s: unknown kernel name %s", name, c->kernel);
}

static const char *math_name(const dswa_samel_problem *p) {
    if (p->dtype != DSWA_F32) return "";
    return p->math == DSWA_MATH_FP32 ? "/fp32" : p->math == DSWA_MATH_TF32 ? "/tf32" : "/dflt";
}

/* Runs c once (on stream s) and checks status, coverage and the error against the
   reference; the output stays fetched in c->ho. *vd_out gets the verdict (NULL: finite
   inputs, so every output must be finite). Returns 1 when the call succeeded. */
static int run_case(const char *name, scase *c, char family, cudaStream_t s, verdict *vd_out) {
    check_kernel(name, c, family);
    const dswa_status st = forward(&c->pd, c->dx, dout(c), s);
    CHECK(st == DSWA_OK, "%s: status %s: %s", name, dswa_status_string(st), dswa_last_error());
    if (!host_mode) CU(cudaStreamSynchronize(s));
    if (st != DSWA_OK) return 0;
    fetch_out(c);
    int64_t unwritten = 0, clobbered = 0;
    tu_outbuf_check(&c->v, &c->ho, &unwritten, &clobbered);
    CHECK(unwritten == 0, "%s: %lld output elements not written", name, (long long)unwritten);
    CHECK(clobbered == 0, "%s: %lld elements outside the output view modified", name, (long long)clobbered);
    char *pick = pick_tiles(c->p.seq_len);
    const verdict vd = compare(c, &c->p, c->hx, pick);
    free(pick);
    const double tol = tol_for(c->p.dtype, c->p.math);
    CHECK(vd.mismatch == 0, "%s: %lld elements finite on one side only (or different non-finite)",
          name, (long long)vd.mismatch);
    CHECK(vd.worst <= tol, "%s: relative error %.3e > %.1e", name, vd.worst, tol);
    if (vd_out) *vd_out = vd;
    else CHECK(vd.nonfinite == 0, "%s: %lld outputs not finite", name, (long long)vd.nonfinite);
    const dswa_samel_problem *p = &c->p;
    printf("  %-28s %-4s%-5s %-22s B=%d N=%-4d H=%-2d W=%d/%d rot=%d pos=%d lam=%g sc=%g rows %lld/%d"
           "  err %.2e (tol %.0e)\n", name, dswa_dtype_name(p->dtype), math_name(p),
           c->kernel ? c->kernel : "?", p->batch, p->seq_len, p->heads, p->window_left,
           p->window_right, p->rot_dims, p->pos_offset, (double)p->lambda, (double)p->scale,
           (long long)vd.rows, p->seq_len, vd.worst, tol);
    return 1;
}

/* ---- problems --------------------------------------------------------------------------- */

/* The precisions: f32 with the default math (TF32) and with fp32 math, f16, bf16. */
static const struct { dswa_dtype dt; dswa_math math; } precisions[4] = {
    {DSWA_F32, DSWA_MATH_DEFAULT}, {DSWA_F32, DSWA_MATH_FP32}, {DSWA_F16, DSWA_MATH_DEFAULT},
    {DSWA_BF16, DSWA_MATH_DEFAULT}};

/* Layouts of the packed input and the output (strides multiples of 8 elements, dim stride
   1: the CUDA kernel's 16-byte rows): 0 contiguous; 1 rows, batches and output rows padded;
   2 five separate tensors [chunk, B, N, H, D] and an output [N, B, H, D]; 3 head-major
   [B, H, chunk, N, D] with a head-major output; 4 heads and chunks padded, output heads too;
   5 contiguous with odd or huge strides on the size-1 axes. */
static void set_layout(dswa_samel_problem *p, int layout) {
    const int64_t B = p->batch, N = p->seq_len, H = p->heads, D = p->head_dim, HD = H * D;
    switch (layout) {
    case 1:
        p->qkv = (dswa_samel_layout){N * (5 * HD + 40) + 16, 5 * HD + 40, HD, D, 1};
        p->out = (dswa_layout){N * (HD + 8) + 24, HD + 8, 0, D, 1};
        break;
    case 2:
        p->qkv = (dswa_samel_layout){N * HD, HD, B * N * HD, D, 1};
        p->out = (dswa_layout){HD, B * HD, 0, D, 1};
        break;
    case 3:
        p->qkv = (dswa_samel_layout){H * 5 * N * D, D, N * D, 5 * N * D, 1};
        p->out = (dswa_layout){H * N * D, D, 0, N * D, 1};
        break;
    case 4: {
        const int64_t hs = D + 8, cs = H * hs + 16, ss = 5 * cs + 24;
        p->qkv = (dswa_samel_layout){N * ss + 32, ss, cs, hs, 1};
        p->out = (dswa_layout){N * H * (D + 16), H * (D + 16), 0, D + 16, 1};
        break;
    }
    case 5: /* contiguous, but a size-1 axis's stride odd or above int32 (never stepped) */
        if (B == 1) p->qkv.batch = 12345, p->out.batch = 12347;
        if (H == 1) p->qkv.head = ((int64_t)1 << 40) + 3, p->out.head = ((int64_t)1 << 40) + 5;
        if (N == 1) p->qkv.seq = 7, p->out.seq = 9;
        break;
    default: break; /* dswa_samel_problem_default's contiguous ones */
    }
}

/* A case of the table: rot[0] for f32, rot[1] for 16-bit; family[0] and [1] likewise ('b'
   band, 's' scalar: the kernel the case is meant for). */
typedef struct spec {
    const char *name;
    int B, N, H, wl, wr, rot[2];
    int32_t pos;
    float lambda, scale;
    int layout;
    const char *family;
    int small;   /* in the --small run */
    int own_freq; /* 1: rope_freq, fresh random frequencies (the model's own; base NaN, unread) */
} spec;

static dswa_samel_problem make_problem(const spec *s, int prec) {
    dswa_samel_problem p = dswa_samel_problem_default(s->B, s->N, s->H);
    p.dtype = precisions[prec].dt;
    p.math = precisions[prec].math;
    p.window_left = s->wl;
    p.window_right = s->wr;
    p.rot_dims = s->rot[p.dtype != DSWA_F32];
    p.pos_offset = s->pos;
    p.lambda = s->lambda;
    p.scale = s->scale;
    if (s->own_freq) {
        static float own[32];
        for (int j = 0; j < 32; j++) own[j] = (float)(tu_rng_normal(&rng) * 0.7);
        p.rope_freq = own;
        p.rope_base = NAN;
    }
    set_layout(&p, s->layout);
    return p;
}

static char family_of(const spec *s, int prec) { return s->family[precisions[prec].dt != DSWA_F32]; }

#define P_MAX (INT32_MAX - 69) /* with N = 70: the last position is INT32_MAX */

static const spec cases[] = {
    /* name                     B  N    H   wl   wr  rot       pos    lam    scale  lay fam small own */
    {"SAME-L",                  2, 300, 24, 17,  17, {32, 32}, 0,     1.f,   0.125f, 0, "bb", 0, 0},
    {"N=1",                     2, 1,   3,  17,  17, {32, 32}, 0,     0.37f, 0.125f, 0, "bb", 1, 0},
    {"N=10 < window",           3, 10,  2,  17,  17, {32, 32}, 5,     0.5f,  0.125f, 0, "bb", 0, 0},
    {"N=130, W 5/30, padded",   2, 130, 3,  5,   30, {16, 16}, 77,    0.37f, 0.2f,   1, "bb", 1, 0},
    {"span 48, five tensors",   1, 200, 2,  40,  8,  {32, 32}, 1000,  1.f,  -0.125f, 2, "bb", 0, 0},
    {"window 0/0",              2, 70,  2,  0,   0,  {32, 32}, 3,     0.5f,  0.125f, 0, "bb", 0, 0},
    {"lambda 0, head-major",    1, 129, 2,  17,  0,  {32, 32}, 0,     0.f,   0.125f, 3, "bb", 0, 0},
    {"scale 0",                 1, 100, 2,  17,  17, {32, 32}, 9,     0.5f,  0.f,    0, "bb", 0, 0},
    {"scale -0.3, W 0/24",      2, 90,  2,  0,   24, {32, 32}, 40,    1.f,  -0.3f,   4, "bb", 0, 0},
    {"rot 0",                   1, 150, 2,  17,  17, {0, 0},   11,    1.f,   0.125f, 0, "bb", 0, 0},
    {"rot 8 (f32) / 24 (16b)",  2, 100, 2,  17,  17, {8, 24},  7,     1.f,   0.125f, 0, "bs", 1, 0},
    {"rot 40 (f32) / 48 (16b)", 1, 100, 2,  12,  20, {40, 48}, 7,     0.5f,  0.125f, 4, "sb", 1, 0},
    {"rot 64",                  1, 80,  2,  17,  17, {64, 64}, 3,     1.f,   0.125f, 0, "sb", 0, 0},
    {"pos 10^6",                2, 100, 2,  17,  17, {32, 32}, 1000000, 1.f, 0.125f, 0, "bb", 0, 0},
    {"pos INT32_MAX - N + 1",   1, 70,  2,  17,  17, {32, 32}, P_MAX, 1.f,   0.125f, 1, "bb", 1, 0},
    {"W 64/64",                 2, 200, 2,  64,  64, {32, 32}, 50,    1.f,   0.125f, 0, "ss", 1, 0},
    {"W 128/3, padded",         1, 300, 2,  128, 3,  {32, 32}, 0,     0.5f,  0.125f, 1, "ss", 0, 0},
    {"W 100/100 > N=90",        1, 90,  2,  100, 100,{32, 32}, 0,     1.f,   0.125f, 2, "ss", 0, 0},
    {"W 100/100 > N=20 (clamp)",2, 20,  2,  100, 100,{32, 32}, 0,     1.f,   0.125f, 0, "bb", 1, 0},
    {"scalar, N=1",             1, 1,   2,  64,  0,  {40, 24}, 0,     0.5f,  0.125f, 0, "ss", 1, 0},
    {"scalar, pos INT32_MAX-N+1", 1, 70, 2, 0,   64, {64, 24}, P_MAX, 1.f,  -0.125f, 3, "ss", 0, 0},
    {"scalar, rot 0, lambda 0", 2, 65,  2,  30,  30, {0, 0},   1,     0.f,   0.2f,   4, "ss", 0, 0},
    {"size-1 axes, odd strides",1, 100, 1,  17,  17, {32, 32}, 0,     1.f,   0.125f, 5, "bb", 1, 0},
    {"N=1, H=1, odd strides",   1, 1,   1,  64,  64, {32, 32}, 0,     0.6f,  0.125f, 5, "bb", 0, 0},
    {"L=1292 (sampled)",        1, 1292, 24, 17, 17, {32, 32}, 0,     1.f,   0.125f, 0, "bb", 0, 0},
    {"own frequencies",         2, 150, 3,  17,  17, {32, 32}, 500,   1.f,   0.125f, 0, "bb", 1, 1},
    {"own frequencies, rot 64", 1, 100, 2,  17,  17, {64, 64}, 9,     1.f,   0.125f, 0, "sb", 1, 1},
    {"own frequencies, scalar", 1, 90,  2,  40,  40, {32, 32}, 70,    1.f,   0.125f, 0, "ss", 1, 1},
};

static void test_cases(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const spec *s = &cases[k];
        if (small_only && !s->small) continue;
        for (int prec = 0; prec < 4; prec++) {
            dswa_samel_problem p = make_problem(s, prec);
            scase c = case_new(&p);
            if ((k + prec) % 2) use_alpha_at(&c);   /* both ways through every kernel */
            run_case(s->name, &c, family_of(s, prec), 0, NULL);
            case_free(&c);
        }
    }
}

/* ---- the self-check: the comparison rejects a wrong kernel -------------------------------- */

/* Permutes, within the first rot_dims dims, the q, k, q_diff and k_diff elements of every row
   and the norms' gamma and beta: dim perm[j] moves to j. The reference on the permuted input
   is the output of a kernel that rotates the pairs the permutation maps to (j, j + c):
   attention sees q and k only through dot products, which one permutation of both leaves as
   they are, and v is not touched. */
static void permute_dims(const dswa_samel_problem *p, void *x, float *w, const int *perm) {
    const int R = p->rot_dims, D = p->head_dim;
    double tmp[256];
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->seq_len; i++)
            for (int ch = 0; ch < 5; ch++)
                for (int64_t h = 0; h < p->heads && ch != 2; h++) {
                    for (int j = 0; j < R; j++) tmp[j] = tu_load(x, x_at(&p->qkv, b, i, ch, h, perm[j]), p->dtype);
                    for (int j = 0; j < R; j++) tu_store(x, x_at(&p->qkv, b, i, ch, h, j), p->dtype, tmp[j]);
                }
    for (int v = 0; v < 4; v++) {
        for (int j = 0; j < R; j++) tmp[j] = w[v * D + perm[j]];
        for (int j = 0; j < R; j++) w[v * D + j] = (float)tmp[j];
    }
}

/* The wrong kernels, as problems (and inputs) whose reference is their output. RoPE depends
   on relative positions only, so a position error common to every row (an offset ignored, or
   off by one) changes the output through fp32 angle rounding alone: visible at large offsets
   (at 10^6 an angle's fp32 unit is 1/16 rad; near 2^31 positions themselves round to
   multiples of 128), not at small ones. Those are checked at large offsets: near 2^31 for
   every precision, at 10^6 with fp32 math only (there they move the output by about 3e-3,
   inside the TF32 and 16-bit tolerances). The others at a moderate offset, where RoPE's
   relative angles are all there (near 2^31 rows of one rounded position have none). */
enum { WRONG_COUNT = 6 };
static const char *const wrong_names[WRONG_COUNT] = {
    "RoPE left out (rot_dims 0)", "pairs interleaved (2f, 2f+1)", "rotation reversed",
    "q and k norms swapped", "pos_offset ignored", "position off by one"};

static void test_self_check(void) {
    /* wrong kernels checked: bit w of mask for wrong_names[w] */
    static const struct { spec s; unsigned mask; } sc[] = {
        {{"self-check band", 2, 150, 3, 17, 17, {32, 32}, 1000, 1.f, 0.125f, 1, "bb", 1, 0}, 0x0f},
        {{"self-check band, pos 10^6", 1, 150, 3, 17, 17, {32, 32}, 1000000, 1.f, 0.125f, 0, "bb", 0, 0}, 0x30},
        {{"self-check band, pos 2^31-N", 1, 70, 3, 17, 17, {32, 32}, P_MAX, 1.f, 0.125f, 0, "bb", 1, 0}, 0x30},
        {{"self-check scalar", 1, 100, 2, 40, 30, {40, 24}, 1000, 1.f, 0.125f, 0, "ss", 1, 0}, 0x0f},
        {{"self-check scalar, pos 10^6", 1, 100, 2, 40, 30, {40, 24}, 1000000, 1.f, 0.125f, 0, "ss", 0, 0}, 0x30}};
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++)
        for (int prec = 0; prec < 4; prec++) {
            /* --small: the first in every precision, the other small ones in bf16 */
            if (small_only && (!sc[k].s.small || (k != 0 && prec != 3))) continue;
            if (sc[k].s.pos == 1000000 && precisions[prec].math != DSWA_MATH_FP32) continue;
            dswa_samel_problem p = make_problem(&sc[k].s, prec);
            scase c = case_new(&p);
            if (!run_case(sc[k].s.name, &c, family_of(&sc[k].s, prec), 0, NULL)) {
                case_free(&c);
                continue;
            }
            const double tol = tol_for(p.dtype, p.math);
            char *pick = pick_tiles(p.seq_len);
            const int D = p.head_dim, R = p.rot_dims, half = R / 2;
            void *x2 = tu_alloc(c.xspan, p.dtype);
            float *w2 = malloc(sizeof(float) * 4 * (size_t)D);
            if (!w2) abort();
            printf("  %-28s %-4s%-5s wrong kernels' errors:", sc[k].s.name, dswa_dtype_name(p.dtype),
                   math_name(&p));
            for (int wrong = 0; wrong < WRONG_COUNT; wrong++) {
                if (!(sc[k].mask >> wrong & 1)) continue;
                dswa_samel_problem q = c.p;
                memcpy(x2, c.hx, (size_t)c.xspan * esize(&c));
                memcpy(w2, c.hw, sizeof(float) * 4 * (size_t)D);
                q.q_norm.gamma = w2; q.q_norm.beta = w2 + D;
                q.k_norm.gamma = w2 + 2 * D; q.k_norm.beta = w2 + 3 * D;
                int perm[256];
                switch (wrong) {
                case 0: q.rot_dims = 0; break;
                case 1: /* (Py)[f] = y[2f], (Py)[f + c] = y[2f + 1] */
                    for (int f = 0; f < half; f++) perm[f] = 2 * f, perm[f + half] = 2 * f + 1;
                    permute_dims(&q, x2, w2, perm);
                    break;
                case 2: /* halves swapped: rotating them by +angle turns y by -angle */
                    for (int f = 0; f < half; f++) perm[f] = f + half, perm[f + half] = f;
                    permute_dims(&q, x2, w2, perm);
                    break;
                case 3: {
                    const dswa_samel_norm t = q.q_norm;
                    q.q_norm = q.k_norm;
                    q.k_norm = t;
                    break;
                }
                case 4: q.pos_offset = 0; break;
                case 5: q.pos_offset -= 1; break; /* (+1 would pass INT32_MAX at the largest) */
                }
                const verdict vd = compare(&c, &q, x2, pick);
                CHECK(vd.worst > tol, "%s %s%s: the comparison accepts a kernel with %s (error %.3e "
                      "<= tolerance %.1e)", sc[k].s.name, dswa_dtype_name(p.dtype), math_name(&p),
                      wrong_names[wrong], vd.worst, tol);
                printf(" %s %.0fx tol;", wrong_names[wrong], vd.worst / tol);
            }
            printf("\n");
            free(pick);
            free(w2);
            tu_free(x2);
            case_free(&c);
        }
}

/* ---- NaN and inf -------------------------------------------------------------------------- */

/* A NaN reaches exactly the outputs whose window holds it (as the op's does); +-inf in q or k
   goes through DyT's tanh to a finite value. The count of non-finite outputs is worked out
   here, and the reference must agree with it as the output must agree with the reference. */
static void test_nonfinite(void) {
    static const spec nf[2] = {
        {"band", 2, 130, 3, 4, 9, {32, 32}, 21, 1.f, 0.125f, 1, "bb", 1, 0},
        {"scalar", 2, 130, 3, 40, 30, {32, 32}, 21, 1.f, 0.125f, 0, "ss", 1, 0}};
    for (int k = 0; k < 2; k++)
        for (int prec = 0; prec < 4; prec++) {
            if (small_only && prec != 3 && !(prec == 0 && k == 1)) continue; /* bf16; scalar f32 */
            const spec *s = &nf[k];
            const int64_t D = 64, N = s->N;
            /* key row j is in the window of query rows max(0, j - wr) .. min(N - 1, j + wl) */
#define SEEN_BY(j) ((((j) + s->wl < N - 1 ? (j) + s->wl : N - 1) - ((j) - s->wr > 0 ? (j) - s->wr : 0)) + 1)
            const struct { const char *name; int64_t b, i; int ch; int64_t h, d; double val; int64_t expect; } c[] = {
                {"NaN in q (pass-through dim)", 1, 5, 0, 1, 40, NAN, D},
                {"NaN in q_diff (rotated dim)", 0, 63, 3, 2, 3, NAN, D},
                {"NaN in k", 0, 64, 1, 0, 50, NAN, SEEN_BY(64) * D},
                {"NaN in k_diff at row 0", 1, 0, 4, 2, 17, NAN, SEEN_BY(0) * D},
                {"NaN in k, last row", 1, 129, 1, 1, 20, NAN, SEEN_BY(129) * D},
                {"NaN in v, one dim", 0, 70, 2, 2, 60, NAN, SEEN_BY(70)},
                {"+inf in q, -inf in k", 1, 30, 0, 0, 1, INFINITY, 0},
            };
#undef SEEN_BY
            for (size_t e = 0; e < sizeof c / sizeof c[0]; e++) {
                dswa_samel_problem p = make_problem(s, prec);
                scase cs = case_new(&p);
                tu_store(cs.hx, x_at(&p.qkv, c[e].b, c[e].i, c[e].ch, c[e].h, c[e].d), p.dtype, c[e].val);
                if (isinf(c[e].val)) {
                    tu_store(cs.hx, x_at(&p.qkv, 0, 31, 1, 1, 2), p.dtype, -INFINITY);
                    tu_store(cs.hx, x_at(&p.qkv, 1, 31, 4, 0, 1), p.dtype, -INFINITY);
                }
                input_changed(&cs);
                char name[96];
                snprintf(name, sizeof name, "%s: %s", s->name, c[e].name);
                verdict vd = {0, 0, -1, 0};
                run_case(name, &cs, family_of(s, prec), 0, &vd);
                CHECK(vd.nonfinite == c[e].expect, "%s (%s): %lld outputs non-finite, expected %lld",
                      name, dswa_dtype_name(p.dtype), (long long)vd.nonfinite, (long long)c[e].expect);
                case_free(&cs);
            }
        }
}

/* ---- refusals ------------------------------------------------------------------------------ */

/* What the CUDA path refuses beyond the shared validation (tests/test_samel.c checks that):
   16-byte rows (pointers, strides, dim stride 1), the norms' alignment, head_dim 64. Each
   refusal names the field, and nothing is written. The base problem (output rows padded to
   136 elements, so that a seq stride of 134 stays inside the buffer) runs first: each refusal
   is caused by its one change. */
static void test_refusals(void) {
    dswa_samel_problem p = dswa_samel_problem_default(1, 64, 2);
    p.out.seq = 136;
    p.out.batch = 64 * 136;
    scase c = case_new(&p);
    if (!run_case("refusals' base problem", &c, 'b', 0, NULL)) {
        case_free(&c);
        return;
    }
    tu_poison(c.ho.base, c.ho.total, c.p.dtype);
    dev_put(c.dbase, c.ho.base, (size_t)c.ho.total * esize(&c));
    /* for dim stride 2: [seq 1280, chunk 256, head 128, dim 2] spans 81919 elements */
    const int64_t n2 = 63 * 1280 + 4 * 256 + 128 + 63 * 2 + 1;
    void *dx2 = dev_alloc((size_t)n2 * 4);
    enum { NR = 7 };
    struct { const char *what; dswa_samel_problem p; const void *x; void *out; dswa_status want; const char *field; } r[NR];
    for (int k = 0; k < NR; k++) {
        r[k].p = c.pd;
        r[k].x = c.dx;
        r[k].out = dout(&c);
        r[k].want = DSWA_ERR_MISALIGNED;
    }
    r[0].what = "qkv misaligned by one element"; r[0].x = (const float *)c.dx + 1; r[0].field = "qkv = ";
    r[1].what = "qkv.seq not a multiple of 4"; r[1].p.qkv.seq += 1; r[1].field = "qkv.seq = ";
    r[2].what = "qkv.dim 2"; r[2].p.qkv = (dswa_samel_layout){0, 1280, 256, 128, 2}; r[2].x = dx2;
    r[2].field = "qkv.dim = 2";
    r[3].what = "out misaligned by one element"; r[3].out = (float *)dout(&c) + 1; r[3].field = "out = ";
    r[4].what = "out.seq not a multiple of 4"; r[4].p.out.seq = 134; r[4].field = "out.seq = 134";
    r[5].what = "q_norm.gamma misaligned"; r[5].p.q_norm.gamma = (const float *)((const char *)c.dw + 2);
    r[5].field = "q_norm.gamma";
    r[6].what = "head_dim 32"; r[6].p.head_dim = 32; r[6].p.rot_dims = 16; r[6].want = DSWA_ERR_UNSUPPORTED;
    r[6].field = "head_dim = 32";
    for (int k = 0; k < NR; k++) {
        const dswa_status st = dswa_samel_forward_cuda(&r[k].p, r[k].x, r[k].out, NULL);
        CU(cudaGetLastError());
        CHECK(st == r[k].want, "%s: status %s, want %s (%s)", r[k].what, dswa_status_string(st),
              dswa_status_string(r[k].want), dswa_last_error());
        CHECK(strstr(dswa_last_error(), r[k].field) != NULL, "%s: message '%s' does not name %s",
              r[k].what, dswa_last_error(), r[k].field);
        printf("  refused: %-32s -> %s\n", r[k].what, dswa_last_error());
    }
    CU(cudaDeviceSynchronize());
    fetch_out(&c);
    CHECK(tu_outbuf_untouched(&c.ho), "refused calls wrote output elements");
    dev_free(dx2);
    case_free(&c);
}

/* ---- CUDA graph ------------------------------------------------------------------------- */

/* Three calls (band bf16, scalar f32, band f16 with an offset and strides) captured back to
   back in one graph on a non-blocking stream; replayed with two input sets copied into the
   captured buffers in turn, the outputs (and their guards) re-poisoned before each replay:
   each replay equals the eager calls on its set, bit for bit. */
static void test_graph(void) {
    enum { CALLS = 3 };
    static const spec gs[CALLS] = {
        {"graph: band bf16", 2, 300, 4, 17, 17, {32, 32}, 0, 0.8f, 0.125f, 0, "bb", 1, 0},
        {"graph: scalar f32", 1, 200, 2, 64, 64, {32, 32}, 100, 1.f, 0.125f, 0, "ss", 1, 0},
        {"graph: band f16", 2, 130, 3, 5, 30, {32, 32}, 5000, 0.5f, 0.2f, 4, "bb", 1, 0}};
    static const int prec[CALLS] = {3, 0, 2};
    const int replays = small_only ? 4 : 100;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    scase c[CALLS];
    void *dset[CALLS][2], *dpoison[CALLS], *expect[CALLS][2], *got[CALLS];
    size_t xbytes[CALLS], obytes[CALLS];
    for (int k = 0; k < CALLS; k++) {
        dswa_samel_problem p = make_problem(&gs[k], prec[k]);
        c[k] = case_new(&p);
        /* case_new copied on the legacy stream, which s does not wait for: every copy from
           here on is on s, in order with the calls */
        CU(cudaDeviceSynchronize());
        xbytes[k] = (size_t)c[k].xtotal * esize(&c[k]);
        obytes[k] = (size_t)c[k].ho.total * esize(&c[k]);
        dpoison[k] = dev_alloc(obytes[k]);
        CU(cudaMemcpyAsync(dpoison[k], c[k].dbase, obytes[k], cudaMemcpyDeviceToDevice, s)); /* poisoned */
        got[k] = malloc(obytes[k]);
        if (!got[k]) abort();
        for (int set = 0; set < 2; set++) {
            if (set) fill_input(&c[k]); /* set 0: the case's own input; s is idle here */
            dset[k][set] = dev_alloc(xbytes[k]);
            CU(cudaMemcpyAsync(dset[k][set], c[k].hxbase, xbytes[k], cudaMemcpyHostToDevice, s));
            CU(cudaMemcpyAsync(c[k].dxbase, dset[k][set], xbytes[k], cudaMemcpyDeviceToDevice, s));
            CU(cudaMemcpyAsync(c[k].dbase, dpoison[k], obytes[k], cudaMemcpyDeviceToDevice, s));
            run_case(gs[k].name, &c[k], family_of(&gs[k], prec[k]), s, NULL); /* eager, checked */
            expect[k][set] = malloc(obytes[k]);
            if (!expect[k][set]) abort();
            memcpy(expect[k][set], c[k].ho.base, obytes[k]);
        }
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    dswa_status st[CALLS];
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < CALLS; k++) {
        st[k] = dswa_samel_forward_cuda(&c[k].pd, c[k].dx, dout(&c[k]), s);
        CU(cudaGetLastError());
    }
    CU(cudaStreamEndCapture(s, &graph));
    for (int k = 0; k < CALLS; k++)
        CHECK(st[k] == DSWA_OK, "%s: call during capture: %s", gs[k].name, dswa_last_error());
    CU(cudaGraphInstantiate(&exec, graph, 0));
    int bad = 0;
    for (int r = 0; r < replays; r++) {
        const int set = r % 2;
        for (int k = 0; k < CALLS; k++) {
            CU(cudaMemcpyAsync(c[k].dxbase, dset[k][set], xbytes[k], cudaMemcpyDeviceToDevice, s));
            CU(cudaMemcpyAsync(c[k].dbase, dpoison[k], obytes[k], cudaMemcpyDeviceToDevice, s));
        }
        CU(cudaGraphLaunch(exec, s));
        for (int k = 0; k < CALLS; k++)
            CU(cudaMemcpyAsync(got[k], c[k].dbase, obytes[k], cudaMemcpyDeviceToHost, s));
        CU(cudaStreamSynchronize(s));
        for (int k = 0; k < CALLS; k++) bad += memcmp(got[k], expect[k][set], obytes[k]) != 0;
    }
    CHECK(bad == 0, "%d of %d graph replays' outputs differ from the eager calls'", bad, replays * CALLS);
    printf("  graph of %d calls: %d replays over 2 input sets, %d outputs differ\n", CALLS, replays, bad);
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    CU(cudaStreamDestroy(s));
    for (int k = 0; k < CALLS; k++) {
        for (int set = 0; set < 2; set++) {
            dev_free(dset[k][set]);
            free(expect[k][set]);
        }
        dev_free(dpoison[k]);
        free(got[k]);
        case_free(&c[k]);
    }
}

/* alpha_at is read when the call runs: a captured call, replayed after the alphas in device
   memory changed, equals the eager call with the new alphas as floats, bitwise (band and
   scalar kernels); the two alpha sets give different outputs. */
static void test_alpha_at_graph(void) {
    static const spec gs[2] = {
        {"alpha_at graph: band bf16", 2, 300, 3, 17, 17, {32, 32}, 0, 1.f, 0.125f, 0, "bb", 1, 0},
        {"alpha_at graph: scalar f32", 1, 150, 2, 40, 40, {32, 32}, 9, 1.f, 0.125f, 0, "ss", 1, 0}};
    static const int prec[2] = {3, 0};
    printf("alpha_at in a CUDA graph\n");
    for (int k = 0; k < 2; k++) {
        dswa_samel_problem p = make_problem(&gs[k], prec[k]);
        scase c = case_new(&p);
        const int D = c.p.head_dim;
        const size_t ob = (size_t)c.ho.total * esize(&c);
        const float a[2][2] = {{c.p.q_norm.alpha, c.p.k_norm.alpha},
                               {1.7f * c.p.q_norm.alpha, 0.6f * c.p.k_norm.alpha}};
        void *poison = dev_alloc(ob), *want[2], *got = malloc(ob);
        if (!got) abort();
        CU(cudaMemcpy(poison, c.dbase, ob, cudaMemcpyDeviceToDevice));
        for (int set = 0; set < 2; set++) {   /* eager, the alphas as floats */
            dswa_samel_problem pf = c.pd;
            pf.q_norm.alpha = a[set][0];
            pf.k_norm.alpha = a[set][1];
            CU(cudaMemcpy(c.dbase, poison, ob, cudaMemcpyDeviceToDevice));
            const dswa_status st = forward(&pf, c.dx, dout(&c), 0);
            CHECK(st == DSWA_OK, "%s: eager call: %s", gs[k].name, dswa_last_error());
            want[set] = malloc(ob);
            if (!want[set]) abort();
            dev_get(want[set], c.dbase, ob);
        }
        CHECK(memcmp(want[0], want[1], ob) != 0, "%s: both alpha sets give the same output", gs[k].name);
        use_alpha_at(&c);
        cudaStream_t s;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        const dswa_status st = dswa_samel_forward_cuda(&c.pd, c.dx, dout(&c), s);
        CU(cudaStreamEndCapture(s, &graph));
        CHECK(st == DSWA_OK, "%s: call during capture: %s", gs[k].name, dswa_last_error());
        CU(cudaGraphInstantiate(&exec, graph, 0));
        int bad = 0;
        for (int r = 0; r < 4; r++) {
            const int set = r % 2;
            CU(cudaMemcpyAsync(c.dw + 4 * D, a[set], sizeof a[set], cudaMemcpyHostToDevice, s));
            CU(cudaMemcpyAsync(c.dbase, poison, ob, cudaMemcpyDeviceToDevice, s));
            CU(cudaGraphLaunch(exec, s));
            CU(cudaMemcpyAsync(got, c.dbase, ob, cudaMemcpyDeviceToHost, s));
            CU(cudaStreamSynchronize(s));
            bad += memcmp(got, want[set], ob) != 0;
        }
        CHECK(bad == 0, "%s: %d of 4 replays differ from the eager call with the same alphas",
              gs[k].name, bad);
        printf("  %-28s %s: 4 replays, 2 alpha sets, %d differ\n", gs[k].name, c.kernel, bad);
        CU(cudaGraphExecDestroy(exec));
        CU(cudaGraphDestroy(graph));
        CU(cudaStreamDestroy(s));
        dev_free(poison);
        free(got);
        free(want[0]);
        free(want[1]);
        case_free(&c);
    }
}

int main(int argc, char **argv) {
    if (tu_flags(argc, argv, "--small", &small_only, "--host", &host_mode, (char *)NULL))
        return 2;
    if (!host_mode && !dswa_cuda_available()) {
        dswa_samel_problem p = dswa_samel_problem_default(1, 8, 1);
        static float x[8 * 5 * 64], o[8 * 64], w[64];
        p.q_norm.gamma = p.q_norm.beta = p.k_norm.gamma = p.k_norm.beta = w;
        (void)dswa_samel_forward_cuda(&p, x, o, NULL); /* the library's reason */
        tu_skip("no GPU (%s)", dswa_last_error());
    }
    long_mode = getenv("DSWA_TEST_LONG") && atoi(getenv("DSWA_TEST_LONG")) > 0;
    const char *env = getenv("DSWA_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 0) : tu_fresh_seed();
    printf("seed %llu (DSWA_TEST_SEED=%llu repeats this run); rows compared: %s\n",
           (unsigned long long)seed, (unsigned long long)seed,
           long_mode ? "all (DSWA_TEST_LONG)" : "a sample of each large problem");
    tu_rng_init(&rng, seed);
    if (host_mode) {
        printf("--host: dswa_samel_forward_cpu on host memory (the test's own check; no graph)\n");
    } else {
        tu_print_device();
    }
    static const struct { const char *name; void (*fn)(void); } parts[] = {
        {"self-check", test_self_check}, {"cases", test_cases}, {"NaN and inf", test_nonfinite},
        {"refusals", test_refusals}, {"graph", test_graph}, {"alpha_at graph", test_alpha_at_graph}};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        if (host_mode && (parts[k].fn == test_graph || parts[k].fn == test_refusals ||
                          parts[k].fn == test_alpha_at_graph))
            continue;
        const double t0 = seconds();
        parts[k].fn();
        printf("(%s: %.1f s)\n", parts[k].name, seconds() - t0);
    }
    for (int k = 0; k < 7; k++) {
        CHECK(kernel_runs[k] > 0, "kernel %s never ran", all_kernels[k]);
        printf("  %-24s ran %d times\n", all_kernels[k], kernel_runs[k]);
    }
    if (host_mode) printf("(of which in dswa_samel_forward_cpu: %.1f s)\n", forward_seconds);
    else CU(cudaDeviceSynchronize());
    TEST_MAIN_RETURN("test_cuda_samel");
}
#endif
