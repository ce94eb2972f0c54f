/* Option parsing, random inputs, conversions, timing, JSON and machine information shared by
   the subcommands of the dswa tool. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <omp.h>

#include "cli.h"

/* ---- option parsing -------------------------------------------------------------------- */

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "dswa %s: %s (see 'dswa %s --help')\n", cmd, msg, cmd);
    else
        fprintf(stderr, "dswa: %s (see 'dswa --help')\n", msg);
    return 2;
}

int cli_opt(const char *cmd, int argc, char **argv, int *i, const char *name, int has_value,
            const char **val) {
    const char *a = argv[*i];
    const size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '=')) return 0;
    if (!has_value) {
        if (a[n] == '=') {
            cli_usage_error(cmd, "option %s takes no value", name);
            return -1;
        }
        return 1;
    }
    if (a[n] == '=') {
        *val = a + n + 1;
    } else {
        if (*i + 1 >= argc) {
            cli_usage_error(cmd, "option %s needs a value", name);
            return -1;
        }
        *val = argv[++*i];
    }
    /* An empty value (-o '', --window=) names nothing: refused here, for every option. */
    if (!**val) {
        cli_usage_error(cmd, "option %s: the value is empty", name);
        return -1;
    }
    return 1;
}

int cli_opt_once(const char *cmd, int argc, char **argv, int *i, const char *name,
                 const char **val) {
    const char *first = *val;
    const int m = cli_opt(cmd, argc, argv, i, name, 1, val);
    if (m == 1 && first) {
        cli_usage_error(cmd, "%s given twice ('%s', then '%s'): give it once", name, first, *val);
        return -1;
    }
    return m;
}

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9'))) return -1;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end != '\0' || end == s || x < lo || x > hi) return -1;
    *out = (int64_t)x;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || *end != '\0' || end == s) return -1;
    *out = (uint64_t)x;
    return 0;
}

int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap) {
    char buf[256];
    int n = 0;
    if (!s || !*s || strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (n >= cap || cli_parse_i64(p, lo, hi, &out[n]) != 0) return -1;
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* The library's parsers: the names have one home (dswa_dtype_name, dswa_math_name). */
int cli_parse_dtype(const char *s, dswa_dtype *out) { return dswa_dtype_parse(s, out) == DSWA_OK ? 0 : -1; }
int cli_parse_math(const char *s, dswa_math *out) { return dswa_math_parse(s, out) == DSWA_OK ? 0 : -1; }
const char *cli_parse_message(void) { return dswa_last_error(); }

int cli_parse_dtypes(const char *s, int flags[3]) {
    char buf[128];
    int f[3] = {0, 0, 0};
    if (!s || !*s || strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        dswa_dtype t;
        if (comma) *comma = '\0';
        if (!strcmp(p, "all")) f[0] = f[1] = f[2] = 1;
        else if (cli_parse_dtype(p, &t) == 0) f[t] = 1;
        else return -1;
        if (!comma) break;
        p = comma + 1;
    }
    memcpy(flags, f, sizeof f);
    return 0;
}

int cli_parse_windows(const char *cmd, const char *w, const char *wl, const char *wr,
                      int32_t *left, int32_t *right) {
    int64_t x;
    if (w && (wl || wr))
        return cli_usage_error(cmd, "--window and --window-left/--window-right exclude each other");
    if (!wl != !wr) return cli_usage_error(cmd, "--window-left and --window-right go together");
    const char *names[3] = {"--window", "--window-left", "--window-right"}, *vals[3] = {w, wl, wr};
    int32_t *dst[3] = {left, left, right};
    for (int k = 0; k < 3; k++) {
        if (!vals[k]) continue;
        if (cli_parse_i64(vals[k], 0, INT32_MAX, &x))
            return cli_usage_error(cmd, "%s: '%s' is not an integer from 0 to 2^31 - 1", names[k],
                                   vals[k]);
        *dst[k] = (int32_t)x;
        if (k == 0) *right = (int32_t)x;
    }
    return 0;
}

int cli_math_for_dtypes(const char *cmd, const char *math_s, dswa_math math, const char *dtype_s,
                        int has_f32) {
    if (math == DSWA_MATH_DEFAULT || has_f32) return 0;
    return cli_usage_error(cmd, "--math %s applies to f32 only: %s is multiplied as it is stored, "
                           "with fp32 accumulation (leave --math out)", math_s, dtype_s);
}

int cli_parse_backend(const char *s, cli_backend *out) {
    if (!strcmp(s, "auto")) *out = CLI_BACKEND_AUTO;
    else if (!strcmp(s, "cpu")) *out = CLI_BACKEND_CPU;
    else if (!strcmp(s, "cuda")) *out = CLI_BACKEND_CUDA;
    else return -1;
    return 0;
}

/* ---- data ----------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counter-based Box-Muller: values depend only on (seed, stream, index), not on threads. */
void cli_fill_normal(float *x, size_t n, uint64_t seed, uint64_t stream) {
    const uint64_t key = splitmix64(seed ^ splitmix64(stream + 0x632be59bd9b4e019ull));
    const int64_t pairs = (int64_t)((n + 1) / 2);
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < pairs; m++) {
        const uint64_t a = splitmix64(key + 2 * (uint64_t)m);
        const uint64_t b = splitmix64(key + 2 * (uint64_t)m + 1);
        const float u1 = (float)((a >> 40) + 1) * 5.9604644775390625e-8f;   /* (0, 1] */
        const float u2 = (float)(b >> 40) * 5.9604644775390625e-8f;         /* [0, 1) */
        const float r = sqrtf(-2.0f * logf(u1));
        const float t = 6.2831853071795865f * u2;
        const size_t e = 2 * (size_t)m;
        x[e] = r * cosf(t);
        if (e + 1 < n) x[e + 1] = r * sinf(t);
    }
}

/* In chunks over the OpenMP threads: the library converts one span at a time. */
void cli_convert_from_f32(void *dst, const float *src, size_t n, dswa_dtype dtype) {
    const size_t es = dswa_dtype_size(dtype), chunk = (size_t)1 << 16;
    const int64_t nchunks = (int64_t)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; c++) {
        const size_t lo = (size_t)c * chunk, len = n - lo < chunk ? n - lo : chunk;
        dswa_convert_from_f32(dtype, src + lo, (char *)dst + lo * es, len);
    }
}

int cli_is_poison(const void *buf, int64_t i, dswa_dtype dtype) {
    if (dtype == DSWA_F32) return ((const uint32_t *)buf)[i] == 0xffffffffu;
    return ((const uint16_t *)buf)[i] == 0xffffu;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void *cli_malloc(size_t bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}

void cli_free(void *p) { free(p); }

/* ---- JSON ----------------------------------------------------------------------------- */

void cli_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c == '\n') fputs("\\n", f);
        else if (*c == '\t') fputs("\\t", f);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

void cli_json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

/* ---- machine -------------------------------------------------------------------------- */

void cli_cpu_name(char *buf, size_t n) {
    char line[512];
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(buf, n, "%s", c);
            break;
        }
    }
    fclose(f);
}

void cli_date_utc(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else snprintf(buf, n, "unknown");
}

int cli_threads(void) { return omp_get_max_threads(); }

double cli_cpu_copy_bandwidth(size_t bytes, int repeats) {
    char *src = cli_malloc(bytes), *dst = cli_malloc(bytes);
    double t[16];
    if (!src || !dst) {
        cli_free(src);
        cli_free(dst);
        return -1.0;
    }
    if (repeats > 16) repeats = 16;
    if (repeats < 1) repeats = 1;
    /* First touch from the threads that will copy, as the backend's threads would. */
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const size_t chunk = (bytes / (size_t)nt + 63) / 64 * 64;
        const size_t lo = chunk * (size_t)id < bytes ? chunk * (size_t)id : bytes;
        const size_t hi = lo + chunk < bytes ? lo + chunk : bytes;
        memset(src + lo, 1, hi - lo);
        memset(dst + lo, 0, hi - lo);
    }
    for (int r = -1; r < repeats; r++) {   /* r = -1: warm-up */
        const double t0 = cli_now();
#pragma omp parallel
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t chunk = (bytes / (size_t)nt + 63) / 64 * 64;
            const size_t lo = chunk * (size_t)id < bytes ? chunk * (size_t)id : bytes;
            const size_t hi = lo + chunk < bytes ? lo + chunk : bytes;
            memcpy(dst + lo, src + lo, hi - lo);
        }
        const double dt = cli_now() - t0;
        if (r >= 0) t[r] = dt;
    }
    /* Keep the copy observable so it cannot be dropped. */
    volatile char sink = dst[bytes / 2];
    (void)sink;
    cli_free(src);
    cli_free(dst);
    return 2.0 * (double)bytes / cli_median(t, repeats) / 1e9;
}

/* ---- outputs ---------------------------------------------------------------------------- */

int cli_same_file(const char *a, const char *b) {
    if (!strcmp(a, "-") || !strcmp(b, "-")) return !strcmp(a, b);
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && S_ISREG(sa.st_mode);
    if (ea || eb) return 0;
    /* Neither exists yet: the same name in the same directory (by identity) will be one file. */
    char *da = strdup(a), *db = strdup(b);
    int same = 0;
    if (da && db) {
        char *sla = strrchr(da, '/'), *slb = strrchr(db, '/');
        const char *na = sla ? sla + 1 : da, *nb = slb ? slb + 1 : db;
        const char *pa = sla ? (sla == da ? "/" : da) : ".", *pb = slb ? (slb == db ? "/" : db) : ".";
        if (sla) *sla = '\0';
        if (slb) *slb = '\0';
        struct stat qa, qb;
        same = !strcmp(na, nb) && stat(pa, &qa) == 0 && stat(pb, &qb) == 0 &&
               qa.st_dev == qb.st_dev && qa.st_ino == qb.st_ino;
    }
    free(da);
    free(db);
    return same;
}

/* Writes len bytes to an open stream and closes it (unless it is stdout, which is flushed).
   0, or the errno of the failure. */
static int put_all(FILE *f, const char *text, size_t len) {
    int e = 0;
    errno = 0;
    if (fwrite(text, 1, len, f) != len) e = errno ? errno : EIO;
    if (f == stdout) {
        if (fflush(f) != 0 && !e) e = errno ? errno : EIO;
    } else if (fclose(f) != 0 && !e) {
        e = errno ? errno : EIO; /* a failed flush is the error to report */
    }
    return e;
}

int cli_write_outputs(const char *cmd, const cli_output *out, int n) {
    char *tmp[8] = {0};
    int e = 0, bad = -1;
    if (n < 1 || n > 8) {
        fprintf(stderr, "dswa %s: internal error: %d outputs (1 to 8 are written)\n", cmd, n);
        return -1;
    }
    const mode_t um = umask(0);
    umask(um);
    /* 1: every regular (or new) file into a temporary file beside it */
    for (int k = 0; k < n && !e; k++) {
        struct stat sb;
        if (!strcmp(out[k].path, "-") || (stat(out[k].path, &sb) == 0 && !S_ISREG(sb.st_mode)))
            continue;
        const size_t len = strlen(out[k].path);
        tmp[k] = malloc(len + 16);
        if (!tmp[k]) {
            e = ENOMEM, bad = k;
            break;
        }
        memcpy(tmp[k], out[k].path, len);
        memcpy(tmp[k] + len, ".tmp-XXXXXX", 12);
        const int fd = mkstemp(tmp[k]);
        FILE *f = NULL;
        if (fd >= 0) {
            (void)fchmod(fd, 0666 & ~um); /* mkstemp makes 0600; a file gets 0666 & ~umask */
            if (!(f = fdopen(fd, "wb"))) close(fd);
        }
        if (!f) {
            e = errno ? errno : EIO, bad = k;
            if (fd < 0) {
                free(tmp[k]);
                tmp[k] = NULL;
            }
            break;
        }
        if ((e = put_all(f, out[k].text, out[k].len)) != 0) bad = k;
    }
    /* 2: standard output, devices and pipes, once the files are safe */
    for (int k = 0; k < n && !e; k++) {
        if (tmp[k]) continue;
        FILE *f = strcmp(out[k].path, "-") ? fopen(out[k].path, "wb") : stdout;
        if (!f) e = errno ? errno : EIO;
        else e = put_all(f, out[k].text, out[k].len);
        if (e) bad = k;
    }
    /* 3: the files into place */
    int renamed = 0;
    for (int k = 0; k < n && !e; k++) {
        if (tmp[k] && rename(tmp[k], out[k].path) != 0) e = errno, bad = k;
        else renamed += tmp[k] != NULL;
    }
    for (int k = 0; k < n; k++) {
        if (tmp[k]) {
            if (e) unlink(tmp[k]); /* no-op for those already renamed */
            free(tmp[k]);
        }
    }
    if (!e) return 0;
    const char *none = n > 1 && !renamed ? " (no output written)" : "";
    if (!strcmp(out[bad].path, "-"))
        fprintf(stderr, "dswa %s: cannot write to standard output: %s%s\n", cmd, strerror(e), none);
    else
        fprintf(stderr, "dswa %s: cannot write %s: %s%s\n", cmd, out[bad].path, strerror(e), none);
    return -1;
}
