/* Unit tests for src/base/pool.c: every task of every job runs exactly once,
 * over many tiny jobs, with more threads than cores, with two threads
 * submitting to one pool at once, and with a job that submits from inside a
 * task. */
#include "harness.h"

#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>

enum { MAX_TASKS = 64 };

typedef struct count_job {
    _Atomic int hits[MAX_TASKS];
    _Atomic int wrong_n;
    int64_t n;
} count_job;

static void count_task(void *ctx, int64_t t, int64_t n)
{
    count_job *j = ctx;
    if (n != j->n || t < 0 || t >= n)
        atomic_fetch_add(&j->wrong_n, 1);
    else
        atomic_fetch_add(&j->hits[t], 1);
}

/* runs `jobs` jobs of 1..64 tasks; returns how many tasks ran != once */
static int run_jobs(hearth_pool *p, int jobs, unsigned seed)
{
    int bad = 0;
    for (int i = 0; i < jobs; i++) {
        count_job j = {.n = 1 + (seed = seed * 1103515245u + 12345u) % MAX_TASKS};
        hearth_pool_run(p, count_task, &j, j.n);
        for (int64_t t = 0; t < j.n; t++)
            bad += atomic_load(&j.hits[t]) != 1;
        bad += atomic_load(&j.wrong_n);
    }
    return bad;
}

static void every_task_once_10000_jobs(void)
{
    /* 4 threads oversubscribe this 2-core machine: fewer jobs, same check */
    int sizes[] = {1, 2, 3, 4}, jobs[] = {10000, 10000, 2000, 2000};
    for (int s = 0; s < 4; s++) {
        hearth_pool *p = hearth_pool_new(sizes[s]);
        CHECK(p != NULL);
        CHECK_EQ_INT(hearth_pool_size(p), sizes[s]);
        CHECK_EQ_INT(run_jobs(p, jobs[s], 7u + (unsigned)s), 0);
        hearth_pool_free(p);
    }
}

typedef struct busy_job {
    _Atomic int hits[16];
    _Atomic uint64_t threads[4];
} busy_job;

/* ~5 us of work, so workers are awake and take a share */
static void busy_task(void *ctx, int64_t t, int64_t n)
{
    busy_job *j = ctx;
    uint64_t self = (uint64_t)pthread_self();
    for (int i = 0; i < 4; i++) {
        uint64_t seen = 0;
        if (atomic_compare_exchange_strong(&j->threads[i], &seen, self) || seen == self)
            break;
    }
    volatile double x = 1;
    for (int i = 0; i < 2000; i++)
        x = x * 1.0000001 + 1e-9;
    atomic_fetch_add(&j->hits[t], 1);
}

static void workers_share_longer_tasks(void)
{
    hearth_pool *p = hearth_pool_new(2);
    int bad = 0, shared = 0;
    for (int rep = 0; rep < 300; rep++) {
        busy_job j = {0};
        hearth_pool_run(p, busy_task, &j, 16);
        for (int t = 0; t < 16; t++)
            bad += atomic_load(&j.hits[t]) != 1;
        shared += atomic_load(&j.threads[1]) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_MSG(shared > 0, "the worker never ran a task in 300 jobs");
    hearth_pool_free(p);
}

static void null_pool_runs_serially(void)
{
    CHECK_EQ_INT(hearth_pool_size(NULL), 1);
    CHECK_EQ_INT(run_jobs(NULL, 100, 3), 0);
    hearth_pool_run(NULL, count_task, NULL, 0); /* no tasks: fn never called */
    hearth_pool_free(NULL);
}

typedef struct submitter {
    hearth_pool *p;
    int bad;
    unsigned seed;
} submitter;

static void *submit_main(void *arg)
{
    submitter *s = arg;
    s->bad = run_jobs(s->p, 5000, s->seed);
    return NULL;
}

static void two_submitters_share_a_pool(void)
{
    hearth_pool *p = hearth_pool_new(2);
    submitter a = {p, -1, 11}, b = {p, -1, 13};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, submit_main, &a) == 0);
    CHECK(pthread_create(&tb, NULL, submit_main, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(a.bad, 0);
    CHECK_EQ_INT(b.bad, 0);
    hearth_pool_free(p);
}

typedef struct nested_job {
    hearth_pool *p;
    _Atomic int inner_bad;
    _Atomic int outer_hits;
} nested_job;

static void nested_task(void *ctx, int64_t t, int64_t n)
{
    nested_job *j = ctx;
    atomic_fetch_add(&j->outer_hits, 1);
    atomic_fetch_add(&j->inner_bad, run_jobs(j->p, 3, (unsigned)t));
}

static void submit_from_inside_a_task(void)
{
    hearth_pool *p = hearth_pool_new(2);
    nested_job j = {.p = p};
    hearth_pool_run(p, nested_task, &j, 8);
    CHECK_EQ_INT(atomic_load(&j.outer_hits), 8);
    CHECK_EQ_INT(atomic_load(&j.inner_bad), 0);
    hearth_pool_free(p);
}

int main(void)
{
    RUN(every_task_once_10000_jobs);
    RUN(workers_share_longer_tasks);
    RUN(null_pool_runs_serially);
    RUN(two_submitters_share_a_pool);
    RUN(submit_from_inside_a_task);
    TEST_EXIT();
}
