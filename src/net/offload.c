/* offload.c: the handler pool: a few threads per process that run the
 * handlers of big requests, so that a loop thread never parses a 10 MB JSON
 * body or tokenizes its text (seconds of work) while its other connections
 * wait. The design says loop threads never block and never compute; a
 * handler on a small body computes for microseconds, and stays on the loop
 * (no thread hop on the common path); a body whose handler parses
 * offload_body bytes or more goes here (every byte of a body counts, unless
 * its route says how many it parses: a binary tensor frame's handler parses
 * its JSON header and copies the rest, up to HEARTH_LOOP_COPY_MAX), and so
 * does any body once the bytes parsed on the loop in one pass over a
 * connection's pipelined input add up to offload_body.
 *
 * How a request moves. On the loop thread (hearth_offload_submit) the
 * request's bytes move into a job: the connection's input buffer (head, then
 * body) and, for a chunked request, its decoded body are taken whole, and
 * the connection gets fresh buffers holding only the pipelined bytes that
 * followed. So the bytes the handler reads belong to the job alone: the loop
 * may go on reading from the connection (to notice a client that leaves),
 * close it, or cut it at the drain timeout, and nothing the handler reads is
 * moved or freed under it. The connection waits deferred, exactly as when a
 * handler defers, and keeps the job's "connection" reference in its release
 * slot. A pool thread re-parses the head from the job's bytes (microseconds;
 * the loop's parsed head lives in per-loop scratch) and calls the route's
 * handler with a request view over them. What the handler then calls, it
 * calls on a thread that is not the connection's: hearth_respond becomes
 * hearth_reply_send through the loop's queue (reply.c, io.c), and
 * hearth_request_defer posts a REPLY_DEFER message carrying the handler's
 * release callback, which the loop installs on the connection ahead of any
 * reply sent after it (one queue, in order), or, when the connection has
 * closed meanwhile, calls with cancelled=true, so the callback still runs
 * exactly once on the loop thread.
 *
 * A job is freed by whichever lets go last, the pool (after the handler
 * returns; the big buffers go at once) or the connection (its release: reply
 * queued, or connection closed). A job whose client left before a thread took
 * it is dropped unrun: no tokenizing for nobody. The queue is bounded
 * (QUEUE_PER_THREAD waiting jobs per thread): past it a big request gets 503
 * at once, never an unbounded wait. On shutdown the loops drain first (an
 * offloaded request is in flight like any deferred one, and its reply ends
 * the drain); then hearth_offload_stop drops what is still queued (its
 * connections are gone: the drain timeout cut them) and waits for running
 * handlers, which only compute, to return.
 *
 * Rejected: running every handler on the pool (a thread hop and two
 * cross-thread wakes on every small request, the throughput path of
 * embeddings); a per-route "heavy" flag (every API's parsing and tokenizing
 * grows with its body, and a flag would send a one-sentence embedding over
 * the hop too; the body size is the measure of the work); a yield-and-resume tokenizer on the loop (every API and
 * tokenizer would need resumable state, and cJSON cannot parse in slices);
 * copying the body for the job instead of taking the buffer (a second 16 MiB
 * copy on the loop thread); one pool shared by the workers (processes share
 * no memory but the statistics; each worker starts its own).
 *
 * Calls: io.c (hearth_io_post_msg, for a handler's REPLY_DEFER), reply.c
 * (hearth_reply_send, and hearth_respond_error for its own 500s), the HTTP
 * parser. Called by server.c (start, stop), conn.c (wanted, submit) and
 * reply.c (hearth_respond and hearth_request_defer of a request on the pool).
 * The circle left in src/net runs through here: reply.c's hearth_respond
 * dispatches to the pool (hearth_offload_respond), and the pool answers its
 * own 500s through hearth_respond_error (reply.c says why it stays). */
#include "server_int.h"

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waiting jobs per thread before a big request gets 503: a few seconds of
 * work each at worst (16 MiB of text to tokenize), so a longer queue would
 * only hold clients past their own timeouts. */
#define QUEUE_PER_THREAD 16

typedef struct hearth_offload_job {
    struct hearth_offload_job *next;
    hearth_server *s;
    hearth_handler handler;
    void *ctx;
    hearth_reply reply;        /* the connection, by (slot, id, generation) */
    hearth_buf in;             /* taken from the connection: the head, then (unless chunked) the body */
    hearth_buf body;           /* taken from the connection: a chunked request's decoded body */
    size_t head_len;
    size_t body_len;
    size_t rest_off;           /* a "/{name}" route: where the braces' match starts in the path; 0 for an exact one */
    bool chunked;
    bool is_head;
    reply_msg *defer_msg;      /* the REPLY_DEFER message, ready before the handler runs; NULL once sent */
    _Atomic int refs;          /* the pool's and the connection's */
    _Atomic int cancelled;     /* the connection closed before the reply was queued */
    char log_line[96];
    hearth_http_request http;  /* parsed on the pool thread from in */
} hearth_offload_job;

struct hearth_offload {
    hearth_server *s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    hearth_offload_job *head, *tail;
    int queued;
    int max_queued;
    bool stop;
    int n_threads;             /* started */
    pthread_t tid[];
};

static void job_free_bytes(hearth_offload_job *j)
{
    hearth_buf_deinit(&j->in);
    hearth_buf_deinit(&j->body);
    free(j->defer_msg);
    j->defer_msg = NULL;
}

static void job_unref(hearth_offload_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1) {
        job_free_bytes(j);
        free(j);
    }
}

/* The connection's side (loop thread): its reply was queued, or it closed. */
static void conn_release(void *arg, bool cancelled)
{
    hearth_offload_job *j = arg;
    if (cancelled)
        atomic_store(&j->cancelled, 1);
    job_unref(j);
}

static void run_job(hearth_offload_job *j)
{
    hearth_server *s = j->s;
    if (atomic_load(&j->cancelled)) {
        HLOG_DEBUG("%s: the client left before its handler ran; dropped", j->log_line);
        return;
    }
    int status = 0;
    long rc = hearth_http_parse_request(j->in.data, j->head_len, &s->cfg.limits, &j->http, &status, NULL);
    hearth_request req = {
        .job = j,
        .is_head = j->is_head,
        .http = &j->http,
        .path = j->http.path,
        .path_len = j->http.path_len,
        .query = j->http.query,
        .query_len = j->http.query_len,
        .log_line = j->log_line,
    };
    if (j->chunked) {
        req.body = j->body.data ? j->body.data : "";
        req.body_len = j->body.len;
    } else {
        req.body = j->in.data + j->head_len;
        req.body_len = j->body_len;
    }
    if (j->rest_off && j->rest_off < req.path_len) {
        req.rest = req.path + j->rest_off;
        req.rest_len = req.path_len - j->rest_off;
    }
    if (rc != (long)j->head_len) { /* cannot happen: the loop parsed the same bytes */
        hearth_respond_error(&req, 500, "server_error", "request head changed while buffered");
        return;
    }
    j->handler(&req, j->ctx);
    if (!req.done) {
        HLOG_ERROR("handler for %s returned without responding", j->log_line);
        hearth_respond_error(&req, 500, "server_error", "the handler did not respond");
    }
}

static void *pool_main(void *arg)
{
    struct hearth_offload *o = arg;
    for (;;) {
        pthread_mutex_lock(&o->lock);
        while (!o->head && !o->stop)
            pthread_cond_wait(&o->cond, &o->lock);
        if (o->stop) {
            pthread_mutex_unlock(&o->lock);
            return NULL;
        }
        hearth_offload_job *j = o->head;
        o->head = j->next;
        if (!o->head)
            o->tail = NULL;
        o->queued--;
        pthread_mutex_unlock(&o->lock);
        run_job(j);
        job_free_bytes(j); /* the big buffers go now; the connection may hold the job a while longer */
        job_unref(j);
    }
}

int hearth_offload_start(hearth_server *s, hearth_err *err)
{
    int n = s->cfg.handler_threads;
    if (n <= 0)
        return HEARTH_OK;
    struct hearth_offload *o = calloc(1, sizeof *o + (size_t)n * sizeof(pthread_t));
    if (!o)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory for the handler pool");
    o->s = s;
    o->max_queued = QUEUE_PER_THREAD * n;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    s->offload = o;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&o->tid[i], NULL, pool_main, o) != 0) {
            hearth_offload_stop(s);
            return hearth_err_set(err, HEARTH_EIO, "cannot start handler thread %d of %d", i + 1, n);
        }
        o->n_threads++;
    }
    return HEARTH_OK;
}

void hearth_offload_stop(hearth_server *s)
{
    struct hearth_offload *o = s->offload;
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    o->stop = true;
    hearth_offload_job *left = o->head;
    o->head = o->tail = NULL;
    o->queued = 0;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
    /* Queued jobs are never run: the loops have stopped, so their connections
     * were answered 503 by the drain timeout or are gone. The connections'
     * references go when they close (io_close_conns). */
    while (left) {
        hearth_offload_job *next = left->next;
        job_free_bytes(left);
        job_unref(left);
        left = next;
    }
    for (int i = 0; i < o->n_threads; i++)
        pthread_join(o->tid[i], NULL);
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    free(o);
    s->offload = NULL;
}

size_t hearth_offload_parsed(const hearth_conn *c, const hearth_request *req, int route)
{
    const hearth_route *r = &c->io->s->routes[route];
    if (!r->parse_bytes || req->body_len > HEARTH_LOOP_COPY_MAX)
        return req->body_len;
    size_t n = r->parse_bytes(req, r->ctx);
    return n < req->body_len ? n : req->body_len;
}

bool hearth_offload_wanted(const hearth_conn *c, size_t parsed, size_t loop_body)
{
    const hearth_server *s = c->io->s;
    if (!s->offload)
        return false;
    /* A client that pipelines many bodies just under the limit (400 x 15 KiB:
     * 0.84 s of tokenizing in one pass) is held to one limit's worth of loop
     * work per pass: the rest go to the pool, one at a time, since an
     * offloaded request parks its connection. */
    return parsed >= s->cfg.offload_body || (parsed > 0 && loop_body + parsed >= s->cfg.offload_body);
}

int hearth_offload_submit(hearth_conn *c, hearth_request *req, int route)
{
    hearth_io *io = c->io;
    hearth_server *s = io->s;
    struct hearth_offload *o = s->offload;
    hearth_offload_job *j = calloc(1, sizeof *j);
    if (!j)
        return HEARTH_ENOMEM;
    j->defer_msg = calloc(1, sizeof *j->defer_msg);
    if (!j->defer_msg) {
        free(j);
        return HEARTH_ENOMEM;
    }
    /* The connection keeps what followed the request (pipelined bytes). */
    size_t used = c->head_len + (c->chunked ? 0 : c->body_len);
    hearth_buf rest;
    hearth_buf_init(&rest, c->in.max);
    if (c->in.len > used && hearth_buf_append(&rest, c->in.data + used, c->in.len - used) != 0) {
        free(j->defer_msg);
        free(j);
        return HEARTH_ENOMEM;
    }
    j->s = s;
    j->handler = s->routes[route].handler;
    j->ctx = s->routes[route].ctx;
    j->reply = (hearth_reply){io->index, c->id, c->gen};
    j->head_len = c->head_len;
    j->body_len = req->body_len;
    j->rest_off = s->routes[route].prefix_len;
    j->chunked = c->chunked;
    j->is_head = c->is_head;
    atomic_store(&j->refs, 2);
    snprintf(j->log_line, sizeof j->log_line, "%s", c->log_line);

    pthread_mutex_lock(&o->lock);
    if (o->queued >= o->max_queued || o->stop) {
        pthread_mutex_unlock(&o->lock);
        hearth_buf_deinit(&rest);
        free(j->defer_msg);
        free(j);
        return HEARTH_ELIMIT;
    }
    /* Taken whole, before the job is visible to the pool: in[0..used) is the
     * head and body; the byte after them (room for it exists: reads keep
     * one) now ends the job's bytes. */
    j->in = c->in;
    j->in.len = used;
    if (j->in.data)
        j->in.data[used] = 0;
    j->body = c->body;
    c->in = rest;
    hearth_buf_init(&c->body, s->cfg.max_body);
    if (o->tail)
        o->tail->next = j;
    else
        o->head = j;
    o->tail = j;
    o->queued++;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);

    c->head_len = c->body_len = 0; /* nothing of the request is left in c->in for request_complete to drop */
    c->chunked = false;
    req->done = true;
    c->state = CONN_DEFERRED;
    c->release = conn_release;
    c->release_arg = j;
    atomic_fetch_add_explicit(&s->shared->slot[io->gslot].offloaded, 1, memory_order_relaxed);
    return HEARTH_OK;
}

void hearth_offload_respond(hearth_request *req, const hearth_response *res)
{
    hearth_offload_job *j = req->job;
    hearth_reply_send(j->s, j->reply, res);
}

hearth_reply hearth_offload_defer(hearth_request *req, hearth_release_cb on_release, void *arg)
{
    hearth_offload_job *j = req->job;
    if (on_release && !j->defer_msg) {
        HLOG_ERROR("%s: deferred twice; the second release callback is never called", j->log_line);
    } else if (on_release) {
        /* allocated at submit, so a defer cannot fail for memory: the
         * callback must reach the loop, which alone may call it */
        reply_msg *m = j->defer_msg;
        j->defer_msg = NULL;
        m->id = j->reply.id;
        m->gen = j->reply.gen;
        m->kind = REPLY_DEFER;
        m->release = on_release;
        m->release_arg = arg;
        hearth_io_post_msg(j->s, j->reply.slot, m);
    }
    return j->reply;
}
