/* Shared memory a PTX entry declares (dswa.h: dswa_ptx_shared_memory). The one counter, used
 * by the AOT export (a kernel's shared_bytes) and by `dswa ptx-fit` (its report).
 * The layout is the one ptxas 13.0 reports ("N bytes smem"): the entry's own .shared variables
 * first, then the module's, each in declaration order at its alignment (the larger of .align
 * and the element size, vectors included), with no padding after the last one.
 * Includes only dswa.h, so the ptx-fit fuzz harness can compile it without the library.
 * Every scan moves forward only: linear time on any text. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dswa.h"

typedef struct scan {
    const char *c;
    size_t n, i;
} scan;

static int word_char(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '_' || ch == '$' || ch == '%' || ch == '.' || ch == ':';
}
static int ident_start(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '$' || ch == '%';
}
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t mul_sat(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }

/* The next token: a word (kind 'w': identifier characters, dots and colons), one punctuation
   character (kind 'p'), or the end (kind 0). Skips spaces, comments and strings. */
typedef struct tok {
    int kind;
    size_t s, e;
} tok;
static tok next_tok(scan *S) {
    const char *c = S->c;
    for (;;) {
        while (S->i < S->n && (c[S->i] == ' ' || c[S->i] == '\t' || c[S->i] == '\n' || c[S->i] == '\r' ||
                               c[S->i] == '\v' || c[S->i] == '\f'))
            S->i++;
        if (S->i + 1 < S->n && c[S->i] == '/' && c[S->i + 1] == '/') {
            while (S->i < S->n && c[S->i] != '\n') S->i++;
        } else if (S->i + 1 < S->n && c[S->i] == '/' && c[S->i + 1] == '*') {
            S->i += 2;
            while (S->i < S->n && !(c[S->i] == '*' && S->i + 1 < S->n && c[S->i + 1] == '/')) S->i++;
            S->i = S->i + 2 < S->n ? S->i + 2 : S->n;
        } else if (S->i < S->n && c[S->i] == '"') {
            S->i++;
            while (S->i < S->n && c[S->i] != '"' && c[S->i] != '\n') S->i++;
            if (S->i < S->n) S->i++;
        } else {
            break;
        }
    }
    tok t = {0, S->i, S->i};
    if (S->i >= S->n) return t;
    if (word_char((unsigned char)c[S->i])) {
        while (S->i < S->n && word_char((unsigned char)c[S->i])) S->i++;
        t.kind = 'w';
    } else {
        S->i++;
        t.kind = 'p';
    }
    t.e = S->i;
    return t;
}
static int is(const scan *S, tok t, const char *w) {
    size_t k = strlen(w);
    return t.kind == 'w' && t.e - t.s == k && memcmp(S->c + t.s, w, k) == 0;
}
static int punct(const scan *S, tok t, char ch) { return t.kind == 'p' && S->c[t.s] == ch; }
static int parse_u64(const char *s, size_t k, uint64_t *v) {
    *v = 0;
    if (k == 0) return 0;
    for (size_t i = 0; i < k; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        *v = add_sat(mul_sat(*v, 10), (uint64_t)(s[i] - '0'));
    }
    return 1;
}
/* Bytes of a type word (.b8, .u16, .f32, .b128, .f16x2, .bf16, .bf16x2); 0 when not a type. */
static uint64_t type_bytes(const char *w, size_t k) {
    if (k < 3 || w[0] != '.') return 0;
    size_t i = (k >= 4 && w[1] == 'b' && w[2] == 'f') ? 3 : 2;
    if (i == 2 && w[1] != 'b' && w[1] != 'u' && w[1] != 's' && w[1] != 'f') return 0;
    uint64_t bits = 0, mult = 1;
    size_t j = i;
    while (j < k && w[j] >= '0' && w[j] <= '9' && j - i < 3) bits = bits * 10 + (uint64_t)(w[j++] - '0');
    if (j + 2 == k && w[j] == 'x' && w[j + 1] >= '1' && w[j + 1] <= '9') mult = (uint64_t)(w[j + 1] - '0');
    else if (j != k) return 0;
    return bits % 8 == 0 ? bits / 8 * mult : 0;
}

/* Lays out one variable: offset rounded up to its alignment, plus its size. */
static void place(dswa_ptx_shared *out, uint64_t align, uint64_t size) {
    if (align > 1) {
        uint64_t r = out->static_bytes % align;
        if (r) out->static_bytes = add_sat(out->static_bytes, align - r);
    }
    out->static_bytes = add_sat(out->static_bytes, size);
}

/* One declaration: S is just past its `.shared` word. `.shared [.align A] [.vN] .type name[,
   name] ...;` with any number of [dims] per name. It ends at ';', or where another declaration
   or a body could begin, which it leaves unread. */
static void shared_decl(scan *S, int external, dswa_ptx_shared *out) {
    uint64_t elem = 0, vec = 1, align = 0, count = 1;
    int have_name = 0, unsized = 0, want_align = 0;
    size_t name_s = 0, name_e = 0;
    for (;;) {
        size_t at = S->i;
        tok t = next_tok(S);
        int stop = t.kind == 0 || punct(S, t, '{') || punct(S, t, '}') || punct(S, t, '=') ||
            is(S, t, ".shared") || is(S, t, ".entry") || is(S, t, ".func") || is(S, t, ".extern");
        int end = stop || punct(S, t, ';');
        if (end || punct(S, t, ',') || (t.kind == 'w' && have_name && ident_start((unsigned char)S->c[t.s]))) {
            if (have_name) {
                if (unsized) {
                    if (out->dynamic_arrays == 0 || name_s < out->dynamic_name) {
                        out->dynamic_name = name_s;
                        out->dynamic_name_len = name_e - name_s;
                    }
                    if (out->dynamic_arrays < INT_MAX) out->dynamic_arrays++;
                } else if (!external && elem) { /* without a type it declares nothing */
                    uint64_t natural = mul_sat(elem, vec);
                    place(out, align > natural ? align : natural, mul_sat(natural, count));
                }
            }
            have_name = unsized = 0;
            count = 1;
            if (stop) S->i = at;
            if (end) return;
            if (t.kind != 'w') continue;
        }
        if (punct(S, t, '[') && have_name) {
            size_t save = S->i;
            tok d = next_tok(S);
            uint64_t v;
            if (punct(S, d, ']')) {
                unsized = 1;
                continue;
            }
            if (d.kind == 'w' && parse_u64(S->c + d.s, d.e - d.s, &v)) count = mul_sat(count, v);
            else S->i = save;
            save = S->i;
            if (!punct(S, next_tok(S), ']')) S->i = save;
            continue;
        }
        if (t.kind != 'w') {
            want_align = 0;
            continue;
        }
        const char *w = S->c + t.s;
        size_t k = t.e - t.s;
        uint64_t b;
        if (want_align) {
            want_align = 0;
            if (parse_u64(w, k, &b)) align = b;
        } else if (is(S, t, ".align")) {
            want_align = 1;
        } else if (is(S, t, ".v2") || is(S, t, ".v4") || is(S, t, ".v8")) {
            vec = (uint64_t)(w[2] - '0');
        } else if ((b = type_bytes(w, k)) != 0) {
            elem = b;
        } else if (ident_start((unsigned char)w[0])) {
            have_name = 1;
            name_s = t.s;
            name_e = t.e;
        }
    }
}

/* The declarations in [from, to): outside braces and parentheses only (the module's: not a
   parameter's `.ptr .shared`) or anywhere (an entry's body). */
static void scan_decls(const char *c, size_t from, size_t to, int module, dswa_ptx_shared *out) {
    scan S = {c, to, from};
    long depth = 0;
    int external = 0;
    for (;;) {
        tok t = next_tok(&S);
        if (t.kind == 0) return;
        if (punct(&S, t, '{') || punct(&S, t, '(')) depth++;
        else if (punct(&S, t, '}') || punct(&S, t, ')')) depth -= depth > 0;
        if (module && depth > 0) {
            external = 0;
            continue;
        }
        if (is(&S, t, ".shared")) {
            shared_decl(&S, external, out);
            external = 0;
        } else {
            external = is(&S, t, ".extern");
        }
    }
}

int dswa_ptx_shared_memory(const char *ptx, size_t n, const char *entry, size_t entry_len,
                           dswa_ptx_shared *out) {
    memset(out, 0, sizeof *out);
    if (!ptx) return -1;
    /* Find the entry's body: `.entry name (...) ... {` at depth 0, up to its matching '}'. */
    scan S = {ptx, n, 0};
    long depth = 0;
    int want_name = 0, named = 0;
    size_t body_s = 0, body_e = 0;
    int found = 0;
    for (;;) {
        tok t = next_tok(&S);
        if (t.kind == 0) break;
        if (punct(&S, t, '{')) {
            if (depth == 0 && named) {
                body_s = t.e;
                found = 1;
            }
            depth++;
        } else if (punct(&S, t, '}')) {
            if (depth > 0 && --depth == 0 && found) {
                body_e = t.s;
                break;
            }
        } else if (depth == 0) {
            if (want_name && t.kind == 'w') {
                named = !entry || (t.e - t.s == entry_len && memcmp(ptx + t.s, entry, entry_len) == 0);
                want_name = 0;
            } else if (punct(&S, t, ';')) {
                named = 0; /* a prototype without a body */
            } else if (is(&S, t, ".entry") || is(&S, t, ".func")) {
                want_name = is(&S, t, ".entry");
                named = 0;
            }
        }
    }
    if (found && !body_e) body_e = n; /* an unclosed body runs to the end */
    if (found) scan_decls(ptx, body_s, body_e, 0, out);
    scan_decls(ptx, 0, n, 1, out);
    return found ? 0 : -1;
}
