/* server.h: hearth's HTTP/1.1 server: I/O threads with one event loop each,
 * a routing table, synchronous and deferred (cross-thread) responses, SSE.
 *
 * The server knows nothing of models. The api layer registers routes before
 * hearth_server_run. A handler runs on a loop thread, or, for a request
 * whose body is at least offload_body bytes, on one of the process's
 * handler_threads (the handler pool), so that parsing and tokenizing a big
 * body never stalls the other connections of its loop. The handler cannot
 * tell the difference: the request view stays valid for its whole run, and
 * respond, respond_error and defer work the same from either thread.
 * Handlers must be thread-safe (several run at once) and must not block:
 * a handler that needs compute defers the request, hands a copy of what it
 * needs to the engine, and replies later from any thread through the
 * hearth_reply handle, which names the connection by (slot, id, generation)
 * so a reply for a connection that has gone away is dropped, never delivered
 * to a stranger that reused the fd. */
#ifndef HEARTH_NET_SERVER_H
#define HEARTH_NET_SERVER_H

#include "base/buf.h"
#include "base/err.h"
#include "net/http_parse.h"
#include "net/loop.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_server hearth_server;
typedef struct hearth_request hearth_request;

typedef struct hearth_server_config {
    const char *host;             /* default "127.0.0.1" */
    int port;                     /* default 8080; 0 picks a free port (see hearth_server_port) */
    int threads;                  /* I/O threads per process; default 1 */
    int workers;                  /* 0: one process; N >= 1: N worker processes under a supervisor */
    bool spawn;                   /* workers start by fork+exec of the binary, not a bare fork */
    bool reuse_port;              /* let other processes bind the same port (SO_REUSEPORT) */
    bool pin_threads;             /* default on: with 2+ I/O threads in all, no more than the CPUs, each
                                   * thread on its own CPU and connections placed by the CPU their packets
                                   * arrive on (server.c, "CPU placement") */
    enum hearth_poller_kind poller;
    hearth_http_limits limits;    /* request line 8 KiB, head 64 KiB, 100 fields */
    size_t max_body;              /* default 16 MiB -> 413 */
    int handler_threads;          /* per process: threads that run the handlers of big requests (the handler
                                   * pool); default 2; 0: every handler runs on its loop thread */
    size_t offload_body;          /* a request with a body of at least this many bytes runs its handler on the
                                   * pool; default 16 KiB (server.c says why); 0: every request */
    uint64_t header_timeout_ms;   /* a request head (and its body) must arrive within this; default 10 s -> 408 */
    uint64_t idle_timeout_ms;     /* keep-alive connection with no request; default 60 s */
    uint64_t drain_timeout_ms;    /* SIGTERM: longest wait for in-flight requests (and for models still loading); default 10 s.
                                   * A handler still running on the handler pool then (parsing and tokenizing a
                                   * big body: seconds at most) has its connection answered 503 at once, and is
                                   * waited for before the models stop */
    int max_connections;          /* per process; past it new connections are closed at once; default 65536 */
    int backlog;                  /* listen(2) backlog; default 4096 */
    const char *api_key;          /* when set, every non-public route wants "Authorization: Bearer <key>" -> else 401 */
    const char *cors_origin;      /* when set, CORS headers name this origin ("*" for any) and OPTIONS preflights get 204 */
    char **argv;                  /* the process's argv, for --spawn to re-exec (borrowed) */
} hearth_server_config;

void hearth_server_config_default(hearth_server_config *cfg);

/* ---- requests, valid only during the handler call (on whichever thread it runs) ---- */

typedef void (*hearth_handler)(hearth_request *req, void *ctx);

const hearth_http_request *hearth_request_http(const hearth_request *req);
/* Path without the query string, and the query (without '?', may be empty). */
const char *hearth_request_path(const hearth_request *req, size_t *len);
const char *hearth_request_query(const hearth_request *req, size_t *len);
const char *hearth_request_body(const hearth_request *req, size_t *len);
/* Case-insensitive header value as a NUL-terminated copy in out; NULL when absent. */
const char *hearth_request_header(const hearth_request *req, const char *name, char *out, size_t out_size);
bool hearth_request_is_head(const hearth_request *req);
/* For a route ending in "/{name}": the part of the path that the braces
 * matched, as sent (still percent-encoded; at least one byte); NULL for an
 * exact route. */
const char *hearth_request_rest(const hearth_request *req, size_t *len);

typedef struct hearth_response {
    int status;
    const char *content_type;   /* NULL: no Content-Type */
    const char *headers;        /* extra header lines, each ending in "\r\n", or NULL */
    const void *body;
    size_t body_len;
} hearth_response;

/* Sends a complete response (copied). Exactly one of respond / respond_error /
 * defer per request. On the handler pool the response travels to the loop as
 * hearth_reply_send's does (and is dropped when the client has gone). */
void hearth_respond(hearth_request *req, const hearth_response *res);
/* {"error":{"code":status,"type":type,"message":...}} with Content-Type application/json. */
void hearth_respond_error(hearth_request *req, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with extra header lines (each ending in CRLF), e.g. Allow or WWW-Authenticate. */
void hearth_respond_error_headers(hearth_request *req, int status, const char *type, const char *headers, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Formats the JSON error body into out (used by api handlers that reply later). */
int hearth_format_error(hearth_buf *out, int status, const char *type, const char *message);
/* Appends s[0..n) as a JSON string literal; invalid UTF-8 becomes U+FFFD. */
int hearth_json_quote(hearth_buf *out, const char *s, size_t n);

/* ---- deferred replies: any thread ---- */

typedef struct hearth_reply {
    int slot;        /* loop index in this process */
    uint32_t id;     /* connection slot id in that loop */
    uint32_t gen;    /* generation: a stale handle's messages are dropped */
} hearth_reply;

/* Called exactly once, on the loop thread (also for a request deferred on the
 * handler pool), when a deferred request ends:
 * cancelled=false once its reply has been queued in full, cancelled=true when
 * the connection closed first (client gone, timeout, shutdown); a producer
 * should then stop work. After it, sends on the handle are dropped. This is
 * where the handler's side drops its reference to per-request state. It must
 * not block. */
typedef void (*hearth_release_cb)(void *arg, bool cancelled);

/* Takes the request off the loop: the connection waits (reading no further
 * requests) until the reply is sent. on_release may be NULL. Defer BEFORE
 * handing the work to another thread: a fast worker may otherwise finish
 * and reply before the handle exists. On the handler pool, on_release
 * reaches the connection through its loop's queue, ahead of any reply sent
 * after this call; when the connection has closed by then, on_release is
 * called (cancelled=true) on the loop thread all the same. */
hearth_reply hearth_request_defer(hearth_request *req, hearth_release_cb on_release, void *arg);
/* A complete response. Returns 0, or HEARTH_ENOTFOUND when the handle is stale. */
int hearth_reply_send(hearth_server *s, hearth_reply h, const hearth_response *res);
/* Any thread: the I/O thread that holds h's connection polls without
 * sleeping for the next ns nanoseconds (net/loop.h's hearth_loop_spin): a
 * deferred answer due within them, and the client's next request, are
 * taken without that thread's wake-up. For latency-bound work (frames). */
void hearth_reply_spin(hearth_server *s, hearth_reply h, uint64_t ns);
/* Any thread: that I/O thread polls from from_ns until until_ns
 * (hearth_loop_spin_window): the window where a paced client's next
 * request is expected. */
void hearth_reply_spin_window(hearth_server *s, hearth_reply h, uint64_t from_ns, uint64_t until_ns);
/* A complete JSON error response, shaped as hearth_respond_error's. */
int hearth_reply_error(hearth_server *s, hearth_reply h, int status, const char *type, const char *message);
/* A streamed response: headers now (chunked transfer coding), then chunks, then end.
 * For SSE use content type "text/event-stream" and send "data: ...\n\n" chunks. */
int hearth_reply_stream_begin(hearth_server *s, hearth_reply h, int status, const char *content_type, const char *headers);
int hearth_reply_stream_write(hearth_server *s, hearth_reply h, const void *data, size_t len);
int hearth_reply_stream_end(hearth_server *s, hearth_reply h);

/* ---- lifecycle ---- */

hearth_server *hearth_server_new(const hearth_server_config *cfg, hearth_err *err);
void hearth_server_free(hearth_server *s);

/* Routes: several methods per path. A path matches exactly, or, when its
 * last segment is a name in braces ("/v1/models/{id}"), any request path that
 * extends the part before the brace by at least one byte (slashes included:
 * "/v1/models/a/b" matches); the handler reads that tail with
 * hearth_request_rest. An exact route wins over a
 * prefix route for a path both would match, and a path that matches any exact
 * route is never handed to a prefix route. A path with no route gets 404, a
 * known path with another method 405 with an Allow header. HEAD is answered by
 * the GET handler with the body suppressed. The path as registered is the
 * route's label in /metrics. Call before hearth_server_run. */
int hearth_server_route(hearth_server *s, const char *method, const char *path, hearth_handler h, void *ctx);
/* HEARTH_ROUTE_PUBLIC: answered without the --api-key (health checks, metrics scrapers). */
enum { HEARTH_ROUTE_PUBLIC = 1 };
int hearth_server_route_flags(hearth_server *s, const char *method, const char *path, hearth_handler h, void *ctx,
                              unsigned flags);

/* The bytes of req's body its handler parses, where the rest it only copies
 * (Triton's binary tensor data after its JSON header): a request whose
 * parsed bytes are under offload_body runs on the loop, with no hop to the
 * handler pool, when its whole body is at most HEARTH_LOOP_COPY_MAX (a copy
 * of 4 MiB holds the loop ~0.5 ms). Called on the loop thread before the
 * handler, with the request as the handler will see it. Set on a route
 * registered before (method and path as given there); without one every
 * body byte counts. */
#define HEARTH_LOOP_COPY_MAX ((size_t)4 << 20)
typedef size_t (*hearth_parse_bytes_fn)(const hearth_request *req, void *ctx);
int hearth_server_route_parse_bytes(hearth_server *s, const char *method, const char *path, hearth_parse_bytes_fn fn);

/* Where the tail of a request's body goes (Triton's binary tensor data,
 * into the input buffer a model keeps): called on the loop thread once the
 * head of a request to the route is parsed, with the request as its
 * handler will see it but no body yet (body NULL, body_len the
 * Content-Length; never for a chunked body). false: the body goes to the
 * connection's buffer as ever. true with *sink filled: the body's first
 * sink->keep bytes go to the buffer, the other body_len - keep straight
 * into sink->dst (the kernel's copy out of the socket is then the only
 * one). The handler sees body_len = keep and takes the tail with
 * hearth_request_take_sink; a sink its request's handler did not take, or
 * whose request never reached one (the client went, a 401), is given back
 * by sink->release(sink->user) on the loop thread. Such a request never
 * goes to the handler pool. */
typedef struct hearth_body_sink {
    size_t keep;
    void *dst;
    void (*release)(void *user);
    void *user;
    /* while the tail comes, the loop polls rather than sleeping (net/loop.h's
     * hearth_loop_spin) up to spin_ns past each piece: a 0.9 MB frame comes
     * over loopback in segments of up to 64 KiB, each a wake-up otherwise;
     * 0 sleeps */
    uint64_t spin_ns;
} hearth_body_sink;
typedef bool (*hearth_body_sink_fn)(const hearth_request *req, void *ctx, hearth_body_sink *sink);
int hearth_server_route_body_sink(hearth_server *s, const char *method, const char *path, hearth_body_sink_fn fn);
/* In a handler: its request's sink, now the handler's (sink->user is no
 * longer released for it), or NULL where the body had none. The pointer
 * holds while the handler runs. */
const hearth_body_sink *hearth_request_take_sink(hearth_request *req);

/* Called in each serving process (in workers: after fork), on a thread of its
 * own while the server already answers, to load models there rather than in
 * the supervisor; the api answers 503 until it is done. A non-zero return
 * stops the process with HEARTH_EXIT_CONFIG, and a supervisor that sees that
 * status stops every worker instead of respawning. */
typedef int (*hearth_process_init_cb)(hearth_server *s, void *ctx);
void hearth_server_on_process_init(hearth_server *s, hearth_process_init_cb cb, void *ctx);
/* Called in each serving process after its I/O threads have stopped, to free what init made. */
typedef void (*hearth_process_exit_cb)(hearth_server *s, void *ctx);
void hearth_server_on_process_exit(hearth_server *s, hearth_process_exit_cb cb, void *ctx);
#define HEARTH_EXIT_CONFIG 78 /* sysexits' EX_CONFIG */

/* Binds and serves until SIGTERM/SIGINT, then drains. In worker mode the
 * calling process becomes the supervisor. Returns the process exit status. */
int hearth_server_run(hearth_server *s);
/* The bound port (after bind; useful with port 0). */
int hearth_server_port(const hearth_server *s);
/* This process's worker index (0 .. workers-1), or -1 in a single process
 * and in the supervisor; set before the process-init callback runs. */
int hearth_server_worker_index(const hearth_server *s);
/* Asks a running server to drain and stop (any thread; also what SIGTERM does). */
void hearth_server_shutdown(hearth_server *s);

/* Appends the server's Prometheus metrics (all workers) to out. */
int hearth_server_metrics(hearth_server *s, hearth_buf *out);
/* The config in force (for doctor and /props). */
const hearth_server_config *hearth_server_get_config(const hearth_server *s);

#endif
