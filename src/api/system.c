/* system.c: the endpoints every hearth serves whatever its models:
 * GET /health (load-balancer probe: 503 while models load, then 200; also at
 * GET /ping, the name TEI answers it under for SageMaker),
 * GET /metrics (Prometheus text format), GET /v1/models (OpenAI's list shape,
 * with hearth's own fields under "meta"; also at /models, as llama-server
 * lists it; both public under --api-key, as llama-server's) and GET
 * /v1/models/{id} (one model
 * as the list shows it: the openai clients' models.retrieve). The id is the
 * rest of the path, percent-decoded, since clients encode ids that hold a
 * '/' ("org/model" arrives as "org%2Fmodel"). */
#include "api.h"
#include "models.h"
#include "respond.h"

#include "net/http_parse.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <string.h>

static void health(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    static const char ok[] = "{\"status\":\"ok\"}";
    static const char loading[] = "{\"status\":\"loading\",\"error\":{\"code\":503,\"type\":\"unavailable_error\","
                                  "\"message\":\"models are loading\"}}";
    bool ready = atomic_load(&api->ready);
    hearth_response res = {ready ? 200 : 503, "application/json", NULL, ready ? ok : loading,
                           ready ? sizeof ok - 1 : sizeof loading - 1};
    hearth_respond(req, &res);
}

static void metrics(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    hearth_buf out;
    hearth_buf_init(&out, (size_t)8 << 20);
    if (hearth_server_metrics(api->server, &out) != 0 || hearth_api_metrics(api, &out) != 0) {
        hearth_buf_deinit(&out);
        hearth_respond_error(req, 500, "server_error", "metrics did not fit in 8 MiB");
        return;
    }
    hearth_response res = {200, "text/plain; version=0.0.4; charset=utf-8", NULL, out.data, out.len};
    hearth_respond(req, &res);
    hearth_buf_deinit(&out);
}

/* One model object, the same in the list and alone. */
static cJSON *model_json(const hearth_api_model *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", m->name);
    cJSON_AddStringToObject(o, "object", "model");
    cJSON_AddNumberToObject(o, "created", (double)m->created);
    cJSON_AddStringToObject(o, "owned_by", "hearth");
    cJSON *meta = cJSON_AddObjectToObject(o, "meta");
    cJSON_AddStringToObject(meta, "family", m->family);
    cJSON_AddBoolToObject(meta, "demo", m->demo);
    cJSON_AddStringToObject(meta, "source", m->source);
    return o;
}

static void models(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(doc, "data");
    for (int i = 0; i < api->n_models; i++)
        cJSON_AddItemToArray(data, model_json(&api->models[i]));
    hearth_api_send_json(req, 200, doc);
    cJSON_Delete(doc);
}

static void model_one(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    size_t n;
    const char *rest = hearth_request_rest(req, &n);
    char id[sizeof api->models[0].name];
    if (hearth_http_percent_decode(rest, n, id, sizeof id) >= 0) {
        for (int i = 0; i < api->n_models; i++) {
            if (strcmp(api->models[i].name, id) == 0) {
                cJSON *doc = model_json(&api->models[i]);
                hearth_api_send_json(req, 200, doc);
                cJSON_Delete(doc);
                return;
            }
        }
    }
    hearth_respond_error(req, 404, "not_found_error", "the model '%.*s' does not exist (see /v1/models)",
                         (int)(n > 200 ? 200 : n), rest);
}

int hearth_api_register_system(hearth_api *api, hearth_server *s)
{
    api->server = s;
    int rc = hearth_server_route_flags(s, "GET", "/health", health, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route_flags(s, "GET", "/ping", health, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route_flags(s, "GET", "/metrics", metrics, api, HEARTH_ROUTE_PUBLIC);
    /* public, as llama-server has them: clients list the models before they
     * send a key (the names are all that shows; every API that uses a model
     * still wants the key) */
    if (!rc)
        rc = hearth_server_route_flags(s, "GET", "/v1/models", models, api, HEARTH_ROUTE_PUBLIC);
    if (!rc) /* llama-server's un-versioned name for the same list */
        rc = hearth_server_route_flags(s, "GET", "/models", models, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/v1/models/{id}", model_one, api);
    return rc;
}
