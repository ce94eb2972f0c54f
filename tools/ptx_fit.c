/* `dswa ptx-fit`: the command-line face of tools/ptx_fit/. Reads a PTX file, fits it to what
   TensorRT's AOT plugin path loads (parameters TensorRT cannot supply removed once proven
   unreachable, a plain target whose GPU has every instruction used, pointer alignment
   raised), prints what it found and changed, optionally assembles the result with ptxas, and
   writes it only when every step succeeded, so a refusal or a failed --verify leaves no
   output behind. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ptx_fit/ptx_fit.h"

void ptx_fit_print_help(FILE *f) {
    fputs(
        "usage: dswa ptx-fit IN.ptx --keep K [--entry NAME] [--arch sm_XX] [--align N]\n"
        "                   [--verify] [-o OUT.ptx]\n"
        "\n"
        "Fits third-party PTX (Triton's above all) to what TensorRT's AOT plugin path loads:\n"
        "  - removes the entry's parameters after the first K, after proving that the body never\n"
        "    reaches them: no mention of them (no ld.param of them, nothing else), no address of\n"
        "    a parameter taken (mov of a parameter's name, cvta.param), no ld.param reading past\n"
        "    a kept parameter; otherwise it refuses, naming the parameter and the line. Triton\n"
        "    appends global-scratch pointers that TensorRT cannot pass: K is the number of\n"
        "    inputs + int32 extras + outputs.\n"
        "  - rewrites .target sm_XXa / sm_XXf to the plain sm_XX (or to --arch), refusing with\n"
        "    the offending line when an instruction needs the suffix (wgmma, setmaxnreg,\n"
        "    tcgen05, tensormap.replace, block-scaled mma, ...) or a newer GPU than the target\n"
        "    (tf32 or bf16 mma, cp.async: sm_80; ldmatrix: sm_75; ...). With --arch, the .version\n"
        "    must know the target.\n"
        "  - raises .align on pointer parameters (.ptr; Triton emits .align 1) to --align.\n"
        "It prints the entry's signature before and after, the number of mma instructions and\n"
        "the shared memory the module and entry declare (TensorRT allows at most 48 KB).\n"
        "\n"
        "options:\n"
        "  --keep K        parameters to keep (required); 0 .. the parameter count\n"
        "  --entry NAME    the entry to fit (required when the module has several)\n"
        "  --arch sm_XX    the plain target to write (default: the input's, without a/f)\n"
        "  --align N       minimum .align of pointer parameters, a power of 2 <= 256 (default 16)\n"
        "  --verify        assemble the result with `ptxas -arch=sm_XX` (ptxas from PATH, else\n"
        "                  $CUDA_HOME/bin or /usr/local/cuda/bin) and fail when it fails; says\n"
        "                  so and goes on when no ptxas is found\n"
        "  -o, --output OUT.ptx  where to write the result (default: standard output); written\n"
        "                  only when everything succeeded, atomically\n"
        "  -h, --help      this text\n"
        "IN.ptx may be '-' for standard input; it must be text (no NUL or other control bytes,\n"
        "valid UTF-8) of at most 64 MiB, and reading stops at the first byte that is not. The\n"
        "report goes to standard output when -o names a file, else to standard error. Each\n"
        "option may be given once.\n"
        "\n"
        "Exit status: 0 fitted; 1 refused (nothing written), ptxas failed under --verify, or an\n"
        "output could not be written; 2 bad usage, an unreadable file, not text or not PTX, no\n"
        "entry, several entries and no --entry, K larger than the parameter count.\n",
        f);
}

/* Prints each line of `text` (may be NULL) after `prefix`, so that ptxas's messages line up
   with the report. The file path ptxas names is a scratch file, hence the prefix. */
static void print_lines(FILE *f, const char *text, const char *prefix) {
    const char *p = text ? text : "";
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k) fprintf(f, "%s%.*s\n", prefix, (int)k, p);
        p += k + (e ? 1 : 0);
    }
}

/* --verify: 0 when ptxas assembled the result (or none was found: said in the report), 1
   after a message. */
static int verify(FILE *rep, const ptx_fit_result *r) {
    char *ptxas = ptx_fit_ptxas_find();
    if (!ptxas) {
        fprintf(rep, "  verify: skipped (no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin)\n");
        return 0;
    }
    char *msg = NULL;
    int rc = 0;
    int prc = ptx_fit_ptxas_assemble(ptxas, r->text, r->len, r->target_after, &msg);
    if (prc == 0) {
        fprintf(rep, "  verify: %s -arch=%s: ok\n", ptxas, r->target_after);
        print_lines(rep, msg, "    ptxas: "); /* advisories, if any */
    } else if (prc < 0) {
        fprintf(stderr, "dswa ptx-fit: verify: %s (nothing written)\n", msg ? msg : "cannot run ptxas");
        rc = 1;
    } else {
        fflush(rep);
        print_lines(stderr, msg, "");
        fprintf(stderr,
                "dswa ptx-fit: verify: %s -arch=%s failed (exit %d; its messages are above); "
                "nothing written\n",
                ptxas, r->target_after, prc);
        rc = 1;
    }
    free(msg);
    free(ptxas);
    return rc;
}

int cmd_ptx_fit(int argc, char **argv) {
    const char *cmd = "ptx-fit";
    const char *in_path = NULL, *out_path = NULL, *out_long = NULL, *keep_s = NULL, *align_s = NULL;
    ptx_fit_opts o = {0, NULL, NULL, 0};
    int verify_it = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ptx_fit_print_help(stdout);
            return 0;
        }
        if ((m = cli_opt_once(cmd, argc, argv, &i, "--keep", &keep_s)) ||
            (m = cli_opt_once(cmd, argc, argv, &i, "--entry", &o.entry)) ||
            (m = cli_opt_once(cmd, argc, argv, &i, "--arch", &o.arch)) ||
            (m = cli_opt_once(cmd, argc, argv, &i, "--align", &align_s)) ||
            (m = cli_opt_once(cmd, argc, argv, &i, "-o", &out_path)) ||
            (m = cli_opt_once(cmd, argc, argv, &i, "--output", &out_long))) {
            if (m < 0) return 2;
        } else if ((m = cli_opt(cmd, argc, argv, &i, "--verify", 0, NULL))) {
            if (m < 0) return 2;
            verify_it = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (in_path) {
            return cli_usage_error(cmd, "one input file only (got '%s' and '%s')", in_path, a);
        } else {
            in_path = a;
        }
    }
    if (out_path && out_long) return cli_usage_error(cmd, "-o and --output are the same option: give one");
    if (out_long) out_path = out_long;
    int64_t x;
    if (!in_path) return cli_usage_error(cmd, "missing the input PTX file");
    if (!keep_s) return cli_usage_error(cmd, "missing --keep K (the parameters TensorRT passes)");
    if (cli_parse_i64(keep_s, 0, INT_MAX, &x) != 0)
        return cli_usage_error(cmd, "--keep '%s': expected a count, 0 or more", keep_s);
    o.keep = (int)x;
    if (align_s && (cli_parse_i64(align_s, 1, 256, &x) != 0 || (x & (x - 1))))
        return cli_usage_error(cmd, "--align '%s': expected a power of 2 from 1 to 256", align_s);
    if (align_s) o.align = (int)x;
    if (o.arch && !ptx_fit_arch_ok(o.arch))
        return cli_usage_error(cmd, "--arch '%s': expected a plain target such as sm_90", o.arch);
    if (out_path && !*out_path) return cli_usage_error(cmd, "-o needs a file name");

    char *buf = NULL, why[512];
    size_t len = 0;
    if (ptx_fit_read_file(in_path, &buf, &len, why, sizeof why) != 0) {
        fprintf(stderr, "dswa ptx-fit: %s\n", why);
        return 2;
    }
    ptx_fit_result r;
    ptx_fit_status st = ptx_fit(buf, len, &o, &r);
    free(buf);
    if (st != PTX_FIT_OK) {
        fprintf(stderr, "dswa ptx-fit: %s: %s%s\n", in_path, r.message ? r.message : "failed",
                st == PTX_FIT_REFUSED ? " (nothing written)" : "");
        ptx_fit_result_free(&r);
        return ptx_fit_exit_code(st);
    }

    /* The PTX owns standard output unless it goes to a file. */
    const int to_file = out_path && strcmp(out_path, "-");
    FILE *rep = to_file ? stdout : stderr;
    ptx_fit_print_report(rep, &r, in_path, o.align);
    int rc = verify_it ? verify(rep, &r) : 0;
    if (rc == 0 && to_file && (fflush(stdout) != 0 || ferror(stdout))) {
        /* the report was lost: the file is not written either */
        fprintf(stderr, "dswa ptx-fit: cannot write to standard output: %s (nothing written)\n",
                strerror(errno ? errno : EIO));
        rc = 1;
    }
    if (rc == 0) {
        cli_output out = {out_path ? out_path : "-", r.text, r.len};
        if (cli_write_outputs(cmd, &out, 1) != 0) rc = 1;
        else if (to_file) fprintf(rep, "  wrote %s (%zu bytes)\n", out_path, r.len);
    }
    ptx_fit_result_free(&r);
    return rc;
}
