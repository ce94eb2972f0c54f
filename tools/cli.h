/* Shared pieces of the dswa command-line tool: the subcommands, outputs written all or none,
   option parsing, random inputs, timing, comparison with the float64 reference, JSON output,
   and a thin, error-checked wrapper over the CUDA runtime (tools/gpu.c; it fails, saying so,
   without DSWA_HAVE_CUDA). */
#ifndef DSWA_CLI_H
#define DSWA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "dswa.h"

/* ---- subcommands ------------------------------------------------------------------------ */
/* Each subcommand `name` has cmd_<name> (returns the exit status; argv[0] is the subcommand's
   name) and <name>_print_help (its --help text: the one home of it). tools/dswa.c lists them. */
int cmd_bench(int argc, char **argv);
void bench_print_help(FILE *f);
int cmd_check(int argc, char **argv);
void check_print_help(FILE *f);
int cmd_aot(int argc, char **argv);
void aot_print_help(FILE *f);
int cmd_ptx_fit(int argc, char **argv);
void ptx_fit_print_help(FILE *f);

/* Prints the help of subcommand `name` (or of the tool when name is NULL) to `f`. */
void cli_print_help(const char *name, FILE *f);

/* ---- outputs ---------------------------------------------------------------------------- */
/* One output of a command: `path` ("-": standard output) and its text. */
typedef struct cli_output {
    const char *path;
    const char *text;
    size_t len;
} cli_output;

/* Writes all the outputs or none: regular files (and new ones) go to temporary files beside
   them, renamed into place once everything is written; devices, pipes and standard output are
   written after the temporary files succeeded. A failure removes the temporary files. 0, or -1
   after one line on stderr. */
int cli_write_outputs(const char *cmd, const cli_output *out, int n);

/* 1 when paths a and b name the same file (the same device and inode, both existing; or the
   same directory and name, both not yet existing), or are both "-" (standard output). Two
   names of one device (/dev/null twice) are not the same output: writing both is harmless. */
int cli_same_file(const char *a, const char *b);

/* ---- option parsing -------------------------------------------------------------------- */
/* Prints "dswa <cmd>: <message> (see 'dswa <cmd> --help')" as one line on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Matches argv[*i] against option `name` ("--L"). Returns 0 when it is another option, 1 when
   it matched (for has_value, *val is the value, from "--L=x" or the next argument, and *i is
   advanced past it), -1 after printing a usage error (missing value, or a value given to a
   flag, an empty value). */
int cli_opt(const char *cmd, int argc, char **argv, int *i, const char *name, int has_value,
            const char **val);
/* cli_opt for an option that takes one value and may be given once: *val must start NULL,
   and a second occurrence is a usage error (-1), not a value silently replacing the first.
   Options whose values add up (lists) use cli_opt. */
int cli_opt_once(const char *cmd, int argc, char **argv, int *i, const char *name,
                 const char **val);

/* Strict parsers: the whole string must be consumed. 0 on success, -1 on a bad value. */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_u64(const char *s, uint64_t *out);
/* Comma-separated integers in [lo, hi]; at most `cap` of them. Returns the count, -1 if bad. */
int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap);
/* A dtype or math name, by the library's parsers (dswa_dtype_parse, dswa_math_parse). 0, or
   -1 with cli_parse_message() saying what the names are. */
int cli_parse_dtype(const char *s, dswa_dtype *out);
int cli_parse_math(const char *s, dswa_math *out);
const char *cli_parse_message(void);
/* Comma-separated dtype names, or "all"; sets flags[dtype]. 0 or -1. */
int cli_parse_dtypes(const char *s, int flags[3]);

/* --window W, or --window-left L with --window-right R (each may be NULL when not given):
   sets *left and *right when given (both from W), leaves them otherwise. 0, or 2 after a usage
   error (both forms, one side alone, not an integer in [0, 2^31)). */
int cli_parse_windows(const char *cmd, const char *w, const char *wl, const char *wr,
                      int32_t *left, int32_t *right);

/* --math M (parsed into math) with --dtype D: a math other than default applies to f32 only,
   so it is a usage error (2, after the message) when f32 (has_f32) is not among the dtypes. */
int cli_math_for_dtypes(const char *cmd, const char *math_s, dswa_math math, const char *dtype_s,
                        int has_f32);

typedef enum cli_backend { CLI_BACKEND_AUTO = 0, CLI_BACKEND_CPU, CLI_BACKEND_CUDA } cli_backend;
int cli_parse_backend(const char *s, cli_backend *out);

/* ---- data ----------------------------------------------------------------------------- */
/* Fills x[0..n) with standard normal values determined by (seed, stream) alone, in parallel. */
void cli_fill_normal(float *x, size_t n, uint64_t seed, uint64_t stream);
/* Converts n floats to `dtype` (f32: copy) into dst, which holds n elements of that dtype:
   dswa_convert_from_f32 over the OpenMP threads. */
void cli_convert_from_f32(void *dst, const float *src, size_t n, dswa_dtype dtype);
/* 1 if element i of the buffer consists of 0xFF bytes only (the poison pattern). */
int cli_is_poison(const void *buf, int64_t i, dswa_dtype dtype);

double cli_now(void);                      /* monotonic seconds */
double cli_median(double *x, int n);       /* sorts x */
void *cli_malloc(size_t bytes);            /* 64-byte aligned; NULL on failure */
void cli_free(void *p);

/* ---- reference ------------------------------------------------------------------------ */
/* Relative Frobenius error of the outputs at `rows` (all batches and heads) against the
   float64 reference computed from the same host inputs (in the problem's dtype). `out` is a
   host buffer laid out as p->out. Returns NaN on allocation failure, INFINITY when an output
   is non-finite where the reference is finite (or the reverse). *max_abs receives the
   largest absolute difference when not NULL. `rows` ascend; runs of consecutive rows are
   computed together. */
double cli_ref_rel_error(const dswa_problem *p, const void *q, const void *k, const void *v,
                         const void *out, const int32_t *rows, int nrows, double *max_abs);

/* ---- JSON ----------------------------------------------------------------------------- */
void cli_json_str(FILE *f, const char *s);      /* a quoted, escaped string */
void cli_json_num(FILE *f, double x);           /* a number, or null when not finite */

/* ---- machine -------------------------------------------------------------------------- */
void cli_cpu_name(char *buf, size_t n);         /* /proc/cpuinfo's model name, or "unknown CPU" */
void cli_date_utc(char *buf, size_t n);         /* ISO 8601 */
int cli_threads(void);                          /* omp_get_max_threads() */
/* Copy bandwidth of host memory in GB/s (bytes read + written per second). */
double cli_cpu_copy_bandwidth(size_t bytes, int repeats);

/* ---- CUDA runtime wrapper ------------------------------------------------------------- */
/* Every function returns 0 on success and -1 after recording a message that names the call
   and the CUDA error (read it with gpu_error()). Without DSWA_HAVE_CUDA they all fail. */
const char *gpu_error(void);
int gpu_init(char *name, size_t name_len);      /* selects the current device, names it */
int gpu_alloc(void **p, size_t bytes, const char *what);
void gpu_free(void *p);
int gpu_upload(void *dst, const void *src, size_t bytes, const char *what);
int gpu_download(void *dst, const void *src, size_t bytes, const char *what);
int gpu_poison(void *p, size_t bytes);          /* memset 0xFF */
int gpu_sync(const char *what);                 /* synchronize, reporting any pending error */
/* Events on the default stream: gpu_timer_start records the first, gpu_timer_stop records
   the second, waits and returns the elapsed milliseconds (negative on failure). */
int gpu_timer_create(void);
void gpu_timer_destroy(void);
int gpu_timer_start(void);
double gpu_timer_stop(void);
/* Device-to-device copy bandwidth in GB/s (bytes read + written), median of `repeats`
   copies of `bytes`; negative on failure. */
double gpu_copy_bandwidth(size_t bytes, int repeats);
void gpu_versions(int *runtime, int *driver);

#endif
