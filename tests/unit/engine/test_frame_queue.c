/* Unit tests for engine/frame_queue: arrival order, deadlines (late answers
 * while another frame runs, frames already late, misses), sequences (start,
 * continue, end, unknown, expired, restart, slots full, interleaved
 * sequences keeping their own state), keep-alive while frames flow and its
 * stop, the warm-up on the frames' thread, cancellation, the queue bound,
 * and jobs left when the queue is freed. The model is a fake recurrent
 * one: out = in + state; state = out. */
#include "harness.h"

#include "base/clock.h"
#include "engine/frame_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define DIM 4
#define SLOTS 3

typedef struct fake_model {
    float state[SLOTS][DIM];
    _Atomic int runs;
    _Atomic int keepalives;
    _Atomic int run_ms;     /* each run sleeps this long */
    _Atomic int block;      /* a run waits while this is set */
    _Atomic int in_run;
    _Atomic int last_slot;
    _Atomic int last_reset;
} fake_model;

static void sleep_ms(int ms)
{
    struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

static int fake_run(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err)
{
    fake_model *m = model;
    atomic_store(&m->in_run, 1);
    for (int i = 0; i < 5000 && atomic_load(&m->block); i++)
        sleep_ms(1);
    if (atomic_load(&m->run_ms))
        sleep_ms(atomic_load(&m->run_ms));
    const float *x = in[0];
    float *y = out[0];
    if (x[0] < 0) {
        atomic_store(&m->in_run, 0);
        return hearth_err_set(err, HEARTH_EIO, "fake: negative input");
    }
    float zero[DIM] = {0};
    float *st = slot >= 0 ? m->state[slot] : zero;
    if (reset)
        memset(st, 0, sizeof m->state[0]);
    for (int k = 0; k < DIM; k++)
        st[k] = y[k] = x[k] + st[k];
    atomic_store(&m->last_slot, slot);
    atomic_store(&m->last_reset, reset);
    atomic_fetch_add(&m->runs, 1);
    atomic_store(&m->in_run, 0);
    return 0;
}

static int fake_keepalive(void *model)
{
    fake_model *m = model;
    atomic_fetch_add(&m->keepalives, 1);
    return 0;
}

/* A test's job: its input, output and what done said. */
typedef struct tjob {
    hearth_frame_job job;
    float in[DIM], out[DIM];
    const void *inp[1];
    void *outp[1];
    _Atomic int done;
    int status;
    char msg[512];
    uint64_t done_ns;
    int order;
} tjob;

static _Atomic int g_order;

static void on_done(hearth_frame_job *job, int status, const char *msg)
{
    tjob *t = job->user;
    t->status = status;
    snprintf(t->msg, sizeof t->msg, "%s", msg ? msg : "");
    t->done_ns = hearth_now_ns();
    t->order = atomic_fetch_add(&g_order, 1);
    atomic_store(&t->done, 1);
}

static void tjob_init(tjob *t, float v)
{
    memset(t, 0, sizeof *t);
    for (int k = 0; k < DIM; k++)
        t->in[k] = v;
    t->inp[0] = t->in;
    t->outp[0] = t->out;
    t->job.in = t->inp;
    t->job.out = t->outp;
    t->job.done = on_done;
    t->job.user = t;
}

static void tjob_seq(tjob *t, const char *id, bool start, bool end)
{
    t->job.has_seq = true;
    snprintf(t->job.seq_id, sizeof t->job.seq_id, "%s", id);
    t->job.seq_start = start;
    t->job.seq_end = end;
}

static bool wait_done(tjob *t)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(&t->done))
            return true;
        sleep_ms(1);
    }
    return false;
}

static bool wait_in_run(fake_model *m)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(&m->in_run))
            return true;
        sleep_ms(1);
    }
    return false;
}

static hearth_frame_queue *mk(fake_model *m, int n_slots, hearth_frame_queue_opts *o)
{
    memset(m, 0, sizeof *m);
    hearth_frame_runner r = {m, n_slots, fake_run, fake_keepalive};
    hearth_frame_queue_opts d;
    hearth_frame_queue_opts_default(&d);
    d.keepalive = false;
    hearth_err err = {0};
    hearth_frame_queue *q = hearth_frame_queue_new(&r, o ? o : &d, &err);
    CHECK_MSG(q != NULL, "%s", err.msg);
    return q;
}

/* Submits t and waits for its answer; returns its status. */
static int frame(hearth_frame_queue *q, tjob *t)
{
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &t->job), 0);
    CHECK(wait_done(t));
    return t->status;
}

static void test_order(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, 0, NULL);
    enum { N = 12 };
    tjob t[N];
    atomic_store(&m.block, 1);
    for (int i = 0; i < N; i++) {
        tjob_init(&t[i], (float)i);
        CHECK_EQ_INT(hearth_frame_queue_submit(q, &t[i].job), 0);
    }
    atomic_store(&m.block, 0);
    for (int i = 0; i < N; i++) {
        CHECK(wait_done(&t[i]));
        CHECK_EQ_INT(t[i].status, 0);
        CHECK_EQ_INT(t[i].order, t[0].order + i);
        CHECK_NEAR(t[i].out[2], (float)i, 0); /* stateless: out = in */
        CHECK(t[i].job.start_ns >= t[i].job.submit_ns && t[i].job.end_ns >= t[i].job.start_ns);
    }
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.frames, N);
    CHECK_EQ_INT(st.queued, 0);
    CHECK(st.run_ns_expected > 0 && hearth_frame_queue_expected_ns(q) == st.run_ns_expected);
    uint64_t sum = 0;
    for (int b = 0; b <= HEARTH_FRAME_HIST_N; b++)
        sum += st.hist[b];
    CHECK_EQ_INT(sum, N);
    hearth_frame_queue_free(q);
}

/* A frame queued behind a slow one is answered late when its deadline
 * passes, while the slow one still runs, and never runs. */
static void test_deadline_late_while_another_runs(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, 0, NULL);
    atomic_store(&m.run_ms, 150);
    tjob a, b;
    tjob_init(&a, 1);
    tjob_init(&b, 2);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &a.job), 0);
    CHECK(wait_in_run(&m));
    b.job.deadline_ns = hearth_now_ns() + 30 * 1000000ull;
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &b.job), 0);
    CHECK(wait_done(&b));
    CHECK_EQ_INT(b.status, HEARTH_FRAME_LATE);
    CHECK(!atomic_load(&a.done)); /* answered while a still ran */
    CHECK(b.done_ns >= b.job.deadline_ns);
    CHECK(b.done_ns < b.job.deadline_ns + 100 * 1000000ull);
    CHECK_EQ_INT(b.job.start_ns, 0);
    CHECK(strstr(b.msg, "deadline") != NULL);
    CHECK(wait_done(&a));
    CHECK_EQ_INT(a.status, 0);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.late, 1);
    CHECK_EQ_INT(st.frames, 1);
    CHECK_EQ_INT(atomic_load(&m.runs), 1);
    CHECK(st.run_ns_expected >= 150 * 1000000ull);
    hearth_frame_queue_free(q);
}

/* Past its deadline at submit: answered at once, not run. Once frames are
 * known to take ~40 ms, a frame with 20 ms left is late too. */
static void test_deadline_already_late(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, 0, NULL);
    tjob a;
    tjob_init(&a, 1);
    a.job.deadline_ns = hearth_now_ns() - 1;
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &a.job), 0);
    CHECK(atomic_load(&a.done)); /* answered on the submitting thread */
    CHECK_EQ_INT(a.status, HEARTH_FRAME_LATE);
    CHECK_EQ_INT(atomic_load(&m.runs), 0);

    atomic_store(&m.run_ms, 40);
    tjob b, c;
    tjob_init(&b, 1);
    CHECK_EQ_INT(frame(q, &b), 0);
    tjob_init(&c, 1);
    c.job.deadline_ns = hearth_now_ns() + 20 * 1000000ull;
    CHECK_EQ_INT(frame(q, &c), HEARTH_FRAME_LATE);
    CHECK(strstr(c.msg, "p90") != NULL);
    CHECK_EQ_INT(atomic_load(&m.runs), 1);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.late, 2);
    hearth_frame_queue_free(q);
}

/* A frame that ran and ended past its deadline: answered with outputs, a miss. */
static void test_deadline_miss(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, 0, NULL);
    atomic_store(&m.run_ms, 30);
    tjob a;
    tjob_init(&a, 5);
    a.job.deadline_ns = hearth_now_ns() + 10 * 1000000ull; /* the queue has seen no run: expects 0 */
    CHECK_EQ_INT(frame(q, &a), 0);
    CHECK(a.job.missed);
    CHECK_NEAR(a.out[0], 5, 0);
    tjob b;
    tjob_init(&b, 5);
    b.job.deadline_ns = hearth_now_ns() + 1000 * 1000000ull;
    CHECK_EQ_INT(frame(q, &b), 0);
    CHECK(!b.job.missed);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.misses, 1);
    CHECK_EQ_INT(st.frames, 2);
    CHECK_EQ_INT(st.late, 0);
    hearth_frame_queue_free(q);
}

static void test_sequences(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, SLOTS, NULL);
    tjob t;
    /* unknown id */
    tjob_init(&t, 1);
    tjob_seq(&t, "nobody", false, false);
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_NO_SEQUENCE);
    CHECK(strstr(t.msg, "'nobody' was never started") != NULL);
    /* start, continue: the state carries */
    tjob_init(&t, 1);
    tjob_seq(&t, "a", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 1, 0);
    CHECK_EQ_INT(atomic_load(&m.last_reset), 1);
    tjob_init(&t, 2);
    tjob_seq(&t, "a", false, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 3, 0);
    CHECK_EQ_INT(atomic_load(&m.last_reset), 0);
    /* a start on a live id restarts it from zeros */
    tjob_init(&t, 10);
    tjob_seq(&t, "a", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 10, 0);
    /* end: the frame runs, then the id is gone */
    tjob_init(&t, 1);
    tjob_seq(&t, "a", false, true);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 11, 0);
    tjob_init(&t, 1);
    tjob_seq(&t, "a", false, false);
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_NO_SEQUENCE);
    CHECK(strstr(t.msg, "already ended") != NULL);
    /* a frame without sequence parameters on a stateful model: no state */
    tjob_init(&t, 7);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 7, 0);
    CHECK_EQ_INT(atomic_load(&m.last_slot), -1);
    /* slots full */
    const char *ids[SLOTS] = {"s1", "s2", "s3"};
    for (int i = 0; i < SLOTS; i++) {
        tjob_init(&t, 1);
        tjob_seq(&t, ids[i], true, false);
        CHECK_EQ_INT(frame(q, &t), 0);
    }
    tjob_init(&t, 1);
    tjob_seq(&t, "s4", true, false);
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_SEQ_FULL);
    CHECK(strstr(t.msg, "all 3 sequence slots") != NULL);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.seq_live, SLOTS);
    CHECK_EQ_INT(st.seq_started, 2 + SLOTS);
    CHECK_EQ_INT(st.seq_ended, 1);
    CHECK_EQ_INT(st.refused, 3);
    /* ending one frees a slot for the next start */
    tjob_init(&t, 1);
    tjob_seq(&t, "s2", false, true);
    CHECK_EQ_INT(frame(q, &t), 0);
    tjob_init(&t, 1);
    tjob_seq(&t, "s4", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    hearth_frame_queue_free(q);
}

static void test_sequence_expiry(void)
{
    fake_model m;
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.keepalive = false;
    o.seq_idle_ns = 150 * 1000000ull; /* "busy" gets a frame every 20 ms: 7x margin for a loaded machine */
    hearth_frame_queue *q = mk(&m, SLOTS, &o);
    tjob t;
    tjob_init(&t, 1);
    tjob_seq(&t, "idle", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    tjob_init(&t, 1);
    tjob_seq(&t, "busy", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    for (int i = 0; i < 12; i++) { /* "busy" gets a frame every 20 ms, "idle" none */
        sleep_ms(20);
        tjob_init(&t, 1);
        tjob_seq(&t, "busy", false, false);
        CHECK_EQ_INT(frame(q, &t), 0);
        CHECK_NEAR(t.out[0], 2 + i, 0);
    }
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.seq_expired, 1); /* expired by the idle scheduler, before any frame asked */
    CHECK_EQ_INT(st.seq_live, 1);
    tjob_init(&t, 1);
    tjob_seq(&t, "idle", false, false);
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_NO_SEQUENCE);
    CHECK_MSG(strstr(t.msg, "expired after") != NULL && strstr(t.msg, "ms idle") != NULL, "%s", t.msg);
    /* started again, it begins from zeros */
    tjob_init(&t, 4);
    tjob_seq(&t, "idle", true, false);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 4, 0);
    hearth_frame_queue_free(q);
}

/* Several sequences whose frames are interleaved in one queue keep their own state. */
typedef struct seq_client {
    hearth_frame_queue *q;
    char id[16];
    int n;
    float base;
    int bad;
} seq_client;

static void *seq_client_main(void *arg)
{
    seq_client *c = arg;
    float sum = 0;
    for (int i = 0; i < c->n; i++) {
        tjob t;
        float v = c->base + (float)i;
        tjob_init(&t, v);
        tjob_seq(&t, c->id, i == 0, i == c->n - 1);
        if (hearth_frame_queue_submit(c->q, &t.job) != 0 || !wait_done(&t) || t.status != 0) {
            c->bad++;
            continue;
        }
        sum += v;
        if (t.out[0] != sum || t.out[3] != sum)
            c->bad++;
    }
    return NULL;
}

static void test_sequences_interleaved(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, SLOTS, NULL);
    seq_client c[SLOTS];
    pthread_t th[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        c[i] = (seq_client){q, "", 200, (float)(1000 * (i + 1)), 0};
        snprintf(c[i].id, sizeof c[i].id, "cam%d", i);
        pthread_create(&th[i], NULL, seq_client_main, &c[i]);
    }
    for (int i = 0; i < SLOTS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(c[i].bad, 0);
    }
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.frames, 200 * SLOTS);
    CHECK_EQ_INT(st.seq_live, 0);
    CHECK_EQ_INT(st.seq_ended, SLOTS);
    hearth_frame_queue_free(q);
}

/* A late start frame does not start its sequence. */
static void test_late_start_starts_nothing(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, SLOTS, NULL);
    tjob t;
    tjob_init(&t, 1);
    tjob_seq(&t, "x", true, false);
    t.job.deadline_ns = hearth_now_ns() - 1;
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_LATE);
    tjob_init(&t, 1);
    tjob_seq(&t, "x", false, false);
    CHECK_EQ_INT(frame(q, &t), HEARTH_FRAME_NO_SEQUENCE);
    hearth_frame_queue_free(q);
}

static void test_keepalive(void)
{
    fake_model m;
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.keepalive = true;
    o.keepalive_period_ns = 2 * 1000000ull;
    o.keepalive_stop_ns = 150 * 1000000ull;
    hearth_frame_queue *q = mk(&m, 0, &o);
    sleep_ms(50);
    CHECK_EQ_INT(atomic_load(&m.keepalives), 0); /* no frame yet: no keep-alive */
    for (int i = 0; i < 10; i++) { /* frames every 20 ms */
        tjob t;
        tjob_init(&t, 1);
        CHECK_EQ_INT(frame(q, &t), 0);
        sleep_ms(20);
    }
    int during = atomic_load(&m.keepalives);
    CHECK_MSG(during >= 20, "%d keep-alives in 200 ms of frames at a 2 ms period", during);
    sleep_ms(300); /* past keepalive_stop_ns */
    int after = atomic_load(&m.keepalives);
    sleep_ms(100);
    CHECK_EQ_INT(atomic_load(&m.keepalives), after);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.keepalives, after);
    hearth_frame_queue_free(q);

    /* off */
    o.keepalive = false;
    q = mk(&m, 0, &o);
    tjob t;
    tjob_init(&t, 1);
    CHECK_EQ_INT(frame(q, &t), 0);
    sleep_ms(30);
    CHECK_EQ_INT(atomic_load(&m.keepalives), 0);
    hearth_frame_queue_free(q);
}

/* spin_ns: after a frame the scheduler polls for the next one; frames
 * that come inside the window and after it run and answer as ever, and
 * freeing the queue mid-spin ends the spin at once (not at the window's
 * end, 500 ms here). */
static void test_spin(void)
{
    fake_model m;
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.keepalive = false;
    o.spin_ns = 500 * 1000000ull;
    hearth_frame_queue *q = mk(&m, 0, &o);
    tjob t[3];
    for (int i = 0; i < 3; i++) {
        tjob_init(&t[i], (float)(i + 1));
        CHECK_EQ_INT(frame(q, &t[i]), 0); /* the second and third inside the first's window */
        CHECK_NEAR(t[i].out[2], (float)(i + 1), 0);
    }
    sleep_ms(20); /* the scheduler spins */
    uint64_t t0 = hearth_now_ns();
    hearth_frame_queue_free(q);
    double ms = (double)(hearth_now_ns() - t0) / 1e6;
    CHECK_MSG(ms < 250, "freeing the queue mid-spin took %.0f ms (a 500 ms window)", ms);
    /* and a frame after the window */
    o.spin_ns = 5 * 1000000ull;
    q = mk(&m, 0, &o);
    tjob_init(&t[0], 7);
    CHECK_EQ_INT(frame(q, &t[0]), 0);
    sleep_ms(30);
    tjob_init(&t[1], 8);
    CHECK_EQ_INT(frame(q, &t[1]), 0);
    CHECK_NEAR(t[1].out[2], 8.0f, 0);
    hearth_frame_queue_free(q);
}

/* Submits n frames gap_ms[i % n_gaps] apart on an absolute schedule (no drift from the waits). */
static void paced_frames(hearth_frame_queue *q, int n, const int *gap_ms, int n_gaps, bool *windows)
{
    uint64_t at = hearth_now_ns();
    for (int i = 0; i < n; i++) {
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        tjob t;
        tjob_init(&t, 1);
        CHECK_EQ_INT(frame(q, &t), 0);
        uint64_t from, until;
        windows[i] = hearth_frame_queue_window(q, &from, &until);
        if (windows[i]) { /* the next frame is expected one gap after this one's submit */
            const uint64_t mid = t.job.submit_ns + (uint64_t)gap_ms[0] * 1000000u;
            CHECK_MSG(from < mid && until > mid && until - from < 2 * mid - 2 * t.job.submit_ns,
                      "frame %d: window %.2f..%.2f ms after its submit, a %d ms gap", i,
                      (double)(from - t.job.submit_ns) / 1e6, (double)(until - t.job.submit_ns) / 1e6, gap_ms[0]);
        }
        at += (uint64_t)gap_ms[i % n_gaps] * 1000000u;
    }
}

/* lead_ns (Cadence): frames at a steady gap open a window around the next
 * one's expected arrival, where the scheduler polls and meets it; frames at
 * uneven gaps, or with lead_ns 0, open none. Paced here at 40 ms with a 5 ms
 * lead. The bounds are loose and the best of three runs counts: on CI's
 * shared cores (two test streams, one under ASan) a sleeping submitter wakes
 * late by milliseconds now and then, and a gap that far off is no cadence
 * (the first run there: 4 windows in 14 frames 20 ms apart). */
static void test_paced_window(void)
{
    fake_model m;
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.keepalive = false;
    o.lead_ns = 5 * 1000000ull;
    enum { N = 10 };
    bool win[N];
    const int steady[] = {40};
    hearth_frame_queue_stats st;
    int n_win = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        hearth_frame_queue *q = mk(&m, 0, &o);
        paced_frames(q, N, steady, 1, win);
        hearth_frame_queue_get_stats(q, &st);
        hearth_frame_queue_free(q);
        CHECK_MSG(!win[0] && !win[1] && !win[2], "a window before three gaps were seen");
        n_win = 0;
        for (int i = 0; i < N; i++)
            n_win += win[i];
        if (n_win >= 4 && st.paced_windows >= 3 && st.paced_hits >= 3)
            break;
    }
    CHECK_MSG(n_win >= 4, "%d windows in %d frames 40 ms apart (7 possible)", n_win, N);
    CHECK_MSG(st.paced_windows >= 3 && st.paced_hits >= 3 && st.paced_hits <= st.paced_windows,
              "the scheduler polled %llu windows and met %llu frames in them (6 possible)",
              (unsigned long long)st.paced_windows, (unsigned long long)st.paced_hits);

    /* uneven gaps: no window, no polling */
    hearth_frame_queue *q = mk(&m, 0, &o);
    const int uneven[] = {5, 30, 12, 45, 8};
    paced_frames(q, 10, uneven, 5, win);
    for (int i = 0; i < 10; i++)
        CHECK_MSG(!win[i], "frame %d of uneven gaps opened a window", i);
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.paced_windows, 0);
    hearth_frame_queue_free(q);

    /* lead_ns 0: none either */
    o.lead_ns = 0;
    q = mk(&m, 0, &o);
    paced_frames(q, 6, steady, 1, win);
    for (int i = 0; i < 6; i++)
        CHECK(!win[i]);
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.paced_windows, 0);
    hearth_frame_queue_free(q);
}

static void test_cancel_and_failure(void)
{
    fake_model m;
    hearth_frame_queue *q = mk(&m, 0, NULL);
    tjob a, b, c;
    tjob_init(&a, 1);
    tjob_init(&b, 2);
    tjob_init(&c, -1); /* the fake fails on a negative input */
    atomic_store(&m.block, 1);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &a.job), 0);
    CHECK(wait_in_run(&m));
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &b.job), 0);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &c.job), 0);
    atomic_store(&b.job.cancelled, 1);
    atomic_store(&m.block, 0);
    CHECK(wait_done(&a) && wait_done(&b) && wait_done(&c));
    CHECK_EQ_INT(a.status, 0);
    CHECK_EQ_INT(b.status, HEARTH_ENOTFOUND);
    CHECK_EQ_INT(b.job.start_ns, 0);
    CHECK_EQ_INT(c.status, HEARTH_EIO);
    CHECK(strstr(c.msg, "negative input") != NULL);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.cancelled, 1);
    CHECK_EQ_INT(st.failed, 1);
    CHECK_EQ_INT(st.frames, 1);
    hearth_frame_queue_free(q);
}

static void test_queue_full_and_free(void)
{
    fake_model m;
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.keepalive = false;
    o.max_jobs = 2;
    hearth_frame_queue *q = mk(&m, 0, &o);
    tjob a, b, c, d;
    tjob_init(&a, 1);
    tjob_init(&b, 1);
    tjob_init(&c, 1);
    tjob_init(&d, 1);
    atomic_store(&m.block, 1);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &a.job), 0);
    CHECK(wait_in_run(&m)); /* a is running, no longer waiting */
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &b.job), 0);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &c.job), 0);
    CHECK_EQ_INT(hearth_frame_queue_submit(q, &d.job), HEARTH_ELIMIT);
    CHECK(!atomic_load(&d.done));
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.queued, 2);
    /* freed with jobs waiting: they are answered, a finishes */
    atomic_store(&m.block, 0);
    hearth_frame_queue_free(q);
    CHECK(atomic_load(&a.done) && atomic_load(&b.done) && atomic_load(&c.done));
    CHECK_EQ_INT(a.status, 0);
    CHECK(b.status == 0 || b.status == HEARTH_ENOTFOUND);
    CHECK(c.status == 0 || c.status == HEARTH_ENOTFOUND);
}

/* The runner's warm_up runs on the thread that then runs every frame and
 * keep-alive (a GPU's records are the thread's: warmed on the loading
 * thread, the served frames still paid for their first two, stop 44), new()
 * returns after it, and a failed warm-up fails new() with its message. */
typedef struct warm_model {
    fake_model f;
    pthread_t warm_thread, run_thread;
    _Atomic int warmed, ran;
    bool fail;
} warm_model;

static int warm_up(void *model, hearth_err *err)
{
    warm_model *w = model;
    sleep_ms(30); /* new() must wait this out */
    w->warm_thread = pthread_self();
    atomic_store(&w->warmed, 1);
    return w->fail ? hearth_err_set(err, HEARTH_EDEVICE, "fake: the warm-up failed") : 0;
}

static int warm_run(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err)
{
    warm_model *w = model;
    w->run_thread = pthread_self();
    atomic_store(&w->ran, 1);
    return fake_run(&w->f, slot, reset, in, out, err);
}

static void test_warm_up_on_the_frames_thread(void)
{
    warm_model w;
    memset(&w, 0, sizeof w);
    hearth_frame_runner r = {.model = &w, .n_slots = 0, .run = warm_run, .warm_up = warm_up};
    hearth_err err = {0};
    hearth_frame_queue *q = hearth_frame_queue_new(&r, NULL, &err);
    CHECK_MSG(q != NULL, "%s", err.msg);
    if (!q)
        return;
    CHECK(atomic_load(&w.warmed));
    CHECK(!pthread_equal(w.warm_thread, pthread_self()));
    tjob t;
    tjob_init(&t, 2);
    CHECK_EQ_INT(frame(q, &t), 0);
    CHECK_NEAR(t.out[0], 2.0f, 0);
    CHECK(atomic_load(&w.ran) && pthread_equal(w.run_thread, w.warm_thread));
    hearth_frame_queue_free(q);

    memset(&w, 0, sizeof w);
    w.fail = true;
    CHECK(hearth_frame_queue_new(&r, NULL, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "warm-up failed") != NULL && err.code == HEARTH_EDEVICE, "%s", err.msg);
}

static void test_bad_runner(void)
{
    hearth_err err = {0};
    CHECK(hearth_frame_queue_new(NULL, NULL, &err) == NULL);
    hearth_frame_runner r = {NULL, -1, fake_run, NULL};
    CHECK(hearth_frame_queue_new(&r, NULL, &err) == NULL);
    CHECK(strstr(err.msg, "slots") != NULL);
    hearth_frame_queue_free(NULL);
}

int main(void)
{
    RUN(test_order);
    RUN(test_deadline_late_while_another_runs);
    RUN(test_deadline_already_late);
    RUN(test_deadline_miss);
    RUN(test_sequences);
    RUN(test_sequence_expiry);
    RUN(test_sequences_interleaved);
    RUN(test_late_start_starts_nothing);
    RUN(test_keepalive);
    RUN(test_spin);
    RUN(test_paced_window);
    RUN(test_cancel_and_failure);
    RUN(test_queue_full_and_free);
    RUN(test_warm_up_on_the_frames_thread);
    RUN(test_bad_runner);
    TEST_EXIT();
}
