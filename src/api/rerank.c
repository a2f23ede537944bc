/* rerank.c: scoring (query, document) pairs with a cross-encoder, in the two
 * shapes clients send to POST /rerank:
 *
 *   llama-server / Jina (also at /reranking, /v1/rerank, /v1/reranking):
 *     {"query": str, "documents": [str], "top_n"?: int, "model"?: str,
 *      "return_documents"?: bool}
 *     -> {"model", "object": "list", "usage": {"prompt_tokens", "total_tokens"},
 *         "results": [{"index", "relevance_score"[, "document": {"text"}]}]}
 *     relevance_score is the classifier's raw logit, as llama-server's.
 *   TEI (a body with "texts" instead of "documents", as llama-server tells
 *   them apart):
 *     {"query": str, "texts": [str], "raw_scores"?: bool, "return_text"?: bool,
 *      "truncate"?, "truncation_direction"?}
 *     -> [{"index", "score"[, "text"]}], score = sigmoid(logit) unless
 *     raw_scores, as TEI's.
 * Both are sorted by score, highest first (ties by index); top_n keeps the
 * first n. Pairs are tokenized here ([CLS] q [SEP] d [SEP], the document cut
 * first when too long: models/bert.h) and go through the model's embedding
 * queue as one job, so they batch with each other and with other requests
 * exactly as /embed's inputs do; the reranker's queue computes one float
 * per sequence.
 *
 * Deliberate differences: llama-server (c392e50) returns results unsorted
 * and ignores top_n, and feeds every token with token type 0; TEI refuses
 * an over-long pair unless "truncate" is true, where hearth always cuts the
 * document (only a query that alone does not fit is refused, 413). At most
 * RERANK_MAX_DOCS documents a request (TEI's default batch bound is lower,
 * its largest configurable is about this): past it 413.
 *
 * Rejected: one job per document (each would wait its turn in the queue;
 * one job is one batch when the model is idle). */
#include "models.h"
#include "json_body.h"

#include "base/numfmt.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RERANK_MAX_DOCS 1000
#define RERANK_RESPONSE_MAX ((size_t)1 << 30)

typedef struct rerank_req {
    hearth_embed_job job;
    hearth_server *server;
    hearth_reply reply;
    _Atomic int refs;
    bool tei, raw_scores, return_text;
    int top_n;
    int n;
    int32_t **ids;
    int32_t *lens;
    char **docs;       /* copies, only when the answer carries them */
    float *scores;     /* (n) logits */
    size_t tokens;
    char model[128];
} rerank_req;

static void req_free(rerank_req *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->ids[i]);
        if (r->docs)
            free(r->docs[i]);
    }
    free(r->ids);
    free(r->lens);
    free(r->docs);
    free(r->scores);
    free(r);
}

static void req_unref(rerank_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        req_free(r);
}

static void on_release(void *arg, bool cancelled)
{
    rerank_req *r = arg;
    if (cancelled)
        atomic_store(&r->job.cancelled, 1);
    req_unref(r);
}

typedef struct ranked {
    int index;
    float score;
} ranked;

static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->index - y->index;
}

static int append_f32(hearth_buf *out, float v)
{
    char s[HEARTH_FMT_F32_MAX + 1];
    return hearth_buf_append(out, s, (size_t)hearth_fmt_f32(s, v)); /* "0" for NaN: JSON has none */
}

static int format(const rerank_req *r, const ranked *rk, int n, hearth_buf *out)
{
    int rc = hearth_buf_append(out, r->tei ? "[" : "{\"model\":", r->tei ? 1 : 9);
    if (!r->tei && !rc)
        rc = hearth_json_quote(out, r->model, strlen(r->model));
    if (!r->tei && !rc)
        rc = hearth_buf_printf(out, ",\"object\":\"list\",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu},\"results\":[",
                               r->tokens, r->tokens);
    for (int k = 0; k < n && !rc; k++) {
        int i = rk[k].index;
        float s = rk[k].score;
        if (r->tei && !r->raw_scores)
            s = (float)(1.0 / (1.0 + exp(-(double)s)));
        rc = hearth_buf_printf(out, "%s{\"index\":%d,\"%s\":", k ? "," : "", i, r->tei ? "score" : "relevance_score");
        if (!rc)
            rc = append_f32(out, s);
        if (!rc && r->docs) {
            rc = hearth_buf_appends(out, r->tei ? ",\"text\":" : ",\"document\":{\"text\":");
            if (!rc)
                rc = hearth_json_quote(out, r->docs[i], strlen(r->docs[i]));
            if (!rc && !r->tei)
                rc = hearth_buf_append(out, "}", 1);
        }
        if (!rc)
            rc = hearth_buf_append(out, "}", 1);
    }
    if (!rc)
        rc = hearth_buf_appends(out, r->tei ? "]" : "]}");
    return rc;
}

static void on_done(hearth_embed_job *job, int status, const char *msg)
{
    rerank_req *r = job->user;
    if (status == HEARTH_ENOTFOUND) {
        hearth_reply_error(r->server, r->reply, 503, "unavailable_error", "the request was cancelled");
    } else if (status) {
        hearth_reply_error(r->server, r->reply, 500, "server_error", msg ? msg : "the forward pass failed");
    } else {
        ranked *rk = malloc((size_t)r->n * sizeof *rk);
        hearth_buf out;
        hearth_buf_init(&out, RERANK_RESPONSE_MAX);
        int rc = rk ? 0 : HEARTH_ENOMEM;
        if (rk) {
            for (int i = 0; i < r->n; i++)
                rk[i] = (ranked){i, r->scores[i]};
            qsort(rk, (size_t)r->n, sizeof *rk, by_score);
            rc = format(r, rk, r->top_n < r->n ? r->top_n : r->n, &out);
        }
        if (rc) {
            hearth_reply_error(r->server, r->reply, 500, "server_error", "the response did not fit in memory");
        } else {
            hearth_response res = {200, "application/json", NULL, out.data, out.len};
            hearth_reply_send(r->server, r->reply, &res);
        }
        hearth_buf_deinit(&out);
        free(rk);
    }
    req_unref(r);
}

/* A boolean field, false when absent; a present non-boolean is the client's
 * mistake. */
static bool get_bool(hearth_request *req, const cJSON *doc, const char *key, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
    *out = false;
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsBool(v)) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"%s\" must be a boolean", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

/* The reranker the request names (or the first one), or a response saying
 * why there is none. */
static hearth_embed_model *find_reranker(hearth_request *req, hearth_api *api, const char *name)
{
    if (!atomic_load(&api->ready)) {
        hearth_respond_error(req, 503, "unavailable_error", "models are loading");
        return NULL;
    }
    hearth_api_state *st = api->state;
    for (int i = 0; st && i < st->n_embed; i++) {
        hearth_embed_model *m = &st->embed_models[i];
        if (name && !strcmp(m->info->name, name)) {
            if (!m->rerank)
                hearth_respond_error(req, 400, "invalid_request_error", "model '%s' cannot rerank: %s", name,
                                     hearth_bert_no_rerank_reason(m->bert));
            return m->rerank ? m : NULL;
        }
    }
    /* a name no encoder has (a stock client's default): the first reranker answers, as /v1/embeddings' lone encoder does */
    for (int i = 0; st && i < st->n_embed; i++)
        if (st->embed_models[i].rerank)
            return &st->embed_models[i];
    if (st && st->n_embed > 0)
        hearth_respond_error(req, 400, "invalid_request_error",
                             "no reranking model is loaded: %s (serve a cross-encoder, e.g. with --reranking -m MODEL)",
                             hearth_bert_no_rerank_reason(st->embed_models[0].bert));
    else
        hearth_respond_error(req, 400, "invalid_request_error",
                             "no reranking model is loaded (serve a cross-encoder with --reranking -m MODEL)");
    return NULL;
}

/* Tokenizes the pairs into r; on failure responds and returns false. */
static bool add_pairs(hearth_request *req, rerank_req *r, hearth_embed_model *m, const cJSON *query, const cJSON *docs)
{
    int i = 0;
    const cJSON *d;
    size_t qn = strlen(query->valuestring);
    cJSON_ArrayForEach(d, docs) {
        hearth_ids ids;
        hearth_ids_init(&ids, (size_t)hearth_bert_max_tokens(m->bert) + 1);
        hearth_err err = {0};
        int rc = hearth_bert_tokenize_pair(m->bert, query->valuestring, qn, d->valuestring, strlen(d->valuestring), &ids,
                                           NULL, &err);
        if (rc) {
            hearth_ids_deinit(&ids);
            if (rc == HEARTH_ELIMIT)
                hearth_respond_error(req, 413, "request_too_large", "\"query\": %s", err.msg);
            else
                hearth_respond_error(req, 400, "invalid_request_error", "document %d: %s", i, err.msg);
            return false;
        }
        r->ids[i] = ids.v;
        r->lens[i] = (int32_t)ids.n;
        r->tokens += ids.n;
        if (r->docs && !(r->docs[i] = strdup(d->valuestring))) {
            hearth_respond_error(req, 503, "unavailable_error", "out of memory");
            return false;
        }
        i++;
    }
    return true;
}

static void submit(hearth_request *req, hearth_api *api, hearth_embed_model *m, rerank_req *r)
{
    r->server = api->server;
    r->job.n = r->n;
    r->job.ids = (const int32_t *const *)r->ids;
    r->job.lens = r->lens;
    r->job.out = r->scores;
    r->job.done = on_done;
    r->job.user = r;
    snprintf(r->model, sizeof r->model, "%s", m->info->name);
    atomic_store(&r->refs, 2); /* the queue's and the connection's */
    /* deferred before it is queued: the scheduler may finish first */
    r->reply = hearth_request_defer(req, on_release, r);
    if (hearth_embed_queue_submit(m->queue, &r->job) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "too many requests are waiting for model '%s' (--max-concurrent-requests %d): retry later",
                 m->info->name, api->state->embed.max_concurrent);
        hearth_reply_error(r->server, r->reply, 429, "rate_limit_error", msg);
        req_unref(r); /* the queue's reference: it never took the job */
    }
}

/* Validates doc and scores its pairs, or responds with what is wrong. */
static void rerank(hearth_request *req, hearth_api *api, const cJSON *doc)
{
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(doc, "query");
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(doc, "texts");
    bool tei = texts != NULL;
    const cJSON *docs = tei ? texts : cJSON_GetObjectItemCaseSensitive(doc, "documents");
    const char *field = tei ? "texts" : "documents";
    if (!query) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"query\" must be provided");
        return;
    }
    if (!cJSON_IsString(query)) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"query\" must be a string");
        return;
    }
    int n = cJSON_IsArray(docs) ? cJSON_GetArraySize(docs) : 0;
    if (n == 0) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"%s\" must be a non-empty array of strings", field);
        return;
    }
    if (n > RERANK_MAX_DOCS) {
        hearth_respond_error(req, 413, "request_too_large", "\"%s\" has %d entries; at most %d are scored in one request",
                             field, n, RERANK_MAX_DOCS);
        return;
    }
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, docs) {
        if (!cJSON_IsString(d)) {
            hearth_respond_error(req, 400, "invalid_request_error", "\"%s\"[%d] must be a string", field, i);
            return;
        }
        i++;
    }
    int top_n = n;
    const cJSON *tn = cJSON_GetObjectItemCaseSensitive(doc, "top_n");
    if (tn && !cJSON_IsNull(tn)) {
        double v = cJSON_IsNumber(tn) ? tn->valuedouble : -1;
        if (!cJSON_IsNumber(tn) || v < 0 || v != floor(v) || v > 1e9) {
            hearth_respond_error(req, 400, "invalid_request_error", "\"top_n\" must be an integer >= 0");
            return;
        }
        top_n = v < n ? (int)v : n;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"model\" must be a string");
        return;
    }
    bool raw = false, with_text = false, return_docs = false, truncate;
    if (!get_bool(req, doc, "raw_scores", &raw) || !get_bool(req, doc, "return_text", &with_text) ||
        !get_bool(req, doc, "return_documents", &return_docs) || !get_bool(req, doc, "truncate", &truncate))
        return;
    hearth_embed_model *m = find_reranker(req, api, cJSON_IsString(model) ? model->valuestring : NULL);
    if (!m)
        return;
    rerank_req *r = calloc(1, sizeof *r);
    if (r) {
        r->ids = calloc((size_t)n, sizeof *r->ids);
        r->lens = calloc((size_t)n, sizeof *r->lens);
        r->scores = calloc((size_t)n, sizeof *r->scores);
        if ((tei ? with_text : return_docs) && r->ids)
            r->docs = calloc((size_t)n, sizeof *r->docs);
    }
    if (!r || !r->ids || !r->lens || !r->scores || ((tei ? with_text : return_docs) && !r->docs)) {
        if (r)
            req_free(r);
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    r->n = n;
    r->tei = tei;
    r->raw_scores = raw;
    r->top_n = top_n;
    if (!add_pairs(req, r, m, query, docs)) {
        req_free(r);
        return;
    }
    submit(req, api, m, r);
}

static void handle_rerank(hearth_request *req, void *ctx)
{
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char msg[512];
    cJSON *doc = hearth_json_body_parse(body, len, msg, sizeof msg);
    if (!doc) {
        hearth_respond_error(req, 400, "invalid_request_error", "%s", msg);
        return;
    }
    if (!cJSON_IsObject(doc))
        hearth_respond_error(req, 400, "invalid_request_error", "the body must be a JSON object");
    else
        rerank(req, ctx, doc);
    cJSON_Delete(doc);
}

int hearth_api_register_rerank(hearth_api *api, hearth_server *s)
{
    static const char *const paths[] = {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"};
    int rc = 0;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !rc; i++)
        rc = hearth_server_route(s, "POST", paths[i], handle_rerank, api);
    return rc;
}
