/* What the parts of `dswa bench` share (tools/bench.c, the command; tools/bench/: options.c,
   timing.c, op.c, samel.c, output.c): its constants, settings, rows and context. Not for use
   outside tools/bench.c and tools/bench/. */
#ifndef DSWA_TOOLS_BENCH_INTERNAL_H
#define DSWA_TOOLS_BENCH_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "../cli.h"
#include "../gpu.h"


#define SAME_H 24
#define SAME_D 64
#define SAME_W 17
#define MAX_SHAPES 32
#define MAX_ROWS (MAX_SHAPES * 6)
#define GRAPH_CALLS 20        /* calls per graph: what an engine's kernel-after-kernel looks like */
#define GPU_REPLAYS 10        /* timed replays per graph (median, min, max) */
#define GPU_WARM 2            /* untimed replays first */
#define COLD_L2_FACTOR 2      /* cold: the other buffers between two uses of one exceed 2 x L2 */

enum { V_BOTH = 0, V_FULL = 1, V_SHARED = 2 };
enum { ROW_OK = 0, ROW_FAIL, ROW_UNSUPPORTED, ROW_ERROR };
enum { COLD_AUTO = 0, COLD_ALL, COLD_NONE };
enum { OP_DIFF_SWA = 0, OP_SAMEL };

/* The fused block's goals on the GPU (README, "The fused SAME-L block"): (a) at least this % of
   the same-size copy; (b) at least bench_samel_goal_ratio(dtype) x faster than the compiled
   prologue + op (judged by bench/readme_table.py). */
#define SAMEL_GOAL_PCT_COPY 85.0
#define SAMEL_ROT_DIMS 32     /* SAME-L's RoPE: the first 32 of the 64 dims */
#define SAMEL_Q_ALPHA 0.75f   /* DyT alphas of the bench's inputs: unequal, so a swap shows */
#define SAMEL_K_ALPHA 1.25f

/* The backward's goals on the GPU (issue 28): (a) at least this % of the same-size copy of its
   bytes (dswa_backward_min_bytes, dswa_samel_backward_min_bytes), f32 and 16-bit; (b) the
   fused block's forward + backward at least BWD_GOAL_VS_FLEX x faster than the compiled
   prologue + FlexAttention forward + backward, and (c) faster than the chunked-halo SDPA path
   by at least as much as the forward is (both judged by bench/readme_table.py --compare). */
#define BWD_GOAL_PCT_COPY 70.0
#define BWD_GOAL_VS_FLEX 10.0
/* Backward rows checked against a reference (the op: dswa_reference_backward; the fused
   block on the GPU: dswa_samel_backward_cpu) up to this N; larger ones: every gradient written. */
#define BWD_CHECK_MAX_N 4352

typedef struct bench_opts {
    int op;                     /* OP_DIFF_SWA or OP_SAMEL */
    cli_backend backend;
    int64_t n[MAX_SHAPES];      /* sequence lengths */
    int64_t l[MAX_SHAPES];      /* latent frames, or -1 when given as N */
    int nshapes;
    int shapes_default;         /* 1: no --L or --N given */
    int dtypes[3];
    dswa_math math;
    int vmode;
    int32_t wl, wr;
    int cold;
    int repeats, warmup, rows;  /* repeats, warmup: -1 for the backend's default */
    uint64_t seed;
    int json;
    int backward;               /* --backward: the backward's rows instead of the forward's */
} bench_opts;

typedef struct cold_result {
    int done;
    int buffers, copy_buffers;      /* buffer sets the calls / copies rotate over */
    gpu_stats time, copy;
    char copy_method[96];
    char msg[200];                  /* why it was not measured, when not done */
} cold_result;

typedef struct bench_row {
    int64_t l, n;
    dswa_dtype dtype;
    int shared;
    int status;
    char msg[320];
    double min_bytes, flops, floor_ms;
    gpu_stats time;                     /* ms per call: GPU graph replays / CPU calls */
    double call_ms;                     /* GPU: median of plain calls between two events */
    gpu_stats copy;                     /* GPU: the fastest same-size copy, per copy */
    gpu_stats fwd_bwd;                  /* --backward: a forward then a backward, per pair */
    char copy_method[96];
    cold_result cold;
    double gbs, pct_floor, pct_copy, gflops, gflops_core;
    double rel_err, max_abs, tol;
    int64_t unwritten;
    const char *kernel;                 /* samel, GPU: the kernel that ran */
} bench_row;

/* The fastest copy of a size, kept for the rows that move the same bytes (f16 and bf16). */
typedef struct copy_memo {
    size_t bytes;
    int nbuf;
    gpu_stats st;
    char method[96];
} copy_memo;

typedef struct bench_ctx {
    const bench_opts *o;
    int cuda;                   /* 1: CUDA backend, 0: CPU backend */
    int threads;
    int repeats, warmup;        /* the options, or the backend's defaults */
    double copy_gbs;            /* the floor's bandwidth */
    char copy_method[160];      /* how copy_gbs was measured */
    double memcpy_graph_gbs, kernel_graph_gbs;   /* 2 GiB copies in graphs */
    char kernel_graph_cfg[96];
    size_t l2_bytes;
    char cpu_features[96];
    copy_memo memo[2 * MAX_ROWS];
    int nmemo;
    double t0;
    int fatal;                  /* a CUDA call failed: the remaining rows are not run */
    char fatal_msg[320];
} bench_ctx;

/* What a job's call runs: the forward, the backward, or a forward then a backward. */
enum { PASS_FWD = 0, PASS_BWD, PASS_FWD_BWD };

/* What a row calls: the op (p; q, k, v) or the fused block (sp; x); out. Host pointers for
   the CPU backend; device pointers for the CUDA one, one set per buffer (call i of a graph
   uses set i mod nbuf). A backward job (pass PASS_BWD or PASS_FWD_BWD; nbuf 1) also has the
   backward's problem (bp, or sbp for the fused block), dout, its gradients (dq, dk, dv inside
   `grad` for the op; `grad` itself, the packed dx, for the block; g the norms'), and the
   GPU's workspace. The result a job is judged by is result_of(): out[0], or grad. */
typedef struct dswa_job {
    const dswa_problem *p;
    const dswa_samel_problem *sp;
    const void *const *q, *const *k, *const *v, *const *x;
    void *const *out;
    int nbuf;
    dswa_status status;
    int pass;
    const dswa_backward_problem *bp;
    const dswa_samel_backward_problem *sbp;
    const void *dout;
    void *grad, *dq, *dk, *dv;
    const dswa_samel_norm_grads *g;
    void *ws;
    size_t ws_bytes;
} dswa_job;


/* ---- options.c ---------------------------------------------------------------------------- */
/* Fills o from the command line: 0; 1 after printing the help; 2 after a usage error. */
int bench_parse(int argc, char **argv, bench_opts *o);

/* ---- timing.c: how a row is timed and judged ----------------------------------------------- */
/* Progress to stderr, stamped with the seconds since the bench began. */
void bench_progress(const bench_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A row of shape (l, n), dtype and V layout, its sizes from p, every figure NaN, status error. */
void bench_init_row(const bench_ctx *c, bench_row *row, int64_t l, int64_t n, dswa_dtype dtype,
                    int shared, const dswa_problem *p);
/* The query rows whose error is checked: up to `want`, spread evenly over [0, n); their count. */
int bench_sample_rows(int64_t n, int want, int32_t *rows);
/* The relative error a row of this dtype and math may have on this backend. */
double bench_tolerance(const bench_ctx *c, dswa_dtype dtype, dswa_math math);
/* The row's figures from its time, judged by rel_err against tol and the output's poison. */
void bench_finish_row(const bench_ctx *c, bench_row *row, dswa_dtype dtype, int64_t total,
                      const void *hout);
/* Times a job on the CPU (output in job->out[0]): 0, or -1 with the row saying why not. */
int bench_time_cpu_calls(const bench_ctx *c, bench_row *row, dswa_job *job, size_t out_bytes);
/* Times a job on the GPU (output downloaded into hout): 0; 1 refused (the row says why); -1
   after a CUDA failure (recorded in c->fatal_msg). */
int bench_time_cuda_calls(bench_ctx *c, bench_row *row, dswa_job *job, void *hout,
                          size_t out_bytes);
/* The row's same-size copy and its % of it: 0, or -1 after a CUDA failure. */
int bench_time_copy(bench_ctx *c, bench_row *row);
/* A backward job's forward + backward pairs in a graph like the rows' (row->fwd_bwd): 0; 1
   refused (the row says why); -1 after a CUDA failure. */
int bench_time_cuda_fwd_bwd(bench_ctx *c, bench_row *row, dswa_job *job);
/* The same on the CPU: 0, or -1 with the row saying why not. */
int bench_time_cpu_fwd_bwd(const bench_ctx *c, bench_row *row, dswa_job *job, size_t out_bytes);
/* A backward row's figures and check: every gradient element written (`total` elements of
   hgrad, dense) and, when rel_err is set (not NaN), rel_err within tol. */
void bench_finish_backward_row(const bench_ctx *c, bench_row *row, dswa_dtype dtype,
                               int64_t total, const void *hgrad);
/* The op's row timed cold (row->cold): 0, or -1 after a CUDA failure. */
int bench_time_cold(bench_ctx *c, bench_row *row, const dswa_problem *p, const void *dq,
                    const void *dk, const void *dv, void *dout, size_t in_bytes, size_t v_bytes,
                    size_t out_bytes);
/* Records a CUDA failure (`what`, then the CUDA error) in c and the row: returns -1. */
int bench_cuda_fatal(bench_ctx *c, bench_row *row, const char *what);
/* Records a CUDA failure before a shape's rows ran (copying their inputs to the device): msg
   ("CUDA error: ...", for those rows) and c (the remaining rows are not run). Returns msg. */
const char *bench_cuda_lost(bench_ctx *c, char *msg, size_t msg_len);
/* The 2 GiB copies in graphs (c->memcpy_graph_gbs, kernel_graph_gbs): 0, or -1 on a failure. */
int bench_copy_reference(bench_ctx *c);

/* ---- op.c: the op's rows ------------------------------------------------------------------- */
/* The op at SAME-L's shape with the bench's windows and math; V shared (H heads) or not. */
dswa_problem bench_same_l_problem(const bench_opts *o, int64_t n, dswa_dtype dtype, int shared);
/* The op's random normal inputs of a shape (q and k: n * 2 * H * D floats each; v with 2H
   heads and v shared, H heads: where not NULL), from the bench's seed: the same data for the
   forward's and the backward's rows. */
void bench_op_inputs(const bench_opts *o, int64_t n, float *q, float *k, float *vf, float *vs);
/* A new host copy of n f32 values converted to dtype (cli_free it): the inputs of the rows of
   other dtypes. NULL out of host memory, or where f is NULL. */
void *bench_converted(const float *f, size_t n, dswa_dtype dtype);
/* Every dtype and V layout of one shape; appends to out_rows[*nrow]. */
void bench_run_op_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows, int *nrow);

/* ---- backward.c: the backward's rows (--backward) ----------------------------------------- */
/* The relative error a backward row of this dtype and math may have against its reference:
   f32 5e-3 where the GPU runs it on TF32, else 1e-4; 16-bit 1e-2. */
double bench_backward_tolerance(const bench_ctx *c, dswa_dtype dtype, dswa_math math);
/* Every dtype and V layout of one shape (the op's backward); appends to out_rows[*nrow]. */
void bench_run_op_backward_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows,
                                 int *nrow);
/* Every dtype of one shape (the fused block's backward); appends to out_rows[*nrow]. */
void bench_run_samel_backward_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows,
                                    int *nrow);

/* ---- samel.c: the fused block's rows ------------------------------------------------------- */
/* Goal (b)'s ratio for a dtype; NaN where none is set (f16). */
double bench_samel_goal_ratio(dswa_dtype dtype);
/* The fused block's problem at SAME-L's shape for a dtype (the bench's windows, math, alphas),
   its norms' gamma and beta at `norms` (q gamma, q beta, k gamma, k beta: SAME_D floats each). */
dswa_samel_problem bench_samel_problem(const bench_opts *o, int64_t n, dswa_dtype dtype,
                                       const float *norms);
/* Random normal packed input (n * 5 * H * D floats) and norms (4 * SAME_D: gamma near 1, beta
   near 0), from the bench's seed: the same data for the forward's and the backward's rows. */
void bench_samel_inputs(const bench_opts *o, int64_t n, float *x, float *norms);
/* Every dtype of one shape; appends to out_rows[*nrow]. */
void bench_run_samel_shape(bench_ctx *c, int64_t l, int64_t n, bench_row *out_rows, int *nrow);

/* ---- output.c ------------------------------------------------------------------------------ */
/* The rows as one JSON document on stdout. */
void bench_print_json(const bench_ctx *c, const char *device, const char *date,
                      const bench_row *rows, int nrow);
/* The rows as text on stdout: what was measured and how, then the op's or the block's tables. */
void bench_print_text(const bench_ctx *c, const char *device, const char *date,
                      const bench_row *rows, int nrow);

#endif
