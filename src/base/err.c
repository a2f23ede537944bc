/* err.c: filling hearth_err. Messages are truncated, never overflowed; an
 * error path must not itself fail, so nothing here allocates. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int hearth_err_set(hearth_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    err->sys = 0;
    return code;
}

int hearth_err_sys(hearth_err *err, int errno_value, const char *fmt, ...)
{
    if (!err)
        return HEARTH_EIO;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errno_value));
    err->code = HEARTH_EIO;
    err->sys = errno_value;
    return HEARTH_EIO;
}

void hearth_err_prefix(hearth_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[HEARTH_ERR_MSG_MAX];
    char old[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
}

const char *hearth_status_name(int code)
{
    switch (code) {
    case HEARTH_OK: return "ok";
    case HEARTH_EINVAL: return "invalid";
    case HEARTH_EAGAIN: return "again";
    case HEARTH_ENOMEM: return "no memory";
    case HEARTH_EIO: return "io";
    case HEARTH_ELIMIT: return "limit";
    case HEARTH_ENOTFOUND: return "not found";
    case HEARTH_EUNSUPPORTED: return "unsupported";
    case HEARTH_EDEVICE: return "device error";
    default: return "unknown";
    }
}
