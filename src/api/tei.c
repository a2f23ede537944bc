/* tei.c: Text Embeddings Inference's endpoints around /embed that describe
 * and serve the tokenizer: GET /info (the model and the batching limits, in
 * TEI's Info shape), POST /tokenize (shared with llama-server's form) and
 * POST /decode ({"ids": [int] | [[int]], "skip_special_tokens": true} ->
 * [str], as TEI's tokenizer decodes). TEI's GET /ping is /health's handler,
 * registered in system.c.
 *
 * /info, /tokenize and /decode answer for the model /embed uses (the first
 * embedding model), as TEI serves one model per process, and run where the
 * server runs handlers: on the loop thread for a small body, on a handler
 * thread for a big one (server.h): /info formats a few fields, /tokenize and
 * /decode take a few microseconds per sentence or per id, bounded by the body
 * limit and --max-client-batch. They use embed.c's helpers (models.h); serve registers
 * them beside embed.c's routes, so embed.c does not call back into this
 * file. /embed's root aliases (POST /, /invocations) are embed.c's, beside
 * /embed. */
#include "json_body.h"
#include "models.h"
#include "respond.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

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
    if (m->rerank) { /* TEI's ClassifierModel: a reranker has the one label */
        cJSON *rr = cJSON_AddObjectToObject(type, "reranker");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(rr, "id2label"), "0", "LABEL_0");
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(rr, "label2id"), "LABEL_0", 0);
    } else {
        cJSON *emb = cJSON_AddObjectToObject(type, "embedding");
        cJSON_AddStringToObject(emb, "pooling", pooling_name(hearth_bert_pooling(m->bert)));
    }
    cJSON_AddNumberToObject(doc, "max_concurrent_requests", o->max_concurrent);
    cJSON_AddNumberToObject(doc, "max_input_length", (double)hearth_bert_max_tokens(m->bert));
    cJSON_AddNumberToObject(doc, "max_batch_tokens", (double)o->max_batch_tokens);
    cJSON_AddNullToObject(doc, "max_batch_requests");
    cJSON_AddNumberToObject(doc, "max_client_batch_size", o->max_client_batch);
    cJSON_AddFalseToObject(doc, "auto_truncate"); /* "truncate" defaults to false */
    /* hearth tokenizes on its I/O threads (small bodies) and handler threads (big ones) */
    cJSON_AddNumberToObject(doc, "tokenization_workers", (sc && sc->threads > 0 ? sc->threads : 1) + (sc ? sc->handler_threads : 0));
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
    hearth_embed_parsed p;
    if (!hearth_api_embed_parse_or_respond(req, api, HEARTH_EMBED_TEI_DECODE, &p))
        return;
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

/* TEI: {"inputs": str | [str], "add_special_tokens": true, "prompt_name"} ->
 * [[{"id","text","special","start","stop"}]], every token, past the model's
 * limit too (as TEI: clients count tokens with it), as TEI answers: a special
 * token has its vocabulary text and null offsets; any other has the input's
 * bytes [start, stop) it came from, and text is that slice of the input
 * (not the vocabulary's lowercased, "##"-prefixed piece). */
static void tei_tokenize(hearth_request *req, hearth_api *api)
{
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, NULL);
    hearth_embed_parsed p;
    if (!m || !hearth_api_embed_parse_or_respond(req, api, HEARTH_EMBED_TEI_TOKENIZE, &p))
        return;
    const char *prompt;
    size_t plen;
    if (!hearth_api_embed_prompt_or_respond(req, m, p.prompt_name, &prompt, &plen)) {
        hearth_embed_parsed_free(&p);
        return;
    }
    const hearth_vocab *v = hearth_bert_vocab(m->bert);
    hearth_buf out;
    hearth_buf_init(&out, (size_t)256 << 20);
    int rc = hearth_buf_append(&out, "[", 1);
    for (int i = 0; i < p.n && !rc; i++) {
        hearth_ids ids;
        hearth_ids_init(&ids, (size_t)1 << 24);
        hearth_err err = {0};
        /* with a prompt, offsets and texts are of the prompt + input, as TEI gives them */
        size_t len = p.inputs[i].text_len;
        char *joined = prompt ? hearth_api_with_prompt(prompt, plen, p.inputs[i].text, len, &len) : NULL;
        const char *text = prompt ? joined : p.inputs[i].text;
        hearth_tok_span *spans = malloc((len + 2) * sizeof *spans);
        /* the answer's status for this input: 0, or 503 / 400 and the request ends */
        int status = 503;
        if (spans && text)
            status = hearth_bert_tokenize_spans(m->bert, text, len, HEARTH_BERT_NO_LIMIT, &ids, spans, &err) ? 400 : 0;
        if (status) {
            hearth_ids_deinit(&ids);
            free(spans);
            free(joined);
            if (status == 503)
                hearth_respond_error(req, 503, "overloaded", "out of memory for the offsets of inputs[%d]", i);
            else
                hearth_respond_error(req, 400, "invalid_request_error", "inputs[%d]: %s", i, err.msg);
            goto out;
        }
        rc = hearth_buf_appends(&out, i ? ",[" : "[");
        bool first = true;
        for (size_t k = 0; k < ids.n && !rc; k++) {
            int32_t id = ids.v[k];
            bool special = k == 0 || k + 1 == ids.n; /* the [CLS] and [SEP] hearth_bert_tokenize_spans adds */
            if (special && !p.add_special)
                continue;
            rc = hearth_buf_printf(&out, "%s{\"id\":%d,\"text\":", first ? "" : ",", id);
            if (!rc && special)
                rc = hearth_json_quote(&out, v->text[id], v->len[id]);
            else if (!rc)
                rc = hearth_json_quote(&out, text + spans[k].start, spans[k].stop - spans[k].start);
            if (!rc && special)
                rc = hearth_buf_appends(&out, ",\"special\":true,\"start\":null,\"stop\":null}");
            else if (!rc)
                rc = hearth_buf_printf(&out, ",\"special\":false,\"start\":%u,\"stop\":%u}", spans[k].start,
                                       spans[k].stop);
            first = false;
        }
        if (!rc)
            rc = hearth_buf_append(&out, "]", 1);
        hearth_ids_deinit(&ids);
        free(spans);
        free(joined);
    }
    if (!rc)
        rc = hearth_buf_append(&out, "]", 1);
    hearth_api_send_buf(req, &out, rc, "token list");
out:
    hearth_buf_deinit(&out);
    hearth_embed_parsed_free(&p);
}

/* /tokenize is shared: TEI's body has "inputs", llama-server's has "content". */
static void tokenize(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char msg[512];
    cJSON *doc = hearth_json_body_parse(body, len, msg, sizeof msg);
    if (!doc) {
        hearth_respond_error(req, 400, "invalid_request_error", "%s", msg);
        return;
    }
    bool llama = cJSON_GetObjectItemCaseSensitive(doc, "content") != NULL;
    if (llama)
        hearth_api_llama_tokenize(req, api, doc);
    cJSON_Delete(doc);
    if (!llama)
        tei_tokenize(req, api);
}

int hearth_api_register_tei(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "GET", "/info", info, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/tokenize", tokenize, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/decode", decode, api);
    return rc;
}
