/* test_aot — the AOT export for TensorRT (dswa.h: dswa_aot_*), without a GPU. For every
   exported architecture, dtype and kernel family it checks the PTX against what TensorRT's
   loader needs and against the metadata: one .entry with the metadata's name, a plain
   `.target sm_XX` (no a/f), `.version` as claimed and equal to the lowest the target allows,
   mma instructions present, the entry's parameters in the metadata's order and kinds (64-bit
   pointers first and last, 32-bit extras between), block dims as `.maxntid`, the shared memory
   it declares (<= 48 KB) as reported; the formulas of the extras and the grid, evaluated, equal
   the values the library computes for real problems (dswa_aot_kernel_for: the kernel choice
   and clamping included); and the refusals (unknown arch/dtype/math, math fp32, a too-low or
   too-high --ptx-isa, problems the CUDA backend refuses). With ptxas (PATH, $CUDA_HOME/bin,
   /usr/local/cuda/bin) every export is assembled for its target at the version claimed, and a
   copy one version lower must be refused; without ptxas that part is skipped and says so.
   In a build without nvcc only the refusals run, then it exits 77 ("skipped"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/ptx_blobs.h"
#include "dswa.h"
#include "ptx_fit/ptx_fit.h"
#include "testutil.h"

static const struct { const char *arch; int sm, major, minor; const char *below; } archs[] = {
    {"sm_80", 80, 7, 0, "6.5"}, {"sm_86", 86, 7, 1, "7.0"}, {"sm_89", 89, 7, 8, "7.7"},
    {"sm_90", 90, 7, 8, "7.7"}, {"sm_100", 100, 8, 6, "8.5"}, {"sm_120", 120, 8, 7, "8.6"},
};
#define N_ARCHS ((int)(sizeof archs / sizeof archs[0]))
static const char *const names[2][3] = {
    {"dswa_fwd_wide_f32_tf32", "dswa_fwd_wide_f16", "dswa_fwd_wide_bf16"},
    {"dswa_fwd_f32_tf32", "dswa_fwd_f16", "dswa_fwd_bf16"},
};

static char *ptxas;
static int assembled, refused_below;

/* ---- a little PTX reading (the test's own) ----------------------------------------------- */

static int count_substr(const char *s, const char *w) {
    int n = 0;
    for (const char *p = strstr(s, w); p; p = strstr(p + 1, w)) n++;
    return n;
}

/* The text of the directive line starting with `dir` (e.g. ".version"), without the newline. */
static int directive(const char *ptx, const char *dir, char *buf, size_t n) {
    for (const char *l = ptx; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, dir, strlen(dir))) {
            const char *e = strchr(l, '\n');
            size_t k = e ? (size_t)(e - l) : strlen(l);
            if (k >= n) k = n - 1;
            memcpy(buf, l, k);
            buf[k] = '\0';
            return 1;
        }
    return 0;
}

/* The entry's parameters: for each, 8 for .u64/.b64/.s64, 4 for 32-bit; the declaration is
   ".param TYPE [.ptr [.space] .align N] NAME" (nvcc marks pointers so for sm_100 and newer), and
   the names must be <entry>_param_<i>. Returns the count, -1 when the signature does not parse. */
static int entry_params(const char *ptx, const char *entry, int *bytes, int cap) {
    char want[256];
    snprintf(want, sizeof want, ".entry %s(", entry);
    const char *p = strstr(ptx, want);
    if (!p) return -1;
    p += strlen(want);
    const char *end = strchr(p, ')');
    if (!end) return -1;
    int n = 0;
    for (const char *q = strstr(p, ".param"); q && q < end; q = strstr(q + 1, ".param")) {
        const char *e = q;
        while (e < end && *e != ',') e++;
        char decl[512], expect[300];
        const size_t k = (size_t)(e - q) < sizeof decl ? (size_t)(e - q) : sizeof decl - 1;
        memcpy(decl, q, k);
        decl[k] = '\0';
        char *tok[16];
        int nt = 0;
        for (char *t = strtok(decl, " \t\n"); t && nt < 16; t = strtok(NULL, " \t\n")) tok[nt++] = t;
        if (nt < 3 || n >= cap) return -1;
        snprintf(expect, sizeof expect, "%s_param_%d", entry, n);
        if (strcmp(tok[nt - 1], expect)) return -1;
        for (int i = 2; i < nt - 1; i++) /* only pointer attributes between the type and the name */
            if (strcmp(tok[i], ".ptr") && strcmp(tok[i], ".global") && strcmp(tok[i], ".align") &&
                strspn(tok[i], "0123456789") != strlen(tok[i]))
                return -1;
        const char *type = tok[1];
        bytes[n++] = !strcmp(type, ".u64") || !strcmp(type, ".b64") || !strcmp(type, ".s64") ? 8
                   : !strcmp(type, ".u32") || !strcmp(type, ".b32") || !strcmp(type, ".s32") ? 4 : 0;
    }
    return n;
}

/* Bytes of the `.shared NAME[N]` declarations (.b8 arrays, as nvcc writes them). */
static long shared_declared(const char *ptx) {
    long total = 0;
    for (const char *l = ptx; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        while (*l == '\t' || *l == ' ') l++;
        if (strncmp(l, ".shared ", 8)) continue;
        const char *b = strchr(l, '['), *nl = strchr(l, '\n');
        if (!b || (nl && b > nl)) continue;
        long elem = strstr(l, ".b8 ") && strstr(l, ".b8 ") < b ? 1 : strstr(l, ".b32 ") && strstr(l, ".b32 ") < b ? 4 : -1;
        if (elem < 0) return -1;
        total += elem * strtol(b + 1, NULL, 10);
    }
    return total;
}

/* ---- the formulas: integers, B N H D WL WR (and the fused block's POS ROT), + - * // ( ),
   min(a, b), float_bits(scale|lambda|freq0 ... freq31|q_alpha|k_alpha) */

typedef struct ev {
    const char *s;
    int64_t B, N, H, D, WL, WR, POS, ROT;
    float scale, lambda, q_alpha, k_alpha;
    const float *freq; /* RoPE's 32 frequencies, 0 past ROT / 2 (the fused block's) */
    int err;
} ev;
static int32_t bits_of(float x) {
    int32_t b;
    memcpy(&b, &x, 4);
    return b;
}
static int64_t ev_expr(ev *e);
static void ev_ws(ev *e) { while (*e->s == ' ') e->s++; }
static int ev_word(ev *e, const char *w) {
    ev_ws(e);
    size_t n = strlen(w);
    if (strncmp(e->s, w, n)) return 0;
    e->s += n;
    return 1;
}
static int64_t ev_factor(ev *e) {
    ev_ws(e);
    if (*e->s >= '0' && *e->s <= '9') return strtoll(e->s, (char **)&e->s, 10);
    if (ev_word(e, "(")) {
        int64_t x = ev_expr(e);
        if (!ev_word(e, ")")) e->err = 1;
        return x;
    }
    if (ev_word(e, "min(")) {
        int64_t a = ev_expr(e);
        if (!ev_word(e, ",")) e->err = 1;
        int64_t b = ev_expr(e);
        if (!ev_word(e, ")")) e->err = 1;
        return a < b ? a : b;
    }
    if (ev_word(e, "float_bits(scale)")) return bits_of(e->scale);
    if (ev_word(e, "float_bits(lambda)")) return bits_of(e->lambda);
    if (ev_word(e, "float_bits(freq")) {
        const long j = strtol(e->s, (char **)&e->s, 10);
        if (!e->freq || j < 0 || j > 31 || !ev_word(e, ")")) { e->err = 1; return 0; }
        return bits_of(e->freq[j]);
    }
    if (ev_word(e, "float_bits(q_alpha)")) return bits_of(e->q_alpha);
    if (ev_word(e, "float_bits(k_alpha)")) return bits_of(e->k_alpha);
    if (ev_word(e, "POS")) return e->POS;
    if (ev_word(e, "ROT")) return e->ROT;
    if (ev_word(e, "WL")) return e->WL;
    if (ev_word(e, "WR")) return e->WR;
    if (ev_word(e, "B")) return e->B;
    if (ev_word(e, "N")) return e->N;
    if (ev_word(e, "H")) return e->H;
    if (ev_word(e, "D")) return e->D;
    e->err = 1;
    return 0;
}
static int64_t ev_term(ev *e) {
    int64_t x = ev_factor(e);
    for (;;) {
        if (ev_word(e, "*")) x *= ev_factor(e);
        else if (ev_word(e, "//")) {
            int64_t d = ev_factor(e);
            if (d == 0) { e->err = 1; return 0; }
            x = x >= 0 ? x / d : -((-x + d - 1) / d);
        } else return x;
    }
}
static int64_t ev_expr(ev *e) {
    int64_t x = ev_term(e);
    for (;;) {
        if (ev_word(e, "+")) x += ev_term(e);
        else if (ev_word(e, "-")) x -= ev_term(e);
        else return x;
    }
}
static int64_t eval_ev(ev e, int *err) {
    int64_t x = ev_expr(&e);
    ev_ws(&e);
    *err = e.err || *e.s != '\0';
    return x;
}
static int64_t eval(const char *s, const dswa_problem *p, int *err) {
    const ev e = {s, p->batch, p->seq_len, p->heads, p->head_dim, p->window_left, p->window_right, -1, -1,
                  p->scale, p->lambda, NAN, NAN, NULL, 0};
    return eval_ev(e, err);
}
/* RoPE's 32 frequencies of p as the fused block's dswa.h defines them, written here from the
   definition: p->rope_freq's, or 1 / base^(2f / rot_dims) rounded to fp32; 0 past rot_dims / 2. */
static void samel_freqs(const dswa_samel_problem *p, float *f) {
    for (int j = 0; j < 32; j++)
        f[j] = j >= p->rot_dims / 2 ? 0.0f : p->rope_freq ? p->rope_freq[j]
             : (float)(1.0 / pow((double)p->rope_base, 2.0 * j / p->rot_dims));
}
static int64_t eval_samel(const char *s, const dswa_samel_problem *p, int *err) {
    float f[32];
    samel_freqs(p, f);
    const ev e = {s, p->batch, p->seq_len, p->heads, p->head_dim, p->window_left, p->window_right, p->pos_offset,
                  p->rot_dims, p->scale, p->lambda, p->q_norm.alpha, p->k_norm.alpha, f, 0};
    return eval_ev(e, err);
}

/* ---- ptxas, run on many modules at once ------------------------------------------------------ */
/* Each assembly is a ptxas process of its own (seconds for the larger targets): they are
   queued while the exports are checked, then run in parallel, and every result is checked. */
typedef struct ptxas_job {
    char *ptx;
    const char *arch, *what, *below; /* below: the lowered .version, for the expected refusals */
    int want_ok, rc;
    char *messages;
} ptxas_job;
static ptxas_job jobs[128];
static int n_jobs;

static void queue_ptxas(const char *ptx, const char *arch, const char *what, int want_ok, const char *below) {
    CHECK(n_jobs < (int)(sizeof jobs / sizeof jobs[0]), "too many ptxas jobs");
    if (n_jobs >= (int)(sizeof jobs / sizeof jobs[0])) return;
    ptxas_job *j = &jobs[n_jobs++];
    j->ptx = strdup(ptx);
    if (!j->ptx) abort();
    j->arch = arch;
    j->what = what;
    j->below = below;
    j->want_ok = want_ok;
    j->rc = -1;
    j->messages = NULL;
}

static void assemble_all(void) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int i = 0; i < n_jobs; i++)
        jobs[i].rc = ptx_fit_ptxas_assemble(ptxas, jobs[i].ptx, strlen(jobs[i].ptx), jobs[i].arch, &jobs[i].messages);
    for (int i = 0; i < n_jobs; i++) {
        const ptxas_job *j = &jobs[i];
        if (j->want_ok) {
            CHECK(j->rc == 0, "%s %s: ptxas -arch=%s failed on the export (exit %d): %s", j->arch, j->what, j->arch,
                  j->rc, j->messages ? j->messages : "");
            assembled += j->rc == 0;
        } else {
            /* refused by ptxas itself (exit 255 with a message), not a failure to run it (-1) */
            CHECK(j->rc > 0, "%s %s: ptxas -arch=%s on .version %s: exit %d, expected a refusal: %s", j->arch,
                  j->what, j->arch, j->below, j->rc, j->messages ? j->messages : "");
            refused_below += j->rc > 0;
        }
        free(jobs[i].ptx);
        free(jobs[i].messages);
    }
    n_jobs = 0;
}

/* ---- checks of one export ------------------------------------------------------------------ */

/* What one export must be: the kernel, its family and op, and its parameters in launch order. */
typedef struct expect {
    const char *kernel, *family, *op;
    dswa_dtype dtype;
    dswa_math math;
    int max_span;
    int32_t rot_dims;
    int n_inputs, n_extras;
    const char *const *order; /* the n_inputs + n_extras + 1 parameter names */
    int mma;                  /* 1: the dtype's tensor-core mma must be there */
    int below;                /* 1: a copy one PTX ISA version below the claim is assembled, and must fail */
} expect;

static const char *const op_order[24] = {"q", "k", "v", "n", "wl", "wr", "scale_bits", "lambda_bits", "q_sb",
    "q_sn", "q_sp", "q_sh", "k_sb", "k_sn", "k_sp", "k_sh", "v_sb", "v_sn", "v_sp", "v_sh", "o_sb", "o_sn", "o_sh",
    "out"};
static const char *const samel_order[54] = {
    "x", "q_gamma", "q_beta", "k_gamma", "k_beta", "n", "wl", "wr", "scale_bits", "lambda_bits", "x_sb", "x_sn",
    "x_sc", "x_sh", "o_sb", "o_sn", "o_sh", "rot_dims", "freq0", "freq1", "freq2", "freq3", "freq4", "freq5",
    "freq6", "freq7", "freq8", "freq9", "freq10", "freq11", "freq12", "freq13", "freq14", "freq15", "freq16",
    "freq17", "freq18", "freq19", "freq20", "freq21", "freq22", "freq23", "freq24", "freq25", "freq26",
    "freq27", "freq28", "freq29", "freq30", "freq31", "pos_offset", "q_alpha_bits", "k_alpha_bits", "out"};

/* The op's export of names[band][dt]. */
static expect op_expect(dswa_dtype dt, int band) {
    expect e = {names[band][dt], band ? "band" : "wide", "diff_swa", dt,
                dt == DSWA_F32 ? DSWA_MATH_TF32 : DSWA_MATH_DEFAULT, band ? 48 : -1, 0, 3, 20, op_order, 1,
                dt == DSWA_BF16};
    return e;
}

static void check_export(const dswa_aot_info *in, int ai, const expect *e) {
    const char *what = e->kernel;
    const int np_want = e->n_inputs + e->n_extras + 1;
    char buf[256], want[64];
    CHECK(in->ptx && in->ptx_size == strlen(in->ptx), "%s %s: ptx_size %zu", archs[ai].arch, what, in->ptx_size);
    if (!in->ptx) return;
    CHECK(!strcmp(in->kernel_name, what), "%s: kernel %s, expected %s", archs[ai].arch, in->kernel_name, what);
    CHECK(!strcmp(in->family, e->family), "%s %s: family %s", archs[ai].arch, what, in->family);
    CHECK(in->op && !strcmp(in->op, e->op) && in->rot_dims == e->rot_dims, "%s %s: op %s, rot_dims %d; expected %s, %d",
          archs[ai].arch, what, in->op ? in->op : "NULL", (int)in->rot_dims, e->op, (int)e->rot_dims);
    CHECK(!strcmp(in->target, archs[ai].arch), "%s %s: target %s", archs[ai].arch, what, in->target);
    CHECK(count_substr(in->ptx, ".entry") == 1, "%s %s: %d .entry in the module", archs[ai].arch, what,
          count_substr(in->ptx, ".entry"));
    snprintf(want, sizeof want, ".visible .entry %s(", what);
    CHECK(strstr(in->ptx, want) != NULL, "%s: no '%s'", archs[ai].arch, want);
    /* the target: exactly .target sm_XX */
    snprintf(want, sizeof want, ".target %s", archs[ai].arch);
    CHECK(directive(in->ptx, ".target", buf, sizeof buf) && !strcmp(buf, want), "%s %s: '%s', expected '%s'",
          archs[ai].arch, what, buf, want);
    /* the version: as claimed, and the lowest the target allows */
    snprintf(want, sizeof want, ".version %d.%d", archs[ai].major, archs[ai].minor);
    CHECK(directive(in->ptx, ".version", buf, sizeof buf) && !strcmp(buf, want), "%s %s: '%s', expected '%s'",
          archs[ai].arch, what, buf, want);
    CHECK(in->ptx_isa_major == archs[ai].major && in->ptx_isa_minor == archs[ai].minor &&
          in->ptx_isa_min_major == archs[ai].major && in->ptx_isa_min_minor == archs[ai].minor,
          "%s %s: claims %d.%d (min %d.%d), expected %d.%d", archs[ai].arch, what, in->ptx_isa_major,
          in->ptx_isa_minor, in->ptx_isa_min_major, in->ptx_isa_min_minor, archs[ai].major, archs[ai].minor);
    CHECK(directive(in->ptx, ".address_size", buf, sizeof buf) && !strcmp(buf, ".address_size 64"),
          "%s %s: '%s'", archs[ai].arch, what, buf);
    int mj = 0, mn = 0;
    const char *feat = NULL;
    CHECK(dswa_aot_isa_required(in->ptx, archs[ai].sm, &mj, &mn, &feat) == 0 && mj == in->ptx_isa_min_major &&
          mn == in->ptx_isa_min_minor, "%s %s: dswa_aot_isa_required says %d.%d (%s)", archs[ai].arch, what, mj,
          mn, feat ? feat : "target");
    /* tensor-core mma of the dtype */
    const char *mma = e->dtype == DSWA_F32 ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
                    : e->dtype == DSWA_F16 ? "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                                           : "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    if (e->mma) CHECK(count_substr(in->ptx, mma) > 0, "%s %s: no %s", archs[ai].arch, what, mma);
    /* the signature against the metadata */
    int bytes[64];
    const int np = entry_params(in->ptx, what, bytes, 64);
    CHECK(np == in->n_params && np == np_want, "%s %s: the entry has %d parameters, the metadata %d, expected %d",
          archs[ai].arch, what, np, in->n_params, np_want);
    CHECK(in->n_inputs == e->n_inputs && in->n_extras == e->n_extras && in->n_outputs == 1,
          "%s %s: %d inputs, %d extras, %d outputs", archs[ai].arch, what, in->n_inputs, in->n_extras, in->n_outputs);
    for (int i = 0; i < np && i < in->n_params; i++) {
        const dswa_aot_param_kind k = in->params[i].kind;
        const dswa_aot_param_kind order = i < in->n_inputs ? DSWA_AOT_INPUT
                                        : i < in->n_inputs + in->n_extras ? DSWA_AOT_EXTRA : DSWA_AOT_OUTPUT;
        CHECK(k == order, "%s %s: parameter %d (%s) has kind %d, launch order wants %d", archs[ai].arch, what, i,
              in->params[i].name, (int)k, (int)order);
        CHECK(bytes[i] == (k == DSWA_AOT_EXTRA ? 4 : 8), "%s %s: parameter %d (%s) is %d bytes in the PTX",
              archs[ai].arch, what, i, in->params[i].name, bytes[i]);
        CHECK(in->params[i].name && in->params[i].meaning && in->params[i].meaning[0] && in->params[i].expr,
              "%s %s: parameter %d lacks a name, meaning or expr", archs[ai].arch, what, i);
    }
    for (int i = 0; i < np_want && i < in->n_params; i++)
        CHECK(!strcmp(in->params[i].name, e->order[i]), "%s: parameter %d is %s, expected %s", what, i,
              in->params[i].name, e->order[i]);
    /* launch geometry */
    unsigned nt[3] = {1, 1, 1};
    const char *mx = strstr(in->ptx, "\n.maxntid ");
    const int got = mx ? sscanf(mx, "\n.maxntid %u, %u, %u", &nt[0], &nt[1], &nt[2]) : 0;
    CHECK(in->block[0] == 128 && in->block[1] == 1 && in->block[2] == 1 && got >= 1 && nt[0] == in->block[0] &&
          nt[1] == in->block[1] && nt[2] == in->block[2], "%s %s: block (%u, %u, %u), the entry's .maxntid (%u, %u, %u)",
          archs[ai].arch, what, in->block[0], in->block[1], in->block[2], nt[0], nt[1], nt[2]);
    /* (the scalar kernel may declare none) */
    const long sh = shared_declared(in->ptx);
    CHECK(sh == (long)in->shared_bytes && (sh > 0 || !strcmp(e->family, "scalar")) && sh <= 48 * 1024 &&
          in->dynamic_shared_bytes == 0,
          "%s %s: the PTX declares %ld bytes of shared memory, the metadata %u (+%u dynamic); TensorRT allows 48 KB",
          archs[ai].arch, what, sh, in->shared_bytes, in->dynamic_shared_bytes);
    CHECK(strstr(in->ptx, ".extern .shared") == NULL, "%s %s: dynamic shared memory declared", archs[ai].arch, what);
    CHECK(in->grid[0] && !strcmp(in->grid[0], "(N + 63) // 64") && !strcmp(in->grid[1], "H") &&
          !strcmp(in->grid[2], "B"), "%s %s: grid (%s, %s, %s): one block per 64 queries, head and batch expected",
          archs[ai].arch, what, in->grid[0], in->grid[1], in->grid[2]);
    CHECK(in->max_span == e->max_span, "%s %s: max_span %d", archs[ai].arch, what, in->max_span);
    CHECK(in->head_dim == 64 && in->dtype == e->dtype && in->math == e->math, "%s %s: head_dim %d dtype %d math %d",
          archs[ai].arch, what, in->head_dim, (int)in->dtype, (int)in->math);

    /* ptxas: assembles at the claimed version; one version lower is refused (queued: the
       assemblies run side by side in assemble_all) */
    if (!ptxas) return;
    queue_ptxas(in->ptx, archs[ai].arch, what, 1, NULL);
    if (e->below) { /* once per arch and family: the claimed version is the lowest */
        const char *v = strstr(in->ptx, "\n.version ");
        CHECK(v != NULL, "%s %s: no .version line", archs[ai].arch, what);
        if (v) {
            const size_t a = (size_t)(v - in->ptx) + 10;
            const char *rest = strchr(v + 1, '\n');
            const size_t cap = in->ptx_size + 16;
            char *low = malloc(cap);
            if (!low) abort();
            snprintf(low, cap, "%.*s%s%s", (int)a, in->ptx, archs[ai].below, rest ? rest : "");
            queue_ptxas(low, archs[ai].arch, what, 0, archs[ai].below);
            free(low);
        }
    }
}

/* dswa_aot_kernel_for on a contiguous problem: kernel choice, values, formulas. */
static void check_for(const char *arch, dswa_dtype dt, int B, int N, int H, int wl, int wr, int shared_v,
                      float scale, float lambda) {
    dswa_problem p = dswa_problem_default(B, N, H, 64, 0);
    p.window_left = wl;
    p.window_right = wr;
    p.dtype = dt;
    p.scale = scale;
    p.lambda = lambda;
    if (shared_v) {
        p.v.pair = 0;
        p.v.seq = (int64_t)H * 64;
        p.v.batch = (int64_t)N * H * 64;
    }
    dswa_aot_info in;
    dswa_status s = dswa_aot_kernel_for(arch, &p, &in);
    CHECK(s == DSWA_OK, "kernel_for %s %s B=%d N=%d H=%d W=%d/%d: %s: %s", arch, dswa_dtype_name(dt), B, N, H, wl, wr,
          dswa_status_string(s), dswa_last_error());
    if (s != DSWA_OK) return;
    const int cwl = wl < N ? wl : N - 1, cwr = wr < N ? wr : N - 1;
    const int band = cwl + cwr <= 48;
    CHECK(!strcmp(in.kernel_name, names[band][dt]) && in.has_problem, "N=%d W=%d/%d: kernel %s, expected %s", N, wl,
          wr, in.kernel_name, names[band][dt]);
    const int64_t hd = (int64_t)H * 64, vh = shared_v ? hd : 2 * hd;
    int32_t sb, lb;
    memcpy(&sb, &scale, 4);
    memcpy(&lb, &lambda, 4);
    const int64_t want[20] = {N, cwl, cwr, sb, lb, N * 2 * hd, 2 * hd, hd, 64, N * 2 * hd, 2 * hd, hd, 64,
                              N * vh, vh, shared_v ? 0 : hd, 64, N * hd, hd, 64};
    for (int i = 0; i < 20; i++) {
        const dswa_aot_param *q = &in.params[3 + i];
        int err = 0;
        const int64_t x = eval(shared_v ? q->expr_shared_v : q->expr, &p, &err);
        CHECK(q->value == want[i] && !err && x == want[i], "N=%d B=%d H=%d W=%d/%d%s: %s = %d, formula '%s' gives %lld%s, "
              "expected %lld", N, B, H, wl, wr, shared_v ? " shared V" : "", q->name, (int)q->value,
              shared_v ? q->expr_shared_v : q->expr, (long long)x, err ? " (does not parse)" : "", (long long)want[i]);
    }
    const int64_t gx = (N + 63) / 64; /* one block per 64 queries */
    const int64_t gwant[3] = {gx, H, B};
    for (int d = 0; d < 3; d++) {
        int err = 0;
        const int64_t x = eval(in.grid[d], &p, &err);
        CHECK(!err && x == gwant[d] && in.grid_dims[d] == (unsigned)gwant[d], "N=%d: grid[%d] = %u, formula '%s' gives "
              "%lld, expected %lld", N, d, in.grid_dims[d], in.grid[d], (long long)x, (long long)gwant[d]);
    }
    /* the window-free export's formulas, with WL and WR, agree too */
    dswa_aot_info any;
    if (dswa_aot_kernel(arch, dt, DSWA_MATH_DEFAULT, &any) == DSWA_OK) {
        for (int i = 0; i < 20; i++) {
            int err = 0;
            const int64_t x = eval(shared_v ? any.params[3 + i].expr_shared_v : any.params[3 + i].expr, &p, &err);
            CHECK(!err && x == want[i], "window-free %s: formula '%s' gives %lld, expected %lld", any.params[3 + i].name,
                  any.params[3 + i].expr, (long long)x, (long long)want[i]);
        }
        dswa_aot_info_free(&any);
    }
    dswa_aot_info_free(&in);
}

static void expect_fail(dswa_status s, dswa_status want, const dswa_aot_info *in, const char *what,
                        const char *must_mention) {
    const char *msg = dswa_last_error();
    CHECK(s == want, "%s: status %s, expected %s (%s)", what, dswa_status_string(s), dswa_status_string(want), msg);
    CHECK(msg && msg[0], "%s: no message", what);
    if (must_mention) CHECK(strstr(msg, must_mention) != NULL, "%s: the message does not mention '%s': %s", what,
                            must_mention, msg);
    if (in) {
        static const dswa_aot_info zero;
        CHECK(!memcmp(in, &zero, sizeof zero), "%s: the info is not zeroed after a failure", what);
    }
    printf("refused as expected: %s: %s\n", what, msg);
}

static void error_cases(int have_ptx) {
    dswa_aot_info in;
    memset(&in, 0x5a, sizeof in);
    expect_fail(dswa_aot_kernel("sm_75", DSWA_F32, DSWA_MATH_DEFAULT, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "arch sm_75", "sm_80, sm_86, sm_89, sm_90, sm_100, sm_120");
    expect_fail(dswa_aot_kernel("sm_90a", DSWA_F32, DSWA_MATH_DEFAULT, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "arch sm_90a", "sm_90");
    expect_fail(dswa_aot_kernel("gfx90a", DSWA_F16, DSWA_MATH_DEFAULT, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "arch gfx90a", "sm_120");
    expect_fail(dswa_aot_kernel(NULL, DSWA_F16, DSWA_MATH_DEFAULT, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "arch NULL",
                "sm_80");
    expect_fail(dswa_aot_kernel("sm_90", (dswa_dtype)7, DSWA_MATH_DEFAULT, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "dtype 7", "bf16");
    expect_fail(dswa_aot_kernel("sm_90", DSWA_F32, (dswa_math)9, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "math 9",
                "fp32");
#ifdef DSWA_HAVE_CUDA /* (without CUDA every export says so first) */
    expect_fail(dswa_aot_kernel("sm_90", DSWA_F32, DSWA_MATH_FP32, &in), DSWA_ERR_UNSUPPORTED, &in, "math fp32",
                "fp32");
#endif
    expect_fail(dswa_aot_kernel_window("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, 3, -1, &in), DSWA_ERR_INVALID_ARGUMENT,
                &in, "windows 3/-1", "window");
    expect_fail(dswa_aot_kernel("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, NULL), DSWA_ERR_INVALID_ARGUMENT, NULL,
                "out NULL", "NULL");
    expect_fail(dswa_aot_kernel_for("sm_90", NULL, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "problem NULL", "NULL");
    expect_fail(dswa_aot_set_ptx_isa(&in, "7.8"), DSWA_ERR_INVALID_ARGUMENT, NULL, "set_ptx_isa on an empty info",
                NULL);
    dswa_aot_info_free(&in); /* harmless on a zeroed info */
    dswa_aot_info_free(NULL);

    dswa_problem p;
#ifdef DSWA_HAVE_CUDA
    p = dswa_problem_default(2, 300, 4, 64, 40);
    p.math = DSWA_MATH_FP32; /* window 40 + 40 > 48: only the wide kernel, which has no fp32 math */
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_UNSUPPORTED, &in, "problem with math fp32, wide window", "fp32");
    /* math fp32 with a band window exports the fp32-accurate band entry */
    {
        dswa_aot_info fi;
        const dswa_status fs = dswa_aot_kernel_window("sm_90", DSWA_F32, DSWA_MATH_FP32, 17, 17, &fi);
        CHECK(fs == DSWA_OK, "fp32 band export: %s", dswa_last_error());
        if (fs == DSWA_OK) {
            CHECK(!strcmp(fi.kernel_name, "dswa_fwd_f32_fp32"), "fp32 band export is %s", fi.kernel_name);
            CHECK(strstr(fi.ptx, ".entry dswa_fwd_f32_fp32") != NULL, "fp32 band PTX lacks its entry");
            dswa_aot_info_free(&fi);
        }
    }
#endif
#ifdef DSWA_HAVE_CUDA
    /* strides above int32 are refused (TensorRT's extras are int32) ... */
    p = dswa_problem_default(2, 300, 4, 64, 17);
    p.q.batch = (int64_t)1 << 33;
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_UNSUPPORTED, &in, "q.batch above int32", "q.batch");
#endif
    p = dswa_problem_default(2, 300, 4, 64, 17);
    p.batch = 0;
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "empty problem", "batch");
    p = dswa_problem_default(2, 300, 4, 64, 17);
    p.window_left = -2;
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "negative window",
                "window_left");
    if (!have_ptx) return;
    p = dswa_problem_default(2, 300, 4, 32, 17);
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_UNSUPPORTED, &in, "head_dim 32", "head_dim");
    p = dswa_problem_default(2, 300, 4, 64, 17);
    p.dtype = DSWA_F16;
    p.q.seq += 4; /* not a multiple of 8 f16 elements: no 16-byte rows */
    p.q.batch = p.q.seq * 300;
    expect_fail(dswa_aot_kernel_for("sm_90", &p, &in), DSWA_ERR_MISALIGNED, &in, "misaligned q.seq", "q.seq");

    /* --ptx-isa */
    dswa_status s = dswa_aot_kernel("sm_90", DSWA_BF16, DSWA_MATH_DEFAULT, &in);
    CHECK(s == DSWA_OK, "sm_90 bf16: %s", dswa_last_error());
    if (s != DSWA_OK) return;
    expect_fail(dswa_aot_set_ptx_isa(&in, "7.7"), DSWA_ERR_INVALID_ARGUMENT, NULL, "ptx_isa 7.7 on sm_90", "sm_90");
    expect_fail(dswa_aot_set_ptx_isa(&in, "9.1"), DSWA_ERR_INVALID_ARGUMENT, NULL, "ptx_isa 9.1", "9.0");
    expect_fail(dswa_aot_set_ptx_isa(&in, "8"), DSWA_ERR_INVALID_ARGUMENT, NULL, "ptx_isa '8'", "X.Y");
    expect_fail(dswa_aot_set_ptx_isa(&in, "8.0x"), DSWA_ERR_INVALID_ARGUMENT, NULL, "ptx_isa '8.0x'", "X.Y");
    expect_fail(dswa_aot_set_ptx_isa(&in, NULL), DSWA_ERR_INVALID_ARGUMENT, NULL, "ptx_isa NULL", NULL);
    char buf[64];
    CHECK(directive(in.ptx, ".version", buf, sizeof buf) && !strcmp(buf, ".version 7.8"),
          "a refused --ptx-isa changed the module: %s", buf);
    const char *isas[] = {"8.0", "8.5", "9.0", "7.8"};
    for (int i = 0; i < 4; i++) {
        s = dswa_aot_set_ptx_isa(&in, isas[i]);
        char want[32];
        snprintf(want, sizeof want, ".version %s", isas[i]);
        CHECK(s == DSWA_OK && directive(in.ptx, ".version", buf, sizeof buf) && !strcmp(buf, want) &&
              in.ptx_size == strlen(in.ptx) && count_substr(in.ptx, ".version") == 1,
              "set_ptx_isa %s: %s; module says '%s'", isas[i], dswa_last_error(), buf);
        if (ptxas && s == DSWA_OK && i == 0) {
            int rc = ptx_fit_ptxas_assemble(ptxas, in.ptx, in.ptx_size, "sm_90", NULL);
            CHECK(rc == 0, "ptxas refused sm_90 bf16 at .version 8.0 (exit %d)", rc);
        }
    }
    /* the strings that live beside the module moved with it */
    CHECK(in.target && !strcmp(in.target, "sm_90") && in.ptx_isa_min_reason && strstr(in.ptx_isa_min_reason, "PTX ISA") &&
          in.params[4].expr && in.params[4].expr == in.params[4].expr_shared_v && strstr(in.params[4].expr, "N - 1"),
          "after set_ptx_isa: target %s, reason %s, wl formula %s", in.target ? in.target : "NULL",
          in.ptx_isa_min_reason ? in.ptx_isa_min_reason : "NULL", in.params[4].expr ? in.params[4].expr : "NULL");
    dswa_aot_info_free(&in);
    CHECK(in.ptx == NULL && in.target == NULL && in.ptx_isa_min_reason == NULL, "dswa_aot_info_free left pointers behind");
}

/* ---- the fused SAME-L kernel ---------------------------------------------------------------- */

static const char *const samel_band_names[4] = {"dswa_samel_f32_tf32", "dswa_samel_f32_fp32", "dswa_samel_f16",
                                                "dswa_samel_bf16"};
static const char *const samel_scalar_names[3] = {"dswa_samel_scalar_f32", "dswa_samel_scalar_f16",
                                                  "dswa_samel_scalar_bf16"};

/* The kernel the fused block must get, by the rule dswa.h states: the band kernel when the
   clamped windows span at most 48 and rot_dims falls on whole 16-byte chunks of one phase (a
   multiple of 16 for f16 and bf16; of 8 up to 32 for f32), else the scalar one. */
static const char *samel_expected(dswa_dtype dt, dswa_math m, int32_t wl, int32_t wr, int32_t rot) {
    const int rot_ok = dt == DSWA_F32 ? rot % 8 == 0 && rot <= 32 : rot % 16 == 0;
    if (wl >= 0 && wr >= 0 && wl + wr <= 48 && rot_ok)
        return samel_band_names[dt == DSWA_F32 ? (m == DSWA_MATH_FP32 ? 1 : 0) : dt + 1];
    return samel_scalar_names[dt];
}

static expect samel_expect(dswa_dtype dt, dswa_math m, int32_t wl, int32_t wr, int32_t rot) {
    const char *k = samel_expected(dt, m, wl, wr, rot);
    const int band = !strncmp(k, "dswa_samel_scalar", 17) ? 0 : 1;
    const dswa_math math = !band || dt != DSWA_F32 ? DSWA_MATH_DEFAULT : m == DSWA_MATH_FP32 ? DSWA_MATH_FP32
                                                                                         : DSWA_MATH_TF32;
    expect e = {k, band ? "band" : "scalar", "samel", dt, math, band ? 48 : -1, rot, 5, 48, samel_order, band,
                dt == DSWA_BF16};
    return e;
}

/* Every architecture, dtype, math and family: the band kernel for SAME-L's windows, the scalar
   one for any window. */
static void samel_exports(void) {
    static const struct { dswa_dtype dt; dswa_math m; int32_t w; } kinds[] = {
        {DSWA_F32, DSWA_MATH_DEFAULT, 17}, {DSWA_F32, DSWA_MATH_FP32, 17}, {DSWA_F16, DSWA_MATH_DEFAULT, 17},
        {DSWA_BF16, DSWA_MATH_DEFAULT, 17}, {DSWA_F32, DSWA_MATH_TF32, -1}, {DSWA_F16, DSWA_MATH_DEFAULT, -1},
        {DSWA_BF16, DSWA_MATH_DEFAULT, -1},
    };
    for (int ai = 0; ai < N_ARCHS; ai++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            dswa_aot_info in;
            const dswa_status s = dswa_aot_samel_kernel(archs[ai].arch, kinds[k].dt, kinds[k].m, kinds[k].w,
                                                        kinds[k].w, 32, &in);
            CHECK(s == DSWA_OK, "samel %s %s W=%d: %s: %s", archs[ai].arch, dswa_dtype_name(kinds[k].dt), kinds[k].w,
                  dswa_status_string(s), dswa_last_error());
            if (s != DSWA_OK) continue;
            const expect e = samel_expect(kinds[k].dt, kinds[k].m, kinds[k].w, kinds[k].w, 32);
            check_export(&in, ai, &e);
            CHECK(in.window_left == kinds[k].w && in.window_right == kinds[k].w, "samel %s: windows %d/%d",
                  e.kernel, in.window_left, in.window_right);
            if (kinds[k].dt == DSWA_BF16)
                printf("%s: samel %s: PTX ISA %d.%d, %u B shared, %zu bytes of PTX\n", archs[ai].arch, e.family,
                       in.ptx_isa_major, in.ptx_isa_minor, in.shared_bytes, in.ptx_size);
            dswa_aot_info_free(&in);
        }
    /* the pick at the band's edges (window span, rot_dims per dtype), against the rule and against
       dswa_samel_kernel_name for a long sequence; metadata only (these modules are assembled above) */
    static const struct { dswa_dtype dt; dswa_math m; int32_t wl, wr, rot; } picks[] = {
        {DSWA_F16, DSWA_MATH_DEFAULT, 17, 17, 16}, {DSWA_F16, DSWA_MATH_DEFAULT, 17, 17, 8},
        {DSWA_F16, DSWA_MATH_DEFAULT, 17, 17, 64}, {DSWA_BF16, DSWA_MATH_DEFAULT, 24, 24, 0},
        {DSWA_BF16, DSWA_MATH_DEFAULT, 24, 25, 32}, {DSWA_F32, DSWA_MATH_DEFAULT, 17, 17, 8},
        {DSWA_F32, DSWA_MATH_TF32, 17, 17, 48}, {DSWA_F32, DSWA_MATH_FP32, 0, 48, 24},
        {DSWA_F32, DSWA_MATH_FP32, 40, 40, 32}, {DSWA_F32, DSWA_MATH_DEFAULT, 17, 17, 2},
    };
    for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++) {
        dswa_aot_info in;
        const dswa_status s = dswa_aot_samel_kernel("sm_90", picks[k].dt, picks[k].m, picks[k].wl, picks[k].wr,
                                                    picks[k].rot, &in);
        const char *want = samel_expected(picks[k].dt, picks[k].m, picks[k].wl, picks[k].wr, picks[k].rot);
        dswa_samel_problem p = dswa_samel_problem_default(1, 4096, 1);
        p.dtype = picks[k].dt;
        p.math = picks[k].m;
        p.window_left = picks[k].wl;
        p.window_right = picks[k].wr;
        p.rot_dims = picks[k].rot;
        const char *lib = dswa_samel_kernel_name(&p);
        char exprbuf[16];
        snprintf(exprbuf, sizeof exprbuf, "%d", (int)picks[k].rot);
        CHECK(s == DSWA_OK && !strcmp(in.kernel_name, want) && lib && !strcmp(lib, want) &&
              in.rot_dims == picks[k].rot && !strcmp(in.params[17].expr, exprbuf),
              "samel pick %s %s W=%d/%d rot %d: export %s (%s), dswa_samel_kernel_name %s, expected %s; rot_dims "
              "formula '%s'", dswa_dtype_name(picks[k].dt), dswa_math_name(picks[k].m), picks[k].wl, picks[k].wr,
              picks[k].rot, s == DSWA_OK ? in.kernel_name : dswa_status_string(s), dswa_last_error(),
              lib ? lib : "NULL", want, s == DSWA_OK ? in.params[17].expr : "");
        if (s == DSWA_OK) dswa_aot_info_free(&in);
    }
}

/* dswa_aot_samel_kernel_for: kernel choice, each extra's value against the problem's own fields
   (strides, clamped windows, float bits), and for contiguous tensors the formulas, evaluated,
   against the same values (those of a window-free export too). */
static void check_samel_for(const char *arch, const dswa_samel_problem *p, int contiguous) {
    char name[160];
    snprintf(name, sizeof name, "samel_kernel_for %s %s B=%d N=%d H=%d W=%d/%d rot %d pos %d%s", arch,
             dswa_dtype_name(p->dtype), p->batch, p->seq_len, p->heads, p->window_left, p->window_right, p->rot_dims,
             p->pos_offset, contiguous ? "" : " strided");
    dswa_aot_info in;
    const dswa_status s = dswa_aot_samel_kernel_for(arch, p, &in);
    CHECK(s == DSWA_OK, "%s: %s: %s", name, dswa_status_string(s), dswa_last_error());
    if (s != DSWA_OK) return;
    const int64_t N = p->seq_len;
    const int32_t cwl = p->window_left < N ? p->window_left : (int32_t)N - 1;
    const int32_t cwr = p->window_right < N ? p->window_right : (int32_t)N - 1;
    const char *want = samel_expected(p->dtype, p->math, cwl, cwr, p->rot_dims);
    const char *lib = dswa_samel_kernel_name(p);
    CHECK(!strcmp(in.kernel_name, want) && lib && !strcmp(lib, want) && in.has_problem && !strcmp(in.op, "samel") &&
          in.rot_dims == p->rot_dims && in.n_params == 54,
          "%s: kernel %s (dswa_samel_kernel_name: %s), expected %s; op %s rot_dims %d", name, in.kernel_name,
          lib ? lib : "NULL", want, in.op, (int)in.rot_dims);
    int64_t vals[48] = {N, cwl, cwr, bits_of(p->scale), bits_of(p->lambda), p->qkv.batch, p->qkv.seq,
                        p->qkv.chunk, p->qkv.head, p->out.batch, p->out.seq, p->out.head, p->rot_dims};
    float freq[32];
    samel_freqs(p, freq);
    for (int j = 0; j < 32; j++) vals[13 + j] = bits_of(freq[j]);
    vals[45] = p->pos_offset;
    vals[46] = bits_of(p->q_norm.alpha);
    vals[47] = bits_of(p->k_norm.alpha);
    dswa_aot_info any;
    const int have_any = contiguous && dswa_aot_samel_kernel(arch, p->dtype, p->math, -1, -1, p->rot_dims, &any) == DSWA_OK;
    CHECK(!contiguous || have_any, "%s: the window-free export: %s", name, dswa_last_error());
    for (int i = 0; i < 48 && in.n_params == 54; i++) {
        const dswa_aot_param *q = &in.params[5 + i];
        CHECK(q->kind == DSWA_AOT_EXTRA && q->value == vals[i], "%s: %s = %d, expected %lld", name, q->name,
              (int)q->value, (long long)vals[i]);
        if (!contiguous) continue;
        int err = 0;
        const int64_t x = eval_samel(q->expr, p, &err);
        CHECK(!err && x == vals[i] && q->expr_shared_v && !strcmp(q->expr_shared_v, q->expr),
              "%s: %s: formula '%s' gives %lld%s, expected %lld", name, q->name, q->expr, (long long)x,
              err ? " (does not parse)" : "", (long long)vals[i]);
        if (!have_any) continue;
        const int64_t y = eval_samel(any.params[5 + i].expr, p, &err);
        CHECK(!err && y == vals[i], "%s: window-free %s: formula '%s' gives %lld, expected %lld", name,
              any.params[5 + i].name, any.params[5 + i].expr, (long long)y, (long long)vals[i]);
    }
    if (have_any) dswa_aot_info_free(&any);
    const int64_t gwant[3] = {(N + 63) / 64, p->heads, p->batch}; /* one block per 64 queries */
    for (int d = 0; d < 3; d++) {
        int err = 0;
        const int64_t x = eval_samel(in.grid[d], p, &err);
        CHECK(!err && x == gwant[d] && in.grid_dims[d] == (unsigned)gwant[d], "%s: grid[%d] = %u, formula '%s' gives "
              "%lld, expected %lld", name, d, in.grid_dims[d], in.grid[d], (long long)x, (long long)gwant[d]);
    }
    dswa_aot_info_free(&in);
}

static void samel_for_cases(void) {
    dswa_samel_problem p = dswa_samel_problem_default(3, 1000, 24);
    p.dtype = DSWA_BF16;
    check_samel_for("sm_90", &p, 1); /* SAME-L */
    p.pos_offset = 4096;
    p.q_norm.alpha = 0.7f;
    p.k_norm.alpha = -1.25f;
    check_samel_for("sm_80", &p, 1);
    p = dswa_samel_problem_default(1, 1000, 3);
    p.window_left = 40, p.window_right = 25; /* span 65: scalar */
    p.scale = 0.3f, p.lambda = -0.5f, p.rot_dims = 16, p.rope_base = 500.0f, p.pos_offset = 12345;
    check_samel_for("sm_86", &p, 1);
    p.math = DSWA_MATH_FP32;
    p.window_left = 0, p.window_right = 48, p.rot_dims = 24; /* fp32-accurate band */
    check_samel_for("sm_89", &p, 1);
    /* the model's own frequencies (a 16-bit model's inv_freq, or any finite values) */
    float own[32];
    for (int j = 0; j < 32; j++) own[j] = (float)(j % 3 ? 1.0 / (j + 1) : -0.25 * j) + 1e-3f * (float)j;
    p.rope_freq = own;
    check_samel_for("sm_89", &p, 1);
    p.rot_dims = 64, p.math = DSWA_MATH_DEFAULT;
    check_samel_for("sm_90", &p, 1);
    p.rope_freq = NULL;
    p = dswa_samel_problem_default(2, 20, 2);
    p.dtype = DSWA_F16, p.window_left = p.window_right = 30; /* clamped 19 + 19: band */
    check_samel_for("sm_100", &p, 1);
    p = dswa_samel_problem_default(2, 70, 2);
    p.dtype = DSWA_F16, p.window_left = p.window_right = 300; /* clamped 69 + 69: scalar */
    check_samel_for("sm_120", &p, 1);
    p = dswa_samel_problem_default(2, 300, 4);
    p.dtype = DSWA_F16, p.rot_dims = 8; /* not on whole f16 chunks: scalar */
    check_samel_for("sm_90", &p, 1);
    p = dswa_samel_problem_default(1, 1, 1);
    p.dtype = DSWA_BF16; /* N = 1: windows clamped to 0 */
    check_samel_for("sm_90", &p, 1);
    /* strided: each row padded, the output's rows padded; then chunk-major (B, 5, N, H, D) */
    p = dswa_samel_problem_default(2, 777, 4);
    p.dtype = DSWA_BF16;
    p.qkv.seq = 5 * 4 * 64 + 64;
    p.qkv.batch = 777 * p.qkv.seq + 128;
    p.out.seq = 4 * 64 + 32;
    p.out.batch = 777 * p.out.seq;
    p.pos_offset = 99;
    check_samel_for("sm_90", &p, 0);
    p = dswa_samel_problem_default(3, 130, 2);
    p.qkv.chunk = 130 * 2 * 64;
    p.qkv.seq = 2 * 64;
    p.qkv.batch = 5 * p.qkv.chunk;
    p.window_left = 3, p.window_right = 60;
    check_samel_for("sm_90", &p, 0);
}

/* The refusals of both samel exports, each naming its field; the info is zeroed after each. */
static void samel_error_cases(int have_ptx) {
    dswa_aot_info in;
    memset(&in, 0x5a, sizeof in);
    expect_fail(dswa_aot_samel_kernel("sm_75", DSWA_BF16, DSWA_MATH_DEFAULT, 17, 17, 32, &in), DSWA_ERR_INVALID_ARGUMENT,
                &in, "samel arch sm_75", "sm_80, sm_86, sm_89, sm_90, sm_100, sm_120");
    expect_fail(dswa_aot_samel_kernel("sm_90a", DSWA_BF16, DSWA_MATH_DEFAULT, 17, 17, 32, &in), DSWA_ERR_INVALID_ARGUMENT,
                &in, "samel arch sm_90a", "sm_90");
    expect_fail(dswa_aot_samel_kernel("sm_90", (dswa_dtype)7, DSWA_MATH_DEFAULT, 17, 17, 32, &in),
                DSWA_ERR_INVALID_ARGUMENT, &in, "samel dtype 7", "dtype");
    expect_fail(dswa_aot_samel_kernel("sm_90", DSWA_F32, (dswa_math)9, 17, 17, 32, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "samel math 9", "math");
    expect_fail(dswa_aot_samel_kernel("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, 17, -1, 32, &in), DSWA_ERR_INVALID_ARGUMENT,
                &in, "samel windows 17/-1", "window_right");
    static const int32_t bad_rot[] = {7, -2, 66, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_rot / sizeof bad_rot[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "samel rot_dims %d", (int)bad_rot[i]);
        expect_fail(dswa_aot_samel_kernel("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, 17, 17, bad_rot[i], &in),
                    DSWA_ERR_INVALID_ARGUMENT, &in, what, "rot_dims");
    }
    expect_fail(dswa_aot_samel_kernel("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, 17, 17, 32, NULL), DSWA_ERR_INVALID_ARGUMENT,
                NULL, "samel out NULL", "out");
    expect_fail(dswa_aot_samel_kernel_for("sm_90", NULL, &in), DSWA_ERR_INVALID_ARGUMENT, &in, "samel problem NULL",
                "dswa_samel_problem");
    expect_fail(dswa_aot_samel_kernel_for("sm_9", &(dswa_samel_problem){0}, &in), DSWA_ERR_INVALID_ARGUMENT, &in,
                "samel_for arch sm_9", "sm_9");
    /* problems dswa_samel_validate refuses, each naming its field (gamma and beta NULL: the
       export puts stand-ins there) */
    static const struct { const char *field; } fields[] = {
        {"batch"}, {"window_left"}, {"rot_dims"}, {"rope_base"}, {"pos_offset"}, {"q_norm.alpha"}, {"qkv.head"},
        {"scale"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        dswa_samel_problem p = dswa_samel_problem_default(2, 300, 4);
        const char *f = fields[i].field;
        if (!strcmp(f, "batch")) p.batch = 0;
        else if (!strcmp(f, "window_left")) p.window_left = -2;
        else if (!strcmp(f, "rot_dims")) p.rot_dims = 31;
        else if (!strcmp(f, "rope_base")) p.rope_base = 0.0f;
        else if (!strcmp(f, "pos_offset")) p.pos_offset = -1;
        else if (!strcmp(f, "q_norm.alpha")) p.q_norm.alpha = NAN;
        else if (!strcmp(f, "qkv.head")) p.qkv.head = -64;
        else p.scale = INFINITY;
        char what[64];
        snprintf(what, sizeof what, "samel_for: bad %s", f);
        expect_fail(dswa_aot_samel_kernel_for("sm_90", &p, &in), DSWA_ERR_INVALID_ARGUMENT, &in, what, f);
    }
    if (!have_ptx) return;
    /* what the CUDA kernels need beyond validation (dswa_cuda_samel_kargs) */
    dswa_samel_problem p = dswa_samel_problem_default(2, 300, 4);
    p.head_dim = 32;
    p.rot_dims = 16;
    p.qkv = (dswa_samel_layout){300 * 5 * 4 * 32, 5 * 4 * 32, 4 * 32, 32, 1};
    p.out = (dswa_layout){300 * 4 * 32, 4 * 32, 0, 32, 1};
    expect_fail(dswa_aot_samel_kernel_for("sm_90", &p, &in), DSWA_ERR_UNSUPPORTED, &in, "samel head_dim 32", "head_dim");
    p = dswa_samel_problem_default(2, 300, 4);
    p.dtype = DSWA_F16;
    p.qkv.seq += 4; /* not a multiple of 8 f16 elements: no 16-byte rows */
    p.qkv.batch = p.qkv.seq * 300;
    expect_fail(dswa_aot_samel_kernel_for("sm_90", &p, &in), DSWA_ERR_MISALIGNED, &in, "samel misaligned qkv.seq",
                "qkv.seq");
    p = dswa_samel_problem_default(2, 300, 4);
    p.qkv.batch = (int64_t)1 << 33;
    expect_fail(dswa_aot_samel_kernel_for("sm_90", &p, &in), DSWA_ERR_UNSUPPORTED, &in, "samel qkv.batch above int32",
                "qkv.batch");
    /* --ptx-isa on a samel export: the module and the strings beside it (target, reason, the
       formulas with this export's numbers) move together */
    dswa_status s = dswa_aot_samel_kernel("sm_90", DSWA_BF16, DSWA_MATH_DEFAULT, 17, 17, 32, &in);
    CHECK(s == DSWA_OK, "samel sm_90 bf16: %s", dswa_last_error());
    if (s != DSWA_OK) return;
    expect_fail(dswa_aot_set_ptx_isa(&in, "7.7"), DSWA_ERR_INVALID_ARGUMENT, NULL, "samel ptx_isa 7.7 on sm_90", "sm_90");
    s = dswa_aot_set_ptx_isa(&in, "8.0");
    char buf[64];
    CHECK(s == DSWA_OK && directive(in.ptx, ".version", buf, sizeof buf) && !strcmp(buf, ".version 8.0") &&
          in.ptx_size == strlen(in.ptx) && !strcmp(in.op, "samel") && in.rot_dims == 32 && !strcmp(in.target, "sm_90") &&
          strstr(in.ptx_isa_min_reason, "PTX ISA") && !strcmp(in.params[6].expr, "min(17, N - 1)") &&
          !strcmp(in.params[7].expr_shared_v, "min(17, N - 1)") && !strcmp(in.params[17].expr, "32") &&
          !strcmp(in.params[50].expr, "POS"), "samel set_ptx_isa 8.0: %s; module '%s', wl '%s', rot_dims '%s'",
          dswa_last_error(), buf, in.params[6].expr, in.params[17].expr);
    if (s == DSWA_OK && ptxas)
        CHECK(ptx_fit_ptxas_assemble(ptxas, in.ptx, in.ptx_size, "sm_90", NULL) == 0,
              "ptxas refused samel sm_90 bf16 at .version 8.0");
    dswa_aot_info_free(&in);
}

/* dswa_aot_isa_required on modules of its own: instruction features raise the minimum, text in
   comments and inside identifiers does not. */
static void feature_cases(void) {
    static const struct { const char *body; int sm, major, minor; const char *what; } cases[] = {
        {"\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1}, {%r1}, {%r2}, {%f1};\n", 80, 7, 0, NULL},
        {"\tstmatrix.sync.aligned.m8n8.x4.shared.b16 [%r1], {%r2, %r3, %r4, %r5};\n", 80, 7, 8, "stmatrix"},
        {"\t// stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r1], {%r2, %r3, %r4, %r5};\n", 80, 7, 0, NULL},
        {"\tmov.u32 %r1, mapa_table;\n", 86, 7, 1, NULL},
        {"\t@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r2];\n", 90, 8, 0,
         "cp.async.bulk"},
        {"\tld.global.b128 %rq1, [%rd1];\n", 90, 8, 3, ".b128"},
        {"\tld.global.L2::128B.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n", 80, 7, 4, "L2::128B"},
        {"\tld.global.L2::128B.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n", 100, 8, 6, NULL},
        {"\tcvt.f32.bf16 %f1, %rs1;\n", 80, 7, 1, "cvt.f32.bf16"},
        {"\tcvt.f32.bf16 %f1, %rs1;\n", 120, 8, 7, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ptx[1024];
        snprintf(ptx, sizeof ptx, ".version 9.0\n.target sm_%d\n.address_size 64\n\n.visible .entry k()\n{\n%s\tret;\n}\n",
                 cases[i].sm, cases[i].body);
        int mj = -1, mn = -1;
        const char *what = NULL;
        const int rc = dswa_aot_isa_required(ptx, cases[i].sm, &mj, &mn, &what);
        CHECK(rc == 0 && mj == cases[i].major && mn == cases[i].minor &&
              ((what == NULL && cases[i].what == NULL) || (what && cases[i].what && !strcmp(what, cases[i].what))),
              "feature case %zu (sm_%d): %d.%d by %s, expected %d.%d by %s", i, cases[i].sm, mj, mn,
              what ? what : "the target", cases[i].major, cases[i].minor, cases[i].what ? cases[i].what : "the target");
    }
    int mj, mn;
    CHECK(dswa_aot_isa_required(".version 9.0\n", 75, &mj, &mn, NULL) == -1, "sm_75 accepted by dswa_aot_isa_required");
}

/* dswa_ptx_isa_for_target against the PTX ISA release notes (the version that introduced each
   target), for exported targets and ptx-fit's older and newer ones; unknown targets are -1 and
   leave the outputs alone. Needs no CUDA. */
static void target_cases(void) {
    static const struct { int sm, major, minor; } known[] = {
        {70, 6, 0}, {75, 6, 3}, {80, 7, 0}, {87, 7, 4}, {90, 7, 8}, {101, 8, 6}, {103, 8, 8}, {110, 9, 0}, {120, 8, 7}, {121, 8, 8},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        int mj = -1, mn = -1;
        const int rc = dswa_ptx_isa_for_target(known[i].sm, &mj, &mn);
        CHECK(rc == 0 && mj == known[i].major && mn == known[i].minor, "dswa_ptx_isa_for_target(%d): %d, %d.%d, expected %d.%d",
              known[i].sm, rc, mj, mn, known[i].major, known[i].minor);
    }
    for (int ai = 0; ai < N_ARCHS; ai++) { /* the exporter's targets, as check_export expects them */
        int mj = -1, mn = -1;
        const int rc = dswa_ptx_isa_for_target(archs[ai].sm, &mj, &mn);
        CHECK(rc == 0 && mj == archs[ai].major && mn == archs[ai].minor, "dswa_ptx_isa_for_target(%d): %d, %d.%d, expected %d.%d",
              archs[ai].sm, rc, mj, mn, archs[ai].major, archs[ai].minor);
    }
    static const int unknown[] = {-90, 0, 9, 60, 91, 99, 130, 900, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        int mj = -7, mn = -7;
        const int rc = dswa_ptx_isa_for_target(unknown[i], &mj, &mn);
        CHECK(rc == -1 && mj == -7 && mn == -7, "dswa_ptx_isa_for_target(%d): %d, %d.%d, expected -1 and untouched",
              unknown[i], rc, mj, mn);
    }
    int mj = -1;
    const int rc1 = dswa_ptx_isa_for_target(89, &mj, NULL), rc2 = dswa_ptx_isa_for_target(89, NULL, NULL);
    CHECK(rc1 == 0 && mj == 7 && rc2 == 0, "dswa_ptx_isa_for_target(89) with NULL outputs: %d (major %d), %d", rc1, mj, rc2);
}

int main(void) {
    target_cases();
    feature_cases();
    dswa_aot_info probe;
    const dswa_status ps = dswa_aot_kernel("sm_90", DSWA_F16, DSWA_MATH_DEFAULT, &probe);
    char pmsg[512];
    snprintf(pmsg, sizeof pmsg, "%s", dswa_last_error());
    const int have_ptx = ps == DSWA_OK;
    ptxas = ptx_fit_ptxas_find(); /* (before the refusals: they assemble a module at another .version) */
    error_cases(have_ptx);
    samel_error_cases(have_ptx);
    if (!have_ptx) {
        CHECK(ps == DSWA_ERR_UNSUPPORTED, "sm_90 f16: %s: %s", dswa_status_string(ps), pmsg);
        printf("dswa_aot_kernel: %s: %s\n", dswa_status_string(ps), pmsg);
        if (tu_summary("test_aot")) return 1;
        tu_skip("the build has no embedded PTX (no nvcc at build time); only the refusals were checked");
    }
    dswa_aot_info_free(&probe);

    for (int ai = 0; ai < N_ARCHS; ai++) {
        for (int band = 0; band < 2; band++)
            for (int t = 0; t < 3; t++) {
                const dswa_dtype dt = (dswa_dtype)t;
                dswa_aot_info in;
                /* the wide kernel by default; the band kernel for SAME-L's window (17 + 17 <= 48) */
                const dswa_status s = band ? dswa_aot_kernel_window(archs[ai].arch, dt, DSWA_MATH_DEFAULT, 17, 17, &in)
                                           : dswa_aot_kernel(archs[ai].arch, dt, t == 0 ? DSWA_MATH_TF32 : DSWA_MATH_DEFAULT, &in);
                CHECK(s == DSWA_OK, "%s %s %s: %s: %s", archs[ai].arch, dswa_dtype_name(dt), band ? "band" : "wide",
                      dswa_status_string(s), dswa_last_error());
                if (s != DSWA_OK) continue;
                const expect e = op_expect(dt, band);
                check_export(&in, ai, &e);
                if (t == 2)
                    printf("%s: %s: PTX ISA %d.%d (%s), %u B shared, grid (%s, %s, %s), %zu bytes of PTX\n",
                           archs[ai].arch, band ? "band" : "wide", in.ptx_isa_major, in.ptx_isa_minor,
                           in.ptx_isa_min_reason, in.shared_bytes, in.grid[0], in.grid[1], in.grid[2], in.ptx_size);
                dswa_aot_info_free(&in);
            }
    }
    /* windows around the band/wide boundary, clamping, both V layouts, batch strides */
    check_for("sm_90", DSWA_BF16, 3, 1000, 24, 17, 17, 0, 0.125f, 1.0f);
    check_for("sm_90", DSWA_BF16, 3, 1000, 24, 17, 17, 1, 0.125f, 1.0f);
    check_for("sm_80", DSWA_F32, 1, 1000, 3, 24, 24, 0, 0.3f, 0.8f);
    check_for("sm_80", DSWA_F32, 1, 1000, 3, 24, 25, 1, 0.3f, -0.5f);
    check_for("sm_120", DSWA_F16, 3, 4096, 2, 0, 0, 0, 1.0f, 0.0f);
    check_for("sm_100", DSWA_F16, 2, 70, 2, 300, 300, 1, 0.125f, 1.0f); /* clamped 69 + 69: wide */
    check_for("sm_89", DSWA_F16, 2, 20, 2, 30, 30, 0, 0.125f, 1.0f);    /* clamped 19 + 19: band */
    check_for("sm_86", DSWA_BF16, 5, 1, 1, 0, 7, 0, 0.125f, 1.0f);
    check_for("sm_90", DSWA_F32, 2, 64 * 7 + 1, 5, 40, 25, 1, 0.125f, 1.0f);
    samel_exports();
    samel_for_cases();

    if (ptxas) assemble_all();
    if (ptxas)
        printf("ptxas (%s) assembled %d exports; %d copies one PTX ISA version below the claim were refused\n",
               ptxas, assembled, refused_below);
    else
        printf("skipped: assembling with ptxas (none on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin); the other "
               "checks ran\n");
    free(ptxas);
    TEST_MAIN_RETURN("test_aot");
}
