/* `dswa aot`: the command-line face of the library's AOT export (dswa.h, dswa_aot_*). Writes
   the kernel the library launches (the op's, or with --op samel the fused SAME-L block's) as
   PTX for TensorRT's AOT plugin path (plain .target, the
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
        "                [--op diff_swa|samel] [--rot-dims R]\n"
        "                [--window W | --window-left L --window-right R] [--ptx-isa X.Y]\n"
        "                [--shape B,N,H [--scale S] [--lambda L] [--shared-v]\n"
        "                 [--pos-offset P] [--rope-base F | --rope-freq F0,F1,...]\n"
        "                 [--q-alpha A] [--k-alpha A]]\n"
        "                [-o kernel.ptx] [--meta kernel.json]\n"
        "\n"
        "Exports the kernel the library launches, for TensorRT's AOT plugin path\n"
        "(tensorrt.plugin.aot_impl): PTX with a plain .target sm_XX and the lowest .version the\n"
        "target and the instructions allow (listed under --arch), so that older drivers can JIT\n"
        "it; one entry per module. The kernel takes its arguments in TensorRT's order: the input\n"
        "pointers, then int32 extras, then the output pointer. The op's (--op diff_swa): q, k, v;\n"
        "20 extras (N, the clamped windows, the float bits of scale and lambda, the element\n"
        "strides); out. The fused SAME-L block's (--op samel: DyT, RoPE and the op from the packed\n"
        "projection in one pass): x (B, N, 5*H*64), q_gamma, q_beta, k_gamma, k_beta (64 floats\n"
        "each); 48 extras (N, the windows, scale, lambda, the strides, rot_dims, the float bits of\n"
        "RoPE's 32 frequencies freq0 ... freq31 (rot_dims / 2 used, the rest 0), pos_offset, the\n"
        "float bits of both alphas); out (B, N, H*64). The PTX was\n"
        "embedded in the library at build time.\n"
        "\n"
        "options:\n"
        "  --arch sm_XX    target (a newer GPU JIT-compiles the closest one below it), with the\n"
        "                  PTX ISA that introduced it (the lowest .version for it):\n",
        f);
    targets_text(f, 1);
    fputs(
        "  --dtype T       f32 (TF32 matrix math), f16 or bf16: of the inputs and out alike\n"
        "  --math M        default|tf32|fp32 for f32 (fp32: 3xTF32, band windows only); f16 and\n"
        "                  bf16 take default only (their products accumulate in fp32 anyway)\n"
        "  --op O          diff_swa (default): the op; samel: the fused SAME-L block\n"
        "  --rot-dims R    samel: the dims RoPE rotates (even, 0 to 64; default 32, SAME-L's)\n"
        "  --window W      window_left = window_right = W (SAME-L: 17)\n"
        "  --window-left L, --window-right R   asymmetric windows\n"
        "                  With windows, the kernel is the one the library launches for them:\n"
        "                  the band kernel when L + R <= 48 (samel: and rot_dims on whole\n"
        "                  16-byte chunks), else the wide one (samel: the scalar one). Without,\n"
        "                  the kernel that takes any window (WL and WR in the formulas).\n"
        "  --ptx-isa X.Y   write this .version instead of the lowest; refused when too low for\n"
        "                  the target or an instruction, or above what nvcc wrote\n"
        "  --shape B,N,H   also give each extra's value and the grid for this problem (Q, K, V\n"
        "                  contiguous (B, N, 2H, 64), out (B, N, H, 64); samel: x contiguous\n"
        "                  (B, N, 5*H*64), out (B, N, H*64)); needs windows\n"
        "  --scale S       with --shape: the scale (default 0.125 = 1/sqrt(64))\n"
        "  --lambda L      with --shape: lambda (default 1)\n"
        "  --shared-v      with --shape, diff_swa: V is (B, N, H, 64), read by both pairs\n"
        "  --pos-offset P  with --shape, samel: the position of row 0 (default 0)\n"
        "  --rope-base F   with --shape, samel: the RoPE base (default 10000): frequencies\n"
        "                  fp32(1 / F^(2j / rot_dims))\n"
        "  --rope-freq F0,F1,...   with --shape, samel: RoPE's rot_dims / 2 frequencies as the\n"
        "                  model holds them (row 1 of its rotary table), instead of a base\n"
        "  --q-alpha A, --k-alpha A   with --shape, samel: the DyT alphas (default 1)\n"
        "  -o FILE         write the PTX to FILE ('-': standard output)\n"
        "  --meta FILE     write the JSON metadata to FILE ('-': standard output)\n"
        "  -h, --help      this text\n"
        "Without -o and --meta the PTX goes to standard output. Both outputs are written whole,\n"
        "or neither (-o and --meta must name different files). Each option may be given once.\n"
        "The metadata's formulas use B (q.shape[0]), N (q.shape[1]), H (q.shape[2] / 2,\n"
        "the output heads), D (q.shape[3], 64); samel: B, N, H from x (B, N, 5*H*D), and the\n"
        "attributes freq0 ... freq31 (RoPE's frequencies, 0 past rot_dims / 2), POS (pos_offset),\n"
        "q_alpha, k_alpha; '//' is floor\n"
        "division; float_bits(x) is the int32 with the bits of the fp32 x.\n"
        "\n"
        "Exit status: 0; 1 when the export is unsupported (a build without nvcc, the op with\n"
        "math fp32 and a wide or no window) or a file cannot be written; 2 for bad usage\n"
        "(unknown arch, dtype, math or op, bad values).\n",
        f);
}

static const char *kind_name(dswa_aot_param_kind k) {
    return k == DSWA_AOT_INPUT ? "input" : k == DSWA_AOT_EXTRA ? "int32" : "output";
}

/* The problem of --shape: the op's (p, shared_v) or the fused block's (sp, with its RoPE
   frequencies resolved); both NULL without. */
typedef struct aot_problem {
    const dswa_problem *p;
    int shared_v;
    const dswa_samel_problem *sp;
    float freq[DSWA_AOT_ROPE_FREQS];
} aot_problem;

/* The metadata as JSON, in memory (open_memstream), so that it is written whole or not at all. */
static char *meta_json(const dswa_aot_info *in, const char *ptx_file, const aot_problem *pr, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    const int samel = !strcmp(in->op, "samel");
    fputs("{\n  \"op\": ", f);
    cli_json_str(f, in->op);
    fputs(",\n  \"kernel\": ", f);
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
    if (samel) fprintf(f, "  \"rot_dims\": %d,\n", (int)in->rot_dims);
    if (in->window_left >= 0)
        fprintf(f, "  \"window_left\": %d,\n  \"window_right\": %d,\n", in->window_left, in->window_right);
    else
        fputs("  \"window_left\": null,\n  \"window_right\": null,\n", f);
    if (samel)
        fputs("  \"vars\": {\"B\": \"batch, x.shape[0]\", \"N\": \"sequence length, x.shape[1]\", "
              "\"H\": \"heads, x.shape[2] / (5 * D)\", \"D\": \"head dim, q_gamma.shape[0] (must be 64)\", "
              "\"freqJ\": \"RoPE frequency J, J = 0 ... 31 (the attribute freq; 0 from J = rot_dims / 2 on)\", "
              "\"POS\": \"pos_offset (an attribute)\", "
              "\"q_alpha\": \"q_norm.alpha (an attribute)\", \"k_alpha\": \"k_norm.alpha (an attribute)\"", f);
    else
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
    /* (head_dim, rot_dims and the windows are given once, above) */
    if (in->has_problem && pr->p)
        fprintf(f, ",\n  \"problem\": {\"batch\": %d, \"seq_len\": %d, \"heads\": %d, \"shared_v\": %s, "
                   "\"scale\": %.9g, \"lambda\": %.9g}", pr->p->batch, pr->p->seq_len, pr->p->heads,
                pr->shared_v ? "true" : "false", (double)pr->p->scale, (double)pr->p->lambda);
    if (in->has_problem && pr->sp) {
        fprintf(f, ",\n  \"problem\": {\"batch\": %d, \"seq_len\": %d, \"heads\": %d, \"scale\": %.9g, "
                   "\"lambda\": %.9g, \"rope_freq\": [", pr->sp->batch, pr->sp->seq_len, pr->sp->heads,
                (double)pr->sp->scale, (double)pr->sp->lambda);
        for (int j = 0; j < pr->sp->rot_dims / 2; j++) fprintf(f, "%s%.9g", j ? ", " : "", (double)pr->freq[j]);
        fprintf(f, "], \"pos_offset\": %d, \"q_alpha\": %.9g, \"k_alpha\": %.9g}", (int)pr->sp->pos_offset,
                (double)pr->sp->q_norm.alpha, (double)pr->sp->k_norm.alpha);
    }
    if (in->has_problem)
        fprintf(f, ",\n  \"grid_values\": [%u, %u, %u]", in->grid_dims[0], in->grid_dims[1], in->grid_dims[2]);
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

/* --rope-freq: exactly rot / 2 comma-separated numbers. */
static int parse_float_list(const char *cmd, const char *s, int64_t rot, float *out) {
    const int want = rot % 2 == 0 && rot <= 2 * DSWA_AOT_ROPE_FREQS ? (int)(rot / 2) : -1;
    char buf[32];
    int n = 0;
    for (const char *a = s;; n++) {
        const char *b = strchr(a, ',');
        size_t len = b ? (size_t)(b - a) : strlen(a);
        if (len >= sizeof buf || n >= DSWA_AOT_ROPE_FREQS) break;
        memcpy(buf, a, len);
        buf[len] = 0;
        if (parse_float(buf, &out[n])) {
            cli_usage_error(cmd, "--rope-freq: '%s' is not a number", buf);
            return -1;
        }
        if (!b) {
            n++;
            if (n == want) return 0;
            break;
        }
        a = b + 1;
    }
    if (want < 0)
        cli_usage_error(cmd, "--rope-freq needs an even --rot-dims from 0 to %d (not %lld)", 2 * DSWA_AOT_ROPE_FREQS, (long long)rot);
    else cli_usage_error(cmd, "--rope-freq %s: must be rot_dims / 2 = %d comma-separated numbers", s, want);
    return -1;
}

int cmd_aot(int argc, char **argv) {
    const char *cmd = "aot";
    const char *arch = NULL, *dtype_s = NULL, *math_s = NULL, *isa = NULL, *out_path = NULL, *meta_path = NULL;
    const char *win = NULL, *wl_s = NULL, *wr_s = NULL, *shape_s = NULL, *scale_s = NULL, *lambda_s = NULL;
    const char *op_s = NULL, *rot_s = NULL, *pos_s = NULL, *base_s = NULL, *freq_s = NULL, *qa_s = NULL;
    const char *ka_s = NULL;
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
        OPT("--op", op_s)
        OPT("--rot-dims", rot_s)
        OPT("--pos-offset", pos_s)
        OPT("--rope-base", base_s)
        OPT("--rope-freq", freq_s)
        OPT("--q-alpha", qa_s)
        OPT("--k-alpha", ka_s)
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
    if (op_s && strcmp(op_s, "diff_swa") && strcmp(op_s, "samel"))
        return cli_usage_error(cmd, "--op: '%s' is not diff_swa or samel", op_s); /* (bench's words) */
    const int samel = op_s && !strcmp(op_s, "samel");
    if (!samel && (rot_s || pos_s || base_s || freq_s || qa_s || ka_s))
        return cli_usage_error(cmd, "--rot-dims, --pos-offset, --rope-base, --rope-freq, --q-alpha and --k-alpha "
                               "describe the fused block: they need --op samel");
    if (base_s && freq_s)
        return cli_usage_error(cmd, "--rope-base and --rope-freq both give RoPE's frequencies: give one");
    if (samel && shared_v)
        return cli_usage_error(cmd, "--shared-v: the fused block's V is a chunk of the packed input, always read "
                               "by both pairs");
    if (!shape_s && (shared_v || scale_s || lambda_s || pos_s || base_s || freq_s || qa_s || ka_s))
        return cli_usage_error(cmd, "--shared-v, --scale, --lambda, --pos-offset, --rope-base, --rope-freq, "
                               "--q-alpha and --k-alpha describe a problem: they need --shape");
    int64_t rot = 32; /* SAME-L's; the library refuses odd values and values above 64 */
    if (rot_s && cli_parse_i64(rot_s, 0, INT32_MAX, &rot))
        return cli_usage_error(cmd, "--rot-dims: '%s' is not an integer from 0 to 2^31 - 1", rot_s);
    if (out_path && meta_path && cli_same_file(out_path, meta_path))
        return cli_usage_error(cmd, "-o %s and --meta %s are the same %s: the metadata would replace the PTX",
                               out_path, meta_path, strcmp(out_path, "-") ? "file" : "output");

    dswa_aot_info info;
    dswa_status s;
    dswa_problem p;
    dswa_samel_problem sp;
    aot_problem pr = {NULL, shared_v, NULL, {0}};
    if (shape_s) {
        int64_t v[3], pos = 0;
        float scale = 0.125f, lambda = 1.0f, base = 10000.0f, qa = 1.0f, ka = 1.0f;
        if (wl < 0) return cli_usage_error(cmd, "--shape needs the windows (--window, or --window-left and --window-right)");
        if (cli_parse_i64_list(shape_s, 1, INT32_MAX, v, 3) != 3)
            return cli_usage_error(cmd, "--shape %s: must be B,N,H (three positive integers)", shape_s);
        const char *const fs[5] = {scale_s, lambda_s, base_s, qa_s, ka_s};
        static const char *const fn[5] = {"--scale", "--lambda", "--rope-base", "--q-alpha", "--k-alpha"};
        float *const fv[5] = {&scale, &lambda, &base, &qa, &ka};
        for (int k = 0; k < 5; k++)
            if (fs[k] && parse_float(fs[k], fv[k])) return cli_usage_error(cmd, "%s %s: must be a number", fn[k], fs[k]);
        if (pos_s && cli_parse_i64(pos_s, 0, INT32_MAX, &pos))
            return cli_usage_error(cmd, "--pos-offset: '%s' is not an integer from 0 to 2^31 - 1", pos_s);
        if (samel && freq_s && parse_float_list(cmd, freq_s, rot, pr.freq)) return 2;
        if (samel && !freq_s && rot % 2 == 0 && rot <= 2 * DSWA_AOT_ROPE_FREQS) dswa_rope_frequencies((int32_t)rot, base, pr.freq);
        if (samel) {
            sp = dswa_samel_problem_default((int32_t)v[0], (int32_t)v[1], (int32_t)v[2]);
            sp.window_left = wl;
            sp.window_right = wr;
            sp.dtype = dtype;
            sp.math = math;
            sp.scale = scale;
            sp.lambda = lambda;
            sp.rot_dims = (int32_t)rot;
            sp.rope_base = base;
            sp.rope_freq = freq_s ? pr.freq : NULL;
            sp.pos_offset = (int32_t)pos;
            sp.q_norm.alpha = qa;
            sp.k_norm.alpha = ka;
            pr.sp = &sp;
            s = dswa_aot_samel_kernel_for(arch, &sp, &info);
        } else {
            p = dswa_problem_default((int32_t)v[0], (int32_t)v[1], (int32_t)v[2], 64, 0);
            p.window_left = wl;
            p.window_right = wr;
            p.dtype = dtype;
            p.math = math;
            p.scale = scale;
            p.lambda = lambda;
            if (shared_v) {
                p.v.pair = 0;
                p.v.seq = (int64_t)v[2] * 64;
                p.v.batch = (int64_t)v[1] * v[2] * 64;
            }
            pr.p = &p;
            s = dswa_aot_kernel_for(arch, &p, &info);
        }
    } else if (samel) {
        s = dswa_aot_samel_kernel(arch, dtype, math, wl, wr, (int32_t)rot, &info);
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
        json = meta_json(&info, out_path, &pr, &len);
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
