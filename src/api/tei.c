/* tei.c: Text Embeddings Inference's endpoints around /embed that describe
 * and serve the tokenizer: GET /info (the model and the batching limits, in
 * TEI's Info shape) and POST /decode ({"ids": [int] | [[int]],
 * "skip_special_tokens": true} -> [str], as TEI's tokenizer decodes).
 *
 * Both answer for the model /embed uses (the first embedding model), as TEI
 * serves one model per process. Both run on the loop thread: /info formats
 * a few fields, /decode a few microseconds per id, bounded by the body
 * limit and --max-client-batch, like /tokenize. */
#include "models.h"
#include "embed_parse.h"
#include "respond.h"

#include <cjson/cJSON.h>

static const char *dtype_name(enum hearth_bert_dtype d)
{
    switch (d) {
    case HEARTH_BERT_BF16:
        return "bfloat16";
    case HEARTH_BERT_INT8:
        return "int8";
    default:
        return "float32";
    }
}

static const char *pooling_name(hearth_pooling p)
{
    switch (p) {
    case HEARTH_POOL_CLS:
        return "cls";
    case HEARTH_POOL_LAST:
        return "last_token"; /* TEI's name for it */
    default:
        return "mean";
    }
}

/* GET /info -> TEI's Info: model_id, model_sha, model_dtype, model_type,
 * the router's limits, version. */
static void info(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, NULL);
    if (!m)
        return;
    const hearth_embed_opts *o = &api->state->embed;
    const hearth_server_config *sc = hearth_server_get_config(api->server);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "model_id", m->info->name);
    cJSON_AddNullToObject(doc, "model_sha");
    cJSON_AddStringToObject(doc, "model_dtype", dtype_name(o->dtype));
    cJSON *type = cJSON_AddObjectToObject(doc, "model_type");
    cJSON *emb = cJSON_AddObjectToObject(type, "embedding");
    cJSON_AddStringToObject(emb, "pooling", pooling_name(hearth_bert_pooling(m->bert)));
    cJSON_AddNumberToObject(doc, "max_concurrent_requests", o->max_concurrent);
    cJSON_AddNumberToObject(doc, "max_input_length", (double)hearth_bert_max_tokens(m->bert));
    cJSON_AddNumberToObject(doc, "max_batch_tokens", (double)o->max_batch_tokens);
    cJSON_AddNullToObject(doc, "max_batch_requests");
    cJSON_AddNumberToObject(doc, "max_client_batch_size", o->max_client_batch);
    cJSON_AddFalseToObject(doc, "auto_truncate"); /* "truncate" defaults to false */
    /* hearth tokenizes on its I/O threads */
    cJSON_AddNumberToObject(doc, "tokenization_workers", sc && sc->threads > 0 ? sc->threads : 1);
    cJSON_AddStringToObject(doc, "version", HEARTH_VERSION);
    cJSON_AddNullToObject(doc, "sha");
    cJSON_AddNullToObject(doc, "docker_label");
    hearth_api_send_json(req, 200, doc);
    cJSON_Delete(doc);
}

/* POST /decode -> ["text", ...], one per id list. */
static void decode(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, NULL);
    if (!m)
        return;
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char msg[512];
    hearth_embed_parsed p;
    int st = hearth_embed_parse(body, len, HEARTH_EMBED_TEI_DECODE, api->state->embed.max_client_batch, &p, msg,
                                sizeof msg);
    if (st) {
        hearth_respond_error(req, st, st == 413 ? "request_too_large" : "invalid_request_error", "%s", msg);
        return;
    }
    hearth_buf out, text;
    hearth_buf_init(&out, (size_t)256 << 20);
    hearth_buf_init(&text, (size_t)64 << 20);
    int rc = hearth_buf_append(&out, "[", 1);
    for (int i = 0; i < p.n && !rc; i++) {
        hearth_err err = {0};
        hearth_buf_reset(&text, (size_t)1 << 20);
        rc = hearth_bert_decode(m->bert, p.inputs[i].ids, (size_t)p.inputs[i].n_ids, p.skip_special, &text, &err);
        if (rc == HEARTH_EINVAL) {
            hearth_respond_error(req, 400, "invalid_request_error", "ids[%d]: %s", i, err.msg);
            goto out;
        }
        if (!rc && i)
            rc = hearth_buf_append(&out, ",", 1);
        if (!rc)
            rc = hearth_json_quote(&out, text.data ? text.data : "", text.len);
    }
    if (!rc)
        rc = hearth_buf_append(&out, "]", 1);
    hearth_api_send_buf(req, &out, rc, "decoded text");
out:
    hearth_buf_deinit(&text);
    hearth_buf_deinit(&out);
    hearth_embed_parsed_free(&p);
}

int hearth_api_register_tei(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "GET", "/info", info, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/decode", decode, api);
    return rc;
}
