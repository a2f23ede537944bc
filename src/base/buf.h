/* buf.h: a growable byte buffer with a hard maximum set at creation.
 *
 * Every buffer that grows from network or file input has a ceiling, so a
 * hostile peer meets HEARTH_ELIMIT instead of exhausting memory. */
#ifndef HEARTH_BASE_BUF_H
#define HEARTH_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct hearth_buf {
    char *data;  /* owned; NULL until the first append */
    size_t len;  /* bytes in use */
    size_t cap;  /* bytes allocated */
    size_t max;  /* hard ceiling on len */
} hearth_buf;

/* Caller-owned storage; allocates nothing until the first append. */
void hearth_buf_init(hearth_buf *b, size_t max);
void hearth_buf_deinit(hearth_buf *b);
/* Ensures room for `extra` more bytes. HEARTH_ELIMIT past max, HEARTH_ENOMEM on allocation failure. */
int hearth_buf_reserve(hearth_buf *b, size_t extra);
int hearth_buf_append(hearth_buf *b, const void *data, size_t n);
int hearth_buf_appends(hearth_buf *b, const char *s);
int hearth_buf_printf(hearth_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hearth_buf_vprintf(hearth_buf *b, const char *fmt, va_list ap);
/* Drops the first n bytes (n <= len), keeping the rest. */
void hearth_buf_consume(hearth_buf *b, size_t n);
/* Empties the buffer; frees the storage when it has grown past keep bytes. */
void hearth_buf_reset(hearth_buf *b, size_t keep);

#endif
