/* Unit tests for src/net/loop.c and both pollers. Every case runs once per
 * poller (epoll where the build has it, and poll), and the wake-up cases once
 * more with the pipe fallback. Each loop run is bounded by a guard timer
 * that stops the loop and fails the case, so a lost event reads as a
 * failure, not a hang. */
#include "harness.h"

#include "base/clock.h"
#include "net/loop.h"
#include "net/poller.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static enum hearth_poller_kind g_kind;
static int g_pipe_wake;

static hearth_loop *new_loop(void)
{
    hearth_err e = {0};
    hearth_loop *l = g_pipe_wake ? hearth_loop_new_pipe_wake(g_kind, &e) : hearth_loop_new(g_kind, &e);
    CHECK_MSG(l != NULL, "%s", e.msg);
    return l;
}

static void pair(int sv[2])
{
    int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);
    CHECK(rc == 0);
    if (rc != 0)
        sv[0] = sv[1] = -1;
}

/* ---- the guard: a timer that stops a run that went on too long ---- */

static int g_guard_fired;
static void guard_cb(hearth_loop *l, void *arg)
{
    g_guard_fired = 1;
    hearth_loop_stop(l);
}

/* Runs the loop until something calls stop or ms pass; returns 1 when the
 * guard ended it. */
static int run_for(hearth_loop *l, uint64_t ms)
{
    hearth_timer guard;
    hearth_timer_init(&guard, guard_cb, NULL);
    g_guard_fired = 0;
    hearth_loop_timer_start(l, &guard, ms);
    CHECK_EQ_INT(hearth_loop_run(l), HEARTH_OK);
    hearth_loop_timer_stop(l, &guard);
    return g_guard_fired;
}

/* ---- readiness ---- */

struct io_rec {
    int calls;
    unsigned events;  /* OR of everything seen */
    unsigned last;
    int stop_after;   /* stop the loop after this many calls (0: never) */
    int drain;        /* read what is there */
    char got[16];
    int got_len;
};

static void io_cb(hearth_loop *l, int fd, unsigned events, void *arg)
{
    struct io_rec *r = arg;
    r->calls++;
    r->events |= events;
    r->last = events;
    if (r->drain && (events & HEARTH_EV_READ)) {
        ssize_t n = read(fd, r->got + r->got_len, sizeof r->got - 1 - (size_t)r->got_len);
        if (n > 0)
            r->got_len += (int)n;
    }
    if (r->stop_after && r->calls >= r->stop_after)
        hearth_loop_stop(l);
}

static void readable_and_writable_dispatch(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    int sv[2];
    pair(sv);
    struct io_rec r = {.stop_after = 1, .drain = 1};
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], HEARTH_EV_READ, io_cb, &r), HEARTH_OK);
    CHECK(write(sv[1], "hi", 2) == 2);
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.last, HEARTH_EV_READ);
    CHECK_EQ_INT(r.got_len, 2);
    CHECK(memcmp(r.got, "hi", 2) == 0);

    /* An empty socket with buffer room is writable at once, not readable. */
    struct io_rec w = {.stop_after = 1};
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[1], HEARTH_EV_READ | HEARTH_EV_WRITE, io_cb, &w), HEARTH_OK);
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(w.calls, 1);
    CHECK_EQ_INT(w.last, HEARTH_EV_WRITE);

    /* The peer hanging up reads as READ. */
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[1]), HEARTH_OK);
    close(sv[1]);
    r = (struct io_rec){.stop_after = 1};
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK(r.last & HEARTH_EV_READ);
    CHECK(read(sv[0], r.got, 1) == 0);
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_OK);
    close(sv[0]);
    hearth_loop_free(l);
}

static void mod_fd_changes_interest(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    int sv[2];
    pair(sv);
    CHECK(write(sv[1], "x", 1) == 1);
    struct io_rec r = {0};
    /* Registered but quiet: data waits, nothing is delivered. */
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], 0, io_cb, &r), HEARTH_OK);
    CHECK(run_for(l, 30));
    CHECK_EQ_INT(r.calls, 0);

    CHECK_EQ_INT(hearth_loop_mod_fd(l, sv[0], HEARTH_EV_READ), HEARTH_OK);
    r.stop_after = 1;
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.last, HEARTH_EV_READ);

    /* WRITE only, while data is still waiting: WRITE alone comes back. */
    r = (struct io_rec){.stop_after = 1};
    CHECK_EQ_INT(hearth_loop_mod_fd(l, sv[0], HEARTH_EV_WRITE), HEARTH_OK);
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.last, HEARTH_EV_WRITE);

    /* Back to quiet. */
    r = (struct io_rec){0};
    CHECK_EQ_INT(hearth_loop_mod_fd(l, sv[0], 0), HEARTH_OK);
    CHECK(run_for(l, 30));
    CHECK_EQ_INT(r.calls, 0);

    CHECK_EQ_INT(hearth_loop_mod_fd(l, sv[1], HEARTH_EV_READ), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_loop_mod_fd(l, sv[0], 4), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_OK);
    close(sv[0]);
    close(sv[1]);
    hearth_loop_free(l);
}

static void del_fd_stops_callbacks(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    int sv[2];
    pair(sv);
    CHECK(write(sv[1], "x", 1) == 1);
    struct io_rec r = {0};
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], HEARTH_EV_READ, io_cb, &r), HEARTH_OK);
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], HEARTH_EV_READ, io_cb, &r), HEARTH_EINVAL); /* one per fd */
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_OK);
    CHECK(run_for(l, 30));
    CHECK_EQ_INT(r.calls, 0);
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_loop_del_fd(l, 12345), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_loop_del_fd(l, -1), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_loop_add_fd(l, -1, HEARTH_EV_READ, io_cb, &r), HEARTH_EINVAL);
    /* Re-adding after a delete works, and sees the data. */
    r.stop_after = 1;
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], HEARTH_EV_READ, io_cb, &r), HEARTH_OK);
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_OK);
    close(sv[0]);
    close(sv[1]);
    hearth_loop_free(l);
}

/* ---- stale events ---- */

struct stale {
    int a, b;           /* two readable fds */
    int peer_a, peer_b;
    int old_calls;      /* callbacks for the original registrations */
    int new_calls;      /* callbacks for the registration that reused a number */
    int new_peer;
    int reused;         /* the fd number that was reused */
};

static void stale_new_cb(hearth_loop *l, int fd, unsigned events, void *arg)
{
    struct stale *s = arg;
    s->new_calls++;
}

static void stale_old_cb(hearth_loop *l, int fd, unsigned events, void *arg)
{
    struct stale *s = arg;
    s->old_calls++;
    char c;
    (void)!read(fd, &c, 1);
    if (s->old_calls > 1)
        return;
    /* Whichever of a and b runs first kills the other, whose event is
     * already in this iteration's batch, and puts a fresh, idle socket
     * under the same number. */
    int other = fd == s->a ? s->b : s->a;
    CHECK_EQ_INT(hearth_loop_del_fd(l, other), HEARTH_OK);
    close(other);
    int sv[2];
    pair(sv);
    if (sv[0] != other) {
        CHECK(dup2(sv[0], other) == other);
        close(sv[0]);
    }
    s->new_peer = sv[1];
    s->reused = other;
    CHECK_EQ_INT(hearth_loop_add_fd(l, other, HEARTH_EV_READ, stale_new_cb, s), HEARTH_OK);
}

static void stale_event_is_dropped(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    struct stale s = {0};
    int p1[2], p2[2];
    pair(p1);
    pair(p2);
    s.a = p1[0], s.peer_a = p1[1], s.b = p2[0], s.peer_b = p2[1];
    CHECK(write(s.peer_a, "a", 1) == 1);
    CHECK(write(s.peer_b, "b", 1) == 1);
    CHECK_EQ_INT(hearth_loop_add_fd(l, s.a, HEARTH_EV_READ, stale_old_cb, &s), HEARTH_OK);
    CHECK_EQ_INT(hearth_loop_add_fd(l, s.b, HEARTH_EV_READ, stale_old_cb, &s), HEARTH_OK);
    /* Both are ready before the first wait, so one batch holds both. */
    CHECK(run_for(l, 50));
    CHECK_EQ_INT(s.old_calls, 1);
    CHECK_EQ_INT(s.new_calls, 0); /* the new socket has no data: any call was the stale event */

    /* The new registration is live: data on it is delivered. */
    CHECK(write(s.new_peer, "n", 1) == 1);
    CHECK(run_for(l, 50));
    CHECK(s.new_calls >= 1);

    int survivor = s.reused == s.a ? s.b : s.a;
    CHECK_EQ_INT(hearth_loop_del_fd(l, survivor), HEARTH_OK);
    CHECK_EQ_INT(hearth_loop_del_fd(l, s.reused), HEARTH_OK);
    close(s.a);
    close(s.b);
    close(s.peer_a);
    close(s.peer_b);
    close(s.new_peer);
    hearth_loop_free(l);
}

/* ---- timers ---- */

struct fired {
    int order[1024];
    uint64_t due[1024];
    uint64_t at[1024];
    int n;
    int stop_at;  /* stop the loop once this many fired */
};
static struct fired g_fired;

struct tmr {
    hearth_timer t;
    int id;
};

static void tmr_cb(hearth_loop *l, void *arg)
{
    struct tmr *m = arg;
    struct fired *f = &g_fired;
    if (f->n < 1024) {
        f->order[f->n] = m->id;
        f->due[f->n] = m->t.due_ms;
        f->at[f->n] = hearth_loop_now_ms(l);
        f->n++;
    }
    CHECK(!hearth_timer_armed(&m->t));
    if (f->n == f->stop_at)
        hearth_loop_stop(l);
}

static void timers_fire_in_due_order(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    memset(&g_fired, 0, sizeof g_fired);
    struct tmr m[3];
    const uint64_t delay[3] = {60, 20, 40};
    uint64_t t0 = hearth_now_ms();
    for (int i = 0; i < 3; i++) {
        m[i].id = i;
        hearth_timer_init(&m[i].t, tmr_cb, &m[i]);
        CHECK(!hearth_timer_armed(&m[i].t));
        hearth_loop_timer_start(l, &m[i].t, delay[i]);
        CHECK(hearth_timer_armed(&m[i].t));
    }
    g_fired.stop_at = 3;
    CHECK(!run_for(l, 3000));
    uint64_t elapsed = hearth_now_ms() - t0;
    CHECK_EQ_INT(g_fired.n, 3);
    CHECK_EQ_INT(g_fired.order[0], 1);
    CHECK_EQ_INT(g_fired.order[1], 2);
    CHECK_EQ_INT(g_fired.order[2], 0);
    for (int i = 0; i < g_fired.n; i++)
        CHECK(g_fired.at[i] >= g_fired.due[i]); /* never early */
    /* due times count from the loop's cached clock, read when the loop was made,
     * which may trail t0 by a millisecond or two on a busy machine */
    CHECK_MSG(elapsed + 3 >= 60, "elapsed %llu ms", (unsigned long long)elapsed);
    hearth_loop_free(l);
}

/* A timer armed after the arming thread waited on its own counts from
 * the time hearth_loop_update_time read, not the cache of the loop's
 * creation (the bench's connects before its schedule: stop 44's runs
 * ended a second early after a second of handshakes). Without the update
 * the timer below would be due before the wait ended and fire at once. */
static void update_time_moves_the_timers_base(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    memset(&g_fired, 0, sizeof g_fired);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 60 * 1000000L};
    nanosleep(&ts, NULL);
    hearth_loop_update_time(l);
    uint64_t t0 = hearth_now_ms();
    struct tmr m = {.id = 0};
    hearth_timer_init(&m.t, tmr_cb, &m);
    hearth_loop_timer_start(l, &m.t, 40);
    g_fired.stop_at = 1;
    CHECK(!run_for(l, 3000));
    uint64_t elapsed = hearth_now_ms() - t0;
    CHECK_EQ_INT(g_fired.n, 1);
    CHECK_MSG(elapsed + 1 >= 40, "fired %llu ms after it was armed for 40", (unsigned long long)elapsed);
    hearth_loop_free(l);
}

static void timer_stop_cancels_and_restart_moves(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    memset(&g_fired, 0, sizeof g_fired);
    struct tmr m[4];
    for (int i = 0; i < 4; i++) {
        m[i].id = i;
        hearth_timer_init(&m[i].t, tmr_cb, &m[i]);
    }
    hearth_loop_timer_start(l, &m[0].t, 10);
    hearth_loop_timer_start(l, &m[1].t, 20);
    hearth_loop_timer_start(l, &m[2].t, 30);
    hearth_loop_timer_start(l, &m[3].t, 5);
    hearth_loop_timer_stop(l, &m[3].t);    /* cancelled: never fires */
    CHECK(!hearth_timer_armed(&m[3].t));
    hearth_loop_timer_stop(l, &m[3].t);    /* stopping twice is a no-op */
    hearth_loop_timer_start(l, &m[0].t, 50); /* moved from first to last */
    g_fired.stop_at = 3;
    CHECK(!run_for(l, 3000));
    CHECK_EQ_INT(g_fired.n, 3);
    CHECK_EQ_INT(g_fired.order[0], 1);
    CHECK_EQ_INT(g_fired.order[1], 2);
    CHECK_EQ_INT(g_fired.order[2], 0);
    /* Nothing else comes later. */
    g_fired.stop_at = 0;
    CHECK(run_for(l, 80));
    CHECK_EQ_INT(g_fired.n, 3);
    hearth_loop_free(l);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void many_random_timers_fire_sorted(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    memset(&g_fired, 0, sizeof g_fired);
    enum { N = 1000 };
    static struct tmr m[N];
    int cancelled[N] = {0};
    for (int i = 0; i < N; i++) {
        m[i].id = i;
        hearth_timer_init(&m[i].t, tmr_cb, &m[i]);
        hearth_loop_timer_start(l, &m[i].t, rnd() % 150);
    }
    /* Shuffle the heap: restart a third, cancel a tenth. */
    for (int k = 0; k < N / 3; k++)
        hearth_loop_timer_start(l, &m[rnd() % N].t, rnd() % 150);
    int n_cancel = 0;
    for (int k = 0; k < N / 10; k++) {
        int i = (int)(rnd() % N);
        if (!cancelled[i]) {
            hearth_loop_timer_stop(l, &m[i].t);
            cancelled[i] = 1;
            n_cancel++;
        }
    }
    g_fired.stop_at = N - n_cancel;
    CHECK(!run_for(l, 5000));
    CHECK_EQ_INT(g_fired.n, N - n_cancel);
    int seen[N] = {0};
    for (int i = 0; i < g_fired.n; i++) {
        int id = g_fired.order[i];
        CHECK(!cancelled[id]);
        CHECK(!seen[id]);
        seen[id] = 1;
        CHECK(g_fired.at[i] >= g_fired.due[i]);
        if (i > 0)
            CHECK_MSG(g_fired.due[i - 1] <= g_fired.due[i], "timer %d (due %llu) after one due %llu", id,
                      (unsigned long long)g_fired.due[i], (unsigned long long)g_fired.due[i - 1]);
    }
    hearth_loop_free(l);
}

/* A timer that re-arms itself with delay 0 must not starve I/O. */
static void rearm_cb(hearth_loop *l, void *arg)
{
    struct tmr *m = arg;
    m->id++;
    hearth_loop_timer_start(l, &m->t, 0);
}

static void zero_delay_timer_does_not_starve_io(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    struct tmr m = {.id = 0};
    hearth_timer_init(&m.t, rearm_cb, &m);
    hearth_loop_timer_start(l, &m.t, 0);
    int sv[2];
    pair(sv);
    CHECK(write(sv[1], "x", 1) == 1);
    struct io_rec r = {.stop_after = 1, .drain = 1};
    CHECK_EQ_INT(hearth_loop_add_fd(l, sv[0], HEARTH_EV_READ, io_cb, &r), HEARTH_OK);
    CHECK(!run_for(l, 2000));
    CHECK_EQ_INT(r.calls, 1);
    CHECK(m.id >= 1);
    hearth_loop_timer_stop(l, &m.t);
    CHECK_EQ_INT(hearth_loop_del_fd(l, sv[0]), HEARTH_OK);
    close(sv[0]);
    close(sv[1]);
    hearth_loop_free(l);
}

/* ---- wake-up and stop from other threads ---- */

struct wake_state {
    hearth_loop *loop;
    atomic_int produced; /* wakes made so far (bumped before each wake) */
    atomic_int acked;    /* what the last callback saw */
    int target;
    int cbs;
    int rounds_lost;
};

static void wake_cb(hearth_loop *l, void *arg)
{
    struct wake_state *s = arg;
    s->cbs++;
    int p = atomic_load(&s->produced);
    atomic_store(&s->acked, p);
    if (p == s->target)
        hearth_loop_stop(l);
}

static void *burst_thread(void *arg)
{
    struct wake_state *s = arg;
    for (int i = 0; i < 250; i++) {
        atomic_fetch_add(&s->produced, 1);
        hearth_loop_wake(s->loop);
        if (i % 50 == 49)
            usleep(1000); /* let the loop run between bursts, so some wakes find the flag down */
    }
    return NULL;
}

static void wake_coalesces_and_loses_none(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    static struct wake_state s;
    memset(&s, 0, sizeof s);
    s.loop = l;
    s.target = 1000;
    hearth_loop_set_wake_cb(l, wake_cb, &s);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, burst_thread, &s) == 0);
    int guard = run_for(l, 5000);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_MSG(!guard, "the callback never saw all 1000 wakes (saw %d)", atomic_load(&s.acked));
    CHECK_EQ_INT(atomic_load(&s.acked), 1000);
    CHECK(s.cbs >= 1);
    CHECK_MSG(s.cbs * 2 <= 1000, "%d callbacks for 1000 wakes: not coalesced", s.cbs);
    printf("# %d wake callbacks for 1000 wakes\n", s.cbs);
    hearth_loop_free(l);
}

static void *ping_thread(void *arg)
{
    struct wake_state *s = arg;
    for (int i = 1; i <= s->target; i++) {
        atomic_store(&s->produced, i);
        for (int k = 0; k < 3; k++)
            hearth_loop_wake(s->loop);
        uint64_t t0 = hearth_now_ms();
        while (atomic_load(&s->acked) < i) {
            if (hearth_now_ms() - t0 > 2000) {
                s->rounds_lost++;
                return NULL;
            }
            sched_yield();
        }
    }
    return NULL;
}

/* Runs target rounds of wake and wait-for-the-callback against l (each
 * round checked); returns the callbacks made. */
static int ping_pong(hearth_loop *l, int target)
{
    static struct wake_state s;
    memset(&s, 0, sizeof s);
    s.loop = l;
    s.target = target;
    hearth_loop_set_wake_cb(l, wake_cb, &s);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, ping_thread, &s) == 0);
    int guard = run_for(l, 10000);
    pthread_join(th, NULL);
    CHECK(!guard);
    CHECK_EQ_INT(s.rounds_lost, 0);
    CHECK_EQ_INT(atomic_load(&s.acked), target);
    return s.cbs;
}

/* Each round waits for its callback: a wake lost in the window between the
 * loop's read and its lowering of the flag shows up as a round that stalls. */
static void wake_ping_pong_loses_none(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    int cbs = ping_pong(l, 300);
    /* A wake made after the loop lowered the flag earns its own callback,
     * so up to three per round; never more than wakes made. */
    CHECK_MSG(cbs >= 300 && cbs <= 900, "%d callbacks", cbs);
    hearth_loop_free(l);
}

static void *stop_thread(void *arg)
{
    usleep(30 * 1000);
    hearth_loop_stop(arg);
    return NULL;
}

static void stop_from_another_thread(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    static struct wake_state s;
    memset(&s, 0, sizeof s);
    hearth_loop_set_wake_cb(l, wake_cb, &s);
    uint64_t t0 = hearth_now_ms();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, stop_thread, l) == 0);
    int guard = run_for(l, 5000);
    pthread_join(th, NULL);
    CHECK(!guard);
    CHECK(hearth_now_ms() - t0 >= 25);
    CHECK_EQ_INT(s.cbs, 0); /* stop is not a wake */
    /* A stop that comes before run ends the next run after one iteration. */
    hearth_loop_stop(l);
    CHECK(!run_for(l, 5000));
    hearth_loop_free(l);
}

static atomic_int g_signals;
static void on_usr1(int sig) { atomic_fetch_add(&g_signals, 1); }

struct kill_args {
    pthread_t target;
    atomic_int done;
};

static void *kill_thread(void *arg)
{
    struct kill_args *k = arg;
    for (int i = 0; i < 10 && !atomic_load(&k->done); i++) {
        usleep(5 * 1000);
        pthread_kill(k->target, SIGUSR1);
    }
    return NULL;
}

static void eintr_is_retried(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_usr1; /* no SA_RESTART: the wait fails with EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    atomic_store(&g_signals, 0);
    memset(&g_fired, 0, sizeof g_fired);
    g_fired.stop_at = 1;
    struct tmr m = {.id = 7};
    hearth_timer_init(&m.t, tmr_cb, &m);
    hearth_loop_timer_start(l, &m.t, 100);
    static struct kill_args k;
    k.target = pthread_self();
    atomic_store(&k.done, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, kill_thread, &k) == 0);
    CHECK(!run_for(l, 5000)); /* run_for also checks run returned 0 */
    atomic_store(&k.done, 1);
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    CHECK(atomic_load(&g_signals) >= 1);
    CHECK_EQ_INT(g_fired.n, 1);
    CHECK_EQ_INT(g_fired.order[0], 7);
    hearth_loop_free(l);
}

/* ---- many fds ---- */

struct many {
    int *calls; /* indexed by fd */
    int done, want;
};

static void many_cb(hearth_loop *l, int fd, unsigned events, void *arg)
{
    struct many *m = arg;
    char c;
    if (read(fd, &c, 1) == 1)
        m->calls[fd]++;
    CHECK_EQ_INT(hearth_loop_mod_fd(l, fd, 0), HEARTH_OK);
    if (++m->done == m->want)
        hearth_loop_stop(l);
}

static void thousands_of_fds(void)
{
    /* 10,000 fds when the limit allows, else at least 5,000, else skip. */
    int n_pairs = 5000;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = (rlim_t)2 * (rlim_t)n_pairs + 64;
    if (rl.rlim_cur < need) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur < need)
        n_pairs = 2500;
    if (rl.rlim_cur < (rlim_t)2 * (rlim_t)n_pairs + 64) {
        printf("# skip thousands_of_fds: RLIMIT_NOFILE is %llu (hard %llu), need %llu\n",
               (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
               (unsigned long long)(2 * n_pairs + 64));
        return;
    }
    hearth_loop *l = new_loop();
    if (!l)
        return;
    int n = 2 * n_pairs;
    int *fds = malloc((size_t)n * sizeof *fds);
    struct many m = {.calls = calloc((size_t)rl.rlim_cur, sizeof(int)), .want = n};
    CHECK(fds && m.calls);
    if (!fds || !m.calls)
        goto out;
    for (int i = 0; i < n_pairs; i++)
        pair(&fds[2 * i]);
    for (int i = 0; i < n; i++)
        CHECK_EQ_INT(hearth_loop_add_fd(l, fds[i], HEARTH_EV_READ, many_cb, &m), HEARTH_OK);
    for (int i = 0; i < n; i++)
        CHECK(write(fds[i ^ 1], "x", 1) == 1); /* each fd's peer writes one byte */
    CHECK(!run_for(l, 20000));
    CHECK_EQ_INT(m.done, n);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += m.calls[fds[i]] != 1;
    CHECK_EQ_INT(bad, 0);

    /* Delete a random half (the poll backend's swap-delete), then wake
     * everything: only the rest may answer. */
    int *deleted = calloc((size_t)n, sizeof *deleted);
    CHECK(deleted != NULL);
    if (!deleted)
        goto out;
    for (int k = 0; k < n; k++) {
        int i = (int)(rnd() % (uint64_t)n);
        if (!deleted[i]) {
            CHECK_EQ_INT(hearth_loop_del_fd(l, fds[i]), HEARTH_OK);
            deleted[i] = 1;
        }
    }
    int live = 0;
    for (int i = 0; i < n; i++) {
        if (!deleted[i]) {
            CHECK_EQ_INT(hearth_loop_mod_fd(l, fds[i], HEARTH_EV_READ), HEARTH_OK);
            live++;
        }
        CHECK(write(fds[i ^ 1], "y", 1) == 1);
    }
    m.done = 0;
    m.want = live;
    CHECK(!run_for(l, 20000));
    CHECK_EQ_INT(m.done, live);
    bad = 0;
    for (int i = 0; i < n; i++)
        bad += m.calls[fds[i]] != (deleted[i] ? 1 : 2);
    CHECK_EQ_INT(bad, 0);
    for (int i = 0; i < n; i++) {
        if (!deleted[i])
            CHECK_EQ_INT(hearth_loop_del_fd(l, fds[i]), HEARTH_OK);
        close(fds[i]);
    }
    free(deleted);
out:
    free(fds);
    free(m.calls);
    hearth_loop_free(l);
}

/* More ready fds than one wait returns, none of them ever drained: each must
 * still get its turn (the poll backend rotates its scan; epoll its ready list). */
struct starve {
    int *calls; /* indexed by fd */
    int distinct, want;
};

static void starve_cb(hearth_loop *l, int fd, unsigned events, void *arg)
{
    struct starve *s = arg;
    if (s->calls[fd]++ == 0 && ++s->distinct == s->want)
        hearth_loop_stop(l);
}

static void no_ready_fd_starves(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    enum { PAIRS = 300 }; /* 600 fds, over twice the 256 events one wait returns */
    int fds[2 * PAIRS];
    struct starve s = {.calls = calloc(4096, sizeof(int)), .want = 2 * PAIRS};
    CHECK(s.calls != NULL);
    for (int i = 0; i < PAIRS; i++)
        pair(&fds[2 * i]);
    for (int i = 0; i < 2 * PAIRS; i++) {
        CHECK(fds[i] >= 0 && fds[i] < 4096);
        CHECK(write(fds[i ^ 1], "x", 1) == 1);
    }
    if (s.calls)
        for (int i = 0; i < 2 * PAIRS; i++)
            CHECK_EQ_INT(hearth_loop_add_fd(l, fds[i], HEARTH_EV_READ, starve_cb, &s), HEARTH_OK);
    CHECK(!run_for(l, 5000));
    CHECK_EQ_INT(s.distinct, 2 * PAIRS);
    for (int i = 0; i < 2 * PAIRS; i++) {
        hearth_loop_del_fd(l, fds[i]);
        close(fds[i]);
    }
    free(s.calls);
    hearth_loop_free(l);
}

/* ---- driver ---- */

struct case_def {
    const char *name;
    void (*fn)(void);
    int wake_case; /* also run with the pipe wake-up */
};

/* ---- spinning ---- */

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* hearth_loop_spin: for its window the loop polls (its thread burns CPU),
 * then sleeps again; a cross-thread wake is taken while it spins, and a
 * later call's longer window wins over a shorter one. CPU bounds are
 * loose (CI shares two cores between two test streams): a sleeping loop
 * uses ~0 ms of CPU in 60 ms, a spinning one most of it. */
static void spin_polls_then_sleeps(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    double c0 = thread_cpu_ms();
    CHECK(run_for(l, 60));
    double idle = thread_cpu_ms() - c0;
    hearth_loop_spin(l, 40 * 1000000ull);
    hearth_loop_spin(l, 1000000ull); /* shorter: the 40 ms stand */
    c0 = thread_cpu_ms();
    CHECK(run_for(l, 60));
    double spun = thread_cpu_ms() - c0;
    CHECK_MSG(idle < 8.0 && spun > 8.0, "CPU over 60 ms: %.1f ms asleep, %.1f ms with a 40 ms spin", idle, spun);
    /* wakes from another thread while spinning */
    hearth_loop_spin(l, 200 * 1000000ull);
    ping_pong(l, 100);
    hearth_loop_free(l);
}

/* hearth_loop_spin_window: the loop sleeps before the window (entering it
 * at most 1 ms early), polls through it and sleeps after it. Bounds as
 * spin_polls_then_sleeps': ~0 ms of CPU asleep, most of the 20 ms window
 * polling. */
static void spin_window_polls_only_inside(void)
{
    hearth_loop *l = new_loop();
    if (!l)
        return;
    const uint64_t t0 = hearth_now_ns();
    hearth_loop_spin_window(l, t0 + 30 * 1000000ull, t0 + 50 * 1000000ull);
    double c0 = thread_cpu_ms();
    CHECK(run_for(l, 25));
    double before = thread_cpu_ms() - c0;
    c0 = thread_cpu_ms();
    CHECK(run_for(l, 35));
    double inside = thread_cpu_ms() - c0;
    c0 = thread_cpu_ms();
    CHECK(run_for(l, 30));
    double after = thread_cpu_ms() - c0;
    CHECK_MSG(before < 8.0 && inside > 8.0 && after < 8.0,
              "CPU: %.1f ms in the 25 ms before a 20 ms window, %.1f ms across it, %.1f ms in the 30 ms after",
              before, inside, after);
    /* a later window replaces the first; one already past polls not at all */
    hearth_loop_spin_window(l, t0, t0 + 1000000ull);
    c0 = thread_cpu_ms();
    CHECK(run_for(l, 30));
    double past = thread_cpu_ms() - c0;
    CHECK_MSG(past < 8.0, "CPU: %.1f ms in 30 ms with only a past window", past);
    hearth_loop_free(l);
}

static const struct case_def cases[] = {
    {"readable_and_writable_dispatch", readable_and_writable_dispatch, 0},
    {"mod_fd_changes_interest", mod_fd_changes_interest, 0},
    {"del_fd_stops_callbacks", del_fd_stops_callbacks, 0},
    {"stale_event_is_dropped", stale_event_is_dropped, 0},
    {"timers_fire_in_due_order", timers_fire_in_due_order, 0},
    {"timer_stop_cancels_and_restart_moves", timer_stop_cancels_and_restart_moves, 0},
    {"update_time_moves_the_timers_base", update_time_moves_the_timers_base, 0},
    {"many_random_timers_fire_sorted", many_random_timers_fire_sorted, 0},
    {"zero_delay_timer_does_not_starve_io", zero_delay_timer_does_not_starve_io, 0},
    {"wake_coalesces_and_loses_none", wake_coalesces_and_loses_none, 1},
    {"wake_ping_pong_loses_none", wake_ping_pong_loses_none, 1},
    {"stop_from_another_thread", stop_from_another_thread, 1},
    {"spin_polls_then_sleeps", spin_polls_then_sleeps, 1},
    {"spin_window_polls_only_inside", spin_window_polls_only_inside, 0},
    {"eintr_is_retried", eintr_is_retried, 0},
    {"no_ready_fd_starves", no_ready_fd_starves, 0},
    {"thousands_of_fds", thousands_of_fds, 0},
};

static void run_all(enum hearth_poller_kind kind, const char *kname, int pipe_wake)
{
    g_kind = kind;
    g_pipe_wake = pipe_wake;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (pipe_wake && !cases[i].wake_case)
            continue;
        char name[128];
        snprintf(name, sizeof name, "%s%s: %s", kname, pipe_wake ? "+pipe" : "", cases[i].name);
        hearth_test_run(name, cases[i].fn);
    }
}

static void poller_names(void)
{
    hearth_err e = {0};
    hearth_loop *l = hearth_loop_new(HEARTH_POLLER_POLL, &e);
    CHECK(l != NULL);
    if (l)
        CHECK_EQ_STR(hearth_loop_poller_name(l), "poll");
    hearth_loop_free(l);
    hearth_loop_free(NULL);
    l = hearth_loop_new(HEARTH_POLLER_AUTO, &e);
    CHECK(l != NULL);
    if (l)
        CHECK_EQ_STR(hearth_loop_poller_name(l), hearth_loop_default_poller_name());
    hearth_loop_free(l);
    l = hearth_loop_new(HEARTH_POLLER_EPOLL, &e);
    if (hearth_poller_epoll_ops()) {
        CHECK(l != NULL);
        CHECK_EQ_STR(hearth_loop_default_poller_name(), "epoll");
    } else {
        CHECK(l == NULL && strstr(e.msg, "epoll") != NULL);
        CHECK_EQ_STR(hearth_loop_default_poller_name(), "poll");
    }
    hearth_loop_free(l);
#if defined(__linux__)
    CHECK(hearth_poller_epoll_ops() != NULL); /* the probe must find epoll on Linux */
#endif
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(poller_names);
    if (hearth_poller_epoll_ops()) {
        run_all(HEARTH_POLLER_EPOLL, "epoll", 0);
        run_all(HEARTH_POLLER_EPOLL, "epoll", 1);
    } else {
        printf("# epoll not in this build: its cases are skipped\n");
    }
    run_all(HEARTH_POLLER_POLL, "poll", 0);
    run_all(HEARTH_POLLER_POLL, "poll", 1);
    TEST_EXIT();
}
