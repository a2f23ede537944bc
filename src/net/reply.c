/* reply.c: what handlers call: the request accessors, synchronous
 * responses, and deferred replies sent from other threads. A handler on the
 * handler pool (offload.c) responds and defers through the same queue as
 * any other thread; its REPLY_DEFER message hands the connection the
 * handler's release callback.
 *
 * A deferred reply travels as a message on the target loop's queue (a mutex
 * and a list; the lock is held for a pointer swap) followed by a coalesced
 * wake-up, so a burst of streamed tokens from the engine costs one wake.
 * Messages name the connection by (id, generation); the loop drops those whose
 * connection has closed since. Rejected: a lock-free queue (the mutex is
 * uncontended in practice and far simpler to get right), and writing to the
 * socket from the engine thread (compute threads never touch sockets). */
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

void hearth_io_post_msg(hearth_server *s, int slot, reply_msg *m)
{
    hearth_io *io = &s->io[slot];
    m->next = NULL;
    pthread_mutex_lock(&io->q_lock);
    if (io->q_tail)
        io->q_tail->next = m;
    else
        io->q_head = m;
    io->q_tail = m;
    pthread_mutex_unlock(&io->q_lock);
    hearth_loop_wake(io->loop);
}

int hearth_reply_send(hearth_server *s, hearth_reply h, const hearth_response *res)
{
    return post(s, h, REPLY_FULL, res->status, res->content_type, res->headers, res->body, res->body_len);
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

/* ---- the receiving side (the loop thread) ---- */

static void apply(hearth_io *io, reply_msg *m)
{
    hearth_conn *c = m->id < io->conns_cap ? io->conns[m->id] : NULL;
    if (!c || c->gen != m->gen) {
        /* the connection closed since: drop, but a handler's release
         * callback still runs once, as its connection's close would have */
        if (m->kind == REPLY_DEFER) {
            HLOG_DEBUG("a handler deferred after its connection closed: released as cancelled");
            m->release(m->release_arg, true);
        }
        return;
    }
    int rc = 0;
    switch (m->kind) {
    case REPLY_DEFER: {
        if (c->state != CONN_DEFERRED) { /* the handler also responded: its defer came too late */
            m->release(m->release_arg, true);
            return;
        }
        /* the handler's callback replaces the job's: the connection no longer needs the job */
        hearth_release_cb old = c->release;
        void *old_arg = c->release_arg;
        c->release = m->release;
        c->release_arg = m->release_arg;
        if (old)
            old(old_arg, false);
        return;
    }
    case REPLY_FULL: {
        if (c->state != CONN_DEFERRED)
            return;
        hearth_response res = {m->status, m->content_type, m->headers, m->body, m->body_len};
        hearth_conn_respond(c, &res);
        break;
    }
    case REPLY_BEGIN: {
        if (c->state != CONN_DEFERRED)
            return;
        if (io->draining)
            c->keep_alive = false;
        /* HTTP/1.0 has no chunked coding: the body ends when the connection closes */
        c->stream_close_delimited = c->http10;
        c->sse = m->content_type && strncmp(m->content_type, "text/event-stream", 17) == 0;
        if (c->http10)
            c->keep_alive = false;
        hearth_http_head head = {
            .status = m->status,
            .minor_version = c->http10 ? 0 : 1,
            .content_type = m->content_type,
            .headers = m->headers,
            .cors_origin = hearth_access_cors(c),
            .date = hearth_http_date_now(&io->date),
            .keep_alive = c->keep_alive,
            .chunked = !c->http10,
            .close_delimited = c->http10,
        };
        size_t before = c->out.len;
        rc = hearth_http_head_format(&c->out, &head);
        c->status = m->status;
        c->resp_bytes = c->out.len - before;
        c->state = CONN_STREAMING;
        hearth_conn_flush(c);
        return;
    }
    case REPLY_CHUNK: {
        if (c->state != CONN_STREAMING || c->is_head)
            return;
        size_t before = c->out.len;
        rc = c->stream_close_delimited ? hearth_buf_append(&c->out, m->body, m->body_len)
                                       : hearth_http_chunk_format(&c->out, m->body, m->body_len);
        c->resp_bytes += c->out.len - before;
        if (rc) {
            HLOG_WARN("%s: client is not reading its stream; closing", c->log_line);
            hearth_conn_close(c);
            return;
        }
        hearth_conn_flush(c);
        return;
    }
    case REPLY_END: {
        if (c->state != CONN_STREAMING)
            return;
        if (!c->stream_close_delimited && !c->is_head) {
            rc = hearth_http_chunk_end(&c->out);
            c->resp_bytes += 5;
        }
        break;
    }
    }
    (void)rc;
    /* the request is complete: account for it and move on to pipelined input */
    hearth_conn_request_complete(c);
    if (c->state == CONN_HEAD)
        hearth_conn_process(c);
    else
        hearth_conn_flush(c);
}

void hearth_io_wake_cb(hearth_loop *loop, void *arg)
{
    hearth_io *io = arg;
    pthread_mutex_lock(&io->q_lock);
    reply_msg *m = io->q_head;
    io->q_head = io->q_tail = NULL;
    pthread_mutex_unlock(&io->q_lock);
    while (m) {
        reply_msg *next = m->next;
        apply(io, m);
        free(m);
        m = next;
    }
    if (atomic_load(&io->s->stopping) && !io->draining)
        hearth_io_begin_drain(io);
    else if (io->draining)
        hearth_io_maybe_stop(io);
    else if (atomic_load(&io->s->init_done) && !io->listening)
        hearth_io_start_accepting(io);
}

void hearth_io_queue_cancel(hearth_io *io)
{
    pthread_mutex_lock(&io->q_lock);
    reply_msg *m = io->q_head;
    io->q_head = io->q_tail = NULL;
    pthread_mutex_unlock(&io->q_lock);
    while (m) {
        reply_msg *next = m->next;
        if (m->kind == REPLY_DEFER)
            m->release(m->release_arg, true);
        free(m);
        m = next;
    }
}

void hearth_io_queue_free(hearth_io *io)
{
    reply_msg *m = io->q_head;
    while (m) {
        reply_msg *next = m->next;
        free(m);
        m = next;
    }
    io->q_head = io->q_tail = NULL;
}
