/* http_response.c: response heads are written with a few memcpy-style
 * appends into the connection's output buffer, so a pipelined burst of
 * small responses leaves in one write(2). Every response carries Date (RFC
 * 9110 requires it of a server with a clock) and Server; the Date text is
 * cached per second because formatting it per request would show in the
 * /health benchmark. */
#include "http_response.h"

#include "base/err.h"

#include <stdio.h>
#include <string.h>

const char *hearth_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

const char *hearth_http_date_now(hearth_http_date *d)
{
    time_t now = time(NULL);
    if (now != d->sec || !d->text[0]) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(d->text, sizeof d->text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        d->sec = now;
    }
    return d->text;
}

int hearth_http_head_format(hearth_buf *out, const hearth_http_head *h)
{
    int rc = hearth_buf_printf(out, "HTTP/1.1 %d %s\r\nServer: hearth\r\nDate: %s\r\n", h->status,
                               hearth_http_reason(h->status), h->date ? h->date : "");
    if (rc)
        return rc;
    if (h->content_type && (rc = hearth_buf_printf(out, "Content-Type: %s\r\n", h->content_type)))
        return rc;
    if (h->chunked)
        rc = hearth_buf_appends(out, "Transfer-Encoding: chunked\r\n");
    else if (!h->close_delimited)
        rc = hearth_buf_printf(out, "Content-Length: %zu\r\n", h->content_length);
    if (rc)
        return rc;
    if (h->headers && (rc = hearth_buf_appends(out, h->headers)))
        return rc;
    if (h->cors_origin && (rc = hearth_buf_printf(out, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", h->cors_origin)))
        return rc;
    if (!h->keep_alive)
        rc = hearth_buf_appends(out, "Connection: close\r\n\r\n");
    else if (h->minor_version == 0)
        rc = hearth_buf_appends(out, "Connection: keep-alive\r\n\r\n");
    else
        rc = hearth_buf_appends(out, "\r\n");
    return rc;
}

int hearth_http_chunk_format(hearth_buf *out, const void *data, size_t n)
{
    int rc = hearth_buf_printf(out, "%zx\r\n", n);
    if (!rc)
        rc = hearth_buf_append(out, data, n);
    if (!rc)
        rc = hearth_buf_append(out, "\r\n", 2);
    return rc;
}

int hearth_http_chunk_end(hearth_buf *out) { return hearth_buf_append(out, "0\r\n\r\n", 5); }

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs,
 * no surrogates, <= U+10FFFF), or 0. */
static size_t utf8_valid_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len;
    unsigned cp;
    if (u[0] >= 0xc2 && u[0] <= 0xdf) {
        len = 2;
        cp = u[0] & 0x1f;
    } else if (u[0] >= 0xe0 && u[0] <= 0xef) {
        len = 3;
        cp = u[0] & 0x0f;
    } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
        len = 4;
        cp = u[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (u[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int hearth_json_quote(hearth_buf *out, const char *s, size_t n)
{
    int rc = hearth_buf_append(out, "\"", 1);
    size_t run = 0; /* start of the current run of bytes that need no escape */
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t len = utf8_valid_len(s + i, n - i);
            if (len) {
                i += len - 1;
                continue;
            }
            /* invalid UTF-8 (say, echoed from a bad request) must not make the JSON invalid */
            rc = hearth_buf_append(out, s + run, i - run);
            run = i + 1;
            if (!rc)
                rc = hearth_buf_appends(out, "\\ufffd");
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        rc = hearth_buf_append(out, s + run, i - run);
        run = i + 1;
        if (rc)
            break;
        switch (c) {
        case '"': rc = hearth_buf_append(out, "\\\"", 2); break;
        case '\\': rc = hearth_buf_append(out, "\\\\", 2); break;
        case '\n': rc = hearth_buf_append(out, "\\n", 2); break;
        case '\r': rc = hearth_buf_append(out, "\\r", 2); break;
        case '\t': rc = hearth_buf_append(out, "\\t", 2); break;
        default: rc = hearth_buf_printf(out, "\\u%04x", c); break;
        }
    }
    if (!rc)
        rc = hearth_buf_append(out, s + run, n - run);
    if (!rc)
        rc = hearth_buf_append(out, "\"", 1);
    return rc;
}
