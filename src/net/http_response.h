/* http_response.h: formatting HTTP/1.1 response heads and framing (private to net). */
#ifndef HEARTH_NET_HTTP_RESPONSE_H
#define HEARTH_NET_HTTP_RESPONSE_H

#include "base/buf.h"
#include "net/server.h" /* hearth_json_quote */

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* "Not Found" for 404, ... ("Unknown" for codes without a phrase). */
const char *hearth_http_reason(int status);

/* An IMF-fixdate for the Date header, recomputed at most once a second. */
typedef struct hearth_http_date {
    time_t sec;
    char text[40];
} hearth_http_date;
const char *hearth_http_date_now(hearth_http_date *d);

typedef struct hearth_http_head {
    int status;
    int minor_version;        /* the request's HTTP/1.x version */
    const char *content_type; /* or NULL */
    const char *headers;      /* extra lines ending in CRLF, or NULL */
    const char *cors_origin;  /* Access-Control-Allow-Origin value, or NULL */
    const char *date;         /* from hearth_http_date_now */
    bool keep_alive;          /* false: "Connection: close" */
    bool chunked;             /* "Transfer-Encoding: chunked" instead of Content-Length */
    bool close_delimited;     /* HTTP/1.0 stream: no length, the close ends the body */
    size_t content_length;
} hearth_http_head;

/* Appends the status line and headers, through the blank line. */
int hearth_http_head_format(hearth_buf *out, const hearth_http_head *h);
/* Appends one chunk of the chunked coding ("<hex>\r\n<data>\r\n"); n > 0. */
int hearth_http_chunk_format(hearth_buf *out, const void *data, size_t n);
/* Appends the last chunk ("0\r\n\r\n"). */
int hearth_http_chunk_end(hearth_buf *out);

#endif
