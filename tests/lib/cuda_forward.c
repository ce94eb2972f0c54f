/* See cuda_forward.h. Every CUDA call is checked; a failure of the copies is reported as
   DSWA_ERR_CUDA with the call in the message (the tests print dswa_last_error() only for
   library calls, so it also goes to stderr). */
#include <stdio.h>
#include <string.h>

#include "cuda_forward.h"

void tu_round_tf32(void *buf, int64_t n) {
    uint32_t *u = buf;
    for (int64_t i = 0; i < n; i++) {
        if ((u[i] & 0x7f800000u) == 0x7f800000u) continue; /* inf, NaN */
        u[i] = (u[i] + 0xfffu + ((u[i] >> 13) & 1u)) & ~0x1fffu;
    }
}

#ifndef DSWA_HAVE_CUDA
dswa_status tu_forward_cuda_host(const dswa_problem *p, const void *q, const void *k,
                                 const void *v, void *out) {
    return dswa_forward_cuda(p, q, k, v, out, NULL);
}
#else
#include <cuda_runtime.h>

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "tu_forward_cuda_host: %s: %s\n", what, cudaGetErrorString(e));
    return 0;
}

dswa_status tu_forward_cuda_host(const dswa_problem *p, const void *q, const void *k,
                                 const void *v, void *out) {
    if (!p || p->batch <= 0 || p->seq_len <= 0 || !q || !k || !v || !out)
        return dswa_forward_cuda(p, q, k, v, out, NULL); /* nothing to copy */
    const void *host[4] = {q, k, v, out};
    const dswa_layout *lay[4] = {&p->q, &p->k, &p->v, &p->out};
    void *dev[4] = {NULL, NULL, NULL, NULL};
    size_t bytes[4];
    dswa_status st = DSWA_ERR_CUDA;
    /* a problem the library refuses is refused before anything is allocated or copied */
    if (dswa_validate(p, q, k, v, out) != DSWA_OK) return dswa_forward_cuda(p, q, k, v, out, NULL);
    for (int i = 0; i < 4; i++) {
        const int64_t span = dswa_view_span(p, lay[i], i == 3 ? 1 : 2);
        bytes[i] = (size_t)span * dswa_dtype_size(p->dtype);
        if (!cuda_ok(cudaMalloc(&dev[i], bytes[i]), "cudaMalloc") ||
            !cuda_ok(cudaMemcpy(dev[i], host[i], bytes[i], cudaMemcpyHostToDevice), "cudaMemcpy to device"))
            goto done;
    }
    st = dswa_forward_cuda(p, dev[0], dev[1], dev[2], dev[3], NULL);
    if (st == DSWA_OK) {
        if (!cuda_ok(cudaGetLastError(), "launch") || !cuda_ok(cudaDeviceSynchronize(), "kernel") ||
            !cuda_ok(cudaMemcpy(out, dev[3], bytes[3], cudaMemcpyDeviceToHost), "cudaMemcpy to host"))
            st = DSWA_ERR_CUDA;
    }
done:
    for (int i = 0; i < 4; i++)
        if (dev[i]) (void)cudaFree(dev[i]);
    return st;
}
#endif
