/* loop.c: the event loop: fd dispatch, timers, cross-thread wake-up.
 *
 * fds: a table indexed by fd (grown by doubling up to HEARTH_POLLER_MAX_FD)
 * holds each registration's callback, argument, interest and a generation
 * bumped on every add. The poller gets the tag (generation << 32 | fd), and
 * an event whose tag no longer matches a live registration is dropped before
 * dispatch: a callback that deletes another fd, closes it, and gets the
 * same number back from socket() cannot receive the dead one's event
 * (libuv invalidates the pending array instead; nginx flips a stale bit in
 * the pointer; a generation needs neither a scan nor pointer tricks).
 * Quiet registrations (events == 0) are kept out of the poller entirely, so
 * a hung-up fd nobody listens to cannot spin the loop.
 *
 * Timers: a binary min-heap of pointers to caller-owned hearth_timer, each
 * timer keeping its own heap index, so start, restart and stop are
 * O(log n) and never search. The poll timeout is the earliest due time. A
 * pass fires at most as many timers as were armed when it began, so a
 * callback that re-arms itself with delay 0 cannot starve I/O. Rejected: a
 * timer wheel (cheaper for huge counts of coarse timeouts, but needs a tick
 * and gives up ordering within a slot) and a sorted list (O(n) start).
 *
 * Wake-up: an eventfd (a pipe where there is none) registered with a tag no
 * fd can have. An atomic flag coalesces: only the call that raises it
 * writes, so a burst of wakes costs one write, one read and one callback.
 * The loop drains the fd *before* lowering the flag, then runs the
 * callback; a wake that lands in between finds the flag up, skips the write,
 * and is still seen by the callback that follows. hearth_loop_stop uses the
 * same fd without the flag, so it never runs the wake callback. */
#include "net/loop.h"
#include "net/poller.h"

#include "base/clock.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if __has_include(<sys/eventfd.h>)
#include <sys/eventfd.h>
#define HAVE_EVENTFD 1
#else
#define HAVE_EVENTFD 0
#endif

#define WAKE_TAG UINT64_MAX /* fd bits 0xffffffff: past HEARTH_POLLER_MAX_FD, no fd has it */
#define EVENTS_PER_WAIT 256
#define MAX_TIMERS ((size_t)1 << 24)

struct fd_entry {
    hearth_io_cb cb;
    void *arg;
    unsigned events;
    uint32_t gen;
    uint8_t live;
};

struct hearth_loop {
    const hearth_poller_ops *ops;
    hearth_poller *poller;

    struct fd_entry *fds; /* (fd_cap) indexed by fd */
    size_t fd_cap;

    hearth_timer **heap; /* (n_timers) min-heap on due_ms */
    size_t n_timers, heap_cap;

    int wake_rd, wake_wr; /* the same eventfd twice, or a pipe's two ends */
    atomic_int wake_pending;
    atomic_int stop_requested;
    hearth_wake_cb wake_cb;
    void *wake_arg;

    uint64_t now_ms;
    atomic_uint_fast64_t spin_until_ns; /* hearth_loop_spin: poll without sleeping until then */
    atomic_uint_fast64_t win_from_ns, win_until_ns; /* hearth_loop_spin_window (until 0: none) */
    hearth_poller_event events[EVENTS_PER_WAIT];
};

static const hearth_poller_ops *pick_ops(enum hearth_poller_kind kind)
{
    switch (kind) {
    case HEARTH_POLLER_AUTO: {
        const hearth_poller_ops *ops = hearth_poller_epoll_ops();
        return ops ? ops : hearth_poller_poll_ops();
    }
    case HEARTH_POLLER_EPOLL: return hearth_poller_epoll_ops();
    case HEARTH_POLLER_POLL: return hearth_poller_poll_ops();
    }
    return NULL;
}

const char *hearth_loop_default_poller_name(void) { return pick_ops(HEARTH_POLLER_AUTO)->name; }

const char *hearth_loop_poller_name(const hearth_loop *loop) { return loop->ops->name; }

uint64_t hearth_loop_now_ms(const hearth_loop *loop) { return loop->now_ms; }

void hearth_loop_update_time(hearth_loop *loop) { loop->now_ms = hearth_now_ms(); }

static int set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    int fdf = fcntl(fd, F_GETFD);
    if (fdf < 0 || fcntl(fd, F_SETFD, fdf | FD_CLOEXEC) < 0)
        return -1;
    return 0;
}

static int wake_open(hearth_loop *loop, int force_pipe, hearth_err *err)
{
#if HAVE_EVENTFD
    if (!force_pipe) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0)
            return hearth_err_sys(err, errno, "loop: eventfd");
        loop->wake_rd = loop->wake_wr = fd;
        return HEARTH_OK;
    }
#endif
    int p[2];
    if (pipe(p) < 0)
        return hearth_err_sys(err, errno, "loop: pipe for wake-up");
    loop->wake_rd = p[0];
    loop->wake_wr = p[1];
    if (set_nonblock_cloexec(p[0]) < 0 || set_nonblock_cloexec(p[1]) < 0)
        return hearth_err_sys(err, errno, "loop: fcntl on the wake-up pipe");
    return HEARTH_OK;
}

static hearth_loop *loop_new(enum hearth_poller_kind kind, int force_pipe, hearth_err *err)
{
    const hearth_poller_ops *ops = pick_ops(kind);
    if (!ops) {
        if (kind == HEARTH_POLLER_EPOLL)
            hearth_err_set(err, HEARTH_EUNSUPPORTED, "loop: epoll not available in this build");
        else
            hearth_err_set(err, HEARTH_EINVAL, "loop: unknown poller kind %d", (int)kind);
        return NULL;
    }
    hearth_loop *loop = calloc(1, sizeof *loop);
    if (!loop) {
        hearth_err_set(err, HEARTH_ENOMEM, "loop: out of memory");
        return NULL;
    }
    loop->ops = ops;
    loop->wake_rd = loop->wake_wr = -1;
    atomic_init(&loop->wake_pending, 0);
    atomic_init(&loop->stop_requested, 0);
    loop->now_ms = hearth_now_ms();
    loop->poller = ops->create(err);
    if (!loop->poller)
        goto fail;
    if (wake_open(loop, force_pipe, err) != HEARTH_OK)
        goto fail;
    if (ops->add(loop->poller, loop->wake_rd, HEARTH_EV_READ, WAKE_TAG) != HEARTH_OK) {
        hearth_err_sys(err, errno, "loop: %s: registering the wake-up fd %d", ops->name, loop->wake_rd);
        goto fail;
    }
    return loop;
fail:
    hearth_loop_free(loop);
    return NULL;
}

hearth_loop *hearth_loop_new(enum hearth_poller_kind kind, hearth_err *err) { return loop_new(kind, 0, err); }

hearth_loop *hearth_loop_new_pipe_wake(enum hearth_poller_kind kind, hearth_err *err)
{
    return loop_new(kind, 1, err);
}

void hearth_loop_free(hearth_loop *loop)
{
    if (!loop)
        return;
    /* Timers outlive the loop (caller storage): leave them reading as unarmed. */
    for (size_t i = 0; i < loop->n_timers; i++)
        loop->heap[i]->heap_index = SIZE_MAX;
    if (loop->poller)
        loop->ops->destroy(loop->poller);
    if (loop->wake_rd >= 0)
        close(loop->wake_rd);
    if (loop->wake_wr >= 0 && loop->wake_wr != loop->wake_rd)
        close(loop->wake_wr);
    free(loop->fds);
    free(loop->heap);
    free(loop);
}

/* ---- fds ---- */

static uint64_t tag_of(int fd, uint32_t gen) { return (uint64_t)gen << 32 | (uint32_t)fd; }

static struct fd_entry *live_entry(hearth_loop *loop, int fd)
{
    if (fd < 0 || (size_t)fd >= loop->fd_cap || !loop->fds[fd].live)
        return NULL;
    return &loop->fds[fd];
}

static int grow_fds(hearth_loop *loop, int fd)
{
    size_t need = (size_t)fd + 1;
    if (need <= loop->fd_cap)
        return HEARTH_OK;
    size_t cap = loop->fd_cap ? loop->fd_cap : 64;
    while (cap < need)
        cap *= 2;
    if (cap > HEARTH_POLLER_MAX_FD)
        cap = HEARTH_POLLER_MAX_FD;
    struct fd_entry *f = realloc(loop->fds, cap * sizeof *f);
    if (!f)
        return HEARTH_ENOMEM;
    /* gen starts at 0 for new slots; it only has to differ from the
     * generation of an earlier registration of the same fd. */
    memset(f + loop->fd_cap, 0, (cap - loop->fd_cap) * sizeof *f);
    loop->fds = f;
    loop->fd_cap = cap;
    return HEARTH_OK;
}

int hearth_loop_add_fd(hearth_loop *loop, int fd, unsigned events, hearth_io_cb cb, void *arg)
{
    if (fd < 0 || !cb || (events & ~(unsigned)(HEARTH_EV_READ | HEARTH_EV_WRITE)))
        return HEARTH_EINVAL;
    if (fd >= HEARTH_POLLER_MAX_FD)
        return HEARTH_ELIMIT;
    int rc = grow_fds(loop, fd);
    if (rc != HEARTH_OK)
        return rc;
    struct fd_entry *e = &loop->fds[fd];
    if (e->live)
        return HEARTH_EINVAL;
    uint32_t gen = e->gen + 1;
    if (events) {
        rc = loop->ops->add(loop->poller, fd, events, tag_of(fd, gen));
        if (rc != HEARTH_OK)
            return rc;
    }
    *e = (struct fd_entry){.cb = cb, .arg = arg, .events = events, .gen = gen, .live = 1};
    return HEARTH_OK;
}

int hearth_loop_mod_fd(hearth_loop *loop, int fd, unsigned events)
{
    if (events & ~(unsigned)(HEARTH_EV_READ | HEARTH_EV_WRITE))
        return HEARTH_EINVAL;
    struct fd_entry *e = live_entry(loop, fd);
    if (!e)
        return HEARTH_ENOTFOUND;
    int rc = HEARTH_OK;
    if (e->events == events)
        return HEARTH_OK;
    if (!e->events)
        rc = loop->ops->add(loop->poller, fd, events, tag_of(fd, e->gen));
    else if (!events)
        rc = loop->ops->del(loop->poller, fd);
    else
        rc = loop->ops->mod(loop->poller, fd, events, tag_of(fd, e->gen));
    if (rc == HEARTH_OK)
        e->events = events;
    return rc;
}

int hearth_loop_del_fd(hearth_loop *loop, int fd)
{
    struct fd_entry *e = live_entry(loop, fd);
    if (!e)
        return HEARTH_ENOTFOUND;
    /* A failure here means the caller closed fd first (the kernel already
     * forgot it); the registration is gone either way. */
    if (e->events)
        (void)loop->ops->del(loop->poller, fd);
    e->live = 0;
    e->events = 0;
    e->cb = NULL;
    e->arg = NULL;
    return HEARTH_OK;
}

/* ---- timers ---- */

static void heap_set(hearth_loop *loop, size_t i, hearth_timer *t)
{
    loop->heap[i] = t;
    t->heap_index = i;
}

static void sift_up(hearth_loop *loop, size_t i)
{
    hearth_timer *t = loop->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (loop->heap[parent]->due_ms <= t->due_ms)
            break;
        heap_set(loop, i, loop->heap[parent]);
        i = parent;
    }
    heap_set(loop, i, t);
}

static void sift_down(hearth_loop *loop, size_t i)
{
    hearth_timer *t = loop->heap[i];
    size_t n = loop->n_timers;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && loop->heap[c + 1]->due_ms < loop->heap[c]->due_ms)
            c++;
        if (t->due_ms <= loop->heap[c]->due_ms)
            break;
        heap_set(loop, i, loop->heap[c]);
        i = c;
    }
    heap_set(loop, i, t);
}

static void heap_remove(hearth_loop *loop, size_t i)
{
    hearth_timer *t = loop->heap[i];
    size_t last = --loop->n_timers;
    if (i != last) {
        hearth_timer *moved = loop->heap[last];
        heap_set(loop, i, moved);
        sift_down(loop, i);
        if (moved->heap_index == i)
            sift_up(loop, i);
    }
    t->heap_index = SIZE_MAX;
}

void hearth_timer_init(hearth_timer *t, hearth_timer_cb cb, void *arg)
{
    t->due_ms = 0;
    t->cb = cb;
    t->arg = arg;
    t->heap_index = SIZE_MAX;
}

void hearth_loop_timer_start(hearth_loop *loop, hearth_timer *t, uint64_t delay_ms)
{
    uint64_t due = loop->now_ms + delay_ms;
    if (due < loop->now_ms)
        due = UINT64_MAX;
    if (hearth_timer_armed(t)) {
        t->due_ms = due;
        sift_up(loop, t->heap_index);
        sift_down(loop, t->heap_index);
        return;
    }
    if (loop->n_timers == loop->heap_cap) {
        size_t cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
        hearth_timer **h = cap <= MAX_TIMERS ? realloc(loop->heap, cap * sizeof *h) : NULL;
        if (!h) {
            /* The API has no error return here (arming must not fail in a
             * callback's cleanup path); the timer stays unarmed, which the
             * caller can see with hearth_timer_armed. */
            HLOG_ERROR("loop: cannot arm a timer: %zu armed, limit %zu or out of memory", loop->n_timers,
                       MAX_TIMERS);
            return;
        }
        loop->heap = h;
        loop->heap_cap = cap;
    }
    t->due_ms = due;
    size_t i = loop->n_timers++;
    heap_set(loop, i, t);
    sift_up(loop, i);
}

void hearth_loop_timer_stop(hearth_loop *loop, hearth_timer *t)
{
    if (hearth_timer_armed(t))
        heap_remove(loop, t->heap_index);
}

static int next_timeout(const hearth_loop *loop)
{
    if (loop->n_timers == 0)
        return -1;
    uint64_t due = loop->heap[0]->due_ms;
    if (due <= loop->now_ms)
        return 0;
    uint64_t d = due - loop->now_ms;
    return d > INT_MAX ? INT_MAX : (int)d;
}

static void run_timers(hearth_loop *loop)
{
    size_t budget = loop->n_timers;
    while (budget-- > 0 && loop->n_timers > 0 && loop->heap[0]->due_ms <= loop->now_ms) {
        hearth_timer *t = loop->heap[0];
        heap_remove(loop, 0);
        t->cb(loop, t->arg);
    }
}

/* ---- wake-up and stop ---- */

void hearth_loop_set_wake_cb(hearth_loop *loop, hearth_wake_cb cb, void *arg)
{
    loop->wake_cb = cb;
    loop->wake_arg = arg;
}

static void wake_signal(hearth_loop *loop)
{
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(loop->wake_wr, &one, loop->wake_wr == loop->wake_rd ? sizeof one : 1);
    while (n < 0 && errno == EINTR);
    /* EAGAIN: the eventfd counter or the pipe is full, so a wake-up is
     * already pending and this one is not needed. */
}

void hearth_loop_wake(hearth_loop *loop)
{
    if (atomic_exchange(&loop->wake_pending, 1) == 0)
        wake_signal(loop);
}

void hearth_loop_stop(hearth_loop *loop)
{
    atomic_store(&loop->stop_requested, 1);
    wake_signal(loop);
}

static void wake_drain(hearth_loop *loop)
{
    char buf[64];
    for (;;) {
        ssize_t n = read(loop->wake_rd, buf, sizeof buf);
        if (n > 0 && loop->wake_rd != loop->wake_wr)
            continue; /* a pipe may hold more bytes */
        if (n < 0 && errno == EINTR)
            continue;
        break; /* an eventfd read resets the counter in one go; EAGAIN: empty */
    }
    if (atomic_exchange(&loop->wake_pending, 0) && loop->wake_cb)
        loop->wake_cb(loop, loop->wake_arg);
}

/* ---- the loop ---- */

static void dispatch(hearth_loop *loop, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t tag = loop->events[i].tag;
        if (tag == WAKE_TAG) {
            wake_drain(loop);
            continue;
        }
        int fd = (int)(uint32_t)tag;
        struct fd_entry *e = live_entry(loop, fd);
        if (!e || e->gen != (uint32_t)(tag >> 32))
            continue; /* deleted, or deleted and re-added, earlier in this iteration */
        unsigned ev = loop->events[i].events & e->events; /* interest may have narrowed since */
        if (ev)
            e->cb(loop, fd, ev, e->arg);
    }
}

void hearth_loop_spin(hearth_loop *loop, uint64_t ns)
{
    const uint_fast64_t until = hearth_now_ns() + ns;
    uint_fast64_t cur = atomic_load(&loop->spin_until_ns);
    while (cur < until && !atomic_compare_exchange_weak(&loop->spin_until_ns, &cur, until))
        ;
}

void hearth_loop_spin_window(hearth_loop *loop, uint64_t from_ns, uint64_t until_ns)
{
    /* until first: a wait between the stores sees no window, not a torn one */
    atomic_store(&loop->win_until_ns, 0);
    atomic_store(&loop->win_from_ns, from_ns);
    atomic_store(&loop->win_until_ns, until_ns);
}

/* The wait's timeout under the spins: 0 inside a spin or a window, and no
 * longer than the start of a window to come. The wait counts whole
 * milliseconds, so a window is entered up to 1 ms before its start, never
 * after. No clock read for a loop that never spun. */
static int spin_timeout(hearth_loop *loop, int timeout)
{
    const uint_fast64_t spin_until = atomic_load_explicit(&loop->spin_until_ns, memory_order_relaxed);
    uint_fast64_t win_until = atomic_load_explicit(&loop->win_until_ns, memory_order_relaxed);
    if (timeout == 0 || (!spin_until && !win_until))
        return timeout;
    const uint64_t now = hearth_now_ns();
    if (spin_until > now)
        return 0;
    if (!win_until)
        return timeout;
    if (win_until <= now) {
        atomic_compare_exchange_strong(&loop->win_until_ns, &win_until, 0); /* spent: no more clock reads */
        return timeout;
    }
    const uint64_t from = atomic_load(&loop->win_from_ns);
    if (from < now + 1000000u)
        return 0;
    const uint64_t ms = (from - now) / 1000000u;
    return timeout < 0 || ms < (uint64_t)timeout ? (int)ms : timeout;
}

int hearth_loop_run(hearth_loop *loop)
{
    for (;;) {
        loop->now_ms = hearth_now_ms();
        int timeout = spin_timeout(loop, next_timeout(loop));
        int n = loop->ops->wait(loop->poller, loop->events, EVENTS_PER_WAIT, timeout);
        loop->now_ms = hearth_now_ms();
        if (n == HEARTH_EAGAIN)
            n = 0; /* a signal: timers may be due, then wait again */
        if (n < 0) {
            HLOG_ERROR("loop: %s wait failed: %s", loop->ops->name, strerror(errno));
            atomic_store(&loop->stop_requested, 0);
            return n;
        }
        dispatch(loop, n);
        run_timers(loop);
        if (atomic_exchange(&loop->stop_requested, 0))
            return HEARTH_OK;
    }
}
