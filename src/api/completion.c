/* completion.c: llama-server's own API: POST /completion (and /completions,
 * its newer name; one JSON answer, or server-sent events with "stream":
 * true), the llama form of POST /tokenize
 * ({"content": ...}; embed.c dispatches to it), POST /detokenize,
 * GET /props; and hearth_api_register_generation, which registers these,
 * /infill (infill.c, answered as /completion is), the slot routes (slots.c)
 * and OpenAI's generation routes (openai_gen.c).
 *
 * Field names and shapes follow llama-server's tools/server README, so its
 * clients work unchanged: the answer's content, tokens (the generated ids
 * with "return_tokens": true, else []), stop, stop_type
 * ("eos" | "word" | "limit"), stopping_word, tokens_predicted,
 * tokens_evaluated, tokens_cached, has_new_line, truncated, prompt (its
 * ids as text, control tokens shown), timings,
 * generation_settings and, for n_probs > 0, completion_probabilities in the
 * newer shape (id, token, bytes, logprob, top_logprobs). A stream is
 * {"content": piece, "tokens": its ids, "stop": false, tokens_predicted,
 * tokens_evaluated} events then one event with "stop": true and the summary
 * (timings included); like llama-server's /completion it ends without
 * "data: [DONE]". "response_fields": [paths] keeps only those fields of a
 * whole answer, keyed by their paths, as llama-server does.
 *
 * The generated text keeps the space SentencePiece puts before its first
 * word (" park." after "...went to the"), as llama-server's does, so prompt +
 * content reads right; even after BOS alone, where a client wanting the bare
 * text strips it.
 *
 * "truncated" is true when the prompt lost middle blocks or the context
 * shifted (both only with --context-shift; without it a prompt past the
 * context is a 400) or the answer ended at a full context, as llama-server's.
 * "post_sampling_probs": true gives n_probs after the sampler chain, as
 * "prob" and "top_probs" (gen_common.c).
 *
 * Deliberate difference: /detokenize drops the space SentencePiece puts
 * before the first word (llama-server keeps it), so /tokenize then
 * /detokenize gives back the text sent. */
#include "gen_common.h"
#include "respond.h"

#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

/* response_fields: bounds on a request's list (llama-server has none; these are far past any use) */
#define HEARTH_FIELDS_MAX 64
#define HEARTH_FIELD_MAX 256

static int append_probs_field(hearth_gen_call *c, hearth_buf *out)
{
    if (c->g.n_probs <= 0)
        return 0;
    int rc = hearth_buf_appends(out, ",\"completion_probabilities\":[");
    if (!rc && c->probs.len)
        rc = hearth_buf_append(out, c->probs.data, c->probs.len);
    if (!rc)
        rc = hearth_buf_appends(out, "]");
    return rc;
}

/* "tokens":[...]: the ids in c->tokens (see gen_common.h) */
static int append_tokens_field(hearth_gen_call *c, hearth_buf *out)
{
    int rc = hearth_buf_appends(out, ",\"tokens\":[");
    if (!rc && c->tokens.len)
        rc = hearth_buf_append(out, c->tokens.data, c->tokens.len);
    if (!rc)
        rc = hearth_buf_appends(out, "]");
    return rc;
}

static int fmt_piece(hearth_gen_call *c, const char *text, size_t n, hearth_buf *out)
{
    int rc = hearth_gen_sse_open(out);
    if (!rc)
        rc = hearth_buf_printf(out, "{\"index\":%d,\"content\":", c->index);
    if (!rc)
        rc = hearth_json_quote(out, text, n);
    if (!rc)
        rc = append_tokens_field(c, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"stop\":false,\"tokens_predicted\":%lld,\"tokens_evaluated\":%lld",
                               (long long)c->n_gen, (long long)c->prompt.n);
    if (!rc)
        rc = append_probs_field(c, out);
    if (!rc)
        rc = hearth_gen_event_end(c, out);
    return rc;
}

static int fmt_end(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    int rc = c->stream ? hearth_gen_sse_open(out) : 0;
    if (!rc)
        rc = hearth_buf_printf(out, "{\"index\":%d,\"content\":", c->index);
    if (!rc) /* streamed, the text (and its ids) went out in the pieces */
        rc = c->stream ? hearth_buf_appends(out, "\"\",\"tokens\":[]")
                       : hearth_json_quote(out, c->text.data ? c->text.data : "", c->text.len);
    if (!rc && !c->stream)
        rc = append_tokens_field(c, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"stop\":true,\"id_slot\":%d,\"model\":", st->slot);
    if (!rc)
        rc = hearth_json_quote(out, c->model->info->name, strlen(c->model->info->name));
    if (!rc)
        rc = hearth_buf_printf(out,
                               ",\"tokens_predicted\":%lld,\"tokens_evaluated\":%lld,\"tokens_cached\":%lld,"
                               "\"has_new_line\":%s,\"truncated\":%s,\"stop_type\":\"%s\",\"stopping_word\":",
                               (long long)st->n_gen, (long long)st->n_prompt, (long long)st->n_cached,
                               c->has_new_line ? "true" : "false", hearth_gen_truncated(c, st) ? "true" : "false",
                               hearth_gen_stop_type(st));
    const char *word = st->finish == HEARTH_GEN_STOP && st->stop_index >= 0 && st->stop_index < c->g.n_stop
                           ? c->stop[st->stop_index]
                           : "";
    if (!rc)
        rc = hearth_json_quote(out, word, strlen(word));
    if (!rc)
        rc = hearth_gen_append_prompt(c, out);
    if (!rc)
        rc = hearth_buf_appends(out, ",\"generation_settings\":");
    if (!rc)
        rc = hearth_gen_append_settings(out, &c->g, c->grammar ? hearth_grammar_text(c->grammar) : NULL);
    if (!rc)
        rc = hearth_buf_appends(out, ",");
    if (!rc)
        rc = hearth_gen_append_timings(out, st);
    if (!rc)
        rc = append_probs_field(c, out);
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    if (!rc && c->stream)
        rc = hearth_gen_sse_close(out);
    return rc;
}

/* The value at path ("generation_settings/n_predict": keys split at '/') in
 * doc, or NULL. */
static const cJSON *nested(const cJSON *doc, const char *path)
{
    char key[HEARTH_FIELD_MAX + 1];
    while (doc && *path) {
        size_t n = strcspn(path, "/");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        doc = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, key) : NULL;
        path += n + (path[n] == '/');
    }
    return doc;
}

/* response_fields: the body at out[start..) replaced by an object of only
 * those fields, each under its whole path as the key (llama-server's
 * json_get_nested_values); a path that leads nowhere is left out. An opt-in
 * costs one parse and print of the answer, so cJSON is fine here. */
static int keep_fields(hearth_gen_call *c, hearth_buf *out, size_t start)
{
    cJSON *doc = cJSON_ParseWithLength(out->data + start, out->len - start);
    cJSON *kept = cJSON_CreateObject();
    char *text = NULL;
    int rc = doc && kept ? HEARTH_OK : HEARTH_ENOMEM;
    for (int i = 0; i < c->n_fields && !rc; i++) {
        const cJSON *v = nested(doc, c->fields[i]);
        cJSON *copy = v ? cJSON_Duplicate(v, true) : NULL;
        if (v && (!copy || !cJSON_AddItemToObject(kept, c->fields[i], copy))) {
            cJSON_Delete(copy);
            rc = HEARTH_ENOMEM;
        }
    }
    if (!rc && !(text = cJSON_PrintUnformatted(kept)))
        rc = HEARTH_ENOMEM;
    if (!rc) {
        out->len = start;
        rc = hearth_buf_appends(out, text);
    }
    cJSON_free(text);
    cJSON_Delete(kept);
    cJSON_Delete(doc);
    return rc;
}

static int fmt_end_fields(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    size_t start = out->len;
    int rc = fmt_end(c, st, out);
    if (!rc && c->n_fields && !c->stream)
        rc = keep_fields(c, out, start);
    return rc;
}

static const hearth_gen_format completion_format = {NULL, fmt_piece, fmt_end_fields, false};

/* "response_fields": [path] into c->fields; false after a 400. */
static bool parse_fields(hearth_request *req, const cJSON *doc, hearth_gen_call *c)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "response_fields");
    if (!f || cJSON_IsNull(f))
        return true;
    int n = cJSON_GetArraySize(f);
    if (!cJSON_IsArray(f) || n > HEARTH_FIELDS_MAX) {
        hearth_respond_error(req, 400, "invalid_request_error", "'response_fields' must be a list of at most %d paths",
                             HEARTH_FIELDS_MAX);
        return false;
    }
    if (n && !(c->fields = calloc((size_t)n, sizeof *c->fields))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return false;
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, f)
    {
        if (!cJSON_IsString(p) || strlen(p->valuestring) > HEARTH_FIELD_MAX) {
            hearth_respond_error(req, 400, "invalid_request_error", "'response_fields'[%d] must be a path of at most %d bytes",
                                 c->n_fields, HEARTH_FIELD_MAX);
            return false;
        }
        if (!(c->fields[c->n_fields] = strdup(p->valuestring))) {
            hearth_respond_error(req, 503, "unavailable_error", "out of memory");
            return false;
        }
        c->n_fields++;
    }
    return true;
}

hearth_gen_call *hearth_gen_completion_call_new(hearth_request *req, hearth_gen_entry *m, const cJSON *doc,
                                                int64_t *n_predict)
{
    hearth_gen_call *c = hearth_gen_call_new(m, &completion_format);
    if (!c) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return NULL;
    }
    int r = hearth_gen_opt_int(req, doc, "n_predict", -1, INT32_MAX, n_predict);
    if (r == 0) /* llama-server reads OpenAI's max_tokens when n_predict is absent */
        r = hearth_gen_opt_int(req, doc, "max_tokens", -1, INT32_MAX, n_predict);
    if (r < 0 || !hearth_gen_parse_sampling(req, doc, c) || !hearth_gen_parse_grammar(req, doc, c, false) ||
        hearth_gen_opt_bool(req, doc, "return_tokens", &c->return_tokens) < 0 ||
        !parse_fields(req, doc, c)) {
        hearth_gen_call_free(c);
        return NULL;
    }
    return c;
}

/* One call of a /completion request for prompt (key names it in messages);
 * NULL after responding. */
static hearth_gen_call *completion_call(hearth_request *req, void *model, const cJSON *doc, const cJSON *prompt,
                                        const char *key, int64_t *n_predict)
{
    hearth_gen_call *c = hearth_gen_completion_call_new(req, model, doc, n_predict);
    if (c && !hearth_gen_prompt_from_json(req, c, prompt, key)) {
        hearth_gen_call_free(c);
        return NULL;
    }
    return c;
}

/* {"prompt": str | [int] | [str | [int], ...], "n_predict" (or "max_tokens"), sampling..., "stop", "stream",
 *  "cache_prompt", "n_probs", "return_tokens", "response_fields"}. Several prompts (a list of strings or
 * id lists) are answered as llama-server answers them: a JSON array of answers, in order. */
static void completion(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc;
    hearth_gen_entry *m = hearth_gen_open(req, api, &doc);
    if (!m)
        return;
    hearth_gen_submit_prompts(req, api, doc, completion_call, m);
    cJSON_Delete(doc);
}

/* {"content": str, "add_special": false, "parse_special": true, "with_pieces": false}
 *   -> {"tokens": [id] | [{"id", "piece"}]}; a piece that is not whole UTF-8
 *   characters is given as its list of bytes, as llama-server does. */
void hearth_api_llama_tokenize(hearth_request *req, hearth_api *api, const cJSON *doc)
{
    hearth_gen_entry *m = hearth_gen_named_model(req, api, doc);
    if (!m)
        return;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(doc, "content");
    if (!cJSON_IsString(content)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'content' must be a string");
        return;
    }
    bool add_special = false, parse_special = true, with_pieces = false;
    if (hearth_gen_opt_bool(req, doc, "add_special", &add_special) < 0 ||
        hearth_gen_opt_bool(req, doc, "parse_special", &parse_special) < 0 ||
        hearth_gen_opt_bool(req, doc, "with_pieces", &with_pieces) < 0)
        return;
    const hearth_tokenizer *t = hearth_decoder_tokenizer(m->dec);
    hearth_ids ids;
    hearth_ids_init(&ids, (size_t)1 << 25);
    hearth_buf out;
    hearth_buf_init(&out, (size_t)256 << 20);
    hearth_err err = {0};
    int rc = hearth_tokenizer_encode(t, content->valuestring, strlen(content->valuestring), add_special, parse_special, &ids,
                                     &err);
    if (rc) {
        hearth_respond_error(req, 400, "invalid_request_error", "'content' cannot be tokenized: %s", err.msg);
        goto out;
    }
    rc = hearth_buf_appends(&out, "{\"tokens\":[");
    for (size_t i = 0; i < ids.n && !rc; i++) {
        if (!with_pieces) {
            rc = hearth_buf_printf(&out, i ? ",%d" : "%d", ids.v[i]);
            continue;
        }
        char piece[512];
        int n = hearth_tokenizer_piece_special(t, ids.v[i], piece, sizeof piece);
        if (n < 0)
            n = 0;
        rc = hearth_buf_printf(&out, "%s{\"id\":%d,\"piece\":", i ? "," : "", ids.v[i]);
        if (!rc && hearth_utf8_validate(piece, (size_t)n, NULL) == HEARTH_OK) {
            rc = hearth_json_quote(&out, piece, (size_t)n);
        } else if (!rc) {
            rc = hearth_buf_appends(&out, "[");
            for (int k = 0; k < n && !rc; k++)
                rc = hearth_buf_printf(&out, k ? ",%u" : "%u", (unsigned)(unsigned char)piece[k]);
            if (!rc)
                rc = hearth_buf_appends(&out, "]");
        }
        if (!rc)
            rc = hearth_buf_appends(&out, "}");
    }
    if (!rc)
        rc = hearth_buf_appends(&out, "]}");
    hearth_api_send_buf(req, &out, rc, "answer");
out:
    hearth_buf_deinit(&out);
    hearth_ids_deinit(&ids);
}

/* {"tokens": [id]} -> {"content": str}; control tokens show their text. */
static void detokenize(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc;
    hearth_gen_entry *m = hearth_gen_open(req, api, &doc);
    if (!m)
        return;
    int32_t *ids = NULL;
    hearth_buf text, out;
    hearth_buf_init(&text, (size_t)64 << 20);
    hearth_buf_init(&out, (size_t)128 << 20);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "tokens");
    if (!cJSON_IsArray(arr)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'tokens' must be a list of token ids");
        goto out;
    }
    int n = cJSON_GetArraySize(arr);
    int32_t n_vocab = hearth_decoder_vocab(m->dec)->n_tokens;
    ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        goto out;
    }
    int k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr)
    {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab) || d != (double)(int32_t)d) {
            hearth_respond_error(req, 400, "invalid_request_error", "'tokens'[%d] is not a token id in 0..%d", k,
                                 (int)n_vocab - 1);
            goto out;
        }
        ids[k++] = (int32_t)d;
    }
    int rc = hearth_tokenizer_decode(hearth_decoder_tokenizer(m->dec), ids, (size_t)k, true, &text);
    if (!rc)
        rc = hearth_buf_appends(&out, "{\"content\":");
    if (!rc)
        rc = hearth_json_quote(&out, text.data ? text.data : "", text.len);
    if (!rc)
        rc = hearth_buf_appends(&out, "}");
    hearth_api_send_buf(req, &out, rc, "answer");
out:
    free(ids);
    hearth_buf_deinit(&text);
    hearth_buf_deinit(&out);
    cJSON_Delete(doc);
}

/* The template /props shows when chat fell back to chatml (the GGUF has none
 * hearth knows), as llama-server shows the chatml source it fell back to:
 * the layout chat_template.c renders, written as Jinja for clients that read it. */
#define CHATML_JINJA                                                                                                   \
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "              \
    "'<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"

/* GET /props: the first generation model's defaults, slots, template (its
 * name, and where it came from: "gguf", "override" or "fallback"). */
static void props(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    hearth_gen_entry *m = hearth_gen_find_or_respond(req, api, NULL);
    if (!m)
        return;
    hearth_gen_req defaults = {.n_predict = m->n_predict, .cache_prompt = true, .sampling = m->sampling};
    const char *tmpl = "";
    size_t tmpl_len = 0;
    if (!strcmp(m->tmpl_source, "fallback")) {
        tmpl = CHATML_JINJA;
        tmpl_len = strlen(tmpl);
    } else if (m->jinja && api->cfg.chat_template_jinja) { /* --jinja with the command line's template */
        tmpl = api->cfg.chat_template_jinja;
        tmpl_len = strlen(tmpl);
    } else if (hearth_decoder_chat_template(m->dec, &tmpl, &tmpl_len) != 0) {
        tmpl = "";
        tmpl_len = 0;
    }
    const char *tmpl_name = hearth_chat_template_name(m->tmpl);
    hearth_buf out;
    hearth_buf_init(&out, (size_t)16 << 20);
    int rc = hearth_buf_printf(&out, "{\"default_generation_settings\":{\"n_ctx\":%lld,\"params\":", (long long)m->n_ctx);
    if (!rc)
        rc = hearth_gen_append_settings(&out, &defaults, NULL);
    if (!rc)
        rc = hearth_buf_printf(&out, "},\"total_slots\":%d,\"cache_type\":\"%s\",\"model\":", m->n_parallel,
                               hearth_dtype_get(hearth_decoder_cache_type(m->dec))->name);
    if (!rc)
        rc = hearth_json_quote(&out, m->info->name, strlen(m->info->name));
    if (!rc)
        rc = hearth_buf_appends(&out, ",\"model_path\":");
    if (!rc)
        rc = hearth_json_quote(&out, m->info->source, strlen(m->info->source));
    if (!rc)
        rc = hearth_buf_appends(&out, ",\"chat_template\":");
    if (!rc)
        rc = hearth_json_quote(&out, tmpl, tmpl_len);
    if (!rc)
        rc = hearth_buf_printf(&out, ",\"chat_template_name\":\"%s\",\"chat_template_source\":\"%s\",\"bos_token\":", tmpl_name,
                               m->tmpl_source);
    if (!rc)
        rc = hearth_json_quote(&out, m->bos_text, strlen(m->bos_text));
    const hearth_vocab *v = hearth_decoder_vocab(m->dec);
    const char *eos = v->eos >= 0 ? v->text[v->eos] : "";
    if (!rc)
        rc = hearth_buf_appends(&out, ",\"eos_token\":");
    if (!rc)
        rc = hearth_json_quote(&out, eos, strlen(eos));
    if (!rc)
        rc = hearth_buf_appends(&out, ",\"build_info\":\"hearth " HEARTH_VERSION "\"}");
    hearth_api_send_buf(req, &out, rc, "answer");
    hearth_buf_deinit(&out);
}

int hearth_api_register_generation(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "POST", "/completion", completion, api);
    if (!rc) /* llama-server's newer name for the same */
        rc = hearth_server_route(s, "POST", "/completions", completion, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/detokenize", detokenize, api);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/props", props, api);
    if (!rc)
        rc = hearth_api_register_infill(api, s);
    if (!rc)
        rc = hearth_api_register_slots(api, s);
    if (!rc)
        rc = hearth_api_register_openai_gen(api, s);
    return rc;
}
