/* The CUDA backend of a build without nvcc: validation still runs (src/core/api.c), then every
   call reports DSWA_ERR_NO_DEVICE. */
#include "core/internal.h"
#include "cuda/backend.h"

int dswa_cuda_probe(void) {
    dswa_fail(DSWA_ERR_NO_DEVICE, "dswa was built without CUDA (nvcc was not found at build time)");
    return 0;
}

dswa_status dswa_cuda_launch(const dswa_problem *p, const void *q, const void *k,
                             const void *v, void *out, void *stream) {
    return dswa_fail(DSWA_ERR_NO_DEVICE, "dswa was built without CUDA (nvcc was not found at build time)");
}

dswa_status dswa_cuda_samel_launch(const dswa_samel_problem *p, const void *qkv, void *out,
                                   void *stream) {
    return dswa_fail(DSWA_ERR_NO_DEVICE, "dswa was built without CUDA (nvcc was not found at build time)");
}

dswa_status dswa_cuda_backward_launch(const dswa_backward_problem *p, const void *q,
                                      const void *k, const void *v, const void *dout, void *dq,
                                      void *dk, void *dv, float *dlambda, void *workspace,
                                      void *stream) {
    return dswa_fail(DSWA_ERR_NO_DEVICE, "dswa was built without CUDA (nvcc was not found at build time)");
}

dswa_status dswa_cuda_samel_backward_launch(const dswa_samel_backward_problem *p,
                                            const void *qkv, const void *dout, void *dqkv,
                                            const dswa_samel_norm_grads *g, void *workspace,
                                            void *stream) {
    return dswa_fail(DSWA_ERR_NO_DEVICE, "dswa was built without CUDA (nvcc was not found at build time)");
}
