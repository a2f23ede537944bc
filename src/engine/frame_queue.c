/* frame_queue.c: one scheduler thread per frame model, running frames one
 * at a time in arrival order (a FIFO list under one mutex), plus a timer
 * thread that answers late frames while the scheduler is busy.
 *
 * Deadlines. A frame can make its deadline only if it starts by deadline -
 * expected, where expected is the 90th percentile of the last RUN_RING run
 * times (0 until the first frame ran). The p90 of a short window was chosen
 * over an EWMA + margin: an EWMA follows the mean, and the margin then has
 * to be guessed per device (a GPU frame varies by a few percent, a CPU frame
 * sharing cores with embeddings by 2x); the p90 of the last 32 frames is the
 * margin measured, forgets a one-off stall within 32 frames and costs a sort
 * of 32 numbers per frame. The check is made three times: at submit (a
 * frame already past it is answered at once, on the submitting thread), at
 * dequeue, and by the timer thread, which sleeps until the earliest cutoff
 * among queued frames so that a frame whose cutoff passes while another
 * frame runs is answered then, not when the running frame ends. Rejected:
 * checking only at dequeue (a 50 ms frame ahead would hold a late answer
 * 50 ms past the point its client could have re-sent); a timer per job
 * (a thread or timerfd per frame for what one sorted-free scan does).
 *
 * A late frame is as if never sent: no sequence control is applied (a late
 * start frame does not start its sequence, a late end frame does not end
 * it), as Triton's sequence batcher drops a timed-out request. This keeps
 * the timer's answers independent of the scheduler's order of sequence
 * control.
 *
 * Sequences: a table of n_slots {id, live, last frame time}; lookups are a
 * linear scan (n_slots is a few dozen at most, and the scan runs once per
 * frame). The idle clock of a sequence restarts at each of its frames'
 * submit and end, so a frame waiting in a long queue keeps its sequence
 * alive. Expired and ended ids are remembered in a ring of GONE_RING so a
 * refusal can say which (beyond it: "never started, or ended or expired
 * long ago"). Expiry is checked by the scheduler before each frame and by
 * its timed wait while idle.
 *
 * A frame whose run fails leaves its sequence live and its end frame still
 * ends it: whether the state is still usable is the runner's to say (its
 * error), and the client may start the sequence again.
 *
 * Keep-alive: while idle, and a frame arrived within keepalive_stop_ns, the
 * scheduler calls runner->keepalive every keepalive_period_ns through a
 * timed condition wait (CLOCK_MONOTONIC, hearth_now_ns's clock), so it
 * runs on the thread that owns the model (the runner is one thread at a
 * time) and a frame that arrives interrupts the wait at once.
 *
 * Cadence: the last CADENCE_N arrival gaps, a ring; a stream counts as
 * paced when they agree within an eighth of the gap or 250 us (a camera's
 * or a paced client's jitter; Poisson arrivals never do). The window is
 * computed at submit, so the submitting thread can open the same one on
 * its own loop, and polled by the scheduler at most once (win_spent).
 * Windows are skipped where the gap is under twice their half-width (a
 * closed loop: the after-frame spin covers it) or over keepalive_stop_ns.
 * Rejected: polling through the whole gap (stop 44 on the H100: p50 -17%,
 * but two cores kept busy, and on a 2-core machine the polling threads
 * took the cores the compute threads needed, p99 0.58 -> 4.5-5.2 ms).
 *
 * Done callbacks are called with the lock released. */
#include "frame_queue.h"

#include "base/clock.h"
#include "base/hw.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUN_RING 32
#define CADENCE_N 3 /* gaps that must agree before a stream counts as paced */
#define GONE_RING 64

const double hearth_frame_hist_ms[HEARTH_FRAME_HIST_N] = {0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 40, 50, 75, 100, 250};

typedef struct seq_slot {
    bool live;
    char id[HEARTH_FRAME_SEQ_ID_MAX];
    uint64_t last_ns; /* last frame's submit or end */
} seq_slot;

typedef struct gone_seq {
    char id[HEARTH_FRAME_SEQ_ID_MAX];
    bool expired;     /* else ended by its end frame */
    uint64_t idle_ms; /* how long it had been idle when it expired */
} gone_seq;

struct hearth_frame_queue {
    hearth_frame_runner r;
    hearth_frame_queue_opts o;
    pthread_mutex_t lock;
    pthread_cond_t wake;       /* the scheduler: a job came, or stop */
    pthread_cond_t timer_wake; /* the timer: a job came, or stop */
    pthread_cond_t warmed_cv;  /* new(): the scheduler's warm-up ended */
    bool warmed;
    int warm_rc;
    hearth_err warm_err;
    pthread_t thread, timer;
    bool thread_started, timer_started, stop;
    hearth_frame_job *head, *tail;
    int n_queued;
    uint64_t last_arrival_ns;  /* of the last frame submitted (keep-alive) */
    uint64_t last_done_ns;     /* when the scheduler last ended a frame (its spin) */
    uint64_t gaps[CADENCE_N];  /* the last arrival gaps, a ring */
    int n_gaps;
    uint64_t win_from, win_until; /* where the next frame is expected (until 0: no cadence) */
    uint64_t win_spent;        /* the win_until whose window the scheduler has polled through */
    atomic_uint_fast64_t n_submitted; /* frames pushed: what the spinning scheduler watches without the lock */
    uint64_t last_keepalive_ns;
    seq_slot *slots;
    gone_seq gone[GONE_RING];
    int n_gone;                /* entries written in all (the ring's next is n_gone % GONE_RING) */
    uint64_t runs[RUN_RING];
    int n_runs;
    uint64_t expected_ns;
    hearth_frame_queue_stats st;
};

void hearth_frame_queue_opts_default(hearth_frame_queue_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_jobs = 64;
    o->seq_idle_ns = 60ull * 1000000000ull;
    o->keepalive = true;
    o->keepalive_period_ns = 200000;
    o->keepalive_stop_ns = 1000000000ull;
}

static struct timespec abs_ts(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    return ts;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Records a run time and recomputes the p90 of the window. Under the lock. */
static void note_run(hearth_frame_queue *q, uint64_t ns)
{
    q->runs[q->n_runs++ % RUN_RING] = ns;
    int n = q->n_runs < RUN_RING ? q->n_runs : RUN_RING;
    uint64_t s[RUN_RING];
    memcpy(s, q->runs, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_u64);
    q->expected_ns = s[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1];
    q->st.run_ns_expected = q->expected_ns;
}

/* Records an arrival and the window of the next (Cadence in the header).
 * Under the lock. The window's half-width is lead_ns plus the spread of
 * the gaps, so a client's own jitter stays inside it. */
static void note_arrival(hearth_frame_queue *q, uint64_t now)
{
    if (q->last_arrival_ns && now > q->last_arrival_ns)
        q->gaps[q->n_gaps++ % CADENCE_N] = now - q->last_arrival_ns;
    q->last_arrival_ns = now;
    q->win_until = 0;
    if (!q->o.lead_ns || q->n_gaps < CADENCE_N)
        return;
    uint64_t lo = q->gaps[0], hi = q->gaps[0], sum = 0;
    for (int i = 0; i < CADENCE_N; i++) {
        lo = q->gaps[i] < lo ? q->gaps[i] : lo;
        hi = q->gaps[i] > hi ? q->gaps[i] : hi;
        sum += q->gaps[i];
    }
    const uint64_t spread = hi - lo, gap = sum / CADENCE_N;
    if (spread > gap / 8 && spread > 250000u)
        return; /* not a steady stream: a window would poll at random */
    const uint64_t half = q->o.lead_ns + spread;
    if (gap <= 2 * half || gap > q->o.keepalive_stop_ns)
        return; /* frames back to back (the after-frame spin's), or too far apart to keep anything warm for */
    q->win_from = now + gap - half;
    q->win_until = now + gap + half;
}

/* True when job cannot make its deadline starting at now. */
static bool is_late(const hearth_frame_queue *q, const hearth_frame_job *job, uint64_t now)
{
    return job->deadline_ns && now + q->expected_ns > job->deadline_ns;
}

static void hist_add(hearth_frame_queue_stats *st, uint64_t ns)
{
    double ms = (double)ns / 1e6;
    int b = 0;
    while (b < HEARTH_FRAME_HIST_N && ms > hearth_frame_hist_ms[b])
        b++;
    st->hist[b]++;
    st->latency_sum_s += (double)ns / 1e9;
}

/* ---- the queue list (under the lock) ---- */

static void list_push(hearth_frame_queue *q, hearth_frame_job *job)
{
    job->link = NULL;
    if (q->tail)
        q->tail->link = job;
    else
        q->head = job;
    q->tail = job;
    q->n_queued++;
}

static hearth_frame_job *list_pop(hearth_frame_queue *q)
{
    hearth_frame_job *job = q->head;
    if (job) {
        q->head = job->link;
        if (!q->head)
            q->tail = NULL;
        q->n_queued--;
        job->link = NULL;
    }
    return job;
}

/* Moves the queued jobs that are cancelled or late onto *out (a list linked
 * by link, answered by answer_list), under the lock. Each is counted here,
 * as it leaves the queue, so the counts never miss a job that is out of the
 * queue and not yet answered (a reader of the stats saw one: CI's ASan run). */
static void sweep(hearth_frame_queue *q, uint64_t now, hearth_frame_job **out)
{
    hearth_frame_job **pp = &q->head, *prev = NULL;
    while (*pp) {
        hearth_frame_job *job = *pp;
        bool cancelled = atomic_load(&job->cancelled);
        if (cancelled || is_late(q, job, now)) {
            *pp = job->link;
            if (q->tail == job)
                q->tail = prev;
            q->n_queued--;
            job->swept_cancelled = cancelled;
            if (cancelled)
                q->st.cancelled++;
            else
                q->st.late++;
            job->link = *out;
            *out = job;
        } else {
            prev = job;
            pp = &job->link;
        }
    }
}

/* Formats the late message for job into msg. */
static void late_msg(const hearth_frame_queue *q, const hearth_frame_job *job, uint64_t now, char *msg, size_t n)
{
    if (now >= job->deadline_ns)
        snprintf(msg, n, "its deadline passed %.3f ms ago, %.3f ms after it arrived, before its turn came",
                 (double)(now - job->deadline_ns) / 1e6, (double)(job->deadline_ns - job->submit_ns) / 1e6);
    else
        snprintf(msg, n, "%.3f ms were left before its deadline and frames take %.3f ms (p90 of recent runs)",
                 (double)(job->deadline_ns - now) / 1e6, (double)q->expected_ns / 1e6);
}

/* Answers a list made by sweep (which counted each): cancelled ones
 * HEARTH_ENOTFOUND, the others late. Called without the lock. */
static void answer_list(hearth_frame_queue *q, hearth_frame_job *list)
{
    while (list) {
        hearth_frame_job *job = list;
        list = job->link;
        bool cancelled = job->swept_cancelled;
        char msg[256];
        if (!cancelled)
            late_msg(q, job, hearth_now_ns(), msg, sizeof msg);
        job->done(job, cancelled ? HEARTH_ENOTFOUND : HEARTH_FRAME_LATE, cancelled ? "cancelled before it ran" : msg);
    }
}

/* ---- sequences (under the lock) ---- */

static seq_slot *seq_find(hearth_frame_queue *q, const char *id)
{
    for (int i = 0; i < q->r.n_slots; i++)
        if (q->slots[i].live && strcmp(q->slots[i].id, id) == 0)
            return &q->slots[i];
    return NULL;
}

static void seq_forget(hearth_frame_queue *q, seq_slot *s, bool expired, uint64_t idle_ns)
{
    gone_seq *g = &q->gone[q->n_gone++ % GONE_RING];
    snprintf(g->id, sizeof g->id, "%s", s->id);
    g->expired = expired;
    g->idle_ms = idle_ns / 1000000u;
    s->live = false;
    q->st.seq_live--;
    if (expired)
        q->st.seq_expired++;
    else
        q->st.seq_ended++;
}

/* Expires idle sequences; returns the earliest time another may expire (0: none). */
static uint64_t seq_expire(hearth_frame_queue *q, uint64_t now)
{
    uint64_t next = 0;
    if (!q->o.seq_idle_ns)
        return 0;
    for (int i = 0; i < q->r.n_slots; i++) {
        seq_slot *s = &q->slots[i];
        if (!s->live)
            continue;
        uint64_t at = s->last_ns + q->o.seq_idle_ns;
        if (now >= at)
            seq_forget(q, s, true, now - s->last_ns);
        else if (!next || at < next)
            next = at;
    }
    return next;
}

/* Why id is not live, into msg. */
static void seq_gone_msg(const hearth_frame_queue *q, const char *id, char *msg, size_t n)
{
    int have = q->n_gone < GONE_RING ? q->n_gone : GONE_RING;
    for (int k = 1; k <= have; k++) { /* newest first */
        const gone_seq *g = &q->gone[(q->n_gone - k) % GONE_RING];
        if (strcmp(g->id, id) != 0)
            continue;
        if (g->expired)
            snprintf(msg, n,
                     "sequence '%s' expired after %llu ms idle (the limit is %llu ms): start it again with sequence_start", id,
                     (unsigned long long)g->idle_ms, (unsigned long long)(q->o.seq_idle_ns / 1000000u));
        else
            snprintf(msg, n, "sequence '%s' already ended (a frame with sequence_end): start it again with sequence_start", id);
        return;
    }
    snprintf(msg, n, "sequence '%s' was never started, or ended or expired long ago: its first frame must carry sequence_start",
             id);
}

/* Resolves job's sequence into *slot / *reset, taking or restarting a slot
 * for a start frame. 0, or a refusal status with msg. */
static int seq_resolve(hearth_frame_queue *q, hearth_frame_job *job, uint64_t now, int *slot, bool *reset, char *msg,
                       size_t n)
{
    *slot = -1;
    *reset = false;
    if (!job->has_seq || q->r.n_slots <= 0)
        return 0;
    seq_slot *s = seq_find(q, job->seq_id);
    if (job->seq_start) {
        if (!s) { /* a start on a live id restarts it in its own slot */
            for (int i = 0; i < q->r.n_slots && !s; i++)
                if (!q->slots[i].live)
                    s = &q->slots[i];
            if (!s) {
                snprintf(msg, n, "sequence '%s' cannot start: all %d sequence slots are taken (idle ones expire after %llu ms)",
                         job->seq_id, q->r.n_slots, (unsigned long long)(q->o.seq_idle_ns / 1000000u));
                return HEARTH_FRAME_SEQ_FULL;
            }
            s->live = true;
            snprintf(s->id, sizeof s->id, "%s", job->seq_id);
            q->st.seq_live++;
        }
        q->st.seq_started++;
        *reset = true;
    } else if (!s) {
        seq_gone_msg(q, job->seq_id, msg, n);
        return HEARTH_FRAME_NO_SEQUENCE;
    }
    s->last_ns = now;
    *slot = (int)(s - q->slots);
    return 0;
}

/* ---- threads ---- */

/* Runs one dequeued job (the lock held on entry and on return). */
static void run_job(hearth_frame_queue *q, hearth_frame_job *job)
{
    uint64_t now = hearth_now_ns();
    char msg[HEARTH_ERR_MSG_MAX];
    int status;
    if (atomic_load(&job->cancelled)) {
        q->st.cancelled++;
        pthread_mutex_unlock(&q->lock);
        job->done(job, HEARTH_ENOTFOUND, "cancelled before it ran");
        pthread_mutex_lock(&q->lock);
        return;
    }
    if (is_late(q, job, now)) {
        q->st.late++;
        late_msg(q, job, now, msg, sizeof msg);
        pthread_mutex_unlock(&q->lock);
        job->done(job, HEARTH_FRAME_LATE, msg);
        pthread_mutex_lock(&q->lock);
        return;
    }
    int slot;
    bool reset;
    if ((status = seq_resolve(q, job, now, &slot, &reset, msg, sizeof msg)) != 0) {
        q->st.refused++;
        pthread_mutex_unlock(&q->lock);
        job->done(job, status, msg);
        pthread_mutex_lock(&q->lock);
        return;
    }
    pthread_mutex_unlock(&q->lock);
    hearth_err err = {0};
    job->start_ns = hearth_now_ns();
    status = q->r.run(q->r.model, slot, reset, job->in, job->out, &err);
    job->end_ns = hearth_now_ns();
    job->missed = status == 0 && job->deadline_ns && job->end_ns > job->deadline_ns;
    pthread_mutex_lock(&q->lock);
    note_run(q, job->end_ns - job->start_ns);
    if (q->head) /* the expected run time moved: so did the queued frames' cutoffs */
        pthread_cond_signal(&q->timer_wake);
    if (slot >= 0) {
        seq_slot *s = &q->slots[slot];
        s->last_ns = job->end_ns;
        if (job->seq_end)
            seq_forget(q, s, false, 0);
    }
    if (status) {
        q->st.failed++;
    } else {
        q->st.frames++;
        if (job->missed)
            q->st.misses++;
        hist_add(&q->st, job->end_ns - job->submit_ns);
    }
    pthread_mutex_unlock(&q->lock);
    job->done(job, status, status ? (err.msg[0] ? err.msg : "the frame failed") : NULL);
    pthread_mutex_lock(&q->lock);
}

static bool keepalive_due(const hearth_frame_queue *q, uint64_t now)
{
    return q->o.keepalive && q->r.keepalive && q->last_arrival_ns && now - q->last_arrival_ns < q->o.keepalive_stop_ns;
}

/* Polls, with the lock released, until a frame is submitted or end passes
 * (the after-frame spin, a paced window): a frame that comes meanwhile
 * starts without waiting for this thread to be woken (a futex wake-up's
 * tail). Called and returns under the lock. True when a frame came (or
 * free() ended it: it bumps n_submitted). */
static bool poll_for_frame(hearth_frame_queue *q, uint64_t end)
{
    const uint_fast64_t seen = atomic_load(&q->n_submitted);
    pthread_mutex_unlock(&q->lock);
    bool came;
    while (!(came = atomic_load_explicit(&q->n_submitted, memory_order_relaxed) != seen) && hearth_now_ns() < end)
        hearth_hw_pause();
    pthread_mutex_lock(&q->lock);
    return came;
}

/* A paced window is set and the scheduler has not polled it yet. Under the lock. */
static bool window_pending(const hearth_frame_queue *q) { return q->win_until && q->win_spent != q->win_until; }

static void *sched_main(void *arg)
{
    hearth_frame_queue *q = arg;
    hearth_err werr = {0};
    const int wrc = q->r.warm_up ? q->r.warm_up(q->r.model, &werr) : 0;
    pthread_mutex_lock(&q->lock);
    q->warm_rc = wrc;
    q->warm_err = werr;
    q->warmed = true;
    pthread_cond_broadcast(&q->warmed_cv);
    for (;;) {
        uint64_t now = hearth_now_ns();
        uint64_t next_expiry = seq_expire(q, now);
        if (q->stop)
            break;
        hearth_frame_job *job = list_pop(q);
        if (job) {
            q->st.queued = q->n_queued;
            run_job(q, job);
            q->last_done_ns = hearth_now_ns();
            continue;
        }
        /* idle right after a frame: poll for the next for o.spin_ns (a closed loop's next frame) */
        if (q->o.spin_ns && q->last_done_ns && now - q->last_done_ns < q->o.spin_ns) {
            poll_for_frame(q, q->last_done_ns + q->o.spin_ns);
            q->last_done_ns = 0; /* one window a frame */
            continue;
        }
        /* a paced stream's next frame is due: poll through its window */
        if (window_pending(q) && now < q->win_until && now + 50000u >= q->win_from) {
            q->win_spent = q->win_until;
            const bool came = poll_for_frame(q, q->win_until);
            q->st.paced_windows++;
            q->st.paced_hits += came && !q->stop;
            continue;
        }
        /* idle: keep-alive, then sleep until the next tick, expiry, window or job */
        uint64_t wake_at = next_expiry;
        if (window_pending(q) && now < q->win_from && (!wake_at || q->win_from < wake_at))
            wake_at = q->win_from - 50000u; /* a timed wait's own slack (50 us) */
        if (keepalive_due(q, now)) {
            if (now - q->last_keepalive_ns >= q->o.keepalive_period_ns) {
                pthread_mutex_unlock(&q->lock);
                q->r.keepalive(q->r.model);
                pthread_mutex_lock(&q->lock);
                q->st.keepalives++;
                q->last_keepalive_ns = now = hearth_now_ns();
                if (q->head || q->stop)
                    continue;
            }
            uint64_t tick = q->last_keepalive_ns + q->o.keepalive_period_ns;
            uint64_t stop_at = q->last_arrival_ns + q->o.keepalive_stop_ns;
            if (tick > stop_at)
                tick = stop_at;
            if (!wake_at || tick < wake_at)
                wake_at = tick;
        }
        if (wake_at) {
            struct timespec ts = abs_ts(wake_at);
            pthread_cond_timedwait(&q->wake, &q->lock, &ts);
        } else {
            pthread_cond_wait(&q->wake, &q->lock);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* The timer: sleeps until the earliest queued frame's cutoff (deadline -
 * expected) and answers the late ones while the scheduler runs another. */
static void *timer_main(void *arg)
{
    hearth_frame_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    while (!q->stop) {
        uint64_t now = hearth_now_ns();
        hearth_frame_job *late = NULL;
        sweep(q, now, &late);
        q->st.queued = q->n_queued;
        if (late) {
            pthread_mutex_unlock(&q->lock);
            answer_list(q, late);
            pthread_mutex_lock(&q->lock);
            continue;
        }
        uint64_t cutoff = 0;
        for (hearth_frame_job *j = q->head; j; j = j->link) {
            if (!j->deadline_ns)
                continue;
            uint64_t c = j->deadline_ns > q->expected_ns ? j->deadline_ns - q->expected_ns : 1;
            if (!cutoff || c < cutoff)
                cutoff = c;
        }
        if (cutoff) {
            struct timespec ts = abs_ts(cutoff + 1); /* is_late wants now + expected strictly past the deadline */
            pthread_cond_timedwait(&q->timer_wake, &q->lock, &ts);
        } else {
            pthread_cond_wait(&q->timer_wake, &q->lock);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

hearth_frame_queue *hearth_frame_queue_new(const hearth_frame_runner *r, const hearth_frame_queue_opts *o, hearth_err *err)
{
    if (!r || !r->run) {
        hearth_err_set(err, HEARTH_EINVAL, "frame queue: no runner");
        return NULL;
    }
    if (r->n_slots < 0 || r->n_slots > 65536) {
        hearth_err_set(err, HEARTH_EINVAL, "frame queue: %d sequence slots (0..65536)", r->n_slots);
        return NULL;
    }
    hearth_frame_queue *q = calloc(1, sizeof *q);
    if (!q) {
        hearth_err_set(err, HEARTH_ENOMEM, "frame queue: out of memory");
        return NULL;
    }
    q->r = *r;
    if (o)
        q->o = *o;
    else
        hearth_frame_queue_opts_default(&q->o);
    if (q->o.max_jobs <= 0)
        q->o.max_jobs = 64;
    if (!q->o.keepalive_period_ns)
        q->o.keepalive_period_ns = 200000;
    if (!q->o.keepalive_stop_ns)
        q->o.keepalive_stop_ns = 1000000000ull;
    if (r->n_slots && !(q->slots = calloc((size_t)r->n_slots, sizeof *q->slots))) {
        free(q);
        hearth_err_set(err, HEARTH_ENOMEM, "frame queue: out of memory for %d sequence slots", r->n_slots);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, &ca);
    pthread_cond_init(&q->timer_wake, &ca);
    pthread_cond_init(&q->warmed_cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&q->thread, NULL, sched_main, q);
    q->thread_started = e == 0;
    if (!e) {
        e = pthread_create(&q->timer, NULL, timer_main, q);
        q->timer_started = e == 0;
    }
    if (e) {
        hearth_frame_queue_free(q);
        hearth_err_sys(err, e, "frame queue: starting its threads");
        return NULL;
    }
    pthread_mutex_lock(&q->lock);
    while (!q->warmed)
        pthread_cond_wait(&q->warmed_cv, &q->lock);
    const int rc = q->warm_rc;
    pthread_mutex_unlock(&q->lock);
    if (rc) {
        if (err)
            *err = q->warm_err;
        if (err && !err->code)
            hearth_err_set(err, rc, "frame queue: the model's warm-up failed");
        hearth_frame_queue_free(q);
        return NULL;
    }
    return q;
}

void hearth_frame_queue_free(hearth_frame_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stop = true;
    atomic_fetch_add(&q->n_submitted, 1); /* ends a spin (sched_main) at once */
    pthread_cond_broadcast(&q->wake);
    pthread_cond_broadcast(&q->timer_wake);
    pthread_mutex_unlock(&q->lock);
    if (q->thread_started)
        pthread_join(q->thread, NULL);
    if (q->timer_started)
        pthread_join(q->timer, NULL);
    hearth_frame_job *job;
    while ((job = list_pop(q)))
        job->done(job, HEARTH_ENOTFOUND, "the model was unloaded before the frame ran");
    pthread_cond_destroy(&q->wake);
    pthread_cond_destroy(&q->timer_wake);
    pthread_cond_destroy(&q->warmed_cv);
    pthread_mutex_destroy(&q->lock);
    free(q->slots);
    free(q);
}

int hearth_frame_queue_submit(hearth_frame_queue *q, hearth_frame_job *job)
{
    uint64_t now = hearth_now_ns();
    job->submit_ns = now;
    job->start_ns = job->end_ns = 0;
    job->missed = false;
    job->link = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->n_queued >= q->o.max_jobs) {
        pthread_mutex_unlock(&q->lock);
        return HEARTH_ELIMIT;
    }
    note_arrival(q, now);
    if (job->has_seq && q->r.n_slots > 0) {
        seq_slot *s = seq_find(q, job->seq_id);
        if (s) /* a frame on its way keeps its sequence from expiring */
            s->last_ns = now;
    }
    if (is_late(q, job, now)) {
        char msg[256];
        late_msg(q, job, now, msg, sizeof msg);
        q->st.late++;
        pthread_mutex_unlock(&q->lock);
        job->done(job, HEARTH_FRAME_LATE, msg);
        return 0;
    }
    list_push(q, job);
    atomic_fetch_add(&q->n_submitted, 1);
    q->st.queued = q->n_queued;
    pthread_cond_signal(&q->wake);
    if (job->deadline_ns)
        pthread_cond_signal(&q->timer_wake);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

uint64_t hearth_frame_queue_expected_ns(hearth_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t ns = q->expected_ns;
    pthread_mutex_unlock(&q->lock);
    return ns;
}

bool hearth_frame_queue_window(hearth_frame_queue *q, uint64_t *from_ns, uint64_t *until_ns)
{
    pthread_mutex_lock(&q->lock);
    const bool on = q->win_until != 0;
    *from_ns = q->win_from;
    *until_ns = q->win_until;
    pthread_mutex_unlock(&q->lock);
    return on;
}

void hearth_frame_queue_get_stats(hearth_frame_queue *q, hearth_frame_queue_stats *out)
{
    pthread_mutex_lock(&q->lock);
    *out = q->st;
    out->queued = q->n_queued;
    out->run_ns_expected = q->expected_ns;
    pthread_mutex_unlock(&q->lock);
}
