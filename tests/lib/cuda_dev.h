/* What the CUDA tests do alike on device memory: copies of host buffers; host regions
   mirrored on the device around one call (how the backward tests, test_cuda_backward and
   test_cuda_samel_backward, run the shared cases through the GPU); and one call on
   device-resident buffers checked for bitwise determinism, timed, and captured in a CUDA graph
   replayed with fresh inputs (the backward tests' determinism and graph checks). Every CUDA
   call is checked with CU (cuda_check.h). Only with CUDA in the build (cuda_dev.c is empty
   without it). */
#ifndef DSWA_TESTS_CUDA_DEV_H
#define DSWA_TESTS_CUDA_DEV_H

#include <stddef.h>
#include <cuda_runtime.h>
#include "dswa.h"
#include "backward_cases.h"   /* tu_region */
#include "testutil.h"

/* A device copy of `bytes` of host memory at h. */
void *tu_dev_from_host(const void *h, size_t bytes);

/* ---- host regions mirrored on the device ------------------------------------------------- */

enum { TU_DEV_REGIONS_MAX = 16 };
/* The host regions r[0..n) and their device copies, one device buffer each. */
typedef struct tu_dev_regions {
    const tu_region *host;
    void *dev[TU_DEV_REGIONS_MAX];
    int n;
} tu_dev_regions;

/* Each region copied to a device buffer of its own (n at most TU_DEV_REGIONS_MAX). */
tu_dev_regions tu_regions_to_device(const tu_region *r, int n);
/* The device copy of a host pointer inside one of the regions (NULL stays NULL); a pointer in
   none is a broken test: it says so and exits 1. */
void *tu_regions_at(const tu_dev_regions *d, const void *h);
/* Waits for the device (a launch error fails like any CUDA call), copies every region back to
   the host and frees the device copies. */
void tu_regions_back(tu_dev_regions *d);
/* A device buffer of `bytes`, every byte 0xff (a workspace that needs no init); NULL for 0
   bytes. */
void *tu_dev_poisoned(size_t bytes);

/* ---- one call on device-resident buffers ------------------------------------------------- */

/* A device buffer and its size. */
typedef struct tu_dbuf { void *p; size_t bytes; } tu_dbuf;

/* A library call on fixed device buffers: run(ctx, s) makes it on stream s (NULL: the legacy
   stream). */
typedef struct tu_dev_op {
    dswa_status (*run)(void *ctx, cudaStream_t s);
    void *ctx;
    tu_dbuf in[4];    /* the inputs a graph replay refreshes */
    int n_in;
    tu_dbuf out[4];   /* the outputs, fetched as one host block in this order */
    int n_out;
    tu_dbuf ws;       /* the workspace */
} tu_dev_op;

/* The outputs' bytes, all together. */
size_t tu_dev_out_bytes(const tu_dev_op *op);
/* The outputs copied into one malloc'ed host block of tu_dev_out_bytes (the caller frees). */
char *tu_dev_fetch(const tu_dev_op *op);
/* Once the device is idle: how many bytes of the outputs are not 0xff (the poison they were
   filled with), i.e. what calls since then wrote. */
size_t tu_dev_out_changed(const tu_dev_op *op);
/* Two runs on the legacy stream, the workspace filled with 0xff before the first and with 0x00
   before the second (each run checked): whether their outputs are bitwise equal. */
int tu_dev_two_runs_equal(const tu_dev_op *op);
/* Milliseconds of `runs` back-to-back runs on the legacy stream (each checked), between two
   events. */
float tu_dev_time_ms(const tu_dev_op *op, int runs);
/* One call captured in a graph on a non-blocking stream, replayed 12 times over 3 sets of
   fresh inputs (normals drawn from rng, in dtype dt) copied into the captured buffers, the
   outputs filled with 0xff before each replay (and the workspace with 0xff or 0x00 in turn
   when poison_ws): each replay's outputs must equal, bitwise, those of an eager call on the
   same set. Checks that and prints one line. */
void tu_dev_graph_check(const tu_dev_op *op, tu_rng *rng, dswa_dtype dt, int poison_ws);

#endif
