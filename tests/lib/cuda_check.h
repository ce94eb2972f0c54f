/* The CUDA tests' check of a runtime call: on failure it prints the file, the line, the call
   and the runtime's message, and exits 1 (a broken device or build is not a test result). */
#ifndef DSWA_TESTS_CUDA_CHECK_H
#define DSWA_TESTS_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "dswa.h"

#define CU(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* What run(ctx, s) launches on s, captured into an instantiated graph (*graph holds it until
   destroyed); run's status in *status. */
static inline cudaGraphExec_t tu_capture(cudaStream_t s, dswa_status (*run)(void *, cudaStream_t),
                                         void *ctx, cudaGraph_t *graph, dswa_status *status) {
    cudaGraphExec_t exec;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    *status = run(ctx, s);
    CU(cudaStreamEndCapture(s, graph));
    CU(cudaGraphInstantiate(&exec, *graph, 0));
    return exec;
}

/* Prints "device: <name> (sm_XY)" for the current device. */
static inline void tu_print_device(void) {
    struct cudaDeviceProp prop;
    int dev = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
}

#endif
