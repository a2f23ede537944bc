/* openai_gen.c: OpenAI's text generation: POST /v1/chat/completions and
 * POST /v1/completions (and /chat/completions, as llama-server also answers;
 * its /completions is its own /completion, completion.c's), one JSON answer
 * or, with "stream": true,
 * server-sent "chunk" events ending in "data: [DONE]".
 *
 * The shapes are what the official clients parse: ids "chatcmpl-<hex>" and
 * "cmpl-<hex>", object, created, model (the request's own name when it sent
 * one, as llama-server echoes it: a lone model answers any name, see
 * hearth_gen_find_or_respond; without one, llama-server's "gpt-3.5-turbo"
 * unless the operator named the model; the X-Hearth-Model header names the
 * model that answered), system_fingerprint, choices with
 * message | delta | text and finish_reason ("stop" | "length"), usage
 * (with prompt_tokens_details.cached_tokens for the reused prefix). A chat
 * stream opens with a delta carrying the role, then content deltas, then an
 * empty delta with finish_reason, the usage and llama-server's timings (as
 * llama-server's last chunk has them), then (stream_options.include_usage)
 * OpenAI's chunk with "choices": [] and usage. llama-server's extra sampling fields
 * (top_k, min_p, repeat_penalty, n_probs, cache_prompt, ...) are accepted
 * here too, as llama-server accepts them.
 *
 * A chat prompt is the model's template rendered by a built-in
 * (chat_template.h; chatml when the GGUF has none hearth knows, as
 * llama-server falls back), tokenized with special tokens parsed. BOS: the llama3,
 * gemma, mistral and llama2 layouts write the vocabulary's BOS text
 * themselves, so the tokenizer adds none (a second BOS degrades those
 * models); chatml and phi3 write none, so BOS is prepended when the
 * vocabulary asks for one (add_bos: phi3's SentencePiece vocabulary does,
 * Qwen's chatml BPE vocabulary does not). This is the single BOS llama-server
 * ends up with after stripping a template's leading BOS.
 *
 * logprobs (chat's with top_logprobs, completions' as a count) are given
 * as llama-server gives them: {"content": [entries of OpenAI's chat shape]}
 * in each choice (each chunk when streamed).
 *
 * Several prompts in /v1/completions are answered as llama-server answers
 * them (gen_common.h, hearth_gen_group_submit), whole or streamed (one
 * stream, each chunk's choice naming its prompt, [DONE] once).
 *
 * Structured output (response_format json_object / json_schema, and
 * llama-server's grammar and json_schema) constrains the sampling
 * (gen_grammar.c).
 *
 * Function calling (tools, tool_choice, parallel_tool_calls; "tool" turns
 * and assistant tool_calls in the conversation): the tools are offered in
 * the template family's format (text/chat_template.h), a forced choice
 * ("required", a named tool) samples under a grammar of the call
 * (tool_calls.c), and the answer is read for calls (tool_parse.c): found,
 * the message has tool_calls, content null (or the text before them) and
 * finish_reason "tool_calls"; streamed, what may be a call is held back
 * and sent at the end as OpenAI's delta.tool_calls, one chunk a call.
 *
 * What hearth does not do is refused with a 400 naming it, never ignored:
 * n > 1, echo, suffix, best_of > 1. */
#include "chat_jinja.h"
#include "gen_common.h"
#include "respond.h"

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

/* The longest rendered conversation kept: a 16 MiB body cannot render to more. */
#define CHAT_TEXT_MAX ((size_t)32 << 20)

static int chunk_head(hearth_gen_call *c, const char *object, hearth_buf *out)
{
    int rc = hearth_buf_appends(out, "{\"id\":");
    if (!rc)
        rc = hearth_json_quote(out, c->id, strlen(c->id));
    if (!rc)
        rc = hearth_buf_printf(out, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, (long long)c->created);
    const char *model = c->echo_model ? c->echo_model : c->model->info->name;
    if (!rc)
        rc = hearth_json_quote(out, model, strlen(model));
    if (!rc)
        /* llama-server's is "b<build>-<commit>", and its clients (its own tests
         * among them) check the leading "b" */
        rc = hearth_buf_appends(out, ",\"system_fingerprint\":\"b-hearth-" HEARTH_VERSION "\"");
    return rc;
}

/* Opens a streamed event's chunk up to its choice's first field:
 * data: {"id",...,"choices":[{"index":N, */
static int chunk_open(hearth_gen_call *c, const char *object, hearth_buf *out)
{
    int rc = hearth_gen_sse_open(out);
    if (!rc)
        rc = chunk_head(c, object, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"choices\":[{\"index\":%d,", c->index);
    return rc;
}

/* Closes a chunk before the last, after its choice's logprobs: no
 * finish_reason yet, then the event's end (hearth_gen_event_end: the
 * timings with timings_per_token). */
static int chunk_tail(hearth_gen_call *c, hearth_buf *out)
{
    int rc = hearth_buf_appends(out, ",\"finish_reason\":null}]");
    if (!rc)
        rc = hearth_gen_event_end(c, out);
    return rc;
}

static int usage(const hearth_gen_stats *st, hearth_buf *out)
{
    return hearth_buf_printf(out,
                             "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
                             "\"prompt_tokens_details\":{\"cached_tokens\":%lld}}",
                             (long long)st->n_prompt, (long long)st->n_gen, (long long)(st->n_prompt + st->n_gen),
                             (long long)st->n_cached);
}

/* "logprobs": null, or with n_probs (OpenAI's logprobs) {"content": [...]}:
 * an entry per token since the last event (or, whole, all of them), each
 * {id, token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}]},
 * the shape of OpenAI's chat logprobs, which llama-server gives on both
 * endpoints. */
static int append_logprobs(hearth_gen_call *c, hearth_buf *out)
{
    if (c->g.n_probs <= 0)
        return hearth_buf_appends(out, "\"logprobs\":null");
    int rc = hearth_buf_appends(out, "\"logprobs\":{\"content\":[");
    if (!rc && c->probs.len)
        rc = hearth_buf_append(out, c->probs.data, c->probs.len);
    if (!rc)
        rc = hearth_buf_appends(out, "]}");
    return rc;
}

/* The events after the last piece: the finishing chunk, the usage chunk (gen_common adds [DONE]). */
static int stream_tail(hearth_gen_call *c, const hearth_gen_stats *st, const char *object, const char *empty_choice,
                       const char *finish, hearth_buf *out)
{
    int rc = chunk_open(c, object, out);
    if (!rc)
        rc = hearth_buf_printf(out, "%s,\"logprobs\":null,\"finish_reason\":\"%s\"}]", empty_choice, finish);
    /* llama-server's last chunk carries the usage and the timings, asked for
     * or not (llama.cpp's own suite reads them there; OpenAI's clients parse
     * a chunk's usage as optional); OpenAI's clients read usage from the
     * chunk after it, asked for with include_usage */
    if (!rc)
        rc = hearth_buf_appends(out, ",");
    if (!rc)
        rc = usage(st, out);
    if (!rc)
        rc = hearth_buf_appends(out, ",");
    if (!rc)
        rc = hearth_gen_append_timings(out, st);
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    if (!rc)
        rc = hearth_gen_sse_close(out);
    if (!rc && c->include_usage) {
        rc = hearth_gen_sse_open(out);
        if (!rc)
            rc = chunk_head(c, object, out);
        if (!rc)
            rc = hearth_buf_appends(out, ",\"choices\":[],");
        if (!rc)
            rc = usage(st, out);
        if (!rc)
            rc = hearth_buf_appends(out, "}");
        if (!rc)
            rc = hearth_gen_sse_close(out);
    }
    return rc;
}

/* ,"__verbose":{...}: what llama-server's -v adds to an OpenAI answer, its
 * /completion answer for the same generation (the fields clients read:
 * content, prompt as text, the token counts, stop_type, timings). */
static int append_verbose(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    int rc = hearth_buf_appends(out, ",\"__verbose\":{\"content\":");
    if (!rc)
        rc = hearth_json_quote(out, c->text.data ? c->text.data : "", c->text.len);
    if (!rc)
        rc = hearth_gen_append_prompt(c, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"tokens_predicted\":%lld,\"tokens_evaluated\":%lld,\"tokens_cached\":%lld,"
                                    "\"stop_type\":\"%s\",\"truncated\":%s,",
                               (long long)st->n_gen, (long long)st->n_prompt, (long long)st->n_cached,
                               hearth_gen_stop_type(st), hearth_gen_truncated(c, st) ? "true" : "false");
    if (!rc)
        rc = hearth_gen_append_timings(out, st);
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    return rc;
}

/* The text before a call: its spaces trimmed; 0 when nothing else. */
static size_t call_prefix(const char *s, size_t n, size_t *start)
{
    size_t a = 0;
    while (a < n && (s[a] == ' ' || s[a] == '\n' || s[a] == '\t' || s[a] == '\r'))
        a++;
    while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    *start = a;
    return n - a;
}

/* The non-streamed answer: choice is the opening of choices[0]'s content
 * field. With calls (chat), the content is the text before them (null when
 * none) and the message lists them. */
static int whole(hearth_gen_call *c, const hearth_gen_stats *st, const char *object, const char *choice_open,
                 const char *choice_close, const hearth_tool_parse *calls, hearth_buf *out)
{
    int rc = chunk_head(c, object, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"choices\":[{\"index\":%d,%s", c->index, choice_open);
    size_t at = 0, len = c->text.len;
    if (calls)
        len = call_prefix(c->text.data, calls->content_len, &at);
    if (!rc && calls && !len)
        rc = hearth_buf_appends(out, "null");
    else if (!rc)
        rc = hearth_json_quote(out, c->text.data ? c->text.data + at : "", len);
    if (!rc && calls)
        rc = hearth_buf_appends(out, ",");
    if (!rc && calls)
        rc = hearth_tools_append_calls(calls, -1, out);
    if (!rc)
        rc = hearth_buf_printf(out, "%s,", choice_close);
    if (!rc)
        rc = append_logprobs(c, out);
    if (!rc)
        rc = hearth_buf_printf(out, ",\"finish_reason\":\"%s\"}],", calls ? "tool_calls" : hearth_gen_finish_reason(st));
    if (!rc)
        rc = usage(st, out);
    if (!rc)
        rc = hearth_buf_appends(out, ",");
    if (!rc)
        rc = hearth_gen_append_timings(out, st);
    if (!rc && c->verbose) /* serve -v: llama-server's "__verbose", the answer /completion would give */
        rc = append_verbose(c, st, out);
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    return rc;
}

/* One content chunk; field_open is what precedes the quoted piece. */
static int piece_chunk(hearth_gen_call *c, const char *object, const char *field_open, const char *field_close,
                       const char *text, size_t n, hearth_buf *out)
{
    int rc = chunk_open(c, object, out);
    if (!rc)
        rc = hearth_buf_appends(out, field_open);
    if (!rc)
        rc = hearth_json_quote(out, text, n);
    if (!rc)
        rc = hearth_buf_printf(out, "%s,", field_close);
    if (!rc)
        rc = append_logprobs(c, out);
    if (!rc)
        rc = chunk_tail(c, out);
    return rc;
}

/* ---- chat ---- */

static int chat_start(hearth_gen_call *c, hearth_buf *out)
{
    /* OpenAI's first chunk names the role. With logprobs asked, its logprobs
     * is an empty list, not null: llama-server (which sends no such chunk)
     * has logprobs in every chunk before the last, and clients rely on it */
    int rc = chunk_open(c, "chat.completion.chunk", out);
    if (!rc)
        rc = hearth_buf_appends(out, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},");
    if (!rc) /* (c->probs may hold the first piece's already: it goes out with that piece) */
        rc = hearth_buf_appends(out, c->g.n_probs > 0 ? "\"logprobs\":{\"content\":[]}" : "\"logprobs\":null");
    if (!rc)
        rc = chunk_tail(c, out);
    return rc;
}

static int content_chunk(hearth_gen_call *c, const char *text, size_t n, hearth_buf *out)
{
    return piece_chunk(c, "chat.completion.chunk", "\"delta\":{\"content\":", "}", text, n, out);
}

/* With tools, a piece that may begin a call is held (tool_parse.c) and
 * goes out at the end, as content or as calls. */
static int chat_piece(hearth_gen_call *c, const char *text, size_t n, hearth_buf *out)
{
    if (!c->tools)
        return content_chunk(c, text, n, out);
    size_t ready = 0;
    int rc = hearth_tools_stream_feed(c->tools, text, n, &ready);
    if (!rc && ready) {
        rc = content_chunk(c, c->tools->held.data, ready, out);
        hearth_buf_consume(&c->tools->held, ready);
    }
    return rc;
}

/* The end of a streamed answer with tools: what was held, as a content
 * chunk or as one chunk per call; then the finishing chunks. */
static int chat_stream_end(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    hearth_tool_set *ts = c->tools;
    hearth_tool_parse p;
    int k = hearth_tools_parse_output(ts->style, (const char *const *)ts->names, ts->n, ts->held.data, ts->held.len, &p);
    int rc = k < 0 ? k : 0;
    size_t at = 0, len = k > 0 ? call_prefix(ts->held.data, p.content_len, &at) : ts->held.len;
    if (!rc && len)
        rc = content_chunk(c, ts->held.data + at, len, out);
    for (int i = 0; !rc && i < k; i++) {
        rc = chunk_open(c, "chat.completion.chunk", out);
        if (!rc)
            rc = hearth_buf_appends(out, "\"delta\":{");
        if (!rc)
            rc = hearth_tools_append_calls(&p, i, out);
        if (!rc)
            rc = hearth_buf_appends(out, "},\"logprobs\":null");
        if (!rc)
            rc = chunk_tail(c, out);
    }
    if (!rc)
        rc = stream_tail(c, st, "chat.completion.chunk", "\"delta\":{}", k > 0 ? "tool_calls" : hearth_gen_finish_reason(st),
                         out);
    if (k > 0)
        hearth_tool_parse_deinit(&p);
    return rc;
}

static int chat_end(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    if (c->stream && c->tools)
        return chat_stream_end(c, st, out);
    if (c->stream)
        return stream_tail(c, st, "chat.completion.chunk", "\"delta\":{}", hearth_gen_finish_reason(st), out);
    hearth_tool_parse p = {0};
    int k = 0;
    if (c->tools)
        k = hearth_tools_parse_output(c->tools->style, (const char *const *)c->tools->names, c->tools->n, c->text.data,
                                      c->text.len, &p);
    if (k < 0)
        return k;
    int rc = whole(c, st, "chat.completion", "\"message\":{\"role\":\"assistant\",\"content\":", "}", k > 0 ? &p : NULL,
                   out);
    hearth_tool_parse_deinit(&p);
    return rc;
}

static const hearth_gen_format chat_format = {chat_start, chat_piece, chat_end, true};

/* ---- completions ---- */

static int text_piece(hearth_gen_call *c, const char *text, size_t n, hearth_buf *out)
{
    return piece_chunk(c, "text_completion", "\"text\":", "", text, n, out);
}

static int text_end(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out)
{
    if (c->stream)
        return stream_tail(c, st, "text_completion", "\"text\":\"\"", hearth_gen_finish_reason(st), out);
    return whole(c, st, "text_completion", "\"text\":", "", NULL, out);
}

static const hearth_gen_format text_format = {NULL, text_piece, text_end, true};

/* ---- parsing ---- */

static bool refuse(hearth_request *req, const char *what)
{
    hearth_respond_error(req, 400, "invalid_request_error", "%s", what);
    return false;
}

static bool is_set(const cJSON *f) { return f && !cJSON_IsNull(f) && !cJSON_IsFalse(f); }

/* OpenAI's logprobs, as llama-server maps them onto its n_probs (a request's
 * own n_probs wins): chat's "logprobs": true with "top_logprobs" (0..16;
 * absent: 16, llama-server's 20 capped at hearth's most); completions'
 * "logprobs": N. */
static bool parse_logprobs(hearth_request *req, const cJSON *doc, hearth_gen_call *c, bool chat)
{
    if (cJSON_GetObjectItemCaseSensitive(doc, "n_probs"))
        return true;
    int64_t n = 0;
    if (!chat) {
        if (hearth_gen_opt_int(req, doc, "logprobs", 0, 16, &n) < 0)
            return false;
        c->g.n_probs = (int)n;
        return true;
    }
    bool want = false;
    if (hearth_gen_opt_bool(req, doc, "logprobs", &want) < 0)
        return false;
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(doc, "top_logprobs");
    if (!want && top && !cJSON_IsNull(top))
        return refuse(req, "'top_logprobs' requires 'logprobs' to be true");
    n = 16;
    if (want && hearth_gen_opt_int(req, doc, "top_logprobs", 0, 16, &n) < 0)
        return false;
    c->g.n_probs = want ? (int)n : 0;
    return true;
}

/* The fields both OpenAI endpoints share. */
static bool parse_openai(hearth_request *req, const cJSON *doc, hearth_gen_call *c, bool chat, int64_t *n_predict)
{
    if (!hearth_gen_parse_sampling(req, doc, c) || !hearth_gen_parse_grammar(req, doc, c, chat) ||
        !parse_logprobs(req, doc, c, chat))
        return false;
    int64_t n = 1;
    if (hearth_gen_opt_int(req, doc, "n", 1, INT32_MAX, &n) < 0)
        return false;
    if (n != 1)
        return refuse(req, "'n' must be 1: hearth makes one choice per request (send several requests; they are batched)");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(doc, "stream_options");
    if (so && !cJSON_IsNull(so) && !cJSON_IsObject(so))
        return refuse(req, "'stream_options' must be an object");
    if (cJSON_IsObject(so) && hearth_gen_opt_bool(req, so, "include_usage", &c->include_usage) < 0)
        return false;
    /* max_completion_tokens is the newer name; max_tokens the older; n_predict llama-server's */
    const char *keys[] = {"max_completion_tokens", "max_tokens", "n_predict"};
    for (int i = 0; i < 3; i++) {
        int r = hearth_gen_opt_int(req, doc, keys[i], i == 2 ? -1 : 1, INT32_MAX, n_predict);
        if (r < 0)
            return false;
        if (r)
            break;
    }
    return true;
}

/* The text of a message's content: a string, or text parts joined by newlines. */
static char *content_text(hearth_request *req, const cJSON *content, int i)
{
    if (cJSON_IsString(content))
        return strdup(content->valuestring);
    if (!cJSON_IsArray(content)) {
        hearth_respond_error(req, 400, "invalid_request_error",
                             "messages[%d].content must be a string or a list of {\"type\": \"text\", \"text\": ...} parts", i);
        return NULL;
    }
    hearth_buf b;
    hearth_buf_init(&b, CHAT_TEXT_MAX);
    int rc = hearth_buf_appends(&b, "");
    int k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            hearth_respond_error(req, 400, "invalid_request_error",
                                 "messages[%d].content[%d]: only {\"type\": \"text\", \"text\": ...} parts are supported", i, k);
            hearth_buf_deinit(&b);
            return NULL;
        }
        if (!rc && k)
            rc = hearth_buf_append(&b, "\n", 1);
        if (!rc)
            rc = hearth_buf_appends(&b, text->valuestring);
        k++;
    }
    if (rc) {
        hearth_respond_error(req, 413, "request_too_large", "messages[%d].content is too long", i);
        hearth_buf_deinit(&b);
        return NULL;
    }
    return b.data; /* owned by the caller now */
}

/* One message into msgs[i] (its text in *text, owned; an assistant turn's
 * calls in msgs[i].tool_calls, owned): roles system (or OpenAI's newer
 * "developer"), user, assistant (content null or absent when it calls
 * tools) and tool (a result: its function named by "name" or by the call
 * its tool_call_id answers). False after a 400. */
static bool read_message(hearth_request *req, const cJSON *messages, const cJSON *msg, int i, hearth_chat_msg *out,
                         char **text)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    if (!cJSON_IsString(role)) {
        hearth_respond_error(req, 400, "invalid_request_error", "messages[%d].role must be a string", i);
        return false;
    }
    const char *r = role->valuestring;
    if (!strcmp(r, "developer"))
        r = "system"; /* OpenAI's newer name for the system role */
    if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
        hearth_respond_error(req, 400, "invalid_request_error",
                             "messages[%d].role '%s' is not supported: use system, user, assistant or tool", i,
                             role->valuestring);
        return false;
    }
    out->role = r;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (!strcmp(r, "assistant") && calls && !cJSON_IsNull(calls)) {
        hearth_chat_tool_call *tc = NULL;
        hearth_err err = {0};
        if (hearth_tools_msg_calls(calls, i, &tc, &out->n_tool_calls, &err) != 0) {
            hearth_respond_error(req, err.code == HEARTH_EINVAL ? 400 : 503,
                                 err.code == HEARTH_EINVAL ? "invalid_request_error" : "unavailable_error", "%s", err.msg);
            return false;
        }
        out->tool_calls = tc;
        if (!content || cJSON_IsNull(content)) { /* a turn that only calls */
            if (!(*text = strdup(""))) {
                hearth_respond_error(req, 503, "unavailable_error", "out of memory");
                return false;
            }
            out->content = *text;
            return true;
        }
    }
    if (!strcmp(r, "tool"))
        out->name = hearth_tools_result_name(messages, i);
    if (!(*text = content_text(req, content, i)))
        return false;
    out->content = *text;
    return true;
}

/* Renders messages with m's template into text (a buffer the caller
 * initialised), the tools of ts offered (NULL: none); false after responding. */
static bool render_messages(hearth_request *req, hearth_gen_entry *m, const cJSON *messages, const hearth_tool_set *ts,
                            hearth_buf *text)
{
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
        return refuse(req, "'messages' must be a non-empty list of {\"role\", \"content\"}");
    int n = cJSON_GetArraySize(messages);
    hearth_chat_msg *msgs = calloc((size_t)n, sizeof *msgs);
    char **texts = calloc((size_t)n, sizeof *texts);
    bool ok = false;
    if (!msgs || !texts) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        goto out;
    }
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, messages)
    {
        if (!read_message(req, messages, msg, i, &msgs[i], &texts[i]))
            goto out;
        i++;
    }
    hearth_err err = {0};
    const char *const *tools = ts ? (const char *const *)ts->texts : NULL;
    size_t n_tools = ts ? (size_t)ts->n : 0;
    int rc;
    if (m->jinja) {
        const hearth_vocab *v = hearth_decoder_vocab(m->dec);
        rc = hearth_chat_jinja_render(m->jinja, &m->jinja_caps, msgs, (size_t)n, tools, n_tools, true, m->bos_text,
                                      v->eos >= 0 ? v->text[v->eos] : "", text, &err);
    } else {
        rc = hearth_chat_template_render_tools(m->tmpl, msgs, (size_t)n, tools, n_tools, true, m->bos_text, text, &err);
    }
    if (rc) {
        if (rc == HEARTH_EINVAL)
            hearth_respond_error(req, 400, "invalid_request_error", "the %s template: %s",
                                 m->jinja ? "chat" : hearth_chat_template_name(m->tmpl), err.msg);
        else if (rc == HEARTH_ENOMEM)
            hearth_respond_error(req, 503, "unavailable_error", "out of memory rendering the chat template");
        else /* HEARTH_ELIMIT: the prompt's size, or (Jinja) the template's step, depth or memory bound */
            hearth_respond_error(req, 413, "request_too_large", "the conversation is too long (%s)",
                                 err.msg[0] ? err.msg : "its prompt text passes the limit");
        goto out;
    }
    ok = true;
out:
    for (int k = 0; texts && k < n; k++) {
        free(texts[k]);
        hearth_tools_msg_calls_free((hearth_chat_tool_call *)msgs[k].tool_calls, msgs[k].n_tool_calls);
    }
    free(texts);
    free(msgs);
    return ok;
}

/* Renders messages with the model's template and tokenizes the result into c->prompt. */
static bool chat_prompt(hearth_request *req, hearth_gen_call *c, const cJSON *messages)
{
    hearth_gen_entry *m = c->model;
    hearth_buf text;
    hearth_buf_init(&text, CHAT_TEXT_MAX);
    bool ok = render_messages(req, m, messages, c->tools, &text);
    if (ok) {
        const hearth_tokenizer *t = hearth_decoder_tokenizer(m->dec);
        size_t bos_len = strlen(m->bos_text);
        bool wrote_bos = bos_len && text.len >= bos_len && !memcmp(text.data, m->bos_text, bos_len);
        if (!wrote_bos && t->add_bos && t->bos >= 0 && hearth_ids_push(&c->prompt, t->bos) != 0) {
            hearth_respond_error(req, 503, "unavailable_error", "out of memory");
            ok = false;
        }
    }
    ok = ok && hearth_gen_encode(req, c, text.data ? text.data : "", text.len, false);
    hearth_buf_deinit(&text);
    return ok;
}

/* The request's tools into *ts (NULL: none in play); false after a 400. */
static bool read_tools(hearth_request *req, const cJSON *doc, const hearth_gen_entry *m, hearth_tool_set **ts)
{
    hearth_err err = {0};
    int rc = hearth_tools_from_json(doc, m->tmpl, ts, &err);
    if (rc)
        hearth_respond_error(req, rc == HEARTH_EINVAL ? 400 : 503,
                             rc == HEARTH_EINVAL ? "invalid_request_error" : "unavailable_error", "%s", err.msg);
    return rc == 0;
}

/* A forced call (tool_choice "required" or a named tool): the grammar
 * that makes one; false after a 400. */
static bool force_call(hearth_request *req, hearth_gen_call *c)
{
    if (c->grammar)
        return refuse(req, "tool_choice \"required\" or a named tool constrains the answer to a call: it cannot be "
                           "combined with 'grammar', 'json_schema' or 'response_format'");
    hearth_buf gbnf;
    hearth_buf_init(&gbnf, HEARTH_GRAMMAR_MAX_TEXT);
    hearth_err err = {0};
    bool ok = false;
    int rc = hearth_tools_grammar(c->tools, &gbnf, &err);
    if (rc)
        hearth_respond_error(req, rc == HEARTH_EINVAL ? 400 : 503,
                             rc == HEARTH_EINVAL ? "invalid_request_error" : "unavailable_error", "%s", err.msg);
    else
        ok = hearth_gen_set_grammar(req, c, gbnf.data, gbnf.len, "tools");
    hearth_buf_deinit(&gbnf);
    return ok;
}

/* llama-server's POST /apply-template: {"messages": [...]} -> {"prompt":
 * the text the chat endpoints would tokenize}, the model's template applied
 * and nothing generated. */
static void apply_template(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc;
    hearth_gen_entry *m = hearth_gen_open(req, api, &doc);
    if (!m)
        return;
    hearth_buf text, out;
    hearth_buf_init(&text, CHAT_TEXT_MAX);
    hearth_buf_init(&out, 2 * CHAT_TEXT_MAX);
    hearth_tool_set *ts = NULL;
    if (read_tools(req, doc, m, &ts) &&
        render_messages(req, m, cJSON_GetObjectItemCaseSensitive(doc, "messages"), ts, &text)) {
        int rc = hearth_buf_appends(&out, "{\"prompt\":");
        if (!rc)
            rc = hearth_json_quote(&out, text.data ? text.data : "", text.len);
        if (!rc)
            rc = hearth_buf_appends(&out, "}");
        hearth_api_send_buf(req, &out, rc, "prompt");
    }
    hearth_tool_set_free(ts);
    hearth_buf_deinit(&text);
    hearth_buf_deinit(&out);
    cJSON_Delete(doc);
}

/* Starts a call for m with the fields both endpoints share; NULL after responding. */
static hearth_gen_call *start_call(hearth_request *req, hearth_api *api, hearth_gen_entry *m, const cJSON *doc,
                                   const hearth_gen_format *fmt, const char *id_prefix, int64_t *n_predict)
{
    hearth_gen_call *c = hearth_gen_call_new(m, fmt);
    if (!c) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return NULL;
    }
    hearth_gen_call_set_id(c, id_prefix);
    c->verbose = api->cfg.verbose;
    /* The answer's "model" is the name asked for (hearth_gen_named_model
     * checked it is a string and routed it), as llama-server and OpenAI's
     * clients expect; X-Hearth-Model and this log line say what answered */
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "model");
    /* A request naming no model gets llama-server's default name when the
     * operator named none either (its DEFAULT_OAICOMPAT_MODEL; clients and
     * llama.cpp's own tests read it): with --alias or NAME=PATH, that name */
    const char *echo = cJSON_IsString(name) ? name->valuestring : m->info->named ? NULL : "gpt-3.5-turbo";
    if (echo && !(c->echo_model = strdup(echo))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        hearth_gen_call_free(c);
        return NULL;
    }
    if (cJSON_IsString(name) && strcmp(c->echo_model, m->info->name))
        HLOG_INFO("%s: model '%.200s' asked, answered by %s", c->id, c->echo_model, m->info->name);
    if (!parse_openai(req, doc, c, fmt == &chat_format, n_predict)) {
        hearth_gen_call_free(c);
        return NULL;
    }
    return c;
}

static void chat_completions(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc;
    hearth_gen_entry *m = hearth_gen_open(req, api, &doc);
    if (!m)
        return;
    int64_t n_predict = -1;
    hearth_gen_call *c = start_call(req, api, m, doc, &chat_format, "chatcmpl-", &n_predict);
    if (!c)
        goto out;
    if (!read_tools(req, doc, m, &c->tools))
        ; /* answered */
    else if (c->tools && c->tools->choice != HEARTH_TOOL_AUTO && !force_call(req, c))
        ; /* answered */
    else if (chat_prompt(req, c, cJSON_GetObjectItemCaseSensitive(doc, "messages"))) {
        hearth_gen_call_submit(req, api, c, n_predict);
        c = NULL;
    }
    hearth_gen_call_free(c);
out:
    cJSON_Delete(doc);
}

/* What every call of one /v1/completions request shares. */
typedef struct completions_ctx {
    hearth_api *api;
    hearth_gen_entry *model;
} completions_ctx;

/* One call of a /v1/completions request for prompt (key names it); arg is
 * its completions_ctx. NULL after responding. */
static hearth_gen_call *completions_call(hearth_request *req, void *arg, const cJSON *doc, const cJSON *prompt,
                                         const char *key, int64_t *n_predict)
{
    completions_ctx *x = arg;
    int64_t best_of = 1;
    hearth_gen_call *c = start_call(req, x->api, x->model, doc, &text_format, "cmpl-", n_predict);
    if (!c)
        return NULL;
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(doc, "suffix");
    if (is_set(cJSON_GetObjectItemCaseSensitive(doc, "echo")))
        refuse(req, "'echo' is not supported by hearth");
    else if (suffix && !cJSON_IsNull(suffix) && !(cJSON_IsString(suffix) && !suffix->valuestring[0]))
        refuse(req, "'suffix' (insertion) is not supported by hearth");
    else if (hearth_gen_opt_int(req, doc, "best_of", 1, 1, &best_of) < 0)
        ; /* answered: hearth makes one choice per request */
    else if (hearth_gen_prompt_from_json(req, c, prompt, key))
        return c;
    hearth_gen_call_free(c);
    return NULL;
}

/* Several prompts are answered as llama-server answers them: a JSON array of
 * completions, one per prompt, in order (not OpenAI's one object with a
 * choice per prompt). */
static void completions(hearth_request *req, void *ctx)
{
    completions_ctx x = {.api = ctx};
    cJSON *doc;
    if (!(x.model = hearth_gen_open(req, x.api, &doc)))
        return;
    hearth_gen_submit_prompts(req, x.api, doc, completions_call, &x);
    cJSON_Delete(doc);
}

int hearth_api_register_openai_gen(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "POST", "/v1/chat/completions", chat_completions, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/apply-template", apply_template, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/chat/completions", chat_completions, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/v1/completions", completions, api);
    return rc;
}
