/* dswa_forward_cpu through every backend case of tests/lib/cases.c. */
#include "cases.h"

int main(void) { return tu_backend_cases(0); }
