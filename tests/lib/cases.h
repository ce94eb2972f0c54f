/* The backend cases (cases.c), shared by tests/test_cpu.c and tests/test_cuda_cases.c. */
#ifndef DSWA_TESTS_CASES_H
#define DSWA_TESTS_CASES_H

/* Runs every case through dswa_forward_cpu (on_cuda = 0) or dswa_forward_cuda (1; skips the
   program, exit 77, without a usable GPU) and returns the process status (0 pass, 1 fail). */
int tu_backend_cases(int on_cuda);

#endif
