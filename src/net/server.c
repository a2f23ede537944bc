/* server.c: the server's life cycle in one process: binding, I/O threads,
 * the handler pool, accepting and balancing connections, and draining on
 * shutdown.
 *
 * Threads of a serving process: cfg.threads I/O threads, each with its own
 * loop, where connections are read, parsed, routed, and where a handler runs
 * when its request's body is small; and cfg.handler_threads handler threads
 * (offload.c), where a handler runs when the body bytes it parses are
 * offload_body or more (every byte, unless the route says fewer:
 * hearth_server_route_parse_bytes; a binary tensor frame parses only its
 * JSON header), so that parsing and tokenizing a big body (seconds for 10 MB) never
 * stalls the loop's other connections (before it did: /health waited 2.7-8 s
 * behind one 10 MB prompt). offload_body is 16 KiB: on stories260K's
 * tokenizer 16 KiB of prompt costs the loop 2-3 ms, 64 KiB 9-21 ms, 1 MiB
 * 280-340 ms (/tokenize and /completion, measured on a loaded 2-core
 * machine), while the hop to the pool costs two cross-thread wakes, which
 * the small requests that make up the throughput (one sentence to embed, a
 * short prompt) are spared. Pipelined bodies under the limit are held to one
 * limit's worth of loop work per pass (offload.c). Each worker process
 * starts its own pool after fork.
 *
 * One listening socket, bound once (by the supervisor when there are
 * workers), so a second hearth on the same port fails with "address already
 * in use" instead of silently sharing it. Every I/O thread of every worker
 * polls it. Balance is deliberate: whichever loop wins an accept compares its
 * open connections with every other slot's (shared memory) and, when another
 * slot has fewer, passes the socket there over a Unix datagram socket with
 * SCM_RIGHTS. Rejected: SO_REUSEPORT alone (the kernel's 4-tuple hash leaves
 * 32 connections split 20/12 about one time in five, and it lets a second
 * server join the port), and a single acceptor thread (one more hop for
 * every connection, and a single point of failure across workers).
 *
 * Draining (SIGTERM, SIGINT) stops accepting at once: each I/O thread stops
 * polling the listener and the last one of the process closes its
 * descriptor, as the supervisor closes its own, so once every process has
 * let go the kernel refuses new connects (a balancer retries elsewhere at
 * once) instead of queueing them unanswered until the process exits. Not
 * shutdown(2) on the socket: it is shared with sibling workers, and one
 * worker stopped on its own (to be respawned) must not stop the others.
 * Models still loading when the drain begins get as long as the drain; a
 * loader that blocks longer (a path that is a FIFO, a hung network mount)
 * cannot be interrupted safely, so the process then exits without waiting
 * for it (serve_process, below).
 *
 * Calls: conn.c (open, drain, cut, close), io.c (the reply queue, run from
 * this file's loop wake-up), offload.c (start, stop), stats.c, loop.c.
 * Called by workers.c, where hearth_server_run chooses the process model and
 * calls hearth_server_listen and hearth_serve_process here; nothing here
 * calls workers.c, conn.c never calls back (hearth_io_maybe_stop is conn.c's)
 * and io.c never calls back (the drain and accept checks of a wake-up are
 * here, in io_wake). */
#include "server_int.h"

#include "base/clock.h"
#include "base/log.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void find_cpus(hearth_server *s);

void hearth_server_config_default(hearth_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->host = "127.0.0.1";
    cfg->port = 8080;
    cfg->threads = 1;
    cfg->workers = 0;
    cfg->poller = HEARTH_POLLER_AUTO;
    hearth_http_limits_default(&cfg->limits);
    cfg->max_body = (size_t)16 << 20;
    cfg->handler_threads = 2;
    cfg->offload_body = (size_t)16 << 10;
    cfg->header_timeout_ms = 10000;
    cfg->idle_timeout_ms = 60000;
    cfg->drain_timeout_ms = 10000;
    cfg->max_connections = 65536;
    cfg->backlog = 4096;
    cfg->pin_threads = true;
}

hearth_server *hearth_server_new(const hearth_server_config *cfg, hearth_err *err)
{
    if (cfg->threads < 1 || cfg->threads > 64) {
        hearth_err_set(err, HEARTH_EINVAL, "--io-threads %d is out of range (1..64)", cfg->threads);
        return NULL;
    }
    if (cfg->workers < 0 || cfg->workers > 64 || (cfg->workers ? cfg->workers : 1) * cfg->threads > HEARTH_MAX_SLOTS) {
        hearth_err_set(err, HEARTH_EINVAL, "--workers %d is out of range (0..64, workers x io-threads <= %d)", cfg->workers,
                       HEARTH_MAX_SLOTS);
        return NULL;
    }
    if (cfg->handler_threads < 0 || cfg->handler_threads > 256) {
        hearth_err_set(err, HEARTH_EINVAL, "--handler-threads %d is out of range (0..256)", cfg->handler_threads);
        return NULL;
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        hearth_err_set(err, HEARTH_EINVAL, "--port %d is out of range (0..65535)", cfg->port);
        return NULL;
    }
    hearth_server *s = calloc(1, sizeof *s);
    if (!s) {
        hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    snprintf(s->host, sizeof s->host, "%s", cfg->host ? cfg->host : "127.0.0.1");
    s->cfg.host = s->host;
    if (cfg->api_key && !*cfg->api_key)
        s->cfg.api_key = NULL;
    if (cfg->cors_origin && !*cfg->cors_origin)
        s->cfg.cors_origin = NULL;
    if (s->cfg.limits.max_headers > HEARTH_HTTP_MAX_HEADERS_CAP)
        s->cfg.limits.max_headers = HEARTH_HTTP_MAX_HEADERS_CAP;
    s->listen_fd = -1;
    s->shared_fd = -1;
    s->worker_index = -1;
    find_cpus(s);
    s->port = cfg->port;
    return s;
}

void hearth_server_free(hearth_server *s)
{
    if (!s)
        return;
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->handoff_fd) {
        for (int i = 0; i < 2 * s->n_slots; i++)
            if (s->handoff_fd[i] >= 0)
                close(s->handoff_fd[i]);
        free(s->handoff_fd);
    }
    hearth_shared_destroy(s);
    free(s);
}

int hearth_server_route(hearth_server *s, const char *method, const char *path, hearth_handler h, void *ctx)
{
    return hearth_server_route_flags(s, method, path, h, ctx, 0);
}

int hearth_server_route_flags(hearth_server *s, const char *method, const char *path, hearth_handler h, void *ctx,
                              unsigned flags)
{
    if (s->n_routes >= HEARTH_MAX_ROUTES)
        return HEARTH_ELIMIT;
    if (strlen(method) >= sizeof s->routes[0].method || strlen(path) >= sizeof s->routes[0].path)
        return HEARTH_EINVAL;
    hearth_route *r = &s->routes[s->n_routes++];
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", path);
    const char *brace = strrchr(path, '{');
    bool tail = brace && brace > path && brace[-1] == '/' && strchr(brace, '}') == path + strlen(path) - 1;
    r->prefix_len = tail ? (size_t)(brace - path) : 0;
    r->handler = h;
    r->ctx = ctx;
    r->flags = flags;
    return HEARTH_OK;
}

/* The route registered as method and path, or NULL. */
static hearth_route *registered(hearth_server *s, const char *method, const char *path)
{
    for (int i = 0; i < s->n_routes; i++)
        if (strcmp(s->routes[i].method, method) == 0 && strcmp(s->routes[i].path, path) == 0)
            return &s->routes[i];
    return NULL;
}

int hearth_server_route_parse_bytes(hearth_server *s, const char *method, const char *path, hearth_parse_bytes_fn fn)
{
    hearth_route *r = registered(s, method, path);
    if (!r)
        return HEARTH_ENOTFOUND;
    r->parse_bytes = fn;
    return HEARTH_OK;
}

int hearth_server_route_body_sink(hearth_server *s, const char *method, const char *path, hearth_body_sink_fn fn)
{
    hearth_route *r = registered(s, method, path);
    if (!r)
        return HEARTH_ENOTFOUND;
    r->body_sink = fn;
    return HEARTH_OK;
}

void hearth_server_on_process_init(hearth_server *s, hearth_process_init_cb cb, void *ctx)
{
    s->init_cb = cb;
    s->init_ctx = ctx;
}

void hearth_server_on_process_exit(hearth_server *s, hearth_process_exit_cb cb, void *ctx)
{
    s->exit_cb = cb;
    s->exit_ctx = ctx;
}

int hearth_server_port(const hearth_server *s) { return s->port; }
int hearth_server_worker_index(const hearth_server *s) { return s->worker_index; }
const hearth_server_config *hearth_server_get_config(const hearth_server *s) { return &s->cfg; }

void hearth_server_shutdown(hearth_server *s)
{
    (void)s;
    kill(getpid(), SIGTERM); /* the process's main thread waits for it in sigwait */
}

/* ---- binding ---- */

static int bind_listener(hearth_server *s, hearth_err *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->host, port, &hints, &res);
    if (gai != 0)
        return hearth_err_set(err, HEARTH_EINVAL, "cannot resolve --host '%s': %s", s->host, gai_strerror(gai));
    int last_errno = 0;
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (s->cfg.reuse_port)
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, s->cfg.backlog) == 0)
            break;
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (last_errno == EADDRINUSE)
            return hearth_err_set(err, HEARTH_EIO,
                                  "cannot listen on %s:%d: address already in use (is another server running there? "
                                  "pick another --port, or pass --reuse-port to share it)",
                                  s->host, s->cfg.port);
        return hearth_err_sys(err, last_errno, "cannot listen on %s:%d", s->host, s->cfg.port);
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    return HEARTH_OK;
}

static int make_handoffs(hearth_server *s, hearth_err *err)
{
    s->handoff_fd = malloc(2 * (size_t)s->n_slots * sizeof *s->handoff_fd);
    if (!s->handoff_fd)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    for (int i = 0; i < 2 * s->n_slots; i++)
        s->handoff_fd[i] = -1;
    for (int i = 0; i < s->n_slots; i++)
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, &s->handoff_fd[2 * i]) != 0)
            return hearth_err_sys(err, errno, "socketpair for connection hand-off");
    return HEARTH_OK;
}

int hearth_server_listen(hearth_server *s, hearth_err *err)
{
    int rc = bind_listener(s, err);
    if (rc == 0)
        rc = hearth_shared_create(s, err);
    if (rc == 0)
        rc = make_handoffs(s, err);
    return rc;
}

/* ---- accepting and balancing ---- */

static int send_fd(int via, int fd)
{
    char byte = 'c';
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    ssize_t n;
    do
        n = sendmsg(via, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

/* The alive slot with the fewest open connections; ties keep the connection here. */
static int least_loaded(hearth_io *io)
{
    hearth_shared *sh = io->s->shared;
    int best = io->gslot;
    int64_t best_n = atomic_load(&sh->slot[best].conns);
    for (int i = 0; i < sh->n_slots; i++) {
        if (i == io->gslot || !atomic_load(&sh->slot[i].alive))
            continue;
        int64_t n = atomic_load(&sh->slot[i].conns);
        if (n < best_n) {
            best = i;
            best_n = n;
        }
    }
    return best;
}

static void adopt_conn(hearth_io *io, int fd, bool counted)
{
    hearth_slot_stats *st = &io->s->shared->slot[io->gslot];
    if (!counted)
        atomic_fetch_add(&st->conns, 1);
    atomic_fetch_add(&st->accepted, 1);
    int rc = io->draining ? HEARTH_ELIMIT : hearth_conn_open(io, fd);
    if (rc == 0)
        return;
    atomic_fetch_sub(&st->conns, 1);
    close(fd); /* at once: a client past the limit learns now, not after a timeout */
    if (rc == HEARTH_ELIMIT && !io->draining) {
        /* a flood must not flood the log too: one line a second at most */
        io->refused++;
        uint64_t now = hearth_now_ns();
        if (now - io->refused_warned_ns >= 1000000000ull) {
            HLOG_WARN("dropped %llu connection%s: --max-connections %d reached in this process",
                      (unsigned long long)io->refused, io->refused > 1 ? "s" : "", io->s->cfg.max_connections);
            io->refused = 0;
            io->refused_warned_ns = now;
        }
    } else if (rc != HEARTH_ELIMIT) {
        HLOG_WARN("dropping a connection: %s", rc == HEARTH_ENOMEM ? "out of memory" : "cannot poll it");
    }
}

/* ---- CPU placement ----
 * With wrk on the same 2 cores as the server, `wrk -t2 -c64 /health` went
 * from good runs (p99 1-2 ms) to bad ones (5-7 ms, -20% req/s) and back as
 * the scheduler placed the four threads; in the bad runs both I/O threads
 * waited ~45% of the time for a CPU (/proc/PID/task/TID/schedstat), which
 * fits every wrk thread talking to both I/O threads (the accept balancing
 * splits each client thread's connections between them), so no thread
 * pairs up with one peer on one core. So: each I/O thread runs on its own
 * CPU, and a new connection goes to the thread on the CPU its packets
 * arrive on (SO_INCOMING_CPU: for loopback the sender's CPU, for a NIC its
 * receive queue's), unless that thread already has PIN_SLACK more
 * connections than the least loaded (a burst from one client thread still
 * splits: 32 connections at most 17 / 15). Measured, the same binary with
 * and without, interleaved blocks of 3 x `wrk -t2 -c64 -d3s`: with a slack
 * of 4, p99 under 2.5 ms in 18 of 27 runs against 8 of 27 and in 15 of 24
 * against 5 of 24, best 0.5 ms / 109k req/s against 0.85 ms / 98k; with 2
 * (kept: the 60% bound on a burst with room), in the machine's worst
 * state, median p99 ~4.5 against ~7 ms (bench/RESULTS.md). With more I/O
 * threads than CPUs, or one, nothing is pinned. */
#define PIN_SLACK 2

bool hearth_server_pinned(const hearth_server *s)
{
    return s->cfg.pin_threads && s->n_slots > 1 && s->n_slots <= s->n_cpus;
}

static void find_cpus(hearth_server *s)
{
    cpu_set_t set;
    s->n_cpus = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && s->n_cpus < HEARTH_MAX_SLOTS; c++)
        if (CPU_ISSET(c, &set))
            s->cpus[s->n_cpus++] = c;
}

/* The slot of this process whose thread runs on the CPU that received fd's
 * packets, or -1. Only this process's: a worker killed a moment ago still
 * looks alive until the supervisor reaps it, and a connection handed to it
 * would wait for its replacement. */
static int slot_near(const hearth_server *s, int fd)
{
    int cpu = -1;
    socklen_t len = sizeof cpu;
    if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0 || cpu < 0)
        return -1;
    int first = s->worker_index >= 0 ? s->worker_index * s->cfg.threads : 0;
    for (int i = first; i < first + s->cfg.threads; i++)
        if (s->cpus[i] == cpu)
            return i;
    return -1;
}

static void place_conn(hearth_io *io, int fd)
{
    int one = 1;
    /* without it, a response written in two segments waits ~40 ms for the peer's delayed ACK */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    hearth_server *s = io->s;
    int target = s->n_slots > 1 ? least_loaded(io) : io->gslot;
    int near = hearth_server_pinned(s) ? slot_near(s, fd) : -1;
    if (near >= 0 && near != target && atomic_load(&s->shared->slot[near].alive) &&
        atomic_load(&s->shared->slot[near].conns) <= atomic_load(&s->shared->slot[target].conns) + PIN_SLACK)
        target = near;
    if (target != io->gslot) {
        atomic_fetch_add(&s->shared->slot[target].conns, 1); /* count it now so the next accept sees it */
        if (send_fd(s->handoff_fd[2 * target + 1], fd) == 0) {
            close(fd);
            return;
        }
        atomic_fetch_sub(&s->shared->slot[target].conns, 1);
    }
    adopt_conn(io, fd, false);
}

static void resume_accept(hearth_loop *loop, void *arg) { hearth_io_start_accepting(arg); }

void hearth_io_accept_ready(hearth_loop *loop, int lfd, unsigned events, void *arg)
{
    hearth_io *io = arg;
    for (int i = 0; i < 64 && !io->draining; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            place_conn(io, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* out of descriptors: stop polling the listener for a moment instead of spinning on it */
            HLOG_WARN("accept: %s; pausing accepts for 100 ms", strerror(errno));
            hearth_loop_del_fd(loop, lfd);
            io->listening = false;
            hearth_loop_timer_start(loop, &io->drain_timer, 100);
        }
        break;
    }
}

/* Adopts up to max connections handed to io's thread (a draining thread's
 * adopt_conn closes them at once). */
static void take_handoffs(hearth_io *io, int max)
{
    int hfd = io->s->handoff_fd[2 * io->gslot];
    for (int i = 0; i < max; i++) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        ssize_t n = recvmsg(hfd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        if (!cm || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        adopt_conn(io, fd, true);
    }
}

void hearth_io_handoff_ready(hearth_loop *loop, int hfd, unsigned events, void *arg)
{
    take_handoffs(arg, 64); /* a burst at a time: the loop's other events go between */
}

/* ---- draining ---- */

static void drain_timeout(hearth_loop *loop, void *arg)
{
    hearth_io *io = arg;
    if (!io->draining) { /* the same timer resumes accepts after EMFILE */
        resume_accept(loop, io);
        return;
    }
    if (io->open > 0)
        HLOG_WARN("drain timeout: closing %d connections with requests still in flight", io->open);
    for (uint32_t i = 0; i < io->conns_cap; i++) {
        hearth_conn *c = io->conns[i];
        if (c && (c->state == CONN_DEFERRED || c->state == CONN_STREAMING))
            hearth_conn_cut(c, "drain timeout");
        else if (c)
            hearth_conn_close(c);
    }
    hearth_loop_stop(loop);
}

/* Closes the connections handed to this thread that it has not taken yet. */
static void close_pending_handoffs(hearth_io *io)
{
    take_handoffs(io, INT_MAX);
}

void hearth_io_begin_drain(hearth_io *io)
{
    if (io->draining)
        return;
    io->draining = true;
    hearth_server *s = io->s;
    atomic_store(&s->shared->slot[io->gslot].alive, 0);
    if (io->listening) {
        hearth_loop_del_fd(io->loop, s->listen_fd);
        io->listening = false;
    }
    /* The last thread of this process to let go closes the listener (no
     * thread polls it any more, so the descriptor cannot be reused under a
     * poller); a connect then fails fast once every process has done so. */
    if (atomic_fetch_sub(&s->listen_users, 1) == 1 && s->listen_fd >= 0) {
        close(s->listen_fd);
        s->listen_fd = -1;
        for (int i = 0; i < s->cfg.threads; i++) /* idle drained siblings may stop now (hearth_io_maybe_stop) */
            if (&s->io[i] != io && s->io[i].loop)
                hearth_loop_wake(s->io[i].loop);
    }
    close_pending_handoffs(io);
    hearth_loop_timer_start(io->loop, &io->drain_timer, io->s->cfg.drain_timeout_ms);
    for (uint32_t i = 0; i < io->conns_cap; i++)
        if (io->conns[i])
            hearth_conn_drain(io->conns[i]);
    hearth_io_maybe_stop(io);
}

/* ---- threads of one serving process ---- */

/* The loop's wake-up: replies queued from other threads first, then the
 * process-wide state (a stop asked for, models loaded) that wakes every loop.
 * A reply that meets the stop in one wake-up is applied before the drain
 * begins, and still says Connection: close (hearth_io_stopping). */
static void io_wake(hearth_loop *loop, void *arg)
{
    hearth_io *io = arg;
    hearth_io_queue_run(io);
    if (atomic_load(&io->s->stopping) && !io->draining)
        hearth_io_begin_drain(io);
    else if (io->draining) /* the listener's closer wakes its siblings: an idle one may stop now */
        hearth_io_maybe_stop(io);
    else if (atomic_load(&io->s->init_done) && !io->listening)
        hearth_io_start_accepting(io);
}

static void *io_main(void *arg)
{
    hearth_io *io = arg;
    char tag[24];
    if (io->s->worker_index >= 0)
        snprintf(tag, sizeof tag, "w%d.t%d", io->s->worker_index, io->index);
    else
        snprintf(tag, sizeof tag, "t%d", io->index);
    if (hearth_server_pinned(io->s)) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(io->s->cpus[io->gslot], &set);
        int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (e != 0)
            HLOG_WARN("I/O thread %s: cannot pin to CPU %d: %s", tag, io->s->cpus[io->gslot], strerror(e));
    }
    int rc = hearth_loop_run(io->loop);
    if (rc != 0)
        HLOG_ERROR("I/O thread %s: event loop failed (%d)", tag, rc);
    /* a drained loop stops only once no thread of this process accepts
     * (hearth_io_maybe_stop), so every hand-off to it has arrived: close them */
    close_pending_handoffs(io);
    return NULL;
}

/* Closes what connections are left (their release callbacks cancel work). */
static void io_close_conns(hearth_io *io)
{
    if (io->conns)
        for (uint32_t i = 0; i < io->conns_cap; i++)
            if (io->conns[i])
                hearth_conn_close(io->conns[i]);
}

static void io_deinit(hearth_io *io)
{
    io_close_conns(io);
    hearth_io_queue_free(io);
    free(io->conns);
    free(io->free_ids);
    hearth_loop_free(io->loop);
    pthread_mutex_destroy(&io->q_lock);
}

static int io_init(hearth_server *s, hearth_io *io, int index, hearth_err *err)
{
    memset(io, 0, sizeof *io);
    io->s = s;
    io->index = index;
    io->gslot = (s->worker_index >= 0 ? s->worker_index : 0) * s->cfg.threads + index;
    pthread_mutex_init(&io->q_lock, NULL);
    hearth_timer_init(&io->drain_timer, drain_timeout, io);
    io->loop = hearth_loop_new(s->cfg.poller, err);
    if (!io->loop)
        return err ? err->code : HEARTH_EIO;
    hearth_loop_set_wake_cb(io->loop, io_wake, io);
    if (hearth_loop_add_fd(io->loop, s->handoff_fd[2 * io->gslot], HEARTH_EV_READ, hearth_io_handoff_ready, io) != 0)
        return hearth_err_set(err, HEARTH_EIO, "cannot poll the hand-off socket");
    hearth_slot_stats *st = &s->shared->slot[io->gslot];
    atomic_store(&st->conns, 0);
    atomic_store(&st->inflight, 0);
    /* A single process takes connections at once and answers 503 while its
     * models load. A worker waits until its models are loaded: its siblings
     * serve meanwhile, so a respawned worker never answers 503. */
    if (s->worker_index < 0 || !s->init_cb)
        hearth_io_start_accepting(io);
    return HEARTH_OK;
}

void hearth_io_start_accepting(hearth_io *io)
{
    if (io->draining || io->listening)
        return;
    if (hearth_loop_add_fd(io->loop, io->s->listen_fd, HEARTH_EV_READ, hearth_io_accept_ready, io) != 0) {
        HLOG_ERROR("cannot poll the listening socket");
        return;
    }
    io->listening = true;
    atomic_store(&io->s->shared->slot[io->gslot].alive, 1);
}

static void *init_main(void *arg)
{
    hearth_server *s = arg;
    if (s->init_cb(s, s->init_ctx) != 0) {
        atomic_store(&s->init_failed, 1);
        kill(getpid(), SIGTERM); /* the main thread's sigwait takes it and stops the process */
        return NULL;
    }
    atomic_store(&s->init_done, 1);
    for (int i = 0; i < s->cfg.threads; i++)
        hearth_loop_wake(s->io[i].loop); /* each loop starts accepting on its own thread */
    return NULL;
}

/* Waits for the model-loading thread for at most the drain timeout; false when
 * it is still running then. */
static bool join_init(hearth_server *s, pthread_t t)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np's clock */
    uint64_t ms = s->cfg.drain_timeout_ms;
    deadline.tv_sec += (time_t)(ms / 1000);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc;
    do
        rc = pthread_timedjoin_np(t, NULL, &deadline);
    while (rc == EINTR);
    return rc == 0;
}

int hearth_serve_process(hearth_server *s)
{
    hearth_err err = {0};
    int status = 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* blocked here, so every I/O thread inherits the mask and only sigwait below sees them */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int n = s->cfg.threads;
    s->io = calloc((size_t)n, sizeof *s->io);
    if (!s->io)
        return 1;
    atomic_store(&s->listen_users, n);
    int started = 0;
    /* before the loops, which hand it big requests from their first accept */
    if (hearth_offload_start(s, &err) != 0) {
        HLOG_ERROR("%s", err.msg);
        status = 1;
        goto stop;
    }
    for (int i = 0; i < n; i++) {
        if (io_init(s, &s->io[i], i, &err) != 0) {
            HLOG_ERROR("I/O thread %d: %s", i, err.msg);
            io_deinit(&s->io[i]);
            status = 1;
            goto stop;
        }
        if (pthread_create(&s->io[i].tid, NULL, io_main, &s->io[i]) != 0) {
            HLOG_ERROR("cannot start I/O thread %d", i);
            io_deinit(&s->io[i]);
            status = 1;
            goto stop;
        }
        started++;
    }
    pthread_t init_thread;
    bool init_started = s->init_cb && pthread_create(&init_thread, NULL, init_main, s) == 0;
    if (s->init_cb && !init_started) {
        HLOG_ERROR("cannot start the model-loading thread");
        atomic_store(&s->init_failed, 1);
        goto stop;
    }
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) == 0 && (sig == SIGTERM || sig == SIGINT))
            break;
    }
    if (!atomic_load(&s->init_failed))
        HLOG_INFO("shutting down: draining in-flight requests (at most %llu ms)", (unsigned long long)s->cfg.drain_timeout_ms);
    /* the loops drain (and stop accepting) now, while a load may still be running */
    atomic_store(&s->stopping, 1);
    for (int i = 0; i < started; i++)
        hearth_loop_wake(s->io[i].loop);
    if (init_started && !join_init(s, init_thread)) {
        for (int i = 0; i < started; i++)
            pthread_join(s->io[i].tid, NULL);
        /* The loader is stuck in a call that cannot be interrupted safely (a
         * blocking open of a FIFO, a hung mount): it still uses the server and
         * the api, so nothing may be freed under it, and returning would run
         * exit handlers (and LeakSanitizer) beside it. The stop was asked
         * for and every connection is closed: end the process here. */
        HLOG_ERROR("models are still loading after the drain timeout (%llu ms); stopping without waiting for them",
                   (unsigned long long)s->cfg.drain_timeout_ms);
        _exit(1);
    }
stop:
    atomic_store(&s->stopping, 1);
    for (int i = 0; i < started; i++)
        hearth_loop_wake(s->io[i].loop);
    for (int i = 0; i < started; i++)
        pthread_join(s->io[i].tid, NULL);
    /* The order matters: the handler pool stops first (a handler still
     * running when the drain timed out uses the models; it only computes, so
     * it returns soon) and the release callbacks its handlers left queued run;
     * then connections close, while the models are alive (their release
     * callbacks cancel jobs and poke schedulers); then the models stop, while
     * the loops' queues still exist (a scheduler that finishes requests on the
     * way out posts replies there); then the loops and queues go. */
    hearth_offload_stop(s);
    for (int i = 0; i < started; i++)
        hearth_io_queue_cancel(&s->io[i]);
    for (int i = 0; i < started; i++)
        io_close_conns(&s->io[i]);
    if (s->exit_cb)
        s->exit_cb(s, s->exit_ctx);
    for (int i = 0; i < started; i++)
        io_deinit(&s->io[i]);
    free(s->io);
    s->io = NULL;
    return atomic_load(&s->init_failed) ? HEARTH_EXIT_CONFIG : status;
}
