/* This thread's last error message and the status strings (error.h). Depends on nothing else
   in the library, so every layer can report through it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "core/error.h"

static _Thread_local char last_error[DSWA_ERROR_MAX];

dswa_status dswa_fail(dswa_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void dswa_clear_error(void) { last_error[0] = '\0'; }
const char *dswa_last_error(void) { return last_error; }
void dswa_error_save(char saved[DSWA_ERROR_MAX]) { memcpy(saved, last_error, DSWA_ERROR_MAX); }
void dswa_error_restore(const char saved[DSWA_ERROR_MAX]) { memcpy(last_error, saved, DSWA_ERROR_MAX); }

const char *dswa_status_string(dswa_status s) {
    switch (s) {
    case DSWA_OK: return "ok";
    case DSWA_ERR_INVALID_ARGUMENT: return "invalid argument";
    case DSWA_ERR_UNSUPPORTED: return "unsupported by this backend";
    case DSWA_ERR_MISALIGNED: return "misaligned pointer or stride";
    case DSWA_ERR_NO_DEVICE: return "no CUDA device";
    case DSWA_ERR_CUDA: return "CUDA error";
    case DSWA_ERR_OUT_OF_MEMORY: return "out of memory";
    }
    return "unknown status";
}
