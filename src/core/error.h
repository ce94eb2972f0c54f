/* This thread's last error message: the bottom layer, which every other part of the library
   reports through. Not part of the public contract (dswa.h has dswa_last_error). */
#ifndef DSWA_CORE_ERROR_H
#define DSWA_CORE_ERROR_H

#include "dswa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records this thread's message (printf-style) and returns `s`, so callers can write
   `return dswa_fail(DSWA_ERR_..., "field = %d: must be ...", v);`. */
dswa_status dswa_fail(dswa_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void dswa_clear_error(void);

/* The message's capacity; a save/restore pair lets a query (dswa_cuda_available) leave the
   caller's message as it was. */
#define DSWA_ERROR_MAX 512
void dswa_error_save(char saved[DSWA_ERROR_MAX]);
void dswa_error_restore(const char saved[DSWA_ERROR_MAX]);

#ifdef __cplusplus
}
#endif
#endif
