/* io.c: an I/O thread's reply queue: messages posted from any thread
 * (deferred replies from reply.c, a handler's release callback from
 * offload.c) and applied to their connections on the loop thread.
 *
 * A message travels on the target loop's queue (a mutex and a list; the lock
 * is held for a pointer swap) followed by a coalesced wake-up, so a burst of
 * streamed tokens from the engine costs one wake. Messages name the
 * connection by (id, generation); the loop drops those whose connection has
 * closed since. Rejected: a lock-free queue (the mutex is uncontended in
 * practice and far simpler to get right).
 *
 * Calls: conn.c (respond, flush, close, complete, process), access.c (the
 * CORS origin of a stream's head), loop.c. Called by reply.c and offload.c
 * (hearth_io_post_msg) and server.c, whose loop wake-up callback runs the
 * queue (hearth_io_queue_run) before its own drain and accept checks; nothing
 * here calls back into them. The queue was once reply.c's, with the wake-up
 * callback that also began the drain in server.c: a circle. */
#include "server_int.h"

#include "base/log.h"

#include <stdlib.h>
#include <string.h>

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
        if (hearth_io_stopping(io)) /* as in hearth_conn_respond */
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

void hearth_io_queue_run(hearth_io *io)
{
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
