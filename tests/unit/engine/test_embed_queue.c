/* Unit tests for engine/embed_queue: batching by token budget, results routed
 * back to the right job and position, cancellation, the queue bound. The
 * model is a fake whose vector for a sequence is a function of its ids. */
#include "harness.h"

#include "engine/embed_queue.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define DIM 4

static _Atomic int g_max_batch_tokens_seen;
static _Atomic int g_batches;
static _Atomic int g_slow_ms;

/* vector of a sequence: (sum of ids, len, first id, 1) */
static int fake_compute(void *model, int n, const int32_t *const *ids, const int32_t *lens, float *out, hearth_err *err)
{
    (void)model;
    int tokens = 0;
    for (int i = 0; i < n; i++) {
        float sum = 0;
        for (int k = 0; k < lens[i]; k++)
            sum += (float)ids[i][k];
        out[i * DIM + 0] = sum;
        out[i * DIM + 1] = (float)lens[i];
        out[i * DIM + 2] = (float)ids[i][0];
        out[i * DIM + 3] = 1;
        tokens += lens[i];
    }
    int prev = atomic_load(&g_max_batch_tokens_seen);
    while (tokens > prev && !atomic_compare_exchange_weak(&g_max_batch_tokens_seen, &prev, tokens))
        ;
    atomic_fetch_add(&g_batches, 1);
    int ms = atomic_load(&g_slow_ms);
    if (ms) {
        struct timespec d = {0, ms * 1000000L};
        nanosleep(&d, NULL);
    }
    return 0;
}

typedef struct tjob {
    hearth_embed_job job;
    int32_t *seqs[8];
    int32_t lens[8];
    const int32_t *ptrs[8];
    float out[8 * DIM];
    _Atomic int done;
    int status;
} tjob;

static void on_done(hearth_embed_job *job, int status, const char *msg)
{
    tjob *t = job->user;
    t->status = status;
    atomic_store(&t->done, 1);
}

static void make_job(tjob *t, int n, int base, int len, bool normalize)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++) {
        t->seqs[i] = malloc((size_t)len * sizeof(int32_t));
        for (int k = 0; k < len; k++)
            t->seqs[i][k] = base + i * 100 + k;
        t->lens[i] = len;
        t->ptrs[i] = t->seqs[i];
    }
    t->job.n = n;
    t->job.ids = t->ptrs;
    t->job.lens = t->lens;
    t->job.normalize = normalize;
    t->job.out = t->out;
    t->job.done = on_done;
    t->job.user = t;
}

static void free_job(tjob *t)
{
    for (int i = 0; i < t->job.n; i++)
        free(t->seqs[i]);
}

static void wait_done(tjob *t)
{
    for (int i = 0; i < 5000 && !atomic_load(&t->done); i++)
        usleep(1000);
}

static void check_vectors(tjob *t, int base, int len)
{
    for (int i = 0; i < t->job.n; i++) {
        float sum = 0;
        for (int k = 0; k < len; k++)
            sum += (float)(base + i * 100 + k);
        CHECK_NEAR(t->out[i * DIM + 0], sum, 0);
        CHECK_NEAR(t->out[i * DIM + 1], len, 0);
        CHECK_NEAR(t->out[i * DIM + 2], base + i * 100, 0);
    }
}

static void results_reach_the_right_job(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 64, 100, NULL);
    CHECK(q != NULL);
    atomic_store(&g_slow_ms, 5); /* let jobs pile up so they batch */
    atomic_store(&g_max_batch_tokens_seen, 0);
    atomic_store(&g_batches, 0);
    tjob jobs[20];
    for (int j = 0; j < 20; j++) {
        make_job(&jobs[j], 1 + j % 8, j * 1000, 3 + j % 5, false);
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &jobs[j].job), HEARTH_OK);
    }
    for (int j = 0; j < 20; j++) {
        wait_done(&jobs[j]);
        CHECK(atomic_load(&jobs[j].done));
        CHECK_EQ_INT(jobs[j].status, 0);
        check_vectors(&jobs[j], j * 1000, 3 + j % 5);
        free_job(&jobs[j]);
    }
    CHECK(atomic_load(&g_max_batch_tokens_seen) <= 64);      /* the token budget holds */
    CHECK(atomic_load(&g_batches) < 20 * 4);                  /* and sequences were batched together */
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.jobs_done, 20);
    CHECK_EQ_INT(st.queued_jobs, 0);
    hearth_embed_queue_free(q);
}

static void a_sequence_over_the_budget_still_runs_alone(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 8, 10, NULL);
    atomic_store(&g_slow_ms, 0);
    tjob t;
    make_job(&t, 2, 7, 20, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &t.job), HEARTH_OK);
    wait_done(&t);
    CHECK_EQ_INT(t.status, 0);
    check_vectors(&t, 7, 20);
    free_job(&t);
    hearth_embed_queue_free(q);
}

static void normalize_is_per_job(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 1000, 10, NULL);
    tjob a, b;
    make_job(&a, 1, 5, 3, true);
    make_job(&b, 1, 5, 3, false);
    hearth_embed_queue_submit(q, &a.job);
    hearth_embed_queue_submit(q, &b.job);
    wait_done(&a);
    wait_done(&b);
    double n2 = 0;
    for (int d = 0; d < DIM; d++)
        n2 += (double)a.out[d] * a.out[d];
    CHECK_NEAR(n2, 1.0, 1e-6);
    CHECK_NEAR(a.out[0] / a.out[3], b.out[0] / b.out[3], 1e-4); /* same direction */
    CHECK_NEAR(b.out[1], 3, 0);
    free_job(&a);
    free_job(&b);
    hearth_embed_queue_free(q);
}

static void queue_bound_and_cancel(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 4, 3, NULL);
    atomic_store(&g_slow_ms, 30);
    tjob jobs[5];
    int accepted = 0, refused = 0;
    for (int j = 0; j < 5; j++) {
        make_job(&jobs[j], 4, j, 4, false);
        int rc = hearth_embed_queue_submit(q, &jobs[j].job);
        if (rc == HEARTH_OK)
            accepted++;
        else if (rc == HEARTH_ELIMIT)
            refused++;
    }
    CHECK(accepted == 3 && refused == 2);
    atomic_store(&jobs[2].job.cancelled, 1); /* still queued behind the others */
    for (int j = 0; j < 3; j++)
        wait_done(&jobs[j]);
    CHECK_EQ_INT(jobs[0].status, 0);
    CHECK_EQ_INT(jobs[1].status, 0);
    CHECK_EQ_INT(jobs[2].status, HEARTH_ENOTFOUND);
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.jobs_cancelled, 1);
    for (int j = 0; j < 5; j++)
        free_job(&jobs[j]);
    atomic_store(&g_slow_ms, 0);
    hearth_embed_queue_free(q);
}

typedef struct producer {
    hearth_embed_queue *q;
    int id;
    int ok;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (int r = 0; r < 50; r++) {
        tjob t;
        make_job(&t, 1 + r % 3, p->id * 100000 + r * 1000, 2 + r % 4, false);
        while (hearth_embed_queue_submit(p->q, &t.job) == HEARTH_ELIMIT)
            usleep(100);
        wait_done(&t);
        if (t.status == 0) {
            int before = hearth_test_case_failed;
            check_vectors(&t, p->id * 100000 + r * 1000, 2 + r % 4);
            p->ok += hearth_test_case_failed == before;
        }
        free_job(&t);
    }
    return NULL;
}

static void concurrent_submitters(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 32, 8, NULL);
    pthread_t th[4];
    producer p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (producer){q, i, 0};
        pthread_create(&th[i], NULL, produce, &p[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(p[i].ok, 50);
    }
    hearth_embed_queue_free(q);
}

int main(void)
{
    RUN(results_reach_the_right_job);
    RUN(a_sequence_over_the_budget_still_runs_alone);
    RUN(normalize_is_per_job);
    RUN(queue_bound_and_cancel);
    RUN(concurrent_submitters);
    TEST_EXIT();
}
