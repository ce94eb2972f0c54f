/* dswa_forward_cpu through every backend case of tests/lib/cases.c, and dswa_cpu_isa. */
#include <stdio.h>
#include <string.h>
#include "cases.h"
#include "testutil.h"

/* 1 if the whitespace-separated word occurs in line. */
static int has_word(const char *line, const char *word) {
    const size_t n = strlen(word);
    for (const char *s = strstr(line, word); s; s = strstr(s + 1, word))
        if ((s == line || s[-1] == ' ' || s[-1] == '\t') &&
            (s[n] == ' ' || s[n] == '\t' || s[n] == '\n' || s[n] == '\0'))
            return 1;
    return 0;
}

/* The name is one the backend has, the same on every call, and on x86-64 Linux the one the
   kernel's CPU flags (an independent reading of CPUID and the OS's saved registers) imply. */
static void test_cpu_isa(void) {
    const char *isa = dswa_cpu_isa();
    CHECK(isa != NULL, "dswa_cpu_isa() returned NULL");
    if (!isa) return;
    CHECK(!strcmp(isa, "avx512") || !strcmp(isa, "avx2") || !strcmp(isa, "sse2") ||
              !strcmp(isa, "generic"),
          "dswa_cpu_isa() = '%s': not avx512, avx2, sse2 or generic", isa);
    CHECK(dswa_cpu_isa() == isa, "a second call returned another string");
#if defined(__x86_64__)
    CHECK(strcmp(isa, "generic") != 0, "x86-64 always has SSE2, yet dswa_cpu_isa() = generic");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5) && strchr(line, ':')) { found = 1; break; }
    if (f) fclose(f);
    if (!found) {
        printf("dswa_cpu_isa: %s (not cross-checked: no flags line in /proc/cpuinfo)\n", isa);
        return;
    }
    const char *want = has_word(line, "avx512f")                           ? "avx512"
                       : has_word(line, "avx2") && has_word(line, "fma") ? "avx2"
                                                                         : "sse2";
    CHECK(!strcmp(isa, want), "dswa_cpu_isa() = '%s', but /proc/cpuinfo's flags imply '%s'",
          isa, want);
#endif
    printf("dswa_cpu_isa: %s\n", isa);
}

int main(void) {
    test_cpu_isa();
    return tu_backend_cases(0);
}
