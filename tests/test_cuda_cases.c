/* dswa_forward_cuda through every backend case of tests/lib/cases.c (skipped without a GPU). */
#include "cases.h"

int main(void) { return tu_backend_cases(1); }
