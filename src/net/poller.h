/* poller.h: the private seam between the event loop and the kernel's
 * readiness API. One backend per kernel API (poller_epoll.c, poller_poll.c);
 * the loop picks one at run time through a small table of functions, so the
 * portable backend can be forced and tested on a kernel that has epoll.
 *
 * A backend knows nothing of callbacks: it maps an fd to an opaque 64-bit
 * tag and reports (tag, events) pairs. Level-triggered. The loop registers
 * only fds with a non-empty interest (events != 0), so a backend never sees
 * a "quiet" fd and never spins on a hang-up nobody asked about.
 *
 * Events use the loop's bits (HEARTH_EV_READ, HEARTH_EV_WRITE). An error or
 * hang-up is reported as READ|WRITE; the loop masks that with the interest. */
#ifndef HEARTH_NET_POLLER_H
#define HEARTH_NET_POLLER_H

#include "base/err.h"
#include "net/loop.h"

#include <stdint.h>

/* fds at or past this are refused: the loop's and the poll backend's tables
 * are indexed by fd, and this is their hard bound (Linux's default nr_open
 * is 2^20). The tag the loop builds keeps the fd in its low 32 bits. */
#define HEARTH_POLLER_MAX_FD (1 << 24)

typedef struct hearth_poller hearth_poller; /* each backend defines it */

typedef struct hearth_poller_event {
    uint64_t tag;
    unsigned events; /* HEARTH_EV_* */
} hearth_poller_event;

typedef struct hearth_poller_ops {
    const char *name; /* "epoll", "poll" */
    /* NULL on failure, err says why. */
    hearth_poller *(*create)(hearth_err *err);
    /* Frees the backend; registered fds are not closed. NULL is a no-op. */
    void (*destroy)(hearth_poller *p);
    /* fd must not be registered yet; events != 0. 0, or HEARTH_EIO (errno
     * set), HEARTH_ENOMEM, HEARTH_ELIMIT. */
    int (*add)(hearth_poller *p, int fd, unsigned events, uint64_t tag);
    /* fd must be registered; replaces its interest and tag. */
    int (*mod)(hearth_poller *p, int fd, unsigned events, uint64_t tag);
    /* fd must be registered. */
    int (*del)(hearth_poller *p, int fd);
    /* Waits up to timeout_ms (-1: forever, 0: just look) and fills out[0..max).
     * Returns the count (0 on timeout), HEARTH_EAGAIN when a signal
     * interrupted the wait (the caller retries), HEARTH_EIO on failure.
     * When more than max fds are ready, later calls reach the others first,
     * so no fd starves. */
    int (*wait)(hearth_poller *p, hearth_poller_event *out, int max, int timeout_ms);
} hearth_poller_ops;

/* NULL when the build-time probe found no <sys/epoll.h>. */
const hearth_poller_ops *hearth_poller_epoll_ops(void);
/* Always present. */
const hearth_poller_ops *hearth_poller_poll_ops(void);

/* For the loop's tests: like hearth_loop_new, but the cross-thread wake-up
 * uses a pipe even where eventfd exists, so the fallback path is exercised
 * on Linux too. Defined in loop.c. */
hearth_loop *hearth_loop_new_pipe_wake(enum hearth_poller_kind kind, hearth_err *err);

#endif
