/* pool.h: a persistent pool of compute threads.
 *
 * Threads are created once by hearth_pool_new and then woken per job, so the
 * ~100 small jobs of one decode step cost microseconds each rather than a
 * thread creation. A job is fn(ctx, task, n_tasks) called once for every task
 * index in [0, n_tasks); the calling thread takes tasks too, so a pool of
 * size n has n - 1 worker threads. Tasks are handed out dynamically (an
 * atomic counter), so their order and the thread that runs each are
 * unspecified; the job is complete, with all its writes visible to the
 * caller, when hearth_pool_run returns. */
#ifndef HEARTH_BASE_POOL_H
#define HEARTH_BASE_POOL_H

#include <stdint.h>

typedef struct hearth_pool hearth_pool;

/* One task of a job. ctx is the pointer passed to hearth_pool_run. */
typedef void (*hearth_pool_fn)(void *ctx, int64_t task, int64_t n_tasks);

/* A pool of n_threads threads counting the caller (0 = one per physical core
 * from hearth_hw()). NULL when a thread or the memory cannot be had; a NULL
 * pool is still valid for the other calls and runs everything on the caller. */
hearth_pool *hearth_pool_new(int n_threads);

/* Stops and joins the workers. NULL is a no-op. Not while a job runs. */
void hearth_pool_free(hearth_pool *pool);

/* Threads that run tasks, the caller included (1 for a NULL pool). */
int hearth_pool_size(const hearth_pool *pool);

/* Runs fn over n_tasks tasks and returns when every one has finished.
 *
 * One job at a time per pool: the pool is not re-entrant. A call made while
 * another job is running on the pool (from another thread, or from inside a
 * task) does not wait or deadlock: it runs its tasks serially on its own
 * thread. n_tasks <= 0 does nothing. */
void hearth_pool_run(hearth_pool *pool, hearth_pool_fn fn, void *ctx, int64_t n_tasks);

/* The niceness (setpriority) every thread takes while it runs this pool's
 * work, its workers and callers alike: batch work (embeddings, generation)
 * is niced while frames with deadlines are served, so the OS runs a frame's
 * threads first on a busy machine. 0 by default; taken at a thread's next
 * job. A thread that cannot go back to a lower value (RLIMIT_NICE) stays as
 * it is. */
void hearth_pool_set_nice(hearth_pool *pool, int nice);

#endif
