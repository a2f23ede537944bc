/* respond.c: see respond.h. */
#include "respond.h"

#include <stdlib.h>
#include <string.h>

void hearth_api_send_buf(hearth_request *req, const hearth_buf *out, int rc, const char *what)
{
    if (rc) {
        hearth_respond_error(req, 413, "request_too_large", "the %s is too large to return", what);
        return;
    }
    hearth_response res = {200, "application/json", NULL, out->data, out->len};
    hearth_respond(req, &res);
}

void hearth_api_send_json(hearth_request *req, int status, const cJSON *doc)
{
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    if (!text) {
        hearth_respond_error(req, 500, "server_error", "out of memory formatting the response");
        return;
    }
    hearth_response res = {status, "application/json", NULL, text, strlen(text)};
    hearth_respond(req, &res);
    free(text);
}
