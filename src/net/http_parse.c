/* http_parse.c: the HTTP/1.1 request-head parser (RFC 9112 sections 2-3, 5, 6;
 * RFC 9110 sections 5.6, 7.6.1, 10.1.1).
 *
 * What: hearth_http_parse_request checks and splits a request head that sits
 * in the caller's buffer, and derives the framing (Content-Length or chunked),
 * keep-alive and Expect from its fields.
 *
 * How: one pass, line by line, with every byte classified the first time it is
 * looked at. Each error is decided by bytes at or before the position where it
 * is reported, and lines are taken in order, so a prefix of an input gives
 * either HEARTH_EAGAIN or exactly the error the whole input gives. The scan is
 * confined to the first max_header_bytes (and, for the request line,
 * max_request_line) bytes, so a limit is reported as soon as the caller holds
 * more bytes than it allows, without waiting for the line to end. Derived
 * fields are computed from the finished header list in a second, short pass.
 *
 * Rejected: keeping state between calls (picohttpparser's last_len): heads are
 * bounded and small, and a stateless re-scan cannot get out of step with the
 * buffer. Accepting bare LF or bare CR as line ends: two parsers that disagree
 * on where a line ends are how requests get smuggled, so only CRLF counts.
 * Ignoring an empty line before the request line (RFC 9112 2.2 says SHOULD):
 * the connection layer consumes bodies exactly, so a stray CRLF means a broken
 * client; it gets a 400. Lists in Content-Length ("5, 5"): not digits, so 400;
 * identical repeated fields are accepted instead.
 *
 * Host and the target's form (RFC 9112 3.2) are checked here too, not left to
 * the router: an HTTP/1.1 request without Host, with two (any version) or with
 * one that is not host[:port] gets a 400, as the RFC says a server MUST, and an
 * absolute-form target ("GET http://host/p?q HTTP/1.1", which a server MUST
 * accept) is split here into the path and query the router matches, so every
 * layer above sees one shape of target. Only http and https URIs are taken in
 * absolute-form: hearth is no proxy for other schemes. */
#include "net/http_parse.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CONTENT_LENGTH_MAX ((uint64_t)1 << 62)
#define CLIP_MAX 40 /* bytes of client text quoted in an error message */

void hearth_http_limits_default(hearth_http_limits *lim)
{
    lim->max_request_line = 8192;
    lim->max_header_bytes = 65536;
    lim->max_headers = 100;
}

/* token characters, RFC 9110 5.6.2 */
static bool is_tchar(unsigned char c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return true;
    if (c >= '0' && c <= '9')
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static bool is_ctl(unsigned char c) { return c < 0x20 || c == 0x7f; }

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c; }

static bool ieq(const char *s, size_t n, const char *lit)
{
    if (strlen(lit) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != lower((unsigned char)lit[i]))
            return false;
    return true;
}

/* Copies at most CLIP_MAX bytes of client text for a message, with anything
 * unprintable shown as '?', so a message never carries raw control bytes. */
static const char *clip(char out[CLIP_MAX + 4], const char *s, size_t n)
{
    size_t k = n < CLIP_MAX ? n : CLIP_MAX;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    strcpy(out + k, n > k ? "..." : "");
    return out;
}

static int fail(int *http_status, int http, hearth_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int *http_status, int http, hearth_err *err, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (http_status)
        *http_status = http;
    int code = HEARTH_EINVAL;
    if (http == 431)
        code = HEARTH_ELIMIT;
    else if (http == 501 || http == 505 || http == 417)
        code = HEARTH_EUNSUPPORTED;
    return hearth_err_set(err, code, "%s", msg);
}

/* "HTTP/1.0" or "HTTP/1.1"; any other HTTP/d.d is well formed but unsupported. */
static int parse_version(const char *v, size_t n, hearth_http_request *req, int *st, hearth_err *err)
{
    char c[CLIP_MAX + 4];
    if (n != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
        v[7] > '9')
        return fail(st, 400, err, "request line: malformed HTTP version '%s'", clip(c, v, n));
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return fail(st, 505, err, "request line: HTTP version '%s' is not supported (only 1.0 and 1.1)",
                    clip(c, v, n));
    req->minor_version = v[7] - '0';
    return HEARTH_OK;
}

/* Sets path and query from the target (see the header). An absolute-form
 * target, scheme "://" authority [path] ["?" query], must be http or https
 * with a non-empty authority (RFC 9110 4.2.1), else 400. */
static int split_target(hearth_http_request *req, int *st, hearth_err *err)
{
    const char *t = req->target, *end = req->target + req->target_len;
    const char *p = t;
    req->authority = NULL;
    req->authority_len = 0;
    if (is_alpha((unsigned char)t[0])) { /* origin-form starts with '/', asterisk-form is '*' */
        const char *s = t + 1;
        while (s < end && (is_alpha((unsigned char)*s) || (*s >= '0' && *s <= '9') || (*s && strchr("+-.", *s))))
            s++;
        if (end - s >= 3 && memcmp(s, "://", 3) == 0) {
            char c[CLIP_MAX + 4];
            if (!ieq(t, (size_t)(s - t), "http") && !ieq(t, (size_t)(s - t), "https"))
                return fail(st, 400, err, "request line: absolute-form target '%s' is not an http or https URI",
                            clip(c, t, req->target_len));
            const char *a = s + 3, *z = a;
            while (z < end && *z != '/' && *z != '?')
                z++;
            if (z == a)
                return fail(st, 400, err, "request line: absolute-form target '%s' has no host",
                            clip(c, t, req->target_len));
            req->authority = a;
            req->authority_len = (size_t)(z - a);
            p = z;
        }
    }
    const char *q = memchr(p, '?', (size_t)(end - p));
    const char *pend = q ? q : end;
    if (p == pend && req->authority) {
        req->path = "/"; /* "http://host" and "http://host?q" ask for the root */
        req->path_len = 1;
    } else {
        req->path = p;
        req->path_len = (size_t)(pend - p);
    }
    req->query = q ? q + 1 : end;
    req->query_len = q ? (size_t)(end - q - 1) : 0;
    return HEARTH_OK;
}

/* Host = uri-host [ ":" port ] (RFC 9110 7.2): the characters of a reg-name,
 * an IP literal in brackets, or an IPv4 address, and digits after a colon.
 * Empty is allowed (the target's URI has no authority). */
static bool host_valid(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (!is_alpha(c) && !(c >= '0' && c <= '9') && (c == 0 || !strchr("-._~%!$&'()*+,;=:[]", c)))
            return false;
    }
    return true;
}

/* The request line in b[0..avail): its length through CRLF, HEARTH_EAGAIN
 * when no line end lies within avail, or an error. */
static long request_line(const char *b, size_t avail, hearth_http_request *req, int *st, hearth_err *err)
{
    size_t i = 0;
    for (; i < avail && b[i] != ' '; i++) {
        unsigned char c = (unsigned char)b[i];
        if (is_tchar(c))
            continue;
        if (i == 0 && (c == '\r' || c == '\n'))
            return fail(st, 400, err, "request line: empty line before the request line");
        if (c == '\r' || c == '\n')
            return fail(st, 400, err, "request line: expected 'METHOD request-target HTTP/1.x'");
        return fail(st, 400, err, "request line: invalid character 0x%02x in the method at byte %zu", c, i);
    }
    if (i == 0 && avail > 0)
        return fail(st, 400, err, "request line: empty method");
    size_t method_end = i;
    for (; i < avail; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c == '\n') {
            if (b[i - 1] != '\r')
                return fail(st, 400, err, "request line: bare LF at byte %zu (lines must end in CRLF)", i);
            break;
        }
        if (c == '\r') {
            if (i + 1 < avail && b[i + 1] != '\n')
                return fail(st, 400, err, "request line: bare CR at byte %zu", i);
            continue;
        }
        if (is_ctl(c))
            return fail(st, 400, err, "request line: control character 0x%02x at byte %zu", c, i);
    }
    if (i == avail)
        return HEARTH_EAGAIN;

    size_t end = i - 1; /* the CR */
    const char *rest = b + method_end + 1;
    size_t rest_len = end > method_end ? end - method_end - 1 : 0;
    const char *sp = rest_len ? memrchr(rest, ' ', rest_len) : NULL;
    if (method_end >= end || !sp)
        return fail(st, 400, err, "request line: expected 'METHOD request-target HTTP/1.x'");
    size_t target_len = (size_t)(sp - rest);
    if (target_len == 0)
        return fail(st, 400, err, "request line: empty request-target");
    if (memchr(rest, ' ', target_len))
        return fail(st, 400, err, "request line: whitespace in the request-target");
    int rc = parse_version(sp + 1, (size_t)(b + end - (sp + 1)), req, st, err);
    if (rc)
        return rc;
    req->method = b;
    req->method_len = method_end;
    req->target = rest;
    req->target_len = target_len;
    rc = split_target(req, st, err);
    if (rc)
        return rc;
    return (long)(i + 1);
}

/* One field line in b[0..avail), numbered lineno from 1 after the request
 * line. Returns its length through CRLF, 0 for the empty line that ends the
 * head, HEARTH_EAGAIN when the line is not complete within avail, or an error. */
static long header_line(const char *b, size_t avail, size_t lineno, size_t max_headers, hearth_http_request *req,
                        int *st, hearth_err *err)
{
    if (avail == 0)
        return HEARTH_EAGAIN;
    unsigned char c0 = (unsigned char)b[0];
    if (c0 == '\r') {
        if (avail < 2)
            return HEARTH_EAGAIN;
        if (b[1] != '\n')
            return fail(st, 400, err, "header line %zu: bare CR", lineno);
        return 0;
    }
    if (c0 == '\n')
        return fail(st, 400, err, "header line %zu: bare LF (lines must end in CRLF)", lineno);
    if (c0 == ' ' || c0 == '\t')
        return fail(st, 400, err, "header line %zu: obs-fold (a line starting with whitespace) is not allowed",
                    lineno);
    if (req->n_headers >= max_headers)
        return fail(st, 431, err, "more than %zu header fields", max_headers);

    size_t i = 0;
    for (; i < avail && b[i] != ':'; i++) {
        unsigned char c = (unsigned char)b[i];
        if (is_tchar(c))
            continue;
        if (c == ' ' || c == '\t')
            return fail(st, 400, err, "header line %zu: whitespace before colon", lineno);
        if (c == '\r' || c == '\n')
            return fail(st, 400, err, "header line %zu: no colon", lineno);
        return fail(st, 400, err, "header line %zu: invalid character 0x%02x in the field name", lineno, c);
    }
    if (i == avail)
        return HEARTH_EAGAIN;
    if (i == 0)
        return fail(st, 400, err, "header line %zu: empty field name", lineno);
    size_t name_len = i;
    size_t vstart = ++i;
    for (; i < avail; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c == '\n') {
            if (b[i - 1] != '\r')
                return fail(st, 400, err, "header line %zu: bare LF (lines must end in CRLF)", lineno);
            break;
        }
        if (c == '\r') {
            if (i + 1 < avail && b[i + 1] != '\n')
                return fail(st, 400, err, "header line %zu: bare CR", lineno);
            continue;
        }
        if (is_ctl(c) && c != '\t') {
            char n[CLIP_MAX + 4];
            return fail(st, 400, err, "header line %zu: control character 0x%02x in the value of '%s'", lineno,
                        c, clip(n, b, name_len));
        }
    }
    if (i == avail)
        return HEARTH_EAGAIN;
    size_t vend = i - 1; /* the CR */
    while (vstart < vend && (b[vstart] == ' ' || b[vstart] == '\t'))
        vstart++;
    while (vend > vstart && (b[vend - 1] == ' ' || b[vend - 1] == '\t'))
        vend--;
    hearth_http_header *h = &req->headers[req->n_headers++];
    h->name = b;
    h->name_len = name_len;
    h->value = b + vstart;
    h->value_len = vend - vstart;
    return (long)(i + 1);
}

static int parse_content_length(const hearth_http_header *h, hearth_http_request *req, int *st, hearth_err *err)
{
    char c[CLIP_MAX + 4];
    if (h->value_len == 0)
        return fail(st, 400, err, "Content-Length is empty");
    uint64_t v = 0;
    for (size_t i = 0; i < h->value_len; i++) {
        unsigned char d = (unsigned char)h->value[i];
        if (d < '0' || d > '9')
            return fail(st, 400, err, "Content-Length '%s' is not a decimal number",
                        clip(c, h->value, h->value_len));
        if (v > (CONTENT_LENGTH_MAX - (d - '0')) / 10) /* checked before multiplying, so v never wraps */
            return fail(st, 400, err, "Content-Length '%s' is larger than 2^62", clip(c, h->value, h->value_len));
        v = v * 10 + (d - '0');
    }
    if (req->content_length >= 0 && (uint64_t)req->content_length != v)
        return fail(st, 400, err, "Content-Length given twice with different values (%lld and %llu)",
                    (long long)req->content_length, (unsigned long long)v);
    req->content_length = (int64_t)v;
    return HEARTH_OK;
}

/* Connection is a comma-separated list of tokens (RFC 9110 7.6.1). */
static void scan_connection(const hearth_http_header *h, bool *close, bool *keep_alive)
{
    const char *s = h->value, *end = h->value + h->value_len;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        const char *a = s, *z = e;
        while (a < z && (*a == ' ' || *a == '\t'))
            a++;
        while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
            z--;
        if (ieq(a, (size_t)(z - a), "close"))
            *close = true;
        else if (ieq(a, (size_t)(z - a), "keep-alive"))
            *keep_alive = true;
        s = comma ? comma + 1 : end;
    }
}

/* Framing, persistence and expectations from the complete field list. */
static int derive(hearth_http_request *req, int *st, hearth_err *err)
{
    const hearth_http_header *te = NULL, *bad_expect = NULL;
    size_t n_te = 0, n_host = 0;
    bool close = false, keep_alive = false, cont = false;
    for (size_t i = 0; i < req->n_headers; i++) {
        const hearth_http_header *h = &req->headers[i];
        if (ieq(h->name, h->name_len, "Content-Length")) {
            int rc = parse_content_length(h, req, st, err);
            if (rc)
                return rc;
        } else if (ieq(h->name, h->name_len, "Transfer-Encoding")) {
            if (!te)
                te = h;
            n_te++;
        } else if (ieq(h->name, h->name_len, "Connection")) {
            scan_connection(h, &close, &keep_alive);
        } else if (ieq(h->name, h->name_len, "Host")) {
            if (!req->host)
                req->host = h;
            n_host++;
        } else if (ieq(h->name, h->name_len, "Expect")) {
            if (ieq(h->value, h->value_len, "100-continue"))
                cont = true;
            else if (!bad_expect)
                bad_expect = h;
        }
    }
    if (te) {
        char c[CLIP_MAX + 4];
        if (req->minor_version == 0)
            return fail(st, 400, err, "Transfer-Encoding in an HTTP/1.0 request");
        if (req->content_length >= 0)
            return fail(st, 400, err, "both Content-Length and Transfer-Encoding (refused: request smuggling)");
        if (n_te > 1)
            return fail(st, 501, err, "Transfer-Encoding given %zu times: only a single 'chunked' is supported",
                        n_te);
        if (!ieq(te->value, te->value_len, "chunked"))
            return fail(st, 501, err, "Transfer-Encoding '%s' is not supported (only 'chunked')",
                        clip(c, te->value, te->value_len));
        req->chunked = true;
    }
    if (n_host > 1)
        return fail(st, 400, err, "Host given %zu times (a request names one host)", n_host);
    if (!req->host && req->minor_version == 1)
        return fail(st, 400, err, "no Host field (an HTTP/1.1 request must name its host)");
    if (req->host && !host_valid(req->host->value, req->host->value_len)) {
        char c[CLIP_MAX + 4];
        return fail(st, 400, err, "Host '%s' is not a host[:port]", clip(c, req->host->value, req->host->value_len));
    }
    if (req->minor_version == 1) {
        req->keep_alive = !close;
        if (bad_expect) {
            char c[CLIP_MAX + 4];
            return fail(st, 417, err, "Expect '%s' is not supported (only '100-continue')",
                        clip(c, bad_expect->value, bad_expect->value_len));
        }
        req->expect_continue = cont;
    } else {
        /* RFC 9110 10.1.1: an HTTP/1.0 request's expectation is ignored. */
        req->keep_alive = keep_alive && !close;
    }
    return HEARTH_OK;
}

long hearth_http_parse_request(const char *buf, size_t len, const hearth_http_limits *lim, hearth_http_request *req,
                               int *http_status, hearth_err *err)
{
    hearth_http_limits def;
    if (!lim) {
        hearth_http_limits_default(&def);
        lim = &def;
    }
    size_t rl_max = lim->max_request_line;
    size_t head_max = lim->max_header_bytes < (size_t)LONG_MAX ? lim->max_header_bytes : (size_t)LONG_MAX;
    size_t max_headers = lim->max_headers < HEARTH_HTTP_MAX_HEADERS_CAP ? lim->max_headers
                                                                        : HEARTH_HTTP_MAX_HEADERS_CAP;
    req->method = req->target = req->path = req->query = req->authority = NULL;
    req->method_len = req->target_len = req->path_len = req->query_len = req->authority_len = 0;
    req->host = NULL;
    req->minor_version = 0;
    req->n_headers = 0;
    req->content_length = -1;
    req->chunked = req->keep_alive = req->expect_continue = false;

    size_t window = len < head_max ? len : head_max;
    size_t rl_window = window < rl_max ? window : rl_max;
    long n = request_line(buf, rl_window, req, http_status, err);
    if (n == HEARTH_EAGAIN) {
        if (len >= rl_max && rl_max <= head_max)
            return fail(http_status, 431, err, "request line longer than %zu bytes", rl_max);
        if (len >= head_max)
            return fail(http_status, 431, err, "request head longer than %zu bytes", head_max);
        return HEARTH_EAGAIN;
    }
    if (n < 0)
        return n;
    size_t pos = (size_t)n;
    for (size_t lineno = 1;; lineno++) {
        n = header_line(buf + pos, window - pos, lineno, max_headers, req, http_status, err);
        if (n == HEARTH_EAGAIN) {
            if (len >= head_max)
                return fail(http_status, 431, err, "request head longer than %zu bytes", head_max);
            return HEARTH_EAGAIN;
        }
        if (n < 0)
            return n;
        if (n == 0)
            break;
        pos += (size_t)n;
    }
    pos += 2;
    int rc = derive(req, http_status, err);
    if (rc)
        return rc;
    return (long)pos;
}

const hearth_http_header *hearth_http_find_header(const hearth_http_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (ieq(req->headers[i].name, req->headers[i].name_len, name))
            return &req->headers[i];
    return NULL;
}

static int url_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

long hearth_http_percent_decode(const char *s, size_t n, char *out, size_t out_size)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && url_hex(s[i + 1]) >= 0 && url_hex(s[i + 2]) >= 0) {
            c = (char)(url_hex(s[i + 1]) * 16 + url_hex(s[i + 2]));
            i += 2;
        }
        if (c == 0 || k + 1 >= out_size)
            return -1;
        out[k++] = c;
    }
    out[k] = 0;
    return (long)k;
}
