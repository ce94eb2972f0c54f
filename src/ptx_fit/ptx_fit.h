/* ptx_fit.h — library-internal API of `dswa ptx-fit`: fits third-party PTX (Triton's above all)
 * to the TensorRT AOT plugin contract (SPEC.md section 4). TensorRT's launcher passes exactly
 * the input pointers, the int32 extras and the output pointers, rejects `.target sm_XXa`, and
 * Triton emits trailing global-scratch pointer parameters, `.align 1` pointer parameters and
 * `sm_XXa` targets. dswa_ptx_fit removes the trailing parameters after proving the body never
 * mentions them, makes the target plain, and raises pointer alignment, or says why it cannot.
 *
 * The parser reads untrusted text: it is iterative (no recursion on nesting), has no
 * fixed-size buffers and checks every allocation. It is fuzzed by fuzz/ptx_fit_fuzz.c.
 */
#ifndef DSWA_PTX_FIT_H
#define DSWA_PTX_FIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dswa_ptx_fit_status {
    DSWA_PTX_FIT_OK = 0,
    /* Not PTX, no entry, several entries and none chosen, K larger than the parameter count,
       malformed structure, or a bad option: the input or the request is wrong. */
    DSWA_PTX_FIT_BAD_INPUT = 1,
    /* Well-formed, but fitting it would change what the kernel does or cannot assemble: a
       removed parameter is read, an instruction needs the `a` target, .version too low. */
    DSWA_PTX_FIT_REFUSED = 2,
    DSWA_PTX_FIT_NO_MEMORY = 3,
    /* The rewritten text did not parse back as expected: a bug in this file. */
    DSWA_PTX_FIT_INTERNAL = 4,
} dswa_ptx_fit_status;

typedef struct dswa_ptx_fit_opts {
    int keep; /* keep the first `keep` entry parameters; 0 <= keep <= their count */
    const char *entry; /* entry to fit; NULL: the module's only entry */
    const char *arch; /* plain "sm_XX" to target; NULL: the input's, without its a/f suffix */
    int align; /* minimum .align of pointer parameters (power of 2, <= 256); 0: 16 */
} dswa_ptx_fit_opts;

typedef struct dswa_ptx_fit_result {
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
} dswa_ptx_fit_result;

/* Fits the PTX text in[0..len) (need not be NUL-terminated; may hold any bytes). `r` is
   overwritten; release it with dswa_ptx_fit_result_free whatever the status. */
dswa_ptx_fit_status dswa_ptx_fit(const char *in, size_t len, const dswa_ptx_fit_opts *o,
                                 dswa_ptx_fit_result *r);
void dswa_ptx_fit_result_free(dswa_ptx_fit_result *r);

/* The `dswa ptx-fit` exit status of a status: 0 OK, 2 bad input, 1 otherwise. */
int dswa_ptx_fit_exit_code(dswa_ptx_fit_status s);

/* 1 when `arch` is a plain target name "sm_<digits>" (no a/f suffix), else 0. */
int dswa_ptx_fit_arch_ok(const char *arch);

/* ---- ptxas ------------------------------------------------------------------------------ */
/* Path of a ptxas to run: the first on PATH, else $CUDA_HOME/bin/ptxas, else
   /usr/local/cuda/bin/ptxas. malloc'd; NULL when none is found (or out of memory). */
char *dswa_ptxas_find(void);

/* Assembles text[0..len) with `ptxas -arch=<arch>` in a scratch directory that is removed
   afterwards. Returns ptxas's exit status (0 = assembled), or -1 when it could not be run.
   *messages (when not NULL) receives, malloc'd, what ptxas printed (possibly ""), or why it
   could not be run. */
int dswa_ptxas_assemble(const char *ptxas, const char *text, size_t len, const char *arch,
                        char **messages);

#ifdef __cplusplus
}
#endif
#endif /* DSWA_PTX_FIT_H */
