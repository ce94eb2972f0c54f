/* ptx_fit, stage 1: read. The bytes are checked to be text, a copy with comments and string
   contents blanked (same offsets, same line breaks) is what every later scan looks at, and
   the module's structure is parsed from it: .version, .target, functions with their
   parameters and bodies. Every loop is iterative (brace nesting is a
   counter, never recursion), buffers grow with overflow checks, every allocation is checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- text ---------------------------------------------------------------------------- */
/* Scans s[0..n) for what PTX text may hold: printable ASCII, blanks, and UTF-8 (comments and
   .file names may hold it). Returns where it stopped: n, the start of a sequence cut off by
   the end (*bad = 0: more bytes may complete it), or the first byte that is not text
   (*bad = 1). */
static size_t pf_text_scan(const unsigned char *s, size_t n, int *bad) {
    size_t i = 0;
    *bad = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if ((c < 0x20 && !pf_space(c)) || c == 0x7f) break;
            i++;
            continue;
        }
        size_t k; /* continuation bytes; the first one's range excludes overlong forms */
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) k = 1;
        else if (c == 0xe0) k = 2, lo = 0xa0;
        else if (c == 0xed) k = 2, hi = 0x9f;
        else if (c >= 0xe1 && c <= 0xef) k = 2;
        else if (c == 0xf0) k = 3, lo = 0x90;
        else if (c >= 0xf1 && c <= 0xf3) k = 3;
        else if (c == 0xf4) k = 3, hi = 0x8f;
        else break;
        size_t j = 1;
        for (; j <= k && i + j < n; j++) {
            unsigned char d = s[i + j];
            if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xbf)) break;
        }
        if (i + j >= n && j <= k) return i; /* cut off by the end */
        if (j <= k) break;
        i += k + 1;
    }
    *bad = i < n;
    return i;
}

/* cut: the text ends inside a UTF-8 sequence that starts at `off`. */
static void pf_not_text_msg(char *why, size_t n, const unsigned char *s, size_t len, size_t off,
                            int cut) {
    size_t line = 1;
    for (size_t i = 0; i < off && i < len; i++) line += s[i] == '\n';
    if (!cut)
        snprintf(why, n, "not text (so not PTX): byte 0x%02x at offset %zu, line %zu", s[off], off,
                 line);
    else
        snprintf(why, n, "not text (so not PTX): a UTF-8 sequence cut off at the end, line %zu",
                 line);
}

ptx_fit_status pf_check_text(const char *in, size_t n, ptx_fit_result *r) {
    int bad;
    size_t off = pf_text_scan((const unsigned char *)in, n, &bad);
    if (off == n) return PTX_FIT_OK;
    char why[160];
    pf_not_text_msg(why, sizeof why, (const unsigned char *)in, n, off, !bad);
    return pf_fail(r, NULL, 0, PTX_FIT_BAD_INPUT, PF_NONE, "%s", why);
}

int ptx_fit_read_file(const char *path, char **buf, size_t *len, char *why, size_t wn) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        snprintf(why, wn, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 0, n = 0, checked = 0;
    char *b = NULL;
    int ok = 0;
    for (;;) {
        if (n == cap) { /* grows to one byte past the cap, to see that the file is longer */
            size_t nc = cap ? cap * 2 : (size_t)1 << 16;
            if (nc > PTX_FIT_MAX_BYTES + 1) nc = PTX_FIT_MAX_BYTES + 1;
            char *nb = realloc(b, nc);
            if (!nb) {
                snprintf(why, wn, "cannot read %s: out of memory", path);
                break;
            }
            b = nb;
            cap = nc;
        }
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n > PTX_FIT_MAX_BYTES) {
            snprintf(why, wn, "%s: larger than %zu MiB, so not a PTX module", path,
                     PTX_FIT_MAX_BYTES >> 20);
            break;
        }
        int bad;
        checked += pf_text_scan((const unsigned char *)b + checked, n - checked, &bad);
        if (bad || (k == 0 && checked < n)) { /* stop at the first bad byte: /dev/urandom */
            char w[160];
            pf_not_text_msg(w, sizeof w, (const unsigned char *)b, n, checked, !bad);
            snprintf(why, wn, "%s: %s", path, w);
            break;
        }
        if (k == 0) {
            if (ferror(f))
                snprintf(why, wn, "cannot read %s: %s", path, strerror(errno ? errno : EIO));
            else
                ok = 1;
            break;
        }
    }
    if (f != stdin) fclose(f);
    if (!ok) {
        free(b);
        return -1;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* ---- comment-free copy ---------------------------------------------------------------- */
/* Same length and line breaks as the input; comments and the insides of strings become
   spaces, so no later scan can mistake them for code (a file name in `.file` included). */
static char *pf_clean(const char *in, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return NULL;
    size_t i = 0;
    while (i < n) {
        char ch = in[i];
        if (ch == '/' && i + 1 < n && in[i + 1] == '/') {
            while (i < n && in[i] != '\n') c[i++] = ' ';
        } else if (ch == '/' && i + 1 < n && in[i + 1] == '*') {
            c[i++] = ' ';
            c[i++] = ' ';
            while (i < n && !(in[i] == '*' && i + 1 < n && in[i + 1] == '/')) {
                c[i] = in[i] == '\n' ? '\n' : ' ';
                i++;
            }
            if (i < n) {
                c[i++] = ' ';
                c[i++] = ' ';
            }
        } else if (ch == '"') {
            c[i++] = '"';
            while (i < n && in[i] != '"' && in[i] != '\n') {
                if (in[i] == '\\' && i + 1 < n && in[i + 1] != '\n') c[i++] = ' ';
                c[i++] = ' ';
            }
            if (i < n && in[i] == '"') c[i++] = '"';
        } else {
            c[i++] = ch;
        }
    }
    c[n] = '\0';
    return c;
}

/* ---- lexer ----------------------------------------------------------------------------- */
/* Words are runs of identifier characters and dots, with "::" inside (".shared::cta",
   "wgmma.mma_async.sync...", "8.7", "0f3F800000"); anything else is one punctuation char. */
pf_tok pf_next(pf_lex *L) {
    pf_tok t = {0, 0, PF_EOF, 0};
    size_t p = L->pos;
    while (p < L->n && pf_space((unsigned char)L->c[p])) {
        if (L->c[p] == '\n') t.nl = 1;
        p++;
    }
    t.s = p;
    if (p >= L->n) {
        t.e = p;
        L->pos = p;
        return t;
    }
    if (pf_wordc((unsigned char)L->c[p])) {
        while (p < L->n) {
            if (pf_wordc((unsigned char)L->c[p]))
                p++;
            else if (L->c[p] == ':' && p + 1 < L->n && L->c[p + 1] == ':')
                p += 2;
            else
                break;
        }
        t.kind = PF_WORD;
    } else {
        p++;
        t.kind = PF_PUNCT;
    }
    t.e = p;
    L->pos = p;
    return t;
}
int pf_is(const char *c, pf_tok t, const char *w) {
    size_t k = strlen(w);
    return t.kind == PF_WORD && t.e - t.s == k && memcmp(c + t.s, w, k) == 0;
}
int pf_punct(const char *c, pf_tok t, char ch) { return t.kind == PF_PUNCT && c[t.s] == ch; }

/* After an `open` bracket: moves past the matching `close` and returns its offset; PF_NONE at
   the end. A counter, not recursion: nesting depth in untrusted text costs no stack. */
size_t pf_skip_matching(pf_lex *L, char open, char close) {
    size_t depth = 1;
    for (;;) {
        pf_tok t = pf_next(L);
        if (t.kind == PF_EOF) return PF_NONE;
        if (t.kind != PF_PUNCT) continue;
        if (L->c[t.s] == open)
            depth++;
        else if (L->c[t.s] == close && --depth == 0)
            return t.s;
    }
}

/* PTX integer literal (decimal, 0x hex, 0b binary, 0 octal, optional U): 1 and *v
   (saturated at UINT64_MAX) when s[0..n) is one, else 0. */
int pf_u64(const char *s, size_t n, uint64_t *v) {
    if (n && (s[n - 1] == 'U' || s[n - 1] == 'u')) n--;
    if (n == 0) return 0;
    unsigned base = 10;
    size_t i = 0;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
    } else if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
        base = 2;
        i = 2;
    } else if (n > 1 && s[0] == '0') {
        base = 8;
        i = 1;
    }
    uint64_t x = 0;
    int sat = 0;
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        unsigned d;
        if (pf_digit(ch))
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = 10u + (ch - 'a');
        else if (ch >= 'A' && ch <= 'F')
            d = 10u + (ch - 'A');
        else
            return 0;
        if (d >= base) return 0;
        if (x > (UINT64_MAX - d) / base)
            sat = 1;
        else
            x = x * base + d;
    }
    *v = sat ? UINT64_MAX : x;
    return 1;
}
uint64_t pf_mul_sat(uint64_t a, uint64_t b) {
    if (a && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}
uint64_t pf_add_sat(uint64_t a, uint64_t b) {
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}
/* ---- the module ----------------------------------------------------------------------- */
void pf_module_free(pf_module *m) {
    free(m->c);
    free(m->f);
    free(m->p);
    memset(m, 0, sizeof *m);
}

/* Grows *arr (of elements of size sz) to hold one more; 0 when out of memory. */
static int pf_grow(void **arr, size_t *cap, size_t n, size_t sz) {
    if (n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 16;
    if (nc < *cap || nc > (size_t)-1 / sz) return 0;
    void *a = realloc(*arr, nc * sz);
    if (!a) return 0;
    *arr = a;
    *cap = nc;
    return 1;
}
/* ---- parsing ------------------------------------------------------------------------- */
/* Reads a parameter list after its '('; fills f->p0/np/rp. */
static ptx_fit_status pf_params(pf_module *m, pf_lex *L, pf_func *f, ptx_fit_result *r) {
    const char *c = m->c;
    size_t paren = 1, bracket = 0;
    pf_param cur;
    int in_param = 0, want_align = 0;
    f->p0 = m->np;
    f->np = 0;
    memset(&cur, 0, sizeof cur);
    for (;;) {
        pf_tok t = pf_next(L);
        if (t.kind == PF_EOF)
            return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, f->lp,
                           "malformed PTX: the parameter list of '%.*s' is not closed",
                           (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                           c + f->name.s);
        int end_list = 0, end_param = 0;
        if (t.kind == PF_PUNCT) {
            char ch = c[t.s];
            if (ch == '(')
                paren++;
            else if (ch == ')') {
                if (--paren == 0) end_list = 1;
            } else if (ch == '[')
                bracket++;
            else if (ch == ']') {
                if (bracket) bracket--;
            } else if (ch == ',' && paren == 1 && bracket == 0)
                end_param = 1;
            else if (ch == ';' || ch == '{' || ch == '}')
                return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: '%c' inside the parameter list of '%.*s'", ch,
                               (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                               c + f->name.s);
        }
        if (end_list || end_param) {
            if (!in_param) {
                if (end_list && f->np == 0) {
                    f->rp = t.s;
                    return PTX_FIT_OK;
                } /* "()" */
                return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: an empty parameter in the list of '%.*s'",
                               (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                               c + f->name.s);
            }
            if (cur.name.e == 0 || want_align)
                return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, cur.text.s,
                               "malformed PTX: parameter %zu of '%.*s' has %s", f->np,
                               (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                               c + f->name.s, want_align ? "no value after .align" : "no name");
            if (!pf_grow((void **)&m->p, &m->capp, m->np, sizeof *m->p)) return PF_NOMEM(r);
            m->p[m->np++] = cur;
            f->np++;
            memset(&cur, 0, sizeof cur);
            in_param = 0;
            want_align = 0;
            if (end_list) {
                f->rp = t.s;
                return PTX_FIT_OK;
            }
            continue;
        }
        if (!in_param) {
            in_param = 1;
            cur.text.s = t.s;
        }
        cur.text.e = t.e;
        if (t.kind != PF_WORD || paren != 1 || bracket != 0) {
            want_align = 0;
            continue;
        }
        if (want_align) {
            want_align = 0;
            cur.has_align = 1;
            cur.align_val.s = t.s;
            cur.align_val.e = t.e;
            if (!pf_u64(c + t.s, t.e - t.s, &cur.align))
                return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: .align needs a number");
        } else if (pf_is(c, t, ".ptr")) {
            cur.is_ptr = 1;
        } else if (pf_is(c, t, ".align")) {
            want_align = 1;
        } else if (pf_ident_start((unsigned char)c[t.s])) {
            for (size_t i = t.s; i < t.e; i++)
                if (!pf_ident((unsigned char)c[i]))
                    return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                                   "malformed PTX: '%.*s' is not a parameter name",
                                   (int)(t.e - t.s > 80 ? 80 : t.e - t.s), c + t.s);
            cur.name.s = t.s;
            cur.name.e = t.e;
        }
    }
}

/* Reads `.entry` / `.func` from after its word: name, parameters, body. */
static ptx_fit_status pf_function(pf_module *m, pf_lex *L, int is_entry, size_t decl_start,
                                       pf_tok kw, ptx_fit_result *r) {
    const char *c = m->c;
    pf_func f;
    memset(&f, 0, sizeof f);
    f.is_entry = is_entry;
    f.decl_start = decl_start;
    f.kw = kw.s;
    const char *what = is_entry ? ".entry" : ".func";
    pf_tok t = pf_next(L);
    if (!is_entry && pf_punct(c, t, '(')) { /* .func's return parameters */
        if (pf_skip_matching(L, '(', ')') == PF_NONE)
            return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                           "malformed PTX: unclosed '(' after .func");
        t = pf_next(L);
    }
    if (t.kind != PF_WORD || !pf_ident_start((unsigned char)c[t.s]))
        return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, kw.s,
                       "malformed PTX: no name after %s", what);
    f.name.s = t.s;
    f.name.e = t.e;
    pf_lex save = *L;
    t = pf_next(L);
    if (pf_punct(c, t, '(')) {
        f.has_list = 1;
        f.lp = t.s;
        ptx_fit_status st = pf_params(m, L, &f, r);
        if (st != PTX_FIT_OK) return st;
    } else {
        *L = save;
        f.p0 = m->np;
    }
    /* Performance directives (.maxntid 128, 1, 1 ...) up to the body or the ';'. */
    for (;;) {
        t = pf_next(L);
        if (t.kind == PF_EOF)
            return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, kw.s,
                           "malformed PTX: %s '%.*s' has neither a body nor a ';'", what,
                           (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                           c + f.name.s);
        if (pf_punct(c, t, ';')) break;
        if (pf_punct(c, t, '{')) {
            f.has_body = 1;
            f.body_s = t.e;
            f.body_e = pf_skip_matching(L, '{', '}');
            if (f.body_e == PF_NONE)
                return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: the body of '%.*s' is not closed",
                               (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                               c + f.name.s);
            break;
        }
        if (pf_is(c, t, ".entry") || pf_is(c, t, ".func") || pf_punct(c, t, '}'))
            return pf_fail(r, m->in, m->n, PTX_FIT_BAD_INPUT, t.s,
                           "malformed PTX: %s '%.*s' has neither a body nor a ';'", what,
                           (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                           c + f.name.s);
    }
    if (!pf_grow((void **)&m->f, &m->capf, m->nf, sizeof *m->f)) return PF_NOMEM(r);
    m->f[m->nf++] = f;
    return PTX_FIT_OK;
}

/* Parses the module's structure: .version, .target, functions. */
ptx_fit_status pf_parse(pf_module *m, const char *in, size_t n,
                                    ptx_fit_result *r) {
    memset(m, 0, sizeof *m);
    m->in = in;
    m->n = n;
    m->c = pf_clean(in, n);
    if (!m->c) return PF_NOMEM(r);
    const char *c = m->c;
    pf_lex L = {c, n, 0};
    size_t link = PF_NONE;
    ptx_fit_status st = PTX_FIT_OK;
    for (;;) {
        pf_tok t = pf_next(&L);
        if (t.kind == PF_EOF) break;
        if (t.kind == PF_PUNCT) {
            link = PF_NONE;
            if (c[t.s] == '{') { /* .section data, initializers */
                if (pf_skip_matching(&L, '{', '}') == PF_NONE) {
                    st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s,
                                 "malformed PTX: unclosed '{'");
                    break;
                }
            } else if (c[t.s] == '}') {
                st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s, "malformed PTX: unmatched '}'");
                break;
            }
            continue;
        }
        if (pf_is(c, t, ".visible") || pf_is(c, t, ".extern") || pf_is(c, t, ".weak") ||
            pf_is(c, t, ".common")) {
            if (link == PF_NONE) link = t.s;
            continue;
        }
        size_t decl = link == PF_NONE ? t.s : link;
        link = PF_NONE;
        if (pf_is(c, t, ".version")) {
            pf_tok v = pf_next(&L);
            if (v.kind != PF_WORD || v.nl) {
                st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s, "malformed .version");
                break;
            }
            if (m->have_version) {
                st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s,
                             "malformed PTX: a second .version directive");
                break;
            }
            m->have_version = 1;
            m->version.s = v.s;
            m->version.e = v.e;
        } else if (pf_is(c, t, ".target")) {
            if (m->have_target) {
                st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s,
                             "malformed PTX: a second .target directive");
                break;
            }
            m->have_target = 1;
            m->target.s = m->target.e = PF_NONE;
            for (;;) { /* sm_90a[, texmode_independent, debug ...] */
                pf_lex save = L;
                pf_tok a = pf_next(&L);
                if (a.kind != PF_WORD || a.nl) {
                    L = save;
                    break;
                }
                if (m->target.s == PF_NONE && a.e - a.s > 3 && memcmp(c + a.s, "sm_", 3) == 0) {
                    m->target.s = a.s;
                    m->target.e = a.e;
                }
                save = L;
                pf_tok comma = pf_next(&L);
                if (!pf_punct(c, comma, ',') || comma.nl) {
                    L = save;
                    break;
                }
            }
            if (m->target.s == PF_NONE) {
                st = pf_fail(r, in, n, PTX_FIT_BAD_INPUT, t.s, "no sm_XX in the .target");
                break;
            }
        } else if (pf_is(c, t, ".entry") || pf_is(c, t, ".func")) {
            st = pf_function(m, &L, pf_is(c, t, ".entry"), decl, t, r);
            if (st != PTX_FIT_OK) break;
        }
    }
    if (st == PTX_FIT_NO_MEMORY) return st;
    /* Text without the two directives every PTX module opens with is not PTX, whatever
       else went wrong with it: say that first. */
    if (!m->have_version)
        return pf_fail(r, in, n, PTX_FIT_BAD_INPUT, PF_NONE, "not PTX: no .version directive");
    if (!m->have_target)
        return pf_fail(r, in, n, PTX_FIT_BAD_INPUT, PF_NONE, "not PTX: no .target directive");
    return st;
}

/* ---- statements of a body ------------------------------------------------------------ */
/* Walks the statements of a body, yielding each one's first word (an opcode such as
   "mma.sync.aligned..." or a directive such as ".shared") after labels and guards.
   Statements end at ';' — or at the line's end for line directives like .loc — and a '{'
   or '}' where a statement may start opens or closes a scope; inside an instruction they
   are vector operands. */
void pf_stmts_init(pf_stmts *S, const char *c, size_t s, size_t e) {
    S->L.c = c;
    S->L.n = e;
    S->L.pos = s;
    S->at_start = 1;
    S->line_mode = 0;
}
int pf_next_stmt(pf_stmts *S, pf_tok *out) {
    const char *c = S->L.c;
    for (;;) {
        pf_tok t = pf_next(&S->L);
        if (t.kind == PF_EOF) return 0;
        if (!S->at_start) {
            if (S->line_mode && t.nl) {
                S->at_start = 1;
                S->line_mode = 0;
            } else {
                if (pf_punct(c, t, ';')) S->at_start = 1;
                continue;
            }
        }
        if (t.kind == PF_PUNCT) {
            if (c[t.s] == '@') { /* guard: @%p1 or @!%p1 */
                pf_lex save = S->L;
                pf_tok u = pf_next(&S->L);
                if (pf_punct(c, u, '!')) u = pf_next(&S->L);
                if (u.kind != PF_WORD) S->L = save;
            }
            continue;
        }
        pf_lex save = S->L;
        pf_tok u = pf_next(&S->L);
        if (pf_punct(c, u, ':')) continue; /* label */
        S->L = save;
        S->at_start = 0;
        S->line_mode = pf_is(c, t, ".loc") || pf_is(c, t, ".file") || pf_is(c, t, ".section") ||
            pf_is(c, t, ".version") || pf_is(c, t, ".target") || pf_is(c, t, ".address_size");
        *out = t;
        return 1;
    }
}
