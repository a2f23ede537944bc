/* embed.c: the embedding APIs: TEI's POST /embed (also at / and
 * /invocations, TEI's root routes), /embed_all and /similarity, and OpenAI's
 * POST /v1/embeddings, and llama-server's POST /embedding and /embeddings
 * (its own shape: a list of {index, embedding: [[float]]}). TEI's endpoints
 * around them (/info, /ping, /tokenize,
 * /decode) are tei.c's, registered on their own: tei.c uses this file's
 * helpers (models.h), and this file knows nothing of tei.c.
 *
 * A handler (on the loop thread, or on a handler thread for a big body:
 * server.h) validates the JSON, tokenizes (bounded by the
 * body limit and --max-client-batch; a few microseconds a sentence) and
 * submits one job to the model's queue, then defers the request. The
 * model's scheduler thread runs the batch and, in the job's done callback,
 * formats the JSON answer and posts it back to the connection. The request
 * state is shared by the queue and the connection and freed by whichever lets
 * go last (a reference count): a client that disconnects marks the job
 * cancelled, and its sequences that have not started are skipped.
 *
 * Prompts (sentence-transformers' config_sentence_transformers.json): a text
 * input is tokenized as prompt + text, the prompt being the one TEI's
 * "prompt_name" names, else --default-prompt or --default-prompt-name (TEI's
 * flags), else the model's default_prompt_name (as sentence-transformers'
 * encode does; most models have none). Token-id inputs are taken as given.
 *
 * Rejected: tokenizing on the scheduler thread (it would have to pack
 * batches before knowing their token counts). */
#include "models.h"
#include "embed_parse.h"
#include "json_body.h"
#include "respond.h"

#include "base/log.h"
#include "base/numfmt.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FMT_TEI, FMT_TEI_ALL, FMT_TEI_SIMILARITY, FMT_OPENAI, FMT_LLAMA };

/* The largest JSON answer formatted (every float at its longest): past it a
 * request is refused with 413 before any work, not failed after it. */
#define EMBED_RESPONSE_MAX ((size_t)1 << 30)

typedef struct embed_req {
    hearth_embed_job job;
    hearth_server *server;
    hearth_reply reply;
    _Atomic int refs;
    int fmt;
    bool base64;
    int64_t dim;       /* the model's */
    int64_t out_dim;   /* what the client asked for (OpenAI "dimensions") */
    size_t prompt_tokens;
    char model[128];
    int32_t **ids;
    int32_t *lens;
    int n;
    float *out;        /* n x dim, or with FMT_TEI_ALL (sum of lens) x dim */
    size_t *rows;      /* FMT_TEI_ALL: input i's first row in out */
} embed_req;

static void req_free(embed_req *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->lens);
    free(r->out);
    free(r->rows);
    free(r);
}

static void req_unref(embed_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        req_free(r);
}

static void on_release(void *arg, bool cancelled)
{
    embed_req *r = arg;
    if (cancelled)
        atomic_store(&r->job.cancelled, 1);
    req_unref(r);
}

static int append_floats(hearth_buf *out, const float *v, int64_t n)
{
    int rc = hearth_buf_reserve(out, (size_t)n * (HEARTH_FMT_F32_MAX + 1) + 2);
    if (rc)
        return rc;
    char *p = out->data + out->len;
    *p++ = '[';
    for (int64_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += hearth_fmt_f32(p, v[i]); /* writes "0" for NaN and infinities: JSON has neither */
    }
    *p++ = ']';
    out->len = (size_t)(p - out->data);
    out->data[out->len] = 0;
    return HEARTH_OK;
}

static int append_base64(hearth_buf *out, const float *v, int64_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v; /* little-endian float32, as OpenAI encodes it */
    size_t len = (size_t)n * 4;
    int rc = hearth_buf_reserve(out, (len + 2) / 3 * 4 + 2);
    if (rc)
        return rc;
    char *p = out->data + out->len;
    *p++ = '"';
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        unsigned x = (unsigned)b[i] << 16 | (unsigned)b[i + 1] << 8 | b[i + 2];
        *p++ = tbl[x >> 18];
        *p++ = tbl[(x >> 12) & 63];
        *p++ = tbl[(x >> 6) & 63];
        *p++ = tbl[x & 63];
    }
    if (i < len) {
        unsigned x = (unsigned)b[i] << 16 | (i + 1 < len ? (unsigned)b[i + 1] << 8 : 0);
        *p++ = tbl[x >> 18];
        *p++ = tbl[(x >> 12) & 63];
        *p++ = i + 1 < len ? tbl[(x >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p++ = '"';
    out->len = (size_t)(p - out->data);
    out->data[out->len] = 0;
    return HEARTH_OK;
}

/* OpenAI "dimensions": keep the first k and renormalize (Matryoshka truncation). */
static void shorten(float *v, int64_t k)
{
    double ss = 0;
    for (int64_t i = 0; i < k; i++)
        ss += (double)v[i] * v[i];
    if (ss > 0)
        for (int64_t i = 0; i < k; i++)
            v[i] = (float)(v[i] / sqrt(ss));
}

static void on_done(hearth_embed_job *job, int status, const char *msg)
{
    embed_req *r = job->user;
    if (status == HEARTH_ENOTFOUND) {
        hearth_reply_error(r->server, r->reply, 503, "unavailable_error", "the request was cancelled");
        req_unref(r);
        return;
    }
    if (status) {
        hearth_reply_error(r->server, r->reply, 500, "server_error", msg ? msg : "the forward pass failed");
        req_unref(r);
        return;
    }
    hearth_buf out;
    hearth_buf_init(&out, EMBED_RESPONSE_MAX);
    int rc = 0;
    if (r->fmt == FMT_TEI_ALL) {
        /* [[[float] per token] per input] */
        rc = hearth_buf_append(&out, "[", 1);
        for (int i = 0; i < r->n && !rc; i++) {
            rc = hearth_buf_appends(&out, i ? ",[" : "[");
            for (int32_t k = 0; k < r->lens[i] && !rc; k++) {
                if (k)
                    rc = hearth_buf_append(&out, ",", 1);
                if (!rc)
                    rc = append_floats(&out, r->out + (r->rows[i] + (size_t)k) * (size_t)r->dim, r->dim);
            }
            if (!rc)
                rc = hearth_buf_append(&out, "]", 1);
        }
        if (!rc)
            rc = hearth_buf_append(&out, "]", 1);
    } else if (r->fmt == FMT_TEI_SIMILARITY) {
        /* the vectors are unit vectors: the cosine of the source (input 0)
         * and sentence i is their dot product */
        float *sim = malloc((size_t)r->n * sizeof *sim);
        for (int i = 1; sim && i < r->n; i++) {
            double dot = 0;
            for (int64_t d = 0; d < r->dim; d++)
                dot += (double)r->out[d] * r->out[(size_t)i * (size_t)r->dim + (size_t)d];
            sim[i - 1] = (float)dot;
        }
        rc = sim ? append_floats(&out, sim, r->n - 1) : HEARTH_ENOMEM;
        free(sim);
    } else if (r->fmt == FMT_LLAMA) {
        /* [{"index": i, "embedding": [[float]]}]: llama-server lists a pooled
         * vector as the one row of a matrix (without pooling, a row per token) */
        rc = hearth_buf_append(&out, "[", 1);
        for (int i = 0; i < r->n && !rc; i++) {
            rc = hearth_buf_printf(&out, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i);
            if (!rc)
                rc = append_floats(&out, r->out + (size_t)i * (size_t)r->dim, r->dim);
            if (!rc)
                rc = hearth_buf_append(&out, "]}", 2);
        }
        if (!rc)
            rc = hearth_buf_append(&out, "]", 1);
    } else if (r->fmt == FMT_TEI) {
        rc = hearth_buf_append(&out, "[", 1);
        for (int i = 0; i < r->n && !rc; i++) {
            if (i)
                rc = hearth_buf_append(&out, ",", 1);
            if (!rc)
                rc = append_floats(&out, r->out + (size_t)i * (size_t)r->dim, r->dim);
        }
        if (!rc)
            rc = hearth_buf_append(&out, "]", 1);
    } else {
        rc = hearth_buf_appends(&out, "{\"object\":\"list\",\"data\":[");
        for (int i = 0; i < r->n && !rc; i++) {
            float *v = r->out + (size_t)i * (size_t)r->dim;
            if (r->out_dim < r->dim)
                shorten(v, r->out_dim);
            rc = hearth_buf_printf(&out, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
            if (!rc)
                rc = r->base64 ? append_base64(&out, v, r->out_dim) : append_floats(&out, v, r->out_dim);
            if (!rc)
                rc = hearth_buf_append(&out, "}", 1);
        }
        if (!rc)
            rc = hearth_buf_appends(&out, "],\"model\":");
        if (!rc)
            rc = hearth_json_quote(&out, r->model, strlen(r->model));
        if (!rc)
            rc = hearth_buf_printf(&out, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}", r->prompt_tokens,
                                   r->prompt_tokens);
    }
    if (rc) {
        hearth_reply_error(r->server, r->reply, 500, "server_error", "the response did not fit in memory");
    } else {
        hearth_response res = {200, "application/json", NULL, out.data, out.len};
        hearth_reply_send(r->server, r->reply, &res);
    }
    hearth_buf_deinit(&out);
    req_unref(r);
}

/* ---- requests ---- */

/* The request without its output (sized once the inputs are tokenized). */
static embed_req *req_new(int n, int64_t dim)
{
    embed_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ids = calloc((size_t)n, sizeof *r->ids);
    r->lens = calloc((size_t)n, sizeof *r->lens);
    if (!r->ids || !r->lens) {
        req_free(r);
        return NULL;
    }
    r->dim = r->out_dim = dim;
    atomic_store(&r->refs, 2); /* the queue's and the connection's */
    return r;
}

bool hearth_api_embed_prompt_or_respond(hearth_request *req, hearth_embed_model *m, const char *name, const char **text,
                                        size_t *len)
{
    *text = m->prompt;
    *len = m->prompt_len;
    if (!name)
        return true;
    if ((*text = hearth_bert_prompt(m->bert, name, len)))
        return true;
    char names[512];
    hearth_bert_prompt_names(m->bert, names, sizeof names);
    if (names[0])
        hearth_respond_error(req, 400, "invalid_request_error", "prompt_name '%s' is not one of the prompts of model '%s' (%s)",
                             name, m->info->name, names);
    else
        hearth_respond_error(req, 400, "invalid_request_error",
                             "prompt_name '%s': model '%s' has no prompts (config_sentence_transformers.json)", name,
                             m->info->name);
    return false;
}

char *hearth_api_with_prompt(const char *prompt, size_t plen, const char *text, size_t tlen, size_t *len)
{
    *len = plen + tlen;
    char *s = malloc(*len + 1);
    if (s) {
        memcpy(s, prompt, plen);
        memcpy(s + plen, text, tlen);
        s[*len] = 0;
    }
    return s;
}

/* Tokenizes input i (text) into r; on failure responds and returns false. */
static bool add_text(hearth_request *req, embed_req *r, hearth_embed_model *m, int i, const hearth_embed_input *in,
                     enum hearth_bert_truncate trunc, const char *prompt, size_t plen)
{
    hearth_ids ids;
    hearth_ids_init(&ids, (size_t)hearth_bert_max_tokens(m->bert) * 64 + 64);
    hearth_err err = {0};
    const char *text = in->text;
    size_t len = in->text_len;
    char *joined = NULL;
    if (prompt && !(text = joined = hearth_api_with_prompt(prompt, plen, in->text, in->text_len, &len))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return false;
    }
    int rc = hearth_bert_tokenize(m->bert, text, len, trunc, &ids, &err);
    free(joined);
    if (rc) {
        hearth_ids_deinit(&ids);
        if (rc == HEARTH_ELIMIT)
            hearth_respond_error(req, 413, "request_too_large", "input %d: %s", i, err.msg);
        else
            hearth_respond_error(req, 400, "invalid_request_error", "input %d: %s", i, err.msg);
        return false;
    }
    r->ids[i] = ids.v;
    r->lens[i] = (int32_t)ids.n;
    r->prompt_tokens += ids.n;
    return true;
}

/* Takes input i as token ids (OpenAI's [int] form), wrapped in [CLS] ... [SEP]. */
static bool add_ids(hearth_request *req, embed_req *r, hearth_embed_model *m, int i, const hearth_embed_input *in)
{
    const hearth_vocab *v = hearth_bert_vocab(m->bert);
    int n = in->n_ids;
    int64_t max = hearth_bert_max_tokens(m->bert);
    if (n + 2 > max) {
        hearth_respond_error(req, 413, "request_too_large",
                             "input %d: %d tokens (with [CLS] and [SEP]: %d) is longer than the model's limit of %lld", i, n, n + 2,
                             (long long)max);
        return false;
    }
    if (v->cls < 0 || v->sep < 0) {
        hearth_respond_error(req, 400, "invalid_request_error", "this model's vocabulary has no [CLS]/[SEP]: send text");
        return false;
    }
    for (int k = 0; k < n; k++) {
        if (in->ids[k] >= v->n_tokens) {
            hearth_respond_error(req, 400, "invalid_request_error", "input %d: token %d is %d, not an id in 0..%d", i, k,
                                 (int)in->ids[k], (int)v->n_tokens - 1);
            return false;
        }
    }
    int32_t *ids = malloc((size_t)(n + 2) * sizeof *ids);
    if (!ids) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return false;
    }
    ids[0] = v->cls;
    memcpy(ids + 1, in->ids, (size_t)n * sizeof *ids);
    ids[n + 1] = v->sep;
    r->ids[i] = ids;
    r->lens[i] = n + 2;
    r->prompt_tokens += (size_t)n;
    return true;
}

static void submit(hearth_request *req, hearth_api *api, hearth_embed_model *m, embed_req *r, bool normalize)
{
    r->server = api->server;
    r->job.n = r->n;
    r->job.ids = (const int32_t *const *)r->ids;
    r->job.lens = r->lens;
    r->job.normalize = normalize;
    r->job.all_tokens = r->fmt == FMT_TEI_ALL;
    r->job.rows = r->rows;
    r->job.out = r->out;
    r->job.done = on_done;
    r->job.user = r;
    snprintf(r->model, sizeof r->model, "%s", m->info->name);
    /* Deferred before it is queued: a fast scheduler may finish the job
     * before submit returns, and its reply needs the handle. */
    r->reply = hearth_request_defer(req, on_release, r);
    if (hearth_embed_queue_submit(m->queue, &r->job) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "too many requests are waiting for model '%s' (--max-concurrent-requests %d): retry later",
                 m->info->name, api->state->embed.max_concurrent);
        hearth_reply_error(r->server, r->reply, 429, "rate_limit_error", msg);
        req_unref(r); /* the queue's reference: it never took the job */
    }
}

hearth_embed_model *hearth_api_embed_model_or_respond(hearth_request *req, hearth_api *api, const char *name)
{
    if (!atomic_load(&api->ready)) {
        hearth_respond_error(req, 503, "unavailable_error", "models are loading");
        return NULL;
    }
    hearth_embed_model *m = hearth_api_find_embed(api, name);
    /* text-embedding-3-small from a stock client: a lone encoder answers it (see gen_common.c) */
    if (!m && name && api->state && api->state->n_embed == 1)
        m = &api->state->embed_models[0];
    if (!m && name)
        hearth_respond_error(req, 404, "not_found_error",
                             "the model '%s' does not exist (see /v1/models: %d embedding models are served, so the name "
                             "must be one of theirs)",
                             name, api->state ? api->state->n_embed : 0);
    else if (!m)
        hearth_respond_error(req, 404, "not_found_error", "no embedding model is loaded");
    return m;
}

bool hearth_api_embed_parse_or_respond(hearth_request *req, hearth_api *api, enum hearth_embed_api which,
                                       hearth_embed_parsed *p)
{
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char msg[512];
    int st = hearth_embed_parse(body, len, which, api->state ? api->state->embed.max_client_batch : 1, p, msg, sizeof msg);
    if (st) {
        hearth_respond_error(req, st, st == 413 ? "request_too_large" : "invalid_request_error", "%s", msg);
        return false;
    }
    return true;
}

/* Embeds the parsed inputs with m, or responds with what is wrong. */
static void embed_inputs(hearth_request *req, hearth_api *api, hearth_embed_model *m, const hearth_embed_parsed *p, int fmt)
{
    if (m->rerank) { /* its queue computes scores, not vectors */
        hearth_respond_error(req, 400, "invalid_request_error",
                             "model '%s' is a reranker (a sequence-classification head): it scores (query, document) pairs "
                             "at /rerank and embeds nothing; serve an embedding model for this route",
                             m->info->name);
        return;
    }
    int64_t dim = hearth_bert_dim(m->bert);
    if (p->dimensions > dim) {
        hearth_respond_error(req, 400, "invalid_request_error", "'dimensions' must be at most %lld for model '%s'", (long long)dim,
                             m->info->name);
        return;
    }
    embed_req *r = req_new(p->n, dim);
    if (!r) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    r->fmt = fmt;
    r->base64 = p->base64;
    r->out_dim = p->dimensions ? p->dimensions : dim;
    r->n = p->n;
    enum hearth_bert_truncate trunc = !p->truncate     ? HEARTH_BERT_NO_TRUNCATE
                                      : p->truncate_left ? HEARTH_BERT_TRUNCATE_LEFT
                                                         : HEARTH_BERT_TRUNCATE_RIGHT;
    const char *prompt;
    size_t plen;
    if (!hearth_api_embed_prompt_or_respond(req, m, p->prompt_name, &prompt, &plen)) {
        req_free(r);
        return;
    }
    for (int i = 0; i < p->n; i++) {
        const hearth_embed_input *in = &p->inputs[i];
        if (!(in->text ? add_text(req, r, m, i, in, trunc, prompt, plen) : add_ids(req, r, m, i, in))) {
            req_free(r);
            return;
        }
    }
    size_t n_rows = (size_t)r->n;
    if (fmt == FMT_TEI_ALL) {
        if (!(r->rows = malloc((size_t)r->n * sizeof *r->rows))) {
            req_free(r);
            hearth_respond_error(req, 503, "unavailable_error", "out of memory");
            return;
        }
        n_rows = 0;
        for (int i = 0; i < r->n; i++) {
            r->rows[i] = n_rows;
            n_rows += (size_t)r->lens[i];
        }
        if (n_rows * (size_t)dim > EMBED_RESPONSE_MAX / (HEARTH_FMT_F32_MAX + 1)) {
            hearth_respond_error(req, 413, "request_too_large",
                                 "%zu tokens of %lld floats each would not fit in a %zu MiB response: send fewer inputs",
                                 n_rows, (long long)dim, EMBED_RESPONSE_MAX >> 20);
            req_free(r);
            return;
        }
    }
    if (!(r->out = malloc(n_rows * (size_t)dim * sizeof(float)))) {
        req_free(r);
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    submit(req, api, m, r, p->normalize);
}

/* A TEI embedding route: the first encoder, the body parsed as which, the
 * answer written as fmt. */
static void tei_route(hearth_request *req, hearth_api *api, enum hearth_embed_api which, int fmt)
{
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, NULL);
    hearth_embed_parsed p;
    if (!m || !hearth_api_embed_parse_or_respond(req, api, which, &p))
        return;
    embed_inputs(req, api, m, &p, fmt);
    hearth_embed_parsed_free(&p);
}

/* TEI: {"inputs": str | [str], "normalize": true, "truncate": false,
 * "truncation_direction": "Right", "prompt_name": null} -> [[float]] */
static void tei_embed(hearth_request *req, void *ctx)
{
    tei_route(req, ctx, HEARTH_EMBED_TEI, FMT_TEI);
}

/* TEI: {"inputs": str | [str], "truncate", "truncation_direction",
 * "prompt_name"} -> [[[float]]]: every token's last-layer vector ([CLS] and
 * [SEP] included), not pooled nor normalized. */
static void tei_embed_all(hearth_request *req, void *ctx)
{
    tei_route(req, ctx, HEARTH_EMBED_TEI, FMT_TEI_ALL);
}

/* TEI: {"inputs": {"source_sentence": str, "sentences": [str]}, "parameters":
 * {"truncate", "truncation_direction", "prompt_name"}} -> [float], the cosine
 * of the source sentence's embedding and each sentence's (the vectors are
 * normalized: p.normalize is always true here). */
static void tei_similarity(hearth_request *req, void *ctx)
{
    tei_route(req, ctx, HEARTH_EMBED_TEI_SIMILARITY, FMT_TEI_SIMILARITY);
}

/* OpenAI: {"input": str | [str] | [int] | [[int]], "model", "encoding_format", "dimensions"} */
static void openai_embeddings(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    hearth_embed_parsed p;
    if (!hearth_api_embed_parse_or_respond(req, api, HEARTH_EMBED_OPENAI, &p))
        return;
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, p.model);
    if (m)
        embed_inputs(req, api, m, &p, FMT_OPENAI); /* OpenAI's embeddings are unit vectors: p.normalize is true */
    hearth_embed_parsed_free(&p);
}

/* llama-server's own: {"content" | "input": str | [str] | [int] | [[int]]}
 * -> [{"index", "embedding": [[float]]}], unit vectors (llama-server
 * normalizes pooled ones). "content" is llama-server's older name for
 * "input": it is renamed, and the body parsed as OpenAI's, whose forms
 * llama-server's input takes. */
static void llama_embeddings(hearth_request *req, void *ctx)
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
    char *text = NULL;
    if (!cJSON_GetObjectItemCaseSensitive(doc, "input")) {
        cJSON *content = cJSON_DetachItemFromObjectCaseSensitive(doc, "content");
        if (!content) {
            hearth_respond_error(req, 400, "invalid_request_error", "\"input\" or \"content\" must be provided");
            goto out;
        }
        cJSON_AddItemToObject(doc, "input", content);
    }
    if (!(text = cJSON_PrintUnformatted(doc))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        goto out;
    }
    hearth_embed_parsed p;
    int st = hearth_embed_parse(text, strlen(text), HEARTH_EMBED_OPENAI, api->state ? api->state->embed.max_client_batch : 1,
                                &p, msg, sizeof msg);
    if (st) {
        hearth_respond_error(req, st, st == 413 ? "request_too_large" : "invalid_request_error", "%s", msg);
        goto out;
    }
    hearth_embed_model *m = hearth_api_embed_model_or_respond(req, api, p.model);
    if (m)
        embed_inputs(req, api, m, &p, FMT_LLAMA);
    hearth_embed_parsed_free(&p);
out:
    cJSON_free(text);
    cJSON_Delete(doc);
}

int hearth_api_register_embed(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "POST", "/embed", tei_embed, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/embed_all", tei_embed_all, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/similarity", tei_similarity, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/v1/embeddings", openai_embeddings, api);
    if (!rc) /* llama-server answers both in its own shape, only /v1/embeddings in OpenAI's */
        rc = hearth_server_route(s, "POST", "/embeddings", llama_embeddings, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/embedding", llama_embeddings, api);
    /* TEI's root routes: @huggingface/inference posts to an endpoint's URL
     * itself, SageMaker to /invocations; both mean /embed */
    if (!rc)
        rc = hearth_server_route(s, "POST", "/", tei_embed, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/invocations", tei_embed, api);
    return rc;
}
