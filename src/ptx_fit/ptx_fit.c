/* ptx_fit.c — `dswa ptx-fit`'s engine: a small PTX reader that fits third-party PTX (Triton's
 * above all) to the TensorRT AOT plugin contract (SPEC.md section 4): it removes entry
 * parameters after the first K once it has proved the body never names them, makes
 * `.target sm_XXa` / `sm_XXf` plain (refusing when an instruction needs the suffix), and
 * raises `.align` on pointer parameters. It also reports the signature, the mma count and
 * the shared memory declared.
 *
 * It reads untrusted text, so: a copy of the input with comments and string contents blanked
 * (same offsets, same line breaks) is what all scanning looks at, every loop is iterative
 * (brace nesting is a counter, never recursion), buffers grow with overflow checks, and every
 * allocation is checked. Edits are applied to the original bytes by offset, so everything
 * not edited (comments, debug sections, formatting) is kept byte for byte. The result is
 * parsed again and checked, which also gives the "after" signature.
 */
#include "ptx_fit/ptx_fit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PF_NONE ((size_t)-1)
#define PF_MAX_ALIGN 256 /* no allocator TensorRT uses promises more */

/* ---- growable text buffer ------------------------------------------------------------- */
typedef struct pf_buf {
    char *b;
    size_t n, cap;
    int oom;
} pf_buf;

static void pf_putn(pf_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n > (size_t)-1 - b->n - 1) {
        b->oom = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) {
            if (cap > (size_t)-1 / 2) {
                cap = b->n + n + 1;
                break;
            }
            cap *= 2;
        }
        char *nb = realloc(b->b, cap);
        if (!nb) {
            b->oom = 1;
            return;
        }
        b->b = nb;
        b->cap = cap;
    }
    if (n) memcpy(b->b + b->n, s, n);
    b->n += n;
    b->b[b->n] = '\0';
}
static void pf_puts(pf_buf *b, const char *s) { pf_putn(b, s, strlen(s)); }

static void pf_vprintf(pf_buf *b, const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    char *tmp = malloc((size_t)k + 1);
    if (!tmp) {
        b->oom = 1;
        return;
    }
    vsnprintf(tmp, (size_t)k + 1, fmt, ap);
    pf_putn(b, tmp, (size_t)k);
    free(tmp);
}
static void pf_printf(pf_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void pf_printf(pf_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pf_vprintf(b, fmt, ap);
    va_end(ap);
}
/* Takes the buffer's string (an empty one when nothing was written); NULL if out of memory. */
static char *pf_take(pf_buf *b) {
    if (!b->oom && !b->b) pf_putn(b, "", 0);
    if (b->oom) {
        free(b->b);
        b->b = NULL;
        return NULL;
    }
    char *s = b->b;
    b->b = NULL;
    b->n = b->cap = 0;
    return s;
}
static char *pf_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- characters ------------------------------------------------------------------------ */
/* Own ASCII classes: <ctype.h> depends on the locale and is undefined for negative chars. */
static int pf_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int pf_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int pf_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
/* Characters of an identifier: PTX's [A-Za-z0-9_$] plus the % that starts register names. */
static int pf_ident(unsigned char c) {
    return pf_alpha(c) || pf_digit(c) || c == '_' || c == '$' || c == '%';
}
/* Characters of a lexer word: identifiers, directives, dotted opcodes and numbers. */
static int pf_wordc(unsigned char c) { return pf_ident(c) || c == '.'; }
static int pf_ident_start(unsigned char c) {
    return pf_alpha(c) || c == '_' || c == '$' || c == '%';
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
enum { PF_EOF = 0, PF_WORD, PF_PUNCT };
typedef struct pf_tok {
    size_t s, e; /* [s, e) in the text */
    int kind;
    int nl; /* a line break came before it */
} pf_tok;
typedef struct pf_lex {
    const char *c;
    size_t n, pos;
} pf_lex;

/* Words are runs of identifier characters and dots, with "::" inside (".shared::cta",
   "wgmma.mma_async.sync...", "8.7", "0f3F800000"); anything else is one punctuation char. */
static pf_tok pf_next(pf_lex *L) {
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
static int pf_is(const char *c, pf_tok t, const char *w) {
    size_t k = strlen(w);
    return t.kind == PF_WORD && t.e - t.s == k && memcmp(c + t.s, w, k) == 0;
}
static int pf_punct(const char *c, pf_tok t, char ch) { return t.kind == PF_PUNCT && c[t.s] == ch; }

/* After an `open` bracket: moves past the matching `close` and returns its offset; PF_NONE at
   the end. A counter, not recursion: nesting depth in untrusted text costs no stack. */
static size_t pf_skip_matching(pf_lex *L, char open, char close) {
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
static int pf_u64(const char *s, size_t n, uint64_t *v) {
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
static uint64_t pf_mul_sat(uint64_t a, uint64_t b) {
    if (a && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}
static uint64_t pf_add_sat(uint64_t a, uint64_t b) {
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* ---- the module ----------------------------------------------------------------------- */
typedef struct pf_span {
    size_t s, e;
} pf_span;

typedef struct pf_param {
    pf_span text; /* from its first to its last token */
    pf_span name;
    int is_ptr; /* has .ptr: the .align says how aligned the pointee is */
    int has_align;
    pf_span align_val; /* the number after .align */
    uint64_t align;
} pf_param;

typedef struct pf_func {
    int is_entry;
    pf_span name;
    size_t decl_start; /* first linkage word (.visible ...) or the .entry itself */
    size_t kw; /* the .entry / .func word */
    int has_list;
    size_t lp, rp; /* '(' and ')' of the parameter list */
    size_t p0, np; /* its parameters in pf_module.p */
    int has_body;
    size_t body_s, body_e; /* between the braces */
} pf_func;

typedef struct pf_module {
    const char *in; /* original bytes */
    char *c; /* comment-free copy (owned) */
    size_t n;
    pf_func *f;
    size_t nf, capf;
    pf_param *p;
    size_t np, capp;
    size_t *sh; /* module-scope `.shared` words */
    size_t nsh, capsh;
    int have_version, have_target;
    pf_span version, target; /* the version number; the .target's sm_ word */
} pf_module;

static void pf_module_free(pf_module *m) {
    free(m->c);
    free(m->f);
    free(m->p);
    free(m->sh);
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

/* ---- failure messages ------------------------------------------------------------------ */
/* Line number (1-based) of `off`, and the line's bounds. */
static int pf_line(const char *in, size_t n, size_t off, size_t *ls, size_t *le) {
    if (off > n) off = n;
    size_t line = 1, s = 0;
    for (size_t i = 0; i < off; i++)
        if (in[i] == '\n') {
            line++;
            s = i + 1;
        }
    size_t e = off;
    while (e < n && in[e] != '\n') e++;
    *ls = s;
    *le = e;
    return line > (size_t)0x7fffffff ? 0x7fffffff : (int)line;
}

/* Appends in[s..e) trimmed, printable and at most ~160 characters: it ends up in one line. */
static void pf_put_excerpt(pf_buf *b, const char *in, size_t s, size_t e) {
    while (s < e && pf_space((unsigned char)in[s])) s++;
    while (e > s && pf_space((unsigned char)in[e - 1])) e--;
    size_t k = 0;
    for (size_t i = s; i < e; i++, k++) {
        if (k == 160) {
            pf_puts(b, "...");
            break;
        }
        unsigned char ch = (unsigned char)in[i];
        if (ch == '\t' || ch == ' ') { /* one blank for a run of them */
            if (i > s && (in[i - 1] == ' ' || in[i - 1] == '\t')) {
                k--;
                continue;
            }
            ch = ' ';
        }
        char o = (ch < 0x20 || ch >= 0x7f) ? '?' : (char)ch;
        pf_putn(b, &o, 1);
    }
}

/* Sets r->message (and r->line when `off` is an offset: the message then ends with
   ": line N: <that line>") and returns `st`. */
static dswa_ptx_fit_status pf_fail(dswa_ptx_fit_result *r, const char *in, size_t n,
                                   dswa_ptx_fit_status st, size_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
static dswa_ptx_fit_status pf_fail(dswa_ptx_fit_result *r, const char *in, size_t n,
                                   dswa_ptx_fit_status st, size_t off, const char *fmt, ...) {
    pf_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    pf_vprintf(&b, fmt, ap);
    va_end(ap);
    r->line = 0;
    if (off != PF_NONE && in) {
        size_t ls, le;
        r->line = pf_line(in, n, off, &ls, &le);
        pf_printf(&b, ": line %d: ", r->line);
        pf_put_excerpt(&b, in, ls, le);
    }
    free(r->message);
    r->message = pf_take(&b);
    if (!r->message) {
        r->message = pf_strndup("out of memory", 13);
        return DSWA_PTX_FIT_NO_MEMORY;
    }
    return st;
}
#define PF_NOMEM(r) pf_fail((r), NULL, 0, DSWA_PTX_FIT_NO_MEMORY, PF_NONE, "out of memory")

/* A name from the text, printable, for messages. */
static void pf_put_name(pf_buf *b, const char *c, pf_span s) {
    if (s.e - s.s > 80) {
        pf_put_excerpt(b, c, s.s, s.s + 80);
        pf_puts(b, "...");
    } else {
        pf_put_excerpt(b, c, s.s, s.e);
    }
}
static char *pf_name_str(const char *c, pf_span s) {
    pf_buf b = {0};
    pf_put_name(&b, c, s);
    return pf_take(&b);
}

/* ---- parsing ------------------------------------------------------------------------- */
/* Reads a parameter list after its '('; fills f->p0/np/rp. */
static dswa_ptx_fit_status pf_params(pf_module *m, pf_lex *L, pf_func *f, dswa_ptx_fit_result *r) {
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
            return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, f->lp,
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
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: '%c' inside the parameter list of '%.*s'", ch,
                               (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                               c + f->name.s);
        }
        if (end_list || end_param) {
            if (!in_param) {
                if (end_list && f->np == 0) {
                    f->rp = t.s;
                    return DSWA_PTX_FIT_OK;
                } /* "()" */
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: an empty parameter in the list of '%.*s'",
                               (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                               c + f->name.s);
            }
            if (cur.name.e == 0 || want_align)
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, cur.text.s,
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
                return DSWA_PTX_FIT_OK;
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
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: .align needs a number");
        } else if (pf_is(c, t, ".ptr")) {
            cur.is_ptr = 1;
        } else if (pf_is(c, t, ".align")) {
            want_align = 1;
        } else if (pf_ident_start((unsigned char)c[t.s])) {
            for (size_t i = t.s; i < t.e; i++)
                if (!pf_ident((unsigned char)c[i]))
                    return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                                   "malformed PTX: '%.*s' is not a parameter name",
                                   (int)(t.e - t.s > 80 ? 80 : t.e - t.s), c + t.s);
            cur.name.s = t.s;
            cur.name.e = t.e;
        }
    }
}

/* Reads `.entry` / `.func` from after its word: name, parameters, body. */
static dswa_ptx_fit_status pf_function(pf_module *m, pf_lex *L, int is_entry, size_t decl_start,
                                       pf_tok kw, dswa_ptx_fit_result *r) {
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
            return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                           "malformed PTX: unclosed '(' after .func");
        t = pf_next(L);
    }
    if (t.kind != PF_WORD || !pf_ident_start((unsigned char)c[t.s]))
        return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, kw.s,
                       "malformed PTX: no name after %s", what);
    f.name.s = t.s;
    f.name.e = t.e;
    pf_lex save = *L;
    t = pf_next(L);
    if (pf_punct(c, t, '(')) {
        f.has_list = 1;
        f.lp = t.s;
        dswa_ptx_fit_status st = pf_params(m, L, &f, r);
        if (st != DSWA_PTX_FIT_OK) return st;
    } else {
        *L = save;
        f.p0 = m->np;
    }
    /* Performance directives (.maxntid 128, 1, 1 ...) up to the body or the ';'. */
    for (;;) {
        t = pf_next(L);
        if (t.kind == PF_EOF)
            return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, kw.s,
                           "malformed PTX: %s '%.*s' has neither a body nor a ';'", what,
                           (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                           c + f.name.s);
        if (pf_punct(c, t, ';')) break;
        if (pf_punct(c, t, '{')) {
            f.has_body = 1;
            f.body_s = t.e;
            f.body_e = pf_skip_matching(L, '{', '}');
            if (f.body_e == PF_NONE)
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                               "malformed PTX: the body of '%.*s' is not closed",
                               (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                               c + f.name.s);
            break;
        }
        if (pf_is(c, t, ".entry") || pf_is(c, t, ".func") || pf_punct(c, t, '}'))
            return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                           "malformed PTX: %s '%.*s' has neither a body nor a ';'", what,
                           (int)(f.name.e - f.name.s > 80 ? 80 : f.name.e - f.name.s),
                           c + f.name.s);
    }
    if (!pf_grow((void **)&m->f, &m->capf, m->nf, sizeof *m->f)) return PF_NOMEM(r);
    m->f[m->nf++] = f;
    return DSWA_PTX_FIT_OK;
}

/* Parses the module's structure: .version, .target, functions, module-scope .shared. */
static dswa_ptx_fit_status pf_parse(pf_module *m, const char *in, size_t n,
                                    dswa_ptx_fit_result *r) {
    memset(m, 0, sizeof *m);
    m->in = in;
    m->n = n;
    m->c = pf_clean(in, n);
    if (!m->c) return PF_NOMEM(r);
    const char *c = m->c;
    pf_lex L = {c, n, 0};
    size_t link = PF_NONE;
    dswa_ptx_fit_status st = DSWA_PTX_FIT_OK;
    for (;;) {
        pf_tok t = pf_next(&L);
        if (t.kind == PF_EOF) break;
        if (t.kind == PF_PUNCT) {
            link = PF_NONE;
            if (c[t.s] == '{') { /* .section data, initializers */
                if (pf_skip_matching(&L, '{', '}') == PF_NONE) {
                    st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                                 "malformed PTX: unclosed '{'");
                    break;
                }
            } else if (c[t.s] == '}') {
                st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s, "malformed PTX: unmatched '}'");
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
                st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s, "malformed .version");
                break;
            }
            if (m->have_version) {
                st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s,
                             "malformed PTX: a second .version directive");
                break;
            }
            m->have_version = 1;
            m->version.s = v.s;
            m->version.e = v.e;
        } else if (pf_is(c, t, ".target")) {
            if (m->have_target) {
                st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s,
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
                st = pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, t.s, "no sm_XX in the .target");
                break;
            }
        } else if (pf_is(c, t, ".entry") || pf_is(c, t, ".func")) {
            st = pf_function(m, &L, pf_is(c, t, ".entry"), decl, t, r);
            if (st != DSWA_PTX_FIT_OK) break;
        } else if (pf_is(c, t, ".shared")) {
            if (!pf_grow((void **)&m->sh, &m->capsh, m->nsh, sizeof *m->sh)) {
                st = PF_NOMEM(r);
                break;
            }
            m->sh[m->nsh++] = t.s;
        }
    }
    if (st == DSWA_PTX_FIT_NO_MEMORY) return st;
    /* Text without the two directives every PTX module opens with is not PTX, whatever
       else went wrong with it: say that first. */
    if (!m->have_version)
        return pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "not PTX: no .version directive");
    if (!m->have_target)
        return pf_fail(r, in, n, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "not PTX: no .target directive");
    return st;
}

/* ---- statements of a body ------------------------------------------------------------ */
/* Walks the statements of a body, yielding each one's first word (an opcode such as
   "mma.sync.aligned..." or a directive such as ".shared") after labels and guards.
   Statements end at ';' — or at the line's end for line directives like .loc — and a '{'
   or '}' where a statement may start opens or closes a scope; inside an instruction they
   are vector operands. */
typedef struct pf_stmts {
    pf_lex L;
    int at_start, line_mode;
} pf_stmts;

static void pf_stmts_init(pf_stmts *S, const char *c, size_t s, size_t e) {
    S->L.c = c;
    S->L.n = e;
    S->L.pos = s;
    S->at_start = 1;
    S->line_mode = 0;
}
static int pf_next_stmt(pf_stmts *S, pf_tok *out) {
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

/* Size of one `.shared` declaration starting at the word `off`: adds static bytes to *bytes,
   counts arrays declared without a size in *dyn (recording the first one's name). */
static void pf_shared_decl(const char *c, size_t n, size_t off, uint64_t *bytes, int *dyn,
                           pf_span *dyn_name) {
    pf_lex L = {c, n, off};
    pf_next(&L); /* .shared */
    uint64_t elem = 0, vec = 1, count = 1;
    int have_name = 0, unsized = 0, want_align = 0;
    pf_span name = {0, 0};
    for (;;) {
        pf_tok t = pf_next(&L);
        /* A declaration also ends where another could begin, so that the scans of the
           declarations of a module never overlap: linear time on any text. */
        int end = t.kind == PF_EOF || pf_punct(c, t, ';') || pf_punct(c, t, '{') ||
            pf_punct(c, t, '}') || pf_punct(c, t, '=') || pf_is(c, t, ".shared") ||
            pf_is(c, t, ".entry") || pf_is(c, t, ".func");
        if (end || pf_punct(c, t, ',') ||
            (t.kind == PF_WORD && have_name && pf_ident_start((unsigned char)c[t.s]))) {
            if (have_name) {
                if (unsized) {
                    if (*dyn == 0) *dyn_name = name;
                    if (*dyn < 0x7fffffff) (*dyn)++;
                } else {
                    *bytes = pf_add_sat(*bytes, pf_mul_sat(pf_mul_sat(elem, vec), count));
                }
            }
            have_name = 0;
            unsized = 0;
            count = 1;
            if (end) return;
            if (t.kind != PF_WORD) continue;
        }
        if (t.kind == PF_PUNCT && c[t.s] == '[' && have_name) {
            pf_tok d = pf_next(&L);
            uint64_t v;
            if (pf_punct(c, d, ']')) {
                unsized = 1;
                continue;
            }
            if (d.kind == PF_WORD && pf_u64(c + d.s, d.e - d.s, &v)) count = pf_mul_sat(count, v);
            pf_lex save = L;
            pf_tok cl = pf_next(&L);
            if (!pf_punct(c, cl, ']')) L = save;
            continue;
        }
        if (t.kind != PF_WORD) {
            want_align = 0;
            continue;
        }
        if (want_align) {
            want_align = 0;
            continue;
        }
        size_t k = t.e - t.s;
        const char *w = c + t.s;
        if (pf_is(c, t, ".align"))
            want_align = 1;
        else if (pf_is(c, t, ".v2"))
            vec = 2;
        else if (pf_is(c, t, ".v4"))
            vec = 4;
        else if (pf_is(c, t, ".v8"))
            vec = 8;
        else if (w[0] == '.' && k >= 3 &&
                 (w[1] == 'b' || w[1] == 'u' || w[1] == 's' || w[1] == 'f')) {
            uint64_t bits = 0; /* .b8 .u16 .s32 .f64 .b128 .f16x2 .bf16 */
            size_t i = (w[1] == 'b' && w[2] == 'f') ? 3 : 2;
            uint64_t mult = 1;
            size_t j = i;
            while (j < k && pf_digit((unsigned char)w[j])) j++;
            if (j > i && j - i <= 3) {
                for (size_t q = i; q < j; q++) bits = bits * 10 + (uint64_t)(w[q] - '0');
                if (j + 2 == k && w[j] == 'x' && pf_digit((unsigned char)w[j + 1]))
                    mult = (uint64_t)(w[j + 1] - '0');
                else if (j != k)
                    bits = 0;
            }
            if (bits % 8 == 0 && bits) elem = bits / 8 * mult;
        } else if (pf_ident_start((unsigned char)w[0])) {
            have_name = 1;
            name.s = t.s;
            name.e = t.e;
        }
    }
}

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

int dswa_ptx_fit_arch_ok(const char *arch) {
    unsigned num;
    char suf;
    return arch && pf_parse_sm(arch, strlen(arch), &num, &suf) && suf == 0;
}

/* The lowest PTX ISA version (major*10+minor) that knows a plain target; 0 if unknown.
   From the PTX ISA release notes, checked against ptxas 13.0 where it still has them. */
static unsigned pf_min_version(unsigned sm) {
    static const unsigned t[][2] = {
        {70, 60}, {72, 61},  {75, 63},  {80, 70},  {86, 71},  {87, 74},  {89, 78},
        {90, 78}, {100, 86}, {101, 86}, {103, 88}, {110, 90}, {120, 87}, {121, 88},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i][0] == sm) return t[i][1];
    return 0;
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

/* ---- the fit ------------------------------------------------------------------------- */
typedef struct pf_edit {
    size_t off, del;
    const char *ins;
    size_t ins_len;
} pf_edit;

static int pf_edit_cmp(const void *a, const void *b) {
    const pf_edit *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Finds the entry to fit; *out is its index. */
static dswa_ptx_fit_status pf_pick_entry(const pf_module *m, const char *want, size_t *out,
                                         dswa_ptx_fit_result *r) {
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
    if (want && count == 1 && m->f[found].has_body) {
        *out = found;
        return DSWA_PTX_FIT_OK;
    }
    if (!want && defined == 1) {
        *out = found;
        return DSWA_PTX_FIT_OK;
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
    dswa_ptx_fit_status st = pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "%s", msg);
    free(msg);
    return st;
}

/* Refuses when any function body uses an instruction that needs the a/f target. Also notes
   .multicast::cluster, which ptxas only advises against on plain targets. */
static dswa_ptx_fit_status pf_check_arch(const pf_module *m, const char *target_after, pf_buf *note,
                                         dswa_ptx_fit_result *r) {
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
                return pf_fail(r, m->in, m->n, DSWA_PTX_FIT_REFUSED, t.s,
                               "cannot use the plain target %s: '%.*s' needs an architecture-"
                               "specific target (%s), which TensorRT does not load",
                               target_after, (int)(k > 60 ? 60 : k), w, pf_rules[j].needs);
            }
            if (!noted && pf_has_comp(w, k, "cp", "multicast::cluster")) {
                size_t ls, le;
                int line = pf_line(m->in, m->n, t.s, &ls, &le);
                pf_printf(note,
                          "%sline %d uses .multicast::cluster, which ptxas advises against "
                          "on plain targets (slower)",
                          note->n ? "; " : "", line);
                noted = 1;
            }
        }
    }
    return DSWA_PTX_FIT_OK;
}

/* Counts mma instructions and sums the entry's and the module's .shared declarations. */
static void pf_measure(const pf_module *m, const pf_func *f, dswa_ptx_fit_result *r,
                       pf_span *dyn_name) {
    r->mma = r->wgmma = 0;
    r->shared_bytes = 0;
    r->shared_dynamic = 0;
    for (size_t i = 0; i < m->nsh; i++)
        pf_shared_decl(m->c, m->n, m->sh[i], &r->shared_bytes, &r->shared_dynamic, dyn_name);
    pf_stmts S;
    pf_tok t;
    pf_stmts_init(&S, m->c, f->body_s, f->body_e);
    while (pf_next_stmt(&S, &t)) {
        const char *w = m->c + t.s;
        size_t k = t.e - t.s;
        if (pf_is(m->c, t, ".shared")) {
            pf_shared_decl(m->c, f->body_e, t.s, &r->shared_bytes, &r->shared_dynamic, dyn_name);
        } else if ((k == 3 || (k > 3 && w[3] == '.')) && memcmp(w, "mma", 3) == 0) {
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

dswa_ptx_fit_status dswa_ptx_fit(const char *in, size_t len, const dswa_ptx_fit_opts *o,
                                 dswa_ptx_fit_result *r) {
    memset(r, 0, sizeof *r);
    if (!in && len) return pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "no input");
    if (!in) in = "";
    if (!o) return pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "no options");
    int align = o->align ? o->align : 16;
    if (o->keep < 0)
        return pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE, "--keep %d: must be 0 or more",
                       o->keep);
    if (align < 1 || align > PF_MAX_ALIGN || (align & (align - 1)))
        return pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE,
                       "--align %d: must be a power of 2 from 1 to %d", align, PF_MAX_ALIGN);
    if (o->arch && !dswa_ptx_fit_arch_ok(o->arch)) {
        pf_buf b = {0};
        pf_put_excerpt(&b, o->arch, 0, strlen(o->arch) > 40 ? 40 : strlen(o->arch));
        char *a = pf_take(&b);
        if (!a) return PF_NOMEM(r);
        dswa_ptx_fit_status st = pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE,
                                         "--arch '%s': must be a plain target such as sm_90 "
                                         "(TensorRT loads no sm_XXa/sm_XXf)",
                                         a);
        free(a);
        return st;
    }

    pf_module m;
    pf_module m2;
    memset(&m2, 0, sizeof m2);
    pf_edit *ed = NULL;
    char *target_after = NULL, *text = NULL;
    pf_set set = {NULL, 0};
    pf_buf note = {0};
    dswa_ptx_fit_status st = pf_parse(&m, in, len, r);
    if (st != DSWA_PTX_FIT_OK) goto done;
    const char *c = m.c;

    size_t fi = 0;
    st = pf_pick_entry(&m, o->entry, &fi, r);
    if (st != DSWA_PTX_FIT_OK) goto done;
    const pf_func *f = &m.f[fi];
    const pf_param *P = m.p ? m.p + f->p0 : NULL; /* NULL: no parameter in the module */
    if ((size_t)o->keep > f->np) {
        st = pf_fail(r, NULL, 0, DSWA_PTX_FIT_BAD_INPUT, PF_NONE,
                     "--keep %d is more than the %zu parameters of entry '%.*s'", o->keep, f->np,
                     (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s), c + f->name.s);
        goto done;
    }
    size_t keep = (size_t)o->keep;

    /* Target: plain, and known to the .version. */
    unsigned sm_in, sm_out;
    char suffix;
    if (!pf_parse_sm(c + m.target.s, m.target.e - m.target.s, &sm_in, &suffix)) {
        st = pf_fail(r, in, len, DSWA_PTX_FIT_BAD_INPUT, m.target.s,
                     "unrecognised target (expected sm_<number>, optionally with a or f)");
        goto done;
    }
    if (o->arch) {
        target_after = pf_strndup(o->arch, strlen(o->arch));
        sm_out = 0;
        pf_parse_sm(o->arch, strlen(o->arch), &sm_out, &suffix);
    } else {
        size_t k = m.target.e - m.target.s;
        target_after = pf_strndup(c + m.target.s, suffix ? k - 1 : k);
        sm_out = sm_in;
    }
    if (!target_after) {
        st = PF_NOMEM(r);
        goto done;
    }
    unsigned ver = pf_version_num(c + m.version.s, m.version.e - m.version.s);
    if (!ver) {
        st = pf_fail(r, in, len, DSWA_PTX_FIT_BAD_INPUT, m.version.s,
                     "malformed .version (expected X.Y)");
        goto done;
    }
    unsigned need = pf_min_version(sm_out);
    if (need && ver < need &&
        (m.target.e - m.target.s != strlen(target_after) ||
         memcmp(c + m.target.s, target_after, strlen(target_after)) != 0)) {
        st = pf_fail(r, in, len, DSWA_PTX_FIT_REFUSED, m.version.s,
                     "cannot target %s: it needs PTX ISA %u.%u or later, and this is %u.%u",
                     target_after, need / 10, need % 10, ver / 10, ver % 10);
        goto done;
    }
    if (sm_out < sm_in)
        pf_printf(&note,
                  "the target is lowered from sm_%u to %s: instructions of sm_%u would "
                  "not assemble (--verify checks)",
                  sm_in, target_after, sm_in);
    /* Removed parameters: no identifier in the body may be one of their names. One pass over
       the body with a hash set keeps this linear in the text, whatever the count. */
    if (keep < f->np) {
        size_t nrem = f->np - keep, cap = 16;
        while (cap < 2 * nrem) cap *= 2;
        set.slot = calloc(cap, sizeof *set.slot);
        if (!set.slot) {
            st = PF_NOMEM(r);
            goto done;
        }
        set.mask = cap - 1;
        for (size_t i = keep; i < f->np; i++) {
            const char *nm = c + P[i].name.s;
            size_t k = P[i].name.e - P[i].name.s;
            size_t h = (size_t)pf_hash(nm, k) & set.mask;
            for (;;) {
                size_t q = set.slot[h];
                if (!q) {
                    set.slot[h] = i + 1;
                    break;
                }
                const pf_param *x = &P[q - 1];
                if (x->name.e - x->name.s == k && memcmp(c + x->name.s, nm, k) == 0) break;
                h = (h + 1) & set.mask;
            }
        }
        size_t i = f->body_s;
        while (i < f->body_e) {
            if (!pf_ident((unsigned char)c[i])) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < f->body_e && pf_ident((unsigned char)c[j])) j++;
            /* After a '.', a run is part of an opcode or directive (ld.param.u64), which no
               reference to a parameter can be; names never start with a digit. */
            if (c[i - 1] != '.' && !pf_digit((unsigned char)c[i])) {
                size_t h = (size_t)pf_hash(c + i, j - i) & set.mask;
                for (;;) {
                    size_t q = set.slot[h];
                    if (!q) break;
                    const pf_param *x = &P[q - 1];
                    if (x->name.e - x->name.s == j - i &&
                        memcmp(c + x->name.s, c + i, j - i) == 0) {
                        size_t ls, le;
                        pf_line(in, len, i, &ls, &le);
                        int ld = 0;
                        for (size_t z = ls; z + 8 <= le; z++)
                            if (memcmp(c + z, "ld.param", 8) == 0) {
                                ld = 1;
                                break;
                            }
                        st = pf_fail(r, in, len, DSWA_PTX_FIT_REFUSED, i,
                                     "cannot remove parameter %zu '%.*s' of entry '%.*s': the "
                                     "body %s it",
                                     q - 1, (int)(j - i > 80 ? 80 : j - i), c + i,
                                     (int)(f->name.e - f->name.s > 80 ? 80 : f->name.e - f->name.s),
                                     c + f->name.s, ld ? "reads" : "refers to");
                        goto done;
                    }
                    h = (h + 1) & set.mask;
                }
            }
            i = j;
        }
    }

    st = pf_check_arch(&m, target_after, &note, r);
    if (st != DSWA_PTX_FIT_OK) goto done;

    /* Edits: the target word, .align of kept pointer parameters, the removed tail. */
    char num[24], ins[40];
    snprintf(num, sizeof num, "%d", align);
    snprintf(ins, sizeof ins, ".align %d ", align);
    ed = malloc((keep + 3) * sizeof *ed);
    if (!ed) {
        st = PF_NOMEM(r);
        goto done;
    }
    size_t ne = 0;
    size_t tlen = strlen(target_after);
    if (m.target.e - m.target.s != tlen || memcmp(c + m.target.s, target_after, tlen) != 0)
        ed[ne++] = (pf_edit){m.target.s, m.target.e - m.target.s, target_after, tlen};
    int raised = 0;
    for (size_t i = 0; i < keep; i++) {
        if (!P[i].is_ptr) continue;
        if (P[i].has_align && P[i].align < (uint64_t)align) {
            ed[ne++] =
                (pf_edit){P[i].align_val.s, P[i].align_val.e - P[i].align_val.s, num, strlen(num)};
            raised++;
        } else if (!P[i].has_align && align > 4) { /* .ptr without .align means 4 */
            ed[ne++] = (pf_edit){P[i].name.s, 0, ins, strlen(ins)};
            raised++;
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
    size_t out_len = len;
    for (size_t i = 0; i < ne; i++) {
        if (i && ed[i].off < ed[i - 1].off + ed[i - 1].del) {
            st = pf_fail(r, NULL, 0, DSWA_PTX_FIT_INTERNAL, PF_NONE,
                         "internal error: overlapping edits");
            goto done;
        }
        out_len = out_len - ed[i].del;
        if (ed[i].ins_len > (size_t)-1 - out_len - 1) {
            st = PF_NOMEM(r);
            goto done;
        }
        out_len += ed[i].ins_len;
    }
    text = malloc(out_len + 1);
    if (!text) {
        st = PF_NOMEM(r);
        goto done;
    }
    size_t src = 0, dst = 0;
    for (size_t i = 0; i < ne; i++) {
        memcpy(text + dst, in + src, ed[i].off - src);
        dst += ed[i].off - src;
        memcpy(text + dst, ed[i].ins, ed[i].ins_len);
        dst += ed[i].ins_len;
        src = ed[i].off + ed[i].del;
    }
    memcpy(text + dst, in + src, len - src);
    dst += len - src;
    text[dst] = '\0';

    /* Report what was there, then parse the result back and check it says what we meant. */
    pf_span dyn_name = {0, 0};
    r->entry = pf_strndup(c + f->name.s, f->name.e - f->name.s);
    r->sig_before = pf_signature(&m, f);
    r->version = pf_strndup(c + m.version.s, m.version.e - m.version.s);
    r->target_before = pf_strndup(c + m.target.s, m.target.e - m.target.s);
    r->params_before = f->np > 0x7fffffff ? 0x7fffffff : (int)f->np;
    {
        pf_buf b = {0};
        for (size_t i = keep; i < f->np; i++) {
            if (i > keep) pf_puts(&b, ", ");
            pf_put_name(&b, c, P[i].name);
        }
        r->removed = pf_take(&b);
    }
    if (!r->entry || !r->sig_before || !r->version || !r->target_before || !r->removed) {
        st = PF_NOMEM(r);
        goto done;
    }
    dswa_ptx_fit_result r2;
    memset(&r2, 0, sizeof r2);
    st = pf_parse(&m2, text, dst, &r2);
    free(r2.message);
    if (st == DSWA_PTX_FIT_NO_MEMORY) {
        st = PF_NOMEM(r);
        goto done;
    }
    /* Edits never add or remove a function, so the entry keeps its index. */
    const pf_func *g = st == DSWA_PTX_FIT_OK && m2.nf == m.nf ? &m2.f[fi] : NULL;
    int ok = g && g->is_entry && g->has_body && g->np == keep &&
        g->name.e - g->name.s == f->name.e - f->name.s &&
        memcmp(m2.c + g->name.s, c + f->name.s, f->name.e - f->name.s) == 0 &&
        m2.target.e - m2.target.s == tlen && memcmp(m2.c + m2.target.s, target_after, tlen) == 0;
    for (size_t i = 0; ok && i < keep; i++) {
        const pf_param *p = &m2.p[g->p0 + i];
        if (p->is_ptr &&
            ((p->has_align && p->align < (uint64_t)align) || (!p->has_align && align > 4)))
            ok = 0;
    }
    if (!ok) {
        st = pf_fail(r, NULL, 0, DSWA_PTX_FIT_INTERNAL, PF_NONE,
                     "internal error: the rewritten PTX does not read back as intended");
        goto done;
    }
    r->sig_after = pf_signature(&m2, g);
    r->params_after = (int)keep;
    pf_measure(&m2, g, r, &dyn_name);
    r->shared_dynamic_name =
        dyn_name.e > dyn_name.s ? pf_name_str(m2.c, dyn_name) : pf_strndup("", 0);
    r->note = pf_take(&note);
    if (!r->sig_after || !r->shared_dynamic_name || !r->note) {
        st = PF_NOMEM(r);
        goto done;
    }
    r->aligns_raised = raised;
    r->target_after = target_after;
    target_after = NULL;
    r->text = text;
    r->len = dst;
    text = NULL;
    st = DSWA_PTX_FIT_OK;

done:
    free(note.b);
    free(set.slot);
    free(ed);
    free(text);
    free(target_after);
    pf_module_free(&m2);
    pf_module_free(&m);
    if (st != DSWA_PTX_FIT_OK) {
        char *msg = r->message;
        r->message = NULL;
        int line = r->line;
        dswa_ptx_fit_result_free(r);
        r->message = msg ? msg : pf_strndup("out of memory", 13);
        r->line = line;
    }
    return st;
}

void dswa_ptx_fit_result_free(dswa_ptx_fit_result *r) {
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

int dswa_ptx_fit_exit_code(dswa_ptx_fit_status s) {
    return s == DSWA_PTX_FIT_OK ? 0 : s == DSWA_PTX_FIT_BAD_INPUT ? 2 : 1;
}

/* ---- ptxas -------------------------------------------------------------------------- */
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

char *dswa_ptxas_find(void) {
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

int dswa_ptxas_assemble(const char *ptxas, const char *text, size_t len, const char *arch,
                        char **messages) {
    if (messages) *messages = NULL;
    if (!ptxas || !text || !dswa_ptx_fit_arch_ok(arch))
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
