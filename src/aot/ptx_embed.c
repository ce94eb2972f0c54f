/* ptx_embed — a build-time generator (run by the Makefile's "AOT PTX" section, never installed):
 * turns the PTX that `nvcc -ptx` wrote for each kernel family and architecture into a C file of
 * string constants, so that the library can export its kernels for TensorRT without a CUDA
 * toolkit at run time (src/aot/export.c serves them; src/aot/ptx_blobs.h declares the table).
 *
 * Usage: ptx_embed OUT.c FAMILY ARCH FILE.ptx [FAMILY ARCH FILE.ptx ...]
 *
 * Why it splits modules: one .cu file holds several entries (one per dtype and math; the band
 * file also the fused block's band entries). TensorRT loads one kernel by name from the PTX it
 * is given and JIT-compiles the whole module, so each entry is written as its own module: the header (.version, .target, .address_size), the entry, and the
 * top-level items (.func, variables) it references, transitively; the other entries and what
 * only they use are left out. Texts that differ only in their .target line (nvcc emits the same
 * code for sm_80 and sm_86, for instance) are stored once; the library writes the requested
 * .target and .version when it exports. Plain C11, no dependencies beyond the PTX reader it
 * shares with the exporter (ptx_text.c): it runs wherever the library builds. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/ptx_text.h"

typedef struct item {
    size_t begin, end;    /* byte range in the source text, whole lines */
    char name[512];       /* defined symbol; "" when none was found (kept conservatively) */
    int is_entry;
    int keep;
} item;

typedef struct blob {
    const char *family;
    int arch;
    char entry[512];
    int text;             /* index into the unique texts */
} blob;

static char **texts;      /* unique pruned modules */
static size_t *text_len;
static int n_texts, cap_texts;
static blob *blobs;
static int n_blobs, cap_blobs;

static void die(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ptx_embed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory");
    return q;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s", path);
    size_t cap = 1 << 20, n = 0;
    char *buf = xrealloc(NULL, cap);
    for (;;) {
        if (n + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    if (ferror(f)) die("cannot read %s", path);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The symbol an item defines: the name after .entry/.func (past a return-parameter list), or
   for a variable the identifier before its '[', '=' or ';'. */
static void item_name(const char *s, size_t n, item *it) {
    const char *e = s + n, *p = NULL;
    it->name[0] = '\0';
    it->is_entry = 0;
    for (const char *q = s; q < e && *q != '(' && *q != '{' && *q != ';'; q++) {
        if (*q == '.' && (q == s || !dswa_ptx_ident_char(q[-1]))) {
            if (e - q >= 6 && !memcmp(q, ".entry", 6) && !dswa_ptx_ident_char(q[6])) { p = q + 6; it->is_entry = 1; break; }
            if (e - q >= 5 && !memcmp(q, ".func", 5) && !dswa_ptx_ident_char(q[5])) { p = q + 5; break; }
        }
    }
    if (p) {
        p = dswa_ptx_skip_space(p, e);
        if (p < e && *p == '(') { /* return parameters */
            int d = 0;
            for (; p < e; p++) {
                if (*p == '(') d++;
                else if (*p == ')' && --d == 0) { p++; break; }
            }
            p = dswa_ptx_skip_space(p, e);
        }
        size_t k = 0;
        while (p < e && dswa_ptx_ident_char(*p) && k + 1 < sizeof it->name) it->name[k++] = *p++;
        it->name[k] = '\0';
        return;
    }
    const char *stop = s;
    while (stop < e && *stop != '[' && *stop != '=' && *stop != ';') stop++;
    const char *b = stop;
    while (b > s && isspace((unsigned char)b[-1])) b--;
    const char *a = b;
    while (a > s && dswa_ptx_ident_char(a[-1])) a--;
    if (a < b && (size_t)(b - a) < sizeof it->name && !(a > s && a[-1] == '.')) {
        memcpy(it->name, a, (size_t)(b - a));
        it->name[b - a] = '\0';
    }
}

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* Splits one PTX module into its header and top-level items, then adds one pruned module per
   entry to the blob table. */
static void split_module(const char *family, int arch, const char *path) {
    size_t len;
    char *src = read_file(path, &len);
    if (!strstr(src, ".version") || !strstr(src, ".target"))
        die("%s is not PTX (no .version or .target)", path);

    /* header: leading comments and the .version/.target/.address_size directives */
    char *hdr = xrealloc(NULL, len + 1);
    size_t hn = 0;
    item *items = NULL;
    int n_items = 0, cap_items = 0, seen_version = 0;

    size_t pos = 0;
    while (pos < len) {
        size_t eol = pos;
        while (eol < len && src[eol] != '\n') eol++;
        size_t next = eol < len ? eol + 1 : eol;
        const char *line = src + pos;
        const char *t = dswa_ptx_skip_space(line, src + eol);
        if (t == src + eol) { pos = next; continue; } /* blank */
        if (t[0] == '/' && t[1] == '/') {            /* top-level comment */
            if (!seen_version) { memcpy(hdr + hn, line, next - pos); hn += next - pos; }
            pos = next;
            continue;
        }
        if (starts_with(t, ".version") || starts_with(t, ".target") || starts_with(t, ".address_size")) {
            if (starts_with(t, ".version")) seen_version = 1;
            memcpy(hdr + hn, line, next - pos);
            hn += next - pos;
            pos = next;
            continue;
        }
        /* an item: runs until braces and parentheses balance after a ';' or a closing body */
        int brace = 0, paren = 0, done = 0;
        char last = 0, before_open = 0;
        size_t p = pos;
        while (p < len && !done) {
            size_t le = p;
            while (le < len && src[le] != '\n') le++;
            int end_here = 0;
            for (size_t i = p; i < le; i++) {
                const char c = src[i];
                if (c == '/' && i + 1 < le && src[i + 1] == '/') break; /* comment to end of line */
                if (c == '"') { /* string literal */
                    for (i++; i < le && src[i] != '"'; i++)
                        if (src[i] == '\\') i++;
                    continue;
                }
                if (c == '(') paren++;
                else if (c == ')') paren--;
                else if (c == '{') { if (brace == 0) before_open = last; brace++; }
                else if (c == '}') {
                    if (--brace == 0 && paren == 0 && before_open != '=') end_here = 1;
                } else if (c == ';' && brace == 0 && paren == 0) end_here = 1;
                if (brace < 0 || paren < 0) die("%s: unbalanced braces or parentheses at byte %zu", path, i);
                if (!isspace((unsigned char)c)) last = c;
            }
            p = le < len ? le + 1 : le;
            if (end_here && brace == 0 && paren == 0) done = 1;
        }
        if (!done) die("%s: a top-level item does not end", path);
        if (n_items == cap_items) items = xrealloc(items, sizeof *items * (size_t)(cap_items = cap_items ? 2 * cap_items : 16));
        item *it = &items[n_items++];
        it->begin = pos;
        it->end = p;
        it->keep = 0;
        item_name(src + pos, p - pos, it);
        pos = p;
    }
    if (!seen_version) die("%s: no .version directive", path);

    int entries = 0;
    for (int e = 0; e < n_items; e++) {
        if (!items[e].is_entry) continue;
        entries++;
        if (!items[e].name[0]) die("%s: an .entry without a name", path);
        for (int i = 0; i < n_items; i++) items[i].keep = i == e || !items[i].name[0];
        /* transitive closure over references; entries other than e are never kept */
        for (int changed = 1; changed;) {
            changed = 0;
            for (int i = 0; i < n_items; i++) {
                if (items[i].keep || items[i].is_entry) continue;
                for (int k = 0; k < n_items; k++)
                    if (items[k].keep && dswa_ptx_mentions(src + items[k].begin, items[k].end - items[k].begin, items[i].name)) {
                        items[i].keep = changed = 1;
                        break;
                    }
            }
        }
        size_t n = hn;
        for (int i = 0; i < n_items; i++)
            if (items[i].keep) n += 1 + items[i].end - items[i].begin;
        char *mod = xrealloc(NULL, n + 2);
        size_t m = 0;
        memcpy(mod, hdr, hn);
        m = hn;
        for (int i = 0; i < n_items; i++) {
            if (!items[i].keep) continue;
            mod[m++] = '\n';
            memcpy(mod + m, src + items[i].begin, items[i].end - items[i].begin);
            m += items[i].end - items[i].begin;
        }
        if (m == 0 || mod[m - 1] != '\n') mod[m++] = '\n';
        mod[m] = '\0';

        /* dedupe: equal apart from the .target line */
        int found = -1;
        for (int t = 0; t < n_texts && found < 0; t++) {
            const char *a = texts[t], *b = mod;
            const char *ta = strstr(a, "\n.target"), *tb = strstr(b, "\n.target");
            if (!ta || !tb || ta - a != tb - b || memcmp(a, b, (size_t)(ta - a))) continue;
            const char *ea = strchr(ta + 1, '\n'), *eb = strchr(tb + 1, '\n');
            if (ea && eb && !strcmp(ea, eb)) found = t;
        }
        if (found < 0) {
            if (n_texts == cap_texts) {
                cap_texts = cap_texts ? 2 * cap_texts : 16;
                texts = xrealloc(texts, sizeof *texts * (size_t)cap_texts);
                text_len = xrealloc(text_len, sizeof *text_len * (size_t)cap_texts);
            }
            texts[n_texts] = mod;
            text_len[n_texts] = m;
            found = n_texts++;
        } else {
            free(mod);
        }
        if (n_blobs == cap_blobs) blobs = xrealloc(blobs, sizeof *blobs * (size_t)(cap_blobs = cap_blobs ? 2 * cap_blobs : 32));
        blob *b = &blobs[n_blobs++];
        b->family = family;
        b->arch = arch;
        snprintf(b->entry, sizeof b->entry, "%s", items[e].name);
        b->text = found;
    }
    if (entries == 0) die("%s: no .entry", path);
    free(items);
    free(hdr);
    free(src);
}

static void emit_string(FILE *f, const char *s, size_t n) {
    fputs("    \"", f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs(i + 1 < n ? "\\n\"\n    \"" : "\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\\' || c == '"') { fputc('\\', f); fputc(c, f); }
        else if (c == '?') fputs("\\?", f); /* no trigraphs */
        else if (c < 32 || c > 126) fprintf(f, "\\%03o", c);
        else fputc(c, f);
    }
    fputs("\"", f);
}

int main(int argc, char **argv) {
    if (argc < 5 || (argc - 2) % 3 != 0) {
        fputs("usage: ptx_embed OUT.c FAMILY ARCH FILE.ptx [FAMILY ARCH FILE.ptx ...]\n", stderr);
        return 2;
    }
    for (int i = 2; i + 2 < argc; i += 3) {
        char *end = NULL;
        long arch = strtol(argv[i + 1], &end, 10);
        if (!end || *end || arch <= 0 || arch > 1000) die("bad architecture '%s'", argv[i + 1]);
        split_module(argv[i], (int)arch, argv[i + 2]);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f) die("cannot write %s", tmp);
    fputs("/* Generated by src/aot/ptx_embed.c from the `nvcc -ptx` output of the kernel families'\n"
          "   files (the Makefile's AOT PTX section; one module per entry, per architecture): do not edit. */\n"
          "#include \"aot/ptx_blobs.h\"\n\n", f);
    for (int t = 0; t < n_texts; t++) {
        fprintf(f, "static const char dswa_aot_text_%d[] =\n", t);
        emit_string(f, texts[t], text_len[t]);
        fputs(";\n\n", f);
    }
    fputs("const dswa_aot_blob dswa_aot_blobs[] = {\n", f);
    for (int b = 0; b < n_blobs; b++)
        fprintf(f, "    {\"%s\", %d, \"%s\", dswa_aot_text_%d, sizeof dswa_aot_text_%d - 1},\n",
                blobs[b].family, blobs[b].arch, blobs[b].entry, blobs[b].text, blobs[b].text);
    fprintf(f, "};\nconst int dswa_aot_blob_count = %d;\n", n_blobs);
    if (fclose(f) != 0 || rename(tmp, argv[1]) != 0) die("cannot write %s", argv[1]);
    size_t total = 0;
    for (int t = 0; t < n_texts; t++) total += text_len[t];
    printf("ptx_embed: %d modules (%d distinct, %zu KB of PTX) -> %s\n", n_blobs, n_texts,
           total / 1024, argv[1]);
    return 0;
}
