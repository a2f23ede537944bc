/* poller_epoll.c: the epoll(7) backend, level-triggered.
 *
 * The tag rides in epoll_event.data.u64, so a wait hands back exactly what
 * the loop registered and needs no table here. Compiled to a stub that
 * returns NULL where <sys/epoll.h> is missing: the probe is the header's
 * presence at build time, not the name of the OS.
 *
 * Rejected: edge-triggered mode. It saves an epoll_ctl when interest does
 * not change, but every callback would then have to drain to EAGAIN or lose
 * the fd forever; level-triggered keeps the contract the same as poll(2),
 * so one set of tests covers both backends. */
#include "net/poller.h"

#if __has_include(<sys/epoll.h>)

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct hearth_poller {
    int epfd;
    struct epoll_event buf[256]; /* one wait's worth; the loop asks for at most this many */
};

static hearth_poller *ep_create(hearth_err *err)
{
    hearth_poller *p = calloc(1, sizeof *p);
    if (!p) {
        hearth_err_set(err, HEARTH_ENOMEM, "epoll: out of memory");
        return NULL;
    }
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (p->epfd < 0) {
        hearth_err_sys(err, errno, "epoll: epoll_create1");
        free(p);
        return NULL;
    }
    return p;
}

static void ep_destroy(hearth_poller *p)
{
    if (!p)
        return;
    close(p->epfd);
    free(p);
}

static int ep_ctl(hearth_poller *p, int op, int fd, unsigned events, uint64_t tag)
{
    struct epoll_event ev = {0};
    ev.events = ((events & HEARTH_EV_READ) ? EPOLLIN : 0u) | ((events & HEARTH_EV_WRITE) ? EPOLLOUT : 0u);
    ev.data.u64 = tag;
    return epoll_ctl(p->epfd, op, fd, &ev) == 0 ? HEARTH_OK : HEARTH_EIO;
}

static int ep_add(hearth_poller *p, int fd, unsigned events, uint64_t tag)
{
    return ep_ctl(p, EPOLL_CTL_ADD, fd, events, tag);
}

static int ep_mod(hearth_poller *p, int fd, unsigned events, uint64_t tag)
{
    return ep_ctl(p, EPOLL_CTL_MOD, fd, events, tag);
}

static int ep_del(hearth_poller *p, int fd)
{
    /* The event argument is ignored but must be non-NULL before Linux 2.6.9. */
    return ep_ctl(p, EPOLL_CTL_DEL, fd, 0, 0);
}

static int ep_wait(hearth_poller *p, hearth_poller_event *out, int max, int timeout_ms)
{
    int cap = (int)(sizeof p->buf / sizeof p->buf[0]);
    if (max > cap)
        max = cap;
    int n = epoll_wait(p->epfd, p->buf, max, timeout_ms);
    if (n < 0)
        return errno == EINTR ? HEARTH_EAGAIN : HEARTH_EIO;
    for (int i = 0; i < n; i++) {
        uint32_t e = p->buf[i].events;
        unsigned ev = 0;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLPRI))
            ev |= HEARTH_EV_READ;
        if (e & EPOLLOUT)
            ev |= HEARTH_EV_WRITE;
        if (e & (EPOLLERR | EPOLLHUP))
            ev |= HEARTH_EV_READ | HEARTH_EV_WRITE;
        out[i].tag = p->buf[i].data.u64;
        out[i].events = ev;
    }
    /* epoll_wait itself rotates through a ready list longer than max, so
     * fairness needs nothing more here. */
    return n;
}

static const hearth_poller_ops epoll_ops = {
    .name = "epoll",
    .create = ep_create,
    .destroy = ep_destroy,
    .add = ep_add,
    .mod = ep_mod,
    .del = ep_del,
    .wait = ep_wait,
};

const hearth_poller_ops *hearth_poller_epoll_ops(void) { return &epoll_ops; }

#else

const hearth_poller_ops *hearth_poller_epoll_ops(void) { return NULL; }

#endif
