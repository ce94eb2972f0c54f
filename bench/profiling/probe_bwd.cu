/* The memory skeleton of the op's 16-bit backward (docs/BACKWARD.md, "Not built yet"): the loads
 * and stores of two backward shapes with no arithmetic, so that what each can reach at all is
 * measured apart from its compute. Not part of the library; run by bench/profiling/gpu-probe.sh.
 *
 *   make probe && build/probe_bwd [L]          (or: nvcc -O3 -arch=sm_90 -Iinclude -Itests/lib bench/profiling/probe_bwd.cu)
 *
 * Problem: SAME-L's (B = 1, N = 17 L, H = 24 head pairs, D = 64, window 17 each side), 16-bit,
 * dense: Q and K (N, 2, H, D), shared V and dout (N, H, D); dQ, dK, dV the same shapes. A
 * backward must move 11 units of N H D elements (6 read, 5 written). Shapes, each a block of 128
 * threads per 64 rows of one head, rows fetched with cp.async of 16 bytes into shared memory
 * (rows outside [0, N) zero-filled), then the tile's output rows written from shared memory:
 *   two-pass   the library's plan: a query kernel (its Q and dout rows, the key band of K and V:
 *              64 + 2 x 17 rows) writing dQ, then a key kernel (its K and V rows, the query band
 *              of Q and dout) writing dK and dV: 17 units from DRAM at best
 *   one-pass   one kernel per 64 key rows: the queries that see them (64 + 2 x 17 rows of Q and
 *              dout) and those queries' whole windows (64 + 4 x 17 rows of K and V), writing dQ,
 *              dK and dV once: 11 units from DRAM, the halos from L2
 * and a copy of the same 11 units (int4, grid-stride). Each is timed as an engine runs it: a CUDA
 * graph of 20 back-to-back launches, the median of 11 replays. Prints ms per call and % of the
 * copy (copy time / shape time).
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"   /* CU(call): the tests' check of a runtime call */


enum { H = 24, D = 64, W = 17, TILE = 64, THREADS = 128, ROW_BYTES = D * 2, CHUNKS = ROW_BYTES / 16 };

struct tensors {
    const uint16_t *q, *k, *v, *go;   /* q, k: (N, 2, H, D); v, go: (N, H, D) */
    uint16_t *dq, *dk, *dv;
    int n;
};

/* Element offset of row i of head h (pair p of 2, or npair == 1). */
__device__ __forceinline__ int64_t row_off(int i, int p, int npair, int h) {
    return (((int64_t)i * npair + p) * H + h) * D;
}

/* Rows row0 .. row0 + rows - 1 of one head of t (npair pairs) into smem, rows packed pair-major
   (pair p's row r at (p rows + r) ROW_BYTES), asynchronously; rows outside [0, n) as zeros. */
__device__ __forceinline__ void fetch(char *smem, const uint16_t *t, int npair, int h, int row0, int rows, int n) {
    for (int x = threadIdx.x; x < npair * rows * CHUNKS; x += THREADS) {
        const int u = x % CHUNKS, r = (x / CHUNKS) % rows, p = x / (CHUNKS * rows), i = row0 + r;
        const bool ok = i >= 0 && i < n;
        const char *src = (const char *)(t + (ok ? row_off(i, p, npair, h) : 0)) + 16 * u;
        const uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem + ((int64_t)(p * rows + r) * CHUNKS + u) * 16);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
    }
}

__device__ __forceinline__ void fetched() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;\n" ::: "memory");
    __syncthreads();
}

/* The tile's rows of out (npair pairs): smem rows of a (the tile's at offset ra, arows per
   pair) xor rows of b (offset rb, brows per pair), a stand-in for the math that reads both. The
   cp.async loads are volatile: none is dropped, used or not. */
__device__ __forceinline__ void store(uint16_t *out, int npair, int h, int row0, int n, const char *a, int arows,
                                      int ra, const char *b, int brows, int rb) {
    for (int x = threadIdx.x; x < npair * TILE * CHUNKS; x += THREADS) {
        const int u = x % CHUNKS, r = (x / CHUNKS) % TILE, p = x / (CHUNKS * TILE), i = row0 + r;
        if (i >= n) continue;
        const int4 va = *(const int4 *)(a + ((int64_t)(p * arows + ra + r) * CHUNKS + u) * 16);
        const int4 vb = *(const int4 *)(b + ((int64_t)(p * brows + rb + r) * CHUNKS + u) * 16);
        *(int4 *)((char *)(out + row_off(i, p, npair, h)) + 16 * u) =
            make_int4(va.x ^ vb.x, va.y ^ vb.y, va.z ^ vb.z, va.w ^ vb.w);
    }
}

#define QB (TILE + 2 * W) /* a tile's band of one side: 98 rows */
#define KB (TILE + 4 * W) /* the one-pass kernel's key rows: 132 */

/* Two-pass: the query kernel (keys = 0: Q (2 pairs) and dout of the tile, K (2 pairs) and V of its
   band, writing dQ) or the key kernel (keys = 1: the roles exchanged, writing dK and dV). */
__global__ void __launch_bounds__(THREADS) two_pass(tensors t, int keys) {
    extern __shared__ __align__(16) char sm[];
    const int h = blockIdx.y, t0 = blockIdx.x * TILE;
    char *a2 = sm, *a1 = a2 + 2 * TILE * ROW_BYTES, *b2 = a1 + TILE * ROW_BYTES, *b1 = b2 + 2 * QB * ROW_BYTES;
    fetch(a2, keys ? t.k : t.q, 2, h, t0, TILE, t.n);
    fetch(a1, keys ? t.v : t.go, 1, h, t0, TILE, t.n);
    fetch(b2, keys ? t.q : t.k, 2, h, t0 - W, QB, t.n);
    fetch(b1, keys ? t.go : t.v, 1, h, t0 - W, QB, t.n);
    fetched();
    store(keys ? t.dk : t.dq, 2, h, t0, t.n, a2, TILE, 0, b2, QB, 2 * W);
    if (keys) store(t.dv, 1, h, t0, t.n, a1, TILE, 0, b1, QB, 2 * W);
}

/* One-pass: Q (2 pairs) and dout of the tile's query band, K (2 pairs) and V of their windows. */
__global__ void __launch_bounds__(THREADS) one_pass(tensors t) {
    extern __shared__ __align__(16) char sm[];
    const int h = blockIdx.y, t0 = blockIdx.x * TILE;
    char *q = sm, *go = q + 2 * QB * ROW_BYTES, *k = go + QB * ROW_BYTES, *v = k + 2 * KB * ROW_BYTES;
    fetch(q, t.q, 2, h, t0 - W, QB, t.n);
    fetch(go, t.go, 1, h, t0 - W, QB, t.n);
    fetch(k, t.k, 2, h, t0 - 2 * W, KB, t.n);
    fetch(v, t.v, 1, h, t0 - 2 * W, KB, t.n);
    fetched();
    store(t.dq, 2, h, t0, t.n, q, QB, W, k, KB, 4 * W);
    store(t.dk, 2, h, t0, t.n, k, KB, 2 * W, q, QB, 2 * W);
    store(t.dv, 1, h, t0, t.n, v, KB, 2 * W, go, QB, 2 * W);
}

__global__ void copy(const int4 *__restrict__ src, int4 *__restrict__ dst, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

/* ms per launch of f: a graph of 20 back-to-back launches, the median of 11 replays. */
template <typename F> static double graph_ms(F f) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 20; i++) f(s);
    CU(cudaStreamEndCapture(s, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphLaunch(ge, s));   /* warm-up */
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < 11; r++) {
        CU(cudaEventRecord(a, s));
        CU(cudaGraphLaunch(ge, s));
        CU(cudaEventRecord(b, s));
        CU(cudaEventSynchronize(b));
        float m;
        CU(cudaEventElapsedTime(&m, a, b));
        ms.push_back(m / 20);
    }
    std::sort(ms.begin(), ms.end());
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    CU(cudaStreamDestroy(s));
    return ms[5];
}

int main(int argc, char **argv) {
    const int L = argc > 1 ? atoi(argv[1]) : 1292, n = 17 * L;
    if (L < 1) { fprintf(stderr, "probe_bwd: L must be >= 1\n"); return 2; }
    const int64_t unit = (int64_t)n * H * D; /* elements of one (N, H, D) tensor */
    uint16_t *buf;
    CU(cudaMalloc(&buf, 11 * unit * sizeof(uint16_t)));
    CU(cudaMemset(buf, 0x3c, 11 * unit * sizeof(uint16_t)));
    tensors t = {buf, buf + 2 * unit, buf + 4 * unit, buf + 5 * unit, buf + 6 * unit, buf + 8 * unit, buf + 10 * unit, n};
    const dim3 grid((n + TILE - 1) / TILE, H);
    const int smem_q = (3 * TILE + 3 * QB) * ROW_BYTES, smem_1 = (3 * QB + 3 * KB) * ROW_BYTES;
    CU(cudaFuncSetAttribute(two_pass, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_q));
    CU(cudaFuncSetAttribute(one_pass, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_1));

    int4 *src, *dst;
    const int64_t half = 11 * unit * (int64_t)sizeof(uint16_t) / 2 / 16; /* int4s each way: 11 units in all */
    CU(cudaMalloc(&src, half * 16));
    CU(cudaMalloc(&dst, half * 16));
    CU(cudaMemset(src, 1, half * 16));
    int sms;
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));

    const double c = graph_ms([&](cudaStream_t s) { copy<<<sms * 8, 256, 0, s>>>(src, dst, half); });
    const double tp = graph_ms([&](cudaStream_t s) {
        two_pass<<<grid, THREADS, smem_q, s>>>(t, 0);
        two_pass<<<grid, THREADS, smem_q, s>>>(t, 1);
    });
    const double op = graph_ms([&](cudaStream_t s) { one_pass<<<grid, THREADS, smem_1, s>>>(t); });
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    const double gb = 11.0 * unit * 2 / 1e9;
    printf("probe_bwd on %s, L = %d (N = %d, H = %d, D = %d, window %d/%d, 16-bit): 11 units = %.3f GB\n",
           prop.name, L, n, H, D, W, W, gb);
    printf("  copy of 11 units   %.4f ms  (%.0f GB/s)\n", c, gb / c * 1e3);
    printf("  two-pass skeleton  %.4f ms  %5.1f %% of copy  (smem %d B per block, two kernels)\n", tp, 100 * c / tp, smem_q);
    printf("  one-pass skeleton  %.4f ms  %5.1f %% of copy  (smem %d B per block)\n", op, 100 * c / op, smem_1);
    CU(cudaFree(buf));
    CU(cudaFree(src));
    CU(cudaFree(dst));
    return 0;
}
