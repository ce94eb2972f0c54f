/* ptx_fit.h — the engine of `dswa ptx-fit` (the CLI's own code, not part of libdswa): fits
 * third-party PTX (Triton's above all) to what TensorRT's AOT plugin path loads. TensorRT's
 * launcher passes exactly the input pointers, the int32 extras and the output pointers,
 * rejects `.target sm_XXa`, and Triton emits trailing global-scratch pointer parameters,
 * `.align 1` pointer parameters and `sm_XXa` targets. ptx_fit removes the trailing parameters
 * after proving the body never reaches them, makes the target plain, and raises pointer
 * alignment, or says why it cannot.
 *
 * Stages, one file each: read.c (the text into a module: checks it is text, lexes, parses),
 * analyse.c (the entry, the target and what its instructions need, the proof that removed
 * parameters are unread), rewrite.c (edits applied by offset, the result read back),
 * report.c (the result for people), ptxas.c (assembling for --verify); fit.c runs them.
 *
 * The reader takes untrusted text: it is iterative (no recursion on nesting), has no
 * fixed-size buffers and checks every allocation. It is fuzzed by fuzz/ptx_fit_fuzz.c.
 */
#ifndef PTX_FIT_H
#define PTX_FIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest input read: PTX modules are megabytes; anything bigger is not one. */
#define PTX_FIT_MAX_BYTES ((size_t)64 << 20)

typedef enum ptx_fit_status {
    PTX_FIT_OK = 0,
    /* Not PTX, no entry, several entries and none chosen, K larger than the parameter count,
       malformed structure, or a bad option: the input or the request is wrong. */
    PTX_FIT_BAD_INPUT = 1,
    /* Well-formed, but fitting it would change what the kernel does or cannot assemble: a
       removed parameter is read (or a parameter's address is taken), an instruction needs
       the `a` target or a newer GPU than the target, .version too low. */
    PTX_FIT_REFUSED = 2,
    PTX_FIT_NO_MEMORY = 3,
    /* The rewritten text did not parse back as expected: a bug in ptx_fit. */
    PTX_FIT_INTERNAL = 4,
} ptx_fit_status;

typedef struct ptx_fit_opts {
    int keep; /* keep the first `keep` entry parameters; 0 <= keep <= their count */
    const char *entry; /* entry to fit; NULL: the module's only entry */
    const char *arch; /* plain "sm_XX" to target; NULL: the input's, without its a/f suffix */
    int align; /* minimum .align of pointer parameters (power of 2, <= 256); 0: 16 */
} ptx_fit_opts;

typedef struct ptx_fit_result {
    /* Always set (malloc'd, NUL-terminated) unless the status is OK: one line naming the
       problem, with the input line number and text where one is concerned. */
    char *message;
    int line; /* that input line (1-based), or 0 */

    /* Set on success (all malloc'd, NUL-terminated). */
    char *text; /* the rewritten PTX */
    size_t len; /* its length in bytes */
    char *entry; /* name of the fitted entry */
    char *sig_before; /* its declaration, one parameter per line */
    char *sig_after;
    int params_before, params_after;
    char *removed; /* names of the removed parameters, ", "-separated, or "" */
    int aligns_raised; /* pointer parameters whose .align was raised (or added) */
    char *version; /* the .version, e.g. "8.7" */
    char *target_before; /* e.g. "sm_90a" */
    char *target_after; /* e.g. "sm_90" */
    char *note; /* advice that is not a refusal (e.g. a lowered target), or "" */
    long mma; /* mma instructions in the entry: mma.sync, mma.sp, wmma.mma, ... */
    long wgmma; /* of which wgmma.mma_async (need sm_90a: 0 after a success) */
    uint64_t shared_bytes; /* static .shared declared at module scope and in the entry */
    int shared_dynamic; /* .shared arrays declared without a size (sized at launch) */
    char *shared_dynamic_name; /* the first of them, or "" */
} ptx_fit_result;

/* Fits the PTX text in[0..len) (need not be NUL-terminated; may hold any bytes: what is not
   text is refused, see PTX_FIT_MAX_BYTES). `r` is
   overwritten; release it with ptx_fit_result_free whatever the status. */
ptx_fit_status ptx_fit(const char *in, size_t len, const ptx_fit_opts *o,
                                 ptx_fit_result *r);
void ptx_fit_result_free(ptx_fit_result *r);

/* The `dswa ptx-fit` exit status of a status: 0 OK, 2 bad input, 1 otherwise. */
int ptx_fit_exit_code(ptx_fit_status s);

/* 1 when `arch` is a plain target name "sm_<digits>" (no a/f suffix), else 0. */
int ptx_fit_arch_ok(const char *arch);

/* Reads the file at `path` ("-": standard input) into a malloc'd buffer, stopping at once
   at more than PTX_FIT_MAX_BYTES or at bytes that are not text (NUL, control characters,
   invalid UTF-8). 0, or -1 with a one-line reason in why[0..n). */
int ptx_fit_read_file(const char *path, char **buf, size_t *len, char *why, size_t n);

/* Prints the result of a fit for people: signature before and after, what was removed and
   raised, mma count, shared memory, notes. */
void ptx_fit_print_report(FILE *f, const ptx_fit_result *r, const char *in_path, int align);

/* ---- ptxas ------------------------------------------------------------------------------ */
/* Path of a ptxas to run: the first on PATH, else $CUDA_HOME/bin/ptxas, else
   /usr/local/cuda/bin/ptxas. malloc'd; NULL when none is found (or out of memory). */
char *ptx_fit_ptxas_find(void);

/* Assembles text[0..len) with `ptxas -arch=<arch>` in a scratch directory that is removed
   afterwards. Returns ptxas's exit status (0 = assembled), or -1 when it could not be run.
   *messages (when not NULL) receives, malloc'd, what ptxas printed (possibly ""), or why it
   could not be run. */
int ptx_fit_ptxas_assemble(const char *ptxas, const char *text, size_t len, const char *arch,
                           char **messages);

#ifdef __cplusplus
}
#endif
#endif /* PTX_FIT_H */
