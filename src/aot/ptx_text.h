/* Reading PTX text: the one scanner of src/aot, shared by the exporter (export.c) and the
   build-time generator (ptx_embed.c). Plain C, no library dependencies (ptx_embed is built on
   its own). Internal: not part of the public contract. */
#ifndef DSWA_AOT_PTX_TEXT_H
#define DSWA_AOT_PTX_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether c can be part of a PTX identifier (letters, digits, '_', '$'). */
int dswa_ptx_ident_char(int c);
/* The first non-space character in [p, end), or end. */
const char *dswa_ptx_skip_space(const char *p, const char *end);
/* Whether `word` occurs in [s, s + n) as a whole identifier. */
int dswa_ptx_mentions(const char *s, size_t n, const char *word);
/* Whether position `at` of `text` lies in a // comment (one that starts earlier on its line). */
int dswa_ptx_in_comment(const char *text, const char *at);
/* The start of the first line of `ptx` that begins with the directive `name` (".version",
   ".target"), leading spaces allowed; NULL when none. */
const char *dswa_ptx_directive(const char *ptx, const char *name);
/* The module's .version as major.minor; 0 and 0 when it has none. */
void dswa_ptx_version(const char *ptx, int *major, int *minor);

#ifdef __cplusplus
}
#endif
#endif
