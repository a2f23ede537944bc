/* workers.c: the supervisor: starts N worker processes, respawns one that
 * dies (saying so in the log) while the others keep serving, and on SIGTERM
 * asks every worker to drain and waits for them.
 *
 * Workers start by fork (cheap; they share the parent's mapped pages) or, with
 * --spawn, by fork + exec of the same binary with the same arguments, for
 * runtimes that cannot survive fork (CUDA, Core ML). A spawned worker finds
 * the listening socket, the shared statistics and the hand-off sockets as
 * inherited descriptors named in HEARTH_WORKER_FDS. The supervisor never
 * loads a model or touches a device: it holds the sockets and waits.
 *
 * Workers die with their supervisor: each asks the kernel for SIGTERM when
 * its parent dies (PR_SET_PDEATHSIG, kept across the exec of --spawn), so a
 * supervisor killed with SIGKILL does not leave orphans serving, and holding
 * the port, that a new `hearth serve` cannot bind; they drain as on a stop.
 * On a stop the supervisor closes its own copy of the listening socket at
 * once, so that the port is refused as soon as the workers let go of theirs.
 *
 * hearth_server_run is here, because it chooses between the process models:
 * a worker started by --spawn, a supervisor of workers, or one process.
 * Calls: server.c (hearth_server_listen, hearth_server_pinned and
 * hearth_serve_process: one serving process), loop.c; nothing in src/net
 * calls back into this file. Before, hearth_server_run in server.c called
 * the supervisor here, which called back server.c's worker entry: a circle.
 *
 * Rejected: respawning from a SIGCHLD handler (async-signal-safety makes it
 * fragile); the supervisor blocks its signals and takes them with sigwait.
 * Noticing the supervisor's death by a pipe that closes: one more descriptor
 * in every loop for what the kernel does in one call. */
#include "server_int.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENV_FDS "HEARTH_WORKER_FDS"

typedef struct worker {
    pid_t pid;
    struct timespec started;
    int quick_deaths; /* consecutive deaths within a second of starting */
} worker;

static void clear_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0)
        fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}

/* Child side of --spawn: exec the binary with the inherited descriptors listed in the environment. */
static void exec_worker(hearth_server *s, int index)
{
    char env[8192];
    int n = snprintf(env, sizeof env, "%d:%d:%d:%d:%d:", index, s->n_slots, s->port, s->listen_fd, s->shared_fd);
    clear_cloexec(s->listen_fd);
    clear_cloexec(s->shared_fd);
    for (int i = 0; i < 2 * s->n_slots && n < (int)sizeof env - 16; i++) {
        n += snprintf(env + n, sizeof env - (size_t)n, "%s%d", i ? "," : "", s->handoff_fd[i]);
        clear_cloexec(s->handoff_fd[i]);
    }
    setenv(ENV_FDS, env, 1);
    execv("/proc/self/exe", s->cfg.argv);
    HLOG_ERROR("--spawn: cannot exec /proc/self/exe: %s", strerror(errno));
    _exit(127);
}

/* In a process started by --spawn: adopts the inherited fds and returns the
 * worker index; HEARTH_ENOTFOUND in any other process; HEARTH_EINVAL when malformed. */
static int adopt(hearth_server *s, hearth_err *err)
{
    const char *env = getenv(ENV_FDS);
    if (!env)
        return HEARTH_ENOTFOUND;
    char *copy = strdup(env);
    unsetenv(ENV_FDS); /* not for this worker's own children */
    if (!copy)
        return hearth_err_set(err, HEARTH_EINVAL, "out of memory");
    int index, n_slots, port, lfd, sfd, used = 0;
    if (sscanf(copy, "%d:%d:%d:%d:%d:%n", &index, &n_slots, &port, &lfd, &sfd, &used) != 5 || n_slots < 1 ||
        n_slots > HEARTH_MAX_SLOTS || index < 0 || n_slots % s->cfg.threads != 0) {
        free(copy);
        return hearth_err_set(err, HEARTH_EINVAL, "%s is malformed (were --threads changed for a spawned worker?)", ENV_FDS);
    }
    s->n_slots = n_slots;
    s->port = port;
    s->listen_fd = lfd;
    s->shared_fd = sfd;
    s->handoff_fd = malloc(2 * (size_t)n_slots * sizeof *s->handoff_fd);
    char *p = copy + used;
    for (int i = 0; s->handoff_fd && i < 2 * n_slots; i++) {
        s->handoff_fd[i] = (int)strtol(p, &p, 10);
        if (*p == ',')
            p++;
    }
    free(copy);
    s->shared_size = sizeof(hearth_shared) + (size_t)n_slots * sizeof(hearth_slot_stats);
    void *m = mmap(NULL, s->shared_size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
    if (!s->handoff_fd || m == MAP_FAILED)
        return hearth_err_set(err, HEARTH_EINVAL, "spawned worker: cannot map the shared statistics");
    s->shared = m;
    return index;
}

/* The serving part of worker index, started by fork or --spawn. */
static int worker_main(hearth_server *s, int index)
{
    s->worker_index = index;
    char tag[16];
    snprintf(tag, sizeof tag, "w%d", index);
    hearth_log_set_tag(tag);
    /* the other slots' read ends belong to the other workers */
    for (int i = 0; i < s->n_slots; i++)
        if (i / s->cfg.threads != index && s->handoff_fd[2 * i] >= 0) {
            close(s->handoff_fd[2 * i]);
            s->handoff_fd[2 * i] = -1;
        }
    return hearth_serve_process(s);
}

static int start_worker(hearth_server *s, worker *w, int index)
{
    clock_gettime(CLOCK_MONOTONIC, &w->started);
    pid_t supervisor = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        HLOG_ERROR("cannot fork worker %d: %s", index, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* SIGTERM when the supervisor dies; if it died before this call, the
         * signal will never come, and the parent is already someone else */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != supervisor)
            _exit(1);
        /* SIGTERM and SIGINT stay blocked: one that comes while the worker
         * starts (a drain asked at once; an ASan worker's exec takes tens of
         * ms) waits for hearth_serve_process's sigwait, which drains, where
         * the default action killed the worker and the supervisor's own
         * drain ended with status 1 (seen in CI, 2026-12-06). SIGCHLD, which
         * the supervisor blocks too, is the worker's again. */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigprocmask(SIG_SETMASK, &stop, NULL);
        if (s->cfg.spawn)
            exec_worker(s, index);
        _exit(worker_main(s, index));
    }
    w->pid = pid;
    HLOG_INFO("worker %d started (pid %d%s)", index, (int)pid, s->cfg.spawn ? ", spawned" : "");
    return 0;
}

static void forget_slots(hearth_server *s, int index)
{
    for (int t = 0; t < s->cfg.threads; t++) {
        hearth_slot_stats *st = &s->shared->slot[index * s->cfg.threads + t];
        atomic_store(&st->alive, 0);
        atomic_store(&st->conns, 0);
        atomic_store(&st->inflight, 0);
    }
}

/* A stopping supervisor lets go of the listening socket at once (see the top). */
static void close_listener(hearth_server *s)
{
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        s->listen_fd = -1;
    }
}

static void describe(int status, char *out, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(out, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(out, n, "exited with status %d", WEXITSTATUS(status));
}

static int supervise(hearth_server *s)
{
    int n = s->cfg.workers;
    worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws)
        return 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    hearth_log_set_tag("sup");
    for (int i = 0; i < n; i++)
        start_worker(s, &ws[i], i);
    bool stopping = false;
    int live = 0, failed = 0;
    for (int i = 0; i < n; i++)
        live += ws[i].pid > 0;
    while (live > 0) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
            stopping = true;
            close_listener(s);
            HLOG_INFO("shutting down: asking %d worker%s to drain", live, live > 1 ? "s" : "");
            for (int i = 0; i < n; i++)
                if (ws[i].pid > 0)
                    kill(ws[i].pid, SIGTERM);
            continue;
        }
        if (sig != SIGCHLD)
            continue;
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            int i = 0;
            while (i < n && ws[i].pid != pid)
                i++;
            if (i == n)
                continue;
            ws[i].pid = 0;
            live--;
            forget_slots(s, i);
            char how[96];
            describe(status, how, sizeof how);
            if (stopping) {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    failed++;
                HLOG_INFO("worker %d (pid %d) %s", i, (int)pid, how);
                continue;
            }
            if (WIFEXITED(status) && WEXITSTATUS(status) == HEARTH_EXIT_CONFIG) {
                /* it could not load its models: every respawn would fail the same way */
                HLOG_ERROR("worker %d (pid %d) could not start (see its error above); stopping", i, (int)pid);
                failed++;
                stopping = true;
                close_listener(s);
                for (int k = 0; k < n; k++)
                    if (ws[k].pid > 0)
                        kill(ws[k].pid, SIGTERM);
                continue;
            }
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double lived = (double)(now.tv_sec - ws[i].started.tv_sec) + (double)(now.tv_nsec - ws[i].started.tv_nsec) / 1e9;
            ws[i].quick_deaths = lived < 1.0 ? ws[i].quick_deaths + 1 : 0;
            /* a worker that dies at start-up again and again is waited on longer each time */
            int delay_ms = ws[i].quick_deaths ? 100 << (ws[i].quick_deaths > 6 ? 6 : ws[i].quick_deaths) : 0;
            HLOG_WARN("worker %d (pid %d) %s; respawning%s", i, (int)pid, how, delay_ms ? " after a pause" : "");
            if (delay_ms) {
                struct timespec d = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
                nanosleep(&d, NULL);
            }
            if (start_worker(s, &ws[i], i) == 0)
                live++;
        }
    }
    free(ws);
    HLOG_INFO("stopped");
    return failed ? 1 : 0;
}

int hearth_server_run(hearth_server *s)
{
    hearth_err err = {0};
    int w = adopt(s, &err);
    if (w < 0 && w != HEARTH_ENOTFOUND) {
        HLOG_ERROR("%s", err.msg);
        return 1;
    }
    if (w >= 0)
        return worker_main(s, w); /* a worker started by --spawn */
    int workers = s->cfg.workers;
    s->n_slots = (workers > 0 ? workers : 1) * s->cfg.threads;
    if (hearth_server_listen(s, &err) != 0) {
        HLOG_ERROR("%s", err.msg);
        return 1;
    }
    HLOG_INFO("listening on http://%s%s%s:%d (%d worker%s x %d I/O thread%s, poller %s%s)",
              strchr(s->host, ':') ? "[" : "", s->host, strchr(s->host, ':') ? "]" : "", s->port, workers ? workers : 1,
              workers > 1 ? "s" : "", s->cfg.threads, s->cfg.threads > 1 ? "s" : "",
              s->cfg.poller == HEARTH_POLLER_POLL ? "poll" : hearth_loop_default_poller_name(),
              hearth_server_pinned(s) ? ", I/O threads pinned one per CPU" : "");
    if (workers > 0)
        return supervise(s);
    int rc = hearth_serve_process(s);
    HLOG_INFO("stopped");
    return rc;
}
