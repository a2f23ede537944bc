/* pool.c: the compute thread pool.
 *
 * How: a job is published by writing (fn, ctx, n_tasks), resetting the task
 * counter and bumping a generation number; workers wait for the generation to
 * change, take task indices from an atomic counter until it passes n_tasks,
 * and check out. The caller takes tasks too and returns once every worker has
 * checked out, which is what makes the next job's reset safe (no worker can
 * still be reading the old job). Waiting spins for a while first, because
 * during a decode step the next job follows within microseconds, then sleeps
 * on a futex so an idle server burns no CPU. Sleepers are counted so the
 * common case (workers still spinning) issues no wake-up system call.
 *
 * Rejected: a thread per job (tens of microseconds per creation, a hundred
 * jobs per token); a mutex + condition variable per job (a wake-up costs a
 * system call even when the worker is already awake and spinning); static
 * task partitioning (a thread descheduled by the OS would stall the job; the
 * atomic counter lets the others take its share). Non-Linux systems get a
 * short-sleep poll in place of the futex. */
#include "pool.h"

#include "clock.h"
#include "cpu.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* How long a waiting thread spins before it sleeps: longer than the gap
 * between the small jobs of one decode step, short enough that an idle pool
 * stops burning its cores at once. */
#define SPIN_NS 200000u

struct hearth_pool {
    int n_threads; /* counting the caller */
    int n_started; /* worker threads actually running */
    pthread_t *threads;
    /* the current job; written by the caller before gen is bumped */
    hearth_pool_fn fn;
    void *ctx;
    int64_t n_tasks;
    _Atomic int64_t next;
    _Atomic uint32_t gen;         /* futex word the workers wait on */
    _Atomic uint32_t done_word;   /* futex word the caller waits on */
    _Atomic int checked_out;      /* workers finished with the current job */
    _Atomic int sleepers;         /* workers asleep (or about to be) on gen */
    _Atomic int caller_sleeping;
    _Atomic int busy;             /* a job is running: later calls go serial */
    _Atomic int stop;
};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

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

/* Spins until *word != seen or the spin budget is spent; true if it changed. */
static bool spin_until_changed(_Atomic uint32_t *word, uint32_t seen)
{
    uint64_t start = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return true;
        cpu_relax();
        if ((i & 255) == 0) {
            uint64_t now = hearth_now_ns();
            if (!start)
                start = now;
            else if (now - start > SPIN_NS)
                return false;
        }
    }
}

static void run_tasks(hearth_pool *p)
{
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks)
            return;
        p->fn(p->ctx, t, p->n_tasks);
    }
}

static void *worker_main(void *arg)
{
    hearth_pool *p = arg;
    uint32_t seen = 0;
    for (;;) {
        if (!spin_until_changed(&p->gen, seen)) {
            /* Dekker with the caller: count ourselves asleep, then re-check gen
             * inside the futex call; the caller bumps gen, then reads sleepers. */
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen)
                futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (atomic_load(&p->stop))
            return NULL;
        run_tasks(p);
        if (atomic_fetch_add(&p->checked_out, 1) + 1 == p->n_started) {
            atomic_fetch_add(&p->done_word, 1);
            if (atomic_load(&p->caller_sleeping))
                futex_wake_all(&p->done_word);
        }
    }
}

static void publish(hearth_pool *p)
{
    atomic_fetch_add(&p->gen, 1); /* seq_cst: ordered before the sleepers read */
    if (atomic_load(&p->sleepers) > 0)
        futex_wake_all(&p->gen);
}

hearth_pool *hearth_pool_new(int n_threads)
{
    if (n_threads <= 0)
        n_threads = hearth_cpu()->physical_cores;
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

static void run_serial(hearth_pool_fn fn, void *ctx, int64_t n_tasks)
{
    for (int64_t t = 0; t < n_tasks; t++)
        fn(ctx, t, n_tasks);
}

void hearth_pool_run(hearth_pool *p, hearth_pool_fn fn, void *ctx, int64_t n_tasks)
{
    if (n_tasks <= 0)
        return;
    /* one task gains nothing from waking the workers */
    if (!p || p->n_started == 0 || n_tasks == 1 || atomic_exchange(&p->busy, 1)) {
        run_serial(fn, ctx, n_tasks);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->checked_out, 0, memory_order_relaxed);
    uint32_t done0 = atomic_load(&p->done_word);
    publish(p);
    run_tasks(p);
    if (!spin_until_changed(&p->done_word, done0)) {
        atomic_store(&p->caller_sleeping, 1);
        while (atomic_load(&p->done_word) == done0)
            futex_wait(&p->done_word, done0);
        atomic_store(&p->caller_sleeping, 0);
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}
