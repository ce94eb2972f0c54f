/* `dswa bench` — the main job: SAME-L shapes per dtype and V layout, timed on the CUDA backend
   (or the CPU backend), each row's output checked against the float64 reference on sampled
   rows. On the GPU a row is timed as an engine runs it: a CUDA graph of GRAPH_CALLS
   back-to-back calls on the same buffers, replayed; and beside it the fastest same-size copy
   (the same bytes read + written, cudaMemcpyAsync or our own copy kernel) timed the same
   way, hot and with the inputs rotated over buffers that exceed the L2 (cold).
   `--op samel` times the fused SAME-L block (dswa_samel_*) the same way, beside the same-size
   copy of its bytes; bench/readme_table.py sets its JSON beside the compiled PyTorch prologue +
   op that it replaces (bench/compare.py --op samel). `--backward` times the backward of either
   (tools/bench/backward.c) beside the same-size copy of its bytes. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <string.h>

#include "bench/internal.h"

/* The reason the CUDA backend cannot run, as the library words it. */
static void cuda_unavailable_reason(char *buf, size_t n) {
    float dummy[4][4];
    dswa_problem p = dswa_problem_default(0, 1, 1, 1, 0);   /* batch 0: a no-op */
    dswa_status s = dswa_forward_cuda(&p, dummy[0], dummy[1], dummy[2], dummy[3], NULL);
    if (s == DSWA_OK)
        snprintf(buf, n, "the CUDA backend accepted a no-op but reports no usable device");
    else
        snprintf(buf, n, "%s", dswa_last_error());
}

/* The CPU's vector extensions the backend picks from (dswa_cpu_isa says which it picked). */
static void cpu_features(char *buf, size_t n) {
    buf[0] = '\0';
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    snprintf(buf, n, "%s%s%s", __builtin_cpu_supports("avx512f") ? "avx512f " : "",
             __builtin_cpu_supports("avx2") ? "avx2 " : "",
             __builtin_cpu_supports("fma") ? "fma" : "");
    size_t len = strlen(buf);
    while (len && buf[len - 1] == ' ') buf[--len] = '\0';
    if (!len) snprintf(buf, n, "baseline x86-64");
#else
    snprintf(buf, n, "not x86");
#endif
}

int cmd_bench(int argc, char **argv) {
    static bench_opts o;
    static bench_ctx c;
    static bench_row rows[MAX_ROWS];
    char device[256], date[64], why[512];
    int nrow = 0, rc;
    if ((rc = bench_parse(argc, argv, &o)) != 0) return rc == 1 ? 0 : rc;
    memset(&c, 0, sizeof c);
    c.o = &o;
    c.t0 = cli_now();
    c.threads = cli_threads();
    cli_date_utc(date, sizeof date);

    if (o.backend == CLI_BACKEND_CPU) {
        c.cuda = 0;
    } else if (dswa_cuda_available()) {
        c.cuda = 1;
    } else if (o.backend == CLI_BACKEND_CUDA) {
        cuda_unavailable_reason(why, sizeof why);
        fprintf(stderr, "dswa bench: --backend cuda: %s\n", why);
        return 1;
    } else {
        cuda_unavailable_reason(why, sizeof why);
        bench_progress(&c, "CUDA backend unavailable, running on the CPU: %s", why);
    }
    if (!c.cuda && o.backward && o.shapes_default) {
        /* the CPU backward is written for clarity, not speed: L = 4096 takes minutes a call */
        o.nshapes = 1;
        bench_progress(&c, "the CPU backend's backward rows: L = 256 only (--L adds others)");
    }
    c.repeats = o.repeats > 0 ? o.repeats : (c.cuda ? GPU_REPLAYS : 0);
    c.warmup = o.warmup >= 0 ? o.warmup : (c.cuda ? GPU_WARM : 1);

    if (c.cuda) {
        if (gpu_init(device, sizeof device) != 0 || gpu_timer_create() != 0) {
            fprintf(stderr, "dswa bench: %s\n", gpu_error());
            return 1;
        }
        c.l2_bytes = gpu_l2_bytes();
        bench_progress(&c, "measuring device copy bandwidth (2 GiB device-to-device cudaMemcpy)");
        snprintf(c.copy_method, sizeof c.copy_method,
                 "2 GiB device-to-device cudaMemcpy, median of 10");
        c.copy_gbs = gpu_copy_bandwidth((size_t)2 << 30, 10);
        if (c.copy_gbs <= 0) {   /* a small device: try 256 MiB, still far beyond the L2 */
            bench_progress(&c, "%s; retrying with 256 MiB", gpu_error());
            c.copy_gbs = gpu_copy_bandwidth((size_t)256 << 20, 10);
            snprintf(c.copy_method, sizeof c.copy_method,
                     "256 MiB device-to-device cudaMemcpy, median of 10");
        }
        if (c.copy_gbs <= 0) {
            fprintf(stderr, "dswa bench: copy bandwidth: %s\n", gpu_error());
            gpu_timer_destroy();
            return 1;
        }
        bench_progress(&c, "copy candidates (self-tested), each a graph of %d copies:",
                       GRAPH_CALLS);
        if (bench_copy_reference(&c) != 0) {
            fprintf(stderr, "dswa bench: copy reference: %s\n", gpu_error());
            gpu_copy_shutdown();
            gpu_timer_destroy();
            return 1;
        }
    } else {
        char cpu[200];
        cli_cpu_name(cpu, sizeof cpu);
        cpu_features(c.cpu_features, sizeof c.cpu_features);
        snprintf(device, sizeof device, "%s, %d thread%s", cpu, c.threads,
                 c.threads == 1 ? "" : "s");
        bench_progress(&c, "measuring host copy bandwidth (memcpy of 512 MiB over %d threads)",
                c.threads);
        c.copy_gbs = cli_cpu_copy_bandwidth((size_t)512 << 20, 5);
        snprintf(c.copy_method, sizeof c.copy_method,
                 "512 MiB memcpy over %d OpenMP threads, median of 5", c.threads);
        if (c.copy_gbs <= 0) {
            fprintf(stderr, "dswa bench: copy bandwidth: out of host memory\n");
            return 1;
        }
    }
    bench_progress(&c, "copy bandwidth %.1f GB/s (read + written)", c.copy_gbs);

    for (int s = 0; s < o.nshapes; s++) {
        if (o.op == OP_SAMEL && o.backward)
            bench_run_samel_backward_shape(&c, o.l[s], o.n[s], rows, &nrow);
        else if (o.op == OP_SAMEL) bench_run_samel_shape(&c, o.l[s], o.n[s], rows, &nrow);
        else if (o.backward) bench_run_op_backward_shape(&c, o.l[s], o.n[s], rows, &nrow);
        else bench_run_op_shape(&c, o.l[s], o.n[s], rows, &nrow);
    }
    if (c.cuda) {
        gpu_copy_shutdown();
        gpu_timer_destroy();
    }
    bench_progress(&c, "done");

    if (o.json) bench_print_json(&c, device, date, rows, nrow);
    else bench_print_text(&c, device, date, rows, nrow);
    if (c.fatal) fprintf(stderr, "dswa bench: stopped after a CUDA error: %s\n", c.fatal_msg);
    int bad = c.fatal;
    for (int i = 0; i < nrow; i++)
        if (rows[i].status == ROW_FAIL || rows[i].status == ROW_ERROR) bad = 1;
    return bad ? 1 : 0;
}
