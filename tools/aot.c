/* `dswa aot`: the command-line face of the library's AOT export (dswa.h, dswa_aot_*). Writes
   the kernel the library launches as PTX for TensorRT's AOT plugin path (plain .target, the
   lowest .version that the target and the instructions allow) and, as JSON, everything a
   tensorrt.plugin aot_impl needs to launch it: the entry name, the parameters in launch order
   with their kind and meaning, the int32 extras as formulas of the input shapes, block,
   shared memory and the grid as formulas of B, N, H. The PTX comes from the library (embedded
   at build time): no CUDA toolkit is needed at run time.
   Both outputs are written or neither. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The targets the library exports. It keeps no public list of them, so each of sm_70 to
   sm_130 is asked for (its wide f16 kernel) and kept when exported as itself. Returns the
   count (0 in a build without nvcc). */
static int exported_targets(int *sm, int cap) {
    int n = 0;
    for (int t = 70; t <= 130 && n < cap; t++) {
        char name[16];
        dswa_aot_info info;
        snprintf(name, sizeof name, "sm_%d", t);
        if (dswa_aot_kernel(name, DSWA_F16, DSWA_MATH_DEFAULT, &info) == DSWA_OK && info.target &&
            !strcmp(info.target, name))
            sm[n++] = t;
        dswa_aot_info_free(&info);
    }
    return n;
}

/* The exported targets, as one help line with each one's lowest PTX ISA (with_isa: from
   dswa_ptx_isa_for_target, the library's table) or as a plain list. */
static void targets_text(FILE *f, int with_isa) {
    int sm[64];
    const int n = exported_targets(sm, 64);
    if (with_isa) fputs("                  ", f);
    if (n == 0) fputs("none: this build has no PTX (built without nvcc)", f);
    for (int k = 0; k < n; k++) {
        int major = 0, minor = 0;
        fprintf(f, "%ssm_%d", k ? ", " : "", sm[k]);
        if (with_isa && dswa_ptx_isa_for_target(sm[k], &major, &minor) == 0)
            fprintf(f, ": %d.%d", major, minor);
    }
    if (with_isa) fputc('\n', f);
}

void aot_print_help(FILE *f) {
    fputs(
        "usage: dswa aot --arch sm_XX --dtype f32|f16|bf16 [--math default|tf32|fp32]\n"
        "                [--window W | --window-left L --window-right R] [--ptx-isa X.Y]\n"
        "                [--shape B,N,H [--shared-v] [--scale S] [--lambda L]]\n"
        "                [-o kernel.ptx] [--meta kernel.json]\n"
        "\n"
        "Exports the kernel the library launches, for TensorRT's AOT plugin path\n"
        "(tensorrt.plugin.aot_impl): PTX with a plain .target sm_XX and the lowest .version the\n"
        "target and the instructions allow (listed under --arch), so that older drivers can JIT\n"
        "it; one entry per module. The kernel takes its arguments in TensorRT's order: the input\n"
        "pointers q, k, v, then 20 int32 extras (N, the clamped windows, the float bits of scale\n"
        "and lambda, the element strides), then the output pointer. The PTX was embedded in the\n"
        "library at build time.\n"
        "\n"
        "options:\n"
        "  --arch sm_XX    target (a newer GPU JIT-compiles the closest one below it), with the\n"
        "                  PTX ISA that introduced it (the lowest .version for it):\n",
        f);
    targets_text(f, 1);
    fputs(
        "  --dtype T       f32 (TF32 matrix math), f16 or bf16: of Q, K, V and out alike\n"
        "  --math M        default|tf32|fp32 for f32 (fp32: 3xTF32, band windows only); f16 and\n"
        "                  bf16 take default only (their products accumulate in fp32 anyway)\n"
        "  --window W      window_left = window_right = W (SAME-L: 17)\n"
        "  --window-left L, --window-right R   asymmetric windows\n"
        "                  With windows, the kernel is the one the library launches for them:\n"
        "                  the band kernel when L + R <= 48, else the wide one. Without, the\n"
        "                  wide kernel, which takes any window (WL and WR in the formulas).\n"
        "  --ptx-isa X.Y   write this .version instead of the lowest; refused when too low for\n"
        "                  the target or an instruction, or above what nvcc wrote\n"
        "  --shape B,N,H   also give each extra's value and the grid for this problem (Q, K, V\n"
        "                  contiguous (B, N, 2H, 64), out (B, N, H, 64)); needs windows\n"
        "  --shared-v      with --shape: V is (B, N, H, 64), read by both pairs (v_sp = 0)\n"
        "  --scale S       with --shape: the scale (default 0.125 = 1/sqrt(64))\n"
        "  --lambda L      with --shape: lambda (default 1)\n"
        "  -o FILE         write the PTX to FILE ('-': standard output)\n"
        "  --meta FILE     write the JSON metadata to FILE ('-': standard output)\n"
        "  -h, --help      this text\n"
        "Without -o and --meta the PTX goes to standard output. Both outputs are written whole,\n"
        "or neither (-o and --meta must name different files). Each option may be given once.\n"
        "The metadata's formulas use B (q.shape[0]), N (q.shape[1]), H (q.shape[2] / 2,\n"
        "the output heads), D (q.shape[3], 64); '//' is floor division; float_bits(x) is the\n"
        "int32 with the bits of the fp32 x.\n"
        "\n"
        "Exit status: 0; 1 when the export is unsupported (a build without nvcc, math fp32 with\n"
        "a wide or no window) or a\n"
        "file cannot be written; 2 for bad usage (unknown arch, dtype or math, bad values).\n",
        f);
}

static const char *kind_name(dswa_aot_param_kind k) {
    return k == DSWA_AOT_INPUT ? "input" : k == DSWA_AOT_EXTRA ? "int32" : "output";
}

/* The metadata as JSON, in memory (open_memstream), so that it is written whole or not at all. */
static char *meta_json(const dswa_aot_info *in, const char *ptx_file, const dswa_problem *p, int shared_v,
                       size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    fputs("{\n  \"kernel\": ", f);
    cli_json_str(f, in->kernel_name);
    fputs(",\n  \"family\": ", f);
    cli_json_str(f, in->family);
    fprintf(f, ",\n  \"max_span\": %d,\n  \"target\": ", in->max_span);
    cli_json_str(f, in->target);
    fprintf(f, ",\n  \"ptx_isa\": \"%d.%d\",\n  \"ptx_isa_min\": \"%d.%d\",\n  \"ptx_isa_min_reason\": ",
            in->ptx_isa_major, in->ptx_isa_minor, in->ptx_isa_min_major, in->ptx_isa_min_minor);
    cli_json_str(f, in->ptx_isa_min_reason);
    fprintf(f, ",\n  \"ptx_isa_nvcc\": \"%d.%d\",\n  \"ptx_bytes\": %zu,\n  \"ptx_file\": ", in->toolkit_isa_major,
            in->toolkit_isa_minor, in->ptx_size);
    if (ptx_file && strcmp(ptx_file, "-")) cli_json_str(f, ptx_file);
    else fputs("null", f);
    fputs(",\n  \"dtype\": ", f);
    cli_json_str(f, dswa_dtype_name(in->dtype));
    fputs(",\n  \"math\": ", f);
    cli_json_str(f, dswa_math_name(in->math));
    fprintf(f, ",\n  \"head_dim\": %d,\n", in->head_dim);
    if (in->window_left >= 0)
        fprintf(f, "  \"window_left\": %d,\n  \"window_right\": %d,\n", in->window_left, in->window_right);
    else
        fputs("  \"window_left\": null,\n  \"window_right\": null,\n", f);
    fputs("  \"vars\": {\"B\": \"batch, q.shape[0]\", \"N\": \"sequence length, q.shape[1]\", "
          "\"H\": \"output heads, q.shape[2] / 2\", \"D\": \"head dim, q.shape[3] (must be 64)\"", f);
    if (in->window_left < 0)
        fputs(", \"WL\": \"window_left (an attribute)\", \"WR\": \"window_right (an attribute)\"", f);
    fputs("},\n", f);
    fprintf(f, "  \"launch_order\": \"inputs, then int32 extras, then outputs\",\n"
               "  \"num_inputs\": %d,\n  \"num_extras\": %d,\n  \"num_outputs\": %d,\n  \"params\": [\n",
            in->n_inputs, in->n_extras, in->n_outputs);
    for (int i = 0; i < in->n_params; i++) {
        const dswa_aot_param *q = &in->params[i];
        fprintf(f, "    {\"index\": %d, \"name\": ", i);
        cli_json_str(f, q->name);
        fputs(", \"kind\": ", f);
        cli_json_str(f, kind_name(q->kind));
        fputs(q->kind == DSWA_AOT_EXTRA ? ", \"expr\": " : ", \"shape\": ", f);
        cli_json_str(f, q->expr);
        if (q->expr_shared_v && strcmp(q->expr_shared_v, q->expr)) {
            fputs(q->kind == DSWA_AOT_EXTRA ? ", \"expr_shared_v\": " : ", \"shape_shared_v\": ", f);
            cli_json_str(f, q->expr_shared_v);
        }
        if (in->has_problem && q->kind == DSWA_AOT_EXTRA) fprintf(f, ", \"value\": %d", (int)q->value);
        fputs(", \"meaning\": ", f);
        cli_json_str(f, q->meaning);
        fputs(i + 1 < in->n_params ? "},\n" : "}\n", f);
    }
    fprintf(f, "  ],\n  \"block\": [%u, %u, %u],\n  \"shared_bytes\": %u,\n  \"dynamic_shared_bytes\": %u,\n"
               "  \"grid\": [", in->block[0], in->block[1], in->block[2], in->shared_bytes,
            in->dynamic_shared_bytes);
    for (int d = 0; d < 3; d++) {
        cli_json_str(f, in->grid[d]);
        fputs(d < 2 ? ", " : "]", f);
    }
    if (in->has_problem && p) {
        /* (head_dim and the windows are given once, above) */
        fprintf(f, ",\n  \"problem\": {\"batch\": %d, \"seq_len\": %d, \"heads\": %d, "
                   "\"shared_v\": %s, \"scale\": %.9g, \"lambda\": %.9g},\n  \"grid_values\": [%u, %u, %u]",
                p->batch, p->seq_len, p->heads, shared_v ? "true" : "false", (double)p->scale,
                (double)p->lambda, in->grid_dims[0], in->grid_dims[1], in->grid_dims[2]);
    }
    fputs("\n}\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int parse_float(const char *s, float *out) {
    char *end = NULL;
    double x = strtod(s, &end);
    if (!*s || *end || !(x == x) || x > 3.4e38 || x < -3.4e38) return -1;
    *out = (float)x;
    return 0;
}

int cmd_aot(int argc, char **argv) {
    const char *cmd = "aot";
    const char *arch = NULL, *dtype_s = NULL, *math_s = NULL, *isa = NULL, *out_path = NULL, *meta_path = NULL;
    const char *win = NULL, *wl_s = NULL, *wr_s = NULL, *shape_s = NULL, *scale_s = NULL, *lambda_s = NULL;
    int shared_v = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            aot_print_help(stdout);
            return 0;
        }
#define OPT(name, var)                                                      \
    if ((m = cli_opt_once(cmd, argc, argv, &i, name, &var)) != 0) {       \
        if (m < 0) return 2;                                                \
        continue;                                                           \
    }
        OPT("--arch", arch)
        OPT("--dtype", dtype_s)
        OPT("--math", math_s)
        OPT("--window-left", wl_s)
        OPT("--window-right", wr_s)
        OPT("--window", win)
        OPT("--ptx-isa", isa)
        OPT("--shape", shape_s)
        OPT("--scale", scale_s)
        OPT("--lambda", lambda_s)
        OPT("--meta", meta_path)
        OPT("-o", out_path)
#undef OPT
        if ((m = cli_opt(cmd, argc, argv, &i, "--shared-v", 0, NULL)) != 0) {
            if (m < 0) return 2;
            shared_v = 1;
            continue;
        }
        return cli_usage_error(cmd, a[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", a);
    }
    if (!arch) {
        char *list = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&list, &len);
        if (m) {
            targets_text(m, 0);
            if (fclose(m) != 0) {
                free(list);
                list = NULL;
            }
        }
        cli_usage_error(cmd, "--arch is required (%s)", list ? list : "see --help");
        free(list);
        return 2;
    }
    if (!dtype_s) return cli_usage_error(cmd, "--dtype is required (f32, f16, bf16)");
    dswa_dtype dtype;
    dswa_math math = DSWA_MATH_DEFAULT;
    if (cli_parse_dtype(dtype_s, &dtype))
        return cli_usage_error(cmd, "--dtype: %s", cli_parse_message());
    if (math_s && cli_parse_math(math_s, &math))
        return cli_usage_error(cmd, "--math: %s", cli_parse_message());
    if (cli_math_for_dtypes(cmd, math_s, math, dtype_s, dtype == DSWA_F32)) return 2;
    int32_t wl = -1, wr = -1; /* -1: no windows (the wide kernel, WL and WR in the formulas) */
    if (cli_parse_windows(cmd, win, wl_s, wr_s, &wl, &wr)) return 2;
    if (!shape_s && (shared_v || scale_s || lambda_s))
        return cli_usage_error(cmd, "--shared-v, --scale and --lambda describe a problem: they need --shape");
    if (out_path && meta_path && cli_same_file(out_path, meta_path))
        return cli_usage_error(cmd, "-o %s and --meta %s are the same %s: the metadata would replace the PTX",
                               out_path, meta_path, strcmp(out_path, "-") ? "file" : "output");

    dswa_aot_info info;
    dswa_status s;
    dswa_problem p;
    memset(&p, 0, sizeof p);
    if (shape_s) {
        int64_t v[3];
        if (wl < 0) return cli_usage_error(cmd, "--shape needs the windows (--window, or --window-left and --window-right)");
        if (cli_parse_i64_list(shape_s, 1, INT32_MAX, v, 3) != 3)
            return cli_usage_error(cmd, "--shape %s: must be B,N,H (three positive integers)", shape_s);
        p = dswa_problem_default((int32_t)v[0], (int32_t)v[1], (int32_t)v[2], 64, 0);
        p.window_left = wl;
        p.window_right = wr;
        p.dtype = dtype;
        p.math = math;
        if (shared_v) {
            p.v.pair = 0;
            p.v.seq = (int64_t)v[2] * 64;
            p.v.batch = (int64_t)v[1] * v[2] * 64;
        }
        if (scale_s && parse_float(scale_s, &p.scale)) return cli_usage_error(cmd, "--scale %s: must be a number", scale_s);
        if (lambda_s && parse_float(lambda_s, &p.lambda)) return cli_usage_error(cmd, "--lambda %s: must be a number", lambda_s);
        s = dswa_aot_kernel_for(arch, &p, &info);
    } else {
        s = dswa_aot_kernel_window(arch, dtype, math, wl, wr, &info);
    }
    if (s == DSWA_OK && isa) s = dswa_aot_set_ptx_isa(&info, isa);
    if (s != DSWA_OK) {
        const char *msg = dswa_last_error();
        dswa_aot_info_free(&info);
        if (s == DSWA_ERR_INVALID_ARGUMENT || s == DSWA_ERR_MISALIGNED) return cli_usage_error(cmd, "%s", msg);
        fprintf(stderr, "dswa aot: %s: %s\n", dswa_status_string(s), msg);
        return 1;
    }

    int rc = 0, n = 0;
    cli_output out[2];
    char *json = NULL;
    if (out_path || !meta_path) out[n++] = (cli_output){out_path ? out_path : "-", info.ptx, info.ptx_size};
    if (meta_path) {
        size_t len = 0;
        json = meta_json(&info, out_path, shape_s ? &p : NULL, shared_v, &len);
        if (!json) {
            fprintf(stderr, "dswa aot: out of memory\n");
            rc = 1;
        }
        out[n++] = (cli_output){meta_path, json, len};
    }
    if (rc == 0 && cli_write_outputs(cmd, out, n) != 0) rc = 1;
    free(json);
    if (rc == 0 && out_path && strcmp(out_path, "-"))
        fprintf(stderr, "dswa aot: wrote %s: %s for %s, PTX ISA %d.%d, %zu bytes\n", out_path, info.kernel_name,
                info.target, info.ptx_isa_major, info.ptx_isa_minor, info.ptx_size);
    dswa_aot_info_free(&info);
    return rc;
}
