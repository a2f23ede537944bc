/* conn.c: one HTTP/1.1 connection's state machine, on its loop thread.
 *
 * Bytes are read into c->in; complete requests are parsed, routed and
 * answered in order, their responses appended to c->out, which is written
 * once per batch, so a pipelined burst costs one read and one write. A
 * deferred request parks the connection: further pipelined bytes stay
 * buffered (bounded; reading pauses when the buffer is full) until the
 * reply arrives, because HTTP/1.1 responses must keep request order. A
 * request with a big body is parked the same way, its handler run on the
 * handler pool (offload.c): dispatch hands the request's bytes over with it,
 * and c->in keeps only what was pipelined after them.
 *
 * The head is parsed into the loop's scratch request (a request struct
 * holds 256 header slots, far more than an idle connection should cost), so
 * it is re-parsed from c->in when the body completes; heads are small and the
 * parser is fast, and this keeps an idle keep-alive connection near 300 bytes
 * of user memory: no buffers are held while nothing is pending.
 *
 * A response still in flight when the drain timeout runs out is ended by the
 * server, not just dropped (hearth_conn_cut): an SSE stream gets a last error
 * event and its terminating chunk, so a client can tell a cut from a finish,
 * and the log says the server closed it. Other streams are closed without the
 * terminator, so that a cut body never parses as complete.
 *
 * Rejected: a read buffer per connection allocated up front (10,000 idle
 * connections would cost 40+ MiB), and a parser with saved state (more code
 * for a case, partial heads, that re-parsing handles well).
 *
 * Calls: access.c (--api-key, CORS), offload.c (a big request's handler goes
 * to the pool), reply.c (error responses through the handlers' own API),
 * stats.c, loop.c and the HTTP parsers. Called by server.c (open, drain, cut,
 * close), io.c (replies from other threads) and reply.c (hearth_respond);
 * never calls server.c or io.c. */
#include "server_int.h"

#include "base/clock.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 16384
#define BODY_RESERVE_MAX ((size_t)4 << 20)
#define OUT_MAX ((size_t)256 << 20)  /* a client that does not read gets cut off past this */
#define PIPELINE_MAX ((size_t)1 << 20) /* buffered bytes while a deferred request waits */
/* A keep-alive connection whose input buffer grew past two read chunks
 * keeps it for its next request (up to IN_KEEP_MAX a connection,
 * IO_IN_KEEP_BUDGET over an I/O thread's connections); the rest are freed
 * once their request is done, as every buffer was. Freed, the next 921 KB
 * frame of a client streaming them got a fresh buffer, and the kernel's
 * copy into it paid a page fault every 4 KiB. */
#define IN_KEEP_MAX BODY_RESERVE_MAX
#define IO_IN_KEEP_BUDGET ((size_t)64 << 20)

static void conn_io_cb(hearth_loop *loop, int fd, unsigned events, void *arg);
static void conn_timer_cb(hearth_loop *loop, void *arg);

static size_t in_max(const hearth_server *s)
{
    return s->cfg.limits.max_header_bytes + s->cfg.max_body + 65536;
}

static void set_timer(hearth_conn *c, enum timer_mode mode)
{
    hearth_loop *loop = c->io->loop;
    if (mode == TIMER_NONE) {
        hearth_loop_timer_stop(loop, &c->timer);
    } else if (mode != c->timer_mode || !hearth_timer_armed(&c->timer)) {
        const hearth_server_config *cfg = &c->io->s->cfg;
        uint64_t ms = mode == TIMER_IDLE ? cfg->idle_timeout_ms : mode == TIMER_HEADER ? cfg->header_timeout_ms : 2000;
        hearth_loop_timer_start(loop, &c->timer, ms);
    }
    c->timer_mode = (uint8_t)mode;
}

/* Re-registers only on change: the common case (respond, flush in full) costs no syscall. */
static void update_events(hearth_conn *c)
{
    unsigned ev = 0;
    if (!c->read_paused)
        ev |= HEARTH_EV_READ;
    if (c->out.len > 0)
        ev |= HEARTH_EV_WRITE;
    if (ev != c->events) {
        hearth_loop_mod_fd(c->io->loop, c->fd, ev);
        c->events = (uint8_t)ev;
    }
}

int hearth_conn_open(hearth_io *io, int fd)
{
    hearth_server *s = io->s;
    /* --max-connections is per process, over all its I/O threads: counted
     * here and in hearth_conn_close, the two places a connection starts and
     * ends, whether it was accepted here or handed over by a sibling. */
    if (atomic_fetch_add(&s->n_conns, 1) >= s->cfg.max_connections) {
        atomic_fetch_sub(&s->n_conns, 1);
        return HEARTH_ELIMIT;
    }
    uint32_t id;
    if (io->n_free > 0) {
        id = io->free_ids[--io->n_free];
    } else {
        uint32_t cap = io->conns_cap ? io->conns_cap * 2 : 256;
        hearth_conn **conns = realloc(io->conns, cap * sizeof *conns);
        if (!conns)
            goto nomem;
        uint32_t *free_ids = realloc(io->free_ids, cap * sizeof *free_ids);
        if (!free_ids) {
            io->conns = conns;
            goto nomem;
        }
        io->conns = conns;
        io->free_ids = free_ids;
        for (uint32_t i = io->conns_cap; i < cap; i++)
            conns[i] = NULL;
        /* hand out low ids first */
        for (uint32_t i = cap; i > io->conns_cap + 1; i--)
            free_ids[io->n_free++] = i - 1;
        id = io->conns_cap;
        io->conns_cap = cap;
    }
    hearth_conn *c = calloc(1, sizeof *c);
    if (!c) {
        io->free_ids[io->n_free++] = id;
        goto nomem;
    }
    static _Atomic uint32_t gen_counter = 1;
    c->io = io;
    c->fd = fd;
    c->id = id;
    c->gen = atomic_fetch_add(&gen_counter, 1);
    c->state = CONN_HEAD;
    c->events = HEARTH_EV_READ;
    c->route = HEARTH_MAX_ROUTES;
    hearth_buf_init(&c->in, in_max(s));
    hearth_buf_init(&c->out, OUT_MAX);
    hearth_buf_init(&c->body, s->cfg.max_body);
    hearth_timer_init(&c->timer, conn_timer_cb, c);
    if (hearth_loop_add_fd(io->loop, fd, HEARTH_EV_READ, conn_io_cb, c) != 0) {
        free(c);
        io->free_ids[io->n_free++] = id;
        atomic_fetch_sub(&s->n_conns, 1);
        return HEARTH_EIO;
    }
    io->conns[id] = c;
    io->open++;
    set_timer(c, TIMER_IDLE);
    return HEARTH_OK;
nomem:
    atomic_fetch_sub(&s->n_conns, 1);
    return HEARTH_ENOMEM;
}

/* Here, not in server.c which begins the drain, because the close of a
 * draining thread's last connection is what stops its loop: conn.c would
 * otherwise call back into server.c, which calls into conn.c. */
void hearth_io_maybe_stop(hearth_io *io)
{
    /* ... and once no thread of its process accepts any more (listen_users
     * 0): until then a sibling that has not seen the drain yet may still
     * accept a connection and hand it here, and a stopped loop would leave it
     * unanswered until the process exits (seen: a connect during the drain
     * hung for the 2.5 s of a request in flight on the other thread). The
     * thread that closes the listener wakes the others (server.c). */
    if (io->draining && io->open == 0 && atomic_load(&io->s->listen_users) <= 0)
        hearth_loop_stop(io->loop);
}

bool hearth_io_stopping(const hearth_io *io)
{
    return io->draining || atomic_load(&io->s->stopping);
}

/* How much of c->in's capacity to keep once it is empty (see
 * IO_IN_KEEP_BUDGET), the I/O thread's count updated to match. */
static size_t conn_keep_in(hearth_conn *c, bool open)
{
    hearth_io *io = c->io;
    io->in_kept -= c->in_kept;
    c->in_kept = 0;
    size_t cap = c->in.cap;
    if (!open || !c->keep_alive || cap <= 2 * READ_CHUNK || cap > IN_KEEP_MAX || io->in_kept + cap > IO_IN_KEEP_BUDGET)
        return 0;
    c->in_kept = cap;
    io->in_kept += cap;
    return cap;
}

/* A sink whose request's handler never took it goes back to its route. */
static void sink_drop(hearth_conn *c)
{
    if (!c->sinking)
        return;
    c->sinking = false;
    if (c->sink.release)
        c->sink.release(c->sink.user);
}

void hearth_conn_close(hearth_conn *c)
{
    hearth_io *io = c->io;
    sink_drop(c);
    if ((c->state == CONN_DEFERRED || c->state == CONN_STREAMING) && c->release) {
        hearth_release_cb cb = c->release;
        c->release = NULL;
        cb(c->release_arg, true);
    }
    if (c->state == CONN_DEFERRED || c->state == CONN_STREAMING) {
        /* a request that never got its answer: count it as 499-like "other" */
        atomic_fetch_sub(&io->s->shared->slot[io->gslot].inflight, 1);
        if (c->cut_by)
            HLOG_WARN("%s closed by the server (%s) before the response ended", c->log_line, c->cut_by);
        else
            HLOG_INFO("%s closed by client before the response ended", c->log_line);
    }
    hearth_loop_timer_stop(io->loop, &c->timer);
    hearth_loop_del_fd(io->loop, c->fd);
    close(c->fd);
    io->conns[c->id] = NULL;
    io->free_ids[io->n_free++] = c->id;
    io->open--;
    atomic_fetch_sub(&io->s->n_conns, 1);
    atomic_fetch_sub(&io->s->shared->slot[io->gslot].conns, 1);
    conn_keep_in(c, false);
    hearth_buf_deinit(&c->in);
    hearth_buf_deinit(&c->out);
    hearth_buf_deinit(&c->body);
    free(c);
    if (io->draining)
        hearth_io_maybe_stop(io);
}

/* Writes as much of c->out as the socket takes. Returns false when c was closed. */
static bool flush(hearth_conn *c)
{
    while (c->out.len > 0) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (n > 0) {
            hearth_buf_consume(&c->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        hearth_conn_close(c); /* EPIPE, ECONNRESET: the client is gone */
        return false;
    }
    if (c->out.len == 0) {
        hearth_buf_reset(&c->out, 0);
        if (c->state == CONN_CLOSING && !c->lingering) {
            /* Lingering close: half-close, then read and discard until the client
             * closes (or a short timer), because closing with unread input makes
             * the kernel send a RST that can destroy the response in flight. */
            shutdown(c->fd, SHUT_WR);
            c->lingering = true;
            c->read_paused = false;
            set_timer(c, TIMER_LINGER);
        }
    }
    update_events(c);
    return true;
}

void hearth_conn_flush(hearth_conn *c) { flush(c); }

/* Called when draining: idle connections close now, busy ones after their
 * response (hearth_conn_request_complete, as keep_alive is now false). One
 * between requests whose last answer, sent before the drain with
 * keep-alive, is still being written closes once it is written: left in
 * CONN_HEAD it stayed open, idle, until the client left or the drain timeout
 * ran out, so a stop took the whole drain timeout. */
void hearth_conn_drain(hearth_conn *c)
{
    c->keep_alive = false;
    if (c->state != CONN_HEAD || c->in.len > 0)
        return;
    if (c->out.len == 0) {
        hearth_conn_close(c);
        return;
    }
    c->state = CONN_CLOSING;
    c->read_paused = true;
    set_timer(c, TIMER_IDLE); /* bounds how long a client that never reads can hold the drain */
}

void hearth_conn_cut(hearth_conn *c, const char *why)
{
    char msg[128];
    snprintf(msg, sizeof msg, "the server is shutting down: the response was cut (%s)", why);
    if (c->state == CONN_STREAMING && c->sse && !c->is_head) {
        hearth_buf ev;
        hearth_buf_init(&ev, 4096);
        int rc = hearth_buf_appends(&ev, "data: ");
        if (!rc)
            rc = hearth_format_error(&ev, 503, "unavailable_error", msg);
        if (!rc)
            rc = hearth_buf_appends(&ev, "\n\n");
        if (!rc && c->stream_close_delimited)
            rc = hearth_buf_append(&c->out, ev.data, ev.len);
        else if (!rc)
            rc = hearth_http_chunk_format(&c->out, ev.data, ev.len);
        if (!rc && !c->stream_close_delimited)
            hearth_http_chunk_end(&c->out);
        hearth_buf_deinit(&ev);
    } else if (c->state == CONN_DEFERRED) {
        hearth_buf body;
        hearth_buf_init(&body, 4096);
        hearth_format_error(&body, 503, "unavailable_error", msg);
        c->keep_alive = false;
        hearth_response res = {503, "application/json", NULL, body.data, body.len};
        hearth_conn_respond(c, &res);
        hearth_buf_deinit(&body);
    }
    /* no waiting for a slow reader: the loop stops right after this */
    while (c->out.len > 0) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        hearth_buf_consume(&c->out, (size_t)n);
    }
    c->cut_by = why;
    hearth_conn_close(c);
}

static void log_and_count(hearth_conn *c)
{
    hearth_io *io = c->io;
    uint64_t ns = hearth_now_ns() - c->start_ns;
    hearth_stats_request(io->s, io->gslot, c->route, c->status, ns);
    HLOG_INFO("%s %d %zu %.3fms", c->log_line, c->status, c->resp_bytes, (double)ns / 1e6);
}

void hearth_conn_request_done(hearth_conn *c)
{
    atomic_fetch_sub(&c->io->s->shared->slot[c->io->gslot].inflight, 1);
    log_and_count(c);
}

/* Drops the finished request's bytes from c->in and gets ready for the next. */
void hearth_conn_request_complete(hearth_conn *c)
{
    hearth_conn_request_done(c);
    size_t used = c->head_len + (c->chunked ? 0 : c->body_len);
    hearth_buf_consume(&c->in, used);
    if (c->in.len == 0)
        hearth_buf_reset(&c->in, conn_keep_in(c, true));
    hearth_buf_reset(&c->body, 0);
    c->head_len = c->body_len = 0;
    c->chunked = false;
    c->sent_continue = c->got_body_bytes = false;
    c->cors = false;
    if (c->release) {
        hearth_release_cb cb = c->release;
        c->release = NULL;
        cb(c->release_arg, false);
    }
    if (c->keep_alive) {
        c->state = CONN_HEAD;
        c->read_paused = false;
    } else {
        c->state = CONN_CLOSING;
        c->read_paused = true;
        set_timer(c, TIMER_IDLE);
    }
}

void hearth_conn_respond(hearth_conn *c, const hearth_response *res)
{
    hearth_io *io = c->io;
    /* Not io->draining alone: a stop's wake-up runs the reply queue before
     * the loop begins its drain (server.c, io_wake), and a handler running on
     * the loop when SIGTERM came returns before it; either answer, written
     * after the stop, said keep-alive (the likely cause of the keep-alive
     * answer CI's sanitizer build once saw after SIGTERM). */
    if (hearth_io_stopping(io))
        c->keep_alive = false;
    hearth_http_head h = {
        .status = res->status,
        .minor_version = c->http10 ? 0 : 1,
        .content_type = res->content_type,
        .headers = res->headers,
        .cors_origin = hearth_access_cors(c),
        .date = hearth_http_date_now(&io->date),
        .keep_alive = c->keep_alive,
        .content_length = res->body_len,
    };
    size_t before = c->out.len;
    int rc = hearth_http_head_format(&c->out, &h);
    if (!rc && !c->is_head && res->body_len)
        rc = hearth_buf_append(&c->out, res->body, res->body_len);
    if (rc) {
        c->keep_alive = false; /* could not queue: the client is far behind */
        c->out.len = before;
    }
    c->status = res->status;
    c->resp_bytes = c->out.len - before;
}

/* Sends an error for a request the server itself rejects, then closes. */
static void reject(hearth_conn *c, int status, const char *type, const char *msg)
{
    hearth_buf body;
    hearth_buf_init(&body, 4096);
    hearth_format_error(&body, status, type, msg);
    c->keep_alive = false;
    hearth_response res = {status, "application/json", NULL, body.data, body.len};
    hearth_conn_respond(c, &res);
    hearth_buf_deinit(&body);
    if (!c->log_line[0])
        snprintf(c->log_line, sizeof c->log_line, "- -");
    atomic_fetch_add(&c->io->s->shared->slot[c->io->gslot].inflight, 1);
    hearth_conn_request_done(c);
    c->state = CONN_CLOSING;
    c->read_paused = true;
    sink_drop(c);
    set_timer(c, TIMER_IDLE); /* bounds how long a client that never reads can hold us */
}

static bool exact_match(const hearth_route *r, const char *path, size_t path_len)
{
    return !r->prefix_len && strlen(r->path) == path_len && memcmp(r->path, path, path_len) == 0;
}

/* Whether r answers path: exactly, or as a prefix route when no exact route
 * knows the path (server.h). */
static bool route_matches(const hearth_route *r, const char *path, size_t path_len, bool exact_known)
{
    if (!r->prefix_len)
        return exact_match(r, path, path_len);
    return !exact_known && path_len > r->prefix_len && memcmp(r->path, path, r->prefix_len) == 0;
}

static bool exact_known(const hearth_server *s, const char *path, size_t path_len)
{
    for (int i = 0; i < s->n_routes; i++)
        if (exact_match(&s->routes[i], path, path_len))
            return true;
    return false;
}

static int find_route(hearth_server *s, const char *path, size_t path_len, const char *method, size_t method_len,
                      bool *path_known)
{
    *path_known = false;
    bool head = method_len == 4 && memcmp(method, "HEAD", 4) == 0;
    bool exact = exact_known(s, path, path_len);
    for (int i = 0; i < s->n_routes; i++) {
        const hearth_route *r = &s->routes[i];
        if (!route_matches(r, path, path_len, exact))
            continue;
        *path_known = true;
        size_t ml = strlen(r->method);
        if ((ml == method_len && memcmp(r->method, method, ml) == 0) || (head && strcmp(r->method, "GET") == 0))
            return i;
    }
    return -1;
}

static void allow_header(hearth_server *s, const char *path, size_t path_len, char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "Allow: ");
    bool first = true;
    bool exact = exact_known(s, path, path_len);
    for (int i = 0; i < s->n_routes && used < n; i++) {
        const hearth_route *r = &s->routes[i];
        if (!route_matches(r, path, path_len, exact))
            continue;
        used += (size_t)snprintf(out + used, n - used, "%s%s%s", first ? "" : ", ", r->method,
                                 strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
        first = false;
    }
    if (used < n)
        snprintf(out + used, n - used, "\r\n");
}

/* The head and body are complete: route and run the handler, here or on
 * the handler pool. *loop_body counts the body bytes whose handlers already
 * ran on the loop in this pass over c's input (see hearth_offload_wanted). */
static void dispatch(hearth_conn *c, size_t *loop_body)
{
    hearth_io *io = c->io;
    hearth_server *s = io->s;
    hearth_http_request *http = &io->scratch;
    int status = 0;
    long rc = hearth_http_parse_request(c->in.data, c->head_len, &s->cfg.limits, http, &status, NULL);
    if (rc != (long)c->head_len) { /* cannot happen: the same bytes parsed before */
        reject(c, 500, "server_error", "request head changed while buffered");
        return;
    }
    hearth_request req = {
        .c = c,
        .http = http,
        .path = http->path,
        .path_len = http->path_len,
        .query = http->query,
        .query_len = http->query_len,
    };
    if (c->chunked) {
        req.body = c->body.data ? c->body.data : "";
        req.body_len = c->body.len;
    } else {
        req.body = c->in.data + c->head_len;
        req.body_len = c->body_len;
    }
    req.sink = c->sinking ? &c->sink : NULL;
    c->is_head = http->method_len == 4 && memcmp(http->method, "HEAD", 4) == 0;
    req.is_head = c->is_head;
    req.log_line = c->log_line;
    c->keep_alive = http->keep_alive && !io->draining;
    c->http10 = http->minor_version == 0;
    snprintf(c->log_line, sizeof c->log_line, "%.*s %.*s", (int)http->method_len, http->method,
             (int)(req.path_len > 64 ? 64 : req.path_len), req.path);
    atomic_fetch_add(&s->shared->slot[io->gslot].inflight, 1);

    bool path_known;
    size_t parsed = 0;
    int ri = find_route(s, req.path, req.path_len, http->method, http->method_len, &path_known);
    c->route = ri >= 0 ? ri : HEARTH_MAX_ROUTES;
    if (ri >= 0 && s->routes[ri].prefix_len) {
        req.rest = req.path + s->routes[ri].prefix_len;
        req.rest_len = req.path_len - s->routes[ri].prefix_len;
    }
    c->cors = s->cfg.cors_origin != NULL;
    if (!hearth_access_check(&req, ri, path_known)) {
        /* answered: 401 or a preflight */
    } else if (ri < 0) {
        if (path_known) {
            char allow[256];
            allow_header(s, req.path, req.path_len, allow, sizeof allow);
            hearth_respond_error_headers(&req, 405, "invalid_request_error", allow, "method %.*s is not allowed on this path",
                                         (int)(http->method_len > 16 ? 16 : http->method_len), http->method);
        } else {
            hearth_respond_error(&req, 404, "not_found_error", "no route for %.*s", (int)(req.path_len > 128 ? 128 : req.path_len),
                                 req.path);
        }
    } else if (!c->sinking && hearth_offload_wanted(c, parsed = hearth_offload_parsed(c, &req, ri), *loop_body)) {
        int orc = hearth_offload_submit(c, &req, ri);
        if (orc == HEARTH_ELIMIT) {
            atomic_fetch_add_explicit(&s->shared->slot[io->gslot].offload_refused, 1, memory_order_relaxed);
            hearth_respond_error(&req, 503, "unavailable_error",
                                 "too many large requests are waiting for a handler thread (--handler-threads %d): retry later",
                                 s->cfg.handler_threads);
        } else if (orc != 0) {
            hearth_respond_error(&req, 503, "unavailable_error", "out of memory");
        }
    } else {
        *loop_body += parsed;
        s->routes[ri].handler(&req, s->routes[ri].ctx);
        if (!req.done) {
            HLOG_ERROR("handler for %s returned without responding", c->log_line);
            hearth_respond_error(&req, 500, "server_error", "the handler did not respond");
        }
    }
    if (req.sink_taken)
        c->sinking = false; /* the handler's now */
    sink_drop(c);
    if (c->state == CONN_DEFERRED)
        return;
    hearth_conn_request_complete(c);
}

/* Reads the body bytes present; returns true when the body is complete. */
static bool body_ready(hearth_conn *c)
{
    if (!c->chunked)
        return c->in.len - c->head_len >= c->body_len && (!c->sinking || c->sink_got == c->sink_len);
    size_t avail = c->in.len - c->head_len;
    if (avail == 0)
        return false;
    bool done = false;
    int status = 0;
    hearth_err err = {0};
    long n = hearth_http_chunked_decode(&c->chunk, c->in.data + c->head_len, avail, &c->body, &done, &status, &err);
    if (n < 0) {
        reject(c, status ? status : 400, status == 413 ? "request_too_large" : "invalid_request_error", err.msg);
        return false;
    }
    /* drop the encoded bytes just decoded, keeping the head in front and pipelined bytes after */
    memmove(c->in.data + c->head_len, c->in.data + c->head_len + n, avail - (size_t)n);
    c->in.len -= (size_t)n;
    c->in.data[c->in.len] = 0;
    return done;
}

/* The head of a Content-Length body is parsed (io->scratch): whether its
 * route sinks the body's tail (server.h's hearth_server_route_body_sink).
 * Body bytes that came with the head past the part kept are moved into
 * the sink, pipelined bytes after the body closed up behind the part kept;
 * from here on body_len counts the part kept. */
static void maybe_sink(hearth_conn *c)
{
    hearth_server *s = c->io->s;
    const hearth_http_request *http = &c->io->scratch;
    bool known;
    int ri = find_route(s, http->path, http->path_len, http->method, http->method_len, &known);
    if (ri < 0 || !s->routes[ri].body_sink)
        return;
    hearth_request req = {.c = c, .http = http, .path = http->path, .path_len = http->path_len,
                          .query = http->query, .query_len = http->query_len, .body_len = c->body_len,
                          .log_line = c->log_line};
    if (s->routes[ri].prefix_len) {
        req.rest = req.path + s->routes[ri].prefix_len;
        req.rest_len = req.path_len - s->routes[ri].prefix_len;
    }
    hearth_body_sink sk = {0};
    if (!s->routes[ri].body_sink(&req, s->routes[ri].ctx, &sk))
        return;
    /* nothing to sink, or a kept part the handler pool would parse (the
     * hop carries the connection's buffer, not a sink): the buffer takes
     * it all, as without one */
    if (!sk.dst || sk.keep >= c->body_len || (s->offload && sk.keep >= s->cfg.offload_body)) {
        if (sk.release)
            sk.release(sk.user);
        return;
    }
    c->sinking = true;
    c->sink = sk;
    c->sink_len = c->body_len - sk.keep;
    c->sink_got = 0;
    c->body_len = sk.keep;
    size_t have = c->in.len - c->head_len;
    if (have > sk.keep) {
        size_t extra = have - sk.keep, take = extra < c->sink_len ? extra : c->sink_len;
        char *tail = c->in.data + c->head_len + sk.keep;
        memcpy(sk.dst, tail, take);
        memmove(tail, tail + take, extra - take);
        c->sink_got = take;
        c->in.len -= take;
        c->in.data[c->in.len] = 0;
    }
    if (sk.spin_ns && c->sink_got < c->sink_len)
        hearth_loop_spin(c->io->loop, sk.spin_ns);
}

void hearth_conn_process(hearth_conn *c)
{
    hearth_io *io = c->io;
    hearth_server *s = io->s;
    size_t loop_body = 0;
    for (;;) {
        if (c->state == CONN_HEAD) {
            if (c->in.len == 0) {
                set_timer(c, io->draining ? TIMER_NONE : TIMER_IDLE);
                if (io->draining && c->out.len == 0) {
                    hearth_conn_close(c);
                    return;
                }
                break;
            }
            int status = 0;
            hearth_err err = {0};
            long rc = hearth_http_parse_request(c->in.data, c->in.len, &s->cfg.limits, &io->scratch, &status, &err);
            if (rc == HEARTH_EAGAIN) {
                set_timer(c, TIMER_HEADER);
                break;
            }
            if (rc < 0) {
                snprintf(c->log_line, sizeof c->log_line, "(malformed request)");
                reject(c, status ? status : 400, status == 431 ? "request_too_large" : "invalid_request_error", err.msg);
                break;
            }
            const hearth_http_request *http = &io->scratch;
            snprintf(c->log_line, sizeof c->log_line, "%.*s %.*s", (int)(http->method_len > 16 ? 16 : http->method_len),
                     http->method, (int)(http->target_len > 64 ? 64 : http->target_len), http->target);
            c->start_ns = hearth_now_ns();
            c->head_len = (size_t)rc;
            c->chunked = http->chunked;
            c->body_len = http->content_length > 0 ? (size_t)http->content_length : 0;
            c->http10 = http->minor_version == 0;
            c->keep_alive = http->keep_alive;
            if (!c->chunked && http->content_length > (int64_t)s->cfg.max_body) {
                char msg[128];
                snprintf(msg, sizeof msg, "request body of %lld bytes is over the limit of %zu bytes",
                         (long long)http->content_length, s->cfg.max_body);
                reject(c, 413, "request_too_large", msg);
                break;
            }
            if (c->chunked)
                hearth_http_chunked_init(&c->chunk);
            else if (c->body_len > 0)
                maybe_sink(c);
            bool has_body = c->chunked || c->body_len > 0 || c->sinking;
            if (has_body && http->expect_continue && c->in.len == c->head_len && !c->sent_continue) {
                hearth_buf_appends(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
                c->sent_continue = true;
            }
            c->state = CONN_BODY;
        }
        if (c->state == CONN_BODY) {
            if (!body_ready(c)) {
                if (c->state == CONN_BODY)
                    set_timer(c, TIMER_HEADER);
                break;
            }
            set_timer(c, TIMER_NONE);
            dispatch(c, &loop_body);
            continue;
        }
        break; /* DEFERRED, STREAMING, CLOSING: wait */
    }
    if (c->state == CONN_DEFERRED || c->state == CONN_STREAMING) {
        /* keep reading to notice a disconnect, but bound what a pipelining client can park */
        if (c->in.len > PIPELINE_MAX && !c->read_paused)
            c->read_paused = true;
    }
    flush(c);
}

/* One recv of up to room bytes into at, *got += what came: RX_MORE (it
 * filled room: more may wait), RX_DONE (less, or nothing yet), RX_GONE (EOF
 * or an error: the client is gone, c is closed and freed; a half-closed
 * client gets no answer). */
enum { RX_MORE, RX_DONE, RX_GONE };
static int recv_some(hearth_conn *c, char *at, size_t room, size_t *got)
{
    for (;;) {
        ssize_t n = recv(c->fd, at, room, 0);
        if (n > 0) {
            *got += (size_t)n;
            return (size_t)n < room ? RX_DONE : RX_MORE;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return RX_DONE;
        hearth_conn_close(c);
        return RX_GONE;
    }
}

static void on_readable(hearth_conn *c)
{
    for (int round = 0; round < 4; round++) {
        if (c->sinking && c->state == CONN_BODY && c->in.len - c->head_len >= c->body_len && c->sink_got < c->sink_len) {
            /* the kept part is in: the tail goes straight to the sink, no further than its end */
            int rx = recv_some(c, (char *)c->sink.dst + c->sink_got, c->sink_len - c->sink_got, &c->sink_got);
            if (rx == RX_GONE)
                return;
            if (c->sink.spin_ns && c->sink_got < c->sink_len)
                hearth_loop_spin(c->io->loop, c->sink.spin_ns); /* the next piece is near */
            if (rx == RX_DONE)
                break;
            continue;
        }
        /* a body of known length gets its room at once, up to
         * BODY_RESERVE_MAX: one recv can take all that has arrived (a 921 KB
         * frame grew the buffer from 16 KiB by doubling, a realloc per
         * step); the cap keeps a client that announces a big body and sends
         * it slowly from making the server hold it all before the bytes come */
        size_t want = READ_CHUNK;
        if (c->state == CONN_BODY && !c->chunked && c->head_len + c->body_len > c->in.len &&
            c->head_len + c->body_len - c->in.len > want) {
            want = c->head_len + c->body_len - c->in.len;
            want = want < BODY_RESERVE_MAX ? want : BODY_RESERVE_MAX;
        }
        if (hearth_buf_reserve(&c->in, want) != 0 && hearth_buf_reserve(&c->in, READ_CHUNK) != 0) {
            /* the buffer is at its ceiling: the parser will answer 413/431, or a
             * parked connection simply stops reading */
            size_t room = c->in.max - c->in.len;
            if (room == 0 || hearth_buf_reserve(&c->in, room) != 0) {
                c->read_paused = true;
                break;
            }
        }
        size_t room = c->in.cap - c->in.len - 1;
        if (c->sinking && c->state == CONN_BODY && c->head_len + c->body_len > c->in.len &&
            c->head_len + c->body_len - c->in.len < room)
            room = c->head_len + c->body_len - c->in.len; /* the tail after it goes to the sink */
        int rx = recv_some(c, c->in.data + c->in.len, room, &c->in.len);
        if (rx == RX_GONE)
            return;
        c->in.data[c->in.len] = 0;
        if (rx == RX_DONE)
            break;
    }
    if (c->state == CONN_HEAD || c->state == CONN_BODY)
        hearth_conn_process(c);
    else if (c->read_paused)
        update_events(c);
}

static void conn_io_cb(hearth_loop *loop, int fd, unsigned events, void *arg)
{
    hearth_conn *c = arg;
    if (events & HEARTH_EV_WRITE) {
        if (!flush(c))
            return;
        if (c->state == CONN_HEAD && c->in.len > 0 && !(events & HEARTH_EV_READ)) {
            hearth_conn_process(c);
            return;
        }
    }
    if (events & HEARTH_EV_READ) {
        if (c->state == CONN_CLOSING) {
            /* discard what a rejected or finished client still sends */
            char sink[8192];
            for (int i = 0; i < 16; i++) {
                ssize_t n = recv(fd, sink, sizeof sink, 0);
                if (n > 0)
                    continue;
                if (n < 0 && errno == EINTR)
                    continue;
                if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
                    hearth_conn_close(c);
                break;
            }
            return;
        }
        on_readable(c);
    }
}

static void conn_timer_cb(hearth_loop *loop, void *arg)
{
    hearth_conn *c = arg;
    if (c->state == CONN_CLOSING) {
        hearth_conn_close(c); /* lingering close over, or a client that will not read its response */
        return;
    }
    if (c->timer_mode == TIMER_HEADER && (c->state == CONN_HEAD || c->state == CONN_BODY)) {
        snprintf(c->log_line, sizeof c->log_line, "(slow request)");
        c->route = HEARTH_MAX_ROUTES;
        c->start_ns = hearth_now_ns();
        reject(c, 408, "timeout_error", "the request did not arrive in time");
        flush(c);
        return;
    }
    hearth_conn_close(c); /* idle keep-alive timeout */
}
