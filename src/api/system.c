/* system.c: the endpoints every hearth serves whatever its models:
 * GET /health (load-balancer probe: 503 while models load, then 200),
 * GET /metrics (Prometheus text format), GET /v1/models (OpenAI's list shape,
 * with hearth's own fields under "meta"). */
#include "api.h"
#include "models.h"
#include "respond.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>

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

static void models(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(doc, "data");
    for (int i = 0; i < api->n_models; i++) {
        const hearth_api_model *m = &api->models[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", m->name);
        cJSON_AddStringToObject(o, "object", "model");
        cJSON_AddNumberToObject(o, "created", (double)m->created);
        cJSON_AddStringToObject(o, "owned_by", "hearth");
        cJSON *meta = cJSON_AddObjectToObject(o, "meta");
        cJSON_AddStringToObject(meta, "family", m->family);
        cJSON_AddBoolToObject(meta, "demo", m->demo);
        cJSON_AddStringToObject(meta, "source", m->source);
        cJSON_AddItemToArray(data, o);
    }
    hearth_api_send_json(req, 200, doc);
    cJSON_Delete(doc);
}

int hearth_api_register_system(hearth_api *api, hearth_server *s)
{
    api->server = s;
    int rc = hearth_server_route_flags(s, "GET", "/health", health, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route_flags(s, "GET", "/metrics", metrics, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/v1/models", models, api);
    return rc;
}
