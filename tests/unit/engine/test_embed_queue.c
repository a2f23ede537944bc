/* Unit tests for engine/embed_queue: batching by token budget, results routed
 * back to the right job and position, cancellation, the queue bound, passes
 * given up and started over with more work. The
 * model is a fake whose vector for a sequence is a function of its ids. */
#include "harness.h"

#include "engine/embed_queue.h"

#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define DIM 4

static _Atomic int g_max_batch_tokens_seen;
static _Atomic int g_batches;   /* passes completed */
static _Atomic int g_slow_ms;
/* A pass has FAKE_STEPS steps with the scheduler's restart check between
 * them. With g_gate_step set, a pass waits before that checkpoint until
 * the test opens the gate (g_in_gate says it is waiting). */
#define FAKE_STEPS 6
static _Atomic int g_gate_step, g_in_gate, g_open, g_pass_tokens, g_gate_entries;

static void gate(int step)
{
    if (step != atomic_load(&g_gate_step))
        return;
    atomic_fetch_add(&g_gate_entries, 1);
    atomic_store(&g_in_gate, 1);
    for (int i = 0; i < 5000 && !atomic_load(&g_open); i++)
        usleep(1000);
    atomic_store(&g_open, 0);
    atomic_store(&g_in_gate, 0);
}

static int fake_pass(int n, const int32_t *const *ids, const int32_t *lens, const bool *all_tokens, float *out,
                     const hearth_embed_restart *restart);

/* Lanes: the fake model of lane i is &g_lane_ids[i]; passes record
 * who ran them, how many ran at once and their sizes. */
#define MAX_PASSES 256
#define FAIL_ID 666
static int g_lane_ids[4] = {0, 1, 2, 3};
static _Atomic int g_running, g_max_running, g_n_passes;
static _Atomic int g_pass_lane[MAX_PASSES], g_pass_seqs[MAX_PASSES];

/* vector of a sequence: (sum of ids, len, first id, 1); of its token k when
 * all tokens are asked for: (id, k, first id, 2) */
static int fake_compute(void *model, int n, const int32_t *const *ids, const int32_t *lens, const bool *all_tokens,
                        float *out, const hearth_embed_restart *restart, hearth_err *err)
{
    int running = atomic_fetch_add(&g_running, 1) + 1, seen = atomic_load(&g_max_running);
    while (running > seen && !atomic_compare_exchange_weak(&g_max_running, &seen, running))
        ;
    int pass = atomic_fetch_add(&g_n_passes, 1);
    if (pass < MAX_PASSES) {
        atomic_store(&g_pass_lane[pass], model ? *(const int *)model : -1);
        atomic_store(&g_pass_seqs[pass], n);
    }
    int rc = HEARTH_OK;
    for (int i = 0; i < n; i++)
        if (ids[i][0] == FAIL_ID) /* a pass holding this sequence fails, in half a pass's time */
            rc = hearth_err_set(err, HEARTH_EIO, "fake failure");
    if (rc == HEARTH_OK) {
        rc = fake_pass(n, ids, lens, all_tokens, out, restart);
    } else if (atomic_load(&g_slow_ms)) {
        struct timespec d = {0, atomic_load(&g_slow_ms) * 500000L};
        nanosleep(&d, NULL);
    }
    atomic_fetch_sub(&g_running, 1);
    return rc;
}

static int fake_pass(int n, const int32_t *const *ids, const int32_t *lens, const bool *all_tokens, float *out,
                     const hearth_embed_restart *restart)
{
    int tokens = 0;
    for (int i = 0; i < n; i++)
        tokens += lens[i];
    atomic_store(&g_pass_tokens, tokens);
    int ms = atomic_load(&g_slow_ms);
    if (ms) {
        struct timespec d = {0, ms * 1000000L};
        nanosleep(&d, NULL);
    }
    for (int step = 1; step < FAKE_STEPS; step++) {
        gate(step);
        if (restart && restart->check(restart->ctx, step, FAKE_STEPS))
            return HEARTH_EAGAIN;
    }
    for (int i = 0; i < n; i++) {
        if (all_tokens && all_tokens[i]) {
            for (int k = 0; k < lens[i]; k++, out += DIM) {
                out[0] = (float)ids[i][k];
                out[1] = (float)k;
                out[2] = (float)ids[i][0];
                out[3] = 2;
            }
            continue;
        }
        float sum = 0;
        for (int k = 0; k < lens[i]; k++)
            sum += (float)ids[i][k];
        out[0] = sum;
        out[1] = (float)lens[i];
        out[2] = (float)ids[i][0];
        out[3] = 1;
        out += DIM;
    }
    int prev = atomic_load(&g_max_batch_tokens_seen);
    while (tokens > prev && !atomic_compare_exchange_weak(&g_max_batch_tokens_seen, &prev, tokens))
        ;
    atomic_fetch_add(&g_batches, 1);
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

/* A job asking for every token's vector shares a pass with a pooled one;
 * each gets its own rows back, in place. */
static void all_tokens_share_a_pass(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 1000, 10, NULL);
    hearth_embed_queue_pin_pass_cost(q, 0); /* no restarts: the two must form the second pass */
    atomic_store(&g_slow_ms, 20);
    atomic_store(&g_n_passes, 0);
    tjob first, pooled, all;
    make_job(&first, 1, 1, 2, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &first.job), HEARTH_OK);
    usleep(5000); /* the first pass runs */
    make_job(&pooled, 2, 50, 3, false);
    make_job(&all, 3, 900, 4, true); /* normalize is not applied to token vectors */
    all.lens[1] = 2;                 /* sequences of 4, 2 and 4 tokens: rows 0-3, 4-5, 6-9 */
    size_t rows[3] = {0, 4, 6};
    float out[10 * DIM];
    memset(out, 0, sizeof out);
    all.job.all_tokens = true;
    all.job.rows = rows;
    all.job.out = out;
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &pooled.job), HEARTH_OK);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &all.job), HEARTH_OK);
    wait_done(&first);
    wait_done(&pooled);
    wait_done(&all);
    CHECK_EQ_INT(all.status, 0);
    CHECK_EQ_INT(pooled.status, 0);
    check_vectors(&pooled, 50, 3);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < all.lens[i]; k++) {
            const float *v = out + (rows[i] + (size_t)k) * DIM;
            CHECK_MSG(v[0] == (float)(900 + i * 100 + k) && v[1] == (float)k && v[2] == (float)(900 + i * 100) && v[3] == 2,
                      "sequence %d token %d: (%g, %g, %g, %g)", i, k, v[0], v[1], v[2], v[3]);
        }
    CHECK_EQ_INT(atomic_load(&g_n_passes), 2);
    CHECK_EQ_INT(atomic_load(&g_pass_seqs[1]), 5);
    free_job(&first);
    free_job(&pooled);
    free_job(&all);
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

static void wait_in_gate(void)
{
    for (int i = 0; i < 5000 && !atomic_load(&g_in_gate); i++)
        usleep(1000);
    CHECK(atomic_load(&g_in_gate));
}

/* Job a runs alone; b, with at least as many tokens, arrives while a's pass
 * is at its first checkpoint: the pass is given up and one pass runs both. */
static void a_pass_restarts_when_new_work_would_double_it(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 1000, 10, NULL);
    hearth_embed_queue_pin_pass_cost(q, 60 * 1000000000LL); /* any pass is early */
    atomic_store(&g_slow_ms, 0);
    atomic_store(&g_batches, 0);
    atomic_store(&g_max_batch_tokens_seen, 0);
    atomic_store(&g_gate_step, 1);
    tjob a, b;
    make_job(&a, 1, 10, 4, false);
    make_job(&b, 2, 20, 3, true);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &a.job), HEARTH_OK);
    wait_in_gate();
    CHECK_EQ_INT(g_pass_tokens, 4);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &b.job), HEARTH_OK);
    atomic_store(&g_gate_step, 0);
    atomic_store(&g_open, 1);
    wait_done(&a);
    wait_done(&b);
    CHECK_EQ_INT(a.status, 0);
    CHECK_EQ_INT(b.status, 0);
    check_vectors(&a, 10, 4);
    CHECK_NEAR(b.out[1] / b.out[3], 3, 1e-5); /* b is normalized: its len over its 1 */
    CHECK_EQ_INT(g_batches, 1);
    CHECK_EQ_INT(g_max_batch_tokens_seen, 10);
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.restarts, 1);
    CHECK_EQ_INT(st.batches, 1);
    CHECK_EQ_INT(st.sequences, 3);
    CHECK_EQ_INT(st.tokens, 10);
    free_job(&a);
    free_job(&b);
    hearth_embed_queue_free(q);
}

/* No restart when the new work would not double the pass (b is smaller than
 * a), when the pass has spent more than a pass's fixed cost (pinned at 5 ms;
 * the pass sleeps 30 before its checkpoint), when the fixed cost is not
 * known (0), or when the new work does not fit the token budget. */
static void a_pass_goes_on_when_a_restart_would_not_pay(void)
{
    struct {
        int a_seqs, b_seqs, len, budget, batches, slow_ms;
        int64_t pass_cost_ns;
    } cases[] = {
        {2, 1, 4, 1000, 2, 0, 60000000000}, /* b: 4 tokens after a's 8 */
        {1, 2, 4, 1000, 2, 30, 5000000},    /* too late: 30 ms spent, the fixed cost 5 */
        {1, 2, 4, 1000, 2, 0, 0},           /* the fixed cost is not known */
        {1, 2, 4, 7, 3, 0, 60000000000},    /* a's 4 and b's first 4 exceed the budget of 7 (b's two go one by one) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, (size_t)cases[c].budget, 10, NULL);
        hearth_embed_queue_pin_pass_cost(q, cases[c].pass_cost_ns);
        atomic_store(&g_slow_ms, cases[c].slow_ms);
        atomic_store(&g_batches, 0);
        atomic_store(&g_gate_step, 1);
        tjob a, b;
        make_job(&a, cases[c].a_seqs, 10, cases[c].len, false);
        make_job(&b, cases[c].b_seqs, 50, cases[c].len, false);
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &a.job), HEARTH_OK);
        wait_in_gate();
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &b.job), HEARTH_OK);
        atomic_store(&g_gate_step, 0);
        atomic_store(&g_open, 1);
        wait_done(&a);
        wait_done(&b);
        check_vectors(&a, 10, cases[c].len);
        check_vectors(&b, 50, cases[c].len);
        hearth_embed_queue_stats st;
        hearth_embed_queue_get_stats(q, &st);
        CHECK_MSG(st.restarts == 0 && st.batches == (uint64_t)cases[c].batches, "case %zu: %llu restarts, %llu batches", c,
                  (unsigned long long)st.restarts, (unsigned long long)st.batches);
        free_job(&a);
        free_job(&b);
        hearth_embed_queue_free(q);
    }
    atomic_store(&g_slow_ms, 0);
}

/* Work that keeps doubling the pass restarts it at most RESTART_MAX (6)
 * times; the 7th pass runs to the end with everything. */
static void restarts_are_bounded(void)
{
    hearth_embed_queue *q = hearth_embed_queue_new(fake_compute, NULL, DIM, 100000, 20, NULL);
    hearth_embed_queue_pin_pass_cost(q, 60 * 1000000000LL);
    atomic_store(&g_slow_ms, 0);
    atomic_store(&g_batches, 0);
    atomic_store(&g_gate_step, 1);
    atomic_store(&g_gate_entries, 0);
    tjob jobs[8];
    int total = 0, len = 4;
    for (int k = 0; k < 8; k++) {
        make_job(&jobs[k], 1, 1000 * k, len, false);
        total += len;
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &jobs[k].job), HEARTH_OK);
        if (k == 7)
            atomic_store(&g_gate_step, 0);
        if (k > 0)
            atomic_store(&g_open, 1);
        /* the next pass (of everything so far) waits at its checkpoint */
        for (int i = 0; k < 7 && i < 5000 && atomic_load(&g_gate_entries) < k + 1; i++)
            usleep(1000);
        CHECK(k == 7 || atomic_load(&g_gate_entries) == k + 1);
        CHECK(k == 7 || atomic_load(&g_pass_tokens) == total);
        len = total; /* the next job doubles what is queued */
    }
    for (int k = 0; k < 8; k++) {
        wait_done(&jobs[k]);
        CHECK_EQ_INT(jobs[k].status, 0);
    }
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.restarts, 6);
    CHECK(st.batches >= 1 && st.batches <= 2);
    CHECK_EQ_INT(st.sequences, 8);
    for (int k = 0; k < 8; k++)
        free_job(&jobs[k]);
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

static void reset_passes(void)
{
    atomic_store(&g_running, 0);
    atomic_store(&g_max_running, 0);
    atomic_store(&g_n_passes, 0);
}

static hearth_embed_queue *two_lanes(size_t budget, int max_jobs)
{
    void *models[2] = {&g_lane_ids[0], &g_lane_ids[1]};
    hearth_embed_queue *q = hearth_embed_queue_new_lanes(fake_compute, models, 2, DIM, budget, max_jobs, NULL);
    CHECK(q != NULL);
    hearth_embed_queue_pin_pass_cost(q, 0); /* no restarts: passes as picked */
    usleep(20000);                          /* both lanes waiting */
    return q;
}

/* Two lanes run passes at the same time, each on its own model pointer,
 * and every job still gets its own vectors once. */
static void lanes_run_passes_at_once(void)
{
    reset_passes();
    atomic_store(&g_slow_ms, 20);
    hearth_embed_queue *q = two_lanes(16, 100);
    tjob jobs[12];
    for (int j = 0; j < 12; j++) {
        make_job(&jobs[j], 1 + j % 3, j * 1000, 4, false);
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &jobs[j].job), HEARTH_OK);
    }
    for (int j = 0; j < 12; j++) {
        wait_done(&jobs[j]);
        CHECK_EQ_INT(jobs[j].status, 0);
        check_vectors(&jobs[j], j * 1000, 4);
        free_job(&jobs[j]);
    }
    CHECK_EQ_INT(atomic_load(&g_max_running), 2);
    int by[2] = {0, 0}, n = atomic_load(&g_n_passes);
    for (int i = 0; i < n && i < MAX_PASSES; i++) {
        int e = atomic_load(&g_pass_lane[i]);
        CHECK(e == 0 || e == 1);
        if (e == 0 || e == 1)
            by[e]++;
    }
    CHECK(by[0] > 0 && by[1] > 0);
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.jobs_done, 12);
    CHECK_EQ_INT(st.sequences, 24);
    hearth_embed_queue_free(q);
    atomic_store(&g_slow_ms, 0);
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* A lane whose queue holds only jobs in flight on the other lane
 * sleeps: lane A ends its pass (0-300 ms) while B's (100-400 ms) runs,
 * and until B's ends nothing uses the CPU (the fake passes sleep). An
 * lane that took a queued job for work spun on the lock those 100 ms. */
static void idle_lane_sleeps_while_the_other_runs(void)
{
    reset_passes();
    atomic_store(&g_slow_ms, 300);
    hearth_embed_queue *q = two_lanes(16, 100);
    tjob a, b;
    make_job(&a, 1, 1000, 4, false);
    make_job(&b, 1, 2000, 4, false);
    double t0 = cpu_seconds();
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &a.job), HEARTH_OK);
    usleep(100000);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &b.job), HEARTH_OK);
    wait_done(&a);
    wait_done(&b);
    double used = cpu_seconds() - t0;
    CHECK_EQ_INT(a.status, 0);
    CHECK_EQ_INT(b.status, 0);
    CHECK_EQ_INT(atomic_load(&g_max_running), 2);
    /* the waits above poll every ms: a few ms of CPU at most */
    CHECK_MSG(used < 0.04, "%.3f s of CPU in 0.4 s of sleeping passes", used);
    free_job(&a);
    free_job(&b);
    hearth_embed_queue_free(q);
    atomic_store(&g_slow_ms, 0);
}

/* With the other lane waiting, a lane takes half of what is queued and
 * the other the rest: one job of 8 equal sequences runs as two passes of 4,
 * one per lane, and completes once with all 8 vectors. */
static void waiting_lanes_share_the_queue(void)
{
    reset_passes();
    atomic_store(&g_slow_ms, 50); /* long enough that the second lane is awake before the first is done */
    hearth_embed_queue *q = two_lanes(1000, 10);
    tjob t;
    make_job(&t, 8, 300, 5, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &t.job), HEARTH_OK);
    wait_done(&t);
    CHECK_EQ_INT(t.status, 0);
    check_vectors(&t, 300, 5);
    CHECK_EQ_INT(atomic_load(&g_n_passes), 2);
    CHECK_EQ_INT(atomic_load(&g_pass_seqs[0]), 4);
    CHECK_EQ_INT(atomic_load(&g_pass_seqs[1]), 4);
    CHECK(atomic_load(&g_pass_lane[0]) != atomic_load(&g_pass_lane[1]));
    CHECK_EQ_INT(atomic_load(&g_max_running), 2);
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.jobs_done, 1);
    free_job(&t);
    hearth_embed_queue_free(q);
    atomic_store(&g_slow_ms, 0);
}

/* A busy lane leaves nothing for later: with the other lane running, an
 * lane that comes free takes all that is queued (within the budget). */
static void a_lone_free_lane_takes_everything(void)
{
    reset_passes();
    hearth_embed_queue *q = two_lanes(1000, 10);
    atomic_store(&g_gate_step, 1); /* the first pass waits at its first checkpoint */
    tjob first, rest[3];
    make_job(&first, 1, 1, 3, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &first.job), HEARTH_OK);
    for (int i = 0; i < 2000 && !atomic_load(&g_in_gate); i++)
        usleep(1000);
    CHECK(atomic_load(&g_in_gate));
    atomic_store(&g_gate_step, 0);
    /* the other lane picks these up; it cannot share with a busy one */
    atomic_store(&g_slow_ms, 30);
    for (int j = 0; j < 3; j++) {
        make_job(&rest[j], 2, 1000 * (j + 1), 3, false);
        CHECK_EQ_INT(hearth_embed_queue_submit(q, &rest[j].job), HEARTH_OK);
    }
    for (int j = 0; j < 3; j++) {
        wait_done(&rest[j]);
        CHECK_EQ_INT(rest[j].status, 0);
        check_vectors(&rest[j], 1000 * (j + 1), 3);
    }
    atomic_store(&g_open, 1);
    wait_done(&first);
    CHECK_EQ_INT(first.status, 0);
    check_vectors(&first, 1, 3);
    /* pass 0 is the gated one; the 6 later sequences ran in at most 2
     * passes (the first submit may be picked alone before the others land) */
    int n = atomic_load(&g_n_passes);
    CHECK(n >= 2 && n <= 3);
    int later = 0;
    for (int i = 1; i < n; i++)
        later += atomic_load(&g_pass_seqs[i]);
    CHECK_EQ_INT(later, 6);
    free_job(&first);
    for (int j = 0; j < 3; j++)
        free_job(&rest[j]);
    hearth_embed_queue_free(q);
    atomic_store(&g_slow_ms, 0);
}

/* A lone job, the other lane waiting, runs as one wide pass (the wide
 * model); a job that arrives meanwhile waits for it rather than starting a
 * narrow pass beside it, then runs narrow. */
static void a_lone_request_runs_wide(void)
{
    reset_passes();
    hearth_embed_queue *q = two_lanes(1000, 10);
    hearth_embed_queue_set_wide(q, &g_lane_ids[2]);
    atomic_store(&g_gate_step, 1);
    tjob lone, later;
    make_job(&lone, 1, 10, 4, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &lone.job), HEARTH_OK);
    for (int i = 0; i < 2000 && !atomic_load(&g_in_gate); i++)
        usleep(1000);
    CHECK(atomic_load(&g_in_gate));
    atomic_store(&g_gate_step, 0);
    make_job(&later, 2, 500, 3, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &later.job), HEARTH_OK);
    usleep(30000);
    CHECK_EQ_INT(atomic_load(&g_running), 1); /* the idle lane did not start beside the wide pass */
    CHECK(!atomic_load(&later.done));
    atomic_store(&g_open, 1);
    wait_done(&lone);
    wait_done(&later);
    CHECK_EQ_INT(lone.status, 0);
    CHECK_EQ_INT(later.status, 0);
    check_vectors(&lone, 10, 4);
    check_vectors(&later, 500, 3);
    CHECK_EQ_INT(atomic_load(&g_pass_lane[0]), 2);
    /* the later job was picked with the other lane busy or waiting: each
     * of its passes ran on a lane of its own (0 or 1), or wide if alone */
    int n = atomic_load(&g_n_passes), seqs = 0;
    for (int i = 1; i < n; i++)
        seqs += atomic_load(&g_pass_seqs[i]);
    CHECK_EQ_INT(seqs, 2);
    free_job(&lone);
    free_job(&later);
    hearth_embed_queue_free(q);
}

/* A job split across the lanes whose one part fails completes once,
 * failed, when its other part is back, and the part not yet scheduled
 * never runs (budget 6: two sequences of 3 per pass, 8 sequences); a job
 * after it is unharmed. */
static void a_failed_part_fails_the_job_once(void)
{
    reset_passes();
    /* the other lane picks its part while the failing pass runs (25 ms),
     * and is still running its own (50 ms) when the failure is known */
    atomic_store(&g_slow_ms, 50);
    hearth_embed_queue *q = two_lanes(6, 10);
    tjob bad, good;
    make_job(&bad, 8, FAIL_ID, 3, false); /* sequence 0 starts with FAIL_ID */
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &bad.job), HEARTH_OK);
    wait_done(&bad);
    CHECK_EQ_INT(bad.status, HEARTH_EIO);
    CHECK_EQ_INT(atomic_load(&g_n_passes), 2); /* one pass per lane, nothing after the failure */
    usleep(50000);                             /* a second done would land here */
    hearth_embed_queue_stats st;
    hearth_embed_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.jobs_failed, 1);
    CHECK_EQ_INT(st.jobs_done, 0);
    make_job(&good, 2, 40, 3, false);
    CHECK_EQ_INT(hearth_embed_queue_submit(q, &good.job), HEARTH_OK);
    wait_done(&good);
    CHECK_EQ_INT(good.status, 0);
    check_vectors(&good, 40, 3);
    free_job(&bad);
    free_job(&good);
    hearth_embed_queue_free(q);
    atomic_store(&g_slow_ms, 0);
}

int main(void)
{
    RUN(results_reach_the_right_job);
    RUN(a_sequence_over_the_budget_still_runs_alone);
    RUN(normalize_is_per_job);
    RUN(all_tokens_share_a_pass);
    RUN(queue_bound_and_cancel);
    RUN(concurrent_submitters);
    RUN(a_pass_restarts_when_new_work_would_double_it);
    RUN(a_pass_goes_on_when_a_restart_would_not_pay);
    RUN(restarts_are_bounded);
    RUN(lanes_run_passes_at_once);
    RUN(idle_lane_sleeps_while_the_other_runs);
    RUN(waiting_lanes_share_the_queue);
    RUN(a_lone_free_lane_takes_everything);
    RUN(a_lone_request_runs_wide);
    RUN(a_failed_part_fails_the_job_once);
    TEST_EXIT();
}
