/* server_int.h: the server's private structures, shared by server.c (life
 * cycle, threads, accept), conn.c (the per-connection state machine),
 * reply.c (what handlers call), io.c (each I/O thread's reply queue),
 * offload.c (the handler pool), access.c, stats.c (shared counters) and
 * workers.c. */
#ifndef HEARTH_NET_SERVER_INT_H
#define HEARTH_NET_SERVER_INT_H

#include "http_response.h"
#include "net/server.h"

#include <pthread.h>
#include <stdatomic.h>

#define HEARTH_MAX_ROUTES 64
#define HEARTH_MAX_SLOTS 256 /* workers x threads */

/* ---- shared statistics: one block per slot (I/O thread), in shared memory
 * so any worker can render /metrics for all, and the balancer can read every
 * slot's load. Each slot's counters are written by its own thread only. ---- */

enum { HEARTH_N_STATUS = 18, HEARTH_N_LAT_BUCKETS = 14 };
extern const int hearth_stats_status_codes[HEARTH_N_STATUS]; /* last entry 0 = "other" */
extern const double hearth_stats_lat_bounds[HEARTH_N_LAT_BUCKETS]; /* seconds; last = +Inf */

typedef struct hearth_slot_stats {
    _Atomic int64_t conns;     /* open connections: the balancer's load */
    _Atomic int alive;         /* 1 while the slot's thread accepts handoffs */
    _Atomic int64_t inflight;  /* requests being handled */
    _Atomic uint64_t accepted; /* connections ever opened on this slot */
    _Atomic uint64_t requests[HEARTH_MAX_ROUTES + 1][HEARTH_N_STATUS]; /* [route or "unmatched"][status] */
    _Atomic uint64_t lat_bucket[HEARTH_N_LAT_BUCKETS];
    _Atomic uint64_t lat_sum_us;
    _Atomic uint64_t lat_count;
    _Atomic uint64_t offloaded;        /* requests whose handler ran on the handler pool (offload.c) */
    _Atomic uint64_t offload_refused;  /* big requests refused (503) because the pool's queue was full */
} hearth_slot_stats;

typedef struct hearth_shared {
    int n_slots;
    hearth_slot_stats slot[];
} hearth_shared;

/* ---- routes ---- */

typedef struct hearth_route {
    char method[16];
    char path[128];          /* as registered: the metrics label */
    size_t prefix_len;       /* a route ending in "/{name}": the length before the '{'; 0 for an exact one */
    hearth_handler handler;
    void *ctx;
    unsigned flags;
    hearth_parse_bytes_fn parse_bytes; /* NULL: every body byte is parsed (hearth_server_route_parse_bytes) */
    hearth_body_sink_fn body_sink;     /* NULL: bodies go to the connection's buffer (hearth_server_route_body_sink) */
} hearth_route;

/* ---- cross-thread reply messages ---- */

/* REPLY_DEFER: a handler on the handler pool deferred its request; the
 * message carries its release callback to the connection (offload.c). */
enum { REPLY_FULL, REPLY_BEGIN, REPLY_CHUNK, REPLY_END, REPLY_DEFER };

typedef struct reply_msg {
    struct reply_msg *next;
    uint32_t id, gen;
    int kind;
    int status;
    char *content_type;  /* points into data[] */
    char *headers;       /* points into data[] */
    size_t body_len;
    char *body;          /* points into data[] */
    hearth_release_cb release; /* REPLY_DEFER */
    void *release_arg;
    char data[];
} reply_msg;

/* ---- connections ---- */

enum conn_state {
    CONN_HEAD,      /* reading a request head (or idle between requests) */
    CONN_BODY,      /* reading a body by Content-Length or chunked */
    CONN_DEFERRED,  /* a handler deferred; waiting for a reply from another thread */
    CONN_STREAMING, /* a deferred reply is streaming (chunked) */
    CONN_CLOSING,   /* flushing a final response, then close */
};

enum timer_mode { TIMER_NONE, TIMER_IDLE, TIMER_HEADER, TIMER_LINGER };

typedef struct hearth_conn {
    struct hearth_io *io;
    int fd;
    uint32_t id, gen;
    uint8_t state;
    uint8_t timer_mode;
    bool keep_alive;
    bool is_head;
    uint8_t events;          /* interest registered with the loop */
    bool read_paused;
    bool lingering;
    bool http10;
    bool stream_close_delimited;
    bool sse;                /* the stream is text/event-stream: it can carry a last error event */
    bool got_body_bytes;     /* for Expect: 100-continue: the client already started the body */
    bool cors;               /* the response carries CORS headers */
    bool sent_continue;
    hearth_buf in;           /* raw bytes: [head][body or undecoded chunks][pipelined...] */
    size_t in_kept;          /* in's capacity counted in io->in_kept (conn.c's conn_keep_in) */
    hearth_buf out;          /* bytes waiting to be written */
    hearth_buf body;         /* decoded chunked body */
    hearth_http_chunked chunk;
    hearth_timer timer;
    size_t head_len;         /* of the current request, once parsed */
    size_t body_len;         /* Content-Length of the current request */
    bool chunked;
    int route;               /* index for metrics; HEARTH_MAX_ROUTES = unmatched */
    int status;              /* of the response, for the log and metrics */
    size_t resp_bytes;
    uint64_t start_ns;
    hearth_release_cb release;
    void *release_arg;
    bool sinking;            /* the body's tail goes to sink.dst (route's body_sink); body_len counts the rest */
    hearth_body_sink sink;
    size_t sink_len, sink_got; /* the tail's bytes, and those received so far */
    char log_line[96];       /* "METHOD /path" for the access log of a deferred request */
    const char *cut_by;      /* why the server itself closed c mid-response (the log says so), or NULL */
} hearth_conn;

/* One I/O thread: its loop, its connections, its reply queue. */
typedef struct hearth_io {
    hearth_server *s;
    int index;                 /* in this process */
    int gslot;                 /* in the shared stats (worker * threads + index) */
    hearth_loop *loop;
    pthread_t tid;
    hearth_conn **conns;       /* by id; NULL slots are free */
    uint32_t conns_cap;
    uint32_t *free_ids;
    uint32_t n_free;
    int open;
    bool draining;
    bool listening;
    hearth_timer drain_timer;
    uint64_t refused;          /* connections dropped at --max-connections since the last warning */
    uint64_t refused_warned_ns;
    hearth_http_date date;
    hearth_http_request scratch; /* parsed head of the request being handled (one at a time per thread) */
    size_t in_kept;            /* input buffers its idle keep-alive connections hold (conn.c's conn_keep_in) */
    pthread_mutex_t q_lock;
    reply_msg *q_head, *q_tail;
} hearth_io;

struct hearth_request {
    hearth_conn *c;          /* on the loop thread; NULL for a handler on the handler pool */
    struct hearth_offload_job *job; /* on the handler pool: the request's own copy (offload.c); else NULL */
    bool is_head;
    const hearth_http_request *http;
    const char *path;
    size_t path_len;
    const char *query;
    size_t query_len;
    const char *body;
    size_t body_len;
    const char *rest;        /* what a "/{name}" route's braces matched; NULL for an exact route */
    size_t rest_len;
    const char *log_line;    /* "METHOD /path", for the handler's log lines */
    bool done;
    const hearth_body_sink *sink; /* where the body's tail went (hearth_request_take_sink), or NULL */
    bool sink_taken;
};

struct hearth_server {
    hearth_server_config cfg;
    char host[256];
    hearth_route routes[HEARTH_MAX_ROUTES];
    int n_routes;
    int listen_fd;
    int port;
    int worker_index;          /* -1: single process */
    int n_slots;               /* total over all processes */
    hearth_shared *shared;
    size_t shared_size;
    int shared_fd;             /* memfd, for --spawn workers */
    int *handoff_fd;           /* [n_slots][2]: [0] read end (owned by the slot), [1] write end */
    hearth_io *io;             /* cfg.threads */
    int cpus[HEARTH_MAX_SLOTS]; /* the CPUs this process may run on, in order (the first HEARTH_MAX_SLOTS) */
    int n_cpus;
    _Atomic int listen_users;  /* I/O threads of this process not yet draining; the last one closes listen_fd */
    _Atomic int n_conns;       /* open connections of this process, all I/O threads (--max-connections) */
    _Atomic int stopping;
    hearth_process_init_cb init_cb;
    void *init_ctx;
    hearth_process_exit_cb exit_cb;
    void *exit_ctx;
    _Atomic int init_failed;
    _Atomic int init_done;
    struct hearth_offload *offload; /* this process's handler pool; NULL with --handler-threads 0 */
};

/* server.c */
void hearth_io_accept_ready(hearth_loop *loop, int fd, unsigned events, void *arg);
void hearth_io_handoff_ready(hearth_loop *loop, int fd, unsigned events, void *arg);
/* Whether I/O threads are pinned, slot i to cpus[i] (cfg.pin_threads, 2+ slots, no more than the CPUs). */
bool hearth_server_pinned(const hearth_server *s);
/* Stops accepting, closes idle connections, lets busy ones finish (loop thread). */
void hearth_io_begin_drain(hearth_io *io);
/* Polls the listener and accepts hand-offs (loop thread); a no-op when draining or already listening. */
void hearth_io_start_accepting(hearth_io *io);

/* conn.c */
/* Stops io's loop when it drains and its last connection has closed. */
void hearth_io_maybe_stop(hearth_io *io);
/* Whether an answer written now is the connection's last: io drains, or a
 * stop was asked for that io's loop has not seen yet (it is busy, or the
 * stop's wake-up is the one now running the reply queue). */
bool hearth_io_stopping(const hearth_io *io);
/* Takes fd (non-blocking) onto io's loop. HEARTH_ELIMIT when this process
 * already holds --max-connections; HEARTH_ENOMEM, HEARTH_EIO. On error fd is
 * still the caller's to close. */
int hearth_conn_open(hearth_io *io, int fd);
void hearth_conn_close(hearth_conn *c);
void hearth_conn_flush(hearth_conn *c);
/* Begins c's drain: closes it when idle; else its answer in flight, or
 * still being written, is its last. */
void hearth_conn_drain(hearth_conn *c);
/* Ends c whose request is still in flight when the drain timeout runs out,
 * then closes it: an SSE stream gets a last error event ({"error":{...}},
 * 503) and, when chunked, the terminating chunk; a deferred request not yet
 * begun gets a 503 JSON error; any other stream is just closed, so that a
 * cut body never looks complete. Writes only what the socket takes now. */
void hearth_conn_cut(hearth_conn *c, const char *why);
/* Runs the state machine over buffered input (after a read or a finished reply). */
void hearth_conn_process(hearth_conn *c);
/* Bookkeeping (metrics, log) once a request's response is queued. */
void hearth_conn_request_done(hearth_conn *c);
/* request_done, then drops the request's bytes and readies c for the next
 * request (CONN_HEAD) or for closing (CONN_CLOSING). */
void hearth_conn_request_complete(hearth_conn *c);
/* Queues a complete response on c (loop thread). */
void hearth_conn_respond(hearth_conn *c, const hearth_response *res);

/* access.c: --api-key and --cors-origin. Returns true when the request may
 * go on to its handler; otherwise it has been answered (401, or 204 for a
 * CORS preflight). route is the matched route or -1. */
bool hearth_access_check(hearth_request *req, int route, bool path_known);
/* The CORS origin for c's response, or NULL. */
const char *hearth_access_cors(const hearth_conn *c);

/* io.c: each I/O thread's reply queue */
/* Applies every message queued for io to its connection (loop thread; the
 * loop's wake-up callback, server.c's, calls it). */
void hearth_io_queue_run(hearth_io *io);
void hearth_io_queue_free(hearth_io *io);
/* Empties io's queue once its loop has stopped and the handler pool with it:
 * the release callback of a REPLY_DEFER still queued is called (cancelled),
 * since its connection will never see it. Call before the models stop. */
void hearth_io_queue_cancel(hearth_io *io);
/* Appends m (malloc'd; the loop frees it) to the queue of loop slot and wakes it (any thread). */
void hearth_io_post_msg(hearth_server *s, int slot, reply_msg *m);

/* offload.c: the handler pool, where handlers of big requests run so that
 * parsing and tokenizing them never stalls a loop. */
/* Starts the pool of cfg.handler_threads threads (none when 0: s->offload stays NULL). */
int hearth_offload_start(hearth_server *s, hearth_err *err);
/* After the loops have stopped: drops queued jobs, waits for running
 * handlers to return, frees the pool. A no-op when none was started. */
void hearth_offload_stop(hearth_server *s);
/* The body bytes route's handler parses for req (what it only copies not
 * counted; hearth_server_route_parse_bytes): the loop work the offload
 * choice weighs. */
size_t hearth_offload_parsed(const hearth_conn *c, const hearth_request *req, int route);
/* Whether the request being dispatched on c should run on the pool: the
 * bytes its handler parses (parsed) are offload_body or more, or would bring
 * those handled on the loop in this pass over c's pipelined input
 * (loop_body) there. */
bool hearth_offload_wanted(const hearth_conn *c, size_t parsed, size_t loop_body);
/* Takes the request being dispatched on c (loop thread) off the loop: its
 * bytes move into a job (c keeps any pipelined bytes after it), c waits
 * deferred, and a pool thread runs the route's handler. Returns HEARTH_OK;
 * HEARTH_ELIMIT when the queue is full or HEARTH_ENOMEM, and then nothing
 * changed: the caller answers 503. */
int hearth_offload_submit(hearth_conn *c, hearth_request *req, int route);
/* hearth_respond and hearth_request_defer for a request on the pool (req->job set). */
void hearth_offload_respond(hearth_request *req, const hearth_response *res);
hearth_reply hearth_offload_defer(hearth_request *req, hearth_release_cb on_release, void *arg);

/* stats.c */
int hearth_shared_create(hearth_server *s, hearth_err *err);
void hearth_shared_destroy(hearth_server *s);
void hearth_stats_request(hearth_server *s, int gslot, int route, int status, uint64_t ns);
int hearth_stats_render(hearth_server *s, hearth_buf *out);

/* The serving part of one process: threads, signals, drain (server.c; called
 * by workers.c's hearth_server_run, directly or in each worker). */
int hearth_serve_process(hearth_server *s);
/* Binds the listener for s->n_slots I/O threads in all, creates the shared
 * statistics and the hand-off sockets (server.c). */
int hearth_server_listen(hearth_server *s, hearth_err *err);

#endif
