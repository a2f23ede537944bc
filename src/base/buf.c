/* buf.c: bounded growth by doubling. The NUL after len is kept so a buffer
 * of text can be handed to functions that want a C string. */
#include "buf.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hearth_buf_init(hearth_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

void hearth_buf_deinit(hearth_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int hearth_buf_reserve(hearth_buf *b, size_t extra)
{
    if (extra > b->max - b->len)
        return HEARTH_ELIMIT;
    size_t need = b->len + extra + 1; /* +1 for the trailing NUL */
    if (need <= b->cap)
        return HEARTH_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *p = realloc(b->data, cap);
    if (!p)
        return HEARTH_ENOMEM;
    b->data = p;
    b->cap = cap;
    return HEARTH_OK;
}

int hearth_buf_append(hearth_buf *b, const void *data, size_t n)
{
    int rc = hearth_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
    return HEARTH_OK;
}

int hearth_buf_appends(hearth_buf *b, const char *s) { return hearth_buf_append(b, s, strlen(s)); }

int hearth_buf_vprintf(hearth_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return HEARTH_EINVAL;
    int rc = hearth_buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return HEARTH_OK;
}

int hearth_buf_printf(hearth_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = hearth_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void hearth_buf_consume(hearth_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = 0;
}

void hearth_buf_reset(hearth_buf *b, size_t keep)
{
    if (b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}
