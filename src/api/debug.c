/* debug.c: the debug endpoints. Each delayed reply runs on its own
 * detached thread, which is fine for a test aid and keeps this file free of
 * engine code; the cancel callback flips a flag the thread polls, exactly the
 * contract a real engine job follows. Like an engine, the threads must be
 * gone before the server frees its loops: they are counted, and
 * hearth_api_debug_stop (the process-exit hook, after every connection was
 * closed and so every job cancelled) waits for the count to reach zero. A
 * thread that still slept when the loops went wrote into freed queues (CI
 * saw the segfault after a drain timeout). */
#include "debug.h"

#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    hearth_server *s;
    hearth_reply reply;
    long n, ms;
    _Atomic int cancelled;
    _Atomic int refs; /* the thread and the connection: whoever drops the last frees */
} job;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_gone = PTHREAD_COND_INITIALIZER;
static int live; /* threads started and not yet returned */

static void thread_done(void)
{
    pthread_mutex_lock(&live_lock);
    if (--live == 0)
        pthread_cond_broadcast(&live_gone);
    pthread_mutex_unlock(&live_lock);
}

void hearth_api_debug_stop(void)
{
    pthread_mutex_lock(&live_lock);
    while (live > 0)
        pthread_cond_wait(&live_gone, &live_lock);
    pthread_mutex_unlock(&live_lock);
}

static void job_unref(job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

static void job_release(void *arg, bool cancelled)
{
    job *j = arg;
    if (cancelled)
        atomic_store(&j->cancelled, 1);
    job_unref(j);
}

static long query_long(hearth_request *req, const char *key, long def, long max)
{
    size_t qlen;
    const char *q = hearth_request_query(req, &qlen);
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen < qlen; i++) {
        if ((i == 0 || q[i - 1] == '&') && !strncmp(q + i, key, klen) && q[i + klen] == '=') {
            long v = strtol(q + i + klen + 1, NULL, 10);
            return v < 0 ? 0 : v > max ? max : v;
        }
    }
    return def;
}

static void sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* Sleeps ms in 10 ms slices; false when j was cancelled meanwhile (so a
 * stopping server never waits a whole long interval for the thread). */
static bool sleep_unless_cancelled(job *j, long ms)
{
    for (long t = 0; t < ms; t += 10) {
        if (atomic_load(&j->cancelled))
            return false;
        sleep_ms(ms - t < 10 ? ms - t : 10);
    }
    return !atomic_load(&j->cancelled);
}

static void echo(hearth_request *req, void *ctx)
{
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char ct[128];
    const char *type = hearth_request_header(req, "content-type", ct, sizeof ct);
    char extra[64];
    snprintf(extra, sizeof extra, "X-Body-Length: %zu\r\n", len);
    hearth_response res = {200, type ? type : "application/octet-stream", extra, body, len};
    hearth_respond(req, &res);
}

static void *sleep_thread(void *arg)
{
    job *j = arg;
    if (sleep_unless_cancelled(j, j->ms)) {
        char body[64];
        int n = snprintf(body, sizeof body, "{\"slept_ms\":%ld}", j->ms);
        hearth_response res = {200, "application/json", NULL, body, (size_t)n};
        hearth_reply_send(j->s, j->reply, &res);
    }
    job_unref(j);
    thread_done();
    return NULL;
}

static void *stream_thread(void *arg)
{
    job *j = arg;
    hearth_reply_stream_begin(j->s, j->reply, 200, "text/event-stream", "Cache-Control: no-cache\r\n");
    for (long i = 0; i < j->n && sleep_unless_cancelled(j, j->ms); i++) {
        char ev[64];
        int n = snprintf(ev, sizeof ev, "data: {\"i\":%ld}\n\n", i);
        hearth_reply_stream_write(j->s, j->reply, ev, (size_t)n);
    }
    if (!atomic_load(&j->cancelled)) {
        hearth_reply_stream_write(j->s, j->reply, "data: [DONE]\n\n", 14);
        hearth_reply_stream_end(j->s, j->reply);
    }
    job_unref(j);
    thread_done();
    return NULL;
}

static void start_job(hearth_request *req, hearth_server *s, void *(*fn)(void *), long n, long ms)
{
    job *j = calloc(1, sizeof *j);
    if (!j) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    j->s = s;
    j->n = n;
    j->ms = ms;
    atomic_store(&j->refs, 2);
    j->reply = hearth_request_defer(req, job_release, j);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&live_lock);
    live++;
    pthread_mutex_unlock(&live_lock);
    if (pthread_create(&t, &attr, fn, j) != 0) {
        thread_done();
        hearth_response res = {503, "application/json", NULL, "{}", 2};
        hearth_reply_send(s, j->reply, &res);
        job_unref(j); /* the thread's reference; the connection's goes with the reply */
    }
    pthread_attr_destroy(&attr);
}

static void do_sleep(hearth_request *req, void *ctx)
{
    start_job(req, ctx, sleep_thread, 0, query_long(req, "ms", 100, 60000));
}

static void do_stream(hearth_request *req, void *ctx)
{
    start_job(req, ctx, stream_thread, query_long(req, "n", 5, 100000), query_long(req, "ms", 10, 10000));
}

int hearth_api_register_debug(hearth_server *s)
{
    HLOG_WARN("--debug-routes: /debug/echo, /debug/sleep and /debug/stream are enabled");
    int rc = hearth_server_route(s, "POST", "/debug/echo", echo, NULL);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/debug/sleep", do_sleep, s);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/debug/stream", do_stream, s);
    return rc;
}
