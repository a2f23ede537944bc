/* access.c: who may call what: the API key (Bearer) and CORS.
 *
 * With --api-key every route not registered as public wants
 * "Authorization: Bearer <key>" and answers 401 otherwise; the key is
 * compared in constant time so response timing does not leak it. /health and
 * /metrics register as public so probes and scrapers need no secret. CORS is
 * on when the config names an origin (cors_origin; `hearth serve` gives "*"
 * unless --cors-origin names one or --no-cors turns it off, as llama-server
 * answers every origin by default): responses carry
 * Access-Control-Allow-Origin and OPTIONS preflights on known paths get 200
 * with the origin, methods and headers allowed, as llama-server answers them
 * (see answer_preflight).
 *
 * The headers a preflight may ask for: with the default (any origin) the
 * answer is llama-server's "Access-Control-Allow-Headers: *", byte for byte,
 * as its clients and its own test suite expect. That "*" covers every header
 * but Authorization (Fetch: a CORS non-wildcard request-header name), so a
 * browser client that sends an API key needs the server to name it: when
 * --cors-origin names one origin (an operator who set up a browser app),
 * the preflight's Access-Control-Request-Headers are allowed as asked (once
 * checked to be a list of header names), because clients send headers no
 * fixed list foresees: the official openai client asks for a dozen
 * x-stainless-* ones, and Authorization. The API key guards the request that
 * follows, not the preflight, which by the Fetch standard carries no
 * credentials: a preflight is never answered 401 (with a key set, one on an
 * unknown path is answered as a known one, so it reveals nothing either).
 * Rejected: a configured list of allowed headers (one more flag to keep in
 * step with every client release, for no protection: the key still decides);
 * listing the asked headers with the default origin too (browsers would
 * accept it, but llama-server's clients and tests read "*").
 *
 * Calls: reply.c (hearth_respond, for the 401 and the preflight's 200), the
 * HTTP parser. Called by conn.c (the check, on the loop thread) and io.c
 * (the CORS origin of a stream's head). */
#include "server_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool key_matches(const char *want, const char *got, size_t got_len)
{
    size_t n = strlen(want);
    unsigned char diff = (unsigned char)(n != got_len);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < got_len ? got[i] : 0);
    return diff == 0;
}

const char *hearth_access_cors(const hearth_conn *c) { return c->cors ? c->io->s->cfg.cors_origin : NULL; }

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Copies the comma-separated list of header names in v[0..n) to out as
 * "a, b", skipping empty elements. Returns false when an element is not a
 * token (RFC 9110 5.6.1, 5.6.2), when there is none, or when it does not fit. */
static bool token_list(const char *v, size_t n, char *out, size_t out_size)
{
    size_t k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t start = i;
        while (i < n && is_tchar((unsigned char)v[i]))
            i++;
        if (i == start)
            return i == n && k > 0; /* only separators left, or a non-token byte */
        size_t len = i - start;
        while (i < n && (v[i] == ' ' || v[i] == '\t'))
            i++;
        if (i < n && v[i] != ',')
            return false; /* "a b", "a;b" */
        if (k + len + 3 > out_size)
            return false;
        if (k) {
            memcpy(out + k, ", ", 2);
            k += 2;
        }
        memcpy(out + k, v + start, len);
        k += len;
        out[k] = 0;
    }
    return k > 0;
}

static void answer_preflight(hearth_request *req)
{
    hearth_server *s = req->c->io->s;
    const hearth_http_request *http = req->http;
    const char *allowed = s->cfg.cors_origin;
    const hearth_http_header *origin = hearth_http_find_header(http, "origin");
    bool origin_ok = strcmp(allowed, "*") == 0 ||
                     (origin && origin->value_len == strlen(allowed) && memcmp(origin->value, allowed, origin->value_len) == 0);
    const hearth_http_header *asked = hearth_http_find_header(http, "access-control-request-headers");
    char names[1024];
    bool any_origin = strcmp(allowed, "*") == 0;
    if (any_origin)
        strcpy(names, "*"); /* llama-server's (see the file's comment for what it leaves out) */
    else if (!origin_ok || !asked || !token_list(asked->value, asked->value_len, names, sizeof names))
        strcpy(names, "Authorization, Content-Type");
    /* llama-server's answer (its clients and its own tests read these): 200,
     * the origin asked about allowed by name (any, by default), credentials
     * allowed, GET and POST. An origin that does not fit the buffer is
     * answered with the configured value. */
    char origin_v[512];
    const char *allow = allowed;
    if (any_origin && origin && origin->value_len > 0 && origin->value_len < sizeof origin_v) {
        memcpy(origin_v, origin->value, origin->value_len);
        origin_v[origin->value_len] = 0;
        allow = origin_v;
    }
    char headers[sizeof names + sizeof origin_v + 256];
    snprintf(headers, sizeof headers,
             "Access-Control-Allow-Origin: %s\r\n"
             "Access-Control-Allow-Credentials: true\r\n"
             "Access-Control-Allow-Methods: GET, POST\r\n"
             "Access-Control-Allow-Headers: %s\r\n"
             "Access-Control-Max-Age: 600\r\n"
             "Vary: Origin, Access-Control-Request-Headers\r\n",
             allow, names);
    req->c->cors = false; /* the allow-origin line is the one above */
    hearth_response res = {200, NULL, headers, NULL, 0};
    hearth_respond(req, &res);
}

bool hearth_access_check(hearth_request *req, int route, bool path_known)
{
    hearth_server *s = req->c->io->s;
    const hearth_http_request *http = req->http;
    bool options = http->method_len == 7 && memcmp(http->method, "OPTIONS", 7) == 0;
    bool preflight = options && hearth_http_find_header(http, "access-control-request-method") != NULL;
    if (options && s->cfg.cors_origin && (path_known || (preflight && s->cfg.api_key))) {
        answer_preflight(req);
        return false;
    }
    if (preflight && s->cfg.api_key) {
        /* CORS is off: nothing to allow, but no 401 for a request that cannot carry a key */
        hearth_response res = {204, NULL, NULL, NULL, 0};
        hearth_respond(req, &res);
        return false;
    }
    if (!s->cfg.api_key || (route >= 0 && (s->routes[route].flags & HEARTH_ROUTE_PUBLIC)))
        return true;
    const hearth_http_header *h = hearth_http_find_header(http, "authorization");
    if (h && h->value_len > 7 && strncasecmp(h->value, "Bearer ", 7) == 0) {
        const char *k = h->value + 7;
        size_t n = h->value_len - 7;
        while (n && *k == ' ') {
            k++;
            n--;
        }
        if (key_matches(s->cfg.api_key, k, n))
            return true;
    }
    hearth_respond_error_headers(req, 401, "authentication_error", "WWW-Authenticate: Bearer\r\n", "%s",
                                 h ? "invalid API key" : "this server wants an API key: send \"Authorization: Bearer <key>\"");
    return false;
}
