/* ptx_fit, stage 3: rewrite. The edits (the target word, .align of kept pointer parameters,
   the removed tail of the parameter list) are applied to the original bytes by offset, so
   everything not edited (comments, debug sections, formatting) is kept byte for byte; the
   result is read back and checked to say what was meant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* When the rest of the line from `i` (before `limit`) holds only blanks and comments that end
   on it, the offset of its line break; else PF_NONE. Read on the original text, so that a cut
   there can never fall inside a block comment. `i` must be outside any comment. */
static size_t pf_line_tail(const char *in, size_t i, size_t limit) {
    while (i < limit) {
        if (in[i] == '\n') return i;
        if (pf_space((unsigned char)in[i])) {
            i++;
            continue;
        }
        if (in[i] == '/' && i + 1 < limit && in[i + 1] == '/') {
            while (i < limit && in[i] != '\n') i++;
            continue;
        }
        if (in[i] == '/' && i + 1 < limit && in[i + 1] == '*') {
            i += 2;
            while (i + 1 < limit && !(in[i] == '*' && in[i + 1] == '/')) {
                if (in[i] == '\n') return PF_NONE;
                i++;
            }
            if (i + 1 >= limit) return PF_NONE;
            i += 2;
            continue;
        }
        return PF_NONE;
    }
    return PF_NONE;
}

/* ---- edits ------------------------------------------------------------------------- */
typedef struct pf_edit {
    size_t off, del;
    const char *ins;
    size_t ins_len;
} pf_edit;

static int pf_edit_cmp(const void *a, const void *b) {
    const pf_edit *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}


/* Plans the edits into ed[] (room for keep + 3); returns their count. */
static size_t pf_plan(pf_fit *F, pf_edit *ed, const char *num, const char *ins) {
    const pf_module *m = &F->m;
    const pf_func *f = &m->f[F->fi];
    const pf_param *P = m->p ? m->p + f->p0 : NULL; /* NULL: no parameter in the module */
    const char *c = m->c, *in = F->in;
    const size_t keep = F->keep, tlen = strlen(F->target_after);
    size_t ne = 0;
    if (m->target.e - m->target.s != tlen || memcmp(c + m->target.s, F->target_after, tlen) != 0)
        ed[ne++] = (pf_edit){m->target.s, m->target.e - m->target.s, F->target_after, tlen};
    F->raised = 0;
    for (size_t i = 0; i < keep; i++) {
        if (!P[i].is_ptr) continue;
        if (P[i].has_align && P[i].align < (uint64_t)F->align) {
            ed[ne++] =
                (pf_edit){P[i].align_val.s, P[i].align_val.e - P[i].align_val.s, num, strlen(num)};
            F->raised++;
        } else if (!P[i].has_align && F->align > 4) { /* .ptr without .align means 4 */
            ed[ne++] = (pf_edit){P[i].name.s, 0, ins, strlen(ins)};
            F->raised++;
        }
    }
    if (keep < f->np) {
        /* Cut from the last kept parameter to the last one, taking along a comment that ends
           the last one's line; when the parameters stand on lines of their own, only the
           separating comma goes from the last kept line, so its comment stays too. */
        size_t from = keep ? P[keep - 1].text.e : f->lp + 1, to = P[f->np - 1].text.e;
        size_t tail = pf_line_tail(in, to, f->rp);
        if (tail != PF_NONE) to = tail;
        size_t comma = from;
        while (keep && comma < P[keep].text.s && c[comma] != ',') comma++;
        /* Only when the last removed line ends in a line break: else what follows it (the
           ')') would land after the kept line's comment. */
        size_t eol = keep && tail != PF_NONE && comma < P[keep].text.s
            ? pf_line_tail(in, comma + 1, P[keep].text.s)
            : PF_NONE;
        if (eol != PF_NONE) {
            ed[ne++] = (pf_edit){comma, 1, "", 0};
            ed[ne++] = (pf_edit){eol, to - eol, "", 0};
        } else {
            ed[ne++] = (pf_edit){from, to - from, "", 0};
        }
    }
    qsort(ed, ne, sizeof *ed, pf_edit_cmp);
    return ne;
}

ptx_fit_status pf_rewrite(pf_fit *F, ptx_fit_result *r) {
    char num[24], ins[40];
    snprintf(num, sizeof num, "%d", F->align);
    snprintf(ins, sizeof ins, ".align %d ", F->align);
    pf_edit *ed = malloc((F->keep + 3) * sizeof *ed);
    if (!ed) return PF_NOMEM(r);
    const size_t ne = pf_plan(F, ed, num, ins), len = F->len;
    ptx_fit_status st = PTX_FIT_OK;
    size_t out_len = len;
    for (size_t i = 0; i < ne && st == PTX_FIT_OK; i++) {
        if (i && ed[i].off < ed[i - 1].off + ed[i - 1].del)
            st = pf_fail(r, NULL, 0, PTX_FIT_INTERNAL, PF_NONE, "internal error: overlapping edits");
        else if (ed[i].ins_len > (size_t)-1 - (out_len - ed[i].del) - 1)
            st = PF_NOMEM(r);
        else
            out_len = out_len - ed[i].del + ed[i].ins_len;
    }
    char *text = st == PTX_FIT_OK ? malloc(out_len + 1) : NULL;
    if (st == PTX_FIT_OK && !text) st = PF_NOMEM(r);
    if (st == PTX_FIT_OK) {
        size_t src = 0, dst = 0;
        for (size_t i = 0; i < ne; i++) {
            memcpy(text + dst, F->in + src, ed[i].off - src);
            dst += ed[i].off - src;
            memcpy(text + dst, ed[i].ins, ed[i].ins_len);
            dst += ed[i].ins_len;
            src = ed[i].off + ed[i].del;
        }
        memcpy(text + dst, F->in + src, len - src);
        dst += len - src;
        text[dst] = '\0';
        F->text = text;
        F->text_len = dst;
    }
    free(ed);
    return st;
}

ptx_fit_status pf_read_back(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const pf_func *f = &m->f[F->fi];
    const size_t keep = F->keep, tlen = strlen(F->target_after);
    ptx_fit_result r2;
    memset(&r2, 0, sizeof r2);
    ptx_fit_status st = pf_parse(&F->m2, F->text, F->text_len, &r2);
    free(r2.message);
    if (st == PTX_FIT_NO_MEMORY) return PF_NOMEM(r);
    const pf_module *m2 = &F->m2;
    /* Edits never add or remove a function, so the entry keeps its index. */
    const pf_func *g = st == PTX_FIT_OK && m2->nf == m->nf ? &m2->f[F->fi] : NULL;
    int ok = g && g->is_entry && g->has_body && g->np == keep &&
        g->name.e - g->name.s == f->name.e - f->name.s &&
        memcmp(m2->c + g->name.s, m->c + f->name.s, f->name.e - f->name.s) == 0 &&
        m2->target.e - m2->target.s == tlen &&
        memcmp(m2->c + m2->target.s, F->target_after, tlen) == 0;
    for (size_t i = 0; ok && i < keep; i++) {
        const pf_param *p = &m2->p[g->p0 + i];
        if (p->is_ptr &&
            ((p->has_align && p->align < (uint64_t)F->align) || (!p->has_align && F->align > 4)))
            ok = 0;
    }
    if (!ok)
        return pf_fail(r, NULL, 0, PTX_FIT_INTERNAL, PF_NONE,
                       "internal error: the rewritten PTX does not read back as intended");
    return PTX_FIT_OK;
}
