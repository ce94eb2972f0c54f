/* AOT export for TensorRT (dswa.h: dswa_aot_*): serves the PTX that the build embedded (one
 * module per kernel entry and architecture, see ptx_blobs.h and ptx_embed.c) as
 * TensorRT's AOT plugin path loads it, together with everything an aot_impl needs to launch it.
 *
 * What it does to the PTX, and why:
 *  - `.target` is written as the plain sm_XX asked for: TensorRT's loader refuses sm_XXa, and a
 *    module shared by several architectures (nvcc emits identical code for some) is stored once.
 *  - `.version` is lowered from what nvcc stamped (9.0 for CUDA 13) to the lowest that the
 *    target and the instructions in the module allow, since a driver JIT-compiles only the PTX
 *    ISA versions it knows: PTX 9.0 needs a CUDA 13 driver, PTX 7.8 loads on CUDA 11.8 drivers.
 *    The lowest for a target is the PTX ISA version that introduced it (dswa_ptx_isa_for_target,
 *    ptx_isa.c; ptxas 13.0 refuses each target one version lower). For
 *    instructions, a table of the features these kernels use (and a few a tuned kernel might)
 *    with the version that introduced each: checked with ptxas 13.0, which assembles each at
 *    that version and refuses it one below. The test suite assembles every export at the
 *    version claimed, so a feature missing from the table fails there, not at a user's site.
 *  - Nothing else changes: the entry, its body and its parameters are nvcc's, from the same
 *    source and flags as the library's own machine code.
 *
 * Two kernels are exported: the op's (dswa_aot_kernel*: inputs q, k, v, 20 int32 extras, the
 * output) and the fused SAME-L block's (dswa_aot_samel_*: inputs x and the four norm weights, 17
 * extras, the output), each described by its argument table in src/cuda/kernel_args.h and
 * served by the same code. The values the *_for exports report are the ones src/cuda/launch.cu
 * computes for a launch (dswa_cuda_kargs, dswa_cuda_samel_kargs), so they are the ones the
 * library would pass. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/ptx_blobs.h"
#include "aot/ptx_text.h"
#include "core/internal.h"
#include "core/samel.h"
#include "cuda/kernel_args.h"
#include "cuda/kernels.h"
#include "cuda/launch.h"

/* ---- targets ----------------------------------------------------------------------------- */

/* The exported targets; the PTX ISA version each needs is dswa_ptx_isa_for_target's. */
static const int aot_archs[] = {80, 86, 89, 90, 100, 120};
#define AOT_N_ARCHS ((int)(sizeof aot_archs / sizeof aot_archs[0]))

/* "sm_80, sm_86, ..., sm_120": the targets of the table, for messages. */
static const char *arch_list(char buf[128]) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < AOT_N_ARCHS && n < 128; i++)
        n += (size_t)snprintf(buf + n, 128 - n, "%ssm_%d", i ? ", " : "", aot_archs[i]);
    return buf;
}

/* ---- argument checks ------------------------------------------------------------------------- */

static dswa_status parse_arch(const char *arch, int *idx) {
    char list[128];
    if (!arch) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "arch = NULL: must name a target (%s)", arch_list(list));
    const char *s = arch;
    if (!strncmp(s, "sm_", 3)) s += 3;
    int sm = 0, digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 4) sm = 10 * sm + (*s++ - '0'), digits++;
    if (digits > 0 && (*s == 'a' || *s == 'f') && s[1] == '\0')
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "arch = %s: TensorRT's loader takes plain targets only (sm_%d); "
                         "the kernels need no architecture-specific feature", arch, sm);
    if (digits > 0 && *s == '\0')
        for (int i = 0; i < AOT_N_ARCHS; i++)
            if (aot_archs[i] == sm) {
                *idx = i;
                return DSWA_OK;
            }
    return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "arch = %s: not exported; the exported targets are %s"
                     " (a newer GPU JIT-compiles the closest one below it)", arch, arch_list(list));
}

static dswa_status check_dtype_math(dswa_dtype dtype, dswa_math math) {
    if (dswa_dtype_size(dtype) == 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "dtype = %d: must be DSWA_F32 (f32), DSWA_F16 (f16) or DSWA_BF16 (bf16)", (int)dtype);
    if ((unsigned)math > (unsigned)DSWA_MATH_FP32)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "math = %d: must be DSWA_MATH_DEFAULT (default), DSWA_MATH_TF32 (tf32) "
                         "or DSWA_MATH_FP32 (fp32)", (int)math);
    return DSWA_OK;
}

static dswa_status parse_isa(const char *isa, int *major, int *minor) {
    const char *s = isa;
    int a = 0, b = 0, da = 0, db = 0;
    if (s)
        while (*s >= '0' && *s <= '9' && da < 3) a = 10 * a + (*s++ - '0'), da++;
    if (!s || da == 0 || *s++ != '.' || !(*s >= '0' && *s <= '9'))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "ptx_isa = %s: must be a PTX ISA version X.Y, e.g. 7.8", isa ? isa : "NULL");
    while (*s >= '0' && *s <= '9' && db < 2) b = 10 * b + (*s++ - '0'), db++;
    if (*s != '\0' || db != 1)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "ptx_isa = %s: must be a PTX ISA version X.Y, e.g. 7.8", isa);
    *major = a;
    *minor = b;
    return DSWA_OK;
}

/* One allocation, at info->ptx, holds the module text and after it the strings of the info that
   vary (target, ptx_isa_min_reason and the formulas with the export's numbers in them), so the
   info owns no other memory and a copy of the struct reads the same. */
void dswa_aot_info_free(dswa_aot_info *info) {
    if (!info) return;
    free((void *)info->ptx);
    memset(info, 0, sizeof *info);
}

/* ---- instruction features ----------------------------------------------------------------- */

/* An instruction (word = 1: a mnemonic, matched at the start of an instruction) or a qualifier
   or type (word = 0: matched anywhere outside comments), and the PTX ISA version that
   introduced it. Each was checked with ptxas 13.0: assembles at this version, refused one
   below ("Feature '...' requires PTX ISA .version X.Y or later"). */
typedef struct aot_feature { const char *pat; int word, major, minor; } aot_feature;
static const aot_feature aot_features[] = {
    {"ldmatrix", 1, 6, 5},
    {"cp.async", 1, 7, 0},            /* cp.async.cg.shared.global, commit_group, wait_group */
    {"mma.sync.aligned.m16n8k16", 1, 7, 0},
    {".tf32", 0, 7, 0},               /* mma m16n8k8 .tf32, cvt.rna.tf32.f32 */
    {".bf16", 0, 7, 0},               /* mma .bf16, cvt.rn.bf16(x2).f32 */
    {"redux.sync", 1, 7, 0},
    {"mbarrier", 1, 7, 0},
    {"cvt.f32.bf16", 1, 7, 1},        /* nvcc's bf16 -> f32 on sm_90 and newer */
    {"createpolicy", 1, 7, 4},
    {"L2::cache_hint", 0, 7, 4},
    {"L2::64B", 0, 7, 4},
    {"L2::128B", 0, 7, 4},
    {"L2::256B", 0, 7, 4},
    {"L1::evict_", 0, 7, 4},
    {"L2::evict_", 0, 7, 4},
    {"L1::no_allocate", 0, 7, 4},
    {"stmatrix", 1, 7, 8},
    {"movmatrix", 1, 7, 8},
    {"griddepcontrol", 1, 7, 8},
    {"mapa", 1, 7, 8},
    {"ex2.approx.ftz.bf16", 1, 7, 8},
    {"elect.sync", 1, 8, 0},
    {"cp.async.bulk", 1, 8, 0},
    {"fence.proxy.async", 1, 8, 0},
    {".b128", 0, 8, 3},
};
#define AOT_N_FEATURES ((int)(sizeof aot_features / sizeof aot_features[0]))

static int isa_num(int major, int minor) { return 10 * major + minor; }


/* Whether the PTX text uses feature f outside comments. */
static int uses_feature(const char *ptx, const aot_feature *f) {
    const size_t n = strlen(f->pat);
    for (const char *s = strstr(ptx, f->pat); s; s = strstr(s + 1, f->pat)) {
        if (dswa_ptx_in_comment(ptx, s)) continue;
        if (!f->word) return 1;
        const char b = s > ptx ? s[-1] : '\n', a = s[n];
        if ((b == ' ' || b == '\t' || b == '\n' || b == '{' || b == ';' || b == '}') && !dswa_ptx_ident_char(a))
            return 1;
    }
    return 0;
}

int dswa_aot_isa_required(const char *ptx, int sm, int *major, int *minor, const char **what) {
    int ai = -1;
    for (int i = 0; i < AOT_N_ARCHS; i++)
        if (aot_archs[i] == sm) ai = i;
    if (ai < 0 || !ptx || dswa_ptx_isa_for_target(sm, major, minor)) return -1;
    if (what) *what = NULL;
    for (int i = 0; i < AOT_N_FEATURES; i++) {
        const aot_feature *f = &aot_features[i];
        if (isa_num(f->major, f->minor) > isa_num(*major, *minor) && uses_feature(ptx, f)) {
            *major = f->major;
            *minor = f->minor;
            if (what) *what = f->pat;
        }
    }
    return 0;
}

#ifdef DSWA_HAVE_CUDA

/* ---- the kernels' arguments ------------------------------------------------------------------ */

/* Two kernels are exported, each with its argument table in src/cuda/kernel_args.h: the op's
   (DSWA_KERNEL_ARGS, values in dswa_kargs) and the fused SAME-L block's (DSWA_SAMEL_KERNEL_ARGS,
   values in dswa_samel_kargs). Everything below serves both from these rows. */
typedef struct aot_param_def {
    const char *name;
    dswa_aot_param_kind kind;
    const char *meaning, *expr, *expr_shared_v;
    int karg_offset; /* extras: the value's offset in the kernel's kargs struct; pointers: -1 */
} aot_param_def;

typedef struct aot_op {
    const char *name;             /* info->op */
    const aot_param_def *params;
    int n_params;
} aot_op;

/* `kargs` (the macros' ctx) is the struct the launcher fills with the extras' values. */
#define AOT_INPUT_(kargs, name, expr, expr_shared_v, meaning) {#name, DSWA_AOT_INPUT, meaning, expr, expr_shared_v, -1},
#define AOT_EXTRA_(kargs, name, expr, expr_shared_v, meaning) \
    {#name, DSWA_AOT_EXTRA, meaning, expr, expr_shared_v, (int)offsetof(kargs, name)},
#define AOT_OUTPUT_(kargs, name, expr, expr_shared_v, meaning) {#name, DSWA_AOT_OUTPUT, meaning, expr, expr_shared_v, -1},
/* X(op name, argument table, kargs struct, argument count) */
#define AOT_OPS(X)                                                         \
    X(diff_swa, DSWA_KERNEL_ARGS, dswa_kargs, DSWA_KERNEL_ARG_COUNT)       \
    X(samel, DSWA_SAMEL_KERNEL_ARGS, dswa_samel_kargs, DSWA_SAMEL_KERNEL_ARG_COUNT)
#define AOT_ONE_(kargs, name, expr, expr_shared_v, meaning) +1
#define AOT_PARAMS_(op, ARGS, kargs, count)                                                               \
    static const aot_param_def op##_params[count] = {ARGS(AOT_INPUT_, AOT_EXTRA_, AOT_OUTPUT_, kargs)};     \
    _Static_assert((0 ARGS(AOT_ONE_, AOT_ONE_, AOT_ONE_, ~)) == count, "the argument count of " #op);   \
    _Static_assert(count <= DSWA_AOT_MAX_PARAMS, "dswa_aot_info holds every argument of " #op);         \
    static const aot_op op##_op = {#op, op##_params, count};
AOT_OPS(AOT_PARAMS_)
#define AOT_OP_ROW_(op, ARGS, kargs, count) &op##_op,
static const aot_op *const aot_ops[] = {AOT_OPS(AOT_OP_ROW_)};

/* The op an info was exported for (by info->op); NULL for another info. */
static const aot_op *op_of(const dswa_aot_info *info) {
    for (size_t i = 0; i < sizeof aot_ops / sizeof aot_ops[0]; i++)
        if (info->op && !strcmp(info->op, aot_ops[i]->name)) return aot_ops[i];
    return NULL;
}

/* The parameter of `info` called `name`; NULL when its kernel has none. */
static dswa_aot_param *param_named(dswa_aot_info *info, const char *name) {
    for (int i = 0; i < info->n_params; i++)
        if (!strcmp(info->params[i].name, name)) return &info->params[i];
    return NULL;
}

/* ---- the module --------------------------------------------------------------------------- */

/* Writes info's module: the embedded text `src` with `.target sm_XX` and `.version major.minor`,
   and a comment saying so, followed by copies of the info's varying strings (target,
   ptx_isa_min_reason, and every formula that is not its table's: the numbers of an export for
   given windows or rot_dims), which may point into the module being replaced. */
static dswa_status write_module(dswa_aot_info *info, const char *src, int sm, int major, int minor) {
    const char *entry = info->kernel_name;
    const aot_op *op = op_of(info);
    const char *v = dswa_ptx_directive(src, ".version");
    const char *t = dswa_ptx_directive(src, ".target");
    if (!op) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "info: must be a dswa_aot_info filled by dswa_aot_*");
    if (!v || !t || t < v)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "the embedded PTX of %s has no .version/.target header", entry);
    const char *v_end = strchr(v, '\n'), *t_end = strchr(t, '\n');
    if (!v_end || !t_end)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "the embedded PTX of %s has no .version/.target header", entry);
    int sm_major, sm_minor;
    dswa_ptx_version(src, &sm_major, &sm_minor);
    char note[256], ver[32], tgt[32];
    snprintf(note, sizeof note, "// dswa %s AOT export for TensorRT: entry %s for sm_%d at PTX ISA %d.%d "
             "(nvcc wrote %d.%d; the lowest allowed is %d.%d)\n", DSWA_VERSION_STRING, entry, sm, major, minor,
             sm_major, sm_minor, info->ptx_isa_min_major, info->ptx_isa_min_minor);
    snprintf(ver, sizeof ver, ".version %d.%d\n", major, minor);
    snprintf(tgt, sizeof tgt, ".target sm_%d\n", sm);
    const size_t a = (size_t)(v - src), b = (size_t)(t - (v_end + 1)), c = strlen(t_end + 1);
    const size_t n = a + strlen(note) + strlen(ver) + b + strlen(tgt) + c;
    /* the varying strings, copied after the module */
    const char **slot[2 + DSWA_AOT_MAX_PARAMS];
    int n_slots = 0;
    slot[n_slots++] = &info->target;
    slot[n_slots++] = &info->ptx_isa_min_reason;
    for (int i = 0; i < info->n_params && i < op->n_params; i++)
        if (info->params[i].expr != op->params[i].expr) slot[n_slots++] = &info->params[i].expr;
    size_t tail = 0;
    for (int i = 0; i < n_slots; i++) tail += strlen(*slot[i]) + 1;
    char *out = malloc(n + 1 + tail);
    if (!out) return dswa_fail(DSWA_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte PTX module", n);
    char *p = out;
    memcpy(p, src, a), p += a;
    memcpy(p, note, strlen(note)), p += strlen(note);
    memcpy(p, ver, strlen(ver)), p += strlen(ver);
    memcpy(p, v_end + 1, b), p += b;
    memcpy(p, tgt, strlen(tgt)), p += strlen(tgt);
    memcpy(p, t_end + 1, c), p += c;
    *p++ = '\0';
    for (int i = 0; i < n_slots; i++) {
        const size_t len = strlen(*slot[i]) + 1;
        memcpy(p, *slot[i], len);
        *slot[i] = p;
        p += len;
    }
    /* a number written into a formula holds with a shared V as well */
    for (int i = 0; i < info->n_params && i < op->n_params; i++)
        if (info->params[i].expr != op->params[i].expr) info->params[i].expr_shared_v = info->params[i].expr;
    free((void *)info->ptx);
    info->ptx = out;
    info->ptx_size = n;
    info->ptx_isa_major = major;
    info->ptx_isa_minor = minor;
    return DSWA_OK;
}

static const dswa_aot_blob *find_blob(const char *family, int sm, const char *entry) {
    for (int i = 0; i < dswa_aot_blob_count; i++)
        if (dswa_aot_blobs[i].arch == sm && !strcmp(dswa_aot_blobs[i].family, family) &&
            !strcmp(dswa_aot_blobs[i].entry, entry))
            return &dswa_aot_blobs[i];
    return NULL;
}

/* Fills *out for kernel `kern` of `op` on one architecture; windows < 0: any window (WL and WR
   stay in the formulas); rot_dims: the fused block's (written into its formula), 0 for the op. */
static dswa_status export_kernel(int arch_idx, const aot_op *op, const dswa_kernel *kern, int32_t wl, int32_t wr,
                                 int32_t rot_dims, dswa_aot_info *out) {
    const int sm = aot_archs[arch_idx];
    const char *entry = kern->entry;
    const dswa_aot_blob *b = find_blob(kern->family, sm, entry);
    if (!b)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "no embedded PTX for %s on sm_%d: the build's AOT table lacks it "
                         "(rebuild; was the kernel entry renamed?)", entry, sm);
    const char *feature = NULL;
    char target[16], reason[160], wl_expr[48], wr_expr[48], rot_expr[16];
    if (dswa_aot_isa_required(b->ptx, sm, &out->ptx_isa_min_major, &out->ptx_isa_min_minor, &feature))
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "sm_%d: exported, but dswa_ptx_isa_for_target does not know it", sm);
    snprintf(target, sizeof target, "sm_%d", sm);
    if (feature)
        snprintf(reason, sizeof reason, "the kernel uses %s (PTX ISA %d.%d introduced it)", feature,
                 out->ptx_isa_min_major, out->ptx_isa_min_minor);
    else /* no feature raised it: the minimum is the target's own */
        snprintf(reason, sizeof reason, "target sm_%d (PTX ISA %d.%d introduced it)", sm, out->ptx_isa_min_major,
                 out->ptx_isa_min_minor);
    dswa_ptx_version(b->ptx, &out->toolkit_isa_major, &out->toolkit_isa_minor);

    out->op = op->name;
    out->rot_dims = rot_dims;
    out->kernel_name = entry;
    out->family = kern->family;
    out->max_span = kern->max_span;
    out->target = target;
    out->ptx_isa_min_reason = reason;
    out->dtype = kern->dtype;
    out->math = kern->math;
    out->head_dim = DSWA_HEAD_DIM;
    out->window_left = wl;
    out->window_right = wr;
    out->n_params = op->n_params;
    for (int i = 0; i < op->n_params; i++) {
        const aot_param_def *d = &op->params[i];
        dswa_aot_param *p = &out->params[i];
        p->name = d->name;
        p->kind = d->kind;
        p->meaning = d->meaning;
        p->expr = d->expr;
        p->expr_shared_v = d->expr_shared_v ? d->expr_shared_v : d->expr;
        p->value = 0;
        out->n_inputs += p->kind == DSWA_AOT_INPUT;
        out->n_extras += p->kind == DSWA_AOT_EXTRA;
        out->n_outputs += p->kind == DSWA_AOT_OUTPUT;
    }
    /* the numbers this export is for, in place of the attributes' names (write_module copies
       them beside the module) */
    dswa_aot_param *pwl = param_named(out, "wl"), *pwr = param_named(out, "wr"), *prot = param_named(out, "rot_dims");
    if (wl >= 0 && pwl && pwr) {
        snprintf(wl_expr, sizeof wl_expr, "min(%d, N - 1)", (int)wl);
        snprintf(wr_expr, sizeof wr_expr, "min(%d, N - 1)", (int)wr);
        pwl->expr = wl_expr;
        pwr->expr = wr_expr;
    }
    if (prot) {
        snprintf(rot_expr, sizeof rot_expr, "%d", (int)rot_dims);
        prot->expr = rot_expr;
    }
    out->block[0] = DSWA_THREADS;
    out->block[1] = out->block[2] = 1;
    dswa_ptx_shared smem;
    if (dswa_ptx_shared_memory(b->ptx, strlen(b->ptx), entry, strlen(entry), &smem))
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "the embedded PTX for sm_%d has no entry %s", sm, entry);
    out->shared_bytes = smem.static_bytes > UINT32_MAX ? UINT32_MAX : (unsigned)smem.static_bytes;
    out->dynamic_shared_bytes = 0;
    _Static_assert(DSWA_TILE == 64, "grid.x below is written for 64-query blocks");
    out->grid[0] = "(N + 63) // 64";
    out->grid[1] = "H";
    out->grid[2] = "B";
    /* copies target, reason and the formulas with numbers into the module's allocation */
    return write_module(out, b->ptx, sm, out->ptx_isa_min_major, out->ptx_isa_min_minor);
}

/* Exports `kern` for a problem of B x N x H: as export_kernel, then every extra's value from
   the launcher's `kargs` (op's struct) and the grid. */
static dswa_status export_for(int arch_idx, const aot_op *op, const dswa_kernel *kern, int32_t wl, int32_t wr,
                              int32_t rot_dims, const void *kargs, int32_t B, int32_t N, int32_t H,
                              dswa_aot_info *out) {
    dswa_status s = export_kernel(arch_idx, op, kern, wl, wr, rot_dims, out);
    if (s) return s;
    for (int i = 0; i < op->n_params; i++)
        if (op->params[i].karg_offset >= 0)
            memcpy(&out->params[i].value, (const char *)kargs + op->params[i].karg_offset, sizeof(int32_t));
    out->grid_dims[0] = (unsigned)((N + DSWA_TILE - 1) / DSWA_TILE);
    out->grid_dims[1] = (unsigned)H;
    out->grid_dims[2] = (unsigned)B;
    out->has_problem = 1;
    return DSWA_OK;
}

static dswa_status finish(dswa_status s, dswa_aot_info *out) {
    if (s != DSWA_OK) dswa_aot_info_free(out);
    return s;
}

#else

static dswa_status no_cuda(void) {
    return dswa_fail(DSWA_ERR_UNSUPPORTED, "dswa was built without nvcc, so it holds no PTX to export "
                     "(the kernels are compiled to PTX at build time; rebuild with the CUDA toolkit)");
}

#endif /* DSWA_HAVE_CUDA */

/* ---- what the public functions share ------------------------------------------------------- */

/* Zeroes *out and reads the target: the start of every export. */
static dswa_status begin(const char *arch, dswa_aot_info *out, int *idx) {
    if (!out) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "out = NULL: must point to a dswa_aot_info");
    memset(out, 0, sizeof *out);
    return parse_arch(arch, idx);
}

static dswa_status check_windows(int32_t wl, int32_t wr) {
    if ((wl < 0) != (wr < 0))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "window_left = %d, window_right = %d: both must be >= 0 "
                         "(or both negative: any window)", (int)wl, (int)wr);
    return DSWA_OK;
}

/* Stand-in device addresses for validating a problem whose pointers TensorRT gives at run time
   (never dereferenced): 256-byte aligned as TensorRT's are. Each call hands out the next one,
   past the `elems` elements of the previous, so that no two overlap (elems < 0, a span that
   does not fit: validation refuses the problem anyway). */
typedef struct standin { uintptr_t next; } standin;
static const void *standin_take(standin *st, int64_t elems, size_t elem_size) {
    const uintptr_t at = st->next;
    uint64_t bytes = 0;
    if (elems > 0 && __builtin_mul_overflow((uint64_t)elems, (uint64_t)elem_size, &bytes)) bytes = 0;
    st->next = at + ((bytes + 255) & ~(uint64_t)255) + 256;
    return (const void *)at;
}

static dswa_status check_nonempty(int32_t batch, int32_t seq_len) {
    if (batch == 0 || seq_len == 0)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "batch = %d, seq_len = %d: an empty problem launches no kernel",
                         batch, seq_len);
    return DSWA_OK;
}

/* ---- the op --------------------------------------------------------------------------------- */

dswa_status dswa_aot_kernel_window(const char *arch, dswa_dtype dtype, dswa_math math, int32_t window_left,
                                   int32_t window_right, dswa_aot_info *out) {
    int idx = 0;
    dswa_status s;
    if ((s = begin(arch, out, &idx)) || (s = check_dtype_math(dtype, math)) ||
        (s = check_windows(window_left, window_right)))
        return s;
#ifdef DSWA_HAVE_CUDA
    const dswa_kernel *kern = dswa_kernel_pick(dtype, math, window_left, window_right);
    if (!kern)
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "math = fp32: the fp32-accurate kernel is the band kernel only "
                         "(window_left + window_right <= %d); give the windows", DSWA_BAND_MAX_SPAN);
    return finish(export_kernel(idx, &diff_swa_op, kern, window_left < 0 ? -1 : window_left,
                                window_left < 0 ? -1 : window_right, 0, out), out);
#else
    return no_cuda();
#endif
}

dswa_status dswa_aot_kernel(const char *arch, dswa_dtype dtype, dswa_math math, dswa_aot_info *out) {
    return dswa_aot_kernel_window(arch, dtype, math, -1, -1, out);
}

dswa_status dswa_aot_kernel_for(const char *arch, const dswa_problem *p, dswa_aot_info *out) {
    int idx = 0;
    dswa_status s;
    if ((s = begin(arch, out, &idx))) return s;
    if (!p) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "problem = NULL: must point to a dswa_problem");
    /* the output first, the inputs (which may alias each other) after it */
    standin st = {4096};
    const void *o = standin_take(&st, dswa_view_span(p, &p->out, 1), dswa_dtype_size(p->dtype));
    const void *in = standin_take(&st, 0, 0);
    if ((s = dswa_validate(p, in, in, in, o)) || (s = check_dtype_math(p->dtype, p->math)) ||
        (s = check_nonempty(p->batch, p->seq_len)))
        return s;
#ifdef DSWA_HAVE_CUDA
    /* Exactly what the library launches for this problem: the family follows the windows
       clamped to this N - 1 (dswa_aot_kernel_window picks for every N). */
    dswa_kargs a;
    const dswa_kernel *kern;
    if ((s = dswa_cuda_kargs(p, in, in, in, o, &a, &kern))) return s;
    return finish(export_for(idx, &diff_swa_op, kern, p->window_left, p->window_right, 0, &a, p->batch, a.n,
                             p->heads, out), out);
#else
    return no_cuda();
#endif
}

dswa_status dswa_aot_set_ptx_isa(dswa_aot_info *info, const char *isa) {
    int major = 0, minor = 0;
    dswa_status s;
    if (!info || !info->ptx || !info->kernel_name || !info->target || !info->family)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "info: must be a dswa_aot_info filled by dswa_aot_*");
    if ((s = parse_isa(isa, &major, &minor))) return s;
#ifdef DSWA_HAVE_CUDA
    int sm = 0, ai = -1, tmajor = 0, tminor = 0;
    if (sscanf(info->target, "sm_%d", &sm) == 1)
        for (int i = 0; i < AOT_N_ARCHS; i++)
            if (aot_archs[i] == sm) ai = i;
    const dswa_aot_blob *b = ai < 0 ? NULL : find_blob(info->family, sm, info->kernel_name);
    if (!b || !op_of(info) || dswa_ptx_isa_for_target(sm, &tmajor, &tminor))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "info: must be a dswa_aot_info filled by dswa_aot_*");
    const int want = isa_num(major, minor);
    if (want < isa_num(tmajor, tminor))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "ptx_isa = %s: too low for sm_%d, which PTX ISA %d.%d introduced "
                         "(the lowest for %s is %d.%d)", isa, sm, tmajor, tminor,
                         info->kernel_name, info->ptx_isa_min_major, info->ptx_isa_min_minor);
    for (int i = 0; i < AOT_N_FEATURES; i++) {
        const aot_feature *f = &aot_features[i];
        if (want < isa_num(f->major, f->minor) && uses_feature(b->ptx, f))
            return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "ptx_isa = %s: too low for %s, which uses %s (PTX ISA %d.%d "
                             "introduced it; the lowest for this kernel is %d.%d)", isa, info->kernel_name, f->pat,
                             f->major, f->minor, info->ptx_isa_min_major, info->ptx_isa_min_minor);
    }
    if (want > isa_num(info->toolkit_isa_major, info->toolkit_isa_minor))
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "ptx_isa = %s: above %d.%d, the version the kernels were compiled "
                         "with (no driver needs a higher one to load them)", isa, info->toolkit_isa_major,
                         info->toolkit_isa_minor);
    return write_module(info, b->ptx, sm, major, minor);
#else
    return no_cuda();
#endif
}

/* ---- the fused SAME-L kernel --------------------------------------------------------------- */

dswa_status dswa_aot_samel_kernel(const char *arch, dswa_dtype dtype, dswa_math math, int32_t window_left,
                                  int32_t window_right, int32_t rot_dims, dswa_aot_info *out) {
    int idx = 0;
    dswa_status s;
    if ((s = begin(arch, out, &idx)) || (s = check_dtype_math(dtype, math)) ||
        (s = check_windows(window_left, window_right)))
        return s;
    if (rot_dims < 0 || rot_dims > DSWA_HEAD_DIM || rot_dims % 2)
        return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "rot_dims = %d: must be even and in [0, head_dim = %d]",
                         (int)rot_dims, DSWA_HEAD_DIM);
#ifdef DSWA_HAVE_CUDA
    const dswa_kernel *kern = dswa_samel_kernel_pick(dtype, math, window_left, window_right, rot_dims);
    if (!kern) /* every valid dtype has a scalar entry */
        return dswa_fail(DSWA_ERR_UNSUPPORTED, "dtype = %s: no fused SAME-L kernel", dswa_dtype_name(dtype));
    return finish(export_kernel(idx, &samel_op, kern, window_left < 0 ? -1 : window_left,
                                window_left < 0 ? -1 : window_right, rot_dims, out), out);
#else
    return no_cuda();
#endif
}

dswa_status dswa_aot_samel_kernel_for(const char *arch, const dswa_samel_problem *p0, dswa_aot_info *out) {
    int idx = 0;
    dswa_status s;
    if ((s = begin(arch, out, &idx))) return s;
    if (!p0) return dswa_fail(DSWA_ERR_INVALID_ARGUMENT, "problem = NULL: must point to a dswa_samel_problem");
    /* The output first, then the norms' weights (the problem's own are not TensorRT's: stand-ins
       replace them too), then the packed input. */
    dswa_samel_problem p = *p0;
    const dswa_problem op = dswa_samel_op_problem(&p);
    standin st = {4096};
    const void *o = standin_take(&st, dswa_view_span(&op, &op.out, 1), dswa_dtype_size(p.dtype));
    dswa_samel_norm *const norms[2] = {&p.q_norm, &p.k_norm};
    for (int i = 0; i < 2; i++) {
        norms[i]->gamma = standin_take(&st, p.head_dim, sizeof(float));
        norms[i]->beta = standin_take(&st, p.head_dim, sizeof(float));
    }
    const void *x = standin_take(&st, 0, 0);
    if ((s = dswa_samel_validate(&p, x, o)) || (s = check_dtype_math(p.dtype, p.math)) ||
        (s = check_nonempty(p.batch, p.seq_len)))
        return s;
#ifdef DSWA_HAVE_CUDA
    /* exactly what dswa_samel_forward_cuda launches for this problem (the kernel chosen for the
       windows clamped to this N - 1, as for the op) */
    dswa_samel_kargs a;
    const dswa_kernel *kern;
    if ((s = dswa_cuda_samel_kargs(&p, x, o, &a, &kern))) return s;
    return finish(export_for(idx, &samel_op, kern, p.window_left, p.window_right, p.rot_dims, &a, p.batch, a.n,
                             p.heads, out), out);
#else
    return no_cuda();
#endif
}
