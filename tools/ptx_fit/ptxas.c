/* ptx_fit's --verify: finds a ptxas and assembles the result with it in a scratch
   directory. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

static int pf_is_exe(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && access(p, X_OK) == 0;
}
static char *pf_join(const char *dir, size_t k, const char *name) {
    pf_buf b = {0};
    pf_putn(&b, k ? dir : ".", k ? k : 1);
    pf_puts(&b, "/");
    pf_puts(&b, name);
    return pf_take(&b);
}

char *ptx_fit_ptxas_find(void) {
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *e = strchr(path, ':');
        size_t k = e ? (size_t)(e - path) : strlen(path);
        char *p = pf_join(path, k, "ptxas");
        if (!p) return NULL;
        if (pf_is_exe(p)) return p;
        free(p);
        path = e ? e + 1 : NULL;
    }
    const char *ch = getenv("CUDA_HOME");
    if (ch && *ch) {
        char *p = pf_join(ch, strlen(ch), "bin/ptxas");
        if (!p) return NULL;
        if (pf_is_exe(p)) return p;
        free(p);
    }
    const char *def = "/usr/local/cuda/bin/ptxas";
    return pf_is_exe(def) ? pf_strndup(def, strlen(def)) : NULL;
}

static int pf_err(char **err, const char *what, const char *path, int e) {
    if (err) {
        pf_buf b = {0};
        pf_printf(&b, "%s %s: %s", what, path ? path : "", strerror(e));
        *err = pf_take(&b);
    }
    return -1;
}

/* Reads up to 1 MiB of a file into a malloc'd string ("" when it is empty or unreadable). */
static char *pf_read_small(const char *path) {
    pf_buf b = {0};
    FILE *f = fopen(path, "rb");
    if (f) {
        char chunk[4096];
        size_t k;
        while (b.n < ((size_t)1 << 20) && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
            pf_putn(&b, chunk, k);
        fclose(f);
    }
    return pf_take(&b);
}

int ptx_fit_ptxas_assemble(const char *ptxas, const char *text, size_t len, const char *arch,
                        char **messages) {
    if (messages) *messages = NULL;
    if (!ptxas || !text || !ptx_fit_arch_ok(arch))
        return pf_err(messages, "bad arguments", NULL, EINVAL);
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char *dir = pf_join(tmp, strlen(tmp), "dswa-ptx-fit-XXXXXX");
    if (!dir) return pf_err(messages, "out of memory", NULL, ENOMEM);
    if (!mkdtemp(dir)) {
        int e = errno;
        pf_err(messages, "cannot create a directory in", tmp, e);
        free(dir);
        return -1;
    }
    char *src = pf_join(dir, strlen(dir), "fit.ptx");
    char *obj = pf_join(dir, strlen(dir), "fit.cubin");
    char *log = pf_join(dir, strlen(dir), "ptxas.log");
    pf_buf a = {0};
    pf_printf(&a, "-arch=%s", arch);
    char *archopt = pf_take(&a);
    int rc = -1, have_fa = 0;
    posix_spawn_file_actions_t fa;
    if (!src || !obj || !log || !archopt) {
        pf_err(messages, "out of memory", NULL, ENOMEM);
        goto out;
    }
    FILE *fp = fopen(src, "wb");
    if (!fp) {
        pf_err(messages, "cannot write", src, errno);
        goto out;
    }
    size_t wr = fwrite(text, 1, len, fp);
    int e = errno;
    if (fclose(fp) != 0 || wr != len) {
        pf_err(messages, "cannot write", src, e ? e : EIO);
        goto out;
    }
    /* ptxas's stdout and stderr go to a file, for the caller to show or not. */
    int se = posix_spawn_file_actions_init(&fa);
    if (se == 0) {
        have_fa = 1;
        se = posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    }
    if (se == 0) se = posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (se != 0) {
        pf_err(messages, "cannot set up", ptxas, se);
        goto out;
    }
    char *argv[] = {(char *)"ptxas", archopt, src, (char *)"-o", obj, NULL};
    pid_t pid;
    se = posix_spawn(&pid, ptxas, &fa, NULL, argv, environ);
    if (se != 0) {
        pf_err(messages, "cannot run", ptxas, se);
        goto out;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            pf_err(messages, "waiting for", ptxas, errno);
            goto out;
        }
    }
    if (WIFEXITED(status))
        rc = WEXITSTATUS(status);
    else
        rc = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (messages) {
        *messages = pf_read_small(log);
        if (!*messages) rc = pf_err(messages, "out of memory", NULL, ENOMEM);
    }
out:
    if (have_fa) posix_spawn_file_actions_destroy(&fa);
    if (src) unlink(src);
    if (obj) unlink(obj);
    if (log) unlink(log);
    rmdir(dir);
    free(archopt);
    free(src);
    free(obj);
    free(log);
    free(dir);
    return rc;
}
