/* What `dswa bench` prints: one JSON document (--json) or text tables. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <string.h>

#include "internal.h"

#define ERRATIC_PCT 10.0      /* a GPU row whose replays spread more than this is flagged */

static const char *status_name(int s) {
    switch (s) {
    case ROW_OK: return "ok";
    case ROW_FAIL: return "fail";
    case ROW_UNSUPPORTED: return "unsupported";
    default: return "error";
    }
}

static void json_key_num(FILE *f, const char *key, double x) {
    fprintf(f, ", \"%s\": ", key);
    cli_json_num(f, x);
}

static void json_stats(FILE *f, const char *key, const gpu_stats *s) {
    json_key_num(f, key, s->median);
    fprintf(f, ", \"%s_min\": ", key);
    cli_json_num(f, s->min);
    fprintf(f, ", \"%s_max\": ", key);
    cli_json_num(f, s->max);
}

void bench_print_json(const bench_ctx *c, const char *device, const char *date,
                      const bench_row *rows, int nrow) {
    const bench_opts *o = c->o;
    FILE *f = stdout;
    int rt = 0, drv = 0;
    if (c->cuda) gpu_versions(&rt, &drv);
    fprintf(f, "{\n  \"tool\": \"dswa bench\",\n  \"op\": \"%s\",\n",
            o->op == OP_SAMEL ? "samel" : "diff_swa");
    /* The forward's document has no "pass" (as before --backward existed). */
    if (o->backward) fprintf(f, "  \"pass\": \"backward\",\n");
    fprintf(f, "  \"version\": ");
    cli_json_str(f, DSWA_VERSION_STRING);
    fprintf(f, ",\n  \"commit\": ");
#ifdef DSWA_GIT_COMMIT
    cli_json_str(f, DSWA_GIT_COMMIT);
#else
    fputs("null", f);
#endif
    fprintf(f, ",\n  \"date\": ");
    cli_json_str(f, date);
    fprintf(f, ",\n  \"backend\": \"%s\",\n  \"device\": ", c->cuda ? "cuda" : "cpu");
    cli_json_str(f, device);
    fprintf(f, ",\n  \"threads\": %d,\n", c->threads);
    if (c->cuda) {
        fprintf(f, "  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n  \"l2_bytes\": %zu,\n",
                rt, drv, c->l2_bytes);
    } else {
        fprintf(f, "  \"cpu_isa\": ");
        cli_json_str(f, dswa_cpu_isa());
        fprintf(f, ",\n  \"cpu_features\": ");
        cli_json_str(f, c->cpu_features);
        fprintf(f, ",\n");
    }
    fprintf(f, "  \"copy_bandwidth_gb_s\": ");
    cli_json_num(f, c->copy_gbs);
    fprintf(f, ",\n  \"copy_bandwidth_method\": ");
    cli_json_str(f, c->copy_method);
    if (c->cuda) {
        fprintf(f, ",\n  \"copy_2gib_graph\": {\"memcpy_gb_s\": ");
        cli_json_num(f, c->memcpy_graph_gbs);
        fprintf(f, ", \"kernel_gb_s\": ");
        cli_json_num(f, c->kernel_graph_gbs);
        fprintf(f, ", \"kernel\": ");
        cli_json_str(f, c->kernel_graph_cfg);
        fprintf(f, "},\n  \"graph_calls\": %d", GRAPH_CALLS);
    }
    fprintf(f, ",\n  \"math\": \"%s\",\n  \"repeats\": ", dswa_math_name(o->math));
    if (c->repeats > 0) fprintf(f, "%d", c->repeats);
    else fputs("null", f);   /* CPU: until enough calls and seconds; each row says how many */
    fprintf(f, ",\n  \"warmup\": %d,\n  \"seed\": %llu,\n  \"sample_rows\": %d,\n", c->warmup,
            (unsigned long long)o->seed, o->rows);
    fprintf(f, "  \"shape\": {\"batch\": 1, \"heads\": %d, \"head_dim\": %d, \"window_left\": %d,"
               " \"window_right\": %d, \"scale\": 0.125, \"lambda\": 1",
            SAME_H, SAME_D, (int)o->wl, (int)o->wr);
    if (o->op == OP_SAMEL)
        fprintf(f, ", \"rot_dims\": %d, \"rope_base\": 10000, \"pos_offset\": 0, \"q_alpha\": %g,"
                   " \"k_alpha\": %g", SAMEL_ROT_DIMS, (double)SAMEL_Q_ALPHA, (double)SAMEL_K_ALPHA);
    fprintf(f, "},\n");
    if (o->backward) {
        /* The backward's goals (their one home; bench/readme_table.py judges those against the
           training comparators). */
        fprintf(f, "  \"goals\": {\"pct_of_copy\": %g", BWD_GOAL_PCT_COPY);
        if (o->op == OP_SAMEL)
            fprintf(f, ", \"vs_flex_fwd_bwd\": %g, \"vs_chunked_fwd_bwd\": \"forward's\"",
                    BWD_GOAL_VS_FLEX);
        fprintf(f, "},\n");
    } else if (o->op == OP_SAMEL) {
        /* The goals (their one home; bench/readme_table.py judges (b)). */
        fprintf(f, "  \"goals\": {\"pct_of_copy\": %g, \"vs_prologue_op\": {", SAMEL_GOAL_PCT_COPY);
        for (int d = 0, first = 1; d < 3; d++) {
            if (!isfinite(bench_samel_goal_ratio((dswa_dtype)d))) continue;
            fprintf(f, "%s\"%s\": %g", first ? "" : ", ", dswa_dtype_name((dswa_dtype)d),
                    bench_samel_goal_ratio((dswa_dtype)d));
            first = 0;
        }
        fprintf(f, "}},\n");
    }
    fprintf(f, "  \"rows\": [");
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        fprintf(f, "%s\n    {", i ? "," : "");
        if (r->l >= 0) fprintf(f, "\"L\": %lld, ", (long long)r->l);
        else fprintf(f, "\"L\": null, ");
        fprintf(f, "\"N\": %lld, \"dtype\": \"%s\", \"v\": \"%s\", \"status\": \"%s\", ",
                (long long)r->n, dswa_dtype_name(r->dtype), r->shared ? "shared" : "full",
                status_name(r->status));
        fprintf(f, "\"message\": ");
        cli_json_str(f, r->msg);
        fprintf(f, ", \"min_bytes\": %.0f, \"useful_flops\": %.0f", r->min_bytes, r->flops);
        json_key_num(f, "floor_ms", r->floor_ms);
        json_stats(f, "time_ms", &r->time);
        if (!c->cuda) fprintf(f, ", \"calls\": %d", r->time.replays);   /* the GPU's: "repeats" */
        if (c->cuda) {
            json_key_num(f, "call_ms", r->call_ms);
            json_stats(f, "copy_ms", &r->copy);
            fprintf(f, ", \"copy_method\": ");
            cli_json_str(f, r->copy_method);
            json_key_num(f, "pct_of_copy", r->pct_copy);
        }
        json_key_num(f, "pct_of_floor", r->pct_floor);
        json_key_num(f, "gb_s", r->gbs);
        json_key_num(f, "gflop_s", r->gflops);
        if (o->backward) json_stats(f, "fwd_bwd_ms", &r->fwd_bwd);
        if (o->op == OP_SAMEL && !o->backward) {
            fprintf(f, ", \"kernel\": ");
            if (r->kernel) cli_json_str(f, r->kernel);
            else fputs("null", f);
        }
        if (!c->cuda) json_key_num(f, "gflop_s_per_core", r->gflops_core);
        json_key_num(f, "rel_err", r->rel_err);
        json_key_num(f, "max_abs_err", r->max_abs);
        json_key_num(f, "tolerance", r->tol);
        fprintf(f, ", \"unwritten\": %lld", (long long)r->unwritten);
        if (c->cuda && o->op != OP_SAMEL && !o->backward) {
            const cold_result *k = &r->cold;
            fprintf(f, ", \"cold\": ");
            if (!k->done && !k->msg[0]) {
                fputs("null", f);
            } else {
                fprintf(f, "{\"buffers\": %d", k->buffers);
                json_stats(f, "time_ms", &k->time);
                fprintf(f, ", \"copy_buffers\": %d", k->copy_buffers);
                json_stats(f, "copy_ms", &k->copy);
                fprintf(f, ", \"copy_method\": ");
                cli_json_str(f, k->copy_method);
                json_key_num(f, "pct_of_copy", k->done ? 100.0 * k->copy.median / k->time.median : NAN);
                fprintf(f, ", \"message\": ");
                cli_json_str(f, k->msg);
                fputc('}', f);
            }
        }
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
}

/* A text table: cells of up to 31 characters, right-aligned except the columns in `left`. */
#define MAX_COLS 16
typedef struct table {
    int ncol, nrow;
    const char *head[MAX_COLS];
    int left[MAX_COLS];
    char cell[MAX_ROWS][MAX_COLS][32];
    int ncells[MAX_ROWS];          /* cells filled in each row */
    char tail[MAX_ROWS][340];      /* printed after the cells */
} table;

static void table_print(const table *t) {
    int width[MAX_COLS];
    for (int j = 0; j < t->ncol; j++) {
        width[j] = (int)strlen(t->head[j]);
        for (int i = 0; i < t->nrow; i++)
            if (j < t->ncells[i] && (int)strlen(t->cell[i][j]) > width[j])
                width[j] = (int)strlen(t->cell[i][j]);
    }
    for (int j = 0; j < t->ncol; j++)
        printf("%s%*s", j ? "  " : "", t->left[j] ? -width[j] : width[j], t->head[j]);
    printf("  check\n");
    for (int i = 0; i < t->nrow; i++) {
        for (int j = 0; j < t->ncells[i]; j++)
            printf("%s%*s", j ? "  " : "", t->left[j] ? -width[j] : width[j], t->cell[i][j]);
        printf("  %s\n", t->tail[i]);
    }
}

static void fmt(char *cell, const char *format, double x) {
    if (isfinite(x)) snprintf(cell, 32, format, x);
    else snprintf(cell, 32, "-");
}

static double spread_pct(const gpu_stats *s) { return 100.0 * (s->max - s->min) / s->median; }

/* The cells that name a row: L, N, dtype and (the op's tables) V; their count. */
static int key_cells(char (*s)[32], const bench_row *r, int with_v) {
    if (r->l >= 0) snprintf(s[0], 32, "%lld", (long long)r->l);
    else snprintf(s[0], 32, "-");
    snprintf(s[1], 32, "%lld", (long long)r->n);
    snprintf(s[2], 32, "%s", dswa_dtype_name(r->dtype));
    if (!with_v) return 3;
    snprintf(s[3], 32, "%s", r->shared ? "shared" : "2H");
    return 4;
}

/* What follows a row's cells: ok (flagged when a GPU row's replays spread widely), FAIL and
   why, or why it was not timed. */
static void status_tail(const bench_ctx *c, const bench_row *r, char *tail, size_t tn) {
    if (r->status == ROW_OK && c->cuda && spread_pct(&r->time) > ERRATIC_PCT)
        snprintf(tail, tn, "ok, but erratic (replays spread %.0f %%): rerun", spread_pct(&r->time));
    else if (r->status == ROW_OK) snprintf(tail, tn, "ok");
    else if (r->status == ROW_FAIL) snprintf(tail, tn, "FAIL: %s", r->msg);
    else snprintf(tail, tn, "%s", r->msg);
}

static void print_tables(const bench_ctx *c, const bench_row *rows, int nrow) {
    static table t;
    static const char *gpu_head[] = {"L", "N", "dtype", "V", "time_ms", "spread", "copy_ms",
                                     "%copy", "floor_ms", "%floor", "GB/s", "call_ms", "rel_err"};
    static const char *cpu_head[] = {"L", "N", "dtype", "V", "time_ms", "spread", "floor_ms",
                                     "%floor", "GB/s", "GFLOP/s", "GF/s/core", "rel_err"};
    const char **head = c->cuda ? gpu_head : cpu_head;
    memset(&t, 0, sizeof t);
    t.ncol = c->cuda ? 13 : 12;
    for (int j = 0; j < t.ncol; j++) t.head[j] = head[j];
    t.left[2] = t.left[3] = 1;
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        char(*s)[32] = t.cell[i];
        const int timed = r->status == ROW_OK || r->status == ROW_FAIL;
        int j = key_cells(s, r, 1);
        if (timed) {
            fmt(s[j++], "%.4f", r->time.median);
            fmt(s[j++], "%.1f%%", spread_pct(&r->time));
            if (c->cuda) {
                fmt(s[j++], "%.4f", r->copy.median);
                fmt(s[j++], "%.1f%%", r->pct_copy);
            }
            fmt(s[j++], "%.4f", r->floor_ms);
            fmt(s[j++], "%.1f%%", r->pct_floor);
            fmt(s[j++], "%.1f", r->gbs);
            if (c->cuda) {
                fmt(s[j++], "%.4f", r->call_ms);
            } else {
                fmt(s[j++], "%.1f", r->gflops);
                fmt(s[j++], "%.2f", r->gflops_core);
            }
            fmt(s[j++], "%.2e", r->rel_err);
        }
        t.ncells[i] = timed ? j : 4;
        status_tail(c, r, t.tail[i], sizeof t.tail[i]);
    }
    t.nrow = nrow;
    printf("\n");
    table_print(&t);

    int ncold = 0;
    for (int i = 0; i < nrow; i++) ncold += rows[i].cold.done || rows[i].cold.msg[0];
    if (!ncold) return;
    static const char *cold_head[] = {"L", "N", "dtype", "V", "buffers", "time_ms", "spread",
                                      "copy_ms", "%copy", "%floor"};
    memset(&t, 0, sizeof t);
    t.ncol = 10;
    for (int j = 0; j < t.ncol; j++) t.head[j] = cold_head[j];
    t.left[2] = t.left[3] = 1;
    for (int i = 0; i < nrow; i++) {
        const bench_row *r = &rows[i];
        const cold_result *k = &r->cold;
        if (!k->done && !k->msg[0]) continue;
        char(*s)[32] = t.cell[t.nrow];
        key_cells(s, r, 1);
        if (k->done) {
            snprintf(s[4], 32, "%d", k->buffers);
            fmt(s[5], "%.4f", k->time.median);
            fmt(s[6], "%.1f%%", spread_pct(&k->time));
            fmt(s[7], "%.4f", k->copy.median);
            fmt(s[8], "%.1f%%", 100.0 * k->copy.median / k->time.median);
            fmt(s[9], "%.1f%%", 100.0 * r->floor_ms / k->time.median);
            t.ncells[t.nrow] = 10;
            snprintf(t.tail[t.nrow], sizeof t.tail[t.nrow], "ok");
        } else {
            t.ncells[t.nrow] = 4;
            snprintf(t.tail[t.nrow], sizeof t.tail[t.nrow], "%s", k->msg);
        }
        t.nrow++;
    }
    printf("\ncold: the calls (and the copies) rotate over 'buffers' sets of inputs and output,\n"
           "more than %d x L2 (%.0f MB) passing between two uses of one set\n",
           COLD_L2_FACTOR, (double)c->l2_bytes / 1e6);
    table_print(&t);
}

/* Row i of the fused block's or the backward's table: its key (with_v: and V); when timed,
   time, spread, the copy's (GPU) or the floor's (CPU) ms and %, GB/s, (fwd_bwd: fwd+bwd_ms,)
   call_ms (GPU) or GFLOP/s (CPU) and rel_err; then its status, a GPU row below the %copy goal
   (`goal`, named `goal_name`) flagged. */
static void goal_row(const bench_ctx *c, const bench_row *r, int with_v, int fwd_bwd, double goal,
                     const char *goal_name, table *t, int i) {
    char(*s)[32] = t->cell[i], *tail = t->tail[i];
    const size_t tn = sizeof t->tail[i];
    const int timed = r->status == ROW_OK || r->status == ROW_FAIL;
    const int nkey = key_cells(s, r, with_v);
    int j = nkey;
    if (timed) {
        fmt(s[j++], "%.4f", r->time.median);
        fmt(s[j++], "%.1f%%", spread_pct(&r->time));
        fmt(s[j++], "%.4f", c->cuda ? r->copy.median : r->floor_ms);
        fmt(s[j++], "%.1f%%", c->cuda ? r->pct_copy : r->pct_floor);
        fmt(s[j++], "%.1f", r->gbs);
        if (fwd_bwd) fmt(s[j++], "%.4f", r->fwd_bwd.median);
        fmt(s[j++], c->cuda ? "%.4f" : "%.1f", c->cuda ? r->call_ms : r->gflops);
        fmt(s[j++], "%.2e", r->rel_err);
    }
    t->ncells[i] = timed ? j : nkey;
    status_tail(c, r, tail, tn);
    if (r->status == ROW_OK && c->cuda && isfinite(r->pct_copy) && r->pct_copy < goal) {
        const size_t len = strlen(tail);
        snprintf(tail + len, tn - len, "; below %s: %.1f %% < %.0f %%", goal_name, r->pct_copy,
                 goal);
    }
}

/* The fused block's table: one row per shape and dtype; the goals judged per GPU row. */
static void print_samel_table(const bench_ctx *c, const bench_row *rows, int nrow) {
    static table t;
    static const char *gpu_head[] = {"L", "N", "dtype", "time_ms", "spread", "copy_ms", "%copy",
                                     "GB/s", "call_ms", "rel_err"};
    static const char *cpu_head[] = {"L", "N", "dtype", "time_ms", "spread", "floor_ms", "%floor",
                                     "GB/s", "GFLOP/s", "rel_err"};
    const char **head = c->cuda ? gpu_head : cpu_head;
    memset(&t, 0, sizeof t);
    t.ncol = 10;
    for (int j = 0; j < t.ncol; j++) t.head[j] = head[j];
    t.left[2] = 1;
    for (int i = 0; i < nrow; i++)
        goal_row(c, &rows[i], 0, 0, SAMEL_GOAL_PCT_COPY, "goal (a)", &t, i);
    t.nrow = nrow;
    printf("\n");
    table_print(&t);
}

/* The backward's table: one row per shape, dtype (and, the op, V layout); goal (a) judged per
   GPU row. */
static void print_backward_table(const bench_ctx *c, const bench_row *rows, int nrow) {
    static table t;
    static const char *gpu_head[] = {"L", "N", "dtype", "V", "bwd_ms", "spread", "copy_ms",
                                     "%copy", "GB/s", "fwd+bwd_ms", "call_ms", "rel_err"};
    static const char *cpu_head[] = {"L", "N", "dtype", "V", "bwd_ms", "spread", "floor_ms",
                                     "%floor", "GB/s", "fwd+bwd_ms", "GFLOP/s", "rel_err"};
    const char **head = c->cuda ? gpu_head : cpu_head;
    const int with_v = c->o->op != OP_SAMEL;
    memset(&t, 0, sizeof t);
    for (int j = 0, k = 0; j < 12; j++)
        if (with_v || j != 3) t.head[k++] = head[j];
    t.ncol = with_v ? 12 : 11;
    t.left[2] = 1;
    t.left[3] = with_v;
    for (int i = 0; i < nrow; i++)
        goal_row(c, &rows[i], with_v, 1, BWD_GOAL_PCT_COPY, "the goal", &t, i);
    t.nrow = nrow;
    printf("\n");
    table_print(&t);
}

void bench_print_text(const bench_ctx *c, const char *device, const char *date,
                      const bench_row *rows, int nrow) {
    const bench_opts *o = c->o;
    printf("dswa %s bench, %s, backend %s: %s\n", DSWA_VERSION_STRING, date,
           c->cuda ? "cuda" : "cpu", device);
    if (!c->cuda)
        printf("CPU backend: %s (CPU vector extensions: %s)\n", dswa_cpu_isa(),
               c->cpu_features);
    printf("copy bandwidth %.1f GB/s (%s, bytes read + written)\n", c->copy_gbs,
           c->copy_method);
    if (o->op == OP_SAMEL)
        printf("the fused SAME-L block (--op samel): packed input (B, N, 5*H*D), DyT "
               "(alphas %g, %g), RoPE on %d dims (base 10000), V shared; ",
               (double)SAMEL_Q_ALPHA, (double)SAMEL_K_ALPHA, SAMEL_ROT_DIMS);
    printf("SAME-L: B=1 H=%d D=%d WL=%d WR=%d scale=1/8 lambda=1, math %s", SAME_H, SAME_D,
           (int)o->wl, (int)o->wr, dswa_math_name(o->math));
    if (o->backward) printf(" (the forward's; the backward's arithmetic is fp32)\n");
    else printf("; error on %d sampled rows x all heads vs float64\n", o->rows);
    if (c->cuda) {
        printf("time_ms: a CUDA graph of %d calls on the same buffers, replayed %d times "
               "after %d, per call: median; spread = (max - min) / median\n",
               GRAPH_CALLS, c->repeats, c->warmup);
        printf("copy_ms: the fastest same-size copy (%s read + written), timed "
               "the same way; copying 2 GiB in such graphs: cudaMemcpyAsync %.1f GB/s, best copy "
               "kernel %.1f GB/s (%s)\n",
               o->backward ? (o->op == OP_SAMEL ? "dswa_samel_backward_min_bytes"
                                                : "dswa_backward_min_bytes")
                           : (o->op == OP_SAMEL ? "dswa_samel_min_bytes" : "dswa_min_bytes"),
               c->memcpy_graph_gbs, c->kernel_graph_gbs, c->kernel_graph_cfg);
        printf("%%copy = copy_ms / time_ms; call_ms: one plain call between two events, "
               "host launch included\n");
    } else {
        printf("time_ms: median of %s calls after %d warm-up; spread = (max - min) / median; "
               "GF/s/core: GFLOP/s over %d threads\n",
               o->repeats > 0 ? "the" : "at least 10 (and 2 s of)", c->warmup, c->threads);
    }
    printf("%%floor = floor_ms / time_ms = GB/s / copy bandwidth\n");
    if (o->backward) {
        printf("the backward (--backward): bwd_ms is time_ms of backward calls (random dout, "
               "workspace allocated once); fwd+bwd_ms: a forward then a backward, per pair, "
               "timed the same way; rel_err against %s up to N = %d\n",
               o->op == OP_SAMEL ? "the CPU backend (GPU rows)" : "dswa_reference_backward",
               BWD_CHECK_MAX_N);
        if (c->cuda)
            printf("goal: %%copy >= %.0f %%%s\n", BWD_GOAL_PCT_COPY,
                   o->op == OP_SAMEL ? "; fwd+bwd against the training comparators: "
                                       "bench/readme_table.py --compare" : "");
        print_backward_table(c, rows, nrow);
    } else if (o->op == OP_SAMEL) {
        if (c->cuda)
            printf("goals: (a) %%copy >= %.0f %%; (b) x faster than the compiled prologue + "
                   "op >= %.1f (f32), >= %.1f (bf16): bench/readme_table.py --compare\n",
                   SAMEL_GOAL_PCT_COPY, bench_samel_goal_ratio(DSWA_F32),
                   bench_samel_goal_ratio(DSWA_BF16));
        print_samel_table(c, rows, nrow);
    } else {
        print_tables(c, rows, nrow);
    }
}
