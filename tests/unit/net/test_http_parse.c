/* Unit tests for src/net/http_parse.c and http_chunked.c.
 *
 * Every input is copied so that it ends exactly where a PROT_NONE page
 * begins, so a read one byte past the input faults. Every request head is
 * also parsed at each proper prefix, which must give HEARTH_EAGAIN or the
 * very error (status and message) that the whole input gives. Expected values
 * are written by hand from RFC 9112, not produced by the parser. */
#include "harness.h"

#include "base/buf.h"
#include "net/http_parse.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_ROOM (256u * 1024u)

static char *g_map;  /* GUARD_ROOM usable bytes, then one PROT_NONE page */
static size_t g_page;

static int guard_setup(void)
{
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    g_map = mmap(NULL, GUARD_ROOM + g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_map == MAP_FAILED)
        return -1;
    return mprotect(g_map + GUARD_ROOM, g_page, PROT_NONE);
}

/* Copies s[0..n) to end at the guard page and returns where it now lies. */
static const char *place(const char *s, size_t n)
{
    char *p = g_map + GUARD_ROOM - n;
    if (n)
        memcpy(p, s, n);
    return p;
}

static hearth_http_request R;  /* the last whole-input parse; points into the guard area */
static int R_status;
static hearth_err R_err;

/* Parses s[0..n) whole and at every proper prefix (with a stride in the
 * middle of inputs over 16 KiB, to bound the run time); checks the prefixes
 * agree with the whole; returns the whole input's result, with R, R_status
 * and R_err describing it. */
static long parse_n(const char *s, size_t n, const hearth_http_limits *lim)
{
    hearth_http_limits def;
    if (!lim) {
        hearth_http_limits_default(&def);
        lim = &def;
    }
    static hearth_http_request preq;
    R_status = 0;
    memset(&R_err, 0, sizeof R_err);
    long whole = hearth_http_parse_request(place(s, n), n, lim, &R, &R_status, &R_err);
    int bad_prefixes = 0;
    for (size_t k = 0; k < n; k += (n > 16384 && k >= 512 && n - k > 512) ? 97 : 1) {
        int st = 0;
        hearth_err e = {0};
        long rc = hearth_http_parse_request(place(s, k), k, lim, &preq, &st, &e);
        bool ok = rc == HEARTH_EAGAIN ||
                  (rc == whole && (rc >= 0 || (st == R_status && strcmp(e.msg, R_err.msg) == 0)));
        if (!ok && bad_prefixes++ < 3)
            fprintf(stderr, "  prefix %zu of %zu: rc %ld status %d '%s'; whole: rc %ld status %d '%s'\n", k, n, rc,
                    st, e.msg, whole, R_status, R_err.msg);
    }
    CHECK_EQ_INT(bad_prefixes, 0);
    /* parse the whole again so R points at the guard copy, not at a prefix's */
    long again = hearth_http_parse_request(place(s, n), n, lim, &R, &R_status, &R_err);
    CHECK_EQ_INT(again, whole);
    return whole;
}

static long parse_s(const char *s, const hearth_http_limits *lim) { return parse_n(s, strlen(s), lim); }

static bool span_is(const char *p, size_t n, const char *lit) { return p && strlen(lit) == n && memcmp(p, lit, n) == 0; }

/* Expects the whole input to fail with this status and a message containing msg. */
static void expect_error(const char *s, size_t n, const hearth_http_limits *lim, int status, const char *msg)
{
    long rc = parse_n(s, n, lim);
    CHECK_MSG(rc < 0 && rc != HEARTH_EAGAIN, "input '%.60s': rc %ld", s, rc);
    CHECK_MSG(R_status == status, "input '%.60s': status %d, want %d (%s)", s, R_status, status, R_err.msg);
    CHECK_MSG(strstr(R_err.msg, msg) != NULL, "input '%.60s': message '%s' lacks '%s'", s, R_err.msg, msg);
}

static void expect_error_s(const char *s, int status, const char *msg) { expect_error(s, strlen(s), NULL, status, msg); }

static void simple_get(void)
{
    const char *s = "GET /index.html?q=1&r=%20 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
    CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
    CHECK(span_is(R.method, R.method_len, "GET"));
    CHECK(span_is(R.target, R.target_len, "/index.html?q=1&r=%20"));
    CHECK_EQ_INT(R.minor_version, 1);
    CHECK_EQ_INT(R.n_headers, 2);
    CHECK(span_is(R.headers[0].name, R.headers[0].name_len, "Host"));
    CHECK(span_is(R.headers[0].value, R.headers[0].value_len, "example.com"));
    CHECK(span_is(R.headers[1].name, R.headers[1].name_len, "Accept"));
    CHECK(span_is(R.headers[1].value, R.headers[1].value_len, "*/*"));
    CHECK_EQ_INT(R.content_length, -1);
    CHECK(!R.chunked);
    CHECK(R.keep_alive);
    CHECK(!R.expect_continue);
    const hearth_http_header *h = hearth_http_find_header(&R, "hOST");
    CHECK(h == &R.headers[0]);
    CHECK(hearth_http_find_header(&R, "Hos") == NULL);
    CHECK(hearth_http_find_header(&R, "Content-Length") == NULL);

    /* no headers at all; an unusual but valid method token; HTTP/1.0 */
    s = "M-SEARCH* * HTTP/1.0\r\n\r\n";
    CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
    CHECK(span_is(R.method, R.method_len, "M-SEARCH*"));
    CHECK(span_is(R.target, R.target_len, "*"));
    CHECK_EQ_INT(R.minor_version, 0);
    CHECK_EQ_INT(R.n_headers, 0);
    CHECK(!R.keep_alive);
    /* bytes past 0x7f are not whitespace or controls: allowed in the target and in values */
    s = "GET /caf\xc3\xa9 HTTP/1.1\r\nX-Name: Jos\xc3\xa9\r\nHost: h\r\n\r\n";
    CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
    CHECK(span_is(R.headers[0].value, R.headers[0].value_len, "Jos\xc3\xa9"));
}

static void values_trimmed_of_ows(void)
{
    const char *s = "POST /x HTTP/1.0\r\nA:   spaced  value \t \r\nB:\r\nC:\t\ttab\r\nD: \r\nE:x\r\n"
                    "F: in\tside\r\n\r\n";
    CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
    CHECK_EQ_INT(R.n_headers, 6);
    const char *want[] = {"spaced  value", "", "tab", "", "x", "in\tside"};
    for (int i = 0; i < 6; i++)
        CHECK_MSG(span_is(R.headers[i].value, R.headers[i].value_len, want[i]), "header %d", i);
}

static void build_head(char *out, size_t cap, int n_headers)
{
    size_t off = (size_t)snprintf(out, cap, "GET / HTTP/1.0\r\n"); /* 1.0: every field is an X-H */
    for (int i = 0; i < n_headers; i++)
        off += (size_t)snprintf(out + off, cap - off, "X-H%d: v%d\r\n", i, i * 7);
    snprintf(out + off, cap - off, "\r\n");
}

static void many_headers(void)
{
    static char s[16384];
    build_head(s, sizeof s, 100);
    CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
    CHECK_EQ_INT(R.n_headers, 100);
    for (int i = 0; i < 100; i++) {
        char name[32], value[32];
        snprintf(name, sizeof name, "X-H%d", i);
        snprintf(value, sizeof value, "v%d", i * 7);
        CHECK(span_is(R.headers[i].name, R.headers[i].name_len, name));
        CHECK(span_is(R.headers[i].value, R.headers[i].value_len, value));
        CHECK(hearth_http_find_header(&R, name) == &R.headers[i]);
    }
    build_head(s, sizeof s, 101);
    expect_error(s, strlen(s), NULL, 431, "more than 100 header fields");

    /* a configured limit above the storage cap is held to the cap */
    hearth_http_limits lim;
    hearth_http_limits_default(&lim);
    lim.max_headers = 1000;
    build_head(s, sizeof s, HEARTH_HTTP_MAX_HEADERS_CAP);
    CHECK_EQ_INT(parse_s(s, &lim), (long)strlen(s));
    CHECK_EQ_INT(R.n_headers, HEARTH_HTTP_MAX_HEADERS_CAP);
    build_head(s, sizeof s, HEARTH_HTTP_MAX_HEADERS_CAP + 1);
    expect_error(s, strlen(s), &lim, 431, "more than 256 header fields");
}

static void pipelined_requests(void)
{
    const char *first = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
    const char *s = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: h\r\n"
                    "Connection: close\r\n\r\n";
    long n = parse_s(s, NULL);
    CHECK_EQ_INT(n, (long)strlen(first));
    CHECK_EQ_INT(R.content_length, 5);
    CHECK(span_is(R.target, R.target_len, "/a"));
    CHECK(R.keep_alive);
    const char *second = s + strlen(first) + 5;
    CHECK_EQ_INT(parse_s(second, NULL), (long)strlen(second));
    CHECK(span_is(R.target, R.target_len, "/b"));
    CHECK(!R.keep_alive);
}

static void request_line_errors(void)
{
    expect_error_s("G@T / HTTP/1.1\r\n\r\n", 400, "invalid character 0x40 in the method");
    expect_error_s(" / HTTP/1.1\r\n\r\n", 400, "empty method");
    expect_error_s("\r\nGET / HTTP/1.1\r\n\r\n", 400, "empty line before the request line");
    expect_error_s("GET\r\n\r\n", 400, "expected 'METHOD request-target HTTP/1.x'");
    expect_error_s("GET /\r\n\r\n", 400, "expected 'METHOD request-target HTTP/1.x'");
    expect_error_s("GET  HTTP/1.1\r\n\r\n", 400, "empty request-target");
    expect_error_s("GET /a b HTTP/1.1\r\n\r\n", 400, "whitespace in the request-target");
    expect_error_s("GET /a\tb HTTP/1.1\r\n\r\n", 400, "control character 0x09");
    expect_error_s("GET /a\x01 HTTP/1.1\r\n\r\n", 400, "control character 0x01");
    expect_error_s("GET /a\x7f HTTP/1.1\r\n\r\n", 400, "control character 0x7f");
    expect_error_s("GET / HTTP/1.1\n\r\n", 400, "bare LF");
    expect_error_s("GET / HTTP/1.1\rX\r\n\r\n", 400, "bare CR");
    expect_error_s("GET / HTTP/1.1\r\r\n\r\n", 400, "bare CR");
    /* well-formed versions other than 1.0 and 1.1: 505 */
    expect_error_s("GET / HTTP/2.0\r\n\r\n", 505, "HTTP version 'HTTP/2.0' is not supported");
    expect_error_s("GET / HTTP/1.2\r\n\r\n", 505, "not supported");
    expect_error_s("GET / HTTP/0.9\r\n\r\n", 505, "not supported");
    /* anything else in the version: 400 */
    expect_error_s("GET / http/1.1\r\n\r\n", 400, "malformed HTTP version 'http/1.1'");
    expect_error_s("GET / HTTP/1.10\r\n\r\n", 400, "malformed HTTP version");
    expect_error_s("GET / HTTP/1\r\n\r\n", 400, "malformed HTTP version");
    expect_error_s("GET / HTTX/1.1\r\n\r\n", 400, "malformed HTTP version");
    expect_error_s("GET / HTTP/a.1\r\n\r\n", 400, "malformed HTTP version");
    expect_error_s("GET / \r\n\r\n", 400, "malformed HTTP version");
}

static void header_line_errors(void)
{
    expect_error_s("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nHost : x\r\n\r\n", 400, "header line 3: whitespace before colon");
    expect_error_s("GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", 400, "header line 1: whitespace before colon");
    expect_error_s("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400, "header line 2: obs-fold");
    expect_error_s("GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n", 400, "header line 2: obs-fold");
    expect_error_s("GET / HTTP/1.1\r\nA: b\n\r\n", 400, "header line 1: bare LF");
    expect_error_s("GET / HTTP/1.1\r\nA: b\r\n\n", 400, "header line 2: bare LF");
    expect_error_s("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400, "header line 1: bare CR");
    expect_error_s("GET / HTTP/1.1\r\nA: b\r\n\rX", 400, "header line 2: bare CR");
    expect_error_s("GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "header line 1: no colon");
    expect_error_s("GET / HTTP/1.1\r\n: x\r\n\r\n", 400, "header line 1: empty field name");
    expect_error_s("GET / HTTP/1.1\r\nA(b: x\r\n\r\n", 400, "invalid character 0x28 in the field name");
    static const char nul[] = "GET / HTTP/1.1\r\nX-A: b\0c\r\n\r\n";
    expect_error(nul, sizeof nul - 1, NULL, 400, "header line 1: control character 0x00 in the value of 'X-A'");
    expect_error_s("GET / HTTP/1.1\r\nX-A: b\x01\r\n\r\n", 400, "control character 0x01");
    expect_error_s("GET / HTTP/1.1\r\nX-A: b\x1b[0m\r\n\r\n", 400, "control character 0x1b");
    expect_error_s("GET / HTTP/1.1\r\nX-A: b\x7f\r\n\r\n", 400, "control character 0x7f");
}

static void content_length_rules(void)
{
    CHECK_EQ_INT(parse_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", NULL), 47);
    CHECK_EQ_INT(R.content_length, 0);
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\ncontent-length:  0042 \r\n\r\n", NULL) > 0);
    CHECK_EQ_INT(R.content_length, 42);
    /* 2^62 = 4611686018427387904 is the largest accepted */
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387904\r\n\r\n", NULL) > 0);
    CHECK_EQ_INT(R.content_length, (int64_t)1 << 62);
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 4611686018427387905\r\n\r\n", 400, "larger than 2^62");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n", 400, "larger than 2^62");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 18446744073709551617\r\n\r\n", 400, "larger than 2^62");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, "Content-Length 'abc' is not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400, "not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", 400, "not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400, "not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400, "not a decimal");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400, "Content-Length is empty");
    /* repeats: identical allowed, different refused */
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\nX: y\r\nContent-Length: 7\r\n\r\n", NULL) > 0);
    CHECK_EQ_INT(R.content_length, 7);
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\nContent-Length: 007\r\n\r\n", NULL) > 0);
    CHECK_EQ_INT(R.content_length, 7);
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n", 400,
                   "Content-Length given twice with different values (7 and 8)");
}

static void transfer_encoding_rules(void)
{
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", NULL) > 0);
    CHECK(R.chunked);
    CHECK_EQ_INT(R.content_length, -1);
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding:  ChUnKeD \r\n\r\n", NULL) > 0);
    CHECK(R.chunked);
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "Transfer-Encoding 'gzip' is not supported");
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not supported");
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501, "not supported");
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
                   "given 2 times");
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n", 501, "not supported");
    expect_error_s("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                   "both Content-Length and Transfer-Encoding");
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400,
                   "both Content-Length and Transfer-Encoding");
    expect_error_s("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "Transfer-Encoding in an HTTP/1.0");
}

static void keep_alive_rules(void)
{
    struct {
        const char *version, *connection;
        bool keep_alive;
    } cases[] = {
        {"1.1", NULL, true},
        {"1.1", "close", false},
        {"1.1", "CLOSE", false},
        {"1.1", "keep-alive", true},
        {"1.1", "Upgrade, close", false},
        {"1.1", " foo ,close , bar", false},
        {"1.1", "closed", true},
        {"1.1", "keep-alive, close", false},
        {"1.0", NULL, false},
        {"1.0", "keep-alive", true},
        {"1.0", "Keep-Alive", true},
        {"1.0", "Upgrade,\tKEEP-ALIVE", true},
        {"1.0", "keep-alive, close", false},
        {"1.0", "keep-alives", false},
        {"1.0", "close", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[256];
        if (cases[i].connection)
            snprintf(s, sizeof s, "GET / HTTP/%s\r\nHost: h\r\nConnection: %s\r\n\r\n", cases[i].version, cases[i].connection);
        else
            snprintf(s, sizeof s, "GET / HTTP/%s\r\nHost: h\r\n\r\n", cases[i].version);
        CHECK_EQ_INT(parse_s(s, NULL), (long)strlen(s));
        CHECK_MSG(R.keep_alive == cases[i].keep_alive, "HTTP/%s Connection: %s", cases[i].version,
                  cases[i].connection ? cases[i].connection : "(none)");
    }
    /* tokens from several Connection fields are all seen */
    CHECK(parse_s("GET / HTTP/1.0\r\nConnection: upgrade\r\nConnection: keep-alive\r\n\r\n", NULL) > 0);
    CHECK(R.keep_alive);
    CHECK(parse_s("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", NULL) > 0);
    CHECK(!R.keep_alive);
}

static void expect_rules(void)
{
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", NULL) > 0);
    CHECK(R.expect_continue);
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\nExpect:  100-Continue \r\n\r\n", NULL) > 0);
    CHECK(R.expect_continue);
    CHECK(parse_s("POST / HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(!R.expect_continue);
    /* RFC 9110 10.1.1: an HTTP/1.0 request's expectation is ignored */
    CHECK(parse_s("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", NULL) > 0);
    CHECK(!R.expect_continue);
    CHECK(parse_s("POST / HTTP/1.0\r\nExpect: teapot\r\n\r\n", NULL) > 0);
    expect_error_s("POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", 417, "Expect '200-ok' is not supported");
    expect_error_s("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, foo\r\n\r\n", 417, "not supported");
}

/* A request line of exactly n bytes, CRLF included, as "GET /aaa... HTTP/1.0\r\n" (1.0: no Host needed). */
static size_t request_line_of(char *out, size_t n)
{
    size_t fixed = strlen("GET / HTTP/1.0\r\n");
    memcpy(out, "GET /", 5);
    memset(out + 5, 'a', n - fixed);
    memcpy(out + 5 + (n - fixed), " HTTP/1.0\r\n", 11);
    return n;
}

static void request_line_limit(void)
{
    static char s[20000];
    hearth_http_limits lim;
    hearth_http_limits_default(&lim);
    lim.max_request_line = 64;
    size_t n = request_line_of(s, 64);
    memcpy(s + n, "\r\n", 3);
    CHECK_EQ_INT(parse_s(s, &lim), 66);
    n = request_line_of(s, 65);
    memcpy(s + n, "\r\n", 3);
    expect_error(s, n + 2, &lim, 431, "request line longer than 64 bytes");
    /* no waiting for the line to end: 64 bytes without CRLF is already too many */
    hearth_err e = {0};
    int st = 0;
    CHECK_EQ_INT(hearth_http_parse_request(place(s, 64), 64, &lim, &R, &st, &e), HEARTH_ELIMIT);
    CHECK_EQ_INT(st, 431);
    CHECK_EQ_INT(hearth_http_parse_request(place(s, 63), 63, &lim, &R, &st, &e), HEARTH_EAGAIN);
    /* the defaults: 8192 */
    n = request_line_of(s, 8192);
    memcpy(s + n, "\r\n", 3);
    CHECK_EQ_INT(parse_s(s, NULL), 8194);
    n = request_line_of(s, 8193);
    memcpy(s + n, "\r\n", 3);
    expect_error(s, n + 2, NULL, 431, "request line longer than 8192 bytes");
}

/* A head of exactly n bytes: an HTTP/1.0 request line, one long header, a blank line. */
static size_t head_of(char *out, size_t n)
{
    const char *start = "GET / HTTP/1.0\r\nX-Pad: ";
    size_t fixed = strlen(start) + 4;
    memcpy(out, start, strlen(start));
    memset(out + strlen(start), 'p', n - fixed);
    memcpy(out + n - 4, "\r\n\r\n", 5);
    return n;
}

static void head_limit(void)
{
    static char s[70000];
    hearth_http_limits lim;
    hearth_http_limits_default(&lim);
    lim.max_header_bytes = 200;
    CHECK_EQ_INT(parse_n(s, head_of(s, 200), &lim), 200);
    CHECK_EQ_INT(R.headers[0].value_len, 200 - 27);
    expect_error(s, head_of(s, 201), &lim, 431, "request head longer than 200 bytes");
    /* partial: 200 bytes that do not finish the head already exceed it */
    int st = 0;
    hearth_err e = {0};
    head_of(s, 300);
    CHECK_EQ_INT(hearth_http_parse_request(place(s, 200), 200, &lim, &R, &st, &e), HEARTH_ELIMIT);
    CHECK_EQ_INT(st, 431);
    CHECK_EQ_INT(hearth_http_parse_request(place(s, 199), 199, &lim, &R, &st, &e), HEARTH_EAGAIN);
    /* a pipelined request after a head at the limit does not count against it */
    size_t n = head_of(s, 200);
    memcpy(s + n, "GET / HTTP/1.1\r\n\r\n", 19);
    CHECK_EQ_INT(parse_s(s, &lim), 200);
    /* the request line counts towards the head too */
    lim.max_header_bytes = 40;
    n = request_line_of(s, 39);
    memcpy(s + n, "\r\n", 3);
    expect_error(s, n + 2, &lim, 431, "request head longer than 40 bytes");
    /* the defaults: 65536 */
    CHECK_EQ_INT(parse_n(s, head_of(s, 65536), NULL), 65536);
    expect_error(s, head_of(s, 65537), NULL, 431, "request head longer than 65536 bytes");
}

static void header_count_limit(void)
{
    static char s[4096];
    hearth_http_limits lim;
    hearth_http_limits_default(&lim);
    lim.max_headers = 4;
    build_head(s, sizeof s, 4);
    CHECK_EQ_INT(parse_s(s, &lim), (long)strlen(s));
    CHECK_EQ_INT(R.n_headers, 4);
    build_head(s, sizeof s, 5);
    expect_error(s, strlen(s), &lim, 431, "more than 4 header fields");
    lim.max_headers = 0;
    CHECK(parse_s("GET / HTTP/1.0\r\n\r\n", &lim) > 0);
    expect_error("GET / HTTP/1.1\r\nA: b\r\n\r\n", 24, &lim, 431, "more than 0 header fields");
}

/* RFC 9112 3.2: HTTP/1.1 needs exactly one Host; any version may not send two. */
static void host_rules(void)
{
    CHECK(parse_s("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", NULL) > 0);
    CHECK(R.host && span_is(R.host->value, R.host->value_len, "example.com:8080"));
    CHECK(parse_s("GET / HTTP/1.1\r\nhOsT: [::1]:80\r\n\r\n", NULL) > 0);
    CHECK(parse_s("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", NULL) > 0);
    CHECK(parse_s("GET / HTTP/1.1\r\nHost:\r\n\r\n", NULL) > 0); /* empty: a URI without authority */
    CHECK(R.host && R.host->value_len == 0);
    CHECK(parse_s("GET / HTTP/1.0\r\n\r\n", NULL) > 0); /* 1.0 needs none */
    CHECK(R.host == NULL);
    expect_error_s("GET / HTTP/1.1\r\n\r\n", 400, "no Host field");
    expect_error_s("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400, "no Host field");
    expect_error_s("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "Host given 2 times");
    expect_error_s("GET / HTTP/1.1\r\nHost: a\r\nX: y\r\nhost: b\r\n\r\n", 400, "Host given 2 times");
    expect_error_s("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host given 2 times");
    expect_error_s("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "Host 'a b' is not a host[:port]");
    expect_error_s("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "is not a host[:port]");
    expect_error_s("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400, "is not a host[:port]");
    /* framing errors still win: they say what broke the stream */
    expect_error_s("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not supported");
}

/* The target as the router sees it: origin-form split at '?', absolute-form by its path. */
static void target_forms(void)
{
    CHECK(parse_s("GET /a/b?x=1&y HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/a/b"));
    CHECK(span_is(R.query, R.query_len, "x=1&y"));
    CHECK(R.authority == NULL);
    CHECK(parse_s("GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/a"));
    CHECK(R.query != NULL && R.query_len == 0);
    CHECK(parse_s("GET /health HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(R.query != NULL && R.query_len == 0);

    CHECK(parse_s("GET http://example.com:8080/health?full=1 HTTP/1.1\r\nHost: other\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.target, R.target_len, "http://example.com:8080/health?full=1"));
    CHECK(span_is(R.authority, R.authority_len, "example.com:8080"));
    CHECK(span_is(R.path, R.path_len, "/health"));
    CHECK(span_is(R.query, R.query_len, "full=1"));
    CHECK(parse_s("GET HTTPS://h/v1/models HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/v1/models"));
    CHECK(parse_s("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/"));
    CHECK(parse_s("GET http://h?q=2 HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/"));
    CHECK(span_is(R.query, R.query_len, "q=2"));
    /* a 1.0 absolute-form request needs no Host either */
    CHECK(parse_s("GET http://h/x HTTP/1.0\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "/x"));
    /* asterisk-form and oddities stay whole for the router to refuse */
    CHECK(parse_s("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "*"));
    CHECK(parse_s("GET health HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0);
    CHECK(span_is(R.path, R.path_len, "health"));
    CHECK(parse_s("GET a:b HTTP/1.1\r\nHost: h\r\n\r\n", NULL) > 0); /* no "//": not absolute-form */
    CHECK(R.authority == NULL);
    expect_error_s("GET ftp://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "'ftp://h/x' is not an http or https URI");
    expect_error_s("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "has no host");
    expect_error_s("GET http://?x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "has no host");
}

/* ---- chunked ---- */

typedef struct {
    long rc;        /* total consumed, or the error */
    int status;
    bool done;
    hearth_err err;
    char body[4096];
    size_t body_len;
} decoded;

/* Decodes s[0..n) fed in pieces of `step` bytes (0: all at once), or, when
 * split > 0, in the two pieces [0, split) and [split, n); each piece placed
 * against the guard page. Stops at the first error or once done. */
static void decode(const char *s, size_t n, size_t max, size_t step, size_t split, decoded *d)
{
    hearth_http_chunked c;
    hearth_http_chunked_init(&c);
    hearth_buf out;
    hearth_buf_init(&out, max);
    memset(d, 0, sizeof *d);
    size_t off = 0;
    while (off < n || (n == 0 && off == 0)) {
        size_t piece = n - off;
        if (split)
            piece = off < split ? split - off : n - off;
        else if (step && step < piece)
            piece = step;
        long rc = hearth_http_chunked_decode(&c, place(s + off, piece), piece, &out, &d->done, &d->status, &d->err);
        if (rc < 0) {
            d->rc = rc;
            goto out;
        }
        off += (size_t)rc;
        if (d->done || n == 0)
            break;
        if ((size_t)rc != piece) {
            CHECK_MSG(0, "consumed %ld of %zu without being done", rc, piece);
            break;
        }
    }
    d->rc = (long)off;
out:
    d->body_len = out.len < sizeof d->body ? out.len : sizeof d->body;
    if (out.len)
        memcpy(d->body, out.data, d->body_len);
    hearth_buf_deinit(&out);
}

/* Decodes at once, byte by byte, in 3-byte pieces and split at every point:
 * all must agree with the expectation (want_body NULL: an error with status). */
static void expect_chunked(const char *s, size_t n, size_t max, const char *want_body, size_t want_consumed,
                           int want_status)
{
    decoded d;
    for (size_t mode = 0; mode < 3 + n; mode++) {
        size_t step = mode == 1 ? 1 : mode == 2 ? 3 : 0;
        size_t split = mode >= 3 ? mode - 3 : 0;
        decode(s, n, max, step, split, &d);
        if (want_body) {
            CHECK_MSG(d.rc == (long)want_consumed && d.done, "'%.40s' mode %zu: rc %ld done %d (%s)", s, mode, d.rc,
                      d.done, d.err.msg);
            CHECK_MSG(d.body_len == strlen(want_body) && memcmp(d.body, want_body, d.body_len) == 0,
                      "'%.40s' mode %zu: body '%.*s'", s, mode, (int)d.body_len, d.body);
        } else {
            CHECK_MSG(d.rc < 0 && d.status == want_status, "'%.40s' mode %zu: rc %ld status %d (%s)", s, mode, d.rc,
                      d.status, d.err.msg);
            CHECK(strstr(d.err.msg, "chunked body: ") == d.err.msg);
        }
    }
}

/* a whole encoded body, consumed to its end */
#define OK_CHUNKED(s, body) expect_chunked(s, sizeof(s) - 1, 1 << 20, body, sizeof(s) - 1, 0)
#define BAD_CHUNKED(s, status) expect_chunked(s, sizeof(s) - 1, 1 << 20, NULL, 0, status)

static void chunked_normal(void)
{
    OK_CHUNKED("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world");
    /* bytes after the body belong to the next request: not consumed */
    expect_chunked("5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n", 33, 1 << 20, "hello", 15, 0);
    OK_CHUNKED("0\r\n\r\n", "");
    /* hex in both cases, leading zeros */
    OK_CHUNKED("a\r\n0123456789\r\nA\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij");
    OK_CHUNKED("1F\r\n0123456789012345678901234567890\r\n1f\r\n0123456789012345678901234567890\r\n000\r\n\r\n",
               "01234567890123456789012345678900123456789012345678901234567890");
    OK_CHUNKED("00000000000000000000000000000003\r\nabc\r\n0\r\n\r\n", "abc");
    /* chunk data may hold anything, CRLF included */
    OK_CHUNKED("4\r\n\r\n\r\n\r\n0\r\n\r\n", "\r\n\r\n");
}

static void chunked_extensions_and_trailers(void)
{
    OK_CHUNKED("5;name=value\r\nhello\r\n0;last\r\n\r\n", "hello");
    OK_CHUNKED("5 ; a=\"q s\"\t;b\r\nhello\r\n0\r\n\r\n", "hello");
    OK_CHUNKED("5\t\r\nhello\r\n0\r\n\r\n", "hello");
    OK_CHUNKED("3\r\nabc\r\n0\r\nX-Checksum: 1234\r\nExpires:\r\n\r\n", "abc");
    OK_CHUNKED("3\r\nabc\r\n0\r\nX:\tv v\t\r\n\r\n", "abc");
}

static void chunked_malformed(void)
{
    BAD_CHUNKED("\r\n\r\n", 400);                      /* no size */
    BAD_CHUNKED("g\r\nabc\r\n0\r\n\r\n", 400);          /* not hex */
    BAD_CHUNKED("-5\r\nhello\r\n0\r\n\r\n", 400);
    BAD_CHUNKED("0x5\r\nhello\r\n0\r\n\r\n", 400);
    BAD_CHUNKED("5x\r\nhello\r\n0\r\n\r\n", 400);
    BAD_CHUNKED("5 5\r\nhello\r\n0\r\n\r\n", 400);     /* digits after whitespace */
    BAD_CHUNKED(" 5\r\nhello\r\n0\r\n\r\n", 400);
    BAD_CHUNKED("5\nhello\r\n0\r\n\r\n", 400);         /* bare LF */
    BAD_CHUNKED("5\rhello\r\n0\r\n\r\n", 400);         /* bare CR */
    BAD_CHUNKED("5;a\x01\r\nhello\r\n0\r\n\r\n", 400); /* control in an extension */
    BAD_CHUNKED("5\r\nhelloX\r\n0\r\n\r\n", 400);      /* missing CRLF after data */
    BAD_CHUNKED("5\r\nhello\rX0\r\n\r\n", 400);
    BAD_CHUNKED("5\r\nhello\n0\r\n\r\n", 400);
    BAD_CHUNKED("5\r\nhello0\r\n\r\n", 400);
    BAD_CHUNKED("0\r\n bad: x\r\n\r\n", 400);          /* obs-fold in trailers */
    BAD_CHUNKED("0\r\nNoColon\r\n\r\n", 400);
    BAD_CHUNKED("0\r\nA : b\r\n\r\n", 400);
    BAD_CHUNKED("0\r\nA: b\x7f\r\n\r\n", 400);
    BAD_CHUNKED("0\r\nA: b\n\r\n", 400);
    BAD_CHUNKED("0\r\n\rX", 400);
    BAD_CHUNKED("0\r\n\n", 400);
}

static void chunked_overflow_and_limits(void)
{
    /* 2^64 does not fit: 400, not a wrapped small size */
    BAD_CHUNKED("10000000000000000\r\nx\r\n0\r\n\r\n", 400);
    BAD_CHUNKED("100000000000000000000000000000001\r\nx\r\n0\r\n\r\n", 400);
    /* 2^64-1 fits in 64 bits but not in the body limit: 413 */
    BAD_CHUNKED("FFFFFFFFFFFFFFFF\r\nx\r\n0\r\n\r\n", 413);
    decoded d;
    const char *s = "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
    decode(s, strlen(s), 10, 0, 0, &d);
    CHECK_EQ_INT(d.rc, (long)strlen(s));
    CHECK(d.done);
    decode(s, strlen(s), 9, 1, 0, &d);
    CHECK_EQ_INT(d.rc, HEARTH_ELIMIT);
    CHECK_EQ_INT(d.status, 413);
    CHECK_EQ_INT(d.body_len, 5); /* refused at the second size line, before its data */
    expect_chunked("b\r\nhello world\r\n0\r\n\r\n", 21, 10, NULL, 0, 413);

    /* the size line is bounded at 4096 bytes, CRLF included */
    static char big[9000];
    memcpy(big, "5;", 2);
    memset(big + 2, 'e', 4092);
    memcpy(big + 4094, "\r\nhello\r\n0\r\n\r\n", 15);
    expect_chunked(big, strlen(big), 1 << 20, "hello", strlen(big), 0);
    memcpy(big, "5;", 2);
    memset(big + 2, 'e', 4093);
    memcpy(big + 4095, "\r\nhello\r\n0\r\n\r\n", 15);
    expect_chunked(big, strlen(big), 1 << 20, NULL, 0, 400);
    decode(big, strlen(big), 1 << 20, 0, 0, &d);
    CHECK(strstr(d.err.msg, "chunk size line longer than 4096 bytes") != NULL);

    /* the trailer section is bounded at 8192 bytes, final CRLF included:
     * "X: " + 8185 bytes + CRLF CRLF after "0\r\n" */
    memcpy(big, "0\r\nX: ", 6);
    memset(big + 6, 'v', 8185);
    memcpy(big + 6 + 8185, "\r\n\r\n", 5);
    CHECK_EQ_INT(strlen(big) - 3, 8192);
    decode(big, strlen(big), 1 << 20, 0, 0, &d);
    CHECK_EQ_INT(d.rc, (long)strlen(big));
    CHECK(d.done);
    memset(big + 6, 'v', 8186);
    memcpy(big + 6 + 8186, "\r\n\r\n", 5);
    decode(big, strlen(big), 1 << 20, 7, 0, &d);
    CHECK_EQ_INT(d.status, 400);
    CHECK(strstr(d.err.msg, "trailer section longer than 8192 bytes") != NULL);
}

static void chunked_after_done_and_error(void)
{
    hearth_http_chunked c;
    hearth_http_chunked_init(&c);
    hearth_buf out;
    hearth_buf_init(&out, 100);
    bool done = false;
    int st = 0;
    hearth_err e = {0};
    const char *s = "1\r\nx\r\n0\r\n\r\n";
    CHECK_EQ_INT(hearth_http_chunked_decode(&c, place(s, 11), 11, &out, &done, &st, &e), 11);
    CHECK(done);
    /* done: nothing more is consumed */
    CHECK_EQ_INT(hearth_http_chunked_decode(&c, place("1\r\n", 3), 3, &out, &done, &st, &e), 0);
    CHECK(done);
    CHECK_EQ_INT(out.len, 1);
    /* an error sticks */
    hearth_http_chunked_init(&c);
    CHECK(hearth_http_chunked_decode(&c, place("z", 1), 1, &out, &done, &st, &e) < 0);
    CHECK(!done);
    st = 0;
    CHECK(hearth_http_chunked_decode(&c, place("1\r\n", 3), 3, &out, &done, &st, &e) < 0);
    CHECK_EQ_INT(st, 400);
    hearth_buf_deinit(&out);
}

/* Round trip against an encoder written here: random bodies cut into random
 * chunks, sizes in random hex case, some with extensions and trailers, decoded
 * from random splits. */
static void chunked_random_round_trip(void)
{
    static char body[3000], enc[12000];
    uint64_t x = 0x9e3779b97f4a7c15ull;
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    for (int iter = 0; iter < 300; iter++) {
        size_t blen = RND() % sizeof body;
        for (size_t i = 0; i < blen; i++)
            body[i] = (char)RND();
        size_t e = 0, b = 0;
        while (b < blen) {
            size_t k = 1 + RND() % 700;
            if (k > blen - b)
                k = blen - b;
            char hex[32];
            int hn = snprintf(hex, sizeof hex, RND() & 1 ? "%zx" : "%zX", k);
            memcpy(enc + e, hex, (size_t)hn);
            e += (size_t)hn;
            if (RND() % 4 == 0)
                e += (size_t)sprintf(enc + e, ";ext=%d", (int)(RND() % 100));
            e += (size_t)sprintf(enc + e, "\r\n");
            memcpy(enc + e, body + b, k);
            e += k;
            b += k;
            e += (size_t)sprintf(enc + e, "\r\n");
        }
        e += (size_t)sprintf(enc + e, "0\r\n");
        if (RND() % 3 == 0)
            e += (size_t)sprintf(enc + e, "Trailer-%d: x\r\n", iter);
        e += (size_t)sprintf(enc + e, "\r\n");
        hearth_http_chunked c;
        hearth_http_chunked_init(&c);
        hearth_buf out;
        hearth_buf_init(&out, sizeof body);
        size_t off = 0;
        bool done = false;
        int st = 0;
        hearth_err err = {0};
        while (off < e && !done) {
            size_t piece = 1 + RND() % 64;
            if (piece > e - off)
                piece = e - off;
            long rc = hearth_http_chunked_decode(&c, place(enc + off, piece), piece, &out, &done, &st, &err);
            if (rc < 0) {
                CHECK_MSG(0, "iter %d: %s", iter, err.msg);
                break;
            }
            off += (size_t)rc;
        }
        CHECK_MSG(done && off == e, "iter %d: done %d at %zu of %zu", iter, done, off, e);
        CHECK_MSG(out.len == blen && (blen == 0 || memcmp(out.data, body, blen) == 0), "iter %d: body differs",
                  iter);
        hearth_buf_deinit(&out);
    }
#undef RND
}

/* Path segments as routes decode them: escapes, stray '%', NUL and overflow refused. */
static void percent_decoding(void)
{
    char out[16];
    CHECK_EQ_INT(hearth_http_percent_decode("face%2Fv2", 9, out, sizeof out), 7);
    CHECK_EQ_STR(out, "face/v2");
    CHECK_EQ_INT(hearth_http_percent_decode("a%zz%4", 6, out, sizeof out), 6); /* not escapes: kept */
    CHECK_EQ_STR(out, "a%zz%4");
    CHECK_EQ_INT(hearth_http_percent_decode("%41%62", 6, out, sizeof out), 2);
    CHECK_EQ_STR(out, "Ab");
    CHECK_EQ_INT(hearth_http_percent_decode("x%00y", 5, out, sizeof out), -1); /* would hold a NUL */
    CHECK_EQ_INT(hearth_http_percent_decode("0123456789abcdef", 16, out, sizeof out), -1); /* no room for the NUL */
    CHECK_EQ_INT(hearth_http_percent_decode("", 0, out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
}

int main(void)
{
    if (guard_setup() != 0) {
        fprintf(stderr, "cannot map the guard page\n");
        return 1;
    }
    RUN(simple_get);
    RUN(values_trimmed_of_ows);
    RUN(many_headers);
    RUN(pipelined_requests);
    RUN(request_line_errors);
    RUN(header_line_errors);
    RUN(content_length_rules);
    RUN(transfer_encoding_rules);
    RUN(keep_alive_rules);
    RUN(expect_rules);
    RUN(request_line_limit);
    RUN(head_limit);
    RUN(header_count_limit);
    RUN(host_rules);
    RUN(target_forms);
    RUN(chunked_normal);
    RUN(chunked_extensions_and_trailers);
    RUN(chunked_malformed);
    RUN(chunked_overflow_and_limits);
    RUN(chunked_after_done_and_error);
    RUN(chunked_random_round_trip);
    RUN(percent_decoding);
    munmap(g_map, GUARD_ROOM + g_page);
    TEST_EXIT();
}
