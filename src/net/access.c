/* access.c: who may call what: the API key (Bearer) and CORS.
 *
 * With --api-key every route not registered as public wants
 * "Authorization: Bearer <key>" and answers 401 otherwise; the key is
 * compared in constant time so response timing does not leak it. /health and
 * /metrics register as public so probes and scrapers need no secret. CORS is
 * off unless --cors-origin names the origin browsers may call from: then
 * responses carry Access-Control-Allow-Origin and OPTIONS preflights on known
 * paths get 204 with the allowed methods and headers. */
#include "server_int.h"

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

bool hearth_access_check(hearth_request *req, int route, bool path_known)
{
    hearth_server *s = req->c->io->s;
    const hearth_http_request *http = req->http;
    bool options = http->method_len == 7 && memcmp(http->method, "OPTIONS", 7) == 0;
    if (options && s->cfg.cors_origin && path_known) {
        static const char pre[] = "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
                                  "Access-Control-Allow-Headers: Authorization, Content-Type\r\n"
                                  "Access-Control-Max-Age: 600\r\n";
        hearth_response res = {204, NULL, pre, NULL, 0};
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
