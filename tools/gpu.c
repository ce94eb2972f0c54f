/* A thin wrapper over the CUDA runtime for the tool (cli.h), and the bench's graph timing and
   same-size copy (gpu.h): every call is checked, and a failure leaves one message naming the
   call and the CUDA error. Without DSWA_HAVE_CUDA every function fails with a message saying
   so. Plain calls use the default stream; graphs are captured on a stream of ours (the legacy
   default stream cannot be captured). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu.h"

static char gpu_msg[512] = "no CUDA call has failed";

const char *gpu_error(void) { return gpu_msg; }

#ifdef DSWA_HAVE_CUDA
#include <cuda_runtime_api.h>

static int fail(cudaError_t e, const char *what) {
    snprintf(gpu_msg, sizeof gpu_msg, "%s failed: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return -1;
}

int gpu_init(char *name, size_t name_len) {
    int count = 0, dev = 0, driver = 0, runtime = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    /* "Insufficient driver" is also what a machine without any driver gets: tell them apart,
       so nobody upgrades a driver they do not have. */
    if (e == cudaErrorInsufficientDriver && (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0)) {
        snprintf(gpu_msg, sizeof gpu_msg, "no CUDA driver found (libcuda.so.1 is not installed or "
                 "not loadable): no GPU to run on");
        return -1;
    }
    if (e == cudaErrorInsufficientDriver) {
        (void)cudaRuntimeGetVersion(&runtime);
        snprintf(gpu_msg, sizeof gpu_msg, "the CUDA driver (CUDA %d.%d) is older than the runtime "
                 "this dswa was built with (CUDA %d.%d)", driver / 1000, driver % 1000 / 10,
                 runtime / 1000, runtime % 1000 / 10);
        return -1;
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count <= 0)) {
        snprintf(gpu_msg, sizeof gpu_msg, "no CUDA GPU found");
        return -1;
    }
    if (e != cudaSuccess) return fail(e, "cudaGetDeviceCount");
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return fail(e, "cudaGetDevice");
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    if ((e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
        return fail(e, "cudaGetDeviceProperties");
    snprintf(name, name_len, "%s (device %d, sm_%d%d, %d SMs, %.1f GiB)", prop.name, dev,
             prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return 0;
}

int gpu_alloc(void **p, size_t bytes, const char *what) {
    char call[160];
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();   /* out of memory is not sticky: a later check must not see it */
        snprintf(call, sizeof call, "cudaMalloc(%s, %.1f MB)", what, (double)bytes / 1e6);
        return fail(e, call);
    }
    return 0;
}

void gpu_free(void *p) {
    if (p) (void)cudaFree(p);
}

static int copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                const char *what) {
    char call[160];
    cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess) {
        snprintf(call, sizeof call, "cudaMemcpy(%s, %s, %.1f MB)", what,
                 kind == cudaMemcpyHostToDevice ? "host to device" : "device to host",
                 (double)bytes / 1e6);
        return fail(e, call);
    }
    /* From pageable memory the copy may still be in flight on return; work on other streams
       (the graphs) must see it done. */
    if (kind == cudaMemcpyHostToDevice && (e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail(e, "cudaDeviceSynchronize after a host-to-device cudaMemcpy");
    return 0;
}

int gpu_upload(void *dst, const void *src, size_t bytes, const char *what) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, what);
}

int gpu_download(void *dst, const void *src, size_t bytes, const char *what) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, what);
}

int gpu_poison(void *p, size_t bytes) {
    cudaError_t e = cudaMemset(p, 0xff, bytes);
    if (e != cudaSuccess) return fail(e, "cudaMemset(out, 0xff)");
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail(e, "cudaDeviceSynchronize after cudaMemset");
    return 0;
}

int gpu_sync(const char *what) {
    char call[160];
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(call, sizeof call, "cudaDeviceSynchronize (%s)", what);
        return fail(e, call);
    }
    return 0;
}

static cudaEvent_t ev_start, ev_stop;
static int ev_ready;
static cudaStream_t graph_stream;   /* where gpu_graph_time captures */

int gpu_timer_create(void) {
    cudaError_t e;
    if (ev_ready) return 0;
    if ((e = cudaEventCreate(&ev_start)) != cudaSuccess) return fail(e, "cudaEventCreate");
    if ((e = cudaEventCreate(&ev_stop)) != cudaSuccess) {
        (void)cudaEventDestroy(ev_start);
        return fail(e, "cudaEventCreate");
    }
    ev_ready = 1;
    return 0;
}

void gpu_timer_destroy(void) {
    if (graph_stream) (void)cudaStreamDestroy(graph_stream);
    graph_stream = NULL;
    if (!ev_ready) return;
    (void)cudaEventDestroy(ev_start);
    (void)cudaEventDestroy(ev_stop);
    ev_ready = 0;
}

int gpu_timer_start(void) {
    cudaError_t e;
    if (!ev_ready && gpu_timer_create() != 0) return -1;
    if ((e = cudaEventRecord(ev_start, 0)) != cudaSuccess) return fail(e, "cudaEventRecord");
    return 0;
}

double gpu_timer_stop(void) {
    cudaError_t e;
    float ms = 0.0f;
    if ((e = cudaEventRecord(ev_stop, 0)) != cudaSuccess) return fail(e, "cudaEventRecord");
    if ((e = cudaEventSynchronize(ev_stop)) != cudaSuccess)
        return fail(e, "cudaEventSynchronize");
    if ((e = cudaEventElapsedTime(&ms, ev_start, ev_stop)) != cudaSuccess)
        return fail(e, "cudaEventElapsedTime");
    return (double)ms;
}

double gpu_copy_bandwidth(size_t bytes, int repeats) {
    void *src = NULL, *dst = NULL;
    double t[64];
    double result = -1.0;
    cudaError_t e;
    if (repeats > 64) repeats = 64;
    if (repeats < 1) repeats = 1;
    if (gpu_alloc(&src, bytes, "copy source") != 0) return -1.0;
    if (gpu_alloc(&dst, bytes, "copy destination") != 0) goto done;
    if ((e = cudaMemset(src, 0x3c, bytes)) != cudaSuccess) { fail(e, "cudaMemset"); goto done; }
    if ((e = cudaMemset(dst, 0, bytes)) != cudaSuccess) { fail(e, "cudaMemset"); goto done; }
    for (int r = -2; r < repeats; r++) {   /* r < 0: warm-up */
        if (gpu_timer_start() != 0) goto done;
        if ((e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0)) != cudaSuccess) {
            fail(e, "cudaMemcpyAsync(device to device)");
            goto done;
        }
        const double ms = gpu_timer_stop();
        if (ms < 0) goto done;
        if (r >= 0) t[r] = ms;
    }
    result = 2.0 * (double)bytes / (cli_median(t, repeats) * 1e-3) / 1e9;
done:
    gpu_free(src);
    gpu_free(dst);
    return result;
}

/* ---- graphs of many launches ------------------------------------------------------- */

static int graph_stream_ready(void) {
    cudaError_t e;
    if (!ev_ready && gpu_timer_create() != 0) return -1;
    if (!graph_stream &&
        (e = cudaStreamCreateWithFlags(&graph_stream, cudaStreamNonBlocking)) != cudaSuccess)
        return fail(e, "cudaStreamCreateWithFlags");
    return 0;
}

int gpu_graph_time(gpu_enqueue_fn enqueue, void *ctx, int calls, int warm, int replays,
                   gpu_stats *out) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaError_t e;
    double *t = NULL;
    int rc = -1;
    out->median = out->min = out->max = -1.0;
    out->replays = 0;
    if (calls < 1 || replays < 1) {
        snprintf(gpu_msg, sizeof gpu_msg, "gpu_graph_time: %d calls, %d replays", calls, replays);
        return -1;
    }
    if (graph_stream_ready() != 0) return -1;
    if (!(t = malloc(sizeof(double) * (size_t)replays))) {
        snprintf(gpu_msg, sizeof gpu_msg, "gpu_graph_time: out of host memory");
        return -1;
    }
    if ((e = cudaStreamBeginCapture(graph_stream, cudaStreamCaptureModeThreadLocal)) != cudaSuccess) {
        fail(e, "cudaStreamBeginCapture");
        goto done;
    }
    int enq_failed = 0;
    e = cudaEventRecordWithFlags(ev_start, graph_stream, cudaEventRecordExternal);
    for (int i = 0; i < calls && e == cudaSuccess && !enq_failed; i++)
        enq_failed = enqueue(ctx, i, graph_stream) != 0;
    if (e == cudaSuccess && !enq_failed)
        e = cudaEventRecordWithFlags(ev_stop, graph_stream, cudaEventRecordExternal);
    /* The capture always ends, whatever failed inside it, so the stream is usable again. */
    cudaError_t e2 = cudaStreamEndCapture(graph_stream, &g);
    if (enq_failed) {
        rc = -2;
        goto done;
    }
    if (e != cudaSuccess) {
        fail(e, "cudaEventRecordWithFlags (in capture)");
        goto done;
    }
    if (e2 != cudaSuccess) {
        fail(e2, "cudaStreamEndCapture");
        goto done;
    }
    if ((e = cudaGraphInstantiate(&ge, g, 0)) != cudaSuccess) {
        ge = NULL;
        fail(e, "cudaGraphInstantiate");
        goto done;
    }
    for (int r = -warm; r < replays; r++) {
        float ms = 0.0f;
        if ((e = cudaGraphLaunch(ge, graph_stream)) != cudaSuccess) {
            fail(e, "cudaGraphLaunch");
            goto done;
        }
        if ((e = cudaStreamSynchronize(graph_stream)) != cudaSuccess) {
            fail(e, "cudaStreamSynchronize (graph replay)");
            goto done;
        }
        if ((e = cudaEventElapsedTime(&ms, ev_start, ev_stop)) != cudaSuccess) {
            fail(e, "cudaEventElapsedTime (graph)");
            goto done;
        }
        if (r >= 0) t[r] = (double)ms / calls;
    }
    out->median = cli_median(t, replays);   /* sorts t */
    out->min = t[0];
    out->max = t[replays - 1];
    out->replays = replays;
    rc = 0;
done:
    if (ge) (void)cudaGraphExecDestroy(ge);
    if (g) (void)cudaGraphDestroy(g);
    free(t);
    return rc;
}

size_t gpu_l2_bytes(void) {
    int dev = 0, l2 = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess) return 0;
    return l2 > 0 ? (size_t)l2 : 0;
}

int gpu_copy_d2d(void *dst, const void *src, size_t bytes, const char *what) {
    char call[160];
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
    if (e != cudaSuccess) {
        snprintf(call, sizeof call, "cudaMemcpy(%s, device to device, %.1f MB)", what,
                 (double)bytes / 1e6);
        return fail(e, call);
    }
    /* A device-to-device cudaMemcpy may return before it is done, and the graphs run on a
       non-blocking stream that does not wait for the default one. */
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail(e, "cudaDeviceSynchronize after a device-to-device cudaMemcpy");
    return 0;
}

/* ---- the same-size copy -------------------------------------------------------------- */

/* The copy kernels, PTX written here and JIT-compiled by the driver for the device at hand
   (the tool is a C program: nvcc compiles only the library). copy_uU(src, dst, n) moves n
   16-byte vectors: the T threads of the grid walk the buffer in steps of U*T vectors, thread t
   loading vectors t, t + T, ..., t + (U-1) T of a step (coalesced) before storing any, so U
   loads are in flight per thread; a tail loop moves the rest one vector at a time. With a grid
   of n/U threads there is one step (one pass); with a grid of one wave it strides. */
static const int copy_unrolls[] = {1, 2, 4, 8};
#define N_UNROLL ((int)(sizeof copy_unrolls / sizeof copy_unrolls[0]))

static int ptx_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int ptx_append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= cap - *len) return -1;
    *len += (size_t)w;
    return 0;
}

/* Cache hints of the loads and stores: none, or .cs (streaming: evict first; the data is
   touched once). */
static const char *const copy_hints[2] = {"", ".cs"};

static int copy_ptx(char *buf, size_t cap) {
    size_t len = 0;
    int bad = ptx_append(buf, cap, &len, ".version 7.0\n.target sm_52\n.address_size 64\n");
    for (int e = 0; e < 2 * N_UNROLL && !bad; e++) {
        const int u = copy_unrolls[e % N_UNROLL];
        const char *hint = copy_hints[e / N_UNROLL];
        bad |= ptx_append(buf, cap, &len,
            "\n.visible .entry copy%s_u%d(.param .u64 p_src, .param .u64 p_dst, .param .u64 p_n)\n"
            "{\n"
            "  .reg .pred %%p;\n"
            "  .reg .b32 %%r<4>;\n"
            "  .reg .b32 %%v<%d>;\n"
            "  .reg .b64 %%src, %%dst, %%n, %%i, %%T, %%Tb, %%step, %%last, %%a, %%off;\n"
            "  ld.param.u64 %%src, [p_src];\n"
            "  ld.param.u64 %%dst, [p_dst];\n"
            "  ld.param.u64 %%n, [p_n];\n"
            "  cvta.to.global.u64 %%src, %%src;\n"
            "  cvta.to.global.u64 %%dst, %%dst;\n"
            "  mov.u32 %%r0, %%ntid.x;\n"
            "  mov.u32 %%r1, %%nctaid.x;\n"
            "  mov.u32 %%r2, %%ctaid.x;\n"
            "  mov.u32 %%r3, %%tid.x;\n"
            "  mul.wide.u32 %%T, %%r0, %%r1;\n"
            "  shl.b64 %%Tb, %%T, 4;\n"
            "  mul.wide.u32 %%i, %%r2, %%r0;\n"
            "  cvt.u64.u32 %%a, %%r3;\n"
            "  add.u64 %%i, %%i, %%a;\n"
            "  mul.lo.u64 %%step, %%T, %d;\n"
            "  mul.lo.u64 %%a, %%T, %d;\n"
            "  setp.le.u64 %%p, %%n, %%a;\n"
            "  @%%p bra TAIL;\n"
            "  sub.u64 %%last, %%n, %%a;\n"   /* i < last <=> i + (U-1) T < n */
            "STEP:\n"
            "  setp.ge.u64 %%p, %%i, %%last;\n"
            "  @%%p bra TAIL;\n"
            "  shl.b64 %%off, %%i, 4;\n"
            "  add.u64 %%a, %%src, %%off;\n",
            e / N_UNROLL ? "_cs" : "", u, 4 * u, u, u - 1);
        for (int j = 0; j < u && !bad; j++)
            bad |= ptx_append(buf, cap, &len,
                "  ld.global%s.v4.b32 {%%v%d, %%v%d, %%v%d, %%v%d}, [%%a];\n%s", hint,
                4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3,
                j + 1 < u ? "  add.u64 %a, %a, %Tb;\n" : "");
        bad |= ptx_append(buf, cap, &len, "  add.u64 %%a, %%dst, %%off;\n");
        for (int j = 0; j < u && !bad; j++)
            bad |= ptx_append(buf, cap, &len,
                "  st.global%s.v4.b32 [%%a], {%%v%d, %%v%d, %%v%d, %%v%d};\n%s", hint,
                4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3,
                j + 1 < u ? "  add.u64 %a, %a, %Tb;\n" : "");
        bad |= ptx_append(buf, cap, &len,
            "  add.u64 %%i, %%i, %%step;\n"
            "  bra.uni STEP;\n"
            "TAIL:\n"
            "  setp.ge.u64 %%p, %%i, %%n;\n"
            "  @%%p bra DONE;\n"
            "  shl.b64 %%off, %%i, 4;\n"
            "  add.u64 %%a, %%src, %%off;\n"
            "  ld.global%s.v4.b32 {%%v0, %%v1, %%v2, %%v3}, [%%a];\n"
            "  add.u64 %%a, %%dst, %%off;\n"
            "  st.global%s.v4.b32 [%%a], {%%v0, %%v1, %%v2, %%v3};\n"
            "  add.u64 %%i, %%i, %%T;\n"
            "  bra.uni TAIL;\n"
            "DONE:\n"
            "  ret;\n"
            "}\n", hint, hint);
    }
    return bad ? -1 : 0;
}

static cudaLibrary_t copy_lib;
static cudaKernel_t copy_kernel[2 * N_UNROLL];   /* [streaming * N_UNROLL + unroll index] */
static gpu_copy_cfg copy_cfgs[16];
static int n_copy_cfgs;

static int kernel_index(const gpu_copy_cfg *c) {
    for (int k = 0; k < N_UNROLL; k++)
        if (copy_unrolls[k] == c->unroll) return (c->streaming ? N_UNROLL : 0) + k;
    return 0;
}

static unsigned copy_grid(const gpu_copy_cfg *c, size_t n16) {
    if (c->blocks > 0) return (unsigned)c->blocks;
    const size_t per_block = (size_t)c->threads * (size_t)c->unroll;
    size_t g = (n16 + per_block - 1) / per_block;
    if (g < 1) g = 1;
    if (g > 0x7fffffffu) g = 0x7fffffffu;
    return (unsigned)g;
}

static int copy_enqueue(const gpu_copy_cfg *c, void *dst, const void *src, size_t bytes,
                        cudaStream_t s) {
    cudaError_t e;
    if (c->memcpy_async) {
        if ((e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)) != cudaSuccess)
            return fail(e, "cudaMemcpyAsync(device to device)");
        return 0;
    }
    unsigned long long n16 = bytes / 16;
    void *args[3] = {(void *)&src, (void *)&dst, (void *)&n16};
    const dim3 grid = {copy_grid(c, (size_t)n16), 1, 1}, block = {(unsigned)c->threads, 1, 1};
    if ((e = cudaLaunchKernel((const void *)copy_kernel[kernel_index(c)], grid, block,
                              args, 0, s)) != cudaSuccess)
        return fail(e, "cudaLaunchKernel(copy kernel)");
    return 0;
}

int gpu_copy_candidates(const gpu_copy_cfg **cfgs) {
    *cfgs = copy_cfgs;
    return n_copy_cfgs;
}

void gpu_copy_describe(const gpu_copy_cfg *c, size_t bytes, char *buf, size_t n) {
    if (c->memcpy_async) {
        snprintf(buf, n, "cudaMemcpyAsync");
        return;
    }
    snprintf(buf, n, "kernel: %d x 16 B per thread%s, %u x %d threads (%s)", c->unroll,
             c->streaming ? ", .cs" : "", copy_grid(c, bytes / 16), c->threads,
             c->blocks > 0 ? "one wave, strided" : "one pass");
}

/* Each kernel candidate copies an odd number of vectors, n16, exactly (n16 large enough that
   every grid takes full steps and a tail), and writes nothing past the end. */
static int copy_selftest(size_t n16) {
    const size_t bytes = n16 * 16, guard = 4096;
    unsigned char *h = malloc(bytes + guard), *back = malloc(bytes + guard);
    void *src = NULL, *dst = NULL;
    cudaError_t e;
    int rc = -1;
    if (!h || !back) {
        snprintf(gpu_msg, sizeof gpu_msg, "copy self-test: out of host memory");
        goto done;
    }
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
    if (gpu_alloc(&src, bytes, "copy self-test source") != 0 ||
        gpu_alloc(&dst, bytes + guard, "copy self-test destination") != 0 ||
        gpu_upload(src, h, bytes, "copy self-test source") != 0)
        goto done;
    for (int k = 0; k < n_copy_cfgs; k++) {
        char what[160];
        if ((e = cudaMemset(dst, 0xA5, bytes + guard)) != cudaSuccess) {
            fail(e, "cudaMemset (copy self-test)");
            goto done;
        }
        if (copy_enqueue(&copy_cfgs[k], dst, src, bytes, 0) != 0 || gpu_sync("copy self-test") != 0 ||
            gpu_download(back, dst, bytes + guard, "copy self-test destination") != 0)
            goto done;
        gpu_copy_describe(&copy_cfgs[k], bytes, what, sizeof what);
        if (memcmp(back, h, bytes) != 0) {
            snprintf(gpu_msg, sizeof gpu_msg, "copy self-test: %s copied wrong bytes", what);
            goto done;
        }
        for (size_t i = bytes; i < bytes + guard; i++)
            if (back[i] != 0xA5) {
                snprintf(gpu_msg, sizeof gpu_msg, "copy self-test: %s wrote past the end", what);
                goto done;
            }
    }
    rc = 0;
done:
    gpu_free(src);
    gpu_free(dst);
    free(h);
    free(back);
    return rc;
}

int gpu_copy_init(void) {
    static char ptx[32768];
    cudaError_t e;
    int dev = 0, sms = 0, max_threads = 0;
    if (copy_lib) return 0;
    if (copy_ptx(ptx, sizeof ptx) != 0) {
        snprintf(gpu_msg, sizeof gpu_msg, "copy kernels: PTX buffer too small");
        return -1;
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return fail(e, "cudaGetDevice");
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return fail(e, "cudaDeviceGetAttribute(multiprocessor count)");
    if ((e = cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev)) !=
        cudaSuccess)
        return fail(e, "cudaDeviceGetAttribute(max threads per multiprocessor)");
    if ((e = cudaLibraryLoadData(&copy_lib, ptx, NULL, NULL, 0, NULL, NULL, 0)) != cudaSuccess) {
        copy_lib = NULL;
        return fail(e, "cudaLibraryLoadData(copy kernels)");
    }
    for (int k = 0; k < 2 * N_UNROLL; k++) {
        char name[32];
        snprintf(name, sizeof name, "copy%s_u%d", k / N_UNROLL ? "_cs" : "",
                 copy_unrolls[k % N_UNROLL]);
        if ((e = cudaLibraryGetKernel(&copy_kernel[k], copy_lib, name)) != cudaSuccess) {
            gpu_copy_shutdown();
            return fail(e, "cudaLibraryGetKernel(copy kernel)");
        }
    }
    /* cudaMemcpyAsync; one pass at 1, 2 and 4 vectors per thread (256 threads, the shape of an
       elementwise kernel); one full wave (every thread slot of every SM) striding with 2, 4 and
       8 vectors in flight per thread; and the streaming hint on one of each. */
    const int wave = sms * (max_threads >= 512 ? max_threads / 512 : 1);
    const gpu_copy_cfg cfgs[] = {
        {1, 0, 0, 0, 0},
        {0, 0, 1, 256, 0}, {0, 0, 2, 256, 0}, {0, 0, 4, 256, 0},
        {0, 0, 2, 512, wave}, {0, 0, 4, 512, wave}, {0, 0, 8, 512, wave},
        {0, 1, 4, 256, 0}, {0, 1, 4, 512, wave},
    };
    n_copy_cfgs = (int)(sizeof cfgs / sizeof cfgs[0]);
    memcpy(copy_cfgs, cfgs, sizeof cfgs);
    if (copy_selftest((size_t)3 * 8 * 512 * (size_t)wave + 7) != 0) {
        gpu_copy_shutdown();
        return -1;
    }
    return 0;
}

void gpu_copy_shutdown(void) {
    if (copy_lib) (void)cudaLibraryUnload(copy_lib);
    copy_lib = NULL;
    n_copy_cfgs = 0;
}

typedef struct copy_job {
    const gpu_copy_cfg *cfg;
    void *const *dst;
    void *const *src;
    int nbuf;
    size_t bytes;
} copy_job;

static int copy_job_enqueue(void *ctx, int i, void *stream) {
    const copy_job *j = ctx;
    return copy_enqueue(j->cfg, j->dst[i % j->nbuf], j->src[i % j->nbuf], j->bytes,
                        (cudaStream_t)stream);
}

int gpu_copy_fastest(void *const *dst, void *const *src, int nbuf, size_t bytes, int calls,
                     int warm, int replays, gpu_stats *best, gpu_copy_cfg *cfg_out,
                     gpu_stats *each) {
    int found = 0;
    if (!copy_lib && gpu_copy_init() != 0) return -1;
    if (bytes % 16 != 0 || nbuf < 1) {
        snprintf(gpu_msg, sizeof gpu_msg, "gpu_copy_fastest: %zu bytes, %d buffers", bytes, nbuf);
        return -1;
    }
    for (int k = 0; k < n_copy_cfgs; k++) {
        copy_job job = {&copy_cfgs[k], dst, src, nbuf, bytes};
        gpu_stats st;
        /* An enqueue failure (-2) left its message in gpu_msg like any CUDA failure. */
        if (gpu_graph_time(copy_job_enqueue, &job, calls, warm, replays, &st) != 0) return -1;
        if (each) each[k] = st;
        if (!found || st.median < best->median) {
            *best = st;
            *cfg_out = copy_cfgs[k];
            found = 1;
        }
    }
    return found ? 0 : -1;
}

void gpu_versions(int *runtime, int *driver) {
    *runtime = *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess) *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess) *driver = 0;
}

#else /* !DSWA_HAVE_CUDA */

static int no_cuda(void) {
    snprintf(gpu_msg, sizeof gpu_msg, "this dswa was built without CUDA");
    return -1;
}
int gpu_init(char *name, size_t name_len) {
    if (name_len) name[0] = '\0';
    return no_cuda();
}
int gpu_alloc(void **p, size_t bytes, const char *what) {
    (void)bytes; (void)what;
    *p = NULL;
    return no_cuda();
}
void gpu_free(void *p) { (void)p; }
int gpu_upload(void *dst, const void *src, size_t bytes, const char *what) {
    (void)dst; (void)src; (void)bytes; (void)what;
    return no_cuda();
}
int gpu_download(void *dst, const void *src, size_t bytes, const char *what) {
    (void)dst; (void)src; (void)bytes; (void)what;
    return no_cuda();
}
int gpu_poison(void *p, size_t bytes) { (void)p; (void)bytes; return no_cuda(); }
int gpu_sync(const char *what) { (void)what; return no_cuda(); }
int gpu_timer_create(void) { return no_cuda(); }
void gpu_timer_destroy(void) {}
int gpu_timer_start(void) { return no_cuda(); }
double gpu_timer_stop(void) { return (double)no_cuda(); }
double gpu_copy_bandwidth(size_t bytes, int repeats) {
    (void)bytes; (void)repeats;
    return (double)no_cuda();
}
int gpu_graph_time(gpu_enqueue_fn enqueue, void *ctx, int calls, int warm, int replays,
                   gpu_stats *out) {
    (void)enqueue; (void)ctx; (void)calls; (void)warm; (void)replays;
    out->median = out->min = out->max = -1.0;
    out->replays = 0;
    return no_cuda();
}
size_t gpu_l2_bytes(void) { return 0; }
int gpu_copy_d2d(void *dst, const void *src, size_t bytes, const char *what) {
    (void)dst; (void)src; (void)bytes; (void)what;
    return no_cuda();
}
int gpu_copy_init(void) { return no_cuda(); }
void gpu_copy_shutdown(void) {}
int gpu_copy_candidates(const gpu_copy_cfg **cfgs) {
    *cfgs = NULL;
    return 0;
}
void gpu_copy_describe(const gpu_copy_cfg *cfg, size_t bytes, char *buf, size_t n) {
    (void)cfg; (void)bytes;
    snprintf(buf, n, "none (built without CUDA)");
}
int gpu_copy_fastest(void *const *dst, void *const *src, int nbuf, size_t bytes, int calls,
                     int warm, int replays, gpu_stats *best, gpu_copy_cfg *cfg_out,
                     gpu_stats *each) {
    (void)dst; (void)src; (void)nbuf; (void)bytes; (void)calls; (void)warm; (void)replays;
    (void)best; (void)cfg_out; (void)each;
    return no_cuda();
}
void gpu_versions(int *runtime, int *driver) { *runtime = *driver = 0; }

#endif
