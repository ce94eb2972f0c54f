/* Memory-pattern probes for docs/PERF.md: the loads and stores of a band-kernel shape with no
 * arithmetic, so that what a shape can reach at all is measured apart from its compute. Not
 * part of the library; run by bench/profiling/gpu-probe.sh. Beside the shapes it times the same bytes as
 * one coalesced stream (and read-only), cudaMemcpy and a copy kernel of the same byte count: what
 * anything can reach at each size, against the floor's 2 GiB copy bandwidth.
 *
 *   make probe && build/probe_bw [L [batched]]     (or: nvcc -O3 -arch=sm_90 bench/profiling/probe_bw.cu)
 *
 * Problem: B = 1, N = 17 L, H = 24 head pairs, D = 64, window 17 each side, V with 2H heads or
 * shared. A "shape" is: queries per tile, ring buffers (loads in flight = bufs - 1), tiles per
 * block (strip; 0 = one wave of persistent blocks), how Q arrives (not at all, register loads
 * one phase ahead as the library does, or as phases of the cp.async ring), and blocks per SM
 * (forced by padding the dynamic shared memory). Each phase copies the 128-byte rows of one
 * tensor, pair and head-dim half into a ring buffer with cp.async (as the band kernel does);
 * each tile ends by writing its output rows. Prints one line per shape: ms and % of the floor
 * (minimum bytes / copy bandwidth measured here).
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define MAXPH 32
struct phase {
    int tensor, pair, half, hoff, store; /* tensor 0 Q, 1 K, 2 V; head = base + hoff; store: O of that head after it */
};
struct shape {
    int es, n, h, tile, span, threads, bufs, strip, qmode, shared_v, rowcap, nph, ntiles, items, hmul;
    phase ph[MAXPH];
};

__device__ __forceinline__ void cp16(void *s, const void *g, bool ok) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(ok ? 16 : 0) : "memory");
}

/* Row strides in bytes. */
__device__ __forceinline__ const char *probe_row(const shape &c, const char *base, int tensor, int pair, int head,
                                                 int half, int j) {
    const int64_t hd = 64 * (int64_t)c.es;
    const int64_t sn = (tensor == 2 && c.shared_v) ? c.h * hd : 2 * c.h * hd;
    const int64_t sp = (tensor == 2 && c.shared_v) ? 0 : c.h * hd;
    return base + j * sn + pair * sp + head * hd + half * 128;
}

__global__ void band_probe(const char *q, const char *k, const char *v, char *o, shape c) {
    extern __shared__ __align__(128) uint4 ring[]; /* bufs x rowcap x 8 chunks */
    const int per = c.strip ? c.strip : (c.items + gridDim.x - 1) / gridDim.x;
    const int first = blockIdx.x * per, last = min(first + per, c.items);
    if (first >= last) return;
    const int total = (last - first) * c.nph, t = threadIdx.x, wl = c.span / 2;
    uint32_t acc = t;
    uint4 qr[8];
    int qpair = -1;

    auto issue = [&](int G) {
        const int item = first + G / c.nph, p = G % c.nph;
        const phase ph = c.ph[p];
        const int head = (item / c.ntiles) * c.hmul + ph.hoff, tile = item % c.ntiles;
        const int rows = ph.tensor == 0 ? c.tile : c.tile + c.span;
        const int row0 = ph.tensor == 0 ? tile * c.tile : tile * c.tile - wl;
        const char *base = ph.tensor == 0 ? q : ph.tensor == 1 ? k : v;
        uint4 *buf = ring + (size_t)(G % c.bufs) * c.rowcap * 8;
        for (int idx = t; idx < rows * 8; idx += c.threads) {
            const int r = idx >> 3, u = idx & 7, j = row0 + r;
            const bool ok = j >= 0 && j < c.n;
            const int jc = min(max(j, 0), c.n - 1);
            cp16(buf + r * 8 + u, probe_row(c, base, ph.tensor, ph.pair, head, ph.half, jc) + u * 16, ok);
        }
    };
    auto fetch_q = [&](int G) { /* Q of the pair of phase G, by register loads (qmode 1) */
        const int item = first + G / c.nph, p = G % c.nph;
        const int head = (item / c.ntiles) * c.hmul + c.ph[p].hoff, tile = item % c.ntiles;
        const int chunks = c.tile * 8 * (c.es / 2), cpr = 8 * (c.es / 2);
#pragma unroll
        for (int x = 0; x < 8; x++) {
            const int idx = t + x * c.threads;
            if (idx < chunks) {
                const int r = idx / cpr, u = idx % cpr, j = tile * c.tile + r;
                if (j < c.n) qr[x] = __ldg((const uint4 *)(probe_row(c, q, 0, c.ph[p].pair, head, 0, j) + u * 16));
            }
        }
        qpair = c.ph[p].pair;
    };
    auto first_k = [&](int p) { /* phase p is its pair's first K phase */
        return c.ph[p].tensor == 1 && c.ph[p].half == 0 && (p == 0 || c.ph[p - 1].tensor != 1);
    };

    for (int G = 0; G < c.bufs - 1; G++) {
        if (G < total) issue(G);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    if (c.qmode == 1 && first_k(0)) fetch_q(0);
    for (int G = 0; G < total; G++) {
        /* group G complete: B - 2 newer groups may still be pending */
        if (c.bufs >= 4) asm volatile("cp.async.wait_group 2;" ::: "memory");
        else if (c.bufs == 3) asm volatile("cp.async.wait_group 1;" ::: "memory");
        else asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads();
        if (G + c.bufs - 1 < total) issue(G + c.bufs - 1);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const int p = G % c.nph;
        const uint4 *buf = ring + (size_t)(G % c.bufs) * c.rowcap * 8;
        acc ^= buf[t % (c.tile * 8)].x;
        if (c.qmode == 1) {
            if (first_k(p) && qpair >= 0) {
#pragma unroll
                for (int x = 0; x < 8; x++)
                    if (t + x * c.threads < c.tile * 8 * (c.es / 2)) acc ^= qr[x].x ^ qr[x].w;
                qpair = -1;
            }
            if (G + 1 < total && first_k((G + 1) % c.nph)) fetch_q(G + 1);
        }
        if (c.ph[p].store) { /* this head's tile done: its output rows */
            const int item = first + G / c.nph, head = (item / c.ntiles) * c.hmul + c.ph[p].hoff, tile = item % c.ntiles;
            const int cpr = 8 * (c.es / 2);
            for (int idx = t; idx < c.tile * cpr; idx += c.threads) {
                const int r = idx / cpr, u = idx % cpr, j = tile * c.tile + r;
                if (j < c.n)
                    *(uint4 *)(o + (int64_t)j * c.h * 64 * c.es + (int64_t)head * 64 * c.es + u * 16) =
                        make_uint4(acc, acc, acc, acc);
            }
        }
    }
}
/* The same bytes as one coalesced stream: thread s reads chunk s of each of the Q, K, V
   streams (2H heads: two chunks of each, n_o apart) and writes chunk s of O. wr = 0: reads only. */
__global__ void stream_probe(const uint4 *q, const uint4 *k, const uint4 *v, uint4 *o, int64_t n_o, int shared_v, int wr) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    uint32_t acc = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_o; i += 2 * stride) {
        uint4 x[2][6];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int64_t ii = min(i + u * stride, n_o - 1);
            x[u][0] = q[ii]; x[u][1] = q[ii + n_o]; x[u][2] = k[ii]; x[u][3] = k[ii + n_o];
            x[u][4] = v[ii]; x[u][5] = shared_v ? make_uint4(1, 2, 3, 4) : v[ii + n_o];
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            uint4 r = make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int w = 0; w < 6; w++) { r.x += x[u][w].x; r.y += x[u][w].y; r.z += x[u][w].z; r.w += x[u][w].w; }
            if (wr) { if (i + u * stride < n_o) o[i + u * stride] = r; }
            else acc += r.x ^ r.y ^ r.z ^ r.w;
        }
    }
    if (!wr && acc == 0x12345678u) o[0] = make_uint4(acc, 0, 0, 0);
}

/* A plain copy kernel of the same structure as stream_probe, to calibrate it against cudaMemcpy. */
__global__ void copy_probe(const uint4 *a, uint4 *b, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 x[4];
#pragma unroll
        for (int u = 0; u < 4; u++) x[u] = a[i + u * stride];
#pragma unroll
        for (int u = 0; u < 4; u++) b[i + u * stride] = x[u];
    }
    for (; i < n; i += stride) b[i] = a[i];
}

__global__ void fill(uint32_t *p, int64_t n, uint32_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
        p[i] = x & 0x3f7f3f7fu; /* finite in f32, f16 and bf16 */
    }
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Median of single launches between two events (what `dswa bench` calls call_ms), or with
   batched = 1 the mean of reps back-to-back launches (no host launch gap inside the span). */
static int g_batched = 1;
template <typename F> static float time_ms(F launch, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) launch();
    CK(cudaGetLastError());
    std::vector<float> t;
    if (g_batched) {
        CK(cudaEventRecord(a));
        for (int i = 0; i < reps; i++) launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        CK(cudaGetLastError());
        CK(cudaEventDestroy(a));
        CK(cudaEventDestroy(b));
        return ms / reps;
    }
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return median(t);
}

int main(int argc, char **argv) {
    const int H = 24, reps = 20;
    int dev_sms;
    CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, 0));
    /* copy bandwidth: 2 GiB device to device, bytes read + written */
    const size_t cb = (size_t)2 << 30;
    void *ca, *cbuf;
    CK(cudaMalloc(&ca, cb));
    CK(cudaMalloc(&cbuf, cb));
    fill<<<1024, 256>>>((uint32_t *)ca, cb / 4, 7);
    const float cms = time_ms([&] { CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice)); }, 10);
    const double copy_gbs = 2.0 * cb / (cms * 1e-3) / 1e9;
    CK(cudaFree(ca));
    CK(cudaFree(cbuf));
    printf("copy %.1f GB/s (2 GiB D2D, median of 10), %d SMs\n", copy_gbs, dev_sms);

    const int L = argc > 1 ? atoi(argv[1]) : 4096; /* argv[2]: 1 batched timing (default), 0 single */
    const int n = 17 * L;
    const size_t maxes = 4, tok = (size_t)2 * H * 64 * maxes;
    char *q, *k, *v, *o;
    CK(cudaMalloc(&q, tok * n));
    CK(cudaMalloc(&k, tok * n));
    CK(cudaMalloc(&v, tok * n));
    CK(cudaMalloc(&o, tok / 2 * n));
    fill<<<1024, 256>>>((uint32_t *)q, tok * n / 4, 1);
    fill<<<1024, 256>>>((uint32_t *)k, tok * n / 4, 2);
    fill<<<1024, 256>>>((uint32_t *)v, tok * n / 4, 3);
    char *m0, *m1; /* memcpy of the op's byte count */
    CK(cudaMalloc(&m0, 2 * tok * n));
    CK(cudaMalloc(&m1, 2 * tok * n));
    fill<<<1024, 256>>>((uint32_t *)m0, 2 * tok * n / 4, 4);
    CK(cudaDeviceSynchronize());
    if (argc > 2) g_batched = atoi(argv[2]);
    printf("timing: %s\n", g_batched ? "mean of back-to-back launches" : "median of single launches");

    /* heads: 1; 2 = two adjacent heads one after the other; -2 = two adjacent heads with their
       phases interleaved (the f32 byte pattern); 12 = heads h and h + 12 one after the other */
    struct run { const char *name; int es, tile, threads, bufs, strip, qmode, shared_v, bpsm, heads; };
    const run runs[] = {
        {"band-like", 2, 64, 128, 3, 1, 1, 0, 4, 1},
        {"band-like Qring", 2, 64, 128, 3, 1, 2, 0, 4, 1},
        {"band-like Qring 5/SM", 2, 64, 128, 3, 1, 2, 0, 5, 1},
        {"2 heads seq", 2, 64, 128, 3, 1, 1, 0, 4, 2},
        {"2 heads seq Qring", 2, 64, 128, 3, 1, 2, 0, 4, 2},
        {"2 heads seq Qring 5/SM", 2, 64, 128, 3, 1, 2, 0, 5, 2},
        {"2 heads seq bufs4 Qring", 2, 64, 128, 4, 1, 2, 0, 4, 2},
        {"2 heads interleaved Qring", 2, 64, 128, 3, 1, 2, 0, 4, -2},
        {"heads h,h+12 seq Qring", 2, 64, 128, 3, 1, 2, 0, 4, 12},
        {"4 heads seq Qring", 2, 64, 128, 3, 1, 2, 0, 4, 4},
        {"shared band-like", 2, 64, 128, 3, 1, 1, 1, 4, 1},
        {"shared Qring", 2, 64, 128, 3, 1, 2, 1, 4, 1},
        {"shared 2 heads seq", 2, 64, 128, 3, 1, 1, 1, 4, 2},
        {"shared 2 heads seq Qring", 2, 64, 128, 3, 1, 2, 1, 4, 2},
        {"shared 2 heads interl Qring", 2, 64, 128, 3, 1, 2, 1, 4, -2},
        {"f32 band-like", 4, 64, 128, 3, 1, 1, 0, 4, 1},
        {"f32 band-like Qring", 4, 64, 128, 3, 1, 2, 0, 4, 1},
        {"f32 2 heads seq", 4, 64, 128, 3, 1, 1, 0, 4, 2},
        {"f32 2 heads seq Qring", 4, 64, 128, 3, 1, 2, 0, 4, 2},
        {"f32 shared band-like", 4, 64, 128, 3, 1, 1, 1, 4, 1},
        {"f32 shared Qring", 4, 64, 128, 3, 1, 2, 1, 4, 1},
        {"f32 shared 2 heads seq", 4, 64, 128, 3, 1, 1, 1, 4, 2},
    };
    for (int es = 2; es <= 4; es += 2)
        for (int sv = 0; sv < 2; sv++) {
            const double bytes = (double)n * H * 64 * es * (2 + 2 + (sv ? 1 : 2) + 1);
            const int64_t n_o = (int64_t)n * H * 64 * es / 16;
            const float ms = time_ms([&] { stream_probe<<<dev_sms * 8, 256>>>((const uint4 *)q, (const uint4 *)k, (const uint4 *)v, (uint4 *)o, n_o, sv, 1); }, reps);
            printf("L=%d %-28s es=%d  %.4f ms  %.1f %% of floor\n", L, sv ? "stream shared" : "stream", es, ms,
                   100.0 * bytes / (copy_gbs * 1e9) / (ms * 1e-3));
            const double rbytes = (double)n * H * 64 * es * (2 + 2 + (sv ? 1 : 2));
            const float rms = time_ms([&] { stream_probe<<<dev_sms * 8, 256>>>((const uint4 *)q, (const uint4 *)k, (const uint4 *)v, (uint4 *)o, n_o, sv, 0); }, reps);
            printf("L=%d %-28s es=%d  %.4f ms  %.1f %% of copy bandwidth\n", L, sv ? "read-only shared" : "read-only", es, rms,
                   100.0 * rbytes / (copy_gbs * 1e9) / (rms * 1e-3));
            /* cudaMemcpy moving the same bytes (half read, half written) */
            const size_t half = (size_t)(bytes / 2) & ~(size_t)255;
            const float mms = time_ms([&] { CK(cudaMemcpyAsync(m1, m0, half, cudaMemcpyDeviceToDevice)); }, reps);
            printf("L=%d %-28s es=%d  %.4f ms  %.1f %% of floor (copy of the same byte count)\n", L, sv ? "memcpy shared" : "memcpy", es,
                   mms, 100.0 * bytes / (copy_gbs * 1e9) / (mms * 1e-3));
            const float kms = time_ms([&] { copy_probe<<<dev_sms * 8, 256>>>((const uint4 *)m0, (uint4 *)m1, (int64_t)(half / 16)); }, reps);
            printf("L=%d %-28s es=%d  %.4f ms  %.1f %% of floor (copy kernel, same byte count)\n", L, sv ? "copy kernel shared" : "copy kernel", es,
                   kms, 100.0 * bytes / (copy_gbs * 1e9) / (kms * 1e-3));
        }
    for (const run &r : runs) {
        shape c;
        memset(&c, 0, sizeof c);
        c.es = r.es; c.n = n; c.h = H; c.tile = r.tile; c.span = 34; c.threads = r.threads;
        c.bufs = r.bufs; c.strip = r.strip; c.qmode = r.qmode; c.shared_v = r.shared_v;
        c.rowcap = r.tile + 34;
        const int halves = r.es == 4 ? 2 : 1;
        int np = 0;
        const int nh = r.heads == 1 ? 1 : 2, inter = r.heads < 0, hoff1 = r.heads == 12 ? 12 : 1;
        c.hmul = r.heads == 12 ? 1 : r.heads < 0 ? 2 : r.heads;
        /* one head's phase list, or two heads' (one after the other, or interleaved piece by piece) */
        auto add = [&](int tensor, int p, int hd) {
            for (int hf = 0; hf < halves; hf++) c.ph[np++] = {tensor, p, hf, hd, 0};
        };
        const int runs_of = r.heads == 4 ? 4 : nh;
        for (int hh = 0; hh < (inter ? 1 : runs_of); hh++) {
            const int hd = r.heads == 4 ? hh : hh * hoff1;
            for (int p = 0; p < 2; p++) {
                if (r.qmode == 2) { add(0, p, hd); if (inter) add(0, p, 1); }
                add(1, p, hd); if (inter) add(1, p, 1);
                if (!r.shared_v) { add(2, p, hd); if (inter) add(2, p, 1); }
            }
            if (r.shared_v) { add(2, 0, hd); if (inter) add(2, 0, 1); }
            c.ph[np - 1].store = 1;
            if (inter) c.ph[np - 2].store = 1, c.ph[np - 2].hoff = 0, c.ph[np - 1].hoff = 1;
        }
        if (np > MAXPH) { printf("%s: too many phases\n", r.name); continue; }
        c.nph = np;
        c.ntiles = (n + r.tile - 1) / r.tile;
        c.items = c.ntiles * (r.heads == 1 ? H : H / (r.heads == 4 ? 4 : 2));
        /* shared memory padded so that exactly bpsm blocks fit an SM (228 KB, 1 KB reserved each) */
        const size_t need = (size_t)r.bufs * c.rowcap * 128;
        size_t smem = std::max(need, (size_t)(228 * 1024 / r.bpsm - 1024));
        if (smem > 227 * 1024) smem = 227 * 1024;
        CK(cudaFuncSetAttribute(band_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int fit = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, band_probe, r.threads, smem));
        const int grid = r.strip ? (c.items + r.strip - 1) / r.strip : fit * dev_sms;
        const double bytes = (double)n * H * 64 * r.es * (2 + 2 + (r.shared_v ? 1 : 2) + 1);
        const float ms = time_ms([&] { band_probe<<<grid, r.threads, smem>>>(q, k, v, o, c); }, reps);
        printf("L=%d %-28s es=%d  %.4f ms  %.1f %% of floor  (%d blocks/SM, grid %d, smem %zu)\n", L, r.name, r.es,
               ms, 100.0 * bytes / (copy_gbs * 1e9) / (ms * 1e-3), fit, grid, smem);
    }
    CK(cudaFree(q));
    CK(cudaFree(k));
    CK(cudaFree(v));
    CK(cudaFree(o));
    CK(cudaFree(m0));
    CK(cudaFree(m1));
    return 0;
}
