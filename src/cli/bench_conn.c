/* bench_conn.c: one `hearth bench` thread: its client connections, driven by
 * the project's event loop (net/loop.h), and its share of the load schedule.
 *
 * How: each connection is a small state machine (connecting, sending,
 * reading, idle, backing off) with keep-alive and one request at a time (no
 * pipelining). Closed loop: a connection sends its next request as soon as
 * the last answer is whole. Open loop: a timer releases requests at their
 * scheduled times (fixed spacing or Poisson) into a queue that idle
 * connections take from; a request's latency is measured from its scheduled
 * time, not from when a connection got round to sending it, so a stalled
 * server shows in the tail instead of silently slowing the schedule (the
 * coordinated omission that wrk2 corrects). The loop's timers have 1 ms
 * resolution, and a send up to 1 ms late would be part of every open-loop
 * figure, so on Linux the releases come from a timerfd instead (tick_fd_open).
 * --api infer adds two things here: a 2xx answer must be an inference
 * response (bench_infer_answer_ok) and a 504 is a late frame; with
 * --sequence-id the one connection sends the sequence's first and last
 * frames as their own request variants (bench_infer_pick).
 * Rejected: one schedule per connection as wrk2 keeps (a connection stuck on
 * a slow answer holds its own schedule's next requests back while other
 * connections sit idle); blocking sockets with a thread per connection
 * (threads, not the server, would then set the pace at high concurrency). */
#include "bench.h"

#include "base/clock.h"
#include "net/loop.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/timerfd.h>
#endif

#define BACKOFF_MS 10          /* after a failed connect, before the next try */
#define AHEAD_MS 2000          /* open_ahead's bound on the handshakes */
#define READ_CHUNK (64 * 1024)
#define QUEUE_MAX (1u << 20)   /* open loop: requests waiting for a connection */

enum cstate { C_CLOSED, C_CONNECTING, C_IDLE, C_SENDING, C_READING, C_BACKOFF };

typedef struct bthread bthread;

typedef struct bconn {
    bthread *t;
    int fd;
    enum cstate state;
    unsigned interest;         /* HEARTH_EV_* registered, so unchanged interest costs no syscall */
    bool busy;                 /* a request is in flight (from begin to finish) */
    bool counted;              /* it falls in the counted window */
    bool bad_json;
    bool stream_error;         /* an SSE event said {"error": ...} */
    const char *req;
    size_t req_len, req_off;
    uint64_t t_sched, t_first, t_prev, n_tok, usage_tok;
    int64_t usage_prompt;      /* the answer's usage.prompt_tokens, 0 until seen */
    hearth_buf in;
    bench_resp resp;
    hearth_timer timer;        /* the request's timeout, or the connect back-off */
} bconn;

struct bthread {
    bench_thread_arg *a;
    const bench_cfg *cfg;
    hearth_loop *loop;
    bconn *conns;
    int n_conns;
    bench_stats *st;
    uint64_t *queue;           /* open loop: scheduled times waiting, a ring */
    size_t q_head, q_len;
    uint64_t next_sched;
    int64_t issued, finished;  /* counted requests begun and ended */
    size_t req_next;
    bool seq_begun;            /* --sequence-id: the start frame has been sent */
    uint64_t rng;
    hearth_timer tick, end;
    int tick_fd;               /* a timerfd for the open loop's releases, or -1: the loop's 1 ms timer */
};

static void conn_io(hearth_loop *loop, int fd, unsigned events, void *arg);
static void conn_next(bconn *c);

static uint64_t now_ns(void) { return hearth_now_ns(); }

/* An idle keep-alive connection stays registered for reading, so a server
 * that closes it is noticed, and the next request needs no epoll_ctl. */
static void set_interest(bconn *c, unsigned ev)
{
    if (c->interest != ev) {
        hearth_loop_mod_fd(c->t->loop, c->fd, ev);
        c->interest = ev;
    }
}

/* A uniform double in (0, 1] from xorshift64*: Poisson gaps need -log(u). */
static double rand_unit(bthread *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return (double)((t->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 + 1e-17;
}

static uint64_t gap_ns(bthread *t)
{
    double mean = 1e9 / t->a->rate;
    return (uint64_t)(t->cfg->poisson ? -log(rand_unit(t)) * mean : mean);
}

static bool want_more(bthread *t, uint64_t at)
{
    if (t->a->n)
        return t->issued < t->a->n;
    return at < t->a->end_ns;
}

static void conn_close(bconn *c)
{
    if (c->fd >= 0) {
        hearth_loop_del_fd(c->t->loop, c->fd);
        close(c->fd);
        c->fd = -1;
    }
    c->state = C_CLOSED;
    c->in.len = 0;
}

/* A counted request ended; ok: with a counted answer. */
static void count_end(bthread *t, bool ok, uint64_t now)
{
    t->finished++;
    t->st->t_last_ns = now;
    atomic_fetch_add_explicit(ok ? &t->a->done_ok : &t->a->done_err, 1, memory_order_relaxed);
}

static void maybe_stop(bthread *t)
{
    if (t->a->n && t->finished >= t->a->n)
        hearth_loop_stop(t->loop);
}

/* The request on c ended without a counted answer. */
static void conn_fail(bconn *c, enum bench_err_kind kind, int status)
{
    bthread *t = c->t;
    if (c->busy && c->counted) {
        bench_stats_error(t->st, kind, status);
        count_end(t, false, now_ns());
    }
    c->busy = false;
    hearth_loop_timer_stop(t->loop, &c->timer);
    conn_close(c);
}

static void on_timer(hearth_loop *loop, void *arg)
{
    bconn *c = arg;
    if (c->state == C_BACKOFF) {
        c->state = C_CLOSED;
        conn_next(c);
        return;
    }
    conn_fail(c, BENCH_ERR_TIMEOUT, 0);
    conn_next(c);
    maybe_stop(c->t);
}

static int conn_connect(bconn *c)
{
    const bench_cfg *cfg = c->t->cfg;
    int fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc;
    do
        rc = connect(fd, (const struct sockaddr *)&cfg->addr, cfg->addr_len);
    while (rc < 0 && errno == EINTR);
    if ((rc < 0 && errno != EINPROGRESS) || hearth_loop_add_fd(c->t->loop, fd, HEARTH_EV_WRITE, conn_io, c)) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->interest = HEARTH_EV_WRITE;
    c->state = C_CONNECTING;
    return 0;
}

/* A failed connect: the request (if any) fails, and the connection waits a
 * little before trying again, so an unreachable server is not hammered in
 * a tight loop. */
static void connect_failed(bconn *c)
{
    conn_fail(c, BENCH_ERR_CONNECT, 0);
    c->state = C_BACKOFF;
    hearth_loop_timer_start(c->t->loop, &c->timer, BACKOFF_MS);
    maybe_stop(c->t);
}

static void conn_send(bconn *c)
{
    while (c->req_off < c->req_len) {
        ssize_t n = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            c->state = C_SENDING;
            set_interest(c, HEARTH_EV_WRITE | HEARTH_EV_READ);
            return;
        }
        if (n <= 0) {
            conn_fail(c, BENCH_ERR_CLOSED, 0);
            conn_next(c);
            maybe_stop(c->t);
            return;
        }
        c->req_off += (size_t)n;
    }
    c->state = C_READING;
    set_interest(c, HEARTH_EV_READ);
}

/* Starts a request scheduled at sched on c (idle or closed). */
static void conn_begin(bconn *c, uint64_t sched)
{
    bthread *t = c->t;
    const bench_cfg *cfg = t->cfg;
    c->t_sched = sched;
    c->counted = sched >= t->a->count_from_ns;
    if (c->counted) {
        if (t->a->rate <= 0)
            t->issued++; /* open loop counts at release (on_tick) */
        if (!t->st->t_first_ns || sched < t->st->t_first_ns)
            t->st->t_first_ns = sched;
    }
    size_t i = t->req_next++ % cfg->n_reqs;
    if (cfg->sequence) {
        /* one connection, closed loop, --n (bench.c refuses otherwise) */
        i = bench_infer_pick(!t->seq_begun, c->counted && t->issued == t->a->n);
        t->seq_begun = true;
    }
    c->req = cfg->reqs[i];
    c->req_len = cfg->req_lens[i];
    c->req_off = 0;
    c->busy = true;
    c->bad_json = c->stream_error = false;
    c->t_first = c->t_prev = c->n_tok = c->usage_tok = 0;
    c->usage_prompt = 0;
    bench_resp_reset(&c->resp);
    c->in.len = 0;
    hearth_loop_timer_start(t->loop, &c->timer, (uint64_t)cfg->timeout_ms);
    if (c->state == C_IDLE) {
        conn_send(c);
    } else if (conn_connect(c)) {
        connect_failed(c);
    }
}

/* c is free: closed loop sends the next request at once; open loop takes the
 * oldest scheduled one, if any. */
static void conn_next(bconn *c)
{
    bthread *t = c->t;
    if (c->state == C_BACKOFF || c->busy)
        return;
    if (t->a->rate > 0) {
        if (t->q_len) {
            uint64_t sched = t->queue[t->q_head];
            t->q_head = (t->q_head + 1) % QUEUE_MAX;
            t->q_len--;
            conn_begin(c, sched);
        } else if (c->state == C_CLOSED && conn_connect(c) == 0) {
            /* connect ahead, so the next scheduled request finds it open */
        }
        return;
    }
    uint64_t now = now_ns();
    if (want_more(t, now))
        conn_begin(c, now);
}

/* One SSE event of a streamed answer: a token when it carries text. */
static void on_event(bconn *c, const char *data, size_t len, uint64_t now)
{
    if (len == 6 && !memcmp(data, "[DONE]", 6))
        return;
    bench_answer a;
    if (bench_answer_parse(data, len, &a)) {
        c->bad_json = true;
        return;
    }
    if (a.error)
        c->stream_error = true; /* the server gave up after its 200 */
    if (a.completion_tokens > 0)
        c->usage_tok = (uint64_t)a.completion_tokens;
    if (a.prompt_tokens > 0)
        c->usage_prompt = a.prompt_tokens;
    if (a.has_text) {
        if (!c->n_tok)
            c->t_first = now;
        else if (c->counted)
            bench_hist_record(&c->t->st->itl, now - c->t_prev);
        c->t_prev = now;
        c->n_tok++;
    }
}

/* The answer on c is whole. */
static void conn_done(bconn *c, uint64_t now)
{
    bthread *t = c->t;
    const bench_cfg *cfg = t->cfg;
    bench_resp *r = &c->resp;
    bool ok2xx = r->status >= 200 && r->status < 300;
    hearth_loop_timer_stop(t->loop, &c->timer);
    if (ok2xx && cfg->api == BENCH_INFER) {
        c->bad_json = !bench_infer_answer_ok(r);
    } else if (ok2xx && cfg->expect_json && !cfg->stream) {
        bench_answer a;
        c->bad_json = bench_answer_parse(r->body.data ? r->body.data : "", r->body.len, &a) != 0;
        if (!c->bad_json && a.prompt_tokens > 0)
            c->usage_prompt = a.prompt_tokens;
    }
    if (!ok2xx || c->bad_json || c->stream_error) {
        if (c->counted) {
            enum bench_err_kind kind = !ok2xx ? BENCH_ERR_STATUS : c->bad_json ? BENCH_ERR_BAD_JSON : BENCH_ERR_STREAM;
            if (!ok2xx && cfg->api == BENCH_INFER && r->status == BENCH_INFER_LATE_STATUS) {
                kind = BENCH_ERR_LATE; /* the frame was answered, as late: it missed its deadline */
                t->st->misses++;
            }
            bench_stats_error(t->st, kind, r->status);
            count_end(t, false, now);
        }
    } else if (c->counted) {
        bench_stats *st = t->st;
        uint64_t lat = now - c->t_sched;
        st->requests++;
        bench_hist_record(&st->lat, lat);
        if (cfg->deadline_ms > 0 && (double)lat > cfg->deadline_ms * 1e6)
            st->misses++;
        st->bytes += r->head_bytes + r->body.len;
        if (c->usage_prompt > 0) {
            st->prompt_tokens += (uint64_t)c->usage_prompt;
            st->usage_answers++;
        }
        if (cfg->stream && c->n_tok) {
            bench_hist_record(&st->ttft, c->t_first - c->t_sched);
            st->tokens += c->usage_tok ? c->usage_tok : c->n_tok;
            st->streams++;
            if (c->n_tok > 1 && c->t_prev > c->t_first)
                st->stream_rate_sum += (double)(c->n_tok - 1) * 1e9 / (double)(c->t_prev - c->t_first);
        }
        uint64_t sec = (c->t_sched - t->a->count_from_ns) / 1000000000u;
        if (sec < BENCH_TIMELINE_S) {
            float ms = (float)((double)lat * 1e-6);
            st->tl_count[sec]++;
            st->tl_sum_ms[sec] += ms;
            if (ms > st->tl_max_ms[sec])
                st->tl_max_ms[sec] = ms;
        }
        count_end(t, true, now);
    }
    c->busy = false;
    if (r->keep_alive) {
        /* an error answer that arrived whole leaves the connection usable */
        c->state = C_IDLE;
    } else {
        conn_close(c);
    }
    conn_next(c);
    maybe_stop(t);
}

static void conn_read(bconn *c)
{
    for (;;) {
        if (hearth_buf_reserve(&c->in, READ_CHUNK)) {
            conn_fail(c, BENCH_ERR_PROTOCOL, 0);
            goto next;
        }
        ssize_t n = read(c->fd, c->in.data + c->in.len, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        uint64_t now = now_ns();
        if (n <= 0) {
            /* hang-up or reset: fine between answers, an error inside one */
            bool whole = c->busy && bench_resp_eof(&c->resp) == 0 && c->resp.head_done;
            if (whole) {
                c->resp.keep_alive = false;
                conn_done(c, now);
                return;
            }
            conn_fail(c, BENCH_ERR_CLOSED, 0);
            goto next;
        }
        if (!c->busy) {
            conn_fail(c, BENCH_ERR_PROTOCOL, 0); /* bytes nobody asked for */
            goto next;
        }
        c->in.len += (size_t)n;
        long used = bench_resp_feed(&c->resp, c->in.data, c->in.len);
        if (used < 0) {
            conn_fail(c, BENCH_ERR_PROTOCOL, 0);
            goto next;
        }
        hearth_buf_consume(&c->in, (size_t)used);
        bench_resp *r = &c->resp;
        if (c->t->cfg->stream && r->head_done && r->status >= 200 && r->status < 300) {
            char *data;
            size_t len;
            int got;
            while ((got = bench_sse_next(r, &data, &len)) > 0)
                on_event(c, data, len, now);
        }
        if (r->done) {
            if (c->in.len) {
                conn_fail(c, BENCH_ERR_PROTOCOL, 0); /* more than one answer: not ours */
                goto next;
            }
            conn_done(c, now);
            return;
        }
    }
next:
    conn_next(c);
    maybe_stop(c->t);
}

static void conn_io(hearth_loop *loop, int fd, unsigned events, void *arg)
{
    bconn *c = arg;
    if (c->state == C_CONNECTING) {
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
            connect_failed(c);
            return;
        }
        c->state = C_IDLE;
        if (c->busy) {
            conn_send(c);
        } else {
            set_interest(c, HEARTH_EV_READ);
            conn_next(c);
        }
        return;
    }
    if (c->state == C_SENDING && (events & HEARTH_EV_WRITE)) {
        conn_send(c);
        return;
    }
    if (events & HEARTH_EV_READ)
        conn_read(c);
}

/* Open loop: releases every request whose time has come, hands them to idle
 * connections, and sleeps until the next one is due. */
static void on_tick(hearth_loop *loop, void *arg)
{
    bthread *t = arg;
    uint64_t now = now_ns();
    while (t->next_sched <= now && want_more(t, t->next_sched)) {
        if (t->next_sched >= t->a->count_from_ns)
            t->issued++;
        if (t->q_len < QUEUE_MAX) {
            t->queue[(t->q_head + t->q_len) % QUEUE_MAX] = t->next_sched;
            t->q_len++;
            if (t->q_len > t->st->backlog_max)
                t->st->backlog_max = t->q_len;
        }
        t->next_sched += gap_ns(t);
    }
    for (int i = 0; i < t->n_conns && t->q_len; i++) {
        bconn *c = &t->conns[i];
        if (!c->busy && (c->state == C_IDLE || c->state == C_CLOSED))
            conn_next(c);
    }
    if (!want_more(t, t->next_sched))
        return;
#ifdef __linux__
    if (t->tick_fd >= 0) {
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)(t->next_sched / 1000000000u),
                                              .tv_nsec = (long)(t->next_sched % 1000000000u)}};
        if (timerfd_settime(t->tick_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
            return;
    }
#endif
    uint64_t n2 = now_ns(), d = t->next_sched > n2 ? (t->next_sched - n2 + 999999) / 1000000 : 0;
    hearth_loop_timer_start(loop, &t->tick, d);
}

#ifdef __linux__
static void on_tick_fd(hearth_loop *loop, int fd, unsigned events, void *arg)
{
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    on_tick(loop, arg);
}
#endif

/* The open loop's release timer: a timerfd on the same clock as
 * hearth_now_ns (CLOCK_MONOTONIC), with the thread's timer slack cut to
 * 1 us, so a request leaves within microseconds of its scheduled time
 * instead of within the loop timer's millisecond. -1 where there is none. */
static int tick_fd_open(bthread *t)
{
#ifdef __linux__
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (hearth_loop_add_fd(t->loop, fd, HEARTH_EV_READ, on_tick_fd, t)) {
        close(fd);
        return -1;
    }
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    return fd;
#else
    return -1;
#endif
}

static void on_end(hearth_loop *loop, void *arg) { hearth_loop_stop(loop); }

/* Every connection is opened, and its handshake awaited (up to AHEAD_MS),
 * before the schedule starts: a connect is not the server's latency. Made
 * in the open loop's first gap, 900 connections sent the first request
 * 38-49 ms late against a server answering in 0.2 ms (2-core EPYC), and on
 * the H100 host the one miss in 6,000 frames at 100 Hz was the first frame:
 * 18.1 ms at the bench, 2.7 ms in the server's access log (stop 44). A
 * connection refused here is closed and left to the run, which connects it
 * again and counts what fails; one still connecting is finished by the loop
 * (conn_io). */
static void open_ahead(bthread *t)
{
    struct pollfd *p = calloc((size_t)t->n_conns, sizeof *p);
    bconn **of = calloc((size_t)t->n_conns, sizeof *of);
    const uint64_t until = now_ns() + AHEAD_MS * 1000000ull;
    for (int i = 0; p && of && i < t->n_conns; i++)
        conn_connect(&t->conns[i]);
    for (uint64_t now; p && of && (now = now_ns()) < until;) {
        int k = 0;
        for (int i = 0; i < t->n_conns; i++) {
            if (t->conns[i].state == C_CONNECTING) {
                p[k] = (struct pollfd){.fd = t->conns[i].fd, .events = POLLOUT};
                of[k++] = &t->conns[i];
            }
        }
        if (!k || poll(p, (nfds_t)k, (int)((until - now) / 1000000u) + 1) < 0)
            break;
        for (int j = 0; j < k; j++) {
            if (!p[j].revents)
                continue;
            int e = 0;
            socklen_t el = sizeof e;
            if (getsockopt(p[j].fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
                conn_close(of[j]);
            } else {
                of[j]->state = C_IDLE;
                set_interest(of[j], HEARTH_EV_READ);
            }
        }
    }
    free(p);
    free(of);
}

/* The start handshake (bench.h): connected, then wait for the main thread's go. */
static void await_go(bench_thread_arg *a)
{
    atomic_store(&a->connected, 1);
    while (!atomic_load(&a->go)) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
        nanosleep(&ts, NULL);
    }
}

void *bench_thread_main(void *arg)
{
    bench_thread_arg *a = arg;
    bthread t = {.a = a, .cfg = a->cfg, .st = a->stats, .n_conns = a->conns, .tick_fd = -1};
    hearth_err err = {0};
    t.rng = 0x9e3779b97f4a7c15ull * (uint64_t)(a->index + 1);
    t.req_next = (size_t)a->index;
    t.loop = hearth_loop_new(HEARTH_POLLER_AUTO, &err);
    t.conns = calloc((size_t)a->conns, sizeof *t.conns);
    if (a->rate > 0)
        t.queue = malloc(QUEUE_MAX * sizeof *t.queue);
    if (!t.loop || !t.conns || (a->rate > 0 && !t.queue)) {
        snprintf(a->err, sizeof a->err, "%s", t.loop ? "out of memory" : err.msg);
        a->rc = -1;
        goto done;
    }
    for (int i = 0; i < a->conns; i++) {
        bconn *c = &t.conns[i];
        c->t = &t;
        c->fd = -1;
        hearth_buf_init(&c->in, (size_t)64 << 20);
        bench_resp_init(&c->resp);
        hearth_timer_init(&c->timer, on_timer, c);
    }
    open_ahead(&t);
    await_go(a);
    hearth_loop_update_time(t.loop); /* the end timer counts from now, not from before the connects */
    hearth_timer_init(&t.tick, on_tick, &t);
    hearth_timer_init(&t.end, on_end, &t);
    uint64_t now = now_ns();
    if (!a->n) {
        uint64_t left = a->end_ns > now ? a->end_ns - now : 0;
        hearth_loop_timer_start(t.loop, &t.end, (left + 999999) / 1000000);
    }
    if (a->rate > 0) {
        /* threads share the rate with their starts spread over one gap, so
         * that together they keep the fixed spacing */
        t.next_sched = a->start_ns + (uint64_t)(1e9 / a->rate * a->index / a->cfg->threads);
        t.tick_fd = tick_fd_open(&t);
        on_tick(t.loop, &t);
    }
    if (a->rate <= 0) {
        /* closed loop: the first request goes at the shared start, not
         * before it (it would fall before count_from and count as warm-up) */
        for (uint64_t n2; (n2 = now_ns()) < a->start_ns;) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(a->start_ns - n2)};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < a->conns; i++)
        conn_next(&t.conns[i]);
    if (t.cfg->poll) /* the whole run: the release timer and the answers are seen within a poll's microseconds */
        hearth_loop_spin(t.loop, UINT64_MAX / 2);
    if (hearth_loop_run(t.loop)) {
        snprintf(a->err, sizeof a->err, "the event loop failed");
        a->rc = -1;
    }
    if (!a->n)
        a->stats->t_last_ns = a->end_ns;
done:
    for (int i = 0; t.conns && i < a->conns; i++) {
        bconn *c = &t.conns[i];
        if (c->fd >= 0 && t.loop)
            hearth_loop_del_fd(t.loop, c->fd);
        if (c->fd >= 0)
            close(c->fd);
        if (t.loop)
            hearth_loop_timer_stop(t.loop, &c->timer);
        hearth_buf_deinit(&c->in);
        bench_resp_deinit(&c->resp);
    }
    if (t.tick_fd >= 0) {
        hearth_loop_del_fd(t.loop, t.tick_fd);
        close(t.tick_fd);
    }
    free(t.conns);
    free(t.queue);
    hearth_loop_free(t.loop);
    atomic_store(&a->finished, 1);
    return NULL;
}
