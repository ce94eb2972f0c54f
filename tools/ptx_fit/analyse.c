/* ptx_fit, stage 2: analyse. Picks the entry, resolves the target and checks that every
   instruction exists there (no sm_XXa-only instruction, none newer than the target), proves
   the removed parameters unreachable from the body, and measures what the report shows
   (mma instructions, shared memory declared). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dswa.h"
#include "internal.h"

static ptx_fit_status pf_check_keep(pf_fit *F, ptx_fit_result *r);

/* ---- instructions that need an architecture- or family-specific target --------------- */
/* Checked with ptxas 13.0 on plain and suffixed targets: each of these assembles on the
   suffixed target and is rejected on the plain one. `comp` is a component of the dotted
   opcode: exact, or a prefix when it ends in ':'. (add/mul/fma .f32x2 and cp.async.bulk's
   .multicast::cluster were found to assemble on plain sm_100 / sm_90.) */
typedef struct pf_rule {
    const char *head, *comp, *needs;
} pf_rule;
static const pf_rule pf_rules[] = {
    {"wgmma", NULL, "sm_90a"},
    {"setmaxnreg", NULL, "sm_90a, sm_100a/f or sm_120a/f"},
    {"tcgen05", NULL, "sm_100a/f or sm_110a/f"},
    {"tensormap", "replace", "sm_90a, sm_100a/f or sm_120a/f"},
    {"redux", "f32", "sm_100a/f"},
    {"mma", "block_scale", "sm_120a/f"},
    {"mma", "kind::", "sm_120a/f"},
    {"cp", "cta_group::", "sm_100a/f"},
    {"cp", "tile::gather4", "sm_100a/f"},
    {"cp", "tile::scatter4", "sm_100a/f"},
    {"cp", "im2col::w", "sm_100a/f"},
    {"cp", "im2col::w::128", "sm_100a/f"},
    {"cvt", "e2m1x2", "sm_100a/f or sm_120a/f"},
    {"cvt", "e2m1x4", "sm_100a/f or sm_120a/f"},
    {"cvt", "e2m3x2", "sm_100a/f or sm_120a/f"},
    {"cvt", "e3m2x2", "sm_100a/f or sm_120a/f"},
    {"cvt", "e2m3x4", "sm_100a/f or sm_120a/f"},
    {"cvt", "e3m2x4", "sm_100a/f or sm_120a/f"},
    {"cvt", "ue8m0x2", "sm_100a/f or sm_120a/f"},
    {"cvt", "rs", "sm_100a or sm_103a"},
    {"clusterlaunchcontrol", "multicast::", "sm_100a/f or sm_120a/f"},
    {"ldmatrix", "m16n16", "sm_100a/f or sm_120a/f"},
    {"ldmatrix", "m8n16", "sm_100a/f or sm_120a/f"},
    {"stmatrix", "m16n8", "sm_100a/f or sm_120a/f"},
};

/* Does opcode w[0..k) match the rule? */
static int pf_rule_match(const char *w, size_t k, const pf_rule *ru) {
    size_t h = 0;
    while (h < k && w[h] != '.') h++;
    if (h != strlen(ru->head) || memcmp(w, ru->head, h) != 0) return 0;
    if (!ru->comp) return 1;
    size_t cl = strlen(ru->comp);
    int prefix = ru->comp[cl - 1] == ':';
    size_t i = h;
    while (i < k) { /* components between the dots */
        size_t s = ++i, e = s;
        while (e < k && w[e] != '.') e++;
        if (prefix ? (e - s >= cl && memcmp(w + s, ru->comp, cl) == 0)
                   : (e - s == cl && memcmp(w + s, ru->comp, cl) == 0))
            return 1;
        i = e;
    }
    return 0;
}

/* 1 when the opcode has the component `comp` (exact) after its head. */
static int pf_has_comp(const char *w, size_t k, const char *head, const char *comp) {
    pf_rule ru = {head, comp, ""};
    return pf_rule_match(w, k, &ru);
}

/* ---- instructions that need a newer GPU ---------------------------------------------- */
/* The oldest plain target that has each instruction, from the PTX ISA's target requirements
   (checked with ptxas 13.0 on sm_75 and sm_80 where it mattered: ptxas rejects each of these
   on older targets). An opcode matching several rules needs the newest of them. */
typedef struct pf_min_sm {
    const char *head, *comp; /* as in pf_rule */
    unsigned sm;
    const char *what;
} pf_min_sm;
static const pf_min_sm pf_min_sms[] = {
    {"mma", NULL, 70, "mma"},
    {"mma", "m16n8k8", 75, "mma of shape m16n8k8"},
    {"mma", "m8n8k16", 75, "integer mma"},
    {"mma", "m8n8k32", 75, "integer mma"},
    {"mma", "m8n8k128", 75, "binary mma"},
    {"mma", "m16n8k4", 80, "mma of shape m16n8k4"},
    {"mma", "m16n8k16", 80, "mma of shape m16n8k16"},
    {"mma", "m16n8k32", 80, "mma of shape m16n8k32"},
    {"mma", "m16n8k64", 80, "mma of shape m16n8k64"},
    {"mma", "m16n8k128", 80, "mma of shape m16n8k128"},
    {"mma", "m16n8k256", 80, "mma of shape m16n8k256"},
    {"mma", "tf32", 80, "tf32 mma"},
    {"mma", "bf16", 80, "bf16 mma"},
    {"mma", "f64", 80, "f64 mma"},
    {"mma", "sp", 80, "sparse mma"},
    {"mma", "e4m3", 89, "fp8 mma"},
    {"mma", "e5m2", 89, "fp8 mma"},
    {"ldmatrix", NULL, 75, "ldmatrix"},
    {"movmatrix", NULL, 75, "movmatrix"},
    {"stmatrix", NULL, 90, "stmatrix"},
    {"tanh", NULL, 75, "tanh"},
    {"cp", "async", 80, "cp.async"},
    {"cp", "bulk", 90, "bulk copy"},
    {"cp", "reduce", 90, "bulk reduction"},
    {"mbarrier", NULL, 80, "mbarrier"},
    {"mbarrier", "try_wait", 90, "mbarrier.try_wait"},
    {"mbarrier", "expect_tx", 90, "mbarrier transaction counts"},
    {"mbarrier", "complete_tx", 90, "mbarrier transaction counts"},
    {"redux", NULL, 80, "redux.sync"},
    {"createpolicy", NULL, 80, "createpolicy"},
    {"cvt", "bf16", 80, "bf16 conversion"},
    {"cvt", "bf16x2", 80, "bf16 conversion"},
    {"cvt", "tf32", 80, "tf32 conversion"},
    {"cvt", "e4m3x2", 89, "fp8 conversion"},
    {"cvt", "e5m2x2", 89, "fp8 conversion"},
    {"fma", "bf16", 80, "bf16 arithmetic"},
    {"fma", "bf16x2", 80, "bf16 arithmetic"},
    {"min", "bf16", 80, "bf16 arithmetic"},
    {"min", "bf16x2", 80, "bf16 arithmetic"},
    {"max", "bf16", 80, "bf16 arithmetic"},
    {"max", "bf16x2", 80, "bf16 arithmetic"},
    {"elect", NULL, 90, "elect.sync"},
    {"fence", "async", 90, "async proxy fence"},
    {"griddepcontrol", NULL, 90, "griddepcontrol"},
    {"barrier", "cluster", 90, "cluster barrier"},
    {"mapa", NULL, 90, "mapa"},
    {"getctarank", NULL, 90, "getctarank"},
    {"st", "async", 90, "st.async"},
    {"red", "async", 90, "red.async"},
    {"multimem", NULL, 90, "multimem"},
};

/* ---- .version and targets ------------------------------------------------------------ */
/* "sm_<digits>" plus an optional a/f: the number and the suffix (0, 'a' or 'f'). */
static int pf_parse_sm(const char *s, size_t k, unsigned *num, char *suffix) {
    if (k < 4 || memcmp(s, "sm_", 3) != 0) return 0;
    size_t i = 3;
    unsigned v = 0;
    while (i < k && pf_digit((unsigned char)s[i])) {
        if (v > 100000) return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
        i++;
    }
    if (i == 3) return 0;
    *suffix = 0;
    if (i + 1 == k && (s[i] == 'a' || s[i] == 'f'))
        *suffix = s[i];
    else if (i != k)
        return 0;
    *num = v;
    return 1;
}

int ptx_fit_arch_ok(const char *arch) {
    unsigned num;
    char suf;
    return arch && pf_parse_sm(arch, strlen(arch), &num, &suf) && suf == 0;
}

/* The lowest PTX ISA version (major*10+minor) that knows a plain target; 0 if unknown.
   The table is the library's (dswa_ptx_isa_for_target), shared with the AOT export. */
static unsigned pf_min_version(unsigned sm) {
    int major, minor;
    if (sm > (unsigned)INT_MAX || dswa_ptx_isa_for_target((int)sm, &major, &minor)) return 0;
    return (unsigned)(10 * major + minor);
}

/* "X.Y" -> X*10+Y (Y one digit, as every PTX ISA version so far); 0 if malformed. */
static unsigned pf_version_num(const char *s, size_t k) {
    if (k != 3 || !pf_digit((unsigned char)s[0]) || s[1] != '.' || !pf_digit((unsigned char)s[2]))
        return 0;
    return (unsigned)(s[0] - '0') * 10u + (unsigned)(s[2] - '0');
}

/* ---- names of removed parameters: a small open-addressing set ----------------------- */
typedef struct pf_set {
    size_t *slot; /* parameter index + 1; 0 = empty */
    size_t mask;
} pf_set;
static uint64_t pf_hash(const char *s, size_t k) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}
ptx_fit_status pf_pick_entry(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const char *want = F->o->entry;
    size_t found = PF_NONE, count = 0, defined = 0;
    for (size_t i = 0; i < m->nf; i++) {
        const pf_func *f = &m->f[i];
        if (!f->is_entry) continue;
        if (want) {
            size_t k = strlen(want);
            if (f->name.e - f->name.s == k && memcmp(m->c + f->name.s, want, k) == 0) {
                if (found == PF_NONE) found = i;
                count++;
            }
        } else if (f->has_body) {
            if (found == PF_NONE) found = i;
            defined++;
        }
    }
    if ((want && count == 1 && m->f[found].has_body) || (!want && defined == 1)) {
        F->fi = found;
        return pf_check_keep(F, r);
    }

    pf_buf b = {0};
    if (want && count > 1)
        pf_puts(&b, "several entries are named '");
    else if (want && count == 1)
        pf_puts(&b, "entry '");
    else if (want)
        pf_puts(&b, "no entry named '");
    if (want) {
        pf_put_excerpt(&b, want, 0, strlen(want) > 80 ? 80 : strlen(want));
        pf_puts(&b, count == 1 ? "' has no body" : "'");
    } else {
        pf_puts(&b,
                defined == 0 ? "no .entry with a body in the module"
                             : "several entries; choose one with --entry");
    }
    if (!(want && count >= 1)) { /* name what there is */
        size_t listed = 0, total = 0;
        for (size_t i = 0; i < m->nf; i++) {
            if (!m->f[i].is_entry || !m->f[i].has_body) continue;
            total++;
            if (listed < 8) {
                pf_puts(&b, listed ? ", " : " (entries: ");
                pf_put_name(&b, m->c, m->f[i].name);
                listed++;
            }
        }
        if (total > listed) pf_printf(&b, ", and %zu more", total - listed);
        if (listed) pf_puts(&b, ")");
    }
    char *msg = pf_take(&b);
    if (!msg) return PF_NOMEM(r);
    ptx_fit_status st = pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE, "%s", msg);
    free(msg);
    return st;
}

/* Refuses when any function body uses an instruction that needs the a/f target, or a newer
   GPU than the target (a tf32 mma on sm_75 ...), which ptxas would reject. Also notes
   .multicast::cluster, which ptxas only advises against on plain targets. */
ptx_fit_status pf_check_instructions(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    int noted = 0;
    for (size_t i = 0; i < m->nf; i++) {
        const pf_func *f = &m->f[i];
        if (!f->has_body) continue;
        pf_stmts S;
        pf_tok t;
        pf_stmts_init(&S, m->c, f->body_s, f->body_e);
        while (pf_next_stmt(&S, &t)) {
            const char *w = m->c + t.s;
            size_t k = t.e - t.s;
            if (!pf_alpha((unsigned char)w[0])) continue;
            for (size_t j = 0; j < sizeof pf_rules / sizeof pf_rules[0]; j++) {
                if (!pf_rule_match(w, k, &pf_rules[j])) continue;
                return pf_fail(r, m->in, m->n, PTX_FIT_REFUSED, t.s,
                               "cannot use the plain target %s: '%.*s' needs an architecture-"
                               "specific target (%s), which TensorRT does not load",
                               F->target_after, (int)(k > 60 ? 60 : k), w, pf_rules[j].needs);
            }
            const pf_min_sm *need = NULL;
            for (size_t j = 0; j < sizeof pf_min_sms / sizeof pf_min_sms[0]; j++) {
                const pf_rule ru = {pf_min_sms[j].head, pf_min_sms[j].comp, ""};
                if (pf_rule_match(w, k, &ru) && (!need || pf_min_sms[j].sm > need->sm))
                    need = &pf_min_sms[j];
            }
            if (need && need->sm > F->sm_out)
                return pf_fail(r, m->in, m->n, PTX_FIT_REFUSED, t.s,
                               "cannot target %s: '%.*s' (%s) needs sm_%u or newer", F->target_after,
                               (int)(k > 60 ? 60 : k), w, need->what, need->sm);
            if (!noted && pf_has_comp(w, k, "cp", "multicast::cluster")) {
                size_t ls, le;
                int line = pf_line(m->in, m->n, t.s, &ls, &le);
                pf_printf(&F->note,
                          "%sline %d uses .multicast::cluster, which ptxas advises against "
                          "on plain targets (slower)",
                          F->note.n ? "; " : "", line);
                noted = 1;
            }
        }
    }
    return PTX_FIT_OK;
}

/* Counts mma instructions; the shared memory is the library's count (dswa_ptx_shared_memory). */
void pf_measure(const pf_module *m, const pf_func *f, ptx_fit_result *r, pf_span *dyn_name) {
    dswa_ptx_shared smem;
    r->mma = r->wgmma = 0;
    dswa_ptx_shared_memory(m->c, m->n, m->c + f->name.s, f->name.e - f->name.s, &smem);
    r->shared_bytes = smem.static_bytes;
    r->shared_dynamic = smem.dynamic_arrays;
    if (smem.dynamic_arrays) {
        dyn_name->s = smem.dynamic_name;
        dyn_name->e = smem.dynamic_name + smem.dynamic_name_len;
    }
    pf_stmts S;
    pf_tok t;
    pf_stmts_init(&S, m->c, f->body_s, f->body_e);
    while (pf_next_stmt(&S, &t)) {
        const char *w = m->c + t.s;
        size_t k = t.e - t.s;
        if ((k == 3 || (k > 3 && w[3] == '.')) && memcmp(w, "mma", 3) == 0) {
            r->mma++; /* mma.sync, mma.sp ... */
        } else if (pf_has_comp(w, k, "wgmma", "mma_async") ||
                   pf_has_comp(w, k, "wgmma", "mma_async::sp")) {
            r->mma++;
            r->wgmma++;
        } else if (pf_has_comp(w, k, "wmma", "mma") || pf_has_comp(w, k, "tcgen05", "mma")) {
            r->mma++;
        }
    }
}

static size_t pf_set_find(const pf_set *set, const pf_param *P, const char *c, const char *nm,
                          size_t k) {
    size_t h = (size_t)pf_hash(nm, k) & set->mask;
    for (;;) {
        size_t q = set->slot[h];
        if (!q) return 0;
        const pf_param *x = &P[q - 1];
        if (x->name.e - x->name.s == k && memcmp(c + x->name.s, nm, k) == 0) return q;
        h = (h + 1) & set->mask;
    }
}

/* Bytes of a type word (.u64, .b8, .f16x2, .bf16 ...), times `vec`; 0 when not a type. */
static uint64_t pf_type_bytes(const char *w, size_t k) {
    if (k < 3 || w[0] != '.') return 0;
    size_t i = (k >= 4 && w[1] == 'b' && w[2] == 'f') ? 3 : 2;
    if (i == 2 && w[1] != 'b' && w[1] != 'u' && w[1] != 's' && w[1] != 'f') return 0;
    uint64_t bits = 0, mult = 1;
    size_t j = i;
    while (j < k && pf_digit((unsigned char)w[j]) && j - i < 3) bits = bits * 10 + (uint64_t)(w[j++] - '0');
    if (j + 2 == k && w[j] == 'x' && pf_digit((unsigned char)w[j + 1])) mult = (uint64_t)(w[j + 1] - '0');
    else if (j != k) return 0;
    return bits % 8 == 0 ? bits / 8 * mult : 0;
}

/* Size of a parameter in bytes from its declaration (.param .u64 .ptr .align 16 x, or
   .param .align 8 .b8 x[24]); 0 when unknown. */
static uint64_t pf_param_bytes(const pf_module *m, const pf_param *p) {
    pf_lex L = {m->c, p->text.e, p->text.s};
    uint64_t elem = 0, count = 1;
    for (;;) {
        pf_tok t = pf_next(&L);
        if (t.kind == PF_EOF) break;
        uint64_t b = t.kind == PF_WORD ? pf_type_bytes(m->c + t.s, t.e - t.s) : 0;
        if (b) elem = b;
        if (pf_punct(m->c, t, '[')) {
            pf_tok d = pf_next(&L);
            uint64_t v;
            if (d.kind == PF_WORD && pf_u64(m->c + d.s, d.e - d.s, &v)) count = pf_mul_sat(count, v);
            else return 0;
        }
    }
    return pf_mul_sat(elem, count);
}

/* Bytes one ld.param reads: its type times its vector width. */
static uint64_t pf_load_bytes(const char *w, size_t k) {
    uint64_t vec = 1, bytes = 0;
    for (size_t i = 0; i < k;) {
        size_t e = i + 1;
        while (e < k && w[e] != '.') e++;
        if (w[i] == '.') {
            if (e - i == 3 && w[i + 1] == 'v' && pf_digit((unsigned char)w[i + 2])) vec = (uint64_t)(w[i + 2] - '0');
            uint64_t b = pf_type_bytes(w + i, e - i);
            if (b) bytes = b;
        }
        i = e;
    }
    return pf_mul_sat(bytes, vec);
}

static ptx_fit_status pf_check_keep(pf_fit *F, ptx_fit_result *r) {
    const pf_func *f = &F->m.f[F->fi];
    if ((size_t)F->o->keep > f->np)
        return pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE,
                       "--keep %d is more than the %zu parameters of entry '%.*s'", F->o->keep,
                       f->np, PF_NAME80(F->m.c, f->name));
    F->keep = (size_t)F->o->keep;
    return PTX_FIT_OK;
}

/* The target to write: plain, and known to the .version. */
ptx_fit_status pf_resolve_target(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const char *c = m->c, *in = F->in;
    char suffix;
    if (!pf_parse_sm(c + m->target.s, m->target.e - m->target.s, &F->sm_in, &suffix))
        return pf_fail(r, in, F->len, PTX_FIT_BAD_INPUT, m->target.s,
                       "unrecognised target (expected sm_<number>, optionally with a or f)");
    if (F->o->arch) {
        F->target_after = pf_strndup(F->o->arch, strlen(F->o->arch));
        F->sm_out = 0;
        pf_parse_sm(F->o->arch, strlen(F->o->arch), &F->sm_out, &suffix);
    } else {
        size_t k = m->target.e - m->target.s;
        F->target_after = pf_strndup(c + m->target.s, suffix ? k - 1 : k);
        F->sm_out = F->sm_in;
    }
    if (!F->target_after) return PF_NOMEM(r);
    unsigned ver = pf_version_num(c + m->version.s, m->version.e - m->version.s);
    if (!ver)
        return pf_fail(r, in, F->len, PTX_FIT_BAD_INPUT, m->version.s,
                       "malformed .version (expected X.Y)");
    unsigned need = pf_min_version(F->sm_out);
    size_t tlen = strlen(F->target_after);
    if (need && ver < need &&
        (m->target.e - m->target.s != tlen || memcmp(c + m->target.s, F->target_after, tlen) != 0))
        return pf_fail(r, in, F->len, PTX_FIT_REFUSED, m->version.s,
                       "cannot target %s: it needs PTX ISA %u.%u or later, and this is %u.%u",
                       F->target_after, need / 10, need % 10, ver / 10, ver % 10);
    if (F->sm_out < F->sm_in)
        pf_printf(&F->note,
                  "the target is lowered from sm_%u to %s: the instructions were checked "
                  "against it, --verify assembles it",
                  F->sm_in, F->target_after);
    return PTX_FIT_OK;
}

/* Refuses, naming the statement, when a body instruction reaches past a kept parameter. */
static ptx_fit_status pf_check_kept_use(pf_fit *F, const pf_set *set, const pf_param *P,
                                        ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const pf_func *f = &m->f[F->fi];
    const char *c = m->c;
    pf_stmts S;
    pf_tok op;
    pf_stmts_init(&S, c, f->body_s, f->body_e);
    while (pf_next_stmt(&S, &op)) {
        const char *w = c + op.s;
        size_t k = op.e - op.s;
        if (pf_has_comp(w, k, "cvta", "param"))
            return pf_fail(r, F->in, F->len, PTX_FIT_REFUSED, op.s,
                           "cannot remove parameters of entry '%.*s': the body takes a parameter "
                           "space address (cvta.param), through which it could read them",
                           PF_NAME80(c, f->name));
        if (S.line_mode || !pf_alpha((unsigned char)w[0])) continue;
        const int is_ld = k >= 8 && memcmp(w, "ld.param", 8) == 0;
        pf_lex L = {c, f->body_e, op.e};
        pf_tok prev = op;
        for (;;) {
            pf_tok t = pf_next(&L);
            if (t.kind == PF_EOF || pf_punct(c, t, ';')) break;
            size_t q = t.kind == PF_WORD && pf_ident_start((unsigned char)c[t.s])
                ? pf_set_find(set, P, c, c + t.s, t.e - t.s) : 0;
            if (q && q - 1 < F->keep) {
                /* ld.param [name] or [name+K], inside the parameter */
                uint64_t off = 0, size = pf_param_bytes(m, &P[q - 1]);
                int inside = is_ld && pf_punct(c, prev, '[');
                pf_lex save = L;
                pf_tok u = pf_next(&L);
                if (inside && pf_punct(c, u, '+')) {
                    pf_tok d = pf_next(&L);
                    inside = d.kind == PF_WORD && pf_u64(c + d.s, d.e - d.s, &off);
                    u = pf_next(&L);
                }
                inside = inside && pf_punct(c, u, ']') && size &&
                    pf_add_sat(off, pf_load_bytes(w, k)) <= size;
                L = save;
                if (!inside)
                    return pf_fail(r, F->in, F->len, PTX_FIT_REFUSED, t.s,
                                   "cannot remove parameters of entry '%.*s': the body %s "
                                   "parameter '%.*s', which could reach the removed ones",
                                   PF_NAME80(c, f->name),
                                   is_ld ? "reads past" : "takes the address of",
                                   PF_NAME80(c, P[q - 1].name));
            }
            prev = t;
        }
    }
    return PTX_FIT_OK;
}

/* Removed parameters must be unreachable: no identifier in the body may be one of their
   names (one pass over the body with a hash set keeps this linear in the text, whatever the
   count), and no kept parameter may lead to them (its address taken, or read past its end). */
ptx_fit_status pf_prove_unread(pf_fit *F, ptx_fit_result *r) {
    const pf_module *m = &F->m;
    const pf_func *f = &m->f[F->fi];
    const char *c = m->c;
    if (F->keep >= f->np) return PTX_FIT_OK;
    const pf_param *P = m->p + f->p0;
    size_t cap = 16;
    while (cap < 2 * f->np) cap *= 2;
    pf_set set = {calloc(cap, sizeof(size_t)), cap - 1};
    if (!set.slot) return PF_NOMEM(r);
    for (size_t i = 0; i < f->np; i++) {
        const char *nm = c + P[i].name.s;
        size_t k = P[i].name.e - P[i].name.s;
        size_t h = (size_t)pf_hash(nm, k) & set.mask;
        for (;;) { /* a repeated name stands for its last parameter: removed, if any is */
            size_t q = set.slot[h];
            const pf_param *x = q ? &P[q - 1] : NULL;
            if (!q || (x->name.e - x->name.s == k && memcmp(c + x->name.s, nm, k) == 0)) {
                set.slot[h] = i + 1;
                break;
            }
            h = (h + 1) & set.mask;
        }
    }
    ptx_fit_status st = PTX_FIT_OK;
    size_t i = f->body_s;
    while (i < f->body_e && st == PTX_FIT_OK) {
        if (!pf_ident((unsigned char)c[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < f->body_e && pf_ident((unsigned char)c[j])) j++;
        /* After a '.', a run is part of an opcode or directive (ld.param.u64), which no
           reference to a parameter can be; names never start with a digit. */
        size_t q = c[i - 1] != '.' && !pf_digit((unsigned char)c[i])
            ? pf_set_find(&set, P, c, c + i, j - i) : 0;
        if (q && q - 1 >= F->keep) {
            size_t ls, le;
            pf_line(F->in, F->len, i, &ls, &le);
            int ld = 0;
            for (size_t z = ls; z + 8 <= le; z++)
                if (memcmp(c + z, "ld.param", 8) == 0) {
                    ld = 1;
                    break;
                }
            st = pf_fail(r, F->in, F->len, PTX_FIT_REFUSED, i,
                         "cannot remove parameter %zu '%.*s' of entry '%.*s': the body %s it",
                         q - 1, (int)(j - i > 80 ? 80 : j - i), c + i, PF_NAME80(c, f->name),
                         ld ? "reads" : "refers to");
        }
        i = j;
    }
    if (st == PTX_FIT_OK) st = pf_check_kept_use(F, &set, P, r);
    free(set.slot);
    return st;
}
