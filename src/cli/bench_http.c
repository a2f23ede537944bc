/* bench_http.c: the client side of HTTP/1.1 for `hearth bench`: an answer's
 * head, its body (Content-Length, chunked or until close) and the SSE events
 * in it.
 *
 * How: the connection keeps unread bytes in its own buffer and feeds them
 * here; the head is parsed once it is whole (heads are small), then body
 * bytes are moved into r->body, through net/'s chunked decoder when the
 * answer is chunked. SSE events are cut from the front of the body as they
 * complete, so a long stream never holds more than one event.
 * Rejected: net/http_parse.c's request parser (it parses requests only: a
 * status line is not a request line); a general response parser with every
 * header kept (the bench needs five facts from the head, the fifth the
 * Open Inference Protocol's Inference-Header-Content-Length). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEAD (64 * 1024)
#define MAX_BODY ((size_t)64 << 20) /* an answer past 64 MiB is a protocol error */

void bench_resp_init(bench_resp *r)
{
    memset(r, 0, sizeof *r);
    hearth_buf_init(&r->body, MAX_BODY);
    bench_resp_reset(r);
}

void bench_resp_deinit(bench_resp *r)
{
    hearth_buf_deinit(&r->body);
    free(r->event);
}

void bench_resp_reset(bench_resp *r)
{
    hearth_buf body = r->body;
    char *event = r->event;
    size_t event_cap = r->event_cap;
    memset(r, 0, sizeof *r);
    r->body = body;
    r->event = event;
    r->event_cap = event_cap;
    r->infer_header_len = -1;
    hearth_buf_reset(&r->body, 64 * 1024);
    hearth_http_chunked_init(&r->dec);
}

static bool value_is(const char *v, size_t n, const char *want)
{
    return n == strlen(want) && !strncasecmp(v, want, n);
}

/* A decimal header value: 0 and *out, or -1. */
static int value_u64(const char *v, size_t vn, int64_t *out)
{
    char tmp[32], *e;
    if (vn == 0 || vn >= sizeof tmp)
        return -1;
    memcpy(tmp, v, vn);
    tmp[vn] = 0;
    long long x = strtoll(tmp, &e, 10);
    if (*e || x < 0)
        return -1;
    *out = x;
    return 0;
}

/* Parses the head in in[0..head_len) (through the blank line). */
static int parse_head(bench_resp *r, const char *in, size_t head_len)
{
    const char *end = in + head_len, *p = in;
    if (head_len < 12 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return -1;
    bool http11 = p[7] == '1';
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        st = st * 10 + (p[i] - '0');
    }
    r->status = st;
    r->keep_alive = http11;
    int64_t clen = -1;
    p = memchr(p, '\n', (size_t)(end - p));
    while (p && ++p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon) {
            size_t name_len = (size_t)(colon - p);
            const char *v = colon + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t vn = (size_t)(ve - v);
            if (name_len == 14 && !strncasecmp(p, "content-length", 14)) {
                if (value_u64(v, vn, &clen))
                    return -1;
            } else if (name_len == 31 && !strncasecmp(p, "inference-header-content-length", 31)) {
                if (value_u64(v, vn, &r->infer_header_len))
                    return -1;
            } else if (name_len == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
                r->chunked = value_is(v, vn, "chunked");
            } else if (name_len == 10 && !strncasecmp(p, "connection", 10)) {
                if (value_is(v, vn, "close"))
                    r->keep_alive = false;
                else if (value_is(v, vn, "keep-alive"))
                    r->keep_alive = true;
            }
        }
        p = eol;
    }
    r->head_done = true;
    if ((st >= 100 && st < 200) || st == 204 || st == 304) {
        r->done = true; /* no body (RFC 9112 6.3) */
    } else if (r->chunked) {
    } else if (clen >= 0) {
        if ((uint64_t)clen > MAX_BODY)
            return -1;
        r->remaining = (uint64_t)clen;
        r->done = clen == 0;
    } else {
        r->until_close = true;
        r->keep_alive = false;
    }
    return 0;
}

long bench_resp_feed(bench_resp *r, const char *in, size_t len)
{
    size_t used = 0;
    if (!r->head_done) {
        const char *e = NULL;
        for (size_t i = 3; i < len && i < MAX_HEAD; i++)
            if (in[i] == '\n' && in[i - 1] == '\r' && in[i - 2] == '\n' && in[i - 3] == '\r') {
                e = in + i + 1;
                break;
            }
        if (!e)
            return len >= MAX_HEAD ? -1 : 0;
        used = (size_t)(e - in);
        r->head_bytes = used;
        if (parse_head(r, in, used))
            return -1;
        if (r->done)
            return (long)used;
    }
    in += used;
    len -= used;
    if (r->chunked) {
        bool done = false;
        int st = 0;
        long n = hearth_http_chunked_decode(&r->dec, in, len, &r->body, &done, &st, NULL);
        if (n < 0)
            return -1;
        r->done = done;
        return (long)used + n;
    }
    size_t take = len;
    if (!r->until_close && take > r->remaining)
        take = (size_t)r->remaining;
    if (take && hearth_buf_append(&r->body, in, take))
        return -1;
    if (!r->until_close) {
        r->remaining -= take;
        r->done = r->remaining == 0;
    }
    return (long)(used + take);
}

int bench_resp_eof(bench_resp *r)
{
    if (r->head_done && r->until_close) {
        r->done = true;
        return 0;
    }
    return r->done ? 0 : -1;
}

int bench_sse_next(bench_resp *r, char **data, size_t *data_len)
{
    char *b = r->body.data;
    size_t n = r->body.len, end = 0, skip = 0;
    if (!b)
        return 0;
    /* events end at a blank line: "\n\n" (hearth, most servers) or "\r\n\r\n" */
    for (size_t i = 1; i < n; i++) {
        if (b[i] == '\n' && b[i - 1] == '\n') {
            end = i - 1, skip = i + 1;
            break;
        }
        if (i >= 3 && b[i] == '\n' && b[i - 1] == '\r' && b[i - 2] == '\n' && b[i - 3] == '\r') {
            end = i - 3, skip = i + 1;
            break;
        }
    }
    if (!skip)
        return 0;
    /* join the event's "data:" lines in place, at the front of the buffer;
     * the consumed bytes are dropped on the next call */
    size_t out = 0;
    for (size_t p = 0; p < end;) {
        size_t q = p;
        while (q < end && b[q] != '\n')
            q++;
        size_t le = q;
        if (le > p && b[le - 1] == '\r')
            le--;
        if (le - p >= 5 && !memcmp(b + p, "data:", 5)) {
            size_t v = p + 5;
            if (v < le && b[v] == ' ')
                v++;
            if (out)
                b[out++] = '\n';
            memmove(b + out, b + v, le - v);
            out += le - v;
        }
        p = q + 1;
    }
    /* the event text is copied out so the body can drop it at once */
    if (out + 1 > r->event_cap) {
        char *s = realloc(r->event, out + 1);
        if (!s)
            return -1;
        r->event = s;
        r->event_cap = out + 1;
    }
    memcpy(r->event, b, out);
    r->event[out] = 0;
    hearth_buf_consume(&r->body, skip);
    *data = r->event;
    *data_len = out;
    return 1;
}
