/* ptx_fit: the stages in order (read, analyse, rewrite, report); each stops the fit with a
   one-line message naming what it found. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ptx_fit_status pf_check_opts(const ptx_fit_opts *o, pf_fit *F, ptx_fit_result *r) {
    if (!o) return pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE, "no options");
    F->o = o;
    F->align = o->align ? o->align : 16;
    if (o->keep < 0)
        return pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE, "--keep %d: must be 0 or more",
                       o->keep);
    if (F->align < 1 || F->align > PF_MAX_ALIGN || (F->align & (F->align - 1)))
        return pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE,
                       "--align %d: must be a power of 2 from 1 to %d", F->align, PF_MAX_ALIGN);
    if (o->arch && !ptx_fit_arch_ok(o->arch)) {
        pf_buf b = {0};
        pf_put_excerpt(&b, o->arch, 0, strlen(o->arch) > 40 ? 40 : strlen(o->arch));
        char *a = pf_take(&b);
        if (!a) return PF_NOMEM(r);
        ptx_fit_status st = pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE,
                                    "--arch '%s': must be a plain target such as sm_90 "
                                    "(TensorRT loads no sm_XXa/sm_XXf)",
                                    a);
        free(a);
        return st;
    }
    return PTX_FIT_OK;
}

ptx_fit_status ptx_fit(const char *in, size_t len, const ptx_fit_opts *o, ptx_fit_result *r) {
    memset(r, 0, sizeof *r);
    pf_fit F;
    memset(&F, 0, sizeof F);
    F.in = in ? in : "";
    F.len = len;
    ptx_fit_status st = !in && len
        ? pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE, "no input")
        : pf_check_opts(o, &F, r);
    /* read */
    if (st == PTX_FIT_OK) st = pf_check_text(F.in, F.len, r);
    if (st == PTX_FIT_OK) st = pf_parse(&F.m, F.in, F.len, r);
    /* analyse */
    if (st == PTX_FIT_OK) st = pf_pick_entry(&F, r);
    if (st == PTX_FIT_OK) st = pf_resolve_target(&F, r);
    if (st == PTX_FIT_OK) st = pf_prove_unread(&F, r);
    if (st == PTX_FIT_OK) st = pf_check_instructions(&F, r);
    /* rewrite */
    if (st == PTX_FIT_OK) st = pf_rewrite(&F, r);
    if (st == PTX_FIT_OK) st = pf_read_back(&F, r);
    /* report */
    if (st == PTX_FIT_OK) st = pf_report(&F, r);

    free(F.note.b);
    free(F.text);
    free(F.target_after);
    pf_module_free(&F.m2);
    pf_module_free(&F.m);
    if (st != PTX_FIT_OK) { /* a failure keeps its message and line, nothing else */
        char *msg = r->message;
        r->message = NULL;
        int line = r->line;
        ptx_fit_result_free(r);
        r->message = msg ? msg : pf_strndup("out of memory", 13);
        r->line = line;
    }
    return st;
}
