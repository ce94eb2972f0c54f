/* test_aot_launch — proof that TensorRT's AOT launcher would run the exported kernels: it does
   what TensorRT does with the CUDA driver API, and nothing of the library's own launch path.
   For each case it exports the kernel for the GPU's architecture (dswa_aot_kernel_for: the
   kernel the library would pick), loads the PTX text with cuModuleLoadDataEx, looks the entry
   up by the metadata's name (each distinct module once: cases exporting the same PTX launch
   the module already loaded), computes the int32 extras itself from the SAME-L shapes (as an
   aot_impl's SymInt expressions would) and checks them against the metadata, passes the
   arguments in the metadata's order (input pointers, extras, output pointer), takes grid,
   block and shared memory from the metadata, captures the launch into a CUDA graph and replays
   it: with the inputs it was captured with, with fresh inputs copied into the same buffers,
   and again (bitwise identical). Each replay must write every output element, touch nothing
   around it, and match the float64 reference (dswa_reference_rows): relative Frobenius error
   <= 3e-3 (f32, TF32), 5e-3 (f16), 1e-2 (bf16). Cases: every dtype, both kernel families,
   B in {1, 3}, 2H-head V and shared V, N = 1000 (not a multiple of the 64-query tile), plus
   windows clamped to N - 1 and the exports for the older architectures JIT-compiled here.
   The fused SAME-L kernel the same way (dswa_aot_samel_kernel_for; inputs x and the four norm
   weights, its 17 extras), against the tests' float64 reference of the block
   (tests/lib/samel_ref64) with test_cuda_samel's tolerances: every dtype and f32's fp32 math,
   band and scalar kernels, B > 1, position offsets, clamped windows, older architectures.
   The driver is loaded with dlopen (libcuda.so.1), as TensorRT does, so the binary starts on
   machines without one and then exits 77 with "skipped: no GPU ...". */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "compare.h"
#include "samel_ref64.h"
#include "testutil.h"

#ifndef DSWA_HAVE_CUDA
int main(void) { tu_skip("no GPU code: dswa was built without CUDA (no nvcc), so there is no PTX to launch"); }
#else
#include <cuda.h>
#include <dlfcn.h>

/* ---- the driver API, resolved at run time ---------------------------------------------- */
static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*FuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamBeginCapture)(CUstream, CUstreamCaptureMode);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
} drv;

static const char *cu_err(CUresult r) {
    static char buf[256];
    const char *n = NULL, *s = NULL;
    if (drv.GetErrorName) drv.GetErrorName(r, &n);
    if (drv.GetErrorString) drv.GetErrorString(r, &s);
    snprintf(buf, sizeof buf, "%s (%d): %s", n ? n : "?", (int)r, s ? s : "?");
    return buf;
}

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char why[512];
        snprintf(why, sizeof why, "%s", dlerror());
        lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) tu_skip("no GPU: the CUDA driver cannot be loaded (%s)", why);
    }
    /* exported names of the versioned entry points (cuda.h maps the API names onto them) */
#define LOAD(field, name)                                                                          \
    do {                                                                                           \
        void *s_ = dlsym(lib, name);                                                               \
        if (!s_) {                                                                                 \
            fprintf(stderr, "the CUDA driver lacks %s (too old for this test: it needs CUDA 11.4+ "  \
                            "for graph instantiation with flags)\n", name);                        \
            exit(1);                                                                               \
        }                                                                                          \
        memcpy(&drv.field, &s_, sizeof s_);                                                        \
    } while (0)
    LOAD(Init, "cuInit");
    LOAD(DriverGetVersion, "cuDriverGetVersion");
    LOAD(GetErrorName, "cuGetErrorName");
    LOAD(GetErrorString, "cuGetErrorString");
    LOAD(DeviceGetCount, "cuDeviceGetCount");
    LOAD(DeviceGet, "cuDeviceGet");
    LOAD(DeviceGetName, "cuDeviceGetName");
    LOAD(DeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    LOAD(CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(ModuleLoadDataEx, "cuModuleLoadDataEx");
    LOAD(ModuleGetFunction, "cuModuleGetFunction");
    LOAD(ModuleUnload, "cuModuleUnload");
    LOAD(FuncGetAttribute, "cuFuncGetAttribute");
    LOAD(MemAlloc, "cuMemAlloc_v2");
    LOAD(MemFree, "cuMemFree_v2");
    LOAD(MemcpyHtoD, "cuMemcpyHtoD_v2");
    LOAD(MemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(StreamCreate, "cuStreamCreate");
    LOAD(StreamDestroy, "cuStreamDestroy_v2");
    LOAD(StreamSynchronize, "cuStreamSynchronize");
    LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(StreamEndCapture, "cuStreamEndCapture");
    LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(GraphLaunch, "cuGraphLaunch");
    LOAD(GraphExecDestroy, "cuGraphExecDestroy");
    LOAD(GraphDestroy, "cuGraphDestroy");
    LOAD(LaunchKernel, "cuLaunchKernel");
#undef LOAD
}

/* A failed driver call: counted as a failed check, printed with its call and error, and the
   case is abandoned (cleanup runs). */
#define DRV(call)                                                                               \
    do {                                                                                        \
        CUresult r_ = (call);                                                                   \
        if (r_ != CUDA_SUCCESS) {                                                               \
            CHECK(0, "%s: driver call %s failed: %s", name, #call, cu_err(r_));                  \
            goto done;                                                                          \
        }                                                                                       \
    } while (0)

static int dev_sm;              /* the GPU: 10 * major + minor */
static const char *dev_arch;    /* the export for it: the highest exported target <= dev_sm */
static CUdevice dev;
static int cases_run;

/* Modules loaded so far, by their PTX text: the cases that export the same module (other B,
   H, V layout or window of the same family) launch it again instead of JIT-compiling it
   again (each JIT costs ptxas's time); every distinct module is loaded and checked once. */
static struct { char *ptx; CUmodule mod; float jit_ms; } loaded[64];
static int n_loaded, jit_count;

/* A failed driver call inside a helper: a failed check naming the call, and -1. */
#define DRV_RET(call)                                                                           \
    do {                                                                                        \
        CUresult r_ = (call);                                                                   \
        if (r_ != CUDA_SUCCESS) {                                                               \
            CHECK(0, "%s: driver call %s failed: %s", name, #call, cu_err(r_));                  \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

/* What TensorRT does with the AOT plugin's PTX: cuModuleLoadDataEx on the text (each distinct
   module once; the table owns it), the entry looked up by the metadata's name, whose static
   shared memory and block size must be the metadata's. *attr: shared bytes, registers, local
   bytes. 0, or -1 after a failed check. */
static int load_kernel(const char *name, const dswa_aot_info *info, CUfunction *fn, int attr[3], float *jit_ms,
                       int *reused) {
    CUmodule mod = NULL;
    *reused = 0;
    for (int i = 0; i < n_loaded && !mod; i++)
        if (!strcmp(loaded[i].ptx, info->ptx)) {
            mod = loaded[i].mod;
            *jit_ms = loaded[i].jit_ms;
            *reused = 1;
        }
    if (!mod) {
        char elog[8192] = "", ilog[8192] = "";
        CUjit_option jo[5] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                              CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME};
        void *jv[5] = {elog, (void *)(uintptr_t)sizeof elog, ilog, (void *)(uintptr_t)sizeof ilog, NULL};
        CHECK(n_loaded < (int)(sizeof loaded / sizeof loaded[0]), "%s: more distinct modules than the table holds", name);
        if (n_loaded >= (int)(sizeof loaded / sizeof loaded[0])) return -1;
        const CUresult lr = drv.ModuleLoadDataEx(&mod, info->ptx, 5, jo, jv);
        memcpy(jit_ms, &jv[4], sizeof *jit_ms); /* the driver writes the float into the option's slot */
        if (lr != CUDA_SUCCESS) {
            CHECK(0, "%s: cuModuleLoadDataEx on the exported PTX (%s, .target %s, .version %d.%d) failed: %s; JIT "
                  "log: %s", name, info->kernel_name, info->target, info->ptx_isa_major, info->ptx_isa_minor,
                  cu_err(lr), elog);
            return -1;
        }
        jit_count++;
        if (!(loaded[n_loaded].ptx = strdup(info->ptx))) abort();
        loaded[n_loaded].mod = mod;
        loaded[n_loaded++].jit_ms = *jit_ms;
    }
    int fmaxt = -1;
    DRV_RET(drv.ModuleGetFunction(fn, mod, info->kernel_name));
    DRV_RET(drv.FuncGetAttribute(&attr[0], CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, *fn));
    DRV_RET(drv.FuncGetAttribute(&attr[1], CU_FUNC_ATTRIBUTE_NUM_REGS, *fn));
    DRV_RET(drv.FuncGetAttribute(&attr[2], CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, *fn));
    DRV_RET(drv.FuncGetAttribute(&fmaxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, *fn));
    CHECK(attr[0] == (int)info->shared_bytes, "%s: the loaded kernel has %d bytes of static shared memory, the "
          "metadata says %u", name, attr[0], info->shared_bytes);
    CHECK(fmaxt >= (int)(info->block[0] * info->block[1] * info->block[2]), "%s: the kernel takes at most %d threads "
          "per block, the metadata's block is %u", name, fmaxt, info->block[0]);
    return 0;
}

/* One launch of fn with args, grid, block and shared memory from the metadata, captured into a
   graph on a new stream, as TensorRT's enqueue is inside a user's capture. 0, or -1 after a
   failed check (what was created is in *stream, *graph, *exec for the caller to destroy). */
static int capture(const char *name, const dswa_aot_info *info, CUfunction fn, void **args, CUstream *stream,
                   CUgraph *graph, CUgraphExec *exec) {
    DRV_RET(drv.StreamCreate(stream, 0));
    DRV_RET(drv.StreamBeginCapture(*stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const CUresult kr = drv.LaunchKernel(fn, info->grid_dims[0], info->grid_dims[1], info->grid_dims[2], info->block[0],
                                         info->block[1], info->block[2], info->dynamic_shared_bytes, *stream, args, NULL);
    const CUresult er = drv.StreamEndCapture(*stream, graph);
    if (kr != CUDA_SUCCESS || er != CUDA_SUCCESS) {
        CHECK(0, "%s: cuLaunchKernel under capture: %s; cuStreamEndCapture: %s", name,
              kr != CUDA_SUCCESS ? cu_err(kr) : "ok", er != CUDA_SUCCESS ? cu_err(er) : "ok");
        return -1;
    }
    DRV_RET(drv.GraphInstantiate(exec, *graph, 0));
    return 0;
}

static double tol_for(dswa_dtype t) { return t == DSWA_F32 ? 3e-3 : t == DSWA_F16 ? 5e-3 : 1e-2; }

/* The extras in the metadata's order, each computed here (value(name, ctx): as an aot_impl's
   SymInt expressions would) and checked against the metadata's value; the grid too. 0, or -1
   when any differs (then nothing is launched). */
static int take_extras(const char *name, const dswa_aot_info *info, int64_t (*value)(const char *, const void *),
                       const void *ctx, int B, int N, int H, int32_t extras[DSWA_AOT_MAX_PARAMS]) {
    int ok = 1;
    for (int i = 0; i < info->n_params; i++) {
        if (info->params[i].kind != DSWA_AOT_EXTRA) continue;
        const int64_t x = value(info->params[i].name, ctx);
        CHECK(x == info->params[i].value, "%s: extra %d (%s): the metadata says %d, SAME-L shapes give %lld", name, i,
              info->params[i].name, (int)info->params[i].value, (long long)x);
        ok &= x == info->params[i].value;
        extras[i] = (int32_t)x;
    }
    const unsigned gx = (unsigned)((N + 63) / 64); /* one block per 64 queries */
    CHECK(info->grid_dims[0] == gx && info->grid_dims[1] == (unsigned)H && info->grid_dims[2] == (unsigned)B,
          "%s: grid (%u, %u, %u), expected (%u, %d, %d)", name, info->grid_dims[0], info->grid_dims[1],
          info->grid_dims[2], gx, H, B);
    return ok ? 0 : -1;
}

/* One replay of the graph into a poisoned output (p: its view), read back into o->base: every
   output element must be written and nothing around it touched. 0, or -1 after a failed call. */
static int replay_once(const char *name, int r, CUgraphExec exec, CUstream stream, const dswa_problem *p,
                       tu_outbuf *o, CUdeviceptr dbase) {
    const size_t obytes = (size_t)o->total * tu_dtype_size(p->dtype);
    tu_poison(o->base, o->total, p->dtype);
    DRV_RET(drv.MemcpyHtoD(dbase, o->base, obytes));
    DRV_RET(drv.GraphLaunch(exec, stream));
    DRV_RET(drv.StreamSynchronize(stream));
    DRV_RET(drv.MemcpyDtoH(o->base, dbase, obytes));
    int64_t unwritten = 0, clobbered = 0;
    tu_outbuf_check(p, o, &unwritten, &clobbered);
    CHECK(unwritten == 0, "%s: replay %d: %lld output elements not written", name, r, (long long)unwritten);
    CHECK(clobbered == 0, "%s: replay %d: %lld elements around the output modified", name, r, (long long)clobbered);
    return 0;
}

/* The extras as an aot_impl computes them for contiguous SAME-L tensors: Q, K, V (B, N, 2H, D)
   or V (B, N, H, D) shared, out (B, N, H, D); windows clamped to N - 1; floats as their bits. */
typedef struct op_shape { const dswa_problem *p; int shared_v; } op_shape;
static int64_t extra_value(const char *nm, const void *ctx) {
    const dswa_problem *p = ((const op_shape *)ctx)->p;
    const int shared_v = ((const op_shape *)ctx)->shared_v;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim, hd = H * D, vh = shared_v ? hd : 2 * hd;
    int32_t bits;
    if (!strcmp(nm, "n")) return N;
    if (!strcmp(nm, "wl")) return p->window_left < N ? p->window_left : N - 1;
    if (!strcmp(nm, "wr")) return p->window_right < N ? p->window_right : N - 1;
    if (!strcmp(nm, "scale_bits")) { memcpy(&bits, &p->scale, 4); return bits; }
    if (!strcmp(nm, "lambda_bits")) { memcpy(&bits, &p->lambda, 4); return bits; }
    if (!strcmp(nm, "q_sb") || !strcmp(nm, "k_sb")) return N * 2 * hd;
    if (!strcmp(nm, "q_sn") || !strcmp(nm, "k_sn")) return 2 * hd;
    if (!strcmp(nm, "q_sp") || !strcmp(nm, "k_sp")) return hd;
    if (!strcmp(nm, "q_sh") || !strcmp(nm, "k_sh") || !strcmp(nm, "v_sh") || !strcmp(nm, "o_sh")) return D;
    if (!strcmp(nm, "v_sb")) return N * vh;
    if (!strcmp(nm, "v_sn")) return vh;
    if (!strcmp(nm, "v_sp")) return shared_v ? 0 : hd;
    if (!strcmp(nm, "o_sb")) return N * hd;
    if (!strcmp(nm, "o_sn")) return hd;
    return INT64_MIN;
}

/* One case, end to end through the driver API and a CUDA graph. */
static void run_case(const char *arch, dswa_dtype dt, int B, int N, int H, int wl, int wr, int shared_v,
                     float scale, float lambda, int replays) {
    char name[200];
    snprintf(name, sizeof name, "%s %s B=%d N=%d H=%d W=%d/%d V=%s", arch, dswa_dtype_name(dt), B, N, H, wl, wr,
             shared_v ? "shared" : "2H");
    dswa_problem p = dswa_problem_default(B, N, H, 64, wl);
    p.window_right = wr;
    p.dtype = dt;
    p.scale = scale;
    p.lambda = lambda;
    if (shared_v) p.v = tu_layout_order(&p, "bnhd", 0); /* (B, N, H, D), pair stride 0 */
    const size_t es = tu_dtype_size(dt);
    dswa_aot_info info;
    memset(&info, 0, sizeof info);
    CUstream stream = NULL;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr dq = 0, dk = 0, dv = 0, dbase = 0;
    void *hq = NULL, *hk = NULL, *hv = NULL, *prev = NULL;
    double *ref = NULL;
    tu_outbuf ho;
    memset(&ho, 0, sizeof ho);
    int64_t nq = 0, nk = 0, nv = 0;

    const dswa_status st = dswa_aot_kernel_for(arch, &p, &info);
    CHECK(st == DSWA_OK, "%s: dswa_aot_kernel_for: %s: %s", name, dswa_status_string(st), dswa_last_error());
    if (st != DSWA_OK) return;
    cases_run++;

    /* the extras, computed here, must be the metadata's; launch with ours */
    int32_t extras[DSWA_AOT_MAX_PARAMS];
    const op_shape shape = {&p, shared_v};
    if (take_extras(name, &info, extra_value, &shape, B, N, H, extras)) goto done;

    /* what TensorRT does with the AOT plugin's PTX */
    CUfunction fn;
    int attr[3], reused = 0;
    float wall_ms = 0.f;
    if (load_kernel(name, &info, &fn, attr, &wall_ms, &reused)) goto done;

    /* buffers */
    tu_rng rng;
    tu_rng_init(&rng, 4242u + (uint64_t)cases_run);
    hq = tu_new_input(&p, &p.q, &rng, &nq);
    hk = tu_new_input(&p, &p.k, &rng, &nk);
    hv = tu_new_input(&p, &p.v, &rng, &nv);
    ho = tu_outbuf_new(&p);
    const size_t obytes = (size_t)ho.total * es;
    DRV(drv.MemAlloc(&dq, (size_t)nq * es));
    DRV(drv.MemAlloc(&dk, (size_t)nk * es));
    DRV(drv.MemAlloc(&dv, (size_t)nv * es));
    DRV(drv.MemAlloc(&dbase, obytes));
    DRV(drv.MemcpyHtoD(dq, hq, (size_t)nq * es));
    DRV(drv.MemcpyHtoD(dk, hk, (size_t)nk * es));
    DRV(drv.MemcpyHtoD(dv, hv, (size_t)nv * es));
    CUdeviceptr dout = dbase + (CUdeviceptr)(TU_GUARD * es);

    /* arguments in the metadata's order: input pointers, extras, output pointer */
    void *args[DSWA_AOT_MAX_PARAMS];
    for (int i = 0; i < info.n_params; i++) {
        const dswa_aot_param *a = &info.params[i];
        if (a->kind == DSWA_AOT_EXTRA) args[i] = &extras[i];
        else if (a->kind == DSWA_AOT_OUTPUT) args[i] = &dout;
        else if (!strcmp(a->name, "q")) args[i] = &dq;
        else if (!strcmp(a->name, "k")) args[i] = &dk;
        else if (!strcmp(a->name, "v")) args[i] = &dv;
        else {
            CHECK(0, "%s: unknown input parameter '%s' in the metadata", name, a->name);
            goto done;
        }
    }

    if (capture(name, &info, fn, args, &stream, &graph, &exec)) goto done;

    const size_t dense = (size_t)B * (size_t)N * (size_t)H * 64;
    ref = malloc(sizeof(double) * dense);
    prev = malloc(obytes);
    if (!ref || !prev) abort();
    double worst = 0;
    for (int r = 0; r < replays; r++) {
        if (r == 1) { /* fresh inputs into the same buffers: the graph must read them */
            tu_fill_normal(hq, nq, dt, &rng, 1.0);
            tu_fill_normal(hk, nk, dt, &rng, 1.0);
            tu_fill_normal(hv, nv, dt, &rng, 1.0);
            DRV(drv.MemcpyHtoD(dq, hq, (size_t)nq * es));
            DRV(drv.MemcpyHtoD(dk, hk, (size_t)nk * es));
            DRV(drv.MemcpyHtoD(dv, hv, (size_t)nv * es));
        }
        if (replay_once(name, r, exec, stream, &p, &ho, dbase)) goto done;
        if (r <= 1) tu_reference(&p, hq, hk, hv, ref);
        const double e = tu_rel_error(&p, ho.out, ref);
        CHECK(e <= tol_for(dt), "%s: replay %d: relative error %.3e > %.1e", name, r, e, tol_for(dt));
        if (e > worst) worst = e;
        if (r >= 2) CHECK(!memcmp(prev, ho.base, obytes), "%s: replay %d differs bitwise from replay %d", name, r, r - 1);
        memcpy(prev, ho.base, obytes);
    }
    printf("  %-44s %-22s PTX %d.%d grid (%u,%u,%u) block %u smem %d regs %d lmem %d JIT %.0f ms%s  %d replays, "
           "max rel_err %.2e (tol %.0e)\n", name, info.kernel_name, info.ptx_isa_major, info.ptx_isa_minor,
           info.grid_dims[0], info.grid_dims[1], info.grid_dims[2], info.block[0], attr[0], attr[1], attr[2],
           (double)wall_ms, reused ? " (loaded before)" : "", replays,
           worst, tol_for(dt));
done:
    if (exec) drv.GraphExecDestroy(exec);
    if (graph) drv.GraphDestroy(graph);
    if (stream) drv.StreamDestroy(stream);
    if (dq) drv.MemFree(dq);
    if (dk) drv.MemFree(dk);
    if (dv) drv.MemFree(dv);
    if (dbase) drv.MemFree(dbase);
    tu_free(hq);
    tu_free(hk);
    tu_free(hv);
    if (ho.base) tu_outbuf_free(&ho);
    free(ref);
    free(prev);
    dswa_aot_info_free(&info);
}

/* ---- the fused SAME-L kernel ---------------------------------------------------------------- */

/* The fused block's extras for contiguous tensors, x (B, N, 5H*D) and out (B, N, H*D): windows
   clamped to N - 1, floats as their bits, the attributes as given. */
static int64_t samel_extra_value(const char *nm, const void *ctx) {
    const dswa_samel_problem *p = ctx;
    const int64_t N = p->seq_len, H = p->heads, D = p->head_dim, hd = H * D;
    const float *f = !strcmp(nm, "scale_bits") ? &p->scale : !strcmp(nm, "lambda_bits") ? &p->lambda
                   : !strcmp(nm, "q_alpha_bits") ? &p->q_norm.alpha
                   : !strcmp(nm, "k_alpha_bits") ? &p->k_norm.alpha : NULL;
    int32_t bits;
    if (f) { memcpy(&bits, f, 4); return bits; }
    if (!strcmp(nm, "n")) return N;
    if (!strcmp(nm, "wl")) return p->window_left < N ? p->window_left : N - 1;
    if (!strcmp(nm, "wr")) return p->window_right < N ? p->window_right : N - 1;
    if (!strcmp(nm, "x_sb")) return N * 5 * hd;
    if (!strcmp(nm, "x_sn")) return 5 * hd;
    if (!strcmp(nm, "x_sc") || !strcmp(nm, "o_sn")) return hd;
    if (!strcmp(nm, "x_sh") || !strcmp(nm, "o_sh")) return D;
    if (!strcmp(nm, "o_sb")) return N * hd;
    if (!strcmp(nm, "rot_dims")) return p->rot_dims;
    if (!strncmp(nm, "freq", 4)) { /* RoPE's frequency j as dswa.h defines it; 0 past rot_dims / 2 */
        const int j = atoi(nm + 4);
        const float fj = j >= p->rot_dims / 2 ? 0.0f : p->rope_freq ? p->rope_freq[j]
                       : (float)(1.0 / pow((double)p->rope_base, 2.0 * j / p->rot_dims));
        memcpy(&bits, &fj, 4);
        return bits;
    }
    if (!strcmp(nm, "pos_offset")) return p->pos_offset;
    return INT64_MIN;
}

/* As test_cuda_samel's: the op's error plus DyT's and RoPE's roundings (fp32 math: tanh to fp32
   accuracy, sin and cos within 2^-21). */
static double samel_tol(dswa_dtype t, dswa_math m) {
    if (t == DSWA_F32) return m == DSWA_MATH_FP32 ? 2e-5 : 4e-3;
    return t == DSWA_F16 ? 5e-3 : 1e-2;
}

/* DyT weights as learned ones look: gamma near 1, beta near 0. */
static void fill_norm(float *gamma, float *beta, tu_rng *rng) {
    for (int d = 0; d < 64; d++) {
        gamma[d] = (float)(1.0 + 0.25 * tu_rng_normal(rng));
        beta[d] = (float)(0.1 * tu_rng_normal(rng));
    }
}

/* One fused-block case end to end: dswa_aot_samel_kernel_for, the module loaded and launched
   with the arguments in the metadata's order (x, the four norm weights, the extras computed
   here, out) inside a captured graph, replayed with the inputs it was captured with, with
   fresh inputs and weights in the same buffers, and again (bitwise identical), against the
   tests' float64 reference of the block (tests/lib/samel_ref64). `family`: the kernel family
   the case is for ("band" or "scalar"). */
static void run_samel_case(const char *arch, dswa_dtype dt, dswa_math math, int B, int N, int H, int wl, int wr,
                           int rot, int pos, const char *family, int replays) {
    char name[200];
    snprintf(name, sizeof name, "samel %s %s%s B=%d N=%d H=%d W=%d/%d rot %d pos %d", arch, dswa_dtype_name(dt),
             math == DSWA_MATH_FP32 ? " fp32" : "", B, N, H, wl, wr, rot, pos);
    dswa_samel_problem p = dswa_samel_problem_default(B, N, H);
    p.dtype = dt;
    p.math = math;
    p.window_left = wl;
    p.window_right = wr;
    p.rot_dims = rot;
    p.pos_offset = pos;
    p.lambda = 0.8f;
    p.q_norm.alpha = 0.9f;
    p.k_norm.alpha = 1.2f;
    dswa_problem view = dswa_problem_default(B, N, H, 64, wl); /* the output's view, for the buffer checks */
    view.dtype = dt;
    view.out = p.out;
    const size_t es = tu_dtype_size(dt);
    const int64_t nx = (int64_t)B * N * 5 * H * 64;
    float w[4][64]; /* q_gamma, q_beta, k_gamma, k_beta on the host */
    dswa_aot_info info;
    memset(&info, 0, sizeof info);
    CUstream stream = NULL;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr dx = 0, dw[4] = {0, 0, 0, 0}, dbase = 0;
    void *hx = NULL, *prev = NULL;
    double *ref = NULL;
    tu_outbuf ho;
    memset(&ho, 0, sizeof ho);

    const dswa_status st = dswa_aot_samel_kernel_for(arch, &p, &info);
    CHECK(st == DSWA_OK, "%s: dswa_aot_samel_kernel_for: %s: %s", name, dswa_status_string(st), dswa_last_error());
    if (st != DSWA_OK) return;
    cases_run++;
    CHECK(!strcmp(info.op, "samel") && !strcmp(info.family, family) && info.rot_dims == rot,
          "%s: op %s, family %s (%s), rot_dims %d: the case is for the %s kernel", name, info.op, info.family,
          info.kernel_name, (int)info.rot_dims, family);
    int32_t extras[DSWA_AOT_MAX_PARAMS];
    if (take_extras(name, &info, samel_extra_value, &p, B, N, H, extras)) goto done;
    CUfunction fn;
    int attr[3], reused = 0;
    float wall_ms = 0.f;
    if (load_kernel(name, &info, &fn, attr, &wall_ms, &reused)) goto done;

    /* buffers: x with fresh normals, the weights, the poisoned output with guards */
    tu_rng rng;
    tu_rng_init(&rng, 9191u + (uint64_t)cases_run);
    hx = tu_alloc(nx, dt);
    tu_fill_normal(hx, nx, dt, &rng, 1.0);
    fill_norm(w[0], w[1], &rng);
    fill_norm(w[2], w[3], &rng);
    p.q_norm.gamma = w[0], p.q_norm.beta = w[1], p.k_norm.gamma = w[2], p.k_norm.beta = w[3]; /* for the reference */
    ho = tu_outbuf_new(&view);
    const size_t obytes = (size_t)ho.total * es;
    DRV(drv.MemAlloc(&dx, (size_t)nx * es));
    DRV(drv.MemAlloc(&dbase, obytes));
    DRV(drv.MemcpyHtoD(dx, hx, (size_t)nx * es));
    for (int i = 0; i < 4; i++) {
        DRV(drv.MemAlloc(&dw[i], sizeof w[i]));
        DRV(drv.MemcpyHtoD(dw[i], w[i], sizeof w[i]));
    }
    CUdeviceptr dout = dbase + (CUdeviceptr)(TU_GUARD * es);

    /* arguments in the metadata's order: input pointers by name, extras, output pointer */
    void *args[DSWA_AOT_MAX_PARAMS];
    static const char *const wname[4] = {"q_gamma", "q_beta", "k_gamma", "k_beta"};
    for (int i = 0; i < info.n_params; i++) {
        const dswa_aot_param *a = &info.params[i];
        args[i] = NULL;
        if (a->kind == DSWA_AOT_EXTRA) args[i] = &extras[i];
        else if (a->kind == DSWA_AOT_OUTPUT) args[i] = &dout;
        else if (!strcmp(a->name, "x")) args[i] = &dx;
        for (int k = 0; k < 4 && !args[i]; k++)
            if (!strcmp(a->name, wname[k])) args[i] = &dw[k];
        if (!args[i]) {
            CHECK(0, "%s: unknown input parameter '%s' in the metadata", name, a->name);
            goto done;
        }
    }
    if (capture(name, &info, fn, args, &stream, &graph, &exec)) goto done;

    ref = malloc(sizeof(double) * (size_t)B * (size_t)N * (size_t)H * 64);
    prev = malloc(obytes);
    if (!ref || !prev) abort();
    double worst = 0;
    const double tol = samel_tol(dt, math);
    for (int r = 0; r < replays; r++) {
        if (r == 1) { /* fresh inputs and weights into the same buffers: the graph must read them */
            tu_fill_normal(hx, nx, dt, &rng, 1.0);
            fill_norm(w[0], w[1], &rng);
            fill_norm(w[2], w[3], &rng);
            DRV(drv.MemcpyHtoD(dx, hx, (size_t)nx * es));
            for (int i = 0; i < 4; i++) DRV(drv.MemcpyHtoD(dw[i], w[i], sizeof w[i]));
        }
        if (replay_once(name, r, exec, stream, &view, &ho, dbase)) goto done;
        if (r <= 1) tu_samel_ref64(&p, hx, ref);
        const double e = tu_rel_error(&view, ho.out, ref);
        CHECK(e <= tol, "%s: replay %d: relative error %.3e > %.1e", name, r, e, tol);
        if (e > worst) worst = e;
        if (r >= 2) CHECK(!memcmp(prev, ho.base, obytes), "%s: replay %d differs bitwise from replay %d", name, r, r - 1);
        memcpy(prev, ho.base, obytes);
    }
    printf("  %-54s %-24s PTX %d.%d grid (%u,%u,%u) smem %d regs %d lmem %d JIT %.0f ms%s  %d replays, max rel_err "
           "%.2e (tol %.0e)\n", name, info.kernel_name, info.ptx_isa_major, info.ptx_isa_minor, info.grid_dims[0],
           info.grid_dims[1], info.grid_dims[2], attr[0], attr[1], attr[2], (double)wall_ms,
           reused ? " (loaded before)" : "", replays, worst, tol);
done:
    if (exec) drv.GraphExecDestroy(exec);
    if (graph) drv.GraphDestroy(graph);
    if (stream) drv.StreamDestroy(stream);
    if (dx) drv.MemFree(dx);
    for (int i = 0; i < 4; i++)
        if (dw[i]) drv.MemFree(dw[i]);
    if (dbase) drv.MemFree(dbase);
    tu_free(hx);
    if (ho.base) tu_outbuf_free(&ho);
    free(ref);
    free(prev);
    dswa_aot_info_free(&info);
}

/* Informational: whether this driver could JIT the PTX as nvcc stamped it (newer drivers
   only); the exports are lowered precisely so that they do not depend on this. */
static void probe_unlowered(void) {
    dswa_aot_info info;
    if (dswa_aot_kernel_window(dev_arch, DSWA_BF16, DSWA_MATH_DEFAULT, 17, 17, &info) != DSWA_OK) return;
    char ver[16];
    snprintf(ver, sizeof ver, "%d.%d", info.toolkit_isa_major, info.toolkit_isa_minor);
    if (dswa_aot_set_ptx_isa(&info, ver) == DSWA_OK) {
        CUmodule mod = NULL;
        const CUresult r = drv.ModuleLoadDataEx(&mod, info.ptx, 0, NULL, NULL);
        printf("(info) the same module at nvcc's PTX ISA %s: %s\n", ver,
               r == CUDA_SUCCESS ? "this driver JITs it too" : cu_err(r));
        if (mod) drv.ModuleUnload(mod);
    }
    dswa_aot_info_free(&info);
}

int main(void) {
    static const int exported[] = {80, 86, 89, 90, 100, 120};
    static const char *const exported_names[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"};
    load_driver();
    CUresult r = drv.Init(0);
    if (r != CUDA_SUCCESS) tu_skip("no GPU: cuInit: %s", cu_err(r));
    int count = 0, ver = 0;
    r = drv.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) tu_skip("no GPU: %s", r != CUDA_SUCCESS ? cu_err(r) : "device count is 0");
    const char *name = "setup";
    CUcontext ctx = NULL;
    char devname[256] = "?";
    int major = 0, minor = 0;
    DRV(drv.DeviceGet(&dev, 0));
    DRV(drv.DeviceGetName(devname, (int)sizeof devname, dev));
    DRV(drv.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    DRV(drv.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    DRV(drv.DriverGetVersion(&ver));
    dev_sm = 10 * major + minor;
    if (dev_sm < 80) tu_skip("no usable GPU: %s has compute capability %d.%d; the kernels need 8.0+", devname, major, minor);
    for (int i = 0; i < 6; i++)
        if (exported[i] <= dev_sm) dev_arch = exported_names[i];
    DRV(drv.DevicePrimaryCtxRetain(&ctx, dev));
    DRV(drv.CtxSetCurrent(ctx));
    printf("GPU 0: %s, compute capability %d.%d, driver API %d.%d; loading the %s exports\n", devname, major, minor,
           ver / 1000, (ver % 1000) / 10, dev_arch);

    /* every dtype, both families, B in {1, 3}, both V layouts, N not a multiple of 64 */
    for (int t = 0; t < 3; t++)
        for (int fam = 0; fam < 2; fam++)
            for (int b = 0; b < 2; b++)
                for (int sv = 0; sv < 2; sv++)
                    run_case(dev_arch, (dswa_dtype)t, b ? 3 : 1, 1000, 3, fam ? 40 : 17, fam ? 25 : 17, sv, 0.125f,
                             0.8f, 3);
    /* windows wider than the sequence (clamped to N - 1: wide at 69 + 69, band at 19 + 19), N = 1 */
    run_case(dev_arch, DSWA_F16, 2, 70, 2, 300, 300, 1, 0.125f, 1.0f, 2);
    run_case(dev_arch, DSWA_F16, 2, 20, 2, 30, 30, 0, 0.125f, 1.0f, 2);
    run_case(dev_arch, DSWA_BF16, 3, 1, 2, 17, 17, 0, 0.125f, 1.0f, 2);
    /* the exports for older architectures, JIT-compiled for this GPU (PTX runs forward) */
    for (int i = 0; i < 6; i++)
        if (exported[i] < dev_sm && strcmp(exported_names[i], dev_arch)) {
            run_case(exported_names[i], DSWA_BF16, 3, 1000, 3, 17, 17, 1, 0.125f, 0.8f, 2);
            run_case(exported_names[i], DSWA_F32, 1, 1000, 3, 40, 25, 0, 0.125f, 0.8f, 2);
        }
    /* the fused block: every dtype (and f32's fp32 math), both kernel families (band: SAME-L's
       window; scalar: a span over 48, or rot_dims off the band kernel's chunks), B > 1, N not a
       multiple of 64, position offsets, windows clamped to N - 1 */
    static const dswa_math maths[4] = {DSWA_MATH_DEFAULT, DSWA_MATH_FP32, DSWA_MATH_DEFAULT, DSWA_MATH_DEFAULT};
    static const dswa_dtype sdt[4] = {DSWA_F32, DSWA_F32, DSWA_F16, DSWA_BF16};
    for (int t = 0; t < 4; t++) {
        run_samel_case(dev_arch, sdt[t], maths[t], 2, 1000, 3, 17, 17, 32, 0, "band", 3);
        run_samel_case(dev_arch, sdt[t], maths[t], 3, 333, 2, 40, 25, 32, 4093, "scalar", 2);
    }
    run_samel_case(dev_arch, DSWA_F16, DSWA_MATH_DEFAULT, 1, 500, 2, 17, 17, 8, 7, "scalar", 2);
    run_samel_case(dev_arch, DSWA_BF16, DSWA_MATH_DEFAULT, 2, 20, 3, 30, 30, 32, 100000, "band", 2);
    run_samel_case(dev_arch, DSWA_F16, DSWA_MATH_DEFAULT, 2, 70, 1, 300, 300, 32, 0, "scalar", 2);
    for (int i = 0; i < 6; i++)
        if (exported[i] < dev_sm && strcmp(exported_names[i], dev_arch)) {
            run_samel_case(exported_names[i], DSWA_BF16, DSWA_MATH_DEFAULT, 2, 1000, 3, 17, 17, 32, 0, "band", 2);
            run_samel_case(exported_names[i], DSWA_F32, DSWA_MATH_DEFAULT, 1, 300, 2, 40, 25, 32, 5, "scalar", 2);
        }
    probe_unlowered();
    printf("%d cases through cuModuleLoadDataEx + a captured graph (%d distinct modules JIT-compiled)\n", cases_run,
           jit_count);
    for (int i = 0; i < n_loaded; i++) {
        drv.ModuleUnload(loaded[i].mod);
        free(loaded[i].ptx);
    }
done:
    if (ctx) drv.DevicePrimaryCtxRelease(dev);
    TEST_MAIN_RETURN("test_aot_launch");
}
#endif
