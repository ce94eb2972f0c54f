/* ptx_fit, stage 4: report. What was there and what was made of it, as the result's fields
   and as text for people. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the signature, for people ----------------------------------------------------- */
/* Appends c[s..e) with whitespace runs collapsed and unprintable bytes as '?'. */
static void pf_put_norm(pf_buf *b, const char *c, size_t s, size_t e) {
    int sp = 0;
    for (size_t i = s; i < e; i++) {
        unsigned char ch = (unsigned char)c[i];
        if (pf_space(ch)) {
            sp = 1;
            continue;
        }
        if (sp) pf_putn(b, " ", 1);
        sp = 0;
        char o = (ch < 0x20 || ch >= 0x7f) ? '?' : (char)ch;
        pf_putn(b, &o, 1);
    }
}
static char *pf_signature(const pf_module *m, const pf_func *f) {
    pf_buf b = {0};
    pf_put_norm(&b, m->c, f->decl_start, f->name.e);
    if (f->has_list) {
        pf_puts(&b, "(");
        for (size_t i = 0; i < f->np; i++) {
            pf_puts(&b, "\n    ");
            const pf_param *p = &m->p[f->p0 + i];
            pf_put_norm(&b, m->c, p->text.s, p->text.e);
            if (i + 1 < f->np) pf_puts(&b, ",");
        }
        pf_puts(&b, f->np ? "\n)" : ")");
    }
    return pf_take(&b);
}


ptx_fit_status pf_report(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const pf_func *f = &m->f[F->fi], *g = &F->m2.f[F->fi];
    const pf_param *P = m->p ? m->p + f->p0 : NULL;
    const char *c = m->c;
    pf_span dyn_name = {0, 0};
    r->entry = pf_strndup(c + f->name.s, f->name.e - f->name.s);
    r->sig_before = pf_signature(m, f);
    r->version = pf_strndup(c + m->version.s, m->version.e - m->version.s);
    r->target_before = pf_strndup(c + m->target.s, m->target.e - m->target.s);
    r->params_before = f->np > 0x7fffffff ? 0x7fffffff : (int)f->np;
    pf_buf b = {0};
    for (size_t i = F->keep; i < f->np; i++) {
        if (i > F->keep) pf_puts(&b, ", ");
        pf_put_name(&b, c, P[i].name);
    }
    r->removed = pf_take(&b);
    r->sig_after = pf_signature(&F->m2, g);
    r->params_after = (int)F->keep;
    pf_measure(&F->m2, g, r, &dyn_name);
    r->shared_dynamic_name =
        dyn_name.e > dyn_name.s ? pf_name_str(F->m2.c, dyn_name) : pf_strndup("", 0);
    r->note = pf_take(&F->note);
    if (!r->entry || !r->sig_before || !r->version || !r->target_before || !r->removed ||
        !r->sig_after || !r->shared_dynamic_name || !r->note)
        return PF_NOMEM(r);
    r->aligns_raised = F->raised;
    r->target_after = F->target_after;
    F->target_after = NULL;
    r->text = F->text;
    r->len = F->text_len;
    F->text = NULL;
    return PTX_FIT_OK;
}

/* Prints a multi-line signature indented by `ind` spaces. */
static void pf_print_sig(FILE *f, const char *sig, int ind) {
    const char *p = sig;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        fprintf(f, "%*s%.*s\n", ind, "", (int)k, p);
        p += k + (e ? 1 : 0);
    }
}

void ptx_fit_print_report(FILE *rep, const ptx_fit_result *r, const char *in_path, int align) {
    fprintf(rep, "entry %s in %s: .version %s, target %s -> %s\n", r->entry, in_path, r->version,
            r->target_before, r->target_after);
    fprintf(rep, "  signature before (%d parameter%s):\n", r->params_before,
            r->params_before == 1 ? "" : "s");
    pf_print_sig(rep, r->sig_before, 4);
    fprintf(rep, "  signature after (%d parameter%s):\n", r->params_after,
            r->params_after == 1 ? "" : "s");
    pf_print_sig(rep, r->sig_after, 4);
    if (r->params_after < r->params_before)
        fprintf(rep, "  removed (never reached by the body): %s\n", r->removed);
    fprintf(rep, "  .align raised to %d on %d pointer parameter%s\n", align ? align : 16,
            r->aligns_raised, r->aligns_raised == 1 ? "" : "s");
    fprintf(rep, "  mma instructions in the entry: %ld", r->mma);
    if (r->wgmma) fprintf(rep, " (%ld wgmma)", r->wgmma);
    fputc('\n', rep);
    fprintf(rep, "  shared memory declared: %llu bytes static", (unsigned long long)r->shared_bytes);
    if (r->shared_dynamic)
        fprintf(rep, ", and %d array%s sized at launch (%s[]%s)", r->shared_dynamic,
                r->shared_dynamic == 1 ? "" : "s", r->shared_dynamic_name,
                r->shared_dynamic > 1 ? ", ..." : "");
    fputc('\n', rep);
    if (r->shared_bytes > 48u * 1024u)
        fprintf(rep, "  warning: more than the 48 KB of static shared memory TensorRT allows\n");
    if (r->note && *r->note) fprintf(rep, "  note: %s\n", r->note);
}

void ptx_fit_result_free(ptx_fit_result *r) {
    if (!r) return;
    free(r->message);
    free(r->text);
    free(r->entry);
    free(r->sig_before);
    free(r->sig_after);
    free(r->removed);
    free(r->version);
    free(r->target_before);
    free(r->target_after);
    free(r->note);
    free(r->shared_dynamic_name);
    memset(r, 0, sizeof *r);
}

int ptx_fit_exit_code(ptx_fit_status s) {
    return s == PTX_FIT_OK ? 0 : s == PTX_FIT_BAD_INPUT ? 2 : 1;
}
