/* ptx_fit's text helpers: a growable buffer and one-line failure messages that name the
   input line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- growable text buffer ------------------------------------------------------------- */
void pf_putn(pf_buf *b, const char *s, size_t n) {
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
void pf_puts(pf_buf *b, const char *s) { pf_putn(b, s, strlen(s)); }

void pf_vprintf(pf_buf *b, const char *fmt, va_list ap) {
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
void pf_printf(pf_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pf_vprintf(b, fmt, ap);
    va_end(ap);
}
/* Takes the buffer's string (an empty one when nothing was written); NULL if out of memory. */
char *pf_take(pf_buf *b) {
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
char *pf_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
/* ---- failure messages ------------------------------------------------------------------ */
/* Line number (1-based) of `off`, and the line's bounds. */
int pf_line(const char *in, size_t n, size_t off, size_t *ls, size_t *le) {
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
void pf_put_excerpt(pf_buf *b, const char *in, size_t s, size_t e) {
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
ptx_fit_status pf_fail(ptx_fit_result *r, const char *in, size_t n,
                                   ptx_fit_status st, size_t off, const char *fmt, ...) {
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
        return PTX_FIT_NO_MEMORY;
    }
    return st;
}

/* A name from the text, printable, for messages. */
void pf_put_name(pf_buf *b, const char *c, pf_span s) {
    if (s.e - s.s > 80) {
        pf_put_excerpt(b, c, s.s, s.s + 80);
        pf_puts(b, "...");
    } else {
        pf_put_excerpt(b, c, s.s, s.e);
    }
}
char *pf_name_str(const char *c, pf_span s) {
    pf_buf b = {0};
    pf_put_name(&b, c, s);
    return pf_take(&b);
}
