/* dswa — the command-line tool of the dswa library: the main job (`dswa bench`), a quick
   self-test (`dswa check`), the export for TensorRT's AOT plugin path (`dswa aot`) and the
   fitting of third-party PTX to it (`dswa ptx-fit`). Each subcommand lives in its own file
   with its help text; the table below lists them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);   /* cmd_<name>; argv[0] is the subcommand's name */
    const char *summary;                 /* one line for `dswa --help` */
    void (*print_help)(FILE *f);         /* <name>_print_help: the subcommand's own --help */
} command;

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static void help_print_help(FILE *f) {
    fputs("usage: dswa help [SUBCOMMAND]\n"
          "\n"
          "Prints the help of the tool, or of one subcommand.\n",
          f);
}

static void version_print_help(FILE *f) {
    fputs("usage: dswa version\n"
          "\n"
          "Prints the version of the tool and library (also: dswa --version).\n",
          f);
}

static const command commands[] = {
    {"bench", cmd_bench, "time the forward pass at SAME-L shapes (the main job)", bench_print_help},
    {"check", cmd_check, "quick self-test of the backends against the float64 reference",
     check_print_help},
    {"aot", cmd_aot, "export the kernel as PTX + metadata for TensorRT's AOT plugin path",
     aot_print_help},
    {"ptx-fit", cmd_ptx_fit, "make third-party PTX (e.g. Triton's) fit TensorRT's AOT plugin contract",
     ptx_fit_print_help},
    {"help", cmd_help, "print the help of the tool or of a subcommand", help_print_help},
    {"version", cmd_version, "print the version", version_print_help},
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
        c->print_help(f);
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

/* The one check, after every subcommand, that standard output reached its destination (a
   full disk, a closed pipe: not); else one line on stderr and exit status 1. `rc` is the
   command's status: a failed command has said why. */
static int stdout_done(const char *cmd, int rc) {
    errno = 0;
    const int flushed = fflush(stdout) == 0;
    if (rc != 0 || (flushed && !ferror(stdout))) return rc;
    fprintf(stderr, "dswa%s%s: cannot write to standard output: %s\n", cmd ? " " : "", cmd ? cmd : "",
            !flushed && errno ? strerror(errno) : "a write failed");
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return cli_usage_error(NULL, "missing subcommand");
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        cli_print_help(NULL, stdout);
        return stdout_done(NULL, 0);
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) return stdout_done(NULL, cmd_version(1, argv + 1));
    if (a[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", a);
    const command *c = find_command(a);
    if (!c) return cli_usage_error(NULL, "unknown subcommand '%s'", a);
    return stdout_done(c->name, c->run(argc - 1, argv + 1));
}
