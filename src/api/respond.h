/* respond.h: answering a request with a JSON body its handler built, the
 * same way in every API file. Private to the api layer. */
#ifndef HEARTH_API_RESPOND_H
#define HEARTH_API_RESPOND_H

#include "net/server.h"

#include <cjson/cJSON.h>

/* Sends out (JSON text) with 200; when rc says it could not be built (its
 * bound, or memory), 413 "the <what> is too large to return" instead. */
void hearth_api_send_buf(hearth_request *req, const hearth_buf *out, int rc, const char *what);
/* Sends doc printed as status's body; 500 when it cannot be printed (NULL
 * doc included). doc stays the caller's. */
void hearth_api_send_json(hearth_request *req, int status, const cJSON *doc);

#endif
