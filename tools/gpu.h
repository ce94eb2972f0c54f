/* The bench's GPU timing, beside the basic wrapper declared in cli.h: work captured into a
   CUDA graph of many back-to-back launches and replayed (what a TensorRT engine does), and
   the fastest same-size copy (cudaMemcpyAsync or a copy kernel of our own, tuned at run time)
   timed the same way. Every CUDA call is checked; a failure leaves one message in gpu_error().
   Without DSWA_HAVE_CUDA every function fails with a message saying so. */
#ifndef DSWA_GPU_H
#define DSWA_GPU_H

#include <stddef.h>

/* Median, fastest and slowest of the timed replays, in milliseconds per call. */
typedef struct gpu_stats {
    double median, min, max;
    int replays;
} gpu_stats;

/* Enqueues launch number `i` (0 <= i < calls) on `stream`; 0, or -1 when it could not (the
   callback keeps its own reason). */
typedef int (*gpu_enqueue_fn)(void *ctx, int i, void *stream);

/* Captures [start event, enqueue(0) ... enqueue(calls - 1), stop event] into one graph,
   replays it `warm` times untimed and `replays` times timed, and returns each replay's time
   divided by `calls`. The graph is destroyed before returning. 0; -1 after a CUDA failure
   (gpu_error()); -2 when enqueue failed (nothing is left captured). */
int gpu_graph_time(gpu_enqueue_fn enqueue, void *ctx, int calls, int warm, int replays,
                   gpu_stats *out);

/* L2 size of the current device in bytes (0 when unknown). */
size_t gpu_l2_bytes(void);
/* Device-to-device copy of `bytes` on the default stream, synchronized. 0 or -1. */
int gpu_copy_d2d(void *dst, const void *src, size_t bytes, const char *what);

/* ---- the same-size copy -------------------------------------------------------------- */
/* One way to copy: cudaMemcpyAsync, or the copy kernel with `unroll` 16-byte vectors in
   flight per thread, loads and stores with the streaming cache hint (.cs) or none, and a grid
   of `blocks` x `threads` (blocks == 0: one pass, a thread per `unroll` vectors of the
   buffer). */
typedef struct gpu_copy_cfg {
    int memcpy_async;
    int streaming;
    int unroll, threads, blocks;
} gpu_copy_cfg;

/* Builds the copy kernels (PTX JIT-compiled by the driver) and checks each candidate copies
   correctly; must be called after gpu_init. 0 or -1. */
int gpu_copy_init(void);
void gpu_copy_shutdown(void);
/* The candidates tried for every size: cudaMemcpyAsync first, then the kernel shapes. */
int gpu_copy_candidates(const gpu_copy_cfg **cfgs);
/* "cudaMemcpyAsync" or "kernel: 4 x 16 B per thread, 528 x 512 threads" (one pass: "n/2048
   blocks"), for the given buffer size. */
void gpu_copy_describe(const gpu_copy_cfg *cfg, size_t bytes, char *buf, size_t n);

/* The fastest candidate for copying `bytes` from src[j] to dst[j], j = i mod nbuf for the
   i-th copy of a graph of `calls` copies (nbuf > 1: the buffers rotate, so the data is cold
   in L2). `bytes` must be a multiple of 16 and the buffers 16-byte aligned. *best gets the
   winner's stats, *cfg_out its configuration; each[k] (when not NULL) candidate k's. 0 or -1. */
int gpu_copy_fastest(void *const *dst, void *const *src, int nbuf, size_t bytes, int calls,
                     int warm, int replays, gpu_stats *best, gpu_copy_cfg *cfg_out,
                     gpu_stats *each);

#endif
