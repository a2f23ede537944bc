/* gen_common.c: the machinery the generation APIs share (see gen_common.h).
 *
 * A request becomes a hearth_gen_call: the handler parses and validates on
 * the thread the server runs it on (tokenizing there too, so a bad prompt
 * gets its 400 before any queueing): the loop thread for a small body, a
 * handler thread for a big one, whose tokenizing takes seconds (server.h).
 * It defers the connection, then submits. Deferring
 * comes first on purpose: the scheduler may answer before submit returns, and
 * its reply must already have a handle to go to.
 *
 * The scheduler thread calls on_text / on_done. A streamed answer posts its
 * head lazily, from the scheduler thread, with the first event: every message
 * for the connection then comes from one thread, in order, and a request the
 * queue refused can still get a plain 503 (not a 200 stream holding an error).
 * The call is shared by the scheduler (until on_done) and the connection
 * (until its release callback) and freed by whichever lets go last. A client
 * that goes away sets g.cancelled and pokes the scheduler, which frees the
 * slot at its next step rather than generating into the void.
 *
 * Several prompts in one request are a group of calls (hearth_gen_group,
 * below): one deferred connection, one call per prompt, batched by the
 * scheduler like separate requests, one answer when the last is done.
 *
 * Rejected: a per-request arena shared across threads (the call is the only
 * cross-thread object, and it owns plain buffers); formatting with cJSON on
 * the scheduler thread (the per-token events are a few fixed fields: printf
 * into a reused buffer costs no allocation per token). */
#include "gen_common.h"
#include "json_body.h"

#include "base/clock.h"
#include "base/log.h"
#include "engine/dev.h"
#include "base/random.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far above any answer a context of a few thousand tokens can produce; only a bound. */
#define TEXT_MAX ((size_t)64 << 20)
/* More ids than a 16 MiB body can tokenize to (a byte per token, plus specials). */
#define PROMPT_MAX ((size_t)1 << 25)

hearth_gen_call *hearth_gen_call_new(hearth_gen_entry *m, const hearth_gen_format *fmt)
{
    hearth_gen_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->model = m;
    c->fmt = fmt;
    c->g.sampling = m->sampling;
    c->g.n_predict = -1;
    c->g.cache_prompt = true;
    c->g.user = c;
    /* bounded by the body limit, not the context, so a long prompt's 400 can say its length */
    hearth_ids_init(&c->prompt, PROMPT_MAX);
    hearth_buf_init(&c->text, TEXT_MAX);
    hearth_buf_init(&c->probs, TEXT_MAX);
    hearth_buf_init(&c->tokens, TEXT_MAX);
    hearth_buf_init(&c->scratch, TEXT_MAX);
    atomic_store(&c->refs, 2);
    c->created = hearth_unix_time();
    return c;
}

void hearth_gen_call_free(hearth_gen_call *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->g.n_stop; i++)
        free(c->stop[i]);
    for (int i = 0; i < c->n_fields; i++)
        free(c->fields[i]);
    free(c->fields);
    free(c->echo_model);
    hearth_ids_deinit(&c->prompt);
    hearth_buf_deinit(&c->text);
    hearth_buf_deinit(&c->probs);
    hearth_buf_deinit(&c->tokens);
    hearth_buf_deinit(&c->scratch);
    hearth_grammar_free(c->grammar);
    hearth_tool_set_free(c->tools);
    free(c);
}

static void call_unref(hearth_gen_call *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        hearth_gen_call_free(c);
}

void hearth_gen_call_set_id(hearth_gen_call *c, const char *prefix)
{
    uint64_t a = hearth_random_u64(), b = hearth_random_u64();
    snprintf(c->id, sizeof c->id, "%s%016llx%08llx", prefix, (unsigned long long)a, (unsigned long long)(b >> 32));
}

/* ---- several prompts: a group of calls, one answer ----
 *
 * Each call of a group formats its whole answer into its own scratch (or
 * keeps its error); the one that finishes last, on whichever thread,
 * sends them all. Atomics, not a lock: a call writes only its own fields
 * before its decrement of left, and the last decrement sees them all. The
 * group holds the calls until both its sides let go: the calls' (when the
 * last finishes) and the connection's (its release callback, which cancels
 * the calls that still run).
 *
 * Streamed, the calls write their events to the one stream as they come,
 * each naming its prompt ("index", as llama-server's), interleaved as the
 * scheduler batches them; the head goes out with the first event and the
 * last call to finish ends the stream ([DONE] once, where the API has it).
 * Every call of a group is on one model's scheduler thread, so the stream's
 * writes come from one thread, in order. */
struct hearth_gen_group {
    hearth_gen_call **calls;
    int n;
    _Atomic int left;              /* calls still to finish */
    _Atomic int refs;              /* the calls' side and the connection's */
    hearth_server *server;
    hearth_reply reply;
    bool stream;
    bool begun;                    /* streamed: the head is out (scheduler thread) */
};

/* ---- replying (scheduler thread) ---- */

/* The head lines every answer carries: extra (lines ending in CRLF, or
 * "") and X-Hearth-Model naming the model that served the request. OpenAI
 * answers echo the request's "model" in their JSON as llama-server does, so
 * a client that sent "gpt-4o" learns from this header what answered it. A
 * name is written up to its first control byte (it comes from the command
 * line, not the request, but a header must stay one line). */
static void head_lines(const hearth_gen_entry *m, const char *extra, char *out, size_t size)
{
    const char *name = m->info->name;
    size_t n = 0;
    while (name[n] && (unsigned char)name[n] >= 0x20 && name[n] != 0x7f && n < 256)
        n++;
    snprintf(out, size, "%sX-Hearth-Model: %.*s\r\n", extra, (int)n, name);
}

static void send_error(hearth_gen_call *c, int status, const char *type, const char *msg)
{
    if (c->group) { /* kept for the group's answer (group_finish) */
        c->err_status = status;
        snprintf(c->err_type, sizeof c->err_type, "%s", type);
        snprintf(c->err_msg, sizeof c->err_msg, "%s", msg);
        return;
    }
    if (!c->begun) {
        hearth_reply_error(c->server, c->reply, status, type, msg);
        return;
    }
    /* the head said 200 already: the error travels as a last event */
    hearth_buf ev;
    hearth_buf_init(&ev, 16384);
    hearth_gen_sse_open(&ev);
    hearth_format_error(&ev, status, type, msg);
    hearth_gen_sse_close(&ev);
    hearth_reply_stream_write(c->server, c->reply, ev.data, ev.len);
    hearth_reply_stream_end(c->server, c->reply);
    hearth_buf_deinit(&ev);
}

static int stream_begin(hearth_gen_call *c)
{
    if (c->begun)
        return HEARTH_OK;
    c->begun = true;
    int rc = HEARTH_OK;
    if (!c->group || !c->group->begun) { /* a group's stream has one head */
        if (c->group)
            c->group->begun = true;
        char head[400];
        head_lines(c->model, "Cache-Control: no-cache\r\n", head, sizeof head);
        rc = hearth_reply_stream_begin(c->server, c->reply, 200, "text/event-stream", head);
    }
    if (!rc && c->fmt->start) {
        hearth_buf_reset(&c->scratch, 1 << 16);
        rc = c->fmt->start(c, &c->scratch);
        if (!rc)
            rc = hearth_reply_stream_write(c->server, c->reply, c->scratch.data, c->scratch.len);
    }
    return rc;
}

/* The bytes of token id as a JSON string and a byte list: "token":...,"bytes":[...] */
static int append_token(hearth_buf *out, const hearth_tokenizer *t, int32_t id)
{
    char piece[512];
    int n = hearth_tokenizer_piece_special(t, id, piece, sizeof piece);
    if (n < 0)
        n = 0; /* a token longer than 512 bytes: shown empty rather than failing the answer */
    int rc = hearth_buf_printf(out, "\"id\":%d,\"token\":", id);
    if (!rc)
        rc = hearth_json_quote(out, piece, (size_t)n);
    if (!rc)
        rc = hearth_buf_appends(out, ",\"bytes\":[");
    for (int i = 0; i < n && !rc; i++)
        rc = hearth_buf_printf(out, i ? ",%u" : "%u", (unsigned)(unsigned char)piece[i]);
    if (!rc)
        rc = hearth_buf_appends(out, "]");
    return rc;
}

static int append_logprob(hearth_buf *out, float p, bool post)
{
    if (post) /* post_sampling_probs: the probability itself */
        return hearth_buf_printf(out, "%.6g", p > 0 ? (double)p : 0.0);
    if (!(p > 0))
        return hearth_buf_appends(out, "-1e30"); /* log 0: JSON has no -Infinity */
    return hearth_buf_printf(out, "%.6g", log((double)p));
}

/* One completion_probabilities entry in llama-server's shape:
 * {"id","token","bytes","logprob","top_logprobs":[{"id","token","bytes","logprob"}]},
 * or with post_sampling_probs {"id","token","bytes","prob","top_probs":[{...,"prob"}]}.
 * The sampled token's logprob is known only when it is among the candidates
 * (always so when sampling greedily); otherwise it is null. After sampling
 * its probability is always known (0 when the filters dropped it). */
static int append_probs(hearth_gen_call *c, int32_t token, const hearth_gen_probs *p)
{
    const hearth_tokenizer *t = hearth_decoder_tokenizer(c->model->dec);
    hearth_buf *out = &c->probs;
    int rc = hearth_buf_appends(out, out->len ? ",{" : "{");
    if (!rc)
        rc = append_token(out, t, token);
    bool post = c->post_sampling_probs;
    const char *key = post ? ",\"prob\":" : ",\"logprob\":";
    if (!rc)
        rc = hearth_buf_appends(out, key);
    int found = -1;
    for (int i = 0; i < p->n; i++)
        if (p->ids[i] == token)
            found = i;
    if (!rc && post && p->token_prob >= 0)
        rc = append_logprob(out, p->token_prob, true);
    else if (!rc)
        rc = found >= 0 ? append_logprob(out, p->probs[found], post) : hearth_buf_appends(out, "null");
    if (!rc)
        rc = hearth_buf_appends(out, post ? ",\"top_probs\":[" : ",\"top_logprobs\":[");
    for (int i = 0; i < p->n && !rc; i++) {
        rc = hearth_buf_appends(out, i ? ",{" : "{");
        if (!rc)
            rc = append_token(out, t, p->ids[i]);
        if (!rc)
            rc = hearth_buf_appends(out, key);
        if (!rc)
            rc = append_logprob(out, p->probs[i], post);
        if (!rc)
            rc = hearth_buf_appends(out, "}");
    }
    if (!rc)
        rc = hearth_buf_appends(out, "]}");
    return rc;
}

static void on_text(hearth_gen_req *g, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    hearth_gen_call *c = g->user;
    int rc = 0;
    if (token >= 0 && !c->n_gen++)
        c->first_ns = hearth_now_ns();
    if (n && memchr(text, '\n', n))
        c->has_new_line = true;
    /* a streamed event lists the ids it carries, as llama-server's do; a whole answer only with return_tokens */
    if (token >= 0 && (c->stream || c->return_tokens))
        rc = hearth_buf_printf(&c->tokens, c->tokens.len ? ",%d" : "%d", token);
    if (!rc && probs && token >= 0)
        rc = append_probs(c, token, probs);
    if (!rc && !c->stream)
        rc = hearth_buf_append(&c->text, text, n);
    if (!rc && c->stream && n > 0) {
        rc = stream_begin(c);
        hearth_buf_reset(&c->scratch, 1 << 16);
        if (!rc)
            rc = c->fmt->piece(c, text, n, &c->scratch);
        /* a piece held back (a chat answer that may be a tool call) keeps
         * its probabilities and ids for the event that carries it */
        if (!rc && c->scratch.len)
            rc = hearth_reply_stream_write(c->server, c->reply, c->scratch.data, c->scratch.len);
        if (c->scratch.len) {
            hearth_buf_reset(&c->probs, 1 << 16);
            hearth_buf_reset(&c->tokens, 1 << 16);
        }
    }
    if (rc) {
        /* out of memory or past a bound: stop generating; on_done then reports it */
        HLOG_WARN("generation %s: cannot format the answer (%s): stopping it", c->id, hearth_status_name(rc));
        atomic_store(&c->g.cancelled, 1);
    }
}

static void group_free(hearth_gen_group *g)
{
    for (int i = 0; i < g->n; i++)
        hearth_gen_call_free(g->calls[i]);
    free(g->calls);
    free(g);
}

static void group_unref(hearth_gen_group *g)
{
    if (atomic_fetch_sub(&g->refs, 1) == 1)
        group_free(g);
}

/* The end of a streamed group: the first failure as a last event (or a
 * plain error when nothing went out yet), else [DONE] where the API has it. */
static void group_stream_end(hearth_gen_group *g)
{
    hearth_buf ev;
    hearth_buf_init(&ev, 16384);
    for (int i = 0; i < g->n; i++) {
        hearth_gen_call *c = g->calls[i];
        if (!c->err_status)
            continue;
        char m[700];
        snprintf(m, sizeof m, "prompt %d: %s", i, c->err_msg);
        if (!g->begun) {
            hearth_reply_error(g->server, g->reply, c->err_status, c->err_type, m);
            hearth_buf_deinit(&ev);
            return;
        }
        hearth_gen_sse_open(&ev);
        hearth_format_error(&ev, c->err_status, c->err_type, m);
        hearth_gen_sse_close(&ev);
        break;
    }
    if (!ev.len && g->calls[0]->fmt->done_marker)
        hearth_buf_appends(&ev, "data: [DONE]\n\n");
    if (!g->begun) { /* every prompt failed before its first event: cannot happen without an error */
        char head[400];
        head_lines(g->calls[0]->model, "Cache-Control: no-cache\r\n", head, sizeof head);
        hearth_reply_stream_begin(g->server, g->reply, 200, "text/event-stream", head);
    }
    if (ev.len)
        hearth_reply_stream_write(g->server, g->reply, ev.data, ev.len);
    hearth_reply_stream_end(g->server, g->reply);
    hearth_buf_deinit(&ev);
}

/* The answer: the first failure's error, or [answer, answer, ...] in order. */
static void group_send(hearth_gen_group *g)
{
    if (g->stream) {
        group_stream_end(g);
        return;
    }
    for (int i = 0; i < g->n; i++) {
        hearth_gen_call *c = g->calls[i];
        if (c->err_status) {
            char m[700];
            snprintf(m, sizeof m, "prompt %d: %s", i, c->err_msg);
            hearth_reply_error(g->server, g->reply, c->err_status, c->err_type, m);
            return;
        }
    }
    hearth_buf out;
    hearth_buf_init(&out, (size_t)g->n * TEXT_MAX);
    int rc = hearth_buf_append(&out, "[", 1);
    for (int i = 0; i < g->n && !rc; i++) {
        if (i)
            rc = hearth_buf_append(&out, ",", 1);
        if (!rc)
            rc = hearth_buf_append(&out, g->calls[i]->scratch.data, g->calls[i]->scratch.len);
    }
    if (!rc)
        rc = hearth_buf_append(&out, "]", 1);
    if (rc) {
        hearth_reply_error(g->server, g->reply, 500, "server_error", "the answer did not fit in memory");
    } else {
        char head[400];
        head_lines(g->calls[0]->model, "", head, sizeof head);
        hearth_response res = {200, "application/json", head, out.data, out.len};
        hearth_reply_send(g->server, g->reply, &res);
    }
    hearth_buf_deinit(&out);
}

static void group_finish(hearth_gen_call *c)
{
    hearth_gen_group *g = c->group;
    if (atomic_fetch_sub(&g->left, 1) == 1) {
        group_send(g);
        group_unref(g);
    }
}

static void group_release(void *arg, bool cancelled)
{
    hearth_gen_group *g = arg;
    if (cancelled) {
        for (int i = 0; i < g->n; i++)
            atomic_store(&g->calls[i]->g.cancelled, 1);
        hearth_gen_sched_poke(g->calls[0]->model->sched);
    }
    group_unref(g);
}

/* After a device error: when the model's device lost its context, nothing
 * will run there again in this process. A worker (--workers) drains and
 * exits, and the supervisor starts a fresh one with a fresh context; a lone
 * process keeps answering 503 and says it must be restarted. */
static void device_failed(hearth_gen_call *c)
{
    hearth_dev *dv = hearth_decoder_device(c->model->dec);
    if (!dv->ops->lost || !dv->ops->lost(dv))
        return;
    static _Atomic int said;
    if (hearth_server_worker_index(c->server) >= 0) {
        if (!said++)
            HLOG_ERROR("%s lost its context: this worker drains and exits, to be respawned", dv->caps.name);
        hearth_server_shutdown(c->server);
    } else if (!said++) {
        HLOG_ERROR("%s lost its context: generation on it answers 503 until hearth is restarted (with --workers, "
                   "a worker would be respawned)", dv->caps.name);
    }
}

static void on_done(hearth_gen_req *g, int status, const char *msg, const hearth_gen_stats *st)
{
    hearth_gen_call *c = g->user;
    if (status == HEARTH_ENOTFOUND) {
        send_error(c, 503, "unavailable_error", "the request was cancelled (the server is stopping, or the answer could not be formatted)");
    } else if (status == HEARTH_EINVAL) {
        /* parameters the scheduler refused at admission (the checks here should have caught them) */
        send_error(c, 400, "invalid_request_error", msg ? msg : "invalid generation parameters");
    } else if (status == HEARTH_EDEVICE) {
        /* the GPU failed (logged with the call and CUDA's words): unavailable,
         * not the request's fault; a lost context ends this worker */
        char m[600];
        snprintf(m, sizeof m, "the device failed: %s", msg ? msg : hearth_status_name(status));
        send_error(c, 503, "unavailable_error", m);
        device_failed(c);
    } else if (status) {
        char m[600];
        snprintf(m, sizeof m, "generation failed: %s", msg ? msg : hearth_status_name(status));
        send_error(c, 500, "server_error", m);
    } else {
        int rc = c->stream ? stream_begin(c) : 0;
        hearth_buf_reset(&c->scratch, 1 << 16);
        if (!rc)
            rc = c->fmt->end(c, st, &c->scratch);
        if (rc) {
            send_error(c, 500, "server_error", "the answer did not fit in memory");
        } else if (c->group && c->stream) {
            /* the stream's end ([DONE] included) is the group's, when its last prompt is done */
            hearth_reply_stream_write(c->server, c->reply, c->scratch.data, c->scratch.len);
        } else if (c->group) {
            ; /* the answer stays in c->scratch for the group's */
        } else if (c->stream) {
            if (c->fmt->done_marker && hearth_buf_appends(&c->scratch, "data: [DONE]\n\n"))
                HLOG_WARN("generation %s: no room for the stream's [DONE]", c->id);
            hearth_reply_stream_write(c->server, c->reply, c->scratch.data, c->scratch.len);
            hearth_reply_stream_end(c->server, c->reply);
        } else {
            char head[400];
            head_lines(c->model, "", head, sizeof head);
            hearth_response res = {200, "application/json", head, c->scratch.data, c->scratch.len};
            hearth_reply_send(c->server, c->reply, &res);
        }
    }
    if (c->group)
        group_finish(c);
    else
        call_unref(c);
}

/* The connection ended (loop thread). */
static void on_release(void *arg, bool cancelled)
{
    hearth_gen_call *c = arg;
    if (cancelled) {
        atomic_store(&c->g.cancelled, 1);
        hearth_gen_sched_poke(c->model->sched);
    }
    call_unref(c);
}

/* llama-server's truncation of a prompt past the context (--context-shift):
 * keep the first n_keep tokens (the request's, at most n_ctx - 4: here a BOS
 * is not added to them, as llama-server does not, so the counts match its),
 * then drop whole blocks of half the room left from the middle until the rest
 * fits. False when the context is too small to leave a block. */
static bool truncate_prompt(hearth_gen_call *c, int64_t n_ctx)
{
    int64_t n = (int64_t)c->prompt.n;
    int64_t keep = c->n_keep < 0 ? n : c->n_keep;
    if (keep > n_ctx - 4)
        keep = n_ctx - 4;
    if (keep < 0)
        keep = 0;
    int64_t block = (n_ctx - keep) / 2;
    if (block < 1)
        return false;
    int64_t erased = (n - keep - block) / block;
    int64_t from = keep + erased * block;
    memmove(c->prompt.v + keep, c->prompt.v + from, (size_t)(n - from) * sizeof *c->prompt.v);
    c->prompt.n = (size_t)(n - from + keep);
    c->prompt_truncated = true;
    HLOG_WARN("prompt truncated: %lld tokens past a context of %lld; kept the first %lld and the last %lld",
              (long long)n, (long long)n_ctx, (long long)keep, (long long)(n - from));
    return (int64_t)c->prompt.n < n_ctx;
}

/* Checks c's prompt against the context and fills what the scheduler reads;
 * false after a 400 (the call is the caller's still). */
static bool call_prepare(hearth_request *req, hearth_api *api, hearth_gen_call *c, int64_t n_predict)
{
    int64_t n_ctx = c->model->n_ctx;
    int64_t n = (int64_t)c->prompt.n;
    if (n == 0) {
        hearth_respond_error(req, 400, "invalid_request_error",
                             "the prompt is empty (and this model's vocabulary adds no BOS token): give at least one token");
        return false;
    }
    bool shift = c->model->context_shift;
    if (n >= n_ctx && !(shift && truncate_prompt(c, n_ctx))) {
        /* llama-server's words first: clients match on them */
        hearth_respond_error(req, 400, "invalid_request_error",
                             "the request exceeds the available context size: the prompt is %lld tokens, which leaves no "
                             "room in the context of %lld tokens per sequence (--ctx-size over --parallel): shorten the "
                             "prompt, or enable context shift (--context-shift)",
                             (long long)n, (long long)n_ctx);
        return false;
    }
    n = (int64_t)c->prompt.n;
    /* As llama-server does, a request for more tokens than fit is not an
     * error: n_predict is capped to the positions left after the prompt, and
     * the answer ends with finish_reason "length" (stop_type "limit") there. */
    if (c->model->n_predict >= 0 && (n_predict < 0 || n_predict > c->model->n_predict))
        n_predict = c->model->n_predict; /* serve --n-predict caps every answer, as llama-server's -n */
    if (!shift && (n_predict < 0 || n_predict > n_ctx - n))
        n_predict = n_ctx - n;
    int64_t n_train = c->model->n_ctx_train > n_ctx ? c->model->n_ctx_train : n_ctx;
    if (shift && n_predict < 0) /* llama-server's bound on an answer that could shift forever */
        n_predict = n_train - n > 1 ? n_train - n : 1;
    if (n_predict > INT32_MAX)
        n_predict = INT32_MAX;
    c->g.n_predict = (int32_t)n_predict;
    /* the shift keeps n_keep tokens after the BOS, as llama-server's slot does */
    const hearth_vocab *v = hearth_decoder_vocab(c->model->dec);
    int64_t bos = v->bos >= 0 && c->prompt.v[0] == v->bos;
    c->g.context_shift = shift;
    c->g.n_keep = c->n_keep < 0 || c->n_keep + bos > n ? n : c->n_keep + bos;
    c->g.prompt = c->prompt.v;
    c->g.n_prompt = n;
    c->g.stop = (const char *const *)c->stop;
    c->g.on_text = on_text;
    c->g.on_done = on_done;
    c->server = api->server;
    return true;
}

/* Hands a prepared call to its model's scheduler; on a refusal answers (or,
 * grouped, keeps) the error and returns false: the scheduler never took it. */
static bool call_enqueue(hearth_api *api, hearth_gen_call *c)
{
    hearth_err err = {0};
    c->submit_ns = hearth_now_ns();
    int rc = hearth_gen_sched_submit(c->model->sched, &c->g, &err);
    if (rc == 0)
        return true;
    if (rc == HEARTH_ELIMIT) {
        char m[512];
        snprintf(m, sizeof m, "too many generation requests are waiting for model '%s' (--max-queue %d): retry later",
                 c->model->info->name, api->state->gen.max_queue);
        send_error(c, 503, "unavailable_error", m);
    } else {
        send_error(c, rc == HEARTH_EINVAL ? 400 : 500, rc == HEARTH_EINVAL ? "invalid_request_error" : "server_error",
                   err.msg[0] ? err.msg : hearth_status_name(rc));
    }
    return false;
}

void hearth_gen_call_submit(hearth_request *req, hearth_api *api, hearth_gen_call *c, int64_t n_predict)
{
    if (!call_prepare(req, api, c, n_predict)) {
        hearth_gen_call_free(c);
        return;
    }
    c->reply = hearth_request_defer(req, on_release, c);
    if (!call_enqueue(api, c))
        call_unref(c); /* the scheduler's reference: it never took the call */
}

void hearth_gen_group_submit(hearth_request *req, hearth_api *api, hearth_gen_call **calls, int n, int64_t n_predict)
{
    hearth_gen_group *g = NULL;
    for (int i = 0; i < n; i++) {
        if (!call_prepare(req, api, calls[i], n_predict))
            goto fail;
        calls[i]->index = i;
    }
    if (!(g = calloc(1, sizeof *g))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        goto fail;
    }
    g->calls = calls;
    g->n = n;
    g->server = api->server;
    g->stream = calls[0]->stream;
    atomic_store(&g->left, n);
    atomic_store(&g->refs, 2);
    hearth_gen_req *reqs[HEARTH_GEN_MAX_PROMPTS];
    for (int i = 0; i < n; i++) {
        calls[i]->group = g;
        calls[i]->stream = g->stream;
        reqs[i] = &calls[i]->g;
    }
    g->reply = hearth_request_defer(req, group_release, g);
    for (int i = 0; i < n; i++)
        calls[i]->reply = g->reply;
    /* all queued at once, or none: admitted together, they share the first forward passes */
    hearth_err err = {0};
    uint64_t now = hearth_now_ns();
    for (int i = 0; i < n; i++)
        calls[i]->submit_ns = now;
    int rc = hearth_gen_sched_submit_all(calls[0]->model->sched, reqs, n, &err);
    if (rc) {
        if (rc == HEARTH_ELIMIT)
            snprintf(err.msg, sizeof err.msg, "%d prompts do not fit the queue of model '%s' (--max-queue %d): retry later",
                     n, calls[0]->model->info->name, api->state->gen.max_queue);
        send_error(calls[0], rc == HEARTH_ELIMIT ? 503 : rc == HEARTH_EINVAL ? 400 : 500,
                   rc == HEARTH_ELIMIT ? "unavailable_error" : rc == HEARTH_EINVAL ? "invalid_request_error" : "server_error",
                   err.msg[0] ? err.msg : hearth_status_name(rc));
        atomic_store(&g->left, 1); /* none was taken: the answer is this error, sent now */
        group_finish(calls[0]);
    }
    return;
fail:
    for (int i = 0; i < n; i++)
        hearth_gen_call_free(calls[i]);
    free(calls);
}

/* ---- parsing ---- */

cJSON *hearth_gen_parse_body(hearth_request *req)
{
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char msg[512];
    cJSON *doc = hearth_json_body_parse(body, len, msg, sizeof msg);
    if (!doc)
        hearth_respond_error(req, 400, "invalid_request_error", "%s", msg);
    return doc;
}

hearth_gen_entry *hearth_gen_find_or_respond(hearth_request *req, hearth_api *api, const char *name)
{
    if (!atomic_load(&api->ready)) {
        hearth_respond_error(req, 503, "unavailable_error", "models are loading");
        return NULL;
    }
    hearth_gen_entry *m = hearth_api_find_gen(api, name);
    /* Stock clients name OpenAI's models (gpt-3.5-turbo): like llama-server,
     * a lone generation model answers whatever name is sent (OpenAI answers
     * echo that name, as llama-server's do; the X-Hearth-Model header says
     * which model answered). With several, a name is routing: no match is a 404. */
    if (!m && name && api->state && api->state->n_gen == 1)
        m = &api->state->gen_models[0];
    if (!m && name)
        hearth_respond_error(req, 404, "not_found_error",
                             "the model '%s' does not exist or does not generate text (see /v1/models: %d generation models "
                             "are served, so the name must be one of theirs)",
                             name, api->state ? api->state->n_gen : 0);
    else if (!m)
        hearth_respond_error(req, 404, "not_found_error", "no text-generation model is loaded (serve a llama-family .gguf with --model)");
    return m;
}

hearth_gen_entry *hearth_gen_named_model(hearth_request *req, hearth_api *api, const cJSON *doc)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "model");
    if (f && !cJSON_IsNull(f) && !cJSON_IsString(f)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'model' must be a string");
        return NULL;
    }
    return hearth_gen_find_or_respond(req, api, cJSON_IsString(f) ? f->valuestring : NULL);
}

hearth_gen_entry *hearth_gen_open(hearth_request *req, hearth_api *api, cJSON **doc)
{
    hearth_gen_entry *m = NULL;
    *doc = hearth_gen_parse_body(req);
    if (*doc && !(m = hearth_gen_named_model(req, api, *doc))) {
        cJSON_Delete(*doc);
        *doc = NULL;
    }
    return m;
}

int hearth_gen_opt_num(hearth_request *req, const cJSON *doc, const char *key, double lo, double hi, double *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!f || cJSON_IsNull(f))
        return 0;
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble < lo || f->valuedouble > hi) {
        hearth_respond_error(req, 400, "invalid_request_error", "'%s' must be a number from %g to %g", key, lo, hi);
        return -1;
    }
    *out = f->valuedouble;
    return 1;
}

int hearth_gen_opt_int(hearth_request *req, const cJSON *doc, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!f || cJSON_IsNull(f))
        return 0;
    double d = cJSON_IsNumber(f) ? f->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'%s' must be an integer from %lld to %lld", key,
                             (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int64_t)d;
    return 1;
}

int hearth_gen_opt_bool(hearth_request *req, const cJSON *doc, const char *key, bool *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!f || cJSON_IsNull(f))
        return 0;
    if (!cJSON_IsBool(f)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'%s' must be true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(f);
    return 1;
}

static bool add_stop(hearth_request *req, hearth_gen_call *c, const cJSON *s)
{
    if (!cJSON_IsString(s)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'stop' must be a string or a list of strings");
        return false;
    }
    size_t len = strlen(s->valuestring);
    if (len == 0)
        return true; /* an empty stop string would end every answer at once: clients mean "none" */
    if (len > HEARTH_GEN_MAX_STOP_LEN) {
        hearth_respond_error(req, 400, "invalid_request_error", "a 'stop' string is %zu bytes; at most %d", len,
                             HEARTH_GEN_MAX_STOP_LEN);
        return false;
    }
    if (c->g.n_stop >= HEARTH_GEN_MAX_STOP) {
        hearth_respond_error(req, 400, "invalid_request_error", "'stop' has more than %d strings", HEARTH_GEN_MAX_STOP);
        return false;
    }
    c->stop[c->g.n_stop] = strdup(s->valuestring);
    if (!c->stop[c->g.n_stop]) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return false;
    }
    c->g.n_stop++;
    return true;
}

bool hearth_gen_parse_sampling(hearth_request *req, const cJSON *doc, hearth_gen_call *c)
{
    hearth_sampler_params *p = &c->g.sampling;
    double d;
    int64_t i;
    int r;
    /* llama-server's ranges where the sampler has one; wide ones where it is only a number */
    if ((r = hearth_gen_opt_num(req, doc, "temperature", 0, 1e6, &d)) < 0)
        return false;
    if (r)
        p->temperature = (float)d;
    if ((r = hearth_gen_opt_int(req, doc, "top_k", -1, INT32_MAX, &i)) < 0)
        return false;
    if (r)
        p->top_k = (int)i;
    if ((r = hearth_gen_opt_num(req, doc, "top_p", 0, 1, &d)) < 0)
        return false;
    if (r)
        p->top_p = (float)d;
    if ((r = hearth_gen_opt_num(req, doc, "min_p", 0, 1, &d)) < 0)
        return false;
    if (r)
        p->min_p = (float)d;
    if ((r = hearth_gen_opt_num(req, doc, "repeat_penalty", 1e-6, 1e6, &d)) < 0)
        return false;
    if (r)
        p->repeat_penalty = (float)d;
    if ((r = hearth_gen_opt_int(req, doc, "repeat_last_n", -1, HEARTH_SAMPLER_MAX_LAST_N, &i)) < 0)
        return false;
    if (r) /* llama-server's -1: the whole context */
        p->repeat_last_n = i < 0 ? (int)(c->model->n_ctx < HEARTH_SAMPLER_MAX_LAST_N ? c->model->n_ctx : HEARTH_SAMPLER_MAX_LAST_N)
                                 : (int)i;
    if ((r = hearth_gen_opt_num(req, doc, "presence_penalty", -1e6, 1e6, &d)) < 0)
        return false;
    if (r)
        p->presence_penalty = (float)d;
    if ((r = hearth_gen_opt_num(req, doc, "frequency_penalty", -1e6, 1e6, &d)) < 0)
        return false;
    if (r)
        p->frequency_penalty = (float)d;
    /* The seed is drawn here when the client gives none, not by the sampler,
     * so generation_settings can tell the client which seed repeats the run. */
    int64_t seed = -1;
    if ((r = hearth_gen_opt_int(req, doc, "seed", -1, (int64_t)1 << 53, &seed)) < 0)
        return false;
    if (r == 0 && c->model->sampling.seed != HEARTH_SAMPLER_SEED_RANDOM)
        seed = (int64_t)c->model->sampling.seed; /* serve --seed: the seed of requests that name none */
    p->seed = seed >= 0 ? (uint64_t)seed : (uint32_t)hearth_random_u64(); /* 32 bits: all the sampler uses, as llama.cpp */
    if ((r = hearth_gen_opt_int(req, doc, "n_probs", 0, 16, &i)) < 0)
        return false;
    if (r)
        c->g.n_probs = (int)i;
    if (hearth_gen_opt_bool(req, doc, "post_sampling_probs", &c->post_sampling_probs) < 0)
        return false;
    c->g.post_sampling_probs = c->post_sampling_probs;
    int64_t id_slot = -1; /* llama-server's: run in that slot (its cached prefix), waiting for it while busy */
    if (hearth_gen_opt_int(req, doc, "id_slot", -1, INT32_MAX, &id_slot) < 0)
        return false;
    c->g.pin_slot = id_slot >= 0;
    c->g.id_slot = (int)id_slot;
    if (hearth_gen_opt_int(req, doc, "n_keep", -1, INT32_MAX, &c->n_keep) < 0 ||
        hearth_gen_opt_int(req, doc, "n_discard", 0, INT32_MAX, &c->g.n_discard) < 0)
        return false;
    if (hearth_gen_opt_bool(req, doc, "cache_prompt", &c->g.cache_prompt) < 0 ||
        hearth_gen_opt_bool(req, doc, "ignore_eos", &c->g.ignore_eos) < 0 ||
        hearth_gen_opt_bool(req, doc, "stream", &c->stream) < 0 ||
        hearth_gen_opt_bool(req, doc, "timings_per_token", &c->timings_per_token) < 0)
        return false;
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(doc, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsArray(stop)) {
            const cJSON *s;
            cJSON_ArrayForEach(s, stop)
            {
                if (!add_stop(req, c, s))
                    return false;
            }
        } else if (!add_stop(req, c, stop)) {
            return false;
        }
    }
    return true;
}

bool hearth_gen_encode(hearth_request *req, hearth_gen_call *c, const char *text, size_t n, bool add_special)
{
    hearth_err err = {0};
    int rc = hearth_tokenizer_encode(hearth_decoder_tokenizer(c->model->dec), text, n, add_special, true, &c->prompt, &err);
    if (rc) {
        hearth_respond_error(req, 400, "invalid_request_error", "the prompt cannot be tokenized: %s", err.msg);
        return false;
    }
    return true;
}

static bool push_ids(hearth_request *req, hearth_gen_call *c, const cJSON *arr, const char *key)
{
    int32_t n_vocab = hearth_decoder_vocab(c->model->dec)->n_tokens;
    int k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr)
    {
        if (cJSON_IsString(t)) {
            /* llama-server's mixed prompt: text among the ids, with BOS only when it comes first */
            if (!hearth_gen_encode(req, c, t->valuestring, strlen(t->valuestring), k == 0))
                return false;
            k++;
            continue;
        }
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab) || d != floor(d)) {
            hearth_respond_error(req, 400, "invalid_request_error", "'%s'[%d] is not a token id in 0..%d nor a string", key, k,
                                 (int)n_vocab - 1);
            return false;
        }
        if (hearth_ids_push(&c->prompt, (int32_t)d) != 0) {
            hearth_respond_error(req, 400, "invalid_request_error",
                                 "the prompt is longer than the context of %lld tokens per sequence (--ctx-size)",
                                 (long long)c->model->n_ctx);
            return false;
        }
        k++;
    }
    return true;
}

int hearth_gen_prompt_count(const cJSON *prompt)
{
    int n = cJSON_IsArray(prompt) ? cJSON_GetArraySize(prompt) : 1;
    if (n < 2)
        return 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompt)
    {
        if (!cJSON_IsString(p) && !cJSON_IsArray(p))
            return 1; /* ids, or ids mixed with text: one prompt */
    }
    return n;
}

void hearth_gen_submit_prompts(hearth_request *req, hearth_api *api, const cJSON *doc, hearth_gen_prompt_call_fn make,
                               void *arg)
{
    int64_t n_predict = -1;
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(doc, "prompt");
    int n = hearth_gen_prompt_count(prompt);
    hearth_gen_call **calls = NULL;
    if (n > HEARTH_GEN_MAX_PROMPTS) {
        hearth_respond_error(req, 400, "invalid_request_error", "'prompt' holds %d prompts; at most %d in one request", n,
                             HEARTH_GEN_MAX_PROMPTS);
        return;
    }
    if (!(calls = calloc((size_t)n, sizeof *calls))) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, n > 1 ? "prompt[%d]" : "prompt", i);
        if (!(calls[i] = make(req, arg, doc, n > 1 ? cJSON_GetArrayItem(prompt, i) : prompt, key, &n_predict)))
            goto out;
    }
    if (n == 1) {
        hearth_gen_call_submit(req, api, calls[0], n_predict);
        free(calls);
    } else {
        hearth_gen_group_submit(req, api, calls, n, n_predict); /* the group's now */
    }
    return;
out:
    for (int i = 0; i < n; i++)
        hearth_gen_call_free(calls[i]);
    free(calls);
}

bool hearth_gen_prompt_from_json(hearth_request *req, hearth_gen_call *c, const cJSON *prompt, const char *key)
{
    if (!prompt || cJSON_IsNull(prompt)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'%s' is required", key);
        return false;
    }
    if (cJSON_IsString(prompt))
        return hearth_gen_encode(req, c, prompt->valuestring, strlen(prompt->valuestring), true);
    if (!cJSON_IsArray(prompt)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'%s' must be a string or a list of token ids", key);
        return false;
    }
    int n = cJSON_GetArraySize(prompt);
    const cJSON *first = cJSON_GetArrayItem(prompt, 0);
    if (n == 1 && (cJSON_IsString(first) || cJSON_IsArray(first)))
        return hearth_gen_prompt_from_json(req, c, first, key);
    return push_ids(req, c, prompt, key); /* ids, or ids and texts mixed (llama-server's) */
}

/* ---- formatting ---- */

int hearth_gen_sse_open(hearth_buf *out) { return hearth_buf_append(out, "data: ", 6); }

int hearth_gen_sse_close(hearth_buf *out) { return hearth_buf_append(out, "\n\n", 2); }

static double per(double a, double b) { return b > 0 ? a / b : 0; }

int hearth_gen_append_timings(hearth_buf *out, const hearth_gen_stats *st)
{
    double pn = (double)(st->n_prompt - st->n_cached), gn = (double)st->n_gen;
    return hearth_buf_printf(out,
                             "\"timings\":{\"cache_n\":%lld,\"prompt_n\":%lld,\"prompt_ms\":%.3f,\"prompt_per_token_ms\":%.3f,"
                             "\"prompt_per_second\":%.3f,\"predicted_n\":%lld,\"predicted_ms\":%.3f,"
                             "\"predicted_per_token_ms\":%.3f,\"predicted_per_second\":%.3f}",
                             (long long)st->n_cached, (long long)(st->n_prompt - st->n_cached), st->prompt_ms,
                             per(st->prompt_ms, pn), per(pn * 1e3, st->prompt_ms), (long long)st->n_gen, st->gen_ms,
                             per(st->gen_ms, gn), per(gn * 1e3, st->gen_ms));
}

int hearth_gen_append_timings_now(hearth_buf *out, const hearth_gen_call *c)
{
    uint64_t now = hearth_now_ns(), first = c->first_ns ? c->first_ns : now;
    hearth_gen_stats st = {.n_prompt = (int64_t)c->prompt.n, .n_gen = c->n_gen};
    st.prompt_ms = first > c->submit_ns ? (double)(first - c->submit_ns) / 1e6 : 0;
    st.gen_ms = (double)(now - first) / 1e6;
    return hearth_gen_append_timings(out, &st);
}

int hearth_gen_event_end(hearth_gen_call *c, hearth_buf *out)
{
    int rc = 0;
    if (c->timings_per_token) {
        rc = hearth_buf_appends(out, ",");
        if (!rc)
            rc = hearth_gen_append_timings_now(out, c);
    }
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    if (!rc)
        rc = hearth_gen_sse_close(out);
    return rc;
}

int hearth_gen_append_settings(hearth_buf *out, const hearth_gen_req *g, const char *grammar)
{
    const hearth_sampler_params *p = &g->sampling;
    long long seed = p->seed == HEARTH_SAMPLER_SEED_RANDOM ? -1 : (long long)p->seed;
    int rc = hearth_buf_printf(out,
                               "{\"n_predict\":%d,\"seed\":%lld,\"temperature\":%.6g,\"top_k\":%d,\"top_p\":%.6g,"
                               "\"min_p\":%.6g,\"repeat_penalty\":%.6g,\"repeat_last_n\":%d,\"presence_penalty\":%.6g,"
                               "\"frequency_penalty\":%.6g,\"n_probs\":%d,\"cache_prompt\":%s,\"stop\":[",
                               (int)g->n_predict, seed, (double)p->temperature, p->top_k, (double)p->top_p,
                               (double)p->min_p, (double)p->repeat_penalty, p->repeat_last_n,
                               (double)p->presence_penalty, (double)p->frequency_penalty, g->n_probs,
                               g->cache_prompt ? "true" : "false");
    for (int i = 0; i < g->n_stop && !rc; i++) {
        if (i)
            rc = hearth_buf_append(out, ",", 1);
        if (!rc)
            rc = hearth_json_quote(out, g->stop[i], strlen(g->stop[i]));
    }
    if (!rc)
        rc = hearth_buf_appends(out, "],\"grammar\":");
    if (!rc)
        rc = hearth_json_quote(out, grammar ? grammar : "", grammar ? strlen(grammar) : 0);
    if (!rc)
        rc = hearth_buf_appends(out, "}");
    return rc;
}

bool hearth_gen_truncated(const hearth_gen_call *c, const hearth_gen_stats *st)
{
    return c->prompt_truncated || st->n_shifts > 0 ||
           (st->finish == HEARTH_GEN_LENGTH && st->n_prompt + st->n_gen >= c->model->n_ctx);
}

const char *hearth_gen_stop_type(const hearth_gen_stats *st)
{
    switch (st->finish) {
    case HEARTH_GEN_EOS:
        return "eos";
    case HEARTH_GEN_STOP:
        return "word";
    case HEARTH_GEN_LENGTH:
        return "limit";
    default:
        return "none";
    }
}

int hearth_gen_append_prompt(hearth_gen_call *c, hearth_buf *out)
{
    hearth_buf text;
    hearth_buf_init(&text, (size_t)64 << 20);
    int rc = hearth_tokenizer_decode(hearth_decoder_tokenizer(c->model->dec), c->prompt.v, c->prompt.n, true, &text);
    if (!rc)
        rc = hearth_buf_appends(out, ",\"prompt\":");
    if (!rc)
        rc = hearth_json_quote(out, text.data ? text.data : "", text.len);
    hearth_buf_deinit(&text);
    return rc;
}

const char *hearth_gen_finish_reason(const hearth_gen_stats *st)
{
    return st->finish == HEARTH_GEN_EOS || st->finish == HEARTH_GEN_STOP ? "stop" : "length";
}
