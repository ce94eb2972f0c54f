/* See ptx_text.h. */
#include <stdio.h>
#include <string.h>
#include "aot/ptx_text.h"

int dswa_ptx_ident_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

const char *dswa_ptx_skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f')) p++;
    return p;
}

int dswa_ptx_mentions(const char *s, size_t n, const char *word) {
    const size_t w = strlen(word);
    if (w == 0 || w > n) return 0;
    for (size_t i = 0; i + w <= n; i++)
        if (s[i] == word[0] && !memcmp(s + i, word, w) && (i == 0 || !dswa_ptx_ident_char(s[i - 1])) &&
            (i + w == n || !dswa_ptx_ident_char(s[i + w])))
            return 1;
    return 0;
}

int dswa_ptx_in_comment(const char *text, const char *at) {
    const char *line = at;
    while (line > text && line[-1] != '\n') line--;
    const char *c = strstr(line, "//");
    return c && c < at;
}

const char *dswa_ptx_directive(const char *ptx, const char *name) {
    const size_t n = strlen(name);
    for (const char *l = ptx; l && *l;) {
        const char *t = l;
        while (*t == ' ' || *t == '\t') t++;
        if (!strncmp(t, name, n) && !dswa_ptx_ident_char(t[n])) return l;
        l = strchr(l, '\n');
        if (l) l++;
    }
    return NULL;
}

void dswa_ptx_version(const char *ptx, int *major, int *minor) {
    *major = *minor = 0;
    const char *v = dswa_ptx_directive(ptx, ".version");
    if (v) sscanf(strstr(v, ".version") + 8, " %d.%d", major, minor);
}
