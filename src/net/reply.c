/* reply.c: what handlers call: the request accessors, synchronous
 * responses, and deferred replies sent from other threads. A handler on the
 * handler pool (offload.c) responds and defers through the same queue as
 * any other thread; its REPLY_DEFER message hands the connection the
 * handler's release callback.
 *
 * A deferred reply travels as a message on the target loop's queue (io.c),
 * naming the connection by (id, generation). Rejected: writing to the socket
 * from the engine thread (compute threads never touch sockets).
 *
 * Calls: conn.c (hearth_conn_respond) and offload.c for a response, io.c to
 * queue a message for a loop. The queue's receiving side, which applies the
 * messages to connections on the loop thread, is io.c's. Called by the
 * handlers, and also by conn.c, offload.c and access.c, which answer their
 * own errors (404, 405, 401, 503, 500) through hearth_respond: the one
 * circle left in src/net, kept because those answers then take the same
 * path (the responded-twice check, the pool's queue) as a handler's. */
#include "server_int.h"

#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hearth_http_request *hearth_request_http(const hearth_request *req) { return req->http; }

const char *hearth_request_path(const hearth_request *req, size_t *len)
{
    *len = req->path_len;
    return req->path;
}

const char *hearth_request_query(const hearth_request *req, size_t *len)
{
    *len = req->query_len;
    return req->query;
}

const char *hearth_request_body(const hearth_request *req, size_t *len)
{
    *len = req->body_len;
    return req->body;
}

const char *hearth_request_header(const hearth_request *req, const char *name, char *out, size_t out_size)
{
    const hearth_http_header *h = hearth_http_find_header(req->http, name);
    if (!h || out_size == 0)
        return NULL;
    size_t n = h->value_len < out_size - 1 ? h->value_len : out_size - 1;
    memcpy(out, h->value, n);
    out[n] = 0;
    return out;
}

bool hearth_request_is_head(const hearth_request *req) { return req->is_head; }

const hearth_body_sink *hearth_request_take_sink(hearth_request *req)
{
    if (!req->sink || req->sink_taken)
        return NULL;
    req->sink_taken = true;
    return req->sink;
}

const char *hearth_request_rest(const hearth_request *req, size_t *len)
{
    *len = req->rest_len;
    return req->rest;
}

void hearth_respond(hearth_request *req, const hearth_response *res)
{
    if (req->done) {
        HLOG_ERROR("%s: responded twice; the second response is dropped", req->log_line);
        return;
    }
    req->done = true;
    if (req->job)
        hearth_offload_respond(req, res);
    else
        hearth_conn_respond(req->c, res);
}

int hearth_format_error(hearth_buf *out, int status, const char *type, const char *message)
{
    int rc = hearth_buf_printf(out, "{\"error\":{\"code\":%d,\"type\":", status);
    if (!rc)
        rc = hearth_json_quote(out, type, strlen(type));
    if (!rc)
        rc = hearth_buf_appends(out, ",\"message\":");
    if (!rc)
        rc = hearth_json_quote(out, message, strlen(message));
    if (!rc)
        rc = hearth_buf_appends(out, "}}");
    return rc;
}

static void respond_error_v(hearth_request *req, int status, const char *type, const char *headers, const char *fmt,
                            va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    hearth_buf body;
    hearth_buf_init(&body, 8192);
    hearth_format_error(&body, status, type, msg);
    hearth_response res = {status, "application/json", headers, body.data, body.len};
    hearth_respond(req, &res);
    hearth_buf_deinit(&body);
}

void hearth_respond_error(hearth_request *req, int status, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    respond_error_v(req, status, type, NULL, fmt, ap);
    va_end(ap);
}

void hearth_respond_error_headers(hearth_request *req, int status, const char *type, const char *headers, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    respond_error_v(req, status, type, headers, fmt, ap);
    va_end(ap);
}

hearth_reply hearth_request_defer(hearth_request *req, hearth_release_cb on_release, void *arg)
{
    req->done = true;
    if (req->job)
        return hearth_offload_defer(req, on_release, arg);
    hearth_conn *c = req->c;
    c->state = CONN_DEFERRED;
    c->release = on_release;
    c->release_arg = arg;
    hearth_reply h = {c->io->index, c->id, c->gen};
    return h;
}

/* ---- the sending side (any thread) ---- */

static int post(hearth_server *s, hearth_reply h, int kind, int status, const char *ctype, const char *headers,
                const void *body, size_t body_len)
{
    if (h.slot < 0 || h.slot >= s->cfg.threads)
        return HEARTH_ENOTFOUND;
    size_t ct_len = ctype ? strlen(ctype) + 1 : 0;
    size_t hd_len = headers ? strlen(headers) + 1 : 0;
    reply_msg *m = malloc(sizeof *m + ct_len + hd_len + body_len + 1);
    if (!m)
        return HEARTH_ENOMEM;
    m->next = NULL;
    m->id = h.id;
    m->gen = h.gen;
    m->kind = kind;
    m->status = status;
    char *p = m->data;
    m->content_type = ctype ? memcpy(p, ctype, ct_len) : NULL;
    p += ct_len;
    m->headers = headers ? memcpy(p, headers, hd_len) : NULL;
    p += hd_len;
    m->body = p;
    if (body_len)
        memcpy(p, body, body_len);
    m->body_len = body_len;
    m->release = NULL;
    m->release_arg = NULL;
    hearth_io_post_msg(s, h.slot, m);
    return HEARTH_OK;
}

int hearth_reply_send(hearth_server *s, hearth_reply h, const hearth_response *res)
{
    return post(s, h, REPLY_FULL, res->status, res->content_type, res->headers, res->body, res->body_len);
}

void hearth_reply_spin(hearth_server *s, hearth_reply h, uint64_t ns)
{
    if (h.slot >= 0 && h.slot < s->cfg.threads && ns)
        hearth_loop_spin(s->io[h.slot].loop, ns);
}

void hearth_reply_spin_window(hearth_server *s, hearth_reply h, uint64_t from_ns, uint64_t until_ns)
{
    if (h.slot >= 0 && h.slot < s->cfg.threads && until_ns > from_ns)
        hearth_loop_spin_window(s->io[h.slot].loop, from_ns, until_ns);
}

int hearth_reply_error(hearth_server *s, hearth_reply h, int status, const char *type, const char *message)
{
    hearth_buf body;
    hearth_buf_init(&body, 8192);
    hearth_format_error(&body, status, type, message);
    hearth_response res = {status, "application/json", NULL, body.data, body.len};
    int rc = hearth_reply_send(s, h, &res);
    hearth_buf_deinit(&body);
    return rc;
}

int hearth_reply_stream_begin(hearth_server *s, hearth_reply h, int status, const char *content_type, const char *headers)
{
    return post(s, h, REPLY_BEGIN, status, content_type, headers, NULL, 0);
}

int hearth_reply_stream_write(hearth_server *s, hearth_reply h, const void *data, size_t len)
{
    if (len == 0)
        return HEARTH_OK; /* a zero-length chunk would end the chunked body */
    return post(s, h, REPLY_CHUNK, 0, NULL, NULL, data, len);
}

int hearth_reply_stream_end(hearth_server *s, hearth_reply h) { return post(s, h, REPLY_END, 0, NULL, NULL, NULL, 0); }
