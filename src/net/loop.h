/* loop.h: a single-threaded event loop: fd readiness, timers, and a
 * cross-thread wake-up.
 *
 * One loop per I/O thread. Every function except hearth_loop_wake and
 * hearth_loop_stop must be called from the loop's own thread. Callbacks run
 * on that thread and must never block.
 *
 * Stale events: once hearth_loop_del_fd(fd) returns, no callback for that
 * registration runs again, even when the poller already reported an event for
 * it in the current iteration and the same fd number is re-added (registrations
 * carry a generation that is checked before dispatch). */
#ifndef HEARTH_NET_LOOP_H
#define HEARTH_NET_LOOP_H

#include "base/err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_loop hearth_loop;

enum hearth_poller_kind {
    HEARTH_POLLER_AUTO = 0, /* the best the build-time probe found (epoll where it exists) */
    HEARTH_POLLER_EPOLL,
    HEARTH_POLLER_POLL,     /* portable poll(2); forcible for testing and odd kernels */
};

enum {
    HEARTH_EV_READ = 1,   /* readable, or peer hung up / error (a read will tell which) */
    HEARTH_EV_WRITE = 2,  /* writable */
};

typedef void (*hearth_io_cb)(hearth_loop *loop, int fd, unsigned events, void *arg);
typedef void (*hearth_timer_cb)(hearth_loop *loop, void *arg);
typedef void (*hearth_wake_cb)(hearth_loop *loop, void *arg);

/* A one-shot timer in caller-owned storage (embedded in a connection, say),
 * so arming and disarming never allocate. Fields are private. */
typedef struct hearth_timer {
    uint64_t due_ms;
    hearth_timer_cb cb;
    void *arg;
    size_t heap_index; /* SIZE_MAX when not armed */
} hearth_timer;

/* NULL on failure (err says why, e.g. "epoll not available in this build"). */
hearth_loop *hearth_loop_new(enum hearth_poller_kind kind, hearth_err *err);
/* Frees the loop; fds registered are not closed. NULL is a no-op. */
void hearth_loop_free(hearth_loop *loop);
/* "epoll" or "poll". */
const char *hearth_loop_poller_name(const hearth_loop *loop);
/* The poller AUTO picks in this build. */
const char *hearth_loop_default_poller_name(void);

/* Registers fd for events (HEARTH_EV_READ|HEARTH_EV_WRITE; 0 is allowed and
 * means "registered but quiet"). Level-triggered. One registration per fd. */
int hearth_loop_add_fd(hearth_loop *loop, int fd, unsigned events, hearth_io_cb cb, void *arg);
int hearth_loop_mod_fd(hearth_loop *loop, int fd, unsigned events);
/* Unregisters; call before close(fd). Unknown fds return HEARTH_ENOTFOUND. */
int hearth_loop_del_fd(hearth_loop *loop, int fd);

void hearth_timer_init(hearth_timer *t, hearth_timer_cb cb, void *arg);
/* (Re)arms t to fire once, delay_ms after the loop's current time. */
void hearth_loop_timer_start(hearth_loop *loop, hearth_timer *t, uint64_t delay_ms);
/* Disarms t; a no-op when it is not armed. */
void hearth_loop_timer_stop(hearth_loop *loop, hearth_timer *t);
static inline int hearth_timer_armed(const hearth_timer *t) { return t->heap_index != SIZE_MAX; }

/* The callback that runs (on the loop thread) after hearth_loop_wake. */
void hearth_loop_set_wake_cb(hearth_loop *loop, hearth_wake_cb cb, void *arg);
/* Any thread: wakes the loop. Coalesced: many calls before the loop runs
 * give one callback (eventfd where the kernel has it, else a pipe). */
void hearth_loop_wake(hearth_loop *loop);

/* Any thread: for the next ns nanoseconds the loop polls without
 * sleeping (its waits time out at once), so what comes then (a deferred
 * answer's wake-up, the client's next request) is handled without a
 * sleeping thread's wake-up latency; it burns its thread meanwhile. A
 * later call extends the window, never shortens it. */
void hearth_loop_spin(hearth_loop *loop, uint64_t ns);
/* Any thread: the loop polls without sleeping from from_ns until until_ns
 * (hearth_now_ns's clock), entering the window up to 1 ms early (its waits
 * count milliseconds), and sleeps as before outside it: for something
 * expected at a known time (a paced client's next frame), so it meets no
 * sleeping thread, at the cost of the window's polling rather than the
 * whole gap's. One window at a time: a call replaces the one before.
 * Takes effect at the loop's next wait (a loop asleep is not woken). */
void hearth_loop_spin_window(hearth_loop *loop, uint64_t from_ns, uint64_t until_ns);
/* Runs until hearth_loop_stop. Returns 0, or negative if the poller failed. */
int hearth_loop_run(hearth_loop *loop);
/* Any thread: makes hearth_loop_run return after the current iteration. */
void hearth_loop_stop(hearth_loop *loop);
/* Monotonic milliseconds, cached at the start of each iteration. */
uint64_t hearth_loop_now_ms(const hearth_loop *loop);
/* Reads the clock into that cache: for a thread that arms timers before
 * hearth_loop_run after waiting on its own (their delays count from the
 * cache, which is otherwise as old as the loop's creation). */
void hearth_loop_update_time(hearth_loop *loop);

#endif
