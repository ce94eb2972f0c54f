/* Every case of tests/test_cpu.c, through dswa_forward_cuda (see the top of that file). */
#define DSWA_TEST_ON_CUDA 1
#include "test_cpu.c"
