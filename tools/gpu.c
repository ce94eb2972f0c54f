/* A thin wrapper over the CUDA runtime for the tool: every call is checked, and a failure
   leaves one message naming the call and the CUDA error. Without DSWA_HAVE_CUDA every
   function fails with a message saying so. Only the default stream is used. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
    int count = 0, dev = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return fail(e, "cudaGetDeviceCount");
    if (count <= 0) {
        snprintf(gpu_msg, sizeof gpu_msg, "cudaGetDeviceCount: no CUDA device");
        return -1;
    }
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
static cudaStream_t graph_stream;   /* gpu_graph_*: the captured stream and its graph */
static cudaGraphExec_t graph_exec;

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
    gpu_graph_destroy();
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

/* One forward call timed as it runs in production, inside a CUDA graph: the start event, the
   call and the stop event are captured once (on a stream of ours: the legacy default stream
   cannot be captured) and replayed, so the host's API call is not inside the timed span. */
int gpu_graph_begin(void **stream) {
    cudaError_t e;
    *stream = NULL;
    if (!ev_ready && gpu_timer_create() != 0) return -1;
    if (!graph_stream &&
        (e = cudaStreamCreateWithFlags(&graph_stream, cudaStreamNonBlocking)) != cudaSuccess)
        return fail(e, "cudaStreamCreateWithFlags");
    if ((e = cudaStreamBeginCapture(graph_stream, cudaStreamCaptureModeThreadLocal)) != cudaSuccess)
        return fail(e, "cudaStreamBeginCapture");
    if ((e = cudaEventRecordWithFlags(ev_start, graph_stream, cudaEventRecordExternal)) != cudaSuccess) {
        cudaGraph_t g;
        (void)cudaStreamEndCapture(graph_stream, &g);
        return fail(e, "cudaEventRecordWithFlags (in capture)");
    }
    *stream = graph_stream;
    return 0;
}

int gpu_graph_end(int ok) {
    cudaGraph_t g = NULL;
    cudaError_t e = cudaSuccess;
    if (ok) e = cudaEventRecordWithFlags(ev_stop, graph_stream, cudaEventRecordExternal);
    cudaError_t e2 = cudaStreamEndCapture(graph_stream, &g);
    if (e != cudaSuccess) {
        if (g) (void)cudaGraphDestroy(g);
        return fail(e, "cudaEventRecordWithFlags (in capture)");
    }
    if (e2 != cudaSuccess) return fail(e2, "cudaStreamEndCapture");
    if (!ok) {
        if (g) (void)cudaGraphDestroy(g);
        return 0;
    }
    gpu_graph_destroy(); /* one graph at a time: none left from an earlier failed row */
    e = cudaGraphInstantiate(&graph_exec, g, 0);
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        graph_exec = NULL;
        return fail(e, "cudaGraphInstantiate");
    }
    return 0;
}

double gpu_graph_replay(void) {
    cudaError_t e;
    float ms = 0.0f;
    if ((e = cudaGraphLaunch(graph_exec, graph_stream)) != cudaSuccess) return fail(e, "cudaGraphLaunch");
    if ((e = cudaStreamSynchronize(graph_stream)) != cudaSuccess) return fail(e, "cudaStreamSynchronize");
    if ((e = cudaEventElapsedTime(&ms, ev_start, ev_stop)) != cudaSuccess)
        return fail(e, "cudaEventElapsedTime (graph)");
    return (double)ms;
}

void gpu_graph_destroy(void) {
    if (graph_exec) (void)cudaGraphExecDestroy(graph_exec);
    graph_exec = NULL;
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
int gpu_graph_begin(void **stream) { *stream = NULL; return no_cuda(); }
int gpu_graph_end(int ok) { (void)ok; return no_cuda(); }
double gpu_graph_replay(void) { return (double)no_cuda(); }
void gpu_graph_destroy(void) {}
void gpu_timer_destroy(void) {}
int gpu_timer_start(void) { return no_cuda(); }
double gpu_timer_stop(void) { return (double)no_cuda(); }
double gpu_copy_bandwidth(size_t bytes, int repeats) {
    (void)bytes; (void)repeats;
    return (double)no_cuda();
}
void gpu_versions(int *runtime, int *driver) { *runtime = *driver = 0; }

#endif
