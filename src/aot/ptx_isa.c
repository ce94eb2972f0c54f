/* The PTX ISA version that introduced each plain target (dswa.h: dswa_ptx_isa_for_target).
 * One table for the AOT export (the lowest .version it writes for a target) and for
 * `dswa ptx-fit` (which refuses to retarget a module whose .version predates the target).
 * Includes only dswa.h, so the ptx-fit fuzz harness can compile it without the library. */
#include <stddef.h>

#include "dswa.h"

/* From the PTX ISA release notes (LLVM's NVPTX.td has the same pairs); ptxas 13.0 refuses
   `.target sm_XX` one version lower where it still knows the target. */
static const struct { int sm, major, minor; } isa_for_target[] = {
    {70, 6, 0},  {72, 6, 1},  {75, 6, 3},  {80, 7, 0},  {86, 7, 1},  {87, 7, 4},  {89, 7, 8},
    {90, 7, 8},  {100, 8, 6}, {101, 8, 6}, {103, 8, 8}, {110, 9, 0}, {120, 8, 7}, {121, 8, 8},
};

int dswa_ptx_isa_for_target(int sm, int *major, int *minor) {
    for (size_t i = 0; i < sizeof isa_for_target / sizeof isa_for_target[0]; i++)
        if (isa_for_target[i].sm == sm) {
            if (major) *major = isa_for_target[i].major;
            if (minor) *minor = isa_for_target[i].minor;
            return 0;
        }
    return -1;
}
