/* `dswa ptx-fit`: the command-line face of src/ptx_fit.c. Reads a PTX file, fits it to the
   TensorRT AOT plugin contract (SPEC.md section 4: parameters TensorRT cannot supply
   removed once proven unread, a plain target, pointer alignment raised), prints what it found
   and changed, optionally assembles the result with ptxas, and writes it only when every
   step succeeded, so a refusal or a failed --verify leaves no output behind.
   The subcommand table in tools/dswa.c wires in dswa_cmd_ptx_fit and dswa_help_ptx_fit. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ptx_fit/ptx_fit.h"

int dswa_cmd_ptx_fit(int argc, char **argv);
void dswa_help_ptx_fit(void);

void dswa_help_ptx_fit(void) {
    fputs(
        "usage: dswa ptx-fit IN.ptx --keep K [--entry NAME] [--arch sm_XX] [--align N]\n"
        "                   [--verify] [-o OUT.ptx]\n"
        "\n"
        "Fits third-party PTX (Triton's above all) to what TensorRT's AOT plugin path loads:\n"
        "  - removes the entry's parameters after the first K, after proving that the body never\n"
        "    names them (no ld.param of them, no other mention); otherwise it refuses, naming\n"
        "    the parameter and the line that reads it. Triton appends global-scratch pointers\n"
        "    that TensorRT cannot pass: K is the number of inputs + int32 extras + outputs.\n"
        "  - rewrites .target sm_XXa / sm_XXf to the plain sm_XX (or to --arch), refusing with\n"
        "    the offending line when an instruction needs the suffix (wgmma, setmaxnreg,\n"
        "    tcgen05, tensormap.replace, block-scaled mma, ...). With --arch, the .version must\n"
        "    know the target.\n"
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
        "  -o OUT.ptx      where to write the result (default: standard output); written only\n"
        "                  when everything succeeded, atomically\n"
        "  -h, --help      this text\n"
        "IN.ptx may be '-' for standard input. The report goes to standard output when -o names\n"
        "a file, else to standard error.\n"
        "\n"
        "Exit status: 0 fitted; 1 refused (nothing written) or ptxas failed under --verify;\n"
        "2 bad usage, an unreadable file, not PTX, no entry, several entries and no --entry,\n"
        "K larger than the parameter count.\n",
        stdout);
}

static int ptxfit_usage(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static int ptxfit_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dswa ptx-fit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'dswa ptx-fit --help')\n", stderr);
    va_end(ap);
    return 2;
}

/* Matches argv[*i] against option `name`; 1 when matched (for valued options *val is set,
   from "--name=x" or the next argument), 0 when it is another argument, -1 after a usage
   message. */
static int ptxfit_opt(int argc, char **argv, int *i, const char *name, int has_value,
                      const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '=')) return 0;
    if (!has_value) {
        if (a[n] == '=') {
            ptxfit_usage("option %s takes no value", name);
            return -1;
        }
        return 1;
    }
    if (a[n] == '=') {
        *val = a + n + 1;
    } else {
        if (*i + 1 >= argc) {
            ptxfit_usage("option %s needs a value", name);
            return -1;
        }
        *val = argv[++*i];
    }
    return 1;
}

static int ptxfit_int(const char *s, long lo, long hi, int *out) {
    char *end = NULL;
    if (!s || !*s) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* Reads a whole file ("-" = stdin) into a malloc'd buffer. 0, or -1 with errno set. */
static int ptxfit_read(const char *path, char **buf, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) {
        if (f != stdin) fclose(f);
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (n == cap) {
            if (cap > ((size_t)-1) / 2) {
                errno = EFBIG;
                goto fail;
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                errno = ENOMEM;
                goto fail;
            }
            b = nb;
            cap *= 2;
        }
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                if (!errno) errno = EIO;
                goto fail;
            }
            break;
        }
    }
    if (f != stdin) fclose(f);
    *buf = b;
    *len = n;
    return 0;
fail:;
    int e = errno;
    free(b);
    if (f != stdin) fclose(f);
    errno = e;
    return -1;
}

/* 0, or -1 with a message printed (tools/common.c: atomic for regular files). */
static int ptxfit_write(const char *path, const char *text, size_t len) {
    return cli_write_file("ptx-fit", path, text, len);
}

/* Prints each line of `text` (may be NULL) after `prefix`, so that ptxas's messages line up
   with the report. The file path ptxas names is a scratch file, hence the prefix. */
static void ptxfit_print_lines(FILE *f, const char *text, const char *prefix) {
    const char *p = text ? text : "";
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k) fprintf(f, "%s%.*s\n", prefix, (int)k, p);
        p += k + (e ? 1 : 0);
    }
}

/* Prints a multi-line signature indented by `ind` spaces. */
static void ptxfit_print_sig(FILE *f, const char *sig, int ind) {
    const char *p = sig;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        fprintf(f, "%*s%.*s\n", ind, "", (int)k, p);
        p += k + (e ? 1 : 0);
    }
}

int dswa_cmd_ptx_fit(int argc, char **argv) {
    const char *in_path = NULL, *out_path = NULL, *keep_s = NULL, *align_s = NULL;
    dswa_ptx_fit_opts o = {0, NULL, NULL, 0};
    int verify = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            dswa_help_ptx_fit();
            return 0;
        }
        if ((m = ptxfit_opt(argc, argv, &i, "--keep", 1, &keep_s)) != 0) {
            if (m < 0) return 2;
        } else if ((m = ptxfit_opt(argc, argv, &i, "--entry", 1, &o.entry)) != 0) {
            if (m < 0) return 2;
        } else if ((m = ptxfit_opt(argc, argv, &i, "--arch", 1, &o.arch)) != 0) {
            if (m < 0) return 2;
        } else if ((m = ptxfit_opt(argc, argv, &i, "--align", 1, &align_s)) != 0) {
            if (m < 0) return 2;
        } else if ((m = ptxfit_opt(argc, argv, &i, "--verify", 0, &v)) != 0) {
            if (m < 0) return 2;
            verify = 1;
        } else if ((m = ptxfit_opt(argc, argv, &i, "-o", 1, &out_path)) != 0 ||
                   (m = ptxfit_opt(argc, argv, &i, "--output", 1, &out_path)) != 0) {
            if (m < 0) return 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            return ptxfit_usage("unknown option '%s'", a);
        } else if (in_path) {
            return ptxfit_usage("one input file only (got '%s' and '%s')", in_path, a);
        } else {
            in_path = a;
        }
    }
    if (!in_path) return ptxfit_usage("missing the input PTX file");
    if (!keep_s) return ptxfit_usage("missing --keep K (the parameters TensorRT passes)");
    if (ptxfit_int(keep_s, 0, INT_MAX, &o.keep) != 0)
        return ptxfit_usage("--keep '%s': expected a count, 0 or more", keep_s);
    if (align_s && (ptxfit_int(align_s, 1, 256, &o.align) != 0 || (o.align & (o.align - 1))))
        return ptxfit_usage("--align '%s': expected a power of 2 from 1 to 256", align_s);
    if (o.arch && !dswa_ptx_fit_arch_ok(o.arch))
        return ptxfit_usage("--arch '%s': expected a plain target such as sm_90", o.arch);
    if (out_path && !*out_path) return ptxfit_usage("-o needs a file name");

    char *buf = NULL;
    size_t len = 0;
    if (ptxfit_read(in_path, &buf, &len) != 0) {
        fprintf(stderr, "dswa ptx-fit: cannot read %s: %s\n", in_path, strerror(errno));
        return 2;
    }
    dswa_ptx_fit_result r;
    dswa_ptx_fit_status st = dswa_ptx_fit(buf, len, &o, &r);
    free(buf);
    if (st != DSWA_PTX_FIT_OK) {
        fprintf(stderr, "dswa ptx-fit: %s: %s%s\n", in_path, r.message ? r.message : "failed",
                st == DSWA_PTX_FIT_REFUSED ? " (nothing written)" : "");
        dswa_ptx_fit_result_free(&r);
        return dswa_ptx_fit_exit_code(st);
    }

    /* The PTX owns standard output unless it goes to a file. */
    FILE *rep = (out_path && strcmp(out_path, "-")) ? stdout : stderr;
    fprintf(rep, "entry %s in %s: .version %s, target %s -> %s\n", r.entry, in_path, r.version,
            r.target_before, r.target_after);
    fprintf(rep, "  signature before (%d parameter%s):\n", r.params_before,
            r.params_before == 1 ? "" : "s");
    ptxfit_print_sig(rep, r.sig_before, 4);
    fprintf(rep, "  signature after (%d parameter%s):\n", r.params_after,
            r.params_after == 1 ? "" : "s");
    ptxfit_print_sig(rep, r.sig_after, 4);
    if (r.params_after < r.params_before)
        fprintf(rep, "  removed (never named by the body): %s\n", r.removed);
    fprintf(rep, "  .align raised to %d on %d pointer parameter%s\n", o.align ? o.align : 16,
            r.aligns_raised, r.aligns_raised == 1 ? "" : "s");
    fprintf(rep, "  mma instructions in the entry: %ld", r.mma);
    if (r.wgmma) fprintf(rep, " (%ld wgmma)", r.wgmma);
    fputc('\n', rep);
    fprintf(rep, "  shared memory declared: %llu bytes static", (unsigned long long)r.shared_bytes);
    if (r.shared_dynamic)
        fprintf(rep, ", and %d array%s sized at launch (%s[]%s)", r.shared_dynamic,
                r.shared_dynamic == 1 ? "" : "s", r.shared_dynamic_name,
                r.shared_dynamic > 1 ? ", ..." : "");
    fputc('\n', rep);
    if (r.shared_bytes > 48u * 1024u)
        fprintf(rep, "  warning: more than the 48 KB of static shared memory TensorRT allows\n");
    if (r.note && *r.note) fprintf(rep, "  note: %s\n", r.note);

    int rc = 0;
    if (verify) {
        char *ptxas = dswa_ptxas_find();
        if (!ptxas) {
            fprintf(rep,
                    "  verify: skipped (no ptxas on PATH, in $CUDA_HOME/bin or "
                    "/usr/local/cuda/bin)\n");
        } else {
            char *msg = NULL;
            int prc = dswa_ptxas_assemble(ptxas, r.text, r.len, r.target_after, &msg);
            if (prc == 0) {
                fprintf(rep, "  verify: %s -arch=%s: ok\n", ptxas, r.target_after);
                ptxfit_print_lines(rep, msg, "    ptxas: "); /* advisories, if any */
            } else if (prc < 0) {
                fprintf(stderr, "dswa ptx-fit: verify: %s (nothing written)\n",
                        msg ? msg : "cannot run ptxas");
                rc = 1;
            } else {
                fflush(rep);
                ptxfit_print_lines(stderr, msg, "");
                fprintf(stderr,
                        "dswa ptx-fit: verify: %s -arch=%s failed (exit %d; its messages are "
                        "above); nothing written\n",
                        ptxas, r.target_after, prc);
                rc = 1;
            }
            free(msg);
            free(ptxas);
        }
    }
    if (rc == 0) {
        if (ptxfit_write(out_path ? out_path : "-", r.text, r.len) != 0)
            rc = 1;
        else if (out_path && strcmp(out_path, "-"))
            fprintf(rep, "  wrote %s (%zu bytes)\n", out_path, r.len);
    }
    dswa_ptx_fit_result_free(&r);
    return rc;
}
