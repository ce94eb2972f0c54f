/* See cuda_dev.h. Without CUDA in the build this file is empty (the tests that use it skip). */
#ifdef DSWA_HAVE_CUDA
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_dev.h"
#include "cuda_check.h"

void *tu_dev_from_host(const void *h, size_t bytes) {
    void *d = NULL;
    CU(cudaMalloc(&d, bytes));
    CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    /* From pageable memory, cudaMemcpy may return before the copy has landed, and work on a
       non-blocking stream is not ordered after the legacy stream's: the graph check's inputs
       (copied on such a stream) read stale tails without this. */
    CU(cudaDeviceSynchronize());
    return d;
}

/* ---- host regions mirrored on the device ------------------------------------------------- */

tu_dev_regions tu_regions_to_device(const tu_region *r, int n) {
    tu_dev_regions d;
    if (n > TU_DEV_REGIONS_MAX) abort();
    d.host = r;
    d.n = n;
    for (int i = 0; i < n; i++) d.dev[i] = tu_dev_from_host(r[i].base, r[i].bytes);
    return d;
}

void *tu_regions_at(const tu_dev_regions *d, const void *h) {
    if (!h) return NULL;
    const char *c = h;
    for (int i = 0; i < d->n; i++) {
        const char *base = d->host[i].base;
        if (c >= base && c < base + d->host[i].bytes) return (char *)d->dev[i] + (c - base);
    }
    fprintf(stderr, "tu_regions_at: pointer %p is in no region\n", h);
    exit(1);
}

void tu_regions_back(tu_dev_regions *d) {
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    for (int i = 0; i < d->n; i++) {
        CU(cudaMemcpy(d->host[i].base, d->dev[i], d->host[i].bytes, cudaMemcpyDeviceToHost));
        CU(cudaFree(d->dev[i]));
    }
    d->n = 0;
}

void *tu_dev_poisoned(size_t bytes) {
    void *p = NULL;
    if (bytes) {
        CU(cudaMalloc(&p, bytes));
        CU(cudaMemset(p, 0xff, bytes));
    }
    return p;
}

/* ---- one call on device-resident buffers ------------------------------------------------- */

size_t tu_dev_out_bytes(const tu_dev_op *op) {
    size_t total = 0;
    for (int t = 0; t < op->n_out; t++) total += op->out[t].bytes;
    return total;
}

char *tu_dev_fetch(const tu_dev_op *op) {
    char *h = malloc(tu_dev_out_bytes(op)), *at = h;
    if (!h) abort();
    for (int t = 0; t < op->n_out; t++) {
        CU(cudaMemcpy(at, op->out[t].p, op->out[t].bytes, cudaMemcpyDeviceToHost));
        at += op->out[t].bytes;
    }
    return h;
}

size_t tu_dev_out_changed(const tu_dev_op *op) {
    CU(cudaDeviceSynchronize());
    char *h = tu_dev_fetch(op);
    size_t changed = 0;
    for (size_t i = 0; i < tu_dev_out_bytes(op); i++) changed += (unsigned char)h[i] != 0xff;
    free(h);
    return changed;
}

int tu_dev_two_runs_equal(const tu_dev_op *op) {
    char *first = NULL;
    int same = 1;
    for (int r = 0; r < 2; r++) {
        CU(cudaMemset(op->ws.p, r ? 0x00 : 0xff, op->ws.bytes));
        CHECK(op->run(op->ctx, NULL) == DSWA_OK, "run %d: %s", r, dswa_last_error());
        CU(cudaDeviceSynchronize());
        char *h = tu_dev_fetch(op);
        if (r == 0) first = h;
        else {
            same = memcmp(first, h, tu_dev_out_bytes(op)) == 0;
            free(h);
        }
    }
    free(first);
    return same;
}

float tu_dev_time_ms(const tu_dev_op *op, int runs) {
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    CU(cudaEventRecord(e0, NULL));
    for (int r = 0; r < runs; r++)
        CHECK(op->run(op->ctx, NULL) == DSWA_OK, "timed run: %s", dswa_last_error());
    CU(cudaEventRecord(e1, NULL));
    CU(cudaEventSynchronize(e1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return ms;
}

void tu_dev_graph_check(const tu_dev_op *op, tu_rng *rng, dswa_dtype dt, int poison_ws) {
    enum { SETS = 3, REPLAYS = 12 };
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *sets[SETS][4];
    char *expect[SETS];
    for (int i = 0; i < SETS; i++) {
        for (int t = 0; t < op->n_in; t++) {
            const tu_dbuf *in = &op->in[t];
            void *h = tu_bwd_new_buf(rng, (int64_t)(in->bytes / tu_dtype_size(dt)), dt);
            sets[i][t] = tu_dev_from_host(h, in->bytes);
            tu_free(h);
            CU(cudaMemcpyAsync(in->p, sets[i][t], in->bytes, cudaMemcpyDeviceToDevice, s));
        }
        CHECK(op->run(op->ctx, s) == DSWA_OK, "eager set %d: %s", i, dswa_last_error());
        CU(cudaStreamSynchronize(s));
        expect[i] = tu_dev_fetch(op);
    }
    cudaGraph_t graph;
    dswa_status st;
    cudaGraphExec_t exec = tu_capture(s, op->run, op->ctx, &graph, &st);
    CHECK(st == DSWA_OK, "call during capture: %s", dswa_last_error());
    int bad = 0;
    for (int r = 0; r < REPLAYS; r++) {
        const int i = (r * 2 + 1) % SETS;
        for (int t = 0; t < op->n_in; t++)
            CU(cudaMemcpyAsync(op->in[t].p, sets[i][t], op->in[t].bytes, cudaMemcpyDeviceToDevice, s));
        for (int t = 0; t < op->n_out; t++) CU(cudaMemsetAsync(op->out[t].p, 0xff, op->out[t].bytes, s));
        if (poison_ws) CU(cudaMemsetAsync(op->ws.p, r & 1 ? 0x00 : 0xff, op->ws.bytes, s));
        CU(cudaGraphLaunch(exec, s));
        CU(cudaStreamSynchronize(s));
        char *h = tu_dev_fetch(op);
        bad += memcmp(h, expect[i], tu_dev_out_bytes(op)) != 0;
        free(h);
    }
    CHECK(bad == 0, "%d of %d graph replays differ from the eager results", bad, REPLAYS);
    printf("  %d replays with fresh inputs, %d differ from the eager results\n", REPLAYS, bad);
    for (int i = 0; i < SETS; i++) {
        for (int t = 0; t < op->n_in; t++) CU(cudaFree(sets[i][t]));
        free(expect[i]);
    }
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    CU(cudaStreamDestroy(s));
}
#endif
