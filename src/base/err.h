/* err.h: status codes and the caller-supplied error struct.
 *
 * Functions return 0 (HEARTH_OK) or a negative status; where a caller wants to
 * know *why*, it passes a hearth_err whose message names the object, the
 * offset and the limit ("gguf: tensor 'blk.3.attn_q.weight': 5 dims > 4").
 * A NULL hearth_err* is accepted everywhere and means "don't care". */
#ifndef HEARTH_BASE_ERR_H
#define HEARTH_BASE_ERR_H

#include <stddef.h>

enum {
    HEARTH_OK = 0,
    HEARTH_EINVAL = -1,   /* malformed input */
    HEARTH_EAGAIN = -2,   /* partial input on a non-blocking path: call again with more */
    HEARTH_ENOMEM = -3,   /* allocation failed or a hard limit was reached */
    HEARTH_EIO = -4,      /* an OS call failed (errno is in hearth_err.sys) */
    HEARTH_ELIMIT = -5,   /* a configured limit was exceeded */
    HEARTH_ENOTFOUND = -6,
    HEARTH_EUNSUPPORTED = -7,
    HEARTH_EDEVICE = -8,  /* a device (GPU) call failed: logged with the call and its error string */
};

#define HEARTH_ERR_MSG_MAX 512

typedef struct hearth_err {
    int code;                      /* one of the HEARTH_E* values */
    int sys;                       /* errno when code is HEARTH_EIO, else 0 */
    char msg[HEARTH_ERR_MSG_MAX];  /* NUL-terminated, never empty once set */
} hearth_err;

/* Sets code and a printf-formatted message; returns code so callers can
 * `return hearth_err_set(err, HEARTH_EINVAL, "...")`. err may be NULL. */
int hearth_err_set(hearth_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like hearth_err_set with code HEARTH_EIO, appending strerror(errno_value). */
int hearth_err_sys(hearth_err *err, int errno_value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with "prefix: " (for adding context such as a file name). */
void hearth_err_prefix(hearth_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A short name for a status code ("invalid", "again", ...). */
const char *hearth_status_name(int code);

#endif
