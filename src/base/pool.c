/* pool.c: the compute thread pool.
 *
 * How: the current job lives in one 64-bit word, (generation:16,
 * n_tasks:24, next:24), plus fn/ctx fields written before the word is
 * published. A thread claims task `next` by compare-and-swap on the whole
 * word, and only after a successful claim reads fn/ctx: the job cannot end
 * (and its fields cannot be rewritten) while a claimed task is unfinished,
 * so a thread that woke late, or slept through several jobs, can never run a
 * stale function or a task of the wrong job; at worst its CAS fails. The
 * caller takes tasks too and returns once `done` reaches n_tasks, without
 * waiting for idle or descheduled workers. Waiting spins (pause, then
 * sched_yield) for a while, because during a decode step the next job follows
 * within microseconds, then sleeps on a futex, so an idle server burns no CPU.
 * Sleepers are counted so the common case issues no wake-up system call.
 *
 * Rejected: a thread per job (tens of microseconds per creation, a hundred
 * jobs per token); mutex + condition variable per job (a system call per
 * wake-up even when the worker is awake and spinning); making the caller wait
 * until every worker has seen the job (one descheduled worker, e.g. with
 * other processes on the cores, then stalls every job by a time slice);
 * static task partitioning (same stall). Non-Linux systems get a short-sleep
 * poll in place of the futex. */
#include "pool.h"

#include "clock.h"
#include "hw.h"

#include <limits.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* How long a waiting thread stays awake before it sleeps: longer than the
 * gap between the small jobs of one decode step, short enough that an idle
 * pool stops burning its cores at once. */
#define SPIN_NS 200000u
#define SPIN_PAUSES 4096u
/* Tasks per round: n_tasks and next each have 24 bits of the job word. */
#define ROUND_MAX ((1 << 24) - 1)

#define WORD(gen, n, next) (((uint64_t)(gen) << 48) | ((uint64_t)(n) << 24) | (uint64_t)(next))
#define WORD_N(w) ((int64_t)(((w) >> 24) & 0xffffff))
#define WORD_NEXT(w) ((int64_t)((w) & 0xffffff))

struct hearth_pool {
    int n_threads; /* counting the caller */
    int n_started; /* worker threads actually running */
    pthread_t *threads;
    /* the current job: stable while any of its tasks is unfinished */
    hearth_pool_fn fn;
    void *ctx;
    int64_t base, total; /* this round's tasks are base + [0, n) of total */
    _Atomic uint64_t word;
    _Atomic uint32_t wake;       /* futex word the workers wait on: bumped per job */
    _Atomic uint32_t done;       /* tasks finished in this round; the caller's futex word */
    _Atomic int sleepers;        /* workers asleep (or about to be) on wake */
    _Atomic int caller_sleeping;
    _Atomic int nice;            /* the niceness threads take while they run this pool's work (0) */
    _Atomic int busy;            /* a job is running: later calls go serial */
    _Atomic int stop;
    uint16_t gen;
};

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)word;
    (void)expected;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
#endif
}

static void futex_wake_all(_Atomic uint32_t *word)
{
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* Waits, awake, until *word != seen or the spin budget is spent; true if it
 * changed. Pauses first; then yields, so that when there are more runnable
 * threads than cores the thread being waited for gets a core. */
static bool spin_until_changed(_Atomic uint32_t *word, uint32_t seen)
{
    uint64_t start = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return true;
        if (i < SPIN_PAUSES) {
            hearth_hw_pause();
            if (i & 255)
                continue;
        } else {
            sched_yield();
        }
        uint64_t now = hearth_now_ns();
        if (!start)
            start = now;
        else if (now - start > SPIN_NS)
            return false;
    }
}

/* Claims and runs tasks of whatever job is current until none is left. */
static void run_tasks(hearth_pool *p)
{
    uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
    for (;;) {
        int64_t i = WORD_NEXT(w), n = WORD_N(w);
        if (i >= n)
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->word, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->ctx, p->base + i, p->total);
        if ((int64_t)atomic_fetch_add(&p->done, 1) + 1 == n && atomic_load(&p->caller_sleeping))
            futex_wake_all(&p->done);
        w = atomic_load_explicit(&p->word, memory_order_acquire);
    }
}

/* Reading `seen` before checking stop and claiming tasks means any publish
 * after that read is either handled by this pass or ends the wait below, so
 * no job (and no stop) can be missed, however late the thread first runs. */
/* The niceness this thread has set for itself (per thread on Linux). */
static __thread int thread_nice;

/* Takes the pool's niceness for the calling thread. Lowering priority is
 * always allowed; raising it back may not be (RLIMIT_NICE), and a failure
 * leaves the thread as it was: this is a preference, never an error. */
static void take_nice(const hearth_pool *p)
{
    int n = atomic_load_explicit(&((hearth_pool *)p)->nice, memory_order_relaxed);
    if (n == thread_nice)
        return;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), n) == 0)
        thread_nice = n;
}

void hearth_pool_set_nice(hearth_pool *p, int nice)
{
    if (p)
        atomic_store(&p->nice, nice);
}

static void *worker_main(void *arg)
{
    hearth_pool *p = arg;
    for (;;) {
        take_nice(p);
        uint32_t seen = atomic_load(&p->wake);
        if (atomic_load(&p->stop))
            return NULL;
        run_tasks(p);
        if (!spin_until_changed(&p->wake, seen)) {
            /* Dekker with publish(): count ourselves asleep, then re-check
             * inside the futex call; publish bumps wake, then reads sleepers. */
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->wake) == seen)
                futex_wait(&p->wake, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
    }
}

static void publish(hearth_pool *p)
{
    atomic_fetch_add(&p->wake, 1); /* seq_cst: ordered before the sleepers read */
    if (atomic_load(&p->sleepers) > 0)
        futex_wake_all(&p->wake);
}

hearth_pool *hearth_pool_new(int n_threads)
{
    if (n_threads <= 0)
        n_threads = hearth_hw()->physical_cores;
    if (n_threads < 1)
        n_threads = 1;
    hearth_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = n_threads;
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads)
            goto fail;
    }
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0)
            goto fail;
        p->n_started++;
    }
    return p;
fail:
    hearth_pool_free(p);
    return NULL;
}

void hearth_pool_free(hearth_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    publish(p);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p);
}

int hearth_pool_size(const hearth_pool *p)
{
    return p ? p->n_threads : 1;
}

void hearth_pool_run(hearth_pool *p, hearth_pool_fn fn, void *ctx, int64_t n_tasks)
{
    if (n_tasks <= 0)
        return;
    if (p)
        take_nice(p);
    /* one task gains nothing from waking the workers */
    if (!p || p->n_started == 0 || n_tasks == 1 || atomic_exchange(&p->busy, 1)) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, n_tasks);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->total = n_tasks;
    for (int64_t base = 0; base < n_tasks; base += ROUND_MAX) {
        int64_t n = n_tasks - base < ROUND_MAX ? n_tasks - base : ROUND_MAX;
        p->base = base;
        atomic_store_explicit(&p->done, 0, memory_order_relaxed);
        atomic_store_explicit(&p->word, WORD(++p->gen, n, 0), memory_order_release);
        publish(p);
        run_tasks(p);
        for (uint32_t d; (d = atomic_load(&p->done)) != (uint32_t)n;) {
            if (spin_until_changed(&p->done, d))
                continue;
            atomic_store(&p->caller_sleeping, 1);
            if (atomic_load(&p->done) == d)
                futex_wait(&p->done, d);
            atomic_store(&p->caller_sleeping, 0);
        }
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}
