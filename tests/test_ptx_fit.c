/* test_ptx_fit — `dswa ptx-fit`'s engine (tools/ptx_fit/) on PTX in the shape Triton emits:
   real Triton 3.9 output and hand-made fixtures in tests/fixtures/ (see their headers), plus
   small inline modules for single features. Covers the fit itself (trailing scratch pointers
   removed, .align raised, plain target, report), the refusals (a removed parameter is read,
   a parameter's address is taken or read past, an instruction needs sm_XXa or a newer GPU
   than the target, .version too low), the errors (no entry, several entries, not text, not
   PTX, K too large, malformed), the input cap, and assembles every fitted result with ptxas when one is
   found (that part is skipped, and says so, without it). Fuzzing regressions in
   tests/fixtures/fuzz-*.ptx must come through without a crash.
   Fixtures are found next to this source file (DSWA_FIXTURES in the environment overrides),
   so the test runs from the repository root as `make test` does. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dswa.h"
#include "ptx_fit/ptx_fit.h"

static int failures, checks;
static char *ptxas; /* NULL: assembling is skipped */
static int assembled, assemble_skipped;

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "CHECK(%s) failed at %s:%d: ", #cond, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

static char fixtures[4096];

static void find_fixtures(void) {
    const char *env = getenv("DSWA_FIXTURES");
    if (env && *env) {
        snprintf(fixtures, sizeof fixtures, "%s", env);
        return;
    }
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    if (slash)
        snprintf(fixtures, sizeof fixtures, "%.*sfixtures", (int)(slash - file + 1), file);
    else
        snprintf(fixtures, sizeof fixtures, "fixtures");
}

static char *slurp(const char *name, size_t *len) {
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", fixtures, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr,
                "cannot open fixture %s (run from the repository root, or set "
                "DSWA_FIXTURES)\n",
                path);
        exit(1);
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n < cap) break;
        cap *= 2;
        b = realloc(b, cap + 1);
    }
    fclose(f);
    b[n] = '\0';
    *len = n;
    return b;
}

/* 1-based line of the first occurrence of `needle` in text, 0 when absent. */
static int line_of(const char *text, const char *needle) {
    const char *p = strstr(text, needle);
    if (!p) return 0;
    int line = 1;
    for (const char *q = text; q < p; q++) line += *q == '\n';
    return line;
}

static ptx_fit_status fit(const char *text, size_t len, int keep, const char *entry,
                               const char *arch, int align, ptx_fit_result *r) {
    ptx_fit_opts o = {keep, entry, arch, align};
    return ptx_fit(text, len, &o, r);
}

/* Assembles a fitted result for its target; counts a skip when there is no ptxas. */
static int assemble_q(const ptx_fit_result *r, const char *what, int expect_ok) {
    if (!ptxas) {
        assemble_skipped++;
        return 0;
    }
    char *msg = NULL;
    int rc = ptx_fit_ptxas_assemble(ptxas, r->text, r->len, r->target_after, &msg);
    if (rc == 0) assembled++;
    if ((rc == 0) != expect_ok)
        fprintf(stderr, "ptxas -arch=%s on %s: exit %d:\n%s\n", r->target_after, what, rc,
                msg ? msg : "");
    free(msg);
    return rc;
}
static int assemble(const ptx_fit_result *r, const char *what) {
    return assemble_q(r, what, 1);
}

/* Fitting a fitted result again (same target, all parameters kept) must change nothing. */
static void check_idempotent(const ptx_fit_result *r, int align, const char *what) {
    ptx_fit_result r2;
    ptx_fit_status st =
        fit(r->text, r->len, r->params_after, r->entry, r->target_after, align, &r2);
    CHECK(st == PTX_FIT_OK, "%s: refit: %s", what, r2.message);
    if (st == PTX_FIT_OK) {
        CHECK(r2.len == r->len && memcmp(r2.text, r->text, r->len) == 0, "%s: refit changed it",
              what);
        CHECK(r2.aligns_raised == 0 && r2.params_after == r->params_after, "%s: refit", what);
        CHECK(!strcmp(r2.sig_before, r->sig_after), "%s: signature after != refit's before", what);
    }
    ptx_fit_result_free(&r2);
}

static void test_triton_mma(void) {
    size_t len;
    char *in = slurp("triton39_dot_mma_sm90a.ptx", &len);
    ptx_fit_result r;
    ptx_fit_status st = fit(in, len, 5, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "%s", r.message);
    if (st == PTX_FIT_OK) {
        CHECK(!strcmp(r.entry, "dot_kernel"), "entry %s", r.entry);
        CHECK(r.params_before == 7 && r.params_after == 5, "%d -> %d", r.params_before,
              r.params_after);
        CHECK(!strcmp(r.target_before, "sm_90a") && !strcmp(r.target_after, "sm_90"), "%s -> %s",
              r.target_before, r.target_after);
        CHECK(!strcmp(r.version, "8.4"), "version %s", r.version);
        CHECK(r.mma == 32 && r.wgmma == 0, "mma %ld wgmma %ld", r.mma, r.wgmma);
        CHECK(r.aligns_raised == 4, "aligns raised %d", r.aligns_raised);
        CHECK(!strcmp(r.removed, "dot_kernel_param_5, dot_kernel_param_6"), "removed %s",
              r.removed);
        CHECK(r.shared_bytes == 0 && r.shared_dynamic == 1 &&
                  !strcmp(r.shared_dynamic_name, "global_smem"),
              "shared %llu dyn %d %s", (unsigned long long)r.shared_bytes, r.shared_dynamic,
              r.shared_dynamic_name);
        CHECK(strstr(r.text, "\n.target sm_90\n") && !strstr(r.text, "sm_90a"), "target not plain");
        CHECK(!strstr(r.text, "dot_kernel_param_5") && !strstr(r.text, "dot_kernel_param_6"),
              "scratch parameters still there");
        CHECK(!strstr(r.text, ".align 1 ") &&
                  strstr(r.text, ".global .align 16 dot_kernel_param_4\n)"),
              "alignment not raised, or the list not closed right");
        CHECK(strstr(r.sig_before, ".align 1 dot_kernel_param_6\n)") &&
                  !strstr(r.sig_after, "param_5") &&
                  strstr(r.sig_after, "\n    .param .u32 dot_kernel_param_3,\n"),
              "signatures:\n%s\n%s", r.sig_before, r.sig_after);
        CHECK(r.note && !*r.note, "note %s", r.note);
        /* Everything from the performance directives on is byte for byte the input. */
        const char *a = strstr(in, "\n.reqntid"), *b = strstr(r.text, "\n.reqntid");
        CHECK(a && b && !strcmp(a, b), "body changed");
        CHECK(assemble(&r, "triton39_dot_mma_sm90a.ptx") == 0, "ptxas failed");
        check_idempotent(&r, 0, "triton39_dot_mma");
    }
    ptx_fit_result_free(&r);

    /* --arch: the same plain target, one the .version does not know, a lower one. */
    st = fit(in, len, 5, "dot_kernel", "sm_90", 16, &r);
    CHECK(st == PTX_FIT_OK && !strcmp(r.target_after, "sm_90"), "%s", r.message);
    ptx_fit_result_free(&r);
    st = fit(in, len, 5, NULL, "sm_100", 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "8.6") &&
              r.line == line_of(in, ".version"),
          "%s", r.message);
    CHECK(r.text == NULL, "text on a refusal");
    ptx_fit_result_free(&r);
    /* Triton's stmatrix needs sm_90: refused without --verify, naming it (ptxas agrees) */
    st = fit(in, len, 5, NULL, "sm_80", 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "stmatrix") && strstr(r.message, "sm_90") &&
              r.line == line_of(in, "stmatrix"),
          "%s", r.message);
    ptx_fit_result_free(&r);

    /* K = all parameters, --align 1: only the target changes. */
    st = fit(in, len, 7, NULL, NULL, 1, &r);
    CHECK(st == PTX_FIT_OK && r.aligns_raised == 0 && r.params_after == 7 &&
              r.len + 1 == len && !*r.removed,
          "%s", r.message);
    ptx_fit_result_free(&r);

    /* K too large: an error, not a refusal. */
    st = fit(in, len, 8, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "7 parameters") &&
              ptx_fit_exit_code(st) == 2,
          "%s", r.message);
    ptx_fit_result_free(&r);
    free(in);
}

static void test_handmade_triton(void) {
    size_t len;
    char *in = slurp("triton_mma_sm90a.ptx", &len);
    ptx_fit_result r;
    ptx_fit_status st = fit(in, len, 5, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "%s", r.message);
    if (st == PTX_FIT_OK) {
        CHECK(r.mma == 2 && r.params_after == 5 && r.aligns_raised == 4, "mma %ld", r.mma);
        /* The scratch names survive in comments only. */
        CHECK(!strstr(r.sig_after, "param_5") && strstr(r.text, "triton_fit_kernel_param_5 and"),
              "comments lost");
        CHECK(assemble(&r, "triton_mma_sm90a.ptx") == 0, "ptxas failed");
        check_idempotent(&r, 0, "triton_mma_sm90a");
    }
    ptx_fit_result_free(&r);
    /* Keeping fewer than Triton's pointers: param_4 is read. */
    st = fit(in, len, 4, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "'triton_fit_kernel_param_4'") &&
              strstr(r.message, "reads") && r.line == line_of(in, "[triton_fit_kernel_param_4]"),
          "%s (line %d)", r.message, r.line);
    ptx_fit_result_free(&r);
    /* Lower targets: sm_80 has every instruction (a note says the target was lowered, ptxas
       assembles it); sm_75 has no tf32 mma, which ptxas would reject: refused. */
    st = fit(in, len, 5, NULL, "sm_80", 0, &r);
    CHECK(st == PTX_FIT_OK && strstr(r.note, "lowered"), "%s / note %s", r.message, r.note);
    if (st == PTX_FIT_OK) CHECK(assemble(&r, "triton_mma_sm90a.ptx for sm_80") == 0, "ptxas failed");
    ptx_fit_result_free(&r);
    st = fit(in, len, 5, NULL, "sm_75", 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "tf32") && strstr(r.message, "needs sm_80") &&
              r.line == line_of(in, "cvt.rna.tf32"),
          "%s", r.message);
    CHECK(ptx_fit_exit_code(st) == 1 && !r.text, "refusal");
    ptx_fit_result_free(&r);
    free(in);
}

/* Instructions newer than the target, one at a time, in a module for sm_90 lowered by --arch:
   each is refused on the target below its GPU and accepted on its own (and ptxas agrees). */
static void test_min_targets(void) {
    static const struct {
        const char *insn, *below, *at;
    } cases[] = {
        {"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, "
         "{%r4,%r5}, {%f4,%f5,%f6,%f7};", "sm_75", "sm_80"},
        {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, "
         "{%r4,%r5}, {%f4,%f5,%f6,%f7};", "sm_75", "sm_80"},
        {"cp.async.ca.shared.global [%r30], [%rd1], 4;", "sm_75", "sm_80"},
        {"cvt.rn.bf16x2.f32 %r1, %f1, %f2;", "sm_75", "sm_80"},
        {"redux.sync.add.s32 %r1, %r2, 0xffffffff;", "sm_75", "sm_80"},
        {"stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r30], {%r0,%r1,%r2,%r3};", "sm_80", "sm_90"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        int n = snprintf(text, sizeof text,
                         ".version 8.4\n.target sm_90\n.address_size 64\n"
                         ".visible .entry k(.param .u64 k_p)\n{\n.reg .b32 %%r<40>;\n"
                         ".reg .f32 %%f<40>;\n.reg .b64 %%rd<8>;\n.shared .align 16 .b8 s[1024];\n"
                         "mov.u32 %%r30, s;\n%s\nret;\n}\n",
                         cases[i].insn);
        ptx_fit_result r;
        ptx_fit_status st = fit(text, (size_t)n, 1, NULL, cases[i].below, 0, &r);
        CHECK(st == PTX_FIT_REFUSED && strstr(r.message, cases[i].at) && r.line == 11,
              "%s on %s: %s", cases[i].insn, cases[i].below, r.message);
        ptx_fit_result_free(&r);
        st = fit(text, (size_t)n, 1, NULL, cases[i].at, 0, &r);
        CHECK(st == PTX_FIT_OK, "%s on %s: %s", cases[i].insn, cases[i].at, r.message);
        if (st == PTX_FIT_OK) CHECK(assemble(&r, cases[i].insn) == 0, "ptxas failed");
        ptx_fit_result_free(&r);
    }
}

/* A kept parameter must not lead to removed ones: its address taken (mov, cvta.param), or an
   ld.param reading past its end, reaches the parameters after it. */
static void test_param_address(void) {
    size_t len;
    char *in = slurp("param_address.ptx", &len);
    ptx_fit_result r;
    ptx_fit_status st = fit(in, len, 4, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "takes the address of parameter "
                                                     "'addr_kernel_param_0'") &&
              r.line == line_of(in, "mov.u64"),
          "%s (line %d)", r.message, r.line);
    ptx_fit_result_free(&r);
    /* Nothing removed: nothing to reach; the module fits and assembles. */
    st = fit(in, len, 6, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "%s", r.message);
    if (st == PTX_FIT_OK) CHECK(assemble(&r, "param_address.ptx, all kept") == 0, "ptxas failed");
    ptx_fit_result_free(&r);
    free(in);

    static const struct {
        const char *params, *body;
        int ok;
    } cases[] = {
        {".param .u64 a, .param .u64 b", "cvta.param.u64 %rd1, %rd2;", 0},
        {".param .u64 a, .param .u64 b", "ld.param.u64 %rd1, [a+8];", 0},
        {".param .u64 a, .param .u64 b", "ld.param.v2.u32 {%r1, %r2}, [a+4];", 0},
        {".param .u64 a, .param .u64 b", "ld.param.u32 %r1, [a+4];", 1},
        {".param .u64 a, .param .u64 b", "ld.param.u64 %rd1, [a+0];", 1},
        {".param .align 8 .b8 a[16], .param .u64 b", "ld.param.u64 %rd1, [a+8];", 1},
        {".param .align 8 .b8 a[16], .param .u64 b", "ld.param.u64 %rd1, [a+12];", 0},
        {".param .u64 a, .param .u64 b", "mov.b64 %rd1, a;", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        int n = snprintf(text, sizeof text,
                         ".version 8.4\n.target sm_90\n.address_size 64\n.visible .entry k(%s)\n"
                         "{\n.reg .b32 %%r<4>;\n.reg .b64 %%rd<4>;\n%s\nret;\n}\n",
                         cases[i].params, cases[i].body);
        st = fit(text, (size_t)n, 1, NULL, NULL, 0, &r);
        if (cases[i].ok)
            CHECK(st == PTX_FIT_OK, "%s: %s", cases[i].body, r.message);
        else
            CHECK(st == PTX_FIT_REFUSED && r.line == 8, "%s: %d %s", cases[i].body, (int)st, r.message);
        ptx_fit_result_free(&r);
    }
}

/* What is not text is refused before any parsing, in memory and from files: /dev/zero and
   /dev/urandom stop at once, a file past the cap stops at the cap. */
static void test_not_text(void) {
    static const char good[] = ".version 8.0\n.target sm_80\n// caf\xc3\xa9 \xe2\x80\x94 ok\n"
                               ".visible .entry k()\n{\nret;\n}\n";
    ptx_fit_result r;
    ptx_fit_status st = fit(good, sizeof good - 1, 0, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "UTF-8 in a comment: %s", r.message);
    ptx_fit_result_free(&r);
    static const struct {
        const char *text;
        size_t len;
        const char *says;
    } bad[] = {
        {".version 8.0\0\n", 14, "byte 0x00 at offset 12"},
        {".version 8.0 \x01", 14, "byte 0x01"},
        {".version 8.0 \xc3(", 15, "byte 0xc3"},
        {".version 8.0 \xe2\x80", 15, "cut off"},
        {".version 8.0 \xc0\x80", 15, "byte 0xc0"}, /* overlong NUL */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = fit(bad[i].text, bad[i].len, 0, NULL, NULL, 0, &r);
        CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "not text") && strstr(r.message, bad[i].says),
              "case %zu: %s", i, r.message);
        ptx_fit_result_free(&r);
    }
    const char *devs[] = {"/dev/zero", "/dev/urandom"};
    for (int i = 0; i < 2; i++) {
        char *buf = NULL, why[512];
        size_t len = 0;
        int rc = ptx_fit_read_file(devs[i], &buf, &len, why, sizeof why);
        CHECK(rc == -1 && strstr(why, "not text") && strstr(why, devs[i]), "%s: %s", devs[i], rc ? why : "read");
        if (rc == 0) free(buf);
    }
    /* A text file one byte past the cap. */
    char path[] = "/tmp/dswa-test-ptx-fit-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) return;
    static char blanks[1 << 16];
    memset(blanks, '\n', sizeof blanks);
    for (size_t w = 0; w < PTX_FIT_MAX_BYTES; w += sizeof blanks) fwrite(blanks, 1, sizeof blanks, f);
    fputc('\n', f);
    CHECK(fclose(f) == 0, "cannot write %s", path);
    char *buf = NULL, why[512];
    size_t len = 0;
    int rc = ptx_fit_read_file(path, &buf, &len, why, sizeof why);
    CHECK(rc == -1 && strstr(why, "larger than 64 MiB"), "%s", rc ? why : "read");
    if (rc == 0) free(buf);
    unlink(path);
}

static void test_refusals(void) {
    size_t len;
    ptx_fit_result r;
    ptx_fit_status st;

    /* Triton keeps a device-side tensor descriptor in its global scratch: the body reads
       the scratch pointer (and uses tensormap.replace, which needs sm_90a). */
    char *in = slurp("triton39_desc_reads_scratch_sm90a.ptx", &len);
    st = fit(in, len, 3, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "parameter 3 'desc_kernel_param_3'") &&
              strstr(r.message, "ld.param.b64 %rd2, [desc_kernel_param_3];") &&
              r.line == line_of(in, "[desc_kernel_param_3]") && r.line > 0 && !r.text,
          "%s (line %d)", r.message, r.line);
    CHECK(ptx_fit_exit_code(st) == 1, "exit code");
    ptx_fit_result_free(&r);
    st = fit(in, len, 4, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "tensormap.replace") &&
              strstr(r.message, "sm_90a") && r.line == line_of(in, "tensormap.replace"),
          "%s", r.message);
    ptx_fit_result_free(&r);
    free(in);

    /* wgmma needs sm_90a. */
    in = slurp("triton39_dot_wgmma_sm90a.ptx", &len);
    st = fit(in, len, 5, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "'wgmma.fence.sync.aligned'") &&
              r.line == line_of(in, "wgmma.") && !r.text,
          "%s (line %d)", r.message, r.line);
    ptx_fit_result_free(&r);
    free(in);

    /* Names that are prefixes/suffixes of one another; arrays; comments and strings. */
    in = slurp("names.ptx", &len);
    st = fit(in, len, 3, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "%s", r.message);
    if (st == PTX_FIT_OK) {
        CHECK(!strcmp(r.removed, "k_param_1, k_param_100") && r.aligns_raised == 1 &&
                  strstr(r.text, ".param .u64 .ptr .global .align 16 k_param_10,") &&
                  strstr(r.text, ".param .align 8 .b8 k_param_2[16],") &&
                  strstr(r.text,
                         "xk_param_1                         // kept, read; ends in k_param_1\n)"),
              "%s\n%s", r.removed, r.sig_after);
        CHECK(!strcmp(r.target_after, "sm_80") && !strcmp(r.target_before, "sm_80"), "target");
        CHECK(assemble(&r, "names.ptx") == 0, "ptxas failed");
        check_idempotent(&r, 0, "names");
    }
    ptx_fit_result_free(&r);
    st = fit(in, len, 2, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "'xk_param_1'") &&
              r.line == line_of(in, "\t%r2, [xk_param_1]"),
          "%s", r.message);
    ptx_fit_result_free(&r);
    st = fit(in, len, 1, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "'k_param_2'") &&
              r.line == line_of(in, "\t%r1, [k_param_2+4]"),
          "%s", r.message);
    ptx_fit_result_free(&r);
    free(in);

    /* A mention that is no ld.param still counts: taking a parameter's address. */
    static const char mov[] =
        ".version 8.0\n.target sm_90a\n.address_size 64\n"
        ".visible .entry k(.param .u64 .ptr .global .align 1 p0, .param .align 8 .b8 p1[8])\n"
        "{\n .reg .b64 %rd<3>;\n ld.param.u64 %rd1, [p0];\n mov.u64 %rd2, p1;\n ret;\n}\n";
    st = fit(mov, sizeof mov - 1, 1, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "refers to") && r.line == 8, "%s",
          r.message);
    ptx_fit_result_free(&r);
}

/* Instructions that need the architecture-specific target, and ones that do not. */
static void test_arch_rules(void) {
    static const struct {
        const char *target, *version, *insn;
        int refused;
    } cases[] = {
        {"sm_90a", "8.0", "setmaxnreg.inc.sync.aligned.u32 240;", 1},
        {"sm_90a", "8.0", "wgmma.fence.sync.aligned;", 1},
        {"sm_100a", "8.6", "tcgen05.fence::before_thread_sync;", 1},
        {"sm_100a", "8.6", "redux.sync.max.f32 %f1, %f2, 0xffffffff;", 1},
        {"sm_100a", "8.6", "cvt.rz.satfinite.ue8m0x2.f32 %h1, %f1, %f2;", 1},
        {"sm_120a", "8.7",
         "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 "
         "{%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
         1},
        {"sm_100f", "8.8", "@%p1 setmaxnreg.dec.sync.aligned.u32 64;", 1},
        {"sm_90a", "8.0",
         "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, "
         "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
         0},
        {"sm_90a", "8.0", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%rd1], {%r1};", 0},
        {"sm_100a", "8.6", "add.rn.f32x2 %rd1, %rd2, %rd3;", 0},
        {"sm_90a", "8.0", "elect.sync %r1|%p1, 0xffffffff;", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        int n = snprintf(text, sizeof text,
                         ".version %s\n.target %s\n.address_size 64\n"
                         ".visible .entry k(.param .u64 p)\n{\n"
                         "  .reg .b32 %%r<20>; .reg .b64 %%rd<20>; .reg .f32 %%f<20>; "
                         ".reg .pred %%p<4>; .reg .b16 %%h<8>;\n"
                         "$L_top:\n  %s\n  ret;\n}\n",
                         cases[i].version, cases[i].target, cases[i].insn);
        ptx_fit_result r;
        ptx_fit_status st = fit(text, (size_t)n, 1, NULL, NULL, 0, &r);
        if (cases[i].refused) {
            CHECK(st == PTX_FIT_REFUSED && r.line == 8 &&
                      strstr(r.message, "architecture-specific"),
                  "%s: %s", cases[i].insn, r.message);
        } else {
            CHECK(st == PTX_FIT_OK, "%s: %s", cases[i].insn, r.message);
            if (st == PTX_FIT_OK) {
                CHECK(r.mma == (strncmp(cases[i].insn, "mma", 3) == 0), "%s: mma %ld",
                      cases[i].insn, r.mma);
                CHECK(assemble(&r, cases[i].insn) == 0, "%s: ptxas failed", cases[i].insn);
            }
        }
        ptx_fit_result_free(&r);
    }
    /* sm_XXf becomes sm_XX too. */
    static const char fam[] = ".version 8.8\n.target sm_100f\n.address_size 64\n"
                              ".entry k()\n{\n ret;\n}\n";
    ptx_fit_result r;
    ptx_fit_status st = fit(fam, sizeof fam - 1, 0, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK && !strcmp(r.target_after, "sm_100") &&
              strstr(r.text, ".target sm_100\n"),
          "%s", r.message);
    if (st == PTX_FIT_OK) CHECK(assemble(&r, "sm_100f") == 0, "ptxas failed");
    ptx_fit_result_free(&r);
}

static void test_entries_and_errors(void) {
    size_t len;
    ptx_fit_result r;
    ptx_fit_status st;

    char *in = slurp("two_entries.ptx", &len);
    st = fit(in, len, 1, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "several entries") &&
              strstr(r.message, "first, second") && !strstr(r.message, "noop"),
          "%s", r.message);
    ptx_fit_result_free(&r);
    st = fit(in, len, 1, "first", NULL, 0, &r);
    CHECK(st == PTX_FIT_OK && !strcmp(r.removed, "first_param_1") &&
              strstr(r.text, ".entry first(.param .u64 .ptr .global .align 16 first_param_0)\n") &&
              strstr(r.text, ".entry second(\n\t.param .u32 second_param_0,\n"),
          "%s", r.message);
    if (st == PTX_FIT_OK) {
        CHECK(assemble(&r, "two_entries.ptx first") == 0, "ptxas failed");
        check_idempotent(&r, 0, "two_entries");
    }
    ptx_fit_result_free(&r);
    st = fit(in, len, 1, "second", NULL, 0, &r);
    CHECK(st == PTX_FIT_REFUSED && strstr(r.message, "second_param_1"), "%s", r.message);
    ptx_fit_result_free(&r);
    st = fit(in, len, 0, "noop", NULL, 0, &r);
    CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "no entry named 'noop'"), "%s",
          r.message);
    ptx_fit_result_free(&r);
    free(in);

    in = slurp("no_entry.ptx", &len);
    st = fit(in, len, 0, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "no .entry"), "%s", r.message);
    ptx_fit_result_free(&r);
    free(in);

    in = slurp("not_ptx.txt", &len);
    st = fit(in, len, 0, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_BAD_INPUT && strstr(r.message, "not PTX"), "%s", r.message);
    CHECK(ptx_fit_exit_code(st) == 2, "exit code");
    ptx_fit_result_free(&r);
    free(in);

    static const struct {
        const char *text;
        int keep;
        const char *arch;
        int align;
        const char *msg;
    } bad[] = {
        {"", 0, NULL, 0, "not PTX"},
        {".version 8.0\n.address_size 64\n.entry k() { ret; }\n", 0, NULL, 0, "no .target"},
        {"// .version 8.0\n/* .target sm_90 */ .entry k() { ret; }\n", 0, NULL, 0, "no .version"},
        {".version 8.0\n.target sm_90\n.entry k(.param .u32 a,\n", 0, NULL, 0, "not closed"},
        {".version 8.0\n.target sm_90\n.entry k(.param .u32 a) {\n ret;\n", 0, NULL, 0,
         "not closed"},
        {".version 8.0\n.target sm_90\n}\n", 0, NULL, 0, "unmatched"},
        {".version 8.0\n.target sm_90\n.entry k(.param .u32 a,, .param .u32 b) { ret; }\n", 0, NULL,
         0, "empty"},
        {".version 8.0\n.target sm_90\n.entry k(.param .u32) { ret; }\n", 0, NULL, 0, "no name"},
        {".version 8.0\n.target sm_90x\n.entry k() { ret; }\n", 0, NULL, 0, "unrecognised target"},
        {".version 8.0\n.target sm_90\n.version 8.0\n.entry k() { ret; }\n", 0, NULL, 0,
         "second .version"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", -1, NULL, 0, "--keep"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", 0, "sm_90a", 0, "--arch"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", 0, "compute_90", 0, "--arch"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", 0, NULL, 3, "--align"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", 0, NULL, 512, "--align"},
        {".version 8.0\n.target sm_90\n.entry k() { ret; }\n", 1, NULL, 0, "more than the 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st =
            fit(bad[i].text, strlen(bad[i].text), bad[i].keep, NULL, bad[i].arch, bad[i].align, &r);
        CHECK(st == PTX_FIT_BAD_INPUT && r.message && strstr(r.message, bad[i].msg) && !r.text,
              "case %zu: status %d: %s", i, (int)st, r.message);
        ptx_fit_result_free(&r);
    }
}

/* dswa_ptx_shared_memory, the one counter of static shared memory (the AOT export's
   shared_bytes, this report's). Each expected value is what `ptxas -arch=sm_90 -v` 13.0 reports
   ("N bytes smem") for the module with every variable referenced from the entry: the entry's
   variables are laid out first, then the module's, each at the larger of its .align and its
   element size (vectors included), no padding after the last. */
static void test_shared_memory_counter(void) {
#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"
#define REFS(...) "{\n  .reg .b64 %rd<8>;\n" __VA_ARGS__ "  ret;\n}\n"
    static const struct {
        const char *what, *ptx, *entry;
        unsigned long long bytes;
        int dynamic;
        const char *dynamic_name;
    } cases[] = {
        {"several vector names on a line", HEAD ".shared .v4 .u32 quad[8], one;\n"
         ".visible .entry k(.param .u64 p)\n" REFS("  mov.u64 %rd1, quad; mov.u64 %rd2, one;\n"
                                                  "  st.global.u64 [%rd1], %rd2;\n"),
         NULL, 8 * 16 + 16, 0, ""},
        {"align, arrays, vectors, .extern, entry scope first", HEAD
         ".shared .align 4 .b8 g1[3];\n.shared .v4 .u32 quad[8], one;\n"
         ".extern .shared .align 16 .b8 dyn[];\n"
         ".visible .entry k(.param .u64 p)\n"
         REFS("  .shared .u16 inner[5];\n"
              "  mov.u64 %rd1, g1; mov.u64 %rd2, quad; mov.u64 %rd3, one; mov.u64 %rd4, dyn;\n"
              "  mov.u64 %rd5, inner; st.global.u64 [%rd1], %rd2; st.global.u64 [%rd3], %rd4;\n"
              "  st.global.u64 [%rd5], %rd4;\n"),
         "k", 160, 1, "dyn"}, /* inner 0..10, g1 12..15, quad 16..144, one 144..160 */
        {"padding to .align 128 and to .f64, .v2", HEAD
         ".shared .u8 c1;\n.shared .f64 d1;\n.shared .align 128 .b8 big[10];\n"
         ".shared .v2 .f32 v2a[3];\n.visible .entry k(.param .u64 p)\n"
         REFS("  mov.u64 %rd1, c1; mov.u64 %rd2, d1; mov.u64 %rd3, big; mov.u64 %rd4, v2a;\n"
              "  st.global.u64 [%rd1], %rd2; st.global.u64 [%rd3], %rd4;\n"),
         NULL, 168, 0, ""}, /* c1 0, d1 8..16, big 128..138, v2a 144..168 */
        {"the module's after the entry's", HEAD ".shared .u8 x;\n"
         ".visible .entry k(.param .u64 p)\n"
         REFS("  .shared .f64 y;\n  mov.u64 %rd1, x; mov.u64 %rd2, y; st.global.u64 [%rd1], %rd2;\n"),
         "k", 9, 0, ""},
        {"no padding after the last; two declarations on a line", HEAD
         ".visible .entry k(.param .u64 p)\n"
         REFS("  .shared .u32 a; .shared .u8 b;\n"
              "  mov.u64 %rd1, a; mov.u64 %rd2, b; st.global.u64 [%rd1], %rd2;\n"),
         "k", 5, 0, ""},
        {".b128, 2-D .f16x2", HEAD ".shared .u8 pad;\n.shared .b128 w[2];\n.shared .f16x2 h[3][2];\n"
         ".visible .entry k(.param .u64 p)\n"
         REFS("  mov.u64 %rd1, pad; mov.u64 %rd2, w; mov.u64 %rd3, h;\n"
              "  st.global.u64 [%rd1], %rd2; st.global.u64 [%rd3], %rd2;\n"),
         NULL, 72, 0, ""}, /* pad 0, w 16..48, h 48..72 */
        {"only dynamic", HEAD ".extern .shared .align 16 .b8 dyn[];\n"
         ".visible .entry k(.param .u64 p)\n"
         REFS("  mov.u64 %rd1, dyn; st.global.u64 [%rd1], %rd1;\n"),
         NULL, 0, 1, "dyn"},
        /* two entries: each counts its own body only (ptxas: k 20, k2 100) */
        {"names with arrays on a line, first entry", HEAD
         ".visible .entry k(.param .u64 p)\n"
         "{\n  .reg .b32 %r<2>;\n  .shared .u8 c1;\n  .shared .u32 w1, w2[3];\n"
         "  mov.u32 %r1, c1;\n  ret;\n}\n"
         ".visible .entry k2(.param .u64 p)\n{\n  .shared .b8 only2[100];\n  ret;\n}\n",
         "k", 20, 0, ""},
        {"names with arrays on a line, second entry", HEAD
         ".visible .entry k(.param .u64 p)\n"
         "{\n  .reg .b32 %r<2>;\n  .shared .u8 c1;\n  .shared .u32 w1, w2[3];\n"
         "  mov.u32 %r1, c1;\n  ret;\n}\n"
         ".visible .entry k2(.param .u64 p)\n{\n  .shared .b8 only2[100];\n  ret;\n}\n",
         "k2", 100, 0, ""},
    };
#undef HEAD
#undef REFS
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dswa_ptx_shared s;
        memset(&s, 0x5a, sizeof s); /* poisoned: every field must be written */
        const char *e = cases[i].entry;
        const int rc = dswa_ptx_shared_memory(cases[i].ptx, strlen(cases[i].ptx), e, e ? strlen(e) : 0, &s);
        const size_t want_len = strlen(cases[i].dynamic_name);
        CHECK(rc == 0 && s.static_bytes == cases[i].bytes && s.dynamic_arrays == cases[i].dynamic &&
                  (!cases[i].dynamic || (s.dynamic_name_len == want_len &&
                                         !memcmp(cases[i].ptx + s.dynamic_name, cases[i].dynamic_name, want_len))),
              "%s: rc %d, %llu bytes (ptxas: %llu), %d dynamic\n", cases[i].what, rc,
              (unsigned long long)s.static_bytes, cases[i].bytes, s.dynamic_arrays);
    }
    /* an entry that is not there: -1, the module's variables only */
    static const char two[] = ".version 8.0\n.target sm_90\n.shared .b32 m[4];\n"
                              ".visible .entry k()\n{\n .shared .b8 own[64];\n ret;\n}\n";
    dswa_ptx_shared s;
    CHECK(dswa_ptx_shared_memory(two, sizeof two - 1, "nope", 4, &s) == -1 && s.static_bytes == 16,
          "missing entry: %llu\n", (unsigned long long)s.static_bytes);
    /* .shared inside a comment or an instruction (ld.shared) is no declaration */
    static const char quiet[] = ".version 8.0\n.target sm_90\n// .shared .b8 c[8];\n"
                                ".visible .entry k()\n{\n /* .shared .b8 d[8]; */ ld.shared.u32 %r1, [%r2];\n"
                                " ret;\n}\n";
    CHECK(dswa_ptx_shared_memory(quiet, sizeof quiet - 1, NULL, 0, &s) == 0 && s.static_bytes == 0 &&
              s.dynamic_arrays == 0,
          "comments and instructions: %llu\n", (unsigned long long)s.static_bytes);
}

/* Comments hide code; .shared sizes add up; the statement walker sees past .loc and labels. */
static void test_comments_and_shared(void) {
    static const char text[] =
        "/* .version 1.0 */ .version 8.0 // .target sm_90a\n"
        ".target sm_90a, debug\n"
        ".address_size 64\n"
        "/* .visible .entry fake(.param .u64 x) { wgmma.fence.sync.aligned; } */\n"
        ".shared .align 16 .b8 module_smem[4096];\n"
        ".extern .shared .align 16 .b8 dyn_smem[];\n"
        ".global .align 4 .b8 gdata[16] = {1, 2, 3, 4};\n"
        ".visible .entry k(\n"
        "    .param .u64 .ptr .global .align 8 p0 /* wgmma */,\n"
        "    .param .u64 .ptr .shared .align 32 p1, // already more than 16\n"
        "    .param .u64 p2 /* scratch, , ) */\n"
        ")\n"
        ".maxntid 128, 1, 1\n"
        "{\n"
        "  .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .f32 %f<12>;\n"
        "  .shared .f32 tile[16][2];\n"
        "  .shared .v4 .u32 quad[8], one;\n"
        "  .loc 1 2 3\n"
        "  ld.param.u64 %rd1, [p0]; // ld.param.u64 %rd2, [p2]; "
        "setmaxnreg.inc.sync.aligned.u32 240;\n"
        "  ld.param.u64 %rd2, [p1];\n"
        "L1: @!%p1 bra L1;\n"
        "  /* p2 */ mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, "
        "{%r1,%r2,%r3,%r0},\n"
        "      {%r1,%r2}, {%f5,%f6,%f7,%f8};\n"
        "  { .reg .b32 inner; mov.b32 inner, 1; }\n"
        "  ret;\n"
        "}\n";
    ptx_fit_result r;
    ptx_fit_status st = fit(text, sizeof text - 1, 2, NULL, NULL, 0, &r);
    CHECK(st == PTX_FIT_OK, "%s", r.message);
    if (st == PTX_FIT_OK) {
        CHECK(!strcmp(r.version, "8.0") && !strcmp(r.target_before, "sm_90a"), "%s %s", r.version,
              r.target_before);
        CHECK(strstr(r.text, ".target sm_90, debug\n"), "target options kept");
        CHECK(r.mma == 1, "mma %ld", r.mma);
        CHECK(r.shared_bytes == 4096 + 16 * 2 * 4 + 8 * 16 + 16, "shared %llu",
              (unsigned long long)r.shared_bytes);
        CHECK(r.shared_dynamic == 1 && !strcmp(r.shared_dynamic_name, "dyn_smem"), "dynamic");
        CHECK(r.aligns_raised == 1 && strstr(r.text, ".align 16 p0 /* wgmma */,") &&
                  strstr(r.text, ".align 32 p1 // already more than 16\n)"),
              "%s", r.text);
        CHECK(!strcmp(r.removed, "p2"), "removed %s", r.removed);
        CHECK(!strstr(r.text, "scratch, , )"), "the removed parameter's comment stays behind");
    }
    ptx_fit_result_free(&r);
}

/* Cutting parameters keeps comments whole: never does a ')' end up inside one. */
static void test_cut_and_comments(void) {
    static const struct {
        const char *text;
        int keep;
        const char *want;
    } cases[] = {
        {".version 8.0\n.target sm_90\n.entry k(.param .u32 a, // c\n  .param .u32 b )\n{ ret; }\n",
         1, ".entry k(.param .u32 a )\n"},
        {".version 8.0\n.target sm_90\n.entry k(\n  .param .u32 a, // keep me\n"
         "  .param .u32 b // and b\n)\n{ ret; }\n",
         1, ".entry k(\n  .param .u32 a // keep me\n)\n"},
        {".version 8.0\n.target sm_90\n.entry k(\n  .param .u32 a, /* x\n y */ .param .u32 b "
         "/* z\n */\n)\n{ ret; }\n",
         1, ".entry k(\n  .param .u32 a /* z\n */\n)\n"},
        {".version 8.0\n.target sm_90\n.entry k(\n  .param .u32 a, /* x */ .param .u32 b\n)\n"
         "{ ret; }\n",
         0, ".entry k(\n)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ptx_fit_result r;
        ptx_fit_status st =
            fit(cases[i].text, strlen(cases[i].text), cases[i].keep, NULL, NULL, 0, &r);
        CHECK(st == PTX_FIT_OK && strstr(r.text, cases[i].want), "case %zu: %s\n%s", i,
              r.message, r.text ? r.text : "");
        if (st == PTX_FIT_OK) {
            CHECK(assemble(&r, "cut") == 0, "case %zu: ptxas failed", i);
            check_idempotent(&r, 0, "cut");
        }
        ptx_fit_result_free(&r);
    }
}

/* Inputs the fuzzer once tripped on (tests/fixtures/fuzz-*): no crash, a status, and when it
   succeeds, a result that fits again unchanged. */
static void test_fuzz_regressions(void) {
    DIR *d = opendir(fixtures);
    if (!d) {
        CHECK(0, "cannot list %s", fixtures);
        return;
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "fuzz-", 5) != 0) continue;
        size_t len;
        char *in = slurp(e->d_name, &len);
        static const int keeps[] = {0, 1, 3, 5};
        for (size_t k = 0; k < sizeof keeps / sizeof keeps[0]; k++) {
            ptx_fit_result r;
            ptx_fit_status st = fit(in, len, keeps[k], NULL, NULL, 0, &r);
            CHECK(st == PTX_FIT_OK || (r.message && *r.message), "%s: no message", e->d_name);
            CHECK(st != PTX_FIT_INTERNAL, "%s: %s", e->d_name, r.message);
            if (st == PTX_FIT_OK) check_idempotent(&r, 0, e->d_name);
            ptx_fit_result_free(&r);
        }
        free(in);
        n++;
    }
    closedir(d);
    printf("fuzz regression inputs: %d\n", n);
}

int main(void) {
    find_fixtures();
    ptxas = ptx_fit_ptxas_find();
    test_triton_mma();
    test_handmade_triton();
    test_min_targets();
    test_param_address();
    test_not_text();
    test_refusals();
    test_arch_rules();
    test_entries_and_errors();
    test_comments_and_shared();
    test_shared_memory_counter();
    test_cut_and_comments();
    test_fuzz_regressions();
    if (ptxas)
        printf("ptxas (%s) assembled %d fitted results\n", ptxas, assembled);
    else
        printf("ptxas not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): assembling the "
               "fitted results skipped (%d)\n",
               assemble_skipped);
    free(ptxas);
    printf("test_ptx_fit: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
