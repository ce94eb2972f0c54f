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
   The driver is loaded with dlopen (libcuda.so.1), as TensorRT does, so the binary starts on
   machines without one and then exits 77 with "skipped: no GPU ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "compare.h"
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
static struct { char *ptx; CUmodule mod; float jit_ms; } loaded[32];
static int n_loaded, jit_count;

static double tol_for(dswa_dtype t) { return t == DSWA_F32 ? 3e-3 : t == DSWA_F16 ? 5e-3 : 1e-2; }

/* The extras as an aot_impl computes them for contiguous SAME-L tensors: Q, K, V (B, N, 2H, D)
   or V (B, N, H, D) shared, out (B, N, H, D); windows clamped to N - 1; floats as their bits. */
static int64_t extra_value(const char *nm, const dswa_problem *p, int shared_v) {
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
    CUmodule mod = NULL;
    int cached = 0, reused = 0; /* mod is in `loaded` (and was already there) */
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
    int ok_extras = 1;
    for (int i = 0; i < info.n_params; i++) {
        if (info.params[i].kind != DSWA_AOT_EXTRA) continue;
        const int64_t x = extra_value(info.params[i].name, &p, shared_v);
        CHECK(x == info.params[i].value, "%s: extra %d (%s): the metadata says %d, SAME-L shapes give %lld", name, i,
              info.params[i].name, (int)info.params[i].value, (long long)x);
        ok_extras &= x == info.params[i].value;
        extras[i] = (int32_t)x;
    }
    const unsigned gx = (unsigned)((N + 63) / 64); /* one block per 64 queries */
    CHECK(info.grid_dims[0] == gx && info.grid_dims[1] == (unsigned)H && info.grid_dims[2] == (unsigned)B,
          "%s: grid (%u, %u, %u), expected (%u, %d, %d)", name, info.grid_dims[0], info.grid_dims[1],
          info.grid_dims[2], gx, H, B);
    if (!ok_extras) goto done;

    /* what TensorRT does with the AOT plugin's PTX */
    char elog[8192] = "", ilog[8192] = "";
    float wall_ms = 0.f;
    CUjit_option jo[5] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                          CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME};
    void *jv[5] = {elog, (void *)(uintptr_t)sizeof elog, ilog, (void *)(uintptr_t)sizeof ilog, NULL};
    for (int i = 0; i < n_loaded && !cached; i++)
        if (!strcmp(loaded[i].ptx, info.ptx)) {
            mod = loaded[i].mod;
            wall_ms = loaded[i].jit_ms;
            cached = reused = 1;
        }
    if (!cached) {
        const CUresult lr = drv.ModuleLoadDataEx(&mod, info.ptx, 5, jo, jv);
        memcpy(&wall_ms, &jv[4], sizeof wall_ms); /* the driver writes the float into the option's slot */
        if (lr != CUDA_SUCCESS) {
            CHECK(0, "%s: cuModuleLoadDataEx on the exported PTX (%s, .target %s, .version %d.%d) failed: %s; JIT "
                  "log: %s", name, info.kernel_name, info.target, info.ptx_isa_major, info.ptx_isa_minor, cu_err(lr),
                  elog);
            mod = NULL;
            goto done;
        }
        jit_count++;
        if (n_loaded < (int)(sizeof loaded / sizeof loaded[0]) && (loaded[n_loaded].ptx = strdup(info.ptx))) {
            loaded[n_loaded].mod = mod;
            loaded[n_loaded++].jit_ms = wall_ms;
            cached = 1; /* owned by the table now */
        }
    }
    CUfunction fn;
    DRV(drv.ModuleGetFunction(&fn, mod, info.kernel_name));
    int fshared = -1, fregs = -1, flocal = -1, fmaxt = -1;
    DRV(drv.FuncGetAttribute(&fshared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn));
    DRV(drv.FuncGetAttribute(&fregs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
    DRV(drv.FuncGetAttribute(&flocal, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn));
    DRV(drv.FuncGetAttribute(&fmaxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn));
    CHECK(fshared == (int)info.shared_bytes, "%s: the loaded kernel has %d bytes of static shared memory, the "
          "metadata says %u", name, fshared, info.shared_bytes);
    CHECK(fmaxt >= (int)(info.block[0] * info.block[1] * info.block[2]), "%s: the kernel takes at most %d threads "
          "per block, the metadata's block is %u", name, fmaxt, info.block[0]);

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

    /* captured into a graph, as TensorRT's enqueue is inside a user's capture */
    DRV(drv.StreamCreate(&stream, 0));
    DRV(drv.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const CUresult kr = drv.LaunchKernel(fn, info.grid_dims[0], info.grid_dims[1], info.grid_dims[2], info.block[0],
                                         info.block[1], info.block[2], info.dynamic_shared_bytes, stream, args, NULL);
    CUgraph g = NULL;
    const CUresult er = drv.StreamEndCapture(stream, &g);
    graph = g;
    if (kr != CUDA_SUCCESS || er != CUDA_SUCCESS) {
        CHECK(0, "%s: cuLaunchKernel under capture: %s; cuStreamEndCapture: %s", name,
              kr != CUDA_SUCCESS ? cu_err(kr) : "ok", er != CUDA_SUCCESS ? cu_err(er) : "ok");
        goto done;
    }
    DRV(drv.GraphInstantiate(&exec, graph, 0));

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
        tu_poison(ho.base, ho.total, dt);
        DRV(drv.MemcpyHtoD(dbase, ho.base, obytes));
        DRV(drv.GraphLaunch(exec, stream));
        DRV(drv.StreamSynchronize(stream));
        DRV(drv.MemcpyDtoH(ho.base, dbase, obytes));
        int64_t unwritten = 0, clobbered = 0;
        tu_outbuf_check(&p, &ho, &unwritten, &clobbered);
        CHECK(unwritten == 0, "%s: replay %d: %lld output elements not written", name, r, (long long)unwritten);
        CHECK(clobbered == 0, "%s: replay %d: %lld elements around the output modified", name, r, (long long)clobbered);
        if (r <= 1) tu_reference(&p, hq, hk, hv, ref);
        const double e = tu_rel_error(&p, ho.out, ref);
        CHECK(e <= tol_for(dt), "%s: replay %d: relative error %.3e > %.1e", name, r, e, tol_for(dt));
        if (e > worst) worst = e;
        if (r >= 2) CHECK(!memcmp(prev, ho.base, obytes), "%s: replay %d differs bitwise from replay %d", name, r, r - 1);
        memcpy(prev, ho.base, obytes);
    }
    printf("  %-44s %-22s PTX %d.%d grid (%u,%u,%u) block %u smem %d regs %d lmem %d JIT %.0f ms%s  %d replays, "
           "max rel_err %.2e (tol %.0e)\n", name, info.kernel_name, info.ptx_isa_major, info.ptx_isa_minor,
           info.grid_dims[0], info.grid_dims[1], info.grid_dims[2], info.block[0], fshared, fregs, flocal,
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
    if (mod && !cached) drv.ModuleUnload(mod);
    tu_free(hq);
    tu_free(hk);
    tu_free(hv);
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
