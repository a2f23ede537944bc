/* poller_poll.c: the portable poll(2) backend.
 *
 * A dense pollfd array handed to poll() as is, a parallel array of tags, and
 * a table from fd to its slot so that mod and del are O(1): del moves the
 * last slot into the hole. A wait scans the array once after poll() returns
 * (O(n) per wait is poll's nature; epoll exists for that) and starts each
 * scan where the last full one stopped, so that with more ready fds than the
 * caller's array holds the fds at the end of the array are not starved.
 *
 * All three arrays grow by doubling up to HEARTH_POLLER_MAX_FD entries.
 * Rejected: select(2), whose FD_SETSIZE (1024) is far below the 10,000
 * connections a loop must hold; and a hash from fd to slot, which costs
 * more than a flat table when fds are small dense integers, as they are. */
#include "net/poller.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#define NO_SLOT UINT32_MAX

struct hearth_poller {
    struct pollfd *pfd; /* (n) handed to poll() */
    uint64_t *tag;      /* (n) tag[i] belongs to pfd[i] */
    size_t n, cap;
    uint32_t *slot_of;  /* (fd_cap) index into pfd, NO_SLOT when not registered */
    size_t fd_cap;
    size_t cursor;      /* where the next scan starts */
};

static hearth_poller *pl_create(hearth_err *err)
{
    hearth_poller *p = calloc(1, sizeof *p);
    if (!p)
        hearth_err_set(err, HEARTH_ENOMEM, "poll: out of memory");
    return p;
}

static void pl_destroy(hearth_poller *p)
{
    if (!p)
        return;
    free(p->pfd);
    free(p->tag);
    free(p->slot_of);
    free(p);
}

static short to_poll(unsigned events)
{
    return (short)(((events & HEARTH_EV_READ) ? POLLIN : 0) | ((events & HEARTH_EV_WRITE) ? POLLOUT : 0));
}

static int grow_fd_table(hearth_poller *p, int fd)
{
    size_t need = (size_t)fd + 1;
    if (need <= p->fd_cap)
        return HEARTH_OK;
    size_t cap = p->fd_cap ? p->fd_cap : 64;
    while (cap < need)
        cap *= 2;
    if (cap > HEARTH_POLLER_MAX_FD)
        cap = HEARTH_POLLER_MAX_FD;
    uint32_t *s = realloc(p->slot_of, cap * sizeof *s);
    if (!s)
        return HEARTH_ENOMEM;
    for (size_t i = p->fd_cap; i < cap; i++)
        s[i] = NO_SLOT;
    p->slot_of = s;
    p->fd_cap = cap;
    return HEARTH_OK;
}

static int grow_slots(hearth_poller *p)
{
    if (p->n < p->cap)
        return HEARTH_OK;
    size_t cap = p->cap ? p->cap * 2 : 64;
    if (cap > HEARTH_POLLER_MAX_FD)
        cap = HEARTH_POLLER_MAX_FD;
    if (cap <= p->n)
        return HEARTH_ELIMIT;
    struct pollfd *pfd = realloc(p->pfd, cap * sizeof *pfd);
    if (!pfd)
        return HEARTH_ENOMEM;
    p->pfd = pfd;
    uint64_t *tag = realloc(p->tag, cap * sizeof *tag);
    if (!tag)
        return HEARTH_ENOMEM; /* pfd's larger block is kept; cap stays, so nothing is lost */
    p->tag = tag;
    p->cap = cap;
    return HEARTH_OK;
}

static int pl_add(hearth_poller *p, int fd, unsigned events, uint64_t tag)
{
    if (fd < 0 || fd >= HEARTH_POLLER_MAX_FD)
        return HEARTH_ELIMIT;
    int rc = grow_fd_table(p, fd);
    if (rc == HEARTH_OK)
        rc = grow_slots(p);
    if (rc != HEARTH_OK)
        return rc;
    if (p->slot_of[fd] != NO_SLOT) {
        errno = EEXIST;
        return HEARTH_EIO;
    }
    size_t i = p->n++;
    p->pfd[i] = (struct pollfd){.fd = fd, .events = to_poll(events), .revents = 0};
    p->tag[i] = tag;
    p->slot_of[fd] = (uint32_t)i;
    return HEARTH_OK;
}

static uint32_t slot(const hearth_poller *p, int fd)
{
    if (fd < 0 || (size_t)fd >= p->fd_cap)
        return NO_SLOT;
    return p->slot_of[fd];
}

static int pl_mod(hearth_poller *p, int fd, unsigned events, uint64_t tag)
{
    uint32_t i = slot(p, fd);
    if (i == NO_SLOT) {
        errno = ENOENT;
        return HEARTH_EIO;
    }
    p->pfd[i].events = to_poll(events);
    p->tag[i] = tag;
    return HEARTH_OK;
}

static int pl_del(hearth_poller *p, int fd)
{
    uint32_t i = slot(p, fd);
    if (i == NO_SLOT) {
        errno = ENOENT;
        return HEARTH_EIO;
    }
    size_t last = --p->n;
    if (i != last) {
        p->pfd[i] = p->pfd[last];
        p->tag[i] = p->tag[last];
        p->slot_of[p->pfd[i].fd] = i;
    }
    p->slot_of[fd] = NO_SLOT;
    return HEARTH_OK;
}

static int pl_wait(hearth_poller *p, hearth_poller_event *out, int max, int timeout_ms)
{
    int ready = poll(p->pfd, (nfds_t)p->n, timeout_ms);
    if (ready < 0)
        return errno == EINTR ? HEARTH_EAGAIN : HEARTH_EIO;
    if (ready == 0 || p->n == 0)
        return 0;
    size_t i = p->cursor < p->n ? p->cursor : 0;
    int got = 0, seen = 0;
    for (size_t k = 0; k < p->n && seen < ready && got < max; k++, i = (i + 1 == p->n) ? 0 : i + 1) {
        short re = p->pfd[i].revents;
        if (!re)
            continue;
        seen++;
        unsigned ev = 0;
        if (re & (POLLIN | POLLPRI))
            ev |= HEARTH_EV_READ;
        if (re & POLLOUT)
            ev |= HEARTH_EV_WRITE;
        /* A closed-but-registered fd (POLLNVAL) is the caller's bug; report
         * it rather than hide it, as epoll would report EPOLLERR. */
        if (re & (POLLERR | POLLHUP | POLLNVAL))
            ev |= HEARTH_EV_READ | HEARTH_EV_WRITE;
        out[got].tag = p->tag[i];
        out[got].events = ev;
        got++;
    }
    p->cursor = i;
    return got;
}

static const hearth_poller_ops poll_ops = {
    .name = "poll",
    .create = pl_create,
    .destroy = pl_destroy,
    .add = pl_add,
    .mod = pl_mod,
    .del = pl_del,
    .wait = pl_wait,
};

const hearth_poller_ops *hearth_poller_poll_ops(void) { return &poll_ops; }
