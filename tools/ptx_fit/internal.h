/* What the stages of ptx_fit share: the text buffer, character classes, the lexer, the module
   a PTX text is read into, failure messages, and the state of one fit passed from stage to
   stage (fit.c). Not for use outside tools/ptx_fit/. */
#ifndef PTX_FIT_INTERNAL_H
#define PTX_FIT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ptx_fit.h"

#define PF_NONE ((size_t)-1)
#define PF_MAX_ALIGN 256 /* no allocator TensorRT uses promises more */

#if defined(__GNUC__)
#define PF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PF_PRINTF(f, a)
#endif

/* ---- growable text buffer (text.c); an allocation failure sets oom and sticks ---------- */
typedef struct pf_buf {
    char *b;
    size_t n, cap;
    int oom;
} pf_buf;
void pf_putn(pf_buf *b, const char *s, size_t n);
void pf_puts(pf_buf *b, const char *s);
void pf_vprintf(pf_buf *b, const char *fmt, va_list ap);
void pf_printf(pf_buf *b, const char *fmt, ...) PF_PRINTF(2, 3);
/* Takes the buffer's string (an empty one when nothing was written); NULL if out of memory. */
char *pf_take(pf_buf *b);
char *pf_strndup(const char *s, size_t n);

/* ---- characters ------------------------------------------------------------------------ */
/* Own ASCII classes: <ctype.h> depends on the locale and is undefined for negative chars. */
static inline int pf_alpha(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline int pf_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int pf_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
/* Characters of an identifier: PTX's [A-Za-z0-9_$] plus the % that starts register names. */
static inline int pf_ident(unsigned char c) {
    return pf_alpha(c) || pf_digit(c) || c == '_' || c == '$' || c == '%';
}
/* Characters of a lexer word: identifiers, directives, dotted opcodes and numbers. */
static inline int pf_wordc(unsigned char c) { return pf_ident(c) || c == '.'; }
static inline int pf_ident_start(unsigned char c) {
    return pf_alpha(c) || c == '_' || c == '$' || c == '%';
}

/* ---- lexer (read.c) -------------------------------------------------------------------- */
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
pf_tok pf_next(pf_lex *L);
int pf_is(const char *c, pf_tok t, const char *w);
int pf_punct(const char *c, pf_tok t, char ch);
size_t pf_skip_matching(pf_lex *L, char open, char close);
int pf_u64(const char *s, size_t n, uint64_t *v);
uint64_t pf_mul_sat(uint64_t a, uint64_t b);
uint64_t pf_add_sat(uint64_t a, uint64_t b);

/* Statements of a body, each one's first word (an opcode such as "mma.sync.aligned..." or a
   directive such as ".shared") after labels and guards. */
typedef struct pf_stmts {
    pf_lex L;
    int at_start, line_mode;
} pf_stmts;
void pf_stmts_init(pf_stmts *S, const char *c, size_t s, size_t e);
int pf_next_stmt(pf_stmts *S, pf_tok *out);

/* ---- the module (read.c) --------------------------------------------------------------- */
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
    int have_version, have_target;
    pf_span version, target; /* the version number; the .target's sm_ word */
} pf_module;

/* PTX_FIT_OK, or PTX_FIT_BAD_INPUT naming the first byte that is not text. */
ptx_fit_status pf_check_text(const char *in, size_t n, ptx_fit_result *r);
/* Parses the module's structure: .version, .target, functions. */
ptx_fit_status pf_parse(pf_module *m, const char *in, size_t n, ptx_fit_result *r);
void pf_module_free(pf_module *m);

/* ---- failure messages (text.c) --------------------------------------------------------- */
/* Line number (1-based) of `off`, and the line's bounds. */
int pf_line(const char *in, size_t n, size_t off, size_t *ls, size_t *le);
/* Appends in[s..e) trimmed, printable and at most ~160 characters: it ends up in one line. */
void pf_put_excerpt(pf_buf *b, const char *in, size_t s, size_t e);
/* Sets r->message (and r->line when `off` is an offset: the message then ends with
   ": line N: <that line>") and returns `st`. */
ptx_fit_status pf_fail(ptx_fit_result *r, const char *in, size_t n, ptx_fit_status st, size_t off,
                       const char *fmt, ...) PF_PRINTF(6, 7);
#define PF_NOMEM(r) pf_fail((r), NULL, 0, PTX_FIT_NO_MEMORY, PF_NONE, "out of memory")
/* A name from the text, printable, for messages. */
void pf_put_name(pf_buf *b, const char *c, pf_span s);
char *pf_name_str(const char *c, pf_span s);
/* At most 80 characters of a name, for "%.*s". */
#define PF_NAME80(c, sp) (int)((sp).e - (sp).s > 80 ? 80 : (sp).e - (sp).s), (c) + (sp).s

/* ---- one fit, stage by stage (fit.c) --------------------------------------------------- */
typedef struct pf_fit {
    const char *in;
    size_t len;
    const ptx_fit_opts *o;
    int align; /* o->align or its default */
    pf_module m; /* the input */
    size_t fi; /* the entry, m.f[fi] */
    size_t keep; /* its parameters kept */
    char *target_after; /* plain sm_XX */
    unsigned sm_in, sm_out; /* the target's number before and after */
    pf_buf note;
    char *text; /* the rewritten PTX ... */
    size_t text_len;
    int raised; /* pointer parameters whose .align was raised */
    pf_module m2; /* ... read back */
} pf_fit;

/* analyse.c */
ptx_fit_status pf_pick_entry(pf_fit *F, ptx_fit_result *r);
ptx_fit_status pf_resolve_target(pf_fit *F, ptx_fit_result *r);
ptx_fit_status pf_prove_unread(pf_fit *F, ptx_fit_result *r);
ptx_fit_status pf_check_instructions(pf_fit *F, ptx_fit_result *r);
void pf_measure(const pf_module *m, const pf_func *f, ptx_fit_result *r, pf_span *dyn_name);
/* rewrite.c */
ptx_fit_status pf_rewrite(pf_fit *F, ptx_fit_result *r);
ptx_fit_status pf_read_back(pf_fit *F, ptx_fit_result *r);
/* report.c */
ptx_fit_status pf_report(pf_fit *F, ptx_fit_result *r);

#endif
