/* dswa — the command-line tool of the dswa library: the main job (`dswa bench`), a quick
   self-test (`dswa check`), and room for more subcommands in the table below. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);   /* argv[0] is the subcommand's name */
    const char *summary;                 /* one line for `dswa --help` */
    const char *help;                    /* the subcommand's own --help ... */
    void (*print_help)(void);            /* ... or a function printing it to stdout */
} command;

int dswa_cmd_ptx_fit(int argc, char **argv); /* tools/ptx_fit_cmd.c */
void dswa_help_ptx_fit(void);
int dswa_cmd_aot(int argc, char **argv);     /* tools/aot_cmd.c */
void dswa_help_aot(void);

static const char bench_help[] =
    "usage: dswa bench [options]\n"
    "\n"
    "The main job: times the forward pass at SAME-L shapes (B=1, H=24, D=64, WL=WR=17,\n"
    "scale=1/8, lambda=1, N = 17*L) for each dtype and V layout, against the machine's copy\n"
    "bandwidth measured in the same run. Columns:\n"
    "  time_ms  median over the repeats of one forward call; on the GPU the call replayed\n"
    "           from a CUDA graph holding [start event, call, stop event] (how TensorRT runs\n"
    "           it), so the host's API call is not timed\n"
    "  mean_ms  (GPU) the same number of plain calls back to back between two events, per call\n"
    "  call_ms  (GPU) median of plain calls each between two events: includes the host's\n"
    "           launch, since the GPU is idle when the start event runs\n"
    "  GB/s     dswa_min_bytes / time (Q, K for 2H heads; V for 2H heads or H when shared; out)\n"
    "  floor_ms dswa_min_bytes / copy bandwidth, the bandwidth floor\n"
    "  %floor   floor_ms / time_ms, i.e. GB/s as a percentage of the copy bandwidth\n"
    "  GFLOP/s  dswa_useful_flops / time (and per core on the CPU)\n"
    "  rel_err  relative Frobenius error against the float64 reference (same inputs, in the\n"
    "           benchmark's dtype) on sampled query rows, all heads\n"
    "  check    ok, or FAIL when rel_err is above the tolerance or an output was left unwritten\n"
    "Copy bandwidth counts bytes read plus written: on the GPU a device-to-device cudaMemcpy of\n"
    "2 GiB timed with events; on the CPU a memcpy of 512 MiB split over the OpenMP threads.\n"
    "\n"
    "options:\n"
    "  --backend auto|cuda|cpu  auto (default): cuda when a device is usable, else cpu\n"
    "  --L LIST        latent frames, comma-separated (default 256,1292,4096); N = 17*L\n"
    "  --N LIST        sequence lengths instead of (or besides) --L\n"
    "  --dtype LIST    f32,f16,bf16 or all (default all)\n"
    "  --math M        default|tf32|fp32 for f32 (default: default, i.e. TF32 on the GPU)\n"
    "  --v both|full|shared  V as 2H heads (full), shared (pair stride 0, H heads), or both\n"
    "                  (default both)\n"
    "  --repeats R     timed calls per row (default 100 on the GPU, 3 on the CPU)\n"
    "  --warmup W      untimed calls first (default 10 on the GPU, 1 on the CPU)\n"
    "  --rows S        query rows sampled for the error check (default 64)\n"
    "  --seed S        seed of the random normal inputs (default 1)\n"
    "  --json          print one JSON document (machine, settings, every row) instead of the\n"
    "                  table\n"
    "  -h, --help      this text\n"
    "\n"
    "Rows the backend does not implement print as 'unsupported: <reason>'. Progress goes to\n"
    "stderr. Exit status: 0, or 1 when a row failed its check or a CUDA call failed, 2 for\n"
    "bad usage.\n";

static const char check_help[] =
    "usage: dswa check [options]\n"
    "\n"
    "A quick self-test: small random problems (f32, f16, bf16; shared and 2H-head V; asymmetric\n"
    "and wider-than-N windows; B=2; strided and packed layouts; strided output whose gaps must\n"
    "stay untouched) through the CPU backend and, when a device is usable, the CUDA backend,\n"
    "each compared with the float64 reference on the same inputs. Tolerances (relative\n"
    "Frobenius error): f32 1e-5 (CPU, and the math-fp32 case on CUDA), f32 TF32 on CUDA 3e-3,\n"
    "f16/bf16 1e-2. Cases the CUDA backend reports as unsupported are skipped with a note.\n"
    "Prints one line per case.\n"
    "\n"
    "options:\n"
    "  --backend auto|cuda|cpu  auto (default): the CPU, and CUDA when a device is usable\n"
    "  --seed S        seed of the random inputs (default 1)\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 when every case passed (skips allowed), 1 otherwise, 2 for bad usage.\n";

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const char help_help[] =
    "usage: dswa help [SUBCOMMAND]\n"
    "\n"
    "Prints the help of the tool, or of one subcommand.\n";

static const char version_help[] =
    "usage: dswa version\n"
    "\n"
    "Prints the version of the tool and library (also: dswa --version).\n";

/* Later subcommands (aot, ptx-fit) are added here. */
static const command commands[] = {
    {"bench", cmd_bench, "time the forward pass at SAME-L shapes (the main job)", bench_help, NULL},
    {"check", cmd_check, "quick self-test of the backends against the float64 reference",
     check_help, NULL},
    {"aot", dswa_cmd_aot, "export the kernel as PTX + metadata for TensorRT's AOT plugin path",
     NULL, dswa_help_aot},
    {"ptx-fit", dswa_cmd_ptx_fit, "make third-party PTX (e.g. Triton's) fit TensorRT's AOT plugin contract",
     NULL, dswa_help_ptx_fit},
    {"help", cmd_help, "print the help of the tool or of a subcommand", help_help, NULL},
    {"version", cmd_version, "print the version", version_help, NULL},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static const command *find_command(const char *name) {
    for (int i = 0; i < n_commands; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

void cli_print_help(const char *name, FILE *f) {
    const command *c = name ? find_command(name) : NULL;
    if (c) {
        if (c->print_help) {
            fflush(f);
            c->print_help();
        } else {
            fputs(c->help, f);
        }
        return;
    }
    fprintf(f,
            "usage: dswa <subcommand> [options]\n"
            "       dswa --help | --version\n"
            "\n"
            "dswa %s: differential sliding-window attention (SAME-L), CPU and CUDA backends.\n"
            "\n"
            "subcommands:\n",
            DSWA_VERSION_STRING);
    for (int i = 0; i < n_commands; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n'dswa <subcommand> --help' describes the subcommand's options.\n", f);
}

static int cmd_help(int argc, char **argv) {
    if (argc > 2) return cli_usage_error("help", "expects at most one subcommand name");
    if (argc == 2) {
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
            cli_print_help("help", stdout);
            return 0;
        }
        if (!find_command(argv[1]))
            return cli_usage_error("help", "unknown subcommand '%s'", argv[1]);
        cli_print_help(argv[1], stdout);
        return 0;
    }
    cli_print_help(NULL, stdout);
    return 0;
}

static int cmd_version(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cli_print_help("version", stdout);
        return 0;
    }
    if (argc > 1) return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    printf("dswa %s (library %d.%d.%d, CUDA backend %s)\n", DSWA_VERSION_STRING,
           DSWA_VERSION_MAJOR, DSWA_VERSION_MINOR, DSWA_VERSION_PATCH,
#ifdef DSWA_HAVE_CUDA
           "built in"
#else
           "not built"
#endif
    );
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return cli_usage_error(NULL, "missing subcommand");
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        cli_print_help(NULL, stdout);
        return 0;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) return cmd_version(1, argv + 1);
    if (a[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", a);
    const command *c = find_command(a);
    if (!c) return cli_usage_error(NULL, "unknown subcommand '%s'", a);
    return c->run(argc - 1, argv + 1);
}
