/* The table of embedded PTX modules that the build generates (src/aot/ptx_embed.c writes
   $(BUILD)/aot/aot_ptx_data.c from `nvcc -ptx` output; see the Makefile's "AOT PTX" section)
   and src/aot/export.c serves. Internal: not part of the public contract. */
#ifndef DSWA_AOT_PTX_BLOBS_H
#define DSWA_AOT_PTX_BLOBS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One kernel entry as its own PTX module, for one architecture. The text is what nvcc wrote
   for compute_<arch> with only this entry and what it references kept; modules equal but for
   their .target line share one text, so the .target (and .version) are rewritten on export. */
typedef struct dswa_aot_blob {
    const char *family;  /* kernels.h's: "band", "wide" or "scalar" */
    int arch;            /* 80, 86, 89, 90, 100, 120 */
    const char *entry;   /* the .entry name, e.g. "dswa_fwd_bf16", "dswa_samel_bf16" */
    const char *ptx;     /* NUL-terminated */
    size_t size;         /* strlen(ptx) */
} dswa_aot_blob;

extern const dswa_aot_blob dswa_aot_blobs[];
extern const int dswa_aot_blob_count;

/* The lowest PTX ISA version a module may declare for target sm_<sm>: the version that
   introduced the target, raised by any instruction feature of the module that is newer (its
   name in *what, else NULL). -1 for a target that is not exported. Also built without CUDA
   (it reads text only), so the tests can feed it PTX of their own. */
int dswa_aot_isa_required(const char *ptx, int sm, int *major, int *minor, const char **what);

#ifdef __cplusplus
}
#endif
#endif
