/* ptx_fit_fuzz — libFuzzer harness for the PTX reader of `dswa ptx-fit` (tools/ptx_fit/),
   which parses untrusted text. Each input is fitted under three option sets derived from its
   last byte (keep counts, --entry names of the fixtures, plain targets, alignments), so the
   removal, retargeting and alignment paths all run, not just the parser. Besides the
   sanitizers' findings it aborts on broken promises: a failure without a message, a success
   without text or with the wrong parameter count, the internal read-back check failing, or a
   fitted result that does not fit again unchanged (same entry, target and alignment, all its
   parameters kept). Build and run: `make fuzz FUZZ_SECONDS=180`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_fit/ptx_fit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fit_twice(const char *in, size_t len, ptx_fit_opts o) {
    ptx_fit_result r;
    ptx_fit_status st = ptx_fit(in, len, &o, &r);
    if (st == PTX_FIT_INTERNAL) abort();
    if (st != PTX_FIT_OK) {
        if (!r.message || !*r.message || r.text) abort();
        ptx_fit_result_free(&r);
        return;
    }
    if (r.message || !r.text || r.text[r.len] != '\0' || r.params_after != o.keep ||
        !r.sig_before || !r.sig_after || !r.entry || !r.target_after || !r.note ||
        !ptx_fit_arch_ok(r.target_after))
        abort();
    ptx_fit_opts o2 = o;
    o2.arch = r.target_after;
    ptx_fit_result r2;
    st = ptx_fit(r.text, r.len, &o2, &r2);
    if (st != PTX_FIT_OK || r2.len != r.len || memcmp(r2.text, r.text, r.len) != 0 ||
        r2.aligns_raised != 0 || strcmp(r2.sig_before, r.sig_after) != 0 || r2.mma != r.mma ||
        r2.shared_bytes != r.shared_bytes)
        abort();
    ptx_fit_result_free(&r2);
    ptx_fit_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const entries[] = {NULL,    "triton_fit_kernel", "dot_kernel",
                                          "first", "addr_kernel",       "k"};
    static const char *const archs[] = {NULL, "sm_90", "sm_80", "sm_75", "sm_120"};
    static const int aligns[] = {0, 1, 4, 16, 256};
    unsigned b = size ? data[size - 1] : 0;
    const char *in = (const char *)data;

    ptx_fit_opts a = {(int)(b % 9), NULL, NULL, 0};
    fit_twice(in, size, a);
    ptx_fit_opts v = {(int)((b / 9) % 4), entries[b % 6], archs[(b >> 2) % 5],
                           aligns[(b >> 4) % 5]};
    fit_twice(in, size, v);
    ptx_fit_opts t = {5, NULL, "sm_90", 16}; /* the Triton case */
    fit_twice(in, size, t);
    return 0;
}
