/* http_parse.h: an incremental, zero-copy HTTP/1.1 request parser and a
 * chunked-body decoder.
 *
 * The parser is re-run over the whole buffered head each time more bytes
 * arrive (heads are small and bounded, so this is cheaper than keeping
 * state). Parsed fields point into the caller's buffer. It never reads
 * past buf[len-1] (tested with inputs placed against a guard page). */
#ifndef HEARTH_NET_HTTP_PARSE_H
#define HEARTH_NET_HTTP_PARSE_H

#include "base/buf.h"
#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEARTH_HTTP_MAX_HEADERS_CAP 256 /* storage bound; the configured limit is lower */

typedef struct hearth_http_header {
    const char *name;
    size_t name_len;
    const char *value;  /* leading and trailing whitespace trimmed */
    size_t value_len;
} hearth_http_header;

typedef struct hearth_http_limits {
    size_t max_request_line;  /* bytes, including CRLF; default 8 KiB -> 431 */
    size_t max_header_bytes;  /* the whole head; default 64 KiB -> 431 */
    size_t max_headers;       /* fields; default 100 -> 431; <= HEARTH_HTTP_MAX_HEADERS_CAP */
} hearth_http_limits;

typedef struct hearth_http_request {
    const char *method;
    size_t method_len;
    const char *target;       /* request-target as sent */
    size_t target_len;
    /* The target split for routing (RFC 9112 3.2): origin-form "/p?q" as sent;
     * absolute-form "http://host/p?q" by its path and query (path "/" when the
     * URI has none; authority names host[:port]); any other form whole as the
     * path. query excludes the '?' and is empty (never NULL) when absent. */
    const char *path;
    size_t path_len;
    const char *query;
    size_t query_len;
    const char *authority;    /* absolute-form only; else NULL */
    size_t authority_len;
    int minor_version;        /* HTTP/1.x: 0 or 1 */
    hearth_http_header headers[HEARTH_HTTP_MAX_HEADERS_CAP];
    size_t n_headers;
    /* derived from the headers */
    int64_t content_length;   /* -1 when absent */
    bool chunked;             /* Transfer-Encoding: chunked */
    bool keep_alive;          /* HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive */
    bool expect_continue;     /* Expect: 100-continue */
    const hearth_http_header *host; /* the one Host field; NULL only in an HTTP/1.0 request without one */
} hearth_http_request;

void hearth_http_limits_default(hearth_http_limits *lim);

/* Parses the request head in buf[0..len).
 * Returns the length of the head (through the blank line) when complete;
 * HEARTH_EAGAIN when more bytes are needed (and no limit is yet exceeded);
 * otherwise a negative status, with *http_status set to the answer the server
 * should send and close after (400 malformed or conflicting framing, an
 * HTTP/1.1 request without Host, two Host fields or an invalid one, an
 * absolute-form target that is not an http(s) URI with a host; 431 a
 * limit, 501 an unsupported Transfer-Encoding, 505 a version other than
 * 1.0/1.1, 417 an HTTP/1.1 Expect other than 100-continue) and err->msg saying
 * what was wrong. A proper prefix of any input gives HEARTH_EAGAIN or the
 * same error as the whole input; lim NULL means the defaults. */
long hearth_http_parse_request(const char *buf, size_t len, const hearth_http_limits *lim,
                               hearth_http_request *req, int *http_status, hearth_err *err);

/* Case-insensitive lookup; NULL when absent. */
const hearth_http_header *hearth_http_find_header(const hearth_http_request *req, const char *name);

/* Percent-decodes a path segment s[0..n) into out (NUL-terminated): "%2F"
 * becomes '/', a '%' not followed by two hex digits stays as it is. The
 * decoded length, or -1 when it does not fit out_size or would hold a NUL.
 * For names routes take from the path (/v1/models/{id}, /v2/models/{m}). */
long hearth_http_percent_decode(const char *s, size_t n, char *out, size_t out_size);

/* Chunked transfer coding decoder state (caller-owned). */
typedef struct hearth_http_chunked {
    int state;
    uint64_t remaining;    /* bytes left in the current chunk */
    size_t line_bytes;     /* bytes of the current size/trailer line, bounded */
} hearth_http_chunked;

void hearth_http_chunked_init(hearth_http_chunked *c);
/* Consumes encoded bytes from buf[0..len), appending the decoded body to out
 * (whose max is the body limit). Returns the number of bytes consumed (all of
 * len unless the body ended inside it) and sets *done once the last chunk and
 * trailers are read. Negative on error with *http_status 400 (malformed),
 * 413 (out's limit reached: refused at the size line of the chunk that would
 * pass it) or 500 (out of memory); after an error every call fails. */
long hearth_http_chunked_decode(hearth_http_chunked *c, const char *buf, size_t len, hearth_buf *out,
                                bool *done, int *http_status, hearth_err *err);

#endif
