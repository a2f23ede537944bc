/* http_chunked.c: the chunked transfer coding decoder (RFC 9112 7.1).
 *
 * What: hearth_http_chunked_decode turns chunked-coded bytes, arriving in
 * pieces of any size, into the body in a bounded hearth_buf.
 *
 * How: a byte-at-a-time state machine for the framing (chunk-size line, the
 * CRLF after each chunk's data, the trailer section) and one memcpy for each
 * run of chunk data. All it remembers between calls lives in the caller's
 * hearth_http_chunked: the state, the bytes left in the current chunk, and a
 * byte count that bounds the current size line (4 KiB) or the whole trailer
 * section (8 KiB), so a peer cannot keep it reading framing forever. A chunk
 * whose declared size does not fit in what is left of the body limit is
 * refused (413) at its size line, before its data is read.
 *
 * Rejected: re-scanning from the start of the body as the head parser does:
 * bodies are large and already copied out, so the decoder keeps state instead.
 * Interpreting chunk extensions: nothing here uses them, so they are checked
 * only for control characters and skipped. Keeping trailer fields: the API has
 * no use for them; they are checked for shape and dropped. Bare LF as a line
 * end: refused, as in the head parser, so both agree on where lines end. */
#include "net/http_parse.h"

#include <limits.h>
#include <string.h>

#define SIZE_LINE_MAX 4096 /* bytes of one chunk-size line, CRLF included */
#define TRAILER_MAX 8192   /* bytes of the trailer section, final CRLF included */

enum {
    CK_SIZE_FIRST,   /* at the start of a size line: a hex digit must come */
    CK_SIZE,         /* in the hex digits */
    CK_SIZE_BWS,     /* whitespace after the digits: ';' or CR must follow */
    CK_SIZE_EXT,     /* in chunk extensions, up to CR */
    CK_SIZE_LF,      /* CR of the size line seen */
    CK_DATA,         /* in chunk data, c->remaining bytes to go */
    CK_DATA_CR,      /* after the data: CR must come */
    CK_DATA_LF,      /* after the data's CR: LF must come */
    CK_TRAILER_LINE,  /* at the start of a trailer line (or the final CRLF) */
    CK_TRAILER_NAME, /* in a trailer field name */
    CK_TRAILER_VALUE, /* in a trailer field value, up to CR */
    CK_TRAILER_LF,   /* CR of a trailer line seen */
    CK_END_LF,       /* CR of the final empty line seen */
    CK_DONE,
    CK_FAILED,
};

static bool is_tchar(unsigned char c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return true;
    if (c >= '0' && c <= '9')
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ctl(unsigned char c) { return c < 0x20 || c == 0x7f; }

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

void hearth_http_chunked_init(hearth_http_chunked *c)
{
    c->state = CK_SIZE_FIRST;
    c->remaining = 0;
    c->line_bytes = 0;
}

/* Marks the decoder failed, so later calls fail too, and fills the answer. */
static long bad(hearth_http_chunked *c, int *http_status, int http, int code, hearth_err *err, const char *what,
                unsigned ch)
{
    c->state = CK_FAILED;
    if (http_status)
        *http_status = http;
    return hearth_err_set(err, code, "chunked body: %s (byte 0x%02x)", what, ch);
}

/* The size line ended: start the chunk's data, or the trailers after "0". */
static long size_line_done(hearth_http_chunked *c, hearth_buf *out, int *http_status, hearth_err *err)
{
    c->line_bytes = 0;
    if (c->remaining == 0) {
        c->state = CK_TRAILER_LINE;
        return HEARTH_OK;
    }
    if (c->remaining > out->max - out->len) {
        c->state = CK_FAILED;
        if (http_status)
            *http_status = 413;
        return hearth_err_set(err, HEARTH_ELIMIT, "chunked body: a chunk of %llu bytes after %zu would pass the "
                              "%zu-byte body limit", (unsigned long long)c->remaining, out->len, out->max);
    }
    c->state = CK_DATA;
    return HEARTH_OK;
}

long hearth_http_chunked_decode(hearth_http_chunked *c, const char *buf, size_t len, hearth_buf *out, bool *done,
                                int *http_status, hearth_err *err)
{
    *done = false;
    if (c->state == CK_FAILED) {
        if (http_status)
            *http_status = 400;
        return hearth_err_set(err, HEARTH_EINVAL, "chunked body: decoder called again after an error");
    }
    if (len > (size_t)LONG_MAX)
        len = (size_t)LONG_MAX; /* the count consumed must fit the return type */
    size_t i = 0;
    while (i < len && c->state != CK_DONE) {
        if (c->state == CK_DATA) {
            size_t n = len - i;
            if ((uint64_t)n > c->remaining)
                n = (size_t)c->remaining;
            int rc = hearth_buf_append(out, buf + i, n);
            if (rc) {
                /* HEARTH_ELIMIT only if the caller appended to out since the size line was checked */
                c->state = CK_FAILED;
                if (http_status)
                    *http_status = rc == HEARTH_ELIMIT ? 413 : 500;
                return hearth_err_set(err, rc, "chunked body: cannot append %zu bytes to %zu (limit %zu): %s", n,
                                      out->len, out->max, hearth_status_name(rc));
            }
            i += n;
            c->remaining -= n;
            if (c->remaining == 0)
                c->state = CK_DATA_CR;
            continue;
        }
        unsigned char ch = (unsigned char)buf[i++];
        if (c->state <= CK_SIZE_LF && ++c->line_bytes > SIZE_LINE_MAX)
            return bad(c, http_status, 400, HEARTH_EINVAL, err, "chunk size line longer than 4096 bytes", ch);
        if (c->state >= CK_TRAILER_LINE && ++c->line_bytes > TRAILER_MAX)
            return bad(c, http_status, 400, HEARTH_EINVAL, err, "trailer section longer than 8192 bytes", ch);
        int h;
        long rc;
        switch (c->state) {
        case CK_SIZE_FIRST:
            if ((h = hex_value(ch)) < 0)
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "chunk size is not a hex number", ch);
            c->remaining = (uint64_t)h;
            c->state = CK_SIZE;
            break;
        case CK_SIZE:
            if ((h = hex_value(ch)) >= 0) {
                if (c->remaining >> 60)
                    return bad(c, http_status, 400, HEARTH_EINVAL, err, "chunk size overflows 64 bits", ch);
                c->remaining = c->remaining << 4 | (uint64_t)h;
            } else if (ch == ' ' || ch == '\t') {
                c->state = CK_SIZE_BWS;
            } else if (ch == ';') {
                c->state = CK_SIZE_EXT;
            } else if (ch == '\r') {
                c->state = CK_SIZE_LF;
            } else {
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "invalid character in the chunk size line", ch);
            }
            break;
        case CK_SIZE_BWS:
            if (ch == ';')
                c->state = CK_SIZE_EXT;
            else if (ch == '\r')
                c->state = CK_SIZE_LF;
            else if (ch != ' ' && ch != '\t')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "invalid character after the chunk size", ch);
            break;
        case CK_SIZE_EXT:
            if (ch == '\r')
                c->state = CK_SIZE_LF;
            else if (is_ctl(ch) && ch != '\t')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "control character in a chunk extension", ch);
            break;
        case CK_SIZE_LF:
            if (ch != '\n')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "chunk size line: CR without LF", ch);
            if ((rc = size_line_done(c, out, http_status, err)) < 0)
                return rc;
            break;
        case CK_DATA_CR:
            if (ch != '\r')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "missing CRLF after chunk data", ch);
            c->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (ch != '\n')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "missing CRLF after chunk data", ch);
            c->state = CK_SIZE_FIRST;
            break;
        case CK_TRAILER_LINE:
            if (ch == '\r')
                c->state = CK_END_LF;
            else if (is_tchar(ch))
                c->state = CK_TRAILER_NAME;
            else if (ch == ' ' || ch == '\t')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "obs-fold in the trailer section", ch);
            else
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "invalid character in a trailer field name", ch);
            break;
        case CK_TRAILER_NAME:
            if (ch == ':')
                c->state = CK_TRAILER_VALUE;
            else if (!is_tchar(ch))
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "invalid character in a trailer field name", ch);
            break;
        case CK_TRAILER_VALUE:
            if (ch == '\r')
                c->state = CK_TRAILER_LF;
            else if (is_ctl(ch) && ch != '\t')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "control character in a trailer field value",
                           ch);
            break;
        case CK_TRAILER_LF:
            if (ch != '\n')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "trailer line: CR without LF", ch);
            c->state = CK_TRAILER_LINE;
            break;
        case CK_END_LF:
            if (ch != '\n')
                return bad(c, http_status, 400, HEARTH_EINVAL, err, "final line: CR without LF", ch);
            c->state = CK_DONE;
            break;
        default:
            return bad(c, http_status, 400, HEARTH_EINVAL, err, "decoder state is corrupt", ch);
        }
    }
    *done = c->state == CK_DONE;
    return (long)i;
}
